//! The hardware explain compares a run with: this node's GPU (model, NVLink links, PCIe link,
//! through NVML) and its network adapters (from sysfs). Whatever cannot be read becomes a note;
//! nothing here fails.

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use crate::nics::{Nic, NicKind};

/// What the hardware of this node looks like, as far as it could be read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hardware {
    /// The GPU of this process' first rank (`None`: NVML not available, or a log).
    pub gpu: Option<Gpu>,
    /// Network adapters: RDMA ports (InfiniBand, RoCE, EFA) and plain Ethernet interfaces.
    pub nics: Vec<Nic>,
    /// One line each: what could not be read and why.
    pub notes: Vec<String>,
}

/// One GPU, from NVML.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    /// Model name as NVML gives it (e.g. `NVIDIA H200`).
    pub name: String,
    /// Every NVLink link NVML answered for (empty: no NVLink).
    pub nvlink: Vec<NvLink>,
    /// The PCIe link to the host, when NVML could tell.
    pub pcie: Option<Pcie>,
}

/// One NVLink link of a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvLink {
    /// Link index (0 to 17).
    pub index: u32,
    /// `nvmlDeviceGetNvLinkState`: the link is up.
    pub active: bool,
    /// `nvmlDeviceGetNvLinkVersion`'s raw answer (see [`nvlink_gbs_per_direction`]).
    pub version: Option<u32>,
}

/// The PCIe link of a GPU: what it can do and what it runs at now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pcie {
    /// Highest generation the GPU and its slot support.
    pub max_gen: Option<u32>,
    /// Widest link (lanes).
    pub max_width: Option<u32>,
    /// Generation now (an idle GPU may train down to save power).
    pub cur_gen: Option<u32>,
    /// Lanes now.
    pub cur_width: Option<u32>,
}

/// Per-direction bandwidth of one NVLink link, GB/s, from NVML's version answer.
///
/// NVIDIA's NVLink page (<https://www.nvidia.com/en-us/data-center/nvlink/>) gives the total
/// bandwidth per GPU and the links per GPU of each generation: 2nd 300 GB/s over 6 links,
/// 3rd 600 over 12, 4th 900 over 18, 5th 1,800 over 18; per link and direction that is 25,
/// 25, 25 and 50 GB/s (the 1st generation, P100: 160 GB/s over 4 links, 20).
///
/// NVML has answered in two encodings: the generation number (1 to 5) and, in newer drivers,
/// `nvmlNvlinkVersion_t` (1 = 1.0, 2 = 2.0, 3 = 2.2, 4 = 3.0, 5 = 3.1, 6 = 4.0, 7 = 5.0).
/// Both agree on 25 GB/s for 2, 3 and 4 and differ only on 5, which is the 5th generation
/// for a Blackwell GPU (B200, B300, GB200, GB300) and 3.1 otherwise: `gpu_name` decides.
pub fn nvlink_gbs_per_direction(version: u32, gpu_name: &str) -> Option<f64> {
    let blackwell = ["B200", "B300", "GB200", "GB300", "B100"]
        .iter()
        .any(|m| gpu_name.to_ascii_uppercase().contains(m));
    match version {
        1 => Some(20.0),
        2..=4 | 6 => Some(25.0),
        5 if blackwell => Some(50.0),
        5 => Some(25.0),
        7 => Some(50.0),
        _ => None,
    }
}

/// Per-direction bandwidth of one PCIe lane, GB/s, by generation: the transfer rate after
/// line encoding (8b/10b for 1 and 2, 128b/130b for 3 to 5, FLIT for 6), as PCI-SIG's
/// specifications define it (<https://pcisig.com/specifications>): 2.5, 5, 8, 16, 32 and
/// 64 GT/s. Packet headers take a further 10-20 % in practice: this is the link's ceiling,
/// not what a copy reaches.
pub fn pcie_lane_gbs(generation: u32) -> Option<f64> {
    match generation {
        1 => Some(0.25),
        2 => Some(0.5),
        3 => Some(8.0 * 128.0 / 130.0 / 8.0),
        4 => Some(16.0 * 128.0 / 130.0 / 8.0),
        5 => Some(32.0 * 128.0 / 130.0 / 8.0),
        6 => Some(64.0 * 242.0 / 256.0 / 8.0),
        _ => None,
    }
}

