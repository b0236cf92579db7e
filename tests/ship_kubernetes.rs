//! The Kubernetes examples (examples/kubernetes/) parsed, with the fields their controllers
//! need: the indexed Job, the MPIJob, the fabric variants, and the GKE A4X Max image.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::shipped::*;

// ---------------------------------------------------------------------------------------------
// Kubernetes examples

fn yaml_documents(name: &str) -> Vec<serde_yaml::Value> {
    let path = root().join("examples/kubernetes").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap_or_else(|e| panic!("{name}: {e}")))
        .collect()
}

/// The value at a dotted path (`spec.template.spec`, `containers.0`); keys that hold dots
/// themselves (`nvidia.com/gpu`) are found by joining segments.
fn y<'a>(v: &'a serde_yaml::Value, path: &str) -> &'a serde_yaml::Value {
    let mut cur = v;
    let mut key = String::new();
    for segment in path.split('.') {
        if !key.is_empty() {
            key.push('.');
        }
        key.push_str(segment);
        let next = match key.parse::<usize>() {
            Ok(i) => cur.get(i),
            Err(_) => cur.get(key.as_str()),
        };
        if let Some(n) = next {
            cur = n;
            key.clear();
        }
    }
    assert!(key.is_empty(), "missing {path} (at {key})");
    cur
}

fn y_str<'a>(v: &'a serde_yaml::Value, path: &str) -> &'a str {
    y(v, path)
        .as_str()
        .unwrap_or_else(|| panic!("{path} is not a string"))
}

fn y_int(v: &serde_yaml::Value, path: &str) -> i64 {
    y(v, path)
        .as_i64()
        .unwrap_or_else(|| panic!("{path} is not an integer"))
}

fn env_of(container: &serde_yaml::Value) -> BTreeMap<String, String> {
    y(container, "env")
        .as_sequence()
        .expect("env list")
        .iter()
        .map(|e| (y_str(e, "name").to_string(), y_str(e, "value").to_string()))
        .collect()
}

#[test]
fn kubernetes_examples_parse_and_name_their_objects() {
    let mut files = 0;
    for e in std::fs::read_dir(root().join("examples/kubernetes")).expect("folder") {
        let name = e.expect("entry").file_name().to_string_lossy().into_owned();
        if !name.ends_with(".yaml") {
            continue;
        }
        files += 1;
        let docs = yaml_documents(&name);
        assert!(!docs.is_empty(), "{name}: no documents");
        for d in &docs {
            assert!(!y_str(d, "apiVersion").is_empty());
            assert!(!y_str(d, "kind").is_empty());
            assert!(!y_str(d, "metadata.name").is_empty());
        }
        let text =
            std::fs::read_to_string(root().join("examples/kubernetes").join(&name)).expect("read");
        assert_paths_installed(&name, &text);
    }
    assert_eq!(files, 5);
}

/// The fabric variants ask for what NCCL needs to use the fabric instead of falling back to
/// its socket transport: the RDMA devices (or GKE's RDMA networks) and IPC_LOCK.
#[test]
fn fabric_variants_request_their_devices_and_ipc_lock() {
    for (file, needle) in [
        ("indexed-job-efa.yaml", "vpc.amazonaws.com/efa"),
        ("indexed-job-rdma.yaml", "rdma/rdma_shared_device_a"),
        ("indexed-job-gke.yaml", "networking.gke.io/interfaces"),
    ] {
        let docs = yaml_documents(file);
        let job = docs
            .iter()
            .find(|d| y_str(d, "kind") == "Job")
            .unwrap_or_else(|| panic!("{file}: no Job"));
        let template = y(job, "spec.template");
        let container = &y(template, "spec.containers")[0];
        assert_ipc_lock_as_root(file, container);
        let limits = y(container, "resources.limits");
        assert_eq!(y_int(limits, "nvidia.com/gpu"), 8, "{file}");
        if !needle.starts_with("networking") {
            assert!(y_int(limits, needle) > 0, "{file}: no {needle} limit");
        } else {
            let networks = y_str(
                template,
                "metadata.annotations.networking.gke.io/interfaces",
            );
            let parsed: serde_json::Value =
                serde_json::from_str(networks).unwrap_or_else(|e| panic!("{file}: {e}"));
            let rdma = parsed.as_array().map_or(0, |a| {
                a.iter()
                    .filter(|i| {
                        i["network"]
                            .as_str()
                            .is_some_and(|n| n.starts_with("rdma-"))
                    })
                    .count()
            });
            assert_eq!(rdma, 8, "{file}: {networks}");
        }
        let env = env_of(container);
        assert!(
            env.contains_key("MASTER_ADDR") && env.contains_key("WORLD_SIZE"),
            "{file}"
        );
    }
}

