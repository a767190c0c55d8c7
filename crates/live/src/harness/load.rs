//! Background loads, usable by any benchmark (`--load SPEC`, repeatable).
//!
//! ```text
//!   none                      no load (overrides a benchmark's default load)
//!   hackbench:G               G groups of 20 senders + 20 receivers over
//!                             socketpairs, sending 100-byte messages forever
//!   burn:N                    N CPU hogs (a tight integer loop)
//!   write:N                   N writers streaming 64 KiB writes into an unnamed
//!                             file of size= (256MiB), fdatasync every fsync=
//!                             (32MiB; 0: never, as interbench), in dir= (temp)
//!   read:N                    N readers re-reading an unnamed file of size=
//!                             (256MiB) in dir=, from=cache (the page cache) or
//!                             from=disk (its pages dropped before each pass)
//!   compile:N                 N loops of a real `cc -O2` on a generated C source
//!                             (read from a memfd: no file on disk), like make -jN
//!   video:N, x:N              N of interbench's emulated video (40 % CPU at
//!                             60 Hz) or X (0-100 % ramp in 100 ms cycles) tasks
//!   stress:ARGS               stress-ng ARGS (stress:'--cpu 2 --vm 1'), restarted
//!                             when it exits; an error when stress-ng is missing
//!   cmd:'COMMAND'             /bin/sh -c COMMAND, restarted when it exits
//!   SPEC,key=value,...        the load's own keys (above) and condition:
//!                             policy=, prio=, nice=, cpus= (e.g. burn:2,nice=10,
//!                             hackbench:10,policy=batch, cmd:'make',cpus=1);
//!                             the count may be named too (burn:tasks=2).
//!                             `burn:2@nice=10` is the older spelling.
//! ```
//!
//! A command or stress-ng argument list with a comma or `@` is quoted, `'...'`
//! or `"..."`, right after the colon (as a benchmark's `cmd='...'`), and so is
//! a `dir=` value with a comma; the text a spec is stored as quotes them.
//!
//! Load tasks are processes forked from the harness's calling thread (with
//! PDEATHSIG and one process group per case, see [`Children`]) *before* the
//! measuring thread starts, then given their condition by pid (default: the
//! harness's own, SCHED_OTHER, never the benchmark's condition). They run
//! [`WARMUP`] before the measurement starts (named `schedlab-burn`,
//! `schedlab-hbsend`, `schedlab-hbrecv`, `schedlab-write`, `schedlab-read`,
//! `schedlab-video`, `schedlab-x` and `schedlab-loadsup`, as `top` and ftrace show them), and are stopped (a stop word in
//! a shared page, then SIGKILL to the group) and reaped when it ends. Each
//! task counts its work in its own cache line of a shared page
//! (`LoadPage`). The measurement marks where each repetition starts and
//! ends (`Ctx::rep_starts`/`rep_ends`: the counters are summed into the page
//! at that instant, by the measuring thread or a runner process), so the
//! load's throughput (messages/s received, or burn loops/s of [`BURN_CHUNK`]
//! iterations) is reported per measured repetition as a Neutral metric: a
//! result says how loaded the machine really was while each sample was
//! taken, and `show`/`compare` get a distribution. Every load loop checks
//! the stop word and the case deadline (+1 s) and exits by itself, so even
//! an RT load is bounded; RT load tasks are also watched by the RT watchdog
//! (registered before they get their RT policy, so a load that fills every
//! CPU cannot starve the harness before it is watched).
//!
//! `compile`, `stress` and `cmd` run other programs, which may start their
//! own children and leave the process group (stress-ng does): a supervisor
//! task (a child subreaper) starts each run and counts it, and the harness
//! stops the whole tree on every exit path by walking it in /proc, freezing
//! it (SIGSTOP until no new task appears) and killing it, then lets the
//! supervisors reap it (see `load/command.rs`). Their files live in memfds
//! and unnamed (O_TMPFILE) files, so nothing is left on disk even after a
//! SIGKILL.
//!
//! A stop (Ctrl-C) is seen between any two forks and during the warm-up, so
//! starting `hackbench:10` (400 tasks) ends within one fork of it: the
//! tasks started so far are killed and reaped at once. Once running, the
//! load's process group is SIGKILLed by the signal thread the moment a stop
//! is requested (`Children::kill_on_stop`): 400 busy tasks would otherwise
//! share the CPUs with the harness threads that have to unwind. (Command
//! loads are stopped by the harness's orderly tree kill instead: killing
//! their supervisor first would orphan what left its group.)

mod command;
pub(crate) mod emulated;
mod file;
mod status;

use crate::error::LiveError;
use crate::harness::condition;
use crate::harness::hygiene::{Children, Watchdog};
use crate::harness::now_ns;
use crate::harness::params::{ParamKind, Params};
use schedlab_core::condition::parse_cpu_list;
use schedlab_core::param::{Kind, Param, SizeUnit};
use schedlab_core::{Direction, Metric, SchedCondition, SchedPolicy, Unit};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
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
    Hackbench {
        groups: u32,
    },
    Burn {
        tasks: u32,
    },
    Write {
        tasks: u32,
    },
    Read {
        tasks: u32,
    },
    Compile {
        jobs: u32,
    },
    Video {
        tasks: u32,
    },
    X {
        tasks: u32,
    },
    /// stress-ng with the spec's `args` option.
    Stress,
    /// `/bin/sh -c` with the spec's `command` option.
    Cmd,
}

/// One `--load` argument, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadSpec {
    /// As given (normalised), recorded in `Condition::Live { loads }`.
    pub text: String,
    pub kind: LoadKind,
    /// The load's own condition; `None`: the harness's (SCHED_OTHER).
    pub condition: Option<SchedCondition>,
    /// Written in the older `burn:2@nice=10` spelling (still accepted).
    pub old_spelling: bool,
    /// The load's own keys as given, canonical, in its table's order
    /// (`size`, `fsync`, `dir`, `from`), and the text of `stress` (`args`)
    /// and `cmd` (`command`). Defaults are filled in when the load starts.
    pub options: Vec<(String, String)>,
}

/// What the grammar knows of one load: its name, the key its leading value
/// goes by, and the table of its own keys.
struct KindInfo {
    name: &'static str,
    /// `None`: takes nothing (`none`).
    count_key: Option<&'static str>,
    options: &'static [Param],
}

const FILE_SIZE: Kind = Kind::Size { unit: SizeUnit::MiB, min: 1, max: 1 << 20 };
const DIR_HELP: &str = "directory of the unnamed file (O_TMPFILE, so nothing is left behind); temp = $TMPDIR or /tmp";

const WRITE_OPTIONS: &[Param] = &[
    Param::new("size", FILE_SIZE, "256MiB", "bytes each writer writes before it truncates its file and starts again"),
    Param::new(
        "fsync",
        Kind::Size { unit: SizeUnit::MiB, min: 0, max: 1 << 20 },
        "32MiB",
        "fdatasync after this much is written; 0: never (the kernel's writeback decides, as interbench)",
    ),
    Param::new("dir", Kind::Text, "temp", DIR_HELP),
];

