//! A process' state as the hang watch shares it: the note its heartbeats carry to rank 0
//! (`Bootstrap::publish_state`), in a few lines of `key=value` text. Rank 0 reads notes from
//! the network: a note is at most [`MAX_LEN`] bytes and [`MAX_THREADS`] threads, every number
//! must parse, every name is a short word of `[A-Za-z0-9_]`, or the whole note is refused.

/// The most bytes of a note (the bootstrap carries at most 4 KiB).
pub const MAX_LEN: usize = 4000;

/// The most thread lines of a note.
pub const MAX_THREADS: usize = 32;

/// The most link lines of a note.
pub const MAX_LINKS: usize = 16;

/// The longest name (collective, datatype, op) in a note.
const MAX_NAME: usize = 32;

pub use nccl_perf_capture::links::Wait;

/// What a process can say of NCCL's network steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Net {
    /// Not watched here (a profiler of the user's, an NCCL without the profiler, the watch's
    /// links off).
    Unwatched,
    /// Watched; no proxy operation seen (one node: NVLink and shared memory carry the data).
    NoSteps,
    /// Watched, and proxy operations were seen.
    Steps,
}

impl Net {
    fn code(self) -> &'static str {
        match self {
            Net::Unwatched => "0",
            Net::NoSteps => "1",
            Net::Steps => "2",
        }
    }

    fn parse(s: &str) -> Option<Net> {
        Some(match s {
            "0" => Net::Unwatched,
            "1" => Net::NoSteps,
            "2" => Net::Steps,
            _ => return None,
        })
    }
}

/// One network link's oldest proxy operation, as the process' proxy thread left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkNote {
    /// The NCCL rank that reported it.
    pub rank: u64,
    /// The NCCL rank at the other end.
    pub peer: u64,
    /// NCCL's channel.
    pub channel: u64,
    /// Sends to `peer` (else receives from it).
    pub send: bool,
    /// The step it waits on (0-based).
    pub step: u64,
    /// The operation's steps.
    pub steps: u64,
    /// The state that step waits in.
    pub wait: Wait,
    /// Milliseconds it has not moved.
    pub still_ms: u64,
}

/// Where a benchmark thread's host side is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Outside the operations (set-up, validation, printing, the bootstrap): not watched.
    Outside = 0,
    /// Enqueuing operations (or between enqueuing and waiting).
    Enqueue = 1,
    /// Waiting on its GPUs for the operations enqueued.
    Wait = 2,
}

impl Phase {
    /// From its number (anything unknown is outside).
    pub fn from_u8(v: u8) -> Phase {
        match v {
            1 => Phase::Enqueue,
            2 => Phase::Wait,
            _ => Phase::Outside,
        }
    }

    fn code(self) -> &'static str {
        match self {
            Phase::Outside => "O",
            Phase::Enqueue => "E",
            Phase::Wait => "W",
        }
    }

    fn parse(s: &str) -> Option<Phase> {
        Some(match s {
            "O" => Phase::Outside,
            "E" => Phase::Enqueue,
            "W" => Phase::Wait,
            _ => return None,
        })
    }
}

/// Which operations of a size a batch is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The warm-up operations.
    Warmup,
    /// The one untimed operation before the timed loop.
    Sync,
    /// The timed loop.
    Timed,
}

impl Stage {
    /// Its word in notes and verdicts.
    pub fn word(self) -> &'static str {
        match self {
            Stage::Warmup => "warmup",
            Stage::Sync => "sync",
            Stage::Timed => "timed",
        }
    }

    fn parse(s: &str) -> Option<Stage> {
        Some(match s {
            "warmup" => Stage::Warmup,
            "sync" => Stage::Sync,
            "timed" => Stage::Timed,
            _ => return None,
        })
    }
}

/// What a batch of operations measures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// Warm-up, sync operation or timed loop.
    pub stage: Stage,
    /// The collective (`all_reduce`).
    pub coll: String,
    /// The datatype's name.
    pub dt: String,
    /// The reduction's name.
    pub op: String,
    /// The root.
    pub root: u64,
    /// The size, as the table prints it (bytes).
    pub bytes: u64,
    /// In place.
    pub in_place: bool,
}

/// One benchmark thread's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadState {
    /// The thread's index in its process.
    pub tid: u64,
    /// Its first GPU's NCCL rank.
    pub first_rank: u64,
    /// How many GPUs it drives.
    pub ngpus: u64,
    /// Where its host side is.
    pub phase: Phase,
    /// Operations enqueued since the run began.
    pub issued: u64,
    /// Operations known finished.
    pub finished: u64,
    /// The current batch: the number of operations before it, and its length.
    pub batch_first: u64,
    /// See `batch_first`.
    pub batch_len: u64,
    /// What the batch measures (`None` before the first).
    pub label: Option<Label>,
}

