#!/usr/bin/env bash
# CI: `cargo install` gives every *_perf benchmark of src/bin/ and nccl-perf, with and without the
# mpi feature, and install-layout.sh lays out what it installed. Debug profile and the usual
# target folder, so what `cargo build`/`cargo test` compiled before is reused.
#
# Usage: ci/check-install.sh [--features mpi]
set -euo pipefail
cd "$(dirname "$0")/.."

features=()
layout=()
if [ "${1:-}" = --features ] && [ -n "${2:-}" ]; then
  features=(--features "$2")
  case ",$2," in *,mpi,*) layout=(--mpi) ;; esac
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

cargo install --quiet --path . --debug --locked --root "$tmp/root" \
  --target-dir "${CARGO_TARGET_DIR:-target}" "${features[@]}"

# The programs are src/bin/'s (tests/benchmarks.rs checks them against the benchmark table).
mapfile -t expected < <(find src/bin -maxdepth 1 -name '*.rs' -printf '%f\n' | sed 's/\.rs$//' | sort)
mapfile -t got < <(find "$tmp/root/bin" -maxdepth 1 -type f -executable -printf '%f\n' | sort)
if [ "${got[*]}" != "${expected[*]}" ]; then
  echo "check-install: cargo install ${features[*]} installed: ${got[*]}" >&2
  echo "check-install: expected: ${expected[*]}" >&2
  exit 1
fi

ci/install-layout.sh --from "$tmp/root/bin" "${layout[@]}" "$tmp/opt/nccl-tests"
suffix=""
[ ${#layout[@]} -eq 0 ] || suffix=_mpi
usage="$("$tmp/opt/nccl-tests/build/all_reduce_perf$suffix" -h)"
case "$usage" in
  "USAGE: all_reduce_perf$suffix "*) ;;
  *) echo "check-install: unexpected usage text: ${usage%%$'\n'*}" >&2; exit 1 ;;
esac
"$tmp/opt/nccl-tests/build/nccl-perf" --version >/dev/null
echo "check-install: cargo install ${features[*]:-(default features)}: ${#got[@]} programs, laid out in PREFIX/build"
