//! Result storage. Everything that knows SQL lives in this crate.
//!
//! [`Store`] is the one interface the rest of schedlab uses; [`SqliteStore`]
//! is the default backend (bundled SQLite, nothing to install) and
//! [`PgStore`] keeps a team's or a fleet's results on a PostgreSQL server
//! ([`open`] picks the backend from the location: a `postgres://` URL or a
//! file path). Both have the same schema version and migrations, and every
//! run a globally unique id ([`Store::run_uuid`]) by which `push` and `pull`
//! copy runs between stores without duplicates.
//!
//! Durability rule: a run row is written when the run starts, each benchmark
//! row when the benchmark starts (state `incomplete`), and its metrics in one
//! transaction when it finishes; a simulated or imported run is written in
//! one transaction. A run cut short therefore keeps every finished
//! benchmark, and the cut one stays marked incomplete. A store that another
//! process holds is waited for ([`StoreError::is_busy`] tells the caller
//! when to retry); every write is one transaction, so retrying is safe.
//!
//! Reading opens the file read-only ([`Access::Read`]): it creates nothing,
//! never migrates unless the file can be written, and works on a store the
//! user cannot write. Opening refuses a file that is not a schedlab store
//! rather than adding tables to it.

#![forbid(unsafe_code)]

mod pg;
mod sqlite;
#[doc(hidden)]
pub mod testing;

pub use pg::{PgEnv, PgStore, PgTarget};
pub use sqlite::{Access, SqliteStore, DEFAULT_BUSY_TIMEOUT, STORE_SCHEMA_VERSION};
pub use uuid::Uuid;

