//! Linux 2.6 O(1) scheduler, "ingosched" (2.6.8–2.6.22 constants, as in 2.6.11).
//!
//! Source: schedulers.md §4 (`kernel/sched.c` 2.6.11, `include/linux/topology.h`).
//! - Per CPU, active and expired arrays of 140 FIFO lists; the best
//!   non-empty list of active runs; arrays swap when active empties.
//! - `task_timeslice = max(x·(140 − static_prio)/20, MIN_TIMESLICE)`,
//!   x = 4·DEF_TIMESLICE for nice < 0 (800 ms at −20, 100 ms at 0, 5 ms at 19).
//! - `sleep_avg` (ns, ≤ 1 s) gives `CURRENT_BONUS` 0..10 and
//!   `prio = clamp(static − bonus + 5, 100, 139)`. Sleep credit is multiplied
//!   by `max(10 − bonus, 1)`; a sleep longer than INTERACTIVE_SLEEP sets
//!   sleep_avg to 900 ms. Running is charged as `run_time / max(bonus, 1)`.
//!   Runqueue wait is credited at pick time (38/128 of it for task wakeups).
//! - Slice expiry requeues interactive tasks (`prio ≤ static − DELTA`) on
//!   active unless EXPIRED_STARVING, others on expired; interactive tasks
//!   round-robin every TIMESLICE_GRANULARITY.
//! - Wakeup preemption if `p.prio < curr.prio`, except sync wakeups onto the
//!   waker's CPU. Fork splits the slice, gives the child 95 % of the parent's
//!   bonus and runs it first; exit returns an unused first slice and blends
//!   sleep_avg 3:1. Yield moves a task to expired.
//! - Activations by a timer count as interrupt-context wakeups (`activated = 2`,
//!   full runqueue-wait credit), wakeups by a task as `activated = 1`.
//!
//! `pipe_noninteractive` (off): a pipe wake-up is non-interactive, as
//! 2.6.14+'s TASK_NONINTERACTIVE `pipe_wait` under 2.6.16+'s
//! SLEEP_NONINTERACTIVE (E3 ran 2.6.17-rc1), handled as 2.6.11 handles
//! `activated = −1`: no jump to the long-sleep level, sleep_avg rises at
//! most to INTERACTIVE_SLEEP, no runqueue-wait credit at the pick. The
//! 2.6.11 sleep-credit multiplier stays (2.6.16 dropped it).
//!
//! Simplifications: no uninterruptible sleeps and no
//! 2.6.0–2.6.7 interactive credit. One sched domain (SD_CPU: interval 1–4 ms,
//! busy_factor 64, imbalance_pct 125, cache_hot_time 2.5 ms,
//! cache_nice_tries 1) over all CPUs; load is `nr_running`, not the decayed
//! `cpu_load`; no active balancing (pushing a running task). Wakeup CPU
//! choice: prev if it is nearly idle and this CPU busy, else this CPU if the
//! task is cache-cold or the wake-balance test passes, else prev. Forks stay
//! on the parent's CPU (no SD_BALANCE_FORK before 2.6.12). The workload's
//! initial tasks are treated as children of an idle launcher (bonus 10), so
//! they start at prio 116 with a 50 ms slice.
//!
//! Scheduler work (cost.rs): a wake-up takes the task's runqueue lock (a
//! second one when it moves CPU) and queues it, wake_affine reads two
//! runqueues' loads; a schedule takes the lock and finds the best list by
//! bitmap (1 lock, 1 queue: O(1) whatever the number of tasks), a preempted
//! or yielding task is requeued (1 queue); balancing (newidle at a pick,
//! periodic at a tick) examines every CPU and, to move tasks, locks the
//! busiest runqueue and examines its candidates one by one.
//!
//! Shared with `ingo_ll`: everything but the bonus. [`O1`] is the O(1)
//! machinery (arrays, slices, expiry, the interactivity test, fork and exit
//! slice handling, balancing) over a [`BonusModel`] that supplies
//! CURRENT_BONUS: here [`SleepAvg`], ingosched's sleep average; in
//! `ingo_ll.rs`, the measured-latency bonus.

use super::{ensure, take_for_balance, tunables, Ctx, Policy, PolicyInfo, PrioArray, Stop, TaskId, Wake, WakeKind};
use crate::spec::{Spec, Tunable};
use crate::SimError;

// Slices: 0 would mean no slice at all; 10 s is far past any kernel's.
pub(super) const DEF_TS: Tunable = Tunable::duration(
    "def_timeslice",
    100_000_000,
    1,
    10_000_000_000,
    "DEF_TIMESLICE (nice-0 slice); MAX_SLEEP_AVG = 10x this",
)
.was("def_timeslice_ns");
pub(super) const MIN_TS: Tunable =
    Tunable::duration("min_timeslice", 5_000_000, 1, 10_000_000_000, "MIN_TIMESLICE").was("min_timeslice_ns");
pub(super) const GRAN: Tunable =
    Tunable::duration("granularity", 10_000_000, 1, 10_000_000_000, "GRANULARITY of interactive round-robin")
        .was("granularity_ns");
const ON_RQ_WEIGHT: Tunable =
    Tunable::count("on_runqueue_weight", 30, 0, 100, "percent of runqueue wait credited as sleep for task wakeups");
const CHILD_PENALTY: Tunable =
    Tunable::count("child_penalty", 95, 0, 100, "percent of the parent's bonus a child gets");
