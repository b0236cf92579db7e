//! A benchmark thread that fails, in a process of its own (the failure is process-wide): the
//! other threads of the process, waiting for it at a rendezvous, give up at once with
//! `ThreadStopped` instead of waiting forever, and the process goes on to report the failure
//! (no thread ends the process).

use nccl_perf::bootstrap::SingleProcess;
use nccl_perf::error::Error;
use nccl_perf::runner::{ThreadGroup, interrupt};
use std::time::{Duration, Instant};

#[test]
fn a_failed_thread_stops_the_ones_waiting_for_it() {
    let boot = SingleProcess;
    // Two threads, but only one ever arrives: without the failure this would wait forever.
    let group = ThreadGroup::new(2, &boot);
    let start = Instant::now();
    let err = std::thread::scope(|s| {
        let waiter = s.spawn(|| group.barrier());
        std::thread::sleep(Duration::from_millis(200));
        interrupt::thread_failed(&Error::Internal("thread 1 failed".into()));
        waiter.join().expect("no panic")
    })
    .expect_err("the barrier must give up");
    assert!(start.elapsed() < Duration::from_secs(5));
    assert!(matches!(err, Error::ThreadStopped), "{err}");
    assert_eq!(
        interrupt::failure().map(|e| e.to_string()).as_deref(),
        Some("thread 1 failed")
    );
    // A second failure does not replace the first.
    interrupt::thread_failed(&Error::Internal("later".into()));
    assert_eq!(
        interrupt::failure().map(|e| e.to_string()).as_deref(),
        Some("thread 1 failed")
    );
}
