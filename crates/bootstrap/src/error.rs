//! Why the processes of a run could not meet or stay together. The benchmark core turns each
//! variant into its own error of the same name (`Peers` into its `Bootstrap`), with the same
//! text, and gives it its exit code there.

/// Everything the bootstrap can fail with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// A bad environment value (`NCCL_PERF_BOOTSTRAP_TIMEOUT=x`, `NCCL_TESTS_SPLIT=MOD 0`).
    #[error("{0}")]
    Usage(String),
    /// A wrong launch: the launcher and this binary disagree (no rendezvous address, a rank
    /// out of range, an MPI launch of a binary without MPI, processes running different things).
    #[error("{0}")]
    Launch(String),
    /// Anything else internal (a socket that cannot be set up, a failed thread, MPI's state).
    #[error("{0}")]
    Internal(String),
    /// The processes could not meet or one of them went missing.
    #[error("bootstrap: {msg}")]
    Peers {
        /// What happened, naming the missing ranks (and hosts where known).
        msg: String,
        /// A wait ran out rather than a connection being lost.
        timed_out: bool,
        /// The world ranks of the processes that left or fell silent, where this process knows
        /// them (rank 0 does).
        lost: Vec<usize>,
    },
    /// An error this process has said on stderr already (before asking the launcher to end the
    /// job, which may kill it at once): whoever ends the process with it says nothing more.
    #[error("{0}")]
    Said(Box<Error>),
}

impl Error {
    /// The error itself, whether said already or not.
    pub fn inner(&self) -> &Error {
        match self {
            Error::Said(e) => e.inner(),
            e => e,
        }
    }
}

/// The result type of the bootstrap's steps.
pub type Result<T> = std::result::Result<T, Error>;

/// A failure of this process after the bootstrap, as [`crate::Bootstrap::fail`] gets it: its
/// text (`Display`, what the other processes are told), its exit code and how it is reported
/// (MPI reports it before it aborts the job with that code).
pub trait Failure: std::fmt::Display {
    /// The exit code the run ends with.
    fn exit_code(&self) -> u8;
    /// Prints the failure where the run prints its failures.
    fn report(&self);
}
