//! `schedlab sim --calibrate`: the simulator's per-operation costs measured
//! on this host with the live benchmarks, stored as a `sim-calibration`
//! run; `sim --calibration last|RUN` takes them for the cost flags not given.
//!
//! What each figure is (all ns):
//! - `pipe_send_cost_ns`/`pipe_recv_cost_ns`: half each of one task writing
//!   a 4-byte token into a pipe and reading it back (no switch, no wake-up):
//!   the system-call work the simulated `pipe` charges as its send and recv
//!   steps.
//! - `channel_wake_ns`: what a socket write costs its writer when it wakes
//!   a reader blocked on the socket, on the writer's CPU: the median write
//!   that wakes a SCHED_IDLE reader (which never preempts the writer, so
//!   the write's time is the writer's own) less the median write nobody
//!   waits for, both 100 bytes after a 200 us sleep (so the reader has
//!   blocked, and both writes start equally cold).
//! - `ipi_cost_ns`: the same write waking a reader blocked on another CPU,
//!   less the one waking a reader on the writer's: what the waker spends to
//!   interrupt another CPU (the IPI; on a virtual machine a VM exit, several
//!   microseconds). Unmeasured (the default stays) on one usable CPU.
//! - `ctx_switch_ns`: the live `pipe` same-CPU round trip / 2 (two switches
//!   per trip), minus one write and one read (above) and one channel
//!   wake-up: the sim charges those separately, so leaving them in would
//!   count them twice. What remains is the switch, the scheduler's own
//!   decision included (the sim's cost table prices that too, a fraction of
//!   it counted twice).
//! - `migration_ns`: (cross-CPU round trip - same-CPU round trip) / 2: what a
//!   hand-over between CPUs adds (IPI, idle exit, cache lines moving).
//!   Unmeasured (the default stays) on a host with one usable CPU.
//! - `idle_exit_ns`: the same half-difference less what the model already
//!   puts between a wake-up and a remote CPU acting on it (`ipi_latency`,
//!   as calibrated below or the default, and `ipi_cost`): the pipe's
//!   partner CPU idles between messages, so each hand-over waits for it to
//!   leave idle. The two figures come from one difference: a wake-up that
//!   moves a task onto an idle CPU pays both, and the pipe cannot tell them
//!   apart.
//! - `wake_cost_ns`: the live `wakeup` probe with one RT waiter and a bare
//!   futex (`classes=rt,sync=futex`), waker and waiter on one CPU, no load:
//!   the waiter runs once the waker has woken it and gone back to sleep, so
//!   its median latency, minus `ctx_switch_ns`, is the waker's own path
//!   around a wake-up (its futex wake; the waker is SCHED_OTHER, so the
//!   waiter preempts it there). Broadcasts are 10 ms apart, as in the
//!   `wakeup` probe sim-vs-live compares: how long the CPU idled before
//!   changes the figure on a virtual machine (2 ms apart gave a few us, 10 ms
//!   apart 9-14 us on a KVM guest). Unmeasured (0 stays) where RT
//!   priorities are not allowed.
//! - `ipi_latency_ns`: the same RT wake-up probe under `hackbench:1` load,
//!   twice: waker and waiter on one CPU (the SCHED_OTHER waker is preempted
//!   as it wakes the waiter), then on two CPUs with a SCHED_FIFO 90 waker
//!   (the kernel places the waiter on the other CPU, busy with hackbench,
//!   and sends it a reschedule IPI). The difference of the medians, less
//!   `ipi_cost` (above, else the default: the sender's time the model
//!   charges before the IPI leaves), is the IPI's way to a busy CPU until it
//!   switches:
//!   delivery (on a virtual machine, injection into a running vCPU) and
//!   the running task's way to a preemption point. Unmeasured (the default
//!   stays) on one usable CPU or where RT priorities are refused.
//! - `send_cost_ns`/`recv_cost_ns`: live `hackbench` (one group, sockets,
//!   all 40 tasks on one CPU, so wall time is CPU time) per message, minus
//!   the context switches the kernel counted for it times `ctx_switch_ns`
//!   and its voluntary ones (a task that blocked was woken) times
//!   `channel_wake_ns` (when its counters are there), split evenly between
//!   send and recv.

