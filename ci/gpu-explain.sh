#!/usr/bin/env bash
# GPU check of --explain (issue 26) on the one-GPU machine.
# usage: ci/gpu-explain.sh DIST OUT [BENCH]
#   DIST   our release binaries (*_perf, nccl-perf); BENCH: the overhead bench binary
#          (cargo bench --no-run prints its path), optional
#   OUT    OUT/explain/: every log, JSON and CSV, and summary.txt (one line per case)
# Cases:
#   one-gpu   all_reduce, all_gather, reduce_scatter, broadcast, alltoall, sendrecv on one GPU
#             with --explain, -J JSON and CSV: one rank (no algorithm to show; the ceiling is a
#             device-local copy)
#   vcluster  the same six with 4 ranks posing as hosts (ci/vcluster.sh, environment bootstrap):
#             NCCL's socket transport named, algorithms and protocols changing with size, the
#             loopback ceiling said not to be a hardware figure
#   pairs     all_reduce_perf with and without --explain alternating, 5 pairs, -b 8 -e 1G -f 4:
#             the tables' rows side by side (the timed loops must not move)
#   bench     the overhead bench without and with --explain (plugins loaded, disarmed)
set -u
[ $# -ge 2 ] || { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
D=$(cd "$1" && pwd) || exit 2
mkdir -p "$2/explain"; O=$(cd "$2/explain" && pwd)
BENCH=${3:-}
HERE=$(cd "$(dirname "$0")" && pwd)
COLLS=(all_reduce all_gather reduce_scatter broadcast alltoall sendrecv)
S="$O/summary.txt"; : > "$S"
say() { echo "$*" | tee -a "$S"; }

# one-gpu
for c in "${COLLS[@]}"; do
  log="$O/$c.one-gpu.txt"
  "$D/${c}_perf" -b 8 -e 1G -f 8 -g 1 --explain -J "$O/$c.one-gpu.json" > "$log" 2>&1
  rc=$?
  "$D/${c}_perf" -b 8 -e 1G -f 8 -g 1 --explain -J "$O/$c.one-gpu.csv" > /dev/null 2>&1
  n=$(grep -c '^# ' "$log")
  say "one-gpu $c: rc=$rc, $n comment lines; verdict: $(grep -m1 '^# verdict' "$log")"
done

# vcluster: 4 ranks posing as hosts over loopback sockets
for c in "${COLLS[@]}"; do
  log="$O/$c.vcluster4.txt"
  bash "$HERE/vcluster.sh" -n 4 -l slurm -d "$O/$c.vcluster4.ranks" -- \
    "$D/${c}_perf" -b 8 -e 64M -f 8 --explain -J "$O/$c.vcluster4.json" > "$log" 2>&1
  rc=$?
  say "vcluster4 $c: rc=$rc; path: $(grep -o 'network: [a-zA-Z/ ]*' "$log" | sort -u | tr '\n' ';') verdict: $(grep -m1 '^# verdict' "$log")"
done

# pairs: with and without --explain, alternating
for i in 1 2 3 4 5; do
  order="off on"
  ((i % 2)) || order="on off"
  for side in $order; do
    extra=()
    [ "$side" = on ] && extra=(--explain)
    "$D/all_reduce_perf" -b 8 -e 1G -f 4 -g 1 "${extra[@]+"${extra[@]}"}" > "$O/pair.$side.$i.txt" 2>&1
  done
done
python3 - "$O" >> "$S" <<'PY'
import glob, re, statistics, sys
o = sys.argv[1]
rows = {}
for side in ("off", "on"):
    for f in sorted(glob.glob(f"{o}/pair.{side}.*.txt")):
        for line in open(f):
            p = line.split()
            if len(p) >= 12 and p[0].isdigit():
                rows.setdefault((int(p[0]), side), []).append((float(p[5]), float(p[9])))
print("pairs: size, median out-of-place time us off/on, median in-place time us off/on")
for size in sorted({k[0] for k in rows}):
    off, on = rows.get((size, "off"), []), rows.get((size, "on"), [])
    if off and on:
        med = lambda v, i: statistics.median(x[i] for x in v)
        print(f"  {size:>12} {med(off,0):10.2f} {med(on,0):10.2f} {med(off,1):10.2f} {med(on,1):10.2f}")
PY

# bench: the overhead bench without and with the plugins loaded
if [ -n "$BENCH" ]; then
  "$BENCH" --quick all_reduce sendrecv > "$O/bench.off.txt" 2>&1
  "$BENCH" --quick all_reduce sendrecv --explain > "$O/bench.on.txt" 2>&1
  say "bench: $(wc -l < "$O/bench.off.txt") lines off, $(wc -l < "$O/bench.on.txt") lines on"
fi
cat "$S"
