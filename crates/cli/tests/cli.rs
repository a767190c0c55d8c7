//! End-to-end tests of the `schedlab` binary: bad input gets a one-line error
//! that names the fix, runs are stored and shown, and interruption leaves a
//! consistent store and no child processes.

use assert_cmd::Command;
use predicates::prelude::*;
use std::path::{Path, PathBuf};

fn schedlab(db: &Path) -> Command {
    let mut c = Command::cargo_bin("schedlab").unwrap();
    c.arg("--db").arg(db).env_remove("SCHEDLAB_DB");
    c
}

fn tmp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    (dir, db)
}

#[test]
fn unwritable_db_path() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let db = file.join("results.db");
    let out = schedlab(&db).args(["runs"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("cannot open the store") && stderr.contains("--db PATH"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn store_from_a_newer_schedlab() {
    let (_dir, db) = tmp_db();
    schedlab(&db).arg("runs").assert().success();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.pragma_update(None, "user_version", 999).unwrap();
    drop(conn);
    schedlab(&db)
        .arg("runs")
        .assert()
        .failure()
        .stderr(predicate::str::contains("newer schedlab").and(predicate::str::contains("upgrade")));
}

/// `schedlab ARGS` as nobody with RLIMIT_RTPRIO 0 and an 8 MiB RLIMIT_MEMLOCK
/// (a desktop's defaults); run unchanged when already unprivileged.
fn unprivileged(args: &[&str]) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let db = dir.path().join("results.db");
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("schedlab"));
    cmd.arg("--db").arg(&db).args(args);
    if unsafe { libc::geteuid() } == 0 {
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                let zero = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
                let memlock = libc::rlimit { rlim_cur: 8 << 20, rlim_max: 8 << 20 };
                if libc::setrlimit(libc::RLIMIT_RTPRIO, &zero) != 0
                    || libc::setrlimit(libc::RLIMIT_MEMLOCK, &memlock) != 0
                    || libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(65534) != 0
                    || libc::setuid(65534) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    cmd.output().unwrap()
}

#[test]
fn fifo_without_privilege() {
    let out = unprivileged(&["run", "pipe:loops=1000", "--policy", "fifo", "--repeat", "1"]);
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "unprivileged FIFO must not succeed:\n{all}");
    assert!(all.contains("privilege") && all.contains("CAP_SYS_NICE"), "{all}");
    assert!(!all.contains("panicked"), "{all}");
}

#[test]
fn mlock_without_the_memlock_limit_is_refused_before_anything_runs() {
    // Issue 12: --mlock was only found to fail mid-benchmark.
    let out = unprivileged(&["run", "pipe:loops=1000", "--mlock", "--repeat", "1"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(stdout.is_empty(), "nothing may run or print before the refusal: {stdout}");
    assert!(stderr.contains("mlockall") && stderr.contains("ulimit -l unlimited"), "{stderr}");
}

#[test]
fn a_small_run_is_stored_shown_and_exported() {
    let (_dir, db) = tmp_db();
    let out = schedlab(&db)
        .args(["run", "pipe:loops=2000,placement=same-cpu", "spawn:count=200", "--repeat", "2", "--warmup", "0"])
        .args(["--name", "tiny"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("stored as run #1"), "{stdout}");
    assert!(stdout.contains("pipe"), "{stdout}");

    let json = schedlab(&db).args(["show", "tiny", "--export-json", "-"]).output().unwrap();
    assert!(json.status.success());
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["schema_version"], 2);
    assert_eq!(v["status"], "complete");
    // Two cases, three invocations each by default, interleaved in rounds.
    let benches = v["benchmarks"].as_array().unwrap();
    let order: Vec<(&str, u64)> =
        benches.iter().map(|b| (b["name"].as_str().unwrap(), b["invocation"].as_u64().unwrap())).collect();
    assert_eq!(order, [("pipe", 0), ("spawn", 0), ("pipe", 1), ("spawn", 1), ("pipe", 2), ("spawn", 2)]);
    assert!(benches.iter().all(|b| b["status"]["state"] == "complete"));
    assert!(v["env_start"]["kernel_release"].is_string());

    let csv = schedlab(&db).args(["show", "last", "--export-csv", "-"]).output().unwrap();
    let csv = String::from_utf8_lossy(&csv.stdout);
    assert!(csv.lines().next().unwrap().starts_with("run_id,benchmark"));
    assert!(csv.lines().count() >= 3, "{csv}");

    schedlab(&db)
        .args(["run", "pipe:loops=100", "--name", "tiny"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("already exists"));
}

/// Children of `pid`, from /proc.
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) {
            let after = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
            let ppid: u32 = after.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
            if ppid == pid {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn ctrl_c_keeps_finished_work_and_leaves_nothing_behind() {
    let (_dir, db) = tmp_db();
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("schedlab"))
        .args(["--db", db.to_str().unwrap(), "run", "spawn:count=100", "pipe:loops=100000000,placement=same-cpu"])
        .args(["--repeat", "1", "--warmup", "0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait until the long pipe benchmark is running (its child process exists).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while children_of(pid).is_empty() {
        assert!(std::time::Instant::now() < deadline, "pipe benchmark never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let grandchildren = children_of(pid);
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    for g in grandchildren {
        assert!(
            !Path::new(&format!("/proc/{g}")).exists()
                || std::fs::read_to_string(format!("/proc/{g}/stat")).map(|s| s.contains(") Z")).unwrap_or(true),
            "child {g} survived the interrupt"
        );
    }
    let conn = rusqlite::Connection::open(&db).unwrap();
    let ok: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(ok, "ok");
    let states: Vec<(String, String)> = conn
        .prepare("SELECT name, state FROM benchmarks ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(states, vec![("spawn".into(), "complete".into()), ("pipe".into(), "incomplete".into())]);
    let status: String = conn.query_row("SELECT status FROM runs", [], |r| r.get(0)).unwrap();
    assert_eq!(status, "interrupted");
}

#[test]
fn list_names_benchmarks_and_parameters() {
    let (_dir, db) = tmp_db();
    schedlab(&db).arg("list").assert().success().stdout(
        predicate::str::contains("pipe")
            .and(predicate::str::contains("placement"))
            .and(predicate::str::contains("spawn")),
    );
}

#[test]
fn check_lists_findings_worst_first_with_a_summary() {
    let (_dir, db) = tmp_db();
    let out = schedlab(&db).arg("check").assert().success().get_output().stdout.clone();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("privilege"), "{text}");
    assert!(text.contains("warning(s),") && text.contains("note(s),"), "{text}");
    // Worst first: no WARN line after a note or ok line.
    let marks: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|m| ["WARN", "note", "ok"].contains(m))
        .collect();
    let rank = |m: &str| ["WARN", "note", "ok"].iter().position(|x| *x == m).unwrap();
    assert!(marks.windows(2).all(|w| rank(w[0]) <= rank(w[1])), "{marks:?}");
}

#[test]
fn a_closed_stdout_ends_a_listing_quietly() {
    use std::os::unix::process::ExitStatusExt;
    // The reader is gone before schedlab starts, like `schedlab list | head -0`.
    // Closing it only after spawning would race: a quick child fills the pipe's
    // buffer first and exits 0.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .arg("list")
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "not a panic: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn save_baseline_names_the_run_and_compare_uses_it() {
    let (_dir, db) = tmp_db();
    let tiny = ["run", "pipe:loops=500,placement=same-cpu", "--repeat", "2", "--warmup", "0"];
    schedlab(&db).args(tiny).args(["--save-baseline", "base"]).assert().success();
    schedlab(&db).args(tiny).assert().success();
    let out = schedlab(&db).args(["compare", "base", "last", "--export-csv", "-"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let csv = String::from_utf8_lossy(&out.stdout);
    assert!(csv.starts_with("benchmark,metric,statistic"), "{csv}");
    assert!(csv.contains(",#1 base,") && csv.contains(",#2,"), "{csv}");
    assert!(csv.contains("round_trips_per_s"), "{csv}");
}

#[test]
fn simulated_seeds_are_replicates_and_pooled_sides_compare() {
    let (_dir, db) = tmp_db();
    let sim = |seed: &str, seeds: &str| {
        let out = schedlab(&db)
            .args(["sim", "--policy", "cfs", "--workload", "wakeup:samples=40,interval=2ms,groups=1"])
            .args(["--duration", "1s", "--seed", seed, "--seeds", seeds])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let shown = sim("1", "5");
    // The heading may wrap anywhere between words.
    let words = shown.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("· 5 invocations"), "five seeds are five invocations:\n{shown}");
    sim("101", "2");
    sim("201", "2");
    // One side of 5 seeds against 2 seeds: too few for a verdict, and said so.
    let c = schedlab(&db).args(["compare", "1", "2"]).output().unwrap();
    let text = String::from_utf8_lossy(&c.stdout);
    assert!(text.contains("not enough runs") && text.contains("add 1"), "{text}");
    let csv = schedlab(&db).args(["compare", "1", "2", "--export-csv", "-"]).output().unwrap();
    let csv = String::from_utf8_lossy(&csv.stdout);
    assert!(!csv.contains(",better\n") && !csv.contains(",worse\n"), "{csv}");
    // Pooled, the second side has 4 seeds: an A/A comparison with verdicts, all within noise.
    let c = schedlab(&db).args(["compare", "1", "2,3", "--export-csv", "-"]).output().unwrap();
    let csv = String::from_utf8_lossy(&c.stdout);
    let verdicts: Vec<&str> = csv.lines().skip(1).filter_map(|l| l.rsplit(',').next()).collect();
    assert!(verdicts.contains(&"within noise"), "{csv}");
    assert!(!verdicts.iter().any(|v| ["better", "worse", "not enough runs"].contains(v)), "{csv}");
    assert!(csv.contains("#2+#3"), "{csv}");
}

#[test]
fn calibrate_saves_a_profile_that_compare_and_check_use() {
    let (_dir, db) = tmp_db();
    let out = schedlab(&db)
        .args(["calibrate", "--runs", "3", "spawn:count=50", "--invocations", "3", "--repeat", "1", "--warmup", "0"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("saved as noise profile #1") && stdout.contains("processes_per_s mean"), "{stdout}");
    let c = schedlab(&db).args(["compare", "1", "2"]).output().unwrap();
    let text = String::from_utf8_lossy(&c.stdout);
    assert!(text.contains("run-to-run variation from noise profile #1"), "{text}");
    let csv = schedlab(&db).args(["compare", "1", "2", "--export-csv", "-"]).output().unwrap();
    assert!(String::from_utf8_lossy(&csv.stdout).contains(",profile,"));
    let fixed = schedlab(&db).args(["compare", "1", "2", "--noise", "3%", "--export-csv", "-"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&fixed.stdout).contains(",profile,"), "--noise overrides the profile");
    let check = schedlab(&db).arg("check").output().unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(text.lines().any(|l| l.starts_with("ok") && l.contains("noise profile #1")), "{text}");
}

/// A simulated timeline is stored with its run and `plot --timeline` draws
/// it as it draws a live one; a quantity it lacks is named with the ones it has.
#[test]
fn a_stored_simulated_timeline_plots_and_a_wrong_quantity_is_named() {
    let (dir, db) = tmp_db();
    let csv = dir.path().join("tl.csv");
    schedlab(&db)
        .args(["sim", "--policy", "eevdf", "--workload", "wakeup:samples=20,interval=1ms", "--seeds", "1"])
        .arg("--timeline")
        .arg(&csv)
        .assert()
        .success();
    assert!(
        std::fs::read_to_string(&csv).unwrap().starts_with("task_id,task,time_ns,quantity,value\n"),
        "one row per point"
    );
    let png = dir.path().join("tl.png");
    schedlab(&db).args(["plot", "last", "--timeline", "-o"]).arg(&png).assert().success();
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[1..4], b"PNG");
    assert!(bytes.len() > 5_000, "a drawn PNG: {} bytes", bytes.len());
    schedlab(&db).args(["plot", "last", "--timeline", "--quantity", "prio", "-o"]).arg(&png).assert().code(2).stderr(
        predicate::str::contains("no quantity 'prio'").and(predicate::str::contains("choose one of: lag, vdeadline")),
    );
    // Without --timeline a plot needs --bench; --quantity belongs to --timeline.
    schedlab(&db).args(["plot", "last"]).assert().code(2).stderr(predicate::str::contains("--bench"));
    schedlab(&db)
        .args(["plot", "last", "--bench", "pipe", "--quantity", "prio"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("required").and(predicate::str::contains("--timeline")));
}
