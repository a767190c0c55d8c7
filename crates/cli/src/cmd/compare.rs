//! `schedlab compare BASELINE OTHER...`: each argument is one side, one run
//! or several pooled (`A1,A2,A3`).

use super::{write_exports, Outcome};
use crate::args::CompareArgs;
use crate::context::{load_readable_runs, open_store_to_read};
use anyhow::{bail, Result};
use schedlab_core::model::format_unix_ms;
use schedlab_core::RunKind;
use schedlab_report::compare::{
    compare_csv, compare_markdown, compare_sides, compare_table, env_warning_lines, footer_lines, CompareOptions,
    NoiseProfile, Side,
};
use schedlab_report::text::{wrap, wrap_dots};
use schedlab_store::Store;
use std::path::Path;

/// The band where no profile applies (and for the simulator).
pub const DEFAULT_NOISE: f64 = 0.02;

/// Parse "2%", "0.5%" or "0.02" into a fraction.
pub fn parse_noise(s: &str) -> Result<f64> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    };
    match v {
        Ok(v) if v.is_finite() && (0.0..1.0).contains(&v) => Ok(v),
        _ => bail!("--noise '{s}' is not a percentage between 0% and 100%: write e.g. --noise 2%"),
    }
}

/// Refuse a side with an empty run in its list; checked before the store
/// is opened, so the input's own problem is the one reported.
pub fn check_sides(sels: &[String]) -> Result<()> {
    if let Some(sel) = sels.iter().find(|s| s.split(',').any(|one| one.trim().is_empty())) {
        bail!("'{sel}' has an empty run in its list: write runs as A1,A2,A3 without spaces or doubled commas");
    }
    Ok(())
}

/// Load each argument (`12`, `last`, `baseline`, or `1,2,3` pooled) as a side.
pub fn load_sides(store: &dyn Store, sels: &[String]) -> Result<Vec<Side>> {
    check_sides(sels)?;
    let mut sides = Vec::new();
    for sel in sels {
        let mut runs = Vec::new();
        for one in sel.split(',').map(str::trim) {
            runs.push(store.load_run(store.resolve(one)?)?);
        }
        let label = runs.iter().map(|r| r.label()).collect::<Vec<_>>().join("+");
        sides.push(Side { label, runs });
    }
    Ok(sides)
}

/// Verdict options: `--noise` when given; else, for live runs, the noise
/// profile of the baseline's host when it has one; else the default band.
pub fn options(store: &dyn Store, sides: &[Side], noise: Option<&str>) -> Result<CompareOptions> {
    if let Some(n) = noise {
        return Ok(CompareOptions::fixed(parse_noise(n)?));
    }
    let mut opts = CompareOptions::fixed(DEFAULT_NOISE);
    let live = sides.iter().flat_map(|s| &s.runs).all(|r| r.kind == RunKind::Live);
    let host = sides.first().and_then(|s| s.runs.first()).map(|r| r.host.clone());
    if let (true, Some(host)) = (live, host) {
        opts.profile = load_profile(store, &host)?;
    }
    Ok(opts)
}

/// The newest noise profile of `host`, computed from its calibration runs.
pub fn load_profile(store: &dyn Store, host: &str) -> Result<Option<NoiseProfile>> {
    let rec = match store.latest_noise_profile(host) {
        Ok(Some(rec)) => rec,
        Ok(None) => return Ok(None),
        Err(e @ schedlab_store::StoreError::BadProfile { .. }) => {
            crate::term::warn(format!("{e}; it is not used here"));
            return Ok(None);
        }
        Err(e) => return Err(e.into()),
    };
    let runs = load_readable_runs(store, &rec.run_ids)?;
    let description = format!(
        "noise profile #{} of {} ({} runs, {}{})",
        rec.id.unwrap_or_default(),
        rec.host,
        runs.len(),
        format_unix_ms(rec.created_unix_ms),
        rec.kernel.as_ref().map(|k| format!(", kernel {k}")).unwrap_or_default()
    );
    Ok(Some(NoiseProfile::from_runs(description, &runs)))
}

pub fn run(db: Option<&Path>, a: CompareArgs) -> Result<Outcome> {
    if let Some(n) = &a.noise {
        parse_noise(n)?;
    }
    check_sides(&a.runs)?;
    let store = open_store_to_read(db)?;
    let sides = load_sides(&store, &a.runs)?;
    let opts = options(&store, &sides, a.noise.as_deref())?;
    let c = compare_sides(&sides, &opts)?;
    let to_stdout = write_exports(
        &a.export,
        || Ok(serde_json::to_string_pretty(&c)? + "\n"),
        || compare_csv(&c),
        || compare_markdown(&c),
    )?;
    if to_stdout {
        return Ok(Outcome::Done);
    }
    let width = crate::term::width();
    for (side, sel) in sides.iter().zip(&a.runs) {
        let run = &side.runs[0];
        let cond = run.benchmarks.first().map(|b| b.condition.label()).unwrap_or_default();
        let when = if side.runs.len() > 1 { format!("{} runs pooled", side.runs.len()) } else { run.started_at() };
        println!(
            "{}",
            wrap_dots(&format!("{:<12} {} · {} · {} · {}", sel, side.label, run.kind.name(), when, cond), width)
        );
    }
    println!();
    println!("{}", compare_table(&c, width, &super::show::param_table()));
    println!();
    for line in footer_lines(&c) {
        println!("{}", wrap(&line, width, 2));
    }
    for line in env_warning_lines(&c, &c.runs[0]) {
        println!("{}", wrap(&format!("warning: {line}"), width, 2));
    }
    Ok(Outcome::Done)
}

#[cfg(test)]
mod tests {
    use super::parse_noise;

    #[test]
    fn noise_accepts_percent_and_fraction() {
        assert_eq!(parse_noise("2%").unwrap(), 0.02);
        assert_eq!(parse_noise("0.05").unwrap(), 0.05);
        assert!(parse_noise("200%").is_err());
        assert!(parse_noise("abc").is_err());
    }
}
