//! `--observe`: the measured tasks' and the loads' scheduler state over
//! time, sampled from `/proc/PID/task/TID/sched` and `schedstat` by a
//! SCHED_OTHER thread of the harness while a case runs, kept as a
//! [`schedlab_core::Timeline`] with the result (the simulator's form, so
//! `plot --timeline` draws both alike).
//!
//! Which tasks: the same two sets as the kernel counters
//! (`host/counters.rs`): the process's threads that were not there when the
//! sampler started (the measuring thread and what it starts) with their
//! descendant processes, and the descendants of the thread that started the
//! loads (the loads' processes and threads). The walk is repeated every
//! sample, so tasks that start later are picked up and ended ones stop.
//!
//! Cost: each sample reads two files per task. Before the case starts, the
//! cost of one task's read is measured on the sampler's own thread and
//! multiplied by the tasks expected (the loads' plus one measured) and the
//! rate; a rate asked for whose estimate exceeds [`BUDGET`] of one CPU is
//! refused with the estimate. Without a rate, the highest rate up to
//! [`DEFAULT_RATE_HZ`] within the budget is taken. While sampling, the
//! thread's own CPU time is measured and the interval stretched whenever a
//! sample cost more than the budget allows (more tasks than expected); the
//! timeline's notes then say the rate reached.
//!
//! Fields the kernel does not print are listed in the timeline as missing,
//! with the reason, and never filled in; a kernel without the `sched` file
//! at all (CONFIG_SCHED_DEBUG off) is an error.

use crate::error::LiveError;
use crate::harness::now_ns;
use schedlab_core::timeline::{Missing, Quantity, Timeline, TimelineTask};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Rate taken when none is given, budget allowing.
pub const DEFAULT_RATE_HZ: f64 = 100.0;
/// Highest rate accepted: the kernel's counters move in scheduler ticks.
pub const MAX_RATE_HZ: f64 = 1000.0;
/// Lowest rate the automatic choice goes down to before refusing.
pub const MIN_RATE_HZ: f64 = 1.0;
/// Share of one CPU the sampler may use.
pub const BUDGET: f64 = 0.02;
/// Tasks followed at most per sample.
const MAX_TASKS: usize = 10_000;
/// How often the loads' tasks are looked for again (ns).
const LOAD_WALK_NS: u64 = 500_000_000;

/// What `--observe[=RATE]` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observe {
    /// Samples per second; None: the highest up to [`DEFAULT_RATE_HZ`] within [`BUDGET`].
    pub rate_hz: Option<u32>,
}

impl Observe {
    /// `auto`, `200` or `200hz`.
    pub fn parse(text: &str) -> Result<Observe, LiveError> {
        let t = text.trim().to_ascii_lowercase();
        if t.is_empty() || t == "auto" {
            return Ok(Observe { rate_hz: None });
        }
        let num = t.strip_suffix("hz").unwrap_or(&t).trim();
        match num.parse::<u32>() {
            Ok(r) if r >= 1 && f64::from(r) <= MAX_RATE_HZ => Ok(Observe { rate_hz: Some(r) }),
            _ => Err(LiveError::Observe(format!(
                "bad rate '{text}': give whole samples per second between 1 and {MAX_RATE_HZ} (e.g. --observe=50), \
                 or --observe alone for the default"
            ))),
        }
    }
}

/// One quantity: where it comes from and its unit.
struct Field {
    name: &'static str,
    /// Key in the `sched` file (None: from `schedstat`).
    key: Option<&'static str>,
    unit: &'static str,
    /// Value in the file times this is the stored value (ms printed → ns).
    scale: f64,
    lower_runs_first: Option<bool>,
    why_missing: &'static str,
}

const fn sched(
    name: &'static str,
    key: &'static str,
    unit: &'static str,
    scale: f64,
    why_missing: &'static str,
) -> Field {
    Field { name, key: Some(key), unit, scale, lower_runs_first: None, why_missing }
}

