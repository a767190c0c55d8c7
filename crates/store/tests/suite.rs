//! One set of store tests, run against both backends: SQLite (always) and
//! PostgreSQL (ignored unless asked for: each test needs a throw-away
//! cluster, see `schedlab_store::testing`, and panics when PostgreSQL is
//! missing). What only one backend has (SQLite's files, locks and
//! damage; PostgreSQL's URLs and grants) is tested beside that backend.

use schedlab_core::{BenchResult, BenchStatus, Direction, Environment, Metric, RunStatus, Unit};
use schedlab_store::{
    testing, Access, Inserted, NoiseProfileRecord, PageStart, RemovedRun, RunFilter, SqliteStore, Store, StoreError,
    Uuid, DEFAULT_BUSY_TIMEOUT, STORE_SCHEMA_VERSION,
};
use std::path::PathBuf;

/// A place for one store, empty at first, and raw access to its tables.
trait Backend: Sync {
    fn open_with(&self, access: Access) -> schedlab_store::Result<Box<dyn Store>>;
    fn open(&self) -> Box<dyn Store> {
        self.open_with(Access::Create).unwrap_or_else(|e| panic!("{e}"))
    }
    /// Run SQL on the store's tables, beside schedlab.
    fn exec(&self, sql: &str);
    fn count(&self, table: &str) -> i64;
    /// Stamp the store with another schema version.
    fn set_version(&self, version: i64);
    /// Whether anything of a store exists there.
    fn exists(&self) -> bool;
}

struct Sqlite {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Sqlite {
    fn new() -> Sqlite {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        Sqlite { _dir: dir, path }
    }

    fn conn(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(&self.path).unwrap()
    }
}

impl Backend for Sqlite {
    fn open_with(&self, access: Access) -> schedlab_store::Result<Box<dyn Store>> {
        Ok(Box::new(SqliteStore::open_with(&self.path, access, DEFAULT_BUSY_TIMEOUT)?))
    }
    fn exec(&self, sql: &str) {
        self.conn().execute_batch(sql).unwrap();
    }
    fn count(&self, table: &str) -> i64 {
        self.conn().query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0)).unwrap()
    }
    fn set_version(&self, version: i64) {
        self.conn().pragma_update(None, "user_version", version).unwrap();
    }
    fn exists(&self) -> bool {
        self.path.exists()
    }
}

struct Postgres {
    database: String,
}

impl Postgres {
    fn new() -> Postgres {
        Postgres { database: testing::cluster().create_database() }
    }

    fn admin(&self) -> ::postgres::Client {
        testing::cluster().admin(&self.database)
    }
}

impl Backend for Postgres {
    fn open_with(&self, access: Access) -> schedlab_store::Result<Box<dyn Store>> {
        let url = testing::cluster().admin_url(&self.database);
        Ok(Box::new(schedlab_store::PgStore::open(&url, access, DEFAULT_BUSY_TIMEOUT)?))
    }
    fn exec(&self, sql: &str) {
        self.admin().batch_execute(&format!("SET search_path = schedlab; {sql}")).unwrap();
    }
    fn count(&self, table: &str) -> i64 {
        self.admin().query_one(&format!("SELECT count(*) FROM schedlab.{table}"), &[]).unwrap().get(0)
    }
    fn set_version(&self, version: i64) {
        self.exec(&format!("UPDATE store_meta SET schema_version = {version}"));
    }
    fn exists(&self) -> bool {
        self.admin()
            .query_one("SELECT count(*) FROM pg_namespace WHERE nspname = 'schedlab'", &[])
            .unwrap()
            .get::<_, i64>(0)
            > 0
    }
}

/// Each test once per backend.
macro_rules! suite {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $( #[test] fn $name() { super::$name(&super::Sqlite::new()) } )*
        }
        mod postgres {
            $(
                #[test]
                #[ignore = "needs PostgreSQL (initdb/pg_ctl): CI installs postgresql"]
                fn $name() { super::$name(&super::Postgres::new()) }
            )*
        }
    };
}

suite!(
    a_run_round_trips_through_the_store,
    an_unfinished_benchmark_stays_incomplete_and_finished_ones_survive,
    selectors_resolve_ids_names_and_offsets,
    a_newer_schema_is_refused_with_advice,
    invocations_of_one_case_round_trip,
    a_value_json_cannot_hold_is_refused_and_the_store_stays_readable,
    noise_profiles_round_trip_and_the_latest_is_per_host,
    openers_creating_the_same_store_at_once_all_succeed,
    an_undecodable_run_is_named_and_hides_no_other,
    an_undecodable_noise_profile_is_named,
    removing_runs_takes_their_rows_and_profiles_and_nothing_else,
    a_result_for_a_removed_run_is_an_error_not_silence,
    a_read_only_open_reads_and_cannot_write,
    reading_an_empty_location_creates_nothing,
    every_run_has_its_own_uuid_and_copies_keep_it,
    copying_a_run_twice_adds_it_once,
    concurrent_writers_lose_nothing,
    a_password_on_the_command_line_is_not_stored,
    runs_are_selected_by_host_and_kernel,
    labels_round_trip_and_select_runs_with_cpu_models,
    a_bad_label_is_refused_and_nothing_is_written,
    pages_continue_where_the_last_ended,
    a_timeline_round_trips_beside_the_metrics,
    many_runs_load_at_once_with_only_the_benchmark_asked_for,
    stored_case_summaries_are_those_of_the_runs_read_back,
    a_store_from_before_case_summaries_gets_them_on_upgrade,
);

