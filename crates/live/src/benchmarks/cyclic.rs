//! # Methodology
//!
//! **Goal.** Periodic timer wake-up latency, as cyclictest measures it, and
//! E5's timer test (a 1 ms SIGALRM timer handled at RT priority, 10,000
//! periods, plotting the measured period).
//!
//! **Tasks.** One measuring thread per selected CPU (`--cpus`, else every
//! usable CPU), pinned to it (`pin=yes`, like `cyclictest -a`) or given the
//! whole set (`pin=no`). Default condition: SCHED_FIFO 95 (cyclictest
//! `-p 95`), used when no `--policy/--prio/--nice` is given; memory is locked
//! (`mlockall`, `-m`) unless `mlock=no`. Each thread sets its timer slack to
//! 1 ns (`PR_SET_TIMERSLACK`; 0 would mean "default") and reads it back.
//! `pm_qos=yes` (default) holds `/dev/cpu_dma_latency` at 0 us for the case,
//! exactly as cyclictest does by default (it keeps idle CPUs out of deep
//! C-states; in a KVM guest with the haltpoll cpuidle driver it makes idle
//! CPUs poll instead of halting); `pm_qos=no` measures the system as it is.
//!
//! **Timed.** `mode=nanosleep` (cyclictest's default): `next = now +
//! interval`; loop { `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, next)`;
//! `clock_gettime(CLOCK_MONOTONIC)` at once; record `now - next`; `next +=
//! interval` }. `mode=sigalrm` (E5): a POSIX timer (`timer_create`,
//! CLOCK_MONOTONIC, SIGEV_THREAD_ID so each thread gets its own SIGALRM,
//! absolute first expiry, `interval` period); the thread blocks SIGALRM and
//! waits in `sigwaitinfo`; latency = wake - (start + k x interval), and the
//! measured period = wake - previous wake. The hot loop does no allocation
//! and no system call besides the wait and the clock read (vDSO); it records
//! into a preallocated histogram and checks the stop flag every 256 periods.
//!
//! **Missed periods.** cyclictest advances its deadline past `now` after a
//! late wake-up, so overrun periods leave no sample. Here every period keeps
//! its intended time: a late wake-up is followed by immediate ones whose
//! latency is charged from their own intended time (no coordinated omission),
//! and wake-ups later than one whole interval are counted in
//! `missed_periods` (sigalrm: plus timer overruns, which the kernel folds
//! into one signal).
//! `wake_latency` keeps cyclictest's convention beside it: only the periods
//! whose intended time was still ahead when the thread went to wait, so it
//! compares with cyclictest's figures. The two differ only after a stall: one
//! stall of S intervals adds about S^2/2 intervals to `latency`'s sum (each
//! skipped period is charged) and S to `wake_latency`'s.
//!
//! **Warm-up.** A warm-up repetition runs `loops / 10` periods (at least 10)
//! and is discarded.
//!
//! **Loads.** Thread 0 marks each repetition's start and end for the
//! background loads' throughput, between repetitions (the threads run the
//! same periods, so its boundaries stand for all of them).
//!
//! **Metrics.** `latency` (histogram of every period of every thread, ns,
//! headline), `wake_latency` (the periods slept into, headline: the two
//! differ only after a stall, so showing both shows its cost), `max_latency`
//! (per repetition, worst thread), `missed_periods` (count per repetition),
//! and for sigalrm `period` (histogram of measured
//! periods, headline). Where lost time went, per repetition and read between
//! repetitions: `run_delay` (the threads' summed time runnable but not
//! running, from `/proc/thread-self/schedstat`) and `steal` (the measured
//! CPUs' steal time from `/proc/stat`, exact to one USER_HZ tick per CPU).
//!
//! **breaktrace=US** (cyclictest `-b`): ftrace records the measured CPUs'
//! scheduler, timer and interrupt events (`ftrace.rs`); in a measured
//! repetition the first wake-up later than US stops the trace (one write to
//! `tracing_on`, from the thread that saw it), and after the case the trace
//! is read back and the stall explained in a warning: who had the CPU at the
//! intended time, when the timer interrupt, the wakeup, the switch-in and the
//! return to user space came, and which of those gaps was the largest (a
//! late interrupt, or a task that kept the CPU after the wakeup). The trace
//! of every traced CPU from 10 ms before the intended time to the wake-up is
//! kept in `schedlab-breaktrace-cyclic-<ms>.txt` in the working directory
//! (as `rtla timerlat -a` keeps its trace), and the warning names it. ftrace's
//! settings are restored afterwards, also on Ctrl-C; a busy ftrace is
//! refused.
//!
//! **split=yes** (like `rtla timerlat`'s IRQ/thread split): ftrace records
//! the measuring threads' `hrtimer_start` (the programmed expiry) and
//! switch-ins, and the timer interrupts of the measured CPUs; afterwards each
//! measured wake-up is split into `irq_latency` (timer interrupt entry −
//! expiry: the hardware, hypervisor and interrupts-off part) and
//! `switch_latency` (switch-in − expiry: adds the wakeup and the scheduler's
//! part). Both are kernel-side and exact to 1 us (the trace prints
//! microseconds); `latency` adds the return to user space. Tracing costs a
//! little time per wake-up, so a split run is its own case (`split=yes` is
//! part of its parameters; `split=no` is not stored).
//!
//! **Warnings.** Missed periods, with the run delay and steal of the same
//! repetitions (a stall with steal is the hypervisor's; one with run delay is
//! the guest kernel's: another task or a non-preemptible path), histogram
//! overflow (values above 100 s), a non-RT policy
//! (the scheduler's wakeup preemption decides, and timer slack would apply
//! had it not been set to 1 ns), timer slack not 1 ns after setting it, and a
//! VM (vCPU halt/wake exits dominate idle wake-up latency).

