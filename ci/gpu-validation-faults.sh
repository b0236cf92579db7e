#!/usr/bin/env bash
# The GPU checks of issue 7 (hardening), in one call.
#  1. Proof that validation works: for every binary, one run with the self-test switch
#     NCCL_PERF_CORRUPT=out:0 (one byte of element 0 of rank 0's out-of-place receive buffer
#     flipped after each validation operation) over every datatype (-d all), one with in:0, and
#     one without. Expected: #wrong 1 on the corrupted half of every row (N/A where the in-place
#     half is not checked: sendrecv, alltoall, alltoallv), `# Out of bounds values : <rows>
#     FAILED` and exit 7; 0 everywhere, `0 OK` and exit 0 without it.
#  2. Environment faults on a real GPU: libnccl missing (exit 3), too few GPUs (exit 5), a -e
#     larger than the GPU (the memory clamp line, exit 0).
#  3. A stop signal mid-run: SIGTERM → exit 143 and a well-formed -J JSON file with the rows so far.
#  4. With 2 or more GPUs: a rank killed mid-run (torchrun-style environment, TCP bootstrap;
#     and mpirun when DIST/mpi/all_reduce_perf, a --features mpi build, exists) → the survivor
#     stops within seconds naming the lost rank, exits non-zero, and its JSON file parses.
# Prints a summary table; exit status 0 when every check passed.
# usage: ci/gpu-validation-faults.sh DIST OUT   (DIST holds the binaries; OUT gets the logs under issue7/)
set -u
D=$(cd "$1" && pwd)
mkdir -p "$2"; O=$(cd "$2" && pwd)/issue7
rm -rf "$O"; mkdir -p "$O"
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
S="$O/summary.txt"; : > "$S"
fails=0
row() { # check, detail, verdict
  printf '%-48s %-62s %s\n' "$1" "$2" "$3" | tee -a "$S"
  [ "$3" = PASS ] || fails=$((fails + 1))
}
run() { # name, command... → $O/name.out (stdout+stderr), echoes the exit status
  local name=$1; shift
  { echo "### $*"; "$@"; echo "### rc=$?"; } > "$O/$name.out" 2>&1
  sed -n 's/^### rc=//p' "$O/$name.out" | tail -1
}
json_ok() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["results"]))' "$1" 2>/dev/null; }

printf '%-48s %-62s %s\n' CHECK DETAIL VERDICT | tee -a "$S"

# 1. Validation self-test. check_rows FILE OUT_WANT IN_WANT: every data row's #wrong halves must
# be OUT_WANT and IN_WANT; prints "rows types bad" (bad = rows that differ).
check_rows() {
  awk -v ow="$2" -v iw="$3" '
    /^#/ || NF < 12 || $1 !~ /^[0-9]+$/ { next }
    { rows++; types[$3] = 1; if ($(NF-4) != ow || $NF != iw) bad++ }
    END { n = 0; for (t in types) n++; printf "%d %d %d\n", rows, n, bad + 0 }' "$1"
}
for b in all_reduce all_gather broadcast reduce_scatter reduce alltoall alltoallv scatter gather sendrecv hypercube; do
  case $b in sendrecv|alltoall|alltoallv) ip_clean=N/A; ip_bad=N/A ;; *) ip_clean=0; ip_bad=1 ;; esac
  for kind in out in clean; do
    case $kind in
      out)   want_o=1; want_i=$ip_clean; env=(NCCL_PERF_CORRUPT=out:0) ;;
      in)    want_o=0; want_i=$ip_bad;   env=(NCCL_PERF_CORRUPT=in:0) ;;
      clean) want_o=0; want_i=$ip_clean; env=() ;;
    esac
    rc=$(run "${b}_$kind" env "${env[@]}" "$D/${b}_perf" -d all -b 1K -e 256K -f 4)
    read -r rows ntypes bad < <(check_rows "$O/${b}_$kind.out" "$want_o" "$want_i")
    if [ "$want_o" = 1 ] || [ "$want_i" = 1 ]; then want_rc=7; oob="$rows FAILED"; else want_rc=0; oob="0 OK"; fi
    got_oob=$(sed -n 's/^# Out of bounds values : //p' "$O/${b}_$kind.out")
    v=PASS
    { [ "$rc" = "$want_rc" ] && [ "$rows" -gt 0 ] && [ "$bad" = 0 ] && [ "$got_oob" = "$oob" ]; } || v=FAIL
    row "${b}_perf -d all ${env[*]:-(no corruption)}" \
      "rows $rows types $ntypes #wrong out/in $want_o/$want_i bad $bad oob '$got_oob' rc $rc" "$v"
  done
