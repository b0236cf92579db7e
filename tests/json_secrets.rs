//! Secrets stay out of `-J` results: upstream writes the whole environment into the JSON file,
//! which travels to dashboards and tickets. The binary is run with planted secrets and `-J`;
//! whatever it writes (here it stops at the GPU stage, after creating the file) must be valid
//! JSON that records the run's NCCL settings and none of the planted values.

use crate::programs::{args, command, fake_library, run, scratch};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_all_reduce_perf");

/// (name, value): names that look secret, some under prefixes that are otherwise kept.
const PLANTED: &[(&str, &str)] = &[
    ("AWS_SECRET_ACCESS_KEY", "planted-0001"),
    ("AWS_SESSION_TOKEN", "planted-0002"),
    ("HF_TOKEN", "planted-0003"),
    ("GITHUB_TOKEN", "planted-0004"),
    ("WANDB_API_KEY", "planted-0005"),
    ("NCCL_IB_PASSWORD", "planted-0006"),
    ("CUDA_AUTH_HEADER", "planted-0007"),
    ("SLURM_JOB_CREDENTIAL", "planted-0008"),
    ("OMPI_MCA_secret_thing", "planted-0009"),
    ("PGPASSWORD", "planted-0010"),
    ("DATABASE_URL", "planted-0011"),
    ("HOME", "planted-0012"),
];

fn check(path: &std::path::Path) {
    let text = std::fs::read_to_string(path).expect("the JSON file was written");
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    let env: Vec<&str> = v["env"]
        .as_array()
        .expect("an env array")
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(env.contains(&"NCCL_DEBUG=INFO"), "{env:?}");
    assert!(env.contains(&"CUDA_VISIBLE_DEVICES=0"), "{env:?}");
    assert!(!text.contains("planted-"), "a secret leaked: {text}");
    for (name, _) in PLANTED {
        assert!(!text.contains(name), "{name} recorded: {text}");
    }
}

fn vars(extra: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
    let mut v: Vec<(&str, String)> = PLANTED.iter().map(|(k, s)| (*k, s.to_string())).collect();
    v.push(("NCCL_DEBUG", "INFO".into()));
    v.push(("CUDA_VISIBLE_DEVICES", "0".into()));
    v.extend_from_slice(extra);
    v
}

#[test]
fn planted_secrets_never_reach_the_json_file() {
    let dir = scratch("secrets");
    let json = dir.join("r.json");
    let v = vars(&[]);
    let env: Vec<(&str, &str)> = v.iter().map(|(k, s)| (*k, s.as_str())).collect();
    let a = args(&["-b", "8", "-e", "8", "-J", &json.to_string_lossy()]);
    let o = run(command(BIN, &a, &env), Duration::from_secs(20));
    assert!(!o.panicked() && !o.hung, "{}", o.all());
    assert_ne!(o.code, Some(0), "{}", o.all());
    check(&json);

    // Further into a run (stand-in driver with one GPU and NCCL): the document rewritten with
    // the device list keeps the same filtered environment.
    let libs = dir.join("libs");
    std::fs::create_dir_all(&libs).unwrap();
    let (Some(_), Some(nccl)) = (
        fake_library(&libs, "fake_cuda.c", "libcuda.so.1", &["libcuda.so"], &[]),
        fake_library(&libs, "fake_nccl.c", "libnccl.so.2", &[], &[]),
    ) else {
        return;
    };
    let json = dir.join("r2.json");
    let v = vars(&[
        ("LD_LIBRARY_PATH", libs.to_string_lossy().into_owned()),
        ("NCCL_PERF_LIBNCCL", nccl.to_string_lossy().into_owned()),
        ("FAKE_CUDA_COUNT", "1".into()),
    ]);
    let env: Vec<(&str, &str)> = v.iter().map(|(k, s)| (*k, s.as_str())).collect();
    let a = args(&[
        "-b",
        "8",
        "-e",
        "8",
        "-c",
        "0",
        "-J",
        &json.to_string_lossy(),
    ]);
    let o = run(command(BIN, &a, &env), Duration::from_secs(20));
    assert!(!o.panicked() && !o.hung, "{}", o.all());
    assert!(o.stdout.contains("Fake GPU"), "{}", o.all());
    check(&json);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["nccl_version"], 22803);
    assert_eq!(v["config"]["devices"][0]["device_info"], "Fake GPU");
    std::fs::remove_dir_all(&dir).unwrap();
}
