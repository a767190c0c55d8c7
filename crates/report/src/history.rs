//! One metric across stored runs over time (E4's long-term table of compile
//! times across releases and machines).

use crate::compare::{band_for, verdict_of, CompareOptions, Verdict};
use crate::plot::{Chart, Line};
use schedlab_core::model::{format_unix_ms, param_is, RunHead};
use schedlab_core::replicate::{benjamini_hochberg, case_summaries, change, CaseSummary, Change, ChangeError, Stat};
use schedlab_core::stats::Interval;
use schedlab_core::{Direction, Run, Unit};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize)]
pub struct HistoryRow {
    pub run: String,
    pub run_id: Option<i64>,
    pub started_unix_ms: i64,
    pub host: String,
    pub kernel: String,
    pub condition: String,
    /// The case's key: with `case_condition`, the case's identity.
    pub benchmark: String,
    /// What makes runs of the key the same case ([`schedlab_core::Condition::case_label`]):
    /// a run under eevdf is never judged against one under cfs.
    pub case_condition: String,
    /// The run's place among the runs shown, oldest first (a plot's x).
    pub run_order: usize,
    /// What a reader sees: the benchmark and its parameters that are not at
    /// their default, with their units.
    pub heading: String,
    pub metric: String,
    pub unit: Unit,
    /// Mean of the repetitions, or the median of a latency distribution.
    pub value: f64,
    pub statistic: &'static str,
    pub ci: Option<Interval>,
    pub p99: Option<f64>,
    pub n: u64,
    /// Invocations behind the value; the interval needs two or more.
    pub invocations: usize,
    pub direction: Direction,
    /// One value per invocation (what the change and verdict rest on).
    #[serde(skip)]
    pub replicates: Vec<f64>,
    /// Against the first run of the same case (key and condition) on the same host.
    pub change: Option<Change>,
    pub verdict: Option<Verdict>,
}

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("no stored run has benchmark '{0}' complete: run it first (`schedlab run {0}`)")]
    NoRuns(String),
    #[error("benchmark '{bench}' has no metric '{metric}': its metrics are {available}")]
    NoMetric { bench: String, metric: String, available: String },
}

/// Rows for every benchmark named `name` whose parameters include all of
/// `params`, in run order. `metric` defaults to the first headline metric.
pub fn history(
    runs: &[Run],
    name: &str,
    params: &BTreeMap<String, String>,
    metric: Option<&str>,
    table: &crate::rows::ParamTable,
) -> Result<Vec<HistoryRow>, HistoryError> {
    let mut h = HistoryBuilder::new(name, params, metric, table);
    h.add(runs);
    h.finish()
}

/// [`history`] over runs given a batch at a time, so a fleet's store never
/// has to be in memory at once: `add` each batch in run order, then
/// `finish`.
pub struct HistoryBuilder<'a> {
    name: &'a str,
    params: &'a BTreeMap<String, String>,
    metric: Option<&'a str>,
    table: &'a crate::rows::ParamTable,
    rows: Vec<HistoryRow>,
    available: Vec<String>,
}

impl<'a> HistoryBuilder<'a> {
    pub fn new(
        name: &'a str,
        params: &'a BTreeMap<String, String>,
        metric: Option<&'a str>,
        table: &'a crate::rows::ParamTable,
    ) -> Self {
        HistoryBuilder { name, params, metric, table, rows: Vec::new(), available: Vec::new() }
    }

    /// Runs read whole: their cases summarised here, as the store does.
    pub fn add(&mut self, runs: &[Run]) {
        for run in runs {
            let head = run.head();
            for case in case_summaries(&run.benchmarks) {
                self.add_case(&head, &case);
            }
        }
    }