const READ_OPTIONS: &[Param] = &[
    Param::new("size", FILE_SIZE, "256MiB", "size of each reader's file, read from start to end in every pass"),
    Param::new(
        "from",
        Kind::Choice(&["cache", "disk"]),
        "cache",
        "cache: passes re-read the page cache (interbench's read load on a machine with more than 1 GB); disk: the file's pages are dropped before each pass, so it is read from the device",
    ),
    Param::new("dir", Kind::Text, "temp", DIR_HELP),
];

const KINDS: [KindInfo; 10] = [
    KindInfo { name: "none", count_key: None, options: &[] },
    KindInfo { name: "hackbench", count_key: Some("groups"), options: &[] },
    KindInfo { name: "burn", count_key: Some("tasks"), options: &[] },
    KindInfo { name: "write", count_key: Some("tasks"), options: WRITE_OPTIONS },
    KindInfo { name: "read", count_key: Some("tasks"), options: READ_OPTIONS },
    KindInfo { name: "compile", count_key: Some("jobs"), options: &[] },
    KindInfo { name: "video", count_key: Some("tasks"), options: &[] },
    KindInfo { name: "x", count_key: Some("tasks"), options: &[] },
    KindInfo { name: "stress", count_key: Some("args"), options: &[] },
    KindInfo { name: "cmd", count_key: Some("command"), options: &[] },
];

impl LoadSpec {
    /// Processes the load forks (for `compile`, `stress` and `cmd` an
    /// estimate of the tree: supervisor, compiler driver, cc1 and as per
    /// job; stress-ng's main process, its supervisor and the workers its
    /// arguments count).
    pub fn tasks(&self) -> u64 {
        match self.kind {
            LoadKind::None => 0,
            LoadKind::Hackbench { groups } => groups as u64 * 2 * HB_FDS as u64,
            LoadKind::Burn { tasks }
            | LoadKind::Write { tasks }
            | LoadKind::Read { tasks }
            | LoadKind::Video { tasks }
            | LoadKind::X { tasks } => tasks as u64,
            LoadKind::Compile { jobs } => jobs as u64 * 4,
            LoadKind::Stress => 2 + command::stress_workers(self.option("args").unwrap_or("")),
            LoadKind::Cmd => 2,
        }
    }

    /// Busy RT tasks (for the starvation guard): RT tasks that may keep a
    /// CPU busy (hogs, compilers, page-cache copies, X's ramp to 100 %);
    /// hackbench tasks block on their sockets, video idles 60 % of the time.
    pub fn rt_busy(&self) -> u64 {
        if !self.condition.as_ref().is_some_and(|c| c.policy.is_realtime()) {
            return 0;
        }
        match self.kind {
            LoadKind::None | LoadKind::Hackbench { .. } | LoadKind::Video { .. } => 0,
            LoadKind::Compile { jobs } => jobs as u64,
            LoadKind::Cmd => 1,
            _ => self.tasks(),
        }
    }

    /// A load's own key (`size`, `dir`, `args`, `command`, ...) as given.
    pub fn option(&self, key: &str) -> Option<&str> {
        self.options.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The canonical value of a key of the load's table, its default if not given.
    fn option_or_default(&self, key: &str) -> String {
        if let Some(v) = self.option(key) {
            return v.to_string();
        }
        let p = KINDS.iter().flat_map(|k| k.options).find(|p| p.name == key).expect("a key of a load table");
        p.kind.parse(p.default).expect("a load table's default parses")
    }

    fn metric_name(&self) -> &'static str {
        match self.kind {
            LoadKind::Hackbench { .. } => "hackbench.messages_per_s",
            LoadKind::Burn { .. } => "burn.loops_per_s",
            LoadKind::Write { .. } => "write.kb_per_s",
            LoadKind::Read { .. } => "read.kb_per_s",
            LoadKind::Compile { .. } => "compile.compiles_per_s",
            LoadKind::Video { .. } => "video.frames_per_s",
            LoadKind::X { .. } => "x.frames_per_s",
            LoadKind::Stress => "stress.cpu_percent",
            LoadKind::Cmd => "cmd.cpu_percent",
            LoadKind::None => "none",
        }
    }

    /// The unit of the throughput metric and the factor from the counters'
    /// per-second rate to it (the command loads count CPU milliseconds of
    /// their whole tree: per second / 10 is percent of one CPU).
    fn metric_unit(&self) -> (Unit, f64) {
        match self.kind {
            LoadKind::Write { .. } | LoadKind::Read { .. } => (Unit::KibPerSecond, 1.0),
            LoadKind::Stress | LoadKind::Cmd => (Unit::Percent, 0.1),
            _ => (Unit::PerSecond, 1.0),
        }
    }

    /// Whether a repetition without progress is worth a warning: not for a
    /// compile or a command, whose unit of work may outlast a repetition.
    fn warns_when_idle(&self) -> bool {
        !matches!(self.kind, LoadKind::Compile { .. } | LoadKind::Stress | LoadKind::Cmd)
    }
}

/// Where the first quote-free occurrence of one of `chars` is in `s`: a
/// quote right after `:` or `=` opens a value that runs to the same quote.
fn find_unquoted(s: &str, chars: &[char]) -> Option<usize> {
    let mut prev: Option<char> = None;
    let mut quote: Option<char> = None;
    for (i, c) in s.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if matches!(c, '\'' | '"') && matches!(prev, Some(':') | Some('=')) => quote = Some(c),
            None if chars.contains(&c) => return Some(i),
            None => {}
        }
        if !c.is_whitespace() {
            prev = Some(c);
        }
    }
    None
}

/// `v` in quotes the parser reads back ('...' unless it holds a ').
fn quoted(v: &str) -> String {
    if v.contains('\'') {
        format!("\"{v}\"")
    } else {
        format!("'{v}'")
    }
}

/// A key's value as the spec's text writes it: quoted when it holds a comma,
/// an `@` or starts with a quote.
fn shown_value(v: &str) -> String {
    if v.contains([',', '@']) || v.starts_with(['\'', '"']) {
        quoted(v)
    } else {
        v.to_string()
    }
}

