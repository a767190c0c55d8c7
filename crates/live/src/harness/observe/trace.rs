//! `--observe=trace`: the measured tasks' and the loads' scheduler events
//! (sched_switch, sched_wakeup, sched_wakeup_new, sched_migrate_task and,
//! where the kernel has it, sched_stat_runtime) recorded through an ftrace
//! session (`ftrace.rs`, which takes ftrace only when free and gives every
//! setting back, after a crash too) and turned into timeline series per
//! task: `state` (2 running, 1 runnable, 0 sleeping), `cpu`, `prio`,
//! `wakeup_latency` (each wake-up to its switch-in), `migrations` and
//! `runtime`.
//!
//! Filter: the kernel's own pid filter (`set_event_pid` with `event-fork`)
//! holds the thread that starts the loads and the measuring thread, and
//! adds every task started from it, so only switches and wake-ups that
//! involve those tasks are recorded, whatever CPU they run on. The
//! sampler's walk says which of them are measured and which are loads
//! (`observe.rs`); a task too short-lived for a walk takes the role of the
//! task that forked it (sched_process_fork). The harness's own threads are
//! left out.
//!
//! Bounded: the buffer (`ftrace::buffer_kb` per CPU) does not overwrite;
//! a CPU whose buffer fills stops recording there, and the timeline then
//! ends at the first such CPU's last event, with a note (the kernel counts
//! what it dropped per CPU in `per_cpu/cpuN/stats`).

use crate::error::LiveError;
use crate::harness::ftrace::{self, Event, Tracing, OBSERVE_EVENTS};
use crate::harness::now_ns;
use schedlab_core::timeline::{Missing, Quantity, Timeline, TimelineTask};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// ftrace free and writable for this user, as `--observe=trace` needs it.
pub(super) fn check() -> Result<(), LiveError> {
    Tracing::check().map(|_| ()).map_err(for_observe)
}

/// A tracing error, told as `--observe=trace`'s, with its own way out.
fn for_observe(e: LiveError) -> LiveError {
    match e {
        LiveError::Trace { detail, fix } => {
            let fix = fix.replace(
                "drop breaktrace=/split=",
                "use --observe without =trace (it reads /proc and needs no privilege)",
            );
            LiveError::Observe(format!("trace needs ftrace, but {detail}: {fix}"))
        }
        other => other,
    }
}

/// A trace being recorded.
pub(super) struct Session {
    tracing: Tracing,
    t0: u64,
}

/// A trace recorded, not read yet; ftrace is given back as it drops.
pub(super) struct Stopped {
    tracing: Tracing,
    t0: u64,
    end_ns: u64,
}

impl Session {
    /// Record `root`'s events and those of every task it starts from now
    /// on; times are counted from `t0` (CLOCK_MONOTONIC, as the trace clock).
    pub(super) fn start(root: i32, t0: u64) -> Result<Session, LiveError> {
        Ok(Session { tracing: Tracing::start_for_tasks(root, OBSERVE_EVENTS).map_err(for_observe)?, t0 })
    }

    pub(super) fn stop(self) -> Stopped {
        self.tracing.stop();
        Stopped { end_ns: now_ns().saturating_sub(self.t0), tracing: self.tracing, t0: self.t0 }
    }
}

impl Stopped {
    /// The timeline of the tasks `roles` names (and those they started).
    pub(super) fn timeline(self, roles: &BTreeMap<i32, &'static str>) -> Timeline {
        let dir = self.tracing.dir().to_path_buf();
        let lost = lost_per_cpu(&dir);
        let input = TraceInput {
            t0_ns: self.t0,
            end_ns: self.end_ns,
            roles,
            lost: &lost,
            buffer_kb: ftrace::buffer_kb(),
            runtime_event: dir.join("events/sched/sched_stat_runtime").exists(),
        };
        match self.tracing.text() {
            Ok(text) => timeline_from_trace(&text, &input),
            Err(e) => {
                let mut t = timeline_from_trace("", &input);
                t.notes.push(format!("the trace could not be read back: {e}"));
                t
            }
        }
    }
}

/// Events each CPU's buffer lost (dropped when full, or overwritten).
fn lost_per_cpu(dir: &Path) -> Vec<(usize, u64)> {
    let Ok(entries) = std::fs::read_dir(dir.join("per_cpu")) else { return Vec::new() };
    let mut out: Vec<(usize, u64)> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            let cpu = e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok()?;
            Some((cpu, parse_lost(&std::fs::read_to_string(e.path().join("stats")).ok()?)))
        })
        .collect();
    out.sort_unstable();
    out
}

