//! The PMIx structures of `ffi.rs` against `pmix_common.h`, with the C compiler: the Rust
//! sizes and offsets go in as `-D` definitions and the C file checks them at compile time.
//! Where the header or a compiler is missing the test says so and passes, except under
//! `CI=true` (CI installs libpmix-dev with Open MPI's headers).

use super::{Data, Info, Proc, Value};
use std::mem::{offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;

const CHECK: &str = r#"
#include <stddef.h>
#include <pmix_common.h>
_Static_assert(sizeof(pmix_proc_t) == PROC_SIZE, "pmix_proc_t size");
_Static_assert(offsetof(pmix_proc_t, rank) == PROC_RANK, "pmix_proc_t.rank");
_Static_assert(sizeof(pmix_value_t) == VALUE_SIZE, "pmix_value_t size");
_Static_assert(offsetof(pmix_value_t, data) == VALUE_DATA, "pmix_value_t.data");
_Static_assert(sizeof(((pmix_value_t *)0)->data) == DATA_SIZE, "pmix_value_t.data size");
_Static_assert(sizeof(pmix_info_t) == INFO_SIZE, "pmix_info_t size");
_Static_assert(offsetof(pmix_info_t, flags) == INFO_FLAGS, "pmix_info_t.flags");
_Static_assert(offsetof(pmix_info_t, value) == INFO_VALUE, "pmix_info_t.value");
_Static_assert(PMIX_MAX_NSLEN + 1 == 256 && PMIX_MAX_KEYLEN + 1 == 512, "name lengths");
_Static_assert(PMIX_BOOL == 1 && PMIX_STRING == 3 && PMIX_UINT16 == 13 && PMIX_UINT32 == 14, "types");
_Static_assert(PMIX_GLOBAL == 3 && PMIX_RANK_WILDCARD == UINT32_MAX - 1, "scope, wildcard");
"#;

/// A folder holding `pmix_common.h`.
fn header_dir() -> Option<PathBuf> {
    let mut places: Vec<PathBuf> = vec!["/usr/include".into(), "/usr/local/include".into()];
    // Debian's multiarch folders by name too: under qemu-user (ci/arm64.sh) a listing of
    // /usr/lib shows the target's sysroot, not the host's headers.
    for arch in ["x86_64", "aarch64"] {
        places.push(format!("/usr/lib/{arch}-linux-gnu/pmix2/include").into());
    }
    if let Ok(rd) = std::fs::read_dir("/usr/lib") {
        for e in rd.flatten() {
            places.push(e.path().join("pmix2/include"));
        }
    }
    places
        .into_iter()
        .find(|p| p.join("pmix_common.h").is_file())
}

#[test]
fn rust_and_c_agree_on_the_pmix_layouts() {
    let ci = std::env::var_os("CI").is_some_and(|v| v == "true");
    let Some(dir) = header_dir() else {
        assert!(
            !ci,
            "no pmix_common.h: under CI libpmix-dev must be installed"
        );
        eprintln!("skipped: no pmix_common.h to check the PMIx layouts against");
        return;
    };
    let tmp = std::env::temp_dir().join(format!("nccl-perf-pmix-abi-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let src = tmp.join("check.c");
    std::fs::write(&src, CHECK).unwrap();
    let defines = [
        ("PROC_SIZE", size_of::<Proc>()),
        ("PROC_RANK", offset_of!(Proc, rank)),
        ("VALUE_SIZE", size_of::<Value>()),
        ("VALUE_DATA", offset_of!(Value, data)),
        ("DATA_SIZE", size_of::<Data>()),
        ("INFO_SIZE", size_of::<Info>()),
        ("INFO_FLAGS", offset_of!(Info, flags)),
        ("INFO_VALUE", offset_of!(Info, value)),
    ];
    let cc = std::env::var("NCCL_PERF_TEST_CC").unwrap_or_else(|_| "cc".into());
    let mut c = Command::new(&cc);
    c.arg("-std=c11")
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(tmp.join("check.o"))
        .arg(format!("-I{}", dir.display()));
    for (name, v) in defines {
        c.arg(format!("-D{name}={v}"));
    }
    let out = match c.output() {
        Ok(o) => o,
        Err(e) => {
            assert!(!ci, "cannot run the C compiler {cc}: {e}");
            eprintln!("skipped: no C compiler ({cc}: {e})");
            return;
        }
    };
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(
        out.status.success(),
        "the C layout of PMIx ({}) differs from ffi.rs':\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn only_an_open_socket_is_taken_over() {
    use std::os::fd::IntoRawFd;
    let e = super::adopt_socket(-1).unwrap_err();
    assert!(e.contains("not a file descriptor"), "{e}");
    let e = super::adopt_socket(987_654).unwrap_err();
    assert!(e.contains("not an open file descriptor"), "{e}");
    let f = std::fs::File::open("/proc/self/status").unwrap();
    let e = super::adopt_socket(std::os::fd::AsRawFd::as_raw_fd(&f)).unwrap_err();
    assert!(e.contains("not a socket"), "{e}");
    let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    // Ownership passes to adopt_socket, which closes it when the OwnedFd drops.
    assert!(super::adopt_socket(a.into_raw_fd()).is_ok());
}

#[test]
fn a_library_that_is_not_pmix_is_named() {
    // libc is everywhere and has no PMIx_Init.
    match super::Pmix::open(std::path::Path::new("libc.so.6")) {
        Err(e) => assert!(e.contains("has no PMIx_Init"), "{e}"),
        Ok(_) => panic!("libc taken for PMIx"),
    }
    match super::Pmix::open(std::path::Path::new("/nonexistent/libpmix.so.2")) {
        Err(e) => assert!(e.contains("cannot open /nonexistent/libpmix.so.2"), "{e}"),
        Ok(_) => panic!("a missing file opened"),
    }
}
