//! # Methodology
//!
//! **Goal.** Process creation cost: E1's "process creation" (BYTE/UnixBench
//! `spawn`): fork a child that exits at once, wait for it, repeat.
//!
//! **Timed.** On a dedicated worker thread that carries the condition (the
//! children inherit policy, priority, nice and affinity through fork), each
//! iteration is `fork()` (glibc, as a C program would call it) → child
//! `_exit(0)` → parent `waitpid(pid)`. One `clock_gettime(CLOCK_MONOTONIC)`
//! per iteration, after the reap; the difference of consecutive stamps is one
//! creation latency ("fork → reaped", plus the loop's few ns). Rate =
//! processes / (last stamp - first stamp).
//!
//! **Children.** They live for one `_exit` only and are reaped in the same
//! iteration, so they get no PDEATHSIG or process group (that would add two
//! system calls to what is measured): at most one is in flight, and the
//! parent reaps it before checking the stop flag (every 64 processes).
//!
//! **Warm-up.** `warmup` repetitions are run and discarded.
//!
//! **Metrics.** `processes_per_s` (one sample per repetition, headline);
//! `spawn_latency` (histogram of every measured fork → reaped, ns).
//!
//! **Known biases.** fork cost grows with the parent's mapped memory (page
//! tables are copied): schedlab's process is larger than a minimal C loop
//! (see `bench/spawn-vs-c.sh`). Whether the child or the parent runs first
//! after fork, and on which CPU, is the scheduler's choice and part of what is
//! measured. SCHED_DEADLINE tasks cannot fork, so that policy is refused.

use crate::condition;
use crate::error::LiveError;
use crate::harness::{self, now_ns, Ctx};
use crate::params::{ParamKind, ParamSpec, Params};
use crate::{Benchmark, RunPlan};
use schedlab_core::{BenchResult, Direction, LatencyHistogram, Metric, SchedPolicy, Unit};

pub struct Spawn;

const NAME: &str = "spawn";
const NOMINAL_S: f64 = 150e-6;

const SPECS: &[ParamSpec] = &[ParamSpec {
    name: "count",
    default: "10000",
    quick_default: Some("1000"),
    unit: "processes",
    help: "processes created (fork, _exit, waitpid) per repetition",
    kind: ParamKind::Count { min: 1, max: 1_000_000_000 },
}];

impl Benchmark for Spawn {
    fn name(&self) -> &'static str {
        NAME
    }

    fn summary(&self) -> &'static str {
        "fork + _exit + waitpid loop: processes created per second and fork-to-reaped latency"
    }

    fn params(&self) -> &'static [ParamSpec] {
        SPECS
    }

    fn cases(&self, params: &Params, plan: &RunPlan) -> Result<Vec<Params>, LiveError> {
        let p = params.resolve(NAME, SPECS, plan.quick)?;
        if plan.condition.policy == SchedPolicy::Deadline {
            return Err(LiveError::DeadlineCannotFork { bench: NAME });
        }
        condition::preflight(&plan.condition)?;
        Ok(vec![p])
    }

    fn estimate_s(&self, case: &Params, plan: &RunPlan) -> f64 {
        let n = case.resolve(NAME, SPECS, plan.quick).and_then(|p| p.count("count")).unwrap_or(0);
        n as f64 * (plan.repeat + plan.warmup) as f64 * NOMINAL_S
    }

    fn run(&self, case: &Params, plan: &RunPlan, progress: &dyn Fn(f64)) -> Result<BenchResult, LiveError> {
        let started = harness::unix_ms();
        let p = self.cases(case, plan)?.remove(0);
        let count = p.count("count")?;
        let est = self.estimate_s(&p, plan);
        let total = count * (plan.repeat + plan.warmup) as u64;
        let (rates, hist, applied) = harness::drive(NAME, plan, est, total, progress, |ctx| measure(ctx, plan, count))?;
        let mut warnings = Vec::new();
        let applied = harness::merge_applied(&[applied], plan.condition.mlock, &mut warnings);
        let metrics = vec![
            Metric::samples("processes_per_s", Unit::PerSecond, Direction::HigherIsBetter, rates).headline(),
            Metric::histogram("spawn_latency", Direction::LowerIsBetter, hist),
        ];
        let mut r = harness::result(NAME, &p, SPECS, plan, applied, started);
        r.metrics = metrics;
        r.warnings.extend(warnings);
        Ok(r)
    }
}

type Measured = (Vec<f64>, LatencyHistogram, schedlab_core::SchedCondition);

fn measure(ctx: &Ctx, plan: &RunPlan, count: u64) -> Result<Measured, LiveError> {
    condition::apply(0, ctx.cond, None)?;
    let applied = condition::read_back(0)?;
    let tid = condition::gettid();
    ctx.watch(tid);
    let r = repetitions(ctx, plan, count);
    ctx.unwatch(tid);
    let _ = condition::demote(0);
    let (rates, hist) = r?;
    Ok((rates, hist, applied))
}

fn repetitions(ctx: &Ctx, plan: &RunPlan, count: u64) -> Result<(Vec<f64>, LatencyHistogram), LiveError> {
    let mut hist = LatencyHistogram::new();
    let mut scratch = LatencyHistogram::new();
    let mut rates = Vec::new();
    for rep in 0..(plan.warmup + plan.repeat) as u64 {
        let measured = rep >= plan.warmup as u64;
        let h = if measured { &mut hist } else { &mut scratch };
        let elapsed = spawn_loop(ctx, count, h, rep * count)?;
        if elapsed == 0 {
            return Err(LiveError::Measurement { bench: NAME, detail: "zero elapsed time (clock broken?)".into() });
        }
        if measured {
            rates.push(count as f64 * 1e9 / elapsed as f64);
        }
    }
    Ok((rates, hist))
}

#[inline(never)]
fn spawn_loop(ctx: &Ctx, count: u64, hist: &mut LatencyHistogram, done_base: u64) -> Result<u64, LiveError> {
    let t0 = now_ns();
    let mut prev = t0;
    for i in 0..count {
        let start = prev;
        // SAFETY: the child only calls _exit, which is async-signal-safe.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: _exit never returns and runs no destructors of the parent's state.
            unsafe { libc::_exit(0) };
        }
        if pid < 0 {
            return Err(LiveError::last_os("fork", "too many processes? check ulimit -u and kernel.pid_max"));
        }
        let status = crate::hygiene::wait_pid(pid)?;
        if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
            return Err(LiveError::Measurement {
                bench: NAME,
                detail: format!("child {pid} did not exit cleanly (status {status:#x})"),
            });
        }
        let now = now_ns();
        hist.record(now - start);
        prev = now;
        if i & 63 == 63 {
            ctx.check(now)?;
            ctx.set_done(done_base + i + 1);
        }
    }
    Ok(prev - t0)
}
