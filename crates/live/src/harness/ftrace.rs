//! ftrace around a measurement, for cyclic's `breaktrace` (cyclictest `-b`):
//! record scheduler, timer and interrupt events of the measured CPUs, stop
//! the moment a wake-up is later than a threshold, then read the trace back
//! and say where that wake-up's time went (late timer interrupt, a task that
//! kept the CPU, ...), as `rtla timerlat`'s auto-analysis does in-kernel.
//!
//! The session takes ftrace only when nobody else uses it (no tracer, no
//! event enabled), and puts back every setting it changed when dropped
//! (tracing_on, the CPU mask, the buffer size, the clock, filters; events
//! off). Those steps are a recovery record (`recovery.rs`) written before
//! the first change, so ftrace is also put back after a forced exit (a
//! second Ctrl-C), and by `schedlab check --restore` after a SIGKILL or a
//! crash; a busy ftrace that such a record explains says so.
//! Timestamps use the `mono` trace clock, so they compare directly with
//! CLOCK_MONOTONIC times taken in user space (to the microsecond the trace
//! prints).

use crate::error::LiveError;
use crate::harness::recovery::{self, Record, Step};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// An event to record: `subsystem:name`, an optional filter, and whether
/// the session fails without it.
pub(crate) struct EventSpec {
    pub name: &'static str,
    pub filter: Option<&'static str>,
    pub required: bool,
}

const fn ev(name: &'static str, required: bool) -> EventSpec {
    EventSpec { name, filter: None, required }
}

/// breaktrace: everything that can explain one stall, unfiltered.
pub(crate) const BREAKTRACE_EVENTS: &[EventSpec] = &[
    ev("sched:sched_switch", true),
    ev("sched:sched_wakeup", true),
    ev("timer:hrtimer_expire_entry", true),
    // irq_vectors is x86's.
    ev("irq_vectors:local_timer_entry", false),
    ev("irq_vectors:reschedule_entry", false),
    ev("irq_vectors:call_function_single_entry", false),
    ev("irq:irq_handler_entry", false),
    ev("irq:softirq_entry", false),
];

/// cyclic's split: the measuring threads' own timer arming and switch-ins,
/// and every timer interrupt of the traced CPUs (a few events per period).
pub(crate) const SPLIT_EVENTS: &[EventSpec] = &[
    EventSpec { name: "timer:hrtimer_start", filter: Some("COMM ~ \"schedlab-cyc*\""), required: true },
    ev("timer:hrtimer_expire_entry", true),
    ev("irq_vectors:local_timer_entry", false),
    EventSpec {
        name: "sched:sched_switch",
        filter: Some("next_comm ~ \"schedlab-cyc*\" || prev_comm ~ \"schedlab-cyc*\""),
        required: true,
    },
];

/// `--observe=trace` (`observe/trace.rs`): the scheduler's view of the
/// measured tasks and the loads, filtered by pid (`set_event_pid`, following
/// forks), over the whole case. sched_process_fork ties a short-lived task
/// to the one that started it (its role).
pub(crate) const OBSERVE_EVENTS: &[EventSpec] = &[
    ev("sched:sched_switch", true),
    ev("sched:sched_wakeup", true),
    ev("sched:sched_wakeup_new", false),
    ev("sched:sched_migrate_task", false),
    ev("sched:sched_stat_runtime", false),
    ev("sched:sched_process_fork", false),
];

/// Per-CPU ring buffer while tracing, KiB: a second or more of a busy CPU's
/// events (only the last period is needed). The kernel allocates it for
/// every CPU, so on big machines it shrinks to keep the total near 128 MiB.
pub(crate) fn buffer_kb() -> u64 {
    // SAFETY: sysconf with a valid name.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as u64;
    (128 * 1024 / cpus).clamp(2048, 16384)
}

