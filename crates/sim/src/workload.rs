//! Workloads: named, parameterised task sets (`hackbench[groups=10]`) and a
//! JSON file format for custom ones ([`parse_workload_file`]).
//!
//! # Methodology (shared by all workloads)
//! Every task of the workload exists at time 0 (as if forked by a launcher
//! that then waits). Costs of system calls are explicit `run` steps, so the
//! model charges them where the workload says; context-switch and migration
//! costs come from [`crate::SimOptions`].

use crate::program::{spins_forever, Class, Dur, Step};
use crate::spec::Spec;
use crate::SimError;
use schedlab_core::param::{self, Kind, Param, ParamError, Resolved, TimeUnit};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

// The seeds' workloads with metrics under the live benchmarks' names (issue 17).
mod exectime;
pub(crate) mod interactive;
mod make;
mod periodic;
pub mod report;
mod shell;
mod spawn;
mod web;
pub(crate) use interactive::metrics as interactive_metrics;
pub use report::Report;

/// A task template: `count` tasks are created at time 0 (0 for fork-only templates).
#[derive(Debug, Clone, PartialEq)]
pub struct TaskDef {
    pub name: String,
    pub class: Class,
    pub nice: i32,
    pub program: Vec<Step>,
    pub count: u32,
    /// Wakeup latencies are recorded for probe tasks only (all tasks if none is a probe).
    pub probe: bool,
    /// Included in the CPU-share-against-fair-share metrics (always-runnable tasks).
    pub share: bool,
    /// Deadline results of this template's periodic jobs go to `deadlines_met.<group>`.
    pub deadline_group: Option<String>,
}

/// A complete workload: task templates, channels and conditions.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadDef {
    pub name: String,
    pub params: BTreeMap<String, Value>,
    pub tasks: Vec<TaskDef>,
    /// Capacity (messages) of each channel.
    pub channels: Vec<u64>,
    pub conditions: usize,
    /// Metric names marked as headline.
    pub headline: Vec<String>,
    /// Messages per round trip of a ping-pong workload (`pipe`): the result
    /// then also reports `round_trips_per_s`, completed trips per second.
    pub round_trip_messages: Option<u64>,
    /// Names of the histograms that `Record` and `Lap` steps fill, by index.
    pub series: Vec<String>,
    /// Metrics derived from the series and the run (rates, wall time).
    pub report: Report,
    /// Workloads simulated one after the other, each alone for the whole
    /// duration, and reported as one result, a row each (`interactive`'s
    /// `loads=`, see [`interactive::join_rows`]); this one's own tasks are
    /// then none. Empty for every other workload.
    pub rows: Vec<(String, WorkloadDef)>,
}

/// Information about a workload, for `schedlab list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadInfo {
    pub name: &'static str,
    pub summary: &'static str,
    /// Its parameters: the one table that parsing, defaults and `list` read.
    pub params: &'static [Param],
}

/// Pipe capacity in 100-byte messages (64 KiB pipe buffer).
pub const PIPE_MSGS: u64 = 655;

/// The CPU cost of one step (a write, a job): from 1 ns (0 would let a loop
/// run without simulated time passing) to 10 s.
const STEP: Kind = Kind::Duration { unit: TimeUnit::Ns, min: 1, max: 10_000_000_000 };
/// CPU that may be nothing, where the loop around it is finite or blocks.
const MAYBE_NO_CPU: Kind = Kind::Duration { unit: TimeUnit::Ns, min: 0, max: 10_000_000_000 };
/// A period or interval: from 1 us to 100 s.
const PERIOD: Kind = Kind::Duration { unit: TimeUnit::Ns, min: 1_000, max: 100_000_000_000 };
const RT_PRIO: Kind = Kind::Count { min: 1, max: 99 };
const PERCENT: Kind = Kind::Count { min: 1, max: 100 };
const fn upto(max: u64) -> Kind {
    Kind::Count { min: 0, max }
}
const fn from1(max: u64) -> Kind {
    Kind::Count { min: 1, max }
}

const HACKBENCH: &[Param] = &[
    Param::new("groups", from1(10_000), "10", "number of groups (40 tasks each)"),
    Param::new("loops", upto(1_000_000_000), "100", "messages per sender per receiver; 0 = forever"),
    Param::new("send_cost", STEP, "1500ns", "CPU cost of one write").was("send_ns"),
    Param::new("recv_cost", STEP, "1500ns", "CPU cost of one read").was("recv_ns"),
    Param::new("capacity", from1(1_000_000_000), "655", "channel capacity in messages (64 KiB pipe / 100 B)"),
];

