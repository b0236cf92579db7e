//! The benchmark table (`nccl-perf-facts`) against what ships: every program of `src/bin/` but
//! the tool is one entry of the table and every entry has its program, each program calls its
//! own collective, bench's collectives are the table's in its order, and each collective's
//! busbw factor is its entry's (explain, report and the tool read the same table).

use nccl_perf_bench::collective;
use nccl_perf_facts::BENCHMARKS;
use std::path::Path;

/// The programs of `src/bin/` but the tool, by name, with their source.
fn programs() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bin");
    let mut found: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let program = name.strip_suffix(".rs")?.to_string();
            (program != "nccl-perf").then(|| (program, std::fs::read_to_string(e.path()).unwrap()))
        })
        .collect();
    found.sort();
    found
}

#[test]
fn every_program_is_one_entry_of_the_table() {
    let mut table: Vec<String> = BENCHMARKS.iter().map(|b| b.program()).collect();
    table.sort();
    let programs: Vec<String> = programs().into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        programs, table,
        "src/bin/ against nccl_perf_facts::BENCHMARKS"
    );
}

/// Each program calls the collective of its name: `all_reduce_perf` names
/// `collective::AllReduce` (the type's name is the benchmark's without underscores).
#[test]
fn every_program_runs_its_own_collective() {
    for (program, source) in programs() {
        let ty: String = source
            .split("collective::")
            .nth(1)
            .unwrap_or_else(|| panic!("{program}: names no collective"))
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        let name = program.strip_suffix("_perf").unwrap();
        assert_eq!(ty.to_ascii_lowercase(), name.replace('_', ""), "{program}");
    }
}

#[test]
fn the_collectives_are_the_table_in_order() {
    let all = collective::all();
    let names: Vec<&str> = all.iter().map(|c| c.name()).collect();
    let table: Vec<&str> = BENCHMARKS.iter().map(|b| b.name).collect();
    assert_eq!(names, table);
    for (coll, entry) in all.iter().zip(BENCHMARKS) {
        assert_eq!(coll.facts(), entry);
        assert_eq!(coll.operation(), entry.operation);
        for n in [1usize, 2, 3, 8, 16, 72] {
            // hypercube needs a power of two; its factor does not depend on the count.
            let ts = 4;
            let counts = coll.counts(1 << 20, n, ts);
            let (_, factor) = coll.bandwidth(&counts, ts, n);
            assert_eq!(factor, entry.bus_factor(n), "{} on {n} ranks", coll.name());
        }
    }
}

/// `ci/install-layout.sh` lays out binaries built elsewhere (it cannot read `src/bin/`): its own
/// list is the table's, in the table's order.
#[test]
fn the_install_layout_lists_the_table() {
    let script =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ci/install-layout.sh"))
            .unwrap();
    let list = script
        .split("\nBENCHMARKS=(")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .expect("ci/install-layout.sh has BENCHMARKS=(...)");
    let listed: Vec<&str> = list.split_whitespace().collect();
    let table: Vec<&str> = BENCHMARKS.iter().map(|b| b.name).collect();
    assert_eq!(listed, table, "ci/install-layout.sh's BENCHMARKS");
}
