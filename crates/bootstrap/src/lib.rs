//! How the processes of a run find each other. The runner only sees the [`Bootstrap`] trait and
//! gets one from [`connect`]: a single process ([`SingleProcess`]), MPI (`mpi::MpiBootstrap`,
//! feature `mpi`) or a TCP rendezvous (`tcp::TcpBootstrap`), whose rank 0 is found through the
//! launcher's environment or, under `mpirun`, `mpiexec` and `srun --mpi=...`, through the
//! launcher's own wire-up (`engine`: PMI-1 spoken, PMIx loaded at run time, used only to start).
//! `launch` decides which, from the environment.
//!
//! The crate knows nothing of the benchmarks: it fails with its own [`Error`] (the benchmark
//! core turns it into its own, with its exit code), is told of the run's own failures through
//! [`Failure`], and compares what each process runs as a [`fingerprint::Fingerprint`] the
//! benchmark core writes. Its `unsafe` code is fenced in two modules allowed `unsafe_code`: the
//! MPI bootstrap's `Send` promise for rsmpi's handles (`mpi.rs`) and the engines' inherited
//! socket and PMIx library calls (`engine/ffi.rs`).

mod auth;
mod engine;
mod error;
pub mod fingerprint;
pub mod ids;
mod launch;
pub mod local;
#[cfg(feature = "mpi")]
#[allow(unsafe_code)]
mod mpi;
mod nodelist;
pub mod peer_text;
mod split;
mod tcp;

pub use error::{Error, Failure, Result};
use launch::Launch;
use nccl_perf_facts::environment;

/// A cross-process reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduce {
    /// Sum.
    Sum,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
}

impl Reduce {
    /// Combines two values.
    pub fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            Reduce::Sum => a + b,
            Reduce::Min => a.min(b),
            Reduce::Max => a.max(b),
        }
    }
}

/// This process' split group (`NCCL_TESTS_SPLIT*`): processes of one colour share a communicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Group {
    /// The colour (0 without split).
    pub color: i64,
    /// This process' index in its group.
    pub rank: usize,
    /// Number of processes in its group.
    pub size: usize,
}

/// What rank 0 last heard of another process' state ([`Bootstrap::peer_states`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerState {
    /// Its world rank.
    pub rank: usize,
    /// Its host, as it said at the meeting.
    pub host: String,
    /// Its process id, as it said at the meeting.
    pub pid: u32,
    /// The last note it published ([`Bootstrap::publish_state`]) and how long ago it came;
    /// `None` until one came. Untrusted bytes: the reader checks them.
    pub note: Option<(Vec<u8>, std::time::Duration)>,
}

