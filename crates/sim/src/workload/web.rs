//! `web`: E1's Apache Bench and E2's web serving (the live `http`
//! benchmark's names): requests arrive open-loop (Poisson, `rate` per
//! second) and a server answers them, either with a thread per connection
//! (`server=threads`, as Apache's prefork and worker MPMs under E1/E2) or
//! with `workers` event-loop threads (`server=event`).
//!
//! Model: arrivals come from an RT task standing for the network (it uses
//! no CPU, but its wake-ups cost a switch, as an interrupt's would).
//! `threads`: each arrival starts a thread that pays `spawn_cost` (accept,
//! thread creation) and `work`, then ends. `event`: each request is queued
//! at one worker, dealt in turn (as SO_REUSEPORT spreads connections), and
//! a client task (SCHED_FIFO, so it costs a switch but no CPU) waits for its
//! answer; a worker serves its queue in order. Either way `response_time`
//! is arrival to answer, as live.

use super::{empty, task, MAYBE_NO_CPU, STEP};
use crate::program::{Class, Dur, Step};
use crate::workload::{Report, WorkloadDef};
use crate::SimError;
use schedlab_core::param::{Kind, Param, Resolved};

pub(super) const PARAMS: &[Param] = &[
    Param::new(
        "server",
        Kind::Choice(&["threads", "event"]),
        "threads",
        "threads: a thread per connection; event: event-loop workers",
    ),
    Param::new(
        "rate",
        Kind::Count { min: 1, max: 1_000_000 },
        "500",
        "requests per second (Poisson arrivals, open loop)",
    ),
    Param::new("work", STEP, "1ms", "server CPU per request (parse, build the page, write it)"),
    Param::new("workers", Kind::Count { min: 1, max: 1000 }, "2", "event-loop workers (server=event)"),
    Param::new("spawn_cost", MAYBE_NO_CPU, "50us", "CPU to accept and start a connection's thread (server=threads)"),
];

/// Requests one worker's queue holds (the task limit stops a run that
/// falls that far behind first).
const QUEUE: u64 = 1_000_000;
/// Answer slots per event-loop worker (see `build`).
const SLOTS: usize = 128;

pub(super) fn build(v: &Resolved) -> Result<WorkloadDef, SimError> {
    let mut wl = empty("web");
    let (work, spawn) = (v.u64("work"), v.u64("spawn_cost"));
    // Arrival gaps: exponential with mean 1/rate.
    let gap = Step::Sleep(Dur::Exp((1_000_000_000 / v.u64("rate")).max(1)));
    let mut arrivals = Vec::new();
    if v.get("server") == "threads" {
        let conn = vec![Step::Run(Dur::Fixed(spawn + work)), Step::Record(0)];
        wl.tasks.push(task("conn", Class::Normal, 0, 0, conn));
        arrivals.extend([gap, Step::Fork(0)]);
    } else {
        let workers = v.u64("workers") as usize;
        // Channel 0..workers: each worker's requests; then one answer
        // channel per (worker, slot). Request i goes to worker i mod
        // workers and slot (i / workers) mod SLOTS; its client waits on that
        // slot alone, so answers meet their requests unless a worker falls
        // SLOTS requests behind (then two clients share a slot and may swap
        // answers: the mean stays exact).
        wl.channels = vec![QUEUE; workers * (SLOTS + 1)];
        let answer = |w: usize, k: usize| workers + w * SLOTS + k;
        for w in 0..workers {
            for k in 0..SLOTS {
                let client = vec![Step::Recv(answer(w, k)), Step::Record(0)];
                wl.tasks.push(task(&format!("client{w}.{k}"), Class::Fifo(98), 0, 0, client));
            }
        }
        for k in 0..SLOTS {
            for w in 0..workers {
                arrivals.extend([gap.clone(), Step::Fork(w * SLOTS + k), Step::Send(w)]);
            }
        }
        for w in 0..workers {
            let serve: Vec<Step> = (0..SLOTS)
                .flat_map(|k| [Step::Recv(w), Step::Run(Dur::Fixed(work)), Step::Send(answer(w, k))])
                .collect();
            wl.tasks.push(task(&format!("worker{w}"), Class::Normal, 0, 1, vec![Step::Loop(None, serve)]));
        }
    }
    wl.tasks.push(task("arrivals", Class::Fifo(99), 0, 1, vec![Step::Loop(None, arrivals)]));
    wl.series = vec!["response_time".into()];
    wl.report = Report::Web;
    wl.headline = vec!["requests_per_s".into(), "response_time".into()];
    Ok(wl)
}
