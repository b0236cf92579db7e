//! The validation kernels as PTX bundled in every binary: what a run loads through the driver's
//! JIT when libnvrtc is missing, does not know the GPU, or fails.
//!
//! `kernels/ptx/` is generated from `kernels/verifiable.cu` by `ci/gen-ptx.sh` with an old NVRTC
//! (CUDA 11.8, PTX ISA 7.8, accepted by every driver since R520); each file's first line records
//! the source's SHA-256, and `tests/ptx.rs` fails when the source changed but the PTX did not.

/// One bundled PTX module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bundled {
    /// The virtual architecture it targets (`compute_75`), as its compute capability.
    pub arch: (i32, i32),
    /// The PTX text (without the NUL the driver wants; see [`Bundled::image`]).
    pub text: &'static str,
}

/// Every bundled module, newest architecture first.
pub const BUNDLED: &[Bundled] = &[
    Bundled {
        arch: (7, 5),
        text: include_str!("../../../../kernels/ptx/verifiable.compute_75.ptx"),
    },
    Bundled {
        arch: (5, 2),
        text: include_str!("../../../../kernels/ptx/verifiable.compute_52.ptx"),
    },
];

impl Bundled {
    /// `compute_XY`.
    pub fn name(&self) -> String {
        format!("compute_{}{}", self.arch.0, self.arch.1)
    }

    /// The NUL-terminated image `cuModuleLoadData` takes.
    pub fn image(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.text.len() + 1);
        v.extend_from_slice(self.text.as_bytes());
        v.push(0);
        v
    }

    /// The SHA-256 (hex) of the source the module was generated from, from its first line.
    pub fn source_sha256(&self) -> Option<&'static str> {
        header_field(self.text, "sha256")
    }

    /// The NVRTC version that generated it (`11.8`), from its first line.
    pub fn nvrtc(&self) -> Option<&'static str> {
        header_field(self.text, "NVRTC")
    }
}

/// The word after `key` on the first line of `text`.
fn header_field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let first = text.lines().next()?.strip_prefix("// nccl-perf: ")?;
    let mut words = first.split_whitespace();
    words.find(|w| *w == key)?;
    words.next()
}

/// The bundled modules a GPU of compute capability `cc` can run, newest first.
pub fn for_gpu(cc: (i32, i32)) -> impl Iterator<Item = &'static Bundled> {
    BUNDLED.iter().filter(move |b| b.arch <= cc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_usable_architecture_comes_first() {
        let archs = |cc| for_gpu(cc).map(|b| b.arch).collect::<Vec<_>>();
        assert_eq!(archs((10, 3)), vec![(7, 5), (5, 2)]);
        assert_eq!(archs((9, 0)), vec![(7, 5), (5, 2)]);
        assert_eq!(archs((7, 0)), vec![(5, 2)]);
        assert!(archs((3, 5)).is_empty());
    }

    #[test]
    fn every_module_is_whole_and_says_where_it_came_from() {
        for b in BUNDLED {
            let name = b.name();
            assert!(
                b.text
                    .contains(&format!("\n.target sm_{}{}\n", b.arch.0, b.arch.1))
            );
            assert!(
                b.text.contains(&format!("--gpu-architecture={name}")),
                "{name}"
            );
            assert_eq!(b.source_sha256().map(str::len), Some(64), "{name}");
            assert_eq!(b.nvrtc(), Some("11.8"), "{name}");
            let image = b.image();
            assert_eq!(image.last(), Some(&0));
            assert!(
                !image[..image.len() - 1].contains(&0),
                "{name}: a NUL inside"
            );
        }
        assert_eq!(header_field("no header", "sha256"), None);
    }
}
