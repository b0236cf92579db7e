//! The network of a call whose data went through NCCL's proxy thread although no event named
//! the transport.
//!
//! NCCL's own InfiniBand/RoCE and socket transports emit profiler network events only when
//! NCCL is built with `NET_PROFILER=1` (`makefiles/common.mk` sets `NET_PROFILER ?= 0`; the
//! released packages, NCCL 2.28.3 on our H200 machine among them, report none). The network is
//! then told by what decides it in NCCL, in NCCL's order: `NCCL_NET` forces one by name; a
//! net plugin NCCL loaded (`libnccl-net*.so`, or the library `NCCL_NET_PLUGIN` names) comes
//! before the built-in transports; `NCCL_IB_DISABLE=1` leaves sockets; so does a node without
//! any InfiniBand/RoCE device (`/sys/class/infiniband` empty). Otherwise both built-in
//! transports were possible and the words say so ([`Net::Unreported`]).

use nccl_perf_explain::observed::Net;

/// The network of this process as [`Clues::here`] tells it, read once: at the first explained
/// call that needs it, after NCCL has made its communicators and loaded its plugins (the
/// environment, the mapped libraries and sysfs do not change after that).
pub fn network_here() -> Net {
    static NET: std::sync::OnceLock<Net> = std::sync::OnceLock::new();
    NET.get_or_init(|| Clues::here().network()).clone()
}

/// What decides the network.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Clues {
    /// `NCCL_NET`, when set and not empty.
    pub nccl_net: Option<String>,
    /// `NCCL_NET_PLUGIN`, when set and not empty.
    pub net_plugin: Option<String>,
    /// `NCCL_IB_DISABLE` set to a non-zero number.
    pub ib_disabled: bool,
    /// File names of the libraries mapped into this process.
    pub libraries: Vec<String>,
    /// Entries of `/sys/class/infiniband` (InfiniBand, RoCE and EFA devices).
    pub rdma_devices: usize,
}

impl Clues {
    /// This process's clues: its environment, `/proc/self/maps` and sysfs.
    pub fn here() -> Clues {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        Clues {
            nccl_net: env("NCCL_NET"),
            net_plugin: env("NCCL_NET_PLUGIN"),
            ib_disabled: env("NCCL_IB_DISABLE")
                .and_then(|v| v.trim().parse::<i64>().ok())
                .is_some_and(|v| v != 0),
            libraries: std::fs::read_to_string("/proc/self/maps")
                .map(|m| mapped_libraries(&m))
                .unwrap_or_default(),
            rdma_devices: std::fs::read_dir("/sys/class/infiniband")
                .map(|d| d.count())
                .unwrap_or(0),
        }
    }

    /// The net plugin library NCCL loaded, if any: one named by `NCCL_NET_PLUGIN` (a path,
    /// a file name, or `X` for `libnccl-net-X.so`), else any `libnccl-net*.so`.
    fn loaded_plugin(&self) -> Option<&str> {
        let named = self.net_plugin.as_deref().map(|p| {
            let base = p.rsplit('/').next().unwrap_or(p).to_string();
            [base.clone(), format!("libnccl-net-{base}.so")]
        });
        let is_named = |lib: &str| {
            named.as_ref().is_some_and(|n| {
                n.iter()
                    .any(|x| lib == x || lib.starts_with(&format!("{x}.")))
            })
        };
        self.libraries
            .iter()
            .find(|l| is_named(l))
            .or_else(|| self.libraries.iter().find(|l| l.starts_with("libnccl-net")))
            .map(String::as_str)
    }

    /// The network these clues leave (see the module's text).
    pub fn network(&self) -> Net {
        if let Some(n) = &self.nccl_net {
            return match n.trim().to_ascii_lowercase().as_str() {
                "socket" => Net::SocketDeduced(format!("NCCL_NET={n}")),
                "ib" => Net::IbDeduced(format!("NCCL_NET={n}")),
                _ => Net::Plugin(Some(n.clone())),
            };
        }
        if let Some(lib) = self.loaded_plugin() {
            return Net::PluginLoaded(lib.to_string());
        }
        if self.ib_disabled {
            return Net::SocketDeduced("NCCL_IB_DISABLE is set and no net plugin is loaded".into());
        }
        if self.rdma_devices == 0 {
            return Net::SocketDeduced(
                "no InfiniBand/RoCE device on this node and no net plugin loaded".into(),
            );
        }
        Net::Unreported
    }
}

/// The distinct file names of the libraries in a `/proc/PID/maps` text, in order of first
/// appearance.
fn mapped_libraries(maps: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in maps.lines() {
        // address perms offset dev inode path: the path is the sixth field, when present.
        let Some(path) = line.split_whitespace().nth(5) else {
            continue;
        };
        if !path.starts_with('/') {
            continue;
        }
        let name = path.rsplit('/').next().unwrap_or(path);
        if name.contains(".so") && !out.iter().any(|n| n == name) {
            out.push(name.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests;
