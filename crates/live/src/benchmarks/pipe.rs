//! # Methodology
//!
//! **Goal.** Cost of a wakeup + context switch between two tasks that hand a
//! token back and forth: E1's "pipe-based context switching" (BYTE/UnixBench
//! `context1`) and `perf bench sched pipe`.
//!
//! **Tasks.** A measuring task A and an echo task B, connected by two pipes
//! (A→B, B→A), exchange a 4-byte token. `mode=process` (default, like perf):
//! A is an exec'd runner process (a fresh, single-threaded image, see
//! `runner.rs`) and B its forked child; the harness applies the condition to
//! both by pid once B exists (deadline tasks may not fork) and reads both
//! back. A single-threaded A matters: a switch into a process with more
//! threads costs more (on the 2-vCPU VM one idle extra thread added ~0.15 us
//! to the fastest round trip of a C loop), and A running as a thread of the
//! harness was 4.5 % slower than `perf bench sched pipe` for that reason.
//! `mode=thread` (like `perf bench sched pipe -T`): B is a second thread of
//! the same runner, started before the hello; the harness applies the
//! condition to it by tid. Either way the measuring process holds only A and
//! B, none of the harness's threads.
//!
//! **Placement.** `same-cpu`: A and B pinned to the first usable CPU (a pure
//! switch, no IPI). `cross-cpu`: A and B on two different CPUs, preferring a
//! CPU that is not an SMT sibling of A's (wakeup IPI + idle exit of the other
//! CPU). `unpinned`: both get the condition's CPU set (or inherit), and the
//! scheduler decides (wake-affine usually pulls them together). `all`
//! expands into the three. Usable CPUs = `--cpus`, else the harness's affinity.
//!
//! **Timed.** Each repetition runs `loops` round trips (write token, read it
//! back). One `clock_gettime(CLOCK_MONOTONIC)` (vDSO) per round trip; the
//! difference of consecutive stamps is one round-trip latency (so it also
//! contains recording it: a store into a 32 KiB buffer, which the runner
//! writes to the harness every 4096 round trips, inside the timed loop). Rate = loops divided by
//! the time from the first stamp to the last: fork, setup and teardown are
//! excluded (perf includes its fork and wait, so schedlab reads slightly
//! higher for small loop counts).
//! No allocation in the loop; the stop flag and the case deadline are
//! checked every 1024 round trips.
//!
//! **Warm-up.** `warmup` repetitions run first on the same task pair and are
//! discarded (page faults, cpufreq ramp, cache warm-up).
//!
//! **Metrics.** `round_trips_per_s` (one sample per repetition, headline,
//! higher is better); `round_trip_latency` (histogram of every measured round
//! trip, ns). One round trip = two context switches (perf's "usecs/op" is
//! one round trip, too). The per-round-trip clock read costs ~0.7 % of a
//! same-CPU round trip here (measured in the C loop itself); `latency=no`
//! drops it (the rate only, timed like perf and the C loop) for
//! like-with-like comparisons of the rate.
//!
//! **Known biases.** Under `unpinned` the result depends on where the
//! scheduler puts the tasks, and may change mid-run (bimodal histograms). In
//! VMs, cross-CPU wakeups pay for a virtual IPI and a vCPU halt exit, often
//! 10x a same-CPU switch. The progress poller on the caller's thread wakes
//! 10 times a second (on a CPU outside `--cpus` when there is one).

use crate::error::LiveError;
use crate::harness::condition;
use crate::harness::params::{ParamKind, ParamSpec, Params};
use crate::harness::runner::{Helpers, RunnerEntry, Sink};
use crate::harness::{self, now_ns, read_exact, write_exact, Ctx};
use crate::{Benchmark, RunPlan};
use schedlab_core::condition::format_cpu_list;
use schedlab_core::{BenchResult, Direction, LatencyHistogram, Metric, SchedCondition, SchedPolicy, Unit};
use std::os::fd::{AsRawFd, OwnedFd};

pub struct Pipe;

const NAME: &str = "pipe";
const PLACEMENTS: [&str; 3] = ["same-cpu", "cross-cpu", "unpinned"];

