//! Options: datatypes, ops and roots, options this build does not implement and conflicts,
//! output files (`-J`), and unknown, ambiguous and malformed options.

use super::{Case, Expect, On, bytes, case, raw};
use std::path::Path;

/// Datatypes, ops, roots.
pub(super) fn datatypes_ops_and_roots(_tmp: &Path) -> Vec<Case> {
    use Expect::*;
    use On::*;
    vec![
        case(
            "unknown type",
            &["-d", "bogus"],
            Every,
            Args("unknown datatype 'bogus' for -d (--datatype)"),
        ),
        case(
            "type alias",
            &["-d", "fp16"],
            AllReduce,
            Args("unknown datatype 'fp16'"),
        ),
        case(
            "type case",
            &["-d", "FLOAT"],
            AllReduce,
            Args("unknown datatype 'FLOAT'"),
        ),
        case(
            "empty type",
            &["-d", ""],
            AllReduce,
            Args("unknown datatype ''"),
        ),
        case(
            "unknown op",
            &["-o", "mean"],
            Every,
            Args("unknown op 'mean' for -o (--op)"),
        ),
        case(
            "op case",
            &["-o", "SUM"],
            AllReduce,
            Args("unknown op 'SUM'"),
        ),
        case("empty op", &["-o", ""], AllReduce, Args("unknown op ''")),
        case(
            "negative root",
            &["-r", "-3"],
            Broadcast,
            Args("invalid root -3"),
        ),
        case(
            "root word",
            &["-r", "first"],
            Broadcast,
            Args("invalid value 'first' for -r (--root): not a number"),
        ),
        case(
            "root outside the communicator",
            &["-r", "5", "--dry-run"],
            Broadcast,
            Args("invalid root 5 for -r (--root): the communicator has 1 rank"),
        ),
    ]
}

/// Options this build does not implement, and conflicts.
pub(super) fn unimplemented_options_and_conflicts(_tmp: &Path) -> Vec<Case> {
    use Expect::*;
    use On::*;
    vec![
        case("graphs", &["-G", "2"], AllReduce, Gpu(None)),
        case(
            "device API without registration",
            &["-D", "1", "-R", "0"],
            AllReduce,
            Args(
                "device implementation (-D > 0) requires enabling symmetric memory registration (-R 2)",
            ),
        ),
        case(
            "device API kernels are not built",
            &["-D", "1", "-R", "2"],
            AllReduce,
            Unsupported("device-API implementations"),
        ),
        case(
            "graphs cannot capture the NULL stream",
            &["-G", "2", "-y", "1"],
            AllReduce,
            Args("cannot capture the legacy NULL stream"),
        ),
    ]
}

/// -J: unwritable, unsupported, empty, not UTF-8.
pub(super) fn output_files(tmp: &Path) -> Vec<Case> {
    use Expect::*;
    use On::*;
    let f = |p: &str| tmp.join(p).to_string_lossy().into_owned();
    let taken = f("taken.json");
    std::fs::create_dir_all(tmp.join("dir.json")).unwrap();
    vec![
        case(
            "-J in a missing folder",
            &["-J", "/nonexistent/dir/x.json"],
            Every,
            Args("-J /nonexistent/dir/x.json: cannot create the output file"),
        ),
        case(
            "-J under /proc",
            &["-J", "/proc/x.json"],
            AllReduce,
            Args("cannot create the output file"),
        ),
        case(
            "-J unsupported suffix",
            &["-J", "out.txt"],
            Every,
            Args("only .json and .csv output are supported"),
        ),
        case(
            "-J root folder",
            &["-J", "/"],
            AllReduce,
            Args("only .json and .csv output are supported"),
        ),
        case(
            "-J empty",
            &["-J", ""],
            AllReduce,
            Args("-J (--output_file) needs a file name"),
        ),
        case(
            "-J dry run checks the folder",
            &["--dry-run", "-J", "/nonexistent/x.json"],
            AllReduce,
            Args("cannot create the output file"),
        ),
        Case {
            env: Vec::new(),
            ..case(
                "-J existing file is never overwritten",
                &["-b", "8", "-e", "8", "-J", &taken],
                AllReduce,
                Gpu(None),
            )
        },
        raw(
            "-J not UTF-8",
            vec!["-J".into(), bytes(b"\xff.json")],
            Args("the value of -J (--output_file) is not valid UTF-8"),
        ),
    ]
}

/// Unknown, ambiguous and malformed options.
pub(super) fn malformed_options(_tmp: &Path) -> Vec<Case> {
    use Expect::*;
    use On::*;
    vec![
        case(
            "unknown long option",
            &["--bogus", "1"],
            Every,
            Args("unknown option '--bogus'"),
        ),
        case(
            "unknown short option",
            &["-q"],
            AllReduce,
            Args("unknown option '-q'"),
        ),
        case(
            "missing value",
            &["-n"],
            Every,
            Args("option -n (--iters) requires a value"),
        ),
        case(
            "missing long value",
            &["-b", "8", "--iters"],
            AllReduce,
            Args("option -n (--iters) requires a value"),
        ),
        case("ambiguous prefix", &["--m", "1"], AllReduce, Args("--m")),
        case(
            "three dashes",
            &["---n", "5"],
            AllReduce,
            Args("unknown option '---n'"),
        ),
        case("bare --=", &["--=5"], AllReduce, Args("unknown option")),
        case(
            "value for a flag",
            &["--dry-run=1"],
            AllReduce,
            Args("--dry-run"),
        ),
        case("value for help", &["--help=1"], AllReduce, Args("--help")),
    ]
}
