//! `nccl-perf`: the companion tool (parse logs, report, plot, compare); see `nccl_perf::tool`.
fn main() -> std::process::ExitCode {
    nccl_perf::tool::main()
}
