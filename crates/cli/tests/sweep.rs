//! Conditions as axes (issue 16): lists given to the condition flags and to
//! `--load` make one run that covers their product, interleaved in rounds,
//! shown side by side; the simulator sweeps a tunable the same way.

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn schedlab(db: &Path) -> Command {
    let mut c = Command::cargo_bin("schedlab").unwrap();
    c.arg("--db").arg(db).env_remove("SCHEDLAB_DB").env("COLUMNS", "80");
    c
}

fn tmp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    (dir, db)
}

const TINY: [&str; 8] =
    ["run", "pipe:loops=300,placement=same-cpu", "--repeat", "1", "--warmup", "0", "--invocations", "3"];

/// (invocation, condition label) of each stored benchmark, in the order they ran.
fn order(db: &Path) -> Vec<(i64, String)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut st = conn.prepare("SELECT invocation, condition FROM benchmarks ORDER BY seq").unwrap();
    st.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
        .unwrap()
        .map(|r| {
            let (i, cond) = r.unwrap();
            let c: serde_json::Value = serde_json::from_str(&cond).unwrap();
            (i, format!("{} {}", c["requested"]["policy"], c["requested"]["nice"]))
        })
        .collect()
}

#[test]
fn a_policy_and_nice_sweep_runs_their_product_in_rounds_and_shows_it_side_by_side() {
    let (_dir, db) = tmp_db();
    let out = schedlab(&db).args(TINY).args(["--policy", "other,batch", "--nice", "0,5"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ran = order(&db);
    assert_eq!(ran.len(), 12, "4 conditions x 3 invocations: {ran:?}");
    // Rounds: every condition once before any runs again.
    let first: Vec<&String> = ran[..4].iter().map(|(_, c)| c).collect();
    assert_eq!(first, ["\"other\" 0", "\"other\" 5", "\"batch\" 0", "\"batch\" 5"]);
    assert!(ran.iter().enumerate().all(|(i, (inv, _))| *inv == (i / 4) as i64), "{ran:?}");
    assert_eq!(ran[4..8].iter().map(|(_, c)| c).collect::<Vec<_>>(), first);
    assert!(stdout.contains("sweep of 4 conditions, baseline other nice=0"), "{stdout}");
    for side in ["other nice=5", "batch nice=0", "batch nice=5"] {
        assert!(stdout.lines().any(|l| l.trim_start().starts_with(side)), "{side} missing:\n{stdout}");
    }
    assert!(stdout.contains("(baseline)") && stdout.contains("[95% CI]"), "{stdout}");
    assert!(!stdout.contains("kernel."), "headline metrics only, as show prints them:\n{stdout}");
    assert!(stdout.lines().all(|l| l.chars().count() <= 80), "fits 80 columns:\n{stdout}");
    // `show` prints the same table from the store.
    let shown = schedlab(&db).args(["show", "last"]).output().unwrap();
    assert!(String::from_utf8_lossy(&shown.stdout).contains("sweep of 4 conditions"));
}

#[test]
fn a_value_that_does_not_apply_is_dropped_for_that_policy_with_a_note() {
    let (_dir, db) = tmp_db();
    // A priority applies to fifo/rr only: other and batch run without it, once each.
    let out = schedlab(&db).args(TINY).args(["--policy", "other,batch", "--prio", "10,20"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("note: sweep: other runs without what does not apply"), "{stderr}");
    assert_eq!(order(&db).len(), 6, "2 conditions x 3 invocations");
    // Without a list the same input stays an error.
    let out = schedlab(&db).args(TINY).args(["--policy", "other", "--prio", "10"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("only fifo and rr take an RT priority"));
}

#[test]
fn a_load_list_is_an_axis_and_a_big_sweep_needs_the_limit_raised() {
    let (_dir, db) = tmp_db();
    let out = schedlab(&db).args(TINY).args(["--load", "none,burn:1,nice=19"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("sweep of 2 conditions"), "{stdout}");
    assert!(stdout.contains("+load burn:1,nice=19"), "{stdout}");
    let out = schedlab(&db).args(TINY).args(["--nice", "0,1,2", "--sweep-limit", "2"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("this sweep makes 3 cases") && stderr.contains("--sweep-limit 3"), "{stderr}");
}

#[test]
fn the_simulator_sweeps_a_tunable_with_the_same_list_syntax() {
    let (_dir, db) = tmp_db();
    let out = schedlab(&db)
        .args(["sim", "--policy", "cfs:sched_latency=3ms,24ms", "--workload", "hogs:nice=0,5,10", "--cpus", "1"])
        .args(["--duration", "200ms", "--seeds", "3"])
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("cfs:sched_latency=3ms | cfs:sched_latency=24ms"), "{stderr}");
    assert!(stdout.contains("cfs[sched_latency=3ms]") && stdout.contains("cfs[sched_latency=24ms]"), "{stdout}");
    let runs = schedlab(&db).args(["runs"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&runs.stdout).matches(" sim ").count(), 2);
    let out =
        schedlab(&db).args(["sim", "--policy", "cfs:sched_latency=3ms,,6ms", "--workload", "hogs"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad policy spec"), "an empty element is refused");
}

#[test]
fn a_list_given_to_a_single_valued_parameter_makes_one_case_per_value() {
    let (_dir, db) = tmp_db();
    let out = schedlab(&db)
        .args(["run", "hackbench:groups=1,2,loops=10", "--repeat", "1", "--warmup", "0", "--invocations", "1"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for heading in ["hackbench groups=1 loops=10", "hackbench groups=2 loops=10"] {
        assert!(stdout.contains(heading), "{heading}:\n{stdout}");
    }
    assert!(!stdout.contains("kernel."), "counters stay out of the sweep's table:\n{stdout}");
}

#[test]
#[ignore = "needs root to write a kernel.sched_* sysctl: CI runs ignored tests as root"]
fn a_tunable_list_is_an_axis_and_every_value_is_restored() {
    let path = "/proc/sys/kernel/sched_rr_timeslice_ms";
    let before = std::fs::read_to_string(path).expect("kernel.sched_rr_timeslice_ms is readable");
    let (_dir, db) = tmp_db();
    let out = schedlab(&db).args(TINY).args(["--tunable", "kernel.sched_rr_timeslice_ms=10,50"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("sweep of 2 conditions"), "{stdout}");
    assert!(stdout.contains("sched_rr_timeslice_ms=50"), "{stdout}");
    assert_eq!(std::fs::read_to_string(path).unwrap(), before, "restored after the run");
}

#[test]
fn the_simulator_sweeps_a_workload_parameter_as_cases_of_one_run() {
    let (_dir, db) = tmp_db();
    let out = schedlab(&db)
        .args(["sim", "--policy", "o1", "--workload", "hackbench:groups=1,2,loops=5", "--duration", "1s"])
        .args(["--seeds", "3"])
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("sweep: 2 workloads"), "{stderr}");
    for heading in ["sim:hackbench duration=1s groups=1 loops=5", "sim:hackbench duration=1s groups=2 loops=5"] {
        assert!(stdout.contains(heading), "{heading}:\n{stdout}");
    }
    let runs = schedlab(&db).args(["runs"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&runs.stdout).matches(" sim ").count(), 1, "one run holds both cases");
}

#[test]
fn a_quick_run_is_stored_as_quick_so_its_headings_hide_the_quick_defaults() {
    let (_dir, db) = tmp_db();
    let out = schedlab(&db)
        .args(["run", "spawn", "--quick", "--invocations", "1", "--repeat", "1", "--warmup", "0"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let conn = rusqlite::Connection::open(&db).unwrap();
    let quick: Vec<bool> = conn
        .prepare("SELECT quick FROM benchmarks")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(quick, [true], "the row written at the start and updated at the end says quick");
    assert!(stdout.lines().any(|l| l.starts_with("spawn ·")), "count at its quick default is not named:\n{stdout}");
}