const NOT_PRINTED: &str = "this kernel's /proc/PID/task/TID/sched does not print it";
const NO_SCHEDSTATS: &str = "schedstats are off (sysctl kernel.sched_schedstats=1 turns them on)";
const NO_SCHEDSTAT_FILE: &str = "this kernel has no /proc/PID/task/TID/schedstat (CONFIG_SCHED_INFO off)";

/// Everything sampled, in the timeline's order. The `sched` file prints
/// times in ms with ns decimals (stored in ns), `se.slice` in ns.
const FIELDS: [Field; 14] = [
    Field {
        name: "prio",
        key: Some("prio"),
        unit: "",
        scale: 1.0,
        lower_runs_first: Some(true),
        why_missing: NOT_PRINTED,
    },
    sched("policy", "policy", "", 1.0, NOT_PRINTED),
    sched("vruntime", "se.vruntime", "ns", 1e6, NOT_PRINTED),
    sched("deadline", "se.deadline", "ns", 1e6, NOT_PRINTED),
    sched("slice", "se.slice", "ns", 1.0, NOT_PRINTED),
    sched("lag", "se.vlag", "ns", 1e6, NOT_PRINTED),
    sched("sum_exec_runtime", "se.sum_exec_runtime", "ns", 1e6, NOT_PRINTED),
    sched("nr_switches", "nr_switches", "count", 1.0, NOT_PRINTED),
    sched("nr_voluntary_switches", "nr_voluntary_switches", "count", 1.0, NOT_PRINTED),
    sched("nr_involuntary_switches", "nr_involuntary_switches", "count", 1.0, NOT_PRINTED),
    sched("nr_migrations", "se.nr_migrations", "count", 1.0, NOT_PRINTED),
    sched("wait_sum", "wait_sum", "ns", 1e6, NO_SCHEDSTATS),
    Field {
        name: "run_delay",
        key: None,
        unit: "ns",
        scale: 1.0,
        lower_runs_first: None,
        why_missing: NO_SCHEDSTAT_FILE,
    },
    Field {
        name: "timeslices",
        key: None,
        unit: "count",
        scale: 1.0,
        lower_runs_first: None,
        why_missing: NO_SCHEDSTAT_FILE,
    },
];

/// `key : value` lines of a `sched` file, and the task's command name from
/// its first line ("comm (pid, #threads: n)"). Keys are taken without a
/// `stats.`/`se.statistics.` prefix too, as kernels differ there.
pub(crate) fn parse_sched(text: &str) -> (Option<String>, BTreeMap<String, f64>) {
    let comm = text.lines().next().and_then(|l| l.rsplit_once(" (")).map(|(c, _)| c.to_string());
    let mut out = BTreeMap::new();
    for l in text.lines() {
        let Some((k, v)) = l.split_once(':') else { continue };
        let k = k.trim();
        let bare = k.strip_prefix("se.statistics.").or_else(|| k.strip_prefix("stats.")).unwrap_or(k);
        // Only the keys sampled (the file has ~25 more).
        if !FIELDS.iter().any(|f| f.key == Some(bare)) {
            continue;
        }
        if let Ok(v) = v.trim().parse::<f64>() {
            out.insert(bare.to_string(), v);
        }
    }
    (comm, out)
}

/// (on-CPU ns, run delay ns, timeslices) from a `schedstat` text.
fn parse_schedstat(text: &str) -> Option<[f64; 3]> {
    let f: Vec<f64> = text.split_whitespace().map(|x| x.parse().ok()).collect::<Option<_>>()?;
    (f.len() == 3).then(|| [f[0], f[1], f[2]])
}

/// The quantities a task's `sched` keys (None: no schedstat file) give, and
/// the ones they lack, named with the reason.
pub(crate) fn present_and_missing(keys: &BTreeMap<String, f64>, schedstat: bool) -> (Vec<Quantity>, Vec<Missing>) {
    let (mut present, mut missing) = (Vec::new(), Vec::new());
    for f in &FIELDS {
        let here = match f.key {
            Some(k) => keys.contains_key(k),
            None => schedstat,
        };
        if here {
            present.push(Quantity { name: f.name.into(), unit: f.unit.into(), lower_runs_first: f.lower_runs_first });
        } else {
            missing.push(Missing { name: f.name.into(), why: f.why_missing.into() });
        }
    }
    (present, missing)
}

