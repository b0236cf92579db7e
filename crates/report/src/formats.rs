//! The output formats of runs, behind one trait and each named once, here: `nccl-perf report
//! --format NAME` offers every one of [`ALL`], and a benchmark's `-J` file takes the ones it
//! writes while it runs (those with a [`Format::file_suffix`]) from the file name's ending.
//! Nothing falls back to another format: an unknown name is not a format ([`by_name`]).

use std::path::Path;

use crate::run::Run;
use crate::{csv, health, json, markdown};

/// One output format of runs.
pub trait Format: Sync {
    /// Its name, as `nccl-perf report --format` takes it.
    fn name(&self) -> &'static str;

    /// Its name in messages (`# Writing JSON output to ...`, `could not write the JSON file`).
    fn label(&self) -> &'static str;

    /// The file-name ending (any case) that makes a benchmark's `-J` file this format; only
    /// the formats a benchmark writes while it runs have one.
    fn file_suffix(&self) -> Option<&'static str> {
        None
    }

    /// Finished runs in this format: what `nccl-perf report` prints.
    fn render(&self, runs: &[Run]) -> String;

    /// `# Writing JSON output to <path>`, printed before the report header once the file is
    /// open.
    fn writing_line(&self, path: &Path) -> String {
        format!("# Writing {} output to {}\n", self.label(), path.display())
    }

    /// Whether a file named `name` asks for this format (its ending, any case).
    fn names_file(&self, name: &str) -> bool {
        self.file_suffix().is_some_and(|suffix| {
            name.len() >= suffix.len()
                && name.as_bytes()[name.len() - suffix.len()..]
                    .eq_ignore_ascii_case(suffix.as_bytes())
        })
    }
}

/// The nccl-tests text table, byte for byte.
pub struct Text;
/// One record per table row, both halves side by side ([`csv`]).
pub struct Csv;
/// One GitHub table per test ([`markdown`]).
pub struct Markdown;
/// Upstream's `-J` schema, one document per test and line ([`json`]).
pub struct Json;

/// Every format, in the order `--format` lists them (the first is the default).
pub const ALL: [&dyn Format; 4] = [&Text, &Csv, &Markdown, &Json];

/// The format called `name`, if there is one.
pub fn by_name(name: &str) -> Option<&'static dyn Format> {
    ALL.into_iter().find(|f| f.name() == name)
}

/// The names of [`ALL`], in order.
pub fn names() -> Vec<&'static str> {
    ALL.iter().map(|f| f.name()).collect()
}

/// The formats a benchmark's `-J` file can have, in the order of [`ALL`].
pub fn file_formats() -> Vec<&'static dyn Format> {
    ALL.into_iter()
        .filter(|f| f.file_suffix().is_some())
        .collect()
}

/// The format a `-J` file name asks for, if any.
pub fn for_file(name: &str) -> Option<&'static dyn Format> {
    ALL.into_iter().find(|f| f.names_file(name))
}

impl Format for Text {
    fn name(&self) -> &'static str {
        "text"
    }
    fn label(&self) -> &'static str {
        "text"
    }
    fn render(&self, runs: &[Run]) -> String {
        runs.iter().map(Run::to_text).collect()
    }
}

impl Format for Csv {
    fn name(&self) -> &'static str {
        "csv"
    }
    fn label(&self) -> &'static str {
        "CSV"
    }
    fn file_suffix(&self) -> Option<&'static str> {
        Some(".csv")
    }
    /// The benchmarks' columns plus `problems`: why a run cannot be trusted. A run without
    /// rows still gets one record, so that its failure is not lost.
    fn render(&self, runs: &[Run]) -> String {
        let columns = runs
            .iter()
            .map(|r| csv::Columns::of(&r.info))
            .fold(csv::Columns::default(), csv::Columns::union);
        let header = csv::header(columns);
        let fields = header.split(',').count();
        let mut out = header.trim_end().to_string() + ",problems\n";
        for run in runs {
            let problems = csv::field(&health::problem_lines(run).join("; "));
            // Inferred once per run, not per row.
            let program = health::program(run);
            for row in &run.rows {
                let record = csv::record(program, row, columns);
                out += &format!("{},{problems}\n", record.trim_end());
            }
            if run.rows.is_empty() {
                let empty = ",".repeat(fields - 1);
                out += &format!("{}{empty},{problems}\n", csv::field(program));
            }
        }
        out
    }
}

impl Format for Markdown {
    fn name(&self) -> &'static str {
        "markdown"
    }
    fn label(&self) -> &'static str {
        "Markdown"
    }
    fn render(&self, runs: &[Run]) -> String {
        runs.iter()
            .map(markdown::render)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Format for Json {
    fn name(&self) -> &'static str {
        "json"
    }
    fn label(&self) -> &'static str {
        "JSON"
    }
    fn file_suffix(&self) -> Option<&'static str> {
        Some(".json")
    }
    fn render(&self, runs: &[Run]) -> String {
        runs.iter()
            .map(|r| json::of_run::document(r) + "\n")
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_format_is_named_once_and_found_by_its_name() {
        let names = names();
        assert_eq!(names, ["text", "csv", "markdown", "json"]);
        for f in ALL {
            assert_eq!(by_name(f.name()).map(|g| g.name()), Some(f.name()));
            assert_eq!(ALL.iter().filter(|g| g.name() == f.name()).count(), 1);
        }
        assert!(by_name("html").is_none());
        assert!(by_name("").is_none());
    }

    #[test]
    fn file_names_pick_json_or_csv_in_any_case() {
        let name = |n: &str| for_file(n).map(|f| f.name());
        assert_eq!(name("out.json"), Some("json"));
        assert_eq!(name("/tmp/RESULTS.JSON"), Some("json"));
        assert_eq!(name("out.CSV"), Some("csv"));
        assert_eq!(name("é.json"), Some("json"));
        assert_eq!(name("csv"), None);
        assert_eq!(name("out.json5"), None);
        assert_eq!(name("out.md"), None);
        assert_eq!(name("é"), None);
        let files: Vec<_> = file_formats().iter().map(|f| f.name()).collect();
        assert_eq!(files, ["csv", "json"]);
    }

    #[test]
    fn writing_lines_name_the_format() {
        let p = Path::new("/x/r.json");
        assert_eq!(Json.writing_line(p), "# Writing JSON output to /x/r.json\n");
        assert_eq!(Csv.writing_line(p), "# Writing CSV output to /x/r.json\n");
    }
}
