//! The PMI-2 library engine's parts that need no launcher: where the library is looked for,
//! the message when it is not there, values read back within their buffer, values in pieces,
//! and which launches choose it.

use super::*;
use crate::engine::test_env::{env_of, kind_of};
use crate::engine::{Kind, open, unavailable};
use crate::launch::{Launch, detect};

#[test]
fn the_library_is_looked_for_by_the_loader_then_where_cray_installs_it() {
    let places = library_places(&env_of(&[("CRAY_PMI_PREFIX", "/opt/cray/pe/pmi/6.1.13")]));
    let want: Vec<PathBuf> = [
        "libpmi2.so",
        "libpmi2.so.0",
        "/opt/cray/pe/pmi/6.1.13/lib/libpmi2.so",
        "/opt/cray/pe/pmi/6.1.13/lib/libpmi2.so.0",
        "/opt/cray/pe/pmi/6.1.13/lib64/libpmi2.so",
        "/opt/cray/pe/pmi/6.1.13/lib64/libpmi2.so.0",
        "/opt/cray/pe/pmi/default/lib/libpmi2.so",
        "/opt/cray/pe/pmi/default/lib/libpmi2.so.0",
        "/opt/cray/pe/pmi/default/lib64/libpmi2.so",
        "/opt/cray/pe/pmi/default/lib64/libpmi2.so.0",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    assert_eq!(places, want);
    // Without the prefix: the loader, then Cray's default.
    assert_eq!(library_places(&env_of(&[])).len(), 6);
    // The user's path alone.
    let only = env_of(&[("NCCL_PERF_PMI2_LIB", "/x/libpmi2.so")]);
    assert_eq!(library_places(&only), vec![PathBuf::from("/x/libpmi2.so")]);
}

fn open_error(vars: &[(&str, &str)]) -> String {
    let env = env_of(vars);
    let deadline = Instant::now() + Duration::from_secs(5);
    match open(Kind::Pmi2Lib, &env, deadline) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("{vars:?} opened"),
    }
}

#[test]
fn a_missing_library_is_one_line_naming_what_was_tried_and_what_to_set() {
    // Forced (srun --mpi=pmi2 serves no MPI launcher's variable): the PMI-2 library alone.
    let e = open_error(&[
        ("PMI_FD", "5"),
        ("NCCL_PERF_PMI2_LIB", "/nonexistent/libpmi2.so"),
    ]);
    assert_eq!(
        e,
        "NCCL_PERF_BOOTSTRAP=pmi2 is set but libpmi2.so was not found (/nonexistent/libpmi2.so); \
         set NCCL_PERF_PMI2_LIB=/path/to/libpmi2.so or NCCL_PERF_RENDEZVOUS=host:port"
    );
    assert!(unavailable(&Error::Launch(e)));
    // Under PALS the MPI library (Cray MPICH) is tried next; neither: both in one line.
    let e = open_error(&[
        ("PALS_RANKID", "0"),
        ("NCCL_PERF_PMI2_LIB", "/nonexistent/libpmi2.so"),
        ("NCCL_PERF_MPI_LIB", "/nonexistent/libmpi.so.12"),
    ]);
    assert_eq!(
        e,
        "PALS_RANKID is set but neither libpmi2.so nor libmpi.so.12 was found \
         (/nonexistent/libpmi2.so; /nonexistent/libmpi.so.12); set \
         NCCL_PERF_PMI2_LIB=/path/to/libpmi2.so, NCCL_PERF_MPI_LIB=/path/to/libmpi.so.12 or \
         NCCL_PERF_RENDEZVOUS=host:port"
    );
    // A library that is not PMI-2's.
    let e = open_error(&[("PMI_FD", "5"), ("NCCL_PERF_PMI2_LIB", "libc.so.6")]);
    assert!(
        e.contains("libc.so.6 has no PMI2_Init") && !e.contains('\n'),
        "{e}"
    );
}

