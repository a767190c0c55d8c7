//! `periodic`: E5's timer test (the live `cyclic` benchmark, `mode=sigalrm`):
//! a task at RT priority woken by a periodic timer, `loops` times.
//!
//! Model: the timer is armed one period after the task first waits and
//! keeps its grid (absolute expiries, as a POSIX interval timer).
//! `timer=hrtimer` delivers each expiry at its time; `timer=tick` at the next
//! scheduler tick of the run's HZ, as a kernel without high-resolution timers
//! does (its timer wheel runs from the tick), so at HZ 250 a 1 ms timer is
//! delivered every 4 ms, E5's default-kernel picture. Expiries due by then
//! fold into one wake-up (a signal's overruns) and count as missed.
//! `latency` is the handler's start minus the expiry it was woken for,
//! `period` the time between two handler starts, as live.

use super::{empty, task, MAYBE_NO_CPU, PERIOD, RT_PRIO};
use crate::program::{Class, Dur, Step};
use crate::workload::{Report, WorkloadDef};
use crate::SimError;
use schedlab_core::param::{Kind, Param, Resolved};

pub(super) const PARAMS: &[Param] = &[
    Param::new("period", PERIOD, "1ms", "timer period (E5: 1 ms)"),
    Param::new(
        "timer",
        Kind::Choice(&["hrtimer", "tick"]),
        "hrtimer",
        "hrtimer: expiries delivered on time; tick: at the next tick of the run's HZ (no high-resolution timers)",
    ),
    Param::new(
        "loops",
        Kind::Count { min: 1, max: 100_000_000 },
        "10000",
        "expiries handled, then the run ends (E5: 10000)",
    ),
    Param::new(
        "class",
        Kind::Choice(&["fifo", "dl"]),
        "fifo",
        "the timer task's policy: SCHED_FIFO at prio=, or SCHED_DEADLINE with dl=",
    ),
    Param::new("prio", RT_PRIO, "95", "SCHED_FIFO priority of the timer task (cyclictest's -p 95)"),
    Param::new("dl", Kind::Text, "100us/1ms/1ms", "its runtime/deadline/period under class=dl"),
    Param::new("work", MAYBE_NO_CPU, "5us", "CPU the handler uses per expiry"),
    Param::new("hogs", Kind::Count { min: 0, max: 1000 }, "0", "nice-0 CPU hogs per CPU beside it"),
];

pub(super) fn build(v: &Resolved, cpus: u32) -> Result<WorkloadDef, SimError> {
    let mut wl = empty("periodic");
    let timer = Step::Timer { period: v.u64("period"), tick: v.get("timer") == "tick" };
    let mut body = vec![timer, Step::Record(0), Step::Lap(1)];
    if v.u64("work") > 0 {
        body.push(Step::Run(Dur::Fixed(v.u64("work"))));
    }
    let prog = vec![Step::Loop(Some(v.u64("loops")), body), Step::EndSim];
    let class = match v.get("class") {
        "dl" => super::deadline_class("periodic", v.get("dl"))?,
        _ => Class::Fifo(v.u64("prio") as u8),
    };
    let mut t = task("timer", class, 0, 1, prog);
    t.probe = true;
    wl.tasks.push(t);
    let hogs = v.u64("hogs") * u64::from(cpus);
    if hogs > 0 {
        wl.tasks.push(task("hog", Class::Normal, 0, hogs as u32, vec![Step::Run(Dur::Fixed(u64::MAX / 4))]));
    }
    wl.series = vec!["latency".into(), "period".into()];
    wl.report = Report::Periodic;
    wl.headline = vec!["latency".into(), "period".into(), "missed_periods".into()];
    Ok(wl)
}
