#!/usr/bin/env bash
# Issue 42: a user's own profiler plugin, left in place by --explain, keeps working. Runs
# all_reduce_perf on 2 ranks posing as hosts on the one GPU (ci/vcluster.sh: a one-rank
# communicator makes NCCL copy locally, with no profiler events at all) with
# NCCL_PROFILER_PLUGIN naming the user's library (built
# elsewhere, e.g. NCCL's ext-profiler/example for the machine's NCCL) and its dump variables,
# with and without --explain, and nccl-tests' program the same way when NT_BUILD is given.
# Per run in OUT/user-profiler.txt: exit code, the capture line explain printed, how many dump
# files the plugin wrote and how many collective events they hold.
# USER_PROFILER_MASK: the example plugin's event mask (default 770: group API, collective API and
# collective events, which the v5 example needs to print collectives).
# usage: ci/gpu-user-profiler.sh DIST PROFILER_LIB OUT [NT_BUILD]
set -u
D=$(cd "$1" && pwd); P=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); mkdir -p "$3"; O=$(cd "$3" && pwd)
NT=${4:-}
R=$O/user-profiler.txt
: > "$R"
HERE=$(cd "$(dirname "$0")" && pwd)
run() { # NAME LAUNCHER PROGRAM ARGS...
  local name=$1 launcher=$2; shift 2
  local dump=$O/dump.$name
  mkdir -p "$dump"
  timeout 120 bash "$HERE/vcluster.sh" -n 2 -l "$launcher" -e NCCL_PROFILER_PLUGIN="$P" \
    -e NCCL_PROFILE_EVENT_MASK="${USER_PROFILER_MASK:-770}" -e NCCL_PROFILE_DUMP_FILE="$dump/prof" \
    -- "$@" > "$O/$name.out" 2>&1
  local rc=$?
  local files events capture
  files=$(find "$dump" -name 'prof_*.json' | wc -l)
  events=$(cat "$dump"/prof_*.json 2> /dev/null | grep -c '"cat": *"COLL"')
  capture=$(grep -m1 -i 'profiler' "$O/$name.out" | cut -c1-200)
  echo "$name: rc=$rc dump-files=$files coll-events=$events explain-line=${capture:-none}" >> "$R"
}
run ours torchrun "$D/all_reduce_perf" -b 8 -e 1M -f 4 -w 1 -n 2
run ours-explain torchrun "$D/all_reduce_perf" -b 8 -e 1M -f 4 -w 1 -n 2 --explain
if [ -n "$NT" ]; then
  run nccl-tests mpirun "$NT/all_reduce_perf" -b 8 -e 1M -f 4 -w 1 -n 2
fi
cat "$R"
