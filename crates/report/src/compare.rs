//! Side-by-side comparison with a verdict per row that can be trusted.
//!
//! Columns are sides: each side is one or more runs whose invocations are
//! pooled (`compare A1,A2,A3 B1,B2`); the first side is the baseline. Rows
//! are (benchmark case, metric, statistic[, entity]). For each later side
//! and row (see `schedlab_core::replicate` and docs/statistics.md):
//!
//! 1. every invocation (a seed, for the simulator) gives one value;
//! 2. the change gets a 95 % interval from Welch's t on the log scale;
//! 3. its p-value tests "the change lies within the noise band", where the
//!    band is this host's calibrated run-to-run variation for that row (or
//!    a fixed `--noise`);
//! 4. Benjamini–Hochberg over all tested cells of the table keeps the
//!    expected share of false "better"/"worse" verdicts under 5 %.
//!
//! A side with fewer than three replicates gets "not enough runs" and how
//! many to add, never a guess; "max" is shown without a verdict.

use schedlab_core::model::upgrade_sim_interactive;
use schedlab_core::replicate::{
    self, benjamini_hochberg, cases, change, stats_of, typical, Case, Change, ChangeError, Stat, FALSE_DISCOVERY_RATE,
    MIN_REPLICATES,
};
use schedlab_core::{Direction, Environment, Level, Run, RunKind, Unit};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Better,
    Worse,
    /// No change beyond the noise band that survives the table's
    /// false-discovery control.
    WithinNoise,
    /// A change beyond noise on an informational metric.
    Changed,
    /// A side has fewer replicates than a verdict needs.
    NotEnoughRuns,
    /// A statistic that never gets one (the max), or no data on a side.
    None,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::WithinNoise => "within noise",
            Verdict::Changed => "changed",
            Verdict::NotEnoughRuns => "not enough runs",
            Verdict::None => "-",
        }
    }
}

/// One side's cell of a comparison row.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Typical value over the side's replicates (geometric mean of the
    /// invocations' values; arithmetic for data with zeros).
    pub value: Option<f64>,
    /// Replicates (invocations or seeds) behind the value.
    pub replicates: usize,
    /// Against the baseline (None on the baseline itself, and for the max).
    pub change: Option<Change>,
    /// value / baseline value where there is no interval (the max, or too
    /// few replicates): shown, never judged.
    pub point_ratio: Option<f64>,
    /// The noise band the change was tested against, and where it came from.
    pub band: Option<f64>,
    pub band_source: BandSource,
    pub verdict: Verdict,
}

impl Cell {
    /// value / baseline value.
    pub fn ratio(&self) -> Option<f64> {
        self.change.map(|c| c.ratio).or(self.point_ratio)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BandSource {
    /// This row's run-to-run variation from the host's noise profile.
    Profile,
    /// The fixed band (`--noise`, or the default where the profile has no entry).
    Fixed,
}

#[derive(Debug, Clone, Serialize)]
pub struct CompareRow {
    pub benchmark: String,
    pub metric: String,
    pub statistic: &'static str,
    /// The task, thread or CPU of an entity metric.
    pub entity: Option<String>,
    pub unit: Unit,
    pub direction: Direction,
    pub cells: Vec<Cell>,
}

impl CompareRow {
    /// "round_trip_latency p99", "cpu_share [hog 1]".
    pub fn label(&self) -> String {
        let mut s = if self.statistic == "mean" && self.unit != Unit::Nanoseconds {
            self.metric.clone()
        } else {
            format!("{} {}", self.metric, self.statistic)
        };
        if let Some(e) = &self.entity {
            s.push_str(&format!(" [{e}]"));
        }
        s
    }
}

/// The smallest change worth a verdict, per row.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NoiseProfile {
    /// e.g. "profile #3 of host vm (5 runs, 2026-11-23)".
    pub description: String,
    /// (benchmark key, metric, statistic) -> band.
    pub bands: BTreeMap<(String, String, Stat), f64>,
}

impl NoiseProfile {
    /// The band of each row from independent A/A calibration runs of the
    /// same cases (see `replicate::run_to_run_band`).
    pub fn from_runs(description: String, runs: &[Run]) -> NoiseProfile {
        let mut per_row: BTreeMap<(String, String, Stat), Vec<f64>> = BTreeMap::new();
        for run in runs {
            for case in cases(&run.benchmarks, true) {
                for name in case.metric_names() {
                    let Some(m) = case.metric(name) else { continue };
                    if m.data.level() == Level::Entity {
                        continue;
                    }
                    for &stat in stats_of(&m.data).iter().filter(|s| s.has_verdict()) {
                        if let Some(v) = typical(&case.replicate_values(name, stat, None)) {
                            per_row.entry((case.key.clone(), name.to_string(), stat)).or_default().push(v);
                        }
                    }
                }
            }
        }
        let bands = per_row.into_iter().filter_map(|(k, v)| replicate::run_to_run_band(&v).map(|b| (k, b))).collect();
        NoiseProfile { description, bands }
    }
}

/// How verdicts are decided.
#[derive(Debug, Clone, Serialize)]
pub struct CompareOptions {
    /// Band for rows the profile does not cover (or all rows without one).
    pub noise: f64,
    /// The host's calibrated bands; `--noise` given explicitly turns it off.
    pub profile: Option<NoiseProfile>,
    /// False discovery rate across the table.
    pub fdr: f64,
}

impl CompareOptions {
    pub fn fixed(noise: f64) -> CompareOptions {
        CompareOptions { noise, profile: None, fdr: FALSE_DISCOVERY_RATE }
    }
}

/// One column of a comparison: runs whose invocations are pooled.
#[derive(Debug, Clone)]
pub struct Side {
    pub label: String,
    pub runs: Vec<Run>,
}

impl Side {
    pub fn of(run: Run) -> Side {
        Side { label: run.label(), runs: vec![run] }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub runs: Vec<String>,
    pub options: CompareOptions,
    pub rows: Vec<CompareRow>,
    /// Cells that got a p-value (the family the false-discovery control covers).
    pub tested: usize,
    /// Per later side: environment fields that differ from the baseline's.
    pub env_differences: Vec<(String, Vec<EnvDifference>)>,
    /// Replicates to add on the side that has too few, when any has.
    pub replicates_short: Option<usize>,
    /// Every side is simulated: replicates are seeds.
    pub simulated: bool,
    /// Each compared case's benchmark, parameters and mode (by its key), so
    /// headings can name only what matters.
    pub cases: BTreeMap<String, CaseParams>,
}

/// What a heading needs of a compared case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseParams {
    pub name: String,
    pub params: BTreeMap<String, serde_json::Value>,
    pub quick: bool,
}

/// An environment field that differs: (field, baseline value, this run's value).
pub type EnvDifference = (String, String, String);

#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("compare needs at least two sides: name a baseline and one or more runs to compare with it")]
    TooFewRuns,
    #[error(
        "the runs share no benchmark: {0}; compare runs that measured the same benchmark with the same parameters"
    )]
    NothingInCommon(String),
}