/// Parse one load spec (see the module docs for the syntax).
pub fn parse(input: &str) -> Result<LoadSpec, LiveError> {
    let bad = |detail: &str| LiveError::BadLoad { spec: input.to_string(), detail: detail.to_string() };
    let s = input.trim();
    let name_end = s.find([':', ',', '@']).unwrap_or(s.len());
    let name = s[..name_end].trim().to_ascii_lowercase();
    let Some(info) = KINDS.iter().find(|k| k.name == name) else {
        return Err(bad(&format!("unknown load '{name}' (loads: {})", NAMES.join(", "))));
    };
    // The leading value after the colon (the count, the arguments, the
    // command), and what follows it: nothing, or `,keys` or `@condition`.
    let (positional, tail): (Option<String>, String) = match s[name_end..].strip_prefix(':') {
        None => (None, s[name_end..].to_string()),
        Some(body) => {
            let b = body.trim_start();
            if let Some(q) = b.chars().next().filter(|c| matches!(c, '\'' | '"')) {
                let inner = &b[1..];
                let close = inner
                    .find(q)
                    .ok_or_else(|| bad("a quote that is never closed: end the value with the same quote"))?;
                let after = inner[close + 1..].trim_start();
                if !(after.is_empty() || after.starts_with([',', '@'])) {
                    return Err(bad("text after the closing quote: put a comma before the next key"));
                }
                (Some(inner[..close].to_string()), after.to_string())
            } else {
                let end = find_unquoted(body, &[',', '@']).unwrap_or(body.len());
                if body[..end].contains('=') {
                    (None, format!(",{body}"))
                } else {
                    (Some(body[..end].trim().to_string()), body[end..].to_string())
                }
            }
        }
    };
    // `burn:2@nice=10` is the older spelling of `burn:2,nice=10`.
    let (keyed, old_spelling) = match find_unquoted(&tail, &['@']) {
        Some(at) => {
            let (before, after) = (tail[..at].trim().trim_start_matches(','), tail[at + 1..].trim());
            if after.is_empty() {
                return Err(bad("the condition after @ is empty"));
            }
            (if before.trim().is_empty() { after.to_string() } else { format!("{before},{after}") }, true)
        }
        None => (tail.trim().trim_start_matches(',').to_string(), false),
    };
    let mut given = Params::parse(&keyed).map_err(|e| bad(&e.to_string()))?;
    let value = match (positional, info.count_key.and_then(|k| given.remove(k))) {
        (Some(_), Some(_)) => return Err(bad("the count is given twice")),
        (Some(p), None) => Some(p),
        (None, by_key) => by_key,
    };
    let count = |v: &str, what: &str| -> Result<u32, LiveError> {
        let kind = ParamKind::Count { min: 1, max: MAX_COUNT };
        let n = kind.parse(v).map_err(|expected| bad(&format!("{what} must be {expected}")))?;
        Ok(n.parse().expect("a count parses to digits"))
    };
    let mut options: Vec<(String, String)> = Vec::new();
    let kind = match (info.name, value) {
        ("none", None) => LoadKind::None,
        ("none", Some(_)) => return Err(bad("'none' takes nothing after it")),
        ("stress", None) => return Err(bad("the stress-ng arguments are missing (e.g. stress:'--cpu 2')")),
        ("cmd", None) => return Err(bad("the command is missing (e.g. cmd:'make -C /src -j2')")),
        (_, None) => return Err(bad("the count is missing")),
        ("hackbench", Some(g)) => LoadKind::Hackbench { groups: count(&g, "the number of groups")? },
        ("burn", Some(n)) => LoadKind::Burn { tasks: count(&n, "the number of hogs")? },
        ("write", Some(n)) => LoadKind::Write { tasks: count(&n, "the number of writers")? },
        ("read", Some(n)) => LoadKind::Read { tasks: count(&n, "the number of readers")? },
        ("compile", Some(n)) => LoadKind::Compile { jobs: count(&n, "the number of compile jobs")? },
        ("video", Some(n)) => LoadKind::Video { tasks: count(&n, "the number of video tasks")? },
        ("x", Some(n)) => LoadKind::X { tasks: count(&n, "the number of X tasks")? },
        (name, Some(text)) => {
            let text = text.trim().to_string();
            if text.is_empty() {
                return Err(bad("the command or arguments are empty"));
            }
            if text.contains('\'') && text.contains('"') {
                return Err(bad("a command with both ' and \" cannot be stored: put it in a script and run that"));
            }
            let key = if name == "stress" {
                if shlex::split(&text).is_none_or(|a| a.is_empty()) {
                    return Err(bad("the stress-ng arguments do not split like a shell's (an open quote?)"));
                }
                "args"
            } else {
                "command"
            };
            options.push((key.to_string(), text));
            if name == "stress" {
                LoadKind::Stress
            } else {
                LoadKind::Cmd
            }
        }
    };
    for p in info.options {
        if let Some(v) = given.remove(p.name) {
            let canonical = p
                .kind
                .parse(&v)
                .map_err(|expected| bad(&format!("{}={v} is not valid: expected {expected}", p.name)))?;
            if canonical.contains('\'') && canonical.contains('"') {
                return Err(bad(&format!("{} cannot hold both ' and \"", p.name)));
            }
            options.push((p.name.to_string(), canonical));
        }
    }
    if kind == LoadKind::None && !given.is_empty() {
        return Err(bad("'none' takes no condition"));
    }
    let own_keys: Vec<&str> = info.count_key.into_iter().chain(info.options.iter().map(|p| p.name)).collect();
    let condition =
        if given.is_empty() { None } else { Some(parse_condition(&given, &own_keys).map_err(|d| bad(&d))?) };
    let mut text = match (kind, options.first()) {
        (LoadKind::None, _) => "none".to_string(),
        (LoadKind::Hackbench { groups: n }, _)
        | (LoadKind::Burn { tasks: n }, _)
        | (LoadKind::Write { tasks: n }, _)
        | (LoadKind::Read { tasks: n }, _)
        | (LoadKind::Compile { jobs: n }, _)
        | (LoadKind::Video { tasks: n }, _)
        | (LoadKind::X { tasks: n }, _) => format!("{}:{n}", info.name),
        (LoadKind::Stress | LoadKind::Cmd, Some((_, t))) => format!("{}:{}", info.name, quoted(t)),
        (LoadKind::Stress | LoadKind::Cmd, None) => unreachable!("the text was pushed above"),
    };
    for (k, v) in options.iter().filter(|(k, _)| k != "args" && k != "command") {
        // Sizes with their unit (`size=64MiB`), as the parser takes them back.
        let shown = info.options.iter().find(|p| p.name == k).map_or(v.clone(), |p| p.kind.show(v));
        text.push_str(&format!(",{k}={}", shown_value(&shown)));
    }
    for key in CONDITION_KEYS {
        if let Some(v) = given.get(key) {
            text.push_str(&format!(",{key}={}", v.to_ascii_lowercase()));
        }
    }
    Ok(LoadSpec { text, kind, condition, old_spelling, options })
}

/// The loads the grammar knows by name.
const NAMES: [&str; 10] = ["none", "hackbench", "burn", "write", "read", "compile", "video", "x", "stress", "cmd"];

/// The alternatives one `--load` argument lists, for a sweep with the load
/// as an axis: `none,hackbench:10,burn:2,nice=10` is `none` | `hackbench:10`
/// | `burn:2,nice=10`. A part that names a load starts the next
/// alternative; any other part continues the one before (its condition, or
/// the rest of a CPU list). A quoted value (`cmd:'a, b'`) is one part.
pub fn alternatives(text: &str) -> Result<Vec<String>, LiveError> {
    let mut parts: Vec<&str> = Vec::new();
    let mut rest = text;
    while let Some(at) = find_unquoted(rest, &[',']) {
        parts.push(&rest[..at]);
        rest = &rest[at + 1..];
    }
    parts.push(rest);
    if parts.iter().any(|p| p.trim().is_empty()) {
        let detail = "the list has an empty element: remove the doubled, leading or trailing comma";
        return Err(LiveError::BadLoad { spec: text.to_string(), detail: detail.into() });
    }
    let mut out: Vec<String> = Vec::new();
    for part in parts {
        let lower = part.trim().to_ascii_lowercase();
        let names_a_load = NAMES
            .iter()
            .any(|n| lower == *n || lower.strip_prefix(n).is_some_and(|r| r.starts_with(':') || r.starts_with('@')));
        match out.last_mut() {
            Some(last) if !names_a_load => {
                last.push(',');
                last.push_str(part);
            }
            _ => out.push(part.to_string()),
        }
    }
    Ok(out)
}

