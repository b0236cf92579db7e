//! What surrounds nccl-tests' own text in a log: a launcher's prefix (`srun -l`, `mpirun
//! --tag-output`, `-prepend-rank`, Ray, kubectl, pdsh, timestamps), a document's indentation or
//! quotes, and `#`s lost on the way (a ticket or web page that took them for headings).

use std::borrow::Cow;

use super::lines::{command_program, is_failure, is_names_line, is_nccl_debug};

/// Which process wrote a line, from its launcher prefix.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stream {
    /// No prefix.
    Plain,
    /// `srun -l`: `N: `.
    Srun(u32),
    /// `mpirun --tag-output`: `[job,rank]<stdout>:` (stdout and stderr of a rank together).
    Mpi(u32, u32),
}

/// Splits a launcher prefix off a line: `srun -l` (`12: text`, possibly space-padded) or
/// `mpirun --tag-output` (`[1,0]<stdout>:text`, `<stderr>` too).
pub fn split_prefix(line: &str) -> (Stream, &str) {
    if let Some(rest) = line.strip_prefix('[')
        && let Some((ids, rest)) = rest.split_once(']')
        && let Some((job, rank)) = ids.split_once(',')
        && let (Ok(job), Ok(rank)) = (job.parse(), rank.parse())
    {
        for tag in ["<stdout>:", "<stderr>:"] {
            if let Some(text) = rest.strip_prefix(tag) {
                // Some versions put a space after the tag; a `#` line never starts with one.
                let text = text.strip_prefix(" #").map_or(text, |_| &text[1..]);
                return (Stream::Mpi(job, rank), text);
            }
        }
    }
    let trimmed = line.trim_start_matches(' ');
    let digits = trimmed.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && digits <= 6 && trimmed[digits..].starts_with(':') {
        let after = &trimmed[digits + 1..];
        let text = if after.is_empty() {
            Some("")
        } else {
            after.strip_prefix(' ')
        };
        if let (Some(text), Ok(n)) = (text, trimmed[..digits].parse()) {
            return (Stream::Srun(n), text);
        }
    }
    (Stream::Plain, line)
}

/// Lines that only nccl-tests prints, used to find what a launcher or a document puts before
/// every line of a log (the last: the table's units line, for an excerpt of the table alone).
const ANCHORS: [&str; 7] = [
    "# nThread ",
    "# Collective test starting:",
    "# nccl-tests version ",
    "# Using devices",
    "# Out of bounds values",
    "# Avg bus bandwidth",
    "#        (B)    (elements)",
];

/// What follows the `#` of nccl-tests' comment lines that start with a word (for logs that lost
/// their `#`s: [`restore_hash`]).
const COMMENT_WORDS: [&str; 15] = [
    "nThread ",
    "out-of-place",
    "(B)",
    "Using devices",
    "Rank ",
    "Out of bounds values",
    "Avg bus bandwidth",
    "Collective test ",
    "nccl-tests version ",
    "Blocking Enabled",
    "Per-Iteration Report",
    "Parallel Init Enabled",
    "Reducing maxBytes",
    "GPU memory usage",
    "error: ",
];

/// True for a log whose comment lines lost their leading `#` (pasted into a ticket or a web page
/// that took `#` for a heading, or filtered by a tool): none of them has one, and the parameter
/// line or the footer is there without it. Such lines are read with [`restore_hash`].
pub fn hashes_stripped<'a>(lines: impl Iterator<Item = &'a str> + Clone) -> bool {
    let has_hash = lines.clone().any(|l| {
        ["# nThread ", "# Using devices", "# Avg bus bandwidth"]
            .iter()
            .any(|a| l.starts_with(a))
    });
    !has_hash
        && lines.into_iter().any(|l| {
            let t = l.trim_start();
            (t.starts_with("nThread ") && t.contains(" nGpus "))
                || t.starts_with("Using devices")
                || t.starts_with("Avg bus bandwidth")
        })
}

