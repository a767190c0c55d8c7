//! Flattening a run into one row per (benchmark, metric), with summaries.

use schedlab_core::stats::{ksigma_histogram, ksigma_samples, Filtered, Summary};
use schedlab_core::{BenchResult, BenchStatus, Direction, MetricData, Run, Unit};
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
    /// "samples" (one value per repetition), "histogram" or "series".
    pub kind: &'static str,
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
}

pub fn rows_of_run(run: &Run, opts: &RowOptions) -> Vec<MetricRow> {
    let mut rows = Vec::new();
    for b in &run.benchmarks {
        rows.extend(rows_of_bench(run.id, b, opts));
    }
    rows
}

pub fn rows_of_bench(run_id: Option<i64>, b: &BenchResult, opts: &RowOptions) -> Vec<MetricRow> {
    let status = match &b.status {
        BenchStatus::Complete => "complete".to_string(),
        BenchStatus::Incomplete { reason } => format!("incomplete: {reason}"),
        BenchStatus::Failed { reason } => format!("failed: {reason}"),
    };
    let mut rows = Vec::new();
    let any_headline = b.metrics.iter().any(|m| m.headline);
    for m in &b.metrics {
        if !opts.all_metrics && any_headline && !m.headline {
            continue;
        }
        let kind = match m.data {
            MetricData::Samples { .. } => "samples",
            MetricData::Histogram { .. } => "histogram",
            MetricData::Series { .. } => "series",
        };
        let filtered = opts.ksigma.map(|k| match &m.data {
            MetricData::Samples { values } => ksigma_samples(values, k),
            MetricData::Histogram { histogram, .. } => ksigma_histogram(histogram, k),
            MetricData::Series { series } => ksigma_samples(&series.values, k),
        });
        rows.push(MetricRow {
            run_id,
            benchmark: b.key(),
            condition: b.condition.label(),
            status: status.clone(),
            metric: m.name.clone(),
            unit: m.unit,
            direction: m.direction,
            headline: m.headline,
            kind,
            summary: m.summary(),
            filtered,
        });
    }
    if b.metrics.is_empty() {
        rows.push(MetricRow {
            run_id,
            benchmark: b.key(),
            condition: b.condition.label(),
            status,
            metric: "-".into(),
            unit: Unit::Count,
            direction: Direction::Neutral,
            headline: true,
            kind: "samples",
            summary: None,
            filtered: None,
        });
    }
    rows
}