/// The keys of a load's own condition, in the order its text names them.
const CONDITION_KEYS: [&str; 4] = ["policy", "prio", "nice", "cpus"];

fn parse_condition(given: &Params, own_keys: &[&str]) -> Result<SchedCondition, String> {
    let mut c = SchedCondition::default();
    for (k, v) in given.iter() {
        match k {
            "policy" => c.policy = v.parse::<SchedPolicy>().map_err(|e| e.to_string())?,
            "prio" => c.priority = Some(v.parse().map_err(|_| format!("prio '{v}' is not a number"))?),
            "nice" => c.nice = Some(v.parse().map_err(|_| format!("nice '{v}' is not a number"))?),
            "cpus" => c.cpus = Some(parse_cpu_list(v).map_err(|e| e.to_string())?),
            _ => {
                let own = if own_keys.is_empty() { "the count".to_string() } else { own_keys.join(", ") };
                return Err(format!("unknown key '{k}' (valid: {own}, policy, prio, nice, cpus)"));
            }
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

/// MemAvailable from /proc/meminfo, in bytes.
pub fn mem_available() -> Option<u64> {
    let m = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = m.lines().find_map(|l| l.strip_prefix("MemAvailable:"))?.split_whitespace().next()?.parse().ok()?;
    Some(kb * 1024)
}

/// What a case may assume about memory when /proc/meminfo cannot be read.
pub const MEMORY_CEILING: u64 = 4 << 30;

/// Bytes a case may fill with raw data: half of MemAvailable (the rest is
/// left to the loads, the store and everything else running), or
/// [`MEMORY_CEILING`] when /proc/meminfo cannot be read; with its source.
pub fn memory_room() -> (u64, String) {
    match mem_available() {
        Some(b) => (b / 2, "half of MemAvailable".into()),
        None => (MEMORY_CEILING, "the ceiling assumed when /proc/meminfo is unreadable".into()),
    }
}

/// Refuse `what` when its `tasks` do not fit under the machine's task
/// limits (`task_room()`), naming the limit and `fix`.
pub fn check_tasks(what: impl Into<String>, tasks: u64, fix: &'static str) -> Result<(), LiveError> {
    tasks_fit(what, tasks, task_room(), fix)
}

/// [`check_tasks`] against a given room (limit, its name).
pub fn tasks_fit(what: impl Into<String>, tasks: u64, room: (u64, String), fix: &'static str) -> Result<(), LiveError> {
    let (limit, limit_name) = room;
    if tasks > limit {
        return Err(LiveError::TooManyTasks { what: what.into(), tasks, limit, limit_name, fix });
    }
    Ok(())
}

/// Refuse, before anything starts, a case whose raw data (`bytes`, an
/// upper estimate) would not fit in [`memory_room`].
pub fn check_memory(what: &str, bytes: u64, fix: &'static str) -> Result<(), LiveError> {
    check_memory_in(what, bytes, memory_room(), fix)
}

fn check_memory_in(
    what: &str,
    bytes: u64,
    (limit, limit_name): (u64, String),
    fix: &'static str,
) -> Result<(), LiveError> {
    if bytes > limit {
        return Err(LiveError::TooMuchMemory { what: what.into(), need: bytes, limit, limit_name, fix });
    }
    Ok(())
}

/// Bytes of `n` latency histograms, counted at their full bucket array
/// (merging and cloning touch all of it).
pub fn histograms_bytes(n: u64) -> u64 {
    static ONE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    n.saturating_mul(*ONE.get_or_init(|| schedlab_core::LatencyHistogram::new().heap_bytes()))
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
    check_tasks(format!("load {what}"), tasks, "use fewer hackbench groups or burn tasks")?;
    // A forked load task costs ~0.5 MiB (page tables, stack, COW copies); keep
    // well inside what is available.
    if let Some(avail) = mem_available() {
        let fit = avail / 2 / (512 * 1024);
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
        preflight_kind(l)?;
    }
    let whose = if loads.is_empty() {
        "the RT tasks of this case".to_string()
    } else {
        format!("the RT tasks of this case and load {what}")
    };
    check_starvation(&whose, busy, online.len(), force)
}

/// What a load needs of the machine, before anything starts: a writable
/// directory with room for the files (`write`, `read`), a compiler
/// (`compile`), stress-ng (`stress`), a shell (`cmd`).
fn preflight_kind(l: &LoadSpec) -> Result<(), LiveError> {
    match l.kind {
        LoadKind::Write { tasks } | LoadKind::Read { tasks } => {
            let size = l.option_or_default("size").parse::<u64>().unwrap_or(0) << 20;
            let dir = file::dir_of(&l.option_or_default("dir"));
            let disk = matches!(l.kind, LoadKind::Read { .. }) && l.option_or_default("from") == "disk";
            file::check_dir(&l.text, &dir, size.saturating_mul(tasks as u64), disk)
        }
        LoadKind::Compile { .. } => command::compiler().map(|_| ()),
        LoadKind::Stress => command::stress_ng().map(|_| ()),
        LoadKind::Cmd => command::shell().map(|_| ()),
        _ => Ok(()),
    }
}

/// The load tasks' counters and the repetition marks, in a memfd-backed
/// MAP_SHARED page: forked load tasks inherit the mapping, and an exec'd
/// runner (see `runner.rs`) maps it from its descriptor, so a repetition
/// boundary is marked the same way wherever the benchmark runs.
///
/// Layout in u64 words: line 0 = stop word, loads, warm-ups, repetitions,
/// counters; then two words per load (first counter, counters), padded to
/// whole lines; one 64-byte line per task counter (no false sharing); then
/// for each measured repetition a start and an end mark, each the clock
/// (ns, 0 = not marked) followed by one counter sum per load.
pub(crate) struct LoadPage {
    ptr: *mut AtomicU64,
    words: usize,
    /// Owned by the harness; a runner maps its inherited descriptor.
    fd: Option<OwnedFd>,
}

// SAFETY: the page holds only atomics and stays mapped until drop.
unsafe impl Sync for LoadPage {}

const LINE: usize = 8; // u64 words per 64-byte line
const H_LOADS: usize = 1;
const H_WARMUP: usize = 2;
const H_REPEAT: usize = 3;
const H_SLOTS: usize = 4;

/// Word offsets of the ranges, the counters and the marks, and the size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    loads: usize,
    slots: usize,
    repeat: usize,
    ranges_at: usize,
    slots_at: usize,
    marks_at: usize,
    words: usize,
}

impl Layout {
    fn of(loads: usize, slots: usize, repeat: usize) -> Layout {
        let ranges_at = LINE;
        let slots_at = ranges_at + (2 * loads).div_ceil(LINE) * LINE;
        let marks_at = slots_at + slots * LINE;
        let words = marks_at + repeat * 2 * (1 + loads);
        Layout { loads, slots, repeat, ranges_at, slots_at, marks_at, words }
    }
}

impl LoadPage {
    /// A zeroed page for loads whose counters are `ranges` (first, count).
    fn create(ranges: &[(usize, usize)], warmup: u32, repeat: u32) -> Result<LoadPage, LiveError> {
        let slots = ranges.iter().map(|r| r.1).sum();
        let l = Layout::of(ranges.len(), slots, repeat as usize);
        // SAFETY: the name is a valid C string; flags are constants.
        let raw = unsafe { libc::memfd_create(c"schedlab-loads".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(LiveError::last_os("memfd_create for the load counters", "needs Linux 3.17 or later"));
        }
        // SAFETY: a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: ftruncate on our own memfd.
        if unsafe { libc::ftruncate(raw, (l.words * 8) as libc::off_t) } != 0 {
            return Err(LiveError::last_os("ftruncate of the load counters", "check available memory"));
        }
        let page = LoadPage { ptr: map_words(raw, l.words)?, words: l.words, fd: Some(fd) };
        for (i, v) in [(H_LOADS, l.loads), (H_WARMUP, warmup as usize), (H_REPEAT, l.repeat), (H_SLOTS, slots)] {
            page.word(i).store(v as u64, Ordering::Relaxed);
        }
        for (i, &(first, n)) in ranges.iter().enumerate() {
            page.word(l.ranges_at + 2 * i).store(first as u64, Ordering::Relaxed);
            page.word(l.ranges_at + 2 * i + 1).store(n as u64, Ordering::Relaxed);
        }
        Ok(page)
    }

    /// Map the page a harness created, from its descriptor (in a runner).
    /// None when the descriptor is not such a page.
    pub(crate) fn map(fd: i32) -> Option<LoadPage> {
        // SAFETY: a zeroed stat is valid; fstat fills it or fails.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: st is writable.
        if fd < 0 || unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_size < (LINE * 8) as libc::off_t {
            return None;
        }
        let words = st.st_size as usize / 8;
        let page = LoadPage { ptr: map_words(fd, words).ok()?, words, fd: None };
        let h = |i: usize| page.word(i).load(Ordering::Relaxed) as usize;
        (Layout::of(h(H_LOADS), h(H_SLOTS), h(H_REPEAT)).words == words).then_some(page)
    }

    pub(crate) fn raw_fd(&self) -> i32 {
        self.fd.as_ref().map_or(-1, |f| f.as_raw_fd())
    }

    fn layout(&self) -> Layout {
        let h = |i: usize| self.word(i).load(Ordering::Relaxed) as usize;
        Layout::of(h(H_LOADS), h(H_SLOTS), h(H_REPEAT))
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        assert!(i < self.words);
        // SAFETY: in bounds (checked) of a live, zero-filled (valid) mapping.
        unsafe { &*self.ptr.add(i) }
    }

    fn stop_word(&self) -> &AtomicU64 {
        self.word(0)
    }

    fn slot(&self, i: usize) -> &AtomicU64 {
        let l = self.layout();
        assert!(i < l.slots);
        self.word(l.slots_at + i * LINE)
    }

    /// Work done so far by each load (the sum of its tasks' counters).
    fn sums(&self, l: Layout) -> impl Iterator<Item = u64> + '_ {
        (0..l.loads).map(move |i| {
            let first = self.word(l.ranges_at + 2 * i).load(Ordering::Relaxed) as usize;
            let n = self.word(l.ranges_at + 2 * i + 1).load(Ordering::Relaxed) as usize;
            (first..first + n).map(|s| self.word(l.slots_at + s * LINE).load(Ordering::Relaxed)).sum()
        })
    }

    fn mark_at(l: &Layout, measured: usize, end: bool) -> usize {
        l.marks_at + (measured * 2 + end as usize) * (1 + l.loads)
    }

    /// Repetition `rep` (warm-ups first) starts or ends now. Warm-ups are
    /// not recorded. Reads one counter line per load task (~0.1 us each).
    pub(crate) fn mark(&self, rep: u64, end: bool) {
        let l = self.layout();
        let warmup = self.word(H_WARMUP).load(Ordering::Relaxed);
        let Some(measured) = rep.checked_sub(warmup).filter(|m| (*m as usize) < l.repeat) else { return };
        let at = Self::mark_at(&l, measured as usize, end);
        for (i, sum) in self.sums(l).enumerate() {
            self.word(at + 1 + i).store(sum, Ordering::Relaxed);
        }
        // The clock last: a mark with a time is complete.
        self.word(at).store(now_ns().max(1), Ordering::Release);
    }

    /// Each measured repetition's length (ns) and each load's work in it,
    /// or None when a repetition was not marked.
    fn work(&self) -> Option<Vec<(u64, Vec<u64>)>> {
        let l = self.layout();
        let get = |i: usize| self.word(i).load(Ordering::Relaxed);
        (0..l.repeat)
            .map(|rep| {
                let (s, e) = (Self::mark_at(&l, rep, false), Self::mark_at(&l, rep, true));
                let (t0, t1) = (self.word(s).load(Ordering::Acquire), self.word(e).load(Ordering::Acquire));
                let done = (0..l.loads).map(|i| get(e + 1 + i).saturating_sub(get(s + 1 + i))).collect();
                (t0 > 0 && t1 > t0).then(|| (t1 - t0, done))
            })
            .collect()
    }

    /// Throughput (per second) of each load in each measured repetition.
    fn rates(&self) -> Option<Vec<Vec<f64>>> {
        let work = self.work()?;
        let loads = self.layout().loads;
        Some((0..loads).map(|i| work.iter().map(|(ns, done)| done[i] as f64 * 1e9 / *ns as f64).collect()).collect())
    }
}

/// A shared read-write mapping of `words` u64s of a memfd.
fn map_words(fd: i32, words: usize) -> Result<*mut AtomicU64, LiveError> {
    // SAFETY: a shared mapping of a memfd at least that long; checked for MAP_FAILED.
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), words * 8, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
    };
    if p == libc::MAP_FAILED {
        return Err(LiveError::last_os("mmap of the load counters", "check available memory"));
    }
    Ok(p.cast())
}

