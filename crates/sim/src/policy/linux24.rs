//! Linux 2.4 `goodness()` scheduler: one global runqueue, scanned in full at
//! every schedule (the O(n) scheduler of 2.4.x, as in 2.4.27).
//!
//! Source: schedulers.md §3 (`kernel/sched.c`, `kernel/fork.c`,
//! `kernel/exit.c`, `kernel/timer.c` of 2.4.27; MAX_COUNTER = 20·HZ/100 as
//! in the 2.4.1 and 2.4.17 `include/linux/sched.h`).
//! - `counter` (jiffies left) is both the slice and the dynamic priority.
//!   Quota `NICE_TO_TICKS(nice) = TICK_SCALE(20 − nice) + 1`, TICK_SCALE a
//!   shift chosen by HZ (>>2 below 200, >>1 below 400, ×1 below 800, <<1
//!   below 1600, else <<2): 6 jiffies at nice 0 and HZ=100, 41 at HZ=1000.
//! - `goodness(p, cpu)` = −1 with the SCHED_YIELD bit; 0 if `counter` is 0;
//!   else `counter + 20 − nice`, + PROC_CHANGE_PENALTY (15, i386) if p last
//!   ran on `cpu`, + 1 if p's mm is the active one. Every task here is its
//!   own process (no threads, no kernel threads), so the +1 goes only to the
//!   task whose mm is still active on the CPU: the last normal task that ran
//!   there, kept across idle (lazy TLB).
//! - schedule(): the runqueue list (runnable tasks, running ones included,
//!   new and woken tasks at the tail) is scanned for the highest goodness
//!   among tasks not running on another CPU; ties go to the first in list
//!   order. If the best is 0, a new epoch: **every** live task, sleepers
//!   included, gets `counter = counter/2 + NICE_TO_TICKS(nice)`, then the
//!   scan is repeated. A preempted task keeps its list position.
//! - Per tick: the running task loses one jiffy; at 0, need_resched.
//! - Wakeup: queued at the tail. A sync (channel) wakeup does nothing more.
//!   Others call `reschedule_idle(p)`: p's last CPU if idle, else the least
//!   recently active idle CPU, else the CPU whose current task p beats by
//!   the largest positive `goodness(p) − goodness(curr)` (the UP rule is the
//!   one-CPU case). On SMP a preempted task that did not get its CPU back is
//!   offered the same way (`__schedule_tail`); yielders are not.
//! - Fork: `child = (parent + 1)/2`, `parent /= 2` (need_resched at 0);
//!   the child's last CPU is the parent's, and it is woken like any task.
//!   Exit: the parent regains the child's counter, capped at MAX_COUNTER.
//! - Yield (if another task waits): the SCHED_YIELD bit for the schedule
//!   that follows, and the task moves to the list tail.
//! - No balancing beyond that: one queue, affinity only through the penalty.
//!
//! Mapping to this engine. The engine has no kernel-mode time, so "switch
//! at the next return to user mode" is "switch at the instant need_resched
//! is set, after the event that set it". An idle 2.4 CPU sleeps until a
//! reschedule IPI: the engine polls idle CPUs at each tick, and this policy
//! answers such a poll with "stay idle" unless `reschedule_idle` chose that
//! CPU, so work queued by a sync wakeup waits for the waker's CPU (or for a
//! preempted task to be pushed) as in 2.4, however long another CPU idles.
//! The workload's initial tasks (all created at t = 0) are spread as if a
//! launcher forked them one at a time, letting each IPI'd CPU schedule
//! before the next fork: a CPU already sent one is not chosen again while
//! another idles.
//!
//! RT tasks: 2.4 gives FIFO/RR `goodness = 1000 + rt_priority`, above any
//! SCHED_OTHER task; here they go to the engine's POSIX layer (`rt.rs`) above
//! this policy, which keeps that order but is the modern one: RT throttling
//! (`rt_runtime=0` turns it off, as in 2.4), a 100 ms RR slice (2.4 uses
//! NICE_TO_TICKS) and per-CPU RT queues. The policy does not see RT tasks
//! run: their mm does not replace the active one, and a normal task
//! preempted by an RT task is offered to other CPUs at the next tick or
//! schedule of its CPU rather than at once.
//!
//! Scheduler work (cost.rs): a wake-up takes `runqueue_lock` and links the
//! task (1 lock, 1 queue), and `reschedule_idle` examines every CPU; a
//! schedule takes the lock and walks the whole runqueue list (1 lock, 1
//! queue, every queued task scanned, running ones included, as 2.4's loop
//! does), an epoch recalculation walks every live task under
//! `tasklist_lock` and scans again, and `__schedule_tail`'s offer examines
//! every CPU. This O(n) walk is what hackbench's hundreds of runnable
//! tasks make slow.
//!
//! Simplifications: no SMT (the "fully idle sibling pair" preference), no
//! CPU affinity, no signals (interruptible sleepers with a signal pending),
//! no SCHED_RR counter reload here (RT layer). The exit give-back happens at
//! exit, not when the parent reaps the child. A nice change takes effect in
//! the next goodness comparison and reschedules nothing, as in 2.4.

