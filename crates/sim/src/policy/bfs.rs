//! `bfs`: Con Kolivas's Brain Fuck Scheduler (2009–2016), staircase's
//! successor: earliest virtual deadline first over one global queue; with
//! `muqss=on`, MuQSS's per-CPU queues (2016–2021).
//!
//! Source: schedulers.md §8 (BFS v0.440 `kernel/sched/bfs.c`; MuQSS v0.112
//! and v0.31 `kernel/sched/MuQSS.c`), checked against the BFS source for
//! `prio_deadline_diff`, `time_slice_expired`, `check_deadline`,
//! `earliest_deadline_task`, `try_preempt`, `wake_up_new_task` and
//! `schedule`.
//! - `prio_ratios[0] = 128`, each nice level `·11/10` (integer): 128 at
//!   −20, 836 at 0, 5089 at 19. `deadline = niffies + prio_ratios[nice +
//!   20]·rr_interval·(MS_TO_NS(1)/128)`, with `MS_TO_NS(1) = 1 << 20`:
//!   6.29 ms at −20, 41.1 ms at 0, 250 ms at 19 with `rr_interval` 6 ms.
//! - The time slice is the same for every nice, `MS_TO_US(rr_interval) =
//!   rr_interval << 10` µs, counted down by `ns >> 10` (so 6 ms is 6.29 ms of
//!   run). Less than RESCHED_US (100 µs, i.e. 102.4 µs here) left counts as
//!   expired: the task gets a full slice and a new deadline from *now*
//!   (`time_slice_expired`). The running task's slice is counted at each
//!   tick and when it stops; a tick that finds less than RESCHED_US left
//!   reschedules (`task_running_tick`), so at HZ=1000 a 6 ms slice lasts 7
//!   ticks.
//! - A task that sleeps keeps its deadline and what is left of its slice
//!   (`check_deadline` refills only an expired slice, when the task stops).
//!   The longest sleeper thus holds the earliest deadline and runs first on
//!   waking, without any interactivity estimator.
//! - CPU shares follow from deadlines set relative to *now*: a nice-19 hog
//!   beside a nice-0 one runs one slice each time the nice-0 hog's deadline
//!   has moved past its own, once per `(d19 − d0)/slice` slices: ~3 % (the
//!   source's "nice 19 3% CPU compared to nice 0").
//! - Pick (`earliest_deadline_task`): the earliest deadline among queued
//!   tasks, first queued on ties (strict `<`), RT tasks first (the engine's
//!   RT layer). Cache locality, v0.440's "sticky" task: the task a CPU last
//!   descheduled while it was still runnable (`swap_sticky`; one per CPU,
//!   cleared when it wakes from a sleep or runs again) is compared by other
//!   CPUs with its deadline shifted left (`deadline << locality_diff`), which
//!   an absolute ns deadline makes later than any other's: another CPU takes
//!   it only when nothing else is queued. ⚠ The bias changed between
//!   versions (0.3xx added `cpu_locality·timeslice` to every remote task's
//!   deadline), so `sticky=off` drops it.
//! - Wake-up (`try_preempt`): to an idle CPU if there is one (the task's last
//!   CPU first); else the CPU running the latest deadline is preempted if
//!   the wakee's deadline is earlier. A sync wake-up preempts nothing
//!   unless a CPU is idle.
//! - Fork (`wake_up_new_task`): the child takes the parent's deadline; with
//!   at least 2·RESCHED_US of slice left the parent halves it with the child
//!   and, if no CPU is idle, reschedules so the child runs first; else the
//!   parent's slice ends and the child gets a new slice and deadline.
//! - Yield (`sched_yield_type` 1): requeue with deadline and slice unchanged,
//!   so only tasks with earlier deadlines run first.
//! - MuQSS (`muqss=on`): one deadline-ordered skip list per CPU; a wake-up
//!   queues on the CPU chosen as above; a CPU picking peeks at the head of
//!   every other CPU's queue (without locking) and takes the earliest, so
//!   there is no separate balancer (no sticky tasks: each queue is its CPU's).
//!
//! Scheduler work (cost.rs): BFS v0.440 keeps normal tasks in one list under
//! the global `grq` lock: a wake-up examines every CPU (idle map, latest
//! deadline) and links the task (1 lock, 1 queue); a schedule takes the lock
//! and walks every queued task (the O(n) of `earliest_deadline_task`); a
//! preempted task is requeued. With `skiplist=on` (BFS 0.480 on) an insert
//! descends ⌈log2(n+1)⌉ levels and the pick takes the head. MuQSS: per-CPU
//! skip lists and locks; a pick examines every CPU's head and locks the
//! queue it takes from.
//!
//! Simplifications: SCHED_NORMAL only (no ISO, IDLEPRIO or BATCH; RT tasks
//! go to the engine's POSIX layer), no SMT or NUMA levels (one locality
//! step between any two CPUs), no CPU-frequency scaling (BFS's "sticky"
//! handling), no hrtick. The workload's initial tasks start with a fresh
//! slice and deadline (a launcher's children would share its deadline).
//! `rr_interval` is a whole number of ms, as the sysctl.

