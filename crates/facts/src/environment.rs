//! Every environment variable of nccl-perf's own that the benchmarks read, defined once: the
//! code reads each through its definition here, and the man pages and the documentation list
//! them from here (the benchmark core re-exports this module as `nccl_perf_bench::environment`).
//! The launchers' variables (Slurm, torchrun, OpenMPI, PMI) are theirs; the bootstrap crate
//! reads them (`crates/bootstrap/src/launch.rs`), and [`LAUNCHERS`] documents them.

/// Who a variable is documented for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// Users: in the man pages and the documentation.
    User,
    /// Developers: test hooks and profiling, documented in `docs/contributing.md` only.
    Developer,
}

/// One environment variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variable {
    /// Its name.
    pub name: &'static str,
    /// What it does, in one or two sentences.
    pub help: &'static str,
    /// The one benchmark that reads it (`alltoallv`), or `None` for all of them.
    pub only: Option<&'static str>,
    /// Who it is documented for.
    pub audience: Audience,
}

impl Variable {
    /// Its value in this process, when set and UTF-8.
    pub fn get(&self) -> Option<String> {
        std::env::var(self.name).ok()
    }
}

const fn user(name: &'static str, help: &'static str) -> Variable {
    Variable {
        name,
        help,
        only: None,
        audience: Audience::User,
    }
}

const fn alltoallv(name: &'static str, help: &'static str) -> Variable {
    Variable {
        name,
        help,
        only: Some("alltoallv"),
        audience: Audience::User,
    }
}

