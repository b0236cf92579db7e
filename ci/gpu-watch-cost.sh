#!/usr/bin/env bash
# What watching NCCL's network steps costs (issue 49): the hang watch on (the profiler plugin
# loaded; in a job of several nodes NCCL's proxy operations and steps reported to it) against
# off (--hang-timeout 0: no plugin), alternated ROUNDS times, small sizes where a cost would
# show. Two shapes: 4 ranks posing as hosts on one GPU (sockets: the steps are on) and one
# process on one GPU (one node: the plugin is loaded and its mask stays 0).
# Per shape and size, the median out-of-place time of each mode and their ratio, into
# OUT/watch-cost.txt.
# usage: ci/gpu-watch-cost.sh DIST OUT   (ROUNDS, default 3)
set -u
D=$(cd "$1" && pwd); O=$(cd "$2" && pwd); ROUNDS=${ROUNDS:-3}
here=$(cd "$(dirname "$0")" && pwd)
AR="$D/all_reduce_perf"
W=$(mktemp -d); : > "$W/times"
port=$((23000 + $$ % 3000))
for ((r = 1; r <= ROUNDS; r++)); do
  for mode in on off; do
    t=60; [ "$mode" = off ] && t=0
    port=$((port + 1)); d="$W/posing-$mode$r"; mkdir -p "$d"
    timeout -s KILL 200 bash "$here/vcluster.sh" -n 4 -l slurm -p "$port" -d "$d" -- \
      "$AR" -b 8 -e 1M -f 8 -n 300 -w 30 --hang-timeout "$t" > /dev/null 2>&1
    awk -v m="$mode" '/^ +[0-9]+ +[0-9]+ / {print "posing4", m, $1, $6}' "$d/rank0.out" >> "$W/times"
    timeout -s KILL 200 "$AR" -b 8 -e 64K -f 8 -n 3000 -w 100 --hang-timeout "$t" > "$W/one-$mode$r.out" 2>&1
    awk -v m="$mode" '/^ +[0-9]+ +[0-9]+ / {print "one", m, $1, $6}' "$W/one-$mode$r.out" >> "$W/times"
  done
done
python3 - "$W/times" > "$O/watch-cost.txt" <<'EOF'
import sys, statistics
from collections import defaultdict
t = defaultdict(list)
for line in open(sys.argv[1]):
    shape, mode, size, us = line.split()
    t[(shape, int(size), mode)].append(float(us))
print("shape    size      on_us(median)  off_us(median)  on/off   runs")
for shape, size in sorted({(k[0], k[1]) for k in t}):
    on, off = t.get((shape, size, "on"), []), t.get((shape, size, "off"), [])
    if on and off:
        a, b = statistics.median(on), statistics.median(off)
        print(f"{shape:8} {size:8} {a:14.2f} {b:15.2f} {a / b:8.3f}   {len(on)}/{len(off)}")
EOF
cat "$O/watch-cost.txt"
cp "$W/times" "$O/watch-cost-raw.txt"
