//! Live-kernel tests: tiny cases of every benchmark, condition errors,
//! restore guards, the watchdog and interrupt hygiene. They share global
//! state (the stop flag, this process's children), so each takes `LOCK`.
//! No timing assertions: only counts, signs and states.

mod common;
use common::ftrace_settings;
use schedlab_core::{BenchResult, Condition, MetricData, SchedCondition, SchedPolicy};
use schedlab_live::{condition, find, hygiene, LiveError, Params, RunPlan};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

static LOCK: Mutex<()> = Mutex::new(());

fn lock() -> MutexGuard<'static, ()> {
    let g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    hygiene::clear_stop();
    g
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn plan(repeat: u32, warmup: u32) -> RunPlan {
    RunPlan { condition: SchedCondition::default(), repeat, warmup, quick: true, ..Default::default() }
}

fn run(name: &str, params: &str, plan: &RunPlan) -> Result<Vec<BenchResult>, LiveError> {
    let b = find(name)?;
    let cases = b.cases(&Params::parse(params)?, plan)?;
    cases.iter().map(|c| b.run(c, plan, &|_| {})).collect()
}

fn samples<'a>(r: &'a BenchResult, metric: &str) -> &'a [f64] {
    match &r.metric(metric).unwrap_or_else(|| panic!("no metric {metric}")).data {
        MetricData::Samples { values } => values,
        other => panic!("{metric} is not samples: {other:?}"),
    }
}

/// Samples in the merged histogram, after checking that the per-repetition
/// histograms add up to it and that there is one per measured repetition.
fn hist_count(r: &BenchResult, metric: &str) -> u64 {
    match &r.metric(metric).unwrap_or_else(|| panic!("no metric {metric}")).data {
        MetricData::Histogram { histogram, repetitions } => {
            assert_eq!(repetitions.len(), r.repetitions as usize, "{metric}: one histogram per measured repetition");
            assert_eq!(repetitions.iter().map(|h| h.count()).sum::<u64>(), histogram.count(), "{metric}: parts add up");
            histogram.count()
        }
        other => panic!("{metric} is not a histogram: {other:?}"),
    }
}

fn applied(r: &BenchResult) -> SchedCondition {
    match &r.condition {
        Condition::Live { applied: Some(a), .. } => a.clone(),
        other => panic!("no applied condition: {other:?}"),
    }
}

fn my_children() -> Vec<i32> {
    hygiene::children_of(std::process::id() as i32)
}

/// Threads of this process started by the harness: its threads are named
/// "schedlab-*", and raw pthreads inherit the name of the thread creating them.
/// (Counting all threads would race with the test runner's own threads.)
fn harness_threads() -> Vec<String> {
    let mut out = Vec::new();
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        if let Ok(comm) = std::fs::read_to_string(t.path().join("comm")) {
            // The signal thread lives as long as the process, by design.
            if comm.starts_with("schedlab-") && comm.trim() != "schedlab-signal" {
                out.push(comm.trim().to_string());
            }
        }
    }
    out
}

fn two_cpus() -> bool {
    condition::online_cpus().map(|c| c.len() >= 2).unwrap_or(false)
}

/// Panic unless root: the test was asked to run (`--ignored`) and cannot.
fn need_root() {
    assert!(is_root(), "this test needs root (RT policies, ftrace, privilege drop): run it as root");
}

fn need_two_cpus() {
    assert!(two_cpus(), "this test needs two online CPUs");
}

#[test]
fn pipe_process_same_cpu_counts_every_round_trip() {
    let _g = lock();
    let r = run("pipe", "loops=3000,placement=same-cpu", &plan(2, 1)).unwrap();
    assert_eq!(r.len(), 1);
    let r = &r[0];
    assert_eq!(r.repetitions, 2);
    assert_eq!(r.warmup, 1);
    let rates = samples(r, "round_trips_per_s");
    assert_eq!(rates.len(), 2);
    assert!(rates.iter().all(|x| x.is_finite() && *x > 0.0), "{rates:?}");
    assert_eq!(hist_count(r, "round_trip_latency"), 6000, "warm-up must be excluded");
    assert_eq!(r.params["loops"], serde_json::json!(3000));
    assert_eq!(r.params["mode"], serde_json::json!("process"));
    assert_eq!(r.params["placement"], serde_json::json!("same-cpu"));
    let a = applied(r);
    assert_eq!(a.policy, SchedPolicy::Other);
    assert_eq!(a.cpus.as_ref().map(Vec::len), Some(1), "same-cpu pins both tasks to one CPU");
    assert!(r.metrics.iter().any(|m| m.headline && m.name == "round_trips_per_s"));
    assert!(!r.params.contains_key("latency"), "latency=yes is the default and stays out of the identity");
    assert!(my_children().is_empty());
}

#[test]
fn pipe_without_latencies_times_only_the_repetition() {
    let _g = lock();
    let r = run("pipe", "loops=3000,placement=same-cpu,latency=no", &plan(2, 1)).unwrap();
    let r = &r[0];
    let rates = samples(r, "round_trips_per_s");
    assert_eq!(rates.len(), 2);
    assert!(rates.iter().all(|x| x.is_finite() && *x > 0.0), "{rates:?}");
    assert!(r.metric("round_trip_latency").is_none(), "no per-round-trip clock, no histogram");
    assert_eq!(r.params["latency"], serde_json::json!("no"), "a rate without stamps is another case");
    assert!(my_children().is_empty());
}

