//! `schedlab show` and `schedlab runs`.

use super::{write_exports, Outcome};
use crate::args::{ExportArgs, RunsArgs, ShowArgs};
use crate::context::open_store;
use anyhow::Result;
use schedlab_core::model::format_unix_ms;
use schedlab_core::Run;
use schedlab_report::rows::RowOptions;
use schedlab_report::{environment_block, export, run_header, run_table, ExportFormat};
use schedlab_store::Store;
use std::path::Path;

pub fn show(db: Option<&Path>, a: ShowArgs) -> Result<Outcome> {
    let store = open_store(db)?;
    let id = store.resolve(&a.run)?;
    let run = store.load_run(id)?;
    let opts = RowOptions { all_metrics: a.all, ksigma: a.ksigma };
    if write_run_exports(std::slice::from_ref(&run), &a.export, &opts)? {
        return Ok(Outcome::Done);
    }
    print_run(&run, &opts);
    Ok(Outcome::Done)
}

pub fn print_run(run: &Run, opts: &RowOptions) {
    println!("{}", run_header(run));
    if let Some(env) = &run.env_start {
        println!("{}", environment_block(env));
    }
    println!("{}", run_table(run, opts));
    for b in &run.benchmarks {
        for w in &b.warnings {
            println!("warning: {}: {w}", b.key());
        }
    }
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
    let store = open_store(db)?;
    let list = store.list_runs(a.limit)?;
    if list.is_empty() {
        println!("no runs stored in {} yet: try `schedlab run`", store.location());
        return Ok(Outcome::Done);
    }
    println!("{:>5}  {:<20}  {:<6}  {:<11}  {:<23}  benchmarks", "id", "name", "kind", "status", "started");
    for r in list {
        println!(
            "{:>5}  {:<20}  {:<6}  {:<11}  {:<23}  {}",
            r.id,
            r.name.unwrap_or_default(),
            r.kind.name(),
            r.status.name(),
            format_unix_ms(r.started_unix_ms),
            r.benchmarks.join(" ")
        );
    }
    Ok(Outcome::Done)
}
