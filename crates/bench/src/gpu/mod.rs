//! The GPU layer: everything that talks to the CUDA driver, NCCL and NVRTC, and the only module
//! with `unsafe` code. Three levels, in the style of cudarc:
//!
//! - *sys*: the raw entry points — cudarc's `driver::sys` and `nvrtc::sys`, and our NCCL loader's
//!   function table ([`nccl::Nccl`], which never unloads libnccl).
//! - *result*: each call checked and turned into an [`Error`](crate::error::Error) —
//!   [`driver`] (an `unsafe fn` wherever a raw handle or device address goes in) and
//!   [`nccl::Nccl::check`].
//! - *safe*: owned types released by `Drop` and checked device ranges — [`device`] (context,
//!   stream, device memory, timing events, graphs), [`comm`] (communicators, registration,
//!   groups), [`rank`] (one GPU's resources and their teardown order), [`op`] (the bound NCCL
//!   calls of the timed loop), [`kernels`] and [`kernel_image`] (the validation kernels).
//!
//! The rest of the crate calls only the safe level.
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod comm;
pub mod device;
pub mod driver;
pub mod kernel_image;
pub mod kernels;
pub mod nccl;
pub mod op;
pub mod plugins;
pub mod ptx;
pub mod rank;

pub use comm::{Communicator, Progress, Register, Split};
pub use device::{Context, DeviceBuffer, Span, Stream};
pub use rank::{BufferSizes, Gpu};
