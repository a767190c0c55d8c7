//! Side-by-side comparison of runs with a verdict per metric.
//!
//! Rows are (benchmark key, metric, statistic); columns are runs, the first
//! being the baseline. For each later run the change against the baseline gets
//! a 95 % confidence interval and a verdict:
//! - scalar samples (one per repetition): Welch's t interval of the ratio of
//!   means (delta method), because repetitions are few and a bootstrap of 3
//!   to 5 values is far too narrow;
//! - latency histograms: the mean uses the normal approximation of the
//!   difference; p50/p99/p99.9 use the distribution-free order-statistic
//!   interval of each run's quantile, combined conservatively
//!   ([lo_b / hi_a, hi_b / lo_a]); the max has no interval (a single sample).
//!
//! A change counts only when the whole interval lies beyond the noise
//! threshold; otherwise the verdict is "within noise".

use schedlab_core::stats::{histogram_quantile_ci, welch_ratio_interval, Interval};
use schedlab_core::{Direction, Environment, LatencyHistogram, MetricData, Run, Unit};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Better,
    Worse,
    /// The interval reaches into the noise band (or includes no change).
    WithinNoise,
    /// A change beyond noise on an informational metric.
    Changed,
    /// Not enough data for an interval (e.g. a single repetition, or the max).
    Unknown,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::WithinNoise => "within noise",
            Verdict::Changed => "changed",
            Verdict::Unknown => "n/a",
        }
    }
}

/// One run's cell of a comparison row.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub value: Option<f64>,
    /// value / baseline value.
    pub ratio: Option<f64>,
    /// 95 % interval of the relative change (e.g. -0.05..0.02 = -5 %..+2 %).
    pub change_ci: Option<Interval>,
    /// What the interval covers.
    pub basis: Basis,
    pub verdict: Verdict,
}

/// What a change interval is computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// Variation between repetitions: covers run-to-run noise.
    Repetitions,
    /// Sampling error within one merged distribution per run: does not cover
    /// run-to-run noise (a single repetition, or no per-repetition data).
    Sampling,
}

#[derive(Debug, Clone, Serialize)]
pub struct CompareRow {
    pub benchmark: String,
    pub metric: String,
    /// "mean", "p50", "p99", "p99.9", "max".
    pub statistic: &'static str,
    pub unit: Unit,
    pub direction: Direction,
    pub cells: Vec<Cell>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub runs: Vec<String>,
    pub noise: f64,
    pub rows: Vec<CompareRow>,
    /// Per later run: environment fields that differ from the baseline's.
    pub env_differences: Vec<(String, Vec<EnvDifference>)>,
}

/// An environment field that differs: (field, baseline value, this run's value).
pub type EnvDifference = (String, String, String);

#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("compare needs at least two runs: name a baseline and one or more runs to compare with it")]
    TooFewRuns,
    #[error(
        "the runs share no benchmark: {0}; compare runs that measured the same benchmark with the same parameters"
    )]
    NothingInCommon(String),
}

enum Data<'a> {
    Samples(&'a [f64]),
    Hist(&'a LatencyHistogram, &'a [LatencyHistogram]),
}

fn data(d: &MetricData) -> Data<'_> {
    match d {
        MetricData::Samples { values } => Data::Samples(values),
        MetricData::Histogram { histogram, repetitions } => Data::Hist(histogram, repetitions),
        MetricData::Series { series } => Data::Samples(&series.values),
    }
}