use crate::error::LiveError;
use crate::harness::ftrace::{split_wakeups, BreakTrace, Tracing, BREAKTRACE_EVENTS, SPLIT_EVENTS};
use crate::harness::params::{ParamKind, ParamSpec, Params, TimeUnit};
use crate::harness::{self, now_ns, Ctx};
use crate::host::kstat::{user_tick_ns, SchedStat, Steal};
use crate::{harness::condition, Benchmark, RunPlan};
use schedlab_core::{BenchResult, Direction, LatencyHistogram, Metric, SchedCondition, SchedPolicy, Unit};
use std::sync::Barrier;

pub struct Cyclic;

const NAME: &str = "cyclic";

const SPECS: &[ParamSpec] = &[
    ParamSpec {
        name: "mode",
        default: "nanosleep",
        quick_default: None,
        unit: "",
        help: "nanosleep (absolute clock_nanosleep, cyclictest) or sigalrm (periodic POSIX timer + SIGALRM, E5)",
        kind: ParamKind::Choice(&["nanosleep", "sigalrm"]),
        diagnostic: false,
    },
    ParamSpec {
        name: "interval",
        default: "1000",
        quick_default: None,
        unit: "",
        help: "period of each measuring thread (cyclictest -i)",
        kind: ParamKind::Duration { unit: TimeUnit::Us, min: 50, max: 10_000_000 },
        diagnostic: false,
    },
    ParamSpec {
        name: "loops",
        default: "10000",
        quick_default: Some("1000"),
        unit: "periods",
        help: "periods per thread and repetition (cyclictest -l)",
        kind: ParamKind::Count { min: 1, max: 100_000_000 },
        diagnostic: false,
    },
    ParamSpec {
        name: "pin",
        default: "yes",
        quick_default: None,
        unit: "",
        help: "yes: one thread pinned to each selected CPU (cyclictest -a); no: threads may run on any of them",
        kind: ParamKind::Choice(&["yes", "no"]),
        diagnostic: false,
    },
    ParamSpec {
        name: "mlock",
        default: "yes",
        quick_default: None,
        unit: "",
        help: "mlockall for the case (cyclictest -m)",
        kind: ParamKind::Choice(&["yes", "no"]),
        diagnostic: false,
    },
    ParamSpec {
        name: "breaktrace",
        default: "0",
        quick_default: None,
        unit: "",
        help: "trace the measured CPUs with ftrace and stop at the first wake-up later than this, then explain it (cyclictest -b); 0: off",
        kind: ParamKind::Duration { unit: TimeUnit::Us, min: 0, max: 10_000_000 },
        diagnostic: true,
    },
    ParamSpec {
        name: "split",
        default: "no",
        quick_default: None,
        unit: "",
        help: "yes: trace the measured CPUs with ftrace and split every wake-up at the timer interrupt (irq_latency, switch_latency), as rtla timerlat does",
        kind: ParamKind::Choice(&["no", "yes"]),
        diagnostic: true,
    },
    ParamSpec {
        name: "pm_qos",
        default: "yes",
        quick_default: None,
        unit: "",
        help: "hold /dev/cpu_dma_latency at 0 during the case, as cyclictest does by default",
        kind: ParamKind::Choice(&["yes", "no"]),
        diagnostic: false,
    },
];

/// FIFO 95, mlock: cyclictest -m -p 95.
fn default_condition() -> SchedCondition {
    SchedCondition { policy: SchedPolicy::Fifo, priority: Some(95), mlock: true, ..Default::default() }
}

fn effective_plan(plan: &RunPlan, p: &Params) -> Result<RunPlan, LiveError> {
    let mut c = plan.condition_or(&default_condition());
    c.mlock = plan.condition.mlock || p.word("mlock")? == "yes";
    Ok(plan.with_condition(c))
}

