#!/usr/bin/env bash
# The hang watch's GPU checks (issue 49), in one call, on ranks posing as hosts on one GPU
# (ci/vcluster.sh, our environment bootstrap over TCP): healthy runs and a slowed link (no hang
# may be called), then three injected hangs on rank 2 of 4 and of 8 ranks:
#   host  NCCL_PERF_TEST_HOST_STOP_OP: its benchmark thread stops before an operation
#   gpu   NCCL_PERF_TEST_STALL_MS: its streams are held before the first timed loop (verdict
#         `gpu`, rank 2: data that arrived waits for its GPU)
#   link  ci/hang-shim.c under LD_PRELOAD: its network data sends stop (EAGAIN forever)
#         (verdict `link`, from rank 2 to a peer: its send stuck in SendWait)
# Each hang: every rank's exit code, rank 0's verdict line, the JSON record, the wall time,
# and the processes left. One PASS/FAIL line per check into OUT/hang-checks.txt; every case's
# logs in OUT/hang-logs.tar.gz.
# usage: ci/gpu-hang.sh DIST OUT [LIMIT_S]   (DIST: binaries built with --features test-hooks)
#   PARTS="hangs healthy slow" (default: all three) picks the parts; HANG_CASES (default
#   "host4 gpu4 link4 host8 gpu8 link8 health4") the hangs; HANG_WORK the folder for the cases'
#   logs (default: a temporary one); HEALTHY_RUNS (16) and SLOW_RUNS (4) the no-false-alarm runs.
# shellcheck disable=SC2016  # the check expressions are evaluated later, on purpose
set -u
D=$(cd "$1" && pwd); O=$(cd "$2" && pwd); LIMIT=${3:-10}
here=$(cd "$(dirname "$0")" && pwd)
AR="$D/all_reduce_perf"
C="$O/hang-checks.txt"; : > "$C"
W=${HANG_WORK:-$(mktemp -d)}; mkdir -p "$W"
gcc -shared -fPIC -O2 -o "$W/hang-shim.so" "$here/hang-shim.c" -ldl || echo "FAIL shim: gcc" >> "$C"
port=$((21000 + $$ % 5000))

# case NAME RANKS KILL_S [vcluster options...] -- ARGS: runs the job, records rcs, wall, leftovers.
case_run() {
  local name=$1 n=$2 kill_s=$3; shift 3
  local dir="$W/$name"; mkdir -p "$dir"
  port=$((port + 1))
  local t0=$EPOCHREALTIME
  timeout -s KILL "$kill_s" bash "$here/vcluster.sh" -n "$n" -l slurm -p "$port" -d "$dir" "$@" \
    > "$dir/stdout" 2> "$dir/stderr"
  echo "$?" > "$dir/rc"
  awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f\n", b - a }' > "$dir/wall"
  sleep 1
  pgrep -f "$AR" > "$dir/left" || true
  pkill -9 -f "$AR" 2>/dev/null || true
}
rcs() { local d="$W/$1" r; for r in $(seq 0 $(($2 - 1))); do printf '%s ' "$(cat "$d/rank$r.rc" 2>/dev/null || echo none)"; done; }
all_rc() { [ "$(rcs "$1" "$2" | tr ' ' '\n' | grep -v '^$' | grep -cvx "$3")" = 0 ]; }
pass() { if eval "$3"; then echo "PASS $1: $2" >> "$C"; else echo "FAIL $1: $2" >> "$C"; fi; }
summary() { # one line per case: rcs, wall, verdict line
  local d="$W/$1"
  {
    echo "## $1: rcs [$(rcs "$1" "$2")] wall $(cat "$d/wall") s, left $(wc -l < "$d/left")"
    grep -h "hang:" "$d/rank0.err" 2>/dev/null | head -1 | cut -c1-400 | sed 's/^/##   /'
    grep -h "rank 0 stopped the run" "$d/rank1.err" 2>/dev/null | head -1 | cut -c1-300 | sed 's/^/##   /'
  } >> "$C"
}
json_verdict() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); h=d["nccl_perf_hang"]; print(h["verdict"], ",".join(map(str,h["culprits"])), h["operation"])' "$1" 2>/dev/null; }

ARGS=(-b 1M -e 16M -f 4 -n 20 -w 2 --hang-timeout "$LIMIT")
HANG_CASES=${HANG_CASES:-host4 gpu4 link4 host8 gpu8 link8 health4}

PARTS=${PARTS:-hangs healthy slow}
part() { [[ " $PARTS " == *" $1 "* ]]; }