// Linux 2.6.14 made pipe_wait sleep TASK_NONINTERACTIVE, and 2.6.16's
// SLEEP_NONINTERACTIVE (E3's 2.6.17-rc1) treats such a wake-up as 2.6.11
// treats an uninterruptible one (`activated = -1`). Off: the 2.6.11 model.
const PIPE_NONINTERACTIVE: Tunable = Tunable::boolean(
    "pipe_noninteractive",
    false,
    "pipe (channel) wake-ups are SLEEP_NONINTERACTIVE (2.6.14+ pipe_wait, 2.6.16+ O(1)): sleep credit capped at \
     INTERACTIVE_SLEEP, no runqueue-wait credit",
);
pub(super) const STARVATION: Tunable = Tunable::duration(
    "starvation_limit",
    1_000_000_000,
    1,
    100_000_000_000,
    "expired tasks starve at most this x nr_running",
)
.was("starvation_limit_ns");
pub(super) const CACHE_HOT: Tunable =
    Tunable::duration("cache_hot_time", 2_500_000, 0, 10_000_000_000, "balancer skips tasks that ran this recently")
        .was("cache_hot_time_ns");
pub(super) const IMBALANCE_PCT: Tunable =
    Tunable::count("imbalance_pct", 125, 100, 1000, "balance when busiest > local by this percent");
pub(super) const BUSY_FACTOR: Tunable =
    Tunable::count("busy_factor", 64, 1, 1024, "balance interval multiplier on a busy CPU");

pub const TUNABLES: &[Tunable] = &[
    DEF_TS,
    MIN_TS,
    GRAN,
    ON_RQ_WEIGHT,
    CHILD_PENALTY,
    PIPE_NONINTERACTIVE,
    STARVATION,
    CACHE_HOT,
    IMBALANCE_PCT,
    BUSY_FACTOR,
];

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "o1",
        summary: "Linux 2.6.11 O(1) ingosched: active/expired arrays, sleep_avg bonus, nice-scaled slices",
        priority_quantity: "prio 100..139 (lower is better)",
        tunables: tunables(TUNABLES),
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Requeue {
    #[default]
    Head,
    AfterHead,
    TailActive,
    Expired,
}

#[derive(Debug, Clone, Default)]
struct T {
    prio: usize,
    static_prio: usize,
    time_slice: u64,
    first_time_slice: bool,
    timestamp: u64,
    last_ran: u64,
    /// Which array holds it: None (running or asleep), Some(0|1).
    array: Option<usize>,
    cpu: usize,
    requeue: Requeue,
}

#[derive(Debug, Clone)]
struct Rq {
    arrays: [PrioArray; 2],
    active: usize,
    /// Runnable tasks including curr.
    nr: u64,
    expired_ts: Option<u64>,
    best_expired_prio: usize,
    curr: Option<TaskId>,
    next_balance: u64,
    interval_ms: u64,
    failed: u32,
}

/// The O(1) scheduler over a source of CURRENT_BONUS.
pub struct O1<B: BonusModel = SleepAvg> {
    tick_ns: u64,
    def_ts: u64,
    min_ts: u64,
    gran: u64,
    starvation: u64,
    cache_hot: u64,
    imbalance_pct: u64,
    busy_factor: u64,
    rqs: Vec<Rq>,
    tasks: Vec<T>,
    pub(super) bonus: B,
}

/// `MAX_BONUS`: the bonus is 0..=10, a prio swing of ±5.
pub(super) const MAX_BONUS: u64 = 10;

/// Where O(1)'s CURRENT_BONUS comes from. Each hook is named after the
/// kernel step that updates the bonus's inputs; the machinery recomputes
/// `prio = static_prio − bonus + 5` where the kernel does (activation,
/// slice expiry, pick-time credit).
pub trait BonusModel {
    /// CURRENT_BONUS of task `id` now, 0..=MAX_BONUS.
    fn bonus(&self, id: TaskId) -> u64;
    /// `sched_fork`: task `id` is created by `parent` (None: one of the
    /// workload's initial tasks, forked by an idle launcher).
    fn fork(&mut self, id: TaskId, parent: Option<TaskId>);
    /// `activate_task` of a woken task at `now`; it stopped at `since`.
    fn wake(&mut self, id: TaskId, static_prio: usize, kind: WakeKind, since: u64, now: u64);
    /// `schedule()` switches to `id` at `now`, queued since `since`, on a CPU
    /// with `nr_running` runnable tasks (itself included). True: its prio is
    /// recomputed and it is requeued before it runs.
    fn switch_in(&mut self, id: TaskId, static_prio: usize, since: u64, now: u64, nr_running: u64) -> bool;
    /// `schedule()` switches `id` out after it ran `ran` ns.
    fn switch_out(&mut self, id: TaskId, ran: u64);
    /// `scheduler_tick`: its slice expired; its prio is recomputed next.
    fn slice_expired(&mut self, _id: TaskId) {}
    /// `sched_exit`: `id` exits while its `parent` lives.
    fn exit(&mut self, _id: TaskId, _parent: TaskId) {}
    /// The timeline's state variables: the machinery's [`PRIO`] and
    /// [`TIME_SLICE`], then this model's own.
    const STATE: &'static [super::StateVar] = &[PRIO, TIME_SLICE];
    /// Task `id`'s values of this model's own variables (those after the
    /// machinery's two), into `out`.
    fn state(&self, _id: TaskId, _out: &mut [i64]) {}
}