impl Benchmark for Cyclic {
    fn name(&self) -> &'static str {
        NAME
    }

    fn summary(&self) -> &'static str {
        "periodic timer wake-up latency per CPU (cyclictest; E5's SIGALRM timer), missed periods counted"
    }

    fn params(&self) -> &'static [ParamSpec] {
        SPECS
    }

    fn cases(&self, params: &Params, plan: &RunPlan) -> Result<Vec<Params>, LiveError> {
        let p = params.resolve(NAME, SPECS, plan.quick)?;
        let plan = effective_plan(plan, &p)?;
        if plan.condition.policy == SchedPolicy::Deadline && p.word("pin")? == "yes" && plan.condition.cpus.is_some() {
            return Err(LiveError::DeadlinePinned);
        }
        let usable = condition::preflight(&plan.condition)?;
        let (brk, split) = (p.count("breaktrace")? > 0, p.word("split")? == "yes");
        if brk && split {
            return Err(LiveError::BadParam {
                bench: NAME,
                key: "split".into(),
                value: "yes".into(),
                expected: "no while breaktrace is on: both take ftrace, so use one at a time".into(),
            });
        }
        if brk || split {
            Tracing::check()?;
        }
        crate::harness::load::check(&[], 0, plan.force)?;
        crate::harness::load::check_tasks("cyclic", usable.len() as u64, "select fewer CPUs with --cpus")?;
        // Per thread and repetition latency, wake-latency and period histograms, plus the merged ones.
        let threads = usable.len() as u64;
        let hists = (plan.repeat as u64).saturating_mul(3 * threads + 3) + 3 * threads;
        crate::harness::load::check_memory(
            &format!("cyclic on {threads} CPU(s) with --repeat {} (histograms)", plan.repeat),
            crate::harness::load::histograms_bytes(hists),
            "lower --repeat or select fewer CPUs with --cpus",
        )?;
        Ok(vec![p])
    }

    fn estimate_s(&self, case: &Params, plan: &RunPlan) -> f64 {
        let Ok(p) = case.resolve(NAME, SPECS, plan.quick) else { return 1.0 };
        harness::periodic_estimate_s(p.count("loops").unwrap_or(0), p.count("interval").unwrap_or(1000), plan)
    }

    fn run(&self, case: &Params, plan: &RunPlan, progress: &dyn Fn(f64)) -> Result<BenchResult, LiveError> {
        let started = harness::unix_ms();
        let p = self.cases(case, plan)?.remove(0);
        let plan = &effective_plan(plan, &p)?;
        let usable = condition::preflight(&plan.condition)?;
        let cfg = Cfg {
            sigalrm: p.word("mode")? == "sigalrm",
            interval_ns: p.count("interval")? * 1000,
            loops: p.count("loops")?,
            pin: p.word("pin")? == "yes" && plan.condition.policy != SchedPolicy::Deadline,
        };
        let est = self.estimate_s(&p, plan);
        let reps = (plan.warmup + plan.repeat) as u64;
        let total = cfg.loops * reps;
        let _qos = if p.word("pm_qos")? == "yes" { PmQos::hold() } else { None };
        let qos_held = _qos.is_some();
        let brk_us = p.count("breaktrace")?;
        let brk = if brk_us > 0 {
            Some(BreakTrace::new(Tracing::start(&usable, BREAKTRACE_EVENTS)?, brk_us * 1000))
        } else {
            None
        };
        let tracer = if p.word("split")? == "yes" { Some(Tracing::start(&usable, SPLIT_EVENTS)?) } else { None };
        let (m, loads) =
            harness::drive(NAME, plan, est, total, progress, |ctx| measure(ctx, plan, &cfg, &usable, brk.as_ref()))?;
        let split = tracer.map(|t| {
            t.stop();
            let parts = t.text().map(|text| split_wakeups(&text));
            // The trace is read: give ftrace back as it was.
            drop(t);
            parts
        });
        let lost = lost_time_warning(&m, cfg.interval_ns, &usable, user_tick_ns());
        let measured = m.latency.iter().map(|h| h.count()).sum::<u64>();
        let rep_starts = m.rep_starts;
        let mut warnings = m.warnings;
        let applied = harness::merge_applied(&m.applied, plan.condition.mlock, &mut warnings);
        let mut r = harness::result(NAME, &p, SPECS, plan, applied, started, &loads);
        let overflow: u64 = m.latency.iter().map(|h| h.overflow()).sum();
        if overflow > 0 {
            warnings.push(format!("{overflow} latencies overflowed the histogram (above 100 s); max is kept exactly"));
        }
        if !plan.condition.policy.is_realtime() {
            warnings.push(format!(
                "non-RT policy {}: wake-ups wait for the fair scheduler's preemption decision, and timer slack (50 us by default) would apply; schedlab set it to {} ns",
                plan.condition.policy, m.slack_ns
            ));
        }
        if m.slack_ns > 1 {
            warnings.push(format!(
                "timer slack is {} ns, not 1 ns: nanosleep wake-ups may be deferred by up to that",
                m.slack_ns
            ));
        }
        if p.word("pm_qos")? == "yes" && !qos_held {
            warnings.push("could not hold /dev/cpu_dma_latency at 0 (not root?): idle CPUs may enter deep C-states, unlike cyclictest's default".into());
        }
        if let Some(v) = virtualization() {
            warnings.push(format!(
                "this machine is a VM ({v}): an idle vCPU halts and its wake-up is a hypervisor exit, which dominates timer latency{}",
                if qos_held { " (pm_qos=yes keeps haltpoll guests polling)" } else { "" }
            ));
        }
        r.metrics = vec![
            Metric::histogram_per_repetition("latency", Direction::LowerIsBetter, m.latency).headline(),
            Metric::histogram_per_repetition("wake_latency", Direction::LowerIsBetter, m.slept).headline(),
        ];
        if cfg.sigalrm {
            r.metrics.push(Metric::histogram_per_repetition("period", Direction::Neutral, m.period).headline());
        }
        r.metrics.push(Metric::samples("max_latency", Unit::Nanoseconds, Direction::LowerIsBetter, m.max_ns));
        warnings.extend(lost);
        if let Some(parts) = split {
            let (irq, switch, w) = split_metrics(parts?, &rep_starts, measured);
            r.metrics.push(irq);
            r.metrics.push(switch);
            warnings.extend(w);
        }
        if let Some(w) =
            brk.as_ref().and_then(|b| b.report(NAME, brk_us, &std::env::current_dir().unwrap_or_else(|_| ".".into())))
        {
            warnings.push(w);
        }
        // The trace is read: give ftrace back as it was.
        drop(brk);
        r.metrics.push(Metric::samples("missed_periods", Unit::Count, Direction::LowerIsBetter, m.missed).headline());
        for (name, v) in [("run_delay", &m.run_delay), ("steal", &m.steal)] {
            if let Some(v) = v.iter().map(|x| x.map(|ns| ns as f64)).collect::<Option<Vec<f64>>>() {
                r.metrics.push(Metric::samples(name, Unit::Nanoseconds, Direction::LowerIsBetter, v));
            }
        }
        // Read back after PR_SET_TIMERSLACK(1): 1 ns, or 0 for RT threads (the kernel ignores slack for them).
        r.metrics.push(Metric::samples("timer_slack", Unit::Nanoseconds, Direction::Neutral, vec![m.slack_ns as f64]));
        r.metrics.extend(loads.metrics);
        r.warnings.extend(warnings);
        Ok(r)
    }
}

