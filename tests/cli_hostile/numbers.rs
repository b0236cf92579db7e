//! Numbers: sizes (empty, bad suffixes, overflow, negative, not numbers, endless sweeps),
//! counts, and GPU and thread counts.

use super::{Case, Expect, On, case};
use std::path::Path;

/// Sizes: empty, bad suffixes, overflow, negative, not numbers, endless sweeps.
pub(super) fn sizes(_tmp: &Path) -> Vec<Case> {
    use Expect::*;
    use On::*;
    vec![
        case(
            "empty -b",
            &["-b", ""],
            Every,
            Args("invalid size specified for 'minbytes': '' is not a number"),
        ),
        case(
            "empty -e",
            &["-e", ""],
            AllReduce,
            Args("invalid size specified for 'maxbytes'"),
        ),
        case(
            "empty -i",
            &["-i", ""],
            AllReduce,
            Args("invalid size specified for 'stepBytes'"),
        ),
        case(
            "suffix T",
            &["-b", "1T"],
            Every,
            Args("unknown size suffix 'T' in '1T'"),
        ),
        case(
            "suffix X",
            &["-e", "8X"],
            AllReduce,
            Args("unknown size suffix 'X'"),
        ),
        case(
            "hex size",
            &["-b", "0x10"],
            AllReduce,
            Args("unknown size suffix 'x'"),
        ),
        case(
            "size overflow",
            &["-e", "99999999999G"],
            Every,
            Args("'99999999999G' is too large"),
        ),
        case(
            "size exponent overflow",
            &["-e", "1e400"],
            AllReduce,
            Args("'1e400' is too large"),
        ),
        case(
            "negative size",
            &["-b", "-1"],
            AllReduce,
            Args("'-1' is negative"),
        ),
        case(
            "negative fraction",
            &["-e", "-0.5K"],
            AllReduce,
            Args("'-0.5K' is negative"),
        ),
        case(
            "size word",
            &["-b", "abc"],
            AllReduce,
            Args("'abc' is not a number"),
        ),
        case(
            "size nan",
            &["-e", "nan"],
            AllReduce,
            Args("'nan' is not a number"),
        ),
        case(
            "size inf",
            &["-e", "inf"],
            AllReduce,
            Args("'inf' is not a number"),
        ),
        case(
            "min above max",
            &["-b", "1G", "-e", "1M"],
            Every,
            Args("invalid sizes for 'minbytes' and 'maxbytes': 1073741824 > 1048576"),
        ),
        case(
            "zero start with factor",
            &["-b", "0", "-e", "1M", "-f", "2"],
            Every,
            Args("never grows"),
        ),
        case(
            "zero additive step",
            &["-b", "8", "-e", "1M", "-i", "0"],
            AllReduce,
            Args("never reaches"),
        ),
    ]
}

/// Counts: zero, negative, overflow, junk.
pub(super) fn counts(_tmp: &Path) -> Vec<Case> {
    use Expect::*;
    use On::*;
    vec![
        case(
            "zero iterations",
            &["-n", "0"],
            Every,
            Args("invalid value 0 for -n (--iters): must be at least 1"),
        ),
        case(
            "negative iterations",
            &["-n", "-5"],
            AllReduce,
            Args("-n (--iters)"),
        ),
        case(
            "iterations word",
            &["-n", "abc"],
            AllReduce,
            Args("invalid value 'abc' for -n (--iters): not a number"),
        ),
        case(
            "iterations empty",
            &["-n", ""],
            AllReduce,
            Args("not a number"),
        ),
        case(
            "iterations overflow",
            &["-n", "99999999999"],
            AllReduce,
            Args("out of range"),
        ),
        case(
            "iterations 0x",
            &["-n", "0x"],
            AllReduce,
            Args("must be at least 1"),
        ),
        case(
            "negative warmup",
            &["-w", "-1"],
            AllReduce,
            Args("-w (--warmup_iters)"),
        ),
        case(
            "zero aggregation",
            &["-m", "0"],
            AllReduce,
            Args("-m (--agg_iters)"),
        ),
        case(
            "negative check",
            &["-c", "-1"],
            AllReduce,
            Args("-c (--check)"),
        ),
        case(
            "negative timeout",
            &["-T", "-1"],
            AllReduce,
            Args("-T (--timeout)"),
        ),
        case(
            "bad average",
            &["-a", "9"],
            AllReduce,
            Args("-a (--average)"),
        ),
    ]
}

/// GPUs and threads: zero, negative, absurd.
pub(super) fn gpus_and_threads(_tmp: &Path) -> Vec<Case> {
    use Expect::*;
    use On::*;
    vec![
        case(
            "zero GPUs",
            &["-g", "0"],
            Every,
            Args("invalid value 0 for -g (--ngpus)"),
        ),
        case(
            "zero threads",
            &["-t", "0"],
            AllReduce,
            Args("-t (--nthreads)"),
        ),
        case(
            "negative threads",
            &["-t", "-1"],
            AllReduce,
            Args("-t (--nthreads)"),
        ),
        case(
            "threads overflow",
            &["-t", "99999999999"],
            AllReduce,
            Args("out of range"),
        ),
        case(
            "GPUs beyond any machine",
            &["-g", "2000000"],
            Every,
            Unsupported("GPUs per process: more than nccl-perf can drive"),
        ),
        case(
            "threads x GPUs overflow",
            &["-t", "2147483647", "-g", "2147483647"],
            AllReduce,
            Unsupported("-t 2147483647 x -g 2147483647"),
        ),
        case(
            "absurd -g reaches the GPU count check",
            &["-g", "100000", "-b", "8", "-e", "8"],
            AllReduce,
            Gpu(None),
        ),
    ]
}
