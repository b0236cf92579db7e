#!/usr/bin/env bash
# --explain on NCCL 2.22 to 2.26 (docs/explain.md, "Older NCCL"), for every NCCL version unpacked
# in NCCL_DIR (NCCL_DIR/VERSION/libnccl.so.2, from ci/nccl-pack.sh and ci/nccl-unpack.sh):
#   - one GPU: all_reduce_perf --explain with NCCL's plugin lines on (NCCL_DEBUG_SUBSYS=INIT,ENV:
#     "PROFILER/Plugin: ..." and "TUNER/Plugin: Using tuner plugin nccl-perf-explain" say NCCL
#     loaded ours from the program through STATIC_PLUGIN);
#   - 4 ranks posing as hosts (ci/vcluster.sh): all_reduce, all_gather and alltoall with --explain
#     and NCCL's TUNING lines, compared by ci/explain-vs-tuning.py (2.22 and 2.23 log indexes and
#     no channels: the algorithm and protocol are compared; 2.22 has no profiler, so explain shows
#     NCCL's model alone and there is nothing to compare: exit 2 expected).
# No library is needed beside the programs: NCCL 2.22 and later load the plugins from the
# program itself.
# One line per run in OUT/explain-old.txt: version, program, exit code, rows explain saw, rows
# with NCCL's model, the plugin lines, and the comparison's summary.
#
# usage: ci/gpu-explain-old.sh DIST NCCL_DIR OUT
set -u
D=$(cd "$1" && pwd) || exit 2
ND=$(cd "$2" && pwd) || exit 2
mkdir -p "$3" && O=$(cd "$3" && pwd) || exit 2
HERE=$(cd "$(dirname "$0")" && pwd)
M=$O/explain-old.txt
nvidia-smi -L > "$M"
# rows JSON: rows NCCL's profiler reported (algorithm known), rows with NCCL's model, all rows.
rows() {
  python3 - "$1" <<'PY' 2> /dev/null || echo "no JSON"
import json, sys
x = json.load(open(sys.argv[1]))["nccl_perf_explain"]
r = x["rows"]
algo = sum(1 for k in r if k.get("algo"))
model = sum(1 for k in r if k.get("best_pair"))
print(f"rows={len(r)} with-algo={algo} with-model={model}")
PY
}
for vdir in "$ND"/*/; do
  v=$(basename "$vdir")
  lib=$vdir/libnccl.so.2
  [ -f "$lib" ] || continue
  W=$O/$v
  mkdir -p "$W"
  NCCL_PERF_LIBNCCL=$lib NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING timeout 300 \
    "$D/all_reduce_perf" -b 8 -e 64M -f 4 -w 1 -n 2 --explain -J "$W/one.json" \
    > "$W/one.out" 2> "$W/one.err"
  rc=$?
  plugins=$(grep -hoE '(PROFILER|TUNER)/Plugin: [^.]*' "$W/one.out" "$W/one.err" | sort -u | tr '\n' ';')
  echo "$v all_reduce_perf 1 GPU: rc=$rc $(rows "$W/one.json") plugins: ${plugins:-none}" >> "$M"
  grep -h '^# .*capture:\|NCCL.s view' "$W/one.out" | sed "s/^/$v   /" >> "$M"
  for c in all_reduce all_gather alltoall; do
    mkdir -p "$W/tuning.$c"
    bash "$HERE/vcluster.sh" -n 4 -l torchrun -d "$W/tuning.$c" -e NCCL_PERF_LIBNCCL="$lib" \
      -e NCCL_DEBUG=INFO -e NCCL_DEBUG_SUBSYS=TUNING -- \
      "$D/${c}_perf" -b 8 -e 64M -f 4 -w 1 -n 2 --explain -J "$W/tuning.$c.json" \
      > "$W/tuning.$c.out" 2> "$W/tuning.$c.err"
    rc=$?
    python3 "$HERE/explain-vs-tuning.py" "$W/tuning.$c.json" "$W/tuning.$c/rank0.out" \
      > "$W/tuning.$c.compare" 2>&1
    crc=$?
    echo "$v ${c}_perf n4: rc=$rc $(rows "$W/tuning.$c.json") tuning-lines=$(grep -c 'Bytes -> Algo' "$W/tuning.$c/rank0.out") explain-vs-TUNING rc=$crc $(tail -1 "$W/tuning.$c.compare")" >> "$M"
    rm -f "$W/tuning.$c"/rank[1-9].* "$W/tuning.$c"/*.pid
  done
done
cat "$M"