/// The settings a session changes, as they were.
struct Saved {
    tracing_on: String,
    cpumask: String,
    buffer_size_kb: String,
    clock: String,
    /// (filter file, its text) of every event whose filter was set.
    filters: Vec<(PathBuf, String)>,
    /// (file, its text) of the settings only a pid-filtered session
    /// changes (`set_event_pid`, `options/event-fork`, `options/overwrite`).
    by_pid: Vec<(&'static str, String)>,
}

pub(crate) struct Tracing {
    dir: PathBuf,
    saved: Saved,
    /// `tracing_on`, open for the one write that stops the trace.
    on: File,
    /// The restore steps, written down; dropping it restores them.
    record: Record,
}

/// What the recovery record names the settings of a session by.
const RECORD_WHAT: &str = "ftrace";

/// The steps that give ftrace back as `saved` had it, in order: recording
/// off and events off first, then filters, mask, buffer and clock (a resize
/// and a clock change both clear the buffer: ours is read by then), and
/// tracing_on as it was last.
fn restore_steps(dir: &Path, s: &Saved) -> Vec<Step> {
    let w = |name: &str, v: &str| Step::write(dir.join(name), v);
    // No event was enabled before (check() requires it).
    let mut steps = vec![w("tracing_on", "0"), w("set_event", "")];
    for (name, old) in &s.by_pid {
        // An empty set_event_pid is restored by the truncating open alone.
        steps.push(w(name, old.trim()));
    }
    for (path, old) in &s.filters {
        // "none" reads back for no filter; writing 0 clears one.
        let text = if old.trim() == "none" { "0" } else { old.trim() };
        steps.push(Step::write(path, text));
    }
    steps.extend([
        w("tracing_cpumask", &s.cpumask),
        w("buffer_size_kb", &s.buffer_size_kb),
        w("trace_clock", &s.clock),
        w("tracing_on", &s.tracing_on),
    ]);
    steps
}

fn trace_error(detail: String, fix: &'static str) -> LiveError {
    LiveError::Trace { detail, fix }
}

fn read(dir: &Path, name: &str) -> Result<String, LiveError> {
    std::fs::read_to_string(dir.join(name))
        .map_err(|e| trace_error(format!("cannot read {}: {e}", dir.join(name).display()), "run as root"))
}

fn write(dir: &Path, name: &str, value: &str) -> Result<(), LiveError> {
    std::fs::write(dir.join(name), value)
        .map_err(|e| trace_error(format!("cannot write {value:?} to {}: {e}", dir.join(name).display()), "run as root"))
}

/// The selected entry of a `[a] b c` list file such as trace_clock.
fn selected(list: &str) -> Option<&str> {
    let start = list.find('[')? + 1;
    Some(&list[start..start + list[start..].find(']')?])
}

/// The size to restore from buffer_size_kb: an unused buffer reads
/// "7 (expanded: 1408)", and 1408 is what the next user would get.
fn buffer_size(text: &str) -> String {
    let t = text.trim();
    t.split_once("(expanded:")
        .map(|(_, e)| e.trim_end_matches(')').trim())
        .unwrap_or_else(|| t.split_whitespace().next().unwrap_or("1408"))
        .to_string()
}

/// tracing_cpumask for `cpus`: hex in 32-bit groups, most significant first.
pub(crate) fn cpumask(cpus: &[usize]) -> String {
    let words = cpus.iter().max().map_or(1, |&c| c / 32 + 1);
    let mut w = vec![0u32; words];
    for &c in cpus {
        w[c / 32] |= 1 << (c % 32);
    }
    let mut out: Vec<String> = Vec::with_capacity(words);
    for (i, v) in w.iter().enumerate().rev() {
        out.push(if i == words - 1 { format!("{v:x}") } else { format!("{v:08x}") });
    }
    out.join(",")
}

impl Tracing {
    /// Where tracefs is, if it is free for a session (checked before a run
    /// starts, and again when the session takes it).
    pub(crate) fn check() -> Result<PathBuf, LiveError> {
        let dir = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
            .iter()
            .map(PathBuf::from)
            .find(|d| d.join("trace").exists())
            .ok_or_else(|| {
                // Mounted but mode 700: what a user other than root sees.
                let denied = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"].iter().any(|d| {
                    std::fs::metadata(Path::new(d).join("trace"))
                        .is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied)
                });
                if denied {
                    return trace_error("tracefs is not readable by this user".into(), "run as root");
                }
                trace_error(
                    "tracefs is not mounted".into(),
                    "mount it (mount -t tracefs nodev /sys/kernel/tracing) or drop breaktrace=/split=",
                )
            })?;
        let tracer = read(&dir, "current_tracer")?;
        let events = read(&dir, "set_event")?;
        if tracer.trim() != "nop" || !events.trim().is_empty() {
            let busy =
                format!("ftrace is in use (tracer {}, {} event(s) enabled)", tracer.trim(), events.lines().count());
            let left: Vec<String> = recovery::scan()
                .into_iter()
                .filter(|f| f.what == RECORD_WHAT && f.state == recovery::State::Stale)
                .map(|f| format!("pid {}", f.owner_pid))
                .collect();
            if !left.is_empty() {
                return Err(trace_error(
                    format!("{busy}: a schedlab run that did not end cleanly ({}) left it so", left.join(", ")),
                    "run `schedlab check --restore` to put ftrace back, then rerun",
                ));
            }
            return Err(trace_error(busy, "stop the other trace (trace-cmd reset) or drop breaktrace=/split="));
        }
        if std::fs::OpenOptions::new().write(true).open(dir.join("tracing_on")).is_err() {
            return Err(trace_error("tracing_on is not writable".into(), "run as root"));
        }
        Ok(dir)
    }

    /// Take ftrace for `cpus`: `events` on, mono clock, a fresh buffer.
    pub(crate) fn start(cpus: &[usize], events: &[EventSpec]) -> Result<Tracing, LiveError> {
        let mut t = Self::take(&[])?;
        t.configure(cpus, events)?;
        Ok(t)
    }

    /// Take ftrace for `root` and every task it starts from now on, on
    /// every CPU: `events` on, recorded only while such a task is involved
    /// (`set_event_pid` with `event-fork`), mono clock, a fresh buffer that
    /// stops taking events when full (`overwrite` off: the start of the
    /// case is kept, the per-CPU `dropped events` say it filled). Every
    /// setting goes back as [`Tracing::start`]'s do, these three included.
    pub(crate) fn start_for_tasks(root: i32, events: &[EventSpec]) -> Result<Tracing, LiveError> {
        let mut t = Self::take(&["set_event_pid", "options/event-fork", "options/overwrite"])?;
        let d = t.dir.clone();
        write(&d, "tracing_on", "0")?;
        write(&d, "options/overwrite", "0")?;
        write(&d, "options/event-fork", "1")?;
        write(&d, "set_event_pid", &root.to_string())?;
        // SAFETY: sysconf with a valid name.
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as usize;
        t.configure(&(0..cpus).collect::<Vec<_>>(), events)?;
        Ok(t)
    }

    /// Check ftrace is free, save what the session changes (`extra` files
    /// too) and write the recovery record, before anything is changed.
    fn take(extra: &[&'static str]) -> Result<Tracing, LiveError> {
        let dir = Self::check()?;
        let mut by_pid = Vec::new();
        for &name in extra {
            by_pid.push((name, read(&dir, name)?));
        }
        let clock = read(&dir, "trace_clock")?;
        let saved = Saved {
            tracing_on: read(&dir, "tracing_on")?.trim().to_string(),
            cpumask: read(&dir, "tracing_cpumask")?.trim().to_string(),
            buffer_size_kb: buffer_size(&read(&dir, "buffer_size_kb")?),
            clock: selected(&clock).unwrap_or("local").to_string(),
            filters: Vec::new(),
            by_pid,
        };
        let on = OpenOptions::new()
            .write(true)
            .open(dir.join("tracing_on"))
            .map_err(|e| trace_error(format!("cannot open tracing_on: {e}"), "run as root"))?;
        // Written down before anything changes; from here on, Drop puts
        // everything back, whatever fails next.
        let record = Record::create(RECORD_WHAT, restore_steps(&dir, &saved))?;
        Ok(Tracing { dir, saved, on, record })
    }

    /// The tracefs directory of the session.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn configure(&mut self, cpus: &[usize], events: &[EventSpec]) -> Result<(), LiveError> {
        let d = self.dir.clone();
        write(&d, "tracing_on", "0")?;
        write(&d, "trace_clock", "mono")?;
        write(&d, "buffer_size_kb", &buffer_kb().to_string())?;
        write(&d, "tracing_cpumask", &cpumask(cpus))?;
        for e in events {
            if let Some(f) = e.filter {
                let path = d.join("events").join(e.name.replacen(':', "/", 1)).join("filter");
                let old = std::fs::read_to_string(&path).unwrap_or_default();
                self.saved.filters.push((path.clone(), old));
                self.record.set_steps(restore_steps(&d, &self.saved))?;
                if let Err(err) = std::fs::write(&path, f) {
                    if e.required {
                        return Err(trace_error(
                            format!("the kernel refused filter {f:?} on {} ({err})", e.name),
                            "drop breaktrace=/split=",
                        ));
                    }
                }
            }
            match self.enable(e.name) {
                Err(err) if e.required => return Err(err),
                _ => {}
            }
        }
        write(&d, "trace", "")?;
        write(&d, "tracing_on", "1")
    }

    fn enable(&self, event: &str) -> Result<(), LiveError> {
        let mut f = OpenOptions::new()
            .append(true)
            .open(self.dir.join("set_event"))
            .map_err(|e| trace_error(format!("cannot open set_event: {e}"), "run as root"))?;
        f.write_all(format!("{event}\n").as_bytes())
            .map_err(|e| trace_error(format!("the kernel has no event {event} ({e})"), "drop breaktrace=/split="))
    }

    /// Stop recording now: one write(2), safe from any measuring thread.
    pub(crate) fn stop(&self) {
        // SAFETY: writing one byte from a static buffer to our own fd.
        unsafe { libc::write(self.on.as_raw_fd(), b"0".as_ptr().cast(), 1) };
    }

    /// The recorded trace (call after `stop`).
    pub(crate) fn text(&self) -> Result<String, LiveError> {
        read(&self.dir, "trace")
    }
}

