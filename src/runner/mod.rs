//! A whole benchmark run: libraries, devices, communicators and buffers, the per-thread test
//! loops over datatype → op → root → cycle → size, the footer and the exit code.

mod dry_run;
pub mod fault;
mod measure;
mod output;
pub mod placement;
pub mod setup;
mod sync;
mod watch;

pub use measure::{Engine, Shape, Worker};
pub use setup::{BufferSizes, Discovered, Gpu};
pub use sync::ThreadGroup;

use crate::bootstrap::{self, Bootstrap, Reduce};
use crate::collective::Collective;
use crate::error::{Error, Result, code};
use crate::gpu::{driver, kernels, nccl::Nccl};
use crate::options::{Options, Roots};
use crate::report::{self, RowResult, RunInfo, Step, Summary, table};
use crate::types::{DataType, RedOp};
use output::Output;
use std::ops::Not;

/// The parameters shown in the header, from the options (sizes before the memory clamp).
pub fn run_info(o: &Options, program: &str) -> RunInfo {
    RunInfo {
        program: program.to_string(),
        nthreads: o.nthreads,
        ngpus: o.ngpus,
        min_bytes: o.min_bytes,
        max_bytes: o.max_bytes,
        step: if o.step_factor > 1 {
            Step::Factor(o.step_factor)
        } else {
            Step::Bytes(o.step_bytes)
        },
        warmup_iters: o.warmup_iters,
        iters: o.iters,
        agg_iters: o.agg_iters,
        check: o.check,
        graph: o.graph,
        unalign: o.unalign,
        blocking: o.blocking,
        per_iter: o.per_iter,
        per_iter_skip: o.per_iter_skip,
        parallel_init: o.parallel_init,
        report_cputime: o.report_cputime,
        report_timestamps: o.report_timestamps,
    }
}

/// What the per-thread loops iterate over.
struct Plan {
    types: Vec<DataType>,
    ops: Vec<RedOp>,
    roots: Vec<usize>,
    sizes: Vec<u64>,
    ladder: Vec<u64>,
    /// `-d all` / `-o all`: a combination the loaded NCCL rejects is skipped, not fatal.
    skippable: bool,
}

fn plan(
    o: &Options,
    coll: &dyn Collective,
    nranks: usize,
    min_cc: (i32, i32),
    lo: u64,
    hi: u64,
) -> Result<Plan> {
    coll.check_shape(nranks, lo, hi)?;
    let mut types = o.types.clone();
    if o.all_types && min_cc < (9, 0) {
        types.retain(|t| !t.is_fp8());
    }
    let loops_ops = coll.op_column().loops();
    let ops = if loops_ops {
        o.ops.clone()
    } else {
        vec![RedOp::Sum]
    };
    let roots = if coll.rooted() {
        roots(o.roots, nranks)?
    } else {
        vec![0]
    };
    Ok(Plan {
        types,
        ops,
        roots,
        sizes: crate::sweep::sizes(lo, hi, o.step_bytes, o.step_factor),
        ladder: crate::sweep::warmup_sizes(lo, hi),
        // Only a loop over several types or ops can skip: an explicit combination that NCCL
        // rejects stays an error.
        skippable: o.all_types || (loops_ops && o.ops.len() > 1),
    })
}

/// The roots a rooted collective runs with: `-r R` (R must be a rank of the communicator) or
/// every rank in order (`-r -1` / `-r all`).
fn roots(r: Roots, nranks: usize) -> Result<Vec<usize>> {
    match r {
        Roots::All => Ok((0..nranks).collect()),
        Roots::One(r) if r >= 0 && (r as usize) < nranks => Ok(vec![r as usize]),
        Roots::One(r) => Err(Error::Usage(format!(
            "invalid root {r} for -r (--root): the communicator has {nranks} rank{}, so the root must be {}, or -1 (or all) for every root in turn",
            if nranks == 1 { "" } else { "s" },
            match nranks {
                1 => "0".to_string(),
                n => format!("0..{}", n - 1),
            }
        ))),
    }
}

