#!/usr/bin/env python3
"""Compares the sections of a `--collectives` log with the same programs run alone.

usage: ci/one-launch-compare.py ONE_LAUNCH_LOG ALONE_LOG... [--min-size BYTES] [--tolerance PCT]

Each section of ONE_LAUNCH_LOG (from its `# nccl-tests version` line to the next) is matched with
the ALONE_LOG whose `# Collective test starting:` names the same program. A section is
structure-equal to its program alone when every line but the rows and the numbers of the footer
is the same (the Pid field of device lines, our version line's `(nccl-perf X)`, the version line's
`nccl-headers=` number (ours names the header it was written against, nccl-tests the one it was
built with: the NCCL matrix builds it against each version's own) and stderr lines, which a log
may hold, aside) and
the rows have the same sizes, counts, types, ops and roots; rows of MIN_SIZE bytes and more
(default 1 GiB) must have an out-of-place bus bandwidth (algbw where busbw is 0) within
TOLERANCE percent (default 1). Prints one line per section; exit 1 when any section differs.
"""
import re
import sys

ROW = re.compile(r"^\s+\d+\s+\d+\s+\S+\s+\S*\s+-?\d+\s")


def sections(text):
    out, cur = [], None
    for line in text.splitlines():
        if line.startswith("# nccl-tests version"):
            cur = []
            out.append(cur)
        if cur is not None:
            cur.append(line)
    return out


def program(sec):
    for line in sec:
        if line.startswith("# Collective test starting:"):
            return line.split(":", 1)[1].strip()
    return None


def shape(sec):
    """(the non-row lines with numbers and pids blanked, the rows' key fields and busbw)."""
    lines, rows = [], []
    for line in sec:
        if not line.startswith("#") and not ROW.match(line):
            continue  # stderr merged into the log
        if ROW.match(line):
            # size count type redop root: fixed columns (hypercube's redop is blank); then
            # time algbw busbw #wrong, out of place first.
            key, f = tuple(line[:52].split()), line[52:].split()
            busbw = float(f[2]) if float(f[2]) > 0 else float(f[1])
            rows.append((key, busbw))
            continue
        line = re.sub(r"Pid\s+\d+", "Pid N", line)
        # Our version line names us after nccl-tests' fields (docs/differences.md).
        line = re.sub(r" \(nccl-perf [^)]*\)$", "", line)
        line = re.sub(r"nccl-headers=\d+", "nccl-headers=N", line)
        if line.startswith("# Avg bus bandwidth"):
            line = "# Avg bus bandwidth"
        lines.append(line.rstrip())
    return lines, rows


def main(argv):
    min_size, tol, files = 1 << 30, 1.0, []
    it = iter(argv)
    for a in it:
        if a == "--min-size":
            min_size = int(next(it))
        elif a == "--tolerance":
            tol = float(next(it))
        else:
            files.append(a)
    if len(files) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    one = sections(open(files[0]).read())
    alone = {}
    for f in files[1:]:
        for s in sections(open(f).read()):
            alone[program(s)] = s
    bad = 0
    for s in one:
        p = program(s)
        if p not in alone:
            print(f"{p}: no log of it alone")
            bad += 1
            continue
        (la, ra), (lb, rb) = shape(s), shape(alone[p])
        problems = []
        if la != lb:
            diff = [(x, y) for x, y in zip(la, lb) if x != y] or [("line count", f"{len(la)} vs {len(lb)}")]
            problems.append(f"other lines differ: {diff[0]}")
        if [k for k, _ in ra] != [k for k, _ in rb]:
            problems.append("rows differ in size, count, type, op or root")
        big = [(k, a, b) for (k, a), (_, b) in zip(ra, rb) if int(k[0]) >= min_size]
        worst = max((abs(a - b) / b * 100 for _, a, b in big if b > 0), default=0.0)
        if worst > tol:
            problems.append(f"a row of {min_size} B or more differs by {worst:.2f} % (> {tol} %)")
        verdict = "DIFFERS: " + "; ".join(problems) if problems else "structure-equal"
        print(f"{p}: {verdict}; {len(ra)} rows, {len(big)} of >= {min_size} B, largest gap {worst:.2f} %")
        bad += bool(problems)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
