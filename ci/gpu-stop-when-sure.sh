#!/usr/bin/env bash
# The GPU check of --stop-when-sure (issue 40), one GPU, alternating rounds of: the
# five-collective check in one launch with every size at -n, the same with --stop-when-sure,
# and nccl-tests 2.19.6's five launches; then all_reduce alone at -n 100, with and without.
# Wall time and RSS per launch in OUT/summary.txt; the logs for ci/one-launch-compare.py
# (rows >= 64 MiB of the sure run against the full one).
# usage: ci/gpu-stop-when-sure.sh DIST OUT NCCL_TESTS_BUILD   (ROUNDS default 2, PCT default 1)
set -u
D=$(cd "$1" && pwd); mkdir -p "$2"; O=$(cd "$2" && pwd); NT=$(cd "$3" && pwd)
ROUNDS=${ROUNDS:-2}
PCT=${PCT:-1}
LIST=all_reduce,all_gather,reduce_scatter,alltoall,sendrecv
ARGS=(-b 8 -e 8G -f 2 -g 1)
S=$O/summary.txt
: > "$S"
# shellcheck source=ci/gpu-timed.sh
. "$(dirname "$0")/gpu-timed.sh"
for ((i = 1; i <= ROUNDS; i++)); do
  order="full sure theirs"
  ((i % 2)) || order="theirs sure full"
  for side in $order; do
    case $side in
      full) timed "r$i.full" "$D/all_reduce_perf" --collectives "$LIST" "${ARGS[@]}" ;;
      sure) timed "r$i.sure" "$D/all_reduce_perf" --collectives "$LIST" --stop-when-sure "$PCT" "${ARGS[@]}" ;;
      theirs) for c in ${LIST//,/ }; do timed "r$i.theirs.$c" "$NT/${c}_perf" "${ARGS[@]}"; done ;;
    esac
  done
done
timed n100.full "$D/all_reduce_perf" -n 100 -b 64M -e 8G -f 2 -g 1
timed n100.sure "$D/all_reduce_perf" -n 100 -b 64M -e 8G -f 2 -g 1 --stop-when-sure "$PCT"
grep -h "Stop when sure" "$O"/*.out >> "$S"
cat "$S"
