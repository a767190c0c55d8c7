//! Stores beyond one file, end to end: `--db` URLs (PostgreSQL, and what is
//! not a store location), `push` and `pull` between stores. The tests that
//! need a PostgreSQL server start a throw-away cluster
//! (`schedlab_store::testing`) and are ignored unless asked for.

use schedlab_store::{testing, Store};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn schedlab(db: impl AsRef<OsStr>) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_schedlab"));
    c.arg("--db").arg(db).env_remove("SCHEDLAB_DB").env_remove("SCHEDLAB_BUSY_TIMEOUT");
    c.env_remove("SCHEDLAB_STORE_PATIENCE");
    for v in ["PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGPASSFILE", "PGDATABASE"] {
        c.env_remove(v);
    }
    c
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn ok(c: &mut Command) -> (String, String) {
    let out = c.output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{c:?} failed ({}):\n{stdout}\n{stderr}", out.status);
    (stdout, stderr)
}

/// Exit status 2 with a one-line error: that line.
fn refused(c: &mut Command) -> String {
    let out = c.output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{c:?}:\n{stdout}\n{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{c:?}: expected a one-line error, got:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    lines[0].to_string()
}

/// Store one simulated run named `name` in `db`.
fn sim(db: impl AsRef<OsStr>, name: &str) {
    ok(schedlab(db)
        .args(["sim", "--policy", "cfs", "--workload", "hogs", "--duration", "10ms", "--seeds", "1"])
        .args(["--name", name]));
}

/// The run names `runs` lists, newest first.
fn names(db: impl AsRef<OsStr>) -> Vec<String> {
    let (stdout, _) = ok(schedlab(db).args(["runs", "--limit", "1000"]));
    let mut found: Vec<String> = stdout
        .lines()
        .flat_map(|l| l.split_whitespace())
        .filter(|w| w.starts_with("r-") || w.contains('@'))
        .map(String::from)
        .collect();
    found.dedup();
    found
}

fn tmp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    (dir, db)
}

fn count(db: &Path, sql: &str) -> i64 {
    rusqlite::Connection::open(db).unwrap().query_row(sql, [], |r| r.get(0)).unwrap()
}

#[test]
fn a_url_of_another_kind_is_an_error_not_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let line = refused(schedlab("mysql://root:secret@db/x").arg("runs").current_dir(dir.path()));
    assert!(line.contains("--db") && line.contains("not 'mysql'") && line.contains("./mysql://"), "{line}");
    assert!(!line.contains("secret"), "{line}");
    // Nor from the environment, for a writing command.
    let mut c = Command::new(env!("CARGO_BIN_EXE_schedlab"));
    c.env("SCHEDLAB_DB", "sqlite://x.db").args(["sim", "--policy", "cfs", "--workload", "hogs", "--duration", "10ms"]);
    let line = refused(c.current_dir(dir.path()));
    assert!(line.contains("$SCHEDLAB_DB"), "{line}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing was created");
}

#[test]
fn a_postgres_url_is_never_taken_for_a_file() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens on this port: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("postgres://alice:topsecret@127.0.0.1:{port}/lab");
    for args in [&["runs"][..], &["sim", "--policy", "cfs", "--workload", "hogs", "--duration", "10ms"]] {
        let line = refused(schedlab(&url).args(args).current_dir(dir.path()));
        assert!(line.contains(&format!("cannot reach the PostgreSQL server at 127.0.0.1:{port}")), "{line}");
        assert!(!line.contains("topsecret"), "{line}");
    }
    assert!(!dir.path().join("postgres:").exists(), "no SQLite store under a folder named postgres:");
    let line = refused(schedlab("postgres://alice:topsecret@host:notaport/lab").arg("runs"));
    assert!(line.contains("postgres://USER@HOST") && !line.contains("topsecret"), "{line}");
}

