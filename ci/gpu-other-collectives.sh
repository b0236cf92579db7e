#!/usr/bin/env bash
# The GPU checks of issue 3 (the nine other binaries), in one call: the reference commands side
# by side, every datatype (and op) of every binary, roots, alltoallv's environment, and — on a
# machine with several GPUs — the multi-rank paths (grouped send/receive, hypercube rounds).
# usage: ci/gpu-other-collectives.sh DIST OUT   (DIST holds the binaries, ref/ and side_by_side.py)
set -u
D=$(cd "$1" && pwd); O=$2
export NCCL_NVLS_ENABLE=0
bash "$(dirname "$0")/gpu-check.sh" "$D" "$O" broadcast_small reduce_small reduce_scatter_small \
  alltoall_small alltoallv_small scatter_small gather_small sendrecv_small hypercube_small \
  ar_root_all > /dev/null 2>&1
run() { # name, command... → OUT/name.out with the exit status
  local name=$1; shift
  { echo "### $*"; "$@"; echo "### rc=$?"; } > "$O/$name.out" 2>&1
}
run ar_all_all "$D/all_reduce_perf" -d all -o all -b 1M -e 1M
for b in broadcast reduce reduce_scatter alltoall alltoallv scatter gather sendrecv hypercube all_gather; do
  run "${b}_dall" "$D/${b}_perf" -d all -b 1M -e 1M
done
for b in reduce reduce_scatter sendrecv; do
  run "${b}_dall_oall" "$D/${b}_perf" -d all -o all -b 1M -e 1M
done
run reduce_r1 "$D/reduce_perf" -r 1 -b 1M -e 1M
M="$O/matrix.txt"; printf '4096 1024\n1024 4096\n' > "$M"
NCCL_TESTS_ALLTOALLV_MATRIX_FILE="$M" run a2av_matrix "$D/alltoallv_perf" -b 1M -e 1M
NCCL_TESTS_ALLTOALLV_SPREAD=0.5 run a2av_spread "$D/alltoallv_perf" -b 8 -e 64M -f 4
n=$(nvidia-smi -L | wc -l)
if [ "$n" -ge 2 ]; then
  for b in broadcast reduce reduce_scatter alltoall alltoallv scatter gather sendrecv hypercube; do
    run "${b}_g$n" "$D/${b}_perf" -g "$n" -b 8 -e 64M -f 4 -r -1
  done
  NCCL_TESTS_ALLTOALLV_MATRIX_FILE="$M" run a2av_matrix_g2 "$D/alltoallv_perf" -g 2 -b 1M -e 1M
  run hypercube_g3 "$D/hypercube_perf" -g 3 -b 1M -e 1M
fi
grep -H '### rc=' "$O"/*.out
