#!/usr/bin/env bash
# Packs libnccl.so.2 of older NCCL releases for the GPU machine, which has no network: each
# from PyPI's nvidia-nccl-cu12 wheel, compressed with xz and split into parts small enough to
# carry one per device call. ci/nccl-unpack.sh puts them back together there, as the NCCL_DIR
# ci/gpu-drop-in.sh takes (one subfolder per version, each with its libnccl.so.2).
# usage: ci/nccl-pack.sh OUT [PART_MIB] VERSION...   e.g. ci/nccl-pack.sh target/nccl-pack 30 2.17.1 2.23.4
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: ci/nccl-pack.sh OUT [PART_MIB] VERSION..." >&2; exit 2; }
out=$1; shift
part=30
if [[ $1 =~ ^[0-9]+$ ]]; then part=$1; shift; fi
mkdir -p "$out"
for v in "$@"; do
  work=$(mktemp -d)
  python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
    --python-version 3.11 -d "$work" "nvidia-nccl-cu12==$v"
  whl=$(ls "$work"/*.whl)
  python3 - "$whl" "$work/libnccl.so.2" <<'EOF'
import sys, zipfile, shutil
whl, dest = sys.argv[1:]
with zipfile.ZipFile(whl) as z:
    name = next(n for n in z.namelist() if n.endswith("/libnccl.so.2"))
    with z.open(name) as src, open(dest, "wb") as dst:
        shutil.copyfileobj(src, dst)
EOF
  mkdir -p "$out/$v"
  sha256sum "$work/libnccl.so.2" | cut -d' ' -f1 > "$out/$v/libnccl.so.2.sha256"
  xz -T0 -6 -c "$work/libnccl.so.2" | split -b "${part}M" -d - "$out/$v/libnccl.so.2.xz.part-"
  echo "$v: $(du -h "$work/libnccl.so.2" | cut -f1) → $(du -ch "$out/$v"/*.part-* | tail -1 | cut -f1) in $(find "$out/$v" -name '*.part-*' | wc -l) parts"
  rm -rf "$work"
done
