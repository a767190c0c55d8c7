//! Background loads, usable by any benchmark (`--load SPEC`, repeatable).
//!
//! ```text
//!   none                      no load (overrides a benchmark's default load)
//!   hackbench:G               G groups of 20 senders + 20 receivers over
//!                             socketpairs, sending 100-byte messages forever
//!   burn:N                    N CPU hogs (a tight integer loop)
//!   SPEC@key=value,...        the load's own condition: policy=, prio=,
//!                             nice=, cpus= (e.g. burn:2@nice=10,
//!                             hackbench:10@policy=batch, burn:1@cpus=1)
//! ```
//!
//! Load tasks are processes forked from the harness's calling thread (with
//! PDEATHSIG and one process group per case, see [`Children`]) *before* the
//! measuring thread starts, then given their condition by pid (default: the
//! harness's own, SCHED_OTHER, never the benchmark's condition). They run
//! [`WARMUP`] before the measurement starts, and are stopped (a stop word in
//! a shared page, then SIGKILL to the group) and reaped when it ends. Each
//! task counts its work in its own cache line of a shared page; the load's
//! throughput over the measurement (messages/s received, or burn loops/s of
//! [`BURN_CHUNK`] iterations) is reported as a Neutral metric, so a result
//! says how loaded the machine really was. Every load loop checks the stop
//! word and the case deadline (+1 s) and exits by itself, so even an RT load
//! is bounded; RT load tasks are also watched by the RT watchdog.

use crate::condition;
use crate::error::LiveError;
use crate::harness::now_ns;
use crate::hygiene::{Children, Watchdog};
use schedlab_core::condition::parse_cpu_list;
use schedlab_core::{Direction, Metric, SchedCondition, SchedPolicy, Unit};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Time a load runs before the measurement starts.
pub const WARMUP: Duration = Duration::from_millis(300);
/// Iterations of the burn loop counted as one "loop".
pub const BURN_CHUNK: u64 = 100_000;
/// hackbench's group shape and message size (rt-tests defaults).
pub const HB_FDS: usize = 20;
pub const HB_DATASIZE: usize = 100;
/// Largest G or N accepted by the parser (the machine check comes later).
const MAX_COUNT: u64 = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadKind {
    None,
    Hackbench { groups: u32 },
    Burn { tasks: u32 },
}

/// One `--load` argument, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadSpec {
    /// As given (normalised), recorded in `Condition::Live { loads }`.
    pub text: String,
    pub kind: LoadKind,
    /// The load's own condition; `None`: the harness's (SCHED_OTHER).
    pub condition: Option<SchedCondition>,
}

impl LoadSpec {
    /// Processes the load forks.
    pub fn tasks(&self) -> u64 {
        match self.kind {
            LoadKind::None => 0,
            LoadKind::Hackbench { groups } => groups as u64 * 2 * HB_FDS as u64,
            LoadKind::Burn { tasks } => tasks as u64,
        }
    }

    /// Busy RT tasks (for the starvation guard): RT burners only; hackbench
    /// tasks block on their sockets.
    pub fn rt_busy(&self) -> u64 {
        match (self.kind, &self.condition) {
            (LoadKind::Burn { tasks }, Some(c)) if c.policy.is_realtime() => tasks as u64,
            _ => 0,
        }
    }

    fn metric_name(&self) -> &'static str {
        match self.kind {
            LoadKind::Hackbench { .. } => "hackbench.messages_per_s",
            LoadKind::Burn { .. } => "burn.loops_per_s",
            LoadKind::None => "none",
        }
    }
}

