//! SQLite backend: WAL journal, schema versioned with `PRAGMA user_version`,
//! raw metric data kept as JSON in the core model's serde form.

use crate::{
    case_invocations, check_labels, filter_sql, first_seq, history_sql, in_order, sql_message, stored_command_line,
    Dialect, Inserted, NoiseProfileRecord, PageStart, Param, Removed, RemovedRun, Result, RunFilter, RunSummary, Store,
    StoreError,
};
use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension, Row, Transaction, TransactionBehavior};
use schedlab_core::model::{upgrade_v1_metric, RunHead};
use schedlab_core::replicate::{case_summaries, CaseSummary, MetricSummary};
use schedlab_core::stats::Interval;
use schedlab_core::timeline::{Timeline, TIMELINE_DATA_TYPE};
use schedlab_core::{BenchResult, BenchStatus, Environment, Metric, MetricData, Run, RunKind, RunStatus, ToolInfo};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// One schema step: SQL, then optionally Rust for what SQL cannot express
/// (re-encoding stored JSON by the core model's rules). The pending steps
/// and their `user_version` bumps share one transaction, so an upgrade
/// applies whole or not at all.
struct Migration {
    sql: &'static str,
    rewrite: Option<fn(&Transaction<'_>) -> Result<()>>,
}

/// Migrations, applied in order; the store's schema version is their count.
/// Never edit one that has shipped: stores in the field have already run it.
const MIGRATIONS: &[Migration] = &[
    Migration {
        sql: r#"
CREATE TABLE runs (
    id              INTEGER PRIMARY KEY,
    name            TEXT UNIQUE,
    kind            TEXT NOT NULL,
    status          TEXT NOT NULL,
    started_unix_ms INTEGER NOT NULL,
    ended_unix_ms   INTEGER,
    schema_version  INTEGER NOT NULL,
    tool_name       TEXT NOT NULL,
    tool_version    TEXT NOT NULL,
    git_rev         TEXT,
    command_line    TEXT NOT NULL,   -- JSON array
    host            TEXT NOT NULL,
    env_start       TEXT,            -- JSON Environment
    env_end         TEXT
);
CREATE TABLE benchmarks (
    id              INTEGER PRIMARY KEY,
    run_id          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,
    name            TEXT NOT NULL,
    bench_key       TEXT NOT NULL,   -- name + params, matches a benchmark across runs
    params          TEXT NOT NULL,   -- JSON object
    condition       TEXT NOT NULL,   -- JSON Condition
    condition_label TEXT NOT NULL,
    status          TEXT NOT NULL,   -- JSON BenchStatus
    state           TEXT NOT NULL,   -- complete / incomplete / failed
    started_unix_ms INTEGER NOT NULL,
    ended_unix_ms   INTEGER,
    repetitions     INTEGER NOT NULL,
    warmup          INTEGER NOT NULL,
    warnings        TEXT NOT NULL    -- JSON array
);
CREATE INDEX benchmarks_run ON benchmarks(run_id, seq);
CREATE INDEX benchmarks_key ON benchmarks(bench_key);
CREATE TABLE metrics (
    id           INTEGER PRIMARY KEY,
    benchmark_id INTEGER NOT NULL REFERENCES benchmarks(id) ON DELETE CASCADE,
    seq          INTEGER NOT NULL,
    name         TEXT NOT NULL,
    unit         TEXT NOT NULL,
    direction    TEXT NOT NULL,
    headline     INTEGER NOT NULL,
    data_type    TEXT NOT NULL,      -- samples / histogram / series
    data         TEXT NOT NULL       -- JSON MetricData (raw samples or histogram buckets)
);
CREATE INDEX metrics_bench ON metrics(benchmark_id, seq);
"#,
        rewrite: None,
    },
    Migration {
        sql: r#"
ALTER TABLE benchmarks ADD COLUMN invocation INTEGER NOT NULL DEFAULT 0;
CREATE TABLE noise_profiles (
    id              INTEGER PRIMARY KEY,
    host            TEXT NOT NULL,
    kernel          TEXT,
    created_unix_ms INTEGER NOT NULL,
    run_ids         TEXT NOT NULL,   -- JSON array of run ids
    note            TEXT
);
CREATE INDEX noise_profiles_host ON noise_profiles(host, created_unix_ms);
"#,
        rewrite: Some(upgrade_v1_sim_metrics),
    },
    Migration {
        // Quick mode (smaller default sizes): a heading hides a parameter
        // at the default of the mode it ran in, not of the other.
        sql: "ALTER TABLE benchmarks ADD COLUMN quick INTEGER NOT NULL DEFAULT 0;",
        rewrite: None,
    },
    Migration {
        // A globally unique id per run, by which push and pull copy runs
        // between stores without duplicates; existing runs get one here.
        // The name index serves `history` (runs with a benchmark).
        sql: r#"
ALTER TABLE runs ADD COLUMN uuid TEXT;
CREATE UNIQUE INDEX runs_uuid ON runs(uuid);
CREATE INDEX benchmarks_name ON benchmarks(name, run_id);
"#,
        rewrite: Some(give_runs_uuids),
    },
    Migration {
        // Fleet selectors (`runs --host --kernel`): the kernel release out
        // of the start environment's JSON, where an index can find it.
        sql: r#"
ALTER TABLE runs ADD COLUMN kernel TEXT;
CREATE INDEX runs_host ON runs(host, id);
CREATE INDEX runs_kernel ON runs(kernel, id);
"#,
        rewrite: Some(fill_kernels),
    },
    Migration {
        // Fleet queries: runs selected and grouped by CPU model and by the
        // user's labels (`--label KEY=VALUE`), each through an index.
        sql: r#"
ALTER TABLE runs ADD COLUMN cpu_model TEXT;
CREATE INDEX runs_cpu_model ON runs(cpu_model, id);
CREATE TABLE run_labels (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    key    TEXT NOT NULL,
    value  TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
);
CREATE INDEX run_labels_key ON run_labels(key, value, run_id);
"#,
        rewrite: Some(fill_cpu_models),
    },
    Migration {
        // Each complete case's summary per metric (the pooled figure, its
        // interval and one value per invocation), written with its
        // benchmark: `history` over a fleet reads these, never raw data.
        sql: r#"
CREATE TABLE cases (
    id              INTEGER PRIMARY KEY,
    run_id          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,  -- the benchmark seq of its first complete invocation
    name            TEXT NOT NULL,
    bench_key       TEXT NOT NULL,
    case_condition  TEXT NOT NULL,
    condition_label TEXT NOT NULL,
    params          TEXT NOT NULL,     -- JSON object, the first invocation's
    quick           INTEGER NOT NULL,
    invocations     INTEGER NOT NULL
);
CREATE INDEX cases_name ON cases(name, run_id, seq);
CREATE INDEX cases_run ON cases(run_id);
CREATE TABLE case_metrics (
    case_id    INTEGER NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    name       TEXT NOT NULL,
    unit       TEXT NOT NULL,
    direction  TEXT NOT NULL,
    headline   INTEGER NOT NULL,
    is_default INTEGER NOT NULL,
    histogram  INTEGER NOT NULL,
    value      REAL NOT NULL,
    ci_lo      REAL,
    ci_hi      REAL,
    p99        REAL,
    n          INTEGER NOT NULL,
    replicates TEXT NOT NULL,          -- JSON array, one value per invocation
    PRIMARY KEY (case_id, seq)
);
"#,
        rewrite: Some(summarize_stored_cases),
    },
];

pub const STORE_SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// How long one statement waits for another process that holds the store
/// (SQLite's busy timeout) before reporting it busy. Generous because that
/// process may be running migrations.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// What a command does with the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read only: creates nothing, opens the file read-only, and upgrades an
    /// old schema only when the file can be written.
    Read,
    /// Change an existing store (`schedlab rm`): a missing one is an error.
    Modify,
    /// Write, creating the store and its directory when missing.
    Create,
}

pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    busy_timeout: Duration,
}

/// What an opened file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Schema {
    /// Nothing yet: an empty database.
    New,
    Older(i64),
    Current,
}

/// Another process holds a lock this statement needed, past the busy timeout.
pub(crate) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

/// Name the store in the errors whose cause is the file itself (locked,
/// damaged, read-only, not a database), each with its own fix.
fn locate(path: &Path, e: StoreError) -> StoreError {
    let StoreError::Sql(sql) = e else { return e };
    let path = path.display().to_string();
    match sql.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Busy { path },
        Some(ErrorCode::DatabaseCorrupt) => StoreError::Corrupt { path, reason: sql_message(&sql) },
        Some(ErrorCode::NotADatabase) => StoreError::Foreign { path, what: "it is not a SQLite database".into() },
        Some(ErrorCode::ReadOnly) => StoreError::ReadOnly { path },
        Some(ErrorCode::DiskFull) => StoreError::Full { path },
        _ => StoreError::Sql(sql),
    }
}

/// Runs `$body` (which may use `?`) and names this store in an error that
/// the file itself causes (see [`locate`]).
macro_rules! located {
    ($self:ident, $body:block) => {{
        // The closure is what lets `$body` use `?`.
        #[allow(clippy::redundant_closure_call)]
        let result = (|| -> Result<_> { $body })();
        result.map_err(|e| locate(&$self.path, e))
    }};
}

