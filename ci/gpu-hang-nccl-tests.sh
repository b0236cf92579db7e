#!/usr/bin/env bash
# nccl-tests 2.19.6 beside the hang watch (issue 49): built from its public source on the GPU
# machine, run on 4 ranks posing as hosts under mpirun with rank 2's network data sends
# stopped (ci/hang-shim.c), by default (it waits; killed after KILL_S) and with -T 20.
# Prints what each did (exit status, wall time, its lines naming a timeout) into
# OUT/hang-nccl-tests.txt.
# usage: ci/gpu-hang-nccl-tests.sh NT_SRC OUT [KILL_S]
set -u
src=$(cd "$1" && pwd); O=$(cd "$2" && pwd); KILL=${3:-60}
here=$(cd "$(dirname "$0")" && pwd)
R="$O/hang-nccl-tests.txt"; : > "$R"
W=$(mktemp -d)
gcc -shared -fPIC -O2 -o "$W/hang-shim.so" "$here/hang-shim.c" -ldl
make -C "$src/src" -j"$(nproc)" MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi BUILDDIR="$W/nt" \
  NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90 > "$W/build.log" 2>&1 \
  || { echo "build failed" >> "$R"; tail -5 "$W/build.log" >> "$R"; exit 1; }
for t in 0 20; do
  t0=$EPOCHREALTIME
  timeout -s KILL "$KILL" bash "$here/vcluster.sh" -n 4 -l mpirun -r "2:LD_PRELOAD=$W/hang-shim.so" \
    -r 2:HANGSHIM_AFTER_MS=9000 -- "$W/nt/all_reduce_perf" -b 1M -e 1M -n 200 -N 0 -T "$t" \
    > "$W/T$t.out" 2>&1
  rc=$?
  wall=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  {
    echo "## nccl-tests -T $t: exit $rc (137 = killed by us at $KILL s), wall $wall s"
    grep -E "timeout|Timeout|hang|rank" "$W/T$t.out" | grep -v "^#  Rank" | head -8 | sed 's/^/##   /'
  } >> "$R"
  pkill -9 -f "$W/nt/all_reduce_perf" 2>/dev/null || true
  pkill -9 -f mpirun 2>/dev/null || true
  sleep 1
done
cat "$R"
