//! The result model: a run holds benchmark results, a benchmark result holds
//! metrics, a metric holds raw data (samples, a histogram or a time series).
//! Summaries are never stored; they are computed from the raw data by
//! [`crate::stats`]. The JSON form of [`Run`] is the interchange format and
//! carries [`SCHEMA_VERSION`].

use crate::condition::Condition;
use crate::environment::Environment;
use crate::histogram::LatencyHistogram;
use crate::stats::Summary;
use crate::units::Unit;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the JSON interchange format and of the store's logical schema.
/// Bump when a field changes meaning or a required field is added.
/// 2: `BenchResult::invocation` and entity-labelled data (`MetricData::Entities`).
pub const SCHEMA_VERSION: u32 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunKind {
    Live,
    Sim,
    /// Imported from another tool's output.
    Import,
}

impl RunKind {
    pub fn name(self) -> &'static str {
        match self {
            RunKind::Live => "live",
            RunKind::Sim => "sim",
            RunKind::Import => "import",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Running,
    Complete,
    /// Stopped by Ctrl-C, SIGTERM or a timeout; finished benchmarks are kept.
    Interrupted,
    Failed,
}

impl RunStatus {
    pub fn name(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Complete => "complete",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolInfo {
    pub name: String,
    pub version: String,
    /// Git revision the binary was built from, if known.
    pub git_rev: Option<String>,
}

/// One invocation of schedlab (or one imported result set).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub schema_version: u32,
    /// Assigned by the store; `None` until stored.
    pub id: Option<i64>,
    /// Optional user-given name (`run --name`).
    pub name: Option<String>,
    pub kind: RunKind,
    pub status: RunStatus,
    pub started_unix_ms: i64,
    pub ended_unix_ms: Option<i64>,
    pub tool: ToolInfo,
    pub command_line: Vec<String>,
    pub host: String,
    pub env_start: Option<Environment>,
    pub env_end: Option<Environment>,
    pub benchmarks: Vec<BenchResult>,
    /// The user's `--label KEY=VALUE` tags (e.g. `kernel=6.18-rt`), by which
    /// fleet queries select and group runs; absent from older JSON.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

impl Run {
    pub fn new(kind: RunKind, tool: ToolInfo, command_line: Vec<String>, host: String, started_unix_ms: i64) -> Run {
        Run {
            schema_version: SCHEMA_VERSION,
            id: None,
            name: None,
            kind,
            status: RunStatus::Running,
            started_unix_ms,
            ended_unix_ms: None,
            tool,
            command_line,
            host,
            env_start: None,
            env_end: None,
            benchmarks: Vec::new(),
            labels: BTreeMap::new(),
        }
    }

    /// What a history row shows of this run.
    pub fn head(&self) -> RunHead {
        let kernel = self.env_start.as_ref().and_then(|e| e.kernel_release.clone());
        RunHead::new(self.id, self.name.as_deref(), self.started_unix_ms, self.host.clone(), kernel)
    }

    /// Human label: "#12 baseline" or "#12".
    pub fn label(&self) -> String {
        run_label(self.id, self.name.as_deref())
    }

    pub fn started_at(&self) -> String {
        format_unix_ms(self.started_unix_ms)
    }
}

/// Why `name` cannot name a run, if it cannot: it must not be empty, and
/// must not read as another selector (`last`, `last~N`, an id, `#id`) or
/// as several runs pooled (`A,B` in `compare`).
pub fn run_name_problem(name: &str) -> Option<String> {
    let n = name.trim();
    let id_like = n.trim_start_matches('#');
    if n.is_empty() {
        Some("a run name cannot be empty".into())
    } else if n == "last" || n.starts_with("last~") {
        Some(format!("'{n}' already means the newest runs (last, last~N)"))
    } else if !id_like.is_empty() && id_like.bytes().all(|b| b.is_ascii_digit()) {
        Some(format!("'{n}' reads as a run id"))
    } else if n.contains(',') {
        Some(format!("'{n}' has a comma, which `compare` reads as several runs pooled"))
    } else {
        None
    }
}

/// Longest label key and value: labels are tags, not documents.
pub const MAX_LABEL_KEY: usize = 64;
pub const MAX_LABEL_VALUE: usize = 200;

/// Why `key`=`value` cannot be a run's label, if it cannot. A key is a
/// letter then letters, digits, `_`, `.` or `-` (it is written in `--by
/// label:KEY` and in URLs); a value is non-empty printable text without
/// surrounding spaces.
pub fn label_problem(key: &str, value: &str) -> Option<String> {
    if key.is_empty() {
        return Some("the key is empty".into());
    }
    if !key.starts_with(|c: char| c.is_ascii_alphabetic())
        || !key.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
    {
        return Some(format!("the key '{key}' must be a letter followed by letters, digits, '_', '.' or '-'"));
    }
    if key.len() > MAX_LABEL_KEY {
        return Some(format!("the key is longer than {MAX_LABEL_KEY} characters"));
    }
    if value.is_empty() {
        return Some(format!("the value of '{key}' is empty"));
    }
    if value.trim() != value || value.chars().any(char::is_control) {
        return Some(format!("the value of '{key}' has surrounding spaces or control characters"));
    }
    if value.chars().count() > MAX_LABEL_VALUE {
        return Some(format!("the value of '{key}' is longer than {MAX_LABEL_VALUE} characters"));
    }
    None
}

/// `KEY=VALUE` as a label, or why it is not one (the message names the
/// argument and the form expected).
pub fn parse_label(arg: &str) -> Result<(String, String), String> {
    let Some((key, value)) = arg.split_once('=') else {
        return Err(format!("label '{arg}' has no '=': write KEY=VALUE, e.g. --label kernel=6.18-rt"));
    };
    match label_problem(key, value) {
        Some(problem) => Err(format!("label '{arg}': {problem}; write KEY=VALUE, e.g. --label kernel=6.18-rt")),
        None => Ok((key.to_string(), value.to_string())),
    }
}

/// "2026-11-22 11:12:39 UTC"
pub fn format_unix_ms(ms: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| format!("{ms} ms"))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum BenchStatus {
    Complete,
    /// Started but did not finish (interrupted, or the process died).
    Incomplete {
        reason: String,
    },
    /// Could not measure; `reason` says why. Its metrics are absent.
    Failed {
        reason: String,
    },
}

impl BenchStatus {
    pub fn name(&self) -> &'static str {
        match self {
            BenchStatus::Complete => "complete",
            BenchStatus::Incomplete { .. } => "incomplete",
            BenchStatus::Failed { .. } => "failed",
        }
    }
}

/// One invocation of one benchmark case (or one seed of a simulated
/// workload) under one condition.
///
/// The replication hierarchy is run → invocation → repetition → sample: a
/// run holds several `BenchResult`s with the same [`BenchResult::key`], one
/// per invocation (a separate execution of the case, in its own process
/// where the benchmark has one; a seed in the simulator); each holds its
/// repetitions' values, and latency metrics each repetition's samples.
/// Invocations are the replicates that intervals and verdicts rest on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    /// Benchmark name, e.g. "pipe", or "sim:hackbench" for a workload.
    pub name: String,
    /// Parameters as given (after defaults were applied), e.g.
    /// {"placement": "cross-cpu", "mode": "process"}.
    pub params: BTreeMap<String, serde_json::Value>,
    pub condition: Condition,
    /// 0-based index of this invocation of the case within its run.
    #[serde(default)]
    pub invocation: u32,
    pub status: BenchStatus,
    pub started_unix_ms: i64,
    pub ended_unix_ms: Option<i64>,
    /// Repetitions measured (after warm-up).
    pub repetitions: u32,
    /// Warm-up repetitions run and discarded.
    pub warmup: u32,
    pub metrics: Vec<Metric>,
    /// Soft problems the user should know about (e.g. "not pinned", "VM").
    pub warnings: Vec<String>,
    /// Run in quick mode, whose defaults are smaller: a parameter at the
    /// quick default is a default only here.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub quick: bool,
    /// Each task's scheduler state over time (`run --observe`, `sim
    /// --timeline`); absent from older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<crate::timeline::Timeline>,
}

impl BenchResult {
    pub fn new(name: impl Into<String>, condition: Condition, started_unix_ms: i64) -> BenchResult {
        BenchResult {
            name: name.into(),
            params: BTreeMap::new(),
            condition,
            invocation: 0,
            status: BenchStatus::Incomplete { reason: "running".into() },
            started_unix_ms,
            ended_unix_ms: None,
            repetitions: 0,
            warmup: 0,
            metrics: Vec::new(),
            warnings: Vec::new(),
            quick: false,
            timeline: None,
        }
    }

