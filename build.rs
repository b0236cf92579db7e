//! Exports `--explain`'s plugin tables (`crates/capture`) from the programs' dynamic symbol
//! table, where NCCL finds them with `NCCL_PROFILER_PLUGIN=STATIC_PLUGIN` (`dlopen(NULL)` and
//! `dlsym`). Executables export nothing by default. `tests/explain_cli.rs`
//! (`every_program_exports_its_plugins_where_nccl_looks`) checks the symbols are there.

/// The tables NCCL looks up by name (`crates/capture/src/ffi/profiler.rs`,
/// `profiler_v1_v3.rs`, `tuner.rs`): profiler v5 (NCCL 2.28), v4 (2.27), v3 (2.26), v2
/// (2.24–2.25), v1 (2.23); tuner v5 (2.28), v4 (2.24–2.27), v3 (2.22–2.23). Keep in step with
/// `crates/capture/src/ffi/install.rs` (`EXPORTED`).
const EXPORTED: [&str; 8] = [
    "ncclProfiler_v5",
    "ncclProfiler_v4",
    "ncclProfiler_v3",
    "ncclProfiler_v2",
    "ncclProfiler_v1",
    "ncclTunerPlugin_v5",
    "ncclTunerPlugin_v4",
    "ncclTunerPlugin_v3",
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        for s in EXPORTED {
            println!("cargo:rustc-link-arg-bins=-Wl,--export-dynamic-symbol={s}");
            // The overhead bench's `--explain` (benches/overhead.rs).
            println!("cargo:rustc-link-arg-benches=-Wl,--export-dynamic-symbol={s}");
            // tests/capture_old_nccl.rs: a stand-in NCCL finds them in the test program.
            println!("cargo:rustc-link-arg-tests=-Wl,--export-dynamic-symbol={s}");
        }
    }
}
