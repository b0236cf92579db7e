//! Which engine a launch uses (injected environments), rank 0's record, and formation with a
//! fake engine shared by two threads.

use super::*;
use crate::launch::{EngineLaunch, Launch, detect};
use std::collections::HashMap;
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

fn detect_with(vars: &[(&str, &str)], mpi_built: bool) -> Result<Launch> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    detect(&|k: &str| map.get(k).cloned(), mpi_built)
}

fn engine_of(vars: &[(&str, &str)], mpi_built: bool) -> EngineLaunch {
    match detect_with(vars, mpi_built) {
        Ok(Launch::Engine(e)) => *e,
        other => panic!("{other:?}"),
    }
}

const OMPI: &[(&str, &str)] = &[
    ("OMPI_COMM_WORLD_RANK", "1"),
    ("OMPI_COMM_WORLD_SIZE", "4"),
    ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
    ("PMIX_RANK", "1"),
    ("PMIX_NAMESPACE", "1604780033"),
];
const HYDRA: &[(&str, &str)] = &[
    ("PMI_FD", "6"),
    ("PMI_RANK", "2"),
    ("PMI_SIZE", "4"),
    ("MPI_LOCALRANKID", "2"),
];

#[test]
fn launchers_wire_up_is_found_in_builds_without_mpi() {
    let e = engine_of(OMPI, false);
    assert_eq!(e.kind, Kind::Pmix);
    assert_eq!(e.base.local_rank, Some(1));
    assert!(e.fallback.is_none());
    let e = engine_of(HYDRA, false);
    assert_eq!(e.kind, Kind::Pmi1);
    assert_eq!(e.base.local_rank, Some(2));
    let e = engine_of(&[("PMI_PORT", "node1:5000"), ("PMI_ID", "3")], false);
    assert_eq!(e.kind, Kind::Pmi1);
    // Both offered: PMIx.
    let both: Vec<_> = OMPI.iter().chain(HYDRA).copied().collect();
    assert_eq!(engine_of(&both, false).kind, Kind::Pmix);
    // srun --mpi=pmi2: PMI-1, with Slurm's own way to meet kept for a missing library.
    let srun = [
        ("PMI_FD", "5"),
        ("SLURM_PROCID", "0"),
        ("SLURM_STEP_NUM_TASKS", "2"),
        ("SLURM_STEP_NODELIST", "n1"),
        ("SLURM_LOCALID", "0"),
    ];
    let e = engine_of(&srun, false);
    assert_eq!(e.kind, Kind::Pmi1);
    assert_eq!(e.fallback.map(|t| t.host), Some("n1".into()));
}

#[test]
fn precedence_mpi_build_then_user_address_then_engine() {
    // The MPI build under an MPI launcher keeps MPI.
    assert_eq!(detect_with(OMPI, true).unwrap(), Launch::Mpi);
    assert_eq!(detect_with(HYDRA, true).unwrap(), Launch::Mpi);
    // A rendezvous the user names wins over the engine.
    let mut v = OMPI.to_vec();
    v.push(("NCCL_PERF_RENDEZVOUS", "node9:4000"));
    assert!(matches!(detect_with(&v, false), Ok(Launch::Tcp(t)) if t.host == "node9"));
    // Forced modes.
    let mut v = OMPI.to_vec();
    v.push(("NCCL_PERF_BOOTSTRAP", "single"));
    assert_eq!(detect_with(&v, false).unwrap(), Launch::Single);
    let mut v = HYDRA.to_vec();
    v.push(("NCCL_PERF_BOOTSTRAP", "pmi"));
    assert_eq!(engine_of(&v, true).kind, Kind::Pmi1);
    let mut v = OMPI.to_vec();
    v.push(("NCCL_PERF_BOOTSTRAP", "pmix"));
    assert_eq!(engine_of(&v, true).kind, Kind::Pmix);
    // Forcing an engine the launcher does not offer: one line naming what is missing.
    for (mode, missing) in [("pmi", "PMI_FD or PMI_PORT"), ("PMIx", "PMIX_RANK")] {
        match detect_with(&[("NCCL_PERF_BOOTSTRAP", mode)], false) {
            Err(Error::Launch(m)) => assert!(m.contains(missing) && !m.contains('\n'), "{m}"),
            other => panic!("{other:?}"),
        }
    }
    // Junk in the user's settings is still a usage error under an engine.
    let mut v = HYDRA.to_vec();
    v.push(("NCCL_PERF_RENDEZVOUS_BIND", "nowhere"));
    assert!(matches!(detect_with(&v, false), Err(Error::Usage(_))));
}