const WAKEUP: &[Param] = &[
    Param::new("samples", from1(100_000_000), "1000", "broadcasts"),
    Param::new("interval", PERIOD, "10ms", "mean time between broadcasts (uniform +-50%)").was("interval_ns"),
    Param::new("rt_waiters", upto(1000), "1", "SCHED_FIFO waiters"),
    Param::new("normal_waiters", upto(1000), "1", "nice-0 waiters"),
    Param::new("waker_prio", RT_PRIO, "90", "rt_priority of the waker"),
    Param::new("waiter_prio", RT_PRIO, "50", "rt_priority of the RT waiters"),
    // Waiters block between wakeups, so no work is a valid (if odd) choice.
    Param::new("work", MAYBE_NO_CPU, "20us", "CPU each waiter uses per wakeup").was("work_ns"),
    Param::new("groups", upto(10_000), "10", "background hackbench groups (run forever); 0 = no load"),
];

const HOGS: &[Param] =
    &[Param::new("nice", Kind::IntList { min: -20, max: 19 }, "0,5", "nice values, one hog each, e.g. 0,0,5,10")];

const FORKSTORM: &[Param] = &[
    Param::new("parents", from1(10_000), "2", "forking tasks"),
    Param::new("children", from1(1_000_000), "500", "children per parent"),
    // A fork or a child may cost nothing: both loops are finite.
    Param::new("fork_cost", MAYBE_NO_CPU, "50us", "CPU cost of one fork in the parent").was("fork_ns"),
    Param::new("child_work", MAYBE_NO_CPU, "200us", "CPU each child uses before exiting").was("child_ns"),
];

const YIELD: &[Param] = &[
    Param::new("yielders", upto(10_000), "2", "yielding tasks"),
    Param::new("hogs", upto(10_000), "1", "nice-0 hogs"),
    // Not 0: a yield loop in which no simulated time passes.
    Param::new("work", STEP, "100us", "CPU between yields").was("work_ns"),
];

const PIPE: &[Param] = &[
    Param::new("pairs", from1(10_000), "1", "task pairs, each passing its own token back and forth"),
    Param::new("loops", upto(1_000_000_000), "0", "round trips per pair; 0 = until the run ends"),
    Param::new("send_cost", STEP, "1500ns", "CPU cost of one write (as hackbench's)"),
    Param::new("recv_cost", STEP, "1500ns", "CPU cost of one read (as hackbench's)"),
];

pub fn workload_infos() -> Vec<WorkloadInfo> {
    vec![
        WorkloadInfo {
            name: "hackbench",
            summary: "groups of 20 senders and 20 receivers; each sender sends `loops` 100-byte messages to every receiver of its group",
            params: HACKBENCH,
        },
        WorkloadInfo {
            name: "wakeup",
            summary: "E3's probe: an RT waker broadcasts a condition to RT and normal waiters, under hackbench load; ends after `samples` broadcasts",
            params: WAKEUP,
        },
        WorkloadInfo {
            name: "hogs",
            summary: "CPU hogs, one per listed nice value; measures CPU share against the weight's fair share",
            params: HOGS,
        },
        WorkloadInfo {
            name: "interactive",
            summary: "interbench-style audio (5% every 50 ms), video (40% at 60 Hz), X (0-99 ms ramp in 100 ms cycles) and gaming (CPU-bound) tasks, under the live benchmark's loads (none, video, x, burn, write, read, compile: a row each with loads=), by its metric names",
            params: interactive::PARAMS,
        },
        WorkloadInfo {
            name: "forkstorm",
            summary: "parents fork short-lived children as fast as they can",
            params: FORKSTORM,
        },
        WorkloadInfo { name: "yield", summary: "tasks that run briefly and sched_yield(), beside CPU hogs", params: YIELD },
        WorkloadInfo {
            name: "pipe",
            summary: "E1's pipe context switching (BYTE context1, perf bench sched pipe): two tasks pass a token through two pipes; round trips/s",
            params: PIPE,
        },
        WorkloadInfo {
            name: "spawn",
            summary: "E1's process creation: parents fork a child that execs and exits, and wait for it; the live spawn benchmark's names",
            params: spawn::PARAMS,
        },
        WorkloadInfo {
            name: "shell",
            summary: "E1's shell scripts: copies each run a script (sh forking a pipeline of short commands) over and over; scripts/min",
            params: shell::PARAMS,
        },
        WorkloadInfo {
            name: "make",
            summary: "E4's make -jN: a DAG of compile jobs (CPU work between source reads and object writes) and a link, at most `jobs` at once; wall time",
            params: make::PARAMS,
        },
        WorkloadInfo {
            name: "web",
            summary: "E1/E2's web serving: open-loop requests served by a thread per connection or by event-loop workers; response time, requests/s",
            params: web::PARAMS,
        },
        WorkloadInfo {
            name: "periodic",
            summary: "E5's timer test: an RT task woken by a periodic timer (tick-driven or high-resolution); wake-up latency and period, as cyclic",
            params: periodic::PARAMS,
        },
        WorkloadInfo {
            name: "exectime",
            summary: "E5's thread execution time: N RT threads released together, each doing the same work; per-thread time",
            params: exectime::PARAMS,
        },
    ]
}