/// The O(1) machinery's state variables, first in every [`BonusModel::STATE`].
pub(super) const PRIO: super::StateVar =
    super::StateVar::new("prio", "", Some(true), "dynamic priority 100..139: static_prio − (bonus − 5)");
pub(super) const TIME_SLICE: super::StateVar =
    super::StateVar::new("time_slice", "ticks", None, "ticks left of its timeslice");

/// `DELTA(p) = nice·10/40 + 2`, truncating toward zero as C does.
fn delta(static_prio: usize) -> i64 {
    (static_prio as i64 - 120) * MAX_BONUS as i64 / 40 + 2
}

/// ingosched's bonus (2.6.11): `sleep_avg` in ns, 0..=MAX_SLEEP_AVG.
#[derive(Debug, Clone)]
pub struct SleepAvg {
    tick_ns: u64,
    /// DEF_TIMESLICE in jiffies.
    def_ts: u64,
    max_sleep_avg: u64,
    on_rq_weight: u64,
    child_penalty: u64,
    pipe_noninteractive: bool,
    tasks: Vec<Sleeper>,
}

#[derive(Debug, Clone, Default)]
struct Sleeper {
    sleep_avg: u64,
    activated: i8,
}

impl SleepAvg {
    fn new(spec: &Spec, tick_ns: u64, def_ts: u64) -> Result<Self, SimError> {
        Ok(SleepAvg {
            tick_ns,
            def_ts,
            max_sleep_avg: def_ts * MAX_BONUS * tick_ns,
            on_rq_weight: spec.tunable(&ON_RQ_WEIGHT)?,
            child_penalty: spec.tunable(&CHILD_PENALTY)?,
            pipe_noninteractive: spec.flag(&PIPE_NONINTERACTIVE)?,
            tasks: Vec::new(),
        })
    }

    fn max_sleep_avg_j(&self) -> u64 {
        self.max_sleep_avg / self.tick_ns
    }

    /// CURRENT_BONUS of a sleep average.
    fn bonus_of(&self, sleep_avg: u64) -> u64 {
        (sleep_avg / self.tick_ns) * MAX_BONUS / self.max_sleep_avg_j()
    }

    /// A sleep average quantised to `pct` % of a bonus level.
    fn quantised(&self, bonus: u64, pct: u64) -> u64 {
        bonus * pct / 100 * self.max_sleep_avg_j() / MAX_BONUS * self.tick_ns
    }

    fn interactive_sleep_ns(&self, static_prio: usize) -> u64 {
        let j = (self.max_sleep_avg_j() as i64 * (MAX_BONUS as i64 / 2 + delta(static_prio) + 1) / MAX_BONUS as i64
            - 1)
        .max(0);
        j as u64 * self.tick_ns
    }

    /// The sleep half of `recalc_task_prio`: credit `slept` ns. A
    /// non-interactive sleep (`activated == -1`) never jumps to the
    /// long-sleep level and rises at most to INTERACTIVE_SLEEP.
    fn credit(&mut self, id: TaskId, static_prio: usize, slept: u64) {
        let mut sleep = slept.min(self.max_sleep_avg);
        if sleep > 0 {
            let t = &self.tasks[id as usize];
            let nonint = t.activated == -1;
            let limit = self.interactive_sleep_ns(static_prio);
            let new_avg = if !nonint && sleep > limit {
                self.max_sleep_avg - self.def_ts * self.tick_ns
            } else {
                sleep *= MAX_BONUS.saturating_sub(self.bonus_of(t.sleep_avg)).max(1);
                if nonint {
                    if t.sleep_avg >= limit {
                        sleep = 0;
                    } else if t.sleep_avg + sleep >= limit {
                        sleep = limit - t.sleep_avg;
                    }
                }
                (t.sleep_avg + sleep).min(self.max_sleep_avg)
            };
            self.tasks[id as usize].sleep_avg = new_avg;
        }
    }
}

impl BonusModel for SleepAvg {
    fn bonus(&self, id: TaskId) -> u64 {
        self.bonus_of(self.tasks[id as usize].sleep_avg)
    }

    fn fork(&mut self, id: TaskId, parent: Option<TaskId>) {
        ensure(&mut self.tasks, id);
        // An idle launcher has a full sleep average.
        let parent_avg = parent.map_or(self.max_sleep_avg, |p| self.tasks[p as usize].sleep_avg);
        let child = self.quantised(self.bonus_of(parent_avg), self.child_penalty);
        self.tasks[id as usize] = Sleeper { sleep_avg: child, activated: 0 };
        if let Some(p) = parent {
            // PARENT_PENALTY 100: the parent's average is quantised to its bonus level.
            self.tasks[p as usize].sleep_avg = self.quantised(self.bonus_of(parent_avg), 100);
        }
    }

    fn wake(&mut self, id: TaskId, static_prio: usize, kind: WakeKind, since: u64, now: u64) {
        // try_to_wake_up marks the sleep before activate_task credits it.
        if self.pipe_noninteractive && kind == WakeKind::Sync {
            self.tasks[id as usize].activated = -1;
        }
        self.credit(id, static_prio, now.saturating_sub(since));
        let t = &mut self.tasks[id as usize];
        if t.activated == 0 {
            t.activated = if kind == WakeKind::Timer { 2 } else { 1 };
        }
    }

