//! SCHED_DEADLINE (Linux 3.14+): earliest-deadline-first over constant
//! bandwidth servers, a class above POSIX RT under every normal policy, as
//! Linux's `dl_sched_class` sits above `rt_sched_class`. A task joins it with
//! `dl=Q/D/P` (runtime, relative deadline, period) in a workload; the RT
//! layer ([`super::rt`]) hosts this class and asks it first.
//!
//! Source: schedulers.md §9; `kernel/sched/deadline.c` (`__checkparam_dl`,
//! `__dl_overflow`, `dl_check_constrained_dl`, `update_dl_entity`,
//! `update_dl_revised_wakeup`, `update_curr_dl`, `start_dl_timer`,
//! `replenish_dl_entity`, `dl_task_timer`, `yield_task_dl`);
//! docs.kernel.org `scheduler/sched-deadline.html`.
//! - Parameters: `1024 ns <= Q <= D <= P`, P in 100 us ..= 2^22 us
//!   (`sched_deadline_period_{min,max}_us`); `dl=Q/D` means P = D.
//! - Admission, once for the whole workload (one root domain of all CPUs):
//!   `sum to_ratio(P, Q) <= M * to_ratio(rt_period, rt_runtime)` in the
//!   kernel's 20-bit fixed point, 0.95 M by default; `rt_runtime=0` (the
//!   model's "RT throttling off", Linux's -1) turns it off as in Linux.
//! - Wake-up (CBS rule): a constrained task (D < P) woken after its deadline
//!   but before its next period (`deadline - D + P`) is throttled until then.
//!   Otherwise, if `deadline < now` or `runtime / (deadline - now) > Q / D`,
//!   it gets `deadline = now + D`, `runtime = Q`, except that a constrained
//!   task whose deadline has not passed keeps it with `runtime = (deadline -
//!   now) Q / D` (revised CBS). A new task starts with `now + D` and Q.
//! - Running: `runtime -= ran`. At `runtime <= 0` the task is throttled
//!   until `deadline - D + P` (at once if that has passed); the replenishment
//!   does `deadline += P, runtime += Q` while `runtime <= 0`, then starts a
//!   new period (`now + D`, Q) if the deadline is still behind `now`.
//! - Pick: the earliest absolute deadline; a waking or replenished task
//!   preempts a later deadline, RT and normal tasks.
//! - Yield: gives up the remaining runtime (throttled to the next period).
//! - DL run time also counts in the RT layer's `rt_time`, as
//!   `update_curr_dl` does ("we share the rt bandwidth"), so RT tasks beside
//!   DL tasks reach their throttle sooner; DL tasks are never RT-throttled.
//!
//! Simplifications:
//! - The budget is checked at the tick and when the task stops running
//!   (Linux's default, `HRTICK_DL` off): a task overruns by up to a tick and
//!   the replenishment pays it back (its deadline moves further out).
//! - SMP: one global EDF queue, so the M earliest deadlines run (Linux
//!   approximates this with push/pull over `cpudl`). A waking task stays on
//!   its previous CPU unless that runs an earlier deadline; then it takes a
//!   CPU free of DL work (idle, then normal, then the lowest RT priority) or
//!   the latest deadline it beats. A task requeued by a preemption, released
//!   by a replenishment, or woken without beating its CPU, is pushed to a CPU
//!   it beats (`push_dl_task`), and RT work a DL task displaces to a CPU
//!   running lower work (`push_rt_task`), once the pending reschedules are
//!   done. Pushes cost no IPI in the cost model.
//! - The wake-up test is exact (u128) where Linux shifts by `DL_SCALE`.
//! - No GRUB reclaiming, no `dl_server`, no priority inheritance; a DL task
//!   cannot fork and a DL template cannot be forked (refused before the run:
//!   Linux's `sched_fork` fails with EAGAIN, and admission is checked once).
//!
//! Results per DL task: jobs (a job runs from a wake-up to the next sleep or
//! exit), deadline misses (a job that ends after the absolute deadline it got
//! at that wake-up, or at the replenishment that released it if it woke
//! throttled), throttles (budget used up) and response times (wake-up to
//! the end of the job).

