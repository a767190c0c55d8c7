//! The HTML report loads in headless Chromium without script errors and with
//! every plot present. Chromium comes from Debian's `chromium` package, which
//! `.ci/run` installs; where it is absent outside CI the test says so and
//! passes, in CI (CI=true) it fails.

use schedlab_core::*;
use std::process::Command;

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| Command::new(b).arg("--version").output().map(|o| o.status.success()).unwrap_or(false))
}

fn run(id: i64, base: u64) -> Run {
    let tool = ToolInfo { name: "schedlab".into(), version: "0".into(), git_rev: None };
    let mut r = Run::new(RunKind::Live, tool, vec![], "host".into(), 0);
    r.id = Some(id);
    let cond = Condition::Live { requested: SchedCondition::default(), applied: None, loads: vec![] };
    let mut b = BenchResult::new("pipe", cond, 0);
    b.status = BenchStatus::Complete;
    b.metrics.push(Metric::samples("rate", Unit::PerSecond, Direction::HigherIsBetter, vec![1e5, 1.2e5]).headline());
    let mut h = LatencyHistogram::new();
    for i in 0..500 {
        h.record(base + i * 20);
    }
    b.metrics.push(Metric::histogram("latency", Direction::LowerIsBetter, h));
    r.benchmarks.push(b);
    r
}

#[test]
fn report_loads_in_headless_chromium_with_all_plots() {
    let Some(browser) = chromium() else {
        assert!(std::env::var("CI").is_err(), "CI must install chromium (see .ci/run)");
        eprintln!("chromium not installed: skipping the browser check (apt-get install chromium)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("report.html");
    std::fs::write(&file, {
        let runs = [run(1, 4000), run(2, 6000)];
        let c =
            schedlab_report::compare::compare(&runs, &schedlab_report::compare::CompareOptions::fixed(0.02)).unwrap();
        schedlab_report::html::report(&runs, Some(&c))
    })
    .unwrap();
    let profile = dir.path().join("profile");
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=3000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", file.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(dom.contains("data-report-ok=\"1\""), "plots missing or page not loaded:\n{}", &dom[..dom.len().min(2000)]);
    assert!(dom.contains("data-plots=\"2\""), "expected two plots");
    assert!(!dom.contains("data-report-error"), "a script error occurred");
}