// Dropping a `Tracing` drops its record, which applies `restore_steps`.

/// breaktrace: the first wake-up later than the threshold, on any thread,
/// stops the trace and is kept for [`explain`].
pub(crate) struct BreakTrace {
    tracing: Tracing,
    pub(crate) threshold_ns: u64,
    fired: AtomicBool,
    stall: Mutex<Option<Stall>>,
}

impl BreakTrace {
    pub(crate) fn new(tracing: Tracing, threshold_ns: u64) -> BreakTrace {
        BreakTrace { tracing, threshold_ns, fired: AtomicBool::new(false), stall: Mutex::new(None) }
    }

    #[cold]
    pub(crate) fn fire(&self, tid: i32, intended_ns: u64, woke_ns: u64) {
        if self.fired.load(Ordering::Relaxed) || self.fired.swap(true, Ordering::SeqCst) {
            return;
        }
        self.tracing.stop();
        // SAFETY: no arguments; the CPU this thread woke on.
        let cpu = unsafe { libc::sched_getcpu() }.max(0) as usize;
        *self.stall.lock().unwrap_or_else(|e| e.into_inner()) = Some(Stall { tid, cpu, intended_ns, woke_ns });
    }

    /// The explanation of the stall, if there was one. The trace around it
    /// is kept in `dir` (the working directory, as `rtla timerlat -a` does)
    /// and the explanation names the file.
    pub(crate) fn report(&self, bench: &str, threshold_us: u64, dir: &Path) -> Option<String> {
        let s = (*self.stall.lock().unwrap_or_else(|e| e.into_inner()))?;
        let (why, kept) = match self.tracing.text() {
            Ok(t) => {
                let path = dir.join(format!("schedlab-breaktrace-{bench}-{}.txt", crate::harness::unix_ms()));
                let kept = match std::fs::write(&path, excerpt(&t, &s)) {
                    Ok(()) => format!("; the trace around it is in {}", path.display()),
                    Err(e) => format!("; the trace could not be kept in {} ({e})", dir.display()),
                };
                (explain(&t, &s), kept)
            }
            Err(e) => (e.to_string(), String::new()),
        };
        Some(format!(
            "breaktrace: a wake-up {:.1} us late (over {threshold_us} us) on CPU {}: {why}{kept}",
            (s.woke_ns - s.intended_ns) as f64 / 1e3,
            s.cpu
        ))
    }
}