use super::{ensure, tunables, Ctx, Policy, PolicyInfo, Stop, TaskId, Wake, WakeKind};
use crate::spec::{Spec, Tunable};
use crate::SimError;

// Bounded so that goodness sums cannot overflow.
const PENALTY: Tunable = Tunable::count(
    "proc_change_penalty",
    15,
    0,
    1_000_000,
    "goodness bonus on the CPU a task last ran on (PROC_CHANGE_PENALTY: 15 i386, 20 ia64/sparc64/s390)",
);
const MAX_COUNTER: Tunable = Tunable::duration(
    "max_counter",
    200_000_000,
    0,
    100_000_000_000,
    "cap on the counter a parent regains from an exiting child (MAX_COUNTER = 20*HZ/100 jiffies)",
)
.was("max_counter_ns");

pub const TUNABLES: &[Tunable] = &[PENALTY, MAX_COUNTER];

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "linux24",
        summary:
            "Linux 2.4 goodness(): one global runqueue scanned in O(n), per-epoch counters, sleepers carry half over",
        priority_quantity: "counter in jiffies (higher is better)",
        tunables: tunables(TUNABLES),
    }
}

/// `NICE_TO_TICKS(nice)` at `hz`: the jiffies a task of that nice gets per epoch.
pub fn nice_to_ticks(hz: u32, nice: i64) -> i64 {
    let x = 20 - nice;
    let scaled = match hz {
        0..200 => x >> 2,
        200..400 => x >> 1,
        400..800 => x,
        800..1600 => x << 1,
        _ => x << 2,
    };
    scaled + 1
}

/// End of the runqueue list.
const NIL: TaskId = TaskId::MAX;

#[derive(Debug, Clone)]
struct T {
    counter: i64,
    nice: i64,
    /// CPU it last ran on (`p->processor`; a new task inherits its parent's).
    processor: usize,
    /// Running on a CPU (2.4's `cpus_runnable`): on the list, but no candidate.
    running: bool,
    /// On the runqueue list: runnable, running included.
    queued: bool,
    /// The SCHED_YIELD bit: goodness −1 in the schedule that follows the yield.
    yielding: bool,
    next: TaskId,
    prev: TaskId,
    /// Index in `Linux24::alive`.
    slot: usize,
}

impl Default for T {
    fn default() -> Self {
        T {
            counter: 0,
            nice: 0,
            processor: 0,
            running: false,
            queued: false,
            yielding: false,
            next: NIL,
            prev: NIL,
            slot: 0,
        }
    }
}

