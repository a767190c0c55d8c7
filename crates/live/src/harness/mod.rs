//! The machinery every benchmark shares, and which never names one: this
//! module runs a case (preflight, mlock, watchdog, the time limit, the
//! measurement on a worker thread while the caller's thread reports
//! progress, the `BenchResult` shell); its children apply conditions
//! (`condition`), clean up on signals (`hygiene`), run background loads
//! (`load`), parse parameters (`params`), exec runner processes (`runner`),
//! drive ftrace (`ftrace`), write down kernel settings before changing
//! them (`recovery`), read the kernel's counters of the measured tasks
//! at each repetition's start and end (`counters`) and set up and put back
//! a case's sched_ext scheduler, tunables and cgroup (`setup`, over `scx`,
//! `tunables`, `cgroup`).
//!
//! The watchdog of a case with RT tasks watches its progress: every
//! [`Ctx::check`] stamps the time in the shared page (from a runner process
//! too), so a measurement that stops progressing while watched RT tasks keep
//! CPUs busy is stopped within ~2 s, not at the case limit. A stop wakes
//! the caller's poller at once (it polls the stop fd, then the measuring
//! thread's end, instead of sleeping 100 ms).

pub mod cgroup;
pub mod condition;
pub(crate) mod counters;
pub(crate) mod ftrace;
pub mod hygiene;
pub mod load;
pub mod observe;
pub mod params;
pub mod recovery;
pub(crate) mod runner;
pub mod scx;
pub mod setup;
pub mod tunables;

use crate::error::LiveError;
use crate::harness::params::{ParamSpec, Params};
use crate::RunPlan;
use condition::MlockGuard;
use counters::Counters;
use hygiene::Watchdog;
use load::{LoadKind, LoadPage, LoadReport, LoadSpec};
use schedlab_core::{BenchResult, BenchStatus, Condition, SchedCondition};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// CLOCK_MONOTONIC in ns (vDSO; never steps, unlike gettimeofday).
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid, writable timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn unix_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Hard time limit of one case: generous, because estimates are nominal.
pub fn case_limit(estimate_s: f64) -> Duration {
    Duration::from_secs_f64(60.0 + 20.0 * estimate_s.max(0.0))
}

/// Progress and stop word in a MAP_SHARED page, so a runner process forked
/// for the measurement (see `runner.rs`) reports progress and sees stops.
#[repr(C)]
pub struct Shared {
    pub done: AtomicU64,
    pub stop: AtomicBool,
    /// CLOCK_MONOTONIC ns of the last [`Ctx::check`]: the watchdog's sign of progress.
    pub beat: AtomicU64,
}

/// The `Shared` page, backed by a memfd so that an exec'd runner can map
/// it too (an anonymous MAP_SHARED mapping does not survive exec).
pub(crate) struct SharedPage {
    ptr: *mut Shared,
    fd: std::os::fd::OwnedFd,
}

// SAFETY: the page holds only atomics and lives until drop; the mapping
// may be used and unmapped from any thread.
unsafe impl Sync for SharedPage {}
// SAFETY: as above.
unsafe impl Send for SharedPage {}

pub(crate) const SHARED_LEN: usize = std::mem::size_of::<Shared>();

impl SharedPage {
    pub(crate) fn new() -> Result<SharedPage, LiveError> {
        use std::os::fd::FromRawFd;
        // SAFETY: the name is a valid C string; flags are constants.
        let raw = unsafe { libc::memfd_create(c"schedlab-progress".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(LiveError::last_os("memfd_create", "needs Linux 3.17 or later"));
        }
        // SAFETY: memfd_create returned a fresh descriptor that nothing else owns.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) };
        // SAFETY: ftruncate on our own memfd.
        if unsafe { libc::ftruncate(raw, SHARED_LEN as libc::off_t) } != 0 {
            return Err(LiveError::last_os("ftruncate of the progress memfd", "check available memory"));
        }
        let ptr = map_shared(raw)?;
        Ok(SharedPage { ptr, fd })
    }

    pub(crate) fn get(&self) -> &Shared {
        // SAFETY: ptr is a live mapping of a zero-filled (valid) `Shared` until drop.
        unsafe { &*self.ptr }
    }

    pub(crate) fn raw_fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.fd.as_raw_fd()
    }
}

