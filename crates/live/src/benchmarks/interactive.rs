//! # Methodology
//!
//! **Goal.** E3's Interbench table: how well emulated interactive tasks get
//! the CPU they need, alone and beside background loads (interbench v0.31,
//! Con Kolivas; `../shared/peers.md`, "interbench").
//!
//! **Tasks** (`task=audio,video,x,gaming`, one case each; `custom` takes
//! `period=` and `cpu=`, interbench's `-I`/`-C`): *audio* wakes every 50 ms
//! and works 5 % of the period (2.5 ms); *video* wakes at 60 Hz and works
//! 40 % (6.67 ms); *X* runs 100 ms cycles whose work ramps from 0 % up
//! within each repetition (`n` = duration / 100 ms cycles, cycle `j` works
//! `j/n` of its 100 ms: at `duration=10100ms` interbench's 0..100 ms ramp in
//! 1 ms steps, less its 100 % step, which has no deadline there either);
//! *gaming* works 100 ms chunks back to back with no deadline and is judged
//! by the CPU it gets. Work is a calibrated busy loop (below), so a task
//! that gets less CPU takes longer, as interbench's `burn_loops`.
//!
//! **Loads** (`loads=`, one row each, measured one after the other within
//! the case): `none`, `video` (`video:1`), `x` (`x:1`), `burn` (`burn:N`, N =
//! online CPUs, interbench's default `-L`), `write` (`write:1`), `read`
//! (`read:1`) and `compile` (`compile:N`: a real `cc -O2` loop, not
//! interbench's burn+write+read mix); see `harness/load.rs`. Any load spec
//! may stand in the list when the list is quoted
//! (`loads='none,burn:2,nice=10,compile:4'`), labelled by its text. With the
//! default list a task is not measured against its own kind (video under
//! video, X under X), as interbench skips them. Each row's load starts
//! before the row's warm-up and is stopped after it (`harness::drive`); a
//! `--load` adds to every row.
//!
//! **Conditions.** The run's condition (`--policy/--prio/--nice/--cpus`,
//! `--mlock`) applies to the emulated task only: SCHED_OTHER nice 0 unless
//! given (interbench's default; its `-r` is `--policy fifo --prio 95
//! --mlock`, its `-B` is `--nice`); the loads carry their own
//! (`burn:2,nice=10` is its `-N 10`).
//!
//! **Timed.** Period `k` of a repetition is released at `T0 + k*P` (absolute
//! `clock_nanosleep`, timer slack 1 ns) and due at `T0 + (k+1)*P`. Its
//! latency is the wake-up (or, after an overrun, the moment the task gets to
//! it) minus its release. A period whose whole window passed before the task
//! got to it is dropped: its work is not done (it counts against desired
//! CPU), its deadline is missed, and its latency is still charged in full
//! (so a stall of S periods charges each of them, as `cyclic` does; never
//! skipped). A period worked meets its deadline if the work ends by its
//! end. Gaming's latency is how much longer than 100 ms a 100 ms chunk took.
//! interbench measures its latency from the wake-up of a FIFO timekeeper
//! thread and charges a late period's whole missed intervals onto one
//! sample; here the clock is read right after the task's own wake-up, so
//! timer latency is included (tens of us, below the ms scale of the table).
//!
//! **Figures** per task and load (entities labelled by the load, so `show`
//! prints interbench's table: a row per load): `latency_mean.T`,
//! `latency_sd.T`, `latency_max.T` (over every period of the measured
//! repetitions), `desired_cpu.T` (% of the work due that was done; gaming:
//! work done / time taken), `deadlines_met.T` (% of periods that met their
//! deadline; not for gaming); and per load the latency histogram
//! `latency.T@LOAD` (per repetition, headline), the load's throughput and
//! the kernel counters as `NAME@LOAD` (per repetition). The simulator's
//! `interactive` workload reports the table's figures under these names
//! (its load as the one entity), so `compare LIVE SIM` lines them up.
//!
//! **Calibration.** Loops of the work loop per ms, measured at the start of
//! a run on a thread under the case's condition (policy, affinity, uclamp),
//! before any load: 200 ms of spinning (so CPU frequency settles), then the
//! fastest of 9 samples of about 5 ms each, timed by the thread's own CPU
//! clock (preemption cannot lengthen them). It is cached for the rest of the
//! process per condition (interbench caches it in a file), and stored with
//! every result (`calibration_loops_per_ms`). `calibration=N` uses N
//! instead, so two machines or kernels do the same work per period; the
//! machine's own figure is measured and stored beside it
//! (`calibration_measured_loops_per_ms`), and a warning says when the two
//! differ by more than 10 %.
//!
//! **Bounds.** Every loop is bounded (a repetition has a fixed number of
//! periods; work is done in pieces of at most 1 ms, each followed by the
//! stop and deadline check), and under an RT policy the task is watched by
//! the RT watchdog; an RT X or gaming task counts as one busy RT task for
//! the starvation guard. A period shorter than the timer can serve (10 times
//! `clock_getres(CLOCK_MONOTONIC)`, and at least 100 us) is refused.

