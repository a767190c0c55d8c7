//! # Methodology
//!
//! **Goal.** CPU shares by nice: N CPU-bound processes, one per value of
//! `nice=` (`nice=0,5`), share `cpus=` CPUs (default 1), and each one's share
//! is set against what its weight entitles it to. The live twin of the
//! simulator's `hogs:nice=0,5` workload, under the same metric names, so
//! that `schedlab compare LIVE SIM` pairs them row by row.
//!
//! **Tasks and conditions.** The hogs are processes forked from the measuring
//! thread (harness `Children`: one process group, PDEATHSIG, SIGKILLed and
//! reaped on every exit path). Each blocks on a "go" pipe until the harness
//! has given it the run's condition with its own nice value and pinned it
//! to the first `cpus` CPUs of the usable set (`--cpus`, else this process's
//! affinity); then it spins on a counter, never blocking, until killed.
//! `nice=` sets each hog's nice (a `--nice` is not applied, and the result
//! says so). Under SCHED_OTHER or SCHED_BATCH the nice values set the
//! weights; under an RT policy the result is RT's (FIFO: the first hog holds
//! the CPU; RR: equal turns whatever the nice), refused while RT throttling
//! is off unless `--force`; SCHED_DEADLINE is refused (hogs are pinned).
//!
//! **Timed.** Each repetition lasts `duration`: the harness reads the clock
//! and every hog's own CPU time (its process CPU clock,
//! `clock_getcpuclockid`, ns) at the start and at the end, sleeping between.
//! Nothing in the hogs is timed; the reads cost a few microseconds per hog.
//!
//! **Warm-up.** `warmup` repetitions run first on the same hogs and are
//! discarded (the scheduler's lag and averages settle).
//!
//! **Metrics.** Over the measured repetitions pooled (the simulator's
//! definitions, per task `hogI.niceN`, entities): `cpu_share` (% of one CPU:
//! its CPU time over the wall time), `fair_share_error` (headline: % by which
//! its CPU time misses its fair share, the hogs' total CPU time split by
//! weight, water-filled so no hog is given more than one CPU); per
//! repetition `cpu_busy` (% of the `cpus` CPUs the hogs used together).
//! Weights are the kernel's `sched_prio_to_weight` (nice 0 = 1024).
//!
//! **Known biases.** The harness's threads (progress poller, the measuring
//! thread's wake-ups) and other tasks of the machine take a little of the
//! hogs' CPUs unless `--cpus` leaves them elsewhere; `cpu_busy` shows how
//! much. A hog's first slice after "go" depends on the order of wake-ups:
//! the warm-up repetition absorbs it.

use crate::error::LiveError;
use crate::harness::params::{ParamKind, ParamSpec, Params, TimeUnit};
use crate::harness::{self, condition, hygiene, load, now_ns, Ctx};
use crate::{Benchmark, RunPlan};
use schedlab_core::condition::format_cpu_list;
use schedlab_core::{BenchResult, Direction, Metric, SchedCondition, Unit};
use std::os::fd::AsRawFd;
use std::time::Duration;

pub struct Hogs;

const NAME: &str = "hogs";

const SPECS: &[ParamSpec] = &[
    ParamSpec {
        name: "nice",
        default: "0,5",
        quick_default: None,
        unit: "",
        help: "nice values, one hog each, e.g. 0,0,5,10 (as the simulator's hogs:nice=)",
        kind: ParamKind::IntList { min: -20, max: 19 },
        diagnostic: false,
    },
    ParamSpec {
        name: "cpus",
        default: "1",
        quick_default: None,
        unit: "CPUs",
        help: "CPUs the hogs share: the first N of --cpus (or of the CPUs this process may use)",
        kind: ParamKind::Count { min: 1, max: 4096 },
        diagnostic: false,
    },
    ParamSpec {
        name: "duration",
        default: "5s",
        quick_default: Some("1s"),
        unit: "",
        help: "wall time of each repetition",
        kind: ParamKind::Duration { unit: TimeUnit::Ms, min: 10, max: 3_600_000 },
        diagnostic: false,
    },
];

