use super::*;
use crate::runner::fake_job::FakeJob;

fn ok(local_rank: usize, per_process: i64, visible: Option<i64>, forced: Option<i64>) -> Placement {
    place(local_rank, per_process, visible, forced).unwrap()
}

#[test]
fn formula_is_local_rank_times_gpus_per_process() {
    assert_eq!(ok(0, 1, Some(8), None).base, 0);
    assert_eq!(
        ok(3, 1, Some(8), None),
        Placement {
            base: 3,
            source: Source::Formula
        }
    );
    assert_eq!(ok(1, 4, Some(8), None).base, 4);
    // Without CUDA (dry run) the formula is all we know.
    assert_eq!(ok(5, 2, None, None).base, 10);
}

#[test]
fn a_process_that_sees_only_its_own_gpus_starts_at_0() {
    // Slurm --gpus-per-task=1 / one pod per rank: local rank 5 sees one GPU.
    assert_eq!(
        ok(5, 1, Some(1), None),
        Placement {
            base: 0,
            source: Source::OwnShare
        }
    );
    assert_eq!(ok(1, 2, Some(2), None).base, 0);
    // Counts cannot tell this from two processes sharing one host's 8 GPUs: the PCI ids
    // gathered at rank 0 can (two_ranks_on_one_gpu_are_found_per_host).
    assert_eq!(ok(1, 8, Some(8), None).base, 0);
    // Counts cannot tell this from two processes sharing one host's 8 GPUs: the PCI ids
    // gathered at rank 0 can (two_ranks_on_one_gpu_are_found_per_host).
    assert_eq!(ok(1, 8, Some(8), None).base, 0);
}

#[test]
fn too_few_gpus_is_upstreams_error() {
    let e = place(1, 8, Some(12), None).unwrap_err();
    assert!(
        matches!(
            e,
            Error::TooFewGpus {
                requested: 16,
                found: 12
            }
        ),
        "{e:?}"
    );
    assert!(place(2, 3, Some(8), None).is_err());
    assert!(place(0, 2, Some(1), None).is_err());
    let hint = too_few_hint(1, 2, 8, 8);
    assert!(hint.contains("need 16 GPUs, 8 visible"), "{hint}");
}

#[test]
fn nccl_tests_device_overrides_everything() {
    assert_eq!(
        ok(3, 1, Some(8), Some(6)),
        Placement {
            base: 6,
            source: Source::Override
        }
    );
    assert_eq!(ok(3, 1, Some(1), Some(0)).base, 0);
    assert!(matches!(
        place(0, 2, Some(8), Some(7)),
        Err(Error::TooFewGpus {
            requested: 9,
            found: 8
        })
    ));
    assert_eq!(parse_device(Some("2")).unwrap(), Some(2));
    assert_eq!(parse_device(Some(" ")).unwrap(), None);
    assert_eq!(parse_device(None).unwrap(), None);
    assert!(parse_device(Some("-1")).is_err());
    assert!(parse_device(Some("gpu0")).is_err());
}

#[test]
fn visibility_and_identity_without_cuda() {
    assert_eq!(visible_without_cuda(None, None), None);
    assert_eq!(visible_without_cuda(None, Some(8)), Some(8));
    assert_eq!(visible_without_cuda(Some("0,1,2"), Some(8)), Some(3));
    assert_eq!(visible_without_cuda(Some(""), Some(8)), Some(0));
    assert_eq!(visible_without_cuda(Some("1,x,2"), None), Some(1));
    assert_eq!(visible_without_cuda(Some("GPU-ab12,MIG-cd"), None), Some(2));
    assert_eq!(
        identity_without_cuda(1, None, Some(8)).as_deref(),
        Some("device 1")
    );
    assert_eq!(identity_without_cuda(1, None, None), None);
    assert_eq!(identity_without_cuda(0, Some("3"), Some(1)), None);
    assert_eq!(
        identity_without_cuda(1, Some("GPU-a,GPU-b"), Some(2)).as_deref(),
        Some("GPU-b")
    );
}

fn record(rank: usize, host: &str, devices: &[i64]) -> ProcessRecord {
    ProcessRecord {
        world_rank: rank,
        group: 0,
        host: host.into(),
        host_hash: host.len() as u64 * 1000 + host.as_bytes()[0] as u64,
        machine: String::new(),
        pid: 100 + rank as u32,
        local_rank: 0,
        visible: Some(8),
        gpus: devices
            .iter()
            .map(|&d| GpuRecord {
                device: d,
                identity: Some(format!("0000:{d:02x}:00")),
                pci: [0, d as u32, 0],
                name: "NVIDIA H200".into(),
            })
            .collect(),
        problem: None,
        code: None,
        stdout: None,
        hint: None,
    }
}