pub fn compare(runs: &[Run], noise: f64) -> Result<Comparison, CompareError> {
    if runs.len() < 2 {
        return Err(CompareError::TooFewRuns);
    }
    let base = &runs[0];
    let mut rows = Vec::new();
    for bench in &base.benchmarks {
        let key = bench.key();
        for metric in &bench.metrics {
            let others: Vec<Option<&MetricData>> = runs[1..]
                .iter()
                .map(|r| {
                    r.benchmarks.iter().find(|b| b.key() == key).and_then(|b| b.metric(&metric.name)).map(|m| &m.data)
                })
                .collect();
            if others.iter().all(Option::is_none) {
                continue;
            }
            let stats: &[&'static str] = match metric.data {
                MetricData::Histogram { .. } => &["mean", "p50", "p99", "p99.9", "max"],
                _ => &["mean"],
            };
            for &stat in stats {
                let base_data = data(&metric.data);
                let base_value = point(&base_data, stat);
                let mut cells = vec![Cell {
                    value: base_value,
                    ratio: Some(1.0),
                    change_ci: None,
                    basis: Basis::Repetitions,
                    verdict: Verdict::Unknown,
                }];
                for other in &others {
                    cells.push(match other {
                        None => Cell {
                            value: None,
                            ratio: None,
                            change_ci: None,
                            basis: Basis::Repetitions,
                            verdict: Verdict::Unknown,
                        },
                        Some(d) => {
                            let od = data(d);
                            let value = point(&od, stat);
                            let ratio = match (base_value, value) {
                                (Some(a), Some(b)) if a != 0.0 => Some(b / a),
                                _ => None,
                            };
                            let (change_ci, basis) = change_interval(&base_data, &od, stat);
                            Cell {
                                value,
                                ratio,
                                change_ci,
                                basis,
                                verdict: verdict(change_ci, noise, metric.direction),
                            }
                        }
                    });
                }
                rows.push(CompareRow {
                    benchmark: key.clone(),
                    metric: metric.name.clone(),
                    statistic: stat,
                    unit: metric.unit,
                    direction: metric.direction,
                    cells,
                });
            }
        }
    }
    if rows.is_empty() {
        let names = |r: &Run| r.benchmarks.iter().map(|b| b.key()).collect::<Vec<_>>().join(", ");
        let detail = runs.iter().map(|r| format!("{} has [{}]", r.label(), names(r))).collect::<Vec<_>>().join("; ");
        return Err(CompareError::NothingInCommon(detail));
    }
    let env_differences = runs[1..]
        .iter()
        .filter_map(|r| {
            let (a, b) = (base.env_start.as_ref()?, r.env_start.as_ref()?);
            let d = a.differences(b);
            (!d.is_empty())
                .then(|| (r.label(), d.into_iter().map(|(f, x, y)| (f.to_string(), x, y)).collect::<Vec<_>>()))
        })
        .collect();
    Ok(Comparison { runs: runs.iter().map(Run::label).collect(), noise, rows, env_differences })
}

fn point(d: &Data<'_>, stat: &str) -> Option<f64> {
    match d {
        Data::Samples(v) => (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64),
        Data::Hist(h, _) => hist_stat(h, stat),
    }
}

fn hist_stat(h: &LatencyHistogram, stat: &str) -> Option<f64> {
    match stat {
        "mean" => h.mean(),
        "p50" => h.quantile(0.5).map(|v| v as f64),
        "p99" => h.quantile(0.99).map(|v| v as f64),
        "p99.9" => h.quantile(0.999).map(|v| v as f64),
        "max" => h.max().map(|v| v as f64),
        _ => None,
    }
}

/// 95 % interval of (other / base - 1), and what it is based on.
fn change_interval(base: &Data<'_>, other: &Data<'_>, stat: &str) -> (Option<Interval>, Basis) {
    match (base, other) {
        (Data::Samples(a), Data::Samples(b)) => (welch_ratio_interval(a, b), Basis::Repetitions),
        (Data::Hist(_, ra), Data::Hist(_, rb)) if ra.len() >= 2 && rb.len() >= 2 && stat != "max" => {
            let per_rep =
                |reps: &[LatencyHistogram]| reps.iter().filter_map(|h| hist_stat(h, stat)).collect::<Vec<_>>();
            (welch_ratio_interval(&per_rep(ra), &per_rep(rb)), Basis::Repetitions)
        }
        (Data::Hist(a, _), Data::Hist(b, _)) => (sampling_interval(a, b, stat), Basis::Sampling),
        _ => (None, Basis::Sampling),
    }
}

/// Interval from sampling error within each run's merged histogram.
fn sampling_interval(a: &LatencyHistogram, b: &LatencyHistogram, stat: &str) -> Option<Interval> {
    match stat {
        "mean" => {
            let (ma, mb) = (a.mean()?, b.mean()?);
            let (na, nb) = (a.count() as f64, b.count() as f64);
            if na < 2.0 || nb < 2.0 || ma == 0.0 {
                return None;
            }
            let se = ((a.stdev()?.powi(2) / na) + (b.stdev()?.powi(2) / nb)).sqrt();
            let z = 1.959_963_984_540_054;
            Some(Interval { lo: (mb - ma - z * se) / ma, hi: (mb - ma + z * se) / ma })
        }
        "max" => None,
        q => {
            let q = match q {
                "p50" => 0.5,
                "p99" => 0.99,
                _ => 0.999,
            };
            let (ia, ib) = (histogram_quantile_ci(a, q)?, histogram_quantile_ci(b, q)?);
            if ia.lo <= 0.0 || ia.hi <= 0.0 {
                return None;
            }
            Some(Interval { lo: ib.lo / ia.hi - 1.0, hi: ib.hi / ia.lo - 1.0 })
        }
    }
}

