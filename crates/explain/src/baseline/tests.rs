use super::format::{is_baseline, parse, write};
use super::*;
use crate::observed::Row;

/// An 8-GPU H100 run of `collective` at 1 MiB, 64 MiB and 1 GiB, busbw scaled by `k`.
pub(crate) fn run(collective: &str, k: f64) -> Run {
    Run {
        collective: collective.into(),
        nranks: 8,
        nnodes: 1,
        ranks_per_node: 8,
        gpu_names: vec!["NVIDIA H100 80GB HBM3".into()],
        rows: [(1u64 << 20, 50.0), (64 << 20, 300.0), (1 << 30, 360.0)]
            .into_iter()
            .flat_map(|(bytes, b)| {
                [false, true].map(|in_place| Row {
                    bytes,
                    in_place,
                    busbw: b * k * if in_place { 1.01 } else { 1.0 },
                    ..Row::default()
                })
            })
            .collect(),
        ..Run::default()
    }
}

fn made(ks: &[f64]) -> Baseline {
    let mut b = Baseline::default();
    for k in ks {
        b.add_run(&run("all_reduce", *k)).expect("a good run");
    }
    b
}

#[test]
fn the_median_of_three_runs_with_their_spread() {
    let b = made(&[1.0, 0.98, 1.03]);
    assert_eq!(b.entries.len(), 6);
    let top = b
        .entries
        .iter()
        .find(|e| e.bytes == 1 << 30 && !e.in_place)
        .expect("the 1 GiB row");
    assert_eq!(top.busbw(), 360.0);
    assert_eq!(top.spread(), (360.0 * 0.98, 360.0 * 1.03));
}

#[test]
fn written_read_back_and_joined_files_merge() {
    let b = made(&[1.0, 0.98]);
    let text = write(&b, &["a.log".into(), "b|c.log".into()]);
    assert!(is_baseline(&text), "{text}");
    assert!(text.starts_with("nccl-perf-baseline 1\n"), "{text}");
    assert!(text.contains("# made from: a.log, b c.log\n"), "{text}");
    assert!(text.contains("row | collective=all_reduce | gpu=NVIDIA H100 80GB HBM3 | ranks=8 | nodes=1 | gpus_per_node=8 | bytes=1073741824 | place=out | busbw=356.4 | spread=352.8..360 | runs=360,352.8\n"), "{text}");
    let back = parse(&text, "b.txt").expect("its own text");
    assert_eq!(back, b);
    // `cat` of two files: one baseline whose rows hold every run.
    let joined = format!("{text}{}", write(&made(&[1.03]), &[]));
    let both = parse(&joined, "joined").expect("joined");
    assert_eq!(both, made(&[1.0, 0.98, 1.03]));
    let mut merged = made(&[1.0, 0.98]);
    merged.merge(made(&[1.03]));
    assert_eq!(merged, both);
}

#[test]
fn a_wrong_file_says_where_in_one_line() {
    for (text, says) in [
        ("row | collective=all_reduce", "b:1: not a baseline file"),
        (
            "nccl-perf-baseline 2\n",
            "b:1: `nccl-perf-baseline 2`: this nccl-perf reads `nccl-perf-baseline 1` files",
        ),
        (
            "nccl-perf-baseline 1\nrow | collective=all_reduce | gpu=H100 | ranks=8 | nodes=1 | gpus_per_node=8 | bytes=1024 | place=sideways | busbw=1",
            "b:2: place=sideways: expected in or out",
        ),
        (
            "nccl-perf-baseline 1\nrow | collective=nope | gpu=H100",
            "b:2: collective=nope: not one of the benchmarks",
        ),
        (
            "nccl-perf-baseline 1\nrow | colour=red",
            "b:2: unknown key `colour`",
        ),
        (
            "nccl-perf-baseline 1\nrow | collective=all_reduce | gpu=H100 | ranks=8 | nodes=1 | gpus_per_node=8 | bytes=1024 | place=in | runs=1,x",
            "b:2: `x`: expected a busbw in GB/s",
        ),
        (
            "",
            "b:1: not a baseline file: no `nccl-perf-baseline 1` line",
        ),
    ] {
        let e = parse(text, "b").expect_err(text).to_string();
        assert!(e.starts_with(says), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
}

#[test]
fn judged_per_size_ok_slow_and_not_matching() {
    let b = made(&[1.0, 0.98, 1.03]);
    let Judgement::Judged(ok) = b.judge(&run("all_reduce", 1.0)) else {
        panic!("judged");
    };
    assert_eq!(ok.percent, 100.0);
    // From 16 MiB up: 64 MiB and 1 GiB, in and out of place.
    assert_eq!(ok.sizes.len(), 4);
    assert_eq!(ok.expected_busbw, 360.0);
    let Judgement::Judged(slow) = b.judge(&run("all_reduce", 0.85)) else {
        panic!("judged");
    };
    assert!((slow.percent - 85.0).abs() < 1e-9, "{}", slow.percent);
    assert!(
        slow.worst()
            .is_some_and(|w| (w.percent - 85.0).abs() < 1e-9)
    );
    assert_eq!(b.judge(&run("all_gather", 1.0)), Judgement::Silent);
    let mut h200 = run("all_reduce", 1.0);
    h200.gpu_names = vec!["NVIDIA H200".into()];
    let Judgement::NotMatching(why) = b.judge(&h200) else {
        panic!("not matching");
    };
    assert_eq!(
        why,
        "this job is 8 × NVIDIA H200 on 1 node (8 per node); the baseline has 8 × NVIDIA H100 80GB HBM3 on 1 node (8 per node)"
    );
    let mut four = run("all_reduce", 1.0);
    four.nranks = 4;
    four.ranks_per_node = 4;
    assert!(matches!(b.judge(&four), Judgement::NotMatching(_)));
    let mut other_sizes = run("all_reduce", 1.0);
    other_sizes.rows.iter_mut().for_each(|r| r.bytes += 4);
    let Judgement::NotMatching(why) = b.judge(&other_sizes) else {
        panic!("not matching");
    };
    assert_eq!(
        why,
        "no size in common with the baseline's all_reduce (it has 1 MiB to 1 GiB)"
    );
}

#[test]
fn runs_that_cannot_make_a_baseline_say_why() {
    let mut b = Baseline::default();
    let mut no_devices = run("all_reduce", 1.0);
    no_devices.gpu_names.clear();
    assert_eq!(
        b.add_run(&no_devices).map_err(|e| e.to_string()),
        Err(
            "all_reduce: the run does not give its GPU model, ranks or nodes (no device lines)"
                .into()
        )
    );
    let mut empty = run("all_reduce", 1.0);
    empty.rows.clear();
    assert!(matches!(b.add_run(&empty), Err(AddError::NoRows(_))));
    assert_eq!(b.add_run(&run("", 1.0)), Err(AddError::NoCollective));
}
