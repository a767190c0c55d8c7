//! Statistics at the replicate level: the figures that verdicts rest on.
//!
//! A replicate is an independent execution of a benchmark case: an
//! invocation for a live benchmark, a seed for the simulator. Repetitions
//! inside one invocation share its process, placement, memory layout and the
//! host's mood of the moment, so they are not independent of each other;
//! intervals built from them were too narrow by a factor of 2 to 10 on a VM.
//! Here every interval is built from one value per replicate:
//!
//! - [`invocation_value`] reduces one invocation's raw data to one number
//!   per statistic (the mean of its repetitions; a latency quantile of its
//!   own merged histogram, so tails are judged invocation by invocation);
//! - [`change`] compares two sets of replicate values with Welch's t on the
//!   log scale: the interval of the ratio is exp(d ± t·se), so it never goes
//!   below -100 %, and a slowdown and the matching speed-up are symmetric.
//!   With 3 to 10 replicates, t is honest where a bootstrap is not (a
//!   bootstrap of 3 values cannot see beyond them and covers ~70 %);
//! - the verdict's null hypothesis is "the change lies within the noise
//!   band" (a minimum-effect test), so its p-value is below 5 % exactly when
//!   the 95 % interval lies wholly outside the band;
//! - [`benjamini_hochberg`] controls the false discoveries among a table's
//!   many rows;
//! - [`run_to_run_band`] turns a host's A/A calibration runs into the
//!   smallest change worth a verdict.

use crate::histogram::LatencyHistogram;
use crate::model::{BenchResult, BenchStatus, Level, Metric, MetricData};
use crate::stats::{t_quantile, Interval, Summary};
use serde::{Deserialize, Serialize};

/// Replicates a side needs before a verdict is given.
pub const MIN_REPLICATES: usize = 3;
/// False discovery rate controlled across the rows of one comparison.
pub const FALSE_DISCOVERY_RATE: f64 = 0.05;

/// A statistic of a metric that gets its own comparison row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stat {
    Mean,
    P50,
    P99,
    P999,
    /// The single largest sample: shown, never given a verdict.
    Max,
}

impl Stat {
    /// The rows of a latency distribution.
    pub const LATENCY: [Stat; 5] = [Stat::Mean, Stat::P50, Stat::P99, Stat::P999, Stat::Max];

    pub fn label(self) -> &'static str {
        match self {
            Stat::Mean => "mean",
            Stat::P50 => "p50",
            Stat::P99 => "p99",
            Stat::P999 => "p99.9",
            Stat::Max => "max",
        }
    }

    /// Whether this statistic can get an interval and a verdict.
    pub fn has_verdict(self) -> bool {
        self != Stat::Max
    }

    pub fn of_histogram(self, h: &LatencyHistogram) -> Option<f64> {
        let q = |p: f64| h.quantile(p).map(|v| v as f64);
        match self {
            Stat::Mean => h.mean(),
            Stat::P50 => q(0.5),
            Stat::P99 => q(0.99),
            Stat::P999 => q(0.999),
            Stat::Max => h.max().map(|v| v as f64),
        }
    }
}

/// The statistics a metric's data is compared on.
pub fn stats_of(data: &MetricData) -> &'static [Stat] {
    match data {
        MetricData::Histogram { .. } => &Stat::LATENCY,
        _ => &[Stat::Mean],
    }
}

