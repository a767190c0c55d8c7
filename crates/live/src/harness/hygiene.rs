//! Run hygiene: a global stop flag fed by signals, timeouts and the RT
//! watchdog; a signal thread that makes a stop take effect even under an RT
//! load; the RT watchdog; a child-process registry that kills and reaps on
//! drop; temp-file guards.
//!
//! ```text
//!  SIGINT/SIGTERM ─┐                   ┌─> stop_fd() readable: harness waits (drive's poller,
//!  arm_timeout() ──┼──> STOP flag ─────┤   runner reads, load warm-up) wake at once
//!  Watchdog ───────┘                   ├─> benchmarks poll the flag (every 1024 iterations
//!                                      │   or between repetitions) and unwind; guards
//!                                      │   kill+reap children, join threads, restore
//!                                      └─> signal thread (FIFO 99) SIGKILLs the loads and
//!                                          wakes the watchdogs, which demote every
//!                                          watched RT task
//! ```
//!
//! **Signals.** [`install_signal_handlers`] blocks SIGINT and SIGTERM in the
//! calling thread (and so in every thread it starts later) and starts
//! `schedlab-signal`, a thread at SCHED_FIFO 99 (when allowed) that is the
//! one to take them. A signal delivered to a normal thread waits until that
//! thread runs, which under an RT burn load is up to a second; the signal
//! thread runs at once, SIGKILLs the background loads and has the watchdogs
//! demote the case's RT tasks, so the harness's normal threads get the CPUs
//! to clean up (Ctrl-C ends a case within ~0.2 s even then). A second signal does not cut the cleanup short: if the
//! process has not exited [`FORCED_EXIT_GRACE`] later, the signal thread
//! restores every kernel setting this process still holds (its recovery
//! records, `recovery.rs`) and only then exits with 128 + the signal.
//!
//! **RT watchdog.** A SCHED_FIFO 99 thread per case with RT tasks. Every
//! watched task has a deadline (the case limit + 1 s: the outer bound). With a
//! progress probe ([`Watchdog::start_with_progress`]) it also catches a stall
//! early: when the measurement has made no progress (no `Ctx::check`, no
//! unit done) for [`STALL`] and, over a further [`STALL_SAMPLE`], watched RT
//! tasks kept CPUs busy, it demotes every watched task at once, whatever the
//! case's limit; [`Watchdog::firing`] says which task held which CPU and for
//! how long nothing progressed. The harness's own busy RT loops (exectime's
//! copiers) call `Ctx::check` after every copy, so they count as progress.
//! Why not SCHED_OTHER canary threads per CPU: since Linux 6.12 the fair
//! server gives normal tasks 50 ms a second even with RT throttling off (on
//! the 2-CPU dev VM, kernel 6.18, a canary pinned under a FIFO hog still ran
//! every 1.05 s at worst), so a canary never sees the stall that starves a
//! lower-priority RT measurement completely.
//!
//! Children are forked with `PR_SET_PDEATHSIG = SIGKILL` (so they die if the
//! forking thread dies, even on SIGKILL of the harness) and put in one process
//! group per [`Children`] set, so they can be `killpg`ed together; the
//! harness becomes a child subreaper while it kills a set, so the set's
//! grandchildren (a runner's workers, up to 400 for hackbench) come back to
//! it and are reaped here, not left to init as zombies.

use crate::error::{last_errno, LiveError};
use crate::harness::{condition, now_ns, recovery};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, Once, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

static STOP: AtomicBool = AtomicBool::new(false);
static REASON: AtomicU8 = AtomicU8::new(0);
/// SIGINT/SIGTERM received since the last `clear_stop`.
static SIGNALS: AtomicU32 = AtomicU32::new(0);
/// 128 + the signal that asked for a forced exit (0: none asked).
static FORCE: AtomicI32 = AtomicI32::new(0);
/// eventfd that becomes readable when the stop flag is set (-1: not made yet).
static STOP_FD: AtomicI32 = AtomicI32::new(-1);
/// Write end of the signal thread's wake-up pipe (-1: no signal thread).
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);

/// How long a second signal leaves the normal cleanup to finish before the
/// signal thread restores what is left and exits.
pub const FORCED_EXIT_GRACE: Duration = Duration::from_secs(1);

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