pub struct Linux24 {
    hz: u32,
    tick_ns: u64,
    penalty: i64,
    max_counter: i64,
    tasks: Vec<T>,
    /// The runqueue list, in 2.4's order.
    head: TaskId,
    tail: TaskId,
    nr_queued: usize,
    /// Live tasks, in no particular order: the epoch recalculation's `for_each_task`.
    alive: Vec<TaskId>,
    /// Normal task running on each CPU.
    curr: Vec<Option<TaskId>>,
    /// Task whose mm is active on each CPU (the last normal task that ran there).
    mm: Vec<Option<TaskId>>,
    /// When each CPU last switched tasks (`last_schedule`, for the oldest idle CPU).
    last_schedule: Vec<u64>,
    /// `reschedule_idle` chose this idle CPU and it has not scheduled since.
    ipi: Vec<bool>,
    /// The tick at which the engine polled this idle CPU (see the header).
    poll_at: Vec<Option<u64>>,
    /// The task that last stopped on each CPU and why, until that CPU's next
    /// schedule finishes the switch (`__schedule_tail`).
    stopped: Vec<Option<(TaskId, Stop)>>,
}

impl Linux24 {
    pub fn new(spec: &Spec, ncpus: usize, hz: u32) -> Result<Self, SimError> {
        let tick_ns = 1_000_000_000 / hz as u64;
        let penalty = spec.tunable(&PENALTY)?;
        let max_counter_ns = spec.tunable(&MAX_COUNTER)?;
        Ok(Linux24 {
            hz,
            tick_ns,
            penalty: penalty as i64,
            max_counter: (max_counter_ns / tick_ns) as i64,
            tasks: Vec::new(),
            head: NIL,
            tail: NIL,
            nr_queued: 0,
            alive: Vec::new(),
            curr: vec![None; ncpus],
            mm: vec![None; ncpus],
            last_schedule: vec![0; ncpus],
            ipi: vec![false; ncpus],
            poll_at: vec![None; ncpus],
            stopped: vec![None; ncpus],
        })
    }

    fn goodness(&self, id: TaskId, cpu: usize) -> i64 {
        self.weigh(&self.tasks[id as usize], id, cpu, self.mm[cpu])
    }

    /// `goodness` of task `id` (state `p`) on `cpu`, where `mm`'s task owns the active mm.
    fn weigh(&self, p: &T, id: TaskId, cpu: usize, mm: Option<TaskId>) -> i64 {
        if p.yielding {
            return -1;
        }
        if p.counter == 0 {
            return 0;
        }
        let mut w = p.counter + 20 - p.nice;
        if p.processor == cpu {
            w += self.penalty;
        }
        if mm == Some(id) {
            w += 1;
        }
        w
    }

    /// How much `p` beats `curr` on `cpu` (positive: replace).
    fn preemption_goodness(&self, curr: TaskId, p: TaskId, cpu: usize) -> i64 {
        self.goodness(p, cpu) - self.goodness(curr, cpu)
    }

    fn link_tail(&mut self, id: TaskId) {
        let tail = self.tail;
        let t = &mut self.tasks[id as usize];
        t.prev = tail;
        t.next = NIL;
        t.queued = true;
        if tail == NIL {
            self.head = id;
        } else {
            self.tasks[tail as usize].next = id;
        }
        self.tail = id;
        self.nr_queued += 1;
    }

