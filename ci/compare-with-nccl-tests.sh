#!/usr/bin/env bash
# Runs an installed nccl-tests binary and ours with the same arguments, one after the other on
# the same GPUs, and prints `nccl-perf compare` of the two (nccl-tests is the base). Nothing is
# downloaded or built: both builds must already be there.
#
# usage: ci/compare-with-nccl-tests.sh [options] NCCL_TESTS_DIR [BENCHMARK ARGS...]
#   NCCL_TESTS_DIR       folder holding nccl-tests' binaries (or its build/ subfolder)
#   -t, --test NAME      collective to run, with or without _perf (default: all_reduce)
#   -B, --bin DIR        folder holding our *_perf binaries and nccl-perf
#                        (default: $NCCL_PERF_BIN, else target/release, else PATH)
#   -o, --out DIR        keep both logs there (default: a temporary folder, removed at the end)
#   -L, --launcher CMD   run both through this launcher, e.g. "mpirun -np 8" (word-split)
#   -- COMPARE ARGS      everything after a second `--` goes to `nccl-perf compare`,
#                        e.g. -- --max-regression 5 --min-size 1M
# example: ci/compare-with-nccl-tests.sh /opt/nccl-tests -t all_gather -b 1M -e 8G -f 2 -g 8
# exit: compare's code (0 ok, 1 regression beyond --max-regression, 2 error), or 2 when a
#       binary is missing, or the benchmark's own exit code when one of them fails.
set -uo pipefail

die() { echo "compare-with-nccl-tests: $*" >&2; exit 2; }

test_name=all_reduce
bin_dir=${NCCL_PERF_BIN:-}
out_dir=
launcher=
while [ $# -gt 0 ]; do
  case $1 in
    -t|--test) [ $# -ge 2 ] || die "$1 needs a value"; test_name=$2; shift 2 ;;
    -B|--bin) [ $# -ge 2 ] || die "$1 needs a value"; bin_dir=$2; shift 2 ;;
    -o|--out) [ $# -ge 2 ] || die "$1 needs a value"; out_dir=$2; shift 2 ;;
    -L|--launcher) [ $# -ge 2 ] || die "$1 needs a value"; launcher=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || die "usage: $0 [options] NCCL_TESTS_DIR [BENCHMARK ARGS...] (see --help)"
nccl_tests_dir=$1; shift
test_name=${test_name%_perf}_perf

bench_args=()
compare_args=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then shift; compare_args=("$@"); break; fi
  bench_args+=("$1"); shift
done

theirs=
for candidate in "$nccl_tests_dir/$test_name" "$nccl_tests_dir/build/$test_name"; do
  if [ -x "$candidate" ]; then theirs=$candidate; break; fi
done
[ -n "$theirs" ] || die "no executable $test_name in $nccl_tests_dir or $nccl_tests_dir/build"

if [ -z "$bin_dir" ]; then
  repo=$(cd "$(dirname "$0")/.." && pwd)
  if [ -x "$repo/target/release/$test_name" ]; then bin_dir=$repo/target/release; fi
fi
if [ -n "$bin_dir" ]; then
  ours=$bin_dir/$test_name
  tool=$bin_dir/nccl-perf
else
  ours=$(command -v "$test_name" || true)
  tool=$(command -v nccl-perf || true)
fi
[ -n "$ours" ] && [ -x "$ours" ] || die "our $test_name not found (build it, or pass --bin DIR)"
[ -n "$tool" ] && [ -x "$tool" ] || die "nccl-perf not found (build it, or pass --bin DIR)"
[ "$(cd "$(dirname "$theirs")" && pwd)" != "$(cd "$(dirname "$ours")" && pwd)" ] \
  || die "$theirs and $ours are in the same folder: pass the nccl-tests folder and --bin apart"

if [ -z "$out_dir" ]; then
  out_dir=$(mktemp -d)
  trap 'rm -rf "$out_dir"' EXIT
fi
mkdir -p "$out_dir" || die "cannot create $out_dir"

# shellcheck disable=SC2206  # the launcher is deliberately word-split
launch=($launcher)
run_one() {  # label binary log
  echo "# running $1: ${launch[*]} $2 ${bench_args[*]}" >&2
  "${launch[@]}" "$2" "${bench_args[@]}" > "$3" 2>&1
  local rc=$?
  if [ $rc -ne 0 ]; then
    echo "compare-with-nccl-tests: $1 exited with $rc; its log: $3" >&2
    tail -5 "$3" >&2
  fi
  return $rc
}

run_one nccl-tests "$theirs" "$out_dir/nccl-tests.log" || exit $?
run_one nccl-perf "$ours" "$out_dir/nccl-perf.log" || exit $?
"$tool" compare "$out_dir/nccl-tests.log" "$out_dir/nccl-perf.log" "${compare_args[@]}"