/// Parse one load spec (see the module docs for the syntax).
pub fn parse(input: &str) -> Result<LoadSpec, LiveError> {
    let bad = |detail: &str| LiveError::BadLoad { spec: input.to_string(), detail: detail.to_string() };
    let s = input.trim().to_ascii_lowercase();
    let (body, cond_text) = match s.split_once('@') {
        Some((b, c)) => (b.trim(), Some(c.trim())),
        None => (s.as_str(), None),
    };
    let count = |v: &str, what: &str| -> Result<u32, LiveError> {
        let n: u64 = v.trim().parse().map_err(|_| bad(&format!("{what} must be a whole number")))?;
        if n == 0 || n > MAX_COUNT {
            return Err(bad(&format!("{what} must be between 1 and {MAX_COUNT}")));
        }
        Ok(n as u32)
    };
    let kind = match body.split_once(':') {
        None if body == "none" => LoadKind::None,
        Some(("hackbench", g)) => LoadKind::Hackbench { groups: count(g, "the number of groups")? },
        Some(("burn", n)) => LoadKind::Burn { tasks: count(n, "the number of hogs")? },
        None if body == "hackbench" || body == "burn" => return Err(bad("the count is missing")),
        _ => return Err(bad("unknown load")),
    };
    if kind == LoadKind::None && cond_text.is_some() {
        return Err(bad("'none' takes no condition"));
    }
    let condition = match cond_text {
        None => None,
        Some(t) => Some(parse_condition(t).map_err(|d| bad(&d))?),
    };
    let text = match kind {
        LoadKind::None => "none".to_string(),
        LoadKind::Hackbench { groups } => format!("hackbench:{groups}"),
        LoadKind::Burn { tasks } => format!("burn:{tasks}"),
    };
    let text = match cond_text {
        Some(c) => format!("{text}@{c}"),
        None => text,
    };
    Ok(LoadSpec { text, kind, condition })
}

fn parse_condition(t: &str) -> Result<SchedCondition, String> {
    let mut c = SchedCondition::default();
    if t.is_empty() {
        return Err("the condition after @ is empty".into());
    }
    for part in t.split(',') {
        let (k, v) = part.split_once('=').ok_or_else(|| format!("'{part}' is not key=value"))?;
        let (k, v) = (k.trim(), v.trim());
        match k {
            "policy" => c.policy = v.parse::<SchedPolicy>().map_err(|e| e.to_string())?,
            "prio" => c.priority = Some(v.parse().map_err(|_| format!("prio '{v}' is not a number"))?),
            "nice" => c.nice = Some(v.parse().map_err(|_| format!("nice '{v}' is not a number"))?),
            "cpus" => c.cpus = Some(parse_cpu_list(v).map_err(|e| e.to_string())?),
            _ => return Err(format!("unknown condition key '{k}' (valid: policy, prio, nice, cpus)")),
        }
    }
    if c.policy == SchedPolicy::Deadline {
        return Err("deadline loads are not supported (they cannot fork)".into());
    }
    c.validate().map_err(|e| e.to_string())?;
    Ok(c)
}

fn read_num(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Tasks that may still be created: threads-max, pid_max and (not root)
/// RLIMIT_NPROC, minus what runs now and some headroom; with its source.
pub fn task_room() -> (u64, String) {
    const HEADROOM: u64 = 256;
    let running = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().nth(3)?.split_once('/')?.1.parse::<u64>().ok())
        .unwrap_or(0);
    let mut best = (u64::MAX, String::from("no limit"));
    let mut consider = |limit: u64, name: &str| {
        let room = limit.saturating_sub(running + HEADROOM);
        if room < best.0 {
            best = (room, name.to_string());
        }
    };
    if let Some(m) = read_num("/proc/sys/kernel/threads-max") {
        consider(m, "kernel.threads-max");
    }
    if let Some(m) = read_num("/proc/sys/kernel/pid_max") {
        consider(m, "kernel.pid_max");
    }
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: r is a valid, writable rlimit; geteuid cannot fail.
    let (ok, root) = unsafe { (libc::getrlimit(libc::RLIMIT_NPROC, &mut r) == 0, libc::geteuid() == 0) };
    if ok && !root && r.rlim_cur != libc::RLIM_INFINITY {
        consider(r.rlim_cur, "RLIMIT_NPROC (ulimit -u)");
    }
    best
}

/// Whether RT throttling is off (`sched_rt_runtime_us` = -1).
pub fn rt_throttling_off() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").map(|s| s.trim() == "-1").unwrap_or(false)
}

/// Refuse `busy` RT busy tasks that could fill every CPU while throttling
/// is off, unless forced. `cpus`: CPUs they may run on.
pub fn check_starvation(what: &str, busy: u64, cpus: usize, force: bool) -> Result<(), LiveError> {
    if !force && busy > 0 && busy >= cpus as u64 && rt_throttling_off() {
        return Err(LiveError::WouldStarve { what: what.to_string(), busy, cpus });
    }
    Ok(())
}

