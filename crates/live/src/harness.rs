//! What every benchmark case shares: preflight, mlock, watchdog, the time
//! limit, running the measurement on a worker thread while the caller's
//! thread reports progress, and building the `BenchResult`.

use crate::condition::{self, MlockGuard};
use crate::error::LiveError;
use crate::hygiene::{self, Watchdog};
use crate::params::{ParamSpec, Params};
use crate::RunPlan;
use schedlab_core::{BenchResult, BenchStatus, Condition, SchedCondition};
use std::sync::atomic::{AtomicU64, Ordering};
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

/// State the measuring thread sees.
pub struct Ctx<'a> {
    pub bench: &'static str,
    pub cond: &'a SchedCondition,
    /// Monotonic ns after which the measurement must give up.
    pub deadline_ns: u64,
    pub limit: Duration,
    pub deadline: Instant,
    /// Work units done so far (progress = done / total).
    pub done: AtomicU64,
    pub total: u64,
    watchdog: Option<&'a Watchdog>,
}

impl Ctx<'_> {
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

    /// Called every N iterations: stop flag, deadline.
    #[inline]
    pub fn check(&self, now_ns: u64) -> Result<(), LiveError> {
        if hygiene::stop_requested() {
            return Err(LiveError::Interrupted);
        }
        if now_ns > self.deadline_ns {
            return Err(LiveError::Overrun { bench: self.bench, limit_s: self.limit.as_secs_f64() });
        }
        Ok(())
    }

    #[inline]
    pub fn set_done(&self, units: u64) {
        self.done.store(units, Ordering::Relaxed);
    }
}

/// Run `work` on a fresh worker thread (which may change its own scheduling
/// freely) and forward progress to `progress` on the calling thread, whose
/// scheduling is never touched.
pub fn drive<T: Send>(
    bench: &'static str,
    plan: &RunPlan,
    estimate_s: f64,
    total_units: u64,
    progress: &dyn Fn(f64),
    work: impl FnOnce(&Ctx) -> Result<T, LiveError> + Send,
) -> Result<T, LiveError> {
    if plan.repeat == 0 {
        return Err(LiveError::BadRepeat(plan.repeat));
    }
    if hygiene::stop_requested() {
        return Err(LiveError::Interrupted);
    }
    let cond = &plan.condition;
    let _mlock: Option<MlockGuard> = if cond.mlock { Some(condition::mlock_all()?) } else { None };
    let watchdog = if cond.policy.is_realtime() { Some(Watchdog::start()?) } else { None };
    let limit = case_limit(estimate_s);
    let ctx = Ctx {
        bench,
        cond,
        deadline_ns: now_ns() + limit.as_nanos() as u64,
        limit,
        deadline: Instant::now() + limit,
        done: AtomicU64::new(0),
        total: total_units.max(1),
        watchdog: watchdog.as_ref(),
    };
    progress(0.0);
    let result = std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name(format!("schedlab-{bench}"))
            .spawn_scoped(s, || work(&ctx))
            .map_err(|e| LiveError::Os {
                what: "spawning the measuring thread",
                detail: e.to_string(),
                hint: "check ulimit -u",
            })?;
        // Poll at 10 Hz: a negligible perturbation next to the measurement.
        while !handle.is_finished() {
            std::thread::sleep(Duration::from_millis(100));
            progress((ctx.done.load(Ordering::Relaxed) as f64 / ctx.total as f64).min(1.0));
        }
        handle
            .join()
            .unwrap_or_else(|_| Err(LiveError::Measurement { bench, detail: "the measuring thread panicked".into() }))
    });
    if watchdog.as_ref().is_some_and(|w| w.fired()) {
        return Err(LiveError::Overrun { bench, limit_s: limit.as_secs_f64() });
    }
    let out = result?;
    progress(1.0);
    Ok(out)
}

/// The common shell of a result; the benchmark then adds its metrics and
/// warnings (RT environment warnings are already in).
pub fn result(
    bench: &'static str,
    case: &Params,
    specs: &[ParamSpec],
    plan: &RunPlan,
    applied: Option<SchedCondition>,
    started_ms: i64,
) -> BenchResult {
    let mut r = BenchResult::new(
        bench,
        Condition::Live { requested: plan.condition.clone(), applied, loads: vec![] },
        started_ms,
    );
    r.params = case.to_json(specs);
    r.repetitions = plan.repeat;
    r.warmup = plan.warmup;
    r.warnings = condition::rt_warnings(&plan.condition);
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
        if (t.policy, t.priority, t.nice, t.deadline) != (first.policy, first.priority, first.nice, first.deadline) {
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
pub fn write_exact(fd: i32, buf: &[u8]) -> bool {
    loop {
        // SAFETY: buf is a readable slice of buf.len() bytes.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n == buf.len() as isize {
            return true;
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