/// One write transaction. IMMEDIATE takes the write lock at BEGIN, where
/// SQLite's busy timeout applies; a deferred transaction that read first
/// could instead fail at once when it tries to write.
fn write_tx<T>(conn: &mut Connection, f: impl FnOnce(&Transaction<'_>) -> Result<T>) -> Result<T> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let value = f(&tx)?;
    tx.commit()?;
    Ok(value)
}

/// Classify what `conn` holds without changing it, refusing what schedlab
/// must not touch.
fn inspect(conn: &Connection, path: &Path) -> Result<Schema> {
    let shown = || path.display().to_string();
    // One statement, so one snapshot: read separately, the version could
    // predate another process's migration and the tables follow it.
    let (version, objects): (i64, String) = conn.query_row(
        "SELECT user_version, (SELECT json_group_array(json_array(type, name)) FROM sqlite_master
                               WHERE name NOT LIKE 'sqlite_%')
         FROM pragma_user_version",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let objects: Vec<(String, String)> = serde_json::from_str(&objects)?;
    let ours = objects.iter().any(|(kind, name)| kind == "table" && name == "runs");
    if !objects.is_empty() && !ours {
        let mut what: Vec<String> = objects.iter().take(3).map(|(kind, name)| format!("{kind} {name}")).collect();
        if objects.len() > 3 {
            what.push("...".into());
        }
        return Err(StoreError::Foreign { path: shown(), what: format!("it holds {}", what.join(", ")) });
    }
    if version > STORE_SCHEMA_VERSION {
        return Err(StoreError::NewerSchema { path: shown(), found: version, supported: STORE_SCHEMA_VERSION });
    }
    match (version, ours) {
        (0, false) => Ok(Schema::New),
        (0, true) => Err(StoreError::Unversioned { path: shown() }),
        (v, false) => Err(StoreError::Foreign {
            path: shown(),
            what: format!("it has store schema version {v} but no runs table"),
        }),
        (v, true) if v == STORE_SCHEMA_VERSION => Ok(Schema::Current),
        (v, true) => Ok(Schema::Older(v)),
    }
}

/// The error for a store path that does not exist.
fn missing(path: &Path) -> StoreError {
    let shown = path.display().to_string();
    for dir in path.ancestors().skip(1).filter(|d| !d.as_os_str().is_empty()) {
        match dir.try_exists() {
            Ok(false) => continue,
            Ok(true) if dir.is_dir() => break,
            Ok(true) => {
                let reason = format!("{} is not a directory", dir.display());
                return StoreError::Unreadable { path: shown, reason };
            }
            Err(e) => return StoreError::Unreadable { path: shown, reason: format!("{}: {e}", dir.display()) },
        }
    }
    StoreError::NoStore { path: shown }
}

/// `file:` URI reading `path` as immutable: no locks, no -shm file.
fn immutable_uri(path: &Path) -> Option<String> {
    let mut uri = String::from("file:");
    for c in path.to_str()?.chars() {
        match c {
            '%' => uri.push_str("%25"),
            '?' => uri.push_str("%3f"),
            '#' => uri.push_str("%23"),
            c => uri.push(c),
        }
    }
    uri.push_str("?immutable=1");
    Some(uri)
}

/// `reason` with the run's identity, for an error reading run `id`: data
/// that cannot be decoded becomes [`StoreError::BadRun`], anything else
/// passes through.
fn bad_run(id: i64, name: Option<String>, e: StoreError) -> StoreError {
    let reason = match e {
        StoreError::BadRun { reason, .. } => reason,
        StoreError::Decode(e) => e.to_string(),
        StoreError::Sql(e) if is_conversion(&e) => e.to_string(),
        other => return other,
    };
    StoreError::BadRun { id, name, reason }
}

/// A column whose stored value is not of the type schedlab wrote.
fn is_conversion(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::FromSqlConversionFailure(..)
            | rusqlite::Error::IntegralValueOutOfRange(..)
            | rusqlite::Error::InvalidColumnType(..)
    )
}

/// What in a run could not be decoded: `what` names the field.
fn bad_field(run_id: i64, what: &str, e: StoreError) -> StoreError {
    match e {
        StoreError::Decode(e) => StoreError::BadRun { id: run_id, name: None, reason: format!("{what}: {e}") },
        StoreError::Sql(e) if is_conversion(&e) => {
            StoreError::BadRun { id: run_id, name: None, reason: format!("{what}: {e}") }
        }
        other => other,
    }
}

/// A JSON column of run `run_id`; `what` names it in the error.
pub(crate) fn decode_json<T: serde::de::DeserializeOwned>(run_id: i64, what: &str, text: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| bad_field(run_id, what, e.into()))
}

pub(crate) fn json_str<T: serde::Serialize>(v: &T) -> Result<String> {
    Ok(serde_json::to_string(v)?)
}

pub(crate) fn enum_name<T: serde::Serialize>(v: &T) -> Result<String> {
    Ok(serde_json::to_value(v)?.as_str().unwrap_or_default().to_string())
}

pub(crate) fn enum_from<T: serde::de::DeserializeOwned>(s: &str) -> Result<T> {
    Ok(serde_json::from_value(serde_json::Value::String(s.to_string()))?)
}

/// The data's `type` tag and its JSON; the tag has its own column so that
/// queries (and migrations) can select by kind without parsing JSON.
pub(crate) fn encode_data(data: &MetricData) -> Result<(String, String)> {
    let json = serde_json::to_value(data)?;
    let data_type = json.get("type").and_then(|t| t.as_str()).unwrap_or("samples").to_string();
    Ok((data_type, json.to_string()))
}

/// A metrics row as stored; decoded outside the row callback so that bad
/// JSON reports as [`StoreError::Decode`], not as an SQL error.
pub(crate) struct StoredMetric {
    pub(crate) name: String,
    pub(crate) unit: String,
    pub(crate) direction: String,
    pub(crate) headline: bool,
    pub(crate) data_type: String,
    pub(crate) data: String,
}

impl StoredMetric {
    /// Reads columns `name, unit, direction, headline, data_type, data`
    /// starting at `at`.
    fn read(r: &Row<'_>, at: usize) -> rusqlite::Result<StoredMetric> {
        Ok(StoredMetric {
            name: r.get(at)?,
            unit: r.get(at + 1)?,
            direction: r.get(at + 2)?,
            headline: r.get(at + 3)?,
            data_type: r.get(at + 4)?,
            data: r.get(at + 5)?,
        })
    }

    pub(crate) fn decode(self) -> Result<Metric> {
        Ok(Metric {
            name: self.name,
            unit: enum_from(&self.unit)?,
            direction: enum_from(&self.direction)?,
            headline: self.headline,
            data: MetricData::from_json_of_type(&self.data_type, &self.data)?,
        })
    }

    /// A result's timeline rides in the metrics table as a row of its own
    /// data type (no schema change); it is never read as a metric.
    pub(crate) fn of_timeline(t: &Timeline) -> Result<StoredMetric> {
        Ok(StoredMetric {
            name: TIMELINE_DATA_TYPE.into(),
            unit: enum_name(&schedlab_core::Unit::Count)?,
            direction: enum_name(&schedlab_core::Direction::Neutral)?,
            headline: false,
            data_type: TIMELINE_DATA_TYPE.into(),
            data: json_str(t)?,
        })
    }

    /// A benchmark's stored rows: its metrics and its timeline, if any.
    pub(crate) fn decode_all(rows: Vec<StoredMetric>) -> Result<(Vec<Metric>, Option<Timeline>)> {
        let (mut metrics, mut timeline) = (Vec::with_capacity(rows.len()), None);
        for r in rows {
            if r.data_type == TIMELINE_DATA_TYPE {
                timeline = Some(serde_json::from_str(&r.data)?);
            } else {
                metrics.push(r.decode()?);
            }
        }
        Ok((metrics, timeline))
    }
}

/// Migration 2's data step: schema 1 stored the simulator's per-task values
/// as repetition samples; they become entity-labelled data.
fn upgrade_v1_sim_metrics(tx: &Transaction<'_>) -> Result<()> {
    let legacy = tx
        .prepare(
            "SELECT m.id, b.name, m.name, m.unit, m.direction, m.headline, m.data_type, m.data
             FROM metrics m JOIN benchmarks b ON b.id = m.benchmark_id
             WHERE substr(b.name, 1, 4) = 'sim:' AND m.data_type = 'samples'
               AND m.name IN ('cpu_share', 'fair_share_error')",
        )?
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, StoredMetric::read(r, 2))))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut update = tx.prepare("UPDATE metrics SET data_type = ?2, data = ?3 WHERE id = ?1")?;
    for (id, bench_name, stored) in legacy {
        // A row that cannot be decoded is left as it is: failing here would
        // make the whole store unopenable, while reading reports that one
        // run (naming it) and `schedlab rm` can remove it.
        let Ok(mut metric) = stored.map_err(StoreError::from).and_then(StoredMetric::decode) else { continue };
        if upgrade_v1_metric(&bench_name, &mut metric) {
            let (data_type, data) = encode_data(&metric.data)?;
            update.execute(params![id, data_type, data])?;
        }
    }
    Ok(())
}

/// Migration 4's data step: a uuid for every run stored before it.
fn give_runs_uuids(tx: &Transaction<'_>) -> Result<()> {
    let ids = tx
        .prepare("SELECT id FROM runs WHERE uuid IS NULL")?
        .query_map([], |r| r.get::<_, i64>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut update = tx.prepare("UPDATE runs SET uuid = ?2 WHERE id = ?1")?;
    for id in ids {
        update.execute(params![id, Uuid::new_v4().to_string()])?;
    }
    Ok(())
}

/// Migration 5's data step: each run's kernel release, where its start
/// environment can be read (one that cannot stays without, as a new run
/// without an environment does).
fn fill_kernels(tx: &Transaction<'_>) -> Result<()> {
    let rows = tx
        .prepare("SELECT id, CAST(env_start AS TEXT) FROM runs WHERE env_start IS NOT NULL")?
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Option<String>>(1)?)))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut update = tx.prepare("UPDATE runs SET kernel = ?2 WHERE id = ?1")?;
    for (id, env) in rows {
        // Only the one field, as PostgreSQL's migration reads it.
        let kernel = env
            .and_then(|e| serde_json::from_str::<serde_json::Value>(&e).ok())
            .and_then(|e| e.get("kernel_release")?.as_str().map(String::from));
        if kernel.is_some() {
            update.execute(params![id, kernel])?;
        }
    }
    Ok(())
}

