//! POSIX real-time classes SCHED_FIFO and SCHED_RR, layered above the
//! normal-class policy (Linux class order: rt > fair).
//!
//! Source: schedulers.md §9 (`kernel/sched/rt.c`, 2.6.25+).
//! - Per CPU, 99 FIFO lists by rt_priority (higher is better); the highest
//!   non-empty list runs. A preempted FIFO/RR task stays at the head of its
//!   list; yield and RR slice expiry (peers queued) move it to the tail.
//! - RR slice `sched_rr_timeslice` = 100 ms, counted in ticks.
//! - A wakee preempts only with strictly higher priority; any RT task
//!   preempts a normal task.
//! - Throttling: per CPU `rt_time` grows while RT runs; past
//!   `rt_runtime` (950 ms) the CPU's RT queue is throttled and normal tasks
//!   run; every `rt_period` (1 s) `rt_time -= min(rt_time, rt_runtime)` and
//!   the queue is unthrottled. RT_RUNTIME_SHARE is off (post-5.10 default).
//!
//! Simplifications: SMP push/pull is reduced to "a waking RT task goes to its
//! previous CPU if that runs something of lower priority, else to the CPU
//! running the lowest-priority work (idle first)" and "a CPU with no RT work
//! of its own pulls the best queued RT task from another CPU when it picks,
//! if that task waits behind RT work of its priority or higher there"
//! (`pull_rt_task` pulls only from an RT-overloaded CPU, and skips a task
//! that outranks what its CPU runs: it is just being woken and will run
//! there once the reschedule reaches it).
//! Throttling is checked at tick granularity. No dl_server.
//! The same rules serve every normal policy, including the BSD ones (FreeBSD's
//! rtprio band behaves the same for this purpose).
//!
//! SCHED_DEADLINE tasks ([`super::deadline`]) enter here too: every call
//! asks the deadline class first, as Linux's class order does (dl > rt).

use super::deadline::DlClass;
use super::{CpuView, PrioArray, Stop, TaskId, TunableInfo};
use crate::program::Class;
use crate::spec::{Spec, Tunable};
use crate::SimError;

pub const KEYS: [&str; 3] = ["rt_runtime", "rt_period", "rr_timeslice"];

const RUNTIME: Tunable = Tunable::duration(
    "rt_runtime",
    950_000_000,
    0,
    2_000_000_000_000,
    "RT budget per period per CPU (sched_rt_runtime_us); 0 disables throttling",
)
.was("rt_runtime_ns");
// sched_rt_period_us's range is 1 us to INT_MAX us (~2147 s).
const PERIOD: Tunable = Tunable::duration(
    "rt_period",
    1_000_000_000,
    1_000,
    2_000_000_000_000,
    "RT throttling period (sched_rt_period_us)",
)
.was("rt_period_ns");
// Whole ticks: a positive value below one tick is one tick.
const RR_TIMESLICE: Tunable =
    Tunable::duration("rr_timeslice", 100_000_000, 1, 10_000_000_000, "SCHED_RR timeslice (sched_rr_timeslice_ms)")
        .was("rr_timeslice_ns");

/// The RT layer's keys, accepted in any policy spec; `KEYS` names them.
pub const TUNABLES: &[Tunable] = &[RUNTIME, PERIOD, RR_TIMESLICE];

pub fn tunables() -> Vec<TunableInfo> {
    super::tunables(TUNABLES)
}

#[derive(Debug, Clone, Default)]
struct RtTask {
    prio: u8,
    rr: bool,
    /// RR ticks left.
    rr_left: u32,
}

pub struct RtLayer {
    queues: Vec<PrioArray>,
    tasks: Vec<RtTask>,
    rt_time: Vec<u64>,
    throttled: Vec<bool>,
    pub runtime_ns: u64,
    pub period_ns: u64,
    rr_ticks: u32,
    /// SCHED_DEADLINE, above the RT queues.
    pub dl: DlClass,
}

/// `cpu_level` of a CPU running a deadline task: above every rt_priority.
const DL_LEVEL: i32 = 100;

fn idx(prio: u8) -> usize {
    99 - prio as usize
}

/// The rt_priority of queue index `i` ([`idx`]'s inverse), as a CPU level.
fn level_of_idx(i: usize) -> i32 {
    99 - i as i32
}

