//! Staircase v15 (Con Kolivas, PlugSched 6.3.x, the E3 rival of ingosched).
//!
//! Source: schedulers.md §5a (LKML staircase v13 patch vs 2.6.14,
//! plugsched-6.3.1-staircase14.1_15.patch).
//! - One priority array per CPU (no expired array, no sleep_avg).
//! - `RR = 6·HZ/1001 + 1` jiffies (6 ms at HZ=1000); `rr_interval = RR + (−nice
//!   if nice < 0)`; full slice `slice = rr_interval·(20 − nice)` (so the
//!   timeslice-vs-nice curve is linear for nice ≥ 0 and quadratic below).
//! - `prio = min(139, 100 + (nice + 20) − bonus + used/rr_interval)`: a task
//!   drops one stair per rr_interval of CPU; when the full slice is used it
//!   loses a bonus point and restarts on the top stair.
//! - Wakeup (`recalc_task_prio`): `totalrun += runtime`; if the sleep is at
//!   least `totalrun` (and NONSLEEP is clear) the bonus grows by one, capped
//!   by `sleep/(totalrun+1)` and `nice + 20`; otherwise the sleep is debited
//!   and the task continues its slice (losing a bonus point at its end).
//!   Queued at the tail; preempts if strictly better, except a sync wakeup
//!   onto the waker's CPU.
//! - Per full jiffy run: slice expiry (bonus −1, refill, top stair) or stair
//!   expiry (one stair lower); both requeue and reschedule.
//! - Fork: child bonus 0; the parent gets NONSLEEP; a child on the parent's
//!   CPU runs first. Yield refills and requeues at 139.
//! - NONSLEEP is also set by a pipe wake-up (`pipe_nonsleep`, on): Linux
//!   2.6.14+ `pipe_wait` sleeps TASK_NONINTERACTIVE and staircase 11.3+
//!   flags such a wake-up (plugsched5.1-s11.2_s11.3.diff), so hackbench's
//!   pipe sleeps earn no bonus. A NONSLEEP wake-up after a sleep longer than
//!   `totalrun` makes v15's unsigned `totalrun -= sleep` wrap, and
//!   continue_slice then takes a bonus point off: modelled as written.
//!
//! Scheduler work (cost.rs): per-CPU arrays as in O(1): a wake-up locks the
//! target runqueue (a second lock when the task changes CPU) and queues the
//! task, looking at every CPU when its previous one is busy; a schedule locks
//! and picks by bitmap; a preempted or yielding task is requeued; a pull
//! examines every CPU and locks the busiest to take its best task.
//!
//! Simplifications: no system time (v15 `systime`), interactive mode on,
//! compute mode off, no SCHED_BATCH. SMP balancing is reduced to: wakeups go
//! to the previous CPU if idle, else any idle CPU, else the previous one; an
//! idle CPU pulls the best queued task of the busiest CPU (newidle and at
//! each tick); a busy CPU pulls one task at a tick when the busiest runs two
//! more tasks (no smpnice weights).

use super::{ensure, tunables, Ctx, Policy, PolicyInfo, PrioArray, Stop, TaskId, Wake, WakeKind};
use crate::spec::{Spec, Tunable};
use crate::SimError;

// A duration, not jiffies: the same value means the same time at any --hz.
const RR_INTERVAL: Tunable = Tunable::duration(
    "rr_interval",
    0,
    0,
    10_000_000_000,
    "RR interval, rounded to whole ticks (at least one); 0 means 6*HZ/1001 + 1 jiffies (6 ms at HZ=1000)",
)
.was("rr_interval_ns");
// Staircase 11.3 on (plugsched5.1-s11.2_s11.3.diff, kept through v15) flags a
// TASK_NONINTERACTIVE wake-up SF_NONSLEEP; pipe_wait sleeps so from 2.6.14.
const PIPE_NONSLEEP: Tunable = Tunable::boolean(
    "pipe_nonsleep",
    true,
    "pipe (channel) sleeps are TASK_NONINTERACTIVE: no bonus at wake-up (staircase 11.3+ on Linux 2.6.14+)",
);

pub const TUNABLES: &[Tunable] = &[RR_INTERVAL, PIPE_NONSLEEP];

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "staircase",
        summary: "Con Kolivas' staircase v15 (PlugSched): one array per CPU, priority drops a stair per rr_interval",
        priority_quantity: "prio 100..139 (the stair; lower is better)",
        tunables: tunables(TUNABLES),
    }
}

