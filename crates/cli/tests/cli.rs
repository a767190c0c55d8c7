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

/// Run with `args`, expect failure with exactly one stderr line that
/// contains every fragment in `expect`, and no panic.
fn assert_clean_error(args: &[&str], expect: &[&str]) {
    let (_dir, db) = tmp_db();
    let out = schedlab(&db).args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} should fail, stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{args:?}: expected a one-line error, got:\n{stderr}");
    for frag in expect {
        assert!(stderr.contains(frag), "{args:?}: error lacks '{frag}':\n{stderr}");
    }
}

#[test]
fn malformed_load() {
    assert_clean_error(&["run", "pipe", "--load", "burn"], &["bad load 'burn'", "burn:2@nice=10"]);
    assert_clean_error(&["run", "pipe", "--load", "burn:2@nice=99"], &["bad load", "nice"]);
}

#[test]
fn load_beyond_the_machine() {
    assert_clean_error(
        &["run", "pipe", "--load", "hackbench:100000"],
        &["needs 4000000 tasks", "fewer hackbench groups"],
    );
}

#[test]
fn hackbench_beyond_the_machine() {
    assert_clean_error(&["run", "hackbench:groups=100000,fds=1000"], &["tasks", "lower groups="]);
}

#[test]
fn unknown_benchmark() {
    assert_clean_error(&["run", "pipez"], &["unknown benchmark 'pipez'", "pipe"]);
}

#[test]
fn unknown_policy() {
    assert_clean_error(&["run", "pipe", "--policy", "realtime"], &["unknown policy 'realtime'", "fifo"]);
}

#[test]
fn priority_out_of_range_for_fifo() {
    assert_clean_error(&["run", "pipe", "--policy", "fifo", "--prio", "100"], &["priority 100", "between 1 and 99"]);
}

#[test]
fn priority_for_a_non_rt_policy() {
    assert_clean_error(&["run", "pipe", "--prio", "10"], &["--prio 10 does not apply", "--nice"]);
}

#[test]
fn nice_out_of_range() {
    assert_clean_error(&["run", "pipe", "--nice", "25"], &["nice 25 is out of range", "-20 and 19"]);
}

#[test]
fn deadline_order_violated() {
    assert_clean_error(
        &["run", "pipe", "--policy", "deadline", "--dl-runtime", "2ms", "--dl-deadline", "1ms", "--dl-period", "1ms"],
        &["runtime <= deadline <= period"],
    );
}

#[test]
fn deadline_without_parameters() {
    assert_clean_error(&["run", "pipe", "--policy", "deadline"], &["--dl-runtime"]);
}

#[test]
fn absent_cpu() {
    assert_clean_error(&["run", "pipe", "--cpus", "4000"], &["4000", "online"]);
}

#[test]
fn malformed_cpu_list() {
    assert_clean_error(&["run", "pipe", "--cpus", "1-"], &["bad CPU list '1-'", "0,2-3"]);
}

#[test]
fn zero_repetitions() {
    assert_clean_error(&["run", "pipe", "--repeat", "0"], &["--repeat 0", "between 1 and"]);
}

#[test]
fn zero_loops() {
    assert_clean_error(&["run", "pipe:loops=0"], &["loops"]);
}

#[test]
fn negative_loops() {
    assert_clean_error(&["run", "pipe:loops=-5"], &["loops"]);
}

#[test]
fn absurd_thread_count() {
    assert_clean_error(&["run", "threads:alive=100000000"], &["alive"]);
}

#[test]
fn unknown_parameter() {
    assert_clean_error(&["run", "pipe:colour=blue"], &["colour", "placement"]);
}

#[test]
fn bad_parameter_value() {
    assert_clean_error(&["run", "pipe:placement=sideways"], &["sideways", "same-cpu"]);
}