/// Everything that can be wrong with the loads, before anything starts:
/// each load's condition (privilege, CPUs), the task count against the
/// kernel's limits, memory, and RT starvation. `extra_rt_busy`: busy RT
/// threads of the benchmark itself (exectime).
pub fn check(loads: &[LoadSpec], extra_rt_busy: u64, force: bool) -> Result<(), LiveError> {
    let tasks: u64 = loads.iter().map(LoadSpec::tasks).sum();
    let what = loads.iter().map(|l| l.text.as_str()).collect::<Vec<_>>().join(" + ");
    let (room, name) = task_room();
    if tasks > room {
        return Err(LiveError::TooManyTasks {
            what: format!("load {what}"),
            tasks,
            limit: room,
            limit_name: name,
            fix: "use fewer hackbench groups or burn tasks",
        });
    }
    // A forked load task costs ~0.5 MiB (page tables, stack, COW copies); keep
    // well inside what is available.
    if let Some(avail_kb) = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find_map(|l| l.strip_prefix("MemAvailable:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
    }) {
        let fit = avail_kb / 2 / 512;
        if tasks > fit {
            return Err(LiveError::TooManyTasks {
                what: format!("load {what}"),
                tasks,
                limit: fit,
                limit_name: "half of MemAvailable at ~0.5 MiB per task".into(),
                fix: "use fewer hackbench groups or burn tasks",
            });
        }
    }
    let online = condition::online_cpus()?;
    let mut busy = extra_rt_busy;
    for l in loads {
        if let Some(c) = &l.condition {
            condition::preflight(c)?;
        }
        busy += l.rt_busy();
    }
    check_starvation(&format!("the RT tasks of this case (load {what})"), busy, online.len(), force)
}

/// Counters of the running load tasks, one cache line each, in a
/// MAP_SHARED page inherited by the forked tasks. Line 0 is the stop word.
struct SharedCounters {
    ptr: *mut AtomicU64,
    lines: usize,
}

const LINE: usize = 8; // u64 words per 64-byte line

impl SharedCounters {
    fn new(lines: usize) -> Result<SharedCounters, LiveError> {
        let len = (lines + 1) * 64;
        // SAFETY: an anonymous shared mapping of len bytes; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(LiveError::last_os("mmap of the load counters", "check available memory"));
        }
        Ok(SharedCounters { ptr: p.cast(), lines: lines + 1 })
    }

    fn stop_word(&self) -> &AtomicU64 {
        // SAFETY: line 0 lies inside the zero-filled mapping (a valid AtomicU64).
        unsafe { &*self.ptr }
    }

    fn slot(&self, i: usize) -> &AtomicU64 {
        assert!(i + 1 < self.lines);
        // SAFETY: in bounds (checked), zero-filled, aligned to 64 bytes.
        unsafe { &*self.ptr.add((i + 1) * LINE) }
    }
}

impl Drop for SharedCounters {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping; forked tasks have their own copy.
        unsafe { libc::munmap(self.ptr.cast(), self.lines * 64) };
    }
}

/// Loads running for one case. Create, use and drop on one thread (the
/// forking thread: PDEATHSIG is tied to it).
pub struct RunningLoads {
    kids: Children,
    counters: Option<SharedCounters>,
    /// (spec, first slot, slots)
    loads: Vec<(LoadSpec, usize, usize)>,
    begin: Option<(u64, Vec<u64>)>,
    rt_pids: Vec<i32>,
}

/// What the loads did during the measurement.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    /// Texts of the loads, for `Condition::Live { loads }`.
    pub texts: Vec<String>,
    pub metrics: Vec<Metric>,
    pub warnings: Vec<String>,
}