/// Run a same-cpu pipe case under `cond` and, once it is measuring, read one
/// value from `/proc/PID/<file>` of each pipe runner process with `field`.
/// `file` of every task (thread) of the pipe runner processes, read once
/// while they measure.
fn pipe_runners_while_measuring(
    cond: SchedCondition,
    mode: &str,
    file: &str,
    field: impl Fn(&str) -> String,
) -> (BenchResult, Vec<String>) {
    let plan = RunPlan { condition: cond, ..plan(1, 0) };
    let b = find("pipe").unwrap();
    let params = format!("loops=300000,placement=same-cpu,mode={mode}");
    let case = b.cases(&Params::parse(&params).unwrap(), &plan).unwrap().remove(0);
    let seen = std::cell::RefCell::new(Vec::new());
    let r = b
        .run(&case, &plan, &|f| {
            if f > 0.0 && seen.borrow().is_empty() {
                for p in pipe_runners() {
                    let pid = p.split(' ').next().unwrap().to_string();
                    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
                        let text = std::fs::read_to_string(t.path().join(file)).unwrap_or_default();
                        seen.borrow_mut().push(field(&text));
                    }
                }
            }
        })
        .unwrap();
    (r, seen.into_inner())
}

#[test]
fn pipe_echo_process_gets_the_condition_too() {
    // The echo process is forked by the runner before the condition is
    // applied; the harness must apply it to both by pid. Seen from outside
    // while they run: both processes at nice 3.
    // Thread mode: the echo thread is started by the runner, and gets it by tid.
    let _g = lock();
    for mode in ["process", "thread"] {
        let cond = SchedCondition { nice: Some(3), ..Default::default() };
        let (r, nices) = pipe_runners_while_measuring(cond, mode, "stat", |stat| {
            // Field 19 is the nice value; fields after the ")" of comm start at 3.
            let after = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
            after.split_whitespace().nth(16).unwrap_or("?").to_string()
        });
        assert_eq!(nices, ["3", "3"], "{mode}: A and B, the only tasks of the runner(s), seen while measuring");
        let (_, comms) =
            pipe_runners_while_measuring(SchedCondition::default(), mode, "comm", |c| c.trim().to_string());
        assert!(comms.iter().all(|c| c == "schedlab-pipe" || c == "schedlab-pipe-b"), "{mode}: {comms:?}");
        assert_eq!(applied(&r).nice, Some(3));
        assert!(!r.warnings.iter().any(|w| w.contains("different policies")), "{:?}", r.warnings);
        assert!(!r.warnings.iter().any(|w| w.contains("forked runner")), "exec'd runner expected: {:?}", r.warnings);
    }
}

#[test]
fn runner_processes_honour_mlock() {
    // mlockall is not inherited by an exec'd image: the runner locks itself.
    let _g = lock();
    let (r, vmlck) =
        pipe_runners_while_measuring(SchedCondition { mlock: true, ..Default::default() }, "process", "status", |s| {
            let kb = s.lines().find_map(|l| l.strip_prefix("VmLck:")).unwrap_or("");
            kb.trim().trim_end_matches(" kB").to_string()
        });
    assert!(vmlck.iter().any(|kb| kb.parse::<u64>().unwrap_or(0) > 0), "no runner had locked memory: {vmlck:?}");
    assert!(applied(&r).mlock);
}

/// Pipe runner processes and their echo children, by argv[0] (their comm
/// is schedlab-pipe; argv[0] is exact).
fn pipe_runners() -> Vec<String> {
    let mut out = Vec::new();
    for p in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmd) = std::fs::read(p.path().join("cmdline")) {
            if cmd.starts_with(b"schedlab-pipe-runner\0") {
                out.push(format!("{} schedlab-pipe-runner", p.file_name().to_string_lossy()));
            }
        }
    }
    out
}

#[test]
fn pipe_all_expands_and_thread_mode_works() {
    let _g = lock();
    let b = find("pipe").unwrap();
    let cases = b.cases(&Params::parse("loops=500,mode=thread").unwrap(), &plan(1, 0)).unwrap();
    let placements: Vec<&str> = cases.iter().map(|c| c.get("placement").unwrap()).collect();
    if two_cpus() {
        assert_eq!(placements, ["same-cpu", "cross-cpu", "unpinned"]);
    }
    for c in &cases {
        let r = b.run(c, &plan(1, 0), &|_| {}).unwrap();
        assert_eq!(hist_count(&r, "round_trip_latency"), 500);
        if c.get("placement") == Some("cross-cpu") {
            assert_eq!(applied(&r).cpus.as_ref().map(Vec::len), Some(2), "cross-cpu uses two CPUs");
        }
    }
    let e = b.run(&Params::parse("placement=all").unwrap(), &plan(1, 0), &|_| {}).unwrap_err();
    assert!(matches!(e, LiveError::BadParam { .. }), "{e}");
}

#[test]
fn pipe_rejects_bad_params_before_starting() {
    let _g = lock();
    for (params, needle) in [
        ("loops=0", "from 1 to 1000000000"),
        ("loops=1000000001", "from 1 to 1000000000"),
        ("loops=-3", "whole number"),
        ("placement=sideways", "same-cpu"),
        ("lops=3", "valid parameters are loops, placement, mode"),
    ] {
        let e = run("pipe", params, &plan(1, 0)).unwrap_err().to_string();
        assert!(e.contains(needle), "{params}: {e}");
    }
    let one_cpu = RunPlan { condition: SchedCondition { cpus: Some(vec![0]), ..Default::default() }, ..plan(1, 0) };
    let e = run("pipe", "placement=cross-cpu", &one_cpu).unwrap_err();
    assert!(matches!(e, LiveError::TooFewCpus { .. }), "{e}");
    let e = run("pipe", "loops=10", &RunPlan { repeat: 0, ..plan(1, 0) }).unwrap_err();
    assert!(matches!(e, LiveError::BadRepeat(0)), "{e}");
}

