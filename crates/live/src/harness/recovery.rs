//! Recovery records: every kernel setting schedlab changes is written down,
//! with its original value, *before* it changes, so that a SIGKILL, a crash
//! or a power cut cannot leave the machine changed without a trace.
//!
//! ```text
//!  Record::create(what, steps) ──> /run/schedlab/<pid>-<n>-<what>.json   (fallback:
//!  change the settings                 $TMPDIR/schedlab-recovery-<uid>/, mode 0700)
//!  ...
//!  drop / restore() ──> apply the steps in order, remove the file
//!  SIGKILL, crash ──> the file stays; its owner is dead: `schedlab check`
//!                     lists it, `schedlab check --restore` applies and removes it
//! ```
//!
//! A record names its owner (pid and start time, so a reused pid is not
//! mistaken for it), the boot it was made in (a reboot resets the kernel's
//! settings, so a record from an earlier boot is obsolete and only removed)
//! and the steps that put everything back. A step is generic — "write this
//! value to this file" (tracefs, sysctl, scheduler debugfs and cgroup files
//! alike) or "remove this temporary cgroup" — so a new kind of setting plugs
//! in by building its steps, without this module naming a benchmark. Steps
//! may only touch kernel interfaces (paths under /sys/kernel/tracing,
//! /sys/kernel/debug/tracing, /sys/kernel/debug/sched, /proc/sys,
//! /sys/fs/cgroup; only cgroups named `schedlab-*` are removed),
//! and records are only read from a directory this user owns and others cannot
//! write, so a planted record cannot make `check --restore` write elsewhere.
//!
//! The process also keeps the records it holds in memory: a forced exit
//! (a second Ctrl-C that the normal cleanup did not answer in time) restores
//! them first ([`restore_held`]).

use crate::error::LiveError;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Format version of the JSON record.
const VERSION: u64 = 1;
/// Where records go when /run is writable (root).
const RUN_DIR: &str = "/run/schedlab";
/// The kernel interfaces a step may write.
const ALLOWED: &[&str] = &[
    "/sys/kernel/tracing/",
    "/sys/kernel/debug/tracing/",
    "/sys/kernel/debug/sched/",
    "/proc/sys/",
    "/sys/fs/cgroup/",
];
/// The prefix of the cgroups schedlab makes, the only ones a step removes.
pub const CGROUP_PREFIX: &str = "schedlab-";

/// One action that puts a setting back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Write `value` to the existing file `path` (opened for writing with
    /// truncation, never created): a sysctl, a tracefs or a cgroup file.
    Write { path: PathBuf, value: String },
    /// Remove the temporary cgroup `path` (a directory named `schedlab-*`
    /// under /sys/fs/cgroup): tasks still in it go back to its parent
    /// first; already gone counts as done.
    Rmdir { path: PathBuf },
}

impl Step {
    pub fn write(path: impl Into<PathBuf>, value: impl Into<String>) -> Step {
        Step::Write { path: path.into(), value: value.into() }
    }

    pub fn rmdir(path: impl Into<PathBuf>) -> Step {
        Step::Rmdir { path: path.into() }
    }

    fn to_json(&self) -> Value {
        match self {
            Step::Write { path, value } => json!({ "write": { "path": path, "value": value } }),
            Step::Rmdir { path } => json!({ "rmdir": { "path": path } }),
        }
    }

    fn from_json(v: &Value) -> Option<Step> {
        if let Some(r) = v.get("rmdir") {
            return Some(Step::rmdir(r.get("path")?.as_str()?));
        }
        let w = v.get("write")?;
        Some(Step::write(w.get("path")?.as_str()?, w.get("value")?.as_str()?))
    }

