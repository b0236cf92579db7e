//! Reading single lines of a log: the header, device, table-header, row and
//! footer lines of nccl-tests (v2.19.6 and the older layouts the module comment of `parse` lists).
//! Each reader returns a [`LineError`]; the caller adds file and line.

use crate::{DeviceInfo, HalfResult, PerIterStats, RowResult, RunInfo, Step};

/// What is wrong with one line of a log (the caller adds the file and the line number).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// A number whose exponent did not fit the column.
    #[error("{what} '{token}' is cut short (the exponent did not fit the column)")]
    CutShort {
        /// Which value.
        what: String,
        /// The token.
        token: String,
    },
    /// Not a number.
    #[error("{what} '{token}' is not a number")]
    NotANumber {
        /// Which value.
        what: String,
        /// The token.
        token: String,
    },
    /// Not an integer.
    #[error("{what} '{token}' is not an integer")]
    NotAnInteger {
        /// Which value.
        what: String,
        /// The token.
        token: String,
    },
    /// A line that lacks a part or has one in the wrong shape, described.
    #[error("{0}")]
    Malformed(String),
}

fn malformed(what: &str) -> LineError {
    LineError::Malformed(what.to_string())
}

/// The benchmark a command line runs: the first word whose file name is `<name>_perf` or
/// `<name>_perf_<suffix>` (`mpirun -np 8 /opt/nccl-tests/build/all_reduce_perf -b 8`), or a
/// wrapper's `-t`/`--test` followed by a collective's name (`run-nccl.sh -t all_gather`: nccl-tests'
/// own `-t` takes a thread count). NCCL's own lines name none, nor do nccl-tests' `#` lines:
/// a `#` line names one only where a command follows it (a root shell's prompt, `# ./build/
/// all_gather_perf -b 8`, or a `#` comment that echoes the command).
pub fn command_program(line: &str) -> Option<String> {
    if is_nccl_debug(line) {
        return None;
    }
    let line = match line.strip_prefix('#') {
        Some(rest) => {
            let first = rest.split_whitespace().next()?;
            let name = first.rsplit('/').next().unwrap_or(first);
            let launcher = ["mpirun", "mpiexec", "srun", "torchrun", "$", "+"].contains(&name);
            if !launcher && perf_program(first).is_none() {
                return None;
            }
            rest
        }
        None => line,
    };
    if let Some(program) = line.split_whitespace().find_map(perf_program) {
        return Some(program);
    }
    let words: Vec<&str> = line.split_whitespace().collect();
    words.windows(2).find_map(|w| {
        let flag = ["-t", "--test", "--collective"].contains(&w[0]);
        let name = w[1].trim_end_matches("_perf");
        (flag && nccl_perf_facts::benchmarks::benchmark(name).is_some())
            .then(|| format!("{name}_perf"))
    })
}

/// The program a command word names: `<name>_perf` or `<name>_perf_<suffix>`, any folder.
fn perf_program(word: &str) -> Option<String> {
    let name = word.rsplit('/').next().unwrap_or(word);
    let (stem, _) = name.split_once("_perf")?;
    let valid = !stem.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    valid.then(|| name.to_string())
}

/// The hang watch's verdict in a line of nccl-perf's stderr (`<host>: hang: ...`, rank 0; or
/// another process' `... rank 0 stopped the run: the run hung at operation ...`), from `hang:`
/// or `the run hung` on, at most 2,000 characters; `None` for any other line.
pub fn hang_verdict(line: &str) -> Option<String> {
    let at = match line.find(": hang: ") {
        Some(i) => i + 2,
        None if line.starts_with("hang: ") => 0,
        None => line.find("rank 0 stopped the run: the run hung at operation ")? + 24,
    };
    Some(
        line[at..]
            .trim_end()
            .chars()
            .filter(|c| !c.is_control())
            .take(2000)
            .collect(),
    )
}

/// Where nccl-perf's validation placed wrong data, from world rank 0's stderr line
/// (`<program>: wrong data on rank 5 (node2) (4 measurement(s) out of bounds)`): the place
/// (`rank 5 (node2)`, `up to 2 ranks at once between ...`), at most 300 characters; `None` for
/// any other line.
pub fn wrong_place(line: &str) -> Option<String> {
    let at = line.find(": wrong data on ")? + ": wrong data on ".len();
    let rest = line[at..].trim_end();
    let cut = rest.rfind(" (")?;
    let count = rest[cut + 2..].strip_suffix(" measurement(s) out of bounds)")?;
    if count.is_empty() || !count.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let place = &rest[..cut];
    (place.starts_with("rank ") || place.starts_with("up to ")).then(|| {
        place
            .chars()
            .filter(|c| !c.is_control())
            .take(300)
            .collect()
    })
}

