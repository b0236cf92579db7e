//! Slurm's compressed host lists (`node[01-04,07],gpu-a[1-2]-b[3,5],login`) and task counts
//! (`2(x3),1`), expanded to one entry per host or per node.

/// The most host names a list may expand to (more than any launch this tool supports).
pub const MAX_HOSTS: usize = 65536;

/// Why a host list or task count list cannot be read (lists are cut for messages: they come
/// from the environment and may be huge).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeListError {
    /// More than [`MAX_HOSTS`] names.
    #[error("host list '{0}' names more than {MAX_HOSTS} hosts")]
    TooManyHosts(String),
    /// No host at all.
    #[error("empty host list '{0}'")]
    Empty(String),
    /// `[` without `]` in an item.
    #[error("unbalanced '[' in host list '{0}'")]
    UnclosedBracket(String),
    /// `]` without `[` in an item.
    #[error("unbalanced ']' in host list '{0}'")]
    UnopenedBracket(String),
    /// Brackets nested or unbalanced across items.
    #[error("unbalanced brackets in host list '{0}'")]
    Brackets(String),
    /// A bracket that is not numbers and ranges.
    #[error("bad range '[{range}]' in host list '{list}'")]
    Range {
        /// The bracket's text.
        range: String,
        /// The list.
        list: String,
    },
    /// A task count list that is not `N` or `N(xM)` items.
    #[error("bad task count list '{0}'")]
    Counts(String),
}

/// Expands a Slurm host list to host names in order. Ranges keep their zero padding
/// (`n[08-10]` → `n08 n09 n10`); several bracket groups in one name multiply out. A list of more
/// than [`MAX_HOSTS`] names is an error (and is never expanded).
pub fn expand_hosts(list: &str) -> Result<Vec<String>, NodeListError> {
    let mut out = Vec::new();
    for item in split_top_level(list)? {
        if item.is_empty() {
            continue;
        }
        let groups = bracket_groups(item, list)?;
        // Count first: `n[0-100000]m[0-100000]` must not be built to find it too long.
        let count = groups.iter().try_fold(1u64, |n, (_, r)| {
            n.checked_mul(r.iter().fold(0u64, |t, (a, b, _)| {
                t.saturating_add((b - a).saturating_add(1))
            }))
        });
        if count.is_none_or(|n| n.saturating_add(out.len() as u64) > MAX_HOSTS as u64) {
            return Err(NodeListError::TooManyHosts(short(list)));
        }
        let mut names = vec![String::new()];
        for (prefix, ranges) in &groups {
            let choices: Vec<String> = ranges
                .iter()
                .flat_map(|&(a, b, width)| (a..=b).map(move |v| format!("{v:0width$}")))
                .collect();
            names = names
                .iter()
                .flat_map(|n| choices.iter().map(move |c| format!("{n}{prefix}{c}")))
                .collect();
        }
        let tail = item.rfind(']').map_or(item, |c| &item[c + 1..]);
        out.extend(names.into_iter().map(|n| n + tail));
    }
    Ok(out)
}

/// The first host of a Slurm host list, without expanding the rest.
pub fn first_host(list: &str) -> Result<String, NodeListError> {
    let items = split_top_level(list)?;
    let item = items
        .into_iter()
        .find(|i| !i.is_empty())
        .ok_or_else(|| NodeListError::Empty(short(list)))?;
    let groups = bracket_groups(item, list)?;
    let mut name = String::new();
    for (prefix, ranges) in &groups {
        name += prefix;
        if let Some(&(a, _, width)) = ranges.first() {
            name += &format!("{a:0width$}");
        }
    }
    Ok(name + item.rfind(']').map_or(item, |c| &item[c + 1..]))
}

/// A bracket's ranges: (first, last, zero-padded width), checked but not expanded.
type Ranges = Vec<(u64, u64, usize)>;

/// The bracket groups of one host-list item: (text before the group, its ranges). Checks the
/// item's brackets.
fn bracket_groups<'a>(item: &'a str, list: &str) -> Result<Vec<(&'a str, Ranges)>, NodeListError> {
    let mut groups = Vec::new();
    let mut rest = item;
    while let Some(open) = rest.find('[') {
        let close = rest[open..]
            .find(']')
            .map(|c| open + c)
            .ok_or_else(|| NodeListError::UnclosedBracket(short(list)))?;
        groups.push((&rest[..open], expand_ranges(&rest[open + 1..close], list)?));
        rest = &rest[close + 1..];
    }
    if rest.contains(']') {
        return Err(NodeListError::UnopenedBracket(short(list)));
    }
    Ok(groups)
}

/// A host list cut for messages (it comes from the environment and may be huge).
fn short(list: &str) -> String {
    super::peer_text::clean(list, 80)
}

