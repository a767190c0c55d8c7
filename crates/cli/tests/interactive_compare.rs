//! A live `interactive` run and a simulated one report the same figures
//! under the same names, so `compare LIVE SIM` lines them up row by row.

use assert_cmd::Command;
use std::path::Path;

fn schedlab(db: &Path) -> Command {
    let mut c = Command::cargo_bin("schedlab").unwrap();
    c.arg("--db").arg(db).env_remove("SCHEDLAB_DB");
    c
}

#[test]
fn a_live_interactive_run_and_a_simulated_one_compare_with_no_orphan_rows() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    // Audio alone, on both sides: the live row `none`, the simulator's load `none`.
    schedlab(&db)
        .args(["run", "interactive:task=audio,loads=none,duration=500ms", "--invocations", "1"])
        .args(["--repeat", "1", "--warmup", "0", "--name", "live"])
        .assert()
        .success();
    schedlab(&db)
        .args(["sim", "--policy", "cfs", "--workload", "interactive:audio=1,video=0,burn=0"])
        .args(["--cpus", "2", "--duration", "2s", "--seeds", "2", "--name", "sim"])
        .assert()
        .success();
    let out = schedlab(&db).args(["compare", "live", "sim", "--export-json", "-"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = c["rows"].as_array().unwrap();
    let mut metrics: Vec<&str> = Vec::new();
    for row in rows {
        let cells = row["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 2);
        assert!(cells.iter().all(|c| c["value"].is_number()), "an orphan row: {row}");
        let m = row["metric"].as_str().unwrap();
        if !metrics.contains(&m) {
            metrics.push(m);
        }
        assert!(row["entity"].is_null() || row["entity"] == "none", "{row}");
    }
    assert_eq!(
        metrics,
        [
            "latency_mean.audio",
            "latency_sd.audio",
            "latency_max.audio",
            "desired_cpu.audio",
            "deadlines_met.audio",
            "latency.audio@none"
        ],
        "audio's table row on both sides, and nothing only one side has"
    );
}