/// Migration 6's data step: each run's CPU model, as [`fill_kernels`] does
/// the kernel.
fn fill_cpu_models(tx: &Transaction<'_>) -> Result<()> {
    let rows = tx
        .prepare("SELECT id, CAST(env_start AS TEXT) FROM runs WHERE env_start IS NOT NULL")?
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Option<String>>(1)?)))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut update = tx.prepare("UPDATE runs SET cpu_model = ?2 WHERE id = ?1")?;
    for (id, env) in rows {
        let cpu = env
            .and_then(|e| serde_json::from_str::<serde_json::Value>(&e).ok())
            .and_then(|e| e.get("cpu_model")?.as_str().map(String::from));
        if cpu.is_some() {
            update.execute(params![id, cpu])?;
        }
    }
    Ok(())
}

/// SQLite's spelling of [`filter_sql`].
const SQLITE: Dialect = Dialect {
    placeholder: |n, _| format!("?{n}"),
    position: |haystack, needle| format!("instr({haystack}, {needle})"),
};

fn bind(params: &[Param]) -> Vec<rusqlite::types::Value> {
    params
        .iter()
        .map(|p| match p {
            Param::Text(t) => rusqlite::types::Value::Text(t.clone()),
            Param::Int(i) => rusqlite::types::Value::Integer(*i),
        })
        .collect()
}

const NOISE_PROFILE_COLUMNS: &str = "id, host, kernel, created_unix_ms, run_ids, note";

/// A profile row from NOISE_PROFILE_COLUMNS: its id, and the profile or why
/// it cannot be read.
fn noise_profile_from(r: &Row<'_>) -> rusqlite::Result<(i64, Result<NoiseProfileRecord>)> {
    let id: i64 = r.get(0)?;
    let fields = (|| -> rusqlite::Result<(NoiseProfileRecord, String)> {
        let profile = NoiseProfileRecord {
            id: Some(id),
            host: r.get(1)?,
            kernel: r.get(2)?,
            created_unix_ms: r.get(3)?,
            run_ids: Vec::new(),
            note: r.get(5)?,
        };
        Ok((profile, r.get(4)?))
    })();
    let profile = fields.map_err(StoreError::from).and_then(|(mut profile, run_ids)| {
        profile.run_ids = serde_json::from_str(&run_ids)?;
        Ok(profile)
    });
    Ok((id, profile))
}

fn decode_noise_profile((id, profile): (i64, Result<NoiseProfileRecord>)) -> Result<NoiseProfileRecord> {
    profile.map_err(|e| match e {
        StoreError::Decode(e) => StoreError::BadProfile { id, reason: e.to_string() },
        StoreError::Sql(e) if is_conversion(&e) => StoreError::BadProfile { id, reason: e.to_string() },
        other => other,
    })
}

/// Insert a run's header row.
fn insert_run_row(c: &Connection, run: &Run, uuid: Uuid) -> Result<i64> {
    check_labels(run)?;
    if let Some(name) = &run.name {
        let taken: Option<i64> = c.query_row("SELECT id FROM runs WHERE name = ?1", [name], |r| r.get(0)).optional()?;
        if taken.is_some() {
            return Err(StoreError::NameTaken(name.clone()));
        }
    }
    c.execute(
        "INSERT INTO runs (name, kind, status, started_unix_ms, ended_unix_ms, schema_version, tool_name,
                           tool_version, git_rev, command_line, host, env_start, env_end,
                           uuid, kernel, cpu_model)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        params![
            run.name,
            run.kind.name(),
            run.status.name(),
            run.started_unix_ms,
            run.ended_unix_ms,
            run.schema_version,
            run.tool.name,
            run.tool.version,
            run.tool.git_rev,
            json_str(&stored_command_line(&run.command_line))?,
            run.host,
            run.env_start.as_ref().map(json_str).transpose()?,
            run.env_end.as_ref().map(json_str).transpose()?,
            uuid.to_string(),
            run.env_start.as_ref().and_then(|e| e.kernel_release.as_deref()),
            run.env_start.as_ref().and_then(|e| e.cpu_model.as_deref()),
        ],
    )?;
    let id = c.last_insert_rowid();
    let mut label = c.prepare("INSERT INTO run_labels (run_id, key, value) VALUES (?1, ?2, ?3)")?;
    for (k, v) in &run.labels {
        label.execute(params![id, k, v])?;
    }
    Ok(id)
}

/// Insert a benchmark row marked incomplete ("started, never finished").
fn insert_benchmark_row(c: &Connection, run_id: i64, bench: &BenchResult) -> Result<i64> {
    let seq: i64 = c.query_row("SELECT count(*) FROM benchmarks WHERE run_id = ?1", [run_id], |r| r.get(0))?;
    let status = BenchStatus::Incomplete { reason: "started, never finished".into() };
    c.execute(
        "INSERT INTO benchmarks (run_id, seq, name, bench_key, params, condition, condition_label, status, state,
                                 started_unix_ms, ended_unix_ms, repetitions, warmup, warnings, invocation, quick)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, NULL, 0, 0, '[]', ?11, ?12)",
        params![
            run_id,
            seq,
            bench.name,
            bench.key(),
            json_str(&bench.params)?,
            json_str(&bench.condition)?,
            bench.condition.label(),
            json_str(&status)?,
            status.name(),
            bench.started_unix_ms,
            bench.invocation,
            bench.quick,
        ],
    )
    .map_err(|e| match e.sqlite_error_code() {
        Some(ErrorCode::ConstraintViolation) => StoreError::Gone(format!("run #{run_id}")),
        _ => e.into(),
    })?;
    Ok(c.last_insert_rowid())
}

/// Write a finished benchmark over its row, metrics included.
fn write_benchmark(c: &Connection, bench_id: i64, bench: &BenchResult) -> Result<()> {
    // JSON has no NaN or infinity: such a value would be written as null
    // and the run could never be read back.
    if let Some((m, v)) = bench.metrics.iter().find_map(|m| m.first_non_finite().map(|v| (m, v))) {
        return Err(StoreError::Unstorable(format!(
            "{} {} holds {v}, which cannot be stored: this is a defect in the benchmark, please report it",
            bench.key(),
            m.name
        )));
    }
    let changed = c.execute(
        "UPDATE benchmarks SET name = ?2, bench_key = ?3, params = ?4, condition = ?5, condition_label = ?6,
                status = ?7, state = ?8, started_unix_ms = ?9, ended_unix_ms = ?10, repetitions = ?11,
                warmup = ?12, warnings = ?13, invocation = ?14, quick = ?15
         WHERE id = ?1",
        params![
            bench_id,
            bench.name,
            bench.key(),
            json_str(&bench.params)?,
            json_str(&bench.condition)?,
            bench.condition.label(),
            json_str(&bench.status)?,
            bench.status.name(),
            bench.started_unix_ms,
            bench.ended_unix_ms,
            bench.repetitions,
            bench.warmup,
            json_str(&bench.warnings)?,
            bench.invocation,
            bench.quick,
        ],
    )?;
    // An UPDATE of a removed row succeeds and changes nothing: the result
    // would vanish without a word.
    if changed == 0 {
        return Err(StoreError::Gone(format!("the row of {} (benchmark #{bench_id})", bench.key())));
    }
    c.execute("DELETE FROM metrics WHERE benchmark_id = ?1", [bench_id])?;
    let mut stmt = c.prepare(
        "INSERT INTO metrics (benchmark_id, seq, name, unit, direction, headline, data_type, data)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    for (seq, m) in bench.metrics.iter().enumerate() {
        let (data_type, data) = encode_data(&m.data)?;
        stmt.execute(params![
            bench_id,
            seq as i64,
            m.name,
            enum_name(&m.unit)?,
            enum_name(&m.direction)?,
            m.headline,
            data_type,
            data
        ])?;
    }
    if let Some(t) = &bench.timeline {
        let r = StoredMetric::of_timeline(t)?;
        stmt.execute(params![
            bench_id,
            bench.metrics.len() as i64,
            r.name,
            r.unit,
            r.direction,
            r.headline,
            r.data_type,
            r.data
        ])?;
    }
    Ok(())
}

/// Migration 7: the summaries of every stored run's complete cases. A run
/// whose data cannot be decoded gets none (its own error shows elsewhere).
fn summarize_stored_cases(tx: &Transaction<'_>) -> Result<()> {
    let ids: Vec<i64> =
        tx.prepare("SELECT id FROM runs ORDER BY id")?.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
    for id in ids {
        let Ok(benches) = load_benchmarks(tx, id, None) else { continue };
        let with_seq: Vec<(i64, &BenchResult)> = benches.iter().map(|(_, seq, b)| (*seq, b)).collect();
        insert_cases(tx, id, &with_seq)?;
    }
    Ok(())
}

/// Store the summaries of the cases among `benches` (each with its
/// benchmark seq, in order), as [`case_summaries`] makes them.
fn insert_cases(c: &Connection, run_id: i64, benches: &[(i64, &BenchResult)]) -> Result<()> {
    let mut case_row = c.prepare_cached(
        "INSERT INTO cases (run_id, seq, name, bench_key, case_condition, condition_label, params, quick, invocations)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?;
    let mut metric_row = c.prepare_cached(
        "INSERT INTO case_metrics (case_id, seq, name, unit, direction, headline, is_default, histogram, value,
                                   ci_lo, ci_hi, p99, n, replicates)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    )?;
    for case in case_summaries(benches.iter().map(|(_, b)| *b)) {
        case_row.execute(params![
            run_id,
            first_seq(benches, &case),
            case.name,
            case.key,
            case.case_condition,
            case.condition,
            json_str(&case.params)?,
            case.quick,
            case.invocations,
        ])?;
        let case_id = c.last_insert_rowid();
        for (seq, m) in case.metrics.iter().enumerate() {
            metric_row.execute(params![
                case_id,
                seq as i64,
                m.name,
                enum_name(&m.unit)?,
                enum_name(&m.direction)?,
                m.headline,
                m.default,
                m.histogram,
                m.value,
                m.ci.map(|i| i.lo),
                m.ci.map(|i| i.hi),
                m.p99,
                m.n as i64,
                json_str(&m.replicates)?,
            ])?;
        }
    }
    Ok(())
}

