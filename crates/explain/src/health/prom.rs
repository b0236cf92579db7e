//! The summary in the Prometheus text exposition format, for node_exporter's textfile
//! collector: gauges labelled `collective`, `host`, `gpu`, one series per node of the job and
//! collective (the job's figures on every node, each node's own verdict), so that one file
//! written at world rank 0 tells every node apart (docs/health.md "Prometheus").

use super::{Check, Health, Verdict};

/// The text of `h`. A metric without a value is left out.
pub(super) fn text(h: &Health) -> String {
    // The nodes the series are for: the job's, else the writer's host alone.
    let hosts: Vec<&str> = match h.nodes.is_empty() {
        true => vec![h.host.as_str()],
        false => h.nodes.iter().map(|n| n.host.as_str()).collect(),
    };
    let nodes: Vec<&str> = h.nodes.iter().map(|n| n.host.as_str()).collect();
    let labels = |c: &Check, host: &str| {
        format!(
            "collective=\"{}\",host=\"{}\",gpu=\"{}\"",
            label_value(&c.collective),
            label_value(host),
            label_value(&h.gpu)
        )
    };
    let mut s = String::new();
    let mut family = |name: &str, help: &str, value: &dyn Fn(&Check, &str) -> Option<f64>| {
        s += &format!("# HELP {name} {help}\n# TYPE {name} gauge\n");
        for host in &hosts {
            for c in &h.collectives {
                if let Some(v) = value(c, host).filter(|v| v.is_finite()) {
                    s += &format!("{name}{{{}}} {v}\n", labels(c, host));
                }
            }
        }
    };
    family(
        "nccl_perf_busbw_gbps",
        "Bus bandwidth (out of place) at the largest size, GB/s (the job's, on each of its nodes).",
        &|c, _| c.busbw,
    );
    family(
        "nccl_perf_expected_busbw_gbps",
        "Expected bus bandwidth: the baseline's at the largest judged size, else the SKU table's for the large sizes, GB/s.",
        &|c, _| c.expected_busbw,
    );
    family(
        "nccl_perf_percent_of_expected",
        "Measured over expected bus bandwidth, percent.",
        &|c, _| c.percent_of_expected,
    );
    family(
        "nccl_perf_wrong_values",
        "Values with wrong data found by validation.",
        &|c, _| Some(c.wrong as f64),
    );
    family(
        "nccl_perf_health_ok",
        "1 when the collective is judged at or above the threshold with no wrong data on this node, else 0.",
        &|c, host| Some(f64::from(u8::from(c.on_node(host, &nodes) == Verdict::Ok))),
    );
    family(
        "nccl_perf_health_judged",
        "1 when the collective was judged (by a baseline or the SKU table), else 0.",
        &|c, _| Some(f64::from(u8::from(c.verdict != Verdict::Unknown))),
    );
    s += "# HELP nccl_perf_health_verdict The collective's verdict on this node (1 for the label that holds).\n";
    s += "# TYPE nccl_perf_health_verdict gauge\n";
    for host in &hosts {
        for c in &h.collectives {
            s += &format!(
                "nccl_perf_health_verdict{{{},verdict=\"{}\"}} 1\n",
                labels(c, host),
                c.on_node(host, &nodes).word()
            );
        }
    }
    s
}

/// A label value as the text format writes it: backslash, double quote and line feed escaped.
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