#[test]
fn timeout_without_unit() {
    assert_clean_error(&["run", "pipe", "--timeout", "90"], &["--timeout", "no unit"]);
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

#[test]
fn show_unknown_run_and_empty_store() {
    let (_dir, db) = tmp_db();
    schedlab(&db).arg("show").assert().failure().stderr(predicate::str::contains("store is empty"));
    schedlab(&db).args(["show", "42"]).assert().failure().stderr(predicate::str::contains("no run matches '42'"));
}

/// FIFO without privilege: drop to nobody with RLIMIT_RTPRIO 0 before exec.
#[test]
fn fifo_without_privilege() {
    use std::os::unix::process::CommandExt;
    if unsafe { libc::geteuid() } != 0 {
        // Already unprivileged: the plain command must fail the same way.
        assert_clean_error(&["run", "pipe:loops=1000", "--policy", "fifo", "--repeat", "1"], &["privilege"]);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let db = dir.path().join("results.db");
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("schedlab"));
    cmd.args(["--db", db.to_str().unwrap(), "run", "pipe:loops=1000", "--policy", "fifo", "--repeat", "1"]);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let zero = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            if libc::setrlimit(libc::RLIMIT_RTPRIO, &zero) != 0
                || libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(65534) != 0
                || libc::setuid(65534) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "unprivileged FIFO must not succeed:\n{stdout}\n{stderr}");
    let all = format!("{stdout}{stderr}");
    assert!(all.contains("privilege") && all.contains("CAP_SYS_NICE"), "{all}");
    assert!(!all.contains("panicked"), "{all}");
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
    // The reader goes away before anything is written: like `schedlab list | head -0`.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .arg("list")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
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
fn raw_data_beyond_memory() {
    // SCHED_OTHER throughout, so the check is reached without privilege too.
    let other = ["--policy", "other"];
    assert_clean_error(
        &["run", "wakeup:samples=10000000,waiters=1000,classes=normal", other[0], other[1]],
        &["wakeup samples=10000000 with 1000 waiters", "TiB of memory", "MemAvailable", "lower samples="],
    );
    assert_clean_error(
        &["run", "wakeup:samples=10000000,classes=normal", "--repeat", "10000", other[0], other[1]],
        &["--repeat 10000", "TiB of memory", "or --repeat"],
    );
    assert_clean_error(
        &["run", "exectime:threads=4096,size=1048576", other[0], other[1]],
        &["exectime threads=4096 size=1048576 KiB", "TiB of memory", "lower threads= or size="],
    );
}

#[test]
fn replication_options_out_of_range() {
    assert_clean_error(&["run", "spawn", "--invocations", "0"], &["--invocations 0", "3 or more"]);
    assert_clean_error(&["calibrate", "--runs", "2"], &["--runs 2", "at least 3"]);
    assert_clean_error(&["sim", "--policy", "cfs", "--workload", "hogs", "--seeds", "0"], &["--seeds 0"]);
    assert_clean_error(&["compare", "1,,2", "3"], &["empty run", "A1,A2,A3"]);
}

#[test]
fn simulated_seeds_are_replicates_and_pooled_sides_compare() {
    let (_dir, db) = tmp_db();
    let sim = |seed: &str, seeds: &str| {
        let out = schedlab(&db)
            .args(["sim", "--policy", "cfs", "--workload", "wakeup[samples=40,interval_ns=2ms,groups=1]"])
            .args(["--duration", "1s", "--seed", seed, "--seeds", seeds])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let shown = sim("1", "5");
    assert!(shown.contains("5 inv"), "five seeds are five invocations:\n{shown}");
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

#[test]
fn simulator_options_are_checked_before_any_policy_is_built() {
    // Issue 12: --hz 0 divided by zero, --hz 4000000000 overflowed and
    // --cpus 20000000 allocated gigabytes, all inside policy construction.
    for policy in ["cfs", "eevdf", "linux24", "nicksched", "staircase"] {
        let base = ["sim", "--no-store", "--policy", policy, "--workload", "hackbench"];
        assert_clean_error(&[&base[..], &["--hz", "0"]].concat(), &["hz = 0", "tick rate between 10 and 100000"]);
        assert_clean_error(&[&base[..], &["--hz", "4000000000"]].concat(), &["tick rate"]);
        assert_clean_error(&[&base[..], &["--cpus", "20000000"]].concat(), &["cpus = 20000000", "1 to 1024"]);
    }
}

#[test]
fn run_names_and_selectors_that_would_mislead_are_refused() {
    // Issue 12: these names were accepted and then shadowed by, or shadowed, other selectors.
    for name in ["last", "7", "", "a,b"] {
        assert_clean_error(&["run", "spawn:count=10", "--name", name], &["--name", "choose another name"]);
        assert_clean_error(&["sim", "--policy", "cfs", "--workload", "hogs", "--name", name], &["--name"]);
    }
    let (_dir, db) = tmp_db();
    schedlab(&db).args(["sim", "--policy", "cfs", "--workload", "hogs", "--duration", "10ms"]).assert().success();
    let out = schedlab(&db).args(["show", "last~-1"]).output().unwrap();
    assert!(!out.status.success(), "last~-1 must not wrap to the newest run");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no run matches 'last~-1'"));
}
