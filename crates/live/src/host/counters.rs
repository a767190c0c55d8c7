//! The kernel's own accounting of the measured tasks, read from /proc at the
//! start and end of each repetition (`harness/counters.rs` marks them and
//! turns the differences into `kernel.*` metrics).
//!
//! Measured tasks: the task that runs the benchmark's loop and every thread
//! and process it starts. In a runner process that is the whole process and
//! its descendants ([`Scope::Process`]); in the harness process, every thread
//! that was not there when the case began (the measuring thread and what it
//! spawned) and their descendants ([`Scope::Harness`]): the harness's own
//! threads and the background loads (children of the harness's calling
//! thread) are left out.
//!
//! Where each figure comes from, and what the kernel does not keep:
//!
//! - Voluntary and involuntary switches: `/proc/PID/task/TID/sched`
//!   (`status` where the kernel has no `sched`) of every live measured task,
//!   plus `getrusage`: the kernel adds an ended thread's counts to its
//!   process (`RUSAGE_SELF`) and a reaped process's to its reaper
//!   (`RUSAGE_CHILDREN`, transitively), so tasks that end are counted too.
//!   In the harness process `RUSAGE_SELF` also holds the harness's own
//!   threads; their counts are read around it and taken off (a bracket:
//!   read, getrusage, read again, until both reads agree).
//! - Migrations (`se.nr_migrations` in `sched`) and run-queue wait (second
//!   field of `schedstat`: ns runnable but not running) exist per task only
//!   and are discarded when a task ends. They are summed over the live
//!   measured tasks and reported only when no measured task ended during
//!   the repetition: a task of the start gone at the end, a changed
//!   `RUSAGE_CHILDREN` (something was reaped) or more switches in the
//!   process's ended threads all mean one did.
//! - Steal and interrupt time (irq + softirq) of the CPUs the measured tasks
//!   may run on (the union of their affinities at both marks), from
//!   `/proc/stat`, whose USER_HZ ticks make each CPU's figure exact to one
//!   tick (10 ms at USER_HZ 100).

use crate::host::kstat::user_tick_ns;
use schedlab_core::Unit;
use std::collections::BTreeMap;

/// The counters, in the order of their slots in the counter page.
pub(crate) const COUNTERS: [CounterDef; 6] = [
    CounterDef { name: "kernel.ctx_switches_voluntary", unit: Unit::Count },
    CounterDef { name: "kernel.ctx_switches_involuntary", unit: Unit::Count },
    CounterDef { name: "kernel.migrations", unit: Unit::Count },
    CounterDef { name: "kernel.run_queue_wait", unit: Unit::Nanoseconds },
    CounterDef { name: "kernel.cpu_steal", unit: Unit::Nanoseconds },
    CounterDef { name: "kernel.cpu_irq", unit: Unit::Nanoseconds },
];
pub(crate) const N: usize = COUNTERS.len();
const VOLUNTARY: usize = 0;
const INVOLUNTARY: usize = 1;
const MIGRATIONS: usize = 2;
const RUN_QUEUE_WAIT: usize = 3;
const STEAL: usize = 4;
const IRQ: usize = 5;

pub(crate) struct CounterDef {
    pub name: &'static str,
    pub unit: Unit,
}

/// Tasks followed at most (a runaway benchmark must not make a mark take minutes).
const MAX_TASKS: usize = 100_000;
/// Tries at a consistent read of this process's threads around `getrusage`.
const BRACKET_TRIES: usize = 8;

/// Why a counter has no value for a repetition (stored as a code in the
/// counter page, so it crosses from a runner process).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Absent {
    NotMarked = 2,
    NoSchedFile = 3,
    NoSchedstat = 4,
    TasksEnded = 5,
    HarnessThreadEnded = 6,
    Inconsistent = 7,
    NoCpuTimes = 8,
    Unreadable = 9,
    NoChildren = 10,
}

impl Absent {
    pub(crate) const ALL: [Absent; 9] = [
        Absent::NotMarked,
        Absent::NoSchedFile,
        Absent::NoSchedstat,
        Absent::TasksEnded,
        Absent::HarnessThreadEnded,
        Absent::Inconsistent,
        Absent::NoCpuTimes,
        Absent::Unreadable,
        Absent::NoChildren,
    ];

