#!/usr/bin/env bash
# GPU check of how sure --locate is (issue 29) on the one-GPU machine: ranks posing as hosts
# (ci/vcluster.sh), two kinds of slowdown from outside the program, at 4 and 8 ranks.
# usage: ci/gpu-locate-evidence.sh DIST OUT
#   DIST  our release binaries (all_reduce_perf), DIST/mpi the MPI build (8 ranks, mpirun)
#   OUT   OUT/summary.txt: one PASS/FAIL/NOTE line per case; OUT/logs/: every run's stdout,
#         stderr, per-rank files and --locate-json record
# Slowdowns (the slowed rank changes from run to run):
#   starve   the rank's process pinned with taskset to a core shared with three busy loops
#   pause    the rank's process stopped and continued with SIGSTOP/SIGCONT from outside, at a
#            duty cycle (PAUSE_MS stopped out of every PERIOD_MS; default 30 of 100 at 4 ranks,
#            50 of 100 at 8, where 30 slowed the job by only 12 %): all its threads stop, its
#            peers wait. The job-level slowdown of the pause is measured first (the plain
#            table, paused and not) and noted.
# Cases: starve-4 pause-4 healthy-4 starve-8 pause-8 healthy-8, RUNS (5) runs each. A slowed run
# passes when the slowed rank is named: alone ("vnodeS (1 GPU) slow") or as "vnodeS or the
# vnodeS-vnodeX link"; the summary counts every outcome (named, node-or-link, a bare link, a
# lean on vnodeS without a verdict, the job said to be slow but not localised, nobody, someone
# else). A healthy run passes when nobody is named and the job line does not call it slow, or
# does so only with its remark that all nodes run on one machine (the ranks posing as hosts:
# not a network figure, docs/locate.md); such runs are counted as job-slow-1m.
# Environment: RUNS (5), LOCATE_CASES ("pause-8 healthy-8": only those; default all),
# LOCATE_DROP4 and LOCATE_DROP8 (0.15, the default) the --locate-min-drop of each size, PAUSE_MS,
# PERIOD_MS, LOCATE_JOB_LEVEL (pause: the job-level slowdown is measured for the pause only;
# all: for both), LOCATE_CORE (3) the busy core, LOCATE_L8 (mpirun; slurm: the non-MPI build),
# LOCATE_ITERS (10) the --locate-iters of every run (a group's window: 10 of 16 MiB is about
# 0.25 s at 4 ranks, 2-3 periods of the pause), LOCATE_WINDOW (unset) the --locate-window of
# every run, LOCATE_LIMIT (150 s per run), LOCATE_DRY=1
# (print the commands only; no GPU needed).
# Needs: bash, awk, taskset, sleep with fractions (GNU coreutils), and what ci/vcluster.sh needs.
set -u
[ $# -eq 2 ] || { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 2; }
D=$(cd "$1" && pwd) || exit 2
mkdir -p "$2/logs" || exit 2
O=$(cd "$2" && pwd)
L=$O/logs
V=$(cd "$(dirname "$0")" && pwd)/vcluster.sh
S=$O/summary.txt
: > "$S"
DRY=${LOCATE_DRY:-}
RUNS=${RUNS:-5}
CORE=${LOCATE_CORE:-3}
LIMIT=${LOCATE_LIMIT:-150}
PAUSE4=${PAUSE_MS:-30}
PAUSE8=${PAUSE_MS:-50}
PAUSE_NOW=$PAUSE4
JOB_LEVEL=${LOCATE_JOB_LEVEL:-pause}
PERIOD_MS=${PERIOD_MS:-100}
CASES=" ${LOCATE_CASES:-all} "
note() { echo "$*" | tee -a "$S"; }
want() { [ "$CASES" = " all " ] || [[ $CASES == *" $1 "* ]]; }
# seconds MS: "0.030" for 30 (sleep takes fractions; no bc).
seconds() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }

# As ci/gpu-locate.sh: one row for the table, then groups of 16 MiB all_reduce.
BENCH=(-b 16M -e 16M -n 5 -w 1 -c 0)
LOC=(--locate quick --locate-size 16M --locate-iters "${LOCATE_ITERS:-10}" --locate-deadline 30)
[ -n "${LOCATE_WINDOW:-}" ] && LOC+=(--locate-window "$LOCATE_WINDOW")

# Every rank runs this wrapper: the rank SLOW_RANK pinned to SLOW_CORE (starve); with
# OTHER_CORES, the others kept off that core.
WRAP=$L/wrap.sh
cat > "$WRAP" <<'EOF'
#!/bin/sh
r=${VCLUSTER_RANK:-${OMPI_COMM_WORLD_RANK:-}}
if [ -n "${SLOW_RANK:-}" ] && [ "$r" = "$SLOW_RANK" ]; then
  exec taskset -c "${SLOW_CORE:-3}" "$@"
