//! `schedlab show` and `schedlab runs`.

use super::{write_exports, Outcome};
use crate::args::{ExportArgs, RunsArgs, ShowArgs};
use crate::context::open_store_to_read;
use anyhow::Result;
use schedlab_core::model::format_unix_ms;
use schedlab_core::Run;
use schedlab_report::rows::{ParamInfo, ParamTable, RowOptions};
use schedlab_report::text::{wrap, wrap_dots, Align, Grid};
use schedlab_report::{environment_block, export, run_header, run_table, run_view, ExportFormat};
use schedlab_store::Store;
use std::path::Path;

pub fn show(db: Option<&Path>, a: ShowArgs) -> Result<Outcome> {
    let store = open_store_to_read(db)?;
    let id = store.resolve(&a.run)?;
    let run = store.load_run(id)?;
    let opts = RowOptions {
        all_metrics: a.all,
        ksigma: a.ksigma,
        profile: match run.kind {
            schedlab_core::RunKind::Live => super::compare::load_profile(&store, &run.host)?,
            _ => None,
        },
        params: param_table(),
    };
    if write_run_exports(std::slice::from_ref(&run), &a.export, &opts)? {
        return Ok(Outcome::Done);
    }
    if a.wide {
        print_run_wide(&run, &opts);
    } else {
        print_run(&run, &opts);
    }
    Ok(Outcome::Done)
}

/// Every live benchmark's and simulated workload's parameters (kind,
/// full and quick default), so that headings write values with their unit
/// and name only the parameters that were changed.
pub fn param_table() -> ParamTable {
    let mut table = ParamTable::new();
    for b in schedlab_live::benchmarks() {
        let keys = b.params().iter().map(|p| (p.name.to_string(), ParamInfo::new(p.kind, p.default, p.quick_default)));
        table.insert(b.name().to_string(), keys.collect());
    }
    for w in schedlab_sim::workloads() {
        let params = w.params.iter().chain(&schedlab_sim::RUN_PARAMS);
        let keys = params.map(|p| (p.name.to_string(), ParamInfo::new(p.kind, p.default, None)));
        table.insert(format!("sim:{}", w.name), keys.collect());
    }
    table
}

/// A run as `run`, `sim` and `show` print it: header, environment, then a
/// block per benchmark case fitted to the terminal's width; a sweep, its
/// conditions side by side with the first as the baseline.
pub fn print_run(run: &Run, opts: &RowOptions) {
    let width = crate::term::width();
    print_header(run, width);
    if let Some(sides) = schedlab_report::compare::sweep_sides(run) {
        print_sweep(&sides, opts, width);
        return;
    }
    println!("{}", run_view(run, opts, width));
    if let Some(p) = &opts.profile {
        println!(
            "{}",
            wrap(
                &format!("run-to-run: a change this large between two runs is noise on this host ({})", p.description),
                width,
                2
            )
        );
    }
}

/// A sweep's table: for each metric, every condition's value, and against
/// the first its change, 95 % interval and verdict (`compare`'s statistics).
fn print_sweep(sides: &[schedlab_report::compare::Side], opts: &RowOptions, width: usize) {
    use schedlab_report::compare::{compare_sides, footer_lines, sweep_table, CompareOptions};
    let copts =
        CompareOptions { profile: opts.profile.clone(), ..CompareOptions::fixed(super::compare::DEFAULT_NOISE) };
    println!("{}", wrap(&format!("sweep of {} conditions, baseline {}:", sides.len(), sides[0].label), width, 2));
    println!();
    match compare_sides(sides, &copts) {
        Ok(mut c) => {
            // As `show` does: the headline metrics unless --all.
            if !opts.all_metrics {
                let headline = |m: &str| {
                    sides.iter().flat_map(|s| &s.runs[0].benchmarks).any(|b| b.metric(m).is_some_and(|m| m.headline))
                };
                c.rows.retain(|r| headline(&r.metric));
            }
            println!("{}", sweep_table(&c, width, &opts.params));
            println!();
            for line in footer_lines(&c) {
                println!("{}", wrap(&line, width, 2));
            }
        }
        // No case ran under two conditions (a sweep cut short): the cases one by one.
        Err(_) => {
            let mut run = sides[0].runs[0].clone();
            run.benchmarks = sides.iter().flat_map(|s| s.runs[0].benchmarks.clone()).collect();
            println!("{}", run_view(&run, opts, width));
        }
    }
}