    fn unlink(&mut self, id: TaskId) {
        let t = &mut self.tasks[id as usize];
        let (prev, next) = (t.prev, t.next);
        t.queued = false;
        t.prev = NIL;
        t.next = NIL;
        if prev == NIL {
            self.head = next;
        } else {
            self.tasks[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.tasks[next as usize].prev = prev;
        }
        self.nr_queued -= 1;
    }

    /// The highest goodness on `cpu` among queued tasks not running elsewhere; first wins ties.
    fn scan(&self, cpu: usize) -> Option<(TaskId, i64)> {
        let mm = self.mm[cpu];
        let mut best = None;
        let mut c = -1000;
        let mut id = self.head;
        while id != NIL {
            let p = &self.tasks[id as usize];
            if !p.running {
                let w = self.weigh(p, id, cpu, mm);
                if w > c {
                    c = w;
                    best = Some((id, w));
                }
            }
            id = p.next;
        }
        best
    }

    /// A new epoch: every live task, asleep or not, carries half its counter over.
    fn recalculate(&mut self) {
        for &id in &self.alive {
            let t = &mut self.tasks[id as usize];
            t.counter = (t.counter >> 1) + nice_to_ticks(self.hz, t.nice);
        }
    }

    /// `reschedule_idle(p)`: an idle CPU (p's last, else the least recently
    /// active), marked as sent an IPI; else the CPU whose current task `p`
    /// beats by the most; None if `p` just waits. `busy` is a CPU in the
    /// middle of schedule(), which the engine still shows idle. With
    /// `spread`, an idle CPU already sent an IPI counts as busy.
    fn reschedule_idle(&mut self, cx: &Ctx, p: TaskId, busy: Option<usize>, spread: bool) -> Option<usize> {
        let idle = |c: usize| cx.idle(c) && Some(c) != busy && !(spread && self.ipi[c]);
        let last = self.tasks[p as usize].processor;
        let target = if idle(last) {
            Some(last)
        } else {
            (0..self.curr.len()).filter(|&c| idle(c)).min_by_key(|&c| self.last_schedule[c])
        };
        if let Some(c) = target {
            self.ipi[c] = true;
            return Some(c);
        }
        let mut best = None;
        let mut max = 0;
        for (c, curr) in self.curr.iter().enumerate() {
            if let Some(curr) = *curr {
                let g = self.preemption_goodness(curr, p, c);
                if g > max {
                    max = g;
                    best = Some(c);
                }
            }
        }
        best
    }

    /// `__schedule_tail(prev)` once `cpu` has chosen `next`: the yield bit
    /// is cleared; on SMP a preempted `prev` that is still waiting is offered
    /// to the other CPUs.
    fn schedule_tail(&mut self, cx: &mut Ctx, cpu: usize, prev: (TaskId, Stop), next: Option<TaskId>) {
        match prev {
            (p, Stop::Yield) => self.tasks[p as usize].yielding = false,
            (p, Stop::Preempt) if self.curr.len() > 1 && next != Some(p) => {
                let t = &self.tasks[p as usize];
                if t.queued && !t.running {
                    cx.work(self.curr.len() as u64, 0, 0);
                    if let Some(c) = self.reschedule_idle(cx, p, Some(cpu), false) {
                        cx.kick.push(c);
                    }
                }
            }
            _ => {}
        }
    }
}

impl Policy for Linux24 {
    fn priority(&self, t: TaskId, _now: u64) -> i64 {
        self.tasks[t as usize].counter
    }

    fn task_new(&mut self, cx: &mut Ctx, id: TaskId, nice: i32, parent: Option<TaskId>) {
        ensure(&mut self.tasks, id);
        let nice = nice as i64;
        let (counter, processor) = match parent {
            Some(p) => {
                let pt = &mut self.tasks[p as usize];
                let child = (pt.counter + 1) >> 1;
                pt.counter >>= 1;
                if pt.counter == 0 {
                    cx.kick.push(pt.processor);
                }
                (child, pt.processor)
            }
            // A child of a launcher that slept long (counter 2N − 1): half of it, N.
            None => (nice_to_ticks(self.hz, nice), 0),
        };
        self.tasks[id as usize] = T { counter, nice, processor, slot: self.alive.len(), ..T::default() };
        self.alive.push(id);
    }

    fn select_cpu(&mut self, cx: &mut Ctx, id: TaskId, w: &Wake) -> usize {
        if w.kind == WakeKind::Sync {
            // No reschedule_idle: the task waits for the waker's CPU (or any CPU that schedules).
            return w.waker_cpu.unwrap_or(w.prev_cpu);
        }
        let spread = w.kind == WakeKind::New { parent: None };
        cx.work(self.curr.len() as u64, 0, 0);
        self.reschedule_idle(cx, id, None, spread).unwrap_or(self.tasks[id as usize].processor)
    }

    fn enqueue(&mut self, cx: &mut Ctx, id: TaskId, _cpu: usize, _w: &Wake) {
        cx.work(0, 1, 1);
        self.link_tail(id);
    }

    fn wakeup_preempt(&mut self, _cx: &mut Ctx, cpu: usize, curr: TaskId, id: TaskId, w: &Wake) -> bool {
        w.kind != WakeKind::Sync && self.preemption_goodness(curr, id, cpu) > 0
    }