/// The rate to sample at: `asked`, refused if `tasks` reads of `cost_ns`
/// each exceed the budget at that rate; else the highest up to the default
/// that fits, refused when not even [`MIN_RATE_HZ`] does.
pub(crate) fn choose_rate(asked: Option<f64>, tasks: u64, cost_ns: f64) -> Result<f64, LiveError> {
    let per_sample_ns = tasks.max(1) as f64 * cost_ns.max(1.0);
    let share = |rate: f64| per_sample_ns * rate / 1e9;
    let fits = (BUDGET * 1e9 / per_sample_ns).min(MAX_RATE_HZ);
    match asked {
        Some(r) if share(r) > BUDGET => Err(LiveError::Observe(format!(
            "{r} samples/s of {tasks} task(s) at about {:.1} us of reading each would use about {:.1} % of a CPU, \
             over the limit of {:.0} %: use --observe={} or lower, or --observe alone to choose the rate",
            cost_ns / 1e3,
            share(r) * 100.0,
            BUDGET * 100.0,
            fits.floor().max(0.0)
        ))),
        Some(r) => Ok(r),
        None if fits >= MIN_RATE_HZ => Ok(fits.min(DEFAULT_RATE_HZ)),
        None => Err(LiveError::Observe(format!(
            "{tasks} task(s) at about {:.1} us of reading each would use about {:.1} % of a CPU even at \
             {MIN_RATE_HZ} sample/s, over the limit of {:.0} %: observe fewer load tasks",
            cost_ns / 1e3,
            share(MIN_RATE_HZ) * 100.0,
            BUDGET * 100.0
        ))),
    }
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is writable; CLOCK_THREAD_CPUTIME_ID always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

use crate::harness::condition::gettid;

fn list_tasks(pid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    let mut tids: Vec<i32> = dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
    tids.sort_unstable();
    tids
}

fn children(pid: i32, tid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/children"))
        .map(|s| crate::host::counters::parse_children(&s))
        .unwrap_or_default()
}

/// `(pid, tid)` of every thread of the processes below thread `(pid, tid)`.
fn descendants(roots: &[(i32, i32)], out: &mut Vec<(i32, i32)>) {
    let mut queue: Vec<(i32, i32)> = roots.to_vec();
    while let Some((pid, tid)) = queue.pop() {
        for kid in children(pid, tid) {
            for t in list_tasks(kid) {
                if out.len() >= MAX_TASKS {
                    return;
                }
                out.push((kid, t));
                queue.push((kid, t));
            }
        }
    }
}

/// What the sampler thread keeps between samples.
struct State {
    t0: u64,
    me: i32,
    /// Threads of this process that are the harness's own (not measured);
    /// [`Sampler::harness_threads_now`] adds the ones started since.
    own: Arc<Mutex<BTreeSet<i32>>>,
    /// The thread that started the loads.
    load_root: i32,
    /// The loads' tasks, walked again every [`LOAD_WALK_NS`] (the walk
    /// reads two more files per task).
    loads: Vec<(i32, i32)>,
    loads_walked_ns: Option<u64>,
    schedstat: bool,
    tasks: BTreeMap<i32, TimelineTask>,
    samples: u64,
    stretched: bool,
}

impl State {
    /// Read every task once; returns the sample's time.
    fn sample(&mut self) -> u64 {
        let t = now_ns() - self.t0;
        let own = self.own.lock().map(|o| o.clone()).unwrap_or_default();
        let mut measured: Vec<(i32, i32)> =
            list_tasks(self.me).into_iter().filter(|t| !own.contains(t)).map(|t| (self.me, t)).collect();
        let roots = measured.clone();
        descendants(&roots, &mut measured);
        if self.loads_walked_ns.is_none_or(|w| t.saturating_sub(w) >= LOAD_WALK_NS) {
            self.loads.clear();
            descendants(&[(self.me, self.load_root)], &mut self.loads);
            self.loads_walked_ns = Some(t);
        }
        for (pid, tid) in measured {
            self.read("measured", pid, tid, t);
        }
        for (pid, tid) in std::mem::take(&mut self.loads) {
            if self.read("load", pid, tid, t) {
                self.loads.push((pid, tid));
            }
        }
        self.samples += 1;
        t
    }

    /// Whether the task was there to read.
    fn read(&mut self, role: &str, pid: i32, tid: i32, t: u64) -> bool {
        let base = format!("/proc/{pid}/task/{tid}");
        // A task that ended between the walk and the read is simply not sampled.
        let Ok(text) = std::fs::read_to_string(format!("{base}/sched")) else { return false };
        let (comm, keys) = parse_sched(&text);
        let stat = if self.schedstat {
            std::fs::read_to_string(format!("{base}/schedstat")).ok().and_then(|s| parse_schedstat(&s))
        } else {
            None
        };
        let name = || format!("{role} {} {tid}", comm.as_deref().unwrap_or("?"));
        let task = self.tasks.entry(tid).or_insert_with(|| TimelineTask::new(tid as u64, name(), role));
        // A new thread names itself (and a runner execs) after it starts: the latest name wins.
        if comm.as_deref().is_some_and(|c| !task.name.ends_with(&format!(" {c} {tid}"))) {
            task.name = name();
        }
        for f in &FIELDS {
            let v = match f.key {
                Some(k) => keys.get(k).copied(),
                None => stat.map(|s| if f.name == "run_delay" { s[1] } else { s[2] }),
            };
            if let Some(v) = v {
                task.push(f.name, t, v * f.scale);
            }
        }
        task.last_seen_ns = Some(t);
        true
    }

    fn finish(self, end_ns: u64, rate: f64, notes: Vec<String>) -> Timeline {
        let own = gettid();
        let text = std::fs::read_to_string(format!("/proc/self/task/{own}/sched")).unwrap_or_default();
        let (quantities, missing) = present_and_missing(&parse_sched(&text).1, self.schedstat);
        let mut tasks: Vec<TimelineTask> = self.tasks.into_values().collect();
        for t in &mut tasks {
            // Seen at the last sample: its levels hold to the end.
            if t.last_seen_ns == Some(end_ns) {
                t.last_seen_ns = None;
            }
        }
        Timeline {
            source: format!(
                "/proc/PID/task/TID/sched{}, sampled at {rate:.1} Hz",
                if self.schedstat { " and schedstat" } else { "" }
            ),
            primary: "prio".into(),
            quantities,
            missing,
            end_ns,
            tasks,
            notes,
        }
    }
}

/// The sampler thread of a case; stopping (or dropping) it joins the thread.
pub(crate) struct Sampler {
    stop: Option<Sender<()>>,
    handle: Option<std::thread::JoinHandle<Timeline>>,
    own: Arc<Mutex<BTreeSet<i32>>>,
}

/// Cost (ns) of reading one task's files, measured on this thread.
fn read_cost_ns(schedstat: bool) -> f64 {
    const TRIES: u64 = 20;
    let base = format!("/proc/self/task/{}", gettid());
    let start = thread_cpu_ns();
    for _ in 0..TRIES {
        let _ = std::fs::read_to_string(format!("{base}/sched")).map(|s| parse_sched(&s));
        if schedstat {
            let _ = std::fs::read_to_string(format!("{base}/schedstat"));
        }
    }
    (thread_cpu_ns() - start) as f64 / TRIES as f64
}

impl Sampler {
    /// Check the kernel and the rate for `expected_tasks`, then start the
    /// sampler thread (SCHED_OTHER, on `cpus` when given). Returns once the
    /// thread has taken every thread of the process now (itself included)
    /// as the harness's own: call it before the measuring thread exists.
    /// `load_root`: the thread that starts the loads.
    pub(crate) fn start(
        want: Observe,
        expected_tasks: u64,
        load_root: i32,
        cpus: Option<&[usize]>,
    ) -> Result<Sampler, LiveError> {
        let sched_file = std::path::Path::new("/proc/thread-self/sched");
        if !sched_file.exists() {
            return Err(LiveError::Observe(
                "this kernel has no /proc/PID/task/TID/sched (CONFIG_SCHED_DEBUG off), so the scheduler state \
                 cannot be read: run without --observe, or on a kernel built with CONFIG_SCHED_DEBUG"
                    .into(),
            ));
        }
        let schedstat = std::path::Path::new("/proc/thread-self/schedstat").exists();
        let rate = choose_rate(want.rate_hz.map(f64::from), expected_tasks, read_cost_ns(schedstat))?;
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
        let cpus = cpus.map(<[usize]>::to_vec);
        let own = Arc::new(Mutex::new(BTreeSet::new()));
        let own_in_thread = Arc::clone(&own);
        let handle = std::thread::Builder::new()
            .name("schedlab-observe".into())
            .spawn(move || {
                let param = libc::sched_param { sched_priority: 0 };
                // SAFETY: plain SCHED_OTHER for this thread; lowering needs no privilege.
                unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
                if let Some(c) = &cpus {
                    let _ = crate::harness::condition::set_affinity(0, c);
                }
                let me = std::process::id() as i32;
                if let Ok(mut o) = own_in_thread.lock() {
                    o.extend(list_tasks(me));
                }
                let state = State {
                    t0: now_ns(),
                    me,
                    own: own_in_thread,
                    load_root,
                    loads: Vec::new(),
                    loads_walked_ns: None,
                    schedstat,
                    tasks: BTreeMap::new(),
                    samples: 0,
                    stretched: false,
                };
                let _ = ready_tx.send(());
                run(state, rate, &stop_rx)
            })
            .map_err(|e| LiveError::Os {
                what: "spawning the --observe sampler",
                detail: e.to_string(),
                hint: "check ulimit -u",
            })?;
        // The thread sends once it has listed the process's threads; a
        // thread that died first ends the wait too.
        let _ = ready_rx.recv();
        Ok(Sampler { stop: Some(stop_tx), handle: Some(handle), own })
    }

    /// Take every thread of the process now as the harness's own too (the
    /// loads' helpers, started after the sampler): call it, as the kernel
    /// counters take theirs, before the measuring thread exists.
    pub(crate) fn harness_threads_now(&self) {
        if let Ok(mut o) = self.own.lock() {
            o.extend(list_tasks(std::process::id() as i32));
        }
    }

    /// Stop sampling and return the timeline (None: the thread panicked).
    pub(crate) fn finish(mut self) -> Option<Timeline> {
        self.stop.take();
        self.handle.take()?.join().ok()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        // Dropping the sender wakes the thread at once; no sampler outlives its case.
        self.stop.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Sample until `stop` disconnects (or a stop is requested), holding the
/// thread's CPU time within the budget.
fn run(mut state: State, rate: f64, stop: &Receiver<()>) -> Timeline {
    let interval = Duration::from_secs_f64(1.0 / rate);
    let started = now_ns();
    loop {
        let cpu = thread_cpu_ns();
        state.sample();
        let spent = thread_cpu_ns() - cpu;
        // The wait that keeps this sample's cost within the budget.
        let wait = interval.max(Duration::from_nanos((spent as f64 / BUDGET) as u64));
        if wait > interval {
            state.stretched = true;
        }
        match stop.recv_timeout(wait) {
            Err(RecvTimeoutError::Timeout) if !crate::harness::hygiene::stop_requested() => {}
            _ => break,
        }
    }
    let end = state.sample();
    let elapsed_s = (now_ns() - started) as f64 / 1e9;
    let mut notes = Vec::new();
    let reached = state.samples as f64 / elapsed_s.max(1e-9);
    if state.stretched && reached < 0.9 * rate {
        notes.push(format!(
            "sampled at {reached:.1} Hz on average instead of {rate:.1} Hz: more tasks than expected, and the \
             sampler keeps within {:.0} % of a CPU",
            BUDGET * 100.0
        ));
    }
    state.finish(end, rate, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sampler tests look for sampler threads in the whole process: one at a time.
    static ONE_SAMPLER: Mutex<()> = Mutex::new(());

    fn one_sampler() -> std::sync::MutexGuard<'static, ()> {
        ONE_SAMPLER.lock().unwrap_or_else(|e| e.into_inner())
    }

    const SCHED_6_18: &str = "cat (31676, #threads: 1)
-------------------------------------------------------------------
se.exec_start                                :      28210197.094712
se.vruntime                                  :           245.343477
se.sum_exec_runtime                          :             0.000000
se.nr_migrations                             :                    0
nr_switches                                  :                    3
nr_voluntary_switches                        :                    1
nr_involuntary_switches                      :                    2
policy                                       :                    0
prio                                         :                  120
se.slice                                     :              1400000
current_node=0, numa_group_id=0
";

    #[test]
    fn the_sched_file_parses_and_lacking_fields_are_named() {
        let (comm, keys) = parse_sched(SCHED_6_18);
        assert_eq!(comm.as_deref(), Some("cat"));
        assert_eq!((keys["prio"], keys["se.vruntime"], keys["nr_switches"]), (120.0, 245.343477, 3.0));
        let (present, missing) = present_and_missing(&keys, true);
        let names: Vec<&str> = present.iter().map(|q| q.name.as_str()).collect();
        assert!(names.contains(&"vruntime") && names.contains(&"run_delay") && names.contains(&"prio"));
        let why = |n: &str| missing.iter().find(|m| m.name == n).map(|m| m.why.clone());
        assert_eq!(why("deadline").as_deref(), Some(NOT_PRINTED));
        assert_eq!(why("lag").as_deref(), Some(NOT_PRINTED));
        assert_eq!(why("wait_sum").as_deref(), Some(NO_SCHEDSTATS));
        assert!(why("vruntime").is_none(), "a present field is not missing");
        // No schedstat file: its quantities are missing, with that reason.
        let (_, missing) = present_and_missing(&keys, false);
        assert!(missing.iter().any(|m| m.name == "run_delay" && m.why == NO_SCHEDSTAT_FILE));
        // A schedstats kernel prints wait_sum under a prefix: it is found.
        let (_, keys) = parse_sched("x (1, #threads: 1)\nstats.wait_sum : 12.5\n");
        assert_eq!(keys["wait_sum"], 12.5);
    }

    #[test]
    fn a_rate_over_budget_is_refused_with_the_estimate_and_the_limit() {
        // 100 tasks at 10 us each: 1 ms a sample; 2 % of a CPU allows 20 Hz.
        let e = choose_rate(Some(100.0), 100, 10_000.0).unwrap_err().to_string();
        assert!(e.contains("10.0 % of a CPU") && e.contains("limit of 2 %") && e.contains("--observe=20"), "{e}");
        assert_eq!(choose_rate(Some(20.0), 100, 10_000.0).unwrap(), 20.0);
        assert_eq!(choose_rate(None, 100, 10_000.0).unwrap(), 20.0, "auto takes the highest that fits");
        assert_eq!(choose_rate(None, 1, 10_000.0).unwrap(), DEFAULT_RATE_HZ, "auto stops at the default");
        let e = choose_rate(None, 100_000, 10_000.0).unwrap_err().to_string();
        assert!(e.contains("even at") && e.contains("fewer load tasks"), "{e}");
    }

    #[test]
    fn rates_parse_and_bad_ones_say_what_is_expected() {
        assert_eq!(Observe::parse("auto").unwrap().rate_hz, None);
        assert_eq!(Observe::parse("50").unwrap().rate_hz, Some(50));
        assert_eq!(Observe::parse("200Hz").unwrap().rate_hz, Some(200));
        for bad in ["0", "-5", "fast", "5000", "2.5"] {
            let e = Observe::parse(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("bad rate '{bad}'")) && e.contains("between 1 and 1000"), "{e}");
        }
    }

    #[test]
    fn a_case_driven_with_observe_carries_its_timeline_and_leaves_no_sampler() {
        let _one = one_sampler();
        let plan = crate::RunPlan {
            repeat: 1,
            warmup: 0,
            counters: false,
            observe: Some(Observe { rate_hz: Some(50) }),
            ..Default::default()
        };
        let (tid, report) = crate::harness::drive("observe-test", &plan, 0.2, 1, &|_| {}, |_ctx| {
            std::thread::sleep(Duration::from_millis(120));
            Ok(gettid())
        })
        .unwrap();
        let tl = report.timeline.expect("--observe gives the case a timeline");
        let t = tl.tasks.iter().find(|t| t.id == tid as u64).expect("the measuring thread was sampled");
        assert_eq!(t.role, "measured");
        assert!(t.series.contains_key("prio") && t.series.contains_key("sum_exec_runtime"));
        let me = std::process::id() as i32;
        let names: Vec<String> = list_tasks(me)
            .iter()
            .filter_map(|t| std::fs::read_to_string(format!("/proc/{me}/task/{t}/comm")).ok())
            .collect();
        assert!(!names.iter().any(|n| n.trim() == "schedlab-observ"), "no sampler after the case: {names:?}");
        // Without --observe, none.
        let plan = crate::RunPlan { observe: None, ..plan };
        let ((), report) = crate::harness::drive("observe-test", &plan, 0.2, 1, &|_| {}, |_| Ok(())).unwrap();
        assert!(report.timeline.is_none());
    }

    #[test]
    fn the_sampler_follows_new_threads_and_stops_with_no_thread_left() {
        let _one = one_sampler();
        let me = std::process::id() as i32;
        let root = gettid();
        let s = Sampler::start(Observe { rate_hz: Some(50) }, 1, root, None).unwrap();
        let sampler_alive = || {
            list_tasks(me).iter().any(|t| {
                std::fs::read_to_string(format!("/proc/{me}/task/{t}/comm"))
                    .is_ok_and(|c| c.trim() == "schedlab-observ")
            })
        };
        assert!(sampler_alive(), "the sampler thread runs");
        // A helper started before the harness's threads are taken again is not measured.
        let (helper_tx, helper_rx) = std::sync::mpsc::channel::<()>();
        let helper = std::thread::spawn(move || {
            let _ = helper_rx.recv();
            gettid()
        });
        std::thread::sleep(Duration::from_millis(30));
        s.harness_threads_now();
        // A thread started after the sampler is measured; it sleeps and spins a little.
        let worker = std::thread::Builder::new()
            .name("observed-worker".into())
            .spawn(|| {
                let end = now_ns() + 150_000_000;
                while now_ns() < end {
                    std::thread::sleep(Duration::from_millis(5));
                }
                gettid()
            })
            .unwrap();
        let tid = worker.join().unwrap();
        drop(helper_tx);
        let helper_tid = helper.join().unwrap();
        let tl = s.finish().unwrap();
        assert!(!sampler_alive(), "no sampler left after finish");
        let t = tl.tasks.iter().find(|t| t.id == tid as u64).expect("the new thread was sampled");
        assert_eq!(t.role, "measured");
        assert!(t.name.contains("observed-worker"), "{}", t.name);
        assert!(!t.points("prio").is_empty() && t.last_seen_ns.is_some(), "it ended before the timeline did");
        assert!(t.points("nr_switches").len() >= 2, "its switches grew while it slept: {:?}", t.points("nr_switches"));
        assert!(tl.tasks.iter().all(|t| t.id != gettid() as u64), "the harness's own threads are not sampled");
        // Sampled (30 ms at 50 Hz) before it was taken as the harness's, then no more.
        let h = tl.tasks.iter().find(|t| t.id == helper_tid as u64);
        assert!(h.is_none_or(|h| h.last_seen_ns.is_some_and(|l| l < tl.end_ns)), "a harness thread is not followed");
        assert!(tl.quantity("prio").is_some() && tl.end_ns > 0);
        // Dropping a running sampler stops it too (what an error or Ctrl-C path does).
        drop(Sampler::start(Observe { rate_hz: Some(50) }, 1, root, None).unwrap());
        assert!(!sampler_alive(), "a dropped sampler leaves no thread");
    }
}
