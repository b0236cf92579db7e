//! SIGINT/SIGTERM handling without a GPU, in a process of its own (a signal is process-wide):
//! the signal is recorded, not fatal, and a thread waiting for another one at a rendezvous gives
//! up with the interruption (exit code 128 + signal) instead of hanging.

use nccl_perf::bootstrap::SingleProcess;
use nccl_perf::runner::{ThreadGroup, interrupt};
use std::time::{Duration, Instant};

#[test]
fn a_signal_stops_a_thread_waiting_for_the_others() {
    interrupt::install();
    assert_eq!(interrupt::pending(), None);
    let boot = SingleProcess;
    // Two threads, but only one ever arrives: without a signal this would wait forever.
    let group = ThreadGroup::new(2, &boot);
    let start = Instant::now();
    let err = std::thread::scope(|s| {
        let waiter = s.spawn(|| group.barrier());
        std::thread::sleep(Duration::from_millis(200));
        signal_hook::low_level::raise(libc::SIGTERM).expect("raise");
        waiter.join().expect("no panic")
    })
    .expect_err("the barrier must give up");
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(interrupt::pending(), Some(libc::SIGTERM));
    assert!(err.is_interrupted(), "{err}");
    assert_eq!(err.exit_code(), 143);
    assert!(
        err.to_string().starts_with("interrupted by SIGTERM"),
        "{err}"
    );
    // The watchdog would end this process GRACE after the signal; forget it.
    interrupt::clear();
}
