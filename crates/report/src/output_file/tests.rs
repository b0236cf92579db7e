//! The output-file rules against planted links, pipes and predictable names.

use super::*;
use std::os::unix::fs::symlink;

/// A fresh folder of this test's own under the system's temporary folder.
fn folder(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nccl-perf-out-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Makes a named pipe at `p` (`mkfifo`; a missing tool fails the test).
fn mkfifo(p: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "mkfifo {} failed", p.display());
}

#[test]
fn create_exclusive_numbers_existing_files() {
    let dir = folder("excl");
    let path = dir.join("out.json");
    let (_, p0) = create_exclusive(&path).unwrap();
    let (_, p1) = create_exclusive(&path).unwrap();
    let (_, p2) = create_exclusive(&path).unwrap();
    assert_eq!(p0, path);
    assert_eq!(p1, dir.join("out.json.0"));
    assert_eq!(p2, dir.join("out.json.1"));
    let missing = dir.join("no-such-dir").join("x.json");
    let err = create_exclusive(&missing).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn create_exclusive_never_writes_through_a_planted_link() {
    let dir = folder("excl-link");
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let path = dir.join("out.json");
    symlink(&victim, &path).unwrap();
    let (mut f, actual) = create_exclusive(&path).unwrap();
    f.write_all(b"{}").unwrap();
    assert_eq!(actual, dir.join("out.json.0"));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn replace_writes_a_new_file_and_replaces_an_old_one_leaving_no_temporary() {
    let dir = folder("replace");
    let path = dir.join("health.prom");
    replace(&path, b"one\n").unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\n");
    replace(&path, b"two\n").unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "two\n");
    assert_eq!(names(&dir), ["health.prom"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn replace_refuses_a_symbolic_link_at_the_path_and_leaves_its_target_alone() {
    let dir = folder("link");
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let path = dir.join("health.prom");
    symlink(&victim, &path).unwrap();
    let err = replace(&path, b"metrics\n").unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(std::fs::symlink_metadata(&path).unwrap().is_symlink());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn replace_never_uses_a_predictable_temporary_name() {
    // The old writer wrote `F.tmp` through whatever was there: a link planted at `F.tmp`
    // pointed the write at the victim.
    let dir = folder("tmp-link");
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let path = dir.join("health.prom");
    symlink(&victim, dir.join("health.prom.tmp")).unwrap();
    replace(&path, b"metrics\n").unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "metrics\n");
    assert!(
        std::fs::symlink_metadata(dir.join("health.prom.tmp"))
            .unwrap()
            .is_symlink()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn replace_does_not_write_into_a_hard_link() {
    let dir = folder("hard");
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let path = dir.join("out.md");
    std::fs::hard_link(&victim, &path).unwrap();
    replace(&path, b"report\n").unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "report\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn replace_refuses_a_fifo_at_once() {
    // Opening a FIFO for writing blocks until a reader comes: nobody reads this one, so a
    // writer that opened it would never return (the test would hang, not fail).
    let dir = folder("fifo");
    let path = dir.join("health.json");
    mkfifo(&path);
    let err = replace(&path, b"{}\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "is a named pipe (FIFO), not a regular file"
    );
    let err = Staged::new(&path).unwrap_err();
    assert_eq!(
        err.to_string(),
        "is a named pipe (FIFO), not a regular file"
    );
    assert!(
        check_target(&dir)
            .unwrap_err()
            .to_string()
            .contains("folder")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn staged_output_is_renamed_over_the_target_from_a_private_folder() {
    let dir = folder("staged");
    let path = dir.join("plot.svg");
    let staged = Staged::new(&path).unwrap();
    assert_eq!(staged.path().file_name().unwrap(), "plot.svg");
    let private = staged.path().parent().unwrap().to_path_buf();
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&private).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o700);
    std::fs::write(staged.path(), "<svg/>").unwrap();
    staged.commit().unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "<svg/>");
    assert_eq!(names(&dir), ["plot.svg"]);
    // Dropped without a commit: nothing is left behind and the target is untouched.
    let staged = Staged::new(&path).unwrap();
    std::fs::write(staged.path(), "half").unwrap();
    drop(staged);
    assert_eq!(names(&dir), ["plot.svg"]);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "<svg/>");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn temporary_names_differ_every_time() {
    assert_ne!(unpredictable(), unpredictable());
}