    pub(crate) fn code(self) -> u64 {
        self as u64
    }

    pub(crate) fn from_code(code: u64) -> Option<Absent> {
        Absent::ALL.into_iter().find(|a| a.code() == code)
    }

    /// Why, in words (after "absent: ").
    pub(crate) fn text(self) -> &'static str {
        match self {
            Absent::NotMarked => "the benchmark did not mark where its repetitions start and end",
            Absent::NoSchedFile => "this kernel has no /proc/PID/task/TID/sched (CONFIG_SCHED_DEBUG off)",
            Absent::NoSchedstat => "this kernel has no /proc/PID/task/TID/schedstat (CONFIG_SCHED_INFO off)",
            Absent::TasksEnded => {
                "measured tasks ended during the repetitions, and the kernel discards a task's run-queue wait \
                 and migrations when it ends (its switches it keeps, in its parent's accounting)"
            }
            Absent::HarnessThreadEnded => {
                "a thread of the harness ended during a repetition, so its switches could not be told apart \
                 from the measured threads'"
            }
            Absent::Inconsistent => "the measured threads kept switching while they were read: no consistent snapshot",
            Absent::NoCpuTimes => "/proc/stat is unreadable or has no line for a CPU the measured tasks ran on",
            Absent::Unreadable => {
                "a measured task's /proc files could not be read (another user's task, or more than 100,000 tasks)"
            }
            Absent::NoChildren => {
                "this kernel has no /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN off), so child processes \
                 cannot be found"
            }
        }
    }
}

/// Which per-task files this kernel has (probed once, on this thread).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Features {
    pub sched: bool,
    pub schedstat: bool,
    pub children: bool,
}

impl Features {
    pub(crate) fn probe() -> Features {
        let has = |f: &str| std::path::Path::new(&format!("/proc/thread-self/{f}")).exists();
        Features { sched: has("sched"), schedstat: has("schedstat"), children: has("children") }
    }
}

/// Which tasks are measured (see the module comment).
#[derive(Debug, Clone)]
pub(crate) enum Scope {
    /// This whole process and its descendants (a runner).
    Process,
    /// The threads of this process other than `own` (the harness's threads
    /// when the case began), and their descendants.
    Harness { own: Vec<i32> },
}

impl Scope {
    /// The harness scope: every thread of this process now is the harness's own.
    pub(crate) fn harness() -> Scope {
        Scope::Harness { own: list_tasks(std::process::id() as i32).unwrap_or_default() }
    }

    fn own(&self) -> &[i32] {
        match self {
            Scope::Process => &[],
            Scope::Harness { own } => own,
        }
    }
}

/// One task's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TaskCounts {
    pub voluntary: u64,
    pub involuntary: u64,
    /// None: no `sched` file.
    pub migrations: Option<u64>,
    /// None: no `schedstat` file.
    pub run_delay_ns: Option<u64>,
}

/// The counters of the measured tasks at one instant.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Snapshot {
    /// Live measured tasks, sorted.
    pub tids: Vec<i32>,
    /// Sums over the live measured tasks (None: the kernel lacks the file).
    pub migrations: Option<u64>,
    pub run_delay_ns: Option<u64>,
    /// Voluntary and involuntary switches of the measured tasks, ended ones included.
    pub switches: Result<(u64, u64), Absent>,
    /// What changes only when a task ends: RUSAGE_CHILDREN's fields, and the
    /// switches of this process's ended threads.
    pub ended: Result<[u64; 8], Absent>,
    /// The harness's own threads alive now (harness scope only).
    pub own_alive: Vec<i32>,
    /// Something that spoils every per-task figure of this snapshot.
    pub task_problem: Option<Absent>,
    /// CPUs the measured tasks may run on.
    pub cpus: Vec<usize>,
    /// Per CPU: irq, softirq, steal, in USER_HZ ticks (None: /proc/stat unreadable).
    pub cpu_times: Option<BTreeMap<usize, [u64; 3]>>,
}