use super::TaskId;
use crate::program::{Class, DlParams, Step};
use crate::spec::fmt_ns;
use crate::workload::WorkloadDef;
use crate::SimError;
use schedlab_core::param::{Kind, TimeUnit};
use schedlab_core::LatencyHistogram;
use std::collections::BTreeSet;

/// Smallest runtime (`1 << DL_SCALE` ns).
pub const MIN_RUNTIME_NS: u64 = 1 << 10;
/// Period limits (`sysctl_sched_dl_period_min`/`_max`: 100 us, 2^22 us).
pub const MIN_PERIOD_NS: u64 = 100_000;
pub const MAX_PERIOD_NS: u64 = (1 << 22) * 1_000;
/// The kernel's bandwidth fixed point (`BW_SHIFT`).
const BW_SHIFT: u32 = 20;

/// `to_ratio(period, runtime)`: runtime / period in `BW_SHIFT` fixed point.
fn to_ratio(period: u64, runtime: u64) -> u64 {
    ((runtime as u128) << BW_SHIFT).checked_div(period as u128).unwrap_or(0) as u64
}

/// Parse `Q/D/P` or `Q/D` (P = D), each a duration (`2ms`, `500us`, ns as a
/// bare number), with the kernel's checks. The error says what was expected.
pub fn parse_params(s: &str) -> Result<DlParams, String> {
    let parts: Vec<&str> = s.split('/').map(str::trim).collect();
    if !(2..=3).contains(&parts.len()) {
        return Err(format!(
            "'{s}': give runtime/deadline/period (or runtime/deadline, period = deadline), e.g. dl=2ms/10ms/10ms"
        ));
    }
    let kind = Kind::Duration { unit: TimeUnit::Ns, min: 0, max: u64::MAX / 4 };
    let names = ["runtime", "deadline", "period"];
    let mut v = [0u64; 3];
    for (i, p) in parts.iter().enumerate() {
        v[i] = kind
            .parse(p)
            .map_err(|e| format!("{} '{p}': expected {e}", names[i]))?
            .parse()
            .expect("a duration kind gives a number");
    }
    if parts.len() == 2 {
        v[2] = v[1];
    }
    let [runtime, deadline, period] = v;
    if runtime < MIN_RUNTIME_NS {
        return Err(format!("runtime {}: at least 1024 ns (the kernel's 1 << DL_SCALE)", fmt_ns(runtime)));
    }
    if !(runtime <= deadline && deadline <= period) {
        return Err(format!(
            "{}/{}/{}: need runtime <= deadline <= period (Q <= D <= P); shorten the runtime or lengthen the deadline or period",
            fmt_ns(runtime),
            fmt_ns(deadline),
            fmt_ns(period)
        ));
    }
    if !(MIN_PERIOD_NS..=MAX_PERIOD_NS).contains(&period) {
        return Err(format!(
            "period {}: the kernel takes 100us to {} (sched_deadline_period_min_us/max_us)",
            fmt_ns(period),
            fmt_ns(MAX_PERIOD_NS)
        ));
    }
    Ok(DlParams { runtime, deadline, period })
}

