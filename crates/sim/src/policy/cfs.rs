//! CFS, the Completely Fair Scheduler, vruntime generation (Linux 2.6.24 – 6.5)
//! with the post-2010 defaults.
//!
//! Source: schedulers.md §6 (2.6.24 and ~5.x `kernel/sched/fair.c`,
//! `kernel/sched/core.c` weights, `kernel/sched/topology.c`).
//! - Weights `sched_prio_to_weight`; `vruntime += δ·1024/w`; `min_vruntime`
//!   only moves forward.
//! - `sched_latency` 6 ms, `min_granularity` 0.75 ms, `wakeup_granularity`
//!   1 ms, each × `1 + ilog2(min(ncpus, 8))` when not given explicitly;
//!   `nr_latency` = latency / min_granularity (8).
//! - Slice = period·w/load; tick preemption when the slice is used up, or
//!   (after min_granularity) when curr is a slice ahead of the leftmost.
//! - Wakeup placement `max(v, min_vruntime − latency/2)` (GENTLE_FAIR_SLEEPERS),
//!   fork placement `max(parent.v, min_vruntime + vslice)` (START_DEBIT),
//!   wakeup preemption when `curr.v − p.v > wakeup_gran·1024/w_p`;
//!   LAST_BUDDY and the yield `skip` buddy; child_runs_first off.
//!
//! Scheduler work (cost.rs): a wake-up locks the runqueue (a second lock
//! when the task changes CPU) and inserts into the rbtree (⌈log2(n+1)⌉
//! levels); a schedule locks and takes the leftmost; a preempted task is
//! reinserted; `fair.rs` counts the CPU searches and balancing.
//!
//! Simplifications: no group scheduling, no HRTICK (preemption is
//! tick-quantised, as in the kernel default). Exact integer `δ·1024/w`
//! instead of the kernel's `wmult` fixed point (drift < 1 ns per update).
//! Load balancing uses instantaneous weighted runnable load instead of PELT:
//! newidle pulls one cache-cold task from the busiest CPU; the periodic
//! balance (every `ncpus` ms when idle, × `busy_factor` when busy) pulls
//! cold tasks up to half the imbalance when `busiest·100 > local·imbalance_pct`
//! (hot tasks become movable after repeated failures). Wakeups use a
//! simplified `wake_affine` (waker CPU if less loaded) then an idle CPU
//! (prev first), fork goes to the least-loaded CPU. That SMP half is shared
//! with `eevdf` in [`super::fair`].

use super::fair::{self, FairQueue, FairRq, FairTunables};
use super::{ensure, nice_weight, tunables, Ctx, Policy, PolicyInfo, Stop, TaskId, Wake, WakeKind};
use crate::cost::tree_levels;
use crate::spec::{BuildFor, Scale, Spec, Tunable};
use crate::SimError;

// The ranges of Linux's sysctls (kernel/sysctl.c, 2.6.23..5.12).
const LATENCY: Tunable =
    Tunable::duration("sched_latency", 6_000_000, 100_000, 1_000_000_000, "targeted preemption latency")
        .was("sched_latency_ns")
        .scales_with(Scale::LinuxCpus);
const MIN_GRAN: Tunable = Tunable::duration("min_granularity", 750_000, 100_000, 1_000_000_000, "minimum slice")
    .was("min_granularity_ns")
    .scales_with(Scale::LinuxCpus);
const WAKEUP_GRAN: Tunable =
    Tunable::duration("wakeup_granularity", 1_000_000, 0, 1_000_000_000, "wakeup preemption granularity")
        .was("wakeup_granularity_ns")
        .scales_with(Scale::LinuxCpus);
const GENTLE: Tunable = Tunable::boolean(
    "gentle_fair_sleepers",
    true,
    "sleeper credit is half sched_latency (0: full latency, as in 2.6.24)",
);
const START_DEBIT: Tunable = Tunable::boolean("start_debit", true, "new tasks start one vslice after min_vruntime");
const CHILD_RUNS_FIRST: Tunable = Tunable::boolean("child_runs_first", false, "a forked child runs before its parent");
const WAKEUP_PREEMPTION: Tunable = Tunable::boolean("wakeup_preemption", true, "woken tasks may preempt");
const LAST_BUDDY: Tunable = Tunable::boolean("last_buddy", true, "prefer returning to a task preempted by a wakeup");

