//! `nccl-perf plot`: bandwidth or time against message size, several runs overlaid.
//!
//! The x axis is the message size on a log2 scale (ticks at powers of two, labelled in B, KiB,
//! MiB, GiB); the y axis is linear (or log10 with `--log-y`). Each run gets a colour; the
//! out-of-place half is a solid line with filled circles, the in-place half a dashed line with
//! hollow triangles. Rows of size 0 cannot sit on a log axis and are left out, as are values
//! that are not finite (and non-positive values on a log y axis).
//!
//! Legends name each input by its file stem, with as many parent folders as it takes to tell
//! inputs apart (`a/run`, `b/run`). At one rank the in-place operations are no-ops whose
//! algbw runs to 10^7 GB/s and would flatten every other curve: unless `--half` is given, such
//! a run is drawn with its out-of-place half only, and a note says so. Axis labels use
//! thousands separators instead of exponents.

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use super::error::ToolError;
use super::metric::{Half, Metric};
use nccl_perf_report::health::{self, Check};
use nccl_perf_report::run::Run;

/// What to draw and where.
#[derive(Debug, Clone)]
pub struct PlotOptions {
    /// Output file; `.svg` or `.png`.
    pub output: String,
    /// The quantity on the y axis.
    pub metric: Metric,
    /// Which halves to draw; `None` (no `--half`): both, but the out-of-place half alone for a
    /// run of one rank.
    pub half: Option<Half>,
    /// Image size in pixels.
    pub size: (u32, u32),
    /// log10 y axis.
    pub log_y: bool,
    /// Chart title; a default names the metric.
    pub title: Option<String>,
}

/// One line of the chart.
struct Series {
    label: String,
    colour: RGBColor,
    in_place: bool,
    points: Vec<(f64, f64)>,
}

/// Tableau's ten colours: distinct for the usual handful of runs, readable on white.
const COLOURS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Draws `runs` into `options.output`. Returns notes for stderr (e.g. a metric that is 0
/// everywhere).
pub fn plot(runs: &[Run], options: &PlotOptions) -> Result<Vec<String>, ToolError> {
    let mut notes = Vec::new();
    let series = build_series(runs, options, &mut notes);
    if series.iter().all(|s| s.points.is_empty()) {
        return Err(ToolError::NoData(
            "nothing to plot: no row has a size above 0 and a finite value".into(),
        ));
    }
    if options.metric != Metric::Time && series.iter().all(|s| s.points.iter().all(|p| p.1 == 0.0))
    {
        notes.push(format!(
            "every {} is 0 (one rank has no bus traffic); --metric algbw shows its bandwidth",
            options.metric.name()
        ));
    }
    // Text is drawn with an embedded font, so no system font library is needed.
    let _ =
        plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular());
    let out = options.output.as_str();
    let lower = out.to_ascii_lowercase();
    let not_an_image =
        || ToolError::Usage(format!("{out}: the output name must end in .svg or .png"));
    if !(lower.ends_with(".svg") || lower.ends_with(".png")) {
        return Err(not_an_image());
    }
    let drawing = |message: String| ToolError::Draw {
        path: out.to_string(),
        message,
    };
    // Drawn into a private folder beside the image and renamed over it (output_file's rules);
    // a missing folder or a link, pipe or folder at the name is said here, in one line.
    let cannot = |e: std::io::Error| drawing(format!("cannot create the image: {e}"));
    let staged =
        nccl_perf_report::output_file::Staged::new(std::path::Path::new(out)).map_err(cannot)?;
    let file = staged.path().to_path_buf();
    if lower.ends_with(".svg") {
        let root = SVGBackend::new(&file, options.size).into_drawing_area();
        draw(&root, &series, options)?;
        root.present().map_err(|e| drawing(e.to_string()))?;
    } else if lower.ends_with(".png") {
        let root = BitMapBackend::new(&file, options.size).into_drawing_area();
        draw(&root, &series, options)?;
        root.present().map_err(|e| drawing(e.to_string()))?;
    } else {
        return Err(not_an_image());
    }
    staged.commit().map_err(cannot)?;
    Ok(notes)
}

/// True for a run of one rank: its device lines say so, or (without them) every busbw is 0
/// where algbw is not (all_reduce and the gathers at one rank).
fn one_rank(run: &Run) -> bool {
    match nccl_perf_report::health::ranks(run) {
        Some(n) => n == 1,
        None => {
            run.rows.iter().any(|r| r.out_of_place.algbw > 0.0)
                && run.rows.iter().all(|r| r.out_of_place.busbw == 0.0)
        }
    }
}