use crate::error::LiveError;
use crate::harness::load::emulated::{
    AUDIO_PERCENT, AUDIO_PERIOD_NS, GAMING_CHUNK_NS, VIDEO_PERCENT, VIDEO_PERIOD_NS, X_PERIOD_NS,
};
use crate::harness::load::{self, LoadKind, LoadReport, LoadSpec};
use crate::harness::params::{ParamKind, ParamSpec, Params, TimeUnit};
use crate::harness::{self, condition, now_ns, Ctx};
use crate::{Benchmark, RunPlan};
use schedlab_core::{BenchResult, Direction, LatencyHistogram, Metric, MetricData, SchedCondition, Unit};
use std::sync::Mutex;

pub struct Interactive;

const NAME: &str = "interactive";

const TASKS: [&str; 5] = ["audio", "video", "x", "gaming", "custom"];
const ROWS: [&str; 7] = ["none", "video", "x", "burn", "write", "read", "compile"];
const DEFAULT_LOADS: &str = "none,video,x,burn,write,read,compile";
/// The shortest period any task may have, whatever the timer.
const MIN_PERIOD_NS: u64 = 100_000;

const SPECS: &[ParamSpec] = &[
    ParamSpec {
        name: "task",
        default: "audio,video,x,gaming",
        quick_default: Some("video"),
        unit: "",
        help: "emulated tasks, one case each: audio, video, x, gaming, custom (period= and cpu=)",
        kind: ParamKind::Text,
        diagnostic: false,
    },
    ParamSpec {
        name: "loads",
        default: DEFAULT_LOADS,
        quick_default: Some("none,burn"),
        unit: "",
        help: "background loads, one row each: none, video, x, burn, write, read, compile, or any load spec (quote the list: loads='none,burn:2,nice=10')",
        kind: ParamKind::Text,
        diagnostic: false,
    },
    ParamSpec {
        name: "duration",
        default: "200",
        quick_default: None,
        unit: "",
        help: "length of one repetition (interbench runs 30 s per row; X's ramp spans each repetition)",
        kind: ParamKind::Duration { unit: TimeUnit::Ms, min: 100, max: 600_000 },
        diagnostic: false,
    },
    ParamSpec {
        name: "calibration",
        default: "0",
        quick_default: None,
        unit: "loops/ms",
        help: "work loop iterations per ms; 0: measure at the start under the condition (give another machine's figure to do the same work)",
        kind: ParamKind::Count { min: 0, max: 100_000_000_000 },
        diagnostic: false,
    },
    ParamSpec {
        name: "period",
        default: "10000",
        quick_default: None,
        unit: "",
        help: "period of task=custom (interbench -I)",
        kind: ParamKind::Duration { unit: TimeUnit::Us, min: 100, max: 10_000_000 },
        diagnostic: false,
    },
    ParamSpec {
        name: "cpu",
        default: "10",
        quick_default: None,
        unit: "%",
        help: "CPU percent of each period of task=custom (interbench -C)",
        kind: ParamKind::Count { min: 1, max: 100 },
        diagnostic: false,
    },
];

fn bad(key: &str, value: &str, expected: String) -> LiveError {
    LiveError::BadParam { bench: NAME, key: key.into(), value: value.into(), expected }
}

/// What one emulated task does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Task {
    /// Wakes every `period_ns` and works `percent` of it.
    Periodic { name: &'static str, period_ns: u64, percent: u64 },
    /// 100 ms cycles whose work ramps within a repetition.
    X,
    /// 100 ms chunks of work back to back.
    Gaming,
}

impl Task {
    fn of(name: &str, p: &Params) -> Result<Task, LiveError> {
        Ok(match name {
            "audio" => Task::Periodic { name: "audio", period_ns: AUDIO_PERIOD_NS, percent: AUDIO_PERCENT },
            "video" => Task::Periodic { name: "video", period_ns: VIDEO_PERIOD_NS, percent: VIDEO_PERCENT },
            "x" => Task::X,
            "gaming" => Task::Gaming,
            "custom" => {
                Task::Periodic { name: "custom", period_ns: p.count("period")? * 1000, percent: p.count("cpu")? }
            }
            other => return Err(bad("task", other, format!("one or more of {}, comma-separated", TASKS.join(", ")))),
        })
    }