#[test]
fn two_ranks_on_one_gpu_are_found_per_host() {
    let good = [
        record(0, "a", &[0, 1]),
        record(1, "a", &[2, 3]),
        record(2, "b", &[0, 1]),
    ];
    assert!(problems(&good, 2).is_empty());
    let bad = [record(0, "a", &[0, 1]), record(1, "a", &[1, 2])];
    let p = problems(&bad, 2);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].starts_with("ranks 1 (pid 100) and 2 (pid 101) would both use GPU 0000:01:00 on a"),
        "{}",
        p[0]
    );
    let mut unknown = record(1, "a", &[0]);
    unknown.gpus[0].identity = None;
    assert!(problems(&[record(0, "a", &[0]), unknown], 1).is_empty());
}

/// Ranks that pose as hosts on one machine (same host name, each its own `NCCL_HOSTID`) may
/// share a GPU, as NCCL lets them; the same `NCCL_HOSTID` twice is one host again.
#[test]
fn ranks_with_their_own_nccl_hostid_may_share_a_gpu() {
    use crate::bootstrap::local::host_identity_hash;
    let posing = |rank: usize, id: &str| ProcessRecord {
        host_hash: host_identity_hash(Some(id)),
        ..record(rank, "vm", &[0])
    };
    let vcluster: Vec<ProcessRecord> = (0..4).map(|r| posing(r, &format!("vnode{r}"))).collect();
    assert!(problems(&vcluster, 1).is_empty());
    let same = [posing(0, "vnode0"), posing(1, "vnode0")];
    let p = problems(&same, 1);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].contains("would both use GPU 0000:00:00 on vm"),
        "{}",
        p[0]
    );
}

#[test]
fn own_problems_are_listed_and_records_round_trip() {
    let mut r = record(3, "n4", &[]);
    r.problem = Some("Invalid number of GPUs: 2 requested\nbut 1".into());
    let p = problems(std::slice::from_ref(&r), 1);
    assert_eq!(
        p,
        ["process 3 (pid 103 on n4): Invalid number of GPUs: 2 requested but 1"]
    );
    let text = serde_json::to_string(&r).unwrap();
    assert_eq!(serde_json::from_str::<ProcessRecord>(&text).unwrap(), r);
    let infos = record(2, "a", &[4, 5]).device_infos(2);
    assert_eq!(
        (infos[1].rank, infos[1].device, infos[1].pci_bus),
        (5, 5, 5)
    );
}

#[test]
fn agree_passes_a_good_launch_and_stops_a_bad_one() {
    let boot = crate::bootstrap::SingleProcess;
    let all = agree(&boot, &record(0, "a", &[0]), &Default::default(), 1).unwrap();
    assert_eq!(all.len(), 1);
    let mut bad = record(0, "a", &[0]);
    bad.problem = Some("no GPU".into());
    let e = agree(&boot, &bad, &Default::default(), 1).unwrap_err();
    assert!(e.to_string().contains("no GPU"), "{e}");
}

/// Rank 0 of two processes whose peer sends `other` (a gathered text).
fn two_processes(
    other: String,
) -> FakeJob<impl Fn(String) -> crate::bootstrap::Result<Vec<String>> + Sync> {
    FakeJob::new(0, 2, move |text| Ok(vec![text, other.clone()]))
}

