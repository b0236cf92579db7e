//! Harness overhead on one GPU (one rank), for every collective: a bare loop of exactly the
//! NCCL calls nccl-tests makes per operation, followed by a stream wait, against nccl-perf's own
//! timed loop (`Worker::timed_loop`, the code `Worker::measure` runs), same process, same
//! communicator, same buffers and buffer rotation, interleaved (bare, ours, bare again),
//! out-of-place and in-place, small to large. Both sides start as both programs do: one
//! operation issued and waited for (nccl-tests' and our sync operation), then the clock.
//!
//! ```text
//! cargo bench --bench overhead                         # all eleven collectives
//! cargo bench --bench overhead -- sendrecv all_reduce  # some of them
//! cargo bench --bench overhead -- --sizes 8,64K --quick
//! cargo bench --bench overhead -- --iters 200            # longer loops: per-loop costs fade
//! cargo bench --bench overhead -- --explain              # with --explain's plugins loaded
//! ```
//!
//! `--explain` loads `--explain`'s NCCL plugins first (disarmed, as during a run's timed loops):
//! comparing a run with it to one without shows what the loaded plugins cost NCCL's calls.
//!
//! Per collective, size and half it prints the median time per operation of the bare loop and
//! of ours, `delta_us` = median over repeats of ours − the mean of the two bare loops around it
//! (paired, so slow drifts cancel), the same in percent, `noise_us` = median of the second bare
//! loop − the first (the same estimator on two identical loops: what position alone gives),
//! `se_us` = the standard error of `delta_us` (from the deltas' median absolute deviation), and
//! `goal` against ≤ 0.05 µs per operation up to 64 KiB and ≤ 0.1 % from 1 GiB (`-` in between):
//! `ok` when the delta meets it, `noise` when it does not but lies within two standard errors of
//! it, `over` otherwise. Without a GPU it prints why it skipped and exits 0.
//!
//! With one rank the rooted collectives use root 0, sendrecv, alltoall(v), gather and scatter
//! send to themselves. The bare loops are written out here from nccl-tests' own calls (each
//! binary's NCCL calls per operation, alltoallv's generated per-peer counts, hypercube's
//! recursive doubling), not derived from our plans. They leave out nccl-tests' per-operation
//! `ncclCommCount` / `ncclCommUserRank` queries (sendrecv, alltoall, gather, scatter, hypercube):
//! the bare loop is a lower bound of nccl-tests' own per-operation host work.

use nccl_perf_bench::bootstrap::SingleProcess;
use nccl_perf_bench::collective::{Counts, all};
use nccl_perf_bench::gpu::driver::{self, CUstream};
use nccl_perf_bench::gpu::nccl::{Comm, Nccl};
use nccl_perf_bench::options::Options;
use nccl_perf_bench::runner::setup::{self, BufferSizes, Gpu};
use nccl_perf_bench::runner::{Engine, Shape, ThreadGroup, Worker};
use nccl_perf_cli::types::{DataType, RedOp};
use std::ffi::{c_int, c_void};
use std::time::Instant;

/// `ncclFloat32`, `ncclSum`.
const FLOAT: c_int = 7;
const SUM: c_int = 0;
const TS: usize = 4;

/// The default sizes: latency-bound, mid, bandwidth-bound.
const SIZES: [u64; 5] = [8, 1 << 10, 64 << 10, 8 << 20, 1 << 30];

