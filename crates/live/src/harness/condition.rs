//! Applying a [`SchedCondition`] to threads and processes, and reading back
//! what the kernel granted.
//!
//! Policy, RT priority, nice and the deadline reservation are set in one
//! `sched_setattr(2)` call (raw syscall: glibc has no wrapper before 2.41);
//! affinity with `sched_setaffinity(2)`. Both act on one thread (tid) or on
//! a child process (pid = its only thread), never on the whole harness.
//! The harness's own threads are only changed through [`ThreadGuard`], which
//! restores them on drop.
//!
//! Order: the case's cgroup first (its cpuset resets affinity), then
//! affinity, then policy, so an RT task never runs briefly on a CPU it was
//! not meant to use. Utilisation clamps go with the policy, in the same
//! `sched_setattr` call (SCHED_FLAG_UTIL_CLAMP_MIN/MAX).

use crate::error::{errno_text, last_errno, LiveError};
use schedlab_core::condition::{format_cpu_list, parse_cpu_list, DeadlineParams};
use schedlab_core::{SchedCondition, SchedPolicy};
use std::marker::PhantomData;

// Kernel policy numbers (include/uapi/linux/sched.h).
const SCHED_OTHER: u32 = 0;
const SCHED_FIFO: u32 = 1;
const SCHED_RR: u32 = 2;
const SCHED_BATCH: u32 = 3;
const SCHED_IDLE: u32 = 5;
const SCHED_DEADLINE: u32 = 6;
// sched_attr.sched_flags (include/uapi/linux/sched.h).
const SCHED_FLAG_UTIL_CLAMP_MIN: u64 = 0x20;
const SCHED_FLAG_UTIL_CLAMP_MAX: u64 = 0x40;
const UCLAMP_DEFAULT_MAX: u32 = 1024;

/// `struct sched_attr` (SCHED_ATTR_SIZE_VER1, 56 bytes, with the uclamp fields).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedAttr {
    pub size: u32,
    pub policy: u32,
    pub flags: u64,
    pub nice: i32,
    pub priority: u32,
    pub runtime: u64,
    pub deadline: u64,
    pub period: u64,
    pub util_min: u32,
    pub util_max: u32,
}

const ATTR_SIZE: u32 = std::mem::size_of::<SchedAttr>() as u32;

/// Kernel thread id of the calling thread.
pub fn gettid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// `sched_getattr` for a tid (0 = calling thread). Err is the errno.
pub fn get_attr(tid: i32) -> Result<SchedAttr, i32> {
    let mut attr = SchedAttr::default();
    // SAFETY: attr is a valid, writable sched_attr of ATTR_SIZE bytes; the
    // kernel writes at most `size` bytes.
    let rc = unsafe { libc::syscall(libc::SYS_sched_getattr, tid, &mut attr as *mut SchedAttr, ATTR_SIZE, 0u32) };
    if rc == 0 {
        Ok(attr)
    } else {
        Err(last_errno())
    }
}

/// `sched_setattr` for a tid (0 = calling thread). Err is the errno.
pub fn set_attr(tid: i32, attr: &SchedAttr) -> Result<(), i32> {
    let mut a = *attr;
    a.size = ATTR_SIZE;
    // SAFETY: `a` is a valid sched_attr whose size field matches its length;
    // the kernel only reads it.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &a as *const SchedAttr, 0u32) };
    if rc == 0 {
        Ok(())
    } else {
        Err(last_errno())
    }
}

/// CPU mask words: 1024 CPUs, grown if the kernel has more.
fn mask_words() -> usize {
    let max = std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| parse_cpu_list(s.trim()).ok())
        .and_then(|v| v.last().copied())
        .unwrap_or(0);
    (max / 64 + 1).max(16)
}