/// NCCL's own debug output (`host:pid:tid [dev] NCCL INFO ...`), which `NCCL_DEBUG=INFO` mixes
/// into stdout.
pub fn is_nccl_debug(line: &str) -> bool {
    ["NCCL INFO", "NCCL WARN", "NCCL TRACE", "NCCL ABORT"]
        .iter()
        .any(|w| line.contains(w))
}

/// The version code (`NCCL_VERSION_CODE`: 22803 for 2.28.3, 2708 for 2.7.8) of NCCL's own
/// `NCCL INFO NCCL version 2.28.3+cuda13.0` line, or `None` for any other line.
pub fn nccl_version_code(line: &str) -> Option<i32> {
    let (_, rest) = line.split_once("NCCL INFO NCCL version ")?;
    let version = rest.split(['+', ' ']).next()?;
    let mut parts = version.split('.').map(|p| p.trim().parse::<i32>().ok());
    let (major, minor, patch) = (parts.next()??, parts.next()??, parts.next()??);
    if !(0..100).contains(&minor) || !(0..100).contains(&patch) {
        return None;
    }
    // NCCL's code: major*10000 + minor*100 + patch from 2.9, major*1000 + ... before.
    Some(if (major, minor) >= (2, 9) {
        major * 10000 + minor * 100 + patch
    } else {
        major * 1000 + minor * 100 + patch
    })
}

/// nccl-tests' failure lines (on stdout from every process that fails; docs/errors.md):
/// `<host>: Test NCCL failure ...`, `Test CUDA failure`, and the
/// ` .. <host> pid N: Test failure file:line` trace.
/// Crash lines count too ([`is_crash`]).
pub fn is_failure(line: &str) -> bool {
    line.contains("Test failure")
        || line.contains("Test NCCL failure")
        || line.contains("Test CUDA failure")
        || line.starts_with("Invalid number of GPUs:")
        || is_crash(line)
}

/// True for a line that says a process of the run crashed or NCCL gave up: Open MPI's
/// `[host:pid] Signal: Aborted (6)`, `mpirun noticed that process rank 3 ... exited on
/// signal 6 (Aborted).`, `srun: error: node: task 3: Aborted`, a shell's `Segmentation fault
/// (core dumped)`, NCCL's `NCCL ABORT` lines and its `NCCL WARN` lines that report a
/// fatal error (`communicator encountered a fatal error`, `async fatal event`, `Cuda
/// failure`, a timeout). Benign warnings (`NCCL WARN Failed to open libibverbs.so`) are not.
pub fn is_crash(line: &str) -> bool {
    let srun_task = line.contains("srun: error: ") && line.contains(": task ");
    if line.contains("] Signal: ")
        || line.trim_start().starts_with("Signal: ")
        || (line.contains("exited on signal ") && line.contains("process"))
        || srun_task
        || line.contains("Segmentation fault")
        || line.contains("(core dumped)")
        || line.contains("NCCL ABORT")
    {
        return true;
    }
    let Some((_, warning)) = line.split_once("NCCL WARN") else {
        return false;
    };
    let warning = warning.to_ascii_lowercase();
    ["fatal", "error", "failure", "abort", "timeout", "timed out"]
        .iter()
        .any(|w| warning.contains(w))
}

/// How much a failure line says, for choosing the one to name: nccl-tests' own failure (with
/// NCCL's or CUDA's error string) first, then NCCL's fatal warning, then the signal, then the
/// ` .. host pid N: Test failure file:line` trace, which says only where.
pub fn failure_weight(line: &str) -> u8 {
    if line.contains("Test NCCL failure")
        || line.contains("Test CUDA failure")
        || line.starts_with("Invalid number of GPUs:")
    {
        0
    } else if line.contains("NCCL WARN") || line.contains("NCCL ABORT") {
        1
    } else if is_crash(line) {
        2
    } else {
        3
    }
}

