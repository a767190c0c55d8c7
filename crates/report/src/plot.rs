//! Plots (SVG, and PNG for viewing) drawn with plotters. Everything is a
//! [`Chart`] of named lines or a [`BarChart`]; the helpers below turn results
//! into charts: latency percentiles (several runs overlaid), latency
//! histograms, a metric over time, scaling curves, scheduler timelines
//! (live or simulated; several runs' as stacked panels on one time span),
//! and bars with their intervals.
//!
//! Rules every chart follows: the legend sits in its own strip under the
//! plot, so it never covers data; time axes label each tick with its own unit
//! ("250 us", "1.5 ms"); a chart whose values are all zero is refused
//! ([`PlotError::Zero`]) so that callers can say so instead of drawing it.

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::Shift;
use plotters::prelude::*;
use schedlab_core::timeline::{Quantity, Timeline, TimelineError, TimelineTask};
use schedlab_core::{LatencyHistogram, Unit};
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("cannot draw {path}: {reason}")]
    Draw { path: String, reason: String },
    #[error("plot file {0} must end in .svg or .png")]
    Format(String),
    #[error("nothing to plot for {0}: the data has no points")]
    Empty(String),
    #[error("nothing to plot for {0}: every value is zero")]
    Zero(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    Log,
    /// Percentiles as "nines": the value x stands for the percentile
    /// 100·(1 − 10^−x), so p90, p99, p99.9 are evenly spaced (x = 1, 2, 3)
    /// and the tail gets as much room as the body (HdrHistogram's plot).
    Nines,
}

#[derive(Debug, Clone)]
pub struct Line {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

#[derive(Debug, Clone)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_scale: Scale,
    pub y_scale: Scale,
    /// Values on that axis are in this unit; a time unit labels every tick
    /// as a duration, so the axis label should not repeat the unit.
    pub x_unit: Option<Unit>,
    pub y_unit: Option<Unit>,
    /// Draw as a step function (priority levels, histograms).
    pub step: bool,
    /// Mark each point (scaling curves with few points).
    pub markers: bool,
    /// The y values are whole numbers (priority levels): label whole ticks only.
    pub whole_y: bool,
    /// The x values are whole numbers (run numbers): whole ticks only.
    pub whole_x: bool,
    /// Pixels (width, height), legend included.
    pub size: (u32, u32),
    /// Palette position of each line, so that one run keeps its colour
    /// across charts; empty: in order.
    pub colors: Vec<usize>,
    pub lines: Vec<Line>,
}

impl Chart {
    pub fn new(title: &str, x_label: &str, y_label: &str) -> Chart {
        Chart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            x_scale: Scale::Linear,
            y_scale: Scale::Linear,
            x_unit: None,
            y_unit: None,
            step: false,
            markers: false,
            whole_y: false,
            whole_x: false,
            size: SIZE,
            colors: Vec::new(),
            lines: Vec::new(),
        }
    }
}

/// The size of plot files; the HTML report draws smaller ones.
pub const SIZE: (u32, u32) = (1000, 600);

/// DejaVu Sans, embedded so plots need no system font library (and the
/// binary links no fontconfig/freetype: fewer mappings in every process it
/// forks, which the spawn benchmark would otherwise pay for). License:
/// assets/DejaVuSans-LICENSE.txt.
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // The embedded font is valid; a failure here would be a build defect.
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
            .unwrap_or_else(|_| panic!("the embedded DejaVu Sans font is not a valid font"));
    });
}

/// Colour-blind-safe (Okabe-Ito) without its yellow, which vanishes on
/// white. Series past the palette repeat it dashed (lines) or hollow (bars).
const PALETTE: [(u8, u8, u8); 7] =
    [(0, 114, 178), (213, 94, 0), (0, 158, 115), (204, 121, 167), (0, 0, 0), (86, 180, 233), (230, 159, 0)];

fn color(i: usize) -> RGBColor {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    RGBColor(r, g, b)
}

/// Series `i` is drawn dashed (lines) or hollow (bars): the palette repeats.
fn repeated(i: usize) -> bool {
    i >= PALETTE.len()
}

fn err(path: &Path, e: impl std::fmt::Display) -> PlotError {
    PlotError::Draw { path: path.display().to_string(), reason: e.to_string() }
}

/// Draw `chart` to `path` (.svg or .png).
pub fn draw(chart: &Chart, path: &Path) -> Result<(), PlotError> {
    let (xr, yr) = ranges(chart)?;
    match path.extension().and_then(|e| e.to_str()) {
        Some("svg") => render(chart, SVGBackend::new(path, chart.size).into_drawing_area(), xr, yr, path),
        Some("png") => render(chart, BitMapBackend::new(path, chart.size).into_drawing_area(), xr, yr, path),
        _ => Err(PlotError::Format(path.display().to_string())),
    }
}

/// The chart as an SVG document (for embedding in HTML).
pub fn svg_string(chart: &Chart) -> Result<String, PlotError> {
    let (xr, yr) = ranges(chart)?;
    let mut out = String::new();
    render(chart, SVGBackend::with_string(&mut out, chart.size).into_drawing_area(), xr, yr, Path::new("<svg>"))?;
    Ok(out)
}

type Range = (f64, f64);

fn ranges(chart: &Chart) -> Result<(Range, Range), PlotError> {
    let pts: Vec<(f64, f64)> = chart
        .lines
        .iter()
        .flat_map(|l| l.points.iter().copied())
        .filter(|p| p.0.is_finite() && p.1.is_finite())
        .collect();
    if pts.is_empty() {
        return Err(PlotError::Empty(chart.title.clone()));
    }
    if pts.iter().all(|p| p.1 == 0.0) {
        return Err(PlotError::Zero(chart.title.clone()));
    }
    let range = |vals: Vec<f64>, s: Scale| -> Option<Range> {
        // A log axis shows positive values; zeros are drawn on its floor.
        let vals: Vec<f64> = if s == Scale::Log { vals.into_iter().filter(|&v| v > 0.0).collect() } else { vals };
        let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if !lo.is_finite() {
            return None;
        }
        Some(match s {
            Scale::Log => (lo / 1.2, hi * 1.2),
            Scale::Nines => (0.0, hi.max(1.0) * 1.02),
            Scale::Linear => padded(lo, hi),
        })
    };
    let empty = || PlotError::Empty(chart.title.clone());
    Ok((
        range(pts.iter().map(|p| p.0).collect(), chart.x_scale).ok_or_else(empty)?,
        range(pts.iter().map(|p| p.1).collect(), chart.y_scale).ok_or_else(empty)?,
    ))
}

/// A linear axis's range around data from `lo` to `hi`: 5 % spare each
/// side (not below 0 for data that are not), one each side for one value.
fn padded(lo: f64, hi: f64) -> Range {
    if hi == lo {
        return (lo - 1.0, hi + 1.0);
    }
    let pad = (hi - lo) * 0.05;
    (if lo >= 0.0 { (lo - pad).max(0.0) } else { lo - pad }, hi + pad)
}

/// One axis: a linear or logarithmic mapping with tick positions chosen
/// here (1-2-5 steps; decades and their 2s and 5s on a log axis; the
/// standard percentiles on a nines axis), so every axis is labelled even
/// when its range spans less than a decade.
#[derive(Debug, Clone)]
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
    bold: Vec<f64>,
    light: Vec<f64>,
}

impl Axis {
    fn new((lo, hi): Range, scale: Scale, max_ticks: usize, whole: bool) -> Axis {
        match scale {
            Scale::Linear => {
                Axis { lo, hi, log: false, bold: linear_ticks(lo, hi, max_ticks, whole), light: Vec::new() }
            }
            Scale::Log => {
                let (bold, light) = log_ticks(lo, hi, max_ticks);
                Axis { lo, hi, log: true, bold, light }
            }
            Scale::Nines => Axis::nines(hi, max_ticks as f64 * 100.0, 14),
        }
    }

    /// A nines axis `px` pixels wide: p50, p90, p99, ... labelled from the
    /// left while their labels (longer with every nine) fit; those skipped
    /// keep a grid line. No tick at 0 (the minimum): it would crowd p50.
    fn nines(hi: f64, px: f64, font: u32) -> Axis {
        let mut all = vec![2f64.log10()];
        all.extend((1..).map(f64::from).take_while(|&x| x <= hi));
        let (mut bold, mut light) = (Vec::new(), Vec::new());
        let mut free_from = f64::NEG_INFINITY;
        for x in all {
            let centre = x / hi * px;
            let half = nines_label(x).len() as f64 * 0.3 * font as f64 + 4.0;
            if centre - half >= free_from {
                bold.push(x);
                free_from = centre + half;
            } else {
                light.push(x);
            }
        }
        Axis { lo: 0.0, hi, log: false, bold, light }
    }

    /// Points outside a log axis (zeros) go to its floor.
    fn clamp(&self, v: f64) -> f64 {
        if self.log && v < self.lo {
            self.lo
        } else {
            v
        }
    }
}

