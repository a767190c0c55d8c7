//! `schedlab import FILE`: another tool's results as a stored run, or a
//! whole-store archive (`FILE.jsonl`, see `export.rs`).

use super::Outcome;
use crate::args::{ImportArgs, ImportKind};
use crate::context::{now_unix_ms, open_store, write_patiently};
use anyhow::{bail, Context, Result};
use schedlab_core::units::parse_duration_ns;
use schedlab_report::import::{detect, import, ImportFormat};
use schedlab_store::Store;
use std::path::Path;

pub fn run(db: Option<&Path>, a: ImportArgs) -> Result<Outcome> {
    if let Some(problem) = a.name.as_deref().and_then(schedlab_core::model::run_name_problem) {
        bail!("--name: {problem}: choose another name");
    }
    if matches!(a.format, Some(ImportKind::Jsonl)) || (a.format.is_none() && super::export::is_archive(&a.file)) {
        return super::export::import_archive(db, &a.file, a.name.is_some());
    }
    let name = a.file.display().to_string();
    let text = std::fs::read_to_string(&a.file)
        .with_context(|| format!("cannot read {name}: check the path and that it is a text file"))?;
    let format = match a.format {
        None => detect(&name, &text)?,
        Some(ImportKind::Cyclictest) => ImportFormat::Cyclictest,
        Some(ImportKind::Schbench) => ImportFormat::Schbench,
        Some(ImportKind::Hackbench) => ImportFormat::Hackbench,
        Some(ImportKind::Schedlab) => ImportFormat::Schedlab,
        Some(ImportKind::Jsonl) => return super::export::import_archive(db, &a.file, a.name.is_some()),
        Some(ImportKind::Samples) => {
            let Some(unit) = &a.unit else {
                bail!("--format samples needs --unit (the unit of each value): e.g. --unit us");
            };
            let ns = parse_duration_ns(&format!("1{unit}")).map_err(|e| anyhow::anyhow!("--unit: {e}"))?;
            ImportFormat::Samples { ns_per_unit: ns }
        }
    };
    let mut run = import(&name, &text, format, now_unix_ms())?;
    if a.name.is_some() {
        run.name = a.name.clone();
    }
    let mut store = open_store(db)?;
    // Nothing is lost if the store stays busy: the file can be imported again.
    let id = write_patiently(&mut store, "the imported run", |s| s.insert_run(&run))?;
    let metrics: usize = run.benchmarks.iter().map(|b| b.metrics.len()).sum();
    crate::term::say(format!(
        "imported {name} as run #{id} ({} benchmark(s), {metrics} metric(s)) into {}",
        run.benchmarks.len(),
        store.location()
    ));
    for b in &run.benchmarks {
        for w in &b.warnings {
            crate::term::say(format!("warning: {w}"));
        }
    }
    Ok(Outcome::Done)
}
