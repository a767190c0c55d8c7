//! # Methodology
//!
//! **Goal.** E5's "thread execution time": N threads at RT priority each copy
//! a 2 MB buffer, all started together; for each N report the best, average
//! and worst thread time. E5 saw the worst exceed the average by 50 ms or
//! more on a non-RT kernel; `worst_over_average` is that ratio.
//!
//! **Tasks.** N worker threads under the run's condition, or SCHED_FIFO 50
//! when no `--policy/--prio/--nice` is given (`--cpus` restricts them; not
//! pinned individually, so the scheduler places them). Each allocates its
//! own source and destination buffers of `size` KiB and writes every page
//! before the clock starts (pre-faulted; `--mlock` also locks them).
//!
//! **Timed.** Each repetition: all threads wait at a barrier; once released,
//! each takes `CLOCK_MONOTONIC`, copies source to destination `copies` times
//! (`copy_from_slice`, i.e. memcpy), and takes the clock again. Thread time
//! = its own end - its own start. The deadline and stop flag are checked
//! after every copy, so every RT loop is bounded.
//!
//! **Sweep.** `threads=0` (default) expands into one case per N in 1, 2, 4,
//! ... up to 4 x the usable CPUs (the last point is exactly 4 x CPUs).
//!
//! **Safety.** N busy RT threads >= CPUs with RT throttling off
//! (`sched_rt_runtime_us` = -1) would starve the machine: refused unless
//! `--force`. With throttling on, RT threads get at most runtime/period of
//! each CPU; when a repetition's RT work could have hit that limit (N >=
//! CPUs and a thread ran longer than the runtime), the result says so.
//!
//! **Metrics.** `thread_time` (histogram of every thread's time, ns,
//! headline), `best`, `average`, `worst` (ns, per repetition) and
//! `worst_over_average` (ratio per repetition, headline).

use crate::error::LiveError;
use crate::harness::{self, now_ns, Ctx};
use crate::params::{ParamKind, ParamSpec, Params};
use crate::{condition, load, Benchmark, RunPlan};
use schedlab_core::{BenchResult, Direction, LatencyHistogram, Metric, SchedCondition, SchedPolicy, Unit};
use std::sync::Barrier;

pub struct ExecTime;

const NAME: &str = "exectime";

const SPECS: &[ParamSpec] = &[
    ParamSpec {
        name: "threads",
        default: "0",
        quick_default: None,
        unit: "threads",
        help: "threads started together; 0 sweeps 1, 2, 4, ... up to 4 x CPUs (one case each)",
        kind: ParamKind::Count { min: 0, max: 4_096 },
    },
    ParamSpec {
        name: "size",
        default: "2048",
        quick_default: None,
        unit: "KiB",
        help: "buffer copied by each thread (E5: 2 MB)",
        kind: ParamKind::Count { min: 4, max: 1_048_576 },
    },
    ParamSpec {
        name: "copies",
        default: "50",
        quick_default: Some("10"),
        unit: "copies",
        help: "times each thread copies its buffer per repetition",
        kind: ParamKind::Count { min: 1, max: 1_000_000 },
    },
];

fn default_condition() -> SchedCondition {
    SchedCondition { policy: SchedPolicy::Fifo, priority: Some(50), ..Default::default() }
}

fn sweep(cpus: usize) -> Vec<u64> {
    let max = 4 * cpus as u64;
    let mut v = Vec::new();
    let mut n = 1;
    while n < max {
        v.push(n);
        n *= 2;
    }
    v.push(max);
    v
}

fn rt_runtime_us() -> Option<i64> {
    std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").ok()?.trim().parse().ok()
}

