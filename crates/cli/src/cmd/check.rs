//! `schedlab check`: what on this machine distorts measurements, worst first,
//! including kernel settings that schedlab runs left changed (their recovery
//! records); `--restore` puts those back first.

use super::Outcome;
use anyhow::Result;
use schedlab_live::readiness::{assess, Facts, Finding, Level};
use schedlab_report::text::wrap;

pub fn check(db: Option<&std::path::Path>, restore: bool) -> Result<Outcome> {
    let restore_failed = if restore { restore_leftovers() } else { 0 };
    let facts = Facts::gather();
    let e = &facts.env;
    println!(
        "schedlab check: kernel {} on {}, {} CPU(s)\n",
        e.kernel_release.as_deref().unwrap_or("?"),
        e.cpu_model.as_deref().unwrap_or("unknown CPU"),
        e.online_cpus.as_ref().map_or(0, Vec::len)
    );
    let mut findings = assess(&facts);
    // The noise profile lives in the store, which the live crate does not know.
    let (warn, finding, fix) = super::calibrate::profile_status(db, e.kernel_release.as_deref());
    let level = if warn { Level::Warn } else { Level::Good };
    let at = findings.iter().position(|f| f.level < level).unwrap_or(findings.len());
    findings.insert(at, Finding { level, topic: "noise profile", finding, fix });
    let width = findings.iter().map(|f| f.topic.len()).max().unwrap_or(0);
    let columns = crate::term::width();
    // Findings wrap under their own column, at word boundaries.
    let indent = 5 + 1 + width + 2;
    for f in &findings {
        let mark = match f.level {
            Level::Warn => "WARN",
            Level::Note => "note",
            Level::Good => "ok",
        };
        println!("{}", wrap(&format!("{mark:<5} {:<width$}  {}", f.topic, f.finding), columns, indent));
        if let Some(fix) = &f.fix {
            println!("{}", wrap(&format!("{:<5} {:<width$}  fix: {fix}", "", ""), columns, indent + 5));
        }
    }
    let count = |l: Level| findings.iter().filter(|f| f.level == l).count();
    println!("\n{} warning(s), {} note(s), {} fine", count(Level::Warn), count(Level::Note), count(Level::Good));
    Ok(if restore_failed > 0 { Outcome::SomeFailed } else { Outcome::Done })
}

/// Restore every recovery record whose owner is gone; print what was done.
/// Returns how many could not be restored.
fn restore_leftovers() -> usize {
    use schedlab_live::recovery::{restore_found, scan, State};
    let found: Vec<_> = scan().into_iter().filter(|f| f.state != State::Active).collect();
    if found.is_empty() {
        println!("restore: no kernel settings left changed by schedlab\n");
        return 0;
    }
    let mut failed = 0;
    for f in &found {
        match restore_found(f) {
            Ok(()) if f.state == State::Obsolete => println!("restore: removed {}", f.describe()),
            Ok(()) => {
                println!("restore: put back {} left by pid {} ({} setting(s))", f.what, f.owner_pid, f.steps.len())
            }
            Err(e) => {
                failed += 1;
                eprintln!("error: could not restore {}: {e}", f.describe());
            }
        }
    }
    println!();
    failed
}