/// `NCCL_TESTS_DEVICE`.
pub const TESTS_DEVICE: Variable = user(
    "NCCL_TESTS_DEVICE",
    "First GPU of each process, overriding the placement by local rank.",
);
/// `NCCL_TESTS_MIN_BW`.
pub const TESTS_MIN_BW: Variable = user(
    "NCCL_TESTS_MIN_BW",
    "Exit 7 when the average bus bandwidth is below 0.9 times this many GB/s.",
);
/// `NCCL_TESTS_SPLIT`.
pub const TESTS_SPLIT: Variable = user(
    "NCCL_TESTS_SPLIT",
    "Split the ranks into groups with communicators of their own: the world rank combined with a value (\"MOD 8\", \"DIV 8\", \"AND 0x7\", \"OR 1\").",
);
/// `NCCL_TESTS_SPLIT_MASK`.
pub const TESTS_SPLIT_MASK: Variable = user(
    "NCCL_TESTS_SPLIT_MASK",
    "Split the ranks into groups by world rank AND this hexadecimal mask (0x7); wins over NCCL_TESTS_SPLIT.",
);
/// `NCCL_PERF_BOOTSTRAP`.
pub const BOOTSTRAP: Variable = user(
    "NCCL_PERF_BOOTSTRAP",
    "How the processes of a job meet: mpi, mpilib, pmi, pmi2, pmix, env, single, or auto (the default: MPI when built with it and started by an MPI launcher, else the launcher's PMIx or PMI-1 wire-up to start a TCP rendezvous, else under PALS its PMI-2 library, else the MPI library the launcher came with, opened at run time to start it, else the launcher's environment, else one process).",
);
/// `NCCL_PERF_RENDEZVOUS`.
pub const RENDEZVOUS: Variable = user(
    "NCCL_PERF_RENDEZVOUS",
    "host:port of the TCP rendezvous at rank 0, overriding the launcher's address and its PMI/PMIx wire-up.",
);
/// `NCCL_PERF_PMIX_LIB`.
pub const PMIX_LIB: Variable = user(
    "NCCL_PERF_PMIX_LIB",
    "Path of libpmix.so.2 to start through PMIx (default: the loader's path, $OPAL_PREFIX/lib, the lib/ beside mpirun in PATH).",
);
/// `NCCL_PERF_PMI2_LIB`.
pub const PMI2_LIB: Variable = user(
    "NCCL_PERF_PMI2_LIB",
    "Path of the PMI-2 library to start through (Cray PMI's libpmi2.so under PALS, Slurm's libpmi2.so.0 under srun --mpi=pmi2 with NCCL_PERF_BOOTSTRAP=pmi2; default: the loader's path, then lib/ and lib64/ under $CRAY_PMI_PREFIX and /opt/cray/pe/pmi/default).",
);
/// `NCCL_PERF_MPI_LIB`.
pub const MPI_LIB: Variable = user(
    "NCCL_PERF_MPI_LIB",
    "Path of the MPI library to start through when the launcher's PMIx or PMI-1 cannot be reached (Open MPI's libmpi.so.40 or the MPICH ABI's libmpi.so.12; default: the loader's path, then lib/ under $OPAL_PREFIX, $MPI_HOME, $I_MPI_ROOT and beside mpirun/mpiexec in PATH).",
);
/// `NCCL_PERF_RENDEZVOUS_PORT`.
pub const RENDEZVOUS_PORT: Variable = user(
    "NCCL_PERF_RENDEZVOUS_PORT",
    "Port of the rendezvous at rank 0's launcher address (Slurm default: derived from the job and step ids; under a launcher's PMI/PMIx wire-up: a port the system picks).",
);
/// `NCCL_PERF_RENDEZVOUS_BIND`.
pub const RENDEZVOUS_BIND: Variable = user(
    "NCCL_PERF_RENDEZVOUS_BIND",
    "IP address rank 0 listens on when it is not the rendezvous address (0.0.0.0 for every interface).",
);
/// `NCCL_PERF_RENDEZVOUS_KEY`.
pub const RENDEZVOUS_KEY: Variable = user(
    "NCCL_PERF_RENDEZVOUS_KEY",
    "A secret every process of the job shares; rank 0 admits only processes that prove they know it.",
);
/// `NCCL_PERF_RENDEZVOUS_KEY_FILE`.
pub const RENDEZVOUS_KEY_FILE: Variable = user(
    "NCCL_PERF_RENDEZVOUS_KEY_FILE",
    "A file holding that secret (a mounted Kubernetes Secret, say), instead of NCCL_PERF_RENDEZVOUS_KEY.",
);
/// `NCCL_PERF_BOOTSTRAP_TIMEOUT`.
pub const BOOTSTRAP_TIMEOUT: Variable = user(
    "NCCL_PERF_BOOTSTRAP_TIMEOUT",
    "Seconds any wait for another process may take (default 120).",
);
/// `NCCL_PERF_HEARTBEAT_TIMEOUT`.
pub const HEARTBEAT_TIMEOUT: Variable = user(
    "NCCL_PERF_HEARTBEAT_TIMEOUT",
    "Seconds of silence after which a process of a TCP-rendezvous job is named as stopped (default 10; 0 turns the heartbeats off).",
);
/// `NCCL_PERF_LIBNCCL`.
pub const LIBNCCL: Variable = user(
    "NCCL_PERF_LIBNCCL",
    "Path of the NCCL library to load (default libnccl.so.2, then libnccl.so).",
);
/// `NCCL_PERF_INIT_ROOTS`.
pub const INIT_ROOTS: Variable = user(
    "NCCL_PERF_INIT_ROOTS",
    "How many NCCL unique ids (roots) communicators are created with: auto (default: one below 64 NCCL ranks, then one per 32 ranks, through ncclCommInitRankScalable from NCCL 2.23), or a number (1 is ncclCommInitRank's single root).",
);
/// `NCCL_PERF_CORRUPT`.
pub const CORRUPT: Variable = user(
    "NCCL_PERF_CORRUPT",
    "Validation self-test, <half>:<index>[:<rank>] (out:0): flips one received element after each validation operation, so the run must report #wrong 1 and exit 7.",
);
/// `NCCL_HOSTID`.
pub const HOSTID: Variable = user(
    "NCCL_HOSTID",
    "NCCL's host identity, read as NCCL reads it: processes with equal values are one host (local ranks, GPU placement, the two-ranks-on-one-GPU check).",
);
/// `CUDA_VISIBLE_DEVICES`.
pub const CUDA_VISIBLE_DEVICES: Variable = user(
    "CUDA_VISIBLE_DEVICES",
    "CUDA's list of visible GPUs; --dry-run counts GPUs from it without loading CUDA.",
);
/// `NCCL_TESTS_ALLTOALLV_SPREAD`.
pub const ALLTOALLV_SPREAD: Variable = alltoallv(
    "NCCL_TESTS_ALLTOALLV_SPREAD",
    "Share of generated traffic, 0 to 1 (default 1).",
);
/// `NCCL_TESTS_ALLTOALLV_MATRIX_FILE`.
pub const ALLTOALLV_MATRIX_FILE: Variable = alltoallv(
    "NCCL_TESTS_ALLTOALLV_MATRIX_FILE",
    "A square matrix of byte counts (row = sender), at least ranks x ranks; needs -b = -e at least the largest per-rank total.",
);
/// `NCCL_TESTS_ALLTOALLV_MATRIX_SCALE`.
pub const ALLTOALLV_MATRIX_SCALE: Variable = alltoallv(
    "NCCL_TESTS_ALLTOALLV_MATRIX_SCALE",
    "A factor applied to every value of the matrix.",
);
/// `NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY`.
pub const ALLTOALLV_PRINT_SUMMARY: Variable = alltoallv(
    "NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY",
    "nccl-tests' summary lines: not supported (a warning says so).",
);
/// `NCCL_PERF_TRACE`.
pub const TRACE: Variable = Variable {
    name: "NCCL_PERF_TRACE",
    help: "1: print on stderr when each start-up phase ended (profiling).",
    only: None,
    audience: Audience::Developer,
};
/// `NCCL_PERF_TEST_STALL_MS` (read only in builds with the `test-hooks` feature).
pub const TEST_STALL_MS: Variable = Variable {
    name: "NCCL_PERF_TEST_STALL_MS",
    help: "Test hook (feature test-hooks): holds every stream for this many milliseconds once, just before the first timed loop (the -T timeout path on a healthy GPU).",
    only: None,
    audience: Audience::Developer,
};
/// `NCCL_PERF_TEST_HOST_STOP_OP` (read only in builds with the `test-hooks` feature).
pub const TEST_HOST_STOP_OP: Variable = Variable {
    name: "NCCL_PERF_TEST_HOST_STOP_OP",
    help: "Test hook (feature test-hooks): the benchmark thread stops before enqueuing this operation of the run (1 = the first), its heartbeats going on (the hang watch's tests).",
    only: None,
    audience: Audience::Developer,
};
/// `NCCL_PERF_TEST_PAUSE_MS` (read only in builds with the `test-hooks` feature).
pub const TEST_PAUSE_MS: Variable = Variable {
    name: "NCCL_PERF_TEST_PAUSE_MS",
    help: "Test hook (feature test-hooks): every process waits this many milliseconds after the bootstrap, as if busy on its GPUs (rank-fault tests).",
    only: None,
    audience: Audience::Developer,
};