use schedlab_store::testing::{sample_bench as bench, sample_run as run};

fn profile(host: &str, created_unix_ms: i64) -> NoiseProfileRecord {
    NoiseProfileRecord {
        id: None,
        host: host.into(),
        kernel: Some("6.18".into()),
        created_unix_ms,
        run_ids: vec![3, 1, 2],
        note: None,
    }
}

fn one_line(e: &StoreError) -> String {
    let text = e.to_string();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(std::error::Error::source(e).is_none(), "a source would print the message twice: {text}");
    text
}

fn a_run_round_trips_through_the_store(b: &dyn Backend) {
    let mut s = b.open();
    let mut r = run();
    // Quick mode is kept (migration 3), as headings read it.
    r.benchmarks = vec![bench("pipe"), BenchResult { quick: true, ..bench("spawn") }];
    r.status = RunStatus::Complete;
    r.ended_unix_ms = Some(2000);
    let id = s.insert_run(&r).unwrap();
    let back = s.load_run(id).unwrap();
    r.id = Some(id);
    assert_eq!(back, r);
    assert_eq!(s.resolve("last").unwrap(), id);
    assert_eq!(s.list_runs(10).unwrap()[0].as_ref().unwrap().benchmarks, vec!["pipe", "spawn"]);
    assert_eq!(s.runs_with_benchmark("spawn").unwrap(), vec![id]);
    assert!(s.runs_with_benchmark("threads").unwrap().is_empty());
    s.check_integrity().unwrap();
}

fn an_unfinished_benchmark_stays_incomplete_and_finished_ones_survive(b: &dyn Backend) {
    let run_id;
    {
        let mut s = b.open();
        run_id = s.create_run(&run()).unwrap();
        let b1 = s.begin_benchmark(run_id, &bench("pipe")).unwrap();
        s.finish_benchmark(b1, &bench("pipe")).unwrap();
        s.begin_benchmark(run_id, &bench("spawn")).unwrap();
        // Dropped here without finish_benchmark/finish_run, as a crash would.
    }
    let s = b.open();
    s.check_integrity().unwrap();
    let back = s.load_run(run_id).unwrap();
    assert_eq!(back.status, RunStatus::Running);
    assert_eq!(back.benchmarks.len(), 2);
    assert_eq!(back.benchmarks[0].status, BenchStatus::Complete);
    assert_eq!(back.benchmarks[0].metrics.len(), 2);
    assert!(matches!(back.benchmarks[1].status, BenchStatus::Incomplete { .. }));
    assert!(back.benchmarks[1].metrics.is_empty());
    // The CLI marks an interrupted run so.
    let mut s = s;
    s.finish_run(run_id, RunStatus::Interrupted, 5000, None).unwrap();
    assert_eq!(s.load_run(run_id).unwrap().status, RunStatus::Interrupted);
}

fn selectors_resolve_ids_names_and_offsets(b: &dyn Backend) {
    let mut s = b.open();
    assert!(matches!(s.resolve("last"), Err(StoreError::Empty)));
    let a = s.insert_run(&run()).unwrap();
    let mut named = run();
    named.name = Some("baseline".into());
    let bb = s.insert_run(&named).unwrap();
    assert_eq!(s.resolve("last").unwrap(), bb);
    assert_eq!(s.resolve("last~1").unwrap(), a);
    assert_eq!(s.resolve("baseline").unwrap(), bb);
    assert_eq!(s.resolve(&format!("#{a}")).unwrap(), a);
    assert!(matches!(s.resolve("last~5"), Err(StoreError::NoSuchRun(_))));
    assert!(matches!(s.resolve("last~-1"), Err(StoreError::NoSuchRun(_))));
    assert!(matches!(s.resolve("nope"), Err(StoreError::NoSuchRun(_))));
    assert!(matches!(s.insert_run(&named), Err(StoreError::NameTaken(_))));
    assert_eq!(s.run_ids().unwrap(), vec![a, bb]);
}

fn a_newer_schema_is_refused_with_advice(b: &dyn Backend) {
    drop(b.open());
    b.set_version(STORE_SCHEMA_VERSION + 1);
    for access in [Access::Create, Access::Read] {
        let err = b.open_with(access).err().expect("must refuse");
        let text = one_line(&err);
        assert!(matches!(err, StoreError::NewerSchema { .. } | StoreError::NewerServerSchema { .. }), "{text}");
        assert!(
            text.contains("upgrade schedlab") && text.contains(&format!("schema {}", STORE_SCHEMA_VERSION + 1)),
            "{text}"
        );
    }
}

