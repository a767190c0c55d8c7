//! Issue 19: `schedlab plot A B --timeline` and `schedlab report A B` draw a
//! live run's timeline beside its simulated twin's, one panel each; runs
//! without a timeline are named.

use assert_cmd::Command;
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

/// A live run of `bench`, with the timeline `--observe` stores when `observed`.
fn live_run(bench: &str, observed: bool) -> Run {
    let tool = ToolInfo { name: "schedlab".into(), version: "0".into(), git_rev: None };
    let mut r = Run::new(RunKind::Live, tool, vec![], "lab".into(), 1_700_000_000_000);
    r.status = RunStatus::Complete;
    r.env_start = Some(Environment { kernel_release: Some("6.18.4".into()), ..Default::default() });
    let cond = Condition::Live { requested: SchedCondition::default(), applied: None, loads: vec![] };
    let mut b = BenchResult::new(bench, cond, 0);
    b.status = BenchStatus::Complete;
    b.metrics.push(Metric::samples("rate", Unit::PerSecond, Direction::HigherIsBetter, vec![1.0, 1.1]).headline());
    if observed {
        let mut waiter = TimelineTask::new(101, "measured schedlab-wake-n 101", "measured");
        waiter.push("prio", 0, 120.0);
        let mut load = TimelineTask::new(200, "load schedlab-hbsend 200", "load");
        load.push("prio", 0, 120.0);
        load.push("prio", 10_000_000, 125.0);
        b.timeline = Some(Timeline {
            source: "/proc/PID/task/TID/sched, sampled at 100.0 Hz".into(),
            primary: "prio".into(),
            quantities: vec![Quantity { name: "prio".into(), unit: String::new(), lower_runs_first: Some(true) }],
            missing: Vec::new(),
            end_ns: 40_000_000,
            tasks: vec![waiter, load],
            notes: Vec::new(),
        });
    }
    r.benchmarks.push(b);
    r
}

/// #1 observed wakeup, #2 and #3 pipe without timelines, #4 the simulator's
/// eevdf on wakeup with its timeline.
fn store(dir: &Path) -> std::path::PathBuf {
    let db = dir.join("results.db");
    let mut s = SqliteStore::open_with(&db, Access::Create, Duration::from_secs(5)).unwrap();
    assert_eq!(s.insert_run(&live_run("wakeup", true)).unwrap(), 1);
    assert_eq!(s.insert_run(&live_run("pipe", false)).unwrap(), 2);
    assert_eq!(s.insert_run(&live_run("pipe", false)).unwrap(), 3);
    drop(s);
    schedlab(&db)
        .args(["sim", "--policy", "eevdf", "--workload", "wakeup:samples=20,interval=1ms,groups=1", "--seeds", "1"])
        .arg("--timeline")
        .arg(dir.join("sim.json"))
        .assert()
        .success();
    db
}

fn run_ok(c: &mut Command) -> String {
    let out = c.output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    format!("{stdout}{stderr}")
}

#[test]
fn a_live_and_a_simulated_run_plot_as_two_panels() {
    let dir = tempfile::tempdir().unwrap();
    let db = store(dir.path());
    let svg = dir.path().join("both.svg");
    let said = run_ok(schedlab(&db).args(["plot", "1", "4", "--timeline", "-o"]).arg(&svg));
    assert!(said.contains("timelines of 2 runs written to") && said.contains("one panel each"), "{said}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("#1 wakeup · kernel 6.18.4 · /proc/PID/task/TID/sched"), "the live panel's title");
    assert!(text.contains("#4 sim:wakeup · simulator: eevdf, seed 1"), "the simulated panel's title");
    for group in ["normal waiter", "hackbench"] {
        assert_eq!(text.matches(&format!(">\n{group}\n</text>")).count(), 1, "{group} once in the legend");
    }

    // A run without a timeline among them gets a panel that says so, and is named.
    let png = dir.path().join("three.png");
    let said = run_ok(schedlab(&db).args(["plot", "1", "2", "4", "--timeline", "-o"]).arg(&png));
    assert!(said.contains("#2: no stored timeline in this run"), "{said}");
    assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");

    // The report of both shows them side by side, though they share no benchmark.
    let html = dir.path().join("r.html");
    let said = run_ok(schedlab(&db).args(["report", "1", "4", "-o"]).arg(&html));
    assert!(said.contains("share no benchmark case"), "{said}");
    let page = std::fs::read_to_string(&html).unwrap();
    let section = &page[page.find("<section id=\"timelines\"").expect("a timelines section")..];
    assert!(section.contains("#1 wakeup · kernel 6.18.4") && section.contains("#4 sim:wakeup"), "{section}");
    assert_eq!(section.matches("<figure>").count(), 1, "one figure of panels");
    assert!(page.contains("Not compared: these runs share no benchmark case"));
}

#[test]
fn timelines_of_runs_that_have_none_are_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = store(dir.path());
    let out =
        schedlab(&db).args(["plot", "2", "3", "--timeline", "-o"]).arg(dir.path().join("x.png")).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no stored timeline in #2, #3") && stderr.contains("--observe"), "{stderr}");
    assert!(!dir.path().join("x.png").exists(), "no file for nothing");
    // A quantity no run has: each panel says so, and nothing is drawn.
    let out = schedlab(&db)
        .args(["plot", "1", "4", "--timeline", "--quantity", "bogus", "-o"])
        .arg(dir.path().join("y.png"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("nothing to draw") && stderr.contains("no bogus in this timeline"), "{stderr}");
}
