//! `--observe` on real cases: the measured tasks keep the rate asked for
//! under a big load, and the tracepoint route (`--observe=trace`, as root)
//! shows each task's switches and gives ftrace back. No timing figures:
//! counts and rates with wide margins, as CI machines are loaded.

mod common;
use common::{ftrace_settings, lock, plan, run};
use schedlab_core::timeline::TimelineTask;
use schedlab_core::MetricData;
use schedlab_live::observe::Observe;
use schedlab_live::{load, LiveError};

/// The times at which any of the task's quantities changed: the samples
/// that saw it move.
fn sample_times(t: &TimelineTask) -> Vec<u64> {
    let mut times: Vec<u64> = t.series.values().flatten().map(|&(at, _)| at).collect();
    times.sort_unstable();
    times.dedup();
    times
}

#[test]
fn measured_tasks_keep_their_rate_under_a_big_load() {
    let _g = lock();
    // A thread that wakes every millisecond for about 3 s under SCHED_OTHER
    // (its timeslices count moves between any two samples), beside
    // hackbench:4's 160 tasks, which all used to be read every sample.
    let mut p = plan(1, 0);
    p.explicit_condition = true;
    p.counters = false;
    p.loads = vec![load::parse("hackbench:4").unwrap()];
    p.observe = Some(Observe::parse("10").unwrap());
    let r = run("cyclic", "interval=1000,loops=3000,pin=no,mlock=no,pm_qos=no", &p).unwrap();
    let tl = r[0].timeline.as_ref().expect("--observe gives the case a timeline");
    let measured = tl
        .tasks
        .iter()
        .filter(|t| t.role == "measured")
        .max_by_key(|t| sample_times(t).len())
        .expect("a measured task");
    let times = sample_times(measured);
    // What the sampler reached, by its note: on a machine loaded beyond
    // the test's own load (other builds), a SCHED_OTHER thread beside 160
    // hackbench tasks wakes late and reaches less than asked (7 of 10 Hz at
    // a load average of 14), which is the machine, not the reads.
    let reached: f64 = tl
        .notes
        .iter()
        .find_map(|n| n.strip_prefix("measured tasks at ")?.split_once(" Hz")?.0.parse().ok())
        .expect("a note of the measured tasks' rate");
    let span_s = (times.last().unwrap() - times.first().unwrap()) as f64 / 1e9;
    let rate = (times.len() - 1) as f64 / span_s;
    assert!(
        span_s >= 1.0,
        "the measured thread ran for {span_s:.2} s of samples ({rate:.1} Hz), not about 3: {:?}",
        tl.notes
    );
    // The fix: every sample reads the measured task, however many loads
    // there are (they used to be read first, all of them, every sample).
    assert!(
        rate >= 0.8 * reached.min(10.0),
        "the measured task was sampled at {rate:.1} Hz of {reached:.1}: {:?}",
        tl.notes
    );
    // How much of the 10 Hz the sampler itself reaches is the machine's
    // (2 CPUs under 160 hackbench tasks gave 4.9 Hz on an idle CI machine):
    // a timing, not asserted here. That it sampled at all is.
    assert!(reached > 0.0, "the sampler reached {reached:.1} Hz of 10 asked: {:?}", tl.notes);
    // The loads are read too, in turn, and the notes say at what rate.
    let loads = tl.tasks.iter().filter(|t| t.role == "load" && !t.points("timeslices").is_empty()).count();
    assert!(loads >= 100, "only {loads} of hackbench:4's 160 tasks were read: {:?}", tl.notes);
    assert!(tl.notes.iter().any(|n| n.starts_with("measured tasks at ")), "{:?}", tl.notes);
    assert!(tl.notes.iter().any(|n| n.starts_with("load tasks each at ")), "{:?}", tl.notes);
}

/// tracefs, free for this test (root, mounted, no other trace running);
/// panics saying which precondition is missing.
fn tracefs() -> &'static std::path::Path {
    // SAFETY: geteuid cannot fail.
    assert!(unsafe { libc::geteuid() } == 0, "this test needs root (ftrace): run it as root");
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

