#!/usr/bin/env bash
# Communicator creation from one NCCL id (ncclCommInitRank) against several
# (ncclCommInitRankScalable, NCCL_PERF_INIT_ROOTS=K) on N ranks posing as hosts on one GPU
# (ci/vcluster.sh, environment bootstrap), alternating, ROUNDS rounds. Per run: the slowest
# rank's time from "devices discovered" (the ids shared) to "communicators created"
# (NCCL_PERF_TRACE), and rank 0's own NCCL line "Init timings" (NCCL_DEBUG=INFO), which names
# the entry point NCCL ran. Launch cost only: the ranks share one GPU and talk over loopback.
#
# usage: ci/gpu-init-roots.sh DIST OUT      (N default 8, ROOTS default "1 2 4 8", ROUNDS 3)
set -u
D=$(cd "$1" && pwd); mkdir -p "$2"; O=$(cd "$2" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
N=${N:-8}
ROUNDS=${ROUNDS:-3}
read -r -a ROOTS <<< "${ROOTS:-1 2 4 8}"
S=$O/summary.txt
{ nvidia-smi -L; echo "N=$N ROUNDS=$ROUNDS ROOTS=${ROOTS[*]}"; } > "$S"
for ((i = 1; i <= ROUNDS; i++)); do
  # Turn the order each round so that no setting always runs first.
  shift_by=$(( (i - 1) % ${#ROOTS[@]} ))
  order=("${ROOTS[@]:shift_by}" "${ROOTS[@]:0:shift_by}")
  for k in "${order[@]}"; do
    dir=$O/r$i.roots$k
    mkdir -p "$dir"
    bash "$HERE/vcluster.sh" -n "$N" -l torchrun -d "$dir" \
      -e NCCL_PERF_INIT_ROOTS="$k" -e NCCL_PERF_TRACE=1 -e NCCL_DEBUG=INFO -e NCCL_DEBUG_SUBSYS=INIT \
      -- "$D/all_reduce_perf" -b 8 -e 8 -n 1 -w 0 > "$dir/stdout" 2> "$dir/stderr"
    rc=$?
    # The slowest rank's creation time.
    slowest=$(for f in "$dir"/rank*.err; do
      awk '/nccl-perf trace:.*devices discovered/ {a=$3} /nccl-perf trace:.*communicators created/ {b=$3} END {if (a != "" && b != "") printf "%.3f\n", b - a}' "$f"
    done | sort -n | tail -1)
    ids=$(grep -ho 'communicators created ([0-9]* NCCL ids)' "$dir"/rank0.err | head -1)
    timing=$(grep -h 'Init timings' "$dir"/rank0.out "$dir"/rank0.err | head -1 | sed 's/.*Init timings - //')
    echo "r$i roots=$k rc=$rc create_s=${slowest:-?} [$ids] nccl: ${timing:-none}" >> "$S"
  done
done
cat "$S"