use super::Outcome;
use crate::args::SimArgs;
use crate::context::{hostname, now_unix_ms, open_store, open_store_to_read, store_or_save, tool_info, unsaved_error};
use anyhow::{anyhow, bail, Context, Result};
use schedlab_core::{BenchResult, BenchStatus, Condition, Direction, Metric, MetricData, Run, RunKind, RunStatus};
use schedlab_core::{SchedCondition, SchedPolicy, Unit};
use schedlab_live::{hygiene, Params, RunPlan};
use schedlab_store::Store;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::time::Instant;

/// The benchmark name a calibration is stored under.
pub const BENCH: &str = "sim-calibration";

/// Each stored cost and the flag or workload key it feeds.
pub const FEEDS: [(&str, &str); 11] = [
    ("ctx_switch_ns", "--ctx-switch"),
    ("channel_wake_ns", "--channel-wake-cost"),
    ("migration_ns", "--migration"),
    ("ipi_cost_ns", "--ipi-cost"),
    ("ipi_latency_ns", "--ipi-latency"),
    ("idle_exit_ns", "--idle-exit"),
    ("wake_cost_ns", "--wake-cost"),
    ("send_cost_ns", "hackbench send_cost="),
    ("recv_cost_ns", "hackbench recv_cost="),
    ("pipe_send_cost_ns", "pipe send_cost="),
    ("pipe_recv_cost_ns", "pipe recv_cost="),
];

/// A stored calibration, read back.
#[derive(Debug, Clone)]
pub struct Calibration {
    /// How the run is named to the user (`#12`).
    pub label: String,
    pub host: String,
    pub cpu_model: Option<String>,
    /// Cost name (of [`FEEDS`]) to ns.
    pub values: BTreeMap<String, u64>,
}

fn metric(name: &str, ns: f64) -> Metric {
    Metric::samples(name, Unit::Nanoseconds, Direction::Neutral, vec![ns])
}

