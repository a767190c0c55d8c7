//! schedlab-sim: a deterministic CPU-scheduler simulator.
//!
//! ```text
//!  workload spec ──► WorkloadDef (task templates: programs, class, nice)
//!                         │
//!  policy spec ──► Box<dyn Policy> + RtLayer ──► Engine ──► BenchResult (+ Timeline)
//!                         (decisions)            (time, CPUs, events, metrics)
//! ```
//!
//! Architecture invariants: the engine is pure (no clock, files or
//! environment), time is integer ns, events are ordered by `(time, seq)`,
//! there is one RNG seeded from [`SimOptions::seed`], and no result depends on
//! hash order. Same inputs give byte-identical results.
//!
//! Policy specs are `name[key=value,...]` with a normal-class policy name
//! (`cfs`, `eevdf`, `linux24`, `o1`, `4bsd`, `ule`, `staircase`, `nicksched`,
//! `ingo_ll`, `fixedprio`, `bfs`, `ule1`). Tasks of an RT class (FIFO/RR) in
//! the workload always go through the built-in POSIX layer (`policy::rt`),
//! layered above the named policy; its tunables (`rt_runtime`,
//! `rt_period`, `rr_timeslice`) are accepted in any policy spec. Tasks of
//! class `dl=Q/D/P` run in the SCHED_DEADLINE class (`policy::deadline`)
//! above both, admitted against `rt_runtime/rt_period` of every CPU.

#![forbid(unsafe_code)]

pub mod cost;
pub mod engine;
pub mod estimate;
pub mod policy;
pub mod program;
pub mod scenario;
pub mod spec;
pub mod timeline;
pub mod workload;

pub use cost::CostTable;
pub use policy::{PolicyInfo, TunableInfo};
pub use spec::{BuildFor, Scale, Tunable};
pub use timeline::{StateVar, Timeline, TimelineTask};
pub use workload::{parse_workload_file, TaskDef, WorkloadDef, WorkloadInfo};

use policy::nice_weight;
use program::Class;
use schedlab_core::param::{Kind, Param, TimeUnit};
use schedlab_core::{BenchResult, BenchStatus, Condition, Direction, Metric, SimSetup, Unit};
use spec::{fmt_ns, Spec};
use std::sync::atomic::{AtomicU64, Ordering};

/// Engine options (the run's setup besides policy and workload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimOptions {
    pub cpus: u32,
    pub hz: u32,
    /// Simulated time limit; a run also ends when every task has exited.
    pub duration_ns: u64,
    pub seed: u64,
    pub record_timeline: bool,
    /// CPU time charged to a task each time it is switched in.
    pub ctx_switch_ns: u64,
    /// Extra CPU time charged to a task that resumes on a different CPU (cache refill).
    pub migration_ns: u64,
    /// What the scheduler's own work costs per operation (see [`cost`]);
    /// [`CostTable::ZERO`] makes it free, as before costs were modelled.
    pub cost: CostTable,
    /// Replay run-step completions that decide nothing in bulk (see
    /// `engine/fast.rs`). Results are identical either way; off only to check
    /// that, or to measure the speed-up.
    pub fast_forward: bool,
    /// Most events one run may take: a spec whose estimate is above it is
    /// refused before it starts, and a run that gets past it is stopped
    /// (an error, no result).
    pub max_events: u64,
}

/// Default [`SimOptions::max_events`]: a minute or two of one core at the
/// engine's 10+ M events/s (docs/sim.md), far above every built-in workload
/// at its defaults, far below a runaway spec (issue 12: a zero-work yield
/// loop for the default 10 s would take 2e10 events, 40 minutes).
pub const DEFAULT_MAX_EVENTS: u64 = 1_000_000_000;

/// Most simulated time a run may cover (the same 30 years `parse_duration_ns` allows).
pub const MAX_DURATION_NS: u64 = 1_000_000_000_000_000_000;
/// Most CPU time a context switch or a migration may be charged.
pub const MAX_SWITCH_COST_NS: u64 = 1_000_000_000;

/// Progress of running simulations, for a caller that shows it: engines add
/// the simulated time and events they have covered (summed over the seeds
/// running); nothing here reads a clock or draws anything. Reading it never
/// changes a result.
#[derive(Debug, Default)]
pub struct Progress {
    simulated_ns: AtomicU64,
    events: AtomicU64,
}

impl Progress {
    pub fn new() -> Self {
        Self::default()
    }

    /// Simulated ns covered so far, over all seeds.
    pub fn simulated_ns(&self) -> u64 {
        self.simulated_ns.load(Ordering::Relaxed)
    }