use schedlab_core::model::RunHead;
use schedlab_core::replicate::CaseSummary;
use schedlab_core::{BenchResult, BenchStatus, Environment, Run, RunKind, RunStatus};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub type Result<T> = std::result::Result<T, StoreError>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the store at {path}: {reason}; pass a writable location with --db PATH")]
    Open { path: String, reason: String },
    #[error("cannot open the store at {path}: {reason}; check the path and its permissions, or pass another store with --db PATH")]
    Unreadable { path: String, reason: String },
    #[error(
        "there is no store at {path} yet, so the store is empty: `schedlab run`, `schedlab sim` or `schedlab \
         import` creates it there; or pass an existing store with --db PATH"
    )]
    NoStore { path: String },
    #[error(
        "{path} is not a schedlab store ({what}); schedlab leaves it untouched: pass a schedlab store or a new \
         file with --db PATH"
    )]
    Foreign { path: String, what: String },
    #[error(
        "{path} has schedlab's tables but no store schema version (user_version 0), so it cannot be read or \
         upgraded safely: it was not written by schedlab or was edited by hand; pass another store with --db PATH"
    )]
    Unversioned { path: String },
    #[error("the store at {path} was written by a newer schedlab (store schema {found}, this build knows up to {supported}): upgrade schedlab, or use another file with --db PATH")]
    NewerSchema { path: String, found: i64, supported: i64 },
    #[error(
        "the store at {path} has schema {found}, older than this build's {supported}, and cannot be upgraded \
         here ({reason}): run schedlab once as a user who can write it, or copy it and pass --db COPY"
    )]
    OlderSchema { path: String, found: i64, supported: i64, reason: String },
    #[error(
        "the store at {path} is locked by another process (another schedlab, or a sqlite3 session holding a \
         transaction): let it finish, then try again"
    )]
    Busy { path: String },
    #[error("the store at {path} is read-only for this user: pass a writable location with --db PATH")]
    ReadOnly { path: String },
    #[error("the disk holding the store at {path} is full: free some space, then try again")]
    Full { path: String },
    #[error(
        "the store at {path} is damaged ({reason}): restore it from a backup, or salvage what can be read with \
         `sqlite3 {path} .recover` into a new file and pass that with --db PATH"
    )]
    Corrupt { path: String, reason: String },
    #[error("no run matches '{0}': give a run id, a name from `schedlab runs`, 'last' or 'last~N'")]
    NoSuchRun(String),
    #[error(
        "run #{id}{} cannot be read ({reason}): the store was edited by hand or damaged; `schedlab rm {id}` \
         removes that run",
        .name.as_deref().map(|n| format!(" ({n})")).unwrap_or_default()
    )]
    BadRun { id: i64, name: Option<String>, reason: String },
    #[error("noise profile #{id} cannot be read ({reason}): run `schedlab calibrate` to make a new one")]
    BadProfile { id: i64, reason: String },
    #[error("{0} is no longer in the store: it was removed (by `schedlab rm`?) while it was being written")]
    Gone(String),
    #[error("the store is empty: run `schedlab run` (or `schedlab sim`) first")]
    Empty,
    #[error("a run named '{0}' already exists: choose another --name")]
    NameTaken(String),
    #[error("{0}")]
    Unstorable(String),
    #[error("store integrity check failed: {0}")]
    Integrity(String),
    // Neither wrapped error is a `source`: its text is already in the
    // message, and `{:#}` would print it twice.
    #[error("store error: {}", sql_message(.0))]
    Sql(rusqlite::Error),
    #[error("store data could not be decoded ({0}); the store may have been edited by hand")]
    Decode(serde_json::Error),
    // PostgreSQL. `location` is the URL without its password, `server`
    // HOST:PORT: no message ever holds a password.
    #[error(
        "{url} is not a store location schedlab can use ({reason}): write postgres://USER@HOST[:PORT]/DATABASE \
         (the password in ~/.pgpass, $PGPASSFILE or $PGPASSWORD), or a file path"
    )]
    BadUrl { url: String, reason: String },
    #[error(
        "cannot reach the PostgreSQL server at {server} ({reason}): check that it runs there and accepts \
         connections from this host (listen_addresses, pg_hba.conf, firewalls), or pass another --db URL"
    )]
    Unreachable { server: String, reason: String },
    #[error(
        "the PostgreSQL server at {server} refused user '{user}' ({reason}): check the user and its password (in \
         the URL, ~/.pgpass, $PGPASSFILE or $PGPASSWORD) and the server's pg_hba.conf{note}"
    )]
    Refused { server: String, user: String, reason: String, note: String },
    #[error(
        "there is no database '{database}' on the PostgreSQL server at {server}: create it (`createdb -O USER \
         {database}` as an administrator) or name another in --db"
    )]
    NoDatabase { server: String, database: String },
    #[error("user '{user}' may not {what} in {location}: have the database's owner run `{grant}`")]
    NoGrant { location: String, user: String, what: String, grant: String },
    #[error(
        "the store at {location} was written by a newer schedlab (store schema {found}, this build knows up to \
         {supported}): upgrade schedlab on this host, or pass another database with --db URL"
    )]
    NewerServerSchema { location: String, found: i64, supported: i64 },
    #[error(
        "{location} has a schema named 'schedlab' that schedlab did not make ({what}); schedlab leaves it \
         untouched: pass another database with --db URL"
    )]
    ForeignSchema { location: String, what: String },
    #[error("the store at {location} is locked by another session ({reason}): let it finish, then try again")]
    ServerBusy { location: String, reason: String },
    #[error("the connection to the store at {location} was lost ({reason}): check the server, then try again")]
    Lost { location: String, reason: String },
    #[error("the store at {location} failed: {reason}")]
    Server { location: String, reason: String },
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Sql(e)
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> Self {
        StoreError::Decode(e)
    }
}

impl StoreError {
    /// Another process held the store for longer than the busy timeout: the
    /// same write may succeed later.
    pub fn is_busy(&self) -> bool {
        match self {
            StoreError::Busy { .. } | StoreError::ServerBusy { .. } => true,
            StoreError::Sql(e) => sqlite::is_busy(e),
            _ => false,
        }
    }
}

