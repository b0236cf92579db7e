//! What the tests of the shipped files (tests/ship_*.rs) share: the repository's root and the
//! folder of the binaries built for the test run, temporary folders, running commands, the
//! `ci/install-layout.sh` calls, and the Dockerfile read statically (its instructions, stages
//! and ARGs, and the layout an image built from it holds).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const TOOL: &str = env!("CARGO_BIN_EXE_nccl-perf");

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The folder of the binaries built for this test run (target/debug).
pub fn bin_dir() -> PathBuf {
    Path::new(TOOL)
        .parent()
        .expect("binary has a folder")
        .to_path_buf()
}

/// The benchmark programs (`all_reduce_perf`, ...), from the library's one list of them.
pub fn benchmark_names() -> Vec<&'static str> {
    nccl_perf_bench::collective::all()
        .iter()
        .map(|c| &*format!("{}_perf", c.name()).leak())
        .collect()
}

/// A fresh folder under the system's temp folder, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
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

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

pub fn ok(cmd: &mut Command) -> String {
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

pub fn layout_script() -> Command {
    let mut c = Command::new("bash");
    c.arg(root().join("ci/install-layout.sh"))
        .env_remove("NAME_SUFFIX")
        .env_remove("CARGO_TARGET_DIR");
    c
}

/// `install-layout.sh --print ARGS`: the paths it would install.
pub fn layout_print(args: &[&str]) -> Vec<String> {
    ok(layout_script().arg("--print").args(args))
        .lines()
        .map(str::to_string)
        .collect()
}

pub fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// One Dockerfile instruction: keyword (upper case) and its arguments, continuation lines joined.
#[derive(Debug, Clone)]
pub struct Instruction {
    pub keyword: String,
    pub args: String,
}

/// A build stage: its FROM arguments and the instructions after it.
#[derive(Debug)]
pub struct Stage {
    pub from: String,
    /// `--platform=...`, when given.
    pub platform: Option<String>,
    pub name: Option<String>,
    pub body: Vec<Instruction>,
}

pub fn dockerfile_instructions(text: &str) -> Vec<Instruction> {
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
pub fn dockerfile() -> (BTreeMap<String, String>, Vec<Stage>) {
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
pub fn expand(s: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = s.to_string();
    for (k, v) in vars {
        out = out.replace(&format!("${{{k}}}"), v);
        out = out.replace(&format!("${k}"), v);
    }
    out
}

/// The ARG values visible in a stage (its own ARGs; one without a value takes the global
/// default), with `overrides` as --build-arg.
pub fn stage_vars(stage: &Stage, overrides: &[(&str, &str)]) -> BTreeMap<String, String> {
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
pub const COMMON_DIRS: &[&str] = &[
    "/opt/nccl-tests/build",
    "/opt/nccl_tests/build",
    "/third_party/nccl-tests/build",
    "/workspace/nccl-tests/build",
    "/usr/local/bin",
];

/// What an image holds, from install-layout.sh's `--print`: program files, and links (final
/// paths, `LINK -> TARGET`).
#[derive(Debug, Default)]
pub struct Layout {
    pub files: BTreeSet<String>,
    pub links: BTreeMap<String, String>,
}

impl Layout {
    pub fn from_print(lines: &[String]) -> Layout {
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
    pub fn resolve(&self, path: &str) -> Option<String> {
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
pub fn image_layout(overrides: &[(&str, &str)]) -> (Layout, String) {
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
    // --from names the builder's target folder. Here it is an empty folder: --print prints
    // the same names for every build, and nothing of this checkout's is read (without --from
    // the script would look at target/release).
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

/// Every program path under one of the common folders that a text names is one the image's
/// layout (install-layout.sh --common) answers at.
pub fn assert_paths_installed(what: &str, text: &str) {
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