    fn switch_in(&mut self, id: TaskId, static_prio: usize, since: u64, now: u64, _nr_running: u64) -> bool {
        let activated = std::mem::take(&mut self.tasks[id as usize].activated);
        if activated > 0 {
            // Runqueue wait credited as sleep, 38/128 of it for task wakeups.
            let mut delta = now.saturating_sub(since);
            if activated == 1 {
                delta = delta * (self.on_rq_weight * 128 / 100) / 128;
            }
            self.credit(id, static_prio, delta);
        }
        activated > 0
    }

    fn switch_out(&mut self, id: TaskId, ran: u64) {
        let run_time = ran.min(self.max_sleep_avg) / self.bonus(id).max(1);
        let t = &mut self.tasks[id as usize];
        t.sleep_avg = t.sleep_avg.saturating_sub(run_time);
    }

    fn exit(&mut self, id: TaskId, parent: TaskId) {
        let c = self.tasks[id as usize].sleep_avg;
        let pt = &mut self.tasks[parent as usize];
        if c < pt.sleep_avg {
            pt.sleep_avg = pt.sleep_avg / 4 * 3 + c / 4;
        }
    }

    const STATE: &'static [super::StateVar] = &[
        PRIO,
        TIME_SLICE,
        super::StateVar::new("sleep_avg", "ns", None, "sleep average 0..MAX_SLEEP_AVG; CURRENT_BONUS is its tenths"),
    ];

    fn state(&self, id: TaskId, out: &mut [i64]) {
        out[0] = self.tasks[id as usize].sleep_avg as i64;
    }
}

impl O1 {
    /// ingosched.
    pub fn new(spec: &Spec, ncpus: usize, hz: u32) -> Result<Self, SimError> {
        O1::with_bonus(spec, ncpus, hz, |tick_ns, def_ts| SleepAvg::new(spec, tick_ns, def_ts))
    }
}

impl<B: BonusModel> O1<B> {
    /// The O(1) machinery over the bonus `make(tick_ns, DEF_TIMESLICE in jiffies)` builds.
    pub fn with_bonus(
        spec: &Spec,
        ncpus: usize,
        hz: u32,
        make: impl FnOnce(u64, u64) -> Result<B, SimError>,
    ) -> Result<Self, SimError> {
        let tick_ns = 1_000_000_000 / hz as u64;
        // Slices are whole jiffies: a positive value below one tick is one tick.
        let j = |ns: u64| (ns / tick_ns).max(1);
        let def_ts = j(spec.tunable(&DEF_TS)?);
        Ok(O1 {
            tick_ns,
            def_ts,
            min_ts: j(spec.tunable(&MIN_TS)?),
            gran: j(spec.tunable(&GRAN)?),
            starvation: j(spec.tunable(&STARVATION)?),
            cache_hot: spec.tunable(&CACHE_HOT)?,
            imbalance_pct: spec.tunable(&IMBALANCE_PCT)?,
            busy_factor: spec.tunable(&BUSY_FACTOR)?,
            rqs: (0..ncpus)
                .map(|_| Rq {
                    arrays: [PrioArray::new(140), PrioArray::new(140)],
                    active: 0,
                    nr: 0,
                    expired_ts: None,
                    best_expired_prio: 140,
                    curr: None,
                    next_balance: 0,
                    interval_ms: 1,
                    failed: 0,
                })
                .collect(),
            tasks: Vec::new(),
            bonus: make(tick_ns, def_ts)?,
        })
    }

    /// `effective_prio`: `static_prio − (CURRENT_BONUS − MAX_BONUS/2)`, within 100..=139.
    fn effective_prio(&self, id: TaskId) -> usize {
        let t = &self.tasks[id as usize];
        (t.static_prio as i64 - self.bonus.bonus(id) as i64 + 5).clamp(100, 139) as usize
    }

    fn timeslice(&self, static_prio: usize) -> u64 {
        let x = if static_prio < 120 { 4 * self.def_ts } else { self.def_ts };
        (x * (140 - static_prio as u64) / 20).max(self.min_ts)
    }

    /// TASK_INTERACTIVE: `prio ≤ static_prio − DELTA`.
    fn interactive(t: &T) -> bool {
        t.prio as i64 <= t.static_prio as i64 - delta(t.static_prio)
    }

    fn enqueue_arr(&mut self, cpu: usize, id: TaskId, arr: usize, how: Requeue) {
        let t = &mut self.tasks[id as usize];
        t.array = Some(arr);
        t.cpu = cpu;
        let a = &mut self.rqs[cpu].arrays[arr];
        match how {
            Requeue::Head => a.push_front(t.prio, id),
            Requeue::AfterHead => a.insert(t.prio, 1, id),
            Requeue::TailActive | Requeue::Expired => a.push_back(t.prio, id),
        }
    }

    fn dequeue_arr(&mut self, cpu: usize, id: TaskId) {
        let t = &mut self.tasks[id as usize];
        if let Some(a) = t.array.take() {
            self.rqs[cpu].arrays[a].remove(t.prio, id);
        }
    }

    fn queued(&self, cpu: usize) -> usize {
        self.rqs[cpu].arrays[0].len + self.rqs[cpu].arrays[1].len
    }