#[test]
fn spawn_counts_every_process() {
    let _g = lock();
    let r = run("spawn", "count=40", &plan(2, 1)).unwrap();
    let r = &r[0];
    let rates = samples(r, "processes_per_s");
    assert_eq!(rates.len(), 2);
    assert!(rates.iter().all(|x| *x > 0.0));
    assert_eq!(hist_count(r, "spawn_latency"), 80);
    assert!(!r.warnings.iter().any(|w| w.contains("forked runner")), "exec'd runner not used: {:?}", r.warnings);
    assert!(my_children().is_empty());
    assert_eq!(harness_threads(), Vec::<String>::new());
}

#[test]
fn threads_counts_every_thread_and_leaks_none() {
    let _g = lock();
    let r = run("threads", "threads=300,alive=7", &plan(2, 1)).unwrap();
    let r = &r[0];
    assert_eq!(samples(r, "total_time").len(), 2);
    assert!(samples(r, "total_time").iter().all(|x| *x > 0.0));
    assert!(samples(r, "threads_per_s").iter().all(|x| *x > 0.0));
    assert_eq!(hist_count(r, "thread_lifetime"), 600);
    assert_eq!(hist_count(r, "create_latency"), 600);
    assert_eq!(harness_threads(), Vec::<String>::new());
    let e = run("threads", "alive=1000000", &plan(1, 0)).unwrap_err();
    assert!(matches!(e, LiveError::TooManyThreads { .. }), "{e}");
}

#[test]
#[ignore = "needs root: CI runs ignored tests as root (cargo test -- --ignored)"]
fn rt_policies_are_applied_to_the_measured_tasks_only() {
    let _g = lock();
    need_root();
    let before = condition::read_back(0).unwrap();
    let fifo = RunPlan {
        condition: SchedCondition { policy: SchedPolicy::Fifo, priority: Some(10), ..Default::default() },
        ..plan(1, 0)
    };
    let r = run("pipe", "loops=500,placement=same-cpu", &fifo).unwrap();
    let a = applied(&r[0]);
    assert_eq!((a.policy, a.priority), (SchedPolicy::Fifo, Some(10)));
    let r = run(
        "spawn",
        "count=20",
        &RunPlan {
            condition: SchedCondition { policy: SchedPolicy::Rr, priority: Some(5), ..Default::default() },
            ..plan(1, 0)
        },
    )
    .unwrap();
    assert_eq!(applied(&r[0]).policy, SchedPolicy::Rr);
    assert_eq!(condition::read_back(0).unwrap(), before, "the calling thread must be untouched");
}

#[test]
fn interrupted_pipe_leaves_no_child() {
    let _g = lock();
    let b = find("pipe").unwrap();
    let case = Params::parse("loops=100000000,placement=same-cpu,mode=process").unwrap();
    let saw_children = std::cell::Cell::new(false);
    let e = b
        .run(&case, &plan(1, 0), &|f| {
            if f > 0.0 {
                saw_children.set(saw_children.get() || !my_children().is_empty());
                hygiene::request_stop();
            }
        })
        .unwrap_err();
    assert!(matches!(e, LiveError::Interrupted), "{e}");
    assert!(saw_children.get(), "the echo child should have been running");
    assert_eq!(my_children(), Vec::<i32>::new(), "children left behind");
    // The echo process is the runner's child: it must be gone too (killed with
    // the runner's process group; reaping it may take a moment).
    let t0 = Instant::now();
    while !pipe_runners().is_empty() && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(pipe_runners(), Vec::<String>::new(), "grandchildren left behind");
    assert_eq!(hygiene::stop_reason(), Some(hygiene::StopReason::Requested));
    hygiene::clear_stop();
}

#[test]
fn interrupted_spawn_and_threads_leave_nothing() {
    let _g = lock();
    let stop_when_started = |f: f64| {
        if f > 0.0 {
            hygiene::request_stop();
        }
    };
    let e = find("spawn").unwrap().run(&Params::parse("count=100000000").unwrap(), &plan(1, 0), &stop_when_started);
    assert!(matches!(e, Err(LiveError::Interrupted)), "{e:?}");
    assert!(my_children().is_empty());
    hygiene::clear_stop();
    let e = find("threads").unwrap().run(
        &Params::parse("threads=100000000,alive=20").unwrap(),
        &plan(1, 0),
        &stop_when_started,
    );
    assert!(matches!(e, Err(LiveError::Interrupted)), "{e:?}");
    assert_eq!(harness_threads(), Vec::<String>::new(), "threads left behind");
    // Already stopped: a new case refuses to start.
    hygiene::request_stop();
    assert!(matches!(run("spawn", "count=5", &plan(1, 0)), Err(LiveError::Interrupted)));
    hygiene::clear_stop();
}

#[test]
fn sigterm_and_timeout_set_the_stop_flag() {
    let _g = lock();
    hygiene::install_signal_handlers().unwrap();
    // Idempotent.
    hygiene::install_signal_handlers().unwrap();
    // Process-directed, as from kill(1): the handler may run on any thread
    // that does not block it (this one does now).
    // SAFETY: kill to our own process; the handler is installed.
    unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
    let end = Instant::now() + Duration::from_secs(10);
    while !hygiene::stop_requested() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(hygiene::stop_requested());
    assert_eq!(hygiene::stop_reason(), Some(hygiene::StopReason::Signal));
    assert!(
        thread_named("schedlab-signal").is_some(),
        "the signal thread takes the signals; this process's threads: {:?}",
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
            .collect::<Vec<_>>()
    );
    hygiene::clear_stop();
    let guard = hygiene::arm_timeout(Duration::from_millis(20));
    let end = Instant::now() + Duration::from_secs(10);
    while !hygiene::stop_requested() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(hygiene::stop_reason(), Some(hygiene::StopReason::Timeout));
    drop(guard);
    hygiene::clear_stop();
    // A disarmed timeout never fires. Armed for 500 ms so that this thread
    // being descheduled between arming and disarming (a loaded CI machine)
    // cannot let it fire first.
    drop(hygiene::arm_timeout(Duration::from_millis(500)));
    std::thread::sleep(Duration::from_millis(800));
    assert!(!hygiene::stop_requested());
}