/// Map a `Shared` from a memfd (zero-filled by the kernel: 0 units, no stop).
pub(crate) fn map_shared(fd: i32) -> Result<*mut Shared, LiveError> {
    // SAFETY: a shared mapping of SHARED_LEN bytes of a memfd of that size;
    // checked for MAP_FAILED.
    let ptr = unsafe {
        libc::mmap(std::ptr::null_mut(), SHARED_LEN, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
    };
    if ptr == libc::MAP_FAILED {
        return Err(LiveError::last_os("mmap of the shared progress page", "check ulimit -v"));
    }
    Ok(ptr.cast())
}

impl Drop for SharedPage {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping created in new(); no references outlive self.
        unsafe { libc::munmap(self.ptr.cast(), SHARED_LEN) };
    }
}

/// State the measuring thread sees.
pub struct Ctx<'a> {
    pub bench: &'static str,
    pub cond: &'a SchedCondition,
    /// Monotonic ns after which the measurement must give up.
    pub deadline_ns: u64,
    pub limit: Duration,
    pub deadline: Instant,
    /// Work units done so far (progress = done / total) and the stop word,
    /// shared with runner processes.
    shared: &'a Shared,
    shared_fd: i32,
    pub total: u64,
    watchdog: Option<&'a Watchdog>,
    /// The background loads' counters (None: no load tasks).
    loads: Option<&'a LoadPage>,
    /// The kernel's counters of the measured tasks (None: off).
    counters: Option<&'a Counters>,
}

impl<'a> Ctx<'a> {
    /// The context inside an exec'd runner: same deadline, shared page,
    /// load and kernel counters, no watchdog (the parent watches the runner's pid).
    pub(crate) fn for_runner(
        bench: &'static str,
        cond: &'a SchedCondition,
        shared: &'a Shared,
        loads: Option<&'a LoadPage>,
        counters: Option<&'a Counters>,
        deadline_ns: u64,
        total: u64,
    ) -> Ctx<'a> {
        let left = Duration::from_nanos(deadline_ns.saturating_sub(now_ns()));
        Ctx {
            bench,
            cond,
            deadline_ns,
            limit: left,
            deadline: Instant::now() + left,
            shared,
            shared_fd: -1,
            total,
            watchdog: None,
            loads,
            counters,
        }
    }

    pub(crate) fn shared_fd(&self) -> i32 {
        self.shared_fd
    }

    /// Descriptor of the load counters for a runner (-1: no load tasks).
    pub(crate) fn loads_fd(&self) -> i32 {
        self.loads.map_or(-1, LoadPage::raw_fd)
    }

    /// Descriptor of the kernel counters' page for a runner (-1: counters off).
    pub(crate) fn counters_fd(&self) -> i32 {
        self.counters.map_or(-1, Counters::raw_fd)
    }

    /// Whether marking repetitions matters: background loads run or the
    /// kernel counters are on.
    pub fn marks_repetitions(&self) -> bool {
        self.loads.is_some() || self.counters.is_some()
    }

    /// Repetition `rep` (warm-ups first, 0-based) starts now. With
    /// background loads this sums their counters (~0.1 us per load task);
    /// with the kernel counters on, a measured repetition's mark reads a few
    /// /proc files per measured task (`counters`). So call it outside the
    /// timed span, like [`Ctx::rep_ends`]; each measured repetition then gets
    /// its own load throughput and kernel counters.
    pub fn rep_starts(&self, rep: u64) {
        // The loads' mark last, nearest the timed span.
        if let Some(c) = self.counters {
            c.mark(rep, false);
        }
        if let Some(p) = self.loads {
            p.mark(rep, false);
        }
    }

    /// Repetition `rep` ended now (see [`Ctx::rep_starts`]).
    pub fn rep_ends(&self, rep: u64) {
        if let Some(p) = self.loads {
            p.mark(rep, true);
        }
        if let Some(c) = self.counters {
            c.mark(rep, true);
        }
    }

    /// Register an RT task with the watchdog (no-op for non-RT runs).
    pub fn watch(&self, tid: i32) {
        if let Some(w) = self.watchdog {
            w.watch(tid, self.deadline + Duration::from_secs(1));
        }
    }

    pub fn unwatch(&self, tid: i32) {
        if let Some(w) = self.watchdog {
            w.unwatch(tid);
        }
    }

    /// Called every N iterations of a measuring loop: stop flag, deadline;
    /// also tells the watchdog the measurement progresses (call it from
    /// measuring loops, not from the harness's waits: see [`Ctx::check_stop`]).
    #[inline]
    pub fn check(&self, now_ns: u64) -> Result<(), LiveError> {
        self.shared.beat.store(now_ns, Ordering::Relaxed);
        self.check_stop(now_ns)
    }

    /// [`Ctx::check`] without the sign of progress, for the harness's own
    /// waits (reading a runner's pipe), which go on while nothing progresses.
    #[inline]
    pub fn check_stop(&self, now_ns: u64) -> Result<(), LiveError> {
        if hygiene::stop_requested() || self.shared.stop.load(Ordering::Relaxed) {
            return Err(LiveError::Interrupted);
        }
        if now_ns > self.deadline_ns {
            return Err(LiveError::Overrun { bench: self.bench, limit_s: self.limit.as_secs_f64() });
        }
        Ok(())
    }

    #[inline]
    pub fn set_done(&self, units: u64) {
        self.shared.done.store(units, Ordering::Relaxed);
    }
}

