//! The scheduling condition a benchmark runs under, as data.
//!
//! Validation that needs no kernel (priority ranges, nice range, deadline
//! ordering) lives here; applying a condition to threads is `schedlab-live`'s
//! job, and it records what the kernel actually granted.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Linux scheduling policies (see sched(7)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchedPolicy {
    Other,
    Batch,
    Idle,
    Fifo,
    Rr,
    Deadline,
}

impl SchedPolicy {
    pub const ALL: [SchedPolicy; 6] = [
        SchedPolicy::Other,
        SchedPolicy::Batch,
        SchedPolicy::Idle,
        SchedPolicy::Fifo,
        SchedPolicy::Rr,
        SchedPolicy::Deadline,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SchedPolicy::Other => "other",
            SchedPolicy::Batch => "batch",
            SchedPolicy::Idle => "idle",
            SchedPolicy::Fifo => "fifo",
            SchedPolicy::Rr => "rr",
            SchedPolicy::Deadline => "deadline",
        }
    }

    pub fn is_realtime(self) -> bool {
        matches!(self, SchedPolicy::Fifo | SchedPolicy::Rr | SchedPolicy::Deadline)
    }

    /// Fixed-priority RT classes: the ones that take `--prio`.
    pub fn takes_priority(self) -> bool {
        matches!(self, SchedPolicy::Fifo | SchedPolicy::Rr)
    }

    /// Policies whose weight comes from nice.
    pub fn takes_nice(self) -> bool {
        matches!(self, SchedPolicy::Other | SchedPolicy::Batch)
    }
}

impl fmt::Display for SchedPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SchedPolicy {
    type Err = ConditionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        let stripped = lower.strip_prefix("sched_").unwrap_or(&lower);
        SchedPolicy::ALL
            .into_iter()
            .find(|p| p.name() == stripped || (stripped == "normal" && *p == SchedPolicy::Other))
            .ok_or_else(|| ConditionError::UnknownPolicy(s.to_string()))
    }
}

/// SCHED_DEADLINE reservation, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadlineParams {
    pub runtime_ns: u64,
    pub deadline_ns: u64,
    pub period_ns: u64,
}

/// Minimum and maximum RT priority for FIFO/RR on Linux.
pub const RT_PRIO_MIN: u32 = 1;
pub const RT_PRIO_MAX: u32 = 99;
pub const NICE_MIN: i32 = -20;
pub const NICE_MAX: i32 = 19;
/// The kernel refuses deadline parameters below 1 us (sched_dl's resolution
/// is 2^10 ns; anything smaller is rounded to nothing).
pub const DEADLINE_MIN_NS: u64 = 1024;

/// What a benchmark's threads should run under: one policy with its
/// parameters, an optional CPU set and memory locking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedCondition {
    pub policy: SchedPolicy,
    /// RT priority for FIFO/RR (1..=99).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    /// Nice for OTHER/BATCH (-20..=19).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nice: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<DeadlineParams>,
    /// CPUs the threads may run on; `None` means inherit (usually all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<Vec<usize>>,
    #[serde(default)]
    pub mlock: bool,
    /// Utilisation clamps (0..=1024) of each measured task (sched_setattr's
    /// util_min/util_max; kernels with CONFIG_UCLAMP_TASK).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uclamp_min: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uclamp_max: Option<u32>,
    /// The case-level settings below change the whole machine (or a cgroup)
    /// for the duration of a case and are put back after it.
    /// Kernel scheduler tunables, in the order given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tunables: Vec<Tunable>,
    /// A temporary cgroup v2 the measured tasks run in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<CgroupSetting>,
    /// A sched_ext scheduler loaded for the case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scx: Option<ScxSetting>,
}

impl Default for SchedCondition {
    fn default() -> Self {
        SchedCondition {
            policy: SchedPolicy::Other,
            priority: None,
            nice: None,
            deadline: None,
            cpus: None,
            mlock: false,
            uclamp_min: None,
            uclamp_max: None,
            tunables: Vec::new(),
            cgroup: None,
            scx: None,
        }
    }
}

