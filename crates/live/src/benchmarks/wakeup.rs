//! # Methodology
//!
//! **Goal.** E3's wake-up latency probe, which no peer tool offers: a
//! measuring thread wakes a mixed set of RT and non-RT threads with one
//! `pthread_cond_broadcast`, and each woken thread reports its delay, per
//! class, raw and after E3's 6-sigma filter.
//!
//! **Tasks and conditions.** The *waker* (measuring thread) runs under the
//! run's condition, or SCHED_FIFO 90 when no `--policy/--prio/--nice` is
//! given. `waiters` threads per class wait on the condition variable: the RT
//! class at SCHED_FIFO `rt_prio` (default 50), the normal class at
//! SCHED_OTHER nice `normal_nice` (default 0); `classes=both|rt|normal`
//! picks the classes. `--cpus` applies to every thread (waker and waiters);
//! `--mlock` to the process. Every thread sets timer slack to 1 ns.
//!
//! **Timed.** The waker sleeps to absolute deadlines `interval` apart
//! (`clock_nanosleep`, TIMER_ABSTIME); at each: lock the mutex, stamp
//! `CLOCK_MONOTONIC` into the broadcast's slot, bump the sequence number,
//! `pthread_cond_broadcast`, unlock. A waiter takes its timestamp right after
//! `pthread_cond_wait` returns (it holds the mutex again then, as in any
//! condvar wake-up: waiters of one broadcast serialise on it, as in E3), and
//! records wake - stamp of the first broadcast it had not seen. A waiter
//! that slept through broadcasts counts them as `missed` (its latency is
//! still charged from the first one it missed). Samples go to a vector
//! preallocated per waiter; histograms are built afterwards.
//!
//! **Load.** Without `--load`, the full benchmark runs under `hackbench:10`
//! (E3's background load); `--quick` runs without load; `--load none`
//! forces none. With a load, the waker marks each repetition's start and
//! end for the load's throughput halfway between two broadcasts (one extra
//! absolute sleep per repetition), so reading the load counters never
//! delays a wake-up.
//!
//! **Memory.** Raw latencies are kept until the end (the filter needs
//! them): ~80 bytes per waiter and broadcast plus an 8-byte stamp per
//! broadcast. A case that would not fit in half of MemAvailable is refused
//! before anything starts.
//!
//! **Warm-up.** A warm-up repetition of `samples / 10` broadcasts (at least
//! 10) is discarded.
//!
//! **breaktrace=US**: as in `cyclic`, ftrace runs during the case and the
//! first measured wake-up later than US stops it; the warning explains it
//! (who woke the waiter and when, who held its CPU, when it got it). With
//! one mutex, woken waiters take it in turn, so a late wake-up is often a
//! hand-over from another waiter: the explanation names the waker.
//!
//! **Metrics** (per class `rt` / `normal`): `<class>.latency` (histogram,
//! ns, headline), `<class>.filtered_mean` (mean after dropping samples beyond
//! `k` = 6 sd of the repetition's raw mean, E3's filter, ns),
//! `<class>.filtered_dropped` and `<class>.missed` (counts per repetition).
//! A warning per class states the raw and filtered mean/max and the number
//! of samples dropped over all repetitions.

use crate::error::LiveError;
use crate::harness::ftrace::{BreakTrace, Tracing, BREAKTRACE_EVENTS};
use crate::harness::load::{self, LoadSpec};
use crate::harness::params::{ParamKind, ParamSpec, Params, TimeUnit};
use crate::harness::{self, now_ns, Ctx};
use crate::{harness::condition, Benchmark, RunPlan};
use schedlab_core::stats::{ksigma_samples, Summary};
use schedlab_core::{BenchResult, Direction, LatencyHistogram, Metric, SchedCondition, SchedPolicy, Unit};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;

pub struct Wakeup;

const NAME: &str = "wakeup";

