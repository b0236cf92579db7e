//! `nccl-perf`: the companion tool (parse logs, report, plot, compare); see `nccl_perf_tool`.
fn main() -> std::process::ExitCode {
    nccl_perf_tool::main()
}
