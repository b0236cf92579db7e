//! The MPI handles of `mpi.rs` against the public headers, with the C compiler: Open MPI's
//! `mpi.h` must make `MPI_COMM_WORLD` and `MPI_BYTE` of the globals whose addresses are read,
//! and MPICH's must define the integers used. Open MPI's header is required under `CI=true`
//! (CI installs libopenmpi-dev); MPICH's is checked where it is installed (`libmpich-dev`, or
//! `NCCL_PERF_TEST_MPICH_INCLUDE` naming its folder), else skipped with a message.

use super::{MPICH_BYTE, MPICH_COMM_WORLD, THREAD_FUNNELED};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| v == "true")
}

/// Open MPI's include folder: `mpicc --showme:incdirs`, else Debian's.
fn open_mpi_include() -> Option<PathBuf> {
    let mut places = Vec::new();
    if let Ok(o) = Command::new("mpicc").arg("--showme:incdirs").output() {
        places.extend(
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .map(PathBuf::from),
        );
    }
    places.push(
        format!(
            "/usr/lib/{}-linux-gnu/openmpi/include",
            std::env::consts::ARCH
        )
        .into(),
    );
    places.into_iter().find(|p| p.join("mpi.h").is_file())
}

fn mpich_include() -> Option<PathBuf> {
    let mut places: Vec<PathBuf> = std::env::var_os("NCCL_PERF_TEST_MPICH_INCLUDE")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    places.push(format!("/usr/include/{}-linux-gnu/mpich", std::env::consts::ARCH).into());
    places.into_iter().find(|p| p.join("mpi.h").is_file())
}

/// Runs the C compiler on `source` with `args`; `None` (after a message) where there is none.
fn cc(dir: &Path, source: &str, args: &[String]) -> Option<Output> {
    let tmp = std::env::temp_dir().join(format!(
        "nccl-perf-mpi-abi-{}-{}",
        std::process::id(),
        dir.display().to_string().len()
    ));
    std::fs::create_dir_all(&tmp).unwrap();
    let src = tmp.join("check.c");
    std::fs::write(&src, source).unwrap();
    let cc = std::env::var("NCCL_PERF_TEST_CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .arg("-std=c11")
        .arg(format!("-I{}", dir.display()))
        .args(args)
        .arg(&src)
        .output();
    let _ = std::fs::remove_dir_all(&tmp);
    match out {
        Ok(o) => Some(o),
        Err(e) => {
            assert!(!ci(), "cannot run the C compiler {cc}: {e}");
            eprintln!("skipped: no C compiler ({cc}: {e})");
            None
        }
    }
}

#[test]
fn open_mpis_handles_are_the_globals_read() {
    let Some(dir) = open_mpi_include() else {
        assert!(
            !ci(),
            "no Open MPI mpi.h: under CI libopenmpi-dev must be installed"
        );
        eprintln!("skipped: no Open MPI mpi.h to check the handles against");
        return;
    };
    let src = format!(
        "#include <mpi.h>\n_Static_assert(MPI_THREAD_FUNNELED == {THREAD_FUNNELED}, \"funneled\");\n\
         handle-world: MPI_COMM_WORLD\nhandle-byte: MPI_BYTE\n"
    );
    let Some(o) = cc(&dir, &src, &["-E".into()]) else {
        return;
    };
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let line = |tag: &str| {
        text.lines()
            .find(|l| l.starts_with(tag))
            .unwrap_or_else(|| panic!("{tag}"))
            .to_string()
    };
    assert!(
        line("handle-world:").contains("&(ompi_mpi_comm_world)")
            || line("handle-world:").contains("&ompi_mpi_comm_world"),
        "{}",
        line("handle-world:")
    );
    assert!(
        line("handle-byte:").contains("&(ompi_mpi_byte)")
            || line("handle-byte:").contains("&ompi_mpi_byte"),
        "{}",
        line("handle-byte:")
    );
    let Some(o) = cc(
        &dir,
        &src.replace("handle-", "// "),
        &["-fsyntax-only".into()],
    ) else {
        return;
    };
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn mpichs_handles_are_the_integers_used() {
    let Some(dir) = mpich_include() else {
        eprintln!(
            "skipped: no MPICH mpi.h (libmpich-dev, or NCCL_PERF_TEST_MPICH_INCLUDE) to check \
             the MPICH ABI's handles against"
        );
        return;
    };
    let src = format!(
        "#include <mpi.h>\n\
         _Static_assert(MPI_COMM_WORLD == {MPICH_COMM_WORLD}, \"MPI_COMM_WORLD\");\n\
         _Static_assert(MPI_BYTE == {MPICH_BYTE}, \"MPI_BYTE\");\n\
         _Static_assert(MPI_THREAD_FUNNELED == {THREAD_FUNNELED}, \"funneled\");\n\
         _Static_assert(sizeof(MPI_Comm) == sizeof(int), \"integer handles\");\n"
    );
    if let Some(o) = cc(&dir, &src, &["-fsyntax-only".into()]) {
        assert!(
            o.status.success(),
            "MPICH's mpi.h ({}) differs from mpi.rs:\n{}",
            dir.display(),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn a_library_that_is_not_mpi_is_named() {
    // libc is everywhere and has no MPI_Comm_rank.
    match super::Mpi::open(Path::new("libc.so.6")) {
        Err(e) => assert!(e.contains("has no MPI_"), "{e}"),
        Ok(_) => panic!("libc taken for MPI"),
    }
    match super::Mpi::open(Path::new("/nonexistent/libmpi.so.40")) {
        Err(e) => assert!(e.contains("cannot open /nonexistent/libmpi.so.40"), "{e}"),
        Ok(_) => panic!("opened"),
    }
}
