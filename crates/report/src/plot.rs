//! Plots (SVG, and PNG for viewing) drawn with plotters. Everything is a
//! [`Chart`] of named lines or a grouped bar chart; the helpers below turn
//! results into charts: latency CDFs and histograms (several runs overlaid), a
//! metric over time, scaling curves, the simulator's dynamic-priority
//! timeline, and bars for a comparison.

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use schedlab_core::LatencyHistogram;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("cannot draw {path}: {reason}")]
    Draw { path: String, reason: String },
    #[error("plot file {0} must end in .svg or .png")]
    Format(String),
    #[error("nothing to plot for {0}: the data has no points")]
    Empty(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    Log,
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
    /// Draw as a step function (priority levels, histograms).
    pub step: bool,
    /// Mark each point (scaling curves with few points).
    pub markers: bool,
    /// The y values are whole numbers (priority levels): label whole ticks only.
    pub whole_y: bool,
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
            step: false,
            markers: false,
            whole_y: false,
            lines: Vec::new(),
        }
    }
}

const SIZE: (u32, u32) = (1000, 600);

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

fn color(i: usize) -> RGBColor {
    // Colour-blind-safe palette (Okabe-Ito), then repeats.
    const P: [(u8, u8, u8); 8] = [
        (0, 114, 178),
        (213, 94, 0),
        (0, 158, 115),
        (204, 121, 167),
        (230, 159, 0),
        (86, 180, 233),
        (0, 0, 0),
        (240, 228, 66),
    ];
    let (r, g, b) = P[i % P.len()];
    RGBColor(r, g, b)
}

fn err(path: &Path, e: impl std::fmt::Display) -> PlotError {
    PlotError::Draw { path: path.display().to_string(), reason: e.to_string() }
}

/// Draw `chart` to `path` (.svg or .png).
pub fn draw(chart: &Chart, path: &Path) -> Result<(), PlotError> {
    let (xr, yr) = ranges(chart)?;
    match path.extension().and_then(|e| e.to_str()) {
        Some("svg") => draw_scaled(chart, SVGBackend::new(path, SIZE).into_drawing_area(), xr, yr, path),
        Some("png") => draw_scaled(chart, BitMapBackend::new(path, SIZE).into_drawing_area(), xr, yr, path),
        _ => Err(PlotError::Format(path.display().to_string())),
    }
}

/// The chart as an SVG document (for embedding in HTML).
pub fn svg_string(chart: &Chart) -> Result<String, PlotError> {
    let (xr, yr) = ranges(chart)?;
    let mut out = String::new();
    draw_scaled(chart, SVGBackend::with_string(&mut out, SIZE).into_drawing_area(), xr, yr, Path::new("<svg>"))?;
    Ok(out)
}

type Range = (f64, f64);

fn ranges(chart: &Chart) -> Result<(Range, Range), PlotError> {
    let pts: Vec<(f64, f64)> = chart.lines.iter().flat_map(|l| l.points.iter().copied()).collect();
    let usable = |v: f64, s: Scale| v.is_finite() && (s == Scale::Linear || v > 0.0);
    let pts: Vec<_> = pts.into_iter().filter(|&(x, y)| usable(x, chart.x_scale) && usable(y, chart.y_scale)).collect();
    if pts.is_empty() {
        return Err(PlotError::Empty(chart.title.clone()));
    }
    let range = |vals: Vec<f64>, s: Scale| {
        let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        match s {
            Scale::Log => (lo / 1.2, hi * 1.2),
            Scale::Linear if hi == lo => (lo - 1.0, hi + 1.0),
            Scale::Linear => {
                let pad = (hi - lo) * 0.05;
                (if lo >= 0.0 { (lo - pad).max(0.0) } else { lo - pad }, hi + pad)
            }
        }
    };
    Ok((
        range(pts.iter().map(|p| p.0).collect(), chart.x_scale),
        range(pts.iter().map(|p| p.1).collect(), chart.y_scale),
    ))
}

fn draw_scaled<DB: DrawingBackend>(
    chart: &Chart,
    root: DrawingArea<DB, plotters::coord::Shift>,
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
    path: &Path,
) -> Result<(), PlotError> {
    match (chart.x_scale, chart.y_scale) {
        (Scale::Linear, Scale::Linear) => draw_on(chart, root, x0..x1, y0..y1, path),
        (Scale::Log, Scale::Linear) => draw_on(chart, root, (x0..x1).log_scale(), y0..y1, path),
        (Scale::Linear, Scale::Log) => draw_on(chart, root, x0..x1, (y0..y1).log_scale(), path),
        (Scale::Log, Scale::Log) => draw_on(chart, root, (x0..x1).log_scale(), (y0..y1).log_scale(), path),
    }
}

