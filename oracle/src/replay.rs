//! Host replay of one validated operation, for the tests: every rank's buffers are prepared
//! from its [`Fill`]s exactly as the runner does (receive region zeroed, fills in order), the
//! [`Step`]s each rank plans are executed as NCCL would execute them (group by group, native
//! collectives by their definition, reductions with `fold_bits`), and the receive region is
//! compared with the expected buffer under the runner's tolerance.
//!
//! Buffers hold `S / ts` elements, `S` being the sweep size (what the runner allocates at
//! most), so any access outside them is reported as an error, as is a step sequence NCCL would
//! not accept (unmatched sends, groups that differ between ranks, peers out of range).

use crate::generator::{expected_bits, fold_bits, input_bits, tolerance};
use nccl_perf_bench::collective::{
    Base, Buffer, Collective, Fill, FillCtx, Geometry, Natives, Step, plan_steps,
};

/// The steps `coll` plans for `g`; panics if planning fails (a test failure).
pub fn planned(coll: &dyn Collective, g: &Geometry) -> Vec<Step> {
    plan_steps(coll, g).expect("planning succeeds")
}
use nccl_perf_cli::types::{DataType, RedOp};

/// One simulated measurement.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// Datatype.
    pub dt: DataType,
    /// Op (ignored by non-reductions).
    pub op: RedOp,
    /// Ranks.
    pub nranks: usize,
    /// Root.
    pub root: usize,
    /// Sweep size in bytes.
    pub bytes: usize,
    /// In-place half.
    pub in_place: bool,
    /// Native collectives available.
    pub native: Natives,
    /// Seed of the measurement.
    pub seed: u64,
}

/// What a replay found: mismatching elements per rank, and the first few described.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Mismatching elements per rank.
    pub wrong: Vec<usize>,
    /// The first mismatches, as text.
    pub first: Vec<String>,
}

impl Outcome {
    /// Total mismatching elements.
    pub fn total(&self) -> usize {
        self.wrong.iter().sum()
    }
}

/// A location: buffer and element offset.
type At = (Buffer, usize);

struct Mem {
    send: Vec<u64>,
    recv: Vec<u64>,
    expected: Vec<u64>,
}

impl Mem {
    fn buf(&mut self, b: Buffer) -> &mut Vec<u64> {
        match b {
            Buffer::Send => &mut self.send,
            Buffer::Recv => &mut self.recv,
            Buffer::Expected => &mut self.expected,
        }
    }

    fn read(&mut self, (b, off): At, count: usize) -> Result<Vec<u64>, String> {
        let v = self.buf(b);
        v.get(off..off + count).map(<[u64]>::to_vec).ok_or_else(|| {
            format!(
                "read of {count} at {b:?}+{off} outside {} elements",
                v.len()
            )
        })
    }

    fn write(&mut self, (b, off): At, data: &[u64]) -> Result<(), String> {
        let v = self.buf(b);
        let len = v.len();
        v.get_mut(off..off + data.len())
            .ok_or_else(|| {
                format!(
                    "write of {} at {b:?}+{off} outside {len} elements",
                    data.len()
                )
            })?
            .copy_from_slice(data);
        Ok(())
    }
}

/// A phase of the operation, the same on every rank.
#[derive(Debug)]
enum Phase {
    Native(Step),
    Group(Vec<Step>),
    Copy(Step),
}

fn phases(steps: &[Step]) -> Result<Vec<Phase>, String> {
    let mut out = Vec::new();
    let mut group: Option<Vec<Step>> = None;
    for &s in steps {
        match (s, &mut group) {
            (Step::GroupStart, None) => group = Some(Vec::new()),
            (Step::GroupEnd, Some(_)) => out.push(Phase::Group(group.take().unwrap_or_default())),
            (Step::Send { .. } | Step::Recv { .. }, Some(g)) => g.push(s),
            (Step::CopyToRecv { .. }, None) => out.push(Phase::Copy(s)),
            (Step::GroupStart | Step::GroupEnd, _) => return Err(format!("unbalanced {s:?}")),
            (Step::Send { .. } | Step::Recv { .. }, None) => {
                return Err(format!("{s:?} outside a group"));
            }
            (_, None) => out.push(Phase::Native(s)),
            (_, Some(_)) => return Err(format!("{s:?} inside a group")),
        }
    }
    if group.is_some() {
        return Err("a group is never closed".into());
    }
    Ok(out)
}