/// Operations per timed loop and loops per (size, half), by size: about 25 s for all eleven
/// collectives on an H200 (the 1 GiB rows dominate).
fn schedule(bytes: u64, quick: bool, iters_override: Option<u64>) -> (u64, usize) {
    let (iters, repeats) = match bytes {
        0..=0x1_0000 => (20, 151),
        0x1_0001..=0x100_0000 => (20, 51),
        0x100_0001..=0x1000_0000 => (10, 21),
        _ => (10, 15),
    };
    let iters = iters_override.unwrap_or(iters);
    if quick {
        (iters, (repeats / 5).max(3) | 1)
    } else {
        (iters, repeats)
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// `8`, `1K`, `64k`, `8M`, `1G`: bytes.
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()?.to_ascii_uppercase() {
        'K' => (&s[..s.len() - 1], 1u64 << 10),
        'M' => (&s[..s.len() - 1], 1 << 20),
        'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>()
        .ok()?
        .checked_mul(mult)
        .filter(|b| *b > 0)
}

struct Args {
    names: Vec<String>,
    sizes: Vec<u64>,
    quick: bool,
    /// Operations per timed loop instead of the schedule's.
    iters: Option<u64>,
    /// `--explain`: NCCL loads `--explain`'s plugins (disarmed, as in a run's timed loops).
    explain: bool,
}

fn usage() -> String {
    let names: Vec<&str> = all().iter().map(|c| c.name()).collect();
    format!(
        "usage: overhead [COLLECTIVE ...] [--sizes 8,1K,64K,8M,1G] [--quick] [--iters N] [--explain]\n  collectives: {}",
        names.join(" ")
    )
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        names: Vec::new(),
        sizes: SIZES.to_vec(),
        quick: false,
        iters: None,
        explain: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(w) = it.next() {
        match w.as_str() {
            // cargo bench passes --bench to harness-less benchmarks.
            "--bench" => {}
            "--quick" => a.quick = true,
            "--explain" => a.explain = true,
            "--iters" => {
                let n = it.next().ok_or("--iters needs a number")?;
                a.iters = Some(
                    n.parse::<u64>()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or(format!("bad --iters '{n}'"))?,
                );
            }
            "--sizes" => {
                let list = it.next().ok_or("--sizes needs a list")?;
                a.sizes = list
                    .split(',')
                    .map(|s| parse_size(s).ok_or(format!("bad size '{s}'")))
                    .collect::<Result<_, _>>()?;
            }
            "-h" | "--help" => return Err(usage()),
            w if w.starts_with('-') => return Err(format!("unknown option {w}\n{}", usage())),
            w => {
                let name = w.strip_suffix("_perf").unwrap_or(w).to_string();
                if !all().iter().any(|c| c.name() == name) {
                    return Err(format!("unknown collective {w}\n{}", usage()));
                }
                a.names.push(name);
            }
        }
    }
    Ok(a)
}

/// Polls `g`'s stream until idle, as nccl-tests' wait does.
fn wait(g: &Gpu) {
    while !g.stream().is_done().expect("stream query") {
        std::thread::yield_now();
    }
}

/// As nccl-tests times a measurement: one operation at the first pointers, waited for (its
/// sync operation), then the clock, `iters` operations on its rotating pointers (`shift = span
/// × (it mod steps)`, computed as nccl-tests does) and the wait. `op(send, recv)` makes one
/// operation's calls. Seconds per operation.
#[inline(always)]
fn bare_loop(
    g: &Gpu,
    in_place: bool,
    iters: u64,
    span: u64,
    steps: u64,
    mut op: impl FnMut(*mut c_void, *mut c_void) -> c_int,
) -> f64 {
    let (send, recv) = (g.send().addr(), g.recv().addr());
    let send = if in_place { recv } else { send };
    assert_eq!(
        op(send as *mut c_void, recv as *mut c_void),
        0,
        "NCCL call failed"
    );
    wait(g);
    let start = Instant::now();
    for i in 0..iters {
        let shift = span * (i % steps);
        let r = op((send + shift) as *mut c_void, (recv + shift) as *mut c_void);
        assert_eq!(r, 0, "NCCL call failed");
    }
    wait(g);
    start.elapsed().as_secs_f64() / iters as f64
}

/// The bare loop of collective `name` on one rank (see the module comment).
fn bare(nccl: &Nccl, g: &Gpu, name: &str, c: &Counts, s: &Shape, in_place: bool, n: u64) -> f64 {
    let (comm, st) = (g.comm().as_raw(), g.stream().as_raw() as *mut c_void);
    let p = c.param;
    // SAFETY (every call): pointers inside the 2 × MAX-byte buffers, live comm and stream.
    unsafe {
        match name {
            "all_reduce" => bare_loop(g, in_place, n, s.span, s.steps, |a, b| {
                (nccl.ncclAllReduce)(a, b, p, FLOAT, SUM, comm, st)
            }),
            "all_gather" => bare_loop(g, in_place, n, s.span, s.steps, |a, b| {
                (nccl.ncclAllGather)(a, b, p, FLOAT, comm, st)
            }),
            "broadcast" => bare_loop(g, in_place, n, s.span, s.steps, |a, b| {
                (nccl.ncclBroadcast)(a, b, p, FLOAT, 0, comm, st)
            }),
            "reduce" => bare_loop(g, in_place, n, s.span, s.steps, |a, b| {
                (nccl.ncclReduce)(a, b, p, FLOAT, SUM, 0, comm, st)
            }),
            "reduce_scatter" => bare_loop(g, in_place, n, s.span, s.steps, |a, b| {
                (nccl.ncclReduceScatter)(a, b, p, FLOAT, SUM, comm, st)
            }),
            "alltoall" => match nccl.ncclAlltoAll {
                Some(f) => bare_loop(g, in_place, n, s.span, s.steps, |a, b| {
                    f(a, b, p, FLOAT, comm, st)
                }),
                None => bare_loop(g, in_place, n, s.span, s.steps, |a, b| {
                    send_recv_self(nccl, a, b, p, p, comm, st)
                }),
            },
            // One rank sends itself its whole total (16-byte rounded, i.e. p elements).
            "alltoallv" => {
                let v = c.send;
                bare_loop(g, in_place, n, s.span, s.steps, |a, b| {
                    send_recv_self(nccl, a, b, v, v, comm, st)
                })
            }
            "gather" | "scatter" if p == 0 => bare_loop(g, in_place, n, s.span, s.steps, |_, _| 0),
            "gather" => match nccl.ncclGather {
                Some(f) => bare_loop(g, in_place, n, s.span, s.steps, |a, b| {
                    f(a, b, p, FLOAT, 0, comm, st)
                }),
                None => bare_loop(g, in_place, n, s.span, s.steps, |a, b| {
                    send_recv_self(nccl, a, b, p, p, comm, st)
                }),
            },
            "scatter" => match nccl.ncclScatter {
                Some(f) => bare_loop(g, in_place, n, s.span, s.steps, |a, b| {
                    f(a, b, p, FLOAT, 0, comm, st)
                }),
                None => bare_loop(g, in_place, n, s.span, s.steps, |a, b| {
                    send_recv_self(nccl, a, b, p, p, comm, st)
                }),
            },
            "sendrecv" => bare_loop(g, in_place, n, s.span, s.steps, |a, b| {
                send_recv_self(nccl, a, b, p, p, comm, st)
            }),
            // One rank: copy the own block into place (nothing in place), then no rounds.
            "hypercube" if in_place || p == 0 => {
                bare_loop(g, in_place, n, s.span, s.steps, |_, _| 0)
            }
            "hypercube" => {
                bare_loop(
                    g,
                    in_place,
                    n,
                    s.span,
                    s.steps,
                    |a, b| match driver::copy_async(b as u64, a as u64, p * TS, st as CUstream) {
                        Ok(()) => 0,
                        Err(_) => 1,
                    },
                )
            }
            other => unreachable!("{other}"),
        }
    }
}

/// `ncclGroupStart; ncclSend(a, sc) to self; ncclRecv(b, rc) from self; ncclGroupEnd` (empty
/// sides left out, as alltoallv does).
#[inline(always)]
unsafe fn send_recv_self(
    nccl: &Nccl,
    a: *mut c_void,
    b: *mut c_void,
    sc: usize,
    rc: usize,
    comm: Comm,
    st: *mut c_void,
) -> c_int {
    // SAFETY: the caller's buffers, comm and stream.
    unsafe {
        let mut r = (nccl.ncclGroupStart)();
        if sc > 0 {
            r |= (nccl.ncclSend)(a, sc, FLOAT, 0, comm, st);
        }
        if rc > 0 {
            r |= (nccl.ncclRecv)(b, rc, FLOAT, 0, comm, st);
        }
        r | (nccl.ncclGroupEnd)()
    }
}

/// Our side: `Worker::timed_loop`, seconds per operation to completion.
fn ours(w: &mut Worker, s: &Shape, in_place: bool, iters: u64) -> f64 {
    w.timed_loop(s, in_place, iters, 1).expect("timed loop").1
}

/// The standard error of the median of `v`: 1.2533 σ / √n, σ estimated as 1.4826 × the
/// median absolute deviation.
fn se_of_median(v: &[f64]) -> f64 {
    let mut w = v.to_vec();
    let m = median(&mut w);
    let mut dev: Vec<f64> = v.iter().map(|x| (x - m).abs()).collect();
    1.2533 * 1.4826 * median(&mut dev) / (v.len() as f64).sqrt()
}

fn goal(bytes: u64, delta_us: f64, se_us: f64, bare_us: f64) -> &'static str {
    let limit = if bytes <= 64 << 10 {
        0.05
    } else if bytes >= 1 << 30 {
        0.001 * bare_us
    } else {
        return "-";
    };
    if delta_us <= limit {
        "ok"
    } else if delta_us - 2.0 * se_us <= limit {
        "noise"
    } else {
        "over"
    }
}

fn main() {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    // Before NCCL is loaded, as the benchmarks do (the hang watch's profiler always, explain's
    // plugins with --explain): both loops then run with the plugins loaded and, one node,
    // their activation mask empty.
    nccl_perf_bench::gpu::plugins::install(args.explain, true);
    if let Some(i) = nccl_perf_capture::installed() {
        println!(
            "explain plugins: profiler {:?}, tuner {:?} (None: ours)",
            i.profiler, i.tuner
        );
    }
    if let Err(e) = driver::init()
        .and_then(|_| driver::device_count())
        .and_then(|n| {
            if n == 0 {
                Err(nccl_perf_bench::error::Error::Internal("no device".into()))
            } else {
                Ok(())
            }
        })
    {
        println!("overhead bench skipped: no GPU ({e})");
        return;
    }
    let wall = Instant::now();
    let max = args.sizes.iter().copied().max().unwrap_or(8).max(8);
    let nccl = Nccl::load().expect("libnccl");
    let version = nccl.version().expect("version");
    let devices = nccl_perf_bench::runner::discover::devices(0, 1).expect("device 0");
    let id = nccl.unique_id().expect("unique id");
    let (ctx, comm) = setup::init_comms(nccl, &devices, &[id], 1, 0, version, None)
        .expect("comm")
        .remove(0);
    let sizes = BufferSizes {
        data: max as usize,
        expected: 0,
    };
    let mut gpus = vec![Gpu::create(nccl, 0, ctx, comm, 0, sizes, false).expect("buffers")];
    let opts = Options {
        check: 0,
        max_bytes: max,
        ..Options::default()
    };
    let boot = SingleProcess;
    let group = ThreadGroup::new(1, &boot);

    println!(
        "# nccl-perf harness overhead: float sum, 1 GPU (1 rank), NCCL {version}; per (size, half) \
         the median of REPEATS loops of ITERS operations, interleaved bare / ours / bare"
    );
    println!(
        "# delta_us: ours - mean of the bare loops around it, median over repeats; noise_us: \
         bare - bare; se_us: standard error of delta; goal: <= 0.05 us up to 64 KiB, <= 0.1 % \
         from 1 GiB (noise: over it by less than 2 se)"
    );
    println!(
        "# {:<15} {:>11}  half  iters  reps     bare_us     ours_us   delta_us  delta_%   noise_us   se_us  goal",
        "collective", "bytes"
    );
    for coll in all() {
        let name = coll.name();
        if !args.names.is_empty() && !args.names.iter().any(|n| n == name) {
            continue;
        }
        let engine = Engine {
            opts: &opts,
            coll: &*coll,
            nccl,
            group: &group,
            nranks: 1,
            max_bytes: max,
            world_size: 1,
            record_groups: false,
        };
        let mut worker = Worker::new(&engine, 0, std::mem::take(&mut gpus)).expect("worker");
        for &bytes in &args.sizes {
            let shape = Shape::new(&engine, DataType::Float, RedOp::Sum, 0, bytes);
            let c = coll.counts(bytes as usize / TS, 1, TS);
            let (iters, repeats) = schedule(bytes, args.quick, args.iters);
            for in_place in [false, true] {
                // Warm both paths (first use of a peer or size inside NCCL).
                for _ in 0..2 {
                    bare(nccl, &worker.gpus[0], name, &c, &shape, in_place, iters);
                    ours(&mut worker, &shape, in_place, iters);
                }
                let (mut b, mut h, mut d, mut noise) = (
                    Vec::with_capacity(repeats),
                    Vec::with_capacity(repeats),
                    Vec::with_capacity(repeats),
                    Vec::with_capacity(repeats),
                );
                for _ in 0..repeats {
                    let b1 = bare(nccl, &worker.gpus[0], name, &c, &shape, in_place, iters);
                    let o = ours(&mut worker, &shape, in_place, iters);
                    let b2 = bare(nccl, &worker.gpus[0], name, &c, &shape, in_place, iters);
                    b.push((b1 + b2) / 2.0 * 1e6);
                    h.push(o * 1e6);
                    d.push((o - (b1 + b2) / 2.0) * 1e6);
                    noise.push((b2 - b1) * 1e6);
                }
                let se = se_of_median(&d);
                let (b, h, d, noise) = (
                    median(&mut b),
                    median(&mut h),
                    median(&mut d),
                    median(&mut noise),
                );
                println!(
                    "  {name:<15} {bytes:>11}  {}  {iters:>5}  {repeats:>4}  {b:>10.3}  {h:>10.3}  {d:>9.3}  {:>7.3}  {noise:>9.3}  {se:>6.3}  {}",
                    if in_place { "ip " } else { "oop" },
                    if b > 0.0 { d / b * 100.0 } else { 0.0 },
                    goal(bytes, d, se, b)
                );
            }
        }
        gpus = std::mem::take(&mut worker.gpus);
    }
    println!("# wall time {:.1} s", wall.elapsed().as_secs_f64());
}
