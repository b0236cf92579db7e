#!/usr/bin/env bash
# The GPU checks of issue 17 (harness overhead), one H200:
#  1. the overhead bench (bare NCCL loop vs our timed loop, every collective), if BENCH is given;
#  2. ours and nccl-tests 2.19.6 alternating, PAIRS pairs per collective, same command
#     (small sizes, -n 100), summarised by ci/alt-pairs.py (median and spread of ours − theirs).
# usage: ci/gpu-overhead.sh DIST OUT NCCL_TESTS_BUILD [BENCH]
#   PAIRS (default 5), COLLS (default: sendrecv all_reduce all_gather reduce_scatter broadcast),
#   PIN: CPU list both programs run on (taskset -c PIN), e.g. 4-7; whole runs of either program
#   otherwise land in one of two time levels (about 5.5 or 7 us out of place on one H200), which
#   swamps a pair's difference. The CPUs and NUMA layout are written to OUT/issue17/machine.txt.
#   PIN_EACH: a list of CPUs ("1 5 9 13"); pair i runs both programs on the i-th alone, so that
#   the two sides of a pair share whatever that CPU gives (PAIRS becomes the list's length).
set -u
D=$(cd "$1" && pwd); mkdir -p "$2"; O=$(cd "$2" && pwd)/issue17; NT=$3; BENCH=${4:-}
rm -rf "$O"; mkdir -p "$O/alt"
PAIRS=${PAIRS:-5}
COLLS=${COLLS:-sendrecv all_reduce all_gather reduce_scatter broadcast}
ARGS=(-b 8 -e 64K -f 2 -w 20 -n 100 -g 1)
PIN=${PIN:-}
read -r -a EACH <<< "${PIN_EACH:-}"
[ "${#EACH[@]}" -gt 0 ] && PAIRS=${#EACH[@]}
RUN=()
[ -n "$PIN" ] && RUN=(taskset -c "$PIN")
{ lscpu; nvidia-smi topo -m; echo "PIN=${PIN:-none} PIN_EACH=${PIN_EACH:-none} PAIRS=$PAIRS COLLS=$COLLS"; } > "$O/machine.txt" 2>&1
if [ -n "$BENCH" ]; then
  "$BENCH" > "$O/bench.txt" 2> "$O/bench.err"
  echo "bench rc=$?" >> "$O/bench.txt"
fi
for c in $COLLS; do
  for ((i = 1; i <= PAIRS; i++)); do
    # Which program goes first alternates from pair to pair.
    [ "${#EACH[@]}" -gt 0 ] && RUN=(taskset -c "${EACH[i - 1]}")
    order="ours theirs"
    ((i % 2)) || order="theirs ours"
    for side in $order; do
      if [ "$side" = ours ]; then bin=$D/${c}_perf; else bin=$NT/${c}_perf; fi
      ${RUN[@]+"${RUN[@]}"} "$bin" "${ARGS[@]}" > "$O/alt/$c.$side.$i" 2>&1
    done
  done
done
python3 "$(dirname "$0")/alt-pairs.py" "$O/alt" > "$O/alt-summary.txt" 2>&1
cat "$O/alt-summary.txt"
if [ -f "$O/bench.txt" ]; then cat "$O/bench.txt"; fi
