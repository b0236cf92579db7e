#!/usr/bin/env bash
# Puts the parts made by ci/nccl-pack.sh back together on the GPU machine: PACK/VERSION/*.part-*
# → NCCL_DIR/VERSION/libnccl.so.2, checked against the recorded SHA-256, and the version's
# headers (PACK/VERSION/include.tar.xz) → NCCL_DIR/VERSION/include. Versions whose parts are not
# all there yet are left out (and named).
# usage: ci/nccl-unpack.sh PACK NCCL_DIR
set -euo pipefail
pack=$1; dir=$2
mkdir -p "$dir"
for d in "$pack"/*/; do
  v=$(basename "$d")
  [ -e "$d/libnccl.so.2.sha256" ] || continue
  mkdir -p "$dir/$v"
  if cat "$d"/libnccl.so.2.xz.part-* | xz -d > "$dir/$v/libnccl.so.2" 2>/dev/null \
    && [ "$(sha256sum "$dir/$v/libnccl.so.2" | cut -d' ' -f1)" = "$(cat "$d/libnccl.so.2.sha256")" ]; then
    if [ -f "$d/include.tar.xz" ]; then
      tar xJf "$d/include.tar.xz" -C "$dir/$v"
    fi
    echo "$v: $dir/$v/libnccl.so.2"
  else
    rm -rf "${dir:?}/$v"
    echo "$v: incomplete or damaged, left out" >&2
  fi
done