done
# Another rank than 0, and a corrupted element that is not the first.
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$ngpu" -ge 2 ]; then
  rc=$(run ar_rank1 env NCCL_PERF_CORRUPT=out:5:1 "$D/all_reduce_perf" -g "$ngpu" -b 1K -e 1M -f 4)
  read -r rows ntypes bad < <(check_rows "$O/ar_rank1.out" 1 0)
  v=PASS; { [ "$rc" = 7 ] && [ "$rows" -gt 0 ] && [ "$bad" = 0 ]; } || v=FAIL
  row "all_reduce_perf -g $ngpu out:5:1" "rows $rows bad $bad rc $rc" "$v"
fi

# 2. Environment faults with a real GPU.
rc=$(run nccl_missing env NCCL_PERF_LIBNCCL=/nonexistent/libnccl.so.2 "$D/all_reduce_perf" -b 8 -e 8)
v=PASS; { [ "$rc" = 3 ] && grep -q "cannot load NCCL (tried /nonexistent/libnccl.so.2)" "$O/nccl_missing.out"; } || v=FAIL
row "NCCL_PERF_LIBNCCL=/nonexistent" "rc $rc (want 3)" "$v"
rc=$(run too_few_gpus "$D/all_reduce_perf" -g 100000 -b 8 -e 8)
v=PASS; { [ "$rc" = 5 ] && grep -q "Invalid number of GPUs: 100000 requested" "$O/too_few_gpus.out"; } || v=FAIL
row "-g 100000" "rc $rc (want 5, Invalid number of GPUs)" "$v"
rc=$(run memory_clamp "$D/all_reduce_perf" -b 40G -e 400G -f 8 -n 2 -w 1)
v=PASS; { [ "$rc" = 0 ] && grep -q "^# Reducing maxBytes to [0-9]* due to memory limitation" "$O/memory_clamp.out"; } || v=FAIL
row "-b 40G -e 400G (memory clamp)" "rc $rc; $(grep -o 'Reducing maxBytes to [0-9]*' "$O/memory_clamp.out")" "$v"
rc=$(run unwritable_json "$D/all_reduce_perf" -b 8 -e 8 -J /nonexistent/dir/x.json)
v=PASS; { [ "$rc" = 255 ] && ! grep -q "nccl-tests version" "$O/unwritable_json.out"; } || v=FAIL
row "-J /nonexistent/dir/x.json" "rc $rc (want 255 before any GPU work)" "$v"

# Waits until FILE has at least N data rows (up to 120 s).
wait_rows() {
  for _ in $(seq 1 1200); do
    [ "$(grep -c '^ *[0-9][0-9]* ' "$1" 2>/dev/null)" -ge "$2" ] && return 0
    sleep 0.1
  done
  return 1
}
# Waits for pid up to S seconds; echoes "rc seconds" (rc 999: still running, killed).
wait_pid() {
  local pid=$1 limit=$2 t0 rc
  t0=$(date +%s%3N)
  while kill -0 "$pid" 2>/dev/null; do
    if [ $(( $(date +%s%3N) - t0 )) -gt $((limit * 1000)) ]; then
      kill -9 "$pid"; wait "$pid" 2>/dev/null; echo "999 $limit"; return
    fi
    sleep 0.1
  done
  wait "$pid"; rc=$?
  ms=$(( $(date +%s%3N) - t0 ))
  echo "$rc $((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
}

