#!/usr/bin/env bash
# Runs the command of each named nccl-tests reference output with our binaries on the GPU
# machine and compares them side by side (structure token by token, time ratios).
# usage: ci/gpu-check.sh DIST OUT NAME...   (DIST holds the binaries, ref/ and side_by_side.py)
set -u
D=$(cd "$1" && pwd); O=$2; shift 2
export NCCL_NVLS_ENABLE=0
export PATH="$D:$PATH"
summary="$O/summary.txt"
for name in "$@"; do
  ref="$D/ref/$name.out"
  cmd=$(head -1 "$ref" | sed 's/^### //')
  out="$O/$name.out"
  (
    cd "$O" || exit 1
    echo "### $cmd"
    # shellcheck disable=SC2086
    /usr/bin/time -v -o "$O/$name.time" $cmd 2>&1
    rc=$?
    grep -E "Elapsed|Maximum resident|Exit status" "$O/$name.time" | sed 's/^\s*/# time -v: /'
    rm -f "$O/$name.time"
    echo "### rc=$rc"
  ) > "$out" 2>&1
  { echo "== $name: $cmd"; python3 "$D/side_by_side.py" "$ref" "$out" | tail -4; echo "rc=$(grep '^### rc=' "$out")"; } >> "$summary" 2>&1
done
cat "$summary"