impl Benchmark for ExecTime {
    fn name(&self) -> &'static str {
        NAME
    }

    fn summary(&self) -> &'static str {
        "E5: N RT threads copy a 2 MB buffer together; best, average and worst thread time per N"
    }

    fn params(&self) -> &'static [ParamSpec] {
        SPECS
    }

    fn cases(&self, params: &Params, plan: &RunPlan) -> Result<Vec<Params>, LiveError> {
        let p = params.resolve(NAME, SPECS, plan.quick)?;
        let plan = plan.with_condition(plan.condition_or(&default_condition()));
        plan.refuse_deadline(NAME)?;
        let usable = condition::preflight(&plan.condition)?;
        let ns = match p.count("threads")? {
            0 => sweep(usable.len()),
            n => vec![n],
        };
        let size = p.count("size")? * 1024;
        let mem_kb = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        });
        let mut cases = Vec::new();
        for n in ns {
            let (room, name) = load::task_room();
            if n > room {
                return Err(LiveError::TooManyTasks {
                    what: format!("exectime threads={n}"),
                    tasks: n,
                    limit: room,
                    limit_name: name,
                    fix: "lower threads=",
                });
            }
            if let Some(kb) = mem_kb {
                if n * 2 * size / 1024 > kb / 2 {
                    return Err(LiveError::TooManyTasks {
                        what: format!("exectime threads={n} size={} KiB (two buffers each)", size / 1024),
                        tasks: n,
                        limit: kb / 2 * 1024 / (2 * size),
                        limit_name: "half of MemAvailable".into(),
                        fix: "lower threads= or size=",
                    });
                }
            }
            let busy = if plan.condition.policy.is_realtime() { n } else { 0 };
            load::check(&plan.loads, busy, plan.force)?;
            load::check_starvation(&format!("exectime threads={n}"), busy, usable.len(), plan.force)?;
            let mut c = p.clone();
            c.set("threads", n);
            cases.push(c);
        }
        Ok(cases)
    }

    fn estimate_s(&self, case: &Params, plan: &RunPlan) -> f64 {
        let Ok(p) = case.resolve(NAME, SPECS, plan.quick) else { return 1.0 };
        let n = p.count("threads").unwrap_or(1).max(1) as f64;
        let bytes = (p.count("size").unwrap_or(2048) * 1024 * p.count("copies").unwrap_or(1)) as f64;
        // ~5 GB/s per copy stream, CPUs shared; 2 CPUs assumed for estimates.
        (plan.repeat + plan.warmup) as f64 * (n * bytes / 5e9 / 2.0 + 0.002 * n)
    }

    fn run(&self, case: &Params, plan: &RunPlan, progress: &dyn Fn(f64)) -> Result<BenchResult, LiveError> {
        let started = harness::unix_ms();
        let p = case.resolve(NAME, SPECS, plan.quick)?;
        let n = p.count("threads")?;
        if n == 0 {
            return Err(LiveError::BadParam {
                bench: NAME,
                key: "threads".into(),
                value: "0".into(),
                expected: "a thread count for a single case (cases() expands the sweep)".into(),
            });
        }
        let p = self.cases(&p, plan)?.remove(0);
        let plan = &plan.with_condition(plan.condition_or(&default_condition()));
        let usable = condition::preflight(&plan.condition)?;
        let size = (p.count("size")? * 1024) as usize;
        let copies = p.count("copies")?;
        let est = self.estimate_s(&p, plan);
        let total = (plan.warmup + plan.repeat) as u64;
        let (m, loads) =
            harness::drive(NAME, plan, est, total, progress, |ctx| measure(ctx, plan, n as usize, size, copies))?;
        let mut warnings = Vec::new();
        let applied = harness::merge_applied(&m.applied, plan.condition.mlock, &mut warnings);
        let (mut best, mut avg, mut worst, mut ratio, mut hists) = (vec![], vec![], vec![], vec![], vec![]);
        let mut longest = 0u64;
        for rep in &m.times {
            let mut h = LatencyHistogram::new();
            rep.iter().for_each(|t| h.record(*t));
            hists.push(h);
            let b = *rep.iter().min().unwrap_or(&0) as f64;
            let w = *rep.iter().max().unwrap_or(&0) as f64;
            let a = rep.iter().sum::<u64>() as f64 / rep.len().max(1) as f64;
            longest = longest.max(w as u64);
            best.push(b);
            avg.push(a);
            worst.push(w);
            ratio.push(if a > 0.0 { w / a } else { f64::NAN });
        }
        if plan.condition.policy.is_realtime() && n as usize >= usable.len() {
            if let Some(rt) = rt_runtime_us().filter(|r| *r >= 0) {
                if longest / 1000 > rt as u64 {
                    warnings.push(format!(
                        "RT throttling may have cut in: {n} RT threads on {} CPU(s) and a thread ran {:.0} ms, more than sched_rt_runtime_us ({} ms per period): its time includes throttled periods",
                        usable.len(),
                        longest as f64 / 1e6,
                        rt / 1000
                    ));
                }
            }
        }
        let mut r = harness::result(NAME, &p, SPECS, plan, applied, started, &loads);
        r.metrics = vec![
            Metric::histogram_per_repetition("thread_time", Direction::LowerIsBetter, hists).headline(),
            Metric::samples("best", Unit::Nanoseconds, Direction::LowerIsBetter, best),
            Metric::samples("average", Unit::Nanoseconds, Direction::LowerIsBetter, avg),
            Metric::samples("worst", Unit::Nanoseconds, Direction::LowerIsBetter, worst),
            Metric::samples("worst_over_average", Unit::Ratio, Direction::LowerIsBetter, ratio).headline(),
        ];
        r.metrics.extend(loads.metrics);
        r.warnings.extend(warnings);
        Ok(r)
    }
}

