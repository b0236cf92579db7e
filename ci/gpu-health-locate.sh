#!/usr/bin/env bash
# `--health --locate` on 4 ranks posing as hosts on one GPU (ci/vcluster.sh, environment
# bootstrap). Ranks posing as hosts get no expected figure (explain calls their busbw loopback
# sockets), so a build with the `test-hooks` feature is told which collective to judge slow
# (NCCL_PERF_TEST_SLOW=all_gather): locate must then run once, on all_gather, and the suspects it
# names go into the JSON summary. Rank SLOW_RANK (default 2) runs pinned to a core kept busy, so
# that locate has someone to name. Launch logic only: the times go through host sockets.
#
# usage: ci/gpu-health-locate.sh HOOKS_DIST OUT   (HOOKS_DIST: release binaries built with
#   --features test-hooks)
set -u
D=$(cd "$1" && pwd); mkdir -p "$2"; O=$(cd "$2" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
SLOW_RANK=${SLOW_RANK:-2}
CORE=${CORE:-3}
S=$O/summary.txt
{ nvidia-smi -L; echo "SLOW_RANK=$SLOW_RANK CORE=$CORE"; } > "$S"
WRAP=$O/slow.sh
cat > "$WRAP" <<'WRAPPER'
#!/bin/sh
if [ "${VCLUSTER_RANK:-}" = "$SLOW_RANK" ]; then exec taskset -c "$CORE" "$@"; fi
exec "$@"
WRAPPER
chmod +x "$WRAP"
# shellcheck source=ci/locate-lib.sh
. "$HERE/locate-lib.sh"
trap busy_stop EXIT
busy_start "$CORE"
mkdir -p "$O/ranks"
timeout -k 5 400 bash "$HERE/vcluster.sh" -n 4 -l torchrun -d "$O/ranks" \
  -e SLOW_RANK="$SLOW_RANK" -e CORE="$CORE" -e NCCL_PERF_TEST_SLOW=all_gather \
  -- "$WRAP" "$D/all_reduce_perf" \
  --health --collectives all_reduce,all_gather,sendrecv -b 16M -e 16M -n 5 -w 1 \
  --health-json "$O/health.json" \
  --locate quick --locate-size 16M --locate-iters 10 --locate-deadline 30 \
  > "$O/health.out" 2> "$O/health.err"
rc=$?
busy_stop
{
  echo "rc=$rc"
  grep -E '^# (health|locate verdict|locate suspect|locate:)' "$O/health.out"
  echo "locate header lines: $(grep -c '^# locate: schedule' "$O/health.out")"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("json:", [(c["collective"], c["verdict"], c.get("suspects")) for c in d["collectives"]])' "$O/health.json" 2>&1
} >> "$S"
cat "$S"