/// `NCCL_PERF_TEST_SLOW` (read only in builds with the `test-hooks` feature).
pub const TEST_SLOW: Variable = Variable {
    name: "NCCL_PERF_TEST_SLOW",
    help: "Test hook (feature test-hooks): --health judges this collective slow whatever it measured, so that --health --locate can be exercised where no expected figure applies (one GPU, ranks posing as hosts).",
    only: None,
    audience: Audience::Developer,
};

/// Every variable above, in the order documentation lists them.
pub const VARIABLES: &[Variable] = &[
    TESTS_DEVICE,
    TESTS_MIN_BW,
    TESTS_SPLIT,
    TESTS_SPLIT_MASK,
    BOOTSTRAP,
    RENDEZVOUS,
    PMIX_LIB,
    PMI2_LIB,
    MPI_LIB,
    RENDEZVOUS_PORT,
    RENDEZVOUS_BIND,
    RENDEZVOUS_KEY,
    RENDEZVOUS_KEY_FILE,
    BOOTSTRAP_TIMEOUT,
    HEARTBEAT_TIMEOUT,
    LIBNCCL,
    INIT_ROOTS,
    CORRUPT,
    HOSTID,
    CUDA_VISIBLE_DEVICES,
    ALLTOALLV_SPREAD,
    ALLTOALLV_MATRIX_FILE,
    ALLTOALLV_MATRIX_SCALE,
    ALLTOALLV_PRINT_SUMMARY,
    TRACE,
    TEST_STALL_MS,
    TEST_HOST_STOP_OP,
    TEST_PAUSE_MS,
    TEST_SLOW,
];

/// The variables that shape the bootstrap or the run the same way in every process: each is
/// an item of the launch check (bench's `options/fingerprint.rs`), so a process whose value
/// differs from rank 0's stops the launch (dry run and real) instead of calling another
/// bootstrap collective (`NCCL_PERF_INIT_ROOTS`), forming other groups (`NCCL_TESTS_SPLIT`),
/// falling silent (`NCCL_PERF_HEARTBEAT_TIMEOUT=0`) or sending other counts (alltoallv's).
/// `NCCL_TESTS_ALLTOALLV_MATRIX_FILE` counts by its content (the path may differ by node).
pub const LAUNCH_WIDE: &[Variable] = &[
    TESTS_MIN_BW,
    TESTS_SPLIT,
    TESTS_SPLIT_MASK,
    HEARTBEAT_TIMEOUT,
    INIT_ROOTS,
    CORRUPT,
    ALLTOALLV_SPREAD,
    ALLTOALLV_MATRIX_FILE,
    ALLTOALLV_MATRIX_SCALE,
];

