//! Bad input to the case-setup options (`--uclamp-*`, `--tunable`,
//! `--cgroup-*`, `--scx`, `--scx-cmd`): refused before anything runs, exit
//! 2, one `error:` line that names the problem and the fix. Only inputs whose
//! answer does not depend on the kernel or on root are here; the kernel's
//! answers are tested in crates/live (tests/setup.rs, harness/*.rs).

use std::process::Command;

#[rustfmt::skip]
const TABLE: &[(&[&str], &[&str])] = &[
    (&["--uclamp-min", "2000"], &["--uclamp-min", "0 to 1024"]),
    (&["--uclamp-max", "-1"], &["--uclamp-max", "0 to 1024"]),
    (&["--uclamp-min", "600", "--uclamp-max", "500"], &["--uclamp-min 600 is above --uclamp-max 500"]),
    (&["--tunable", "base_slice_ns"], &["bad tunable 'base_slice_ns'", "no '='", "NAME=VALUE"]),
    (&["--tunable", "=1"], &["name is empty"]),
    (&["--tunable", "base_slice_ns="], &["value is empty"]),
    (&["--tunable", "../../etc/passwd=x"], &["bad tunable", "a name is"]),
    (&["--tunable", "a=1", "--tunable", "a=2"], &["tunable a is given twice"]),
    (&["--cgroup-weight", "0"], &["--cgroup-weight", "1 to 10000"]),
    (&["--cgroup-weight", "10001"], &["--cgroup-weight", "1 to 10000"]),
    (&["--cgroup-max", "1ms/2s"], &["bad --cgroup-max '1ms/2s'", "1 ms to 1 s", "QUOTA/PERIOD"]),
    (&["--cgroup-max", "500us"], &["below the kernel's 1000 us", "QUOTA/PERIOD"]),
    (&["--cgroup-max", "fast"], &["bad --cgroup-max 'fast'"]),
    (&["--cgroup-cpus", "3-1"], &["bad CPU list '3-1'"]),
    (&["--scx", "../bin/sh"], &["bad sched_ext scheduler name", "--scx lavd"]),
    (&["--scx-cmd", " "], &["--scx-cmd is empty"]),
    (&["--scx", "lavd", "--scx-cmd", "scx_rusty"], &["--scx", "cannot be used with", "--scx-cmd"]),
];

#[test]
fn bad_setup_options_are_refused_before_anything_runs() {
    let store = tempfile::tempdir().unwrap();
    let db = store.path().join("results.db");
    let mut failures = Vec::new();
    for (args, words) in TABLE {
        let out = Command::new(env!("CARGO_BIN_EXE_schedlab"))
            .arg("--db")
            .arg(&db)
            .env_remove("SCHEDLAB_DB")
            .args(["run", "threads", "--invocations", "1"])
            .args(*args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let mut problems = Vec::new();
        if out.status.code() != Some(2) {
            problems.push(format!("exit {:?}, expected 2", out.status.code()));
        }
        if stderr.contains("panicked") {
            problems.push("panicked".into());
        }
        if stderr.lines().filter(|l| l.starts_with("error: ")).count() != 1 {
            problems.push("expected one 'error: ' line".into());
        }
        problems.extend(words.iter().filter(|w| !stderr.contains(**w)).map(|w| format!("lacks '{w}'")));
        if !problems.is_empty() {
            failures.push(format!("{args:?}: {}\n  stderr: {}", problems.join("; "), stderr.trim()));
        }
    }
    assert!(!db.exists(), "a refused run opens no store");
    assert!(failures.is_empty(), "{} of {} misbehave:\n{}", failures.len(), TABLE.len(), failures.join("\n"));
}