impl Ranged for Axis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let t = |x: f64| if self.log { x.max(self.lo).ln() } else { x };
        let f = (t(*v) - t(self.lo)) / (t(self.hi) - t(self.lo));
        let f = if f.is_finite() { f } else { 0.5 };
        limit.0 + (f * (limit.1 - limit.0) as f64).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.light.clone()
        } else {
            self.bold.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// Ticks at multiples of a 1-2-5 step, at most about `max` of them.
fn linear_ticks(lo: f64, hi: f64, max: usize, whole: bool) -> Vec<f64> {
    let span = hi - lo;
    // Also catches a NaN span.
    if span.is_nan() || span <= 0.0 {
        return vec![lo];
    }
    let raw = span / max.max(2) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let mut step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|&s| s >= raw).unwrap_or(10.0 * mag);
    if whole {
        step = step.max(1.0).round();
    }
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

/// Log-axis ticks: decades, or 1-2-5 (or 1-1.5-2-3-5-7) in each decade when
/// few decades show; a range within one decade falls back to linear steps.
/// Light grid lines at every integer multiple within a decade.
fn log_ticks(lo: f64, hi: f64, max: usize) -> (Vec<f64>, Vec<f64>) {
    let (d0, d1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let within = |mults: &[f64]| -> Vec<f64> {
        (d0..=d1)
            .flat_map(|d| mults.iter().map(move |m| m * 10f64.powi(d)))
            .filter(|&v| v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9))
            .collect()
    };
    let light = if d1 - d0 <= 6 { within(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]) } else { Vec::new() };
    // The densest set of marks that fits; decades alone, thinned, when even
    // those are too many.
    let sets: [&[f64]; 4] = [&[1.0, 1.5, 2.0, 3.0, 5.0, 7.0], &[1.0, 2.0, 5.0], &[1.0, 3.0], &[1.0]];
    for set in sets {
        let t = within(set);
        if t.len() <= max && t.len() >= 2 {
            return (t, light);
        }
    }
    let decades = within(&[1.0]);
    if decades.len() > max {
        let k = decades.len().div_ceil(max);
        return (decades.into_iter().step_by(k).collect(), light);
    }
    (linear_ticks(lo, hi, max.min(6), false), light)
}

/// "p50", "p99.9".
fn nines_label(x: f64) -> String {
    let pct = 100.0 * (1.0 - 10f64.powf(-x));
    let decimals = (x.round() as i64 - 2).max(0) as usize;
    format!("p{pct:.decimals$}")
}

/// A tick label in `unit`: durations carry their own unit.
fn tick_label(v: f64, unit: Option<Unit>) -> String {
    match unit.and_then(Unit::ns_per_unit) {
        Some(scale) => duration_tick(v * scale),
        None => short_number(v),
    }
}

/// "0", "850 ns", "12.5 us", "1.5 ms", "2 s": the largest unit that keeps
/// the number at 1 or more, at most three significant digits.
fn duration_tick(ns: f64) -> String {
    let a = ns.abs();
    if a < 1e-9 {
        return "0".into();
    }
    let (v, unit) = match a {
        a if a < 1e3 => (ns, "ns"),
        a if a < 1e6 => (ns / 1e3, "us"),
        a if a < 1e9 => (ns / 1e6, "ms"),
        _ => (ns / 1e9, "s"),
    };
    let decimals = if v.abs() >= 100.0 {
        0
    } else if v.abs() >= 10.0 {
        1
    } else {
        2
    };
    let text = format!("{v:.decimals$}");
    let text = if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.') } else { &text };
    format!("{text} {unit}")
}

/// Legend rows under the plot: each entry's (row, x offset in pixels).
fn legend_layout<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    labels: &[String],
    font_size: u32,
) -> (Vec<(u32, i32)>, u32) {
    let width = area.dim_in_pixel().0 as i32;
    let font: TextStyle = ("sans-serif", font_size).into();
    let (mut row, mut x) = (0u32, LEGEND_LEFT);
    let mut out = Vec::new();
    for label in labels {
        let text_w = area.estimate_text_size(label, &font).map(|s| s.0 as i32).unwrap_or(label.len() as i32 * 8);
        let w = LEGEND_MARK + 6 + text_w + 24;
        if x > LEGEND_LEFT && x + w > width - 10 {
            row += 1;
            x = LEGEND_LEFT;
        }
        out.push((row, x));
        x += w;
    }
    let rows = if labels.is_empty() { 0 } else { row + 1 };
    (out, rows)
}

const LEGEND_LEFT: i32 = 20;
const LEGEND_MARK: i32 = 24;

#[derive(Clone, Copy)]
enum Mark {
    Line,
    Bar,
}

/// Splits `root` into the plot and a legend strip under it, big enough for
/// every label, and draws the legend there. `entries`: (label, palette
/// position).
fn with_legend<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    entries: &[(String, usize)],
    mark: Mark,
    fonts: Fonts,
    path: &Path,
) -> Result<DrawingArea<DB, Shift>, PlotError> {
    if entries.is_empty() {
        return Ok(root.clone());
    }
    let labels: Vec<String> = entries.iter().map(|(l, _)| ellipsize(l, 90)).collect();
    let (pos, rows) = legend_layout(root, &labels, fonts.legend);
    let row_h = fonts.legend + 8;
    let h = rows * row_h + 10;
    let (plot, legend) = root.split_vertically(root.dim_in_pixel().1.saturating_sub(h));
    for ((label, &(_, i)), &(row, x)) in labels.iter().zip(entries).zip(&pos) {
        let y = (row * row_h) as i32 + 4;
        let mid = y + row_h as i32 / 2 - 2;
        let c = color(i);
        match mark {
            Mark::Line => {
                let dashes: &[(i32, i32)] =
                    if repeated(i) { &[(0, 6), (9, 15), (18, 24)] } else { &[(0, LEGEND_MARK)] };
                for &(a, b) in dashes {
                    legend
                        .draw(&PathElement::new(vec![(x + a, mid), (x + b, mid)], c.stroke_width(3)))
                        .map_err(|e| err(path, e))?;
                }
            }
            Mark::Bar => {
                let style = if repeated(i) { c.stroke_width(2) } else { c.filled() };
                legend
                    .draw(&Rectangle::new([(x + 4, mid - 6), (x + LEGEND_MARK - 4, mid + 6)], style))
                    .map_err(|e| err(path, e))?
            }
        }
        legend
            .draw(&Text::new(label.clone(), (x + LEGEND_MARK + 6, y + 2), ("sans-serif", fonts.legend)))
            .map_err(|e| err(path, e))?;
    }
    Ok(plot)
}

fn ellipsize(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    s.chars().take(max - 1).chain(['…']).collect()
}

/// Font sizes in pixels. Small charts (the HTML report's) get larger type
/// for their size: a phone shows them at about 60 %.
#[derive(Clone, Copy)]
struct Fonts {
    caption: u32,
    label: u32,
    desc: u32,
    legend: u32,
}

fn fonts(width: u32) -> Fonts {
    if width >= 800 {
        Fonts { caption: 24, label: 14, desc: 16, legend: 14 }
    } else {
        Fonts { caption: 18, label: 14, desc: 14, legend: 14 }
    }
}

/// The characters of a caption that fit across the chart.
fn caption_chars(width: u32, f: Fonts) -> usize {
    (width as f64 / (f.caption as f64 * 0.56)) as usize
}

fn render<DB: DrawingBackend>(
    chart: &Chart,
    root: DrawingArea<DB, Shift>,
    (x0, x1): Range,
    (y0, y1): Range,
    path: &Path,
) -> Result<(), PlotError> {
    register_font();
    root.fill(&WHITE).map_err(|e| err(path, e))?;
    let f = fonts(chart.size.0);
    let palette = |i: usize| chart.colors.get(i).copied().unwrap_or(i);
    let labelled = chart.lines.len() > 1 || chart.lines.first().is_some_and(|l| !l.label.is_empty());
    let entries: Vec<(String, usize)> = if labelled {
        chart.lines.iter().enumerate().map(|(i, l)| (l.label.clone(), palette(i))).collect()
    } else {
        Vec::new()
    };
    let area = with_legend(&root, &entries, Mark::Line, f, path)?;
    plot_lines(chart, &area, (x0, x1), (y0, y1), f, path)?;
    root.present().map_err(|e| err(path, e))?;
    Ok(())
}

