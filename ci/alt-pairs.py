#!/usr/bin/env python3
"""Alternating-run comparison: ours vs nccl-tests, same command, runs interleaved in one call.

usage: ci/alt-pairs.py DIR [NAME ...]
DIR holds NAME.ours.I and NAME.theirs.I (I = 1, 2, ...), each a *_perf table. For each NAME and
half (out-of-place, in-place) it prints, per pair, the median over sizes of ours - theirs in us,
then the median and spread (min..max) of those per-pair medians, and the same as a percentage;
then `pooled_us`: per size, the median time over all of our runs minus the median over all of
theirs, and the median of that over sizes (robust where whole runs land in one of two levels,
as single-GPU runs do); then each side's typical time (median over runs of the run's median).
Rows are matched by size; a size missing on either side is left out.
"""
import os
import re
import statistics
import sys

ROW = re.compile(r"^\s+(\d+)\s+\d+\s+\S+\s+\S+\s+-?\d+\s+(\S+)\s+\S+\s+\S+\s+\S+\s+(\S+)")
ROW_NO_OP = re.compile(r"^\s+(\d+)\s+\d+\s+\S+\s+-?\d+\s+(\S+)\s+\S+\s+\S+\s+\S+\s+(\S+)")


def rows(path):
    """size -> (oop time, ip time) from one table."""
    out = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = ROW.match(line) or ROW_NO_OP.match(line)
            if m:
                try:
                    out[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
                except ValueError:
                    pass
    return out


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    d = sys.argv[1]
    names = sys.argv[2:] or sorted({f.split(".ours.")[0] for f in os.listdir(d) if ".ours." in f})
    print(f"{'run':24} {'half':4} {'pairs':>5} {'median_us':>10} {'min_us':>8} {'max_us':>8} "
          f"{'median_%':>9} {'pooled_us':>9} {'ours_us':>8} {'theirs_us':>9}  per-pair medians (us)")
    for name in names:
        pairs = []
        i = 1
        while os.path.exists(os.path.join(d, f"{name}.ours.{i}")):
            ours = rows(os.path.join(d, f"{name}.ours.{i}"))
            theirs_path = os.path.join(d, f"{name}.theirs.{i}")
            if os.path.exists(theirs_path):
                pairs.append((ours, rows(theirs_path)))
            i += 1
        for h, half in enumerate(("oop", "ip")):
            deltas, pcts = [], []
            for ours, theirs in pairs:
                common = sorted(set(ours) & set(theirs))
                if not common:
                    continue
                deltas.append(statistics.median(ours[s][h] - theirs[s][h] for s in common))
                pcts.append(statistics.median(
                    100.0 * (ours[s][h] - theirs[s][h]) / theirs[s][h]
                    for s in common if theirs[s][h] > 0))
            if not deltas:
                print(f"{name:24} {half:4} {0:>5} (no matching rows)")
                continue
            sizes = sorted(set.intersection(*(set(o) & set(t) for o, t in pairs)))
            pooled = statistics.median(
                statistics.median(o[s][h] for o, _ in pairs)
                - statistics.median(t[s][h] for _, t in pairs)
                for s in sizes) if sizes else float("nan")
            typical = [statistics.median(statistics.median(side[s][h] for s in sizes)
                                         for side in sides) if sizes else float("nan")
                       for sides in ([o for o, _ in pairs], [t for _, t in pairs])]
            print(f"{name:24} {half:4} {len(deltas):>5} {statistics.median(deltas):>10.3f} "
                  f"{min(deltas):>8.3f} {max(deltas):>8.3f} {statistics.median(pcts):>9.2f} "
                  f"{pooled:>9.3f} {typical[0]:>8.2f} {typical[1]:>9.2f}  "
                  + " ".join(f"{x:+.2f}" for x in deltas))
    return 0


if __name__ == "__main__":
    sys.exit(main())