    fn name(&self) -> &'static str {
        match self {
            Task::Periodic { name, .. } => name,
            Task::X => "x",
            Task::Gaming => "gaming",
        }
    }

    /// The length of a period (X: a cycle; gaming: a chunk).
    fn period_ns(&self) -> u64 {
        match self {
            Task::Periodic { period_ns, .. } => *period_ns,
            Task::X => X_PERIOD_NS,
            Task::Gaming => GAMING_CHUNK_NS,
        }
    }

    /// Periods in a repetition of `dur_ns` (at least one).
    fn periods(&self, dur_ns: u64) -> u64 {
        (dur_ns / self.period_ns()).max(1)
    }

    /// Work of period `k` of `n`, ns of calibrated loops.
    fn work_ns(&self, k: u64, n: u64) -> u64 {
        match self {
            Task::Periodic { period_ns, percent, .. } => period_ns * percent / 100,
            Task::X => X_PERIOD_NS * k / n.max(1),
            Task::Gaming => GAMING_CHUNK_NS,
        }
    }

    fn has_deadlines(&self) -> bool {
        *self != Task::Gaming
    }

    /// Keeps a CPU busy much of the time (the starvation guard's RT count).
    fn busy(&self) -> bool {
        matches!(self, Task::X | Task::Gaming)
    }
}

fn words(list: &str) -> Vec<String> {
    list.split(',').map(|w| w.trim().to_ascii_lowercase()).filter(|w| !w.is_empty()).collect()
}

/// The rows of `loads=`: (label, the load; None for `none`).
fn rows(p: &Params, task: Option<&str>) -> Result<Vec<(String, Option<LoadSpec>)>, LiveError> {
    let raw = p.word("loads")?;
    let cpus = condition::online_cpus()?.len();
    let default = raw == DEFAULT_LOADS;
    let mut out: Vec<(String, Option<LoadSpec>)> = Vec::new();
    for part in load::alternatives(raw)? {
        // A word that names no load joins the part before it: name it. (A
        // bare row takes nothing after it; a spec's extra parts are its keys.)
        let pieces: Vec<&str> = part.split(',').map(str::trim).collect();
        let is_row = |w: &str| ROWS.contains(&w.to_ascii_lowercase().as_str());
        if !part.contains(':') || (is_row(pieces[0]) && pieces.len() > 1) {
            if let Some(w) = pieces.iter().skip(usize::from(is_row(pieces[0]))).find(|w| !is_row(w)) {
                return Err(unknown_row(raw, w));
            }
        }
        let word = part.trim().to_ascii_lowercase();
        let spec_text = match word.as_str() {
            "none" => None,
            "video" | "x" | "write" | "read" => Some(format!("{word}:1")),
            "burn" | "compile" => Some(format!("{word}:{cpus}")),
            _ if word.contains(':') => Some(part.trim().to_string()),
            _ => return Err(unknown_row(raw, part.trim())),
        };
        let spec = match spec_text {
            None => None,
            Some(t) => Some(load::parse(&t)?),
        };
        let label = if ROWS.contains(&word.as_str()) {
            word.clone()
        } else {
            spec.as_ref().map_or(word.clone(), |s| s.text.clone())
        };
        if out.iter().any(|(l, _)| *l == label) {
            return Err(bad("loads", raw, format!("each row once; {label} is listed twice")));
        }
        // interbench does not measure a task against its own kind.
        if default && task == Some(label.as_str()) {
            continue;
        }
        out.push((label, spec.filter(|s| s.kind != LoadKind::None)));
    }
    if out.is_empty() {
        return Err(bad("loads", raw, "at least one row (none, burn, ...)".into()));
    }
    Ok(out)
}

fn unknown_row(raw: &str, word: &str) -> LiveError {
    bad(
        "loads",
        raw,
        format!(
            "rows from {}, or load specs such as burn:2,nice=10 (quote a list with conditions: loads='none,burn:2,nice=10'); '{word}' is neither",
            ROWS.join(", ")
        ),
    )
}

/// CLOCK_MONOTONIC's resolution in ns.
fn timer_resolution_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid, writable timespec.
    unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64).max(1)
}

/// A period the timer can serve: at least 100 us and 10 resolutions.
fn check_period(task: &Task, resolution_ns: u64) -> Result<(), LiveError> {
    let period = task.period_ns();
    let floor = MIN_PERIOD_NS.max(resolution_ns.saturating_mul(10));
    if period >= floor {
        return Ok(());
    }
    let key = if matches!(task, Task::Periodic { name: "custom", .. }) { "period" } else { "task" };
    Err(bad(
        key,
        &format!("{} ({} us)", task.name(), period / 1000),
        format!(
            "a period the timer can serve: at least {} us here, as CLOCK_MONOTONIC's resolution is {} us (sleeps are rounded to it; without high-resolution timers it is a tick); use a longer period= or a kernel with high-resolution timers",
            floor / 1000,
            resolution_ns as f64 / 1000.0
        ),
    ))
}