/// A workload spec checked against its table: the spec (for messages), its
/// resolved values, and the old key names it used.
pub(crate) fn resolve(spec_str: &str) -> Result<(Spec, WorkloadInfo, Resolved), SimError> {
    let spec = Spec::parse(spec_str, "workload")?;
    let info = workload_infos().into_iter().find(|i| i.name == spec.name).ok_or_else(|| SimError::UnknownWorkload {
        name: spec.name.clone(),
        valid: workload_infos().iter().map(|i| i.name).collect::<Vec<_>>().join(", "),
    })?;
    let values = param::resolve(&spec.params, info.params).map_err(|e| match e {
        ParamError::Unknown { key, valid } => SimError::UnknownKey {
            what: "workload",
            name: spec.name.clone(),
            key,
            valid: if valid.is_empty() { "(none: this one takes no parameters)".into() } else { valid.join(", ") },
        },
        ParamError::Bad { key, value, expected } => spec.bad_value(&key, &value, &expected),
        e @ ParamError::Twice { .. } => spec.bad_value(&spec.name.clone(), &spec.canonical(), &e.to_string()),
    })?;
    Ok((spec, info, values))
}

/// Build a named workload from its spec (or parse JSON if the spec starts with `{`).
pub fn build(spec_str: &str, cpus: u32) -> Result<WorkloadDef, SimError> {
    let s = spec_str.trim();
    if s.starts_with('{') {
        return parse_workload_file(s);
    }
    if let Some(path) = s.strip_prefix('@') {
        return Err(SimError::FileSpec(path.to_string()));
    }
    let (spec, info, v) = resolve(s)?;
    let mut wl = match spec.name.as_str() {
        "hackbench" => hackbench(&v)?,
        "wakeup" => wakeup(&spec, &v)?,
        "hogs" => hogs(&spec, &v)?,
        "interactive" => interactive::build(&spec, &v, cpus)?,
        "forkstorm" => forkstorm(&spec, &v)?,
        "yield" => yield_wl(&spec, &v)?,
        "pipe" => pipe(&v),
        "spawn" => spawn::build(&spec, &v)?,
        "shell" => shell::build(&spec, &v)?,
        "make" => make::build(&spec, &v)?,
        "web" => web::build(&v)?,
        "periodic" => periodic::build(&v, cpus)?,
        "exectime" => exectime::build(&v, cpus)?,
        _ => unreachable!("workload_infos and build list the same names"),
    };
    // Record every parameter with its effective value (defaults applied).
    for p in info.params {
        let canonical = v.get(p.name);
        let val = match p.kind {
            Kind::IntList { .. } => json!(v.ints(p.name)),
            kind if kind.is_number() => json!(v.u64(p.name)),
            _ => Value::String(canonical.to_string()),
        };
        wl.params.insert(p.name.to_string(), val);
    }
    if spec.name == "interactive" {
        interactive::record_params(&mut wl.params, &spec);
    }
    Ok(wl)
}

/// A built-in workload's `dl=Q/D/P` as a SCHED_DEADLINE class (a
/// workload file's `"class": "dl=..."` is read the same way).
fn deadline_class(workload: &str, text: &str) -> Result<Class, SimError> {
    crate::policy::deadline::parse_params(text).map(Class::Deadline).map_err(|why| SimError::BadValueWhy {
        name: workload.into(),
        key: "dl".into(),
        value: text.into(),
        why,
    })
}

fn task(name: &str, class: Class, nice: i32, count: u32, program: Vec<Step>) -> TaskDef {
    TaskDef { name: name.into(), class, nice, program, count, probe: false, share: false, deadline_group: None }
}

/// Every task the engine creates (initial and forked) is kept until the run
/// ends, for its per-task results.
pub const MAX_TASKS: u64 = 1_000_000;

/// Add hackbench groups to `wl`; `loops == 0` loops forever.
fn add_hackbench(wl: &mut WorkloadDef, groups: u64, loops: u64, send_ns: u64, recv_ns: u64, cap: u64) {
    let lp = if loops == 0 { None } else { Some(loops) };
    for g in 0..groups {
        let first = wl.channels.len();
        wl.channels.extend(std::iter::repeat_n(cap, 20));
        let mut body = Vec::new();
        for r in 0..20 {
            body.push(Step::Run(Dur::Fixed(send_ns)));
            body.push(Step::Send(first + r));
        }
        // Receivers are created first, as hackbench does, so they wait before senders start.
        for r in 0..20 {
            let prog =
                vec![Step::Loop(lp.map(|l| l * 20), vec![Step::Recv(first + r), Step::Run(Dur::Fixed(recv_ns))])];
            wl.tasks.push(task(&format!("hb{g}.recv{r}"), Class::Normal, 0, 1, prog));
        }
        for s in 0..20 {
            wl.tasks.push(task(&format!("hb{g}.send{s}"), Class::Normal, 0, 1, vec![Step::Loop(lp, body.clone())]));
        }
    }
}