/// Highest utilisation clamp value (SCHED_CAPACITY_SCALE).
pub const UCLAMP_SCALE: u32 = 1024;
/// cgroup v2 `cpu.weight` range.
pub const CGROUP_WEIGHT_MIN: u32 = 1;
pub const CGROUP_WEIGHT_MAX: u32 = 10_000;
/// cgroup v2 `cpu.max` bounds the kernel accepts, in microseconds: a quota of
/// at least 1 ms, a period from 1 ms to 1 s.
pub const CPU_MAX_QUOTA_MIN_US: u64 = 1_000;
pub const CPU_MAX_PERIOD_MIN_US: u64 = 1_000;
pub const CPU_MAX_PERIOD_MAX_US: u64 = 1_000_000;
/// The period `--cgroup-max QUOTA` gets when none is given (the kernel's default).
pub const CPU_MAX_PERIOD_DEFAULT_US: u64 = 100_000;

/// One kernel scheduler tunable: `name` as the user wrote it (a file under
/// /sys/kernel/debug/sched/ such as `base_slice_ns`, or a sysctl such as
/// `kernel.sched_rt_runtime_us`) and the value to write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tunable {
    pub name: String,
    pub value: String,
}

impl Tunable {
    /// Parse `NAME=VALUE`.
    pub fn parse(s: &str) -> Result<Tunable, ConditionError> {
        let bad = |why: &str| ConditionError::BadTunable { given: s.to_string(), why: why.to_string() };
        let (name, value) = s.split_once('=').ok_or_else(|| bad("no '='"))?;
        let t = Tunable { name: name.trim().to_string(), value: value.trim().to_string() };
        t.check().map_err(|why| bad(&why))?;
        Ok(t)
    }

    fn check(&self) -> Result<(), String> {
        let n = &self.name;
        if n.is_empty() {
            return Err("the name is empty".into());
        }
        if n.len() > 128
            || n.starts_with('/')
            || n.split('/').any(|part| part.is_empty() || part == "." || part == "..")
            || !n.chars().all(|c| c.is_ascii_alphanumeric() || "_.-/".contains(c))
        {
            return Err("a name is letters, digits, '_', '.', '-' and '/' between path parts".into());
        }
        if self.value.is_empty() {
            return Err("the value is empty".into());
        }
        if self.value.len() > 256 || self.value.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err("a value is one word of at most 256 characters".into());
        }
        Ok(())
    }
}

/// cgroup v2 `cpu.max`: a quota (None: "max", no limit) per period, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuMax {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_us: Option<u64>,
    pub period_us: u64,
}

impl CpuMax {
    /// Parse `QUOTA[/PERIOD]`: each a duration with a unit (`50ms/100ms`) or
    /// a bare number of microseconds as `cpu.max` itself takes (`50000/100000`);
    /// QUOTA may be `max`. The period defaults to 100 ms.
    pub fn parse(s: &str) -> Result<CpuMax, ConditionError> {
        let bad = |why: String| ConditionError::BadCpuMax { given: s.to_string(), why };
        let us = |t: &str| -> Result<u64, ConditionError> {
            let t = t.trim();
            if let Ok(n) = t.parse::<u64>() {
                return Ok(n);
            }
            let ns = crate::units::parse_duration_ns(t).map_err(bad)?;
            if ns % 1000 != 0 {
                return Err(bad(format!("'{t}' is not a whole number of microseconds")));
            }
            Ok(ns / 1000)
        };
        let (q, p) = s.split_once('/').map_or((s, None), |(q, p)| (q, Some(p)));
        let quota_us = if q.trim() == "max" { None } else { Some(us(q)?) };
        let period_us = match p {
            Some(p) => us(p)?,
            None => CPU_MAX_PERIOD_DEFAULT_US,
        };
        let c = CpuMax { quota_us, period_us };
        c.check().map_err(bad)?;
        Ok(c)
    }

    fn check(&self) -> Result<(), String> {
        if !(CPU_MAX_PERIOD_MIN_US..=CPU_MAX_PERIOD_MAX_US).contains(&self.period_us) {
            return Err(format!("the period {} us is outside 1000..1000000 us (1 ms to 1 s)", self.period_us));
        }
        if let Some(q) = self.quota_us {
            if q < CPU_MAX_QUOTA_MIN_US {
                return Err(format!("the quota {q} us is below the kernel's 1000 us (1 ms) minimum"));
            }
        }
        Ok(())
    }

