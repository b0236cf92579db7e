//! GPU check of `kernels/verifiable.cu`: compiles it with NVRTC, runs every generator kernel and
//! compares its output with the host mirror bit for bit, and checks that the mismatch kernels
//! count planted differences (tolerance honoured).
//!
//! Without a GPU the tests print `skipped: no GPU (...)` to stderr and pass. Where NVRTC is
//! present but no GPU is, they still compile the source, so a syntax error cannot hide.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaModule, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{CompileError, CompileOptions, Ptx, compile_ptx_with_opts};
use nccl_perf_bench::verify::kernel_source::{
    SOURCE, expected_kernel, input_kernel, launch_dims, mismatch_kernel, op_code,
};
use nccl_perf_cli::types::{DataType, RedOp};
use oracle::generator::{expected_bits, input_bits, tolerance};

/// Elements per launch: not a multiple of the block size, so the tail is exercised.
const COUNT: u64 = 4133;
const RNS: [u32; 5] = [1, 2, 3, 8, 72];
/// (seed, first index): small indices with one seed, indices near 2^62 with the other.
const SEEDS: [(u64, u64); 2] = [(7, 0), (0x0123_4567_89ab_cdef, (1 << 62) + 12_345)];

/// Architecture used for a compile-only check when no device is there to ask.
const FALLBACK_ARCH: &str = "compute_90";

struct Gpu {
    stream: Arc<CudaStream>,
    module: Arc<CudaModule>,
    label: String,
}

fn compile(arch: &str) -> Ptx {
    let opts = CompileOptions {
        options: vec![format!("--gpu-architecture={arch}")],
        ..Default::default()
    };
    match compile_ptx_with_opts(SOURCE, opts) {
        Ok(ptx) => ptx,
        Err(CompileError::CompileError {
            nvrtc,
            options,
            log,
        }) => panic!(
            "NVRTC failed to compile kernels/verifiable.cu ({nvrtc:?}, options {options:?}):\n{}",
            log.to_string_lossy()
        ),
        Err(e) => panic!("NVRTC error on kernels/verifiable.cu: {e}"),
    }
}

/// The device's context, or why there is none.
fn context() -> Result<Arc<CudaContext>, String> {
    // SAFETY: only tries to load the driver library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err("libcuda not found".into());
    }
    cudarc::driver::result::init().map_err(|e| format!("cuInit failed: {e}"))?;
    let n = cudarc::driver::result::device::get_count()
        .map_err(|e| format!("cuDeviceGetCount failed: {e}"))?;
    if n == 0 {
        return Err("0 devices".into());
    }
    CudaContext::new(0).map_err(|e| format!("cannot create a context on device 0: {e}"))
}

/// Compiles and loads the kernels, or prints why the test is skipped and returns `None`.
fn setup(test: &str) -> Option<Gpu> {
    // SAFETY: only tries to load the NVRTC library.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        eprintln!("{test}: skipped: no GPU (libnvrtc not found)");
        return None;
    }
    let ctx = match context() {
        Ok(ctx) => ctx,
        Err(why) => {
            compile(FALLBACK_ARCH);
            eprintln!(
                "{test}: skipped: no GPU ({why}); verifiable.cu compiled for {FALLBACK_ARCH}"
            );
            return None;
        }
    };
    let (major, minor) = ctx.compute_capability().expect("compute capability");
    let arch = format!("compute_{major}{minor}");
    let module = ctx.load_module(compile(&arch)).unwrap_or_else(|e| {
        panic!("cannot load the PTX for {arch} (a driver older than NVRTC rejects it): {e}")
    });
    let name = ctx.name().unwrap_or_else(|_| "?".into());
    Some(Gpu {
        stream: ctx.default_stream(),
        module,
        label: format!("{name} (sm_{major}{minor})"),
    })
}

