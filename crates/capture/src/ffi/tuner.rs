//! The tuner plugin (`ncclTunerPlugin_v5` for NCCL 2.28, `ncclTunerPlugin_v4` for 2.24–2.27,
//! `ncclTunerPlugin_v3` for 2.22–2.23: [`crate::abi_v1_v3`] has the lookup order).
//! NCCL hands a tuner its own cost model of each call (the predicted time of every algorithm
//! and protocol) and then picks the cheapest entry; this tuner changes nothing, so NCCL
//! chooses as it would without it. While [`crate::arm`]ed it copies the table; otherwise it
//! returns at once (one relaxed atomic load). When a tuner was configured, it is chained
//! ([`crate::chain`]): each call is handed on to it after the copy, so it still decides.

use std::ffi::{c_int, c_void};

use crate::abi::{self, INTERNAL_ERROR, Logger, NcclResult, SUCCESS, TunerV3, TunerV4, TunerV5};
use crate::chain::Chained;
use crate::chain::{self, Entry};
use crate::profiler::Exported;
use crate::store::{self, Costs};

const NAME: &std::ffi::CStr = c"nccl-perf-explain";

/// The tuner table of NCCL 2.28.
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static ncclTunerPlugin_v5: Exported<TunerV5> = Exported(TunerV5 {
    name: NAME.as_ptr(),
    init: init_v5,
    get_coll_info,
    finalize: done,
});

/// The tuner table of NCCL 2.24 to 2.27.
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static ncclTunerPlugin_v4: Exported<TunerV4> = Exported(TunerV4 {
    name: NAME.as_ptr(),
    init: init_v4,
    get_coll_info,
    destroy: done,
});

/// The tuner table of NCCL 2.22 and 2.23 (the first with NCCL's cost table).
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static ncclTunerPlugin_v3: Exported<TunerV3> = Exported(TunerV3 {
    name: NAME.as_ptr(),
    init: init_v3,
    get_coll_info: get_coll_info_v3,
    destroy: done,
});

/// The context every communicator gets (the tuner keeps no state of its own), unless a
/// chained tuner serves it.
static CONTEXT: u8 = 0;

/// Whether `context` is ours alone (no chained tuner's behind it).
fn ours(context: *mut c_void) -> bool {
    std::ptr::eq(context.cast_const(), (&raw const CONTEXT).cast())
}

/// The chained tuner, where NCCL would have called it through `entry`.
fn chained_for(entry: Entry) -> Option<&'static Chained> {
    chain::chained().filter(|c| c.serves(entry))
}

unsafe fn set_context(context: *mut *mut c_void) -> NcclResult {
    if context.is_null() {
        return INTERNAL_ERROR;
    }
    // SAFETY: NCCL's out parameter, checked non-null.
    unsafe { *context = (&raw const CONTEXT).cast_mut().cast() };
    SUCCESS
}

unsafe extern "C" fn init_v5(
    context: *mut *mut c_void,
    comm_id: u64,
    ranks: usize,
    nodes: usize,
    log: Logger,
    nvl: *mut c_void,
    constants: *mut c_void,
) -> NcclResult {
    match chained_for(Entry::V5) {
        // SAFETY: NCCL's out parameter, checked for null by `set_context`.
        None => unsafe { set_context(context) },
        Some(_) if context.is_null() => INTERNAL_ERROR,
        // SAFETY: NCCL's arguments, handed on.
        Some(c) => unsafe {
            c.init(
                Entry::V5,
                context,
                ranks,
                nodes,
                log,
                (comm_id, nvl, constants),
            )
        },
    }
}

unsafe extern "C" fn init_v4(
    ranks: usize,
    nodes: usize,
    log: Logger,
    context: *mut *mut c_void,
) -> NcclResult {
    // SAFETY: NCCL's arguments.
    unsafe { init_early(Entry::V4, ranks, nodes, log, context) }
}

unsafe extern "C" fn init_v3(
    ranks: usize,
    nodes: usize,
    log: Logger,
    context: *mut *mut c_void,
) -> NcclResult {
    // SAFETY: NCCL's arguments.
    unsafe { init_early(Entry::V3, ranks, nodes, log, context) }
}

/// `init(nRanks, nNodes, logger, context)` of v3 and v4.
///
/// # Safety
/// NCCL's arguments.
unsafe fn init_early(
    entry: Entry,
    ranks: usize,
    nodes: usize,
    log: Logger,
    context: *mut *mut c_void,
) -> NcclResult {
    let none = std::ptr::null_mut();
    match chained_for(entry) {
        // SAFETY: NCCL's out parameter, checked for null by `set_context`.
        None => unsafe { set_context(context) },
        Some(_) if context.is_null() => INTERNAL_ERROR,
        // SAFETY: NCCL's arguments, handed on.
        Some(c) => unsafe { c.init(entry, context, ranks, nodes, log, (0, none, none)) },
    }
}

