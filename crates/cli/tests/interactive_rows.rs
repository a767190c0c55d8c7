//! One `schedlab sim` command with the live benchmark's `loads=` gives
//! interbench's table, a row per load, as `schedlab run interactive` does.

use assert_cmd::Command;
use std::path::Path;

fn schedlab(db: &Path) -> Command {
    let mut c = Command::cargo_bin("schedlab").unwrap();
    c.arg("--db").arg(db).env_remove("SCHEDLAB_DB");
    c
}

#[test]
fn a_simulated_interactive_run_with_loads_shows_a_row_per_load() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let workload = "interactive:audio=1,video=0,loads=none,burn,write,read,compile";
    schedlab(&db)
        .args(["sim", "--policy", "o1", "--workload", workload, "--cpus", "1", "--duration", "1s", "--seeds", "2"])
        .assert()
        .success();
    let out = schedlab(&db).args(["show"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table: Vec<&str> = text.lines().filter(|l| l.contains("deadlines_met.audio") || l.contains("load")).collect();
    assert!(!table.is_empty(), "no table of audio's figures:\n{text}");
    // Each load is a row of audio's table, in the order given.
    let rows: Vec<usize> = ["none", "burn", "write", "read", "compile"]
        .iter()
        .map(|load| {
            text.lines()
                .position(|l| l.trim_start().starts_with(load))
                .unwrap_or_else(|| panic!("no row {load}:\n{text}"))
        })
        .collect();
    assert!(rows.windows(2).all(|w| w[0] < w[1]), "rows out of order {rows:?}:\n{text}");
}