/// Runs the benchmark (or, with `--dry-run`, prints its plan); returns the exit code of a run
/// that reached its footer. Bootstraps first, whatever the launcher; world rank 0 then creates
/// the `-J` file (a path that cannot be written ends the run before any GPU work). A run that
/// fails after that lets the bootstrap end the job (MPI aborts it; TCP tells the others).
pub fn run(opts: &Options, coll: &dyn Collective, program: &str, args: Vec<String>) -> Result<u8> {
    fault::init(program)?;
    let boot = bootstrap::connect()?;
    let result = start(opts, coll, program, &*boot, args);
    match &result {
        Ok(_) => boot.finalize()?,
        Err(e) => {
            // NCCL may notice a dead peer (or time out waiting for it) before the watchdog
            // does: say whether a process left, naming it.
            if matches!(e, Error::Nccl { .. } | Error::Timeout { .. })
                && let Err(lost) = boot.check_peers()
            {
                eprintln!("{}", lost.render(&crate::host::short_hostname()));
            }
            boot.fail(e)
        }
    }
    result
}

fn start(
    opts: &Options,
    coll: &dyn Collective,
    program: &str,
    boot: &dyn Bootstrap,
    args: Vec<String>,
) -> Result<u8> {
    let path = opts
        .output_file
        .as_deref()
        .filter(|_| boot.world_rank() == 0);
    if opts.dry_run {
        if let Some(p) = path {
            output::check_target(p)?;
        }
        return watch::guard(boot, None, || {
            watch::test_stall(boot, program);
            dry_run::run(opts, coll, program, boot)
        });
    }
    let target = match path {
        Some(p) => {
            let (target, line) = output::create_target(p, &run_info(opts, program), args)?;
            print!("{line}");
            Some(target)
        }
        None => None,
    };
    let json = match &target {
        Some(output::Target::Json(j)) => Some(j.clone()),
        _ => None,
    };
    // A lost process or a stop signal ends the run from the watchdog, JSON closed.
    watch::guard(boot, json, || {
        watch::test_stall(boot, program);
        run_gpus(opts, coll, program, boot, target)
    })
}

fn run_gpus(
    opts: &Options,
    coll: &dyn Collective,
    program: &str,
    boot: &dyn Bootstrap,
    target: Option<output::Target>,
) -> Result<u8> {
    let printing = boot.world_rank() == 0;
    let mut out = Output::new(run_info(opts, program), printing, target);
    let result = run_with(opts, coll, boot, &mut out);
    if result.is_err() {
        out.abort();
    }
    result
}

/// Per-GPU buffer sizes for a largest size of `hi` bytes.
fn buffer_sizes(opts: &Options, hi: u64) -> BufferSizes {
    BufferSizes {
        data: (hi + 8 * opts.unalign as u64) as usize,
        expected: if opts.check > 0 { hi as usize } else { 0 },
    }
}

