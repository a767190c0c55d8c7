//! Every command's terminal output fits the width schedlab is given
//! ($COLUMNS, as a terminal would set it): 80 and 100 columns.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/tests/fixtures/default-suite.json")
}

fn schedlab(db: &Path, columns: usize, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("SCHEDLAB_DB")
        .env("COLUMNS", columns.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn every_command_fits_80_and_100_columns() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let suite = fixture();
    let suite = suite.to_str().unwrap();
    schedlab(&db, 80, &["import", suite]);
    schedlab(&db, 80, &["import", suite]);
    schedlab(&db, 80, &["sim", "--policy", "cfs", "--workload", "hogs[nice=0,10]", "--duration", "100ms"]);
    let commands: &[&[&str]] = &[
        &["show", "1"],
        &["show", "1", "--all"],
        &["show", "last"],
        &["runs"],
        &["compare", "1", "2"],
        &["history", "pipe"],
        &["list"],
        &["check"],
        &["sim", "--no-store", "--policy", "cfs", "--policy", "o1", "--workload", "hogs", "--duration", "100ms"],
    ];
    for width in [80, 100] {
        for args in commands {
            let text = schedlab(&db, width, args);
            let long: Vec<&str> = text.lines().filter(|l| l.chars().count() > width).collect();
            assert!(
                long.is_empty(),
                "{args:?} at {width} columns has {} longer line(s):\n{}",
                long.len(),
                long.join("\n")
            );
        }
    }
}