    fn pick_next(&mut self, cx: &mut Ctx, cpu: usize) -> Option<TaskId> {
        let polled = self.poll_at[cpu].take() == Some(cx.now);
        if polled && !self.ipi[cpu] {
            return None;
        }
        self.ipi[cpu] = false;
        cx.work(self.nr_queued as u64, 1, 1);
        let mut best = self.scan(cpu);
        if matches!(best, Some((_, 0))) {
            self.recalculate();
            *cx.touched_all = true;
            cx.work((self.alive.len() + self.nr_queued) as u64, 0, 1);
            best = self.scan(cpu);
        }
        let next = best.map(|(id, _)| id);
        let prev = self.stopped[cpu].take();
        if next != prev.map(|p| p.0) {
            self.last_schedule[cpu] = cx.now;
        }
        if let Some(n) = next {
            let t = &mut self.tasks[n as usize];
            t.running = true;
            t.processor = cpu;
            self.mm[cpu] = Some(n);
        }
        self.curr[cpu] = next;
        if let Some(prev) = prev {
            self.schedule_tail(cx, cpu, prev, next);
        }
        next
    }

    fn stopping(&mut self, _cx: &mut Ctx, cpu: usize, id: TaskId, why: Stop) {
        self.curr[cpu] = None;
        self.tasks[id as usize].running = false;
        match why {
            Stop::Preempt => {}
            Stop::Yield => {
                // sys_sched_yield acts only if a task other than this one waits to run.
                let running = self.curr.iter().filter(|c| c.is_some()).count();
                if self.nr_queued - running > 1 {
                    self.tasks[id as usize].yielding = true;
                    self.unlink(id);
                    self.link_tail(id);
                }
            }
            Stop::Sleep { .. } => self.unlink(id),
            Stop::Exit => {
                self.unlink(id);
                let slot = self.tasks[id as usize].slot;
                self.alive.swap_remove(slot);
                if let Some(&moved) = self.alive.get(slot) {
                    self.tasks[moved as usize].slot = slot;
                }
            }
        }
        self.stopped[cpu] = Some((id, why));
    }

    fn tick(&mut self, cx: &mut Ctx, cpu: usize, curr: Option<TaskId>) -> bool {
        let Some(id) = curr else {
            if cx.idle(cpu) {
                self.poll_at[cpu] = Some(cx.now);
            } else if let Some(prev) = self.stopped[cpu].take() {
                // An RT task took the CPU without a schedule through this policy.
                self.schedule_tail(cx, cpu, prev, None);
            }
            return false;
        };
        let t = &mut self.tasks[id as usize];
        t.counter -= 1;
        if t.counter <= 0 {
            t.counter = 0;
            return true;
        }
        false
    }

    fn set_nice(&mut self, _cx: &mut Ctx, id: TaskId, nice: i32, _running_on: Option<usize>) -> bool {
        self.tasks[id as usize].nice = nice as i64;
        false
    }

    fn task_exit(&mut self, _cx: &mut Ctx, id: TaskId, parent: Option<TaskId>) {
        if let Some(p) = parent {
            let left = self.tasks[id as usize].counter;
            let pt = &mut self.tasks[p as usize];
            pt.counter = (pt.counter + left).min(self.max_counter);
        }
    }

    fn timeslice_ns(&self, nice: i32) -> u64 {
        nice_to_ticks(self.hz, nice as i64) as u64 * self.tick_ns
    }

    fn state_quantities(&self) -> &'static [super::StateVar] {
        const VARS: &[super::StateVar] = &[super::StateVar::new(
            "counter",
            "ticks",
            Some(false),
            "ticks left of its quantum; each epoch refills it to counter/2 + the nice's base",
        )];
        VARS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{CpuView, TestBed};

    const NEW: Wake = Wake { kind: WakeKind::New { parent: None }, prev_cpu: 0, waker_cpu: None };
    const TIMER: Wake = Wake { kind: WakeKind::Timer, prev_cpu: 0, waker_cpu: None };
    /// A CPU running an RT task (id 99), busy for the normal class.
    const RT: CpuView = CpuView { curr: Some(99), curr_rt: true };