#[test]
fn push_copies_each_run_once_and_completes_what_an_earlier_push_left() {
    let (_dir, laptop) = tmp();
    let team = laptop.with_file_name("team.db");
    for n in ["r-a", "r-b", "r-c"] {
        sim(&laptop, n);
    }
    // A push that stopped after one run (here: one named), then the whole.
    let (stdout, _) = ok(schedlab(&laptop).args(["push", "--to"]).arg(&team).arg("r-a"));
    assert!(stdout.contains("pushed 1 run(s)"), "{stdout}");
    let (stdout, _) = ok(schedlab(&laptop).args(["push", "--to"]).arg(&team));
    assert!(stdout.contains("pushed 2 run(s)") && stdout.contains("1 already there"), "{stdout}");
    let (stdout, _) = ok(schedlab(&laptop).args(["push", "--to"]).arg(&team));
    assert!(stdout.contains("pushed 0 run(s)") && stdout.contains("3 already there"), "{stdout}");
    assert_eq!(count(&team, "SELECT count(*) FROM runs"), 3);
    assert_eq!(count(&team, "SELECT count(*) FROM runs t WHERE t.uuid IN (SELECT uuid FROM runs)"), 3, "uuids kept");
    let same = |sql: &str| (count(&laptop, sql), count(&team, sql));
    let (a, b) = same("SELECT count(*) FROM metrics");
    assert_eq!(a, b, "every metric arrived");
    // The copies read back as the originals do.
    let (orig, _) = ok(schedlab(&laptop).args(["show", "r-b"]));
    let (copy, _) = ok(schedlab(&team).args(["show", "r-b"]));
    let body = |s: &str| s.lines().skip(1).collect::<Vec<_>>().join("\n");
    assert_eq!(body(&orig), body(&copy));
}

#[test]
fn pull_brings_runs_back_and_a_taken_name_gets_its_host() {
    let (_dir, team) = tmp();
    let mine = team.with_file_name("mine.db");
    sim(&team, "r-base");
    sim(&team, "r-new");
    sim(&mine, "r-base");
    let (stdout, stderr) = ok(schedlab(&mine).args(["pull", "--from"]).arg(&team).arg("r-base,r-new"));
    assert!(stdout.contains("pulled 2 run(s)"), "{stdout}");
    assert!(stderr.contains("'r-base' is stored") && stderr.contains("as 'r-base@"), "{stderr}");
    assert_eq!(names(&mine).len(), 3, "{:?}", names(&mine));
    let (stdout, _) = ok(schedlab(&mine).args(["pull", "--from"]).arg(&team));
    assert!(stdout.contains("pulled 0 run(s)") && stdout.contains("2 already there"), "{stdout}");
    // The same store on both ends is refused.
    let line = refused(schedlab(&mine).args(["push", "--to"]).arg(&mine));
    assert!(line.contains("is the store the runs are in"), "{line}");
    // An unknown selector names itself.
    let line = refused(schedlab(&mine).args(["pull", "--from"]).arg(&team).arg("nope"));
    assert!(line.contains("'nope'"), "{line}");
}

// --- against a real server -------------------------------------------------

#[test]
#[ignore = "needs PostgreSQL (initdb/pg_ctl): CI installs postgresql"]
fn every_command_works_on_a_postgres_store_and_push_and_pull_meet_there() {
    let c = testing::cluster();
    let db = c.create_database();
    let url = c.admin_url(&db);
    sim(&url, "r-one");
    sim(&url, "r-two");
    let (stdout, _) = ok(schedlab(&url).arg("runs"));
    assert!(stdout.contains("r-one") && stdout.contains("r-two"), "{stdout}");
    let (stdout, _) = ok(schedlab(&url).args(["show", "r-one"]));
    assert!(stdout.contains("sim:hogs"), "{stdout}");
    ok(schedlab(&url).args(["compare", "r-one", "r-two"]));
    ok(schedlab(&url).args(["history", "sim:hogs"]));
    // The location is shown without the password.
    let (stdout, stderr) = ok(schedlab(&url).arg("runs"));
    assert!(!stdout.contains("admin-") && !stderr.contains("admin-"));

    // A laptop's runs go up, and come back down into another laptop.
    let (_dir, laptop) = tmp();
    sim(&laptop, "r-laptop");
    let (stdout, _) = ok(schedlab(&laptop).args(["push", "--to", &url]));
    assert!(stdout.contains("pushed 1 run(s)") && !stdout.contains("admin-"), "{stdout}");
    ok(schedlab(&laptop).args(["push", "--to", &url]));
    let other = laptop.with_file_name("other.db");
    let (stdout, _) = ok(schedlab(&other).args(["pull", "--from", &url]));
    assert!(stdout.contains("pulled 3 run(s)"), "{stdout}");
    assert_eq!(count(&other, "SELECT count(*) FROM runs"), 3);
    // Stored command lines hold no password.
    let stored = count(&other, "SELECT count(*) FROM runs WHERE command_line LIKE '%admin-%'");
    assert_eq!(stored, 0, "a password was stored with a run");
    // rm works there too.
    ok(schedlab(&url).args(["rm", "r-two"]));
    let (stdout, _) = ok(schedlab(&url).arg("runs"));
    assert!(!stdout.contains("r-two") && stdout.contains("r-laptop"), "{stdout}");
}

