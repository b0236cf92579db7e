//! `nccl-perf plot`: bandwidth or time against message size, several runs overlaid.
//!
//! The x axis is the message size on a log2 scale (ticks at powers of two, labelled in B, KiB,
//! MiB, GiB); the y axis is linear (or log10 with `--log-y`). Each run gets a colour; the
//! out-of-place half is a solid line with filled circles, the in-place half a dashed line with
//! hollow triangles. Rows of size 0 cannot sit on a log axis and are left out, as are values
//! that are not finite (and non-positive values on a log y axis).

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use super::error::ToolError;
use super::metric::{Half, Metric};
use nccl_perf_report::run::Run;

/// What to draw and where.
#[derive(Debug, Clone)]
pub struct PlotOptions {
    /// Output file; `.svg` or `.png`.
    pub output: String,
    /// The quantity on the y axis.
    pub metric: Metric,
    /// Which halves to draw.
    pub half: Half,
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
    let series = build_series(runs, options);
    let mut notes = Vec::new();
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
    // The drawing backends report a missing folder as a nested error chain: find it first.
    std::fs::File::create(out).map_err(|e| drawing(format!("cannot create the image: {e}")))?;
    if lower.ends_with(".svg") {
        let root = SVGBackend::new(out, options.size).into_drawing_area();
        draw(&root, &series, options)?;
        root.present().map_err(|e| drawing(e.to_string()))?;
    } else if lower.ends_with(".png") {
        let root = BitMapBackend::new(out, options.size).into_drawing_area();
        draw(&root, &series, options)?;
        root.present().map_err(|e| drawing(e.to_string()))?;
    } else {
        return Err(not_an_image());
    }
    Ok(notes)
}

/// One series per run, half and (type, op, root) combination present in the run.
fn build_series(runs: &[Run], options: &PlotOptions) -> Vec<Series> {
    let mut series = Vec::new();
    let programs_differ = runs.iter().any(|r| r.info.program != runs[0].info.program);
    for (i, run) in runs.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let mut combos: Vec<(String, String, i64)> = Vec::new();
        for r in &run.rows {
            let key = (r.dtype.clone(), r.op.clone(), r.root);
            if !combos.contains(&key) {
                combos.push(key);
            }
        }
        for key in &combos {
            let mut label = run.label();
            if programs_differ {
                label += &format!(" {}", run.info.program.trim_end_matches("_perf"));
            }
            if combos.len() > 1 {
                label += &format!(" {} {} root {}", key.0, key.1, key.2);
            }
            for in_place in [false, true] {
                if !options.half.includes(in_place) {
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
            nccl_perf_report::format::c_g(v)
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
    format!("{} {}", nccl_perf_report::format::c_g(value), units[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_binary_units() {
        assert_eq!(human_size(3.0), "8 B");
        assert_eq!(human_size(10.0), "1 KiB");
        assert_eq!(human_size(23.0), "8 MiB");
        assert_eq!(human_size(33.0), "8 GiB");
    }
}
