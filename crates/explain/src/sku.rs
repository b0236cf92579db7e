//! The SKU table: what a GPU model's interconnect is (`gpu` rows, from datasheets) and what
//! busbw published runs reached on a given system (`expect` rows), each with its source.
//! The built-in table is `data/sku.txt`; a user's file extends or replaces it
//! ([`SkuTable::load`]). The format is in docs/explain.md ("The SKU table").

use std::path::Path;

use serde::Serialize;

/// The built-in table's text.
const BUILTIN: &str = include_str!("../data/sku.txt");

/// Why a SKU file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("{file}: cannot read: {source}")]
    Read {
        /// File as given.
        file: String,
        /// The system's reason.
        source: std::io::Error,
    },
    /// A line is wrong.
    #[error("{file}:{line}: {message}")]
    Line {
        /// File as given (`built-in` for the embedded table).
        file: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// A GPU model's interconnect and memory, from its datasheet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuSpec {
    /// Device names it goes by (compared by [`same_gpu`]).
    pub names: Vec<String>,
    /// NVLink links per GPU (0: none).
    pub nvlink_links: u32,
    /// GB/s per link and direction.
    pub nvlink_gbs_per_link: f64,
    /// Memory bandwidth, GB/s.
    pub hbm_gbs: Option<f64>,
    /// Where the figures come from.
    pub source: String,
}

impl GpuSpec {
    /// NVLink bandwidth per GPU and direction with every link up, GB/s.
    pub fn nvlink_gbs(&self) -> f64 {
        f64::from(self.nvlink_links) * self.nvlink_gbs_per_link
    }
}

/// How many nodes an expectation is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Nodes {
    /// Exactly this many.
    Exactly(u32),
    /// This many or more.
    AtLeast(u32),
}

impl Nodes {
    fn matches(self, n: u32) -> bool {
        match self {
            Nodes::Exactly(k) => n == k,
            Nodes::AtLeast(k) => n >= k,
        }
    }
}

/// A published busbw for large messages on one system.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Expectation {
    /// Device names it applies to.
    pub gpu: Vec<String>,
    /// Nodes.
    pub nodes: Nodes,
    /// GPUs (ranks) per node.
    pub gpus_per_node: u32,
    /// Benchmark name without `_perf`.
    pub collective: String,
    /// The figure, GB/s.
    pub busbw_gbs: f64,
    /// Message size of the figure, bytes.
    pub size: Option<u64>,
    /// NCCL's algorithm, when the source says.
    pub algo: Option<String>,
    /// The nodes' network, in words.
    pub network: Option<String>,
    /// The figure is not a plain reading from a named system.
    pub approximate: bool,
    /// What was measured.
    pub measured: String,
    /// Where.
    pub source: String,
    /// The row came from the user's file (`--explain-sku`), not the built-in table.
    pub own: bool,
}

/// The whole table.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SkuTable {
    /// GPU models; earlier rows win.
    pub gpus: Vec<GpuSpec>,
    /// Expectations; earlier rows win among equally specific ones.
    pub expectations: Vec<Expectation>,
}

/// Whether two device names are the same GPU model: compared without case, surrounding
/// space and a leading `NVIDIA ` or `Tesla ` (old logs print `A100-SXM4-40GB`, newer ones
/// `NVIDIA A100-SXM4-40GB`).
pub fn same_gpu(a: &str, b: &str) -> bool {
    fn norm(s: &str) -> String {
        let s = s.trim().to_ascii_lowercase();
        let s = s.strip_prefix("nvidia ").unwrap_or(&s);
        let s = s.strip_prefix("tesla ").unwrap_or(s);
        s.trim().to_string()
    }
    !a.trim().is_empty() && norm(a) == norm(b)
}

impl SkuTable {
    /// The table built into the program (`crates/explain/data/sku.txt`).
    pub fn builtin() -> SkuTable {
        // The built-in text is checked by a test; a broken one would give an empty table.
        SkuTable::parse(BUILTIN, "built-in").unwrap_or_default()
    }