    fn l24(spec: &str, ncpus: usize, hz: u32) -> Linux24 {
        Linux24::new(&Spec::parse(spec, "policy").unwrap(), ncpus, hz).unwrap()
    }

    /// A workload task: created, placed and queued as the engine does.
    fn spawn(p: &mut Linux24, tb: &mut TestBed, id: TaskId, nice: i32) -> usize {
        p.task_new(&mut tb.cx(), id, nice, None);
        let cpu = p.select_cpu(&mut tb.cx(), id, &NEW);
        p.enqueue(&mut tb.cx(), id, cpu, &NEW);
        cpu
    }

    /// `pick_next` on `cpu`, keeping the test bed's CPU view as the engine does.
    fn pick(p: &mut Linux24, tb: &mut TestBed, cpu: usize) -> Option<TaskId> {
        let t = p.pick_next(&mut tb.cx(), cpu);
        tb.cpus[cpu] = CpuView { curr: t, curr_rt: false };
        t
    }

    fn stop(p: &mut Linux24, tb: &mut TestBed, cpu: usize, why: Stop) {
        let t = tb.cpus[cpu].curr.take().unwrap();
        p.stopping(&mut tb.cx(), cpu, t, why);
    }

    #[test]
    fn nice_to_ticks_follows_tick_scale_by_hz() {
        // (hz, [nice 0, -20, 19]): schedulers.md's HZ=100 figures, then each TICK_SCALE band.
        let cases =
            [(100, [6, 11, 1]), (250, [11, 21, 1]), (500, [21, 41, 2]), (1000, [41, 81, 3]), (2000, [81, 161, 5])];
        for (hz, want) in cases {
            assert_eq!([0, -20, 19].map(|n| nice_to_ticks(hz, n)), want, "HZ={hz}");
        }
        assert_eq!(l24("linux24", 1, 100).timeslice_ns(0), 60_000_000);
        assert_eq!(l24("linux24", 1, 1000).timeslice_ns(19), 3_000_000);
    }

    #[test]
    fn epoch_recalculation_lifts_a_sleeper_towards_twice_the_quota() {
        let mut p = l24("linux24", 1, 1000);
        let mut tb = TestBed::new(1, 1000);
        spawn(&mut p, &mut tb, 0, 0);
        assert_eq!(pick(&mut p, &mut tb, 0), Some(0));
        stop(&mut p, &mut tb, 0, Stop::Sleep { io: false });
        spawn(&mut p, &mut tb, 1, 0);
        assert_eq!(pick(&mut p, &mut tb, 0), Some(1));
        // The hog runs its 41 jiffies per epoch; each epoch the sleeper keeps
        // half and gains 41: 41 -> 61 -> 71 -> 76 -> 79 -> 80 -> 81 = 2N - 1.
        let mut sleeper = vec![];
        for _ in 0..7 {
            assert_eq!(p.tasks[1].counter, 41, "the hog starts every epoch with N");
            for _ in 0..41 {
                tb.now += 1_000_000;
                let resched = p.tick(&mut tb.cx(), 0, Some(1));
                assert_eq!(resched, p.tasks[1].counter == 0);
            }
            stop(&mut p, &mut tb, 0, Stop::Preempt);
            tb.touched_all = false;
            assert_eq!(pick(&mut p, &mut tb, 0), Some(1));
            assert!(tb.touched_all, "a recalculation changes every counter");
            sleeper.push(p.tasks[0].counter);
        }
        assert_eq!(sleeper, vec![61, 71, 76, 79, 80, 81, 81]);
    }