/// The processes of one run and the few collective operations the harness needs between them.
/// Collectives are called by every process in the same order; they fail (never hang forever)
/// when a process is missing.
pub trait Bootstrap: Sync {
    /// Number of processes.
    fn world_size(&self) -> usize;
    /// This process' index.
    fn world_rank(&self) -> usize;
    /// Index of this process among those on the same host.
    fn local_rank(&self) -> usize;
    /// Number of processes on this host.
    fn local_size(&self) -> usize {
        1
    }
    /// This process' split group; the whole world by default.
    fn group(&self) -> Group {
        Group {
            color: 0,
            rank: self.world_rank(),
            size: self.world_size(),
        }
    }
    /// How the processes met, in one line (for `--dry-run`).
    fn describe(&self) -> String;
    /// Waits for every process.
    fn barrier(&self) -> Result<()>;
    /// Reduces one value over all processes; everyone gets the result.
    fn allreduce(&self, v: f64, op: Reduce) -> Result<f64>;
    /// Hands the 128-byte NCCL unique id of the first process of each group to every process of
    /// that group.
    fn broadcast_id(&self, id: &mut [u8; 128]) -> Result<()>;
    /// Shares several NCCL unique ids within each group (`ncclCommInitRankScalable`): `mine`
    /// are the ids this process made, numbered below `count` (the group's number of ids, the
    /// same on every process of the group); every process gets its group's `count` ids in
    /// number order. By default an allgather of every contribution (each process picks its
    /// group's); over TCP rank 0 sends each process only its group's ids.
    fn share_ids(&self, mine: &[ids::NumberedId], count: usize) -> Result<Vec<[u8; 128]>> {
        let color = self.group().color;
        let text = format!("{color} {}", engine::hex(&ids::encode(count, mine)));
        let all = self.allgather(text)?;
        let read: Vec<(i64, Vec<u8>)> = all
            .iter()
            .filter_map(|t| {
                let (c, h) = t.split_once(' ')?;
                Some((c.parse().ok()?, engine::unhex(h)?))
            })
            .collect();
        let bodies: Vec<&[u8]> = read.iter().map(|(_, b)| &b[..]).collect();
        let colors: Vec<i64> = read.iter().map(|(c, _)| *c).collect();
        let answer = ids::route(&bodies, &colors)
            .into_iter()
            .zip(&colors)
            .find(|(_, c)| **c == color)
            .map(|(a, _)| a)
            .unwrap_or_default();
        ids::finish(&answer, count).map_err(|e| Error::Internal(format!("sharing NCCL ids: {e}")))
    }
    /// Collects one text block per process on rank 0, in rank order (others get an empty list).
    fn gather(&self, text: String) -> Result<Vec<String>>;
    /// Collects one text block per process on every process, in rank order (what `--locate`
    /// shares after each round).
    fn allgather(&self, text: String) -> Result<Vec<String>>;
    /// Ends a run that reached its end (MPI_Finalize; a last barrier over TCP, so that no
    /// process leaves while another may still take that for a failure). Not called after a
    /// failure.
    fn finalize(&self) -> Result<()> {
        Ok(())
    }
    /// Checks, without waiting, that no other process has left the run; called about every
    /// 100 ms by the run's watchdog while this process may be busy on its GPUs (where a lost
    /// peer makes NCCL wait forever). An error names the process that left. Does nothing where
    /// the launcher itself ends the job when a process dies (MPI) or there are no peers.
    fn check_peers(&self) -> Result<()> {
        Ok(())
    }
    /// After this process failed in a way a lost process explains (NCCL's "remote process
    /// exited", a `-T` timeout): the error naming a process that left the run or fell silent,
    /// if one is known or becomes known within `wait`. `None` where processes are not watched
    /// (a single process, MPI, where the launcher ends the job).
    fn lost_peer(&self, _wait: std::time::Duration) -> Option<Error> {
        None
    }
    /// How long any wait for the other processes may take before it fails, where the
    /// bootstrap bounds its waits (`NCCL_PERF_BOOTSTRAP_TIMEOUT` over TCP); `None` where the
    /// launcher does (MPI) or there is nobody to wait for.
    fn wait_limit(&self) -> Option<std::time::Duration> {
        None
    }
    /// Sets the short note (at most 4 KiB; a longer one is ignored) this process' heartbeats
    /// carry from now on: its state for the hang watch. Does nothing where there are no
    /// heartbeats (a single process, MPI).
    fn publish_state(&self, _note: &[u8]) {}
    /// Rank 0: every other process with the last note it published, without waiting (`None`
    /// elsewhere, where there are no heartbeats, or while a collective holds the link).
    fn peer_states(&self) -> Option<Vec<PeerState>> {
        None
    }
    /// Any process but rank 0: the last note rank 0 published, as its heartbeats carried it
    /// (`None` where there are none, or before one came).
    fn root_state(&self) -> Option<Vec<u8>> {
        None
    }
    /// Rank 0, after the hang watch found the run hung: tells every other process to stop
    /// with exit code 4, saying `why`. Does nothing elsewhere.
    fn end_hung(&self, _why: &str) {}
    /// This process failed with `err` after the bootstrap. MPI reports it and aborts the whole
    /// job with its exit code so no process waits forever; TCP's rank 0 tells the others its
    /// text; the default does nothing (the caller reports, and the other processes notice the
    /// closed connection).
    fn fail(&self, _err: &dyn Failure) {}
}