fn loads_of(plan: &RunPlan, row: &Option<LoadSpec>) -> Vec<LoadSpec> {
    plan.loads.iter().filter(|l| l.kind != LoadKind::None).cloned().chain(row.iter().cloned()).collect()
}

impl Benchmark for Interactive {
    fn name(&self) -> &'static str {
        NAME
    }

    fn summary(&self) -> &'static str {
        "E3's Interbench: emulated audio, video, X and gaming tasks alone and under loads; latency, % desired CPU, % deadlines met"
    }

    fn params(&self) -> &'static [ParamSpec] {
        SPECS
    }

    fn cases(&self, params: &Params, plan: &RunPlan) -> Result<Vec<Params>, LiveError> {
        let p = params.resolve(NAME, SPECS, plan.quick)?;
        condition::preflight(&plan.condition)?;
        let names = words(p.word("task")?);
        if names.is_empty() {
            return Err(bad("task", p.word("task")?, format!("one or more of {}", TASKS.join(", "))));
        }
        let res = timer_resolution_ns();
        let mut out = Vec::new();
        for (i, name) in names.iter().enumerate() {
            if names[..i].contains(name) {
                return Err(bad("task", p.word("task")?, format!("each task once; {name} is listed twice")));
            }
            let task = Task::of(name, &p)?;
            check_period(&task, res)?;
            let rows = rows(&p, Some(task.name()))?;
            let busy = u64::from(plan.condition.policy.is_realtime() && task.busy());
            for (_, row) in &rows {
                load::check(&loads_of(plan, row), busy, plan.force)?;
            }
            load::check_memory(
                &format!("interactive with {} loads and --repeat {} (histograms)", rows.len(), plan.repeat),
                load::histograms_bytes((rows.len() as u64).saturating_mul(plan.repeat as u64 + 1)),
                "lower --repeat or list fewer loads",
            )?;
            let mut case = p.clone().with("task", task.name());
            if task.name() != "custom" {
                // Only custom has a period and CPU share of its own.
                case.remove("period");
                case.remove("cpu");
            }
            out.push(case);
        }
        Ok(out)
    }

    fn estimate_s(&self, case: &Params, plan: &RunPlan) -> f64 {
        let Ok(p) = case.resolve(NAME, SPECS, plan.quick) else { return 1.0 };
        let dur = p.count("duration").unwrap_or(200) as f64 * 1e-3;
        let task = words(p.word("task").unwrap_or("video")).first().and_then(|t| Task::of(t, &p).ok());
        let rows = rows(&p, task.as_ref().map(Task::name)).map_or(1, |r| r.len()) as f64;
        let warm = task.map_or(0.1, |t| warm_periods(&t, (dur * 1e9) as u64) as f64 * t.period_ns() as f64 * 1e-9);
        rows * (plan.repeat as f64 * dur + plan.warmup as f64 * warm + load::WARMUP.as_secs_f64())
    }

    fn run(&self, case: &Params, plan: &RunPlan, progress: &dyn Fn(f64)) -> Result<BenchResult, LiveError> {
        let started = harness::unix_ms();
        let p = self.cases(case, plan)?.remove(0);
        let full = p.resolve(NAME, SPECS, plan.quick)?;
        let task = Task::of(p.word("task")?, &full)?;
        let rows = rows(&p, Some(task.name()))?;
        let dur_ns = full.count("duration")? * 1_000_000;
        let (cal, mut warnings, cal_metrics) = calibration(full.count("calibration")?, &plan.condition, &task)?;
        let mut per_row: Vec<(String, Measured, LoadReport)> = Vec::new();
        let n = rows.len() as f64;
        for (i, (label, row)) in rows.iter().enumerate() {
            let rp = RunPlan { loads: loads_of(plan, row), ..plan.clone() };
            let est = self.estimate_s(&p, plan) / n;
            let periods = task.periods(dur_ns);
            let total = warm_periods(&task, dur_ns) * plan.warmup as u64 + periods * plan.repeat as u64;
            let on_row = |f: f64| progress((i as f64 + f) / n);
            let (m, report) =
                harness::drive(NAME, &rp, est, total, &on_row, |ctx| measure(ctx, &rp, &task, cal, dur_ns))?;
            per_row.push((label.clone(), m, report));
        }
        let applied_all: Vec<SchedCondition> = per_row.iter().map(|(_, m, _)| m.applied.clone()).collect();
        let applied = harness::merge_applied(&applied_all, plan.condition.mlock, &mut warnings);
        let mut shell = LoadReport { texts: plan.loads.iter().map(|l| l.text.clone()).collect(), ..Default::default() };
        for (_, _, report) in &per_row {
            for w in &report.warnings {
                if !shell.warnings.contains(w) {
                    shell.warnings.push(w.clone());
                }
            }
        }
        let mut r = harness::result(NAME, &p, SPECS, plan, applied, started, &shell);
        r.metrics = metrics(&task, &per_row);
        r.metrics.extend(cal_metrics);
        r.warnings.extend(warnings);
        Ok(r)
    }
}

