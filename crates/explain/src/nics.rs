//! Network adapters from sysfs: RDMA ports under `class/infiniband/*/ports/*` (`rate`,
//! `link_layer`, `state`; the driver link tells EFA apart) and Ethernet interfaces under
//! `class/net/*` (`speed` in Mb/s, `operstate`), leaving out loopback, virtual interfaces
//! (no `device` link) and the network interfaces of RDMA devices (counted as their ports).
//! The file layouts are the kernel's ABI (Documentation/ABI/stable/sysfs-class-infiniband and
//! Documentation/ABI/testing/sysfs-class-net). The port types ([`Nic`], [`NicKind`]) live here,
//! below [`crate::hardware`], which re-exports them.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// What kind of network adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NicKind {
    /// An RDMA port whose link layer is InfiniBand.
    Ib,
    /// An RDMA port whose link layer is Ethernet (RoCE).
    Roce,
    /// An AWS Elastic Fabric Adapter (driver `efa`).
    Efa,
    /// A plain Ethernet interface (NCCL's socket transport).
    Ethernet,
}

impl NicKind {
    /// Whether NCCL reaches it through its RDMA transport or a net plugin (not sockets).
    pub fn is_rdma(self) -> bool {
        !matches!(self, NicKind::Ethernet)
    }

    /// Name for the lines.
    pub fn label(self) -> &'static str {
        match self {
            NicKind::Ib => "InfiniBand",
            NicKind::Roce => "RoCE",
            NicKind::Efa => "EFA",
            NicKind::Ethernet => "Ethernet",
        }
    }
}

/// One network port.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Nic {
    /// Device (`mlx5_0`, `efa_0`) or interface (`eth0`) name; RDMA ports as `mlx5_0:1`.
    pub name: String,
    /// Kind.
    pub kind: NicKind,
    /// Link rate in Gb/s (0 when unknown or down).
    pub rate_gbps: f64,
    /// The port is up (`ACTIVE`, or operstate `up`).
    pub active: bool,
    /// NUMA node of its PCI device, when sysfs tells (-1 there means none).
    pub numa_node: Option<i32>,
}

/// The adapters under `sysfs_root`, and notes on what could not be read.
pub fn read(sysfs_root: &Path) -> (Vec<Nic>, Vec<String>) {
    let mut nics = Vec::new();
    let mut notes = Vec::new();
    let mut rdma_netdevs = BTreeSet::new();
    let ib = sysfs_root.join("class/infiniband");
    match fs::read_dir(&ib) {
        Ok(devices) => {
            for dev in sorted(devices) {
                let name = file_name(&dev);
                for n in names(&dev.join("device/net")) {
                    rdma_netdevs.insert(n);
                }
                let efa = name.starts_with("efa")
                    || fs::read_link(dev.join("device/driver"))
                        .ok()
                        .and_then(|p| p.file_name().map(|f| f.to_string_lossy() == "efa"))
                        .unwrap_or(false);
                let numa = numa_node(&dev.join("device"));
                let ports = match fs::read_dir(dev.join("ports")) {
                    Ok(p) => sorted(p),
                    Err(_) => {
                        notes.push(format!("{name}: no ports in sysfs"));
                        continue;
                    }
                };
                for port in ports {
                    let layer = text(&port.join("link_layer")).unwrap_or_default();
                    let kind = if efa {
                        NicKind::Efa
                    } else if layer.eq_ignore_ascii_case("ethernet") {
                        NicKind::Roce
                    } else {
                        NicKind::Ib
                    };
                    let state = text(&port.join("state")).unwrap_or_default();
                    nics.push(Nic {
                        name: format!("{name}:{}", file_name(&port)),
                        kind,
                        rate_gbps: text(&port.join("rate"))
                            .and_then(|r| leading_number(&r))
                            .unwrap_or(0.0),
                        active: state.to_ascii_uppercase().contains("ACTIVE"),
                        numa_node: numa,
                    });
                }
            }
        }
        Err(_) => notes.push(format!("no RDMA devices ({} cannot be read)", ib.display())),
    }
    let net = sysfs_root.join("class/net");
    match fs::read_dir(&net) {
        Ok(ifaces) => {
            for iface in sorted(ifaces) {
                let name = file_name(&iface);
                if name == "lo" || rdma_netdevs.contains(&name) || !iface.join("device").exists() {
                    continue;
                }
                // `speed` is -1 (or unreadable) on a link that is down.
                let speed = text(&iface.join("speed"))
                    .and_then(|s| s.parse::<f64>().ok())
                    .filter(|s| s.is_finite() && *s > 0.0);
                let up = text(&iface.join("operstate")).is_some_and(|s| s == "up");
                nics.push(Nic {
                    name,
                    kind: NicKind::Ethernet,
                    rate_gbps: speed.map_or(0.0, |s| s / 1000.0),
                    active: up,
                    numa_node: numa_node(&iface.join("device")),
                });
            }
        }
        Err(_) => notes.push(format!(
            "no network interfaces ({} cannot be read)",
            net.display()
        )),
    }
    (nics, notes)
}

fn sorted(dir: fs::ReadDir) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
    v.sort();
    v
}

