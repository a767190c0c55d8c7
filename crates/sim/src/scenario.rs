//! Scenarios: a seed's experiment as one file. A scenario names policies ×
//! workloads × run options and the tables to print, with the seed's
//! published figures beside the simulated ones; `schedlab sim --scenario e3`
//! runs a shipped one (`scenarios/*.toml`, compiled in) or a file.
//!
//! # Format (TOML; every key is checked, an unknown one is an error)
//! ```toml
//! name = "e3"                     # optional
//! title = "E3 (Toshiba, 2006): ..."
//! source = "seeds-digest.md E3"   # optional: what it reproduces
//! seed_label = "E3"               # optional: label of the seed's rows ("seed")
//!
//! [options]                       # every table's run options (all optional):
//! cpus = 1                        #   cpus, hz, seeds, seed, max_events (numbers);
//! duration = "600s"               #   duration, ctx_switch, migration, scan_cost,
//!                                 #   queue_cost, lock_cost, ipi_cost, ipi_latency
//!                                 #   (durations with a unit, as `sim`'s flags)
//! [[table]]
//! title = "hackbench 30"
//! workload = "hackbench:groups=30"            # a workload spec, as --workload
//! policies = ["o1", "ingo_ll"]                # policy specs, as --policy
//! labels = ["ingosched", "ingo_ll"]           # optional row labels (default: the specs)
//! options = { cpus = 1 }                      # optional: this table's own options
//! sigma = 6                                   # optional: E3's k-sigma filter on latency columns
//! columns = [{ metric = "makespan", stat = "mean", unit = "s", label = "time", decimals = 3 }]
//! note = "..."                                # optional, printed under the table
//! [table.seed]                                # optional: the seed's figures, per row label,
//! ingosched = [38.620]                        #   one per column (nan: not published)
//! ```
//! A column's `stat` is one of `mean` (the default), `min`, `max`, `sd`,
//! `median`, `p99`, `n` (samples, or seeds for a per-run value) and
//! `dropped` (samples the k-sigma filter removed). Latency histograms are
//! merged over the seeds; a per-run value (makespan, round trips/s) is
//! summarised over the seeds. `unit` (`ns`, `us`, `ms`, `s`) converts a time
//! metric. Options in the file win over `sim`'s flags; flags set what the
//! file leaves out.

use crate::{check_run, run_seeds, CostTable, SimError, SimOptions, SimOutcome, RUN_PARAMS};
use schedlab_core::param::parse_count;
use schedlab_core::stats::{ksigma_histogram, Summary};
use schedlab_core::{LatencyHistogram, MetricData, Unit};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The scenarios shipped in the repository's `scenarios/`: (name, contents).
const SHIPPED: &[(&str, &str)] = &[
    ("e1", include_str!("../../../scenarios/e1.toml")),
    ("e3", include_str!("../../../scenarios/e3.toml")),
    ("e4", include_str!("../../../scenarios/e4.toml")),
    ("e5", include_str!("../../../scenarios/e5.toml")),
];

/// Names of the shipped scenarios.
pub fn shipped_names() -> Vec<&'static str> {
    SHIPPED.iter().map(|s| s.0).collect()
}

/// Each shipped scenario's name and title, for `schedlab list`.
pub fn shipped_titles() -> Vec<(&'static str, String)> {
    #[derive(Deserialize)]
    struct Head {
        title: String,
    }
    SHIPPED
        .iter()
        .map(|(name, text)| (*name, toml::from_str::<Head>(text).map(|h| h.title).unwrap_or_default()))
        .collect()
}

