//! `--observe`: the measured tasks' and the loads' scheduler state over
//! time, kept as a [`schedlab_core::Timeline`] with the result (the
//! simulator's form, so `plot --timeline` draws both alike). Two sources:
//! `/proc/PID/task/TID/sched` and `schedstat`, sampled by a SCHED_OTHER
//! thread of the harness while a case runs (`--observe[=RATE]`, this file),
//! or the scheduler's tracepoints through an ftrace session
//! (`--observe=trace`, `observe/trace.rs`).
//!
//! Which tasks: the same two sets as the kernel counters
//! (`host/counters.rs`): the process's threads that were not there when the
//! sampler started (the measuring thread and what it starts) with their
//! descendant processes, and the descendants of the thread that started the
//! loads (the loads' processes and threads). The measured tasks are walked
//! again every 0.1 s, so tasks that start later are picked up and ended
//! ones stop; the loads' as often as a quarter of the budget allows.
//!
//! Reads: every sample reads every measured task, so the measured tasks
//! keep the rate asked for however many load tasks there are; the load
//! tasks are read in turn, as many a sample as the rest of the budget pays
//! for but each at least every [`MAX_LOAD_GAP_S`] ([`share`]), and the
//! timeline's notes give each role's rate. Each
//! read's cost is measured as the sampler goes (its thread's CPU time), so
//! the share follows the machine under load. Only when the measured tasks
//! alone cost more than the budget at the rate asked is the interval
//! stretched, and the notes say the rate reached.
//!
//! Cost, per measured task and sample: one pread(2) of `schedstat` (run
//! time, run delay, timeslices) on a file kept open; the long `sched` file
//! (prio, policy, vruntime, slice, switches, migrations) only every few
//! samples ([`SCHED_FILE_HZ`]), and at a task's first read. The sampler
//! sleeps once per period, to an absolute deadline.
//!
//! Fields the kernel does not print are listed in the timeline as missing,
//! with the reason, and never filled in; a kernel without the `sched` file
//! at all (CONFIG_SCHED_DEBUG off) is an error.

mod trace;

use crate::error::LiveError;
use crate::harness::condition::gettid;
use crate::harness::now_ns;
use schedlab_core::timeline::{Missing, Quantity, Timeline, TimelineTask};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// Rate taken when none is given, budget allowing.
pub const DEFAULT_RATE_HZ: f64 = 100.0;
/// Highest rate accepted: the kernel's counters move in scheduler ticks.
pub const MAX_RATE_HZ: f64 = 1000.0;
/// Lowest rate the automatic choice goes down to before refusing.
pub const MIN_RATE_HZ: f64 = 1.0;
/// Share of one CPU the sampler may use, reads and walks together.
pub const BUDGET: f64 = 0.02;
/// The reads' part of [`BUDGET`]; the walks for new and ended tasks get the rest.
const READ_BUDGET: f64 = BUDGET * 0.75;
const WALK_BUDGET: f64 = BUDGET - READ_BUDGET;
/// The long `sched` file of a measured task is read at about this rate
/// (every sample at lower rates): it costs several times `schedstat`, and
/// what it adds (priority, policy, vruntime, slice) changes rarely or is
/// meaningful only relative to other tasks, unlike the run time and delay.
pub const SCHED_FILE_HZ: f64 = 20.0;
/// Each load task is read at least this often, or the rate is refused
/// (asked) or lowered (automatic).
pub const MAX_LOAD_GAP_S: f64 = 5.0;
/// Tasks whose files are kept open at most (two descriptors each); more are
/// opened at each read, which costs two more syscalls a file and made
/// `hackbench`'s 400 tasks three times dearer a sample. Loads may take half
/// of them: they start before the measured tasks and must not take all.
const KEEP_OPEN_TASKS: usize = 4096;
/// Descriptors left to the rest of the harness when sizing the kept files.
const FDS_SPARE: u64 = 256;

/// How many tasks may keep their files open: the soft descriptor limit is
/// raised towards the hard one first (to 16,384 at most: children inherit
/// it, and some close every descriptor up to it).
fn keep_open_limit() -> usize {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a valid resource and struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 64;
        }
        let want = lim.rlim_max.min(16_384);
        if want > lim.rlim_cur {
            let raised = libc::rlimit { rlim_cur: want, rlim_max: lim.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = want;
            }
        }
    }
    ((lim.rlim_cur.saturating_sub(FDS_SPARE) / 2) as usize).clamp(16, KEEP_OPEN_TASKS)
}
/// Tasks followed at most per walk.
const MAX_TASKS: usize = 10_000;
/// Shortest time between two walks (ns).
const WALK_MIN_NS: u64 = 100_000_000;

/// What `--observe[=RATE|trace]` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observe {
    /// Samples per second; None: the highest up to [`DEFAULT_RATE_HZ`] within [`BUDGET`].
    pub rate_hz: Option<u32>,
    /// `--observe=trace`: scheduler tracepoints through ftrace instead of /proc.
    pub trace: bool,
}

impl Observe {
    /// `auto`, `200`, `200hz` or `trace`.
    pub fn parse(text: &str) -> Result<Observe, LiveError> {
        let t = text.trim().to_ascii_lowercase();
        if t.is_empty() || t == "auto" {
            return Ok(Observe { rate_hz: None, trace: false });
        }
        if t == "trace" {
            return Ok(Observe { rate_hz: None, trace: true });
        }
        let num = t.strip_suffix("hz").unwrap_or(&t).trim();
        match num.parse::<u32>() {
            Ok(r) if r >= 1 && f64::from(r) <= MAX_RATE_HZ => Ok(Observe { rate_hz: Some(r), trace: false }),
            _ => Err(LiveError::Observe(format!(
                "bad rate '{text}': give whole samples per second between 1 and {MAX_RATE_HZ} (e.g. --observe=50), \
                 trace (--observe=trace: scheduler tracepoints, as root), or --observe alone for the default"
            ))),
        }
    }

    /// Whether this kernel and this user can observe so, checked before
    /// anything runs: the `sched` file, or ftrace free and writable.
    pub fn check(&self) -> Result<(), LiveError> {
        if self.trace {
            trace::check()
        } else {
            check_sched_file()
        }
    }
}

