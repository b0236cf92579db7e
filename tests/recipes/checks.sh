#!/usr/bin/env bash
# The seeds' own output checks, as shell functions reading a benchmark's output on stdin and
# exiting 0 (pass) or 1 (fail). tests/recipes.rs runs each on nccl-tests' output and on ours of
# the same results, and wants the same verdict.

# Nebius: the run is good when the average bus bandwidth is above 300 GB/s ($1 overrides it).
check_nebius() {
  awk -v min="${1:-300}" '/^# Avg bus bandwidth/ { seen = 1; ok = ($NF + 0 > min) } END { exit !(seen && ok) }'
}

# GKE A4X Max: the guide reads the table of the head pod's log: rows, no wrong values
# ("Out of bounds values : 0 OK") and the average bus bandwidth line.
check_gke() {
  awk '/^ *[0-9]+ +[0-9]+ / { rows++ } /^# Out of bounds values : 0 OK/ { ok = 1 } /^# Avg bus bandwidth/ { avg = 1 }
       END { exit !(rows > 0 && ok && avg) }'
}

# Containerised mpirun: the post reads algbw and busbw of the last row and checks
# busbw = algbw * 2(n-1)/n for n GPUs ($1, default 16: 2 hosts x 8).
check_containerised() {
  awk -v n="${1:-16}" '/^ *[0-9]+ +[0-9]+ / { algbw = $7; busbw = $8; rows++ }
       END {
         want = algbw * 2 * (n - 1) / n
         d = busbw - want; if (d < 0) d = -d
         exit !(rows > 0 && d <= 0.02 + want * 0.005)
       }'
}