/// `sched_getaffinity` for a tid (0 = calling thread).
pub fn get_affinity(tid: i32) -> Result<Vec<usize>, i32> {
    let mut mask = vec![0u64; mask_words()];
    // SAFETY: the buffer is writable and its byte length is passed; the raw
    // syscall writes at most that many bytes and returns how many it wrote.
    let rc = unsafe { libc::syscall(libc::SYS_sched_getaffinity, tid, mask.len() * 8, mask.as_mut_ptr()) };
    if rc < 0 {
        return Err(last_errno());
    }
    let mut cpus = Vec::new();
    for (w, word) in mask.iter().enumerate() {
        for b in 0..64 {
            if word & (1u64 << b) != 0 {
                cpus.push(w * 64 + b);
            }
        }
    }
    Ok(cpus)
}

/// `sched_setaffinity` for a tid (0 = calling thread).
pub fn set_affinity(tid: i32, cpus: &[usize]) -> Result<(), i32> {
    let words = mask_words().max(cpus.iter().max().map_or(0, |m| m / 64 + 1));
    let mut mask = vec![0u64; words];
    for &c in cpus {
        mask[c / 64] |= 1u64 << (c % 64);
    }
    // SAFETY: the buffer is readable and its byte length is passed.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setaffinity, tid, mask.len() * 8, mask.as_ptr()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(last_errno())
    }
}

/// Online CPUs from /sys/devices/system/cpu/online.
pub fn online_cpus() -> Result<Vec<usize>, LiveError> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").map_err(|e| LiveError::Os {
        what: "reading /sys/devices/system/cpu/online",
        detail: e.to_string(),
        hint: "mount sysfs on /sys",
    })?;
    parse_cpu_list(text.trim()).map_err(LiveError::from)
}

/// Every requested CPU must be online.
pub fn check_cpus(requested: &[usize], online: &[usize]) -> Result<(), LiveError> {
    let missing: Vec<usize> = requested.iter().copied().filter(|c| !online.contains(c)).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(LiveError::CpusAbsent { missing: format_cpu_list(&missing), online: format_cpu_list(online) })
    }
}

/// Check a condition before any benchmark starts: core validation, CPU
/// existence, deadline pinning, then a trial application on a throwaway
/// thread (catches missing privilege and admission refusals early). Returns
/// the CPUs the benchmark may use: the requested list, or the harness's own
/// affinity restricted to online CPUs.
pub fn preflight(cond: &SchedCondition) -> Result<Vec<usize>, LiveError> {
    cond.validate()?;
    let online = online_cpus()?;
    let usable = match &cond.cpus {
        Some(cpus) => {
            check_cpus(cpus, &online)?;
            if cond.policy == SchedPolicy::Deadline {
                return Err(LiveError::DeadlinePinned);
            }
            cpus.clone()
        }
        None => {
            let mine = get_affinity(0).map_err(|e| LiveError::os("sched_getaffinity", e, "check /proc is mounted"))?;
            let usable: Vec<usize> = mine.into_iter().filter(|c| online.contains(c)).collect();
            if usable.is_empty() {
                return Err(LiveError::CpusAbsent {
                    missing: "of this process's affinity".into(),
                    online: format_cpu_list(&online),
                });
            }
            usable
        }
    };
    if cond.mlock {
        check_mlock_allowed()?;
    }
    probe(cond)?;
    crate::harness::setup::preflight(cond)?;
    Ok(usable)
}

/// mlockall of a whole process needs CAP_IPC_LOCK or an unlimited
/// RLIMIT_MEMLOCK; find out before anything runs, not mid-benchmark.
fn check_mlock_allowed() -> Result<(), LiveError> {
    const CAP_IPC_LOCK: u32 = 14;
    let cap_eff = std::fs::read_to_string("/proc/self/status").ok().and_then(|s| {
        s.lines().find_map(|l| l.strip_prefix("CapEff:")).and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
    });
    if cap_eff.is_some_and(|c| c & (1 << CAP_IPC_LOCK) != 0) {
        return Ok(());
    }
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) } == 0 && lim.rlim_cur == libc::RLIM_INFINITY {
        return Ok(());
    }
    Err(LiveError::Mlock {
        detail: format!(
            "this process may lock only {} KiB and lacks CAP_IPC_LOCK",
            if lim.rlim_cur == libc::RLIM_INFINITY { u64::MAX } else { lim.rlim_cur / 1024 }
        ),
    })
}

