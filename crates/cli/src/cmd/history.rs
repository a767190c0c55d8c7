//! `schedlab history BENCH[:KEY=VALUE,...] [METRIC]`, and with `--by KEYS`
//! the long table of groups (E4's kernel builds across releases and
//! machines): one line per host, kernel or label value, each group's runs
//! pooled.

use super::compare::{load_profile, parse_noise, DEFAULT_NOISE};
use super::{write_exports, Outcome};
use crate::args::HistoryArgs;
use crate::context::hostname;
use crate::context::open_store_to_read;
use anyhow::{bail, Result};
use schedlab_report::compare::CompareOptions;
use schedlab_report::history::{
    history_chart, history_csv, history_markdown, history_table, judge_against_first, HistoryBuilder, HistoryRow,
};
use schedlab_report::plot::draw;
use schedlab_store::{RunFilter, Store};
use std::collections::BTreeMap;
use std::path::Path;

pub fn run(db: Option<&Path>, a: HistoryArgs) -> Result<Outcome> {
    if let Some(n) = &a.noise {
        parse_noise(n)?;
    }
    let (name, params) = parse_spec(&a.bench)?;
    let store = open_store_to_read(db)?;
    if let Some(by) = &a.by {
        return by_groups(&*store, &a, by, name, &params);
    }
    let (rows, opts) = history_rows(&*store, &a.bench, a.metric.as_deref(), a.noise.as_deref(), &a.select.filter())?;
    let to_stdout = write_exports(
        &a.export,
        || Ok(serde_json::to_string_pretty(&rows)? + "\n"),
        || history_csv(&rows),
        || history_markdown(&rows),
    )?;
    if let Some(p) = &a.plot {
        draw(&history_chart(&rows), p)?;
    }
    if !to_stdout {
        println!("{}", history_table(&rows, crate::term::width()));
        crate::term::say(format!(
            "±: half-width of the 95% interval over the run's invocations · vs first run: the first run of each case and host is the baseline; verdicts as in `compare` ({})",
            match &opts.profile {
                Some(p) => format!("noise bands from {}", p.description),
                None => format!("±{:.1}% noise band; no noise profile for this host", opts.noise * 100.0),
            }
        ));
        if let Some(p) = &a.plot {
            crate::term::say(format!("plot written to {}", p.display()));
        }
    }
    Ok(Outcome::Done)
}

/// `history --by`: the benchmark's runs that the selectors take, grouped;
/// each group pooled as one side of `compare`, the first group the baseline.
fn by_groups(
    store: &dyn Store,
    a: &HistoryArgs,
    by: &crate::args::GroupBy,
    name: &str,
    params: &BTreeMap<String, String>,
) -> Result<Outcome> {
    use super::compare::{group_runs, group_sides, keep_metric_rows, options};
    use schedlab_report::compare::{compare_csv, compare_markdown, compare_sides, footer_lines, sweep_table};
    let with_bench = store.runs_with_benchmark(name)?;
    if with_bench.is_empty() {
        bail!("no stored run has a complete {name} benchmark: `schedlab runs` lists what is stored");
    }
    let groups = group_runs(store, &a.select.filter(), by, Some(&with_bench))?;
    let keep = |b: &schedlab_core::BenchResult| b.name == name && params.iter().all(|(k, v)| b.param_is(k, v));
    let sides = group_sides(store, groups, by, Some(name), keep)?;
    let opts = options(store, &sides, a.noise.as_deref())?;
    let mut c = compare_sides(&sides, &opts)?;
    keep_metric_rows(&mut c, &sides, a.metric.as_deref());
    if c.rows.is_empty() {
        bail!(
            "{} has no metric '{}' in these runs: name another metric, or leave it out for the headline",
            name,
            a.metric.as_deref().unwrap_or("marked headline")
        );
    }
    let to_stdout = write_exports(
        &a.export,
        || Ok(serde_json::to_string_pretty(&c)? + "\n"),
        || compare_csv(&c),
        || compare_markdown(&c),
    )?;
    if !to_stdout {
        let width = crate::term::width();
        println!("{}", sweep_table(&c, width, &super::show::param_table()));
        println!();
        for line in footer_lines(&c) {
            println!("{}", schedlab_report::text::wrap(&line, width, 2));
        }
        let keys = by.0.iter().map(|k| k.name()).collect::<Vec<_>>().join(" · ");
        crate::term::say(format!(
            "{} groups by {keys}; each group's runs pooled, the first group ({}) the baseline",
            sides.len(),
            sides[0].label
        ));
    }
    Ok(Outcome::Done)
}

/// `BENCH[:KEY=VALUE,...]` as the benchmark's name and its parameters
/// (`serve`'s history page too).
pub(crate) fn parse_spec(spec: &str) -> Result<(&str, BTreeMap<String, String>)> {
    let (name, filter) = split_filter(spec);
    let mut params = BTreeMap::new();
    for kv in filter.split(',').filter(|s| !s.trim().is_empty()) {
        let Some((k, v)) = kv.split_once('=') else {
            bail!("bad filter '{kv}' in '{spec}': write KEY=VALUE, e.g. pipe:placement=same-cpu");
        };
        params.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok((name, params))
}

/// The history of `spec` (`BENCH[:KEY=VALUE,...]`) over the runs `select`
/// takes, each row judged against the first run of its case and host.
/// `history` and `serve` show this.
pub fn history_rows(
    store: &dyn Store,
    spec: &str,
    metric: Option<&str>,
    noise: Option<&str>,
    select: &RunFilter,
) -> Result<(Vec<HistoryRow>, CompareOptions)> {
    let (name, params) = parse_spec(spec)?;
    // The stored case summaries, one small row per run: a fleet's history
    // decodes no raw data.
    let table = super::show::param_table();
    let mut builder = HistoryBuilder::new(name, &params, metric, &table);
    store.history_cases(name, metric, select, &mut |case| match case {
        Ok((run, case)) => builder.add_case(&run, &case),
        Err(e) => crate::term::warn(format!("{e}; left out here")),
    })?;
    if builder.is_empty() {
        builder.note_available(store.case_metric_names(name)?);
    }
    let mut rows = builder.finish()?;
    let opts = match noise {
        Some(n) => CompareOptions::fixed(parse_noise(n)?),
        None => CompareOptions { profile: load_profile(store, &hostname())?, ..CompareOptions::fixed(DEFAULT_NOISE) },
    };
    judge_against_first(&mut rows, &opts);
    Ok((rows, opts))
}

/// "pipe:placement=same-cpu" → ("pipe", "placement=same-cpu"); simulated
/// benchmarks carry a colon in their name ("sim:hogs", "sim:hogs:tasks=4"),
/// so the filter starts at the last colon followed by a KEY=VALUE.
fn split_filter(spec: &str) -> (&str, &str) {
    spec.rmatch_indices(':')
        .map(|(i, _)| (&spec[..i], &spec[i + 1..]))
        .find(|(_, filter)| filter.contains('='))
        .unwrap_or((spec, ""))
}

#[cfg(test)]
mod tests {
    use super::split_filter;

    #[test]
    fn simulated_benchmark_names_keep_their_colon() {
        assert_eq!(split_filter("pipe"), ("pipe", ""));
        assert_eq!(split_filter("pipe:placement=same-cpu"), ("pipe", "placement=same-cpu"));
        assert_eq!(split_filter("sim:hogs"), ("sim:hogs", ""));
        assert_eq!(split_filter("sim:hackbench:groups=2"), ("sim:hackbench", "groups=2"));
    }
}