/// SQLite's message without the statement text that rusqlite appends to
/// syntax errors (a migration's is a hundred lines long).
pub(crate) fn sql_message(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqlInputError { msg, .. } => msg.clone(),
        e => e.to_string(),
    }
}

/// Where a store lives, as `--db` or `$SCHEDLAB_DB` gives it.
#[derive(Debug, Clone, PartialEq)]
pub enum Location {
    /// A SQLite file.
    File(PathBuf),
    /// A private SQLite store in memory (`:memory:`, tests).
    Memory,
    /// A PostgreSQL database: `postgres://` or `postgresql://` (kept as written).
    Postgres(String),
}

impl Location {
    /// Read a `--db` value. A URL names its backend by scheme; anything
    /// else is a file. A URL of a kind schedlab cannot store in is an
    /// error, never a file of that name (`mysql://h/db` would otherwise
    /// create a folder named `mysql:`).
    pub fn parse(db: &std::ffi::OsStr) -> Result<Location> {
        if db == ":memory:" {
            return Ok(Location::Memory);
        }
        let Some(text) = db.to_str() else { return Ok(Location::File(PathBuf::from(db))) };
        let Some((scheme, _)) = text.split_once("://") else { return Ok(Location::File(PathBuf::from(db))) };
        let is_scheme = scheme.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
        if !is_scheme {
            return Ok(Location::File(PathBuf::from(db)));
        }
        match scheme.to_ascii_lowercase().as_str() {
            "postgres" | "postgresql" => Ok(Location::Postgres(text.to_string())),
            other => Err(StoreError::BadUrl {
                url: redact_secrets(text).into_owned(),
                reason: format!(
                    "schedlab stores results in SQLite files and PostgreSQL databases, not '{other}'; for a file of \
                     that name write ./{}",
                    redact_secrets(text)
                ),
            }),
        }
    }

    /// How messages name it (a URL without its password).
    pub fn shown(&self) -> String {
        match self {
            Location::File(p) => p.display().to_string(),
            Location::Memory => ":memory:".into(),
            Location::Postgres(url) => redact_secrets(url).into_owned(),
        }
    }
}

/// Open the store at `location` for `access` (see [`Access`]); each
/// statement waits up to `busy_timeout` for another process holding what it
/// needs.
pub fn open(location: &Location, access: Access, busy_timeout: Duration) -> Result<Box<dyn Store>> {
    Ok(match location {
        Location::File(path) => Box::new(SqliteStore::open_with(path, access, busy_timeout)?),
        Location::Memory => Box::new(SqliteStore::in_memory()?),
        Location::Postgres(url) => Box::new(PgStore::open(url, access, busy_timeout)?),
    })
}

/// `text` with the password of every URL in it left out
/// (`postgres://alice:secret@db/x` becomes `postgres://alice@db/x`, and a
/// `password=` query parameter goes too): command lines are stored with
/// each run, and a password must never be.
pub fn redact_secrets(text: &str) -> Cow<'_, str> {
    if !text.contains("://") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        out.push_str(&rest[..at + 3]);
        rest = &rest[at + 3..];
        let end = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
        let (url, after) = rest.split_at(end);
        // The authority ends at the first '/', '?' or '#'; its user part at
        // its last '@' (a password may hold '@' only percent-encoded, but
        // take the last to be safe).
        let auth_end = url.find(['/', '?', '#']).unwrap_or(url.len());
        let (authority, tail) = url.split_at(auth_end);
        match authority.rfind('@') {
            Some(at) => {
                let (userinfo, host) = authority.split_at(at);
                out.push_str(userinfo.split(':').next().unwrap_or_default());
                out.push_str(host);
            }
            None => out.push_str(authority),
        }
        match tail.split_once('?') {
            Some((path, query)) => {
                out.push_str(path);
                let kept: Vec<&str> =
                    query.split('&').filter(|kv| !kv.to_ascii_lowercase().starts_with("password=")).collect();
                if !kept.is_empty() {
                    out.push('?');
                    out.push_str(&kept.join("&"));
                }
            }
            None => out.push_str(tail),
        }
        rest = after;
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// The command line as it is stored: without passwords.
pub(crate) fn stored_command_line(args: &[String]) -> Vec<String> {
    args.iter().map(|a| redact_secrets(a).into_owned()).collect()
}

