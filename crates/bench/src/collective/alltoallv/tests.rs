//! alltoallv: counts in both modes, the environment and matrix-file errors, packing and fills.

use super::*;
use crate::collective::planned;
use crate::collective::{Buffer, Natives};
use crate::types::RedOp;

fn opts(min: u64, max: u64) -> Options {
    Options {
        min_bytes: min,
        max_bytes: max,
        ..Options::default()
    }
}

/// Looks variables up in `vars` only.
fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
}

fn err(r: Result<impl std::fmt::Debug>) -> String {
    let e = r.unwrap_err();
    assert_eq!(e.exit_code(), 1, "{e}");
    let msg = e.to_string();
    assert!(!msg.contains('\n'), "{msg}");
    msg
}

/// nccl-tests' generated alltoallv matrix with spread 1 (its default), written out: rank 0 sends
/// rank j `down16(j·total/(n(n−1)/2))`.
fn spread1_total(count: usize, n: usize, ts: usize) -> (usize, usize) {
    let p = count / n / (16 / ts) * (16 / ts);
    let total = p * n * ts;
    if n == 1 {
        return (p, total / 16 * 16 / ts);
    }
    let sumd = n * (n - 1) / 2;
    let bytes: usize = (0..n).map(|j| j * total / sumd / 16 * 16).sum();
    (p, bytes / ts)
}

#[test]
fn generated_counts_sizes_and_factors() {
    let a = AllToAllV::generated(1.0);
    for n in [1usize, 2, 3, 8, 72] {
        for (count, ts) in [(1 << 20, 4), (1000, 1), (12345, 2), (999, 8)] {
            let c = a.counts(count, n, ts);
            let (p, total) = spread1_total(count, n, ts);
            assert_eq!(c.param, p, "n={n} count={count}");
            assert_eq!((c.send, c.recv), (total, total), "n={n} count={count}");
            assert_eq!((c.send_inplace_offset, c.recv_inplace_offset), (0, 0));
            assert_eq!(c.printed_size(ts), (total * ts) as u64);
            let (bytes, factor) = a.bandwidth(&c, ts, n);
            assert_eq!(bytes, (total * ts) as f64);
            assert_eq!(factor, (n as f64 - 1.0) / n as f64);
            for r in 0..n {
                assert_eq!(a.totals(r, n, p, ts), (total, total), "rank {r}");
            }
        }
    }
    // alltoallv_small.out on one rank: 8 B → size 0 count 0, 16 B → 16 and 4.
    let c = a.counts(2, 1, 4);
    assert_eq!((c.printed_size(4), c.param), (0, 0));
    let c = a.counts(4, 1, 4);
    assert_eq!((c.printed_size(4), c.param), (16, 4));
    // With spread 1 a rank sends nothing to itself.
    assert_eq!(a.bytes(3, 3, 8, 1024, 4), 0);
}

#[test]
fn spread_mixes_uniform_and_distance() {
    // n = 3, total = 48 bytes (p = 4 floats): uniform 16 each, distance 0/16/32.
    let half = AllToAllV::generated(0.5);
    assert_eq!(
        (0..3)
            .map(|j| half.bytes(0, j, 3, 4, 4))
            .collect::<Vec<_>>(),
        vec![0, 16, 16] // 8 → 0, 16, 24 → 16
    );
    let uniform = AllToAllV::generated(0.0);
    assert_eq!(uniform.bytes(2, 2, 3, 4, 4), 16);
    assert_eq!(AllToAllV::generated(7.0), AllToAllV::generated(1.0));
    assert_eq!(AllToAllV::generated(-1.0), AllToAllV::generated(0.0));
}

const M: &str = "0 100 200\n 48 0 16 \n\n1000 1000 0\n";

