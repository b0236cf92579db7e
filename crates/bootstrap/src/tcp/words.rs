//! What the launcher bootstrap prints: addresses, durations, rank lists, and rank 0's note when
//! the rendezvous is open to strangers.

use super::super::launch::TcpLaunch;
use std::time::Duration;

/// Rank 0 says once on stderr when anyone who reaches the port could join: no secret (a job
/// identity alone can be read or guessed), or a secret short enough to guess offline from one
/// captured hello.
pub(super) fn warn_if_open(launch: &TcpLaunch, address: &str) {
    if let Some(line) = open_note(launch, address) {
        nccl_perf_facts::eline!("{line}");
    }
}

/// The line [`warn_if_open`] prints, if any.
fn open_note(launch: &TcpLaunch, address: &str) -> Option<String> {
    use nccl_perf_facts::environment::{RENDEZVOUS_KEY, RENDEZVOUS_KEY_FILE};
    let how = format!(
        "set {} (or {}) to one secret of {} or more characters in every process",
        RENDEZVOUS_KEY.name,
        RENDEZVOUS_KEY_FILE.name,
        super::super::auth::SHORT_SECRET
    );
    if !launch.secret.is_set() {
        // Every plain srun and torchrun job says it: one short line, docs/security.md the rest.
        Some(format!(
            "nccl-perf: note: rendezvous at {address} is open to any process {}; {} closes it",
            if launch.job.is_empty() {
                "reaching it"
            } else {
                "knowing the job id"
            },
            RENDEZVOUS_KEY.name
        ))
    } else if launch.secret.is_short() {
        Some(format!(
            "nccl-perf: warning: the rendezvous key is shorter than {} characters: it can be \
             guessed offline from one captured hello; {how}",
            super::super::auth::SHORT_SECRET
        ))
    } else {
        None
    }
}

/// `host:port`, with an IPv6 host in brackets.
pub(super) fn format_address(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// `120 s`, `2.5 s`: seconds to a tenth.
pub(super) fn secs(d: Duration) -> String {
    let t = format!("{:.1}", d.as_secs_f64());
    format!("{} s", t.strip_suffix(".0").unwrap_or(&t))
}

/// `1, 3-5 (node02), 7 (node04)`: ranks in ranges, with their host where known; long lists cut.
pub fn rank_list(ranks: &[usize], hosts: Option<&[String]>) -> String {
    let host = |r: usize| {
        hosts
            .and_then(|h| h.get(r))
            .filter(|h| !h.is_empty())
            .cloned()
    };
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len()
            && ranks[j + 1] == ranks[j] + 1
            && host(ranks[j + 1]) == host(ranks[i])
        {
            j += 1;
        }
        let span = if i == j {
            format!("rank {}", ranks[i])
        } else {
            format!("ranks {}-{}", ranks[i], ranks[j])
        };
        parts.push(match host(ranks[i]) {
            Some(h) => format!("{span} (on {h})"),
            None => span,
        });
        i = j + 1;
    }
    const SHOWN: usize = 16;
    if parts.len() > SHOWN {
        let more = parts.len() - SHOWN;
        parts.truncate(SHOWN);
        parts.push(format!("and {more} more"));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain `srun` step of two processes, without a key.
    fn srun_step() -> TcpLaunch {
        TcpLaunch {
            launcher: "slurm",
            rank: 0,
            size: 2,
            local_rank: Some(0),
            host: "node01".into(),
            port: 22766,
            expected_hosts: None,
            job: "slurm:4242.0".into(),
            secret: Default::default(),
            bind: None,
            timeout: Duration::from_secs(120),
            silence: None,
        }
    }

    #[test]
    fn the_open_rendezvous_note_is_one_short_line() {
        let mut t = srun_step();
        for job in ["slurm:4242.0", ""] {
            t.job = job.into();
            let note = open_note(&t, "node01:22766").unwrap_or_default();
            // Every plain srun and torchrun job prints it: one terminal line, not three.
            assert!(
                note.starts_with(
                    "nccl-perf: note: rendezvous at node01:22766 is open to any process"
                ) && note.contains("NCCL_PERF_RENDEZVOUS_KEY")
                    && !note.contains('\n')
                    && note.len() <= 125,
                "{} characters: {note}",
                note.len()
            );
            assert_eq!(note.contains("job id"), !job.is_empty(), "{note}");
        }
    }
}