    /// The built-in table extended by the file at `path` (its rows win), or replaced by it
    /// when the file says `builtin | no`.
    pub fn load(path: &Path) -> Result<SkuTable, Error> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            file: file.clone(),
            source,
        })?;
        let (mut user, keep_builtin) = parse_rows(&text, &file)?;
        for e in &mut user.expectations {
            e.own = true;
        }
        if !keep_builtin {
            return Ok(user);
        }
        let builtin = SkuTable::builtin();
        Ok(SkuTable {
            gpus: user.gpus.into_iter().chain(builtin.gpus).collect(),
            expectations: user
                .expectations
                .into_iter()
                .chain(builtin.expectations)
                .collect(),
        })
    }

    /// Parses a table's text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<SkuTable, Error> {
        parse_rows(text, file).map(|(t, _)| t)
    }

    /// The spec of the GPU model `name`.
    pub fn gpu(&self, name: &str) -> Option<&GpuSpec> {
        self.gpus
            .iter()
            .find(|g| g.names.iter().any(|n| same_gpu(n, name)))
    }

    /// The expectation for `collective` on `nodes` × `gpus_per_node` GPUs named `gpu`: an
    /// exact node count before an `N+` row, then the first in the table.
    pub fn expectation(
        &self,
        gpu: &str,
        collective: &str,
        nodes: u32,
        gpus_per_node: u32,
    ) -> Option<&Expectation> {
        self.expectations(gpu, collective, nodes, gpus_per_node)
            .into_iter()
            .next()
    }

    /// Every row that fits, the one [`SkuTable::expectation`] picks first (systems with the
    /// same GPUs and shape but different networks publish different figures).
    pub fn expectations(
        &self,
        gpu: &str,
        collective: &str,
        nodes: u32,
        gpus_per_node: u32,
    ) -> Vec<&Expectation> {
        let fits = |e: &&Expectation| {
            e.collective == collective
                && e.gpus_per_node == gpus_per_node
                && e.nodes.matches(nodes)
                && e.gpu.iter().any(|g| same_gpu(g, gpu))
        };
        let exact = |e: &&Expectation| matches!(e.nodes, Nodes::Exactly(_));
        let all: Vec<&Expectation> = self.expectations.iter().filter(fits).collect();
        all.iter()
            .filter(|e| exact(e))
            .chain(all.iter().filter(|e| !exact(e)))
            .copied()
            .collect()
    }
}

fn parse_rows(text: &str, file: &str) -> Result<(SkuTable, bool), Error> {
    let mut table = SkuTable::default();
    let mut keep_builtin = true;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let err = |message: String| Error::Line {
            file: file.to_string(),
            line,
            message,
        };
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let mut fields = l.split('|').map(str::trim);
        let kind = fields.next().unwrap_or_default();
        let mut row = Fields::default();
        if kind == "builtin" {
            match fields.next() {
                Some("no") => keep_builtin = false,
                Some("yes") => {}
                _ => return Err(err("`builtin` takes `yes` or `no`: `builtin | no`".into())),
            }
            continue;
        }
        for f in fields {
            let (k, v) = f
                .split_once('=')
                .ok_or_else(|| err(format!("`{f}`: expected key=value")))?;
            if row.0.iter().any(|(key, _)| key == k.trim()) {
                return Err(err(format!("`{}` given twice", k.trim())));
            }
            row.0.push((k.trim().to_string(), v.trim().to_string()));
        }
        match kind {
            "gpu" => table.gpus.push(row.gpu().map_err(err)?),
            "expect" => table.expectations.push(row.expect().map_err(err)?),
            other => {
                return Err(err(format!(
                    "`{other}`: a row starts with `gpu`, `expect` or `builtin`"
                )));
            }
        }
    }
    Ok((table, keep_builtin))
}

