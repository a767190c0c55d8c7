//! `schedlab history BENCH[:KEY=VALUE,...] [METRIC]`

use super::compare::{load_profile, parse_noise, DEFAULT_NOISE};
use super::{write_exports, Outcome};
use crate::args::HistoryArgs;
use crate::context::hostname;
use crate::context::{load_readable_runs, open_store_to_read};
use anyhow::{bail, Result};
use schedlab_report::compare::CompareOptions;
use schedlab_report::history::{
    history, history_chart, history_csv, history_markdown, history_table, judge_against_first, HistoryRow,
};
use schedlab_report::plot::draw;
use schedlab_store::Store;
use std::collections::BTreeMap;
use std::path::Path;

pub fn run(db: Option<&Path>, a: HistoryArgs) -> Result<Outcome> {
    let store = open_store_to_read(db)?;
    let (rows, opts) = history_rows(&*store, &a.bench, a.metric.as_deref(), a.noise.as_deref())?;
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
            "vs first run: the first run of each case and host is the baseline; verdicts as in `compare` ({})",
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

/// The history of `spec` (`BENCH[:KEY=VALUE,...]`), each row judged against
/// the first run of its case and host. `history` and `serve` show this.
pub fn history_rows(
    store: &dyn Store,
    spec: &str,
    metric: Option<&str>,
    noise: Option<&str>,
) -> Result<(Vec<HistoryRow>, CompareOptions)> {
    let (name, filter) = split_filter(spec);
    let mut params = BTreeMap::new();
    for kv in filter.split(',').filter(|s| !s.trim().is_empty()) {
        let Some((k, v)) = kv.split_once('=') else {
            bail!("bad filter '{kv}' in '{spec}': write KEY=VALUE, e.g. pipe:placement=same-cpu");
        };
        params.insert(k.trim().to_string(), v.trim().to_string());
    }
    let ids = store.runs_with_benchmark(name)?;
    let runs = load_readable_runs(store, &ids)?;
    let mut rows = history(&runs, name, &params, metric)?;
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
