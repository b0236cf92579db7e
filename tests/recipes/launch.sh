#!/usr/bin/env bash
# Sourced by tests/recipes.rs before a recipe's command lines (the *.cmd files beside this one):
# it defines `mpirun` and `srun` so that the recipe's own lines run on this one machine.
#
# What changes, and only that:
#   * hosts: every host of --host/-H/--hostfile is localhost, with the slots the recipe gives
#     (a hostfile's lines are merged into one, as Open MPI refuses a host listed twice with slots);
#   * -mca pml ucx becomes -mca pml ob1 and btl_tcp_if_include eth0 becomes lo: CI machines have
#     neither UCX transports nor eth0 (the benchmark only starts through mpirun's PMIx or MPI,
#     whichever PML);
#   * absolute program paths (/opt/..., /workspace/..., /third_party/...) are looked up under
#     $RECIPE_ROOT, where the test put a stand-in that starts our binary with --dry-run and
#     NCCL_HOSTID=node<rank / RECIPE_SLOTS> (each group of RECIPE_SLOTS ranks poses as a host,
#     with the local rank mpirun gives there);
#   * srun starts RECIPE_NODES x RECIPE_SLOTS processes with the environment a job step gives
#     them (SLURM_PROCID, SLURM_LOCALID, the step's node list and tasks per node); its own
#     options (--container-image, ...) belong to Slurm and pyxis and are left out.
# Needs: RECIPE_ROOT, RECIPE_SLOTS, RECIPE_NODES; mpirun on PATH for the mpirun recipes.

recipe_program() {
  if [[ "$1" == /* && -x "$RECIPE_ROOT$1" ]]; then
    printf '%s\n' "$RECIPE_ROOT$1"
  else
    printf '%s\n' "$1"
  fi
}

recipe_hosts() {
  # host[:slots],... -> localhost:<sum of slots>
  local IFS=, total=0 entry
  for entry in $1; do
    if [[ "$entry" == *:* ]]; then
      total=$((total + ${entry##*:}))
    else
      total=$((total + 1))
    fi
  done
  printf 'localhost:%s\n' "$total"
}

mpirun() {
  local args=() program_seen=0
  while [ $# -gt 0 ]; do
    if [ "$program_seen" = 1 ]; then
      args+=("$1")
      shift
      continue
    fi
    case "$1" in
      --host | -H | -host)
        args+=("$1" "$(recipe_hosts "$2")")
        shift 2
        ;;
      --hostfile | -hostfile)
        local merged="$RECIPE_ROOT/hostfile.merged" slots
        slots=$(awk '{ for (i = 2; i <= NF; i++) if ($i ~ /^slots=/) { sub(/^slots=/, "", $i); n += $i } } END { print n + 0 }' "$2")
        printf 'localhost slots=%s\n' "$slots" >"$merged"
        args+=("$1" "$merged")
        shift 2
        ;;
      -mca | --mca)
        case "$2 $3" in
          "pml ucx") args+=("$1" pml ob1) ;;
          "btl_tcp_if_include eth0") args+=("$1" btl_tcp_if_include lo) ;;
          *) args+=("$1" "$2" "$3") ;;
        esac
        shift 3
        ;;
      -x | -np | -n | --bind-to | --map-by)
        args+=("$1" "$2")
        shift 2
        ;;
      -*)
        args+=("$1")
        shift
        ;;
      *)
        args+=("$(recipe_program "$1")")
        program_seen=1
        shift
        ;;
    esac
  done
  command mpirun --oversubscribe "${args[@]}"
}

srun() {
  while [ $# -gt 0 ] && [[ "$1" == -* ]]; do
    shift
  done
  local program
  program=$(recipe_program "$1")
  shift
  local size=$((RECIPE_NODES * RECIPE_SLOTS)) rank pids=() rc=0 pid
  local nodes="localhost"
  if [ "$RECIPE_NODES" -gt 1 ]; then
    nodes="localhost,node[2-$RECIPE_NODES]"
  fi
  for ((rank = 0; rank < size; rank++)); do
    SLURM_JOB_ID=4242 SLURM_STEP_ID=0 SLURM_PROCID=$rank SLURM_LOCALID=$((rank % RECIPE_SLOTS)) \
      SLURM_NODEID=$((rank / RECIPE_SLOTS)) SLURM_NTASKS=$size SLURM_STEP_NUM_TASKS=$size \
      SLURM_STEP_NODELIST="$nodes" SLURM_JOB_NODELIST="$nodes" \
      SLURM_STEP_TASKS_PER_NODE="$RECIPE_SLOTS(x$RECIPE_NODES)" \
      "$program" "$@" &
    pids+=("$!")
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || rc=$?
  done
  return "$rc"
}