/// Re-summarise the case of a benchmark just written, over every complete
/// invocation of it in the run.
fn refresh_case(c: &Connection, bench_id: i64, bench: &BenchResult) -> Result<()> {
    let (run_id, seq): (i64, i64) =
        c.query_row("SELECT run_id, seq FROM benchmarks WHERE id = ?1", [bench_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    let (key, condition) = (bench.key(), bench.condition.case_label());
    let others: bool = c.query_row(
        "SELECT EXISTS (SELECT 1 FROM benchmarks WHERE run_id = ?1 AND bench_key = ?2 AND state = 'complete' AND id <> ?3)",
        params![run_id, key, bench_id],
        |r| r.get(0),
    )?;
    // Other invocations are decoded only when there are some: a run of
    // one invocation per case reads nothing back.
    let stored = if others { load_benchmarks(c, run_id, Some(&bench.name))? } else { Vec::new() };
    let invocations = case_invocations(stored.iter().map(|(id, seq, b)| (*id, *seq, b)), bench_id, seq, bench);
    c.execute(
        "DELETE FROM case_metrics WHERE case_id IN
            (SELECT id FROM cases WHERE run_id = ?1 AND bench_key = ?2 AND case_condition = ?3)",
        params![run_id, key, condition],
    )?;
    c.execute(
        "DELETE FROM cases WHERE run_id = ?1 AND bench_key = ?2 AND case_condition = ?3",
        params![run_id, key, condition],
    )?;
    insert_cases(c, run_id, &invocations)
}

/// A row of [`history_sql`]'s query.
fn history_case(r: &Row<'_>) -> Result<(RunHead, CaseSummary)> {
    let run_id: i64 = r.get(0)?;
    let head = RunHead::new(Some(run_id), r.get::<_, Option<String>>(1)?.as_deref(), r.get(2)?, r.get(3)?, r.get(4)?);
    let interval = |lo: Option<f64>, hi: Option<f64>| Some(Interval { lo: lo?, hi: hi? });
    let metric = MetricSummary {
        name: r.get(12)?,
        unit: enum_from(&r.get::<_, String>(13)?)?,
        direction: enum_from(&r.get::<_, String>(14)?)?,
        headline: r.get(15)?,
        default: r.get(16)?,
        histogram: r.get(17)?,
        value: r.get(18)?,
        ci: interval(r.get(19)?, r.get(20)?),
        p99: r.get(21)?,
        n: r.get::<_, i64>(22)? as u64,
        replicates: decode_json(run_id, "a case summary", &r.get::<_, String>(23)?)?,
    };
    let case = CaseSummary {
        name: r.get(5)?,
        key: r.get(6)?,
        case_condition: r.get(7)?,
        condition: r.get(8)?,
        params: decode_json(run_id, "a case's params", &r.get::<_, String>(9)?)?,
        quick: r.get(10)?,
        invocations: r.get(11)?,
        metrics: vec![metric],
    };
    Ok((head, case))
}

/// A complete run (simulated, imported or copied) inside one transaction.
fn insert_whole_run(tx: &Connection, run: &Run, uuid: Uuid) -> Result<i64> {
    let id = insert_run_row(tx, run, uuid)?;
    for b in &run.benchmarks {
        let bench_id = insert_benchmark_row(tx, id, b)?;
        write_benchmark(tx, bench_id, b)?;
    }
    insert_cases(tx, id, &in_order(&run.benchmarks))?;
    let ended = run.ended_unix_ms.unwrap_or(run.started_unix_ms);
    write_run_end(tx, id, run.status, ended, run.env_end.as_ref())?;
    Ok(id)
}

fn write_run_end(
    c: &Connection,
    run_id: i64,
    status: RunStatus,
    ended_unix_ms: i64,
    env_end: Option<&Environment>,
) -> Result<()> {
    let changed = c.execute(
        "UPDATE runs SET status = ?2, ended_unix_ms = ?3, env_end = ?4 WHERE id = ?1",
        params![run_id, status.name(), ended_unix_ms, env_end.map(json_str).transpose()?],
    )?;
    if changed == 0 {
        return Err(StoreError::Gone(format!("run #{run_id}")));
    }
    Ok(())
}

impl SqliteStore {
    /// Open (creating if needed) the store at `path` and bring its schema up
    /// to date. Refuses a store written by a newer schema, and any file that
    /// is not a schedlab store.
    pub fn open(path: &Path) -> Result<SqliteStore> {
        SqliteStore::open_with(path, Access::Create, DEFAULT_BUSY_TIMEOUT)
    }

    /// Open the store at `path` for reading only (see [`Access::Read`]).
    pub fn open_read_only(path: &Path) -> Result<SqliteStore> {
        SqliteStore::open_with(path, Access::Read, DEFAULT_BUSY_TIMEOUT)
    }

    /// Open the store at `path` for `access`; each statement waits up to
    /// `busy_timeout` for another process that holds the store.
    pub fn open_with(path: &Path, access: Access, busy_timeout: Duration) -> Result<SqliteStore> {
        if access != Access::Create && !path.try_exists().unwrap_or(false) {
            return Err(missing(path));
        }
        match access {
            Access::Read => SqliteStore::open_for_reading(path, busy_timeout),
            Access::Modify | Access::Create => {
                let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                if access == Access::Create {
                    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                        std::fs::create_dir_all(dir).map_err(|e| StoreError::Open {
                            path: path.display().to_string(),
                            reason: e.to_string(),
                        })?;
                    }
                    flags |= OpenFlags::SQLITE_OPEN_CREATE;
                }
                let mut store = SqliteStore::connect(path, path.as_os_str(), flags, busy_timeout)?;
                store.prepare_for_writing().map_err(|e| SqliteStore::open_error(path, access, e))?;
                Ok(store)
            }
        }
    }

    /// A private in-memory store (tests, `--db :memory:`).
    pub fn in_memory() -> Result<SqliteStore> {
        let conn = Connection::open_in_memory()?;
        let mut store = SqliteStore { conn, path: PathBuf::from(":memory:"), busy_timeout: DEFAULT_BUSY_TIMEOUT };
        store.conn.pragma_update(None, "foreign_keys", "ON")?;
        store.migrate()?;
        Ok(store)
    }

    /// The busy timeout (see [`SqliteStore::open_with`]).
    pub fn busy_timeout(&self) -> Duration {
        self.busy_timeout
    }

    /// Change the busy timeout, e.g. for one quick attempt.
    pub fn set_busy_timeout(&mut self, timeout: Duration) -> Result<()> {
        self.conn.busy_timeout(timeout)?;
        self.busy_timeout = timeout;
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn connect(path: &Path, target: &std::ffi::OsStr, flags: OpenFlags, busy: Duration) -> Result<SqliteStore> {
        let reading = !flags.contains(OpenFlags::SQLITE_OPEN_READ_WRITE);
        let open_err = |e: rusqlite::Error| {
            let (path, reason) = (path.display().to_string(), sql_message(&e));
            if reading {
                StoreError::Unreadable { path, reason }
            } else {
                StoreError::Open { path, reason }
            }
        };
        let conn = Connection::open_with_flags(target, flags).map_err(open_err)?;
        // First, so that every statement below waits for a concurrent
        // opener (which may be running migrations) rather than failing.
        conn.busy_timeout(busy).map_err(open_err)?;
        Ok(SqliteStore { conn, path: path.to_path_buf(), busy_timeout: busy })
    }

    /// An error met while opening, with the hint that fits `access`.
    fn open_error(path: &Path, access: Access, e: StoreError) -> StoreError {
        match locate(path, e) {
            StoreError::Sql(e) => {
                let (path, reason) = (path.display().to_string(), sql_message(&e));
                match access {
                    Access::Read => StoreError::Unreadable { path, reason },
                    _ => StoreError::Open { path, reason },
                }
            }
            other => other,
        }
    }

    fn open_for_reading(path: &Path, busy: Duration) -> Result<SqliteStore> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut store = SqliteStore::connect(path, path.as_os_str(), flags, busy)?;
        let found = match inspect(&store.conn, path) {
            // A WAL store in a directory this user cannot write (another
            // user's, or a read-only mount) whose writers have all closed it:
            // SQLite would have to create the -shm file to read it. With no
            // -wal file there is nothing to read beyond the main file, so
            // reading that as immutable sees the whole store.
            Err(StoreError::Sql(e))
                if matches!(e.sqlite_error_code(), Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen))
                    && !wal_path(path).exists() =>
            {
                let Some(uri) = immutable_uri(path) else {
                    return Err(SqliteStore::open_error(path, Access::Read, StoreError::Sql(e)));
                };
                store = SqliteStore::connect(path, uri.as_ref(), flags | OpenFlags::SQLITE_OPEN_URI, busy)?;
                inspect(&store.conn, path)
            }
            other => other,
        }
        .map_err(|e| SqliteStore::open_error(path, Access::Read, e))?;
        match found {
            Schema::Current => Ok(store),
            // An empty file: a writing command would make it a store.
            Schema::New => Err(StoreError::NoStore { path: path.display().to_string() }),
            Schema::Older(found) => {
                drop(store);
                // A store this user can write is upgraded as any writing
                // command would upgrade it; one it cannot is not read with
                // queries written for another schema.
                let why = match SqliteStore::open_with(path, Access::Modify, busy) {
                    Ok(_) => return SqliteStore::open_for_reading(path, busy),
                    Err(StoreError::ReadOnly { .. }) => "it is read-only for this user".to_string(),
                    Err(StoreError::Open { reason, .. } | StoreError::Unreadable { reason, .. }) => reason,
                    Err(StoreError::Sql(e)) => sql_message(&e),
                    Err(other) => return Err(other),
                };
                Err(StoreError::OlderSchema {
                    path: path.display().to_string(),
                    found,
                    supported: STORE_SCHEMA_VERSION,
                    reason: why,
                })
            }
        }
    }

    fn prepare_for_writing(&mut self) -> Result<()> {
        // Look before changing anything: even the switch to WAL below would
        // change a file that is not a schedlab store.
        inspect(&self.conn, &self.path)?;
        // WAL keeps readers working during a run and makes each commit cheap
        // and atomic.
        self.enable_wal()?;
        self.conn.pragma_update(None, "synchronous", "NORMAL")?;
        self.conn.pragma_update(None, "foreign_keys", "ON")?;
        self.migrate()
    }

    /// The switch to WAL upgrades a read lock to a write lock, and SQLite
    /// refuses such an upgrade at once (waiting could deadlock) instead of
    /// calling the busy handler. Only a store being created by several
    /// processes at once meets this, so retrying is enough.
    fn enable_wal(&self) -> rusqlite::Result<()> {
        let deadline = Instant::now() + self.busy_timeout;
        loop {
            match self.conn.pragma_update(None, "journal_mode", "WAL") {
                Err(e) if is_busy(&e) && Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                done => return done,
            }
        }
    }

    fn migrate(&mut self) -> Result<()> {
        // The version only ever grows, so an up-to-date store is settled
        // without a write lock and never waits for a process writing.
        if inspect(&self.conn, &self.path)? == Schema::Current {
            return Ok(());
        }
        // IMMEDIATE takes the write lock before the schema is read again:
        // two processes creating the same store serialize here, and the
        // second finds the first's tables instead of creating them again.
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found = match inspect(&tx, &self.path)? {
            Schema::Current => return Ok(()),
            Schema::New => 0,
            Schema::Older(v) => v,
        };
        for (i, step) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            tx.execute_batch(step.sql)?;
            if let Some(rewrite) = step.rewrite {
                rewrite(&tx)?;
            }
            tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        }
        tx.commit()?;
        Ok(())
    }

    pub fn schema_version(&self) -> Result<i64> {
        Ok(self.conn.pragma_query_value(None, "user_version", |r| r.get(0))?)
    }
}

