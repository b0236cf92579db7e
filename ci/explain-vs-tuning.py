#!/usr/bin/env python3
"""Compares explain's per-size algorithm, protocol and channels (the `-J` JSON of a run with
--explain: nccl_perf_explain.rows) with NCCL's own choices in its TUNING lines (NCCL_DEBUG=INFO
NCCL_DEBUG_SUBSYS=TUNING, rank 0's output):

    <Coll>: <bytes> Bytes -> Algo <ALGO> proto <PROTO> channel{Lo..Hi}={lo..hi}

NCCL logs one line per call (warm-up, timed, validation); every call of a size must agree with
every half-row explain reported for that size. Names are compared without case (NCCL's RING is
explain's Ring); channels are hi - lo + 1. NCCL logs AllGather and ReduceScatter by the bytes of
one rank's part, where the table's size column (and explain's rows) count the whole buffer:
those are scaled by the number of ranks before they are matched.

usage: ci/explain-vs-tuning.py EXPLAIN_JSON NCCL_LOG
Prints one line per size and a summary line; exits 1 on a disagreement, 2 when there is
nothing to compare (no TUNING line, or no row explain saw)."""
import json
import re
import sys

LINE = re.compile(
    r"(\w+): (\d+) Bytes -> Algo (\w+) proto (\w+) channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\}"
)


PER_RANK = ("AllGather", "ReduceScatter")


def nccl_choices(path, nranks):
    """bytes (the table's size) -> set of (algo, proto, channels) NCCL logged."""
    seen = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if m:
                b, a, p, lo, hi = int(m[2]), m[3].lower(), m[4].lower(), int(m[5]), int(m[6])
                if m[1] in PER_RANK:
                    b *= nranks
                seen.setdefault(b, set()).add((a, p, hi - lo + 1))
    return seen


def explain_choices(path):
    """(number of ranks, bytes -> set of (algo, proto, channels) explain reported)."""
    x = json.load(open(path))["nccl_perf_explain"]
    rows, nranks = x["rows"], x["run"]["nranks"]
    out = {}
    for r in rows:
        if r.get("seen") and r.get("algo") and r.get("proto"):
            out.setdefault(r["bytes"], set()).add(
                (r["algo"].lower(), r["proto"].lower(), r.get("channels"))
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