    /// move_tasks: up to `max` tasks from `src` to `dst`, each into the array
    /// of the same name. Work: the second runqueue's lock, both queues, each
    /// task examined.
    fn move_tasks(&mut self, cx: &Ctx, src: usize, dst: usize, max: u64, allow_hot: bool) -> u64 {
        let (cache_hot, tasks, now) = (self.cache_hot, &self.tasks, cx.now);
        let act = self.rqs[src].active;
        let mut seen = 0;
        let taken = take_for_balance(&mut self.rqs[src].arrays, act, max, |id| {
            seen += 1;
            allow_hot || now.saturating_sub(tasks[id as usize].last_ran) >= cache_hot
        });
        cx.work(seen, 2, 1);
        for &(from_expired, id) in &taken {
            self.rqs[src].nr -= 1;
            self.rqs[dst].nr += 1;
            let dst_which = if from_expired { 1 - self.rqs[dst].active } else { self.rqs[dst].active };
            self.enqueue_arr(dst, id, dst_which, Requeue::TailActive);
        }
        taken.len() as u64
    }

    fn busiest(&self, cpu: usize) -> Option<usize> {
        (0..self.rqs.len())
            .filter(|&c| c != cpu && self.queued(c) > 0)
            .max_by_key(|&c| (self.rqs[c].nr, std::cmp::Reverse(c)))
    }

    fn rebalance_tick(&mut self, cx: &mut Ctx, cpu: usize) {
        let n = self.rqs.len();
        if n < 2 || cx.now < self.rqs[cpu].next_balance {
            return;
        }
        let idle = cx.idle(cpu) && self.rqs[cpu].nr == 0;
        let rq = &self.rqs[cpu];
        let interval = rq.interval_ms * if idle { 1 } else { self.busy_factor };
        self.rqs[cpu].next_balance = cx.now + interval * 1_000_000;
        let this = self.rqs[cpu].nr;
        cx.work(n as u64, 0, 0);
        let Some(src) = self.busiest(cpu) else { return };
        let max = self.rqs[src].nr;
        if max <= this || 100 * max <= self.imbalance_pct * this {
            let rq = &mut self.rqs[cpu];
            rq.interval_ms = (rq.interval_ms * 2).min(4);
            rq.failed = 0;
            return;
        }
        let mut imbalance = (max - this) / 2;
        if imbalance == 0 && idle && max > 1 {
            imbalance = 1;
        }
        let allow_hot = idle || self.rqs[cpu].failed > 1;
        let moved = self.move_tasks(cx, src, cpu, imbalance, allow_hot);
        let rq = &mut self.rqs[cpu];
        if moved > 0 {
            rq.interval_ms = 1;
            rq.failed = 0;
            cx.kick.push(cpu);
        } else {
            rq.failed += 1;
        }
    }
}

impl<B: BonusModel> Policy for O1<B> {
    fn priority(&self, t: TaskId, _now: u64) -> i64 {
        self.tasks[t as usize].prio as i64
    }

    fn task_new(&mut self, cx: &mut Ctx, id: TaskId, nice: i32, parent: Option<TaskId>) {
        ensure(&mut self.tasks, id);
        let static_prio = (120 + nice) as usize;
        let (parent_slice, parent_prio, pcpu) = match parent {
            Some(p) => {
                let pt = &self.tasks[p as usize];
                (pt.time_slice, pt.prio, pt.cpu)
            }
            // An idle launcher: a full nice-0 slice (and its bonus, see the model).
            None => (self.timeslice(120), 0, 0),
        };
        self.bonus.fork(id, parent);
        let t = T {
            static_prio,
            timestamp: cx.now,
            first_time_slice: true,
            cpu: pcpu,
            // sched_fork: split the slice.
            time_slice: parent_slice.div_ceil(2).max(1),
            ..Default::default()
        };
        self.tasks[id as usize] = t;
        self.tasks[id as usize].prio = if parent.is_some() { parent_prio } else { self.effective_prio(id) };
        if let Some(p) = parent {
            let pt = &mut self.tasks[p as usize];
            pt.time_slice /= 2;
            if pt.time_slice == 0 {
                // The kernel runs scheduler_tick() here; the effect is an immediate expiry.
                pt.time_slice = 1;
            }
        }
    }

    fn select_cpu(&mut self, cx: &mut Ctx, id: TaskId, w: &Wake) -> usize {
        if let WakeKind::New { parent } = w.kind {
            return if parent.is_some() {
                w.waker_cpu.unwrap_or(w.prev_cpu)
            } else {
                w.prev_cpu.min(self.rqs.len() - 1)
            };
        }
        let prev = w.prev_cpu;
        let Some(this) = w.waker_cpu else { return prev };
        if this == prev {
            return prev;
        }
        let load = self.rqs[prev].nr;
        let mut this_load = self.rqs[this].nr;
        if w.kind == WakeKind::Sync {
            this_load = this_load.saturating_sub(1);
        }
        if load == 0 && this_load > 0 {
            return prev;
        }
        // wake_affine: the two runqueues' loads read.
        cx.work(2, 0, 0);
        let cold = cx.now.saturating_sub(self.tasks[id as usize].last_ran) >= self.cache_hot;
        let imb = self.imbalance_pct + (self.imbalance_pct - 100) / 2;
        if cold || imb * this_load <= 100 * load {
            this
        } else {
            prev
        }
    }

