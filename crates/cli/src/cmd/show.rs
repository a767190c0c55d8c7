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
    let opts = RowOptions {
        all_metrics: a.all,
        ksigma: a.ksigma,
        profile: match run.kind {
            schedlab_core::RunKind::Live => super::compare::load_profile(&store, &run.host)?,
            _ => None,
        },
    };
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
    if let Some(p) = &opts.profile {
        println!("run-to-run: a change this large between two runs is noise on this host ({})", p.description);
    }
    for line in warning_lines(run) {
        println!("warning: {line}");
    }
}

/// Each distinct warning once per case; one that only some invocations
/// raised names them.
fn warning_lines(run: &Run) -> Vec<String> {
    let mut out = Vec::new();
    for case in schedlab_core::replicate::cases(&run.benchmarks, false) {
        let mut seen: Vec<(&str, Vec<u32>)> = Vec::new();
        for b in &case.invocations {
            for w in &b.warnings {
                match seen.iter_mut().find(|(t, _)| *t == w.as_str()) {
                    Some((_, inv)) => inv.push(b.invocation),
                    None => seen.push((w, vec![b.invocation])),
                }
            }
        }
        for (text, inv) in seen {
            if inv.len() == case.invocations.len() {
                out.push(format!("{}: {text}", case.key));
            } else {
                let list = inv.iter().map(|i| (i + 1).to_string()).collect::<Vec<_>>().join(",");
                out.push(format!("{} (invocation {list}): {text}", case.key));
            }
        }
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