unsafe extern "C" fn done(context: *mut c_void) -> NcclResult {
    match chain::chained() {
        // SAFETY: a context of the chained tuner's `init`, finalized once.
        Some(c) if !ours(context) => unsafe { c.finalize(context) },
        _ => SUCCESS,
    }
}

/// At most this many algorithms and protocols are read (NCCL 2.28 has 7 × 3).
const MAX_ALGOS: usize = 16;
const MAX_PROTOS: usize = 8;

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn get_coll_info(
    context: *mut c_void,
    coll_type: c_int,
    bytes: usize,
    pipe_ops: c_int,
    table: *mut *mut f32,
    algos: c_int,
    protos: c_int,
    reg_buff: c_int,
    channels: *mut c_int,
) -> NcclResult {
    if store::armed() && !table.is_null() {
        // SAFETY: NCCL's table of `algos × protos` floats.
        unsafe { copy_table(coll_type, bytes, table, algos, protos) };
    }
    match chain::chained() {
        // SAFETY: NCCL's arguments and our context for the chained tuner, handed on.
        Some(c) if !ours(context) => unsafe {
            c.get_coll_info(
                context, coll_type, bytes, pipe_ops, table, algos, protos, reg_buff, channels,
            )
        },
        _ => SUCCESS,
    }
}

/// `getCollInfo` of v3: v4's without `regBuff` (a chained v3 tuner gets none either).
unsafe extern "C" fn get_coll_info_v3(
    context: *mut c_void,
    coll_type: c_int,
    bytes: usize,
    pipe_ops: c_int,
    table: *mut *mut f32,
    algos: c_int,
    protos: c_int,
    channels: *mut c_int,
) -> NcclResult {
    // SAFETY: NCCL's arguments.
    unsafe {
        get_coll_info(
            context, coll_type, bytes, pipe_ops, table, algos, protos, 0, channels,
        )
    }
}