fn empty(name: &str) -> WorkloadDef {
    WorkloadDef {
        name: name.into(),
        params: BTreeMap::new(),
        tasks: Vec::new(),
        channels: Vec::new(),
        conditions: 0,
        headline: Vec::new(),
        round_trip_messages: None,
        series: Vec::new(),
        report: Report::None,
        rows: Vec::new(),
    }
}

fn hackbench(v: &Resolved) -> Result<WorkloadDef, SimError> {
    let mut wl = empty("hackbench");
    let (groups, loops, cap) = (v.u64("groups"), v.u64("loops"), v.u64("capacity"));
    add_hackbench(&mut wl, groups, loops, v.u64("send_cost"), v.u64("recv_cost"), cap);
    wl.headline = vec!["makespan".into(), "messages_per_s".into()];
    Ok(wl)
}

/// E1's "pipe-based context switching": per pair an echo task (created
/// first, so it waits) and a pinger, joined by two pipes. The pinger writes
/// the token and reads the reply; the echo reads it and writes it back. A
/// round trip is two messages and, on one CPU, two context switches.
fn pipe(v: &Resolved) -> WorkloadDef {
    let mut wl = empty("pipe");
    let lp = Some(v.u64("loops")).filter(|&l| l > 0);
    let (send, recv) = (v.u64("send_cost"), v.u64("recv_cost"));
    for p in 0..v.u64("pairs") {
        let (ping, pong) = (wl.channels.len(), wl.channels.len() + 1);
        wl.channels.extend([PIPE_MSGS, PIPE_MSGS]);
        // Read the token, then write it back: one CPU stretch.
        let echo = vec![Step::Recv(ping), Step::Run(Dur::Fixed(recv + send)), Step::Send(pong)];
        wl.tasks.push(task(&format!("pipe{p}.echo"), Class::Normal, 0, 1, vec![Step::Loop(lp, echo)]));
        let pinger = vec![Step::Run(Dur::Fixed(send)), Step::Send(ping), Step::Recv(pong), Step::Run(Dur::Fixed(recv))];
        wl.tasks.push(task(&format!("pipe{p}.ping"), Class::Normal, 0, 1, vec![Step::Loop(lp, pinger)]));
    }
    wl.round_trip_messages = Some(2);
    wl.headline = vec!["round_trips_per_s".into()];
    wl
}

fn wakeup(spec: &Spec, v: &Resolved) -> Result<WorkloadDef, SimError> {
    let mut wl = empty("wakeup");
    let (samples, interval, work) = (v.u64("samples"), v.u64("interval"), v.u64("work"));
    let (wp, rp) = (v.u64("waker_prio") as u8, v.u64("waiter_prio") as u8);
    wl.conditions = 1;
    let waker = vec![
        Step::Loop(
            Some(samples),
            vec![Step::Sleep(Dur::Uniform(interval / 2, interval + interval / 2)), Step::Broadcast(0)],
        ),
        Step::EndSim,
    ];
    wl.tasks.push(task("waker", Class::Fifo(wp), 0, 1, waker));
    let waiter = vec![Step::Loop(None, vec![Step::Wait(0), Step::Run(Dur::Fixed(work))])];
    let mut rt = task("rt_waiter", Class::Fifo(rp), 0, v.u64("rt_waiters") as u32, waiter.clone());
    rt.probe = true;
    let mut nrm = task("normal_waiter", Class::Normal, 0, v.u64("normal_waiters") as u32, waiter);
    nrm.probe = true;
    if rt.count + nrm.count == 0 {
        // Without a waiter nothing is measured (the background load would be).
        return Err(spec.bad_value("rt_waiters", "0", "at least one waiter: rt_waiters or normal_waiters above 0"));
    }
    wl.tasks.extend([rt, nrm]);
    add_hackbench(&mut wl, v.u64("groups"), 0, 1500, 1500, PIPE_MSGS);
    wl.headline = vec!["wakeup_latency.rt".into(), "wakeup_latency.normal".into()];
    Ok(wl)
}

fn hogs(spec: &Spec, v: &Resolved) -> Result<WorkloadDef, SimError> {
    let mut wl = empty("hogs");
    let nices = v.ints("nice");
    if nices.len() > 10_000 {
        return Err(spec.bad_value("nice", v.get("nice"), "1 to 10000 nice values"));
    }
    for (i, &n) in nices.iter().enumerate() {
        let n = n as i32;
        let mut t = task(&format!("hog{i}.nice{n}"), Class::Normal, n, 1, vec![Step::Run(Dur::Fixed(u64::MAX / 4))]);
        t.share = true;
        wl.tasks.push(t);
    }
    wl.params.insert("nice".into(), json!(nices));
    wl.headline = vec!["fair_share_error".into()];
    Ok(wl)
}

