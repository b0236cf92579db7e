//! Where the MPI library is looked for, which engine an environment gets, the one-line error
//! when no library is found, and the records a fence gathers (no MPI library is loaded here).

use super::*;
use crate::engine::test_env::{env_of, kind_of};
use crate::launch::{Kind, Launch, detect, mpi_marker};

#[test]
fn the_users_library_is_the_only_place() {
    let env = env_of(&[
        ("NCCL_PERF_MPI_LIB", "/opt/x/libmpi.so.40"),
        ("OPAL_PREFIX", "/opt/hpcx/ompi"),
    ]);
    assert_eq!(
        library_places(&env),
        vec![PathBuf::from("/opt/x/libmpi.so.40")]
    );
}

#[test]
fn the_launchers_family_comes_first_then_its_prefixes() {
    let env = env_of(&[
        ("OMPI_COMM_WORLD_SIZE", "4"),
        ("OPAL_PREFIX", "/opt/hpcx/ompi"),
        ("MPI_HOME", "/opt/mpi"),
    ]);
    let places = library_places(&env);
    assert_eq!(places[0], PathBuf::from("libmpi.so.40"));
    assert_eq!(places[1], PathBuf::from("libmpi.so.12"));
    assert_eq!(places[3], PathBuf::from("/opt/hpcx/ompi/lib/libmpi.so.40"));
    assert!(places.contains(&PathBuf::from("/opt/mpi/lib64/libmpi.so.12")));
    let env = env_of(&[
        ("PMI_RANK", "0"),
        ("PMI_SIZE", "2"),
        ("I_MPI_ROOT", "/opt/intel/mpi"),
    ]);
    let places = library_places(&env);
    assert_eq!(places[0], PathBuf::from("libmpi.so.12"));
    assert_eq!(places[1], PathBuf::from("libmpich.so.12"));
    assert!(places.contains(&PathBuf::from("/opt/intel/mpi/lib/release/libmpi.so.12")));
}

#[test]
fn the_lib_beside_mpirun_in_path_is_searched() {
    let dir = std::env::temp_dir().join(format!("nccl-perf-mpilib-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::write(dir.join("bin/mpiexec"), "").unwrap();
    let path = format!("/nonexistent/bin:{}", dir.join("bin").display());
    let env = env_of(&[("PMI_RANK", "0"), ("PMI_SIZE", "2"), ("PATH", &path)]);
    let places = library_places(&env);
    assert!(places.contains(&dir.join("lib/libmpi.so.12")), "{places:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_mpi_launcher_without_a_wire_up_gets_the_mpi_library() {
    // Intel MPI: rank and size, no PMI_FD/PMI_PORT, no PMIx. (Cray PALS: its PMI-2 library
    // first, `pmi2/tests.rs`.)
    assert_eq!(
        kind_of(&[("PMI_RANK", "1"), ("PMI_SIZE", "4")]),
        Kind::MpiLib
    );
    // Open MPI's variables without PMIx's.
    assert_eq!(
        kind_of(&[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "2")]),
        Kind::MpiLib
    );
    // PMIx and PMI-1 still come first.
    assert_eq!(
        kind_of(&[
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("PMIX_RANK", "0"),
            ("PMIX_NAMESPACE", "x")
        ]),
        Kind::Pmix
    );
    assert_eq!(
        kind_of(&[("PMI_FD", "5"), ("PMI_RANK", "0"), ("PMI_SIZE", "2")]),
        Kind::Pmi1
    );
    // Forced, whatever the launcher serves.
    assert_eq!(
        kind_of(&[
            ("NCCL_PERF_BOOTSTRAP", "mpilib"),
            ("PMIX_RANK", "0"),
            ("PMIX_NAMESPACE", "x")
        ]),
        Kind::MpiLib
    );
    // The user's rendezvous wins.
    assert!(matches!(
        detect(
            &env_of(&[
                ("OMPI_COMM_WORLD_RANK", "0"),
                ("OMPI_COMM_WORLD_SIZE", "2"),
                ("NCCL_PERF_RENDEZVOUS", "h:1234"),
            ]),
            false
        ),
        Ok(Launch::Tcp(_))
    ));
    assert_eq!(
        mpi_marker(&env_of(&[("PMI_RANK", "0"), ("PMI_FD", "5")])),
        None
    );
}

#[test]
fn no_library_is_one_line_naming_both_and_what_to_set() {
    let env = env_of(&[
        ("OMPI_COMM_WORLD_SIZE", "4"),
        ("NCCL_PERF_MPI_LIB", "/nonexistent/libmpi.so.40"),
    ]);
    let pmix = vec!["/nonexistent/libpmix.so.2".to_string()];
    let err = match MpiLibEngine::open(
        &env,
        Instant::now() + Duration::from_secs(5),
        "OMPI_COMM_WORLD_SIZE",
        Some(super::Before {
            lib: "libpmix.so.2",
            var: "NCCL_PERF_PMIX_LIB",
            tried: &pmix,
        }),
    ) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("opened"),
    };
    assert!(
        err.contains(
            "OMPI_COMM_WORLD_SIZE is set but neither libpmix.so.2 nor libmpi.so.40 was found \
             (/nonexistent/libpmix.so.2; /nonexistent/libmpi.so.40); set \
             NCCL_PERF_PMIX_LIB=/path/to/libpmix.so.2, NCCL_PERF_MPI_LIB=/path/to/libmpi.so.40 \
             or NCCL_PERF_RENDEZVOUS=host:port"
        ),
        "{err}"
    );
    assert!(!err.contains('\n'), "{err}");
    assert!(super::super::unavailable(&Error::Launch(err)));
}

#[test]
fn records_hold_every_put_and_read_back() {
    let r = encode(&[
        ("rv".into(), b"nccl-perf-rv1 port=5".to_vec()),
        ("r".into(), vec![0, 255]),
    ]);
    assert_eq!(lookup(&r, "rv").unwrap(), b"nccl-perf-rv1 port=5");
    assert_eq!(lookup(&r, "r").unwrap(), vec![0, 255]);
    assert_eq!(lookup(&r, "x"), None);
    assert_eq!(lookup(b"", "rv"), None);
}
