//! Pointing NCCL at the built-in plugins, unless a plugin of that kind is already configured.
//!
//! NCCL looks for a profiler (and a tuner) in this order: the library its variable names
//! (`NCCL_PROFILER_PLUGIN`, `NCCL_TUNER_PLUGIN`), else the default name
//! (`libnccl-profiler.so`, `libnccl-tuner.so`), else the network plugin's library
//! (`NCCL_NET_PLUGIN`, default `libnccl-net.so`) when it exports the symbol. Cloud images ship
//! tuners that way (e.g. aws-ofi-nccl's). [`install`] repeats that search; where it finds a
//! plugin it leaves it in place, and the note says what explain cannot show. Otherwise it sets
//! the variable to `STATIC_PLUGIN`, NCCL's name for "the program itself".

use std::sync::OnceLock;

use libloading::Library;

use crate::{profiler, profiler_v1_v3, tuner};

/// What [`install`] did for each kind of plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct Installed {
    /// Ours is the profiler (`None`), or why not.
    pub profiler: Option<String>,
    /// Ours is the tuner (`None`), or why not.
    pub tuner: Option<String>,
    /// A configured tuner chained behind ours ([`crate::chain`]), said in words.
    pub chained: Option<String>,
}

/// What [`install`] did in this process.
static INSTALLED: OnceLock<Installed> = OnceLock::new();

/// What [`install`] did, if it ran.
pub fn installed() -> Option<&'static Installed> {
    INSTALLED.get()
}

/// One kind of plugin as NCCL finds it.
struct Kind {
    /// The variable that names it.
    var: &'static str,
    /// The library NCCL tries when the variable is unset.
    default_lib: &'static str,
    /// The symbols NCCL versions look for.
    symbols: &'static [&'static str],
    /// What explain loses without ours.
    loses: &'static str,
}

const PROFILER: Kind = Kind {
    var: "NCCL_PROFILER_PLUGIN",
    default_lib: "libnccl-profiler.so",
    symbols: &[
        "ncclProfiler_v6",
        "ncclProfiler_v5",
        "ncclProfiler_v4",
        "ncclProfiler_v3",
        "ncclProfiler_v2",
        "ncclProfiler_v1",
    ],
    loses: "the algorithm, protocol, channels and transport path are not shown",
};

const TUNER: Kind = Kind {
    var: "NCCL_TUNER_PLUGIN",
    default_lib: "libnccl-tuner.so",
    symbols: &[
        "ncclTunerPlugin_v5",
        "ncclTunerPlugin_v4",
        "ncclTunerPlugin_v3",
        "ncclTunerPlugin_v2",
    ],
    loses: "NCCL's cost model is not shown",
};

const NET_PREFIX: &str = "libnccl-net";

/// The tables the programs export (the root `build.rs`, which keeps the same list), newest
/// first.
pub const EXPORTED: [&str; 8] = [
    "ncclProfiler_v5",
    "ncclProfiler_v4",
    "ncclProfiler_v3",
    "ncclProfiler_v2",
    "ncclProfiler_v1",
    "ncclTunerPlugin_v5",
    "ncclTunerPlugin_v4",
    "ncclTunerPlugin_v3",
];

/// NCCL's value for "load the plugin from the program itself" (`dlopen(NULL)`; NCCL 2.22 and
/// later, the profiler from 2.23 when it came).
pub const STATIC_PLUGIN: &str = "STATIC_PLUGIN";

/// Where a configured plugin was found, or `None`.
fn configured(
    kind: &Kind,
    env: &dyn Fn(&str) -> Option<String>,
    exports: &dyn Fn(&str, &[&str]) -> bool,
) -> Option<String> {
    if let Some(v) = env(kind.var).filter(|v| !v.is_empty()) {
        return Some(format!("{}={v} is set", kind.var));
    }
    if exports(kind.default_lib, kind.symbols) {
        return Some(format!("{} is installed", kind.default_lib));
    }
    let net = env("NCCL_NET_PLUGIN").filter(|v| !v.is_empty());
    for lib in candidates(NET_PREFIX, net.as_deref()) {
        if exports(&lib, kind.symbols) {
            return Some(format!("the network plugin {lib} brings one"));
        }
    }
    None
}

