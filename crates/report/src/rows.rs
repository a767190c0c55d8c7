//! Flattening a run into one row per (benchmark case, metric), with
//! summaries. A case's invocations are pooled into its row: point figures
//! from all their data, intervals from the invocations alone.

use schedlab_core::replicate::{cases, Case};
use schedlab_core::stats::{ksigma_histogram, ksigma_samples, Filtered, Summary};
use schedlab_core::{BenchStatus, Direction, MetricData, Run, Unit};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct MetricRow {
    pub run_id: Option<i64>,
    /// Benchmark name plus parameters, e.g. "pipe placement=same-cpu".
    pub benchmark: String,
    pub condition: String,
    pub status: String,
    pub metric: String,
    pub unit: Unit,
    pub direction: Direction,
    pub headline: bool,
    /// "samples" (one value per repetition), "histogram", "series" or
    /// "entities" (one value per task, thread, ...).
    pub kind: &'static str,
    /// Invocations pooled into this row (its replicates).
    pub invocations: usize,
    pub summary: Option<Summary>,
    /// Present when a k-sigma filter was requested.
    pub filtered: Option<Filtered>,
}

impl MetricRow {
    pub fn is_distribution(&self) -> bool {
        self.kind == "histogram"
    }
}

/// Options shared by every view.
#[derive(Debug, Clone, Default)]
pub struct RowOptions {
    /// Include non-headline metrics.
    pub all_metrics: bool,
    /// Apply E3's k-sigma filter and report it beside the raw figures.
    pub ksigma: Option<f64>,
    /// The host's noise profile: each row's run-to-run band is shown.
    pub profile: Option<crate::compare::NoiseProfile>,
    /// What the views know of each benchmark's parameters (benchmark →
    /// key → kind and defaults): terminal headings write durations and
    /// sizes with their unit and leave out parameters at their default
    /// (unless they vary within the run).
    pub params: ParamTable,
}

/// Benchmark name (`pipe`, `sim:hackbench`) → parameter key → what it is.
pub type ParamTable = std::collections::BTreeMap<String, std::collections::BTreeMap<String, ParamInfo>>;

/// A parameter as the views need it: its kind and its canonical defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamInfo {
    pub kind: schedlab_core::param::Kind,
    pub default: String,
    /// The default in quick mode, when it differs.
    pub quick_default: Option<String>,
}

impl ParamInfo {
    /// `default` and `quick_default` as given (e.g. `5ms`), made canonical.
    pub fn new(kind: schedlab_core::param::Kind, default: &str, quick_default: Option<&str>) -> ParamInfo {
        let canonical = |v: &str| kind.parse(v).unwrap_or_else(|_| v.to_string());
        ParamInfo { kind, default: canonical(default), quick_default: quick_default.map(canonical) }
    }

    /// Whether a stored value is the default for a result run in `quick` mode.
    pub fn is_default(&self, value: &str, quick: bool) -> bool {
        let v = self.kind.parse(value).unwrap_or_else(|_| value.to_string());
        v == self.default || (quick && self.quick_default.as_deref() == Some(v.as_str()))
    }
}

pub fn rows_of_run(run: &Run, opts: &RowOptions) -> Vec<MetricRow> {
    let mut rows = Vec::new();
    for case in cases(&run.benchmarks, false) {
        rows.extend(rows_of_case(run.id, &case, opts));
    }
    rows
}

/// Rows of one case: its complete invocations pooled (or, when none is
/// complete, the first invocation's status with no data).
pub fn rows_of_case(run_id: Option<i64>, case: &Case<'_>, opts: &RowOptions) -> Vec<MetricRow> {
    let complete: Vec<_> = case.invocations.iter().copied().filter(|b| b.status == BenchStatus::Complete).collect();
    let first = case.invocations[0];
    let status = match (complete.len(), case.invocations.len(), &first.status) {
        (c, n, _) if c == n => "complete".to_string(),
        (c, n, _) if c > 0 => format!("complete ({c} of {n} invocations)"),
        (_, _, BenchStatus::Incomplete { reason }) => format!("incomplete: {reason}"),
        (_, _, BenchStatus::Failed { reason }) => format!("failed: {reason}"),
        (_, _, BenchStatus::Complete) => "complete".to_string(),
    };
    let pooled = Case { key: case.key.clone(), condition: case.condition.clone(), invocations: complete };
    let mut rows = Vec::new();
    let names = pooled.metric_names();
    let any_headline = names.iter().any(|n| pooled.metric(n).is_some_and(|m| m.headline));
    for name in names {
        let Some(m) = pooled.pooled(name) else { continue };
        if !opts.all_metrics && any_headline && !m.headline {
            continue;
        }
        let kind = match m.data {
            MetricData::Samples { .. } => "samples",
            MetricData::Histogram { .. } => "histogram",
            MetricData::Series { .. } => "series",
            MetricData::Entities { .. } => "entities",
        };
        let filtered = opts.ksigma.map(|k| match &m.data {
            MetricData::Samples { values } => ksigma_samples(values, k),
            MetricData::Histogram { histogram, .. } => ksigma_histogram(histogram, k),
            MetricData::Series { series } => ksigma_samples(&series.values, k),
            MetricData::Entities { values, .. } => ksigma_samples(values, k),
        });
        rows.push(MetricRow {
            run_id,
            benchmark: case.key.clone(),
            condition: first.condition.label(),
            status: status.clone(),
            metric: m.name.clone(),
            unit: m.unit,
            direction: m.direction,
            headline: m.headline,
            kind,
            invocations: pooled.invocations.len(),
            summary: pooled.summary(name),
            filtered,
        });
    }
    if rows.is_empty() {
        rows.push(MetricRow {
            run_id,
            benchmark: case.key.clone(),
            condition: first.condition.label(),
            status,
            metric: "-".into(),
            unit: Unit::Count,
            direction: Direction::Neutral,
            headline: true,
            kind: "samples",
            invocations: 0,
            summary: None,
            filtered: None,
        });
    }
    rows
}
