//! # Methodology
//!
//! **Goal.** E5's "thread execution time": N threads at RT priority each copy
//! a 2 MB buffer, all started together; for each N report the best, average
//! and worst thread time. E5 saw the worst exceed the average by 50 ms or
//! more on a non-RT kernel; `worst_over_average` is that ratio.
//!
//! **Tasks.** N worker threads under the run's condition, or SCHED_FIFO 50
//! when no `--policy/--prio/--nice` is given (`--cpus` restricts them; not
//! pinned individually, so the scheduler places them). Each allocates its
//! own source and destination buffers of `size` KiB and writes every page
//! before the clock starts (pre-faulted; `--mlock` also locks them).
//!
//! **Timed.** Each repetition: all threads wait at a barrier; once released,
//! each takes `CLOCK_MONOTONIC`, copies source to destination `copies` times
//! (`copy_from_slice`, i.e. memcpy), and takes the clock again. Thread time
//! = its own end - its own start. The deadline and stop flag are checked
//! after every copy, so every RT loop is bounded. Around its span each
//! thread also reads its own `/proc/thread-self/schedstat` (one pread each
//! side, outside the span) for its run delay: time runnable but not running.
//! The barrier's leader (the last thread to arrive) marks the repetition
//! for the background loads; a last barrier marks the end of the last one.
//!
//! **Sweep.** `threads=0` (default) expands into one case per N in 1, 2, 4,
//! ... up to 4 x the usable CPUs (the last point is exactly 4 x CPUs).
//!
//! **Safety.** N busy RT threads >= CPUs with RT throttling off
//! (`sched_rt_runtime_us` = -1) would starve the machine: refused unless
//! `--force`. Two buffers per thread must fit in half of MemAvailable.
//! Every copy (and the pre-faulting) tells the RT watchdog the copiers
//! progress; copiers that stop progressing while RT tasks hold the CPUs
//! (a higher-priority RT load) get the case stopped within ~2 s.
//!
//! **RT throttling.** With throttling on, RT tasks get at most
//! runtime/period of each CPU (950 of 1000 ms by default), and since Linux
//! 6.12 the fair server also reserves time for starved normal tasks; either
//! stops RT threads that are ready to run for tens of ms. The kernel keeps no
//! counter of it that a task can read, so the result notes it from three
//! sources, each named in the warning:
//! - *inferred* from schedstat: per repetition, the threads' summed run
//!   delay minus the waiting that N threads on C CPUs cannot avoid (the
//!   integral of max(0, k(t) - C) over time, k(t) = threads inside their
//!   spans; a copier never blocks in its span). This `held_off` time is what
//!   something else took while they were ready; 1 ms or more in a
//!   repetition is noted (a higher-priority kernel thread takes
//!   microseconds, a throttled period tens of ms). It cannot tell throttling from the fair
//!   server or an RT task of higher priority, and says so;
//! - direct: the kernel logged "sched: RT throttling activated" during the
//!   case (`/dev/kmsg`, counted before and after; the kernel logs it only
//!   once per boot);
//! - direct: `/sys/kernel/debug/sched/debug` shows `rt_throttled` on an
//!   rt_rq right after the case (when debugfs is mounted and readable; a
//!   throttled rt_rq stays so until its next period).
//!
//! **Metrics.** `thread_time` (histogram of every thread's time, ns,
//! headline), `best`, `average`, `worst` (ns, per repetition),
//! `worst_over_average` (ratio per repetition, headline) and, when schedstat
//! is readable, `held_off` (ns per repetition, above).

use crate::error::LiveError;
use crate::harness::params::{ParamKind, ParamSpec, Params, SizeUnit};
use crate::harness::{self, now_ns, Ctx};
use crate::host::kstat::SchedStat;
use crate::{harness::condition, harness::load, Benchmark, RunPlan};
use schedlab_core::{BenchResult, Direction, LatencyHistogram, Metric, SchedCondition, SchedPolicy, Unit};
use std::sync::Barrier;

pub struct ExecTime;

const NAME: &str = "exectime";

const SPECS: &[ParamSpec] = &[
    ParamSpec {
        name: "threads",
        default: "0",
        quick_default: None,
        unit: "threads",
        help: "threads started together; 0 sweeps 1, 2, 4, ... up to 4 x CPUs (one case each)",
        kind: ParamKind::Count { min: 0, max: 4_096 },
        diagnostic: false,
    },
    ParamSpec {
        name: "size",
        default: "2048",
        quick_default: None,
        unit: "",
        help: "buffer copied by each thread (E5: 2 MB)",
        kind: ParamKind::Size { unit: SizeUnit::KiB, min: 4, max: 1_048_576 },
        diagnostic: false,
    },
    ParamSpec {
        name: "copies",
        default: "50",
        quick_default: Some("10"),
        unit: "copies",
        help: "times each thread copies its buffer per repetition",
        kind: ParamKind::Count { min: 1, max: 1_000_000 },
        diagnostic: false,
    },
];

