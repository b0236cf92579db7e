#!/bin/bash
# All-reduce across hosts with mpirun (OpenMPI), one rank per GPU: the way most nccl-tests job
# scripts run, with the same command line.
#
#   HOSTS=node01:8,node02:8 examples/mpirun/all_reduce.sh
#   HOSTS=node01:8,node02:8 examples/mpirun/all_reduce.sh -b 1M -e 16G -f 2    (other sizes)
#
# The ranks meet through mpirun's own wire-up (PMIx, opened at run time from the Open MPI that
# started them; its MPI library where there is no PMIx): the default build needs no setting,
# as nccl-tests built with MPI=1. The MPI build (--features mpi) meets through MPI.
#   NCCL_PERF_RENDEZVOUS=node01:29400 examples/mpirun/all_reduce.sh   (optional: meet over TCP
#   at that address instead, passed to every rank; e.g. where the launcher's PMIx is unusable)
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

MPIRUN=(mpirun -np "$np" -H "$HOSTS" --bind-to none
  -x PATH -x NCCL_DEBUG="${NCCL_DEBUG:-WARN}")
if [ -n "${NCCL_PERF_RENDEZVOUS:-}" ]; then
  MPIRUN+=(-x NCCL_PERF_RENDEZVOUS)
fi
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
