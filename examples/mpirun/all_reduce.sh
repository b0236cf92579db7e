#!/bin/bash
# All-reduce across hosts with mpirun (OpenMPI), one rank per GPU: the way most nccl-tests job
# scripts run, with the same command line.
#
#   HOSTS=node01:8,node02:8 examples/mpirun/all_reduce.sh
#   HOSTS=node01:8,node02:8 examples/mpirun/all_reduce.sh -b 1M -e 16G -f 2    (other sizes)
#
# The MPI build (--features mpi, the Docker image's) meets through MPI. A build without MPI
# meets through TCP at the address in NCCL_PERF_RENDEZVOUS; it is set below from the first host,
# so this script works with either build.
set -euo pipefail

HOSTS="${HOSTS:-localhost:8}"                # host:slots,... (or use --hostfile)
NCCL_TESTS_BUILD="${NCCL_TESTS_BUILD:-/opt/nccl-tests/build}"
BENCH="${BENCH:-all_reduce_perf}"
if [ $# -gt 0 ]; then
  ARGS=("$@")
else
  ARGS=(-b 8 -e 8G -f 2 -g 1)
fi

# Number of ranks: the sum of the slots.
np=0
IFS=, read -r -a entries <<< "$HOSTS"
for entry in "${entries[@]}"; do
  slots="${entry##*:}"
  [ "$slots" != "$entry" ] || slots=1
  np=$((np + slots))
done
first_host="${entries[0]%%:*}"

MPIRUN=(mpirun -np "$np" -H "$HOSTS" --bind-to none
  -x PATH -x NCCL_DEBUG="${NCCL_DEBUG:-WARN}"
  -x NCCL_PERF_RENDEZVOUS="${NCCL_PERF_RENDEZVOUS:-$first_host:29400}")
if [ -n "${LD_LIBRARY_PATH:-}" ]; then
  MPIRUN+=(-x LD_LIBRARY_PATH)
fi
if [ "$(id -u)" = 0 ]; then
  MPIRUN+=(--allow-run-as-root)
fi

# 1. Check the launch (one line per rank: host, local rank, GPU) without touching a GPU.
"${MPIRUN[@]}" "$NCCL_TESTS_BUILD/$BENCH" "${ARGS[@]}" --dry-run
# 2. The benchmark; world rank 0 prints the table.
"${MPIRUN[@]}" "$NCCL_TESTS_BUILD/$BENCH" "${ARGS[@]}"
