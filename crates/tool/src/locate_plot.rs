//! Pictures of a locate record: the pair matrix as a heatmap (pair schedules) beside one bar per
//! node (its score) or, for the nodes and rails schedules, per node or rail of the first round.
//! Node names on both axes of the heatmap and under the bars (every k-th when they would touch),
//! a colour scale under the heatmap ([`scale`]), a key under the bars, and a title with the
//! collective, size and the job's busbw when the record has them. Above 128 nodes each heatmap
//! cell is the worst pair of a block of nodes, so one slow pair still shows.

mod labels;
mod scale;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

use scale::Cell;

use nccl_perf_locate::json::LocateJson;
use nccl_perf_locate::round::{Role, Subject};
use nccl_perf_locate::seam::GroupOutcome;
use nccl_perf_locate::stats::upper_median;
use nccl_perf_locate::verdict::Culprit;

/// Most heatmap cells per side; larger matrices are drawn in blocks.
const MAX_CELLS: usize = 128;

/// One bar: a label, a ratio (0 for hung) and whether it is a named culprit.
#[derive(Debug, Clone, PartialEq)]
struct Bar {
    label: String,
    ratio: f64,
    named: bool,
}

/// Why a picture was not drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// An image name that is neither `.svg` nor `.png`.
    #[error("{0}: the output name must end in .svg or .png")]
    Name(String),
    /// A record without a measured round.
    #[error("nothing to plot: the record has no measured round")]
    Empty,
    /// The image file cannot be created.
    #[error("{path}: cannot create the image: {source}")]
    Create {
        /// The image file.
        path: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// The drawing library failed while drawing.
    #[error("plot: {0}")]
    Draw(String),
    /// The drawing library failed while writing the image.
    #[error("{path}: {message}")]
    Write {
        /// The image file.
        path: String,
        /// What the drawing library said.
        message: String,
    },
}

/// Draws `doc` into `output` (`.svg` or `.png`) of `size` pixels; notes for stderr.
pub fn plot(doc: &LocateJson, output: &str, size: (u32, u32)) -> Result<Vec<String>, PlotError> {
    let lower = output.to_ascii_lowercase();
    if !(lower.ends_with(".svg") || lower.ends_with(".png")) {
        return Err(PlotError::Name(output.to_string()));
    }
    let domain = labels::common_domain(doc.nodes.iter().map(|n| n.host.as_str()));
    let heat = heatmap(doc, &domain);
    let bars = bars(doc, &domain);
    if heat.cells.is_empty() && bars.is_empty() {
        return Err(PlotError::Empty);
    }
    let mut notes = Vec::new();
    if heat.block > 1 {
        notes.push(format!(
            "{} nodes: each heatmap cell is the worst pair of {block}x{block} nodes",
            doc.nodes.len(),
            block = heat.block
        ));
    }
    let _ =
        plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular());
    // Drawn into a private folder beside the image and renamed over it (output_file's rules).
    let create = |source| PlotError::Create {
        path: output.to_string(),
        source,
    };
    let staged = nccl_perf_report::output_file::Staged::new(Path::new(output)).map_err(create)?;
    let file = staged.path().to_path_buf();
    let written = |e: &dyn std::fmt::Display| PlotError::Write {
        path: output.to_string(),
        message: e.to_string(),
    };
    let picture = Picture {
        title: format!(
            "locate: {} schedule, {} nodes, {} suspect{}",
            doc.schedule.name(),
            doc.nodes.len(),
            doc.verdicts.len(),
            if doc.verdicts.len() == 1 { "" } else { "s" }
        ),
        detail: detail(doc),
        heat,
        bars,
        drop: doc.thresholds.min_drop,
        scores: doc.node_scores.is_some(),
        unit: bar_unit(doc),
    };
    if lower.ends_with(".svg") {
        let root = SVGBackend::new(&file, size).into_drawing_area();
        draw(&root, &picture)?;
        root.present().map_err(|e| written(&e))?;
    } else {
        let root = BitMapBackend::new(&file, size).into_drawing_area();
        draw(&root, &picture)?;
        root.present().map_err(|e| written(&e))?;
    }
    staged.commit().map_err(create)?;
    Ok(notes)
}

/// What one bar stands for: a node (scores, or the nodes schedule), a rail, or a group.
fn bar_unit(doc: &LocateJson) -> &'static str {
    let first = doc
        .rounds
        .first()
        .and_then(|r| r.groups.iter().find(|g| g.role == Role::Primary));
    match first.map(|g| &g.subject) {
        _ if doc.node_scores.is_some() => "node",
        Some(Subject::Node(_)) => "node",
        Some(Subject::Rail(_)) => "rail",
        _ => "group",
    }
}