#[test]
fn agree_names_a_process_that_runs_something_else_and_cleans_peer_text() {
    let run = |b: &str| {
        Fingerprint(vec![
            "all_reduce_perf".into(),
            "1".into(),
            format!("-b {b}"),
        ])
    };
    let peer = |b: &str, host: &str| {
        let mut r = record(1, host, &[0]);
        r.host_hash = 99;
        serde_json::json!({ "record": r, "run": run(b) }).to_string()
    };
    let boot = two_processes(peer("2M", "n2"));
    let e = agree(&boot, &record(0, "n1", &[0]), &run("1M"), 1).unwrap_err();
    assert_eq!(e.exit_code(), 6);
    // Found after the processes' last collective: every process knows, the job ends in order.
    // Rank 0 said it, once for the job.
    assert!(matches!(e, Error::Agreed(_)) && e.said(), "{e:?}");
    let m = "rank 1 runs all_reduce_perf -b 2M; rank 0 runs all_reduce_perf -b 1M";
    let (out, err) = once_lines(2, 1, Some(m.into()), &[]);
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(err.len(), 1, "{err:?}");
    assert!(err[0].ends_with(&format!(": wrong launch: {m}")), "{err:?}");
    let boot = two_processes(peer("1M", "evil\n# Avg bus bandwidth : 1"));
    let all = agree(&boot, &record(0, "n1", &[0]), &run("1M"), 1).unwrap();
    assert_eq!(all[1].host, "evil???Avg?bus?bandwidth?:?1");
    let boot = two_processes("{not json".into());
    let e = agree(&boot, &record(0, "n1", &[0]), &run("1M"), 1).unwrap_err();
    assert_eq!(e.exit_code(), 6, "{e}");
    // Rank 0 alone knows (the others still wait in the agreement): not an orderly end.
    assert!(!matches!(e, Error::Agreed(_)), "{e:?}");
}

/// In a job of several processes the causes are said once, by rank 0, and every process ends
/// with the job's code, the highest of the causes'; nothing of it is left for the caller to
/// print.
#[test]
fn agree_ends_a_job_with_its_highest_cause_said_once() {
    let failed = |rank: usize, host: &str, problem: &str, code: u8| {
        let mut r = record(rank, host, &[]);
        r.problem = Some(problem.into());
        r.code = Some(code);
        r
    };
    let peer = |r: ProcessRecord| {
        serde_json::json!({ "record": r, "run": Fingerprint::default() }).to_string()
    };
    let boot = two_processes(peer(failed(1, "n2", "cannot load NCCL", 3)));
    let e = agree(
        &boot,
        &failed(0, "n1", "cannot load libcuda.so.1", 2),
        &Default::default(),
        1,
    )
    .unwrap_err();
    assert!(
        matches!(&e, Error::Agreed(s) if matches!(**s, Error::SaidByRankZero(3))),
        "{e:?}"
    );
    assert!(e.said() && e.exit_code() == 3, "{e:?}");
    // A healthy rank 0 learns the job's code from the peer's record.
    let boot = two_processes(peer(failed(1, "n2", "cannot load libcuda.so.1", 2)));
    let e = agree(&boot, &record(0, "n1", &[0]), &Default::default(), 1).unwrap_err();
    assert!(e.said() && e.exit_code() == 2, "{e:?}");
    // Another process (its allreduce, here, answers its own code).
    let other = FakeJob::new(1, 2, |_| Ok(Vec::new()));
    let e = agree(
        &other,
        &failed(1, "n2", "no GPU", 5),
        &Default::default(),
        1,
    )
    .unwrap_err();
    assert!(e.said() && e.exit_code() == 5, "{e:?}");
    // A record of an older version without a code: a wrong launch.
    let mut old = failed(1, "n2", "no GPU", 5);
    old.code = None;
    let boot = two_processes(peer(old));
    let e = agree(&boot, &record(0, "n1", &[0]), &Default::default(), 1).unwrap_err();
    assert_eq!(e.exit_code(), 6, "{e:?}");
}

/// Each cause once on stderr, nccl-tests' stdout line once with one trace line, each shared
/// GPU once.
#[test]
fn rank_zero_says_each_cause_once() {
    let text = "Invalid number of GPUs: 1 requested but only 0 were found.\nPlease check.";
    let mut records: Vec<ProcessRecord> = (0..4).map(|r| record(r, "n1", &[])).collect();
    for r in &mut records {
        r.problem = Some(text.into());
        r.code = Some(5);
        r.stdout = Some(text.into());
    }
    records.push(record(4, "n2", &[0]));
    records.push(record(5, "n2", &[0]));
    let (out, err) = once_lines(6, 1, None, &records);
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(out[0], text);
    assert!(
        out[1].starts_with(" .. ") && out[1].contains(": Test failure "),
        "{out:?}"
    );
    assert_eq!(err.len(), 2, "{err:?}");
    assert!(
        err[0].ends_with(
            ": 4 of 6 processes (ranks 0-3) on n1: Invalid number of GPUs: 1 \
                          requested but only 0 were found. Please check."
        ),
        "{err:?}"
    );
    assert!(err[1].contains(": wrong launch: ranks 4 (pid 104) and 5 (pid 105) would both use"));
}