    #[test]
    fn a_woken_task_preempts_on_up_only_with_higher_goodness() {
        let mut p = l24("linux24", 1, 1000);
        let mut tb = TestBed::new(1, 1000);
        spawn(&mut p, &mut tb, 0, 0);
        pick(&mut p, &mut tb, 0);
        stop(&mut p, &mut tb, 0, Stop::Sleep { io: false });
        spawn(&mut p, &mut tb, 1, 0);
        assert_eq!(pick(&mut p, &mut tb, 0), Some(1));
        p.tasks[1].counter = 10;
        assert_eq!(p.select_cpu(&mut tb.cx(), 0, &TIMER), 0);
        p.enqueue(&mut tb.cx(), 0, 0, &TIMER);
        // The running task has the +1 of its own mm: the wakee needs 2 more jiffies.
        let mut preempts = |p: &mut Linux24, counter, w: &Wake| {
            p.tasks[0].counter = counter;
            p.wakeup_preempt(&mut tb.cx(), 0, 1, 0, w)
        };
        assert!(!preempts(&mut p, 11, &TIMER));
        assert!(preempts(&mut p, 12, &TIMER));
        let sync = Wake { kind: WakeKind::Sync, prev_cpu: 0, waker_cpu: Some(0) };
        assert!(!preempts(&mut p, 80, &sync), "a sync wakeup never preempts");
    }

    #[test]
    fn proc_change_penalty_keeps_a_task_on_its_last_cpu() {
        // Equal counters: CPU 1 takes the task that last ran there over the
        // first in list order; with no penalty, list order decides.
        for (spec, want) in [("linux24", 1), ("linux24[proc_change_penalty=0]", 0)] {
            let mut p = l24(spec, 2, 1000);
            let mut tb = TestBed::new(2, 1000);
            // RT tasks hold both CPUs while the two are queued.
            tb.cpus = vec![RT; 2];
            spawn(&mut p, &mut tb, 0, 0);
            spawn(&mut p, &mut tb, 1, 0);
            p.tasks[1].processor = 1;
            tb.cpus[1] = CpuView::default();
            assert_eq!(pick(&mut p, &mut tb, 1), Some(want), "{spec}");
        }
    }

    #[test]
    fn fork_splits_the_counter_and_exit_gives_it_back_up_to_max_counter() {
        let mut p = l24("linux24", 1, 1000);
        let mut tb = TestBed::new(1, 1000);
        spawn(&mut p, &mut tb, 0, 0);
        pick(&mut p, &mut tb, 0);
        p.task_new(&mut tb.cx(), 1, 0, Some(0));
        assert_eq!((p.tasks[0].counter, p.tasks[1].counter), (20, 21));
        assert_eq!(p.tasks[1].processor, 0);
        assert!(tb.kick.is_empty());
        p.tasks[0].counter = 1;
        p.task_new(&mut tb.cx(), 2, 0, Some(0));
        assert_eq!((p.tasks[0].counter, p.tasks[2].counter), (0, 1));
        assert_eq!(tb.kick, vec![0], "a parent left with 0 is rescheduled");
        // MAX_COUNTER = 20*HZ/100 = 200 jiffies at HZ=1000.
        p.tasks[0].counter = 190;
        p.task_exit(&mut tb.cx(), 1, Some(0));
        assert_eq!(p.tasks[0].counter, 200);
        p.tasks[0].counter = 5;
        p.task_exit(&mut tb.cx(), 2, Some(0));
        assert_eq!(p.tasks[0].counter, 6);
    }

    #[test]
    fn yield_lets_a_worse_task_run_once() {
        let mut p = l24("linux24", 1, 1000);
        let mut tb = TestBed::new(1, 1000);
        spawn(&mut p, &mut tb, 0, 0);
        spawn(&mut p, &mut tb, 1, 0);
        assert_eq!(pick(&mut p, &mut tb, 0), Some(0));
        p.tasks[1].counter = 5;
        stop(&mut p, &mut tb, 0, Stop::Yield);
        assert_eq!(pick(&mut p, &mut tb, 0), Some(1), "the yielder's goodness is -1 for one schedule");
        assert!(!p.tasks[0].yielding);
        assert_eq!((p.head, p.tail), (1, 0), "the yielder moved to the tail");
        // Alone on the queue, a yield changes nothing.
        stop(&mut p, &mut tb, 0, Stop::Sleep { io: false });
        assert_eq!(pick(&mut p, &mut tb, 0), Some(0));
        stop(&mut p, &mut tb, 0, Stop::Yield);
        assert!(!p.tasks[0].yielding);
        assert_eq!(pick(&mut p, &mut tb, 0), Some(0));
    }