#[test]
#[ignore = "needs root: CI runs ignored tests as root (cargo test -- --ignored)"]
fn fifo_without_privilege_names_the_fix() {
    let _g = lock();
    need_root();
    // SAFETY: the child drops privileges and calls the library; glibc's
    // fork keeps malloc usable in the child. It always ends in _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let code = (|| {
            let zero = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            // SAFETY: plain syscalls on valid arguments.
            unsafe {
                if libc::setrlimit(libc::RLIMIT_RTPRIO, &zero) != 0
                    || libc::setgid(65534) != 0
                    || libc::setuid(65534) != 0
                {
                    return 10;
                }
            }
            let fifo = SchedCondition { policy: SchedPolicy::Fifo, priority: Some(10), ..Default::default() };
            match condition::apply(0, &fifo, None) {
                Err(e @ LiveError::RtPrivilege { .. }) => {
                    let msg = e.to_string();
                    if msg.contains("CAP_SYS_NICE") && msg.contains("ulimit -r") && !msg.contains('\n') {
                        0
                    } else {
                        11
                    }
                }
                Err(_) => 12,
                Ok(()) => 13,
            }
        })();
        // SAFETY: leave the forked test process at once.
        unsafe { libc::_exit(code) };
    }
    let status = hygiene::wait_pid(pid).unwrap();
    assert!(libc::WIFEXITED(status));
    assert_eq!(libc::WEXITSTATUS(status), 0, "child status: 10 setup, 11 message, 12 other error, 13 no error");
}

#[test]
fn restore_guard_restores_policy_and_affinity() {
    let _g = lock();
    let before = condition::read_back(0).unwrap();
    let cpus = condition::online_cpus().unwrap();
    let last = *cpus.last().unwrap();
    {
        let _guard = condition::ThreadGuard::capture().unwrap();
        let cond = if is_root() {
            SchedCondition { policy: SchedPolicy::Fifo, priority: Some(3), ..Default::default() }
        } else {
            // Unprivileged: a raised nice could not be lowered back, so keep it.
            SchedCondition { policy: SchedPolicy::Batch, ..Default::default() }
        };
        condition::apply(0, &cond, Some(&[last])).unwrap();
        let during = condition::read_back(0).unwrap();
        assert_eq!(during.policy, cond.policy);
        assert_eq!(during.cpus, Some(vec![last]));
    }
    assert_eq!(condition::read_back(0).unwrap(), before);
}

#[test]
#[ignore = "needs root: CI runs ignored tests as root (cargo test -- --ignored)"]
fn watchdog_demotes_an_overrunning_rt_thread() {
    let _g = lock();
    need_root();
    let wd = hygiene::Watchdog::start(None).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        let fifo = SchedCondition { policy: SchedPolicy::Fifo, priority: Some(5), ..Default::default() };
        condition::apply(0, &fifo, None).unwrap();
        tx.send(condition::gettid()).unwrap();
        // Sleep-poll (never spin at RT in a test) until demoted or 10 s pass.
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if condition::read_back(0).unwrap().policy == SchedPolicy::Other {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    });
    let tid = rx.recv().unwrap();
    wd.watch(tid, Instant::now());
    assert!(worker.join().unwrap(), "the watchdog did not demote the RT thread");
    assert!(wd.fired());
    assert_eq!(hygiene::stop_reason(), Some(hygiene::StopReason::Watchdog));
    drop(wd);
    hygiene::clear_stop();
}