/// Run `work` on a fresh worker thread (which may change its own scheduling
/// freely) and forward progress to `progress` on the calling thread, whose
/// scheduling is never touched. The plan's background loads run around it
/// (started and warmed up before, stopped and reaped after); their report
/// comes back beside the result.
pub fn drive<T: Send>(
    bench: &'static str,
    plan: &RunPlan,
    estimate_s: f64,
    total_units: u64,
    progress: &dyn Fn(f64),
    work: impl FnOnce(&Ctx) -> Result<T, LiveError> + Send,
) -> Result<(T, LoadReport), LiveError> {
    if plan.repeat == 0 {
        return Err(LiveError::BadRepeat(plan.repeat));
    }
    if hygiene::stop_requested() {
        return Err(LiveError::Interrupted);
    }
    let cond = &plan.condition;
    let loads: Vec<LoadSpec> = plan.loads.iter().filter(|l| l.kind != LoadKind::None).cloned().collect();
    load::check(&loads, 0, plan.force)?;
    // sched_ext, tunables and the cgroup before the loads, which then run under them too.
    let case_setup = setup::CaseSetup::apply(cond)?;
    let _mlock: Option<MlockGuard> = if cond.mlock { Some(condition::mlock_all()?) } else { None };
    let any_rt_load = loads.iter().any(|l| l.condition.as_ref().is_some_and(|c| c.policy.is_realtime()));
    let spare = spare_cpus(cond);
    let page = std::sync::Arc::new(SharedPage::new()?);
    let watchdog = if cond.policy.is_realtime() || any_rt_load {
        let p = std::sync::Arc::clone(&page);
        let probe = Box::new(move || (p.get().beat.load(Ordering::Relaxed), p.get().done.load(Ordering::Relaxed)));
        Some(Watchdog::start_with_progress(spare.as_deref(), probe)?)
    } else {
        None
    };
    let limit = case_limit(estimate_s);
    // A watchdog that fired explains whatever error follows (a stall also
    // interrupts the loads' start).
    let explain = |e: LiveError| watchdog_error(bench, watchdog.as_ref(), limit).unwrap_or(e);
    // Loads start first (forked from this thread, which outlives them) and warm up.
    // The sampler's cost is checked before anything starts; it starts
    // before the counters take this process's threads as the harness's own.
    let expected = 1 + loads.iter().map(LoadSpec::tasks).sum::<u64>();
    let observe_at = |o| observe::Sampler::start(o, expected, condition::gettid(), spare.as_deref());
    let mut sampler = plan.observe.map(observe_at).transpose()?;
    let load_deadline = now_ns() + limit.as_nanos() as u64 + 1_000_000_000;
    let mut running =
        load::start(&loads, load_deadline, watchdog.as_ref(), plan.warmup, plan.repeat).map_err(explain)?;
    running.begin();
    // The loads' helper threads are the harness's, not measured.
    if let Some(s) = &sampler {
        s.harness_threads_now();
    }
    // Made on this thread before the measuring thread exists: every thread
    // of the process now is the harness's own, not measured.
    let (counters, counters_note) = match plan.counters.then(|| Counters::for_harness(plan.warmup, plan.repeat)) {
        Some(Ok(c)) => (Some(c), None),
        Some(Err(e)) => (None, Some(format!("{}none collected: {e}", counters::NOTE_PREFIX))),
        None => (None, None),
    };
    let ctx = Ctx {
        bench,
        cond,
        deadline_ns: now_ns() + limit.as_nanos() as u64,
        limit,
        deadline: Instant::now() + limit,
        shared: page.get(),
        shared_fd: page.raw_fd(),
        total: total_units.max(1),
        watchdog: watchdog.as_ref(),
        loads: running.page(),
        counters: counters.as_ref(),
    };
    progress(0.0);
    // The measuring thread holds the write end: its end is a hang-up here.
    let (end_r, end_w) = pipe()?;
    // Its tid, for a trace of a case too short for the sampler's walk to see it.
    let measuring_tid = std::sync::atomic::AtomicI32::new(0);
    let result = std::thread::scope(|s| {
        let c = &ctx;
        let tid = &measuring_tid;
        let handle = std::thread::Builder::new()
            .name(format!("schedlab-{bench}"))
            .spawn_scoped(s, move || {
                let _end = end_w;
                tid.store(condition::gettid(), Ordering::Relaxed);
                work(c)
            })
            .map_err(|e| LiveError::Os {
                what: "spawning the measuring thread",
                detail: e.to_string(),
                hint: "check ulimit -u",
            })?;
        // Poll at 10 Hz, from a CPU the measurement does not use when there
        // is one (after the spawn: the measuring thread inherits affinity).
        // A stop wakes it at once, and from then on so does the
        // measurement's end. A normal end keeps the 10 Hz cadence: returning
        // at once after a SCHED_DEADLINE runner exited made the 6.18 dev
        // kernel admit an over-budget reservation in the next case.
        let _away = spare.as_deref().and_then(pin_caller);
        let stop_fd = hygiene::stop_fd();
        while !handle.is_finished() {
            use std::os::fd::AsRawFd;
            let stopping = hygiene::stop_requested();
            // A negative fd is skipped.
            let mut fds = [
                libc::pollfd { fd: if stopping { end_r.as_raw_fd() } else { -1 }, events: libc::POLLIN, revents: 0 },
                libc::pollfd { fd: if stopping { -1 } else { stop_fd }, events: libc::POLLIN, revents: 0 },
            ];
            // SAFETY: two valid pollfds.
            unsafe { libc::poll(fds.as_mut_ptr(), 2, 100) };
            ctx.shared.stop.store(hygiene::stop_requested(), Ordering::Relaxed);
            progress((ctx.shared.done.load(Ordering::Relaxed) as f64 / ctx.total as f64).min(1.0));
        }
        handle
            .join()
            .unwrap_or_else(|_| Err(LiveError::Measurement { bench, detail: "the measuring thread panicked".into() }))
    });
    // The sampler stops with the measurement (on every path: dropping it joins it).
    let timeline = sampler.take().and_then(|s| s.finish(measuring_tid.load(Ordering::Relaxed)));
    let mut report = running.finish(watchdog.as_ref());
    report.texts = plan.loads.iter().map(|l| l.text.clone()).collect();
    report.timeline = timeline;
    // Put the machine-wide settings back before anything else can fail.
    let setup_notes = case_setup.finish();
    if let Some(e) = watchdog_error(bench, watchdog.as_ref(), limit) {
        return Err(e);
    }
    let out = result?;
    report.warnings.extend(setup_notes?);
    if let Some(c) = &counters {
        let (metrics, notes) = c.finish();
        report.metrics.extend(metrics);
        report.warnings.extend(notes);
    }
    report.warnings.extend(counters_note);
    progress(1.0);
    Ok((out, report))
}

