#!/usr/bin/env bash
# GPU checks of the multi-process issue on a one-GPU machine: the MPI build under mpirun
# (reference ar_mpirun), the same sweep through the Slurm environment bootstrap, --dry-run, and
# the -J CSV writer end to end. usage: ci/gpu-multi-process.sh DIST OUT (DIST/mpi holds the MPI build)
set -u
D=$(cd "$1" && pwd); O=$2
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ldd "$D/mpi/all_reduce_perf" > "$O/mpi_ldd.txt" 2>&1
PATH="$D/mpi:$PATH" bash "$(dirname "$0")/gpu-check.sh" "$D" "$O" ar_mpirun > /dev/null 2>&1
run() { local name=$1; shift; { echo "### $*"; "$@"; echo "### rc=$?"; } > "$O/$name.out" 2>&1; }
SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_LOCALID=0 run slurm_env "$D/all_reduce_perf" -b 512M -e 8G -f 2 -g 1
run dry_run "$D/all_reduce_perf" --dry-run -b 512M -e 8G -f 2
run mpi_dry_run mpirun -np 1 "$D/mpi/all_reduce_perf" --dry-run -b 8 -e 1M -f 2
(cd "$O" && run csv "$D/all_reduce_perf" -b 1K -e 1M -f 4 -J ar.csv)
run nompi_under_mpirun mpirun -np 2 --oversubscribe "$D/all_reduce_perf" -b 8 -e 8
grep -H '### rc=' "$O"/slurm_env.out "$O"/dry_run.out "$O"/mpi_dry_run.out "$O"/csv.out "$O"/nompi_under_mpirun.out
