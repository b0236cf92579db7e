//! The options as nccl-tests reads them: defaults, leniency, strict errors, post-parse rules.

use super::*;
use crate::cli;

fn parse(args: &[&str]) -> Result<Parsed, OptionsError> {
    from_args(&cli::parse(args.iter().copied()).map_err(|e| OptionsError::Invalid(e.to_string()))?)
}

#[test]
fn defaults_match_upstream() {
    let p = parse(&[]).unwrap();
    assert_eq!(p.options, Options::default());
    assert_eq!(p.options.min_bytes, 33554432);
    assert_eq!(p.options.warmup_iters, 1);
    assert!(p.warnings.is_empty());
}

#[test]
fn lenient_warmup_as_in_a_real_health_checker() {
    let p = parse(&[
        "-b",
        "2G",
        "-e",
        "8G",
        "-f",
        "2",
        "-g",
        "1",
        "-w",
        "50--iters",
        "100",
    ])
    .unwrap();
    assert_eq!(p.options.warmup_iters, 50);
    assert_eq!(p.options.iters, 20);
    assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
}

#[test]
fn strict_errors() {
    let invalid = |args: &[&str]| matches!(parse(args), Err(OptionsError::Invalid(_)));
    assert!(invalid(&["-b", "1G", "-e", "1M"]));
    assert!(invalid(&["-b", "0", "-e", "1M", "-f", "2"]));
    assert!(invalid(&["-b", "1", "-e", "1M", "-i", "0"]));
    assert!(invalid(&["-d", "bogus"]));
    assert!(invalid(&["-d", "fp16"]));
    assert!(invalid(&["-o", "Sum"]));
    assert!(invalid(&["-n", "abc"]));
    assert!(invalid(&["-n", "0"]));
    assert!(invalid(&["-n", "-5"]));
    assert!(invalid(&["-g", "0"]));
    assert!(invalid(&["-t", "-1"]));
    assert!(invalid(&["-c", "-1"]));
    assert!(invalid(&["-a", "7"]));
    assert!(invalid(&["-n", "99999999999"]));
    assert!(invalid(&["-r", "-2"]));
    assert!(invalid(&["-e", "1T"]));
    let msg = match parse(&["-b", "1G", "-e", "1M"]) {
        Err(OptionsError::Invalid(m)) => m,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        msg,
        "invalid sizes for 'minbytes' and 'maxbytes': 1073741824 > 1048576"
    );
    // -b alone above -e's default: nccl-tests' line, then why on a line of its own.
    let msg = match parse(&["-b", "512M"]) {
        Err(OptionsError::Invalid(m)) => m,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        msg,
        "invalid sizes for 'minbytes' and 'maxbytes': 536870912 > 33554432\nnccl-perf: -e \
         (--maxbytes) was not given and defaults to 32M (33554432): give it as well, e.g. -b 512M \
         -e 512M"
    );
}

#[test]
fn timing_options_are_read() {
    let o = parse(&[
        "-G", "3", "-p", "1", "-M", "1", "-R", "2", "-x", "1", "-T", "5",
    ])
    .unwrap()
    .options;
    assert_eq!(
        (
            o.graph.launches(),
            o.parallel_init,
            o.memory_report,
            o.register
        ),
        (Some(3), true, true, Register::Symmetric)
    );
    assert_eq!((o.cta_policy, o.timeout_s), (Some(1), 5));
    assert_eq!(parse(&[]).unwrap().options.cta_policy, None);
    assert_eq!(parse(&["-x", "-1"]).unwrap().options.cta_policy, None);
    let o = parse(&["-I", "1", "-K", "3"]).unwrap().options;
    assert!(o.per_iter);
    assert_eq!(o.per_iter_skip, 3);
    assert!(matches!(
        parse(&["-T", "-1"]),
        Err(OptionsError::Invalid(_))
    ));
    assert!(matches!(parse(&["-R", "3"]), Err(OptionsError::Invalid(_))));
}

