//! Which processes share a host: nccl-tests' host hash (short host name and boot id) and the local
//! ranks and counts derived from everyone's hash; and this host's short name, as every line of
//! ours that names a host prints it.

use std::collections::HashMap;

/// The host name up to its first `.`, as nccl-tests prints it.
pub fn short_hostname() -> String {
    let uts = rustix::system::uname();
    let name = uts.nodename().to_string_lossy();
    match name.split('.').next() {
        Some(s) if !s.is_empty() => s.to_string(),
        _ if name.is_empty() => "unknown".into(),
        _ => name.into_owned(),
    }
}

/// nccl-tests' host hash: djb2-xor over the bytes (as signed char) of `hostname ‖ boot_id`.
pub fn host_hash(hostname: &str, boot_id: &str) -> u64 {
    hostname
        .bytes()
        .chain(boot_id.bytes())
        .fold(5381u64, |h, c| {
            h.wrapping_shl(5).wrapping_add(h) ^ (c as i8 as i64 as u64)
        })
}

/// This host's hash, from the same host identity NCCL uses: `NCCL_HOSTID` when it is set and
/// not empty (NCCL then treats processes with equal values as one host, and only those), else
/// the short host name and the first token of the kernel's boot id (so two containers with the
/// same host name on different machines differ).
pub fn this_host_hash() -> u64 {
    host_identity_hash(nccl_perf_facts::environment::HOSTID.get().as_deref())
}

/// The running kernel's boot id (`/proc/sys/kernel/random/boot_id`), empty when unreadable.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_string()
}

/// [`this_host_hash`] for a given `NCCL_HOSTID` value (`None`: unset).
pub fn host_identity_hash(nccl_hostid: Option<&str>) -> u64 {
    match nccl_hostid {
        Some(id) if !id.is_empty() => host_hash(id, ""),
        _ => host_hash(&short_hostname(), &boot_id()),
    }
}

/// For every process, how many lower ranks have the same hash.
pub fn local_ranks(hashes: &[u64]) -> Vec<usize> {
    index_and_count(hashes)
        .into_iter()
        .map(|(i, _)| i)
        .collect()
}

/// For every process, how many processes have its hash.
pub fn local_sizes(hashes: &[u64]) -> Vec<usize> {
    index_and_count(hashes)
        .into_iter()
        .map(|(_, n)| n)
        .collect()
}

/// For every process, its index among the processes of the same colour and their number.
pub fn groups(colors: &[i64]) -> Vec<(usize, usize)> {
    index_and_count(colors)
}

/// For every element: how many earlier elements equal it, and how many elements equal it.
fn index_and_count<T: Eq + std::hash::Hash + Copy>(keys: &[T]) -> Vec<(usize, usize)> {
    let mut seen: HashMap<T, usize> = HashMap::new();
    let index: Vec<usize> = keys
        .iter()
        .map(|k| {
            let n = seen.entry(*k).or_insert(0);
            *n += 1;
            *n - 1
        })
        .collect();
    index
        .into_iter()
        .zip(keys)
        .map(|(i, k)| (i, seen[k]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostname_is_the_kernels_up_to_the_first_dot() {
        let h = short_hostname();
        assert!(!h.is_empty() && !h.contains('.'));
        let full = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
        let full = full.trim();
        assert_eq!(h, full.split('.').next().unwrap_or(full));
    }

    #[test]
    fn hash_matches_the_c_loop() {
        // h = 5381; h = (h << 5) + h ^ c, with c as signed char.
        let mut h: u64 = 5381;
        for c in "dgx01".bytes().chain("6f1c-xx\u{e9}".bytes()) {
            h = (h << 5).wrapping_add(h) ^ (c as i8 as i64 as u64);
        }
        assert_eq!(host_hash("dgx01", "6f1c-xx\u{e9}"), h);
        assert_ne!(host_hash("a", "1"), host_hash("a", "2"));
        assert_eq!(this_host_hash(), this_host_hash());
    }

    #[test]
    fn nccl_hostid_is_the_host_identity() {
        // Processes on one machine that pose as hosts (same host name, own NCCL_HOSTID) are
        // different hosts, as NCCL sees them; equal NCCL_HOSTIDs are one host wherever they run.
        let a = host_identity_hash(Some("vnode0"));
        let b = host_identity_hash(Some("vnode1"));
        assert_ne!(a, b);
        assert_eq!(a, host_identity_hash(Some("vnode0")));
        assert_ne!(a, host_identity_hash(None));
        // Empty is unset, as in NCCL.
        assert_eq!(host_identity_hash(Some("")), host_identity_hash(None));
        assert_eq!(local_ranks(&[a, b, a, b]), [0, 0, 1, 1]);
    }

    #[test]
    fn local_ranks_count_lower_ranks_on_the_same_host() {
        let h = [7, 9, 7, 7, 9];
        assert_eq!(local_ranks(&h), [0, 0, 1, 2, 1]);
        assert_eq!(local_sizes(&h), [3, 2, 3, 3, 2]);
        assert_eq!(groups(&[0, 1, 0, 1]), [(0, 2), (0, 2), (1, 2), (1, 2)]);
    }
}
