//! `schedlab check`: what on this machine distorts measurements, worst first.

use super::Outcome;
use anyhow::Result;
use schedlab_live::readiness::{assess, Facts, Finding, Level};

pub fn check(db: Option<&std::path::Path>) -> Result<Outcome> {
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
    for f in &findings {
        let mark = match f.level {
            Level::Warn => "WARN",
            Level::Note => "note",
            Level::Good => "ok",
        };
        println!("{mark:<5} {:<width$}  {}", f.topic, f.finding);
        if let Some(fix) = &f.fix {
            println!("{:<5} {:<width$}  fix: {fix}", "", "");
        }
    }
    let count = |l: Level| findings.iter().filter(|f| f.level == l).count();
    println!("\n{} warning(s), {} note(s), {} fine", count(Level::Warn), count(Level::Note), count(Level::Good));
    Ok(Outcome::Done)
}