    fn enqueue(&mut self, cx: &mut Ctx, id: TaskId, cpu: usize, w: &Wake) {
        // task_rq_lock, and a second lock when the task moves to another CPU.
        cx.work(0, 1, 1 + u64::from(cpu != w.prev_cpu));
        self.rqs[cpu].nr += 1;
        if let WakeKind::New { parent: Some(p) } = w.kind {
            let pcpu = self.tasks[p as usize].cpu;
            if cpu == pcpu && self.rqs[cpu].curr == Some(p) {
                // The child goes just before the parent, which is rescheduled: the child runs first.
                self.tasks[p as usize].requeue = Requeue::AfterHead;
                let act = self.rqs[cpu].active;
                self.enqueue_arr(cpu, id, act, Requeue::Head);
                cx.kick.push(cpu);
                return;
            }
        }
        if !matches!(w.kind, WakeKind::New { .. }) {
            let t = &self.tasks[id as usize];
            self.bonus.wake(id, t.static_prio, w.kind, t.timestamp, cx.now);
            self.tasks[id as usize].prio = self.effective_prio(id);
        }
        self.tasks[id as usize].timestamp = cx.now;
        let act = self.rqs[cpu].active;
        self.enqueue_arr(cpu, id, act, Requeue::TailActive);
    }

    fn wakeup_preempt(&mut self, _cx: &mut Ctx, cpu: usize, curr: TaskId, id: TaskId, w: &Wake) -> bool {
        if w.kind == WakeKind::Sync && w.waker_cpu == Some(cpu) {
            return false;
        }
        self.tasks[id as usize].prio < self.tasks[curr as usize].prio
    }

    fn pick_next(&mut self, cx: &mut Ctx, cpu: usize) -> Option<TaskId> {
        cx.work(0, 1, 1);
        if self.queued(cpu) == 0 && self.rqs.len() > 1 {
            // idle_balance (NEWLY_IDLE): one task, cache-hot ones allowed.
            cx.work(self.rqs.len() as u64, 0, 0);
            if let Some(src) = self.busiest(cpu).filter(|&s| self.rqs[s].nr >= 2) {
                self.move_tasks(cx, src, cpu, 1, true);
            }
        }
        if self.queued(cpu) == 0 {
            return None;
        }
        let rq = &mut self.rqs[cpu];
        if rq.arrays[rq.active].is_empty() {
            rq.active = 1 - rq.active;
            rq.expired_ts = None;
            rq.best_expired_prio = 140;
        }
        let act = rq.active;
        let best = rq.arrays[act].best().expect("active is non-empty");
        let (id, nr) = (rq.arrays[act].lists[best][0], rq.nr);
        let t = &self.tasks[id as usize];
        if self.bonus.switch_in(id, t.static_prio, t.timestamp, cx.now, nr) {
            self.dequeue_arr(cpu, id);
            self.tasks[id as usize].prio = self.effective_prio(id);
            self.enqueue_arr(cpu, id, act, Requeue::TailActive);
        }
        self.dequeue_arr(cpu, id);
        let t = &mut self.tasks[id as usize];
        t.timestamp = cx.now;
        t.cpu = cpu;
        t.requeue = Requeue::Head;
        self.rqs[cpu].curr = Some(id);
        Some(id)
    }

    fn stopping(&mut self, cx: &mut Ctx, cpu: usize, id: TaskId, why: Stop) {
        self.bonus.switch_out(id, cx.now.saturating_sub(self.tasks[id as usize].timestamp));
        let t = &mut self.tasks[id as usize];
        t.timestamp = cx.now;
        t.last_ran = cx.now;
        self.rqs[cpu].curr = None;
        let act = self.rqs[cpu].active;
        if matches!(why, Stop::Preempt | Stop::Yield) {
            cx.work(0, 1, 0);
        }
        match why {
            Stop::Sleep { .. } | Stop::Exit => self.rqs[cpu].nr -= 1,
            Stop::Yield => self.enqueue_arr(cpu, id, 1 - act, Requeue::Expired),
            Stop::Preempt => {
                let how = std::mem::take(&mut self.tasks[id as usize].requeue);
                let arr = if how == Requeue::Expired { 1 - act } else { act };
                self.enqueue_arr(cpu, id, arr, how);
            }
        }
    }

    fn tick(&mut self, cx: &mut Ctx, cpu: usize, curr: Option<TaskId>) -> bool {
        let mut resched = false;
        if let Some(id) = curr {
            let jiffies = cx.jiffies();
            let ncpus = self.rqs.len() as u64;
            let t = &mut self.tasks[id as usize];
            t.time_slice = t.time_slice.saturating_sub(1);
            if t.time_slice == 0 {
                self.bonus.slice_expired(id);
                let t = &self.tasks[id as usize];
                let prio = self.effective_prio(id);
                let slice = self.timeslice(t.static_prio);
                let t = &mut self.tasks[id as usize];
                t.prio = prio;
                t.time_slice = slice;
                t.first_time_slice = false;
                let rq = &mut self.rqs[cpu];
                if rq.expired_ts.is_none() {
                    rq.expired_ts = Some(jiffies);
                }
                let starving = rq.expired_ts.is_some_and(|e| jiffies - e > self.starvation * rq.nr)
                    || t.static_prio > rq.best_expired_prio;
                if !Self::interactive(t) || starving {
                    t.requeue = Requeue::Expired;
                    rq.best_expired_prio = rq.best_expired_prio.min(t.static_prio);
                } else {
                    t.requeue = Requeue::TailActive;
                }
                resched = true;
            } else {
                let t = &self.tasks[id as usize];
                let g = self.gran << (MAX_BONUS.saturating_sub(self.bonus.bonus(id)).max(1) - 1);
                let g = g * ncpus;
                if Self::interactive(t)
                    && (self.timeslice(t.static_prio) - t.time_slice).is_multiple_of(g)
                    && t.time_slice >= g
                {
                    self.tasks[id as usize].requeue = Requeue::TailActive;
                    resched = true;
                }
            }
        }
        self.rebalance_tick(cx, cpu);
        resched
    }

