//! `schedlab report RUN... -o report.html` and `schedlab plot`.

use super::Outcome;
use crate::args::{PlotArgs, ReportArgs};
use crate::cmd::compare::{check_sides, load_sides, options};
use crate::context::open_store_to_read;
use anyhow::{bail, Context, Result};
use schedlab_core::replicate::pooled_run;
use schedlab_core::{MetricData, Run};
use schedlab_report::compare::{compare_sides, sweep_sides, CompareError, Comparison, Side};
use schedlab_report::plot::{draw, draw_bars, latency_histogram, latency_percentiles, scaling, series, Bar, BarChart};
use schedlab_store::Store;
use std::path::Path;

/// The runs as stored: bars take their intervals from the invocations. One
/// swept run becomes one run per condition, named by it, so its conditions
/// are drawn side by side.
fn load(db: Option<&Path>, sels: &[String]) -> Result<Vec<Run>> {
    let store = open_store_to_read(db)?;
    let runs = sels.iter().map(|s| Ok(store.load_run(store.resolve(s)?)?)).collect::<Result<Vec<Run>>>()?;
    match (runs.len(), runs.first().and_then(sweep_sides)) {
        (1, Some(sides)) => Ok(sides.into_iter().map(named_side).collect()),
        _ => Ok(runs),
    }
}

/// A sweep's side as a run named by its condition.
fn named_side(side: Side) -> Run {
    let mut run = side.runs.into_iter().next().expect("a side holds its run");
    run.name = Some(side.label);
    run
}

pub fn report(db: Option<&Path>, a: ReportArgs) -> Result<Outcome> {
    check_sides(&a.runs)?;
    let store = open_store_to_read(db)?;
    let (sides, comparison) = sides_and_comparison(&*store, &a.runs, a.noise.as_deref())?;
    if sides.len() >= 2 && comparison.is_none() {
        crate::term::note("these runs share no benchmark case: the report shows them side by side, without verdicts");
    }
    // Headings name parameters as `show` does: with units, defaults left out.
    let html = schedlab_report::html::report_with_params(&sides, comparison.as_ref(), &super::show::param_table());
    std::fs::write(&a.output, html)
        .with_context(|| format!("cannot write {}: choose a writable path with -o", a.output.display()))?;
    crate::term::say(format!("report written to {}", a.output.display()));
    Ok(Outcome::Done)
}

/// What a report shows for these run selectors (one side each): the sides
/// (one swept run: its conditions) and, with two or more, their comparison.
/// `report` and `serve` both render this.
pub fn sides_and_comparison(
    store: &dyn Store,
    sels: &[String],
    noise: Option<&str>,
) -> Result<(Vec<Side>, Option<Comparison>)> {
    let mut sides = load_sides(store, sels)?;
    // One swept run: its conditions are the sides.
    if let [only] = sides.as_slice() {
        if let Some(swept) = only.runs.first().filter(|_| only.runs.len() == 1).and_then(sweep_sides) {
            sides = swept.into_iter().map(|s| Side::of(named_side(s))).collect();
        }
    }
    let comparison = if sides.len() >= 2 {
        let opts = options(store, &sides, noise)?;
        match compare_sides(&sides, &opts) {
            Ok(c) => Some(c),
            // A live run and its simulated twin (`wakeup`, `sim:wakeup`)
            // share no case: shown side by side, without verdicts.
            Err(CompareError::NothingInCommon(_)) => None,
            Err(e) => return Err(e.into()),
        }
    } else {
        None
    };
    Ok((sides, comparison))
}

