//! `--dry-run`: bootstrap for real, check the launch, and print (world rank 0, stdout,
//! `#`-prefixed) what a run would do: each rank's host, pid, local rank and GPU, the sizes, the
//! device memory per rank. No CUDA or NCCL library is loaded, so it works without GPUs and
//! launches can be debugged anywhere.

use super::discover;
use super::placement::{self, GpuRecord, ProcessRecord};
use super::plan::{self, Loops};
use crate::bootstrap::Bootstrap;
use crate::collective::Collective;
use crate::environment;
use crate::error::{Result, code};
use crate::options::Options;
use std::collections::BTreeSet;

/// How many sizes the plan lists one by one.
const SIZES_SHOWN: usize = 64;

/// The dry run: checks the launch's placement (no CUDA), plans the loops and prints the plan;
/// exit code 0 when the launch is sound.
pub fn check_and_plan(
    opts: &Options,
    colls: &[&dyn Collective],
    program: &str,
    boot: &dyn Bootstrap,
) -> Result<u8> {
    let Some(&coll) = colls.first() else {
        return Err(crate::error::Error::Internal(
            "no collective to plan".into(),
        ));
    };
    let per_process = opts.nthreads * opts.ngpus;
    let cuda_visible = environment::CUDA_VISIBLE_DEVICES.get();
    let visible = placement::visible_without_cuda(cuda_visible.as_deref(), gpus_in_proc());
    let forced = placement::parse_device(environment::TESTS_DEVICE.get().as_deref())?;
    let placed = placement::place(boot.local_rank(), per_process, visible, forced);
    let base = placed.as_ref().map_or(0, |p| p.base);
    let (_, records) = discover::gather(boot, program, opts, visible, placed, |p| {
        (p.base..p.base + per_process)
            .map(|d| GpuRecord {
                device: d,
                identity: placement::identity_without_cuda(d, cuda_visible.as_deref(), visible),
                pci: [0; 3],
                name: String::new(),
            })
            .collect()
    })?;
    let nranks = boot.group().size * per_process as usize;
    // Compute capability is unknown here: no fp8 filtering for `-d all`. Every collective of
    // `--collectives` is planned (one that cannot run this job fails here); the first is shown.
    let mut plans = colls
        .iter()
        .map(|c| {
            plan::loops(
                opts,
                *c,
                nranks,
                (i32::MAX, 0),
                opts.min_bytes,
                opts.max_bytes,
            )
        })
        .collect::<Result<Vec<_>>>()?;
    let plan = plans.swap_remove(0);
    // Every process takes part in locate's topology exchange; rank 0 prints the first round.
    let located = match &opts.locate {
        Some(l) => super::locate::dry_run(l, boot, base)?,
        None => Vec::new(),
    };
    if boot.world_rank() == 0 {
        let mut text = render(opts, coll, program, boot, &records, &plan, &located);
        if !opts.collectives.is_empty() {
            text = with_sections(text, colls);
        }
        if let Some(x) = &opts.explain {
            super::explanation::check_table(x)?;
        }
        if let Some(h) = &opts.health {
            super::health::baseline(h)?;
        }
        print!("{text}");
        if opts.explain.is_some() {
            print!("{}", super::explanation::dry_run_line());
        }
    }
    Ok(code::OK)
}