fn invocations_of_one_case_round_trip(b: &dyn Backend) {
    let mut s = b.open();
    let mut r = run();
    r.benchmarks = (0..2).map(|i| BenchResult { invocation: i, ..bench("pipe") }).collect();
    assert_eq!(r.benchmarks[0].key(), r.benchmarks[1].key());
    let id = s.insert_run(&r).unwrap();
    let invocations: Vec<u32> = s.load_run(id).unwrap().benchmarks.iter().map(|b| b.invocation).collect();
    assert_eq!(invocations, vec![0, 1]);
    assert_eq!(s.list_runs(1).unwrap()[0].as_ref().unwrap().benchmarks, vec!["pipe"]);
}

fn a_value_json_cannot_hold_is_refused_and_the_store_stays_readable(b: &dyn Backend) {
    let mut s = b.open();
    let mut r = run();
    let mut bad = bench("pipe");
    bad.metrics = vec![Metric::samples("rate", Unit::PerSecond, Direction::HigherIsBetter, vec![1.0, f64::NAN])];
    r.benchmarks = vec![bad.clone()];
    let e = s.insert_run(&r).unwrap_err().to_string();
    assert!(e.contains("rate holds NaN") && !e.contains("integrity"), "{e}");
    assert!(s.list_runs(10).unwrap().is_empty(), "an insert is one transaction: nothing of it stays");
    // A live run's earlier writes stay, and the run still loads.
    let id = s.create_run(&run()).unwrap();
    let bench_id = s.begin_benchmark(id, &bad).unwrap();
    assert!(s.finish_benchmark(bench_id, &bad).is_err());
    let back = s.load_run(id).unwrap();
    assert!(matches!(back.benchmarks[0].status, BenchStatus::Incomplete { .. }));
}

fn noise_profiles_round_trip_and_the_latest_is_per_host(b: &dyn Backend) {
    let mut s = b.open();
    assert_eq!(s.latest_noise_profile("a").unwrap(), None);
    let old = s.save_noise_profile(&profile("a", 100)).unwrap();
    let newest = s.save_noise_profile(&NoiseProfileRecord { note: Some("idle".into()), ..profile("a", 300) }).unwrap();
    let same_time = s.save_noise_profile(&NoiseProfileRecord { kernel: None, ..profile("a", 100) }).unwrap();
    let other_host = s.save_noise_profile(&profile("b", 900)).unwrap();
    let latest = s.latest_noise_profile("a").unwrap().unwrap();
    assert_eq!(latest, NoiseProfileRecord { id: Some(newest), note: Some("idle".into()), ..profile("a", 300) });
    assert_eq!(s.latest_noise_profile("c").unwrap(), None);
    let ids: Vec<i64> = s.noise_profiles().unwrap().iter().map(|p| p.id.unwrap()).collect();
    assert_eq!(ids, vec![other_host, newest, same_time, old], "newest first, ties by id");
}

fn openers_creating_the_same_store_at_once_all_succeed(b: &dyn Backend) {
    const OPENERS: usize = 8;
    let barrier = std::sync::Barrier::new(OPENERS);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..OPENERS)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    let mut s = b.open_with(Access::Create)?;
                    let mut r = run();
                    r.benchmarks = vec![bench("pipe")];
                    s.insert_run(&r)
                })
            })
            .collect();
        for h in handles {
            if let Err(e) = h.join().unwrap() {
                panic!("{e}");
            }
        }
    });
    let s = b.open_with(Access::Read).unwrap();
    assert_eq!(s.list_runs(100).unwrap().len(), OPENERS);
}

/// Three runs, the middle one ("broken") with a benchmark whose params are
/// not JSON.
fn store_with_a_bad_run(b: &dyn Backend, s: &mut dyn Store) -> (i64, i64, i64) {
    let mut good = run();
    good.benchmarks = vec![bench("pipe")];
    let before = s.insert_run(&good).unwrap();
    let mut bad = run();
    bad.name = Some("broken".into());
    bad.benchmarks = vec![bench("pipe")];
    let bad_id = s.insert_run(&bad).unwrap();
    let after = s.insert_run(&good).unwrap();
    b.exec(&format!("UPDATE benchmarks SET params = '{{bad' WHERE run_id = {bad_id}"));
    (before, bad_id, after)
}