/// The chart's caption, axes and lines in `area` (no legend): a whole chart
/// or one panel of a figure.
fn plot_lines<DB: DrawingBackend>(
    chart: &Chart,
    area: &DrawingArea<DB, Shift>,
    (x0, x1): Range,
    (y0, y1): Range,
    f: Fonts,
    path: &Path,
) -> Result<(), PlotError> {
    let palette = |i: usize| chart.colors.get(i).copied().unwrap_or(i);
    let (w, h) = area.dim_in_pixel();
    let x = match chart.x_scale {
        // The plot is the area less the y labels (80) and the margins (30).
        Scale::Nines => Axis::nines(x1, w.saturating_sub(110) as f64, f.label),
        s => Axis::new((x0, x1), s, (w / 100).max(3) as usize, chart.whole_x || whole(chart, |p| p.0)),
    };
    let y = Axis::new((y0, y1), chart.y_scale, (h / 50).max(3) as usize, chart.whole_y || whole(chart, |p| p.1));
    let mut ctx = ChartBuilder::on(area)
        .caption(fit_caption(&chart.title, caption_chars(chart.size.0, f)), ("sans-serif", f.caption))
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(x.clone(), y.clone())
        .map_err(|e| err(path, e))?;
    let x_fmt = |v: &f64| match chart.x_scale {
        Scale::Nines => nines_label(*v),
        _ => tick_label(*v, chart.x_unit),
    };
    let y_fmt = |v: &f64| {
        if chart.whole_y && v.fract().abs() > 1e-9 {
            String::new()
        } else {
            tick_label(*v, chart.y_unit)
        }
    };
    ctx.configure_mesh()
        .x_desc(&chart.x_label)
        .y_desc(&chart.y_label)
        .label_style(("sans-serif", f.label))
        .axis_desc_style(("sans-serif", f.desc))
        .light_line_style(RGBColor(235, 235, 235))
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .draw()
        .map_err(|e| err(path, e))?;
    for (i, line) in chart.lines.iter().enumerate() {
        let i = palette(i);
        let c = color(i);
        let pts: Vec<(f64, f64)> = line
            .points
            .iter()
            .filter(|p| p.0.is_finite() && p.1.is_finite())
            .map(|&(px, py)| (x.clamp(px), y.clamp(py)))
            .collect();
        let pts = if chart.step { step_points(&pts) } else { pts };
        if repeated(i) {
            ctx.draw_series(DashedLineSeries::new(pts.clone(), 8, 5, c.stroke_width(2))).map_err(|e| err(path, e))?;
        } else {
            ctx.draw_series(LineSeries::new(pts.clone(), c.stroke_width(2))).map_err(|e| err(path, e))?;
        }
        if chart.markers {
            ctx.draw_series(line.points.iter().map(|&(px, py)| Circle::new((x.clamp(px), y.clamp(py)), 4, c.filled())))
                .map_err(|e| err(path, e))?;
        }
    }
    Ok(())
}

/// Data that are whole numbers spanning more than one (run numbers, thread
/// counts) get whole ticks: "run 1.5" means nothing.
fn whole(chart: &Chart, coord: impl Fn(&(f64, f64)) -> f64) -> bool {
    let v: Vec<f64> = chart.lines.iter().flat_map(|l| l.points.iter().map(&coord)).filter(|v| v.is_finite()).collect();
    let (lo, hi) = v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
    hi - lo >= 2.0 && v.iter().all(|x| x.fract() == 0.0)
}

/// Group labels without the words every group shares, which go under the
/// axis instead ("pipe loops=20000 placement=same-cpu", "pipe loops=20000
/// placement=cross-cpu": "same-cpu"... under "pipe loops=20000").
fn tidy_groups(groups: &[String], x_label: &str) -> (Vec<String>, String) {
    let unchanged = (groups.to_vec(), x_label.to_string());
    if !x_label.is_empty() || groups.len() < 2 {
        return unchanged;
    }
    let words: Vec<Vec<&str>> = groups.iter().map(|g| g.split_whitespace().collect()).collect();
    let common: Vec<&str> = words[0].iter().copied().filter(|w| words.iter().all(|ws| ws.contains(w))).collect();
    let rest: Vec<String> = words
        .iter()
        .map(|ws| ws.iter().copied().filter(|w| !common.contains(w)).collect::<Vec<_>>().join(" "))
        .collect();
    if common.is_empty() || rest.iter().any(String::is_empty) {
        return unchanged;
    }
    (rest, common.join(" "))
}

fn step_points(p: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(p.len() * 2);
    for (i, &(x, y)) in p.iter().enumerate() {
        if i > 0 {
            out.push((x, p[i - 1].1));
        }
        out.push((x, y));
    }
    out
}

/// A caption that fits in `max` characters: long ones (a benchmark with all
/// its parameters) keep their start and end around an ellipsis; the metric
/// is at the end.
fn fit_caption(title: &str, max: usize) -> String {
    let chars: Vec<char> = title.chars().collect();
    if chars.len() <= max {
        return title.to_string();
    }
    let head = max / 2 - 4;
    let tail = max - head - 1;
    chars[..head].iter().chain(['…'].iter()).chain(chars[chars.len() - tail..].iter()).collect()
}

/// Axis labels: 1500 -> "1500", 15000 -> "15k", 0.25 -> "0.25".
fn short_number(v: f64) -> String {
    let a = v.abs();
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if a >= 1e9 {
        trim(format!("{:.3}", v / 1e9)) + "G"
    } else if a >= 1e6 {
        trim(format!("{:.3}", v / 1e6)) + "M"
    } else if a >= 1e4 {
        trim(format!("{:.3}", v / 1e3)) + "k"
    } else if v == v.round() {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else {
        trim(format!("{v:.3}"))
    }
}

/// Points sampled along each line of a percentile plot.
const PERCENTILE_POINTS: usize = 400;

/// Latency percentiles of each histogram, HdrHistogram style: the x axis is
/// the percentile on a log scale of nines (min, p50, p90, p99, p99.9, ...),
/// so the tail is as visible as the median; the y axis is the latency on a
/// log scale. Each line ends at its maximum, at the percentile of its last
/// sample (x = log10 n), so a larger sample reaches further right.
pub fn latency_percentiles(title: &str, hists: &[(String, &LatencyHistogram)]) -> Chart {
    let mut c = Chart::new(title, "percentile (log scale of nines)", "latency (log scale)");
    c.x_scale = Scale::Nines;
    c.y_scale = Scale::Log;
    c.y_unit = Some(Unit::Nanoseconds);
    for (label, h) in hists {
        let n = h.count();
        let (Some(max), true) = (h.max(), n > 0) else { continue };
        let end = (n as f64).log10();
        let mut points: Vec<(f64, f64)> = (0..PERCENTILE_POINTS)
            .filter_map(|i| {
                let x = end * i as f64 / PERCENTILE_POINTS as f64;
                Some((x, h.quantile(1.0 - 10f64.powf(-x))? as f64))
            })
            .collect();
        points.push((end, max as f64));
        c.lines
            .push(Line { label: format!("{label} (n={})", schedlab_core::units::group_thousands(n as f64)), points });
    }
    c
}

/// Histogram of each distribution as sample counts per log-spaced bin
/// (8 bins per decade).
pub fn latency_histogram(title: &str, hists: &[(String, &LatencyHistogram)]) -> Chart {
    let mut c = Chart::new(title, "latency (log scale)", "samples per bin (log scale)");
    c.x_scale = Scale::Log;
    c.y_scale = Scale::Log;
    c.x_unit = Some(Unit::Nanoseconds);
    c.step = true;
    const PER_DECADE: f64 = 8.0;
    for (label, h) in hists {
        let mut bins: std::collections::BTreeMap<i64, u64> = std::collections::BTreeMap::new();
        for (v, n) in h.buckets() {
            let ns = v.max(1) as f64;
            *bins.entry((ns.log10() * PER_DECADE).floor() as i64).or_default() += n;
        }
        let points = bins.into_iter().map(|(b, n)| (10f64.powf(b as f64 / PER_DECADE), n as f64)).collect();
        c.lines.push(Line { label: label.clone(), points });
    }
    c
}

/// One bar: a value and its 95 % interval, where there is one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bar {
    pub value: f64,
    pub interval: Option<(f64, f64)>,
}

/// Grouped bars: one group per category, one bar per series, each with a
/// whisker for its interval.
#[derive(Debug, Clone)]
pub struct BarChart {
    pub title: String,
    /// What the groups are (empty: nothing under the group labels).
    pub x_label: String,
    pub y_label: String,
    /// Values are in this unit (a time unit labels ticks as durations).
    pub unit: Option<Unit>,
    pub groups: Vec<String>,
    /// (series label, one bar per group; None where the series has none).
    pub series: Vec<(String, Vec<Option<Bar>>)>,
    pub size: (u32, u32),
    /// Palette position of each series; empty: in order.
    pub colors: Vec<usize>,
}

impl BarChart {
    pub fn new(title: &str, y_label: &str, unit: Option<Unit>) -> BarChart {
        BarChart {
            title: title.into(),
            x_label: String::new(),
            y_label: y_label.into(),
            unit,
            groups: Vec::new(),
            series: Vec::new(),
            size: SIZE,
            colors: Vec::new(),
        }
    }

    fn bars(&self) -> impl Iterator<Item = Bar> + '_ {
        self.series.iter().flat_map(|(_, v)| v.iter().flatten().copied()).filter(|b| b.value.is_finite())
    }
}

