#!/usr/bin/env bash
# A virtual cluster on one GPU: starts N ranks of one benchmark, each posing as its own host (its
# own UTS namespace and host name `vnodeR`, and NCCL_HOSTID=vnodeR), so NCCL lets them share the
# GPU and runs real collectives between the processes over its socket transport on loopback.
# For correctness, rank logic and faults only: times go through host sockets (no performance).
# Needs root (unshare -u) and, for -l mpirun, OpenMPI's mpirun.
#
# usage: ci/vcluster.sh [options] -- PROGRAM [ARGS...]
#   -n N            ranks (default 4)
#   -l LAUNCHER     mpirun (MPI builds, and nccl-tests), slurm or torchrun (our environment
#                   bootstrap, any build) (default mpirun)
#   -p PORT         rendezvous port for slurm/torchrun (default: 20000 + $$ % 9000)
#   -d DIR          per-rank logs, pid files and exit codes there (rankR.out, rankR.err,
#                   rankR.pid, rankR.rc; no .rc under mpirun);
#                   default: a temporary folder, removed at the end
#   -e VAR=VALUE    extra environment for every rank (repeatable)
#   -r R:VAR=VALUE  extra environment for rank R only (repeatable)
# Output: rank 0's stdout on stdout; every rank's stderr on stderr, each line prefixed with
# `[vnodeR] ` (for mpirun: mpirun's own merged output). Exit status: rank 0's when it failed, else
# the first failing rank's, else 0 (mpirun: mpirun's).
# example: ci/vcluster.sh -n 4 -l slurm -- target/release/all_reduce_perf -b 8 -e 1M -f 4
set -uo pipefail

die() { echo "vcluster: $*" >&2; exit 2; }

# Inside one rank (re-invoked by mpirun or by the loop below): become host vnodeR and exec.
if [ "${1:-}" = "--as-rank" ]; then
  shift
  r=${VCLUSTER_RANK:-${OMPI_COMM_WORLD_RANK:-}}
  [ -n "$r" ] || die "--as-rank without VCLUSTER_RANK or OMPI_COMM_WORLD_RANK"
  # Per-rank extras arrive as VCLUSTER_RANK_ENV_<R>="VAR=VALUE VAR=VALUE" (no spaces in values).
  extra_var="VCLUSTER_RANK_ENV_$r"
  extra=${!extra_var:-}
  [ -n "${VCLUSTER_DIR:-}" ] && echo $$ > "$VCLUSTER_DIR/rank$r.pid"
  # shellcheck disable=SC2086  # the per-rank list is deliberately word-split
  # shellcheck disable=SC2016  # $0 and $@ belong to the inner sh
  exec unshare -u sh -c 'hostname "$0" && exec env "$@"' "vnode$r" NCCL_HOSTID="vnode$r" $extra "$@"
fi

n=4
launcher=mpirun
port=$((20000 + $$ % 9000))
dir=
envs=()
rank_envs=()
while getopts "n:l:p:d:e:r:h" opt; do
  case $opt in
    n) n=$OPTARG ;;
    l) launcher=$OPTARG ;;
    p) port=$OPTARG ;;
    d) dir=$OPTARG ;;
    e) envs+=("$OPTARG") ;;
    r) rank_envs+=("$OPTARG") ;;
    h) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option (see -h)" ;;
  esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
[ $# -ge 1 ] || die "no program given (see -h)"
case $n in ''|*[!0-9]*) die "-n needs a positive number" ;; esac
[ "$n" -ge 1 ] || die "-n needs a positive number"
[ "$(id -u)" = 0 ] || die "needs root (each rank gets its own UTS namespace)"
if [ -z "$dir" ]; then
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
fi
mkdir -p "$dir" || die "cannot create $dir"
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")

# What every rank needs to pose as a host that shares GPU 0 over loopback sockets.
export NCCL_SOCKET_IFNAME=lo NCCL_NVLS_ENABLE=0 NCCL_TESTS_DEVICE=0 VCLUSTER_DIR=$dir
for e in "${envs[@]+"${envs[@]}"}"; do export "${e?}"; done
for re in "${rank_envs[@]+"${rank_envs[@]}"}"; do
  r=${re%%:*}
  v="VCLUSTER_RANK_ENV_$r"
  export "$v=${!v:+${!v} }${re#*:}"
done

case $launcher in
  mpirun)
    command -v mpirun >/dev/null || die "mpirun not found"
    xs=()
    for v in $(env | sed -n 's/^\(NCCL_[A-Za-z0-9_]*\|VCLUSTER_[A-Za-z0-9_]*\)=.*/\1/p'); do
      xs+=(-x "$v")
    done
    for e in "${envs[@]+"${envs[@]}"}"; do xs+=(-x "${e%%=*}"); done
    exec mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$n" "${xs[@]}" \
      "$self" --as-rank "$@"
    ;;
  slurm | torchrun) ;;
  *) die "unknown launcher '$launcher' (mpirun, slurm or torchrun)" ;;
esac

pids=()
for ((r = 0; r < n; r++)); do
  if [ "$launcher" = slurm ]; then
    env SLURM_JOB_ID=4242 SLURM_STEP_ID=0 SLURM_PROCID=$r SLURM_NTASKS="$n" \
      SLURM_STEP_NUM_TASKS="$n" SLURM_LOCALID=0 SLURM_NODEID=$r SLURM_NNODES="$n" \
      SLURM_STEP_NODELIST="vnode[0-$((n - 1))]" NCCL_PERF_RENDEZVOUS="127.0.0.1:$port" \
      VCLUSTER_RANK=$r "$self" --as-rank "$@" > "$dir/rank$r.out" 2> "$dir/rank$r.err" &
  else
    env RANK=$r WORLD_SIZE="$n" LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_RANK=$r \
      MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" TORCHELASTIC_RUN_ID=vcluster$$ \
      VCLUSTER_RANK=$r "$self" --as-rank "$@" > "$dir/rank$r.out" 2> "$dir/rank$r.err" &
  fi
  pids+=($!)
done
rcs=()
for ((r = 0; r < n; r++)); do
  wait "${pids[$r]}"
  rcs+=($?)
  echo "${rcs[$r]}" > "$dir/rank$r.rc"
done
cat "$dir/rank0.out"
for ((r = 0; r < n; r++)); do
  [ "$r" -gt 0 ] && [ -s "$dir/rank$r.out" ] && sed "s/^/[vnode$r stdout] /" "$dir/rank$r.out" >&2
  sed "s/^/[vnode$r] /" "$dir/rank$r.err" >&2
done
[ "${rcs[0]}" -ne 0 ] && exit "${rcs[0]}"
for rc in "${rcs[@]}"; do [ "$rc" -ne 0 ] && exit "$rc"; done
exit 0
