//! What every command needs: the store (where it is, opened for reading or
//! for writing, and how finished results reach it while another process
//! holds it) and this build's identity.

use anyhow::{Context, Result};
use schedlab_core::{BenchResult, Run, ToolInfo};
use schedlab_store::{Access, Location, Store, StoreError, DEFAULT_BUSY_TIMEOUT};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub fn tool_info() -> ToolInfo {
    ToolInfo {
        name: "schedlab".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        git_rev: option_env!("SCHEDLAB_GIT_REV").map(String::from),
    }
}

/// `--db`, else $SCHEDLAB_DB, else the per-user data directory.
pub fn store_path(db: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = db {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("SCHEDLAB_DB").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    Ok(data_dir()?.join("results.db"))
}

/// The per-user data directory (~/.local/share/schedlab).
fn data_dir() -> Result<PathBuf> {
    let dirs = directories::ProjectDirs::from("", "", "schedlab").ok_or_else(|| {
        anyhow::anyhow!("cannot find a home directory for the result store: pass --db PATH or set SCHEDLAB_DB")
    })?;
    Ok(dirs.data_dir().to_path_buf())
}

/// Where the store is (see [`store_path`]): a SQLite file, or a database
/// named by a `postgres://` URL.
pub fn store_location(db: Option<&Path>) -> Result<Location> {
    let given = store_path(db)?;
    Location::parse(given.as_os_str()).map_err(|e| {
        let from = if db.is_some() { "--db" } else { "$SCHEDLAB_DB" };
        anyhow::anyhow!("{from}: {e}")
    })
}

/// How long to wait for a store that another process holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Patience {
    /// One statement's wait ($SCHEDLAB_BUSY_TIMEOUT, SQLite's busy timeout).
    pub statement: Duration,
    /// How long a finished result keeps trying before it is saved to a file
    /// beside the store instead ($SCHEDLAB_STORE_PATIENCE).
    pub result: Duration,
}

const DEFAULT_RESULT_PATIENCE: Duration = Duration::from_secs(600);

impl Default for Patience {
    fn default() -> Self {
        Patience { statement: DEFAULT_BUSY_TIMEOUT, result: DEFAULT_RESULT_PATIENCE }
    }
}

/// The patience the environment asks for.
pub fn patience() -> Result<Patience> {
    let var = |name: &str, default: Duration| -> Result<Duration> {
        match std::env::var(name) {
            Ok(v) if !v.trim().is_empty() => schedlab_core::units::parse_duration_ns(v.trim())
                .map(Duration::from_nanos)
                .map_err(|e| anyhow::anyhow!("${name}='{v}': {e}: write a duration such as 30s or 10m")),
            _ => Ok(default),
        }
    };
    let d = Patience::default();
    Ok(Patience {
        statement: var("SCHEDLAB_BUSY_TIMEOUT", d.statement)?,
        result: var("SCHEDLAB_STORE_PATIENCE", d.result)?,
    })
}

fn open(db: Option<&Path>, access: Access) -> Result<Box<dyn Store>> {
    Ok(schedlab_store::open(&store_location(db)?, access, patience()?.statement)?)
}

/// The store for a command that writes results: created when missing.
pub fn open_store(db: Option<&Path>) -> Result<Box<dyn Store>> {
    open(db, Access::Create)
}

/// The store for a command that only reads: opened read-only, so that a
/// store the user cannot write (another user's, a read-only mount) can be
/// read, and a missing one is reported, not created.
pub fn open_store_to_read(db: Option<&Path>) -> Result<Box<dyn Store>> {
    open(db, Access::Read)
}

/// The store for a command that changes what is stored (`rm`): it must exist.
pub fn open_store_to_modify(db: Option<&Path>) -> Result<Box<dyn Store>> {
    open(db, Access::Modify)
}

