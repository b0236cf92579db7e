//! The line readers behind logs as people paste them: a row's shape without its header, a
//! trimmed header, crash lines and the command a line names.

use super::lines::{Columns, columns_of_row, command_program, failure_weight, is_crash, row};

#[test]
fn a_row_alone_gives_its_layout() {
    let v2_13 = "        1024           256     float     sum      -1     7.87    0.13    0.00       0     0.44    2.33    0.00       0";
    assert_eq!(columns_of_row(v2_13), Some(Columns::default()));
    // Older layouts: no redop and no root (all_gather), root without redop (broadcast), the
    // `error` column (a fraction) for #wrong.
    let old = "        8192           256   float    34.76    0.24    0.21    N/A    35.03    0.23    0.20    N/A";
    let c = columns_of_row(old).unwrap_or_else(|| panic!("not a row"));
    assert!(!c.redop && !c.root && !c.error);
    let rooted = "   1048576    262144   float     0    72.9   14.37   14.37  0e+00    73.0   14.35   14.35  0e+00";
    let c = columns_of_row(rooted).unwrap_or_else(|| panic!("not a row"));
    assert!(c.root && c.error);
    // A root after a type: an empty op column before it (hypercube), read as op "".
    let hypercube = "          16             4     float              -1     7.60    0.00    0.00       0     0.19    0.00    0.00       0";
    let c = columns_of_row(hypercube).unwrap_or_else(|| panic!("not a row"));
    assert_eq!(c, Columns::default());
    let r = row(hypercube, &c, 20).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((r.op.as_str(), r.root), ("", -1));
    // `-I 1`: four more values a half.
    let per_iter = "  1048576  262144  float  sum  -1  9.25  113.37  0.00  0  8.1  9.9  9.8  2.1  3.45  303.68  0.00  0  3.1  3.9  3.8  4.2";
    let c = columns_of_row(per_iter).unwrap_or_else(|| panic!("not a row"));
    assert!(c.per_iter && c.root && c.redop && !c.error && !c.timestamps);
    let stamped = format!("{per_iter}  2026-12-02 12:57:44");
    let c = columns_of_row(&stamped).unwrap_or_else(|| panic!("not a row"));
    assert!(c.per_iter && c.timestamps);
    let r = row(&stamped, &c, 20).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.timestamp.as_deref(), Some("2026-12-02 12:57:44"));
    // No row: too few or too many fields, no datatype, words among the numbers.
    for line in [
        "           8             2     float     sum",
        "  8  2  3  4  5  6  7  8  9  10  11  12  13",
        "     8      2   float   sum   -1  fast  0.00  0.00  0  1.0  0.0  0.0  0",
        "  1 2 float sum -1 1 2 3 4 5 6 7 8 9 10",
        "ztan-mig-235z:6899:7012 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0]",
    ] {
        assert_eq!(columns_of_row(line), None, "{line}");
    }
}

#[test]
fn a_trimmed_header_reads_its_rows() {
    let c = Columns::from_names("#       size    count   type  redop   time  algbw  busbw #wrong");
    assert_eq!((c.halves, c.wrong, c.root), (1, true, false));
    let r = row("  1024  256  float  sum  7.87  0.13  0.00  0", &c, 20)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (r.root, r.out_of_place.time_us, r.out_of_place.wrong),
        (-1, 7.87, Some(0.0))
    );
    assert!(r.in_place.time_us.is_nan() && r.in_place.wrong.is_none());
    let c = Columns::from_names(
        "#  size  count  type  redop  root  time  algbw  busbw  time  algbw  busbw",
    );
    assert_eq!((c.halves, c.wrong), (2, false));
    let r = row(
        "1024 256 float sum -1 7.87 0.13 0.00 0.44 2.33 0.00",
        &c,
        20,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((r.in_place.algbw, r.in_place.wrong), (2.33, None));
    // A page that took the `#` of `#wrong` away leaves `wrong`: still the count.
    let c = Columns::from_names(
        "  size  count  type  redop  root  time  algbw  busbw  wrong  time  algbw  busbw  wrong",
    );
    assert_eq!(c, Columns::default());
}

#[test]
fn crash_lines_are_failures_and_benign_warnings_are_not() {
    for line in [
        "[ztan-mig-235z:06899] Signal: Aborted (6)",
        "mpirun noticed that process rank 0 with PID 0 on node n1 exited on signal 6 (Aborted).",
        "node-0:5899:6045 [1] transport/net_ib.cc:113 NCCL WARN communicator encountered a fatal error (detected in ncclIbIrecv)",
        "n1:1:2 [0] enqueue.cc:1 NCCL WARN Cuda failure 'out of memory'",
        "srun: error: gpu-st-1: task 3: Aborted (core dumped)",
        "run.sh: line 4: 3121 Segmentation fault      ./build/all_reduce_perf -b 8",
    ] {
        assert!(is_crash(line), "{line}");
    }
    for line in [
        "node-0:5899:5899 [0] misc/ibvwrap.cc:106 NCCL WARN Failed to open libibverbs.so[.1]",
        "node-0:5899:5899 [0] NCCL INFO comm 0x55 rank 0 nranks 16 - Destroy COMPLETE",
        "#  Rank  0 Group  0 Pid   6899 on ztan-mig-235z device  0 [0000:04:00] NVIDIA H100",
    ] {
        assert!(!is_crash(line), "{line}");
    }
    let said = |l: &str| failure_weight(l);
    assert!(said("h: Test NCCL failure common.cu:1 'x / y'") < said("n NCCL WARN fatal error"));
    assert!(said("n NCCL WARN fatal error") < said("[h:1] Signal: Aborted (6)"));
    assert!(said("[h:1] Signal: Aborted (6)") < said(" .. h pid 1: Test failure common.cu:2"));
}

#[test]
fn the_program_of_an_echoed_command() {
    for (line, want) in [
        (
            "mpirun -np 8 /opt/nccl-tests/build/all_reduce_perf -b 8",
            Some("all_reduce_perf"),
        ),
        (
            "root@n1:~/nccl-tests# ./build/all_gather_perf -b 8 -e 128M",
            Some("all_gather_perf"),
        ),
        (
            "# ./build/all_gather_perf -b 8 -e 128M",
            Some("all_gather_perf"),
        ),
        (
            "# mpirun -np 2 alltoall_perf_mpi -b 8",
            Some("alltoall_perf_mpi"),
        ),
        (
            "$ ./run-nccl.sh -t all_gather -b 8",
            Some("all_gather_perf"),
        ),
        (
            "python3 bench.py --test reduce_scatter",
            Some("reduce_scatter_perf"),
        ),
        (
            "$ ./build/all_reduce_perf -t 1 -g 8",
            Some("all_reduce_perf"),
        ),
        ("$ ./run.sh -t 8", None),
        ("# Collective test starting: all_gather_perf", None),
        ("# nThread 1 nGpus 1 minBytes 8", None),
        ("n1:1:1 [0] NCCL INFO cmdline all_reduce_perf", None),
    ] {
        assert_eq!(command_program(line).as_deref(), want, "{line}");
    }
}
