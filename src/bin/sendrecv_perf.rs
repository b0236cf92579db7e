//! `sendrecv_perf`: drop-in for nccl-tests' binary of the same name.
fn main() -> std::process::ExitCode {
    nccl_perf_bench::main_for(&nccl_perf_bench::collective::SendRecv)
}