/// `irq_latency` and `switch_latency` from the split wake-ups, and what the
/// reader should know: periods the trace did not hold, early interrupts.
/// Each part goes to the repetition of its thread that its expiry falls
/// in; a thread's wake-ups before its first measured repetition (warm-up)
/// are dropped.
fn split_metrics(
    parts: Vec<(i32, u64, i64, Option<i64>)>,
    rep_starts: &std::collections::HashMap<i32, Vec<u64>>,
    measured: u64,
) -> (Metric, Metric, Vec<String>) {
    let reps = rep_starts.values().map(Vec::len).max().unwrap_or(0);
    let fresh = || (0..reps).map(|_| LatencyHistogram::new()).collect::<Vec<_>>();
    let (mut irq, mut switch) = (fresh(), fresh());
    let parts: Vec<(usize, i64, Option<i64>)> = parts
        .into_iter()
        .filter_map(|(tid, exp, i, s)| {
            let rep = rep_starts.get(&tid)?.iter().rposition(|&from| from <= exp)?;
            Some((rep, i, s))
        })
        .collect();
    let early = parts.iter().filter(|p| p.1 < 0).count();
    let untraced = parts.iter().filter(|p| p.2.is_none()).count();
    for &(rep, i, s) in &parts {
        irq[rep].record(i.max(0) as u64);
        if let Some(s) = s {
            switch[rep].record(s.max(0) as u64);
        }
    }
    let mut w = Vec::new();
    // A period whose timer expired before its thread got to sleep has no
    // wake-up to split; only a larger gap is worth a word.
    if (parts.len() as u64) * 100 < measured * 99 {
        w.push(format!(
            "split: the trace held {} of {measured} measured wake-ups (the ring buffer wrapped or lost events); irq_latency covers those",
            parts.len()
        ));
    }
    if untraced > 0 {
        w.push(format!(
            "split: the trace lacks the switch-in of {untraced} of {} wake-ups (some kernels do not trace switches out of an idle CPU's idle task), so switch_latency covers {}",
            parts.len(),
            parts.len() - untraced
        ));
    }
    if early > 0 {
        w.push(format!(
            "split: {early} timer interrupt(s) came before their expiry (a hypervisor's timer advance, or clock skew under 1 us); counted as 0"
        ));
    }
    (
        Metric::histogram_per_repetition("irq_latency", Direction::LowerIsBetter, irq).headline(),
        Metric::histogram_per_repetition("switch_latency", Direction::LowerIsBetter, switch).headline(),
        w,
    )
}

