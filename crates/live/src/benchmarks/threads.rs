//! # Methodology
//!
//! **Goal.** Thread creation and teardown cost with a bounded number alive:
//! E2's NPTL figure (100,000 threads created and destroyed with 50 alive at a
//! time, 2.3 s on a dual PII 450).
//!
//! **Timed.** A dedicated worker thread carries the condition (new threads
//! inherit policy, priority and affinity: glibc's default is
//! PTHREAD_INHERIT_SCHED). It keeps a ring of `alive` slots: while the ring is
//! full it joins the oldest thread, then creates a new one in its slot with
//! raw `pthread_create` (default attributes: 8 MiB stack from glibc's stack
//! cache) running an empty function. Stamps with `clock_gettime(CLOCK_MONOTONIC)`
//! before each `pthread_create`, after it returns, and after each join.
//! Total time = last join - first create.
//!
//! **Why raw pthreads.** `std::thread::spawn` adds an `Arc` packet, a name,
//! thread-local setup and a result slot per thread; it is what Rust programs
//! pay, but E2 measured NPTL itself, and raw pthreads are the cheaper, more
//! faithful floor (`cargo run --release -p schedlab-live --example thread_api`
//! prints the measured ratio; see docs/live.md).
//!
//! **Warm-up.** `warmup` repetitions are run and discarded (they also fill
//! glibc's stack cache).
//!
//! **Metrics.** `total_time` (s, one sample per repetition, headline, lower is
//! better); `threads_per_s`; `thread_lifetime` (create → joined, ns; with
//! `alive` > 1 it includes the creation of the threads started meanwhile, as
//! in E2's setup); `create_latency` (the `pthread_create` call alone, ns).
//!
//! **Known biases.** Threads that exit before they are joined stay counted as
//! "alive" until the join (that is E2's definition: created and not yet
//! destroyed). The stop flag is checked every 64 threads; on stop, every
//! outstanding thread is joined before returning. SCHED_DEADLINE tasks cannot
//! create threads, so that policy is refused.

use crate::error::LiveError;
use crate::harness::condition;
use crate::harness::params::{ParamKind, ParamSpec, Params};
use crate::harness::{self, now_ns, Ctx};
use crate::{Benchmark, RunPlan};
use schedlab_core::{BenchResult, Direction, LatencyHistogram, Metric, SchedCondition, Unit};
use std::collections::VecDeque;

pub struct Threads;

const NAME: &str = "threads";
const NOMINAL_S: f64 = 20e-6;

const SPECS: &[ParamSpec] = &[
    ParamSpec {
        name: "threads",
        default: "100000",
        quick_default: Some("10000"),
        unit: "threads",
        help: "threads created and joined per repetition (E2: 100,000)",
        kind: ParamKind::Count { min: 1, max: 1_000_000_000 },
        diagnostic: false,
    },
    ParamSpec {
        name: "alive",
        default: "50",
        quick_default: None,
        unit: "threads",
        help: "threads alive (created, not yet joined) at a time (E2: 50)",
        kind: ParamKind::Count { min: 1, max: 1_000_000 },
        diagnostic: false,
    },
];