/// The legend name of each run: its file stem, with parent folders added until every input
/// that comes from a different file has its own name (`a/run`, `b/run`).
fn labels(runs: &[Run]) -> Vec<String> {
    let parts: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            let path = std::path::Path::new(&r.source.file);
            let mut v: Vec<String> = path
                .parent()
                .map(|p| {
                    p.components()
                        .filter_map(|c| match c {
                            std::path::Component::Normal(s) => Some(s.to_string_lossy().into()),
                            _ => None,
                        })
                        .collect()
                })
                .unwrap_or_default();
            v.push(r.label());
            v
        })
        .collect();
    let name = |p: &[String], depth: usize| p[p.len().saturating_sub(depth)..].join("/");
    let mut out = Vec::with_capacity(runs.len());
    for (i, p) in parts.iter().enumerate() {
        let mut depth = 1;
        loop {
            let mine = name(p, depth);
            let clash = parts.iter().enumerate().any(|(j, q)| {
                j != i && runs[j].source.file != runs[i].source.file && name(q, depth) == mine
            });
            if !clash || depth >= p.len() {
                break;
            }
            depth += 1;
        }
        out.push(name(p, depth));
    }
    out
}

/// What the legend says of a run that cannot be trusted as it is (`problems`: its own): cut short (no footer: a
/// killed job, a cut log) or failed (wrong data, error lines, a FAILED footer); `None` for a
/// sound run.
fn trust_mark(run: &Run, problems: &[health::Problem]) -> Option<&'static str> {
    if problems.is_empty() {
        None
    } else if run.summary.is_none() && !problems.iter().any(|p| p.check == Check::Errors) {
        Some("cut short")
    } else {
        Some("failed")
    }
}

/// One series per run, half and (type, op, root) combination present in the run.
fn build_series(runs: &[Run], options: &PlotOptions, notes: &mut Vec<String>) -> Vec<Series> {
    let mut series = Vec::new();
    let programs_differ = runs.iter().any(|r| r.info.program != runs[0].info.program);
    let names = labels(runs);
    for (i, run) in runs.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let problems = health::problems(run);
        let mark = trust_mark(run, &problems);
        if let (Some(mark), Some(first)) = (mark, problems.first()) {
            notes.push(format!(
                "{}: {first}: drawn as it is, marked '{mark}' in the legend",
                names[i]
            ));
        }
        let half = match options.half {
            Some(h) => h,
            None if one_rank(run) && options.metric != Metric::Time => {
                let top = run
                    .rows
                    .iter()
                    .map(|r| r.in_place.algbw)
                    .filter(|v| v.is_finite())
                    .fold(0.0, f64::max);
                notes.push(format!(
                    "{}: one rank, where the in-place operations are no-ops (algbw up to {} \
                     GB/s): drawing the out-of-place half only (--half both or --half in \
                     draws them)",
                    names[i],
                    readable(top)
                ));
                Half::Out
            }
            None => Half::Both,
        };
        let mut combos: Vec<(String, String, i64)> = Vec::new();
        for r in &run.rows {
            let key = (r.dtype.clone(), r.op.clone(), r.root);
            if !combos.contains(&key) {
                combos.push(key);
            }
        }
        for key in &combos {
            let mut label = names[i].clone();
            if let Some(mark) = mark {
                label += &format!(" ({mark})");
            }
            if programs_differ {
                label += &format!(" {}", run.info.program.trim_end_matches("_perf"));
            }
            if combos.len() > 1 {
                label += &format!(" {} {} root {}", key.0, key.1, key.2);
            }
            for in_place in [false, true] {
                if !half.includes(in_place) {
                    continue;
                }
                let points = run
                    .rows
                    .iter()
                    .filter(|r| {
                        (r.dtype.as_str(), r.op.as_str(), r.root) == (&key.0, &key.1, key.2)
                    })
                    .filter(|r| r.size > 0)
                    .map(|r| {
                        let h = if in_place {
                            &r.in_place
                        } else {
                            &r.out_of_place
                        };
                        ((r.size as f64).log2(), options.metric.of(h))
                    })
                    .filter(|p| p.1.is_finite() && (!options.log_y || p.1 > 0.0))
                    .map(|(x, y)| (x, if options.log_y { y.log10() } else { y }))
                    .collect();
                let half = if in_place { "in-place" } else { "out-of-place" };
                series.push(Series {
                    label: format!("{label} {half}"),
                    colour,
                    in_place,
                    points,
                });
            }
        }
    }
    series
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    series: &[Series],
    options: &PlotOptions,
) -> Result<(), ToolError> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| ToolError::Draw {
        path: options.output.clone(),
        message: e.to_string(),
    };
    let points = series.iter().flat_map(|s| s.points.iter());
    let (mut x_lo, mut x_hi, mut y_lo, mut y_hi) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in points {
        x_lo = x_lo.min(x);
        x_hi = x_hi.max(x);
        y_lo = y_lo.min(y);
        y_hi = y_hi.max(y);
    }
    let (x_lo, x_hi) = (x_lo.floor(), x_hi.ceil().max(x_lo.floor() + 1.0));
    let (y_lo, y_hi) = if options.log_y {
        (y_lo.floor(), y_hi.ceil().max(y_lo.floor() + 1.0))
    } else {
        (0.0f64.min(y_lo), if y_hi > 0.0 { y_hi * 1.08 } else { 1.0 })
    };
    // At most 12 labels and at least one power of two between two of them, so every tick
    // sits on a power of two (plotters steps by 1, 2, 5, 10, 20 ... in log2 units).
    let x_labels = ((x_hi - x_lo) as usize + 1).min(12);

    root.fill(&WHITE).map_err(err)?;
    let title = options
        .title
        .clone()
        .unwrap_or_else(|| format!("{} against message size", options.metric.title()));
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 24))
        .margin(20)
        .x_label_area_size(55)
        .y_label_area_size(80)
        .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
        .map_err(err)?;
    let y_desc = if options.log_y {
        format!("{} (log scale)", options.metric.axis())
    } else {
        options.metric.axis().to_string()
    };
    let log_y = options.log_y;
    chart
        .configure_mesh()
        .x_labels(x_labels)
        .x_desc("Message size (bytes, log2 scale)")
        .y_desc(y_desc)
        .x_label_formatter(&|x| human_size(*x))
        .y_label_formatter(&|y| {
            let v = if log_y { 10f64.powf(*y) } else { *y };
            readable(v)
        })
        .axis_desc_style(("sans-serif", 18))
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(err)?;

    for s in series.iter().filter(|s| !s.points.is_empty()) {
        let colour = s.colour;
        let line = colour.stroke_width(2);
        if s.in_place {
            chart
                .draw_series(DashedLineSeries::new(s.points.iter().copied(), 8, 5, line))
                .map_err(err)?
                .label(&s.label)
                .legend(move |(x, y)| {
                    DashedPathElement::new(vec![(x, y), (x + 24, y)], 6, 3, colour.stroke_width(2))
                });
            chart
                .draw_series(
                    s.points
                        .iter()
                        .map(|&p| TriangleMarker::new(p, 5, colour.stroke_width(1))),
                )
                .map_err(err)?;
        } else {
            chart
                .draw_series(LineSeries::new(s.points.iter().copied(), line))
                .map_err(err)?
                .label(&s.label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 24, y)], colour.stroke_width(2))
                });
            chart
                .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, colour.filled())))
                .map_err(err)?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()
        .map_err(err)?;
    Ok(())
}

