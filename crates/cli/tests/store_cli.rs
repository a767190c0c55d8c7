//! The store under stress, end to end: several processes at once, a lock
//! held by another process, stores that cannot be written or are not
//! stores at all, and a run whose data cannot be decoded.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn schedlab(db: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_schedlab"));
    c.arg("--db").arg(db).env_remove("SCHEDLAB_DB").env_remove("SCHEDLAB_BUSY_TIMEOUT");
    c.env_remove("SCHEDLAB_STORE_PATIENCE");
    c
}

const SIM: &[&str] = &["sim", "--policy", "cfs", "--workload", "hogs", "--duration", "10ms", "--seeds", "1"];

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Run, expect success, return stdout and stderr.
fn ok(c: &mut Command) -> (String, String) {
    let out = c.output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{c:?} failed ({}):\n{stdout}\n{stderr}", out.status);
    (stdout, stderr)
}

/// Run, expect exit status 2 with a one-line error; return that line.
fn refused(c: &mut Command) -> String {
    let out = c.output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{c:?}:\n{stdout}\n{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{c:?}: expected a one-line error, got:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    lines[0].to_string()
}

fn tmp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    (dir, db)
}

fn count(db: &Path, sql: &str) -> i64 {
    rusqlite::Connection::open(db).unwrap().query_row(sql, [], |r| r.get(0)).unwrap()
}

/// A connection to `db` that holds its write lock until dropped or committed.
fn hold_lock(db: &Path) -> rusqlite::Connection {
    let c = rusqlite::Connection::open(db).unwrap();
    c.busy_timeout(Duration::from_secs(30)).unwrap();
    c.execute_batch("BEGIN EXCLUSIVE").unwrap();
    c
}

#[test]
fn concurrent_processes_create_one_store_and_every_run_lands() {
    const PROCESSES: usize = 6;
    for round in 0..2 {
        let (_dir, db) = tmp();
        let children: Vec<_> = (0..PROCESSES)
            .map(|_| schedlab(&db).args(SIM).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap())
            .collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            let (stdout, stderr) = text(&out);
            assert!(out.status.success(), "round {round}: a concurrent sim failed:\n{stdout}\n{stderr}");
        }
        assert_eq!(count(&db, "SELECT count(*) FROM runs WHERE status = 'complete'"), PROCESSES as i64);
        assert_eq!(count(&db, "SELECT count(*) FROM benchmarks WHERE state = 'complete'"), PROCESSES as i64);
    }
}

#[test]
fn a_lock_held_past_the_busy_timeout_does_not_lose_a_sim_result() {
    let (_dir, db) = tmp();
    ok(schedlab(&db).args(SIM));
    let holder = hold_lock(&db);
    let child = schedlab(&db)
        .args(SIM)
        .env("SCHEDLAB_BUSY_TIMEOUT", "300ms")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Several busy timeouts long.
    std::thread::sleep(Duration::from_secs(2));
    holder.execute_batch("COMMIT").unwrap();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "the sim failed behind the lock:\n{stdout}\n{stderr}");
    assert!(stderr.contains("is busy") && stderr.contains("waiting"), "it must say that it waits: {stderr}");
    assert!(stdout.contains("stored as run #2"), "{stdout}");
    assert_eq!(count(&db, "SELECT count(*) FROM runs WHERE status = 'complete'"), 2);
}

/// The files a store's writers left beside it for `schedlab import`.
fn unsaved_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".unsaved-"))
        .collect();
    files.sort();
    files
}

#[test]
fn a_store_busy_past_patience_gets_the_sim_result_as_a_file_that_import_takes() {
    let (dir, db) = tmp();
    ok(schedlab(&db).args(SIM));
    let holder = hold_lock(&db);
    let out = schedlab(&db)
        .args(SIM)
        .env("SCHEDLAB_BUSY_TIMEOUT", "200ms")
        .env("SCHEDLAB_STORE_PATIENCE", "1s")
        .output()
        .unwrap();
    drop(holder);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "not stored is a store error:\n{stdout}\n{stderr}");
    let files = unsaved_files(dir.path());
    assert_eq!(files.len(), 1, "{stderr}");
    let file = files[0].to_str().unwrap();
    assert!(stderr.contains(file) && stderr.contains("schedlab import"), "the message names the file: {stderr}");
    assert!(stdout.contains("sim:hogs"), "the result is still shown: {stdout}");
    ok(schedlab(&db).args(["import", file]));
    assert_eq!(count(&db, "SELECT count(*) FROM runs WHERE kind = 'sim' AND status = 'complete'"), 2);
}