pub fn plot(db: Option<&Path>, a: PlotArgs) -> Result<Outcome> {
    if a.timeline {
        return plot_timeline(db, &a);
    }
    // clap requires --bench without --timeline.
    let bench = a.bench.clone().context("--bench BENCH is needed: name the benchmark to plot")?;
    let raw = load(db, &a.runs)?;
    // Plots draw distributions: each case's invocations pooled.
    let runs: Vec<Run> = raw.iter().map(pooled_run).collect();
    if let crate::args::PlotKind::Scaling | crate::args::PlotKind::Series = a.kind {
        let Some(metric) = &a.metric else { bail!("--kind scaling and series need --metric NAME") };
        let mut chart = match (a.kind, &a.x) {
            (crate::args::PlotKind::Scaling, Some(x)) => scaling(&runs, &bench, x, metric),
            (crate::args::PlotKind::Scaling, None) => bail!("--kind scaling needs --x PARAM, the swept parameter"),
            _ => series(&runs, &bench, metric),
        };
        if chart.lines.is_empty() {
            bail!("no '{}' metric '{metric}' to plot in the runs given: check `schedlab show RUN --all`", bench);
        }
        if let Some(t) = &a.title {
            chart.title = t.clone();
        }
        draw(&chart, &a.output)?;
        crate::term::say(format!("plot written to {}", a.output.display()));
        return Ok(Outcome::Done);
    }
    let (name, params) = bench.split_once(':').unwrap_or((bench.as_str(), ""));
    let wanted: Vec<(&str, &str)> =
        params.split(',').filter(|s| !s.is_empty()).filter_map(|kv| kv.split_once('=')).collect();
    let matches = |b: &schedlab_core::BenchResult| b.name == name && wanted.iter().all(|(k, v)| b.param_is(k, v));
    let mut hists = Vec::new();
    let mut groups = Vec::new();
    let mut bars: Vec<(String, std::collections::BTreeMap<String, Bar>)> = Vec::new();
    let mut bar_unit = None;
    let mut found_metric = false;
    // Legends name a case as headings do: the parameters that vary or are
    // not at their default, with units.
    let table = super::show::param_table();
    let siblings: Vec<_> =
        runs.iter().flat_map(|r| r.benchmarks.iter().filter(|b| matches(b))).map(|b| &b.params).collect();
    for (run, raw) in runs.iter().zip(&raw) {
        let mut values = std::collections::BTreeMap::new();
        for b in run.benchmarks.iter().filter(|b| matches(b)) {
            let m = match &a.metric {
                Some(name) => b.metric(name),
                None => {
                    b.metrics.iter().find(|m| matches!(m.data, MetricData::Histogram { .. }) == a.kind.is_latency())
                }
            };
            let Some(m) = m else { continue };
            found_metric = true;
            let short = schedlab_report::table::params_heading(&b.name, &b.params, b.quick, &siblings, &table);
            let label = if runs.len() > 1 { format!("{} {short}", run.label()) } else { short };
            match &m.data {
                MetricData::Histogram { histogram, .. } => hists.push((label, histogram)),
                _ => {
                    if !groups.contains(&b.key()) {
                        groups.push(b.key());
                    }
                    bar_unit = Some((m.name.clone(), m.unit));
                    // The mean and its interval over the case's invocations, as `show` has them.
                    let case =
                        schedlab_core::replicate::cases(raw.benchmarks.iter().filter(|x| x.key() == b.key()), true);
                    if let Some(s) = case.first().and_then(|c| c.summary(&m.name)) {
                        values.insert(b.key(), Bar { value: s.mean, interval: s.mean_ci.map(|i| (i.lo, i.hi)) });
                    }
                }
            }
        }
        if !values.is_empty() {
            bars.push((run.label(), values));
        }
    }
    if !found_metric {
        bail!(
            "no {} metric of benchmark '{}' in the runs given: check `schedlab show RUN --all` for its metric names",
            if a.kind.is_latency() { "latency" } else { "scalar" },
            bench
        );
    }
    let title = a.title.clone().unwrap_or_else(|| bench.clone());
    match a.kind {
        crate::args::PlotKind::Cdf | crate::args::PlotKind::Hist if hists.is_empty() => {
            bail!("'{}' has no latency histogram to plot: use --kind bars for scalar metrics", bench)
        }
        crate::args::PlotKind::Cdf => draw(&latency_percentiles(&title, &hists), &a.output)?,
        crate::args::PlotKind::Hist => draw(&latency_histogram(&title, &hists), &a.output)?,
        crate::args::PlotKind::Scaling | crate::args::PlotKind::Series => unreachable!("handled above"),
        crate::args::PlotKind::Bars => {
            let (metric, unit) = bar_unit.unwrap_or_else(|| ("value".into(), schedlab_core::Unit::Count));
            let y = if unit.ns_per_unit().is_some() || unit.symbol().is_empty() {
                metric
            } else {
                format!("{metric} [{}]", unit.symbol())
            };
            let mut chart = BarChart::new(&title, &y, Some(unit));
            chart.series =
                bars.into_iter().map(|(l, v)| (l, groups.iter().map(|g| v.get(g).copied()).collect())).collect();
            chart.groups = groups;
            draw_bars(&chart, &a.output)?
        }
    }
    crate::term::say(format!("plot written to {}", a.output.display()));
    Ok(Outcome::Done)
}