use super::{ensure, tunables, Ctx, Policy, PolicyInfo, Stop, TaskId, Wake, WakeKind};
use crate::cost::tree_levels;
use crate::spec::{Spec, Tunable};
use crate::SimError;
use std::collections::BTreeSet;

// The sysctl takes 1 to 1000 ms.
const RR_INTERVAL: Tunable = Tunable::duration(
    "rr_interval",
    6_000_000,
    1_000_000,
    1_000_000_000,
    "time slice of every task, whole ms (rounded down); deadlines scale with it",
);
const STICKY: Tunable = Tunable::boolean(
    "sticky",
    true,
    "v0.440's cache locality: the task a CPU last preempted goes to another CPU only when nothing else waits ⚠",
);
const SKIPLIST: Tunable = Tunable::boolean(
    "skiplist",
    false,
    "keep the global queue in a skip list (BFS 0.480 on: O(log n) insert, O(1) pick) instead of v0.440's list scanned at every pick",
);
const MUQSS: Tunable = Tunable::boolean(
    "muqss",
    false,
    "MuQSS: one deadline-ordered skip list per CPU, a picking CPU takes the earliest head of all of them",
);

pub const TUNABLES: &[Tunable] = &[RR_INTERVAL, STICKY, SKIPLIST, MUQSS];

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "bfs",
        summary: "BFS (Kolivas 2009-2016): earliest virtual deadline first, one global queue, rr_interval slices; muqss=on gives MuQSS's per-CPU queues",
        priority_quantity: "vdeadline: virtual deadline - now, ns (lower is better)",
        tunables: tunables(TUNABLES),
    }
}

/// `prio_ratios[i]` for nice `i − 20`: 128, then ×11/10 per level, in integers.
pub fn prio_ratios() -> [u64; 40] {
    let mut r = [128u64; 40];
    for i in 1..40 {
        r[i] = r[i - 1] * 11 / 10;
    }
    r
}

/// RESCHED_US in this model's ns: the source compares µs counted as `ns >> 10`.
const RESCHED_NS: i64 = 100 << 10;

#[derive(Debug, Clone, Default)]
struct T {
    nice: i32,
    deadline: u64,
    /// ns of slice left (negative: overrun until the tick noticed).
    slice: i64,
    /// Last CPU it ran on (or was placed on).
    cpu: usize,
    /// Queue key while queued: (deadline, insertion sequence), and which queue.
    key: Option<(u64, u64)>,
    queue: usize,
}

pub struct Bfs {
    rr_ms: u64,
    sticky_on: bool,
    skiplist: bool,
    muqss: bool,
    ratios: [u64; 40],
    tasks: Vec<T>,
    /// One queue (BFS) or one per CPU (MuQSS), ordered by (deadline, seq).
    queues: Vec<BTreeSet<(u64, u64, TaskId)>>,
    seq: u64,
    /// Normal task running on each CPU, and when its slice was last counted.
    curr: Vec<Option<TaskId>>,
    counted_at: Vec<u64>,
    /// Each CPU's sticky task (see the header).
    sticky: Vec<Option<TaskId>>,
}