    #[test]
    fn a_preempted_task_is_pushed_to_an_idle_cpu() {
        let mut p = l24("linux24", 2, 1000);
        let mut tb = TestBed::new(2, 1000);
        tb.cpus[1] = RT;
        spawn(&mut p, &mut tb, 0, 0);
        spawn(&mut p, &mut tb, 1, 0);
        assert_eq!(pick(&mut p, &mut tb, 0), Some(0));
        tb.cpus[1] = CpuView::default();
        tb.now = 1_000_000;
        p.tasks[0].counter = 1;
        assert!(p.tick(&mut tb.cx(), 0, Some(0)));
        tb.kick.clear();
        stop(&mut p, &mut tb, 0, Stop::Preempt);
        assert_eq!(pick(&mut p, &mut tb, 0), Some(1));
        assert_eq!(tb.kick, vec![1], "__schedule_tail sends the preempted task to the idle CPU");
        assert_eq!(pick(&mut p, &mut tb, 1), Some(0));
        // A task that gets its CPU back is not pushed.
        tb.kick.clear();
        stop(&mut p, &mut tb, 1, Stop::Preempt);
        assert_eq!(pick(&mut p, &mut tb, 1), Some(0));
        assert!(tb.kick.is_empty());
    }

    #[test]
    fn an_idle_cpu_stays_idle_until_sent_a_reschedule() {
        let mut p = l24("linux24", 2, 1000);
        let mut tb = TestBed::new(2, 1000);
        assert_eq!(spawn(&mut p, &mut tb, 0, 0), 0);
        assert_eq!(pick(&mut p, &mut tb, 0), Some(0));
        spawn(&mut p, &mut tb, 1, 0);
        pick(&mut p, &mut tb, 1);
        stop(&mut p, &mut tb, 1, Stop::Sleep { io: true });
        assert_eq!(pick(&mut p, &mut tb, 1), None);
        // Task 0 on CPU 0 wakes task 1 through a channel: no IPI, so CPU 1's
        // tick poll finds nothing to do although task 1 is queued.
        let sync = Wake { kind: WakeKind::Sync, prev_cpu: 1, waker_cpu: Some(0) };
        assert_eq!(p.select_cpu(&mut tb.cx(), 1, &sync), 0);
        p.enqueue(&mut tb.cx(), 1, 0, &sync);
        tb.now = 1_000_000;
        assert!(!p.tick(&mut tb.cx(), 1, None));
        assert_eq!(pick(&mut p, &mut tb, 1), None);
        // A timer wakeup calls reschedule_idle, which picks idle CPU 1.
        p.task_new(&mut tb.cx(), 2, 0, None);
        p.tasks[2].processor = 0;
        assert_eq!(p.select_cpu(&mut tb.cx(), 2, &TIMER), 1);
        p.enqueue(&mut tb.cx(), 2, 1, &TIMER);
        assert!(!p.tick(&mut tb.cx(), 1, None));
        assert_eq!(pick(&mut p, &mut tb, 1), Some(1), "the IPI'd CPU scans; task 1 last ran there");
    }

    #[test]
    fn initial_tasks_spread_over_idle_cpus() {
        let mut p = l24("linux24", 3, 1000);
        let mut tb = TestBed::new(3, 1000);
        let cpus: Vec<usize> = (0..5).map(|id| spawn(&mut p, &mut tb, id, 0)).collect();
        // One per idle CPU, then the rest wait on the queue (their last CPU, 0).
        assert_eq!(cpus, vec![0, 1, 2, 0, 0]);
        // A later wakeup may target a CPU that is still waking up, as 2.4's does.
        p.task_new(&mut tb.cx(), 5, 0, None);
        p.tasks[5].processor = 2;
        assert_eq!(p.select_cpu(&mut tb.cx(), 5, &TIMER), 2);
    }
}
