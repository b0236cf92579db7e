#!/usr/bin/env bash
# CI: the README's test command (`cargo test`) in a copy of the committed tree (`git archive
# HEAD`) unpacked into an empty temporary folder, so that a test which reads anything outside
# the repository (a sibling checkout, a file left in the working tree but never committed)
# fails here as it would in a user's fresh clone. It builds in a folder of its own under this
# checkout's target folder (target/fresh-copy): the binaries it makes carry the temporary
# folder's path (CARGO_MANIFEST_DIR), and cargo would otherwise take them for this checkout's
# own and run them here later against a folder that is gone.
#
# Usage: ci/fresh-copy-test.sh [CARGO TEST ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v git >/dev/null 2>&1 || ! git rev-parse --verify -q HEAD >/dev/null; then
  echo "fresh-copy-test: needs git and a checkout with a commit" >&2
  exit 1
fi
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "fresh-copy-test: note: testing the committed tree (HEAD); uncommitted changes are not in it" >&2
fi

target="${CARGO_TARGET_DIR:-$PWD/target}/fresh-copy"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/nccl-perf"
git archive HEAD | tar -x -C "$tmp/nccl-perf"

echo "fresh-copy-test: cargo test $* in $tmp/nccl-perf (nothing beside it)" >&2
(cd "$tmp/nccl-perf" && CARGO_TARGET_DIR="$target" cargo test "$@")