fn names(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .map(|d| sorted(d).iter().map(|p| file_name(p)).collect())
        .unwrap_or_default()
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A small sysfs file's text, trimmed (at most 4 KiB read: sysfs attributes are short).
fn text(p: &Path) -> Option<String> {
    use std::io::Read;
    let mut s = String::new();
    fs::File::open(p)
        .ok()?
        .take(4096)
        .read_to_string(&mut s)
        .ok()?;
    Some(s.trim().to_string())
}

fn numa_node(device: &Path) -> Option<i32> {
    text(&device.join("numa_node"))?
        .parse()
        .ok()
        .filter(|n| *n >= 0)
}

/// `400 Gb/sec (4X NDR)` → 400; `53.125 Gb/sec` → 53.125.
fn leading_number(s: &str) -> Option<f64> {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    s[..end].parse().ok().filter(|r: &f64| r.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    struct Tree(PathBuf);

    impl Tree {
        fn new(tag: &str) -> Tree {
            let root = std::env::temp_dir().join(format!(
                "nccl-perf-explain-sysfs-{tag}-{}",
                std::process::id()
            ));
            let _ = fs::remove_dir_all(&root);
            fs::create_dir_all(&root).unwrap();
            Tree(root)
        }
        fn file(&self, rel: &str, body: &[u8]) {
            let p = self.0.join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, body).unwrap();
        }
        fn dir(&self, rel: &str) {
            fs::create_dir_all(self.0.join(rel)).unwrap();
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn port(t: &Tree, dev: &str, rate: &str, layer: &str, state: &str) {
        t.file(
            &format!("class/infiniband/{dev}/ports/1/rate"),
            rate.as_bytes(),
        );
        t.file(
            &format!("class/infiniband/{dev}/ports/1/link_layer"),
            layer.as_bytes(),
        );
        t.file(
            &format!("class/infiniband/{dev}/ports/1/state"),
            state.as_bytes(),
        );
    }

    #[test]
    fn ib_roce_efa_and_ethernet_are_told_apart() {
        let t = Tree::new("kinds");
        port(
            &t,
            "mlx5_0",
            "400 Gb/sec (4X NDR)\n",
            "InfiniBand\n",
            "4: ACTIVE\n",
        );
        t.file("class/infiniband/mlx5_0/device/numa_node", b"1\n");
        port(
            &t,
            "mlx5_1",
            "200 Gb/sec (4X HDR)\n",
            "Ethernet\n",
            "4: ACTIVE\n",
        );
        t.dir("class/infiniband/mlx5_1/device/net/ens1np0");
        port(
            &t,
            "mlx5_2",
            "400 Gb/sec (4X NDR)\n",
            "InfiniBand\n",
            "1: DOWN\n",
        );
        port(
            &t,
            "efa_0",
            "100 Gb/sec (4X EDR)\n",
            "Unknown\n",
            "4: ACTIVE\n",
        );
        // The RoCE port's netdev, loopback, a bridge (no device link) and a real NIC.
        t.file("class/net/ens1np0/speed", b"200000\n");
        t.dir("class/net/ens1np0/device");
        t.file("class/net/lo/speed", b"-1\n");
        t.file("class/net/docker0/speed", b"10000\n");
        t.file("class/net/eth0/speed", b"25000\n");
        t.file("class/net/eth0/operstate", b"up\n");
        t.dir("class/net/eth0/device");
        t.file("class/net/eth1/speed", b"-1\n");
        t.file("class/net/eth1/operstate", b"down\n");
        t.dir("class/net/eth1/device");
        let (nics, notes) = read(&t.0);
        assert!(notes.is_empty(), "{notes:?}");
        let got: Vec<(&str, NicKind, f64, bool)> = nics
            .iter()
            .map(|n| (n.name.as_str(), n.kind, n.rate_gbps, n.active))
            .collect();
        assert_eq!(
            got,
            vec![
                ("efa_0:1", NicKind::Efa, 100.0, true),
                ("mlx5_0:1", NicKind::Ib, 400.0, true),
                ("mlx5_1:1", NicKind::Roce, 200.0, true),
                ("mlx5_2:1", NicKind::Ib, 400.0, false),
                ("eth0", NicKind::Ethernet, 25.0, true),
                ("eth1", NicKind::Ethernet, 0.0, false),
            ]
        );
        assert_eq!(nics[1].numa_node, Some(1));
    }

    #[test]
    fn weird_contents_do_not_panic() {
        let t = Tree::new("weird");
        port(&t, "mlx5_0", "fast\n", "", "");
        t.file("class/infiniband/mlx5_0/ports/1/rate", &[0xff, 0xfe, b'1']);
        t.file("class/infiniband/mlx5_0/device/numa_node", b"-1\n");
        t.file("class/infiniband/weird/ports", b"not a directory");
        t.file("class/net/eth0/speed", b"NaN\n");
        t.dir("class/net/eth0/device");
        let (nics, notes) = read(&t.0);
        assert_eq!(nics.len(), 2);
        assert_eq!(nics[0].rate_gbps, 0.0);
        assert!(!nics[0].active);
        assert_eq!(nics[0].numa_node, None);
        assert_eq!(nics[1].rate_gbps, 0.0);
        assert_eq!(notes, vec!["weird: no ports in sysfs".to_string()]);
    }

    #[test]
    fn a_missing_tree_is_two_notes() {
        let (nics, notes) = read(Path::new("/nonexistent-sysfs-root"));
        assert!(nics.is_empty());
        assert_eq!(notes.len(), 2);
        assert_eq!(leading_number("53.125 Gb/sec"), Some(53.125));
        assert_eq!(leading_number(""), None);
    }
}