impl Benchmark for Threads {
    fn name(&self) -> &'static str {
        NAME
    }

    fn summary(&self) -> &'static str {
        "create and join threads with a fixed number alive: total time, threads per second, lifetime latency"
    }

    fn params(&self) -> &'static [ParamSpec] {
        SPECS
    }

    fn cases(&self, params: &Params, plan: &RunPlan) -> Result<Vec<Params>, LiveError> {
        let p = params.resolve(NAME, SPECS, plan.quick)?;
        plan.refuse_deadline(NAME)?;
        check_alive(p.count("alive")?)?;
        condition::preflight(&plan.condition)?;
        // Two histograms per repetition (lifetime, create), the warm-up's and the merged ones.
        crate::harness::load::check_memory(
            &format!("threads with --repeat {} (histograms)", plan.repeat),
            crate::harness::load::histograms_bytes(2 * plan.repeat as u64 + 4),
            "lower --repeat",
        )?;
        Ok(vec![p])
    }

    fn estimate_s(&self, case: &Params, plan: &RunPlan) -> f64 {
        let n = case.resolve(NAME, SPECS, plan.quick).and_then(|p| p.count("threads")).unwrap_or(0);
        n as f64 * (plan.repeat + plan.warmup) as f64 * NOMINAL_S
    }

    fn run(&self, case: &Params, plan: &RunPlan, progress: &dyn Fn(f64)) -> Result<BenchResult, LiveError> {
        let started = harness::unix_ms();
        let p = self.cases(case, plan)?.remove(0);
        let n = p.count("threads")?;
        let alive = p.count("alive")? as usize;
        let est = self.estimate_s(&p, plan);
        let total = n * (plan.repeat + plan.warmup) as u64;
        let (m, loads) = harness::drive(NAME, plan, est, total, progress, |ctx| measure(ctx, plan, n, alive))?;
        let mut warnings = Vec::new();
        if plan.condition.mlock {
            warnings.push(
                "mlock: every new thread's stack is faulted in and locked (MCL_FUTURE), and that cost is measured too"
                    .into(),
            );
        }
        let applied = harness::merge_applied(&[m.applied], plan.condition.mlock, &mut warnings);
        let metrics = vec![
            Metric::samples("total_time", Unit::Seconds, Direction::LowerIsBetter, m.totals_s).headline(),
            Metric::samples("threads_per_s", Unit::PerSecond, Direction::HigherIsBetter, m.rates),
            Metric::histogram_per_repetition("thread_lifetime", Direction::LowerIsBetter, m.lifetime),
            Metric::histogram_per_repetition("create_latency", Direction::LowerIsBetter, m.create).headline(),
        ];
        let mut r = harness::result(NAME, &p, SPECS, plan, applied, started, &loads);
        r.metrics = metrics;
        r.metrics.extend(loads.metrics);
        r.warnings.extend(warnings);
        Ok(r)
    }
}

