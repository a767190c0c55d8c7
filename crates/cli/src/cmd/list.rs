//! `schedlab list`: benchmarks and their parameters, wrapped to the terminal.

use super::Outcome;
use anyhow::Result;
use schedlab_report::text::{wrap, wrap_parts};

/// Column where a parameter's help starts.
const HELP_COLUMN: usize = 28;

/// "    key=default    help text", the help wrapped under its column; a
/// long key=default puts the help on the next line.
fn param_line(key_default: &str, help: &str, width: usize) -> String {
    let lead = format!("    {key_default}");
    if lead.chars().count() + 2 > HELP_COLUMN {
        return format!("{lead}\n{}", wrap(&format!("{}{help}", " ".repeat(HELP_COLUMN)), width, HELP_COLUMN));
    }
    wrap(&format!("{lead:<HELP_COLUMN$}{help}"), width, HELP_COLUMN)
}

/// "  name   summary", the summary wrapped under itself.
fn entry_line(name: &str, summary: &str, width: usize) -> String {
    wrap(&format!("  {name:<11} {summary}"), width, 14)
}

/// A parameter's help with what it accepts, from its kind: "[1 to 64
/// round trips]", "[50us to 10s]", "[one of process, thread]".
fn with_range(help: &str, kind: schedlab_core::param::Kind, unit: &str) -> String {
    use schedlab_core::param::Kind;
    match (kind.range_text(), kind) {
        (Some(r), _) => format!("{help} [{r}{unit}]"),
        (None, Kind::Flag) => format!("{help} [on/off]"),
        _ => help.to_string(),
    }
}

pub fn list() -> Result<Outcome> {
    let width = crate::term::width();
    println!("Live benchmarks (schedlab run BENCH[:KEY=VALUE,...]):\n");
    for b in schedlab_live::benchmarks() {
        println!("{}", entry_line(b.name(), b.summary(), width));
        for p in b.params() {
            // Durations and sizes show their unit on the value, as they may be written.
            let value = p.shown_default();
            let unit = if p.unit.is_empty() { String::new() } else { format!(" {}", p.unit) };
            let help = with_range(p.help, p.kind, &unit);
            println!("{}", param_line(&format!("{}={value}", p.name), &help, width));
        }
        println!();
    }
    list_sim(width);
    Ok(Outcome::Done)
}

/// "timeline quantities (sim --quantity): vruntime (ns)", "slice_used (ns)",
/// ...: every state variable `policy`'s timeline records, the dynamic
/// priority first. None for the RT layer, which records none of its own.
fn quantities_parts(policy: &str) -> Option<Vec<String>> {
    let vars = schedlab_sim::state_vars(policy).ok()?;
    let mut parts: Vec<String> = vars
        .iter()
        .map(|v| if v.unit.is_empty() { v.name.to_string() } else { format!("{} ({})", v.name, v.unit) })
        .collect();
    let first = parts.first_mut()?;
    *first = format!("timeline quantities (sim --quantity): {first}");
    Some(parts)
}

/// Simulator policies and workloads, for `schedlab list`.
pub fn list_sim(width: usize) {
    use crate::args::{SIM_CPUS, SIM_HZ};
    println!("Simulated schedulers (schedlab sim --policy NAME:KEY=VALUE,...):");
    println!(
        "{}\n",
        wrap(&format!("defaults as a run with sim's --cpus {SIM_CPUS} --hz {SIM_HZ} uses them; those that scale say with what"), width, 0)
    );
    for p in schedlab_sim::policies() {
        let p = p.for_machine(SIM_CPUS as usize, SIM_HZ);
        println!("{}", entry_line(p.name, p.summary, width));
        println!("{}", wrap(&format!("{}dynamic priority: {}", " ".repeat(14), p.priority_quantity), width, 14));
        if let Some(parts) = quantities_parts(p.name) {
            // Broken between quantities only, so that a name keeps its unit.
            for line in wrap_parts(&parts, width.saturating_sub(14), width, 14) {
                println!("{}{line}", " ".repeat(14));
            }
        }
        for t in &p.tunables {
            let help = with_range(t.help, t.tunable.kind, "");
            let help = match t.tunable.scales {
                Some(s) => format!("{help}; default scales with {}", s.describe()),
                None => help,
            };
            println!("{}", param_line(&format!("{}={}", t.key, t.default), &help, width));
        }
        println!();
    }
    println!("Scenarios, the seeds' experiments (schedlab sim --scenario NAME or FILE):\n");
    for (name, title) in schedlab_sim::scenario::shipped_titles() {
        println!("{}", entry_line(name, &title, width));
    }
    println!();
    println!("Simulated workloads (schedlab sim --workload NAME:KEY=VALUE,...):\n");
    for w in schedlab_sim::workloads() {
        println!("{}", entry_line(w.name, w.summary, width));
        for p in w.params {
            let shown = p.kind.parse(p.default).map_or_else(|_| p.default.to_string(), |c| p.kind.show(&c));
            println!("{}", param_line(&format!("{}={shown}", p.name), &with_range(p.help, p.kind, ""), width));
        }
        println!();
    }
}
