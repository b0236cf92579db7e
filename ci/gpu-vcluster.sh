#!/usr/bin/env bash
# GPU check of every multi-rank path on the one GPU: ranks posing as hosts (ci/vcluster.sh), ours
# side by side with nccl-tests run the same way. Correctness and rank logic only, no timings.
# usage: ci/gpu-vcluster.sh DIST OUT [NCCL_TESTS_BUILD] [PHASE...]
#   DIST             our release binaries, DIST/mpi the MPI build
#   NCCL_TESTS_BUILD nccl-tests' build/ folder (MPI=1 build); "-" for none
#   PHASE            all11 factors modes split launchers faults (default: all of them)
# Writes OUT/<case>.out (stdout), .err (stderr), .ref.out/.ref.err (nccl-tests), and
# OUT/summary.txt: one PASS/FAIL/NOTE line per case. ONLY=REGEX limits the pair-wise cases.
set -u
D=$(cd "$1" && pwd); O=$2; NT=${3:--}; shift 2; [ $# -gt 0 ] && shift
phases=${*:-all11 factors modes split launchers faults}
V=$(cd "$(dirname "$0")" && pwd)/vcluster.sh
CMP=$(cd "$(dirname "$0")" && pwd)/vcluster-compare.py
mkdir -p "$O"
S=$O/summary.txt
note() { echo "$*" | tee -a "$S"; }
LIMIT=${VCLUSTER_LIMIT:-120}

# Extra environment of the next runs: VENV=("VAR=VALUE" ...); VDIR: keep per-rank files there.
VENV=()
VDIR=
vopts() {
  local e
  for e in "${VENV[@]+"${VENV[@]}"}"; do printf '%s\0' -e "$e"; done
  [ -n "$VDIR" ] && printf '%s\0' -d "$VDIR"
}
# ours NAME LAUNCHER N BIN ARGS...
ours() {
  local name=$1 l=$2 n=$3; shift 3
  local opts=()
  mapfile -d '' opts < <(vopts)
  { echo "### ${VENV[*]+"${VENV[*]}"} vcluster -n $n -l $l -- $*"
    timeout -k 5 "$LIMIT" "$V" -n "$n" -l "$l" "${opts[@]+"${opts[@]}"}" -- "$@"
    echo "### rc=$?"; } > "$O/$name.out" 2> "$O/$name.err"
}
# theirs NAME N PROG ARGS...: nccl-tests under mpirun the same way.
theirs() {
  local name=$1 n=$2 prog=$3; shift 3
  [ "$NT" = - ] && return
  local opts=()
  mapfile -d '' opts < <(VDIR='' vopts)
  { echo "### nccl-tests: ${VENV[*]+"${VENV[*]}"} vcluster -n $n -l mpirun -- $prog $*"
    timeout -k 5 "$LIMIT" "$V" -n "$n" -l mpirun "${opts[@]+"${opts[@]}"}" -- "$NT/$prog" "$@"
    echo "### rc=$?"; } > "$O/$name.ref.out" 2> "$O/$name.ref.err"
}
rc_of() { sed -n 's/^### rc=//p' "$1" | tail -1; }
# pair NAME N PROG ARGS...: ours (MPI build under mpirun) and nccl-tests at the same time.
pair() {
  local name=$1 n=$2 prog=$3; shift 3
  # ONLY=REGEX (environment) runs just the matching cases of the pair-wise phases.
  [[ -n ${ONLY:-} && ! $name =~ $ONLY ]] && return
  ours "$name" mpirun "$n" "$D/mpi/$prog" "$@" &
  theirs "$name" "$n" "$prog" "$@" &
  wait
  verdict "$name"
}
verdict() {
  local name=$1 rc cmp json=()
  rc=$(rc_of "$O/$name.out")
  [ -f "$O/$name.ref.json" ] && json=("$O/$name.ref.json" "$O/$name.json")
  if [ "$NT" = - ]; then
    if [ "$rc" = 0 ]; then note "PASS $name: rc 0"; else note "FAIL $name: rc $rc"; fi
    return
  fi
  cmp=$(python3 "$CMP" "$O/$name.ref.out" "$O/$name.out" "${json[@]+"${json[@]}"}" 2>&1 | tr '\n' ';')
  if [ "$rc" = 0 ] && [ "$(rc_of "$O/$name.ref.out")" = 0 ] && [ "${cmp%SAME;}" != "$cmp" ]; then
    note "PASS $name: rc 0/0, same rows, #wrong 0${json[0]:+, ${cmp%%;*}}"
  else
    note "FAIL $name: rc ours $rc nccl-tests $(rc_of "$O/$name.ref.out"); $cmp"
  fi
}

SMALL=(-b 8 -e 4M -f 8 -w 2 -n 5)
COLLS="all_reduce all_gather broadcast reduce reduce_scatter alltoall alltoallv scatter gather sendrecv hypercube"

if [[ " $phases " == *" all11 "* ]]; then
  for n in 2 3 4 8; do
    for c in $COLLS; do
      name=${c}_n$n
      if [ "$c" = hypercube ] && [ "$n" = 3 ]; then
        ours "$name" mpirun 3 "$D/mpi/hypercube_perf" "${SMALL[@]}" &
        theirs "$name" 3 hypercube_perf "${SMALL[@]}" &
        wait
        rc=$(rc_of "$O/$name.out")
        msg=$(grep -v '^\[' "$O/$name.err" | grep -m1 -i 'power.of.two' || grep -m1 -i 'power.of.two' "$O/$name.err")
        if [ "$rc" = 5 ] && [ -n "$msg" ] && ! grep -q '^ *[0-9]' "$O/$name.out"; then
          note "PASS $name: exit 5, no rows, '$msg' (nccl-tests: rc $(rc_of "$O/$name.ref.out"), $(grep -c 'skipping' "$O/$name.ref.out" 2>/dev/null) 'skipping' lines, avg '$(grep -m1 'Avg bus' "$O/$name.ref.out" 2>/dev/null)')"
        else
          note "FAIL $name: rc $rc, message '$msg'"
        fi
        continue
      fi
      pair "$name" "$n" "${c}_perf" "${SMALL[@]}"
    done
  done
fi

# busbw factors at full precision from both -J files (N = 3: (n-1)/n factors; hypercube at 4).
if [[ " $phases " == *" factors "* ]]; then
  for c in $COLLS; do
    n=3; [ "$c" = hypercube ] && n=4
    name=${c}_n${n}_factors
    ours "$name" mpirun "$n" "$D/mpi/${c}_perf" -b 1K -e 1M -f 32 -w 1 -n 3 -J "$O/$name.json" &
    theirs "$name" "$n" "${c}_perf" -b 1K -e 1M -f 32 -w 1 -n 3 -J "$O/$name.ref.json" &
    wait
    verdict "$name"
  done
fi

if [[ " $phases " == *" modes "* ]]; then
  for c in all_reduce reduce reduce_scatter; do
    pair "${c}_n3_dall_oall" 3 "${c}_perf" -d all -o all -b 1K -e 64K -f 8 -w 1 -n 2
  done
  pair sendrecv_n3_dall 3 sendrecv_perf -d all -b 1K -e 64K -f 8 -w 1 -n 2
  for c in broadcast reduce scatter gather; do
    pair "${c}_n4_rootall" 4 "${c}_perf" -r -1 -b 1K -e 1M -f 16 -w 1 -n 3
  done
  printf '0 1000 2000 3000\n4000 0 96 1\n7 70 700 7000\n512 512 512 512\n' > "$O/a2av_matrix.txt"
  VENV=("NCCL_TESTS_ALLTOALLV_MATRIX_FILE=$O/a2av_matrix.txt")
  pair alltoallv_n4_matrix 4 alltoallv_perf -b 1M -e 1M -w 1 -n 3
  VENV=("NCCL_TESTS_ALLTOALLV_SPREAD=0.5")
  pair alltoallv_n4_spread 4 alltoallv_perf -b 64K -e 4M -f 4 -w 1 -n 3
  VENV=()
  for a in 0 1 2 3; do
    pair "all_reduce_n4_a$a" 4 all_reduce_perf -a "$a" -b 8 -e 1M -f 8 -w 1 -n 5
  done
  pair all_reduce_n4_c5 4 all_reduce_perf -c 5 -b 8 -e 1M -f 8 -w 1 -n 5
  pair all_gather_n4_c5 4 all_gather_perf -c 5 -b 8 -e 1M -f 8 -w 1 -n 5
  if [[ -z ${ONLY:-} || all_reduce_n4_json =~ $ONLY ]]; then
    ours all_reduce_n4_json mpirun 4 "$D/mpi/all_reduce_perf" -b 8 -e 1M -f 8 -w 1 -n 5 -J "$O/all_reduce_n4_json.json" &
    theirs all_reduce_n4_json 4 all_reduce_perf -b 8 -e 1M -f 8 -w 1 -n 5 -J "$O/all_reduce_n4_json.ref.json" &
    wait
    verdict all_reduce_n4_json
  fi
  [ -f "$O/all_reduce_n4_json.out" ] && if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["config"]["devices"]), len(d["results"]))' "$O/all_reduce_n4_json.json" > "$O/json_check.txt" 2>&1; then
    note "NOTE all_reduce_n4_json: JSON parses; devices, results = $(cat "$O/json_check.txt")"
  else
    note "FAIL all_reduce_n4_json: JSON does not parse: $(tail -1 "$O/json_check.txt")"
  fi
