#!/usr/bin/env bash
# The GPU checks of issue 18 (drop-in where nccl-tests runs), in one call.
#  1. Validation without NVRTC: in a private mount namespace every libnvrtc file on the machine
#     (the loader cache's, /usr/local/cuda*, pip wheels, LD_LIBRARY_PATH) is covered by an empty
#     file, which is then confirmed by a failing dlopen of every libnvrtc name. There, validated
#     runs of every binary (and all_reduce -d all -o all) must take the bundled PTX (the stderr
#     note says so), show #wrong 0 and `Out of bounds values : 0 OK`, exit 0; with
#     NCCL_PERF_CORRUPT=out:0 they must find the planted error (#wrong 1, exit 7) — the
#     JIT-built checker really checks. The first run goes with CUDA_CACHE_DISABLE=1: its wall
#     time is the cold JIT cost.
#  2. An NVRTC that fails (a stand-in from tests/fakes/fake_nvrtc.c, built with cc, first on
#     LD_LIBRARY_PATH inside the namespace): the note names the failure; the run validates.
#  3. Control: with the real NVRTC the note says `compiled by NVRTC ...`; #wrong 0.
#  4. Older NCCLs: for every NCCL_DIR/*/libnccl.so.2 (and the system one), NCCL_PERF_LIBNCCL=path:
#     the version line, every binary validated (#wrong 0, exit 0), and the version rules:
#     -R 1 / -R 2 / -x 2 fall back with upstream's message where the version lacks them, and
#     `-d all` drops fp8 before 2.24.
# Prints a summary table; exit status 0 when every check passed.
# usage: ci/gpu-drop-in.sh DIST OUT [NCCL_DIR]   (run as root: unshare -m needs it)
set -u
D=$(cd "$1" && pwd)
mkdir -p "$2"; O=$(cd "$2" && pwd)/issue18
NCCL_DIR=${3:-}
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$O"; mkdir -p "$O"
export NCCL_NVLS_ENABLE=0
S="$O/summary.txt"; : > "$S"
BINS="all_reduce all_gather broadcast reduce_scatter reduce alltoall alltoallv scatter gather sendrecv hypercube"