/// The library NCCL would take its tuner from, in NCCL's order: the variable's library (its
/// value, then `libnccl-tuner-VALUE.so`), else `libnccl-tuner.so`; failing those, the network
/// plugin's library when it exports a tuner.
fn tuner_library(
    env: &dyn Fn(&str) -> Option<String>,
    exports: &dyn Fn(&str, &[&str]) -> bool,
) -> Option<String> {
    let value = env(TUNER.var).filter(|v| !v.is_empty());
    let net = env("NCCL_NET_PLUGIN").filter(|v| !v.is_empty());
    candidates("libnccl-tuner", value.as_deref())
        .into_iter()
        .chain(candidates(NET_PREFIX, net.as_deref()))
        .find(|lib| exports(lib, TUNER.symbols))
}

/// The library names NCCL tries for a plugin variable's value: the value itself, then
/// `PREFIX-value.so` for a bare name; the default `PREFIX.so` when unset.
fn candidates(prefix: &str, value: Option<&str>) -> Vec<String> {
    match value {
        None => vec![format!("{prefix}.so")],
        Some(v) => {
            let mut names = vec![v.to_string()];
            let bare = !(v.contains('/') || v.starts_with("lib") && v.ends_with(".so"));
            if bare {
                names.push(format!("{prefix}-{v}.so"));
            }
            names
        }
    }
}

/// Whether the library `name` loads and exports one of `symbols` (the dynamic loader's search,
/// as NCCL's `dlopen`). A library that loads stays loaded: NCCL loads the same one later (the
/// loader hands it the same copy), and unloading a plugin library between its initializers and
/// NCCL's load of it is a risk not worth taking.
fn library_exports(name: &str, symbols: &[&str]) -> bool {
    // SAFETY: loading runs the library's initializers, as NCCL's own load of it would.
    let Ok(lib) = (unsafe { Library::new(name) }) else {
        return false;
    };
    let found = symbols.iter().any(|s| {
        // SAFETY: the symbol is only looked up, never called.
        unsafe { lib.get::<*const u8>(s.as_bytes()) }.is_ok()
    });
    std::mem::forget(lib);
    found
}

/// Whether the running program exports `symbol` where NCCL looks for it (`dlopen(NULL)`, then
/// `dlsym`).
fn program_exports(symbol: &str) -> bool {
    let this = libloading::os::unix::Library::this();
    // SAFETY: the symbol is only looked up, never called.
    unsafe { this.get::<*const u8>(symbol.as_bytes()) }.is_ok()
}

/// Decides for each kind and returns the variables to set (`(name, value)`) and the outcome.
/// `chain` chains a tuner library behind ours and describes it, or says why it cannot.
fn decide(
    env: &dyn Fn(&str) -> Option<String>,
    exports: &dyn Fn(&str, &[&str]) -> bool,
    chain: &dyn Fn(&str) -> Result<String, String>,
) -> (Vec<(&'static str, &'static str)>, Installed) {
    let mut set = Vec::new();
    let mut chained = None;
    let profiler = match configured(&PROFILER, env, exports) {
        Some(why) => Some(format!(
            "{why}: explain leaves that plugin in place, so {}",
            PROFILER.loses
        )),
        None => {
            set.push((PROFILER.var, STATIC_PLUGIN));
            None
        }
    };
    let tuner = match configured(&TUNER, env, exports) {
        None => {
            set.push((TUNER.var, STATIC_PLUGIN));
            None
        }
        Some(why) if env(TUNER.var).is_some_and(|v| v.eq_ignore_ascii_case("none")) => {
            Some(format!(
                "{why}: NCCL uses no tuner, and explain keeps it so: {}",
                TUNER.loses
            ))
        }
        Some(why) => match tuner_library(env, exports)
            .ok_or_else(|| "it does not load".into())
            .and_then(|lib| chain(&lib))
        {
            Ok(what) => {
                set.push((TUNER.var, STATIC_PLUGIN));
                chained = Some(format!(
                    "{why}: its tuner ({what}) is chained behind explain's and still decides; \
                     NCCL's model is shown as NCCL computed it, before that tuner's changes"
                ));
                None
            }
            Err(e) => Some(format!(
                "{why}: explain leaves that plugin in place ({e}), so {}",
                TUNER.loses
            )),
        },
    };
    (
        set,
        Installed {
            profiler,
            tuner,
            chained,
        },
    )
}

