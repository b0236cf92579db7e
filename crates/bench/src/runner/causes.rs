//! The failures that stop a job once its processes have met, said once. Each process' own
//! problem (a libcuda or libnccl that cannot be loaded, no GPU, too few GPUs) travels to rank 0
//! in its record at the agreement (`placement::agree`); rank 0 groups the processes that met
//! the same cause and says each cause once, with how many processes met it and on which hosts:
//! `all_reduce_perf: 32 of 32 processes on vm: cannot load libcuda.so.1 ...`. Pure: the lines
//! are made here and printed by the caller.

/// At most this many hosts (and rank ranges) are named in a line; the rest are counted.
const NAMED: usize = 8;

/// One cause and the processes that met it.
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    /// Its text, one line (a process' error as it would say it, without its host).
    pub text: String,
    /// Its exit code.
    pub code: u8,
    /// nccl-tests' line for it on stdout, as the first process that met it would print it
    /// (CUDA and NCCL failures, the GPU count check); `None` for stderr causes.
    pub stdout: Option<String>,
    /// The first process' hint (too few GPUs), prefixed with its host.
    pub hint: Option<String>,
    /// The world ranks that met it, ascending.
    pub ranks: Vec<usize>,
    /// Their hosts, each once, in rank order.
    pub hosts: Vec<String>,
    /// The texts differ in their numbers (nccl-tests' GPU count check: each local rank
    /// requests its own count); `text` is the first process'.
    pub numbers_vary: bool,
}

/// What one process met, as its record at the agreement tells.
#[derive(Debug, Clone, PartialEq)]
pub struct Met<'a> {
    /// Its world rank.
    pub rank: usize,
    /// Its host.
    pub host: &'a str,
    /// Its problem, as it would say it without its host (maybe several lines).
    pub problem: &'a str,
    /// The problem's exit code.
    pub code: u8,
    /// nccl-tests' stdout line for it, if any.
    pub stdout: Option<&'a str>,
    /// Its hint, if any.
    pub hint: Option<&'a str>,
}

/// The causes the processes met, each once, in the order of the first rank that met it.
/// Texts equal but for their numbers are one cause, whatever the host.
pub fn group<'a>(met: impl IntoIterator<Item = Met<'a>>) -> Vec<Cause> {
    let mut causes: Vec<Cause> = Vec::new();
    for r in met {
        let text = one_line(r.problem);
        let code = r.code;
        let same = |c: &Cause| c.code == code && shape(&c.text) == shape(&text);
        let i = match causes.iter().position(same) {
            Some(i) => {
                causes[i].numbers_vary |= causes[i].text != text;
                i
            }
            None => {
                causes.push(Cause {
                    text,
                    code,
                    stdout: r.stdout.map(str::to_string),
                    hint: r.hint.map(|h| format!("{}: {h}", r.host)),
                    ranks: Vec::new(),
                    hosts: Vec::new(),
                    numbers_vary: false,
                });
                causes.len() - 1
            }
        };
        let c = &mut causes[i];
        c.ranks.push(r.rank);
        if !c.hosts.iter().any(|h| h == r.host) {
            c.hosts.push(r.host.to_string());
        }
    }
    causes
}

/// A text with each run of digits as `#`: the shape that texts of one cause share.
fn shape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c.is_ascii_digit() {
            true if out.ends_with('#') => {}
            true => out.push('#'),
            false => out.push(c),
        }
    }
    out
}

/// A text of several lines as one (nccl-tests' GPU count check has two).
fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

impl Cause {
    /// Its line on stderr: `<program>: <n> of <world> processes [(ranks ...)] on <hosts>:
    /// <text>`; the ranks are named when not every process met it; where the texts' numbers
    /// differ, the first process' text and a note saying so.
    pub fn line(&self, program: &str, world: usize) -> String {
        let n = self.ranks.len();
        let ranks = match n {
            _ if n == world => String::new(),
            1 => format!(" (rank {})", self.ranks[0]),
            _ => format!(" (ranks {})", ranges(&self.ranks)),
        };
        let noun = if world == 1 { "process" } else { "processes" };
        let vary = match self.numbers_vary {
            true => format!(
                " (rank {}'s; the numbers differ between these processes)",
                self.ranks[0]
            ),
            false => String::new(),
        };
        format!(
            "{program}: {n} of {world} {noun}{ranks} on {}: {}{vary}",
            hosts(&self.hosts),
            self.text
        )
    }
}

/// Hosts as `a, b, c`, the first [`NAMED`] and `and <n> more hosts` beyond.
fn hosts(all: &[String]) -> String {
    let named = all[..all.len().min(NAMED)].join(", ");
    match all.len().saturating_sub(NAMED) {
        0 => named,
        more => format!("{named} and {more} more hosts"),
    }
}

