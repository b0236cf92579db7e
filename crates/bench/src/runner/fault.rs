//! The validation self-test: proof that the checker catches wrong data.
//!
//! `NCCL_PERF_CORRUPT=<half>:<index>[:<rank>]` (hidden from `-h`; documented in
//! `docs/errors.md`) flips one byte of element `<index>` of the receive buffer of NCCL rank
//! `<rank>` (default 0) after every validation operation of the `<half>` (`out` = out-of-place,
//! `in` = in-place) and before the mismatches are counted. The byte flipped is the element's most
//! significant one (bit 6), so the value is far outside any tolerance. A run with it shows
//! `#wrong` 1 on that half of every row whose receive buffer has that element, a
//! `# Out of bounds values : N FAILED` footer and exit code 7; halves whose errors are not
//! reported (sendrecv and alltoall in-place) show `N/A` as always.
//!
//! The data is changed on the GPU stream between the collective and the check, exactly where a
//! broken transport or kernel would have left it wrong; nothing else in the run changes.

use super::engine::Shape;
use super::setup::Gpu;
use crate::error::{Error, Result};
use crate::gpu::driver::CUdeviceptr;
use std::sync::OnceLock;

/// The environment variable of the switch.
const ENV: &str = crate::environment::CORRUPT.name;

/// Which element to corrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corruption {
    /// The in-place half (else out-of-place).
    pub in_place: bool,
    /// Element index in the receive buffer checked for that half.
    pub index: u64,
    /// NCCL rank whose buffer is changed.
    pub rank: usize,
}

/// The switch of this process, read once by [`init`].
static ACTIVE: OnceLock<Option<Corruption>> = OnceLock::new();

/// A value of the switch that is not `<half>:<index>[:<rank>]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{ENV}='{0}' is not <half>:<index>[:<rank>] (half out or in, e.g. {ENV}=out:0)")]
pub struct CorruptionError(String);

/// Reads `<half>:<index>[:<rank>]`.
pub fn parse(value: &str) -> std::result::Result<Corruption, CorruptionError> {
    let bad = || CorruptionError(value.to_string());
    let parts: Vec<&str> = value.trim().split(':').collect();
    if !(2..=3).contains(&parts.len()) {
        return Err(bad());
    }
    let in_place = match parts[0] {
        "out" => false,
        "in" => true,
        _ => return Err(bad()),
    };
    let index = parts[1].parse().map_err(|_| bad())?;
    let rank = match parts.get(2) {
        Some(r) => r.parse().map_err(|_| bad())?,
        None => 0,
    };
    Ok(Corruption {
        in_place,
        index,
        rank,
    })
}

/// Reads the switch from the environment (once per process); a malformed value is an argument
/// error. Says on stderr when it is on, so a forgotten variable cannot pass for a real failure.
pub fn init(program: &str) -> Result<Option<Corruption>> {
    let parsed = match std::env::var(ENV) {
        Ok(v) if !v.trim().is_empty() => Some(parse(&v).map_err(|e| Error::Usage(e.to_string()))?),
        _ => None,
    };
    let active = *ACTIVE.get_or_init(|| parsed);
    if let Some(c) = active {
        crate::eline!(
            "{program}: self-test {ENV}: corrupting element {} of rank {}'s {} receive buffer after each validation operation; expect #wrong 1 and exit code 7",
            c.index,
            c.rank,
            if c.in_place {
                "in-place"
            } else {
                "out-of-place"
            }
        );
    }
    Ok(active)
}

/// Called between a validation operation and its check: when the switch asks for this half,
/// flips the chosen byte in the receive buffer (`recv` gives each GPU's buffer for this half)
/// of the chosen rank, on that GPU's stream. Does nothing otherwise (one load per call).
pub fn corrupt(
    gpus: &[Gpu],
    recv: impl Fn(&Gpu) -> CUdeviceptr,
    s: &Shape,
    in_place: bool,
) -> Result<()> {
    let Some(Some(c)) = ACTIVE.get() else {
        return Ok(());
    };
    if c.in_place != in_place || c.index >= s.counts.recv as u64 {
        return Ok(());
    }
    let ts = s.dt.size() as u64;
    for g in gpus.iter().filter(|g| g.rank() == c.rank) {
        // Little-endian: the last byte of the element holds its sign and exponent (or top bits).
        let at = g.recv().span(recv(g) + c.index * ts + (ts - 1), 1)?;
        g.ctx().make_current()?;
        // The stream is idle (the caller waited for the operation), so this read is current.
        let mut byte = [0u8];
        at.copy_to_host(&mut byte)?;
        at.memset_async(byte[0] ^ 0x40, g.stream())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switch_values() {
        assert_eq!(
            parse("out:0"),
            Ok(Corruption {
                in_place: false,
                index: 0,
                rank: 0
            })
        );
        assert_eq!(
            parse(" in:17:3 "),
            Ok(Corruption {
                in_place: true,
                index: 17,
                rank: 3
            })
        );
        for bad in [
            "",
            "out",
            "sideways:1",
            "out:-1",
            "out:x",
            "in:1:2:3",
            "in:1:-2",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(
                e.to_string().starts_with(&format!("{ENV}='{bad}' is not")),
                "{e}"
            );
        }
    }
}
