#!/usr/bin/env bash
# The GPU checks of issue 17 (harness overhead), one H200:
#  1. the overhead bench (bare NCCL loop vs our timed loop, every collective), if BENCH is given;
#  2. ours and nccl-tests 2.19.6 alternating, PAIRS pairs per collective, same command
#     (small sizes, -n 100), summarised by ci/alt-pairs.py (median and spread of ours − theirs).
# usage: ci/gpu-issue17.sh DIST OUT NCCL_TESTS_BUILD [BENCH]
#   PAIRS (default 5), COLLS (default: sendrecv all_reduce all_gather reduce_scatter broadcast)
set -u
D=$(cd "$1" && pwd); mkdir -p "$2"; O=$(cd "$2" && pwd)/issue17; NT=$3; BENCH=${4:-}
rm -rf "$O"; mkdir -p "$O/alt"
PAIRS=${PAIRS:-5}
COLLS=${COLLS:-sendrecv all_reduce all_gather reduce_scatter broadcast}
ARGS=(-b 8 -e 64K -f 2 -w 20 -n 100 -g 1)
if [ -n "$BENCH" ]; then
  "$BENCH" > "$O/bench.txt" 2> "$O/bench.err"
  echo "bench rc=$?" >> "$O/bench.txt"
fi
for c in $COLLS; do
  for ((i = 1; i <= PAIRS; i++)); do
    "$D/${c}_perf" "${ARGS[@]}" > "$O/alt/$c.ours.$i" 2>&1
    "$NT/${c}_perf" "${ARGS[@]}" > "$O/alt/$c.theirs.$i" 2>&1
  done
done
python3 "$(dirname "$0")/alt-pairs.py" "$O/alt" > "$O/alt-summary.txt" 2>&1
cat "$O/alt-summary.txt"
[ -f "$O/bench.txt" ] && cat "$O/bench.txt"
