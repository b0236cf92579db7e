#!/usr/bin/env bash
# Issue 42's compatibility matrix on the one GPU, for every NCCL version unpacked in NCCL_DIR
# (NCCL_DIR/VERSION/libnccl.so.2, from ci/nccl-pack.sh and ci/nccl-unpack.sh):
#   - every program of ours with `-d all -b 1M -e 1M` (NCCL_PERF_LIBNCCL), and nccl-tests 2.19.6's
#     program of that name against the same library (LD_LIBRARY_PATH), compared section by
#     section (ci/one-launch-compare.py: the same lines but the numbers, the same rows);
#   - all_reduce, all_gather, alltoall, sendrecv on 4 ranks posing as hosts (ci/vcluster.sh; ours
#     through the environment bootstrap, nccl-tests under mpirun), `-b 8 -e 4M -f 8 -w 2 -n 5`;
#   - the six collectives with --explain on 4 posing ranks with NCCL's TUNING lines on
#     (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING), kept for ci/explain-vs-tuning.py.
# One line per run in OUT/matrix.txt: version, program, side, exit code, rows, the
# `Out of bounds values` line's verdict, NCCL's last-error line if any, and structure equality.
#
# usage: ci/gpu-nccl-matrix.sh DIST NT_BUILD NCCL_DIR OUT
set -u
D=$(cd "$1" && pwd); NT=$(cd "$2" && pwd); ND=$(cd "$3" && pwd); mkdir -p "$4"; O=$(cd "$4" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
M=$O/matrix.txt
nvidia-smi -L > "$M"
# facts LOG: rows, the out-of-bounds verdict, the last-error line.
facts() {
  local rows oob err
  rows=$(grep -cE '^ +[0-9]+ +[0-9]+ +[a-z0-9_]+ ' "$1")
  oob=$(sed -n 's/^# Out of bounds values : [0-9]* \([A-Z]*\).*/\1/p' "$1" | head -1)
  err=$(grep -m1 '^# error:' "$1" | cut -c1-120)
  echo "rows=$rows oob=${oob:-none} lasterr=${err:-none}"
}
for vdir in "$ND"/*/; do
  v=$(basename "$vdir")
  lib=$vdir/libnccl.so.2
  [ -f "$lib" ] || continue
  W=$O/$v
  mkdir -p "$W"
  for prog in "$D"/*_perf; do
    p=$(basename "$prog")
    NCCL_PERF_LIBNCCL=$lib timeout 120 "$prog" -d all -b 1M -e 1M > "$W/ours.$p.out" 2>&1
    rc=$?
    line="$v $p -d all: ours rc=$rc $(facts "$W/ours.$p.out")"
    if [ -x "$NT/$p" ]; then
      LD_LIBRARY_PATH=$vdir timeout 120 "$NT/$p" -d all -b 1M -e 1M > "$W/theirs.$p.out" 2>&1
      rc=$?
      same=$(python3 "$HERE/one-launch-compare.py" "$W/ours.$p.out" "$W/theirs.$p.out" 2>&1 | grep -c 'structure-equal')
      line="$line | nccl-tests rc=$rc $(facts "$W/theirs.$p.out") | structure-equal=$same"
    fi
    echo "$line" >> "$M"
  done
  for c in all_reduce all_gather alltoall sendrecv; do
    bash "$HERE/vcluster.sh" -n 4 -l torchrun -e NCCL_PERF_LIBNCCL="$lib" -- \
      "$D/${c}_perf" -b 8 -e 4M -f 8 -w 2 -n 5 > "$W/ours.n4.$c.out" 2> "$W/ours.n4.$c.err"
    rc=$?
    line="$v ${c}_perf n4: ours rc=$rc $(facts "$W/ours.n4.$c.out")"
    bash "$HERE/vcluster.sh" -n 4 -l mpirun -e LD_LIBRARY_PATH="$vdir" -- \
      "$NT/${c}_perf" -b 8 -e 4M -f 8 -w 2 -n 5 > "$W/theirs.n4.$c.out" 2> "$W/theirs.n4.$c.err"
    rc=$?
    same=$(python3 "$HERE/one-launch-compare.py" "$W/ours.n4.$c.out" "$W/theirs.n4.$c.out" 2>&1 | grep -c 'structure-equal')
    echo "$line | nccl-tests rc=$rc $(facts "$W/theirs.n4.$c.out") | structure-equal=$same" >> "$M"
  done
  for c in all_reduce all_gather reduce_scatter broadcast reduce alltoall; do
    mkdir -p "$W/tuning.$c"
    bash "$HERE/vcluster.sh" -n 4 -l torchrun -d "$W/tuning.$c" -e NCCL_PERF_LIBNCCL="$lib" \
      -e NCCL_DEBUG=INFO -e NCCL_DEBUG_SUBSYS=TUNING -- \
      "$D/${c}_perf" -b 8 -e 64M -f 4 -w 1 -n 2 --explain -J "$W/tuning.$c.json" > "$W/tuning.$c.out" 2> "$W/tuning.$c.err"
    echo "$v ${c}_perf n4 --explain with TUNING: rc=$? tuning-lines=$(grep -c 'Bytes -> Algo' "$W/tuning.$c/rank0.out") explain-lines=$(grep -c '^# .*: .*channel' "$W/tuning.$c.out")" >> "$M"
    if [ -f "$W/tuning.$c.json" ]; then
      python3 "$HERE/explain-vs-tuning.py" "$W/tuning.$c.json" "$W/tuning.$c/rank0.out" > "$W/tuning.$c.compare" 2>&1
      echo "$v ${c}_perf n4 explain vs TUNING: rc=$? $(tail -1 "$W/tuning.$c.compare")" >> "$M"
    fi
    rm -f "$W/tuning.$c"/rank[1-9].* "$W/tuning.$c"/*.pid
  done
  # NCCL's calls per size, ours against nccl-tests' (the harness must add none).
  mkdir -p "$W/tuning.theirs.all_reduce"
  bash "$HERE/vcluster.sh" -n 4 -l mpirun -d "$W/tuning.theirs.all_reduce" -e LD_LIBRARY_PATH="$vdir" \
    -e NCCL_DEBUG=INFO -e NCCL_DEBUG_SUBSYS=TUNING -- \
    "$NT/all_reduce_perf" -b 8 -e 64M -f 4 -w 1 -n 2 > "$W/tuning.theirs.all_reduce.out" 2>&1
  calls() { grep -h '^vnode0:' "$@" | grep -o 'AllReduce: [0-9]* Bytes' | sort | uniq -c | sort -k3 -n | awk '{printf "%s:%s ", $3, $1}'; }
  ours_calls=$(calls "$W/tuning.all_reduce/rank0.out")
  theirs_calls=$(calls "$W/tuning.theirs.all_reduce.out" "$W/tuning.theirs.all_reduce"/rank0.* 2> /dev/null)
  same=no; [ -n "$ours_calls" ] && [ "$ours_calls" = "$theirs_calls" ] && same=yes
  echo "$v all_reduce n4 NCCL calls per size (bytes:calls) same=$same ours: $ours_calls| nccl-tests: $theirs_calls" >> "$M"
  rm -f "$W/tuning.theirs.all_reduce"/rank[1-9].* "$W/tuning.theirs.all_reduce"/*.pid
done
cat "$M"
