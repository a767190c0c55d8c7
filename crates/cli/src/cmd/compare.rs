//! `schedlab compare BASELINE RUN...`

use super::{write_exports, Outcome};
use crate::args::CompareArgs;
use crate::context::open_store;
use anyhow::{bail, Result};
use schedlab_report::compare::{compare, compare_csv, compare_markdown, compare_table, env_warning_lines};
use schedlab_store::Store;
use std::path::Path;

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

pub fn run(db: Option<&Path>, a: CompareArgs) -> Result<Outcome> {
    let noise = parse_noise(&a.noise)?;
    let store = open_store(db)?;
    let mut runs = Vec::new();
    for sel in &a.runs {
        runs.push(store.load_run(store.resolve(sel)?)?);
    }
    let c = compare(&runs, noise)?;
    let to_stdout = write_exports(
        &a.export,
        || Ok(serde_json::to_string_pretty(&c)? + "\n"),
        || compare_csv(&c),
        || compare_markdown(&c),
    )?;
    if to_stdout {
        return Ok(Outcome::Done);
    }
    for (run, sel) in runs.iter().zip(&a.runs) {
        let cond = run.benchmarks.first().map(|b| b.condition.label()).unwrap_or_default();
        println!("{:<12} {} · {} · {} · {}", sel, run.label(), run.kind.name(), run.started_at(), cond);
    }
    println!("{}", compare_table(&c));
    println!("verdicts: 95% intervals; a change counts only beyond the ±{:.1}% noise threshold", noise * 100.0);
    for line in env_warning_lines(&c, &c.runs[0]) {
        println!("warning: {line}");
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
