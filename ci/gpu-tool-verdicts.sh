#!/usr/bin/env bash
# The GPU check of issue 14: `nccl-perf` never calls a broken run OK, on real GPU output.
#  1. A clean run of all_reduce_perf (-J JSON too): parse and report exit 0; compare of the run
#     with itself and with its JSON says "verdict: OK", exit 0.
#  2. The same run with the validation self-test NCCL_PERF_CORRUPT=out:0 (#wrong 1 per row,
#     "Out of bounds values : N FAILED", exit 7): parse exits 3 and says "wrong data" on stderr,
#     its JSON carries nccl_perf_problems; compare CLEAN CORRUPT exits 3 with "verdict: BROKEN";
#     with --allow wrong it exits 0.
#  3. A run stopped by SIGTERM mid-sweep (exit 143, no footer): compare --partial CLEAN STOPPED
#     exits 3 with "no footer".
#  4. A run with -g 2 on a one-GPU machine (nccl-tests' "Invalid number of GPUs" lines, exit 5):
#     parse exits 3, the CSV of report holds a record with the failure.
# Prints a summary table; exit status 0 when every check passed.
# usage: ci/gpu-tool-verdicts.sh DIST OUT   (DIST holds the release binaries; OUT gets issue14/)
set -u
D=$(cd "$1" && pwd)
mkdir -p "$2"; O=$(cd "$2" && pwd)/issue14
rm -rf "$O"; mkdir -p "$O"
export NCCL_NVLS_ENABLE=0
S="$O/summary.txt"; : > "$S"
fails=0
row() { # check, detail, verdict
  printf '%-40s %-60s %s\n' "$1" "$2" "$3" | tee -a "$S"
  [ "$3" = PASS ] || fails=$((fails + 1))
}
verdict() { if [ "$1" = "$2" ]; then echo PASS; else echo FAIL; fi; }
tool() { "$D/nccl-perf" "$@"; }
printf '%-40s %-60s %s\n' CHECK DETAIL VERDICT | tee -a "$S"

args=(-b 1M -e 64M -f 4 -n 5 -w 2)
"$D/all_reduce_perf" "${args[@]}" -J "$O/clean.json" > "$O/clean.log" 2>&1
rc=$?
row "clean run" "exit $rc" "$(verdict "$rc $(grep -c ' : 0 OK' "$O/clean.log")" "0 1")"
tool parse "$O/clean.log" > "$O/clean.parsed.json" 2> "$O/clean.parse.err"
rc=$?
row "parse clean" "exit $rc" "$(verdict $rc 0)"
tool compare "$O/clean.log" "$O/clean.json" --max-regression 50 > "$O/clean.compare" 2>&1
rc=$?
row "compare clean log vs its JSON" "exit $rc, $(grep -o 'verdict: [A-Z]*' "$O/clean.compare")" \
  "$(verdict "$rc $(grep -c 'verdict: OK' "$O/clean.compare")" "0 1")"

NCCL_PERF_CORRUPT=out:0 "$D/all_reduce_perf" "${args[@]}" > "$O/corrupt.log" 2>&1
rc=$?
row "corrupted run" "exit $rc" "$(verdict "$rc $(grep -c 'Out of bounds values : [1-9][0-9]* FAILED' "$O/corrupt.log")" "7 1")"
tool parse "$O/corrupt.log" > "$O/corrupt.json" 2> "$O/corrupt.parse.err"
rc=$?
row "parse corrupted" "exit $rc, $(grep -c 'wrong data' "$O/corrupt.parse.err") wrong-data line(s)" \
  "$(verdict "$rc $(grep -c nccl_perf_problems "$O/corrupt.json")" "3 1")"
tool compare "$O/clean.log" "$O/corrupt.log" --max-regression 50 > "$O/corrupt.compare" 2>&1
rc=$?
row "compare clean vs corrupted" "exit $rc, $(grep -o 'verdict: [A-Z]*' "$O/corrupt.compare")" \
  "$(verdict "$rc $(grep -c 'verdict: BROKEN' "$O/corrupt.compare")" "3 1")"
tool compare "$O/clean.log" "$O/corrupt.log" --max-regression 50 --allow wrong > "$O/corrupt.allow" 2>&1
rc=$?
row "compare --allow wrong" "exit $rc" "$(verdict $rc 0)"

"$D/all_reduce_perf" -b 1M -e 8G -f 2 -n 200 > "$O/stopped.log" 2>&1 &
pid=$!
sleep 8; kill -TERM "$pid"; wait "$pid"; rc=$?
row "stopped run (SIGTERM)" "exit $rc" "$(verdict $rc 143)"
tool compare --partial "$O/clean.log" "$O/stopped.log" > "$O/stopped.compare" 2>&1
rc=$?
row "compare --partial clean vs stopped" "exit $rc, $(grep -c 'no footer' "$O/stopped.compare") no-footer line(s)" \
  "$(verdict "$rc $(grep -c 'verdict: BROKEN' "$O/stopped.compare")" "3 1")"

if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" = 1 ]; then
  "$D/all_reduce_perf" -g 2 > "$O/g2.log" 2>&1
  rc=$?
  row "-g 2 on one GPU" "exit $rc" "$(verdict "$rc $(grep -c 'Invalid number of GPUs' "$O/g2.log")" "5 1")"
  tool report --format csv "$O/g2.log" > "$O/g2.csv" 2> "$O/g2.err"
  rc=$?
  row "report --format csv of -g 2" "exit $rc, $(tail -n +2 "$O/g2.csv" | wc -l) record(s)" \
    "$(verdict "$rc $(tail -n +2 "$O/g2.csv" | grep -c 'no rows')" "3 1")"
fi

echo "issue14: $fails check(s) failed" | tee -a "$S"
[ "$fails" -eq 0 ]