/// Warm-up periods: a tenth of a repetition, at least two (one gaming chunk).
fn warm_periods(task: &Task, dur_ns: u64) -> u64 {
    match task {
        Task::Gaming => 1,
        _ => (task.periods(dur_ns) / 10).max(2),
    }
}

/// Loops of [`burn_loops`] per ms.
type LoopsPerMs = f64;

/// The work loop: `n` iterations the compiler may not remove or merge.
#[inline(never)]
fn burn_loops(n: u64) {
    for _ in 0..n {
        // SAFETY: an empty instruction sequence with no effect; as an asm
        // block it is kept, one per iteration (interbench's asm volatile("")).
        unsafe { std::arch::asm!("", options(nostack, preserves_flags)) };
    }
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// This process's calibrations, by the condition they were measured under.
static CALIBRATIONS: Mutex<Vec<(String, LoopsPerMs)>> = Mutex::new(Vec::new());

/// The part of a condition a calibration thread takes: policy, priority,
/// nice, deadline, CPUs and clamps (not the case's cgroup, tunables or
/// sched_ext scheduler, which exist only during a case).
fn calibration_condition(c: &SchedCondition) -> SchedCondition {
    SchedCondition {
        policy: c.policy,
        priority: c.priority,
        nice: c.nice,
        deadline: c.deadline,
        cpus: c.cpus.clone(),
        uclamp_min: c.uclamp_min,
        uclamp_max: c.uclamp_max,
        ..Default::default()
    }
}

/// The calibration to use, warnings about it and its metrics.
fn calibration(
    given: u64,
    cond: &SchedCondition,
    task: &Task,
) -> Result<(LoopsPerMs, Vec<String>, Vec<Metric>), LiveError> {
    let cc = calibration_condition(cond);
    let key = format!("{cc:?}");
    let cached = CALIBRATIONS.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|(k, _)| *k == key).map(|c| c.1);
    let (measured, mut warnings) = match cached {
        Some(v) => (v, Vec::new()),
        None => {
            let (v, w) = measure_calibration(&cc)?;
            CALIBRATIONS.lock().unwrap_or_else(|e| e.into_inner()).push((key, v));
            (v, w)
        }
    };
    let sample = |name: &str, v: f64| Metric::samples(name, Unit::Count, Direction::Neutral, vec![v.round()]);
    if given == 0 {
        return Ok((measured, warnings, vec![sample("calibration_loops_per_ms", measured)]));
    }
    let used = given as f64;
    if let Some(w) = calibration_warning(used, measured, task) {
        warnings.push(w);
    }
    Ok((
        used,
        warnings,
        vec![sample("calibration_loops_per_ms", used), sample("calibration_measured_loops_per_ms", measured)],
    ))
}

/// A warning when a given calibration is more than 10 % off this machine's.
fn calibration_warning(used: f64, measured: f64, task: &Task) -> Option<String> {
    let ratio = used / measured;
    if (0.9..=1.1).contains(&ratio) {
        return None;
    }
    let share = match task {
        Task::Periodic { percent, .. } => {
            format!(", so {} asks {:.1} % of a CPU here instead of {percent} %", task.name(), *percent as f64 * ratio)
        }
        _ => String::new(),
    };
    Some(format!(
        "calibration={used:.0} loops/ms is {:.0} % {} this machine's own ({measured:.0} loops/ms, measured now under this condition): the work per period was sized on another machine{share}; keep it to compare machines like for like, drop it to emulate the tasks as specified here",
        (ratio - 1.0).abs() * 100.0,
        if ratio > 1.0 { "above" } else { "below" }
    ))
}

