//! `schedlab rm RUN...`: remove runs, e.g. one whose stored data can no
//! longer be decoded, or a run left `running` by a crash.

use super::Outcome;
use crate::args::RmArgs;
use crate::context::open_store_to_modify;
use anyhow::Result;
use schedlab_store::Store;
use std::path::Path;

pub fn run(db: Option<&Path>, a: RmArgs) -> Result<Outcome> {
    let mut store = open_store_to_modify(db)?;
    // Every selector is resolved before anything is removed: a typo in the
    // third must not leave the first two gone.
    let mut ids = Vec::with_capacity(a.runs.len());
    for sel in &a.runs {
        let id = store.resolve(sel)?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    let removed = store.remove_runs(&ids)?;
    for r in &removed.runs {
        crate::term::say(format!(
            "removed run #{}{} ({} {}): {} benchmark row(s), {} metric(s)",
            r.id,
            r.name.as_deref().map(|n| format!(" '{n}'")).unwrap_or_default(),
            r.kind,
            r.status,
            r.benchmarks,
            r.metrics
        ));
    }
    for (id, runs) in &removed.noise_profiles {
        let runs: Vec<String> = runs.iter().map(|r| format!("#{r}")).collect();
        crate::term::say(format!(
            "removed noise profile #{id}: it was computed from run {} (`schedlab calibrate` makes a new one)",
            runs.join(", ")
        ));
    }
    Ok(Outcome::Done)
}