fn forkstorm(spec: &Spec, v: &Resolved) -> Result<WorkloadDef, SimError> {
    let mut wl = empty("forkstorm");
    let (parents, children) = (v.u64("parents"), v.u64("children"));
    if parents * (children + 1) > MAX_TASKS {
        let why = format!("at most {MAX_TASKS} tasks in all ({parents} parents x (1 + {children} children)): fewer parents or children");
        return Err(spec.bad_value("children", &children.to_string(), &why));
    }
    let child_ns = v.u64("child_work");
    let child = task("child", Class::Normal, 0, 0, vec![Step::Run(Dur::Fixed(child_ns))]);
    wl.tasks.push(child);
    let fork_ns = v.u64("fork_cost");
    let prog = vec![Step::Loop(Some(children), vec![Step::Run(Dur::Fixed(fork_ns)), Step::Fork(0)])];
    wl.tasks.push(task("parent", Class::Normal, 0, parents as u32, prog));
    wl.headline = vec!["makespan".into(), "runqueue_wait".into()];
    Ok(wl)
}

fn yield_wl(spec: &Spec, v: &Resolved) -> Result<WorkloadDef, SimError> {
    let mut wl = empty("yield");
    let work = v.u64("work");
    let mut y = task(
        "yielder",
        Class::Normal,
        0,
        v.u64("yielders") as u32,
        vec![Step::Loop(None, vec![Step::Run(Dur::Fixed(work)), Step::Yield])],
    );
    y.share = true;
    let mut h = task("hog", Class::Normal, 0, v.u64("hogs") as u32, vec![Step::Run(Dur::Fixed(u64::MAX / 4))]);
    h.share = true;
    if y.count + h.count == 0 {
        return Err(spec.bad_value("yielders", "0", "at least one task"));
    }
    wl.tasks.extend([y, h]);
    wl.headline = vec!["cpu_share".into(), "context_switches".into()];
    Ok(wl)
}

// ---------------------------------------------------------------- JSON files