fn check_sched_file() -> Result<(), LiveError> {
    if std::path::Path::new("/proc/thread-self/sched").exists() {
        return Ok(());
    }
    Err(LiveError::Observe(
        "this kernel has no /proc/PID/task/TID/sched (CONFIG_SCHED_DEBUG off), so the scheduler state \
         cannot be read: run without --observe, or on a kernel built with CONFIG_SCHED_DEBUG"
            .into(),
    ))
}

/// One quantity: where it comes from and its unit.
struct Field {
    name: &'static str,
    /// Key in the `sched` file.
    key: Option<&'static str>,
    /// The `sched` value times this is the stored value (ms printed → ns).
    scale: f64,
    /// Field of `schedstat` (in ns or a count), preferred when the file exists.
    stat: Option<usize>,
    unit: &'static str,
    lower_runs_first: Option<bool>,
    why_missing: &'static str,
}

const fn sched(name: &'static str, key: &'static str, unit: &'static str, scale: f64, why: &'static str) -> Field {
    Field { name, key: Some(key), scale, stat: None, unit, lower_runs_first: None, why_missing: why }
}

const NOT_PRINTED: &str = "this kernel's /proc/PID/task/TID/sched does not print it";
const NO_SCHEDSTATS: &str = "schedstats are off (sysctl kernel.sched_schedstats=1 turns them on)";
const NO_SCHEDSTAT_FILE: &str = "this kernel has no /proc/PID/task/TID/schedstat (CONFIG_SCHED_INFO off)";

const N_FIELDS: usize = 14;
/// Everything sampled, in the timeline's order. The `sched` file prints
/// times in ms with ns decimals (stored in ns), `se.slice` in ns.
const FIELDS: [Field; N_FIELDS] = [
    Field {
        name: "prio",
        key: Some("prio"),
        scale: 1.0,
        stat: None,
        unit: "",
        lower_runs_first: Some(true),
        why_missing: NOT_PRINTED,
    },
    sched("policy", "policy", "", 1.0, NOT_PRINTED),
    sched("vruntime", "se.vruntime", "ns", 1e6, NOT_PRINTED),
    sched("deadline", "se.deadline", "ns", 1e6, NOT_PRINTED),
    sched("slice", "se.slice", "ns", 1.0, NOT_PRINTED),
    sched("lag", "se.vlag", "ns", 1e6, NOT_PRINTED),
    // schedstat's first field is the same counter, in ns: read every sample.
    Field {
        name: "sum_exec_runtime",
        key: Some("se.sum_exec_runtime"),
        scale: 1e6,
        stat: Some(0),
        unit: "ns",
        lower_runs_first: None,
        why_missing: NOT_PRINTED,
    },
    sched("nr_switches", "nr_switches", "count", 1.0, NOT_PRINTED),
    sched("nr_voluntary_switches", "nr_voluntary_switches", "count", 1.0, NOT_PRINTED),
    sched("nr_involuntary_switches", "nr_involuntary_switches", "count", 1.0, NOT_PRINTED),
    sched("nr_migrations", "se.nr_migrations", "count", 1.0, NOT_PRINTED),
    sched("wait_sum", "wait_sum", "ns", 1e6, NO_SCHEDSTATS),
    Field {
        name: "run_delay",
        key: None,
        scale: 1.0,
        stat: Some(1),
        unit: "ns",
        lower_runs_first: None,
        why_missing: NO_SCHEDSTAT_FILE,
    },
    Field {
        name: "timeslices",
        key: None,
        scale: 1.0,
        stat: Some(2),
        unit: "count",
        lower_runs_first: None,
        why_missing: NO_SCHEDSTAT_FILE,
    },
];

/// The `sched` file's values, by [`FIELDS`] index.
type SchedValues = [Option<f64>; N_FIELDS];

/// The task's command name from a `sched` file's first line ("comm (pid,
/// #threads: n)") and the `key : value` lines sampled. Keys are taken
/// without a `stats.`/`se.statistics.` prefix too, as kernels differ there.
/// No allocation: this runs for every task read.
pub(crate) fn parse_sched(text: &str) -> (Option<&str>, SchedValues) {
    let comm = text.lines().next().and_then(|l| l.rsplit_once(" (")).map(|(c, _)| c);
    let mut out = [None; N_FIELDS];
    for l in text.lines() {
        let Some((k, v)) = l.split_once(':') else { continue };
        let k = k.trim_end();
        let bare = k.strip_prefix("se.statistics.").or_else(|| k.strip_prefix("stats.")).unwrap_or(k);
        // Only the keys sampled (the file has ~25 more).
        if let Some(i) = FIELDS.iter().position(|f| f.key == Some(bare)) {
            out[i] = v.trim().parse::<f64>().ok();
        }
    }
    (comm, out)
}

/// (on-CPU ns, run delay ns, timeslices) from a `schedstat` text.
fn parse_schedstat(text: &str) -> Option<[f64; 3]> {
    let mut f = text.split_whitespace().map(|x| x.parse::<f64>().ok());
    let out = [f.next()??, f.next()??, f.next()??];
    f.next().is_none().then_some(out)
}

/// The quantities a task's `sched` values (and a `schedstat` file, when
/// there is one) give, and the ones they lack, named with the reason.
pub(crate) fn present_and_missing(values: &SchedValues, schedstat: bool) -> (Vec<Quantity>, Vec<Missing>) {
    let (mut present, mut missing) = (Vec::new(), Vec::new());
    for (i, f) in FIELDS.iter().enumerate() {
        if (f.stat.is_some() && schedstat) || values[i].is_some() {
            present.push(Quantity { name: f.name.into(), unit: f.unit.into(), lower_runs_first: f.lower_runs_first });
        } else {
            missing.push(Missing { name: f.name.into(), why: f.why_missing.into() });
        }
    }
    (present, missing)
}