#[test]
fn rank_zeros_record_round_trips_and_junk_is_refused() {
    let p = Published {
        host: "node01.example".into(),
        port: 41234,
        addrs: vec!["10.0.0.5".parse().unwrap(), "fd00::5".parse().unwrap()],
        token: "ab".repeat(32),
    };
    assert_eq!(Published::decode(&p.encode()).unwrap(), p);
    let e = Published::decode(&Published::error("port taken")).unwrap_err();
    assert!(e.contains("rank 0 could not listen: port taken"), "{e}");
    for junk in [
        "",
        "nccl-perf-rv0 port=1 host=a token=00",
        "nccl-perf-rv1 port=0 host=a",
        "nccl-perf-rv1 port=99999 host=a",
        "nccl-perf-rv1 port=5 host=a token=short",
        "nccl-perf-rv1 port=5 token=abababababababababababababababababababab",
    ] {
        assert!(Published::decode(junk).is_err(), "{junk}");
    }
}

/// Everyone's puts, by rank and key.
type Kvs = Arc<Mutex<HashMap<(usize, String), Vec<u8>>>>;

/// An engine whose key-value space and fence are shared by threads.
struct Fake {
    rank: usize,
    size: usize,
    kvs: Kvs,
    fence: Arc<Barrier>,
    log: Vec<&'static str>,
}

impl Engine for Fake {
    fn name(&self) -> String {
        "PMI-1 (fake)".into()
    }
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn job(&self) -> String {
        "pmi:fake".into()
    }
    fn put(&mut self, key: &str, value: &[u8]) -> Result<()> {
        self.kvs
            .lock()
            .unwrap()
            .insert((self.rank, key.into()), value.to_vec());
        Ok(())
    }
    fn fence(&mut self) -> Result<()> {
        self.fence.wait();
        Ok(())
    }
    fn get(&mut self, rank: usize, key: &str) -> Result<Vec<u8>> {
        self.kvs
            .lock()
            .unwrap()
            .get(&(rank, key.into()))
            .cloned()
            .ok_or_else(|| Error::Launch("no such key".into()))
    }
    fn finalize(&mut self) -> Result<()> {
        self.log.push("finalize");
        Ok(())
    }
    fn abort(&mut self, _code: i32, _msg: &str) {
        self.log.push("abort");
    }
    fn grace(&mut self, _d: Duration) {}
}