/// The admission test for the workload's DL tasks on `cpus` CPUs, and the
/// rules the model keeps for them (no fork into or out of the class).
/// `rt_runtime == 0` is "no RT limit" (Linux's -1): no admission control.
pub fn admit(wl: &WorkloadDef, cpus: u32, rt_runtime: u64, rt_period: u64) -> Result<(), SimError> {
    let refuse = |why: String| Err(SimError::Deadline(why));
    for (i, t) in wl.tasks.iter().enumerate() {
        if t.class.is_dl() && has_fork(&t.program) {
            return refuse(format!(
                "task '{}' is a deadline task with a fork step: Linux refuses to fork a SCHED_DEADLINE task (EAGAIN); fork from a normal task",
                t.name
            ));
        }
        // Only a DL task is searched for: over every task it is quadratic.
        if t.class.is_dl() && wl.tasks.iter().any(|o| forks(&o.program, i)) {
            return refuse(format!(
                "task '{}' is a deadline task created by a fork step: the model admits deadline tasks once, before the run; give it a count instead",
                t.name
            ));
        }
    }
    if rt_runtime == 0 {
        return Ok(());
    }
    let (mut total, mut n) = (0u128, 0u64);
    for t in &wl.tasks {
        if let Class::Deadline(p) = t.class {
            total += to_ratio(p.period, p.runtime) as u128 * t.count as u128;
            n += t.count as u64;
        }
    }
    let each = to_ratio(rt_period, rt_runtime);
    let limit = each as u128 * cpus as u128;
    if total > limit {
        let one = (1u64 << BW_SHIFT) as f64;
        return refuse(format!(
            "admission control refuses the {n} deadline tasks: they ask for a utilisation of {:.3} (sum of runtime/period) \
             but {cpus} CPU(s) x rt_runtime/rt_period ({}/{}) allow {:.3}; shorten runtimes, lengthen periods, add CPUs \
             or raise rt_runtime (rt_runtime=0 turns admission control off)",
            total as f64 / one,
            fmt_ns(rt_runtime),
            fmt_ns(rt_period),
            limit as f64 / one
        ));
    }
    Ok(())
}

fn has_fork(steps: &[Step]) -> bool {
    steps.iter().any(|s| match s {
        Step::Fork(_) => true,
        Step::Loop(_, b) => has_fork(b),
        _ => false,
    })
}

fn forks(steps: &[Step], template: usize) -> bool {
    steps.iter().any(|s| match s {
        Step::Fork(i) => *i == template,
        Step::Loop(_, b) => forks(b, template),
        _ => false,
    })
}

/// A DL task's results.
#[derive(Debug, Clone, Default)]
pub struct DlStats {
    /// Jobs ended (wake-up to sleep or exit).
    pub jobs: u64,
    /// Jobs that ended after their absolute deadline.
    pub misses: u64,
    /// Times its budget ran out.
    pub throttles: u64,
    /// Wake-up to the end of each job.
    pub response: LatencyHistogram,
}

#[derive(Debug, Clone)]
struct Job {
    arrival: u64,
    /// Its absolute deadline, once it has one (a throttled wakee gets it at
    /// the replenishment).
    deadline: Option<u64>,
}

#[derive(Debug, Clone)]
struct DlTask {
    id: TaskId,
    p: DlParams,
    runtime: i64,
    deadline: u64,
    started: bool,
    throttled: bool,
    /// Generation of its replenishment timer (older timer events are stale).
    timer_gen: u32,
    /// Woken and not blocked (running, queued or throttled).
    runnable: bool,
    queued: bool,
    job: Option<Job>,
    stats: DlStats,
}

/// The deadline class: per-task CBS state and one global EDF queue.
#[derive(Debug, Clone, Default)]
pub struct DlClass {
    /// Task id to index in `tasks` (None: not a DL task).
    slot: Vec<Option<u32>>,
    tasks: Vec<DlTask>,
    /// Runnable, unthrottled, not running: (absolute deadline, task).
    queue: BTreeSet<(u64, TaskId)>,
    /// The DL task each CPU runs.
    curr: Vec<Option<TaskId>>,
    /// Replenishment timers to arm: (time, task, generation); the engine takes them.
    pub timers: Vec<(u64, TaskId, u32)>,
    /// A DL task was requeued by a preemption, released by a replenishment
    /// or started running (displacing RT work): something may have to move
    /// to another CPU (wake-ups choose their CPU in `select_cpu` instead).
    pub moved: bool,
}