/// What one picture shows.
struct Picture {
    /// The first line of the title.
    title: String,
    /// The second: collective, size and the job's busbw, as far as the record has them.
    detail: Option<String>,
    heat: Heat,
    bars: Vec<Bar>,
    /// The record's minimum drop.
    drop: f64,
    /// Whether the bars are node scores (pair schedules) rather than the first round.
    scores: bool,
    /// What one bar stands for: `node`, `rail` or `group`.
    unit: &'static str,
}

/// The heatmap: `side × side` cells, row-major; empty without pairs.
struct Heat {
    cells: Vec<Cell>,
    /// Nodes per row and column (1 up to [`MAX_CELLS`] nodes).
    block: usize,
    /// One label per row (the block's first node).
    names: Vec<String>,
    /// The median pair, GB/s (1× on the colour scale).
    median: f64,
}

impl Heat {
    fn side(&self) -> usize {
        self.names.len()
    }
}

/// The title's second line: `all_reduce, 256 MiB of float per group; job busbw 191.82 GB/s =
/// 0.53x the median pair (361.13 GB/s)`, from what the record has.
fn detail(doc: &LocateJson) -> Option<String> {
    let mut parts = Vec::new();
    let what = match (&doc.collective, doc.bytes, &doc.datatype) {
        (Some(c), Some(b), Some(t)) => Some(format!("{c}, {} of {t} per group", labels::size(b))),
        (Some(c), Some(b), None) => Some(format!("{c}, {} per group", labels::size(b))),
        (Some(c), None, _) => Some(c.clone()),
        (None, Some(b), _) => Some(format!("{} per group", labels::size(b))),
        (None, None, _) => None,
    };
    parts.extend(what.map(|w| labels::clean_line(&w)));
    if let Some(job) = &doc.job {
        parts.push(format!(
            "job busbw {:.2} GB/s = {:.2}\u{d7} the median pair ({:.2} GB/s)",
            job.job_busbw, job.ratio, job.pairs_busbw
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The heatmap of the pair matrix, names without `domain`; no cells without pairs.
fn heatmap(doc: &LocateJson, domain: &str) -> Heat {
    let n = doc.nodes.len();
    let none = Heat {
        cells: Vec::new(),
        block: 1,
        names: Vec::new(),
        median: 0.0,
    };
    let Some(matrix) = &doc.pair_matrix else {
        return none;
    };
    let values: Vec<f64> = matrix.iter().flatten().flatten().copied().collect();
    let Some(median) = upper_median(&values).filter(|m| *m > 0.0) else {
        return none;
    };
    let mut full = vec![Cell::None; n * n];
    for (a, row) in matrix.iter().enumerate().take(n) {
        for (b, v) in row.iter().enumerate().take(n) {
            if let Some(v) = v {
                full[a * n + b] = Cell::Ratio(v / median);
            }
        }
    }
    for r in &doc.rounds {
        for g in r.groups.iter().filter(|g| g.role == Role::Primary) {
            if let (Subject::Pair(a, b), GroupOutcome::Hung | GroupOutcome::Failed { .. }) =
                (&g.subject, &g.outcome)
                && *a < n
                && *b < n
            {
                full[a * n + b] = Cell::Broken;
                full[b * n + a] = Cell::Broken;
            }
        }
    }
    let block = n.div_ceil(MAX_CELLS).max(1);
    let side = n.div_ceil(block);
    let mut cells = vec![Cell::None; side * side];
    for a in 0..n {
        for b in 0..n {
            let k = (a / block) * side + b / block;
            cells[k] = cells[k].worst(full[a * n + b]);
        }
    }
    let names = (0..side)
        .map(|i| labels::clean(&doc.nodes[i * block].host, domain))
        .collect();
    Heat {
        cells,
        block,
        names,
        median,
    }
}

/// Node scores (pair schedules), else the first round's primary groups; labels without `domain`.
fn bars(doc: &LocateJson, domain: &str) -> Vec<Bar> {
    let culprits: Vec<&Culprit> = doc.verdicts.iter().map(|v| &v.verdict.culprit).collect();
    let node_named = |n: usize| {
        culprits.iter().any(|c| match c {
            Culprit::Node { node }
            | Culprit::Gpus { node, .. }
            | Culprit::NodeOrLink { node, .. } => *node == n,
            _ => false,
        })
    };
    if let Some(scores) = &doc.node_scores {
        return scores
            .iter()
            .enumerate()
            .filter_map(|(n, s)| {
                Some(Bar {
                    label: labels::clean(&doc.nodes.get(n)?.host, domain),
                    ratio: (*s)?,
                    named: node_named(n),
                })
            })
            .collect();
    }
    let Some(first) = doc.rounds.first() else {
        return Vec::new();
    };
    first
        .groups
        .iter()
        .filter(|g| g.role == Role::Primary)
        .map(|g| Bar {
            label: labels::clean(&g.description, domain),
            ratio: g.ratio.unwrap_or(0.0),
            named: match g.subject {
                Subject::Node(n) => node_named(n),
                Subject::Rail(r) => culprits.iter().any(|c| match c {
                    Culprit::Rail { rail } | Culprit::RailNodes { rail, .. } => *rail == r,
                    Culprit::Gpus { gpus, .. } => gpus.contains(&r),
                    _ => false,
                }),
                _ => false,
            },
        })
        .collect()
}

/// Label text on the axes: its size in pixels and the room one label needs across.
const LABEL_PX: u32 = 11;
const LINE_PX: f64 = 13.0;
/// Longest label area, pixels (a label of [`labels::MAX_CHARS`] fits).
const MAX_LABEL_W: i32 = 120;

/// Text of `size` pixels anchored at `h`, `v`.
fn font(size: u32, h: HPos, v: VPos) -> TextStyle<'static> {
    ("sans-serif", size)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(h, v))
}

/// Pixels the widest of `names` needs, with a little room, at most [`MAX_LABEL_W`].
fn label_width<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, names: &[String]) -> i32 {
    let style = font(LABEL_PX, HPos::Left, VPos::Top);
    let widest = names
        .iter()
        .filter_map(|n| area.estimate_text_size(n, &style).ok())
        .map(|(w, _)| i32::try_from(w).unwrap_or(MAX_LABEL_W))
        .max()
        .unwrap_or(0);
    (widest + 6).min(MAX_LABEL_W)
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, p: &Picture) -> Result<(), PlotError> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| PlotError::Draw(e.to_string());
    root.fill(&WHITE).map_err(err)?;
    let (w, _) = root.dim_in_pixel();
    let centre = i32::try_from(w / 2).unwrap_or(0);
    let band = if p.detail.is_some() { 54 } else { 36 };
    let (top, body) = root.split_vertically(band);
    top.draw(&Text::new(
        p.title.clone(),
        (centre, 6),
        font(22, HPos::Center, VPos::Top),
    ))
    .map_err(err)?;
    if let Some(detail) = &p.detail {
        top.draw(&Text::new(
            detail.clone(),
            (centre, 34),
            font(14, HPos::Center, VPos::Top),
        ))
        .map_err(err)?;
    }
    let (left, right) = match (p.heat.cells.is_empty(), p.bars.is_empty()) {
        (false, false) => {
            let (l, r) = body.split_horizontally(w * 11 / 20);
            (Some(l), Some(r))
        }
        (false, true) => (Some(body), None),
        (true, _) => (None, Some(body)),
    };
    if let Some(area) = left {
        draw_heatmap(&area, p).map_err(err)?;
    }
    if let Some(area) = right {
        draw_bars(&area, p)?;
    }
    Ok(())
}

