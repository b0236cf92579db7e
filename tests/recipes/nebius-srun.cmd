# Nebius, Slurm (Soperator): the srun line of the recipe's nccl.sbatch (8 tasks per node,
# `sbatch -n <number_of_VMs>`), with the container image swapped for ours ($IMAGE).
srun --container-image="$IMAGE" \
  --container-remap-root --no-container-mount-home --container-mounts=$NCCL_TOPO_FILE:$NCCL_TOPO_FILE \
  /opt/nccl_tests/build/all_reduce_perf -b 512M -e 8G -f 2 -g 1 $@