/// Where the time of missed periods may have gone, from the kernel's own
/// accounting over the same repetitions: the measuring threads' run delay
/// (runnable, but their CPU was held by another task or a non-preemptible
/// kernel path) and the measured CPUs' steal (the hypervisor ran something
/// else). None when no period was missed.
fn lost_time_warning(m: &Measured, interval_ns: u64, cpus: &[usize], steal_tick_ns: u64) -> Option<String> {
    let hit: Vec<usize> = (0..m.missed.len()).filter(|&i| m.missed[i] > 0.0).collect();
    if hit.is_empty() {
        return None;
    }
    let missed: f64 = hit.iter().map(|&i| m.missed[i]).sum();
    let worst = hit.iter().map(|&i| m.max_ns[i]).fold(0.0, f64::max);
    let ms = |ns: u64| ns as f64 / 1e6;
    let sum = |v: &[Option<u64>]| hit.iter().map(|&i| v[i]).sum::<Option<u64>>();
    let mut text = format!(
        "{missed} period(s) missed by a whole interval ({} us) in {} repetition(s), worst wake-up {:.3} ms late",
        interval_ns / 1000,
        hit.len(),
        worst / 1e6
    );
    match (sum(&m.run_delay), sum(&m.steal)) {
        (None, None) => text.push_str("; run delay and steal time were unreadable, so the cause is unknown"),
        (delay, steal) => {
            let mut parts = Vec::new();
            if let Some(d) = delay {
                parts.push(format!(
                    "the measuring threads waited {:.3} ms runnable (another task or a non-preemptible kernel path held their CPU)",
                    ms(d)
                ));
            }
            if let Some(s) = steal {
                let cpus = cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",");
                parts.push(format!(
                    "the hypervisor stole {:.0} ms from CPU(s) {cpus} (±{:.0} ms per CPU and repetition)",
                    ms(s),
                    ms(steal_tick_ns)
                ));
            }
            text.push_str(&format!("; over those repetitions {}", parts.join(", and ")));
            // Neither accounts for the worst stall: the timer interrupt came late.
            if delay.unwrap_or(0) < worst as u64 && steal.unwrap_or(0) < worst as u64 {
                text.push_str(
                    "; neither covers the worst wake-up, so its timer interrupt itself came late (interrupts held off in the kernel, or in a VM the host delivering it late, which steal time does not count while the vCPU idles)",
                );
            }
        }
    }
    Some(text)
}

/// The hypervisor, if this is a VM (CPUID hypervisor flag + sysfs/DMI).
pub(crate) fn virtualization() -> Option<String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    if crate::host::fingerprint::parse_hypervisor_flag(&cpuinfo) != Some(true) {
        return None;
    }
    let name = std::fs::read_to_string("/sys/hypervisor/type")
        .ok()
        .or_else(|| std::fs::read_to_string("/sys/class/dmi/id/sys_vendor").ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "hypervisor flag set".into());
    Some(name)
}

/// `/dev/cpu_dma_latency` held at 0 while open (the kernel drops the request on close).
pub(crate) struct PmQos(i32);

