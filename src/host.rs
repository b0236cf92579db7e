//! Facts about this host and process that the report prints: short host name, local time.

/// The host name up to its first `.`, as nccl-tests prints it.
pub fn short_hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).into_owned();
    match name.split('.').next() {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => name,
    }
}

/// Local time as `%Y-%m-%d %H:%M:%S`.
pub fn local_time() -> String {
    // SAFETY: `time` and `localtime_r` only write the structs we pass.
    unsafe {
        let t = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            return "1970-01-01 00:00:00".into();
        }
        format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
            tm.tm_year + 1900,
            tm.tm_mon + 1,
            tm.tm_mday,
            tm.tm_hour,
            tm.tm_min,
            tm.tm_sec
        )
    }
}

static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// Marks the start of the program for [`trace`].
pub fn start_clock() {
    START.get_or_init(std::time::Instant::now);
}

/// With `NCCL_PERF_TRACE=1`, prints on stderr how long after start a phase ended (for profiling
/// start-up; never on stdout).
pub fn trace(phase: &str) {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *ON.get_or_init(|| crate::environment::TRACE.get().is_some_and(|v| v == "1")) {
        let t = START.get_or_init(std::time::Instant::now).elapsed();
        eprintln!("nccl-perf trace: {:8.3} s  {phase}", t.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostname_is_short_and_time_is_well_formed() {
        let h = short_hostname();
        assert!(!h.is_empty() && !h.contains('.'));
        let t = local_time();
        assert_eq!(t.len(), 19, "{t}");
        assert_eq!(&t[4..5], "-");
        assert_eq!(&t[13..14], ":");
    }
}