impl DlClass {
    pub fn new(ncpus: usize) -> Self {
        DlClass { curr: vec![None; ncpus], ..Default::default() }
    }

    pub fn task_new(&mut self, t: TaskId, p: DlParams) {
        super::ensure(&mut self.slot, t);
        self.slot[t as usize] = Some(self.tasks.len() as u32);
        self.tasks.push(DlTask {
            id: t,
            p,
            runtime: 0,
            deadline: 0,
            started: false,
            throttled: false,
            timer_gen: 0,
            runnable: false,
            queued: false,
            job: None,
            stats: DlStats::default(),
        });
    }

    fn get(&self, t: TaskId) -> Option<&DlTask> {
        let i = (*self.slot.get(t as usize)?)?;
        Some(&self.tasks[i as usize])
    }

    fn task(&mut self, t: TaskId) -> &mut DlTask {
        let i = self.slot[t as usize].expect("a DL task");
        &mut self.tasks[i as usize]
    }

    pub fn is_dl(&self, t: TaskId) -> bool {
        self.get(t).is_some()
    }

    /// Its absolute deadline now.
    pub fn deadline(&self, t: TaskId) -> u64 {
        self.get(t).map_or(u64::MAX, |d| d.deadline)
    }

    /// Its remaining runtime now (negative: overrun).
    pub fn runtime(&self, t: TaskId) -> i64 {
        self.get(t).map_or(0, |d| d.runtime)
    }

    pub fn is_throttled(&self, t: TaskId) -> bool {
        self.get(t).is_some_and(|d| d.throttled)
    }

    pub fn is_queued(&self, t: TaskId) -> bool {
        self.get(t).is_some_and(|d| d.queued)
    }

    /// The DL task running on `cpu`.
    pub fn curr(&self, cpu: usize) -> Option<TaskId> {
        self.curr[cpu]
    }

    /// The earliest queued deadline and its task.
    pub fn first(&self) -> Option<(u64, TaskId)> {
        self.queue.first().copied()
    }

    /// Work for the engine: timers to arm, or something to move.
    pub fn busy(&self) -> bool {
        !self.timers.is_empty() || self.moved
    }

    fn enqueue(&mut self, t: TaskId) {
        let d = self.task(t);
        d.queued = true;
        let key = (d.deadline, t);
        if let Some(j) = &mut d.job {
            j.deadline.get_or_insert(key.0);
        }
        self.queue.insert(key);
    }

    /// The task wakes (its first wake-up sets it up). True: it is queued;
    /// false: it is throttled until its replenishment timer.
    pub fn wake(&mut self, t: TaskId, now: u64) -> bool {
        let d = self.task(t);
        d.runnable = true;
        d.job = Some(Job { arrival: now, deadline: None });
        if d.throttled {
            return false;
        }
        let (q, dl, p) = (d.p.runtime, d.p.deadline, d.p.period);
        if !d.started {
            d.started = true;
            d.deadline = now + dl;
            d.runtime = q as i64;
        } else {
            let constrained = dl < p;
            let next_period = d.deadline - dl + p;
            if constrained && d.deadline < now && now < next_period {
                // dl_check_constrained_dl: wait for the next period.
                d.runtime = d.runtime.min(0);
                self.arm(t, next_period);
                return false;
            }
            // runtime / (deadline - now) > Q / D, cross-multiplied.
            let overflow =
                |d: &DlTask| (d.runtime.max(0) as u128) * dl as u128 > (d.deadline - now) as u128 * q as u128;
            if d.deadline < now || overflow(d) {
                if constrained && d.deadline >= now {
                    d.runtime = ((d.deadline - now) as u128 * q as u128 / dl as u128) as i64;
                } else {
                    d.deadline = now + dl;
                    d.runtime = q as i64;
                }
            }
        }
        self.enqueue(t);
        true
    }

