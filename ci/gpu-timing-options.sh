#!/usr/bin/env bash
# The GPU checks of issue 5 (timing modes and options), in one call: the reference commands
# ar_perit, ar_graph and ar_blocking side by side, a -T 1 timeout against a stalled stream,
# registration (-R 1/2), the memory report (-M 1), parallel init (-p 1), CUDA graphs with
# validation (-G 5 -c 1), per-iteration timing with -z 3 and -K, Ctrl-C and SIGTERM with -J,
# NCCL_TESTS_MIN_BW, and the harness-overhead benchmark; with several GPUs the multi-GPU and
# multi-thread variants. Every check prints one PASS/FAIL line into OUT/issue5-checks.txt.
# usage: ci/gpu-timing-options.sh DIST OUT   (DIST holds the binaries, overhead, ref/ and side_by_side.py;
# the -T check needs binaries built with --features test-hooks)
# shellcheck disable=SC2016  # the check expressions are evaluated later, on purpose
set -u
D=$(cd "$1" && pwd); O=$(cd "$2" && pwd)
export NCCL_NVLS_ENABLE=0
AR="$D/all_reduce_perf"
C="$O/issue5-checks.txt"; : > "$C"
bash "$(dirname "$0")/gpu-check.sh" "$D" "$O" ar_perit ar_graph ar_blocking > /dev/null 2>&1

run() { # name, command... → OUT/name.out: the command, its output, exit status and wall time
  local name=$1; shift
  local t0=$EPOCHREALTIME
  { echo "### $*"; "$@"; echo "### rc=$?"; } > "$O/$name.out" 2>&1
  awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "### wall_s=%.2f\n", b - a }' >> "$O/$name.out"
}
rc() { sed -n 's/^### rc=//p' "$O/$1.out"; }
wall() { sed -n 's/^### wall_s=//p' "$O/$1.out"; }
check() { # name, description, command...: PASS when the command succeeds
  local name=$1 what=$2; shift 2
  if "$@" > /dev/null 2>&1; then echo "PASS $name: $what" >> "$C"; else echo "FAIL $name: $what" >> "$C"; fi
}
rc_is() { [ "$(rc "$1")" = "$2" ]; }
has() { grep -qE -- "$2" "$O/$1.out"; }
ok0() { rc_is "$1" 0 && has "$1" '^# Out of bounds values : 0 OK$'; }
faster() { awk -v a="$(wall "$1")" -v b="$2" 'BEGIN { exit !(a < b) }'; }
tokens() { # every data row of $1 has $2 tokens, and there are at least $3 rows
  awk -v n="$2" -v min="$3" '/^ +[0-9]+ /{ if (NF != n) bad=1; rows++ } END { exit !(rows >= min && !bad) }' "$O/$1.out"
}

# The reference commands (gpu-check.sh wrote OUT/NAME.out and the side-by-side summary).
check ar_perit "rc 0, 0 wrong, 23 tokens per row (-I 1 -S 1), memory line" \
  eval 'ok0 ar_perit && tokens ar_perit 23 4 && has ar_perit "^# GPU memory usage     : Initialization "'
check ar_graph "rc 0, 0 wrong, cputime header, graph: 10, 13 tokens" \
  eval 'ok0 ar_graph && tokens ar_graph 13 6 && has ar_graph "graph: 10 " && has ar_graph " cputime "'
check ar_blocking "rc 0, blocking line, N/A columns" \
  eval 'rc_is ar_blocking 0 && has ar_blocking "^# Blocking Enabled: wait and barrier after each inner iteration \(-m\) $" && tokens ar_blocking 13 6'

# -T 1 against streams held for 30 s: ends within a few seconds, exit 4, upstream's line + what ran.
# The hold is a test hook: DIST must be built with `--features test-hooks` (it says so on stderr).
NCCL_PERF_TEST_STALL_MS=30000 run timeout timeout -s KILL 60 "$AR" -b 8 -e 8 -T 1
if has timeout "test hook NCCL_PERF_TEST_STALL_MS"; then
  check timeout "exit 4 within 10 s, timeout line naming the size" \
    eval 'rc_is timeout 4 && faster timeout 10 && has timeout ": Test timeout \(1s\) .* while running float sum 8 B \(out-of-place\)$"'