/// What [`Store::insert_run_as`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inserted {
    /// Stored now, under this id.
    Added(i64),
    /// A run with that uuid was already there, under this id; nothing changed.
    Present(i64),
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
    /// The kernel release the run started under, when it was recorded.
    pub kernel: Option<String>,
    /// The CPU model of its start environment, when it was recorded.
    pub cpu_model: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub benchmarks: Vec<String>,
}

/// Which runs a listing shows (`schedlab runs --host --kernel --cpu-model
/// --label`); empty fields select every run, and all given must match.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunFilter {
    pub host: Option<String>,
    /// A kernel release, or its beginning up to a `.`, `-` or `+`: `6.18`
    /// selects 6.18 and 6.18.4-rt but not 6.180.
    pub kernel: Option<String>,
    /// Part of the CPU model, any case: `epyc` selects "AMD EPYC 7763 ...".
    pub cpu_model: Option<String>,
    /// Labels the run must have, each with this value.
    pub labels: Vec<(String, String)>,
}

/// Where a page of a listing starts: after `skip` runs, among those older
/// than run `before` (a keyset: the index finds the page's first row, however
/// deep the page is).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PageStart {
    pub before: Option<i64>,
    pub skip: usize,
}

impl RunFilter {
    pub fn is_empty(&self) -> bool {
        self.host.is_none() && self.kernel.is_none() && self.cpu_model.is_none() && self.labels.is_empty()
    }

    /// Whether `kernel` (a run's release) is selected.
    pub fn kernel_matches(&self, kernel: Option<&str>) -> bool {
        match (&self.kernel, kernel) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(want), Some(k)) => {
                k == want || (k.starts_with(want.as_str()) && k[want.len()..].starts_with(['.', '-', '+']))
            }
        }
    }
}

/// A value bound to a listing's query.
pub(crate) enum Param {
    Text(String),
    Int(i64),
}

/// How a backend spells what [`filter_sql`] writes.
pub(crate) struct Dialect {
    /// The placeholder of the n-th parameter (from 1), an integer or text.
    pub(crate) placeholder: fn(usize, &Param) -> String,
    /// `needle` in `haystack` (1-based position, 0 when absent).
    pub(crate) position: fn(&str, &str) -> String,
}

/// The WHERE clause (over `runs r`) that `filter` and `before` make, its
/// values pushed onto `params`. Each selector is one indexed condition:
/// host and kernel by their indexes on `runs`, a label through
/// `run_labels(key, value, run_id)`.
pub(crate) fn filter_sql(filter: &RunFilter, before: Option<i64>, d: &Dialect, params: &mut Vec<Param>) -> String {
    let mut bind = |p: Param| {
        let ph = (d.placeholder)(params.len() + 1, &p);
        params.push(p);
        ph
    };
    let mut clauses = vec!["1 = 1".to_string()];
    if let Some(host) = &filter.host {
        clauses.push(format!("r.host = {}", bind(Param::Text(host.clone()))));
    }
    if let Some(kernel) = &filter.kernel {
        let k = bind(Param::Text(kernel.clone()));
        clauses.push(format!(
            "substr(r.kernel, 1, length({k})) = {k} AND substr(r.kernel, length({k}) + 1, 1) IN ('', '.', '-', '+')"
        ));
    }
    if let Some(cpu) = &filter.cpu_model {
        let c = bind(Param::Text(cpu.to_lowercase()));
        clauses.push(format!("{} > 0", (d.position)("lower(r.cpu_model)", &c)));
    }
    for (key, value) in &filter.labels {
        let (k, v) = (bind(Param::Text(key.clone())), bind(Param::Text(value.clone())));
        clauses.push(format!("r.id IN (SELECT run_id FROM run_labels WHERE key = {k} AND value = {v})"));
    }
    if let Some(before) = before {
        clauses.push(format!("r.id < {}", bind(Param::Int(before))));
    }
    clauses.join(" AND ")
}