#[test]
fn matrix_counts() {
    let a = AllToAllV::from_matrix_text("m.txt", M, 1.0).unwrap();
    // Rounded: [0 96 192; 48 0 16; 992 992 0]. Rows 288, 64, 1984; columns 1040, 1088, 208.
    let c = a.counts(123_456, 3, 4);
    assert_eq!((c.param, c.send, c.recv), (0, 1984 / 4, 1088 / 4));
    assert_eq!(c.printed_size(4), 1984);
    assert_eq!(a.bandwidth(&c, 4, 3).0, 1984.0);
    // The top-left 2x2 on two ranks: rows 96, 48; columns 48, 96.
    let c = a.counts(0, 2, 1);
    assert_eq!((c.send, c.recv), (96, 96));
    // Scale, truncation and rounding: 100·0.5 = 50 → 48; negative scale → 0.
    let half = AllToAllV::from_matrix_text("m", M, 0.5).unwrap();
    assert_eq!(half.bytes(0, 1, 3, 0, 1), 48);
    let none = AllToAllV::from_matrix_text("m", M, -2.0).unwrap();
    assert_eq!(none.counts(0, 3, 1).send, 0);
}

#[test]
fn matrix_file_errors_are_one_clear_line() {
    let bad = [
        ("", "holds no numbers"),
        ("  \n\n", "holds no numbers"),
        ("1 2\n3\n", "line 2 has 1 values but the file has 2 rows"),
        (
            "1 2 3\n4 5 6\n",
            "line 1 has 3 values but the file has 2 rows",
        ),
        ("1 x\n3 4\n", "line 1, column 2: 'x' is not a number"),
        ("1 2\n3 -4\n", "line 2, column 2: -4 is negative"),
        ("1 2\nnan 4\n", "'nan' is not a number"),
        ("1 inf\n3 4\n", "'inf' is not a number"),
    ];
    for (text, needle) in bad {
        let msg = err(AllToAllV::from_matrix_text("t.mat", text, 1.0));
        assert!(
            msg.starts_with("Invalid alltoallv traffic matrix file t.mat: "),
            "{msg}"
        );
        assert!(msg.contains(needle), "{text:?}: {msg}");
    }
}

#[test]
fn matrix_shape_rules() {
    let a = AllToAllV::from_matrix_text("m.txt", M, 1.0).unwrap();
    assert!(a.check_shape(3, 1984, 1984).is_ok());
    assert!(a.check_shape(2, 96, 96).is_ok());
    let msg = err(a.check_shape(4, 4096, 4096));
    assert!(msg.contains("it is 3x3 but the run has 4 ranks"), "{msg}");
    let msg = err(a.check_shape(3, 1000, 1000));
    assert_eq!(
        msg,
        "maxBytes (-e) must be at least 1984 bytes as required by traffic matrix file m.txt (got 1000). Increase -e."
    );
    let msg = err(a.check_shape(3, 8, 4096));
    assert!(msg.starts_with("-b and -e options must be set to the same value"));
    // Generated mode has no such rules.
    assert!(
        AllToAllV::generated(1.0)
            .check_shape(72, 8, 1 << 30)
            .is_ok()
    );
}

#[test]
fn environment() {
    let o = opts(8, 1 << 20);
    let (a, w) = AllToAllV::from_lookup(lookup(&[]), &o).unwrap();
    assert_eq!((a, w.len()), (AllToAllV::generated(1.0), 0));
    let (a, _) = AllToAllV::from_lookup(lookup(&[(SPREAD_ENV, " 0.25 ")]), &o).unwrap();
    assert_eq!(a, AllToAllV::generated(0.25));
    let (a, _) = AllToAllV::from_lookup(lookup(&[(SPREAD_ENV, "3")]), &o).unwrap();
    assert_eq!(a, AllToAllV::generated(1.0));
    let (a, _) = AllToAllV::from_lookup(lookup(&[(MATRIX_ENV, "")]), &o).unwrap();
    assert_eq!(a, AllToAllV::generated(1.0));
    for bad in ["abc", "0.5x", "nan", "inf"] {
        let msg = err(AllToAllV::from_lookup(lookup(&[(SPREAD_ENV, bad)]), &o));
        assert!(msg.starts_with(&format!("{SPREAD_ENV}='{bad}' is not a number")));
    }
    let (_, w) =
        AllToAllV::from_lookup(lookup(&[(SUMMARY_ENV, "1"), (SCALE_ENV, "2")]), &o).unwrap();
    assert_eq!(w.len(), 2);
    assert!(w[0].contains(SUMMARY_ENV) && w[1].contains(SCALE_ENV));
    assert!(
        w.iter()
            .all(|l| !l.contains("bandwidth") && !l.contains("FAILED"))
    );
    let (_, w) = AllToAllV::from_lookup(lookup(&[(SUMMARY_ENV, "0")]), &o).unwrap();
    assert!(w.is_empty());
}

