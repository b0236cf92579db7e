//! Which launcher wire-up (engine) a launch offers, read from its environment like the rest of
//! `launch`; the engines themselves are `engine/`.

use super::{Env, TcpLaunch};

/// Which engine a launch uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The PMI-1 wire protocol (`PMI_FD` or `PMI_PORT`).
    Pmi1,
    /// PMIx through `libpmix.so.2` (`PMIX_RANK`, `PMIX_NAMESPACE`); where that library is
    /// missing under an MPI launcher, the MPI library.
    Pmix,
    /// A PMI-2 library opened at run time (Cray PMI's `libpmi2.so` under PALS: `PALS_RANKID`
    /// without a PMIx or PMI-1 wire-up, or `NCCL_PERF_BOOTSTRAP=pmi2`); where that library is
    /// missing under an MPI launcher, the MPI library.
    Pmi2Lib,
    /// The launcher's MPI library opened at run time (an MPI launcher's variables without a
    /// PMIx or PMI-1 we reach, or `NCCL_PERF_BOOTSTRAP=mpilib`).
    MpiLib,
}

impl Kind {
    /// The engine the environment offers, PMIx first (Open MPI's mpirun and Slurm's
    /// `--mpi=pmix` set no PMI-1 variables; a launcher that sets both serves both), then
    /// PMI-1's wire, then PALS' PMI-2 library, then an MPI launcher's library.
    pub fn from_env(env: Env) -> Option<Kind> {
        if env("PMIX_RANK").is_some() && env("PMIX_NAMESPACE").is_some() {
            Some(Kind::Pmix)
        } else if env("PMI_FD").is_some() || env("PMI_PORT").is_some() {
            Some(Kind::Pmi1)
        } else if pals(env) {
            Some(Kind::Pmi2Lib)
        } else if mpi_marker(env).is_some() {
            Some(Kind::MpiLib)
        } else {
            None
        }
    }
}

/// Whether Cray's PALS started this process (`aprun`, PALS' `mpiexec`): its rank variable.
pub fn pals(env: Env) -> bool {
    env("PALS_RANKID").is_some()
}

/// The variable that says an MPI launcher started this process, if one does: Open MPI's
/// `OMPI_COMM_WORLD_SIZE`, `PMI_RANK`/`PMI_SIZE` without `PMI_FD`/`PMI_PORT` (Cray MPICH,
/// Intel MPI), PALS' `PALS_RANKID`, Hydra's `MPI_LOCALRANKID`.
pub fn mpi_marker(env: Env) -> Option<&'static str> {
    let pmi_without_wire =
        env("PMI_RANK").is_some() && env("PMI_FD").is_none() && env("PMI_PORT").is_none();
    if env("OMPI_COMM_WORLD_SIZE").is_some() {
        Some("OMPI_COMM_WORLD_SIZE")
    } else if pmi_without_wire && env("PMI_SIZE").is_some() {
        Some("PMI_RANK")
    } else {
        ["PALS_RANKID", "MPI_LOCALRANKID"]
            .into_iter()
            .find(|v| env(v).is_some())
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
        "PALS_LOCAL_RANKID",
        "SLURM_LOCALID",
    ]
    .iter()
    .find_map(|v| env(v)?.trim().parse().ok())
}