fn default_condition() -> SchedCondition {
    SchedCondition { policy: SchedPolicy::Fifo, priority: Some(50), ..Default::default() }
}

fn sweep(cpus: usize) -> Vec<u64> {
    let max = 4 * cpus as u64;
    let mut v = Vec::new();
    let mut n = 1;
    while n < max {
        v.push(n);
        n *= 2;
    }
    v.push(max);
    v
}

fn rt_runtime_us() -> Option<i64> {
    std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").ok()?.trim().parse().ok()
}

impl Benchmark for ExecTime {
    fn name(&self) -> &'static str {
        NAME
    }

    fn summary(&self) -> &'static str {
        "E5: N RT threads copy a 2 MB buffer together; best, average and worst thread time per N"
    }

    fn params(&self) -> &'static [ParamSpec] {
        SPECS
    }

    fn cases(&self, params: &Params, plan: &RunPlan) -> Result<Vec<Params>, LiveError> {
        let p = params.resolve(NAME, SPECS, plan.quick)?;
        let plan = plan.with_condition(plan.condition_or(&default_condition()));
        plan.refuse_deadline(NAME)?;
        let usable = condition::preflight(&plan.condition)?;
        let ns = match p.count("threads")? {
            0 => sweep(usable.len()),
            n => vec![n],
        };
        let size = p.count("size")? * 1024;
        let mut cases = Vec::new();
        for n in ns {
            load::check_tasks(format!("exectime threads={n}"), n, "lower threads=")?;
            // Two buffers per thread, a histogram per repetition and the merged one.
            load::check_memory(
                &format!("exectime threads={n} size={} KiB (two buffers each)", size / 1024),
                n.saturating_mul(2 * size).saturating_add(load::histograms_bytes(plan.repeat as u64 + 1)),
                "lower threads= or size=",
            )?;
            let busy = if plan.condition.policy.is_realtime() { n } else { 0 };
            load::check(&plan.loads, busy, plan.force)?;
            load::check_starvation(&format!("exectime threads={n}"), busy, usable.len(), plan.force)?;
            let mut c = p.clone();
            c.set("threads", n);
            cases.push(c);
        }
        Ok(cases)
    }

    fn estimate_s(&self, case: &Params, plan: &RunPlan) -> f64 {
        let Ok(p) = case.resolve(NAME, SPECS, plan.quick) else { return 1.0 };
        let n = p.count("threads").unwrap_or(1).max(1) as f64;
        let bytes = (p.count("size").unwrap_or(2048) * 1024 * p.count("copies").unwrap_or(1)) as f64;
        // ~5 GB/s per copy stream, CPUs shared; 2 CPUs assumed for estimates.
        (plan.repeat + plan.warmup) as f64 * (n * bytes / 5e9 / 2.0 + 0.002 * n)
    }

    fn run(&self, case: &Params, plan: &RunPlan, progress: &dyn Fn(f64)) -> Result<BenchResult, LiveError> {
        let started = harness::unix_ms();
        let p = case.resolve(NAME, SPECS, plan.quick)?;
        let n = p.count("threads")?;
        if n == 0 {
            return Err(LiveError::BadParam {
                bench: NAME,
                key: "threads".into(),
                value: "0".into(),
                expected: "a thread count for a single case (cases() expands the sweep)".into(),
            });
        }
        let p = self.cases(&p, plan)?.remove(0);
        let plan = &plan.with_condition(plan.condition_or(&default_condition()));
        let usable = condition::preflight(&plan.condition)?;
        let size = (p.count("size")? * 1024) as usize;
        let copies = p.count("copies")?;
        let est = self.estimate_s(&p, plan);
        let total = (plan.warmup + plan.repeat) as u64;
        let rt = plan.condition.policy.is_realtime();
        let kmsg_before = if rt { kmsg_throttle_notes() } else { None };
        let (m, loads) =
            harness::drive(NAME, plan, est, total, progress, |ctx| measure(ctx, plan, n as usize, size, copies))?;
        // Right after the case: a throttled rt_rq stays so until its next period.
        let throttled_cpus = if rt { debugfs_throttled_cpus() } else { None };
        let kmsg_after = if rt { kmsg_throttle_notes() } else { None };
        let mut warnings = Vec::new();
        let applied = harness::merge_applied(&m.applied, plan.condition.mlock, &mut warnings);
        let (mut best, mut avg, mut worst, mut ratio, mut hists) = (vec![], vec![], vec![], vec![], vec![]);
        let mut held = Vec::new();
        for rep in &m.spans {
            let times: Vec<u64> = rep.iter().map(|s| s.t1 - s.t0).collect();
            let mut h = LatencyHistogram::new();
            times.iter().for_each(|t| h.record(*t));
            hists.push(h);
            let b = *times.iter().min().unwrap_or(&0) as f64;
            let w = *times.iter().max().unwrap_or(&0) as f64;
            let a = times.iter().sum::<u64>() as f64 / times.len().max(1) as f64;
            best.push(b);
            avg.push(a);
            worst.push(w);
            ratio.push(if a > 0.0 { w / a } else { f64::NAN });
            held.push(held_off_ns(rep, usable.len()));
        }
        // schedstat unreadable for some thread: no held-off figure at all.
        let held: Option<Vec<u64>> = held.into_iter().collect();
        if rt {
            let mut evidence = Vec::new();
            if let Some(h) = &held {
                let cut: Vec<u64> = h.iter().copied().filter(|ns| *ns >= HELD_OFF_NOTE_NS).collect();
                if let Some(max) = cut.iter().max() {
                    evidence.push(format!(
                        "inferred from schedstat: in {} of {} repetition(s) the threads were runnable but off the CPU for up to {:.1} ms beyond waiting for each other",
                        cut.len(),
                        h.len(),
                        *max as f64 / 1e6
                    ));
                }
            }
            if let (Some(b), Some(a)) = (kmsg_before, kmsg_after) {
                if a > b {
                    evidence.push(
                        "the kernel logged 'sched: RT throttling activated' during the case (it does so once per boot)"
                            .into(),
                    );
                }
            }
            if let Some(cpus) = throttled_cpus.filter(|c| !c.is_empty()) {
                evidence.push(format!(
                    "debugfs sched/debug showed rt_rq throttled on CPU(s) {} right after the case",
                    schedlab_core::condition::format_cpu_list(&cpus)
                ));
            }
            if !evidence.is_empty() {
                warnings.push(format!(
                    "RT bandwidth control cut in ({}): {}; thread times include those gaps",
                    rt_limits_text(),
                    evidence.join("; ")
                ));
            }
        }
        let mut r = harness::result(NAME, &p, SPECS, plan, applied, started, &loads);
        r.metrics = vec![
            Metric::histogram_per_repetition("thread_time", Direction::LowerIsBetter, hists).headline(),
            Metric::samples("best", Unit::Nanoseconds, Direction::LowerIsBetter, best),
            Metric::samples("average", Unit::Nanoseconds, Direction::LowerIsBetter, avg),
            Metric::samples("worst", Unit::Nanoseconds, Direction::LowerIsBetter, worst),
            Metric::samples("worst_over_average", Unit::Ratio, Direction::LowerIsBetter, ratio).headline(),
        ];
        if let Some(h) = held {
            let h = h.into_iter().map(|ns| ns as f64).collect();
            r.metrics.push(Metric::samples("held_off", Unit::Nanoseconds, Direction::LowerIsBetter, h));
        }
        r.metrics.extend(loads.metrics);
        r.warnings.extend(warnings);
        Ok(r)
    }
}