/// Ascending ranks as ranges (`0-3, 8, 10-11`), the first [`NAMED`] ranges and `...` beyond.
fn ranges(ranks: &[usize]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &r in ranks {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == r => *end = r,
            _ => runs.push((r, r)),
        }
    }
    let mut words: Vec<String> = runs
        .iter()
        .take(NAMED)
        .map(|&(a, b)| match a == b {
            true => a.to_string(),
            false => format!("{a}-{b}"),
        })
        .collect();
    if runs.len() > NAMED {
        words.push("...".into());
    }
    words.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed<'a>(rank: usize, host: &'a str, problem: &'a str, code: u8) -> Met<'a> {
        Met {
            rank,
            host,
            problem,
            code,
            stdout: None,
            hint: None,
        }
    }

    const NO_CUDA: &str = "cannot load libcuda.so.1 (the NVIDIA driver library): ...";

    #[test]
    fn one_cause_on_every_process_is_one_line() {
        let causes = group((0..32).map(|r| failed(r, "vm", NO_CUDA, 2)));
        assert_eq!(causes.len(), 1);
        assert_eq!(
            causes[0].line("all_reduce_perf", 32),
            format!("all_reduce_perf: 32 of 32 processes on vm: {NO_CUDA}")
        );
        assert_eq!(causes[0].code, 2);
    }

    #[test]
    fn different_causes_are_said_each_once_with_their_ranks_and_hosts() {
        let hosts: Vec<String> = (0..40).map(|r| format!("node{:02}", r / 4)).collect();
        let mut all: Vec<Met> = (0..40).map(|r| failed(r, &hosts[r], NO_CUDA, 2)).collect();
        all[5] = failed(
            5,
            "node01",
            "cannot load NCCL (tried libnccl.so.2): gone",
            3,
        );
        // Rank 6 met nothing.
        all.remove(6);
        let causes = group(all);
        assert_eq!(causes.len(), 2, "{causes:?}");
        assert_eq!(
            causes[0].line("p", 40),
            format!(
                "p: 38 of 40 processes (ranks 0-4, 7-39) on node00, node01, node02, node03, \
                 node04, node05, node06, node07 and 2 more hosts: {NO_CUDA}"
            )
        );
        assert_eq!(
            causes[1].line("p", 40),
            "p: 1 of 40 processes (rank 5) on node01: cannot load NCCL (tried libnccl.so.2): gone"
        );
    }

    #[test]
    fn the_gpu_count_check_is_one_line_and_keeps_its_stdout_form_and_hint() {
        let text = "Invalid number of GPUs: 1 requested but only 0 were found.\nPlease check.";
        let mut a = failed(0, "n1", text, 5);
        a.stdout = Some(text);
        a.hint = Some("hint: 2 process(es) on this host");
        let b = failed(1, "n1", text, 5);
        let causes = group([a, b]);
        assert_eq!(causes.len(), 1);
        let c = &causes[0];
        assert_eq!(
            c.line("p", 2),
            "p: 2 of 2 processes on n1: Invalid number of GPUs: 1 requested but only 0 were \
             found. Please check."
        );
        assert_eq!(c.stdout.as_deref(), Some(text));
        assert_eq!(
            c.hint.as_deref(),
            Some("n1: hint: 2 process(es) on this host")
        );
    }

    /// Too few GPUs for local ranks 8-15 of a host with 8: each requests its own count, one
    /// cause still.
    #[test]
    fn texts_that_differ_in_their_numbers_are_one_cause() {
        let texts: Vec<String> = (8..16)
            .map(|r| {
                format!(
                    "Invalid number of GPUs: {} requested but only 8 were found.",
                    r + 1
                )
            })
            .collect();
        let causes = group((8..16).map(|r| failed(r, "gpu01", &texts[r - 8], 5)));
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(
            causes[0].line("p", 16),
            "p: 8 of 16 processes (ranks 8-15) on gpu01: Invalid number of GPUs: 9 requested but \
             only 8 were found. (rank 8's; the numbers differ between these processes)"
        );
        // Texts that differ otherwise are causes of their own.
        assert_eq!(
            group([failed(0, "a", "x 1", 2), failed(1, "a", "y 1", 2)]).len(),
            2
        );
    }

    #[test]
    fn long_rank_lists_are_bounded() {
        let odd: Vec<usize> = (0..40).filter(|r| r % 2 == 1).collect();
        assert_eq!(ranges(&odd), "1, 3, 5, 7, 9, 11, 13, 15, ...");
        assert_eq!(ranges(&[0, 1, 2, 5]), "0-2, 5");
    }
}