fi
if [ -n "${OTHER_CORES:-}" ]; then
  exec taskset -c "$OTHER_CORES" "$@"
fi
exec "$@"
EOF
chmod +x "$WRAP"

# shellcheck source=ci/locate-lib.sh
. "$(dirname "$0")/locate-lib.sh"
PAUSER=
stop_all() {
  busy_stop
  if [ -n "$PAUSER" ]; then
    kill "$PAUSER" 2> /dev/null
    wait "$PAUSER" 2> /dev/null
    PAUSER=
  fi
}
trap stop_all EXIT

# pause_rank DIR R: in the background, once rank R's pid file is there, stops and continues
# that process at the duty cycle until it ends (always leaving it continued).
pause_rank() {
  local f=$1/rank$2.pid stop go
  stop=$(seconds "$PAUSE_NOW")
  go=$(seconds $((PERIOD_MS - PAUSE_NOW)))
  (
    local i pid
    for ((i = 0; i < 600; i++)); do [ -s "$f" ] && break; sleep 0.1; done
    pid=$(cat "$f" 2> /dev/null) || exit 0
    trap 'kill -CONT "$pid" 2> /dev/null; exit 0' TERM
    while kill -0 "$pid" 2> /dev/null; do
      kill -STOP "$pid" 2> /dev/null
      sleep "$stop"
      kill -CONT "$pid" 2> /dev/null
      sleep "$go"
    done
  ) &
  PAUSER=$!
}

# run NAME LAUNCHER N HOW SLOW BIN [ARGS...]: one vcluster job with rank SLOW slowed by HOW
# (starve, pause or none); L/NAME.out, .err, .d/ and .rc.
run() {
  local name=$1 l=$2 n=$3 how=$4 slow=$5
  shift 5
  local dir=$L/$name.d env=()
  mkdir -p "$dir"
  case $how in
    starve) env=(-e "SLOW_RANK=$slow" -e "SLOW_CORE=$CORE") ;;
  esac
  if [ "$n" -gt 4 ]; then
    env+=(-e "OTHER_CORES=$(seq 0 $(($(nproc) - 1)) | grep -vx "$CORE" | paste -sd,)")
  fi
  if [ -n "$DRY" ]; then
    echo "[$how $slow] vcluster -n $n -l $l -d $dir ${env[*]+"${env[*]}"} -- $*" | tee "$L/$name.out"
    echo 0 > "$L/$name.rc"
    return
  fi
  [ "$how" = starve ] && busy_start "$CORE"
  [ "$how" = pause ] && pause_rank "$dir" "$slow"
  timeout -k 5 "$LIMIT" "$V" -n "$n" -l "$l" -d "$dir" "${env[@]+"${env[@]}"}" \
    -- "$WRAP" "$@" > "$L/$name.out" 2> "$L/$name.err"
  echo $? > "$L/$name.rc"
  stop_all
  reap_ranks "$dir"
}
rc() { cat "$L/$1.rc" 2> /dev/null || echo none; }
avg() { awk '/^# Avg bus bandwidth/ { print $NF }' "$L/$1.out" 2> /dev/null; }

# outcome NAME SLOW: what run NAME said about vnodeSLOW (SLOW=- for a healthy run): named,
# node-or-link, link, job-slow (job-slow-1m: with the one-machine remark), leaning (nobody
# named, the lean note points at vnodeSLOW first), nobody or other.
outcome() {
  local name=$1 slow=$2 s
  s=$(grep '^# locate suspect: ' "$L/$name.out" 2> /dev/null)
  if [ -z "$s" ]; then
    if [ "$slow" != - ] && grep -q "^# locate note: leaning: vnode$slow " "$L/$name.out" 2> /dev/null; then
      echo leaning
    elif grep -q '^# locate job: .*could not localise.*not a network figure' "$L/$name.out" 2> /dev/null; then
      echo job-slow-1m
    elif grep -q '^# locate job: .*could not localise' "$L/$name.out" 2> /dev/null; then
      echo job-slow
    else
      echo nobody
    fi
  elif [ "$slow" = - ] || [ "$(echo "$s" | wc -l)" != 1 ]; then
    echo other
  elif echo "$s" | grep -q "^# locate suspect: vnode$slow or the "; then
    echo node-or-link
  elif echo "$s" | grep -q "^# locate suspect: vnode$slow "; then
    echo named
  elif echo "$s" | grep -q "^# locate suspect: link .*vnode$slow\b"; then
    echo link
  else
    echo other
  fi
}

