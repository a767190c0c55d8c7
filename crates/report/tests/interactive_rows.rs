//! A live `interactive` run with the benchmark's default rows and one
//! simulator command (`interactive:loads=...`) compare row by row: every
//! load of the live table has its simulated row, with no orphans.

use schedlab_core::*;
use schedlab_report::compare::{compare, CompareOptions, Comparison};

const ROWS: [&str; 7] = ["none", "video", "x", "burn", "write", "read", "compile"];
const TABLE: [&str; 5] = ["latency_mean", "latency_sd", "latency_max", "desired_cpu", "deadlines_met"];

/// A live run shaped as the benchmark writes it (`task=audio`, the default
/// `loads=`): the table as entities by load, a histogram and a kernel
/// counter per load, and the calibration, three invocations.
fn live() -> Run {
    let tool = ToolInfo { name: "schedlab".into(), version: "0".into(), git_rev: None };
    let mut r = Run::new(RunKind::Live, tool, vec![], "h".into(), 0);
    let labels: Vec<String> = ROWS.map(String::from).to_vec();
    for i in 0..3u32 {
        let cond = Condition::Live { requested: SchedCondition::default(), applied: None, loads: vec![] };
        let mut b = BenchResult::new("interactive", cond, 0).param("task", "audio").param("loads", ROWS.join(","));
        (b.invocation, b.status) = (i, BenchStatus::Complete);
        let f = f64::from(i);
        for (name, unit, dir, v) in [
            ("latency_mean", Unit::Nanoseconds, Direction::LowerIsBetter, 50e3),
            ("latency_sd", Unit::Nanoseconds, Direction::LowerIsBetter, 20e3),
            ("latency_max", Unit::Nanoseconds, Direction::LowerIsBetter, 900e3),
            ("desired_cpu", Unit::Percent, Direction::HigherIsBetter, 99.0),
            ("deadlines_met", Unit::Percent, Direction::HigherIsBetter, 98.0),
        ] {
            let values = (0..ROWS.len()).map(|k| v + k as f64 + f).collect();
            b.metrics.push(Metric::entities(&format!("{name}.audio"), unit, dir, "load", labels.clone(), values));
        }
        for load in ROWS {
            let mut h = LatencyHistogram::new();
            (0..200u64).for_each(|k| h.record(30_000 + k * 50 + u64::from(i)));
            let name = format!("latency.audio@{load}");
            b.metrics.push(Metric::histogram_per_repetition(&name, Direction::LowerIsBetter, vec![h]).headline());
            let name = format!("kernel.switches@{load}");
            b.metrics.push(Metric::samples(&name, Unit::Count, Direction::Neutral, vec![400.0 + f]));
        }
        b.metrics.push(Metric::samples("calibration_loops_per_ms", Unit::Count, Direction::Neutral, vec![1e6]));
        r.benchmarks.push(b);
    }
    r
}

/// The simulator's run of the same table: one command, seeds 1..=3.
fn sim() -> Run {
    let tool = ToolInfo { name: "schedlab".into(), version: "0".into(), git_rev: None };
    let mut r = Run::new(RunKind::Sim, tool, vec![], "h".into(), 0);
    let workload = format!("interactive:audio=1,video=0,loads={}", ROWS.join(","));
    for seed in 1..=3u64 {
        let opts = schedlab_sim::SimOptions { cpus: 2, seed, duration_ns: 1_000_000_000, ..Default::default() };
        let mut b = schedlab_sim::run("cfs", &workload, &opts).unwrap().result;
        b.invocation = seed as u32 - 1;
        r.benchmarks.push(b);
    }
    r
}

/// (metric, entity) of every row, each checked to have a value on every side.
fn rows_with_values(c: &Comparison) -> Vec<(String, Option<String>)> {
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    for row in &c.rows {
        assert!(row.cells.iter().all(|cell| cell.value.is_some()), "an orphan row: {}", row.label());
        let key = (row.metric.clone(), row.entity.clone());
        if !out.contains(&key) {
            out.push(key);
        }
    }
    out.sort();
    out
}

#[test]
fn a_live_interactive_table_and_a_simulated_one_compare_with_a_row_for_every_load() {
    let mut want: Vec<(String, Option<String>)> = TABLE
        .iter()
        .flat_map(|n| ROWS.map(|load| (format!("{n}.audio"), Some(load.to_string()))))
        .chain(ROWS.map(|load| (format!("latency.audio@{load}"), None)))
        .collect();
    want.sort();
    let (live, sim) = (live(), sim());
    let c = compare(&[live.clone(), sim.clone()], &CompareOptions::fixed(0.02)).unwrap();
    assert_eq!(rows_with_values(&c), want, "audio's whole table on both sides, and only what both report");
    let c = compare(&[sim, live], &CompareOptions::fixed(0.02)).unwrap();
    assert_eq!(rows_with_values(&c), want, "and the other way round");
}