/// One row's `key=value` fields.
#[derive(Default)]
struct Fields(Vec<(String, String)>);

impl Fields {
    fn get(&self, k: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty() && *v != "-")
    }

    fn need(&self, k: &str) -> Result<&str, String> {
        self.get(k).ok_or_else(|| format!("`{k}=` is missing"))
    }

    fn only(&self, allowed: &[&str]) -> Result<(), String> {
        match self.0.iter().find(|(k, _)| !allowed.contains(&k.as_str())) {
            Some((k, _)) => Err(format!("unknown key `{k}` (known: {})", allowed.join(", "))),
            None => Ok(()),
        }
    }

    fn gpu(&self) -> Result<GpuSpec, String> {
        self.only(&["names", "nvlink", "hbm", "source"])?;
        let nvlink = self.need("nvlink")?;
        let (links, per) = nvlink
            .split_once(['x', 'X'])
            .ok_or_else(|| format!("nvlink={nvlink}: expected LINKSxGBPS, e.g. 18x25"))?;
        Ok(GpuSpec {
            names: list(self.need("names")?),
            nvlink_links: links
                .trim()
                .parse()
                .map_err(|_| format!("nvlink={nvlink}: `{links}` is not a link count"))?,
            nvlink_gbs_per_link: number("nvlink", per)?,
            hbm_gbs: self.get("hbm").map(|h| number("hbm", h)).transpose()?,
            source: self.need("source")?.to_string(),
        })
    }

    fn expect(&self) -> Result<Expectation, String> {
        self.only(&[
            "gpu",
            "nodes",
            "gpus_per_node",
            "collective",
            "busbw",
            "size",
            "algo",
            "network",
            "approximate",
            "measured",
            "source",
        ])?;
        let nodes = self.need("nodes")?;
        let count = |s: &str| {
            s.trim()
                .parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("nodes={nodes}: expected N or N+ (N ≥ 1)"))
        };
        let nodes = match nodes.strip_suffix('+') {
            Some(n) => Nodes::AtLeast(count(n)?),
            None => Nodes::Exactly(count(nodes)?),
        };
        let gpn = self.need("gpus_per_node")?;
        let collective = self.need("collective")?;
        if nccl_perf_facts::benchmark(collective).is_none() {
            return Err(format!(
                "collective={collective}: not one of the benchmarks"
            ));
        }
        let approximate = match self.get("approximate") {
            None | Some("no") => false,
            Some("yes") => true,
            Some(other) => return Err(format!("approximate={other}: expected yes or no")),
        };
        Ok(Expectation {
            gpu: list(self.need("gpu")?),
            nodes,
            gpus_per_node: gpn
                .parse()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("gpus_per_node={gpn}: expected a count ≥ 1"))?,
            collective: collective.to_string(),
            busbw_gbs: number("busbw", self.need("busbw")?)?,
            size: self.get("size").map(size).transpose()?,
            algo: self.get("algo").map(str::to_string),
            network: self.get("network").map(str::to_string),
            approximate,
            measured: self.need("measured")?.to_string(),
            source: self.need("source")?.to_string(),
            own: false,
        })
    }
}

fn list(s: &str) -> Vec<String> {
    s.split(',')
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .collect()
}

fn number(key: &str, s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .ok_or_else(|| format!("{key}={s}: expected a positive number"))
}

/// `8G`, `512M`, `4096`: bytes (K, M, G, T are powers of 1024).
fn size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (digits, shift) = match s.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&s[..s.len() - 1], 10),
        Some('M') => (&s[..s.len() - 1], 20),
        Some('G') => (&s[..s.len() - 1], 30),
        Some('T') => (&s[..s.len() - 1], 40),
        _ => (s, 0),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .ok_or_else(|| format!("size={s}: expected bytes with an optional K, M, G or T"))
}

#[cfg(test)]
mod tests;