/// The kernel's `sched_prio_to_weight`, nice -20..=19.
const NICE_WEIGHTS: [u32; 40] = [
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904, 3906, 3121, 2501,
    1991, 1586, 1277, 1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
];

fn weight(nice: i32) -> f64 {
    NICE_WEIGHTS[(nice.clamp(-20, 19) + 20) as usize] as f64
}

fn nices(p: &Params) -> Result<Vec<i32>, LiveError> {
    let raw = p.word("nice")?;
    raw.split(',').map(|v| v.trim().parse::<i32>()).collect::<Result<Vec<_>, _>>().map_err(|_| LiveError::BadParam {
        bench: NAME,
        key: "nice".into(),
        value: raw.into(),
        expected: "whole numbers from -20 to 19 separated by commas".into(),
    })
}

/// The CPUs the hogs share: the first `cpus` usable ones.
fn hog_cpus(p: &Params, plan: &RunPlan) -> Result<Vec<usize>, LiveError> {
    let usable = condition::preflight(&plan.condition)?;
    let n = p.count("cpus")? as usize;
    if n > usable.len() {
        return Err(LiveError::BadParam {
            bench: NAME,
            key: "cpus".into(),
            value: n.to_string(),
            expected: format!(
                "at most {} (the usable CPUs: {}); allow more with --cpus",
                usable.len(),
                format_cpu_list(&usable)
            ),
        });
    }
    Ok(usable[..n].to_vec())
}

/// Water-filling: `total` split by weight, no task above its cap (the
/// simulator's `fair_shares`, so both sides mean the same by "fair").
fn fair_shares(total: f64, weights: &[f64], caps: &[f64]) -> Vec<f64> {
    let n = weights.len();
    let mut fixed: Vec<Option<f64>> = vec![None; n];
    loop {
        let rem_total = total - fixed.iter().flatten().sum::<f64>();
        let rem_w: f64 = (0..n).filter(|&i| fixed[i].is_none()).map(|i| weights[i]).sum();
        let share = |i: usize| if rem_w > 0.0 { rem_total * weights[i] / rem_w } else { 0.0 };
        let over: Vec<usize> = (0..n).filter(|&i| fixed[i].is_none() && share(i) > caps[i]).collect();
        if over.is_empty() {
            return (0..n).map(|i| fixed[i].unwrap_or_else(|| share(i))).collect();
        }
        for i in over {
            fixed[i] = Some(caps[i]);
        }
    }
}

/// Per hog: % of one CPU, and % off its fair share, from CPU and wall ns.
pub fn shares(nices: &[i32], cpu_ns: &[f64], wall_ns: f64) -> (Vec<f64>, Vec<f64>) {
    let total: f64 = cpu_ns.iter().sum();
    let weights: Vec<f64> = nices.iter().map(|&n| weight(n)).collect();
    let fair = fair_shares(total, &weights, &vec![wall_ns; nices.len()]);
    let pct = cpu_ns.iter().map(|c| 100.0 * c / wall_ns.max(1.0)).collect();
    let err = cpu_ns.iter().zip(&fair).map(|(c, f)| if *f > 0.0 { 100.0 * (c / f - 1.0).abs() } else { 0.0 }).collect();
    (pct, err)
}