/// A process' state: how long it has made no progress, the limit it judges that by, and its
/// threads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessState {
    /// Milliseconds since its counters last moved while it was in the operations (0 when
    /// outside them).
    pub idle_ms: u64,
    /// Its own stall limit in milliseconds.
    pub limit_ms: u64,
    /// Its benchmark threads.
    pub threads: Vec<ThreadState>,
    /// What it can say of NCCL's network steps.
    pub net: Net,
    /// Its links that have not moved lately, the most telling first.
    pub links: Vec<LinkNote>,
}

impl ProcessState {
    /// The note's text (cut to [`MAX_THREADS`] threads, [`MAX_LINKS`] links and
    /// [`MAX_LEN`] bytes).
    pub fn encode(&self) -> String {
        let mut s = format!(
            "hang1 idle={} limit={} net={}\n",
            self.idle_ms,
            self.limit_ms,
            self.net.code()
        );
        for l in self.links.iter().take(MAX_LINKS) {
            let line = format!(
                "l r={} p={} c={} d={} s={} n={} w={} ms={}\n",
                l.rank,
                l.peer,
                l.channel,
                if l.send { "S" } else { "R" },
                l.step,
                l.steps,
                l.wait.word(),
                l.still_ms
            );
            if s.len() + line.len() > MAX_LEN / 2 {
                break;
            }
            s.push_str(&line);
        }
        for t in self.threads.iter().take(MAX_THREADS) {
            let mut line = String::new();
            line.push_str(&format!(
                "t tid={} rank={} gpus={} ph={} is={} fin={} bf={} bl={}",
                t.tid,
                t.first_rank,
                t.ngpus,
                t.phase.code(),
                t.issued,
                t.finished,
                t.batch_first,
                t.batch_len
            ));
            if let Some(l) = &t.label {
                line.push_str(&format!(
                    " st={} coll={} dt={} op={} root={} bytes={} ip={}",
                    l.stage.word(),
                    l.coll,
                    l.dt,
                    l.op,
                    l.root,
                    l.bytes,
                    u8::from(l.in_place)
                ));
            }
            line.push('\n');
            if s.len() + line.len() > MAX_LEN {
                break;
            }
            s.push_str(&line);
        }
        s
    }

    /// Reads a note; `None` for anything but a well-formed one.
    pub fn decode(bytes: &[u8]) -> Option<ProcessState> {
        if bytes.len() > MAX_LEN {
            return None;
        }
        let text = std::str::from_utf8(bytes).ok()?;
        let mut lines = text.lines();
        let head = Fields::of(lines.next()?, "hang1")?;
        let mut state = ProcessState {
            idle_ms: head.num("idle")?,
            limit_ms: head.num("limit")?,
            threads: Vec::new(),
            net: Net::parse(head.get("net")?)?,
            links: Vec::new(),
        };
        for line in lines {
            if line.starts_with("l ") {
                if state.links.len() >= MAX_LINKS || !state.threads.is_empty() {
                    return None;
                }
                let f = Fields::of(line, "l")?;
                state.links.push(LinkNote {
                    rank: f.num("r")?,
                    peer: f.num("p")?,
                    channel: f.num("c")?,
                    send: match f.get("d")? {
                        "S" => true,
                        "R" => false,
                        _ => return None,
                    },
                    step: f.num("s")?,
                    steps: f.num("n")?,
                    wait: Wait::parse(f.get("w")?)?,
                    still_ms: f.num("ms")?,
                });
                continue;
            }
            if state.threads.len() >= MAX_THREADS {
                return None;
            }
            let f = Fields::of(line, "t")?;
            let label = match f.get("st") {
                None => None,
                Some(st) => Some(Label {
                    stage: Stage::parse(st)?,
                    coll: f.name("coll")?,
                    dt: f.name("dt")?,
                    op: f.name("op")?,
                    root: f.num("root")?,
                    bytes: f.num("bytes")?,
                    in_place: match f.get("ip")? {
                        "0" => false,
                        "1" => true,
                        _ => return None,
                    },
                }),
            };
            state.threads.push(ThreadState {
                tid: f.num("tid")?,
                first_rank: f.num("rank")?,
                ngpus: f.num("gpus")?,
                phase: Phase::parse(f.get("ph")?)?,
                issued: f.num("is")?,
                finished: f.num("fin")?,
                batch_first: f.num("bf")?,
                batch_len: f.num("bl")?,
                label,
            });
        }
        Some(state)
    }
}

/// One benchmark thread (or a process that sent no state) as rank 0 saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    /// The process' world rank.
    pub rank: usize,
    /// Its host.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// How long its process had made no progress when last heard of.
    pub idle: std::time::Duration,
    /// The thread's state (`None`: the process sent none).
    pub state: Option<ThreadState>,
}