/// Draw grouped bars to `path` (.svg or .png).
pub fn draw_bars(chart: &BarChart, path: &Path) -> Result<(), PlotError> {
    let yr = bar_range(chart)?;
    match path.extension().and_then(|e| e.to_str()) {
        Some("svg") => render_bars(chart, SVGBackend::new(path, chart.size).into_drawing_area(), yr, path),
        Some("png") => render_bars(chart, BitMapBackend::new(path, chart.size).into_drawing_area(), yr, path),
        _ => Err(PlotError::Format(path.display().to_string())),
    }
}

/// Grouped bars as an SVG document (for embedding in HTML).
pub fn bars_svg_string(chart: &BarChart) -> Result<String, PlotError> {
    let yr = bar_range(chart)?;
    let mut out = String::new();
    render_bars(chart, SVGBackend::with_string(&mut out, chart.size).into_drawing_area(), yr, Path::new("<svg>"))?;
    Ok(out)
}

fn bar_range(chart: &BarChart) -> Result<Range, PlotError> {
    if chart.groups.is_empty() || chart.bars().next().is_none() {
        return Err(PlotError::Empty(chart.title.clone()));
    }
    if chart.bars().all(|b| b.value == 0.0) {
        return Err(PlotError::Zero(chart.title.clone()));
    }
    let ends = chart.bars().flat_map(|b| {
        let (lo, hi) = b.interval.unwrap_or((b.value, b.value));
        [b.value, lo, hi]
    });
    let (lo, hi) = ends.filter(|v| v.is_finite()).fold((0.0f64, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    Ok((lo * 1.1, if hi > 0.0 { hi * 1.1 } else { 1.0 }))
}

fn render_bars<DB: DrawingBackend>(
    chart: &BarChart,
    root: DrawingArea<DB, Shift>,
    (y0, y1): Range,
    path: &Path,
) -> Result<(), PlotError> {
    register_font();
    root.fill(&WHITE).map_err(|e| err(path, e))?;
    let (groups, x_label) = tidy_groups(&chart.groups, &chart.x_label);
    let f = fonts(chart.size.0);
    let palette = |i: usize| chart.colors.get(i).copied().unwrap_or(i);
    let labelled = chart.series.len() > 1 || chart.series.first().is_some_and(|s| !s.0.is_empty());
    let entries: Vec<(String, usize)> = if labelled {
        chart.series.iter().enumerate().map(|(i, s)| (s.0.clone(), palette(i))).collect()
    } else {
        Vec::new()
    };
    let area = with_legend(&root, &entries, Mark::Bar, f, path)?;
    let (w, h) = area.dim_in_pixel();
    let n = chart.groups.len();
    let x =
        Axis { lo: -0.5, hi: n as f64 - 0.5, log: false, bold: (0..n).map(|i| i as f64).collect(), light: Vec::new() };
    let y = Axis::new((y0, y1), Scale::Linear, (h / 50).max(3) as usize, false);
    let mut ctx = ChartBuilder::on(&area)
        .caption(fit_caption(&chart.title, caption_chars(chart.size.0, f)), ("sans-serif", f.caption))
        .margin(15)
        .x_label_area_size(if x_label.is_empty() { 40 } else { 60 })
        .y_label_area_size(80)
        .build_cartesian_2d(x, y)
        .map_err(|e| err(path, e))?;
    // Group labels get an equal share of the width (about 0.6 em a character).
    let label_chars = ((w as usize).saturating_sub(110) / n.max(1) * 10 / (6 * f.label as usize)).max(4);
    let x_fmt = |v: &f64| {
        let i = v.round();
        match groups.get(i as usize) {
            Some(g) if (v - i).abs() < 1e-6 && i >= 0.0 => ellipsize(g, label_chars),
            _ => String::new(),
        }
    };
    let y_fmt = |v: &f64| tick_label(*v, chart.unit);
    ctx.configure_mesh()
        .disable_x_mesh()
        .x_label_formatter(&x_fmt)
        .x_desc(&x_label)
        .y_desc(&chart.y_label)
        .y_label_formatter(&y_fmt)
        .label_style(("sans-serif", f.label))
        .axis_desc_style(("sans-serif", f.desc))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(|e| err(path, e))?;
    let width = 0.8 / chart.series.len().max(1) as f64;
    for (si, (_, bars)) in chart.series.iter().enumerate() {
        let c = color(palette(si));
        let style = if repeated(palette(si)) { c.stroke_width(2) } else { c.filled() };
        for (gi, bar) in bars.iter().enumerate() {
            let Some(bar) = bar.filter(|b| b.value.is_finite()) else { continue };
            let x0 = gi as f64 - 0.4 + si as f64 * width;
            let (left, right) = (x0 + width * 0.05, x0 + width * 0.95);
            ctx.draw_series([Rectangle::new([(left, 0.0), (right, bar.value)], style)]).map_err(|e| err(path, e))?;
            if let Some((lo, hi)) = bar.interval.filter(|(lo, hi)| lo.is_finite() && hi.is_finite()) {
                let mid = (left + right) / 2.0;
                let cap = (right - left) * 0.2;
                let whisker = BLACK.stroke_width(2);
                let lines = [
                    vec![(mid, lo), (mid, hi)],
                    vec![(mid - cap, lo), (mid + cap, lo)],
                    vec![(mid - cap, hi), (mid + cap, hi)],
                ];
                ctx.draw_series(lines.into_iter().map(|l| PathElement::new(l, whisker))).map_err(|e| err(path, e))?;
            }
        }
    }
    root.present().map_err(|e| err(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(base: u64) -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        for i in 0..2000u64 {
            h.record(base + (i * 7919) % (base * 3));
        }
        h
    }

    /// (y of the lowest data point drawn, y of every legend label) in an SVG.
    fn data_bottom_and_legend_tops(svg: &str, legend: &[&str]) -> (f64, Vec<f64>) {
        let mut bottom = f64::NEG_INFINITY;
        // Data lines are 2 px wide (legend marks 3, axes 1).
        for poly in svg.split("<polyline").skip(1).filter(|p| p.contains("stroke-width=\"2\"")) {
            let pts = poly.split("points=\"").nth(1).unwrap().split('"').next().unwrap();
            for p in pts.split_whitespace() {
                let y: f64 = p.split(',').nth(1).unwrap().parse().unwrap();
                bottom = bottom.max(y);
            }
        }
        let tops = legend
            .iter()
            .map(|label| {
                let at = svg.find(&format!(">\n{label}\n</text>")).unwrap_or_else(|| panic!("no legend {label}"));
                let tag = &svg[svg[..at].rfind("<text").unwrap()..at];
                tag.split("y=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap()
            })
            .collect();
        (bottom, tops)
    }

    #[test]
    fn percentiles_follow_the_histogram_to_its_maximum() {
        let h = hist(10_000);
        let c = latency_percentiles("t", &[("a".into(), &h)]);
        let p = &c.lines[0].points;
        assert_eq!(p[0], (0.0, h.min().unwrap() as f64), "starts at the minimum");
        let end = 2000f64.log10();
        assert_eq!(*p.last().unwrap(), (end, h.max().unwrap() as f64), "ends at the maximum, at x = log10(n)");
        assert!(p.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1), "monotone");
        let at_p99 = p.iter().find(|q| q.0 >= 2.0).unwrap();
        let exact = h.quantile(1.0 - 10f64.powf(-at_p99.0)).unwrap() as f64;
        assert_eq!(at_p99.1, exact);
        assert!(c.lines[0].label.contains("n=2,000"), "{}", c.lines[0].label);
    }

    #[test]
    fn nines_axis_is_labelled_with_percentiles() {
        assert_eq!(nines_label(2f64.log10()), "p50");
        assert_eq!(nines_label(1.0), "p90");
        assert_eq!(nines_label(2.0), "p99");
        assert_eq!(nines_label(3.0), "p99.9");
        assert_eq!(nines_label(4.0), "p99.99");
        let h = hist(10_000);
        let svg = svg_string(&latency_percentiles("t", &[("a".into(), &h)])).unwrap();
        for label in ["p50", "p90", "p99", "p99.9"] {
            assert!(svg.contains(&format!(">\n{label}\n</text>")), "tick {label} missing");
        }
        assert!(!svg.contains(">\np99.99\n</text>"), "2000 samples do not reach p99.99");
        // Seven nines on a narrow chart: labels that would overlap are left
        // out (their grid lines stay), never drawn over each other.
        let axis = Axis::nines(7.2, 370.0, 14);
        assert_eq!(axis.bold.len() + axis.light.len(), 8);
        assert!(!axis.light.is_empty() && axis.bold.contains(&2f64.log10()) && axis.bold.contains(&2.0));
        let edges: Vec<(f64, f64)> = axis
            .bold
            .iter()
            .map(|&x| (x / 7.2 * 370.0, nines_label(x).len() as f64 * 0.3 * 14.0))
            .map(|(c, half)| (c - half, c + half))
            .collect();
        assert!(edges.windows(2).all(|w| w[0].1 <= w[1].0), "{edges:?}");
    }

    #[test]
    fn time_axes_use_readable_units() {
        assert_eq!(duration_tick(0.0), "0");
        assert_eq!(duration_tick(850.0), "850 ns");
        assert_eq!(duration_tick(12_500.0), "12.5 us");
        assert_eq!(duration_tick(1_700_000.0), "1.7 ms");
        assert_eq!(duration_tick(100_000_000.000_000_01), "100 ms");
        assert_eq!(duration_tick(2e9), "2 s");
        // Latencies of 5..45 us: the ticks say "us", never "k" or "M" of ns.
        let h = hist(15_000);
        let svg = svg_string(&latency_percentiles("t", &[("a".into(), &h)])).unwrap();
        assert!(svg.contains(" us\n</text>"), "ticks carry the unit");
        assert!(!svg.contains("k\n</text>") && !svg.contains("M\n</text>"), "no 15k (ns)");
        // A makespan in seconds: ticks in ms.
        let mut bars = BarChart::new("makespan", "makespan", Some(Unit::Seconds));
        bars.groups = vec!["hackbench".into()];
        bars.series = vec![("cfs".into(), vec![Some(Bar { value: 0.73, interval: Some((0.70, 0.76)) })])];
        let svg = bars_svg_string(&bars).unwrap();
        assert!(svg.contains(">\n200 ms\n</text>"), "makespan ticks in ms");
    }

    #[test]
    fn log_axes_get_ticks_even_within_one_decade() {
        let (bold, _) = log_ticks(5_900.0, 7_500.0, 8);
        assert!(bold.len() >= 2, "{bold:?}");
        let (bold, light) = log_ticks(800.0, 2_000_000.0, 8);
        assert!(bold.contains(&1_000.0) && bold.contains(&1_000_000.0), "{bold:?}");
        assert!(light.contains(&3_000.0));
        let (bold, _) = log_ticks(1.0, 1e12, 6);
        assert!(bold.len() <= 6, "{bold:?}");
    }

    #[test]
    fn the_legend_never_covers_data() {
        let (a, b, c) = (hist(10_000), hist(40_000), hist(20_000));
        let labels = ["fifo", "other", "batch"];
        let chart = latency_percentiles(
            "wakeup latency",
            &[(labels[0].into(), &a), (labels[1].into(), &b), (labels[2].into(), &c)],
        );
        let svg = svg_string(&chart).unwrap();
        let names: Vec<String> = chart.lines.iter().map(|l| l.label.clone()).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let (bottom, tops) = data_bottom_and_legend_tops(&svg, &names);
        assert!(tops.iter().all(|&t| t > bottom + 20.0), "legend at {tops:?} overlaps data reaching {bottom}");
        // Many long labels wrap onto more rows; the plot shrinks instead.
        let mut many = Chart::new("timeline", "t", "prio");
        for i in 0..12 {
            many.lines
                .push(Line { label: format!("task number {i} of twelve"), points: vec![(0.0, i as f64), (1.0, 1.0)] });
        }
        let svg = svg_string(&many).unwrap();
        let names: Vec<String> = (0..12).map(|i| format!("task number {i} of twelve")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let (bottom, tops) = data_bottom_and_legend_tops(&svg, &names);
        assert!(tops.iter().all(|&t| t > bottom + 20.0 && t < SIZE.1 as f64), "{tops:?} vs {bottom}");
        assert!(svg.contains("stroke-dasharray") || svg.matches("<polyline").count() > 12, "repeats are dashed");
    }

    #[test]
    fn svg_and_png_files_contain_the_series() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (hist(10_000), hist(40_000));
        let chart = latency_percentiles("wakeup latency", &[("fifo".into(), &a), ("other".into(), &b)]);
        let svg = dir.path().join("p.svg");
        draw(&chart, &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("wakeup latency") && text.contains("fifo (n=2,000)") && text.contains("other (n=2,000)"));
        assert!(text.matches("<polyline").count() >= 2, "two series drawn");
        let png = dir.path().join("p.png");
        draw(&chart, &png).unwrap();
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        assert!(bytes.len() > 5_000, "a drawn PNG is not tiny: {}", bytes.len());
        let hist_chart = latency_histogram("h", &[("fifo".into(), &a)]);
        let total: f64 = hist_chart.lines[0].points.iter().map(|p| p.1).sum();
        assert_eq!(total as u64, 2000, "every sample is in a bin");
        draw(&hist_chart, &dir.path().join("h.svg")).unwrap();
    }

    #[test]
    fn bars_show_their_intervals() {
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("bars.svg");
        let bar = |v: f64, ci: Option<(f64, f64)>| Some(Bar { value: v, interval: ci });
        let mut c = BarChart::new("E1", "ops/s", Some(Unit::PerSecond));
        c.groups = vec!["pipe".into(), "spawn".into()];
        c.series = vec![
            ("ULE".into(), vec![bar(6897.1, Some((6500.0, 7300.0))), bar(1620.1, None)]),
            ("4BSD".into(), vec![bar(66057.8, Some((60000.0, 70000.0))), bar(1864.7, Some((1800.0, 1900.0)))]),
        ];
        draw_bars(&c, &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("ULE") && text.contains("4BSD") && text.contains("pipe"));
        // Three whiskers of three lines each; the bar without an interval has none.
        assert_eq!(text.matches("stroke=\"#000000\" stroke-width=\"2\"").count(), 9, "{text}");
        c.series = vec![("a".into(), vec![bar(0.0, None), bar(0.0, Some((0.0, 0.0)))])];
        assert!(matches!(bars_svg_string(&c), Err(PlotError::Zero(_))), "all-zero bars are refused");
        assert!(matches!(draw(&Chart::new("x", "", ""), &svg), Err(PlotError::Empty(_))));
        let mut z = Chart::new("x", "", "");
        z.lines.push(Line { label: "l".into(), points: vec![(1.0, 0.0), (2.0, 0.0)] });
        assert!(matches!(svg_string(&z), Err(PlotError::Zero(_))), "all-zero lines are refused");
        z.lines[0].points[0].1 = 1.0;
        assert!(matches!(draw(&z, &dir.path().join("x.gif")), Err(PlotError::Format(_))));
    }

    #[test]
    fn bar_groups_drop_the_words_they_share() {
        let g = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (groups, below) =
            tidy_groups(&g(&["pipe loops=9 placement=same-cpu", "pipe loops=9 placement=cross-cpu"]), "");
        assert_eq!((groups, below.as_str()), (g(&["placement=same-cpu", "placement=cross-cpu"]), "pipe loops=9"));
        assert_eq!(tidy_groups(&g(&["a b", "a b"]), "").0, g(&["a b", "a b"]), "identical groups stay");
        assert_eq!(tidy_groups(&g(&["x", "y"]), "groups").1, "groups", "a given axis label stays");
    }

    #[test]
    fn whole_number_data_get_whole_ticks() {
        let mut c = Chart::new("history", "run", "v");
        c.lines.push(Line { label: "a".into(), points: vec![(1.0, 0.5), (2.0, 0.7), (3.0, 0.2), (4.0, 0.9)] });
        let svg = svg_string(&c).unwrap();
        assert!(svg.contains(">\n2\n</text>") && !svg.contains(">\n1.5\n</text>"), "run numbers are whole");
        assert!(svg.contains(">\n0.5\n</text>"), "the fractional y axis keeps its ticks");
    }

    #[test]
    fn whole_number_charts_label_only_whole_ticks() {
        let mut c = Chart::new("prio", "t", "prio");
        c.lines.push(Line { label: "hog".into(), points: vec![(0.0, 120.0), (5.0, 121.0)] });
        let labels = |c: &Chart| -> Vec<String> {
            let svg = svg_string(c).unwrap();
            let lines: Vec<&str> = svg.lines().map(str::trim).collect();
            lines.iter().filter(|l| l.starts_with("12")).map(|l| l.to_string()).collect()
        };
        assert!(labels(&c).iter().any(|l| l.contains('.')), "ticks between two levels: {:?}", labels(&c));
        c.whole_y = true;
        let whole = labels(&c);
        assert!(!whole.iter().any(|l| l.contains('.')), "{whole:?}");
        assert!(whole.contains(&"121".to_string()));
    }

    #[test]
    fn long_captions_keep_both_ends() {
        let t = "wakeup breaktrace=1000 classes=both interval=5000 k=6 normal_nice=0 rt_prio=50 samples=1000 waiters=2: normal.latency CDF";
        let c = fit_caption(t, 72);
        assert_eq!(c.chars().count(), 72);
        assert!(c.starts_with("wakeup breaktrace") && c.ends_with("normal.latency CDF") && c.contains('…'), "{c}");
        assert_eq!(fit_caption("pipe: latency CDF", 72), "pipe: latency CDF");
    }

    #[test]
    fn short_numbers() {
        assert_eq!(short_number(1500.0), "1500");
        assert_eq!(short_number(120.5), "120.5", "neighbouring ticks stay distinct");
        assert_eq!(short_number(15000.0), "15k");
        assert_eq!(short_number(2_500_000.0), "2.5M");
        assert_eq!(short_number(3_000_000_000.0), "3G");
        assert_eq!(short_number(0.25), "0.25");
    }
}

/// A metric against a swept numeric parameter (threads in exectime, groups in
/// hackbench, -j in a build): one line per run, one point per benchmark case.
/// The value is the mean of repetitions or the median of a distribution.
pub fn scaling(runs: &[schedlab_core::Run], bench: &str, x_param: &str, metric: &str) -> Chart {
    let mut c = Chart::new(&format!("{bench}: {metric} against {x_param}"), x_param, metric);
    c.markers = true;
    for run in runs {
        let mut points: Vec<(f64, f64)> = run
            .benchmarks
            .iter()
            .filter(|b| b.name == bench)
            .filter_map(|b| {
                let x = b.params.get(x_param).and_then(|v| v.as_f64().or_else(|| v.as_str()?.parse().ok()))?;
                let m = b.metric(metric)?;
                let s = m.summary()?;
                let y = match m.data {
                    schedlab_core::MetricData::Histogram { .. } => s.median,
                    _ => s.mean,
                };
                label_unit(&mut c, metric, m.unit);
                Some((x, y))
            })
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        if !points.is_empty() {
            c.lines.push(Line { label: run.label(), points });
        }
    }
    c
}

/// Time units go on the ticks; other units in the axis label.
fn label_unit(c: &mut Chart, metric: &str, unit: Unit) {
    if unit.ns_per_unit().is_some() {
        c.y_unit = Some(unit);
        c.y_label = metric.to_string();
    } else if unit.symbol().is_empty() {
        c.y_label = metric.to_string();
    } else {
        c.y_label = format!("{metric} [{}]", unit.symbol());
    }
}

/// Time series metrics (e.g. pages served per second) of each run, against
/// seconds since the benchmark started.
pub fn series(runs: &[schedlab_core::Run], bench: &str, metric: &str) -> Chart {
    let mut c = Chart::new(&format!("{bench}: {metric} over time"), "time since start", metric);
    c.x_unit = Some(Unit::Seconds);
    for run in runs {
        for b in run.benchmarks.iter().filter(|b| b.name == bench) {
            if let Some(m) = b.metric(metric) {
                if let schedlab_core::MetricData::Series { series } = &m.data {
                    label_unit(&mut c, metric, m.unit);
                    let points = series.t_ns.iter().zip(&series.values).map(|(&t, &v)| (t as f64 / 1e9, v)).collect();
                    let label = if runs.len() > 1 { format!("{} {}", run.label(), b.key()) } else { b.key() };
                    c.lines.push(Line { label, points });
                }
            }
        }
    }
    c
}

#[cfg(test)]
mod sweep_tests {
    use super::*;
    use schedlab_core::*;

    fn run() -> Run {
        let tool = ToolInfo { name: "schedlab".into(), version: "0".into(), git_rev: None };
        let mut r = Run::new(RunKind::Live, tool, vec![], "h".into(), 0);
        r.id = Some(1);
        let cond = Condition::Live { requested: SchedCondition::default(), applied: None, loads: vec![] };
        for n in [4u64, 1, 2] {
            let mut b = BenchResult::new("exectime", cond.clone(), 0).param("threads", n);
            b.metrics.push(Metric::samples(
                "worst",
                Unit::Milliseconds,
                Direction::LowerIsBetter,
                vec![n as f64 * 7.0],
            ));
            r.benchmarks.push(b);
        }
        let mut b = BenchResult::new("http", cond, 0);
        let ts = TimeSeries { t_ns: vec![0, 1_000_000_000, 2_000_000_000], values: vec![100.0, 120.0, 110.0] };
        b.metrics.push(Metric::series("pages_per_s", Unit::PerSecond, Direction::HigherIsBetter, ts));
        r.benchmarks.push(b);
        r
    }

    #[test]
    fn scaling_points_are_sorted_by_the_parameter() {
        let c = scaling(&[run()], "exectime", "threads", "worst");
        assert_eq!(c.lines[0].points, vec![(1.0, 7.0), (2.0, 14.0), (4.0, 28.0)]);
        assert_eq!((c.y_label.as_str(), c.y_unit), ("worst", Some(Unit::Milliseconds)), "ms on the ticks");
        assert!(svg_string(&c).unwrap().contains(">\n20 ms\n</text>"));
        assert!(scaling(&[run()], "exectime", "groups", "worst").lines.is_empty());
    }

    #[test]
    fn series_uses_seconds() {
        let c = series(&[run()], "http", "pages_per_s");
        assert_eq!(c.lines[0].points[1], (1.0, 120.0));
        assert_eq!(c.y_label, "pages_per_s [/s]");
        assert!(svg_string(&c).unwrap().contains(">\n1 s\n</text>"));
    }
}

/// Tasks a timeline plot draws unless told otherwise: more lines than this
/// cannot be told apart.
pub const TIMELINE_TASKS: usize = 12;

/// One step line per task of quantity `quantity` (the timeline's primary one
/// when None) of a live or simulated timeline, against time since its start:
/// measured tasks first, then the rest, each by id, at most `max_tasks`.
/// Each task's last level is drawn until the task was last seen.
pub fn timeline(tl: &Timeline, title: &str, quantity: Option<&str>, max_tasks: usize) -> Result<Chart, TimelineError> {
    let q = tl.select(quantity)?;
    let mut c = timeline_axes(q, title);
    let tasks = tasks_with(tl, &q.name);
    if tasks.is_empty() {
        return Err(TimelineError::Empty(q.name.clone()));
    }
    if tasks.len() > max_tasks {
        c.title = format!("{title} ({max_tasks} of {} tasks)", tasks.len());
    }
    for t in tasks.into_iter().take(max_tasks) {
        c.lines.push(Line { label: t.name.clone(), points: task_points(tl, t, &q.name) });
    }
    Ok(c)
}

/// An empty timeline chart of quantity `q`: time in ms, levels as steps.
fn timeline_axes(q: &Quantity, title: &str) -> Chart {
    let direction = match q.lower_runs_first {
        Some(true) => " (lower runs first)",
        Some(false) => " (higher runs first)",
        None => "",
    };
    let mut c = Chart::new(title, "time since start", &format!("{}{direction}", q.name));
    c.x_unit = Some(Unit::Milliseconds);
    c.step = true;
    match q.unit.as_str() {
        "ns" => c.y_unit = Some(Unit::Nanoseconds),
        "" | "count" => c.whole_y = true,
        other => c.y_label = format!("{} [{other}]{direction}", q.name),
    }
    c
}

/// The tasks with points of `quantity`: measured tasks first, then by id.
fn tasks_with<'a>(tl: &'a Timeline, quantity: &str) -> Vec<&'a TimelineTask> {
    let mut tasks: Vec<&TimelineTask> = tl.tasks.iter().filter(|t| !t.points(quantity).is_empty()).collect();
    tasks.sort_by_key(|t| (t.role != "measured", t.id));
    tasks
}

/// A task's points in ms, its last level held until it was last seen.
fn task_points(tl: &Timeline, t: &TimelineTask, quantity: &str) -> Vec<(f64, f64)> {
    let mut points: Vec<(f64, f64)> = t.points(quantity).iter().map(|&(at, v)| (at as f64 / 1e6, v)).collect();
    let end = t.last_seen_ns.unwrap_or(tl.end_ns) as f64 / 1e6;
    if let Some(&(at, v)) = points.last() {
        if end > at {
            points.push((end, v));
        }
    }
    points
}

/// Kinds of task that live and simulated timelines name differently:
/// (name stems, the group both are drawn as). A live task is "ROLE COMM
/// TID" (`run --observe`; the kernel keeps 15 bytes of a thread's name, so
/// wakeup's "schedlab-wake-rt0" is "schedlab-wake-r"); a simulated one has
/// its workload's name ("rt_waiter", "hb0.send3").
const TASK_GROUPS: &[(&[&str], &str)] = &[
    (&["wake-r", "rt_waiter"], "rt waiter"),
    (&["wake-n", "normal_waiter"], "normal waiter"),
    (&["wakeup", "waker"], "waker"),
    (&["hbsend", "hbrecv", "hb"], "hackbench"),
];

/// The group a timeline task is drawn in: tasks of one kind (a class of
/// waiters, a load's tasks) share a colour, and the same kind of task has
/// the same group name in a live and in a simulated timeline.
pub fn task_group(task: &TimelineTask) -> String {
    let mut name = task.name.as_str();
    // Live: "ROLE COMM TID".
    if let Some(rest) = name.strip_prefix(task.role.as_str()).and_then(|r| r.strip_prefix(' ')) {
        name = rest.rsplit_once(' ').filter(|(_, tid)| tid.parse::<u64>().is_ok()).map_or(rest, |(comm, _)| comm);
    }
    let name = name.strip_prefix("schedlab-").unwrap_or(name);
    // "hb0.send3", "rt_waiter.1", "child#12": the kind is the name before its instance.
    let stem = name.split(['.', '#']).next().unwrap_or(name);
    let stem = stem.trim_end_matches(|c: char| c.is_ascii_digit()).trim_end_matches([' ', '_', '-']);
    let stem = if stem.is_empty() { name } else { stem };
    match TASK_GROUPS.iter().find(|(stems, _)| stems.contains(&stem)) {
        Some((_, group)) => group.to_string(),
        None => stem.to_string(),
    }
}

/// Where a timeline comes from, for a panel's title: the run and benchmark,
/// then the kernel and sampler of a live run, or the simulator's policy and
/// seed (which the timeline's source names).
pub fn timeline_source(run: &schedlab_core::Run, bench: &str, tl: &Timeline) -> String {
    let kernel = run.env_start.as_ref().and_then(|e| e.kernel_release.as_deref());
    match (run.kind, kernel) {
        (schedlab_core::RunKind::Live, Some(k)) => format!("{} {bench} · kernel {k} · {}", run.label(), tl.source),
        _ => format!("{} {bench} · {}", run.label(), tl.source),
    }
}

/// What one panel of a [`TimelinePanels`] figure shows.
#[derive(Debug, Clone)]
pub enum PanelBody {
    Chart(Chart),
    /// Why this run has nothing to draw (no timeline, the quantity missing).
    Message(String),
}

#[derive(Debug, Clone)]
pub struct Panel {
    pub title: String,
    pub body: PanelBody,
}

/// Several runs' timelines, one panel each, stacked: one time span for
/// all, one y scale for the panels of one quantity, each task coloured by
/// its [`task_group`] alike in every panel, one legend of the groups.
#[derive(Debug, Clone)]
pub struct TimelinePanels {
    pub title: String,
    pub panels: Vec<Panel>,
    /// Legend: (group, palette position), in order of first appearance.
    pub groups: Vec<(String, usize)>,
    /// Pixels (width, height) of the whole figure.
    pub size: (u32, u32),
}

impl TimelinePanels {
    /// The panels that say why they show nothing: (title, why).
    pub fn messages(&self) -> impl Iterator<Item = (&str, &str)> {
        self.panels.iter().filter_map(|p| match &p.body {
            PanelBody::Message(m) => Some((p.title.as_str(), m.as_str())),
            PanelBody::Chart(_) => None,
        })
    }
}

/// Height of one panel in a plot file.
pub const PANEL_HEIGHT: u32 = 300;

/// One panel per `(title, timeline or why there is none)`, each drawing
/// `quantity`, or by default the first timeline's primary quantity (a panel
/// without it draws its own, and says so), at most `max_tasks` tasks each,
/// taken from every group in turn.
pub fn timeline_panels(
    runs: &[(String, Result<&Timeline, String>)],
    title: &str,
    quantity: Option<&str>,
    max_tasks: usize,
) -> TimelinePanels {
    let first_primary = runs.iter().find_map(|(_, tl)| tl.as_ref().ok()).map(|tl| tl.primary.clone());
    let wanted = quantity.map(str::to_string).or(first_primary);
    let mut groups: Vec<(String, usize)> = Vec::new();
    let mut panels = Vec::new();
    for (panel_title, tl) in runs {
        let body = match tl {
            Err(why) => PanelBody::Message(why.clone()),
            Ok(tl) => match panel_chart(tl, panel_title, wanted.as_deref(), quantity.is_none(), max_tasks, &mut groups)
            {
                Ok(c) => PanelBody::Chart(c),
                Err(why) => PanelBody::Message(why),
            },
        };
        panels.push(Panel { title: panel_title.clone(), body });
    }
    let size = (SIZE.0, 120 + PANEL_HEIGHT * panels.len().max(1) as u32);
    TimelinePanels { title: title.to_string(), panels, groups, size }
}

/// One panel's chart, its lines labelled and coloured by group (`groups`
/// grows with the groups first seen here); Err: what the panel says instead.
fn panel_chart(
    tl: &Timeline,
    title: &str,
    wanted: Option<&str>,
    may_fall_back: bool,
    max_tasks: usize,
    groups: &mut Vec<(String, usize)>,
) -> Result<Chart, String> {
    let (q, title) = match tl.select(wanted) {
        Ok(q) => (q, title.to_string()),
        Err(_) if may_fall_back && tl.quantity(&tl.primary).is_some() => {
            let own = tl.select(None).map_err(|e| e.to_string())?;
            let asked = wanted.unwrap_or_default();
            (own, format!("{title} · no {asked} here: its {} drawn", own.name))
        }
        Err(TimelineError::NoQuantity { asked, why, available }) => {
            return Err(format!("no {asked} in this timeline: {why}; it has {available}"))
        }
        Err(e) => return Err(e.to_string()),
    };
    let tasks = tasks_with(tl, &q.name);
    if tasks.is_empty() {
        return Err(format!("no task has a value of {} in this timeline", q.name));
    }
    let names: Vec<String> = tasks.iter().map(|t| task_group(t)).collect();
    let picked = pick_by_group(&names, max_tasks);
    let mut c = timeline_axes(q, &title);
    if picked.len() < tasks.len() {
        c.title = format!("{title} ({} of {} tasks)", picked.len(), tasks.len());
    }
    for i in picked {
        let colour = match groups.iter().find(|(g, _)| *g == names[i]) {
            Some(&(_, at)) => at,
            None => {
                groups.push((names[i].clone(), groups.len()));
                groups.len() - 1
            }
        };
        c.lines.push(Line { label: names[i].clone(), points: task_points(tl, tasks[i], &q.name) });
        c.colors.push(colour);
    }
    Ok(c)
}

/// At most `max` positions of `groups` (one group name per task), in
/// order, taken from each group in turn: a load's 40 tasks leave room for
/// the waiters.
fn pick_by_group(groups: &[String], max: usize) -> Vec<usize> {
    let mut order: Vec<&String> = Vec::new();
    for g in groups {
        if !order.contains(&g) {
            order.push(g);
        }
    }
    let members: Vec<Vec<usize>> =
        order.iter().map(|g| (0..groups.len()).filter(|&i| &groups[i] == *g).collect()).collect();
    let mut picked = Vec::new();
    for round in 0.. {
        let before = picked.len();
        for m in &members {
            if let Some(&i) = m.get(round) {
                if picked.len() < max {
                    picked.push(i);
                }
            }
        }
        if picked.len() == before || picked.len() >= max {
            break;
        }
    }
    picked.sort_unstable();
    picked
}

/// Draw the panels to `path` (.svg or .png).
pub fn draw_panels(fig: &TimelinePanels, path: &Path) -> Result<(), PlotError> {
    let ranges = panel_ranges(fig)?;
    match path.extension().and_then(|e| e.to_str()) {
        Some("svg") => render_panels(fig, SVGBackend::new(path, fig.size).into_drawing_area(), &ranges, path),
        Some("png") => render_panels(fig, BitMapBackend::new(path, fig.size).into_drawing_area(), &ranges, path),
        _ => Err(PlotError::Format(path.display().to_string())),
    }
}

/// The panels as an SVG document (for embedding in HTML).
pub fn panels_svg_string(fig: &TimelinePanels) -> Result<String, PlotError> {
    let ranges = panel_ranges(fig)?;
    let mut out = String::new();
    render_panels(fig, SVGBackend::with_string(&mut out, fig.size).into_drawing_area(), &ranges, Path::new("<svg>"))?;
    Ok(out)
}

/// Each charted panel's (x, y) ranges: one time span, from 0 to the latest
/// end of any panel, and one y range for the panels of one quantity.
fn panel_ranges(fig: &TimelinePanels) -> Result<Vec<Option<(Range, Range)>>, PlotError> {
    let charts: Vec<&Chart> = fig
        .panels
        .iter()
        .filter_map(|p| match &p.body {
            PanelBody::Chart(c) => Some(c),
            PanelBody::Message(_) => None,
        })
        .collect();
    let points = |c: &Chart| -> Vec<(f64, f64)> {
        c.lines.iter().flat_map(|l| l.points.iter().copied()).filter(|p| p.0.is_finite() && p.1.is_finite()).collect()
    };
    if charts.iter().all(|c| points(c).is_empty()) {
        return Err(PlotError::Empty(fig.title.clone()));
    }
    let end = charts.iter().flat_map(|c| points(c)).map(|p| p.0).fold(0.0, f64::max);
    let x = (0.0, if end > 0.0 { end } else { 1.0 });
    let y_of = |label: &str| -> Range {
        let ys: Vec<f64> = charts.iter().filter(|c| c.y_label == label).flat_map(|c| points(c)).map(|p| p.1).collect();
        let lo = ys.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = ys.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if lo.is_finite() {
            padded(lo, hi)
        } else {
            (0.0, 1.0)
        }
    };
    Ok(fig
        .panels
        .iter()
        .map(|p| match &p.body {
            PanelBody::Chart(c) => Some((x, y_of(&c.y_label))),
            PanelBody::Message(_) => None,
        })
        .collect())
}

fn render_panels<DB: DrawingBackend>(
    fig: &TimelinePanels,
    root: DrawingArea<DB, Shift>,
    ranges: &[Option<(Range, Range)>],
    path: &Path,
) -> Result<(), PlotError> {
    register_font();
    root.fill(&WHITE).map_err(|e| err(path, e))?;
    let f = fonts(fig.size.0);
    let area = with_legend(&root, &fig.groups, Mark::Line, f, path)?;
    let area = area
        .titled(&fit_caption(&fig.title, caption_chars(fig.size.0, f)), ("sans-serif", f.caption))
        .map_err(|e| err(path, e))?;
    // Panel captions are headings under the figure's.
    let small = Fonts { caption: f.desc, ..f };
    let cells = area.split_evenly((fig.panels.len().max(1), 1));
    for ((panel, range), cell) in fig.panels.iter().zip(ranges).zip(&cells) {
        match (&panel.body, range) {
            (PanelBody::Chart(c), Some((x, y))) => {
                let mut c = c.clone();
                c.size = fig.size;
                plot_lines(&c, cell, *x, *y, small, path)?;
            }
            (PanelBody::Message(why), _) => message_panel(cell, &panel.title, why, small, fig.size.0, path)?,
            // panel_ranges gives every chart its ranges.
            (PanelBody::Chart(_), None) => message_panel(cell, &panel.title, "no points", small, fig.size.0, path)?,
        }
    }
    root.present().map_err(|e| err(path, e))
}

/// A panel with nothing to draw: its title, and why in a frame where the
/// plot would be.
fn message_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    why: &str,
    f: Fonts,
    width: u32,
    path: &Path,
) -> Result<(), PlotError> {
    let (w, h) = area.dim_in_pixel();
    let (w, h) = (w as i32, h as i32);
    let top = 15 + f.caption as i32 + 10;
    area.draw(&Text::new(fit_caption(title, caption_chars(width, f)), (15, 15), ("sans-serif", f.caption)))
        .map_err(|e| err(path, e))?;
    area.draw(&Rectangle::new([(95, top), (w - 15, h - 15)], RGBColor(200, 200, 200).stroke_width(1)))
        .map_err(|e| err(path, e))?;
    // About 0.6 em a character.
    let chars = ((w - 130).max(100) as usize * 10) / (6 * f.label as usize);
    let lines = crate::text::wrap(why, chars, 0);
    let line_h = f.label as i32 + 6;
    let first = top + ((h - 15 - top) - line_h * lines.lines().count() as i32) / 2;
    for (i, line) in lines.lines().enumerate() {
        area.draw(&Text::new(line.to_string(), (110, first + i as i32 * line_h), ("sans-serif", f.label)))
            .map_err(|e| err(path, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod timeline_tests {
    use super::*;
    use schedlab_core::timeline::{Quantity, Timeline, TimelineTask};

    fn tl(n: u64) -> Timeline {
        let tasks = (0..n)
            .map(|i| {
                let mut t =
                    TimelineTask::new(100 + i, format!("task {i}"), if i == n - 1 { "measured" } else { "load" });
                t.push("prio", 0, 120.0);
                t.push("prio", 5_000_000, 120.0 + i as f64);
                t.push("vruntime", 0, 1e6 * i as f64);
                t
            })
            .collect();
        Timeline {
            source: "test".into(),
            primary: "prio".into(),
            quantities: vec![
                Quantity { name: "prio".into(), unit: String::new(), lower_runs_first: Some(true) },
                Quantity { name: "vruntime".into(), unit: "ns".into(), lower_runs_first: None },
            ],
            missing: Vec::new(),
            end_ns: 20_000_000,
            tasks,
            notes: Vec::new(),
        }
    }

    #[test]
    fn measured_tasks_come_first_and_levels_hold_to_the_end() {
        let c = timeline(&tl(3), "t", None, 2).unwrap();
        assert_eq!(c.lines.len(), 2);
        assert_eq!(c.lines[0].label, "task 2", "the measured task first");
        assert_eq!(c.lines[0].points, vec![(0.0, 120.0), (5.0, 122.0), (20.0, 122.0)]);
        assert!(c.title.contains("2 of 3 tasks") && c.y_label.contains("lower runs first"), "{}", c.title);
        let v = timeline(&tl(3), "t", Some("vruntime"), 12).unwrap();
        assert_eq!(v.y_unit, Some(Unit::Nanoseconds));
        assert!(timeline(&tl(3), "t", Some("lag"), 12).is_err());
        assert!(svg_string(&c).unwrap().contains("task 2"));
    }

    #[test]
    fn live_and_simulated_tasks_of_one_kind_share_a_group() {
        let group = |name: &str, role: &str| task_group(&TimelineTask::new(1, name, role));
        assert_eq!(group("measured schedlab-wake-r 4242", "measured"), "rt waiter");
        assert_eq!(group("rt_waiter.1", "task"), "rt waiter");
        assert_eq!(group("measured schedlab-wake-n 4243", "measured"), "normal waiter");
        assert_eq!(group("normal_waiter", "task"), "normal waiter");
        assert_eq!(group("measured schedlab-wakeup 4240", "measured"), "waker");
        assert_eq!(group("waker", "task"), "waker");
        for (name, role) in [("load schedlab-hbsend 5000", "load"), ("load schedlab-hbrecv 5001", "load")] {
            assert_eq!(group(name, role), "hackbench", "{name}");
        }
        assert_eq!(group("hb3.send17", "task"), "hackbench");
        // Others keep their name without its instance.
        assert_eq!(group("load schedlab-burn 77", "load"), "burn");
        assert_eq!(group("hog2.nice5", "task"), "hog");
        assert_eq!(group("load cc1plus 88", "load"), "cc1plus");
        assert_eq!(group("42", "task"), "42");
        assert_eq!(group("worker 3", "task"), "worker");
    }

    #[test]
    fn every_group_gets_tasks_before_any_gets_more() {
        let g = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let groups = g(&["waker", "hb", "hb", "hb", "hb", "hb", "waiter", "waiter"]);
        assert_eq!(pick_by_group(&groups, 4), vec![0, 1, 2, 6], "waker, two hackbench, a waiter");
        assert_eq!(pick_by_group(&groups, 100).len(), 8);
        assert!(pick_by_group(&groups, 0).is_empty());
    }

    #[test]
    fn panels_share_one_time_span_and_one_scale_per_quantity() {
        let short = tl(2);
        let mut long = tl(3);
        long.end_ns = 50_000_000;
        for t in &mut long.tasks {
            t.push("prio", 30_000_000, 90.0);
        }
        let fig = timeline_panels(
            &[("a".into(), Ok(&short)), ("b".into(), Ok(&long)), ("c".into(), Err("no timeline here".into()))],
            "t",
            None,
            12,
        );
        assert_eq!(fig.panels.len(), 3);
        let r = panel_ranges(&fig).unwrap();
        let (a, b) = (r[0].unwrap(), r[1].unwrap());
        assert_eq!(a, b, "one time span and, for prio in both, one y range");
        assert_eq!(a.0, (0.0, 50.0), "the time axis runs to the longer timeline's end (ms)");
        assert!(a.1 .0 < 90.0 && a.1 .1 > 122.0, "{:?}", a.1);
        assert!(r[2].is_none());
        assert_eq!(fig.messages().collect::<Vec<_>>(), vec![("c", "no timeline here")]);
        // The legend lists each group once; its colour is the same in every panel.
        let names: Vec<&str> = fig.groups.iter().map(|(g, _)| g.as_str()).collect();
        assert_eq!(names, ["task"], "'task 0', 'task 1'... are one kind");
        // A panel without the first's quantity draws its own, on its own scale, and says so.
        let mut sim = tl(2);
        sim.primary = "lag".into();
        sim.quantities = vec![Quantity { name: "lag".into(), unit: "ns".into(), lower_runs_first: None }];
        for (i, t) in sim.tasks.iter_mut().enumerate() {
            t.series.clear();
            t.push("lag", 0, -5e5 * i as f64);
        }
        let mixed = timeline_panels(&[("live".into(), Ok(&short)), ("sim".into(), Ok(&sim))], "t", None, 12);
        let r = panel_ranges(&mixed).unwrap();
        assert_ne!(r[0].unwrap().1, r[1].unwrap().1);
        assert!(
            matches!(&mixed.panels[1].body, PanelBody::Chart(c) if c.title == "sim · no prio here: its lag drawn"),
            "{:?}",
            mixed.panels[1]
        );
        // Asked for, a quantity a panel lacks is said there instead.
        let asked = timeline_panels(&[("live".into(), Ok(&short)), ("sim".into(), Ok(&sim))], "t", Some("prio"), 12);
        assert!(
            matches!(&asked.panels[1].body, PanelBody::Message(m) if m == "no prio in this timeline: no such quantity; it has lag"),
            "{:?}",
            asked.panels[1]
        );
        let none = timeline_panels(&[("c".into(), Err("none".into()))], "t", None, 12);
        assert!(matches!(panels_svg_string(&none), Err(PlotError::Empty(_))), "nothing to draw is an error");
    }
}
