//! What a newcomer reads first says what the code does: the README's commands run as written
//! after its own build step (the programs on `PATH` before they are called by name, the C
//! linker the build needs), the exit codes the pages give are the code's, and `report` says
//! what it writes.

use std::path::Path;

fn read(path: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The lines of the `sh` blocks of a Markdown text, in order.
fn shell_lines(md: &str) -> Vec<String> {
    let mut inside = false;
    let mut lines = Vec::new();
    for line in md.lines() {
        if line.starts_with("```") {
            inside = !inside && line.trim() == "```sh";
            continue;
        }
        if inside {
            lines.push(line.trim().to_string());
        }
    }
    lines
}

#[test]
fn the_readme_puts_the_programs_on_path_before_calling_them_by_name() {
    let readme = read("README.md");
    let lines = shell_lines(&readme);
    let on_path = lines
        .iter()
        .position(|l| l.starts_with("cargo install --path .") || l.contains("export PATH="))
        .unwrap_or_else(|| panic!("no `cargo install --path .` or PATH line in {lines:#?}"));
    for (i, l) in lines.iter().enumerate() {
        let first = l.split_whitespace().next().unwrap_or_default();
        let by_name = first == "nccl-perf" || first.ends_with("_perf");
        assert!(
            !by_name || i > on_path,
            "`{l}` runs a program by name before the README puts it on PATH"
        );
    }
    assert!(
        readme.contains("C linker"),
        "the README does not say the build needs a C linker"
    );
}

#[test]
fn the_exit_code_of_a_named_suspect_is_the_codes() {
    let code = nccl_perf_locate::EXIT_SUSPECTS;
    let health = read("docs/health.md");
    assert!(
        health.contains(&format!("({code} when a suspect is named")),
        "docs/health.md gives another exit code than {code} for a named suspect"
    );
    assert!(read("README.md").contains(&format!("{code} `--locate` named a suspect")));
}

#[test]
fn report_says_it_writes_a_normalised_table() {
    let tool = read("docs/tool.md");
    assert!(
        tool.contains("normalised table") && tool.contains("`unalign: 0`"),
        "docs/tool.md does not say that report rewrites the table"
    );
    assert!(tool.contains("`111.7` as `111.70`"));
    assert!(read("README.md").contains("normalised"));
}