fn an_undecodable_run_is_named_and_hides_no_other(b: &dyn Backend) {
    let mut s = b.open();
    let (before, bad, after) = store_with_a_bad_run(b, s.as_mut());
    let err = s.load_run(bad).unwrap_err();
    let text = one_line(&err);
    assert!(matches!(err, StoreError::BadRun { id, .. } if id == bad), "{text}");
    assert!(text.contains(&format!("run #{bad} (broken)")) && text.contains("params of pipe"), "{text}");
    assert!(text.contains(&format!("schedlab rm {bad}")), "{text}");
    assert!(s.load_run(before).is_ok() && s.load_run(after).is_ok());
    // A run row whose kind is unknown: the listing keeps every other run.
    b.exec(&format!("UPDATE runs SET kind = 'nonsense' WHERE id = {bad}"));
    let listed = s.list_runs(10).unwrap();
    assert_eq!(listed.len(), 3);
    assert_eq!(listed[0].as_ref().unwrap().id, after);
    assert!(matches!(&listed[1], Err(StoreError::BadRun { id, .. }) if *id == bad), "{:?}", listed[1]);
    assert_eq!(listed[2].as_ref().unwrap().id, before);
}

fn an_undecodable_noise_profile_is_named(b: &dyn Backend) {
    let mut s = b.open();
    let id = s.save_noise_profile(&profile("h", 1)).unwrap();
    b.exec(&format!("UPDATE noise_profiles SET run_ids = 'x' WHERE id = {id}"));
    let err = s.latest_noise_profile("h").unwrap_err();
    assert!(matches!(err, StoreError::BadProfile { .. }), "{err}");
    assert!(one_line(&err).contains(&format!("noise profile #{id}")));
}

fn removing_runs_takes_their_rows_and_profiles_and_nothing_else(b: &dyn Backend) {
    let mut s = b.open();
    let (keep, bad, other) = store_with_a_bad_run(b, s.as_mut());
    let naming_bad = s.save_noise_profile(&NoiseProfileRecord { run_ids: vec![keep, bad], ..profile("h", 1) }).unwrap();
    let unrelated =
        s.save_noise_profile(&NoiseProfileRecord { run_ids: vec![keep, other], ..profile("h", 2) }).unwrap();
    let counts = || (b.count("runs"), b.count("benchmarks"), b.count("metrics"));
    // An unknown id removes nothing at all.
    assert!(matches!(s.remove_runs(&[bad, 999]), Err(StoreError::NoSuchRun(_))));
    assert_eq!(counts(), (3, 3, 6));
    let removed = s.remove_runs(&[bad, bad]).unwrap();
    assert_eq!(
        removed.runs,
        vec![RemovedRun {
            id: bad,
            name: Some("broken".into()),
            kind: "live".into(),
            status: "running".into(),
            benchmarks: 1,
            metrics: 2
        }]
    );
    assert_eq!(removed.noise_profiles, vec![(naming_bad, vec![bad])]);
    assert_eq!(counts(), (2, 2, 4));
    let left: Vec<i64> = s.noise_profiles().unwrap().iter().filter_map(|p| p.id).collect();
    assert_eq!(left, vec![unrelated]);
    assert!(s.load_run(keep).is_ok() && s.load_run(other).is_ok());
}

fn a_result_for_a_removed_run_is_an_error_not_silence(b: &dyn Backend) {
    let mut s = b.open();
    let id = s.create_run(&run()).unwrap();
    let bench_id = s.begin_benchmark(id, &bench("pipe")).unwrap();
    s.remove_runs(&[id]).unwrap();
    assert!(matches!(s.finish_benchmark(bench_id, &bench("pipe")), Err(StoreError::Gone(_))));
    assert!(matches!(s.begin_benchmark(id, &bench("pipe")), Err(StoreError::Gone(_))));
    assert!(matches!(s.finish_run(id, RunStatus::Complete, 2, None), Err(StoreError::Gone(_))));
}

fn a_read_only_open_reads_and_cannot_write(b: &dyn Backend) {
    let mut w = b.open();
    let id = w.insert_run(&run()).unwrap();
    drop(w);
    let mut r = b.open_with(Access::Read).unwrap();
    assert_eq!(r.load_run(id).unwrap().id, Some(id));
    let err = r.insert_run(&run()).unwrap_err();
    assert!(matches!(err, StoreError::ReadOnly { .. }), "{err}");
    assert!(one_line(&err).contains("writable location"));
    assert_eq!(b.count("runs"), 1);
}

fn reading_an_empty_location_creates_nothing(b: &dyn Backend) {
    for access in [Access::Read, Access::Modify] {
        let err = b.open_with(access).err().expect("nothing to read");
        let text = one_line(&err);
        assert!(matches!(err, StoreError::NoStore { .. }), "{text}");
        assert!(text.contains("schedlab run"), "{text}");
        assert!(!b.exists(), "a reading open created the store");
    }
}