    pub fn param(mut self, key: &str, value: impl Into<serde_json::Value>) -> Self {
        self.params.insert(key.to_string(), value.into());
        self
    }

    pub fn metric(&self, name: &str) -> Option<&Metric> {
        self.metrics.iter().find(|m| m.name == name)
    }

    /// Whether parameter `key` has the value a user typed as `value`
    /// (strings compare as text, numbers and booleans by their JSON form).
    pub fn param_is(&self, key: &str, value: &str) -> bool {
        param_is(&self.params, key, value)
    }

    /// "pipe placement=cross-cpu mode=process" — stable, used to match the
    /// same benchmark across runs.
    pub fn key(&self) -> String {
        let mut s = self.name.clone();
        for (k, v) in &self.params {
            let v = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            s.push_str(&format!(" {k}={v}"));
        }
        s
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    HigherIsBetter,
    LowerIsBetter,
    /// Informational (e.g. a load's own throughput).
    Neutral,
}

impl Direction {
    pub fn arrow(self) -> &'static str {
        match self {
            Direction::HigherIsBetter => "higher is better",
            Direction::LowerIsBetter => "lower is better",
            Direction::Neutral => "informational",
        }
    }
}

/// A series sampled over time within one run (e.g. pages served per second).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimeSeries {
    /// Offset from the benchmark start, ns.
    pub t_ns: Vec<u64>,
    pub values: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MetricData {
    /// One value per repetition, in the metric's unit.
    Samples {
        values: Vec<f64>,
    },
    /// Every individual latency (ns) of all repetitions, merged, and the
    /// same samples split by repetition (empty when not recorded) so that
    /// run-to-run variation can be judged, not only sampling error.
    Histogram {
        histogram: LatencyHistogram,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        repetitions: Vec<LatencyHistogram>,
    },
    Series {
        series: TimeSeries,
    },
    /// One value per entity (task, thread, class, CPU) of one invocation.
    /// Entities are not replicates: they are shown per entity and compared
    /// entity by entity across invocations, never averaged into an interval.
    Entities {
        /// What an entity is: "task", "thread", "cpu", ...
        entity: String,
        labels: Vec<String>,
        values: Vec<f64>,
    },
}

/// The level of the replication hierarchy a metric's values sit at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// One value per repetition.
    Repetition,
    /// Individual observations (latencies), grouped by repetition.
    Sample,
    /// Values over time within one invocation.
    Series,
    /// One value per entity; not a replicate.
    Entity,
}

