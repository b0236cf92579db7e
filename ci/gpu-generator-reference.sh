#!/usr/bin/env bash
# The GPU checks of the core issue, in one call: kernel/mirror equivalence, the reference
# commands side by side, error paths, and a start-up profile (the overhead benchmark runs in
# gpu-timing-options.sh).
# usage: ci/gpu-generator-reference.sh DIST OUT
set -u
D=$(cd "$1" && pwd); O=$2
export NCCL_NVLS_ENABLE=0
"$D/gpu_generator" --nocapture > "$O/gpu_generator.txt" 2>&1; echo "gpu_generator rc=$?" >> "$O/gpu_generator.txt"
bash "$(dirname "$0")/gpu-check.sh" "$D" "$O" ar_sweep ag_seed ar_json ar_step ar_iters ag_dtypes ar_alltypes ar_g2 > /dev/null 2>&1
{ "$D/all_reduce_perf" -b 8 -e 8 -c 0; echo "rc=$?"
  NCCL_PERF_LIBNCCL=/nonexistent/libnccl.so.2 "$D/all_reduce_perf" -b 8 -e 8; echo "rc=$?"
  NCCL_TESTS_DEVICE=3 "$D/all_reduce_perf" -b 8 -e 8; echo "rc=$?"
} > "$O/errors.txt" 2>&1
# Start-up profile of the ar_sweep command (phase times on stderr) and its wall time / peak RSS.
NCCL_PERF_TRACE=1 /usr/bin/time -v "$D/all_reduce_perf" -b 8 -e 8G -f 2 > "$O/ar_sweep_trace.out" 2>&1
