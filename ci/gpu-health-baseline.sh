#!/usr/bin/env bash
# A site baseline on one GPU, on 4 ranks posing as hosts (ci/vcluster.sh, environment
# bootstrap): three healthy `--health` runs make a baseline (`nccl-perf baseline`), a fourth
# healthy run is judged against it (`--health --baseline`: every collective ok, exit 0), then a
# run whose rank SLOW_RANK (default 2) has its network data sends delayed by ci/hang-shim.c
# (HANGSHIM_DELAY_US, default 3000) must be judged slow against the same baseline, with
# `--locate quick` naming that rank's node (vnode2; exit 9: a suspect named, over the check's 7).
# `nccl-perf health --baseline` on each run's -J files must give the same verdicts and codes
# (0 and 7). Last, rank SLOW_RANK's data corrupted (NCCL_PERF_CORRUPT, a test-hooks build):
# wrong, exit 7, with that rank and node named. Loopback sockets: launch logic and verdicts only, not a hardware figure.
#
# usage: ci/gpu-health-baseline.sh DIST OUT   (DIST: release binaries, nccl-perf among them)
set -u
D=$(cd "$1" && pwd); mkdir -p "$2"; O=$(cd "$2" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
SLOW_RANK=${SLOW_RANK:-2}
DELAY_US=${DELAY_US:-3000}
N=${N:-4}
SIZES=(-b 1M -e 4M -f 2 -n 10 -w 2)
S=$O/summary.txt
{ nvidia-smi -L; date -u; echo "N=$N SLOW_RANK=$SLOW_RANK DELAY_US=$DELAY_US sizes: ${SIZES[*]}"; } > "$S"
gcc -shared -fPIC -O2 -o "$O/hang-shim.so" "$HERE/hang-shim.c" -ldl || echo "FAIL: gcc hang-shim.so" >> "$S"
fail() { echo "FAIL: $*" >> "$S"; }

# run NAME [vcluster options --] [benchmark options...]: rank 0's stdout in NAME.out, the
# ranks' logs in NAME.ranks/, the exit code in NAME.rc, -J files NAME.<collective>.json.
run() {
  local name=$1; shift
  local vc=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do vc+=("$1"); shift; done
  [ "${1:-}" = "--" ] && shift
  mkdir -p "$O/$name.ranks"
  local t0; t0=$(date +%s%N)
  timeout -k 5 500 bash "$HERE/vcluster.sh" -n "$N" -l torchrun -d "$O/$name.ranks" "${vc[@]}" \
    -- "$D/all_reduce_perf" --health "${SIZES[@]}" -J "$O/$name.json" \
    --health-json "$O/$name.health.json" --health-prom "$O/$name.prom" "$@" \
    > "$O/$name.out" 2> "$O/$name.err"
  local rc=$?
  echo "$rc" > "$O/$name.rc"
  { echo "== $name: rc=$rc ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"; grep '^# health' "$O/$name.out"; } >> "$S"
  return 0
}

for i in 1 2 3; do run "good$i" -- --health-allow-unjudged; done
"$D/nccl-perf" baseline "$O"/good1.out "$O"/good2.out "$O"/good3.out -o "$O/site.baseline" 2>> "$S" \
  || fail "nccl-perf baseline"
echo "baseline rows: $(grep -c '^row ' "$O/site.baseline")" >> "$S"

run healthy -- --baseline "$O/site.baseline"
[ "$(cat "$O/healthy.rc")" = 0 ] || fail "healthy run: exit $(cat "$O/healthy.rc"), expected 0"
[ "$(grep -c ': ok' "$O/healthy.out")" -ge 5 ] || fail "healthy run: not every collective ok"

run slow -r "$SLOW_RANK:LD_PRELOAD=$O/hang-shim.so" -r "$SLOW_RANK:HANGSHIM_DELAY_US=$DELAY_US" \
  -r "$SLOW_RANK:HANGSHIM_QUIET=1" -- --baseline "$O/site.baseline" \
  --locate quick --locate-size 1M --locate-iters 10 --locate-deadline 60
rc=$(cat "$O/slow.rc")
case $rc in 7|9) ;; *) fail "slow run: exit $rc, expected 9 (or 7 when locate named nobody)" ;; esac
grep -q '^# health: slow' "$O/slow.out" || fail "slow run: overall verdict not slow"
grep -q "^# health: .*vnode$SLOW_RANK" "$O/slow.out" || fail "slow run: vnode$SLOW_RANK not named"

# Wrong data on one rank (the test hook NCCL_PERF_CORRUPT, every rank told to corrupt rank SLOW_RANK's): exit 7,
# the overall verdict wrong, and validation's place named: the rank, its node, a stderr line.
run wrong -e "NCCL_PERF_CORRUPT=out:0:$SLOW_RANK" -- --baseline "$O/site.baseline"
[ "$(cat "$O/wrong.rc")" = 7 ] || fail "wrong run: exit $(cat "$O/wrong.rc"), expected 7"
grep -q '^# health: wrong' "$O/wrong.out" || fail "wrong run: overall verdict not wrong"
grep -q "wrong data on rank $SLOW_RANK (vnode$SLOW_RANK)" "$O/wrong.out" || fail "wrong run: rank $SLOW_RANK (vnode$SLOW_RANK) not named"
grep -q "^# health: .*: on vnode$SLOW_RANK (where validation found it)" "$O/wrong.out" || fail "wrong run: node not named"
grep -h "wrong data on" "$O"/wrong.err "$O"/wrong.ranks/*.err 2>/dev/null | head -3 >> "$S"

# The companion tool on the -J files: the same verdicts and codes.
for name in healthy slow; do
  files=()
  for c in all_reduce all_gather reduce_scatter alltoall sendrecv; do files+=("$O/$name.$c.json"); done
  "$D/nccl-perf" health --baseline "$O/site.baseline" "${files[@]}" > "$O/$name.tool.out" 2> "$O/$name.tool.err"
  echo "== nccl-perf health $name.*.json: rc=$?" >> "$S"
  grep '^# health' "$O/$name.tool.out" >> "$S"
done
python3 - "$O" >> "$S" 2>&1 <<'PY'
import json, sys
o = sys.argv[1]
for name in ("healthy", "slow"):
    d = json.load(open(f"{o}/{name}.health.json"))
    print(name, "json:", d["verdict"], [(c["collective"], c["verdict"], c.get("judged_by"), c.get("suspects")) for c in d["collectives"]], [(n["host"], n["verdict"]) for n in d["nodes"]])
PY
if grep -q '^FAIL' "$S"; then echo "RESULT: FAIL" >> "$S"; else echo "RESULT: PASS" >> "$S"; fi
cat "$S"
