//! schedlab's live half: benchmarks on the running kernel.
//!
//! ```text
//!   CLI ──> find()/benchmarks() ──> Benchmark::cases(params, plan)   (strict validation, preflight)
//!                                    └─> Benchmark::run(case, plan)  (one case -> BenchResult)
//!                                          │ harness: mlock, RT watchdog, time limit, progress
//!                                          └─ worker thread: apply condition to the measured
//!                                             tasks only, warm up, measure, read back
//! ```
//!
//! This is the only crate with `libc` and `unsafe`. The caller's thread is
//! never given the benchmark's condition: measured tasks are dedicated worker
//! threads or forked children. See `docs/live.md`.

pub mod condition;
pub mod cyclic;
pub mod error;
pub mod exectime;
pub mod fingerprint;
mod ftrace;
pub mod hackbench;
mod harness;
pub mod hygiene;
mod kstat;
pub mod load;
pub mod params;
pub mod pipe;
pub mod readiness;
mod runner;
pub mod spawn;
pub mod threads;
pub mod wakeup;

pub use error::LiveError;
pub use load::LoadSpec;
pub use params::{ParamKind, ParamSpec, Params};

use schedlab_core::{BenchResult, SchedCondition};

/// How to run each case: the condition for the measured tasks, repetitions
/// (measured, after `warmup` discarded ones), quick mode (smaller sizes),
/// background loads and whether to override the starvation guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunPlan {
    pub condition: SchedCondition,
    pub repeat: u32,
    pub warmup: u32,
    pub quick: bool,
    /// Background loads (`--load`). Empty: the benchmark's own default
    /// (e.g. `wakeup` full uses `hackbench:10`); `[none]`: explicitly none.
    pub loads: Vec<LoadSpec>,
    /// Run even when RT busy tasks would starve the machine (`--force`).
    pub force: bool,
    /// The user chose the scheduling condition (`--policy`, `--prio` or
    /// `--nice` given). When false and the condition is plain SCHED_OTHER,
    /// RT benchmarks (wakeup, cyclic, exectime) use their own default RT
    /// policy instead; any non-default condition counts as chosen.
    pub explicit_condition: bool,
}

impl Default for RunPlan {
    fn default() -> Self {
        RunPlan {
            condition: SchedCondition::default(),
            repeat: 5,
            warmup: 1,
            quick: false,
            loads: Vec::new(),
            force: false,
            explicit_condition: false,
        }
    }
}

impl RunPlan {
    /// The condition for a benchmark whose own default is `default`: the
    /// user's when chosen, else `default` with the user's CPU set and mlock.
    pub fn condition_or(&self, default: &SchedCondition) -> SchedCondition {
        let c = &self.condition;
        let chosen = self.explicit_condition
            || c.policy != schedlab_core::SchedPolicy::Other
            || c.priority.is_some()
            || c.nice.is_some();
        if chosen {
            return c.clone();
        }
        SchedCondition { cpus: c.cpus.clone(), mlock: c.mlock || default.mlock, ..default.clone() }
    }

    /// This plan with `condition` in place of the user's (marked as chosen).
    pub fn with_condition(&self, condition: SchedCondition) -> RunPlan {
        RunPlan { condition, explicit_condition: true, ..self.clone() }
    }
}

impl RunPlan {
    /// Benchmarks that create tasks refuse SCHED_DEADLINE: the kernel does not
    /// let deadline tasks fork or clone.
    pub(crate) fn refuse_deadline(&self, bench: &'static str) -> Result<(), LiveError> {
        if self.condition.policy == schedlab_core::SchedPolicy::Deadline {
            return Err(LiveError::DeadlineCannotFork { bench });
        }
        Ok(())
    }
}

pub trait Benchmark: Sync {
    fn name(&self) -> &'static str;
    /// One line for `schedlab list`.
    fn summary(&self) -> &'static str;
    /// Name, default, unit, help (for `schedlab list`).
    fn params(&self) -> &'static [ParamSpec];
    /// Expand user params into concrete cases (e.g. pipe placement=all ->
    /// same-cpu, cross-cpu, unpinned). Validates params and the condition
    /// strictly (CPUs online, privilege probe) before anything runs.
    fn cases(&self, params: &Params, plan: &RunPlan) -> Result<Vec<Params>, LiveError>;
    /// Rough duration of one case, for a progress bar.
    fn estimate_s(&self, case: &Params, plan: &RunPlan) -> f64;
    /// Run one case. Interrupted (stop flag) -> `Err(LiveError::Interrupted)`
    /// after cleaning up; a case that could not measure returns an error.
    fn run(&self, case: &Params, plan: &RunPlan, progress: &dyn Fn(f64)) -> Result<BenchResult, LiveError>;
}

impl std::fmt::Debug for dyn Benchmark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Benchmark({})", self.name())
    }
}

static PIPE: pipe::Pipe = pipe::Pipe;
static SPAWN: spawn::Spawn = spawn::Spawn;
static THREADS: threads::Threads = threads::Threads;
static HACKBENCH: hackbench::Hackbench = hackbench::Hackbench;
static WAKEUP: wakeup::Wakeup = wakeup::Wakeup;
static CYCLIC: cyclic::Cyclic = cyclic::Cyclic;
static EXECTIME: exectime::ExecTime = exectime::ExecTime;

/// All benchmarks, in suite order.
pub fn benchmarks() -> Vec<&'static dyn Benchmark> {
    vec![&PIPE, &SPAWN, &THREADS, &HACKBENCH, &WAKEUP, &CYCLIC, &EXECTIME]
}

/// Look a benchmark up by name (case-insensitive).
pub fn find(name: &str) -> Result<&'static dyn Benchmark, LiveError> {
    let all = benchmarks();
    all.iter().copied().find(|b| b.name().eq_ignore_ascii_case(name.trim())).ok_or_else(|| {
        LiveError::UnknownBenchmark {
            name: name.to_string(),
            valid: all.iter().map(|b| b.name()).collect::<Vec<_>>().join(", "),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_finds_by_name_and_lists_valid_names() {
        assert_eq!(find("PIPE").unwrap().name(), "pipe");
        let e = find("hackbenchx").unwrap_err().to_string();
        assert!(e.contains("pipe, spawn, threads, hackbench, wakeup, cyclic, exectime"), "{e}");
        for b in benchmarks() {
            assert!(!b.summary().is_empty());
            for p in b.params() {
                assert!(!p.help.is_empty(), "{}.{} has no help", b.name(), p.name);
                // Every default must pass its own validation.
                Params::new().resolve(b.name(), b.params(), false).unwrap();
                Params::new().resolve(b.name(), b.params(), true).unwrap();
            }
        }
    }
}
