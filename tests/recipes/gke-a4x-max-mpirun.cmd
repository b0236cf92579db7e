# GKE A4X Max, Google's JobSet (gpudirect-rdma/nccl-test-a4x-max-jobset.yaml): what its head pod
# (JOB_COMPLETION_INDEX 0) runs once every worker answers: a hostfile of N_NODES workers with 4
# slots each, then mpirun of /third_party/nccl-tests/build/all_gather_perf, one rank per GPU.
# The ssh wait of each worker is left out (no sshd here); the rest follows the manifest.
rm -f "$RECIPE_ROOT/hostfile"
for i in $(seq 0 $((N_NODES - 1))); do
  OTHER=${MY_JOB_NAME}-${i}.${MY_SUBDOMAIN}
  echo "${OTHER} port=222 slots=4" >>"$RECIPE_ROOT/hostfile"
done
export NCCL_TESTS_SPLIT_MASK="0x0"
export NCCL_DEBUG_SUBSYS="INIT,NET"
export NCCL_DEBUG="INFO"
ENV_VARS=$(echo ${!NCCL*} ${!OMPI*} | sed 's/ / -x /g')
mpirun --hostfile "$RECIPE_ROOT/hostfile" \
  -x PATH -x LD_LIBRARY_PATH="/usr/local/gib/lib64:${LD_LIBRARY_PATH}" \
  -x $ENV_VARS \
  -x NCCL_DEBUG="${NCCL_DEBUG}" \
  -x NCCL_DEBUG_SUBSYS="${NCCL_DEBUG_SUBSYS}" \
  -x NCCL_TESTS_SPLIT_MASK="${NCCL_TESTS_SPLIT_MASK}" \
  -mca plm_rsh_no_tree_spawn 1 \
  --mca orte_keep_fqdn_hostnames 1 \
  --mca btl self,tcp \
  --mca btl_tcp_if_include eth0 \
  --bind-to none \
  --mca plm_rsh_agent "ssh -q -o LogLevel=ERROR -o StrictHostKeyChecking=no -p 222" \
  /third_party/nccl-tests/build/all_gather_perf -b 1K -e 8G -f 2 -g 1 -w 5 --iters 100 -c 1