/// Replays one measurement of `coll` described by `case`.
pub fn simulate(coll: &dyn Collective, case: &Case) -> Result<Outcome, String> {
    let (n, dt) = (case.nranks, case.dt);
    let ts = dt.size();
    let cap = case.bytes / ts;
    let counts = coll.counts(cap, n, ts);
    let mask = if ts == 8 {
        u64::MAX
    } else {
        (1u64 << (8 * ts)) - 1
    };
    let stale = |seed: u64| {
        (0..cap)
            .map(|i| (seed ^ (i as u64 * 0x9e37)) & mask)
            .collect()
    };
    let mut mem: Vec<Mem> = (0..n)
        .map(|r| Mem {
            send: stale(0xa5a5_a5a5_a5a5_a5a5 ^ r as u64),
            recv: stale(0x5a5a_5a5a_5a5a_5a5a ^ r as u64),
            expected: stale(0x3c3c_3c3c_3c3c_3c3c ^ r as u64),
        })
        .collect();
    let ptrs = |r: usize| -> (At, At) {
        if case.in_place {
            (
                (Buffer::Recv, counts.send_inplace_offset * r),
                (Buffer::Recv, counts.recv_inplace_offset * r),
            )
        } else {
            ((Buffer::Send, 0), (Buffer::Recv, 0))
        }
    };

    // Prepare, as the runner does.
    for (r, m) in mem.iter_mut().enumerate() {
        let recv = ptrs(r).1;
        m.write(recv, &vec![0; counts.recv])?;
        let ctx = FillCtx {
            rank: r,
            nranks: n,
            root: case.root,
            op: case.op,
            counts,
            in_place: case.in_place,
            seed: case.seed,
            ts,
        };
        for f in coll.fills(&ctx) {
            match f {
                Fill::Input {
                    buf,
                    offset,
                    count,
                    op,
                    rn,
                    rme,
                    seed,
                    ix0,
                } => {
                    let v: Vec<u64> = (0..count as u64)
                        .map(|i| input_bits(dt, op, rn, rme, seed, ix0 + i))
                        .collect();
                    m.write((buf, offset), &v)?;
                }
                Fill::Expected {
                    offset,
                    count,
                    op,
                    rn,
                    seed,
                    ix0,
                } => {
                    let v: Vec<u64> = (0..count as u64)
                        .map(|i| expected_bits(dt, op, rn, seed, ix0 + i))
                        .collect();
                    m.write((Buffer::Expected, offset), &v)?;
                }
                Fill::ExpectedIsRecv => {
                    let v = m.read(recv, counts.recv)?;
                    m.write((Buffer::Expected, 0), &v)?;
                }
            }
        }
    }

    // Plan every rank and check that the phases line up.
    let plans: Vec<Vec<Phase>> = (0..n)
        .map(|r| {
            let g = Geometry {
                rank: r,
                nranks: n,
                root: case.root,
                ts,
                counts,
                native: case.native,
            };
            phases(&planned(coll, &g))
        })
        .collect::<Result<_, _>>()?;
    let len = plans[0].len();
    if plans.iter().any(|p| p.len() != len) {
        return Err("ranks plan different numbers of phases".into());
    }

    let op = case.op;
    let reduce = |inputs: Vec<Vec<u64>>, count: usize, base: usize| -> Vec<u64> {
        (0..count)
            .map(|i| {
                let xs = inputs
                    .iter()
                    .enumerate()
                    .map(|(r, v)| (r as u32, v[base + i]));
                fold_bits(dt, op, n as u32, xs).unwrap_or(0)
            })
            .collect()
    };
    let at = |r: usize, base: Base, off: usize| -> At {
        let (s, v) = ptrs(r);
        let (b, o) = if base == Base::Send { s } else { v };
        (b, o + off)
    };
    for k in 0..len {
        match &plans[0][k] {
            Phase::Native(step) => {
                for p in &plans {
                    if !matches!(&p[k], Phase::Native(s) if s == step) {
                        return Err(format!("ranks disagree on phase {k}"));
                    }
                }
                native(*step, &mut mem, case, counts.param, &ptrs, &reduce)?;
            }
            Phase::Group(_) => {
                let groups: Vec<&Vec<Step>> = plans
                    .iter()
                    .map(|p| match &p[k] {
                        Phase::Group(g) => Ok(g),
                        _ => Err(format!("ranks disagree on phase {k}")),
                    })
                    .collect::<Result<_, _>>()?;
                exchange(&groups, &mut mem, &at)?;
            }
            Phase::Copy(_) => {
                for (r, p) in plans.iter().enumerate() {
                    let Phase::Copy(Step::CopyToRecv {
                        from,
                        offset,
                        to,
                        count,
                    }) = p[k]
                    else {
                        return Err(format!("ranks disagree on phase {k}"));
                    };
                    let (src, dst) = (at(r, from, offset), at(r, Base::Recv, to));
                    if src != dst {
                        let v = mem[r].read(src, count)?;
                        mem[r].write(dst, &v)?;
                    }
                }
            }
        }
    }

    // Check, as the runner does.
    let reduces = coll.op_column().reduces();
    let tol = tolerance(dt, reduces.then_some(op));
    let mut out = Outcome::default();
    for (r, m) in mem.iter_mut().enumerate() {
        let got = m.read(ptrs(r).1, counts.recv)?;
        let want = m.read((Buffer::Expected, 0), counts.recv)?;
        let mut wrong = 0;
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            if g.abs_diff(*w) > tol {
                wrong += 1;
                if out.first.len() < 4 {
                    out.first
                        .push(format!("rank {r} element {i}: got {g:#x}, expected {w:#x}"));
                }
            }
        }
        out.wrong.push(wrong);
    }
    Ok(out)
}

