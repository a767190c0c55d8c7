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
//! broadcast, unlock (the time from the stamp until the broadcast call
//! returned is kept too). A waiter stamps when it holds the mutex again
//! (waiters of one broadcast serialise on it, as in E3) and records that
//! minus the stamp of the first broadcast it had not seen. A waiter
//! that slept through broadcasts counts them as `missed` (its latency is
//! still charged from the first one it missed). Samples go to a vector
//! preallocated per waiter; histograms are built afterwards.
//!
//! **sync=** picks the wait. `condvar` (default; E3 used
//! `pthread_cond_broadcast`): glibc's `pthread_cond_wait`/`_broadcast`
//! with a default mutex. `pi`: the same with a PTHREAD_PRIO_INHERIT mutex,
//! so a normal waiter preempted while it holds the mutex runs at the
//! priority of the RT waiter it blocks. Neither shows where the time went:
//! `pthread_cond_wait` returns with the mutex re-taken, and glibc's
//! broadcast itself can block (with the mutex held, after the stamp) until
//! woken waiters of an earlier broadcast have left the condvar, which a
//! starved normal waiter makes the RT waker wait for. `split` and
//! `split-pi` write the condition variable out on a futex word (unlock,
//! FUTEX_WAIT, re-lock; the broadcast is one FUTEX_WAKE of all waiters, as
//! glibc's is, without its group switch), so a waiter stamps its *wake-up*
//! (back from the kernel's wait) apart from the mutex *hand-over*. `futex`:
//! no mutex; a waiter stamps when FUTEX_WAIT returns, so the latency is
//! the scheduler's alone. At its default `sync` is left out of the
//! result's parameters: old runs keep their identity.
//!
//! **Load.** Without `--load`, the full benchmark runs under `hackbench:10`
//! (E3's background load); `--quick` runs without load; `--load none`
//! forces none. With a load, the waker marks each repetition's start and
//! end for the load's throughput halfway between two broadcasts (one extra
//! absolute sleep per repetition), so reading the load counters never
//! delays a wake-up.
//!
//! **Memory.** Raw latencies are kept until the end (the filter needs
//! them): ~96 bytes per waiter and broadcast plus ~24 bytes of stamp and
//! broadcast time per broadcast. A case that would not fit in half of MemAvailable is refused
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
//! `<class>.filtered_dropped` and `<class>.missed` (counts per repetition);
//! under `split*` its split: `<class>.wake_latency` (broadcast -> back from
//! the kernel's wait) and `<class>.handover_latency` (-> mutex re-taken),
//! histograms whose samples add up to `latency`'s; `broadcast_latency` (the
//! waker's stamp -> its broadcast call returned, one per broadcast).
//! A warning per class states the raw and filtered mean/max and the number
//! of samples dropped over all repetitions, another when the hand-over made
//! most of the mean latency, and one when glibc's broadcast blocked > 1 ms.

use crate::error::LiveError;
use crate::harness::ftrace::{BreakTrace, Tracing, BREAKTRACE_EVENTS};
use crate::harness::load::{self, LoadSpec};
use crate::harness::params::{ParamKind, ParamSpec, Params, TimeUnit};
use crate::harness::{self, now_ns, Ctx};
use crate::{harness::condition, Benchmark, RunPlan};
use schedlab_core::stats::{ksigma_samples, Summary};
use schedlab_core::{BenchResult, Direction, LatencyHistogram, Metric, SchedCondition, SchedPolicy, Unit};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
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
    ParamSpec {
        name: "sync",
        default: "condvar",
        quick_default: None,
        unit: "",
        help: "how waiters wait: condvar (E3: pthread_cond_broadcast; each waiter re-takes the mutex), pi (the same with a priority-inheritance mutex), futex (a bare futex wake, no mutex), split and split-pi (condvar and pi written out on a futex, to time the wake-up and the mutex hand-over apart)",
        kind: ParamKind::Choice(&["condvar", "pi", "futex", "split", "split-pi"]),
        // At its default it stays out of the result's identity, so runs made
        // before it existed still compare.
        diagnostic: true,
    },
];

