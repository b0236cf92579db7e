//! The C side of the plugins, the crate's one module allowed `unsafe_code`: the C layout of
//! NCCL's plugin tables ([`abi`]; NCCL 2.23–2.26's profiler in [`abi_v1_v3`]), the tables the
//! programs export and NCCL calls through raw pointers ([`profiler`], [`profiler_v1_v3`],
//! [`tuner`]), a configured tuner loaded and called behind ours ([`chain`]), the process
//! environment and `dlopen` probes that point NCCL at them ([`install`]), and the recording
//! window that sets NCCL's activation masks ([`window`]). Every `unsafe` block says why it
//! holds (`// SAFETY:`); what the plugins record is kept by the safe [`store`](crate::store),
//! below all of them: the store imports nothing of this module.

pub mod abi;
pub mod abi_v1_v3;
pub mod chain;
pub mod install;
pub mod profiler;
pub mod profiler_v1_v3;
pub mod tuner;
pub mod window;