fn cfg((grid, block): (u32, u32)) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (grid, 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Little-endian elements of `size` bytes, zero-extended.
fn unpack(bytes: &[u8], size: usize) -> Vec<u64> {
    bytes
        .chunks_exact(size)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..size].copy_from_slice(c);
            u64::from_le_bytes(b)
        })
        .collect()
}

fn pack(values: &[u64], size: usize) -> Vec<u8> {
    values
        .iter()
        .flat_map(|v| v.to_le_bytes()[..size].to_vec())
        .collect()
}

/// Host values `f(ix0 + i)` for `i < count`, computed on all cores.
fn host_values(count: u64, ix0: u64, f: impl Fn(u64) -> u64 + Sync) -> Vec<u64> {
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get()) as u64;
    let chunk = count.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..count)
            .step_by(chunk as usize)
            .map(|start| {
                let f = &f;
                s.spawn(move || {
                    (start..(start + chunk).min(count))
                        .map(|i| f(ix0.wrapping_add(i)))
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("host worker"))
            .collect()
    })
}

/// One generator launch: `rme == None` runs `np_expected_*`, else `np_input_*` for that rank.
fn run_generator(
    gpu: &Gpu,
    dt: DataType,
    op: Option<RedOp>,
    rn: u32,
    rme: Option<u32>,
    seed: u64,
    ix0: u64,
) -> Vec<u64> {
    let name = match rme {
        Some(_) => input_kernel(dt),
        None => expected_kernel(dt),
    };
    let f = gpu
        .module
        .load_function(&name)
        .unwrap_or_else(|e| panic!("kernel {name} not found: {e}"));
    let mut buf: CudaSlice<u8> = gpu
        .stream
        .alloc_zeros(COUNT as usize * dt.size())
        .expect("alloc");
    let (count, opc, rn_arg) = (COUNT, op_code(op), rn as i32);
    let rme_arg = rme.unwrap_or(0) as i32;
    let mut b = gpu.stream.launch_builder(&f);
    b.arg(&mut buf).arg(&count).arg(&ix0).arg(&opc).arg(&rn_arg);
    if rme.is_some() {
        b.arg(&rme_arg);
    }
    b.arg(&seed);
    // SAFETY: the arguments match the kernel's parameter list (checked by the source test in
    // src/verify/kernels.rs) and `buf` holds COUNT elements.
    unsafe { b.launch(cfg(launch_dims(COUNT))) }.unwrap_or_else(|e| panic!("launch {name}: {e}"));
    gpu.stream.synchronize().expect("synchronize");
    unpack(&gpu.stream.clone_dtoh(&buf).expect("copy back"), dt.size())
}

fn rmes(rn: u32) -> Vec<u32> {
    let mut v = vec![0, 1, rn / 2, rn - 1];
    v.retain(|&r| r < rn);
    v.sort_unstable();
    v.dedup();
    v
}

fn op_name(op: Option<RedOp>) -> &'static str {
    op.map_or("nil", RedOp::name)
}