/// The error a fired watchdog stands for: a stall names what held which CPU;
/// an overrun is the case limit.
fn watchdog_error(bench: &'static str, w: Option<&Watchdog>, limit: Duration) -> Option<LiveError> {
    Some(match w?.firing()? {
        f @ hygiene::Firing::Stall { .. } => LiveError::WatchdogFired { bench, detail: f.describe() },
        hygiene::Firing::Deadline { .. } => LiveError::Overrun { bench, limit_s: limit.as_secs_f64() },
    })
}

/// Seconds a periodic benchmark takes: `periods` per measured repetition and
/// a tenth of that (at least 10) per warm-up, `interval_us` apart.
pub fn periodic_estimate_s(periods: u64, interval_us: u64, plan: &RunPlan) -> f64 {
    let n = periods as f64;
    (plan.repeat as f64 * n + plan.warmup as f64 * (n / 10.0).max(10.0)) * interval_us as f64 * 1e-6
}

/// CPUs for the harness's own threads (watchdog, progress poller) away from
/// the measured ones: the caller's affinity minus `--cpus`. None when the
/// measurement may use every CPU, or no other CPU is left.
pub(crate) fn spare_cpus(cond: &SchedCondition) -> Option<Vec<usize>> {
    let measured = cond.cpus.as_ref()?;
    let mine = condition::get_affinity(0).ok()?;
    let spare: Vec<usize> = mine.into_iter().filter(|c| !measured.contains(c)).collect();
    (!spare.is_empty()).then_some(spare)
}