/// A shipped scenario's file contents.
pub fn shipped(name: &str) -> Option<&'static str> {
    SHIPPED.iter().find(|s| s.0 == name).map(|s| s.1)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDef {
    name: Option<String>,
    title: String,
    source: Option<String>,
    seed_label: Option<String>,
    #[serde(default)]
    options: OptionsDef,
    #[serde(rename = "table")]
    tables: Vec<TableDef>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct OptionsDef {
    cpus: Option<u32>,
    hz: Option<u32>,
    seeds: Option<u32>,
    seed: Option<u64>,
    max_events: Option<u64>,
    duration: Option<String>,
    ctx_switch: Option<String>,
    migration: Option<String>,
    scan_cost: Option<String>,
    queue_cost: Option<String>,
    lock_cost: Option<String>,
    ipi_cost: Option<String>,
    ipi_latency: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TableDef {
    title: String,
    workload: String,
    policies: Vec<String>,
    labels: Option<Vec<String>>,
    #[serde(default)]
    options: OptionsDef,
    sigma: Option<f64>,
    columns: Vec<ColumnDef>,
    #[serde(default)]
    seed: BTreeMap<String, Vec<f64>>,
    note: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ColumnDef {
    metric: String,
    #[serde(default)]
    stat: Stat,
    unit: Option<TimeUnit>,
    label: Option<String>,
    decimals: Option<usize>,
}

/// What a column shows of its metric.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stat {
    #[default]
    Mean,
    Min,
    Max,
    Sd,
    Median,
    P99,
    N,
    Dropped,
}

impl Stat {
    fn of(self, s: &Summary, dropped: u64) -> f64 {
        match self {
            Stat::Mean => s.mean,
            Stat::Min => s.min,
            Stat::Max => s.max,
            Stat::Sd => s.sd,
            Stat::Median => s.median,
            Stat::P99 => s.p99,
            Stat::N => s.n as f64,
            Stat::Dropped => dropped as f64,
        }
    }

    fn is_count(self) -> bool {
        matches!(self, Stat::N | Stat::Dropped)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeUnit {
    Ns,
    Us,
    Ms,
    S,
}

impl TimeUnit {
    fn ns(self) -> f64 {
        match self {
            TimeUnit::Ns => 1.0,
            TimeUnit::Us => 1e3,
            TimeUnit::Ms => 1e6,
            TimeUnit::S => 1e9,
        }
    }
}

/// A column of a scenario table.
#[derive(Debug, Clone)]
pub struct Column {
    pub metric: String,
    pub stat: Stat,
    pub unit: Option<TimeUnit>,
    pub label: String,
    pub decimals: usize,
}

/// One table: its policies run the workload with the table's options.
#[derive(Debug, Clone)]
pub struct Table {
    pub title: String,
    pub workload: String,
    /// (policy spec, row label)
    pub policies: Vec<(String, String)>,
    pub opts: SimOptions,
    pub seeds: u32,
    pub sigma: Option<f64>,
    pub columns: Vec<Column>,
    /// The seed's figures by row label, one per column (NaN: not published).
    pub seed: BTreeMap<String, Vec<f64>>,
    pub note: Option<String>,
}

/// A parsed and checked scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: Option<String>,
    pub title: String,
    pub source: Option<String>,
    pub seed_label: String,
    pub tables: Vec<Table>,
    /// Where it came from, for messages ("e3 (shipped)", a path).
    pub origin: String,
}

/// A table as printed: a header, then rows of cells (a policy's row, followed
/// by the seed's where the scenario gives its figures).
#[derive(Debug, Clone, PartialEq)]
pub struct TableOutput {
    pub title: String,
    /// The run's setup in words (workload, CPUs, HZ, seeds, costs).
    pub setup: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Rows that hold the seed's figures, by index.
    pub seed_rows: Vec<usize>,
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioOutput {
    pub title: String,
    pub source: Option<String>,
    pub tables: Vec<TableOutput>,
}

/// Every metric a simulated run can report (lib.rs `to_result`); a run
/// reports those its workload and options produce (`scheduler_cpu` and `ipis`
/// only when scheduler work is priced), and a column whose metric a run did
/// not report shows "—".
const METRICS: &[&str] = &[
    "wakeup_latency.rt",
    "wakeup_latency.normal",
    "runqueue_wait",
    "context_switches",
    "migrations",
    "makespan",
    "messages_per_s",
    "forks_per_s",
    "round_trips_per_s",
    "scheduler_cpu",
    "ipis",
    "cpu_busy",
    "cpu_share",
    "fair_share_error",
    "deadlines_met.<group>",
    // The seeds' workloads (workload/report.rs), under the live benchmarks' names.
    "spawn_latency",
    "processes_per_s",
    "script_time",
    "scripts_per_min",
    "wall_time",
    "user_time",
    "cpu_percent",
    "response_time",
    "requests_per_s",
    "pages_served",
    "latency",
    "period",
    "max_latency",
    "missed_periods",
    "thread_time",
    "best",
    "average",
    "worst",
    "worst_over_average",
];

fn known_metric(name: &str) -> bool {
    METRICS.contains(&name) || name.strip_prefix("deadlines_met.").is_some_and(|g| !g.is_empty())
}

fn bad(origin: &str, why: impl Into<String>) -> SimError {
    SimError::BadScenario { origin: origin.to_string(), why: why.into() }
}

/// `base` with `o`'s options set; `seeds` likewise.
fn apply(o: &OptionsDef, base: &SimOptions, seeds: u32, at: &str) -> Result<(SimOptions, u32), String> {
    let mut opts = base.clone();
    if let Some(v) = o.cpus {
        opts.cpus = v;
    }
    if let Some(v) = o.hz {
        opts.hz = v;
    }
    if let Some(v) = o.seed {
        opts.seed = v;
    }
    if let Some(v) = o.max_events {
        opts.max_events = v;
    }
    let seeds = o.seeds.unwrap_or(seeds);
    if !(1..=1000).contains(&seeds) {
        return Err(format!("{at}seeds = {seeds}: give 1 to 1000 seeds"));
    }
    let durations: [(&Option<String>, &str); 8] = [
        (&o.duration, "duration"),
        (&o.ctx_switch, "ctx_switch"),
        (&o.migration, "migration"),
        (&o.scan_cost, "scan_cost"),
        (&o.queue_cost, "queue_cost"),
        (&o.lock_cost, "lock_cost"),
        (&o.ipi_cost, "ipi_cost"),
        (&o.ipi_latency, "ipi_latency"),
    ];
    for (value, key) in durations {
        let Some(raw) = value else { continue };
        let p = RUN_PARAMS.iter().find(|p| p.name == key).expect("every option is a run parameter");
        let ns = p
            .kind
            .parse(raw)
            .ok()
            .and_then(|c| parse_count(&c))
            .ok_or_else(|| format!("{at}{key} = \"{raw}\": expected {}", p.kind.expected()))?;
        let c = &mut opts.cost;
        match key {
            "duration" => opts.duration_ns = ns,
            "ctx_switch" => opts.ctx_switch_ns = ns,
            "migration" => opts.migration_ns = ns,
            "scan_cost" => c.scan_ns = ns,
            "queue_cost" => c.queue_ns = ns,
            "lock_cost" => c.lock_ns = ns,
            "ipi_cost" => c.ipi_ns = ns,
            _ => c.ipi_latency_ns = ns,
        }
    }
    Ok((opts, seeds))
}

/// Parse a scenario file's contents (`origin` names it in messages) over
/// the run options `base` and seed count `seeds` (`sim`'s flags), and check
/// every table's policies, workload and options without simulating.
pub fn parse(contents: &str, origin: &str, base: &SimOptions, seeds: u32) -> Result<Scenario, SimError> {
    let f: FileDef = toml::from_str(contents).map_err(|e| bad(origin, e.to_string().trim_end().to_string()))?;
    let (opts, seeds) = apply(&f.options, base, seeds, "[options] ").map_err(|e| bad(origin, e))?;
    if f.tables.is_empty() {
        return Err(bad(origin, "no [[table]]: add at least one table to print"));
    }
    let mut tables = Vec::new();
    for (i, t) in f.tables.into_iter().enumerate() {
        let at = format!("table {} ('{}'): ", i + 1, t.title);
        let (opts, seeds) = apply(&t.options, &opts, seeds, &format!("{at}options.")).map_err(|e| bad(origin, e))?;
        if t.policies.is_empty() {
            return Err(bad(origin, format!("{at}policies is empty: name at least one policy")));
        }
        if t.columns.is_empty() {
            return Err(bad(origin, format!("{at}columns is empty: name at least one metric to print")));
        }
        let labels = match t.labels {
            Some(l) if l.len() != t.policies.len() => {
                return Err(bad(
                    origin,
                    format!(
                        "{at}labels has {} entries for {} policies: give one label per policy",
                        l.len(),
                        t.policies.len()
                    ),
                ))
            }
            Some(l) => l,
            None => t.policies.clone(),
        };
        if let Some(k) = t.sigma {
            if !(k.is_finite() && k > 0.0) {
                return Err(bad(
                    origin,
                    format!("{at}sigma = {k}: give a positive number of standard deviations, e.g. 6"),
                ));
            }
        }
        for (label, figures) in &t.seed {
            if !labels.contains(label) {
                return Err(bad(
                    origin,
                    format!("{at}seed.{label}: no row is labelled '{label}' (rows: {})", labels.join(", ")),
                ));
            }
            if figures.len() != t.columns.len() {
                return Err(bad(
                    origin,
                    format!(
                        "{at}seed.{label} has {} figures for {} columns: give one per column (nan where the seed has none)",
                        figures.len(),
                        t.columns.len()
                    ),
                ));
            }
        }
        for (k, c) in t.columns.iter().enumerate() {
            if !known_metric(&c.metric) {
                return Err(bad(
                    origin,
                    format!(
                        "{at}column {}: unknown metric '{}': the simulator reports {}",
                        k + 1,
                        c.metric,
                        METRICS.join(", ")
                    ),
                ));
            }
        }
        for p in &t.policies {
            check_run(p, &t.workload, &opts)
                .map_err(|e| bad(origin, format!("{at}policy '{p}', workload '{}': {e}", t.workload)))?;
        }
        let columns = t
            .columns
            .into_iter()
            .map(|c| Column {
                label: c.label.unwrap_or_else(|| format!("{} {:?}", c.metric, c.stat).to_lowercase()),
                decimals: c.decimals.unwrap_or(if c.stat.is_count() { 0 } else { 2 }),
                metric: c.metric,
                stat: c.stat,
                unit: c.unit,
            })
            .collect();
        tables.push(Table {
            title: t.title,
            workload: t.workload,
            policies: t.policies.into_iter().zip(labels).collect(),
            opts,
            seeds,
            sigma: t.sigma,
            columns,
            seed: t.seed,
            note: t.note,
        });
    }
    Ok(Scenario {
        name: f.name,
        title: f.title,
        source: f.source,
        seed_label: f.seed_label.unwrap_or_else(|| "seed".into()),
        tables,
        origin: origin.to_string(),
    })
}

fn time_factor(u: Unit) -> Option<f64> {
    match u {
        Unit::Nanoseconds => Some(1.0),
        Unit::Microseconds => Some(1e3),
        Unit::Milliseconds => Some(1e6),
        Unit::Seconds => Some(1e9),
        _ => None,
    }
}

fn fmt(v: f64, decimals: usize) -> String {
    if v.is_nan() {
        "—".into()
    } else {
        format!("{v:.decimals$}")
    }
}

/// The value of `col` over one policy's seeds; None when no seed produced the metric.
fn cell(t: &Table, col: &Column, outs: &[SimOutcome], origin: &str, at: &str) -> Result<Option<f64>, SimError> {
    let metrics: Vec<_> = outs.iter().filter_map(|o| o.result.metric(&col.metric)).collect();
    let Some(first) = metrics.first() else { return Ok(None) };
    let factor = time_factor(first.unit);
    let (summary, dropped) = match &first.data {
        MetricData::Histogram { .. } => {
            let mut h = LatencyHistogram::new();
            for m in &metrics {
                if let MetricData::Histogram { histogram, .. } = &m.data {
                    h.merge(histogram);
                }
            }
            match t.sigma {
                Some(k) => {
                    let f = ksigma_histogram(&h, k);
                    (f.summary, f.dropped)
                }
                None => (Summary::of_histogram(&h), 0),
            }
        }
        MetricData::Samples { .. } | MetricData::Entities { .. } => {
            let values: Vec<f64> = metrics
                .iter()
                .flat_map(|m| match &m.data {
                    MetricData::Samples { values } | MetricData::Entities { values, .. } => values.clone(),
                    _ => Vec::new(),
                })
                .collect();
            (Summary::of_samples(&values), 0)
        }
        MetricData::Series { .. } => {
            return Err(bad(
                origin,
                format!("{at}metric '{}' is a time series: choose a metric with values", col.metric),
            ))
        }
    };
    let Some(s) = summary else { return Ok(None) };
    let v = col.stat.of(&s, dropped);
    if col.stat.is_count() {
        return Ok(Some(v));
    }
    Ok(Some(match (col.unit, factor) {
        (Some(u), Some(f)) => v * f / u.ns(),
        (Some(_), None) => {
            return Err(bad(
                origin,
                format!("{at}unit: metric '{}' is not a time ({:?}); leave out unit", col.metric, first.unit),
            ))
        }
        (None, _) => v,
    }))
}

fn setup(t: &Table) -> String {
    let o = &t.opts;
    let cost = if o.cost == CostTable::ZERO {
        "scheduler work free".to_string()
    } else {
        let c = &o.cost;
        format!(
            "scheduler work priced (scan {} ns, queue {} ns, lock {} ns, IPI {} ns + {} ns latency)",
            c.scan_ns, c.queue_ns, c.lock_ns, c.ipi_ns, c.ipi_latency_ns
        )
    };
    format!(
        "{} · {} CPU{} · HZ {} · up to {} s · {} seed{} from {} · switch {} ns, migration {} ns · {}",
        t.workload,
        o.cpus,
        if o.cpus == 1 { "" } else { "s" },
        o.hz,
        o.duration_ns as f64 / 1e9,
        t.seeds,
        if t.seeds == 1 { "" } else { "s" },
        o.seed,
        o.ctx_switch_ns,
        o.migration_ns,
        cost
    )
}

impl Scenario {
    /// Run every table (policies in parallel, each over its seeds) and lay
    /// out the figures. Deterministic: the same file and options give the
    /// same output.
    pub fn run(&self) -> Result<ScenarioOutput, SimError> {
        use rayon::prelude::*;
        let mut tables = Vec::new();
        for (i, t) in self.tables.iter().enumerate() {
            let at = format!("table {} ('{}'): ", i + 1, t.title);
            let outs: Vec<Vec<SimOutcome>> = t
                .policies
                .par_iter()
                .map(|(p, _)| run_seeds(p, &t.workload, &t.opts, t.seeds))
                .collect::<Result<_, _>>()?;
            let mut header = vec!["policy".to_string()];
            header.extend(t.columns.iter().map(|c| c.label.clone()));
            let mut rows = Vec::new();
            let mut seed_rows = Vec::new();
            for ((_, label), runs) in t.policies.iter().zip(&outs) {
                let mut row = vec![label.clone()];
                for col in &t.columns {
                    let v = cell(t, col, runs, &self.origin, &at)?;
                    row.push(v.map_or("—".into(), |v| fmt(v, col.decimals)));
                }
                rows.push(row);
                if let Some(figures) = t.seed.get(label) {
                    let mut row = vec![format!("  {}", self.seed_label)];
                    row.extend(figures.iter().zip(&t.columns).map(|(v, c)| fmt(*v, c.decimals)));
                    seed_rows.push(rows.len());
                    rows.push(row);
                }
            }
            tables.push(TableOutput {
                title: t.title.clone(),
                setup: setup(t),
                header,
                rows,
                seed_rows,
                note: t.note.clone(),
            });
        }
        Ok(ScenarioOutput { title: self.title.clone(), source: self.source.clone(), tables })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_scenario_has_a_title_for_list() {
        let titles = shipped_titles();
        assert_eq!(titles.len(), shipped_names().len());
        assert!(titles.iter().all(|(_, t)| !t.is_empty()), "{titles:?}");
    }

    const SMALL: &str = r#"
        title = "two policies, one CPU"
        seed_label = "paper"
        [options]
        cpus = 1
        duration = "1s"
        seeds = 2
        [[table]]
        title = "pipe"
        workload = "pipe:loops=1000"
        policies = ["o1", "cfs"]
        labels = ["O(1)", "CFS"]
        columns = [
            { metric = "makespan", unit = "ms", decimals = 3 },
            { metric = "round_trips_per_s", stat = "n" },
        ]
        seed = { "O(1)" = [1.5, nan] }
    "#;

    fn parse_small(text: &str) -> Result<Scenario, SimError> {
        parse(text, "small.toml", &SimOptions::default(), 5)
    }

    fn err(text: &str) -> String {
        parse_small(text).unwrap_err().to_string()
    }

    #[test]
    fn shipped_scenarios_parse() {
        for name in shipped_names() {
            let s = parse(shipped(name).unwrap(), name, &SimOptions::default(), 5).unwrap();
            assert!(!s.tables.is_empty(), "{name}");
            assert_eq!(s.name.as_deref(), Some(name));
        }
        assert!(shipped("e9").is_none());
    }

    #[test]
    fn options_layer_over_the_flags_and_tables_print_with_the_seeds_rows() {
        let s = parse_small(SMALL).unwrap();
        let t = &s.tables[0];
        assert_eq!((t.opts.cpus, t.opts.duration_ns, t.seeds), (1, 1_000_000_000, 2));
        assert_eq!(t.opts.cost, CostTable::DEFAULT, "unset options keep the flags' values");
        let out = s.run().unwrap();
        let t = &out.tables[0];
        assert_eq!(t.header, ["policy", "makespan mean", "round_trips_per_s n"]);
        assert_eq!(t.rows.len(), 3);
        assert_eq!(t.seed_rows, [1]);
        assert_eq!(t.rows[1], ["  paper", "1.500", "—"]);
        assert_eq!((t.rows[0][0].as_str(), t.rows[2][0].as_str()), ("O(1)", "CFS"));
        // 1000 trips of about 10 us: about 10 ms, and one value per seed.
        let ms: f64 = t.rows[0][1].parse().unwrap();
        assert!((10.0..12.0).contains(&ms), "{ms}");
        assert_eq!(t.rows[0][2], "2");
        assert!(t.setup.starts_with("pipe:loops=1000 · 1 CPU · HZ 1000"), "{}", t.setup);
        // Deterministic.
        assert_eq!(s.run().unwrap(), out);
    }

    #[test]
    fn the_k_sigma_filter_drops_outliers_of_latency_columns() {
        let text = r#"
            title = "t"
            [options]
            cpus = 1
            duration = "2s"
            seeds = 1
            [[table]]
            title = "raw"
            workload = "wakeup:samples=150,interval=3ms,groups=2"
            policies = ["o1"]
            columns = [{ metric = "wakeup_latency.normal", stat = "max", unit = "us" },
                       { metric = "wakeup_latency.normal", stat = "dropped" }]
            [[table]]
            title = "filtered"
            workload = "wakeup:samples=150,interval=3ms,groups=2"
            policies = ["o1"]
            sigma = 1
            columns = [{ metric = "wakeup_latency.normal", stat = "max", unit = "us" },
                       { metric = "wakeup_latency.normal", stat = "dropped" }]
        "#;
        let out = parse_small(text).unwrap().run().unwrap();
        let (raw, filt) = (&out.tables[0].rows[0], &out.tables[1].rows[0]);
        assert_eq!(raw[2], "0");
        let (rmax, fmax): (f64, f64) = (raw[1].parse().unwrap(), filt[1].parse().unwrap());
        let dropped: u64 = filt[2].parse().unwrap();
        assert!(dropped > 0 && fmax < rmax, "raw {raw:?} filtered {filt:?}");
    }

    #[test]
    fn bad_input_names_the_file_and_the_key() {
        let e = err(&SMALL.replace("seeds = 2", "seeds = 2\nthreads = 4"));
        assert!(e.starts_with("scenario small.toml: ") && e.contains("unknown field `threads`"), "{e}");
        assert!(e.contains("line"), "the toml error gives the place: {e}");
        let e = err(&SMALL.replace("title = \"pipe\"", "title = \"pipe\"\ncolour = 1"));
        assert!(e.contains("unknown field `colour`"), "{e}");
        let e = err(&SMALL.replace("\"cfs\"]", "\"bogus\"]"));
        assert!(e.contains("table 1 ('pipe'): policy 'bogus'") && e.contains("unknown policy 'bogus'"), "{e}");
        let e = err(&SMALL.replace("pipe:loops=1000", "pipes"));
        assert!(e.contains("unknown workload 'pipes'"), "{e}");
        let e = err(&SMALL.replace("pipe:loops=1000", "pipe:colour=1"));
        assert!(e.contains("unknown workload parameter 'colour'"), "{e}");
        let e = err(&SMALL.replace("stat = \"n\"", "stat = \"p42\""));
        assert!(e.contains("unknown variant `p42`"), "{e}");
        let e = err(&SMALL.replace("duration = \"1s\"", "duration = \"1 fortnight\""));
        assert!(e.contains("[options] duration = \"1 fortnight\": expected"), "{e}");
        let e = err(&SMALL.replace("[\"O(1)\", \"CFS\"]", "[\"O(1)\"]"));
        assert!(e.contains("labels has 1 entries for 2 policies"), "{e}");
        let e = err(&SMALL.replace("\"O(1)\" = [1.5, nan]", "\"BSD\" = [1.5, nan]"));
        assert!(e.contains("seed.BSD: no row is labelled 'BSD'"), "{e}");
        let e = err(&SMALL.replace("[1.5, nan]", "[1.5]"));
        assert!(e.contains("has 1 figures for 2 columns"), "{e}");
        let e = err(&SMALL.replace("round_trips_per_s", "round_trip"));
        assert!(e.contains("table 1 ('pipe'): column 2: unknown metric 'round_trip'"), "{e}");
        assert!(e.contains("round_trips_per_s"), "lists what there is: {e}");
        // A metric this run does not report (free scheduler work: no scheduler_cpu) is a dash.
        let free = SMALL.replace("round_trips_per_s", "scheduler_cpu").replace("seeds = 2", "seeds = 2\nscan_cost = \"0\"\nqueue_cost = \"0\"\nlock_cost = \"0\"\nipi_cost = \"0\"\nipi_latency = \"0\"");
        let out = parse_small(&free).unwrap().run().unwrap();
        assert_eq!(out.tables[0].rows[0][2], "—");
        let e = parse_small(&SMALL.replace("stat = \"n\"", "unit = \"us\"")).unwrap().run().unwrap_err().to_string();
        assert!(e.contains("is not a time"), "{e}");
        let e = err("title = \"x\"\n");
        assert!(e.contains("missing field `table`"), "{e}");
        let e = err(&SMALL.replace("cpus = 1", "cpus = 0"));
        assert!(e.contains("cpus = 0"), "{e}");
    }
}
