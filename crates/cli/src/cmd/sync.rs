//! `schedlab push` and `schedlab pull`: copy runs between two stores (a
//! laptop's SQLite file and a team's PostgreSQL database, say). A run is
//! known everywhere by its uuid: one already in the target is skipped, and
//! each run is copied in one transaction, so a copy that stopped half way
//! completes when repeated and nothing is ever copied twice.

use super::Outcome;
use crate::args::{PullArgs, PushArgs};
use crate::context::{open_store, open_store_to_read, patience, store_location, write_patiently};
use anyhow::{anyhow, bail, Result};
use schedlab_core::{Run, RunStatus};
use schedlab_store::{Access, Inserted, Location, Store, StoreError, Uuid};
use std::path::Path;

pub fn push(db: Option<&Path>, a: PushArgs) -> Result<Outcome> {
    let to = other_store(db, &a.to, "--to")?;
    let source = open_store_to_read(db)?;
    let mut target =
        schedlab_store::open(&to, Access::Create, patience()?.statement).map_err(|e| anyhow!("--to: {e}"))?;
    copy(source.as_ref(), target.as_mut(), &a.runs, Direction::Push)
}

pub fn pull(db: Option<&Path>, a: PullArgs) -> Result<Outcome> {
    let from = other_store(db, &a.from, "--from")?;
    let source =
        schedlab_store::open(&from, Access::Read, patience()?.statement).map_err(|e| anyhow!("--from: {e}"))?;
    let mut target = open_store(db)?;
    copy(source.as_ref(), target.as_mut(), &a.runs, Direction::Pull)
}

#[derive(Clone, Copy, PartialEq)]
enum Direction {
    Push,
    Pull,
}

/// The other store's location, refusing this store itself.
fn other_store(db: Option<&Path>, given: &Path, option: &str) -> Result<Location> {
    let other = Location::parse(given.as_os_str()).map_err(|e| anyhow!("{option}: {e}"))?;
    let this = store_location(db)?;
    let same = match (&this, &other) {
        (Location::File(a), Location::File(b)) => {
            a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
        }
        (Location::Postgres(_), Location::Postgres(_)) => this.shown() == other.shown(),
        _ => false,
    };
    if same {
        bail!("{option} {} is the store the runs are in (--db): name another store", other.shown());
    }
    Ok(other)
}

/// The runs `sels` name (comma lists too), in order, each once; every run
/// when none is named.
fn selected(source: &dyn Store, sels: &[String]) -> Result<Vec<i64>> {
    if sels.is_empty() {
        return Ok(source.run_ids()?);
    }
    let mut ids = Vec::new();
    for sel in sels.iter().flat_map(|s| s.split(',')).map(str::trim).filter(|s| !s.is_empty()) {
        let id = source.resolve(sel)?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    Ok(ids)
}

fn copy(source: &dyn Store, target: &mut dyn Store, sels: &[String], direction: Direction) -> Result<Outcome> {
    let named = !sels.is_empty();
    let ids = selected(source, sels)?;
    let (mut added, mut present, mut left_out) = (0usize, 0usize, 0usize);
    let stopped = |added: usize, e: &dyn std::fmt::Display| {
        anyhow!(
            "{e}; stopped after copying {added} of {} run(s): run the same command again to copy the rest (runs \
             already copied are not copied twice)",
            ids.len()
        )
    };
    for &id in &ids {
        let uuid = match source.run_uuid(id) {
            Ok(u) => u,
            Err(e @ StoreError::BadRun { .. }) => {
                crate::term::warn(format!("{e}; not copied"));
                left_out += 1;
                continue;
            }
            Err(e) => return Err(stopped(added, &e)),
        };
        // Looked up before loading: a repeated push reads no run data.
        if target.find_uuid(uuid).map_err(|e| stopped(added, &e))?.is_some() {
            present += 1;
            continue;
        }
        let run = match source.load_run(id) {
            Ok(run) => run,
            Err(e @ StoreError::BadRun { .. }) => {
                crate::term::warn(format!("{e}; not copied"));
                left_out += 1;
                continue;
            }
            Err(e) => return Err(stopped(added, &e)),
        };
        // A copy is never updated afterwards: one of a run still being
        // measured would stay partial. Named, it is copied as it is.
        if run.status == RunStatus::Running && !named {
            crate::term::warn(format!(
                "run #{id} is still running (or its process was killed): not copied; name it to copy it as it is"
            ));
            left_out += 1;
            continue;
        }
        match insert(target, &run, uuid) {
            Ok(Inserted::Added(_)) => added += 1,
            Ok(Inserted::Present(_)) => present += 1,
            Err(e) => return Err(stopped(added, &e)),
        }
    }
    let others = [(present, "already there"), (left_out, "left out")]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect::<Vec<_>>();
    let others = if others.is_empty() { String::new() } else { format!(" ({})", others.join(", ")) };
    match direction {
        Direction::Push => println!("pushed {added} run(s) to {}{others}", target.location()),
        Direction::Pull => {
            println!("pulled {added} run(s) from {} into {}{others}", source.location(), target.location())
        }
    }
    Ok(Outcome::Done)
}

/// Store `run` under `uuid`. A name another run already has there (two
/// hosts' "baseline") becomes NAME@HOST, else NAME@HOST-UUID8, with a note.
pub(crate) fn insert(target: &mut dyn Store, run: &Run, uuid: Uuid) -> schedlab_store::Result<Inserted> {
    let taken = match write_patiently(target, "the copied run", |s| s.insert_run_as(run, uuid)) {
        Err(StoreError::NameTaken(name)) => name,
        done => return done,
    };
    let short = uuid.simple().to_string();
    for name in [format!("{taken}@{}", run.host), format!("{taken}@{}-{}", run.host, &short[..8])] {
        let renamed = Run { name: Some(name.clone()), ..run.clone() };
        match write_patiently(target, "the copied run", |s| s.insert_run_as(&renamed, uuid)) {
            Err(StoreError::NameTaken(_)) => continue,
            Ok(done) => {
                eprintln!(
                    "note: run '{taken}' is stored in {} as '{name}': another run there has that name",
                    target.location()
                );
                return Ok(done);
            }
            Err(e) => return Err(e),
        }
    }
    Err(StoreError::NameTaken(taken))
}