#[test]
#[ignore = "needs root and two CPUs: CI runs ignored tests as root (cargo test -- --ignored)"]
fn watchdog_demotes_a_busy_rt_loop_only_once_the_measurement_stalls() {
    let _g = lock();
    need_root();
    need_two_cpus();
    let last = *condition::online_cpus().unwrap().last().unwrap();
    // The measurement's progress, as Ctx::check stamps it.
    let beat = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let b = std::sync::Arc::clone(&beat);
    let probe = Box::new(move || (b.load(std::sync::atomic::Ordering::Relaxed), 0));
    let wd = hygiene::Watchdog::start_with_progress(None, probe).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    // A FIFO 1 loop on the last CPU (throttling leaves the CPU 5 %; bounded at 8 s).
    let spinner = std::thread::spawn(move || {
        let fifo = SchedCondition { policy: SchedPolicy::Fifo, priority: Some(1), ..Default::default() };
        condition::apply(0, &fifo, Some(&[last])).unwrap();
        tx.send(condition::gettid()).unwrap();
        let end = Instant::now() + Duration::from_secs(8);
        while Instant::now() < end {
            for _ in 0..1_000_000 {
                std::hint::black_box(0u64);
            }
            if condition::read_back(0).unwrap().policy == SchedPolicy::Other {
                return true;
            }
        }
        let _ = condition::demote(0);
        false
    });
    let tid = rx.recv().unwrap();
    wd.watch(tid, Instant::now() + Duration::from_secs(3600));
    // A busy RT loop whose measurement progresses (exectime's copiers) is left alone.
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(2500) {
        beat.store(mono_ns(), std::sync::atomic::Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!wd.fired(), "demoted a loop whose measurement progressed: {:?}", wd.firing());
    // No more progress: demoted well before the hour-long deadline.
    assert!(spinner.join().unwrap(), "the busy RT loop was not demoted");
    match wd.firing() {
        Some(hygiene::Firing::Stall { stalled, busy, demoted }) => {
            assert_eq!(demoted, 1);
            assert!(stalled >= hygiene::STALL, "{stalled:?}");
            assert_eq!(busy.len(), 1, "{busy:?}");
            assert_eq!((busy[0].tid, busy[0].cpu, busy[0].policy.as_str()), (tid, Some(last), "fifo:1"));
        }
        other => panic!("not a stall: {other:?}"),
    }
    assert_eq!(hygiene::stop_reason(), Some(hygiene::StopReason::Watchdog));
    drop(wd);
    hygiene::clear_stop();
}

/// CLOCK_MONOTONIC in ns, the clock of `Ctx::check`'s stamps.
fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Tid of this process's thread named `comm` (at most 15 characters).
/// The tid of this process's thread named `comm`. Reading /proc/self/task
/// walks the thread list by position, so threads of other tests exiting
/// during the walk can make it skip a live one: it is read up to 20 times,
/// 5 ms apart, before the thread is taken as absent.
fn thread_named(comm: &str) -> Option<i32> {
    let scan = || {
        std::fs::read_dir("/proc/self/task").unwrap().flatten().find_map(|t| {
            let name = std::fs::read_to_string(t.path().join("comm")).ok()?;
            (name.trim() == comm).then(|| t.file_name().to_str()?.parse().ok()).flatten()
        })
    };
    (0..20).find_map(|i| {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        scan()
    })
}

fn voluntary_switches(tid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
    status.lines().find_map(|l| l.strip_prefix("voluntary_ctxt_switches:")).unwrap().trim().parse().unwrap()
}

#[test]
#[ignore = "needs root and two CPUs: CI runs ignored tests as root (cargo test -- --ignored)"]
fn watchdog_sleeps_until_the_nearest_deadline_on_the_cpus_it_is_given() {
    let _g = lock();
    need_root();
    need_two_cpus();
    let last = *condition::online_cpus().unwrap().last().unwrap();
    let wd = hygiene::Watchdog::start(Some(&[last])).unwrap();
    let tid = thread_named("schedlab-watchd").expect("the watchdog thread");
    assert_eq!(condition::get_affinity(tid).unwrap(), vec![last]);
    // A deadline an hour away: the watchdog wakes once for the new entry, then sleeps.
    wd.watch(condition::gettid(), Instant::now() + Duration::from_secs(3600));
    std::thread::sleep(Duration::from_millis(50));
    let before = voluntary_switches(tid);
    std::thread::sleep(Duration::from_millis(600));
    let woke = voluntary_switches(tid) - before;
    assert!(woke <= 1, "the watchdog woke {woke} times with no deadline near (a periodic tick?)");
    wd.unwatch(condition::gettid());
    assert!(!wd.fired());
    drop(wd);
    assert_eq!(thread_named("schedlab-watchd"), None, "the watchdog thread is joined on drop");
}

#[test]
#[ignore = "needs root and two CPUs: CI runs ignored tests as root (cargo test -- --ignored)"]
fn harness_threads_keep_off_the_measured_cpus() {
    let _g = lock();
    need_root();
    need_two_cpus();
    let before = condition::get_affinity(0).unwrap();
    let measured = before[0];
    let spare: Vec<usize> = before.iter().copied().filter(|c| *c != measured).collect();
    let p = RunPlan { condition: SchedCondition { cpus: Some(vec![measured]), ..Default::default() }, ..plan(1, 0) };
    let seen = std::cell::RefCell::new(Vec::new());
    let b = find("cyclic").unwrap();
    let case = b.cases(&Params::parse("interval=1000,loops=300").unwrap(), &p).unwrap().remove(0);
    let r = b
        .run(&case, &p, &|_| {
            let wd = thread_named("schedlab-watchd").map(|t| condition::get_affinity(t).unwrap());
            seen.borrow_mut().push((condition::get_affinity(0).unwrap(), wd));
        })
        .unwrap();
    assert_eq!(applied(&r).cpus, Some(vec![measured]));
    let seen = seen.into_inner();
    // The poller is pinned while it polls (progress 0 and 1 are reported outside that).
    assert!(seen.iter().any(|(mine, _)| *mine == spare), "the poller never left CPU {measured}: {seen:?}");
    assert!(seen.iter().all(|(_, wd)| wd.as_ref() == Some(&spare)), "watchdog affinity: {seen:?}");
    assert_eq!(condition::get_affinity(0).unwrap(), before, "the caller's affinity is restored");
}

#[test]
#[ignore = "needs root: CI runs ignored tests as root (cargo test -- --ignored)"]
fn deadline_runs_unpinned_only() {
    let _g = lock();
    need_root();
    let dl = SchedCondition {
        policy: SchedPolicy::Deadline,
        deadline: Some(schedlab_core::condition::DeadlineParams {
            runtime_ns: 300_000,
            deadline_ns: 1_000_000,
            period_ns: 1_000_000,
        }),
        ..Default::default()
    };
    let p = RunPlan { condition: dl, ..plan(1, 0) };
    let b = find("pipe").unwrap();
    let cases = b.cases(&Params::parse("loops=200").unwrap(), &p).unwrap();
    assert_eq!(cases.len(), 1);
    assert_eq!(cases[0].get("placement"), Some("unpinned"));
    let r = b.run(&cases[0], &p, &|_| {}).unwrap();
    assert_eq!(applied(&r).policy, SchedPolicy::Deadline);
    assert!(matches!(run("pipe", "placement=same-cpu", &p), Err(LiveError::DeadlinePinned)));
    assert!(matches!(run("spawn", "", &p), Err(LiveError::DeadlineCannotFork { .. })));
    let greedy = SchedCondition {
        deadline: Some(schedlab_core::condition::DeadlineParams {
            runtime_ns: 999_000,
            deadline_ns: 1_000_000,
            period_ns: 1_000_000,
        }),
        ..p.condition.clone()
    };
    let e = run("pipe", "loops=10", &RunPlan { condition: greedy, ..plan(1, 0) }).unwrap_err();
    assert!(matches!(e, LiveError::DeadlineAdmission { .. }), "{e}");
}

fn with_loads(p: RunPlan, loads: &[&str]) -> RunPlan {
    RunPlan { loads: loads.iter().map(|l| schedlab_live::load::parse(l).unwrap()).collect(), ..p }
}

#[test]
fn hackbench_both_transports_and_modes_give_one_time_per_repetition() {
    let _g = lock();
    for (mode, transport) in [("process", "socket"), ("thread", "pipe")] {
        let params = format!("groups=1,loops=5,fds=4,mode={mode},transport={transport}");
        let r = run("hackbench", &params, &plan(2, 1)).unwrap();
        let r = &r[0];
        assert_eq!(samples(r, "total_time").len(), 2, "{params}");
        assert!(samples(r, "total_time").iter().all(|t| *t > 0.0));
        assert!(samples(r, "messages_per_s").iter().all(|t| *t > 0.0));
        assert_eq!(r.params["groups"], serde_json::json!(1));
        assert!(!r.warnings.iter().any(|w| w.contains("forked runner")), "{:?}", r.warnings);
        assert!(my_children().is_empty());
        assert_eq!(harness_threads(), Vec::<String>::new());
    }
    let e = run("hackbench", "groups=100000,fds=1000", &plan(1, 0)).unwrap_err();
    assert!(matches!(e, LiveError::TooManyTasks { .. }), "{e}");
    let e = run("hackbench", "transport=tcp", &plan(1, 0)).unwrap_err();
    assert!(e.to_string().contains("socket, pipe"), "{e}");
}

#[test]
fn loads_are_started_measured_and_reaped() {
    let _g = lock();
    let p = with_loads(plan(3, 1), &["burn:1,nice=10", "hackbench:1"]);
    let seen = std::cell::Cell::new(0usize);
    let b = find("pipe").unwrap();
    let case = b.cases(&Params::parse("loops=2000,placement=same-cpu").unwrap(), &p).unwrap().remove(0);
    let names = std::cell::RefCell::new(std::collections::BTreeSet::new());
    let r = b
        .run(&case, &p, &|_| {
            let kids = my_children();
            seen.set(seen.get().max(kids.len()));
            for pid in kids {
                if let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm")) {
                    names.borrow_mut().insert(comm.trim().to_string());
                }
            }
        })
        .unwrap();
    assert!(seen.get() >= 41, "load tasks should run during the case (saw {})", seen.get());
    // Named, so top and ftrace reports say what they are.
    for n in ["schedlab-burn", "schedlab-hbrecv", "schedlab-hbsend"] {
        assert!(names.borrow().contains(n), "{n} not among {:?}", names.borrow());
    }
    match &r.condition {
        Condition::Live { loads, .. } => assert_eq!(loads, &["burn:1,nice=10", "hackbench:1"]),
        other => panic!("{other:?}"),
    }
    let burn = samples(&r, "load.burn.loops_per_s");
    assert_eq!(burn.len(), 3, "one figure per measured repetition");
    assert!(burn.iter().all(|x| *x >= 0.0));
    assert_eq!(samples(&r, "load.hackbench.messages_per_s").len(), 3);
    assert!(r.metric("load.burn.loops_per_s").map(|m| m.direction) == Some(schedlab_core::Direction::Neutral));
    assert_eq!(my_children(), Vec::<i32>::new(), "load tasks left behind");
}

