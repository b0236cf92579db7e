//! Exports `--explain`'s plugin tables (`crates/capture`) from the programs' dynamic symbol
//! table, where NCCL finds them with `NCCL_PROFILER_PLUGIN=STATIC_PLUGIN` (`dlopen(NULL)` and
//! `dlsym`). Executables export nothing by default. `tests/explain_cli.rs`
//! (`every_program_exports_its_plugins_where_nccl_looks`) checks the symbols are there.

/// The tables NCCL looks up by name (`crates/capture/src/ffi/profiler.rs`, `tuner.rs`).
const EXPORTED: [&str; 4] = [
    "ncclProfiler_v5",
    "ncclProfiler_v4",
    "ncclTunerPlugin_v5",
    "ncclTunerPlugin_v4",
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        for s in EXPORTED {
            println!("cargo:rustc-link-arg-bins=-Wl,--export-dynamic-symbol={s}");
            // The overhead bench's `--explain` (benches/overhead.rs).
            println!("cargo:rustc-link-arg-benches=-Wl,--export-dynamic-symbol={s}");
        }
    }
}
