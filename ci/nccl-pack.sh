#!/usr/bin/env bash
# Packs libnccl.so.2 of older NCCL releases for the GPU machine, which has no network: each
# from PyPI's nvidia-nccl-cu12 wheel, compressed with xz and split into parts small enough to
# carry one per device call. ci/nccl-unpack.sh puts them back together there, as the NCCL_DIR
# ci/gpu-drop-in.sh takes (one subfolder per version, each with its libnccl.so.2).
# PRUNE_SM=90 keeps only that architecture's device code (ci/prune-fatbin.py: the library then
# packs to a fraction, one version per call beside the binaries); the checksum is the pruned
# library's. Wheels from 2.28 on carry manylinux_2_18/2_27/2_28 tags: all are asked for.
# The wheel's headers travel too (OUT/VERSION/include.tar.xz: nccl.h, and from 2.28 the
# nccl_device.h family nccl-tests includes): nccl-tests built against each version's own
# headers (ci/nccl-tests-build.sh) calls only what that version has.
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
    --platform manylinux_2_18_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_28_x86_64 --python-version 3.11 -d "$work" "nvidia-nccl-cu12==$v"
  whl=$(ls "$work"/*.whl)
  python3 - "$whl" "$work/libnccl.so.2" <<'EOF'
import sys, zipfile, shutil
whl, dest = sys.argv[1:]
with zipfile.ZipFile(whl) as z:
    name = next(n for n in z.namelist() if n.endswith("/libnccl.so.2"))
    with z.open(name) as src, open(dest, "wb") as dst:
        shutil.copyfileobj(src, dst)
    header = next(n for n in z.namelist() if n.endswith("/include/nccl.h"))
    prefix = header[: -len("nccl.h")]
    for n in z.namelist():
        if n.startswith(prefix) and not n.endswith("/"):
            z.extract(n, dest.rsplit("/", 1)[0] + "/x")
    shutil.move(dest.rsplit("/", 1)[0] + "/x/" + prefix, dest.rsplit("/", 1)[0] + "/include")
EOF
  if [ -n "${PRUNE_SM:-}" ]; then
    python3 "$(dirname "$0")/prune-fatbin.py" "$work/libnccl.so.2" "$work/pruned" "$PRUNE_SM" >&2
    mv "$work/pruned" "$work/libnccl.so.2"
  fi
  mkdir -p "$out/$v"
  sha256sum "$work/libnccl.so.2" | cut -d' ' -f1 > "$out/$v/libnccl.so.2.sha256"
  tar cJf "$out/$v/include.tar.xz" -C "$work" include
  xz -T0 -6 -c "$work/libnccl.so.2" | split -b "${part}M" -d - "$out/$v/libnccl.so.2.xz.part-"
  echo "$v: $(du -h "$work/libnccl.so.2" | cut -f1) → $(du -ch "$out/$v"/*.part-* | tail -1 | cut -f1) in $(find "$out/$v" -name '*.part-*' | wc -l) parts"
  rm -rf "$work"
done
