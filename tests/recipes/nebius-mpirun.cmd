# Nebius, nccl-tests across VMs: the mpirun line of the recipe, its <IP_address_N> placeholders
# filled with documentation addresses. Binary: ~/nccl-tests/build/all_reduce_perf on every VM.
mpirun --host 192.0.2.1:8,192.0.2.2:8,192.0.2.3:8,192.0.2.4:8 \
  --allow-run-as-root -np 32 \
  -mca pml ucx \
  -x NCCL_TOPO_FILE=$NCCL_TOPO_FILE \
  ~/nccl-tests/build/all_reduce_perf -b 512M -e 8G -f 2 -g 1
