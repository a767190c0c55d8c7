//! Run hygiene: a global stop flag fed by signals, timeouts and the RT
//! watchdog; a child-process registry that kills and reaps on drop; temp-file
//! guards.
//!
//! ```text
//!  SIGINT/SIGTERM ─┐
//!  arm_timeout() ──┼──> STOP flag ──> benchmarks poll it (every 1024 iterations
//!  Watchdog ───────┘                  or between repetitions) and unwind; guards
//!                                     kill+reap children, join threads, restore
//! ```
//!
//! Children are forked with `PR_SET_PDEATHSIG = SIGKILL` (so they die if the
//! forking thread dies, even on SIGKILL of the harness) and put in one process
//! group per [`Children`] set, so they can be `killpg`ed together.

use crate::error::{last_errno, LiveError};
use crate::harness::condition;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, Once};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

static STOP: AtomicBool = AtomicBool::new(false);
static REASON: AtomicU8 = AtomicU8::new(0);

/// Why the stop flag was set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Signal,
    Timeout,
    Watchdog,
    Requested,
}

impl StopReason {
    fn code(self) -> u8 {
        match self {
            StopReason::Signal => 1,
            StopReason::Timeout => 2,
            StopReason::Watchdog => 3,
            StopReason::Requested => 4,
        }
    }
}

/// Ask every running benchmark to stop at its next check.
pub fn request_stop() {
    stop_with(StopReason::Requested);
}

fn stop_with(reason: StopReason) {
    // Keep the first reason; later ones are consequences.
    let _ = REASON.compare_exchange(0, reason.code(), Ordering::SeqCst, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

/// Cheap enough for a hot loop (one relaxed load), but still called only
/// every 1024 iterations or so.
#[inline]
pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

pub fn stop_reason() -> Option<StopReason> {
    match REASON.load(Ordering::SeqCst) {
        1 => Some(StopReason::Signal),
        2 => Some(StopReason::Timeout),
        3 => Some(StopReason::Watchdog),
        4 => Some(StopReason::Requested),
        _ => None,
    }
}

/// Clear the flag (tests, or a CLI that goes on after an interrupted case).
pub fn clear_stop() {
    STOP.store(false, Ordering::SeqCst);
    REASON.store(0, Ordering::SeqCst);
}

/// SIGINT and SIGTERM set the stop flag; a second one of either exits at
/// once with 128+signal (children still die through PDEATHSIG). Idempotent.
pub fn install_signal_handlers() -> Result<(), LiveError> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: the handler only does atomic loads/stores and, on a
            // second signal, `_exit` — all async-signal-safe.
            let r = unsafe {
                signal_hook::low_level::register(sig, move || {
                    if STOP.load(Ordering::SeqCst) && REASON.load(Ordering::SeqCst) == StopReason::Signal.code() {
                        signal_hook::low_level::exit(128 + sig);
                    }
                    let _ = REASON.compare_exchange(0, StopReason::Signal.code(), Ordering::SeqCst, Ordering::SeqCst);
                    STOP.store(true, Ordering::SeqCst);
                })
            };
            if let Err(e) = r {
                result = Err(LiveError::Os {
                    what: "installing the SIGINT/SIGTERM handler",
                    detail: e.to_string(),
                    hint: "another library may own these signals",
                });
            }
        }
    });
    result
}

/// Sets the stop flag when the duration elapses, unless dropped first.
pub struct TimeoutGuard {
    shared: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<JoinHandle<()>>,
}

/// Arm a global timeout: when it expires, the stop flag is set (reason Timeout).
pub fn arm_timeout(after: Duration) -> TimeoutGuard {
    let shared = Arc::new((Mutex::new(false), Condvar::new()));
    let s = Arc::clone(&shared);
    let handle = std::thread::Builder::new()
        .name("schedlab-timeout".into())
        .spawn(move || {
            let end = Instant::now() + after;
            let (lock, cv) = &*s;
            let mut disarmed = lock.lock().unwrap_or_else(|e| e.into_inner());
            while !*disarmed {
                let now = Instant::now();
                if now >= end {
                    stop_with(StopReason::Timeout);
                    return;
                }
                disarmed = cv.wait_timeout(disarmed, end - now).unwrap_or_else(|e| e.into_inner()).0;
            }
        })
        .ok();
    TimeoutGuard { shared, handle }
}

