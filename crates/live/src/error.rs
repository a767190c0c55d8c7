//! Errors of the live layer. Every message is one line that names the problem
//! and the fix, so the CLI can print it as is.

use schedlab_core::condition::ConditionError;

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// Rejected before touching the kernel (ranges, ordering); core's message.
    #[error(transparent)]
    Condition(#[from] ConditionError),

    #[error("policy {policy} needs privilege ({detail}): run as root, or grant CAP_SYS_NICE (setcap cap_sys_nice+ep), or raise RLIMIT_RTPRIO (ulimit -r 99)")]
    RtPrivilege { policy: String, detail: String },

    #[error("policy {policy} was refused although running as root: the task's cpu cgroup has no RT budget (CONFIG_RT_GROUP_SCHED with cpu.rt_runtime_us = 0): give the cgroup a budget (echo 950000 > <cgroup>/cpu.rt_runtime_us) or run from the root cpu cgroup")]
    RtGroupBudget { policy: String },

    #[error("nice {nice} needs privilege to lower the nice value: run as root, grant CAP_SYS_NICE (setcap cap_sys_nice+ep), raise RLIMIT_NICE (ulimit -e 40), or use a nice >= 0")]
    NicePrivilege { nice: i32 },

    #[error("SCHED_DEADLINE tasks cannot be pinned to a subset of the CPUs (the kernel requires their affinity to cover the whole root domain): drop --cpus and use placement=unpinned, or pin with an exclusive cpuset")]
    DeadlinePinned,

    #[error("SCHED_DEADLINE admission control refused {tasks} reservation(s) of {runtime_ns} ns every {period_ns} ns (the total must fit in sched_rt_runtime_us/sched_rt_period_us of each CPU's bandwidth, minus existing reservations): use a smaller --dl-runtime, a longer --dl-period, or fewer deadline tasks")]
    DeadlineAdmission { tasks: u32, runtime_ns: u64, period_ns: u64 },

    #[error("{bench} cannot run under SCHED_DEADLINE: the kernel refuses fork()/clone() from deadline tasks (EAGAIN); use --policy fifo or rr for this benchmark")]
    DeadlineCannotFork { bench: &'static str },

    #[error("CPU(s) {missing} are not online (online CPUs: {online}): choose CPUs from the online list")]
    CpusAbsent { missing: String, online: String },

    #[error("placement {placement} needs {need} distinct CPUs but only {have} are usable ({cpus}): allow more CPUs with --cpus, or use placement=same-cpu")]
    TooFewCpus { placement: String, need: usize, have: usize, cpus: String },

    #[error("mlockall failed ({detail}): raise RLIMIT_MEMLOCK (ulimit -l unlimited) or run as root, or drop --mlock")]
    Mlock { detail: String },

    #[error("{what} failed: {detail}: {hint}")]
    Os { what: &'static str, detail: String, hint: &'static str },

    #[error("unknown benchmark '{name}': use one of {valid}")]
    UnknownBenchmark { name: String, valid: String },

    #[error("unknown parameter '{key}' for {bench}: valid parameters are {valid}")]
    UnknownParam { bench: &'static str, key: String, valid: String },

    #[error("bad value '{value}' for {bench} parameter {key}: expected {expected}")]
    BadParam { bench: &'static str, key: String, value: String, expected: String },

    #[error("malformed parameters '{input}': write them as key=value pairs separated by commas, e.g. loops=1000,placement=same-cpu")]
    MalformedParams { input: String },

    #[error("parameter {key} is given twice: give each parameter once")]
    DuplicateParam { key: String },

    #[error("repeat must be at least 1 (got {0}): pass --repeat 1 or more")]
    BadRepeat(u32),

    #[error("{alive} threads alive at once exceed the limit of {limit} ({source_}): lower alive= or raise the limit")]
    TooManyThreads { alive: u64, limit: u64, source_: String },

    #[error("bad load '{spec}': {detail}: write none, hackbench:GROUPS, burn:TASKS, write:N, read:N, compile:JOBS, video:N, x:N, stress:'ARGS' or cmd:'COMMAND', optionally with its own condition, e.g. burn:2,nice=10 or hackbench:10,policy=batch,cpus=1")]
    BadLoad { spec: String, detail: String },

    /// A background load that could not run (its files, its command); the
    /// detail names the cause and the fix.
    #[error("load {spec} {detail}")]
    LoadFailed { spec: String, detail: String },

    #[error("{what} needs {tasks} tasks but {limit_name} allows about {limit} more: {fix}")]
    TooManyTasks { what: String, tasks: u64, limit: u64, limit_name: String, fix: &'static str },

    #[error("{what} needs about {} of memory, but {limit_name} is {}: {fix}", format_bytes(*need), format_bytes(*limit))]
    TooMuchMemory { what: String, need: u64, limit: u64, limit_name: String, fix: &'static str },

    #[error("{what} would starve the machine: {busy} busy RT tasks on {cpus} CPU(s) with RT throttling off (kernel.sched_rt_runtime_us = -1): use fewer RT tasks, re-enable throttling (sysctl kernel.sched_rt_runtime_us=950000), or pass --force")]
    WouldStarve { what: String, busy: u64, cpus: usize },

    #[error("{bench} needs {tool}, which is not in PATH: {fix}")]
    MissingTool { bench: &'static str, tool: String, fix: &'static str },

    #[error("{bench}: {what} failed ({status}); its output is in {log}; last lines: {tail}: fix the command or its project and rerun")]
    CommandFailed { bench: &'static str, what: String, status: String, log: String, tail: String },

    #[error("tracing (breaktrace=, split=) needs ftrace, but {detail}: {fix}")]
    Trace { detail: String, fix: &'static str },

    /// `--observe` cannot sample: a bad or too costly rate, a kernel without the detail.
    #[error("--observe: {0}")]
    Observe(String),

    #[error("{bench}: {detail}: the benchmark could not measure; check the system (dmesg, ulimits) and rerun")]
    Measurement { bench: &'static str, detail: String },

    /// The RT watchdog stopped a case whose measurement stalled; the detail
    /// says which task held which CPU and what to change.
    #[error("{bench}: {detail}")]
    WatchdogFired { bench: &'static str, detail: String },

    #[error("{bench} overran its time limit of {limit_s:.0} s and was stopped (the system is far slower than expected, or an RT task starved it): rerun with fewer loops or without an RT policy")]
    Overrun { bench: &'static str, limit_s: f64 },

    /// A case's uclamp, tunables, cgroup or sched_ext scheduler.
    #[error(transparent)]
    Setup(#[from] crate::harness::setup::SetupError),

    #[error("interrupted (Ctrl-C, SIGTERM, timeout or RT watchdog) before the benchmark finished: its partial data was discarded; rerun it to measure")]
    Interrupted,
}

impl LiveError {
    /// A failed system call with its errno and a hint on what to do.
    pub(crate) fn os(what: &'static str, errno: i32, hint: &'static str) -> LiveError {
        LiveError::Os { what, detail: errno_text(errno), hint }
    }

    pub(crate) fn last_os(what: &'static str, hint: &'static str) -> LiveError {
        LiveError::os(what, last_errno(), hint)
    }
}

pub(crate) fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// "1.5 GiB"-style text for a byte count.
pub(crate) fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let (mut v, mut u) = (bytes as f64, 0);
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// "EPERM (Operation not permitted)"-style text for an errno.
pub(crate) fn errno_text(errno: i32) -> String {
    let name = nix::errno::Errno::from_raw(errno);
    format!("{name:?} ({})", std::io::Error::from_raw_os_error(errno))
}