/// nccl-tests' post-parse checks: the messages and their order, each disabling what it names.
#[test]
fn post_parse_messages_disable_like_upstream() {
    let notices = |args: &[&str]| parse(args).unwrap().notices;
    let p = parse(&["-I", "1", "-G", "2", "-z", "3"]).unwrap();
    assert_eq!(
        p.notices,
        [
            "per-iteration timing (-I) is incompatible with CUDA graph mode (-G). Disabling.",
            "blocking mode (-z 3) is incompatible with CUDA graph mode (-G). Disabling.",
        ]
    );
    assert!(!p.options.per_iter);
    assert_eq!(
        (p.options.blocking, p.options.graph.launches()),
        (Blocking::Off, Some(2))
    );
    assert_eq!(
        notices(&["-I", "2"]),
        ["per-iteration timing (-I) only supports 0=off or 1=on. Disabling."]
    );
    assert_eq!(
        notices(&["-I", "1", "-K", "20"]),
        ["per-iteration skip (-K) must be between 0 and 19. Disabling."]
    );
    assert_eq!(
        notices(&["-K", "-1", "-n", "5"]),
        ["per-iteration skip (-K) must be between 0 and 4. Disabling."]
    );
    let p = parse(&["-K", "2"]).unwrap();
    assert_eq!(
        p.notices,
        ["per-iteration skip (-K) requires per-iteration timing (-I 1). Disabling."]
    );
    assert_eq!(p.options.per_iter_skip, 0);
    assert_eq!(
        notices(&["-V", "0"]),
        [
            "device_cta_count (-V) must be positive and less than 128, got 0. Using default value 16."
        ]
    );
    let p = parse(&["-V", "129"]).unwrap();
    assert_eq!(p.options.device_cta_count, Some(16));
    assert_eq!(
        parse(&["-V", "128"]).unwrap().options.device_cta_count,
        Some(128)
    );
    assert!(notices(&["-I", "1", "-K", "19", "-G", "0"]).is_empty());
}

#[test]
fn device_implementations() {
    let msg = |args: &[&str]| match parse(args) {
        Err(OptionsError::Invalid(m)) => (255, m),
        Err(OptionsError::Unsupported(m)) => (5, m),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        msg(&["-D", "1"]),
        (
            255,
            "device implementation (-D > 0) requires enabling symmetric memory registration (-R 2)"
                .to_string()
        )
    );
    // The size check comes first.
    assert!(
        msg(&["-D", "1", "-b", "2M", "-e", "1M"])
            .1
            .starts_with("invalid sizes")
    );
    let (code, text) = msg(&["-D", "2", "-R", "2"]);
    assert_eq!(code, 5);
    assert!(text.contains("device-API implementations"), "{text}");
    assert_eq!(parse(&["-D", "0"]).unwrap().options.device_impl, Some(0));
    assert!(matches!(
        parse(&["-G", "1", "-y", "1"]),
        Err(OptionsError::Invalid(_))
    ));
    assert!(parse(&["-G", "0", "-y", "1"]).is_ok());
}

#[test]
fn types_ops_roots() {
    let p = parse(&["-d", "all", "-o", "all", "-r", "-1"])
        .unwrap()
        .options;
    assert_eq!(p.types.len(), 12);
    assert!(p.all_types);
    assert_eq!(p.ops, RedOp::ALL.to_vec());
    assert_eq!(p.roots, Roots::All);
    assert_eq!(parse(&["-r", "all"]).unwrap().options.roots, Roots::All);
    assert_eq!(parse(&["-r", "3"]).unwrap().options.roots, Roots::One(3));
    assert_eq!(
        parse(&["-d", "bfloat16"]).unwrap().options.types,
        vec![DataType::Bfloat16]
    );
}

#[test]
fn output_file_names_and_gpu_limits() {
    let invalid = |args: &[&str]| matches!(parse(args), Err(OptionsError::Invalid(_)));
    assert!(invalid(&["-J", ""]));
    assert!(invalid(&["-J", "out.txt"]));
    assert!(invalid(&["-J", "json"]));
    assert_eq!(
        parse(&["-J", "r.JSON"]).unwrap().options.output_file,
        Some(OutputFile {
            path: PathBuf::from("r.JSON"),
            format: OutputFormat::Json
        })
    );
    assert_eq!(OutputFormat::of("out.CSV"), Some(OutputFormat::Csv));
    assert_eq!(OutputFormat::of("out.json"), Some(OutputFormat::Json));
    assert_eq!(OutputFormat::of("csv"), None);
    assert_eq!(OutputFormat::of("é.json"), Some(OutputFormat::Json));
    assert_eq!(
        OutputFormat::of("/tmp/RESULTS.JSON"),
        Some(OutputFormat::Json)
    );
    assert_eq!(OutputFormat::of("out.json5"), None);
    assert_eq!(OutputFormat::of("é"), None);
    // The report's formats with a file-name ending are exactly the ones a run writes.
    let mut writers: Vec<_> = OutputFormat::ALL.map(|f| f.format().name()).to_vec();
    let mut files: Vec<_> = crate::report::formats::file_formats()
        .iter()
        .map(|f| f.name())
        .collect();
    writers.sort_unstable();
    files.sort_unstable();
    assert_eq!(writers, files);
    let message = |args: &[&str]| match parse(args) {
        Err(OptionsError::Invalid(m)) => m,
        _ => panic!("{args:?} is not invalid"),
    };
    assert_eq!(
        message(&["-J", ""]),
        "-J (--output_file) needs a file name ending in .json or .csv"
    );
    assert_eq!(
        message(&["-J", "out.txt"]),
        "-J (--output_file) 'out.txt': only .json and .csv output are supported; name the file \
         <name>.json or <name>.csv"
    );
    assert!(parse(&["-J", "/tmp/r.csv"]).is_ok());
    let unsupported = |args: &[&str]| matches!(parse(args), Err(OptionsError::Unsupported(_)));
    assert!(unsupported(&["-g", "2000000"]));
    assert!(unsupported(&["-t", "2147483647", "-g", "2147483647"]));
    // Large but below the limit: left to the GPU count check (exit 5 there).
    assert!(parse(&["-g", "100000"]).is_ok());
}

