#!/usr/bin/env bash
# Times the TCP rendezvous of N processes on this machine (`--dry-run`, torchrun-style
# environment on 127.0.0.1): wall time from the first start to the last exit, median of RUNS.
# Usage: ci/rendezvous-scale.sh BIN [N] [RUNS]. Prints one line per run and the median.
# RDV_KEY=<secret> runs a keyed launch (every process stretches the secret once).
set -euo pipefail
bin=${1:?usage: rendezvous-scale.sh BIN [N] [RUNS]}
n=${2:-256}
runs=${3:-3}
times=()
for run in $(seq 1 "$runs"); do
  port=$((20000 + RANDOM % 12000))  # below the ephemeral range
  start=$(date +%s%N)
  pids=()
  for r in $(seq 0 $((n - 1))); do
    env -i PATH="$PATH" RANK="$r" WORLD_SIZE="$n" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
      NCCL_PERF_BOOTSTRAP_TIMEOUT=60 CUDA_VISIBLE_DEVICES=0 NCCL_TESTS_DEVICE=0 \
      ${RDV_KEY:+NCCL_PERF_RENDEZVOUS_KEY="$RDV_KEY"} \
      "$bin" --dry-run -b 1M -e 1M >/dev/null 2>"/tmp/rdv-scale.$r.err" &
    pids+=($!)
  done
  fails=0
  for p in "${pids[@]}"; do wait "$p" || fails=$((fails + 1)); done
  end=$(date +%s%N)
  # Seconds to the millisecond, without bc (not on every machine).
  t=$(awk -v ns=$((end - start)) 'BEGIN { printf "%.3f", ns / 1e9 }')
  echo "run $run: $n processes in $t s ($fails failed)"
  [ "$fails" -eq 0 ] || { head -3 /tmp/rdv-scale.0.err; exit 1; }
  times+=("$t")
done
printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print "median: " a[int((NR+1)/2)] " s"}'