/// The query behind [`Store::history_cases`]: the cases of benchmark `name`
/// in the runs `filter` takes, each joined to its run's head and to the one
/// metric followed (`metric`, else the case's default), in run order.
pub(crate) fn history_sql(
    name: &str,
    metric: Option<&str>,
    filter: &RunFilter,
    d: &Dialect,
    params: &mut Vec<Param>,
) -> String {
    params.push(Param::Text(name.into()));
    let name = (d.placeholder)(1, &params[0]);
    let chosen = match metric {
        Some(m) => {
            params.push(Param::Text(m.into()));
            format!("m.name = {}", (d.placeholder)(2, &params[1]))
        }
        None => "m.is_default".to_string(),
    };
    let runs = filter_sql(filter, None, d, params);
    format!(
        "SELECT r.id, r.name, r.started_unix_ms, r.host, r.kernel,
                c.name, c.bench_key, c.case_condition, c.condition_label, c.params, c.quick, c.invocations,
                m.name, m.unit, m.direction, m.headline, m.is_default, m.histogram, m.value, m.ci_lo, m.ci_hi, m.p99,
                m.n, m.replicates
         FROM cases c JOIN runs r ON r.id = c.run_id JOIN case_metrics m ON m.case_id = c.id AND {chosen}
         WHERE c.name = {name} AND {runs}
         ORDER BY c.run_id, c.seq"
    )
}

/// A whole run's benchmarks with their seq (their place in the run).
pub(crate) fn in_order(benches: &[BenchResult]) -> Vec<(i64, &BenchResult)> {
    benches.iter().enumerate().map(|(i, b)| (i as i64, b)).collect()
}

/// The invocations of the case of `bench` (row `bench_id`, at `seq`, just
/// written) in seq order: those among `stored` (id, seq, result) of its key
/// and condition, and `bench` itself as given.
pub(crate) fn case_invocations<'a>(
    stored: impl IntoIterator<Item = (i64, i64, &'a BenchResult)>,
    bench_id: i64,
    seq: i64,
    bench: &'a BenchResult,
) -> Vec<(i64, &'a BenchResult)> {
    let (key, condition) = (bench.key(), bench.condition.case_label());
    let mut out: Vec<(i64, &BenchResult)> = stored
        .into_iter()
        .filter(|(id, _, b)| *id != bench_id && b.key() == key && b.condition.case_label() == condition)
        .map(|(_, seq, b)| (seq, b))
        .collect();
    out.push((seq, bench));
    out.sort_by_key(|(seq, _)| *seq);
    out
}

/// The benchmark seq of a case's first complete invocation among `benches`.
pub(crate) fn first_seq(benches: &[(i64, &BenchResult)], case: &CaseSummary) -> i64 {
    benches
        .iter()
        .find(|(_, b)| {
            b.status == BenchStatus::Complete && b.key() == case.key && b.condition.case_label() == case.case_condition
        })
        .map_or(0, |(seq, _)| *seq)
}

/// A label the store will not keep (from an import or a copy: the command
/// line checks its own).
pub(crate) fn check_labels(run: &Run) -> Result<()> {
    for (k, v) in &run.labels {
        if let Some(problem) = schedlab_core::model::label_problem(k, v) {
            return Err(StoreError::Unstorable(format!("label {k}={v} cannot be stored: {problem}")));
        }
    }
    Ok(())
}