#[test]
#[ignore = "needs root: CI runs ignored tests as root (cargo test -- --ignored)"]
fn every_benchmark_marks_its_repetitions_for_the_loads() {
    let _g = lock();
    need_root();
    let p = with_loads(plan(3, 1), &["burn:1,nice=19"]);
    for (bench, params) in [
        ("pipe", "loops=300,placement=same-cpu"),
        ("spawn", "count=20"),
        ("threads", "threads=50,alive=5"),
        ("hackbench", "groups=1,loops=5,fds=2"),
        ("wakeup", "samples=10,interval=500,waiters=1,classes=rt"),
        ("cyclic", "interval=200,loops=20"),
        ("exectime", "threads=2,size=16,copies=2"),
    ] {
        let r = run(bench, params, &p).unwrap_or_else(|e| panic!("{bench}: {e}"));
        let burn = samples(&r[0], "load.burn.loops_per_s");
        assert_eq!(burn.len(), 3, "{bench}: one load figure per measured repetition");
        assert!(burn.iter().all(|x| x.is_finite() && *x >= 0.0), "{bench}: {burn:?}");
        assert!(!r[0].warnings.iter().any(|w| w.contains("not marked")), "{bench}: {:?}", r[0].warnings);
    }
    assert_eq!(my_children(), Vec::<i32>::new(), "load tasks left behind");
    assert_eq!(harness_threads(), Vec::<String>::new());
}