    /// One case of one run, from its stored summary.
    pub fn add_case(&mut self, run: &RunHead, case: &CaseSummary) {
        if case.name != self.name || !self.params.iter().all(|(k, v)| param_is(&case.params, k, v)) {
            return;
        }
        for m in &case.metrics {
            if !self.available.contains(&m.name) {
                self.available.push(m.name.clone());
            }
        }
        let chosen = match self.metric {
            Some(name) => case.metrics.iter().find(|m| m.name == name),
            None => case.metrics.iter().find(|m| m.default),
        };
        let Some(m) = chosen else { return };
        self.rows.push(HistoryRow {
            run: run.label.clone(),
            run_id: run.id,
            started_unix_ms: run.started_unix_ms,
            host: run.host.clone(),
            kernel: run.kernel.clone(),
            condition: case.condition.clone(),
            benchmark: case.key.clone(),
            case_condition: case.case_condition.clone(),
            run_order: 0,
            heading: crate::table::params_heading(&case.name, &case.params, case.quick, &[&case.params], self.table),
            metric: m.name.clone(),
            unit: m.unit,
            value: m.value,
            statistic: m.stat().label(),
            ci: m.ci,
            p99: m.p99,
            n: m.n,
            invocations: case.invocations as usize,
            direction: m.direction,
            replicates: m.replicates.clone(),
            change: None,
            verdict: None,
        });
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Metric names seen so far (for the error when none matched).
    pub fn note_available(&mut self, names: impl IntoIterator<Item = String>) {
        for n in names {
            if !self.available.contains(&n) {
                self.available.push(n);
            }
        }
    }

    /// The rows, each case's together (cases in the order they first
    /// appear, runs in run order within each).
    pub fn finish(mut self) -> Result<Vec<HistoryRow>, HistoryError> {
        if self.rows.is_empty() {
            return Err(match (self.metric, self.available.is_empty()) {
                (Some(m), false) => HistoryError::NoMetric {
                    bench: self.name.into(),
                    metric: m.into(),
                    available: self.available.join(", "),
                },
                _ => HistoryError::NoRuns(self.name.into()),
            });
        }
        let mut runs: std::collections::HashMap<(Option<i64>, String), usize> = std::collections::HashMap::new();
        let mut cases: std::collections::HashMap<(String, String), usize> = std::collections::HashMap::new();
        let mut case_of = Vec::with_capacity(self.rows.len());
        for r in &mut self.rows {
            let n = runs.len();
            r.run_order = *runs.entry((r.run_id, r.run.clone())).or_insert(n);
            let n = cases.len();
            case_of.push(*cases.entry((r.benchmark.clone(), r.case_condition.clone())).or_insert(n));
        }
        // Stable: run order stays within each case.
        let mut keyed: Vec<(usize, HistoryRow)> = case_of.into_iter().zip(self.rows).collect();
        keyed.sort_by_key(|(case, _)| *case);
        Ok(keyed.into_iter().map(|(_, r)| r).collect())
    }
}

/// Judge every row against the first row of its case (key and condition)
/// and host, with the
/// verdict rules of `compare` (false discoveries controlled over the rows).
pub fn judge_against_first(rows: &mut [HistoryRow], opts: &CompareOptions) {
    let mut tested = Vec::new();
    // One pass finds each case and host's first row (a search per row is
    // quadratic over a fleet's history).
    let mut firsts: std::collections::HashMap<(&str, &str, &str), usize> = std::collections::HashMap::new();
    let first_of: Vec<usize> = (0..rows.len())
        .map(|i| *firsts.entry((&rows[i].benchmark, &rows[i].case_condition, &rows[i].host)).or_insert(i))
        .collect();
    for (i, &first) in first_of.iter().enumerate() {
        if first == i {
            continue;
        }
        let stat = if rows[i].statistic == "p50" { Stat::P50 } else { Stat::Mean };
        let (band, _) = band_for(opts, &rows[i].benchmark, &rows[i].metric, stat);
        match change(&rows[first].replicates, &rows[i].replicates, band) {
            Ok(c) => {
                rows[i].change = Some(c);
                tested.push(i);
            }
            Err(ChangeError::TooFew { .. }) => rows[i].verdict = Some(Verdict::NotEnoughRuns),
            Err(ChangeError::ZeroBaseline) => {}
        }
    }
    let p: Vec<f64> = tested.iter().map(|&i| rows[i].change.map_or(1.0, |c| c.p)).collect();
    for (&i, found) in tested.iter().zip(benjamini_hochberg(&p, opts.fdr)) {
        rows[i].verdict = Some(verdict_of(found, rows[i].direction, rows[i].change.map_or(1.0, |c| c.ratio)));
    }
}

/// The history as a grid within `width` columns: one line per run, the
/// benchmark, condition and metric said once above when they do not change.
pub fn history_table(rows: &[HistoryRow], width: usize) -> String {
    use crate::text::{Align, Grid};
    // A host or kernel every row shares is said once above the table, not
    // repeated in a column: the rows then fit 80 columns on one line.
    let shared = |field: fn(&HistoryRow) -> &str| {
        let first = rows.first().map(field)?;
        rows.iter().all(|r| field(r) == first).then_some(first)
    };
    let (host, kernel) = (shared(|r| &r.host), shared(|r| &r.kernel));
    let mut head = vec!["run", "started UTC"];
    let mut align = vec![Align::Left, Align::Left];
    for (name, is_shared) in [("host", host.is_some()), ("kernel", kernel.is_some())] {
        if !is_shared {
            head.push(name);
            align.push(Align::Left);
        }
    }
    head.extend(["value", "±", "inv", "vs first run"]);
    align.extend([Align::Right, Align::Left, Align::Right, Align::Left]);
    let mut t = Grid::new(head.into_iter().map(String::from).collect(), align);
    let mut last = None;
    for r in rows {
        let what = format!("{} · {} · {} {}", r.heading, r.condition, r.metric, r.statistic);
        if last.as_ref() != Some(&what) {
            t.heading(what.clone());
            last = Some(what);
        }
        // As `show` gives it: the interval's half-width against the value.
        let ci = match r.ci {
            Some(c) if r.value != 0.0 => format!("±{:.1}%", 100.0 * (c.hi - c.lo) / 2.0 / r.value.abs()),
            _ if r.invocations < 2 => "- (1 inv.)".into(),
            _ => "-".into(),
        };
        // To the minute and without the zone (in the heading): one line in 80 columns.
        let started = format_unix_ms(r.started_unix_ms);
        let mut cells = vec![r.run.clone(), started.get(..16).unwrap_or(&started).to_string()];
        if host.is_none() {
            cells.push(r.host.clone());
        }
        if kernel.is_none() {
            cells.push(r.kernel.clone());
        }
        cells.extend([
            r.unit.format(r.value),
            ci,
            r.invocations.to_string(),
            match (r.change, r.verdict) {
                (Some(c), Some(v)) => format!("{:+.1}% {}", (c.ratio - 1.0) * 100.0, v.label()),
                (None, Some(v)) => v.label().to_string(),
                _ => "-".into(),
            },
        ]);
        t.row(cells);
    }
    let shared_line = match (host, kernel) {
        (Some(h), Some(k)) => format!("every run: host {h}, kernel {k}\n"),
        (Some(h), None) => format!("every run: host {h}\n"),
        (None, Some(k)) => format!("every run: kernel {k}\n"),
        (None, None) => String::new(),
    };
    format!("{shared_line}{}", t.render(width))
}

pub fn history_csv(rows: &[HistoryRow]) -> String {
    let q = |s: &str| if s.contains([',', '"']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() };
    let mut out = String::from(
        "run_id,started_unix_ms,host,kernel,benchmark,condition,metric,statistic,unit,value,ci_lo,ci_hi,n\n",
    );
    for r in rows {
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
            r.run_id.map(|i| i.to_string()).unwrap_or_default(),
            r.started_unix_ms,
            q(&r.host),
            q(&r.kernel),
            q(&r.benchmark),
            q(&r.condition),
            q(&r.metric),
            r.statistic,
            r.unit.symbol(),
            r.value,
            r.ci.map(|c| c.lo.to_string()).unwrap_or_default(),
            r.ci.map(|c| c.hi.to_string()).unwrap_or_default(),
            r.n
        ));
    }
    out
}