#[derive(Debug, Clone, Default)]
struct T {
    nice: i32,
    bonus: i64,
    /// Jiffies left in the full slice and on the current stair.
    slice: i64,
    time_slice: i64,
    /// ns run since the last wakeup, and the run total compared with sleeps.
    runtime: u64,
    totalrun: u64,
    ns_debit: u64,
    nonsleep: bool,
    /// When it last started running or went to sleep.
    timestamp: u64,
    prio: usize,
    cpu: usize,
    queued: bool,
}

pub struct Staircase {
    rr: i64,
    pipe_nonsleep: bool,
    tick_ns: u64,
    rqs: Vec<PrioArray>,
    curr: Vec<Option<TaskId>>,
    run_start: Vec<u64>,
    tasks: Vec<T>,
}

impl Staircase {
    pub fn new(spec: &Spec, ncpus: usize, hz: u32) -> Result<Self, SimError> {
        let tick_ns = 1_000_000_000 / hz as u64;
        let rr = match spec.tunable(&RR_INTERVAL)? {
            0 => 6 * hz as i64 / 1001 + 1,
            ns => ((ns + tick_ns / 2) / tick_ns).max(1) as i64,
        };
        Ok(Staircase {
            rr,
            pipe_nonsleep: spec.flag(&PIPE_NONSLEEP)?,
            tick_ns,
            rqs: vec![PrioArray::new(140); ncpus],
            curr: vec![None; ncpus],
            run_start: vec![0; ncpus],
            tasks: Vec::new(),
        })
    }

    fn rr_interval(&self, t: &T) -> i64 {
        self.rr + if t.nice < 0 { -t.nice as i64 } else { 0 }
    }

    fn full_slice(&self, t: &T) -> i64 {
        self.rr_interval(t) * (20 - t.nice as i64)
    }

    fn effective_prio(&self, t: &T) -> usize {
        let used = (self.full_slice(t) - t.slice).max(0);
        let p = 100 + (t.nice as i64 + 20) - t.bonus + used / self.rr_interval(t);
        p.clamp(100, 139) as usize
    }

    fn refill(&mut self, id: TaskId) {
        let full = self.full_slice(&self.tasks[id as usize]);
        let rr = self.rr_interval(&self.tasks[id as usize]);
        let t = &mut self.tasks[id as usize];
        t.slice = full;
        t.time_slice = if full % rr == 0 { rr } else { full % rr };
    }

    fn dec_bonus(t: &mut T) {
        t.totalrun = 0;
        if t.bonus > 0 {
            t.bonus -= 1;
        }
    }

    /// `recalc_task_prio` at a wakeup at `now`.
    fn recalc(&mut self, id: TaskId, now: u64) {
        self.refill(id);
        let tick = self.tick_ns;
        let t = &mut self.tasks[id as usize];
        t.totalrun += std::mem::take(&mut t.runtime);
        let sleep = now.saturating_sub(t.timestamp);
        if sleep >= t.totalrun && !t.nonsleep {
            let best = (sleep / (t.totalrun + 1)) as i64;
            if t.bonus < best && t.bonus < t.nice as i64 + 20 {
                t.bonus += 1;
            }
            t.totalrun = 0;
        } else if sleep > t.totalrun {
            // Only a NONSLEEP wake-up gets here: v15's unsigned `totalrun -=
            // sleep` wraps, so continue_slice sees a run past the slice.
            Self::dec_bonus(t);
        } else {
            t.totalrun -= sleep;
            let ran = (t.totalrun / tick) as i64;
            if ran >= t.slice || t.prio == 139 {
                Self::dec_bonus(t);
            } else {
                t.slice -= ran;
                let rr = self.rr + if t.nice < 0 { -t.nice as i64 } else { 0 };
                if t.slice <= t.time_slice {
                    Self::dec_bonus(t);
                } else if t.slice % rr != 0 {
                    t.time_slice = t.slice % rr;
                }
            }
        }
        let p = self.effective_prio(&self.tasks[id as usize]);
        let t = &mut self.tasks[id as usize];
        t.nonsleep = false;
        t.prio = p;
    }

    fn push(&mut self, id: TaskId, cpu: usize) {
        let t = &mut self.tasks[id as usize];
        t.cpu = cpu;
        t.queued = true;
        self.rqs[cpu].push_back(t.prio, id);
    }

    fn nr(&self, cpu: usize) -> usize {
        self.rqs[cpu].len + self.curr[cpu].is_some() as usize
    }