/// One of nccl-tests' comment lines that no other program prints, missing its `#` in a log
/// whose other lines have theirs (a document that lost the `#` of its first lines): the
/// parameter line (`nThread N nGpus N minBytes ...`), `Using devices` and the device lines
/// (`Rank N Group N Pid N on ...`) get it back; every other line stays as it is.
pub fn restore_anchor(line: &str) -> Cow<'_, str> {
    let t = line.trim_start();
    // Words 1, 3, 5 (and 7) of the line, without collecting them: this runs on every line.
    let shape = |names: &[&str]| {
        let mut words = t.split_whitespace().step_by(2);
        names.iter().all(|n| words.next() == Some(*n))
    };
    let parameters = shape(&["nThread", "nGpus", "minBytes"]);
    let device = shape(&["Rank", "Group", "Pid", "on"]);
    if line.starts_with('#') || !(parameters || device || t.trim_end() == "Using devices") {
        return Cow::Borrowed(line);
    }
    let gap = if device { "  " } else { " " };
    Cow::Owned(format!("#{gap}{t}"))
}

/// What nccl-tests prints between the `#` and `t` for the comment lines read by their start
/// (`# Avg bus bandwidth`, `#  Rank  0`, ...), or `None` for the lines read by their words
/// (the table's heading lines keep their own spacing).
fn comment_gap(t: &str) -> Option<&'static str> {
    if t.starts_with("Rank ") {
        return Some("  ");
    }
    let by_start = COMMENT_WORDS
        .iter()
        .filter(|w| !matches!(**w, "out-of-place" | "(B)"))
        .any(|w| t.starts_with(w));
    by_start.then_some(" ")
}

/// A line of a log that lost its `#`s ([`hashes_stripped`]) as nccl-tests printed it: a line
/// that starts with a blank and no digit (the `#` went, its blank stayed), or with one of the
/// comment lines' words (a heading's `# ` went), gets its `#` back. Rows (digits), command
/// lines, failure lines and NCCL's own lines stay as they are.
pub fn restore_hash(line: &str) -> Cow<'_, str> {
    let t = line.trim_start();
    if t.is_empty() || line.starts_with('#') {
        return Cow::Borrowed(line);
    }
    if let Some(gap) = comment_gap(t) {
        // The line's own indentation, whatever it is and however it differs from its
        // neighbours', is a reader's or a document's, not nccl-tests'.
        return Cow::Owned(format!("#{gap}{t}"));
    }
    let hash = if line.starts_with(' ') { "#" } else { "# " };
    if COMMENT_WORDS.iter().any(|w| t.starts_with(w)) || is_names_line(t) {
        return Cow::Owned(format!("{hash}{line}"));
    }
    let keep = t.starts_with(|c: char| c.is_ascii_digit() || c == '-')
        || is_failure(line)
        || is_nccl_debug(line)
        || command_program(line).is_some();
    if keep || !line.starts_with(' ') {
        Cow::Borrowed(line)
    } else {
        Cow::Owned(format!("#{line}"))
    }
}

/// A constant text before every line of a log, learned from the lines only nccl-tests prints:
/// a document's indentation (4 spaces, a tab, `> ` quotes), a launcher's tag (Ray and
/// SkyPilot's `(head, rank=0, pid=3808) `, `kubectl logs --prefix`'s `[pod/name/container] `,
/// stern's pod names, pdsh's `host: `), a timestamp. What `srun -l` and `mpirun
/// --tag-output` add is left to [`split_prefix`].
#[derive(Debug, Default)]
pub struct Prefixes {
    /// The prefixes as seen before an anchor line, longest first.
    seen: Vec<String>,
}

