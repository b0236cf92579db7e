//! Phase 3, plan: what the benchmark threads loop over (datatypes → ops → roots → sizes, and
//! the warm-up ladder), the largest size after the memory clamp, and how large the buffers
//! are. `--dry-run` prints the same loops ([`loops`]).

use super::discover::Inventory;
use super::output::Output;
use crate::bootstrap::Bootstrap;
use crate::collective::Collective;
use crate::error::{Error, Result};
use crate::gpu::BufferSizes;
use crate::gpu::kernel_image::KernelImage;
use crate::options::{Options, Roots};
use crate::report::table;
use crate::types::{DataType, RedOp};

/// What the run will do.
pub(super) struct Plan {
    /// The loops of every benchmark thread.
    pub loops: Loops,
    /// The largest size after the memory clamp, in bytes.
    pub max_bytes: u64,
    /// Per-GPU buffer sizes for it.
    pub buffers: BufferSizes,
    /// With `-c`: the validation kernels, compiling in the background meanwhile.
    pub kernels: Option<KernelImage>,
}

/// Runs the plan phase: clamps `-e` to the smallest GPU's memory (saying so on stdout), starts
/// compiling the validation kernels (so that they compile while the communicators are
/// created), and plans the loops; fails before any communicator exists when the collective
/// cannot run this job (e.g. an invalid root).
pub(super) fn plan(
    coll: &dyn Collective,
    boot: &dyn Bootstrap,
    found: &Inventory,
    out: &mut Output,
) -> Result<Plan> {
    plan_with(coll, boot, found, out, true)
}

/// [`plan`], with the validation kernels compiled only when `compile` (a later section of a
/// `--collectives` run uses the GPUs the first one set up, kernels loaded).
pub(super) fn plan_with(
    coll: &dyn Collective,
    boot: &dyn Bootstrap,
    found: &Inventory,
    out: &mut Output,
    compile: bool,
) -> Result<Plan> {
    let opts = &found.options;
    let (lo, hi, reduced) = crate::sweep::clamp(
        opts.min_bytes,
        opts.max_bytes,
        found.min_mem,
        opts.check > 0,
    );
    if reduced {
        out.print(&table::memory_clamp_lines(hi));
    }
    let kernels = match opts.check > 0 && compile {
        true => Some(KernelImage::start(
            found.min_cc,
            opts.types.clone(),
            boot.world_rank() == 0,
        )),
        false => None,
    };
    Ok(Plan {
        loops: loops(opts, coll, found.nranks, found.global_cc, lo, hi)?,
        max_bytes: hi,
        buffers: buffer_sizes(opts, hi),
        kernels,
    })
}

/// What the per-thread loops iterate over.
pub(super) struct Loops {
    /// Datatypes (`-d`), without fp8 below compute capability 9.0 with `-d all`.
    pub types: Vec<DataType>,
    /// Reduction ops (`-o`); one (printed per the collective's op column) for the others.
    pub ops: Vec<RedOp>,
    /// Roots (`-r`) of a rooted collective; `[0]` for the others.
    pub roots: Vec<usize>,
    /// The sizes of the rows, in bytes.
    pub sizes: Vec<u64>,
    /// The warm-up sizes, in bytes.
    pub ladder: Vec<u64>,
    /// `-d all` / `-o all`: a combination the loaded NCCL rejects is skipped, not fatal.
    pub skippable: bool,
}

/// The loops of collective `coll` on `nranks` ranks whose smallest compute capability is
/// `min_cc`, for sizes `lo ..= hi` (after the memory clamp); fails for a shape the collective
/// cannot run (exit 5) and a root outside the communicator (exit 255).
pub(super) fn loops(
    o: &Options,
    coll: &dyn Collective,
    nranks: usize,
    min_cc: (i32, i32),
    lo: u64,
    hi: u64,
) -> Result<Loops> {
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
    Ok(Loops {
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

/// Per-GPU buffer sizes for a largest size of `hi` bytes.
pub(super) fn buffer_sizes(opts: &Options, hi: u64) -> BufferSizes {
    BufferSizes {
        data: (hi + 8 * opts.unalign as u64) as usize,
        expected: if opts.check > 0 { hi as usize } else { 0 },
    }
}

/// The op column of a row.
pub(super) fn label(coll: &dyn Collective, op: RedOp) -> &'static str {
    coll.op_column().label(op.name())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{AllGather, AllReduce};

    #[test]
    fn plan_filters_fp8_below_sm90_and_keeps_explicit_types() {
        let mut o = Options {
            types: DataType::ALL.to_vec(),
            all_types: true,
            ..Options::default()
        };
        let p = loops(&o, &AllReduce, 1, (8, 0), 8, 8).unwrap();
        assert_eq!(p.types.len(), 10);
        assert!(p.skippable);
        let p = loops(&o, &AllReduce, 1, (9, 0), 8, 8).unwrap();
        assert_eq!(p.types.len(), 12);
        o.types = vec![DataType::F8e4m3];
        o.all_types = false;
        let p = loops(&o, &AllReduce, 1, (8, 0), 8, 8).unwrap();
        assert_eq!(p.types, vec![DataType::F8e4m3]);
        assert!(!p.skippable);
    }

    #[test]
    fn non_reductions_run_once_and_print_none() {
        let o = Options {
            ops: RedOp::ALL.to_vec(),
            ..Options::default()
        };
        let p = loops(&o, &AllGather, 4, (9, 0), 1 << 20, 4 << 20).unwrap();
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
            assert_eq!(loops(&o, coll, 4, (9, 0), 8, 8).unwrap().roots, vec![2]);
            o.roots = Roots::All;
            assert_eq!(
                loops(&o, coll, 4, (9, 0), 8, 8).unwrap().roots,
                vec![0, 1, 2, 3]
            );
        }
        // Non-rooted collectives ignore -r (the root column prints -1).
        o.roots = Roots::One(7);
        assert_eq!(
            loops(&o, &AllReduce, 2, (9, 0), 8, 8).unwrap().roots,
            vec![0]
        );
    }

    #[test]
    fn a_root_outside_the_communicator_is_a_usage_error() {
        let o = Options {
            roots: Roots::One(4),
            ..Options::default()
        };
        let e = loops(&o, &crate::collective::Reduce, 4, (9, 0), 8, 8)
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
        let e = loops(&o, &crate::collective::Gather, 1, (9, 0), 8, 8)
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
        let e = loops(&o, &Hypercube, 6, (9, 0), 8, 8).err().unwrap();
        assert_eq!(e.exit_code(), 5);
        assert!(!e.on_stdout());
        let p = loops(&o, &Hypercube, 8, (9, 0), 8, 8).unwrap();
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
            |o: &Options, c: &dyn Collective| loops(o, c, 2, (9, 0), 8, 8).unwrap().skippable;
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
}
