//! What the colours of a locate picture mean: a heatmap cell's colour from its ratio to the
//! median pair, the colour scale drawn under the heatmap and the key drawn under the bars.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One cell of the heatmap.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell {
    /// Not measured.
    None,
    /// busbw as a multiple of the median pair.
    Ratio(f64),
    /// Hung or failed.
    Broken,
}

impl Cell {
    /// The worse of two cells (broken < lower ratio < not measured).
    pub fn worst(self, other: Cell) -> Cell {
        match (self, other) {
            (Cell::Broken, _) | (_, Cell::Broken) => Cell::Broken,
            (Cell::Ratio(a), Cell::Ratio(b)) => Cell::Ratio(a.min(b)),
            (Cell::Ratio(a), Cell::None) | (Cell::None, Cell::Ratio(a)) => Cell::Ratio(a),
            (Cell::None, Cell::None) => Cell::None,
        }
    }
}

/// Cells not measured (the diagonal among them).
const NOT_MEASURED: RGBColor = RGBColor(225, 225, 225);
/// Hung or failed pairs.
const BROKEN: RGBColor = RGBColor(0, 0, 0);
/// Bars of named culprits.
pub const SUSPECT: RGBColor = RGBColor(200, 30, 30);
/// The other bars.
pub const OTHER: RGBColor = RGBColor(31, 119, 180);
/// The line at `1 − min drop` over the bars.
pub const LINE: RGBColor = RGBColor(120, 120, 120);

/// The ratio drawn orange: `1 − 2 × min drop`, kept within 0.05–0.95.
pub fn knee(drop: f64) -> f64 {
    (1.0 - 2.0 * drop).clamp(0.05, 0.95)
}

/// Green at 1× and above, orange at [`knee`], red at 0×; black broken, grey not measured.
pub fn colour(cell: Cell, drop: f64) -> RGBColor {
    match cell {
        Cell::None => NOT_MEASURED,
        Cell::Broken => BROKEN,
        Cell::Ratio(r) => {
            let r = if r.is_nan() { 0.0 } else { r.clamp(0.0, 1.0) };
            let knee = knee(drop);
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

/// Height in pixels of [`draw_scale`] and [`draw_key`].
pub const HEIGHT: i32 = 60;

type Drawn<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// Text of `size` pixels anchored at `h`, `v`.
fn font(size: u32, h: HPos, v: VPos) -> TextStyle<'static> {
    ("sans-serif", size)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(h, v))
}

/// A filled square of 10 pixels at `(x, y)` and its words to the right; the next free `x`.
fn swatch<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    (x, y): (i32, i32),
    colour: RGBColor,
    words: &str,
) -> Result<i32, DrawingAreaErrorKind<DB::ErrorType>> {
    area.draw(&Rectangle::new([(x, y), (x + 10, y + 10)], colour.filled()))?;
    area.draw(&Rectangle::new(
        [(x, y), (x + 10, y + 10)],
        LINE.stroke_width(1),
    ))?;
    let style = font(12, HPos::Left, VPos::Center);
    area.draw(&Text::new(
        words.to_string(),
        (x + 14, y + 5),
        style.clone(),
    ))?;
    let w = area
        .estimate_text_size(words, &style)
        .map_or(0, |(w, _)| w as i32);
    Ok(x + 14 + w + 16)
}

/// The heatmap's colour scale with its top left at `(x, y)`, `width` pixels wide: what 1× is
/// (`median` GB/s), the ratios 0× to 1× with red, orange and green marked, then black and grey.
pub fn draw_scale<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    (x, y): (i32, i32),
    width: i32,
    drop: f64,
    median: f64,
) -> Drawn<DB> {
    area.draw(&Text::new(
        format!("colour: busbw / median pair (1\u{d7} = {median:.2} GB/s)"),
        (x, y),
        font(12, HPos::Left, VPos::Top),
    ))?;
    let (top, bottom) = (y + 16, y + 28);
    let steps = 60;
    let width = width.max(steps);
    for s in 0..steps {
        let (a, b) = (x + s * width / steps, x + (s + 1) * width / steps);
        let r = (f64::from(s) + 0.5) / f64::from(steps);
        let c = colour(Cell::Ratio(r), drop);
        area.draw(&Rectangle::new([(a, top), (b, bottom)], c.filled()))?;
    }
    area.draw(&Rectangle::new(
        [(x, top), (x + width, bottom)],
        LINE.stroke_width(1),
    ))?;
    let knee = knee(drop);
    let ticks = [
        (0.0, "0\u{d7} red".to_string(), HPos::Left),
        (knee, format!("{knee:.2}\u{d7} orange"), HPos::Center),
        (1.0, "\u{2265}1\u{d7} green".to_string(), HPos::Right),
    ];
    for (r, words, h) in ticks {
        let at = x + (r * f64::from(width)).round() as i32;
        area.draw(&PathElement::new(
            vec![(at, bottom), (at, bottom + 3)],
            BLACK.stroke_width(1),
        ))?;
        area.draw(&Text::new(words, (at, bottom + 4), font(12, h, VPos::Top)))?;
    }
    let next = swatch(area, (x, y + 46), BROKEN, "hung or failed")?;
    swatch(area, (next, y + 46), NOT_MEASURED, "not measured")?;
    Ok(())
}

/// The bars' key with its top left at `(x, y)`: red and blue, and the line at `1 − drop`.
pub fn draw_key<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    (x, y): (i32, i32),
    drop: f64,
) -> Drawn<DB> {
    let next = swatch(area, (x, y + 4), SUSPECT, "named suspect")?;
    swatch(area, (next, y + 4), OTHER, "not named")?;
    area.draw(&PathElement::new(
        vec![(x, y + 29), (x + 24, y + 29)],
        LINE.stroke_width(2),
    ))?;
    area.draw(&Text::new(
        format!("{:.2}\u{d7} = 1 \u{2212} min drop ({drop})", 1.0 - drop),
        (x + 30, y + 29),
        font(12, HPos::Left, VPos::Center),
    ))?;
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
        assert_eq!(
            colour(Cell::Ratio(knee(0.15)), 0.15),
            RGBColor(245, 160, 40)
        );
        assert_eq!(colour(Cell::Ratio(1.2), 0.15), RGBColor(60, 170, 80));
        assert_eq!(colour(Cell::Ratio(f64::NAN), 0.15), RGBColor(200, 30, 30));
        assert!((knee(0.15) - 0.7).abs() < 1e-12);
        assert_eq!((knee(0.6), knee(0.0)), (0.05, 0.95));
    }
}