impl PmQos {
    pub(crate) fn hold() -> Option<PmQos> {
        // SAFETY: valid C string; the fd is owned by the guard.
        let fd = unsafe { libc::open(c"/dev/cpu_dma_latency".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        let zero: i32 = 0;
        // SAFETY: writing 4 bytes from a valid i32.
        if unsafe { libc::write(fd, (&zero as *const i32).cast(), 4) } != 4 {
            // SAFETY: closing our own fd.
            unsafe { libc::close(fd) };
            return None;
        }
        Some(PmQos(fd))
    }
}

impl Drop for PmQos {
    fn drop(&mut self) {
        // SAFETY: closing our own fd releases the PM QoS request.
        unsafe { libc::close(self.0) };
    }
}

struct Cfg {
    sigalrm: bool,
    interval_ns: u64,
    loops: u64,
    pin: bool,
}

struct Measured {
    latency: Vec<LatencyHistogram>,
    /// Periods the thread slept into (cyclictest's samples).
    slept: Vec<LatencyHistogram>,
    period: Vec<LatencyHistogram>,
    max_ns: Vec<f64>,
    missed: Vec<f64>,
    /// Summed over threads, per repetition (None: some thread could not read it).
    run_delay: Vec<Option<u64>>,
    steal: Vec<Option<u64>>,
    /// Per measuring thread (tid), when each of its measured repetitions
    /// began: the split assigns wake-ups to repetitions and drops warm-up.
    rep_starts: std::collections::HashMap<i32, Vec<u64>>,
    applied: Vec<SchedCondition>,
    slack_ns: u64,
    warnings: Vec<String>,
}

/// One thread's books for one repetition, kept by its hot loop.
struct Books<'a> {
    latency: LatencyHistogram,
    /// Periods whose intended time was still ahead when the thread went to
    /// wait: cyclictest's samples (it skips the periods it was late for).
    slept: LatencyHistogram,
    period: LatencyHistogram,
    missed: u64,
    /// The last wake-up (or the start), ns.
    woke: u64,
    start_ns: u64,
    /// This thread's run delay over the repetition (ns), when readable.
    run_delay: Option<u64>,
    /// Steal of all measured CPUs over the repetition (ns; thread 0 only).
    steal: Option<u64>,
    brk: Option<&'a BreakTrace>,
    tid: i32,
}

impl<'a> Books<'a> {
    fn new(start_ns: u64, brk: Option<&'a BreakTrace>, tid: i32) -> Books<'a> {
        Books {
            latency: LatencyHistogram::new(),
            slept: LatencyHistogram::new(),
            period: LatencyHistogram::new(),
            missed: 0,
            woke: start_ns,
            start_ns,
            run_delay: None,
            steal: None,
            brk,
            tid,
        }
    }

    /// A wake-up at `now` for the period intended at `intended`; returns its latency.
    #[inline]
    fn wake(&mut self, intended: u64, now: u64, interval: u64) -> u64 {
        let l = now.saturating_sub(intended);
        self.latency.record(l);
        if intended > self.woke {
            self.slept.record(l);
        }
        if l >= interval {
            self.missed += 1;
        }
        if let Some(b) = self.brk {
            if l > b.threshold_ns {
                b.fire(self.tid, intended, now);
            }
        }
        self.woke = now;
        l
    }
}

struct ThreadOut<'a> {
    reps: Vec<Books<'a>>,
    applied: SchedCondition,
    slack_ns: u64,
}

fn measure(
    ctx: &Ctx,
    plan: &RunPlan,
    cfg: &Cfg,
    cpus: &[usize],
    brk: Option<&BreakTrace>,
) -> Result<Measured, LiveError> {
    let n = cpus.len();
    let barrier = Barrier::new(n);
    let outs: Vec<Result<ThreadOut, LiveError>> = std::thread::scope(|s| {
        let handles: Vec<_> = cpus
            .iter()
            .enumerate()
            .map(|(i, &cpu)| {
                let barrier = &barrier;
                std::thread::Builder::new().name(format!("schedlab-cyclic{i}")).spawn_scoped(s, move || {
                    let pin = [cpu];
                    let set = if cfg.pin { Some(&pin[..]) } else { None };
                    thread_main(ctx, plan, cfg, set, i as u64, barrier, cpus, brk)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h.join().unwrap_or_else(|_| {
                    Err(LiveError::Measurement { bench: NAME, detail: "a measuring thread panicked".into() })
                }),
                Err(e) => Err(LiveError::Os {
                    what: "spawning a measuring thread",
                    detail: e.to_string(),
                    hint: "check ulimit -u",
                }),
            })
            .collect()
    });
    let reps = plan.repeat as usize;
    // Fresh histograms, not clones: untouched bucket pages stay unallocated.
    let fresh = |n: usize| (0..n).map(|_| LatencyHistogram::new()).collect::<Vec<_>>();
    let mut m = Measured {
        latency: fresh(reps),
        slept: fresh(reps),
        period: fresh(if cfg.sigalrm { reps } else { 0 }),
        max_ns: vec![0.0; reps],
        missed: vec![0.0; reps],
        run_delay: vec![Some(0); reps],
        steal: vec![None; reps],
        rep_starts: std::collections::HashMap::new(),
        applied: Vec::new(),
        slack_ns: 0,
        warnings: Vec::new(),
    };
    for o in outs {
        let o = o?;
        for (i, r) in o.reps.into_iter().enumerate() {
            m.max_ns[i] = m.max_ns[i].max(r.latency.max().unwrap_or(0) as f64);
            m.latency[i].merge(&r.latency);
            m.slept[i].merge(&r.slept);
            if let Some(mp) = m.period.get_mut(i) {
                mp.merge(&r.period);
            }
            m.missed[i] += r.missed as f64;
            m.run_delay[i] = m.run_delay[i].zip(r.run_delay).map(|(a, b)| a + b);
            m.rep_starts.entry(r.tid).or_default().push(r.start_ns);
            m.steal[i] = m.steal[i].or(r.steal);
        }
        m.applied.push(o.applied);
        m.slack_ns = m.slack_ns.max(o.slack_ns);
    }
    Ok(m)
}

/// A measuring thread: condition, slack, barrier, warm-up, repetitions.
#[allow(clippy::too_many_arguments)]
fn thread_main<'a>(
    ctx: &Ctx,
    plan: &RunPlan,
    cfg: &Cfg,
    cpus: Option<&[usize]>,
    index: u64,
    barrier: &Barrier,
    measured: &[usize],
    brk: Option<&'a BreakTrace>,
) -> Result<ThreadOut<'a>, LiveError> {
    let setup = (|| {
        condition::apply(0, ctx.cond, cpus)?;
        let applied = condition::read_back(0)?;
        // SAFETY: prctl with integer arguments on the calling thread.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
        // SAFETY: as above.
        let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
        Ok::<_, LiveError>((applied, slack.max(0) as u64))
    })();
    // Everyone reaches the barrier, even after a setup error.
    barrier.wait();
    let (applied, slack_ns) = setup?;
    let tid = condition::gettid();
    ctx.watch(tid);
    let r = (|| {
        let mut reps = Vec::with_capacity(plan.repeat as usize);
        let mut timer = if cfg.sigalrm { Some(SigTimer::new(tid)?) } else { None };
        let warm_loops = (cfg.loops / 10).max(10);
        // Where lost time went, read between repetitions (outside the timed span).
        let sched = SchedStat::open();
        let steal = (index == 0).then(|| Steal::open(measured));
        let since = |a: Option<u64>, b: Option<u64>| Some(b?.saturating_sub(a?));
        let mut done = 0u64;
        for rep in 0..(plan.warmup + plan.repeat) {
            let warm = rep < plan.warmup;
            let loops = if warm { warm_loops } else { cfg.loops };
            // Thread 0 marks repetitions for the loads (all threads run the same periods).
            if index == 0 {
                ctx.rep_starts(rep as u64);
            }
            let (delay0, steal0) = (sched.run_delay(), steal.as_ref().and_then(Steal::read));
            // Armed in measured repetitions only: a warm-up stall must not end the trace.
            let books = Books::new(now_ns(), if warm { None } else { brk }, tid);
            let mut books = match timer.as_mut() {
                Some(t) => sigalrm_loop(ctx, t, books, cfg.interval_ns, loops, index, done)?,
                None => nanosleep_loop(ctx, books, cfg.interval_ns, loops, index, done)?,
            };
            if index == 0 {
                ctx.rep_ends(rep as u64);
            }
            books.run_delay = since(delay0, sched.run_delay());
            books.steal = since(steal0, steal.as_ref().and_then(Steal::read));
            done += cfg.loops;
            if !warm {
                reps.push(books);
            }
        }
        Ok::<_, LiveError>(reps)
    })();
    ctx.unwatch(tid);
    let _ = condition::demote(0);
    Ok(ThreadOut { reps: r?, applied, slack_ns })
}

#[inline]
fn ts(ns: u64) -> libc::timespec {
    libc::timespec { tv_sec: (ns / 1_000_000_000) as libc::time_t, tv_nsec: (ns % 1_000_000_000) as libc::c_long }
}

/// The nanosleep hot loop: absolute deadlines, every period kept.
#[inline(never)]
fn nanosleep_loop<'a>(
    ctx: &Ctx,
    mut books: Books<'a>,
    interval: u64,
    loops: u64,
    index: u64,
    done_base: u64,
) -> Result<Books<'a>, LiveError> {
    let mut next = books.woke + interval;
    for i in 0..loops {
        let t = ts(next);
        loop {
            // SAFETY: t is a valid timespec; no remaining-time output for TIMER_ABSTIME.
            let rc =
                unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &t, std::ptr::null_mut()) };
            if rc == 0 {
                break;
            }
            if rc != libc::EINTR {
                return Err(LiveError::os("clock_nanosleep", rc, "the kernel refused the absolute sleep"));
            }
            ctx.check(now_ns())?;
        }
        let now = now_ns();
        books.wake(next, now, interval);
        next += interval;
        if i & 255 == 255 {
            ctx.check(now)?;
            if index == 0 {
                ctx.set_done(done_base + i + 1);
            }
        }
    }
    Ok(books)
}

