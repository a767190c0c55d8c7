//! Issue 17: `sim --timeline FILE --quantity Q[,Q..]` writes the state
//! variables asked (every one by default), the stored run keeps them all
//! for `plot --timeline --quantity Q`, an unknown name is refused with the
//! policy's list, and a run stored before the short names still draws.

use assert_cmd::Command;
use predicates::prelude::*;
use schedlab_core::timeline::{Quantity, Timeline, TimelineTask};
use schedlab_core::*;
use schedlab_store::{Access, SqliteStore, Store};
use std::path::Path;
use std::time::Duration;

fn schedlab(db: &Path) -> Command {
    let mut c = Command::cargo_bin("schedlab").unwrap();
    c.arg("--db").arg(db).env_remove("SCHEDLAB_DB").env_remove("COLUMNS");
    c
}

/// `schedlab sim` of o1 on a hog and a sleeper for 200 ms, with `extra`.
fn sim_o1(db: &Path, extra: &[&str]) -> Command {
    let mut c = schedlab(db);
    c.args(["sim", "--policy", "o1", "--workload", "hogs:nice=0,5", "--cpus", "1", "--duration", "200ms"])
        .args(["--seeds", "1"])
        .args(extra);
    c
}

/// The `quantity` column's distinct values, in order of first appearance.
fn csv_quantities(csv: &str) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for line in csv.lines().skip(1) {
        let q = line.split(',').nth(3).unwrap().to_string();
        if !seen.contains(&q) {
            seen.push(q);
        }
    }
    seen
}

#[test]
fn csv_and_json_carry_every_variable_or_the_ones_asked() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let csv = dir.path().join("t.csv");
    sim_o1(&db, &["--no-store", "--timeline"]).arg(&csv).assert().success();
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.starts_with("task_id,task,time_ns,quantity,value\n0,hog0.nice0,0,prio,"), "{text}");
    assert_eq!(csv_quantities(&text), ["prio", "time_slice", "sleep_avg"]);

    sim_o1(&db, &["--no-store", "--quantity", "sleep_avg", "--timeline"])
        .arg(&csv)
        .assert()
        .success()
        .stdout(predicate::str::contains("written to").and(predicate::str::contains("sleep_avg")));
    assert_eq!(csv_quantities(&std::fs::read_to_string(&csv).unwrap()), ["sleep_avg"]);

    let json = dir.path().join("t.json");
    sim_o1(&db, &["--no-store", "--quantity", "time_slice,prio", "--timeline"]).arg(&json).assert().success();
    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(j["quantity"], "time_slice", "the first asked is the primary");
    assert_eq!(j["quantities"][1]["name"], "prio");
    assert_eq!(j["quantities"][1]["lower_runs_first"], true);
    assert!(j["quantities"][0]["help"].as_str().unwrap().contains("ticks left"));
    let task = &j["tasks"][0];
    assert_eq!(task["points"], task["series"]["time_slice"]);
    assert!(!task["series"]["prio"].as_array().unwrap().is_empty());
    assert!(task["series"].get("sleep_avg").is_none());
    assert!(!db.exists(), "--no-store");
}

#[test]
fn a_plot_of_several_variables_makes_one_file_each() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let svg = dir.path().join("t.svg");
    sim_o1(&db, &["--no-store", "--quantity", "prio,sleep_avg", "--timeline"]).arg(&svg).assert().success();
    assert!(!svg.exists());
    for q in ["prio", "sleep_avg"] {
        let text = std::fs::read_to_string(dir.path().join(format!("t-{q}.svg"))).unwrap();
        assert!(text.contains(&format!("o1: {q} over time")), "{q}: the title names it");
    }
    // One asked: that file, as named.
    sim_o1(&db, &["--no-store", "--quantity", "sleep_avg", "--timeline"]).arg(&svg).assert().success();
    assert!(std::fs::read_to_string(&svg).unwrap().contains("o1: sleep_avg over time"));
}