fn verdict(ci: Option<Interval>, noise: f64, direction: Direction) -> Verdict {
    let Some(ci) = ci else { return Verdict::Unknown };
    let up = ci.lo > noise;
    let down = ci.hi < -noise;
    match (up, down, direction) {
        (false, false, _) => Verdict::WithinNoise,
        (_, _, Direction::Neutral) => Verdict::Changed,
        (true, _, Direction::HigherIsBetter) | (_, true, Direction::LowerIsBetter) => Verdict::Better,
        _ => Verdict::Worse,
    }
}

/// Environment differences worth a warning, as printable lines.
pub fn env_warning_lines(c: &Comparison, baseline: &str) -> Vec<String> {
    c.env_differences
        .iter()
        .flat_map(|(run, diffs)| {
            diffs.iter().map(move |(field, a, b)| format!("{run} differs from {baseline} in {field}: {a} -> {b}"))
        })
        .collect()
}

/// Environment of a run, or an empty one for runs without a fingerprint.
pub fn env_of(run: &Run) -> Environment {
    run.env_start.clone().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_core::*;

    fn run_with(id: i64, rate: Vec<f64>, lat: &[u64]) -> Run {
        let tool = ToolInfo { name: "schedlab".into(), version: "0".into(), git_rev: None };
        let mut r = Run::new(RunKind::Live, tool, vec![], "h".into(), 0);
        r.id = Some(id);
        let cond = Condition::Live { requested: SchedCondition::default(), applied: None, loads: vec![] };
        let mut b = BenchResult::new("pipe", cond, 0).param("placement", "same-cpu");
        b.metrics.push(Metric::samples("rate", Unit::PerSecond, Direction::HigherIsBetter, rate));
        let mut h = LatencyHistogram::new();
        for &v in lat {
            h.record(v);
        }
        b.metrics.push(Metric::histogram("latency", Direction::LowerIsBetter, h));
        r.benchmarks.push(b);
        r
    }

    fn lat(base: u64, n: u64) -> Vec<u64> {
        (0..n).map(|i| base + (i * 7919) % 1000).collect()
    }

    fn cell<'a>(c: &'a Comparison, metric: &str, stat: &str) -> &'a Cell {
        &c.rows.iter().find(|r| r.metric == metric && r.statistic == stat).unwrap().cells[1]
    }

    #[test]
    fn identical_runs_are_within_noise() {
        let rate = vec![100.0, 102.0, 98.0, 101.0, 99.0];
        let a = run_with(1, rate.clone(), &lat(10_000, 5000));
        let b = run_with(2, rate, &lat(10_000, 5000));
        let c = compare(&[a, b], 0.02).unwrap();
        for row in &c.rows {
            let v = row.cells[1].verdict;
            assert!(matches!(v, Verdict::WithinNoise | Verdict::Unknown), "{} {}: {v:?}", row.metric, row.statistic);
        }
        assert_eq!(cell(&c, "rate", "mean").ratio, Some(1.0));
    }

    #[test]
    fn a_shift_is_detected_in_the_right_direction() {
        let a = run_with(1, vec![100.0, 102.0, 98.0, 101.0, 99.0], &lat(10_000, 5000));
        // 20 % higher rate (better) and 30 % higher latency (worse).
        let b = run_with(2, vec![120.0, 122.0, 118.0, 121.0, 119.0], &lat(13_000, 5000));
        let c = compare(&[a, b], 0.02).unwrap();
        assert_eq!(cell(&c, "rate", "mean").verdict, Verdict::Better);
        let r = cell(&c, "rate", "mean").change_ci.unwrap();
        assert!(r.lo > 0.15 && r.hi < 0.25, "{r:?}");
        assert_eq!(cell(&c, "latency", "mean").verdict, Verdict::Worse);
        assert_eq!(cell(&c, "latency", "p50").verdict, Verdict::Worse);
        assert_eq!(cell(&c, "latency", "max").verdict, Verdict::Unknown);
    }

    #[test]
    fn latency_repetitions_decide_the_verdict_when_present() {
        // Two runs whose merged p50 differ by 10 %, but whose repetitions
        // spread over +-30 %: the sampling interval would call it worse,
        // the repetition interval must not.
        let rep = |base: u64| {
            let mut h = LatencyHistogram::new();
            for i in 0..2000 {
                h.record(base + i % 50);
            }
            h
        };
        let mk = |id, bases: &[u64]| {
            let mut r = run_with(id, vec![1.0, 1.0], &[1]);
            let reps: Vec<_> = bases.iter().map(|&b| rep(b)).collect();
            r.benchmarks[0].metrics[1] = Metric::histogram_per_repetition("latency", Direction::LowerIsBetter, reps);
            r
        };
        let a = mk(1, &[7_000, 10_000, 13_000]);
        let b = mk(2, &[8_000, 11_000, 14_000]);
        let c = compare(&[a.clone(), b.clone()], 0.02).unwrap();
        assert_eq!(cell(&c, "latency", "p50").basis, Basis::Repetitions);
        assert_eq!(cell(&c, "latency", "p50").verdict, Verdict::WithinNoise);
        // Without per-repetition data the same merged data is judged on sampling alone.
        let strip = |mut r: Run| {
            if let MetricData::Histogram { repetitions, .. } = &mut r.benchmarks[0].metrics[1].data {
                repetitions.clear();
            }
            r
        };
        let c2 = compare(&[strip(a), strip(b)], 0.02).unwrap();
        assert_eq!(cell(&c2, "latency", "p50").basis, Basis::Sampling);
        assert!(compare_table(&c2).contains("* interval from sampling"));
    }

    #[test]
    fn noisy_small_difference_stays_within_noise() {
        let a = run_with(1, vec![100.0, 110.0, 90.0], &lat(10_000, 100));
        let b = run_with(2, vec![103.0, 113.0, 93.0], &lat(10_000, 100));
        let c = compare(&[a, b], 0.02).unwrap();
        assert_eq!(cell(&c, "rate", "mean").verdict, Verdict::WithinNoise);
    }

    #[test]
    fn runs_without_common_benchmarks_are_an_error() {
        let a = run_with(1, vec![1.0, 2.0], &[1]);
        let mut b = run_with(2, vec![1.0, 2.0], &[1]);
        b.benchmarks[0].name = "spawn".into();
        let err = compare(&[a.clone(), b], 0.02).unwrap_err();
        assert!(err.to_string().contains("share no benchmark"), "{err}");
        assert!(matches!(compare(&[a], 0.02), Err(CompareError::TooFewRuns)));
    }

    #[test]
    fn environment_differences_are_reported() {
        let mut a = run_with(1, vec![1.0, 2.0], &[1]);
        let mut b = run_with(2, vec![1.0, 2.0], &[1]);
        a.env_start = Some(Environment { governors: Some(vec!["performance".into()]), ..Default::default() });
        b.env_start = Some(Environment { governors: Some(vec!["powersave".into()]), ..Default::default() });
        let c = compare(&[a, b], 0.02).unwrap();
        let lines = env_warning_lines(&c, "#1");
        assert_eq!(lines.len(), 1);
        assert!(lines[0].contains("governors"), "{}", lines[0]);
    }
}