#[test]
fn gpu_generator_matches_host_mirror() {
    let Some(gpu) = setup("gpu_generator_matches_host_mirror") else {
        return;
    };
    let mut launches = 0u64;
    let mut compared = 0u64;
    let mut wrong = 0u64;
    let mut first: Vec<String> = Vec::new();
    let mut note = |what: String, got: &[u64], want: &[u64], ix0: u64| {
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            if g != w {
                wrong += 1;
                if first.len() < 20 {
                    first.push(format!(
                        "{what} ix={:#x}: gpu {g:#x} host {w:#x}",
                        ix0.wrapping_add(i as u64)
                    ));
                }
            }
        }
    };
    let ops: Vec<Option<RedOp>> = std::iter::once(None).chain(RedOp::ALL.map(Some)).collect();
    for dt in DataType::ALL {
        for &op in &ops {
            for rn in RNS {
                for (seed, ix0) in SEEDS {
                    let got = run_generator(&gpu, dt, op, rn, None, seed, ix0);
                    let want = host_values(COUNT, ix0, |ix| expected_bits(dt, op, rn, seed, ix));
                    let what = format!(
                        "expected {} {} rn={rn} seed={seed:#x}",
                        dt.name(),
                        op_name(op)
                    );
                    note(what, &got, &want, ix0);
                    launches += 1;
                    compared += COUNT;
                    for rme in rmes(rn) {
                        let got = run_generator(&gpu, dt, op, rn, Some(rme), seed, ix0);
                        let want =
                            host_values(COUNT, ix0, |ix| input_bits(dt, op, rn, rme, seed, ix));
                        let what = format!(
                            "input {} {} rn={rn} rme={rme} seed={seed:#x}",
                            dt.name(),
                            op_name(op)
                        );
                        note(what, &got, &want, ix0);
                        launches += 1;
                        compared += COUNT;
                    }
                }
            }
        }
    }
    eprintln!(
        "gpu_generator: {}: {launches} launches, {compared} elements compared, {wrong} mismatches",
        gpu.label
    );
    assert!(
        wrong == 0,
        "{wrong} GPU/host generator mismatches; first ones:\n{}",
        first.join("\n")
    );
}

#[test]
fn gpu_mismatch_counts_planted_differences() {
    let Some(gpu) = setup("gpu_mismatch_counts_planted_differences") else {
        return;
    };
    let n: u64 = 10_007;
    let mut checks = 0;
    for dt in DataType::ALL {
        let size = dt.size();
        let mask = u64::MAX >> (64 - 8 * size);
        let want = host_values(n, 0, |ix| expected_bits(dt, Some(RedOp::Sum), 8, 3, ix));
        // Deltas around the tolerance, wrap-arounds and a sign-bit flip.
        let deltas = [
            1u64,
            mask,
            2,
            mask - 1,
            3,
            mask - 2,
            1 << (8 * size - 1),
            0x55,
        ];
        let mut got = want.clone();
        for (k, i) in (0..n as usize).step_by(97).enumerate() {
            got[i] = want[i].wrapping_add(deltas[k % deltas.len()]) & mask;
        }
        got[n as usize - 1] = want[n as usize - 1] ^ 1; // the very last element too
        let got_d = gpu.stream.clone_htod(&pack(&got, size)).expect("upload");
        let want_d = gpu.stream.clone_htod(&pack(&want, size)).expect("upload");
        let name = mismatch_kernel(dt);
        let f = gpu
            .module
            .load_function(&name)
            .unwrap_or_else(|e| panic!("kernel {name} not found: {e}"));
        for tol in [0, tolerance(dt, Some(RedOp::Avg)), 0x54] {
            let host = got
                .iter()
                .zip(&want)
                .filter(|(g, w)| g.abs_diff(**w) > tol)
                .count() as u64;
            for dims in [launch_dims(n), (1, 512), (7, 96), (200, 32)] {
                let mut counter: CudaSlice<u64> = gpu.stream.alloc_zeros(1).expect("alloc");
                for _ in 0..2 {
                    let mut b = gpu.stream.launch_builder(&f);
                    b.arg(&got_d)
                        .arg(&want_d)
                        .arg(&n)
                        .arg(&tol)
                        .arg(&mut counter);
                    // SAFETY: arguments match the kernel; both buffers hold n elements.
                    unsafe { b.launch(cfg(dims)) }.unwrap_or_else(|e| panic!("launch {name}: {e}"));
                }
                gpu.stream.synchronize().expect("synchronize");
                let gpu_count = gpu.stream.clone_dtoh(&counter).expect("copy back")[0];
                assert_eq!(
                    gpu_count,
                    2 * host,
                    "{name} ({}) tol={tol} grid={dims:?}: counted {gpu_count} over two launches, \
                     host says {host} each",
                    dt.name()
                );
                checks += 1;
            }
        }
    }
    eprintln!(
        "gpu_mismatch: {}: {checks} counter checks passed",
        gpu.label
    );
}