const SPECS: &[ParamSpec] = &[
    ParamSpec {
        name: "samples",
        default: "1000",
        quick_default: Some("200"),
        unit: "broadcasts",
        help: "broadcasts per repetition (E3: 1,000); each wakes every waiter",
        kind: ParamKind::Count { min: 1, max: 10_000_000 },
        diagnostic: false,
    },
    ParamSpec {
        name: "interval",
        default: "5000",
        quick_default: Some("2000"),
        unit: "",
        help: "time between broadcasts",
        kind: ParamKind::Duration { unit: TimeUnit::Us, min: 100, max: 10_000_000 },
        diagnostic: false,
    },
    ParamSpec {
        name: "waiters",
        default: "2",
        quick_default: None,
        unit: "threads",
        help: "waiting threads per class",
        kind: ParamKind::Count { min: 1, max: 1_000 },
        diagnostic: false,
    },
    ParamSpec {
        name: "classes",
        default: "both",
        quick_default: None,
        unit: "",
        help: "both (RT and non-RT waiters in one run), rt, or normal",
        kind: ParamKind::Choice(&["both", "rt", "normal"]),
        diagnostic: false,
    },
    ParamSpec {
        name: "rt_prio",
        default: "50",
        quick_default: None,
        unit: "",
        help: "SCHED_FIFO priority of the RT waiters",
        kind: ParamKind::Count { min: 1, max: 98 },
        diagnostic: false,
    },
    ParamSpec {
        name: "normal_nice",
        default: "0",
        quick_default: None,
        unit: "",
        help: "nice of the SCHED_OTHER waiters (0..19)",
        kind: ParamKind::Count { min: 0, max: 19 },
        diagnostic: false,
    },
    ParamSpec {
        name: "breaktrace",
        default: "0",
        quick_default: None,
        unit: "",
        help: "trace with ftrace and stop at the first wake-up later than this, then explain it; 0: off",
        kind: ParamKind::Duration { unit: TimeUnit::Us, min: 0, max: 100_000_000 },
        diagnostic: true,
    },
    ParamSpec {
        name: "k",
        default: "6",
        quick_default: None,
        unit: "sd",
        help: "k of the k-sigma filter (E3: 6)",
        kind: ParamKind::Count { min: 1, max: 100 },
        diagnostic: false,
    },
];

fn default_waker() -> SchedCondition {
    SchedCondition { policy: SchedPolicy::Fifo, priority: Some(90), ..Default::default() }
}

/// The plan with the waker's condition and the default load applied.
fn effective_plan(plan: &RunPlan) -> RunPlan {
    let mut p = plan.with_condition(plan.condition_or(&default_waker()));
    if p.loads.is_empty() && !plan.quick {
        p.loads = vec![load::parse("hackbench:10").expect("static load spec")];
    }
    p
}

struct Class {
    name: &'static str,
    cond: SchedCondition,
}

fn classes(p: &Params, plan: &RunPlan) -> Result<Vec<Class>, LiveError> {
    let cpus = plan.condition.cpus.clone();
    let rt = Class {
        name: "rt",
        cond: SchedCondition {
            policy: SchedPolicy::Fifo,
            priority: Some(p.count("rt_prio")? as u32),
            cpus: cpus.clone(),
            ..Default::default()
        }
        // The run's uclamp, cgroup, tunables and sched_ext apply to every waiter.
        .with_setup_of(&plan.condition),
    };
    let nice = p.count("normal_nice")? as i32;
    let normal = Class {
        name: "normal",
        cond: SchedCondition {
            policy: SchedPolicy::Other,
            nice: (nice != 0).then_some(nice),
            cpus,
            ..Default::default()
        }
        .with_setup_of(&plan.condition),
    };
    Ok(match p.word("classes")? {
        "rt" => vec![rt],
        "normal" => vec![normal],
        _ => vec![rt, normal],
    })
}