#[test]
fn environment_with_a_matrix_file() {
    let dir = std::env::temp_dir().join(format!("nccl-perf-a2av-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("m.txt");
    std::fs::write(&file, M).unwrap();
    let path = file.to_string_lossy().into_owned();
    let same = opts(4096, 4096);
    let (a, w) =
        AllToAllV::from_lookup(lookup(&[(MATRIX_ENV, &path), (SCALE_ENV, "0.5")]), &same).unwrap();
    assert!(w.is_empty());
    assert_eq!(a, AllToAllV::from_matrix_text(&path, M, 0.5).unwrap());
    let msg = err(AllToAllV::from_lookup(
        lookup(&[(MATRIX_ENV, &path)]),
        &opts(8, 4096),
    ));
    assert_eq!(
        msg,
        "-b and -e options must be set to the same value (e.g., -b 32M -e 32M) when using alltoallv traffic matrix mode."
    );
    let msg = err(AllToAllV::from_lookup(
        lookup(&[(MATRIX_ENV, &path), (SCALE_ENV, "two")]),
        &same,
    ));
    assert!(msg.starts_with(&format!("{SCALE_ENV}='two' is not a number")));
    let (_, w) =
        AllToAllV::from_lookup(lookup(&[(MATRIX_ENV, &path), (SPREAD_ENV, "0")]), &same).unwrap();
    assert!(w[0].contains(SPREAD_ENV));
    let missing = dir.join("missing.txt").to_string_lossy().into_owned();
    let msg = err(AllToAllV::from_lookup(
        lookup(&[(MATRIX_ENV, &missing)]),
        &same,
    ));
    assert!(
        msg.starts_with(&format!(
            "Unable to read alltoallv traffic matrix file {missing}: "
        )),
        "{msg}"
    );
    let msg = err(AllToAllV::from_lookup(
        lookup(&[(MATRIX_ENV, &dir.to_string_lossy())]),
        &same,
    ));
    assert!(msg.starts_with("Unable to read"), "{msg}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn packing_skips_empty_pairs() {
    let a = AllToAllV::from_matrix_text("m", M, 1.0).unwrap();
    let g = Geometry {
        rank: 1,
        nranks: 3,
        root: 0,
        ts: 4,
        counts: a.counts(0, 3, 4),
        native: Natives::ALL,
    };
    // Rank 1 sends 48 B to 0 and 16 B to 2; receives 96 B from 0 and 992 B from 2.
    assert_eq!(
        planned(&a, &g),
        vec![
            Step::GroupStart,
            Step::Send {
                from: Base::Send,
                offset: 0,
                count: 12,
                peer: 0
            },
            Step::Recv {
                offset: 0,
                count: 24,
                peer: 0
            },
            Step::Send {
                from: Base::Send,
                offset: 12,
                count: 4,
                peer: 2
            },
            Step::Recv {
                offset: 24,
                count: 248,
                peer: 2
            },
            Step::GroupEnd
        ]
    );
}

#[test]
fn expected_chunks_and_zero_rest() {
    let a = AllToAllV::from_matrix_text("m", M, 1.0).unwrap();
    let ctx = FillCtx {
        rank: 1,
        nranks: 3,
        root: 0,
        op: RedOp::Sum,
        counts: a.counts(0, 3, 4),
        in_place: false,
        seed: 1,
        ts: 4,
    };
    // Rank 1 receives 272 of the 272 largest-receive elements: no zero rest.
    assert_eq!(
        a.fills(&ctx),
        vec![
            Fill::copy_input((Buffer::Send, 0), 16, 34, 0),
            Fill::copy_expected(0, 24, 33, 0),
            Fill::copy_expected(24, 248, 35, 248),
        ]
    );
    // Rank 2 receives 52 elements of 272: the rest comes from the zeroed receive buffer.
    let fills = a.fills(&FillCtx { rank: 2, ..ctx });
    assert_eq!(fills[0], Fill::ExpectedIsRecv);
    assert_eq!(fills[2], Fill::copy_expected(0, 48, 33, 24));
    assert_eq!(fills[3], Fill::copy_expected(48, 4, 34, 12));
}