    /// The text `cpu.max` takes and shows: "50000 100000" or "max 100000".
    pub fn file_text(&self) -> String {
        match self.quota_us {
            Some(q) => format!("{q} {}", self.period_us),
            None => format!("max {}", self.period_us),
        }
    }

    /// Read `cpu.max`'s text back.
    pub fn from_file_text(s: &str) -> Option<CpuMax> {
        let mut w = s.split_whitespace();
        let quota_us = match w.next()? {
            "max" => None,
            q => Some(q.parse().ok()?),
        };
        Some(CpuMax { quota_us, period_us: w.next()?.parse().ok()? })
    }
}

impl fmt::Display for CpuMax {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |us: u64| crate::units::exact_duration(us * 1000);
        match self.quota_us {
            Some(q) => write!(f, "{}/{}", ms(q), ms(self.period_us)),
            None => write!(f, "max/{}", ms(self.period_us)),
        }
    }
}

/// The temporary cgroup of a case: limits its measured tasks share. No
/// limit at all still runs them in a cgroup of their own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupSetting {
    /// `cpu.weight` (1..=10000, the kernel's default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// `cpu.max`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<CpuMax>,
    /// `cpuset.cpus`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<Vec<usize>>,
}

/// A sched_ext scheduler: the binary `scx_<name>`, or a command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScxSetting {
    /// `lavd` for `scx_lavd`; read back, the ops name the kernel reports.
    pub name: String,
    /// The command line as given (`--scx-cmd`), when not just `scx_<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmd: Option<String>,
}

impl ScxSetting {
    /// `--scx NAME` (with or without the `scx_` prefix).
    pub fn named(name: &str) -> Result<ScxSetting, ConditionError> {
        let n = name.trim();
        let n = n.strip_prefix("scx_").unwrap_or(n);
        if n.is_empty() || n.len() > 64 || !n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(ConditionError::BadScx(name.to_string()));
        }
        Ok(ScxSetting { name: n.to_string(), cmd: None })
    }

    /// `--scx-cmd '...'`: named after its program (`scx_rusty --slice-us 5000` is `rusty`).
    pub fn command(cmd: &str) -> Result<ScxSetting, ConditionError> {
        let program = cmd.split_whitespace().next().ok_or(ConditionError::EmptyScxCommand)?;
        let base = program.trim_matches(|c| c == '\'' || c == '"').rsplit('/').next().unwrap_or(program);
        let name = base.strip_prefix("scx_").unwrap_or(base);
        let name: String = name.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-').collect();
        Ok(ScxSetting { name: if name.is_empty() { "custom".into() } else { name }, cmd: Some(cmd.trim().to_string()) })
    }
}

impl SchedCondition {
    /// Check everything that can be checked without the kernel. CPU existence
    /// and privilege are checked by the live layer when it applies this.
    pub fn validate(&self) -> Result<(), ConditionError> {
        let p = self.policy;
        match (p.takes_priority(), self.priority) {
            (true, None) => {}
            (true, Some(prio)) if !(RT_PRIO_MIN..=RT_PRIO_MAX).contains(&prio) => {
                return Err(ConditionError::PriorityOutOfRange { policy: p, prio })
            }
            (false, Some(prio)) => return Err(ConditionError::PriorityNotApplicable { policy: p, prio }),
            _ => {}
        }
        if let Some(nice) = self.nice {
            if !(NICE_MIN..=NICE_MAX).contains(&nice) {
                return Err(ConditionError::NiceOutOfRange(nice));
            }
            if !p.takes_nice() && p != SchedPolicy::Idle {
                return Err(ConditionError::NiceNotApplicable { policy: p });
            }
        }
        match (p, &self.deadline) {
            (SchedPolicy::Deadline, None) => return Err(ConditionError::DeadlineParamsMissing),
            (SchedPolicy::Deadline, Some(d)) => {
                if d.runtime_ns < DEADLINE_MIN_NS {
                    return Err(ConditionError::DeadlineTooSmall(d.runtime_ns));
                }
                if !(d.runtime_ns <= d.deadline_ns && d.deadline_ns <= d.period_ns) {
                    return Err(ConditionError::DeadlineOrder(*d));
                }
            }
            (_, Some(_)) => return Err(ConditionError::DeadlineParamsNotApplicable { policy: p }),
            _ => {}
        }
        if let Some(cpus) = &self.cpus {
            if cpus.is_empty() {
                return Err(ConditionError::EmptyCpuList);
            }
        }
        self.validate_setup()
    }