/// The `key=value` words of one line after its first word.
struct Fields<'a>(Vec<(&'a str, &'a str)>);

impl<'a> Fields<'a> {
    fn of(line: &'a str, first: &str) -> Option<Fields<'a>> {
        let mut words = line.split(' ');
        if words.next()? != first {
            return None;
        }
        let mut v = Vec::new();
        for w in words {
            if v.len() >= 32 {
                return None;
            }
            v.push(w.split_once('=')?);
        }
        Some(Fields(v))
    }

    fn get(&self, key: &str) -> Option<&'a str> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    fn num(&self, key: &str) -> Option<u64> {
        let v = self.get(key)?;
        if v.is_empty() || v.len() > 20 || !v.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        v.parse().ok()
    }

    fn name(&self, key: &str) -> Option<String> {
        let v = self.get(key)?;
        let ok = !v.is_empty()
            && v.len() <= MAX_NAME
            && v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        ok.then(|| v.to_string())
    }
}

/// Recorded states for the hang watch's tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::{Label, LinkNote, Phase, Stage, ThreadState, Wait};

    /// A link of NCCL rank `rank` with `peer`, channel `channel`, at step 41 of 64.
    pub fn link(
        rank: u64,
        peer: u64,
        channel: u64,
        send: bool,
        wait: Wait,
        still_ms: u64,
    ) -> LinkNote {
        LinkNote {
            rank,
            peer,
            channel,
            send,
            step: 41,
            steps: 64,
            wait,
            still_ms,
        }
    }

    /// `all_reduce float sum 1048576 B out-of-place`, timed.
    pub fn label() -> Label {
        Label {
            stage: Stage::Timed,
            coll: "all_reduce".into(),
            dt: "float".into(),
            op: "sum".into(),
            root: 0,
            bytes: 1 << 20,
            in_place: false,
        }
    }

    /// Thread `tid` (NCCL rank `tid`) in the timed batch of operations 101-120, `phase`,
    /// having enqueued `issued` and seen `finished`.
    pub fn thread(tid: u64, phase: Phase, issued: u64, finished: u64) -> ThreadState {
        ThreadState {
            tid,
            first_rank: tid,
            ngpus: 1,
            phase,
            issued,
            finished,
            batch_first: 100,
            batch_len: 20,
            label: Some(label()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::thread;
    use super::*;

    #[test]
    fn a_note_reads_back_as_written() {
        let mut t1 = thread(1, Phase::Enqueue, 105, 100);
        t1.label = None;
        let s = ProcessState {
            idle_ms: 61_234,
            limit_ms: 60_000,
            threads: vec![thread(0, Phase::Wait, 120, 100), t1],
            net: Net::Steps,
            links: vec![super::fixtures::link(2, 3, 1, true, Wait::Send, 42_000)],
        };
        let text = s.encode();
        assert_eq!(ProcessState::decode(text.as_bytes()), Some(s));
    }

    #[test]
    fn a_hostile_note_is_refused_whole() {
        let good = ProcessState {
            idle_ms: 1,
            limit_ms: 2,
            threads: vec![thread(0, Phase::Wait, 3, 2)],
            net: Net::Steps,
            links: vec![super::fixtures::link(2, 3, 1, true, Wait::Send, 42_000)],
        }
        .encode();
        assert!(ProcessState::decode(good.as_bytes()).is_some());
        for bad in [
            good.replace("coll=all_reduce", "coll=all\x1b[31mreduce"),
            good.replace("coll=all_reduce", "coll=all_reduce;rm"),
            good.replace("coll=all_reduce", &format!("coll={}", "a".repeat(40))),
            good.replace("is=3", "is=-3"),
            good.replace("is=3", "is=99999999999999999999999"),
            good.replace("ph=W", "ph=X"),
            good.replace("hang1", "hang2"),
            good.replace("idle=1", "idle"),
            good.replace("ip=0", "ip=2"),
            good.replace("w=SendWait", "w=Send\x1b"),
            good.replace("d=S", "d=X"),
            good.replace("net=2", "net=7"),
            good.replace(" net=2", ""),
            format!("{good}l r=1 p=2 c=0 d=S s=0 n=1 w=SendWait ms=1\n"),
            good.replacen(
                "l r=",
                &"l r=2 p=3 c=1 d=S s=0 n=1 w=SendWait ms=1\nl r=".repeat(17),
                1,
            ),
            format!("{good}{}", "t tid=0\n".repeat(40)),
            "x".repeat(MAX_LEN + 1),
            String::new(),
        ] {
            assert_eq!(ProcessState::decode(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(ProcessState::decode(&[0xff, 0xfe]), None);
    }
}
