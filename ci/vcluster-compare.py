#!/usr/bin/env python3
"""Compares a run of ours with nccl-tests run the same way, as a scraper would read them.

usage: ci/vcluster-compare.py THEIRS OURS

Checks, and prints one line per difference:
- the same data rows: size, count, type, redop and root equal, row by row, and the same number
  of tokens in each row;
- the same busbw factor: busbw / algbw of each half equal (where algbw is large enough for the
  two-decimal columns to carry the ratio);
- `#wrong` is 0 (or N/A in the same places) in both;
- the same number of device lines (`#  Rank ...`) and the same footer form
  (`# Out of bounds values : N OK|FAILED`, `# Avg bus bandwidth    : X`).
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
        if len(tok) >= 9 and tok[0].isdigit() and tok[1].isdigit():
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


def halves(tok):
    """(time, algbw, busbw, wrong) of each half after the 5 leading columns."""
    rest = tok[5:]
    return [rest[i:i + 4] for i in range(0, len(rest) - 3, 4)]


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    theirs = open(sys.argv[1], errors="replace").read().splitlines()
    ours = open(sys.argv[2], errors="replace").read().splitlines()
    diffs = []
    rt, ro = rows(theirs), rows(ours)
    if len(rt) != len(ro):
        diffs.append(f"rows: nccl-tests {len(rt)}, ours {len(ro)}")
    for i, (a, b) in enumerate(zip(rt, ro)):
        if a[:5] != b[:5]:
            diffs.append(f"row {i}: nccl-tests {' '.join(a[:5])} | ours {' '.join(b[:5])}")
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
    for d in diffs:
        print(d)
    print("SAME" if not diffs else "DIFF")
    return 0 if not diffs else 1


if __name__ == "__main__":
    sys.exit(main())