/// The runs with these ids, leaving out (with a one-line warning) any that
/// cannot be decoded or no longer exist: one bad run must not break a
/// command about the others.
pub fn load_readable_runs(store: &dyn Store, ids: &[i64]) -> Result<Vec<Run>> {
    let mut runs = Vec::with_capacity(ids.len());
    for &id in ids {
        match store.load_run(id) {
            Ok(run) => runs.push(run),
            Err(e @ StoreError::BadRun { .. }) => crate::term::warn(format!("{e}; left out here")),
            Err(StoreError::NoSuchRun(_)) => {
                crate::term::warn(format!("run #{id} is no longer in the store; left out here"))
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(runs)
}

/// "2.5 s", "10 min".
fn human(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1} s")
    } else {
        format!("{:.0} min", s / 60.0)
    }
}

/// The first attempt's wait: short, so that the user hears at once why
/// nothing happens.
const FIRST_ATTEMPT: Duration = Duration::from_secs(1);
/// The single attempt of a write that must not wait (a result already safe
/// in a file, offered to the store again between benchmarks).
const QUICK_ATTEMPT: Duration = Duration::from_millis(100);

/// Write a finished result (`what`), waiting for a store that another
/// process holds: retried with backoff for up to $SCHEDLAB_STORE_PATIENCE,
/// saying on stderr that it waits. Each write is one transaction, so a
/// retry never doubles anything.
pub fn write_patiently<T>(
    store: &mut dyn Store,
    what: &str,
    write: impl FnMut(&mut dyn Store) -> schedlab_store::Result<T>,
) -> schedlab_store::Result<T> {
    let patience = patience().unwrap_or_default().result;
    write_within(store, what, patience, true, write)
}

fn write_within<T>(
    store: &mut dyn Store,
    what: &str,
    patience: Duration,
    say: bool,
    mut write: impl FnMut(&mut dyn Store) -> schedlab_store::Result<T>,
) -> schedlab_store::Result<T> {
    let start = Instant::now();
    let statement = store.busy_timeout();
    let first = if patience.is_zero() { QUICK_ATTEMPT } else { FIRST_ATTEMPT };
    // Failing to change the timeout only changes how long an attempt waits.
    let _ = store.set_busy_timeout(statement.min(first));
    let mut backoff = Duration::from_millis(10);
    let mut waited = false;
    let result = loop {
        match write(store) {
            // Ctrl-C or --timeout: the user wants the end, not a long wait;
            // the caller keeps the result in a file.
            Err(e) if e.is_busy() && start.elapsed() < patience && !schedlab_live::hygiene::stop_requested() => {
                if say && !waited {
                    eprintln!(
                        "the store at {} is busy (another process is writing to it): waiting up to {} to store {what}",
                        store.location(),
                        human(patience)
                    );
                }
                waited = true;
                // SQLite waits inside each attempt; the sleep covers the
                // cases where it reports busy at once.
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_secs(1));
                let left = patience.saturating_sub(start.elapsed());
                let _ = store.set_busy_timeout(statement.min(left).max(QUICK_ATTEMPT));
            }
            done => break done,
        }
    };
    let _ = store.set_busy_timeout(statement);
    if say && waited && result.is_ok() {
        eprintln!("the store is free again: {what} stored after waiting {}", human(start.elapsed()));
    }
    result
}

/// Save `run` as schedlab JSON (what `schedlab import` takes) in a new file
/// beside the store (a server's store: in the per-user data directory), or
/// in the temporary directory when that one cannot be written; or over
/// `existing`, which an earlier call returned.
pub fn save_run_file(store: &dyn Store, run: &Run, existing: Option<&Path>) -> Result<PathBuf> {
    let json = serde_json::to_string_pretty(run)? + "\n";
    if let Some(path) = existing {
        // Written whole, then renamed: a crash leaves the old file or the
        // new one, never half of one.
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, &json)
            .and_then(|()| std::fs::rename(&tmp, path))
            .with_context(|| format!("cannot update {}, which holds the run's results", path.display()))?;
        return Ok(path.to_path_buf());
    }
    let store_path = match store.local_path() {
        Some(p) => p.to_path_buf(),
        None => {
            let dir = data_dir().unwrap_or_else(|_| std::env::temp_dir());
            // Made only now, when a result needs it; failing here falls
            // back to the temporary directory below.
            let _ = std::fs::create_dir_all(&dir);
            dir.join("server-store")
        }
    };
    let stem = store_path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "store".into());
    let base = format!("{stem}.unsaved-{}-run-{}", run.kind.name(), run.started_unix_ms);
    let mut last_error = None;
    for beside in [true, false] {
        for n in 1..100 {
            let name = if n == 1 { format!("{base}.json") } else { format!("{base}-{n}.json") };
            let path = if beside { store_path.with_file_name(name) } else { std::env::temp_dir().join(name) };
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut f) => {
                    f.write_all(json.as_bytes())
                        .and_then(|()| f.sync_all())
                        .with_context(|| format!("cannot write the run's results to {}", path.display()))?;
                    return Ok(path);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    last_error = Some(e);
                    break;
                }
            }
        }
    }
    Err(anyhow::anyhow!(
        "cannot save the run's results beside the store or in {}: {}",
        std::env::temp_dir().display(),
        last_error.map(|e| e.to_string()).unwrap_or_else(|| "no free file name".into())
    ))
}