    fn check_allowed(&self) -> Result<(), String> {
        let (path, verb) = match self {
            Step::Write { path, .. } => (path, "write"),
            Step::Rmdir { path } => (path, "remove"),
        };
        let p = path.to_string_lossy();
        if p.contains("/../") || p.ends_with("/..") || !ALLOWED.iter().any(|a| p.starts_with(a)) {
            return Err(format!("refusing to {verb} {p}: not a kernel setting ({})", ALLOWED.join(", ")));
        }
        if let Step::Rmdir { path } = self {
            let ours = path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(CGROUP_PREFIX));
            if !p.starts_with("/sys/fs/cgroup/") || !ours {
                return Err(format!("refusing to remove {p}: only cgroups named {CGROUP_PREFIX}* are schedlab's"));
            }
        }
        Ok(())
    }

    fn apply(&self) -> Result<(), String> {
        self.check_allowed()?;
        match self {
            Step::Write { path, value } => write_setting(path, value),
            Step::Rmdir { path } => remove_cgroup(path),
        }
    }
}

fn write_setting(path: &Path, value: &str) -> Result<(), String> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|e| format!("writing {value:?} to {}: {e}", path.display()))
}

/// Remove a cgroup directory, moving whatever still runs in it to its parent.
/// Tasks that are exiting may hold it for a moment: tried for up to 2 s.
pub(crate) fn remove_cgroup(path: &Path) -> Result<(), String> {
    let parent = path.parent().ok_or_else(|| format!("{} has no parent", path.display()))?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match std::fs::remove_dir(path) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) if std::time::Instant::now() >= deadline => {
                return Err(format!("removing the cgroup {}: {e} (tasks still in it?)", path.display()))
            }
            Err(_) => {}
        }
        // A threaded cgroup (v2) lists threads, a v1 cgroup its tasks; the parent takes them back.
        for file in ["cgroup.threads", "cgroup.procs", "tasks"] {
            let ids = std::fs::read_to_string(path.join(file)).unwrap_or_default();
            for id in ids.split_whitespace() {
                let _ = write_setting(&parent.join(file), id);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The record as stored.
#[derive(Debug, Clone)]
struct Data {
    what: String,
    owner_pid: i32,
    owner_start: u64,
    boot_id: String,
    created_unix_ms: i64,
    steps: Vec<Step>,
}

impl Data {
    fn to_json(&self) -> Value {
        json!({
            "schedlab_recovery": VERSION,
            "what": self.what,
            "owner_pid": self.owner_pid,
            "owner_start": self.owner_start,
            "boot_id": self.boot_id,
            "created_unix_ms": self.created_unix_ms,
            "steps": self.steps.iter().map(Step::to_json).collect::<Vec<_>>(),
        })
    }

    fn from_json(v: &Value) -> Result<Data, String> {
        let version = v.get("schedlab_recovery").and_then(Value::as_u64).ok_or("not a schedlab recovery record")?;
        if version != VERSION {
            return Err(format!(
                "record format {version} (this schedlab reads {VERSION}): use the schedlab that wrote it"
            ));
        }
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string).ok_or(format!("no {k}"));
        let n = |k: &str| v.get(k).and_then(Value::as_i64).ok_or(format!("no {k}"));
        let steps = v
            .get("steps")
            .and_then(Value::as_array)
            .ok_or("no steps")?
            .iter()
            .map(|x| Step::from_json(x).ok_or_else(|| format!("unknown step {x} (written by a newer schedlab?)")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Data {
            what: s("what")?,
            owner_pid: n("owner_pid")? as i32,
            owner_start: n("owner_start")? as u64,
            boot_id: s("boot_id")?,
            created_unix_ms: n("created_unix_ms")?,
            steps,
        })
    }
}

struct Inner {
    path: PathBuf,
    /// None once restored.
    data: Mutex<Option<Data>>,
}

/// Records this process holds (for [`restore_held`]) and how many.
static HELD: Mutex<Vec<Arc<Inner>>> = Mutex::new(Vec::new());
static HELD_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Kernel settings changed and written down: restored (steps applied in
/// order, the file removed) by [`Record::restore`] or on drop.
pub struct Record {
    inner: Arc<Inner>,
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").map(|s| s.trim().to_string()).unwrap_or_default()
}

/// A process's start time (clock ticks after boot, /proc/PID/stat field 22).
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()
}

/// The directories records may be in, in the order they are tried.
fn dirs() -> Vec<PathBuf> {
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    vec![PathBuf::from(RUN_DIR), std::env::temp_dir().join(format!("schedlab-recovery-{uid}"))]
}

/// Whether `dir` is ours and nobody else may write into it.
fn trusted(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir() && m.uid() == uid && m.mode() & 0o022 == 0)
}

/// A directory to write records in: /run/schedlab, else the temp dir's.
fn writable_dir() -> Result<PathBuf, LiveError> {
    use std::os::unix::fs::DirBuilderExt;
    let mut last = String::new();
    for d in dirs() {
        let _ = std::fs::DirBuilder::new().mode(0o700).recursive(true).create(&d);
        if trusted(&d) {
            return Ok(d);
        }
        last = format!("{} is missing, not a directory, not ours or writable by others", d.display());
    }
    Err(LiveError::Os {
        what: "creating a recovery record directory",
        detail: last,
        hint: "make /run/schedlab (root) or the temp dir writable, owned by you and not writable by others",
    })
}

fn write_atomically(path: &Path, data: &Data) -> Result<(), LiveError> {
    let tmp = path.with_extension("tmp");
    let text = serde_json::to_string_pretty(&data.to_json()).unwrap_or_default();
    std::fs::write(&tmp, text).and_then(|_| std::fs::rename(&tmp, path)).map_err(|e| LiveError::Os {
        what: "writing a recovery record",
        detail: format!("{}: {e}", path.display()),
        hint: "check that /run or the temp dir is writable and not full",
    })
}

impl Record {
    /// Write down `steps`, which restore the settings named by `what` (one
    /// word, e.g. "ftrace"), before changing them.
    pub fn create(what: &str, steps: Vec<Step>) -> Result<Record, LiveError> {
        static N: AtomicU64 = AtomicU64::new(0);
        for s in &steps {
            s.check_allowed().map_err(|detail| LiveError::Os {
                what: "writing a recovery record",
                detail,
                hint: "a recovery step may only restore a kernel setting",
            })?;
        }
        let pid = std::process::id() as i32;
        let data = Data {
            what: what.to_string(),
            owner_pid: pid,
            owner_start: start_time(pid).unwrap_or(0),
            boot_id: boot_id(),
            created_unix_ms: crate::harness::unix_ms(),
            steps,
        };
        let tag: String = what.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
        let path = writable_dir()?.join(format!("{pid}-{}-{tag}.json", N.fetch_add(1, Ordering::SeqCst)));
        write_atomically(&path, &data)?;
        let inner = Arc::new(Inner { path, data: Mutex::new(Some(data)) });
        HELD.lock().unwrap_or_else(|e| e.into_inner()).push(Arc::clone(&inner));
        HELD_COUNT.fetch_add(1, Ordering::SeqCst);
        Ok(Record { inner })
    }

    /// Replace the steps (call before changing a setting the old steps do
    /// not cover).
    pub fn set_steps(&self, steps: Vec<Step>) -> Result<(), LiveError> {
        let mut g = self.inner.data.lock().unwrap_or_else(|e| e.into_inner());
        let Some(d) = g.as_mut() else { return Ok(()) };
        d.steps = steps;
        write_atomically(&self.inner.path, d)
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Put everything back (once; later calls do nothing). The file is
    /// removed when every step succeeded; otherwise it stays for `schedlab
    /// check`, and the failures are returned.
    pub fn restore(&self) -> Vec<String> {
        restore_inner(&self.inner)
    }
}

fn restore_inner(inner: &Arc<Inner>) -> Vec<String> {
    let errors = {
        let mut g = inner.data.lock().unwrap_or_else(|e| e.into_inner());
        let Some(d) = g.take() else { return Vec::new() };
        let errors: Vec<String> = d.steps.iter().filter_map(|s| s.apply().err()).collect();
        if errors.is_empty() {
            let _ = std::fs::remove_file(&inner.path);
        }
        errors
    };
    // Not under the record's lock: restore_held takes HELD first.
    HELD.lock().unwrap_or_else(|e| e.into_inner()).retain(|r| !Arc::ptr_eq(r, inner));
    HELD_COUNT.fetch_sub(1, Ordering::SeqCst);
    errors
}

impl Drop for Record {
    fn drop(&mut self) {
        let errors = self.restore();
        if !errors.is_empty() {
            eprintln!(
                "schedlab: could not restore every setting ({}); the record {} stays: run `schedlab check --restore`",
                errors.join("; "),
                self.inner.path.display()
            );
        }
    }
}

/// How many records this process holds (async-signal-safe: one atomic load).
pub fn held() -> usize {
    HELD_COUNT.load(Ordering::SeqCst)
}

/// Restore every record this process holds, waiting for one another thread
/// is restoring (before a forced exit).
pub fn restore_held() {
    let held: Vec<Arc<Inner>> = HELD.lock().unwrap_or_else(|e| e.into_inner()).clone();
    for r in &held {
        restore_inner(r);
    }
}

/// What `schedlab check` makes of a record it found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Its owner runs: the settings are in use.
    Active,
    /// Its owner is gone without restoring: restore it.
    Stale,
    /// Made before the last boot, which reset the settings: only remove it.
    Obsolete,
    /// Not a readable record (the reason).
    Unreadable(String),
}

/// A record found on disk.
#[derive(Debug, Clone)]
pub struct Found {
    pub path: PathBuf,
    pub state: State,
    /// What it restores ("ftrace", ...), its owner, when it was made and its steps.
    pub what: String,
    pub owner_pid: i32,
    pub created_unix_ms: i64,
    pub steps: Vec<Step>,
}

impl Found {
    /// One line for `schedlab check`.
    pub fn describe(&self) -> String {
        let age = (crate::harness::unix_ms() - self.created_unix_ms).max(0) / 1000;
        let made = format!("made {age} s ago by pid {}", self.owner_pid);
        match &self.state {
            State::Active => format!("{} changed by a running schedlab ({made})", self.what),
            State::Stale => format!(
                "{} left changed by a schedlab that ended without restoring it ({made}; {} step(s) to restore): {}",
                self.what,
                self.steps.len(),
                self.path.display()
            ),
            State::Obsolete => {
                format!("{} record from an earlier boot (nothing to restore): {}", self.what, self.path.display())
            }
            State::Unreadable(why) => format!("unreadable recovery record {}: {why}", self.path.display()),
        }
    }
}

/// Every record in the record directories that are ours, oldest first.
pub fn scan() -> Vec<Found> {
    let boot = boot_id();
    let mut out = Vec::new();
    for d in dirs() {
        if !trusted(&d) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let path = e.path();
            if path.extension().and_then(|x| x.to_str()) != Some("json") {
                continue;
            }
            out.push(read_found(path, &boot));
        }
    }
    out.sort_by_key(|f| f.created_unix_ms);
    out
}