/// `overrun` plus `dropped events` of a `per_cpu/cpuN/stats` text.
pub(crate) fn parse_lost(stats: &str) -> u64 {
    stats
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| matches!(k.trim(), "overrun" | "dropped events"))
        .filter_map(|(_, v)| v.trim().parse::<u64>().ok())
        .sum()
}

/// What the trace's text is read with.
pub(crate) struct TraceInput<'a> {
    /// CLOCK_MONOTONIC ns of the timeline's 0.
    pub t0_ns: u64,
    /// When recording stopped, from t0.
    pub end_ns: u64,
    /// Tasks the walk found, by role ("measured", "load").
    pub roles: &'a BTreeMap<i32, &'static str>,
    /// (CPU, events its buffer lost).
    pub lost: &'a [(usize, u64)],
    pub buffer_kb: u64,
    /// The kernel has sched_stat_runtime.
    pub runtime_event: bool,
}

/// A task's series being built, and what the next event needs to know.
struct Track {
    task: TimelineTask,
    running: bool,
    /// The CPU it last switched in on.
    ran_on: Option<usize>,
    /// Its pending wake-up's time (trace ns).
    woken_at: Option<u64>,
    migrations: u64,
    runtime_ns: f64,
}

const STATE_RUNNING: f64 = 2.0;
const STATE_RUNNABLE: f64 = 1.0;
const STATE_SLEEPING: f64 = 0.0;

fn num<T: std::str::FromStr>(v: Option<&str>) -> Option<T> {
    v?.parse().ok()
}

/// Who is who: the walk's roles, and who forked whom.
struct Roles<'a> {
    walked: &'a BTreeMap<i32, &'static str>,
    parent: HashMap<i32, i32>,
    memo: HashMap<i32, Option<&'static str>>,
}

impl Roles<'_> {
    /// The role of `pid`: the walk's, else that of the task that forked it.
    fn of(&mut self, pid: i32) -> Option<&'static str> {
        if let Some(r) = self.memo.get(&pid) {
            return *r;
        }
        let mut p = pid;
        let mut role = None;
        // Fork chains are short; the bound only guards against a pid reused in a loop.
        for _ in 0..64 {
            if let Some(r) = self.walked.get(&p) {
                role = Some(*r);
                break;
            }
            match self.parent.get(&p) {
                Some(&q) => p = q,
                None => break,
            }
        }
        self.memo.insert(pid, role);
        role
    }
}

/// The track of task `pid`, made at its first event if it has a role; its
/// name follows its comm (a runner execs, a thread names itself).
fn track<'t>(
    tracks: &'t mut BTreeMap<i32, Track>,
    roles: &mut Roles,
    pid: Option<i32>,
    comm: Option<&str>,
) -> Option<&'t mut Track> {
    let pid = pid.filter(|&p| p > 0)?;
    let role = roles.of(pid)?;
    let comm = comm.unwrap_or("?");
    let name = || format!("{role} {comm} {pid}");
    let tr = tracks.entry(pid).or_insert_with(|| Track {
        task: TimelineTask::new(pid as u64, name(), role),
        running: false,
        ran_on: None,
        woken_at: None,
        migrations: 0,
        runtime_ns: 0.0,
    });
    if !tr.task.name.ends_with(&format!(" {comm} {pid}")) {
        tr.task.name = name();
    }
    Some(tr)
}

