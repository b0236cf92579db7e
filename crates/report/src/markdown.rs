//! A run as a Markdown (GitHub) table, for pull requests, issues and wikis: one heading per
//! test, the table's columns with units in the header, numbers as the text table prints them.

use super::numbers::{c_g, fit};
use super::run::Run;
use super::{HalfResult, RowResult};

/// The Markdown of one run: `### program (source)`, the table, then the footer values.
pub fn render(run: &Run) -> String {
    let program = match (
        run.info.program.as_str(),
        crate::health::inferred_program(run),
    ) {
        ("", Some((p, _))) => format!("{p}, inferred from its numbers"),
        ("", None) => "unnamed test".to_string(),
        (p, _) => p.to_string(),
    };
    let mut out = format!("### {program} ({})\n\n", run.source.file);
    let time = if run.info.report_cputime {
        "cputime"
    } else {
        "time"
    };
    let mut names = vec![
        "size (B)".to_string(),
        "count".into(),
        "type".into(),
        "redop".into(),
        "root".into(),
    ];
    for half in ["out-of-place", "in-place"] {
        for col in [time, "algbw", "busbw", "#wrong"] {
            let unit = match col {
                "algbw" | "busbw" => " (GB/s)",
                "#wrong" => "",
                _ => " (us)",
            };
            names.push(format!("{half} {col}{unit}"));
        }
    }
    out += &line(&names);
    let align: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, _)| if (2..4).contains(&i) { ":---" } else { "---:" }.to_string())
        .collect();
    out += &line(&align);
    for r in &run.rows {
        out += &line(&cells(r));
    }
    if let Some(s) = &run.summary {
        out += &format!(
            "\nOut of bounds values: {} {}. Average bus bandwidth: {} GB/s.\n",
            s.oob_errors,
            if s.oob_errors > 0 { "FAILED" } else { "OK" },
            c_g(s.avg_busbw)
        );
    } else {
        out += "\nThe test stopped before its footer.\n";
    }
    let problems = super::health::problem_lines(run);
    if !problems.is_empty() {
        out += "\n**Not to be trusted:**\n\n";
        for p in problems {
            out += &format!("- {}\n", p.replace('|', "\\|"));
        }
    }
    out
}

fn cells(r: &RowResult) -> Vec<String> {
    let mut c = vec![
        r.size.to_string(),
        r.count.to_string(),
        r.dtype.clone(),
        r.op.clone(),
        r.root.to_string(),
    ];
    for h in [&r.out_of_place, &r.in_place] {
        c.extend(half(h));
    }
    c
}

fn half(h: &HalfResult) -> [String; 4] {
    [
        fit(h.time_us, 7).trim().to_string(),
        fit(h.algbw, 6).trim().to_string(),
        fit(h.busbw, 6).trim().to_string(),
        h.wrong.map_or("N/A".to_string(), c_g),
    ]
}

fn line(cells: &[String]) -> String {
    format!("| {} |\n", cells.join(" | "))
}