fn read_found(path: PathBuf, boot: &str) -> Found {
    let parsed = std::fs::read_to_string(&path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str::<Value>(&t).map_err(|e| e.to_string()))
        .and_then(|v| Data::from_json(&v));
    match parsed {
        Err(why) => Found {
            path,
            state: State::Unreadable(why),
            what: String::new(),
            owner_pid: 0,
            created_unix_ms: 0,
            steps: Vec::new(),
        },
        Ok(d) => {
            let state = if d.boot_id != boot {
                State::Obsolete
            } else if start_time(d.owner_pid) == Some(d.owner_start) {
                State::Active
            } else {
                State::Stale
            };
            Found {
                path,
                state,
                what: d.what,
                owner_pid: d.owner_pid,
                created_unix_ms: d.created_unix_ms,
                steps: d.steps,
            }
        }
    }
}

/// Restore a stale record (apply its steps, then remove it) or remove an
/// obsolete one. Active and unreadable records are refused with the reason.
pub fn restore_found(f: &Found) -> Result<(), String> {
    match &f.state {
        State::Active => return Err(format!("pid {} still runs and holds these settings", f.owner_pid)),
        State::Unreadable(why) => return Err(format!("{why}: inspect and remove {} by hand", f.path.display())),
        State::Stale => {
            let errors: Vec<String> = f.steps.iter().filter_map(|s| s.apply().err()).collect();
            if !errors.is_empty() {
                return Err(format!("{}; the record stays: {}", errors.join("; "), f.path.display()));
            }
        }
        State::Obsolete => {}
    }
    std::fs::remove_file(&f.path).map_err(|e| format!("removing {}: {e}", f.path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_through_json() {
        let d = Data {
            what: "ftrace".into(),
            owner_pid: 42,
            owner_start: 7,
            boot_id: "b".into(),
            created_unix_ms: 1,
            steps: vec![Step::write("/sys/kernel/tracing/tracing_on", "1"), Step::write("/proc/sys/x", "")],
        };
        let back = Data::from_json(&d.to_json()).unwrap();
        assert_eq!(back.steps, d.steps);
        assert_eq!((back.what.as_str(), back.owner_pid, back.owner_start), ("ftrace", 42, 7));
        let newer = json!({ "schedlab_recovery": 2 });
        assert!(Data::from_json(&newer).unwrap_err().contains("format 2"));
        let mut odd = d.to_json();
        odd["steps"] = json!([{ "reboot": {} }]);
        assert!(Data::from_json(&odd).unwrap_err().contains("unknown step"));
        let mut rm = d.to_json();
        rm["steps"] = json!([{ "rmdir": { "path": "/sys/fs/cgroup/schedlab-1-0" } }]);
        assert_eq!(Data::from_json(&rm).unwrap().steps, vec![Step::rmdir("/sys/fs/cgroup/schedlab-1-0")]);
    }

    #[test]
    fn steps_may_only_touch_kernel_settings() {
        assert!(Step::write("/proc/sys/kernel/sched_rt_runtime_us", "950000").check_allowed().is_ok());
        assert!(Step::write("/sys/kernel/tracing/set_event", "").check_allowed().is_ok());
        for bad in ["/etc/passwd", "/proc/sys/../../etc/shadow", "/tmp/x", "relative/proc/sys/x"] {
            let e = Step::write(bad, "x").check_allowed().unwrap_err();
            assert!(e.contains("not a kernel setting"), "{bad}: {e}");
        }
        assert!(Record::create("x", vec![Step::write("/etc/passwd", "")]).is_err(), "refused before writing");
        assert!(Step::write("/sys/kernel/debug/sched/base_slice_ns", "3000000").check_allowed().is_ok());
        assert!(Step::rmdir("/sys/fs/cgroup/unified/schedlab-12-0").check_allowed().is_ok());
        for bad in
            ["/sys/fs/cgroup/user.slice", "/sys/fs/cgroup/schedlab-1/..", "/tmp/schedlab-1", "/proc/sys/schedlab-1"]
        {
            let e = Step::rmdir(bad).check_allowed().unwrap_err();
            assert!(e.contains("refusing to remove"), "{bad}: {e}");
        }
    }

    #[test]
    fn this_process_is_active_and_a_dead_owner_is_stale() {
        let me = std::process::id() as i32;
        let boot = boot_id();
        let dir = std::env::temp_dir().join(format!("schedlab-recovery-test-{me}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut d = Data {
            what: "ftrace".into(),
            owner_pid: me,
            owner_start: start_time(me).unwrap(),
            boot_id: boot.clone(),
            created_unix_ms: 0,
            steps: vec![],
        };
        let path = dir.join("a.json");
        write_atomically(&path, &d).unwrap();
        assert_eq!(read_found(path.clone(), &boot).state, State::Active);
        d.owner_start += 1; // the pid was reused by another process
        write_atomically(&path, &d).unwrap();
        assert_eq!(read_found(path.clone(), &boot).state, State::Stale);
        assert_eq!(read_found(path.clone(), "another boot").state, State::Obsolete);
        let f = read_found(path.clone(), &boot);
        assert!(f.describe().contains("ended without restoring"), "{}", f.describe());
        restore_found(&f).unwrap();
        assert!(!path.exists(), "a restored record is removed");
        std::fs::write(&path, "{").unwrap();
        assert!(matches!(read_found(path.clone(), &boot).state, State::Unreadable(_)));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