impl RtLayer {
    pub fn new(spec: &Spec, ncpus: usize, hz: u32) -> Result<Self, SimError> {
        let period_ns = spec.tunable(&PERIOD)?;
        let runtime_ns = spec.tunable(&RUNTIME)?;
        let rr_ns = spec.tunable(&RR_TIMESLICE)?;
        if runtime_ns > period_ns {
            return Err(spec.bad_value(
                "rt_runtime",
                &crate::spec::fmt_ns(runtime_ns),
                &format!(
                    "a budget no larger than rt_period ({}; give rt_runtime with a short period)",
                    crate::spec::fmt_ns(period_ns)
                ),
            ));
        }
        let tick = 1_000_000_000 / hz as u64;
        Ok(RtLayer {
            queues: vec![PrioArray::new(100); ncpus],
            tasks: Vec::new(),
            rt_time: vec![0; ncpus],
            throttled: vec![false; ncpus],
            runtime_ns,
            period_ns,
            rr_ticks: (rr_ns / tick).max(1) as u32,
            dl: DlClass::new(ncpus),
        })
    }

    pub fn task_new(&mut self, t: TaskId, class: Class) {
        super::ensure(&mut self.tasks, t);
        if let Class::Deadline(p) = class {
            self.dl.task_new(t, p);
            return;
        }
        self.tasks[t as usize] =
            RtTask { prio: class.rt_prio(), rr: matches!(class, Class::Rr(_)), rr_left: self.rr_ticks };
    }

    pub fn prio(&self, t: TaskId) -> u8 {
        self.tasks[t as usize].prio
    }

    /// Priority of what `cpu` runs, for comparisons: idle -1, normal 0, RT 1..99.
    fn cpu_level(&self, v: &CpuView) -> i32 {
        match v.curr {
            None => -1,
            Some(c) if v.curr_rt && self.dl.is_dl(c) => DL_LEVEL,
            Some(c) if v.curr_rt => self.prio(c) as i32,
            Some(_) => 0,
        }
    }

    /// How good a CPU is to run DL task `t` (or one with `deadline`): lower
    /// is better; None if it runs an earlier or equal deadline.
    fn dl_target(&self, v: &CpuView, deadline: u64) -> Option<u128> {
        match v.curr {
            Some(c) if v.curr_rt && self.dl.is_dl(c) => {
                // The latest deadline it beats first.
                let d = self.dl.deadline(c);
                (deadline < d).then(|| 1000 + (u64::MAX - d) as u128)
            }
            _ => Some((self.cpu_level(v) + 1) as u128),
        }
    }

    /// The best CPU to preempt for `deadline` (None: it beats none).
    fn dl_best(&self, cpus: &[CpuView], deadline: u64, prefer: usize) -> Option<usize> {
        let mut best = self.dl_target(&cpus[prefer], deadline).map(|s| (s, prefer));
        for (c, v) in cpus.iter().enumerate() {
            if let Some(s) = self.dl_target(v, deadline) {
                if best.is_none_or(|b| s < b.0) {
                    best = Some((s, c));
                }
            }
        }
        best.map(|b| b.1)
    }

    /// After the deadline class moved something (`DlClass::moved`), a CPU
    /// to reschedule: one running work the earliest queued DL task beats
    /// (`push_dl_task`: the M earliest deadlines run), else one running
    /// lower work than an RT task queued behind a running DL task
    /// (`push_rt_task`; that CPU's pick pulls it). None: nothing to move.
    pub fn dl_push(&mut self, cpus: &[CpuView]) -> Option<usize> {
        if !std::mem::take(&mut self.dl.moved) {
            return None;
        }
        if let Some(c) = self.dl.first().and_then(|(deadline, _)| self.dl_best(cpus, deadline, 0)) {
            self.dl.moved = true;
            return Some(c);
        }
        for c in 0..cpus.len() {
            let Some(best) = self.queues[c].best().filter(|_| self.dl.curr(c).is_some()) else { continue };
            let prio = 99 - best as i32;
            let to = (0..cpus.len())
                .find(|&d| !self.throttled[d] && self.queues[d].is_empty() && self.cpu_level(&cpus[d]) < prio);
            if to.is_some() {
                // Look again after this move: more may be waiting.
                self.dl.moved = true;
                return to;
            }
        }
        None
    }

    pub fn select_cpu(&self, cpus: &[CpuView], t: TaskId, prev: usize) -> usize {
        if self.dl.is_dl(t) {
            // Stay unless prev runs an earlier deadline (select_task_rq_dl).
            let d = self.dl.deadline(t);
            if self.dl_target(&cpus[prev], d).is_some() {
                return prev;
            }
            return self.dl_best(cpus, d, prev).unwrap_or(prev);
        }
        let p = self.prio(t) as i32;
        if self.cpu_level(&cpus[prev]) < p && !self.throttled[prev] {
            return prev;
        }
        let mut best = prev;
        let mut best_level = self.cpu_level(&cpus[prev]) + if self.throttled[prev] { 1000 } else { 0 };
        for (c, v) in cpus.iter().enumerate() {
            let l = self.cpu_level(v) + if self.throttled[c] { 1000 } else { 0 };
            if l < best_level {
                best = c;
                best_level = l;
            }
        }
        best
    }