/// Measure loops per ms on a thread under `cond` (see the Methodology).
fn measure_calibration(cond: &SchedCondition) -> Result<(LoopsPerMs, Vec<String>), LiveError> {
    let rt = cond.policy.is_realtime();
    // Bounded by the clock (about 0.25 s); under an RT policy also watched.
    let watchdog = if rt { Some(crate::harness::hygiene::Watchdog::start(None)?) } else { None };
    let out = std::thread::scope(|s| {
        let h = std::thread::Builder::new().name("schedlab-calib".into()).spawn_scoped(s, || {
            condition::apply(0, cond, None)?;
            let tid = condition::gettid();
            if let Some(w) = &watchdog {
                w.watch(tid, std::time::Instant::now() + std::time::Duration::from_secs(10));
            }
            let r = calibrate_here();
            if let Some(w) = &watchdog {
                w.unwatch(tid);
            }
            let _ = condition::demote(0);
            r
        });
        match h {
            Ok(h) => h.join().unwrap_or_else(|_| {
                Err(LiveError::Measurement { bench: NAME, detail: "the calibration thread panicked".into() })
            }),
            Err(e) => Err(LiveError::Os {
                what: "spawning the calibration thread",
                detail: e.to_string(),
                hint: "check ulimit -u",
            }),
        }
    });
    if watchdog.as_ref().is_some_and(|w| w.fired()) {
        return Err(LiveError::Measurement { bench: NAME, detail: "the RT watchdog stopped the calibration".into() });
    }
    out
}

/// Spin 200 ms, then take the fastest of 9 samples of ~5 ms (thread CPU time).
fn calibrate_here() -> Result<(LoopsPerMs, Vec<String>), LiveError> {
    let t0 = now_ns();
    let mut chunk: u64 = 10_000;
    while now_ns() - t0 < 200_000_000 {
        if crate::harness::hygiene::stop_requested() {
            return Err(LiveError::Interrupted);
        }
        let c0 = thread_cpu_ns();
        burn_loops(chunk);
        // Grow the chunk towards ~5 ms.
        if thread_cpu_ns() - c0 < 5_000_000 {
            chunk = chunk.saturating_mul(2);
        }
    }
    let mut rates = Vec::new();
    for _ in 0..9 {
        let c0 = thread_cpu_ns();
        burn_loops(chunk);
        let took = (thread_cpu_ns() - c0).max(1);
        rates.push(chunk as f64 * 1e6 / took as f64);
        if now_ns() - t0 > 2_000_000_000 {
            break;
        }
    }
    rates.sort_by(f64::total_cmp);
    let best = *rates.last().expect("at least one sample");
    let median = rates[rates.len() / 2];
    let mut w = Vec::new();
    if median < best * 0.95 {
        w.push(format!(
            "calibration was unsteady: loops/ms ranged {:.0}..{best:.0} over {} samples (CPU frequency changing, interrupts or a busy SMT sibling); the fastest is used",
            rates[0],
            rates.len()
        ));
    }
    Ok((best, w))
}

/// One repetition's books.
#[derive(Default)]
struct Books {
    latency: LatencyHistogram,
    n: u64,
    sum: f64,
    sum_sq: f64,
    max: u64,
    met: u64,
    missed: u64,
    /// Work due and done (ns of calibrated loops); gaming: the time taken.
    due_ns: u64,
    done_ns: u64,
    wall_ns: u64,
}

impl Books {
    fn record(&mut self, l: u64) {
        self.latency.record(l);
        self.n += 1;
        self.sum += l as f64;
        self.sum_sq += (l as f64) * (l as f64);
        self.max = self.max.max(l);
    }
}

struct Measured {
    reps: Vec<Books>,
    applied: SchedCondition,
}

fn sleep_until(ctx: &Ctx, ns: u64) -> Result<(), LiveError> {
    let t =
        libc::timespec { tv_sec: (ns / 1_000_000_000) as libc::time_t, tv_nsec: (ns % 1_000_000_000) as libc::c_long };
    loop {
        // SAFETY: a valid timespec; no remaining-time output for TIMER_ABSTIME.
        let rc = unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &t, std::ptr::null_mut()) };
        if rc == 0 {
            return Ok(());
        }
        if rc != libc::EINTR {
            return Err(LiveError::os("clock_nanosleep", rc, "the kernel refused the absolute sleep"));
        }
        ctx.check(now_ns())?;
    }
}

/// Do `work_ns` of calibrated work, in pieces of at most 1 ms, each
/// followed by the stop and deadline check.
fn work(ctx: &Ctx, cal: LoopsPerMs, work_ns: u64) -> Result<(), LiveError> {
    let mut left = (cal * work_ns as f64 / 1e6).round() as u64;
    let piece = (cal.round() as u64).max(1);
    while left > 0 {
        let n = left.min(piece);
        burn_loops(n);
        left -= n;
        ctx.check(now_ns())?;
    }
    Ok(())
}