/// Apply `cond`'s task attributes (uclamp included, not the case's cgroup)
/// on a short-lived thread and discard it.
fn probe(cond: &SchedCondition) -> Result<(), LiveError> {
    let cond = SchedCondition { cgroup: None, tunables: Vec::new(), scx: None, ..cond.clone() };
    std::thread::Builder::new()
        .name("schedlab-probe".into())
        .spawn(move || apply(0, &cond, None))
        .map_err(|e| LiveError::Os { what: "spawning a probe thread", detail: e.to_string(), hint: "check ulimit -u" })?
        .join()
        .unwrap_or_else(|_| Err(LiveError::Measurement { bench: "condition", detail: "probe thread panicked".into() }))
}

fn policy_number(p: SchedPolicy) -> u32 {
    match p {
        SchedPolicy::Other => SCHED_OTHER,
        SchedPolicy::Batch => SCHED_BATCH,
        SchedPolicy::Idle => SCHED_IDLE,
        SchedPolicy::Fifo => SCHED_FIFO,
        SchedPolicy::Rr => SCHED_RR,
        SchedPolicy::Deadline => SCHED_DEADLINE,
    }
}

fn policy_from_number(n: u32) -> Option<SchedPolicy> {
    Some(match n {
        SCHED_OTHER => SchedPolicy::Other,
        SCHED_BATCH => SchedPolicy::Batch,
        SCHED_IDLE => SchedPolicy::Idle,
        SCHED_FIFO => SchedPolicy::Fifo,
        SCHED_RR => SchedPolicy::Rr,
        SCHED_DEADLINE => SchedPolicy::Deadline,
        _ => return None,
    })
}

/// Apply policy/priority/nice/deadline and, if given, an explicit CPU set
/// (`cpus` overrides `cond.cpus`, e.g. for same-cpu placement) to one task.
/// `tid` 0 means the calling thread. mlock is process-wide: see [`mlock_all`].
pub fn apply(tid: i32, cond: &SchedCondition, cpus: Option<&[usize]>) -> Result<(), LiveError> {
    cond.validate()?;
    if cond.cgroup.is_some() {
        crate::harness::cgroup::enter(tid)?;
    }
    let cpus = cpus.or(cond.cpus.as_deref());
    if let Some(cpus) = cpus {
        if cond.policy == SchedPolicy::Deadline {
            return Err(LiveError::DeadlinePinned);
        }
        set_affinity(tid, cpus).map_err(|e| match e {
            libc::EINVAL => match online_cpus().and_then(|on| check_cpus(cpus, &on)) {
                Err(absent) => absent,
                Ok(()) => LiveError::os(
                    "sched_setaffinity",
                    e,
                    "the CPUs may be outside this process's cpuset; check /sys/fs/cgroup",
                ),
            },
            _ => LiveError::os("sched_setaffinity", e, "check that the task still exists and you may change it"),
        })?;
    }
    let current = get_attr(tid).map_err(|e| LiveError::os("sched_getattr", e, "check that the task exists"))?;
    let attr = attr_for(cond, current.nice);
    set_attr(tid, &attr).map_err(|e| map_setattr_error(cond, &current, e))
}

fn attr_for(cond: &SchedCondition, current_nice: i32) -> SchedAttr {
    let mut a = SchedAttr { size: ATTR_SIZE, policy: policy_number(cond.policy), ..Default::default() };
    if cond.policy.takes_priority() {
        a.priority = cond.effective_priority();
    }
    if matches!(cond.policy, SchedPolicy::Other | SchedPolicy::Batch | SchedPolicy::Idle) {
        // Without a requested nice, keep the task's own (sched_setattr would reset it to 0).
        a.nice = cond.nice.unwrap_or(current_nice);
    }
    if let Some(d) = cond.deadline {
        a.runtime = d.runtime_ns;
        a.deadline = d.deadline_ns;
        a.period = d.period_ns;
    }
    // Without the flags the kernel leaves the task's clamps as they are.
    if let Some(min) = cond.uclamp_min {
        a.flags |= SCHED_FLAG_UTIL_CLAMP_MIN;
        a.util_min = min;
    }
    if let Some(max) = cond.uclamp_max {
        a.flags |= SCHED_FLAG_UTIL_CLAMP_MAX;
        a.util_max = max;
    }
    a
}