impl Drop for LoadPage {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping; forked tasks have their own.
        unsafe { libc::munmap(self.ptr.cast(), self.words * 8) };
    }
}

/// Loads running for one case. Create, use and drop on one thread (the
/// forking thread: PDEATHSIG is tied to it).
pub struct RunningLoads {
    kids: Children,
    page: Option<LoadPage>,
    /// (spec, first slot, slots)
    loads: Vec<(LoadSpec, usize, usize)>,
    begin: Option<(u64, Vec<u64>)>,
    rt_pids: Vec<i32>,
    /// Supervisors of the command loads (`compile`, `stress`, `cmd`): not
    /// killed by the signal thread, so that their trees are frozen and
    /// killed before them (`command::stop_trees`).
    sup_kids: Children,
    /// Each task's state (failures, runs) beside its counter.
    status: Option<status::StatusPage>,
    /// Unnamed files the read loads re-read (freed when closed, on drop).
    files: Vec<OwnedFd>,
    /// What each load does, in a line (the compiler, the file's filesystem).
    notes: Vec<String>,
    /// The command trees are stopped (idempotent: finish, then drop).
    trees_stopped: bool,
}

impl Drop for RunningLoads {
    fn drop(&mut self) {
        // Every exit path (an error, a stop during the start) comes here.
        self.stop_command_trees();
    }
}

