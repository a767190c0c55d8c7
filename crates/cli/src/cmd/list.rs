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
    list_sim();
    Ok(Outcome::Done)
}

/// Simulator policies and workloads, for `schedlab list`.
pub fn list_sim() {
    println!("Simulated schedulers (schedlab sim --policy NAME[KEY=VALUE,...]):\n");
    for p in schedlab_sim::policies() {
        println!("  {:<10} {}", p.name, p.summary);
        println!("      dynamic priority: {}", p.priority_quantity);
        for t in &p.tunables {
            println!("      {:<26} default {:<12} {}", t.key, t.default, t.help);
        }
        println!();
    }
    println!("Simulated workloads (schedlab sim --workload NAME[KEY=VALUE,...]):\n");
    for w in schedlab_sim::workloads() {
        println!("  {:<12} {}", w.name, w.summary);
        for (k, d, h) in &w.params {
            println!("      {:<14} default {:<12} {}", k, d, h);
        }
        println!();
    }
}