/// Why the store did not take a result. A lock's own advice (try again)
/// does not fit here: the caller keeps the result instead.
fn refusal(store: &dyn Store, e: &StoreError) -> String {
    if e.is_busy() {
        format!("the store at {} stayed locked by another process", store.location())
    } else {
        e.to_string()
    }
}

/// Store a finished run (simulated or imported); if the store will not take
/// it, save it in a file (see [`save_run_file`]) and say so on stderr.
/// Ok(Err(file)) when the run went to that file.
pub fn store_or_save(store: &mut dyn Store, run: &Run, what: &str) -> Result<std::result::Result<i64, PathBuf>> {
    match write_patiently(store, what, |s| s.insert_run(run)) {
        Ok(id) => Ok(Ok(id)),
        Err(e) => {
            let file = save_run_file(store, run, None)?;
            eprintln!("warning: {}: {what} is saved in {} instead", refusal(store, &e), file.display());
            Ok(Err(file))
        }
    }
}

/// The line that ends a command whose results went to files: where they
/// are and how to store them.
pub fn unsaved_error(store: &dyn Store, files: &[PathBuf]) -> anyhow::Error {
    let list: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    anyhow::anyhow!(
        "the store at {} did not take every result; nothing is lost: `schedlab import FILE` stores each of {}",
        store.location(),
        list.join(", ")
    )
}

/// The error that ends a live run the store took only part of.
pub fn partly_stored(store: &dyn Store, run_id: i64, file: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "run #{run_id} is only partly in the store at {}, which did not take the rest; nothing is lost: the whole \
         run is in {}, and `schedlab rm {run_id}` then `schedlab import {}` stores it complete",
        store.location(),
        file.display(),
        file.display()
    )
}

/// A live run's writer. Each result goes to the store as it finishes; if the
/// store will not take one (busy past patience, or any other failure), the
/// whole run is kept in a file beside the store from then on, rewritten
/// after each result, and what the store lacks is offered to it again after
/// each benchmark and, patiently, at the end.
pub struct Recorder<'s> {
    store: &'s mut dyn Store,
    run_id: i64,
    /// Per result in the run: its row in the store, and whether it is committed there.
    rows: Vec<(Option<i64>, bool)>,
    /// The row begun for the benchmark being measured.
    begun: Option<i64>,
    /// Set once the store failed: the file that holds the whole run.
    file: Option<PathBuf>,
    /// How long each write waits for a busy store.
    patience: Duration,
}