    fn set_nice(&mut self, _cx: &mut Ctx, id: TaskId, nice: i32, running_on: Option<usize>) -> bool {
        let t = &self.tasks[id as usize];
        let new_static = (120 + nice) as usize;
        let delta = new_static as i64 - t.static_prio as i64;
        let (cpu, arr) = (t.cpu, t.array);
        if arr.is_some() {
            self.dequeue_arr(cpu, id);
        }
        let t = &mut self.tasks[id as usize];
        t.static_prio = new_static;
        t.prio = (t.prio as i64 + delta).clamp(100, 139) as usize;
        if let Some(a) = arr {
            self.enqueue_arr(cpu, id, a, Requeue::TailActive);
        }
        (arr.is_some() && delta < 0) || (running_on.is_some() && delta > 0)
    }

    fn task_exit(&mut self, _cx: &mut Ctx, id: TaskId, parent: Option<TaskId>) {
        let Some(p) = parent else { return };
        let c = self.tasks[id as usize].clone();
        let cap = self.timeslice(self.tasks[p as usize].static_prio);
        let pt = &mut self.tasks[p as usize];
        if c.first_time_slice {
            pt.time_slice = (pt.time_slice + c.time_slice).min(cap);
        }
        self.bonus.exit(id, p);
    }

    fn timeslice_ns(&self, nice: i32) -> u64 {
        self.timeslice((120 + nice) as usize) * self.tick_ns
    }

