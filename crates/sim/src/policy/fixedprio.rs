//! `fixedprio`: a fixed-priority scheduler for normal tasks, the design E3
//! proposed as future work ("a fixed-priority scheduler" for embedded
//! boards, after finding that ingosched's dynamic bonus made non-RT wake-up
//! latency unpredictable). No such scheduler shipped; this one is designed
//! here and is new, not a model of a historical kernel.
//!
//! Sources for its parts: seeds-digest.md E3 (the proposal: no dynamic
//! bonus, static slices from nice, O(1) bitmap); POSIX SCHED_RR for the
//! list discipline; Linux's RT class (push/pull) for SMP.
//! - Priority is static: `prio = 120 + nice`, never changed by behaviour
//!   (the timeline shows it moving only on a nice change). 40 FIFO lists per
//!   CPU with a bitmap: pick is find-first-bit, O(1).
//! - Strict priority: the best non-empty list runs; a task at a worse prio
//!   runs only while no better one is runnable on its CPU. A nice-1 hog
//!   beside a nice-0 hog gets nothing: priorities are the contract, as for
//!   RT tasks, and a latency-critical task is given a better nice.
//! - Equal priorities share round-robin: the slice, `base_slice·(20 −
//!   nice)/20` in whole ticks, at least one (200 ms at −20, 100 ms at 0,
//!   5 ms at 19 with the 100 ms default), is the quantum among equals only.
//! - List positions, as POSIX SCHED_RR: a woken or new task joins the tail of
//!   its list with a full slice; slice expiry and sched_yield() go to the
//!   tail (expiry refills the slice, yield keeps what is left); a task
//!   preempted by a better one stays at the head with what is left.
//! - Wake-up preemption: at once, when the woken task's prio is strictly
//!   better than the running one's, sync wake-ups included (no heuristics).
//! - SMP: a waking task goes to its previous CPU if that is free, else to a
//!   free CPU, else to the CPU running the worst task if that is worse than
//!   it (it then preempts there), else to its previous CPU. A CPU about to
//!   pick pulls the best task waiting behind a running one elsewhere if it
//!   is better than its own best; at each tick a CPU with tasks waiting pushes its best one to a CPU
//!   that is free or runs a worse task. So across CPUs, too, a better task
//!   never waits more than a tick behind a worse one.
//!
//! Scheduler work (cost.rs): a wake-up examines every CPU for a place and
//! locks and queues on the one chosen (a second lock when the task changes
//! CPU); a schedule locks, picks by bitmap and looks at every other CPU's
//! best waiting task (one more lock when it pulls one); a preempted or
//! yielding task is requeued; a tick with a task waiting examines every CPU
//! and locks the target of a push.
//!
//! What it leaves out by design: no sleep/run history, no interactivity
//! estimate, no fairness between priorities, no cache-affinity heuristics
//! (a pull or push moves the task whatever its cache state). Forks: the
//! child queues at the tail of its list on its parent's CPU choice with a
//! full slice (no slice split, no child-runs-first).

use super::{ensure, tunables, Ctx, Policy, PolicyInfo, PrioArray, Stop, TaskId, Wake, WakeKind};
use crate::spec::{Spec, Tunable};
use crate::SimError;

// Rounded to whole ticks, at least one; 10 s is past any useful quantum.
const BASE_SLICE: Tunable = Tunable::duration(
    "base_slice",
    100_000_000,
    1,
    10_000_000_000,
    "quantum of a nice-0 task among equals; nice n gets base·(20 − n)/20, at least a tick",
);

pub const TUNABLES: &[Tunable] = &[BASE_SLICE];

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "fixedprio",
        summary: "fixed priority from nice (E3's proposal, designed here): strict priority, O(1) bitmap, round-robin among equals with slices from nice",
        priority_quantity: "prio 100..139, static (lower is better)",
        tunables: tunables(TUNABLES),
    }
}