    /// Events processed so far, over all seeds.
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    pub(crate) fn add(&self, ns: u64, events: u64) {
        self.simulated_ns.fetch_add(ns, Ordering::Relaxed);
        self.events.fetch_add(events, Ordering::Relaxed);
    }
}

/// The run's own settings, recorded (in ns) beside the workload's
/// parameters because they change results; their defaults are `sim`'s
/// (the cost ones are [`CostTable::DEFAULT`]'s, a test checks they agree).
pub const RUN_PARAMS: [Param; 11] = [
    Param::new(
        "duration",
        Kind::Duration { unit: TimeUnit::Ns, min: 1, max: MAX_DURATION_NS },
        "10s",
        "simulated time limit",
    ),
    Param::new(
        "ctx_switch",
        Kind::Duration { unit: TimeUnit::Ns, min: 0, max: MAX_SWITCH_COST_NS },
        "2us",
        "CPU time charged per context switch",
    ),
    Param::new(
        "migration",
        Kind::Duration { unit: TimeUnit::Ns, min: 0, max: MAX_SWITCH_COST_NS },
        "10us",
        "extra CPU time charged when a task resumes on another CPU",
    ),
    Param::new("scan_cost", COST, "50ns", "scheduler CPU time per entry examined (task or CPU scanned, tree level)"),
    Param::new("queue_cost", COST, "40ns", "scheduler CPU time per run queue searched, inserted into or removed from"),
    Param::new("lock_cost", COST, "60ns", "scheduler CPU time per runqueue lock taken"),
    Param::new("ipi_cost", COST, "500ns", "CPU time to send a reschedule IPI"),
    Param::new("ipi_latency", COST, "2us", "from sending a reschedule IPI to the target CPU acting on it"),
    Param::new(
        "wake_cost",
        COST,
        "0ns",
        "the waker's CPU time around a condition wake-up (futex wake and syscalls), per task woken; set by a calibration",
    ),
    Param::new(
        "channel_wake",
        COST,
        "0ns",
        "the waker's CPU time when a pipe or socket operation wakes the task blocked on it, per task woken; set by a calibration",
    ),
    Param::new(
        "idle_exit",
        COST,
        "0ns",
        "from an idle CPU being given work (an IPI, its own timer) to it acting on it; set by a calibration",
    ),
];

/// Run parameters recorded only when not 0: added after results were
/// stored, and left out at 0 so that those results keep their identity.
const RECORDED_WHEN_SET: [&str; 3] = ["wake_cost", "channel_wake", "idle_exit"];

const COST: Kind = Kind::Duration { unit: TimeUnit::Ns, min: 0, max: MAX_SWITCH_COST_NS };

impl SimOptions {
    /// The values [`RUN_PARAMS`] records, in its order (ns).
    pub fn run_param_values(&self) -> [u64; 11] {
        let c = &self.cost;
        [
            self.duration_ns,
            self.ctx_switch_ns,
            self.migration_ns,
            c.scan_ns,
            c.queue_ns,
            c.lock_ns,
            c.ipi_ns,
            c.ipi_latency_ns,
            c.wake_ns,
            c.channel_wake_ns,
            c.idle_exit_ns,
        ]
    }
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            cpus: 2,
            hz: 1000,
            duration_ns: 10_000_000_000,
            seed: 1,
            record_timeline: false,
            ctx_switch_ns: 2_000,
            migration_ns: 10_000,
            cost: CostTable::DEFAULT,
            fast_forward: true,
            max_events: DEFAULT_MAX_EVENTS,
        }
    }
}

