#!/usr/bin/env bash
# Sourced by ci/gpu-one-launch.sh, ci/gpu-health.sh and ci/gpu-stop-when-sure.sh: one timed
# launch. Needs $O (the output folder) and $S (the summary file) set, and /usr/bin/time.

# timed NAME CMD...: runs CMD (stdout and stderr to $O/NAME.out) under /usr/bin/time and
# appends "NAME wall_s peak_rss_kb rc=N" to $S.
timed() {
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o "$O/$name.time" "$@" > "$O/$name.out" 2>&1
  local rc=$?
  echo "$name $(tail -1 "$O/$name.time") rc=$rc" >> "$S"
}
