//! How many events a run will take, estimated from the workload's programs
//! before it starts, so that a spec implying hours of simulation is refused
//! with a figure instead of running silently (the engine also stops at
//! [`crate::SimOptions::max_events`], whatever this says).
//!
//! The model: each task program is a finite prefix and, if it has one, a
//! forever loop. A pass through steps counts its events (a run step's end,
//! a sleep's wakeup and the switch back, one for each blocking step and
//! fork) and its mean CPU and sleep time. A task's events over a time budget
//! follow from those; tasks that need the CPU share it (the budget shrinks
//! by `cpus / demand` when they need more than there is). Blocking on
//! channels is taken to cost no time, so the figure errs high for message
//! loops, where it matters least: they also do real work per event. Ticks
//! and RT period timers are added exactly.

use crate::program::{Dur, Step};
use crate::workload::WorkloadDef;

/// Events and mean times of one pass through some steps.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Pass {
    events: f64,
    cpu_ns: f64,
    sleep_ns: f64,
    /// Steps that may block without a timer (send, recv, wait, yield).
    blocking: f64,
}

impl Pass {
    fn add(&mut self, o: Pass, times: f64) {
        self.events += o.events * times;
        self.cpu_ns += o.cpu_ns * times;
        self.sleep_ns += o.sleep_ns * times;
        self.blocking += o.blocking * times;
    }
}

/// A program: what runs once, then the pass a forever loop repeats.
#[derive(Debug, Clone, Copy, Default)]
struct Prog {
    first: Pass,
    forever: Option<Pass>,
}

fn mean(d: Dur) -> f64 {
    match d {
        Dur::Fixed(n) => n as f64,
        Dur::Uniform(a, b) => (a as f64 + b as f64) / 2.0,
        Dur::Exp(m) => m as f64,
    }
}

struct Walker<'a> {
    wl: &'a WorkloadDef,
    /// Templates being walked (a fork of one of them is recursion: counted as one event).
    stack: Vec<usize>,
    duration_ns: f64,
    ctx_switch_ns: f64,
}

impl Walker<'_> {
    fn template(&mut self, i: usize) -> Prog {
        self.stack.push(i);
        let p = self.walk(&self.wl.tasks[i].program);
        self.stack.pop();
        p
    }

    fn walk(&mut self, steps: &[Step]) -> Prog {
        let mut acc = Pass::default();
        // Elapsed time at the last period start, and the period.
        let mut period: Option<(f64, f64)> = None;
        for s in steps {
            match s {
                Step::Run(d) => {
                    let m = mean(*d);
                    if m > 0.0 {
                        acc.events += 1.0;
                        acc.cpu_ns += m;
                    }
                }
                Step::Sleep(d) => {
                    acc.events += 2.0;
                    acc.sleep_ns += mean(*d);
                }
                Step::Send(_) | Step::Recv(_) | Step::Wait(_) | Step::Yield => {
                    acc.events += 1.0;
                    acc.blocking += 1.0;
                }
                Step::Fork(t) => {
                    acc.events += 1.0;
                    if !self.stack.contains(t) && self.stack.len() < 8 {
                        let child = self.template(*t);
                        acc.events += events_within(&child, self.duration_ns, self.ctx_switch_ns);
                    }
                }
                Step::PeriodStart(p) => period = Some((acc.cpu_ns + acc.sleep_ns, *p as f64)),
                Step::PeriodEnd => {
                    acc.events += 2.0;
                    if let Some((start, p)) = period.take() {
                        let elapsed = acc.cpu_ns + acc.sleep_ns - start;
                        acc.sleep_ns += (p - elapsed).max(0.0);
                    }
                }
                Step::Broadcast(_) | Step::Nice(_) | Step::Stamp | Step::Record(_) | Step::Lap(_) => {}
                Step::Timer { period, .. } => {
                    acc.events += 2.0;
                    acc.sleep_ns += *period as f64;
                }
                Step::Exit | Step::EndSim => return Prog { first: acc, forever: None },
                Step::Loop(n, body) => {
                    let b = self.walk(body);
                    if let Some(f) = b.forever {
                        acc.add(b.first, 1.0);
                        return Prog { first: acc, forever: Some(f) };
                    }
                    match n {
                        Some(n) => acc.add(b.first, *n as f64),
                        None => return Prog { first: acc, forever: Some(b.first) },
                    }
                }
            }
        }
        Prog { first: acc, forever: None }
    }
}

/// Events one task of `p` produces with `budget_ns` of simulated time.
fn events_within(p: &Prog, budget_ns: f64, ctx_switch_ns: f64) -> f64 {
    let t0 = p.first.cpu_ns + p.first.sleep_ns;
    if t0 > 0.0 && t0 >= budget_ns {
        return p.first.events * budget_ns / t0;
    }
    let Some(f) = p.forever else { return p.first.events };
    if f.events == 0.0 {
        return p.first.events;
    }
    // A loop of blocking steps alone advances only by context switches.
    let t1 = match f.cpu_ns + f.sleep_ns {
        0.0 => f.blocking * ctx_switch_ns,
        t => t,
    };
    if t1 == 0.0 {
        return f64::INFINITY;
    }
    p.first.events + (budget_ns - t0) * f.events / t1
}