/// What the loads did during the measurement.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    /// Texts of the loads, for `Condition::Live { loads }`.
    pub texts: Vec<String>,
    pub metrics: Vec<Metric>,
    pub warnings: Vec<String>,
    /// The measured and load tasks' scheduler state over time (`--observe`).
    pub timeline: Option<schedlab_core::Timeline>,
}

/// Start the loads (forks), apply their conditions, and let them warm up.
/// `deadline_ns`: monotonic time after which every load task exits by itself.
/// `warmup`/`repeat`: the case's repetitions, which the measurement marks
/// (see [`RunningLoads::page`]).
pub fn start(
    loads: &[LoadSpec],
    deadline_ns: u64,
    watchdog: Option<&Watchdog>,
    warmup: u32,
    repeat: u32,
) -> Result<RunningLoads, LiveError> {
    let mut kids = Children::new();
    // The measurement is over when a stop comes: the loads need not wait for the harness.
    kids.kill_on_stop();
    let mut rl = RunningLoads {
        kids,
        page: None,
        loads: Vec::new(),
        begin: None,
        rt_pids: Vec::new(),
        sup_kids: Children::new(),
        status: None,
        files: Vec::new(),
        notes: Vec::new(),
        trees_stopped: false,
    };
    if let Err(e) = start_into(&mut rl, loads, deadline_ns, watchdog, warmup, repeat) {
        // Unwatched before they are killed and reaped (when `rl` drops): their pids may be reused.
        if let Some(w) = watchdog {
            for &p in &rl.rt_pids {
                w.unwatch(p);
            }
        }
        return Err(e);
    }
    Ok(rl)
}

fn start_into(
    rl: &mut RunningLoads,
    loads: &[LoadSpec],
    deadline_ns: u64,
    watchdog: Option<&Watchdog>,
    warmup: u32,
    repeat: u32,
) -> Result<(), LiveError> {
    let mut ranges = Vec::new();
    let mut next = 0usize;
    for l in loads {
        let n = match l.kind {
            LoadKind::Hackbench { groups } => groups as usize * HB_FDS,
            LoadKind::Burn { tasks }
            | LoadKind::Write { tasks }
            | LoadKind::Read { tasks }
            | LoadKind::Video { tasks }
            | LoadKind::X { tasks } => tasks as usize,
            LoadKind::Compile { jobs } => jobs as usize,
            LoadKind::Stress | LoadKind::Cmd => 1,
            LoadKind::None => 0,
        };
        ranges.push((next, n));
        next += n;
    }
    if next == 0 {
        rl.loads = loads.iter().map(|l| (l.clone(), 0, 0)).collect();
        return Ok(());
    }
    let page = LoadPage::create(&ranges, warmup, repeat)?;
    let status = status::StatusPage::new(next)?;
    for (l, &(first, n)) in loads.iter().zip(&ranges) {
        let slots = Slots { page: &page, status: &status, first, n, deadline_ns };
        let started = match l.kind {
            LoadKind::Write { .. } => Some(file::start_writers(&mut rl.kids, l, &slots, &mut rl.files)?),
            LoadKind::Read { .. } => Some(file::start_readers(&mut rl.kids, l, &slots, &mut rl.files)?),
            LoadKind::Video { .. } | LoadKind::X { .. } => Some(emulated::start(&mut rl.kids, l, &slots)?),
            LoadKind::Compile { .. } | LoadKind::Stress | LoadKind::Cmd => {
                Some(command::start(&mut rl.sup_kids, l, &slots)?)
            }
            _ => None,
        };
        let pids = match (started, l.kind) {
            (Some(s), _) => {
                rl.notes.extend(s.note);
                s.pids
            }
            (None, LoadKind::None) => Vec::new(),
            (None, LoadKind::Burn { .. }) => {
                let mut pids = Vec::new();
                for i in first..first + n {
                    stop_check()?;
                    let stop = page.stop_word();
                    let slot = page.slot(i);
                    // SAFETY: the child only spins, does atomic ops on the shared
                    // mapping and reads the vDSO clock: async-signal-safe.
                    pids.push(unsafe {
                        rl.kids.fork(|| {
                            crate::harness::hygiene::name_task(c"schedlab-burn");
                            burn_loop(stop, slot, deadline_ns)
                        })
                    }?);
                }
                pids
            }
            (None, LoadKind::Hackbench { .. }) => {
                let mut pids = Vec::new();
                for g in (first..first + n).step_by(HB_FDS) {
                    pids.extend(fork_hackbench_group(&mut rl.kids, &page, g, deadline_ns)?);
                }
                pids
            }
            _ => unreachable!("started above"),
        };
        if let Some(c) = &l.condition {
            for &pid in &pids {
                if c.policy.is_realtime() {
                    // Watched first: once RT, the tasks may leave this thread no CPU.
                    if let Some(w) = watchdog {
                        let left = Duration::from_nanos(deadline_ns.saturating_sub(now_ns()));
                        w.watch(pid, Instant::now() + left);
                    }
                    rl.rt_pids.push(pid);
                }
                condition::apply(pid, c, None)?;
            }
        }
        rl.loads.push((l.clone(), first, n));
    }
    // Every condition is applied: the supervisors may start their commands,
    // which inherit it.
    for i in 0..next {
        status.go(i);
    }
    rl.page = Some(page);
    rl.status = Some(status);
    if crate::harness::hygiene::sleep_unless_stopped(WARMUP) {
        return Err(LiveError::Interrupted);
    }
    // What a failed load said, before the bare fact that a task died.
    if let Some(st) = &rl.status {
        for (l, first, n) in &rl.loads {
            if let Some(why) = (*first..first + n).find_map(|i| st.failure(i)) {
                return Err(LiveError::LoadFailed { spec: l.text.clone(), detail: why });
            }
        }
    }
    if rl.kids.pids().iter().chain(rl.sup_kids.pids()).any(|&p| exited(p)) {
        return Err(LiveError::Measurement { bench: "load", detail: "a load task died during its warm-up".into() });
    }
    Ok(())
}

/// Interrupted if a stop was requested (between forks of the loads).
fn stop_check() -> Result<(), LiveError> {
    if crate::harness::hygiene::stop_requested() {
        return Err(LiveError::Interrupted);
    }
    Ok(())
}

fn exited(pid: i32) -> bool {
    let mut status = 0;
    // SAFETY: non-blocking waitpid on our own child.
    unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) == pid }
}

/// Where a load's tasks count their work and say how they fare.
struct Slots<'a> {
    page: &'a LoadPage,
    status: &'a status::StatusPage,
    /// The load's first slot and its number of tasks.
    first: usize,
    n: usize,
    /// Monotonic ns after which every load task exits by itself.
    deadline_ns: u64,
}

/// What starting a load gave: its tasks (direct children) and a line on
/// what it does, for the result.
struct Started {
    pids: Vec<i32>,
    note: Option<String>,
}