impl<'s> Recorder<'s> {
    /// Create the run's row. Nothing is measured yet, so failing here loses nothing.
    pub fn start(store: &'s mut dyn Store, run: &Run) -> Result<Recorder<'s>> {
        Recorder::start_with(store, run, patience()?.result)
    }

    fn start_with(store: &'s mut dyn Store, run: &Run, patience: Duration) -> Result<Recorder<'s>> {
        let run_id = write_within(store, "the new run", patience, true, |s| s.create_run(run))?;
        Ok(Recorder { store, run_id, rows: Vec::new(), begun: None, file: None, patience })
    }

    pub fn run_id(&self) -> i64 {
        self.run_id
    }

    /// Mark a benchmark started (`incomplete` until it finishes), so that a
    /// crash leaves a trace of it.
    pub fn begin(&mut self, run: &Run, placeholder: &BenchResult) -> Result<()> {
        self.begun = None;
        if self.file.is_some() {
            return Ok(());
        }
        let (run_id, what) = (self.run_id, format!("the start of {}", placeholder.key()));
        match write_within(self.store, &what, self.patience, true, |s| s.begin_benchmark(run_id, placeholder)) {
            Ok(id) => self.begun = Some(id),
            Err(e) => self.divert(run, &e, &what)?,
        }
        Ok(())
    }

    /// Keep the result last pushed onto `run.benchmarks`.
    pub fn finish(&mut self, run: &Run) -> Result<()> {
        let Some(bench) = run.benchmarks.last() else { return Ok(()) };
        let row = self.begun.take();
        if self.file.is_none() {
            let (run_id, what) = (self.run_id, format!("the result of {}", bench.key()));
            let mut row = row;
            let written = write_within(self.store, &what, self.patience, true, |s| {
                // The row is remembered across retries: begun twice, it would count twice.
                let id = match row {
                    Some(id) => id,
                    None => *row.insert(s.begin_benchmark(run_id, bench)?),
                };
                s.finish_benchmark(id, bench).map(|()| id)
            });
            return match written {
                Ok(id) => {
                    self.rows.push((Some(id), true));
                    Ok(())
                }
                Err(e) => {
                    self.rows.push((row, false));
                    self.divert(run, &e, &what)
                }
            };
        }
        self.rows.push((row, false));
        if self.flush(run, Duration::ZERO, false) {
            return Ok(());
        }
        self.save(run)
    }

    /// Record the run's end. Returns the file that holds the run when the
    /// store still lacks part of it.
    pub fn end(mut self, run: &Run) -> Result<Option<PathBuf>> {
        if self.file.is_none() {
            let run_id = self.run_id;
            let ended = run.ended_unix_ms.unwrap_or(run.started_unix_ms);
            let what = "the end of the run";
            let end = |s: &mut dyn Store| s.finish_run(run_id, run.status, ended, run.env_end.as_ref());
            return match write_within(self.store, what, self.patience, true, end) {
                Ok(()) => Ok(None),
                Err(e) => {
                    self.divert(run, &e, what)?;
                    Ok(self.file)
                }
            };
        }
        if self.flush(run, self.patience, true) {
            return Ok(None);
        }
        self.save(run)?;
        Ok(self.file)
    }

    /// Offer the store what it lacks, waiting up to `patience` for each
    /// write; with `ending`, the run's end too. True once the store holds
    /// the whole run (the file is then removed).
    fn flush(&mut self, run: &Run, patience: Duration, ending: bool) -> bool {
        let run_id = self.run_id;
        let say = !patience.is_zero();
        for (i, (row, stored)) in self.rows.iter_mut().enumerate() {
            if *stored {
                continue;
            }
            let bench = &run.benchmarks[i];
            let what = format!("the result of {}", bench.key());
            let id = match *row {
                Some(id) => id,
                None => match write_within(self.store, &what, patience, say, |s| s.begin_benchmark(run_id, bench)) {
                    Ok(id) => id,
                    Err(_) => return false,
                },
            };
            *row = Some(id);
            if write_within(self.store, &what, patience, say, |s| s.finish_benchmark(id, bench)).is_err() {
                return false;
            }
            *stored = true;
        }
        if ending {
            let ended = run.ended_unix_ms.unwrap_or(run.started_unix_ms);
            let end = |s: &mut dyn Store| s.finish_run(run_id, run.status, ended, run.env_end.as_ref());
            if write_within(self.store, "the end of the run", patience, say, end).is_err() {
                return false;
            }
        }
        if let Some(file) = self.file.take() {
            // The store has it all: the file would only invite a duplicate import.
            let _ = std::fs::remove_file(&file);
            eprintln!(
                "the store took the rest of run #{run_id}: {} is no longer needed and was removed",
                file.display()
            );
        }
        true
    }

    /// From now on the run is kept in a file.
    fn divert(&mut self, run: &Run, e: &StoreError, what: &str) -> Result<()> {
        let file = save_run_file(self.store, run, None)?;
        eprintln!(
            "warning: {}: {what} and the rest of run #{} are kept in {} until the store takes them",
            refusal(self.store, e),
            self.run_id,
            file.display()
        );
        self.file = Some(file);
        Ok(())
    }

    fn save(&mut self, run: &Run) -> Result<()> {
        let path = save_run_file(self.store, run, self.file.as_deref())?;
        self.file = Some(path);
        Ok(())
    }
}

pub fn now_unix_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_core::{BenchStatus, Condition, RunKind, RunStatus, SchedCondition};
    use schedlab_store::SqliteStore;

    fn bench(i: u32) -> BenchResult {
        let cond = Condition::Live { requested: SchedCondition::default(), applied: None, loads: vec![] };
        let mut b = BenchResult::new("pipe", cond, 1000);
        b.invocation = i;
        b
    }

    /// One benchmark as `execute` measures it: begun, then finished.
    fn measure(rec: &mut Recorder<'_>, run: &mut Run, i: u32) {
        rec.begin(run, &bench(i)).unwrap();
        let mut done = bench(i);
        done.status = BenchStatus::Complete;
        run.benchmarks.push(done);
        rec.finish(run).unwrap();
    }

    fn live_run() -> Run {
        Run::new(RunKind::Live, tool_info(), vec!["schedlab".into()], "h".into(), 1000)
    }

    fn lock(path: &Path) -> rusqlite::Connection {
        let holder = rusqlite::Connection::open(path).unwrap();
        holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
        holder
    }

    fn saved(file: &Path) -> Run {
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
    }

    #[test]
    fn a_result_the_busy_store_refuses_waits_in_a_file_until_the_store_takes_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let mut store = SqliteStore::open_with(&path, Access::Create, Duration::from_millis(20)).unwrap();
        let mut run = live_run();
        let mut rec = Recorder::start_with(&mut store, &run, Duration::from_millis(100)).unwrap();
        let id = rec.run_id();
        run.id = Some(id);
        measure(&mut rec, &mut run, 0);
        assert!(rec.file.is_none());

        let holder = lock(&path);
        measure(&mut rec, &mut run, 1);
        let file = rec.file.clone().expect("the busy store sent the run to a file");
        assert!(file.starts_with(dir.path()), "beside the store: {}", file.display());
        assert_eq!(saved(&file).benchmarks.len(), 2, "the file holds the whole run");
        measure(&mut rec, &mut run, 2);
        assert_eq!(saved(&file).benchmarks.len(), 3, "rewritten after each result");
        holder.execute_batch("COMMIT").unwrap();

        // The next result offers the backlog again, and the store takes it.
        measure(&mut rec, &mut run, 3);
        assert!(rec.file.is_none() && !file.exists(), "the file goes once the store has everything");
        run.status = RunStatus::Complete;
        run.ended_unix_ms = Some(2000);
        assert_eq!(rec.end(&run).unwrap(), None);
        let back = store.load_run(id).unwrap();
        assert_eq!(back.status, RunStatus::Complete);
        let invocations: Vec<u32> = back.benchmarks.iter().map(|b| b.invocation).collect();
        assert_eq!(invocations, vec![0, 1, 2, 3], "each result once, in order");
        assert!(back.benchmarks.iter().all(|b| b.status == BenchStatus::Complete));
    }