    /// The uclamp, tunable, cgroup and sched_ext parts of [`Self::validate`].
    fn validate_setup(&self) -> Result<(), ConditionError> {
        for v in [self.uclamp_min, self.uclamp_max].into_iter().flatten() {
            if v > UCLAMP_SCALE {
                return Err(ConditionError::UclampOutOfRange(v));
            }
        }
        if let (Some(min), Some(max)) = (self.uclamp_min, self.uclamp_max) {
            if min > max {
                return Err(ConditionError::UclampOrder { min, max });
            }
        }
        for (i, t) in self.tunables.iter().enumerate() {
            t.check().map_err(|why| ConditionError::BadTunable { given: format!("{}={}", t.name, t.value), why })?;
            if self.tunables[..i].iter().any(|o| o.name == t.name) {
                return Err(ConditionError::DuplicateTunable(t.name.clone()));
            }
        }
        if let Some(cg) = &self.cgroup {
            if let Some(w) = cg.weight {
                if !(CGROUP_WEIGHT_MIN..=CGROUP_WEIGHT_MAX).contains(&w) {
                    return Err(ConditionError::CgroupWeightOutOfRange(w));
                }
            }
            if let Some(m) = &cg.max {
                m.check().map_err(|why| ConditionError::BadCpuMax { given: m.file_text(), why })?;
            }
            if cg.cpus.as_ref().is_some_and(Vec::is_empty) {
                return Err(ConditionError::EmptyCpuList);
            }
        }
        if let Some(scx) = &self.scx {
            match &scx.cmd {
                Some(c) if c.trim().is_empty() => return Err(ConditionError::EmptyScxCommand),
                Some(_) => {}
                None => {
                    ScxSetting::named(&scx.name)?;
                }
            }
        }
        Ok(())
    }

    /// Whether anything beyond the measured tasks' own attributes is asked
    /// for: tunables, a cgroup or a sched_ext scheduler, which a case sets
    /// up before it runs and puts back after.
    pub fn has_case_setup(&self) -> bool {
        !self.tunables.is_empty() || self.cgroup.is_some() || self.scx.is_some()
    }

    /// `self` with the uclamp, tunable, cgroup and sched_ext settings of
    /// `other` (a benchmark's own default condition keeps the user's).
    pub fn with_setup_of(mut self, other: &SchedCondition) -> SchedCondition {
        self.uclamp_min = other.uclamp_min;
        self.uclamp_max = other.uclamp_max;
        self.tunables = other.tunables.clone();
        self.cgroup = other.cgroup.clone();
        self.scx = other.scx.clone();
        self
    }

    /// The RT priority to use: the requested one or a documented default.
    pub fn effective_priority(&self) -> u32 {
        self.priority.unwrap_or(if self.policy.takes_priority() { 50 } else { 0 })
    }

    /// Compact human form, e.g. "fifo:95 cpus=0-1 mlock".
    pub fn label(&self) -> String {
        let mut s = self.policy.name().to_string();
        if self.policy.takes_priority() {
            s.push_str(&format!(":{}", self.effective_priority()));
        }
        if let Some(n) = self.nice {
            s.push_str(&format!(" nice={n}"));
        }
        if let Some(d) = &self.deadline {
            s.push_str(&format!(" dl={}/{}/{}us", d.runtime_ns / 1000, d.deadline_ns / 1000, d.period_ns / 1000));
        }
        if let Some(c) = &self.cpus {
            s.push_str(&format!(" cpus={}", format_cpu_list(c)));
        }
        if self.mlock {
            s.push_str(" mlock");
        }
        if self.uclamp_min.is_some() || self.uclamp_max.is_some() {
            let side = |v: Option<u32>| v.map(|v| v.to_string()).unwrap_or_default();
            s.push_str(&format!(" uclamp={}..{}", side(self.uclamp_min), side(self.uclamp_max)));
        }
        for t in &self.tunables {
            s.push_str(&format!(" {}={}", t.name, t.value));
        }
        if let Some(cg) = &self.cgroup {
            let mut parts = Vec::new();
            if let Some(w) = cg.weight {
                parts.push(format!("weight={w}"));
            }
            if let Some(m) = &cg.max {
                parts.push(format!("max={m}"));
            }
            if let Some(c) = &cg.cpus {
                parts.push(format!("cpus={}", format_cpu_list(c)));
            }
            s.push_str(if parts.is_empty() { " cgroup" } else { " cgroup:" });
            s.push_str(&parts.join(","));
        }
        if let Some(scx) = &self.scx {
            s.push_str(&format!(" scx={}", scx.name));
        }
        s
    }
}

