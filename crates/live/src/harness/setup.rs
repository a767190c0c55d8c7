//! A case's machine-wide setup: the settings of a [`SchedCondition`] that
//! are not one task's attributes — a sched_ext scheduler (`scx`), kernel
//! scheduler tunables (`tunables`) and a temporary cgroup for the measured
//! tasks (`cgroup`). `drive` applies them before the case's loads start and
//! puts them back after it, in reverse order, on every exit path (the guard's
//! drop); tunables and the cgroup are written down in recovery records first,
//! and a sched_ext scheduler dies with this process (PR_SET_PDEATHSIG), so a
//! SIGKILL leaves nothing that `schedlab check --restore` cannot undo.
//!
//! ```text
//!  preflight(cond)   names, privileges, kernel support: before anything runs
//!  CaseSetup::apply  scx start ─> tunables (record, write, read back) ─> cgroup
//!                    (record, mkdir, limits, read back); what was read back is
//!                    kept for this thread's next `harness::result`
//!  ... loads, measured tasks (condition::apply moves them into the cgroup) ...
//!  finish / drop     cgroup removed ─> tunables restored ─> scx stopped
//! ```

use crate::error::{errno_text, LiveError};
use crate::harness::{cgroup, scx, tunables};
use schedlab_core::condition::{CgroupSetting, ScxSetting, Tunable};
use schedlab_core::SchedCondition;
use std::cell::RefCell;

/// What can be wrong with a condition's setup; each message names the
/// problem and the fix.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("{what} needs root: run schedlab as root (sudo)")]
    NotRoot { what: &'static str },

    #[error("unknown tunable '{name}': {looked}; {similar}")]
    UnknownTunable { name: String, looked: String, similar: String },

    #[error("'{name}' is not a scheduler tunable: {why}")]
    NotATunable { name: String, why: String },

    #[error("tunable {name} ({path}) is read-only: choose a writable tunable")]
    ReadOnly { name: String, path: String },

    #[error("the kernel refused {value} for {name} ({path}): {errno}; it holds {current}: give a value the kernel accepts (range, format)")]
    Refused { name: String, value: String, path: String, errno: String, current: String },

    #[error("the scheduler's debugfs tunables are unavailable: {detail}: {fix}")]
    Debugfs { detail: String, fix: &'static str },

    #[error("utilisation clamps (--uclamp-min/--uclamp-max) were refused by sched_setattr: {errno}: {fix}")]
    Uclamp { errno: String, fix: &'static str },

    #[error("--cgroup-* needs cgroup v2, but {detail}: mount it (mount -t cgroup2 none /sys/fs/cgroup) or boot with systemd.unified_cgroup_hierarchy=1")]
    NoCgroupV2 { detail: String },

    #[error("the {controller} controller is not available to {cgroup} in cgroup v2 ({needed_by}): {fix}")]
    ControllerUnavailable { controller: &'static str, cgroup: String, needed_by: &'static str, fix: String },

    #[error("the cgroup {cgroup} is not delegated to this user ({detail}): run as root, or start schedlab in a delegated cgroup (systemd-run --user --scope -p Delegate=yes schedlab run ...)")]
    NotDelegated { cgroup: String, detail: String },

    #[error("{what} failed: {detail}: {fix}")]
    Failed { what: String, detail: String, fix: String },

    #[error("--scx needs a kernel with sched_ext (CONFIG_SCHED_CLASS_EXT, Linux 6.12 or later), but {dir} is missing: this kernel lacks it; boot one that has it")]
    NoSchedExt { dir: String },

    #[error("the sched_ext scheduler {program} is not in PATH: install the scx schedulers (the scx or scx-scheds package, or cargo install --locked {program}) or give its command with --scx-cmd")]
    ScxMissing { program: String },

    #[error("sched_ext is already {state} ({ops}), not by this schedlab: stop that scheduler first")]
    ScxBusy { state: String, ops: String },

    #[error(
        "the sched_ext scheduler {name} {detail}{output}: check the scheduler (run it by hand to see why) and rerun"
    )]
    ScxFailed { name: String, detail: String, output: String },
}

/// Everything that can be checked before a case runs: the tunables exist
/// and are writable, the cgroup controllers are there, the sched_ext
/// scheduler can be started. Needs root for any of them. Mounts debugfs
/// when a debugfs tunable needs it (said in the case's warnings).
pub fn preflight(cond: &SchedCondition) -> Result<(), LiveError> {
    if !cond.has_case_setup() {
        return Ok(());
    }
    if let Some(s) = &cond.scx {
        scx::ScxControl::system().preflight(s)?;
    }
    if !cond.tunables.is_empty() {
        tunables::resolve_all(&cond.tunables, &tunables::Roots::system())?;
    }
    if let Some(c) = &cond.cgroup {
        cgroup::check(&cgroup::Hierarchy::locate()?, c)?;
    }
    Ok(())
}