impl Benchmark for Wakeup {
    fn name(&self) -> &'static str {
        NAME
    }

    fn summary(&self) -> &'static str {
        "E3's probe: an RT thread broadcasts a condvar to RT and non-RT waiters; wake-up latency per class, raw and 6-sigma filtered"
    }

    fn params(&self) -> &'static [ParamSpec] {
        SPECS
    }

    fn cases(&self, params: &Params, plan: &RunPlan) -> Result<Vec<Params>, LiveError> {
        let p = params.resolve(NAME, SPECS, plan.quick)?;
        let plan = effective_plan(plan);
        plan.refuse_deadline(NAME)?;
        condition::preflight(&plan.condition)?;
        let cls = classes(&p, &plan)?;
        for c in &cls {
            condition::preflight(&c.cond)?;
        }
        let threads = p.count("waiters")? * cls.len() as u64 + 1;
        let loads: u64 = plan.loads.iter().map(LoadSpec::tasks).sum();
        let what = format!("wakeup with {threads} threads and its load");
        load::check_tasks(what, threads + loads, "lower waiters= or the load")?;
        load::check(&plan.loads, 0, plan.force)?;
        if p.count("breaktrace")? > 0 {
            Tracing::check()?;
        }
        let (samples, waiters) = (p.count("samples")?, p.count("waiters")? * cls.len() as u64);
        load::check_memory(
            &format!("wakeup samples={samples} with {waiters} waiters and --repeat {} (raw latencies)", plan.repeat),
            raw_bytes(samples, waiters, &plan),
            "lower samples=, waiters= or --repeat",
        )?;
        Ok(vec![p])
    }

    fn estimate_s(&self, case: &Params, plan: &RunPlan) -> f64 {
        let Ok(p) = case.resolve(NAME, SPECS, plan.quick) else { return 1.0 };
        harness::periodic_estimate_s(p.count("samples").unwrap_or(0), p.count("interval").unwrap_or(1000), plan)
    }

    fn run(&self, case: &Params, plan: &RunPlan, progress: &dyn Fn(f64)) -> Result<BenchResult, LiveError> {
        let started = harness::unix_ms();
        let p = self.cases(case, plan)?.remove(0);
        let plan = &effective_plan(plan);
        let cls = classes(&p, plan)?;
        let samples = p.count("samples")?;
        let cfg = Cfg {
            samples,
            warm: (samples / 10).max(10),
            interval_ns: p.count("interval")? * 1000,
            waiters: p.count("waiters")? as usize,
        };
        let k = p.count("k")? as f64;
        let est = self.estimate_s(&p, plan);
        let total = cfg.warm * plan.warmup as u64 + cfg.samples * plan.repeat as u64;
        let brk_us = p.count("breaktrace")?;
        let brk = if brk_us > 0 {
            Some(BreakTrace::new(
                Tracing::start(&condition::preflight(&plan.condition)?, BREAKTRACE_EVENTS)?,
                brk_us * 1000,
            ))
        } else {
            None
        };
        let (m, loads) =
            harness::drive(NAME, plan, est, total, progress, |ctx| measure(ctx, plan, &cfg, &cls, brk.as_ref()))?;
        let mut warnings: Vec<String> = brk
            .as_ref()
            .and_then(|b| b.report(NAME, brk_us, &std::env::current_dir().unwrap_or_else(|_| ".".into())))
            .into_iter()
            .collect();
        // The trace is read: give ftrace back as it was.
        drop(brk);
        let applied = harness::merge_applied(&m.applied_waker, plan.condition.mlock, &mut warnings);
        let mut r = harness::result(NAME, &p, SPECS, plan, applied, started, &loads);
        for (ci, c) in cls.iter().enumerate() {
            let per_rep = &m.samples[ci];
            let mut hists = Vec::new();
            let (mut fmean, mut dropped, mut missed) = (Vec::new(), Vec::new(), Vec::new());
            let mut all: Vec<f64> = Vec::new();
            for (rep, v) in per_rep.iter().enumerate() {
                let mut h = LatencyHistogram::new();
                for &x in v {
                    h.record(x);
                }
                hists.push(h);
                let f: Vec<f64> = v.iter().map(|x| *x as f64).collect();
                let filt = ksigma_samples(&f, k);
                fmean.push(filt.summary.map(|s| s.mean).unwrap_or(f64::NAN));
                dropped.push(filt.dropped as f64);
                missed.push(m.missed[ci][rep] as f64);
                all.extend(f);
            }
            if all.is_empty() {
                return Err(LiveError::Measurement { bench: NAME, detail: format!("no {} waiter woke up", c.name) });
            }
            let raw = Summary::of_samples(&all);
            let filt = ksigma_samples(&all, k);
            // Worth a line only when the filter changed something.
            if let (Some(raw), Some(fs), true) = (raw, filt.summary, filt.dropped > 0) {
                warnings.push(format!(
                    "{}: {k}-sigma filter dropped {} of {} samples: mean {:.1} -> {:.1} us, sd {:.1} -> {:.1} us, max {:.1} -> {:.1} us",
                    c.name,
                    filt.dropped,
                    all.len(),
                    raw.mean / 1e3,
                    fs.mean / 1e3,
                    raw.sd / 1e3,
                    fs.sd / 1e3,
                    raw.max / 1e3,
                    fs.max / 1e3
                ));
            }
            let n = |s: &str| format!("{}.{s}", c.name);
            r.metrics.push(Metric::histogram_per_repetition(&n("latency"), Direction::LowerIsBetter, hists).headline());
            r.metrics.push(Metric::samples(&n("filtered_mean"), Unit::Nanoseconds, Direction::LowerIsBetter, fmean));
            r.metrics.push(Metric::samples(&n("filtered_dropped"), Unit::Count, Direction::Neutral, dropped));
            r.metrics.push(Metric::samples(&n("missed"), Unit::Count, Direction::LowerIsBetter, missed));
        }
        r.metrics.extend(loads.metrics);
        r.warnings.extend(warnings);
        Ok(r)
    }
}