/// Pin the calling thread to `cpus` until the guard drops (which restores
/// its affinity); None, and the thread unchanged, if that fails.
fn pin_caller(cpus: &[usize]) -> Option<condition::ThreadGuard> {
    let guard = condition::ThreadGuard::capture().ok()?;
    condition::set_affinity(0, cpus).ok()?;
    Some(guard)
}

/// The common shell of a result; the benchmark then adds its metrics and
/// warnings (RT environment, load and kernel counter warnings are already
/// in) and appends `loads.metrics` (the loads' throughput and the kernel
/// counters) after its own.
pub fn result(
    bench: &'static str,
    case: &Params,
    specs: &[ParamSpec],
    plan: &RunPlan,
    applied: Option<SchedCondition>,
    started_ms: i64,
    loads: &LoadReport,
) -> BenchResult {
    let applied = applied.map(|mut a| {
        if plan.condition.has_case_setup() {
            setup::fill_applied(&mut a);
        }
        a
    });
    let mut r = BenchResult::new(
        bench,
        Condition::Live { requested: plan.condition.clone(), applied, loads: loads.texts.clone() },
        started_ms,
    );
    r.params = case.to_json(specs);
    r.repetitions = plan.repeat;
    r.warmup = plan.warmup;
    r.quick = plan.quick;
    r.warnings = condition::rt_warnings(&plan.condition);
    r.warnings.extend(loads.warnings.iter().cloned());
    r.timeline = loads.timeline.clone();
    r.status = BenchStatus::Complete;
    r.ended_unix_ms = Some(unix_ms());
    r
}