/// The comparison as a terminal table, shaped like the seeds' tables
/// ("Pipe-based context switching | ULE | 4BSD") with change and verdict
/// columns for each run after the baseline.
pub fn compare_table(c: &Comparison) -> String {
    use comfy_table::presets::UTF8_FULL_CONDENSED;
    use comfy_table::{Cell as TCell, CellAlignment, ContentArrangement, Table};
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    let mut header = vec!["benchmark".to_string(), "metric".to_string(), format!("{} (baseline)", c.runs[0])];
    for r in &c.runs[1..] {
        header.push(r.clone());
        header.push("change vs baseline [95% CI]".to_string());
    }
    t.set_header(header);
    let mut last = String::new();
    for row in &c.rows {
        let bench = if row.benchmark == last { String::new() } else { row.benchmark.clone() };
        last = row.benchmark.clone();
        let metric = if row.statistic == "mean" && row.unit != Unit::Nanoseconds {
            row.metric.clone()
        } else {
            format!("{} {}", row.metric, row.statistic)
        };
        let fmt = |v: Option<f64>| v.map(|v| row.unit.format(v)).unwrap_or_else(|| "-".into());
        let mut cells = vec![
            TCell::new(bench),
            TCell::new(metric),
            TCell::new(fmt(row.cells[0].value)).set_alignment(CellAlignment::Right),
        ];
        for cell in &row.cells[1..] {
            cells.push(TCell::new(fmt(cell.value)).set_alignment(CellAlignment::Right));
            let change = match (cell.ratio, cell.change_ci) {
                (Some(r), Some(ci)) => format!(
                    "{:+.1}% [{:+.1}%, {:+.1}%]{} {}",
                    (r - 1.0) * 100.0,
                    ci.lo * 100.0,
                    ci.hi * 100.0,
                    if cell.basis == Basis::Sampling { "*" } else { "" },
                    cell.verdict.label()
                ),
                (Some(r), None) => format!("{:+.1}% (no interval)", (r - 1.0) * 100.0),
                _ => "-".into(),
            };
            cells.push(TCell::new(change));
        }
        t.add_row(cells);
    }
    let mut out = t.to_string();
    if c.rows.iter().any(|r| r.cells.iter().any(|c| c.basis == Basis::Sampling && c.change_ci.is_some())) {
        out.push_str(
            "\n* interval from sampling within each run only (one repetition, or no per-repetition data): \
             it does not cover run-to-run variation; repeat the runs to judge it",
        );
    }
    out
}

