#!/usr/bin/env bash
# Lays out built nccl-perf binaries the way nccl-tests installs, so that job scripts, container
# recipes and health checks that call nccl-tests by path keep working unchanged:
#
#   PREFIX/build/all_reduce_perf ... PREFIX/build/hypercube_perf   (the eleven benchmarks)
#   PREFIX/build/nccl-perf                                         (the companion tool)
#
# nccl-tests' `make MPI=1 NAME_SUFFIX=_mpi` names its MPI build all_reduce_perf_mpi;
# --suffix (or NAME_SUFFIX in the environment) does the same, and --mpi is --suffix _mpi for
# binaries built with `--features mpi` (checked: the script refuses a build without MPI, which
# under mpirun would otherwise need NCCL_PERF_RENDEZVOUS). Run the script twice to get both
# names in one folder, as some images do.
#
# Usage: ci/install-layout.sh [options] [PREFIX]
#   PREFIX            install root (default /opt/nccl-tests; gIB/GKE images: /third_party/nccl-tests)
#   --from DIR        folder with the built binaries (default: ${CARGO_TARGET_DIR:-target}/release,
#                     or ~/.cargo/bin after `cargo install --path .`)
#   --build-dir NAME  folder under PREFIX (default build, nccl-tests' BUILDDIR)
#   --suffix SUFFIX   append SUFFIX to the benchmark names (NAME_SUFFIX)
#   --mpi             --suffix _mpi, and check the binaries link libmpi
#   --symlink         link to the binaries in --from instead of copying them
#   --no-tool         leave out nccl-perf
#   --print           print the paths that would be installed, one a line, and change nothing
#   -h, --help        this text
set -euo pipefail

BENCHMARKS=(all_reduce all_gather broadcast reduce reduce_scatter alltoall alltoallv scatter
  gather sendrecv hypercube)

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
die() { echo "install-layout: $*" >&2; exit 2; }

prefix=/opt/nccl-tests
from="${CARGO_TARGET_DIR:-target}/release"
build_dir=build
suffix="${NAME_SUFFIX:-}"
mpi=0
symlink=0
tool=1
print=0
while [ $# -gt 0 ]; do
  case "$1" in
    --from) [ $# -ge 2 ] || die "--from needs a folder"; from="$2"; shift 2 ;;
    --from=*) from="${1#*=}"; shift ;;
    --build-dir) [ $# -ge 2 ] || die "--build-dir needs a name"; build_dir="$2"; shift 2 ;;
    --build-dir=*) build_dir="${1#*=}"; shift ;;
    --suffix) [ $# -ge 2 ] || die "--suffix needs a value"; suffix="$2"; shift 2 ;;
    --suffix=*) suffix="${1#*=}"; shift ;;
    --mpi) mpi=1; shift ;;
    --symlink) symlink=1; shift ;;
    --no-tool) tool=0; shift ;;
    --print) print=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) prefix="$1"; shift ;;
  esac
done
if [ "$mpi" = 1 ]; then
  if [ -n "$suffix" ] && [ "$suffix" != _mpi ]; then
    die "--mpi sets the suffix _mpi; it conflicts with --suffix $suffix"
  fi
  suffix=_mpi
fi
case "$suffix" in
  */*) die "the suffix must not contain '/': $suffix" ;;
esac
case "$build_dir" in
  ''|/*) die "--build-dir must be a relative folder name: '$build_dir'" ;;
esac
[ -n "$prefix" ] || die "empty PREFIX"

dest="${prefix%/}/$build_dir"

# (source name, installed name) pairs, benchmarks first.
sources=()
targets=()
for b in "${BENCHMARKS[@]}"; do
  sources+=("${b}_perf")
  targets+=("${b}_perf${suffix}")
done
if [ "$tool" = 1 ]; then
  sources+=(nccl-perf)
  targets+=(nccl-perf)
fi

if [ "$print" = 1 ]; then
  for t in "${targets[@]}"; do
    echo "$dest/$t"
  done
  exit 0
fi

features=""
[ "$mpi" = 1 ] && features=" --features mpi"
[ -d "$from" ] || die "no folder $from: build first (cargo build --release$features) or pass --from"
missing=()
for s in "${sources[@]}"; do
  [ -x "$from/$s" ] || missing+=("$s")
done
[ ${#missing[@]} -eq 0 ] || die "not in $from (or not executable): ${missing[*]}"

if [ "$mpi" = 1 ]; then
  # An MPI build names libmpi in its dynamic section (NEEDED libmpi.so.40).
  for s in "${sources[@]:0:${#BENCHMARKS[@]}}"; do
    grep -q -a 'libmpi\.so' "$from/$s" \
      || die "$from/$s was built without MPI: build with 'cargo build --release$features', or drop --mpi"
  done
fi

mkdir -p "$dest"
from_abs="$(cd "$from" && pwd)"
for i in "${!sources[@]}"; do
  src="$from_abs/${sources[$i]}"
  dst="$dest/${targets[$i]}"
  rm -f "$dst"
  if [ "$symlink" = 1 ]; then
    ln -s "$src" "$dst"
  else
    cp "$src" "$dst"
    chmod 0755 "$dst"
  fi
done
echo "install-layout: ${#targets[@]} programs in $dest (add it to PATH, as nccl-tests images do)" >&2