/// Lists per CPU: one per nice level.
const LEVELS: usize = 40;

#[derive(Debug, Clone, Default)]
struct T {
    nice: i32,
    /// Ticks left of the current slice.
    slice: u64,
    cpu: usize,
    queued: bool,
    /// The slice ran out: the next requeue goes to the tail with a new one.
    expired: bool,
}

impl T {
    fn level(&self) -> usize {
        (self.nice.clamp(-20, 19) + 20) as usize
    }
}

#[derive(Debug, Clone)]
struct Rq {
    queue: PrioArray,
    curr: Option<TaskId>,
}

pub struct FixedPrio {
    tick_ns: u64,
    base_slice: u64,
    rqs: Vec<Rq>,
    tasks: Vec<T>,
}

impl FixedPrio {
    pub fn new(spec: &Spec, ncpus: usize, hz: u32) -> Result<Self, SimError> {
        Ok(FixedPrio {
            tick_ns: 1_000_000_000 / hz as u64,
            base_slice: spec.tunable(&BASE_SLICE)?,
            rqs: vec![Rq { queue: PrioArray::new(LEVELS), curr: None }; ncpus],
            tasks: Vec::new(),
        })
    }

    /// The slice of a nice-`nice` task in ticks.
    fn slice_ticks(&self, nice: i32) -> u64 {
        (self.base_slice * (20 - nice.clamp(-20, 19)) as u64 / 20 / self.tick_ns).max(1)
    }

    fn push(&mut self, cpu: usize, id: TaskId, head: bool) {
        let t = &mut self.tasks[id as usize];
        t.cpu = cpu;
        t.queued = true;
        let level = t.level();
        if head {
            self.rqs[cpu].queue.push_front(level, id);
        } else {
            self.rqs[cpu].queue.push_back(level, id);
        }
    }

    fn take(&mut self, cpu: usize, level: usize) -> TaskId {
        let id = self.rqs[cpu].queue.pop_at(level).expect("the bitmap names a non-empty list");
        self.tasks[id as usize].queued = false;
        id
    }

    /// Nothing runs on `cpu` (no RT task either) and nothing waits there.
    fn free(&self, cx: &Ctx, cpu: usize) -> bool {
        cx.cpus[cpu].curr.is_none() && self.rqs[cpu].queue.is_empty()
    }

    /// The level of the normal task running on `cpu`; None if it is free for
    /// this class (idle) and level 0 (unbeatable) while an RT task runs.
    fn running_level(&self, cx: &Ctx, cpu: usize) -> Option<usize> {
        if cx.cpus[cpu].curr_rt {
            return Some(0);
        }
        self.rqs[cpu].curr.map(|c| self.tasks[c as usize].level())
    }

    /// Where a task at `level` should go to run soonest: a free CPU (previous
    /// first), else the CPU running the worst task worse than `level`.
    fn place(&self, cx: &Ctx, prev: usize, level: usize) -> Option<usize> {
        let n = self.rqs.len();
        let order = (0..n).map(|k| (prev + k) % n);
        if let Some(c) = order.clone().find(|&c| self.free(cx, c)) {
            return Some(c);
        }
        // The worst running task; among equals the first from `prev`.
        order
            .filter_map(|c| self.running_level(cx, c).filter(|&l| l > level).map(|l| (l, c)))
            .fold(None, |best: Option<(usize, usize)>, x| if best.is_some_and(|b| b.0 >= x.0) { best } else { Some(x) })
            .map(|(_, c)| c)
    }
}

impl Policy for FixedPrio {
    fn priority(&self, t: TaskId, _now: u64) -> i64 {
        120 + self.tasks[t as usize].nice as i64
    }

    fn task_new(&mut self, _cx: &mut Ctx, id: TaskId, nice: i32, parent: Option<TaskId>) {
        ensure(&mut self.tasks, id);
        let cpu = parent.map_or(0, |p| self.tasks[p as usize].cpu);
        self.tasks[id as usize] = T { nice, slice: self.slice_ticks(nice), cpu, ..T::default() };
    }