fn every_run_has_its_own_uuid_and_copies_keep_it(b: &dyn Backend) {
    let mut s = b.open();
    let a = s.insert_run(&run()).unwrap();
    let live = s.create_run(&run()).unwrap();
    let (ua, ul) = (s.run_uuid(a).unwrap(), s.run_uuid(live).unwrap());
    assert_ne!(ua, ul);
    assert_eq!(s.find_uuid(ua).unwrap(), Some(a));
    assert_eq!(s.find_uuid(Uuid::new_v4()).unwrap(), None);
    assert!(matches!(s.run_uuid(9999), Err(StoreError::NoSuchRun(_))));
    // A copy into another store of the same backend keeps the uuid.
    let other = Sqlite::new();
    let mut t = other.open();
    let copied = match t.insert_run_as(&s.load_run(a).unwrap(), ua).unwrap() {
        Inserted::Added(id) => id,
        Inserted::Present(_) => panic!("the store was empty"),
    };
    assert_eq!(t.run_uuid(copied).unwrap(), ua);
}

fn copying_a_run_twice_adds_it_once(b: &dyn Backend) {
    let mut s = b.open();
    let mut r = run();
    r.benchmarks = vec![bench("pipe"), bench("spawn")];
    r.status = RunStatus::Complete;
    let uuid = Uuid::new_v4();
    let Inserted::Added(id) = s.insert_run_as(&r, uuid).unwrap() else { panic!("first copy") };
    assert_eq!(s.insert_run_as(&r, uuid).unwrap(), Inserted::Present(id));
    assert_eq!((b.count("runs"), b.count("benchmarks"), b.count("metrics")), (1, 2, 4));
    // A copy that fails half way (a value that cannot be stored) leaves
    // nothing, so repeating it later completes it.
    let mut broken = r.clone();
    broken.benchmarks[1].metrics[0] =
        Metric::samples("rate", Unit::PerSecond, Direction::HigherIsBetter, vec![f64::INFINITY]);
    let other = Uuid::new_v4();
    assert!(s.insert_run_as(&broken, other).is_err());
    assert_eq!(s.find_uuid(other).unwrap(), None);
    assert_eq!((b.count("runs"), b.count("benchmarks")), (1, 2));
    assert!(matches!(s.insert_run_as(&r, other).unwrap(), Inserted::Added(_)));
    assert_eq!(b.count("runs"), 2);
}

/// Writers in threads, each with its own connection, as hosts are: every
/// run, benchmark and metric arrives.
fn concurrent_writers_lose_nothing(b: &dyn Backend) {
    const WRITERS: usize = 16;
    const RUNS: usize = 5;
    drop(b.open());
    std::thread::scope(|scope| {
        for w in 0..WRITERS {
            scope.spawn(move || {
                let mut s = b.open();
                for k in 0..RUNS {
                    let mut r = run();
                    r.host = format!("host{w}");
                    r.name = Some(format!("w{w}-r{k}"));
                    let id = s.create_run(&r).unwrap();
                    for name in ["pipe", "spawn"] {
                        let row = s.begin_benchmark(id, &bench(name)).unwrap();
                        s.finish_benchmark(row, &bench(name)).unwrap();
                    }
                    s.finish_run(id, RunStatus::Complete, 2000, None).unwrap();
                }
            });
        }
    });
    let n = (WRITERS * RUNS) as i64;
    assert_eq!((b.count("runs"), b.count("benchmarks"), b.count("metrics")), (n, 2 * n, 4 * n));
    let s = b.open_with(Access::Read).unwrap();
    let listed = s.list_runs(1000).unwrap();
    assert!(listed.iter().all(|r| r.as_ref().unwrap().status == RunStatus::Complete));
    let mut names: Vec<String> = listed.into_iter().map(|r| r.unwrap().name.unwrap()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), WRITERS * RUNS);
}

fn a_password_on_the_command_line_is_not_stored(b: &dyn Backend) {
    let mut s = b.open();
    let mut r = run();
    r.command_line = vec![
        "schedlab".into(),
        "--db".into(),
        "postgres://alice:hunter2@db.example:5432/lab?sslmode=disable&password=hunter3".into(),
        "push".into(),
        "--to=postgresql://bob:pw@team/db".into(),
    ];
    let id = s.insert_run(&r).unwrap();
    let stored = s.load_run(id).unwrap().command_line;
    assert_eq!(
        stored,
        vec![
            "schedlab",
            "--db",
            "postgres://alice@db.example:5432/lab?sslmode=disable",
            "push",
            "--to=postgresql://bob@team/db"
        ]
    );
}

