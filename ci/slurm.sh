#!/usr/bin/env bash
# A real one-node Slurm (Debian's slurm-wlm: slurmctld and slurmd as root, auth/none, ports of
# its own, everything under a temporary folder) and nccl-perf's launches through it, without a
# GPU. Run by .ci/run as root; tests/bootstrap.rs keeps the tests with Slurm's variables set by
# hand for what a real Slurm cannot show (several nodes, odd node lists).
#
# Usage: ci/slurm.sh DEFAULT_BIN MPI_BIN
#   DEFAULT_BIN  a folder with all_reduce_perf built with --features test-hooks (no MPI)
#   MPI_BIN      a folder with all_reduce_perf built with --features mpi,test-hooks
#
# Checks (one PASS/FAIL line each, then the exit status is 1 if any failed):
#   nebius-srun   the Nebius recipe's srun line (its benchmark and arguments; the pyxis options
#                 need pyxis): 8 tasks on the node form one job of 8 ranks (default build)
#   mpi-plain     the MPI build under plain srun meets through Slurm's environment
#   mpi-pmix      the MPI build under srun --mpi=pmix meets through MPI
#   default-pmi2  the default build under srun --mpi=pmi2 meets through Slurm's PMI-1 wire-up
#   default-pmix  the default build under srun --mpi=pmix meets through PMIx (libpmix.so.2)
#   pmix-nolib    the same with NCCL_PERF_PMIX_LIB naming no file: Slurm's variables instead
#   pmi2lib-4, pmi2lib-16
#                 the default build under srun --mpi=pmi2 with NCCL_PERF_BOOTSTRAP=pmi2: 4 and
#                 16 processes meet through Slurm's PMI-2 library (libpmi2-0's libpmi2.so.0),
#                 the engine Cray's PALS gets from Cray PMI
#   sbatch        examples/slurm/all_reduce_env.sbatch (one node, a task per CPU up to 4, no
#                 GPUs asked of Slurm): its
#                 dry run forms the job, its real run stops with exit 2 (no GPU here)
#   scancel       a job step paused after its bootstrap is cancelled: srun ends, every rank
#                 exits 143 (SIGTERM) and the -J JSON file is complete JSON
#   time-limit    the same ended by the job's time limit
# SLURM_SH_QUICK=1 leaves out the time-limit check (it waits for Slurm's one-minute limit).
# Where the cluster itself cannot start (not the product's fault), the script says so, prints
# the daemons' logs and exits 0 with nothing checked; CI=true makes it exit 1 instead only when
# slurm-wlm is not installed.
set -euo pipefail

default_bin="$(cd "${1:?usage: ci/slurm.sh DEFAULT_BIN MPI_BIN}" && pwd)"
mpi_bin="$(cd "${2:?usage: ci/slurm.sh DEFAULT_BIN MPI_BIN}" && pwd)"
repo="$(cd "$(dirname "$0")/.." && pwd)"

for tool in slurmctld slurmd srun sbatch scancel squeue sinfo python3; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "slurm.sh: $tool is not installed (apt-get install slurm-wlm)" >&2
    exit 1
  fi
done

work="$(mktemp -d)"
ctld_pid=""
slurmd_pid=""
# shellcheck disable=SC2317 # called by the EXIT trap
stop() {
  local pid
  for pid in $slurmd_pid $ctld_pid; do
    kill "$pid" 2>/dev/null || true
  done
  for _ in $(seq 40); do
    local alive=0
    for pid in $slurmd_pid $ctld_pid; do
      if kill -0 "$pid" 2>/dev/null; then alive=1; fi
    done
    [ "$alive" = 0 ] && break
    sleep 0.25
  done
  rm -rf "$work" 2>/dev/null || true
}
trap stop EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

host="$(uname -n)"
host="${host%%.*}"
mkdir -p "$work/state" "$work/spool"
cat >"$work/slurm.conf" <<EOF
ClusterName=nccl-perf-ci
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait=5
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=ci Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:16
EOF
export SLURM_CONF="$work/slurm.conf"

