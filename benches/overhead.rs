//! Harness overhead on one GPU (one rank), for every collective: a bare loop of exactly the
//! NCCL calls nccl-tests makes per operation, followed by a stream wait, against nccl-perf's own
//! timed loop (`Worker::timed_loop`), same process, same communicator, same buffers and buffer
//! rotation, interleaved (bare, ours, bare again), out-of-place and in-place, small to large.
//!
//! ```text
//! cargo bench --bench overhead                         # all eleven collectives
//! cargo bench --bench overhead -- sendrecv all_reduce  # some of them
//! cargo bench --bench overhead -- --sizes 8,64K --quick
//! ```
//!
//! Per collective, size and half it prints the median time per operation of the bare loop and
//! of ours, `delta_us` = median over repeats of ours − the mean of the two bare loops around it
//! (paired, so slow drifts cancel), the same in percent, `noise_us` = median of the second bare
//! loop − the first (what a delta smaller than it means), and `goal`: `ok`/`over` against
//! ≤ 0.05 µs per operation up to 64 KiB and ≤ 0.1 % from 1 GiB (`-` in between). Without a GPU
//! it prints why it skipped and exits 0.
//!
//! With one rank the rooted collectives use root 0, sendrecv, alltoall(v), gather and scatter
//! send to themselves. The bare loops are written out here from the spec (§1.1, §1.6, §1.7),
//! not derived from our plans. They leave out nccl-tests' per-operation `ncclCommCount` /
//! `ncclCommUserRank` queries (sendrecv, alltoall, gather, scatter, hypercube): the bare loop is
//! a lower bound of nccl-tests' own per-operation host work.

use nccl_perf::bootstrap::SingleProcess;
use nccl_perf::collective::{Counts, all};
use nccl_perf::gpu::{driver, nccl::Nccl};
use nccl_perf::options::Options;
use nccl_perf::runner::setup::{self, BufferSizes, Gpu};
use nccl_perf::runner::{Engine, Shape, ThreadGroup, Worker};
use nccl_perf::types::{DataType, RedOp};
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
fn schedule(bytes: u64, quick: bool) -> (u64, usize) {
    let (iters, repeats) = match bytes {
        0..=0x1_0000 => (20, 151),
        0x1_0001..=0x100_0000 => (20, 51),
        0x100_0001..=0x1000_0000 => (10, 21),
        _ => (10, 15),
    };
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
}

fn usage() -> String {
    let names: Vec<&str> = all().iter().map(|c| c.name()).collect();
    format!(
        "usage: overhead [COLLECTIVE ...] [--sizes 8,1K,64K,8M,1G] [--quick]\n  collectives: {}",
        names.join(" ")
    )
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        names: Vec::new(),
        sizes: SIZES.to_vec(),
        quick: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(w) = it.next() {
        match w.as_str() {
            // cargo bench passes --bench to harness-less benchmarks.
            "--bench" => {}
            "--quick" => a.quick = true,
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

/// Times `iters` operations of `op` on nccl-tests' rotating pointers (`shift = span × (it mod
/// steps)`, computed as nccl-tests does), then polls the stream until idle as nccl-tests' wait
/// does. `op(send, recv)` makes one operation's calls. Seconds per operation.
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
    let t = Instant::now();
    for i in 0..iters {
        let shift = span * (i % steps);
        let r = op((send + shift) as *mut c_void, (recv + shift) as *mut c_void);
        assert_eq!(r, 0, "NCCL call failed");
    }
    while !g.stream().is_done().expect("stream query") {
        std::thread::yield_now();
    }
    t.elapsed().as_secs_f64() / iters as f64
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
                    |a, b| match driver::copy_async(
                        b as u64,
                        a as u64,
                        p * TS,
                        st as driver::CUstream,
                    ) {
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
    comm: nccl_perf::gpu::nccl::Comm,
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

fn goal(bytes: u64, delta_us: f64, bare_us: f64) -> &'static str {
    if bytes <= 64 << 10 {
        if delta_us <= 0.05 { "ok" } else { "over" }
    } else if bytes >= 1 << 30 {
        if delta_us <= 0.001 * bare_us {
            "ok"
        } else {
            "over"
        }
    } else {
        "-"
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
    if let Err(e) = driver::init()
        .and_then(|_| driver::device_count())
        .and_then(|n| {
            if n == 0 {
                Err(nccl_perf::error::Error::Internal("no device".into()))
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
    let devices = nccl_perf::runner::discover::devices(0, 1).expect("device 0");
    let id = nccl.unique_id().expect("unique id");
    let (ctx, comm) = setup::init_comms(nccl, &devices, &id, 1, 0, version, None)
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
         bare - bare; goal: <= 0.05 us up to 64 KiB, <= 0.1 % from 1 GiB"
    );
    println!(
        "# {:<15} {:>11}  half  iters  reps     bare_us     ours_us   delta_us  delta_%   noise_us  goal",
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
            let (iters, repeats) = schedule(bytes, args.quick);
            for in_place in [false, true] {
                let g = &worker.gpus[0];
                let ours = || {
                    worker
                        .timed_loop(&shape, in_place, iters, 1)
                        .expect("timed loop")
                        .1
                };
                // Warm both paths (first use of a peer or size inside NCCL).
                for _ in 0..2 {
                    bare(nccl, g, name, &c, &shape, in_place, iters);
                    ours();
                }
                let (mut b, mut h, mut d, mut noise) = (
                    Vec::with_capacity(repeats),
                    Vec::with_capacity(repeats),
                    Vec::with_capacity(repeats),
                    Vec::with_capacity(repeats),
                );
                for _ in 0..repeats {
                    let b1 = bare(nccl, g, name, &c, &shape, in_place, iters);
                    let o = ours();
                    let b2 = bare(nccl, g, name, &c, &shape, in_place, iters);
                    b.push((b1 + b2) / 2.0 * 1e6);
                    h.push(o * 1e6);
                    d.push((o - (b1 + b2) / 2.0) * 1e6);
                    noise.push((b2 - b1) * 1e6);
                }
                let (b, h, d, noise) = (
                    median(&mut b),
                    median(&mut h),
                    median(&mut d),
                    median(&mut noise),
                );
                println!(
                    "  {name:<15} {bytes:>11}  {}  {iters:>5}  {repeats:>4}  {b:>10.3}  {h:>10.3}  {d:>9.3}  {:>7.3}  {noise:>9.3}  {}",
                    if in_place { "ip " } else { "oop" },
                    if b > 0.0 { d / b * 100.0 } else { 0.0 },
                    goal(bytes, d, b)
                );
            }
        }
        gpus = std::mem::take(&mut worker.gpus);
    }
    println!("# wall time {:.1} s", wall.elapsed().as_secs_f64());
}
