//! `spawn`: E1's "process creation" (BYTE spawn, the live `spawn`
//! benchmark): each parent forks a child, the child execs (optional CPU)
//! and exits, the parent waits for it, and repeats.
//!
//! Model: the fork's CPU is the parent's (`fork_cost`), the child's own
//! (`child_work`: exec, the loader, exit) is the child's; the wait is a
//! message the child sends as it ends. The child's exit is one zero-time
//! step after that message, so a policy that lets the woken parent run first
//! makes the child come back once more only to exit (one extra switch the
//! kernel, which wakes the parent from inside `do_exit`, does not pay).
//! `spawn_latency` is fork to reaped, per child, as live.

use super::{empty, task, MAYBE_NO_CPU, PIPE_MSGS, STEP};
use crate::program::{Class, Dur, Step};
use crate::spec::Spec;
use crate::workload::{Report, WorkloadDef, MAX_TASKS};
use crate::SimError;
use schedlab_core::param::{Kind, Param, Resolved};

pub(super) const PARAMS: &[Param] = &[
    Param::new("parents", Kind::Count { min: 1, max: 10_000 }, "1", "forking loops running at once"),
    Param::new("count", Kind::Count { min: 1, max: MAX_TASKS }, "10000", "children each parent forks and reaps"),
    Param::new("fork_cost", STEP, "60us", "parent CPU per fork (copying the memory map)"),
    Param::new("child_work", MAYBE_NO_CPU, "40us", "child CPU: exec and exit (0: BYTE spawn's fork and exit only)"),
];

pub(super) fn build(spec: &Spec, v: &Resolved) -> Result<WorkloadDef, SimError> {
    let (parents, count) = (v.u64("parents"), v.u64("count"));
    if parents * (count + 1) > MAX_TASKS {
        let why = format!("at most {MAX_TASKS} tasks in all ({parents} parents x (1 + {count} children)): fewer parents or a smaller count");
        return Err(spec.bad_value("count", &count.to_string(), &why));
    }
    let mut wl = empty("spawn");
    for p in 0..parents as usize {
        let reaped = wl.channels.len();
        wl.channels.push(PIPE_MSGS);
        let child = wl.tasks.len();
        let prog = vec![Step::Run(Dur::Fixed(v.u64("child_work"))), Step::Send(reaped)];
        wl.tasks.push(task(&format!("child{p}"), Class::Normal, 0, 0, prog));
        let body = vec![
            Step::Stamp,
            Step::Run(Dur::Fixed(v.u64("fork_cost"))),
            Step::Fork(child),
            Step::Recv(reaped),
            Step::Record(0),
        ];
        wl.tasks.push(task(&format!("parent{p}"), Class::Normal, 0, 1, vec![Step::Loop(Some(count), body)]));
    }
    wl.series = vec!["spawn_latency".into()];
    wl.report = Report::Spawn;
    wl.headline = vec!["processes_per_s".into(), "spawn_latency".into()];
    Ok(wl)
}