impl Gpu {
    /// Links that are up.
    pub fn active_links(&self) -> usize {
        self.nvlink.iter().filter(|l| l.active).count()
    }

    /// Sum over the active links of their per-direction bandwidth, GB/s (`None`: no active
    /// link, or a version this code does not know).
    pub fn nvlink_gbs(&self) -> Option<f64> {
        let mut sum = 0.0;
        for l in self.nvlink.iter().filter(|l| l.active) {
            sum += nvlink_gbs_per_direction(l.version?, &self.name)?;
        }
        (sum > 0.0).then_some(sum)
    }

    /// The PCIe link's per-direction bandwidth now, GB/s.
    pub fn pcie_gbs(&self) -> Option<f64> {
        let p = self.pcie?;
        Some(pcie_lane_gbs(p.cur_gen?)? * f64::from(p.cur_width?))
    }
}

impl Hardware {
    /// RDMA ports that are up.
    pub fn rdma_nics(&self) -> Vec<&Nic> {
        self.nics
            .iter()
            .filter(|n| n.kind.is_rdma() && n.active)
            .collect()
    }

    /// Ethernet interfaces that are up.
    pub fn ethernet_nics(&self) -> Vec<&Nic> {
        self.nics
            .iter()
            .filter(|n| !n.kind.is_rdma() && n.active)
            .collect()
    }
}

/// Reads this node's hardware: the GPU at `pci_bus_id` (or the first GPU) through NVML, and
/// the network adapters under `sysfs_root` (`/sys` on a real system; tests pass a tree of
/// their own). Never fails: what cannot be read is said in `notes`.
pub fn probe(pci_bus_id: Option<&str>, sysfs_root: &Path) -> Hardware {
    let mut hw = Hardware::default();
    match crate::nvml::Nvml::open().and_then(|n| n.device(pci_bus_id)) {
        Ok(g) => {
            if let Some(note) = g.nvlink_note {
                hw.notes.push(note);
            }
            let [max_gen, max_width, cur_gen, cur_width] = g.pcie;
            hw.gpu = Some(Gpu {
                name: g.name.unwrap_or_default(),
                nvlink: g
                    .links
                    .into_iter()
                    .map(|(index, active, version)| NvLink {
                        index,
                        active,
                        version,
                    })
                    .collect(),
                pcie: (g.pcie.iter().any(Option::is_some)).then_some(Pcie {
                    max_gen,
                    max_width,
                    cur_gen,
                    cur_width,
                }),
            });
        }
        Err(why) => hw.notes.push(format!("GPU not read: {why}")),
    }
    let (nics, notes) = crate::nics::read(sysfs_root);
    hw.nics = nics;
    hw.notes.extend(notes);
    hw
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_rates_by_generation() {
        assert_eq!(nvlink_gbs_per_direction(4, "NVIDIA H200"), Some(25.0));
        assert_eq!(nvlink_gbs_per_direction(5, "NVIDIA B200"), Some(50.0));
        assert_eq!(
            nvlink_gbs_per_direction(5, "NVIDIA A100-SXM4-80GB"),
            Some(25.0)
        );
        assert_eq!(nvlink_gbs_per_direction(7, ""), Some(50.0));
        assert_eq!(nvlink_gbs_per_direction(0, ""), None);
        let x16 = pcie_lane_gbs(5).unwrap() * 16.0;
        assert!((x16 - 63.0).abs() < 0.1, "{x16}");
        assert_eq!(pcie_lane_gbs(9), None);
    }

    #[test]
    fn h200_with_18_links_has_450_per_direction() {
        let gpu = Gpu {
            name: "NVIDIA H200".into(),
            nvlink: (0..18)
                .map(|index| NvLink {
                    index,
                    active: index != 3,
                    version: Some(4),
                })
                .collect(),
            pcie: None,
        };
        assert_eq!(gpu.active_links(), 17);
        assert_eq!(gpu.nvlink_gbs(), Some(425.0));
        assert_eq!(gpu.pcie_gbs(), None);
    }

    #[test]
    fn probe_without_nvml_or_sysfs_only_notes() {
        let hw = probe(
            Some("0000:00:00.0"),
            Path::new("/nonexistent-sysfs-for-test"),
        );
        assert!(!hw.notes.is_empty());
        assert!(hw.nics.is_empty());
    }
}