    /// Pull the best queued task of the busiest other CPU if it runs at least `min_nr` tasks.
    /// Deliberately not O(1)'s `move_tasks`: one array, no domains or cache-hot test (see the header).
    fn pull(&mut self, cx: &Ctx, cpu: usize, min_nr: usize) -> bool {
        let n = self.rqs.len();
        cx.work(n as u64, 0, 0);
        let Some(src) = (0..n)
            .filter(|&c| c != cpu && !self.rqs[c].is_empty() && self.nr(c) >= min_nr)
            .max_by_key(|&c| (self.nr(c), std::cmp::Reverse(c)))
        else {
            return false;
        };
        let Some((_, id)) = self.rqs[src].pop_best() else { return false };
        cx.work(0, 2, 1);
        self.push(id, cpu);
        true
    }
}

impl Policy for Staircase {
    fn priority(&self, t: TaskId, _now: u64) -> i64 {
        self.tasks[t as usize].prio as i64
    }

    fn task_new(&mut self, cx: &mut Ctx, id: TaskId, nice: i32, parent: Option<TaskId>) {
        ensure(&mut self.tasks, id);
        self.tasks[id as usize] = T { nice, timestamp: cx.now, ..Default::default() };
        self.refill(id);
        let p = self.effective_prio(&self.tasks[id as usize]);
        self.tasks[id as usize].prio = p;
        if let Some(pp) = parent {
            self.tasks[pp as usize].nonsleep = true;
            self.tasks[id as usize].cpu = self.tasks[pp as usize].cpu;
        }
    }

    fn select_cpu(&mut self, cx: &mut Ctx, _id: TaskId, w: &Wake) -> usize {
        let prev = w.prev_cpu;
        if cx.idle(prev) && self.rqs[prev].is_empty() {
            return prev;
        }
        cx.work(cx.ncpus() as u64, 0, 0);
        (0..cx.ncpus()).find(|&c| cx.idle(c) && self.rqs[c].is_empty()).unwrap_or(prev)
    }

    fn enqueue(&mut self, cx: &mut Ctx, id: TaskId, cpu: usize, w: &Wake) {
        cx.work(0, 1, 1 + u64::from(cpu != w.prev_cpu));
        if !matches!(w.kind, WakeKind::New { .. }) {
            if w.kind == WakeKind::Sync && self.pipe_nonsleep {
                self.tasks[id as usize].nonsleep = true;
            }
            self.recalc(id, cx.now);
        }
        self.push(id, cpu);
    }

    fn wakeup_preempt(&mut self, _cx: &mut Ctx, cpu: usize, curr: TaskId, id: TaskId, w: &Wake) -> bool {
        match w.kind {
            // The child runs first on its parent's CPU.
            WakeKind::New { parent: Some(_) } => w.waker_cpu == Some(cpu),
            WakeKind::Sync if w.waker_cpu == Some(cpu) => false,
            _ => self.tasks[id as usize].prio < self.tasks[curr as usize].prio,
        }
    }

    fn pick_next(&mut self, cx: &mut Ctx, cpu: usize) -> Option<TaskId> {
        if self.rqs[cpu].is_empty() {
            self.pull(cx, cpu, 2);
        }
        cx.work(0, 1, 1);
        let (_, id) = self.rqs[cpu].pop_best()?;
        let t = &mut self.tasks[id as usize];
        t.queued = false;
        t.cpu = cpu;
        t.timestamp = cx.now;
        self.curr[cpu] = Some(id);
        self.run_start[cpu] = cx.now;
        Some(id)
    }

    fn stopping(&mut self, cx: &mut Ctx, cpu: usize, id: TaskId, why: Stop) {
        let ran = cx.now - self.run_start[cpu];
        self.curr[cpu] = None;
        let t = &mut self.tasks[id as usize];
        t.runtime += ran;
        t.ns_debit += ran;
        t.timestamp = cx.now;
        if matches!(why, Stop::Preempt | Stop::Yield) {
            cx.work(0, 1, 0);
        }
        match why {
            Stop::Preempt => self.push(id, cpu),
            Stop::Yield => {
                self.refill(id);
                self.tasks[id as usize].prio = 139;
                self.push(id, cpu);
            }
            Stop::Sleep { .. } | Stop::Exit => {}
        }
    }

