#!/usr/bin/env bash
# Issue 42's compatibility matrix on the one GPU, for every NCCL version unpacked in NCCL_DIR
# (NCCL_DIR/VERSION/libnccl.so.2, from ci/nccl-pack.sh and ci/nccl-unpack.sh):
#   - every program of ours with `-d all -b 1M -e 1M` (NCCL_PERF_LIBNCCL), and nccl-tests 2.19.6's
#     program of that name against the same library (LD_LIBRARY_PATH), compared section by
#     section (ci/one-launch-compare.py: the same lines but the numbers, the same rows);
#   - all_reduce, all_gather, alltoall, sendrecv on 4 ranks posing as hosts (ci/vcluster.sh; ours
#     through the environment bootstrap, nccl-tests under mpirun), `-b 8 -e 4M -f 8 -w 2 -n 5`;
#   - the six collectives with --explain on posing ranks (TUNING_RANKS, default 4; `-e 64M`
#     at 4 ranks, `-e 16M` above) with NCCL's TUNING lines on (NCCL_DEBUG=INFO
#     NCCL_DEBUG_SUBSYS=TUNING), kept for ci/explain-vs-tuning.py;
#   - NCCL's TUNING lines per size of all_reduce without --explain, ours against nccl-tests';
#   - (part "plugins", not in the default) one GPU's all_reduce_perf --explain with NCCL's
#     INIT,ENV lines: the PROFILER/Plugin and TUNER/Plugin lines say whether NCCL loaded our
#     tables from the program (STATIC_PLUGIN), with the capture lines explain printed.
# nccl-tests: NT_BUILD, or NT_BY_VERSION/VERSION when that holds a build against the version's
# own header (ci/nccl-tests-build.sh); each line names the build used.
# One line per run in OUT/matrix.txt: version, program, side, exit code, rows, the
# `Out of bounds values` line's verdict, NCCL's last-error line if any, and structure equality.
#
# PARTS picks what runs (default "programs posing tuning calls"). Every run has its own time
# limit (120 s alone, 240 s on posing ranks), so one stuck run costs no more than that.
#
# usage: [TUNING_RANKS="4 8"] [NT_BY_VERSION=DIR] [PARTS=...] ci/gpu-nccl-matrix.sh DIST NT_BUILD NCCL_DIR OUT
set -u
D=$(cd "$1" && pwd); NT_DEFAULT=$(cd "$2" && pwd); ND=$(cd "$3" && pwd); mkdir -p "$4"; O=$(cd "$4" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
M=$O/matrix.txt
nvidia-smi -L >> "$M"
PARTS=" ${PARTS:-programs posing tuning calls} "
part() { [[ $PARTS == *" $1 "* ]]; }
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
  NT=$NT_DEFAULT
  if [ -n "${NT_BY_VERSION:-}" ] && [ -x "$NT_BY_VERSION/$v/all_reduce_perf" ]; then
    NT=$(cd "$NT_BY_VERSION/$v" && pwd)
  fi
  echo "$v nccl-tests build: $NT" >> "$M"
  if part plugins; then
    NCCL_PERF_LIBNCCL=$lib NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV timeout 120 \
      "$D/all_reduce_perf" -b 8 -e 8 --explain > "$W/plugins.out" 2>&1
    rc=$?
    lines=$(grep -oE '(PROFILER|TUNER)/Plugin: [^.]*' "$W/plugins.out" | sort -u | tr '\n' ';')
    echo "$v one GPU --explain rc=$rc plugin lines: ${lines:-none}" >> "$M"
    grep '^# .*capture:' "$W/plugins.out" | sed "s/^/$v   /" >> "$M"
  fi
  for prog in "$D"/*_perf; do
    part programs || break
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
    part posing || break
    timeout 240 bash "$HERE/vcluster.sh" -n 4 -l torchrun -e NCCL_PERF_LIBNCCL="$lib" -- \
      "$D/${c}_perf" -b 8 -e 4M -f 8 -w 2 -n 5 > "$W/ours.n4.$c.out" 2> "$W/ours.n4.$c.err"
    rc=$?
    line="$v ${c}_perf n4: ours rc=$rc $(facts "$W/ours.n4.$c.out")"
    timeout 240 bash "$HERE/vcluster.sh" -n 4 -l mpirun -e LD_LIBRARY_PATH="$vdir" -- \
      "$NT/${c}_perf" -b 8 -e 4M -f 8 -w 2 -n 5 > "$W/theirs.n4.$c.out" 2> "$W/theirs.n4.$c.err"
    rc=$?
    same=$(python3 "$HERE/one-launch-compare.py" "$W/ours.n4.$c.out" "$W/theirs.n4.$c.out" 2>&1 | grep -c 'structure-equal')
    echo "$line | nccl-tests rc=$rc $(facts "$W/theirs.n4.$c.out") | structure-equal=$same" >> "$M"
  done
  for n in ${TUNING_RANKS:-4}; do
    part tuning || break
    top=64M; [ "$n" -gt 4 ] && top=16M
    for c in all_reduce all_gather reduce_scatter broadcast reduce alltoall; do
      t=tuning.n$n.$c
      mkdir -p "$W/$t"
      timeout 240 bash "$HERE/vcluster.sh" -n "$n" -l torchrun -d "$W/$t" -e NCCL_PERF_LIBNCCL="$lib" \
        -e NCCL_DEBUG=INFO -e NCCL_DEBUG_SUBSYS=TUNING -- \
        "$D/${c}_perf" -b 8 -e $top -f 4 -w 1 -n 2 --explain -J "$W/$t.json" > "$W/$t.out" 2> "$W/$t.err"
      echo "$v ${c}_perf n$n --explain with TUNING: rc=$? tuning-lines=$(grep -c 'Bytes -> Algo' "$W/$t/rank0.out") explain-lines=$(grep -c '^# .*: .*channel' "$W/$t.out")" >> "$M"
      if [ -f "$W/$t.json" ]; then
        python3 "$HERE/explain-vs-tuning.py" "$W/$t.json" "$W/$t/rank0.out" > "$W/$t.compare" 2>&1
        echo "$v ${c}_perf n$n explain vs TUNING: rc=$? $(tail -1 "$W/$t.compare")" >> "$M"
      fi
      rm -f "$W/$t"/rank[1-9].* "$W/$t"/*.pid
    done
  done
  # NCCL's calls per size, ours against nccl-tests' (the harness must add none): both
  # without --explain, the same arguments.
  part calls || continue
  for side in ours theirs; do
    mkdir -p "$W/calls.$side"
    if [ $side = ours ]; then
      timeout 240 bash "$HERE/vcluster.sh" -n 4 -l torchrun -d "$W/calls.ours" -e NCCL_PERF_LIBNCCL="$lib" \
        -e NCCL_DEBUG=INFO -e NCCL_DEBUG_SUBSYS=TUNING -- \
        "$D/all_reduce_perf" -b 8 -e 64M -f 4 -w 1 -n 2 > "$W/calls.ours.out" 2>&1
    else
      timeout 240 bash "$HERE/vcluster.sh" -n 4 -l mpirun -d "$W/calls.theirs" -e LD_LIBRARY_PATH="$vdir" \
        -e NCCL_DEBUG=INFO -e NCCL_DEBUG_SUBSYS=TUNING -- \
        "$NT/all_reduce_perf" -b 8 -e 64M -f 4 -w 1 -n 2 > "$W/calls.theirs.out" 2>&1
    fi
  done
  # Only NCCL's rank 0 logs these lines. Not anchored at the line start: nccl-tests prints a row's
  # first columns before its calls, so the first line of NCCL's after them shares that line.
  calls() { grep -o 'AllReduce: [0-9]* Bytes' "$1" | sort | uniq -c | sort -k3 -n | awk '{printf "%s:%s ", $3, $1}'; }
  ours_calls=$(calls "$W/calls.ours/rank0.out")
  theirs_calls=$(calls "$W/calls.theirs.out")
  same=no; [ -n "$ours_calls" ] && [ "$ours_calls" = "$theirs_calls" ] && same=yes
  echo "$v all_reduce n4 NCCL calls per size (bytes:calls) same=$same ours: $ours_calls| nccl-tests: $theirs_calls" >> "$M"
  rm -f "$W"/calls.*/rank[1-9].* "$W"/calls.*/*.pid
done
cat "$M"