fn samples<'a>(b: &'a BenchResult, name: &str) -> Option<&'a [f64]> {
    match &b.metric(name)?.data {
        MetricData::Samples { values } if !values.is_empty() => Some(values),
        _ => None,
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// One case of a live benchmark.
fn live(name: &str, params: &str, plan: &RunPlan) -> Result<BenchResult> {
    let b = schedlab_live::find(name)?;
    let cases = b.cases(&Params::parse(params)?, plan).with_context(|| format!("calibration: {name}:{params}"))?;
    let case = cases.first().ok_or_else(|| anyhow!("calibration: {name}:{params} has no case"))?;
    let on = match &plan.condition.cpus {
        Some(c) if c.len() == 1 => " on one CPU",
        _ => "",
    };
    let load: String = plan.loads.iter().filter(|l| l.text != "none").map(|l| format!(" under {}", l.text)).collect();
    eprintln!("calibration: {name}:{params}{on}{load} ...");
    b.run(case, plan, &|_| {}).with_context(|| format!("calibration: {name}:{params}"))
}

/// ns of one 4-byte write and its read on one pipe by one task (the
/// fastest of several batches: the work itself, without interruptions).
fn pipe_syscalls_ns(batch: u32) -> Result<f64> {
    let (mut r, mut w) = std::io::pipe().context("calibration: cannot create a pipe")?;
    let mut token = [0u8; 4];
    let mut best = f64::MAX;
    for _ in 0..7 {
        let t = Instant::now();
        for _ in 0..batch {
            w.write_all(&token).context("calibration: pipe write")?;
            r.read_exact(&mut token).context("calibration: pipe read")?;
        }
        best = best.min(t.elapsed().as_nanos() as f64 / batch as f64);
    }
    Ok(best)
}

/// Median ns of one 100-byte socket write, each after a 200 us sleep (so a
/// reader has blocked, and every write starts equally cold), by kind.
struct SocketWrites {
    /// Waking a reader blocked on the writer's CPU (SCHED_IDLE, so it never
    /// preempts the writer: the write's time is the writer's own).
    waking_here: f64,
    /// Nobody waiting.
    plain: f64,
    /// Waking a reader blocked on another CPU (which the wake-up must
    /// interrupt), when there is one.
    waking_there: Option<f64>,
}

/// Measure [`SocketWrites`] on `cpu` (and `other`), the kinds interleaved:
/// `rounds` × `per_round` writes of each.
fn socket_writes(cpu: usize, other: Option<usize>, rounds: usize, per_round: usize) -> Result<SocketWrites> {
    use std::os::unix::net::UnixStream;
    let on = |cpu: usize, policy: SchedPolicy, what: &'static str| -> Result<()> {
        let cond = SchedCondition { policy, cpus: Some(vec![cpu]), ..Default::default() };
        schedlab_live::condition::apply(0, &cond, None).with_context(|| format!("calibration: the {what}"))
    };
    let pair = || UnixStream::pair().context("calibration: cannot create a socket pair");
    // A reader that reads until its socket closes, pinned with `policy`.
    let reader = |mut rx: UnixStream, cpu: usize, policy: SchedPolicy| {
        std::thread::spawn(move || -> Result<()> {
            on(cpu, policy, "socket reader")?;
            let mut msg = [0u8; 100];
            while rx.read_exact(&mut msg).is_ok() {}
            Ok(())
        })
    };
    let (mut here_tx, here_rx) = pair()?;
    let (mut quiet_tx, mut quiet_rx) = pair()?;
    let mut readers = vec![reader(here_rx, cpu, SchedPolicy::Idle)];
    let mut there_tx = None;
    if let Some(o) = other {
        let (tx, rx) = pair()?;
        readers.push(reader(rx, o, SchedPolicy::Other));
        there_tx = Some(tx);
    }
    let writer = std::thread::spawn(move || -> Result<SocketWrites> {
        on(cpu, SchedPolicy::Other, "socket writer")?;
        let msg = [0u8; 100];
        let mut drain = [0u8; 100];
        let (mut here, mut plain, mut there) = (Vec::new(), Vec::new(), Vec::new());
        let timed = |s: &mut UnixStream, into: &mut Vec<f64>| -> Result<()> {
            std::thread::sleep(std::time::Duration::from_micros(200));
            let t = Instant::now();
            s.write_all(&msg).context("calibration: socket write")?;
            into.push(t.elapsed().as_nanos() as f64);
            Ok(())
        };
        for _ in 0..rounds {
            if hygiene::stop_requested() {
                bail!("calibration: interrupted (Ctrl-C, SIGTERM or timeout) during the socket writes");
            }
            for _ in 0..per_round {
                timed(&mut here_tx, &mut here)?;
                timed(&mut quiet_tx, &mut plain)?;
                if let Some(tx) = there_tx.as_mut() {
                    timed(tx, &mut there)?;
                }
            }
            for _ in 0..per_round {
                quiet_rx.read_exact(&mut drain).context("calibration: socket read")?;
            }
        }
        Ok(SocketWrites {
            waking_here: median(&here),
            plain: median(&plain),
            waking_there: (!there.is_empty()).then(|| median(&there)),
        })
    });
    let got = writer.join().map_err(|_| anyhow!("calibration: the socket writer panicked"))?;
    // The writer's ends, dropped with its thread, close the readers' sockets.
    for r in readers {
        r.join().map_err(|_| anyhow!("calibration: a socket reader panicked"))??;
    }
    got
}