/// How the waiters wait (`sync=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SyncMode {
    /// glibc's condition variable with a default mutex (E3).
    Condvar,
    /// glibc's condition variable with a PTHREAD_PRIO_INHERIT mutex.
    Pi,
    /// FUTEX_WAKE on the sequence's word; no mutex.
    Futex,
    /// A condition variable written out on the futex, default mutex.
    Split,
    /// The same with a PTHREAD_PRIO_INHERIT mutex.
    SplitPi,
}

impl SyncMode {
    fn of(p: &Params) -> Result<SyncMode, LiveError> {
        Ok(match p.word("sync")? {
            "pi" => SyncMode::Pi,
            "futex" => SyncMode::Futex,
            "split" => SyncMode::Split,
            "split-pi" => SyncMode::SplitPi,
            _ => SyncMode::Condvar,
        })
    }

    fn has_mutex(self) -> bool {
        self != SyncMode::Futex
    }

    fn pi(self) -> bool {
        matches!(self, SyncMode::Pi | SyncMode::SplitPi)
    }

    /// glibc's `pthread_cond_wait`/`pthread_cond_broadcast`.
    fn glibc(self) -> bool {
        matches!(self, SyncMode::Condvar | SyncMode::Pi)
    }

    /// Whether the wake-up and the mutex hand-over are stamped apart.
    fn split(self) -> bool {
        matches!(self, SyncMode::Split | SyncMode::SplitPi)
    }
}

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
        "E3's probe: an RT thread broadcasts a condvar to RT and non-RT waiters; wake-up latency per class, raw and 6-sigma filtered, split into wake-up and mutex hand-over"
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
        if SyncMode::of(&p)?.pi() {
            // Refuse before anything starts where PI futexes are missing.
            let b = Bell::new(SyncMode::Pi, 0);
            b.init()?;
            b.lock()?;
            b.unlock();
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
            sync: SyncMode::of(&p)?,
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
            // The split: wake-up (broadcast -> back from the kernel's wait)
            // and hand-over (-> mutex re-taken); under sync=futex there is
            // no mutex and the latency is the wake-up.
            let (mut wake_h, mut hand_h) = (Vec::new(), Vec::new());
            let (mut wake_sum, mut hand_sum) = (0u64, 0u64);
            for (lat, wake) in per_rep.iter().zip(&m.wake[ci]) {
                let (mut w, mut h) = (LatencyHistogram::new(), LatencyHistogram::new());
                for (&l, &x) in lat.iter().zip(wake) {
                    w.record(x);
                    h.record(l - x);
                    wake_sum += x;
                    hand_sum += l - x;
                }
                wake_h.push(w);
                hand_h.push(h);
            }
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
            if cfg.sync.split() {
                let lower = Direction::LowerIsBetter;
                r.metrics.push(Metric::histogram_per_repetition(&n("wake_latency"), lower, wake_h));
                r.metrics.push(Metric::histogram_per_repetition(&n("handover_latency"), lower, hand_h));
                // Say so when the lock, not the scheduler, made most of the delay.
                if hand_sum > wake_sum {
                    let (cnt, pct) = (all.len() as f64, 100.0 * hand_sum as f64 / (hand_sum + wake_sum).max(1) as f64);
                    warnings.push(format!(
                        "{}: the mutex hand-over made {pct:.0} % of the mean latency (wake-up {:.1} us, hand-over {:.1} us): woken waiters re-take the mutex one after another{}",
                        c.name,
                        wake_sum as f64 / cnt / 1e3,
                        hand_sum as f64 / cnt / 1e3,
                        if cfg.sync.pi() {
                            ""
                        } else {
                            "; sync=split-pi lends a preempted holder the waiter's priority, sync=futex measures the wake-up alone"
                        }
                    ));
                }
            }
        }
        let bh: Vec<LatencyHistogram> = m
            .broadcast
            .iter()
            .map(|v| {
                let mut h = LatencyHistogram::new();
                v.iter().for_each(|&x| h.record(x));
                h
            })
            .collect();
        let worst = m.broadcast.iter().flatten().max().copied().unwrap_or(0);
        if worst > 1_000_000 && cfg.sync.glibc() {
            warnings.push(format!(
                "the waker spent up to {:.1} ms in pthread_cond_broadcast, with the mutex held and the broadcast already stamped, so every waiter's latency includes it: glibc's broadcast can wait there for woken waiters of an earlier broadcast to leave the condvar (its group switch), so a starved normal waiter holds up the RT waker (sync=split and futex have no such wait)",
                worst as f64 / 1e6
            ));
        }
        r.metrics.push(Metric::histogram_per_repetition("broadcast_latency", Direction::LowerIsBetter, bh));
        r.metrics.extend(loads.metrics);
        r.warnings.extend(warnings);
        Ok(r)
    }
}

