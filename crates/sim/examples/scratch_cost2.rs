use schedlab_sim::{run, CostTable, SimOptions};
fn main() {
    let cost = CostTable { ipi_latency_ns: 10_000, ..CostTable::ZERO };
    for p in ["cfs", "ule", "4bsd", "o1"] {
        let o = SimOptions { cpus: 2, duration_ns: 100_000_000, cost, ..SimOptions::default() };
        let out = run(p, "pipe", &o).unwrap();
        let l = out.result.metric("wakeup_latency.normal").unwrap().summary().unwrap();
        let get = |n: &str| out.result.metric(n).and_then(|m| m.summary()).map(|s| s.mean).unwrap_or(-1.0);
        println!("{p} lat min {} med {} max {} n {} trips {} ipis {} sw {} mig {}", l.min, l.median, l.max, l.n, get("round_trips_per_s"), get("ipis"), get("context_switches"), get("migrations"));
    }
    for p in ["linux24", "o1", "4bsd"] {
        for g in [10, 30] {
            let o = SimOptions { cpus: 1, duration_ns: 600_000_000_000, ..SimOptions::default() };
            let out = run(p, &format!("hackbench:groups={g}"), &o).unwrap();
            let get = |n: &str| out.result.metric(n).and_then(|m| m.summary()).map(|s| s.mean).unwrap_or(-1.0);
            println!("{p} g{g} makespan {} sched {} sw {}", get("makespan"), get("scheduler_cpu"), get("context_switches"));
        }
    }
}
