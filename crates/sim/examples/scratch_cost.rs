use schedlab_sim::{run, CostTable, SimOptions};
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let wl = &args[1];
    let cpus: u32 = args[2].parse().unwrap();
    let secs: f64 = args[3].parse().unwrap();
    for p in &args[4..] {
        for cost in [CostTable::ZERO, CostTable::DEFAULT] {
            let o = SimOptions { cpus, duration_ns: (secs * 1e9) as u64, cost, ..SimOptions::default() };
            let out = run(p, wl, &o).unwrap();
            let mut line = format!("{p:10} {}", if cost.is_zero() { "zero" } else { "dflt" });
            for m in &out.result.metrics {
                if let Some(s) = m.summary() {
                    if m.name.starts_with("wakeup") || m.name == "runqueue_wait" {
                        line += &format!(" {}={:.0}/{:.0}/{:.0}(n{})", m.name, s.mean, s.median, s.max, s.n);
                    } else {
                        line += &format!(" {}={:.4}", m.name, s.mean);
                    }
                }
            }
            println!("{line}");
        }
    }
}
