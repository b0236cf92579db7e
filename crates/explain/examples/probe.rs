//! Prints what `nccl_perf_explain::probe` reads on this machine, as JSON: the GPU (NVML) and
//! the network adapters (sysfs). `cargo run -p nccl-perf-explain --example probe [BUS_ID]`.

fn main() {
    let bus = std::env::args().nth(1);
    let hw = nccl_perf_explain::probe(bus.as_deref(), std::path::Path::new("/sys"));
    println!(
        "{}",
        serde_json::to_string_pretty(&hw).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    );
    if let Some(gpu) = &hw.gpu {
        println!(
            "active links {}, NVLink {:?} GB/s per direction, PCIe {:?} GB/s",
            gpu.active_links(),
            gpu.nvlink_gbs(),
            gpu.pcie_gbs()
        );
    }
}