fn draw_on<DB, X, Y>(
    chart: &Chart,
    root: DrawingArea<DB, plotters::coord::Shift>,
    x: X,
    y: Y,
    path: &Path,
) -> Result<(), PlotError>
where
    DB: DrawingBackend,
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    register_font();
    root.fill(&WHITE).map_err(|e| err(path, e))?;
    let mut ctx = ChartBuilder::on(&root)
        .caption(fit_caption(&chart.title), ("sans-serif", 24))
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(x, y)
        .map_err(|e| err(path, e))?;
    ctx.configure_mesh()
        .x_desc(&chart.x_label)
        .y_desc(&chart.y_label)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .x_label_formatter(&|v| short_number(*v))
        .y_label_formatter(&|v| y_label(chart, *v))
        .draw()
        .map_err(|e| err(path, e))?;
    for (i, line) in chart.lines.iter().enumerate() {
        let c = color(i);
        let points: Vec<(f64, f64)> = if chart.step { step_points(&line.points) } else { line.points.clone() };
        ctx.draw_series(LineSeries::new(points, c.stroke_width(2)))
            .map_err(|e| err(path, e))?
            .label(line.label.clone())
            .legend(move |(lx, ly)| PathElement::new(vec![(lx, ly), (lx + 20, ly)], c.stroke_width(3)));
        if chart.markers {
            ctx.draw_series(line.points.iter().map(|&p| Circle::new(p, 4, c.filled()))).map_err(|e| err(path, e))?;
        }
    }
    if chart.lines.len() > 1 || chart.lines.first().is_some_and(|l| !l.label.is_empty()) {
        ctx.configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(|e| err(path, e))?;
    }
    root.present().map_err(|e| err(path, e))?;
    Ok(())
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

/// At most this many characters fit a caption across the chart.
const CAPTION_CHARS: usize = 72;

/// A caption that fits: long ones (a benchmark with all its parameters) keep
/// their start and end around an ellipsis; the metric is at the end.
fn fit_caption(title: &str) -> String {
    let chars: Vec<char> = title.chars().collect();
    if chars.len() <= CAPTION_CHARS {
        return title.to_string();
    }
    let head = CAPTION_CHARS / 2 - 4;
    let tail = CAPTION_CHARS - head - 1;
    chars[..head].iter().chain(['…'].iter()).chain(chars[chars.len() - tail..].iter()).collect()
}

fn y_label(chart: &Chart, v: f64) -> String {
    if chart.whole_y && v.fract().abs() > 1e-9 {
        String::new()
    } else {
        short_number(v)
    }
}

/// Axis labels: 1500 -> "1.5k", 0.25 -> "0.25".
fn short_number(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.3}G", v / 1e9).trim_end_matches('0').trim_end_matches('.').to_string()
    } else if a >= 1e6 {
        format!("{:.3}", v / 1e6).trim_end_matches('0').trim_end_matches('.').to_string() + "M"
    } else if a >= 1e4 {
        format!("{:.3}", v / 1e3).trim_end_matches('0').trim_end_matches('.').to_string() + "k"
    } else if v == v.round() {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}").trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// CDF of each histogram, latency in microseconds on a log axis.
pub fn latency_cdf(title: &str, hists: &[(String, &LatencyHistogram)]) -> Chart {
    let mut c = Chart::new(title, "latency (us, log scale)", "fraction of samples <= latency");
    c.x_scale = Scale::Log;
    c.step = true;
    for (label, h) in hists {
        let total = h.count().max(1) as f64;
        let mut acc = 0u64;
        let mut points = Vec::new();
        for (v, n) in h.buckets() {
            acc += n;
            points.push(((v.max(1)) as f64 / 1e3, acc as f64 / total));
        }
        if h.overflow() > 0 {
            points.push((h.max().unwrap_or(0) as f64 / 1e3, 1.0));
        }
        c.lines.push(Line { label: format!("{label} (n={})", h.count()), points });
    }
    c
}

