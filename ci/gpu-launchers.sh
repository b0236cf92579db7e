#!/usr/bin/env bash
# The GPU check of issue 43 (one binary under every launcher): the DEFAULT build (no MPI linked)
# under Open MPI's mpirun on ranks posing as hosts (ci/vcluster.sh), every benchmark beside
# nccl-tests 2.19.6 (built with MPI=1), then all eleven in one launch (--collectives all), and
# 8 ranks. Correctness and formation only (loopback sockets: no bandwidth).
# usage: ci/gpu-launchers.sh DIST OUT NCCL_TESTS_BUILD   (N: ranks, default 4)
set -u
D=$(cd "$1" && pwd); mkdir -p "$2"; O=$(cd "$2" && pwd); NT=$(cd "$3" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
N=${N:-4}
ARGS=(-b 8 -e 1M -f 4 -g 1)
S=$O/summary.txt
{ ldd "$D/all_reduce_perf"; mpirun --version | head -1; ldconfig -p | grep -c libpmix; } > "$O/machine.txt" 2>&1
: > "$S"
run() {
  local name=$1; shift
  local t0; t0=$(date +%s.%N)
  timeout 300 "$@" > "$O/$name.out" 2>&1
  local rc=$?
  local wrong; wrong=$(grep -h "Out of bounds" "$O/$name.out" | sort | uniq -c | tr -s ' ' | tr '\n' ';')
  printf '%s rc=%s %ss %s\n' "$name" "$rc" "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')" "$wrong" >> "$S"
}
for c in all_reduce all_gather broadcast reduce reduce_scatter alltoall alltoallv scatter gather sendrecv hypercube; do
  run "ours.$c" bash "$HERE/vcluster.sh" -n "$N" -l mpirun -- "$D/${c}_perf" "${ARGS[@]}"
  run "theirs.$c" bash "$HERE/vcluster.sh" -n "$N" -l mpirun -- "$NT/${c}_perf" "${ARGS[@]}"
done
run ours.all-in-one bash "$HERE/vcluster.sh" -n "$N" -l mpirun -- "$D/all_reduce_perf" --collectives all "${ARGS[@]}"
run ours.n8 bash "$HERE/vcluster.sh" -n 8 -l mpirun -- "$D/all_reduce_perf" "${ARGS[@]}"
run theirs.n8 bash "$HERE/vcluster.sh" -n 8 -l mpirun -- "$NT/all_reduce_perf" "${ARGS[@]}"
grep -h "Bootstrap\|wire-up\|bootstrap:" "$O"/ours.*.out | sort | uniq -c | head -5 >> "$S"
cat "$S"