/// Sets up the bootstrap this process was launched for (see `launch::detect` for the
/// precedence), reading the process environment. Call after the options are parsed; `run` is
/// what this process runs, which every process must share.
pub fn connect(run: &fingerprint::Fingerprint) -> Result<Box<dyn Bootstrap>> {
    let env = |k: &str| std::env::var(k).ok();
    match launch::detect(&env, cfg!(feature = "mpi"))? {
        Launch::Single => Ok(Box::new(SingleProcess)),
        #[cfg(feature = "mpi")]
        Launch::Mpi => Ok(Box::new(mpi::MpiBootstrap::init(&env)?)),
        #[cfg(not(feature = "mpi"))]
        Launch::Mpi => Err(Error::Launch("this binary was built without MPI".into())),
        Launch::Tcp(t) => {
            let color = split_color(&env, t.rank)?;
            Ok(Box::new(tcp::TcpBootstrap::connect(&t, color, run)?))
        }
        Launch::Engine(e) => {
            let deadline = std::time::Instant::now() + e.base.timeout;
            let mut wire = match (engine::open(e.kind, &env, deadline), &e.fallback) {
                (Ok(w), _) => w,
                // The engine cannot be opened but the launcher's variables say where to meet
                // (Slurm's node list, as under plain srun): meet that way. Rank 0 says why
                // unless the library is simply not installed.
                (Err(err), Some(t)) => {
                    if t.rank == 0 && !engine::unavailable(&err) {
                        nccl_perf_facts::eline!(
                            "nccl-perf: note: {err}; meeting through the {} variables instead",
                            t.launcher
                        );
                    }
                    let color = split_color(&env, t.rank)?;
                    return Ok(Box::new(tcp::TcpBootstrap::connect(t, color, run)?));
                }
                (Err(err), None) => return Err(err),
            };
            let formed = engine::form(wire.as_mut(), &e.base)?;
            let color = split_color(&env, formed.launch.rank)?;
            Ok(Box::new(tcp::TcpBootstrap::connect_formed(
                &formed.launch,
                formed.listeners,
                formed.addrs,
                color,
                run,
            )?))
        }
    }
}

/// Whether this process says an error found before the processes meet (an argument error):
/// only the first process of each host does, as for a wrong launch, since the others of the
/// host were started alike and cannot be asked yet. The first is local rank 0 as the
/// launcher's environment gives it (`OMPI_COMM_WORLD_LOCAL_RANK`, `MPI_LOCALRANKID`,
/// `PALS_LOCAL_RANKID`, `SLURM_LOCALID`, torchrun's `LOCAL_RANK`); without one, every process
/// speaks.
pub fn speaks_for_its_host() -> bool {
    speaks_for_its_host_in(&|k: &str| std::env::var(k).ok())
}

/// [`speaks_for_its_host`] in a given environment.
fn speaks_for_its_host_in(env: launch::Env) -> bool {
    launch::env_local_rank(env)
        .or_else(|| env("LOCAL_RANK")?.trim().parse().ok())
        .is_none_or(|local| local == 0)
}

/// This process' colour from `NCCL_TESTS_SPLIT_MASK` / `NCCL_TESTS_SPLIT`.
fn split_color(env: launch::Env, world_rank: usize) -> Result<i64> {
    split::color(
        world_rank,
        env(environment::TESTS_SPLIT_MASK.name).as_deref(),
        env(environment::TESTS_SPLIT.name).as_deref(),
    )
    .map_err(|e| Error::Usage(e.to_string()))
}

/// One process, no peers.
pub struct SingleProcess;