impl MetricData {
    /// Decode the JSON form when its `type` is already known (the store keeps
    /// it in a column). Serde buffers an internally tagged enum in a generic
    /// tree before choosing the variant; going straight to the variant's
    /// fields decodes a histogram-heavy store about twice as fast.
    pub fn from_json_of_type(type_tag: &str, json: &str) -> serde_json::Result<MetricData> {
        #[derive(Deserialize)]
        struct Samples {
            values: Vec<f64>,
        }
        #[derive(Deserialize)]
        struct Histogram {
            histogram: LatencyHistogram,
            #[serde(default)]
            repetitions: Vec<LatencyHistogram>,
        }
        #[derive(Deserialize)]
        struct Series {
            series: TimeSeries,
        }
        #[derive(Deserialize)]
        struct Entities {
            entity: String,
            labels: Vec<String>,
            values: Vec<f64>,
        }
        Ok(match type_tag {
            "samples" => MetricData::Samples { values: serde_json::from_str::<Samples>(json)?.values },
            "histogram" => {
                let h: Histogram = serde_json::from_str(json)?;
                MetricData::Histogram { histogram: h.histogram, repetitions: h.repetitions }
            }
            "series" => MetricData::Series { series: serde_json::from_str::<Series>(json)?.series },
            "entities" => {
                let e: Entities = serde_json::from_str(json)?;
                MetricData::Entities { entity: e.entity, labels: e.labels, values: e.values }
            }
            _ => serde_json::from_str(json)?,
        })
    }

    pub fn level(&self) -> Level {
        match self {
            MetricData::Samples { .. } => Level::Repetition,
            MetricData::Histogram { .. } => Level::Sample,
            MetricData::Series { .. } => Level::Series,
            MetricData::Entities { .. } => Level::Entity,
        }
    }
}

/// A benchmark warning that starts with this explains why some of the
/// kernel's counters (`kernel.*` metrics, live runs) are absent: detail that
/// views show only along with the non-headline metrics (`show --all`).
pub const KERNEL_NOTE_PREFIX: &str = "kernel counters: ";
/// The names of the kernel's counters of the measured tasks start with this.
pub const KERNEL_METRIC_PREFIX: &str = "kernel.";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// e.g. "round_trips_per_s", "round_trip_latency".
    pub name: String,
    /// For histograms this is always nanoseconds.
    pub unit: Unit,
    pub direction: Direction,
    pub data: MetricData,
    /// Headline metrics appear in summary tables.
    #[serde(default)]
    pub headline: bool,
}