impl Bfs {
    pub fn new(spec: &Spec, ncpus: usize, _hz: u32) -> Result<Self, SimError> {
        let muqss = spec.flag(&MUQSS)?;
        Ok(Bfs {
            rr_ms: spec.tunable(&RR_INTERVAL)? / 1_000_000,
            sticky_on: spec.flag(&STICKY)? && !muqss,
            skiplist: spec.flag(&SKIPLIST)?,
            muqss,
            ratios: prio_ratios(),
            tasks: Vec::new(),
            queues: vec![BTreeSet::new(); if muqss { ncpus } else { 1 }],
            seq: 0,
            curr: vec![None; ncpus],
            counted_at: vec![0; ncpus],
            sticky: vec![None; ncpus],
        })
    }

    /// `prio_deadline_diff`: how far past now a fresh deadline lies.
    fn deadline_diff(&self, nice: i32) -> u64 {
        self.ratios[(nice.clamp(-20, 19) + 20) as usize] * self.rr_ms * ((1 << 20) / 128)
    }

    /// `timeslice()`, in ns of run.
    fn full_slice(&self) -> i64 {
        (self.rr_ms << 20) as i64
    }

    /// `time_slice_expired`: a full slice and a deadline from now.
    fn expire(&mut self, id: TaskId, now: u64) {
        let diff = self.deadline_diff(self.tasks[id as usize].nice);
        let t = &mut self.tasks[id as usize];
        t.slice = (self.rr_ms << 20) as i64;
        t.deadline = now + diff;
    }

    /// Count the running task's slice on `cpu` up to now.
    fn count(&mut self, cpu: usize, now: u64) {
        if let Some(id) = self.curr[cpu] {
            let ran = now.saturating_sub(self.counted_at[cpu]);
            self.tasks[id as usize].slice -= ran as i64;
        }
        self.counted_at[cpu] = now;
    }

    fn queue_of(&self, cpu: usize) -> usize {
        if self.muqss {
            cpu
        } else {
            0
        }
    }

    fn push(&mut self, cx: &Ctx, id: TaskId, cpu: usize) {
        let q = self.queue_of(cpu);
        let levels = if self.skiplist || self.muqss { tree_levels(self.queues[q].len() as u64) } else { 0 };
        cx.work(levels, 1, 1);
        self.seq += 1;
        let t = &mut self.tasks[id as usize];
        t.key = Some((t.deadline, self.seq));
        t.queue = q;
        self.queues[q].insert((t.deadline, self.seq, id));
    }

    fn unqueue(&mut self, id: TaskId) {
        let t = &mut self.tasks[id as usize];
        if let Some((dl, seq)) = t.key.take() {
            self.queues[t.queue].remove(&(dl, seq, id));
        }
    }

    /// `id` is another CPU's sticky task, as `cpu` sees it.
    fn stuck_elsewhere(&self, id: TaskId, cpu: usize) -> bool {
        let home = self.tasks[id as usize].cpu;
        self.sticky_on && home != cpu && self.sticky[home] == Some(id)
    }

    /// `cpu`'s choice in queue `q`: the earliest deadline (first queued on
    /// ties), other CPUs' sticky tasks last.
    fn best_in(&self, q: usize, cpu: usize) -> Option<TaskId> {
        let mut stuck = None;
        for &(_, _, id) in &self.queues[q] {
            if !self.stuck_elsewhere(id, cpu) {
                return Some(id);
            }
            stuck = stuck.or(Some(id));
        }
        stuck
    }

    fn unstick(&mut self, id: TaskId) {
        let home = self.tasks[id as usize].cpu;
        if self.sticky[home] == Some(id) {
            self.sticky[home] = None;
        }
    }

    /// The deadline of the normal task running on `cpu`, if any.
    fn running_deadline(&self, cpu: usize) -> Option<u64> {
        self.curr[cpu].map(|id| self.tasks[id as usize].deadline)
    }
}