    fn select_cpu(&mut self, cx: &mut Ctx, id: TaskId, w: &Wake) -> usize {
        let prev = match w.kind {
            WakeKind::New { parent: Some(_) } => w.waker_cpu.unwrap_or(w.prev_cpu),
            _ => w.prev_cpu,
        }
        .min(self.rqs.len() - 1);
        cx.work(self.rqs.len() as u64, 0, 0);
        self.place(cx, prev, self.tasks[id as usize].level()).unwrap_or(prev)
    }

    fn enqueue(&mut self, cx: &mut Ctx, id: TaskId, cpu: usize, w: &Wake) {
        cx.work(0, 1, 1 + u64::from(cpu != w.prev_cpu));
        // Each activation starts with a full quantum.
        let slice = self.slice_ticks(self.tasks[id as usize].nice);
        let t = &mut self.tasks[id as usize];
        t.slice = slice;
        t.expired = false;
        self.push(cpu, id, false);
    }

    fn wakeup_preempt(&mut self, _cx: &mut Ctx, _cpu: usize, curr: TaskId, id: TaskId, _w: &Wake) -> bool {
        self.tasks[id as usize].level() < self.tasks[curr as usize].level()
    }

    fn pick_next(&mut self, cx: &mut Ctx, cpu: usize) -> Option<TaskId> {
        cx.work(self.rqs.len() as u64 - 1, 1, 1);
        let local = self.rqs[cpu].queue.best();
        // Pull: the best task waiting behind a running one on another CPU, if
        // it beats ours (ties: the longest queue, then the lowest CPU number).
        // An idle CPU's queue is left to it: it was kicked and picks next.
        let remote = (0..self.rqs.len())
            .filter(|&c| c != cpu && cx.cpus[c].curr.is_some())
            .filter_map(|c| self.rqs[c].queue.best().map(|l| (l, std::cmp::Reverse(self.rqs[c].queue.len), c)))
            .min()
            .filter(|r| local.is_none_or(|l| r.0 < l));
        let id = match (remote, local) {
            (Some((level, _, src)), _) => {
                cx.work(0, 1, 1);
                self.take(src, level)
            }
            (None, Some(level)) => self.take(cpu, level),
            (None, None) => return None,
        };
        self.tasks[id as usize].cpu = cpu;
        self.rqs[cpu].curr = Some(id);
        Some(id)
    }

    fn stopping(&mut self, cx: &mut Ctx, cpu: usize, id: TaskId, why: Stop) {
        self.rqs[cpu].curr = None;
        if matches!(why, Stop::Preempt | Stop::Yield) {
            cx.work(0, 1, 0);
        }
        match why {
            Stop::Preempt => {
                let slice = self.slice_ticks(self.tasks[id as usize].nice);
                let t = &mut self.tasks[id as usize];
                let expired = std::mem::take(&mut t.expired);
                if expired {
                    t.slice = slice;
                }
                // Preempted with slice left: the head, as POSIX keeps it.
                self.push(cpu, id, !expired);
            }
            Stop::Yield => self.push(cpu, id, false),
            Stop::Sleep { .. } | Stop::Exit => {}
        }
    }

    fn tick(&mut self, cx: &mut Ctx, cpu: usize, curr: Option<TaskId>) -> bool {
        // Push: our best waiting task to a CPU that is free or runs a worse task.
        if let Some(level) = self.rqs[cpu].queue.best() {
            let n = self.rqs.len();
            cx.work(n as u64, 0, 0);
            let target = (1..n).map(|k| (cpu + k) % n).find(|&c| {
                self.rqs[c].queue.best().is_none_or(|l| l > level)
                    && self.running_level(cx, c).is_none_or(|l| l > level)
            });
            if let Some(dst) = target {
                cx.work(0, 2, 1);
                let id = self.take(cpu, level);
                self.push(dst, id, false);
                cx.kick.push(dst);
            }
        }
        let Some(id) = curr else { return false };
        let t = &mut self.tasks[id as usize];
        t.slice = t.slice.saturating_sub(1);
        if t.slice == 0 {
            t.expired = true;
            return true;
        }
        false
    }