# 3. SIGTERM mid-run: exit 143, JSON with the rows so far.
"$D/all_reduce_perf" -b 1M -e 16G -f 2 -n 200 -J "$O/sigterm.json" > "$O/sigterm.out" 2>&1 &
pid=$!
if wait_rows "$O/sigterm.out" 3; then
  kill -TERM "$pid"; wait_pid "$pid" 30 > "$O/wait.txt"; read -r rc took < "$O/wait.txt"
  n=$(json_ok "$O/sigterm.json")
  v=PASS; { [ "$rc" = 143 ] && [ -n "$n" ] && [ "$n" -ge 3 ] && grep -qE "stopped by signal 15 \(SIGTERM\)|interrupted by SIGTERM" "$O/sigterm.out"; } || v=FAIL
  row "SIGTERM mid-run" "rc $rc after ${took}s, JSON results ${n:-invalid}" "$v"
else
  kill -9 "$pid"; row "SIGTERM mid-run" "no rows appeared" FAIL
fi

# 4. A rank killed mid-run (needs a GPU per rank).
kill_env() { # victim: 0 or 1
  local victim=$1 survivor=$((1 - $1)) port=$((29700 + RANDOM % 200)) r pids=()
  for r in 0 1; do
    CUDA_VISIBLE_DEVICES=$r RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$D/all_reduce_perf" -b 1M -e 16G -f 2 -n 200 -J "$O/kill_env$victim.json" > "$O/kill_env${victim}_r$r.out" 2>&1 &
    pids[r]=$!
  done
  if ! wait_rows "$O/kill_env${victim}_r0.out" 3; then
    kill -9 "${pids[@]}"; row "env bootstrap: kill rank $victim" "no rows appeared" FAIL; return
  fi
  kill -9 "${pids[$victim]}"; wait "${pids[$victim]}" 2>/dev/null
  wait_pid "${pids[$survivor]}" 60 > "$O/wait.txt"; read -r rc took < "$O/wait.txt"
  # Rank 0 writes the JSON file: with rank 0 the survivor it holds the rows so far; with rank 0
  # killed it holds the document as of the device list, still well-formed.
  local f="$O/kill_env${victim}_r$survivor.out" n v=PASS
  n=$(json_ok "$O/kill_env$victim.json")
  { [ "$rc" != 0 ] && [ "$rc" != 999 ] && grep -q "rank $victim" "$f" && [ -n "$n" ]; } || v=FAIL
  if [ "$survivor" = 0 ] && [ "${n:-0}" -lt 3 ]; then v=FAIL; fi
  row "env bootstrap: kill rank $victim mid-run" "survivor rc $rc after ${took}s; $(tail -1 "$f" | cut -c1-40)... JSON ${n:-n/a}" "$v"
}
if [ "$ngpu" -ge 2 ]; then
  kill_env 1
  kill_env 0
  if [ -x "$D/mpi/all_reduce_perf" ] && command -v mpirun > /dev/null; then
    mpirun --allow-run-as-root --oversubscribe -np 2 -x NCCL_NVLS_ENABLE \
      "$D/mpi/all_reduce_perf" -b 1M -e 16G -f 2 -n 200 -J "$O/kill_mpi.json" > "$O/kill_mpi.out" 2>&1 &
    mp=$!
    if wait_rows "$O/kill_mpi.out" 3; then
      victim=$(awk '$1 == "#" && $2 == "Rank" && $3 == 1 { print $7 }' "$O/kill_mpi.out")
      kill -9 "$victim"
      wait_pid "$mp" 60 > "$O/wait.txt"; read -r rc took < "$O/wait.txt"
      n=$(json_ok "$O/kill_mpi.json")
      v=PASS; { [ "$rc" != 0 ] && [ "$rc" != 999 ] && [ -n "$n" ] && grep -q "rank 1" "$O/kill_mpi.out"; } || v=FAIL
      row "mpirun: kill rank 1 mid-run" "mpirun rc $rc after ${took}s, JSON results ${n:-invalid}" "$v"
    else
      kill -9 "$mp"; row "mpirun: kill rank 1 mid-run" "no rows appeared" FAIL
    fi
  fi
else
  echo "(rank-kill checks skipped: one GPU; they need a GPU per rank)" | tee -a "$S"
fi

echo "failed checks: $fails" | tee -a "$S"
[ "$fails" = 0 ]
