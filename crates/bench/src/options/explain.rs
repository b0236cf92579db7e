//! The options of `--explain` (docs/explain.md): its own options are refused without it, so a
//! mistyped command line never silently skips the explanation or its gate.

use super::{OptionsError, Reader, locate::number};
use std::path::PathBuf;

/// What `--explain` adds after the table.
#[derive(Debug, Clone, PartialEq)]
pub struct ExplainOptions {
    /// `--explain-sku`: a table of expected bus bandwidths to use instead of the built-in one.
    pub sku: Option<PathBuf>,
    /// `--explain-gate`: exit 7 below this percentage of the expected bus bandwidth.
    pub gate: Option<f64>,
}

/// `--explain*`: `None` without `--explain`; an error when one of its options is given without
/// it or a value is out of range.
pub(super) fn read(r: &mut Reader) -> Result<Option<ExplainOptions>, OptionsError> {
    if !r.raw.explain {
        return match ["explain-sku", "explain-gate"]
            .into_iter()
            .find(|o| r.raw.get(o).is_some())
        {
            Some(o) => Err(OptionsError::Invalid(format!("--{o} needs --explain"))),
            None => Ok(None),
        };
    }
    let sku = match r.given("explain-sku")? {
        Some(s) if s.is_empty() => {
            return Err(OptionsError::Invalid(
                "--explain-sku needs a file name".into(),
            ));
        }
        s => s.map(PathBuf::from),
    };
    let gate = number(r, "explain-gate")?;
    if let Some(g) = gate
        && !(g > 0.0 && g <= 100.0)
    {
        return Err(OptionsError::Invalid(format!(
            "invalid value {g} for --explain-gate: give a percentage above 0, at most 100"
        )));
    }
    Ok(Some(ExplainOptions { sku, gate }))
}