    #[test]
    fn a_store_busy_to_the_end_leaves_the_whole_run_in_a_file_that_import_takes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let mut store = SqliteStore::open_with(&path, Access::Create, Duration::from_millis(20)).unwrap();
        let mut run = live_run();
        let mut rec = Recorder::start_with(&mut store, &run, Duration::from_millis(100)).unwrap();
        run.id = Some(rec.run_id());
        measure(&mut rec, &mut run, 0);
        let holder = lock(&path);
        measure(&mut rec, &mut run, 1);
        run.status = RunStatus::Complete;
        run.ended_unix_ms = Some(2000);
        let file = rec.end(&run).unwrap().expect("the run is not all in the store");
        drop(holder);
        let whole = saved(&file);
        assert_eq!(whole.benchmarks.len(), 2);
        assert_eq!(whole.status, RunStatus::Complete);
        let text = std::fs::read_to_string(&file).unwrap();
        let imported = schedlab_report::import::import("f", &text, schedlab_report::import::ImportFormat::Schedlab, 0);
        assert_eq!(imported.unwrap().benchmarks, run.benchmarks);
        // The store's copy says what it is: still running, one result.
        let partial = store.load_run(run.id.unwrap()).unwrap();
        assert_eq!((partial.status, partial.benchmarks.len()), (RunStatus::Running, 1));
    }

    #[test]
    fn a_finished_run_the_store_refuses_is_saved_for_import() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let mut store = SqliteStore::open(&path).unwrap();
        let mut run = live_run();
        run.name = Some("taken".into());
        store.insert_run(&run).unwrap();
        // A failure that is not a lock (the name is taken) is kept as safely.
        let file = store_or_save(&mut store, &run, "the run").unwrap().unwrap_err();
        assert_eq!(saved(&file).name.as_deref(), Some("taken"));
        let second = save_run_file(&store, &run, None).unwrap();
        assert_ne!(file, second, "an earlier file is never overwritten");
    }
}