/// A per-thread periodic POSIX timer delivering SIGALRM to this thread only.
struct SigTimer {
    id: libc::timer_t,
    set: libc::sigset_t,
}

impl SigTimer {
    fn new(tid: i32) -> Result<SigTimer, LiveError> {
        // SAFETY: sigset operations on a local, zeroed set; pthread_sigmask on
        // this thread only (the signal stays blocked: it is taken by sigwaitinfo).
        let set = unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGALRM);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            set
        };
        // SAFETY: a zeroed sigevent is valid; fields set below.
        let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
        sev.sigev_notify = libc::SIGEV_THREAD_ID;
        sev.sigev_signo = libc::SIGALRM;
        sev.sigev_notify_thread_id = tid;
        let mut id: libc::timer_t = std::ptr::null_mut();
        // SAFETY: valid sigevent and output pointer.
        if unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut sev, &mut id) } != 0 {
            return Err(LiveError::last_os("timer_create", "POSIX timers unavailable? use mode=nanosleep"));
        }
        Ok(SigTimer { id, set })
    }

    fn arm(&self, first_ns: u64, interval: u64) -> Result<(), LiveError> {
        let spec = libc::itimerspec { it_interval: ts(interval), it_value: ts(first_ns) };
        // SAFETY: valid timer id and itimerspec.
        if unsafe { libc::timer_settime(self.id, libc::TIMER_ABSTIME, &spec, std::ptr::null_mut()) } != 0 {
            return Err(LiveError::last_os("timer_settime", "check the interval"));
        }
        Ok(())
    }

    fn disarm(&self) {
        let spec = libc::itimerspec { it_interval: ts(0), it_value: ts(0) };
        // SAFETY: valid timer id; a zero value disarms.
        unsafe { libc::timer_settime(self.id, 0, &spec, std::ptr::null_mut()) };
    }
}

impl Drop for SigTimer {
    fn drop(&mut self) {
        // SAFETY: deleting our own timer; then drain a pending SIGALRM so it
        // is not left queued, and unblock.
        unsafe {
            libc::timer_delete(self.id);
            let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            while libc::sigtimedwait(&self.set, std::ptr::null_mut(), &zero) == libc::SIGALRM {}
        }
    }
}