/// The result of one simulated run.
#[derive(Debug, Clone)]
pub struct SimOutcome {
    pub result: BenchResult,
    pub timeline: Option<Timeline>,
    /// Events processed (ticks, run-step completions, timer wakeups, RT period timers).
    pub events: u64,
    /// Of those, run-step completions replayed by the fast path.
    pub fast_events: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    #[error("bad {what} spec '{spec}': {why}")]
    BadSpec { what: &'static str, spec: String, why: String },
    #[error("unknown policy '{name}': valid policies are {valid} (RT tasks always use the built-in fifo/rr layer, and SCHED_DEADLINE tasks the deadline class above it; name a normal-class policy, e.g. cfs)")]
    UnknownPolicy { name: String, valid: String },
    #[error("unknown workload '{name}': valid workloads are {valid}, or pass a JSON workload file's contents")]
    UnknownWorkload { name: String, valid: String },
    #[error("unknown {what} parameter '{key}' for {name}: valid keys are {valid}")]
    UnknownKey { what: &'static str, name: String, key: String, valid: String },
    #[error("bad value '{value}' for {name} key '{key}': expected {expected}")]
    BadValue { name: String, key: String, value: String, expected: String },
    /// A value of the right form that cannot be used, and why (not what form is expected).
    #[error("bad value '{value}' for {name} key '{key}': {why}")]
    BadValueWhy { name: String, key: String, value: String, why: String },
    #[error("workload file, {at}: {why}")]
    BadWorkloadFile { at: String, why: String },
    #[error("workload '@{0}': the simulator does not read files; read the file and pass its contents (a JSON object) instead")]
    FileSpec(String),
    #[error("bad simulator option: {0}")]
    BadOptions(String),
    #[error("scenario {origin}: {why}")]
    BadScenario { origin: String, why: String },
    #[error("{}", too_many_events(*.estimate, *.limit, *.duration_ns))]
    TooManyEvents {
        /// Estimated events of one run (None: unbounded).
        estimate: Option<u64>,
        limit: u64,
        duration_ns: u64,
    },
    #[error("stopped after {limit} events at {} of {} simulated: the run needs more events than the limit; shorten the duration, lighten the workload, or raise the event limit (sim --max-events)", fmt_ns(*.at_ns), fmt_ns(*.duration_ns))]
    EventLimit { limit: u64, at_ns: u64, duration_ns: u64 },
    #[error("deadline tasks: {0}")]
    Deadline(String),
    #[error("the workload creates more than {limit} tasks (at {} simulated): every task is kept for its per-task results; fork fewer tasks", fmt_ns(*.at_ns))]
    TaskLimit { limit: u64, at_ns: u64 },
    #[error("the timeline has no state variable '{asked}'; this policy's are:\n{available}")]
    UnknownQuantity { asked: String, available: String },
}

fn too_many_events(estimate: Option<u64>, limit: u64, duration_ns: u64) -> String {
    let Some(est) = estimate else {
        return "a forever loop of the workload lets no simulated time pass (zero-time steps, or blocking steps \
                with a zero context-switch cost), so the run would never end: give its steps a duration"
            .into();
    };
    // The duration that fits the limit, rounded down to two significant digits.
    let fit = duration_ns as f64 * limit as f64 / est as f64;
    let shorter = if fit >= 1.0 {
        let mag = 10f64.powi(fit.log10().floor() as i32 - 1).max(1.0);
        format!("shorten the duration to about {}", fmt_ns(((fit / mag).floor() * mag) as u64))
    } else {
        "shorten the duration".into()
    };
    // The estimate rounded up to two significant digits, as a limit to give.
    let e = est as f64;
    let mag = 10f64.powi(e.log10().floor() as i32 - 1).max(1.0);
    let raise = ((e / mag).ceil() * mag).min(u64::MAX as f64) as u64;
    format!(
        "this simulation would take about {e:.1e} events per seed over {} simulated, more than the limit of \
         {limit}: {shorter}, lighten the workload (fewer tasks, longer run steps), or raise the limit \
         (sim --max-events {raise}) to run it anyway (progress is shown on a terminal)",
        fmt_ns(duration_ns),
    )
}

/// Every policy with its tunables (the RT layer last, as "rt").
pub fn policies() -> Vec<PolicyInfo> {
    let mut v = policy::policy_infos();
    v.push(PolicyInfo {
        name: "rt",
        summary: "POSIX SCHED_FIFO/SCHED_RR layer with RT throttling, and SCHED_DEADLINE (EDF + CBS, admission control) above it for tasks of class dl=Q/D/P; always active, keys accepted in any policy spec",
        priority_quantity: "rt_priority (fixed; not in the timeline)",
        tunables: policy::rt::tunables(),
    });
    v
}

/// A policy's listing (as [`policies`]) with each scaled default as it is
/// for `cpus` CPUs at `hz`; None for an unknown name.
pub fn policy_info_for(name: &str, cpus: usize, hz: u32) -> Option<PolicyInfo> {
    policies().into_iter().find(|p| p.name == name).map(|p| p.for_machine(cpus, hz))
}

/// A policy's tunables and the RT layer's, which any policy spec takes.
fn tunable_table(policy: &str) -> Vec<Tunable> {
    policies()
        .iter()
        .filter(|p| p.name == policy || p.name == "rt")
        .flat_map(|p| p.tunables.iter().map(|t| t.tunable))
        .collect()
}

/// A policy spec with lists for its tunables (`cfs:sched_latency=3ms,6ms,12ms`),
/// as the specs it sweeps over: one per combination, in order, in the
/// current spelling. A spec without lists is itself. Keys that take one
/// value only; the spec's own errors come from [`check_run`].
pub fn sweep_policies(policy_spec: &str) -> Result<Vec<String>, SimError> {
    let mut spec = Spec::parse(policy_spec, "policy")?;
    let table = tunable_table(&spec.name);
    spec.rename_old_keys(&table)?;
    let mut specs: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for (k, v) in &spec.params {
        let listable = table.iter().any(|t| t.key == k && !matches!(t.kind, schedlab_core::param::Kind::Flag));
        // Spec::parse has refused empty elements already.
        let values: Vec<&str> = if listable { v.split(',').map(str::trim).collect() } else { vec![v.as_str()] };
        specs = specs
            .into_iter()
            .flat_map(|base| values.iter().map(move |x| [base.clone(), vec![(k.clone(), x.to_string())]].concat()))
            .collect();
    }
    Ok(specs.into_iter().map(|params| Spec { name: spec.name.clone(), params }.colon_form()).collect())
}

/// A workload spec with lists for keys that take one value
/// (`hackbench:groups=1,2,4`), as the specs it sweeps over, one per
/// combination, in order; a spec without such lists (or a workload file) is
/// itself. A list key (`hogs:nice=0,5`) keeps its list.
pub fn sweep_workloads(workload_spec: &str) -> Result<Vec<String>, SimError> {
    use schedlab_core::param::Kind;
    let text = workload_spec.trim();
    if text.starts_with(['{', '@']) {
        return Ok(vec![workload_spec.to_string()]);
    }
    let spec = Spec::parse(text, "workload")?;
    let Some(info) = workload::workload_infos().into_iter().find(|i| i.name == spec.name) else {
        return Ok(vec![workload_spec.to_string()]);
    };
    let mut specs: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for (k, v) in &spec.params {
        let single = info.params.iter().any(|p| {
            (p.name == k || p.old_name == Some(k.as_str()))
                && matches!(p.kind, Kind::Count { .. } | Kind::Duration { .. } | Kind::Size { .. })
        });
        let values: Vec<&str> = if single { v.split(',').map(str::trim).collect() } else { vec![v.as_str()] };
        specs = specs
            .into_iter()
            .flat_map(|base| values.iter().map(move |x| [base.clone(), vec![(k.clone(), x.to_string())]].concat()))
            .collect();
    }
    if specs.len() == 1 {
        return Ok(vec![workload_spec.to_string()]);
    }
    Ok(specs.into_iter().map(|params| Spec { name: spec.name.clone(), params }.colon_form()).collect())
}

/// Notes on older spellings a spec still uses (accepted for a release):
/// `name[key=value]` for `name:key=value`, and key names that carried
/// their unit (`sched_latency_ns` for `sched_latency`). Empty when the
/// specs are current or do not parse (their errors come from the run).
pub fn spelling_notes(policy_spec: &str, workload_spec: &str) -> Vec<String> {
    let mut notes = Vec::new();
    for (what, text) in [("policy", policy_spec), ("workload", workload_spec)] {
        let text = text.trim();
        if text.starts_with(['{', '@']) {
            continue;
        }
        if text.contains('[') {
            let colon = Spec::parse(text, what).map(|s| s.colon_form()).unwrap_or_default();
            notes.push(format!(
                "{what} '{text}': name[key=value] is the older spelling, accepted until schedlab 0.3; write {colon}"
            ));
        }
        let renamed = match what {
            "policy" => Spec::parse(text, what)
                .ok()
                .and_then(|mut s| s.rename_old_keys(&tunable_table(&s.name.clone())).ok())
                .unwrap_or_default(),
            _ => workload::resolve(text).map(|(_, _, v)| v.renamed).unwrap_or_default(),
        };
        for (old, new) in renamed {
            notes.push(format!(
                "{what} key '{old}' is now '{new}' (its value carries the unit): '{old}' is accepted until schedlab 0.3"
            ));
        }
    }
    notes
}

pub fn workloads() -> Vec<WorkloadInfo> {
    workload::workload_infos()
}

fn check_opts(o: &SimOptions) -> Result<(), SimError> {
    if o.cpus == 0 || o.cpus > 1024 {
        return Err(SimError::BadOptions(format!("cpus = {}: use 1 to 1024 CPUs", o.cpus)));
    }
    if o.hz < 10 || o.hz > 100_000 {
        return Err(SimError::BadOptions(format!("hz = {}: use a tick rate between 10 and 100000", o.hz)));
    }
    if o.duration_ns == 0 || o.duration_ns > MAX_DURATION_NS {
        return Err(SimError::BadOptions(format!(
            "duration {}: give a positive simulated duration up to 30 years, e.g. 10s",
            fmt_ns(o.duration_ns)
        )));
    }
    for (p, ns) in RUN_PARAMS.iter().zip(o.run_param_values()).skip(1) {
        if ns > MAX_SWITCH_COST_NS {
            return Err(SimError::BadOptions(format!(
                "{} {}: give at most 1s {} (the default is {})",
                p.name,
                fmt_ns(ns),
                // The two latencies are time waited, not CPU time spent.
                if matches!(p.name, "ipi_latency" | "idle_exit") { "of latency" } else { "of CPU time" },
                p.default
            )));
        }
    }
    if o.max_events == 0 {
        return Err(SimError::BadOptions("max_events is 0: allow at least one event".into()));
    }
    Ok(())
}

/// Refuse a run that would create too many tasks at once or take more
/// events than `opts.max_events` by [`estimate::events`].
fn check_budget(wl: &WorkloadDef, opts: &SimOptions, rt: &policy::rt::RtLayer) -> Result<(), SimError> {
    let initial: u64 = wl.tasks.iter().map(|t| u64::from(t.count)).sum();
    if initial > workload::MAX_TASKS {
        return Err(SimError::TaskLimit { limit: workload::MAX_TASKS, at_ns: 0 });
    }
    rt.dl_admit(wl, opts.cpus)?;
    let est = estimate_events_of(wl, opts, rt);
    if est > opts.max_events as f64 {
        let estimate = est.is_finite().then(|| est.min(u64::MAX as f64) as u64);
        return Err(SimError::TooManyEvents { estimate, limit: opts.max_events, duration_ns: opts.duration_ns });
    }
    Ok(())
}

fn estimate_events_of(wl: &WorkloadDef, opts: &SimOptions, rt: &policy::rt::RtLayer) -> f64 {
    if !wl.rows.is_empty() {
        return wl.rows.iter().map(|(_, row)| estimate_events_of(row, opts, rt)).sum();
    }
    let rt_period = (rt.runtime_ns > 0).then_some(rt.period_ns);
    let tick_ns = 1_000_000_000 / opts.hz as u64;
    estimate::events(wl, opts.cpus, opts.duration_ns, tick_ns, opts.ctx_switch_ns, rt_period)
}

/// Everything [`run_seeds`] checks before it starts (options, workload,
/// policy, task count, event budget), without simulating: a caller with
/// several runs to make can refuse a bad one before the first starts.
/// Ok: the events one seed is estimated to take (see [`estimate`]).
pub fn check_run(policy_spec: &str, workload_spec: &str, opts: &SimOptions) -> Result<f64, SimError> {
    check_opts(opts)?;
    let wl = workload::build(workload_spec, opts.cpus)?;
    let (_, _, rt) = build_policy(policy_spec, opts.cpus, opts.hz)?;
    check_budget(&wl, opts, &rt)?;
    Ok(estimate_events_of(&wl, opts, &rt))
}

/// Parse a policy spec for `cpus` CPUs: the normal policy and the RT layer.
pub fn build_policy(
    policy_spec: &str,
    cpus: u32,
    hz: u32,
) -> Result<(String, Box<dyn policy::Policy>, policy::rt::RtLayer), SimError> {
    // Policies size per-CPU state and divide by HZ: check both first.
    check_opts(&SimOptions { cpus, hz, ..SimOptions::default() })?;
    let mut spec = Spec::parse(policy_spec, "policy")?;
    spec.normalize(&tunable_table(&spec.name))?;
    if ["fifo", "rr", "deadline", "dl"].contains(&spec.name.as_str()) {
        return Err(SimError::UnknownPolicy {
            name: spec.name.clone(),
            valid: policy::policy_infos().iter().map(|i| i.name).collect::<Vec<_>>().join(", "),
        });
    }
    // Split the RT keys off; the rest belongs to the normal policy.
    let mut normal = spec.clone();
    normal.params.retain(|(k, _)| !policy::rt::KEYS.contains(&k.as_str()));
    let p = policy::build(&normal, cpus as usize, hz)?;
    let rt = policy::rt::RtLayer::new(&spec, cpus as usize, hz)?;
    Ok((spec.canonical(), p, rt))
}

/// Run `workload_spec` under `policy_spec`. The workload spec is a named
/// workload (`hackbench[groups=10]`) or a JSON workload file's contents.
pub fn run(policy_spec: &str, workload_spec: &str, opts: &SimOptions) -> Result<SimOutcome, SimError> {
    check_opts(opts)?;
    let wl = workload::build(workload_spec, opts.cpus)?;
    run_workload(policy_spec, &wl, opts)
}

/// Run a parsed workload (see [`parse_workload_file`]).
pub fn run_workload(policy_spec: &str, wl: &WorkloadDef, opts: &SimOptions) -> Result<SimOutcome, SimError> {
    run_workload_with(policy_spec, wl, opts, None)
}

fn run_workload_with(
    policy_spec: &str,
    wl: &WorkloadDef,
    opts: &SimOptions,
    progress: Option<&Progress>,
) -> Result<SimOutcome, SimError> {
    check_opts(opts)?;
    if !wl.rows.is_empty() {
        // interactive's loads=: each row alone, with the same seed, then one result.
        let (_, _, rt) = build_policy(policy_spec, opts.cpus, opts.hz)?;
        check_budget(wl, opts, &rt)?;
        let mut outs = Vec::with_capacity(wl.rows.len());
        for (i, (label, row)) in wl.rows.iter().enumerate() {
            let o = SimOptions { record_timeline: opts.record_timeline && i == 0, ..opts.clone() };
            outs.push((label.clone(), run_workload_with(policy_spec, row, &o, progress)?));
        }
        return Ok(workload::interactive::join_rows(wl, outs));
    }
    let (canon, policy, rt) = build_policy(policy_spec, opts.cpus, opts.hz)?;
    check_budget(wl, opts, &rt)?;
    let mut engine = engine::Engine::new(opts, wl, policy, rt);
    if let Some(p) = progress {
        engine = engine.with_progress(p);
    }
    let (st, timeline) = engine.run();
    match st.abort {
        Some(engine::Abort::Events) => {
            return Err(SimError::EventLimit {
                limit: opts.max_events,
                at_ns: st.elapsed_ns,
                duration_ns: opts.duration_ns,
            })
        }
        Some(engine::Abort::Tasks) => {
            return Err(SimError::TaskLimit { limit: workload::MAX_TASKS, at_ns: st.elapsed_ns })
        }
        None => {}
    }
    let (events, fast_events) = (st.events, st.fast_events);
    let result = to_result(&canon, wl, opts, st);
    Ok(SimOutcome { result, timeline, events, fast_events })
}

/// Seeds a simulated comparison runs by default: with 5 a side, a 10 %
/// change in a workload whose makespan varies ~2 % from seed to seed is
/// found in 95 % of pairs, with 3 in 45 % (crates/report/tests/verdicts.rs).
pub const DEFAULT_SEEDS: u32 = 5;

/// Run `workload_spec` under `policy_spec` once per seed, `opts.seed`,
/// `opts.seed + 1`, ...: the seeds are the simulator's replicates. Seeds run
/// in parallel; each result is exactly what a serial run of that seed gives
/// (one RNG per run, nothing shared). Only the first seed records a timeline.
pub fn run_seeds(
    policy_spec: &str,
    workload_spec: &str,
    opts: &SimOptions,
    seeds: u32,
) -> Result<Vec<SimOutcome>, SimError> {
    run_seeds_with_progress(policy_spec, workload_spec, opts, seeds, None)
}

/// [`run_seeds`], adding every seed's simulated time and events to
/// `progress` as they run (the results are the same with or without).
pub fn run_seeds_with_progress(
    policy_spec: &str,
    workload_spec: &str,
    opts: &SimOptions,
    seeds: u32,
    progress: Option<&Progress>,
) -> Result<Vec<SimOutcome>, SimError> {
    use rayon::prelude::*;
    check_opts(opts)?;
    let wl = workload::build(workload_spec, opts.cpus)?;
    let (_, _, rt) = build_policy(policy_spec, opts.cpus, opts.hz)?;
    // Before any seed starts: one refusal, not one per seed.
    check_budget(&wl, opts, &rt)?;
    (0..seeds)
        .into_par_iter()
        .map(|i| {
            let o = SimOptions {
                seed: opts.seed.wrapping_add(i as u64),
                record_timeline: opts.record_timeline && i == 0,
                ..opts.clone()
            };
            let mut out = run_workload_with(policy_spec, &wl, &o, progress)?;
            out.result.invocation = i;
            Ok(out)
        })
        .collect()
}

/// The per-task state variables `policy_spec`'s timeline records, its
/// dynamic priority first (what `sim --quantity` chooses from).
pub fn state_vars(policy_spec: &str) -> Result<&'static [StateVar], SimError> {
    let (_, p, _) = build_policy(policy_spec, 1, SimOptions::default().hz)?;
    Ok(p.state_quantities())
}

/// Timeslice against nice, -20..=19, for one CPU at `hz` (what a nice-n task
/// gets per turn while sharing the CPU with one nice-0 hog; see each policy).
pub fn timeslice_curve(policy_spec: &str, hz: u32) -> Result<Vec<(i32, u64)>, SimError> {
    check_opts(&SimOptions { hz, ..SimOptions::default() })?;
    let (_, p, _) = build_policy(policy_spec, 1, hz)?;
    Ok((-20..=19).map(|n| (n, p.timeslice_ns(n))).collect())
}

/// Fair CPU time of each task: total time split by weight, with no task
/// given more than `cap` (its lifetime on one CPU); water-filling.
fn fair_shares(total: f64, weights: &[f64], caps: &[f64]) -> Vec<f64> {
    let n = weights.len();
    let mut fixed = vec![None; n];
    loop {
        let rem_total: f64 = total - fixed.iter().flatten().sum::<f64>();
        let rem_w: f64 = (0..n).filter(|&i| fixed[i].is_none()).map(|i| weights[i]).sum();
        let mut changed = false;
        for i in 0..n {
            if fixed[i].is_none() && rem_w > 0.0 && rem_total * weights[i] / rem_w > caps[i] {
                fixed[i] = Some(caps[i]);
                changed = true;
            }
        }
        if !changed {
            return (0..n)
                .map(|i| fixed[i].unwrap_or(if rem_w > 0.0 { rem_total * weights[i] / rem_w } else { 0.0 }))
                .collect();
        }
    }
}

fn to_result(canon: &str, wl: &WorkloadDef, opts: &SimOptions, st: engine::Stats) -> BenchResult {
    let cond = Condition::Sim(SimSetup { policy: canon.to_string(), cpus: opts.cpus, hz: opts.hz, seed: opts.seed });
    let mut r = BenchResult::new(format!("sim:{}", wl.name), cond, 0);
    r.params = wl.params.clone();
    for (p, ns) in RUN_PARAMS.iter().zip(opts.run_param_values()) {
        if ns != 0 || !RECORDED_WHEN_SET.contains(&p.name) {
            r.params.insert(p.name.into(), ns.into());
        }
    }
    r.ended_unix_ms = Some(0);
    r.repetitions = 1;
    r.status = BenchStatus::Complete;
    r.warnings = st.warnings.clone();
    let secs = st.elapsed_ns as f64 / 1e9;
    let mut m = Vec::new();
    if !st.wake_rt.is_empty() {
        m.push(Metric::histogram("wakeup_latency.rt", Direction::LowerIsBetter, st.wake_rt.clone()));
    }
    if !st.wake_dl.is_empty() {
        m.push(Metric::histogram("wakeup_latency.deadline", Direction::LowerIsBetter, st.wake_dl.clone()));
    }
    if !st.wake_normal.is_empty() {
        m.push(Metric::histogram("wakeup_latency.normal", Direction::LowerIsBetter, st.wake_normal.clone()));
    }
    if !st.rq_wait.is_empty() {
        m.push(Metric::histogram("runqueue_wait", Direction::LowerIsBetter, st.rq_wait.clone()));
    }
    m.push(Metric::samples("context_switches", Unit::Count, Direction::Neutral, vec![st.ctx_switches as f64]));
    m.push(Metric::samples("migrations", Unit::Count, Direction::LowerIsBetter, vec![st.migrations as f64]));
    if st.finished {
        m.push(Metric::samples("makespan", Unit::Seconds, Direction::LowerIsBetter, vec![secs]));
    } else if wl.headline.iter().any(|h| h == "makespan") {
        r.warnings.push(format!("not finished after {secs} simulated s: makespan not reported; raise the duration"));
    }
    for (name, count) in [("messages_per_s", st.messages), ("forks_per_s", st.forks)] {
        if count > 0 && secs > 0.0 {
            m.push(Metric::samples(name, Unit::PerSecond, Direction::HigherIsBetter, vec![count as f64 / secs]));
        }
    }
    if let Some(k) = wl.round_trip_messages.filter(|&k| k > 0 && secs > 0.0) {
        // Whole trips: with several pairs, one pair's half trip still in flight
        // at the end may pair up with another's (at most half a trip per pair).
        let trips = (st.messages / k) as f64;
        m.push(Metric::samples("round_trips_per_s", Unit::PerSecond, Direction::HigherIsBetter, vec![trips / secs]));
    }
    // Only when scheduler work costs something: zero-cost results stay as they were.
    if !opts.cost.is_zero() && secs > 0.0 {
        m.push(Metric::samples(
            "scheduler_cpu",
            Unit::Percent,
            Direction::LowerIsBetter,
            vec![100.0 * st.sched_ns as f64 / (st.elapsed_ns as f64 * opts.cpus as f64)],
        ));
        m.push(Metric::samples("ipis", Unit::Count, Direction::LowerIsBetter, vec![st.ipis as f64]));
    }
    if secs > 0.0 {
        let busy: u64 = st.cpu_busy_ns.iter().sum();
        m.push(Metric::samples(
            "cpu_busy",
            Unit::Percent,
            Direction::Neutral,
            vec![100.0 * busy as f64 / (st.elapsed_ns as f64 * opts.cpus as f64)],
        ));
    }
    // interactive reports the live benchmark's table instead (per task, a row per load).
    let interbench = wl.name == "interactive";
    if interbench {
        m.extend(workload::interactive_metrics(wl, &st));
    }
    for (g, met, missed) in st.deadlines.iter().filter(|_| !interbench) {
        if met + missed > 0 {
            let pct = 100.0 * *met as f64 / (met + missed) as f64;
            m.push(Metric::samples(&format!("deadlines_met.{g}"), Unit::Percent, Direction::HigherIsBetter, vec![pct]));
        }
    }
    // SCHED_DEADLINE: per task, entities as cpu_share's, and its response times.
    if !st.dl.is_empty() {
        type Field = fn(&policy::deadline::DlStats) -> u64;
        let labels: Vec<String> = st.dl.iter().map(|d| d.0.clone()).collect();
        let fields: [(&str, Direction, Field); 3] = [
            ("dl_jobs", Direction::Neutral, |s| s.jobs),
            ("dl_deadline_misses", Direction::LowerIsBetter, |s| s.misses),
            ("dl_throttles", Direction::Neutral, |s| s.throttles),
        ];
        for (name, dir, f) in fields {
            let values = st.dl.iter().map(|d| f(&d.1) as f64).collect();
            m.push(Metric::entities(name, Unit::Count, dir, "task", labels.clone(), values));
        }
        for (name, s) in &st.dl {
            if !s.response.is_empty() {
                let metric = format!("dl_response_time.{name}");
                m.push(Metric::histogram(&metric, Direction::LowerIsBetter, s.response.clone()));
            }
        }
    }
    // CPU share of the always-runnable tasks against their weight's fair share.
    let share: Vec<_> = st.tasks.iter().filter(|t| wl.tasks[t.0 as usize].share && t.2 == Class::Normal).collect();
    if !share.is_empty() && st.elapsed_ns > 0 {
        let total: f64 = share.iter().map(|t| t.4 as f64).sum();
        let w: Vec<f64> = share.iter().map(|t| nice_weight(t.3) as f64).collect();
        let caps: Vec<f64> = share.iter().map(|t| t.5 as f64).collect();
        let fair = fair_shares(total, &w, &caps);
        let pct: Vec<f64> = share.iter().map(|t| 100.0 * t.4 as f64 / t.5.max(1) as f64).collect();
        let err: Vec<f64> = share
            .iter()
            .zip(&fair)
            .map(|(t, f)| if *f > 0.0 { 100.0 * (t.4 as f64 / f - 1.0).abs() } else { 0.0 })
            .collect();
        // One value per task: entities, not repetitions.
        let mut labels: Vec<String> = Vec::new();
        for t in &share {
            let mut l = t.1.clone();
            if labels.contains(&l) {
                l = format!("{} #{}", t.1, labels.len());
            }
            labels.push(l);
        }
        m.push(Metric::entities("cpu_share", Unit::Percent, Direction::Neutral, "task", labels.clone(), pct));
        m.push(Metric::entities("fair_share_error", Unit::Percent, Direction::LowerIsBetter, "task", labels, err));
    }
    m.extend(workload::report::metrics(
        wl,
        &workload::report::RunFacts {
            series: &st.series,
            elapsed_ns: st.elapsed_ns,
            finished: st.finished,
            busy_ns: st.cpu_busy_ns.iter().sum(),
            timer_overruns: st.timer_overruns,
        },
    ));
    for metric in &mut m {
        if wl.headline.contains(&metric.name) {
            metric.headline = true;
        }
    }
    r.metrics = m;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fair_shares_cap_tasks_at_one_cpu() {
        // Two hogs on 2 CPUs for 1 s: each is capped at 1 s whatever its weight.
        let f = fair_shares(2.0, &[1024.0, 335.0], &[1.0, 1.0]);
        assert_eq!(f, vec![1.0, 1.0]);
        // Three hogs on 2 CPUs: the heavy one is capped, the rest split by weight.
        let f = fair_shares(2.0, &[88761.0, 1024.0, 1024.0], &[1.0, 1.0, 1.0]);
        assert!((f[0] - 1.0).abs() < 1e-9 && (f[1] - 0.5).abs() < 1e-9);
    }
}