#[test]
#[ignore = "needs root: CI runs ignored tests as root (cargo test -- --ignored)"]
fn cyclic_counts_periods_per_repetition_in_both_modes() {
    let _g = lock();
    need_root();
    for mode in ["nanosleep", "sigalrm"] {
        let r = run("cyclic", &format!("mode={mode},interval=500,loops=40"), &plan(2, 1)).unwrap();
        let r = &r[0];
        let threads = applied(r).cpus.map(|c| c.len()).unwrap_or(1) as u64;
        assert_eq!(hist_count(r, "latency"), 2 * 40 * threads, "{mode}");
        assert_eq!(samples(r, "missed_periods").len(), 2);
        // A period left out of wake_latency (already due when the thread
        // went to wait) follows a wake-up a whole interval late.
        let skipped = hist_count(r, "latency") - hist_count(r, "wake_latency");
        let missed: f64 = samples(r, "missed_periods").iter().sum();
        assert!(skipped as f64 <= missed, "{mode}: {skipped} skipped, {missed} missed");
        // Where lost time went, one figure per repetition (this kernel has both files).
        if std::path::Path::new("/proc/thread-self/schedstat").exists() {
            assert_eq!(samples(r, "run_delay").len(), 2, "{mode}");
        }
        assert_eq!(samples(r, "steal").len(), 2, "{mode}");
        assert_eq!(samples(r, "max_latency").len(), 2);
        assert_eq!(applied(r).policy, SchedPolicy::Fifo);
        assert_eq!(applied(r).priority, Some(95));
        if mode == "sigalrm" {
            assert_eq!(hist_count(r, "period"), 2 * 39 * threads, "one period fewer than wake-ups per repetition");
        } else {
            assert!(r.metric("period").is_none());
        }
        assert!(samples(r, "timer_slack")[0] <= 1.0);
    }
    // The user's condition overrides the default FIFO 95.
    let other = RunPlan { explicit_condition: true, ..plan(1, 0) };
    let r = run("cyclic", "interval=500,loops=20,mlock=no", &other).unwrap();
    assert_eq!(applied(&r[0]).policy, SchedPolicy::Other);
    assert!(r[0].warnings.iter().any(|w| w.contains("non-RT")), "{:?}", r[0].warnings);
    let e = run("cyclic", "interval=10", &plan(1, 0)).unwrap_err();
    assert!(matches!(e, LiveError::BadParam { .. }), "{e}");
    assert_eq!(harness_threads(), Vec::<String>::new());
}

#[test]
#[ignore = "needs root: CI runs ignored tests as root (cargo test -- --ignored)"]
fn wakeup_reports_both_classes_with_filter_and_missed_counts() {
    let _g = lock();
    need_root();
    let r = run("wakeup", "samples=30,interval=1000,waiters=2", &plan(2, 1)).unwrap();
    let r = &r[0];
    for class in ["rt", "normal"] {
        let n = hist_count(r, &format!("{class}.latency"));
        let missed: f64 = samples(r, &format!("{class}.missed")).iter().sum();
        assert!(
            n > 0 && n as f64 + missed <= 2.0 * 30.0 * 2.0,
            "{class}: at most one sample or miss per broadcast and waiter"
        );
        assert_eq!(samples(r, &format!("{class}.filtered_dropped")).len(), 2);
        assert_eq!(samples(r, &format!("{class}.filtered_mean")).len(), 2);
        // The filter's line comes only when it dropped something.
        let line = format!("{class}: 6-sigma filter dropped");
        for w in r.warnings.iter().filter(|w| w.starts_with(&line)) {
            assert!(!w.starts_with(&format!("{line} 0 ")), "{w}");
        }
    }
    assert_eq!((applied(r).policy, applied(r).priority), (SchedPolicy::Fifo, Some(90)));
    // Quick mode has no default load; the full benchmark defaults to hackbench:10.
    match &r.condition {
        Condition::Live { loads, .. } => assert!(loads.is_empty()),
        other => panic!("{other:?}"),
    }
    let r = run("wakeup", "samples=10,interval=1000,classes=rt,waiters=1", &with_loads(plan(1, 0), &["none"])).unwrap();
    assert!(r[0].metric("normal.latency").is_none());
    assert!(hist_count(&r[0], "rt.latency") + samples(&r[0], "rt.missed")[0] as u64 <= 10);
    assert_eq!(harness_threads(), Vec::<String>::new());
    assert!(my_children().is_empty());
}

#[test]
#[ignore = "needs root: CI runs ignored tests as root (cargo test -- --ignored)"]
fn exectime_sweeps_thread_counts_and_guards_starvation() {
    let _g = lock();
    need_root();
    let b = find("exectime").unwrap();
    let cpus = condition::online_cpus().unwrap().len() as u64;
    let cases = b.cases(&Params::parse("size=64,copies=2").unwrap(), &plan(1, 0)).unwrap();
    let ns: Vec<u64> = cases.iter().map(|c| c.get("threads").unwrap().parse().unwrap()).collect();
    assert_eq!(ns.first(), Some(&1));
    assert_eq!(ns.last(), Some(&(4 * cpus)));
    let r = run("exectime", "threads=3,size=64,copies=2", &plan(2, 1)).unwrap();
    assert_eq!(hist_count(&r[0], "thread_time"), 6);
    for m in ["best", "average", "worst", "worst_over_average"] {
        assert_eq!(samples(&r[0], m).len(), 2, "{m}");
    }
    assert!(samples(&r[0], "worst_over_average").iter().all(|x| *x >= 1.0));
    if std::path::Path::new("/proc/thread-self/schedstat").exists() {
        assert_eq!(samples(&r[0], "held_off").len(), 2, "held-off time per repetition from schedstat");
    }
    assert_eq!(harness_threads(), Vec::<String>::new());
    // Starvation guard: only with throttling off, which tests do not change.
    let e = schedlab_live::load::check_starvation("x", cpus, cpus as usize, false);
    assert_eq!(e.is_err(), schedlab_live::load::rt_throttling_off());
    assert!(schedlab_live::load::check_starvation("x", cpus, cpus as usize, true).is_ok());
    let e = run("exectime", "threads=5000", &plan(1, 0)).unwrap_err();
    assert!(matches!(e, LiveError::BadParam { .. }), "{e}");
}

