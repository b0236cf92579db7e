#!/usr/bin/env bash
# Sourced by ci/gpu-locate.sh and ci/gpu-locate-evidence.sh: the busy loops that starve a core
# (a CPU-starved rank) and the reaping of ranks a timeout left behind. Needs taskset.

BUSY=()

# busy_start CORE: three busy loops pinned to CORE.
busy_start() {
  local _
  for _ in 1 2 3; do
    taskset -c "$1" sh -c 'while :; do :; done' &
    BUSY+=($!)
  done
}

# busy_stop: ends the busy loops.
busy_stop() {
  local p
  for p in "${BUSY[@]+"${BUSY[@]}"}"; do kill "$p" 2> /dev/null; done
  for p in "${BUSY[@]+"${BUSY[@]}"}"; do wait "$p" 2> /dev/null; done
  BUSY=()
}

# reap_ranks DIR: kills every rank whose pid vcluster recorded in DIR (rankN.pid) and that still
# runs, continuing it first in case it was stopped.
reap_ranks() {
  local f p
  for f in "$1"/rank*.pid; do
    [ -f "$f" ] || continue
    p=$(cat "$f")
    kill -0 "$p" 2> /dev/null && { kill -CONT "$p"; kill -KILL "$p"; } 2> /dev/null
  done
}
