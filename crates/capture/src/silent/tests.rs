use super::*;

const MAPS: &str = "\
5581c000-5581d000 r--p 00000000 08:01 1234 /work/dist/all_reduce_perf
7f00a000-7f00b000 r-xp 00000000 08:01 99 /usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3
7f00c000-7f00d000 r--p 00001000 08:01 99 /usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3
7f00e000-7f00f000 r-xp 00000000 08:01 77 /opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so
7f010000-7f011000 rw-p 00000000 00:00 0
7ffd0000-7ffd1000 rw-p 00000000 00:00 0 [stack]
7f020000-7f021000 r--s 00000000 00:05 5 /dev/shm/nccl-abc (deleted)
";

#[test]
fn maps_give_the_distinct_library_names() {
    assert_eq!(
        mapped_libraries(MAPS),
        ["libnccl.so.2.28.3", "libnccl-net-ofi.so"]
    );
    assert!(mapped_libraries("garbage\n\n1 2 3\n").is_empty());
}

fn clues(libs: &[&str], rdma: usize) -> Clues {
    Clues {
        libraries: libs.iter().map(|s| s.to_string()).collect(),
        rdma_devices: rdma,
        ..Clues::default()
    }
}

#[test]
fn no_rdma_device_and_no_plugin_leave_sockets() {
    let n = clues(&["libnccl.so.2"], 0).network();
    assert!(n.is_socket(), "{n:?}");
    assert!(matches!(n, Net::SocketDeduced(ref why) if why.contains("no InfiniBand/RoCE device")));
}

#[test]
fn rdma_devices_without_events_are_not_decided() {
    assert_eq!(clues(&["libnccl.so.2"], 8).network(), Net::Unreported);
    let mut c = clues(&[], 8);
    c.ib_disabled = true;
    assert!(c.network().is_socket());
}

#[test]
fn a_loaded_plugin_comes_before_the_built_in_transports() {
    assert_eq!(
        clues(&["libnccl.so.2", "libnccl-net-ofi.so"], 0).network(),
        Net::PluginLoaded("libnccl-net-ofi.so".into())
    );
    // NCCL_NET_PLUGIN names the library in one of NCCL's forms.
    let mut c = clues(&["libnccl-net.so.1.4.0", "libgib-net.so"], 4);
    c.net_plugin = Some("/usr/local/gib/lib64/libgib-net.so".into());
    assert_eq!(c.network(), Net::PluginLoaded("libgib-net.so".into()));
    c.net_plugin = Some("gib".into());
    c.libraries = vec!["libnccl-net-gib.so".into()];
    assert_eq!(c.network(), Net::PluginLoaded("libnccl-net-gib.so".into()));
    // Named but not loaded: NCCL fell back to its own transports.
    c.libraries.clear();
    assert_eq!(c.network(), Net::Unreported);
}

#[test]
fn nccl_net_forces_the_network() {
    let mut c = clues(&["libnccl-net-ofi.so"], 8);
    c.nccl_net = Some("Socket".into());
    assert_eq!(c.network(), Net::SocketDeduced("NCCL_NET=Socket".into()));
    c.nccl_net = Some("IB".into());
    assert_eq!(c.network(), Net::IbDeduced("NCCL_NET=IB".into()));
    c.nccl_net = Some("AWS Libfabric".into());
    assert_eq!(c.network(), Net::Plugin(Some("AWS Libfabric".into())));
}

#[test]
fn this_process_reads_without_failing() {
    let c = Clues::here();
    // The test binary itself links the C library.
    assert!(
        c.libraries.iter().any(|l| l.starts_with("libc")),
        "{:?}",
        c.libraries
    );
}