/// What a case's setup read back, for its result's applied condition.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SetupApplied {
    pub tunables: Vec<Tunable>,
    pub cgroup: Option<CgroupSetting>,
    pub scx: Option<ScxSetting>,
}

thread_local! {
    /// The last setup applied on this thread: `drive` and `harness::result`
    /// run on the same (the benchmark's caller's) thread, one case at a time.
    static APPLIED: RefCell<Option<SetupApplied>> = const { RefCell::new(None) };
}

/// Fill `applied`'s case-level settings with what this thread's last case
/// setup read back (nothing when it had none).
pub fn fill_applied(applied: &mut SchedCondition) {
    if let Some(a) = APPLIED.with(|c| c.borrow().clone()) {
        applied.tunables = a.tunables;
        applied.cgroup = a.cgroup;
        applied.scx = a.scx;
    }
}

/// The settings of one case, put back when finished or dropped.
#[derive(Default)]
pub struct CaseSetup {
    scx: Option<scx::Running>,
    tunables: Option<tunables::Guard>,
    cgroup: Option<cgroup::CaseCgroup>,
    /// Notes for the result (values the kernel adjusted, debugfs mounted).
    pub notes: Vec<String>,
}

impl CaseSetup {
    /// Apply `cond`'s case-level settings (none: nothing happens). On an
    /// error, what was already applied is put back before returning.
    pub fn apply(cond: &SchedCondition) -> Result<CaseSetup, LiveError> {
        APPLIED.with(|c| *c.borrow_mut() = None);
        if !cond.has_case_setup() {
            return Ok(CaseSetup::default());
        }
        let mut s = CaseSetup::default();
        let mut applied = SetupApplied::default();
        if let Some(want) = &cond.scx {
            let running = scx::ScxControl::system().start(want)?;
            applied.scx = Some(ScxSetting { name: running.ops().to_string(), cmd: want.cmd.clone() });
            s.scx = Some(running);
        }
        if !cond.tunables.is_empty() {
            let resolved = tunables::resolve_all(&cond.tunables, &tunables::Roots::system())?;
            let guard = tunables::apply(&resolved)?;
            applied.tunables = guard.read_back.clone();
            s.notes.extend(guard.notes.iter().cloned());
            s.tunables = Some(guard);
        }
        if let Some(want) = &cond.cgroup {
            let cg = cgroup::CaseCgroup::create(&cgroup::Hierarchy::locate()?, want)?;
            applied.cgroup = Some(cg.applied.clone());
            s.cgroup = Some(cg);
        }
        APPLIED.with(|c| *c.borrow_mut() = Some(applied));
        Ok(s)
    }

    /// Put everything back now. Errors: the sched_ext scheduler ended during
    /// the case (the measurement did not run under it) or a setting could
    /// not be restored (its record stays for `schedlab check --restore`).
    pub fn finish(mut self) -> Result<Vec<String>, LiveError> {
        let mut problems = self.teardown().into_iter();
        match problems.next() {
            Some(e) => {
                problems.for_each(|more| eprintln!("schedlab: {more}"));
                Err(e)
            }
            None => Ok(std::mem::take(&mut self.notes)),
        }
    }

    fn teardown(&mut self) -> Vec<LiveError> {
        let mut problems = Vec::new();
        if let Some(cg) = self.cgroup.take() {
            if let Err(detail) = cg.remove() {
                problems.push(LiveError::Setup(SetupError::Failed {
                    what: "removing the case's cgroup".into(),
                    detail,
                    fix: "run `schedlab check --restore`".into(),
                }));
            }
        }
        if let Some(t) = self.tunables.take() {
            let errors = t.restore();
            if !errors.is_empty() {
                problems.push(LiveError::Setup(SetupError::Failed {
                    what: "restoring the tunables".into(),
                    detail: errors.join("; "),
                    fix: "run `schedlab check --restore`".into(),
                }));
            }
        }
        if let Some(r) = self.scx.take() {
            if let Err(e) = r.stop() {
                problems.push(e.into());
            }
        }
        problems
    }
}

impl Drop for CaseSetup {
    fn drop(&mut self) {
        for e in self.teardown() {
            eprintln!("schedlab: {e}");
        }
    }
}

/// errno of an io::Error, as "EINVAL (Invalid argument)".
pub(crate) fn io_errno_text(e: &std::io::Error) -> String {
    e.raw_os_error().map_or_else(|| e.to_string(), errno_text)
}

/// Whether this process runs as root.
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}
