//! `--explain`'s tuner chained behind a configured one (crates/capture/src/ffi/chain.rs): driven as
//! NCCL drives a tuner, against a stand-in tuner library built here (tests/fakes/fake_tuner.c,
//! which exports a v5 and a v3 table). Ours records NCCL's cost table before the configured
//! tuner changes it, and the configured tuner's decisions reach NCCL unchanged.

use crate::programs;

use nccl_perf_capture::tuner::{ncclTunerPlugin_v4, ncclTunerPlugin_v5};
use std::ffi::c_int;
use std::ptr::null_mut;

#[test]
fn a_configured_tuner_still_decides_and_nccls_model_is_recorded_first() {
    let _g = programs::capture_lock();
    let dir = programs::scratch("capture-chain");
    let Some(lib) = programs::fake_library(&dir, "fake_tuner.c", "libnccl-tuner-fake.so", &[], &[])
    else {
        return;
    };
    let chained = nccl_perf_capture::chain::chain(lib.to_str().unwrap()).expect("chains");
    assert_eq!(chained.name, "fake-tuner");
    let other = nccl_perf_capture::chain::chain("libc.so.6").err().unwrap();
    assert!(other.contains("is chained already"), "{other}");

    // NCCL 2.28 calls our v5 table: the fake's v5 answers.
    let t = &ncclTunerPlugin_v5.0;
    let mut ctx = null_mut();
    let r = unsafe { (t.init)(&mut ctx, 1, 4, 2, std::ptr::null(), null_mut(), null_mut()) };
    assert_eq!(r, 0);
    assert!(!ctx.is_null());
    let mut table = [[-1.0f32; 3]; 7];
    table[1][2] = 40.0; // Ring/Simple: NCCL's choice before the tuner
    let mut channels: c_int = 0;
    nccl_perf_capture::arm();
    let r = unsafe {
        (t.get_coll_info)(
            ctx,
            4,
            1 << 20,
            1,
            table.as_mut_ptr().cast(),
            7,
            3,
            0,
            &mut channels,
        )
    };
    let taken = nccl_perf_capture::take();
    assert_eq!(r, 0);
    assert_eq!(channels, 7, "the configured tuner's decision reaches NCCL");
    assert_eq!(table[0][0], 0.5, "its change to the table too");
    assert_eq!(
        taken.costs[0].table,
        vec![("Ring".to_string(), "Simple".to_string(), 40.0)],
        "what explain shows is NCCL's table before the configured tuner's change"
    );
    assert_eq!(unsafe { (t.finalize)(ctx) }, 0);

    // NCCL 2.26-2.27 call our v4 table: the fake has no v4, so its v3 answers (as NCCL 2.27
    // itself would have picked).
    let t = &ncclTunerPlugin_v4.0;
    let mut ctx = null_mut();
    assert_eq!(unsafe { (t.init)(4, 2, std::ptr::null(), &mut ctx) }, 0);
    let mut channels: c_int = 0;
    let r = unsafe {
        (t.get_coll_info)(
            ctx,
            4,
            8,
            1,
            table.as_mut_ptr().cast(),
            7,
            3,
            0,
            &mut channels,
        )
    };
    assert_eq!((r, channels), (0, 3));
    assert_eq!(unsafe { (t.destroy)(ctx) }, 0);

    // A null context is refused, not followed.
    let r = unsafe {
        (t.get_coll_info)(
            null_mut(),
            4,
            8,
            1,
            table.as_mut_ptr().cast(),
            7,
            3,
            0,
            &mut channels,
        )
    };
    assert_ne!(r, 0);
}