/// What [`Store::remove_runs`] removed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Removed {
    pub runs: Vec<RemovedRun>,
    /// Noise profiles (id, the removed runs it named).
    pub noise_profiles: Vec<(i64, Vec<i64>)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RemovedRun {
    pub id: i64,
    pub name: Option<String>,
    /// As stored (the run may be one whose data cannot be decoded).
    pub kind: String,
    pub status: String,
    pub benchmarks: usize,
    pub metrics: usize,
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
    /// Store a complete run (simulated or imported). Backends do it in one
    /// transaction, so a failed insert leaves nothing and can be retried.
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
    /// The runs `ids`, in that order, each with only its benchmarks named
    /// `bench` when given (what `history` reads); a run that cannot be
    /// decoded or is not there is an error in its place
    /// ([`StoreError::BadRun`], [`StoreError::NoSuchRun`]). Backends read
    /// them in a few queries rather than a few per run.
    fn load_runs(&self, ids: &[i64], bench: Option<&str>) -> Result<Vec<Result<Run>>> {
        let mut out = Vec::with_capacity(ids.len());
        for &id in ids {
            out.push(match self.load_run(id) {
                Ok(mut run) => {
                    if let Some(name) = bench {
                        run.benchmarks.retain(|b| b.name == name);
                    }
                    Ok(run)
                }
                Err(e @ (StoreError::BadRun { .. } | StoreError::NoSuchRun(_))) => Err(e),
                Err(e) => return Err(e),
            });
        }
        Ok(out)
    }
    /// Turn "12", "last", "last~2" or a run name into a run id.
    fn resolve(&self, selector: &str) -> Result<i64>;
    /// Most recent first; a run whose row cannot be decoded is an error in
    /// its place ([`StoreError::BadRun`]), so one bad run hides no other.
    fn list_runs(&self, limit: usize) -> Result<Vec<Result<RunSummary>>> {
        self.list_runs_where(&RunFilter::default(), limit)
    }
    /// [`Store::list_runs`] of the runs `filter` selects.
    fn list_runs_where(&self, filter: &RunFilter, limit: usize) -> Result<Vec<Result<RunSummary>>> {
        self.list_runs_page(filter, PageStart::default(), limit)
    }
    /// One page of [`Store::list_runs_where`]: up to `limit` runs from `start`
    /// on, in one indexed query.
    fn list_runs_page(&self, filter: &RunFilter, start: PageStart, limit: usize) -> Result<Vec<Result<RunSummary>>>;
    /// Ids (oldest first) of the runs `filter` selects, nothing decoded.
    fn run_ids_where(&self, filter: &RunFilter) -> Result<Vec<i64>>;
    /// Ids of runs (oldest first) with a benchmark of this name.
    fn runs_with_benchmark(&self, name: &str) -> Result<Vec<i64>>;
    /// Insert a noise profile and return its id.
    fn save_noise_profile(&mut self, p: &NoiseProfileRecord) -> Result<i64>;
    /// The host's most recent profile (by creation time, then id).
    fn latest_noise_profile(&self, host: &str) -> Result<Option<NoiseProfileRecord>>;
    /// Every profile, newest first.
    fn noise_profiles(&self) -> Result<Vec<NoiseProfileRecord>>;
    /// Remove the runs, their benchmarks and metrics, and the noise profiles
    /// computed from any of them, in one transaction: all or nothing.
    fn remove_runs(&mut self, ids: &[i64]) -> Result<Removed>;
    /// Ok if the backend reports a consistent store.
    fn check_integrity(&self) -> Result<()>;
    /// Human description of where the data lives.
    fn location(&self) -> String;
    /// The file the store lives in, when it is one: a result the store will
    /// not take is saved beside it.
    fn local_path(&self) -> Option<&Path> {
        None
    }
    /// How long one statement waits for another process (see [`open`]).
    fn busy_timeout(&self) -> Duration;
    /// Change that wait, e.g. for one quick attempt.
    fn set_busy_timeout(&mut self, timeout: Duration) -> Result<()>;
    /// The run's globally unique id, given when it was first stored and kept
    /// by `push` and `pull`.
    fn run_uuid(&self, id: i64) -> Result<Uuid>;
    /// The run stored under this uuid, if any.
    fn find_uuid(&self, uuid: Uuid) -> Result<Option<i64>>;
    /// Store a complete run under a given uuid, in one transaction, unless a
    /// run with that uuid is already there: copying is idempotent, and an
    /// interrupted copy completes when repeated.
    fn insert_run_as(&mut self, run: &Run, uuid: Uuid) -> Result<Inserted>;
    /// Every run's id, oldest first.
    fn run_ids(&self) -> Result<Vec<i64>>;
    /// The complete cases of benchmark `name` in the runs `filter` takes,
    /// handed to `each` in run order, each with only the metric `metric`
    /// names (the case's default metric when `None`) and what a history
    /// shows of its run. Read from the summaries stored with each benchmark
    /// and streamed: a fleet's history decodes no raw data and never holds
    /// every case at once. A run whose summary cannot be decoded is an error
    /// in its place ([`StoreError::BadRun`]).
    fn history_cases(
        &self,
        name: &str,
        metric: Option<&str>,
        filter: &RunFilter,
        each: &mut dyn FnMut(Result<(RunHead, CaseSummary)>),
    ) -> Result<()>;
    /// The metric names stored for benchmark `name`'s cases, first stored first.
    fn case_metric_names(&self, name: &str) -> Result<Vec<String>>;
}

