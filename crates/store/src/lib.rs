//! Result storage. Everything that knows SQL lives in this crate.
//!
//! [`Store`] is the one interface the rest of schedlab uses; [`SqliteStore`]
//! is the default backend (bundled SQLite, nothing to install). A PostgreSQL
//! backend implements the same trait.
//!
//! Durability rule: a run row is written when the run starts, each benchmark
//! row when the benchmark starts (state `incomplete`), and its metrics in one
//! transaction when it finishes. A run cut short therefore keeps every
//! finished benchmark, and the cut one stays marked incomplete.

mod sqlite;

pub use sqlite::SqliteStore;

use schedlab_core::{BenchResult, Environment, Run, RunKind, RunStatus};

pub type Result<T> = std::result::Result<T, StoreError>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the store at {path}: {reason}; pass a writable location with --db PATH")]
    Open { path: String, reason: String },
    #[error("the store at {path} was written by a newer schedlab (store schema {found}, this build knows up to {supported}): upgrade schedlab, or use another file with --db PATH")]
    NewerSchema { path: String, found: i64, supported: i64 },
    #[error("no run matches '{0}': give a run id, a name from `schedlab runs`, 'last' or 'last~N'")]
    NoSuchRun(String),
    #[error("the store is empty: run `schedlab run` (or `schedlab sim`) first")]
    Empty,
    #[error("a run named '{0}' already exists: choose another --name")]
    NameTaken(String),
    #[error("{0}")]
    Unstorable(String),
    #[error("store integrity check failed: {0}")]
    Integrity(String),
    #[error("store error: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("store data could not be decoded ({0}); the store may have been edited by hand")]
    Decode(#[from] serde_json::Error),
}

/// One line of `schedlab runs`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    pub id: i64,
    pub name: Option<String>,
    pub kind: RunKind,
    pub status: RunStatus,
    pub started_unix_ms: i64,
    pub host: String,
    pub benchmarks: Vec<String>,
}

/// A host's measured run-to-run noise: the runs it was computed from, so the
/// band can be recomputed with whatever statistic the reader uses.
#[derive(Debug, Clone, PartialEq)]
pub struct NoiseProfileRecord {
    /// Assigned by the store; ignored when saving.
    pub id: Option<i64>,
    pub host: String,
    pub kernel: Option<String>,
    pub created_unix_ms: i64,
    pub run_ids: Vec<i64>,
    pub note: Option<String>,
}

pub trait Store {
    /// Insert the run's header (no benchmarks) and return its id.
    fn create_run(&mut self, run: &Run) -> Result<i64>;
    /// Record that a benchmark has started; it stays `incomplete` until
    /// [`Store::finish_benchmark`] commits it.
    fn begin_benchmark(&mut self, run_id: i64, bench: &BenchResult) -> Result<i64>;
    /// Write the finished benchmark and its metrics in one transaction.
    fn finish_benchmark(&mut self, bench_id: i64, bench: &BenchResult) -> Result<()>;
    fn finish_run(
        &mut self,
        run_id: i64,
        status: RunStatus,
        ended_unix_ms: i64,
        env_end: Option<&Environment>,
    ) -> Result<()>;
    /// Store a complete run (simulated or imported) in one transaction.
    fn insert_run(&mut self, run: &Run) -> Result<i64> {
        let id = self.create_run(run)?;
        for b in &run.benchmarks {
            let bid = self.begin_benchmark(id, b)?;
            self.finish_benchmark(bid, b)?;
        }
        self.finish_run(id, run.status, run.ended_unix_ms.unwrap_or(run.started_unix_ms), run.env_end.as_ref())?;
        Ok(id)
    }
    fn load_run(&self, id: i64) -> Result<Run>;
    /// Turn "12", "last", "last~2" or a run name into a run id.
    fn resolve(&self, selector: &str) -> Result<i64>;
    /// Most recent first.
    fn list_runs(&self, limit: usize) -> Result<Vec<RunSummary>>;
    /// Ids of runs (oldest first) with a benchmark of this name.
    fn runs_with_benchmark(&self, name: &str) -> Result<Vec<i64>>;
    /// Insert a noise profile and return its id.
    fn save_noise_profile(&mut self, p: &NoiseProfileRecord) -> Result<i64>;
    /// The host's most recent profile (by creation time, then id).
    fn latest_noise_profile(&self, host: &str) -> Result<Option<NoiseProfileRecord>>;
    /// Every profile, newest first.
    fn noise_profiles(&self) -> Result<Vec<NoiseProfileRecord>>;
    /// Ok if the backend reports a consistent store.
    fn check_integrity(&self) -> Result<()>;
    /// Human description of where the data lives.
    fn location(&self) -> String;
}