/// The mean of the finite values, if any.
fn finite_mean(v: &[f64]) -> Option<f64> {
    let v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// One invocation's value of `stat` (for entity data, of entity `entity`).
pub fn invocation_value(data: &MetricData, stat: Stat, entity: Option<&str>) -> Option<f64> {
    match data {
        MetricData::Samples { values } => (stat == Stat::Mean).then(|| finite_mean(values)).flatten(),
        MetricData::Series { series } => (stat == Stat::Mean).then(|| finite_mean(&series.values)).flatten(),
        MetricData::Histogram { histogram, .. } => stat.of_histogram(histogram),
        MetricData::Entities { labels, values, .. } => {
            let i = labels.iter().position(|l| Some(l.as_str()) == entity)?;
            (stat == Stat::Mean).then(|| values.get(i).copied()).flatten().filter(|v| v.is_finite())
        }
    }
}

/// An estimated change from side A (baseline) to side B.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// Point estimate of B / A: the ratio of geometric means (log scale), or
    /// of arithmetic means for data with zeros.
    pub ratio: f64,
    /// 95 % interval of the relative change B / A - 1.
    pub ci: Interval,
    /// p-value of "the change lies within the noise band": below 0.05
    /// exactly when `ci` lies wholly outside the band.
    pub p: f64,
    /// Computed on the log scale (every value positive).
    pub log_scale: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeError {
    /// Fewer than [`MIN_REPLICATES`] on a side.
    TooFew { a: usize, b: usize },
    /// The baseline is zero: no relative change exists.
    ZeroBaseline,
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn var(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v);
    v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64
}

/// Welch's difference of means: (d, se, df).
fn welch(a: &[f64], b: &[f64]) -> (f64, f64, f64) {
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (va, vb) = (var(a) / na, var(b) / nb);
    let df =
        if va + vb > 0.0 { (va + vb).powi(2) / (va * va / (na - 1.0) + vb * vb / (nb - 1.0)) } else { na + nb - 2.0 };
    (mean(b) - mean(a), (va + vb).sqrt(), df)
}

/// Upper tail of Student's t with `df` degrees of freedom.
fn t_sf(x: f64, df: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    match StudentsT::new(0.0, 1.0, df.max(1.0)) {
        Ok(t) => 1.0 - t.cdf(x),
        Err(_) => f64::NAN,
    }
}

/// Two-sided p-value of |d| against a band of half-width `l` (same scale).
fn min_effect_p(d: f64, se: f64, df: f64, l: f64) -> f64 {
    let excess = d.abs() - l;
    if se == 0.0 {
        return if excess > 0.0 { 0.0 } else { 1.0 };
    }
    (2.0 * t_sf(excess / se, df)).min(1.0)
}

/// Compare replicate values of side A (baseline) and side B. `band` is the
/// smallest relative change worth a verdict (0.02 = 2 %): on the log scale
/// the band is ratios within 1/(1 + band) .. 1 + band.
pub fn change(a: &[f64], b: &[f64], band: f64) -> Result<Change, ChangeError> {
    let a: Vec<f64> = a.iter().copied().filter(|v| v.is_finite()).collect();
    let b: Vec<f64> = b.iter().copied().filter(|v| v.is_finite()).collect();
    if a.len() < MIN_REPLICATES || b.len() < MIN_REPLICATES {
        return Err(ChangeError::TooFew { a: a.len(), b: b.len() });
    }
    let t = |df: f64| t_quantile(df);
    if a.iter().chain(&b).all(|&v| v > 0.0) {
        let (la, lb): (Vec<f64>, Vec<f64>) = (a.iter().map(|v| v.ln()).collect(), b.iter().map(|v| v.ln()).collect());
        let (d, se, df) = welch(&la, &lb);
        let half = t(df) * se;
        return Ok(Change {
            ratio: d.exp(),
            ci: Interval { lo: (d - half).exp() - 1.0, hi: (d + half).exp() - 1.0 },
            p: min_effect_p(d, se, df, (1.0 + band).ln()),
            log_scale: true,
        });
    }
    // Zeros (a count that may be 0, a share of 0 %): the raw scale, relative
    // to the baseline's mean; a quantity that is never negative stays >= -100 %.
    let ma = mean(&a);
    if ma == 0.0 {
        if b.iter().all(|&v| v == 0.0) && a.iter().all(|&v| v == 0.0) {
            return Ok(Change { ratio: 1.0, ci: Interval { lo: 0.0, hi: 0.0 }, p: 1.0, log_scale: false });
        }
        return Err(ChangeError::ZeroBaseline);
    }
    let (d, se, df) = welch(&a, &b);
    let half = t(df) * se;
    let floor = if a.iter().chain(&b).all(|&v| v >= 0.0) { -1.0 } else { f64::NEG_INFINITY };
    Ok(Change {
        ratio: mean(&b) / ma,
        ci: Interval { lo: ((d - half) / ma.abs()).max(floor), hi: ((d + half) / ma.abs()).max(floor) },
        p: min_effect_p(d, se, df, band * ma.abs()),
        log_scale: false,
    })
}

/// 95 % interval of the typical value of replicates (the geometric mean's
/// t interval on the log scale; the arithmetic mean's for data with zeros).
pub fn replicate_interval(values: &[f64]) -> Option<Interval> {
    let v: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if v.len() < 2 {
        return None;
    }
    let n = v.len() as f64;
    let t = t_quantile(n - 1.0);
    if v.iter().all(|&x| x > 0.0) {
        let l: Vec<f64> = v.iter().map(|x| x.ln()).collect();
        let (m, half) = (mean(&l), t * (var(&l) / n).sqrt());
        return Some(Interval { lo: (m - half).exp(), hi: (m + half).exp() });
    }
    let (m, half) = (mean(&v), t * (var(&v) / n).sqrt());
    Some(Interval { lo: m - half, hi: m + half })
}

/// Benjamini–Hochberg step-up: which of the p-values are discoveries at
/// false discovery rate `q` (valid for independent and positively dependent
/// tests, as the rows of one benchmark are).
pub fn benjamini_hochberg(p: &[f64], q: f64) -> Vec<bool> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| p[i].total_cmp(&p[j]));
    let mut cut = 0;
    for (rank, &i) in order.iter().enumerate() {
        if p[i] <= q * (rank + 1) as f64 / m as f64 {
            cut = rank + 1;
        }
    }
    let mut out = vec![false; m];
    for &i in &order[..cut] {
        out[i] = true;
    }
    out
}