#[test]
fn dry_run_flag_is_kept() {
    assert!(parse(&["--dry-run"]).unwrap().options.dry_run);
    assert!(!parse(&[]).unwrap().options.dry_run);
}

#[test]
fn zero_bytes_with_additive_step_and_single_size() {
    let p = parse(&["-b", "0", "-e", "1M", "-i", "256K"])
        .unwrap()
        .options;
    assert_eq!((p.min_bytes, p.step_bytes), (0, 262144));
    assert!(parse(&["-b", "1M", "-e", "1M", "-i", "0"]).is_ok());
    assert_eq!(parse(&["-N", "0"]).unwrap().options.run_cycles, None);
}

/// The locate options of a command line that must parse and give `--locate`.
fn locate_of(args: &[&str]) -> super::LocateOptions {
    parse(args)
        .unwrap()
        .options
        .locate
        .expect("--locate options")
}

#[test]
fn locate_options_and_their_defaults() {
    assert_eq!(parse(&[]).unwrap().options.locate, None);
    let l = locate_of(&["--locate", "quick", "-e", "1G"]);
    assert_eq!(l.schedule, crate::locate::schedule::Kind::Quick);
    assert_eq!((l.size, l.iters, l.seed, l.lines), (None, 20, 1, 64));
    assert_eq!(l.deadline, std::time::Duration::from_secs(60));
    assert_eq!(l.window, 1.0);
    assert_eq!(l.thresholds, crate::locate::stats::Thresholds::default());
    assert_eq!(l.json, None);
    assert_eq!(l.size_for(1 << 30), 256 << 20);
    assert_eq!(l.size_for(1 << 20), 1 << 20);
    let l = locate_of(&[
        "--locate=per-node",
        "-e",
        "64M",
        "--locate-size",
        "4M",
        "--locate-iters",
        "5",
        "--locate-deadline",
        "2.5",
        "--locate-window",
        "1.5",
        "--locate-threshold",
        "3",
        "--locate-min-drop",
        "0.3",
        "--locate-min-busbw",
        "100",
        "--locate-seed",
        "7",
        "--locate-lines",
        "8",
        "--locate-json",
        "loc.json",
    ]);
    assert_eq!(l.schedule, crate::locate::schedule::Kind::Nodes);
    assert_eq!((l.size, l.iters, l.seed, l.lines), (Some(4 << 20), 5, 7, 8));
    assert_eq!(l.deadline, std::time::Duration::from_millis(2500));
    assert_eq!(l.window, 1.5);
    assert_eq!(
        (
            l.thresholds.mad_k,
            l.thresholds.min_drop,
            l.thresholds.min_busbw
        ),
        (3.0, 0.3, Some(100.0))
    );
    assert_eq!(l.json.as_deref(), Some(std::path::Path::new("loc.json")));
    assert_eq!(l.size_for(1 << 30), 4 << 20);
    // A short deadline, the window not given: half the deadline.
    let l = locate_of(&["--locate", "full", "--locate-deadline", "1"]);
    assert_eq!(l.window, 0.5);
    let l = locate_of(&["--locate", "full", "--locate-window", "0"]);
    assert_eq!(l.window, 0.0);
}

