//! The three public recipes users follow to run nccl-tests ("seeds": Nebius' mpirun and Slurm
//! guide, a containerised mpirun over SSH, Google's GKE A4X Max JobSet), run with our binaries
//! where theirs were. `tests/recipes/*.cmd` hold each recipe's command lines (written for this
//! test from the recipe; see the README there); `tests/recipes/launch.sh` makes them run on this
//! one machine (hosts become localhost, the program paths a stand-in that starts our binary with
//! `--dry-run`, each group of ranks posing as a host of the recipe). The launch must form one job
//! with the recipe's ranks, hosts and GPUs. Then each recipe's own check of the output
//! (`tests/recipes/checks.sh`) runs on nccl-tests' output and on ours of the same results, and
//! must give the same verdict.
//!
//! Every recipe runs in every build: the default build (no MPI linked) under the mpirun recipes
//! as published, meeting through the launcher's PMIx with no setting added, and the MPI build
//! (`cargo test --features mpi --test integration -- recipes::`, as CI runs it too) through MPI.
//! The mpirun recipes need Open MPI's `mpirun`.

use crate::programs;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn recipes() -> PathBuf {
    root().join("tests/recipes")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Shell-quoted words.
fn quoted(words: &[std::ffi::OsString]) -> String {
    words
        .iter()
        .map(|w| format!("'{}'", w.to_string_lossy().replace('\'', "'\\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A fresh folder standing in for the nodes' file system.
struct Nodes {
    dir: PathBuf,
}

impl Nodes {
    fn new(name: &str) -> Nodes {
        let dir = programs::scratch(&format!("recipe-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("home")).expect("mkdir");
        Nodes { dir }
    }

    /// At `path` (absolute, as the recipe names it; under the folder), a stand-in for the
    /// recipe's binary: our `bin` with `--dry-run`, its process posing as host
    /// `node<rank / slots>` (`NCCL_HOSTID`), rank from the launcher's variables. Under mpirun
    /// its local rank is the one mpirun gives on such a host, `rank % slots` (mpirun on this
    /// one machine counts all the job's processes as local).
    fn program(&self, path: &str, bin: &str, slots: usize) {
        let at = self.dir.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(at.parent().expect("parent")).expect("mkdir");
        let script = format!(
            "#!/bin/sh\n\
             rank=${{OMPI_COMM_WORLD_RANK:-${{SLURM_PROCID:-0}}}}\n\
             NCCL_HOSTID=node$((rank / {slots}))\n\
             export NCCL_HOSTID\n\
             if [ -n \"${{OMPI_COMM_WORLD_LOCAL_RANK:-}}\" ]; then\n\
             OMPI_COMM_WORLD_LOCAL_RANK=$((rank % {slots}))\n\
             export OMPI_COMM_WORLD_LOCAL_RANK\n\
             fi\n\
             exec {} --dry-run \"$@\"\n",
            quoted(&programs::program_words(bin))
        );
        std::fs::write(&at, script).expect("write");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    /// Runs the recipe file `cmd` after launch.sh, with `nodes` x `slots` ranks and `vars`.
    fn run(&self, cmd: &str, nodes: usize, slots: usize, vars: &[(&str, &str)]) -> Output {
        let script = format!(
            "source '{}'\nsource '{}'\n",
            recipes().join("launch.sh").display(),
            recipes().join(cmd).display()
        );
        let mut c = Command::new("timeout");
        c.args(["180", "bash", "-c", &script])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.dir.join("home"))
            .env("RECIPE_ROOT", &self.dir)
            .env("RECIPE_NODES", nodes.to_string())
            .env("RECIPE_SLOTS", slots.to_string())
            .env("NCCL_PERF_BOOTSTRAP_TIMEOUT", "90")
            .env(
                "NCCL_PERF_RENDEZVOUS_PORT",
                programs::free_port().to_string(),
            )
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .stdin(Stdio::null());
        for (k, v) in vars {
            c.env(k, v);
        }
        c.output().expect("bash runs")
    }
}

/// The dry run's plan: exit 0, one consistent job of `processes` x `gpus` ranks, and each
/// rank's (local rank, device) as the recipe's hosts give them.
fn assert_plan(o: &Output, processes: usize, gpus: usize, per_host: usize) -> String {
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert_eq!(out.matches("# nccl-perf dry run of ").count(), 1, "{out}");
    let ranks = processes * gpus;
    assert!(
        out.contains(&format!(
            "# Processes {processes} x threads 1 x GPUs {gpus} = {ranks} ranks in 1 communicator(s)"
        )),
        "{out}"
    );
    assert!(
        out.contains("# Dry run complete: the launch is consistent"),
        "{out}"
    );
    let rows: Vec<(usize, usize, usize)> = out
        .lines()
        .filter(|l| l.starts_with("#  Rank "))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let at = |key: &str| -> usize {
                let i = w.iter().position(|x| *x == key).expect(key);
                w[i + 1].parse().expect("number")
            };
            (at("Rank"), at("rank"), at("device"))
        })
        .collect();
    assert_eq!(rows.len(), ranks, "{out}");
    for (rank, local, device) in rows {
        let process = rank / gpus;
        assert_eq!(local, process % per_host, "rank {rank}: {out}");
        assert_eq!(
            device,
            (process % per_host) * gpus + rank % gpus,
            "rank {rank}: {out}"
        );
    }
    out
}

fn gpus(n: usize) -> String {
    (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(",")
}

/// Nebius under Slurm: the srun line of its sbatch script, in the container with our image
/// (`/opt/nccl_tests/build` is one of the image's paths), 2 nodes of 8 tasks.
#[test]
fn nebius_srun_forms_one_job_of_8_ranks_per_node() {
    let nodes = Nodes::new("nebius-srun");
    nodes.program(
        "/opt/nccl_tests/build/all_reduce_perf",
        env!("CARGO_BIN_EXE_all_reduce_perf"),
        8,
    );
    let o = nodes.run(
        "nebius-srun.cmd",
        2,
        8,
        &[
            ("CUDA_VISIBLE_DEVICES", &gpus(8)),
            ("NCCL_TOPO_FILE", "/etc/nccl-topo-h100-v1.xml"),
            ("IMAGE", "registry.example/nccl-perf:latest"),
        ],
    );
    let out = assert_plan(&o, 16, 1, 8);
    assert!(
        out.contains("# Bootstrap: slurm environment, TCP rendezvous"),
        "{out}"
    );
    eprintln!("{out}");
}

/// One `mpirun` at a time: Open MPI's session folder (`/tmp/ompi.<host>.<uid>`) is made by
/// every `mpirun`, and two starting at once can collide ("A call to mkdir was unable to create
/// the desired directory ... File exists").
static MPIRUN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Whether `mpirun` is there for the mpirun recipes (skipped where missing; a failure under CI).
fn have_mpirun() -> bool {
    if Command::new("mpirun").arg("--version").output().is_ok() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "mpirun is not installed: under CI it must be (.ci/run installs openmpi-bin)"
    );
    eprintln!("skipped: mpirun is not installed");
    false
}

/// How a recipe's `mpirun` job met: the MPI build through MPI; the default build through
/// mpirun's PMIx, with nothing in the recipe changed for it (no `NCCL_PERF_RENDEZVOUS`).
fn assert_mpirun_bootstrap(out: &str) {
    let engine = if cfg!(feature = "mpi") {
        "# Bootstrap: MPI "
    } else {
        "# Bootstrap: PMIx "
    };
    assert!(out.contains(engine), "{engine} expected: {out}");
}

/// Nebius across VMs: 4 hosts of 8 GPUs, `-np 32`, one GPU per process, the binary in
/// `~/nccl-tests/build` on every VM.
#[test]
fn nebius_mpirun_forms_one_job_of_32_ranks_on_4_hosts() {
    if !have_mpirun() {
        return;
    }
    let _one = MPIRUN.lock().unwrap_or_else(|e| e.into_inner());
    let nodes = Nodes::new("nebius-mpirun");
    nodes.program(
        "/home/nccl-tests/build/all_reduce_perf",
        env!("CARGO_BIN_EXE_all_reduce_perf"),
        8,
    );
    let o = nodes.run(
        "nebius-mpirun.cmd",
        4,
        8,
        &[
            ("CUDA_VISIBLE_DEVICES", &gpus(8)),
            ("NCCL_TOPO_FILE", "/etc/nccl-topo-h100-v1.xml"),
        ],
    );
    let out = assert_plan(&o, 32, 1, 8);
    assert_mpirun_bootstrap(&out);
    eprintln!("{out}");
}

/// The containerised recipe: 2 hosts, one process each driving 8 GPUs (`-g 8`), the binary at
/// `/workspace/nccl-tests/build` (where the recipe's image built nccl-tests).
#[test]
fn containerised_mpirun_forms_one_job_of_2_processes_of_8_gpus() {
    if !have_mpirun() {
        return;
    }
    let _one = MPIRUN.lock().unwrap_or_else(|e| e.into_inner());
    let nodes = Nodes::new("containerised");
    nodes.program(
        "/workspace/nccl-tests/build/all_reduce_perf",
        env!("CARGO_BIN_EXE_all_reduce_perf"),
        1,
    );
    let o = nodes.run(
        "containerised-mpirun.cmd",
        2,
        1,
        &[
            ("CUDA_VISIBLE_DEVICES", &gpus(8)),
            ("LD_LIBRARY_PATH", "/usr/local/nvidia/lib64"),
        ],
    );
    let out = assert_plan(&o, 2, 8, 1);
    assert_mpirun_bootstrap(&out);
    eprintln!("{out}");
}

/// Google's A4X Max JobSet: 2 workers of 4 GPUs (GB300), the head's mpirun over the hostfile
/// of 4 slots per worker, `/third_party/nccl-tests/build/all_gather_perf` (our binaries mounted
/// there by examples/kubernetes/gke-a4x-max), `NCCL_TESTS_SPLIT_MASK=0x0`.
#[test]
fn gke_a4x_max_jobset_mpirun_forms_one_job_of_4_ranks_per_worker() {
    if !have_mpirun() {
        return;
    }
    let _one = MPIRUN.lock().unwrap_or_else(|e| e.into_inner());
    let nodes = Nodes::new("gke-a4x-max");
    nodes.program(
        "/third_party/nccl-tests/build/all_gather_perf",
        env!("CARGO_BIN_EXE_all_gather_perf"),
        4,
    );
    let o = nodes.run(
        "gke-a4x-max-mpirun.cmd",
        2,
        4,
        &[
            ("CUDA_VISIBLE_DEVICES", &gpus(4)),
            ("N_NODES", "2"),
            ("MY_JOB_NAME", "allgather-worker-0"),
            ("MY_SUBDOMAIN", "allgather"),
            ("LD_LIBRARY_PATH", "/usr/local/nvidia/lib64"),
        ],
    );
    let out = assert_plan(&o, 8, 1, 4);
    assert!(out.contains("all_gather_perf"), "{out}");
    assert_mpirun_bootstrap(&out);
    eprintln!("{out}");
}

/// The verdict (pass: exit 0) of `check_<seed> <args>` of checks.sh on `input`.
fn verdict(seed: &str, args: &str, input: &[u8]) -> bool {
    use std::io::Write;
    let script = format!(
        "source '{}'\ncheck_{seed} {args}\n",
        recipes().join("checks.sh").display()
    );
    let mut child = Command::new("bash")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bash runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write");
    let o = child.wait_with_output().expect("bash ends");
    match o.status.code() {
        Some(0) => true,
        Some(1) => false,
        other => panic!("check_{seed}: {other:?} {}", text(&o.stderr)),
    }
}

/// Our table of the results in `log` (nccl-tests' output): `nccl-perf parse` then `report`,
/// which prints with the same formatter as the benchmarks.
fn ours(log: &Path) -> Vec<u8> {
    let tool = env!("CARGO_BIN_EXE_nccl-perf");
    let json = programs::scratch(&format!(
        "recipe-{}",
        log.file_name().expect("name").to_string_lossy()
    ))
    .join("results.json");
    let o = programs::program(tool)
        .arg("parse")
        .arg(log)
        .output()
        .expect("parse");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    std::fs::write(&json, &o.stdout).expect("write");
    let o = programs::program(tool)
        .arg("report")
        .arg(&json)
        .output()
        .expect("report");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("# Avg bus bandwidth"));
    o.stdout
}

/// Each seed's output check gives nccl-tests' output and ours the same verdict: pass as
/// recorded, and fail where the check's own bound is moved past the results.
#[test]
fn the_seeds_output_checks_give_our_output_the_verdict_of_nccl_tests() {
    let cases = [
        // (seed, log, args that pass, args that fail)
        ("nebius", "nebius-allreduce.log", "", "330"),
        ("containerised", "containerised-allreduce.log", "16", "24"),
        ("gke", "gke-a4x-max-allgather.log", "", ""),
    ];
    for (seed, log, pass, fail) in cases {
        let path = recipes().join(log);
        let theirs = std::fs::read(&path).expect("log");
        let ours = ours(&path);
        for (args, want) in [(pass, true), (fail, false)] {
            if seed == "gke" && !want {
                continue;
            }
            let (t, o) = (verdict(seed, args, &theirs), verdict(seed, args, &ours));
            eprintln!("check_{seed} {args}: nccl-tests {t}, nccl-perf {o}");
            assert_eq!(t, want, "check_{seed} {args} on {log}");
            assert_eq!(
                o,
                want,
                "check_{seed} {args} on ours of {log}:\n{}",
                text(&ours)
            );
        }
    }
    // The A4X check fails on a run with wrong values, in both outputs.
    let log = std::fs::read_to_string(recipes().join("gke-a4x-max-allgather.log")).expect("log");
    let broken = log.replacen("  0.13       0", "  0.13       3", 1).replace(
        "Out of bounds values : 0 OK",
        "Out of bounds values : 3 FAILED",
    );
    assert_ne!(broken, log);
    let path = programs::scratch("recipe-gke-broken").join("broken.log");
    std::fs::write(&path, &broken).expect("write");
    assert!(!verdict("gke", "", broken.as_bytes()));
    let tool = env!("CARGO_BIN_EXE_nccl-perf");
    let parsed = programs::program(tool)
        .arg("parse")
        .arg(&path)
        .output()
        .expect("parse");
    let json = path.with_extension("json");
    std::fs::write(&json, &parsed.stdout).expect("write");
    let report = programs::program(tool)
        .arg("report")
        .arg(&json)
        .output()
        .expect("report");
    assert!(
        !verdict("gke", "", &report.stdout),
        "{}",
        text(&report.stdout)
    );
}

/// The lines docs/recipes.md gives for GKE A4X Max's JobSet (the shell block that sets
/// `NUM_NODES`), run with a stand-in `kubectl` that records what it is given.
fn gke_apply_block() -> String {
    let doc = std::fs::read_to_string(root().join("docs/recipes.md")).expect("docs/recipes.md");
    let start = doc.find("```sh\nNUM_NODES=").expect("the GKE apply block");
    let body = &doc[start + 6..];
    body[..body.find("```").expect("the block's end")].to_string()
}

/// Runs the GKE block in `dir` (which holds the manifest) with `kubectl` recording its input
/// and answering `logs` with `log`: (exit code, stderr, what `kubectl apply` was given).
fn run_gke_block(dir: &Path, log: &str) -> (Option<i32>, String, String) {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let kubectl = bin.join("kubectl");
    std::fs::write(
        &kubectl,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n  apply) cat > '{applied}' ;;\n  get) echo pod/allgather-worker-0-0-abcde ;;\n  logs) cat '{log}' ;;\nesac\n",
            applied = dir.join("applied.yaml").display(),
            log = dir.join("head.log").display()
        ),
    )
    .unwrap();
    std::fs::write(dir.join("head.log"), log).unwrap();
    let _ = Command::new("chmod").arg("+x").arg(&kubectl).status();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = Command::new("bash")
        .arg("-c")
        .arg(gke_apply_block())
        .current_dir(dir)
        .env("PATH", path)
        .output()
        .expect("bash");
    let applied = std::fs::read_to_string(dir.join("applied.yaml")).unwrap_or_default();
    (o.status.code(), text(&o.stderr), applied)
}