#[test]
fn formation_hands_rank_zeros_port_and_token_to_everyone() {
    let base = engine_of(HYDRA, false).base;
    assert_eq!(base.port, 0, "a port the system picks");
    let kvs = Arc::new(Mutex::new(HashMap::new()));
    let fence = Arc::new(Barrier::new(3));
    let formed: Vec<(Formed, Vec<&str>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|rank| {
                let (kvs, fence, base) = (kvs.clone(), fence.clone(), base.clone());
                s.spawn(move || {
                    let mut f = Fake {
                        rank,
                        size: 3,
                        kvs,
                        fence,
                        log: Vec::new(),
                    };
                    let formed = form(&mut f, &base).unwrap();
                    (formed, f.log)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let port = formed[0].0.listeners.as_ref().unwrap()[0]
        .local_addr()
        .unwrap()
        .port();
    assert_ne!(port, 0);
    for (rank, (f, log)) in formed.iter().enumerate() {
        assert_eq!(log, &vec!["finalize"]);
        assert_eq!(
            (f.launch.rank, f.launch.size, f.launch.port),
            (rank, 3, port)
        );
        assert_eq!(f.launch.job, "pmi:fake");
        assert_eq!(f.launch.launcher, "PMI-1");
        assert!(f.launch.secret.is_set() && !f.launch.secret.is_short());
        assert_eq!(f.launch.secret, formed[0].0.launch.secret);
        assert_eq!(f.listeners.is_some(), rank == 0);
    }
}

fn open_error(vars: &[(&str, &str)], kind: Kind) -> String {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let env = |k: &str| map.get(k).cloned();
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    match open(kind, &env, deadline) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("{vars:?} opened"),
    }
}

#[test]
fn hostile_engine_variables_are_one_line_errors() {
    for (vars, want) in [
        (
            vec![("PMI_FD", "abc")],
            "PMI_FD='abc' is not a file descriptor",
        ),
        (vec![("PMI_FD", "987654")], "not an open file descriptor"),
        (
            vec![("PMI_FD", "2")],
            "PMI_FD=2 is this process' standard error, not a launcher's socket",
        ),
        (
            vec![("PMI_FD", "1")],
            "PMI_FD=1 is this process' standard output, not a launcher's socket",
        ),
        (
            vec![("PMI_FD", "0"), ("PMI_RANK", "x")],
            "PMI_RANK='x' is not a number",
        ),
        (vec![("PMI_PORT", "nohost")], "PMI_PORT"),
        (
            vec![("PMI_PORT", "127.0.0.1:1")],
            "cannot connect to PMI_PORT=127.0.0.1:1",
        ),
    ] {
        let e = open_error(&vars, Kind::Pmi1);
        assert!(e.contains(want) && !e.contains('\n'), "{vars:?}: {e}");
    }
    let e = open_error(
        &[
            ("PMIX_RANK", "0"),
            ("NCCL_PERF_PMIX_LIB", "/nonexistent/libpmix.so.2"),
        ],
        Kind::Pmix,
    );
    assert!(unavailable(&Error::Launch(e.clone())), "{e}");
    assert!(
        e.starts_with(
            "PMIX_RANK is set but libpmix.so.2 was not found (/nonexistent/libpmix.so.2)"
        ) && e.contains("NCCL_PERF_PMIX_LIB=")
            && e.contains("NCCL_PERF_RENDEZVOUS="),
        "{e}"
    );
    let e = open_error(
        &[("PMIX_RANK", "0"), ("NCCL_PERF_PMIX_LIB", "libc.so.6")],
        Kind::Pmix,
    );
    assert!(e.contains("has no PMIx_Init"), "{e}");
}

#[test]
fn the_pmix_library_is_looked_for_beside_mpirun_and_opal_prefix() {
    let env = |k: &str| match k {
        "OPAL_PREFIX" => Some("/opt/ompi".to_string()),
        "PATH" => Some("/nonexistent:/usr/bin".to_string()),
        _ => None,
    };
    let places = crate::engine::pmix::library_places(&env);
    assert_eq!(places[0], std::path::PathBuf::from("libpmix.so.2"));
    assert!(
        places.contains(&"/opt/ompi/lib/libpmix.so.2".into()),
        "{places:?}"
    );
    let only = |k: &str| (k == "NCCL_PERF_PMIX_LIB").then(|| "/x/libpmix.so.2".to_string());
    assert_eq!(
        crate::engine::pmix::library_places(&only),
        vec![std::path::PathBuf::from("/x/libpmix.so.2")]
    );
}

#[test]
fn rank_zero_that_cannot_listen_tells_everyone_why() {
    let mut base = engine_of(HYDRA, false).base;
    // An address no host here has (TEST-NET-1): binding fails.
    base.bind = Some("192.0.2.1".parse().unwrap());
    let kvs = Arc::new(Mutex::new(HashMap::new()));
    let fence = Arc::new(Barrier::new(2));
    let errors: Vec<(String, Vec<&str>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|rank| {
                let (kvs, fence, base) = (kvs.clone(), fence.clone(), base.clone());
                s.spawn(move || {
                    let mut f = Fake {
                        rank,
                        size: 2,
                        kvs,
                        fence,
                        log: Vec::new(),
                    };
                    let e = form(&mut f, &base)
                        .err()
                        .expect("formed without a listener");
                    (e.to_string(), f.log)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(
        errors[0].0.contains("rank 0 could not listen on 192.0.2.1"),
        "{errors:?}"
    );
    assert!(
        errors[1].0.contains(
            "rank 0's rendezvous: rank 0 could not listen: rank 0 could not listen on 192.0.2.1"
        ),
        "{errors:?}"
    );
    // A clean goodbye on both sides.
    assert!(errors.iter().all(|(_, log)| log == &vec!["finalize"]));
}

/// An engine whose every step fails: formation ends with its error and, the goodbye failing
/// too, an abort.
struct Broken(Vec<&'static str>);

impl Engine for Broken {
    fn name(&self) -> String {
        "PMI-1 (broken)".into()
    }
    fn rank(&self) -> usize {
        1
    }
    fn size(&self) -> usize {
        2
    }
    fn job(&self) -> String {
        "pmi:x".into()
    }
    fn put(&mut self, _: &str, _: &[u8]) -> Result<()> {
        Err(Error::Internal("put".into()))
    }
    fn fence(&mut self) -> Result<()> {
        Err(Error::Peers {
            msg: "fence".into(),
            timed_out: true,
            lost: Vec::new(),
        })
    }
    fn get(&mut self, _: usize, _: &str) -> Result<Vec<u8>> {
        Err(Error::Internal("get".into()))
    }
    fn finalize(&mut self) -> Result<()> {
        self.0.push("finalize");
        Err(Error::Internal("finalize".into()))
    }
    fn abort(&mut self, _: i32, _: &str) {
        self.0.push("abort");
    }
    fn grace(&mut self, _: Duration) {
        self.0.push("grace");
    }
}

#[test]
fn a_broken_engine_is_finalized_then_aborted_and_its_error_kept() {
    let base = engine_of(HYDRA, false).base;
    let mut b = Broken(Vec::new());
    let e = form(&mut b, &base).err().unwrap();
    assert!(timed_out(&e), "{e:?}");
    // Said before the abort, so marked said: the caller does not say it again.
    assert!(matches!(e, Error::Said(_)), "{e:?}");
    assert_eq!(b.0, ["grace", "finalize", "grace", "abort"]);
}

#[test]
fn the_users_port_is_where_rank_zero_listens() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let mut v = HYDRA.to_vec();
    let p = port.to_string();
    v.push(("NCCL_PERF_RENDEZVOUS_PORT", &p));
    v.push(("NCCL_PERF_RENDEZVOUS_BIND", "127.0.0.1"));
    let base = engine_of(&v, false).base;
    assert_eq!(base.port, port);
    let kvs = Arc::new(Mutex::new(HashMap::new()));
    let mut f = Fake {
        rank: 0,
        size: 2,
        kvs: kvs.clone(),
        fence: Arc::new(Barrier::new(1)),
        log: Vec::new(),
    };
    let formed = form(&mut f, &base).unwrap();
    assert_eq!(formed.launch.port, port);
    let l = &formed.listeners.unwrap()[0];
    assert_eq!(
        l.local_addr().unwrap(),
        std::net::SocketAddr::from(([127, 0, 0, 1], port))
    );
    // What it published says so, with the bound address.
    let rec = String::from_utf8(kvs.lock().unwrap()[&(0, KEY.to_string())].clone()).unwrap();
    let p = Published::decode(&rec).unwrap();
    assert_eq!(
        (p.port, p.addrs.clone()),
        (port, vec!["127.0.0.1".parse().unwrap()])
    );
}

#[test]
fn a_library_found_but_refusing_gives_way_to_the_mpi_library_under_an_mpi_launcher() {
    let refused = || -> Result<Box<dyn Engine>> {
        Err(Error::Launch(
            "PMIx (namespace ): PMIx_Init failed with PMIx status -31".into(),
        ))
    };
    let works = || -> Result<Box<dyn Engine>> { Ok(Box::new(Broken(Vec::new()))) };
    let not_called = |_: &str| -> Result<Box<dyn Engine>> { panic!("the MPI library was tried") };
    // Started: kept.
    assert!(or_mpilib(works(), Some("OMPI_COMM_WORLD_SIZE"), not_called).is_ok());
    // Refused, no MPI launcher's variable: the first error.
    let e = or_mpilib(refused(), None, not_called).err().unwrap();
    assert_eq!(
        e.to_string(),
        "PMIx (namespace ): PMIx_Init failed with PMIx status -31"
    );
    // Refused under an MPI launcher: the MPI library, told why.
    let mut asked = None;
    let e = or_mpilib(refused(), Some("OMPI_COMM_WORLD_SIZE"), |why| {
        asked = Some(why.to_string());
        works()
    });
    assert!(e.is_ok());
    assert_eq!(asked.as_deref(), Some("OMPI_COMM_WORLD_SIZE"));
    // Both refuse: one line naming both.
    let e = or_mpilib(refused(), Some("OMPI_COMM_WORLD_SIZE"), |_| {
        Err(Error::Launch(
            "MPI library (Open MPI: libmpi.so.40): MPI_Init_thread failed with MPI error code 1"
                .into(),
        ))
    })
    .err()
    .unwrap()
    .to_string();
    assert_eq!(
        e,
        "PMIx (namespace ): PMIx_Init failed with PMIx status -31; then the MPI library \
         (OMPI_COMM_WORLD_SIZE is set): MPI library (Open MPI: libmpi.so.40): MPI_Init_thread \
         failed with MPI error code 1"
    );
    // A combined message is not "only a library missing" (that would meet silently another
    // way): the first engine did refuse.
    let e = or_mpilib(refused(), Some("PALS_RANKID"), |_| {
        Err(Error::Launch(
            "PALS_RANKID is set but libmpi.so.12 was not found (x); set NCCL_PERF_MPI_LIB=..."
                .into(),
        ))
    })
    .err()
    .unwrap();
    assert!(!unavailable(&e), "{e}");
    // A timeout leaves no time for another engine: kept as it is (exit 4).
    let timeout = Err(Error::Peers {
        msg: "PMIx (namespace x): timed out in PMIx_Init".into(),
        timed_out: true,
        lost: Vec::new(),
    });
    let e = or_mpilib(timeout, Some("OMPI_COMM_WORLD_SIZE"), not_called)
        .err()
        .unwrap();
    assert!(timed_out(&e), "{e:?}");
    // The MPI library timing out keeps its own error.
    let e = or_mpilib(refused(), Some("OMPI_COMM_WORLD_SIZE"), |_| {
        Err(Error::Peers {
            msg: "MPI library: timed out in MPI_Init".into(),
            timed_out: true,
            lost: Vec::new(),
        })
    })
    .err()
    .unwrap();
    assert!(timed_out(&e), "{e:?}");
}

#[test]
fn a_library_whose_job_is_not_the_launchers_is_refused() {
    let env = crate::engine::test_env::env_of(&[("PMI_SIZE", "4"), ("PALS_RANKID", "2")]);
    assert!(super::agrees_with_launcher("E", &env, 2, 4, "LIB").is_ok());
    // A library of another MPI initialises a job of one: every process a lone rank 0.
    let e = super::agrees_with_launcher("E", &env, 0, 1, "LIB").unwrap_err();
    assert_eq!(
        e.to_string(),
        "E: the library says rank 0 of 1 process(es) but the launcher set PMI_SIZE=4 (a library \
         of another launcher or MPI?); set LIB to the launcher's own"
    );
    let e = super::agrees_with_launcher("E", &env, 1, 4, "LIB").unwrap_err();
    assert!(e.to_string().contains("PALS_RANKID=2"), "{e}");
    // Nothing set: nothing to check.
    let none = crate::engine::test_env::env_of(&[]);
    assert!(super::agrees_with_launcher("E", &none, 0, 1, "LIB").is_ok());
}

/// A launch given up at its deadline (exit 4).
fn timed_out(e: &Error) -> bool {
    matches!(
        e.inner(),
        Error::Peers {
            timed_out: true,
            ..
        }
    )
}