fn runs_are_selected_by_host_and_kernel(b: &dyn Backend) {
    let mut s = b.open();
    let mut add = |host: &str, kernel: Option<&str>| {
        let mut r = run();
        r.host = host.into();
        r.env_start = kernel.map(|k| Environment { kernel_release: Some(k.into()), ..Default::default() });
        s.insert_run(&r).unwrap()
    };
    let a1 = add("a", Some("6.18"));
    let a2 = add("a", Some("6.18.4-rt"));
    let b1 = add("b", Some("6.180"));
    let b2 = add("b", None);
    let ids =
        |f: RunFilter| -> Vec<i64> { s.list_runs_where(&f, 100).unwrap().into_iter().map(|r| r.unwrap().id).collect() };
    let host = |h: &str| Some(h.to_string());
    assert_eq!(ids(RunFilter::default()), vec![b2, b1, a2, a1]);
    assert_eq!(ids(RunFilter { host: host("a"), kernel: None, ..Default::default() }), vec![a2, a1]);
    assert_eq!(
        ids(RunFilter { host: None, kernel: host("6.18"), ..Default::default() }),
        vec![a2, a1],
        "6.180 is another release"
    );
    assert_eq!(ids(RunFilter { host: None, kernel: host("6.18.4-rt"), ..Default::default() }), vec![a2]);
    assert_eq!(ids(RunFilter { host: host("b"), kernel: host("6.18"), ..Default::default() }), Vec::<i64>::new());
    assert_eq!(ids(RunFilter { host: host("nowhere"), kernel: None, ..Default::default() }), Vec::<i64>::new());
    let listed = s.list_runs(10).unwrap();
    assert_eq!(listed[3].as_ref().unwrap().kernel.as_deref(), Some("6.18"));
    assert_eq!(listed[0].as_ref().unwrap().kernel, None);
}

fn labelled(host: &str, cpu: &str, labels: &[(&str, &str)]) -> schedlab_core::Run {
    let mut r = run();
    r.host = host.into();
    r.env_start =
        Some(Environment { kernel_release: Some("6.18".into()), cpu_model: Some(cpu.into()), ..Default::default() });
    r.labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    r
}

fn labels_round_trip_and_select_runs_with_cpu_models(b: &dyn Backend) {
    let mut s = b.open();
    let epyc = "AMD EPYC 7763 64-Core Processor";
    let xeon = "Intel(R) Xeon(R) Gold 6338";
    let a = s.insert_run(&labelled("a", epyc, &[("kernel", "6.18-rt"), ("rack", "r1")])).unwrap();
    let c = s.insert_run(&labelled("c", xeon, &[("kernel", "6.18-rt")])).unwrap();
    let d = s.insert_run(&labelled("d", epyc, &[("kernel", "6.18")])).unwrap();
    let plain = s.insert_run(&run()).unwrap();
    let back = s.load_run(a).unwrap();
    assert_eq!(back.labels.get("rack").map(String::as_str), Some("r1"));
    assert_eq!(back.labels.len(), 2);
    assert!(s.load_run(plain).unwrap().labels.is_empty());
    let ids = |f: RunFilter| -> Vec<i64> { s.run_ids_where(&f).unwrap() };
    let label = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
    assert_eq!(ids(RunFilter { labels: label("kernel", "6.18-rt"), ..Default::default() }), vec![a, c]);
    assert_eq!(ids(RunFilter { labels: label("kernel", "6.18"), ..Default::default() }), vec![d], "values match whole");
    assert_eq!(ids(RunFilter { cpu_model: Some("epyc".into()), ..Default::default() }), vec![a, d], "any case");
    let both = RunFilter { cpu_model: Some("EPYC".into()), labels: label("kernel", "6.18-rt"), ..Default::default() };
    assert_eq!(ids(both), vec![a]);
    let two_labels = [("kernel".to_string(), "6.18-rt".to_string()), ("rack".to_string(), "r1".to_string())];
    assert_eq!(ids(RunFilter { labels: two_labels.to_vec(), ..Default::default() }), vec![a]);
    assert_eq!(ids(RunFilter::default()), vec![a, c, d, plain]);
    let listed = s.list_runs_where(&RunFilter { host: Some("a".into()), ..Default::default() }, 10).unwrap();
    let first = listed[0].as_ref().unwrap();
    assert_eq!((first.cpu_model.as_deref(), first.labels.get("rack").map(String::as_str)), (Some(epyc), Some("r1")));
    // A copy keeps its labels; removing a run takes its labels.
    let uuid = Uuid::new_v4();
    let Inserted::Added(copy) = s.insert_run_as(&back, uuid).unwrap() else { panic!("a new uuid is added") };
    assert_eq!(s.load_run(copy).unwrap().labels, back.labels);
    let before = b.count("run_labels");
    s.remove_runs(&[copy]).unwrap();
    assert_eq!(b.count("run_labels"), before - 2);
}

fn a_bad_label_is_refused_and_nothing_is_written(b: &dyn Backend) {
    let mut s = b.open();
    let mut r = labelled("a", "x", &[("ok", "1")]);
    r.labels.insert("bad key".into(), "v".into());
    r.benchmarks = vec![bench("pipe")];
    let err = s.insert_run(&r).unwrap_err();
    let text = one_line(&err);
    assert!(matches!(err, StoreError::Unstorable(_)) && text.contains("bad key"), "{text}");
    assert_eq!((b.count("runs"), b.count("run_labels"), b.count("benchmarks")), (0, 0, 0));
}