    /// Throttle `t` until its next period, or replenish it at once if that
    /// has begun (`start_dl_timer` fails for a time in the past).
    fn throttle(&mut self, t: TaskId, now: u64) {
        let d = self.task(t);
        let at = d.deadline - d.p.deadline + d.p.period;
        if at <= now {
            self.replenish(t, now);
            if self.task(t).runnable {
                self.enqueue(t);
                self.moved = true;
            }
        } else {
            self.arm(t, at);
        }
    }

    fn arm(&mut self, t: TaskId, at: u64) {
        let d = self.task(t);
        d.throttled = true;
        d.timer_gen = d.timer_gen.wrapping_add(1);
        let gen = d.timer_gen;
        self.timers.push((at, t, gen));
    }

    fn replenish(&mut self, t: TaskId, now: u64) {
        let d = self.task(t);
        while d.runtime <= 0 {
            d.deadline += d.p.period;
            d.runtime += d.p.runtime as i64;
        }
        if d.deadline < now {
            d.deadline = now + d.p.deadline;
            d.runtime = d.p.runtime as i64;
        }
        d.throttled = false;
    }

    /// The replenishment timer of `t` fires. True: `t` is queued now.
    pub fn timer(&mut self, t: TaskId, gen: u32, now: u64) -> bool {
        let d = self.task(t);
        if d.timer_gen != gen || !d.throttled {
            return false;
        }
        self.replenish(t, now);
        if self.task(t).runnable {
            self.enqueue(t);
            self.moved = true;
            return true;
        }
        false
    }

    /// The earliest deadline runs on `cpu`.
    pub fn pick(&mut self, cpu: usize) -> Option<TaskId> {
        let (_, t) = self.queue.pop_first()?;
        self.task(t).queued = false;
        self.curr[cpu] = Some(t);
        self.moved = true;
        Some(t)
    }

    /// CPU time `ran` used by what `cpu` runs.
    pub fn account(&mut self, cpu: usize, ran: u64) {
        if let Some(t) = self.curr[cpu] {
            self.task(t).runtime -= ran as i64;
        }
    }

    /// Tick on `cpu`: true if its DL task has used up its budget (it is
    /// throttled when it stops).
    pub fn tick(&self, cpu: usize) -> bool {
        self.curr[cpu].is_some_and(|t| self.runtime(t) <= 0)
    }

    /// The DL task on `cpu` stops running.
    pub fn stopping(&mut self, cpu: usize, t: TaskId, why: super::Stop, now: u64) {
        use super::Stop;
        self.curr[cpu] = None;
        let d = self.task(t);
        match why {
            Stop::Yield => {
                d.runtime = d.runtime.min(0);
                self.throttle(t, now);
                return;
            }
            Stop::Preempt => {}
            Stop::Sleep { .. } | Stop::Exit => {
                d.runnable = false;
                if let Some(j) = d.job.take() {
                    d.stats.jobs += 1;
                    d.stats.response.record(now - j.arrival);
                    if j.deadline.is_some_and(|dl| now > dl) {
                        d.stats.misses += 1;
                    }
                }
                if why == Stop::Exit {
                    // A pending timer finds it not runnable and only replenishes.
                    return;
                }
            }
        }
        let d = self.task(t);
        if d.runtime <= 0 {
            d.stats.throttles += 1;
            self.throttle(t, now);
        } else if d.runnable {
            self.enqueue(t);
            self.moved = true;
        }
    }