#[test]
#[ignore = "needs PostgreSQL (initdb/pg_ctl): CI installs postgresql"]
fn credentials_come_from_the_password_file_and_never_show() {
    let c = testing::cluster();
    let db = c.create_database();
    c.create_role("frank", "filed-secret");
    c.admin(&db).batch_execute("CREATE SCHEMA schedlab AUTHORIZATION frank").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let passfile = dir.path().join("pgpass");
    std::fs::write(&passfile, format!("127.0.0.1:{}:{db}:frank:filed-secret\n", c.port())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&passfile, std::fs::Permissions::from_mode(0o600)).unwrap();
    let url = c.url("frank", None, &db);
    ok(schedlab(&url).env("PGPASSFILE", &passfile).args([
        "sim",
        "--policy",
        "cfs",
        "--workload",
        "hogs",
        "--duration",
        "10ms",
    ]));
    // $SCHEDLAB_DB names the store as well as --db does.
    let mut env_only = Command::new(env!("CARGO_BIN_EXE_schedlab"));
    env_only.env("SCHEDLAB_DB", &url).env("PGPASSFILE", &passfile).arg("runs");
    let (stdout, _) = ok(&mut env_only);
    assert!(stdout.contains("sim"), "{stdout}");
    // Without the file: refused, and the message says where a password goes.
    let line = refused(schedlab(&url).arg("runs"));
    assert!(line.contains("refused user 'frank'") && line.contains(".pgpass"), "{line}");
    // A wrong password in the URL is refused without being shown.
    let line = refused(schedlab(c.url("frank", Some("not-it"), &db)).arg("runs"));
    assert!(line.contains("refused user 'frank'") && !line.contains("not-it"), "{line}");
}

#[test]
#[ignore = "needs PostgreSQL (initdb/pg_ctl): CI installs postgresql"]
fn a_newer_schema_on_the_server_is_refused_with_advice() {
    let c = testing::cluster();
    let db = c.create_database();
    let url = c.admin_url(&db);
    sim(&url, "r-x");
    c.admin(&db).batch_execute("UPDATE schedlab.store_meta SET schema_version = schema_version + 1").unwrap();
    let line = refused(schedlab(&url).arg("runs"));
    assert!(line.contains("newer schedlab") && line.contains("upgrade schedlab"), "{line}");
}

#[test]
fn runs_are_selected_by_host_and_kernel_and_show_them_when_they_differ() {
    let (_dir, db) = tmp();
    sim(&db, "r-seed");
    // The same run as three hosts under three kernels would have stored it.
    let mut store = schedlab_store::SqliteStore::open(&db).unwrap();
    let seed = store.load_run(store.resolve("r-seed").unwrap()).unwrap();
    for (host, kernel, name) in [("alpha", "6.18", "r-a"), ("alpha", "6.18.4-rt", "r-b"), ("beta", "6.180", "r-c")] {
        let env = schedlab_core::Environment { kernel_release: Some(kernel.into()), ..Default::default() };
        let run =
            schedlab_core::Run { host: host.into(), name: Some(name.into()), env_start: Some(env), ..seed.clone() };
        store.insert_run(&run).unwrap();
    }
    drop(store);
    let listed = |args: &[&str]| ok(schedlab(&db).arg("runs").args(args)).0;
    let all = listed(&[]);
    assert!(all.contains("host") && all.contains("kernel") && all.contains("6.18.4-rt"), "{all}");
    let alpha = listed(&["--host", "alpha"]);
    assert!(alpha.contains("r-a") && alpha.contains("r-b") && !alpha.contains("r-c"), "{alpha}");
    let k = listed(&["--kernel", "6.18"]);
    assert!(k.contains("r-a") && k.contains("r-b") && !k.contains("r-c") && !k.contains("r-seed"), "{k}");
    let none = listed(&["--host", "gamma"]);
    assert!(none.contains("no run") && none.contains("matches --host/--kernel"), "{none}");
    // One host under one kernel: no such columns.
    let one = listed(&["--host", "alpha", "--kernel", "6.18.4-rt"]);
    assert!(one.contains("r-b") && !one.contains("kernel"), "{one}");
}