/// Histogram of each distribution as sample counts per log-spaced bin
/// (8 bins per decade), latency in microseconds.
pub fn latency_histogram(title: &str, hists: &[(String, &LatencyHistogram)]) -> Chart {
    let mut c = Chart::new(title, "latency (us, log scale)", "samples per bin (log scale)");
    c.x_scale = Scale::Log;
    c.y_scale = Scale::Log;
    c.step = true;
    const PER_DECADE: f64 = 8.0;
    for (label, h) in hists {
        let mut bins: std::collections::BTreeMap<i64, u64> = std::collections::BTreeMap::new();
        for (v, n) in h.buckets() {
            let us = (v.max(1)) as f64 / 1e3;
            *bins.entry((us.log10() * PER_DECADE).floor() as i64).or_default() += n;
        }
        let points = bins.into_iter().map(|(b, n)| (10f64.powf(b as f64 / PER_DECADE), n as f64)).collect();
        c.lines.push(Line { label: label.clone(), points });
    }
    c
}

/// Grouped bars: one group per category, one bar per series. Drawn with
/// rectangles on a numeric x axis so any number of series fits.
pub fn bars(
    title: &str,
    y_label: &str,
    groups: &[String],
    series: &[(String, Vec<f64>)],
    path: &Path,
) -> Result<(), PlotError> {
    let ymax = bar_ymax(title, groups, series)?;
    match path.extension().and_then(|e| e.to_str()) {
        Some("svg") => {
            draw_bars(SVGBackend::new(path, SIZE).into_drawing_area(), title, y_label, groups, series, ymax, path)
        }
        Some("png") => {
            draw_bars(BitMapBackend::new(path, SIZE).into_drawing_area(), title, y_label, groups, series, ymax, path)
        }
        _ => Err(PlotError::Format(path.display().to_string())),
    }
}

/// Grouped bars as an SVG document (for embedding in HTML).
pub fn bars_svg_string(
    title: &str,
    y_label: &str,
    groups: &[String],
    series: &[(String, Vec<f64>)],
) -> Result<String, PlotError> {
    let ymax = bar_ymax(title, groups, series)?;
    let mut out = String::new();
    let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
    draw_bars(root, title, y_label, groups, series, ymax, Path::new("<svg>"))?;
    Ok(out)
}

fn bar_ymax(title: &str, groups: &[String], series: &[(String, Vec<f64>)]) -> Result<f64, PlotError> {
    if groups.is_empty() || series.is_empty() {
        return Err(PlotError::Empty(title.into()));
    }
    let ymax = series.iter().flat_map(|(_, v)| v.iter().copied()).filter(|v| v.is_finite()).fold(0.0, f64::max) * 1.15;
    Ok(if ymax > 0.0 { ymax } else { 1.0 })
}