/// Async-signal-safe: atomics and write(2) only.
fn stop_with(reason: StopReason) {
    // Keep the first reason; later ones are consequences.
    let _ = REASON.compare_exchange(0, reason.code(), Ordering::SeqCst, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
    notify_stop();
}

/// Make the stop fd readable and wake the signal thread. Async-signal-safe.
fn notify_stop() {
    let fd = STOP_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        let one = 1u64;
        // SAFETY: an 8-byte write from a local to our eventfd.
        unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
    }
    let w = WAKE_FD.load(Ordering::SeqCst);
    if w >= 0 {
        // SAFETY: a one-byte write from a static to our non-blocking pipe (a full pipe drops it: one is enough).
        unsafe { libc::write(w, b"s".as_ptr().cast(), 1) };
    }
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
    SIGNALS.store(0, Ordering::SeqCst);
    FORCE.store(0, Ordering::SeqCst);
    let fd = STOP_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        let mut v = 0u64;
        // SAFETY: non-blocking 8-byte read into a local (EAGAIN when already clear).
        unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
    }
}

/// A descriptor that polls readable (POLLIN) once the stop flag is set, so a
/// wait can end at once instead of at its next timeout; -1 if no eventfd
/// could be made (then poll the flag).
pub fn stop_fd() -> i32 {
    let fd = STOP_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        return fd;
    }
    // SAFETY: eventfd with constant flags.
    let new = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if new < 0 {
        return -1;
    }
    match STOP_FD.compare_exchange(-1, new, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => {
            // A stop set before the fd existed must still show.
            if STOP.load(Ordering::SeqCst) {
                notify_stop();
            }
            new
        }
        Err(existing) => {
            // SAFETY: closing the eventfd we just made and nobody saw.
            unsafe { libc::close(new) };
            existing
        }
    }
}

/// Sleep for `d`, or less if a stop is requested; true if stopped.
pub fn sleep_unless_stopped(d: Duration) -> bool {
    let end = Instant::now() + d;
    loop {
        if stop_requested() {
            return true;
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let fd = stop_fd();
        if fd < 0 {
            std::thread::sleep(left.min(Duration::from_millis(10)));
            continue;
        }
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd; EINTR just loops.
        unsafe { libc::poll(&mut p, 1, left.as_millis().clamp(1, i32::MAX as u128) as i32) };
    }
}

/// SIGINT and SIGTERM set the stop flag (see the module docs): blocks them
/// in the calling thread (and the threads it starts later) and starts the
/// signal thread that takes them. A second one exits after the normal
/// cleanup had [`FORCED_EXIT_GRACE`], restoring held settings first.
/// Idempotent.
/// Give SIGPIPE its default action (end the process quietly), as a Unix
/// filter expects: Rust ignores it, so `schedlab list | head` would fail on
/// the closed pipe. Not for commands that run benchmarks: their harness
/// talks to runner processes over pipes and must see EPIPE as an error.
pub fn restore_default_sigpipe() {
    // SAFETY: restoring a signal's default disposition; no handler runs.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

pub fn install_signal_handlers() -> Result<(), LiveError> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        let _ = stop_fd();
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: the handler only does atomic loads/stores, write(2) and
            // `_exit`, all async-signal-safe.
            let r = unsafe { signal_hook::low_level::register(sig, move || on_signal(sig)) };
            if let Err(e) = r {
                result = Err(LiveError::Os {
                    what: "installing the SIGINT/SIGTERM handler",
                    detail: e.to_string(),
                    hint: "another library may own these signals",
                });
                return;
            }
        }
        start_signal_thread();
    });
    result
}

fn on_signal(sig: i32) {
    let n = SIGNALS.fetch_add(1, Ordering::SeqCst);
    if n >= 1 {
        // Without a signal thread nobody would act on a later exit: leave at
        // once if that loses nothing, else let the first stop go on.
        if WAKE_FD.load(Ordering::SeqCst) < 0 && recovery::held() == 0 {
            signal_hook::low_level::exit(128 + sig);
        }
        let _ = FORCE.compare_exchange(0, 128 + sig, Ordering::SeqCst, Ordering::SeqCst);
    }
    let _ = REASON.compare_exchange(0, StopReason::Signal.code(), Ordering::SeqCst, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
    notify_stop();
}

fn sigset(sigs: &[i32]) -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in sigs {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

fn start_signal_thread() {
    let mut fds = [0i32; 2];
    // SAFETY: fds is a writable array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return; // The handler still sets the flag; stops are just not hurried.
    }
    let (rd, wr) = (fds[0], fds[1]);
    let set = sigset(&[libc::SIGINT, libc::SIGTERM]);
    // SAFETY: blocking two signals in the calling thread; set is initialised.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    let spawned = std::thread::Builder::new().name("schedlab-signal".into()).spawn(move || {
        // SAFETY: this thread alone takes the two signals.
        unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
        let fifo = schedlab_core::SchedCondition {
            policy: schedlab_core::SchedPolicy::Fifo,
            priority: Some(WATCHDOG_PRIORITY),
            ..Default::default()
        };
        // Unprivileged, it stays SCHED_OTHER: then no RT load can starve it either.
        let _ = condition::apply(0, &fifo, None);
        signal_loop(rd);
    });
    match spawned {
        Ok(_) => WAKE_FD.store(wr, Ordering::SeqCst),
        Err(_) => {
            // SAFETY: undo the block and close our own pipe; nothing else has them.
            unsafe {
                libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
                libc::close(rd);
                libc::close(wr);
            }
        }
    }
}