/// `sim --calibrate`: measure, store, print.
pub fn calibrate(db: Option<&std::path::Path>, a: &SimArgs) -> Result<Outcome> {
    if let Some(problem) = a.name.as_deref().and_then(schedlab_core::model::run_name_problem) {
        bail!("--name: {problem}: choose another name");
    }
    let mut store = open_store(db)?;
    hygiene::install_signal_handlers().context("cannot install signal handlers")?;
    let started = now_unix_ms();
    let mut run = Run::new(RunKind::Live, tool_info(), std::env::args().collect(), hostname(), started);
    run.name = a.name.clone();
    run.labels = a.labels.iter().cloned().collect();
    run.env_start = Some(schedlab_live::fingerprint::capture());
    let (loops, hb_loops, repeat, batch) = if a.quick { (20_000, 50, 2, 20_000) } else { (200_000, 200, 5, 200_000) };
    let plan = RunPlan { repeat, warmup: 1, quick: a.quick, ..Default::default() };
    let usable = schedlab_live::condition::preflight(&SchedCondition::default())?;

    let syscalls = pipe_syscalls_ns(batch)?;
    let same = live("pipe", &format!("loops={loops},placement=same-cpu"), &plan)?;
    let rtt = |b: &BenchResult| samples(b, "round_trips_per_s").map(|r| 1e9 / median(r));
    let same_rtt = rtt(&same).ok_or_else(|| anyhow!("calibration: the same-CPU pipe reported no rate"))?;
    let cross = if usable.len() >= 2 {
        Some(live("pipe", &format!("loops={loops},placement=cross-cpu"), &plan)?)
    } else {
        eprintln!("calibration: one usable CPU: migration not measured (the default stays)");
        None
    };
    let one_cpu = SchedCondition { cpus: Some(vec![usable[0]]), ..Default::default() };
    let hb = live("hackbench", &format!("groups=1,loops={hb_loops}"), &plan.with_condition(one_cpu))?;
    let msg_ns = samples(&hb, "messages_per_s")
        .map(|r| 1e9 / median(r))
        .ok_or_else(|| anyhow!("calibration: hackbench reported no message rate"))?;

    let (per_round, rounds) = if a.quick { (50, 2) } else { (100, 10) };
    eprintln!("calibration: socket writes that wake a reader on the same CPU, on another CPU, and none ...");
    let writes = socket_writes(usable[0], usable.get(1).copied(), rounds, per_round)?;
    let channel_wake = (writes.waking_here - writes.plain).max(0.0);
    let ctx_switch = (same_rtt / 2.0 - syscalls - channel_wake).max(0.0);
    let mut figures = vec![
        metric("socket_write_waking_same_cpu_ns", writes.waking_here),
        metric("socket_write_plain_ns", writes.plain),
        metric("channel_wake_ns", channel_wake),
        metric("pipe_syscalls_ns", syscalls),
        metric("pipe_same_cpu_round_trip_ns", same_rtt),
        metric("hackbench_one_cpu_ns_per_message", msg_ns),
        metric("ctx_switch_ns", ctx_switch),
        metric("pipe_send_cost_ns", syscalls / 2.0),
        metric("pipe_recv_cost_ns", syscalls / 2.0),
    ];
    let mut notes = Vec::new();
    if let Some(cross_rtt) = cross.as_ref().and_then(rtt) {
        figures.push(metric("pipe_cross_cpu_round_trip_ns", cross_rtt));
        figures.push(metric("migration_ns", ((cross_rtt - same_rtt) / 2.0).max(0.0)));
    }
    // Switches the kernel counted in hackbench's measured repetitions, per message.
    let messages = 400.0 * hb_loops as f64;
    let voluntary = samples(&hb, "kernel.ctx_switches_voluntary").map(median);
    let switches = voluntary.zip(samples(&hb, "kernel.ctx_switches_involuntary").map(median));
    let per_message = match switches {
        Some((vol, invol)) => (msg_ns - ((vol + invol) * ctx_switch + vol * channel_wake) / messages).max(2.0),
        None => {
            notes.push("hackbench's switch counters are absent: its switches stay in send/recv".to_string());
            msg_ns
        }
    };
    figures.push(metric("send_cost_ns", per_message / 2.0));
    figures.push(metric("recv_cost_ns", per_message / 2.0));

    let rt_samples = if a.quick { 50 } else { 300 };
    let wake_plan = RunPlan {
        loads: vec![schedlab_live::load::parse("none")?],
        ..plan.with_condition(SchedCondition { cpus: Some(vec![usable[0]]), ..Default::default() })
    };
    let wake = match live(
        "wakeup",
        &format!("classes=rt,waiters=1,sync=futex,samples={rt_samples},interval=10ms"),
        &wake_plan,
    ) {
        Ok(w) => Some(w),
        // Ctrl-C or a timeout stops the calibration; only a probe that
        // cannot run here (RT refused) leaves the wake cost unmeasured.
        Err(e) if hygiene::stop_requested() => return Err(e),
        Err(e) => {
            notes.push(format!("the RT wake-up probe could not run ({e:#}): wake_cost not measured"));
            None
        }
    };
    // The RT waiter's median latency in a wake-up probe.
    let p50_of = |w: &BenchResult| w.metric("rt.latency")?.summary().map(|s| s.median);
    if let Some(p50) = wake.as_ref().and_then(p50_of) {
        figures.push(metric("rt_wake_same_cpu_p50_ns", p50));
        figures.push(metric("wake_cost_ns", (p50 - ctx_switch).max(0.0)));
    }
    // A reschedule IPI to a busy CPU: the same RT wake-up under kernel-heavy
    // load, the waiter on the waker's CPU (preempting it there as it is
    // woken) and on the other CPU (an RT waker keeps its own CPU, so the
    // kernel places the waiter on the other, busy one and sends it an IPI).
    let mut busy = Vec::new();
    if wake.is_some() && usable.len() >= 2 {
        let loaded = |cond: SchedCondition| -> Result<RunPlan> {
            Ok(RunPlan { loads: vec![schedlab_live::load::parse("hackbench:1")?], ..plan.with_condition(cond) })
        };
        let params = format!("classes=rt,waiters=1,sync=futex,samples={rt_samples},interval=10ms");
        let waker_cpu = SchedCondition { cpus: Some(vec![usable[0]]), ..Default::default() };
        let other_cpu = SchedCondition {
            policy: SchedPolicy::Fifo,
            priority: Some(90),
            cpus: Some(usable[..2].to_vec()),
            ..Default::default()
        };
        for cond in [waker_cpu, other_cpu] {
            match live("wakeup", &params, &loaded(cond)?) {
                Ok(w) => busy.push(w),
                Err(e) if hygiene::stop_requested() => return Err(e),
                Err(e) => {
                    notes.push(format!("the loaded RT wake-up probe could not run ({e:#}): ipi_latency not measured"));
                    busy.clear();
                    break;
                }
            }
        }
    }
    let d = schedlab_sim::CostTable::DEFAULT;
    // The waker's extra time for a wake-up on another CPU: the IPI it sends
    // (on a virtual machine, a VM exit).
    let mut ipi_cost = d.ipi_ns as f64;
    if let Some(there) = writes.waking_there {
        figures.push(metric("socket_write_waking_other_cpu_ns", there));
        ipi_cost = (there - writes.waking_here).max(0.0);
        figures.push(metric("ipi_cost_ns", ipi_cost));
    }
    let mut ipi_latency = d.ipi_latency_ns as f64;
    if let [Some(on_waker_cpu), Some(on_other_cpu)] = [busy.first().and_then(p50_of), busy.get(1).and_then(p50_of)] {
        figures.push(metric("rt_wake_busy_same_cpu_p50_ns", on_waker_cpu));
        figures.push(metric("rt_wake_busy_other_cpu_p50_ns", on_other_cpu));
        ipi_latency = (on_other_cpu - on_waker_cpu - ipi_cost).max(0.0);
        figures.push(metric("ipi_latency_ns", ipi_latency));
    }
    if let Some(cross_rtt) = cross.as_ref().and_then(rtt) {
        // What the model already has between a remote wake-up and its pick (cost.rs).
        let in_model = ipi_cost + ipi_latency;
        figures.push(metric("idle_exit_ns", ((cross_rtt - same_rtt) / 2.0 - in_model).max(0.0)));
    }

    let cond = Condition::Live { requested: SchedCondition::default(), applied: None, loads: Vec::new() };
    let mut cal = BenchResult::new(BENCH, cond, started);
    cal.params.insert("quick".into(), a.quick.into());
    cal.metrics = figures;
    cal.warnings = notes.clone();
    cal.status = BenchStatus::Complete;
    cal.repetitions = 1;
    cal.ended_unix_ms = Some(now_unix_ms());
    run.benchmarks.extend([same].into_iter().chain(cross).chain([hb]).chain(wake).chain(busy).chain([cal]));
    run.status = RunStatus::Complete;
    run.ended_unix_ms = Some(now_unix_ms());
    run.env_end = Some(schedlab_live::fingerprint::capture());
    let stored = store_or_save(store.as_mut(), &run, "the sim calibration")?;
    if let Ok(id) = stored {
        run.id = Some(id);
    }
    let values = values_of(run.benchmarks.last().expect("the calibration result"));
    println!("sim calibration of {} ({}):", run.host, run.label());
    println!("  {:<19} {:>10}  feeds", "cost", "ns");
    for (name, feeds) in FEEDS {
        match values.get(name) {
            Some(ns) => println!("  {name:<19} {ns:>10}  {feeds}"),
            None => println!("  {name:<19} {:>10}  {feeds} (not measured: the default stays)", "-"),
        }
    }
    for n in &notes {
        crate::term::note(n);
    }
    println!("use them: schedlab sim --calibration last --policy eevdf --workload ...");
    match stored {
        Ok(_) => crate::term::say(format!("stored as run {} in {}", run.label(), store.location())),
        Err(file) => return Err(unsaved_error(store.as_ref(), &[file])),
    }
    Ok(Outcome::Done)
}