/// RDMA needs IPC_LOCK, and Kubernetes gives an added capability to root only: the image runs
/// as a user, so the fabric pods say runAsUser: 0.
fn assert_ipc_lock_as_root(file: &str, container: &serde_yaml::Value) {
    let caps = y(container, "securityContext.capabilities.add");
    assert!(
        caps.as_sequence()
            .is_some_and(|c| c.iter().any(|v| v.as_str() == Some("IPC_LOCK"))),
        "{file}: no IPC_LOCK"
    );
    assert_eq!(
        y_int(container, "securityContext.runAsUser"),
        0,
        "{file}: IPC_LOCK needs root"
    );
}

/// GKE A4X Max: Google's gIB test image with our binaries where it keeps nccl-tests
/// (examples/kubernetes/gke-a4x-max/Dockerfile), so that Google's manifests run unchanged but
/// for the image name: the copy is taken from our image's install folder and lands at the path
/// the manifest's mpirun line names (tests/recipes/gke-a4x-max-mpirun.cmd holds that line).
#[test]
fn gke_a4x_max_image_puts_our_binaries_where_the_gib_image_keeps_nccl_tests() {
    let path = root().join("examples/kubernetes/gke-a4x-max/Dockerfile");
    let text = std::fs::read_to_string(&path).expect("read");
    let all = dockerfile_instructions(&text);
    let arg = |name: &str| {
        all.iter()
            .find_map(|i| {
                (i.keyword == "ARG")
                    .then(|| i.args.strip_prefix(&format!("{name}=")))
                    .flatten()
            })
            .unwrap_or_else(|| panic!("ARG {name}"))
            .to_string()
    };
    assert_eq!(
        arg("GIB_IMAGE"),
        "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-gib-a4x-max-arm64:v1.1.1"
    );
    let froms: Vec<&str> = all
        .iter()
        .filter(|i| i.keyword == "FROM")
        .map(|i| i.args.as_str())
        .collect();
    assert_eq!(froms, ["${NCCL_PERF_IMAGE} AS nccl-perf", "${GIB_IMAGE}"]);
    let copies: Vec<&str> = all
        .iter()
        .filter(|i| i.keyword == "COPY")
        .map(|i| i.args.as_str())
        .collect();
    assert_eq!(copies.len(), 2, "two COPYs: {copies:?}");
    // The second puts the same folder where Google's two-pod script looks.
    assert_eq!(
        copies[1].split_whitespace().collect::<Vec<_>>()[1..],
        [
            copies[0].split_whitespace().nth(1).unwrap(),
            "/opt/nccl-tests/build/"
        ]
    );
    let words: Vec<&str> = copies[0].split_whitespace().collect();
    assert_eq!(words[0], "--from=nccl-perf");
    // From our image's install folder: the Dockerfile's default NCCL_TESTS_PREFIX, /build.
    let (globals, _) = dockerfile();
    let prefix = globals.get("NCCL_TESTS_PREFIX").expect("NCCL_TESTS_PREFIX");
    assert_eq!(words[1], format!("{prefix}/build/"));
    // To where the manifest's mpirun runs the benchmark.
    let recipe = std::fs::read_to_string(root().join("tests/recipes/gke-a4x-max-mpirun.cmd"))
        .expect("recipe");
    let program = recipe
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(str::split_whitespace)
        .find(|w| w.starts_with("/third_party/"))
        .expect("the benchmark's path");
    assert_eq!(
        program,
        format!("{}all_gather_perf", words[2]),
        "{program} vs {}",
        words[2]
    );
    assert_eq!(words.len(), 3);
    // Nothing else but one RUN that only checks the copied programs' libraries (ldd, failing
    // the build on "not found"): no USER, ENTRYPOINT or CMD that would change Google's image.
    let runs: Vec<&str> = all
        .iter()
        .filter(|i| i.keyword == "RUN")
        .map(|i| i.args.as_str())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(
        runs[0].contains("ldd \"$b\"")
            && runs[0].contains("*\"not found\"*")
            && runs[0].contains("exit 1"),
        "{}",
        runs[0]
    );
    for i in &all {
        assert!(
            ["ARG", "FROM", "COPY", "RUN"].contains(&i.keyword.as_str()),
            "{} {}",
            i.keyword,
            i.args
        );
    }
    // hadolint too, where installed (as the repository's Dockerfile).
    let hadolint = std::env::var("NCCL_PERF_HADOLINT").unwrap_or_else(|_| "hadolint".into());
    if Command::new(&hadolint).arg("--version").output().is_ok() {
        ok(Command::new(&hadolint)
            .args(["--no-color", "--failure-threshold", "info"])
            .arg(&path));
    }
}