    /// Every DL task's results, by task id.
    pub fn stats(&self) -> Vec<(TaskId, DlStats)> {
        self.tasks.iter().map(|d| (d.id, d.stats.clone())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Stop;

    const MS: u64 = 1_000_000;

    fn params(s: &str) -> DlParams {
        parse_params(s).unwrap()
    }

    fn class(tasks: &[&str]) -> DlClass {
        let mut c = DlClass::new(1);
        for (i, s) in tasks.iter().enumerate() {
            c.task_new(i as TaskId, params(s));
        }
        c
    }

    #[test]
    fn params_parse_with_units_and_the_kernel_checks() {
        assert_eq!(params("2ms/10ms/10ms"), DlParams { runtime: 2 * MS, deadline: 10 * MS, period: 10 * MS });
        assert_eq!(params("500us/5ms"), DlParams { runtime: 500_000, deadline: 5 * MS, period: 5 * MS });
        let e = parse_params("3ms/2ms/10ms").unwrap_err();
        assert!(e.contains("runtime <= deadline <= period"), "{e}");
        let e = parse_params("1ms/20ms/10ms").unwrap_err();
        assert!(e.contains("runtime <= deadline <= period"), "{e}");
        let e = parse_params("1000/50us/50us").unwrap_err();
        assert!(e.contains("1024 ns"), "{e}");
        let e = parse_params("10us/50us/50us").unwrap_err();
        assert!(e.contains("period 50us"), "{e}");
        let e = parse_params("1ms/5s/5s").unwrap_err();
        assert!(e.contains("period 5s"), "{e}");
        assert!(parse_params("2ms").unwrap_err().contains("runtime/deadline/period"));
        assert!(parse_params("2ms/x/10ms").unwrap_err().contains("deadline 'x'"));
    }

    #[test]
    fn admission_fixed_point_matches_the_kernel() {
        // to_ratio(1 s, 950 ms) = 996147; to_ratio(10 ms, 2 ms) = 209715.
        assert_eq!(to_ratio(1_000_000_000, 950_000_000), 996_147);
        assert_eq!(to_ratio(10 * MS, 2 * MS), 209_715);
        assert_eq!(to_ratio(0, 1), 0);
    }

    #[test]
    fn new_task_gets_now_plus_d_and_a_full_budget() {
        let mut c = class(&["2ms/10ms/20ms"]);
        assert!(c.wake(0, 5 * MS));
        assert_eq!((c.deadline(0), c.runtime(0)), (15 * MS, 2 * MS as i64));
    }

    #[test]
    fn edf_picks_the_earliest_absolute_deadline() {
        let mut c = class(&["1ms/30ms/30ms", "1ms/10ms/10ms", "1ms/20ms/20ms"]);
        for t in 0..3 {
            c.wake(t, 0);
        }
        assert_eq!([c.pick(0), c.pick(0), c.pick(0), c.pick(0)], [Some(1), Some(2), Some(0), None]);
    }

    #[test]
    fn budget_runs_out_throttles_until_the_next_period_then_replenishes() {
        let mut c = class(&["2ms/10ms/10ms"]);
        c.wake(0, 0);
        assert_eq!(c.pick(0), Some(0));
        c.account(0, MS);
        assert!(!c.tick(0), "1 of 2 ms used");
        // Tick-granular enforcement: 0.5 ms past the budget when it is seen.
        c.account(0, MS + MS / 2);
        assert!(c.tick(0));
        c.stopping(0, 0, Stop::Preempt, 2 * MS + MS / 2);
        assert!(c.is_throttled(0) && !c.is_queued(0));
        assert_eq!(c.stats()[0].1.throttles, 1);
        // Timer at deadline - D + P = 10 ms.
        assert_eq!(c.timers, vec![(10 * MS, 0, 1)]);
        assert_eq!(c.pick(0), None);
        assert!(c.timer(0, 1, 10 * MS));
        // runtime -0.5 ms + Q = 1.5 ms, deadline 10 + P = 20 ms: the overrun is paid back.
        assert_eq!((c.deadline(0), c.runtime(0)), (20 * MS, 1_500_000));
        assert!(!c.timer(0, 1, 10 * MS), "a fired timer does not fire twice");
    }

    #[test]
    fn late_waker_gets_now_plus_d_and_a_keeping_one_keeps_its_deadline() {
        let mut c = class(&["2ms/10ms/10ms"]);
        c.wake(0, 0);
        c.pick(0);
        c.account(0, MS);
        c.stopping(0, 0, Stop::Sleep { io: true }, MS);
        // At 2 ms: 1 ms left for 8 ms to its deadline, 1/8 <= 2/10: it keeps both.
        c.wake(0, 2 * MS);
        assert_eq!((c.deadline(0), c.runtime(0)), (10 * MS, MS as i64));
        c.pick(0);
        c.stopping(0, 0, Stop::Sleep { io: true }, 2 * MS);
        // At 9.6 ms: 1 ms left for 0.4 ms, 2.5 > 0.2: deadline = now + D, runtime = Q.
        c.wake(0, 9_600_000);
        assert_eq!((c.deadline(0), c.runtime(0)), (19_600_000, 2 * MS as i64));
        c.pick(0);
        c.stopping(0, 0, Stop::Sleep { io: true }, 9_600_000);
        // After its deadline: deadline = now + D.
        c.wake(0, 25 * MS);
        assert_eq!((c.deadline(0), c.runtime(0)), (35 * MS, 2 * MS as i64));
    }

    #[test]
    fn constrained_late_waker_waits_for_its_next_period_and_revised_cbs_scales_runtime() {
        let mut c = class(&["2ms/5ms/10ms"]);
        c.wake(0, 0);
        c.pick(0);
        c.account(0, MS);
        c.stopping(0, 0, Stop::Sleep { io: true }, MS);
        // At 4 ms: 1 ms left for 1 ms, 1 > 2/5 = 0.4: revised CBS keeps the
        // deadline with runtime (5 - 4) ms x 2/5 = 0.4 ms.
        c.wake(0, 4 * MS);
        assert_eq!((c.deadline(0), c.runtime(0)), (5 * MS, 400_000));
        c.pick(0);
        c.stopping(0, 0, Stop::Sleep { io: true }, 4 * MS);
        // At 6 ms: past its 5 ms deadline, before its next period (10 ms): throttled.
        assert!(!c.wake(0, 6 * MS));
        assert!(c.is_throttled(0));
        let (at, _, gen) = *c.timers.last().unwrap();
        assert_eq!(at, 10 * MS);
        assert!(c.timer(0, gen, 10 * MS));
        assert_eq!((c.deadline(0), c.runtime(0)), (15 * MS, 2 * MS as i64));
    }

    #[test]
    fn yield_gives_up_the_rest_of_the_budget() {
        let mut c = class(&["2ms/10ms/10ms"]);
        c.wake(0, 0);
        c.pick(0);
        c.account(0, MS / 2);
        c.stopping(0, 0, Stop::Yield, MS / 2);
        assert!(c.is_throttled(0));
        assert_eq!(c.stats()[0].1.throttles, 0, "a yield is not a budget overrun");
        let (at, _, gen) = c.timers[0];
        assert_eq!(at, 10 * MS);
        assert!(c.timer(0, gen, at));
        assert_eq!((c.deadline(0), c.runtime(0)), (20 * MS, 2 * MS as i64));
    }

    #[test]
    fn jobs_count_misses_against_the_deadline_they_woke_with() {
        let mut c = class(&["2ms/10ms/10ms"]);
        c.wake(0, 0);
        c.pick(0);
        c.stopping(0, 0, Stop::Sleep { io: true }, 3 * MS);
        c.wake(0, 20 * MS);
        c.pick(0);
        c.stopping(0, 0, Stop::Sleep { io: true }, 31 * MS);
        let s = &c.stats()[0].1;
        assert_eq!((s.jobs, s.misses), (2, 1));
        assert_eq!((s.response.min(), s.response.max()), (Some(3 * MS), Some(11 * MS)));
    }
}
