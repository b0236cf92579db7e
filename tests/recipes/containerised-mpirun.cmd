# Containerised mpirun over SSH: the recipe's mpirun line, run in the container on one of the
# two hosts (sshd on port 20024, host network); 2 processes of 8 GPUs each.
mpirun --allow-run-as-root --bind-to none -np 2 -H 10.1.1.1,10.1.1.2 -mca plm_rsh_args "-p 20024" -x LD_LIBRARY_PATH -x NCCL_IB_HCA=mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_6,mlx5_7,mlx5_8,mlx5_9 -x NCCL_DEBUG=INFO -x NCCL_IB_GID_INDEX=3 -x NCCL_IB_TC=106 -x NCCL_IB_QPS_PER_CONNECTION=4 -x NCCL_ALGO=RING -x NCCL_SOCKET_IFNAME=eth0 /workspace/nccl-tests/build/all_reduce_perf -b 1M -e 2G -w 2 -n 10 -f 2 -g 8