/// Bytes of raw data a case keeps: an 8-byte stamp and the waker's 8-byte
/// (twice: raw and per repetition) broadcast time per broadcast, and per
/// waiter and broadcast a 32-byte record while measuring plus ~64 bytes of
/// per-repetition samples (latency and wake-up), copies and sorts while
/// summarising.
fn raw_bytes(samples: u64, waiters: u64, plan: &RunPlan) -> u64 {
    let warm = (samples / 10).max(10);
    let broadcasts = warm.saturating_mul(plan.warmup as u64).saturating_add(samples.saturating_mul(plan.repeat as u64));
    broadcasts.saturating_mul(waiters.saturating_mul(96).saturating_add(24))
}

struct Cfg {
    samples: u64,
    warm: u64,
    interval_ns: u64,
    waiters: usize,
    sync: SyncMode,
}

/// What the waiters wait on, at a fixed address for the threads' lifetime:
/// glibc's condition variable (`condvar`, `pi`), or one written out on a
/// futex word (`split*`: unlock, FUTEX_WAIT, re-lock, so that the return
/// from the kernel's wait can be stamped before the mutex is re-taken), or
/// the bare futex word (`futex`).
struct Bell {
    mode: SyncMode,
    /// Unused under `sync=futex`; initialised in place by [`Bell::init`].
    mutex: UnsafeCell<libc::pthread_mutex_t>,
    /// Used under `condvar` and `pi` only.
    cond: UnsafeCell<libc::pthread_cond_t>,
    /// The futex word: bumped by every broadcast and by `close`.
    word: AtomicU32,
    /// Last broadcast's number (1-based); changed with the mutex held
    /// (when there is one), read under it by the waiters.
    seq: AtomicU64,
    quit: AtomicBool,
    /// Broadcast stamps by sequence number (1-based).
    stamps: Vec<AtomicU64>,
}

// SAFETY: the pthread mutex is designed for sharing between threads; the
// rest is atomics.
unsafe impl Sync for Bell {}

fn mutex_error(what: &'static str, rc: i32) -> LiveError {
    LiveError::Os {
        what,
        detail: std::io::Error::from_raw_os_error(rc).to_string(),
        hint:
            "this kernel or libc lacks priority-inheritance futexes (CONFIG_FUTEX_PI): use sync=condvar, split or futex",
    }
}

impl Bell {
    fn new(mode: SyncMode, total: u64) -> Bell {
        Bell {
            mode,
            mutex: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER),
            cond: UnsafeCell::new(libc::PTHREAD_COND_INITIALIZER),
            word: AtomicU32::new(0),
            seq: AtomicU64::new(0),
            quit: AtomicBool::new(false),
            stamps: (0..=total).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Give `sync=pi` its priority-inheritance mutex, in place (a pthread
    /// mutex must not move once initialised).
    fn init(&self) -> Result<(), LiveError> {
        if !self.mode.pi() {
            return Ok(());
        }
        let mut attr = std::mem::MaybeUninit::<libc::pthread_mutexattr_t>::uninit();
        // SAFETY: attr is initialised by pthread_mutexattr_init before use and
        // destroyed after; the mutex is at its final address and unused yet.
        unsafe {
            let rc = libc::pthread_mutexattr_init(attr.as_mut_ptr());
            if rc != 0 {
                return Err(mutex_error("initialising a mutex attribute (sync=pi)", rc));
            }
            let mut rc = libc::pthread_mutexattr_setprotocol(attr.as_mut_ptr(), libc::PTHREAD_PRIO_INHERIT);
            if rc == 0 {
                rc = libc::pthread_mutex_init(self.mutex.get(), attr.as_ptr());
            }
            libc::pthread_mutexattr_destroy(attr.as_mut_ptr());
            if rc != 0 {
                return Err(mutex_error("creating a priority-inheritance mutex (sync=pi)", rc));
            }
        }
        Ok(())
    }

    fn lock(&self) -> Result<(), LiveError> {
        if !self.mode.has_mutex() {
            return Ok(());
        }
        // SAFETY: an initialised mutex at a stable address.
        match unsafe { libc::pthread_mutex_lock(self.mutex.get()) } {
            0 => Ok(()),
            rc => Err(mutex_error("locking the wake-up mutex", rc)),
        }
    }

    fn unlock(&self) {
        if self.mode.has_mutex() {
            // SAFETY: as above, held by this thread.
            unsafe { libc::pthread_mutex_unlock(self.mutex.get()) };
        }
    }

    /// Wake every waiter sleeping on the word.
    fn wake_all(&self) {
        self.word.fetch_add(1, Ordering::SeqCst);
        // SAFETY: FUTEX_WAKE on an aligned u32 that outlives every waiter.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.word.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                i32::MAX,
                std::ptr::null::<libc::timespec>(),
                std::ptr::null::<u32>(),
                0u32,
            )
        };
    }

