//! Standard error, one write per message. `eprintln!` writes each piece of its format on its
//! own (standard error is unbuffered), so the lines of processes that share one pipe — every
//! rank under `mpirun` or `srun` — cut into each other mid-line; and it panics when standard
//! error is closed. [`write()`] and [`eline!`](crate::eline) hand the whole text to the kernel at
//! once (up to the pipe's atomic size, 4 KiB, no other process' bytes come between) and ignore
//! a closed standard error.

use std::io::Write;

/// Writes `text` to standard error in one write; a failure (standard error closed) is ignored.
pub fn write(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// `eprintln!` that writes its line in one write and never panics ([`write()`]).
#[macro_export]
macro_rules! eline {
    ($($arg:tt)*) => {
        $crate::stderr::write(&::std::format!("{}\n", ::std::format_args!($($arg)*)))
    };
}
