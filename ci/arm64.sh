#!/usr/bin/env bash
# arm64 (aarch64-unknown-linux-gnu: Grace, GB200/GB300 nodes) from an x86-64 Debian machine:
# cross-compiles both builds (default and --features mpi) with ci/cross.sh and runs the
# GPU-free tests under qemu-user:
#
#   default build (tests with the test-hooks feature, as tests/rank_faults.rs needs):
#                  the unit tests of every crate of the workspace (crates/*, and the test
#                  oracle crate oracle/: all default workspace members), and every test target but tests/ship_*.rs (they run
#                  the host's `cargo install` and read the shipped files, which do not depend
#                  on the architecture) — CLI and hostile command lines, --dry-run launches of
#                  4 processes (Slurm, torchrun, mpirun-environment styles), the rendezvous
#                  against hostile clients, rank kills, stand-in CUDA/NCCL/NVRTC libraries
#                  (built with the cross compiler), the nccl-perf tool, the golden formats.
#   mpi build:     tests/bootstrap.rs, tests/rank_faults.rs and tests/cli.rs: the host's
#                  mpirun (x86-64 Open MPI) starts arm64 ranks under qemu, which load arm64
#                  libmpi.so.40 and form one MPI job.
#
# How the emulation reaches every process: cargo runs each test harness through its `runner`
# (CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER), and the tests start our programs through
# NCCL_PERF_TEST_RUNNER (tests/programs/mod.rs), since an emulated process cannot exec a
# foreign binary and binfmt_misc is not relied on. Host tools the tests start (bash, mpirun,
# timeout, g++) run natively. No GPU is touched.
#
# Needs what `ci/cross.sh --install --mpi aarch64-unknown-linux-gnu` installs (as root), plus
# qemu-user and mpirun (openmpi-bin); .ci/run installs all of it. qemu runs the binaries from
# the sysroot ci/cross.sh fills (target/sysroot/aarch64-unknown-linux-gnu). A missing tool is
# an error, never a skip.
#
# Usage: ci/arm64.sh [--no-mpi] [--no-test]
#   --no-mpi    leave out the mpi build
#   --no-test   cross-compile only
set -euo pipefail
cd "$(dirname "$0")/.."

TRIPLE=aarch64-unknown-linux-gnu
mpi=1
tests=1
for a in "$@"; do
  case "$a" in
    --no-mpi) mpi=0 ;;
    --no-test) tests=0 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "arm64: unknown argument $a (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "arm64: $*" >&2; exit 2; }

if [ "$tests" = 1 ]; then
  command -v qemu-aarch64 >/dev/null 2>&1 || die "qemu-aarch64 is missing (apt-get install qemu-user)"
  if [ "$mpi" = 1 ]; then
    command -v mpirun >/dev/null 2>&1 || die "mpirun is missing (apt-get install openmpi-bin)"
  fi
fi

target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
sysroot="$target_dir/sysroot/$TRIPLE"
# One environment for both builds (the Open MPI setup is inert without the feature), so that
# they share their compiled dependencies.
cross=(bash ci/cross.sh --sysroot "$sysroot")
[ "$mpi" = 0 ] || cross+=(--mpi)
cross+=("$TRIPLE" --)
"${cross[@]}" true
runner="qemu-aarch64 -L $sysroot"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="$runner"
export NCCL_PERF_TEST_RUNNER="$runner"
# The stand-in CUDA/NCCL/NVRTC libraries are loaded by arm64 programs.
export NCCL_PERF_TEST_CC=aarch64-linux-gnu-gcc

report=()
step() {
  local label="$1"; shift
  local t0=$SECONDS
  echo "arm64: $label: $*" >&2
  "${cross[@]}" "$@"
  report+=("$label $((SECONDS - t0)) s")
}
# The e_machine field of an ELF file: b700 is aarch64.
is_arm64() { [ "$(od -An -tx1 -j18 -N2 "$1" | tr -d ' ')" = b700 ]; }

# Every integration test but the ship_* modules (they run the host's `cargo install` and read
# files): tests/main.rs names the modules.
# One test at a time: qemu-user can deadlock in a process it forks while another thread of the
# emulated program runs (seen once: a test's `mpiexec.hydra --version` never started).
qemu_tests=(--lib --test integration --test interrupt -- --test-threads=1)
while read -r n; do
  qemu_tests+=(--skip "$n::")
done < <(sed -n 's/^mod \(ship_[a-z_]*\);$/\1/p' tests/main.rs)

bin="$target_dir/$TRIPLE/debug/all_reduce_perf"
step "build" cargo build --locked --target "$TRIPLE"
is_arm64 "$bin" || die "$bin is not an aarch64 binary"
if [ "$tests" = 1 ]; then
  step "qemu tests" cargo test --locked --no-fail-fast --target "$TRIPLE" --features test-hooks \
    "${qemu_tests[@]}"
fi
if [ "$mpi" = 1 ]; then
  step "build (mpi)" cargo build --locked --target "$TRIPLE" --features mpi
  is_arm64 "$bin" || die "$bin is not an aarch64 binary"
  # NEEDED libmpi.so.40: the MPI build, not the default one under the same name.
  # (Every build holds the text: the default one may open the launcher's MPI at run time.)
  readelf -d "$bin" | grep -q 'NEEDED.*\[libmpi\.so\.40' || die "the mpi build of all_reduce_perf does not link libmpi.so.40"
  if [ "$tests" = 1 ]; then
    step "qemu tests (mpi)" cargo test --locked --no-fail-fast --target "$TRIPLE" --features mpi,test-hooks \
      --test integration -- --test-threads=1 bootstrap:: rank_faults:: cli::
  fi
fi
echo "arm64: done: $(printf '%s; ' "${report[@]}")" >&2