    /// Sleep while the word still reads `seen` (returns at once if it
    /// changed; EINTR and spurious returns are left to the caller's check).
    fn wait(&self, seen: u32) {
        // SAFETY: FUTEX_WAIT on an aligned u32; no timeout: close() always
        // bumps the word and wakes everybody.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                seen,
                std::ptr::null::<libc::timespec>(),
                std::ptr::null::<u32>(),
                0u32,
            )
        };
    }

    /// Wake the waiters: glibc's broadcast or the futex word's.
    fn wake_waiters(&self) {
        if self.mode.glibc() {
            // SAFETY: an initialised condvar; the mutex is held.
            unsafe { libc::pthread_cond_broadcast(self.cond.get()) };
        } else {
            self.wake_all();
        }
    }

    /// Publish broadcast `seq` (stamped now) and wake everybody. Returns
    /// the time from the stamp until the wake call returned: glibc's
    /// broadcast may block there (see the module's notes).
    fn broadcast(&self, seq: u64) -> Result<u64, LiveError> {
        self.lock()?;
        let stamp = now_ns();
        self.stamps[seq as usize].store(stamp, Ordering::SeqCst);
        self.seq.store(seq, Ordering::SeqCst);
        self.wake_waiters();
        let spent = now_ns().saturating_sub(stamp);
        self.unlock();
        Ok(spent)
    }

    /// Set quit and wake everybody (always called, also on errors).
    fn close(&self) {
        let locked = self.lock().is_ok();
        self.quit.store(true, Ordering::SeqCst);
        self.wake_waiters();
        self.wake_all();
        if locked {
            self.unlock();
        }
    }
}

impl Drop for Bell {
    fn drop(&mut self) {
        // SAFETY: no thread uses them any more (they are joined).
        unsafe {
            libc::pthread_cond_destroy(self.cond.get());
            libc::pthread_mutex_destroy(self.mutex.get());
        }
    }
}