/// Points NCCL at the built-in plugins where none is configured (see the module's text).
///
/// # Safety
/// It sets environment variables: call it before the program starts any thread, and before
/// NCCL is loaded.
pub unsafe fn install() -> &'static Installed {
    if let Some(done) = INSTALLED.get() {
        return done;
    }
    // Keeps the exported tables in the program (they are only reached through `dlsym`).
    std::hint::black_box((
        &raw const profiler::ncclProfiler_v5,
        &raw const profiler::ncclProfiler_v4,
        &raw const profiler_v1_v3::ncclProfiler_v3,
        &raw const profiler_v1_v3::ncclProfiler_v2,
        &raw const profiler_v1_v3::ncclProfiler_v1,
        &raw const tuner::ncclTunerPlugin_v5,
        &raw const tuner::ncclTunerPlugin_v4,
        &raw const tuner::ncclTunerPlugin_v3,
    ));
    let env = |k: &str| std::env::var(k).ok();
    let chain =
        |lib: &str| crate::chain::chain(lib).map(|c| format!("{} from {}", c.name, c.library));
    let (mut set, mut installed) = decide(&env, &library_exports, &chain);
    // NCCL finds ours as it finds any: `dlsym` on the program itself. A program linked
    // without the root package's build.rs (a test binary) exports nothing.
    for (var, prefix, note) in [
        (
            "NCCL_PROFILER_PLUGIN",
            "ncclProfiler_",
            &mut installed.profiler,
        ),
        (
            "NCCL_TUNER_PLUGIN",
            "ncclTunerPlugin_",
            &mut installed.tuner,
        ),
    ] {
        let missing = EXPORTED
            .iter()
            .filter(|s| s.starts_with(prefix))
            .find(|s| !program_exports(s));
        if let (None, Some(symbol)) = (&note, missing) {
            *note = Some(format!(
                "this program does not export {symbol} (it was linked without nccl-perf's \
                 build.rs), so NCCL cannot load the built-in plugin"
            ));
            set.retain(|(k, _)| *k != var);
        }
    }
    if installed.tuner.is_some() {
        installed.chained = None;
    }
    for (k, v) in set {
        // SAFETY: the caller's contract: no other thread exists yet.
        unsafe { std::env::set_var(k, v) };
    }
    INSTALLED.get_or_init(|| installed)
}

