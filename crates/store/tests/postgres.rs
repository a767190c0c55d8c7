//! What only the PostgreSQL backend meets: credentials, grants, a schema it
//! did not make, a session the server ends. Each test needs a throw-away
//! cluster (`schedlab_store::testing`) and panics when PostgreSQL is missing.

use schedlab_core::{Run, RunKind, ToolInfo};
use schedlab_store::{testing, Access, PgEnv, PgStore, PgTarget, Store, StoreError, DEFAULT_BUSY_TIMEOUT};

const NEEDS: &str = "needs PostgreSQL (initdb/pg_ctl): CI installs postgresql";

fn run() -> Run {
    let tool = ToolInfo { name: "schedlab".into(), version: "0.1.0".into(), git_rev: None };
    Run::new(RunKind::Live, tool, vec!["schedlab".into()], "h".into(), 1000)
}

fn open(url: &str, access: Access) -> schedlab_store::Result<PgStore> {
    // No password from this process's environment or ~/.pgpass.
    let env = PgEnv { login: Some("nobody".into()), ..Default::default() };
    PgStore::open_target(PgTarget::parse(url, &env)?, access, DEFAULT_BUSY_TIMEOUT)
}

fn one_line(e: &StoreError) -> String {
    let text = e.to_string();
    assert_eq!(text.lines().count(), 1, "{text}");
    text
}

#[test]
#[ignore = "needs PostgreSQL (initdb/pg_ctl): CI installs postgresql"]
fn wrong_or_missing_credentials_are_refused_without_the_password() {
    let c = testing::cluster();
    let db = c.create_database();
    c.create_role("carol", "right-password");
    let err = open(&c.url("carol", Some("wrong-password"), &db), Access::Create).err().expect("wrong password");
    let text = one_line(&err);
    assert!(matches!(err, StoreError::Refused { .. }), "{text}");
    assert!(text.contains("refused user 'carol'") && text.contains(".pgpass"), "{text}");
    assert!(!text.contains("wrong-password") && text.contains(&format!("127.0.0.1:{}", c.port())), "{text}");
    let err = open(&c.url("carol", None, &db), Access::Create).err().expect("no password");
    let text = one_line(&err);
    assert!(matches!(err, StoreError::Refused { .. }) && text.contains("none was given"), "{text}");
    let _ = NEEDS;
}

#[test]
#[ignore = "needs PostgreSQL (initdb/pg_ctl): CI installs postgresql"]
fn a_missing_database_is_named() {
    let c = testing::cluster();
    let err = open(&c.admin_url("no_such_db"), Access::Create).err().expect("no database");
    let text = one_line(&err);
    assert!(
        matches!(err, StoreError::NoDatabase { .. }) && text.contains("'no_such_db'") && text.contains("createdb"),
        "{text}"
    );
    assert!(!text.contains("admin-"), "the admin password stays out: {text}");
}

#[test]
#[ignore = "needs PostgreSQL (initdb/pg_ctl): CI installs postgresql"]
fn a_user_without_create_is_told_which_grant_it_needs_and_then_works() {
    let c = testing::cluster();
    let db = c.create_database();
    c.create_role("dave", "pw");
    let url = c.url("dave", Some("pw"), &db);
    let err = open(&url, Access::Create).err().expect("no CREATE on the database");
    let text = one_line(&err);
    assert!(matches!(err, StoreError::NoGrant { .. }), "{text}");
    assert!(text.contains(&format!("GRANT CREATE ON DATABASE {db} TO dave")), "{text}");
    assert!(text.contains("CREATE SCHEMA schedlab AUTHORIZATION dave"), "{text}");
    // The administrator's other way: a schema of dave's own.
    c.admin(&db).batch_execute("CREATE SCHEMA schedlab AUTHORIZATION dave").unwrap();
    let mut s = open(&url, Access::Create).unwrap();
    let id = s.insert_run(&run()).unwrap();
    assert_eq!(s.load_run(id).unwrap().host, "h");
}

#[test]
#[ignore = "needs PostgreSQL (initdb/pg_ctl): CI installs postgresql"]
fn a_user_who_may_only_read_reads_and_is_told_the_grant_to_write() {
    let c = testing::cluster();
    let db = c.create_database();
    let mut owner = open(&c.admin_url(&db), Access::Create).unwrap();
    let id = owner.insert_run(&run()).unwrap();
    c.create_role("erin", "pw");
    let url = c.url("erin", Some("pw"), &db);
    // No grant at all: reading says which grants reading needs.
    let err = open(&url, Access::Read).err().expect("no USAGE on the schema");
    let text = one_line(&err);
    assert!(
        matches!(err, StoreError::NoGrant { .. }) && text.contains("GRANT USAGE ON SCHEMA schedlab TO erin"),
        "{text}"
    );
    c.admin(&db)
        .batch_execute("GRANT USAGE ON SCHEMA schedlab TO erin; GRANT SELECT ON ALL TABLES IN SCHEMA schedlab TO erin")
        .unwrap();
    let reader = open(&url, Access::Read).unwrap();
    assert_eq!(reader.load_run(id).unwrap().id, Some(id));
    let mut writer = open(&url, Access::Create).unwrap();
    let err = writer.insert_run(&run()).unwrap_err();
    let text = one_line(&err);
    assert!(matches!(err, StoreError::NoGrant { .. }) && text.contains("may not write results"), "{text}");
    assert!(text.contains("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA schedlab TO erin"), "{text}");
}