    /// `t` wakes on `cpu` at `now`.
    pub fn enqueue(&mut self, cpu: usize, t: TaskId, now: u64) {
        if self.dl.is_dl(t) {
            self.dl.wake(t, now);
            return;
        }
        let p = idx(self.prio(t));
        self.queues[cpu].push_back(p, t);
    }

    /// Does RT wakee `t` preempt what `cpu` runs?
    pub fn preempts(&mut self, cpu: usize, v: &CpuView, t: TaskId) -> bool {
        if self.dl.is_dl(t) {
            let queued = self.dl.is_queued(t);
            let preempts = queued && self.dl_target(v, self.dl.deadline(t)).is_some();
            // Its deadline after the wake-up rule may not beat the CPU chosen
            // with the old one: push it elsewhere (task_woken_dl).
            self.dl.moved |= queued && !preempts;
            return preempts;
        }
        !self.throttled[cpu] && self.cpu_level(v) < self.prio(t) as i32
    }

    pub fn has_queued(&self, cpu: usize) -> bool {
        !self.queues[cpu].is_empty()
    }

    /// Best queued RT task for `cpu`, pulling from another CPU if it has none
    /// (`cpus`: what each CPU runs now, `cpu` itself nothing).
    pub fn pick(&mut self, cpu: usize, cpus: &[CpuView]) -> Option<TaskId> {
        if let Some(t) = self.dl.pick(cpu) {
            return Some(t);
        }
        if self.throttled[cpu] {
            return None;
        }
        if let Some((_, t)) = self.queues[cpu].pop_best() {
            return Some(t);
        }
        let src = (0..self.queues.len())
            .filter(|&c| c != cpu)
            .filter_map(|c| self.queues[c].best().map(|b| (b, c)))
            .filter(|&(best, c)| self.cpu_level(&cpus[c]) >= level_of_idx(best))
            .min()?;
        self.queues[src.1].pop_at(src.0)
    }

    pub fn stopping(&mut self, cpu: usize, t: TaskId, why: Stop, now: u64) {
        if self.dl.is_dl(t) {
            self.dl.stopping(cpu, t, why, now);
            return;
        }
        let p = idx(self.prio(t));
        match why {
            Stop::Preempt => {
                let rt = &mut self.tasks[t as usize];
                if rt.rr && rt.rr_left == 0 {
                    rt.rr_left = self.rr_ticks;
                    self.queues[cpu].push_back(p, t);
                } else {
                    self.queues[cpu].push_front(p, t);
                }
            }
            Stop::Yield => self.queues[cpu].push_back(p, t),
            Stop::Sleep { .. } | Stop::Exit => {}
        }
    }

    /// Charge RT run time to `cpu`.
    pub fn account(&mut self, cpu: usize, ran_ns: u64) {
        self.rt_time[cpu] += ran_ns;
        self.dl.account(cpu, ran_ns);
    }

    /// Tick with RT task `t` running; returns "reschedule".
    pub fn tick(&mut self, cpu: usize, t: TaskId) -> bool {
        if self.dl.is_dl(t) {
            return self.dl.tick(cpu);
        }
        if self.runtime_ns > 0 && self.rt_time[cpu] > self.runtime_ns && !self.throttled[cpu] {
            self.throttled[cpu] = true;
            return true;
        }
        let rt = &mut self.tasks[t as usize];
        if rt.rr {
            rt.rr_left = rt.rr_left.saturating_sub(1);
            if rt.rr_left == 0 {
                // Requeue at the tail only if a peer waits at the same priority.
                if self.queues[cpu].lists[idx(rt.prio)].is_empty() {
                    rt.rr_left = self.rr_ticks;
                    return false;
                }
                return true;
            }
        }
        false
    }

    /// The period timer; returns the CPUs to reschedule (unthrottled with RT work).
    pub fn period_timer(&mut self) -> Vec<usize> {
        let mut out = Vec::new();
        if self.runtime_ns == 0 {
            return out;
        }
        for c in 0..self.rt_time.len() {
            self.rt_time[c] -= self.rt_time[c].min(self.runtime_ns);
            if self.throttled[c] && self.rt_time[c] < self.runtime_ns {
                self.throttled[c] = false;
                out.push(c);
            }
        }
        out
    }

    pub fn throttled(&self, cpu: usize) -> bool {
        self.throttled[cpu]
    }