/// Read the measured tasks' counters now.
pub(crate) fn snapshot(scope: &Scope, f: &Features) -> Snapshot {
    let me = std::process::id() as i32;
    let own = scope.own();
    let mut problem: Option<Absent> = None;
    // This process's threads around getrusage, until two reads agree: on the
    // harness's own threads (for the switches) and on all (for `ended`).
    let key = |v: &[(i32, TaskCounts)], only_own: bool| -> Vec<(i32, u64, u64)> {
        v.iter().filter(|(t, _)| !only_own || own.contains(t)).map(|(t, c)| (*t, c.voluntary, c.involuntary)).collect()
    };
    let mut mine: Vec<(i32, TaskCounts)> = Vec::new();
    let (mut usage, mut own_agree, mut all_agree) = (None, false, false);
    for _ in 0..BRACKET_TRIES {
        let before = read_threads(me, f, &mut problem);
        let u = rusage(libc::RUSAGE_SELF).zip(rusage(libc::RUSAGE_CHILDREN));
        let after = read_threads(me, f, &mut problem);
        own_agree = key(&before, true) == key(&after, true);
        all_agree = key(&before, false) == key(&after, false);
        (mine, usage) = (before, u);
        if all_agree {
            break;
        }
    }
    let measured_mine: Vec<(i32, TaskCounts)> = mine.iter().filter(|(t, _)| !own.contains(t)).copied().collect();
    // Descendant processes of the measured threads, all of their threads measured.
    let mut others: Vec<(i32, TaskCounts)> = Vec::new();
    if f.children {
        let mut queue: Vec<(i32, i32)> = measured_mine.iter().map(|(t, _)| (me, *t)).collect();
        'walk: while let Some((pid, tid)) = queue.pop() {
            let kids = match std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/children")) {
                Ok(s) => parse_children(&s),
                Err(e) => {
                    note_read_error(&e, &mut problem);
                    continue;
                }
            };
            for kid in kids {
                let Some(threads) = list_tasks(kid) else {
                    problem.get_or_insert(Absent::TasksEnded);
                    continue;
                };
                for t in threads {
                    if others.len() + measured_mine.len() >= MAX_TASKS {
                        problem = Some(Absent::Unreadable);
                        break 'walk;
                    }
                    match read_task(kid, t, f) {
                        Ok(c) => others.push((t, c)),
                        Err(e) => note_read_error(&e, &mut problem),
                    }
                    queue.push((kid, t));
                }
            }
        }
    } else if !measured_mine.is_empty() {
        problem = Some(Absent::NoChildren);
    }
    let measured = || measured_mine.iter().chain(&others);
    let mut tids: Vec<i32> = measured().map(|(t, _)| *t).collect();
    tids.sort_unstable();
    let sum = |v: &mut dyn Iterator<Item = &(i32, TaskCounts)>| {
        v.fold((0u64, 0u64), |(a, b), (_, c)| (a + c.voluntary, b + c.involuntary))
    };
    let (mut switches, mut ended) = (Err(Absent::Inconsistent), Err(Absent::Inconsistent));
    if let Some((ru_self, ru_children)) = usage {
        let own_sum = sum(&mut mine.iter().filter(|(t, _)| own.contains(t)));
        let others_sum = sum(&mut others.iter());
        // RUSAGE_SELF holds every thread of this process, ended ones included.
        if let (true, Some(v), Some(i)) =
            (own_agree, ru_self.nvcsw.checked_sub(own_sum.0), ru_self.nivcsw.checked_sub(own_sum.1))
        {
            switches = Ok((v + ru_children.nvcsw + others_sum.0, i + ru_children.nivcsw + others_sum.1));
        }
        let mine_sum = sum(&mut mine.iter());
        if let (true, Some(dead_v), Some(dead_i)) =
            (all_agree, ru_self.nvcsw.checked_sub(mine_sum.0), ru_self.nivcsw.checked_sub(mine_sum.1))
        {
            let c = ru_children;
            ended = Ok([dead_v, dead_i, c.nvcsw, c.nivcsw, c.minflt, c.majflt, c.utime_us, c.stime_us]);
        }
    }
    let mut cpus: Vec<usize> = Vec::new();
    for t in &tids {
        if let Ok(set) = crate::harness::condition::get_affinity(*t) {
            cpus.extend(set);
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Snapshot {
        migrations: f.sched.then(|| measured().map(|(_, c)| c.migrations.unwrap_or(0)).sum()),
        run_delay_ns: f.schedstat.then(|| measured().map(|(_, c)| c.run_delay_ns.unwrap_or(0)).sum()),
        tids,
        switches,
        ended,
        own_alive: mine.iter().map(|(t, _)| *t).filter(|t| own.contains(t)).collect(),
        task_problem: problem,
        cpus,
        cpu_times: std::fs::read_to_string("/proc/stat").ok().map(|s| parse_cpu_times(&s)),
    }
}

/// Each counter's value over the span from `s` to `e`.
pub(crate) fn delta(s: &Snapshot, e: &Snapshot, f: &Features) -> [Result<u64, Absent>; N] {
    let mut out = [Err(Absent::NotMarked); N];
    let lost = s.task_problem.or(e.task_problem);
    // A vanished task only spoils per-task figures: its switches are in its reaper's accounting.
    let switch_problem = lost.filter(|p| *p != Absent::TasksEnded);
    let harness_thread_ended = s.own_alive.iter().any(|t| !e.own_alive.contains(t));
    let switches = match (switch_problem, harness_thread_ended, s.switches, e.switches) {
        (Some(p), _, _, _) => Err(p),
        (None, true, _, _) => Err(Absent::HarnessThreadEnded),
        (None, false, Ok(a), Ok(b)) => match (b.0.checked_sub(a.0), b.1.checked_sub(a.1)) {
            (Some(v), Some(i)) => Ok((v, i)),
            _ => Err(Absent::Inconsistent),
        },
        (None, false, Err(p), _) | (None, false, _, Err(p)) => Err(p),
    };
    out[VOLUNTARY] = switches.map(|s| s.0);
    out[INVOLUNTARY] = switches.map(|s| s.1);
    let ended = match (s.ended, e.ended) {
        (Ok(a), Ok(b)) => Ok(a != b || !s.tids.iter().all(|t| e.tids.binary_search(t).is_ok())),
        (Err(p), _) | (_, Err(p)) => Err(p),
    };
    let per_task = |have: bool, missing: Absent, a: Option<u64>, b: Option<u64>| -> Result<u64, Absent> {
        if !have {
            return Err(missing);
        }
        if let Some(p) = lost {
            return Err(p);
        }
        match ended {
            Err(p) => Err(p),
            Ok(true) => Err(Absent::TasksEnded),
            Ok(false) => b.zip(a).and_then(|(b, a)| b.checked_sub(a)).ok_or(Absent::Inconsistent),
        }
    };
    out[MIGRATIONS] = per_task(f.sched, Absent::NoSchedFile, s.migrations, e.migrations);
    out[RUN_QUEUE_WAIT] = per_task(f.schedstat, Absent::NoSchedstat, s.run_delay_ns, e.run_delay_ns);
    let mut cpus: Vec<usize> = s.cpus.iter().chain(&e.cpus).copied().collect();
    cpus.sort_unstable();
    cpus.dedup();
    let cpu_sum = |field: &dyn Fn(&[u64; 3]) -> u64| -> Result<u64, Absent> {
        let (Some(a), Some(b)) = (&s.cpu_times, &e.cpu_times) else { return Err(Absent::NoCpuTimes) };
        if cpus.is_empty() {
            return Err(Absent::NoCpuTimes);
        }
        let mut ticks = 0;
        for c in &cpus {
            let (Some(x), Some(y)) = (a.get(c), b.get(c)) else { return Err(Absent::NoCpuTimes) };
            ticks += field(y).checked_sub(field(x)).ok_or(Absent::Inconsistent)?;
        }
        Ok(ticks * user_tick_ns())
    };
    out[STEAL] = cpu_sum(&|t| t[2]);
    out[IRQ] = cpu_sum(&|t| t[0] + t[1]);
    out
}

/// Read every thread of process `pid`.
fn read_threads(pid: i32, f: &Features, problem: &mut Option<Absent>) -> Vec<(i32, TaskCounts)> {
    let mut out = Vec::new();
    for t in list_tasks(pid).unwrap_or_default() {
        match read_task(pid, t, f) {
            Ok(c) => out.push((t, c)),
            Err(e) => note_read_error(&e, problem),
        }
    }
    out
}

/// A task gone between listing and reading ended during the span;
/// anything else (permission) makes the figures unreadable.
fn note_read_error(e: &std::io::Error, problem: &mut Option<Absent>) {
    let gone = e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH);
    if gone {
        problem.get_or_insert(Absent::TasksEnded);
    } else {
        *problem = Some(Absent::Unreadable);
    }
}