#[test]
fn interrupted_hackbench_cyclic_and_loads_leave_nothing() {
    let _g = lock();
    let stop_when_started = |f: f64| {
        if f >= 0.0 {
            std::thread::sleep(Duration::from_millis(200));
            hygiene::request_stop();
        }
    };
    let p = with_loads(plan(1, 0), &["burn:1"]);
    let e = find("hackbench").unwrap().run(&Params::parse("groups=1,loops=100000000").unwrap(), &p, &stop_when_started);
    assert!(matches!(e, Err(LiveError::Interrupted)), "{e:?}");
    assert_eq!(my_children(), Vec::<i32>::new(), "children left behind");
    hygiene::clear_stop();
    let other = RunPlan { explicit_condition: true, ..plan(1, 0) };
    let e =
        find("cyclic").unwrap().run(&Params::parse("loops=100000000,mlock=no").unwrap(), &other, &stop_when_started);
    assert!(matches!(e, Err(LiveError::Interrupted)), "{e:?}");
    let e = find("wakeup").unwrap().run(
        &Params::parse("samples=100000,interval=1000,classes=normal").unwrap(),
        &other,
        &stop_when_started,
    );
    assert!(matches!(e, Err(LiveError::Interrupted)), "{e:?}");
    assert_eq!(harness_threads(), Vec::<String>::new(), "threads left behind");
    assert_eq!(my_children(), Vec::<i32>::new());
    hygiene::clear_stop();
}

/// tracefs, free for this test (root, mounted, no other trace running);
/// panics saying which precondition is missing.
fn tracefs() -> &'static std::path::Path {
    need_root();
    let dir = std::path::Path::new("/sys/kernel/tracing");
    assert!(
        dir.join("trace").exists(),
        "this test needs tracefs at /sys/kernel/tracing: mount -t tracefs nodev /sys/kernel/tracing"
    );
    let s = ftrace_settings(dir);
    assert!(
        s.contains(&"set_event=".to_string()) && s.contains(&"current_tracer=nop\n".to_string()),
        "ftrace is in use by something else ({s:?}): stop it (trace-cmd reset, or schedlab check --restore) and rerun"
    );
    dir
}

#[test]
#[ignore = "needs root and tracefs: CI runs ignored tests as root (cargo test -- --ignored)"]
fn breaktrace_explains_a_late_wake_up_and_gives_ftrace_back() {
    let _g = lock();
    let dir = tracefs();
    let before = ftrace_settings(dir);
    // Every wake-up is later than 1 us: the first measured one fires.
    let r = run("cyclic", "interval=500,loops=50,breaktrace=1", &plan(1, 1)).unwrap();
    let w = r[0].warnings.iter().find(|w| w.contains("breaktrace: a wake-up")).expect("a breaktrace report");
    assert!(w.contains("wakeup at +") && w.contains("back in user space at +"), "{w}");
    assert_eq!(ftrace_settings(dir), before, "every ftrace setting is back");
    // The trace around the stall is kept beside the report.
    let kept = w.split("; the trace around it is in ").nth(1).expect("the trace is kept");
    let text = std::fs::read_to_string(kept).unwrap();
    std::fs::remove_file(kept).unwrap();
    assert!(text.starts_with("# schedlab breaktrace: tid ") && text.contains("sched_wakeup"), "{text}");
    // wakeup: the waiters are woken by another task, which the report names.
    let r = run("wakeup", "samples=20,interval=2000,breaktrace=1", &plan(1, 0)).unwrap();
    let w = r[0].warnings.iter().find(|w| w.contains("breaktrace: a wake-up")).expect("a breaktrace report");
    // Woken by another task (the waker, or a waiter handing over the mutex)
    // or by an IPI it sent, which the report says; not by a timer.
    if w.contains("wakeup at +") {
        assert!(w.contains(" by ") && !w.contains("timer interrupt"), "{w}");
    }
    if let Some(kept) = w.split("; the trace around it is in ").nth(1) {
        std::fs::remove_file(kept).unwrap();
    }
    assert_eq!(ftrace_settings(dir), before);
    // A busy ftrace is refused before anything starts, and left as it was.
    std::fs::write(dir.join("set_event"), "sched:sched_switch\n").unwrap();
    let e = run("cyclic", "interval=500,loops=50,breaktrace=1", &plan(1, 0)).unwrap_err();
    let busy = ftrace_settings(dir);
    std::fs::write(dir.join("set_event"), "").unwrap();
    assert!(matches!(e, LiveError::Trace { .. }), "{e}");
    assert!(e.to_string().contains("ftrace is in use"), "{e}");
    assert!(busy.contains(&"set_event=sched:sched_switch\n".to_string()), "{busy:?}");
    assert_eq!(ftrace_settings(dir), before);
}

#[test]
#[ignore = "needs root and tracefs: CI runs ignored tests as root (cargo test -- --ignored)"]
fn split_divides_each_wake_up_at_the_timer_interrupt_and_gives_ftrace_back() {
    let _g = lock();
    let dir = tracefs();
    let filter = dir.join("events/timer/hrtimer_start/filter");
    let before = (ftrace_settings(dir), std::fs::read_to_string(&filter).unwrap_or_default());
    let r = run("cyclic", "interval=500,loops=200,split=yes", &plan(1, 1)).unwrap();
    let r = &r[0];
    let measured = hist_count(r, "latency");
    let (irq, switch) = (hist_count(r, "irq_latency"), hist_count(r, "switch_latency"));
    assert!(irq <= measured && irq * 2 >= measured, "measured wake-ups only, most of them: {irq} of {measured}");
    assert!(switch <= irq, "a switch-in only where its interrupt is known: {switch} > {irq}");
    let median = |m: &str| match &r.metric(m).unwrap().data {
        schedlab_core::MetricData::Histogram { histogram, .. } => histogram.quantile(0.5),
        other => panic!("{other:?}"),
    };
    if switch > 0 {
        assert!(median("switch_latency") >= median("irq_latency"), "the switch-in follows the interrupt");
    }
    assert_eq!(r.params["split"], serde_json::json!("yes"));
    assert_eq!((ftrace_settings(dir), std::fs::read_to_string(&filter).unwrap_or_default()), before, "filters too");
    let e = run("cyclic", "split=yes,breaktrace=100", &plan(1, 0)).unwrap_err();
    assert!(matches!(e, LiveError::BadParam { .. }) && e.to_string().contains("use one at a time"), "{e}");
}