/// Whether the kernel has utilisation clamps (CONFIG_UCLAMP_TASK adds these sysctls).
pub fn uclamp_supported() -> bool {
    std::path::Path::new("/proc/sys/kernel/sched_util_clamp_min").exists()
}

fn map_setattr_error(cond: &SchedCondition, current: &SchedAttr, errno: i32) -> LiveError {
    let policy = cond.policy;
    let uclamp = cond.uclamp_min.is_some() || cond.uclamp_max.is_some();
    match errno {
        libc::EOPNOTSUPP if uclamp => crate::harness::setup::SetupError::Uclamp {
            errno: errno_text(errno),
            fix: "this kernel lacks CONFIG_UCLAMP_TASK: drop --uclamp-min/--uclamp-max or boot a kernel with it",
        }
        .into(),
        libc::EINVAL if uclamp && !uclamp_supported() => crate::harness::setup::SetupError::Uclamp {
            errno: errno_text(errno),
            fix: "this kernel has no utilisation clamps (Linux 5.3+ with CONFIG_UCLAMP_TASK): drop --uclamp-min/--uclamp-max",
        }
        .into(),
        libc::EPERM if policy.is_realtime() => {
            // SAFETY: geteuid cannot fail.
            let root = unsafe { libc::geteuid() } == 0;
            if policy == SchedPolicy::Deadline && root {
                // Root is refused deadline only when the affinity is narrower than the root domain.
                return LiveError::DeadlinePinned;
            }
            if root {
                return LiveError::RtGroupBudget { policy: policy.name().into() };
            }
            LiveError::RtPrivilege { policy: policy.name().into(), detail: format!("EPERM; RLIMIT_RTPRIO is {}", rtprio_limit_text()) }
        }
        libc::EPERM if cond.nice.is_some_and(|n| n < current.nice) => LiveError::NicePrivilege { nice: cond.nice.unwrap_or(0) },
        libc::EPERM if uclamp => crate::harness::setup::SetupError::Uclamp {
            errno: errno_text(errno),
            fix: "setting clamps may need CAP_SYS_NICE: run as root, or drop --uclamp-min/--uclamp-max",
        }
        .into(),
        libc::EPERM => LiveError::os("sched_setattr", errno, "you may not change this task's policy: run as root or as the task's owner"),
        libc::EBUSY if policy == SchedPolicy::Deadline => {
            let d = cond.deadline.unwrap_or(DeadlineParams { runtime_ns: 0, deadline_ns: 0, period_ns: 0 });
            LiveError::DeadlineAdmission { tasks: 1, runtime_ns: d.runtime_ns, period_ns: d.period_ns }
        }
        libc::EINVAL => LiveError::os("sched_setattr", errno, "the kernel rejected these parameters (is this policy built in? check the priority range and deadline values)"),
        _ => LiveError::os("sched_setattr", errno, "check the requested policy and that the task exists"),
    }
}

fn rtprio_limit_text() -> String {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: r is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut r) } != 0 {
        return "unknown".into();
    }
    if r.rlim_cur == libc::RLIM_INFINITY {
        "unlimited".into()
    } else {
        r.rlim_cur.to_string()
    }
}

