//! What the launcher bootstrap prints: addresses, durations, rank lists, and rank 0's note when
//! the rendezvous is open to strangers.

use super::super::launch::TcpLaunch;
use std::time::Duration;

/// Rank 0 says once on stderr when anyone who reaches the port could join: no secret (a job
/// identity alone can be read or guessed), or a secret short enough to guess offline from one
/// captured hello.
pub(super) fn warn_if_open(launch: &TcpLaunch, address: &str) {
    use nccl_perf_facts::environment::{RENDEZVOUS_KEY, RENDEZVOUS_KEY_FILE};
    let how = format!(
        "set {} (or {}) to one secret of {} or more characters in every process",
        RENDEZVOUS_KEY.name,
        RENDEZVOUS_KEY_FILE.name,
        super::super::auth::SHORT_SECRET
    );
    if !launch.secret.is_set() {
        nccl_perf_facts::eline!(
            "nccl-perf: note: the rendezvous at {address} is open to any process that can reach \
             its port{}; to keep strangers out, {how}",
            if launch.job.is_empty() {
                ""
            } else {
                " and knows the launcher's job id"
            }
        );
    } else if launch.secret.is_short() {
        nccl_perf_facts::eline!(
            "nccl-perf: warning: the rendezvous key is shorter than {} characters: it can be \
             guessed offline from one captured hello; {how}",
            super::super::auth::SHORT_SECRET
        );
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