fi

if [[ " $phases " == *" split "* ]]; then
  for n in 4 8; do
    for s in "MOD 2" "DIV 2" "AND 1" "%3"; do
      tag=$(echo "$s" | tr -c 'A-Za-z0-9' '_' | sed 's/_*$//')
      VENV=("NCCL_TESTS_SPLIT=$s")
      pair "split_${tag}_n$n" "$n" all_reduce_perf -b 8 -e 1M -f 8 -w 1 -n 5
    done
    VENV=("NCCL_TESTS_SPLIT_MASK=0x1")
    pair "splitmask_1_n$n" "$n" all_reduce_perf -b 8 -e 1M -f 8 -w 1 -n 5
    VENV=()
  done
fi

if [[ " $phases " == *" launchers "* ]]; then
  # Our environment bootstrap (non-MPI build) against nccl-tests under mpirun.
  for l in slurm torchrun; do
    for n in 4 8; do
      name=all_reduce_${l}_n$n
      ours "$name" "$l" "$n" "$D/all_reduce_perf" "${SMALL[@]}" &
      theirs "$name" "$n" all_reduce_perf "${SMALL[@]}" &
      wait
      verdict "$name"
    done
  done
  name=alltoall_slurm_n3
  ours "$name" slurm 3 "$D/alltoall_perf" "${SMALL[@]}" & theirs "$name" 3 alltoall_perf "${SMALL[@]}" & wait
  verdict "$name"
  VENV=("NCCL_TESTS_SPLIT=DIV 2")
  ours split_DIV_2_slurm_n8 slurm 8 "$D/all_reduce_perf" -b 8 -e 1M -f 8 -w 1 -n 5 &
  theirs split_DIV_2_slurm_n8 8 all_reduce_perf -b 8 -e 1M -f 8 -w 1 -n 5 &
  wait
  verdict split_DIV_2_slurm_n8
  VENV=()