/// Parse a workload file's contents (JSON). The format:
///
/// ```json
/// { "name": "pingpong",
///   "channels": {"ping": 1},              // optional capacities (default 655)
///   "headline": ["makespan"],             // optional
///   "tasks": [
///     { "name": "a", "count": 1, "class": "normal", "nice": 0,   // class: normal | fifo:P | rr:P | dl=Q/D/P
///       "probe": false, "share": false, "deadline_group": null,
///       "program": [ {"loop": 100, "do": [ {"run": "50us"}, {"send": "ping"}, {"recv": "pong"} ]} ] } ] }
/// ```
/// Steps: `{"run": D}`, `{"sleep": D}`, `{"send": ch}`, `{"recv": ch}`,
/// `{"broadcast": cond}`, `{"wait": cond}`, `{"fork": task}` (a template,
/// usually with `"count": 0`), `"exit"`, `"yield"`, `"end_sim"`, `{"nice": n}`,
/// `{"loop": n | "forever", "do": [..]}`, `{"period": D, "do": [..]}` (a
/// periodic job with a deadline at the end of its period). A duration `D` is
/// ns as a number, a string like `"1.5ms"`, `{"uniform": [A, B]}` or `{"exp": MEAN}`.
/// Channels and conditions are created by first use.
pub fn parse_workload_file(contents: &str) -> Result<WorkloadDef, SimError> {
    let v: Value = serde_json::from_str(contents).map_err(|e| ferr("", format!("not valid JSON: {e}")))?;
    let obj = v.as_object().ok_or_else(|| ferr("", "the top level must be an object".into()))?;
    check_fields(obj, "", &["name", "channels", "headline", "tasks"])?;
    let name = obj.get("name").and_then(Value::as_str).unwrap_or("custom").to_string();
    let mut cx = FileCx::default();
    if let Some(ch) = obj.get("channels") {
        let m = ch.as_object().ok_or_else(|| ferr("channels", "must map channel names to capacities".into()))?;
        for (k, c) in m {
            let cap = c
                .as_u64()
                .filter(|c| *c > 0)
                .ok_or_else(|| ferr("channels", format!("capacity of '{k}' must be a positive integer")))?;
            cx.channel(k, Some(cap));
        }
    }
    let tasks = obj
        .get("tasks")
        .and_then(Value::as_array)
        .ok_or_else(|| ferr("tasks", "a non-empty array of tasks is required".into()))?;
    if tasks.is_empty() {
        return Err(ferr("tasks", "a non-empty array of tasks is required".into()));
    }
    // Template names first, so forks can refer to later templates.
    let names: Vec<String> = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| t.get("name").and_then(Value::as_str).map(str::to_string).unwrap_or(format!("task{i}")))
        .collect();
    cx.templates = names.clone();
    let mut defs = Vec::new();
    for (i, t) in tasks.iter().enumerate() {
        let at = format!("tasks[{i}]");
        let o = t.as_object().ok_or_else(|| ferr(&at, "each task must be an object".into()))?;
        check_fields(o, &at, &["name", "count", "class", "nice", "probe", "share", "deadline_group", "program"])?;
        let class = match o.get("class").map(|c| c.as_str().unwrap_or("?")) {
            None | Some("normal") | Some("other") => Class::Normal,
            Some(c) if c.starts_with("dl=") => Class::Deadline(
                crate::policy::deadline::parse_params(&c[3..]).map_err(|e| ferr(&at, format!("class '{c}': {e}")))?,
            ),
            Some(c) => {
                let (k, p) = c
                    .split_once(':')
                    .ok_or_else(|| ferr(&at, format!("class '{c}': use normal, fifo:P, rr:P or dl=Q/D/P")))?;
                let p: u8 = p
                    .parse()
                    .ok()
                    .filter(|p| (1..=99).contains(p))
                    .ok_or_else(|| ferr(&at, format!("class '{c}': RT priority must be 1..99")))?;
                match k {
                    "fifo" => Class::Fifo(p),
                    "rr" => Class::Rr(p),
                    _ => return Err(ferr(&at, format!("class '{c}': use normal, fifo:P, rr:P or dl=Q/D/P"))),
                }
            }
        };
        let nice = o
            .get("nice")
            .map_or(Some(0), Value::as_i64)
            .filter(|n| (-20..=19).contains(n))
            .ok_or_else(|| ferr(&at, "nice must be an integer -20..19".into()))? as i32;
        let count = o
            .get("count")
            .map_or(Some(1), Value::as_u64)
            .filter(|c| *c <= 100_000)
            .ok_or_else(|| ferr(&at, "count must be an integer 0..100000".into()))? as u32;
        let flag = |k: &str| {
            o.get(k).map_or(Ok(false), |b| b.as_bool().ok_or_else(|| ferr(&at, format!("{k} must be true or false"))))
        };
        let prog = o
            .get("program")
            .and_then(Value::as_array)
            .ok_or_else(|| ferr(&at, "program: an array of steps is required".into()))?;
        let program = cx.steps(prog, &format!("{at}.program"))?;
        if spins_forever(&program) {
            return Err(ferr(&at, "a forever loop takes no time and never blocks; add a run or sleep step".into()));
        }
        defs.push(TaskDef {
            name: names[i].clone(),
            class,
            nice,
            program,
            count,
            probe: flag("probe")?,
            share: flag("share")?,
            deadline_group: o.get("deadline_group").and_then(Value::as_str).map(str::to_string),
        });
    }
    let headline = match obj.get("headline") {
        None => vec!["makespan".into()],
        Some(h) => h
            .as_array()
            .and_then(|a| a.iter().map(|x| x.as_str().map(str::to_string)).collect::<Option<Vec<_>>>())
            .ok_or_else(|| ferr("headline", "must be an array of metric names".into()))?,
    };
    let mut params = BTreeMap::new();
    params.insert("file".to_string(), Value::String(name.clone()));
    Ok(WorkloadDef {
        name,
        params,
        tasks: defs,
        channels: cx.channels.iter().map(|c| c.1).collect(),
        conditions: cx.conds.len(),
        headline,
        round_trip_messages: None,
        series: Vec::new(),
        report: Report::None,
        rows: Vec::new(),
    })
}

fn ferr(at: &str, why: String) -> SimError {
    SimError::BadWorkloadFile { at: if at.is_empty() { "top level".into() } else { at.into() }, why }
}

fn check_fields(o: &Map<String, Value>, at: &str, valid: &[&str]) -> Result<(), SimError> {
    for k in o.keys() {
        if !valid.contains(&k.as_str()) {
            return Err(ferr(at, format!("unknown field '{k}': valid fields are {}", valid.join(", "))));
        }
    }
    Ok(())
}

#[derive(Default)]
struct FileCx {
    channels: Vec<(String, u64)>,
    conds: Vec<String>,
    templates: Vec<String>,
}

impl FileCx {
    fn channel(&mut self, name: &str, cap: Option<u64>) -> usize {
        if let Some(i) = self.channels.iter().position(|c| c.0 == name) {
            return i;
        }
        self.channels.push((name.into(), cap.unwrap_or(PIPE_MSGS)));
        self.channels.len() - 1
    }
    fn cond(&mut self, name: &str) -> usize {
        if let Some(i) = self.conds.iter().position(|c| c == name) {
            return i;
        }
        self.conds.push(name.into());
        self.conds.len() - 1
    }

    fn steps(&mut self, arr: &[Value], at: &str) -> Result<Vec<Step>, SimError> {
        arr.iter().enumerate().map(|(i, s)| self.step(s, &format!("{at}[{i}]"))).collect()
    }