else
  echo "FAIL timeout: DIST was built without --features test-hooks (cargo build --release --features test-hooks)" >> "$C"
fi

# Registration.
run reg1 "$AR" -b 8 -e 64M -f 4 -R 1
run reg2 "$AR" -b 8 -e 64M -f 4 -R 2
check reg1 "-R 1: rc 0, 0 wrong" ok0 reg1
check reg2 "-R 2: rc 0, 0 wrong" ok0 reg2

# Memory report.
run mem "$AR" -b 1M -e 64M -f 4 -M 1
check mem "-M 1: memory line right after the concluded line" \
  eval 'ok0 mem && grep -A1 "^# Collective test concluded" "$O/mem.out" | grep -qE "^# GPU memory usage     : Initialization .* \| User-Allocated .* \| Collective .* \| Total  "'

# Parallel init.
run pinit "$AR" -p 1 -t 1 -b 8 -e 1M -f 8
check pinit "-p 1 -t 1: header line, rc 0" \
  eval 'ok0 pinit && has pinit "^# Parallel Init Enabled: threads call into NcclInitRank concurrently $"'

# CUDA graphs with validation, several collectives; -z 1 in a graph (the waits are left out).
for b in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
  run "graph_$b" "$D/${b}_perf" -b 8 -e 64M -f 4 -G 5 -c 1
  check "graph_$b" "-G 5 -c 1: rc 0, 0 wrong, 12 rows" eval "ok0 graph_$b && tokens graph_$b 13 12"
done
run graph_z1 "$AR" -b 8 -e 1M -f 8 -G 2 -z 1 -m 2
check graph_z1 "-G 2 -z 1 -m 2: rc 0, 0 wrong" ok0 graph_z1
run graph_notices "$AR" -b 8 -e 8 -G 1 -I 1 -z 3
check graph_notices "-G 1 -I 1 -z 3: upstream's two messages, default columns, rc 0" \
  eval 'ok0 graph_notices && tokens graph_notices 13 1 && has graph_notices "^per-iteration timing \(-I\) is incompatible with CUDA graph mode \(-G\)\. Disabling\.$" && has graph_notices "^blocking mode \(-z 3\) is incompatible with CUDA graph mode \(-G\)\. Disabling\.$"'

# Per-iteration timing with -z 3, -K and JSON; with -m 4 -z 2.
(cd "$O" && run perit_z3 "$AR" -b 1M -e 16M -f 4 -I 1 -z 3 -K 2 -n 30 -J perit_z3.json)
cat > "$O/perit_check.py" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["config"]["per_iter_skip"] == 2 and d["config"]["per_iter_timing"] == "true"
for r in d["results"]:
    for k in ("out_of_place_per_iter", "in_place_per_iter"):
        p = r[k]
        assert p["skipped_iterations"] == 2 and len(p["times_us"]) == 30, p
        assert p["min_us"] <= p["p50_us"] <= p["p95_us"] <= p["p99_us"] <= p["max_us"], p
        assert "per_process_max_times_us" not in p
PY
check perit_z3 "-I 1 -z 3 -K 2: skip header, 21 tokens, JSON objects of 30 samples" \
  eval 'ok0 perit_z3 && has perit_z3 "; summary skips first 2 iterations $" && tokens perit_z3 21 3 && python3 "$O/perit_check.py" "$O/perit_z3.json"'
run perit_m "$AR" -b 1M -e 1M -I 1 -m 4 -z 2
check perit_m "-I 1 -m 4 -z 2: rc 0, 0 wrong, 21 tokens" eval 'ok0 perit_m && tokens perit_m 21 1'