/// Parses a hexadecimal field of an emulation line.
fn hex(field: &str) -> u64 {
    u64::from_str_radix(field, 16).unwrap_or_else(|e| panic!("bad hex {field:?}: {e}"))
}

/// Parses an op code of an emulation line (-1 = copy pattern).
fn op_of(code: &str) -> Option<RedOp> {
    let code: i32 = code.parse().expect("op code");
    RedOp::ALL.into_iter().find(|&o| op_code(Some(o)) == code)
}

/// Runs without a GPU: `kernels/host_emulation.cpp` compiles `verifiable.cu` as host C++ (with
/// the CUDA built-ins it uses defined as their IEEE host equivalents) and prints every kernel's
/// output; each value must equal the Rust mirror's. This keeps the CUDA twin of the generator in
/// step with the host one in CI. Skips if no C++ compiler (`$CXX`, default `g++`) runs.
#[test]
fn cpu_emulated_kernels_match_host_mirror() {
    use std::process::Command;
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels/host_emulation.cpp");
    // The build's scratch folder, or the system one where the test binary was copied elsewhere.
    let tmp = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let tmp = if tmp.is_dir() {
        tmp.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let exe = tmp.join(format!("np_host_emulation_{}", std::process::id()));
    let built = Command::new(&cxx)
        .args(["-std=c++17", "-O1", "-ffp-contract=off", "-o"])
        .arg(&exe)
        .arg(&src)
        .output();
    let built = match built {
        Ok(out) => out,
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "no C++ compiler ({cxx}: {e}): under CI there must be one (.ci/run installs g++)"
            );
            eprintln!(
                "cpu_emulated_kernels_match_host_mirror: skipped: no C++ compiler ({cxx}: {e})"
            );
            return;
        }
    };
    assert!(
        built.status.success(),
        "{cxx} failed on kernels/host_emulation.cpp:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let run = Command::new(&exe).output().expect("run the host emulation");
    assert!(run.status.success(), "host emulation failed");
    let text = String::from_utf8(run.stdout).expect("utf-8 output");
    let (mut compared, mut first_bad) = (0u64, None);
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let (what, got, want) = match f[0] {
            "E" => {
                let dt = DataType::from_name(f[1]).expect("type name");
                let (op, rn) = (op_of(f[2]), f[3].parse().expect("rn"));
                let want = expected_bits(dt, op, rn, hex(f[4]), hex(f[5]));
                ("expected", hex(f[6]), want)
            }
            "I" => {
                let dt = DataType::from_name(f[1]).expect("type name");
                let (op, rn, rme) = (
                    op_of(f[2]),
                    f[3].parse().expect("rn"),
                    f[4].parse().expect("rme"),
                );
                let want = input_bits(dt, op, rn, rme, hex(f[5]), hex(f[6]));
                ("input", hex(f[7]), want)
            }
            "M" => {
                let bits: u32 = f[1].parse().expect("bits");
                let tol: u64 = f[2].parse().expect("tol");
                let mask = u64::MAX >> (64 - bits);
                let want = (0..300u64)
                    .filter(|i| (i & mask).abs_diff((i + i % 7) & mask) > tol)
                    .count() as u64;
                ("mismatch count", f[3].parse().expect("count"), want)
            }
            _ => panic!("unexpected emulation line {line:?}"),
        };
        compared += 1;
        if got != want && first_bad.is_none() {
            first_bad = Some(format!(
                "{what}: `{line}`: emulated CUDA {got:#x}, host mirror {want:#x}"
            ));
        }
    }
    eprintln!("cpu_emulation: {compared} kernel outputs compared with the host mirror");
    assert!(compared > 100_000, "too few emulation lines: {compared}");
    if let Some(bad) = first_bad {
        panic!("CUDA source and host mirror disagree; first difference: {bad}");
    }
}
