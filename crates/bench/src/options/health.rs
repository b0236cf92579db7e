//! `--health`: a node or job check in one launch (docs/health.md). The preset fills in what the
//! command line leaves out (the five collectives of a check, sizes from 1 MiB to 8 GiB,
//! `--explain`), and its files are refused without it.

use super::{OptionsError, Reader};
use crate::cli::RawArgs;
use std::ffi::OsString;
use std::path::PathBuf;

/// The collectives a check runs when `--collectives` is not given.
pub const CHECK: &str = "all_reduce,all_gather,reduce_scatter,alltoall,sendrecv";

/// What `--health` adds after the last section.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthOptions {
    /// `--health-json`: the summary as JSON.
    pub json: Option<PathBuf>,
    /// `--health-prom`: the summary in the Prometheus text format.
    pub prom: Option<PathBuf>,
    /// `--baseline`: known-good runs to judge against first.
    pub baseline: Option<PathBuf>,
    /// `--health-allow-unjudged`: a collective not judged does not fail the check.
    pub allow_unjudged: bool,
}

/// The command line with `--health`'s preset filled in where it says nothing: `--collectives`,
/// and `-b 1M -e 8G -f 2` when no size option is given; `--explain` on.
pub(super) fn with_preset(raw: &RawArgs) -> RawArgs {
    let mut raw = raw.clone();
    if !raw.health {
        return raw;
    }
    raw.explain = true;
    let mut add = |long: &'static str, v: &str| {
        if raw.get(long).is_none() {
            raw.values.push((long, OsString::from(v)));
        }
    };
    add("collectives", CHECK);
    let sized = ["minbytes", "maxbytes", "stepbytes", "stepfactor"]
        .iter()
        .any(|o| raw.get(o).is_some());
    if !sized {
        raw.values.push(("minbytes", "1M".into()));
        raw.values.push(("maxbytes", "8G".into()));
        raw.values.push(("stepfactor", "2".into()));
    }
    raw
}

/// `--health*`: `None` without `--health`; its files without it are an error.
pub(super) fn read(r: &mut Reader) -> Result<Option<HealthOptions>, OptionsError> {
    if !r.raw.health {
        let flag = r
            .raw
            .health_allow_unjudged
            .then_some("health-allow-unjudged");
        return match ["health-json", "health-prom", "baseline"]
            .into_iter()
            .find(|o| r.raw.get(o).is_some())
            .or(flag)
        {
            Some(o) => Err(OptionsError::Invalid(format!("--{o} needs --health"))),
            None => Ok(None),
        };
    }
    let file = |r: &mut Reader, o: &str| -> Result<Option<PathBuf>, OptionsError> {
        match r.given(o)? {
            Some(s) if s.is_empty() => {
                Err(OptionsError::Invalid(format!("--{o} needs a file name")))
            }
            s => Ok(s.map(PathBuf::from)),
        }
    };
    Ok(Some(HealthOptions {
        json: file(r, "health-json")?,
        prom: file(r, "health-prom")?,
        baseline: file(r, "baseline")?,
        allow_unjudged: r.raw.health_allow_unjudged,
    }))
}
