//! Why a command of the `nccl-perf` tool failed (printed as `nccl-perf: <error>`, exit 2).

use nccl_perf_report::run::ReadError;

/// A failed `nccl-perf` command.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// A file that cannot be read as an nccl-tests log or JSON file.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A file, folder or stream that cannot be written (`standard output` for the stream).
    #[error("{path}: {source}")]
    Write {
        /// What was written.
        path: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// An image that cannot be drawn into its file.
    #[error("{path}: {message}")]
    Draw {
        /// The image file.
        path: String,
        /// What the drawing library said.
        message: String,
    },
    /// A command line the command refuses (a value, a program name, a file name).
    #[error("{0}")]
    Usage(String),
    /// An input run that cannot be trusted where a known-good one is needed (exit 3).
    #[error("{0}")]
    Broken(String),
    /// Inputs that give nothing to plot or compare.
    #[error("{0}")]
    NoData(String),
    /// A completion script or man page that cannot be generated.
    #[error("{0}")]
    Generate(String),
    /// A locate record that cannot be read.
    #[error("{path}: {source}")]
    LocateRecord {
        /// The file.
        path: String,
        /// Why not.
        source: nccl_perf_locate::json::ReadError,
    },
    /// A locate record that cannot be drawn.
    #[error(transparent)]
    LocatePlot(#[from] crate::locate_plot::PlotError),
}
