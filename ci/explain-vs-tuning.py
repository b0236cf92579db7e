#!/usr/bin/env python3
"""Compares explain's per-size algorithm, protocol and channels (the `-J` JSON of a run with
--explain: nccl_perf_explain.rows) with NCCL's own choices in its TUNING lines (NCCL_DEBUG=INFO
NCCL_DEBUG_SUBSYS=TUNING, rank 0's output):

    <Coll>: <bytes> Bytes -> Algo <ALGO> proto <PROTO> channel{Lo..Hi}={lo..hi}   (2.24 on)
    <Coll>: <bytes> Bytes -> Algo <n> proto <n> time <us>                         (2.23)
    <bytes> Bytes -> Algo <n> proto <n> time <us>                                 (2.22)

NCCL logs one line per call (warm-up, timed, validation); every call of a size must agree with
every half-row explain reported for that size. Names are compared without case and underscores
(NCCL's RING is explain's Ring, NVLS_TREE NVLSTree); channels are hi - lo + 1. NCCL 2.24 and
later log AllGather and ReduceScatter by the bytes of one rank's part, where the table's size
column (and explain's rows) count the whole buffer: those are scaled by the number of ranks
before they are matched. NCCL 2.22 and 2.23 log the algorithm and protocol as their indexes
(NCCL_ALGO_*, NCCL_PROTO_* of src/include/nccl_common.h) and the whole buffer's bytes, and no
channels: only the algorithm and protocol are compared there.

usage: ci/explain-vs-tuning.py EXPLAIN_JSON NCCL_LOG
Prints one line per size and a summary line; exits 1 on a disagreement, 2 when there is
nothing to compare (no TUNING line, or no row explain saw)."""
import json
import re
import sys

LINE = re.compile(
    r"(\w+): (\d+) Bytes -> Algo (\w+) proto (\w+) channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\}"
)
# NCCL 2.22 (no function) and 2.23: indexes and NCCL's predicted time, no channels.
NUMERIC = re.compile(r"(?:(\w+): )?(\d+) Bytes -> Algo (-?\d+) proto (-?\d+) time ")
ALGOS = ["tree", "ring", "collnetdirect", "collnetchain", "nvls", "nvlstree", "pat"]
PROTOS = ["ll", "ll128", "simple"]


def norm(name):
    return name.lower().replace("_", "")


def by_index(names, i):
    i = int(i)
    return names[i] if 0 <= i < len(names) else f"#{i}"


PER_RANK = ("AllGather", "ReduceScatter")


def nccl_choices(path, nranks):
    """bytes (the table's size) -> set of (algo, proto, channels) NCCL logged."""
    seen = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if m:
                b, a, p, lo, hi = int(m[2]), norm(m[3]), norm(m[4]), int(m[5]), int(m[6])
                if m[1] in PER_RANK:
                    b *= nranks
                seen.setdefault(b, set()).add((a, p, hi - lo + 1))
                continue
            m = NUMERIC.search(line)
            if m:
                a, p = by_index(ALGOS, m[3]), by_index(PROTOS, m[4])
                seen.setdefault(int(m[2]), set()).add((a, p, None))
    return seen


def explain_choices(path):
    """(number of ranks, bytes -> set of (algo, proto, channels) explain reported)."""
    x = json.load(open(path))["nccl_perf_explain"]
    rows, nranks = x["rows"], x["run"]["nranks"]
    out = {}
    for r in rows:
        if r.get("seen") and r.get("algo") and r.get("proto"):
            out.setdefault(r["bytes"], set()).add(
                (norm(r["algo"]), norm(r["proto"]), r.get("channels"))
            )
    return nranks, out


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    nranks, ours = explain_choices(sys.argv[1])
    theirs = nccl_choices(sys.argv[2], nranks)
    both = sorted(set(ours) & set(theirs))
    bad = 0
    for b in both:
        if any(c is None for (_, _, c) in theirs[b]):
            # No channels in NCCL's line (2.22, 2.23): the algorithm and protocol only.
            ours[b] = {(a, p, None) for (a, p, _) in ours[b]}
        same = ours[b] == theirs[b]
        bad += not same
        mark = "agree" if same else "DISAGREE"
        print(f"{b} B: explain {sorted(ours[b])} NCCL {sorted(theirs[b])}: {mark}")
    print(
        f"# {len(both)} sizes compared ({len(ours)} explained, {len(theirs)} in NCCL's log), "
        f"{bad} disagreement(s)"
    )
    if not both:
        return 2
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