const SPECS: &[ParamSpec] = &[
    ParamSpec {
        name: "loops",
        default: "1000000",
        quick_default: Some("20000"),
        unit: "round trips",
        help: "round trips per repetition (perf bench sched pipe's default is 1,000,000)",
        kind: ParamKind::Count { min: 1, max: 1_000_000_000 },
        diagnostic: false,
    },
    ParamSpec {
        name: "placement",
        default: "all",
        quick_default: None,
        unit: "",
        help: "same-cpu, cross-cpu, unpinned, or all (one case each)",
        kind: ParamKind::Choice(&["same-cpu", "cross-cpu", "unpinned", "all"]),
        diagnostic: false,
    },
    ParamSpec {
        name: "mode",
        default: "process",
        quick_default: None,
        unit: "",
        help: "echo task is a forked process (like perf) or a thread",
        kind: ParamKind::Choice(&["process", "thread"]),
        diagnostic: false,
    },
    ParamSpec {
        name: "latency",
        default: "yes",
        quick_default: None,
        unit: "",
        help: "time every round trip (yes) or only the repetition, like perf (no: ~0.7 % faster, no histogram)",
        kind: ParamKind::Choice(&["yes", "no"]),
        // At its default it stays out of the result's identity, so runs made
        // before the switch existed still compare.
        diagnostic: true,
    },
];

/// Token values: anything else is echoed; QUIT makes the echo task exit.
const TOKEN: [u8; 4] = [0, 0, 0, 0];
const QUIT: [u8; 4] = [0xff; 4];

/// Nominal round-trip costs (s) for progress estimates only.
fn nominal_rt_s(placement: &str) -> f64 {
    match placement {
        "same-cpu" => 5e-6,
        "cross-cpu" => 30e-6,
        _ => 15e-6,
    }
}

impl Benchmark for Pipe {
    fn runner(&self) -> Option<RunnerEntry> {
        Some(RunnerEntry { comm: c"schedlab-pipe", prepare: Some(runner_prepare), body: runner_body })
    }

    fn name(&self) -> &'static str {
        NAME
    }

    fn summary(&self) -> &'static str {
        "two tasks bounce a token through a pair of pipes: context switches per second and round-trip latency"
    }

    fn params(&self) -> &'static [ParamSpec] {
        SPECS
    }

    fn cases(&self, params: &Params, plan: &RunPlan) -> Result<Vec<Params>, LiveError> {
        let p = params.resolve(NAME, SPECS, plan.quick)?;
        let usable = condition::preflight(&plan.condition)?;
        // One latency histogram per repetition, the warm-up's and the merged one.
        crate::harness::load::check_memory(
            &format!("pipe with --repeat {} (histograms)", plan.repeat),
            crate::harness::load::histograms_bytes(plan.repeat as u64 + 2),
            "lower --repeat",
        )?;
        let deadline = plan.condition.policy == SchedPolicy::Deadline;
        let placements: Vec<&str> = match p.word("placement")? {
            // Deadline tasks cannot be pinned: `all` means the one placement that works.
            "all" if deadline => vec!["unpinned"],
            "all" => PLACEMENTS.to_vec(),
            one => vec![one],
        };
        let mut cases = Vec::new();
        for pl in placements {
            if deadline && pl != "unpinned" {
                return Err(LiveError::DeadlinePinned);
            }
            placement_cpus(pl, &usable, &plan.condition)?;
            let mut c = p.clone();
            c.set("placement", pl);
            cases.push(c);
        }
        Ok(cases)
    }

    fn estimate_s(&self, case: &Params, plan: &RunPlan) -> f64 {
        let p = case.resolve(NAME, SPECS, plan.quick).unwrap_or_else(|_| case.clone());
        let loops = p.count("loops").unwrap_or(0) as f64;
        let reps = (plan.repeat + plan.warmup) as f64;
        loops * reps * nominal_rt_s(p.word("placement").unwrap_or("unpinned"))
    }

    fn run(&self, case: &Params, plan: &RunPlan, progress: &dyn Fn(f64)) -> Result<BenchResult, LiveError> {
        let started = harness::unix_ms();
        let p = case.resolve(NAME, SPECS, plan.quick)?;
        let placement = p.word("placement")?.to_string();
        if placement == "all" {
            return Err(LiveError::BadParam {
                bench: NAME,
                key: "placement".into(),
                value: "all".into(),
                expected: "one of same-cpu, cross-cpu, unpinned for a single case (cases() expands all)".into(),
            });
        }
        let usable = condition::preflight(&plan.condition)?;
        let (cpus_a, cpus_b, mut warnings) = placement_cpus(&placement, &usable, &plan.condition)?;
        let loops = p.count("loops")?;
        let thread_mode = p.word("mode")? == "thread";
        let stamp_each = p.word("latency")? == "yes";
        let est = self.estimate_s(&p, plan);
        let total = loops * (plan.repeat + plan.warmup) as u64;
        let (m, loads) = harness::drive(NAME, plan, est, total, progress, |ctx| {
            measure(ctx, plan, loops, thread_mode, stamp_each, cpus_a.as_deref(), cpus_b.as_deref())
        })?;
        warnings.extend(m.warnings);
        if placement == "unpinned" {
            warnings
                .push("unpinned: the scheduler chose where the two tasks ran; compare with same-cpu/cross-cpu".into());
        }
        let mut metrics =
            vec![Metric::samples("round_trips_per_s", Unit::PerSecond, Direction::HigherIsBetter, m.rates).headline()];
        if stamp_each {
            metrics.push(
                Metric::histogram_per_repetition("round_trip_latency", Direction::LowerIsBetter, m.reps).headline(),
            );
        }
        let mut r = harness::result(NAME, &p, SPECS, plan, m.applied, started, &loads);
        r.metrics = metrics;
        r.metrics.extend(loads.metrics);
        r.warnings.extend(warnings);
        Ok(r)
    }
}

