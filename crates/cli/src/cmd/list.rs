//! `schedlab list`: benchmarks and their parameters.

use super::Outcome;
use anyhow::Result;

pub fn list() -> Result<Outcome> {
    println!("Live benchmarks (schedlab run BENCH[:KEY=VALUE,...]):\n");
    for b in schedlab_live::benchmarks() {
        println!("  {:<10} {}", b.name(), b.summary());
        for p in b.params() {
            let unit = if p.unit.is_empty() { String::new() } else { format!(" [{}]", p.unit) };
            println!("      {:<14} default {:<14} {}{}", p.name, p.default, p.help, unit);
        }
        println!();
    }
    Ok(Outcome::Done)
}
