//! Which build of the validation kernels a run loads: NVRTC's, compiled on a background thread
//! for the GPU in hand, or — when libnvrtc is missing, does not know the GPU, fails, or makes an
//! image the driver rejects — the PTX bundled in the binary ([`super::ptx`]), finished by the
//! driver's JIT. One stderr note per process says which: every process notes the fallback
//! (with the reason), only the first process the ordinary NVRTC path.

use super::kernels::{self, Compiled, Kernels};
use super::ptx;
use crate::error::{Error, Result};
use crate::types::DataType;
use std::sync::{Mutex, Once};
use std::thread::JoinHandle;

/// Longest reason a note quotes (an NVRTC log can be long).
const MAX_REASON: usize = 300;

/// Where the kernels come from, once known.
enum Source {
    /// NVRTC is compiling (or has compiled) them.
    Compiling(Option<JoinHandle<Result<Compiled>>>),
    /// NVRTC's image, not yet rejected by the driver.
    Nvrtc(Compiled),
    /// The bundled PTX, for the reason given.
    Bundled(String),
}

/// The validation kernels of one process, shared by the threads that set up its GPUs.
pub struct KernelImage {
    cc: (i32, i32),
    source: Mutex<Source>,
    note: Once,
    /// Whether this process notes the NVRTC path too (the first process of the job).
    announce: bool,
}

impl KernelImage {
    /// Starts compiling the kernels of `types` for compute capability `cc` on a background
    /// thread, or — when libnvrtc is missing or too old — settles on the bundled PTX at once
    /// (and says so). `announce`: note the NVRTC path as well.
    pub fn start(cc: (i32, i32), types: Vec<DataType>, announce: bool) -> KernelImage {
        let source = match kernels::probe_nvrtc() {
            Ok(_) => Source::Compiling(Some(std::thread::spawn(move || {
                kernels::compile(cc, &types)
            }))),
            Err(e) => Source::Bundled(reason(&e)),
        };
        let image = KernelImage {
            cc,
            source: Mutex::new(source),
            note: Once::new(),
            announce,
        };
        if let Ok(Source::Bundled(why)) = image.source.lock().as_deref() {
            image.note_fallback(why);
        }
        image
    }

    /// Loads the kernels of `types` into the current context (one per GPU). The first caller
    /// waits for the compiler; an NVRTC image the driver rejects switches this and every later
    /// load to the bundled PTX.
    pub fn load(&self, types: &[DataType]) -> Result<Kernels> {
        let mut source = self
            .source
            .lock()
            .map_err(|_| Error::Kernels("the kernel compiler failed".into()))?;
        if let Source::Compiling(handle) = &mut *source {
            let compiled = match handle.take().map(JoinHandle::join) {
                Some(Ok(r)) => r,
                _ => Err(Error::Kernels("the kernel compiler thread failed".into())),
            };
            *source = match compiled {
                Ok(c) => Source::Nvrtc(c),
                Err(e) => {
                    let why = reason(&e);
                    self.note_fallback(&why);
                    Source::Bundled(why)
                }
            };
        }
        if let Source::Nvrtc(c) = &*source {
            // SAFETY: NVRTC's output: a complete cubin or NUL-terminated PTX (`kernels::nvrtc`).
            match unsafe { Kernels::load(&c.image, types) } {
                Ok(k) => {
                    let what = &c.what;
                    self.note.call_once(|| {
                        if self.announce {
                            crate::eline!(
                                "{}: validation kernels: compiled by {what}",
                                crate::host::short_hostname()
                            );
                        }
                    });
                    return Ok(k);
                }
                Err(e) => {
                    let why = format!(
                        "the driver rejected the image of {} ({})",
                        c.what,
                        reason(&e)
                    );
                    self.note_fallback(&why);
                    *source = Source::Bundled(why);
                }
            }
        }
        drop(source);
        self.load_bundled()
    }

    /// Loads the newest bundled PTX this GPU can run, trying older ones if the driver refuses.
    fn load_bundled(&self) -> Result<Kernels> {
        let mut last = None;
        for b in ptx::for_gpu(self.cc) {
            // The bundled PTX holds the kernels of every type.
            // SAFETY: `Bundled::image` is the PTX text with its NUL.
            match unsafe { Kernels::load(&b.image(), &DataType::ALL) } {
                Ok(k) => return Ok(k),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            Error::Kernels(format!(
                "no bundled PTX runs on compute capability {}.{} (the oldest is {}); pass -c 0 to run without validation",
                self.cc.0,
                self.cc.1,
                ptx::BUNDLED.last().map(|b| b.name()).unwrap_or_default()
            ))
        }))
    }

    /// The one note of the fallback path, with its reason.
    fn note_fallback(&self, why: &str) {
        self.note
            .call_once(|| crate::eline!("{}", fallback_note(why, self.cc)));
    }
}

/// `<host>: validation kernels: <why>; using the bundled PTX (compute_75, NVRTC 11.8) through
/// the driver's JIT`.
fn fallback_note(why: &str, cc: (i32, i32)) -> String {
    let which = match ptx::for_gpu(cc).next() {
        Some(b) => format!(
            "the bundled PTX ({}, made by NVRTC {})",
            b.name(),
            b.nvrtc().unwrap_or("?")
        ),
        None => "the bundled PTX".into(),
    };
    format!(
        "{}: validation kernels: {why}; using {which} through the driver's JIT",
        crate::host::short_hostname()
    )
}

/// An error as a one-line, bounded reason.
fn reason(e: &Error) -> String {
    let s = match e {
        Error::Cuda { msg, .. } => msg.clone(),
        e => e.to_string(),
    };
    let s = s.replace(['\n', '\r'], " ");
    match s.char_indices().nth(MAX_REASON) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fallback_note_is_one_line_naming_reason_and_module() {
        let n = fallback_note("cannot load libnvrtc", (9, 0));
        assert!(
            n.ends_with(
                ": validation kernels: cannot load libnvrtc; using the bundled PTX (compute_75, made by NVRTC 11.8) through the driver's JIT"
            ),
            "{n}"
        );
        assert!(fallback_note("x", (7, 0)).contains("(compute_52, "));
        assert!(!n.contains('\n'));
    }

    #[test]
    fn reasons_are_bounded_single_lines() {
        let long = Error::Kernels(format!("a\nb{}", "x".repeat(5000)));
        let r = reason(&long);
        assert!(!r.contains('\n') && r.ends_with("...") && r.len() <= MAX_REASON + 3);
        assert_eq!(reason(&Error::Kernels("short".into())), "short");
    }
}