struct Measured {
    /// [class][rep] -> latencies (ns)
    samples: Vec<Vec<Vec<u64>>>,
    /// [class][rep] -> the same samples' wake-up part (broadcast -> back
    /// from the kernel's wait), ns
    wake: Vec<Vec<Vec<u64>>>,
    /// [class][rep] -> missed broadcasts
    missed: Vec<Vec<u64>>,
    applied_waker: Vec<SchedCondition>,
    /// [rep] -> per broadcast, stamp -> the waker's wake call returned (ns)
    broadcast: Vec<Vec<u64>>,
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
    let bell = Bell::new(cfg.sync, total);
    bell.init()?;
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
            wake: cls.iter().map(|_| vec![Vec::new(); reps]).collect(),
            missed: cls.iter().map(|_| vec![0; reps]).collect(),
            applied_waker: Vec::new(),
            broadcast: vec![Vec::new(); reps],
        };
        let mut first_err = None;
        for (ci, h) in handles {
            match h.join() {
                Ok(Ok(out)) => {
                    for (seq, lat, wake, missed) in out {
                        if let Some(rep) = rep_of(seq) {
                            if rep < reps {
                                m.samples[ci][rep].push(lat);
                                m.wake[ci][rep].push(wake);
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
        let (applied, spent) = waker?;
        for (i, d) in spent.into_iter().enumerate() {
            if let Some(rep) = rep_of(i as u64 + 1).filter(|r| *r < reps) {
                m.broadcast[rep].push(d);
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        m.applied_waker.push(applied);
        Ok(m)
    });
    result
}

/// A waiter: condition, then wake-ups until quit. Returns (first unseen seq,
/// latency from its stamp, its wake-up part, broadcasts missed).
fn waiter(
    ctx: &Ctx,
    bell: &Bell,
    barrier: &Barrier,
    cond: &SchedCondition,
    total: u64,
    brk: Option<(&BreakTrace, u64)>,
) -> Result<Vec<(u64, u64, u64, u64)>, LiveError> {
    let setup = condition::apply(0, cond, None);
    set_slack();
    let tid = condition::gettid();
    if setup.is_ok() {
        ctx.watch(tid);
    }
    let mut out = Vec::with_capacity(total as usize + 1);
    barrier.wait();
    let r = setup.and_then(|_| wait_loop(bell, &mut out, tid, brk));
    ctx.unwatch(tid);
    let _ = condition::demote(0);
    r.map(|_| out)
}

/// The waiter's loop, as `pthread_cond_wait` in a `while` would run it:
/// check the sequence with the mutex held; unlock, futex-wait, re-lock.
fn wait_loop(
    bell: &Bell,
    out: &mut Vec<(u64, u64, u64, u64)>,
    tid: i32,
    brk: Option<(&BreakTrace, u64)>,
) -> Result<(), LiveError> {
    let mut last = 0u64;
    // When the last kernel wait returned, and when the mutex was re-taken.
    let mut woke_got: Option<(u64, u64)> = None;
    bell.lock()?;
    loop {
        // The word is read before the sequence: a broadcast after this read
        // bumps it, so the wait below returns at once.
        let seen = bell.word.load(Ordering::SeqCst);
        let seq = bell.seq.load(Ordering::SeqCst);
        if seq == last {
            if bell.quit.load(Ordering::SeqCst) {
                break;
            }
            if bell.mode.glibc() {
                // Returns with the mutex re-taken: one stamp.
                // SAFETY: initialised condvar and mutex, the mutex held.
                unsafe { libc::pthread_cond_wait(bell.cond.get(), bell.mutex.get()) };
                let t = now_ns();
                woke_got = Some((t, t));
                continue;
            }
            bell.unlock();
            bell.wait(seen);
            let woke = now_ns();
            bell.lock()?;
            let got = if bell.mode.has_mutex() { now_ns() } else { woke };
            woke_got = Some((woke, got));
            continue;
        }
        let first = last + 1;
        let stamp = bell.stamps[first as usize].load(Ordering::SeqCst);
        // Not woken by this broadcast (it came before the check, or the wait
        // returned early): seen, with the mutex held, now.
        let (woke, now) = woke_got.take().filter(|(w, _)| *w >= stamp).unwrap_or_else(|| {
            let t = now_ns();
            (t, t)
        });
        let lat = now.saturating_sub(stamp);
        out.push((first, lat, woke.saturating_sub(stamp).min(lat), seq - first));
        // Armed after the warm-up broadcasts only.
        if let Some((b, warm_total)) = brk {
            if lat > b.threshold_ns && first > warm_total {
                b.fire(tid, stamp, now);
            }
        }
        last = seq;
    }
    bell.unlock();
    Ok(())
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
) -> Result<(SchedCondition, Vec<u64>), LiveError> {
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
    // Per broadcast (index seq - 1): stamp -> wake call returned.
    let mut spent = Vec::with_capacity(total as usize);
    let r = (|| {
        let mut next = now_ns() + cfg.interval_ns;
        let mut rep = 0;
        for seq in 1..=total {
            if bounds.get(rep) == Some(&seq) {
                mark(rep, next);
                rep += 1;
            }
            sleep_until(next);
            spent.push(bell.broadcast(seq)?);
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
    r.map(|_| (applied, spent))
}
