#!/usr/bin/env bash
# Builds nccl-tests (an unpacked source tree) against one NCCL version's own header, for the
# GPU machine's compatibility matrix (ci/gpu-nccl-matrix.sh): built against a newer header,
# nccl-tests calls entry points an older library lacks (`undefined symbol: ncclCommRegister`
# on 2.17, `ncclGather` before 2.28). Needs nvcc, make and Open MPI (as on the GPU machine).
# usage: ci/nccl-tests-build.sh NT_SRC NCCL_VERSION_DIR OUT_BUILD
#   NCCL_VERSION_DIR holds libnccl.so.2 and include/nccl.h (ci/nccl-unpack.sh)
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: ci/nccl-tests-build.sh NT_SRC NCCL_VERSION_DIR OUT_BUILD" >&2; exit 2; }
src=$(cd "$1" && pwd); vdir=$(cd "$2" && pwd); mkdir -p "$3"; out=$(cd "$3" && pwd)
[ -f "$vdir/include/nccl.h" ] || { echo "nccl-tests-build: no $vdir/include/nccl.h" >&2; exit 2; }
home=$(mktemp -d)
mkdir -p "$home/lib"
ln -s "$vdir/include" "$home/include"
ln -s "$vdir/libnccl.so.2" "$home/lib/libnccl.so"
ln -s "$vdir/libnccl.so.2" "$home/lib/libnccl.so.2"
make -C "$src/src" -j"$(nproc)" MPI=1 MPI_HOME="${MPI_HOME:-/usr/lib/x86_64-linux-gnu/openmpi}" \
  NCCL_HOME="$home" BUILDDIR="$out" \
  NVCC_GENCODE="${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}" > "$out/build.log" 2>&1 || {
  echo "nccl-tests-build: the build against $vdir/include/nccl.h failed; its first errors ($out/build.log):" >&2
  grep -m5 -E 'error|Error' "$out/build.log" >&2
  exit 1
}
echo "nccl-tests built against $(grep -m1 -o 'NCCL_VERSION_CODE [0-9]*' "$vdir/include/nccl.h" || echo 'an unknown header'): $out"