/// The heatmap in a square, names on both axes (every k-th when they would touch), the colour
/// scale under it.
fn draw_heatmap<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &Picture,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let heat = &p.heat;
    let (pw, ph) = area.dim_in_pixel();
    let (pw, ph) = (pw as i32, ph as i32);
    let side = heat.side().max(1) as i32;
    let label_w = label_width(area, &heat.names);
    let (margin, caption_h, desc_h) = (10, 24, 20);
    let square = (pw - label_w - 2 * margin)
        .min(ph - caption_h - label_w - desc_h - scale::HEIGHT - margin)
        .max(0);
    let x0 = margin + label_w + (pw - 2 * margin - label_w - square).max(0) / 2;
    let y0 = caption_h;
    area.draw(&Text::new(
        "pairs: busbw / median pair",
        (x0 + square / 2, 2),
        font(16, HPos::Center, VPos::Top),
    ))?;
    let at = |i: i32| i * square / side;
    for (k, &c) in heat.cells.iter().enumerate() {
        let (a, b) = ((k / heat.side()) as i32, (k % heat.side()) as i32);
        area.draw(&Rectangle::new(
            [(x0 + at(b), y0 + at(a)), (x0 + at(b + 1), y0 + at(a + 1))],
            scale::colour(c, p.drop).filled(),
        ))?;
    }
    area.draw(&Rectangle::new(
        [(x0, y0), (x0 + square, y0 + square)],
        scale::LINE.stroke_width(1),
    ))?;
    let k = labels::step(f64::from(square) / f64::from(side), LINE_PX);
    let rotated = font(LABEL_PX, HPos::Right, VPos::Center).transform(FontTransform::Rotate270);
    let shown = if k < heat.side() || heat.side() == 1 {
        heat.side()
    } else {
        0
    };
    for (i, name) in heat.names.iter().enumerate().take(shown).step_by(k) {
        let mid = (at(i as i32) + at(i as i32 + 1)) / 2;
        area.draw(&Text::new(
            name.clone(),
            (x0 - 4, y0 + mid),
            font(LABEL_PX, HPos::Right, VPos::Center),
        ))?;
        area.draw(&Text::new(
            name.clone(),
            (x0 + mid, y0 + square + 4),
            rotated.clone(),
        ))?;
    }
    let unit = if heat.block > 1 { "block" } else { "node" };
    let desc = if heat.block > 1 {
        format!(
            "rows, columns: blocks of {} nodes, each its worst pair, named by its first node; {}",
            heat.block,
            labels::every(k, unit, heat.side())
        )
    } else {
        format!(
            "rows, columns: nodes; {}",
            labels::every(k, unit, heat.side())
        )
    };
    area.draw(&Text::new(
        desc,
        (x0 + square / 2, y0 + square + label_w + 6),
        font(12, HPos::Center, VPos::Top),
    ))?;
    scale::draw_scale(
        area,
        (margin, ph - scale::HEIGHT),
        (pw - 2 * margin).min(420),
        p.drop,
        heat.median,
    )
}