/// A number as printed in a table (fit-to-width, `%g`, legacy `%6.2f`): `nan`/`-nan` keep their
/// sign bit; an exponent cut short by the column width is refused.
pub fn number(token: &str, what: &str) -> Result<f64, LineError> {
    if let Some((_, exp)) = token.split_once(['e', 'E'])
        && exp.trim_start_matches(['+', '-']).len() < 2
    {
        return Err(LineError::CutShort {
            what: what.to_string(),
            token: token.to_string(),
        });
    }
    token.parse::<f64>().map_err(|_| LineError::NotANumber {
        what: what.to_string(),
        token: token.to_string(),
    })
}

fn integer<T: std::str::FromStr>(token: &str, what: &str) -> Result<T, LineError> {
    token.parse().map_err(|_| LineError::NotAnInteger {
        what: what.to_string(),
        token: token.to_string(),
    })
}

/// The parameter line `# nThread 1 nGpus 1 minBytes 8 maxBytes ... step: 2(factor) warmup
/// iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0`, read as key/value pairs
/// so that older versions (no `unalign:`, no `agg iters:`) are read too. `program` is set by
/// the caller.
pub fn parameters(line: &str) -> Result<RunInfo, LineError> {
    let mut info = RunInfo::default();
    let mut key = String::new();
    let mut seen = Vec::new();
    for token in line.trim_start_matches('#').split_whitespace() {
        let numeric = token.starts_with(|c: char| c.is_ascii_digit() || c == '-');
        if !numeric {
            if !key.is_empty() {
                key.push(' ');
            }
            key += token;
            continue;
        }
        let k = std::mem::take(&mut key);
        let what = format!("'{}'", k.trim_end_matches(':'));
        match k.as_str() {
            "nThread" => info.nthreads = integer(token, &what)?,
            "nGpus" => info.ngpus = integer(token, &what)?,
            "minBytes" => info.min_bytes = integer(token, &what)?,
            "maxBytes" => info.max_bytes = integer(token, &what)?,
            "step:" => info.step = step(token)?,
            "warmup iters:" => info.warmup_iters = integer(token, &what)?,
            "iters:" => info.iters = integer(token, &what)?,
            "agg iters:" => info.agg_iters = integer(token, &what)?,
            "validation:" => info.check = integer(token, &what)?,
            "graph:" => info.graph = integer(token, &what)?,
            "unalign:" => info.unalign = integer(token, &what)?,
            _ => {}
        }
        seen.push(k);
    }
    for required in ["nThread", "nGpus", "minBytes", "maxBytes", "step:"] {
        if !seen.iter().any(|k| k == required) {
            return Err(LineError::Malformed(format!(
                "parameter line without '{}'",
                required.trim_end_matches(':')
            )));
        }
    }
    Ok(info)
}

fn step(token: &str) -> Result<Step, LineError> {
    let bad = || LineError::Malformed(format!("step '{token}' is not N(factor) or N(bytes)"));
    let (n, kind) = token.split_once('(').ok_or_else(bad)?;
    let n: u64 = n.parse().map_err(|_| bad())?;
    match kind {
        "factor)" => Ok(Step::Factor(n)),
        "bytes)" => Ok(Step::Bytes(n)),
        _ => Err(bad()),
    }
}

/// A device line: `#  Rank  0 Group  0 Pid   1254 on         vm device  0 [0000:00:06] NVIDIA
/// H200`; older layouts without `Group` and with `[0x06]` (bus only) are read too.
pub fn device(line: &str) -> Result<DeviceInfo, LineError> {
    let body = line.trim_start_matches('#');
    let (fields, rest) = body
        .split_once('[')
        .ok_or_else(|| malformed("device line without '[pci address]'"))?;
    let (pci, name) = rest
        .split_once(']')
        .ok_or_else(|| malformed("device line without ']' after the pci address"))?;
    let tokens: Vec<&str> = fields.split_whitespace().collect();
    let value = |key: &str| -> Result<Option<&str>, LineError> {
        match tokens.iter().position(|t| *t == key) {
            None => Ok(None),
            Some(i) => match tokens.get(i + 1) {
                Some(v) => Ok(Some(*v)),
                None => Err(malformed(&format!("device line: '{key}' without a value"))),
            },
        }
    };
    let required = |key: &str| -> Result<&str, LineError> {
        value(key)?.ok_or_else(|| malformed(&format!("device line without '{key}'")))
    };
    // The host name is right-aligned in 10 columns and may be empty: it is what stands between
    // `on` and `device`.
    let on = tokens.iter().position(|t| *t == "on");
    let dev = tokens.iter().rposition(|t| *t == "device");
    let hostname = match (on, dev) {
        (Some(a), Some(b)) if b > a => tokens[a + 1..b].join(" "),
        _ => return Err(malformed("device line without 'on <host> device <n>'")),
    };
    let (pci_domain, pci_bus, pci_device) = pci_address(pci.trim())?;
    Ok(DeviceInfo {
        rank: integer(required("Rank")?, "rank")?,
        group: match value("Group")? {
            Some(g) => integer(g, "group")?,
            None => 0,
        },
        pid: integer(required("Pid")?, "pid")?,
        hostname,
        device: integer(
            tokens.get(dev.unwrap_or(0) + 1).copied().unwrap_or(""),
            "device",
        )?,
        pci_domain,
        pci_bus,
        pci_device,
        name: name.strip_prefix(' ').unwrap_or(name).to_string(),
    })
}