/// A boxed store is a store: what [`open`] returns can be passed wherever
/// `&dyn Store` or `&mut dyn Store` is taken. Every method forwards, the
/// defaulted ones included, so each backend's own (one-transaction)
/// versions are the ones used.
impl<S: Store + ?Sized> Store for Box<S> {
    fn create_run(&mut self, run: &Run) -> Result<i64> {
        (**self).create_run(run)
    }
    fn begin_benchmark(&mut self, run_id: i64, bench: &BenchResult) -> Result<i64> {
        (**self).begin_benchmark(run_id, bench)
    }
    fn finish_benchmark(&mut self, bench_id: i64, bench: &BenchResult) -> Result<()> {
        (**self).finish_benchmark(bench_id, bench)
    }
    fn finish_run(
        &mut self,
        run_id: i64,
        status: RunStatus,
        ended_unix_ms: i64,
        env_end: Option<&Environment>,
    ) -> Result<()> {
        (**self).finish_run(run_id, status, ended_unix_ms, env_end)
    }
    fn insert_run(&mut self, run: &Run) -> Result<i64> {
        (**self).insert_run(run)
    }
    fn load_run(&self, id: i64) -> Result<Run> {
        (**self).load_run(id)
    }
    fn load_runs(&self, ids: &[i64], bench: Option<&str>) -> Result<Vec<Result<Run>>> {
        (**self).load_runs(ids, bench)
    }
    fn resolve(&self, selector: &str) -> Result<i64> {
        (**self).resolve(selector)
    }
    fn list_runs(&self, limit: usize) -> Result<Vec<Result<RunSummary>>> {
        (**self).list_runs(limit)
    }
    fn list_runs_where(&self, filter: &RunFilter, limit: usize) -> Result<Vec<Result<RunSummary>>> {
        (**self).list_runs_where(filter, limit)
    }
    fn list_runs_page(&self, filter: &RunFilter, start: PageStart, limit: usize) -> Result<Vec<Result<RunSummary>>> {
        (**self).list_runs_page(filter, start, limit)
    }
    fn run_ids_where(&self, filter: &RunFilter) -> Result<Vec<i64>> {
        (**self).run_ids_where(filter)
    }
    fn runs_with_benchmark(&self, name: &str) -> Result<Vec<i64>> {
        (**self).runs_with_benchmark(name)
    }
    fn save_noise_profile(&mut self, p: &NoiseProfileRecord) -> Result<i64> {
        (**self).save_noise_profile(p)
    }
    fn latest_noise_profile(&self, host: &str) -> Result<Option<NoiseProfileRecord>> {
        (**self).latest_noise_profile(host)
    }
    fn noise_profiles(&self) -> Result<Vec<NoiseProfileRecord>> {
        (**self).noise_profiles()
    }
    fn remove_runs(&mut self, ids: &[i64]) -> Result<Removed> {
        (**self).remove_runs(ids)
    }
    fn check_integrity(&self) -> Result<()> {
        (**self).check_integrity()
    }
    fn location(&self) -> String {
        (**self).location()
    }
    fn local_path(&self) -> Option<&Path> {
        (**self).local_path()
    }
    fn busy_timeout(&self) -> Duration {
        (**self).busy_timeout()
    }
    fn set_busy_timeout(&mut self, timeout: Duration) -> Result<()> {
        (**self).set_busy_timeout(timeout)
    }
    fn run_uuid(&self, id: i64) -> Result<Uuid> {
        (**self).run_uuid(id)
    }
    fn find_uuid(&self, uuid: Uuid) -> Result<Option<i64>> {
        (**self).find_uuid(uuid)
    }
    fn insert_run_as(&mut self, run: &Run, uuid: Uuid) -> Result<Inserted> {
        (**self).insert_run_as(run, uuid)
    }
    fn run_ids(&self) -> Result<Vec<i64>> {
        (**self).run_ids()
    }
    fn history_cases(
        &self,
        name: &str,
        metric: Option<&str>,
        filter: &RunFilter,
        each: &mut dyn FnMut(Result<(RunHead, CaseSummary)>),
    ) -> Result<()> {
        (**self).history_cases(name, metric, filter, each)
    }
    fn case_metric_names(&self, name: &str) -> Result<Vec<String>> {
        (**self).case_metric_names(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn a_location_is_a_file_unless_it_is_a_url() {
        let loc = |s: &str| Location::parse(OsStr::new(s));
        assert_eq!(loc("results.db").unwrap(), Location::File("results.db".into()));
        assert_eq!(loc("./postgres://x").unwrap(), Location::File("./postgres://x".into()));
        assert_eq!(loc(":memory:").unwrap(), Location::Memory);
        for url in ["postgres://u@h/db", "postgresql://u@h:5433/db", "POSTGRES://u@h/db"] {
            assert_eq!(loc(url).unwrap(), Location::Postgres(url.into()));
        }
        let err = loc("mysql://root:pw@h/db").unwrap_err().to_string();
        assert!(err.contains("not 'mysql'") && err.contains("./mysql://root@h/db") && !err.contains("pw"), "{err}");
        assert_eq!(Location::Postgres("postgres://u:pw@h/db".into()).shown(), "postgres://u@h/db");
    }

    #[test]
    fn a_kernel_selects_its_release_and_the_releases_it_begins() {
        let f = RunFilter { kernel: Some("6.18".into()), ..Default::default() };
        for (k, want) in [("6.18", true), ("6.18.4", true), ("6.18-rt", true), ("6.180", false), ("6.1", false)] {
            assert_eq!(f.kernel_matches(Some(k)), want, "{k}");
        }
        assert!(!f.kernel_matches(None));
        assert!(RunFilter::default().kernel_matches(None));
    }

    #[test]
    fn passwords_are_taken_out_of_urls_and_nothing_else_changes() {
        assert_eq!(redact_secrets("plain text, no url"), "plain text, no url");
        assert_eq!(redact_secrets("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact_secrets("postgres://u:p%40ss@h:1/db?sslmode=require"), "postgres://u@h:1/db?sslmode=require");
        assert_eq!(redact_secrets("--to=postgres://u:pw@h/db"), "--to=postgres://u@h/db");
        assert_eq!(redact_secrets("postgres://h/db?password=x&user=u"), "postgres://h/db?user=u");
        assert_eq!(redact_secrets("postgres://h/db?password=x"), "postgres://h/db");
        assert_eq!(redact_secrets("a postgres://u:1@h/x and http://v:2@w/y"), "a postgres://u@h/x and http://v@w/y");
    }
}
