//! `sim --calibration`: a stored calibration's costs reach the simulated
//! run for the flags and workload keys not given, explicit ones win, one
//! from another host warns naming both; and `compare` pairs a live run with
//! its simulated twin under one set of names. The calibration is imported
//! (the live measurement itself is a timing: bench/sim-vs-live.sh runs it).

use assert_cmd::Command;
use schedlab_core::{BenchResult, BenchStatus, Condition, Direction, Environment, Metric, Run, RunKind, RunStatus};
use schedlab_core::{SchedCondition, ToolInfo, Unit};
use std::path::Path;

fn schedlab(db: &Path) -> Command {
    let mut c = Command::cargo_bin("schedlab").unwrap();
    c.arg("--db").arg(db).env_remove("SCHEDLAB_DB");
    c
}

fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).unwrap_or("unknown".into())
}

fn live_run(host: &str, benchmarks: Vec<BenchResult>) -> Run {
    let tool = ToolInfo { name: "schedlab".into(), version: "test".into(), git_rev: None };
    let mut run = Run::new(RunKind::Live, tool, vec!["schedlab".into()], host.into(), 1_700_000_000_000);
    let env =
        Environment { hostname: Some(host.into()), cpu_model: Some("Test CPU 9000".into()), ..Default::default() };
    run.env_start = Some(env);
    run.status = RunStatus::Complete;
    run.ended_unix_ms = Some(1_700_000_001_000);
    run.benchmarks = benchmarks;
    run
}

fn result(name: &str, metrics: Vec<Metric>) -> BenchResult {
    let cond = Condition::Live { requested: SchedCondition::default(), applied: None, loads: Vec::new() };
    let mut b = BenchResult::new(name, cond, 1_700_000_000_000);
    b.metrics = metrics;
    b.status = BenchStatus::Complete;
    b.repetitions = 1;
    b.ended_unix_ms = Some(1_700_000_001_000);
    b
}

/// Store a calibration measured on `host`.
fn import_calibration(db: &Path, dir: &Path, host: &str) {
    let ns = |name: &str, v: f64| Metric::samples(name, Unit::Nanoseconds, Direction::Neutral, vec![v]);
    let cal = result(
        "sim-calibration",
        vec![
            ns("ctx_switch_ns", 1234.0),
            ns("migration_ns", 5678.0),
            ns("send_cost_ns", 700.0),
            ns("recv_cost_ns", 800.0),
            ns("pipe_send_cost_ns", 90.0),
            ns("pipe_recv_cost_ns", 110.0),
            ns("wake_cost_ns", 4321.0),
            ns("channel_wake_ns", 987.0),
            ns("idle_exit_ns", 17_000.0),
            ns("ipi_latency_ns", 9_000.0),
            ns("ipi_cost_ns", 6_500.0),
        ],
    );
    let file = dir.join(format!("cal-{host}.json"));
    std::fs::write(&file, serde_json::to_string(&live_run(host, vec![cal])).unwrap()).unwrap();
    schedlab(db).args(["import", file.to_str().unwrap(), "--format", "schedlab"]).assert().success();
}

/// The newest stored run's first result's parameters.
fn last_params(db: &Path, dir: &Path) -> serde_json::Map<String, serde_json::Value> {
    let file = dir.join("last.jsonl");
    schedlab(db).args(["export", "--jsonl", file.to_str().unwrap(), "last"]).assert().success();
    let text = std::fs::read_to_string(&file).unwrap();
    let run: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let run = run.get("run").unwrap_or(&run);
    run["benchmarks"][0]["params"].as_object().unwrap().clone()
}

fn sim(db: &Path, extra: &[&str]) -> std::process::Output {
    let base = ["sim", "--policy", "eevdf", "--duration", "5ms", "--seeds", "1", "--cpus", "1"];
    schedlab(db).args(base).args(extra).output().unwrap()
}