/// Before the case starts: the rate for `measured` tasks read every sample
/// and `loads` read in turn, each read costing about `cost_ns`. A rate
/// asked for is refused when the measured reads alone exceed the budget,
/// or leave too little of it to read each load task every
/// [`MAX_LOAD_GAP_S`]; without one, the highest up to the default that
/// fits, refused when not even [`MIN_RATE_HZ`] does.
pub(crate) fn choose_rate(asked: Option<f64>, measured: u64, loads: u64, cost_ns: f64) -> Result<f64, LiveError> {
    let (m, l, c) = (measured.max(1) as f64, loads as f64, cost_ns.max(1.0));
    // ns of reading per second that the budget allows, and that the loads need.
    let room = READ_BUDGET * 1e9;
    let for_loads = l * c / MAX_LOAD_GAP_S;
    let fits = ((room - for_loads) / (m * c)).min(MAX_RATE_HZ);
    let cpu_pct = |ns_per_s: f64| ns_per_s / 1e9 * 100.0;
    let us = c / 1e3;
    // The reads' part of the budget, named so: the walks take the rest.
    let limit = format!("{:.1} % of a CPU for reading (of the sampler's {:.0} %)", READ_BUDGET * 100.0, BUDGET * 100.0);
    match asked {
        Some(r) if r * m * c > room => Err(LiveError::Observe(format!(
            "{r} samples/s of {measured} measured task(s) at about {us:.1} us of reading each would use about \
             {:.1} % of a CPU, over the limit of {limit}: use --observe={} or lower, or --observe alone to \
             choose the rate",
            cpu_pct(r * m * c),
            fits.floor().max(0.0)
        ))),
        Some(r) if r <= fits || loads == 0 => Ok(r),
        Some(r) => Err(LiveError::Observe(format!(
            "{r} samples/s of {measured} measured task(s) leave room to read each of the {loads} load tasks \
             (about {us:.1} us a read, {limit}) only every {:.1} s, over the limit of every \
             {MAX_LOAD_GAP_S} s: use --observe={} or lower, or fewer load tasks",
            l * c / (room - r * m * c).max(1.0),
            fits.floor().max(0.0)
        ))),
        None if fits >= MIN_RATE_HZ => Ok(fits.min(DEFAULT_RATE_HZ)),
        None => Err(LiveError::Observe(format!(
            "reading each of the {loads} load tasks (about {us:.1} us a read) every {MAX_LOAD_GAP_S} s, and \
             the measured ones at {MIN_RATE_HZ} sample/s, would use about {:.1} % of a CPU, over the limit of \
             {limit}: observe fewer load tasks",
            cpu_pct(for_loads + m * c * MIN_RATE_HZ)
        ))),
    }
}

/// How one sample's reading is shared out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Share {
    /// Time to the next sample: the period asked for, longer only when
    /// the measured tasks' reads alone cost more than the budget allows.
    pub interval_ns: f64,
    /// Load tasks read a sample, in turn ([`next_slice`]); a fraction
    /// accumulates over samples ([`whole_reads`]).
    pub load_slice: f64,
}

/// The reads of one sample at `rate_hz`: every measured task (together
/// `measured_ns`), then as many of the `loads` load tasks (`load_read_ns`
/// each) as the rest of `budget` (a share of one CPU) pays for. Never
/// fewer than reach each load every [`MAX_LOAD_GAP_S`] (over the budget,
/// if need be: the check before the case makes that rare), and never so
/// many that the loads slow the measured tasks down: only the measured
/// reads stretch the interval.
pub(crate) fn share(rate_hz: f64, measured_ns: f64, load_read_ns: f64, loads: usize, budget: f64) -> Share {
    let period = 1e9 / rate_hz;
    let interval_ns = period.max(measured_ns / budget);
    let room = budget * interval_ns - measured_ns;
    let fair = room / load_read_ns.max(1.0);
    let least = loads as f64 / (MAX_LOAD_GAP_S * 1e9 / interval_ns);
    Share { interval_ns, load_slice: fair.max(least).min(loads as f64) }
}

/// The whole reads a sample makes of `slice`, carrying the fraction to the next.
pub(crate) fn whole_reads(credit: &mut f64, slice: f64) -> usize {
    *credit += slice;
    let n = credit.floor();
    *credit -= n;
    n as usize
}

/// Indices of the `slice` load tasks (of `len`) the sample reads, from
/// `cursor` on, wrapping; and where the next sample starts.
pub(crate) fn next_slice(cursor: usize, len: usize, slice: usize) -> (impl Iterator<Item = usize>, usize) {
    let start = if len == 0 { 0 } else { cursor % len };
    let slice = slice.min(len);
    ((start..start + slice).map(move |i| i % len.max(1)), if len == 0 { 0 } else { (start + slice) % len })
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is writable; CLOCK_THREAD_CPUTIME_ID always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

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

/// The whole of a /proc seq_file into `buf` with pread(2) from offset 0:
/// `sched` and `schedstat` are seq_files, which format the text afresh on
/// every read at offset 0 (seq_read_iter resets its iterator there), so a
/// file kept open gives a new reading with one syscall, where
/// `fs::read_to_string` takes open, statx, two reads and close. A single
/// record (single_open) comes whole when the buffer holds it: a read
/// shorter than the room left is the end. None: the task has ended.
fn pread_all<'b>(file: &File, buf: &'b mut Vec<u8>) -> Option<&'b str> {
    let mut len = 0;
    loop {
        if buf.len() - len < 1024 {
            buf.resize(buf.len() * 2 + 4096, 0);
        }
        let room = buf.len() - len;
        let n = file.read_at(&mut buf[len..], len as u64).ok()?;
        len += n;
        if n < room {
            break;
        }
    }
    std::str::from_utf8(&buf[..len]).ok()
}

/// A task's two files.
struct Files {
    sched: File,
    schedstat: Option<File>,
}

impl Files {
    fn open(pid: i32, tid: i32, schedstat: bool) -> Option<Files> {
        let base = format!("/proc/{pid}/task/{tid}");
        let sched = File::open(format!("{base}/sched")).ok()?;
        let schedstat = if schedstat { Some(File::open(format!("{base}/schedstat")).ok()?) } else { None };
        Some(Files { sched, schedstat })
    }
}

/// A task followed, with its files when they are kept open.
struct Task {
    pid: i32,
    tid: i32,
    files: Option<Files>,
    /// Its command name at the last `sched` read; empty before the first
    /// read (which takes the `sched` file too).
    comm: String,
}

/// What the reads share: the buffer, the open files' count, the series.
struct Reader {
    schedstat: bool,
    buf: Vec<u8>,
    kept: usize,
    /// Tasks whose files may stay open ([`keep_open_limit`]).
    keep_limit: usize,
    tasks: BTreeMap<i32, TimelineTask>,
}