    fn set_nice(&mut self, cx: &mut Ctx, id: TaskId, nice: i32, running_on: Option<usize>) -> bool {
        let t = &self.tasks[id as usize];
        let (cpu, old, queued) = (t.cpu, t.level(), t.queued);
        if queued {
            cx.work(0, 2, 1);
            self.rqs[cpu].queue.remove(old, id);
        }
        self.tasks[id as usize].nice = nice;
        let level = self.tasks[id as usize].level();
        if queued {
            self.push(cpu, id, false);
            if self.running_level(cx, cpu).is_some_and(|l| level < l) {
                cx.kick.push(cpu);
            }
        }
        // A running task that fell below one waiting on its CPU gives way.
        running_on.is_some_and(|c| self.rqs[c].queue.best().is_some_and(|l| l < level))
    }

    fn timeslice_ns(&self, nice: i32) -> u64 {
        self.slice_ticks(nice) * self.tick_ns
    }

    fn state_quantities(&self) -> &'static [super::StateVar] {
        const VARS: &[super::StateVar] = &[
            super::StateVar::new("prio", "", Some(true), "static priority 100..139, 120 + nice"),
            super::StateVar::new("slice", "ticks", None, "ticks left of its slice"),
        ];
        VARS
    }

    fn state(&self, t: TaskId, now: u64, out: &mut [i64]) {
        out[0] = self.priority(t, now);
        out[1] = self.tasks[t as usize].slice as i64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{CpuView, TestBed};

    fn fp(spec: &str, ncpus: usize, hz: u32) -> FixedPrio {
        FixedPrio::new(&Spec::parse(spec, "policy").unwrap(), ncpus, hz).unwrap()
    }

    fn new_task(p: &mut FixedPrio, tb: &mut TestBed, id: TaskId, nice: i32) -> usize {
        p.task_new(&mut tb.cx(), id, nice, None);
        let w = Wake { kind: WakeKind::New { parent: None }, prev_cpu: 0, waker_cpu: None };
        let cpu = p.select_cpu(&mut tb.cx(), id, &w);
        p.enqueue(&mut tb.cx(), id, cpu, &w);
        cpu
    }

    fn run(p: &mut FixedPrio, tb: &mut TestBed, cpu: usize) -> Option<TaskId> {
        let t = p.pick_next(&mut tb.cx(), cpu);
        tb.cpus[cpu] = CpuView { curr: t, curr_rt: false };
        t
    }

    #[test]
    fn slices_are_linear_in_nice_and_whole_ticks() {
        let p = fp("fixedprio", 1, 1000);
        let ms: Vec<u64> = [-20, -10, 0, 1, 10, 19].iter().map(|&n| p.timeslice_ns(n) / 1_000_000).collect();
        assert_eq!(ms, [200, 150, 100, 95, 50, 5]);
        // At HZ=100 nice 19's 5 ms is less than a tick: one tick.
        assert_eq!(fp("fixedprio", 1, 100).timeslice_ns(19), 10_000_000);
        assert_eq!(fp("fixedprio:base_slice=10ms", 1, 1000).timeslice_ns(0), 10_000_000);
    }

    #[test]
    fn strict_priority_and_posix_list_positions() {
        let mut p = fp("fixedprio", 1, 1000);
        let mut tb = TestBed::new(1, 1000);
        for (id, nice) in [(0, 0), (1, 0), (2, 5)] {
            new_task(&mut p, &mut tb, id, nice);
        }
        assert_eq!(run(&mut p, &mut tb, 0), Some(0));
        // A better task wakes: it preempts; the preempted one keeps the head.
        new_task(&mut p, &mut tb, 3, -1);
        assert!(p.wakeup_preempt(
            &mut tb.cx(),
            0,
            0,
            3,
            &Wake { kind: WakeKind::Sync, prev_cpu: 0, waker_cpu: Some(0) }
        ));
        assert!(!p.wakeup_preempt(
            &mut tb.cx(),
            0,
            0,
            1,
            &Wake { kind: WakeKind::Sync, prev_cpu: 0, waker_cpu: Some(0) }
        ));
        p.stopping(&mut tb.cx(), 0, 0, Stop::Preempt);
        assert_eq!(run(&mut p, &mut tb, 0), Some(3));
        p.stopping(&mut tb.cx(), 0, 3, Stop::Sleep { io: true });
        assert_eq!(run(&mut p, &mut tb, 0), Some(0), "the preempted task resumes before its equal");
        // Its slice runs out after the rest of 100 ticks: tail, behind task 1.
        let mut ticks = 0;
        while !p.tick(&mut tb.cx(), 0, Some(0)) {
            ticks += 1;
        }
        assert_eq!(ticks, 99);
        p.stopping(&mut tb.cx(), 0, 0, Stop::Preempt);
        assert_eq!(run(&mut p, &mut tb, 0), Some(1));
        // A yield goes to the tail of its list: task 0 next; nice 5 still waits.
        p.stopping(&mut tb.cx(), 0, 1, Stop::Yield);
        assert_eq!(run(&mut p, &mut tb, 0), Some(0));
        p.stopping(&mut tb.cx(), 0, 0, Stop::Yield);
        assert_eq!(run(&mut p, &mut tb, 0), Some(1));
        assert_eq!(p.priority(2, 0), 125);
        assert!(p.tasks[2].queued, "the nice-5 task never ran");
    }

    #[test]
    fn smp_places_pulls_and_pushes_by_priority() {
        let mut p = fp("fixedprio", 2, 1000);
        let mut tb = TestBed::new(2, 1000);
        // Two tasks spread over the two free CPUs.
        assert_eq!(new_task(&mut p, &mut tb, 0, 5), 0);
        assert_eq!(new_task(&mut p, &mut tb, 1, 0), 1);
        assert_eq!((run(&mut p, &mut tb, 0), run(&mut p, &mut tb, 1)), (Some(0), Some(1)));
        // Both busy: a nice-0 task queues where the worse (nice 5) task runs, and preempts it.
        let w = Wake { kind: WakeKind::Sync, prev_cpu: 1, waker_cpu: Some(1) };
        p.task_new(&mut tb.cx(), 2, 0, None);
        assert_eq!(p.select_cpu(&mut tb.cx(), 2, &w), 0);
        assert!(p.wakeup_preempt(&mut tb.cx(), 0, 0, 2, &w));
        // Had it queued on CPU 1 behind its equal instead, CPU 1's next tick
        // pushes it to CPU 0 (running worse) and kicks CPU 0.
        p.enqueue(&mut tb.cx(), 2, 1, &w);
        p.tick(&mut tb.cx(), 1, Some(1));
        assert_eq!((p.tasks[2].cpu, &tb.kick[..]), (0, &[0][..]));
        p.stopping(&mut tb.cx(), 0, 0, Stop::Preempt);
        assert_eq!(run(&mut p, &mut tb, 0), Some(2));
        // CPU 1's task sleeps with nothing queued there: it pulls the nice-5
        // task waiting on CPU 0 rather than idle.
        p.stopping(&mut tb.cx(), 1, 1, Stop::Sleep { io: true });
        assert_eq!(run(&mut p, &mut tb, 1), Some(0));
        assert_eq!(p.tasks[0].cpu, 1);
        // Nothing waits anywhere now: no push at a tick.
        tb.kick.clear();
        p.tick(&mut tb.cx(), 0, Some(2));
        assert!(tb.kick.is_empty());
    }
}