/// The variables each process may set its own way, each with the reason: where it meets or
/// what it loads (paths and addresses differ by node), its own identity and GPUs, its own
/// waits, secrets (checked by the rendezvous itself and never sent), and test hooks. Every
/// variable of [`VARIABLES`] is in exactly one of this list and [`LAUNCH_WIDE`] (a test says
/// so), so a new variable is placed on purpose.
pub const PER_PROCESS: &[(Variable, &str)] = &[
    (TESTS_DEVICE, "this process' first GPU"),
    (
        BOOTSTRAP,
        "how this process meets; processes that differ do not meet",
    ),
    (RENDEZVOUS, "where this process meets"),
    (PMIX_LIB, "a path on this node"),
    (PMI2_LIB, "a path on this node"),
    (MPI_LIB, "a path on this node"),
    (RENDEZVOUS_PORT, "where this process meets"),
    (RENDEZVOUS_BIND, "an address of this node"),
    (
        RENDEZVOUS_KEY,
        "a secret: proved by the rendezvous itself, never sent",
    ),
    (
        RENDEZVOUS_KEY_FILE,
        "a secret's path on this node: proved by the rendezvous itself",
    ),
    (BOOTSTRAP_TIMEOUT, "this process' own waits"),
    (LIBNCCL, "a path on this node"),
    (HOSTID, "this process' host identity"),
    (CUDA_VISIBLE_DEVICES, "this process' GPUs"),
    (
        ALLTOALLV_PRINT_SUMMARY,
        "not supported: a warning, nothing else",
    ),
    (TRACE, "this process' own profiling lines"),
    (TEST_STALL_MS, "a test hook, set per process on purpose"),
    (TEST_HOST_STOP_OP, "a test hook, set per process on purpose"),
    (TEST_PAUSE_MS, "a test hook, set per process on purpose"),
    (TEST_SLOW, "a test hook"),
];

/// The launchers' variables the bootstrap reads, by launcher: (names, what they give).
pub const LAUNCHERS: &[(&[&str], &str)] = &[
    (
        &[
            "RANK",
            "WORLD_SIZE",
            "LOCAL_RANK",
            "MASTER_ADDR",
            "MASTER_PORT",
            "JOB_COMPLETION_INDEX",
        ],
        "torchrun and Kubernetes (Indexed Job) ranks and rendezvous address.",
    ),
    (
        &[
            "SLURM_PROCID",
            "SLURM_STEP_NUM_TASKS",
            "SLURM_LOCALID",
            "SLURM_STEP_NODELIST",
        ],
        "Slurm ranks under srun without --mpi; rank 0 is on the step's first node.",
    ),
    (
        &[
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_LOCAL_RANK",
            "PMIX_RANK",
            "PMI_RANK",
            "PMI_SIZE",
        ],
        "MPI launchers (mpirun, srun --mpi=pmix).",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn every_variable_is_launch_wide_or_per_process_once() {
        for v in VARIABLES {
            let wide = LAUNCH_WIDE.iter().filter(|w| w.name == v.name).count();
            let own = PER_PROCESS.iter().filter(|(p, _)| p.name == v.name).count();
            assert_eq!(
                wide + own,
                1,
                "{}: in LAUNCH_WIDE {wide}, PER_PROCESS {own}",
                v.name
            );
        }
        assert_eq!(LAUNCH_WIDE.len() + PER_PROCESS.len(), VARIABLES.len());
    }

    #[test]
    fn names_are_unique() {
        for (i, v) in VARIABLES.iter().enumerate() {
            assert!(
                VARIABLES[..i].iter().all(|w| w.name != v.name),
                "{}",
                v.name
            );
        }
    }

    #[test]
    fn launcher_variables_are_the_ones_the_bootstrap_reads() {
        let launch = include_str!("../../bootstrap/src/launch.rs");
        for name in LAUNCHERS.iter().flat_map(|(names, _)| names.iter()) {
            assert!(launch.contains(&format!("\"{name}\"")), "{name}");
        }
    }

    /// Every `"NCCL_TESTS_..."` or `"NCCL_PERF_..."` string that is just a variable's name is
    /// defined here: code elsewhere reads variables through these definitions.
    #[test]
    fn no_variable_name_is_spelled_outside_this_file() {
        fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        // Every crate of the workspace (crates/*) and the programs (src/bin at the root).
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        walk(&here.join(".."), &mut files);
        walk(&here.join("../../src"), &mut files);
        assert!(files.iter().any(|f| f.ends_with("bootstrap/src/launch.rs")));
        let mut found = Vec::new();
        let tests =
            |f: &Path| f.ends_with("tests.rs") || f.components().any(|c| c.as_os_str() == "tests");
        for f in files
            .iter()
            .filter(|f| !f.ends_with("environment.rs") && !tests(f))
        {
            let text = std::fs::read_to_string(f).unwrap();
            let text = text.split("#[cfg(test)]\nmod tests {").next().unwrap_or("");
            for piece in text.split('"').skip(1).step_by(2) {
                let name_like = piece
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
                if name_like
                    && (piece.starts_with("NCCL_TESTS_") || piece.starts_with("NCCL_PERF_"))
                {
                    found.push(format!("{}: \"{piece}\"", f.display()));
                }
            }
        }
        assert!(
            found.is_empty(),
            "read through nccl_perf_facts::environment instead: {found:#?}"
        );
    }
}