#[test]
#[ignore = "needs PostgreSQL (initdb/pg_ctl): CI installs postgresql"]
fn a_schedlab_schema_schedlab_did_not_make_is_left_alone() {
    let c = testing::cluster();
    let db = c.create_database();
    c.admin(&db).batch_execute("CREATE SCHEMA schedlab; CREATE TABLE schedlab.notes (x text)").unwrap();
    let err = open(&c.admin_url(&db), Access::Create).err().expect("foreign schema");
    let text = one_line(&err);
    assert!(matches!(err, StoreError::ForeignSchema { .. }) && text.contains("notes"), "{text}");
    let tables: i64 =
        c.admin(&db).query_one("SELECT count(*) FROM pg_tables WHERE schemaname = 'schedlab'", &[]).unwrap().get(0);
    assert_eq!(tables, 1, "nothing was added");
}

#[test]
#[ignore = "needs PostgreSQL (initdb/pg_ctl): CI installs postgresql"]
fn a_session_the_server_ends_is_opened_again_for_the_next_write() {
    let c = testing::cluster();
    let db = c.create_database();
    let mut s = open(&c.admin_url(&db), Access::Create).unwrap();
    let id = s.create_run(&run()).unwrap();
    // What a server restart or a cut connection does to a long run.
    c.admin(&db)
        .batch_execute(&format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{db}' AND pid <> pg_backend_pid()"
        ))
        .unwrap();
    // The first statement on the dead session fails (or finds it closed);
    // the next one reconnects.
    let first = s.finish_run(id, schedlab_core::RunStatus::Complete, 2000, None);
    if let Err(e) = &first {
        let text = one_line(e);
        assert!(matches!(e, StoreError::Lost { .. } | StoreError::Server { .. }), "{text}");
        s.finish_run(id, schedlab_core::RunStatus::Complete, 2000, None).unwrap();
    }
    assert_eq!(s.load_run(id).unwrap().status, schedlab_core::RunStatus::Complete);
}

#[test]
#[ignore = "needs PostgreSQL (initdb/pg_ctl): CI installs postgresql"]
fn a_held_table_lock_is_a_busy_error_and_a_retry_succeeds() {
    let c = testing::cluster();
    let db = c.create_database();
    let mut s = PgStore::open(&c.admin_url(&db), Access::Create, std::time::Duration::from_millis(100)).unwrap();
    let mut holder = c.admin(&db);
    let mut tx = holder.transaction().unwrap();
    tx.batch_execute("LOCK TABLE schedlab.runs IN ACCESS EXCLUSIVE MODE").unwrap();
    let err = s.insert_run(&run()).unwrap_err();
    assert!(err.is_busy(), "{err}");
    assert!(one_line(&err).contains("locked by another session"), "{err}");
    tx.rollback().unwrap();
    s.insert_run(&run()).unwrap();
    assert_eq!(s.list_runs(10).unwrap().len(), 1, "the failed attempt left nothing behind");
}

#[test]
#[ignore = "needs PostgreSQL (initdb/pg_ctl): CI installs postgresql"]
fn a_schema_4_store_is_upgraded_in_place_and_learns_each_runs_kernel_and_cpu() {
    let c = testing::cluster();
    let db = c.create_database();
    let url = c.admin_url(&db);
    let mut s = open(&url, Access::Create).unwrap();
    let mut with_kernel = run();
    with_kernel.env_start = Some(schedlab_core::Environment {
        kernel_release: Some("6.18".into()),
        cpu_model: Some("AMD EPYC 7763".into()),
        ..Default::default()
    });
    let good = s.insert_run(&with_kernel).unwrap();
    let bad = s.insert_run(&with_kernel).unwrap();
    let uuid = s.run_uuid(good).unwrap();
    drop(s);
    // Back to schema 4 as it shipped, with one environment edited by hand.
    c.admin(&db)
        .batch_execute(&format!(
            "SET search_path = schedlab;
             DROP TABLE case_metrics; DROP TABLE cases;
             DROP TABLE run_labels; DROP INDEX runs_cpu_model; ALTER TABLE runs DROP COLUMN cpu_model;
             DROP INDEX runs_host; DROP INDEX runs_kernel; ALTER TABLE runs DROP COLUMN kernel;
             UPDATE store_meta SET schema_version = 4;
             UPDATE runs SET env_start = '{{not json' WHERE id = {bad};"
        ))
        .unwrap();
    let s = open(&url, Access::Read).unwrap();
    assert_eq!(s.schema_version().unwrap(), schedlab_store::STORE_SCHEMA_VERSION);
    let kernels: Vec<(i64, Option<String>, Option<String>)> =
        s.list_runs(10).unwrap().into_iter().map(|r| r.map(|r| (r.id, r.kernel, r.cpu_model)).unwrap()).collect();
    assert_eq!(kernels, vec![(bad, None, None), (good, Some("6.18".into()), Some("AMD EPYC 7763".into()))]);
    assert_eq!(s.run_uuid(good).unwrap(), uuid, "a migration keeps every run's uuid");
}