impl Policy for Bfs {
    fn priority(&self, t: TaskId, now: u64) -> i64 {
        self.tasks[t as usize].deadline as i64 - now as i64
    }

    fn task_new(&mut self, cx: &mut Ctx, id: TaskId, nice: i32, parent: Option<TaskId>) {
        ensure(&mut self.tasks, id);
        self.tasks[id as usize] = T { nice, ..T::default() };
        let Some(p) = parent else {
            self.expire(id, cx.now);
            return;
        };
        let pcpu = self.tasks[p as usize].cpu;
        if self.curr[pcpu] == Some(p) {
            self.count(pcpu, cx.now);
        }
        let pt = &self.tasks[p as usize];
        let (pdl, pslice) = (pt.deadline, pt.slice);
        let t = &mut self.tasks[id as usize];
        t.deadline = pdl;
        t.cpu = pcpu;
        if pslice >= 2 * RESCHED_NS {
            // Share the slice; the child runs first (wakeup_preempt) unless a CPU is idle.
            self.tasks[p as usize].slice = pslice / 2;
            self.tasks[id as usize].slice = pslice / 2;
        } else {
            // The parent's slice is over: it reschedules, the child starts afresh.
            self.tasks[p as usize].slice = 0;
            self.expire(id, cx.now);
            cx.kick.push(pcpu);
        }
    }

    fn select_cpu(&mut self, cx: &mut Ctx, _id: TaskId, w: &Wake) -> usize {
        let n = self.curr.len();
        cx.work(n as u64, 0, 0);
        let prev = w.prev_cpu.min(n - 1);
        // resched_best_idle: the task's last CPU, else the first idle one.
        if cx.idle(prev) {
            return prev;
        }
        if let Some(c) = (0..n).find(|&c| cx.idle(c)) {
            return c;
        }
        let home = match w.kind {
            WakeKind::New { parent: Some(_) } | WakeKind::Sync => w.waker_cpu.unwrap_or(prev),
            _ => prev,
        };
        if w.kind == WakeKind::Sync {
            return home; // no idle CPU: a sync wake-up preempts nothing
        }
        // try_preempt: the CPU running the latest deadline (CPUs busy with RT work are not candidates).
        let mut best: Option<(u64, usize)> = None;
        for c in 0..n {
            if let Some(dl) = self.running_deadline(c) {
                if best.is_none_or(|b| dl > b.0) {
                    best = Some((dl, c));
                }
            }
        }
        best.map_or(home, |b| b.1)
    }

    fn enqueue(&mut self, cx: &mut Ctx, id: TaskId, cpu: usize, _w: &Wake) {
        // A waking task keeps its deadline and slice; try_preempt clears stickiness.
        self.unstick(id);
        self.push(cx, id, cpu);
    }

    fn wakeup_preempt(&mut self, _cx: &mut Ctx, _cpu: usize, curr: TaskId, t: TaskId, w: &Wake) -> bool {
        match w.kind {
            // Child runs first: the parent reschedules (no CPU was idle, or select_cpu chose it).
            WakeKind::New { parent: Some(p) } if p == curr => true,
            WakeKind::Sync => false,
            _ => self.tasks[t as usize].deadline < self.tasks[curr as usize].deadline,
        }
    }

    fn pick_next(&mut self, cx: &mut Ctx, cpu: usize) -> Option<TaskId> {
        let id = if self.muqss {
            // Peek at every CPU's head; take the earliest.
            cx.work(self.queues.len() as u64, 1, 1);
            let mut best: Option<(u64, u64, TaskId, usize)> = None;
            for (q, queue) in self.queues.iter().enumerate() {
                if let Some(&(dl, seq, id)) = queue.first() {
                    if best.is_none_or(|b| (dl, seq) < (b.0, b.1)) {
                        best = Some((dl, seq, id, q));
                    }
                }
            }
            let (_, _, id, q) = best?;
            if q != cpu {
                cx.work(0, 0, 1);
            }
            id
        } else {
            let n = self.queues[0].len() as u64;
            cx.work(if self.skiplist { 0 } else { n }, 1, 1);
            self.best_in(0, cpu)?
        };
        self.unqueue(id);
        self.unstick(id);
        self.tasks[id as usize].cpu = cpu;
        self.curr[cpu] = Some(id);
        self.counted_at[cpu] = cx.now;
        Some(id)
    }