/// Live benchmarks whose simulated workload reports their figures under
/// their names (the rest may share a name for another quantity), each with
/// the figures the simulator names otherwise, as (live name, sim name).
const TWINS: &[(&str, &[(&str, &str)])] = &[
    ("interactive", &[]),
    ("hackbench", &[("total_time", "makespan")]),
    ("hogs", &[]),
    ("pipe", &[]),
    ("wakeup", &[("rt.latency", "wakeup_latency.rt"), ("normal.latency", "wakeup_latency.normal")]),
];

/// Sides whose simulated twins name a figure otherwise than the live
/// benchmark among the sides ([`TWINS`]) get it under the live name, so
/// that the two pair up; None when nothing is renamed.
fn live_names(sides: &[Side]) -> Option<Vec<Side>> {
    let benches = || sides.iter().flat_map(|s| &s.runs).flat_map(|r| &r.benchmarks);
    let live: Vec<&str> = benches().map(|b| b.name.as_str()).filter(|n| !n.starts_with("sim:")).collect();
    // Copy the sides only when a simulated twin of a live benchmark is there.
    if !benches().any(|b| b.name.strip_prefix("sim:").is_some_and(|p| live.contains(&p))) {
        return None;
    }
    let mut out = sides.to_vec();
    let mut changed = false;
    for b in out.iter_mut().flat_map(|s| &mut s.runs).flat_map(|r| &mut r.benchmarks) {
        let Some(plain) = b.name.strip_prefix("sim:").filter(|p| live.contains(p)) else { continue };
        let Some((_, aliases)) = TWINS.iter().find(|(t, _)| *t == plain) else { continue };
        for m in &mut b.metrics {
            if let Some((live_name, _)) = aliases.iter().find(|(_, sim_name)| *sim_name == m.name) {
                m.name = live_name.to_string();
                changed = true;
            }
        }
    }
    changed.then_some(out)
}

/// The case of `side` that `base` is compared with: the same benchmark key
/// under the same condition, else the side's only case of that key (two runs
/// under different conditions compare; a sweep's conditions pair up), else
/// its twin (true): the simulator's workload of a [`TWINS`] benchmark's name
/// (`sim:interactive` for `interactive`, and back), so that a live run and a
/// simulated one compare.
fn counterpart<'s, 'a>(side: &'s [Case<'a>], base: &Case<'_>) -> Option<(&'s Case<'a>, bool)> {
    let same_key: Vec<&Case<'a>> = side.iter().filter(|c| c.key == base.key).collect();
    let found = same_key
        .iter()
        .find(|c| c.condition == base.condition)
        .or_else(|| if same_key.len() == 1 { same_key.first() } else { None })
        .copied();
    if found.is_some() {
        return found.map(|c| (c, false));
    }
    let name = &base.invocations[0].name;
    let plain = name.strip_prefix("sim:").unwrap_or(name);
    if !TWINS.iter().any(|(t, _)| *t == plain) {
        return None;
    }
    let twin = if plain == name { format!("sim:{name}") } else { plain.to_string() };
    let twins: Vec<&Case<'a>> = side.iter().filter(|c| c.invocations[0].name == twin).collect();
    // Several twins (a live run's cases, one per task): the one sharing figures.
    let shares = |c: &&Case<'a>| base.metric_names().iter().any(|n| c.metric(n).is_some());
    let sharing: Vec<&Case<'a>> = twins.iter().copied().filter(shares).collect();
    match (twins.len(), sharing.len()) {
        (1, _) | (_, 1) => Some((sharing.first().or(twins.first()).copied()?, true)),
        _ => None,
    }
}

/// Sides whose simulated `interactive` results were stored under the older
/// names get them renamed as they are read ([`upgrade_sim_interactive`]).
fn upgraded(sides: &[Side]) -> Option<Vec<Side>> {
    let mut out = sides.to_vec();
    let mut changed = false;
    for b in out.iter_mut().flat_map(|s| &mut s.runs).flat_map(|r| &mut r.benchmarks) {
        changed |= upgrade_sim_interactive(b);
    }
    changed.then_some(out)
}