/// CFS's own tunables; [`FairTunables::TABLE`] follows them.
pub const TUNABLES: &[Tunable] =
    &[LATENCY, MIN_GRAN, WAKEUP_GRAN, GENTLE, START_DEBIT, CHILD_RUNS_FIRST, WAKEUP_PREEMPTION, LAST_BUDDY];

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "cfs",
        summary: "Linux CFS 2.6.24-6.5: weighted vruntime, latency-target slices, sleeper credit",
        priority_quantity: "vruntime - min_vruntime (ns, lower runs sooner)",
        tunables: tunables(TUNABLES).into_iter().chain(tunables(FairTunables::TABLE)).collect(),
    }
}

#[derive(Debug, Clone, Default)]
struct Ent {
    v: i64,
    w: u64,
    exec_start: u64,
    sum_exec: u64,
    prev_sum: u64,
    /// Runqueue the entity belongs to (its `v` is relative to that queue).
    cpu: usize,
    /// In the tree (queued, not running).
    queued: bool,
    /// Counted in the queue's load (queued or running).
    on_rq: bool,
}

#[derive(Debug, Clone, Default)]
struct Rq {
    /// Tree keyed by vruntime.
    q: FairQueue,
    min_v: i64,
    last: Option<TaskId>,
    skip: Option<TaskId>,
}

pub struct Cfs {
    latency: u64,
    min_gran: u64,
    wakeup_gran: u64,
    nr_latency: u64,
    gentle: bool,
    start_debit: bool,
    child_runs_first: bool,
    wakeup_preemption: bool,
    last_buddy: bool,
    fair: FairTunables,
    rqs: Vec<Rq>,
    tasks: Vec<Ent>,
}

impl Cfs {
    pub fn new(spec: &Spec, ncpus: usize, hz: u32) -> Result<Self, SimError> {
        let at = BuildFor { ncpus, hz, ..BuildFor::LISTED };
        let latency = spec.tunable_for(&LATENCY, &at)?;
        let min_gran = spec.tunable_for(&MIN_GRAN, &at)?;
        Ok(Cfs {
            latency,
            min_gran,
            wakeup_gran: spec.tunable_for(&WAKEUP_GRAN, &at)?,
            nr_latency: (latency / min_gran).max(1),
            gentle: spec.flag(&GENTLE)?,
            start_debit: spec.flag(&START_DEBIT)?,
            child_runs_first: spec.flag(&CHILD_RUNS_FIRST)?,
            wakeup_preemption: spec.flag(&WAKEUP_PREEMPTION)?,
            last_buddy: spec.flag(&LAST_BUDDY)?,
            fair: FairTunables::parse(spec)?,
            rqs: vec![Rq::default(); ncpus],
            tasks: Vec::new(),
        })
    }

    fn update_curr(&mut self, cpu: usize, now: u64) {
        let rq = &mut self.rqs[cpu];
        if let Some(c) = rq.q.curr {
            let e = &mut self.tasks[c as usize];
            let d = now.saturating_sub(e.exec_start);
            if d > 0 {
                e.exec_start = now;
                e.sum_exec += d;
                e.v += (d * 1024 / e.w) as i64;
            }
        }
        self.update_min_v(cpu);
    }

    fn update_min_v(&mut self, cpu: usize) {
        let rq = &mut self.rqs[cpu];
        let cv = rq.q.curr.map(|c| self.tasks[c as usize].v);
        let lv = rq.q.tree.first().map(|&(v, _)| v);
        let v = match (cv, lv) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => return,
        };
        rq.min_v = rq.min_v.max(v);
    }

    /// `sched_slice`: the wall-clock slice of `t` on `cpu`.
    fn slice(&self, cpu: usize, t: TaskId) -> u64 {
        let rq = &self.rqs[cpu];
        let e = &self.tasks[t as usize];
        let adding = !(e.on_rq && e.cpu == cpu);
        let nr = rq.q.nr + adding as u64;
        let load = rq.q.load + if adding { e.w } else { 0 };
        let period = if nr > self.nr_latency { nr * self.min_gran } else { self.latency };
        period * e.w / load.max(1)
    }

    fn vslice(&self, cpu: usize, t: TaskId) -> i64 {
        (self.slice(cpu, t) * 1024 / self.tasks[t as usize].w) as i64
    }

    /// `wakeup_preempt_entity(a, b) < 1`: a is not more than b's granularity ahead.
    fn within_gran(&self, a: TaskId, b: TaskId) -> bool {
        let (ea, eb) = (&self.tasks[a as usize], &self.tasks[b as usize]);
        ea.v - eb.v <= (self.wakeup_gran * 1024 / eb.w) as i64
    }

    fn insert(&mut self, cpu: usize, t: TaskId) {
        let e = &mut self.tasks[t as usize];
        e.queued = true;
        self.rqs[cpu].q.tree.insert((e.v, t));
    }

    fn clear_buddies(&mut self, cpu: usize, t: TaskId) {
        let rq = &mut self.rqs[cpu];
        if rq.last == Some(t) {
            rq.last = None;
        }
        if rq.skip == Some(t) {
            rq.skip = None;
        }
    }
}