/// Highest CPU number a list may name: far above any kernel's NR_CPUS
/// (8192 at most), and it bounds a list at 64 Ki entries however it is
/// written (many ranges each below a per-range cap could take gigabytes).
pub const CPU_ID_MAX: usize = 65_535;

/// Parse a CPU list such as "0,2-3". Sorted, without duplicates.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, ConditionError> {
    let bad = || ConditionError::BadCpuList(s.to_string());
    let cpu = |t: &str| t.trim().parse::<usize>().ok().filter(|&n| n <= CPU_ID_MAX).ok_or_else(bad);
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(bad());
        }
        if let Some((a, b)) = part.split_once('-') {
            let (a, b) = (cpu(a)?, cpu(b)?);
            if a > b {
                return Err(bad());
            }
            out.extend(a..=b);
        } else {
            out.push(cpu(part)?);
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Inverse of [`parse_cpu_list`]: "0-3,6".
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        parts.push(if start == end { start.to_string() } else { format!("{start}-{end}") });
        i += 1;
    }
    parts.join(",")
}

/// The setup of a simulated run, recorded where a live run records its
/// scheduling condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimSetup {
    /// Policy string as given, e.g. `cfs[sched_latency=6000000]`.
    pub policy: String,
    pub cpus: u32,
    pub hz: u32,
    pub seed: u64,
}

/// The condition a benchmark result was obtained under.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
// One per result and never in a hot path: boxing the live conditions would
// only make every match on them noisier.
#[allow(clippy::large_enum_variant)]
pub enum Condition {
    Live {
        requested: SchedCondition,
        /// What the kernel granted, read back after applying. `None` if it
        /// could not be read back.
        applied: Option<SchedCondition>,
        /// Background loads, as given on the command line (e.g. "burn:2").
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        loads: Vec<String>,
    },
    Sim(SimSetup),
}

impl Condition {
    pub fn label(&self) -> String {
        match self {
            Condition::Live { requested, applied, loads } => {
                let mut s = applied.as_ref().unwrap_or(requested).label();
                for l in loads {
                    s.push_str(&format!(" +load {l}"));
                }
                s
            }
            Condition::Sim(sim) => format!("sim {} cpus={} hz={} seed={}", sim.policy, sim.cpus, sim.hz, sim.seed),
        }
    }

    /// What makes results of one benchmark case the same condition, so that
    /// they pool as replicates: the requested live condition and its loads
    /// (not what was read back, which may differ per invocation), or the
    /// simulated setup without its seed (seeds are the replicates).
    pub fn case_label(&self) -> String {
        match self {
            Condition::Live { requested, loads, .. } => {
                let mut s = requested.label();
                for l in loads {
                    s.push_str(&format!(" +load {l}"));
                }
                s
            }
            Condition::Sim(sim) => format!("sim {} cpus={} hz={}", sim.policy, sim.cpus, sim.hz),
        }
    }
}