/// An axis value without an exponent: `0.25`, `12.5`, `1,500`, `20,000,000`; values below
/// 0.001 keep `%g`.
fn readable(v: f64) -> String {
    if !v.is_finite() || v == 0.0 {
        return nccl_perf_report::numbers::c_g(v);
    }
    let a = v.abs();
    if a < 1e-3 {
        return nccl_perf_report::numbers::c_g(v);
    }
    if a < 1000.0 {
        // Up to four significant digits, trailing zeros dropped.
        let decimals = (3 - a.log10().floor() as i32).clamp(0, 6) as usize;
        let s = format!("{v:.decimals$}");
        let s = if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        };
        return s;
    }
    let whole = format!("{:.0}", a);
    let mut grouped = String::new();
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    if v < 0.0 {
        format!("-{grouped}")
    } else {
        grouped
    }
}

/// `2^x` bytes in binary units: `8 B`, `64 KiB`, `1 MiB`, `8 GiB`.
fn human_size(x: f64) -> String {
    let bytes = 2f64.powf(x);
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{} {}", nccl_perf_report::numbers::c_g(value), units[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_values_without_exponents() {
        assert_eq!(readable(2e7), "20,000,000");
        assert_eq!(readable(1500.0), "1,500");
        assert_eq!(readable(12.5), "12.5");
        assert_eq!(readable(0.25), "0.25");
        assert_eq!(readable(100.0), "100");
        assert_eq!(readable(0.0), "0");
        assert_eq!(readable(-2500.0), "-2,500");
    }

    #[test]
    fn sizes_in_binary_units() {
        assert_eq!(human_size(3.0), "8 B");
        assert_eq!(human_size(10.0), "1 KiB");
        assert_eq!(human_size(23.0), "8 MiB");
        assert_eq!(human_size(33.0), "8 GiB");
    }
}