/// A repetition's held-off time from which the result notes RT bandwidth
/// control: throttling and the fair server withhold whole tens of ms at a
/// time, while a higher-priority kernel thread or the watchdog takes us.
const HELD_OFF_NOTE_NS: u64 = 1_000_000;

fn rt_period_us() -> Option<i64> {
    std::fs::read_to_string("/proc/sys/kernel/sched_rt_period_us").ok()?.trim().parse().ok()
}

/// The RT bandwidth settings in words, for the throttling note.
fn rt_limits_text() -> String {
    match (rt_runtime_us(), rt_period_us()) {
        (Some(-1), _) => "RT throttling is off (sched_rt_runtime_us -1), so the fair server's reserve for normal tasks or a higher-priority task".into(),
        (Some(r), Some(p)) => format!("RT throttling: sched_rt_runtime_us {r} per sched_rt_period_us {p} leaves {} ms per period to normal tasks, or the fair server's reserve for them", (p - r) / 1000),
        _ => "RT throttling or the fair server's reserve for normal tasks".into(),
    }
}

/// One thread's repetition: its clock span (ns) and, from its own
/// /proc/thread-self/schedstat over that span, the time it was runnable but
/// waiting for a CPU (`run_delay`, ns; None when unreadable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    t0: u64,
    t1: u64,
    waited: Option<u64>,
}