/// The sigalrm hot loop: wait for each signal; charge latency from the
/// intended expiry; record the measured period.
#[inline(never)]
fn sigalrm_loop<'a>(
    ctx: &Ctx,
    t: &mut SigTimer,
    mut books: Books<'a>,
    interval: u64,
    loops: u64,
    index: u64,
    done_base: u64,
) -> Result<Books<'a>, LiveError> {
    let start = books.woke + interval;
    t.arm(start, interval)?;
    let mut k: u64 = 0; // index of the expiry being waited for
    let mut prev: Option<u64> = None;
    let mut i = 0;
    let r = loop {
        if i >= loops {
            break Ok(books);
        }
        // SAFETY: the set is valid; no siginfo wanted.
        let sig = unsafe { libc::sigwaitinfo(&t.set, std::ptr::null_mut()) };
        let now = now_ns();
        if sig != libc::SIGALRM {
            if let Err(e) = ctx.check(now) {
                break Err(e);
            }
            continue;
        }
        let l = books.wake(start + k * interval, now, interval);
        if let Some(p) = prev {
            books.period.record(now - p);
        }
        prev = Some(now);
        // Expiries folded into this signal were missed periods; there can be
        // some only after a wake-up a whole interval late (one syscall then).
        let over = if l >= interval {
            // SAFETY: valid timer id.
            unsafe { libc::timer_getoverrun(t.id) }.max(0) as u64
        } else {
            0
        };
        books.missed += over;
        k += 1 + over;
        if i & 255 == 255 {
            if let Err(e) = ctx.check(now) {
                break Err(e);
            }
            if index == 0 {
                ctx.set_done(done_base + i + 1);
            }
        }
        i += 1;
    };
    t.disarm();
    r
}

#[cfg(test)]
mod tests {
    use super::{lost_time_warning, Books, Measured};

    fn measured(missed: &[f64], delay: Option<u64>, steal: Option<u64>) -> Measured {
        let n = missed.len();
        Measured {
            latency: Vec::new(),
            slept: Vec::new(),
            period: Vec::new(),
            max_ns: vec![7_300_000.0; n],
            missed: missed.to_vec(),
            run_delay: vec![delay; n],
            steal: vec![steal; n],
            rep_starts: Default::default(),
            applied: Vec::new(),
            slack_ns: 0,
            warnings: Vec::new(),
        }
    }

    #[test]
    fn missed_periods_are_blamed_on_the_kernel_accounting_of_their_repetitions() {
        assert_eq!(lost_time_warning(&measured(&[0.0, 0.0], Some(5), Some(0)), 1_000_000, &[0], 10_000_000), None);
        // Only the repetition with missed periods counts: 1.5 ms waited, 20 ms stolen.
        let mut m = measured(&[0.0, 24.0], Some(1_500_000), Some(20_000_000));
        m.run_delay[0] = Some(900_000_000);
        let w = lost_time_warning(&m, 1_000_000, &[0, 1], 10_000_000).unwrap();
        assert!(w.starts_with("24 period(s) missed by a whole interval (1000 us) in 1 repetition(s)"), "{w}");
        assert!(w.contains("worst wake-up 7.300 ms late"), "{w}");
        assert!(w.contains("waited 1.500 ms runnable"), "{w}");
        assert!(w.contains("stole 20 ms from CPU(s) 0,1 (±10 ms"), "{w}");
        assert!(!w.contains("neither covers"), "20 ms stolen covers a 7.3 ms stall: {w}");
        let w = lost_time_warning(&measured(&[1.0], Some(8_000_000), Some(0)), 1_000_000, &[0], 10_000_000).unwrap();
        assert!(!w.contains("neither covers"), "8 ms runnable covers a 7.3 ms stall: {w}");
        let w = lost_time_warning(&measured(&[1.0], Some(1_500_000), Some(0)), 1_000_000, &[0], 10_000_000).unwrap();
        assert!(w.contains("neither covers"), "{w}");
        let w = lost_time_warning(&measured(&[3.0], None, None), 1_000_000, &[0], 10_000_000).unwrap();
        assert!(w.contains("cause is unknown"), "{w}");
    }

    #[test]
    fn a_stall_charges_every_period_but_only_slept_ones_are_wake_latency() {
        let interval = 1_000;
        let mut b = Books::new(0, None, 0);
        // On time: slept into, 20 ns late.
        assert_eq!(b.wake(1_000, 1_020, interval), 20);
        // A stall: the period due at 2,000 wakes at 5,500 (3.5 intervals late).
        assert_eq!(b.wake(2_000, 5_500, interval), 3_500);
        // Catch-up periods, already due when the thread went back to sleep.
        b.wake(3_000, 5_510, interval);
        b.wake(4_000, 5_520, interval);
        b.wake(5_000, 5_530, interval);
        // Back on schedule.
        b.wake(6_000, 6_010, interval);
        assert_eq!(b.latency.count(), 6);
        assert_eq!(b.slept.count(), 3, "the on-time, stalled and resumed periods were slept into");
        assert_eq!(b.slept.max(), Some(3_500));
        // 3,500 and 2,510 and 1,520 are whole intervals late; 530 is not.
        assert_eq!(b.missed, 3);
        assert_eq!(b.latency.max(), Some(3_500));
    }
}
