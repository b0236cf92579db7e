//! Phase 5, measure, on the benchmark threads (`-t`): thread 0 runs on the calling thread and
//! prints, the others are spawned; each sets up its own GPUs with `-p 1`, runs the loops over
//! datatype → op → root → cycle → size (one measurement is `worker/`), and reports its `-M 1`
//! figures. A failing thread is recorded in `interrupt`, so the others (which would wait for it
//! forever) return at their next wait, as they do on a signal; the failure is what the run
//! reports, and the output is closed.

use super::discover::Inventory;
use super::engine::{Engine, Shape};
use super::interrupt;
use super::output::Output;
use super::plan::{Loops, Plan, label};
use super::setup::{self, Gpu, GpuPlan, Ready, ThreadGpus};
use super::split_groups;
#[cfg(feature = "test-hooks")]
use super::stall;
use super::sync::ThreadGroup;
use super::worker::{GroupSample, Worker};
use super::wrong_ranks::{WrongPlace, WrongRanks};
use crate::bootstrap::{Bootstrap, Reduce};
use crate::collective::Collective;
use crate::error::{Error, Result};
use crate::report::split::SplitGroup;
use crate::report::{RowResult, table};
use crate::types::{DataType, RedOp};

/// What the measure phase ends with, and what each benchmark thread ends with.
pub(super) struct Measured {
    /// Measurements with wrong data, counted over every rank.
    pub oob_errors: u64,
    /// Where the wrong data was (every thread has the same).
    pub wrong_ranks: Option<WrongRanks>,
    /// The same said with the ranks' hosts (world rank 0; set by [`measure`]).
    pub wrong_place: Option<WrongPlace>,
    /// The GPUs (with their communicators, still open), in NCCL rank order.
    pub gpus: Vec<Gpu>,
    /// With `-M 1`: the memory figures (initialization, user-allocated, collective), maxima
    /// over every thread and process.
    pub memory: Option<[f64; 3]>,
    /// With split groups: every thread's own samples (thread order), until folded.
    samples: Vec<Vec<GroupSample>>,
    /// With split groups, at world rank 0: each group's own result.
    pub split_groups: Vec<SplitGroup>,
}

/// Runs the measure phase: prints the table header, then runs the loops on the benchmark
/// threads, which print the rows (thread 0 of world rank 0); returns every GPU of this process
/// back on this thread.
pub(super) fn measure(
    coll: &dyn Collective,
    boot: &dyn Bootstrap,
    found: &Inventory,
    plan: &Plan,
    ready: Ready,
    out: &mut Output,
) -> Result<Measured> {
    out.print(&table::table_header(out.info()));
    let opts = &found.options;
    let group = ThreadGroup::new(opts.nthreads as usize, boot);
    let engine = Engine {
        opts,
        coll,
        nccl: found.nccl,
        group: &group,
        nranks: found.nranks,
        max_bytes: plan.max_bytes,
        world_size: boot.world_size(),
        record_groups: boot.group().size < boot.world_size(),
    };
    let mut measured = run_threads(&engine, &plan.loops, &ready.gpu_plan, ready.starts, out)?;
    measured.wrong_place = measured.wrong_ranks.map(|w| w.place(&found.device_infos));
    crate::host::trace("all measurements done");
    if engine.record_groups {
        let per_process = (opts.nthreads * opts.ngpus) as usize;
        let first = boot.world_rank() * per_process;
        let mine = split_groups::fold(
            boot.group().color,
            boot.world_rank(),
            (first..first + per_process).collect(),
            &measured.samples,
        );
        measured.split_groups = split_groups::gather(boot, &mine, opts.average)?;
    }
    Ok(measured)
}

/// Runs the test loops on `-t` threads (thread 0 on this one, printing).
fn run_threads(
    e: &Engine,
    plan: &Loops,
    gpu_plan: &GpuPlan,
    starts: Vec<ThreadGpus>,
    out: &mut Output,
) -> Result<Measured> {
    let threads = starts.len();
    // A failing thread cannot leave the others waiting at a barrier: it is recorded, and they
    // return at their next wait. An error after a signal (a peer's communicator aborted) counts
    // as the interruption.
    let stop = |err: Error| match interrupt::pending() {
        Some(signal) if !err.is_interrupted() => Error::Interrupted {
            signal,
            during: String::new(),
        },
        Some(_) => err,
        None => {
            if threads > 1 && !matches!(err, Error::ThreadStopped) {
                interrupt::thread_failed(&err);
            }
            err
        }
    };
    std::thread::scope(|s| {
        let mut it = starts.into_iter();
        let first = it.next().unwrap_or(ThreadGpus::Ready(Vec::new(), None));
        let handles: Vec<_> = it
            .enumerate()
            .map(|(i, start)| {
                s.spawn(move || thread_main(e, plan, gpu_plan, i + 1, start, None).map_err(stop))
            })
            .collect();
        let mine = thread_main(e, plan, gpu_plan, 0, first, Some(out)).map_err(stop);
        // A thread that panicked was reported by the panic hook, which also stopped the others.
        let others = handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Err(Error::Panicked)));
        let results: Vec<Result<Measured>> = std::iter::once(mine).chain(others).collect();
        // The failure to report: the first one that is not a thread stopping for another's.
        let mut errors = results.iter().filter_map(|r| r.as_ref().err());
        if let Some(first) = errors.next() {
            let real = std::iter::once(first)
                .chain(errors)
                .find(|e| !matches!(e, Error::ThreadStopped))
                .cloned()
                .or_else(interrupt::failure)
                .unwrap_or_else(|| first.clone());
            return Err(real);
        }
        let mut ends = results.into_iter().flatten();
        let Some(mut all) = ends.next() else {
            return Err(Error::Internal("no benchmark thread".into()));
        };
        // The counts and memory figures are global: the same on every thread.
        for end in ends {
            all.gpus.extend(end.gpus);
            all.samples.extend(end.samples);
        }
        Ok(all)
    })
}