/// One bar per node (or group of the first round), its name under it (every k-th when they
/// would touch), the key under them.
fn draw_bars<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &Picture,
) -> Result<(), PlotError> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| PlotError::Draw(e.to_string());
    let bars = &p.bars;
    let drop = p.drop;
    let (_, ph) = area.dim_in_pixel();
    let (plot_area, key_area) = area.split_vertically(ph.saturating_sub(scale::HEIGHT as u32));
    let names: Vec<String> = bars.iter().map(|b| b.label.clone()).collect();
    let label_w = label_width(area, &names);
    let top = bars.iter().map(|b| b.ratio).fold(1.0f64, f64::max) * 1.1;
    let caption = if p.scores {
        "nodes: median pair / median"
    } else {
        "round 1: busbw / median"
    };
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(caption, ("sans-serif", 16))
        .margin(10)
        .y_label_area_size(44)
        .set_label_area_size(LabelAreaPosition::Bottom, label_w + 24)
        .build_cartesian_2d((0..bars.len()).into_segmented(), 0.0..top)
        .map_err(err)?;
    let (plot_w, _) = chart.plotting_area().dim_in_pixel();
    let k = labels::step(f64::from(plot_w) / bars.len().max(1) as f64, LINE_PX);
    chart
        .configure_mesh()
        .disable_x_mesh()
        // The names are drawn below, thinned; plotters' own would crowd (0 labels overflows).
        .x_labels(1)
        .set_tick_mark_size(LabelAreaPosition::Bottom, 0)
        .x_label_formatter(&|_| String::new())
        .x_desc(labels::every(k, p.unit, bars.len()))
        .label_style(("sans-serif", 12))
        .axis_desc_style(("sans-serif", 12))
        .draw()
        .map_err(err)?;
    // A white outline around each bar keeps neighbours apart.
    let rect = |i: usize, b: &Bar| {
        [
            (SegmentValue::Exact(i), 0.0),
            (SegmentValue::Exact(i + 1), b.ratio.max(0.0)),
        ]
    };
    chart
        .draw_series(bars.iter().enumerate().map(|(i, b)| {
            let c = if b.named {
                scale::SUSPECT
            } else {
                scale::OTHER
            };
            Rectangle::new(rect(i, b), c.filled())
        }))
        .map_err(err)?;
    if plot_w as usize > 3 * bars.len() {
        chart
            .draw_series(
                bars.iter()
                    .enumerate()
                    .map(|(i, b)| Rectangle::new(rect(i, b), WHITE.stroke_width(1))),
            )
            .map_err(err)?;
    }
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![
                (SegmentValue::Exact(0), 1.0 - drop),
                (SegmentValue::Last, 1.0 - drop),
            ],
            scale::LINE.stroke_width(1),
        )))
        .map_err(err)?;
    let (bx, by) = plot_area.get_base_pixel();
    let rotated = font(LABEL_PX, HPos::Right, VPos::Center).transform(FontTransform::Rotate270);
    let shown = if k < bars.len() || bars.len() == 1 {
        bars.len()
    } else {
        0
    };
    for (i, name) in names.iter().enumerate().take(shown).step_by(k) {
        let (x, y) = chart.backend_coord(&(SegmentValue::CenterOf(i), 0.0));
        plot_area
            .draw(&Text::new(
                name.clone(),
                (x - bx, y - by + 5),
                rotated.clone(),
            ))
            .map_err(err)?;
    }
    scale::draw_key(&key_area, (10, 4), drop).map_err(err)
}