#[test]
fn values_read_back_stay_inside_their_buffer() {
    let mut buf = vec![0u8; 16];
    buf[..5].copy_from_slice(b"2:abc");
    assert_eq!(value_text(&buf, 5).unwrap(), "2:abc");
    // A length the library reports that is shorter, or 0: the text ends at its NUL anyway.
    assert_eq!(value_text(&buf, 0).unwrap(), "2:abc");
    // A length past the buffer, or the API's "needs more" (negative): refused.
    let e = value_text(&buf, 17).unwrap_err();
    assert!(e.contains("17 bytes written into 16"), "{e}");
    let e = value_text(&buf, -2000).unwrap_err();
    assert!(e.contains("needs 2000 bytes"), "{e}");
    let e = value_text(&buf, i32::MIN).unwrap_err();
    assert!(e.contains("needs 2147483648 bytes"), "{e}");
    // No NUL inside the buffer: nothing is read past it.
    let e = value_text(&[b'a'; 16], 16).unwrap_err();
    assert!(e.contains("no end"), "{e}");
}

#[test]
fn values_travel_hex_encoded_in_pieces_that_fit() {
    let p = pieces(b"nccl-perf-rv1 port=5").unwrap();
    assert_eq!(p.len(), 1);
    let (n, hex) = first_piece(&p[0]).unwrap();
    assert_eq!(n, 1);
    assert_eq!(
        crate::engine::pmi1::unhex(hex).unwrap(),
        b"nccl-perf-rv1 port=5"
    );
    // A long record: several pieces, each within PMI2_MAX_VALLEN with its NUL.
    let long = vec![0xab_u8; 1500];
    let p = pieces(&long).unwrap();
    assert_eq!(p.len(), 4);
    assert!(p.iter().all(|x| x.len() < MAX_VALLEN), "{p:?}");
    let (n, head) = first_piece(&p[0]).unwrap();
    let joined: String = std::iter::once(head)
        .chain(p[1..n].iter().map(String::as_str))
        .collect();
    assert_eq!(crate::engine::pmi1::unhex(&joined).unwrap(), long);
    // Empty values, and values past 16 pieces.
    assert_eq!(pieces(b"").unwrap(), vec!["1:".to_string()]);
    assert!(pieces(&vec![0; 16 * PIECE]).is_err());
    // A first piece that is not ours.
    for junk in ["", "abc", "0:ab", "17:ab", "x:ab"] {
        assert_eq!(first_piece(junk), None, "{junk}");
    }
    // Keys fit PMI2_MAX_KEYLEN, the rank in them (PMI-2's space is the job's).
    assert_eq!(full_key(65535, "rv", 15).unwrap(), "nccl-perf-65535-rv-15");
    assert_eq!(full_key(3, "rv", 0).unwrap(), "nccl-perf-3-rv");
    assert!(full_key(0, &"k".repeat(60), 0).is_err());
}

#[test]
fn pals_chooses_the_pmi2_library_and_the_mode_forces_it() {
    // PALS: rank variables and no wire-up of PMIx or PMI-1.
    assert_eq!(kind_of(&[("PALS_RANKID", "0")]), Kind::Pmi2Lib);
    let pals = [
        ("PALS_RANKID", "3"),
        ("PALS_LOCAL_RANKID", "1"),
        ("PALS_APID", "a1b2"),
        ("PMI_RANK", "3"),
        ("PMI_SIZE", "8"),
    ];
    assert_eq!(kind_of(&pals), Kind::Pmi2Lib);
    match detect(&env_of(&pals), false) {
        Ok(Launch::Engine(e)) => {
            assert_eq!(e.base.local_rank, Some(1));
            assert_eq!(e.base.launcher, "PMI-2 library");
        }
        other => panic!("{other:?}"),
    }
    // PMIx and PMI-1 wire-ups come first.
    let mut v = pals.to_vec();
    v.push(("PMI_FD", "5"));
    assert_eq!(kind_of(&v), Kind::Pmi1);
    let mut v = pals.to_vec();
    v.extend([("PMIX_RANK", "3"), ("PMIX_NAMESPACE", "x")]);
    assert_eq!(kind_of(&v), Kind::Pmix);
    // Forced under srun --mpi=pmi2 (PMI_FD): the library, not the wire.
    let srun = [
        ("NCCL_PERF_BOOTSTRAP", "PMI2"),
        ("PMI_FD", "5"),
        ("PMI_RANK", "0"),
        ("PMI_SIZE", "4"),
    ];
    assert_eq!(kind_of(&srun), Kind::Pmi2Lib);
    // Forced with no launcher: one line, not a job of one.
    match detect(&env_of(&[("NCCL_PERF_BOOTSTRAP", "pmi2")]), false) {
        Err(Error::Launch(m)) => {
            assert!(m.contains("PALS_RANKID") && !m.contains('\n'), "{m}")
        }
        other => panic!("{other:?}"),
    }
}