impl Benchmark for Hogs {
    fn name(&self) -> &'static str {
        NAME
    }

    fn summary(&self) -> &'static str {
        "CPU hogs at given nice values sharing one CPU (or cpus=N): each one's CPU share against its weight's fair share"
    }

    fn params(&self) -> &'static [ParamSpec] {
        SPECS
    }

    fn cases(&self, params: &Params, plan: &RunPlan) -> Result<Vec<Params>, LiveError> {
        let p = params.resolve(NAME, SPECS, plan.quick)?;
        plan.refuse_deadline(NAME)?;
        let n = nices(&p)?.len() as u64;
        // RT hogs are a measurement too (FIFO: the first takes the CPU; RR:
        // equal turns, whatever the nice), but only with RT throttling on.
        let rt_busy = if plan.condition.policy.is_realtime() { n } else { 0 };
        load::check(&plan.loads, 0, plan.force)?;
        load::check_starvation("the RT hogs of this case", rt_busy, p.count("cpus")? as usize, plan.force)?;
        load::check_tasks(format!("hogs nice={}", p.word("nice")?), n, "give fewer nice values")?;
        hog_cpus(&p, plan)?;
        Ok(vec![p])
    }

    fn estimate_s(&self, case: &Params, plan: &RunPlan) -> f64 {
        let ms = case.resolve(NAME, SPECS, plan.quick).and_then(|p| p.count("duration")).unwrap_or(1000);
        ms as f64 / 1e3 * (plan.repeat + plan.warmup) as f64 + 0.1
    }

    fn run(&self, case: &Params, plan: &RunPlan, progress: &dyn Fn(f64)) -> Result<BenchResult, LiveError> {
        let started = harness::unix_ms();
        let p = self.cases(case, plan)?.remove(0);
        let nices = nices(&p)?;
        let on = hog_cpus(&p, plan)?;
        let duration = Duration::from_millis(p.count("duration")?);
        let est = self.estimate_s(&p, plan);
        let total = (plan.repeat + plan.warmup) as u64;
        let (m, loads) =
            harness::drive(NAME, plan, est, total, progress, |ctx| measure(ctx, plan, &nices, &on, duration))?;
        let mut warnings = Vec::new();
        if let Some(n) = plan.condition.nice {
            warnings.push(format!("--nice {n} was not applied: nice= gives each hog its own ({})", p.word("nice")?));
        }
        let applied = harness::merge_applied(&m.applied, plan.condition.mlock, &mut warnings);
        let labels: Vec<String> = nices.iter().enumerate().map(|(i, n)| format!("hog{i}.nice{n}")).collect();
        let (pct, err) = shares(&nices, &m.cpu_ns, m.wall_ns);
        let mut r = harness::result(NAME, &p, SPECS, plan, applied, started, &loads);
        r.metrics = vec![
            Metric::entities("cpu_share", Unit::Percent, Direction::Neutral, "task", labels.clone(), pct),
            Metric::entities("fair_share_error", Unit::Percent, Direction::LowerIsBetter, "task", labels, err)
                .headline(),
            Metric::samples("cpu_busy", Unit::Percent, Direction::Neutral, m.busy),
        ];
        r.metrics.extend(loads.metrics);
        r.warnings.extend(warnings);
        Ok(r)
    }
}

struct Measured {
    /// Each hog's CPU ns over the measured repetitions.
    cpu_ns: Vec<f64>,
    wall_ns: f64,
    /// Per measured repetition: % of the hogs' CPUs they used together.
    busy: Vec<f64>,
    /// Read back from each hog, nice left out (each has its own).
    applied: Vec<SchedCondition>,
}