// --- labels, groups and archives --------------------------------------------

/// Store a simulated run of `policy` with these labels.
fn sim_labelled(db: impl AsRef<OsStr>, policy: &str, labels: &[&str]) {
    let mut c = schedlab(db);
    c.args(["sim", "--policy", policy, "--workload", "hogs", "--duration", "10ms", "--seeds", "3"]);
    for l in labels {
        c.args(["--label", l]);
    }
    ok(&mut c);
}

/// A refused argument (clap's usage error): exit 2, the reason on the first line.
fn refused_arg(c: &mut Command) -> String {
    let out = c.output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{c:?}:\n{stdout}\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr.lines().next().unwrap_or_default().to_string()
}

#[test]
fn labels_are_kept_shown_and_select_runs() {
    let (_dir, db) = tmp();
    sim_labelled(&db, "cfs", &["kernel=6.18-rt", "rack=r1"]);
    sim_labelled(&db, "eevdf", &["kernel=6.18"]);
    let (all, _) = ok(schedlab(&db).arg("runs"));
    assert!(all.contains("labels") && all.contains("kernel=6.18-rt rack=r1"), "{all}");
    let (rt, _) = ok(schedlab(&db).args(["runs", "--label", "kernel=6.18-rt"]));
    assert!(rt.contains("rack=r1") && !rt.contains("kernel=6.18 "), "{rt}");
    let (none, _) = ok(schedlab(&db).args(["runs", "--label", "kernel=6.18-rt", "--label", "rack=r2"]));
    assert!(none.contains("no run") && none.contains("--label"), "{none}");
    let (shown, _) = ok(schedlab(&db).args(["show", "1"]));
    assert!(shown.contains("labels: kernel=6.18-rt rack=r1"), "{shown}");
    // Bad labels are refused before anything runs, each with the form expected.
    for bad in ["noequals", "=v", "k=", "bad key=v", "k=<\u{7}>"] {
        let line = refused_arg(schedlab(&db).args(["sim", "--policy", "cfs", "--workload", "hogs", "--label", bad]));
        assert!(line.contains("KEY=VALUE"), "{bad}: {line}");
    }
    let line = refused_arg(schedlab(&db).args(["runs", "--label", "x"]));
    assert!(line.contains("has no '='"), "{line}");
    assert_eq!(count(&db, "SELECT count(*) FROM runs"), 2, "a refused run stored nothing");
}

#[test]
fn history_and_compare_by_pool_each_group_of_runs() {
    let (_dir, db) = tmp();
    for (policy, batch) in [("cfs", "b1"), ("cfs", "b2"), ("eevdf", "b1"), ("eevdf", "b2")] {
        sim_labelled(&db, policy, &[&format!("sched={policy}"), &format!("batch={batch}")]);
    }
    sim_labelled(&db, "cfs", &[]);
    let (long, stderr) = ok(schedlab(&db).env("COLUMNS", "80").args(["history", "sim:hogs", "--by", "label:sched"]));
    assert!(long.contains("sched=cfs (2 runs)") && long.contains("sched=eevdf (2 runs)"), "{long}");
    assert!(long.contains("(baseline)") && long.contains("[95% CI]"), "{long}");
    assert!(stderr.contains("1 run(s) without a sched"), "{stderr}");
    assert!(long.lines().all(|l| l.chars().count() <= 80), "fits 80 columns:\n{long}");
    // Two keys, and a selector narrowing the runs first.
    let (two, _) = ok(schedlab(&db).args(["compare", "--by", "sched,batch"]));
    assert!(two.contains("4 groups") && two.contains("sched=eevdf · batch=b2 (1 run)"), "{two}");
    let (narrow, _) = ok(schedlab(&db).args(["compare", "--by", "batch", "--label", "sched=cfs"]));
    assert!(narrow.contains("batch=b1 (1 run)") && !narrow.contains("eevdf"), "{narrow}");
    let (json, _) = ok(schedlab(&db).args(["history", "sim:hogs", "--by", "sched", "--export-json", "-"]));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["runs"].as_array().map(Vec::len), Some(2), "{json}");
    // One group is not a comparison; a key no run has says so.
    let line = refused(schedlab(&db).args(["compare", "--by", "host"]));
    assert!(line.contains("makes 1 group(s)") && line.contains("needs two"), "{line}");
    let line = refused_arg(schedlab(&db).args(["history", "sim:hogs", "--by", "label:"]));
    assert!(line.contains("--by"), "{line}");
    let line = refused(schedlab(&db).args(["compare", "1", "2", "--host", "x"]));
    assert!(line.contains("--by"), "{line}");
}

