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

pub mod benchmarks;
pub mod error;
mod harness;
mod host;

pub use benchmarks::{all as benchmarks, find};
pub use error::LiveError;
pub use harness::load::LoadSpec;
pub use harness::params::{ParamKind, ParamSpec, Params};
pub use harness::{cgroup, condition, hygiene, load, observe, params, recovery};
pub use host::{fingerprint, readiness};

use schedlab_core::{BenchResult, SchedCondition};

/// How to run each case: the condition for the measured tasks, repetitions
/// (measured, after `warmup` discarded ones), quick mode (smaller sizes),
/// background loads, whether to override the starvation guard and whether
/// to read the kernel's counters.
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
    /// Read the kernel's counters of the measured tasks around every
    /// measured repetition (`kernel.*` metrics; `--no-counters` turns it off).
    pub counters: bool,
    /// Sample the measured and load tasks' scheduler state while the case
    /// runs (`--observe[=RATE]`, `harness/observe.rs`).
    pub observe: Option<harness::observe::Observe>,
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
            counters: true,
            observe: None,
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
        SchedCondition { cpus: c.cpus.clone(), mlock: c.mlock || default.mlock, ..default.clone() }.with_setup_of(c)
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
    /// The loop this benchmark runs in an exec'd, single-threaded runner
    /// process (`harness/runner.rs`), if it measures in one.
    fn runner(&self) -> Option<harness::runner::RunnerEntry> {
        None
    }
}

impl std::fmt::Debug for dyn Benchmark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Benchmark({})", self.name())
    }
}
