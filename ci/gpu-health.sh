#!/usr/bin/env bash
# The GPU check of `--health` (issue 40) on one GPU: the preset with every file it writes
# (-J per section, --health-json, --health-prom), read back by `nccl-perf health`; all eleven
# benchmarks in one launch (--collectives all); and --health on N ranks posing as hosts
# (ci/vcluster.sh, torchrun-style environment bootstrap; correctness only).
# usage: ci/gpu-health.sh DIST OUT   (RANKS, default 4)
set -u
D=$(cd "$1" && pwd); mkdir -p "$2"; O=$(cd "$2" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
RANKS=${RANKS:-4}
export NCCL_NVLS_ENABLE=0
S=$O/summary.txt
: > "$S"
# shellcheck source=ci/gpu-timed.sh
. "$(dirname "$0")/gpu-timed.sh"
mkdir -p "$O/files"
timed health "$D/all_reduce_perf" --health -J "$O/files/check.json" \
  --health-json "$O/files/health.json" --health-prom "$O/files/node.prom"
ls -l "$O/files" >> "$S"
"$D/nccl-perf" health "$O"/files/check.*.json > "$O/health-from-json.out" 2>&1
echo "nccl-perf health (JSON) rc=$?" >> "$S"
"$D/nccl-perf" health "$O/health.out" > "$O/health-from-log.out" 2>&1
echo "nccl-perf health (log) rc=$?" >> "$S"
timed all "$D/all_reduce_perf" --collectives all -b 8 -e 64M -f 4
grep -c "Collective test concluded" "$O/all.out" >> "$S"
grep -h "Out of bounds" "$O/all.out" | sort | uniq -c >> "$S"
timed "p$RANKS" bash "$HERE/vcluster.sh" -n "$RANKS" -l torchrun -- "$D/all_reduce_perf" --health -b 1M -e 16M -f 2
tar czf "$O/files.tar.gz" -C "$O" files && rm -rf "$O/files"
cat "$S"