/// Splits on commas that are not inside brackets.
fn split_top_level(list: &str) -> Result<Vec<&str>, NodeListError> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                items.push(list[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(NodeListError::Brackets(list.to_string()));
        }
    }
    if depth != 0 {
        return Err(NodeListError::Brackets(list.to_string()));
    }
    items.push(list[start..].trim());
    Ok(items)
}

/// `01-03,07` → (1, 3, 2), (7, 7, 2): ranges keeping the width of the lower bound.
fn expand_ranges(spec: &str, list: &str) -> Result<Ranges, NodeListError> {
    let bad = || NodeListError::Range {
        range: short(spec),
        list: short(list),
    };
    let mut out = Vec::new();
    for part in spec.split(',') {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        if lo.is_empty() || !lo.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let a: u64 = lo.parse().map_err(|_| bad())?;
        let b: u64 = hi.parse().map_err(|_| bad())?;
        if b < a {
            return Err(bad());
        }
        out.push((a, b, lo.len()));
    }
    Ok(out)
}

/// Expands `SLURM_TASKS_PER_NODE` (`2(x3),1` → `2 2 2 1`).
pub fn expand_counts(spec: &str) -> Result<Vec<usize>, NodeListError> {
    let bad = || NodeListError::Counts(spec.to_string());
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (n, times) = match part.split_once("(x") {
            Some((n, t)) => (n, t.strip_suffix(')').ok_or_else(bad)?),
            None => (part, "1"),
        };
        let n: usize = n.parse().map_err(|_| bad())?;
        let times: usize = times.parse().map_err(|_| bad())?;
        if times > 1_000_000 {
            return Err(bad());
        }
        out.extend(std::iter::repeat_n(n, times));
    }
    Ok(out)
}

/// The host of every task under Slurm's default block distribution: the first `counts[0]` tasks
/// on the first host, and so on. `None` when the lists do not match.
pub fn block_hosts(hosts: &[String], counts: &[usize]) -> Option<Vec<String>> {
    if hosts.len() != counts.len() {
        return None;
    }
    Some(
        hosts
            .iter()
            .zip(counts)
            .flat_map(|(h, &n)| std::iter::repeat_n(h.clone(), n))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(s: &str) -> Vec<String> {
        expand_hosts(s).unwrap()
    }

    #[test]
    fn plain_and_bracketed_lists() {
        assert_eq!(hosts("dgx01"), ["dgx01"]);
        assert_eq!(
            hosts("node[01-04]"),
            ["node01", "node02", "node03", "node04"]
        );
        assert_eq!(
            hosts("node[01-02,07],other"),
            ["node01", "node02", "node07", "other"]
        );
        assert_eq!(hosts("n[8-10]"), ["n8", "n9", "n10"]);
        assert_eq!(hosts("n[08-10]"), ["n08", "n09", "n10"]);
        assert_eq!(hosts("a,b, c"), ["a", "b", "c"]);
        assert_eq!(hosts("gpu[1-2]-ib"), ["gpu1-ib", "gpu2-ib"]);
        assert_eq!(hosts("r[1-2]n[1,3]"), ["r1n1", "r1n3", "r2n1", "r2n3"]);
        assert_eq!(first_host("node[03-04],login").unwrap(), "node03");
    }

    #[test]
    fn malformed_lists_are_errors() {
        for bad in [
            "node[01-",
            "node01]",
            "node[a-b]",
            "node[5-3]",
            "n[[1]]",
            "n[]",
        ] {
            assert!(expand_hosts(bad).is_err(), "{bad}");
        }
        assert!(first_host("").is_err());
    }

    #[test]
    fn huge_lists_are_refused_and_the_first_host_needs_no_expansion() {
        let t = std::time::Instant::now();
        let huge = "n[0-60000]m[0-60000]";
        assert_eq!(first_host(huge).unwrap(), "n0m0");
        assert_eq!(first_host(",,a[07-09]b,c").unwrap(), "a07b");
        let e = expand_hosts(huge).unwrap_err();
        assert!(e.to_string().contains("more than 65536 hosts"), "{e}");
        assert!(expand_hosts("n[0-100000]").is_err());
        assert!(expand_hosts("n[0-18446744073709551615]x[0-2]").is_err());
        assert!(expand_hosts("a[1-40000],b[1-40000]").is_err());
        assert_eq!(expand_hosts("n[1-65536]").unwrap().len(), 65536);
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn task_counts_and_block_distribution() {
        assert_eq!(expand_counts("2(x3),1").unwrap(), [2, 2, 2, 1]);
        assert_eq!(expand_counts("8").unwrap(), [8]);
        assert!(expand_counts("2(x").is_err());
        let h = hosts("n[1-2]");
        assert_eq!(
            block_hosts(&h, &[2, 1]).unwrap(),
            ["n1".to_string(), "n1".into(), "n2".into()]
        );
        assert!(block_hosts(&h, &[2]).is_none());
    }
}