fi

# fault NAME LAUNCHER BIN SIGNAL VICTIM RC TEXT [ARGS...]: a 4-rank endless run; after 8 s rank
# VICTIM gets SIGNAL. PASS when every other rank has ended within 40 s, with exit code RC (a
# regex; the job's under mpirun, each survivor's under our launchers), a JSON file that parses,
# and stdout or stderr matching TEXT (an extended regex) outside the victim's own lines.
# any_alive PID...: whether one of them runs (a zombie, not yet reaped by its parent, does not).
any_alive() {
  local p st
  for p in "$@"; do
    st=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)
    [ -n "$st" ] && [ "$st" != Z ] && return 0
  done
  return 1
}
fault() {
  local name=$1 l=$2 bin=$3 what=$4 victim=$5 want_rc=$6 want_text=$7 t0 t1 rc
  shift 7
  local dir=$O/$name.ranks
  mkdir -p "$dir"
  t0=$(date +%s.%N)
  VDIR=$dir
  ours "$name" "$l" 4 "$bin" -b 64K -e 64K -w 1 -n 20 -N 0 -J "$O/$name.json" "$@" &
  local job=$!
  VDIR=''
  sleep 8
  kill -"$what" "$(cat "$dir/rank$victim.pid")" 2>/dev/null
  t1=$(date +%s.%N)
  # Survivors: the ranks but the victim (a stopped victim never ends by itself).
  local others=() p
  for p in "$dir"/rank*.pid; do [ "$p" = "$dir/rank$victim.pid" ] || others+=("$(cat "$p")"); done
  local waited=0
  while [ $waited -lt 200 ] && kill -0 "$job" 2>/dev/null && any_alive "${others[@]}"; do
    sleep 0.2; waited=$((waited + 1))
  done
  local took
  took=$(python3 -c "import time,sys; print(f'{time.time()-float(sys.argv[1]):.1f}')" "$t1")
  # Leave nothing behind (a stopped rank, or survivors still waiting).
  for p in "$dir"/rank*.pid; do kill -CONT "$(cat "$p")" 2>/dev/null; kill -KILL "$(cat "$p")" 2>/dev/null; done
  wait "$job" 2>/dev/null
  rc=$(rc_of "$O/$name.out")
  if [ "$l" != mpirun ]; then
    rc=$(for ((r = 0; r < 4; r++)); do [ "$r" = "$victim" ] || cat "$dir/rank$r.rc"; done | sort -u | tr '\n' ' ')
    rc=${rc% }
  fi
  local json named verdict=PASS
  json=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["results"]), "rows")' "$O/$name.json" 2>&1 | tail -1)
  named=$(cat "$O/$name.out" "$O/$name.err" | grep -v "^\[vnode$victim\]" | grep -m1 -E "$want_text")
  [[ $rc =~ ^($want_rc)$ ]] || verdict=FAIL
  [[ $json == *rows ]] || verdict=FAIL
  [ -n "$named" ] || verdict=FAIL
  [ "$waited" -lt 200 ] || verdict=FAIL
  note "$verdict $name ($what rank $victim at +$(python3 -c "print(f'{$t1-$t0:.1f}')") s): the others ended $took s later, rc $rc (want $want_rc), JSON: $json, named: ${named:-nobody}"
}