/// The applied condition of several tasks: policy etc. from the first, CPU
/// sets united, mlock from the process. Differences become a warning.
pub fn merge_applied(
    tasks: &[SchedCondition],
    mlock_requested: bool,
    warnings: &mut Vec<String>,
) -> Option<SchedCondition> {
    let mut first = tasks.first()?.clone();
    let mut cpus: Vec<usize> = Vec::new();
    for t in tasks {
        let key = |c: &SchedCondition| (c.policy, c.priority, c.nice, c.deadline, c.uclamp_min, c.uclamp_max);
        if key(t) != key(&first) {
            warnings.push(format!(
                "the measured tasks ended up with different policies: {} vs {}",
                first.label(),
                t.label()
            ));
        }
        cpus.extend(t.cpus.iter().flatten());
    }
    cpus.sort_unstable();
    cpus.dedup();
    first.cpus = Some(cpus);
    first.mlock = mlock_requested && condition::mlock_active();
    Some(first)
}

/// Retry-on-EINTR read/write of exactly `len` bytes; false on EOF or error.
#[inline]
pub fn write_exact(fd: i32, mut buf: &[u8]) -> bool {
    loop {
        // SAFETY: buf is a readable slice of buf.len() bytes.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n == buf.len() as isize {
            return true;
        }
        if n > 0 {
            // Partial write (payloads above PIPE_BUF): go on with the rest.
            buf = &buf[n as usize..];
            continue;
        }
        if n < 0 && crate::error::last_errno() == libc::EINTR {
            continue;
        }
        return false;
    }
}

#[inline]
pub fn read_exact(fd: i32, buf: &mut [u8]) -> bool {
    loop {
        // SAFETY: buf is a writable slice of buf.len() bytes.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n == buf.len() as isize {
            return true;
        }
        if n < 0 && crate::error::last_errno() == libc::EINTR {
            continue;
        }
        return false;
    }
}

/// An AF_UNIX stream socketpair, close-on-exec.
pub fn socketpair() -> Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd), LiveError> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0i32; 2];
    // SAFETY: fds is a writable array of two ints.
    if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) } != 0 {
        return Err(LiveError::last_os("socketpair", "too many open files? raise ulimit -n"));
    }
    // SAFETY: two fresh descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A pipe with both ends close-on-exec: (read, write).
pub fn pipe() -> Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd), LiveError> {
    use std::os::fd::FromRawFd;
    let mut fds = [0i32; 2];
    // SAFETY: fds is a writable array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(LiveError::last_os("pipe2", "too many open files? raise ulimit -n"));
    }
    // SAFETY: pipe2 returned two fresh descriptors that nothing else owns.
    Ok(unsafe { (std::os::fd::OwnedFd::from_raw_fd(fds[0]), std::os::fd::OwnedFd::from_raw_fd(fds[1])) })
}

/// `{"ok": value}` or `{"err": {"kind", "msg"}}` from a runner process.
pub(crate) fn decode_runner_output(ctx: &Ctx, bytes: &[u8], code: i32) -> Result<serde_json::Value, LiveError> {
    let bytes = bytes.trim_ascii_end();
    let out: serde_json::Value = serde_json::from_slice(bytes).map_err(|_| LiveError::Measurement {
        bench: ctx.bench,
        detail: format!("the runner process exited with {code} without a result"),
    })?;
    if let Some(v) = out.get("ok") {
        return Ok(v.clone());
    }
    let kind = out["err"]["kind"].as_str().unwrap_or("");
    let msg = out["err"]["msg"].as_str().unwrap_or("unknown error").to_string();
    Err(match kind {
        "interrupted" => LiveError::Interrupted,
        "overrun" => LiveError::Overrun { bench: ctx.bench, limit_s: ctx.limit.as_secs_f64() },
        _ => LiveError::Measurement { bench: ctx.bench, detail: format!("in the runner process: {msg}") },
    })
}

pub(crate) fn error_kind(e: &LiveError) -> &'static str {
    match e {
        LiveError::Interrupted => "interrupted",
        LiveError::Overrun { .. } => "overrun",
        _ => "other",
    }
}