    fn step(&mut self, s: &Value, at: &str) -> Result<Step, SimError> {
        if let Some(word) = s.as_str() {
            return match word {
                "exit" => Ok(Step::Exit),
                "yield" => Ok(Step::Yield),
                "end_sim" => Ok(Step::EndSim),
                _ => Err(ferr(at, format!("unknown step '{word}': bare steps are exit, yield, end_sim"))),
            };
        }
        let o = s.as_object().ok_or_else(|| ferr(at, "a step is a string or an object".into()))?;
        let kind = ["run", "sleep", "send", "recv", "broadcast", "wait", "fork", "nice", "loop", "period"]
            .into_iter()
            .find(|k| o.contains_key(*k))
            .ok_or_else(|| {
                ferr(at, "unknown step: use run, sleep, send, recv, broadcast, wait, fork, nice, loop or period".into())
            })?;
        let allowed: &[&str] = if kind == "loop" || kind == "period" { &[kind, "do"] } else { &[kind] };
        check_fields(o, at, allowed)?;
        let val = &o[kind];
        let name = || val.as_str().map(str::to_string).ok_or_else(|| ferr(at, format!("{kind} takes a name")));
        Ok(match kind {
            "run" => Step::Run(dur(val, at)?),
            "sleep" => Step::Sleep(dur(val, at)?),
            "send" => Step::Send(self.channel(&name()?, None)),
            "recv" => Step::Recv(self.channel(&name()?, None)),
            "broadcast" => Step::Broadcast(self.cond(&name()?)),
            "wait" => Step::Wait(self.cond(&name()?)),
            "fork" => {
                let n = name()?;
                Step::Fork(
                    self.templates
                        .iter()
                        .position(|t| *t == n)
                        .ok_or_else(|| ferr(at, format!("fork: no task template named '{n}'")))?,
                )
            }
            "nice" => Step::Nice(
                val.as_i64()
                    .filter(|n| (-20..=19).contains(n))
                    .ok_or_else(|| ferr(at, "nice takes an integer -20..19".into()))? as i32,
            ),
            "loop" => {
                let n = match val {
                    Value::String(s) if s == "forever" => None,
                    _ => Some(val.as_u64().ok_or_else(|| ferr(at, "loop takes a count or \"forever\"".into()))?),
                };
                let body = o
                    .get("do")
                    .and_then(Value::as_array)
                    .ok_or_else(|| ferr(at, "loop needs \"do\": [steps]".into()))?;
                Step::Loop(n, self.steps(body, &format!("{at}.do"))?)
            }
            "period" => {
                let Dur::Fixed(p) = dur(val, at)? else {
                    return Err(ferr(at, "period must be a fixed duration".into()));
                };
                if PERIOD.parse(&p.to_string()).is_err() {
                    return Err(ferr(at, format!("period {}: give a period from 1us to 100s", crate::spec::fmt_ns(p))));
                }
                let body = o
                    .get("do")
                    .and_then(Value::as_array)
                    .ok_or_else(|| ferr(at, "period needs \"do\": [steps]".into()))?;
                let mut v = vec![Step::PeriodStart(p)];
                v.extend(self.steps(body, &format!("{at}.do"))?);
                v.push(Step::PeriodEnd);
                return Ok(Step::Loop(Some(1), v));
            }
            _ => unreachable!(),
        })
    }
}

/// Longest duration of one step in a workload file (1e6 s, 11.6 days):
/// simulated time stays far from overflow (an `exp` step may draw 20 means).
const FILE_DUR_MAX: u64 = 1_000_000_000_000_000;