/// The smallest change worth a verdict on a host, from independent A/A runs
/// of one case (one value per run, each the geometric mean of the run's
/// invocations): the 95 % prediction bound of the ratio between two future
/// runs, exp(t(R-1) · √2 · sd(ln value)) - 1. None with fewer than 3 runs or
/// a value that is not positive.
pub fn run_to_run_band(run_values: &[f64]) -> Option<f64> {
    if run_values.len() < 3 || run_values.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
        return None;
    }
    let l: Vec<f64> = run_values.iter().map(|v| v.ln()).collect();
    let r = l.len() as f64;
    Some((t_quantile(r - 1.0) * std::f64::consts::SQRT_2 * var(&l).sqrt()).exp() - 1.0)
}

/// Geometric mean of positive values (arithmetic mean otherwise).
pub fn typical(values: &[f64]) -> Option<f64> {
    let v: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    Some(if v.iter().all(|&x| x > 0.0) { mean(&v.iter().map(|x| x.ln()).collect::<Vec<_>>()).exp() } else { mean(&v) })
}

/// All invocations of one benchmark case (same [`BenchResult::key`]) under
/// one condition among some runs: the unit that tables and comparisons show
/// as one row. A sweep's conditions are different cases of the same key.
#[derive(Debug, Clone)]
pub struct Case<'a> {
    pub key: String,
    /// [`crate::Condition::case_label`] of its invocations.
    pub condition: String,
    pub invocations: Vec<&'a BenchResult>,
}

/// Group benchmarks into cases by key and condition, in order of first
/// appearance. Only complete invocations are kept when `complete_only`.
pub fn cases<'a>(benches: impl IntoIterator<Item = &'a BenchResult>, complete_only: bool) -> Vec<Case<'a>> {
    let mut out: Vec<Case<'a>> = Vec::new();
    for b in benches {
        if complete_only && b.status != BenchStatus::Complete {
            continue;
        }
        let (key, condition) = (b.key(), b.condition.case_label());
        match out.iter_mut().find(|c| c.key == key && c.condition == condition) {
            Some(c) => c.invocations.push(b),
            None => out.push(Case { key, condition, invocations: vec![b] }),
        }
    }
    out
}