/// Time the threads of one repetition were runnable but not running beyond
/// what waiting for each other explains: the sum of their run delays minus
/// the integral of max(0, k(t) - cpus), where k(t) is the number of threads
/// inside their timed span at t (a copier never blocks in its span, so only
/// k - cpus of them can be waiting for a peer). None if a delay is unknown.
fn held_off_ns(spans: &[Span], cpus: usize) -> Option<u64> {
    let waited: u64 = spans.iter().map(|s| s.waited).sum::<Option<u64>>()?;
    let mut edges: Vec<(u64, i64)> = spans.iter().flat_map(|s| [(s.t0, 1), (s.t1, -1)]).collect();
    // At equal times ends (-1) sort first: touching spans do not overlap.
    edges.sort_unstable();
    let (mut k, mut last, mut peers) = (0i64, 0u64, 0u64);
    for (t, d) in edges {
        peers += (k - cpus as i64).max(0) as u64 * (t - last);
        k += d;
        last = t;
    }
    Some(waited.saturating_sub(peers))
}

/// How many times the kernel log holds "RT throttling activated" (None:
/// /dev/kmsg unreadable). Read non-blocking, one record per read.
fn kmsg_throttle_notes() -> Option<usize> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open("/dev/kmsg").ok()?;
    const NOTE: &[u8] = b"RT throttling activated";
    let mut buf = vec![0u8; 8192];
    let mut n = 0;
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Some(n),
            Ok(len) => n += buf[..len].windows(NOTE.len()).any(|w| w == NOTE) as usize,
            // EPIPE: a record was overwritten while reading; go on.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Some(n),
            Err(_) => return None,
        }
    }
}

/// CPUs whose root rt_rq is throttled now, from debugfs (None: unreadable).
fn debugfs_throttled_cpus() -> Option<Vec<usize>> {
    std::fs::read_to_string("/sys/kernel/debug/sched/debug").ok().map(|t| throttled_rt_rqs(&t))
}

/// `rt_rq[N]:` sections of sched/debug whose `.rt_throttled` is not 0.
fn throttled_rt_rqs(text: &str) -> Vec<usize> {
    let mut cpu: Option<usize> = None;
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("rt_rq[") {
            cpu = rest.split(']').next().and_then(|n| n.parse().ok());
        } else if !line.starts_with(' ') {
            cpu = None;
        } else if let (Some(c), Some(v)) = (cpu, line.trim().strip_prefix(".rt_throttled")) {
            if v.trim_start_matches([' ', ':']).trim() != "0" && !out.contains(&c) {
                out.push(c);
            }
        }
    }
    out
}

struct Measured {
    /// [rep] -> one span per thread
    spans: Vec<Vec<Span>>,
    applied: Vec<SchedCondition>,
}

fn measure(ctx: &Ctx, plan: &RunPlan, n: usize, size: usize, copies: u64) -> Result<Measured, LiveError> {
    let barrier = Barrier::new(n);
    let reps = plan.warmup + plan.repeat;
    let outs: Vec<Result<(Vec<Span>, SchedCondition), LiveError>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..n)
            .map(|i| {
                let barrier = &barrier;
                std::thread::Builder::new()
                    .name(format!("schedlab-exec{i}"))
                    .spawn_scoped(s, move || copier(ctx, barrier, size, copies, reps, i == 0))
            })
            .collect();
        hs.into_iter()
            .map(|h| match h {
                Ok(h) => h.join().unwrap_or_else(|_| {
                    Err(LiveError::Measurement { bench: NAME, detail: "a copier panicked".into() })
                }),
                Err(e) => Err(LiveError::Os {
                    what: "spawning a copier",
                    detail: e.to_string(),
                    hint: "lower threads= or check ulimit -u",
                }),
            })
            .collect()
    });
    let mut spans = vec![Vec::with_capacity(n); plan.repeat as usize];
    let mut applied = Vec::new();
    for o in outs {
        let (t, a) = o?;
        for (rep, v) in t.into_iter().enumerate().skip(plan.warmup as usize) {
            spans[rep - plan.warmup as usize].push(v);
        }
        applied.push(a);
    }
    Ok(Measured { spans, applied })
}