# job_level HOW N LAUNCHER BIN: the table's average busbw healthy and with rank 1 slowed.
job_level() {
  local how=$1 n=$2 l=$3 bin=$4 h s
  local long=(-b 16M -e 16M -n 40 -w 2 -c 0)
  run "job-$how-$n-healthy" "$l" "$n" none - "$bin" "${long[@]}"
  run "job-$how-$n-slowed" "$l" "$n" "$how" 1 "$bin" "${long[@]}"
  [ -n "$DRY" ] && return
  h=$(avg "job-$how-$n-healthy")
  s=$(avg "job-$how-$n-slowed")
  note "NOTE $how-$n job level ($([ "$how" = pause ] && echo "$PAUSE_NOW of $PERIOD_MS ms, ")40 operations): table busbw ${s:-?} GB/s slowed against ${h:-?} healthy ($(
    awk -v a="${s:-0}" -v b="${h:-0}" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "?" }'
  ))"
}

# series CASE N LAUNCHER BIN HOW DROP: RUNS locate runs, rank 1..N-1 slowed in turn (HOW none:
# healthy).
series() {
  local case=$1 n=$2 l=$3 bin=$4 how=$5 drop=$6 i slow name o ok=0 counts="" detail=""
  for ((i = 1; i <= RUNS; i++)); do
    name=$case-$i
    slow=-
    [ "$how" = none ] || slow=$((1 + (i - 1) % (n - 1)))
    run "$name" "$l" "$n" "$how" "$slow" "$bin" "${BENCH[@]}" "${LOC[@]}" \
      --locate-min-drop "$drop" --locate-seed "$i" --locate-json "$L/$name.json"
    [ -n "$DRY" ] && { ok=$((ok + 1)); continue; }
    o=$(outcome "$name" "$slow")
    counts+=" $o"
    case "$how:$o" in
      none:nobody | none:job-slow-1m | starve:named | starve:node-or-link | pause:named | pause:node-or-link)
        ok=$((ok + 1)) ;;
      *) detail+=" run $i (slowed: $slow, rc $(rc "$name")): $(grep -E '^# locate (suspect|job|verdict)' "$L/$name.out" | tr '\n' ';' | cut -c1-400)" ;;
    esac
  done
  # The job against its pairs in every run (a healthy job far below its pairs on this machine
  # would be called slow: then raise the minimum drop, docs/locate.md).
  local ratios
  ratios=$(for ((i = 1; i <= RUNS; i++)); do
    sed -n 's/^# locate job: the full job ran at \([0-9.]*x\) of its pairs.*/\1/p' "$L/$case-$i.out" 2> /dev/null
  done | paste -sd' ')
  [ -n "$DRY" ] || note "NOTE $case: the job against its pairs: ${ratios:-none}"
  local tally
  tally=$(echo "$counts" | tr ' ' '\n' | sed '/^$/d' | sort | uniq -c | awk '{ printf "%s%s %s", s, $1, $2; s = ", " }')
  if [ "$ok" = "$RUNS" ]; then
    note "PASS $case: $ok of $RUNS (${tally:-dry run})"
  else
    note "FAIL $case: $ok of $RUNS (${tally});$detail"
  fi
}

L8=${LOCATE_L8:-mpirun}
B8=$D/mpi/all_reduce_perf
[ "$L8" = mpirun ] || B8=$D/all_reduce_perf
for n in 4 8; do
  if [ "$n" = 4 ]; then
    l=slurm bin=$D/all_reduce_perf drop=${LOCATE_DROP4:-0.15} PAUSE_NOW=$PAUSE4
  else
    l=$L8 bin=$B8 drop=${LOCATE_DROP8:-0.15} PAUSE_NOW=$PAUSE8
  fi
  for how in starve pause; do
    if want "$how-$n"; then
      t0=$SECONDS
      [ "$how" = pause ] || [ "$JOB_LEVEL" = all ] && job_level "$how" "$n" "$l" "$bin"
      series "$how-$n" "$n" "$l" "$bin" "$how" "$drop"
      [ -n "$DRY" ] || note "NOTE $how-$n took $((SECONDS - t0)) s"
    fi
  done
  if want "healthy-$n"; then
    t0=$SECONDS
    series "healthy-$n" "$n" "$l" "$bin" none "$drop"
    [ -n "$DRY" ] || note "NOTE healthy-$n took $((SECONDS - t0)) s"
  fi
done
cat "$S"