/// "kernel=6.18-rt rack=r1".
pub fn label_text(labels: &std::collections::BTreeMap<String, String>) -> String {
    labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
}

fn print_header(run: &Run, width: usize) {
    println!("{}", wrap_dots(&run_header(run), width));
    if !run.labels.is_empty() {
        println!("{}", wrap_dots(&format!("labels: {}", label_text(&run.labels)), width));
    }
    if let Some(env) = &run.env_start {
        for line in environment_block(env).lines() {
            println!("{}", wrap_dots(line, width));
        }
    }
    println!();
}

/// `show --wide`: the full table, one line per metric, as wide as it needs.
fn print_run_wide(run: &Run, opts: &RowOptions) {
    println!("{}", run_header(run));
    if !run.labels.is_empty() {
        println!("labels: {}", label_text(&run.labels));
    }
    if let Some(env) = &run.env_start {
        println!("{}", environment_block(env));
    }
    println!("{}", run_table(run, opts));
    if let Some(p) = &opts.profile {
        println!("run-to-run: a change this large between two runs is noise on this host ({})", p.description);
    }
    for line in warning_lines(run, opts.all_metrics) {
        println!("warning: {line}");
    }
}

/// Every case's warnings; notes on absent kernel counters only with `all`.
fn warning_lines(run: &Run, all: bool) -> Vec<String> {
    use schedlab_report::table::{case_warnings, is_counter_note};
    let mut out = Vec::new();
    for case in schedlab_core::replicate::cases(&run.benchmarks, false) {
        let shown = case_warnings(&case).into_iter().filter(|w| all || !is_counter_note(w));
        out.extend(shown.map(|w| format!("{}: {w}", case.key)));
    }
    out
}

/// The run exports of `show`: the JSON schema, or metric rows as CSV/Markdown.
pub fn write_run_exports(runs: &[Run], a: &ExportArgs, opts: &RowOptions) -> Result<bool> {
    write_exports(
        a,
        || Ok(export(runs, ExportFormat::Json, opts)),
        || export(runs, ExportFormat::Csv, opts),
        || export(runs, ExportFormat::Markdown, opts),
    )
}

pub fn runs(db: Option<&Path>, a: RunsArgs) -> Result<Outcome> {
    let store = match open_store_to_read(db) {
        // Like an empty store, no store at all is an answer, not an error.
        Err(e) if matches!(e.downcast_ref(), Some(schedlab_store::StoreError::NoStore { .. })) => {
            println!("{e}");
            return Ok(Outcome::Done);
        }
        opened => opened?,
    };
    let filter = a.select.filter();
    let listed = store.list_runs_where(&filter, a.limit)?;
    if listed.is_empty() && !filter.is_empty() {
        println!(
            "no run in {} matches --host/--kernel/--cpu-model/--label: `schedlab runs` lists them all",
            store.location()
        );
        return Ok(Outcome::Done);
    }
    if listed.is_empty() {
        println!("no runs stored in {} yet: try `schedlab run`", store.location());
        return Ok(Outcome::Done);
    }
    // One run that cannot be decoded is named, and hides no other.
    let list: Vec<_> = listed
        .into_iter()
        .filter_map(|entry| entry.map_err(|e| crate::term::warn(format!("{e}; left out here"))).ok())
        .collect();
    // A store many hosts write to says which run is whose; one host's does not repeat it.
    let fleet = list.iter().any(|r| r.host != list[0].host || r.kernel != list[0].kernel);
    let labelled = list.iter().any(|r| !r.labels.is_empty());
    let mut columns = vec!["id", "name", "kind", "status", "started"];
    if fleet {
        columns.extend(["host", "kernel"]);
    }
    if labelled {
        columns.push("labels");
    }
    columns.push("benchmarks");
    let mut align = vec![Align::Right];
    align.resize(columns.len(), Align::Left);
    let mut grid = Grid::new(columns.into_iter().map(String::from).collect(), align);
    for r in list {
        let mut row = vec![
            r.id.to_string(),
            r.name.unwrap_or_default(),
            r.kind.name().to_string(),
            r.status.name().to_string(),
            format_unix_ms(r.started_unix_ms),
        ];
        if fleet {
            row.extend([r.host, r.kernel.unwrap_or_else(|| "-".into())]);
        }
        if labelled {
            row.push(label_text(&r.labels));
        }
        row.push(r.benchmarks.join(" "));
        grid.row(row);
    }
    println!("{}", grid.render(crate::term::width()));
    Ok(Outcome::Done)
}
