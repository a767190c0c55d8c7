//! The verdicts' error rates, measured on the simulator, where the truth is
//! known: A/A pairs differ only in their seeds, A/B pairs in a known amount
//! of work. Deterministic (fixed seeds), so the rates are the same on every
//! machine. Run with `--nocapture` to see the figures docs/statistics.md
//! quotes.

use schedlab_core::{Run, RunKind, RunStatus, ToolInfo};
use schedlab_report::compare::{compare, CompareOptions, Verdict};
use schedlab_sim::{run_seeds, SimOptions};

/// The simulator's default replication (`schedlab sim --seeds`).
const SEEDS: u32 = schedlab_sim::DEFAULT_SEEDS;
const POLICIES: [&str; 10] =
    ["cfs", "eevdf", "linux24", "o1", "4bsd", "ule", "staircase", "nicksched", "ingo_ll", "fixedprio"];

/// Tasks whose run and sleep times are random: seeds matter.
fn jitter(work_scale: f64, loops: u32) -> String {
    let us = |v: f64| format!("\"{}us\"", (v * work_scale).round() as u64);
    format!(
        r#"{{"name":"jitter","tasks":[
          {{"name":"w","count":3,"program":[{{"loop":{loops},"do":[{{"run":{{"uniform":[{},{}]}}}},{{"sleep":{{"exp":"300us"}}}}]}}]}},
          {{"name":"n5","nice":5,"program":[{{"loop":{loops},"do":[{{"run":{{"uniform":[{},{}]}}}},{{"sleep":{{"exp":"1ms"}}}}]}}]}}]}}"#,
        us(500.0),
        us(2500.0),
        us(200.0),
        us(800.0)
    )
}

fn side(policy: &str, workload: &str, cpus: u32, first_seed: u64) -> Run {
    let opts = SimOptions { cpus, duration_ns: 20_000_000_000, seed: first_seed, ..SimOptions::default() };
    let tool = ToolInfo { name: "schedlab".into(), version: "test".into(), git_rev: None };
    let mut run = Run::new(RunKind::Sim, tool, vec![], "sim".into(), 0);
    run.id = Some(first_seed as i64);
    run.status = RunStatus::Complete;
    run.benchmarks = run_seeds(policy, workload, &opts, SEEDS).unwrap().into_iter().map(|o| o.result).collect();
    run
}

/// (rows with a verdict of better/worse/changed, rows tested)
fn false_verdicts(a: &Run, b: &Run) -> (usize, usize) {
    let c = compare(&[a.clone(), b.clone()], &CompareOptions::fixed(0.02)).unwrap();
    let tested = c.rows.iter().filter(|r| r.cells[1].change.is_some()).count();
    let wrong = c
        .rows
        .iter()
        .filter(|r| matches!(r.cells[1].verdict, Verdict::Better | Verdict::Worse | Verdict::Changed))
        .count();
    (wrong, tested)
}

/// Wilson 95 % interval of a proportion.
fn wilson(k: usize, n: usize) -> (f64, f64) {
    let (k, n, z) = (k as f64, n as f64, 1.96f64);
    let p = k / n;
    let c = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
    let h = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / (1.0 + z * z / n);
    (c - h, c + h)
}

#[test]
fn a_and_a_pairs_get_at_most_5_percent_false_verdicts() {
    let workloads = [
        ("wakeup", "wakeup[samples=60,interval=2ms,groups=1]".to_string(), 2),
        ("jitter", jitter(1.0, 40), 1),
        ("jitter-2cpu", jitter(1.0, 40), 2),
    ];
    let (mut wrong, mut tested, mut pairs, mut pairs_with_any) = (0, 0, 0, 0);
    for (_, wl, cpus) in &workloads {
        for policy in POLICIES {
            for k in 0..9u64 {
                // Disjoint seeds: side A 1000k+1.., side B 1000k+501..
                let a = side(policy, wl, *cpus, 1000 * k + 1);
                let b = side(policy, wl, *cpus, 1000 * k + 501);
                let (w, t) = false_verdicts(&a, &b);
                wrong += w;
                tested += t;
                pairs += 1;
                pairs_with_any += (w > 0) as usize;
            }
        }
    }
    let rate = wrong as f64 / tested as f64;
    let (lo, hi) = wilson(wrong, tested);
    println!(
        "A/A simulated: {pairs} pairs, {tested} tested rows, {wrong} false verdicts = {:.2}% [95% CI {:.2}%, {:.2}%]; \
         pairs with any false verdict: {pairs_with_any}",
        rate * 100.0,
        lo * 100.0,
        hi * 100.0
    );
    assert!(pairs >= 200);
    assert!(rate <= 0.05, "false verdict rate {rate}");
}

#[test]
fn a_10_percent_change_is_found_in_at_least_80_percent_of_pairs() {
    // More work per loop on side B; the true change of the makespan is
    // measured with 40 seeds a side, then each pair of 3-seed sides is judged.
    let policy = "cfs";
    let base = jitter(1.0, 150);
    let mut curve = Vec::new();
    for scale in [1.0, 1.02, 1.05, 1.10, 1.20] {
        let changed = jitter(scale, 150);
        let makespan = |r: &Run| -> Vec<f64> {
            r.benchmarks.iter().map(|b| b.metric("makespan").unwrap().summary().unwrap().mean).collect()
        };
        let (mut found, pairs) = (0, 40u64);
        let mut truth = (0.0, 0.0);
        for k in 0..pairs {
            let a = side(policy, &base, 1, 7000 * k + 1);
            let b = side(policy, &changed, 1, 7000 * k + 3001);
            truth.0 += makespan(&a).iter().sum::<f64>();
            truth.1 += makespan(&b).iter().sum::<f64>();
            let c = compare(&[a, b], &CompareOptions::fixed(0.02)).unwrap();
            let row = c.rows.iter().find(|r| r.metric == "makespan").unwrap();
            found += (row.cells[1].verdict == Verdict::Worse) as usize;
            assert_ne!(row.cells[1].verdict, Verdict::Better, "a longer makespan is never better");
        }
        let true_change = truth.1 / truth.0 - 1.0;
        curve.push((scale, true_change, found as f64 / pairs as f64));
    }
    for (scale, truth, power) in &curve {
        println!(
            "A/B simulated: work x{scale:.2}, true makespan change {:+.1}%, found in {:.0}% of 40 pairs ({SEEDS} seeds a side)",
            truth * 100.0,
            power * 100.0
        );
    }
    let at = |s: f64| curve.iter().find(|c| c.0 == s).unwrap();
    assert!(at(1.0).2 <= 0.05, "A/A inside the power curve: {:?}", at(1.0));
    assert!((0.07..0.13).contains(&at(1.10).1), "the 10 % case changes the makespan by about 10 %: {:?}", at(1.10));
    assert!(at(1.10).2 >= 0.8, "power at 10 %: {:?}", at(1.10));
    assert!(at(1.20).2 >= at(1.05).2, "power grows with the change: {curve:?}");
}