pub fn history_markdown(rows: &[HistoryRow]) -> String {
    let mut out = String::from(
        "| run | started | host | kernel | benchmark | condition | value |\n|---|---|---|---|---|---|---:|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            r.run,
            format_unix_ms(r.started_unix_ms),
            r.host,
            r.kernel,
            r.benchmark,
            r.condition,
            r.unit.format(r.value)
        ));
    }
    out
}

/// One line per case (key and condition) and host: value against run order.
pub fn history_chart(rows: &[HistoryRow]) -> Chart {
    let first = &rows[0];
    let mut c = Chart::new(
        &format!("{} {} over stored runs", first.metric, first.statistic),
        "run (oldest to newest)",
        &format!("{} {} [{}]", first.metric, first.statistic, first.unit.symbol()),
    );
    c.markers = true;
    // Runs are numbered: no tick between two.
    c.whole_x = true;
    // One line per case and host, named as the table heads it (parameters
    // off their defaults, with units; the condition when cases differ by
    // it), not by its raw key.
    let conditions: std::collections::HashSet<&str> = rows.iter().map(|r| r.case_condition.as_str()).collect();
    let mut lines: BTreeMap<(&str, &str, &str), Line> = BTreeMap::new();
    for r in rows {
        lines
            .entry((&r.benchmark, &r.case_condition, &r.host))
            .or_insert_with(|| {
                let label = if conditions.len() > 1 {
                    format!("{} · {} @ {}", r.heading, r.case_condition, r.host)
                } else {
                    format!("{} @ {}", r.heading, r.host)
                };
                Line { label, points: Vec::new() }
            })
            .points
            .push(((r.run_order + 1) as f64, r.value));
    }
    c.lines = lines.into_values().collect();
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_core::*;

    fn run(id: i64, placement: &str, v: f64) -> Run {
        let tool = ToolInfo { name: "schedlab".into(), version: "0".into(), git_rev: None };
        let mut r = Run::new(RunKind::Live, tool, vec![], "h".into(), id * 1000);
        r.id = Some(id);
        let cond = Condition::Live { requested: SchedCondition::default(), applied: None, loads: vec![] };
        let mut b = BenchResult::new("pipe", cond, 0).param("placement", placement);
        b.metrics
            .push(Metric::samples("rate", Unit::PerSecond, Direction::HigherIsBetter, vec![v, v + 2.0]).headline());
        b.metrics.push(Metric::samples("other", Unit::Count, Direction::Neutral, vec![1.0]));
        b.status = BenchStatus::Complete;
        r.benchmarks.push(b);
        r
    }

    #[test]
    fn a_host_and_kernel_every_run_shares_are_said_once_not_in_columns() {
        let runs = vec![run(1, "same-cpu", 10.0), run(2, "same-cpu", 30.0)];
        let mut rows = history(&runs, "pipe", &BTreeMap::new(), None, &Default::default()).unwrap();
        rows.iter_mut().for_each(|r| r.kernel = "6.18.44-fc".into());
        let text = history_table(&rows, 80);
        assert!(text.starts_with("every run: host h, kernel 6.18.44-fc\n"), "{text}");
        let header = text.lines().nth(1).unwrap();
        assert!(!header.contains("host") && !header.contains("kernel"), "{header}");
        // Two hosts: the host column comes back; the shared kernel stays above.
        rows[1].host = "other".into();
        let text = history_table(&rows, 80);
        assert!(text.starts_with("every run: kernel 6.18.44-fc\n"), "{text}");
        assert!(text.lines().nth(1).unwrap().contains("host"), "{text}");
        assert!(text.contains("other"), "{text}");
    }

    #[test]
    fn filters_by_params_and_keeps_run_order() {
        let runs = vec![run(1, "same-cpu", 10.0), run(2, "cross-cpu", 20.0), run(3, "same-cpu", 30.0)];
        let mut p = BTreeMap::new();
        p.insert("placement".to_string(), "same-cpu".to_string());
        let rows = history(&runs, "pipe", &p, None, &Default::default()).unwrap();
        assert_eq!(rows.iter().map(|r| r.value).collect::<Vec<_>>(), vec![11.0, 31.0]);
        assert_eq!(rows[0].metric, "rate");
        let all = history(&runs, "pipe", &BTreeMap::new(), Some("other"), &Default::default()).unwrap();
        assert_eq!(all.len(), 3);
        let chart = history_chart(&history(&runs, "pipe", &BTreeMap::new(), None, &Default::default()).unwrap());
        assert_eq!(chart.lines.len(), 2, "one line per placement");
        // Named by the heading, which leaves out a parameter at its
        // default, not by the raw key ("pipe placement=same-cpu").
        let info = crate::rows::ParamInfo::new(
            schedlab_core::param::Kind::Choice(&["same-cpu", "cross-cpu"]),
            "same-cpu",
            None,
        );
        let table = BTreeMap::from([("pipe".to_string(), BTreeMap::from([("placement".to_string(), info)]))]);
        let chart = history_chart(&history(&runs, "pipe", &BTreeMap::new(), None, &table).unwrap());
        let labels: Vec<&str> = chart.lines.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["pipe placement=cross-cpu @ h", "pipe @ h"]);
    }

    /// Three invocations of `rate` at `v`, `v`+1, `v`+2 under `policy`.
    fn run_under(id: i64, policy: SchedPolicy, v: f64) -> Run {
        let mut r = run(id, "same-cpu", 0.0);
        let requested = SchedCondition { policy, ..Default::default() };
        let one = r.benchmarks.remove(0);
        for (i, x) in [v, v + 1.0, v + 2.0].into_iter().enumerate() {
            let mut b = one.clone();
            b.condition = Condition::Live { requested: requested.clone(), applied: None, loads: vec![] };
            b.invocation = i as u32;
            b.metrics[0] = Metric::samples("rate", Unit::PerSecond, Direction::HigherIsBetter, vec![x]).headline();
            r.benchmarks.push(b);
        }
        r
    }

    #[test]
    fn a_run_is_judged_against_the_first_of_its_own_condition_and_rows_are_grouped_by_case() {
        // Runs alternate between two policies; batch's figures are 10x other's.
        let runs = vec![
            run_under(1, SchedPolicy::Other, 100.0),
            run_under(2, SchedPolicy::Batch, 1000.0),
            run_under(3, SchedPolicy::Other, 100.0),
            run_under(4, SchedPolicy::Batch, 1000.0),
        ];
        let mut rows = history(&runs, "pipe", &BTreeMap::new(), None, &Default::default()).unwrap();
        judge_against_first(&mut rows, &CompareOptions::fixed(0.02));
        let ids: Vec<Option<i64>> = rows.iter().map(|r| r.run_id).collect();
        assert_eq!(ids, [Some(1), Some(3), Some(2), Some(4)], "each case's runs together, in run order");
        assert_eq!(rows.iter().map(|r| r.run_order).collect::<Vec<_>>(), [0, 2, 1, 3], "x keeps run order");
        // Run 2 is a baseline of its own, not 10x run 1; identical runs are within noise.
        assert!(rows[2].change.is_none() && rows[2].verdict.is_none(), "{:?}", rows[2].verdict);
        for i in [1, 3] {
            let c = rows[i].change.expect("judged");
            assert!((c.ratio - 1.0).abs() < 1e-9, "run {:?}: ratio {}", rows[i].run_id, c.ratio);
            assert_eq!(rows[i].verdict, Some(Verdict::WithinNoise));
        }
        let chart = history_chart(&rows);
        assert!(chart.whole_x, "run numbers get whole ticks");
        let lines: Vec<(String, Vec<(f64, f64)>)> =
            chart.lines.iter().map(|l| (l.label.clone(), l.points.clone())).collect();
        assert_eq!(lines.len(), 2, "one line per condition: {lines:?}");
        assert!(lines.iter().any(|(l, p)| l.contains("batch") && p == &[(2.0, 1001.0), (4.0, 1001.0)]), "{lines:?}");
        assert!(lines.iter().any(|(l, p)| l.contains("other") && p == &[(1.0, 101.0), (3.0, 101.0)]), "{lines:?}");
    }

    #[test]
    fn unknown_metric_lists_the_available_ones() {
        let runs = vec![run(1, "same-cpu", 10.0)];
        let err = history(&runs, "pipe", &BTreeMap::new(), Some("nope"), &Default::default()).unwrap_err();
        assert!(err.to_string().contains("rate, other"), "{err}");
        assert!(matches!(
            history(&runs, "spawn", &BTreeMap::new(), None, &Default::default()),
            Err(HistoryError::NoRuns(_))
        ));
    }
}