struct Measured {
    /// [rep] -> thread times (ns)
    times: Vec<Vec<u64>>,
    applied: Vec<SchedCondition>,
}

fn measure(ctx: &Ctx, plan: &RunPlan, n: usize, size: usize, copies: u64) -> Result<Measured, LiveError> {
    let barrier = Barrier::new(n);
    let reps = plan.warmup + plan.repeat;
    let outs: Vec<Result<(Vec<u64>, SchedCondition), LiveError>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..n)
            .map(|i| {
                let barrier = &barrier;
                std::thread::Builder::new()
                    .name(format!("schedlab-exec{i}"))
                    .spawn_scoped(s, move || copier(ctx, barrier, size, copies, reps, i == 0))
            })
            .collect();
        hs.into_iter()
            .map(|h| match h {
                Ok(h) => h.join().unwrap_or_else(|_| {
                    Err(LiveError::Measurement { bench: NAME, detail: "a copier panicked".into() })
                }),
                Err(e) => Err(LiveError::Os {
                    what: "spawning a copier",
                    detail: e.to_string(),
                    hint: "lower threads= or check ulimit -u",
                }),
            })
            .collect()
    });
    let mut times = vec![Vec::with_capacity(n); plan.repeat as usize];
    let mut applied = Vec::new();
    for o in outs {
        let (t, a) = o?;
        for (rep, v) in t.into_iter().enumerate().skip(plan.warmup as usize) {
            times[rep - plan.warmup as usize].push(v);
        }
        applied.push(a);
    }
    Ok(Measured { times, applied })
}

/// One copier thread. Spawning a thread cannot fail partway here in a way
/// that leaves the others waiting: every copier reaches the barrier once per
/// repetition, also after an error (it then skips the copying).
fn copier(
    ctx: &Ctx,
    barrier: &Barrier,
    size: usize,
    copies: u64,
    reps: u32,
    first: bool,
) -> Result<(Vec<u64>, SchedCondition), LiveError> {
    let setup = condition::apply(0, ctx.cond, None).and_then(|_| condition::read_back(0));
    let tid = condition::gettid();
    if setup.is_ok() {
        ctx.watch(tid);
    }
    // Pre-fault both buffers before any clock starts.
    let src = vec![0x5au8; size];
    let mut dst = vec![0xa5u8; size];
    let mut times = Vec::with_capacity(reps as usize);
    let mut err: Option<LiveError> =
        setup.as_ref().err().map(|e| LiveError::Measurement { bench: NAME, detail: e.to_string() });
    for rep in 0..reps {
        barrier.wait();
        if err.is_some() {
            continue;
        }
        let t0 = now_ns();
        for _ in 0..copies {
            dst.copy_from_slice(&src);
            std::hint::black_box(&mut dst);
            if let Err(e) = ctx.check(now_ns()) {
                err = Some(e);
                break;
            }
        }
        times.push(now_ns() - t0);
        if first {
            ctx.set_done(rep as u64 + 1);
        }
    }
    ctx.unwatch(tid);
    let _ = condition::demote(0);
    if let Err(e) = setup {
        return Err(e);
    }
    if let Some(e) = err {
        return Err(e);
    }
    Ok((times, setup.expect("checked")))
}