/// The measuring thread: condition, slack, warm-up and repetitions.
fn measure(ctx: &Ctx, plan: &RunPlan, task: &Task, cal: LoopsPerMs, dur_ns: u64) -> Result<Measured, LiveError> {
    condition::apply(0, ctx.cond, None)?;
    let applied = condition::read_back(0)?;
    // SAFETY: prctl with integer arguments on the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    let tid = condition::gettid();
    ctx.watch(tid);
    let r = (|| {
        let mut reps = Vec::with_capacity(plan.repeat as usize);
        let mut done = 0;
        for rep in 0..(plan.warmup + plan.repeat) {
            let warm = rep < plan.warmup;
            let periods = if warm { warm_periods(task, dur_ns) } else { task.periods(dur_ns) };
            ctx.rep_starts(rep as u64);
            let books = repetition(ctx, task, cal, periods, &mut done)?;
            ctx.rep_ends(rep as u64);
            if !warm {
                reps.push(books);
            }
        }
        Ok::<_, LiveError>(reps)
    })();
    ctx.unwatch(tid);
    let _ = condition::demote(0);
    Ok(Measured { reps: r?, applied })
}

/// One repetition of `periods` periods (see the Methodology).
fn repetition(ctx: &Ctx, task: &Task, cal: LoopsPerMs, periods: u64, done: &mut u64) -> Result<Books, LiveError> {
    let mut b = Books::default();
    let period = task.period_ns();
    if *task == Task::Gaming {
        for _ in 0..periods {
            let s = now_ns();
            work(ctx, cal, GAMING_CHUNK_NS)?;
            let took = now_ns() - s;
            b.record(took.saturating_sub(GAMING_CHUNK_NS));
            b.done_ns += GAMING_CHUNK_NS;
            b.wall_ns += took;
            *done += 1;
            ctx.set_done(*done);
        }
        return Ok(b);
    }
    // The first release a little ahead, so that it is slept into.
    let t0 = now_ns() + 1_000_000;
    for k in 0..periods {
        let (release, end) = (t0 + k * period, t0 + (k + 1) * period);
        let run = task.work_ns(k, periods);
        if now_ns() < release {
            sleep_until(ctx, release)?;
        }
        let woke = now_ns();
        b.record(woke - release);
        b.due_ns += run;
        if woke >= end {
            // Its whole window passed: dropped, and charged in full.
            b.missed += 1;
        } else {
            work(ctx, cal, run)?;
            b.done_ns += run;
            if now_ns() <= end {
                b.met += 1;
            } else {
                b.missed += 1;
            }
        }
        *done += 1;
        ctx.check(now_ns())?;
        ctx.set_done(*done);
    }
    Ok(b)
}