impl Metric {
    pub fn samples(name: &str, unit: Unit, direction: Direction, values: Vec<f64>) -> Metric {
        Metric { name: name.into(), unit, direction, data: MetricData::Samples { values }, headline: false }
    }

    pub fn histogram(name: &str, direction: Direction, histogram: LatencyHistogram) -> Metric {
        Metric {
            name: name.into(),
            unit: Unit::Nanoseconds,
            direction,
            data: MetricData::Histogram { histogram, repetitions: Vec::new() },
            headline: false,
        }
    }

    /// A latency metric from one histogram per repetition; the merged
    /// histogram is kept beside them.
    pub fn histogram_per_repetition(name: &str, direction: Direction, repetitions: Vec<LatencyHistogram>) -> Metric {
        let mut histogram = LatencyHistogram::new();
        for h in &repetitions {
            histogram.merge(h);
        }
        Metric {
            name: name.into(),
            unit: Unit::Nanoseconds,
            direction,
            data: MetricData::Histogram { histogram, repetitions },
            headline: false,
        }
    }

    /// One value per entity (e.g. each task's CPU share); `labels` name them.
    pub fn entities(
        name: &str,
        unit: Unit,
        direction: Direction,
        entity: &str,
        labels: Vec<String>,
        values: Vec<f64>,
    ) -> Metric {
        Metric {
            name: name.into(),
            unit,
            direction,
            data: MetricData::Entities { entity: entity.into(), labels, values },
            headline: false,
        }
    }

    pub fn series(name: &str, unit: Unit, direction: Direction, series: TimeSeries) -> Metric {
        Metric { name: name.into(), unit, direction, data: MetricData::Series { series }, headline: false }
    }

    pub fn headline(mut self) -> Metric {
        self.headline = true;
        self
    }

    /// The scalar values (None for a histogram, whose buckets are integers).
    fn scalar_values(&self) -> Option<&[f64]> {
        match &self.data {
            MetricData::Samples { values } | MetricData::Entities { values, .. } => Some(values),
            MetricData::Series { series } => Some(&series.values),
            MetricData::Histogram { .. } => None,
        }
    }

    /// The first value that is not a finite number (NaN, ±inf): such a value
    /// cannot be stored faithfully (JSON has no NaN) and breaks every view.
    pub fn first_non_finite(&self) -> Option<f64> {
        self.scalar_values()?.iter().copied().find(|v| !v.is_finite())
    }

    /// The first negative value: every metric schedlab knows (times, rates,
    /// counts, shares) is a quantity that cannot be below zero.
    pub fn first_negative(&self) -> Option<f64> {
        self.scalar_values()?.iter().copied().find(|v| *v < 0.0)
    }

    /// Summary statistics of the raw data (None for an empty metric).
    pub fn summary(&self) -> Option<Summary> {
        match &self.data {
            MetricData::Samples { values } => Summary::of_samples(values),
            MetricData::Histogram { histogram, repetitions } => {
                Summary::of_histogram_with_repetitions(histogram, repetitions)
            }
            MetricData::Series { series } => Summary::of_samples(&series.values),
            // Across entities: the spread is real, an interval would not be.
            MetricData::Entities { values, .. } => Summary::of_samples(values).map(Summary::without_intervals),
        }
    }
}

/// What a history row shows of its run (the store reads it without the
/// run's results).
#[derive(Debug, Clone, PartialEq)]
pub struct RunHead {
    pub id: Option<i64>,
    /// [`Run::label`].
    pub label: String,
    pub started_unix_ms: i64,
    pub host: String,
    /// The start environment's kernel release, "unknown" without one.
    pub kernel: String,
}

impl RunHead {
    pub fn new(
        id: Option<i64>,
        name: Option<&str>,
        started_unix_ms: i64,
        host: String,
        kernel: Option<String>,
    ) -> RunHead {
        RunHead {
            id,
            label: run_label(id, name),
            started_unix_ms,
            host,
            kernel: kernel.unwrap_or_else(|| "unknown".into()),
        }
    }
}

fn run_label(id: Option<i64>, name: Option<&str>) -> String {
    match (id, name) {
        (Some(id), Some(n)) => format!("#{id} {n}"),
        (Some(id), None) => format!("#{id}"),
        (None, Some(n)) => n.to_string(),
        (None, None) => "unsaved run".into(),
    }
}

