//! SQLite backend: WAL journal, schema versioned with `PRAGMA user_version`,
//! raw metric data kept as JSON in the core model's serde form.

use crate::{Result, RunSummary, Store, StoreError};
use rusqlite::{params, Connection, OptionalExtension};
use schedlab_core::{BenchResult, BenchStatus, Environment, Metric, Run, RunKind, RunStatus, ToolInfo};
use std::path::{Path, PathBuf};

/// Migrations, applied in order; the store's schema version is their count.
const MIGRATIONS: &[&str] = &[r#"
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
"#];

pub const STORE_SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

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

impl SqliteStore {
    /// Open (creating if needed) the store at `path` and bring its schema up
    /// to date. Refuses a store written by a newer schema.
    pub fn open(path: &Path) -> Result<SqliteStore> {
        let open_err = |reason: String| StoreError::Open { path: path.display().to_string(), reason };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| open_err(e.to_string()))?;
        }
        let conn = Connection::open(path).map_err(|e| open_err(e.to_string()))?;
        let store = SqliteStore { conn, path: path.to_path_buf() };
        store.configure().map_err(|e| open_err(e.to_string()))?;
        store.migrate()?;
        Ok(store)
    }

    /// A private in-memory store (tests, `--db :memory:`).
    pub fn in_memory() -> Result<SqliteStore> {
        let store = SqliteStore { conn: Connection::open_in_memory()?, path: PathBuf::from(":memory:") };
        store.configure()?;
        store.migrate()?;
        Ok(store)
    }

    fn configure(&self) -> rusqlite::Result<()> {
        // WAL keeps readers working during a run and makes each commit cheap
        // and atomic; busy_timeout lets two schedlab processes share a file.
        self.conn.pragma_update(None, "journal_mode", "WAL")?;
        self.conn.pragma_update(None, "synchronous", "NORMAL")?;
        self.conn.pragma_update(None, "foreign_keys", "ON")?;
        self.conn.busy_timeout(std::time::Duration::from_secs(5))?;
        // Touch the file so permission problems surface at open time.
        self.conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))?;
        Ok(())
    }

    fn migrate(&self) -> Result<()> {
        let found: i64 = self.conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if found > STORE_SCHEMA_VERSION {
            return Err(StoreError::NewerSchema {
                path: self.path.display().to_string(),
                found,
                supported: STORE_SCHEMA_VERSION,
            });
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            let tx = self.conn.unchecked_transaction()?;
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)?;
            tx.commit()?;
        }
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
            let data = serde_json::to_value(&m.data)?;
            let data_type = data.get("type").and_then(|t| t.as_str()).unwrap_or("samples").to_string();
            stmt.execute(params![
                bench_id,
                seq as i64,
                m.name,
                enum_name(&m.unit)?,
                enum_name(&m.direction)?,
                m.headline,
                data_type,
                data.to_string()
            ])?;
        }
        Ok(())
    }

    fn load_benchmarks(&self, run_id: i64) -> Result<Vec<BenchResult>> {
        let mut stmt = self.conn.prepare(
            "SELECT id, name, params, condition, status, started_unix_ms, ended_unix_ms, repetitions, warmup, warnings
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
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let mut out = Vec::with_capacity(rows.len());
        for (id, name, params, condition, status, started, ended, reps, warmup, warnings) in rows {
            out.push(BenchResult {
                name,
                params: serde_json::from_str(&params)?,
                condition: serde_json::from_str(&condition)?,
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
            "SELECT name, unit, direction, headline, data FROM metrics WHERE benchmark_id = ?1 ORDER BY seq",
        )?;
        let rows = stmt
            .query_map([bench_id], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, bool>(3)?,
                    r.get::<_, String>(4)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        rows.into_iter()
            .map(|(name, unit, direction, headline, data)| {
                Ok(Metric {
                    name,
                    unit: enum_from(&unit)?,
                    direction: enum_from(&direction)?,
                    headline,
                    data: serde_json::from_str(&data)?,
                })
            })
            .collect()
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
                                     started_unix_ms, ended_unix_ms, repetitions, warmup, warnings)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, NULL, 0, 0, '[]')",
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
            ],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    fn finish_benchmark(&mut self, bench_id: i64, bench: &BenchResult) -> Result<()> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "UPDATE benchmarks SET name = ?2, bench_key = ?3, params = ?4, condition = ?5, condition_label = ?6,
                    status = ?7, state = ?8, started_unix_ms = ?9, ended_unix_ms = ?10, repetitions = ?11,
                    warmup = ?12, warnings = ?13
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
            Some(n.parse::<i64>().map_err(|_| StoreError::NoSuchRun(selector.to_string()))?)
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
    use schedlab_core::{Condition, Direction, LatencyHistogram, SchedCondition, Unit};

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