fn pci_address(s: &str) -> Result<(u32, u32, u32), LineError> {
    let hex = |h: &str| {
        u32::from_str_radix(h, 16)
            .map_err(|_| malformed(&format!("pci address '[{s}]' is not hexadecimal")))
    };
    if let Some(bus) = s.strip_prefix("0x") {
        return Ok((0, hex(bus)?, 0));
    }
    // rccl-tests prints the PCI function too (`0002:00:00.0`); the model keeps domain, bus and
    // device, as nccl-tests prints them.
    let s = match s.rsplit_once('.') {
        Some((address, function)) if !function.is_empty() && hex(function).is_ok() => address,
        _ => s,
    };
    match s.split(':').collect::<Vec<_>>()[..] {
        [d, b, v] => Ok((hex(d)?, hex(b)?, hex(v)?)),
        _ => Err(malformed(&format!(
            "pci address '[{s}]' is not domain:bus:device"
        ))),
    }
}

/// The columns a table has, from its header's field-name line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Columns {
    /// A `redop` column (every layout but the oldest all_gather/broadcast ones).
    pub redop: bool,
    /// A `root` column (since v2.?; older tables show it only for rooted collectives).
    pub root: bool,
    /// `error` (the largest deviation, older layouts) instead of `#wrong` (a count).
    pub error: bool,
    /// `cputime` instead of `time` (`-C 1`).
    pub cputime: bool,
    /// `i_min i_max i_p99 i_cv%` after each half (`-I 1`).
    pub per_iter: bool,
    /// A trailing `timestamp` (`-S 1`).
    pub timestamps: bool,
    /// Halves per row: 2 (out-of-place, in-place), or 1 where the table's author left the
    /// in-place half out (its values are then unknown: NaN, no `#wrong`).
    pub halves: usize,
    /// A `#wrong` (or `error`) column in each half; a table trimmed of it has no data check.
    pub wrong: bool,
}

impl Default for Columns {
    /// The v2.19.6 default layout.
    fn default() -> Columns {
        Columns {
            redop: true,
            root: true,
            error: false,
            cputime: false,
            per_iter: false,
            timestamps: false,
            halves: 2,
            wrong: true,
        }
    }
}

impl Columns {
    /// From the field-name line `#       size         count ...`.
    pub fn from_names(line: &str) -> Columns {
        let tokens: Vec<&str> = line.trim_start_matches('#').split_whitespace().collect();
        let times = tokens
            .iter()
            .filter(|t| **t == "time" || **t == "cputime")
            .count();
        let error = tokens.contains(&"error");
        Columns {
            redop: tokens.contains(&"redop"),
            root: tokens.contains(&"root"),
            error,
            cputime: tokens.contains(&"cputime"),
            per_iter: tokens.contains(&"i_min"),
            timestamps: tokens.contains(&"timestamp"),
            // A header that names no time column is no trimmed table: read it as the full one.
            halves: if times == 1 { 1 } else { 2 },
            // `#wrong`, ` #wrong`, or the `wrong` a page left when it took the `#` away.
            wrong: error || tokens.iter().any(|t| t.ends_with("wrong")) || times == 0,
        }
    }

    fn per_half(&self) -> usize {
        let stats = if self.per_iter { 4 } else { 0 };
        3 + usize::from(self.wrong) + stats
    }

    /// Fields before the first half: size, count, type, then redop and root where present.
    fn leading(&self) -> usize {
        3 + usize::from(self.redop) + usize::from(self.root)
    }

