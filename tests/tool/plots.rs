//! `plot`: real SVG and PNG images, inputs named apart, one-rank no-ops kept off the axis.

use super::{read, reference, scratch};
use crate::programs::tool;

#[test]
fn plots_are_written_as_svg_and_png() {
    let dir = scratch("plot");
    let runs = [reference("ar_sweep.out"), reference("ar_sweep_run2.out")];
    let runs: Vec<String> = runs
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    // A folder that does not exist: one line, exit 2.
    let missing = dir.join("no/such/folder/x.png");
    let out = tool(&["plot", &runs[0], "-o", &missing.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err,
        format!(
            "nccl-perf: {}: cannot create the image: No such file or directory (os error 2)\n",
            missing.display()
        )
    );
    let svg = dir.join("sweep.svg");
    let out = tool(&[
        "plot",
        &runs[0],
        &runs[1],
        "--metric",
        "algbw",
        "--half",
        "both",
        "-o",
        &svg.to_string_lossy(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = read(&svg);
    assert!(text.starts_with("<svg ") && text.trim_end().ends_with("</svg>"));
    assert_eq!(text.matches("<svg").count(), 1);
    for label in [
        "Message size (bytes, log2 scale)",
        "Algorithm bandwidth (GB/s)",
        "ar_sweep out-of-place",
        "ar_sweep_run2 in-place",
        "1 MiB",
    ] {
        assert!(text.contains(label), "{label} missing from the SVG");
    }

    let png = dir.join("sweep.png");
    let out = tool(&[
        "plot",
        &runs[0],
        &runs[1],
        "--log-y",
        "--metric",
        "algbw",
        "-o",
        &png.to_string_lossy(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&png).unwrap_or_else(|e| panic!("{e}"));
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
    assert!(bytes.len() > 10_000, "{} bytes", bytes.len());

    // busbw of one rank is 0 everywhere: drawn, with a note that says why.
    let out = tool(&[
        "plot",
        &runs[0],
        "-o",
        &dir.join("busbw.svg").to_string_lossy(),
    ]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("every busbw is 0"));

    let out = tool(&["plot", &runs[0], "-o", &dir.join("x.gif").to_string_lossy()]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn plots_name_inputs_apart_and_keep_one_rank_no_ops_off_the_axis() {
    let dir = scratch("plot-names");
    // Two runs both called run.out, in folders a/ and b/ (a colleague's usual layout).
    let mut paths = Vec::new();
    for (folder, name) in [("a", "ar_sweep.out"), ("b", "ar_sweep_run2.out")] {
        std::fs::create_dir_all(dir.join(folder)).unwrap_or_else(|e| panic!("{e}"));
        let path = dir.join(folder).join("run.out");
        std::fs::write(&path, read(&reference(name))).unwrap_or_else(|e| panic!("{e}"));
        paths.push(path.to_string_lossy().into_owned());
    }
    let svg = dir.join("ab.svg");
    let out = tool(&[
        "plot",
        &paths[0],
        &paths[1],
        "--metric",
        "algbw",
        "-o",
        &svg.to_string_lossy(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let text = read(&svg);
    assert!(text.contains("a/run out-of-place"), "{text}");
    assert!(text.contains("b/run out-of-place"), "{text}");
    // One rank: the in-place no-ops (algbw in the thousands of GB/s) are left out, and said so.
    assert!(!text.contains("in-place"), "in-place drawn at one rank");
    assert!(
        err.contains("a/run: one rank, where the in-place operations are no-ops"),
        "{err}"
    );
    // No exponent in the axis labels.
    assert!(!text.contains("e+0"), "an exponent in the labels");
    // Asked for, they are drawn, and the labels stay readable.
    let both = dir.join("both.svg");
    let out = tool(&[
        "plot",
        &paths[0],
        "--metric",
        "algbw",
        "--half",
        "both",
        "-o",
        &both.to_string_lossy(),
    ]);
    assert!(out.status.success());
    let text = read(&both);
    assert!(text.contains("run in-place"), "{text}");
    assert!(!text.contains("e+0"), "an exponent in the labels");
}
