//! Why a run stops early, without a GPU, in a process of its own (both are process-wide): a
//! stop signal (SIGTERM) is recorded, not fatal, and a thread waiting for another one at a
//! rendezvous gives up with the interruption (exit code 128 + signal) instead of hanging; a
//! failed benchmark thread releases the ones waiting for it the same way, and no thread ends the
//! process.

use nccl_perf_bench::bootstrap::SingleProcess;
use nccl_perf_bench::error::Error;
use nccl_perf_bench::runner::{ThreadGroup, interrupt};
use std::time::{Duration, Instant};

/// What a thread waiting at a two-thread barrier, alone, returns once `stop` has run.
fn waiting_alone_until(stop: impl FnOnce()) -> Error {
    let boot = SingleProcess;
    // Two threads, but only one ever arrives: without `stop` this would wait forever.
    let group = ThreadGroup::new(2, &boot);
    let start = Instant::now();
    let err = std::thread::scope(|s| {
        let waiter = s.spawn(|| group.barrier());
        std::thread::sleep(Duration::from_millis(200));
        stop();
        waiter.join().expect("no panic")
    })
    .expect_err("the barrier must give up");
    assert!(start.elapsed() < Duration::from_secs(5));
    err
}

/// One test, in order: the signal first (then forgotten), then a failed thread, which is never
/// forgotten in a process.
#[test]
fn a_signal_or_a_failed_thread_stops_a_thread_waiting_for_the_others() {
    interrupt::install();
    assert_eq!(interrupt::pending(), None);
    let err = waiting_alone_until(|| {
        signal_hook::low_level::raise(libc::SIGTERM).expect("raise");
    });
    assert_eq!(interrupt::pending(), Some(libc::SIGTERM));
    assert!(err.is_interrupted(), "{err}");
    assert_eq!(err.exit_code(), 143);
    assert!(
        err.to_string().starts_with("interrupted by SIGTERM"),
        "{err}"
    );
    // The process would end GRACE after the signal; forget it.
    interrupt::clear();

    let err = waiting_alone_until(|| {
        interrupt::thread_failed(&Error::Internal("thread 1 failed".into()));
    });
    assert!(matches!(err, Error::ThreadStopped), "{err}");
    let first = || interrupt::failure().map(|e| e.to_string());
    assert_eq!(first().as_deref(), Some("thread 1 failed"));
    // A second failure does not replace the first.
    interrupt::thread_failed(&Error::Internal("later".into()));
    assert_eq!(first().as_deref(), Some("thread 1 failed"));
}