/// This process' description for rank 0, and its devices unless it has a problem.
fn describe_process(
    boot: &dyn Bootstrap,
    per_process: i64,
    visible: Option<i64>,
    devices: &Result<Vec<setup::Discovered>>,
) -> placement::ProcessRecord {
    let gpus = match devices {
        Ok(ds) => ds
            .iter()
            .map(|d| placement::GpuRecord {
                device: d.ordinal,
                identity: Some(format!(
                    "{:04x}:{:02x}:{:02x}",
                    d.props.pci.0, d.props.pci.1, d.props.pci.2
                )),
                pci: [d.props.pci.0, d.props.pci.1, d.props.pci.2],
                name: d.props.name.clone(),
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    if let (Err(Error::TooFewGpus { .. }), Some(v)) = (devices, visible) {
        eprintln!(
            "{}: {}",
            crate::host::short_hostname(),
            placement::too_few_hint(boot.local_rank(), boot.local_size(), per_process, v)
        );
    }
    placement::ProcessRecord {
        world_rank: boot.world_rank(),
        group: boot.group().color,
        host: crate::host::short_hostname(),
        host_hash: bootstrap::local::this_host_hash(),
        pid: std::process::id(),
        local_rank: boot.local_rank(),
        visible,
        gpus,
        problem: devices.as_ref().err().map(|e| e.to_string()),
    }
}

fn run_with(
    opts: &Options,
    coll: &dyn Collective,
    boot: &dyn Bootstrap,
    out: &mut Output,
) -> Result<u8> {
    driver::init()?;
    crate::host::trace("CUDA driver initialised");
    let nccl = Nccl::load()?;
    let nccl = &nccl;
    crate::host::trace("libnccl loaded");
    let nccl_version = nccl.version()?;
    let per_process = opts.nthreads * opts.ngpus;
    // NCCL ranks count within the split group; device lines show world ranks (spec §3.3, §6.2).
    let group = boot.group();
    let nranks = group.size * per_process as usize;
    let first_rank = group.rank * per_process as usize;
    out.print(&table::version_line(nccl_version));
    out.print(&table::header(out.info()));

    let visible = driver::device_count()?;
    let forced = placement::parse_device(std::env::var("NCCL_TESTS_DEVICE").ok().as_deref())?;
    let devices = placement::place(boot.local_rank(), per_process, Some(visible), forced)
        .and_then(|p| setup::discover(p.base, per_process));
    let me = describe_process(boot, per_process, Some(visible), &devices);
    let verdict = placement::agree(boot, &me, per_process);
    let devices = devices?;
    let records = verdict?;
    let infos: Vec<report::DeviceInfo> = records
        .iter()
        .flat_map(|r| r.device_infos(per_process))
        .collect();
    for d in &infos {
        out.print(&table::device_line(d));
    }
    out.start_json(&infos, nccl_version);
    let min_cc = devices.iter().map(|d| d.props.cc).min().unwrap_or((0, 0));
    // fp8 needs every GPU of every process at compute capability 9.0 or above.
    let cc_code = f64::from(min_cc.0 * 100 + min_cc.1);
    let global_cc = boot.allreduce(cc_code, Reduce::Min)? as i32;
    let global_cc = (global_cc / 100, global_cc % 100);
    let min_mem = devices.iter().map(|d| d.props.total_mem).min().unwrap_or(0);
    let min_mem = boot.allreduce(min_mem as f64, Reduce::Min)? as u64;

    let types = opts.types.clone();
    let compiler =
        (opts.check > 0).then(|| std::thread::spawn(move || kernels::compile(min_cc, &types)));

    let (lo, hi, reduced) =
        crate::sweep::clamp(opts.min_bytes, opts.max_bytes, min_mem, opts.check > 0);
    if reduced {
        out.print(&table::memory_clamp_lines(hi));
    }
    let plan = plan(opts, coll, nranks, global_cc, lo, hi)?;

    // The first process of each group creates the id; the bootstrap hands it to its group.
    let mut id = crate::gpu::nccl::UniqueId { internal: [0; 128] };
    if group.rank == 0 {
        // SAFETY: valid out pointer.
        nccl.check(unsafe { (nccl.ncclGetUniqueId)(&mut id) })?;
    }
    let mut bytes: [u8; 128] = id.internal.map(|c| c as u8);
    boot.broadcast_id(&mut bytes)?;
    id.internal = bytes.map(|b| b as std::ffi::c_char);
    boot.barrier()?;
    crate::host::trace("devices discovered");
    let comms = setup::init_comms(nccl, &devices, &id, nranks, first_rank, nccl_version)?;
    crate::host::trace("communicators created");

    let image = match compiler {
        Some(h) => Some(
            h.join()
                .map_err(|_| Error::Kernels("the kernel compiler thread failed".into()))??,
        ),
        None => None,
    };
    let sizes = buffer_sizes(opts, hi);
    let mut gpus = Vec::with_capacity(devices.len());
    for (i, (d, (ctx, comm))) in devices.iter().zip(comms).enumerate() {
        gpus.push(Gpu::create(
            nccl,
            d.ordinal,
            ctx,
            comm,
            first_rank + i,
            sizes,
            opts.stream_null,
            image.as_deref(),
            &plan.types,
        )?);
    }
    crate::host::trace("kernels compiled, buffers allocated");
    out.print(&table::table_header(out.info()));

    let group = ThreadGroup::new(opts.nthreads as usize, boot);
    let engine = Engine {
        opts,
        coll,
        nccl,
        group: &group,
        nranks,
        max_bytes: hi,
        world_size: boot.world_size(),
    };
    let (oob, gpus) = run_threads(&engine, &plan, gpus, out)?;
    crate::host::trace("all measurements done");

    let avg = out.average_busbw();
    let min_bw_ok = std::env::var("NCCL_TESTS_MIN_BW")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .map(|v| below_min_bw(avg, atof(&v)).not());
    let summary = Summary {
        oob_errors: oob,
        avg_busbw: avg,
        min_bw_ok,
        last_error: nccl.last_error(),
        memory_report: None,
    };
    for g in gpus {
        g.destroy(nccl)?;
    }
    out.finish(&summary);
    crate::host::trace("teardown done");
    Ok(if oob > 0 || min_bw_ok == Some(false) {
        code::NUM_RESULTS
    } else {
        code::OK
    })
}

/// nccl-tests' check `avg < 0.9 × min`: a NaN average never counts as below (upstream quirk).
fn below_min_bw(avg: f64, min: f64) -> bool {
    avg < 0.9 * min
}

/// C `atof`: the longest numeric prefix, 0 when there is none.
fn atof(s: &str) -> f64 {
    let t = s.trim_start();
    (1..=t.len())
        .rev()
        .filter(|&i| t.is_char_boundary(i))
        .find_map(|i| t[..i].parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// Runs the test loops on `-t` threads (thread 0 on this one, printing); returns the global
/// count of measurements with wrong data and the GPUs for teardown.
fn run_threads(
    e: &Engine,
    plan: &Plan,
    gpus: Vec<Gpu>,
    out: &mut Output,
) -> Result<(u64, Vec<Gpu>)> {
    let per_thread = e.opts.ngpus as usize;
    let mut chunks: Vec<Vec<Gpu>> = Vec::new();
    let mut rest = gpus;
    while !rest.is_empty() {
        let tail = rest.split_off(per_thread.min(rest.len()));
        chunks.push(rest);
        rest = tail;
    }
    let threads = chunks.len();
    std::thread::scope(|s| {
        let mut it = chunks.into_iter();
        let first = it.next().unwrap_or_default();
        let handles: Vec<_> = it
            .enumerate()
            .map(|(i, chunk)| {
                s.spawn(move || {
                    thread_main(e, plan, i + 1, chunk, None)
                        .unwrap_or_else(|err| fail_fast(err, threads))
                })
            })
            .collect();
        let mine = thread_main(e, plan, 0, first, Some(out));
        let mine = match mine {
            Ok(v) => v,
            Err(err) if threads > 1 => fail_fast(err, threads),
            Err(err) => return Err(err),
        };
        let mut all = mine.1;
        for h in handles {
            let (_, g) = h
                .join()
                .map_err(|_| Error::Internal("a benchmark thread failed".into()))?;
            all.extend(g);
        }
        Ok((mine.0, all))
    })
}

/// With several threads a failing one cannot leave the others waiting at a barrier: report and
/// end the process.
fn fail_fast(err: Error, _threads: usize) -> ! {
    crate::report_error(&err);
    std::process::exit(err.exit_code() as i32)
}

fn thread_main(
    e: &Engine,
    plan: &Plan,
    tid: usize,
    gpus: Vec<Gpu>,
    mut out: Option<&mut Output>,
) -> Result<(u64, Vec<Gpu>)> {
    let mut w = Worker::new(e, tid, gpus)?;
    for &dt in &plan.types {
        for &op in &plan.ops {
            for &root in &plan.roots {
                e.group.barrier()?;
                match w.warmup(dt, op, root, &plan.ladder) {
                    Err(err) if plan.skippable && err.is_nccl_invalid_argument() => {
                        if let Some(o) = out.as_deref_mut() {
                            o.print(&skip_line(e.coll, dt, op));
                        }
                        continue;
                    }
                    r => r?,
                }
                let cycles = e.opts.run_cycles.unwrap_or(u64::MAX);
                for _ in 0..cycles {
                    for &bytes in &plan.sizes {
                        let shape = Shape::new(e, dt, op, root, bytes);
                        let what = |place: &str| {
                            format!("{} {} {} B ({place})", dt.name(), label(e.coll, op), bytes)
                        };
                        let oop = w
                            .measure(&shape, false)
                            .map_err(|x| x.during(|| what("out-of-place")))?;
                        let ip = w
                            .measure(&shape, true)
                            .map_err(|x| x.during(|| what("in-place")))?;
                        if let Some(o) = out.as_deref_mut() {
                            o.row(&RowResult {
                                size: shape.counts.printed_size(dt.size()),
                                count: shape.counts.param as u64,
                                dtype: dt.name().to_string(),
                                op: label(e.coll, op).to_string(),
                                root: if e.coll.rooted() { root as i64 } else { -1 },
                                out_of_place: oop,
                                in_place: ip,
                                timestamp: e.opts.report_timestamps.then(crate::host::local_time),
                                iterations: e.opts.iters,
                            });
                        }
                    }
                }
            }
        }
    }
    let oob = e.group.allreduce(tid, w.errors as f64, Reduce::Sum)? as u64;
    Ok((oob, w.gpus))
}

/// The op column of a row.
fn label(coll: &dyn Collective, op: RedOp) -> &'static str {
    coll.op_column().label(op)
}

/// The comment printed instead of the rows of a combination the loaded NCCL rejects (`-d all`,
/// `-o all`): names the datatype (and the op where it is looped), never the words `bandwidth`
/// or `FAILED`.
fn skip_line(coll: &dyn Collective, dt: DataType, op: RedOp) -> String {
    let what = if coll.op_column().loops() {
        format!("{} {}", dt.name(), op.name())
    } else {
        dt.name().to_string()
    };
    format!("# Skipping {what}: the loaded NCCL rejects this combination (invalid argument)\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{AllGather, AllReduce};

    #[test]
    fn atof_reads_a_prefix() {
        assert_eq!(atof("100"), 100.0);
        assert_eq!(atof(" 12.5GB"), 12.5);
        assert_eq!(atof("abc"), 0.0);
    }

    #[test]
    fn plan_filters_fp8_below_sm90_and_keeps_explicit_types() {
        let mut o = Options {
            types: DataType::ALL.to_vec(),
            all_types: true,
            ..Options::default()
        };
        let p = plan(&o, &AllReduce, 1, (8, 0), 8, 8).unwrap();
        assert_eq!(p.types.len(), 10);
        assert!(p.skippable);
        let p = plan(&o, &AllReduce, 1, (9, 0), 8, 8).unwrap();
        assert_eq!(p.types.len(), 12);
        o.types = vec![DataType::F8e4m3];
        o.all_types = false;
        let p = plan(&o, &AllReduce, 1, (8, 0), 8, 8).unwrap();
        assert_eq!(p.types, vec![DataType::F8e4m3]);
        assert!(!p.skippable);
    }

    #[test]
    fn non_reductions_run_once_and_print_none() {
        let o = Options {
            ops: RedOp::ALL.to_vec(),
            ..Options::default()
        };
        let p = plan(&o, &AllGather, 4, (9, 0), 1 << 20, 4 << 20).unwrap();
        assert_eq!(p.ops.len(), 1);
        assert_eq!(p.roots, vec![0]);
        assert_eq!(p.sizes, vec![1 << 20, 2 << 20, 3 << 20, 4 << 20]);
        assert_eq!(label(&AllGather, RedOp::Max), "none");
        assert_eq!(label(&AllReduce, RedOp::Max), "max");
    }

    #[test]
    fn roots_of_rooted_collectives() {
        use crate::collective::{Broadcast, Gather, Reduce, Scatter};
        let mut o = Options::default();
        for coll in [&Broadcast as &dyn Collective, &Reduce, &Gather, &Scatter] {
            o.roots = Roots::One(2);
            assert_eq!(plan(&o, coll, 4, (9, 0), 8, 8).unwrap().roots, vec![2]);
            o.roots = Roots::All;
            assert_eq!(
                plan(&o, coll, 4, (9, 0), 8, 8).unwrap().roots,
                vec![0, 1, 2, 3]
            );
        }
        // Non-rooted collectives ignore -r (the root column prints -1).
        o.roots = Roots::One(7);
        assert_eq!(
            plan(&o, &AllReduce, 2, (9, 0), 8, 8).unwrap().roots,
            vec![0]
        );
    }

    #[test]
    fn a_root_outside_the_communicator_is_a_usage_error() {
        let o = Options {
            roots: Roots::One(4),
            ..Options::default()
        };
        let e = plan(&o, &crate::collective::Reduce, 4, (9, 0), 8, 8)
            .err()
            .unwrap();
        assert_eq!(e.exit_code(), 255);
        assert_eq!(
            e.to_string(),
            "invalid root 4 for -r (--root): the communicator has 4 ranks, so the root must be 0..3, or -1 (or all) for every root in turn"
        );
        let o = Options {
            roots: Roots::One(1),
            ..o
        };
        let e = plan(&o, &crate::collective::Gather, 1, (9, 0), 8, 8)
            .err()
            .unwrap();
        assert!(
            e.to_string()
                .contains("the communicator has 1 rank, so the root must be 0,"),
            "{e}"
        );
    }

    #[test]
    fn hypercube_needs_a_power_of_two_before_anything_runs() {
        use crate::collective::Hypercube;
        let o = Options::default();
        let e = plan(&o, &Hypercube, 6, (9, 0), 8, 8).err().unwrap();
        assert_eq!(e.exit_code(), 5);
        assert!(!e.on_stdout());
        let p = plan(&o, &Hypercube, 8, (9, 0), 8, 8).unwrap();
        assert_eq!((p.ops.len(), label(&Hypercube, p.ops[0])), (1, ""));
    }

    #[test]
    fn skipping_needs_a_loop_over_types_or_ops() {
        use crate::collective::{Broadcast, Hypercube, SendRecv};
        let all_ops = Options {
            ops: RedOp::ALL.to_vec(),
            ..Options::default()
        };
        let all_types = Options {
            types: DataType::ALL.to_vec(),
            all_types: true,
            ..Options::default()
        };
        let skippable =
            |o: &Options, c: &dyn Collective| plan(o, c, 2, (9, 0), 8, 8).unwrap().skippable;
        // -o all loops only where the op loop runs.
        assert!(skippable(&all_ops, &AllReduce));
        assert!(skippable(&all_ops, &SendRecv));
        assert!(!skippable(&all_ops, &Broadcast));
        assert!(!skippable(&all_ops, &Hypercube));
        // -d all loops everywhere.
        for c in [
            &AllReduce as &dyn Collective,
            &Broadcast,
            &SendRecv,
            &Hypercube,
        ] {
            assert!(skippable(&all_types, c), "{}", c.name());
            assert!(!skippable(&Options::default(), c), "{}", c.name());
        }
    }

    #[test]
    fn skip_lines_name_the_combination() {
        use crate::collective::{AllToAllV, Hypercube, SendRecv};
        let prod = skip_line(&AllReduce, DataType::F8e4m3, RedOp::Prod);
        assert_eq!(
            prod,
            "# Skipping f8e4m3 prod: the loaded NCCL rejects this combination (invalid argument)\n"
        );
        assert!(
            skip_line(&SendRecv, DataType::Half, RedOp::Avg).starts_with("# Skipping half avg: ")
        );
        for c in [
            &AllGather as &dyn Collective,
            &Hypercube,
            &AllToAllV::generated(1.0),
        ] {
            let l = skip_line(c, DataType::F8e5m2, RedOp::Max);
            assert!(l.starts_with("# Skipping f8e5m2: "), "{l}");
            assert!(!l.contains("bandwidth") && !l.contains("FAILED"));
        }
    }

    #[test]
    fn header_info_uses_unclamped_sizes() {
        let o = Options {
            step_factor: 2,
            ..Options::default()
        };
        let i = run_info(&o, "all_reduce_perf");
        assert_eq!(i.step, Step::Factor(2));
        assert_eq!(i.max_bytes, 32 << 20);
    }
}