fn read_num(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// `alive` must fit under threads-max, RLIMIT_NPROC (unless root) and the
/// map count (each thread stack is two mappings: stack and guard page).
fn check_alive(alive: u64) -> Result<(), LiveError> {
    // Headroom for the harness's own threads and whatever else runs.
    const HEADROOM: u64 = 64;
    let mut limits: Vec<(u64, String)> = Vec::new();
    if let Some(max) = read_num("/proc/sys/kernel/threads-max") {
        limits.push((max, "kernel.threads-max".into()));
    }
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: r is a valid, writable rlimit; geteuid cannot fail.
    let (ok, root) = unsafe { (libc::getrlimit(libc::RLIMIT_NPROC, &mut r) == 0, libc::geteuid() == 0) };
    if ok && !root && r.rlim_cur != libc::RLIM_INFINITY {
        limits.push((r.rlim_cur, "RLIMIT_NPROC (ulimit -u), which counts all your processes and threads".into()));
    }
    if let Some(maps) = read_num("/proc/sys/vm/max_map_count") {
        limits.push((maps / 2, "vm.max_map_count / 2 (two mappings per thread stack)".into()));
    }
    for (limit, source) in limits {
        if alive + HEADROOM > limit {
            return Err(LiveError::TooManyThreads { alive, limit: limit.saturating_sub(HEADROOM), source_: source });
        }
    }
    Ok(())
}

struct Measured {
    totals_s: Vec<f64>,
    rates: Vec<f64>,
    lifetime: Vec<LatencyHistogram>,
    create: Vec<LatencyHistogram>,
    applied: SchedCondition,
}

fn measure(ctx: &Ctx, plan: &RunPlan, n: u64, alive: usize) -> Result<Measured, LiveError> {
    condition::apply(0, ctx.cond, None)?;
    let applied = condition::read_back(0)?;
    let tid = condition::gettid();
    ctx.watch(tid);
    let r = repetitions(ctx, plan, n, alive);
    ctx.unwatch(tid);
    let _ = condition::demote(0);
    let (totals_s, rates, lifetime, create) = r?;
    Ok(Measured { totals_s, rates, lifetime, create, applied })
}

type Reps = (Vec<f64>, Vec<f64>, Vec<LatencyHistogram>, Vec<LatencyHistogram>);

fn repetitions(ctx: &Ctx, plan: &RunPlan, n: u64, alive: usize) -> Result<Reps, LiveError> {
    let (mut lifetime, mut create) = (Vec::new(), Vec::new());
    let (mut scratch_l, mut scratch_c) = (LatencyHistogram::new(), LatencyHistogram::new());
    let (mut totals, mut rates) = (Vec::new(), Vec::new());
    for rep in 0..(plan.warmup + plan.repeat) as u64 {
        let measured = rep >= plan.warmup as u64;
        let (l, c) = if measured {
            lifetime.push(LatencyHistogram::new());
            create.push(LatencyHistogram::new());
            (lifetime.last_mut().expect("just pushed"), create.last_mut().expect("just pushed"))
        } else {
            (&mut scratch_l, &mut scratch_c)
        };
        ctx.rep_starts(rep);
        let elapsed = create_join_loop(ctx, n, alive, l, c, rep * n)?;
        ctx.rep_ends(rep);
        if elapsed == 0 {
            return Err(LiveError::Measurement { bench: NAME, detail: "zero elapsed time (clock broken?)".into() });
        }
        if measured {
            totals.push(elapsed as f64 / 1e9);
            rates.push(n as f64 * 1e9 / elapsed as f64);
        }
    }
    Ok((totals, rates, lifetime, create))
}

extern "C" fn empty_thread(_: *mut libc::c_void) -> *mut libc::c_void {
    std::ptr::null_mut()
}

/// Threads created and not yet joined, oldest first. Drop joins them all, so
/// no early return can leak a thread.
struct Ring {
    slots: VecDeque<(libc::pthread_t, u64)>,
}

impl Ring {
    fn join_oldest(&mut self) -> Option<u64> {
        let (t, started) = self.slots.pop_front()?;
        // SAFETY: t came from a successful pthread_create and is joined once.
        let rc = unsafe { libc::pthread_join(t, std::ptr::null_mut()) };
        (rc == 0).then_some(started)
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        while !self.slots.is_empty() {
            self.join_oldest();
        }
    }
}

#[inline(never)]
fn create_join_loop(
    ctx: &Ctx,
    n: u64,
    alive: usize,
    lifetime: &mut LatencyHistogram,
    create: &mut LatencyHistogram,
    done_base: u64,
) -> Result<u64, LiveError> {
    let mut ring = Ring { slots: VecDeque::with_capacity(alive) };
    let t0 = now_ns();
    let mut last = t0;
    for i in 0..n {
        if ring.slots.len() == alive {
            let started = ring.join_oldest().ok_or_else(join_failed)?;
            last = now_ns();
            lifetime.record(last - started);
        }
        let mut t: libc::pthread_t = 0;
        let before = now_ns();
        // SAFETY: t is writable; default attributes; empty_thread ignores its
        // argument and touches nothing.
        let rc = unsafe { libc::pthread_create(&mut t, std::ptr::null(), empty_thread, std::ptr::null_mut()) };
        let after = now_ns();
        if rc != 0 {
            return Err(LiveError::os(
                "pthread_create",
                rc,
                "too many threads? lower alive= or check ulimit -u / kernel.threads-max",
            ));
        }
        create.record(after - before);
        ring.slots.push_back((t, before));
        if i & 63 == 63 {
            ctx.check(after)?;
            ctx.set_done(done_base + i + 1);
        }
    }
    while let Some(started) = ring.join_oldest() {
        last = now_ns();
        lifetime.record(last - started);
    }
    if !ring.slots.is_empty() {
        return Err(join_failed());
    }
    Ok(last - t0)
}

fn join_failed() -> LiveError {
    LiveError::Measurement { bench: NAME, detail: "pthread_join failed".into() }
}
