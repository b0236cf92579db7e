//! Arguments that are not UTF-8, parsing lenient where real scripts depend on it, and hostile
//! environments.

use super::{Case, Expect, On, bytes, case, raw, with_env};
use std::path::Path;

/// Not UTF-8.
pub(super) fn arguments_not_utf8(_tmp: &Path) -> Vec<Case> {
    use Expect::*;
    vec![
        raw(
            "type not UTF-8",
            vec!["-d".into(), bytes(b"\xff\xfe")],
            Args("the value of -d (--datatype) is not valid UTF-8"),
        ),
        raw(
            "size not UTF-8",
            vec!["-b".into(), bytes(b"8\xff")],
            Args("the value of -b (--minbytes) is not valid UTF-8"),
        ),
        raw(
            "option name not UTF-8",
            vec![bytes(b"--\xff")],
            Args("unknown option"),
        ),
        raw(
            "stray word not UTF-8",
            vec![
                "-b".into(),
                "8".into(),
                "-e".into(),
                "8".into(),
                bytes(b"\xff"),
            ],
            Gpu(Some("ignoring stray argument")),
        ),
    ]
}

/// Lenient where real scripts depend on it: warn, then run.
pub(super) fn lenient_parsing(_tmp: &Path) -> Vec<Case> {
    use Expect::*;
    use On::*;
    vec![
        case(
            "health checker -w 50--iters",
            &["-b", "8", "-e", "8", "-w", "50--iters", "100"],
            AllReduce,
            Gpu(Some("-w (--warmup_iters) '50--iters' read as 50")),
        ),
        case(
            "junk after a count",
            &["-b", "8", "-e", "8", "-n", "5x"],
            AllReduce,
            Gpu(Some("-n (--iters) '5x' read as 5")),
        ),
        case(
            "end of options",
            &["-b", "8", "-e", "8", "--", "-n", "5"],
            AllReduce,
            Gpu(Some("ignoring stray argument '-n'")),
        ),
        case(
            "zero bytes (nccl-tests hangs)",
            &["-b", "0", "-e", "0"],
            Every,
            Gpu(None),
        ),
    ]
}

/// Hostile environments.
pub(super) fn hostile_environments(_tmp: &Path) -> Vec<Case> {
    use Expect::*;
    vec![
        with_env(
            "bad bootstrap choice",
            &["--dry-run"],
            &[("NCCL_PERF_BOOTSTRAP", "bogus")],
            Args(
                "NCCL_PERF_BOOTSTRAP='bogus' is not one of auto, mpi, mpilib, pmi, pmi2, pmix, env, single",
            ),
        ),
        with_env(
            "bad bootstrap timeout",
            &["--dry-run"],
            &[
                ("NCCL_PERF_BOOTSTRAP_TIMEOUT", "abc"),
                ("RANK", "0"),
                ("WORLD_SIZE", "2"),
                ("MASTER_ADDR", "127.0.0.1"),
            ],
            Args("NCCL_PERF_BOOTSTRAP_TIMEOUT='abc'"),
        ),
        with_env(
            "bad world size",
            &["--dry-run"],
            &[
                ("RANK", "0"),
                ("WORLD_SIZE", "abc"),
                ("MASTER_ADDR", "127.0.0.1"),
            ],
            Args("WORLD_SIZE='abc'"),
        ),
        with_env(
            "rank beyond the world",
            &["--dry-run"],
            &[
                ("RANK", "5"),
                ("WORLD_SIZE", "2"),
                ("MASTER_ADDR", "127.0.0.1"),
            ],
            Launch("rank 5 is not below the number of processes 2"),
        ),
        with_env(
            "an empty world",
            &["--dry-run"],
            &[
                ("RANK", "0"),
                ("WORLD_SIZE", "0"),
                ("MASTER_ADDR", "127.0.0.1"),
            ],
            Launch("the number of processes is 0 (it must be at least 1)"),
        ),
        with_env(
            "bad port",
            &["--dry-run"],
            &[
                ("RANK", "0"),
                ("WORLD_SIZE", "2"),
                ("MASTER_ADDR", "127.0.0.1"),
                ("MASTER_PORT", "99999"),
            ],
            Args("MASTER_PORT='99999' is not a port"),
        ),
        with_env(
            "bad rendezvous",
            &["--dry-run"],
            &[
                ("RANK", "1"),
                ("WORLD_SIZE", "2"),
                ("NCCL_PERF_RENDEZVOUS", "garbage"),
            ],
            Args("NCCL_PERF_RENDEZVOUS: 'garbage' is not host:port"),
        ),
        with_env(
            "bad device override",
            &["--dry-run"],
            &[("NCCL_TESTS_DEVICE", "abc")],
            Args("NCCL_TESTS_DEVICE='abc' is not a device index"),
        ),
        with_env(
            "bad self-test switch",
            &["-b", "8", "-e", "8"],
            &[("NCCL_PERF_CORRUPT", "sideways:1")],
            Args("NCCL_PERF_CORRUPT='sideways:1'"),
        ),
        with_env(
            "bad number of init roots",
            &["-b", "8", "-e", "8"],
            &[("NCCL_PERF_INIT_ROOTS", "0")],
            Args("NCCL_PERF_INIT_ROOTS='0' is neither auto nor a number of roots"),
        ),
    ]
}
