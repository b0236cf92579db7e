use super::*;

#[test]
fn the_builtin_table_parses_and_every_row_has_a_source() {
    let t = SkuTable::parse(BUILTIN, "built-in").unwrap();
    assert!(t.gpus.len() >= 6 && t.expectations.len() >= 12);
    for e in &t.expectations {
        assert!(e.source.contains("http"), "{e:?}");
        assert!(!e.measured.is_empty());
        assert!(e.busbw_gbs > 0.0);
    }
    for g in &t.gpus {
        assert!(g.source.contains("http"), "{g:?}");
    }
    assert_eq!(SkuTable::builtin(), t);
}

#[test]
fn lookups_match_names_and_scope() {
    let t = SkuTable::builtin();
    let h200 = t.gpu("NVIDIA H200").unwrap();
    assert_eq!(h200.nvlink_gbs(), 450.0);
    assert!(t.gpu("NVIDIA H200 NVL").is_none());
    assert!(t.gpu("A100-SXM4-40GB").is_some());
    let e = t.expectation("NVIDIA H200", "all_reduce", 1, 8).unwrap();
    assert_eq!(e.busbw_gbs, 479.98);
    assert!(t.expectation("NVIDIA H200", "all_reduce", 2, 8).is_none());
    assert!(t.expectation("NVIDIA H200", "all_reduce", 1, 4).is_none());
    let e = t
        .expectation("NVIDIA A100-SXM4-40GB", "alltoall", 1, 8)
        .unwrap();
    assert_eq!(e.busbw_gbs, 224.31);
}

#[test]
fn at_least_rows_and_exact_rows() {
    let text = "expect | gpu=X1 | nodes=2+ | gpus_per_node=8 | collective=all_reduce | busbw=100 | measured=m | source=s\n\
                expect | gpu=X1 | nodes=4 | gpus_per_node=8 | collective=all_reduce | busbw=90 | measured=m | source=s\n";
    let t = SkuTable::parse(text, "f").unwrap();
    assert_eq!(
        t.expectation("X1", "all_reduce", 4, 8).unwrap().busbw_gbs,
        90.0
    );
    assert_eq!(
        t.expectation("X1", "all_reduce", 16, 8).unwrap().busbw_gbs,
        100.0
    );
    assert!(t.expectation("X1", "all_reduce", 1, 8).is_none());
}

#[test]
fn errors_name_the_line() {
    let cases = [
        ("gpu | names=X | nvlink=18 | source=s", 1, "nvlink=18"),
        (
            "# c\n\nexpect | gpu=X | nodes=0 | gpus_per_node=8",
            3,
            "nodes=0",
        ),
        (
            "expect | gpu=X | nodes=1 | gpus_per_node=8 | collective=allreduce | busbw=1 | measured=m | source=s",
            1,
            "allreduce",
        ),
        (
            "expect | gpu=X | nodes=1 | gpus_per_node=8 | collective=all_reduce | busbw=NaN | measured=m | source=s",
            1,
            "busbw=NaN",
        ),
        (
            "expect | gpu=X | nodes=1 | gpus_per_node=8 | collective=all_reduce | busbw=1 | measured=m",
            1,
            "`source=` is missing",
        ),
        ("expect | gpu=X | gpu=Y", 1, "twice"),
        ("expect | colour=red", 1, "unknown key `colour`"),
        ("gpus | names=X", 1, "`gpus`"),
        ("gpu | names", 1, "key=value"),
        ("builtin | maybe", 1, "yes"),
        (
            "expect | gpu=X | nodes=1 | gpus_per_node=8 | collective=all_reduce | busbw=1 | size=99999999T | measured=m | source=s",
            1,
            "size=",
        ),
    ];
    for (text, line, needle) in cases {
        let e = SkuTable::parse(text, "my.sku").unwrap_err().to_string();
        assert!(e.starts_with(&format!("my.sku:{line}: ")), "{e}");
        assert!(e.contains(needle), "{e} lacks {needle}");
    }
}

#[test]
fn load_extends_or_replaces_the_builtin_table() {
    let dir = std::env::temp_dir().join(format!("nccl-perf-explain-sku-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let row = "expect | gpu=NVIDIA H200 | nodes=1 | gpus_per_node=8 | collective=all_reduce | busbw=400 | size=1G | measured=ours | source=our lab\n";
    let ext = dir.join("ext.sku");
    std::fs::write(&ext, row).unwrap();
    let t = SkuTable::load(&ext).unwrap();
    assert_eq!(
        t.expectation("NVIDIA H200", "all_reduce", 1, 8)
            .unwrap()
            .busbw_gbs,
        400.0
    );
    assert!(t.gpu("NVIDIA H200").is_some());
    let only = dir.join("only.sku");
    std::fs::write(&only, format!("builtin | no\n{row}")).unwrap();
    let t = SkuTable::load(&only).unwrap();
    assert_eq!(t.expectations.len(), 1);
    assert!(t.gpus.is_empty());
    let e = SkuTable::load(&dir.join("absent.sku"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("absent.sku: cannot read"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(size("8G"), Ok(8 << 30));
    assert!(!same_gpu("", ""));
    assert!(same_gpu("Tesla V100-SXM2-16GB", "v100-sxm2-16gb"));
}

/// The rows of issue 50: Blackwell, Grace Blackwell and the seeds' own figures.
#[test]
fn blackwell_and_the_seeds_figures_are_found_by_shape() {
    let t = SkuTable::builtin();
    let gb300 = t.expectation("NVIDIA GB300", "all_gather", 2, 4).unwrap();
    assert_eq!(gb300.busbw_gbs, 357.13);
    assert!(gb300.measured.contains("A4X Max"));
    assert!(t.expectation("NVIDIA GB300", "all_reduce", 2, 4).is_none());
    assert_eq!(
        t.expectation("NVIDIA B200", "all_reduce", 1, 8)
            .unwrap()
            .busbw_gbs,
        830.0
    );
    assert_eq!(
        t.expectation("NVIDIA GB200", "all_reduce", 2, 4)
            .unwrap()
            .busbw_gbs,
        811.0
    );
    let four = t.expectations("NVIDIA H100 80GB HBM3", "all_reduce", 4, 8);
    assert_eq!(
        four.iter().map(|e| e.busbw_gbs).collect::<Vec<_>>(),
        [330.93, 326.47]
    );
}
