//! `--explain` on NCCL 2.22 to 2.26 without NCCL: a stand-in (tests/fakes/fake_nccl_plugins.c)
//! loads the plugins from this program as those versions do (`STATIC_PLUGIN`: `dlopen(NULL)`,
//! `dlsym` of each version's tables, newest first) and calls them with C descriptors of each
//! version's layout. The test program exports the tables as the benchmarks do (the root
//! build.rs). What is recorded is what NCCL said: Ring/LL128 on 6 channels, and the cost table.

use crate::programs;

use std::ffi::{CStr, c_char, c_int};

type Call = unsafe extern "C" fn(c_int, *mut c_char, *mut c_char) -> c_int;

/// Tables found, collective events sent (`fake_nccl_call`).
fn call(f: Call, version: c_int) -> (String, String, c_int) {
    let (mut p, mut t) = ([0 as c_char; 64], [0 as c_char; 64]);
    // SAFETY: the stand-in writes NUL-terminated names shorter than 64 bytes.
    let sent = unsafe { f(version, p.as_mut_ptr(), t.as_mut_ptr()) };
    // SAFETY: as above, NUL-terminated.
    let name = |b: &[c_char; 64]| {
        unsafe { CStr::from_ptr(b.as_ptr()) }
            .to_string_lossy()
            .into()
    };
    (name(&p), name(&t), sent)
}

#[test]
fn nccl_2_22_to_2_26_find_and_drive_the_programs_tables() {
    // Kept in the test program: reached only through `dlsym`.
    std::hint::black_box((
        &raw const nccl_perf_capture::profiler_v1_v3::ncclProfiler_v1,
        &raw const nccl_perf_capture::profiler_v1_v3::ncclProfiler_v2,
        &raw const nccl_perf_capture::profiler_v1_v3::ncclProfiler_v3,
        &raw const nccl_perf_capture::tuner::ncclTunerPlugin_v3,
        &raw const nccl_perf_capture::tuner::ncclTunerPlugin_v4,
    ));
    let dir = programs::scratch("capture-old-nccl");
    let Some(lib) = programs::fake_library(&dir, "fake_nccl_plugins.c", "libfake.so", &[], &[])
    else {
        return;
    };
    let path = std::ffi::CString::new(lib.to_str().unwrap()).unwrap();
    // SAFETY: our stand-in library, which has no initializers; kept loaded.
    let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!handle.is_null());
    // SAFETY: the stand-in's function of type `Call`.
    let f: Call = unsafe {
        let sym = libc::dlsym(handle, c"fake_nccl_call".as_ptr());
        assert!(!sym.is_null());
        std::mem::transmute::<*mut libc::c_void, Call>(sym)
    };
    let _g = programs::capture_lock();

    // Not armed: NCCL sees an empty mask and sends nothing.
    let _ = nccl_perf_capture::take();
    let (p, _, sent) = call(f, 22304);
    assert_eq!((p.as_str(), sent), ("ncclProfiler_v1", 0));

    for (version, profiler, tuner) in [
        (22203, "", "ncclTunerPlugin_v3"),
        (22304, "ncclProfiler_v1", "ncclTunerPlugin_v3"),
        (22503, "ncclProfiler_v2", "ncclTunerPlugin_v4"),
        (22605, "ncclProfiler_v3", "ncclTunerPlugin_v4"),
    ] {
        nccl_perf_capture::arm();
        let (p, t, sent) = call(f, version);
        let taken = nccl_perf_capture::take();
        assert_eq!((p.as_str(), t.as_str()), (profiler, tuner), "{version}");
        assert_eq!(taken.costs.len(), 1, "{version}: the cost table");
        assert_eq!(taken.costs[0].func, "AllReduce");
        assert!(
            taken.costs[0]
                .table
                .contains(&("Ring".to_string(), "LL128".to_string(), 12.5)),
            "{version}: {:?}",
            taken.costs[0].table
        );
        if profiler.is_empty() {
            assert!(taken.colls.is_empty());
            continue;
        }
        assert_eq!(sent, 1, "{version}: one collective event while armed");
        let c = &taken.colls[0];
        assert_eq!(c.func, "AllReduce", "{version}");
        assert_eq!(c.algo.as_deref(), Some("Ring"), "{version}");
        assert_eq!(c.proto.as_deref(), Some("LL128"), "{version}");
        assert_eq!(c.channels, 6, "{version}");
    }
}