fn pages_continue_where_the_last_ended(b: &dyn Backend) {
    let mut s = b.open();
    let ids: Vec<i64> = (0..25)
        .map(|i| s.insert_run(&labelled(if i % 2 == 0 { "even" } else { "odd" }, "cpu", &[])).unwrap())
        .collect();
    let page = |f: &RunFilter, start: PageStart, n: usize| -> Vec<i64> {
        s.list_runs_page(f, start, n).unwrap().into_iter().map(|r| r.unwrap().id).collect()
    };
    let all = RunFilter::default();
    let first = page(&all, PageStart::default(), 10);
    assert_eq!(first, ids.iter().rev().take(10).copied().collect::<Vec<_>>());
    // Keyset: the next page starts below the last id shown.
    let second = page(&all, PageStart { before: first.last().copied(), skip: 0 }, 10);
    assert_eq!(second, ids.iter().rev().skip(10).take(10).copied().collect::<Vec<_>>());
    // Offset: the same page by number.
    assert_eq!(page(&all, PageStart { before: None, skip: 10 }, 10), second);
    let last = page(&all, PageStart { before: second.last().copied(), skip: 0 }, 10);
    assert_eq!(last.len(), 5);
    // With a selector, a page holds only what it selects.
    let odd = RunFilter { host: Some("odd".into()), ..Default::default() };
    let odd_page = page(&odd, PageStart { before: Some(ids[20]), skip: 0 }, 3);
    assert_eq!(odd_page, vec![ids[19], ids[17], ids[15]]);
}

/// `run --observe` and `sim --timeline` keep a timeline with the result: a
/// row of its own data type beside the metrics (no schema change), never
/// read as a metric; results without one (older rows) read as None.
fn a_timeline_round_trips_beside_the_metrics(b: &dyn Backend) {
    use schedlab_core::timeline::{Missing, Quantity, Timeline, TimelineTask};
    let mut s = b.open();
    let mut t = TimelineTask::new(7, "measured waiter 7", "measured");
    t.push("prio", 0, 49.0);
    t.push("vruntime", 10, 1.5e6);
    t.last_seen_ns = Some(10);
    let tl = Timeline {
        source: "/proc/PID/task/TID/sched, sampled at 50 Hz".into(),
        primary: "prio".into(),
        quantities: vec![Quantity { name: "prio".into(), unit: String::new(), lower_runs_first: Some(true) }],
        missing: vec![Missing { name: "lag".into(), why: "not printed".into() }],
        end_ns: 20,
        tasks: vec![t],
        notes: vec!["a note".into()],
    };
    let mut r = run();
    r.benchmarks = vec![BenchResult { timeline: Some(tl), ..bench("wakeup") }, bench("pipe")];
    r.status = RunStatus::Complete;
    r.ended_unix_ms = Some(2000);
    let id = s.insert_run(&r).unwrap();
    let back = s.load_run(id).unwrap();
    r.id = Some(id);
    assert_eq!(back, r);
    assert_eq!(back.benchmarks[0].metrics.len(), 2, "the timeline is not a metric");
    assert!(back.benchmarks[1].timeline.is_none());
    assert_eq!(b.count("metrics"), 5, "four metrics and one timeline row");
    s.check_integrity().unwrap();
}

fn many_runs_load_at_once_with_only_the_benchmark_asked_for(b: &dyn Backend) {
    let mut s = b.open();
    let (before, bad, after) = store_with_a_bad_run(b, s.as_mut());
    let mut two = labelled("h", "cpu", &[("rack", "r1")]);
    two.benchmarks = vec![bench("pipe"), bench("spawn")];
    let both = s.insert_run(&two).unwrap();
    let loaded = s.load_runs(&[both, before, bad, 999_999, after], None).unwrap();
    assert_eq!(loaded.len(), 5, "one entry per id asked for, in order");
    assert_eq!(loaded[0].as_ref().unwrap(), &s.load_run(both).unwrap(), "the same run as load_run reads");
    assert_eq!(loaded[1].as_ref().unwrap().id, Some(before));
    assert!(matches!(&loaded[2], Err(StoreError::BadRun { id, name: Some(n), .. }) if *id == bad && n == "broken"));
    assert!(matches!(&loaded[3], Err(StoreError::NoSuchRun(_))));
    assert_eq!(loaded[4].as_ref().unwrap().id, Some(after));
    let only = s.load_runs(&[both], Some("spawn")).unwrap().pop().unwrap().unwrap();
    assert_eq!(only.benchmarks.iter().map(|b| b.name.as_str()).collect::<Vec<_>>(), vec!["spawn"]);
    assert_eq!(only.benchmarks[0], two.benchmarks[1], "its metrics whole");
    assert_eq!(only.labels.get("rack").map(String::as_str), Some("r1"));
}

/// A benchmark of `name` whose figures depend on `k`: every invocation and
/// run differs, so a summary mixed up with another's shows.
fn varied(name: &str, k: u64) -> BenchResult {
    let mut b = bench(name);
    b.metrics[0] =
        Metric::samples("rate", Unit::PerSecond, Direction::HigherIsBetter, vec![k as f64, 1.5 * k as f64]).headline();
    let mut h = schedlab_core::LatencyHistogram::new();
    for i in 0..50 {
        h.record(1000 + 37 * k + 11 * i);
    }
    b.metrics[1] = Metric::histogram("latency", Direction::LowerIsBetter, h);
    b
}

