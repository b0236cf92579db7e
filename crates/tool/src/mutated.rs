//! Real logs, damaged at random (deterministically): lines dropped, doubled, swapped, cut, their
//! `#` lost, launcher tags and odd characters put in. Reading, every report format, the health
//! checks and the explanation must answer each without a panic.

use nccl_perf_explain::sku::SkuTable;
use nccl_perf_report::formats;
use nccl_perf_report::health;
use nccl_perf_report::parse::{ParseOptions, parse_log};
use std::path::Path;

/// xorshift64: the same damage on every run.
struct Dice(u64);

impl Dice {
    fn roll(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

/// Text that breaks naive parsers: controls, a right-to-left override, wide and combining
/// characters, numbers' look-alikes.
const ODD: [&str; 12] = [
    "\t", "\r", "\u{202e}", "é", "\u{0301}", "数", "🙂", "-nan", "1e+308", "#", "  ", "[0]",
];

fn damage(text: &str, dice: &mut Dice) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for _ in 0..1 + dice.roll(4) {
        let n = lines.len();
        if n == 0 {
            break;
        }
        let i = dice.roll(n);
        match dice.roll(9) {
            0 => {
                lines.remove(i);
            }
            1 => {
                let l = lines[i].clone();
                lines.insert(i, l);
            }
            2 => lines.swap(i, dice.roll(n)),
            3 => {
                let l = &lines[i];
                let cut = dice.roll(l.len() + 1);
                let cut = (0..=cut)
                    .rev()
                    .find(|&c| l.is_char_boundary(c))
                    .unwrap_or(0);
                lines[i] = l[..cut].to_string();
            }
            4 => lines[i] = lines[i].trim_start_matches('#').to_string(),
            5 => lines[i] = format!("[0] {}", lines[i]),
            6 => {
                let l = &lines[i];
                let at = dice.roll(l.len() + 1);
                let at = (0..=at).rev().find(|&c| l.is_char_boundary(c)).unwrap_or(0);
                lines[i] = format!("{}{}{}", &l[..at], ODD[dice.roll(ODD.len())], &l[at..]);
            }
            7 => lines[i] = lines[i].replace(|c: char| c.is_ascii_digit(), "9"),
            _ => lines.truncate(i),
        }
    }
    lines.join("\n") + "\n"
}

#[test]
fn damaged_real_logs_never_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in ["tests/logs", "tests/golden/nccl-tests-2.19.6-h200"] {
        let entries = std::fs::read_dir(root.join(dir)).unwrap_or_else(|e| panic!("{dir}: {e}"));
        for e in entries.flatten() {
            let p = e.path();
            if matches!(p.extension().and_then(|x| x.to_str()), Some("log" | "out")) {
                files.push(p);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 40, "{} logs", files.len());
    let skus = SkuTable::builtin();
    let mut dice = Dice(0x9e37_79b9_7f4a_7c15);
    let mut read = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{e}"));
        for round in 0..30 {
            let damaged = damage(&text, &mut dice);
            let name = format!("{} #{round}", path.display());
            let Ok(runs) = parse_log(&damaged, &name, &ParseOptions::default()) else {
                continue;
            };
            read += 1;
            for f in formats::names() {
                if let Some(f) = formats::by_name(f) {
                    let _ = f.render(&runs);
                }
            }
            for run in &runs {
                let _ = health::problems(run);
                let _ = crate::explain::text(run, &skus);
            }
        }
    }
    assert!(
        read > files.len() * 10,
        "only {read} damaged logs were still read"
    );
}