#[test]
fn an_unknown_variable_is_refused_with_the_policys_list_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let csv = dir.path().join("t.csv");
    sim_o1(&db, &["--quantity", "prio,estcpu", "--timeline"]).arg(&csv).assert().code(2).stderr(
        predicate::str::contains("--quantity prio,estcpu (policy o1)")
            .and(predicate::str::contains("no state variable 'estcpu'"))
            .and(predicate::str::contains("sleep_avg"))
            .and(predicate::str::contains("sleep average")),
    );
    assert!(!db.exists() && !csv.exists(), "nothing simulated, written or stored");
    // With several policies each must have it: 4bsd has estcpu, o1 does not.
    schedlab(&db)
        .args(["sim", "--policy", "4bsd", "--policy", "o1", "--workload", "hogs", "--duration", "20ms"])
        .args(["--quantity", "estcpu", "--timeline"])
        .arg(&csv)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("(policy o1)"));
    // --quantity belongs to --timeline.
    schedlab(&db)
        .args(["sim", "--policy", "o1", "--workload", "hogs", "--quantity", "prio"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--timeline"));
}

#[test]
fn the_stored_run_keeps_every_variable_for_plot() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    // Only prio is written to the file; the store keeps them all.
    sim_o1(&db, &["--quantity", "prio", "--timeline"]).arg(dir.path().join("t.csv")).assert().success();
    let png = dir.path().join("p.png");
    for q in ["sleep_avg", "time_slice", "prio"] {
        schedlab(&db).args(["plot", "last", "--timeline", "--quantity", q, "-o"]).arg(&png).assert().success();
        assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
    }
    schedlab(&db)
        .args(["plot", "last", "--timeline", "--quantity", "bogus", "-o"])
        .arg(&png)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("choose one of: prio, time_slice, sleep_avg"));
}

/// A simulated run stored before issue 17: one quantity, with its long name.
fn old_sim_run() -> Run {
    let tool = ToolInfo { name: "schedlab".into(), version: "0".into(), git_rev: None };
    let mut r = Run::new(RunKind::Sim, tool, vec![], "lab".into(), 1_700_000_000_000);
    r.status = RunStatus::Complete;
    let cond = Condition::Sim(SimSetup { policy: "cfs".into(), cpus: 1, hz: 1000, seed: 1 });
    let mut b = BenchResult::new("sim:hogs", cond, 0);
    b.status = BenchStatus::Complete;
    b.metrics.push(Metric::samples("cpu_busy", Unit::Percent, Direction::Neutral, vec![100.0]));
    let long = "vruntime - min_vruntime (ns)";
    let mut tasks = Vec::new();
    for (id, name) in [(0, "hog0.nice0"), (1, "hog1.nice5")] {
        let mut t = TimelineTask::new(id, name, "task");
        t.push(long, 0, 0.0);
        t.push(long, 4_000_000, 3e6 * (id + 1) as f64);
        tasks.push(t);
    }
    b.timeline = Some(Timeline {
        source: "simulator: cfs, seed 1".into(),
        primary: long.into(),
        quantities: vec![Quantity { name: long.into(), unit: String::new(), lower_runs_first: Some(true) }],
        missing: Vec::new(),
        end_ns: 10_000_000,
        tasks,
        notes: Vec::new(),
    });
    r.benchmarks.push(b);
    r
}

#[test]
fn a_run_stored_with_the_old_long_name_still_draws() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let mut s = SqliteStore::open_with(&db, Access::Create, Duration::from_secs(5)).unwrap();
    assert_eq!(s.insert_run(&old_sim_run()).unwrap(), 1);
    drop(s);
    let svg = dir.path().join("old.svg");
    schedlab(&db).args(["plot", "1", "--timeline", "-o"]).arg(&svg).assert().success();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("vruntime - min_vruntime (ns)") && text.contains("hog1.nice5"), "its own name and tasks");
    // Asked for by its old name (quoted), it draws too.
    schedlab(&db)
        .args(["plot", "1", "--timeline", "--quantity", "vruntime - min_vruntime (ns)", "-o"])
        .arg(&svg)
        .assert()
        .success();
}
