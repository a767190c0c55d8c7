//! SQLite backend: WAL journal, schema versioned with `PRAGMA user_version`,
//! raw metric data kept as JSON in the core model's serde form.

use crate::{NoiseProfileRecord, Result, RunSummary, Store, StoreError};
use rusqlite::{params, Connection, ErrorCode, OptionalExtension, Row, Transaction, TransactionBehavior};
use schedlab_core::model::upgrade_v1_metric;
use schedlab_core::{BenchResult, BenchStatus, Environment, Metric, MetricData, Run, RunKind, RunStatus, ToolInfo};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
];

pub const STORE_SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// How long an opener or writer waits for another process holding the store.
const BUSY_PATIENCE: Duration = Duration::from_secs(30);

pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
}

fn json_str<T: serde::Serialize>(v: &T) -> Result<String> {
    Ok(serde_json::to_string(v)?)
}

fn enum_name<T: serde::Serialize>(v: &T) -> Result<String> {
    Ok(serde_json::to_value(v)?.as_str().unwrap_or_default().to_string())
}

fn enum_from<T: serde::de::DeserializeOwned>(s: &str) -> Result<T> {
    Ok(serde_json::from_value(serde_json::Value::String(s.to_string()))?)
}

/// The data's `type` tag and its JSON; the tag has its own column so that
/// queries (and migrations) can select by kind without parsing JSON.
fn encode_data(data: &MetricData) -> Result<(String, String)> {
    let json = serde_json::to_value(data)?;
    let data_type = json.get("type").and_then(|t| t.as_str()).unwrap_or("samples").to_string();
    Ok((data_type, json.to_string()))
}

/// A metrics row as stored; decoded outside the row callback so that bad
/// JSON reports as [`StoreError::Decode`], not as an SQL error.
struct StoredMetric {
    name: String,
    unit: String,
    direction: String,
    headline: bool,
    data_type: String,
    data: String,
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

    fn decode(self) -> Result<Metric> {
        Ok(Metric {
            name: self.name,
            unit: enum_from(&self.unit)?,
            direction: enum_from(&self.direction)?,
            headline: self.headline,
            data: MetricData::from_json_of_type(&self.data_type, &self.data)?,
        })
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
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, StoredMetric::read(r, 2)?)))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut update = tx.prepare("UPDATE metrics SET data_type = ?2, data = ?3 WHERE id = ?1")?;
    for (id, bench_name, stored) in legacy {
        let mut metric = stored.decode()?;
        if upgrade_v1_metric(&bench_name, &mut metric) {
            let (data_type, data) = encode_data(&metric.data)?;
            update.execute(params![id, data_type, data])?;
        }
    }
    Ok(())
}

const NOISE_PROFILE_COLUMNS: &str = "id, host, kernel, created_unix_ms, run_ids, note";

/// The profile and its undecoded `run_ids` JSON, from NOISE_PROFILE_COLUMNS.
fn noise_profile_from(r: &Row<'_>) -> rusqlite::Result<(NoiseProfileRecord, String)> {
    let profile = NoiseProfileRecord {
        id: Some(r.get(0)?),
        host: r.get(1)?,
        kernel: r.get(2)?,
        created_unix_ms: r.get(3)?,
        run_ids: Vec::new(),
        note: r.get(5)?,
    };
    Ok((profile, r.get(4)?))
}

fn decode_noise_profile((mut profile, run_ids): (NoiseProfileRecord, String)) -> Result<NoiseProfileRecord> {
    profile.run_ids = serde_json::from_str(&run_ids)?;
    Ok(profile)
}

/// `found`, unless it is a schema this build does not know.
fn refuse_newer(path: &Path, found: i64) -> Result<i64> {
    if found > STORE_SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            path: path.display().to_string(),
            found,
            supported: STORE_SCHEMA_VERSION,
        });
    }
    Ok(found)
}