impl Reader {
    /// Read `task` as `role` at `t` (the `sched` file too when
    /// `with_sched`); whether the task was there to read.
    fn read(&mut self, task: &mut Task, role: &'static str, with_sched: bool, t: u64) -> bool {
        let mut temp = None;
        if task.files.is_none() {
            // A task that ended between the walk and the read is simply not sampled.
            let Some(f) = Files::open(task.pid, task.tid, self.schedstat) else { return false };
            let limit = if role == "measured" { self.keep_limit } else { self.keep_limit / 2 };
            if self.kept < limit {
                self.kept += 1;
                task.files = Some(f);
            } else {
                temp = Some(f);
            }
        }
        let Some(files) = task.files.as_ref().or(temp.as_ref()) else { return false };
        let with_sched = with_sched || task.comm.is_empty() || files.schedstat.is_none();
        let stat = match &files.schedstat {
            Some(f) => match pread_all(f, &mut self.buf).and_then(parse_schedstat) {
                Some(s) => Some(s),
                None => return false,
            },
            None => None,
        };
        let mut values = [None; N_FIELDS];
        let tid = task.tid;
        if with_sched {
            let Some(text) = pread_all(&files.sched, &mut self.buf) else { return false };
            let (comm, v) = parse_sched(text);
            values = v;
            let comm = comm.unwrap_or("?");
            // A new thread names itself (and a runner execs) after it starts: the latest name wins.
            if task.comm != comm {
                task.comm = comm.to_string();
                let name = format!("{role} {comm} {tid}");
                match self.tasks.get_mut(&tid) {
                    Some(entry) => entry.name = name,
                    None => {
                        self.tasks.insert(tid, TimelineTask::new(tid as u64, name, role));
                    }
                }
            }
        }
        let Some(entry) = self.tasks.get_mut(&tid) else { return true };
        for (i, f) in FIELDS.iter().enumerate() {
            let v = match (f.stat, stat) {
                (Some(s), Some(st)) => Some(st[s]),
                (Some(_), None) if self.schedstat => None,
                _ => values[i].map(|v| v * f.scale),
            };
            if let Some(v) = v {
                push_level(entry, f.name, t, v);
            }
        }
        entry.last_seen_ns = Some(t);
        true
    }
}

