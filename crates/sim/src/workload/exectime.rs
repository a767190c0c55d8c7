//! `exectime`: E5's thread execution time (the live `exectime` benchmark's
//! names): `threads` threads at RT priority, released together, each doing
//! the same `work`; `rounds` releases.
//!
//! Model: a releaser above them (FIFO 99) sends each thread its own release
//! message at one instant, waits for all to finish, pauses `gap` and
//! releases them again. A thread's time is its own first instant on a CPU
//! after the release to the end of its work, as live (each thread reads the
//! clock once released): time spent waiting for a CPU before it starts is
//! not in it, time it loses once started (preemption, RT throttling, another
//! thread's turn under RR) is. `best`, `average` and `worst` are over every
//! thread of every round (live gives them per repetition).

use super::{empty, task, PERIOD, PIPE_MSGS, RT_PRIO, STEP};
use crate::program::{Class, Dur, Step};
use crate::workload::{Report, WorkloadDef};
use crate::SimError;
use schedlab_core::param::{Kind, Param, Resolved};

pub(super) const PARAMS: &[Param] = &[
    Param::new("threads", Kind::Count { min: 1, max: 10_000 }, "4", "threads released together"),
    Param::new("work", STEP, "7ms", "CPU each thread uses per release (E5: copying 2 MB, about 7 ms)"),
    Param::new("rounds", Kind::Count { min: 1, max: 10_000_000 }, "100", "releases, then the run ends"),
    Param::new(
        "class",
        Kind::Choice(&["fifo", "rr", "normal", "dl"]),
        "fifo",
        "the threads' policy: SCHED_FIFO, SCHED_RR, SCHED_OTHER or SCHED_DEADLINE (with dl=)",
    ),
    Param::new("prio", RT_PRIO, "50", "their RT priority (fifo, rr)"),
    Param::new("dl", Kind::Text, "8ms/20ms/20ms", "their runtime/deadline/period under class=dl"),
    Param::new("gap", PERIOD, "10ms", "pause between a round's end and the next release"),
    Param::new("hogs", Kind::Count { min: 0, max: 1000 }, "0", "nice-0 CPU hogs per CPU beside them"),
];

pub(super) fn build(v: &Resolved, cpus: u32) -> Result<WorkloadDef, SimError> {
    let mut wl = empty("exectime");
    let n = v.u64("threads") as usize;
    let prio = v.u64("prio") as u8;
    let class = match v.get("class") {
        "fifo" => Class::Fifo(prio),
        "rr" => Class::Rr(prio),
        "dl" => super::deadline_class("exectime", v.get("dl"))?,
        _ => Class::Normal,
    };
    // Channel i releases thread i; channel n collects their ends.
    wl.channels = vec![PIPE_MSGS; n + 1];
    let done = n;
    for i in 0..n {
        let body =
            vec![Step::Recv(i), Step::Stamp, Step::Run(Dur::Fixed(v.u64("work"))), Step::Record(0), Step::Send(done)];
        wl.tasks.push(task(&format!("thread{i}"), class, 0, 1, vec![Step::Loop(None, body)]));
    }
    let mut round = vec![Step::Sleep(Dur::Fixed(v.u64("gap")))];
    round.extend((0..n).map(Step::Send));
    round.push(Step::Loop(Some(n as u64), vec![Step::Recv(done)]));
    let releaser = vec![Step::Loop(Some(v.u64("rounds")), round), Step::EndSim];
    wl.tasks.push(task("releaser", Class::Fifo(99), 0, 1, releaser));
    let hogs = v.u64("hogs") * u64::from(cpus);
    if hogs > 0 {
        wl.tasks.push(task("hog", Class::Normal, 0, hogs as u32, vec![Step::Run(Dur::Fixed(u64::MAX / 4))]));
    }
    wl.series = vec!["thread_time".into()];
    wl.report = Report::Exectime;
    wl.headline = vec!["thread_time".into(), "worst_over_average".into()];
    Ok(wl)
}