#[allow(clippy::too_many_arguments)]
fn draw_bars<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    y_label: &str,
    groups: &[String],
    series: &[(String, Vec<f64>)],
    ymax: f64,
    path: &Path,
) -> Result<(), PlotError> {
    register_font();
    root.fill(&WHITE).map_err(|e| err(path, e))?;
    let n = groups.len();
    let mut ctx = ChartBuilder::on(&root)
        .caption(fit_caption(title), ("sans-serif", 24))
        .margin(15)
        .x_label_area_size(60)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..ymax)
        .map_err(|e| err(path, e))?;
    let labels = groups.to_vec();
    ctx.configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|v| {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 {
                labels.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(y_label)
        .y_label_formatter(&|v| short_number(*v))
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(|e| err(path, e))?;
    let width = 0.8 / series.len() as f64;
    for (si, (name, values)) in series.iter().enumerate() {
        let c = color(si);
        ctx.draw_series(values.iter().enumerate().filter(|(_, v)| v.is_finite()).map(|(gi, &v)| {
            let x0 = gi as f64 - 0.4 + si as f64 * width;
            Rectangle::new([(x0, 0.0), (x0 + width * 0.95, v)], c.filled())
        }))
        .map_err(|e| err(path, e))?
        .label(name.clone())
        .legend(move |(lx, ly)| Rectangle::new([(lx, ly - 5), (lx + 15, ly + 5)], c.filled()));
    }
    ctx.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(|e| err(path, e))?;
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

    #[test]
    fn cdf_ends_at_one_and_is_monotone() {
        let h = hist(10_000);
        let c = latency_cdf("t", &[("a".into(), &h)]);
        let p = &c.lines[0].points;
        assert!((p.last().unwrap().1 - 1.0).abs() < 1e-12);
        assert!(p.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        assert!(c.lines[0].label.contains("n=2000"));
    }

    #[test]
    fn histogram_bins_account_for_every_sample() {
        let h = hist(10_000);
        let c = latency_histogram("t", &[("a".into(), &h)]);
        let total: f64 = c.lines[0].points.iter().map(|p| p.1).sum();
        assert_eq!(total as u64, 2000);
    }

    #[test]
    fn svg_and_png_files_contain_the_series() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (hist(10_000), hist(40_000));
        let chart = latency_cdf("wakeup latency", &[("fifo".into(), &a), ("other".into(), &b)]);
        let svg = dir.path().join("cdf.svg");
        draw(&chart, &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("wakeup latency") && text.contains("fifo (n=2000)") && text.contains("other (n=2000)"));
        assert!(text.matches("<polyline").count() >= 2, "two series drawn");
        let png = dir.path().join("cdf.png");
        draw(&chart, &png).unwrap();
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        assert!(bytes.len() > 5_000, "a drawn PNG is not tiny: {}", bytes.len());
    }

    #[test]
    fn bars_and_bad_paths() {
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("bars.svg");
        let series = vec![("ULE".to_string(), vec![6897.1, 1620.1]), ("4BSD".to_string(), vec![66057.8, 1864.7])];
        bars("E1", "ops/s", &["pipe".into(), "spawn".into()], &series, &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("ULE") && text.contains("4BSD") && text.contains("pipe"));
        assert!(matches!(draw(&Chart::new("x", "", ""), &svg), Err(PlotError::Empty(_))));
        let mut c = Chart::new("x", "", "");
        c.lines.push(Line { label: "l".into(), points: vec![(1.0, 1.0)] });
        assert!(matches!(draw(&c, &dir.path().join("x.gif")), Err(PlotError::Format(_))));
    }

    #[test]
    fn whole_number_charts_label_only_whole_ticks() {
        let mut c = Chart::new("prio", "t", "prio");
        c.lines.push(Line { label: "hog".into(), points: vec![(0.0, 120.0), (5.0, 121.0)] });
        let label = |c: &Chart, text: &str| svg_string(c).unwrap().lines().any(|l| l.trim() == text);
        let half = |c: &Chart| label(c, "120.5");
        assert!(half(&c), "plotters ticks between two levels");
        c.whole_y = true;
        assert!(!half(&c));
        assert!(label(&c, "121"));
    }

    #[test]
    fn long_captions_keep_both_ends() {
        let t = "wakeup breaktrace=1000 classes=both interval=5000 k=6 normal_nice=0 rt_prio=50 samples=1000 waiters=2: normal.latency CDF";
        let c = fit_caption(t);
        assert_eq!(c.chars().count(), CAPTION_CHARS);
        assert!(c.starts_with("wakeup breaktrace") && c.ends_with("normal.latency CDF") && c.contains('…'), "{c}");
        assert_eq!(fit_caption("pipe: latency CDF"), "pipe: latency CDF");
    }

    #[test]
    fn short_numbers() {
        assert_eq!(short_number(1500.0), "1500");
        assert_eq!(short_number(120.5), "120.5", "neighbouring ticks stay distinct");
        assert_eq!(short_number(15000.0), "15k");
        assert_eq!(short_number(2_500_000.0), "2.5M");
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
                if c.y_label == metric {
                    c.y_label = format!("{metric} [{}]", m.unit.symbol());
                }
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

/// Time series metrics (e.g. pages served per second) of each run, against
/// seconds since the benchmark started.
pub fn series(runs: &[schedlab_core::Run], bench: &str, metric: &str) -> Chart {
    let mut c = Chart::new(&format!("{bench}: {metric} over time"), "time (s)", metric);
    for run in runs {
        for b in run.benchmarks.iter().filter(|b| b.name == bench) {
            if let Some(m) = b.metric(metric) {
                if let schedlab_core::MetricData::Series { series } = &m.data {
                    c.y_label = format!("{metric} [{}]", m.unit.symbol());
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
        assert_eq!(c.y_label, "worst [ms]");
        assert!(scaling(&[run()], "exectime", "groups", "worst").lines.is_empty());
    }

    #[test]
    fn series_uses_seconds() {
        let c = series(&[run()], "http", "pages_per_s");
        assert_eq!(c.lines[0].points[1], (1.0, 120.0));
    }
}