    fn state_quantities(&self) -> &'static [super::StateVar] {
        B::STATE
    }

    fn state(&self, t: TaskId, now: u64, out: &mut [i64]) {
        out[0] = self.priority(t, now);
        out[1] = self.tasks[t as usize].time_slice as i64;
        self.bonus.state(t, &mut out[2..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::TestBed;

    fn o1(spec: &str) -> O1 {
        O1::new(&Spec::parse(spec, "policy").unwrap(), 1, 1000).unwrap()
    }

    #[test]
    fn noninteractive_pipe_wakeups_rise_only_to_interactive_sleep() {
        // Nice 0: INTERACTIVE_SLEEP 799 ms, the long-sleep level 900 ms.
        // (sleep_avg after the wake-up, whether the pick 50 ms later credits the wait).
        let sleeper_after = |spec: &str, kind: WakeKind, slept: u64, from: u64| {
            let mut p = o1(spec);
            p.bonus.tasks = vec![Sleeper { sleep_avg: from, activated: 0 }];
            p.bonus.wake(0, 120, kind, 0, slept);
            let woken = p.bonus.tasks[0].sleep_avg;
            let credited_at_pick = p.bonus.switch_in(0, 120, slept, slept + 50_000_000, 2);
            assert_eq!(credited_at_pick, p.bonus.tasks[0].sleep_avg > woken, "{spec}");
            (woken, credited_at_pick)
        };
        let on = "o1:pipe_noninteractive=on";
        // A 1 s pipe sleep: 2.6.11 jumps to 900 ms; non-interactive stops at 799 ms.
        assert_eq!(sleeper_after("o1", WakeKind::Sync, 1_000_000_000, 0).0, 900_000_000);
        assert_eq!(sleeper_after(on, WakeKind::Sync, 1_000_000_000, 0), (799_000_000, false));
        // Already at the limit: a pipe sleep adds nothing, a futex sleep does.
        assert_eq!(sleeper_after(on, WakeKind::Sync, 10_000_000, 800_000_000).0, 800_000_000);
        assert!(sleeper_after(on, WakeKind::Normal, 10_000_000, 800_000_000).0 > 800_000_000);
        // Below it a short pipe sleep is credited (x10 at bonus 0), and the
        // runqueue wait is not: the pick leaves the average as the wake-up did.
        assert_eq!(sleeper_after(on, WakeKind::Sync, 1_000_000, 0), (10_000_000, false));
        assert!(sleeper_after("o1", WakeKind::Sync, 1_000_000, 0).1, "2.6.11 credits the wait");
    }

    #[test]
    fn timeslice_table_matches_2_6_11() {
        // schedulers.md's table: nice -20..19 -> 800, 600, 420, 100, 95, 50, 5 ms.
        let p = o1("o1");
        let ms: Vec<u64> = [-20, -10, -1, 0, 1, 10, 19].iter().map(|&n| p.timeslice_ns(n) / 1_000_000).collect();
        assert_eq!(ms, vec![800, 600, 420, 100, 95, 50, 5]);
    }

    #[test]
    fn interactivity_thresholds() {
        let mut p = o1("o1");
        p.tasks = vec![T { static_prio: 120, ..Default::default() }, T { static_prio: 139, ..Default::default() }];
        p.bonus.tasks = vec![Sleeper::default(); 2];
        let prio = |p: &mut O1, id: TaskId, sleep_avg: u64| {
            p.bonus.tasks[id as usize].sleep_avg = sleep_avg;
            p.tasks[id as usize].prio = p.effective_prio(id);
            (p.tasks[id as usize].prio, O1::<SleepAvg>::interactive(&p.tasks[id as usize]))
        };
        // nice 0 needs bonus >= 7 (sleep_avg >= 700 ms) to be interactive.
        assert_eq!(prio(&mut p, 0, 699_000_000), (119, false));
        assert_eq!(prio(&mut p, 0, 700_000_000), (118, true));
        // INTERACTIVE_SLEEP at nice 0 is 799 ms.
        assert_eq!(p.bonus.interactive_sleep_ns(120), 799_000_000);
        // nice 19 never qualifies: best prio 134 > 139 - DELTA(19 -> 6) = 133.
        assert_eq!(prio(&mut p, 1, 1_000_000_000), (134, false));
    }

    #[test]
    fn hog_priority_degrades_as_sleep_avg_drains() {
        // A launcher child starts with sleep_avg 900 ms (bonus 9, prio 116).
        // Running drains sleep_avg by run_time/bonus, so bonus level b (100 ms
        // of sleep_avg) lasts 100·b ms of CPU; from 899.x ms (bonus 8) to
        // bonus 0 takes 100·(8+7+…+1) = 3.6 s. prio is recomputed only at
        // slice expiry, at 50 + 100·k ms (the first slice is 50 ms), and integer
        // division per stint delays the crossing slightly, so the first
        // prio-125 sample is the expiry at 3.65 s or 3.75 s.
        let mut p = o1("o1");
        let mut tb = TestBed::new(1, 1000);
        p.task_new(&mut tb.cx(), 0, 0, None);
        let w = Wake { kind: WakeKind::New { parent: None }, prev_cpu: 0, waker_cpu: None };
        p.enqueue(&mut tb.cx(), 0, 0, &w);
        assert_eq!(p.tasks[0].prio, 116);
        assert_eq!(p.tasks[0].time_slice, 50);
        let mut prios = vec![];
        let mut curr = p.pick_next(&mut tb.cx(), 0).unwrap();
        for _ in 0..5000 {
            tb.now += 1_000_000;
            if p.tick(&mut tb.cx(), 0, Some(curr)) {
                p.stopping(&mut tb.cx(), 0, curr, Stop::Preempt);
                curr = p.pick_next(&mut tb.cx(), 0).unwrap();
                prios.push((tb.now, p.tasks[0].prio));
            }
        }
        assert!(prios.windows(2).all(|w| w[0].1 <= w[1].1), "a hog's prio never improves: {prios:?}");
        assert_eq!(prios.last().unwrap().1, 125, "a pure hog ends at static+5");
        let first_125 = prios.iter().find(|p| p.1 == 125).unwrap().0;
        assert!((3_650_000_000..=3_750_000_000).contains(&first_125), "{first_125}");
    }

    #[test]
    fn long_sleep_sets_sleep_avg_to_900ms_not_max() {
        let mut p = o1("o1");
        let mut tb = TestBed::new(1, 1000);
        p.task_new(&mut tb.cx(), 0, 0, None);
        p.bonus.tasks[0].sleep_avg = 0;
        tb.now = 2_000_000_000;
        let w = Wake { kind: WakeKind::Timer, prev_cpu: 0, waker_cpu: None };
        p.enqueue(&mut tb.cx(), 0, 0, &w);
        assert_eq!(p.bonus.tasks[0].sleep_avg, 900_000_000);
        assert_eq!(p.tasks[0].prio, 116);
        // A short sleep is multiplied by (10 - bonus): 10 ms at bonus 0 -> 100 ms.
        let mut q = o1("o1");
        q.task_new(&mut tb.cx(), 0, 0, None);
        q.bonus.tasks[0].sleep_avg = 0;
        q.tasks[0].timestamp = tb.now - 10_000_000;
        q.enqueue(&mut tb.cx(), 0, 0, &w);
        assert_eq!(q.bonus.tasks[0].sleep_avg, 100_000_000);
    }

    #[test]
    fn fork_splits_slice_and_child_runs_first() {
        let mut p = o1("o1");
        let mut tb = TestBed::new(1, 1000);
        p.task_new(&mut tb.cx(), 0, 0, None);
        let w = Wake { kind: WakeKind::New { parent: None }, prev_cpu: 0, waker_cpu: None };
        p.enqueue(&mut tb.cx(), 0, 0, &w);
        assert_eq!(p.pick_next(&mut tb.cx(), 0), Some(0));
        tb.cpus[0].curr = Some(0);
        p.task_new(&mut tb.cx(), 1, 0, Some(0));
        assert_eq!((p.tasks[0].time_slice, p.tasks[1].time_slice), (25, 25));
        let wf = Wake { kind: WakeKind::New { parent: Some(0) }, prev_cpu: 0, waker_cpu: Some(0) };
        p.enqueue(&mut tb.cx(), 1, 0, &wf);
        assert_eq!(tb.kick, vec![0], "the parent is rescheduled");
        p.stopping(&mut tb.cx(), 0, 0, Stop::Preempt);
        assert_eq!(p.pick_next(&mut tb.cx(), 0), Some(1), "the child runs first");
    }
}