impl RunningLoads {
    /// Set the stop word, then freeze and kill the command loads' trees
    /// and let their supervisors reap them (once).
    fn stop_command_trees(&mut self) {
        if self.trees_stopped {
            return;
        }
        self.trees_stopped = true;
        if let Some(p) = &self.page {
            p.stop_word().store(1, Ordering::SeqCst);
        }
        if !self.sup_kids.pids().is_empty() {
            command::stop_trees(self.sup_kids.pids());
        }
    }

    fn snapshot(&self) -> Vec<u64> {
        let Some(p) = &self.page else { return Vec::new() };
        (0..p.layout().slots).map(|i| p.slot(i).load(Ordering::Relaxed)).collect()
    }

    /// The page the measurement marks its repetitions in (None: no load
    /// tasks). Benchmarks mark through `Ctx::rep_starts`/`rep_ends`.
    pub(crate) fn page(&self) -> Option<&LoadPage> {
        self.page.as_ref()
    }

    /// Mark the start of the measurement (counters and clock), for a
    /// whole-case figure when repetitions were not marked.
    pub fn begin(&mut self) {
        self.begin = Some((now_ns(), self.snapshot()));
    }

    /// Stop, kill and reap every load task; throughput in each measured
    /// repetition (or, if the repetitions were not marked, since `begin`).
    pub fn finish(mut self, watchdog: Option<&Watchdog>) -> LoadReport {
        let end_ns = now_ns();
        let end = self.snapshot();
        if let Some(p) = &self.page {
            p.stop_word().store(1, Ordering::SeqCst);
        }
        if let Some(w) = watchdog {
            for &p in &self.rt_pids {
                w.unwatch(p);
            }
        }
        self.stop_command_trees();
        self.kids.kill_all();
        self.sup_kids.kill_all();
        let mut report =
            LoadReport { texts: self.loads.iter().map(|(l, _, _)| l.text.clone()).collect(), ..Default::default() };
        report.warnings.extend(self.notes.iter().cloned());
        if let Some(st) = &self.status {
            for (l, first, n) in &self.loads {
                if let Some(why) = (*first..first + n).find_map(|i| st.failure(i)) {
                    report.warnings.push(format!("load {} stopped during the measurement: {why}", l.text));
                } else if let Some(runs) = st.failed_runs(*first..first + n) {
                    report.warnings.push(format!("load {}: {runs}", l.text));
                }
            }
        }
        let (Some(page), Some((t0, begin))) = (&self.page, &self.begin) else { return report };
        let per_rep = page.rates();
        if per_rep.is_none() {
            report.warnings.push(
                "the load's throughput covers the whole case, not each repetition: the repetitions were not marked"
                    .into(),
            );
        }
        let secs = (end_ns.saturating_sub(*t0)) as f64 / 1e9;
        let mut seen: Vec<&str> = Vec::new();
        for (i, (l, first, n)) in self.loads.iter().enumerate() {
            if l.kind == LoadKind::None || secs <= 0.0 {
                continue;
            }
            let rates = match &per_rep {
                Some(r) => r[i].clone(),
                None => {
                    let done: u64 = (*first..first + n).map(|i| end[i].saturating_sub(begin[i])).sum();
                    vec![done as f64 / secs]
                }
            };
            let base = l.metric_name();
            let k = seen.iter().filter(|s| **s == base).count();
            seen.push(base);
            let name = if k == 0 { format!("load.{base}") } else { format!("load{}.{base}", k + 1) };
            let (unit, scale) = l.metric_unit();
            let rates: Vec<f64> = rates.into_iter().map(|r| r * scale).collect();
            let idle: Vec<String> =
                rates.iter().enumerate().filter(|(_, r)| **r == 0.0).map(|(r, _)| (r + 1).to_string()).collect();
            if !idle.is_empty() && l.warns_when_idle() {
                let when = if per_rep.is_some() {
                    format!("in repetition(s) {}", idle.join(", "))
                } else {
                    "during the measurement".into()
                };
                report.warnings.push(format!("load {} made no progress {when} (starved?)", l.text));
            }
            report.metrics.push(Metric::samples(&name, unit, Direction::Neutral, rates));
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
    page: &LoadPage,
    first_slot: usize,
    deadline_ns: u64,
) -> Result<Vec<i32>, LiveError> {
    let mut pairs = Vec::with_capacity(HB_FDS);
    for _ in 0..HB_FDS {
        pairs.push(crate::harness::socketpair()?);
    }
    let out_fds: [i32; HB_FDS] = std::array::from_fn(|i| pairs[i].1.as_raw_fd());
    let mut pids = Vec::new();
    let stop = page.stop_word();
    for (i, p) in pairs.iter().enumerate() {
        stop_check()?;
        let fd = p.0.as_raw_fd();
        let slot = page.slot(first_slot + i);
        // SAFETY: the child only reads its socket and bumps an atomic counter.
        pids.push(unsafe {
            kids.fork(|| {
                crate::harness::hygiene::name_task(c"schedlab-hbrecv");
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
        stop_check()?;
        // SAFETY: the child only writes to sockets and reads the clock.
        pids.push(unsafe {
            kids.fork(|| {
                crate::harness::hygiene::name_task(c"schedlab-hbsend");
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
        assert_eq!(l.text, "burn:2,nice=10");
        assert!(l.old_spelling);
        let l = parse("burn:3@policy=fifo,prio=5,cpus=0").unwrap();
        assert_eq!(l.rt_busy(), 3);
        assert_eq!(l.condition.unwrap().cpus, Some(vec![0]));
        // One grammar with the benchmarks: name:count,key=value; the count may be named.
        for same in ["burn:2,cpus=0,1,nice=10", "burn:tasks=2,nice=10,cpus=0,1", "burn:2@cpus=0,1,nice=10"] {
            let l = parse(same).unwrap();
            assert_eq!((l.kind, l.text.as_str()), (LoadKind::Burn { tasks: 2 }, "burn:2,nice=10,cpus=0,1"), "{same}");
            assert_eq!(l.condition.unwrap().cpus, Some(vec![0, 1]));
        }
        assert!(!parse("hackbench:groups=3").unwrap().old_spelling);
        assert_eq!(parse("none").unwrap().kind, LoadKind::None);
        assert_eq!(parse("hackbench:4@policy=batch").unwrap().condition.unwrap().policy, SchedPolicy::Batch);
    }

    #[test]
    fn the_newer_loads_parse_with_their_keys_and_write_back_their_text() {
        let l = parse("write:2,size=64MiB,fsync=0,nice=5").unwrap();
        assert_eq!(l.kind, LoadKind::Write { tasks: 2 });
        assert_eq!((l.option("size"), l.option("fsync")), (Some("64"), Some("0")));
        assert_eq!(l.text, "write:2,size=64MiB,fsync=0B,nice=5");
        assert_eq!(l.option_or_default("dir"), "temp");
        let l = parse("read:1,from=DISK,dir='/mnt/a,b'").unwrap();
        assert_eq!((l.option("from"), l.option("dir")), (Some("disk"), Some("/mnt/a,b")));
        assert_eq!(l.text, "read:1,from=disk,dir='/mnt/a,b'");
        assert_eq!(parse("compile:jobs=3").unwrap().kind, LoadKind::Compile { jobs: 3 });
        assert_eq!(parse("compile:3").unwrap().tasks(), 12, "supervisor, cc, cc1 and as per job");
        assert_eq!(parse("X:1").unwrap().kind, LoadKind::X { tasks: 1 });
        // Commands keep their case, commas and @ when quoted.
        let l = parse("cmd:'make -C /Src a,b user@host',nice=10").unwrap();
        assert_eq!((l.kind, l.option("command")), (LoadKind::Cmd, Some("make -C /Src a,b user@host")));
        assert_eq!(l.text, "cmd:'make -C /Src a,b user@host',nice=10");
        assert!(!l.old_spelling);
        let l = parse("cmd:echo 'hi'").unwrap();
        assert_eq!((l.option("command"), l.text.as_str()), (Some("echo 'hi'"), "cmd:\"echo 'hi'\""));
        let l = parse("stress:--cpu 2 --vm 1@policy=batch").unwrap();
        assert_eq!((l.kind, l.option("args")), (LoadKind::Stress, Some("--cpu 2 --vm 1")));
        assert!(l.old_spelling);
        assert_eq!(l.tasks(), 5);
        // Every text parses back to the same load.
        for text in
            ["write:2,size=64MiB,fsync=0,nice=5", "read:1,from=disk,dir='/mnt/a,b'", "cmd:\"echo 'hi'\"", "x:3,cpus=0"]
        {
            let l = parse(text).unwrap();
            assert_eq!(parse(&l.text).unwrap(), l, "{text}");
        }
        for bad in [
            "write",
            "write:1,size=0",
            "write:1,from=disk",
            "read:1,from=tape",
            "cmd",
            "cmd:''",
            "cmd:'unclosed",
            "cmd:'a' b",
            "stress:'--cpu \"2'",
            "compile:0",
            "video:1,size=1",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(matches!(e, LiveError::BadLoad { .. }), "{bad}: {e}");
        }
        let e = parse("write:1,colour=red").unwrap_err().to_string();
        assert!(e.contains("valid: tasks, size, fsync, dir, policy"), "{e}");
    }

    #[test]
    fn a_list_of_loads_splits_where_a_load_is_named() {
        assert_eq!(alternatives("hackbench:10").unwrap(), ["hackbench:10"]);
        assert!(alternatives("none,,burn:1").is_err() && alternatives("burn:1,").is_err(), "empty elements");
        assert_eq!(
            alternatives("none,hackbench:10,burn:2,nice=10").unwrap(),
            ["none", "hackbench:10", "burn:2,nice=10"]
        );
        assert_eq!(alternatives("burn:1,cpus=0,1,Burn:2@nice=5").unwrap(), ["burn:1,cpus=0,1", "Burn:2@nice=5"]);
        assert_eq!(
            alternatives("bogus:1,nice=2").unwrap(),
            ["bogus:1,nice=2"],
            "an unknown load still parses, to its error"
        );
        assert_eq!(
            alternatives("none,cmd:'make a,b',nice=1,write:1,dir='/x,y',x:1").unwrap(),
            ["none", "cmd:'make a,b',nice=1", "write:1,dir='/x,y'", "x:1"],
            "quoted values are whole; the newer loads start alternatives"
        );
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
            "burn:2@nice=1,nice=5",
            "none@nice=1",
            "burn:200000",
            "burn:1@policy=deadline",
            "burn:2,tasks=3",
            "burn:2,nice=1,nice=5",
            "burn:2ms",
            "none:1",
            "hackbench:tasks=2",
        ] {
            let e = parse(bad).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, LiveError::BadLoad { .. }), "{bad}: {msg}");
            assert!(msg.contains("burn:2,nice=10"), "{bad}: {msg}");
            assert!(!msg.contains('\n'));
        }
    }

    #[test]
    fn marked_repetitions_give_one_rate_per_load_and_repetition() {
        // Two loads: counters 0-1 and 2; one warm-up, two measured repetitions.
        let page = LoadPage::create(&[(0, 2), (2, 1)], 1, 2).unwrap();
        assert!(page.rates().is_none(), "nothing marked yet");
        let bump = |slot: usize, n: u64| page.slot(slot).fetch_add(n, Ordering::Relaxed);
        page.mark(0, false); // warm-up: not recorded
        bump(0, 1000);
        page.mark(0, true);
        for rep in 1..3u64 {
            page.mark(rep, false);
            bump(0, 10 * rep);
            bump(1, 5);
            bump(2, 7);
            std::thread::sleep(Duration::from_millis(2));
            page.mark(rep, true);
            bump(2, 1000); // between repetitions: not counted
        }
        page.mark(9, false); // beyond the case: ignored
        let w = page.work().expect("every measured repetition marked");
        let done: Vec<&Vec<u64>> = w.iter().map(|(_, d)| d).collect();
        assert_eq!(done, [&vec![15, 7], &vec![25, 7]], "warm-up and between-repetition work excluded");
        assert!(w.iter().all(|(ns, _)| *ns >= 2_000_000));
        let r = page.rates().unwrap();
        assert_eq!(r[1], w.iter().map(|(ns, _)| 7.0 * 1e9 / *ns as f64).collect::<Vec<_>>());
    }

    #[test]
    fn a_runner_maps_the_same_page_from_its_descriptor() {
        let page = LoadPage::create(&[(0, 1)], 0, 1).unwrap();
        let other = LoadPage::map(page.raw_fd()).expect("a load page");
        assert_eq!(other.layout(), page.layout());
        other.mark(0, false);
        page.slot(0).fetch_add(3, Ordering::Relaxed);
        other.mark(0, true);
        assert_eq!(page.rates().map(|r| r[0].len()), Some(1), "marks made through the second mapping");
        assert!(LoadPage::map(-1).is_none());
        // Any other descriptor (here a pipe) is not a load page.
        let (r, _w) = crate::harness::pipe().unwrap();
        assert!(LoadPage::map(r.as_raw_fd()).is_none());
    }

    #[test]
    fn memory_beyond_the_room_is_refused_with_the_fix() {
        let room = (1 << 30, "half of MemAvailable".to_string());
        assert!(check_memory_in("x", 1 << 29, room.clone(), "lower samples=").is_ok());
        let e = check_memory_in("wakeup samples=10 (raw latencies)", 3 << 30, room, "lower samples=").unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, LiveError::TooMuchMemory { .. }));
        assert!(msg.contains("3.0 GiB") && msg.contains("1.0 GiB") && msg.contains("lower samples="), "{msg}");
        assert!(!msg.contains('\n'));
        assert!(histograms_bytes(2) > 2 * 100_000, "a histogram's buckets take 224 KiB");
        assert_eq!(histograms_bytes(u64::MAX), u64::MAX, "saturates");
        let (limit, _) = memory_room();
        assert!(limit > 0);
    }

    #[test]
    fn too_many_tasks_are_refused_before_starting() {
        let e = check(&[parse("hackbench:100000").unwrap()], 0, false).unwrap_err();
        assert!(matches!(e, LiveError::TooManyTasks { .. }), "{e}");
    }
}