impl Prefixes {
    /// Learns the prefixes of a log's lines.
    pub fn learn<'a>(lines: impl Iterator<Item = &'a str>) -> Prefixes {
        let mut seen: Vec<String> = Vec::new();
        // Timestamped prefixes differ on every line: one of each shape and writer is enough.
        let mut shapes: Vec<(String, String)> = Vec::new();
        for line in lines {
            if let Some(at) = anchor_at(line) {
                let p = &line[..at];
                if p.is_empty() || p.len() > 200 || seen.iter().any(|s| s == p) {
                    continue;
                }
                if has_timestamp(p) {
                    let key = (shape(p), writer(p));
                    if shapes.contains(&key) {
                        continue;
                    }
                    shapes.push(key);
                }
                seen.push(p.to_string());
            }
        }
        seen.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Prefixes { seen }
    }

    /// Splits a learned prefix off `line`: (which writer, by its prefix without timestamps;
    /// the rest). A line without one comes back whole, with an empty writer.
    pub fn strip<'a>(&self, line: &'a str) -> (String, &'a str) {
        for p in &self.seen {
            if let Some(rest) = line.strip_prefix(p.as_str()) {
                return (writer(p), rest);
            }
            // A quoted or indented empty line loses its trailing blank.
            if !p.trim_end().is_empty() && line == p.trim_end() {
                return (writer(p), "");
            }
            // A timestamp changes from line to line but keeps its shape.
            if has_timestamp(p)
                && let Some(head) = line.get(..p.len())
                && shape(head) == shape(p)
                && writer(head) == writer(p)
            {
                return (writer(p), &line[p.len()..]);
            }
        }
        (String::new(), line)
    }
}

/// A line without the rank tag that MPICH's and Intel MPI's `-prepend-rank` put before every
/// piece a process writes, so also inside a line that nccl-tests printed in pieces (a row's
/// halves: `... sum -1[0]    1626.5 ...`): when the learned prefix `writer` is such a tag
/// (`[N]`), its copies inside the line go.
pub fn without_inner_tags<'a>(writer: &str, line: &'a str) -> Cow<'a, str> {
    let tag = writer
        .strip_prefix('[')
        .and_then(|w| w.strip_suffix(']'))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    if tag && line.contains(writer) {
        Cow::Owned(line.replace(writer, ""))
    } else {
        Cow::Borrowed(line)
    }
}

/// Where the nccl-tests text of an anchor line starts (after any prefix), or `None` for a line
/// that is no anchor or whose only prefix is one of `srun -l` (read by [`split_prefix`]).
fn anchor_at(line: &str) -> Option<usize> {
    if split_prefix(line).0 != Stream::Plain {
        return None;
    }
    for tag in ["]<stdout>:", "]<stderr>:"] {
        if let Some(end) = line.find(tag)
            && let Some(open) = line[..end].rfind('[')
            && let Some((job, rank)) = line[open + 1..end].split_once(',')
            && !job.is_empty()
            && !rank.is_empty()
            && job.bytes().chain(rank.bytes()).all(|b| b.is_ascii_digit())
        {
            return Some(open);
        }
    }
    let at = ANCHORS.iter().filter_map(|a| line.find(a)).min()?;
    // `srun -l` inside another prefix (`host: 0: # nThread`) stays for split_prefix.
    let before = &line[..at];
    let trimmed = before.trim_end_matches(' ');
    let digits = trimmed
        .trim_end_matches(':')
        .bytes()
        .rev()
        .take_while(u8::is_ascii_digit)
        .count();
    if trimmed.ends_with(':') && digits > 0 {
        let start = trimmed.len() - 1 - digits;
        if start == 0 || trimmed[..start].ends_with(' ') {
            return Some(start);
        }
    }
    Some(at)
}

/// True for a token like `2024-05-01T10:00:00.123Z` or `10:00:00`: digits around `:` or `-`.
fn is_timestamp(token: &str) -> bool {
    token
        .as_bytes()
        .windows(3)
        .any(|w| w[0].is_ascii_digit() && (w[1] == b':' || w[1] == b'-') && w[2].is_ascii_digit())
}

fn has_timestamp(prefix: &str) -> bool {
    prefix.split_whitespace().any(is_timestamp)
}

/// A prefix without its timestamps: what stays the same for one writer.
fn writer(prefix: &str) -> String {
    prefix
        .split_whitespace()
        .filter(|t| !is_timestamp(t))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Digits as `0`, for comparing timestamps by their shape.
fn shape(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_digit() { '0' } else { c })
        .collect()
}