impl Case<'_> {
    /// One value per invocation of `stat` of metric `name` (entity `entity`).
    pub fn replicate_values(&self, name: &str, stat: Stat, entity: Option<&str>) -> Vec<f64> {
        self.invocations.iter().filter_map(|b| invocation_value(&b.metric(name)?.data, stat, entity)).collect()
    }

    /// Metric names in the order the first invocation that has them lists them.
    pub fn metric_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for b in &self.invocations {
            for m in &b.metrics {
                if !names.contains(&m.name.as_str()) {
                    names.push(&m.name);
                }
            }
        }
        names
    }

    /// The first invocation's copy of a metric (unit, direction, headline).
    pub fn metric(&self, name: &str) -> Option<&Metric> {
        self.invocations.iter().find_map(|b| b.metric(name))
    }

    /// Entity labels of an entity metric, in first-seen order.
    pub fn entities(&self, name: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for b in &self.invocations {
            if let Some(MetricData::Entities { labels, .. }) = b.metric(name).map(|m| &m.data) {
                for l in labels {
                    if !out.contains(l) {
                        out.push(l.clone());
                    }
                }
            }
        }
        out
    }

    /// The metric's raw data of every invocation pooled into one (samples
    /// and repetitions concatenated, histograms merged, entity values
    /// averaged per entity), for point figures and distributions.
    pub fn pooled(&self, name: &str) -> Option<Metric> {
        let parts: Vec<&Metric> = self.invocations.iter().filter_map(|b| b.metric(name)).collect();
        let first = *parts.first()?;
        let mut pooled = first.clone();
        pooled.data = match &first.data {
            MetricData::Samples { .. } => MetricData::Samples {
                values: parts
                    .iter()
                    .flat_map(|m| match &m.data {
                        MetricData::Samples { values } => values.clone(),
                        _ => vec![],
                    })
                    .collect(),
            },
            MetricData::Histogram { .. } => {
                let (mut histogram, mut repetitions) = (LatencyHistogram::new(), Vec::new());
                for m in &parts {
                    if let MetricData::Histogram { histogram: h, repetitions: r } = &m.data {
                        histogram.merge(h);
                        repetitions.extend(r.iter().cloned());
                    }
                }
                MetricData::Histogram { histogram, repetitions }
            }
            MetricData::Series { .. } => first.data.clone(),
            MetricData::Entities { entity, .. } => {
                let labels = self.entities(name);
                let values = labels
                    .iter()
                    .map(|l| {
                        let v = self.replicate_values(name, Stat::Mean, Some(l));
                        if v.is_empty() {
                            f64::NAN
                        } else {
                            v.iter().sum::<f64>() / v.len() as f64
                        }
                    })
                    .collect();
                MetricData::Entities { entity: entity.clone(), labels, values }
            }
        };
        Some(pooled)
    }

    /// Summary of the pooled data whose intervals (of the mean, and of the
    /// median for distributions) come from the invocations alone: None with
    /// fewer than two, because repetitions of one invocation are not
    /// independent enough to bound the next run.
    pub fn summary(&self, name: &str) -> Option<Summary> {
        let pooled = self.pooled(name)?;
        let mut s = pooled.summary()?;
        if pooled.data.level() == Level::Entity {
            return Some(s);
        }
        s.mean_ci = replicate_interval(&self.replicate_values(name, Stat::Mean, None));
        s.median_ci = match pooled.data {
            MetricData::Histogram { .. } => replicate_interval(&self.replicate_values(name, Stat::P50, None)),
            _ => None,
        };
        Some(s)
    }
}

/// One case of a run reduced to what a history row shows and judges: its
/// identity and, per metric, the pooled figure, its interval from the
/// invocations and one value per invocation. The store keeps these beside
/// the raw data, so following a benchmark over a fleet's 100,000 runs reads
/// one small row per run instead of decoding every distribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseSummary {
    pub name: String,
    pub key: String,
    /// [`crate::Condition::case_label`]: with the key, the case's identity.
    pub case_condition: String,
    /// [`crate::Condition::label`] of the invocations, as shown, when they
    /// all have the same; else `case_condition` (a simulation's seeds).
    pub condition: String,
    /// The first invocation's parameters and mode.
    pub params: std::collections::BTreeMap<String, serde_json::Value>,
    pub quick: bool,
    pub invocations: u32,
    pub metrics: Vec<MetricSummary>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricSummary {
    pub name: String,
    pub unit: crate::Unit,
    pub direction: crate::Direction,
    pub headline: bool,
    /// The metric a history follows when none is named: the case's first
    /// headline metric, else its first.
    pub default: bool,
    /// A latency distribution: `value` is the median, not the mean.
    pub histogram: bool,
    pub value: f64,
    pub ci: Option<Interval>,
    pub p99: Option<f64>,
    pub n: u64,
    /// One value per invocation: the p50 of a distribution, else the mean.
    pub replicates: Vec<f64>,
}