if [[ " $phases " == *" faults "* ]]; then
  # mpirun ends the job itself and names the rank; without heartbeats under MPI, -T bounds the
  # wait for a stopped rank (nccl-tests hangs the same way without -T).
  fault kill_mpirun mpirun "$D/mpi/all_reduce_perf" KILL 2 '[1-9][0-9]*' 'rank 2'
  fault stop_mpirun_T20 mpirun "$D/mpi/all_reduce_perf" STOP 2 '[1-9][0-9]*' 'Test timeout' -T 20
  # Our TCP bootstrap names the lost rank (exit 1) or the stopped one (heartbeats, exit 4).
  fault kill_slurm slurm "$D/all_reduce_perf" KILL 2 1 'rank 2 \(pid [0-9]+ on vnode2\) left the run'
  fault kill_torchrun torchrun "$D/all_reduce_perf" KILL 2 1 'rank 2 \(pid [0-9]+ on vnode2\) left the run'
  fault stop_slurm slurm "$D/all_reduce_perf" STOP 2 4 'rank 2 \(pid [0-9]+ on vnode2\) has sent nothing for .*not even a heartbeat'
  fault stop0_torchrun torchrun "$D/all_reduce_perf" STOP 0 4 'rank 0 at 127.0.0.1:[0-9]+ has sent nothing for .*not even a heartbeat'
  # One rank's received data corrupted (rank 2, element 0, out-of-place): #wrong and exit 7.
  for c in all_reduce all_gather broadcast reduce_scatter; do
    name=${c}_n4_corrupt2
    VENV=("NCCL_PERF_CORRUPT=out:0:2")
    ours "$name" mpirun 4 "$D/mpi/${c}_perf" -b 1K -e 64K -f 8 -w 1 -n 2
    rc=$(rc_of "$O/$name.out")
    wrong=$(awk '!/^#/ && NF>=13 {print $9 "/" $13}' "$O/$name.out" | sort | uniq -c | tr '\n' ' ')
    foot=$(grep -m1 'Out of bounds' "$O/$name.out")
    if [ "$rc" = 7 ] && [[ "$foot" == *FAILED* ]]; then
      note "PASS $name: rc 7, '$foot', #wrong out/in per row: $wrong"
    else
      note "FAIL $name: rc $rc, '$foot', #wrong out/in per row: $wrong"
    fi
  done
  name=all_reduce_slurm_n4_corrupt2
  VENV=("NCCL_PERF_CORRUPT=out:0:2")
  ours "$name" slurm 4 "$D/all_reduce_perf" -b 1K -e 64K -f 8 -w 1 -n 2
  rc=$(rc_of "$O/$name.out"); foot=$(grep -m1 'Out of bounds' "$O/$name.out")
  if [ "$rc" = 7 ] && [[ "$foot" == *FAILED* ]]; then note "PASS $name: rc 7, '$foot'"; else note "FAIL $name: rc $rc, '$foot'"; fi
  VENV=()
fi
echo "== $(grep -c '^PASS' "$S") PASS, $(grep -c '^FAIL' "$S") FAIL, $(grep -c '^NOTE' "$S") NOTE"