fn values_of(b: &BenchResult) -> BTreeMap<String, u64> {
    FEEDS
        .iter()
        .filter_map(|(name, _)| Some((name.to_string(), samples(b, name)?.first()?.round().max(0.0) as u64)))
        .collect()
}

/// The calibration `selector` names (`last`: the newest one stored).
pub fn load(store: &dyn Store, selector: &str) -> Result<Calibration> {
    let id = if selector.trim() == "last" {
        *store.runs_with_benchmark(BENCH)?.iter().max().ok_or_else(|| {
            anyhow!("--calibration last: the store has no sim calibration: run `schedlab sim --calibrate` first")
        })?
    } else {
        store.resolve(selector).with_context(|| format!("--calibration {selector}"))?
    };
    let run = store.load_run(id)?;
    let b = run.benchmarks.iter().find(|b| b.name == BENCH).ok_or_else(|| {
        anyhow!("--calibration {selector}: run {} is not a sim calibration: give one that `schedlab sim --calibrate` stored, or `last`", run.label())
    })?;
    let env = run.env_start.as_ref();
    Ok(Calibration {
        label: run.label(),
        host: env.and_then(|e| e.hostname.clone()).unwrap_or_else(|| run.host.clone()),
        cpu_model: env.and_then(|e| e.cpu_model.clone()),
        values: values_of(b),
    })
}