impl MetricSummary {
    /// The statistic a history shows and judges: a distribution's p50, else the mean.
    pub fn stat(&self) -> Stat {
        Self::stat_of(self.histogram)
    }

    fn stat_of(histogram: bool) -> Stat {
        if histogram {
            Stat::P50
        } else {
            Stat::Mean
        }
    }
}

/// The summaries of the complete cases among `benches`, in case order. A
/// metric without data (no summary) is left out; a case keeps its `default`
/// mark on the metric chosen before that, so no other takes its place.
pub fn case_summaries<'a>(benches: impl IntoIterator<Item = &'a BenchResult>) -> Vec<CaseSummary> {
    cases(benches, true).iter().map(summarize_case).collect()
}

fn summarize_case(case: &Case<'_>) -> CaseSummary {
    let first = case.invocations[0];
    let names = case.metric_names();
    let default = names
        .iter()
        .filter_map(|n| case.metric(n))
        .find(|m| m.headline)
        .or(first.metrics.first())
        .map(|m| m.name.clone());
    let metrics = names
        .iter()
        .filter_map(|&n| {
            let m = case.metric(n)?;
            let s = case.summary(n)?;
            let histogram = matches!(m.data, MetricData::Histogram { .. });
            let stat = MetricSummary::stat_of(histogram);
            Some(MetricSummary {
                name: m.name.clone(),
                unit: m.unit,
                direction: m.direction,
                headline: m.headline,
                default: default.as_deref() == Some(n),
                histogram,
                value: if histogram { s.median } else { s.mean },
                ci: if histogram { s.median_ci } else { s.mean_ci },
                p99: histogram.then_some(s.p99),
                n: s.n,
                replicates: match m.data.level() {
                    // The row shows the mean over the entities (tasks, CPUs):
                    // its verdict rests on that mean, one per invocation.
                    Level::Entity => case
                        .invocations
                        .iter()
                        .filter_map(|b| match &b.metric(n)?.data {
                            MetricData::Entities { values, .. } => finite_mean(values),
                            _ => None,
                        })
                        .collect(),
                    _ => case.replicate_values(n, stat, None),
                },
            })
        })
        .collect();
    CaseSummary {
        name: first.name.clone(),
        key: case.key.clone(),
        case_condition: case.condition.clone(),
        // What every invocation shares: the first's label when all agree,
        // else the case's (seeds pooled show no one seed).
        condition: {
            let label = first.condition.label();
            if case.invocations.iter().all(|b| b.condition.label() == label) {
                label
            } else {
                case.condition.clone()
            }
        },
        params: first.params.clone(),
        quick: first.quick,
        invocations: case.invocations.len() as u32,
        metrics,
    }
}