/// Bytes of raw data a case keeps: an 8-byte stamp per broadcast, and per
/// waiter and broadcast a 24-byte record while measuring plus ~56 bytes of
/// per-repetition samples, copies and sorts while summarising.
fn raw_bytes(samples: u64, waiters: u64, plan: &RunPlan) -> u64 {
    let warm = (samples / 10).max(10);
    let broadcasts = warm.saturating_mul(plan.warmup as u64).saturating_add(samples.saturating_mul(plan.repeat as u64));
    broadcasts.saturating_mul(waiters.saturating_mul(80).saturating_add(8))
}

struct Cfg {
    samples: u64,
    warm: u64,
    interval_ns: u64,
    waiters: usize,
}

/// Mutex + condvar + sequence, at a fixed address for the threads' lifetime.
struct Bell {
    mutex: UnsafeCell<libc::pthread_mutex_t>,
    cond: UnsafeCell<libc::pthread_cond_t>,
    /// Protected by the mutex.
    seq: UnsafeCell<u64>,
    quit: UnsafeCell<bool>,
    /// Broadcast stamps by sequence number (1-based).
    stamps: Vec<AtomicU64>,
}

// SAFETY: seq and quit are only touched with the mutex held; the pthread
// objects are designed for sharing between threads.
unsafe impl Sync for Bell {}

impl Bell {
    fn lock(&self) {
        // SAFETY: an initialised mutex at a stable address.
        unsafe { libc::pthread_mutex_lock(self.mutex.get()) };
    }
    fn unlock(&self) {
        // SAFETY: as above, held by this thread.
        unsafe { libc::pthread_mutex_unlock(self.mutex.get()) };
    }
    /// Set quit and wake everybody (always called, also on errors).
    fn close(&self) {
        self.lock();
        // SAFETY: mutex held.
        unsafe { *self.quit.get() = true };
        // SAFETY: initialised condvar.
        unsafe { libc::pthread_cond_broadcast(self.cond.get()) };
        self.unlock();
    }
}

