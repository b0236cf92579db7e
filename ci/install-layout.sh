#!/usr/bin/env bash
# Lays out built nccl-perf binaries the way nccl-tests installs, so that job scripts, container
# recipes and health checks that call nccl-tests by path keep working unchanged:
#
#   PREFIX/build/all_reduce_perf ... PREFIX/build/hypercube_perf   (the eleven benchmarks)
#   PREFIX/build/nccl-perf                                         (the companion tool)
#
# nccl-tests' `make MPI=1 NAME_SUFFIX=_mpi` names its MPI build all_reduce_perf_mpi;
# --suffix (or NAME_SUFFIX in the environment) does the same, and --mpi is --suffix _mpi for
# binaries built with `--features mpi` (checked: the script refuses a build that does not link
# libmpi). The default build needs no MPI build for mpirun, srun --mpi or mpiexec (it starts
# through the launcher's PMIx, PMI-1 or MPI library, opened at run time), so --both-names gives
# it the _mpi names too, for the scripts that call them.
#
# Images and scripts call nccl-tests at several paths; --common makes one install answer at
# all of them with symlinks: PREFIX/build itself, /opt/nccl-tests/build, /opt/nccl_tests/build
# (Nebius), /third_party/nccl-tests/build (GKE's gIB images), /workspace/nccl-tests/build, and
# every program in /usr/local/bin (NGC-style images put all_reduce_perf_mpi there); each
# benchmark answers both as all_reduce_perf and as all_reduce_perf_mpi. --destdir
# stages all of it under a folder (an image's build stage), links pointing where things will be.
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
#   --both-names      every benchmark answers under both names, all_reduce_perf and
#                     all_reduce_perf_mpi: the one not installed is a symlink to the other (the
#                     same program: the default build starts under mpirun as the MPI build
#                     does); an _mpi file already there (an MPI build installed with --mpi
#                     beside the default one) is kept
#   --link PREFIX2    PREFIX2/<build-dir> becomes a symlink to the installed folder (repeatable)
#   --bin-links DIR   a symlink in DIR for every installed program and name
#   --common          --both-names, --link for each of /opt/nccl-tests /opt/nccl_tests
#                     /third_party/nccl-tests /workspace/nccl-tests (PREFIX itself left out),
#                     and --bin-links /usr/local/bin
#   --destdir DIR     install under DIR as if DIR were / (PREFIX and the links must be
#                     absolute); links are relative, so they hold both there and once copied
#   --print           print the paths that would be installed, one a line (links as
#                     `LINK -> TARGET`), and change nothing
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
both=0
links=()
bin_links=""
destdir=""
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
    --both-names) both=1; shift ;;
    --link) [ $# -ge 2 ] || die "--link needs a folder"; links+=("$2"); shift 2 ;;
    --link=*) links+=("${1#*=}"); shift ;;
    --bin-links) [ $# -ge 2 ] || die "--bin-links needs a folder"; bin_links="$2"; shift 2 ;;
    --bin-links=*) bin_links="${1#*=}"; shift ;;
    --common)
      both=1
      links+=(/opt/nccl-tests /opt/nccl_tests /third_party/nccl-tests /workspace/nccl-tests)
      bin_links=/usr/local/bin
      shift ;;
    --destdir) [ $# -ge 2 ] || die "--destdir needs a folder"; destdir="$2"; shift 2 ;;
    --destdir=*) destdir="${1#*=}"; shift ;;
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
if [ "$both" = 1 ] && [ -n "$suffix" ] && [ "$suffix" != _mpi ]; then
  die "--both-names works with no suffix or _mpi, not $suffix"
