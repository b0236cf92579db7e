//! The one error type of a run, its exit codes (nccl-tests' `testResult_t` values) and how each
//! failure is reported: nccl-tests' greppable lines on stdout where it prints them, our own
//! one-line diagnostics on stderr otherwise.

use std::panic::Location;

/// Process exit codes, as nccl-tests uses them.
pub mod code {
    /// Success (also `-h`).
    pub const OK: u8 = 0;
    /// Internal error (bad alltoallv matrix, I/O problems).
    pub const INTERNAL: u8 = 1;
    /// A CUDA call failed, or the CUDA driver/NVRTC library is missing.
    pub const CUDA: u8 = 2;
    /// An NCCL call failed, or libnccl is missing.
    pub const NCCL: u8 = 3;
    /// `-T` timeout.
    pub const TIMEOUT: u8 = 4;
    /// Not implemented here: too few GPUs, an option this build lacks.
    pub const NOT_IMPLEMENTED: u8 = 5;
    /// Invalid usage (device API mismatches, wrong launches).
    pub const INVALID_USAGE: u8 = 6;
    /// Wrong data or bandwidth below `NCCL_TESTS_MIN_BW`.
    pub const NUM_RESULTS: u8 = 7;
    /// `--locate` named a suspect (ours: free in nccl-tests, whose codes are 0–7 and 255, and 8
    /// is left for the next code it may add).
    pub const SUSPECTS: u8 = nccl_perf_locate::EXIT_SUSPECTS;
    /// Argument errors.
    pub const ARGS: u8 = 255;
}

/// Everything that can end a run early.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// A bad command line or environment value.
    #[error("{0}")]
    Usage(String),
    /// A recognised option or combination this build does not implement.
    #[error("{0}")]
    Unsupported(String),
    /// A shared library could not be loaded or lacks a symbol.
    #[error("{what}")]
    Library {
        /// One line naming the library, what was tried and what to do.
        what: String,
        /// Exit code (CUDA or NCCL).
        code: u8,
    },
    /// A CUDA call failed.
    #[error("Test CUDA failure {}:{} '{msg}'", source_file(site.file()), site.line())]
    Cuda {
        /// Where in our code.
        site: &'static Location<'static>,
        /// The driver's error string.
        msg: String,
    },
    /// An NCCL call failed.
    #[error("Test NCCL failure {}:{} '{msg} / {last}'", source_file(site.file()), site.line())]
    Nccl {
        /// Where in our code.
        site: &'static Location<'static>,
        /// The `ncclResult_t` value.
        code: i32,
        /// `ncclGetErrorString` of the result.
        msg: String,
        /// `ncclGetLastError` text.
        last: String,
    },
    /// More GPUs requested than visible.
    #[error(
        "Invalid number of GPUs: {requested} requested but only {found} were found.\nPlease check the number of processes and GPUs per process."
    )]
    TooFewGpus {
        /// Highest device index needed + 1.
        requested: i64,
        /// Devices visible to this process.
        found: i64,
    },
    /// A wait exceeded `-T` seconds; the communicators were aborted.
    #[error("Test timeout ({secs}s) {}:{}{during}", source_file(site.file()), site.line())]
    Timeout {
        /// The `-T` value.
        secs: i64,
        /// Where in our code.
        site: &'static Location<'static>,
        /// What was running (filled in by the caller), e.g. " while running float sum 1024 B".
        during: String,
    },
    /// SIGINT or SIGTERM arrived; the communicators were aborted.
    #[error(
        "interrupted by {}{during}; communicators aborted",
        signal_name(*signal)
    )]
    Interrupted {
        /// The signal number.
        signal: i32,
        /// What was running (filled in by the caller), e.g. " while running float sum 1024 B".
        during: String,
    },
    /// This benchmark thread stopped because another thread of the process failed; that
    /// failure is the one reported.
    #[error("stopped: another thread of this process failed")]
    ThreadStopped,
    /// A panic (a bug), reported on stderr by the panic hook of the process that hit it; the run
    /// ends as after any failure (this text is what other processes are told).
    #[error("internal error (a bug in nccl-perf; its message is on that process' stderr)")]
    Panicked,
    /// Run-time compilation of the validation kernels failed.
    #[error("{0}")]
    Kernels(String),
    /// Anything else internal (I/O, inconsistent state).
    #[error("{0}")]
    Internal(String),
    /// A wrong launch: the launcher and this binary disagree, or GPUs are mapped wrongly.
    #[error("{0}")]
    Launch(String),
    /// A failure every process learnt of together (the processes' agreement on the launch,
    /// `placement::agree`: a wrong launch, too few GPUs): the job can end in order — each
    /// process says its own line and leaves as after a run (`MPI_Finalize`, not `MPI_Abort`
    /// and its banner). Reported and exiting as the failure it wraps.
    #[error("{0}")]
    Agreed(Box<Error>),
    /// The processes could not meet or one of them went missing.
    #[error("bootstrap: {msg}")]
    Bootstrap {
        /// What happened, naming the missing ranks (and hosts where known).
        msg: String,
        /// A wait ran out (exit code 4) rather than a connection being lost (exit code 1).
        timed_out: bool,
        /// The world ranks of the processes that left or fell silent, where this process knows
        /// them (rank 0 does; `--locate` names them as hung).
        lost: Vec<usize>,
    },
    /// A failure (an NCCL error, a `-T` timeout) that followed the loss of another process of
    /// the run: the failure is reported as usual, then the bootstrap's error naming the lost
    /// process, whose exit code the run ends with.
    #[error("{failure}")]
    AfterLostPeer {
        /// What this process saw.
        failure: Box<Error>,
        /// The bootstrap's error naming the process that left or fell silent.
        lost: Box<Error>,
    },
    /// A failure this process has said on stderr already (the bootstrap says it before asking
    /// the launcher to end the job, which may kill the process at once): it exits as the
    /// failure it wraps and reports nothing more.
    #[error("{0}")]
    Said(Box<Error>),
    /// A failure of the job that world rank 0 said once for every process: the causes the
    /// processes met, gathered at their agreement and grouped (`runner::causes`). Exits with
    /// the job's code (the highest of the causes') and reports nothing more.
    #[error("rank 0 said why the job stopped (see its error output)")]
    SaidByRankZero(u8),
}