/// `plot RUN... --timeline`: the first stored timeline of each run (of
/// `--bench` when given), live or simulated, drawn alike: one run's as a
/// chart, several runs' as one figure of stacked panels on one time span.
fn plot_timeline(db: Option<&Path>, a: &PlotArgs) -> Result<Outcome> {
    let runs = load(db, &a.runs)?;
    let (name, params) = a.bench.as_deref().map_or(("", ""), |b| b.split_once(':').unwrap_or((b, "")));
    let wanted: Vec<(&str, &str)> =
        params.split(',').filter(|s| !s.is_empty()).filter_map(|kv| kv.split_once('=')).collect();
    let matches = |b: &schedlab_core::BenchResult| {
        (name.is_empty() || b.name == name) && wanted.iter().all(|(k, v)| b.param_is(k, v))
    };
    let of_bench = a.bench.as_deref().map(|b| format!(" of '{b}'")).unwrap_or_default();
    // Each run's first result with a timeline, and how many more it has.
    let found: Vec<(&Run, Option<(&schedlab_core::BenchResult, usize)>)> = runs
        .iter()
        .map(|run| {
            let with: Vec<_> = run.benchmarks.iter().filter(|b| matches(b) && b.timeline.is_some()).collect();
            (run, with.first().map(|b| (*b, with.len() - 1)))
        })
        .collect();
    if found.iter().all(|(_, f)| f.is_none()) {
        let names: Vec<String> = runs.iter().map(Run::label).collect();
        bail!(
            "no stored timeline{of_bench} in {}: record one with `schedlab run BENCH --observe` \
             or `schedlab sim ... --timeline FILE`",
            names.join(", ")
        );
    }
    if let [(run, Some((b, others)))] = found.as_slice() {
        let tl = b.timeline.as_ref().context("the result has a timeline")?;
        let title = a.title.clone().unwrap_or_else(|| format!("{} {}: scheduler timeline", run.label(), b.name));
        let chart = schedlab_report::plot::timeline(tl, &title, a.quantity.as_deref(), a.tasks)?;
        draw(&chart, &a.output)?;
        crate::term::say(format!("timeline of {} in run {} written to {}", b.key(), run.label(), a.output.display()));
        tell_about_timeline(run, b, *others, false);
        return Ok(Outcome::Done);
    }
    let panels: Vec<(String, Result<&schedlab_core::Timeline, String>)> = found
        .iter()
        .map(|(run, f)| match f.and_then(|(b, _)| b.timeline.as_ref().map(|tl| (b, tl))) {
            Some((b, tl)) => (schedlab_report::plot::timeline_source(run, &b.name, tl), Ok(tl)),
            None => (
                run.label(),
                Err(format!(
                    "no stored timeline{of_bench} in this run (recorded by `run --observe` or `sim --timeline`)"
                )),
            ),
        })
        .collect();
    let title = a.title.clone().unwrap_or_else(|| "scheduler timelines, one panel per run".to_string());
    let fig = schedlab_report::plot::timeline_panels(&panels, &title, a.quantity.as_deref(), a.tasks);
    if let Err(e) = schedlab_report::plot::draw_panels(&fig, &a.output) {
        let why: Vec<String> = fig.messages().map(|(t, m)| format!("{t}: {m}")).collect();
        match e {
            schedlab_report::plot::PlotError::Empty(_) => bail!("nothing to draw: {}", why.join("; ")),
            e => return Err(e.into()),
        }
    }
    crate::term::say(format!("timelines of {} runs written to {}, one panel each", runs.len(), a.output.display()));
    for (title, why) in fig.messages() {
        crate::term::say(format!("{title}: {why}"));
    }
    for (run, f) in &found {
        if let Some((b, others)) = f {
            tell_about_timeline(run, b, *others, true);
        }
    }
    Ok(Outcome::Done)
}

/// What a drawn timeline lacks, its notes, and the run's other timelines.
fn tell_about_timeline(run: &Run, b: &schedlab_core::BenchResult, others: usize, name_run: bool) {
    let Some(tl) = &b.timeline else { return };
    let whose = if name_run { format!("{}: ", run.label()) } else { String::new() };
    if !tl.missing.is_empty() {
        let m: Vec<String> = tl.missing.iter().map(|m| format!("{} ({})", m.name, m.why)).collect();
        crate::term::say(format!("{whose}not in this timeline: {}", m.join("; ")));
    }
    for n in &tl.notes {
        crate::term::say(format!("{whose}note: {n}"));
    }
    if others > 0 {
        crate::term::say(format!(
            "{whose}{others} more result(s) of this run have a timeline: narrow with --bench NAME:KEY=VALUE"
        ));
    }
}
