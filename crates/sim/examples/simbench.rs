//! Simulator throughput benchmark (not a test): for each policy, 60 simulated
//! seconds of hackbench with 10 groups (400 tasks) on 2 CPUs at HZ=1000, with
//! `loops=0` so the load lasts the whole 60 s. Prints events processed,
//! wall time and events per second.
//!
//! Run: `cargo run --release -p schedlab-sim --example simbench [--secs N] [--no-fast] [--no-sched-cost] [--digest] [POLICY...]`
//! (`--no-fast` turns off the fast path, whose results are identical, to
//! measure what it saves; `--no-sched-cost` makes scheduler work free, as
//! the figures recorded before the cost model were taken).
//! (`--secs 2` makes a run short enough for `valgrind --tool=callgrind`, whose
//! instruction counts are steadier than wall time on a shared machine).
//! (`--digest` adds a hash of each run's whole result and event count: an
//! engine or policy change meant to be only faster must leave every digest
//! as it was.)

use schedlab_sim::{run, CostTable, SimOptions};
use std::hash::{Hash, Hasher};
use std::time::Instant;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut secs = 60;
    if let Some(i) = args.iter().position(|a| a == "--secs") {
        let Some(n) = args.get(i + 1).and_then(|s| s.parse().ok()).filter(|&n| n > 0) else {
            eprintln!("simbench: --secs takes a positive whole number of simulated seconds, e.g. --secs 2");
            std::process::exit(2);
        };
        secs = n;
        args.drain(i..i + 2);
    }
    let fast_forward = !args.iter().any(|a| a == "--no-fast");
    let cost = if args.iter().any(|a| a == "--no-sched-cost") { CostTable::ZERO } else { CostTable::DEFAULT };
    let digest = args.iter().any(|a| a == "--digest");
    args.retain(|a| a != "--no-fast" && a != "--no-sched-cost" && a != "--digest");
    let known: Vec<String> =
        schedlab_sim::policies().into_iter().map(|p| p.name.to_string()).filter(|n| n != "rt").collect();
    if let Some(bad) = args.iter().find(|a| !known.contains(a)) {
        eprintln!("simbench: unknown policy or option '{bad}': give --secs N, --no-fast, --no-sched-cost, --digest and policies from {}", known.join(", "));
        std::process::exit(2);
    }
    let policies = if args.is_empty() { known } else { args };
    let opts = SimOptions {
        cpus: 2,
        hz: 1000,
        duration_ns: secs * 1_000_000_000,
        seed: 1,
        fast_forward,
        cost,
        ..SimOptions::default()
    };
    println!(
        "{:<9} {:>11} {:>9} {:>8} {:>13} {:>11} {:>12}",
        "policy", "events", "replayed", "wall s", "events/s", "messages", "ctx switches"
    );
    for p in &policies {
        let t0 = Instant::now();
        let out = run(p, "hackbench[groups=10,loops=0]", &opts).expect("valid specs");
        let wall = t0.elapsed().as_secs_f64();
        let get = |n: &str| out.result.metric(n).and_then(|m| m.summary()).map(|s| s.mean).unwrap_or(0.0);
        print!(
            "{:<9} {:>11} {:>8.1}% {:>8.3} {:>13.0} {:>11.0} {:>12.0}",
            p,
            out.events,
            100.0 * out.fast_events as f64 / out.events.max(1) as f64,
            wall,
            out.events as f64 / wall,
            get("messages_per_s") * secs as f64,
            get("context_switches")
        );
        if digest {
            // SipHash with fixed keys: the same result gives the same digest on every run.
            let mut h = std::collections::hash_map::DefaultHasher::new();
            serde_json::to_string(&out.result).expect("results serialize").hash(&mut h);
            out.events.hash(&mut h);
            print!(" {:016x}", h.finish());
        }
        println!();
    }
}