/// Tree order is vruntime, so the candidates are the rightmost (least owed) tasks.
impl FairRq for Cfs {
    fn fair_tunables(&self) -> &FairTunables {
        &self.fair
    }
    fn nr_rqs(&self) -> usize {
        self.rqs.len()
    }
    fn queue(&self, cpu: usize) -> &FairQueue {
        &self.rqs[cpu].q
    }
    fn queue_mut(&mut self, cpu: usize) -> &mut FairQueue {
        &mut self.rqs[cpu].q
    }
    fn weight(&self, t: TaskId) -> u64 {
        self.tasks[t as usize].w
    }
    fn exec_start(&self, t: TaskId) -> u64 {
        self.tasks[t as usize].exec_start
    }
    /// Move queued task `t` from `src` to `dst` (renormalising its vruntime).
    fn migrate(&mut self, t: TaskId, src: usize, dst: usize) {
        let e = &mut self.tasks[t as usize];
        self.rqs[src].q.tree.remove(&(e.v, t));
        self.rqs[src].q.load -= e.w;
        self.rqs[src].q.nr -= 1;
        e.v = e.v - self.rqs[src].min_v + self.rqs[dst].min_v;
        e.cpu = dst;
        self.rqs[dst].q.load += e.w;
        self.rqs[dst].q.nr += 1;
        self.rqs[dst].q.tree.insert((e.v, t));
        if self.rqs[src].last == Some(t) {
            self.rqs[src].last = None;
        }
        if self.rqs[src].skip == Some(t) {
            self.rqs[src].skip = None;
        }
    }
}

impl Policy for Cfs {
    fn priority(&self, t: TaskId, _now: u64) -> i64 {
        let e = &self.tasks[t as usize];
        e.v - self.rqs[e.cpu].min_v
    }

    fn task_new(&mut self, cx: &mut Ctx, t: TaskId, nice: i32, parent: Option<TaskId>) {
        ensure(&mut self.tasks, t);
        let cpu = parent.map_or(0, |p| self.tasks[p as usize].cpu);
        self.update_curr(cpu, cx.now);
        let v = parent.map_or(self.rqs[cpu].min_v, |p| self.tasks[p as usize].v);
        self.tasks[t as usize] = Ent { v, w: nice_weight(nice), cpu, exec_start: cx.now, ..Default::default() };
        // place_entity(initial): START_DEBIT.
        let mut place = self.rqs[cpu].min_v;
        if self.start_debit {
            place += self.vslice(cpu, t);
        }
        let e = &mut self.tasks[t as usize];
        e.v = e.v.max(place);
        if let (true, Some(p)) = (self.child_runs_first, parent) {
            let pv = self.tasks[p as usize].v;
            if pv < self.tasks[t as usize].v {
                let cv = self.tasks[t as usize].v;
                // The parent is running (not in the tree), so swapping is safe.
                self.tasks[p as usize].v = cv;
                self.tasks[t as usize].v = pv;
                cx.kick.push(cpu);
            }
        }
    }

    fn select_cpu(&mut self, cx: &mut Ctx, t: TaskId, w: &Wake) -> usize {
        fair::select_cpu(self, cx, t, w)
    }