/// Run `id`, with only its benchmarks named `bench` when given.
fn read_run(c: &Connection, id: i64, bench: Option<&str>) -> Result<Run> {
    let row = c
        .prepare_cached(
            "SELECT name, kind, status, started_unix_ms, ended_unix_ms, schema_version, tool_name, tool_version,
                    git_rev, command_line, host, env_start, env_end
             FROM runs WHERE id = ?1",
        )?
        .query_row([id], |r| {
            Ok((
                r.get::<_, Option<String>>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, Option<i64>>(4)?,
                r.get::<_, u32>(5)?,
                r.get::<_, String>(6)?,
                r.get::<_, String>(7)?,
                r.get::<_, Option<String>>(8)?,
                r.get::<_, String>(9)?,
                r.get::<_, String>(10)?,
                r.get::<_, Option<String>>(11)?,
                r.get::<_, Option<String>>(12)?,
            ))
        })
        .optional()?
        .ok_or_else(|| StoreError::NoSuchRun(id.to_string()))?;
    let (name, kind, status, started, ended, schema_version, tool_name, tool_version, git_rev, cmd, host, es, ee) = row;
    let field = |what: &'static str| move |e| bad_field(id, what, e);
    let decode_env = |s: Option<String>| -> Result<Option<Environment>> {
        s.map(|s| serde_json::from_str(&s)).transpose().map_err(Into::into)
    };
    Ok(Run {
        schema_version,
        id: Some(id),
        name,
        kind: enum_from::<RunKind>(&kind).map_err(field("kind"))?,
        status: enum_from::<RunStatus>(&status).map_err(field("status"))?,
        started_unix_ms: started,
        ended_unix_ms: ended,
        tool: ToolInfo { name: tool_name, version: tool_version, git_rev },
        command_line: decode_json(id, "command line", &cmd)?,
        host,
        env_start: decode_env(es).map_err(field("start environment"))?,
        env_end: decode_env(ee).map_err(field("end environment"))?,
        benchmarks: load_benchmarks(c, id, bench)?.into_iter().map(|(_, _, b)| b).collect(),
        labels: c
            .prepare_cached("SELECT key, value FROM run_labels WHERE run_id = ?1 ORDER BY key")?
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()
            .map_err(|e| bad_field(id, "labels", e.into()))?,
    })
}