/// The result's metrics: the interbench table as entities by load, and per
/// load its latency histogram and the load's and kernel's figures.
fn metrics(task: &Task, rows: &[(String, Measured, LoadReport)]) -> Vec<Metric> {
    let t = task.name();
    let labels: Vec<String> = rows.iter().map(|(l, _, _)| l.clone()).collect();
    let mut cols: [Vec<f64>; 5] = Default::default();
    for (_, m, _) in rows {
        let (n, sum, sq, max) =
            m.reps.iter().fold((0u64, 0.0, 0.0, 0u64), |a, b| (a.0 + b.n, a.1 + b.sum, a.2 + b.sum_sq, a.3.max(b.max)));
        let mean = if n > 0 { sum / n as f64 } else { 0.0 };
        let sd = if n > 1 { ((sq - sum * sum / n as f64) / (n - 1) as f64).max(0.0).sqrt() } else { 0.0 };
        let (due, done, wall) =
            m.reps.iter().fold((0u64, 0u64, 0u64), |a, b| (a.0 + b.due_ns, a.1 + b.done_ns, a.2 + b.wall_ns));
        let desired = if *task == Task::Gaming {
            if wall > 0 {
                (100.0 * done as f64 / wall as f64).min(100.0)
            } else {
                0.0
            }
        } else if due > 0 {
            100.0 * done as f64 / due as f64
        } else {
            100.0
        };
        let (met, missed) = m.reps.iter().fold((0u64, 0u64), |a, b| (a.0 + b.met, a.1 + b.missed));
        let deadlines = if met + missed > 0 { 100.0 * met as f64 / (met + missed) as f64 } else { 100.0 };
        for (c, v) in cols.iter_mut().zip([mean, sd, max as f64, desired, deadlines]) {
            c.push(v);
        }
    }
    let [mean, sd, max, desired, deadlines] = cols;
    let entity = |name: &str, unit: Unit, dir: Direction, values: Vec<f64>| {
        Metric::entities(&format!("{name}.{t}"), unit, dir, "load", labels.clone(), values)
    };
    let mut out = vec![
        entity("latency_mean", Unit::Nanoseconds, Direction::LowerIsBetter, mean),
        entity("latency_sd", Unit::Nanoseconds, Direction::LowerIsBetter, sd),
        entity("latency_max", Unit::Nanoseconds, Direction::LowerIsBetter, max),
        entity("desired_cpu", Unit::Percent, Direction::HigherIsBetter, desired),
    ];
    if task.has_deadlines() {
        out.push(entity("deadlines_met", Unit::Percent, Direction::HigherIsBetter, deadlines));
    }
    for (label, m, report) in rows {
        let hists = m.reps.iter().map(|b| b.latency.clone()).collect();
        out.push(
            Metric::histogram_per_repetition(&format!("latency.{t}@{label}"), Direction::LowerIsBetter, hists)
                .headline(),
        );
        for metric in &report.metrics {
            let mut metric = metric.clone();
            metric.name = format!("{}@{label}", metric.name);
            if matches!(metric.data, MetricData::Samples { .. } | MetricData::Histogram { .. }) {
                out.push(metric);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_follow_interbench_and_x_ramps_within_a_repetition() {
        let p = Params::new().resolve(NAME, SPECS, false).unwrap();
        let audio = Task::of("audio", &p).unwrap();
        assert_eq!((audio.period_ns(), audio.work_ns(0, 4)), (50_000_000, 2_500_000));
        let video = Task::of("video", &p).unwrap();
        assert_eq!(video.work_ns(3, 12), 16_666_666 * 40 / 100);
        // duration=1s: 10 cycles of 0, 10, ..., 90 ms of work.
        let x: Vec<u64> = (0..10).map(|k| Task::X.work_ns(k, Task::X.periods(1_000_000_000)) / 1_000_000).collect();
        assert_eq!(x, [0, 10, 20, 30, 40, 50, 60, 70, 80, 90]);
        assert_eq!(Task::X.periods(10_100_000_000), 101, "interbench's ramp at duration=10100ms");
        assert!(!Task::Gaming.has_deadlines());
        let custom = Task::of("custom", &p.clone().with("period", 2000).with("cpu", 25)).unwrap();
        assert_eq!((custom.period_ns(), custom.work_ns(0, 1)), (2_000_000, 500_000));
        let e = Task::of("doom", &p).unwrap_err().to_string();
        assert!(e.contains("audio, video, x, gaming, custom"), "{e}");
    }

    #[test]
    fn a_period_the_timer_cannot_serve_is_refused_with_the_fix() {
        let custom = Task::Periodic { name: "custom", period_ns: 2_000_000, percent: 10 };
        assert!(check_period(&custom, 1).is_ok(), "high-resolution timers serve 2 ms");
        // A 4 ms tick (HZ=250 without high-resolution timers).
        let e = check_period(&custom, 4_000_000).unwrap_err().to_string();
        assert!(e.contains("period") && e.contains("at least 40000 us") && e.contains("high-resolution"), "{e}");
        let video = Task::Periodic { name: "video", period_ns: VIDEO_PERIOD_NS, percent: 40 };
        let e = check_period(&video, 10_000_000).unwrap_err().to_string();
        assert!(e.contains("parameter task") && e.contains("video"), "{e}");
    }

    #[test]
    fn a_calibration_from_another_machine_is_said() {
        let audio = Task::Periodic { name: "audio", period_ns: AUDIO_PERIOD_NS, percent: 5 };
        assert!(calibration_warning(1_050_000.0, 1_000_000.0, &audio).is_none());
        let w = calibration_warning(1_500_000.0, 1_000_000.0, &audio).unwrap();
        assert!(w.contains("50 % above") && w.contains("7.5 % of a CPU") && w.contains("another machine"), "{w}");
        assert!(calibration_warning(500_000.0, 1_000_000.0, &Task::Gaming).unwrap().contains("50 % below"));
    }

    #[test]
    fn rows_map_interbench_names_to_loads_and_refuse_unknown_ones() {
        let p = Params::new().resolve(NAME, SPECS, false).unwrap();
        let r = rows(&p, Some("video")).unwrap();
        let labels: Vec<&str> = r.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(labels, ["none", "x", "burn", "write", "read", "compile"], "video is not measured under video");
        assert!(r[0].1.is_none());
        assert_eq!(
            r[2].1.as_ref().unwrap().kind,
            LoadKind::Burn { tasks: condition::online_cpus().unwrap().len() as u32 }
        );
        let p = p.with("loads", "none,video,burn:1,nice=10");
        let r = rows(&p, Some("video")).unwrap();
        let labels: Vec<&str> = r.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(labels, ["none", "video", "burn:1,nice=10"], "an explicit list is kept whole");
        let e = rows(&p.clone().with("loads", "none,hackbenc"), None).unwrap_err().to_string();
        assert!(e.contains("'hackbenc' is neither") && e.contains("none, video, x, burn"), "{e}");
        assert!(rows(&p.clone().with("loads", "burn,burn"), None).unwrap_err().to_string().contains("twice"));
    }
}