struct Measured {
    /// [class][rep] -> latencies (ns)
    samples: Vec<Vec<Vec<u64>>>,
    /// [class][rep] -> missed broadcasts
    missed: Vec<Vec<u64>>,
    applied_waker: Vec<SchedCondition>,
}

fn set_slack() {
    // SAFETY: prctl with integer arguments on the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

fn measure(
    ctx: &Ctx,
    plan: &RunPlan,
    cfg: &Cfg,
    cls: &[Class],
    brk: Option<&BreakTrace>,
) -> Result<Measured, LiveError> {
    let total = cfg.warm * plan.warmup as u64 + cfg.samples * plan.repeat as u64;
    let bell = Bell {
        mutex: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER),
        cond: UnsafeCell::new(libc::PTHREAD_COND_INITIALIZER),
        seq: UnsafeCell::new(0),
        quit: UnsafeCell::new(false),
        stamps: (0..=total).map(|_| AtomicU64::new(0)).collect(),
    };
    let nwait = cfg.waiters * cls.len();
    let barrier = Barrier::new(nwait + 1);
    // Broadcast seq -> repetition index (None: warm-up).
    let warm_total = cfg.warm * plan.warmup as u64;
    let rep_of =
        |seq: u64| -> Option<usize> { (seq > warm_total).then(|| ((seq - warm_total - 1) / cfg.samples) as usize) };
    let reps = plan.repeat as usize;
    let result = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (ci, c) in cls.iter().enumerate() {
            for w in 0..cfg.waiters {
                let (bell, barrier) = (&bell, &barrier);
                let h = std::thread::Builder::new()
                    .name(format!("schedlab-wake-{}{w}", c.name))
                    .spawn_scoped(s, move || waiter(ctx, bell, barrier, &c.cond, total, brk.map(|b| (b, warm_total))))
                    .map(|h| (ci, h));
                match h {
                    Ok(h) => handles.push(h),
                    Err(e) => {
                        bell.close();
                        return Err(LiveError::Os {
                            what: "spawning a waiter",
                            detail: e.to_string(),
                            hint: "check ulimit -u",
                        });
                    }
                }
            }
        }
        if handles.len() != nwait {
            bell.close();
        }
        let waker = waker(ctx, plan, &bell, &barrier, cfg, total);
        bell.close();
        let mut m = Measured {
            samples: cls.iter().map(|_| vec![Vec::new(); reps]).collect(),
            missed: cls.iter().map(|_| vec![0; reps]).collect(),
            applied_waker: Vec::new(),
        };
        let mut first_err = None;
        for (ci, h) in handles {
            match h.join() {
                Ok(Ok(out)) => {
                    for (seq, lat, missed) in out {
                        if let Some(rep) = rep_of(seq) {
                            if rep < reps {
                                m.samples[ci][rep].push(lat);
                                m.missed[ci][rep] += missed;
                            }
                        }
                    }
                }
                Ok(Err(e)) => first_err = first_err.or(Some(e)),
                Err(_) => {
                    first_err =
                        first_err.or(Some(LiveError::Measurement { bench: NAME, detail: "a waiter panicked".into() }))
                }
            }
        }
        let applied = waker?;
        if let Some(e) = first_err {
            return Err(e);
        }
        m.applied_waker.push(applied);
        Ok(m)
    });
    result
}

