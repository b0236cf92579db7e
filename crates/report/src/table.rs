//! The text report: header, device lines, table header, rows and footer.
//!
//! Every function returns complete lines, each ending in `\n`, laid out byte for byte as
//! nccl-tests v2.19.6 prints them; trailing spaces are part of the contract. The caller
//! decides where the text goes (only the main thread of world rank 0 prints).
//!
//! Where the references do not show a case, we decided:
//! - the first table-header line does not depend on `-S`: the default one keeps its trailing
//!   spaces, the `-I 1` one has none (the only `-I` reference also has `-S 1`, and the spec's
//!   `-I` example without `-S` shows no trailing space either);
//! - the version line carries our own name and version after upstream's three fields, so tools
//!   reading `nccl-library=` still find it and a reader can tell the two programs apart.

use super::numbers::{c_fixed, c_g, fit};
use super::{DeviceInfo, HalfResult, RowResult, RunInfo, Step, Summary};

/// The nccl-tests release whose output we reproduce.
pub const NCCL_TESTS_VERSION: &str = "2.19.6";

/// The NCCL API level our bindings follow, as the `NCCL_VERSION_CODE` nccl-tests would print in
/// `nccl-headers=` (2.28.3: the NCCL of the reference machine).
pub const NCCL_HEADERS_VERSION: i32 = 22803;

/// Width of a time field (µs).
const TIME_WIDTH: usize = 7;
/// Width of a bandwidth field (GB/s).
const BW_WIDTH: usize = 6;
/// Width of the `-S 1` timestamp column in the table header (`%Y-%m-%d %H:%M:%S`).
const TIMESTAMP_HEADER_WIDTH: usize = 19;

/// The version line: nccl-tests' version we follow, the NCCL API level of our bindings, the
/// runtime library version (`ncclGetVersion`), then our own name and version, e.g.
/// `# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803 (nccl-perf 0.1.0)`.
pub fn version_line(nccl_library_code: i32) -> String {
    format!(
        "# nccl-tests version {NCCL_TESTS_VERSION} nccl-headers={NCCL_HEADERS_VERSION} \
         nccl-library={nccl_library_code} (nccl-perf {})\n",
        env!("CARGO_PKG_VERSION")
    )
}

/// The report header from `# Collective test starting:` to `# Using devices`: the
/// parameter line, the `-z`, `-I` and `-p` lines when enabled, `#` and `# Using devices`.
pub fn header(info: &RunInfo) -> String {
    let (step, step_kind) = match info.step {
        Step::Factor(f) => (f, "factor"),
        Step::Bytes(b) => (b, "bytes"),
    };
    let mut out = format!("# Collective test starting: {}\n", info.program);
    out += &format!(
        "# nThread {} nGpus {} minBytes {} maxBytes {} step: {step}({step_kind}) \
         warmup iters: {} iters: {} agg iters: {} validation: {} graph: {} unalign: {}\n",
        info.nthreads,
        info.ngpus,
        info.min_bytes,
        info.max_bytes,
        info.warmup_iters,
        info.iters,
        info.agg_iters,
        info.check,
        info.graph,
        info.unalign,
    );
    let blocking = match info.blocking {
        1 => Some("wait and barrier after each inner iteration (-m)"),
        2 => Some("wait after each inner iteration (-m), no barrier"),
        3 => Some("wait and barrier after each outer iteration (-n); time excludes barrier"),
        _ => None,
    };
    if let Some(text) = blocking {
        out += &format!("# Blocking Enabled: {text} \n");
    }
    if info.per_iter {
        out += "# Per-Iteration Report: CUDA event timing; i_* uses max over process rows";
        if info.per_iter_skip > 0 {
            out += &format!("; summary skips first {} iterations", info.per_iter_skip);
        }
        out += " \n";
    }
    if info.parallel_init {
        out += "# Parallel Init Enabled: threads call into NcclInitRank concurrently \n";
    }
    out += "#\n# Using devices\n";
    out
}

/// One `#  Rank ...` device line: rank, group, pid, host, CUDA ordinal, PCI id and device name.
pub fn device_line(d: &DeviceInfo) -> String {
    format!(
        "#  Rank {:2} Group {:2} Pid {:6} on {:>10} device {:2} [{:04x}:{:02x}:{:02x}] {}\n",
        d.rank, d.group, d.pid, d.hostname, d.device, d.pci_domain, d.pci_bus, d.pci_device, d.name
    )
}

/// The two lines printed after the device list when the memory clamp lowered maxBytes
/// (the buffers of `-e` would not fit in the smallest GPU's memory).
pub fn memory_clamp_lines(new_max: u64) -> String {
    format!("#\n# Reducing maxBytes to {new_max} due to memory limitation\n")
}

/// The table header: `#` and three lines, in the default, `-C 1` (`cputime`),
/// `-S 1` (timestamp column) and `-I 1` (per-iteration columns) variants.
pub fn table_header(info: &RunInfo) -> String {
    let mut out = String::from("#\n");
    if info.per_iter {
        out += &format!(
            "#{:>95}{:>58}\n",
            "out-of-place (+ per-iteration)", "in-place (+ per-iteration)"
        );
    } else {
        out += &format!("#{:>74}{:>31}{:10}\n", "out-of-place", "in-place", "");
    }
    let time = if info.report_cputime {
        "cputime"
    } else {
        "time"
    };
    let (ts_width, ts_names, ts_units) = if info.report_timestamps {
        (TIMESTAMP_HEADER_WIDTH, "timestamp", "%Y-%m-%d %H:%M:%S")
    } else {
        (0, "", "")
    };
    let names = [
        time, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%",
    ];
    let units = [
        "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)",
    ];
    let lines = [
        (["size", "count", "type", "redop", "root"], names, ts_names),
        (["(B)", "(elements)", "", "", ""], units, ts_units),
    ];
    for (preamble, half, ts) in lines {
        out += &format!(
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}",
            preamble[0], preamble[1], preamble[2], preamble[3], preamble[4]
        );
        for _ in 0..2 {
            out += &format!(
                "  {:>7}  {:>6}  {:>6}  {:>6}",
                half[0], half[1], half[2], half[3]
            );
            if info.per_iter {
                out += &format!(
                    "  {:>7}  {:>7}  {:>7}  {:>7}",
                    half[4], half[5], half[6], half[7]
                );
            }
        }
        out += &format!(" {ts:>ts_width$}\n");
    }
    out
}

