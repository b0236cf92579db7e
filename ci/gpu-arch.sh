#!/usr/bin/env bash
# The GPU checks of issue 15 (architecture: GPU layer, core, runner phases), one H200:
#  1. the exact-data generator against its host mirror (tests/gpu_generator.rs, if built);
#  2. every single-GPU reference command of tests/golden (nccl-tests 2.19.6 on this machine
#     kind) with our binaries: structure token by token (side_by_side.py), and each row of
#     1 GiB or more within 1 % of the reference's out-of-place time (ar_sweep: the medians of
#     four runs each);
#  3. error paths: no NCCL, a device that does not exist, -c 0.
# usage: ci/gpu-arch.sh DIST OUT [GPU_GENERATOR_TEST_BINARY]
#   DIST holds our release binaries and side_by_side.py; OUT gets arch/ with the logs.
set -u
D=$(cd "$1" && pwd); mkdir -p "$2"; O=$(cd "$2" && pwd)/arch; GEN=${3:-}
rm -rf "$O"; mkdir -p "$O"
here=$(cd "$(dirname "$0")" && pwd)
golden=$here/../tests/golden/nccl-tests-2.19.6-h200
export NCCL_NVLS_ENABLE=0
S=$O/summary.txt; : > "$S"
if [ -n "$GEN" ]; then
  "$GEN" --nocapture > "$O/gpu_generator.txt" 2>&1
  echo "gpu_generator rc=$? $(grep -m1 'test result' "$O/gpu_generator.txt")" | tee -a "$S"
fi
rm -rf "$D/ref"; mkdir -p "$D/ref"; cp "$golden"/*.out "$D/ref/"
names="ar_sweep ar_sweep_run2 ar_sweep_run3 ar_sweep_run4 ag_seed ar_json ar_step ar_iters ag_dtypes ar_alltypes ar_blocking ar_graph ar_perit
  ar_root_all alltoall_small alltoallv_small broadcast_small gather_small hypercube_small
  reduce_scatter_small reduce_small scatter_small sendrecv_small"
# shellcheck disable=SC2086  # the list is meant to split
bash "$here/gpu-check.sh" "$D" "$O" $names > /dev/null 2>&1
cat "$O/summary.txt" >> "$S"
# Rows of 1 GiB and more, out-of-place time: the median of our four ar_sweep runs against the
# median of the four reference runs (the sizes' first rows wander by up to 10 % in a single run
# of either program); single runs of the other commands against their one reference run.
python3 - "$D/ref" "$O" >> "$S" <<'PY'
import glob, os, statistics, sys
ref_dir, out_dir = sys.argv[1], sys.argv[2]
def rows(path):
    r = {}
    for line in open(path, errors="replace"):
        t = line.split()
        if len(t) >= 13 and t[0].isdigit() and int(t[0]) >= 1 << 30:
            try:
                r[(int(t[0]), t[2], t[3])] = float(t[5])
            except ValueError:
                pass
    return r
def runs(d, pattern):
    out = {}
    for p in sorted(glob.glob(os.path.join(d, pattern))):
        for k, v in rows(p).items():
            out.setdefault(k, []).append(v)
    return out
bad = 0
ours, theirs = runs(out_dir, "ar_sweep*.out"), runs(ref_dir, "ar_sweep*.out")
for k in sorted(theirs):
    o = ours.get(k, [])
    if not o:
        print(f"FAIL 1GiB ar_sweep {k[0]}: no rows of ours"); bad += 1; continue
    mo, mt = statistics.median(o), statistics.median(theirs[k])
    ok = abs(mo / mt - 1) <= 0.01
    bad += not ok
    print(f"{'PASS' if ok else 'FAIL'} 1GiB ar_sweep {k[0]} {k[1]} {k[2]}: median of {len(o)} runs "
          f"ours {mo:.2f} us ({min(o):.2f}..{max(o):.2f}), nccl-tests {mt:.2f} us "
          f"({min(theirs[k]):.2f}..{max(theirs[k]):.2f}), ratio {mo / mt:.4f}")
for p in sorted(glob.glob(os.path.join(out_dir, "*.out"))):
    name = os.path.basename(p)[:-4]
    ref = os.path.join(ref_dir, name + ".out")
    if name.startswith("ar_sweep") or not os.path.exists(ref):
        continue
    o, t = rows(p), rows(ref)
    for k in sorted(t):
        if k not in o:
            print(f"FAIL 1GiB {name} {k[0]}: row missing"); bad += 1; continue
        r = o[k] / t[k]
        print(f"{'PASS' if abs(r - 1) <= 0.01 else 'NOTE'} 1GiB {name} {k[0]} {k[1]} {k[2]}: "
              f"one run each, ours {o[k]:.2f} us, nccl-tests {t[k]:.2f} us, ratio {r:.4f}")
print(f"1GiB rows of ar_sweep outside 1 %: {bad}")
PY
{ "$D/all_reduce_perf" -b 8 -e 8 -c 0; echo "rc=$?"
  NCCL_PERF_LIBNCCL=/nonexistent/libnccl.so.2 "$D/all_reduce_perf" -b 8 -e 8; echo "rc=$?"
  NCCL_TESTS_DEVICE=3 "$D/all_reduce_perf" -b 8 -e 8; echo "rc=$?"
} > "$O/errors.txt" 2>&1
grep -c . "$O/errors.txt" > /dev/null && echo "errors: $(grep -o 'rc=[0-9]*' "$O/errors.txt" | tr '\n' ' ')" | tee -a "$S"
cat "$S"