/// A waiter: condition, then wake-ups until quit. Returns (first unseen seq,
/// latency from its stamp, broadcasts missed).
fn waiter(
    ctx: &Ctx,
    bell: &Bell,
    barrier: &Barrier,
    cond: &SchedCondition,
    total: u64,
    brk: Option<(&BreakTrace, u64)>,
) -> Result<Vec<(u64, u64, u64)>, LiveError> {
    let setup = condition::apply(0, cond, None);
    set_slack();
    let tid = condition::gettid();
    if setup.is_ok() {
        ctx.watch(tid);
    }
    let mut out = Vec::with_capacity(total as usize + 1);
    barrier.wait();
    setup?;
    let mut last = 0u64;
    bell.lock();
    loop {
        // SAFETY: seq/quit read with the mutex held; cond_wait releases and
        // re-takes it.
        unsafe {
            while *bell.seq.get() == last && !*bell.quit.get() {
                libc::pthread_cond_wait(bell.cond.get(), bell.mutex.get());
            }
        }
        let now = now_ns();
        // SAFETY: mutex held.
        let (seq, quit) = unsafe { (*bell.seq.get(), *bell.quit.get()) };
        if seq == last && quit {
            break;
        }
        let first = last + 1;
        let stamp = bell.stamps[first as usize].load(Ordering::Relaxed);
        let lat = now.saturating_sub(stamp);
        out.push((first, lat, seq - first));
        // Armed after the warm-up broadcasts only.
        if let Some((b, warm_total)) = brk {
            if lat > b.threshold_ns && first > warm_total {
                b.fire(tid, stamp, now);
            }
        }
        last = seq;
    }
    bell.unlock();
    ctx.unwatch(tid);
    let _ = condition::demote(0);
    Ok(out)
}

/// Absolute CLOCK_MONOTONIC sleep; EINTR just ends it early (the caller checks).
fn sleep_until(ns: u64) {
    let t =
        libc::timespec { tv_sec: (ns / 1_000_000_000) as libc::time_t, tv_nsec: (ns % 1_000_000_000) as libc::c_long };
    // SAFETY: valid timespec; no remaining-time output for TIMER_ABSTIME.
    unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &t, std::ptr::null_mut()) };
}

/// First broadcast of each repetition (warm-ups first), then total + 1.
fn rep_bounds(cfg: &Cfg, warmup: u64, repeat: u64) -> Vec<u64> {
    let mut b: Vec<u64> = (0..warmup).map(|k| k * cfg.warm + 1).collect();
    b.extend((0..=repeat).map(|r| warmup * cfg.warm + r * cfg.samples + 1));
    b
}

fn waker(
    ctx: &Ctx,
    plan: &RunPlan,
    bell: &Bell,
    barrier: &Barrier,
    cfg: &Cfg,
    total: u64,
) -> Result<SchedCondition, LiveError> {
    let setup = condition::apply(0, ctx.cond, None).and_then(|_| condition::read_back(0));
    set_slack();
    barrier.wait();
    let applied = setup?;
    let tid = condition::gettid();
    ctx.watch(tid);
    let bounds = rep_bounds(cfg, plan.warmup as u64, plan.repeat as u64);
    let half = cfg.interval_ns / 2;
    // Repetition boundaries for the loads and kernel counters are marked
    // halfway between two broadcasts, so reading them delays no broadcast
    // unless it takes longer than half the interval.
    let mark = |rep: usize, next: u64| {
        if ctx.marks_repetitions() {
            sleep_until(next - half);
            if rep > 0 {
                ctx.rep_ends(rep as u64 - 1);
            }
            if rep + 1 < bounds.len() {
                ctx.rep_starts(rep as u64);
            }
        }
    };
    let r = (|| {
        let mut next = now_ns() + cfg.interval_ns;
        let mut rep = 0;
        for seq in 1..=total {
            if bounds.get(rep) == Some(&seq) {
                mark(rep, next);
                rep += 1;
            }
            sleep_until(next);
            bell.lock();
            bell.stamps[seq as usize].store(now_ns(), Ordering::Relaxed);
            // SAFETY: mutex held; initialised condvar.
            unsafe {
                *bell.seq.get() = seq;
                libc::pthread_cond_broadcast(bell.cond.get());
            }
            bell.unlock();
            next += cfg.interval_ns;
            if seq & 15 == 0 {
                ctx.check(now_ns())?;
                ctx.set_done(seq);
            }
        }
        mark(rep, next);
        // Give the last wake-ups time to land before quitting.
        sleep_until(next);
        Ok(())
    })();
    ctx.unwatch(tid);
    let _ = condition::demote(0);
    r.map(|_| applied)
}