fn fmt_ns(ns: u64) -> String {
    crate::units::format_duration_ns(ns as f64)
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConditionError {
    #[error("unknown policy '{0}': use one of other, batch, idle, fifo, rr, deadline")]
    UnknownPolicy(String),
    #[error("priority {prio} is out of range for {policy}: use --prio between 1 and 99")]
    PriorityOutOfRange { policy: SchedPolicy, prio: u32 },
    #[error("--prio {prio} does not apply to policy {policy}: only fifo and rr take an RT priority (use --nice for other/batch)")]
    PriorityNotApplicable { policy: SchedPolicy, prio: u32 },
    #[error("nice {0} is out of range: use --nice between -20 and 19")]
    NiceOutOfRange(i32),
    #[error("--nice does not apply to policy {policy}: nice only weights other, batch and idle tasks (use --prio for fifo/rr)")]
    NiceNotApplicable { policy: SchedPolicy },
    #[error("policy deadline needs --dl-runtime, --dl-deadline and --dl-period (e.g. --dl-runtime 100us --dl-deadline 1ms --dl-period 1ms)")]
    DeadlineParamsMissing,
    #[error("deadline parameters only apply to policy deadline, not {policy}: drop --dl-* or use --policy deadline")]
    DeadlineParamsNotApplicable { policy: SchedPolicy },
    #[error("deadline runtime {0} ns is below the kernel's 1024 ns minimum: raise --dl-runtime")]
    DeadlineTooSmall(u64),
    #[error("deadline parameters must satisfy runtime <= deadline <= period (got runtime {}, deadline {}, period {}): fix --dl-runtime/--dl-deadline/--dl-period", fmt_ns(.0.runtime_ns), fmt_ns(.0.deadline_ns), fmt_ns(.0.period_ns))]
    DeadlineOrder(DeadlineParams),
    #[error("bad CPU list '{0}': write CPUs as numbers (0 to 65535) and ranges, e.g. 0,2-3")]
    BadCpuList(String),
    #[error("the CPU list is empty: name at least one CPU, e.g. --cpus 0")]
    EmptyCpuList,
    #[error("utilisation clamp {0} is out of range: use --uclamp-min/--uclamp-max between 0 and 1024")]
    UclampOutOfRange(u32),
    #[error("--uclamp-min {min} is above --uclamp-max {max}: the minimum clamp must not exceed the maximum")]
    UclampOrder { min: u32, max: u32 },
    #[error("bad tunable '{given}': {why}: write NAME=VALUE, e.g. --tunable base_slice_ns=3000000 or --tunable kernel.sched_rt_runtime_us=950000")]
    BadTunable { given: String, why: String },
    #[error("tunable {0} is given twice: give each tunable once")]
    DuplicateTunable(String),
    #[error("cgroup weight {0} is out of range: use --cgroup-weight between 1 and 10000 (the default is 100)")]
    CgroupWeightOutOfRange(u32),
    #[error("bad --cgroup-max '{given}': {why}: write QUOTA/PERIOD, e.g. 50ms/100ms or 50000/100000 (microseconds, as cpu.max), or max/100ms")]
    BadCpuMax { given: String, why: String },
    #[error("bad sched_ext scheduler name '{0}': give the part after scx_ (e.g. --scx lavd for scx_lavd), or a command with --scx-cmd")]
    BadScx(String),
    #[error("--scx-cmd is empty: give the scheduler's command line, e.g. --scx-cmd 'scx_rusty --slice-us 5000'")]
    EmptyScxCommand,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(policy: SchedPolicy) -> SchedCondition {
        SchedCondition { policy, ..Default::default() }
    }

    #[test]
    fn policy_names_parse_with_and_without_prefix() {
        assert_eq!("FIFO".parse::<SchedPolicy>().unwrap(), SchedPolicy::Fifo);
        assert_eq!("sched_rr".parse::<SchedPolicy>().unwrap(), SchedPolicy::Rr);
        assert_eq!("normal".parse::<SchedPolicy>().unwrap(), SchedPolicy::Other);
        assert!(matches!("rt".parse::<SchedPolicy>(), Err(ConditionError::UnknownPolicy(_))));
    }

    #[test]
    fn priority_rules_follow_the_policy() {
        let mut c = cond(SchedPolicy::Fifo);
        c.priority = Some(100);
        assert!(matches!(c.validate(), Err(ConditionError::PriorityOutOfRange { .. })));
        c.priority = Some(0);
        assert!(c.validate().is_err());
        c.priority = Some(99);
        assert!(c.validate().is_ok());
        let mut o = cond(SchedPolicy::Other);
        o.priority = Some(10);
        assert!(matches!(o.validate(), Err(ConditionError::PriorityNotApplicable { .. })));
    }

    #[test]
    fn nice_rules() {
        let mut c = cond(SchedPolicy::Other);
        c.nice = Some(20);
        assert_eq!(c.validate(), Err(ConditionError::NiceOutOfRange(20)));
        c.nice = Some(-20);
        assert!(c.validate().is_ok());
        let mut f = cond(SchedPolicy::Fifo);
        f.nice = Some(5);
        assert!(matches!(f.validate(), Err(ConditionError::NiceNotApplicable { .. })));
    }

    #[test]
    fn deadline_ordering_is_enforced() {
        let mut c = cond(SchedPolicy::Deadline);
        assert_eq!(c.validate(), Err(ConditionError::DeadlineParamsMissing));
        c.deadline = Some(DeadlineParams { runtime_ns: 2_000_000, deadline_ns: 1_000_000, period_ns: 1_000_000 });
        assert!(matches!(c.validate(), Err(ConditionError::DeadlineOrder(_))));
        c.deadline = Some(DeadlineParams { runtime_ns: 100_000, deadline_ns: 1_000_000, period_ns: 500_000 });
        assert!(matches!(c.validate(), Err(ConditionError::DeadlineOrder(_))));
        c.deadline = Some(DeadlineParams { runtime_ns: 100_000, deadline_ns: 1_000_000, period_ns: 1_000_000 });
        assert!(c.validate().is_ok());
    }

    #[test]
    fn cpu_lists_round_trip() {
        assert_eq!(parse_cpu_list("3,0-1,1").unwrap(), vec![0, 1, 3]);
        assert_eq!(format_cpu_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert!(parse_cpu_list("1-").is_err());
        assert!(parse_cpu_list("2-1").is_err());
        assert!(parse_cpu_list("a").is_err());
        assert!(parse_cpu_list("").is_err());
        // Found by reading for tests/fuzz_parsers.rs: ranges were capped one
        // by one, so a long list of them took gigabytes; ids are capped now.
        assert!(parse_cpu_list("65536").is_err());
        assert!(parse_cpu_list("0-65535,65536-131071").is_err());
        assert_eq!(parse_cpu_list("65535").unwrap(), vec![CPU_ID_MAX]);
    }

    #[test]
    fn labels_are_compact() {
        let c = SchedCondition {
            policy: SchedPolicy::Fifo,
            priority: Some(95),
            cpus: Some(vec![0, 1]),
            mlock: true,
            ..Default::default()
        };
        assert_eq!(c.label(), "fifo:95 cpus=0-1 mlock");
    }

    #[test]
    fn case_setup_settings_label_briefly() {
        let c = SchedCondition {
            uclamp_min: Some(256),
            tunables: vec![Tunable::parse("base_slice_ns=3000000").unwrap()],
            cgroup: Some(CgroupSetting {
                weight: Some(50),
                max: Some(CpuMax::parse("50ms/100ms").unwrap()),
                cpus: Some(vec![0, 1]),
            }),
            scx: Some(ScxSetting::named("scx_lavd").unwrap()),
            ..Default::default()
        };
        assert_eq!(
            c.label(),
            "other uclamp=256.. base_slice_ns=3000000 cgroup:weight=50,max=50ms/100ms,cpus=0-1 scx=lavd"
        );
        let empty_cgroup = SchedCondition { cgroup: Some(CgroupSetting::default()), ..Default::default() };
        assert_eq!(empty_cgroup.label(), "other cgroup");
        assert!(c.has_case_setup() && !SchedCondition::default().has_case_setup());
    }

    #[test]
    fn old_stored_conditions_still_decode() {
        // A condition as stored before uclamp, tunables, cgroups and sched_ext existed.
        let old: SchedCondition = serde_json::from_str(r#"{"policy":"fifo","priority":90,"mlock":true}"#).unwrap();
        assert_eq!(old.tunables, Vec::new());
        assert_eq!((old.uclamp_min, old.cgroup.clone(), old.scx.clone()), (None, None, None));
        // New fields are left out when unset, so such conditions also read back in older schedlabs.
        assert_eq!(serde_json::to_string(&old).unwrap(), r#"{"policy":"fifo","priority":90,"mlock":true}"#);
        let c = SchedCondition { uclamp_max: Some(512), scx: Some(ScxSetting::named("rusty").unwrap()), ..old };
        let back: SchedCondition = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn uclamp_ranges_and_order() {
        let mut c = SchedCondition { uclamp_min: Some(1025), ..Default::default() };
        assert_eq!(c.validate(), Err(ConditionError::UclampOutOfRange(1025)));
        c.uclamp_min = Some(600);
        c.uclamp_max = Some(500);
        assert_eq!(c.validate(), Err(ConditionError::UclampOrder { min: 600, max: 500 }));
        c.uclamp_max = Some(1024);
        assert!(c.validate().is_ok());
    }

    #[test]
    fn tunables_parse_and_refuse_bad_input() {
        let t = Tunable::parse(" kernel.sched_rt_runtime_us = -1 ").unwrap();
        assert_eq!((t.name.as_str(), t.value.as_str()), ("kernel.sched_rt_runtime_us", "-1"));
        assert_eq!(Tunable::parse("numa_balancing/scan_delay_ms=1000").unwrap().name, "numa_balancing/scan_delay_ms");
        for (bad, why) in [
            ("base_slice_ns", "no '='"),
            ("=5", "name is empty"),
            ("base_slice_ns=", "value is empty"),
            ("../../etc/passwd=x", "a name is"),
            ("/proc/sys/kernel/x=1", "a name is"),
            ("a//b=1", "a name is"),
            ("base slice=1", "a name is"),
            ("x=1 2", "one word"),
        ] {
            let e = Tunable::parse(bad).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains("NAME=VALUE"), "{bad}: {e}");
        }
        let dup = SchedCondition {
            tunables: vec![Tunable::parse("a=1").unwrap(), Tunable::parse("a=2").unwrap()],
            ..Default::default()
        };
        assert_eq!(dup.validate(), Err(ConditionError::DuplicateTunable("a".into())));
    }

    #[test]
    fn cpu_max_takes_durations_or_microseconds() {
        assert_eq!(CpuMax::parse("50ms/100ms").unwrap(), CpuMax { quota_us: Some(50_000), period_us: 100_000 });
        assert_eq!(CpuMax::parse("50000/100000").unwrap().file_text(), "50000 100000");
        assert_eq!(CpuMax::parse("max/20ms").unwrap().file_text(), "max 20000");
        assert_eq!(CpuMax::parse("25ms").unwrap().period_us, CPU_MAX_PERIOD_DEFAULT_US);
        assert_eq!(CpuMax::from_file_text("max 100000\n"), Some(CpuMax { quota_us: None, period_us: 100_000 }));
        assert_eq!(CpuMax::from_file_text("7"), None);
        for bad in ["500us/100ms", "50ms/2s", "50ms/500us", "abc", "50ms/", "1500ns/1ms", "-5ms/10ms"] {
            let e = CpuMax::parse(bad).unwrap_err().to_string();
            assert!(e.contains("QUOTA/PERIOD"), "{bad}: {e}");
        }
        let w = SchedCondition {
            cgroup: Some(CgroupSetting { weight: Some(0), ..Default::default() }),
            ..Default::default()
        };
        assert_eq!(w.validate(), Err(ConditionError::CgroupWeightOutOfRange(0)));
    }

    #[test]
    fn scx_names_and_commands() {
        assert_eq!(ScxSetting::named("lavd").unwrap().name, "lavd");
        assert_eq!(ScxSetting::named("scx_rusty").unwrap().name, "rusty");
        assert!(ScxSetting::named("../bin/sh").is_err());
        assert!(ScxSetting::named("").is_err());
        let c = ScxSetting::command("/usr/bin/scx_bpfland --slice-us 5000").unwrap();
        assert_eq!((c.name.as_str(), c.cmd.as_deref()), ("bpfland", Some("/usr/bin/scx_bpfland --slice-us 5000")));
        assert_eq!(ScxSetting::command("  "), Err(ConditionError::EmptyScxCommand));
    }
}