/// A sweep's sides: one per condition of the sweep, in the order they first
/// ran, each labelled by what sets it apart (`fifo:50`, `+load
/// hackbench:10`); None for a run under one condition. A benchmark may add
/// to the condition it was given (cyclic's `mlock`), so a side is what
/// differs among one benchmark's conditions, matched across benchmarks.
pub fn sweep_sides(run: &Run) -> Option<Vec<Side>> {
    // Words, with "+load X" kept whole.
    let tokens = |label: &str| -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for w in label.split_whitespace() {
            match out.last_mut() {
                Some(last) if last == "+load" => *last = format!("+load {w}"),
                _ => out.push(w.to_string()),
            }
        }
        out
    };
    let mut by_key: Vec<(String, Vec<String>)> = Vec::new();
    for b in &run.benchmarks {
        let (key, c) = (b.key(), b.condition.case_label());
        match by_key.iter_mut().find(|(k, _)| *k == key) {
            Some((_, conds)) if !conds.contains(&c) => conds.push(c),
            Some(_) => {}
            None => by_key.push((key, vec![c])),
        }
    }
    // Each condition of a benchmark that ran under several, by what is its own.
    let mut side_of: Vec<((String, String), String)> = Vec::new();
    let mut labels: Vec<String> = Vec::new();
    for (key, conds) in by_key.iter().filter(|(_, c)| c.len() > 1) {
        let all: Vec<Vec<String>> = conds.iter().map(|c| tokens(c)).collect();
        for (cond, words) in conds.iter().zip(&all) {
            let own: Vec<&str> =
                words.iter().filter(|w| !all.iter().all(|o| o.contains(w))).map(String::as_str).collect();
            let label = if own.is_empty() { cond.clone() } else { own.join(" ") };
            if !labels.contains(&label) {
                labels.push(label.clone());
            }
            side_of.push(((key.clone(), cond.clone()), label));
        }
    }
    if labels.len() < 2 {
        return None;
    }
    // A benchmark that ran under one condition only joins the side it holds.
    let side = |b: &schedlab_core::BenchResult| -> String {
        let (key, cond) = (b.key(), b.condition.case_label());
        if let Some((_, label)) = side_of.iter().find(|((k, c), _)| *k == key && *c == cond) {
            return label.clone();
        }
        let words = tokens(&cond);
        labels.iter().find(|l| tokens(l).iter().all(|t| words.contains(t))).cloned().unwrap_or(cond)
    };
    let mut sides: Vec<Side> = Vec::new();
    for b in &run.benchmarks {
        let label = side(b);
        match sides.iter_mut().find(|s| s.label == label) {
            Some(s) => s.runs[0].benchmarks.push(b.clone()),
            None => {
                let mut only = run.clone();
                only.benchmarks = vec![b.clone()];
                sides.push(Side { label, runs: vec![only] });
            }
        }
    }
    Some(sides)
}

/// Compare single runs (each run its own side).
pub fn compare(runs: &[Run], opts: &CompareOptions) -> Result<Comparison, CompareError> {
    compare_sides(&runs.iter().cloned().map(Side::of).collect::<Vec<_>>(), opts)
}