/// Records NCCL's cost table of one call (bounded dimensions).
///
/// # Safety
/// `table` points to NCCL's `algos × protos` floats.
unsafe fn copy_table(
    coll_type: c_int,
    bytes: usize,
    table: *mut *mut f32,
    algos: c_int,
    protos: c_int,
) {
    let (na, np) = (algos.max(0) as usize, protos.max(0) as usize);
    if na > MAX_ALGOS || np > MAX_PROTOS {
        return;
    }
    // The table is NCCL's `float[numAlgo][numProto]`, passed as `float**`.
    let base = table.cast::<f32>();
    let mut costs = Vec::new();
    for a in 0..na {
        for p in 0..np {
            // SAFETY: inside NCCL's `numAlgo × numProto` array (bounds checked above).
            let us = unsafe { base.add(a * np + p).read() };
            if us >= 0.0 && us.is_finite() {
                let algo = abi::ALGORITHMS
                    .get(a)
                    .map_or_else(|| format!("algorithm {a}"), |s| s.to_string());
                let proto = abi::PROTOCOLS
                    .get(p)
                    .map_or_else(|| format!("protocol {p}"), |s| s.to_string());
                costs.push((algo, proto, f64::from(us)));
            }
        }
    }
    let func = usize::try_from(coll_type)
        .ok()
        .and_then(|i| abi::FUNCS.get(i))
        .map_or_else(|| format!("function {coll_type}"), |s| s.to_string());
    store::record(|t| {
        t.push_costs(Costs {
            func,
            bytes: bytes as u64,
            table: costs,
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_lock;
    use std::ptr::null_mut;

    fn call(table: &mut [[f32; 3]; 7]) -> NcclResult {
        let t = &ncclTunerPlugin_v5.0;
        let mut ctx = null_mut();
        let mut channels: c_int = 0;
        // SAFETY: our own table called as NCCL calls it, with live locals: the table has `7 × 3`
        // entries as `algos` and `protos` say.
        unsafe {
            assert_eq!(
                (t.init)(&mut ctx, 1, 2, 2, std::ptr::null(), null_mut(), null_mut()),
                SUCCESS
            );
            (t.get_coll_info)(
                ctx,
                4,
                1 << 20,
                1,
                table.as_mut_ptr().cast(),
                7,
                3,
                0,
                &mut channels,
            )
        }
    }

    #[test]
    fn copies_the_table_only_while_armed_and_changes_nothing() {
        let _g = test_lock();
        let mut table = [[-1.0f32; 3]; 7];
        table[1][2] = 40.0; // Ring/Simple
        table[0][1] = 55.5; // Tree/LL128
        let before = table;
        assert_eq!(call(&mut table), SUCCESS);
        assert!(crate::take().costs.is_empty());
        crate::arm();
        assert_eq!(call(&mut table), SUCCESS);
        let taken = crate::take();
        assert_eq!(table, before, "the tuner leaves NCCL's choice alone");
        assert_eq!(taken.costs.len(), 1);
        let c = &taken.costs[0];
        assert_eq!(c.func, "AllReduce");
        assert_eq!(c.bytes, 1 << 20);
        assert_eq!(
            c.table,
            vec![
                ("Tree".to_string(), "LL128".to_string(), 55.5),
                ("Ring".to_string(), "Simple".to_string(), 40.0)
            ]
        );
    }

    /// NCCL 2.22 hands v3 a table of 6 algorithms (no PAT), 2.23 of 7; `getCollInfo` has no
    /// `regBuff`.
    #[test]
    fn v3_copies_a_table_of_the_dimensions_it_is_given() {
        let _g = test_lock();
        let t = &ncclTunerPlugin_v3.0;
        let mut table = [[-1.0f32; 3]; 6];
        table[1][0] = 7.25; // Ring/LL
        let mut ctx = null_mut();
        let mut channels: c_int = 0;
        crate::arm();
        // SAFETY: our own table called as NCCL 2.22 calls it, with live locals: the table has
        // `6 × 3` entries as `algos` and `protos` say.
        unsafe {
            assert_eq!((t.init)(4, 1, std::ptr::null(), &mut ctx), SUCCESS);
            assert!(ours(ctx));
            assert_eq!(
                (t.get_coll_info)(
                    ctx,
                    0,
                    4096,
                    1,
                    table.as_mut_ptr().cast(),
                    6,
                    3,
                    &mut channels
                ),
                SUCCESS
            );
            assert_eq!((t.destroy)(ctx), SUCCESS);
        }
        let taken = crate::take();
        assert_eq!(taken.costs[0].func, "Broadcast");
        assert_eq!(
            taken.costs[0].table,
            vec![("Ring".to_string(), "LL".to_string(), 7.25)]
        );
        // SAFETY: a null out parameter on purpose: refused, never written.
        let refused = unsafe { (t.init)(1, 1, std::ptr::null(), null_mut()) };
        assert_eq!(refused, INTERNAL_ERROR);
    }

    #[test]
    fn absurd_dimensions_and_null_tables_are_ignored() {
        let _g = test_lock();
        crate::arm();
        let t = &ncclTunerPlugin_v5.0;
        // SAFETY: null and undersized tables on purpose: the tuner checks its arguments and never
        // follows a null one.
        unsafe {
            (t.get_coll_info)(null_mut(), 4, 8, 1, null_mut(), 7, 3, 0, null_mut());
            let mut one = [0f32; 1];
            let mut p = one.as_mut_ptr();
            (t.get_coll_info)(
                null_mut(),
                99,
                8,
                1,
                (&mut p as *mut *mut f32).cast(),
                1000,
                3,
                0,
                null_mut(),
            );
            (t.get_coll_info)(
                null_mut(),
                -5,
                8,
                1,
                one.as_mut_ptr().cast(),
                1,
                1,
                0,
                null_mut(),
            );
        }
        let taken = crate::take();
        assert_eq!(taken.costs.len(), 1);
        assert_eq!(taken.costs[0].func, "function -5");
    }

    /// The table NCCL would have taken from a library, per entry of ours.
    #[test]
    fn each_entry_calls_what_nccl_would_have_called() {
        let lib = chain::of_tables;
        let v4 = Some(&ncclTunerPlugin_v4.0);
        let v3 = Some(&ncclTunerPlugin_v3.0);
        let only_v4 = lib(None, v4, None);
        assert_eq!(only_v4.version(Entry::V5), Some(4));
        assert_eq!(only_v4.version(Entry::V4), Some(4));
        assert!(!only_v4.serves(Entry::V3), "NCCL 2.23 knows no v4");
        let both = lib(None, v4, v3);
        assert_eq!(both.version(Entry::V3), Some(3));
        assert_eq!(both.version(Entry::V4), Some(4));
        let only_v5 = lib(Some(&ncclTunerPlugin_v5.0), None, None);
        assert!(!only_v5.serves(Entry::V4));
    }
}