/// `root` and its live descendant processes, through every thread's
/// `children` file (a scan of /proc's parent pids where the kernel lacks
/// it); empty when `root` is gone. Used where a whole external process tree
/// is read (http's `server_cmd`/`server_pid` server).
pub(crate) fn process_tree(root: i32) -> Vec<i32> {
    if list_tasks(root).is_none() {
        return Vec::new();
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() && out.len() < MAX_TASKS {
        let pid = out[i];
        i += 1;
        let mut kids = Vec::new();
        let mut have_file = false;
        for t in list_tasks(pid).unwrap_or_default() {
            if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/task/{t}/children")) {
                have_file = true;
                kids.extend(parse_children(&s));
            }
        }
        if !have_file {
            kids = crate::harness::hygiene::children_of(pid);
        }
        for kid in kids {
            if !out.contains(&kid) {
                out.push(kid);
            }
        }
    }
    out
}

/// The tids of process `pid` (None: no such process).
pub(crate) fn list_tasks(pid: i32) -> Option<Vec<i32>> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut tids: Vec<i32> = dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
    tids.sort_unstable();
    Some(tids)
}

fn read_task(pid: i32, tid: i32, f: &Features) -> std::io::Result<TaskCounts> {
    let base = format!("/proc/{pid}/task/{tid}");
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("unexpected {base}/{what}"));
    let mut c = TaskCounts::default();
    if f.sched {
        let s = parse_sched(&std::fs::read_to_string(format!("{base}/sched"))?).ok_or_else(|| bad("sched"))?;
        (c.voluntary, c.involuntary, c.migrations) = (s.0, s.1, Some(s.2));
    } else {
        let s =
            parse_status_switches(&std::fs::read_to_string(format!("{base}/status"))?).ok_or_else(|| bad("status"))?;
        (c.voluntary, c.involuntary) = s;
    }
    if f.schedstat {
        let s = std::fs::read_to_string(format!("{base}/schedstat"))?;
        c.run_delay_ns = Some(parse_schedstat(&s).ok_or_else(|| bad("schedstat"))?);
    }
    Ok(c)
}