# CTA policy.
run cta1 "$AR" -b 1M -e 1M -x 1
run cta2 "$AR" -b 1M -e 1M -x 2
check cta "-x 1 and -x 2: rc 0, 0 wrong" eval 'ok0 cta1 && ok0 cta2'

# Device API: a clear error, exit 5; without -R 2 upstream's message, exit 255.
run dev1 "$AR" -D 1 -R 2
run dev0 "$AR" -D 1
check device "-D 1 -R 2 → exit 5 naming the device-API kernels; -D 1 → exit 255" \
  eval 'rc_is dev1 5 && has dev1 "device-API implementations" && rc_is dev0 255'

# NCCL_TESTS_MIN_BW far above one GPU's busbw (0): FAILED on the average line, exit 7.
NCCL_TESTS_MIN_BW=100000 run minbw "$AR" -b 1M -e 1M
check minbw "FAILED average line, exit 7" eval 'rc_is minbw 7 && has minbw "^# Avg bus bandwidth    : .* FAILED$"'

# Ctrl-C and SIGTERM during an endless run (-N 0): exit 130/143 at once, JSON/CSV well-formed.
(cd "$O" && run sigint timeout --preserve-status -s INT 8 "$AR" -b 8 -e 128M -f 2 -N 0 -J sigint.json)
(cd "$O" && run sigterm timeout --preserve-status -s TERM 8 "$AR" -b 8 -e 128M -f 2 -N 0 -J sigterm.csv)
check sigint "SIGINT: exit 130 within 12 s, JSON parses and has rows" \
  eval 'rc_is sigint 130 && faster sigint 12 && python3 -c "import json,sys; assert json.load(open(sys.argv[1]))[\"results\"]" "$O/sigint.json"'
check sigterm "SIGTERM: exit 143 within 12 s, CSV has a header and rows" \
  eval 'rc_is sigterm 143 && faster sigterm 12 && [ "$(wc -l < "$O/sigterm.csv")" -gt 2 ]'

# Multi-GPU variants.
n=$(nvidia-smi -L | wc -l)
if [ "$n" -ge 2 ]; then
  run g2_perit "$AR" -g 2 -b 1M -e 64M -f 4 -I 1 -M 1
  run t2_perit "$AR" -t 2 -b 1M -e 64M -f 4 -I 1 -z 1
  run t2_graph "$AR" -t 2 -b 8 -e 64M -f 4 -G 5 -c 1
  run g2_graph "$AR" -g 2 -b 8 -e 64M -f 4 -G 5 -c 1
  run t2_pinit "$AR" -t 2 -p 1 -b 8 -e 64M -f 4 -M 1
  run g2_reg2 "$AR" -g 2 -b 8 -e 64M -f 4 -R 2
  run g2_reg1 "$AR" -g 2 -b 8 -e 64M -f 4 -R 1
  for name in g2_perit t2_perit t2_graph g2_graph t2_pinit g2_reg2 g2_reg1; do
    check "$name" "rc 0, 0 wrong" ok0 "$name"
  done
  (cd "$O" && run t2_sigint timeout --preserve-status -s INT 8 "$AR" -t 2 -b 8 -e 128M -f 2 -N 0 -J t2_sigint.json)
  check t2_sigint "two threads, SIGINT: exit 130 within 12 s, JSON parses" \
    eval 'rc_is t2_sigint 130 && faster t2_sigint 12 && python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$O/t2_sigint.json"'
fi

# Harness overhead: delta_us (column 5) within 0.3 µs per op beyond the noise (column 7).
"$D/overhead" > "$O/overhead.txt" 2>&1
check overhead "harness delta ≤ 0.3 us + noise at every size" \
  awk '/^ +[0-9]+ +(oop|ip) / { n = $7 < 0 ? -$7 : $7; if ($5 > 0.3 + n) bad = 1; seen = 1 } END { exit !(seen && !bad) }' "$O/overhead.txt"

cat "$O/summary.txt"
cat "$C"
