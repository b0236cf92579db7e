#!/usr/bin/env python3
"""Compares a run of ours with nccl-tests run the same way, as a scraper would read them.

usage: ci/vcluster-compare.py THEIRS OURS [THEIRS.json OURS.json]

Checks, and prints one line per difference:
- the same data rows: size, count, type, redop and root equal, row by row, and the same number
  of tokens in each row;
- the same busbw factor: busbw / algbw of each half equal (where algbw is large enough for the
  two-decimal columns to carry the ratio);
- `#wrong` is 0 (or N/A in the same places) in both;
- the same number of device lines (`#  Rank ...`) and the same footer form
  (`# Out of bounds values : N OK|FAILED`, `# Avg bus bandwidth    : X`).
With the two `-J` files, the busbw factor is compared at full precision on every row (the
virtual cluster's algbw is far below what two decimals can carry).
Times are not compared: the virtual cluster goes through host sockets.
Prints `SAME` and exits 0 when nothing differs, else `DIFF` and exits 1.
"""

import re
import sys


def rows(lines):
    out = []
    for line in lines:
        if line.startswith("#") or not line.strip():
            continue
        tok = line.split()
        if len(tok) >= 8 and tok[0].isdigit() and tok[1].isdigit():
            out.append(tok)
    return out


def summary(lines):
    devices = sum(1 for line in lines if re.match(r"^#\s+Rank\s+\d+ Group", line))
    oob = [line.split(":", 1)[1].split() for line in lines if line.startswith("# Out of bounds values")]
    avg = [line for line in lines if line.startswith("# Avg bus bandwidth")]
    return devices, oob, avg


def factor(algbw, busbw):
    try:
        a, b = float(algbw), float(busbw)
    except ValueError:
        return None
    if a < 0.5:
        return None
    return b / a


def lead(tok):
    """Leading columns: size count type redop root (5), or size count type root (4) in
    hypercube's rows, which have no redop column; each half adds 4."""
    return 5 if len(tok) % 4 == 1 else 4


def halves(tok):
    """(time, algbw, busbw, wrong) of each half after the leading columns."""
    rest = tok[lead(tok):]
    return [rest[i:i + 4] for i in range(0, len(rest) - 3, 4)]


def json_factors(path):
    """busbw / algbw of each half of each row of a `-J` file."""
    import json

    out = []
    for r in json.load(open(path))["results"]:
        f = []
        for half in ("out_of_place", "in_place"):
            h = r.get(half) or {}
            a, b = h.get("alg_bw"), h.get("bus_bw")
            f.append(b / a if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > 0 else None)
        out.append((r.get("size"), f))
    return out


def compare_json(theirs, ours, diffs):
    jt, jo = json_factors(theirs), json_factors(ours)
    if len(jt) != len(jo):
        diffs.append(f"JSON rows: nccl-tests {len(jt)}, ours {len(jo)}")
    checked = 0
    for i, ((st, ft), (so, fo)) in enumerate(zip(jt, jo)):
        for h, (a, b) in enumerate(zip(ft, fo)):
            if a is None or b is None:
                continue
            checked += 1
            if abs(a - b) > 1e-3 * max(abs(a), abs(b), 1e-9):
                diffs.append(f"JSON row {i} (size {st}) half {h}: busbw/algbw {a:.6f} in nccl-tests, {b:.6f} in ours")
    if checked == 0:
        diffs.append("JSON: no row with a busbw factor to compare")
    return checked


def main():
    if len(sys.argv) not in (3, 5):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    theirs = open(sys.argv[1], errors="replace").read().splitlines()
    ours = open(sys.argv[2], errors="replace").read().splitlines()
    diffs = []
    rt, ro = rows(theirs), rows(ours)
    if len(rt) != len(ro):
        diffs.append(f"rows: nccl-tests {len(rt)}, ours {len(ro)}")
    for i, (a, b) in enumerate(zip(rt, ro)):
        if a[:lead(a)] != b[:lead(b)]:
            diffs.append(f"row {i}: nccl-tests {' '.join(a[:lead(a)])} | ours {' '.join(b[:lead(b)])}")
        if len(a) != len(b):
            diffs.append(f"row {i}: {len(a)} tokens in nccl-tests, {len(b)} in ours")
        for h, (ha, hb) in enumerate(zip(halves(a), halves(b))):
            fa, fb = factor(ha[1], ha[2]), factor(hb[1], hb[2])
            if fa is not None and fb is not None and abs(fa - fb) > 0.02 * max(fa, fb, 0.01) + 0.02:
                diffs.append(f"row {i} half {h}: busbw/algbw {fa:.3f} in nccl-tests, {fb:.3f} in ours")
            for name, w in (("nccl-tests", ha[3]), ("ours", hb[3])):
                if w not in ("0", "N/A"):
                    diffs.append(f"row {i} half {h}: #wrong {w} in {name}")
            if (ha[3] == "N/A") != (hb[3] == "N/A"):
                diffs.append(f"row {i} half {h}: #wrong {ha[3]} in nccl-tests, {hb[3]} in ours")
    st, so = summary(theirs), summary(ours)
    if st[0] != so[0]:
        diffs.append(f"device lines: nccl-tests {st[0]}, ours {so[0]}")
    if [o[1:] for o in st[1]] != [o[1:] for o in so[1]]:
        diffs.append(f"out-of-bounds footer: nccl-tests {st[1]}, ours {so[1]}")
    if len(st[2]) != len(so[2]):
        diffs.append(f"average line: nccl-tests {len(st[2])}, ours {len(so[2])}")
    if len(sys.argv) == 5:
        n = compare_json(sys.argv[3], sys.argv[4], diffs)
        print(f"busbw factors compared from JSON: {n}")
    for d in diffs:
        print(d)
    print("SAME" if not diffs else "DIFF")
    return 0 if not diffs else 1


if __name__ == "__main__":
    sys.exit(main())