#[test]
fn a_live_run_whose_store_stays_busy_is_kept_whole_in_a_file() {
    let (dir, db) = tmp();
    // A benchmark of fixed duration, so the lock is surely taken while it runs.
    let child = schedlab(&db)
        .args(["run", "shell:copies=1,duration=700", "--invocations", "2", "--repeat", "1", "--warmup", "0"])
        .env("SCHEDLAB_BUSY_TIMEOUT", "200ms")
        .env("SCHEDLAB_STORE_PATIENCE", "500ms")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !db.exists() || count_or_zero(&db, "SELECT count(*) FROM runs") == 0 {
        assert!(Instant::now() < deadline, "the run never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let holder = hold_lock(&db);
    let out = child.wait_with_output().unwrap();
    drop(holder);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    let files = unsaved_files(dir.path());
    assert_eq!(files.len(), 1, "{stderr}");
    let file = files[0].to_str().unwrap();
    let last = stderr.lines().last().unwrap_or_default();
    assert!(last.contains(file) && last.contains("schedlab rm 1"), "the last line says what to do: {stderr}");
    let saved: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    assert_eq!(saved["benchmarks"].as_array().unwrap().len(), 2, "the file holds every invocation");
    assert_eq!(saved["status"], "complete");
    // The store's partial copy is replaced by the whole run.
    ok(schedlab(&db).args(["rm", "1"]));
    ok(schedlab(&db).args(["import", file]));
    assert_eq!(count(&db, "SELECT count(*) FROM runs"), 1);
    assert_eq!(count(&db, "SELECT count(*) FROM benchmarks WHERE state = 'complete'"), 2);
}

fn count_or_zero(db: &Path, sql: &str) -> i64 {
    rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .and_then(|c| c.query_row(sql, [], |r| r.get(0)))
        .unwrap_or(0)
}

#[test]
fn reading_commands_read_a_store_this_user_cannot_write() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let (dir, db) = tmp();
    ok(schedlab(&db).args(SIM));
    assert!(!Path::new(&format!("{}-wal", db.display())).exists(), "the writer closed the store cleanly");
    let root = unsafe { libc::geteuid() } == 0;
    // Another user's store in another user's directory: root plays that
    // user by running schedlab as nobody; anyone else by losing write access.
    let (dir_mode, file_mode) = if root { (0o755, 0o644) } else { (0o555, 0o444) };
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(file_mode)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(dir_mode)).unwrap();
    let as_other = |args: &[&str]| {
        let mut c = schedlab(&db);
        c.args(args);
        if root {
            // SAFETY: only async-signal-safe calls between fork and exec.
            unsafe {
                c.pre_exec(|| {
                    if libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(65534) != 0 || libc::setuid(65534) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        c
    };
    let (stdout, _) = ok(&mut as_other(&["runs"]));
    assert!(stdout.contains("sim:hogs"), "{stdout}");
    ok(&mut as_other(&["show", "last"]));
    let line = refused(&mut as_other(SIM));
    assert!(line.contains("read-only") && line.contains("--db PATH"), "{line}");
    // An old schema cannot be upgraded by this user: it says so.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    rusqlite::Connection::open(&db).unwrap().pragma_update(None, "user_version", 1).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(file_mode)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(dir_mode)).unwrap();
    let line = refused(&mut as_other(&["runs"]));
    assert!(line.contains("schema 1, older") && line.contains("cannot be upgraded"), "{line}");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_reading_command_creates_nothing() {
    let (dir, _) = tmp();
    let db = dir.path().join("no/such/dir/x.db");
    let (stdout, _) = ok(schedlab(&db).arg("runs"));
    assert!(stdout.contains("there is no store at") && stdout.contains("schedlab sim"), "{stdout}");
    let line = refused(schedlab(&db).arg("show"));
    assert!(line.contains("there is no store at"), "{line}");
    refused(schedlab(&db).args(["compare", "1", "2"]));
    refused(schedlab(&db).args(["rm", "1"]));
    assert!(!dir.path().join("no").exists(), "a reading command created directories");
}

#[test]
fn files_that_are_not_schedlab_stores_are_refused_and_left_alone() {
    let (dir, _) = tmp();
    let foreign = dir.path().join("notes.db");
    rusqlite::Connection::open(&foreign).unwrap().execute_batch("CREATE TABLE notes (body TEXT);").unwrap();
    for args in [&["runs"][..], SIM] {
        let line = refused(schedlab(&foreign).args(args));
        assert!(line.contains("notes.db is not a schedlab store"), "{line}");
    }
    assert_eq!(count(&foreign, "SELECT count(*) FROM sqlite_master"), 1, "no table was added");

    let unversioned = dir.path().join("unversioned.db");
    let (_d, good) = tmp();
    ok(schedlab(&good).args(SIM));
    std::fs::copy(&good, &unversioned).unwrap();
    rusqlite::Connection::open(&unversioned).unwrap().pragma_update(None, "user_version", 0).unwrap();
    for args in [&["runs"][..], SIM] {
        let line = refused(schedlab(&unversioned).args(args));
        assert!(line.contains("unversioned.db") && line.contains("no store schema version"), "{line}");
        assert!(!line.contains("CREATE"), "{line}");
    }
}

#[test]
fn locked_and_damaged_stores_each_get_their_own_hint() {
    let (dir, db) = tmp();
    ok(schedlab(&db).args(SIM));
    let holder = hold_lock(&db);
    let line = refused(schedlab(&db).args(["rm", "1"]).env("SCHEDLAB_BUSY_TIMEOUT", "200ms"));
    drop(holder);
    assert!(line.contains("locked by another process") && !line.contains("writable"), "{line}");
    assert_eq!(count(&db, "SELECT count(*) FROM runs"), 1, "nothing was removed");

    let damaged = dir.path().join("damaged.db");
    ok(schedlab(&damaged).args(SIM));
    rusqlite::Connection::open(&damaged).unwrap().pragma_update(None, "journal_mode", "DELETE").unwrap();
    // Scribble over every page but the first, which holds the schema.
    let mut bytes = std::fs::read(&damaged).unwrap();
    for b in &mut bytes[4096..] {
        *b = 0x5a;
    }
    std::fs::write(&damaged, bytes).unwrap();
    let line = refused(schedlab(&damaged).arg("runs"));
    assert!(line.contains("is damaged") && line.contains(".recover") && !line.contains("writable"), "{line}");
}

#[test]
fn an_undecodable_run_breaks_no_command_about_other_runs_and_rm_removes_it() {
    let (dir, db) = tmp();
    let samples = dir.path().join("samples.txt");
    std::fs::write(&samples, "10\n12\n11\n").unwrap();
    for name in ["a", "broken", "c"] {
        ok(schedlab(&db).args(["import", "--format", "samples", "--unit", "us", "--name", name]).arg(&samples));
    }
    let edit = |sql: &str| rusqlite::Connection::open(&db).unwrap().execute(sql, []).unwrap();
    edit("UPDATE benchmarks SET params = '{bad' WHERE run_id = 2");
    // history reads the case summaries stored beside the raw data.
    edit("UPDATE cases SET params = '{bad' WHERE run_id = 2");
    // The listing reads only the runs' own rows: it shows the run, so that it can be removed.
    let (stdout, _) = ok(schedlab(&db).arg("runs"));
    assert!(stdout.contains(" broken "), "{stdout}");
    let (_, stderr) = ok(schedlab(&db).args(["history", "samples"]));
    assert_eq!(stderr.lines().count(), 1, "one warning for the one bad run: {stderr}");
    assert!(stderr.contains("run #2 (broken)"), "{stderr}");
    ok(schedlab(&db).args(["show", "a"]));
    ok(schedlab(&db).args(["compare", "a", "c"]));
    let line = refused(schedlab(&db).args(["show", "broken"]));
    assert!(line.contains("run #2 (broken) cannot be read") && line.contains("schedlab rm 2"), "{line}");

    // A run row that cannot be decoded is left out of the listing, with a warning.
    edit("UPDATE runs SET kind = 'nonsense' WHERE id = 2");
    let (stdout, stderr) = ok(schedlab(&db).arg("runs"));
    assert!(stdout.contains(" a ") && stdout.contains(" c ") && !stdout.contains("broken"), "{stdout}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("run #2 (broken)") && stderr.contains("schedlab rm 2"), "{stderr}");

    // An unknown selector removes nothing, not even the runs named before it.
    let line = refused(schedlab(&db).args(["rm", "broken", "nope"]));
    assert!(line.contains("no run matches 'nope'"), "{line}");
    assert_eq!(count(&db, "SELECT count(*) FROM runs"), 3);
    let (stdout, _) = ok(schedlab(&db).args(["rm", "broken", "2"]));
    assert!(
        stdout.contains("removed run #2 'broken' (nonsense complete)") && stdout.contains("1 metric(s)"),
        "{stdout}"
    );
    assert_eq!(stdout.lines().count(), 1, "one run, named twice: {stdout}");
    assert_eq!(count(&db, "SELECT count(*) FROM benchmarks WHERE run_id = 2"), 0);
    let (_, stderr) = ok(schedlab(&db).arg("runs"));
    assert!(stderr.is_empty(), "{stderr}");
}