fn thread_main(
    e: &Engine,
    plan: &Loops,
    gpu_plan: &GpuPlan,
    tid: usize,
    start: ThreadGpus,
    out: Option<&mut Output>,
) -> Result<Measured> {
    let (gpus, setup_memory) = match start {
        ThreadGpus::Ready(gpus, memory) => (gpus, memory),
        ThreadGpus::Init(devices, first_rank) => {
            let (gpus, memory) = setup::create_gpus(gpu_plan, devices, first_rank)?;
            (gpus, Some(memory))
        }
    };
    let mut w = Worker::new(e, tid, gpus)?;
    let ctxs: Vec<_> = w.gpus.iter().map(|g| g.ctx()).collect();
    let memory_on = e.opts.memory_report;
    let free_before = if memory_on {
        setup::free_memory(&ctxs)?
    } else {
        Vec::new()
    };
    if let Some(g) = w.gpus.first() {
        g.ctx().make_current()?;
    }
    let oob = match test_loops(&mut w, e, plan, tid, out) {
        Ok(oob) => oob,
        Err(err) => {
            if err.is_interrupted() || matches!(err, Error::ThreadStopped) {
                #[cfg(feature = "test-hooks")]
                stall::release();
                w.abort_all();
            }
            return Err(err);
        }
    };
    let memory = if memory_on {
        let collective = setup::largest_drop(&free_before, &setup::free_memory(&ctxs)?);
        // Only the threads that set GPUs up report those figures (all of them with -p 1).
        let (init, user) = setup_memory.map_or((f64::NEG_INFINITY, f64::NEG_INFINITY), |m| {
            (m.initialization, m.user_allocated)
        });
        Some([
            e.group.allreduce(tid, init, Reduce::Max)?,
            e.group.allreduce(tid, user, Reduce::Max)?,
            e.group.allreduce(tid, collective, Reduce::Max)?,
        ])
    } else {
        None
    };
    Ok(Measured {
        oob_errors: oob,
        wrong_ranks: w.wrong_ranks,
        wrong_place: None,
        gpus: std::mem::take(&mut w.gpus),
        memory,
        samples: vec![std::mem::take(&mut w.samples)],
        split_groups: Vec::new(),
    })
}

/// The loops over datatype → op → root → cycle → size of one thread; returns the global count
/// of measurements with wrong data.
fn test_loops(
    w: &mut Worker,
    e: &Engine,
    plan: &Loops,
    tid: usize,
    mut out: Option<&mut Output>,
) -> Result<u64> {
    // --explain: every rank makes the untimed call; world rank 0's printing thread records it.
    let explain = e.opts.explain.is_some();
    let arm = out.as_deref().is_some_and(|o| o.explaining());
    let explain_call = |w: &mut Worker, s: &Shape, in_place: bool, arm: bool| {
        if explain {
            w.explain_call(s, in_place, arm)
        } else {
            Ok(None)
        }
    };
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
                        let sure_oop = w.sure.take();
                        let seen_oop = explain_call(w, &shape, false, arm)
                            .map_err(|x| x.during(|| what("out-of-place, --explain")))?;
                        let ip = w
                            .measure(&shape, true)
                            .map_err(|x| x.during(|| what("in-place")))?;
                        let sure = [sure_oop, w.sure.take()];
                        let seen_ip = explain_call(w, &shape, true, arm)
                            .map_err(|x| x.during(|| what("in-place, --explain")))?;
                        if let Some(o) = out.as_deref_mut() {
                            let r = RowResult {
                                size: shape.counts.printed_size(dt.size()),
                                count: shape.counts.param as u64,
                                dtype: dt.name().to_string(),
                                op: label(e.coll, op).to_string(),
                                root: if e.coll.rooted() { root as i64 } else { -1 },
                                out_of_place: oop,
                                in_place: ip,
                                timestamp: e.opts.report_timestamps.then(crate::host::local_time),
                                // --stop-when-sure: the most either half ran.
                                iterations: sure
                                    .iter()
                                    .flatten()
                                    .map(|s| s.iterations as i64)
                                    .max()
                                    .unwrap_or(e.opts.iters),
                            };
                            o.sure(&r, sure, e.opts.iters);
                            if explain {
                                o.row_explained(&r, [seen_oop, seen_ip]);
                            } else {
                                o.row(&r);
                            }
                        }
                    }
                }
            }
        }
    }
    e.group
        .allreduce(tid, w.errors as f64, Reduce::Sum)
        .map(|v| v as u64)
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
}
