#!/usr/bin/env bash
# GPU check of the TCP bootstrap's protocol (sealed frames, Argon2id keys, the door): real runs
# of ranks posing as hosts on the one GPU (ci/vcluster.sh: own UTS namespace and NCCL_HOSTID
# each, NCCL's socket transport on loopback). Correctness only, no performance figures.
#  1. all 11 collectives, 4 ranks, slurm- and torchrun-style environments: rc 0 on every rank,
#     `# Out of bounds values : 0 OK`, every data row 13 tokens, no `#wrong` but 0.
#  2. all_reduce with NCCL_PERF_RENDEZVOUS_KEY (16+ characters): the same, and rank 0's stderr
#     has no "open" note; without a key it has one.
#  3. a longer run (about 10 s of heartbeats and result reductions over the sealed links).
#  4. formation time of 256 `--dry-run` processes (ci/rendezvous-scale.sh), this build and, when
#     OLD is given, an older binary, alternating, 3 runs each.
# usage: ci/gpu-tcp-bootstrap.sh DIST OUT [OLD_BIN]
set -u
D=$(cd "$1" && pwd)
mkdir -p "$2"; O=$(cd "$2" && pwd)
OLD=${3:-}
V=$(cd "$(dirname "$0")" && pwd)/vcluster.sh
SCALE=$(cd "$(dirname "$0")" && pwd)/rendezvous-scale.sh
S=$O/summary.txt; : > "$S"
note() { echo "$*" | tee -a "$S"; }

# check NAME: the run's files in $O/NAME.{out,err,rc}; PASS when every rank ended 0, the table
# validated and every data row has 13 tokens with #wrong 0.
check() {
  local name=$1 rc rows bad foot
  rc=$(cat "$O/$name.rc")
  rows=$(awk '!/^#/ && NF > 0' "$O/$name.out" | wc -l)
  # 13 tokens, or 12 for hypercube (no reduction-op column, as in nccl-tests); #wrong of each
  # half is the 5th token from the end and the last.
  bad=$(awk '!/^#/ && NF > 0 && ((NF != 13 && NF != 12) || ($(NF-4) != 0 && $(NF-4) != "N/A") || ($NF != 0 && $NF != "N/A"))' "$O/$name.out" | wc -l)
  foot=$(grep -m1 'Out of bounds values' "$O/$name.out")
  if [ "$rc" = 0 ] && [ "$rows" -gt 0 ] && [ "$bad" = 0 ] && [[ "$foot" == *": 0 OK"* ]]; then
    note "PASS $name: rc 0, $rows rows, '$foot'"
  else
    note "FAIL $name: rc $rc, $rows rows ($bad bad), '$foot'"
  fi
}
# run NAME LAUNCHER N [-e VAR=VALUE...] -- PROG ARGS...
run() {
  local name=$1 l=$2 n=$3; shift 3
  timeout -k 5 180 "$V" -n "$n" -l "$l" "$@" > "$O/$name.out" 2> "$O/$name.err"
  echo $? > "$O/$name.rc"
}

SMALL=(-b 8 -e 4M -f 8 -w 2 -n 5)
for c in all_reduce all_gather broadcast reduce reduce_scatter alltoall alltoallv scatter gather sendrecv hypercube; do
  for l in slurm torchrun; do
    run "${c}_${l}_n4" "$l" 4 -- "$D/${c}_perf" "${SMALL[@]}"
    check "${c}_${l}_n4"
  done
done

run keyed torchrun 4 -e NCCL_PERF_RENDEZVOUS_KEY=a-secret-of-this-gpu-check -- "$D/all_reduce_perf" "${SMALL[@]}"
check keyed
if grep -q 'is open to any process' "$O/keyed.err"; then note "FAIL keyed: the open note with a key"; else note "PASS keyed: no open note"; fi
if grep -q 'is open to any process' "$O/all_reduce_torchrun_n4.err"; then note "PASS open note without a key"; else note "FAIL no open note without a key"; fi

start=$(date +%s%N)
run long torchrun 4 -e NCCL_PERF_RENDEZVOUS_KEY=a-secret-of-this-gpu-check -- "$D/all_reduce_perf" -b 16M -e 16M -w 5 -n 50
check long
note "NOTE long: $(( ($(date +%s%N) - start) / 1000000 )) ms wall"

ulimit -n 65536 2>/dev/null || true
{
  for _ in 1 2 3; do
    echo "new: $(bash "$SCALE" "$D/all_reduce_perf" 256 1 | head -1)"
    [ -n "$OLD" ] && echo "old: $(bash "$SCALE" "$OLD" 256 1 | head -1)"
  done
} > "$O/scale.txt" 2>&1
cat "$O/scale.txt" >> "$S"
echo "== $(grep -c '^PASS' "$S") PASS, $(grep -c '^FAIL' "$S") FAIL"