#[test]
fn the_gke_recipe_lines_set_the_node_count_and_refuse_a_changed_manifest_or_foreign_table() {
    let dir = std::env::temp_dir().join(format!("nccl-perf-gke-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = "replicas: __NUM_NODES__\nimage: us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-gib-a4x-max-arm64:v1.1.1\n";
    std::fs::write(dir.join("nccl-test-a4x-max-jobset.yaml"), manifest).unwrap();
    let ours =
        "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809 (nccl-perf 0.1.0)\n";
    let (code, err, applied) = run_gke_block(&dir, ours);
    assert_eq!(code, Some(0), "{err}");
    // The guide's `NUM_NODES=2 sed ...${NUM_NODES}...` gave `replicas: ` (nothing).
    assert!(applied.contains("replicas: 2\n"), "{applied}");
    assert!(
        applied.contains("image: REGISTRY/nccl-gib-a4x-max-arm64:v1.1.1-nccl-perf"),
        "{applied}"
    );
    // nccl-tests' own table (Google's binaries still in place): a loud failure.
    let theirs = "# nccl-tests version 2.17.6 nccl-headers=22809 nccl-library=22809\n";
    let (code, err, _) = run_gke_block(&dir, theirs);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("the table is not nccl-perf's"), "{err}");
    // A manifest on a newer image tag: nothing is applied.
    std::fs::write(
        dir.join("nccl-test-a4x-max-jobset.yaml"),
        manifest.replace("v1.1.1", "v1.2.0"),
    )
    .unwrap();
    let _ = std::fs::remove_file(dir.join("applied.yaml"));
    let (code, err, applied) = run_gke_block(&dir, ours);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("the manifest no longer names"), "{err}");
    assert!(applied.is_empty(), "{applied}");
    let _ = std::fs::remove_dir_all(&dir);
}