type CpuSets = (Option<Vec<usize>>, Option<Vec<usize>>, Vec<String>);

/// CPU sets of task A and B for a placement, from the usable CPUs.
fn placement_cpus(placement: &str, usable: &[usize], cond: &SchedCondition) -> Result<CpuSets, LiveError> {
    let mut warnings = Vec::new();
    match placement {
        "same-cpu" => Ok((Some(vec![usable[0]]), Some(vec![usable[0]]), warnings)),
        "cross-cpu" => {
            if usable.len() < 2 {
                return Err(LiveError::TooFewCpus {
                    placement: placement.into(),
                    need: 2,
                    have: usable.len(),
                    cpus: format_cpu_list(usable),
                });
            }
            let a = usable[0];
            let siblings = smt_siblings(a);
            let b = match usable[1..].iter().find(|c| !siblings.contains(c)) {
                Some(&b) => b,
                None => {
                    warnings.push(format!("cross-cpu ran on SMT siblings {a} and {}: no other usable core", usable[1]));
                    usable[1]
                }
            };
            Ok((Some(vec![a]), Some(vec![b]), warnings))
        }
        _ => Ok((cond.cpus.clone(), cond.cpus.clone(), warnings)),
    }
}

fn smt_siblings(cpu: usize) -> Vec<usize> {
    std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"))
        .ok()
        .and_then(|s| schedlab_core::condition::parse_cpu_list(s.trim()).ok())
        .unwrap_or_else(|| vec![cpu])
}

struct Measured {
    rates: Vec<f64>,
    /// Round-trip latencies of each measured repetition.
    reps: Vec<LatencyHistogram>,
    applied: Option<SchedCondition>,
    warnings: Vec<String>,
}

/// A is an exec'd runner; B its child or its second thread (see the Methodology).
fn measure(
    ctx: &Ctx,
    plan: &RunPlan,
    loops: u64,
    thread_mode: bool,
    stamp_each: bool,
    cpus_a: Option<&[usize]>,
    cpus_b: Option<&[usize]>,
) -> Result<Measured, LiveError> {
    let mode = if thread_mode { "thread" } else { "process" };
    let stamp = if stamp_each { "yes" } else { "no" };
    let args =
        [loops.to_string(), plan.repeat.to_string(), plan.warmup.to_string(), mode.to_string(), stamp.to_string()];
    let out = crate::harness::runner::run(ctx, NAME, &args, &[cpus_a, cpus_b])?;
    let mut warnings = Vec::new();
    if !out.exec {
        warnings.push(
            "pipe ran in a forked runner: this binary could not re-execute itself, so the measuring process carries the harness's memory map".into(),
        );
    }
    out.check_complete(NAME, plan.repeat)?;
    let applied = harness::merge_applied(&out.applied, ctx.cond.mlock, &mut warnings);
    let rates = out.elapsed.iter().map(|ns| loops as f64 * 1e9 / *ns as f64).collect();
    Ok(Measured { rates, reps: out.reps, applied, warnings })
}

/// The two pipes between A and B, named by who uses each end.
struct TokenPipes {
    a_writes: OwnedFd,
    a_reads: OwnedFd,
    b_reads: OwnedFd,
    b_writes: OwnedFd,
}

impl TokenPipes {
    fn new() -> Result<TokenPipes, LiveError> {
        let (b_reads, a_writes) = harness::pipe()?;
        let (a_reads, b_writes) = harness::pipe()?;
        Ok(TokenPipes { a_writes, a_reads, b_reads, b_writes })
    }
}