/// ftrace's settings, the pid filter's included.
fn settings(dir: &std::path::Path) -> Vec<String> {
    let mut s = ftrace_settings(dir);
    for f in ["set_event_pid", "options/event-fork", "options/overwrite"] {
        s.push(format!("{f}={}", std::fs::read_to_string(dir.join(f)).unwrap_or_default()));
    }
    s
}

fn sum(r: &schedlab_core::BenchResult, metric: &str) -> f64 {
    match &r.metric(metric).unwrap_or_else(|| panic!("no metric {metric}")).data {
        MetricData::Samples { values } => values.iter().sum(),
        other => panic!("{metric} is not samples: {other:?}"),
    }
}

#[test]
#[ignore = "needs root and tracefs: CI runs ignored tests as root (cargo test -- --ignored)"]
fn tracing_pipe_shows_each_task_switching_and_gives_ftrace_back() {
    let _g = lock();
    let dir = tracefs();
    let before = settings(dir);
    let mut p = plan(1, 0);
    p.observe = Some(Observe::parse("trace").unwrap());
    let loops = 2000.0;
    // same-cpu: the two tasks switch to each other. Cross-CPU, each
    // switches to and from its CPU's idle task, and on the 2-vCPU dev VM
    // switches out of CPU 1's idle task are not traced (ftrace.rs): one
    // task's events were missing there (2 of its 2000 switch-ins).
    let r = run("pipe", "loops=2000,placement=same-cpu", &p).unwrap();
    assert_eq!(settings(dir), before, "every ftrace setting is back");
    let r = &r[0];
    let tl = r.timeline.as_ref().expect("--observe=trace gives the case a timeline");
    assert_eq!(tl.primary, "state");
    let switch_ins = |t: &TimelineTask| t.points("state").iter().filter(|&&(_, s)| s == 2.0).count() as f64;
    // The pipe's two tasks switch in and out all the time; a task woken
    // before it got off its CPU is not switched, so fewer than once a
    // round trip each, which the kernel's count shows alike.
    let busy: Vec<&TimelineTask> = tl.tasks.iter().filter(|t| t.role == "measured" && switch_ins(t) >= 100.0).collect();
    let all: Vec<(&String, f64)> = tl.tasks.iter().map(|t| (&t.name, switch_ins(t))).collect();
    let kernel = sum(r, "kernel.ctx_switches_voluntary") + sum(r, "kernel.ctx_switches_involuntary");
    assert!(busy.len() >= 2, "two pipe tasks switching in and out: {all:?}; the kernel counted {kernel}");
    for t in &busy {
        let sleeps = t.points("state").iter().filter(|&&(_, s)| s == 0.0).count() as f64;
        assert!(sleeps >= switch_ins(t) / 2.0, "{} slept {sleeps} times", t.name);
        assert!(t.points("wakeup_latency").len() as f64 >= switch_ins(t) / 2.0, "{}: its wake-ups", t.name);
        assert!(!t.points("cpu").is_empty() && !t.points("prio").is_empty(), "{}", t.name);
    }
    // Against the kernel's own count of the measured tasks' switches in the
    // repetition (the trace also holds the start and the end): within a factor 2.
    let traced: f64 = tl.tasks.iter().filter(|t| t.role == "measured").map(switch_ins).sum();
    assert!(
        traced >= kernel / 2.0 && traced <= kernel * 2.0,
        "traced {traced} switch-ins ({all:?}), the kernel counted {kernel}"
    );
    assert!(traced >= loops / 2.0, "{traced} switch-ins for {loops} round trips");
    // A busy ftrace is refused before anything starts, saying how to go on, and left as it was.
    std::fs::write(dir.join("set_event"), "sched:sched_switch\n").unwrap();
    let e = run("pipe", "loops=200,placement=cross-cpu", &p).unwrap_err();
    let busy = ftrace_settings(dir);
    std::fs::write(dir.join("set_event"), "").unwrap();
    assert!(matches!(e, LiveError::Observe(_)), "{e}");
    assert!(e.to_string().contains("ftrace is in use") && e.to_string().contains("--observe without =trace"), "{e}");
    assert!(busy.contains(&"set_event=sched:sched_switch\n".to_string()), "{busy:?}");
    assert_eq!(settings(dir), before);
}