/// What the kernel has for a task: policy, priority, nice (only if not 0),
/// deadline reservation and affinity. `mlock` is false: it is process-wide,
/// see [`mlock_active`].
pub fn read_back(tid: i32) -> Result<SchedCondition, LiveError> {
    let a = get_attr(tid).map_err(|e| LiveError::os("sched_getattr", e, "check that the task exists"))?;
    let policy = policy_from_number(a.policy).ok_or_else(|| LiveError::Os {
        what: "reading back the scheduling policy",
        detail: format!("unknown policy number {}", a.policy),
        hint: "the task runs under a policy schedlab does not know (sched_ext?)",
    })?;
    let cpus = get_affinity(tid).map_err(|e| LiveError::os("sched_getaffinity", e, "check that the task exists"))?;
    Ok(SchedCondition {
        policy,
        priority: policy.takes_priority().then_some(a.priority),
        nice: (matches!(policy, SchedPolicy::Other | SchedPolicy::Batch | SchedPolicy::Idle) && a.nice != 0)
            .then_some(a.nice),
        deadline: (policy == SchedPolicy::Deadline).then_some(DeadlineParams {
            runtime_ns: a.runtime,
            deadline_ns: a.deadline,
            period_ns: a.period,
        }),
        cpus: Some(cpus),
        mlock: false,
        // Shown when the kernel has clamps and they are not the defaults (0..1024).
        uclamp_min: (uclamp_supported() && a.util_min != 0).then_some(a.util_min),
        uclamp_max: (uclamp_supported() && a.util_max != UCLAMP_DEFAULT_MAX).then_some(a.util_max),
        ..Default::default()
    })
}

/// Put a task back to SCHED_OTHER, nice 0 (used by the RT watchdog).
pub fn demote(tid: i32) -> Result<(), i32> {
    set_attr(tid, &SchedAttr { policy: SCHED_OTHER, ..Default::default() })
}

/// Saves the calling thread's scheduling attributes and affinity and
/// restores them on drop. Not `Send`: it must drop on the thread it saved.
pub struct ThreadGuard {
    attr: SchedAttr,
    cpus: Vec<usize>,
    _not_send: PhantomData<*const ()>,
}

impl ThreadGuard {
    pub fn capture() -> Result<ThreadGuard, LiveError> {
        let attr = get_attr(0).map_err(|e| LiveError::os("sched_getattr", e, "check /proc and the kernel"))?;
        let cpus = get_affinity(0).map_err(|e| LiveError::os("sched_getaffinity", e, "check /proc and the kernel"))?;
        Ok(ThreadGuard { attr, cpus, _not_send: PhantomData })
    }
}

impl Drop for ThreadGuard {
    fn drop(&mut self) {
        // Policy first (a DL task must leave deadline before it can be pinned), then affinity.
        let mut a = self.attr;
        a.flags = 0;
        // Clamps only when they changed: setting them pins them (an RT task's default follows a sysctl).
        if get_attr(0).is_ok_and(|now| (now.util_min, now.util_max) != (a.util_min, a.util_max)) {
            a.flags = SCHED_FLAG_UTIL_CLAMP_MIN | SCHED_FLAG_UTIL_CLAMP_MAX;
        }
        if let Err(e) = set_attr(0, &a) {
            eprintln!("schedlab: could not restore the thread's scheduling policy: {}", errno_text(e));
        }
        if let Err(e) = set_affinity(0, &self.cpus) {
            eprintln!("schedlab: could not restore the thread's CPU affinity: {}", errno_text(e));
        }
    }
}

/// Keeps all current and future pages of the process locked until dropped.
pub struct MlockGuard(());

pub fn mlock_all() -> Result<MlockGuard, LiveError> {
    // SAFETY: mlockall takes flags only.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
        return Err(LiveError::Mlock { detail: errno_text(last_errno()) });
    }
    Ok(MlockGuard(()))
}

impl Drop for MlockGuard {
    fn drop(&mut self) {
        // SAFETY: munlockall takes no arguments.
        unsafe { libc::munlockall() };
    }
}

/// Whether this process has locked memory (VmLck > 0 in /proc/self/status).
pub fn mlock_active() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmLck:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .is_some_and(|kb| kb > 0)
}

/// `kernel.sched_rt_runtime_us` (-1 = RT throttling off).
pub fn rt_runtime_us() -> Option<i64> {
    std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").ok()?.trim().parse().ok()
}