    /// Whitespace-separated tokens of a row with an op name.
    pub fn tokens(&self) -> usize {
        self.leading() + self.halves * self.per_half() + if self.timestamps { 2 } else { 0 }
    }

    /// The field names, for messages: `size count type redop root, then time algbw busbw
    /// #wrong per half`.
    fn describe(&self) -> String {
        let mut lead = vec!["size", "count", "type"];
        if self.redop {
            lead.push("redop");
        }
        if self.root {
            lead.push("root");
        }
        let time = if self.cputime { "cputime" } else { "time" };
        let wrong = match (self.wrong, self.error) {
            (false, _) => "",
            (true, true) => " error",
            (true, false) => " #wrong",
        };
        let mut half = format!("{time} algbw busbw{wrong}");
        if self.per_iter {
            half += " i_min i_max i_p99 i_cv%";
        }
        let ts = if self.timestamps {
            ", then the timestamp"
        } else {
            ""
        };
        let per = if self.halves == 1 {
            "for the out-of-place half only"
        } else {
            "per half"
        };
        format!("{}, then {half} {per}{ts}", lead.join(" "))
    }
}

/// True for the field-name line of a table header.
pub fn is_names_line(line: &str) -> bool {
    let mut t = line.trim_start_matches('#').split_whitespace();
    t.next() == Some("size") && t.next() == Some("count")
}

/// A data row. A row with one token fewer than the columns call for has an empty op column
/// (hypercube; alltoall in older layouts). A table without `redop` gives op `none` and one
/// without `root` root -1, as v2.19.6 prints them for those collectives.
pub fn row(line: &str, columns: &Columns, iterations: i64) -> Result<RowResult, LineError> {
    let mut t: Vec<&str> = line.split_whitespace().collect();
    let want = columns.tokens();
    if t.len() + 1 == want && columns.redop {
        t.insert(3, "");
    }
    if t.len() != want {
        return Err(LineError::Malformed(format!(
            "a row of this table has {want} fields ({}), this line has {}",
            columns.describe(),
            t.len()
        )));
    }
    let (op, rest) = if columns.redop {
        (t[3].to_string(), 4)
    } else {
        ("none".to_string(), 3)
    };
    let (root, lead) = if columns.root {
        (integer(t[rest], "root")?, rest + 1)
    } else {
        (-1, rest)
    };
    let n = columns.per_half();
    let out_of_place = half(&t[lead..lead + n], "out-of-place", columns.wrong)?;
    let in_place = if columns.halves == 2 {
        half(&t[lead + n..lead + 2 * n], "in-place", columns.wrong)?
    } else {
        // Left out of the table by its author: not measured as far as the log tells.
        HalfResult {
            time_us: f64::NAN,
            algbw: f64::NAN,
            busbw: f64::NAN,
            wrong: None,
            per_iter: None,
        }
    };
    let end = lead + columns.halves * n;
    Ok(RowResult {
        size: integer(t[0], "size")?,
        count: integer(t[1], "count")?,
        dtype: t[2].to_string(),
        op,
        root,
        out_of_place,
        in_place,
        timestamp: columns
            .timestamps
            .then(|| format!("{} {}", t[end], t[end + 1])),
        iterations,
    })
}

fn half(t: &[&str], which: &str, has_wrong: bool) -> Result<HalfResult, LineError> {
    let num = |i: usize, name: &str| number(t[i], &format!("{which} {name}"));
    // Older layouts mark an `error` beyond the tolerance with a trailing `*`.
    let wrong = match t
        .get(3)
        .filter(|_| has_wrong)
        .map(|w| w.trim_end_matches('*'))
    {
        None | Some("N/A") => None,
        Some(w) => Some(number(w, "").map_err(|_| {
            malformed(&format!("{which} #wrong '{}' is not a number or N/A", t[3]))
        })?),
    };
    let stats = if has_wrong { 4 } else { 3 };
    let per_iter = if t.len() > stats {
        let (min, max, p99, cv) = (
            num(stats, "i_min")?,
            num(stats + 1, "i_max")?,
            num(stats + 2, "i_p99")?,
            num(stats + 3, "i_cv%")?,
        );
        Some(PerIterStats {
            skipped: 0,
            min_us: min,
            max_us: max,
            avg_us: f64::NAN,
            p50_us: f64::NAN,
            p95_us: f64::NAN,
            p99_us: p99,
            stdev_us: f64::NAN,
            cv_pct: cv,
            times_us: Vec::new(),
            per_process_max_times_us: Vec::new(),
        })
    } else {
        None
    };
    Ok(HalfResult {
        time_us: num(0, "time")?,
        algbw: num(1, "algbw")?,
        busbw: num(2, "busbw")?,
        wrong,
        per_iter,
    })
}