    /// RT throttling stops what `cpu` runs (a DL task runs on regardless).
    pub fn throttles_curr(&self, cpu: usize) -> bool {
        self.throttled[cpu] && self.dl.curr(cpu).is_none()
    }

    /// DL task `t`'s replenishment timer (generation `gen`) fires at `now`.
    pub fn dl_timer(&mut self, t: TaskId, gen: u32, now: u64) {
        self.dl.timer(t, gen, now);
    }

    /// The admission test for `wl`'s deadline tasks under this layer's
    /// rt_runtime/rt_period.
    pub fn dl_admit(&self, wl: &crate::workload::WorkloadDef, cpus: u32) -> Result<(), SimError> {
        super::deadline::admit(wl, cpus, self.runtime_ns, self.period_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(spec: &str, ncpus: usize) -> RtLayer {
        RtLayer::new(&Spec::parse(spec, "policy").unwrap(), ncpus, 1000).unwrap()
    }

    const IDLE: [CpuView; 1] = [CpuView { curr: None, curr_rt: false }];

    #[test]
    fn a_cpu_pulls_only_an_rt_task_that_waits_behind_rt_work() {
        // CPU 0 picks with nothing of its own; task 0 (FIFO 50) is queued on
        // CPU 1. Behind a normal task it is only waiting for the reschedule
        // its wake-up sent, so it stays (pull_rt_task's skip); behind FIFO 60
        // or an equal FIFO 50 it is pulled; behind FIFO 40 it stays again.
        let mut rt = layer("cfs", 2);
        rt.task_new(0, Class::Fifo(50));
        for (prio, pulled) in [(0, false), (60, true), (50, true), (40, false)] {
            rt.task_new(9, Class::Fifo(prio.max(1)));
            let cpu1 = CpuView { curr: Some(9), curr_rt: prio > 0 };
            rt.enqueue(1, 0, 0);
            let cpus = [IDLE[0], cpu1];
            assert_eq!(rt.pick(0, &cpus), pulled.then_some(0), "CPU 1 running level {prio}");
            if !pulled {
                assert_eq!(rt.pick(1, &IDLE), Some(0), "still queued on CPU 1");
            }
        }
    }

    #[test]
    fn higher_priority_runs_first_and_preempted_fifo_keeps_head() {
        let mut rt = layer("cfs", 1);
        rt.task_new(0, Class::Fifo(10));
        rt.task_new(1, Class::Fifo(10));
        rt.task_new(2, Class::Fifo(50));
        rt.enqueue(0, 0, 0);
        rt.enqueue(0, 1, 0);
        rt.enqueue(0, 2, 0);
        assert_eq!(rt.pick(0, &IDLE), Some(2));
        assert_eq!(rt.pick(0, &IDLE), Some(0));
        // 0 is preempted: it goes back in front of its peer 1.
        rt.stopping(0, 0, Stop::Preempt, 0);
        assert_eq!(rt.pick(0, &IDLE), Some(0));
        rt.stopping(0, 0, Stop::Yield, 0);
        assert_eq!(rt.pick(0, &IDLE), Some(1));
    }

    #[test]
    fn rr_rotates_after_its_slice_only_with_a_peer() {
        let mut rt = layer("cfs[rr_timeslice=3ms]", 1);
        rt.task_new(0, Class::Rr(5));
        rt.task_new(1, Class::Rr(5));
        rt.enqueue(0, 0, 0);
        assert_eq!(rt.pick(0, &IDLE), Some(0));
        // Alone: three ticks pass without a reschedule.
        assert!(!(0..3).any(|_| rt.tick(0, 0)));
        rt.enqueue(0, 1, 0);
        assert!(!rt.tick(0, 0) && !rt.tick(0, 0));
        assert!(rt.tick(0, 0), "third tick ends the 3 ms slice with a peer waiting");
        rt.stopping(0, 0, Stop::Preempt, 0);
        assert_eq!(rt.pick(0, &IDLE), Some(1));
    }

    #[test]
    fn throttles_after_950ms_and_recovers_at_the_period() {
        let mut rt = layer("cfs", 1);
        rt.task_new(0, Class::Fifo(1));
        rt.account(0, 950_000_000);
        assert!(!rt.tick(0, 0), "exactly the budget is not over it");
        rt.account(0, 1_000_000);
        assert!(rt.tick(0, 0));
        assert!(rt.throttled(0));
        rt.enqueue(0, 0, 0);
        assert_eq!(rt.pick(0, &IDLE), None);
        assert_eq!(rt.period_timer(), vec![0]);
        assert_eq!(rt.pick(0, &IDLE), Some(0));
    }
}