#[test]
fn indexed_job_has_what_the_job_controller_and_the_bootstrap_need() {
    let docs = yaml_documents("indexed-job.yaml");
    let kind = |k: &str| {
        docs.iter()
            .find(|d| y_str(d, "kind") == k)
            .unwrap_or_else(|| panic!("no {k}"))
    };
    let (svc, job) = (kind("Service"), kind("Job"));
    assert_eq!(y_str(job, "apiVersion"), "batch/v1");
    assert_eq!(y_str(job, "spec.completionMode"), "Indexed");
    let completions = y_int(job, "spec.completions");
    assert_eq!(
        y_int(job, "spec.parallelism"),
        completions,
        "every rank must run at once"
    );
    let pod = y(job, "spec.template.spec");
    let restart = y_str(pod, "restartPolicy");
    assert!(["Never", "OnFailure"].contains(&restart), "{restart}");

    // The headless Service gives pod 0 the name MASTER_ADDR uses.
    let job_name = y_str(job, "metadata.name");
    assert_eq!(y(svc, "spec.clusterIP").as_str(), Some("None"));
    let selector = y(svc, "spec.selector").as_mapping().expect("selector");
    let selects_job = selector.iter().any(|(k, v)| {
        ["batch.kubernetes.io/job-name", "job-name"].contains(&k.as_str().unwrap_or(""))
            && v.as_str() == Some(job_name)
    });
    assert!(selects_job, "the Service selects the Job's pods");
    let subdomain = y_str(pod, "subdomain");
    assert_eq!(subdomain, y_str(svc, "metadata.name"));

    let container = y(pod, "containers.0");
    let env = env_of(container);
    assert_eq!(env["WORLD_SIZE"], completions.to_string());
    assert_eq!(env["MASTER_ADDR"], format!("{job_name}-0.{subdomain}"));
    let port: u16 = env["MASTER_PORT"].parse().expect("port");
    assert!(
        y(container, "ports")
            .as_sequence()
            .expect("ports")
            .iter()
            .any(|p| y_int(p, "containerPort") == i64::from(port))
    );
    assert!(
        !env.contains_key("RANK"),
        "the rank comes from JOB_COMPLETION_INDEX"
    );
    assert!(!env.contains_key("NCCL_NVLS_ENABLE"));
    // One process per pod drives the pod's GPUs: -g equals the GPU limit.
    let gpus = y_int(container, "resources.limits.nvidia.com/gpu");
    let args: Vec<&str> = y(container, "args")
        .as_sequence()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    let g = args.iter().position(|a| *a == "-g").expect("-g");
    assert_eq!(args[g + 1], gpus.to_string());
}