#[cfg(test)]
mod table_tests {
    use super::*;

    #[test]
    fn table_names_baseline_and_verdicts() {
        let a = tests_support::run(1, 100.0);
        let b = tests_support::run(2, 130.0);
        let c = compare(&[a, b], 0.02).unwrap();
        let t = compare_table(&c);
        assert!(t.contains("#1 (baseline)"), "{t}");
        assert!(t.contains("+30.0%"), "{t}");
        assert!(t.contains("better"), "{t}");
    }
}

#[cfg(test)]
mod tests_support {
    use schedlab_core::*;
    pub fn run(id: i64, center: f64) -> Run {
        let tool = ToolInfo { name: "schedlab".into(), version: "0".into(), git_rev: None };
        let mut r = Run::new(RunKind::Sim, tool, vec![], "h".into(), 0);
        r.id = Some(id);
        let cond = Condition::Sim(SimSetup { policy: "cfs".into(), cpus: 2, hz: 1000, seed: 1 });
        let mut b = BenchResult::new("sim:hogs", cond, 0);
        let v = vec![center - 1.0, center, center + 1.0, center + 0.5];
        b.metrics.push(Metric::samples("rate", Unit::PerSecond, Direction::HigherIsBetter, v));
        r.benchmarks.push(b);
        r
    }
}

/// Long-format CSV: one line per (row, run).
pub fn compare_csv(c: &Comparison) -> String {
    let mut out =
        String::from("benchmark,metric,statistic,unit,run,value,ratio,change_lo,change_hi,interval_basis,verdict\n");
    let q = |s: &str| if s.contains([',', '"']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() };
    let opt = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
    for row in &c.rows {
        for (run, cell) in c.runs.iter().zip(&row.cells) {
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{}\n",
                q(&row.benchmark),
                q(&row.metric),
                row.statistic,
                row.unit.symbol(),
                q(run),
                opt(cell.value),
                opt(cell.ratio),
                opt(cell.change_ci.map(|i| i.lo)),
                opt(cell.change_ci.map(|i| i.hi)),
                if cell.basis == Basis::Sampling { "sampling" } else { "repetitions" },
                cell.verdict.label()
            ));
        }
    }
    out
}

pub fn compare_markdown(c: &Comparison) -> String {
    let mut out = format!("| benchmark | metric | {} |", c.runs.join(" | "));
    out.push_str("\n|---|---|");
    out.push_str(&"---:|".repeat(c.runs.len()));
    out.push('\n');
    for row in &c.rows {
        let mut line = format!("| {} | {} {} |", row.benchmark.replace('|', "\\|"), row.metric, row.statistic);
        for (i, cell) in row.cells.iter().enumerate() {
            let v = cell.value.map(|v| row.unit.format(v)).unwrap_or_else(|| "-".into());
            if i == 0 {
                line.push_str(&format!(" {v} |"));
            } else {
                let r = cell.ratio.map(|r| format!(" ({:+.1}%, {})", (r - 1.0) * 100.0, cell.verdict.label()));
                line.push_str(&format!(" {v}{} |", r.unwrap_or_default()));
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}