/// `# Out of bounds values : N OK|FAILED` → N.
pub fn out_of_bounds(line: &str) -> Result<u64, LineError> {
    let value = after_colon(line);
    let n = value.split_whitespace().next().unwrap_or("");
    integer(n, "out-of-bounds count")
}

/// `# Avg bus bandwidth    : X <status>` → (X, status: None for none, else OK/FAILED).
pub fn average(line: &str) -> Result<(f64, Option<bool>), LineError> {
    let value = after_colon(line);
    let mut t = value.split_whitespace();
    let avg = number(t.next().unwrap_or(""), "average bus bandwidth")?;
    let status = match t.next() {
        None => None,
        Some("OK") => Some(true),
        Some("FAILED") => Some(false),
        Some(s) => {
            return Err(malformed(&format!(
                "average bus bandwidth status '{s}' is not OK or FAILED"
            )));
        }
    };
    Ok((avg, status))
}

/// The text after `label : ` of a `# %-20s : ...` footer line.
pub fn after_colon(line: &str) -> &str {
    line.split_once(" : ").map_or("", |(_, v)| v)
}

/// The columns of a table shown without any header line (rows pasted alone), from one of its
/// rows: `None` for a line that is no row of nccl-tests' full layouts. A row is `size count
/// type`, the op where a word follows the type, the root where one more number does (after an
/// empty op column: hypercube's), then two halves of `time algbw busbw #wrong` (and `i_min
/// i_max i_p99 i_cv%` with `-I 1`), then `-S 1`'s timestamp; a layout trimmed by hand cannot be
/// told without its header.
/// An `#wrong` written as a fraction (`2e-07`, `0.00`) is the older `error` column.
pub fn columns_of_row(line: &str) -> Option<Columns> {
    let mut t: Vec<&str> = line.split_whitespace().collect();
    // `-S 1`'s timestamp ends the row: `2026-12-02 12:57:44`.
    let stamp = |d: &str, c: char| {
        d.len() > 4 && d.contains(c) && d.bytes().all(|b| b.is_ascii_digit() || b == c as u8)
    };
    let timestamps = t.len() > 11 && stamp(t[t.len() - 2], '-') && stamp(t[t.len() - 1], ':');
    if timestamps {
        t.truncate(t.len() - 2);
    }
    if !(11..=21).contains(&t.len()) {
        return None;
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(t[0]) || !digits(t[1]) || !is_type_name(t[2]) {
        return None;
    }
    let op = t[3].starts_with(|c: char| c.is_ascii_alphabetic()) && t[3] != "N/A";
    let lead = 3 + usize::from(op);
    let (root, per_iter) = match t.len() - lead {
        8 => (false, false),
        9 => (true, false),
        16 => (false, true),
        17 => (true, true),
        _ => return None,
    };
    let values = &t[lead..];
    let numeric = |s: &&str| *s == "N/A" || s.trim_end_matches('*').parse::<f64>().is_ok();
    if !values.iter().all(numeric) {
        return None;
    }
    let first = lead + usize::from(root);
    let per_half = if per_iter { 8 } else { 4 };
    let error = [t[first + 3], t[first + 3 + per_half]]
        .iter()
        .any(|w| w.contains(['.', 'e', 'E']) && *w != "N/A");
    Some(Columns {
        redop: op || root,
        root,
        error,
        per_iter,
        timestamps,
        ..Columns::default()
    })
}

/// A datatype name as nccl-tests and rccl-tests print it in the `type` column.
fn is_type_name(token: &str) -> bool {
    nccl_perf_cli::types::DataType::from_name(token).is_some()
        || ["char", "int", "uint", "fp8_e4m3", "fp8_e5m2"].contains(&token)
}

/// True for the first line of either footer line (`# Out of bounds values`, `# Avg bus
/// bandwidth`).
pub fn is_footer(line: &str) -> bool {
    line.starts_with("# Out of bounds values") || line.starts_with("# Avg bus bandwidth")
}