/// (voluntary, involuntary, migrations) from a `/proc/PID/sched` text.
pub(crate) fn parse_sched(text: &str) -> Option<(u64, u64, u64)> {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim().parse::<u64>().ok()).flatten()
        })
    };
    Some((field("nr_voluntary_switches")?, field("nr_involuntary_switches")?, field("se.nr_migrations")?))
}

/// (voluntary, involuntary) from a `/proc/PID/status` text.
pub(crate) fn parse_status_switches(text: &str) -> Option<(u64, u64)> {
    let field =
        |name: &str| text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.trim().parse::<u64>().ok());
    Some((field("voluntary_ctxt_switches")?, field("nonvoluntary_ctxt_switches")?))
}

/// Run delay (ns) from a `schedstat` text: "on-CPU ns, run-delay ns, slices".
pub(crate) fn parse_schedstat(text: &str) -> Option<u64> {
    let f: Vec<&str> = text.split_whitespace().collect();
    if f.len() != 3 {
        return None;
    }
    f[1].parse().ok()
}

/// Pids in a `children` file ("12 34 ").
pub(crate) fn parse_children(text: &str) -> Vec<i32> {
    text.split_whitespace().filter_map(|p| p.parse().ok()).collect()
}

/// Per CPU: irq, softirq and steal ticks from /proc/stat's "cpuN" lines
/// (fields 6, 7 and 8 after the name; a line too short to have steal is left out).
pub(crate) fn parse_cpu_times(stat: &str) -> BTreeMap<usize, [u64; 3]> {
    let mut out = BTreeMap::new();
    for line in stat.lines() {
        let mut f = line.split_whitespace();
        let Some(cpu) = f.next().and_then(|n| n.strip_prefix("cpu")).and_then(|n| n.parse::<usize>().ok()) else {
            continue;
        };
        let v: Vec<u64> = f.take(8).map_while(|x| x.parse().ok()).collect();
        if v.len() == 8 {
            out.insert(cpu, [v[5], v[6], v[7]]);
        }
    }
    out
}

