#!/usr/bin/env bash
# First contact with the GPU machine: environment facts and runs without validation.
# usage: ci/gpu-smoke.sh BIN_DIR OUT_DIR
set -u
B=$1; O=$2
export NCCL_NVLS_ENABLE=0
{
  nvidia-smi -L; ldconfig -p | grep -E "libnccl|libnvrtc|libcuda"; uname -r; nproc
} > "$O/env.txt" 2>&1
run() { # name, command...
  local name=$1; shift
  { echo "### $*"; /usr/bin/time -v "$@" 2> >(grep -E "Elapsed|Maximum resident|Exit status" | sed 's/^\s*/# time -v: /' >&2); echo "### rc=$?"; } > "$O/$name.out" 2>&1
}
run ar_sweep_c0 "$B/all_reduce_perf" -b 8 -e 8G -f 2 -c 0
run ag_c0 "$B/all_gather_perf" -b 1M -e 16G -f 2 -c 0
run ar_g2 "$B/all_reduce_perf" -g 2
run ar_help "$B/all_reduce_perf" -h
NCCL_PERF_LIBNCCL=/nonexistent/libnccl.so.2 run ar_nonccl "$B/all_reduce_perf" -c 0
run ar_alltypes_c0 "$B/all_reduce_perf" -d all -o all -b 1M -e 1M -c 0
