#!/usr/bin/env bash
# The GPU checks of the core issue, in one call: kernel/mirror equivalence, the reference
# commands side by side, error paths, and the harness-overhead benchmark.
# usage: ci/gpu-issue2.sh DIST OUT
set -u
D=$(cd "$1" && pwd); O=$2
export NCCL_NVLS_ENABLE=0
"$D/gpu_generator" --nocapture > "$O/gpu_generator.txt" 2>&1; echo "gpu_generator rc=$?" >> "$O/gpu_generator.txt"
bash "$(dirname "$0")/gpu-check.sh" "$D" "$O" ar_sweep ag_seed ar_json ar_step ar_iters ag_dtypes ar_alltypes ar_g2 > /dev/null 2>&1
{ "$D/all_reduce_perf" -b 8 -e 8 -c 0; echo "rc=$?"
  NCCL_PERF_LIBNCCL=/nonexistent/libnccl.so.2 "$D/all_reduce_perf" -b 8 -e 8; echo "rc=$?"
  NCCL_TESTS_DEVICE=3 "$D/all_reduce_perf" -b 8 -e 8; echo "rc=$?"
} > "$O/errors.txt" 2>&1
"$D/overhead" > "$O/overhead.txt" 2>&1