    fn stopping(&mut self, cx: &mut Ctx, cpu: usize, id: TaskId, why: Stop) {
        self.count(cpu, cx.now);
        self.curr[cpu] = None;
        // check_deadline: an (almost) used-up slice is refilled with a new deadline.
        if self.tasks[id as usize].slice < RESCHED_NS {
            self.expire(id, cx.now);
        }
        match why {
            Stop::Preempt | Stop::Yield => {
                // swap_sticky: it stays this CPU's while it waits.
                self.sticky[cpu] = Some(id);
                self.push(cx, id, cpu)
            }
            Stop::Sleep { .. } | Stop::Exit => {}
        }
    }

    fn tick(&mut self, cx: &mut Ctx, cpu: usize, curr: Option<TaskId>) -> bool {
        let Some(id) = curr else { return false };
        self.count(cpu, cx.now);
        self.tasks[id as usize].slice < RESCHED_NS
    }

    fn set_nice(&mut self, cx: &mut Ctx, id: TaskId, nice: i32, running_on: Option<usize>) -> bool {
        let old = self.tasks[id as usize].nice;
        self.tasks[id as usize].nice = nice;
        if self.tasks[id as usize].key.is_some() {
            cx.work(0, 0, 1);
        }
        // The deadline stays until the slice next expires; a running task whose priority fell yields.
        running_on.is_some() && nice > old
    }

    fn timeslice_ns(&self, _nice: i32) -> u64 {
        // Every nice level gets the same slice per turn; nice sets how soon the next turn comes.
        self.full_slice() as u64
    }