/// A native collective: every input is read before any output is written.
fn native(
    step: Step,
    mem: &mut [Mem],
    case: &Case,
    p: usize,
    ptrs: &dyn Fn(usize) -> (At, At),
    reduce: &dyn Fn(Vec<Vec<u64>>, usize, usize) -> Vec<u64>,
) -> Result<(), String> {
    let n = case.nranks;
    let root = case.root;
    if root >= n {
        return Err(format!("root {root} outside {n} ranks"));
    }
    let inputs = |mem: &mut [Mem], count: usize| -> Result<Vec<Vec<u64>>, String> {
        (0..n).map(|r| mem[r].read(ptrs(r).0, count)).collect()
    };
    let put = |mem: &mut [Mem], r: usize, off: usize, v: &[u64]| {
        let (b, o) = ptrs(r).1;
        mem[r].write((b, o + off), v)
    };
    match step {
        Step::AllReduce => {
            let v = reduce(inputs(mem, p)?, p, 0);
            (0..n).try_for_each(|r| put(mem, r, 0, &v))
        }
        Step::Reduce => {
            let v = reduce(inputs(mem, p)?, p, 0);
            put(mem, root, 0, &v)
        }
        Step::ReduceScatter => {
            let ins = inputs(mem, p * n)?;
            (0..n).try_for_each(|r| put(mem, r, 0, &reduce(ins.clone(), p, r * p)))
        }
        Step::Broadcast => {
            let v = mem[root].read(ptrs(root).0, p)?;
            (0..n).try_for_each(|r| put(mem, r, 0, &v))
        }
        Step::AllGather => {
            let ins = inputs(mem, p)?;
            let all = ins.concat();
            (0..n).try_for_each(|r| put(mem, r, 0, &all))
        }
        Step::AlltoAll => {
            let ins = inputs(mem, p * n)?;
            (0..n).try_for_each(|r| {
                let v: Vec<u64> = ins
                    .iter()
                    .flat_map(|s| s[r * p..(r + 1) * p].to_vec())
                    .collect();
                put(mem, r, 0, &v)
            })
        }
        Step::Gather => {
            let all = inputs(mem, p)?.concat();
            put(mem, root, 0, &all)
        }
        Step::Scatter => {
            let v = mem[root].read(ptrs(root).0, p * n)?;
            (0..n).try_for_each(|r| put(mem, r, 0, &v[r * p..(r + 1) * p]))
        }
        s => Err(format!("{s:?} is not a native collective")),
    }
}

/// One group of sends and receives: matched per (sender, receiver) pair in issue order, with
/// every send's data read before any receive is written.
fn exchange(
    groups: &[&Vec<Step>],
    mem: &mut [Mem],
    at: &dyn Fn(usize, Base, usize) -> At,
) -> Result<(), String> {
    let n = groups.len();
    // pending[src][dst]: data sent, in order.
    let mut pending: Vec<Vec<std::collections::VecDeque<Vec<u64>>>> =
        vec![vec![Default::default(); n]; n];
    let mut recvs = Vec::new();
    for (r, g) in groups.iter().enumerate() {
        for &s in g.iter() {
            match s {
                Step::Send {
                    from,
                    offset,
                    count,
                    peer,
                } if peer < n => {
                    let v = mem[r].read(at(r, from, offset), count)?;
                    pending[r][peer].push_back(v);
                }
                Step::Recv {
                    offset,
                    count,
                    peer,
                } if peer < n => recvs.push((r, peer, offset, count)),
                s => return Err(format!("rank {r}: bad step {s:?} in a group of {n} ranks")),
            }
        }
    }
    for (r, peer, offset, count) in recvs {
        let v = pending[peer][r]
            .pop_front()
            .ok_or_else(|| format!("rank {r} receives from {peer}, which sends nothing"))?;
        if v.len() != count {
            return Err(format!(
                "rank {r} receives {count} from {peer}, which sends {}",
                v.len()
            ));
        }
        mem[r].write(at(r, Base::Recv, offset), &v)?;
    }
    for (src, row) in pending.iter().enumerate() {
        for (dst, q) in row.iter().enumerate() {
            if !q.is_empty() {
                return Err(format!("rank {src} sends to {dst}, which does not receive"));
            }
        }
    }
    Ok(())
}
