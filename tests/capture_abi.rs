//! `--explain`'s plugin structs (crates/capture/src/ffi/abi.rs) have the layout a C compiler gives
//! the same declarations (tests/fakes/plugin_abi.c): the Rust offsets and sizes go in as `-D`
//! definitions and the C file checks them at compile time, for the target's compiler
//! (`NCCL_PERF_TEST_CC` when the tests run for another architecture).

use crate::programs;

use nccl_perf_capture::abi::{Coll, DescrV4, DescrV5, NetPlugin, P2p, ProfilerV5, TunerV5};
use std::mem::{offset_of, size_of};
use std::process::Command;

#[test]
fn rust_and_c_agree_on_the_plugin_layouts() {
    let Some(cc) = programs::c_compiler() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "no C compiler (cc, gcc or clang): under CI there must be one (.ci/run installs g++)"
        );
        eprintln!("skipped: no C compiler to check the plugin ABI against");
        return;
    };
    let defines = [
        ("V4_RANK", offset_of!(DescrV4, rank)),
        ("V4_BODY", offset_of!(DescrV4, body)),
        ("V5_RANK", offset_of!(DescrV5, rank)),
        ("V5_BODY", offset_of!(DescrV5, body)),
        ("COLL_COUNT", offset_of!(Coll, count)),
        ("COLL_DATATYPE", offset_of!(Coll, datatype)),
        ("COLL_CHANNELS", offset_of!(Coll, n_channels)),
        ("COLL_ALGO", offset_of!(Coll, algo)),
        ("COLL_PROTO", offset_of!(Coll, proto)),
        ("P2P_PEER", offset_of!(P2p, peer)),
        ("P2P_CHANNELS", offset_of!(P2p, n_channels)),
        ("NET_DATA", offset_of!(NetPlugin, data)),
        ("PROFILER_V5_SIZE", size_of::<ProfilerV5>()),
        ("TUNER_V5_SIZE", size_of::<TunerV5>()),
    ];
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fakes/plugin_abi.c");
    let dir = programs::scratch("plugin-abi");
    let mut c = Command::new(&cc);
    c.args(["-std=c11", "-c", src, "-o"])
        .arg(dir.join("plugin_abi.o"));
    for (name, v) in defines {
        c.arg(format!("-D{name}={v}"));
    }
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cc}: {e}"));
    assert!(
        out.status.success(),
        "the C layout differs from the Rust one:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The check itself can fail: a wrong figure is refused.
    let mut wrong = Command::new(&cc);
    wrong
        .args(["-std=c11", "-c", src, "-o"])
        .arg(dir.join("wrong.o"));
    for (name, v) in defines {
        let v = if name == "COLL_ALGO" { v + 8 } else { v };
        wrong.arg(format!("-D{name}={v}"));
    }
    let out = wrong
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cc}: {e}"));
    assert!(!out.status.success(), "a wrong offset was not refused");
}