#[test]
fn locate_options_are_refused_when_they_cannot_do_what_they_say() {
    let invalid = |args: &[&str], text: &str| match parse(args) {
        Err(OptionsError::Invalid(m)) => assert!(m.contains(text), "{args:?}: {m}"),
        other => panic!("{args:?}: {other:?}"),
    };
    invalid(&["--locate", "pairs"], "unknown locate schedule 'pairs'");
    invalid(
        &["--locate-json", "x.json"],
        "--locate-json needs --locate SCHEDULE",
    );
    invalid(&["--locate-iters", "3"], "--locate-iters needs --locate");
    invalid(
        &["--locate", "full", "--locate-iters", "0"],
        "must be at least 1",
    );
    invalid(
        &["--locate", "full", "--locate-deadline", "0"],
        "invalid value 0 for --locate-deadline",
    );
    invalid(
        &["--locate", "full", "--locate-deadline", "abc"],
        "not a number",
    );
    invalid(
        &["--locate", "full", "--locate-deadline", "inf"],
        "not a number",
    );
    invalid(
        &["--locate", "full", "--locate-min-drop", "1"],
        "--locate-min-drop 1",
    );
    invalid(
        &["--locate", "full", "--locate-threshold", "-1"],
        "--locate-threshold -1",
    );
    invalid(
        &["--locate", "full", "--locate-min-busbw", "-5"],
        "--locate-min-busbw -5",
    );
    invalid(
        &["--locate", "full", "--locate-size", "0"],
        "at least 1 byte",
    );
    invalid(&["--locate", "full", "--locate-size", "1G"], "above -e");
    invalid(
        &["--locate", "full", "--locate-window", "-1"],
        "invalid value -1 for --locate-window",
    );
    invalid(
        &["--locate", "full", "--locate-window", "nan"],
        "not a number",
    );
    invalid(
        &[
            "--locate",
            "full",
            "--locate-window",
            "5",
            "--locate-deadline",
            "5",
        ],
        "below --locate-deadline (5 s)",
    );
    invalid(&["--locate-window", "1"], "--locate-window needs --locate");
    invalid(
        &["--locate", "full", "--locate-json", ""],
        "needs a file name",
    );
    // Several GPUs per process: not implemented (exit 5), said in one line.
    for args in [
        ["--locate", "quick", "-g", "2"],
        ["--locate", "quick", "-t", "2"],
    ] {
        match parse(&args) {
            Err(OptionsError::Unsupported(m)) => {
                assert!(
                    m.contains("one GPU per process") && !m.contains('\n'),
                    "{m}"
                )
            }
            other => panic!("{args:?}: {other:?}"),
        }
    }
}

#[test]
fn stop_when_sure_takes_a_percentage_and_only_the_plain_loop() {
    assert_eq!(parse(&[]).unwrap().options.stop_when_sure, None);
    assert_eq!(
        parse(&["--stop-when-sure", "0.5"])
            .unwrap()
            .options
            .stop_when_sure,
        Some(0.5)
    );
    for bad in ["0", "-1", "51", "nan", "x"] {
        assert!(
            matches!(
                parse(&["--stop-when-sure", bad]),
                Err(OptionsError::Invalid(_))
            ),
            "{bad}"
        );
    }
    for (with, says) in [
        (&["-z", "1"][..], "-z (--blocking) other than 0"),
        (&["-G", "1"][..], "-G (--cudagraph)"),
        (&["-I", "1"][..], "-I 1 (--per_iter_timing)"),
    ] {
        let mut args = vec!["--stop-when-sure", "1"];
        args.extend_from_slice(with);
        let Err(OptionsError::Invalid(m)) = parse(&args) else {
            panic!("{with:?} was accepted")
        };
        assert!(
            m.ends_with(&format!(
                "it does not combine with {says}; drop one of them"
            )),
            "{m}"
        );
    }
}

#[test]
fn a_baseline_and_allowing_unjudged_belong_to_health() {
    let p = parse(&[
        "--health",
        "--baseline",
        "site.baseline",
        "--health-allow-unjudged",
    ])
    .unwrap();
    let h = p.options.health.expect("--health");
    assert_eq!(
        h.baseline.as_deref(),
        Some(std::path::Path::new("site.baseline"))
    );
    assert!(h.allow_unjudged);
    let h = parse(&["--health"])
        .unwrap()
        .options
        .health
        .expect("--health");
    assert_eq!((h.baseline, h.allow_unjudged), (None, false));
    for (args, says) in [
        (&["--baseline", "b"][..], "--baseline needs --health"),
        (
            &["--health-allow-unjudged"][..],
            "--health-allow-unjudged needs --health",
        ),
        (
            &["--health", "--baseline", ""][..],
            "--baseline needs a file name",
        ),
    ] {
        let e = format!("{:?}", parse(args).err());
        assert!(e.contains(says), "{args:?}: {e}");
    }
}