/// Runner side, before its hello: the two pipes and the echo task B, a
/// forked process or (args[3] = "thread") a second thread of the runner.
pub(crate) fn runner_prepare<S: AsRef<str>>(args: &[S]) -> Result<Helpers, LiveError> {
    use std::os::fd::IntoRawFd;
    let p = TokenPipes::new()?;
    let (br, bw) = (p.b_reads.as_raw_fd(), p.b_writes.as_raw_fd());
    let (aw, ar) = (p.a_writes.as_raw_fd(), p.a_reads.as_raw_fd());
    if args.get(3).map(|a| a.as_ref()) == Some("thread") {
        let (tx, rx) = std::sync::mpsc::channel();
        let (b_reads, b_writes) = (p.b_reads, p.b_writes);
        let echo = std::thread::Builder::new()
            .name("schedlab-pipe-b".into())
            .spawn(move || {
                let _ = tx.send(condition::gettid());
                let code = echo_loop(b_reads.as_raw_fd(), b_writes.as_raw_fd());
                drop((b_reads, b_writes));
                code
            })
            .map_err(|e| LiveError::Os {
                what: "spawning the echo thread",
                detail: e.to_string(),
                hint: "check ulimit -u",
            })?;
        let tid = rx.recv().map_err(|_| LiveError::Measurement { bench: NAME, detail: "echo thread died".into() })?;
        return Ok(Helpers {
            pids: vec![tid],
            fds: vec![p.a_writes.into_raw_fd(), p.a_reads.into_raw_fd()],
            thread: Some(echo),
        });
    }
    // SAFETY: the runner is single-threaded; the child only calls prctl,
    // close, read and write (async-signal-safe), then _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            libc::close(aw);
            libc::close(ar);
            libc::_exit(echo_loop(br, bw));
        }
    }
    if pid < 0 {
        return Err(LiveError::last_os("fork", "too many processes? check ulimit -u"));
    }
    drop((p.b_reads, p.b_writes));
    Ok(Helpers { pids: vec![pid], fds: vec![p.a_writes.into_raw_fd(), p.a_reads.into_raw_fd()], thread: None })
}

/// Runner side, after "go": args = [loops, repeat, warmup, mode, latency].
pub(crate) fn runner_body<S: AsRef<str>>(
    ctx: &Ctx,
    args: &[S],
    helpers: &mut Helpers,
    sink: &mut Sink,
) -> Result<(), LiveError> {
    let n = |i: usize| args.get(i).and_then(|s| s.as_ref().parse::<u64>().ok());
    let stamp_each = args.get(4).map(|a| a.as_ref()) != Some("no");
    let (Some(loops), Some(repeat), Some(warmup), [w, r], [echo]) =
        (n(0), n(1), n(2), helpers.fds.as_slice(), helpers.pids.as_slice())
    else {
        return Err(LiveError::Measurement { bench: NAME, detail: "bad runner arguments".into() });
    };
    for rep in 0..warmup + repeat {
        sink.discard = rep < warmup;
        ctx.rep_starts(rep);
        let elapsed = if stamp_each {
            round_trips::<true>(ctx, *w, *r, loops, rep * loops, |ns| sink.latency(ns))
        } else {
            round_trips::<false>(ctx, *w, *r, loops, rep * loops, |_| Ok(()))
        };
        ctx.rep_ends(rep);
        let elapsed = elapsed?;
        if !sink.discard {
            sink.end_rep(elapsed)?;
        }
    }
    write_exact(*w, &QUIT);
    let ok = match helpers.thread.take() {
        Some(t) => t.join().is_ok_and(|code| code == 0),
        None => {
            let status = crate::harness::hygiene::wait_pid(*echo)?;
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
        }
    };
    if !ok {
        return Err(LiveError::Measurement { bench: NAME, detail: "the echo task did not end cleanly".into() });
    }
    Ok(())
}

/// The hot loop: `loops` round trips, one clock read each, each latency
/// handed to `record`.
#[inline(never)]
fn round_trips<const STAMP_EACH: bool>(
    ctx: &Ctx,
    w: i32,
    r: i32,
    loops: u64,
    done_base: u64,
    mut record: impl FnMut(u64) -> Result<(), LiveError>,
) -> Result<u64, LiveError> {
    let mut tok = TOKEN;
    let t0 = now_ns();
    let mut prev = t0;
    for i in 0..loops {
        if !write_exact(w, &tok) || !read_exact(r, &mut tok) {
            return Err(LiveError::Measurement { bench: NAME, detail: "the echo task went away mid-run".into() });
        }
        // Without STAMP_EACH (latency=no) the clock is read once per 1024
        // round trips, for the stop flag and deadline only: perf's cost.
        if STAMP_EACH {
            let now = now_ns();
            record(now - prev)?;
            prev = now;
        }
        if i & 1023 == 1023 {
            if !STAMP_EACH {
                prev = now_ns();
            }
            ctx.check(prev)?;
            ctx.set_done(done_base + i + 1);
        }
    }
    if !STAMP_EACH {
        prev = now_ns();
    }
    Ok(prev - t0)
}

/// Task B: echo tokens until QUIT or EOF. Async-signal-safe (used after fork).
fn echo_loop(r: i32, w: i32) -> i32 {
    let mut buf = [0u8; 4];
    loop {
        if !read_exact(r, &mut buf) {
            return 2;
        }
        if buf == QUIT {
            return 0;
        }
        if !write_exact(w, &buf) {
            return 3;
        }
    }
}