/// The run with each case's complete invocations pooled into one result
/// (metrics as [`Case::pooled`], distinct warnings of all invocations), for
/// views that draw distributions rather than judge changes: plots, reports.
pub fn pooled_run(run: &crate::model::Run) -> crate::model::Run {
    let mut out = run.clone();
    out.benchmarks = cases(&run.benchmarks, false)
        .into_iter()
        .map(|case| {
            let complete = Case {
                key: case.key.clone(),
                condition: case.condition.clone(),
                invocations: case.invocations.iter().copied().filter(|b| b.status == BenchStatus::Complete).collect(),
            };
            let mut b = complete.invocations.first().copied().unwrap_or(case.invocations[0]).clone();
            if !complete.invocations.is_empty() {
                b.metrics = complete.metric_names().into_iter().filter_map(|n| complete.pooled(n)).collect();
                b.repetitions = complete.invocations.iter().map(|i| i.repetitions).sum();
            }
            b.warnings = Vec::new();
            for w in case.invocations.iter().flat_map(|i| &i.warnings) {
                if !b.warnings.contains(w) {
                    b.warnings.push(w.clone());
                }
            }
            b
        })
        .collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn normal(rng: &mut impl Rng) -> f64 {
        // Box–Muller; the library's one RNG is enough for a test.
        let (u, v): (f64, f64) = (rng.gen_range(f64::EPSILON..1.0), rng.gen());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    fn lognormal_sample(rng: &mut impl Rng, n: usize, median: f64, sigma: f64) -> Vec<f64> {
        (0..n).map(|_| median * (sigma * normal(rng)).exp()).collect()
    }

    #[test]
    fn the_change_interval_covers_the_truth_95_percent_of_the_time() {
        // Coverage checked by simulation: 4,000 pairs of 3..=6 replicates
        // with a 10 % CV, true change 0 % and +10 %.
        let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
        for truth in [1.0, 1.1] {
            let mut covered = 0;
            let trials = 4000;
            for i in 0..trials {
                let n = 3 + i % 4;
                let a = lognormal_sample(&mut rng, n, 100.0, 0.1);
                let b = lognormal_sample(&mut rng, n + i % 2, 100.0 * truth, 0.1);
                let c = change(&a, &b, 0.0).unwrap();
                covered += c.ci.contains(truth - 1.0) as usize;
            }
            let rate = covered as f64 / trials as f64;
            assert!((0.935..=0.965).contains(&rate), "coverage {rate} at truth {truth}");
        }
    }

    #[test]
    fn a_case_summary_follows_the_default_metric_and_judges_entities_by_their_mean() {
        use crate::{Condition, Direction, SimSetup, Unit};
        let cond = Condition::Sim(SimSetup { policy: "cfs".into(), cpus: 2, hz: 1000, seed: 1 });
        let invocation = |i: u32, shares: Vec<f64>, busy: f64| {
            let mut b = BenchResult::new("sim:hogs", cond.clone(), 0);
            b.invocation = i;
            b.status = BenchStatus::Complete;
            let labels = (0..shares.len()).map(|t| format!("task {t}")).collect();
            b.metrics.push(Metric {
                name: "cpu_share".into(),
                unit: Unit::Percent,
                direction: Direction::Neutral,
                headline: false,
                data: MetricData::Entities { entity: "task".into(), labels, values: shares },
            });
            b.metrics.push(Metric::samples("busy", Unit::Percent, Direction::Neutral, vec![busy]).headline());
            b
        };
        let benches = [invocation(0, vec![60.0, 40.0], 99.0), invocation(1, vec![70.0, 20.0], 98.0)];
        let cases = case_summaries(&benches);
        assert_eq!(cases.len(), 1);
        let c = &cases[0];
        assert_eq!((c.invocations, c.metrics.len()), (2, 2));
        let share = &c.metrics[0];
        // Not the first metric but the first headline one is followed.
        assert!(!share.default && c.metrics[1].default);
        // Each invocation's mean over its tasks: (60+40)/2 and (70+20)/2.
        assert_eq!(share.replicates, vec![50.0, 45.0]);
        assert_eq!(c.metrics[1].replicates, vec![99.0, 98.0]);
        assert!(c.metrics[1].ci.is_some() && share.ci.is_none(), "an interval across tasks would not be one");
    }

    #[test]
    fn the_interval_of_a_ratio_never_goes_below_minus_100_percent() {
        // The case that once printed [-595.4%, +695.4%]: wild replicates.
        let c = change(&[1.0, 100.0, 3.0], &[50.0, 0.5, 20.0], 0.02).unwrap();
        assert!(c.ci.lo > -1.0 && c.ci.hi > c.ci.lo, "{c:?}");
        let c = change(&[0.0, 10.0, 3.0], &[0.0, 0.0, 1.0], 0.02).unwrap();
        assert!(!c.log_scale && c.ci.lo >= -1.0, "{c:?}");
    }

    #[test]
    fn p_is_below_5_percent_exactly_when_the_interval_clears_the_band() {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(11);
        for _ in 0..500 {
            let a = lognormal_sample(&mut rng, 4, 100.0, 0.05);
            let shift = rng.gen_range(0.8..1.25);
            let b = lognormal_sample(&mut rng, 4, 100.0 * shift, 0.05);
            let band = 0.03;
            let c = change(&a, &b, band).unwrap();
            let clears = c.ci.lo > band || c.ci.hi < 1.0 / (1.0 + band) - 1.0;
            // Equal up to rounding at the edge.
            if (c.p - 0.05).abs() > 1e-9 {
                assert_eq!(c.p < 0.05, clears, "{c:?}");
            }
        }
    }

    #[test]
    fn a_and_a_rarely_clears_a_band_and_never_with_too_few_replicates() {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(3);
        let mut hits = 0;
        for _ in 0..2000 {
            let a = lognormal_sample(&mut rng, 5, 10.0, 0.2);
            let b = lognormal_sample(&mut rng, 5, 10.0, 0.2);
            hits += (change(&a, &b, 0.0).unwrap().p < 0.05) as usize;
        }
        // Nominal 5 % with no band.
        assert!((60..=140).contains(&hits), "{hits} of 2000");
        assert_eq!(change(&[1.0, 2.0], &[1.0, 2.0, 3.0], 0.0), Err(ChangeError::TooFew { a: 2, b: 3 }));
    }

    #[test]
    fn deterministic_replicates_decide_by_the_band_alone() {
        let c = change(&[10.0; 3], &[10.5; 3], 0.02).unwrap();
        assert_eq!(c.p, 0.0);
        let c = change(&[10.0; 3], &[10.1; 3], 0.02).unwrap();
        assert_eq!(c.p, 1.0);
    }

    #[test]
    fn benjamini_hochberg_matches_the_textbook_example() {
        // Benjamini & Hochberg (1995), 15 p-values: 4 rejected at q = 0.05.
        let p = [
            0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344, 0.0459, 0.3240, 0.4262, 0.5719, 0.6528,
            0.7590, 1.0,
        ];
        let r = benjamini_hochberg(&p, 0.05);
        assert_eq!(r.iter().filter(|&&x| x).count(), 4);
        assert!(r[..4].iter().all(|&x| x));
        assert!(benjamini_hochberg(&[], 0.05).is_empty());
    }

    #[test]
    fn the_run_to_run_band_is_a_95_percent_prediction_bound() {
        // Runs drawn with a 5 % run-to-run CV: a new pair of runs differs by
        // more than the band about 5 % of the time.
        let mut rng = rand_pcg::Pcg64::seed_from_u64(5);
        let (mut outside, trials) = (0, 4000);
        for _ in 0..trials {
            let runs = lognormal_sample(&mut rng, 6, 1000.0, 0.05);
            let band = run_to_run_band(&runs).unwrap();
            let pair = lognormal_sample(&mut rng, 2, 1000.0, 0.05);
            let r = pair[1] / pair[0];
            outside += (r > 1.0 + band || r < 1.0 / (1.0 + band)) as usize;
        }
        let rate = outside as f64 / trials as f64;
        assert!((0.035..=0.065).contains(&rate), "{rate}");
        assert_eq!(run_to_run_band(&[1.0, 2.0]), None);
    }

    #[test]
    fn invocation_values_read_each_level() {
        let s = MetricData::Samples { values: vec![1.0, 3.0] };
        assert_eq!(invocation_value(&s, Stat::Mean, None), Some(2.0));
        assert_eq!(invocation_value(&s, Stat::P99, None), None);
        let e = MetricData::Entities {
            entity: "task".into(),
            labels: vec!["a".into(), "b".into()],
            values: vec![1.0, 2.0],
        };
        assert_eq!(invocation_value(&e, Stat::Mean, Some("b")), Some(2.0));
        assert_eq!(invocation_value(&e, Stat::Mean, Some("c")), None);
        let mut h = LatencyHistogram::new();
        for v in 1..=1000 {
            h.record(v * 1000);
        }
        let d = MetricData::Histogram { histogram: h, repetitions: vec![] };
        let p99 = invocation_value(&d, Stat::P99, None).unwrap();
        assert!((p99 - 990_000.0).abs() < 1000.0, "{p99}");
    }
}