/// The plan as printed.
fn render(
    opts: &Options,
    coll: &dyn Collective,
    program: &str,
    boot: &dyn Bootstrap,
    records: &[ProcessRecord],
    plan: &Loops,
    located: &[String],
) -> String {
    let per_process = opts.nthreads * opts.ngpus;
    let colors: BTreeSet<i64> = records.iter().map(|r| r.group).collect();
    let mut s = format!(
        "# nccl-perf dry run of {program}: no CUDA or NCCL library loaded, no GPU touched\n\
         # Bootstrap: {}\n\
         # Processes {} x threads {} x GPUs {} = {} ranks in {} communicator(s)\n",
        boot.describe(),
        records.len(),
        opts.nthreads,
        opts.ngpus,
        records.len() as i64 * per_process,
        colors.len()
    );
    for r in records {
        let visible = r
            .visible
            .map_or_else(|| "unknown".to_string(), |v| v.to_string());
        for d in r.device_infos(per_process) {
            s += &format!(
                "#  Rank {:2} Group {:2} Pid {:6} on {:>10} local rank {:2} device {:2} (visible GPUs: {visible})\n",
                d.rank, d.group, d.pid, d.hostname, r.local_rank, d.device
            );
        }
    }
    let sizes = &plan.sizes;
    let shown: Vec<String> = sizes.iter().take(SIZES_SHOWN).map(u64::to_string).collect();
    let more = sizes.len().saturating_sub(SIZES_SHOWN);
    s += &format!(
        "# Sizes: {} from {} to {} bytes: {}{}\n",
        sizes.len(),
        sizes.first().copied().unwrap_or(0),
        sizes.last().copied().unwrap_or(0),
        shown.join(" "),
        if more > 0 {
            format!(" ... ({more} more)")
        } else {
            String::new()
        }
    );
    let types: Vec<&str> = plan.types.iter().map(|t| t.name()).collect();
    let ops: Vec<&str> = plan.ops.iter().map(|o| plan::label(coll, *o)).collect();
    let roots: Vec<String> = if coll.rooted() {
        plan.roots.iter().map(usize::to_string).collect()
    } else {
        vec!["-".into()]
    };
    s += &format!(
        "# Datatypes: {}; ops: {}; roots: {}\n",
        types.join(" "),
        ops.join(" "),
        roots.join(" ")
    );
    let b = plan::buffer_sizes(opts, opts.max_bytes);
    // Validation also keeps one 8-byte counter of wrong elements per GPU.
    let counter = if opts.check > 0 { 8 } else { 0 };
    let per_gpu = 2 * b.data as u64 + b.expected as u64 + counter;
    let counter = if counter > 0 {
        format!(" + error counter {counter}")
    } else {
        String::new()
    };
    s += &format!(
        "# Device memory per rank (GPU): send {} + receive {} + expected {}{counter} = {} bytes ({}); per process: {} bytes; before the clamp of -e to the smallest GPU's memory\n",
        b.data,
        b.data,
        b.expected,
        per_gpu,
        binary_units(per_gpu),
        per_gpu * per_process as u64
    );
    for l in located {
        s += l;
        s.push('\n');
    }
    s += &closing_line(records, per_process);
    s
}

/// The plan of a `--collectives` run: the collectives, in order, after the bootstrap line.
fn with_sections(text: String, colls: &[&dyn Collective]) -> String {
    let names: Vec<String> = colls.iter().map(|c| format!("{}_perf", c.name())).collect();
    let line = format!(
        "# Collectives, one section each in this order (the sizes, datatypes and ops below are the first's): {}\n",
        names.join(" ")
    );
    let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
    lines.insert(2.min(lines.len()), &line);
    lines.concat()
}

/// The last line: the launch is consistent, or which part of it could not be checked here.
fn closing_line(records: &[ProcessRecord], per_process: i64) -> String {
    let unknown = records.iter().filter(|r| r.visible.is_none()).count();
    if unknown == 0 {
        return "# Dry run complete: the launch is consistent; nothing was run\n".into();
    }
    format!(
        "# Dry run complete: {unknown} of {} process(es) cannot see the NVIDIA driver here \
         (visible GPUs: unknown), so whether each has the {per_process} GPU(s) it asks for is \
         not checked; the rest of the launch is consistent; nothing was run\n",
        records.len()
    )
}

/// `402653184` → `384 MiB`.
fn binary_units(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if v.fract() == 0.0 {
        format!("{v} {}", units[u])
    } else {
        format!("{v:.2} {}", units[u])
    }
}

/// GPUs the NVIDIA driver lists in `/proc/driver/nvidia/gpus` (unknown without the driver).
fn gpus_in_proc() -> Option<i64> {
    let dir = std::fs::read_dir("/proc/driver/nvidia/gpus").ok()?;
    Some(dir.count() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_in_binary_units() {
        assert_eq!(binary_units(402653184), "384 MiB");
        assert_eq!(binary_units(1536), "1.50 KiB");
        assert_eq!(binary_units(8), "8 B");
    }
}
