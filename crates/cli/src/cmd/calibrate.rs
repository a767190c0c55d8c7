//! `schedlab calibrate`: this host's noise profile. Runs the chosen cases
//! (the default suite by default) as several back-to-back A/A runs, stores
//! them, and records a profile that names them; `compare` and `history`
//! then take each row's run-to-run variation as the smallest change worth a
//! verdict. The bands are recomputed from the stored runs when used, so a
//! better method re-analyses old profiles too.

use super::run::{execute, parse_timeout, prepare, stop_text, Executed};
use super::Outcome;
use crate::args::CalibrateArgs;
use crate::context::{hostname, now_unix_ms, open_store, partly_stored, write_patiently};
use anyhow::{bail, Context, Result};
use schedlab_live::hygiene;
use schedlab_report::compare::{profile_table, NoiseProfile};
use schedlab_store::{NoiseProfileRecord, Store};
use std::path::Path;

/// A profile older than this is reported as stale by `schedlab check`.
pub const STALE_AFTER_DAYS: i64 = 30;

pub fn run(db: Option<&Path>, a: CalibrateArgs) -> Result<Outcome> {
    if a.run.name.is_some() || a.run.export_json.is_some() {
        bail!(
            "calibrate stores several runs: --name and --export-json do not apply (see the runs with `schedlab runs`)"
        );
    }
    let prepared = prepare(&a.run)?;
    let timeout = parse_timeout(&a.run)?;
    let mut store = open_store(db)?;
    hygiene::install_signal_handlers().context("cannot install signal handlers")?;
    let _timeout = timeout.map(hygiene::arm_timeout);
    let mut runs = Vec::new();
    for k in 0..a.runs {
        eprintln!("calibration run {} of {}", k + 1, a.runs);
        let Executed { run, outcome, unsaved, .. } = execute(&mut store, &prepared, None)?;
        if let Some(file) = unsaved {
            eprintln!("no noise profile saved: a profile names stored runs; calibrate again once the store is free");
            return Err(partly_stored(&store, run.id.unwrap_or_default(), &file));
        }
        match outcome {
            Outcome::Interrupted => {
                println!("calibration {} after {k} run(s): no profile saved; the runs are kept", stop_text());
                return Ok(Outcome::Interrupted);
            }
            Outcome::SomeFailed => bail!(
                "run #{} had a benchmark that could not measure: fix it (see the warning above) or leave that \
                 benchmark out, then calibrate again",
                run.id.unwrap_or_default()
            ),
            Outcome::Done => runs.push(run),
        }
    }
    let record = NoiseProfileRecord {
        id: None,
        host: hostname(),
        kernel: runs[0].env_start.as_ref().and_then(|e| e.kernel_release.clone()),
        created_unix_ms: now_unix_ms(),
        run_ids: runs.iter().filter_map(|r| r.id).collect(),
        note: Some(std::env::args().collect::<Vec<_>>().join(" ")),
    };
    let id = write_patiently(&mut store, "the noise profile", |s| s.save_noise_profile(&record))?;
    let profile = NoiseProfile::from_runs(format!("noise profile #{id}"), &runs);
    println!("{}", profile_table(&profile, crate::term::width()));
    crate::term::say(format!(
        "saved as noise profile #{id} for host {} from runs {}: `compare` and `history` now use each row's band \
         as the smallest change worth a verdict",
        record.host,
        record.run_ids.iter().map(|i| format!("#{i}")).collect::<Vec<_>>().join(", ")
    ));
    Ok(Outcome::Done)
}

/// `schedlab check`'s line about the profile: (is it a warning, text, fix).
pub fn profile_status(db: Option<&Path>, kernel: Option<&str>) -> (bool, String, Option<String>) {
    let fix = Some("run `schedlab calibrate` (about 3 minutes for the default suite)".to_string());
    let store = match crate::context::open_store_to_read(db) {
        Ok(s) => s,
        Err(e) if matches!(e.downcast_ref(), Some(schedlab_store::StoreError::NoStore { .. })) => {
            return (true, "no noise profile for this host (no store yet)".into(), fix)
        }
        Err(e) => return (true, format!("cannot read the store for a noise profile: {e}"), None),
    };
    let latest = store.latest_noise_profile(&hostname());
    match latest {
        Ok(Some(p)) => {
            let days = (now_unix_ms() - p.created_unix_ms) / 86_400_000;
            let other_kernel = p.kernel.as_deref().zip(kernel).filter(|(a, b)| a != b).map(|(a, _)| a.to_string());
            match (days > STALE_AFTER_DAYS, other_kernel) {
                (_, Some(k)) => (true, format!("noise profile #{} was made under kernel {k}", p.id.unwrap_or(0)), fix),
                (true, None) => (true, format!("noise profile #{} is {days} days old", p.id.unwrap_or(0)), fix),
                _ => (
                    false,
                    format!("noise profile #{} ({} runs, {days} day(s) old)", p.id.unwrap_or(0), p.run_ids.len()),
                    None,
                ),
            }
        }
        Ok(None) => (true, "no noise profile for this host: verdicts fall back to a fixed ±2% band".into(), fix),
        Err(e) => (true, format!("cannot read the store for a noise profile: {e}"), None),
    }
}