/// The share of its time a task of `p` wants a CPU (in its forever loop, or
/// over its whole life).
fn cpu_demand(p: &Prog) -> f64 {
    let pass = p.forever.unwrap_or(p.first);
    let t = pass.cpu_ns + pass.sleep_ns;
    if pass.cpu_ns > 0.0 {
        pass.cpu_ns / t
    } else if pass.blocking > 0.0 && pass.sleep_ns == 0.0 {
        // Blocking alone: it runs whenever it is woken.
        1.0
    } else {
        0.0
    }
}

/// Estimated events of one run of `wl` on `cpus` CPUs for `duration_ns`, with
/// ticks at `tick_ns` and, if RT throttling is on, a timer every `rt_period_ns`.
/// Infinite when some forever loop lets no simulated time pass.
pub fn events(
    wl: &WorkloadDef,
    cpus: u32,
    duration_ns: u64,
    tick_ns: u64,
    ctx_switch_ns: u64,
    rt_period_ns: Option<u64>,
) -> f64 {
    let d = duration_ns as f64;
    let mut w = Walker { wl, stack: Vec::new(), duration_ns: d, ctx_switch_ns: ctx_switch_ns as f64 };
    let progs: Vec<(f64, Prog)> = (0..wl.tasks.len())
        .filter(|&i| wl.tasks[i].count > 0)
        .map(|i| (wl.tasks[i].count as f64, w.template(i)))
        .collect();
    let demand: f64 = progs.iter().map(|(n, p)| n * cpu_demand(p)).sum();
    let scale = if demand > cpus as f64 { cpus as f64 / demand } else { 1.0 };
    let tasks: f64 = progs
        .iter()
        .map(|(n, p)| {
            let budget = if cpu_demand(p) > 0.0 { d * scale } else { d };
            n * events_within(p, budget, ctx_switch_ns as f64)
        })
        .sum();
    let ticks = cpus as f64 * (d / tick_ns as f64).floor();
    let rt = rt_period_ns.map_or(0.0, |p| (d / p as f64).floor());
    ticks + rt + tasks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::build;

    fn est(spec: &str, cpus: u32, secs: f64) -> f64 {
        let wl = build(spec, cpus).unwrap();
        events(&wl, cpus, (secs * 1e9) as u64, 1_000_000, 2_000, None)
    }

    #[test]
    fn a_tight_yield_loop_is_estimated_per_nanosecond() {
        // Issue 12: yield[work=1] on 4 CPUs for 100 ms ran 200 M events;
        // two yielders, each a run step and a yield per ns, are estimated at 4e8.
        let e = est("yield[work=1]", 4, 0.1);
        assert!((3.9e8..4.1e8).contains(&e), "{e}");
        // The default 10 s is 100 times that.
        assert!(est("yield[work=1]", 4, 10.0) > 3.9e10);
    }

    #[test]
    fn cpu_bound_tasks_share_the_cpus() {
        // 400 hackbench tasks on 2 CPUs for 60 s (simbench: ~1e8 events)
        // are bounded by the CPUs, not by 400 tasks' own rates.
        let e = est("hackbench[groups=10,loops=0]", 2, 60.0);
        assert!((5e7..5e8).contains(&e), "{e}");
        // A finite hackbench is bounded by its messages: 10 groups x 40
        // tasks x 100 loops x 40 steps.
        let e = est("hackbench", 2, 10.0);
        assert!((1e6..2e6).contains(&e), "{e}");
    }

    #[test]
    fn sleepers_and_periods_count_their_wakeups() {
        // Hogs: only ticks (2 CPUs x 10 000 ticks).
        let e = est("hogs", 2, 10.0);
        assert!((2e4..2.1e4).contains(&e), "{e}");
        // interactive: audio at 20 Hz and video at 60 Hz for 10 s, 3 events
        // per job (its run step, the sleep to the next release, the switch back).
        let e = est("interactive[burn=0]", 1, 10.0) - 1e4;
        assert!((2300.0..2500.0).contains(&e), "{e}");
    }

    #[test]
    fn a_loop_without_time_is_unbounded() {
        let wl = crate::parse_workload_file(
            r#"{"tasks":[{"program":[{"loop":"forever","do":[{"sleep":{"uniform":[0,0]}}]}]}]}"#,
        )
        .unwrap();
        assert!(events(&wl, 1, 1_000_000, 1_000_000, 2_000, None).is_infinite());
        // Blocking steps alone advance by the context-switch cost.
        let wl = crate::parse_workload_file(
            r#"{"tasks":[{"name":"a","program":[{"loop":"forever","do":[{"send":"x"},{"recv":"y"}]}]},
                         {"name":"b","program":[{"loop":"forever","do":[{"recv":"x"},{"send":"y"}]}]}]}"#,
        )
        .unwrap();
        let e = events(&wl, 2, 1_000_000_000, 1_000_000, 2_000, None);
        assert!(e.is_finite() && e > 1e6, "{e}");
        assert!(events(&wl, 2, 1_000_000_000, 1_000_000, 0, None).is_infinite());
    }

    #[test]
    fn forks_count_their_children() {
        // 2 parents x 500 children: a run step and a fork each, the child's run step.
        let e = est("forkstorm", 2, 10.0) - 2e4;
        assert!((2500.0..3500.0).contains(&e), "{e}");
    }
}