    fn enqueue(&mut self, cx: &mut Ctx, t: TaskId, cpu: usize, w: &Wake) {
        let levels = tree_levels(self.rqs[cpu].q.tree.len() as u64);
        cx.work(levels, 1, 1 + u64::from(cpu != w.prev_cpu));
        self.update_curr(cpu, cx.now);
        let src = self.tasks[t as usize].cpu;
        if src != cpu {
            let e = &mut self.tasks[t as usize];
            e.v = e.v - self.rqs[src].min_v + self.rqs[cpu].min_v;
            e.cpu = cpu;
        }
        if !matches!(w.kind, WakeKind::New { .. }) {
            let mut thresh = self.latency as i64;
            if self.gentle {
                thresh /= 2;
            }
            let floor = self.rqs[cpu].min_v - thresh;
            let e = &mut self.tasks[t as usize];
            e.v = e.v.max(floor);
        }
        let e = &mut self.tasks[t as usize];
        e.on_rq = true;
        let wgt = e.w;
        self.rqs[cpu].q.load += wgt;
        self.rqs[cpu].q.nr += 1;
        self.insert(cpu, t);
    }

    fn wakeup_preempt(&mut self, cx: &mut Ctx, cpu: usize, curr: TaskId, t: TaskId, _w: &Wake) -> bool {
        if !self.wakeup_preemption {
            return false;
        }
        self.update_curr(cpu, cx.now);
        let gran = (self.wakeup_gran * 1024 / self.tasks[t as usize].w) as i64;
        if self.tasks[curr as usize].v - self.tasks[t as usize].v > gran {
            if self.last_buddy && self.rqs[cpu].q.nr >= self.nr_latency {
                self.rqs[cpu].last = Some(curr);
            }
            return true;
        }
        false
    }

    fn pick_next(&mut self, cx: &mut Ctx, cpu: usize) -> Option<TaskId> {
        fair::newidle_balance(self, cx, cpu);
        let rq = &self.rqs[cpu];
        cx.work(tree_levels(rq.q.tree.len() as u64), 1, 1);
        let &(_, left) = rq.q.tree.first()?;
        let mut se = left;
        if rq.skip == Some(left) {
            if let Some(&(_, second)) = rq.q.tree.iter().nth(1) {
                if self.within_gran(second, left) {
                    se = second;
                }
            }
        }
        if let Some(l) = rq.last {
            let e = &self.tasks[l as usize];
            if e.queued && e.cpu == cpu && self.within_gran(l, left) {
                se = l;
            }
        }
        self.clear_buddies(cpu, se);
        let e = &mut self.tasks[se as usize];
        let tree = &mut self.rqs[cpu].q.tree;
        // Usually the leftmost: taking it needs no search.
        if se == left {
            tree.pop_first();
        } else {
            tree.remove(&(e.v, se));
        }
        e.queued = false;
        e.exec_start = cx.now;
        e.prev_sum = e.sum_exec;
        self.rqs[cpu].q.curr = Some(se);
        Some(se)
    }

    fn stopping(&mut self, cx: &mut Ctx, cpu: usize, t: TaskId, why: Stop) {
        self.update_curr(cpu, cx.now);
        self.rqs[cpu].q.curr = None;
        match why {
            Stop::Preempt | Stop::Yield => {
                cx.work(tree_levels(self.rqs[cpu].q.tree.len() as u64), 1, 0);
                if why == Stop::Yield && self.rqs[cpu].q.nr > 1 {
                    self.clear_buddies(cpu, t);
                    self.rqs[cpu].skip = Some(t);
                }
                self.insert(cpu, t);
            }
            Stop::Sleep { .. } | Stop::Exit => {
                self.clear_buddies(cpu, t);
                let e = &mut self.tasks[t as usize];
                e.on_rq = false;
                self.rqs[cpu].q.load -= e.w;
                self.rqs[cpu].q.nr -= 1;
            }
        }
        self.update_min_v(cpu);
    }

    fn tick(&mut self, cx: &mut Ctx, cpu: usize, curr: Option<TaskId>) -> bool {
        let mut resched = false;
        if let Some(c) = curr {
            self.update_curr(cpu, cx.now);
            if self.rqs[cpu].q.nr > 1 {
                let ideal = self.slice(cpu, c);
                let e = &self.tasks[c as usize];
                let ran = e.sum_exec - e.prev_sum;
                if ran > ideal {
                    self.clear_buddies(cpu, c);
                    resched = true;
                } else if ran >= self.min_gran {
                    if let Some(&(lv, _)) = self.rqs[cpu].q.tree.first() {
                        resched = e.v - lv > ideal as i64;
                    }
                }
            }
        }
        fair::periodic_balance(self, cx, cpu);
        resched
    }