fn dur(v: &Value, at: &str) -> Result<Dur, SimError> {
    let one = |x: &Value| -> Result<u64, SimError> {
        let ns = match x {
            Value::Number(n) => {
                n.as_u64().ok_or_else(|| ferr(at, format!("duration {n} must be a non-negative integer of ns")))
            }
            Value::String(s) => crate::spec::parse_ns(s)
                .ok_or_else(|| ferr(at, format!("bad duration '{s}': write e.g. 1500, \"1.5ms\", \"20us\""))),
            _ => Err(ferr(at, "a duration is a number of ns or a string like \"2ms\"".into())),
        }?;
        if ns > FILE_DUR_MAX {
            return Err(ferr(
                at,
                format!("duration {} is longer than 1000000s: give a shorter one", crate::spec::fmt_ns(ns)),
            ));
        }
        Ok(ns)
    };
    if let Some(o) = v.as_object() {
        if let Some(u) = o.get("uniform").and_then(Value::as_array) {
            if u.len() == 2 {
                let (a, b) = (one(&u[0])?, one(&u[1])?);
                if a > b {
                    return Err(ferr(at, "uniform [A, B] needs A <= B".into()));
                }
                return Ok(Dur::Uniform(a, b));
            }
        }
        if let Some(m) = o.get("exp") {
            return Ok(Dur::Exp(one(m)?));
        }
        return Err(ferr(at, "a random duration is {\"uniform\": [A, B]} or {\"exp\": MEAN}".into()));
    }
    Ok(Dur::Fixed(one(v)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hackbench_has_the_live_structure() {
        let wl = build("hackbench[groups=2,loops=3]", 2).unwrap();
        assert_eq!(wl.tasks.len(), 80);
        assert_eq!(wl.channels.len(), 40);
        assert_eq!(wl.params["groups"], json!(2));
        assert_eq!(wl.params["send_cost"], json!(1500));
        let sender = wl.tasks.iter().find(|t| t.name == "hb1.send0").unwrap();
        let Step::Loop(Some(3), body) = &sender.program[0] else { panic!() };
        // One write to each of the 20 receivers of its own group.
        assert_eq!(body.iter().filter(|s| matches!(s, Step::Send(c) if (20..40).contains(c))).count(), 20);
    }

    #[test]
    fn file_format_parses_and_reports_errors_with_location() {
        let wl = parse_workload_file(
            r#"{"name":"pp","tasks":[
              {"name":"a","class":"fifo:10","program":[{"loop":5,"do":[{"run":"1ms"},{"send":"x"},{"recv":"y"}]}]},
              {"name":"b","nice":5,"program":[{"loop":"forever","do":[{"recv":"x"},{"run":{"uniform":["1us","2us"]}},{"send":"y"}]}]},
              {"name":"kid","count":0,"program":[{"run":100},"exit"]}]}"#,
        )
        .unwrap();
        assert_eq!(wl.tasks[0].class, Class::Fifo(10));
        assert_eq!(wl.channels.len(), 2);
        let e = parse_workload_file(r#"{"tasks":[{"program":[{"runn":1}]}]}"#).unwrap_err().to_string();
        assert!(e.contains("tasks[0].program[0]") && e.contains("unknown"), "{e}");
        let e = parse_workload_file(r#"{"tasks":[{"program":[{"loop":"forever","do":[{"nice":1}]}]}]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("forever loop"), "{e}");
        assert!(parse_workload_file(r#"{"tasks":[{"class":"fifo:100","program":[]}]}"#).is_err());
    }

    #[test]
    fn pipe_pairs_an_echo_with_a_pinger_over_two_pipes() {
        let wl = build("pipe:pairs=2,loops=5,send_cost=1us,recv_cost=2us", 1).unwrap();
        let names: Vec<&str> = wl.tasks.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["pipe0.echo", "pipe0.ping", "pipe1.echo", "pipe1.ping"]);
        assert_eq!((wl.channels.len(), wl.round_trip_messages), (4, Some(2)));
        let Step::Loop(Some(5), echo) = &wl.tasks[2].program[0] else { panic!() };
        assert_eq!(echo[..], [Step::Recv(2), Step::Run(Dur::Fixed(3000)), Step::Send(3)]);
        let Step::Loop(Some(5), ping) = &wl.tasks[3].program[0] else { panic!() };
        assert_eq!(ping[1..3], [Step::Send(2), Step::Recv(3)]);
        assert_eq!(wl.params["loops"], json!(5));
        // loops=0 runs until the end of the run.
        let wl = build("pipe", 1).unwrap();
        assert!(matches!(wl.tasks[0].program[0], Step::Loop(None, _)));
        assert!(build("pipe:pairs=0", 1).unwrap_err().to_string().contains("pairs"));
    }

    #[test]
    fn a_long_overrun_of_a_short_period_is_booked_with_bounded_work() {
        use schedlab_core::LatencyHistogram;
        // 5 and 1,000,000 skipped periods of 1 us, the oldest 1 s late.
        for k in [5u64, 1_000_000] {
            let mut h = LatencyHistogram::new();
            crate::engine::charge_skipped(&mut h, 1_000_000_000, 1_000, k);
            let exact_mean = 1e9 - (k - 1) as f64 * 1_000.0 / 2.0;
            assert_eq!((h.count(), h.max()), (k, Some(1_000_000_000)));
            let mean = h.mean().unwrap();
            assert!((mean / exact_mean - 1.0).abs() < 5e-3, "k={k}: {mean} vs {exact_mean}");
        }
    }

    #[test]
    fn bad_workload_specs_name_the_fix() {
        let e = build("hackbench[grups=3]", 2).unwrap_err().to_string();
        assert!(e.contains("grups") && e.contains("groups, loops"), "{e}");
        let e = build("hogs[nice=0,30]", 2).unwrap_err().to_string();
        assert!(e.contains("from -20 to 19"), "{e}");
        let e = build("hakbench", 2).unwrap_err().to_string();
        assert!(e.contains("hackbench"), "{e}");
        assert!(build("@file.json", 2).unwrap_err().to_string().contains("contents"));
    }
}
