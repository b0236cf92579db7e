//! Harness overhead on one GPU: a bare loop of `ncclAllReduce` calls followed by a stream
//! synchronisation, against nccl-perf's own timed loop (`Worker::timed_loop`), same process,
//! same buffers, interleaved, sizes 8 B … 1 GiB, out-of-place and in-place.
//!
//! Prints per size and half the median time per operation of each, their difference in µs and
//! their ratio. Run on a GPU machine: `cargo bench --bench overhead` (or the built binary).
//! Without a GPU it prints why it skipped and exits 0.

use nccl_perf::bootstrap::SingleProcess;
use nccl_perf::collective::{AllReduce, Collective};
use nccl_perf::gpu::{driver, nccl::Nccl};
use nccl_perf::options::Options;
use nccl_perf::runner::setup::{self, BufferSizes, Gpu};
use nccl_perf::runner::{Engine, Shape, ThreadGroup, Worker};
use nccl_perf::types::{DataType, RedOp};
use std::ffi::c_void;
use std::time::Instant;

const ITERS: u64 = 20;
const REPEATS: usize = 101;
const MAX: u64 = 1 << 30;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The bare loop: n calls on the same rotating buffer offsets as nccl-tests, then wait for the
/// stream. Seconds per operation.
fn bare(nccl: &Nccl, g: &Gpu, count: usize, in_place: bool) -> f64 {
    let send = if in_place { g.recv } else { g.send };
    let span = (count * 4) as u64;
    let steps = MAX.checked_div(span).unwrap_or(1).max(1);
    let stream = g.stream as *mut c_void;
    let t = Instant::now();
    for i in 0..ITERS {
        let shift = span * (i % steps);
        let (s, r) = (
            (send + shift) as *const c_void,
            (g.recv + shift) as *mut c_void,
        );
        // SAFETY: buffers of MAX bytes, live communicator and stream.
        let r = unsafe { (nccl.ncclAllReduce)(s, r, count, 7, 0, g.comm, stream) };
        assert_eq!(r, 0);
    }
    while !driver::stream_done(g.stream).expect("stream query") {
        std::thread::yield_now();
    }
    t.elapsed().as_secs_f64() / ITERS as f64
}

fn main() {
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
    let nccl = Nccl::load().expect("libnccl");
    let version = nccl.version().expect("version");
    let devices = setup::discover(0, 1).expect("device 0");
    let mut id = nccl_perf::gpu::nccl::UniqueId { internal: [0; 128] };
    // SAFETY: valid out pointer.
    assert_eq!(unsafe { (nccl.ncclGetUniqueId)(&mut id) }, 0);
    let (ctx, comm) =
        setup::init_comms(&nccl, &devices, &id, 1, 0, version, None).expect("comm")[0];
    let sizes = BufferSizes {
        data: MAX as usize,
        expected: 0,
    };
    let gpu = Gpu::create(&nccl, 0, ctx, comm, 0, sizes, false).expect("buffers");
    let opts = Options {
        check: 0,
        max_bytes: MAX,
        ..Options::default()
    };
    let boot = SingleProcess;
    let group = ThreadGroup::new(1, &boot);
    let engine = Engine {
        opts: &opts,
        coll: &AllReduce,
        nccl: &nccl,
        group: &group,
        nranks: 1,
        max_bytes: MAX,
        world_size: 1,
    };
    let raw = (gpu.send, gpu.recv, gpu.stream, gpu.comm);
    let worker = Worker::new(&engine, 0, vec![gpu]).expect("worker");
    let g = &worker.gpus[0];
    assert_eq!((g.send, g.recv, g.stream, g.comm), raw);

    println!(
        "# nccl-perf harness overhead: all_reduce float sum, 1 GPU, {ITERS} ops per sample, median of {REPEATS}"
    );
    println!(
        "# noise_us: the same bare loop timed twice, interleaved (what a difference smaller than it means)"
    );
    println!("#      bytes  half     bare_us  harness_us   delta_us   ratio   noise_us");
    let mut bytes = 8u64;
    while bytes <= MAX {
        let shape = Shape::new(&engine, DataType::Float, RedOp::Sum, 0, bytes);
        for in_place in [false, true] {
            let count = AllReduce.counts(bytes as usize / 4, 1, 4).param;
            // Warm both paths.
            bare(&nccl, g, count, in_place);
            worker
                .timed_loop(&shape, in_place, ITERS, 1)
                .expect("timed loop");
            let (mut b, mut h, mut b2) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..REPEATS {
                b.push(bare(&nccl, g, count, in_place));
                let t = worker.timed_loop(&shape, in_place, ITERS, 1);
                h.push(t.expect("timed loop").1);
                b2.push(bare(&nccl, g, count, in_place));
            }
            let (b, h, b2) = (median(b) * 1e6, median(h) * 1e6, median(b2) * 1e6);
            println!(
                "{bytes:>12}  {}  {b:>10.3}  {h:>10.3}  {:>9.3}  {:>6.3}  {:>9.3}",
                if in_place { "ip " } else { "oop" },
                h - b,
                h / b,
                b2 - b
            );
        }
        bytes *= 4;
    }
}