pub fn compare_sides(sides: &[Side], opts: &CompareOptions) -> Result<Comparison, CompareError> {
    if sides.len() < 2 {
        return Err(CompareError::TooFewRuns);
    }
    let old_names = sides.iter().flat_map(|s| &s.runs).flat_map(|r| &r.benchmarks).any(|b| b.name == "sim:interactive");
    let renamed = if old_names { upgraded(sides) } else { None };
    let sides = renamed.as_deref().unwrap_or(sides);
    let aliased = live_names(sides);
    let sides = aliased.as_deref().unwrap_or(sides);
    let grouped: Vec<Vec<Case<'_>>> =
        sides.iter().map(|s| cases(s.runs.iter().flat_map(|r| &r.benchmarks), true)).collect();
    let mut rows = Vec::new();
    let mut case_params = BTreeMap::new();
    for base_case in &grouped[0] {
        let found: Vec<Option<(&Case<'_>, bool)>> = grouped[1..].iter().map(|g| counterpart(g, base_case)).collect();
        if found.iter().all(Option::is_none) {
            continue;
        }
        // Twins share only some figures (a live run's kernel counters, the
        // simulator's own): the rows are those every twin also has.
        let twins = found.iter().flatten().any(|(_, twin)| *twin);
        let others: Vec<Option<&Case<'_>>> = found.iter().map(|o| o.map(|(c, _)| c)).collect();
        // A swept baseline holds the key under several conditions: each is its own block.
        let swept = grouped[0].iter().filter(|c| c.key == base_case.key).count() > 1;
        let benchmark =
            if swept { format!("{} · {}", base_case.key, base_case.condition) } else { base_case.key.clone() };
        let first = base_case.invocations[0];
        let params = first.params.clone();
        case_params.insert(benchmark.clone(), CaseParams { name: first.name.clone(), params, quick: first.quick });
        for name in base_case.metric_names() {
            let Some(m) = base_case.metric(name) else { continue };
            if twins && others.iter().flatten().any(|o| o.metric(name).is_none()) {
                continue;
            }
            let mut entities: Vec<Option<String>> = match m.data.level() {
                Level::Entity => base_case.entities(name).into_iter().map(Some).collect(),
                _ => vec![None],
            };
            if twins {
                entities.retain(|e| {
                    e.as_ref().is_none_or(|e| others.iter().flatten().all(|o| o.entities(name).contains(e)))
                });
            }
            for entity in &entities {
                for &stat in stats_of(&m.data) {
                    let values = |c: &Case<'_>| c.replicate_values(name, stat, entity.as_deref());
                    let base_values = values(base_case);
                    let mut cells = vec![Cell {
                        value: typical(&base_values),
                        replicates: base_values.len(),
                        change: None,
                        point_ratio: None,
                        band: None,
                        band_source: BandSource::Fixed,
                        verdict: Verdict::None,
                    }];
                    for other in &others {
                        let v = other.map(&values).unwrap_or_default();
                        let (band, band_source) = band_for(opts, &base_case.key, name, stat);
                        let mut cell = Cell {
                            value: typical(&v),
                            replicates: v.len(),
                            change: None,
                            point_ratio: None,
                            band: Some(band),
                            band_source,
                            verdict: Verdict::None,
                        };
                        if stat.has_verdict() && !v.is_empty() && !base_values.is_empty() {
                            match change(&base_values, &v, band) {
                                Ok(c) => cell.change = Some(c),
                                Err(ChangeError::TooFew { .. }) => cell.verdict = Verdict::NotEnoughRuns,
                                Err(ChangeError::ZeroBaseline) => {}
                            }
                        }
                        if cell.change.is_none() {
                            cell.point_ratio = match (cells[0].value, cell.value) {
                                (Some(a), Some(b)) if a != 0.0 => Some(b / a),
                                _ => None,
                            };
                        }
                        cells.push(cell);
                    }
                    rows.push(CompareRow {
                        benchmark: benchmark.clone(),
                        metric: name.to_string(),
                        statistic: stat.label(),
                        entity: entity.clone(),
                        unit: m.unit,
                        direction: m.direction,
                        cells,
                    });
                }
            }
        }
    }
    if rows.is_empty() {
        let names = |s: &Side| {
            let mut keys: Vec<String> = s.runs.iter().flat_map(|r| r.benchmarks.iter().map(|b| b.key())).collect();
            keys.dedup();
            keys.join(", ")
        };
        let detail = sides.iter().map(|s| format!("{} has [{}]", s.label, names(s))).collect::<Vec<_>>().join("; ");
        return Err(CompareError::NothingInCommon(detail));
    }

    // Verdicts: the minimum-effect p-values of every tested cell, controlled
    // together.
    let tested: Vec<(usize, usize)> = rows
        .iter()
        .enumerate()
        .flat_map(|(r, row)| row.cells.iter().enumerate().filter(|(_, c)| c.change.is_some()).map(move |(i, _)| (r, i)))
        .collect();
    let p: Vec<f64> = tested.iter().map(|&(r, i)| rows[r].cells[i].change.map_or(1.0, |c| c.p)).collect();
    let discovered = benjamini_hochberg(&p, opts.fdr);
    for (&(r, i), found) in tested.iter().zip(discovered) {
        let direction = rows[r].direction;
        let cell = &mut rows[r].cells[i];
        cell.verdict = verdict_of(found, direction, cell.change.map_or(1.0, |c| c.ratio));
    }
    let replicates_short = rows
        .iter()
        .flat_map(|r| &r.cells)
        .filter(|c| c.replicates > 0)
        .map(|c| MIN_REPLICATES.saturating_sub(c.replicates))
        .max()
        .filter(|&n| n > 0);

    let first_env = |s: &Side| s.runs.iter().find_map(|r| r.env_start.clone());
    let base_env = first_env(&sides[0]);
    let env_differences = sides[1..]
        .iter()
        .filter_map(|s| {
            let (a, b) = (base_env.as_ref()?, first_env(s)?);
            let d = a.differences(&b);
            (!d.is_empty())
                .then(|| (s.label.clone(), d.into_iter().map(|(f, x, y)| (f.to_string(), x, y)).collect::<Vec<_>>()))
        })
        .collect();
    Ok(Comparison {
        runs: sides.iter().map(|s| s.label.clone()).collect(),
        options: opts.clone(),
        tested: tested.len(),
        rows,
        env_differences,
        replicates_short,
        simulated: sides.iter().flat_map(|s| &s.runs).all(|r| r.kind == RunKind::Sim),
        cases: case_params,
    })
}

/// The verdict of a tested change that the false-discovery control did or
/// did not keep (`found`).
pub(crate) fn verdict_of(found: bool, direction: Direction, ratio: f64) -> Verdict {
    match (found, direction, ratio > 1.0) {
        (false, _, _) => Verdict::WithinNoise,
        (true, Direction::Neutral, _) => Verdict::Changed,
        (true, Direction::HigherIsBetter, true) | (true, Direction::LowerIsBetter, false) => Verdict::Better,
        (true, _, _) => Verdict::Worse,
    }
}

pub(crate) fn band_for(opts: &CompareOptions, key: &str, metric: &str, stat: Stat) -> (f64, BandSource) {
    match opts.profile.as_ref().and_then(|p| p.bands.get(&(key.to_string(), metric.to_string(), stat))) {
        Some(&b) => (b, BandSource::Profile),
        None => (opts.noise, BandSource::Fixed),
    }
}

/// What the verdicts rest on, as footer lines under a table.
pub fn footer_lines(c: &Comparison) -> Vec<String> {
    let mut out = Vec::new();
    let unit = if c.simulated { "seeds" } else { "invocations" };
    out.push(format!(
        "verdicts: 95% intervals over {unit} (the replicates); \"better\"/\"worse\" only where the interval clears \
         the noise band and survives Benjamini-Hochberg at {:.0}% false discoveries over the {} tested cells",
        c.options.fdr * 100.0,
        c.tested
    ));
    let judged = || c.rows.iter().flat_map(|r| &r.cells[1..]).filter(|x| x.change.is_some());
    let from_profile = judged().any(|x| x.band_source == BandSource::Profile);
    let fixed = judged().any(|x| x.band_source == BandSource::Fixed);
    match (&c.options.profile, from_profile) {
        (Some(p), true) => {
            out.push(format!("noise band: each row's run-to-run variation from {}", p.description));
            if fixed {
                out.push(format!("noise band: ±{:.1}% for rows the profile does not cover", c.options.noise * 100.0));
            }
        }
        (Some(p), false) => out.push(format!(
            "noise band: ±{:.1}% ({} covers none of these rows: calibrate with these benchmarks)",
            c.options.noise * 100.0,
            p.description
        )),
        (None, _) if c.simulated => out.push(format!(
            "noise band: ±{:.1}% (simulated: seeds are the only source of variation)",
            c.options.noise * 100.0
        )),
        (None, _) => out.push(format!(
            "noise band: ±{:.1}% fixed; no noise profile for this host, so run-to-run variation beyond the \
             invocations is not covered: run `schedlab calibrate`",
            c.options.noise * 100.0
        )),
    }
    if let Some(n) = c.replicates_short {
        out.push(if c.simulated {
            format!("not enough runs: a verdict needs {MIN_REPLICATES} seeds a side; add {n} (sim --seeds {MIN_REPLICATES})")
        } else {
            format!(
                "not enough runs: a verdict needs {MIN_REPLICATES} invocations a side; add {n} \
                 (run --invocations {MIN_REPLICATES}, or pool runs: compare A1,A2,A3 B1,B2,B3)"
            )
        });
    }
    out
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

/// "+3.1% [-1.2%, +7.5%] within noise", or "not enough runs".
pub fn change_text(cell: &Cell) -> String {
    match (cell.change, cell.verdict) {
        (Some(c), v) => format!(
            "{:+.1}% [{:+.1}%, {:+.1}%] {}{}",
            (c.ratio - 1.0) * 100.0,
            c.ci.lo * 100.0,
            c.ci.hi * 100.0,
            v.label(),
            why_within_noise(cell, c)
        ),
        (None, Verdict::NotEnoughRuns) => match cell.point_ratio {
            Some(r) => format!("{:+.1}% (n={}: not enough runs)", (r - 1.0) * 100.0, cell.replicates),
            None => format!("n={}: not enough runs", cell.replicates),
        },
        (None, _) => match cell.point_ratio {
            Some(r) => format!("{:+.1}% (no verdict: one sample)", (r - 1.0) * 100.0),
            None => "-".into(),
        },
    }
}

/// Why a change whose interval excludes "no change" is still within noise:
/// this row's band is wider, or the table-wide false-discovery control did
/// not keep it.
fn why_within_noise(cell: &Cell, c: Change) -> String {
    let band = cell.band.unwrap_or(0.0);
    if cell.verdict != Verdict::WithinNoise || (c.ci.lo <= 0.0 && c.ci.hi >= 0.0) {
        return String::new();
    }
    if c.ci.lo > band || c.ci.hi < 1.0 / (1.0 + band) - 1.0 {
        " (not kept by the table-wide false-discovery control)".into()
    } else {
        format!(" (band ±{:.1}%)", band * 100.0)
    }
}

/// The comparison as a terminal table, shaped like the seeds' tables
/// ("Pipe-based context switching | ULE | 4BSD"): a heading per benchmark,
/// then a line per metric with the baseline's value and, for each other
/// side, its value, change, interval and verdict; laid out for `width`
/// columns (verdicts wrap, further sides fold below).
/// The comparison as a terminal table: a heading per benchmark case (its
/// parameters as `params` describes them), then a row per metric.
pub fn compare_table(c: &Comparison, width: usize, params: &crate::rows::ParamTable) -> String {
    use crate::text::{Align, Grid};
    let mut header = vec!["metric".to_string(), format!("{} (baseline)", c.runs[0])];
    let mut align = vec![Align::Left, Align::Right];
    for r in &c.runs[1..] {
        header.push(r.clone());
        header.push("change [95% CI] verdict".to_string());
        align.extend([Align::Right, Align::Left]);
    }
    let mut t = Grid::new(header, align);
    let mut last = None;
    for row in &c.rows {
        if last != Some(&row.benchmark) {
            t.heading(case_heading(c, &row.benchmark, params));
            last = Some(&row.benchmark);
        }
        let fmt = |v: Option<f64>| v.map(|v| row.unit.format(v)).unwrap_or_else(|| "-".into());
        let mut cells = vec![format!("  {}", row.label()), fmt(row.cells[0].value)];
        for cell in &row.cells[1..] {
            cells.push(fmt(cell.value));
            cells.push(change_text(cell));
        }
        t.row(cells);
    }
    t.render(width)
}

/// A comparison of many sides that fits `width`: `compare_table` when its
/// columns fit, else a block per metric with one line per side (value, then
/// change, interval and verdict against the first), so a sweep of any number
/// of conditions reads down the page.
pub fn sweep_table(c: &Comparison, width: usize, params: &crate::rows::ParamTable) -> String {
    use crate::text::{max_line_width, Align, Grid};
    let wide = compare_table(c, usize::MAX / 2, params);
    if max_line_width(&wide) <= width {
        return wide;
    }
    let header = vec!["condition".to_string(), "value".to_string(), "change [95% CI] verdict".to_string()];
    let mut t = Grid::new(header, vec![Align::Left, Align::Right, Align::Left]);
    let mut last = None;
    for row in &c.rows {
        if last != Some(&row.benchmark) {
            t.heading(case_heading(c, &row.benchmark, params));
            last = Some(&row.benchmark);
        }
        t.heading(format!("  {}", row.label()));
        let fmt = |v: Option<f64>| v.map(|v| row.unit.format(v)).unwrap_or_else(|| "-".into());
        for (i, (side, cell)) in c.runs.iter().zip(&row.cells).enumerate() {
            let change = if i == 0 { "(baseline)".to_string() } else { change_text(cell) };
            t.row(vec![format!("    {side}"), fmt(cell.value), change]);
        }
    }
    t.render(width)
}

/// A compared case's heading: its benchmark and the parameters worth reading.
fn case_heading(c: &Comparison, benchmark: &str, params: &crate::rows::ParamTable) -> String {
    match c.cases.get(benchmark) {
        Some(case) => {
            let siblings: Vec<_> = c.cases.values().filter(|o| o.name == case.name).map(|o| &o.params).collect();
            crate::table::params_heading(&case.name, &case.params, case.quick, &siblings, params)
        }
        None => benchmark.to_string(),
    }
}

/// Each row's band: a change smaller than this between two runs on this host
/// is expected from run-to-run variation alone (95 % prediction bound).
pub fn profile_table(p: &NoiseProfile, width: usize) -> String {
    use crate::text::{Align, Grid};
    let mut t = Grid::new(
        vec!["benchmark".into(), "metric".into(), "run-to-run band (95%)".into()],
        vec![Align::Left, Align::Left, Align::Right],
    );
    for ((key, metric, stat), band) in &p.bands {
        t.row(vec![key.clone(), format!("{metric} {}", stat.label()), format!("±{:.1}%", band * 100.0)]);
    }
    t.render(width)
}

/// Long-format CSV: one line per (row, side).
pub fn compare_csv(c: &Comparison) -> String {
    let mut out = String::from(
        "benchmark,metric,statistic,entity,unit,run,value,replicates,ratio,change_lo,change_hi,p,band,band_source,verdict\n",
    );
    let q = |s: &str| if s.contains([',', '"']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() };
    let opt = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
    for row in &c.rows {
        for (run, cell) in c.runs.iter().zip(&row.cells) {
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                q(&row.benchmark),
                q(&row.metric),
                row.statistic,
                q(row.entity.as_deref().unwrap_or("")),
                row.unit.symbol(),
                q(run),
                opt(cell.value),
                cell.replicates,
                opt(cell.ratio()),
                opt(cell.change.map(|c| c.ci.lo)),
                opt(cell.change.map(|c| c.ci.hi)),
                opt(cell.change.map(|c| c.p)),
                opt(cell.band),
                if cell.band_source == BandSource::Profile { "profile" } else { "fixed" },
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
        let mut line = format!("| {} | {} |", row.benchmark.replace('|', "\\|"), row.label());
        for (i, cell) in row.cells.iter().enumerate() {
            let v = cell.value.map(|v| row.unit.format(v)).unwrap_or_else(|| "-".into());
            if i == 0 {
                line.push_str(&format!(" {v} |"));
            } else {
                let r = cell.ratio().map(|r| format!(" ({:+.1}%, {})", (r - 1.0) * 100.0, cell.verdict.label()));
                line.push_str(&format!(" {v}{} |", r.unwrap_or_default()));
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    for l in footer_lines(c) {
        out.push_str(&format!("\n{l}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_core::*;

    /// A run with one invocation per entry of `rates` (each invocation's
    /// repetitions) and a latency histogram per invocation centred on `lat`.
    fn run_with(id: i64, rates: &[Vec<f64>], lat: &[u64]) -> Run {
        let tool = ToolInfo { name: "schedlab".into(), version: "0".into(), git_rev: None };
        let mut r = Run::new(RunKind::Live, tool, vec![], "h".into(), 0);
        r.id = Some(id);
        for (i, rate) in rates.iter().enumerate() {
            let cond = Condition::Live { requested: SchedCondition::default(), applied: None, loads: vec![] };
            let mut b = BenchResult::new("pipe", cond, 0).param("placement", "same-cpu");
            b.invocation = i as u32;
            b.status = BenchStatus::Complete;
            b.metrics.push(Metric::samples("rate", Unit::PerSecond, Direction::HigherIsBetter, rate.clone()));
            let mut h = LatencyHistogram::new();
            for k in 0..2000u64 {
                h.record(lat[i % lat.len()] + (k * 7919) % 1000);
            }
            b.metrics.push(Metric::histogram("latency", Direction::LowerIsBetter, h));
            r.benchmarks.push(b);
        }
        r
    }

    fn cell<'a>(c: &'a Comparison, metric: &str, stat: &str) -> &'a Cell {
        &c.rows.iter().find(|r| r.metric == metric && r.statistic == stat).unwrap().cells[1]
    }

    fn invocations(centres: &[f64]) -> Vec<Vec<f64>> {
        centres.iter().map(|&c| vec![c - 1.0, c + 1.0]).collect()
    }

    /// A live `interactive` run shaped as the benchmark writes it: task
    /// audio, rows none and burn, three invocations, beside the live-only
    /// figures (a kernel counter, the calibration).
    fn live_interactive() -> Run {
        let tool = ToolInfo { name: "schedlab".into(), version: "0".into(), git_rev: None };
        let mut r = Run::new(RunKind::Live, tool, vec![], "h".into(), 0);
        let loads = || vec!["none".to_string(), "burn".to_string()];
        for i in 0..3u32 {
            let cond = Condition::Live { requested: SchedCondition::default(), applied: None, loads: vec![] };
            let mut b = BenchResult::new("interactive", cond, 0).param("task", "audio").param("loads", "none,burn");
            (b.invocation, b.status) = (i, BenchStatus::Complete);
            let f = f64::from(i);
            for (name, unit, dir, v) in [
                ("latency_mean", Unit::Nanoseconds, Direction::LowerIsBetter, [20e3, 900e3]),
                ("latency_sd", Unit::Nanoseconds, Direction::LowerIsBetter, [5e3, 400e3]),
                ("latency_max", Unit::Nanoseconds, Direction::LowerIsBetter, [60e3, 4e6]),
                ("desired_cpu", Unit::Percent, Direction::HigherIsBetter, [100.0, 99.0]),
                ("deadlines_met", Unit::Percent, Direction::HigherIsBetter, [100.0, 97.0]),
            ] {
                let name = format!("{name}.audio");
                b.metrics.push(Metric::entities(&name, unit, dir, "load", loads(), v.map(|x| x + f).to_vec()));
            }
            for (load, centre) in [("none", 20_000), ("burn", 900_000)] {
                let mut h = LatencyHistogram::new();
                (0..200u64).for_each(|k| h.record(centre + k * 50 + u64::from(i)));
                let name = format!("latency.audio@{load}");
                b.metrics.push(Metric::histogram_per_repetition(&name, Direction::LowerIsBetter, vec![h]).headline());
                let name = format!("kernel.switches@{load}");
                b.metrics.push(Metric::samples(&name, Unit::Count, Direction::Neutral, vec![400.0 + f]));
            }
            b.metrics.push(Metric::samples("calibration_loops_per_ms", Unit::Count, Direction::Neutral, vec![1e6]));
            r.benchmarks.push(b);
        }
        r
    }

    /// The simulator's `interactive` run, seeds 1..=3.
    fn sim_interactive(workload: &str) -> Run {
        let tool = ToolInfo { name: "schedlab".into(), version: "0".into(), git_rev: None };
        let mut r = Run::new(RunKind::Sim, tool, vec![], "h".into(), 0);
        for seed in 1..=3u64 {
            let opts = schedlab_sim::SimOptions { cpus: 1, seed, duration_ns: 2_000_000_000, ..Default::default() };
            let mut b = schedlab_sim::run("cfs", workload, &opts).unwrap().result;
            b.invocation = seed as u32 - 1;
            r.benchmarks.push(b);
        }
        r
    }

    /// (metric, entity) of every row, each checked to have a value on every side.
    fn rows_with_values(c: &Comparison) -> Vec<(String, Option<String>)> {
        let mut out: Vec<(String, Option<String>)> = Vec::new();
        for row in &c.rows {
            assert!(row.cells.iter().all(|cell| cell.value.is_some()), "an orphan row: {}", row.label());
            let key = (row.metric.clone(), row.entity.clone());
            if !out.contains(&key) {
                out.push(key);
            }
        }
        out
    }

    #[test]
    fn a_live_interactive_run_and_a_simulated_one_compare_row_by_row() {
        let (live, sim) = (live_interactive(), sim_interactive("interactive:audio=1,video=1,burn=1"));
        let burn = Some("burn".to_string());
        let expected: Vec<(String, Option<String>)> =
            ["latency_mean", "latency_sd", "latency_max", "desired_cpu", "deadlines_met"]
                .iter()
                .map(|n| (format!("{n}.audio"), burn.clone()))
                .chain([("latency.audio@burn".to_string(), None)])
                .collect();
        let c = compare(&[live.clone(), sim.clone()], &CompareOptions::fixed(0.02)).unwrap();
        assert_eq!(rows_with_values(&c), expected, "the burn row of audio's table, and only what both report");
        // The other way round: the simulated video task has no live counterpart here.
        let c = compare(&[sim, live], &CompareOptions::fixed(0.02)).unwrap();
        let mut got = rows_with_values(&c);
        got.sort();
        let mut want = expected;
        want.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn simulated_interactive_results_stored_under_the_older_names_still_compare() {
        // Before the rename: deadlines_met.audio one sample, latency pooled over tasks.
        let mut old = sim_interactive("interactive:audio=1,video=0,burn=1");
        for b in &mut old.benchmarks {
            b.metrics.retain(|m| m.name == "wakeup_latency.normal" || m.name == "deadlines_met.audio");
            let m = b.metrics.iter_mut().find(|m| m.name == "deadlines_met.audio").unwrap();
            m.data = MetricData::Samples { values: vec![m.summary().unwrap().mean] };
        }
        let c = compare(&[live_interactive(), old], &CompareOptions::fixed(0.02)).unwrap();
        assert_eq!(rows_with_values(&c), [("deadlines_met.audio".to_string(), Some("burn".to_string()))]);
    }

    #[test]
    fn identical_runs_are_within_noise() {
        let a = run_with(1, &invocations(&[100.0, 104.0, 97.0]), &[10_000, 10_300, 9_800]);
        let b = run_with(2, &invocations(&[100.0, 104.0, 97.0]), &[10_000, 10_300, 9_800]);
        let c = compare(&[a, b], &CompareOptions::fixed(0.02)).unwrap();
        for row in &c.rows {
            let v = row.cells[1].verdict;
            assert!(matches!(v, Verdict::WithinNoise | Verdict::None), "{}: {v:?}", row.label());
        }
        assert_eq!(cell(&c, "rate", "mean").ratio(), Some(1.0));
        assert_eq!(cell(&c, "latency", "max").verdict, Verdict::None, "the max never gets a verdict");
    }

    #[test]
    fn a_sweep_is_split_by_what_sets_each_condition_apart() {
        // Rounds of a two-condition sweep over two benchmarks, one of which
        // adds mlock to whatever condition it is given (as cyclic does).
        let mut run = run_with(1, &invocations(&[100.0]), &[10_000]);
        run.benchmarks.clear();
        let template = run_with(1, &invocations(&[100.0]), &[10_000]).benchmarks.remove(0);
        for round in 0..3 {
            for (policy, rate) in [(SchedPolicy::Other, 100.0), (SchedPolicy::Fifo, 130.0)] {
                for (bench, mlock) in [("cyclic", true), ("exectime", false)] {
                    let requested = SchedCondition { policy, mlock, ..Default::default() };
                    let mut b = template.clone();
                    b.name = bench.into();
                    b.invocation = round;
                    b.condition = Condition::Live { requested, applied: None, loads: vec![] };
                    b.metrics[0] =
                        Metric::samples("rate", Unit::PerSecond, Direction::HigherIsBetter, vec![rate + round as f64]);
                    run.benchmarks.push(b);
                }
            }
        }
        let sides = sweep_sides(&run).expect("two conditions");
        let labels: Vec<&str> = sides.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["other", "fifo:50"], "mlock is common to cyclic's conditions, not a side");
        assert!(sides.iter().all(|s| s.runs[0].benchmarks.len() == 6), "3 rounds x 2 benchmarks each");
        let c = compare_sides(&sides, &CompareOptions::fixed(0.02)).unwrap();
        let rates: Vec<&CompareRow> = c.rows.iter().filter(|r| r.metric == "rate" && r.statistic == "mean").collect();
        assert_eq!(rates.len(), 2, "one row per benchmark");
        assert!(rates.iter().all(|r| r.cells[1].verdict == Verdict::Better), "fifo's 30 % more is found for both");
        assert!(sweep_sides(&run_with(2, &invocations(&[1.0, 2.0]), &[1])).is_none(), "one condition: no sweep");
    }

    #[test]
    fn a_shift_is_detected_in_the_right_direction() {
        let a = run_with(1, &invocations(&[100.0, 102.0, 98.0, 101.0]), &[10_000, 10_100, 9_900]);
        // 20 % higher rate (better) and 30 % higher latency (worse).
        let b = run_with(2, &invocations(&[120.0, 122.0, 118.0, 121.0]), &[13_000, 13_130, 12_870]);
        let c = compare(&[a, b], &CompareOptions::fixed(0.02)).unwrap();
        assert_eq!(cell(&c, "rate", "mean").verdict, Verdict::Better);
        let r = cell(&c, "rate", "mean").change.unwrap().ci;
        assert!(r.lo > 0.15 && r.hi < 0.25, "{r:?}");
        assert_eq!(cell(&c, "latency", "mean").verdict, Verdict::Worse);
        assert_eq!(cell(&c, "latency", "p50").verdict, Verdict::Worse);
    }

    #[test]
    fn repetitions_of_one_invocation_are_not_replicates() {
        // The old fault: one invocation each, five tight repetitions, 10 %
        // apart. Repetitions cannot say whether the next run differs by 10 %.
        let a = run_with(1, &[vec![100.0, 100.5, 99.5, 100.2, 99.8]], &[10_000]);
        let b = run_with(2, &[vec![110.0, 110.5, 109.5, 110.2, 109.8]], &[11_000]);
        let c = compare(&[a, b], &CompareOptions::fixed(0.02)).unwrap();
        assert_eq!(cell(&c, "rate", "mean").verdict, Verdict::NotEnoughRuns);
        assert_eq!(c.replicates_short, Some(2));
        assert!(footer_lines(&c).iter().any(|l| l.contains("add 2")), "{:?}", footer_lines(&c));
    }

    #[test]
    fn pooled_runs_make_one_side() {
        let one = |id, centre: f64| run_with(id, &invocations(&[centre]), &[10_000]);
        let a = Side { label: "A".into(), runs: vec![one(1, 100.0), one(2, 103.0), one(3, 98.0)] };
        let b = Side { label: "B".into(), runs: vec![one(4, 130.0), one(5, 127.0), one(6, 133.0)] };
        let c = compare_sides(&[a, b], &CompareOptions::fixed(0.02)).unwrap();
        let rate = cell(&c, "rate", "mean");
        assert_eq!(rate.replicates, 3);
        assert_eq!(rate.verdict, Verdict::Better);
    }

    #[test]
    fn a_profile_band_raises_the_bar_per_row() {
        let a = run_with(1, &invocations(&[100.0, 101.0, 99.0]), &[10_000, 10_050, 9_950]);
        let b = run_with(2, &invocations(&[106.0, 107.0, 105.0]), &[10_000, 10_050, 9_950]);
        let fixed = compare(&[a.clone(), b.clone()], &CompareOptions::fixed(0.02)).unwrap();
        assert_eq!(cell(&fixed, "rate", "mean").verdict, Verdict::Better);
        let mut profile = NoiseProfile { description: "test".into(), ..Default::default() };
        profile.bands.insert(("pipe placement=same-cpu".into(), "rate".into(), Stat::Mean), 0.10);
        let opts = CompareOptions { profile: Some(profile), ..CompareOptions::fixed(0.02) };
        let calibrated = compare(&[a, b], &opts).unwrap();
        let rate = cell(&calibrated, "rate", "mean");
        assert_eq!((rate.verdict, rate.band_source), (Verdict::WithinNoise, BandSource::Profile));
        assert!(
            compare_table(&calibrated, 200, &Default::default()).contains("within noise (band ±10.0%)"),
            "the table says why"
        );
        assert_eq!(cell(&calibrated, "latency", "p50").band_source, BandSource::Fixed);
    }

    #[test]
    fn a_profile_is_built_from_calibration_runs() {
        let runs: Vec<Run> = [100.0, 104.0, 97.0, 101.0]
            .iter()
            .enumerate()
            .map(|(i, &c)| run_with(i as i64, &invocations(&[c, c + 1.0, c - 1.0]), &[10_000]))
            .collect();
        let p = NoiseProfile::from_runs("t".into(), &runs);
        let band = p.bands[&("pipe placement=same-cpu".to_string(), "rate".to_string(), Stat::Mean)];
        assert!(band > 0.03 && band < 0.2, "{band}");
        assert!(!p.bands.keys().any(|k| k.2 == Stat::Max));
    }

    #[test]
    fn runs_without_common_benchmarks_are_an_error() {
        let a = run_with(1, &[vec![1.0, 2.0]], &[1]);
        let mut b = run_with(2, &[vec![1.0, 2.0]], &[1]);
        b.benchmarks[0].name = "spawn".into();
        let err = compare(&[a.clone(), b], &CompareOptions::fixed(0.02)).unwrap_err();
        assert!(err.to_string().contains("share no benchmark"), "{err}");
        assert!(matches!(compare(&[a], &CompareOptions::fixed(0.02)), Err(CompareError::TooFewRuns)));
    }

    #[test]
    fn environment_differences_are_reported() {
        let mut a = run_with(1, &[vec![1.0, 2.0]], &[1]);
        let mut b = run_with(2, &[vec![1.0, 2.0]], &[1]);
        a.env_start = Some(Environment { governors: Some(vec!["performance".into()]), ..Default::default() });
        b.env_start = Some(Environment { governors: Some(vec!["powersave".into()]), ..Default::default() });
        let c = compare(&[a, b], &CompareOptions::fixed(0.02)).unwrap();
        let lines = env_warning_lines(&c, "#1");
        assert_eq!(lines.len(), 1);
        assert!(lines[0].contains("governors"), "{}", lines[0]);
    }

    #[test]
    fn table_names_baseline_and_verdicts() {
        let a = run_with(1, &invocations(&[100.0, 101.0, 99.0]), &[10_000]);
        let b = run_with(2, &invocations(&[130.0, 131.0, 129.0]), &[10_000]);
        let c = compare(&[a, b], &CompareOptions::fixed(0.02)).unwrap();
        let t = compare_table(&c, 200, &Default::default());
        assert!(t.contains("#1 (baseline)"), "{t}");
        assert!(t.contains("+30.0%"), "{t}");
        assert!(t.contains("better"), "{t}");
        assert!(compare_csv(&c).lines().nth(1).unwrap().split(',').count() == 15);
    }
}