/// A warning when `cal` was measured on another machine than (`host`, `cpu_model`).
pub fn host_warning(cal: &Calibration, host: &str, cpu_model: Option<&str>) -> Option<String> {
    let other_cpu = matches!((cal.cpu_model.as_deref(), cpu_model), (Some(a), Some(b)) if a != b);
    if cal.host == host && !other_cpu {
        return None;
    }
    let them = format!("{} ({})", cal.host, cal.cpu_model.as_deref().unwrap_or("CPU unknown"));
    let us = format!("{host} ({})", cpu_model.unwrap_or("CPU unknown"));
    Some(format!(
        "--calibration {}: measured on {them}, not on this host {us}: its costs describe that machine; \
         run `schedlab sim --calibrate` here for this one's",
        cal.label
    ))
}

/// The calibration for `sim`, with the other-host warning printed.
pub fn for_sim(db: Option<&std::path::Path>, selector: &str) -> Result<Calibration> {
    let store = open_store_to_read(db)?;
    let cal = load(store.as_ref(), selector)?;
    let cpu =
        std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|c| schedlab_live::fingerprint::parse_cpu_model(&c));
    if let Some(w) = host_warning(&cal, &hostname(), cpu.as_deref()) {
        crate::term::warn(w);
    }
    Ok(cal)
}

/// A cost flag's ns: the flag when given, else the calibration's, else the default.
pub fn cost_ns(given: Option<&str>, cal: Option<&Calibration>, name: &str, default: &str, flag: &str) -> Result<u64> {
    if let Some(v) = given {
        return schedlab_core::units::parse_duration_ns(v).map_err(|e| anyhow!("{flag}: {e}"));
    }
    if let Some(ns) = cal.and_then(|c| c.values.get(name)) {
        return Ok(*ns);
    }
    schedlab_core::units::parse_duration_ns(default).map_err(|e| anyhow!("{flag}: {e}"))
}