cluster_failed() {
  echo "slurm.sh: warning: the one-node Slurm did not start ($1); nothing was checked. Logs:" >&2
  tail -n 20 "$work"/*.log >&2 2>/dev/null || true
  exit 0
}

slurmctld -f "$SLURM_CONF" || cluster_failed "slurmctld exited"
slurmd -f "$SLURM_CONF" || cluster_failed "slurmd exited"
for _ in $(seq 60); do
  [ -s "$work/slurmctld.pid" ] && [ -s "$work/slurmd.pid" ] && break
  sleep 0.5
done
ctld_pid="$(cat "$work/slurmctld.pid" 2>/dev/null || true)"
slurmd_pid="$(cat "$work/slurmd.pid" 2>/dev/null || true)"
if [ -z "$ctld_pid" ] || [ -z "$slurmd_pid" ]; then
  cluster_failed "no pid files after 30 s"
fi
state=""
for _ in $(seq 60); do
  state="$(sinfo -h -o %T 2>/dev/null || true)"
  [ "$state" = idle ] && break
  sleep 0.5
done
[ "$state" = idle ] || cluster_failed "the node is '$state' after 30 s"
echo "slurm.sh: one-node Slurm up ($(srun --version)), node $host idle"

failed=0
pass() { echo "PASS $1"; }
fail() {
  echo "FAIL $1: $2"
  failed=1
}
out="$work/out"
err="$work/err"
# Every srun is bounded: a hung step fails its check instead of CI.
bounded() { timeout -k 10 "${BOUND:-120}" "$@"; }

# The recipe's benchmark and arguments, 8 tasks on the one node (the node's 8 GPUs, by index).
export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7
export NCCL_PERF_BOOTSTRAP_TIMEOUT=60
nebius=(-b 512M -e 8G -f 2 -g 1)

plan_ok() { # $1 ranks, $2 bootstrap line
  grep -q "^# Processes $1 x threads 1 x GPUs 1 = $1 ranks in 1 communicator(s)" "$out" &&
    grep -q "^# Bootstrap: $2" "$out" &&
    grep -q "^# Dry run complete: the launch is consistent" "$out" &&
    [ "$(grep -c '^# nccl-perf dry run' "$out")" = 1 ]
}

if bounded srun -n 8 --overcommit "$default_bin/all_reduce_perf" "${nebius[@]}" --dry-run >"$out" 2>"$err" &&
  plan_ok 8 "slurm environment"; then
  pass nebius-srun
else
  fail nebius-srun "$(cat "$out" "$err")"
fi

if bounded srun -n 4 --overcommit "$mpi_bin/all_reduce_perf" "${nebius[@]}" --dry-run >"$out" 2>"$err" &&
  plan_ok 4 "slurm environment"; then
  pass mpi-plain
else
  fail mpi-plain "$(cat "$out" "$err")"
fi

if bounded srun --mpi=pmix -n 4 --overcommit "$mpi_bin/all_reduce_perf" "${nebius[@]}" --dry-run >"$out" 2>"$err" &&
  plan_ok 4 "MPI"; then
  pass mpi-pmix
else
  fail mpi-pmix "$(cat "$out" "$err")"
fi

# The default build (no MPI linked) under srun's own wire-up: PMI-1 over PMI_FD, PMIx through
# the libpmix.so.2 Slurm's plugin serves; rank 0 publishes its port and a token through it.
if bounded srun --mpi=pmi2 -n 4 --overcommit "$default_bin/all_reduce_perf" "${nebius[@]}" --dry-run >"$out" 2>"$err" &&
  plan_ok 4 "PMI-1 wire-up"; then
  pass default-pmi2
else
  fail default-pmi2 "$(cat "$out" "$err")"
fi

if bounded srun --mpi=pmix -n 4 --overcommit "$default_bin/all_reduce_perf" "${nebius[@]}" --dry-run >"$out" 2>"$err" &&
  plan_ok 4 "PMIx wire-up"; then
  pass default-pmix
else
  fail default-pmix "$(cat "$out" "$err")"
fi

if NCCL_PERF_PMIX_LIB=/nonexistent/libpmix.so.2 bounded srun --mpi=pmix -n 4 --overcommit \
  "$default_bin/all_reduce_perf" "${nebius[@]}" --dry-run >"$out" 2>"$err" &&
  plan_ok 4 "slurm environment"; then
  pass pmix-nolib
else
  fail pmix-nolib "$(cat "$out" "$err")"
fi

# The PMI-2 library engine (Cray PMI under PALS) against a real PMI-2 server: Slurm's
# libpmi2.so.0 (Debian's libpmi2-0) under srun --mpi=pmi2, forced (srun's PMI_FD alone would
# choose the PMI-1 wire-up). 16 processes need 16 visible GPUs (the dry run checks one each).
for n in 4 16; do
  if CUDA_VISIBLE_DEVICES="$(seq -s , 0 $((n - 1)))" NCCL_PERF_BOOTSTRAP=pmi2 bounded srun --mpi=pmi2 -n "$n" --overcommit \
    "$default_bin/all_reduce_perf" "${nebius[@]}" --dry-run >"$out" 2>"$err" &&
    plan_ok "$n" "PMI-2 library to start"; then
    pass "pmi2lib-$n"
  else
    fail "pmi2lib-$n" "$(cat "$out" "$err")"
  fi
done

# The example job script, on one node with one task per CPU, at most 4 (sbatch refuses more
# tasks per node than CPUs, --overcommit or not), and its #SBATCH --gpus-per-node line left
# out (this node has no GPUs for Slurm to hand out): its dry run forms the job; its real run
# has no GPU to use and must stop with exit 2 (CUDA), which fails the job.
tasks="$(nproc)"
[ "$tasks" -le 4 ] || tasks=4
job_out="$work/sbatch.out"
grep -v '^#SBATCH --gpus-per-node=' "$repo/examples/slurm/all_reduce_env.sbatch" >"$work/job.sbatch"
rc=0
bounded sbatch --wait --nodes=1 --ntasks-per-node="$tasks" \
  --output="$job_out" --export=ALL,NCCL_TESTS_BUILD="$default_bin" \
  "$work/job.sbatch" >"$out" 2>"$err" || rc=$?
if [ "$rc" = 2 ] && grep -q "^# Processes $tasks x threads 1 x GPUs 1 = $tasks ranks" "$job_out" &&
  grep -q "^# Dry run complete: the launch is consistent" "$job_out"; then
  pass sbatch
else
  fail sbatch "sbatch exit $rc: $(cat "$out" "$err" "$job_out" 2>/dev/null)"
fi

# A job step paused after its bootstrap (test hook), ended from outside: every rank exits 143
# and rank 0's JSON file is whole. $1: scancel or time-limit.
ended_from_outside() {
  local name="$1" json="$work/$1.json" step_rc=0 id
  rm -f "$json"
  local srun_args=(-n 2 --overcommit --job-name="nccl-perf-$name" --kill-on-bad-exit=0)
  if [ "$name" = time-limit ]; then
    srun_args+=(--time=1)
  fi
  # The time limit is enforced at slurmctld's next check (up to a minute past it) plus KillWait.
  NCCL_PERF_TEST_PAUSE_MS=600000 BOUND=300 bounded srun "${srun_args[@]}" \
    "$default_bin/all_reduce_perf" -b 1M -e 1M -J "$json" >"$out" 2>"$err" &
  local srun_pid=$!
  # Wait (bounded) until both ranks say they are paused, then end the job.
  for _ in $(seq 120); do
    [ "$(grep -c 'NCCL_PERF_TEST_PAUSE_MS' "$err" 2>/dev/null || true)" -ge 2 ] && break
    sleep 0.5
  done
  if [ "$name" = scancel ]; then
    id="$(squeue -h -n "nccl-perf-$name" -o %i | head -n 1)"
    [ -n "$id" ] && scancel --signal=TERM --full "$id" && sleep 1 && scancel "$id"
  fi
  wait "$srun_pid" || step_rc=$?
  if [ "$step_rc" != 0 ] && [ "$step_rc" != 124 ] &&
    grep -q 'tasks 0-1: Exited with exit code 143' "$err" &&
    [ -s "$json" ] && python3 -m json.tool "$json" >/dev/null; then
    pass "$name"
    if [ -n "${SLURM_SH_VERBOSE:-}" ]; then cat "$out" "$err"; ls -l "$json" 2>&1 || true; fi
  else
    fail "$name" "srun exit $step_rc: $(cat "$out" "$err")"
  fi
}
ended_from_outside scancel
[ -n "${SLURM_SH_QUICK:-}" ] || ended_from_outside time-limit

exit "$failed"