/// A run's benchmark rows (only those named `bench`, when given) in order,
/// each with its row id and seq.
fn load_benchmarks(c: &Connection, run_id: i64, bench: Option<&str>) -> Result<Vec<(i64, i64, BenchResult)>> {
    let mut stmt = c.prepare_cached(
        "SELECT id, name, params, condition, status, started_unix_ms, ended_unix_ms, repetitions, warmup, warnings,
                invocation, quick, seq
         FROM benchmarks WHERE run_id = ?1 AND (?2 IS NULL OR name = ?2) ORDER BY seq",
    )?;
    let rows = stmt
        .query_map(params![run_id, bench], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, i64>(5)?,
                r.get::<_, Option<i64>>(6)?,
                r.get::<_, u32>(7)?,
                r.get::<_, u32>(8)?,
                r.get::<_, String>(9)?,
                r.get::<_, u32>(10)?,
                r.get::<_, bool>(11)?,
                r.get::<_, i64>(12)?,
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(|e| bad_field(run_id, "a benchmark row", e.into()))?;
    let mut out = Vec::with_capacity(rows.len());
    for (id, name, params, condition, status, started, ended, reps, warmup, warnings, invocation, quick, seq) in rows {
        let what = |field: &str| format!("{field} of {name}");
        let (metrics, timeline) = load_metrics(c, id).map_err(|e| bad_field(run_id, &what("a metric"), e))?;
        out.push((
            id,
            seq,
            BenchResult {
                params: decode_json(run_id, &what("params"), &params)?,
                condition: decode_json(run_id, &what("condition"), &condition)?,
                invocation,
                status: decode_json(run_id, &what("status"), &status)?,
                started_unix_ms: started,
                ended_unix_ms: ended,
                repetitions: reps,
                warmup,
                metrics,
                warnings: decode_json(run_id, &what("warnings"), &warnings)?,
                quick,
                timeline,
                name,
            },
        ));
    }
    Ok(out)
}

fn load_metrics(c: &Connection, bench_id: i64) -> Result<(Vec<Metric>, Option<Timeline>)> {
    let mut stmt = c.prepare_cached(
        "SELECT name, unit, direction, headline, data_type, data FROM metrics WHERE benchmark_id = ?1 ORDER BY seq",
    )?;
    let rows = stmt.query_map([bench_id], |r| StoredMetric::read(r, 0))?.collect::<rusqlite::Result<Vec<_>>>()?;
    StoredMetric::decode_all(rows)
}

/// The WAL file SQLite keeps beside `path`.
fn wal_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

impl Store for SqliteStore {
    fn create_run(&mut self, run: &Run) -> Result<i64> {
        located!(self, { write_tx(&mut self.conn, |tx| insert_run_row(tx, run, Uuid::new_v4())) })
    }

    fn begin_benchmark(&mut self, run_id: i64, bench: &BenchResult) -> Result<i64> {
        located!(self, { write_tx(&mut self.conn, |tx| insert_benchmark_row(tx, run_id, bench)) })
    }

    fn finish_benchmark(&mut self, bench_id: i64, bench: &BenchResult) -> Result<()> {
        located!(self, {
            write_tx(&mut self.conn, |tx| {
                write_benchmark(tx, bench_id, bench)?;
                refresh_case(tx, bench_id, bench)
            })
        })
    }

    fn finish_run(
        &mut self,
        run_id: i64,
        status: RunStatus,
        ended_unix_ms: i64,
        env_end: Option<&Environment>,
    ) -> Result<()> {
        located!(self, { write_tx(&mut self.conn, |tx| write_run_end(tx, run_id, status, ended_unix_ms, env_end)) })
    }

    fn insert_run(&mut self, run: &Run) -> Result<i64> {
        located!(self, { write_tx(&mut self.conn, |tx| insert_whole_run(tx, run, Uuid::new_v4())) })
    }

    fn insert_run_as(&mut self, run: &Run, uuid: Uuid) -> Result<Inserted> {
        located!(self, {
            write_tx(&mut self.conn, |tx| {
                // Looked up inside the write transaction: no other writer
                // can add the same uuid between the look and the insert.
                match tx
                    .query_row("SELECT id FROM runs WHERE uuid = ?1", [uuid.to_string()], |r| r.get(0))
                    .optional()?
                {
                    Some(id) => Ok(Inserted::Present(id)),
                    None => insert_whole_run(tx, run, uuid).map(Inserted::Added),
                }
            })
        })
    }

    fn run_uuid(&self, id: i64) -> Result<Uuid> {
        located!(self, {
            let text: Option<String> = self
                .conn
                .query_row("SELECT CAST(uuid AS TEXT) FROM runs WHERE id = ?1", [id], |r| r.get(0))
                .optional()?
                .ok_or_else(|| StoreError::NoSuchRun(id.to_string()))?;
            let text = text.unwrap_or_default();
            Uuid::parse_str(&text).map_err(|e| StoreError::BadRun {
                id,
                name: None,
                reason: format!("uuid '{text}': {e}"),
            })
        })
    }

    fn find_uuid(&self, uuid: Uuid) -> Result<Option<i64>> {
        located!(self, {
            Ok(self
                .conn
                .query_row("SELECT id FROM runs WHERE uuid = ?1", [uuid.to_string()], |r| r.get(0))
                .optional()?)
        })
    }

    fn run_ids(&self) -> Result<Vec<i64>> {
        located!(self, {
            let mut stmt = self.conn.prepare("SELECT id FROM runs ORDER BY id")?;
            let ids = stmt.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<Vec<i64>>>()?;
            Ok(ids)
        })
    }

    fn local_path(&self) -> Option<&Path> {
        Some(&self.path)
    }

    fn busy_timeout(&self) -> Duration {
        self.busy_timeout
    }

    fn set_busy_timeout(&mut self, timeout: Duration) -> Result<()> {
        SqliteStore::set_busy_timeout(self, timeout)
    }

    fn load_run(&self, id: i64) -> Result<Run> {
        located!(self, {
            // The name is read on its own so that an error can name the run
            // even when the rest of its row cannot be decoded.
            let name = self
                .conn
                .query_row("SELECT name FROM runs WHERE id = ?1", [id], |r| {
                    Ok(r.get::<_, Option<String>>(0).ok().flatten())
                })
                .optional()?
                .ok_or_else(|| StoreError::NoSuchRun(id.to_string()))?;
            read_run(&self.conn, id, None).map_err(|e| bad_run(id, name, e))
        })
    }

    fn load_runs(&self, ids: &[i64], bench: Option<&str>) -> Result<Vec<Result<Run>>> {
        // One run at a time is cheap in-process (cached statements); what the
        // filter saves is decoding the other benchmarks' raw data. One read
        // transaction: one consistent view, and one lock instead of one per
        // query (a fleet's history reads 100,000 runs).
        located!(self, {
            let _view = self.conn.unchecked_transaction()?;
            let mut out = Vec::with_capacity(ids.len());
            for &id in ids {
                let name = self
                    .conn
                    .prepare_cached("SELECT name FROM runs WHERE id = ?1")?
                    .query_row([id], |r| Ok(r.get::<_, Option<String>>(0).ok().flatten()))
                    .optional()?;
                out.push(match name {
                    None => Err(StoreError::NoSuchRun(id.to_string())),
                    Some(name) => match read_run(&self.conn, id, bench).map_err(|e| bad_run(id, name, e)) {
                        Err(e) if !matches!(e, StoreError::BadRun { .. }) => return Err(e),
                        done => done,
                    },
                });
            }
            Ok(out)
        })
    }

    fn resolve(&self, selector: &str) -> Result<i64> {
        located!(self, {
            let sel = selector.trim();
            let nth_last = if sel == "last" {
                Some(0)
            } else if let Some(n) = sel.strip_prefix("last~") {
                // u32: "last~-1" must not wrap around to the newest run.
                Some(i64::from(n.parse::<u32>().map_err(|_| StoreError::NoSuchRun(selector.to_string()))?))
            } else {
                None
            };
            if let Some(offset) = nth_last {
                let id: Option<i64> = self
                    .conn
                    .query_row("SELECT id FROM runs ORDER BY id DESC LIMIT 1 OFFSET ?1", [offset], |r| r.get(0))
                    .optional()?;
                return match id {
                    Some(id) => Ok(id),
                    None if offset == 0 => Err(StoreError::Empty),
                    None => Err(StoreError::NoSuchRun(selector.to_string())),
                };
            }
            let by_id = sel.trim_start_matches('#').parse::<i64>().ok();
            let found: Option<i64> = match by_id {
                Some(id) => self.conn.query_row("SELECT id FROM runs WHERE id = ?1", [id], |r| r.get(0)).optional()?,
                None => None,
            };
            if let Some(id) = found {
                return Ok(id);
            }
            self.conn
                .query_row("SELECT id FROM runs WHERE name = ?1", [sel], |r| r.get(0))
                .optional()?
                .ok_or_else(|| StoreError::NoSuchRun(selector.to_string()))
        })
    }

    fn list_runs_page(&self, filter: &RunFilter, start: PageStart, limit: usize) -> Result<Vec<Result<RunSummary>>> {
        type Fields = (String, String, i64, String, Option<String>, Option<String>, Option<String>, Option<String>);
        located!(self, {
            let mut values = Vec::new();
            let clause = filter_sql(filter, start.before, &SQLITE, &mut values);
            let mut stmt = self.conn.prepare(&format!(
                "SELECT r.id, r.name, r.kind, r.status, r.started_unix_ms, r.host,
                        (SELECT group_concat(name, ' ') FROM (SELECT DISTINCT name FROM benchmarks b
                                                              WHERE b.run_id = r.id ORDER BY seq)),
                        r.kernel, r.cpu_model,
                        (SELECT json_group_object(key, value) FROM run_labels l WHERE l.run_id = r.id)
                 FROM runs r
                 WHERE {clause}
                 ORDER BY r.id DESC LIMIT {} OFFSET {}",
                i64::try_from(limit).unwrap_or(i64::MAX),
                i64::try_from(start.skip).unwrap_or(i64::MAX),
            ))?;
            // Each row is read on its own terms: one that cannot be decoded
            // is an error in its place, not the end of the listing.
            let rows = stmt
                .query_map(rusqlite::params_from_iter(bind(&values)), |r| {
                    let id: i64 = r.get(0)?;
                    let name: Option<String> = r.get(1).ok().flatten();
                    let fields = (|| -> rusqlite::Result<Fields> {
                        Ok((r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?, r.get(8)?, r.get(9)?))
                    })();
                    Ok((id, name, fields))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows
                .into_iter()
                .map(|(id, name, fields)| {
                    let summary = fields.map_err(StoreError::from).and_then(
                        |(kind, status, started, host, benches, kernel, cpu_model, labels)| {
                            Ok(RunSummary {
                                id,
                                name: name.clone(),
                                kind: enum_from(&kind).map_err(|e| bad_field(id, "kind", e))?,
                                status: enum_from(&status).map_err(|e| bad_field(id, "status", e))?,
                                started_unix_ms: started,
                                host,
                                kernel,
                                cpu_model,
                                labels: match labels {
                                    Some(l) => decode_json(id, "labels", &l)?,
                                    None => Default::default(),
                                },
                                benchmarks: benches.unwrap_or_default().split_whitespace().map(String::from).collect(),
                            })
                        },
                    );
                    summary.map_err(|e| bad_run(id, name, e))
                })
                .collect())
        })
    }

    fn run_ids_where(&self, filter: &RunFilter) -> Result<Vec<i64>> {
        located!(self, {
            let mut values = Vec::new();
            let clause = filter_sql(filter, None, &SQLITE, &mut values);
            let mut stmt = self.conn.prepare(&format!("SELECT r.id FROM runs r WHERE {clause} ORDER BY r.id"))?;
            let ids = stmt
                .query_map(rusqlite::params_from_iter(bind(&values)), |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<i64>>>()?;
            Ok(ids)
        })
    }

    fn runs_with_benchmark(&self, name: &str) -> Result<Vec<i64>> {
        located!(self, {
            let mut stmt = self.conn.prepare(
                "SELECT DISTINCT run_id FROM benchmarks WHERE name = ?1 AND state = 'complete' ORDER BY run_id",
            )?;
            let ids = stmt.query_map([name], |r| r.get(0))?.collect::<rusqlite::Result<Vec<i64>>>()?;
            Ok(ids)
        })
    }

    fn save_noise_profile(&mut self, p: &NoiseProfileRecord) -> Result<i64> {
        located!(self, {
            write_tx(&mut self.conn, |tx| {
                tx.execute(
                    "INSERT INTO noise_profiles (host, kernel, created_unix_ms, run_ids, note)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![p.host, p.kernel, p.created_unix_ms, json_str(&p.run_ids)?, p.note],
                )?;
                Ok(tx.last_insert_rowid())
            })
        })
    }

    fn latest_noise_profile(&self, host: &str) -> Result<Option<NoiseProfileRecord>> {
        located!(self, {
            self.conn
                .query_row(
                    &format!(
                        "SELECT {NOISE_PROFILE_COLUMNS} FROM noise_profiles WHERE host = ?1
                         ORDER BY created_unix_ms DESC, id DESC LIMIT 1"
                    ),
                    [host],
                    noise_profile_from,
                )
                .optional()?
                .map(decode_noise_profile)
                .transpose()
        })
    }

    fn noise_profiles(&self) -> Result<Vec<NoiseProfileRecord>> {
        located!(self, {
            let mut stmt = self.conn.prepare(&format!(
                "SELECT {NOISE_PROFILE_COLUMNS} FROM noise_profiles ORDER BY created_unix_ms DESC, id DESC"
            ))?;
            let rows = stmt.query_map([], noise_profile_from)?.collect::<rusqlite::Result<Vec<_>>>()?;
            rows.into_iter().map(decode_noise_profile).collect()
        })
    }

    fn remove_runs(&mut self, ids: &[i64]) -> Result<Removed> {
        let mut unique = ids.to_vec();
        unique.sort_unstable();
        unique.dedup();
        located!(self, {
            write_tx(&mut self.conn, |tx| {
                let mut removed = Removed::default();
                for &id in ids.iter().filter(|id| unique.binary_search(id).is_ok()) {
                    if removed.runs.iter().any(|r| r.id == id) {
                        continue;
                    }
                    // CAST: a run edited by hand may hold anything, and must
                    // still be removable.
                    let (name, kind, status) = tx
                        .query_row(
                            "SELECT CAST(name AS TEXT), CAST(kind AS TEXT), CAST(status AS TEXT) FROM runs WHERE id = ?1",
                            [id],
                            |r| {
                                Ok((
                                    r.get::<_, Option<String>>(0)?,
                                    r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                                    r.get::<_, Option<String>>(2)?.unwrap_or_default(),
                                ))
                            },
                        )
                        .optional()?
                        .ok_or_else(|| StoreError::NoSuchRun(id.to_string()))?;
                    let metrics = tx.execute(
                        "DELETE FROM metrics WHERE benchmark_id IN (SELECT id FROM benchmarks WHERE run_id = ?1)",
                        [id],
                    )?;
                    let benchmarks = tx.execute("DELETE FROM benchmarks WHERE run_id = ?1", [id])?;
                    tx.execute("DELETE FROM run_labels WHERE run_id = ?1", [id])?;
                    tx.execute(
                        "DELETE FROM case_metrics WHERE case_id IN (SELECT id FROM cases WHERE run_id = ?1)",
                        [id],
                    )?;
                    tx.execute("DELETE FROM cases WHERE run_id = ?1", [id])?;
                    tx.execute("DELETE FROM runs WHERE id = ?1", [id])?;
                    removed.runs.push(RemovedRun { id, name, kind, status, benchmarks, metrics });
                }
                let profiles = tx
                    .prepare("SELECT id, CAST(run_ids AS TEXT) FROM noise_profiles ORDER BY id")?
                    .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Option<String>>(1)?.unwrap_or_default())))?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                for (profile, run_ids) in profiles {
                    // A list that cannot be read names no run we could check;
                    // such a profile is left for its own error to report.
                    let Ok(named) = serde_json::from_str::<Vec<i64>>(&run_ids) else { continue };
                    let hit: Vec<i64> = named.into_iter().filter(|r| unique.binary_search(r).is_ok()).collect();
                    if !hit.is_empty() {
                        tx.execute("DELETE FROM noise_profiles WHERE id = ?1", [profile])?;
                        removed.noise_profiles.push((profile, hit));
                    }
                }
                Ok(removed)
            })
        })
    }

    fn history_cases(
        &self,
        name: &str,
        metric: Option<&str>,
        filter: &RunFilter,
        each: &mut dyn FnMut(Result<(RunHead, CaseSummary)>),
    ) -> Result<()> {
        located!(self, {
            let _view = self.conn.unchecked_transaction()?;
            let mut values = Vec::new();
            let sql = history_sql(name, metric, filter, &SQLITE, &mut values);
            let mut stmt = self.conn.prepare(&sql)?;
            let mut rows = stmt.query(rusqlite::params_from_iter(bind(&values)))?;
            while let Some(r) = rows.next()? {
                let (id, name) = (r.get(0)?, r.get::<_, Option<String>>(1).ok().flatten());
                each(history_case(r).map_err(|e| bad_run(id, name, e)));
            }
            Ok(())
        })
    }

    fn case_metric_names(&self, name: &str) -> Result<Vec<String>> {
        located!(self, {
            let mut stmt = self.conn.prepare(
                "SELECT m.name FROM cases c JOIN case_metrics m ON m.case_id = c.id WHERE c.name = ?1
                 GROUP BY m.name ORDER BY min(c.id * 1000 + m.seq)",
            )?;
            let names = stmt.query_map([name], |r| r.get(0))?.collect::<rusqlite::Result<Vec<String>>>()?;
            Ok(names)
        })
    }

    fn check_integrity(&self) -> Result<()> {
        located!(self, {
            let res: String = self.conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
            if res == "ok" {
                Ok(())
            } else {
                Err(StoreError::Integrity(res))
            }
        })
    }

    fn location(&self) -> String {
        self.path.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_core::{Condition, Direction, SimSetup, Unit};

    use crate::testing::{sample_bench as bench, sample_run as run};

    /// Writes `b` as schema 1 did: no invocation column.
    fn insert_v1_benchmark(conn: &Connection, run_id: i64, seq: i64, b: &BenchResult) {
        conn.execute(
            "INSERT INTO benchmarks (run_id, seq, name, bench_key, params, condition, condition_label, status, state,
                                     started_unix_ms, ended_unix_ms, repetitions, warmup, warnings)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            params![
                run_id,
                seq,
                b.name,
                b.key(),
                json_str(&b.params).unwrap(),
                json_str(&b.condition).unwrap(),
                b.condition.label(),
                json_str(&b.status).unwrap(),
                b.status.name(),
                b.started_unix_ms,
                b.ended_unix_ms,
                b.repetitions,
                b.warmup,
                json_str(&b.warnings).unwrap(),
            ],
        )
        .unwrap();
        let bench_id = conn.last_insert_rowid();
        for (seq, m) in b.metrics.iter().enumerate() {
            let (data_type, data) = encode_data(&m.data).unwrap();
            conn.execute(
                "INSERT INTO metrics (benchmark_id, seq, name, unit, direction, headline, data_type, data)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    bench_id,
                    seq as i64,
                    m.name,
                    enum_name(&m.unit).unwrap(),
                    enum_name(&m.direction).unwrap(),
                    m.headline,
                    data_type,
                    data
                ],
            )
            .unwrap();
        }
    }

    #[test]
    fn a_schema_1_store_is_upgraded_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v1.db");
        let shares = vec![50.0, 30.0, 20.0];
        let mut sim = BenchResult::new(
            "sim:hogs",
            Condition::Sim(SimSetup { policy: "cfs".into(), cpus: 2, hz: 1000, seed: 7 }),
            1001,
        );
        sim.metrics.push(Metric::samples("cpu_share", Unit::Percent, Direction::Neutral, shares.clone()));
        sim.metrics.push(Metric::samples("throughput", Unit::PerSecond, Direction::HigherIsBetter, vec![9.0]));
        sim.status = BenchStatus::Complete;
        let mut live = bench("pipe");
        live.metrics.push(Metric::samples("cpu_share", Unit::Percent, Direction::Neutral, vec![1.0, 2.0]));
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(MIGRATIONS[0].sql).unwrap();
            conn.pragma_update(None, "user_version", 1).unwrap();
            conn.execute(
                "INSERT INTO runs (id, kind, status, started_unix_ms, schema_version, tool_name, tool_version,
                                   command_line, host)
                 VALUES (1, 'sim', 'complete', 1000, 1, 'schedlab', '0.1.0', '[]', 'h')",
                [],
            )
            .unwrap();
            insert_v1_benchmark(&conn, 1, 0, &sim);
            insert_v1_benchmark(&conn, 1, 1, &live);
        }
        let mut s = SqliteStore::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), STORE_SCHEMA_VERSION);
        let back = s.load_run(1).unwrap();
        let labels = vec!["task 0".to_string(), "task 1".into(), "task 2".into()];
        let upgraded = MetricData::Entities { entity: "task".into(), labels, values: shares };
        assert_eq!(back.benchmarks[0].metric("cpu_share").unwrap().data, upgraded);
        assert_eq!(back.benchmarks[0].metric("throughput"), sim.metric("throughput"), "only per-task values change");
        assert_eq!(back.benchmarks[1], live, "a live benchmark is untouched");
        assert!(back.benchmarks.iter().all(|b| b.invocation == 0));
        let entity_rows: i64 =
            s.conn.query_row("SELECT count(*) FROM metrics WHERE data_type = 'entities'", [], |r| r.get(0)).unwrap();
        assert_eq!(entity_rows, 1, "the data_type column follows the data");
        // The new table exists too.
        assert!(s.noise_profiles().unwrap().is_empty());
        s.save_noise_profile(&profile("h", 1)).unwrap();
    }

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

    #[test]
    fn processes_creating_the_same_store_at_once_all_succeed() {
        const OPENERS: usize = 8;
        for round in 0..5 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("new.db");
            let barrier = std::sync::Barrier::new(OPENERS);
            std::thread::scope(|scope| {
                let handles: Vec<_> = (0..OPENERS)
                    .map(|_| {
                        scope.spawn(|| {
                            barrier.wait();
                            let mut s = SqliteStore::open(&path)?;
                            let mut r = run();
                            r.benchmarks = vec![bench("pipe")];
                            s.insert_run(&r)
                        })
                    })
                    .collect();
                for h in handles {
                    if let Err(e) = h.join().unwrap() {
                        panic!("round {round}: {e}");
                    }
                }
            });
            let s = SqliteStore::open(&path).unwrap();
            assert_eq!(s.schema_version().unwrap(), STORE_SCHEMA_VERSION);
            assert_eq!(s.list_runs(100).unwrap().len(), OPENERS);
        }
    }

    #[test]
    fn an_unwritable_location_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plainfile");
        std::fs::write(&file, b"x").unwrap();
        // A path below a regular file can never be created.
        let err = SqliteStore::open(&file.join("s.db")).err().expect("must fail");
        assert!(matches!(err, StoreError::Open { .. }));
        assert!(err.to_string().contains("--db"));
    }

    fn one_line(e: &StoreError) -> String {
        let text = e.to_string();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(std::error::Error::source(e).is_none(), "a source would print the message twice: {text}");
        text
    }

    #[test]
    fn a_foreign_sqlite_file_is_refused_and_left_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("other.db");
        Connection::open(&path)
            .unwrap()
            .execute_batch("CREATE TABLE notes (x TEXT); INSERT INTO notes VALUES ('a');")
            .unwrap();
        for access in [Access::Create, Access::Read] {
            let err = SqliteStore::open_with(&path, access, DEFAULT_BUSY_TIMEOUT).err().expect("must refuse");
            let text = one_line(&err);
            assert!(matches!(err, StoreError::Foreign { .. }), "{text}");
            assert!(text.contains("other.db") && text.contains("table notes"), "{text}");
        }
        let conn = Connection::open(&path).unwrap();
        let tables: i64 = conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0)).unwrap();
        assert_eq!(tables, 1, "no table was added");
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "delete", "the journal mode was not changed");
        // A file that is not SQLite at all.
        let text_file = dir.path().join("notes.txt");
        std::fs::write(&text_file, "just text, long enough to be mistaken for nothing at all ".repeat(20)).unwrap();
        let err = SqliteStore::open(&text_file).err().expect("must refuse");
        assert!(matches!(err, StoreError::Foreign { .. }), "{err}");
        assert!(one_line(&err).contains("not a SQLite database"));
    }

    #[test]
    fn schedlab_tables_without_a_version_are_refused_in_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("unversioned.db");
        Connection::open(&path).unwrap().execute_batch(MIGRATIONS[0].sql).unwrap();
        let err = SqliteStore::open(&path).err().expect("must refuse");
        let text = one_line(&err);
        assert!(matches!(err, StoreError::Unversioned { .. }), "{text}");
        assert!(text.contains("unversioned.db") && text.len() < 400, "{text}");
        // A version stamp without the tables is not a store either.
        let stamped = dir.path().join("stamped.db");
        Connection::open(&stamped).unwrap().pragma_update(None, "user_version", 1).unwrap();
        assert!(matches!(SqliteStore::open(&stamped), Err(StoreError::Foreign { .. })));
    }

    #[test]
    fn sql_errors_do_not_print_their_statement_or_repeat_themselves() {
        // What a store with tables but no version once met: a migration's
        // CREATE TABLE failing, with rusqlite quoting the whole script.
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(MIGRATIONS[0].sql).unwrap();
        let sql_error = conn.execute_batch(MIGRATIONS[0].sql).unwrap_err();
        assert!(sql_error.to_string().contains("CREATE INDEX"), "the premise: {sql_error}");
        let text = one_line(&StoreError::from(sql_error));
        assert!(text.contains("already exists") && !text.contains("CREATE"), "{text}");
    }

    #[test]
    fn reading_a_missing_store_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no/such/dir/s.db");
        let err = SqliteStore::open_read_only(&path).err().expect("nothing to read");
        let text = one_line(&err);
        assert!(matches!(err, StoreError::NoStore { .. }), "{text}");
        assert!(text.contains("schedlab run") && text.contains("no/such/dir/s.db"), "{text}");
        assert!(!dir.path().join("no").exists(), "a reading open created directories");
        // Below a regular file: no store can ever be there.
        let file = dir.path().join("plain");
        std::fs::write(&file, "x").unwrap();
        let err = SqliteStore::open_read_only(&file.join("s.db")).err().unwrap();
        assert!(one_line(&err).contains("is not a directory"), "{err}");
        // Modify (rm) does not create a store either.
        let err = SqliteStore::open_with(&path, Access::Modify, DEFAULT_BUSY_TIMEOUT).err().unwrap();
        assert!(matches!(err, StoreError::NoStore { .. }), "{err}");
        assert!(!dir.path().join("no").exists());
    }

    #[test]
    fn a_reading_open_upgrades_an_old_store_it_can_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v1.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(MIGRATIONS[0].sql).unwrap();
            conn.pragma_update(None, "user_version", 1).unwrap();
        }
        let s = SqliteStore::open_read_only(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), STORE_SCHEMA_VERSION);
        assert!(s.noise_profiles().unwrap().is_empty());
    }

    // The rest of this test runs on both backends (tests/suite.rs); only
    // SQLite lets a column hold a value of another type.
    #[test]
    fn a_column_of_the_wrong_type_is_a_decode_error_of_that_run() {
        let mut s = SqliteStore::in_memory().unwrap();
        let before = s.insert_run(&run()).unwrap();
        let bad = s.insert_run(&run()).unwrap();
        s.conn.execute("UPDATE runs SET started_unix_ms = 'soon' WHERE id = ?1", [bad]).unwrap();
        assert!(matches!(s.load_run(bad), Err(StoreError::BadRun { id, .. }) if id == bad));
        let listed = s.list_runs(10).unwrap();
        assert!(matches!(&listed[0], Err(StoreError::BadRun { .. })));
        assert_eq!(listed[1].as_ref().unwrap().id, before);
    }

    #[test]
    fn a_schema_4_store_learns_each_runs_kernel() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v4.db");
        {
            let conn = Connection::open(&path).unwrap();
            for m in &MIGRATIONS[..4] {
                conn.execute_batch(m.sql).unwrap();
            }
            conn.pragma_update(None, "user_version", 4).unwrap();
            for (id, env) in [(1, Some(r#"{"kernel_release":"6.18"}"#)), (2, Some("{not json")), (3, None)] {
                conn.execute(
                    "INSERT INTO runs (id, kind, status, started_unix_ms, schema_version, tool_name, tool_version,
                                       command_line, host, env_start, uuid)
                     VALUES (?1, 'live', 'complete', 1000, 1, 'schedlab', '0.1.0', '[]', 'h', ?2, ?3)",
                    params![id, env, Uuid::new_v4().to_string()],
                )
                .unwrap();
            }
        }
        let s = SqliteStore::open(&path).unwrap();
        let kernels: Vec<Option<String>> =
            s.list_runs(10).unwrap().into_iter().map(|r| r.map(|r| r.kernel).unwrap_or_default()).collect();
        assert_eq!(kernels, vec![None, None, Some("6.18".into())], "an unreadable environment stays without");
    }

    #[test]
    fn a_schema_5_store_learns_each_runs_cpu_model_and_takes_labels() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v5.db");
        {
            let conn = Connection::open(&path).unwrap();
            for m in &MIGRATIONS[..5] {
                conn.execute_batch(m.sql).unwrap();
            }
            conn.pragma_update(None, "user_version", 5).unwrap();
            for (id, env) in [(1, Some(r#"{"cpu_model":"AMD EPYC 7763"}"#)), (2, Some("{not json")), (3, None)] {
                conn.execute(
                    "INSERT INTO runs (id, kind, status, started_unix_ms, schema_version, tool_name, tool_version,
                                       command_line, host, env_start, uuid)
                     VALUES (?1, 'live', 'complete', 1000, 1, 'schedlab', '0.1.0', '[]', 'h', ?2, ?3)",
                    params![id, env, Uuid::new_v4().to_string()],
                )
                .unwrap();
            }
        }
        let mut s = SqliteStore::open(&path).unwrap();
        let cpus: Vec<Option<String>> =
            s.list_runs(10).unwrap().into_iter().map(|r| r.map(|r| r.cpu_model).unwrap_or_default()).collect();
        assert_eq!(cpus, vec![None, None, Some("AMD EPYC 7763".into())], "an unreadable environment stays without");
        assert!(s.load_run(3).unwrap().labels.is_empty());
        let mut r = run();
        r.labels.insert("rack".into(), "r1".into());
        let id = s.insert_run(&r).unwrap();
        assert_eq!(s.load_run(id).unwrap().labels, r.labels);
    }

    #[test]
    fn a_schema_3_store_gives_every_run_a_uuid() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v3.db");
        {
            let conn = Connection::open(&path).unwrap();
            for m in &MIGRATIONS[..3] {
                conn.execute_batch(m.sql).unwrap();
            }
            conn.pragma_update(None, "user_version", 3).unwrap();
            for id in 1..=3 {
                conn.execute(
                    "INSERT INTO runs (id, kind, status, started_unix_ms, schema_version, tool_name, tool_version,
                                       command_line, host)
                     VALUES (?1, 'live', 'complete', 1000, 1, 'schedlab', '0.1.0', '[]', 'h')",
                    [id],
                )
                .unwrap();
            }
        }
        let mut s = SqliteStore::open(&path).unwrap();
        let mut uuids: Vec<Uuid> = (1..=3).map(|id| s.run_uuid(id).unwrap()).collect();
        uuids.dedup();
        assert_eq!(uuids.len(), 3, "one each, all different");
        assert_eq!(s.find_uuid(uuids[1]).unwrap(), Some(2));
        // The index keeps them unique.
        let dup = s.conn.execute("UPDATE runs SET uuid = ?1 WHERE id = 3", [uuids[0].to_string()]);
        assert!(dup.is_err());
        let id = s.insert_run(&run()).unwrap();
        assert!(!uuids.contains(&s.run_uuid(id).unwrap()));
    }

    #[test]
    fn a_held_lock_is_a_busy_error_naming_the_store_and_a_retry_succeeds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        SqliteStore::open(&path).unwrap();
        let holder = Connection::open(&path).unwrap();
        holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
        let mut s = SqliteStore::open_with(&path, Access::Create, Duration::from_millis(50)).unwrap();
        let mut r = run();
        r.benchmarks = vec![bench("pipe")];
        let err = s.insert_run(&r).unwrap_err();
        assert!(err.is_busy(), "{err}");
        let text = one_line(&err);
        assert!(text.contains("s.db") && text.contains("locked by another process"), "{text}");
        assert!(!text.contains("writable"), "{text}");
        holder.execute_batch("COMMIT").unwrap();
        let id = s.insert_run(&r).unwrap();
        assert_eq!(s.list_runs(10).unwrap().len(), 1, "the failed attempt left nothing behind");
        assert_eq!(s.load_run(id).unwrap().benchmarks.len(), 1);
    }

    #[test]
    fn a_damaged_store_says_so_with_its_own_fix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        {
            let mut s = SqliteStore::open(&path).unwrap();
            for _ in 0..20 {
                let mut r = run();
                r.benchmarks = vec![bench("pipe"), bench("spawn")];
                s.insert_run(&r).unwrap();
            }
            s.conn.pragma_update(None, "journal_mode", "DELETE").unwrap();
        }
        // Scribble over every page but the first (the schema).
        let mut bytes = std::fs::read(&path).unwrap();
        let page = 4096.min(bytes.len() / 2);
        for b in &mut bytes[page..] {
            *b = 0x5a;
        }
        std::fs::write(&path, bytes).unwrap();
        let err = SqliteStore::open(&path).and_then(|s| s.list_runs(100).map(|_| ())).unwrap_err();
        let text = one_line(&err);
        assert!(matches!(err, StoreError::Corrupt { .. }), "{text}");
        assert!(text.contains(".recover") && !text.contains("writable"), "{text}");
    }
}