#[test]
fn an_archive_round_trips_and_importing_it_again_adds_nothing() {
    let (dir, db) = tmp();
    sim_labelled(&db, "cfs", &["kernel=6.18-rt"]);
    sim_labelled(&db, "eevdf", &[]);
    let archive = dir.path().join("all.jsonl");
    let (said, _) = ok(schedlab(&db).args(["export", "--jsonl"]).arg(&archive));
    assert!(said.contains("exported 2 run(s)"), "{said}");
    let lines = std::fs::read_to_string(&archive).unwrap();
    assert_eq!(lines.lines().count(), 2);
    let other = dir.path().join("other.db");
    let (said, _) = ok(schedlab(&other).arg("import").arg(&archive));
    assert!(said.contains("imported 2 run(s)"), "{said}");
    let (said, _) = ok(schedlab(&other).arg("import").arg(&archive));
    assert!(said.contains("imported 0 run(s)") && said.contains("2 already there"), "{said}");
    let uuids = |db: &Path| -> Vec<String> {
        let conn = rusqlite::Connection::open(db).unwrap();
        let mut s = conn.prepare("SELECT uuid FROM runs ORDER BY uuid").unwrap();
        s.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
    };
    assert_eq!(uuids(&db), uuids(&other), "the same runs, known by the same ids");
    assert_eq!(count(&other, "SELECT count(*) FROM run_labels WHERE key = 'kernel' AND value = '6.18-rt'"), 1);
    let (a, _) = ok(schedlab(&db).args(["show", "1", "--export-json", "-"]));
    let (b, _) = ok(schedlab(&other).args(["show", "1", "--export-json", "-"]));
    assert_eq!(a, b, "the imported run reads as the exported one");
    // Selected runs only.
    let some = dir.path().join("some.jsonl");
    ok(schedlab(&db).args(["export", "--label", "kernel=6.18-rt", "--jsonl"]).arg(&some));
    assert_eq!(std::fs::read_to_string(&some).unwrap().lines().count(), 1);
    // A bad line: named by its number, and nothing of the archive is stored.
    let broken = dir.path().join("broken.jsonl");
    std::fs::write(&broken, format!("{lines}{{\"uuid\": 3}}\n")).unwrap();
    let third = dir.path().join("third.db");
    let line = refused(schedlab(&third).arg("import").arg(&broken));
    assert!(line.contains("broken.jsonl line 3") && line.contains("nothing was imported"), "{line}");
    assert!(!third.exists(), "no store was made for a refused archive");
}

#[test]
#[ignore = "needs PostgreSQL (initdb/pg_ctl): CI installs postgresql"]
fn labels_groups_and_archives_work_on_a_postgres_store() {
    let c = testing::cluster();
    let url = c.admin_url(&c.create_database());
    let (dir, laptop) = tmp();
    for (policy, rack) in [("cfs", "r1"), ("cfs", "r2"), ("eevdf", "r1")] {
        sim_labelled(&laptop, policy, &[&format!("sched={policy}"), &format!("rack={rack}")]);
    }
    ok(schedlab(&laptop).args(["push", "--to", &url]));
    let (listed, _) = ok(schedlab(&url).args(["runs", "--label", "rack=r1"]));
    assert!(listed.contains("sched=cfs") && listed.contains("sched=eevdf") && !listed.contains("rack=r2"), "{listed}");
    let (long, _) = ok(schedlab(&url).args(["history", "sim:hogs", "--by", "sched"]));
    assert!(long.contains("sched=cfs (2 runs)") && long.contains("sched=eevdf (1 run)"), "{long}");
    let archive = dir.path().join("team.jsonl");
    ok(schedlab(&url).args(["export", "--jsonl"]).arg(&archive));
    let (said, _) = ok(schedlab(&url).arg("import").arg(&archive));
    assert!(said.contains("imported 0 run(s)") && said.contains("3 already there"), "{said}");
    let fresh = c.admin_url(&c.create_database());
    let (said, _) = ok(schedlab(&fresh).arg("import").arg(&archive));
    assert!(said.contains("imported 3 run(s)"), "{said}");
    let (listed, _) = ok(schedlab(&fresh).args(["runs", "--label", "sched=cfs"]));
    assert_eq!(listed.matches("rack=").count(), 2, "{listed}");
}