impl SqliteStore {
    /// Open (creating if needed) the store at `path` and bring its schema up
    /// to date. Refuses a store written by a newer schema.
    pub fn open(path: &Path) -> Result<SqliteStore> {
        let open_err = |reason: String| StoreError::Open { path: path.display().to_string(), reason };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| open_err(e.to_string()))?;
        }
        let conn = Connection::open(path).map_err(|e| open_err(e.to_string()))?;
        let mut store = SqliteStore { conn, path: path.to_path_buf() };
        store.configure().map_err(|e| open_err(e.to_string()))?;
        store.migrate()?;
        Ok(store)
    }

    /// A private in-memory store (tests, `--db :memory:`).
    pub fn in_memory() -> Result<SqliteStore> {
        let mut store = SqliteStore { conn: Connection::open_in_memory()?, path: PathBuf::from(":memory:") };
        store.configure()?;
        store.migrate()?;
        Ok(store)
    }

    fn configure(&self) -> rusqlite::Result<()> {
        // busy_timeout lets two schedlab processes share a file. It comes
        // first so that every statement below waits for a concurrent opener
        // rather than failing, and it is generous because that opener may
        // be running migrations.
        self.conn.busy_timeout(BUSY_PATIENCE)?;
        // WAL keeps readers working during a run and makes each commit cheap
        // and atomic.
        self.enable_wal()?;
        self.conn.pragma_update(None, "synchronous", "NORMAL")?;
        self.conn.pragma_update(None, "foreign_keys", "ON")?;
        // Touch the file so permission problems surface at open time.
        self.conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))?;
        Ok(())
    }

    /// The switch to WAL upgrades a read lock to a write lock, and SQLite
    /// refuses such an upgrade at once (waiting could deadlock) instead of
    /// calling the busy handler. Only a store being created by several
    /// processes at once meets this, so retrying is enough.
    fn enable_wal(&self) -> rusqlite::Result<()> {
        let deadline = Instant::now() + BUSY_PATIENCE;
        loop {
            match self.conn.pragma_update(None, "journal_mode", "WAL") {
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if e.code == ErrorCode::DatabaseBusy && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(5))
                }
                done => return done,
            }
        }
    }

    fn migrate(&mut self) -> Result<()> {
        // The version only ever grows, so an up-to-date (or newer) store is
        // settled without a write lock and never waits for a process writing.
        if refuse_newer(&self.path, self.schema_version()?)? == STORE_SCHEMA_VERSION {
            return Ok(());
        }
        // IMMEDIATE takes the write lock before user_version is read: two
        // processes creating the same store serialize here, and the second
        // finds the first's tables instead of creating them again.
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
        let found = refuse_newer(&self.path, found)?;
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

    fn insert_metrics(tx: &rusqlite::Transaction<'_>, bench_id: i64, metrics: &[Metric]) -> Result<()> {
        let mut stmt = tx.prepare(
            "INSERT INTO metrics (benchmark_id, seq, name, unit, direction, headline, data_type, data)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?;
        for (seq, m) in metrics.iter().enumerate() {
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
        Ok(())
    }

    fn load_benchmarks(&self, run_id: i64) -> Result<Vec<BenchResult>> {
        let mut stmt = self.conn.prepare(
            "SELECT id, name, params, condition, status, started_unix_ms, ended_unix_ms, repetitions, warmup, warnings,
                    invocation
             FROM benchmarks WHERE run_id = ?1 ORDER BY seq",
        )?;
        let rows = stmt
            .query_map([run_id], |r| {
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
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let mut out = Vec::with_capacity(rows.len());
        for (id, name, params, condition, status, started, ended, reps, warmup, warnings, invocation) in rows {
            out.push(BenchResult {
                name,
                params: serde_json::from_str(&params)?,
                condition: serde_json::from_str(&condition)?,
                invocation,
                status: serde_json::from_str(&status)?,
                started_unix_ms: started,
                ended_unix_ms: ended,
                repetitions: reps,
                warmup,
                metrics: self.load_metrics(id)?,
                warnings: serde_json::from_str(&warnings)?,
            });
        }
        Ok(out)
    }

    fn load_metrics(&self, bench_id: i64) -> Result<Vec<Metric>> {
        let mut stmt = self.conn.prepare(
            "SELECT name, unit, direction, headline, data_type, data FROM metrics WHERE benchmark_id = ?1 ORDER BY seq",
        )?;
        let rows = stmt.query_map([bench_id], |r| StoredMetric::read(r, 0))?.collect::<rusqlite::Result<Vec<_>>>()?;
        rows.into_iter().map(StoredMetric::decode).collect()
    }
}

impl Store for SqliteStore {
    fn create_run(&mut self, run: &Run) -> Result<i64> {
        if let Some(name) = &run.name {
            let taken: Option<i64> =
                self.conn.query_row("SELECT id FROM runs WHERE name = ?1", [name], |r| r.get(0)).optional()?;
            if taken.is_some() {
                return Err(StoreError::NameTaken(name.clone()));
            }
        }
        self.conn.execute(
            "INSERT INTO runs (name, kind, status, started_unix_ms, ended_unix_ms, schema_version, tool_name,
                               tool_version, git_rev, command_line, host, env_start, env_end)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
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
                json_str(&run.command_line)?,
                run.host,
                run.env_start.as_ref().map(json_str).transpose()?,
                run.env_end.as_ref().map(json_str).transpose()?,
            ],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    fn begin_benchmark(&mut self, run_id: i64, bench: &BenchResult) -> Result<i64> {
        let seq: i64 =
            self.conn.query_row("SELECT count(*) FROM benchmarks WHERE run_id = ?1", [run_id], |r| r.get(0))?;
        let status = BenchStatus::Incomplete { reason: "started, never finished".into() };
        self.conn.execute(
            "INSERT INTO benchmarks (run_id, seq, name, bench_key, params, condition, condition_label, status, state,
                                     started_unix_ms, ended_unix_ms, repetitions, warmup, warnings, invocation)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, NULL, 0, 0, '[]', ?11)",
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
            ],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    fn finish_benchmark(&mut self, bench_id: i64, bench: &BenchResult) -> Result<()> {
        // JSON has no NaN or infinity: such a value would be written as null
        // and the run could never be read back.
        if let Some((m, v)) = bench.metrics.iter().find_map(|m| m.first_non_finite().map(|v| (m, v))) {
            return Err(StoreError::Unstorable(format!(
                "{} {} holds {v}, which cannot be stored: this is a defect in the benchmark, please report it",
                bench.key(),
                m.name
            )));
        }
        let tx = self.conn.transaction()?;
        tx.execute(
            "UPDATE benchmarks SET name = ?2, bench_key = ?3, params = ?4, condition = ?5, condition_label = ?6,
                    status = ?7, state = ?8, started_unix_ms = ?9, ended_unix_ms = ?10, repetitions = ?11,
                    warmup = ?12, warnings = ?13, invocation = ?14
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
            ],
        )?;
        tx.execute("DELETE FROM metrics WHERE benchmark_id = ?1", [bench_id])?;
        Self::insert_metrics(&tx, bench_id, &bench.metrics)?;
        tx.commit()?;
        Ok(())
    }

    fn finish_run(
        &mut self,
        run_id: i64,
        status: RunStatus,
        ended_unix_ms: i64,
        env_end: Option<&Environment>,
    ) -> Result<()> {
        self.conn.execute(
            "UPDATE runs SET status = ?2, ended_unix_ms = ?3, env_end = ?4 WHERE id = ?1",
            params![run_id, status.name(), ended_unix_ms, env_end.map(json_str).transpose()?],
        )?;
        Ok(())
    }

    fn load_run(&self, id: i64) -> Result<Run> {
        let row = self
            .conn
            .query_row(
                "SELECT name, kind, status, started_unix_ms, ended_unix_ms, schema_version, tool_name, tool_version,
                        git_rev, command_line, host, env_start, env_end
                 FROM runs WHERE id = ?1",
                [id],
                |r| {
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
                },
            )
            .optional()?
            .ok_or_else(|| StoreError::NoSuchRun(id.to_string()))?;
        let (name, kind, status, started, ended, schema_version, tool_name, tool_version, git_rev, cmd, host, es, ee) =
            row;
        let decode_env = |s: Option<String>| -> Result<Option<Environment>> {
            s.map(|s| serde_json::from_str(&s)).transpose().map_err(Into::into)
        };
        Ok(Run {
            schema_version,
            id: Some(id),
            name,
            kind: enum_from::<RunKind>(&kind)?,
            status: enum_from::<RunStatus>(&status)?,
            started_unix_ms: started,
            ended_unix_ms: ended,
            tool: ToolInfo { name: tool_name, version: tool_version, git_rev },
            command_line: serde_json::from_str(&cmd)?,
            host,
            env_start: decode_env(es)?,
            env_end: decode_env(ee)?,
            benchmarks: self.load_benchmarks(id)?,
        })
    }

    fn resolve(&self, selector: &str) -> Result<i64> {
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
    }

    fn list_runs(&self, limit: usize) -> Result<Vec<RunSummary>> {
        let mut stmt = self.conn.prepare(
            "SELECT r.id, r.name, r.kind, r.status, r.started_unix_ms, r.host,
                    (SELECT group_concat(name, ' ') FROM (SELECT DISTINCT name FROM benchmarks b
                                                          WHERE b.run_id = r.id ORDER BY seq))
             FROM runs r ORDER BY r.id DESC LIMIT ?1",
        )?;
        let rows = stmt
            .query_map([limit as i64], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, Option<String>>(6)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        rows.into_iter()
            .map(|(id, name, kind, status, started, host, benches)| {
                Ok(RunSummary {
                    id,
                    name,
                    kind: enum_from(&kind)?,
                    status: enum_from(&status)?,
                    started_unix_ms: started,
                    host,
                    benchmarks: benches.unwrap_or_default().split_whitespace().map(String::from).collect(),
                })
            })
            .collect()
    }

    fn runs_with_benchmark(&self, name: &str) -> Result<Vec<i64>> {
        let mut stmt = self
            .conn
            .prepare("SELECT DISTINCT run_id FROM benchmarks WHERE name = ?1 AND state = 'complete' ORDER BY run_id")?;
        let ids = stmt.query_map([name], |r| r.get(0))?.collect::<rusqlite::Result<Vec<i64>>>()?;
        Ok(ids)
    }

    fn save_noise_profile(&mut self, p: &NoiseProfileRecord) -> Result<i64> {
        self.conn.execute(
            "INSERT INTO noise_profiles (host, kernel, created_unix_ms, run_ids, note) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![p.host, p.kernel, p.created_unix_ms, json_str(&p.run_ids)?, p.note],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    fn latest_noise_profile(&self, host: &str) -> Result<Option<NoiseProfileRecord>> {
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
    }

    fn noise_profiles(&self) -> Result<Vec<NoiseProfileRecord>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {NOISE_PROFILE_COLUMNS} FROM noise_profiles ORDER BY created_unix_ms DESC, id DESC"
        ))?;
        let rows = stmt.query_map([], noise_profile_from)?.collect::<rusqlite::Result<Vec<_>>>()?;
        rows.into_iter().map(decode_noise_profile).collect()
    }

    fn check_integrity(&self) -> Result<()> {
        let res: String = self.conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
        if res == "ok" {
            Ok(())
        } else {
            Err(StoreError::Integrity(res))
        }
    }

    fn location(&self) -> String {
        self.path.display().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_core::{Condition, Direction, LatencyHistogram, SchedCondition, SimSetup, Unit};

    fn run() -> Run {
        let tool = ToolInfo { name: "schedlab".into(), version: "0.1.0".into(), git_rev: None };
        let mut r = Run::new(RunKind::Live, tool, vec!["schedlab".into(), "run".into()], "h".into(), 1000);
        r.env_start = Some(Environment { kernel_release: Some("6.18".into()), ..Default::default() });
        r
    }

    fn bench(name: &str) -> BenchResult {
        let cond = Condition::Live { requested: SchedCondition::default(), applied: None, loads: vec![] };
        let mut b = BenchResult::new(name, cond, 1001).param("loops", 1000);
        let mut h = LatencyHistogram::new();
        h.record_n(2000, 10);
        b.metrics.push(Metric::samples("rate", Unit::PerSecond, Direction::HigherIsBetter, vec![1.0, 2.0]).headline());
        b.metrics.push(Metric::histogram("latency", Direction::LowerIsBetter, h));
        b.status = BenchStatus::Complete;
        b.repetitions = 2;
        b
    }

    #[test]
    fn a_run_round_trips_through_the_store() {
        let mut s = SqliteStore::in_memory().unwrap();
        let mut r = run();
        r.benchmarks = vec![bench("pipe"), bench("spawn")];
        r.status = RunStatus::Complete;
        r.ended_unix_ms = Some(2000);
        let id = s.insert_run(&r).unwrap();
        let back = s.load_run(id).unwrap();
        r.id = Some(id);
        assert_eq!(back, r);
        assert_eq!(s.resolve("last").unwrap(), id);
        assert_eq!(s.list_runs(10).unwrap()[0].benchmarks, vec!["pipe", "spawn"]);
        assert_eq!(s.runs_with_benchmark("spawn").unwrap(), vec![id]);
        assert!(s.runs_with_benchmark("threads").unwrap().is_empty());
    }

    #[test]
    fn an_unfinished_benchmark_stays_incomplete_and_finished_ones_survive() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let run_id;
        {
            let mut s = SqliteStore::open(&path).unwrap();
            run_id = s.create_run(&run()).unwrap();
            let b1 = s.begin_benchmark(run_id, &bench("pipe")).unwrap();
            s.finish_benchmark(b1, &bench("pipe")).unwrap();
            s.begin_benchmark(run_id, &bench("spawn")).unwrap();
            // Dropped here without finish_benchmark/finish_run, as a crash would.
        }
        let s = SqliteStore::open(&path).unwrap();
        s.check_integrity().unwrap();
        let back = s.load_run(run_id).unwrap();
        assert_eq!(back.status, RunStatus::Running);
        assert_eq!(back.benchmarks.len(), 2);
        assert_eq!(back.benchmarks[0].status, BenchStatus::Complete);
        assert_eq!(back.benchmarks[0].metrics.len(), 2);
        assert!(matches!(back.benchmarks[1].status, BenchStatus::Incomplete { .. }));
        assert!(back.benchmarks[1].metrics.is_empty());
    }

    #[test]
    fn selectors_resolve_ids_names_and_offsets() {
        let mut s = SqliteStore::in_memory().unwrap();
        assert!(matches!(s.resolve("last"), Err(StoreError::Empty)));
        let a = s.insert_run(&run()).unwrap();
        let mut named = run();
        named.name = Some("baseline".into());
        let b = s.insert_run(&named).unwrap();
        assert_eq!(s.resolve("last").unwrap(), b);
        assert_eq!(s.resolve("last~1").unwrap(), a);
        assert_eq!(s.resolve("baseline").unwrap(), b);
        assert_eq!(s.resolve(&format!("#{a}")).unwrap(), a);
        assert!(matches!(s.resolve("last~5"), Err(StoreError::NoSuchRun(_))));
        assert!(matches!(s.resolve("nope"), Err(StoreError::NoSuchRun(_))));
        assert!(matches!(s.insert_run(&named), Err(StoreError::NameTaken(_))));
    }

    #[test]
    fn a_newer_schema_is_refused_with_advice() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        SqliteStore::open(&path).unwrap();
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", STORE_SCHEMA_VERSION + 1).unwrap();
        drop(conn);
        let err = SqliteStore::open(&path).err().expect("must refuse");
        assert!(matches!(err, StoreError::NewerSchema { .. }));
        assert!(err.to_string().contains("upgrade schedlab"));
    }

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

    #[test]
    fn invocations_of_one_case_round_trip() {
        let mut s = SqliteStore::in_memory().unwrap();
        let mut r = run();
        r.benchmarks = (0..2).map(|i| BenchResult { invocation: i, ..bench("pipe") }).collect();
        assert_eq!(r.benchmarks[0].key(), r.benchmarks[1].key());
        let id = s.insert_run(&r).unwrap();
        let invocations: Vec<u32> = s.load_run(id).unwrap().benchmarks.iter().map(|b| b.invocation).collect();
        assert_eq!(invocations, vec![0, 1]);
        assert_eq!(s.list_runs(1).unwrap()[0].benchmarks, vec!["pipe"]);
    }

    #[test]
    fn a_value_json_cannot_hold_is_refused_and_the_store_stays_readable() {
        let mut s = SqliteStore::in_memory().unwrap();
        let mut r = run();
        let mut b = bench("pipe");
        b.metrics = vec![Metric::samples(
            "rate",
            schedlab_core::Unit::PerSecond,
            schedlab_core::Direction::HigherIsBetter,
            vec![1.0, f64::NAN],
        )];
        r.benchmarks = vec![b];
        let e = s.insert_run(&r).unwrap_err().to_string();
        assert!(e.contains("rate holds NaN") && !e.contains("integrity"), "{e}");
        // What was written before the refusal still loads.
        let id = s.list_runs(1).unwrap()[0].id;
        assert!(s.load_run(id).is_ok());
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
    fn noise_profiles_round_trip_and_the_latest_is_per_host() {
        let mut s = SqliteStore::in_memory().unwrap();
        assert_eq!(s.latest_noise_profile("a").unwrap(), None);
        let old = s.save_noise_profile(&profile("a", 100)).unwrap();
        let newest =
            s.save_noise_profile(&NoiseProfileRecord { note: Some("idle".into()), ..profile("a", 300) }).unwrap();
        let same_time = s.save_noise_profile(&NoiseProfileRecord { kernel: None, ..profile("a", 100) }).unwrap();
        let other_host = s.save_noise_profile(&profile("b", 900)).unwrap();
        let latest = s.latest_noise_profile("a").unwrap().unwrap();
        assert_eq!(latest, NoiseProfileRecord { id: Some(newest), note: Some("idle".into()), ..profile("a", 300) });
        assert_eq!(s.latest_noise_profile("c").unwrap(), None);
        let ids: Vec<i64> = s.noise_profiles().unwrap().iter().map(|p| p.id.unwrap()).collect();
        assert_eq!(ids, vec![other_host, newest, same_time, old], "newest first, ties by id");
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
}