/// Whether parameter `key` reads `value` as a user types it (`loops=1000`,
/// `mlock=true`, `placement=same-cpu`).
pub fn param_is(params: &BTreeMap<String, serde_json::Value>, key: &str, value: &str) -> bool {
    params.get(key).is_some_and(|p| match p {
        serde_json::Value::String(s) => s == value,
        // Not `*other == value`: a JSON number never equals a str.
        other => value == other.to_string().as_str(),
    })
}

/// Bring a metric written by schema 1 to schema 2: the simulator stored its
/// per-task values (`cpu_share`, `fair_share_error`) as if they were
/// repetitions; they become entity-labelled values. True if it changed.
pub fn upgrade_v1_metric(bench_name: &str, metric: &mut Metric) -> bool {
    if !bench_name.starts_with("sim:") || !matches!(metric.name.as_str(), "cpu_share" | "fair_share_error") {
        return false;
    }
    let MetricData::Samples { values } = &metric.data else { return false };
    let labels = (0..values.len()).map(|i| format!("task {i}")).collect();
    metric.data = MetricData::Entities { entity: "task".into(), labels, values: values.clone() };
    true
}

/// The row a simulated `interactive` result fills in the live benchmark's
/// table: its background loads named as the live rows are (`burn`, `video`,
/// `x`, joined by `+`; `none` without), from the workload's parameters.
pub fn interactive_load_label(params: &BTreeMap<String, serde_json::Value>) -> String {
    let on = |k: &str| params.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0) > 0;
    let parts: Vec<&str> = [("burn", "burn"), ("video_load", "video"), ("x_load", "x")]
        .iter()
        .filter(|(k, _)| on(k))
        .map(|p| p.1)
        .collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join("+")
    }
}

