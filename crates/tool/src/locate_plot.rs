//! Pictures of a locate record: the pair matrix as a heatmap (pair schedules) beside one bar per
//! node (its score) or, for the nodes and rails schedules, per node or rail of the first round.
//! Colours: green at the median and above, through orange to red at 0× of it; black for hung
//! or failed pairs, grey for pairs not measured. Bars of named culprits are red. Above 128
//! nodes each heatmap cell is the worst pair of a block of nodes, so one slow pair still shows.

use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

use nccl_perf_locate::json::LocateJson;
use nccl_perf_locate::round::{Role, Subject};
use nccl_perf_locate::seam::GroupOutcome;
use nccl_perf_locate::stats::upper_median;
use nccl_perf_locate::verdict::Culprit;

/// Most heatmap cells per side; larger matrices are drawn in blocks.
const MAX_CELLS: usize = 128;

/// One cell of the heatmap.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Cell {
    /// Not measured.
    None,
    /// busbw as a multiple of the median pair.
    Ratio(f64),
    /// Hung or failed.
    Broken,
}

impl Cell {
    /// The worse of two cells (broken < lower ratio < not measured).
    fn worst(self, other: Cell) -> Cell {
        match (self, other) {
            (Cell::Broken, _) | (_, Cell::Broken) => Cell::Broken,
            (Cell::Ratio(a), Cell::Ratio(b)) => Cell::Ratio(a.min(b)),
            (Cell::Ratio(a), Cell::None) | (Cell::None, Cell::Ratio(a)) => Cell::Ratio(a),
            (Cell::None, Cell::None) => Cell::None,
        }
    }
}

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
    let (cells, block) = heatmap(doc);
    let bars = bars(doc);
    if cells.is_empty() && bars.is_empty() {
        return Err(PlotError::Empty);
    }
    let mut notes = Vec::new();
    if block > 1 {
        notes.push(format!(
            "{} nodes: each heatmap cell is the worst pair of {block}x{block} nodes",
            doc.nodes.len()
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
    let title = format!(
        "locate: {} schedule, {} nodes, {} suspect{}",
        doc.schedule.name(),
        doc.nodes.len(),
        doc.verdicts.len(),
        if doc.verdicts.len() == 1 { "" } else { "s" }
    );
    if lower.ends_with(".svg") {
        let root = SVGBackend::new(&file, size).into_drawing_area();
        draw(&root, &title, &cells, block, &bars, doc)?;
        root.present().map_err(|e| written(&e))?;
    } else {
        let root = BitMapBackend::new(&file, size).into_drawing_area();
        draw(&root, &title, &cells, block, &bars, doc)?;
        root.present().map_err(|e| written(&e))?;
    }
    staged.commit().map_err(create)?;
    Ok(notes)
}

/// The heatmap cells (`side × side`, row-major) and the block size; empty without pairs.
fn heatmap(doc: &LocateJson) -> (Vec<Cell>, usize) {
    let n = doc.nodes.len();
    let Some(matrix) = &doc.pair_matrix else {
        return (Vec::new(), 1);
    };
    let values: Vec<f64> = matrix.iter().flatten().flatten().copied().collect();
    let Some(median) = upper_median(&values).filter(|m| *m > 0.0) else {
        return (Vec::new(), 1);
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
    (cells, block)
}

/// Node scores (pair schedules), else the first round's primary groups.
fn bars(doc: &LocateJson) -> Vec<Bar> {
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
                    label: doc.nodes.get(n)?.host.clone(),
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
            label: g.description.clone(),
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

/// Green at 1× and above, orange at `1 − 2 × drop`, red at 0×.
fn colour(cell: Cell, drop: f64) -> RGBColor {
    match cell {
        Cell::None => RGBColor(225, 225, 225),
        Cell::Broken => RGBColor(0, 0, 0),
        Cell::Ratio(r) => {
            let r = r.clamp(0.0, 1.0);
            let knee = (1.0 - 2.0 * drop).clamp(0.05, 0.95);
            let mix = |a: (f64, f64, f64), b: (f64, f64, f64), t: f64| {
                RGBColor(
                    (a.0 + (b.0 - a.0) * t) as u8,
                    (a.1 + (b.1 - a.1) * t) as u8,
                    (a.2 + (b.2 - a.2) * t) as u8,
                )
            };
            let (red, orange, green) = (
                (200.0, 30.0, 30.0),
                (245.0, 160.0, 40.0),
                (60.0, 170.0, 80.0),
            );
            if r < knee {
                mix(red, orange, r / knee)
            } else {
                mix(orange, green, (r - knee) / (1.0 - knee))
            }
        }
    }
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    cells: &[Cell],
    block: usize,
    bars: &[Bar],
    doc: &LocateJson,
) -> Result<(), PlotError> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| PlotError::Draw(e.to_string());
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, ("sans-serif", 24)).map_err(err)?;
    let (w, _) = root.dim_in_pixel();
    let drop = doc.thresholds.min_drop;
    let (left, right) = match (cells.is_empty(), bars.is_empty()) {
        (false, false) => {
            let (l, r) = root.split_horizontally(w * 11 / 20);
            (Some(l), Some(r))
        }
        (false, true) => (Some(root), None),
        (true, _) => (None, Some(root)),
    };
    if let Some(area) = left {
        let side = (cells.len() as f64).sqrt().round() as usize;
        let desc = if block > 1 {
            format!("node block ({block} nodes)")
        } else {
            "node".to_string()
        };
        let mut chart = ChartBuilder::on(&area)
            .caption("pairs: busbw / median pair", ("sans-serif", 18))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(0..side, 0..side)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(format!("{desc} index"))
            .y_desc(format!("{desc} index"))
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 15))
            .draw()
            .map_err(err)?;
        chart
            .draw_series(cells.iter().enumerate().map(|(k, &c)| {
                let (a, b) = (k / side, k % side);
                Rectangle::new([(b, a), (b + 1, a + 1)], colour(c, drop).filled())
            }))
            .map_err(err)?;
    }
    if let Some(area) = right {
        let top = bars.iter().map(|b| b.ratio).fold(1.0f64, f64::max) * 1.1;
        let caption = if doc.node_scores.is_some() {
            "nodes: median pair / median"
        } else {
            "round 1: busbw / median"
        };
        // Names fit under a dozen bars; beyond, indices (as on the heatmap's axes).
        let named_labels = bars.len() <= 12;
        let labels: Vec<String> = bars
            .iter()
            .enumerate()
            .map(|(i, b)| {
                if named_labels {
                    b.label.clone()
                } else {
                    i.to_string()
                }
            })
            .collect();
        let mut chart = ChartBuilder::on(&area)
            .caption(caption, ("sans-serif", 18))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d((0..bars.len()).into_segmented(), 0.0..top)
            .map_err(err)?;
        let desc = match (named_labels, doc.node_scores.is_some()) {
            (true, _) => "",
            (false, true) => "node index",
            (false, false) => "index",
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(bars.len().min(16))
            .x_desc(desc)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                    labels.get(*i).cloned().unwrap_or_default()
                }
                SegmentValue::Last => String::new(),
            })
            .label_style(("sans-serif", 12))
            .axis_desc_style(("sans-serif", 15))
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
                    RGBColor(200, 30, 30)
                } else {
                    RGBColor(31, 119, 180)
                };
                Rectangle::new(rect(i, b), c.filled())
            }))
            .map_err(err)?;
        chart
            .draw_series(
                bars.iter()
                    .enumerate()
                    .map(|(i, b)| Rectangle::new(rect(i, b), WHITE.stroke_width(2))),
            )
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![
                    (SegmentValue::Exact(0), 1.0 - drop),
                    (SegmentValue::Last, 1.0 - drop),
                ],
                RGBColor(120, 120, 120).stroke_width(1),
            )))
            .map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_cells_and_colours() {
        assert_eq!(Cell::Ratio(0.9).worst(Cell::Ratio(0.4)), Cell::Ratio(0.4));
        assert_eq!(Cell::None.worst(Cell::Ratio(1.0)), Cell::Ratio(1.0));
        assert_eq!(Cell::Ratio(1.0).worst(Cell::Broken), Cell::Broken);
        assert_eq!(colour(Cell::Broken, 0.15), RGBColor(0, 0, 0));
        assert_eq!(colour(Cell::Ratio(0.0), 0.15), RGBColor(200, 30, 30));
        assert_eq!(colour(Cell::Ratio(1.2), 0.15), RGBColor(60, 170, 80));
    }
}