/// Start the loads (forks), apply their conditions, and let them warm up.
/// `deadline_ns`: monotonic time after which every load task exits by itself.
pub fn start(loads: &[LoadSpec], deadline_ns: u64, watchdog: Option<&Watchdog>) -> Result<RunningLoads, LiveError> {
    let slots: usize = loads
        .iter()
        .map(|l| match l.kind {
            LoadKind::Hackbench { groups } => groups as usize * HB_FDS,
            LoadKind::Burn { tasks } => tasks as usize,
            LoadKind::None => 0,
        })
        .sum();
    let mut rl =
        RunningLoads { kids: Children::new(), counters: None, loads: Vec::new(), begin: None, rt_pids: Vec::new() };
    if slots == 0 {
        rl.loads = loads.iter().map(|l| (l.clone(), 0, 0)).collect();
        return Ok(rl);
    }
    let counters = SharedCounters::new(slots)?;
    let mut next = 0usize;
    for l in loads {
        let first = next;
        let pids = match l.kind {
            LoadKind::None => Vec::new(),
            LoadKind::Burn { tasks } => {
                let mut pids = Vec::new();
                for i in 0..tasks as usize {
                    let stop = counters.stop_word();
                    let slot = counters.slot(next + i);
                    // SAFETY: the child only spins, does atomic ops on the shared
                    // mapping and reads the vDSO clock: async-signal-safe.
                    pids.push(unsafe { rl.kids.fork(|| burn_loop(stop, slot, deadline_ns)) }?);
                }
                next += tasks as usize;
                pids
            }
            LoadKind::Hackbench { groups } => {
                let mut pids = Vec::new();
                for _ in 0..groups {
                    pids.extend(fork_hackbench_group(&mut rl.kids, &counters, next, deadline_ns)?);
                    next += HB_FDS;
                }
                pids
            }
        };
        if let Some(c) = &l.condition {
            for &pid in &pids {
                condition::apply(pid, c, None)?;
                if c.policy.is_realtime() {
                    if let Some(w) = watchdog {
                        let left = Duration::from_nanos(deadline_ns.saturating_sub(now_ns()));
                        w.watch(pid, Instant::now() + left);
                    }
                    rl.rt_pids.push(pid);
                }
            }
        }
        rl.loads.push((l.clone(), first, next - first));
    }
    rl.counters = Some(counters);
    std::thread::sleep(WARMUP);
    if rl.kids.pids().iter().any(|&p| exited(p)) {
        return Err(LiveError::Measurement { bench: "load", detail: "a load task died during its warm-up".into() });
    }
    Ok(rl)
}

fn exited(pid: i32) -> bool {
    let mut status = 0;
    // SAFETY: non-blocking waitpid on our own child.
    unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) == pid }
}

impl RunningLoads {
    fn snapshot(&self) -> Vec<u64> {
        let Some(c) = &self.counters else { return Vec::new() };
        (0..c.lines - 1).map(|i| c.slot(i).load(Ordering::Relaxed)).collect()
    }

    /// Mark the start of the measurement (counters and clock).
    pub fn begin(&mut self) {
        self.begin = Some((now_ns(), self.snapshot()));
    }

    /// Stop, kill and reap every load task; throughput since `begin`.
    pub fn finish(mut self, watchdog: Option<&Watchdog>) -> LoadReport {
        let end_ns = now_ns();
        let end = self.snapshot();
        if let Some(c) = &self.counters {
            c.stop_word().store(1, Ordering::SeqCst);
        }
        if let Some(w) = watchdog {
            for &p in &self.rt_pids {
                w.unwatch(p);
            }
        }
        self.kids.kill_all();
        let mut report =
            LoadReport { texts: self.loads.iter().map(|(l, _, _)| l.text.clone()).collect(), ..Default::default() };
        let Some((t0, begin)) = &self.begin else { return report };
        let secs = (end_ns.saturating_sub(*t0)) as f64 / 1e9;
        let mut seen: Vec<&str> = Vec::new();
        for (l, first, n) in &self.loads {
            if l.kind == LoadKind::None || secs <= 0.0 {
                continue;
            }
            let done: u64 = (*first..first + n).map(|i| end[i].saturating_sub(begin[i])).sum();
            let base = l.metric_name();
            let k = seen.iter().filter(|s| **s == base).count();
            seen.push(base);
            let name = if k == 0 { format!("load.{base}") } else { format!("load{}.{base}", k + 1) };
            let rate = done as f64 / secs;
            if done == 0 {
                report.warnings.push(format!("load {} made no progress during the measurement (starved?)", l.text));
            }
            report.metrics.push(Metric::samples(&name, Unit::PerSecond, Direction::Neutral, vec![rate]));
        }
        report
    }
}