#[test]
fn open_launches_take_their_rendezvous_key_from_a_secret() {
    // The Indexed Jobs meet over the environment bootstrap, whose rendezvous anyone on the pod
    // network could join without a secret (docs/security.md); Kubernetes gives one for free.
    for file in [
        "indexed-job.yaml",
        "indexed-job-efa.yaml",
        "indexed-job-rdma.yaml",
        "indexed-job-gke.yaml",
    ] {
        let docs = yaml_documents(file);
        let job = docs
            .iter()
            .find(|d| y_str(d, "kind") == "Job")
            .unwrap_or_else(|| panic!("{file}: no Job"));
        let pod = y(job, "spec.template.spec");
        let container = y(pod, "containers.0");
        let env = env_of(container);
        assert!(
            !env.contains_key("NCCL_PERF_RENDEZVOUS_KEY"),
            "{file}: a key in the open"
        );
        let key_file = env
            .get("NCCL_PERF_RENDEZVOUS_KEY_FILE")
            .unwrap_or_else(|| panic!("{file}: no NCCL_PERF_RENDEZVOUS_KEY_FILE"));
        let mounts = y(container, "volumeMounts").as_sequence().expect("mounts");
        let mount = mounts
            .iter()
            .find(|m| key_file.starts_with(&format!("{}/", y_str(m, "mountPath"))))
            .unwrap_or_else(|| panic!("{file}: {key_file} is on no mounted volume"));
        assert_eq!(y(mount, "readOnly").as_bool(), Some(true), "{file}");
        let volume_name = y_str(mount, "name");
        let volumes = y(pod, "volumes").as_sequence().expect("volumes");
        let volume = volumes
            .iter()
            .find(|v| y_str(v, "name") == volume_name)
            .unwrap_or_else(|| panic!("{file}: no volume {volume_name}"));
        let secret = y_str(volume, "secret.secretName");
        let key = key_file.rsplit('/').next().unwrap();
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("examples/kubernetes")
                .join(file),
        )
        .unwrap();
        assert!(
            text.contains(&format!(
                "kubectl create secret generic {secret} --from-literal={key}="
            )),
            "{file}: the header says how to make the Secret {secret} with its key {key}"
        );
    }
}

#[test]
fn mpijob_has_what_the_mpi_operator_needs() {
    let docs = yaml_documents("mpijob.yaml");
    assert_eq!(docs.len(), 1);
    let job = &docs[0];
    assert_eq!(y_str(job, "apiVersion"), "kubeflow.org/v2beta1");
    assert_eq!(y_str(job, "kind"), "MPIJob");
    let slots = y_int(job, "spec.slotsPerWorker");
    let specs = y(job, "spec.mpiReplicaSpecs");
    assert_eq!(y_int(specs, "Launcher.replicas"), 1);
    let workers = y_int(specs, "Worker.replicas");
    let worker = y(specs, "Worker.template.spec.containers.0");
    assert_eq!(
        y_int(worker, "resources.limits.nvidia.com/gpu"),
        slots,
        "one slot per GPU"
    );
    // The image's start script: sshd with host keys made at start, as the image's user, whose
    // ~/.ssh receives the operator's keys.
    let sshd: Vec<&str> = y(worker, "command")
        .as_sequence()
        .expect("command")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert_eq!(sshd, ["/usr/local/bin/nccl-perf-sshd"]);
    assert_eq!(y_str(job, "spec.sshAuthMountPath"), "/home/nccl/.ssh");
    let launcher = y(specs, "Launcher.template.spec.containers.0");
    let cmd: Vec<&str> = y(launcher, "command")
        .as_sequence()
        .expect("command")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert_eq!(cmd[0], "mpirun");
    // The image's default build meets through mpirun's PMIx: nothing of nccl-perf's on the line.
    assert!(!cmd.iter().any(|a| a.contains("NCCL_PERF_")), "{cmd:?}");
    let np = cmd.iter().position(|a| *a == "-np").expect("-np");
    assert_eq!(cmd[np + 1], (slots * workers).to_string());
    let g = cmd.iter().position(|a| *a == "-g").expect("-g");
    assert_eq!(cmd[g + 1], "1", "one rank per GPU");
    // Both images are the mpijob target (it has sshd).
    assert!(y_str(launcher, "image").ends_with(":mpijob"));
    assert!(y_str(worker, "image").ends_with(":mpijob"));
}