/// One data row: preamble, out-of-place half, in-place half (each followed by its
/// per-iteration block with `-I 1`), the timestamp with `-S 1`, and a newline.
///
/// The columns follow `info` (as the table header does): with `-I 1` a half without statistics
/// prints `nan` in its four per-iteration fields, with `-S 1` a row without timestamp prints an
/// empty (blank) timestamp field.
pub fn row(r: &RowResult, info: &RunInfo) -> String {
    let mut out = format!(
        "{:12}  {:12}  {:>8}  {:>6}  {:>6}",
        r.size, r.count, r.dtype, r.op, r.root
    );
    for half in [&r.out_of_place, &r.in_place] {
        out += &half_columns(half, info.per_iter);
    }
    if info.report_timestamps {
        out += &format!("{:>21}", r.timestamp.as_deref().unwrap_or(""));
    }
    out.push('\n');
    out
}

/// `  time  algbw  busbw  #wrong` of one half (`N/A` takes one column less, as upstream's
/// `    N/A`), then `  i_min  i_max  i_p99  i_cv%` when `per_iter`.
fn half_columns(h: &HalfResult, per_iter: bool) -> String {
    let mut out = format!(
        "  {}  {}  {}",
        fit(h.time_us, TIME_WIDTH),
        fit(h.algbw, BW_WIDTH),
        fit(h.busbw, BW_WIDTH)
    );
    match h.wrong {
        Some(wrong) => out += &format!("  {:>6}", c_g(wrong)),
        None => out += "    N/A",
    }
    if per_iter {
        let stats = h
            .per_iter
            .as_ref()
            .map_or([f64::NAN; 4], |s| [s.min_us, s.max_us, s.p99_us, s.cv_pct]);
        for value in stats {
            out += "  ";
            out += &fit(value, TIME_WIDTH);
        }
    }
    out
}

/// The footer: out-of-bounds and average lines, `#`, the concluded line, the `-M 1`
/// memory line if any, `#`, then an empty line or `# error: <text>`.
///
/// The average is printed with `%g`; a run without rows should pass
/// [`super::numbers::NO_ROWS_AVERAGE`] (see [`super::numbers::average`]), which prints `-nan` as
/// upstream does on x86.
pub fn footer(s: &Summary, program: &str) -> String {
    let oob_status = if s.oob_errors > 0 { "FAILED" } else { "OK" };
    let bw_status = match s.min_bw_ok {
        None => "",
        Some(true) => "OK",
        Some(false) => "FAILED",
    };
    let mut out = format!(
        "# {:<20} : {} {oob_status}\n",
        "Out of bounds values", s.oob_errors
    );
    out += &format!(
        "# {:<20} : {} {bw_status}\n",
        "Avg bus bandwidth",
        c_g(s.avg_busbw)
    );
    out += &format!("#\n# Collective test concluded: {program}\n");
    if let Some(report) = &s.memory_report {
        out += &format!("# {:<20} : {report}\n", "GPU memory usage");
    }
    out += "#\n";
    if s.last_error.is_empty() {
        out.push('\n');
    } else {
        out += &format!("# error: {}\n", s.last_error);
    }
    out
}

/// The body of the `-M 1` memory line:
/// `Initialization <a> | User-Allocated <b> | Collective <c> | Total  <a+b+c>`, amounts in bytes
/// formatted by [`memory_amount`].
pub fn memory_report(initialization: f64, user_allocated: f64, collective: f64) -> String {
    format!(
        "Initialization {} | User-Allocated {} | Collective {} | Total  {}",
        memory_amount(initialization),
        memory_amount(user_allocated),
        memory_amount(collective),
        memory_amount(initialization + user_allocated + collective)
    )
}

/// A memory amount as the `-M 1` report prints it: unit chosen by magnitude
/// (`GB` ≥ 1 GiB, `MB` ≥ 1 MiB, `KB` ≥ 1 KiB, else `B`; binary multiples), then 2 decimals below
/// 10, 1 below 100, else none: `1.50 GB`, `12.0 MB`, `512 MB`, `0.00 B`. Negative amounts keep
/// their sign.
pub fn memory_amount(bytes: f64) -> String {
    const KIB: f64 = 1024.0;
    let magnitude = bytes.abs();
    let (divisor, unit) = if magnitude >= KIB * KIB * KIB {
        (KIB * KIB * KIB, "GB")
    } else if magnitude >= KIB * KIB {
        (KIB * KIB, "MB")
    } else if magnitude >= KIB {
        (KIB, "KB")
    } else {
        (1.0, "B")
    };
    let value = bytes / divisor;
    let decimals = if value.abs() < 10.0 {
        2
    } else if value.abs() < 100.0 {
        1
    } else {
        0
    };
    format!("{} {unit}", c_fixed(value, decimals))
}

#[cfg(test)]
mod tests;
