//! The folder rules of the library search on folders made here (the planted libraries
//! themselves: `tests/library_search.rs`).

use super::*;
use std::os::unix::fs::PermissionsExt;

/// A fresh folder of this test's own under the system's temporary folder.
fn folder(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nccl-perf-search-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_relative_folder_is_never_trusted() {
    for d in [".", "bin", "lib/../lib"] {
        let why = untrusted_folder(Path::new(d), true).unwrap();
        assert!(why.starts_with("a relative folder"), "{d}: {why}");
    }
}

#[test]
fn a_folder_writable_by_others_is_refused_and_a_sticky_one_only_above() {
    let d = folder("modes");
    assert_eq!(untrusted_folder(&d, true), None);
    let inner = d.join("lib");
    std::fs::create_dir_all(&inner).unwrap();
    chmod(&inner, 0o755);
    chmod(&d, 0o1777);
    // A sticky shared folder above one of ours is fine (as /tmp is); as the last folder it is not.
    assert_eq!(untrusted_folder(&inner, true), None);
    let why = untrusted_folder(&d, true).unwrap();
    assert!(why.ends_with("is writable by others (mode 1777)"), "{why}");
    // Not sticky: others could rename our folder away and put theirs in its place.
    chmod(&d, 0o777);
    let why = untrusted_folder(&inner, true).unwrap();
    assert!(why.ends_with("is writable by others (mode 777)"), "{why}");
    chmod(&d, 0o775);
    assert!(untrusted_folder(&d, true).is_some(), "group-writable");
    chmod(&d, 0o755);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn places_keep_bare_names_and_drop_relative_or_open_libraries() {
    let d = folder("places");
    let lib = d.join("libpmix.so.2");
    std::fs::write(&lib, "").unwrap();
    chmod(&lib, 0o644);
    let mut notes = Vec::new();
    let kept = trusted_places(
        vec![
            PathBuf::from("libpmix.so.2"),
            PathBuf::from("lib/libpmix.so.2"),
            lib.clone(),
            d.join("missing/libpmix.so.2"),
        ],
        &mut notes,
    );
    assert_eq!(
        kept,
        vec![
            PathBuf::from("libpmix.so.2"),
            lib.clone(),
            d.join("missing/libpmix.so.2")
        ]
    );
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("lib/libpmix.so.2 skipped"), "{notes:?}");
    chmod(&lib, 0o666);
    let kept = trusted_places(vec![lib.clone()], &mut notes);
    assert!(kept.is_empty());
    assert!(
        notes[1].ends_with("is writable by others (mode 666)"),
        "{notes:?}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn the_launcher_prefix_comes_only_from_an_absolute_closed_path_entry() {
    let d = folder("prefix");
    let bin = d.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    chmod(&bin, 0o755);
    std::fs::write(bin.join("mpirun"), "").unwrap();
    let path = format!("relative/bin:{}", bin.display());
    let env = |k: &str| (k == "PATH").then(|| path.clone());
    let (prefix, notes) = launcher_prefix(&env, &["mpirun"]);
    assert_eq!(prefix.as_deref(), Some(d.as_path()));
    assert!(notes.is_empty(), "no mpirun under relative/bin: {notes:?}");
    chmod(&bin, 0o777);
    let (prefix, notes) = launcher_prefix(&env, &["mpirun"]);
    assert_eq!(prefix, None);
    assert!(
        notes[0].ends_with("is writable by others (mode 777)"),
        "{notes:?}"
    );
    chmod(&bin, 0o755);
    std::fs::remove_dir_all(&d).unwrap();
}
