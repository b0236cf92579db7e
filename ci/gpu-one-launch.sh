#!/usr/bin/env bash
# The GPU check of `--collectives` (issue 40): a five-collective check in one launch of ours
# against the five launches nccl-tests needs (and ours launched five times), alternating, on one
# GPU; then on N ranks posing as hosts on that GPU (ci/vcluster.sh; correctness and launch cost
# only, no bandwidth). Wall time and peak RSS of every launch go to OUT/summary.txt; every log is
# kept for the section-by-section comparison (ci/one-launch-compare.py).
#
# usage: ci/gpu-one-launch.sh DIST OUT NCCL_TESTS_BUILD
#   DIST: our release binaries; NCCL_TESTS_BUILD: nccl-tests 2.19.6 built with MPI=1.
#   ROUNDS (default 3): alternating rounds on one GPU; ARGS (default "-b 8 -e 8G -f 2 -g 1");
#   RANKS (default "4 8"): posing-rank counts, run with PARGS (default "-b 8 -e 8M -f 2 -g 1"),
#   PROUNDS (default 1) rounds each: ours in one launch through the environment bootstrap and
#   under mpirun (the default build meets through PMIx), nccl-tests' five launches under mpirun,
#   ours launched five times. ROUNDS=0 runs only the posing ranks.
set -u
D=$(cd "$1" && pwd); mkdir -p "$2"; O=$(cd "$2" && pwd); NT=$(cd "$3" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
COLLS="all_reduce all_gather reduce_scatter alltoall sendrecv"
LIST=all_reduce,all_gather,reduce_scatter,alltoall,sendrecv
read -r -a ARGS <<< "${ARGS:--b 8 -e 8G -f 2 -g 1}"
read -r -a PARGS <<< "${PARGS:--b 8 -e 8M -f 2 -g 1}"
ROUNDS=${ROUNDS:-3}
RANKS=${RANKS:-4 8}
PROUNDS=${PROUNDS:-1}
export NCCL_NVLS_ENABLE=0
S=$O/summary.txt
: > "$S"

# shellcheck source=ci/gpu-timed.sh
. "$(dirname "$0")/gpu-timed.sh"

# five NAME BIN_DIR [LAUNCH...]: the five programs one after the other.
five() {
  local name=$1 dir=$2; shift 2
  for c in $COLLS; do
    timed "$name.$c" "$@" "$dir/${c}_perf" "${ARGS[@]}"
  done
}

{ nvidia-smi -L; echo "ARGS=${ARGS[*]} PARGS=${PARGS[*]} ROUNDS=$ROUNDS RANKS=$RANKS PROUNDS=$PROUNDS"; } >> "$S"
for ((i = 1; i <= ROUNDS; i++)); do
  order="one theirs five"
  ((i % 2)) || order="theirs five one"
  for side in $order; do
    case $side in
      one) timed "r$i.ours-one" "$D/all_reduce_perf" --collectives "$LIST" "${ARGS[@]}" ;;
      five) five "r$i.ours-five" "$D" ;;
      theirs) five "r$i.theirs-five" "$NT" ;;
    esac
  done
done

# Ranks posing as hosts: ours through the environment bootstrap (torchrun-style) and under
# mpirun, nccl-tests under mpirun; the order turns each round.
ARGS=("${PARGS[@]}")
for n in $RANKS; do
  for ((i = 1; i <= PROUNDS; i++)); do
    order="one one-mpirun theirs five"
    ((i % 2)) || order="theirs five one-mpirun one"
    for side in $order; do
      case $side in
        one) timed "p$n.r$i.ours-one" bash "$HERE/vcluster.sh" -n "$n" -l torchrun -- "$D/all_reduce_perf" --collectives "$LIST" "${ARGS[@]}" ;;
        one-mpirun) timed "p$n.r$i.ours-one-mpirun" bash "$HERE/vcluster.sh" -n "$n" -l mpirun -- "$D/all_reduce_perf" --collectives "$LIST" "${ARGS[@]}" ;;
        theirs) five "p$n.r$i.theirs-five" "$NT" bash "$HERE/vcluster.sh" -n "$n" -l mpirun -- ;;
        five) five "p$n.r$i.ours-five" "$D" bash "$HERE/vcluster.sh" -n "$n" -l torchrun -- ;;
      esac
    done
  done
done
cat "$S"
