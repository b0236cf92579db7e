//! Names on a locate picture: host names cleaned and shortened to a label, how many cells one
//! label may cover so neighbours never overlap, and the title's second line.

/// Longest label drawn, in characters; longer names keep their start and end around a `…`.
pub const MAX_CHARS: usize = 16;

/// The domain every host shares (`.cluster.local` of `a.cluster.local` and `b.cluster.local`),
/// left out of the labels; empty when the hosts share none or there is one host. Numeric hosts
/// (addresses) keep theirs.
pub fn common_domain<'a>(hosts: impl IntoIterator<Item = &'a str>) -> String {
    let mut domain: Option<&str> = None;
    let mut count = 0;
    for h in hosts {
        count += 1;
        let Some(dot) = h.find('.') else {
            return String::new();
        };
        if h[..dot].chars().all(|c| c.is_ascii_digit()) {
            return String::new();
        }
        match domain {
            None => domain = Some(&h[dot..]),
            Some(d) if d == &h[dot..] => {}
            Some(_) => return String::new(),
        }
    }
    match domain {
        Some(d) if count > 1 => d.to_string(),
        _ => String::new(),
    }
}

/// `name` as a label: `domain` left out, anything but printable ASCII shown as `?`, and at
/// most [`MAX_CHARS`] characters.
pub fn clean(name: &str, domain: &str) -> String {
    let name = if domain.is_empty() {
        name.to_string()
    } else {
        name.replace(domain, "")
    };
    let chars: Vec<char> = name
        .chars()
        .map(|c| {
            if c == ' ' || c.is_ascii_graphic() {
                c
            } else {
                '?'
            }
        })
        .collect();
    if chars.len() <= MAX_CHARS {
        return chars.into_iter().collect();
    }
    let head = (MAX_CHARS - 1) / 2;
    let tail = MAX_CHARS - 1 - head;
    let mut s: String = chars[..head].iter().collect();
    s.push('…');
    s.extend(&chars[chars.len() - tail..]);
    s
}

/// A line of free text from the record for the title: printable ASCII (else `?`), at most 60
/// characters.
pub fn clean_line(text: &str) -> String {
    let mut s: String = text
        .chars()
        .map(|c| {
            if c == ' ' || c.is_ascii_graphic() {
                c
            } else {
                '?'
            }
        })
        .take(61)
        .collect();
    if s.len() > 60 {
        s.truncate(59);
        s.push('…');
    }
    s
}

/// Every how many cells of `cell_px` pixels a label of `line_px` pixels fits without touching
/// its neighbour (1: every cell).
pub fn step(cell_px: f64, line_px: f64) -> usize {
    if cell_px.is_nan() || cell_px <= 0.0 {
        return usize::MAX;
    }
    let k = (line_px / cell_px).ceil();
    if k <= 1.0 {
        1
    } else if k >= 1e9 {
        usize::MAX
    } else {
        k as usize
    }
}

/// What the labels of `count` cells, one every `k`, cover: "every node named", "every 2nd node
/// named", ...; "no room to name the nodes" when not even two cells apart would fit.
pub fn every(k: usize, what: &str, count: usize) -> String {
    if k <= 1 || count <= 1 {
        return format!("every {what} named");
    }
    if k >= count {
        return format!("no room to name each {what}: try a larger --size");
    }
    let suffix = match (k % 10, k % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("every {k}{suffix} {what} named")
}

/// A message size as people write it: `256 MiB`, `1 GiB`, `3000 B`.
pub fn size(bytes: u64) -> String {
    for (unit, name) in [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{} {name}", bytes / unit);
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_short_clean_and_spaced() {
        let hosts = ["gpu-a.cluster.local", "gpu-b.cluster.local"];
        assert_eq!(common_domain(hosts), ".cluster.local");
        assert_eq!(clean(hosts[0], ".cluster.local"), "gpu-a");
        assert_eq!(common_domain(["10.0.0.1", "10.0.0.2"]), "");
        assert_eq!(common_domain(["a.x", "b.y"]), "");
        assert_eq!(common_domain(["a.x"]), "");
        assert_eq!(common_domain(["a.x", "b"]), "");
        assert_eq!(clean("node\u{7}<1>", ""), "node?<1>");
        let long = clean("rack12-chassis3-slot07-node0042", "");
        assert_eq!(
            (long.chars().count(), long.as_str()),
            (16, "rack12-…node0042")
        );
        assert_eq!(step(20.0, 13.0), 1);
        assert_eq!(step(3.0, 13.0), 5);
        assert_eq!(step(0.0, 13.0), usize::MAX);
        assert_eq!(step(f64::NAN, 13.0), usize::MAX);
        assert_eq!(every(1, "node", 8), "every node named");
        assert_eq!(every(2, "node", 8), "every 2nd node named");
        assert_eq!(every(12, "block", 100), "every 12th block named");
        assert_eq!(every(23, "node", 100), "every 23rd node named");
        assert!(every(usize::MAX, "node", 8).starts_with("no room"));
        assert_eq!(size(256 << 20), "256 MiB");
        assert_eq!(size(1 << 30), "1 GiB");
        assert_eq!(size(3000), "3000 B");
    }
}