/// One CPU hog. Returns when stopped or past the deadline (bounded even at RT).
fn burn_loop(stop: &AtomicU64, slot: &AtomicU64, deadline_ns: u64) -> i32 {
    let mut x: u64 = 1;
    loop {
        for i in 0..BURN_CHUNK {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
        std::hint::black_box(x);
        slot.fetch_add(1, Ordering::Relaxed);
        if stop.load(Ordering::Relaxed) != 0 || now_ns() > deadline_ns {
            return 0;
        }
    }
}

/// Fork one hackbench group: 20 receivers (slot = receiver) and 20 senders
/// that send 100-byte messages round-robin until stopped.
fn fork_hackbench_group(
    kids: &mut Children,
    counters: &SharedCounters,
    first_slot: usize,
    deadline_ns: u64,
) -> Result<Vec<i32>, LiveError> {
    let mut pairs = Vec::with_capacity(HB_FDS);
    for _ in 0..HB_FDS {
        pairs.push(crate::hackbench::socketpair()?);
    }
    let out_fds: [i32; HB_FDS] = std::array::from_fn(|i| pairs[i].1.as_raw_fd());
    let mut pids = Vec::new();
    let stop = counters.stop_word();
    for (i, p) in pairs.iter().enumerate() {
        let fd = p.0.as_raw_fd();
        let slot = counters.slot(first_slot + i);
        // SAFETY: the child only reads its socket and bumps an atomic counter.
        pids.push(unsafe {
            kids.fork(|| {
                let mut buf = [0u8; HB_DATASIZE];
                loop {
                    if !crate::harness::read_exact(fd, &mut buf) {
                        return 0;
                    }
                    slot.fetch_add(1, Ordering::Relaxed);
                    if stop.load(Ordering::Relaxed) != 0 {
                        return 0;
                    }
                }
            })
        }?);
    }
    for _ in 0..HB_FDS {
        // SAFETY: the child only writes to sockets and reads the clock.
        pids.push(unsafe {
            kids.fork(|| {
                let buf = [0u8; HB_DATASIZE];
                loop {
                    for &fd in &out_fds {
                        if !crate::harness::write_exact(fd, &buf) {
                            return 0;
                        }
                    }
                    if stop.load(Ordering::Relaxed) != 0 || now_ns() > deadline_ns {
                        return 0;
                    }
                }
            })
        }?);
    }
    Ok(pids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_loads_with_conditions() {
        let l = parse("hackbench:10").unwrap();
        assert_eq!(l.kind, LoadKind::Hackbench { groups: 10 });
        assert_eq!(l.tasks(), 400);
        assert!(l.condition.is_none());
        let l = parse(" Burn:2@nice=10 ").unwrap();
        assert_eq!(l.kind, LoadKind::Burn { tasks: 2 });
        assert_eq!(l.condition.as_ref().unwrap().nice, Some(10));
        assert_eq!(l.text, "burn:2@nice=10");
        let l = parse("burn:3@policy=fifo,prio=5,cpus=0").unwrap();
        assert_eq!(l.rt_busy(), 3);
        assert_eq!(l.condition.unwrap().cpus, Some(vec![0]));
        assert_eq!(parse("none").unwrap().kind, LoadKind::None);
        assert_eq!(parse("hackbench:4@policy=batch").unwrap().condition.unwrap().policy, SchedPolicy::Batch);
    }

    #[test]
    fn rejects_bad_loads_with_the_syntax() {
        for bad in [
            "",
            "burn",
            "burn:0",
            "burn:x",
            "hackbench:-1",
            "spin:3",
            "burn:2@",
            "burn:2@nice",
            "burn:2@color=red",
            "burn:2@nice=30",
            "burn:2@policy=fifo,prio=100",
            "none@nice=1",
            "burn:200000",
            "burn:1@policy=deadline",
        ] {
            let e = parse(bad).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, LiveError::BadLoad { .. }), "{bad}: {msg}");
            assert!(msg.contains("burn:2@nice=10"), "{bad}: {msg}");
            assert!(!msg.contains('\n'));
        }
    }

    #[test]
    fn too_many_tasks_are_refused_before_starting() {
        let e = check(&[parse("hackbench:100000").unwrap()], 0, false).unwrap_err();
        assert!(matches!(e, LiveError::TooManyTasks { .. }), "{e}");
    }
}
