use super::*;
use crate::hardware::{Gpu, Nic, NicKind, NvLink};
use crate::observed::RankDevice;

fn h200(active: u32) -> Hardware {
    Hardware {
        gpu: Some(Gpu {
            name: "NVIDIA H200".into(),
            nvlink: (0..18)
                .map(|index| NvLink {
                    index,
                    active: index < active,
                    version: Some(4),
                })
                .collect(),
            pcie: None,
        }),
        nics: (0..8)
            .map(|i| Nic {
                name: format!("mlx5_{i}:1"),
                kind: NicKind::Ib,
                rate_gbps: 400.0,
                active: true,
                numa_node: None,
            })
            .chain(std::iter::once(Nic {
                name: "eth0".into(),
                kind: NicKind::Ethernet,
                rate_gbps: 100.0,
                active: true,
                numa_node: None,
            }))
            .collect(),
        notes: vec![],
    }
}

fn run(collective: &str, nranks: u32, nnodes: u32, rpn: u32) -> Run {
    Run {
        collective: collective.into(),
        nranks,
        nnodes,
        ranks_per_node: rpn,
        gpu_names: vec!["NVIDIA H200".into()],
        ..Run::default()
    }
}

fn busbw(r: &Run, hw: &Hardware, algo: Option<&str>, net: Option<&Net>) -> Option<f64> {
    ceiling(r, hw, &SkuTable::builtin(), algo, net).busbw_gbs
}

#[test]
fn one_node_is_nvlink_per_direction() {
    let r = run("all_reduce", 8, 1, 8);
    assert_eq!(busbw(&r, &h200(18), Some("Ring"), None), Some(450.0));
    assert_eq!(busbw(&r, &h200(17), Some("Ring"), None), Some(425.0));
    assert_eq!(busbw(&r, &h200(18), Some("NVLS"), None), Some(450.0 * 1.75));
    // NVLS does not change an all_gather's bound.
    let ag = run("all_gather", 8, 1, 8);
    assert_eq!(busbw(&ag, &h200(18), Some("NVLS"), None), Some(450.0));
    // From a log: the datasheet's links.
    let c = ceiling(&r, &Hardware::default(), &SkuTable::builtin(), None, None);
    assert_eq!(c.busbw_gbs, Some(450.0 * 1.75));
    assert!(
        c.basis.contains("datasheet") && c.basis.contains("NVLS possible"),
        "{}",
        c.basis
    );
    let ag = ceiling(&ag, &Hardware::default(), &SkuTable::builtin(), None, None);
    assert_eq!(ag.busbw_gbs, Some(450.0));
}

#[test]
fn no_nvlink_falls_back_to_pcie() {
    let mut hw = h200(0);
    hw.gpu.as_mut().unwrap().pcie = Some(crate::hardware::Pcie {
        max_gen: Some(5),
        max_width: Some(16),
        cur_gen: Some(4),
        cur_width: Some(16),
    });
    let c = ceiling(
        &run("all_reduce", 8, 1, 8),
        &hw,
        &SkuTable::builtin(),
        Some("Ring"),
        None,
    );
    assert_eq!(c.limit, "PCIe");
    assert!((c.busbw_gbs.unwrap() - 31.5).abs() < 0.1);
}

#[test]
fn across_nodes_the_network_or_nvlink_whichever_is_lower() {
    let r = run("all_reduce", 16, 2, 8);
    let c = ceiling(
        &r,
        &h200(18),
        &SkuTable::builtin(),
        Some("Ring"),
        Some(&Net::Ib),
    );
    assert_eq!(c.busbw_gbs, Some(400.0));
    assert_eq!(c.limit, "network");
    // Sockets: only the Ethernet port counts.
    assert_eq!(
        busbw(&r, &h200(18), Some("Ring"), Some(&Net::Socket)),
        Some(12.5)
    );
    // alltoall: each rank's share of the node's NICs.
    let a = run("alltoall", 16, 2, 8);
    assert_eq!(
        busbw(&a, &h200(18), None, Some(&Net::Ib)),
        Some(15.0 / 8.0 * 50.0)
    );
    // NVLink below the network: 2 links up.
    assert_eq!(
        busbw(&r, &h200(2), Some("Ring"), Some(&Net::Ib)),
        Some(50.0)
    );
    // No NIC known.
    let mut bare = h200(18);
    bare.nics.clear();
    assert_eq!(busbw(&r, &bare, Some("Ring"), None), None);
    // Unknown node count.
    assert_eq!(
        busbw(&run("all_reduce", 16, 0, 0), &h200(18), None, None),
        None
    );
}

#[test]
fn one_rank_is_a_copy_and_posing_ranks_have_no_ceiling() {
    let c = ceiling(
        &run("all_reduce", 1, 1, 1),
        &h200(18),
        &SkuTable::builtin(),
        None,
        None,
    );
    assert_eq!(c.scope, Scope::OneRank);
    assert_eq!(c.busbw_gbs, None);
    assert_eq!(c.algbw_gbs, Some(2400.0));
    let mut r = run("all_reduce", 4, 4, 1);
    r.rank_devices = vec![
        RankDevice {
            host: "h".into(),
            pci_bus_id: "0000:04:00".into(),
            device: Some(0),
        };
        4
    ];
    let c = ceiling(
        &r,
        &h200(18),
        &SkuTable::builtin(),
        None,
        Some(&Net::Socket),
    );
    assert_eq!(c.scope, Scope::OneGpuSeveralRanks);
    assert_eq!(c.busbw_gbs, None);
    assert!(c.basis.contains("no hardware ceiling"));
    // The same bus id on different hosts is an ordinary multi-node job.
    r.rank_devices[1].host = "other".into();
    assert!(!Shape::of(&r).one_gpu);
    // Old logs print `[0x00]` for every GPU: different ordinals are different GPUs.
    r.rank_devices[1].host = "h".into();
    assert!(Shape::of(&r).one_gpu);
    r.rank_devices[1].device = Some(1);
    assert!(!Shape::of(&r).one_gpu);
}