/// `workload` with the calibration's send and recv costs for the keys it
/// does not set (hackbench's from a hackbench message, pipe's from a pipe
/// token); other workloads, and workload files, unchanged.
pub fn workload_with_costs(workload: &str, cal: &Calibration) -> Result<String> {
    let text = workload.trim();
    if text.starts_with(['{', '@']) {
        return Ok(workload.to_string());
    }
    let mut spec = schedlab_sim::spec::Spec::parse(text, "workload")?;
    let prefix = match spec.name.as_str() {
        "hackbench" => "",
        "pipe" => "pipe_",
        _ => return Ok(workload.to_string()),
    };
    let info = schedlab_sim::workloads().into_iter().find(|w| w.name == spec.name).expect("a built-in workload");
    for key in ["send_cost", "recv_cost"] {
        let param = info.params.iter().find(|p| p.name == key).expect("hackbench and pipe take send/recv costs");
        let set = spec.params.iter().any(|(k, _)| k == key || Some(k.as_str()) == param.old_name);
        match cal.values.get(&format!("{prefix}{key}_ns")) {
            // A step costs at least 1 ns (the workload's range).
            Some(ns) if !set => spec.params.push((key.to_string(), format!("{}ns", (*ns).max(1)))),
            _ => {}
        }
    }
    Ok(spec.colon_form())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cal(host: &str, cpu: Option<&str>) -> Calibration {
        let values = [("ctx_switch_ns", 1234), ("send_cost_ns", 700), ("recv_cost_ns", 800), ("pipe_send_cost_ns", 0)];
        Calibration {
            label: "#7".into(),
            host: host.into(),
            cpu_model: cpu.map(str::to_string),
            values: values.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        }
    }

    #[test]
    fn given_flags_win_then_the_calibration_then_the_default() {
        let c = cal("a", None);
        assert_eq!(cost_ns(Some("3us"), Some(&c), "ctx_switch_ns", "2us", "--ctx-switch").unwrap(), 3000);
        assert_eq!(cost_ns(None, Some(&c), "ctx_switch_ns", "2us", "--ctx-switch").unwrap(), 1234);
        assert_eq!(cost_ns(None, Some(&c), "migration_ns", "10us", "--migration").unwrap(), 10_000);
        assert_eq!(cost_ns(None, None, "ctx_switch_ns", "2us", "--ctx-switch").unwrap(), 2000);
        assert!(cost_ns(Some("soon"), None, "x", "2us", "--ctx-switch")
            .unwrap_err()
            .to_string()
            .contains("--ctx-switch"));
    }

    #[test]
    fn workload_keys_not_given_take_the_calibration() {
        let c = cal("a", None);
        assert_eq!(
            workload_with_costs("hackbench:groups=2", &c).unwrap(),
            "hackbench:groups=2,send_cost=700ns,recv_cost=800ns"
        );
        assert_eq!(workload_with_costs("hackbench[send_ns=5us]", &c).unwrap(), "hackbench:send_ns=5us,recv_cost=800ns");
        // A zero-cost step is not allowed: at least 1 ns; a cost not calibrated stays the default.
        assert_eq!(workload_with_costs("pipe", &c).unwrap(), "pipe:send_cost=1ns");
        assert_eq!(workload_with_costs("hogs:nice=0,5", &c).unwrap(), "hogs:nice=0,5");
    }

    #[test]
    fn another_hosts_calibration_warns_naming_both() {
        assert!(host_warning(&cal("a", Some("X")), "a", Some("X")).is_none());
        assert!(host_warning(&cal("a", None), "a", Some("X")).is_none());
        let w = host_warning(&cal("a", Some("X")), "b", Some("Y")).unwrap();
        assert!(w.contains("#7") && w.contains("a (X)") && w.contains("b (Y)") && w.contains("--calibrate"), "{w}");
        assert!(host_warning(&cal("a", Some("X")), "a", Some("Z")).is_some(), "same name, another CPU");
    }
}