/// The trace's text as a timeline of the tasks with a role.
pub(crate) fn timeline_from_trace(text: &str, input: &TraceInput) -> Timeline {
    // First pass: who forked whom, and where each CPU's recording ends.
    let mut parent: HashMap<i32, i32> = HashMap::new();
    let mut last_on_cpu: HashMap<usize, u64> = HashMap::new();
    for e in text.lines().filter_map(Event::parse) {
        last_on_cpu.insert(e.cpu, e.ts_ns);
        if e.name == "sched_process_fork" {
            if let (Some(p), Some(c)) = (num(e.field("pid")), num(e.field("child_pid"))) {
                parent.insert(c, p);
            }
        }
    }
    // A full buffer stopped taking that CPU's events at its last one: after
    // the first such end, the trace no longer holds everything.
    let full: Vec<(usize, u64, u64)> = input
        .lost
        .iter()
        .filter(|(_, n)| *n > 0)
        .filter_map(|&(cpu, n)| Some((cpu, *last_on_cpu.get(&cpu)?, n)))
        .collect();
    let cut = full.iter().map(|&(_, ts, _)| ts).min();
    let rel = |ts: u64| ts.saturating_sub(input.t0_ns);
    let mut roles = Roles { walked: input.roles, parent, memo: HashMap::new() };
    let mut tracks: BTreeMap<i32, Track> = BTreeMap::new();
    for e in text.lines().filter_map(Event::parse) {
        if cut.is_some_and(|c| e.ts_ns > c) {
            continue;
        }
        let t = rel(e.ts_ns);
        match e.name {
            "sched_switch" => {
                if let Some(tr) = track(&mut tracks, &mut roles, num(e.field("prev_pid")), e.field("prev_comm")) {
                    let state = e.field("prev_state").unwrap_or("");
                    tr.running = false;
                    // "R"/"R+": preempted, still runnable; anything else waits (S, D, I) or ends (X, Z).
                    let level = if state.starts_with('R') { STATE_RUNNABLE } else { STATE_SLEEPING };
                    tr.task.push("state", t, level);
                    if let Some(p) = num::<f64>(e.field("prev_prio")) {
                        tr.task.push("prio", t, p);
                    }
                    if state.starts_with('X') || state.starts_with('Z') {
                        tr.task.last_seen_ns = Some(t);
                    }
                }
                if let Some(tr) = track(&mut tracks, &mut roles, num(e.field("next_pid")), e.field("next_comm")) {
                    tr.running = true;
                    tr.task.push("state", t, STATE_RUNNING);
                    tr.task.push("cpu", t, e.cpu as f64);
                    if let Some(p) = num::<f64>(e.field("next_prio")) {
                        tr.task.push("prio", t, p);
                    }
                    if let Some(w) = tr.woken_at.take() {
                        // One point per wake-up, equal values included (not a level).
                        tr.task.series.entry("wakeup_latency".into()).or_default().push((t, (e.ts_ns - w) as f64));
                    }
                    if tr.ran_on.is_some_and(|c| c != e.cpu) {
                        tr.migrations += 1;
                    }
                    tr.task.push("migrations", t, tr.migrations as f64);
                    tr.ran_on = Some(e.cpu);
                }
            }
            "sched_wakeup" | "sched_wakeup_new" => {
                if let Some(tr) = track(&mut tracks, &mut roles, num(e.field("pid")), e.field("comm")) {
                    // A task woken before it got off the CPU never slept.
                    if !tr.running {
                        tr.task.push("state", t, STATE_RUNNABLE);
                        tr.woken_at = Some(e.ts_ns);
                        if let Some(c) = num::<f64>(e.field("target_cpu")) {
                            tr.task.push("cpu", t, c);
                        }
                    }
                    if let Some(p) = num::<f64>(e.field("prio")) {
                        tr.task.push("prio", t, p);
                    }
                }
            }
            "sched_migrate_task" => {
                if let Some(tr) = track(&mut tracks, &mut roles, num(e.field("pid")), e.field("comm")) {
                    if let Some(c) = num::<f64>(e.field("dest_cpu")) {
                        tr.task.push("cpu", t, c);
                    }
                }
            }
            "sched_stat_runtime" => {
                if let Some(tr) = track(&mut tracks, &mut roles, num(e.field("pid")), e.field("comm")) {
                    if let Some(r) = num::<f64>(e.field("runtime")) {
                        tr.runtime_ns += r;
                        tr.task.push("runtime", t, tr.runtime_ns);
                    }
                }
            }
            _ => {}
        }
    }
    let q = |name: &str, unit: &str, lower: Option<bool>| Quantity {
        name: name.into(),
        unit: unit.into(),
        lower_runs_first: lower,
    };
    let mut quantities = vec![
        q("state", "", None),
        q("cpu", "", None),
        q("prio", "", Some(true)),
        q("wakeup_latency", "ns", None),
        q("migrations", "count", None),
    ];
    let mut missing = Vec::new();
    if input.runtime_event {
        quantities.push(q("runtime", "ns", None));
    } else {
        missing
            .push(Missing { name: "runtime".into(), why: "this kernel has no sched:sched_stat_runtime event".into() });
    }
    let mut notes =
        vec!["state: 2 running, 1 runnable (woken, or preempted), 0 sleeping or blocked; wakeup_latency: each \
         wake-up to its switch-in (the trace prints microseconds); migrations: switch-ins on another CPU than \
         the task's last"
            .to_string()];
    let end_ns = match cut {
        Some(c) => {
            let cpus: Vec<String> = full.iter().map(|(cpu, _, _)| cpu.to_string()).collect();
            let dropped: u64 = full.iter().map(|&(_, _, n)| n).sum();
            notes.push(format!(
                "the trace buffer ({} KiB a CPU) filled on CPU {} at +{:.3} s and {dropped} events were \
                 dropped: recording stopped there, and the timeline ends there; a shorter run or fewer loads \
                 keep it whole",
                input.buffer_kb,
                cpus.join(", "),
                rel(c) as f64 / 1e9
            ));
            rel(c).min(input.end_ns)
        }
        None => input.end_ns,
    };
    let mut tasks: Vec<TimelineTask> = tracks.into_values().map(|t| t.task).collect();
    if !tasks.iter().any(|t| t.role == "measured") {
        // Said, never drawn as an idle task: an empty pid-filtered trace is
        // a lost trace (a task the filter missed, a kernel that dropped it).
        notes.push(
            "the trace holds no event of the measured tasks: their timeline is missing, not idle; rerun, \
             or use --observe without =trace"
                .into(),
        );
    }
    // Measured tasks first, then the loads; by id within each.
    tasks.sort_by_key(|t| (t.role != "measured", t.id));
    Timeline {
        source: "ftrace: sched_switch, sched_wakeup(_new), sched_migrate_task, sched_stat_runtime of the measured \
                 tasks and the loads (set_event_pid, following forks)"
            .into(),
        primary: "state".into(),
        quantities,
        missing,
        end_ns,
        tasks,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runner 100 (measured) forks 101; they hand a token back and forth
    /// across CPUs 0 and 1; hackbench 300 is a load; 999 is no one's.
    const TRACE: &str = "\
# tracer: nop
 schedlab-run-100 [000] d..2. 100.000100: sched_process_fork: comm=schedlab-run pid=100 child_comm=schedlab-run child_pid=101
 schedlab-run-100 [000] d..2. 100.000110: sched_wakeup_new: comm=schedlab-run pid=101 prio=120 target_cpu=001
 <idle>-0 [001] d..2. 100.000120: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=schedlab-run next_pid=101 next_prio=120
 schedlab-run-100 [000] d..2. 100.000200: sched_switch: prev_comm=schedlab-run prev_pid=100 prev_prio=120 prev_state=S ==> next_comm=hackbench next_pid=300 next_prio=120
 schedlab-run-101 [001] d..2. 100.000300: sched_wakeup: comm=schedlab-run pid=100 prio=120 target_cpu=001
 schedlab-run-101 [001] d..2. 100.000310: sched_switch: prev_comm=schedlab-run prev_pid=101 prev_prio=120 prev_state=S ==> next_comm=schedlab-run next_pid=100 next_prio=120
 hackbench-300 [000] d..2. 100.000400: sched_stat_runtime: comm=hackbench pid=300 runtime=200000 [ns]
 hackbench-300 [000] d..2. 100.000410: sched_switch: prev_comm=hackbench prev_pid=300 prev_prio=120 prev_state=R+ ==> next_comm=other next_pid=999 next_prio=120
 schedlab-run-100 [001] d..2. 100.000500: sched_wakeup: comm=schedlab-run pid=101 prio=120 target_cpu=000
 other-999 [000] d..2. 100.000505: sched_switch: prev_comm=other prev_pid=999 prev_prio=120 prev_state=S ==> next_comm=schedlab-run next_pid=101 next_prio=120
 schedlab-run-100 [001] d..2. 100.000600: sched_stat_runtime: comm=schedlab-run pid=100 runtime=290000 [ns]
 schedlab-run-101 [000] d..2. 100.000700: sched_switch: prev_comm=schedlab-run prev_pid=101 prev_prio=120 prev_state=X ==> next_comm=swapper/0 next_pid=0 next_prio=120
";

    fn input<'a>(roles: &'a BTreeMap<i32, &'static str>, lost: &'a [(usize, u64)]) -> TraceInput<'a> {
        TraceInput { t0_ns: 100_000_000_000, end_ns: 800_000, roles, lost, buffer_kb: 16384, runtime_event: true }
    }

    #[test]
    fn a_trace_becomes_series_per_task_with_roles_from_the_walk_and_forks() {
        let roles = BTreeMap::from([(100, "measured"), (300, "load")]);
        let tl = timeline_from_trace(TRACE, &input(&roles, &[]));
        let ids: Vec<(u64, &str)> = tl.tasks.iter().map(|t| (t.id, t.role.as_str())).collect();
        assert_eq!(ids, [(100, "measured"), (101, "measured"), (300, "load")], "999 and the idle task are no one's");
        let task = |id: u64| tl.tasks.iter().find(|t| t.id == id).unwrap();
        // The forked child: woken new, ran on CPU 1, slept, woken to CPU 0, ran there, exited.
        let child = task(101);
        assert_eq!(child.name, "measured schedlab-run 101");
        let state = [(110_000, 1.0), (120_000, 2.0), (310_000, 0.0), (500_000, 1.0), (505_000, 2.0), (700_000, 0.0)];
        assert_eq!(child.points("state"), state);
        assert_eq!(child.points("wakeup_latency"), [(120_000, 10_000.0), (505_000, 5_000.0)]);
        assert_eq!(child.points("cpu"), [(110_000, 1.0), (500_000, 0.0)]);
        assert_eq!(child.points("migrations"), [(120_000, 0.0), (505_000, 1.0)]);
        assert_eq!(child.points("prio"), [(110_000, 120.0)]);
        assert_eq!(child.last_seen_ns, Some(700_000), "it exited");
        // The runner: first seen leaving the CPU to sleep; its wake-up on CPU 1.
        let runner = task(100);
        assert_eq!(runner.points("state"), [(200_000, 0.0), (300_000, 1.0), (310_000, 2.0)]);
        assert_eq!(runner.points("wakeup_latency"), [(310_000, 10_000.0)]);
        assert_eq!(runner.points("runtime"), [(600_000, 290_000.0)]);
        assert_eq!(runner.last_seen_ns, None);
        // The load, preempted: runnable, not sleeping.
        assert_eq!(task(300).points("state"), [(200_000, 2.0), (410_000, 1.0)]);
        assert_eq!(tl.primary, "state");
        assert_eq!(tl.end_ns, 800_000);
        assert!(tl.quantity("runtime").is_some() && tl.missing.is_empty());
        assert!(tl.notes[0].starts_with("state: 2 running, 1 runnable"), "{:?}", tl.notes);
        assert!(!tl.notes.iter().any(|n| n.contains("no event of the measured")), "{:?}", tl.notes);
        // A measured task the trace never saw is said to be missing, not drawn idle.
        let only_load = BTreeMap::from([(300, "load")]);
        let tl = timeline_from_trace(TRACE, &input(&only_load, &[]));
        assert!(tl.tasks.iter().all(|t| t.role == "load"));
        assert!(tl.notes.iter().any(|n| n.contains("no event of the measured tasks")), "{:?}", tl.notes);
        // Without sched_stat_runtime, runtime is named missing, not filled in.
        let tl = timeline_from_trace(TRACE, &TraceInput { runtime_event: false, ..input(&roles, &[]) });
        assert!(tl.quantity("runtime").is_none());
        assert!(tl.missing.iter().any(|m| m.name == "runtime" && m.why.contains("sched_stat_runtime")));
    }

    #[test]
    fn a_full_buffer_ends_the_timeline_at_its_last_event_with_a_note() {
        let roles = BTreeMap::from([(100, "measured"), (300, "load")]);
        // CPU 1's buffer filled: its last event (600 us) ends the timeline.
        let tl = timeline_from_trace(TRACE, &input(&roles, &[(0, 0), (1, 5)]));
        assert_eq!(tl.end_ns, 600_000);
        let child = tl.tasks.iter().find(|t| t.id == 101).unwrap();
        assert_eq!(child.points("state").last(), Some(&(505_000, 2.0)), "CPU 0's later events are cut");
        assert_eq!(child.last_seen_ns, None);
        let note = tl.notes.iter().find(|n| n.contains("trace buffer")).expect("a note");
        assert!(note.contains("16384 KiB a CPU") && note.contains("on CPU 1 at +0.001 s"), "{note}");
        assert!(note.contains("5 events were dropped"), "{note}");
        let stats = "entries: 10\noverrun: 3\ncommit overrun: 0\nbytes: 0\noldest event ts:     0.000000\n\
                     now ts:  1869.634400\ndropped events: 4\nread events: 0\n";
        assert_eq!(parse_lost(stats), 7);
    }

    #[test]
    fn tracing_errors_say_how_to_observe_without_ftrace() {
        let e = for_observe(LiveError::Trace {
            detail: "ftrace is in use (tracer nop, 1 event(s) enabled)".into(),
            fix: "stop the other trace (trace-cmd reset) or drop breaktrace=/split=",
        })
        .to_string();
        assert!(e.starts_with("--observe: trace needs ftrace, but ftrace is in use"), "{e}");
        assert!(e.contains("trace-cmd reset) or use --observe without =trace"), "{e}");
        let e = for_observe(LiveError::Trace { detail: "tracing_on is not writable".into(), fix: "run as root" });
        assert!(e.to_string().ends_with("tracing_on is not writable: run as root"), "{e}");
    }
}