    fn tick(&mut self, cx: &mut Ctx, cpu: usize, curr: Option<TaskId>) -> bool {
        let Some(id) = curr else {
            if self.pull(cx, cpu, 2) {
                cx.kick.push(cpu);
            }
            return false;
        };
        if self.rqs.len() > 1 && self.rqs[cpu].is_empty() {
            // A busy CPU pulls when the busiest runs two more tasks.
            let me = self.nr(cpu);
            self.pull(cx, cpu, me + 2);
        }
        let ran = cx.now - self.run_start[cpu];
        self.run_start[cpu] = cx.now;
        let tick = self.tick_ns;
        let rr = self.rr_interval(&self.tasks[id as usize]);
        let t = &mut self.tasks[id as usize];
        t.runtime += ran;
        t.ns_debit += ran;
        let mut resched = false;
        while self.tasks[id as usize].ns_debit >= tick {
            let t = &mut self.tasks[id as usize];
            t.ns_debit -= tick;
            t.slice -= 1;
            if t.slice <= 0 {
                // Full slice used: lose a bonus point, back to the top stair.
                Self::dec_bonus(t);
                self.refill(id);
                self.tasks[id as usize].time_slice = rr;
            } else {
                t.time_slice -= 1;
                if t.time_slice > 0 {
                    continue;
                }
                t.time_slice = rr;
            }
            let p = self.effective_prio(&self.tasks[id as usize]);
            self.tasks[id as usize].prio = p;
            resched = true;
            break;
        }
        resched
    }

    fn set_nice(&mut self, _cx: &mut Ctx, id: TaskId, nice: i32, running_on: Option<usize>) -> bool {
        let old = self.tasks[id as usize].prio;
        self.tasks[id as usize].nice = nice;
        self.tasks[id as usize].bonus = self.tasks[id as usize].bonus.min(nice as i64 + 20);
        let p = self.effective_prio(&self.tasks[id as usize]);
        let t = &mut self.tasks[id as usize];
        t.prio = p;
        if t.queued {
            let cpu = t.cpu;
            self.rqs[cpu].remove(old, id);
            self.rqs[cpu].push_back(p, id);
        }
        running_on.is_some() && p > old
    }

    fn timeslice_ns(&self, nice: i32) -> u64 {
        // The full slice (all stairs) of a nice-n task.
        let t = T { nice, ..Default::default() };
        self.full_slice(&t) as u64 * self.tick_ns
    }