impl Drop for TimeoutGuard {
    fn drop(&mut self) {
        let (lock, cv) = &*self.shared;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// FIFO priority of the watchdog thread.
pub const WATCHDOG_PRIORITY: u32 = 99;

struct WatchEntry {
    tid: i32,
    deadline: Instant,
}

/// Everything the watchdog sleeps on, under one mutex, so that a `watch`
/// between its deadline computation and its sleep cannot be missed.
#[derive(Default)]
struct WatchState {
    quit: bool,
    entries: Vec<WatchEntry>,
}

struct WatchShared {
    state: Mutex<WatchState>,
    cv: Condvar,
    fired: AtomicBool,
}

/// A SCHED_FIFO 99 thread that demotes watched RT tasks to SCHED_OTHER once
/// their deadline passes, then sets the stop flag. It sleeps until the
/// earliest watched deadline (woken early only by `watch` and drop), so it
/// does not run at all during a measurement that keeps to its limit; and
/// it can be kept on CPUs the measurement does not use.
/// Only needed (and only possible) when the benchmark runs at an RT policy.
pub struct Watchdog {
    shared: Arc<WatchShared>,
    handle: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Start the watchdog, pinned to `cpus` when given (else it may run
    /// anywhere the caller may).
    pub fn start(cpus: Option<&[usize]>) -> Result<Watchdog, LiveError> {
        let shared =
            Arc::new(WatchShared { state: Mutex::default(), cv: Condvar::new(), fired: AtomicBool::new(false) });
        let s = Arc::clone(&shared);
        let cpus = cpus.map(<[usize]>::to_vec);
        let (tx, rx) = std::sync::mpsc::channel::<Result<(), LiveError>>();
        let handle = std::thread::Builder::new()
            .name("schedlab-watchdog".into())
            .spawn(move || {
                let cond = schedlab_core::SchedCondition {
                    policy: schedlab_core::SchedPolicy::Fifo,
                    priority: Some(WATCHDOG_PRIORITY),
                    ..Default::default()
                };
                let r = condition::apply(0, &cond, cpus.as_deref());
                let ok = r.is_ok();
                let _ = tx.send(r);
                if ok {
                    watchdog_loop(&s);
                }
            })
            .map_err(|e| LiveError::Os {
                what: "spawning the watchdog",
                detail: e.to_string(),
                hint: "check ulimit -u",
            })?;
        match rx.recv() {
            Ok(Ok(())) => Ok(Watchdog { shared, handle: Some(handle) }),
            Ok(Err(e)) => {
                let _ = handle.join();
                Err(e)
            }
            Err(_) => {
                let _ = handle.join();
                Err(LiveError::Measurement { bench: "watchdog", detail: "the watchdog thread died at start".into() })
            }
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, WatchState> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Demote `tid` (a thread or child process) if it still runs after `deadline`.
    pub fn watch(&self, tid: i32, deadline: Instant) {
        self.state().entries.push(WatchEntry { tid, deadline });
        // The watchdog may be asleep until a later deadline (or none).
        self.shared.cv.notify_all();
    }

    pub fn unwatch(&self, tid: i32) {
        self.state().entries.retain(|e| e.tid != tid);
    }

    /// Whether the watchdog demoted anything.
    pub fn fired(&self) -> bool {
        self.shared.fired.load(Ordering::SeqCst)
    }
}

fn watchdog_loop(s: &WatchShared) {
    let mut st = s.state.lock().unwrap_or_else(|e| e.into_inner());
    while !st.quit {
        let now = Instant::now();
        st.entries.retain(|e| {
            if now < e.deadline {
                return true;
            }
            // ESRCH (already gone) is fine: nothing left to demote.
            let _ = condition::demote(e.tid);
            s.fired.store(true, Ordering::SeqCst);
            stop_with(StopReason::Watchdog);
            false
        });
        // Sleep until the earliest deadline; `watch` and drop notify.
        st = match st.entries.iter().map(|e| e.deadline).min() {
            Some(d) => s.cv.wait_timeout(st, d.saturating_duration_since(now)).unwrap_or_else(|e| e.into_inner()).0,
            None => s.cv.wait(st).unwrap_or_else(|e| e.into_inner()),
        };
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.state().quit = true;
        self.shared.cv.notify_all();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Children of one benchmark case, in one process group. Dropping the set
/// SIGKILLs the group and every child, then reaps them: no zombies, no orphans.
///
/// PDEATHSIG is tied to the *thread* that forked, so a `Children` set must be
/// created, used and dropped on one thread that outlives the children.
pub struct Children {
    pids: Vec<i32>,
    pgid: i32,
}

impl Default for Children {
    fn default() -> Self {
        Children::new()
    }
}

impl Children {
    pub fn new() -> Children {
        Children { pids: Vec::new(), pgid: 0 }
    }

    pub fn pids(&self) -> &[i32] {
        &self.pids
    }

    /// Fork a child that runs `child` and `_exit`s with its return value.
    ///
    /// # Safety
    /// The process may have other threads, so `child` must only do what is
    /// async-signal-safe after fork: no allocation, no locks, no stdio — raw
    /// system calls on values prepared before the fork.
    pub unsafe fn fork<F: FnOnce() -> i32>(&mut self, child: F) -> Result<i32, LiveError> {
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        let pgid = self.pgid;
        // SAFETY: fork has no memory-safety preconditions; the child branch
        // below follows the async-signal-safe contract of this function.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(LiveError::last_os("fork", "too many processes? check ulimit -u and kernel.pid_max"));
        }
        if pid == 0 {
            // SAFETY: prctl/getppid/setpgid/_exit are async-signal-safe syscalls.
            unsafe {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
                // The parent may have died before prctl took effect.
                if libc::getppid() != parent {
                    libc::_exit(111);
                }
                libc::setpgid(0, pgid);
            }
            // A panic must not unwind into the parent's code running in this child.
            let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(101);
            // SAFETY: _exit skips atexit handlers and Rust destructors, which
            // belong to the parent.
            unsafe { libc::_exit(code) };
        }
        // Also set the group from the parent, so it holds before either side runs on.
        // SAFETY: setpgid on our own child; EACCES after exec/exit is harmless.
        unsafe { libc::setpgid(pid, if pgid == 0 { pid } else { pgid }) };
        if self.pgid == 0 {
            self.pgid = pid;
        }
        self.pids.push(pid);
        Ok(pid)
    }

    /// Wait for one child to exit and return its exit code (or an error if
    /// it was killed by a signal).
    pub fn reap(&mut self, pid: i32) -> Result<i32, LiveError> {
        let status = wait_pid(pid)?;
        self.pids.retain(|p| *p != pid);
        if libc::WIFEXITED(status) {
            Ok(libc::WEXITSTATUS(status))
        } else {
            Err(LiveError::Measurement {
                bench: "child",
                detail: format!("child {pid} was killed by signal {}", libc::WTERMSIG(status)),
            })
        }
    }

    /// SIGKILL and reap every remaining child.
    pub fn kill_all(&mut self) {
        if self.pgid > 0 {
            // SAFETY: killpg on our own group id.
            unsafe { libc::killpg(self.pgid, libc::SIGKILL) };
        }
        for pid in std::mem::take(&mut self.pids) {
            // SAFETY: kill on our own unreaped child (its pid cannot be reused before we reap it).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = wait_pid(pid);
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// waitpid, retrying on EINTR. Returns the raw status.
pub fn wait_pid(pid: i32) -> Result<i32, LiveError> {
    let mut status = 0;
    loop {
        // SAFETY: status is a valid, writable int.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(status);
        }
        let e = last_errno();
        if r < 0 && e != libc::EINTR {
            return Err(LiveError::os("waitpid", e, "the child was reaped elsewhere (SIGCHLD set to SIG_IGN?)"));
        }
    }
}

/// Pids whose parent is `parent` (scans /proc; for checks and tests).
pub fn children_of(parent: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else { return out };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // "pid (comm) state ppid ...": comm may contain spaces, so split after the last ')'.
        let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<i32>().ok());
        if ppid == Some(parent) {
            out.push(pid);
        }
    }
    out
}

/// Removes a file when dropped.
pub struct TempFile {
    path: PathBuf,
}

impl TempFile {
    /// A fresh path in the temp dir (not created), e.g. `/tmp/schedlab-<pid>-<n>-<tag>`.
    pub fn new(tag: &str) -> TempFile {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let path = std::env::temp_dir().join(format!("schedlab-{}-{n}-{tag}", std::process::id()));
        TempFile { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Name the calling task (its comm, at most 15 bytes), so `top`, `ps` and
/// ftrace reports show what it is. Async-signal-safe (one prctl).
pub fn name_task(name: &std::ffi::CStr) {
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of which the kernel
    // keeps the first 15 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr() as libc::c_ulong, 0, 0, 0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_file_is_removed_on_drop() {
        let path = {
            let t = TempFile::new("test");
            std::fs::write(t.path(), b"x").unwrap();
            assert!(t.path().exists());
            t.path().to_path_buf()
        };
        assert!(!path.exists());
    }

    #[test]
    fn children_are_killed_and_reaped_on_drop() {
        let pids = {
            let mut kids = Children::new();
            for _ in 0..2 {
                // SAFETY: the child only calls pause(), which is async-signal-safe.
                unsafe {
                    kids.fork(|| loop {
                        libc::pause();
                    })
                }
                .unwrap();
            }
            assert_eq!(kids.pids().len(), 2);
            kids.pids().to_vec()
        };
        let me = std::process::id() as i32;
        let left = children_of(me);
        for p in pids {
            assert!(!left.contains(&p), "child {p} survived");
            // Reaped: the pid no longer exists as our child.
            assert!(!std::path::Path::new(&format!("/proc/{p}/stat")).exists() || !children_of(me).contains(&p));
        }
    }
}