impl Error {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) => code::ARGS,
            Error::Unsupported(_) | Error::TooFewGpus { .. } => code::NOT_IMPLEMENTED,
            Error::Library { code, .. } => *code,
            Error::Cuda { .. } | Error::Kernels(_) => code::CUDA,
            Error::Nccl { .. } => code::NCCL,
            Error::Timeout { .. } => code::TIMEOUT,
            Error::Internal(_) | Error::ThreadStopped | Error::Panicked => code::INTERNAL,
            Error::Launch(_) => code::INVALID_USAGE,
            Error::Agreed(e) => e.exit_code(),
            Error::Bootstrap {
                timed_out: true, ..
            } => code::TIMEOUT,
            Error::Bootstrap { .. } => code::INTERNAL,
            // The shell's convention: 128 + the signal (130 for SIGINT, 143 for SIGTERM).
            Error::Interrupted { signal, .. } => (128 + signal).clamp(1, 255) as u8,
            Error::AfterLostPeer { lost, .. } => lost.exit_code(),
            Error::Said(e) => e.exit_code(),
            Error::SaidByRankZero(code) => *code,
        }
    }

    /// True when this failure was said already (by this process or, for the job, by rank 0):
    /// [`Error::report`] prints nothing.
    pub fn said(&self) -> bool {
        match self {
            Error::Panicked | Error::Said(_) | Error::SaidByRankZero(_) => true,
            Error::Agreed(e) => e.said(),
            _ => false,
        }
    }

    /// True when nccl-tests prints this failure on stdout (tools grep for these lines).
    pub fn on_stdout(&self) -> bool {
        if let Error::AfterLostPeer { failure, .. } | Error::Agreed(failure) = self {
            return failure.on_stdout();
        }
        matches!(
            self,
            Error::Cuda { .. }
                | Error::Nccl { .. }
                | Error::TooFewGpus { .. }
                | Error::Timeout { .. }
        )
    }

    /// The lines to print: `<host>: Test ... failure ...` for CUDA/NCCL failures as nccl-tests
    /// prints them, launch and bootstrap problems prefixed with the host too (they come from
    /// many processes at once), nccl-tests' own texts (the GPU count check, its size errors)
    /// as they are, anything else prefixed with the program's name.
    pub fn render(&self, host: &str) -> String {
        match self {
            Error::Cuda { .. }
            | Error::Nccl { .. }
            | Error::Timeout { .. }
            | Error::Launch(_)
            | Error::Interrupted { .. }
            | Error::Bootstrap { .. } => {
                format!("{host}: {self}")
            }
            Error::AfterLostPeer { failure, .. }
            | Error::Agreed(failure)
            | Error::Said(failure) => failure.render(host),
            Error::TooFewGpus { .. } => self.to_string(),
            Error::Usage(m) if upstream_text(m) => self.to_string(),
            _ => format!("{}: {self}", crate::host::program()),
        }
    }

    /// Prints the failure the way nccl-tests does: CUDA/NCCL failure lines and the too-few-GPUs
    /// text on stdout followed by the ` .. <host> pid <pid>: Test failure` trace line; anything
    /// else as one line on stderr (and the lost process a failure followed). A panic was
    /// reported by the panic hook already.
    pub fn report(&self) {
        if self.said() {
            return;
        }
        let host = crate::host::short_hostname();
        if self.on_stdout() {
            println!("{}", self.render(&host));
            println!(
                " .. {host} pid {}: Test failure {}:{}",
                std::process::id(),
                source_file(file!()),
                line!()
            );
        } else {
            crate::eline!("{}", self.render(&host));
        }
        if let Error::AfterLostPeer { lost, .. } = self {
            crate::eline!("{}", lost.render(&host));
        }
    }

    /// NCCL's "invalid argument" result: the loaded NCCL rejects a datatype/op combination.
    pub fn is_nccl_invalid_argument(&self) -> bool {
        matches!(self, Error::Nccl { code: 4, .. })
    }

    /// Adds what was running to a timeout or interruption message.
    pub fn during(self, what: impl FnOnce() -> String) -> Error {
        match self {
            Error::Timeout { secs, site, .. } => Error::Timeout {
                secs,
                site,
                during: format!(" while running {}", what()),
            },
            Error::Interrupted { signal, .. } => Error::Interrupted {
                signal,
                during: format!(" while running {}", what()),
            },
            e => e,
        }
    }

    /// A failure that the loss of another process may explain: NCCL errors other than invalid
    /// arguments or usage (NCCL reports a dead peer as a system, internal or remote error) and
    /// `-T` timeouts.
    pub fn may_follow_a_lost_peer(&self) -> bool {
        match self {
            Error::Nccl { code, .. } => !matches!(code, 4 | 5),
            Error::Timeout { .. } => true,
            _ => false,
        }
    }

    /// A signal stopped the run.
    pub fn is_interrupted(&self) -> bool {
        matches!(self, Error::Interrupted { .. })
    }

    /// A CUDA failure at the caller's location.
    #[track_caller]
    pub fn cuda(msg: impl Into<String>) -> Error {
        Error::Cuda {
            site: Location::caller(),
            msg: msg.into(),
        }
    }
}