/// A hog's CPU time so far (ns), from its process CPU clock.
fn cpu_time_ns(pid: i32) -> Result<u64, LiveError> {
    let mut clock: libc::clockid_t = 0;
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: both out-pointers are valid and writable.
    let ok = unsafe { libc::clock_getcpuclockid(pid, &mut clock) == 0 && libc::clock_gettime(clock, &mut ts) == 0 };
    if !ok {
        return Err(LiveError::Measurement {
            bench: NAME,
            detail: format!("cannot read the CPU time of hog process {pid} (it ended?)"),
        });
    }
    Ok(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

fn measure(ctx: &Ctx, plan: &RunPlan, nices: &[i32], on: &[usize], duration: Duration) -> Result<Measured, LiveError> {
    // Created and dropped on this thread, which outlives the hogs (PDEATHSIG).
    let mut kids = hygiene::Children::new();
    let (go_r, go_w) = harness::pipe()?;
    let go = go_r.as_raw_fd();
    let mut pids = Vec::with_capacity(nices.len());
    for _ in nices {
        // SAFETY: the child only reads one byte from an inherited pipe and
        // spins: no allocation, no locks (async-signal-safe).
        let pid = unsafe {
            kids.fork(|| {
                let mut b = [0u8; 1];
                if libc::read(go, b.as_mut_ptr().cast(), 1) != 1 {
                    return 2;
                }
                let mut n = 0u64;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            })
        }?;
        pids.push(pid);
    }
    drop(go_r);
    let mut applied = Vec::with_capacity(pids.len());
    for (&pid, &nice) in pids.iter().zip(nices) {
        // RT policies take no nice (the hogs then differ only in name).
        let nice = plan.condition.policy.takes_nice().then_some(nice);
        let cond = SchedCondition { nice, ..plan.condition.clone() };
        condition::apply(pid, &cond, Some(on))?;
        applied.push(SchedCondition { nice: None, ..condition::read_back(pid)? });
    }
    if !harness::write_exact(go_w.as_raw_fd(), &vec![1u8; pids.len()]) {
        return Err(LiveError::Measurement { bench: NAME, detail: "could not start the hogs".into() });
    }
    let mut cpu_ns = vec![0f64; pids.len()];
    let (mut wall_ns, mut busy) = (0f64, Vec::new());
    let warmup = plan.warmup as u64;
    for rep in 0..warmup + plan.repeat as u64 {
        ctx.check(now_ns())?;
        ctx.rep_starts(rep);
        let t0 = now_ns();
        let c0 = pids.iter().map(|&p| cpu_time_ns(p)).collect::<Result<Vec<_>, _>>()?;
        // Woken at least every 100 ms, for the stop flag and the deadline.
        let end = t0 + duration.as_nanos() as u64;
        loop {
            let now = now_ns();
            ctx.check(now)?;
            if now >= end {
                break;
            }
            if hygiene::sleep_unless_stopped(Duration::from_nanos((end - now).min(100_000_000))) {
                return Err(LiveError::Interrupted);
            }
        }
        let c1 = pids.iter().map(|&p| cpu_time_ns(p)).collect::<Result<Vec<_>, _>>()?;
        let t1 = now_ns();
        ctx.rep_ends(rep);
        if rep >= warmup {
            let used: Vec<f64> = c0.iter().zip(&c1).map(|(a, b)| b.saturating_sub(*a) as f64).collect();
            let wall = (t1 - t0) as f64;
            busy.push(100.0 * used.iter().sum::<f64>() / (wall * on.len() as f64));
            cpu_ns.iter_mut().zip(&used).for_each(|(c, u)| *c += u);
            wall_ns += wall;
        }
        ctx.set_done(rep + 1);
    }
    // `kids` SIGKILLs and reaps the hogs here, and on every error above.
    Ok(Measured { cpu_ns, wall_ns, busy, applied })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_follow_the_simulators_definition() {
        // Exactly the weight ratio on one CPU: no error.
        let total = 1e9;
        let a = total * 1024.0 / (1024.0 + 335.0);
        let (pct, err) = shares(&[0, 5], &[a, total - a], total);
        assert!((pct[0] - 75.35).abs() < 0.01 && (pct[1] - 24.65).abs() < 0.01, "{pct:?}");
        assert!(err.iter().all(|e| e.abs() < 1e-9), "{err:?}");
        // Equal split where the weights say 3:1: the nice-5 hog got 2x its share.
        let (_, err) = shares(&[0, 5], &[0.5e9, 0.5e9], 1e9);
        assert!((err[1] - 100.0 * (0.5 / (1e9 * 335.0 / 1359.0 / 1e9) - 1.0)).abs() < 1e-6, "{err:?}");
        // Two hogs on two CPUs: each is capped at one CPU whatever its weight.
        let (_, err) = shares(&[-20, 19], &[1e9, 1e9], 1e9);
        assert!(err.iter().all(|e| e.abs() < 1e-9), "{err:?}");
        assert_eq!((weight(0), weight(5), weight(-20), weight(19)), (1024.0, 335.0, 88761.0, 15.0));
    }
}