/// Runs of every shape a history meets: whole (simulated, imported), and
/// live ones written benchmark by benchmark with three invocations of one
/// case interleaved with another case, one invocation cut short.
fn store_varied_runs(s: &mut dyn Store) {
    for k in 1..=3 {
        let mut r = run();
        r.host = format!("host{k}");
        r.benchmarks = vec![varied("pipe", k), varied("spawn", k + 10)];
        s.insert_run(&r).unwrap();
    }
    let live = s.create_run(&run()).unwrap();
    for i in 0..3u32 {
        for (name, k) in [("pipe", 20 + u64::from(i)), ("spawn", 30 + u64::from(i))] {
            let b = BenchResult { invocation: i, ..varied(name, k) };
            let id = s.begin_benchmark(live, &b).unwrap();
            if (name, i) != ("spawn", 1) {
                s.finish_benchmark(id, &b).unwrap();
            }
        }
    }
    s.finish_run(live, RunStatus::Interrupted, 9000, None).unwrap();
}

/// What a history of `name` follows in each stored run, computed from the
/// runs read back whole.
fn summaries_from_runs(
    s: &dyn Store,
    name: &str,
    metric: Option<&str>,
) -> Vec<(String, schedlab_core::replicate::CaseSummary)> {
    let mut out = Vec::new();
    for id in s.run_ids().unwrap() {
        let r = s.load_run(id).unwrap();
        for mut case in schedlab_core::replicate::case_summaries(&r.benchmarks) {
            if case.name != name {
                continue;
            }
            case.metrics.retain(|m| metric.map_or(m.default, |n| m.name == n));
            if !case.metrics.is_empty() {
                out.push((r.label(), case));
            }
        }
    }
    out
}

fn stored_summaries(
    s: &dyn Store,
    name: &str,
    metric: Option<&str>,
    filter: &RunFilter,
) -> Vec<(String, schedlab_core::replicate::CaseSummary)> {
    let mut out = Vec::new();
    s.history_cases(name, metric, filter, &mut |c| {
        let (head, case) = c.unwrap();
        out.push((head.label, case));
    })
    .unwrap();
    out
}

fn stored_case_summaries_are_those_of_the_runs_read_back(b: &dyn Backend) {
    let mut s = b.open();
    store_varied_runs(&mut *s);
    let all = RunFilter::default();
    for (name, metric) in [("pipe", None), ("pipe", Some("latency")), ("spawn", None), ("spawn", Some("latency"))] {
        let stored = stored_summaries(&*s, name, metric, &all);
        assert_eq!(stored, summaries_from_runs(&*s, name, metric), "{name} {metric:?}");
        assert_eq!(stored.len(), 4, "three whole runs and the live one: {name}");
    }
    // The live run's cases pool their complete invocations only.
    let live = stored_summaries(&*s, "spawn", Some("latency"), &all).pop().unwrap().1;
    assert_eq!((live.invocations, live.metrics[0].replicates.len()), (2, 2));
    assert!(live.metrics[0].histogram && live.metrics[0].ci.is_some());
    let pipe = stored_summaries(&*s, "pipe", None, &all).pop().unwrap().1;
    assert_eq!((pipe.invocations, pipe.metrics[0].name.as_str()), (3, "rate"));
    assert_eq!(pipe.metrics[0].replicates, vec![25.0, 26.25, 27.5]);
    // Selectors apply; unknown names give nothing.
    let host2 = RunFilter { host: Some("host2".into()), ..Default::default() };
    let only = stored_summaries(&*s, "pipe", None, &host2);
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].1.metrics[0].replicates, vec![2.5]);
    assert!(stored_summaries(&*s, "pipe", Some("nope"), &all).is_empty());
    assert!(stored_summaries(&*s, "threads", None, &all).is_empty());
    assert_eq!(s.case_metric_names("pipe").unwrap(), vec!["rate", "latency"]);
    // Removing a run takes its summaries.
    let first = s.run_ids().unwrap()[0];
    s.remove_runs(&[first]).unwrap();
    assert_eq!(stored_summaries(&*s, "pipe", None, &all).len(), 3);
    assert_eq!(b.count("cases"), 6);
}

fn a_store_from_before_case_summaries_gets_them_on_upgrade(b: &dyn Backend) {
    let mut s = b.open();
    store_varied_runs(&mut *s);
    let expected = summaries_from_runs(&*s, "spawn", Some("latency"));
    drop(s);
    b.exec("DROP TABLE case_metrics; DROP TABLE cases;");
    b.set_version(STORE_SCHEMA_VERSION - 1);
    let s = b.open();
    assert_eq!(stored_summaries(&*s, "spawn", Some("latency"), &RunFilter::default()), expected);
    assert_eq!(b.count("cases"), 8);
}