fi
if [ -n "$destdir" ]; then
  for p in "$prefix" "${links[@]}" ${bin_links:+"$bin_links"}; do
    case "$p" in /*) ;; *) die "with --destdir, PREFIX and the links must be absolute: $p" ;; esac
  done
fi

# Final paths (as the image or machine will see them): absolute, without --destdir.
final() { realpath -m -s -- "$1"; }
dest="$(final "${prefix%/}")/$build_dir"
# Where a final path is written now.
here() { printf '%s%s' "${destdir%/}" "$1"; }
# A symlink at final path $1 to final path $2, relative so that it holds under --destdir too.
relink() {
  local at; at="$(here "$1")"
  if [ -e "$at" ] && [ ! -L "$at" ]; then
    die "$at exists and is not a symlink: not replacing it"
  fi
  mkdir -p "$(dirname "$at")"
  rm -f "$at"
  ln -s "$(realpath -m -s --relative-to="$(dirname "$1")" -- "$2")" "$at"
}

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

# Whether a binary is an MPI build (--mpi's check): it names libmpi in its dynamic section
# (NEEDED libmpi.so.40). Every build holds the text libmpi.so.40 (the default one may open the
# launcher's MPI library at run time), so only the NEEDED entry counts: readelf's, else the
# name alone between NULs (.dynstr).
links_libmpi() {
  if command -v readelf >/dev/null 2>&1; then
    readelf -d "$1" 2>/dev/null | grep -q 'NEEDED.*\[libmpi\.so'
  else
    grep -q -a -P '\x00libmpi\.so\.[0-9]+\x00' "$1"
  fi
}

# The other name of each benchmark (--both-names), whichever the build.
other_names=()
if [ "$both" = 1 ]; then
  for b in "${BENCHMARKS[@]}"; do
    if [ "$suffix" = _mpi ]; then other_names+=("${b}_perf"); else other_names+=("${b}_perf_mpi"); fi
  done
fi
# Every folder link: (link, target) final paths, PREFIX's own build folder left out.
link_at=()
for l in "${links[@]}"; do
  at="$(final "${l%/}")/$build_dir"
  [ "$at" = "$dest" ] || link_at+=("$at")
done
names=("${targets[@]}" "${other_names[@]}")

if [ "$print" = 1 ]; then
  for t in "${targets[@]}"; do
    echo "$dest/$t"
  done
  for i in "${!other_names[@]}"; do
    echo "$dest/${other_names[$i]} -> $dest/${targets[$i]}"
  done
  for at in "${link_at[@]}"; do
    echo "$at -> $dest"
  done
  if [ -n "$bin_links" ]; then
    for n in "${names[@]}"; do
      echo "$(final "$bin_links")/$n -> $dest/$n"
    done
  fi
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
    links_libmpi "$from/$s" \
      || die "$from/$s was built without MPI: build with 'cargo build --release$features', or drop --mpi"
  done
fi

mkdir -p "$(here "$dest")"
from_abs="$(cd "$from" && pwd)"
for i in "${!sources[@]}"; do
  src="$from_abs/${sources[$i]}"
  dst="$(here "$dest/${targets[$i]}")"
  rm -f "$dst"
  if [ "$symlink" = 1 ]; then
    ln -s "$src" "$dst"
  else
    cp "$src" "$dst"
    chmod 0755 "$dst"
  fi
done
kept=0
for i in "${!other_names[@]}"; do
  at="$(here "$dest/${other_names[$i]}")"
  if [ -e "$at" ] && [ ! -L "$at" ]; then
    # A program installed under that name (the MPI build, --mpi) stays.
    kept=$((kept + 1))
    continue
  fi
  relink "$dest/${other_names[$i]}" "$dest/${targets[$i]}"
done
for at in "${link_at[@]}"; do
  relink "$at" "$dest"
done
if [ -n "$bin_links" ]; then
  for n in "${names[@]}"; do
    relink "$(final "$bin_links")/$n" "$dest/$n"
  done
fi
extra=""
[ ${#other_names[@]} -eq 0 ] || extra+=", $((${#other_names[@]} - kept)) other names"
[ "$kept" = 0 ] || extra+=" ($kept programs already there kept)"
[ ${#link_at[@]} -eq 0 ] || extra+=", ${#link_at[@]} folder links"
[ -z "$bin_links" ] || extra+=", links in $bin_links"
echo "install-layout: ${#targets[@]} programs in ${destdir:+$destdir:}$dest$extra (add it to PATH, as nccl-tests images do)" >&2