/// A simulated `interactive` result stored before it reported the live
/// benchmark's figures: its `deadlines_met.TASK`, one sample, becomes one
/// entity labelled by its load, as the live ones are (read-time renaming:
/// compare accepts both). True if anything changed.
pub fn upgrade_sim_interactive(b: &mut BenchResult) -> bool {
    if b.name != "sim:interactive" {
        return false;
    }
    let label = interactive_load_label(&b.params);
    let mut changed = false;
    for m in b.metrics.iter_mut().filter(|m| m.name.starts_with("deadlines_met.")) {
        if let MetricData::Samples { values } = &m.data {
            if values.len() == 1 {
                m.data =
                    MetricData::Entities { entity: "load".into(), labels: vec![label.clone()], values: values.clone() };
                changed = true;
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::condition::{SchedCondition, SimSetup};

    #[test]
    fn v1_simulator_task_values_become_entities() {
        let mut m = Metric::samples("cpu_share", Unit::Percent, Direction::Neutral, vec![50.0, 30.0, 20.0]);
        assert!(upgrade_v1_metric("sim:hogs", &mut m));
        assert_eq!(m.data.level(), Level::Entity);
        let s = m.summary().unwrap();
        assert_eq!((s.n, s.mean_ci), (3, None), "entities never get an interval");
        let mut live = Metric::samples("cpu_share", Unit::Percent, Direction::Neutral, vec![1.0, 2.0]);
        assert!(!upgrade_v1_metric("pipe", &mut live));
        let sim = Condition::Sim(SimSetup { policy: "cfs".into(), cpus: 1, hz: 1000, seed: 1 });
        let mut v1 = serde_json::to_value(BenchResult::new("sim:hogs", sim, 0)).unwrap();
        v1.as_object_mut().unwrap().remove("invocation");
        let b: BenchResult = serde_json::from_value(v1).unwrap();
        assert_eq!(b.invocation, 0, "a schema-1 result is its run's only invocation");
    }

    #[test]
    fn param_is_compares_what_a_user_types() {
        let cond = Condition::Live { requested: SchedCondition::default(), applied: None, loads: vec![] };
        let b =
            BenchResult::new("pipe", cond, 0).param("placement", "same-cpu").param("loops", 1000).param("mlock", true);
        assert!(b.param_is("placement", "same-cpu") && b.param_is("loops", "1000") && b.param_is("mlock", "true"));
        assert!(!b.param_is("placement", "\"same-cpu\"") && !b.param_is("loops", "100") && !b.param_is("nope", "1"));
    }

    fn sample_run() -> Run {
        let tool = ToolInfo { name: "schedlab".into(), version: "0.1.0".into(), git_rev: Some("abc".into()) };
        let mut run =
            Run::new(RunKind::Live, tool, vec!["schedlab".into(), "run".into()], "host".into(), 1_700_000_000_000);
        let cond = Condition::Live { requested: SchedCondition::default(), applied: None, loads: vec![] };
        let mut b = BenchResult::new("pipe", cond, 1_700_000_000_001).param("placement", "same-cpu");
        b.metrics.push(
            Metric::samples("round_trips_per_s", Unit::PerSecond, Direction::HigherIsBetter, vec![1.0, 2.0]).headline(),
        );
        let mut h = LatencyHistogram::new();
        h.record(1500);
        b.metrics.push(Metric::histogram("round_trip_latency", Direction::LowerIsBetter, h.clone()));
        b.metrics.push(Metric::histogram_per_repetition("per_rep", Direction::LowerIsBetter, vec![h.clone(), h]));
        b.status = BenchStatus::Complete;
        run.benchmarks.push(b);
        let sim = Condition::Sim(SimSetup { policy: "cfs".into(), cpus: 2, hz: 1000, seed: 7 });
        run.benchmarks.push(BenchResult::new("sim:hogs", sim, 0));
        run
    }

    #[test]
    fn json_round_trip_is_lossless() {
        let run = sample_run();
        let json = serde_json::to_string_pretty(&run).unwrap();
        assert!(json.contains("\"schema_version\": 2"));
        let back: Run = serde_json::from_str(&json).unwrap();
        assert_eq!(back, run);
    }

    #[test]
    fn labels_round_trip_and_older_json_has_none() {
        let mut run = sample_run();
        let plain = serde_json::to_string(&run).unwrap();
        assert!(!plain.contains("labels"), "no labels, no field: older readers see what they saw");
        assert!(serde_json::from_str::<Run>(&plain).unwrap().labels.is_empty());
        run.labels.insert("kernel".into(), "6.18-rt".into());
        let back: Run = serde_json::from_str(&serde_json::to_string(&run).unwrap()).unwrap();
        assert_eq!(back.labels.get("kernel").map(String::as_str), Some("6.18-rt"));
    }

    #[test]
    fn bad_labels_are_refused_with_the_form_expected() {
        assert_eq!(parse_label("kernel=6.18-rt").unwrap(), ("kernel".into(), "6.18-rt".into()));
        assert_eq!(parse_label("a.b_c-d=x=y").unwrap(), ("a.b_c-d".into(), "x=y".into()));
        for bad in ["noequals", "=v", "k=", "1k=v", "k y=v", "k=\tv", "k= v", "<s>=v"] {
            let e = parse_label(bad).unwrap_err();
            assert!(e.contains("KEY=VALUE"), "{bad}: {e}");
        }
        assert!(parse_label(&format!("{}=v", "k".repeat(65))).is_err());
        assert!(parse_label(&format!("k={}", "v".repeat(201))).is_err());
    }

    #[test]
    fn run_names_that_read_as_selectors_are_refused() {
        for bad in ["", " ", "last", "last~2", "7", "#7", "a,b"] {
            assert!(run_name_problem(bad).is_some(), "{bad:?}");
        }
        for good in ["baseline", "rt-default", "v6.12", "7a", "last-week"] {
            assert_eq!(run_name_problem(good), None, "{good:?}");
        }
    }

    #[test]
    fn typed_decoding_matches_the_generic_one() {
        let mut h = LatencyHistogram::new();
        h.record(1500);
        let all = [
            MetricData::Samples { values: vec![1.0, 2.5] },
            MetricData::Histogram { histogram: h.clone(), repetitions: vec![h.clone(), h] },
            MetricData::Series { series: TimeSeries { t_ns: vec![1, 2], values: vec![3.0, 4.0] } },
            MetricData::Entities { entity: "task".into(), labels: vec!["a".into()], values: vec![9.0] },
        ];
        for d in all {
            let json = serde_json::to_value(&d).unwrap();
            let tag = json["type"].as_str().unwrap().to_string();
            assert_eq!(MetricData::from_json_of_type(&tag, &json.to_string()).unwrap(), d);
        }
        assert!(MetricData::from_json_of_type("histogram", r#"{"type":"histogram"}"#).is_err());
    }

    #[test]
    fn bench_key_includes_params_in_order() {
        let run = sample_run();
        assert_eq!(run.benchmarks[0].key(), "pipe placement=same-cpu");
        assert_eq!(run.benchmarks[0].metric("round_trips_per_s").unwrap().summary().unwrap().mean, 1.5);
    }
}