#[test]
fn a_stored_calibration_reaches_the_run_and_given_flags_win() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    import_calibration(&db, dir.path(), &this_host());
    let out = sim(&db, &["--calibration", "last", "--workload", "hackbench:groups=1,loops=5"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let p = last_params(&db, dir.path());
    assert_eq!((p["ctx_switch"].as_u64(), p["migration"].as_u64()), (Some(1234), Some(5678)), "{p:?}");
    assert_eq!((p["send_cost"].as_u64(), p["recv_cost"].as_u64()), (Some(700), Some(800)), "{p:?}");
    assert_eq!(p["wake_cost"].as_u64(), Some(4321), "{p:?}");
    assert_eq!(p["channel_wake"].as_u64(), Some(987), "{p:?}");
    assert_eq!(p["idle_exit"].as_u64(), Some(17_000), "{p:?}");
    assert_eq!(p["ipi_latency"].as_u64(), Some(9_000), "{p:?}");
    assert_eq!(p["ipi_cost"].as_u64(), Some(6_500), "{p:?}");
    // pipe takes the pipe token's costs; flags and keys given win.
    let extra = [
        "--calibration",
        "last",
        "--workload",
        "pipe:loops=5,recv_cost=3us",
        "--ctx-switch",
        "1us",
        "--wake-cost",
        "0ns",
        "--channel-wake-cost",
        "2us",
        "--idle-exit",
        "3us",
        "--ipi-latency",
        "4us",
        "--ipi-cost",
        "1us",
    ];
    let out = sim(&db, &extra);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let p = last_params(&db, dir.path());
    assert_eq!((p["ctx_switch"].as_u64(), p["migration"].as_u64()), (Some(1000), Some(5678)), "{p:?}");
    assert_eq!((p["send_cost"].as_u64(), p["recv_cost"].as_u64()), (Some(90), Some(3000)), "{p:?}");
    assert!(!p.contains_key("wake_cost"), "0, given, is left out as the default: {p:?}");
    assert_eq!(p["channel_wake"].as_u64(), Some(2_000), "{p:?}");
    assert_eq!(p["idle_exit"].as_u64(), Some(3_000), "{p:?}");
    assert_eq!(p["ipi_latency"].as_u64(), Some(4_000), "{p:?}");
    assert_eq!(p["ipi_cost"].as_u64(), Some(1_000), "{p:?}");
    // Without --calibration, the defaults (no wake cost).
    assert!(sim(&db, &["--workload", "pipe:loops=5"]).status.success());
    let p = last_params(&db, dir.path());
    assert_eq!((p["ctx_switch"].as_u64(), p["send_cost"].as_u64()), (Some(2000), Some(1500)), "{p:?}");
    assert!(["wake_cost", "channel_wake", "idle_exit"].iter().all(|k| !p.contains_key(*k)), "{p:?}");
    assert_eq!(p["ipi_latency"].as_u64(), Some(2_000), "the default: {p:?}");
    assert_eq!(p["ipi_cost"].as_u64(), Some(500), "the default: {p:?}");
}

#[test]
fn another_hosts_calibration_warns_naming_both_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    import_calibration(&db, dir.path(), "lab-machine-elsewhere");
    let out = sim(&db, &["--calibration", "last", "--workload", "hogs", "--no-store"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("lab-machine-elsewhere (Test CPU 9000)") && stderr.contains(&this_host()), "{stderr}");
    assert!(stderr.contains("sim --calibrate"), "{stderr}");
    assert!(sim(&db, &["--calibration", "1", "--workload", "hogs", "--no-store"]).status.success());
    // A store without a calibration, and a run that is none, are refused naming the fix.
    let other = dir.path().join("other.db");
    assert!(sim(&other, &["--workload", "hogs"]).status.success());
    let out = sim(&other, &["--calibration", "last", "--workload", "hogs", "--no-store"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("no sim calibration") && stderr.contains("sim --calibrate"),
        "{stderr}"
    );
    let out = sim(&other, &["--calibration", "1", "--workload", "hogs", "--no-store"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("is not a sim calibration"), "{stderr}");
}

#[test]
fn compare_pairs_live_hogs_and_wakeup_with_their_simulated_twins() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let task = |name: &str, v: [f64; 2]| {
        let labels = vec!["hog0.nice0".to_string(), "hog1.nice5".to_string()];
        Metric::entities(name, Unit::Percent, Direction::Neutral, "task", labels, v.to_vec())
    };
    let mut lat = schedlab_core::LatencyHistogram::new();
    lat.record(20_000);
    let hogs = result("hogs", vec![task("cpu_share", [75.0, 25.0]), task("fair_share_error", [0.5, 1.5])]);
    let wakeup = result("wakeup", vec![Metric::histogram("rt.latency", Direction::LowerIsBetter, lat)]);
    let file = dir.path().join("live.json");
    std::fs::write(&file, serde_json::to_string(&live_run(&this_host(), vec![hogs, wakeup])).unwrap()).unwrap();
    schedlab(&db).args(["import", file.to_str().unwrap(), "--format", "schedlab"]).assert().success();
    assert!(sim(&db, &["--workload", "hogs:nice=0,5"]).status.success());
    let out = schedlab(&db).args(["compare", "1", "2"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("fair_share_error") && text.contains("hog1.nice5"), "{text}");
    let wl = ["--workload", "wakeup:samples=20,interval=1ms,groups=0,normal_waiters=0"];
    assert!(sim(&db, &wl).status.success());
    let out = schedlab(&db).args(["compare", "1", "3"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("rt.latency") && !text.contains("wakeup_latency.rt"), "{text}");
}

#[test]
#[ignore = "needs root (the wake-up probe runs RT threads): CI runs ignored tests as root"]
fn ctrl_c_during_the_wake_up_probe_stops_the_calibration_and_stores_nothing() {
    use std::io::{BufRead, BufReader};
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("schedlab"))
        .arg("--db")
        .arg(&db)
        .args(["sim", "--calibrate", "--quick"])
        .env_remove("SCHEDLAB_DB")
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 {
        seen.push_str(&line);
        if line.starts_with("calibration: wakeup") {
            break;
        }
        line.clear();
    }
    assert!(seen.contains("calibration: wakeup"), "the probe never started: {seen}");
    // Inside the probe (50 broadcasts 10 ms apart, a repetition and a warm-up).
    std::thread::sleep(std::time::Duration::from_millis(300));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success() && rest.contains("interrupted"), "{status:?}: {rest}");
    assert!(!rest.contains("wake_cost not measured"), "an interruption is not a refusal: {rest}");
    let runs = schedlab(&db).arg("runs").output().unwrap();
    assert!(!String::from_utf8_lossy(&runs.stdout).contains("sim-calibration"), "nothing was stored");
}