    fn state_quantities(&self) -> &'static [super::StateVar] {
        const VARS: &[super::StateVar] = &[
            super::StateVar::new("vdeadline", "ns", Some(true), "virtual deadline − now: the earliest runs first"),
            super::StateVar::new(
                "slice",
                "ns",
                None,
                "slice left (rr_interval when refilled; negative: overrun until the tick saw it)",
            ),
        ];
        VARS
    }

    fn state(&self, t: TaskId, now: u64, out: &mut [i64]) {
        out[0] = self.priority(t, now);
        out[1] = self.tasks[t as usize].slice;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{CpuView, TestBed};

    fn bfs(spec: &str, ncpus: usize) -> Bfs {
        Bfs::new(&Spec::parse(spec, "policy").unwrap(), ncpus, 1000).unwrap()
    }

    fn new_task(p: &mut Bfs, tb: &mut TestBed, id: TaskId, nice: i32) -> usize {
        p.task_new(&mut tb.cx(), id, nice, None);
        let w = Wake { kind: WakeKind::New { parent: None }, prev_cpu: 0, waker_cpu: None };
        let cpu = p.select_cpu(&mut tb.cx(), id, &w);
        p.enqueue(&mut tb.cx(), id, cpu, &w);
        cpu
    }

    fn run(p: &mut Bfs, tb: &mut TestBed, cpu: usize) -> Option<TaskId> {
        let t = p.pick_next(&mut tb.cx(), cpu);
        tb.cpus[cpu] = CpuView { curr: t, curr_rt: false };
        t
    }

    #[test]
    fn prio_ratios_and_deadline_offsets_follow_the_source() {
        let r = prio_ratios();
        assert_eq!((r[0], r[1], r[20], r[39]), (128, 140, 836, 5089));
        let p = bfs("bfs", 1);
        // 6 ms: 128·6·8192 ns at nice −20 (one slice), ~41 ms at 0, ~250 ms at 19.
        assert_eq!(p.deadline_diff(-20), 6_291_456);
        assert_eq!(p.deadline_diff(0), 836 * 6 * 8192);
        assert_eq!(p.deadline_diff(19), 5089 * 6 * 8192);
        assert_eq!(p.timeslice_ns(0), 6 << 20);
        // rr_interval is whole ms: 10.9ms is 10 ms.
        assert_eq!(bfs("bfs:rr_interval=10.9ms", 1).deadline_diff(0), 836 * 10 * 8192);
    }

    #[test]
    fn a_sleeper_keeps_its_deadline_and_preempts_a_hog() {
        let mut p = bfs("bfs", 1);
        let mut tb = TestBed::new(1, 1000);
        new_task(&mut p, &mut tb, 0, 0); // the hog
        new_task(&mut p, &mut tb, 1, 0); // the sleeper
        assert_eq!(run(&mut p, &mut tb, 0), Some(0), "equal deadlines: first queued");
        // The hog uses its slice (7 ticks at HZ 1000: 6.29 ms less RESCHED_US), gets a new deadline.
        let mut ticks = 0;
        loop {
            tb.now += 1_000_000;
            ticks += 1;
            if p.tick(&mut tb.cx(), 0, Some(0)) {
                break;
            }
        }
        assert_eq!(ticks, 7);
        p.stopping(&mut tb.cx(), 0, 0, Stop::Preempt);
        assert_eq!(p.tasks[0].deadline, tb.now + p.deadline_diff(0));
        assert_eq!(run(&mut p, &mut tb, 0), Some(1));
        // The sleeper runs 1 ms and sleeps: it keeps its deadline and the rest of its slice.
        let dl = p.tasks[1].deadline;
        tb.now += 1_000_000;
        p.stopping(&mut tb.cx(), 0, 1, Stop::Sleep { io: false });
        assert_eq!((p.tasks[1].deadline, p.tasks[1].slice), (dl, (6 << 20) - 1_000_000));
        assert_eq!(run(&mut p, &mut tb, 0), Some(0));
        // Waking 20 ms later, its old deadline is earlier than the hog's: it preempts.
        tb.now += 20_000_000;
        let w = Wake { kind: WakeKind::Timer, prev_cpu: 0, waker_cpu: None };
        assert_eq!(p.select_cpu(&mut tb.cx(), 1, &w), 0);
        p.enqueue(&mut tb.cx(), 1, 0, &w);
        assert!(p.wakeup_preempt(&mut tb.cx(), 0, 0, 1, &w));
        // A sync wake-up never preempts.
        assert!(!p.wakeup_preempt(&mut tb.cx(), 0, 0, 1, &Wake { kind: WakeKind::Sync, ..w }));
    }

    #[test]
    fn fork_shares_the_slice_and_the_deadline() {
        let mut p = bfs("bfs", 1);
        let mut tb = TestBed::new(1, 1000);
        new_task(&mut p, &mut tb, 0, 0);
        run(&mut p, &mut tb, 0);
        tb.now += 2_000_000;
        p.task_new(&mut tb.cx(), 1, 0, Some(0));
        let half = ((6 << 20) - 2_000_000) / 2;
        assert_eq!((p.tasks[0].slice, p.tasks[1].slice), (half, half));
        assert_eq!(p.tasks[1].deadline, p.tasks[0].deadline);
        let w = Wake { kind: WakeKind::New { parent: Some(0) }, prev_cpu: 0, waker_cpu: Some(0) };
        assert!(p.wakeup_preempt(&mut tb.cx(), 0, 0, 1, &w), "the child runs first");
        // A parent with less than 2·RESCHED_US left: its slice ends, the child starts afresh.
        p.tasks[0].slice = RESCHED_NS;
        p.counted_at[0] = tb.now;
        p.task_new(&mut tb.cx(), 2, 0, Some(0));
        assert_eq!((p.tasks[0].slice, p.tasks[2].slice), (0, 6 << 20));
        assert_eq!(p.tasks[2].deadline, tb.now + p.deadline_diff(0));
        assert_eq!(tb.kick, [0]);
    }

    #[test]
    fn smp_wakeups_take_an_idle_cpu_else_preempt_the_latest_deadline() {
        let mut p = bfs("bfs", 2);
        let mut tb = TestBed::new(2, 1000);
        assert_eq!(new_task(&mut p, &mut tb, 0, 0), 0);
        assert_eq!(run(&mut p, &mut tb, 0), Some(0));
        // CPU 1 is idle: the next task goes there.
        assert_eq!(new_task(&mut p, &mut tb, 1, 5), 1);
        assert_eq!(run(&mut p, &mut tb, 1), Some(1));
        // Both busy: a nice-0 wakee is aimed at CPU 1, whose nice-5 task has the later deadline.
        p.task_new(&mut tb.cx(), 2, 0, None);
        let w = Wake { kind: WakeKind::Normal, prev_cpu: 0, waker_cpu: Some(0) };
        assert_eq!(p.select_cpu(&mut tb.cx(), 2, &w), 1);
        p.enqueue(&mut tb.cx(), 2, 1, &w);
        assert!(p.wakeup_preempt(&mut tb.cx(), 1, 1, 2, &w));
        // One global queue: aimed at CPU 1, it is CPU 0's to take if CPU 0
        // schedules first (equal deadlines: the first queued).
        p.stopping(&mut tb.cx(), 0, 0, Stop::Preempt);
        assert_eq!(run(&mut p, &mut tb, 0), Some(2));
    }

    #[test]
    fn another_cpus_sticky_task_is_taken_only_when_nothing_else_waits() {
        for (spec, want) in [("bfs", [1, 0]), ("bfs:sticky=off", [0, 1])] {
            let mut p = bfs(spec, 2);
            let mut tb = TestBed::new(2, 1000);
            new_task(&mut p, &mut tb, 0, 0);
            assert_eq!(run(&mut p, &mut tb, 1), Some(0));
            new_task(&mut p, &mut tb, 1, 0);
            // CPU 1 preempts task 0 (earlier deadline than task 1, queued later):
            // it becomes CPU 1's sticky task.
            p.tasks[1].deadline += 1_000;
            p.unqueue(1);
            p.push(&tb.cx(), 1, 0);
            p.stopping(&mut tb.cx(), 1, 0, Stop::Preempt);
            tb.cpus[1] = CpuView::default();
            // CPU 0 takes task 1 although task 0's deadline is earlier; then the sticky one.
            assert_eq!([run(&mut p, &mut tb, 0), run(&mut p, &mut tb, 1)], want.map(Some), "{spec}");
        }
    }

    #[test]
    fn muqss_queues_per_cpu_and_an_idle_cpu_takes_the_earliest_head() {
        let mut p = bfs("bfs:muqss=on", 2);
        let mut tb = TestBed::new(2, 1000);
        new_task(&mut p, &mut tb, 0, 0);
        // Both tasks land on CPU 0's queue (CPU 0 is still idle for the second).
        new_task(&mut p, &mut tb, 1, 0);
        assert_eq!((p.queues[0].len(), p.queues[1].len()), (2, 0));
        assert_eq!(run(&mut p, &mut tb, 0), Some(0));
        // CPU 1 peeks at CPU 0's head and takes it (nothing else to run).
        assert_eq!(run(&mut p, &mut tb, 1), Some(1));
        assert!(p.queues.iter().all(|q| q.is_empty()));
    }

    #[test]
    fn the_pick_scans_every_queued_task_unless_a_skip_list_is_kept() {
        for (spec, scanned) in [("bfs", 5), ("bfs:skiplist=on", 0)] {
            let mut p = bfs(spec, 1);
            let mut tb = TestBed::new(1, 1000);
            for id in 0..5 {
                new_task(&mut p, &mut tb, id, 0);
            }
            tb.ops.take();
            run(&mut p, &mut tb, 0);
            let o = tb.ops.take();
            assert_eq!((o.scanned, o.queues, o.locks), (scanned, 1, 1), "{spec}");
        }
    }
}