/// [`TimelineTask::push`] without making the quantity's name a String
/// again at every read (only a new series allocates).
fn push_level(task: &mut TimelineTask, quantity: &str, t: u64, value: f64) {
    match task.series.get_mut(quantity) {
        Some(s) => {
            if s.last().is_none_or(|&(_, v)| v != value) {
                s.push((t, value));
            }
        }
        None => task.push(quantity, t, value),
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
    measured: Vec<Task>,
    loads: Vec<Task>,
    /// Every task walked and its role (what `--observe=trace` needs).
    roles: BTreeMap<i32, &'static str>,
    /// Time (from t0) the tasks are walked again at, and the loads' too.
    next_walk_ns: u64,
    next_load_walk_ns: u64,
    reader: Reader,
    /// Where the next sample's loads start.
    cursor: usize,
    samples: u64,
    load_reads: u64,
    /// Load tasks known, summed over the samples (for their mean).
    loads_known: u64,
    /// Measured tasks read, summed over the samples (for their mean: at the
    /// end a benchmark's workers have often exited).
    measured_known: u64,
    stretched: bool,
}

impl State {
    /// Find the measured tasks again, and the loads' when their walk is
    /// due, keeping the open files of those still there. Returns its CPU
    /// time. The measured tasks are few and walked every time, so one that
    /// starts is read within [`WALK_MIN_NS`]; the loads' walk may be long
    /// (hundreds of tasks) and keeps within its part of the budget.
    fn walk(&mut self, t: u64) -> u64 {
        let cpu = thread_cpu_ns();
        let own = self.own.lock().map(|o| o.clone()).unwrap_or_default();
        let mut measured: Vec<(i32, i32)> =
            list_tasks(self.me).into_iter().filter(|t| !own.contains(t)).map(|t| (self.me, t)).collect();
        let roots = measured.clone();
        descendants(&roots, &mut measured);
        let loads_due = t >= self.next_load_walk_ns;
        let mut loads = Vec::new();
        if loads_due {
            descendants(&[(self.me, self.load_root)], &mut loads);
        }
        let mut old: HashMap<i32, Task> = self.measured.drain(..).map(|t| (t.tid, t)).collect();
        if loads_due {
            old.extend(self.loads.drain(..).map(|t| (t.tid, t)));
        }
        let mut take = |(pid, tid): (i32, i32)| {
            old.remove(&tid).filter(|t| t.pid == pid).unwrap_or(Task { pid, tid, files: None, comm: String::new() })
        };
        self.measured = measured.into_iter().map(&mut take).collect();
        if loads_due {
            self.loads = loads.into_iter().map(&mut take).collect();
        }
        for (tasks, role) in [(&self.measured, "measured"), (&self.loads, "load")] {
            for t in tasks {
                self.roles.entry(t.tid).or_insert(role);
            }
        }
        // The files of ended tasks close as `old` drops.
        self.reader.kept = self.measured.iter().chain(&self.loads).filter(|t| t.files.is_some()).count();
        let spent = thread_cpu_ns().saturating_sub(cpu);
        self.next_walk_ns = t + WALK_MIN_NS;
        if loads_due {
            // The loads' walk costs most of it: it waits so as to keep walks within their budget.
            self.next_load_walk_ns = t + WALK_MIN_NS.max((spent as f64 / WALK_BUDGET) as u64);
        }
        spent
    }

    /// Read every measured task (the `sched` file too when `with_sched`).
    fn read_measured(&mut self, t: u64, with_sched: bool) {
        let reader = &mut self.reader;
        self.measured.retain_mut(|task| {
            let there = reader.read(task, "measured", with_sched, t);
            if !there && task.files.is_some() {
                reader.kept -= 1;
            }
            there
        });
    }

    /// Read `slice` load tasks in turn; returns how many were read.
    fn read_loads(&mut self, t: u64, slice: usize) -> u64 {
        let (picked, next) = next_slice(self.cursor, self.loads.len(), slice);
        self.cursor = next;
        let mut n = 0;
        for i in picked {
            // An ended load stays in the list (files closed) until the next walk.
            let task = &mut self.loads[i];
            if self.reader.read(task, "load", true, t) {
                n += 1;
            } else if task.files.take().is_some() {
                self.reader.kept -= 1;
            }
        }
        self.load_reads += n;
        n
    }

    fn finish(self, end_ns: u64, notes: Vec<String>, rate: f64) -> Timeline {
        let text = std::fs::read_to_string(format!("/proc/self/task/{}/sched", gettid())).unwrap_or_default();
        let (quantities, missing) = present_and_missing(&parse_sched(&text).1, self.reader.schedstat);
        // Found by the last walk: its levels hold to the end (a load read
        // in turn was last read earlier, but has not ended).
        let alive: BTreeSet<i32> = self.measured.iter().chain(&self.loads).map(|t| t.tid).collect();
        let mut tasks: Vec<TimelineTask> = self.reader.tasks.into_values().collect();
        for t in &mut tasks {
            if alive.contains(&(t.id as i32)) {
                t.last_seen_ns = None;
            }
        }
        Timeline {
            source: format!(
                "/proc/PID/task/TID/sched{}, sampled at {rate:.1} Hz",
                if self.reader.schedstat { " and schedstat" } else { "" }
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

/// The sampler's stop flag, which is also what it sleeps on:
/// FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline, so each
/// period costs one syscall and ends on time whatever the sample took (no
/// drift, no relative-timeout arithmetic), and a stop wakes it at once.
/// (A channel's `recv_timeout` spins and yields before it blocks.)
struct StopWord(AtomicU32);

impl StopWord {
    fn stopped(&self) -> bool {
        self.0.load(Ordering::Acquire) != 0
    }

    /// Sleep until `deadline_ns` (CLOCK_MONOTONIC) or a stop; whether stopped.
    fn sleep_until(&self, deadline_ns: u64) -> bool {
        let ts = libc::timespec {
            tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: the futex word lives as long as self; ts is a valid timespec.
        // It returns at once if the word is no longer 0 (a stop came first).
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.0.as_ptr(),
                libc::FUTEX_WAIT_BITSET | libc::FUTEX_PRIVATE_FLAG,
                0u32,
                &ts as *const libc::timespec,
                std::ptr::null::<u32>(),
                libc::FUTEX_BITSET_MATCH_ANY,
            )
        };
        self.stopped()
    }

    fn stop(&self) {
        self.0.store(1, Ordering::Release);
        // SAFETY: waking waiters on our own futex word.
        unsafe {
            libc::syscall(libc::SYS_futex, self.0.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, i32::MAX)
        };
    }
}

/// What the sampler thread hands back.
enum Outcome {
    /// /proc sampling: the timeline.
    Timeline(Timeline),
    /// Tracing: which task was measured and which a load.
    Roles(BTreeMap<i32, &'static str>),
}

/// The sampler of a case; stopping (or dropping) it joins its thread and,
/// tracing, gives ftrace back.
pub(crate) struct Sampler {
    stop: Arc<StopWord>,
    handle: Option<std::thread::JoinHandle<Outcome>>,
    own: Arc<Mutex<BTreeSet<i32>>>,
    trace: Option<trace::Session>,
}

/// Cost (ns) of reading one task's files, opened for the read (the
/// dearer way: kept-open files cost less), measured on this thread.
fn read_cost_ns(schedstat: bool) -> f64 {
    const TRIES: u64 = 20;
    let tid = gettid();
    let me = std::process::id() as i32;
    let mut buf = Vec::new();
    let start = thread_cpu_ns();
    for _ in 0..TRIES {
        if let Some(f) = Files::open(me, tid, schedstat) {
            let _ = pread_all(&f.sched, &mut buf).map(parse_sched);
            if let Some(s) = &f.schedstat {
                let _ = pread_all(s, &mut buf).map(parse_schedstat);
            }
        }
    }
    (thread_cpu_ns() - start) as f64 / TRIES as f64
}

impl Sampler {
    /// Check the kernel and the rate for `expected_tasks` (one measured
    /// task plus the loads'), then start the sampler thread (SCHED_OTHER,
    /// on `cpus` when given) and, for `--observe=trace`, the trace. Returns
    /// once the thread has taken every thread of the process now (itself
    /// included) as the harness's own: call it before the measuring thread
    /// exists. `load_root`: the thread that starts the loads (and the
    /// measuring thread: the trace follows what it starts).
    pub(crate) fn start(
        want: Observe,
        expected_tasks: u64,
        load_root: i32,
        cpus: Option<&[usize]>,
    ) -> Result<Sampler, LiveError> {
        want.check()?;
        let schedstat = std::path::Path::new("/proc/thread-self/schedstat").exists();
        let cost = read_cost_ns(schedstat);
        let keep_limit = keep_open_limit();
        let rate = if want.trace {
            // Only the walk that tells measured tasks from loads runs.
            1e9 / WALK_MIN_NS as f64
        } else {
            choose_rate(want.rate_hz.map(f64::from), 1, expected_tasks.saturating_sub(1), cost)?
        };
        let stop = Arc::new(StopWord(AtomicU32::new(0)));
        let stop_in_thread = Arc::clone(&stop);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
        let cpus = cpus.map(<[usize]>::to_vec);
        let own = Arc::new(Mutex::new(BTreeSet::new()));
        let own_in_thread = Arc::clone(&own);
        let t0 = now_ns();
        let tracing = want.trace;
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
                    t0,
                    me,
                    own: own_in_thread,
                    load_root,
                    measured: Vec::new(),
                    loads: Vec::new(),
                    roles: BTreeMap::new(),
                    next_walk_ns: 0,
                    next_load_walk_ns: 0,
                    reader: Reader {
                        schedstat,
                        buf: Vec::with_capacity(8192),
                        kept: 0,
                        keep_limit,
                        tasks: BTreeMap::new(),
                    },
                    cursor: 0,
                    samples: 0,
                    load_reads: 0,
                    loads_known: 0,
                    measured_known: 0,
                    stretched: false,
                };
                let _ = ready_tx.send(());
                if tracing {
                    Outcome::Roles(walk_only(state, &stop_in_thread))
                } else {
                    Outcome::Timeline(run(state, rate, cost, &stop_in_thread))
                }
            })
            .map_err(|e| LiveError::Os {
                what: "spawning the --observe sampler",
                detail: e.to_string(),
                hint: "check ulimit -u",
            })?;
        // The thread sends once it has listed the process's threads; a
        // thread that died first ends the wait too.
        let _ = ready_rx.recv();
        let mut sampler = Sampler { stop, handle: Some(handle), own, trace: None };
        if want.trace {
            // After the sampler thread exists, so that it is not traced; on
            // an error, dropping `sampler` stops the thread.
            sampler.trace = Some(trace::Session::start(load_root, t0)?);
        }
        Ok(sampler)
    }

    /// Take every thread of the process now as the harness's own too (the
    /// loads' helpers, started after the sampler): call it, as the kernel
    /// counters take theirs, before the measuring thread exists.
    pub(crate) fn harness_threads_now(&self) {
        if let Ok(mut o) = self.own.lock() {
            o.extend(list_tasks(std::process::id() as i32));
        }
    }

    /// Stop sampling (and tracing) and return the timeline (None: the
    /// thread panicked). `measuring`: the measuring thread's tid (0 when it
    /// never ran): the trace takes it, and what it started, as measured
    /// even when it lived between two walks.
    pub(crate) fn finish(mut self, measuring: i32) -> Option<Timeline> {
        // The trace ends first: its end is the measurement's.
        let stopped = self.trace.take().map(trace::Session::stop);
        self.stop.stop();
        let outcome = self.handle.take()?.join().ok()?;
        match (outcome, stopped) {
            (Outcome::Timeline(t), _) => Some(t),
            (Outcome::Roles(mut roles), Some(s)) => {
                if measuring > 0 {
                    roles.insert(measuring, "measured");
                }
                Some(s.timeline(&roles))
            }
            (Outcome::Roles(_), None) => None,
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        // No sampler outlives its case; the trace session gives ftrace back as it drops.
        self.trace.take();
        self.stop.stop();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Exponential moving average over about 8 samples.
fn ema(avg: f64, x: f64) -> f64 {
    avg + (x - avg) / 8.0
}

/// Sample until stopped (or a stop is requested), within the budget.
fn run(mut state: State, rate: f64, read_cost_ns: f64, stop: &StopWord) -> Timeline {
    let period_ns = 1e9 / rate;
    // The `sched` file every this many samples (every one at low rates).
    let sched_every = (rate / SCHED_FILE_HZ).round().max(1.0) as u64;
    // The costs (CPU ns) the share is planned with, measured as it goes.
    let (mut measured_ns, mut load_read_ns, mut load_credit) = (read_cost_ns, read_cost_ns, 0.0);
    let started = now_ns();
    let mut deadline = started;
    let mut cpu = thread_cpu_ns();
    loop {
        let t = now_ns() - state.t0;
        let walk_ns = if t >= state.next_walk_ns { state.walk(t) } else { 0 };
        let plan = share(rate, measured_ns, load_read_ns, state.loads.len(), READ_BUDGET);
        state.read_measured(t, state.samples.is_multiple_of(sched_every));
        // One clock read when there are no loads; two with them, to cost each part.
        let after_measured = thread_cpu_ns();
        let slice = whole_reads(&mut load_credit, plan.load_slice);
        let (n, end_cpu) = if slice > 0 {
            let n = state.read_loads(t, slice);
            (n, thread_cpu_ns())
        } else {
            (0, after_measured)
        };
        state.samples += 1;
        state.loads_known += state.loads.len() as u64;
        state.measured_known += state.measured.len() as u64;
        // The measured part also carries the wake-up and the sleep around it.
        measured_ns = ema(measured_ns, after_measured.saturating_sub(cpu + walk_ns) as f64);
        if n > 0 {
            load_read_ns = ema(load_read_ns, end_cpu.saturating_sub(after_measured) as f64 / n as f64);
        }
        cpu = end_cpu;
        let interval = share(rate, measured_ns, load_read_ns, state.loads.len(), READ_BUDGET).interval_ns;
        if interval > period_ns * 1.01 {
            state.stretched = true;
        }
        // The next period starts `interval` after this one did, so the rate
        // holds whatever a sample took; after a late wake-up (a busy
        // machine) the next sample comes at once, and the grid restarts
        // from it: no burst of samples to catch up.
        let now = now_ns();
        deadline = (deadline + interval as u64).max(now);
        if stop.sleep_until(deadline) || crate::harness::hygiene::stop_requested() {
            break;
        }
    }
    let end = now_ns() - state.t0;
    state.walk(end);
    state.read_measured(end, true);
    let elapsed_s = ((now_ns() - started) as f64 / 1e9).max(1e-9);
    let mut notes = Vec::new();
    let reached = state.samples as f64 / elapsed_s;
    let sched_hz = reached / sched_every as f64;
    let stat_note = if state.reader.schedstat {
        format!("schedstat every sample, the sched file every {sched_every} samples: {sched_hz:.1} Hz")
    } else {
        "the sched file every sample".to_string()
    };
    notes.push(format!(
        "measured tasks at {reached:.1} Hz ({stat_note}; {:.0} task(s) on average, about {:.0} us of CPU a sample)",
        state.measured_known as f64 / state.samples.max(1) as f64,
        measured_ns / 1e3
    ));
    if state.loads_known > 0 {
        let mean_loads = state.loads_known as f64 / state.samples.max(1) as f64;
        notes.push(format!(
            "load tasks each at {:.1} Hz ({mean_loads:.0} tasks read in turn, {:.1} a sample, both files)",
            state.load_reads as f64 / elapsed_s / mean_loads.max(1.0),
            state.load_reads as f64 / state.samples.max(1) as f64
        ));
    }
    if state.stretched && reached < 0.9 * rate {
        notes.push(format!(
            "sampled at {reached:.1} Hz on average instead of {rate:.1} Hz: the measured tasks alone cost more \
             to read than {:.0} % of a CPU allows at that rate",
            BUDGET * 100.0
        ));
    }
    state.finish(end, notes, rate)
}

/// `--observe=trace`: only walk the tasks (no files read), so that the
/// trace's tasks can be told apart as measured or load.
fn walk_only(mut state: State, stop: &StopWord) -> BTreeMap<i32, &'static str> {
    loop {
        let t = now_ns() - state.t0;
        state.walk(t);
        if stop.sleep_until(state.t0 + state.next_walk_ns) || crate::harness::hygiene::stop_requested() {
            break;
        }
    }
    state.walk(now_ns() - state.t0);
    state.roles
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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

    fn value(values: &SchedValues, name: &str) -> Option<f64> {
        values[FIELDS.iter().position(|f| f.name == name).unwrap()]
    }

    #[test]
    fn the_sched_file_parses_and_lacking_fields_are_named() {
        let (comm, values) = parse_sched(SCHED_6_18);
        assert_eq!(comm, Some("cat"));
        assert_eq!(
            (value(&values, "prio"), value(&values, "vruntime"), value(&values, "nr_switches")),
            (Some(120.0), Some(245.343477), Some(3.0))
        );
        let (present, missing) = present_and_missing(&values, true);
        let names: Vec<&str> = present.iter().map(|q| q.name.as_str()).collect();
        assert!(names.contains(&"vruntime") && names.contains(&"run_delay") && names.contains(&"prio"));
        let why = |n: &str| missing.iter().find(|m| m.name == n).map(|m| m.why.clone());
        assert_eq!(why("deadline").as_deref(), Some(NOT_PRINTED));
        assert_eq!(why("lag").as_deref(), Some(NOT_PRINTED));
        assert_eq!(why("wait_sum").as_deref(), Some(NO_SCHEDSTATS));
        assert!(why("vruntime").is_none(), "a present field is not missing");
        // No schedstat file: its quantities are missing, with that reason.
        let (_, missing) = present_and_missing(&values, false);
        assert!(missing.iter().any(|m| m.name == "run_delay" && m.why == NO_SCHEDSTAT_FILE));
        assert!(!missing.iter().any(|m| m.name == "sum_exec_runtime"), "the sched file has it too");
        // A schedstats kernel prints wait_sum under a prefix: it is found.
        let (_, values) = parse_sched("x (1, #threads: 1)\nstats.wait_sum : 12.5\n");
        assert_eq!(value(&values, "wait_sum"), Some(12.5));
        assert_eq!(parse_schedstat("4137 20885 3\n"), Some([4137.0, 20885.0, 3.0]));
        assert_eq!(parse_schedstat("4137 20885\n"), None);
    }

    #[test]
    fn a_rate_over_budget_is_refused_with_the_estimate_and_the_limit() {
        // 1 measured task at 100 us a read: 1.5 % of a CPU (the reads' part of 2 %) allows 150 Hz.
        let e = choose_rate(Some(200.0), 1, 0, 100_000.0).unwrap_err().to_string();
        assert!(e.contains("about 2.0 % of a CPU") && e.contains("--observe=150"), "{e}");
        assert!(e.contains("limit of 1.5 % of a CPU for reading (of the sampler's 2 %)"), "{e}");
        assert_eq!(choose_rate(Some(150.0), 1, 0, 100_000.0).unwrap(), 150.0);
        assert_eq!(choose_rate(None, 1, 0, 100_000.0).unwrap(), DEFAULT_RATE_HZ, "auto stops at the default");
        // Loads do not lower the measured rate until they would go unread for longer than the gap.
        assert_eq!(choose_rate(Some(100.0), 1, 160, 10_000.0).unwrap(), 100.0);
        // 5000 loads at 10 us, each every 5 s: 10 ms a second, leaving 5 of the 15 for the measured: 500 Hz.
        let e = choose_rate(Some(600.0), 1, 5000, 10_000.0).unwrap_err().to_string();
        assert!(e.contains("each of the 5000 load tasks") && e.contains("--observe=500"), "{e}");
        assert_eq!(choose_rate(None, 1, 5000, 10_000.0).unwrap(), DEFAULT_RATE_HZ);
        let e = choose_rate(None, 1, 100_000, 10_000.0).unwrap_err().to_string();
        assert!(e.contains("100000 load tasks") && e.contains("fewer load tasks"), "{e}");
    }

    /// Which tasks `samples` samples read: (times each measured task is
    /// read, times each load task is read, intervals).
    fn simulate(rate: f64, measured: usize, loads: usize, read_ns: f64, samples: usize) -> (usize, Vec<usize>, f64) {
        let mut reads = vec![0; loads];
        let (mut cursor, mut measured_reads, mut interval, mut credit) = (0, 0, 0.0, 0.0);
        for _ in 0..samples {
            let plan = share(rate, measured as f64 * read_ns, read_ns, loads, READ_BUDGET);
            measured_reads += 1;
            let (picked, next) = next_slice(cursor, loads, whole_reads(&mut credit, plan.load_slice));
            picked.for_each(|i| reads[i] += 1);
            cursor = next;
            interval = plan.interval_ns;
        }
        (measured_reads, reads, interval)
    }

    #[test]
    fn measured_tasks_are_read_every_sample_and_loads_in_turn_within_the_budget() {
        // hackbench:4 (160 tasks) at 5 us a read, 100 Hz: 150 us a sample
        // for reads, 5 us for the measured task, 29 loads a sample.
        let on_time = |interval: f64| (interval - 10e6).abs() < 1.0;
        let plan = share(100.0, 5_000.0, 5_000.0, 160, READ_BUDGET);
        assert!(plan.load_slice == 29.0 && on_time(plan.interval_ns), "{plan:?}");
        let (measured, loads, interval) = simulate(100.0, 1, 160, 5_000.0, 100);
        assert!(measured == 100 && on_time(interval), "the measured task keeps the rate asked");
        // 2900 reads over 160 tasks: each 18 or 19 times in the second (about 18 Hz).
        assert!(loads.iter().all(|&n| n == 18 || n == 19), "{loads:?}");
        assert_eq!(loads.iter().sum::<usize>(), 2900);
        // Far more loads than the budget reads in a second: still every one in turn.
        let (_, loads, interval) = simulate(100.0, 1, 10_000, 5_000.0, 400);
        assert!(on_time(interval));
        assert!(loads.iter().all(|&n| n >= 1), "every load read within 4 s");
        // Measured tasks alone over the budget: the interval stretches to
        // fit them (20 ms), and each load is still read every 5 s (32 reads a second).
        let plan = share(100.0, 300_000.0, 5_000.0, 160, READ_BUDGET);
        assert!((plan.interval_ns - 20e6).abs() < 1.0 && (plan.load_slice - 0.64).abs() < 1e-9, "{plan:?}");
        // Measured reads that leave no room: the loads get their least, the rate stays.
        let plan = share(100.0, 149_000.0, 5_000.0, 160, READ_BUDGET);
        assert!(on_time(plan.interval_ns) && (plan.load_slice - 0.32).abs() < 1e-9, "{plan:?}");
        let mut credit = 0.0;
        let reads: Vec<usize> = (0..5).map(|_| whole_reads(&mut credit, plan.load_slice)).collect();
        assert_eq!(reads, [0, 0, 0, 1, 0], "a fraction accumulates");
        // No loads: nothing to share.
        assert_eq!(share(100.0, 5_000.0, 5_000.0, 0, READ_BUDGET).load_slice, 0.0);
        let (picked, next) = next_slice(158, 160, 4);
        assert_eq!((picked.collect::<Vec<_>>(), next), (vec![158, 159, 0, 1], 2));
        assert_eq!(next_slice(5, 0, 3).0.count(), 0);
    }

    #[test]
    fn observe_values_parse_and_bad_ones_say_what_is_expected() {
        assert_eq!(Observe::parse("auto").unwrap(), Observe { rate_hz: None, trace: false });
        assert_eq!(Observe::parse("50").unwrap().rate_hz, Some(50));
        assert_eq!(Observe::parse("200Hz").unwrap().rate_hz, Some(200));
        assert_eq!(Observe::parse("trace").unwrap(), Observe { rate_hz: None, trace: true });
        for bad in ["0", "-5", "fast", "5000", "2.5", "trace,50"] {
            let e = Observe::parse(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("bad rate '{bad}'")) && e.contains("between 1 and 1000"), "{e}");
            assert!(e.contains("trace"), "{e}");
        }
    }

    #[test]
    fn a_kept_file_read_again_from_offset_0_is_a_fresh_reading() {
        let me = std::process::id() as i32;
        let files = Files::open(me, gettid(), true).unwrap();
        let mut buf = Vec::new();
        let runtime = |buf: &mut Vec<u8>| parse_schedstat(pread_all(files.schedstat.as_ref().unwrap(), buf).unwrap());
        let first = runtime(&mut buf).unwrap()[0];
        // 20 ms of this thread's CPU time (not wall time: the machine may be busy).
        let end = thread_cpu_ns() + 20_000_000;
        while thread_cpu_ns() < end {}
        let second = runtime(&mut buf).unwrap()[0];
        assert!(second >= first + 19e6, "the run time grew by the 20 ms spun: {first} then {second}");
        // The long file, through a fresh buffer: read whole, and whole again from the start.
        let mut small = Vec::new();
        let text = pread_all(&files.sched, &mut small).unwrap().to_string();
        assert!(text.contains("se.sum_exec_runtime") && text.contains("prio"), "{text}");
        let again = pread_all(&files.sched, &mut small).unwrap();
        assert_eq!(again.lines().count(), text.lines().count(), "read again whole, from the start");
    }

    #[test]
    fn a_case_driven_with_observe_carries_its_timeline_and_leaves_no_sampler() {
        let _one = one_sampler();
        let plan = crate::RunPlan {
            repeat: 1,
            warmup: 0,
            counters: false,
            observe: Some(Observe { rate_hz: Some(50), trace: false }),
            ..Default::default()
        };
        let (tid, report) = crate::harness::drive("observe-test", &plan, 0.5, 1, &|_| {}, |_ctx| {
            // Long enough for the walks (every 0.1 s) to find it, on a busy machine too.
            std::thread::sleep(Duration::from_millis(300));
            Ok(gettid())
        })
        .unwrap();
        let tl = report.timeline.expect("--observe gives the case a timeline");
        let t = tl.tasks.iter().find(|t| t.id == tid as u64).expect("the measuring thread was sampled");
        assert_eq!(t.role, "measured");
        assert!(t.series.contains_key("prio") && t.series.contains_key("sum_exec_runtime"));
        assert!(tl.notes.iter().any(|n| n.starts_with("measured tasks at ")), "{:?}", tl.notes);
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
        let want = Observe { rate_hz: Some(50), trace: false };
        let s = Sampler::start(want, 1, root, None).unwrap();
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
        // A thread started after the sampler is measured; it sleeps and spins a
        // little, long enough for two walks and two readings of its sched file.
        let worker = std::thread::Builder::new()
            .name("observed-worker".into())
            .spawn(|| {
                let end = now_ns() + 400_000_000;
                while now_ns() < end {
                    std::thread::sleep(Duration::from_millis(5));
                }
                gettid()
            })
            .unwrap();
        let tid = worker.join().unwrap();
        drop(helper_tx);
        let helper_tid = helper.join().unwrap();
        let tl = s.finish(0).unwrap();
        assert!(!sampler_alive(), "no sampler left after finish");
        let t = tl.tasks.iter().find(|t| t.id == tid as u64).expect("the new thread was sampled");
        assert_eq!(t.role, "measured");
        assert!(t.name.contains("observed-worker"), "{}", t.name);
        assert!(!t.points("prio").is_empty() && t.last_seen_ns.is_some(), "it ended before the timeline did");
        assert!(t.points("nr_switches").len() >= 2, "its switches grew while it slept: {:?}", t.points("nr_switches"));
        assert!(t.points("timeslices").len() >= 5, "schedstat every sample: {:?}", t.points("timeslices"));
        assert!(tl.tasks.iter().all(|t| t.id != gettid() as u64), "the harness's own threads are not sampled");
        // Sampled (30 ms at 50 Hz) before it was taken as the harness's, then no more.
        let h = tl.tasks.iter().find(|t| t.id == helper_tid as u64);
        assert!(h.is_none_or(|h| h.last_seen_ns.is_some_and(|l| l < tl.end_ns)), "a harness thread is not followed");
        assert!(tl.quantity("prio").is_some() && tl.end_ns > 0);
        // Dropping a running sampler stops it too (what an error or Ctrl-C path does).
        drop(Sampler::start(want, 1, root, None).unwrap());
        assert!(!sampler_alive(), "a dropped sampler leaves no thread");
    }
}
