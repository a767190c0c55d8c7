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
        }
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
        Ok(())
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
    /// Policy string as given, e.g. `cfs[sched_latency_ns=6000000]`.
    pub policy: String,
    pub cpus: u32,
    pub hz: u32,
    pub seed: u64,
}

/// The condition a benchmark result was obtained under.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
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
}
