//! `alltoallv_perf`: drop-in for nccl-tests' binary of the same name.
fn main() -> std::process::ExitCode {
    nccl_perf::main_with(nccl_perf::collective::AllToAllV::from_env)
}
