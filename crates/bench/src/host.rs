//! Facts about this host and process that the report prints: short host name, local time.

/// The host name up to its first `.`, as nccl-tests prints it (the bootstrap's, which names
/// hosts too).
pub use nccl_perf_bootstrap::local::short_hostname;

/// Local time as `%Y-%m-%d %H:%M:%S`, in the zone the C library would use (`TZ`, else
/// `/etc/localtime`, else UTC).
pub fn local_time() -> String {
    jiff::Zoned::now().strftime("%Y-%m-%d %H:%M:%S").to_string()
}

static PROGRAM: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Records this program's name (`all_reduce_perf`) for [`program`]; the first call wins.
pub fn set_program(name: &str) {
    let _ = PROGRAM.set(name.to_string());
}

/// The program's name, the prefix of our stderr lines (`nccl-perf` before [`set_program`]).
pub fn program() -> &'static str {
    PROGRAM.get().map_or("nccl-perf", String::as_str)
}

/// Whether this process runs in a container, as far as the usual marks tell: Docker's
/// `/.dockerenv`, Podman's `/run/.containerenv`, the `container` variable (systemd-nspawn,
/// Podman, LXC), a Kubernetes pod's service variables, or a container engine's name in the
/// cgroup of process 1.
pub fn in_container() -> bool {
    let cgroup = std::fs::read_to_string("/proc/1/cgroup").unwrap_or_default();
    container_marks(
        ["/.dockerenv", "/run/.containerenv"]
            .iter()
            .any(|p| std::path::Path::new(p).exists()),
        std::env::var_os("container").is_some_and(|v| !v.is_empty())
            || std::env::var_os("KUBERNETES_SERVICE_HOST").is_some(),
        &cgroup,
    )
}

/// [`in_container`]'s verdict from what it read: a marker file, a marker variable, the text of
/// `/proc/1/cgroup`.
fn container_marks(file: bool, variable: bool, cgroup: &str) -> bool {
    const ENGINES: [&str; 5] = ["docker", "kubepods", "containerd", "libpod", "lxc"];
    file || variable || ENGINES.iter().any(|e| cgroup.contains(e))
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
        crate::eline!("nccl-perf trace: {:8.3} s  {phase}", t.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_container_is_told_by_any_of_its_marks() {
        assert!(!container_marks(false, false, "0::/\n1:cpu:/\n"));
        assert!(!container_marks(false, false, ""));
        assert!(container_marks(true, false, ""));
        assert!(container_marks(false, true, ""));
        assert!(container_marks(
            false,
            false,
            "0::/system.slice/docker-3f2a.scope\n"
        ));
        assert!(container_marks(
            false,
            false,
            "1:cpu:/kubepods/burstable/pod1\n"
        ));
    }

    #[test]
    fn time_is_well_formed() {
        let t = local_time();
        assert_eq!(t.len(), 19, "{t}");
        assert_eq!(&t[4..5], "-");
        assert_eq!(&t[13..14], ":");
    }

    /// The same wall clock as the C library's (`date` reads TZ and /etc/localtime through it),
    /// to the minute: a zone read differently shows as an hour or more apart.
    #[test]
    fn local_time_is_the_c_librarys() {
        let out = std::process::Command::new("date")
            .arg("+%Y-%m-%d %H:%M")
            .output()
            .expect("date runs");
        let theirs = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let ours = local_time();
        // A minute may turn between the two reads.
        let again = local_time();
        assert!(
            ours.starts_with(&theirs) || again.starts_with(&theirs),
            "ours {ours} / {again}, date {theirs}"
        );
    }
}