    fn set_nice(&mut self, cx: &mut Ctx, t: TaskId, nice: i32, running_on: Option<usize>) -> bool {
        let (cpu, on_rq, queued, old) = {
            let e = &self.tasks[t as usize];
            (e.cpu, e.on_rq, e.queued, e.w)
        };
        if running_on.is_some() {
            self.update_curr(cpu, cx.now);
        }
        let neww = nice_weight(nice);
        if on_rq {
            self.rqs[cpu].q.load = self.rqs[cpu].q.load - old + neww;
        }
        self.tasks[t as usize].w = neww;
        // Linux reschedules a running task whose priority fell, or the CPU of
        // a queued task whose priority rose.
        (running_on.is_some() && neww < old) || (queued && neww > old)
    }

    fn timeslice_ns(&self, nice: i32) -> u64 {
        // Two tasks: nr = 2 <= nr_latency, so the period is sched_latency.
        let w = nice_weight(nice);
        self.latency * w / (w + 1024)
    }

    fn state_quantities(&self) -> &'static [super::StateVar] {
        const VARS: &[super::StateVar] = &[
            super::StateVar::new(
                "vruntime",
                "ns",
                Some(true),
                "vruntime − min_vruntime of its run queue (the tree key)",
            ),
            super::StateVar::new(
                "slice_used",
                "ns",
                None,
                "CPU time of its current or last turn: sum_exec_runtime − prev_sum_exec_runtime",
            ),
            super::StateVar::new("sum_exec_runtime", "ns", None, "CPU time it has run, as update_curr accounts it"),
        ];
        VARS
    }

    fn state(&self, t: TaskId, now: u64, out: &mut [i64]) {
        out[0] = self.priority(t, now);
        let e = &self.tasks[t as usize];
        out[1] = (e.sum_exec - e.prev_sum) as i64;
        out[2] = e.sum_exec as i64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::TestBed;

    fn cfs(spec: &str, ncpus: usize) -> Cfs {
        Cfs::new(&Spec::parse(spec, "policy").unwrap(), ncpus, 1000).unwrap()
    }

    fn wake_new(parent: Option<TaskId>) -> Wake {
        Wake { kind: WakeKind::New { parent }, prev_cpu: 0, waker_cpu: None }
    }

    /// Drive two hogs on one CPU with ticks only and return their run times.
    fn run_two_hogs(nice_a: i32, nice_b: i32, ms: u64) -> (u64, u64) {
        let mut p = cfs("cfs", 1);
        let mut tb = TestBed::new(1, 1000);
        for (t, n) in [(0, nice_a), (1, nice_b)] {
            p.task_new(&mut tb.cx(), t, n, None);
            p.enqueue(&mut tb.cx(), t, 0, &wake_new(None));
        }
        let mut ran = [0u64; 2];
        let mut curr = p.pick_next(&mut tb.cx(), 0).unwrap();
        tb.cpus[0].curr = Some(curr);
        for _ in 0..ms {
            tb.now += 1_000_000;
            ran[curr as usize] += 1_000_000;
            if p.tick(&mut tb.cx(), 0, Some(curr)) {
                p.stopping(&mut tb.cx(), 0, curr, Stop::Preempt);
                curr = p.pick_next(&mut tb.cx(), 0).unwrap();
                tb.cpus[0].curr = Some(curr);
            }
        }
        (ran[0], ran[1])
    }

    #[test]
    fn shares_follow_weights_nice_0_vs_5() {
        // Weights 1024 and 335: expected share of the nice-0 hog 1024/1359 = 75.35 %.
        // Tolerance 1 %: ticks quantise each slice to 1 ms and a 4.5 ms + 1.5 ms
        // period leaves at most one tick of error per ~6 ms over 10 s.
        let (a, b) = run_two_hogs(0, 5, 10_000);
        let share = a as f64 / (a + b) as f64;
        assert!((share - 1024.0 / 1359.0).abs() < 0.01, "share {share}");
    }

    #[test]
    fn equal_nice_alternate_at_half_latency() {
        // Two nice-0 hogs, 1 CPU: slice = 6 ms * 1/2 = 3 ms; tick preemption fires
        // when ran > 3 ms, i.e. after 4 ticks at HZ=1000.
        let p = cfs("cfs", 1);
        assert_eq!(p.timeslice_ns(0), 3_000_000);
        let (a, b) = run_two_hogs(0, 0, 1000);
        assert!(a.abs_diff(b) <= 4_000_000, "{a} vs {b}: within one slice");
    }

    #[test]
    fn timeslice_grows_with_weight() {
        let p = cfs("cfs", 1);
        // nice -5: 6 ms * 3121/(3121+1024) = 4.518 ms; nice 19: 6 ms * 15/1039.
        assert_eq!(p.timeslice_ns(-5), 6_000_000 * 3121 / 4145);
        assert_eq!(p.timeslice_ns(19), 6_000_000 * 15 / 1039);
        let curve: Vec<u64> = (-20..20).map(|n| p.timeslice_ns(n)).collect();
        assert!(curve.windows(2).all(|w| w[0] > w[1]), "monotone in nice");
    }

    #[test]
    fn long_sleeper_gets_half_latency_credit_and_preempts() {
        let mut p = cfs("cfs", 1);
        let mut tb = TestBed::new(1, 1000);
        // Task 1 runs 1 ms, then sleeps for 10 s while hog 0 runs alone.
        p.task_new(&mut tb.cx(), 1, 0, None);
        p.enqueue(&mut tb.cx(), 1, 0, &wake_new(None));
        assert_eq!(p.pick_next(&mut tb.cx(), 0), Some(1));
        tb.now = 1_000_000;
        p.stopping(&mut tb.cx(), 0, 1, Stop::Sleep { io: false });
        p.task_new(&mut tb.cx(), 0, 0, None);
        p.enqueue(&mut tb.cx(), 0, 0, &wake_new(None));
        assert_eq!(p.pick_next(&mut tb.cx(), 0), Some(0));
        tb.cpus[0].curr = Some(0);
        tb.now += 10_000_000_000;
        p.tick(&mut tb.cx(), 0, Some(0));
        let minv = p.rqs[0].min_v;
        let w = Wake { kind: WakeKind::Timer, prev_cpu: 0, waker_cpu: None };
        p.enqueue(&mut tb.cx(), 1, 0, &w);
        // Placed at min_vruntime - latency/2: 3 ms of virtual credit, not 10 s.
        assert_eq!(p.tasks[1].v, minv - 3_000_000);
        assert!(p.wakeup_preempt(&mut tb.cx(), 0, 0, 1, &w), "3 ms ahead > 1 ms granularity");
        // With gentle_fair_sleepers=0 the credit is the full latency (2.6.24).
        let mut p2 = cfs("cfs[gentle_fair_sleepers=0]", 1);
        let mut tb2 = TestBed::new(1, 1000);
        p2.task_new(&mut tb2.cx(), 0, 0, None);
        p2.enqueue(&mut tb2.cx(), 0, 0, &wake_new(None));
        p2.pick_next(&mut tb2.cx(), 0);
        p2.stopping(&mut tb2.cx(), 0, 0, Stop::Sleep { io: false });
        p2.rqs[0].min_v = 50_000_000;
        p2.enqueue(&mut tb2.cx(), 0, 0, &w);
        assert_eq!(p2.tasks[0].v, 50_000_000 - 6_000_000);
    }

    #[test]
    fn fork_start_debit_places_child_a_vslice_late() {
        let mut p = cfs("cfs", 1);
        let mut tb = TestBed::new(1, 1000);
        p.task_new(&mut tb.cx(), 0, 0, None);
        p.enqueue(&mut tb.cx(), 0, 0, &wake_new(None));
        assert_eq!(p.pick_next(&mut tb.cx(), 0), Some(0));
        tb.cpus[0].curr = Some(0);
        tb.now = 2_000_000;
        p.task_new(&mut tb.cx(), 1, 0, Some(0));
        // vslice of the child with the parent on the queue: 6 ms * 1024/2048.
        assert_eq!(p.tasks[1].v - p.rqs[0].min_v, 3_000_000);
        assert!(p.tasks[1].v > p.tasks[0].v);
    }
}