/// The bootstrap's failures, each as the variant of the same text (`Peers` is [`Error::Bootstrap`]).
impl From<crate::bootstrap::Error> for Error {
    fn from(e: crate::bootstrap::Error) -> Error {
        use crate::bootstrap::Error as B;
        match e {
            B::Usage(msg) => Error::Usage(msg),
            B::Launch(msg) => Error::Launch(msg),
            B::Internal(msg) => Error::Internal(msg),
            B::Peers {
                msg,
                timed_out,
                lost,
            } => Error::Bootstrap {
                msg,
                timed_out,
                lost,
            },
            B::Said(inner) => Error::Said(Box::new(Error::from(*inner))),
        }
    }
}

/// What the bootstrap is told of a failure of the run ([`crate::bootstrap::Bootstrap::fail`]).
impl crate::bootstrap::Failure for Error {
    fn exit_code(&self) -> u8 {
        Error::exit_code(self)
    }
    fn report(&self) {
        Error::report(self)
    }
}

/// Whether an argument error's text is nccl-tests' own (its size errors), printed without our
/// program prefix as nccl-tests prints it.
pub fn upstream_text(msg: &str) -> bool {
    msg.starts_with("invalid size specified for '") || msg.starts_with("invalid sizes for '")
}

/// A source file of this crate as failure lines print it: relative to the crate (`src/error.rs`),
/// as nccl-tests prints its own file names, wherever the workspace was built (`file!()` and
/// [`Location`] say `crates/bench/src/error.rs`, or an absolute path).
pub fn source_file(file: &str) -> &str {
    match file.find("crates/bench/src/") {
        Some(i) => &file[i + "crates/bench/".len()..],
        None => file,
    }
}

/// `SIGINT`, `SIGTERM`, or `signal N`, for messages.
pub fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        n => format!("signal {n}"),
    }
}