impl Bootstrap for SingleProcess {
    fn world_size(&self) -> usize {
        1
    }
    fn world_rank(&self) -> usize {
        0
    }
    fn local_rank(&self) -> usize {
        0
    }
    fn describe(&self) -> String {
        "single process (no launcher found)".into()
    }
    fn barrier(&self) -> Result<()> {
        Ok(())
    }
    fn allreduce(&self, v: f64, _op: Reduce) -> Result<f64> {
        Ok(v)
    }
    fn broadcast_id(&self, _id: &mut [u8; 128]) -> Result<()> {
        Ok(())
    }
    fn gather(&self, text: String) -> Result<Vec<String>> {
        Ok(vec![text])
    }
    fn allgather(&self, text: String) -> Result<Vec<String>> {
        Ok(vec![text])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_process_is_identity() {
        let b = SingleProcess;
        assert_eq!((b.world_size(), b.world_rank(), b.local_rank()), (1, 0, 0));
        assert_eq!(b.allreduce(2.5, Reduce::Max).unwrap(), 2.5);
        assert_eq!(b.gather("x".into()).unwrap(), vec!["x".to_string()]);
        assert_eq!(b.allgather("y".into()).unwrap(), vec!["y".to_string()]);
        assert_eq!(b.share_ids(&[(0, [7; 128])], 1).unwrap(), vec![[7; 128]]);
        assert_eq!(Reduce::Min.apply(1.0, 2.0), 1.0);
        assert_eq!(Reduce::Sum.apply(1.0, 2.0), 3.0);
    }

    /// The first process of each host speaks for it before the processes meet: local rank 0
    /// under any launcher that gives one, every process where none does.
    #[test]
    fn only_local_rank_zero_speaks_before_the_meeting() {
        let speaks = |vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            speaks_for_its_host_in(&move |k: &str| {
                vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
            })
        };
        assert!(speaks(&[]));
        assert!(speaks(&[("OMPI_COMM_WORLD_LOCAL_RANK", "0")]));
        assert!(!speaks(&[("OMPI_COMM_WORLD_LOCAL_RANK", "3")]));
        assert!(!speaks(&[("SLURM_LOCALID", "1"), ("SLURM_PROCID", "0")]));
        assert!(!speaks(&[("MPI_LOCALRANKID", "2")]));
        assert!(speaks(&[("LOCAL_RANK", "0"), ("RANK", "4")]));
        assert!(!speaks(&[("LOCAL_RANK", "1"), ("RANK", "1")]));
        // A malformed local rank is no answer: the process speaks.
        assert!(speaks(&[("LOCAL_RANK", "x")]));
    }

    /// A process of colour 1 whose allgather answers what three processes (two groups) sent.
    struct Sharing(std::sync::Mutex<Vec<String>>);
    impl Bootstrap for Sharing {
        fn world_size(&self) -> usize {
            3
        }
        fn world_rank(&self) -> usize {
            1
        }
        fn local_rank(&self) -> usize {
            1
        }
        fn group(&self) -> Group {
            Group {
                color: 1,
                rank: 0,
                size: 2,
            }
        }
        fn describe(&self) -> String {
            String::new()
        }
        fn barrier(&self) -> Result<()> {
            Ok(())
        }
        fn allreduce(&self, v: f64, _op: Reduce) -> Result<f64> {
            Ok(v)
        }
        fn broadcast_id(&self, _id: &mut [u8; 128]) -> Result<()> {
            Ok(())
        }
        fn gather(&self, text: String) -> Result<Vec<String>> {
            Ok(vec![text])
        }
        fn allgather(&self, text: String) -> Result<Vec<String>> {
            let mut all = self.0.lock().unwrap().clone();
            all.insert(1, text);
            Ok(all)
        }
    }

    #[test]
    fn ids_shared_through_an_allgather_reach_their_own_group_only() {
        let other = |color: i64, count, ids: &[ids::NumberedId]| {
            format!("{color} {}", engine::hex(&ids::encode(count, ids)))
        };
        let b = Sharing(std::sync::Mutex::new(vec![
            other(0, 1, &[(0, [1; 128])]),
            other(1, 2, &[(1, [21; 128])]),
        ]));
        let got = b.share_ids(&[(0, [20; 128])], 2).unwrap();
        assert_eq!(got, vec![[20; 128], [21; 128]]);
        // Nobody of group 1 made id number 1: said, not guessed.
        let b = Sharing(std::sync::Mutex::new(vec![
            other(0, 2, &[(1, [1; 128])]),
            "junk".into(),
        ]));
        let e = b.share_ids(&[(0, [20; 128])], 2).unwrap_err().to_string();
        assert!(e.contains("NCCL id number 1 was made by no process"), "{e}");
    }
}