    fn state_quantities(&self) -> &'static [super::StateVar] {
        const VARS: &[super::StateVar] = &[
            super::StateVar::new(
                "prio",
                "",
                Some(true),
                "the stair 100..139: 120 + nice − bonus + turns used of rr_interval",
            ),
            super::StateVar::new("bonus", "", Some(false), "sleep bonus, raised by a sleep longer than its run total"),
            super::StateVar::new("slice", "ticks", None, "ticks left of its full slice"),
            super::StateVar::new("time_slice", "ticks", None, "ticks left on its current stair"),
            super::StateVar::new("totalrun", "ns", None, "run total that sleeps are compared with"),
        ];
        VARS
    }

    fn state(&self, t: TaskId, now: u64, out: &mut [i64]) {
        out[0] = self.priority(t, now);
        let s = &self.tasks[t as usize];
        out[1] = s.bonus;
        out[2] = s.slice;
        out[3] = s.time_slice;
        out[4] = s.totalrun as i64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::TestBed;

    fn sc() -> Staircase {
        Staircase::new(&Spec::parse("staircase", "policy").unwrap(), 1, 1000).unwrap()
    }

    #[test]
    fn slice_is_linear_above_nice_0_and_quadratic_below() {
        let p = sc();
        assert_eq!(p.rr, 6, "6*1000/1001 + 1");
        // slice = (RR + max(0,-n)) * (20 - n) jiffies.
        assert_eq!(p.timeslice_ns(0), 120_000_000);
        assert_eq!(p.timeslice_ns(19), 6_000_000);
        assert_eq!(p.timeslice_ns(-20), 26 * 40 * 1_000_000);
        // Second differences: 0 for nice >= 0 (linear), +2 jiffies below (quadratic).
        let s: Vec<i64> = (-20..20).map(|n| p.timeslice_ns(n) as i64 / 1_000_000).collect();
        let d2: Vec<i64> = s.windows(3).map(|w| w[0] - 2 * w[1] + w[2]).collect();
        assert!(d2[..18].iter().all(|&d| d == 2), "{d2:?}");
        assert!(d2[20..].iter().all(|&d| d == 0), "{d2:?}");
    }

    #[test]
    fn rr_interval_is_a_duration_at_any_hz() {
        // Issue 13: rr_interval_ms=6 was read as 6 jiffies (60 ms at HZ=100).
        for hz in [100, 250, 1000] {
            let spec = Spec::parse("staircase[rr_interval=20ms]", "policy").unwrap();
            let s = Staircase::new(&spec, 1, hz).unwrap();
            assert_eq!(s.rr as u64 * s.tick_ns, 20_000_000, "HZ {hz}");
        }
        let spec = Spec::parse("staircase[rr_interval=1us]", "policy").unwrap();
        assert_eq!(Staircase::new(&spec, 1, 100).unwrap().rr, 1, "at least one tick");
        assert!(crate::build_policy("staircase[rr_interval_ms=6]", 1, 1000).is_err(), "the old key is refused");
    }

    #[test]
    fn hog_descends_one_stair_per_rr_interval_then_loses_bonus() {
        let mut p = sc();
        let mut tb = TestBed::new(1, 1000);
        p.task_new(&mut tb.cx(), 0, 0, None);
        p.tasks[0].bonus = 3;
        p.tasks[0].prio = p.effective_prio(&p.tasks[0]);
        assert_eq!(p.tasks[0].prio, 117, "120 + nice 0 - bonus 3");
        p.push(0, 0);
        p.pick_next(&mut tb.cx(), 0);
        let mut stairs = vec![];
        for _ in 0..120 {
            tb.now += 1_000_000;
            if p.tick(&mut tb.cx(), 0, Some(0)) {
                stairs.push(p.tasks[0].prio);
                p.stopping(&mut tb.cx(), 0, 0, Stop::Preempt);
                p.pick_next(&mut tb.cx(), 0);
            }
        }
        // 120 jiffies = 20 stairs of 6: 19 drops (118..136), then the slice ends:
        // bonus 2, back to the top stair 118.
        assert_eq!(&stairs[..3], &[118, 119, 120]);
        assert_eq!(*stairs.last().unwrap(), 118);
        assert_eq!(p.tasks[0].bonus, 2);
    }

    /// Bonus of a task after 30 cycles of a 1 ms run and a 50 ms sleep woken by `kind`.
    fn bonus_after_sleeps(spec: &str, kind: WakeKind, start_bonus: i64) -> i64 {
        let mut p = Staircase::new(&Spec::parse(spec, "policy").unwrap(), 1, 1000).unwrap();
        let mut tb = TestBed::new(1, 1000);
        p.task_new(&mut tb.cx(), 0, 0, None);
        p.tasks[0].bonus = start_bonus;
        p.push(0, 0);
        let w = Wake { kind, prev_cpu: 0, waker_cpu: Some(0) };
        for _ in 0..30 {
            assert_eq!(p.pick_next(&mut tb.cx(), 0), Some(0));
            tb.now += 1_000_000;
            p.stopping(&mut tb.cx(), 0, 0, Stop::Sleep { io: true });
            tb.now += 50_000_000;
            p.enqueue(&mut tb.cx(), 0, 0, &w);
        }
        p.tasks[0].bonus
    }

    #[test]
    fn pipe_sleeps_earn_no_bonus_and_a_long_one_costs_a_point() {
        // A condition (futex) sleeper climbs to user_prio; a pipe sleeper does not.
        assert_eq!(bonus_after_sleeps("staircase", WakeKind::Normal, 0), 20);
        assert_eq!(bonus_after_sleeps("staircase", WakeKind::Sync, 0), 0);
        // NONSLEEP with sleep > totalrun: v15's unsigned subtraction wraps and
        // continue_slice calls dec_bonus, one point per such wake-up.
        assert_eq!(bonus_after_sleeps("staircase", WakeKind::Sync, 40), 10);
        // Off (Linux before 2.6.14, or staircase before 11.3): pipes count as sleep.
        assert_eq!(bonus_after_sleeps("staircase:pipe_nonsleep=off", WakeKind::Sync, 0), 20);
    }

    #[test]
    fn long_sleep_raises_bonus_one_step_capped_by_user_prio() {
        let mut p = sc();
        let mut tb = TestBed::new(1, 1000);
        p.task_new(&mut tb.cx(), 0, 0, None);
        let w = Wake { kind: WakeKind::Timer, prev_cpu: 0, waker_cpu: None };
        p.push(0, 0);
        for i in 0..30 {
            assert_eq!(p.pick_next(&mut tb.cx(), 0), Some(0));
            tb.now += 1_000_000;
            p.stopping(&mut tb.cx(), 0, 0, Stop::Sleep { io: false });
            tb.now += 50_000_000;
            p.enqueue(&mut tb.cx(), 0, 0, &w);
            // 1 ms run, 50 ms sleep: +1 per wakeup up to user_prio 20.
            assert_eq!(p.tasks[0].bonus, (i + 1).min(20));
        }
        assert_eq!(p.tasks[0].prio, 100);
    }
}