/// Warnings about the RT environment for a condition (empty for non-RT).
pub fn rt_warnings(cond: &SchedCondition) -> Vec<String> {
    let mut w = Vec::new();
    if !cond.policy.is_realtime() {
        return w;
    }
    match rt_runtime_us() {
        Some(-1) => w.push(
            "RT throttling is off (kernel.sched_rt_runtime_us = -1): a runaway RT task can lock up a CPU; only schedlab's watchdog protects this run".into(),
        ),
        None => w.push("could not read kernel.sched_rt_runtime_us: RT throttling state unknown".into()),
        _ => {}
    }
    if cond.policy.takes_priority() && cond.effective_priority() >= crate::harness::hygiene::WATCHDOG_PRIORITY {
        w.push(format!(
            "RT priority {} is not below the watchdog's ({}): the watchdog cannot preempt a spinning task on its CPU; use --prio 98 or lower",
            cond.effective_priority(),
            crate::harness::hygiene::WATCHDOG_PRIORITY
        ));
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_layout_matches_the_kernel() {
        assert_eq!(ATTR_SIZE, 56);
    }

    #[test]
    fn absent_cpus_are_named_with_the_online_list() {
        let e = check_cpus(&[0, 5, 6, 9], &[0, 1, 2, 3]).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, LiveError::CpusAbsent { .. }));
        assert!(msg.contains("5-6,9") && msg.contains("online CPUs: 0-3"), "{msg}");
        assert!(check_cpus(&[1, 3], &[0, 1, 2, 3]).is_ok());
    }

    #[test]
    fn preflight_rejects_out_of_range_and_absent_cpus() {
        let bad_prio = SchedCondition { policy: SchedPolicy::Fifo, priority: Some(100), ..Default::default() };
        assert!(matches!(preflight(&bad_prio), Err(LiveError::Condition(_))));
        let bad_nice = SchedCondition { nice: Some(-21), ..Default::default() };
        assert!(matches!(preflight(&bad_nice), Err(LiveError::Condition(_))));
        let absent = SchedCondition { cpus: Some(vec![0, 4095]), ..Default::default() };
        let e = preflight(&absent).unwrap_err();
        assert!(matches!(e, LiveError::CpusAbsent { .. }), "{e}");
        assert!(e.to_string().contains("4095"));
    }

    #[test]
    fn deadline_cannot_be_pinned() {
        let d = SchedCondition {
            policy: SchedPolicy::Deadline,
            deadline: Some(DeadlineParams { runtime_ns: 100_000, deadline_ns: 1_000_000, period_ns: 1_000_000 }),
            cpus: Some(vec![0]),
            ..Default::default()
        };
        assert!(matches!(preflight(&d), Err(LiveError::DeadlinePinned)));
    }

    #[test]
    fn uclamp_is_applied_and_read_back_or_refused_in_words() {
        let cond = SchedCondition { uclamp_min: Some(128), uclamp_max: Some(512), ..Default::default() };
        assert_eq!(attr_for(&cond, 0).flags, SCHED_FLAG_UTIL_CLAMP_MIN | SCHED_FLAG_UTIL_CLAMP_MAX);
        assert_eq!(attr_for(&SchedCondition::default(), 0).flags, 0, "no clamps asked: left as they are");
        let c = cond.clone();
        let got = std::thread::spawn(move || apply(0, &c, None).and_then(|_| read_back(0))).join().unwrap();
        if uclamp_supported() {
            let got = got.unwrap();
            assert_eq!((got.uclamp_min, got.uclamp_max), (Some(128), Some(512)));
        } else {
            // This machine's kernel (CONFIG_UCLAMP_TASK off) takes this branch.
            let e = got.unwrap_err().to_string();
            assert!(e.contains("utilisation clamps") && e.contains("CONFIG_UCLAMP_TASK"), "{e}");
            assert!(e.contains("EOPNOTSUPP") || e.contains("EINVAL"), "the errno in words: {e}");
            assert!(matches!(preflight(&cond), Err(LiveError::Setup(_))), "found before anything runs");
        }
    }

    #[test]
    fn nice_is_read_back_on_a_worker_thread() {
        let cond = SchedCondition { policy: SchedPolicy::Batch, nice: Some(5), ..Default::default() };
        let got = std::thread::spawn(move || {
            apply(0, &cond, None).unwrap();
            read_back(0).unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(got.policy, SchedPolicy::Batch);
        assert_eq!(got.nice, Some(5));
    }
}