fn signal_loop(rd: i32) {
    loop {
        let mut p = libc::pollfd { fd: rd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd; EINTR (the handler ran on this thread) just loops.
        unsafe { libc::poll(&mut p, 1, -1) };
        let mut buf = [0u8; 64];
        // SAFETY: non-blocking read into a local buffer.
        while unsafe { libc::read(rd, buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
        if stop_requested() {
            kill_registered_groups();
            poke_watchdogs();
        }
        let code = FORCE.load(Ordering::SeqCst);
        if code != 0 {
            // The normal cleanup usually ends the process well within this.
            std::thread::sleep(FORCED_EXIT_GRACE);
            recovery::restore_held();
            signal_hook::low_level::exit(code);
        }
    }
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

/// FIFO priority of the watchdog and signal threads.
pub const WATCHDOG_PRIORITY: u32 = 99;
/// No progress for this long (with watched RT tasks busy) is a stall.
pub const STALL: Duration = Duration::from_millis(1500);
/// How long the watchdog watches CPU use before calling a stall: a watched
/// task on a CPU for [`BUSY_SHARE`] of it is a busy loop.
pub const STALL_SAMPLE: Duration = Duration::from_millis(200);
const BUSY_SHARE: f64 = 0.8;

/// The watched measurement's progress: (the time of its last `Ctx::check`,
/// CLOCK_MONOTONIC ns; units done). Any change counts as progress.
pub type ProgressProbe = Box<dyn Fn() -> (u64, u64) + Send + Sync>;

struct WatchEntry {
    tid: i32,
    deadline: Instant,
    /// Demoted because the run is stopping.
    stop_demoted: bool,
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
    firing: Mutex<Option<Firing>>,
    probe: Option<ProgressProbe>,
}

/// Watchdogs alive in this process, for the signal thread to wake.
static LIVE: Mutex<Vec<Weak<WatchShared>>> = Mutex::new(Vec::new());

/// Wake every live watchdog so that it sees the stop flag and demotes its
/// watched tasks.
fn poke_watchdogs() {
    let live: Vec<Arc<WatchShared>> =
        LIVE.lock().unwrap_or_else(|e| e.into_inner()).iter().filter_map(Weak::upgrade).collect();
    for s in live {
        let _g = s.state.lock().unwrap_or_else(|e| e.into_inner());
        s.cv.notify_all();
    }
}

/// A watched RT task found busy when the watchdog called a stall.
#[derive(Debug, Clone, PartialEq)]
pub struct BusyTask {
    pub tid: i32,
    pub comm: String,
    /// Its condition as read back before the demotion (e.g. "fifo:90").
    pub policy: String,
    /// The CPU it last ran on.
    pub cpu: Option<usize>,
    /// Share of the sample it spent on a CPU (0..1).
    pub share: f64,
}

/// Why the watchdog demoted tasks (the first time it did).
#[derive(Debug, Clone, PartialEq)]
pub enum Firing {
    /// A watched task outlived its deadline (the case limit + 1 s).
    Deadline { tid: i32 },
    /// No progress for `stalled` while `busy` kept CPUs busy; `demoted`
    /// watched tasks were demoted.
    Stall { stalled: Duration, busy: Vec<BusyTask>, demoted: usize },
}

impl Firing {
    /// One line naming what happened and the fix.
    pub fn describe(&self) -> String {
        match self {
            Firing::Deadline { tid } => {
                format!("the RT watchdog demoted task {tid}, which outlived the case's time limit")
            }
            Firing::Stall { stalled, busy, demoted } => {
                let who: Vec<String> = busy
                    .iter()
                    .map(|b| {
                        let cpu = b.cpu.map_or("a CPU".to_string(), |c| format!("CPU {c}"));
                        format!(
                            "{} (tid {}, {}) held {cpu} {:.0} % of the time",
                            b.comm,
                            b.tid,
                            b.policy,
                            b.share * 100.0
                        )
                    })
                    .collect();
                format!(
                    "the RT watchdog fired: the measurement made no progress for {:.1} s while {}; it demoted the case's {demoted} RT task(s) to SCHED_OTHER and stopped the run (use fewer or lower-priority RT tasks and loads, or keep RT throttling on: sysctl kernel.sched_rt_runtime_us=950000)",
                    stalled.as_secs_f64(),
                    who.join(" and ")
                )
            }
        }
    }
}

/// A SCHED_FIFO 99 thread that demotes watched RT tasks to SCHED_OTHER once
/// their deadline passes, or at once when the measurement stalls (with a
/// progress probe, see the module docs), then sets the stop flag; a stop
/// from elsewhere also makes it demote them. It sleeps until the earliest
/// deadline or the earliest moment a stall could be called (woken early
/// only by `watch`, a stop and drop), so it wakes about once per [`STALL`]
/// during a measurement that progresses, and never without a probe; it can
/// be kept on CPUs the measurement does not use.
/// Only needed (and only possible) when the benchmark runs at an RT policy.
pub struct Watchdog {
    shared: Arc<WatchShared>,
    handle: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Start a deadline-only watchdog, pinned to `cpus` when given (else it
    /// may run anywhere the caller may).
    pub fn start(cpus: Option<&[usize]>) -> Result<Watchdog, LiveError> {
        Watchdog::start_inner(cpus, None)
    }

    /// Start a watchdog that also calls stalls, from `probe`'s progress.
    pub fn start_with_progress(cpus: Option<&[usize]>, probe: ProgressProbe) -> Result<Watchdog, LiveError> {
        Watchdog::start_inner(cpus, Some(probe))
    }

    fn start_inner(cpus: Option<&[usize]>, probe: Option<ProgressProbe>) -> Result<Watchdog, LiveError> {
        let shared = Arc::new(WatchShared {
            state: Mutex::default(),
            cv: Condvar::new(),
            fired: AtomicBool::new(false),
            firing: Mutex::new(None),
            probe,
        });
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
            Ok(Ok(())) => {
                let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
                live.retain(|w| w.strong_count() > 0);
                live.push(Arc::downgrade(&shared));
                Ok(Watchdog { shared, handle: Some(handle) })
            }
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

    /// Demote `tid` (a thread or child process) if it still runs after
    /// `deadline`, or when the measurement stalls. Call it before giving
    /// the task an RT policy: a task made RT first could starve the caller
    /// before it gets here.
    pub fn watch(&self, tid: i32, deadline: Instant) {
        self.state().entries.push(WatchEntry { tid, deadline, stop_demoted: false });
        // The watchdog may be asleep until a later deadline (or none).
        self.shared.cv.notify_all();
    }

    pub fn unwatch(&self, tid: i32) {
        self.state().entries.retain(|e| e.tid != tid);
    }

    /// Whether the watchdog demoted anything (not counting demotions
    /// because the run was stopping).
    pub fn fired(&self) -> bool {
        self.shared.fired.load(Ordering::SeqCst)
    }

    /// Why it fired, the first time.
    pub fn firing(&self) -> Option<Firing> {
        self.shared.firing.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

fn fire(s: &WatchShared, why: Firing) {
    let mut f = s.firing.lock().unwrap_or_else(|e| e.into_inner());
    if f.is_none() {
        *f = Some(why);
    }
    s.fired.store(true, Ordering::SeqCst);
    stop_with(StopReason::Watchdog);
}

/// On-CPU ns of a task (thread or process) so far: schedstat, else
/// utime + stime in ticks.
fn cpu_ns(tid: i32) -> Option<u64> {
    if let Some(ns) = std::fs::read_to_string(format!("/proc/{tid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
    {
        return Some(ns);
    }
    let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    let f: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks * crate::host::kstat::user_tick_ns())
}

/// A task's comm and the CPU it last ran on (/proc/TID/stat field 39).
fn comm_and_cpu(tid: i32) -> (String, Option<usize>) {
    let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).unwrap_or_default();
    let comm = stat.split_once('(').and_then(|(_, r)| r.rsplit_once(')')).map_or("?", |(c, _)| c).to_string();
    let cpu = stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().nth(36)?.parse().ok());
    (comm, cpu)
}

fn watchdog_loop(s: &WatchShared) {
    let mut st = s.state.lock().unwrap_or_else(|e| e.into_inner());
    // Stall tracking: when progress was last seen, what it was, and when
    // the next CPU sample may be taken.
    let mut quiet_since = now_ns();
    let mut last = s.probe.as_ref().map(|p| p());
    let mut next_sample = 0u64;
    while !st.quit {
        // A stop from elsewhere (Ctrl-C under an RT load): give the CPUs to
        // the harness's normal threads so they can clean up at once.
        if stop_requested() {
            for e in st.entries.iter_mut().filter(|e| !e.stop_demoted) {
                let _ = condition::demote(e.tid);
                e.stop_demoted = true;
            }
        }
        let now = Instant::now();
        let mut late = None;
        st.entries.retain(|e| {
            if now < e.deadline {
                return true;
            }
            // ESRCH (already gone) is fine: nothing left to demote.
            let _ = condition::demote(e.tid);
            late = late.or(Some(e.tid));
            false
        });
        if let Some(tid) = late {
            fire(s, Firing::Deadline { tid });
        }
        let mut wake: Option<u64> = None;
        if let Some(probe) = &s.probe {
            let t = now_ns();
            let p = probe();
            if last.map(|l| l.1) != Some(p.1) {
                quiet_since = quiet_since.max(t);
            }
            last = Some(p);
            quiet_since = quiet_since.max(p.0);
            if st.entries.is_empty() || stop_requested() {
                // Nothing to blame (`watch` wakes this thread), or stopping anyway.
                quiet_since = t;
            } else if t.saturating_sub(quiet_since) >= STALL.as_nanos() as u64 && t >= next_sample {
                // Stalled: is a watched RT task busy (a loop), or is everything waiting?
                let before: Vec<(i32, Option<u64>)> = st.entries.iter().map(|e| (e.tid, cpu_ns(e.tid))).collect();
                let t0 = now_ns();
                st = s.cv.wait_timeout(st, STALL_SAMPLE).unwrap_or_else(|e| e.into_inner()).0;
                let span = now_ns().saturating_sub(t0);
                if st.quit || stop_requested() {
                    continue;
                }
                if probe() != p || span < STALL_SAMPLE.as_nanos() as u64 / 4 {
                    continue; // Progress after all, or woken too early to tell.
                }
                let mut busy = Vec::new();
                for (tid, b) in before {
                    if !st.entries.iter().any(|e| e.tid == tid) {
                        continue;
                    }
                    let share = match (b, cpu_ns(tid)) {
                        (Some(b), Some(a)) => a.saturating_sub(b) as f64 / span as f64,
                        _ => continue,
                    };
                    if share < BUSY_SHARE {
                        continue;
                    }
                    // Only an RT task can keep the others off a CPU.
                    let Some(c) = condition::read_back(tid).ok().filter(|c| c.policy.is_realtime()) else {
                        continue;
                    };
                    let (comm, cpu) = comm_and_cpu(tid);
                    let policy = schedlab_core::SchedCondition { cpus: None, ..c }.label();
                    busy.push(BusyTask { tid, comm, policy, cpu, share: share.min(1.0) });
                }
                let t = now_ns();
                if busy.is_empty() {
                    // Waiting, not spinning (a long repetition): look again later.
                    next_sample = t + STALL.as_nanos() as u64 / 2;
                    continue;
                }
                for e in &st.entries {
                    let _ = condition::demote(e.tid);
                }
                let demoted = st.entries.len();
                st.entries.clear();
                let stalled = Duration::from_nanos(t.saturating_sub(quiet_since));
                fire(s, Firing::Stall { stalled, busy, demoted });
                quiet_since = t;
                continue;
            }
            if !st.entries.is_empty() && !stop_requested() {
                wake = Some((quiet_since + STALL.as_nanos() as u64).max(next_sample));
            }
        }
        // Sleep until the earliest deadline or stall check; `watch`, a stop and drop notify.
        let now_n = now_ns();
        let until_stall = wake.map(|w| Duration::from_nanos(w.saturating_sub(now_n)));
        let until_deadline = st.entries.iter().map(|e| e.deadline.saturating_duration_since(now)).min();
        st = match until_stall.into_iter().chain(until_deadline).min() {
            Some(d) => s.cv.wait_timeout(st, d.max(Duration::from_millis(1))).unwrap_or_else(|e| e.into_inner()).0,
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
    /// SIGKILL the group as soon as a stop is requested (see [`Children::kill_on_stop`]).
    kill_on_stop: bool,
}

/// Process groups the signal thread SIGKILLs at once on a stop.
static KILL_ON_STOP: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// SIGKILL every group registered by [`Children::kill_on_stop`]; they stay
/// registered (and unreaped) until their owner reaps them, so the ids are
/// still theirs.
fn kill_registered_groups() {
    for &pgid in KILL_ON_STOP.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        // SAFETY: killpg on a group whose leader is an unreaped child of ours.
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
    }
}

impl Default for Children {
    fn default() -> Self {
        Children::new()
    }
}

impl Children {
    pub fn new() -> Children {
        Children { pids: Vec::new(), pgid: 0, kill_on_stop: false }
    }

    /// Let the signal thread SIGKILL this set at once when a stop is
    /// requested, before its owner gets to it: for loads, whose 400
    /// hackbench tasks would otherwise compete with the harness's unwinding
    /// threads for the CPU. Not for sets with grandchildren (runners): those
    /// must die while this process is their subreaper (`kill_all`).
    pub fn kill_on_stop(&mut self) {
        self.kill_on_stop = true;
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
            default_signals_in_child();
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
            if self.kill_on_stop {
                KILL_ON_STOP.lock().unwrap_or_else(|e| e.into_inner()).push(pid);
                if stop_requested() {
                    notify_stop();
                }
            }
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

    /// SIGKILL and reap every remaining child, and the grandchildren left
    /// in the set's process group (a runner's workers): while it kills, the
    /// process is a child subreaper, so they are reparented here when their
    /// parent dies, and reaped.
    pub fn kill_all(&mut self) {
        if self.pids.is_empty() && self.pgid == 0 {
            return;
        }
        if self.kill_on_stop && self.pgid > 0 {
            KILL_ON_STOP.lock().unwrap_or_else(|e| e.into_inner()).retain(|&g| g != self.pgid);
        }
        let _adopt = SubreaperGuard::on();
        if self.pgid > 0 {
            // SAFETY: killpg on our own group id.
            unsafe { libc::killpg(self.pgid, libc::SIGKILL) };
        }
        for pid in std::mem::take(&mut self.pids) {
            // SAFETY: kill on our own unreaped child (its pid cannot be reused before we reap it).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = wait_pid(pid);
        }
        if self.pgid > 0 {
            reap_group(self.pgid, Duration::from_secs(2));
        }
    }
}

/// Makes this process a child subreaper until dropped (unless it was one).
struct SubreaperGuard {
    was: bool,
}

impl SubreaperGuard {
    fn on() -> SubreaperGuard {
        let mut was: libc::c_int = 0;
        // SAFETY: PR_GET_CHILD_SUBREAPER writes an int through the pointer; PR_SET takes a flag.
        unsafe {
            libc::prctl(libc::PR_GET_CHILD_SUBREAPER, &mut was as *mut libc::c_int as libc::c_ulong, 0, 0, 0);
            if was == 0 {
                libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
            }
        }
        SubreaperGuard { was: was != 0 }
    }
}

impl Drop for SubreaperGuard {
    fn drop(&mut self) {
        if !self.was {
            // SAFETY: prctl with constant arguments.
            unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) };
        }
    }
}

/// Reap every child of ours in process group `pgid` (SIGKILLing again any
/// that still run), for at most `limit`.
fn reap_group(pgid: i32, limit: Duration) {
    let end = Instant::now() + limit;
    loop {
        let mut status = 0;
        // SAFETY: non-blocking wait for any child of ours in the group.
        let r = unsafe { libc::waitpid(-pgid, &mut status, libc::WNOHANG) };
        if r > 0 {
            continue;
        }
        if r < 0 && last_errno() != libc::EINTR {
            return; // ECHILD: none left.
        }
        if r == 0 {
            if Instant::now() >= end {
                return;
            }
            // SAFETY: killpg on a group whose members are our children.
            unsafe { libc::killpg(pgid, libc::SIGKILL) };
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// In a forked child: default SIGINT/SIGTERM handling and no blocked
/// signals (the harness blocks them in its threads for the signal thread,
/// and a child would inherit that through exec). Async-signal-safe.
pub(crate) fn default_signals_in_child() {
    // SAFETY: sigaction/sigprocmask on zero-initialised plain structs.
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(libc::SIGINT, &dfl, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &dfl, std::ptr::null_mut());
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
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