/// Points NCCL at the built-in profiler alone, for the hang watch's view of the network links
/// ([`crate::links`], which it enables), unless a profiler is configured (the user's stays and
/// the links are not shown). Returns `None` when ours is in, else why not.
///
/// # Safety
/// As [`install`]: before the program starts any thread, and before NCCL is loaded.
pub unsafe fn install_profiler() -> Option<String> {
    std::hint::black_box((
        &raw const profiler::ncclProfiler_v5,
        &raw const profiler::ncclProfiler_v4,
    ));
    let env = |k: &str| std::env::var(k).ok();
    if let Some(why) = configured(&PROFILER, &env, &library_exports) {
        return Some(format!("{why}, so NCCL's network steps are not watched"));
    }
    if let Some(symbol) = EXPORTED[..2].iter().find(|s| !program_exports(s)) {
        return Some(format!(
            "this program does not export {symbol} (it was linked without nccl-perf's build.rs)"
        ));
    }
    // SAFETY: the caller's contract: no other thread exists yet.
    unsafe { std::env::set_var(PROFILER.var, STATIC_PLUGIN) };
    crate::links::enable();
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_chain(lib: &str) -> Result<String, String> {
        Err(format!("{lib}: not in this test"))
    }

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn installs_both_where_nothing_is_configured() {
        let (set, got) = decide(&env_of(&[]), &|_, _| false, &no_chain);
        assert_eq!(
            set,
            vec![
                ("NCCL_PROFILER_PLUGIN", STATIC_PLUGIN),
                ("NCCL_TUNER_PLUGIN", STATIC_PLUGIN)
            ]
        );
        assert_eq!(
            got,
            Installed {
                profiler: None,
                tuner: None,
                chained: None
            }
        );
    }

    #[test]
    fn leaves_a_users_plugin_and_says_what_is_lost() {
        let (set, got) = decide(
            &env_of(&[(
                "NCCL_TUNER_PLUGIN",
                "/opt/aws-ofi-nccl/lib/libnccl-ofi-tuner.so",
            )]),
            &|_, _| false,
            &no_chain,
        );
        assert_eq!(set, vec![("NCCL_PROFILER_PLUGIN", STATIC_PLUGIN)]);
        assert_eq!(got.profiler, None);
        assert_eq!(
            got.tuner.as_deref(),
            Some(
                "NCCL_TUNER_PLUGIN=/opt/aws-ofi-nccl/lib/libnccl-ofi-tuner.so is set: explain \
                 leaves that plugin in place (it does not load), so NCCL's cost model is not \
                 shown"
            )
        );
    }

    #[test]
    fn a_configured_tuner_is_chained_where_it_can_be() {
        // A network plugin's tuner (aws-ofi-nccl's way): chained, and NCCL is pointed at ours.
        let exports = |lib: &str, syms: &[&str]| {
            lib == "libnccl-net-ofi.so" && syms.contains(&"ncclTunerPlugin_v4")
        };
        let chain = |lib: &str| Ok(format!("ofi from {lib}"));
        let (set, got) = decide(&env_of(&[("NCCL_NET_PLUGIN", "ofi")]), &exports, &chain);
        assert_eq!(
            set,
            vec![
                ("NCCL_PROFILER_PLUGIN", STATIC_PLUGIN),
                ("NCCL_TUNER_PLUGIN", STATIC_PLUGIN)
            ]
        );
        assert_eq!(got.tuner, None);
        assert!(
            got.chained.as_deref().unwrap().starts_with(
                "the network plugin libnccl-net-ofi.so brings one: its tuner (ofi from \
                 libnccl-net-ofi.so) is chained"
            ),
            "{got:?}"
        );
        // The variable's library comes first, as NCCL takes it.
        let exports = |lib: &str, _: &[&str]| lib == "libnccl-tuner-acme.so";
        let (_, got) = decide(&env_of(&[("NCCL_TUNER_PLUGIN", "acme")]), &exports, &chain);
        assert!(
            got.chained
                .unwrap()
                .contains("(ofi from libnccl-tuner-acme.so)")
        );
        // A tuner that cannot be chained (v2 only) is left in place, with the reason.
        let refuse = |lib: &str| Err(format!("{lib} has no tuner table of version 3 or later"));
        let (set, got) = decide(&env_of(&[("NCCL_TUNER_PLUGIN", "acme")]), &exports, &refuse);
        assert_eq!(set, vec![("NCCL_PROFILER_PLUGIN", STATIC_PLUGIN)]);
        assert!(
            got.tuner
                .unwrap()
                .contains("(libnccl-tuner-acme.so has no tuner table")
        );
        // NCCL_TUNER_PLUGIN=none: NCCL runs without a tuner, and explain does not add one.
        let (set, got) = decide(&env_of(&[("NCCL_TUNER_PLUGIN", "none")]), &exports, &chain);
        assert_eq!(set, vec![("NCCL_PROFILER_PLUGIN", STATIC_PLUGIN)]);
        assert!(got.tuner.unwrap().contains("NCCL uses no tuner"));
        assert_eq!(got.chained, None);
    }

    #[test]
    fn default_libraries_count_as_configured() {
        let exports = |lib: &str, _: &[&str]| lib == "libnccl-profiler.so";
        let (set, got) = decide(&env_of(&[]), &exports, &no_chain);
        assert_eq!(set, vec![("NCCL_TUNER_PLUGIN", STATIC_PLUGIN)]);
        assert!(
            got.profiler
                .unwrap()
                .starts_with("libnccl-profiler.so is installed")
        );
    }

    #[test]
    fn candidate_names_follow_nccls_rules() {
        assert_eq!(candidates("libnccl-net", None), vec!["libnccl-net.so"]);
        assert_eq!(
            candidates("libnccl-net", Some("ofi")),
            vec!["ofi", "libnccl-net-ofi.so"]
        );
        assert_eq!(candidates("libnccl-net", Some("libx.so")), vec!["libx.so"]);
        assert_eq!(candidates("libnccl-net", Some("/a/b.so")), vec!["/a/b.so"]);
    }

    #[test]
    fn a_test_binary_does_not_export_the_tables() {
        // build.rs's export applies to the programs only (tests/explain_exports.rs checks them).
        assert!(!program_exports("ncclProfiler_v5"));
        assert!(program_exports("getenv"));
    }

    #[test]
    fn a_missing_library_exports_nothing() {
        assert!(!library_exports("libnccl-perf-no-such-library.so", &["x"]));
        assert!(library_exports("libc.so.6", &["getenv"]));
    }
}
