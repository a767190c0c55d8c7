//! Fixed-seed snapshot tests: small workloads under each policy, reduced to a
//! compact text summary (events, switches, migrations, per-task CPU share,
//! latency histograms, timeline digest) and compared with a stored file in
//! `tests/snapshots/<policy>.txt`, with scheduler work free (a zero cost
//! table: these files predate the cost model, so matching them proves that
//! the zero-cost setting reproduces the earlier results exactly; re-recorded
//! once since, for the RT pull rule of session 13, a model change at any
//! cost), and in
//! `tests/snapshots/<policy>.cost.txt` at the default cost table. Any
//! behaviour change of the engine or a
//! policy changes some figure here; an intended change is recorded with
//! `UPDATE_SNAPSHOTS=1 cargo test -p schedlab-sim --test snapshots` and the
//! diff reviewed. Figures are exact (the simulator is deterministic); floats
//! are printed at fixed precision only to keep the lines short.

use schedlab_core::MetricData;
use schedlab_sim::{run, CostTable, SimOptions, SimOutcome};
use std::fmt::Write;

const MIX: &str = r#"{"name":"mix","tasks":[
    {"name":"hog0","share":true,"program":[{"run":"100s"}]},
    {"name":"hog5","share":true,"nice":5,"program":[{"run":"100s"}]},
    {"name":"sleeper","share":true,"program":[{"loop":"forever","do":[{"run":"1ms"},{"sleep":{"uniform":["5ms","15ms"]}}]}]},
    {"name":"pinger","share":true,"program":[{"loop":"forever","do":[{"run":"50us"},{"send":"a"},{"recv":"b"}]}]},
    {"name":"ponger","share":true,"program":[{"loop":"forever","do":[{"recv":"a"},{"run":"80us"},{"send":"b"}]}]}]}"#;

/// (label, workload, cpus, simulated seconds, record timeline)
const CASES: [(&str, &str, u32, f64, bool); 5] = [
    ("mix-1cpu", MIX, 1, 2.0, true),
    ("hackbench", "hackbench[groups=1,loops=10]", 2, 5.0, false),
    ("wakeup", "wakeup[samples=40,interval=3ms,groups=1]", 2, 5.0, false),
    ("forkstorm", "forkstorm[parents=2,children=20]", 2, 5.0, false),
    ("yield", "yield[yielders=2,hogs=1]", 1, 0.3, false),
];

fn summarize(out: &SimOutcome) -> String {
    let mut s = format!("events={}", out.events);
    for m in &out.result.metrics {
        match &m.data {
            // Per-task values print like samples, so the snapshots show the
            // simulation itself is unchanged by their new level.
            MetricData::Samples { values } | MetricData::Entities { values, .. } => {
                let v: Vec<String> = values.iter().map(|x| format!("{x:.4}")).collect();
                write!(s, " {}=[{}]", m.name, v.join(",")).unwrap();
            }
            MetricData::Histogram { .. } => {
                let su = m.summary().unwrap();
                write!(s, " {}=n{}/mean{:.0}/p99 {:.0}/max{:.0}", m.name, su.n, su.mean, su.p99, su.max).unwrap();
            }
            MetricData::Series { .. } => write!(s, " {}=series", m.name).unwrap(),
        }
    }
    if let Some(tl) = &out.timeline {
        let d: Vec<String> = tl
            .tasks
            .iter()
            .map(|t| format!("{}:{}:{}", t.name, t.points.len(), t.points.last().map_or(0, |p| p.1)))
            .collect();
        write!(s, " timeline=[{}]", d.join(",")).unwrap();
    }
    for w in &out.result.warnings {
        write!(s, " warning={w:?}").unwrap();
    }
    s
}

fn snapshot(policy: &str, cost: CostTable) -> String {
    let mut s = String::new();
    for (label, wl, cpus, secs, tl) in CASES {
        let o =
            SimOptions { cpus, duration_ns: (secs * 1e9) as u64, record_timeline: tl, cost, ..SimOptions::default() };
        let out = run(policy, wl, &o).unwrap_or_else(|e| panic!("{policy} {label}: {e}"));
        writeln!(s, "{label}: {}", summarize(&out)).unwrap();
    }
    s
}

fn check(policy: &str) {
    check_file(policy, "", CostTable::ZERO);
    check_file(policy, ".cost", CostTable::DEFAULT);
}

fn check_file(policy: &str, suffix: &str, cost: CostTable) {
    let path = format!("{}/tests/snapshots/{policy}{suffix}.txt", env!("CARGO_MANIFEST_DIR"));
    let actual = snapshot(policy, cost);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    if expected != actual {
        let diff: Vec<String> = expected
            .lines()
            .zip(actual.lines())
            .filter(|(e, a)| e != a)
            .map(|(e, a)| format!("- {e}\n+ {a}"))
            .collect();
        panic!(
            "{policy}: behaviour changed against {path} (UPDATE_SNAPSHOTS=1 records it if intended):\n{}\nfull actual:\n{actual}",
            diff.join("\n")
        );
    }
}

#[test]
fn snapshot_cfs() {
    check("cfs");
}

#[test]
fn snapshot_eevdf() {
    check("eevdf");
}

#[test]
fn snapshot_linux24() {
    check("linux24");
}

#[test]
fn snapshot_o1() {
    check("o1");
}

#[test]
fn snapshot_4bsd() {
    check("4bsd");
}

#[test]
fn snapshot_ule() {
    check("ule");
}

#[test]
fn snapshot_staircase() {
    check("staircase");
}

#[test]
fn snapshot_nicksched() {
    check("nicksched");
}

#[test]
fn snapshot_ingo_ll() {
    check("ingo_ll");
}

#[test]
fn snapshot_fixedprio() {
    check("fixedprio");
}

#[test]
fn snapshot_bfs() {
    check("bfs");
}

#[test]
fn snapshot_ule1() {
    check("ule1");
}

#[test]
fn snapshot_is_sensitive_to_a_tunable() {
    // Guards the guard: a behaviour-relevant tunable must change the summary.
    let zero = CostTable::ZERO;
    assert_ne!(snapshot("cfs", zero), snapshot("cfs[wakeup_granularity=4ms]", zero));
}

#[test]
fn snapshot_is_sensitive_to_the_cost_table() {
    // Scheduler work changes results, and each operation's price counts.
    let base = snapshot("o1", CostTable::DEFAULT);
    assert_ne!(base, snapshot("o1", CostTable::ZERO));
    assert_ne!(base, snapshot("o1", CostTable { lock_ns: 200, ..CostTable::DEFAULT }));
    assert_ne!(base, snapshot("o1", CostTable { ipi_latency_ns: 10_000, ..CostTable::DEFAULT }));
}