#[derive(Debug, Clone, Copy, Default)]
struct Usage {
    nvcsw: u64,
    nivcsw: u64,
    minflt: u64,
    majflt: u64,
    utime_us: u64,
    stime_us: u64,
}

fn rusage(who: libc::c_int) -> Option<Usage> {
    // SAFETY: a zeroed rusage is valid; getrusage fills it or fails.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is writable.
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return None;
    }
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Some(Usage {
        nvcsw: ru.ru_nvcsw as u64,
        nivcsw: ru.ru_nivcsw as u64,
        minflt: ru.ru_minflt as u64,
        majflt: ru.ru_majflt as u64,
        utime_us: us(ru.ru_utime),
        stime_us: us(ru.ru_stime),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_is_named_as_views_recognise_it() {
        assert!(COUNTERS.iter().all(|c| c.name.starts_with(schedlab_core::KERNEL_METRIC_PREFIX)));
    }

    // Trimmed from this VM's kernel 6.18 /proc/PID/sched.
    const SCHED: &str = "bash (20473, #threads: 1)
-------------------------------------------------------------------
se.exec_start                                :      17760980.843255
se.vruntime                                  :           157.501338
se.sum_exec_runtime                          :            38.999506
se.nr_migrations                             :                   25
nr_switches                                  :                  133
nr_voluntary_switches                        :                  109
nr_involuntary_switches                      :                   24
se.load.weight                               :              1048576
policy                                       :                    0
prio                                         :                  120
";

    #[test]
    fn sched_gives_switches_and_migrations() {
        assert_eq!(parse_sched(SCHED), Some((109, 24, 25)));
        // nr_switches is a different field from nr_voluntary_switches.
        assert_eq!(parse_sched("nr_switches : 5\nse.nr_migrations : 1\n"), None);
        assert_eq!(parse_sched("nr_voluntary_switches : x\nnr_involuntary_switches : 1\nse.nr_migrations : 1"), None);
    }

    #[test]
    fn status_gives_switches() {
        let status =
            "Name:\tbash\nState:\tS (sleeping)\nvoluntary_ctxt_switches:\t109\nnonvoluntary_ctxt_switches:\t24\n";
        assert_eq!(parse_status_switches(status), Some((109, 24)));
        assert_eq!(parse_status_switches("voluntary_ctxt_switches:\t1\n"), None);
    }

    #[test]
    fn schedstat_gives_run_delay() {
        assert_eq!(parse_schedstat("38999506 6349595 133\n"), Some(6349595));
        assert_eq!(parse_schedstat("1 2\n"), None);
        assert_eq!(parse_schedstat(""), None);
    }

    #[test]
    fn children_list() {
        assert_eq!(parse_children("24677 24680 "), vec![24677, 24680]);
        assert!(parse_children("").is_empty());
    }

    #[test]
    fn cpu_times_take_irq_softirq_and_steal() {
        let stat = "cpu  1387216 32373 301478 1789332 11054 0 3755 6805 0 0\n\
                    cpu0 693451 17808 167790 879673 2668 1 993 3376 0 0\n\
                    cpu1 693765 14564 133687 909658 8385 2 2761 3428 0 0\n\
                    cpu12 1 2 3 4 5 6 7\n\
                    intr 1 2 3\n";
        let t = parse_cpu_times(stat);
        assert_eq!(t.get(&0), Some(&[1, 993, 3376]));
        assert_eq!(t.get(&1), Some(&[2, 2761, 3428]));
        assert!(!t.contains_key(&12), "a line without steal is left out, not read as zero");
        assert_eq!(t.len(), 2, "the aggregate line is no CPU");
    }

    fn snap(tids: &[i32], sw: (u64, u64), ended: u64, mig: u64, delay: u64, irq: u64) -> Snapshot {
        Snapshot {
            tids: tids.to_vec(),
            migrations: Some(mig),
            run_delay_ns: Some(delay),
            switches: Ok(sw),
            ended: Ok([0, 0, ended, 0, 0, 0, 0, 0]),
            own_alive: vec![1, 2],
            task_problem: None,
            cpus: vec![0],
            cpu_times: Some([(0, [irq, irq, 7]), (1, [50, 50, 50])].into_iter().collect()),
        }
    }

    const ALL: Features = Features { sched: true, schedstat: true, children: true };

    #[test]
    fn delta_of_steady_tasks() {
        let a = snap(&[10, 11], (100, 5), 0, 3, 1_000, 4);
        let b = snap(&[10, 11, 12], (250, 9), 0, 7, 5_000, 6);
        let d = delta(&a, &b, &ALL);
        assert_eq!(d[VOLUNTARY], Ok(150));
        assert_eq!(d[INVOLUNTARY], Ok(4));
        assert_eq!(d[MIGRATIONS], Ok(4));
        assert_eq!(d[RUN_QUEUE_WAIT], Ok(4_000));
        assert_eq!(d[STEAL], Ok(0), "only CPU 0 was the measured tasks'");
        assert_eq!(d[IRQ], Ok(4 * user_tick_ns()));
    }

    #[test]
    fn ended_tasks_drop_per_task_counters_only() {
        let a = snap(&[10, 11], (100, 5), 0, 3, 1_000, 4);
        // Task 11 is gone: its switches moved to RUSAGE_CHILDREN.
        let b = snap(&[10], (250, 9), 0, 7, 5_000, 4);
        let d = delta(&a, &b, &ALL);
        assert_eq!(d[VOLUNTARY], Ok(150));
        assert_eq!(d[MIGRATIONS], Err(Absent::TasksEnded));
        assert_eq!(d[RUN_QUEUE_WAIT], Err(Absent::TasksEnded));
        // A task born and reaped in between leaves only the fold-ups changed.
        let c = snap(&[10, 11], (260, 9), 1, 7, 5_000, 4);
        assert_eq!(delta(&a, &c, &ALL)[RUN_QUEUE_WAIT], Err(Absent::TasksEnded));
        assert_eq!(delta(&a, &c, &ALL)[VOLUNTARY], Ok(160));
    }

    #[test]
    fn missing_sources_are_absent_not_zero() {
        let a = snap(&[10], (1, 1), 0, 0, 0, 0);
        let mut b = snap(&[10], (2, 2), 0, 0, 0, 0);
        let none = Features { sched: false, schedstat: false, children: true };
        let d = delta(&a, &b, &none);
        assert_eq!(d[MIGRATIONS], Err(Absent::NoSchedFile));
        assert_eq!(d[RUN_QUEUE_WAIT], Err(Absent::NoSchedstat));
        assert_eq!(d[VOLUNTARY], Ok(1));
        b.own_alive = vec![1];
        assert_eq!(delta(&a, &b, &ALL)[VOLUNTARY], Err(Absent::HarnessThreadEnded));
        b.own_alive = vec![1, 2];
        b.cpu_times = None;
        assert_eq!(delta(&a, &b, &ALL)[STEAL], Err(Absent::NoCpuTimes));
        b.task_problem = Some(Absent::Unreadable);
        let d = delta(&a, &b, &ALL);
        assert_eq!((d[VOLUNTARY], d[MIGRATIONS]), (Err(Absent::Unreadable), Err(Absent::Unreadable)));
        b.task_problem = None;
        b.switches = Ok((0, 2));
        assert_eq!(delta(&a, &b, &ALL)[VOLUNTARY], Err(Absent::Inconsistent), "a count never goes back");
    }

    #[test]
    fn codes_round_trip() {
        for a in Absent::ALL {
            assert_eq!(Absent::from_code(a.code()), Some(a));
            assert!(!a.text().is_empty());
        }
        assert_eq!(Absent::from_code(0), None);
        assert_eq!(Absent::from_code(1), None);
    }

    #[test]
    fn this_thread_is_found_and_counted() {
        // procfs is part of every Linux; /proc/PID/task/TID/status always exists.
        let f = Features::probe();
        let s = snapshot(&Scope::Process, &f);
        let me = crate::harness::condition::gettid();
        assert!(s.tids.contains(&me), "this thread is measured in the process scope: {:?}", s.tids);
        let (v, i) = s.switches.expect("a process scope needs no bracket to agree");
        // The test harness's threads have blocked at least once by now.
        assert!(v + i > 0);
        let h = snapshot(&Scope::harness(), &f);
        assert!(!h.tids.contains(&me), "a thread present when the harness scope began is the harness's own");
        assert!(h.own_alive.contains(&me));
    }
}
