//! Which launcher wire-up (engine) a launch offers, read from its environment like the rest of
//! `launch`; the engines themselves are `engine/`.

use super::{Env, TcpLaunch};

/// Which engine a launch uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The PMI-1 wire protocol (`PMI_FD` or `PMI_PORT`).
    Pmi1,
    /// PMIx through `libpmix.so.2` (`PMIX_RANK`, `PMIX_NAMESPACE`).
    Pmix,
}

impl Kind {
    /// The engine the environment offers, PMIx first (Open MPI's mpirun and Slurm's
    /// `--mpi=pmix` set no PMI-1 variables; a launcher that sets both serves both).
    pub fn from_env(env: Env) -> Option<Kind> {
        if env("PMIX_RANK").is_some() && env("PMIX_NAMESPACE").is_some() {
            Some(Kind::Pmix)
        } else if env("PMI_FD").is_some() || env("PMI_PORT").is_some() {
            Some(Kind::Pmi1)
        } else {
            None
        }
    }
}

/// A launch that starts through an engine.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineLaunch {
    /// The engine.
    pub kind: Kind,
    /// The rendezvous settings rank, size, address and job identity are filled in from the
    /// engine (`launcher`, `secret`, `bind`, `timeout`, `silence`, `local_rank` come from here).
    pub base: TcpLaunch,
    /// The launcher's own way to meet (Slurm's node list and derived port), used when the
    /// engine cannot be opened (its library is not there, or it does not start).
    pub fallback: Option<TcpLaunch>,
}

/// The local rank the launcher's environment gives, if any.
pub fn env_local_rank(env: Env) -> Option<usize> {
    [
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "MPI_LOCALRANKID",
        "SLURM_LOCALID",
    ]
    .iter()
    .find_map(|v| env(v)?.trim().parse().ok())
}