/// One copier thread. Spawning a thread cannot fail partway here in a way
/// that leaves the others waiting: every copier reaches the barrier once per
/// repetition and twice after the last, also after an error (it then skips
/// the copying). The barrier's leader (the last to arrive: every copier is
/// done with the previous repetition) marks repetitions for the loads.
fn copier(
    ctx: &Ctx,
    barrier: &Barrier,
    size: usize,
    copies: u64,
    reps: u32,
    first: bool,
) -> Result<(Vec<Span>, SchedCondition), LiveError> {
    let setup = condition::apply(0, ctx.cond, None).and_then(|_| condition::read_back(0));
    let tid = condition::gettid();
    if setup.is_ok() {
        ctx.watch(tid);
    }
    // Pre-fault both buffers before any clock starts.
    let src = vec![0x5au8; size];
    let mut dst = vec![0xa5u8; size];
    let stat = SchedStat::open();
    let mut spans = Vec::with_capacity(reps as usize);
    let mut err: Option<LiveError> =
        setup.as_ref().err().map(|e| LiveError::Measurement { bench: NAME, detail: e.to_string() });
    // Pre-faulting big buffers at RT takes a while: progress, for the watchdog.
    if err.is_none() {
        err = ctx.check(now_ns()).err();
    }
    for rep in 0..reps as u64 {
        if barrier.wait().is_leader() {
            if rep > 0 {
                ctx.rep_ends(rep - 1);
            }
            ctx.rep_starts(rep);
        }
        if err.is_some() {
            continue;
        }
        let d0 = stat.run_delay();
        let t0 = now_ns();
        for _ in 0..copies {
            dst.copy_from_slice(&src);
            std::hint::black_box(&mut dst);
            if let Err(e) = ctx.check(now_ns()) {
                err = Some(e);
                break;
            }
        }
        let t1 = now_ns();
        let waited = stat.run_delay().zip(d0).map(|(d1, d0)| d1.saturating_sub(d0));
        spans.push(Span { t0, t1, waited });
        if first {
            ctx.set_done(rep + 1);
        }
    }
    if barrier.wait().is_leader() && reps > 0 {
        ctx.rep_ends(reps as u64 - 1);
    }
    // Every copier stays until that mark has read its kernel counters.
    barrier.wait();
    ctx.unwatch(tid);
    let _ = condition::demote(0);
    if let Err(e) = setup {
        return Err(e);
    }
    if let Some(e) = err {
        return Err(e);
    }
    Ok((spans, setup.expect("checked")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(t0: u64, t1: u64, waited: u64) -> Span {
        Span { t0, t1, waited: Some(waited) }
    }

    #[test]
    fn held_off_time_excludes_waiting_for_peers() {
        // Two threads on two CPUs never need to wait: all their delay is held-off time.
        assert_eq!(held_off_ns(&[span(0, 100, 0), span(0, 100, 30)], 2), Some(30));
        // Three time-sliced threads on two CPUs over the same 90 ns: 90 ns of
        // waiting for a peer is expected; 20 more were taken by something else.
        assert_eq!(held_off_ns(&[span(0, 90, 40), span(0, 90, 40), span(0, 90, 30)], 2), Some(20));
        // FIFO: the third thread starts when the first ends; nobody waits.
        assert_eq!(held_off_ns(&[span(0, 50, 0), span(0, 60, 0), span(50, 100, 0)], 2), Some(0));
        // Peer waiting only counts while more threads than CPUs are in their spans.
        assert_eq!(held_off_ns(&[span(0, 10, 5), span(5, 20, 5)], 1), Some(5));
        assert_eq!(held_off_ns(&[span(0, 10, 5), Span { t0: 0, t1: 10, waited: None }], 1), None);
    }

    #[test]
    fn throttled_rt_rqs_are_read_from_sched_debug() {
        let text = "cpu#0\n  .nr_running                    : 3\n\ncfs_rq[0]:/\n  .rt_throttled                  : 1\n\nrt_rq[0]:\n  .rt_nr_running                 : 2\n  .rt_throttled                  : 1\n  .rt_time                       : 950.000000\n\ndl_rq[0]:\n  .dl_nr_running                 : 0\n\ncpu#1\nrt_rq[1]:\n  .rt_throttled                  : 0\nrt_rq[2]:/\n  .rt_throttled                  : 1\n";
        // cfs_rq's line is not an rt_rq's; CPU 1 is not throttled.
        assert_eq!(throttled_rt_rqs(text), vec![0, 2]);
        assert_eq!(throttled_rt_rqs(""), Vec::<usize>::new());
    }
}