/// The result type of fallible run steps.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_after_a_lost_peer_prints_as_itself_and_exits_as_the_loss() {
        let nccl = |code| Error::Nccl {
            site: Location::caller(),
            code,
            msg: "remote process exited or there was a network error".into(),
            last: String::new(),
        };
        assert!(nccl(6).may_follow_a_lost_peer() && nccl(2).may_follow_a_lost_peer());
        assert!(
            !nccl(4).may_follow_a_lost_peer() && !Error::Usage("x".into()).may_follow_a_lost_peer()
        );
        let lost = |timed_out| Error::Bootstrap {
            msg: "rank 2 (pid 7 on n3) left the run".into(),
            timed_out,
            lost: vec![2],
        };
        let e = Error::AfterLostPeer {
            failure: Box::new(nccl(6)),
            lost: Box::new(lost(false)),
        };
        assert!(e.on_stdout());
        assert_eq!(e.render("n1"), nccl(6).render("n1"));
        assert!(e.render("n1").starts_with("n1: Test NCCL failure "));
        assert_eq!(e.exit_code(), 1);
        let stopped = Error::AfterLostPeer {
            failure: Box::new(nccl(6)),
            lost: Box::new(lost(true)),
        };
        assert_eq!(stopped.exit_code(), 4);
    }

    #[test]
    fn exit_codes_follow_nccl_tests() {
        assert_eq!(Error::Usage("x".into()).exit_code(), 255);
        assert_eq!(
            Error::cuda("no CUDA-capable device is detected").exit_code(),
            2
        );
        assert_eq!(
            Error::TooFewGpus {
                requested: 2,
                found: 1
            }
            .exit_code(),
            5
        );
        assert_eq!(Error::Internal("x".into()).exit_code(), 1);
        assert_eq!(Error::Launch("x".into()).exit_code(), 6);
        let agreed = |e: Error| Error::Agreed(Box::new(e));
        assert_eq!(agreed(Error::Launch("x".into())).exit_code(), 6);
        assert_eq!(agreed(Error::Launch("x".into())).render("h"), "h: x");
        let gpus = agreed(Error::TooFewGpus {
            requested: 2,
            found: 1,
        });
        assert_eq!(gpus.exit_code(), 5);
        assert!(gpus.on_stdout());
        let lost = |timed_out| Error::Bootstrap {
            msg: "rank 3 missing".into(),
            timed_out,
            lost: vec![3],
        };
        assert_eq!(lost(true).exit_code(), 4);
        assert_eq!(lost(false).exit_code(), 1);
        assert_eq!(lost(true).render("n2"), "n2: bootstrap: rank 3 missing");
        let t = Error::Timeout {
            secs: 5,
            site: Location::caller(),
            during: String::new(),
        }
        .during(|| "float sum 1024 B".into());
        assert_eq!(t.exit_code(), 4);
        let line = t.render("n1");
        assert!(
            line.starts_with("n1: Test timeout (5s) src/error.rs:"),
            "{line}"
        );
        assert!(line.ends_with(" while running float sum 1024 B"), "{line}");
        let i = Error::Interrupted {
            signal: 2,
            during: String::new(),
        }
        .during(|| "float sum 8 B (in-place)".into());
        assert_eq!(i.exit_code(), 130);
        assert!(i.is_interrupted() && !i.on_stdout());
        assert_eq!(
            i.render("n1"),
            "n1: interrupted by SIGINT while running float sum 8 B (in-place); communicators aborted"
        );
    }

    /// The bootstrap's failures keep their text and end with the codes they always had.
    #[test]
    fn bootstrap_failures_keep_their_text_and_codes() {
        use crate::bootstrap::Error as B;
        let lost = |timed_out| B::Peers {
            msg: "rank 3 missing".into(),
            timed_out,
            lost: vec![3],
        };
        for (b, code) in [
            (B::Usage("NCCL_PERF_BOOTSTRAP_TIMEOUT='x'".into()), 255),
            (B::Launch("no rendezvous address".into()), 6),
            (B::Internal("gather failed".into()), 1),
            (lost(true), 4),
            (lost(false), 1),
            (B::Said(Box::new(lost(true))), 4),
            (B::Said(Box::new(B::Launch("wrong launch".into()))), 6),
        ] {
            let text = b.to_string();
            let e = Error::from(b);
            assert_eq!((e.to_string(), e.exit_code()), (text, code));
        }
        assert!(matches!(
            Error::from(lost(true)),
            Error::Bootstrap { lost, .. } if lost == [3]
        ));
        assert_eq!(
            Error::from(lost(false)).render("n2"),
            "n2: bootstrap: rank 3 missing"
        );
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(libc::SIGINT), "SIGINT");
        assert_eq!(signal_name(libc::SIGTERM), "SIGTERM");
        assert_eq!(signal_name(9), "signal 9");
    }

    #[test]
    fn failure_lines_have_upstream_shape() {
        let e = Error::cuda("out of memory");
        let line = e.render("node1");
        assert!(
            line.starts_with("node1: Test CUDA failure src/error.rs:"),
            "{line}"
        );
        assert!(line.ends_with(" 'out of memory'"));
        assert!(e.on_stdout());
        let e = Error::TooFewGpus {
            requested: 2,
            found: 1,
        };
        assert_eq!(
            e.render("vm"),
            "Invalid number of GPUs: 2 requested but only 1 were found.\nPlease check the number of processes and GPUs per process."
        );
    }
}
