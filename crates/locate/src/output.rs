//! The text locate prints on stdout: one `#` line per group per round as rounds complete, then
//! the verdict lines. Every line starts with `#` and never contains the words `bandwidth` or
//! `FAILED`, which tools that scrape nccl-tests output look for (host names are scrubbed too).

use super::Report;
use super::history::RoundRecord;
use super::judge::State;
use super::round::Role;
use super::topology::Topology;
use super::verdict::times;

/// Replaces the words scrapers look for: `bandwidth` (any case) becomes `bw`, `FAILED`
/// becomes `failed`.
pub fn scrub(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let lower = line.to_ascii_lowercase();
    let mut i = 0;
    while i < line.len() {
        if lower[i..].starts_with("bandwidth") {
            out += "bw";
            i += "bandwidth".len();
        } else if line[i..].starts_with("FAILED") {
            out += "failed";
            i += "FAILED".len();
        } else {
            let c = line[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8().max(1);
        }
    }
    out
}

/// The column header printed before the first round.
pub fn header() -> String {
    format!(
        "# locate {:>5} {:<6} {:>5}  {:<30} {:>5} {:>10} {:>11} {:>6}  state",
        "round", "phase", "group", "subject", "ranks", "busbw", "time(us)", "ratio"
    )
}

/// One line per group of a round.
pub fn group_lines(rec: &RoundRecord, topo: &Topology) -> Vec<String> {
    rec.round
        .groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let o = rec.outcomes.get(i);
            let j = rec.judgement(i);
            let state = j.map_or(State::Error, |j| j.state);
            let busbw = o
                .and_then(|o| o.busbw())
                .map_or("-".into(), |v| format!("{v:.2}"));
            let time = o
                .and_then(|o| o.time_us())
                .map_or("-".into(), |v| format!("{v:.1}"));
            let ratio = j.and_then(|j| j.ratio).map_or("-".into(), times);
            let role = match g.role {
                Role::Primary => "",
                Role::Probe => " probe",
                Role::Control => " control",
            };
            let mut subject = g.subject.describe(topo);
            if subject.chars().count() > 30 {
                subject = subject.chars().take(27).collect::<String>() + "...";
            }
            scrub(&format!(
                "# locate {:>5} {:<6} {:>5}  {:<30} {:>5} {:>10} {:>11} {:>6}  {}{role}",
                rec.round.index,
                rec.round.phase.name(),
                i,
                subject,
                g.ranks.len(),
                busbw,
                time,
                ratio,
                state.name()
            ))
        })
        .collect()
}

/// The lines of a round: every group's line when the round has at most `max_groups` groups,
/// else one summary line and the lines of the groups that are not ok (a 1024-node `full`
/// round has 512 groups).
pub fn round_lines(rec: &RoundRecord, topo: &Topology, max_groups: usize) -> Vec<String> {
    let lines = group_lines(rec, topo);
    if lines.len() <= max_groups {
        return lines;
    }
    let count = |s: State| rec.judged.iter().filter(|j| j.state == s).count();
    let mut out = vec![scrub(&format!(
        "# locate {:>5} {:<6} {} groups: {} ok, {} slow, {} hung, {} error, {} unjudged; {:.1} s",
        rec.round.index,
        rec.round.phase.name(),
        rec.round.groups.len(),
        count(State::Ok),
        count(State::Slow),
        count(State::Hung),
        count(State::Error),
        count(State::Unjudged),
        rec.wall_s
    ))];
    out.extend(
        lines
            .into_iter()
            .zip(&rec.judged)
            .filter(|(_, j)| j.state != State::Ok)
            .map(|(l, _)| l),
    );
    out
}

/// The verdict: a summary line, one line per suspect, the job against its pairs, notes, what
/// the run could not see, and why it stopped.
pub fn verdict_lines(report: &Report, topo: &Topology) -> Vec<String> {
    let gpus = topo.rails();
    let suspects = match report.verdicts.len() {
        0 => "no suspect".to_string(),
        1 => "1 suspect".to_string(),
        k => format!("{k} suspects"),
    };
    // Nobody named: how close the nearest group came, so "no suspect" is never bare.
    let closest = match &report.closest {
        Some(c) => format!(
            "; closest: {} at {} in round {}; {:.0} % needed",
            c.description,
            times(c.ratio),
            c.round,
            100.0 * c.needed_drop
        ),
        None if report.verdicts.is_empty() && !report.rounds.is_empty() => {
            "; no group could be judged against others of its shape".into()
        }
        None => String::new(),
    };
    let mut lines = vec![format!(
        "# locate verdict: {suspects} after {} rounds (schedule {}, {} nodes x {} GPUs, {:.1} s \
         of rounds){closest}",
        report.rounds.len(),
        report.config.schedule.name(),
        topo.nodes(),
        gpus,
        report.wall_s()
    )];
    for v in &report.verdicts {
        let how = match (v.state, v.ratio) {
            (State::Slow, Some(r)) => format!("slow {}", times(r)),
            (State::Slow, None) => "slow".into(),
            (s, _) => s.name().into(),
        };
        let below = if v.below_min {
            " (below --locate-min-busbw)"
        } else {
            ""
        };
        lines.push(format!(
            "# locate suspect: {} {how}{below}: {}",
            v.culprit.describe(topo),
            v.evidence
        ));
    }
    if let Some(j) = &report.job {
        lines.push(format!("# locate job: {}", j.describe()));
    }
    for n in &report.notes {
        lines.push(format!("# locate note: {n}"));
    }
    for u in &report.unseen {
        lines.push(format!("# locate unseen: {u}"));
    }
    if let Some(s) = &report.stopped {
        lines.push(format!("# locate stopped: {s}"));
    }
    lines.iter().map(|l| scrub(l)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrub_removes_the_scraped_words_only() {
        assert_eq!(scrub("node Bandwidth FAILED ok"), "node bw failed ok");
        assert_eq!(scrub("FAILE bandwidt é"), "FAILE bandwidt é");
        assert_eq!(scrub(""), "");
    }

    #[test]
    fn header_is_a_comment_free_of_scraped_words() {
        let h = header();
        assert!(h.starts_with("# locate"));
        assert!(!h.contains("bandwidth") && !h.contains("FAILED"));
    }
}