/// The trace's header and its events from 10 ms before the stalled
/// period's intended time to its wake-up, every traced CPU, after a line
/// that names the stall in the trace's own clock.
pub(crate) fn excerpt(trace: &str, s: &Stall) -> String {
    let secs = |ns: u64| format!("{}.{:06}", ns / 1_000_000_000, ns % 1_000_000_000 / 1000);
    let mut out = format!(
        "# schedlab breaktrace: tid {} on CPU {}: intended {}, back in user space {} (trace clock mono)\n",
        s.tid,
        s.cpu,
        secs(s.intended_ns),
        secs(s.woke_ns)
    );
    let from = s.intended_ns.saturating_sub(10_000_000);
    for line in trace.lines() {
        let keep = match Event::parse(line) {
            Some(e) => e.ts_ns >= from && e.ts_ns <= s.woke_ns + 1_000,
            None => line.starts_with('#'),
        };
        if keep {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Each traced timer wake-up of a sleeping thread, split at the timer
/// interrupt: (thread, expiry, interrupt entry − expiry, switch-in −
/// expiry) in ns. The expiry is the one the thread armed
/// (`hrtimer_start`); the interrupt is the last `local_timer_entry` on the
/// CPU before the timer ran (its expiry entry where that event is absent).
/// The switch-in is None when the trace lacks it: on the 2-vCPU dev VM,
/// switches out of CPU 1's idle task are not traced at all. Trace times are
/// printed in microseconds, so each part is exact to 1 us; an interrupt that
/// came before the expiry gives a negative first part.
pub(crate) fn split_wakeups(trace: &str) -> Vec<(i32, u64, i64, Option<i64>)> {
    use std::collections::HashMap;
    let mut armed: HashMap<&str, (i32, u64)> = HashMap::new();
    let mut irq_at: HashMap<usize, u64> = HashMap::new();
    // Per thread: (expiry, interrupt) of a wake-up still waiting for its switch-in.
    let mut pending: HashMap<i32, (u64, u64)> = HashMap::new();
    let mut out = Vec::new();
    let mut emit = |pid: i32, exp: u64, irq: u64, switch: Option<u64>| {
        out.push((pid, exp, irq as i64 - exp as i64, switch.map(|s| s as i64 - exp as i64)));
    };
    for e in trace.lines().filter_map(Event::parse) {
        match e.name {
            "hrtimer_start" if e.field("function") == Some("hrtimer_wakeup") => {
                // Arming again means the thread ran: an untraced switch-in.
                if let Some((exp, irq)) = pending.remove(&e.pid) {
                    emit(e.pid, exp, irq, None);
                }
                if let (Some(t), Some(x)) = (e.field("hrtimer"), e.field("expires").and_then(|x| x.parse().ok())) {
                    armed.insert(t, (e.pid, x));
                }
            }
            "local_timer_entry" => {
                irq_at.insert(e.cpu, e.ts_ns);
            }
            "hrtimer_expire_entry" => {
                if let Some((pid, exp)) = e.field("hrtimer").and_then(|t| armed.remove(t)) {
                    // The interrupt that ran this timer: the CPU's last one, if recent.
                    let irq = irq_at.get(&e.cpu).copied().filter(|&i| i <= e.ts_ns && e.ts_ns - i < 1_000_000);
                    pending.insert(pid, (exp, irq.unwrap_or(e.ts_ns)));
                }
            }
            "sched_switch" => {
                // Leaving the CPU with a wake-up pending means it ran after an
                // untraced switch-in: a later switch-in is not this wake-up's.
                for (key, switch) in [("prev_pid", None), ("next_pid", Some(e.ts_ns))] {
                    if let Some(pid) = e.field(key).and_then(|p| p.parse::<i32>().ok()) {
                        if let Some((exp, irq)) = pending.remove(&pid) {
                            emit(pid, exp, irq, switch);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    let mut rest: Vec<(i32, (u64, u64))> = pending.into_iter().collect();
    rest.sort_unstable();
    for (pid, (exp, irq)) in rest {
        emit(pid, exp, irq, None);
    }
    out
}

/// One line of the `trace` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Event<'a> {
    pub comm: &'a str,
    pub pid: i32,
    pub cpu: usize,
    pub ts_ns: u64,
    pub name: &'a str,
    pub fields: &'a str,
}

impl<'a> Event<'a> {
    /// `comm-pid [cpu] flags secs.usecs: name: fields` (flags optional).
    pub(crate) fn parse(line: &'a str) -> Option<Event<'a>> {
        if line.trim_start().starts_with('#') {
            return None;
        }
        // The CPU is the first "[digits]" (a comm may contain '-' and spaces).
        let mut from = 0;
        let (open, close) = loop {
            let open = from + line[from..].find('[')?;
            let close = open + line[open..].find(']')?;
            if close > open + 1 && line[open + 1..close].bytes().all(|b| b.is_ascii_digit()) {
                break (open, close);
            }
            from = open + 1;
        };
        let (comm, pid) = line[..open].trim().rsplit_once('-')?;
        let rest = &line[close + 1..];
        // Tokens with their offsets; the flags column (e.g. "d.h1.") is
        // optional, so the timestamp is the first "secs.frac:" token.
        let tokens: Vec<(usize, &str)> = rest
            .split(' ')
            .scan(0, |at, t| {
                let start = *at;
                *at += t.len() + 1;
                Some((start, t))
            })
            .filter(|(_, t)| !t.is_empty())
            .collect();
        let ti = tokens.iter().position(|(_, t)| {
            t.strip_suffix(':').and_then(|v| v.split_once('.')).is_some_and(|(a, b)| {
                !a.is_empty()
                    && a.bytes().all(|c| c.is_ascii_digit())
                    && !b.is_empty()
                    && b.bytes().all(|c| c.is_ascii_digit())
            })
        })?;
        let (secs, frac) = tokens[ti].1.strip_suffix(':')?.split_once('.')?;
        let frac: String = frac.chars().chain(std::iter::repeat('0')).take(9).collect();
        let ts_ns = secs.parse::<u64>().ok()? * 1_000_000_000 + frac.parse::<u64>().ok()?;
        let (name_at, name) = *tokens.get(ti + 1)?;
        let name = name.strip_suffix(':')?;
        let fields = rest.get(name_at + name.len() + 1..).unwrap_or("");
        Some(Event {
            comm: comm.trim(),
            pid: pid.parse().ok()?,
            cpu: line[open + 1..close].parse().ok()?,
            ts_ns,
            name: name.trim(),
            fields: fields.trim(),
        })
    }

    /// The value of `key=` in the fields.
    pub(crate) fn field(&self, key: &str) -> Option<&'a str> {
        let fields = self.fields;
        let mut at = 0;
        while let Some(i) = fields[at..].find(key) {
            let start = at + i;
            let boundary = start == 0 || fields.as_bytes()[start - 1] == b' ';
            let value = &fields[start + key.len()..];
            if boundary && value.starts_with('=') {
                return Some(value[1..].split_whitespace().next().unwrap_or(""));
            }
            at = start + key.len();
        }
        None
    }
}

/// A wake-up later than the threshold: who, where, and its times
/// (CLOCK_MONOTONIC ns, as the thread saw them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stall {
    pub tid: i32,
    pub cpu: usize,
    pub intended_ns: u64,
    pub woke_ns: u64,
}

fn us(ns: i64) -> String {
    if ns.abs() >= 10_000_000 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else {
        format!("{:.0} us", ns as f64 / 1e3)
    }
}

/// Where the stalled wake-up's time went. The wakeup may be recorded on any
/// CPU (a timer on the thread's own, or another task waking it from its
/// CPU); what ran before and the switch-in are read on the CPU the thread
/// woke on.
pub(crate) fn explain(trace: &str, s: &Stall) -> String {
    let ev: Vec<Event> = trace.lines().filter_map(Event::parse).collect();
    // The trace prints microseconds: allow one either side.
    let slack = 1_000;
    let since = |t: u64| t as i64 - s.intended_ns as i64;
    let in_window = |e: &Event| e.ts_ns + slack >= s.intended_ns && e.ts_ns <= s.woke_ns + slack;
    let pid = s.tid.to_string();
    let Some(wi) = ev.iter().rposition(|e| e.name == "sched_wakeup" && e.field("pid") == Some(&pid) && in_window(e))
    else {
        return "the trace holds no wakeup of the thread between its intended time and its wake-up (events lost, or the buffer too small)".to_string();
    };
    let wake = &ev[wi];
    // A sleep or signal timer that expired on the waking CPU, with no switch
    // between it and the wakeup, issued it (a tick expiring nearby did not).
    let timer = ev[..=wi]
        .iter()
        .rposition(|e| e.cpu == wake.cpu && (e.name == "hrtimer_expire_entry" || e.name == "sched_switch"))
        .filter(|&ti| {
            let t = &ev[ti];
            t.name == "hrtimer_expire_entry"
                && t.ts_ns + slack >= s.intended_ns
                && matches!(t.field("function"), Some("hrtimer_wakeup" | "posix_timer_fn" | "it_real_fn"))
        });
    // A wakeup recorded by the idle task came through the wake list: another
    // CPU queued it and sent an IPI.
    let by_ipi = wake.pid == 0;
    let irq_at = timer.map(|ti| {
        ev[..=ti]
            .iter()
            .rev()
            .find(|e| e.cpu == wake.cpu && e.name == "local_timer_entry" && e.ts_ns + slack >= s.intended_ns)
            .map_or(ev[ti].ts_ns, |e| e.ts_ns)
    });
    let here = |e: &&Event| e.cpu == s.cpu;
    // Who had the thread's CPU at the intended time: the last switch before it.
    let running = ev
        .iter()
        .filter(here)
        .take_while(|e| e.ts_ns <= s.intended_ns)
        .filter(|e| e.name == "sched_switch")
        .last()
        .and_then(|e| Some(format!("{}-{}", e.field("next_comm")?, e.field("next_pid")?)));
    let switch = ev[wi..].iter().filter(here).find(|e| e.name == "sched_switch" && e.field("next_pid") == Some(&pid));
    // Other interrupts and switches on that CPU until the wakeup.
    let busy: Vec<String> = ev
        .iter()
        .filter(here)
        .filter(|e| e.ts_ns + slack >= s.intended_ns && e.ts_ns <= irq_at.unwrap_or(wake.ts_ns))
        .filter_map(|e| match e.name {
            "irq_handler_entry" => Some(format!("irq {}", e.field("name").unwrap_or("?"))),
            "softirq_entry" => Some(format!("softirq {}", e.field("action").unwrap_or("?"))),
            "sched_switch" => Some(format!("switch to {}", e.field("next_comm").unwrap_or("?"))),
            _ => None,
        })
        .collect();
    let idle = running.as_deref().is_some_and(|r| r.starts_with("swapper"));
    let mut steps = Vec::new();
    if let Some(r) = &running {
        steps.push(format!("{r} had CPU {} at the intended time", s.cpu));
    }
    if !busy.is_empty() {
        let more = if busy.len() > 4 { format!(" and {} more", busy.len() - 4) } else { String::new() };
        steps.push(format!("then {}{more}", busy[..busy.len().min(4)].join(", ")));
    }
    if let Some(i) = irq_at {
        steps.push(format!("timer interrupt at +{}", us(since(i))));
    }
    let waker = match (timer.is_some(), by_ipi) {
        (true, _) => String::new(),
        (false, true) => format!(" by an IPI from another CPU, on CPU {}", wake.cpu),
        (false, false) => format!(" by {}-{} on CPU {}", wake.comm, wake.pid, wake.cpu),
    };
    steps.push(format!("wakeup at +{}{waker}", us(since(wake.ts_ns))));
    match switch {
        Some(sw) => {
            steps.push(format!("switched in at +{} from {}", us(since(sw.ts_ns)), sw.field("prev_comm").unwrap_or("?")))
        }
        None => steps.push("the switch-in is not in the trace (recording had stopped)".to_string()),
    }
    steps.push(format!("back in user space at +{}", us(since(s.woke_ns))));
    // The largest of the three parts names the cause.
    let before_wake = irq_at.map_or_else(|| since(wake.ts_ns), since);
    let held = switch.map_or(0, |sw| sw.ts_ns as i64 - wake.ts_ns as i64);
    let to_user = switch.map_or(0, |sw| s.woke_ns as i64 - sw.ts_ns as i64);
    let verdict = if before_wake >= held && before_wake >= to_user {
        match (timer.is_some(), idle) {
            (true, true) => "the timer interrupt reached an idle CPU late (in a VM: the host delivered it late; on metal: a deep C-state or firmware such as an SMI)".to_string(),
            (true, false) => format!(
                "the timer interrupt came late while {} ran (interrupts disabled in the kernel, or in a VM the host running something else)",
                running.as_deref().unwrap_or("another task")
            ),
            (false, _) if by_ipi => "the wakeup itself came late: another CPU queued it and its IPI arrived only then (the waker was delayed, or woke others first)".to_string(),
            (false, _) => format!(
                "the wakeup itself came late: {}-{} issued it only then (it was delayed itself, or woke the thread in turn after others)",
                wake.comm, wake.pid
            ),
        }
    } else if held >= to_user {
        format!(
            "{} kept the CPU after the wakeup (a non-preemptible kernel path, or a task of higher priority)",
            switch.and_then(|sw| sw.field("prev_comm")).unwrap_or("another task")
        )
    } else {
        "the time went between the switch-in and user space (interrupts, or a page fault on return)".to_string()
    };
    format!("{verdict}: {}", steps.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE_LATE: &str = "\
# tracer: nop
          <idle>-0       [000] d..2. 17464.872040: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=schedlab-cyclic next_pid=28498 next_prio=4
 schedlab-cyclic-28498   [000] d..2. 17464.872051: sched_switch: prev_comm=schedlab-cyclic prev_pid=28498 prev_prio=4 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
          <idle>-0       [001] d.h1. 17464.874000: local_timer_entry: vector=236
          <idle>-0       [000] d.h1. 17464.876203: local_timer_entry: vector=236
          <idle>-0       [000] d.h1. 17464.876205: hrtimer_expire_entry: hrtimer=00000000b2b2e195 function=hrtimer_wakeup now=17464876203683
          <idle>-0       [000] d.h2. 17464.876213: sched_wakeup: comm=schedlab-cyclic pid=28498 prio=4 target_cpu=000
          <idle>-0       [000] d..2. 17464.876241: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=schedlab-cyclic next_pid=28498 next_prio=4
";

    #[test]
    fn trace_lines_parse_with_and_without_flags() {
        let e = Event::parse(
            " schedlab-cyclic-28498   [000] d..2. 17464.872051: sched_switch: prev_comm=schedlab-cyclic prev_pid=28498 prev_prio=4",
        )
        .unwrap();
        assert_eq!(
            (e.comm, e.pid, e.cpu, e.ts_ns, e.name),
            ("schedlab-cyclic", 28498, 0, 17_464_872_051_000, "sched_switch")
        );
        assert_eq!(e.field("prev_pid"), Some("28498"));
        assert_eq!(e.field("pid"), None, "prev_pid is not pid");
        let e = Event::parse("  kworker/u4:1-77 [012] 5.000001: sched_wakeup: comm=a b pid=9").unwrap();
        assert_eq!((e.comm, e.pid, e.cpu, e.ts_ns), ("kworker/u4:1", 77, 12, 5_000_001_000));
        assert_eq!(e.field("pid"), Some("9"));
        assert_eq!(Event::parse("# tracer: nop"), None);
        assert_eq!(Event::parse("garbage"), None);
    }

    #[test]
    fn a_late_timer_interrupt_on_an_idle_cpu_is_named() {
        // Intended at 872.100 ms; the interrupt came at 876.203 ms.
        let s = Stall { tid: 28498, cpu: 0, intended_ns: 17_464_873_000_000, woke_ns: 17_464_876_250_000 };
        let text = explain(IDLE_LATE, &s);
        assert!(text.starts_with("the timer interrupt reached an idle CPU late"), "{text}");
        assert!(text.contains("swapper/0-0 had CPU 0 at the intended time"), "{text}");
        assert!(text.contains("timer interrupt at +3203 us"), "{text}");
        assert!(text.contains("switched in at +3241 us from swapper/0"), "{text}");
        assert!(text.contains("back in user space at +3250 us"), "{text}");
        // The other CPU's interrupt is not this one's.
        assert!(!text.contains("+1000 us"), "{text}");
    }

    #[test]
    fn a_task_that_keeps_the_cpu_after_the_wakeup_is_named() {
        let trace = "\
 cc1-500 [000] d..2. 10.000000: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=cc1 next_pid=500 next_prio=120
 cc1-500 [000] d.h1. 10.001002: local_timer_entry: vector=236
 cc1-500 [000] d.h1. 10.001003: hrtimer_expire_entry: hrtimer=1 function=hrtimer_wakeup now=10001003000
 cc1-500 [000] d.h2. 10.001004: sched_wakeup: comm=schedlab-cyclic pid=42 prio=4 target_cpu=000
 cc1-500 [000] d..2. 10.004500: sched_switch: prev_comm=cc1 prev_pid=500 prev_prio=120 prev_state=R ==> next_comm=schedlab-cyclic next_pid=42 next_prio=4
";
        let s = Stall { tid: 42, cpu: 0, intended_ns: 10_001_000_000, woke_ns: 10_004_510_000 };
        let text = explain(trace, &s);
        assert!(text.starts_with("cc1 kept the CPU after the wakeup"), "{text}");
        assert!(text.contains("cc1-500 had CPU 0"), "{text}");
        // Without the wakeup in the trace there is nothing to explain.
        let s = Stall { tid: 43, ..s };
        assert!(explain(trace, &s).contains("holds no wakeup"));
    }

    #[test]
    fn a_wakeup_from_another_cpu_names_its_waker() {
        // The waker on CPU 1 broadcast at 20.000100; the waiter on CPU 0 was
        // woken only at 20.002000, by another waiter releasing the mutex.
        let trace = "\
 <idle>-0 [000] d..2. 20.000000: sched_switch: prev_comm=w1 prev_pid=7 prev_prio=49 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
 waker-5 [001] d..2. 20.000110: sched_wakeup: comm=w2 pid=8 prio=49 target_cpu=001
 w2-8 [001] d..2. 20.002000: sched_wakeup: comm=w1 pid=7 prio=49 target_cpu=000
 <idle>-0 [000] d..2. 20.002010: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=w1 next_pid=7 next_prio=49
";
        let s = Stall { tid: 7, cpu: 0, intended_ns: 20_000_100_000, woke_ns: 20_002_020_000 };
        let text = explain(trace, &s);
        assert!(text.starts_with("the wakeup itself came late: w2-8 issued it"), "{text}");
        assert!(text.contains("wakeup at +1900 us by w2-8 on CPU 1"), "{text}");
        assert!(!text.contains("timer interrupt"), "{text}");
    }

    #[test]
    fn a_tick_just_before_a_cross_cpu_wakeup_is_not_its_cause() {
        let trace = "\
 waker-5 [001] d.h1. 20.000150: local_timer_entry: vector=236
 waker-5 [001] d.h1. 20.000151: hrtimer_expire_entry: hrtimer=1 function=tick_nohz_handler now=20000151000
 waker-5 [001] d..2. 20.000160: sched_wakeup: comm=w1 pid=7 prio=49 target_cpu=000
 <idle>-0 [000] d..2. 20.000170: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=w1 next_pid=7 next_prio=49
";
        let s = Stall { tid: 7, cpu: 0, intended_ns: 20_000_100_000, woke_ns: 20_000_180_000 };
        let text = explain(trace, &s);
        assert!(text.contains("wakeup at +60 us by waker-5 on CPU 1"), "{text}");
        assert!(!text.contains("timer interrupt"), "{text}");
    }

    #[test]
    fn a_wakeup_through_the_wake_list_is_an_ipi() {
        // Recorded on the target CPU by its idle task, as this VM's trace showed;
        // recording stopped before the switch-in.
        let trace = "\
 <idle>-0 [001] d.h1. 19766.904383: call_function_single_entry: vector=251
 <idle>-0 [001] dNh2. 19766.904387: sched_wakeup: comm=schedlab-wake-r pid=14435 prio=49 target_cpu=001
";
        let s = Stall { tid: 14435, cpu: 1, intended_ns: 19_766_904_350_000, woke_ns: 19_766_904_411_000 };
        let text = explain(trace, &s);
        assert!(text.starts_with("the wakeup itself came late: another CPU queued it"), "{text}");
        assert!(text.contains("wakeup at +37 us by an IPI from another CPU, on CPU 1"), "{text}");
        assert!(text.contains("the switch-in is not in the trace"), "{text}");
    }

    #[test]
    fn the_excerpt_keeps_the_header_and_the_stall_window() {
        let s = Stall { tid: 28498, cpu: 0, intended_ns: 17_464_873_000_000, woke_ns: 17_464_876_250_000 };
        let early = " a-1 [000] d..2. 17464.860000: sched_switch: prev_comm=a prev_pid=1 ==> next_comm=b next_pid=2\n";
        let late = " a-1 [001] d..2. 17464.877000: sched_switch: prev_comm=a prev_pid=1 ==> next_comm=b next_pid=2\n";
        let x = excerpt(&format!("{early}{IDLE_LATE}{late}"), &s);
        assert!(
            x.starts_with(
                "# schedlab breaktrace: tid 28498 on CPU 0: intended 17464.873000, back in user space 17464.876250"
            ),
            "{x}"
        );
        assert!(x.contains("# tracer: nop") && x.contains("17464.876203: local_timer_entry"), "{x}");
        assert!(x.contains("[001] d.h1. 17464.874000"), "other CPUs are kept: {x}");
        assert!(!x.contains("17464.860000") && !x.contains("17464.877000"), "outside the window: {x}");
    }

    #[test]
    fn wakeups_split_at_the_timer_interrupt() {
        let trace = "\
 c-42 [000] d..1. 9.000000: hrtimer_start: hrtimer=A function=hrtimer_wakeup expires=9001000000 softexpires=9001000000 mode=ABS
 c-42 [000] d..2. 9.000001: sched_switch: prev_comm=c prev_pid=42 prev_prio=4 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
 <idle>-0 [001] d.h1. 9.001002: local_timer_entry: vector=236
 <idle>-0 [000] d.h1. 9.001007: local_timer_entry: vector=236
 <idle>-0 [000] d.h1. 9.001008: hrtimer_expire_entry: hrtimer=A function=hrtimer_wakeup now=9001007500
 <idle>-0 [000] d..2. 9.001020: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=c next_pid=42 next_prio=4
 c-42 [000] d..1. 9.001030: hrtimer_start: hrtimer=A function=hrtimer_wakeup expires=9002000000 softexpires=9002000000 mode=ABS
 <idle>-0 [000] d.h1. 9.001999: local_timer_entry: vector=236
 <idle>-0 [000] d.h1. 9.002000: hrtimer_expire_entry: hrtimer=A function=hrtimer_wakeup now=9002000100
 <idle>-0 [000] d..2. 9.002009: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=c next_pid=42 next_prio=4
";
        // The other CPU's interrupt is not this timer's; an early one is negative.
        let (first, second) = ((42, 9_001_000_000, 7_000, Some(20_000)), (42, 9_002_000_000, -1_000, Some(9_000)));
        assert_eq!(split_wakeups(trace), vec![first, second]);
        // Without its switch-in (untraced), a wake-up still has its interrupt part.
        let untraced: String =
            trace.lines().filter(|l| !l.contains("9.001020: sched_switch")).map(|l| format!("{l}\n")).collect();
        assert_eq!(split_wakeups(&untraced), vec![(42, 9_001_000_000, 7_000, None), second]);
        // Preempted after an untraced switch-in: its next switch-in is not the wake-up's.
        let preempted = untraced.replace(
            " c-42 [000] d..1. 9.001030: hrtimer_start",
            " c-42 [000] d..2. 9.001025: sched_switch: prev_comm=c prev_pid=42 prev_prio=4 prev_state=R ==> next_comm=k next_pid=9 next_prio=0\n k-9 [000] d..2. 9.001028: sched_switch: prev_comm=k prev_pid=9 prev_prio=0 prev_state=S ==> next_comm=c next_pid=42 next_prio=4\n c-42 [000] d..1. 9.001030: hrtimer_start",
        );
        assert_eq!(split_wakeups(&preempted), vec![(42, 9_001_000_000, 7_000, None), second]);
    }

    #[test]
    fn cpumasks_are_hex_in_32_bit_groups() {
        assert_eq!(cpumask(&[0]), "1");
        assert_eq!(cpumask(&[0, 1]), "3");
        assert_eq!(cpumask(&[4, 7]), "90");
        assert_eq!(cpumask(&[33]), "2,00000000");
        assert_eq!(cpumask(&[0, 32]), "1,00000001");
    }

    #[test]
    fn an_unexpanded_buffer_is_restored_to_its_expanded_size() {
        assert_eq!(buffer_size("7 (expanded: 1408)\n"), "1408");
        assert_eq!(buffer_size("1410\n"), "1410");
    }

    #[test]
    fn the_selected_clock_is_the_bracketed_one() {
        assert_eq!(selected("[local] global counter mono"), Some("local"));
        assert_eq!(selected("local global [mono] boot"), Some("mono"));
        assert_eq!(selected("none"), None);
    }
}