row() { # check, detail, verdict
  printf '%-44s %-70s %s\n' "$1" "$2" "$3" | tee -a "$S"
}
# verdict FILE RC_WANT WRONG_WANT: PASS when the exit status, every row's #wrong halves (N/A
# allowed for the in-place half) and the out-of-bounds line agree; else FAIL with the reason.
verdict() {
  local f=$1 want_rc=$2 want_w=$3 rc rows bad
  rc=$(sed -n 's/^### rc=//p' "$f" | tail -1)
  read -r rows bad < <(awk -v w="$want_w" '
    /^#/ || NF < 12 || $1 !~ /^[0-9]+$/ { next }
    { rows++; if ($(NF-4) != w || ($NF != w && $NF != "N/A" && !(w == 1 && $NF == 0))) bad++ }
    END { printf "%d %d\n", rows + 0, bad + 0 }' "$f")
  if [ "$rc" != "$want_rc" ]; then echo "FAIL(rc=$rc)"
  elif [ "$rows" -eq 0 ]; then echo "FAIL(no rows)"
  elif [ "$bad" -ne 0 ]; then echo "FAIL($bad/$rows rows)"
  else echo PASS; fi
}
note_of() { grep -m1 'validation kernels' "$1" | sed 's/^[^:]*: validation kernels: //' | cut -c1-70; }

printf '%-44s %-70s %s\n' CHECK DETAIL VERDICT | tee -a "$S"

# --- 1 and 2: inside a mount namespace with NVRTC hidden -------------------------------------
cat > "$O/hidden.sh" <<'EOF'
#!/usr/bin/env bash
# Runs inside `unshare -m`: hides every libnvrtc, proves it, runs the binaries.
set -u
D=$1 O=$2 BINS=$3 FAKES=$4
mount --make-rprivate / 2>/dev/null
: > "$O/hidden.list"
: > "$O/empty"
{
  ldconfig -p | awk '/libnvrtc/ { print $NF }'
  find /usr /opt /lib /lib64 /root /home /workspace ${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH//:/ }} \
    -name 'libnvrtc*' \( -type f -o -type l \) 2>/dev/null
} | while read -r p; do readlink -f "$p"; done | sort -u | while read -r f; do
  [ -f "$f" ] && mount --bind "$O/empty" "$f" && echo "$f" >> "$O/hidden.list"
done
# Proof: no libnvrtc name opens (python's dlopen, then our binaries' own note below).
python3 - > "$O/dlopen.txt" 2>&1 <<'PY'
import ctypes
names = ["libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so.11"]
opened = []
for n in names:
    try:
        ctypes.CDLL(n); opened.append(n)
    except OSError as e:
        print(f"{n}: not loadable ({e})")
print("OPENED: " + (" ".join(opened) if opened else "none"))
PY
run() { # name, command... → $O/name.out
  local name=$1; shift
  { echo "### $*"; "$@"; echo "### rc=$?"; } > "$O/$name.out" 2>&1
}
start=$(date +%s.%N)
CUDA_CACHE_DISABLE=1 run hidden_cold_all_reduce "$D/all_reduce_perf" -b 8 -e 64M -f 4
echo "$start $(date +%s.%N)" > "$O/cold.time"
for b in $BINS; do
  run "hidden_$b" "$D/${b}_perf" -b 8 -e 16M -f 8
done
run hidden_ar_all_all "$D/all_reduce_perf" -d all -o all -b 1M -e 1M
run hidden_ag_all "$D/all_gather_perf" -d all -b 1M -e 1M
NCCL_PERF_CORRUPT=out:0 run hidden_corrupt "$D/all_reduce_perf" -d all -b 1K -e 256K -f 4
# A stand-in NVRTC that has every entry point but fails to compile (built after the hiding).
F="$O/fake-nvrtc"; mkdir -p "$F"
if cc -shared -fPIC -o "$F/libnvrtc.so" "$FAKES/fake_nvrtc.c" -DFAKE_NVRTC_FAILS \
  > "$O/fake_nvrtc.build" 2>&1; then
  for n in libnvrtc.so.13 libnvrtc.so.12; do ln -sf libnvrtc.so "$F/$n"; done
  LD_LIBRARY_PATH="$F${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    run hidden_failing_nvrtc "$D/all_reduce_perf" -b 8 -e 1M -f 8
fi
EOF
unshare -m bash "$O/hidden.sh" "$D" "$O" "$BINS" "$HERE/../tests/fakes" > "$O/hidden.log" 2>&1
opened=$(sed -n 's/^OPENED: //p' "$O/dlopen.txt" 2>/dev/null)
nhidden=$(wc -l < "$O/hidden.list" 2>/dev/null || echo 0)
if [ "$opened" = none ] && [ "$nhidden" -gt 0 ]; then v=PASS; else v=FAIL; fi
row "nvrtc hidden (mount namespace)" "$nhidden files covered; dlopen opened: ${opened:-?}" "$v"
if [ -e "$O/cold.time" ]; then
  read -r t0 t1 < "$O/cold.time"
  cold=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f s", b - a }')
else cold="?"; fi
f="$O/hidden_cold_all_reduce.out"
v=$(verdict "$f" 0 0)
grep -q 'Out of bounds values : 0 OK' "$f" || v="FAIL(no 0 OK)"
grep -q "using the bundled PTX" "$f" || v="FAIL(no bundled note)"
row "all_reduce, no NVRTC, cold JIT ($cold)" "$(note_of "$f")" "$v"
for b in $BINS; do
  f="$O/hidden_$b.out"
  v=$(verdict "$f" 0 0)
  grep -q 'Out of bounds values : 0 OK' "$f" || v="FAIL(no 0 OK)"
  grep -q "using the bundled PTX" "$f" || v="FAIL(no bundled note)"
  row "$b, no NVRTC" "$(grep -c '^ *[0-9]' "$f") rows" "$v"
done
for n in ar_all_all ag_all; do
  f="$O/hidden_$n.out"; v=$(verdict "$f" 0 0)
  row "$n -d all, no NVRTC" "$(grep -c '^ *[0-9]' "$f") rows" "$v"
done
f="$O/hidden_corrupt.out"; v=$(verdict "$f" 7 1)
grep -q 'Out of bounds values : .* FAILED' "$f" || v="FAIL(no FAILED)"
row "planted error found, no NVRTC (exit 7)" "$(grep -m1 'Out of bounds' "$f")" "$v"
f="$O/hidden_failing_nvrtc.out"
if [ -e "$f" ]; then
  v=$(verdict "$f" 0 0)
  grep -q "NVRTC could not compile" "$f" || v="FAIL(note)"
  row "a failing NVRTC → bundled PTX" "$(note_of "$f")" "$v"
else
  row "a failing NVRTC → bundled PTX" "no stand-in built: $(head -c 50 "$O/fake_nvrtc.build" 2>/dev/null)" "FAIL"
fi

# --- 3: control with NVRTC ---------------------------------------------------------------------
{ echo "### all_reduce_perf"; "$D/all_reduce_perf" -b 8 -e 64M -f 4; echo "### rc=$?"; } > "$O/nvrtc.out" 2>&1
v=$(verdict "$O/nvrtc.out" 0 0)
grep -q "compiled by NVRTC" "$O/nvrtc.out" || v="FAIL(note)"
row "all_reduce with NVRTC (control)" "$(note_of "$O/nvrtc.out")" "$v"

# --- 4: NCCL versions ----------------------------------------------------------------------------
libs=()
sys=$(ldconfig -p | awk '/libnccl\.so\.2 / { print $NF; exit }')
[ -n "$sys" ] && libs+=("$sys")
if [ -n "$NCCL_DIR" ]; then
  for l in "$NCCL_DIR"/*/libnccl.so.2; do [ -e "$l" ] && libs+=("$(cd "$(dirname "$l")" && pwd)/libnccl.so.2"); done
fi
i=0
for lib in "${libs[@]}"; do
  i=$((i + 1)); tag="nccl$i"
  export NCCL_PERF_LIBNCCL="$lib"
  { "$D/all_reduce_perf" -b 8 -e 8 -c 0 -n 1 -w 0 2>&1; } > "$O/${tag}_version.out"
  ver=$(sed -n 's/.*nccl-library=\([0-9]*\).*/\1/p' "$O/${tag}_version.out" | head -1)
  ver=${ver:-0}
  row "NCCL $ver ($lib)" "$(grep -m1 '# nccl-tests version' "$O/${tag}_version.out" | cut -c1-70)" \
    "$([ "$ver" -gt 0 ] && echo PASS || echo FAIL)"
  for b in $BINS; do
    { echo "### $b"; "$D/${b}_perf" -b 8 -e 16M -f 8; echo "### rc=$?"; } > "$O/${tag}_$b.out" 2>&1
    v=$(verdict "$O/${tag}_$b.out" 0 0)
    row "  $b on $ver" "$(grep -m1 'Avg bus bandwidth' "$O/${tag}_$b.out")" "$v"
  done
  { echo "### -d all"; "$D/all_reduce_perf" -d all -b 1M -e 1M; echo "### rc=$?"; } > "$O/${tag}_dall.out" 2>&1
  v=$(verdict "$O/${tag}_dall.out" 0 0)
  has_fp8=$(grep -c 'f8e4m3' "$O/${tag}_dall.out")
  if [ "$ver" -lt 22400 ] && [ "$has_fp8" -ne 0 ]; then v="FAIL(fp8 before 2.24)"; fi
  if [ "$ver" -ge 22400 ] && [ "$has_fp8" -eq 0 ]; then v="FAIL(no fp8)"; fi
  row "  -d all on $ver" "fp8 rows: $has_fp8" "$v"
  for opt in "-R 1" "-R 2" "-x 2"; do
    # shellcheck disable=SC2086
    { echo "### $opt"; "$D/all_reduce_perf" $opt -b 1M -e 1M; echo "### rc=$?"; } > "$O/${tag}_opt.out" 2>&1
    v=$(verdict "$O/${tag}_opt.out" 0 0)
    msg=$(grep -m1 '^Option' "$O/${tag}_opt.out")
    row "  $opt on $ver" "${msg:-(no message)}" "$v"
    cat "$O/${tag}_opt.out" >> "$O/${tag}_opts.out"
  done
done
unset NCCL_PERF_LIBNCCL
[ ${#libs[@]} -ge 3 ] || row "NCCL versions tried" "${#libs[@]} (wanted the system one and at least two older)" "FAIL"

fails=$(grep -c ' FAIL$' "$S")
echo "== $fails failed" | tee -a "$S"
[ "$fails" -eq 0 ]
