//! # Methodology
//!
//! **Goal.** Process creation cost: E1's "process creation" (BYTE/UnixBench
//! `spawn`): fork a child that exits at once, wait for it, repeat.
//!
//! **Where.** fork() cost grows with the forking process's memory map (page
//! tables and VMAs are copied, then torn down at the child's exit): a C fork
//! loop loses ~20 % with just one idle extra thread. So the loop runs in a
//! *runner*: the harness re-executes its own binary, a constructor takes over
//! before `main` (see `runner.rs`), and the loop runs in a fresh,
//! single-threaded image about as small as a C program. The harness applies
//! the condition to the runner by pid; the children inherit policy,
//! priority, nice and affinity through fork. If the binary cannot host a
//! runner, a forked copy of the harness runs the loop and the result warns.
//!
//! **Timed.** Each iteration is `fork()` (glibc, as a C program would call
//! it) → child `_exit(0)` → parent `waitpid(pid)`. One
//! `clock_gettime(CLOCK_MONOTONIC)` per iteration, after the reap; the
//! difference of consecutive stamps is one creation latency ("fork → reaped",
//! plus the loop's few ns). Rate = processes / (last stamp - first stamp).
//! Latencies stream to the harness in 32 KiB batches (one write(2) per 4096
//! processes), so the runner keeps no histogram pages that each fork would copy.
//!
//! **Children.** They live for one `_exit` only and are reaped in the same
//! iteration, so they get no PDEATHSIG or process group of their own (that
//! would add system calls to what is measured): at most one is in flight, it
//! is in the runner's process group, and the runner reaps it before checking
//! the stop word (every 64 processes). The runner itself has PDEATHSIG and is
//! killed and reaped by the harness's guard on any error.
//!
//! **Warm-up.** `warmup` repetitions are run and discarded.
//!
//! **Metrics.** `processes_per_s` (one sample per repetition, headline);
//! `spawn_latency` (histogram of every measured fork → reaped, ns).
//!
//! **Known biases.** The runner image is a Rust binary: a little more
//! relocated data than a C program (see `bench/spawn-vs-c.sh`). Whether the child or the parent runs first
//! after fork, and on which CPU, is the scheduler's choice and part of what is
//! measured. SCHED_DEADLINE tasks cannot fork, so that policy is refused.

use crate::error::LiveError;
use crate::harness::condition;
use crate::harness::params::{ParamKind, ParamSpec, Params};
use crate::harness::runner::{RunnerEntry, Sink};
use crate::harness::{self, now_ns, Ctx};
use crate::{Benchmark, RunPlan};
use schedlab_core::{BenchResult, Direction, LatencyHistogram, Metric, Unit};

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
    diagnostic: false,
}];

impl Benchmark for Spawn {
    fn runner(&self) -> Option<RunnerEntry> {
        Some(RunnerEntry {
            comm: c"schedlab-spawn",
            prepare: None,
            body: |ctx, args, _, sink| runner_body(ctx, args, sink),
        })
    }

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
        plan.refuse_deadline(NAME)?;
        condition::preflight(&plan.condition)?;
        // One latency histogram per repetition, the one being filled and the merged one.
        crate::harness::load::check_memory(
            &format!("spawn with --repeat {} (histograms)", plan.repeat),
            crate::harness::load::histograms_bytes(plan.repeat as u64 + 2),
            "lower --repeat",
        )?;
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
        let ((rates, reps, applied, mut warnings), loads) =
            harness::drive(NAME, plan, est, total, progress, |ctx| measure(ctx, plan, count))?;
        let applied = harness::merge_applied(&applied, plan.condition.mlock, &mut warnings);
        let metrics = vec![
            Metric::samples("processes_per_s", Unit::PerSecond, Direction::HigherIsBetter, rates).headline(),
            Metric::histogram_per_repetition("spawn_latency", Direction::LowerIsBetter, reps).headline(),
        ];
        let mut r = harness::result(NAME, &p, SPECS, plan, applied, started, &loads);
        r.metrics = metrics;
        r.metrics.extend(loads.metrics);
        r.warnings.extend(warnings);
        Ok(r)
    }
}

type Measured = (Vec<f64>, Vec<LatencyHistogram>, Vec<schedlab_core::SchedCondition>, Vec<String>);

/// The loop runs in an exec'd runner (a fresh, minimal process image: see
/// `runner.rs`); if this binary cannot host one, in a forked runner, with a
/// warning, because then fork pays for the harness's memory map.
fn measure(ctx: &Ctx, plan: &RunPlan, count: u64) -> Result<Measured, LiveError> {
    let args = [count.to_string(), plan.repeat.to_string(), plan.warmup.to_string()];
    let out = crate::harness::runner::run(ctx, NAME, &args, &[None])?;
    let mut warnings = Vec::new();
    if !out.exec {
        warnings.push(
            "spawn ran in a forked runner: this binary could not re-execute itself as a runner, so each fork also copies the harness's memory map (measured ~20 % slower than a minimal process)".into(),
        );
    }
    out.check_complete(NAME, plan.repeat)?;
    let rates = out.elapsed.iter().map(|ns| count as f64 * 1e9 / *ns as f64).collect();
    Ok((rates, out.reps, out.applied, warnings))
}

/// The measurement inside a runner: args = [count, repeat, warmup].
pub(crate) fn runner_body<S: AsRef<str>>(ctx: &Ctx, args: &[S], sink: &mut Sink) -> Result<(), LiveError> {
    let n = |i: usize| args.get(i).and_then(|s| s.as_ref().parse::<u64>().ok());
    let (Some(count), Some(repeat), Some(warmup)) = (n(0), n(1), n(2)) else {
        return Err(LiveError::Measurement { bench: NAME, detail: "bad runner arguments".into() });
    };
    for rep in 0..warmup + repeat {
        sink.discard = rep < warmup;
        ctx.rep_starts(rep);
        let elapsed = spawn_loop(ctx, count, sink, rep * count)?;
        ctx.rep_ends(rep);
        if !sink.discard {
            sink.end_rep(elapsed)?;
        }
    }
    Ok(())
}

#[inline(never)]
fn spawn_loop(ctx: &Ctx, count: u64, sink: &mut Sink, done_base: u64) -> Result<u64, LiveError> {
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
        let status = crate::harness::hygiene::wait_pid(pid)?;
        if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
            return Err(LiveError::Measurement {
                bench: NAME,
                detail: format!("child {pid} did not exit cleanly (status {status:#x})"),
            });
        }
        let now = now_ns();
        sink.latency(now - start)?;
        prev = now;
        if i & 63 == 63 {
            ctx.check(now)?;
            ctx.set_done(done_base + i + 1);
        }
    }
    Ok(prev - t0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forked_fallback_runner_streams_the_same_data() {
        let plan = RunPlan { repeat: 2, warmup: 1, ..Default::default() };
        let out = harness::drive(NAME, &plan, 1.0, 90, &|_| {}, |ctx| {
            crate::harness::runner::start(ctx, NAME, &["30".into(), "2".into(), "1".into()], &[None], false)
        })
        .unwrap()
        .0
        .expect("a forked runner always starts");
        assert!(!out.exec);
        assert_eq!(out.elapsed.len(), 2);
        assert!(out.elapsed.iter().all(|ns| *ns > 0));
        assert_eq!(out.reps.iter().map(|h| h.count()).sum::<u64>(), 60, "warm-up latencies must not be sent");
        assert_eq!(out.applied.len(), 1, "spawn's runner has no helpers");
        assert_eq!(out.applied[0].policy, schedlab_core::SchedPolicy::Other);
    }
}
