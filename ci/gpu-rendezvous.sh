#!/usr/bin/env bash
# The GPU checks of issue 13 (rendezvous): real runs (not --dry-run) over the TCP rendezvous,
# 4 ranks sharing GPU 0 as 4 "hosts" (own UTS namespace and NCCL_HOSTID each, NCCL's socket
# transport on loopback, as ci/vcluster.sh sets up), torchrun-style environment.
#  1. A sound launch with a key (NCCL_PERF_RENDEZVOUS_KEY): exit 0, one table, 4 device lines,
#     `# Out of bounds values : 0 OK`, while a foreign client holds 50 idle connections and sends
#     junk to rank 0's port (bash /dev/tcp).
#  2. Rank 3 with -b 2M (the others -b 1M): every rank exits 6 and rank 0 names
#     `rank 3 runs all_reduce_perf -b 2M; rank 0 runs all_reduce_perf -b 1M`; no table row.
#  3. Rank 3 with a wrong key: rank 3 exits 6 (refused), rank 0 exits 4 naming rank 3.
#  4. With DIST/mpi/all_reduce_perf (a --features mpi build) and mpirun: an MPMD launch
#     (2 x all_reduce_perf : 1 x broadcast_perf) exits 6 naming rank 2.
# usage: ci/gpu-rendezvous.sh DIST OUT   (DIST holds the binaries; OUT gets logs under rendezvous/)
set -u
D=$(cd "$1" && pwd)
mkdir -p "$2"; O=$(cd "$2" && pwd)/rendezvous
rm -rf "$O"; mkdir -p "$O"
export NCCL_NVLS_ENABLE=0 NCCL_SOCKET_IFNAME=lo NCCL_TESTS_DEVICE=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
S="$O/summary.txt"; : > "$S"
fails=0
row() { # check, detail, verdict
  printf '%-44s %-64s %s\n' "$1" "$2" "$3" | tee -a "$S"
  [ "$3" = PASS ] || fails=$((fails + 1))
}
printf '%-44s %-64s %s\n' CHECK DETAIL VERDICT | tee -a "$S"

# rank NAME R PORT KEY BIN ARGS...: one rank in its own UTS namespace, in the background; its
# pid is appended to `pids` (not printed: a rank started inside $(...) would be the subshell's
# child, and `wait` here would answer 127 for it).
rank() {
  local name=$1 r=$2 port=$3 key=$4 bin=$5; shift 5
  env RANK="$r" WORLD_SIZE=4 LOCAL_RANK=0 NCCL_PERF_RENDEZVOUS="127.0.0.1:$port" \
    NCCL_PERF_BOOTSTRAP_TIMEOUT=20 NCCL_PERF_RENDEZVOUS_KEY="$key" TORCHELASTIC_RUN_ID=gpu13 \
    unshare -u sh -c "hostname vnode$r; NCCL_HOSTID=vnode$r exec $bin $*" \
    > "$O/$name.$r.out" 2> "$O/$name.$r.err" &
  pids+=("$!")
}

# 1. Sound launch under a small siege.
port=$((20000 + RANDOM % 12000))  # below the ephemeral range
pids=()
rank ok 0 "$port" k1 "$D/all_reduce_perf" -b 1M -e 8M -f 2 -n 5
sleep 0.5
held=()
for _ in $(seq 1 50); do exec {fd}<>"/dev/tcp/127.0.0.1/$port" 2>/dev/null && held+=("$fd"); done
exec {junk}<>"/dev/tcp/127.0.0.1/$port" && printf 'GET / HTTP/1.1\r\n\r\n' >&"$junk"
for r in 1 2 3; do rank ok "$r" "$port" k1 "$D/all_reduce_perf" -b 1M -e 8M -f 2 -n 5; done
start=$SECONDS
rcs=""; for p in "${pids[@]}"; do wait "$p"; rcs="$rcs$?"; done
for fd in "${held[@]}" "$junk"; do exec {fd}>&-; done
devs=$(grep -c '^#  Rank' "$O/ok.0.out")
oob=$(grep -c 'Out of bounds values : 0 OK' "$O/ok.0.out")
detail="rc=$rcs device lines=$devs 0-OK=$oob took=$((SECONDS - start))s"
[ "$rcs" = 0000 ] && [ "$devs" = 4 ] && [ "$oob" = 1 ] && v=PASS || v=FAIL
row "1 sound launch, 50 idle + junk connections" "$detail" "$v"

# 2. Rank 3 runs other options.
port=$((20000 + RANDOM % 12000))  # below the ephemeral range
pids=()
for r in 0 1 2; do rank opt "$r" "$port" k2 "$D/all_reduce_perf" -b 1M -e 1M -n 5; done
rank opt 3 "$port" k2 "$D/all_reduce_perf" -b 2M -e 2M -n 5
rcs=""; for p in "${pids[@]}"; do wait "$p"; rcs="$rcs$?"; done
named=$(grep -c 'rank 3 runs all_reduce_perf -b 2M; rank 0 runs all_reduce_perf -b 1M' "$O/opt.0.err")
[ "$rcs" = 6666 ] && [ "$named" -ge 1 ] && v=PASS || v=FAIL
row "2 rank 3 with -b 2M" "rc=$rcs named=$named" "$v"

# 3. Rank 3 with a wrong key.
port=$((20000 + RANDOM % 12000))  # below the ephemeral range
pids=()
for r in 0 1 2; do rank key "$r" "$port" right "$D/all_reduce_perf" -b 1M -e 1M -n 5; done
rank key 3 "$port" wrong "$D/all_reduce_perf" -b 1M -e 1M -n 5
rcs=""; for p in "${pids[@]}"; do wait "$p"; rcs="$rcs$?"; done
named=$(grep -c 'missing: rank 3' "$O/key.0.err")
[ "${rcs:0:1}" = 4 ] && [ "${rcs:3:1}" = 6 ] && [ "$named" -ge 1 ] && v=PASS || v=FAIL
row "3 rank 3 with a wrong key" "rc=$rcs named=$named" "$v"

# 4. MPMD under mpirun (MPI build only).
if [ -x "$D/mpi/all_reduce_perf" ] && command -v mpirun >/dev/null; then
  timeout 120 mpirun --allow-run-as-root --oversubscribe \
    -np 2 "$D/mpi/all_reduce_perf" -b 1M -e 1M : -np 1 "$D/mpi/broadcast_perf" -b 2M -e 2M \
    > "$O/mpmd.out" 2>&1
  rc=$?
  named=$(grep -c 'rank 2 runs broadcast_perf -b 2M; rank 0 runs all_reduce_perf -b 1M' "$O/mpmd.out")
  [ "$rc" = 6 ] && [ "$named" -ge 1 ] && v=PASS || v=FAIL
  row "4 mpirun MPMD, other binary on rank 2" "rc=$rc named=$named" "$v"
else
  row "4 mpirun MPMD" "skipped: no DIST/mpi/all_reduce_perf or mpirun" SKIP
  fails=$((fails - 1))
fi
echo "failures: $fails (logs in $O)" | tee -a "$S"
[ "$fails" = 0 ]