# 1. No false alarm: healthy runs at 4 and 8 ranks, and a slowed link on rank 2.
if part healthy; then
healthy=0; hung=0; runs=${HEALTHY_RUNS:-16}
for ((i = 1; i <= runs; i++)); do
  n=4; [ "$i" -gt $((runs * 3 / 4)) ] && n=8
  case_run "healthy$i" "$n" 300 -- "$AR" "${ARGS[@]}"
  all_rc "healthy$i" "$n" 0 && healthy=$((healthy + 1))
  grep -q "hang:" "$W/healthy$i"/rank*.err && hung=$((hung + 1))
done
pass healthy "$runs healthy runs (the last quarter at 8 ranks): all exit 0, no hang called" \
  "[ $healthy = $runs ] && [ $hung = 0 ]"
fi
if part slow; then
slow_ok=0; slow_hung=0; runs=${SLOW_RUNS:-4}
for ((i = 1; i <= runs; i++)); do
  case_run "slow$i" 4 300 -r "2:LD_PRELOAD=$W/hang-shim.so" -r 2:HANGSHIM_DELAY_US=3000 -- \
    "$AR" -b 1M -e 4M -f 2 -n 20 -w 2 --hang-timeout "$LIMIT"
  summary "slow$i" 4
  all_rc "slow$i" 4 0 && slow_ok=$((slow_ok + 1))
  grep -q "hang:" "$W/slow$i"/rank*.err && slow_hung=$((slow_hung + 1))
done
pass slow "$runs runs with rank 2's sends slowed (3 ms per send): all exit 0, no hang called" \
  "[ $slow_ok = $runs ] && [ $slow_hung = 0 ]"
fi

# 2. Hangs.
hang_case() { # name ranks verdict-regex json-verdict-regex vcluster-options...
  local name=$1 n=$2 line=$3 jv=$4; shift 4
  [[ " $HANG_CASES " == *" $name "* ]] || return 0
  # -N 0: the size again and again until it hangs (nccl-tests' -n 20 per size).
  case_run "$name" "$n" 90 "$@" -- "$AR" -b 1M -e 1M -n 20 -w 2 -N 0 --hang-timeout "$LIMIT" \
    -J "$W/$name/run.json"
  summary "$name" "$n"
  local j; j=$(json_verdict "$W/$name/run.json")
  echo "##   json: $j" >> "$C"
  local ok=0
  all_rc "$name" "$n" 4 && grep -qE "$line" "$W/$name/rank0.err" && [[ "$j" =~ $jv ]] \
    && [ ! -s "$W/$name/left" ] && ok=1
  pass "$name" "every rank exit 4, rank 0 says '$line', JSON '$jv', no process left" "[ $ok = 1 ]"
  pass "$name-time" "ended within 100 s of the launch (start-up, the stall limit: $LIMIT s or 20 times the batch's measured pace, then 2 s)" \
    "awk -v w=\$(cat $W/$name/wall) 'BEGIN{exit !(w < 100)}'"
}
part hangs && for n in 4 8; do
  hang_case "host$n" "$n" "hang: rank 2 \(vnode2, pid [0-9]+\) never started operation 30 " \
    "^never_started 2 30$" -r 2:NCCL_PERF_TEST_HOST_STOP_OP=30
  hang_case "gpu$n" "$n" "hang: the GPU of rank 2 \(vnode2\) stopped at operation" "^gpu 2 " \
    -r 2:NCCL_PERF_TEST_STALL_MS=600000
  hang_case "link$n" "$n" "hang: the link from rank 2 \(vnode2\) to rank [0-9]+ \(vnode[0-9]+\) stopped" \
    "^link ([0-9]+,)*2(,[0-9]+)* [0-9]+$" \
    -r "2:LD_PRELOAD=$W/hang-shim.so" -r 2:HANGSHIM_AFTER_MS=9000
done
# --health: the collective that hung is judged 'hung' in its lines and files.
if part hangs && [[ " $HANG_CASES " == *" health4 "* ]]; then
  d="$W/health4"; mkdir -p "$d"
  case_run health4 4 90 -r 2:NCCL_PERF_TEST_HOST_STOP_OP=30 -- "$AR" --health -b 1M -e 1M \
    -n 20 -w 2 --hang-timeout "$LIMIT" --health-json "$d/h.json" --health-prom "$d/h.prom"
  summary health4 4
  grep -h "^# health:" "$d/rank0.out" | cut -c1-300 | sed 's/^/##   /' >> "$C"
  pass health4 "--health: every rank exit 4, '# health: <collective>: hung: hang: rank 2', JSON verdict hung, Prometheus verdict hung" \
    "all_rc health4 4 4 && grep -qE '^# health: [a-z_]+: hung: hang: rank 2 ' $d/rank0.out && python3 -c 'import json,sys; sys.exit(json.load(open(\"$d/h.json\"))[\"verdict\"] != \"hung\")' && grep -q 'verdict=\"hung\"} 1' $d/h.prom"
fi
tar -C "$W" -czf "$O/hang-logs.tar.gz" --exclude='*.so' . 2>/dev/null
cat "$C"
