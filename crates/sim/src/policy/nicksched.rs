//! nicksched (Nick Piggin's scheduler policy), the v13 model (September 2003).
//!
//! Source: schedulers.md §5b, from the LKML "[PATCH] Nick's scheduler policy
//! v13" rollup against 2.6.0-test4; the 2.6.0 code it leaves alone (sync
//! wakeup migration, yield, the balancer's skeleton and intervals) is taken
//! from 2.6.0. Versions after v13 (v30 in -mm with `base_timeslice`,
//! PlugSched's `nicksched.c`, which E3 ran) could not be retrieved: how
//! they differ is **⚠uncertain**.
//! - Per CPU, active and expired arrays (O(1)'s structure) over prios
//!   100..159: MAX_PRIO is 160 and `static_prio = 130 + nice`.
//! - History in jiffies, fixed point ×1024: `add_task_time(t, SLEEP|RUN|WAIT)`
//!   caps t (¼, ¼, 1/16 of MAX_SLEEP = 1 s), decays total and sleep time by
//!   `(MAX_SLEEP − t)/MAX_SLEEP`, adds t (not for WAIT, which only shortens
//!   the history) and floors the total at MIN_HISTORY = ½ s keeping the
//!   ratio. `sleep_avg = 1024·sleep/total`; `prio = clamp(static + 10 −
//!   round(20·sleep_avg/1024), 100, 159)`: a nice-0 hog sits at 140, a pure
//!   sleeper at 120. Wakeup adds the sleep, a switch adds the outgoing task's
//!   run and the incoming task's runqueue wait; prio is recomputed at wakeup
//!   and slice expiry only. Each time is the number of jiffies crossed: the
//!   first version (2003-08-19, against 2.6.0-test3-mm1) replaced -mm's
//!   `sched_clock()` with `jiffies` in `activate_task` and `schedule`, and
//!   v8 and v13 keep it; `ns_accounting=on` measures it from
//!   the ns clock in µs instead (MAX_SLEEP = 10⁶ µs), to test whether the
//!   sampling, not the history rule, sets a task's prio (⚠ PlugSched's
//!   units are unknown).
//! - Timeslice, recomputed at every tick from the best prio queued on the
//!   CPU (active and expired) or the task's own: `base = MIN_TIMESLICE·61/
//!   (prio − best + 2)`, `slice = max(1, base·(best − 100 + 8)/24)`. A lone
//!   nice-0 hog gets 60 ms; with a prio-120 task queued, 2 ms.
//! - Per tick `used_slice += 1`; at the slice, recompute prio and move to
//!   the expired array (no interactive reinsertion, no starvation limit).
//!   Arrays swap when active empties, bumping `array_sequence`: a task that
//!   slept across a swap restarts its slice at wakeup.
//! - Wakeup preemption if `p.prio < curr.prio`, never for sync (pipe)
//!   wakeups, which move the wakee to the waker's CPU (2.6.0). Fork shares
//!   the slice through `used_slice` and gives the child ¼ of the history
//!   (same sleep_avg, MIN_HISTORY floor); the parent keeps ¾ of its sleep
//!   time; the child queues behind the parent without preempting. Exit
//!   gives an unused first slice back and charges the parent RUN time if the
//!   child slept less. Yield moves the task to the expired array (2.6.0).
//!   A nice change sets prio to the new static prio (the source's `prio +=
//!   new_static − old_prio`) and requeues at the tail.
//! - SMP (v13 over 2.6.0): busiest = the CPU with most runnable tasks (≥ 2);
//!   `imbalance = busiest − this`; a busy CPU balances only if
//!   `4·imbalance ≥ busiest`. It pulls `imbalance/2` tasks (an idle CPU
//!   one), expired first, best prio first, list tails first, into its active
//!   array, skipping cache-hot tasks (`jiffies − timestamp ≤
//!   cache_decay_ticks`) unless idle. When `imbalance/2` is 0 the source's
//!   `--imbalance` goes negative and never stops the loop, so every movable
//!   task is pulled: modelled as written. Idle CPUs balance at every tick
//!   and when they go idle; busy ones every 200 ms (HZ/5), staggered by CPU.
//!
//! Hackbench tasks stay near prio 120, level with a real sleeper, which then
//! queues behind them: they mostly sleep, so that is the history rule, not
//! jiffy sampling (`ns_accounting=on` gives the same prios; tests/e3.rs).
//!
//! `used_slice` is 32-bit unsigned as on i386 and E3's MIPS: a fork share or
//! exit give-back that underflows wraps, and the slice ends at the next tick,
//! as in the source.
//!
//! Scheduler work (cost.rs), as in `o1`: a wake-up locks the runqueue (a
//! second lock when the task changes CPU) and queues the task; a schedule
//! locks and picks by bitmap, a preempted or yielding task is requeued;
//! `load_balance` examines every CPU and, to pull, locks the busiest
//! runqueue and examines its candidates.
//!
//! Simplifications: no `prev_cpu_load` smoothing of the balancer's loads, no
//! NUMA or `sched_balance_exec`, no active (push) balancing, no
//! uninterruptible sleeps. `cache_decay_ticks` was computed at boot from the
//! cache size (**⚠uncertain**; default 2 ms). The workload's initial tasks
//! are children of an idle launcher (sleep_avg 1024, history at the floor):
//! a nice-0 task starts at prio 120 with a fresh slice.
//!
//! Timeslice curve (`timeslice_ns`): the slice of a nice-n hog sharing one
//! CPU with a nice-0 hog, both settled at bonus 0 (prios 140 + n and 140):
//! 35 ms at −20 rising to 60 ms at 0, then `2·⌊61/(n + 2)⌋` ms above 0
//! (4 ms at 19), because the better hog sets `best`.

use super::{ensure, take_for_balance, tunables, Ctx, Policy, PolicyInfo, PrioArray, Stop, TaskId, Wake, WakeKind};
use crate::spec::{BuildFor, Scale, Spec, Tunable};
use crate::SimError;

const MIN_TS: Tunable = Tunable::duration(
    "min_timeslice",
    1_000_000,
    1,
    1_000_000_000,
    "MIN_TIMESLICE (>= 1 tick); a lone nice-0 hog gets 60x this",
)
.was("min_timeslice_ns");
// MAX_WAIT_AFFECT = MAX_SLEEP/16 must be at least one jiffy: the least is 16
// ticks (160us at the highest HZ, 100000), checked when built.
const MAX_SLEEP: Tunable = Tunable::duration(
    "max_sleep",
    1_000_000_000,
    160_000,
    100_000_000_000,
    "MAX_SLEEP, the history window (at least 16 ticks); caps 1/4 (sleep, run), 1/16 (wait), floor 1/2",
)
.was("max_sleep_ns")
.scales_with(Scale::SixteenTicks);
const CACHE_DECAY: Tunable = Tunable::duration(
    "cache_decay",
    2_000_000,
    1,
    10_000_000_000,
    "cache_decay_ticks: busy balancing skips tasks queued this recently",
)
.was("cache_decay_ns");
// Every retrieved version (v1 to v13, 2003) samples jiffies; PlugSched's
// nicksched.c, which E3 ran, was not retrieved, so this stays off (⚠).
const NS_ACCOUNTING: Tunable = Tunable::boolean(
    "ns_accounting",
    false,
    "measure run, sleep and wait from the ns clock (kept in us) instead of counting jiffies crossed ⚠",
);

pub const TUNABLES: &[Tunable] = &[MIN_TS, MAX_SLEEP, CACHE_DECAY, NS_ACCOUNTING];

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "nicksched",
        summary: "Nick Piggin's nicksched v13: active/expired arrays, prio from decayed sleep history, slice from the gap to the best queued prio",
        priority_quantity: "prio 100..159 (lower is better)",
        tunables: tunables(TUNABLES),
    }
}

const SLEEP_FACTOR: u64 = 1024;
const MAX_RT_PRIO: usize = 100;
const MAX_PRIO: usize = 160;
const MAX_USER_PRIO: u64 = 60;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stime {
    Sleep,
    Run,
    Wait,
}

/// Where a preempted running task goes back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Requeue {
    /// Still at the head of its list (the kernel keeps curr queued).
    #[default]
    Head,
    /// Dequeued and re-enqueued while running (nice).
    Tail,
    /// Its slice ended.
    Expired,
}

/// Decayed run/sleep history: total and sleep time (×SLEEP_FACTOR jiffies) and their ratio 0..=1024.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct History {
    total_time: u64,
    sleep_time: u64,
    sleep_avg: u64,
}

impl History {
    /// `add_task_time`: `time` jiffies of `kind` with a `max_sleep`-jiffy window.
    fn add(&mut self, max_sleep: u64, time: u64, kind: Stime) {
        if time == 0 {
            return;
        }
        let cap = match kind {
            Stime::Sleep | Stime::Run => max_sleep / 4,
            Stime::Wait => max_sleep / 16,
        };
        let time = time.min(cap);
        let r = max_sleep - time;
        self.total_time = (r * self.total_time + max_sleep / 2) / max_sleep;
        self.sleep_time = (r * self.sleep_time + max_sleep / 2) / max_sleep;
        if kind != Stime::Wait {
            self.total_time += SLEEP_FACTOR * time;
            if kind == Stime::Sleep {
                self.sleep_time += SLEEP_FACTOR * time;
            }
            self.sleep_avg = SLEEP_FACTOR * self.sleep_time / self.total_time;
        }
        self.floor(max_sleep);
    }

    /// At least MIN_HISTORY (half the window) of history, keeping sleep_avg.
    fn floor(&mut self, max_sleep: u64) {
        let min = SLEEP_FACTOR * (max_sleep / 2);
        if self.total_time < min {
            self.total_time = min;
            self.sleep_time = min * self.sleep_avg / SLEEP_FACTOR;
        }
    }
}

#[derive(Debug, Clone, Default)]
struct T {
    static_prio: usize,
    prio: usize,
    hist: History,
    /// Ticks used of the current slice (u32: see the header).
    used_slice: u32,
    first_time_slice: bool,
    /// ns of the last wakeup or switch in or out.
    timestamp: u64,
    /// The runqueue's `array_sequence` when it last went to sleep.
    array_sequence: u64,
    /// The array holding it; None while running or asleep.
    array: Option<usize>,
    cpu: usize,
    requeue: Requeue,
}

#[derive(Debug, Clone)]
struct Rq {
    arrays: [PrioArray; 2],
    active: usize,
    array_sequence: u64,
    /// Runnable tasks including curr.
    nr: u64,
    curr: Option<TaskId>,
}

pub struct Nicksched {
    tick_ns: u64,
    /// History in µs of the ns clock instead of jiffies crossed.
    ns_accounting: bool,
    /// MIN_TIMESLICE and cache_decay_ticks in jiffies; MAX_SLEEP in history units (jiffies or µs).
    min_ts: u64,
    max_sleep: u64,
    cache_decay: u64,
    /// BUSY_REBALANCE_TICK (HZ/5) in jiffies.
    busy_balance: u64,
    rqs: Vec<Rq>,
    tasks: Vec<T>,
}

/// `task_timeslice` in jiffies for a task at `prio` when the best prio on its CPU is `best` (≤ prio).
fn timeslice(min_ts: u64, prio: usize, best: usize) -> u64 {
    let base = min_ts * (MAX_USER_PRIO + 1) / ((prio - best) as u64 + 2);
    (base * ((best - MAX_RT_PRIO) as u64 + 8) / 24).max(1)
}

impl Nicksched {
    pub fn new(spec: &Spec, ncpus: usize, hz: u32) -> Result<Self, SimError> {
        let tick_ns = 1_000_000_000 / hz as u64;
        let max_sleep_ns = spec.tunable_for(&MAX_SLEEP, &BuildFor { ncpus, hz, ..BuildFor::LISTED })?;
        let ns_accounting = spec.flag(&NS_ACCOUNTING)?;
        let max_sleep = max_sleep_ns / if ns_accounting { 1000 } else { tick_ns };
        Ok(Nicksched {
            tick_ns,
            ns_accounting,
            // Whole jiffies: a positive value below one tick is one tick.
            min_ts: (spec.tunable(&MIN_TS)? / tick_ns).max(1),
            max_sleep,
            cache_decay: (spec.tunable(&CACHE_DECAY)? / tick_ns).max(1),
            busy_balance: (hz as u64 / 5).max(1),
            rqs: (0..ncpus)
                .map(|_| Rq {
                    arrays: [PrioArray::new(MAX_PRIO), PrioArray::new(MAX_PRIO)],
                    active: 0,
                    array_sequence: 0,
                    nr: 0,
                    curr: None,
                })
                .collect(),
            tasks: Vec::new(),
        })
    }

    /// Time from `since` to `now` (ns) in history units: jiffies crossed, as v13
    /// samples the jiffy counter, or whole µs of the ns clock.
    fn units_since(&self, now: u64, since: u64) -> u64 {
        if self.ns_accounting {
            (now - since) / 1000
        } else {
            now / self.tick_ns - since / self.tick_ns
        }
    }

    fn task_priority(t: &T) -> usize {
        let bonus = ((MAX_USER_PRIO / 3) * t.hist.sleep_avg + SLEEP_FACTOR / 2) / SLEEP_FACTOR;
        (t.static_prio as i64 + 10 - bonus as i64).clamp(MAX_RT_PRIO as i64, MAX_PRIO as i64 - 1) as usize
    }

    /// `task_timeslice(p, rq)`: against the best prio queued on `cpu` or p's own.
    fn task_timeslice(&self, id: TaskId, cpu: usize) -> u64 {
        let prio = self.tasks[id as usize].prio;
        let a = &self.rqs[cpu].arrays;
        let best = [a[0].best(), a[1].best()].into_iter().flatten().fold(prio, usize::min);
        timeslice(self.min_ts, prio, best)
    }

    fn queued(&self, cpu: usize) -> usize {
        self.rqs[cpu].arrays[0].len + self.rqs[cpu].arrays[1].len
    }

    fn enqueue_arr(&mut self, cpu: usize, id: TaskId, expired: bool, head: bool) {
        let rq = &mut self.rqs[cpu];
        let which = if expired { 1 - rq.active } else { rq.active };
        let t = &mut self.tasks[id as usize];
        t.array = Some(which);
        t.cpu = cpu;
        if head {
            rq.arrays[which].push_front(t.prio, id);
        } else {
            rq.arrays[which].push_back(t.prio, id);
        }
    }

    /// Slice used up: new prio, fresh slice, and the expired array at the next switch.
    fn expire(&mut self, id: TaskId) {
        let t = &mut self.tasks[id as usize];
        t.prio = Self::task_priority(t);
        t.used_slice = 0;
        t.first_time_slice = false;
        t.requeue = Requeue::Expired;
    }

    /// `load_balance(this, idle)`; returns whether a pulled task should preempt a busy `cpu`'s curr.
    fn load_balance(&mut self, cx: &Ctx, cpu: usize, idle: bool) -> bool {
        let jiffies = cx.jiffies();
        let this = self.rqs[cpu].nr;
        cx.work(self.rqs.len() as u64, 0, 0);
        // max_load starts at 1: a CPU needs two runnable tasks to give one away.
        let mut src = None;
        let mut max = 1;
        for c in (0..self.rqs.len()).filter(|&c| c != cpu) {
            if self.rqs[c].nr > max {
                (src, max) = (Some(c), self.rqs[c].nr);
            }
        }
        let Some(src) = src else { return false };
        if max <= this {
            return false;
        }
        let imbalance = max - this;
        if !idle && imbalance * 4 < max {
            return false;
        }
        let limit = match (idle, imbalance / 2) {
            (true, _) => 1,
            (false, 0) => u64::MAX,
            (false, n) => n,
        };
        let (decay, tick, tasks) = (self.cache_decay, self.tick_ns, &self.tasks);
        let act = self.rqs[src].active;
        let mut seen = 0;
        let taken = take_for_balance(&mut self.rqs[src].arrays, act, limit, |id| {
            seen += 1;
            idle || jiffies.saturating_sub(tasks[id as usize].timestamp / tick) > decay
        });
        cx.work(seen, 2, 1);
        let curr_prio = self.rqs[cpu].curr.map_or(MAX_PRIO, |c| self.tasks[c as usize].prio);
        let mut preempt = false;
        for (_, id) in taken {
            self.rqs[src].nr -= 1;
            self.rqs[cpu].nr += 1;
            // 2.6.0's pull_task queues on the active array whichever array it left.
            self.enqueue_arr(cpu, id, false, false);
            preempt |= self.tasks[id as usize].prio < curr_prio;
        }
        preempt
    }
}

impl Policy for Nicksched {
    fn priority(&self, t: TaskId, _now: u64) -> i64 {
        self.tasks[t as usize].prio as i64
    }

    fn task_new(&mut self, cx: &mut Ctx, id: TaskId, nice: i32, parent: Option<TaskId>) {
        ensure(&mut self.tasks, id);
        let mut t = T { static_prio: (130 + nice) as usize, timestamp: cx.now, ..Default::default() };
        match parent {
            None => {
                // An idle launcher's child: full sleep_avg, history at the floor.
                t.hist.sleep_avg = SLEEP_FACTOR;
                t.hist.floor(self.max_sleep);
            }
            Some(p) => {
                // sched_fork: share the rest of the parent's slice through used_slice.
                let pcpu = self.tasks[p as usize].cpu;
                let ts = self.task_timeslice(p, pcpu) as u32;
                let pu = self.tasks[p as usize].used_slice;
                t.used_slice = pu.wrapping_add(ts.wrapping_sub(pu) / 2);
                t.first_time_slice = true;
                t.cpu = pcpu;
                let parent_used = pu.wrapping_add(ts.wrapping_sub(pu).wrapping_add(1) / 2);
                self.tasks[p as usize].used_slice = parent_used;
                if parent_used >= ts {
                    // The kernel sets used_slice = ts − 1 and runs scheduler_tick(), which expires it.
                    self.expire(p);
                    cx.kick.push(pcpu);
                }
                // wake_up_forked_process: a quarter of the history, the parent loses ¼ of its sleep.
                let ph = &mut self.tasks[p as usize].hist;
                t.hist =
                    History { total_time: ph.total_time / 4, sleep_time: ph.sleep_time / 4, sleep_avg: ph.sleep_avg };
                t.hist.floor(self.max_sleep);
                ph.sleep_time = 3 * ph.sleep_time / 4;
                if let Some(avg) = (SLEEP_FACTOR * ph.sleep_time).checked_div(ph.total_time) {
                    ph.sleep_avg = avg;
                }
            }
        }
        t.prio = Self::task_priority(&t);
        self.tasks[id as usize] = t;
    }

    fn select_cpu(&mut self, _cx: &mut Ctx, _id: TaskId, w: &Wake) -> usize {
        match w.kind {
            WakeKind::New { parent: None } => w.prev_cpu.min(self.rqs.len() - 1),
            // Children start on the parent's CPU; sync wakeups fast-migrate to the waker's.
            WakeKind::New { parent: Some(_) } | WakeKind::Sync => w.waker_cpu.unwrap_or(w.prev_cpu),
            WakeKind::Timer | WakeKind::Normal => w.prev_cpu,
        }
    }

    fn enqueue(&mut self, cx: &mut Ctx, id: TaskId, cpu: usize, w: &Wake) {
        cx.work(0, 1, 1 + u64::from(cpu != w.prev_cpu));
        self.rqs[cpu].nr += 1;
        if !matches!(w.kind, WakeKind::New { .. }) {
            // activate_task
            let now = cx.now;
            let slept = self.units_since(now, self.tasks[id as usize].timestamp);
            let t = &mut self.tasks[id as usize];
            t.hist.add(self.max_sleep, slept, Stime::Sleep);
            t.timestamp = now;
            t.prio = Self::task_priority(t);
            if t.array_sequence != self.rqs[cpu].array_sequence {
                t.used_slice = 0;
            }
        }
        self.enqueue_arr(cpu, id, false, false);
    }

    fn wakeup_preempt(&mut self, _cx: &mut Ctx, _cpu: usize, curr: TaskId, id: TaskId, w: &Wake) -> bool {
        match w.kind {
            WakeKind::New { .. } | WakeKind::Sync => false,
            WakeKind::Timer | WakeKind::Normal => self.tasks[id as usize].prio < self.tasks[curr as usize].prio,
        }
    }

    fn pick_next(&mut self, cx: &mut Ctx, cpu: usize) -> Option<TaskId> {
        cx.work(0, 1, 1);
        if self.queued(cpu) == 0 && self.rqs.len() > 1 {
            self.load_balance(cx, cpu, true);
        }
        if self.queued(cpu) == 0 {
            return None;
        }
        let rq = &mut self.rqs[cpu];
        if rq.arrays[rq.active].is_empty() {
            rq.active = 1 - rq.active;
            rq.array_sequence += 1;
        }
        let (_, id) = rq.arrays[rq.active].pop_best().expect("active is non-empty");
        rq.curr = Some(id);
        let now = cx.now;
        let waited = self.units_since(now, self.tasks[id as usize].timestamp);
        let t = &mut self.tasks[id as usize];
        t.hist.add(self.max_sleep, waited, Stime::Wait);
        t.timestamp = now;
        t.array = None;
        t.cpu = cpu;
        Some(id)
    }

    fn stopping(&mut self, cx: &mut Ctx, cpu: usize, id: TaskId, why: Stop) {
        let now = cx.now;
        let ran = self.units_since(now, self.tasks[id as usize].timestamp);
        let t = &mut self.tasks[id as usize];
        t.hist.add(self.max_sleep, ran, Stime::Run);
        t.timestamp = now;
        let requeue = std::mem::take(&mut t.requeue);
        self.rqs[cpu].curr = None;
        if matches!(why, Stop::Preempt | Stop::Yield) {
            cx.work(0, 1, 0);
        }
        match why {
            Stop::Sleep { .. } | Stop::Exit => {
                self.rqs[cpu].nr -= 1;
                self.tasks[id as usize].array_sequence = self.rqs[cpu].array_sequence;
            }
            Stop::Yield => self.enqueue_arr(cpu, id, true, false),
            Stop::Preempt => match requeue {
                Requeue::Head => self.enqueue_arr(cpu, id, false, true),
                Requeue::Tail => self.enqueue_arr(cpu, id, false, false),
                Requeue::Expired => self.enqueue_arr(cpu, id, true, false),
            },
        }
    }

    fn tick(&mut self, cx: &mut Ctx, cpu: usize, curr: Option<TaskId>) -> bool {
        let mut resched = false;
        if let Some(id) = curr {
            let used = self.tasks[id as usize].used_slice.wrapping_add(1);
            self.tasks[id as usize].used_slice = used;
            if used as u64 >= self.task_timeslice(id, cpu) {
                self.expire(id);
                resched = true;
            }
        }
        // Idle CPUs balance in pick_next, which the engine calls at every idle tick.
        let n = self.rqs.len() as u64;
        if n > 1
            && !cx.idle(cpu)
            && (cx.jiffies() + cpu as u64 * self.busy_balance / n).is_multiple_of(self.busy_balance)
        {
            resched |= self.load_balance(cx, cpu, false) && !cx.cpus[cpu].curr_rt;
        }
        resched
    }

    fn set_nice(&mut self, _cx: &mut Ctx, id: TaskId, nice: i32, running_on: Option<usize>) -> bool {
        let new_static = (130 + nice) as usize;
        let t = &self.tasks[id as usize];
        if new_static == t.static_prio {
            return false;
        }
        let (old_prio, array, cpu) = (t.prio, t.array, t.cpu);
        let delta = new_static as i64 - old_prio as i64;
        if let Some(a) = array {
            self.rqs[cpu].arrays[a].remove(old_prio, id);
        }
        let t = &mut self.tasks[id as usize];
        t.static_prio = new_static;
        t.prio = new_static;
        if let Some(a) = array {
            self.rqs[cpu].arrays[a].push_back(new_static, id);
        } else if running_on.is_some() {
            t.requeue = Requeue::Tail;
        }
        (array.is_some() || running_on.is_some()) && (delta < 0 || (delta > 0 && running_on.is_some()))
    }

    fn task_exit(&mut self, _cx: &mut Ctx, id: TaskId, parent: Option<TaskId>) {
        let Some(p) = parent else { return };
        let c = &self.tasks[id as usize];
        let (first, used, child_avg) = (c.first_time_slice, c.used_slice, c.hist.sleep_avg);
        if first {
            let back = (self.task_timeslice(id, c.cpu) as u32).wrapping_sub(used);
            let pt = &mut self.tasks[p as usize];
            pt.used_slice = pt.used_slice.wrapping_sub(back);
        }
        let ph = &mut self.tasks[p as usize].hist;
        if child_avg < ph.sleep_avg {
            let run = self.max_sleep * (ph.sleep_avg - child_avg) / SLEEP_FACTOR / 2;
            ph.add(self.max_sleep, run, Stime::Run);
        }
    }

    fn timeslice_ns(&self, nice: i32) -> u64 {
        let hog = Self::task_priority(&T { static_prio: (130 + nice) as usize, ..Default::default() });
        let nice0 = Self::task_priority(&T { static_prio: 130, ..Default::default() });
        timeslice(self.min_ts, hog, hog.min(nice0)) * self.tick_ns
    }

    fn state_quantities(&self) -> &'static [super::StateVar] {
        const VARS: &[super::StateVar] = &[
            super::StateVar::new("prio", "", Some(true), "dynamic priority 100..159 from static_prio and sleep_avg"),
            super::StateVar::new("sleep_avg", "", None, "share of its decayed history spent asleep, in 1024ths"),
            super::StateVar::new("used_slice", "ticks", None, "ticks used of its current slice"),
        ];
        VARS
    }

    fn state(&self, t: TaskId, now: u64, out: &mut [i64]) {
        out[0] = self.priority(t, now);
        let s = &self.tasks[t as usize];
        out[1] = s.hist.sleep_avg as i64;
        out[2] = i64::from(s.used_slice);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::TestBed;

    fn ns(spec: &str, ncpus: usize) -> Nicksched {
        Nicksched::new(&Spec::parse(spec, "policy").unwrap(), ncpus, 1000).unwrap()
    }

    const MAX_SLEEP: u64 = 1000;

    /// A launcher child (sleep_avg 1024, history at the 500-jiffy floor).
    fn fresh(nice: i32) -> T {
        let mut t = T { static_prio: (130 + nice) as usize, ..Default::default() };
        t.hist.sleep_avg = SLEEP_FACTOR;
        t.hist.floor(MAX_SLEEP);
        t.prio = Nicksched::task_priority(&t);
        t
    }

    /// Task `id` as a CPU hog (sleep_avg 0, prio 140 + nice), queued on `cpu` as a new task.
    fn add_hog(p: &mut Nicksched, tb: &mut TestBed, id: TaskId, cpu: usize) {
        p.task_new(&mut tb.cx(), id, 0, None);
        p.tasks[id as usize].hist = History { total_time: 1_024_000, sleep_time: 0, sleep_avg: 0 };
        p.tasks[id as usize].prio = Nicksched::task_priority(&p.tasks[id as usize]);
        let w = Wake { kind: WakeKind::New { parent: None }, prev_cpu: cpu, waker_cpu: None };
        p.enqueue(&mut tb.cx(), id, cpu, &w);
    }

    /// Ticks `curr` on CPU 0 until the policy asks to reschedule; returns the ticks taken.
    fn ticks_to_resched(p: &mut Nicksched, tb: &mut TestBed, curr: TaskId) -> u64 {
        for n in 1..=1000 {
            tb.now += 1_000_000;
            if p.tick(&mut tb.cx(), 0, Some(curr)) {
                return n;
            }
        }
        panic!("no reschedule in 1000 ticks");
    }

    #[test]
    fn history_takes_a_hog_to_140_and_a_sleeper_to_120() {
        let mut t = fresh(0);
        assert_eq!((t.hist.total_time, t.hist.sleep_time, t.prio), (512_000, 512_000, 120));
        // One 60-jiffy run: decay by 940/1000 (rounded), add 60·1024 of total.
        t.hist.add(MAX_SLEEP, 60, Stime::Run);
        assert_eq!(t.hist, History { total_time: 542_720, sleep_time: 481_280, sleep_avg: 908 });
        // bonus = round(20·908/1024) = 18.
        assert_eq!(Nicksched::task_priority(&t), 122);
        let mut prios = vec![];
        for _ in 0..100 {
            t.hist.add(MAX_SLEEP, 60, Stime::Run);
            prios.push(Nicksched::task_priority(&t));
        }
        assert!(prios.windows(2).all(|w| w[0] <= w[1]), "{prios:?}");
        assert_eq!(*prios.last().unwrap(), 140, "a nice-0 hog settles at static + 10");
        // A run longer than MAX_RUN_AFFECT (250) counts as 250.
        let mut a = fresh(0);
        let mut b = fresh(0);
        a.hist.add(MAX_SLEEP, 250, Stime::Run);
        b.hist.add(MAX_SLEEP, 5000, Stime::Run);
        assert_eq!(a.hist, b.hist);
        // Sleeping brings it back to 120; nice 19 tops out at 139, -20 clamps at 100.
        for _ in 0..100 {
            t.hist.add(MAX_SLEEP, 250, Stime::Sleep);
        }
        assert_eq!(Nicksched::task_priority(&t), 120);
        t.static_prio = 149;
        assert_eq!(Nicksched::task_priority(&t), 139);
        t.static_prio = 110;
        assert_eq!(Nicksched::task_priority(&t), 100);
    }

    #[test]
    fn waiting_shortens_the_history_but_keeps_the_ratio() {
        let mut t = fresh(0);
        t.hist = History { total_time: 1_024_000, sleep_time: 256_000, sleep_avg: 256 };
        // A wait is capped at MAX_WAIT_AFFECT = 62 jiffies and only decays.
        t.hist.add(MAX_SLEEP, 1000, Stime::Wait);
        assert_eq!(t.hist, History { total_time: 960_512, sleep_time: 240_128, sleep_avg: 256 });
        for _ in 0..50 {
            t.hist.add(MAX_SLEEP, 62, Stime::Wait);
        }
        // Floored at MIN_HISTORY (500 jiffies), sleep_time rebuilt from the unchanged ratio.
        assert_eq!(t.hist, History { total_time: 512_000, sleep_time: 128_000, sleep_avg: 256 });
    }

    /// The prio of a nice-0 task after 2 s of 600 µs runs, each starting on a
    /// tick, and 400 µs timed sleeps.
    fn prio_of_sub_jiffy_runner(spec: &str) -> usize {
        let mut p = ns(spec, 1);
        let mut tb = TestBed::new(1, 1000);
        p.task_new(&mut tb.cx(), 0, 0, None);
        p.enqueue(&mut tb.cx(), 0, 0, &Wake { kind: WakeKind::New { parent: None }, prev_cpu: 0, waker_cpu: None });
        let timer = Wake { kind: WakeKind::Timer, prev_cpu: 0, waker_cpu: None };
        for _ in 0..2000 {
            assert_eq!(p.pick_next(&mut tb.cx(), 0), Some(0));
            tb.now += 600_000;
            p.stopping(&mut tb.cx(), 0, 0, Stop::Sleep { io: false });
            tb.now += 400_000;
            p.enqueue(&mut tb.cx(), 0, 0, &timer);
        }
        p.tasks[0].prio
    }

    #[test]
    fn only_ns_accounting_charges_runs_that_cross_no_tick() {
        // Jiffies: every run starts and ends inside one jiffy (0 charged), every
        // sleep crosses one: a pure sleeper at 120, level with a real one.
        assert_eq!(prio_of_sub_jiffy_runner("nicksched"), 120);
        // ns: 60 % run; the sleep, added last, lifts sleep_avg just past
        // 435/1024, so the bonus is round(20·0.43) = 9.
        assert_eq!(prio_of_sub_jiffy_runner("nicksched:ns_accounting=on"), 131);
    }

    #[test]
    fn timeslice_follows_the_gap_to_the_best_prio() {
        // base = 61/(delta + 2) jiffies, scaled by (best - 100 + 8)/24.
        assert_eq!(timeslice(1, 140, 140), 60, "a lone nice-0 hog");
        assert_eq!(timeslice(1, 140, 120), 2, "behind a prio-120 task: 61/22 = 2, 2·28/24 = 2");
        assert_eq!(timeslice(1, 120, 120), 35);
        assert_eq!(timeslice(1, 159, 159), 83, "alone, the worst prio gets the longest slice");
        assert_eq!(timeslice(1, 159, 100), 1, "never below one jiffy");
        // The curve: a nice-n hog against a nice-0 hog.
        let p = ns("nicksched", 1);
        let ms: Vec<u64> = [-20, -1, 0, 1, 10, 19].iter().map(|&n| p.timeslice_ns(n) / 1_000_000).collect();
        assert_eq!(ms, vec![35, 58, 60, 40, 10, 4]);
        // At HZ=100 MIN_TIMESLICE is one jiffy, 10 ms: a lone hog gets 600 ms.
        let p100 = Nicksched::new(&Spec::parse("nicksched", "policy").unwrap(), 1, 100).unwrap();
        assert_eq!((p100.min_ts, p100.max_sleep, p100.timeslice_ns(0)), (1, 100, 600_000_000));
        assert!(Nicksched::new(&Spec::parse("nicksched[max_sleep=10ms]", "policy").unwrap(), 1, 1000).is_err());
    }

    #[test]
    fn lone_hog_runs_60_ticks_and_a_queued_prio_120_task_cuts_it_to_2() {
        let mut p = ns("nicksched", 1);
        let mut tb = TestBed::new(1, 1000);
        add_hog(&mut p, &mut tb, 0, 0);
        assert_eq!(p.tasks[0].prio, 140);
        assert_eq!(p.pick_next(&mut tb.cx(), 0), Some(0));
        assert_eq!(ticks_to_resched(&mut p, &mut tb, 0), 60);
        p.stopping(&mut tb.cx(), 0, 0, Stop::Preempt);
        assert_eq!(p.tasks[0].array, Some(1), "expired, not reinserted");
        assert_eq!(p.pick_next(&mut tb.cx(), 0), Some(0), "alone: the arrays swap");
        assert_eq!((p.rqs[0].active, p.rqs[0].array_sequence), (1, 1));
        // A fresh task (prio 120) queued without preempting: the hog's slice drops to 2 ticks.
        p.task_new(&mut tb.cx(), 1, 0, None);
        let w = Wake { kind: WakeKind::New { parent: None }, prev_cpu: 0, waker_cpu: None };
        p.enqueue(&mut tb.cx(), 1, 0, &w);
        assert_eq!(p.tasks[1].prio, 120);
        assert_eq!(ticks_to_resched(&mut p, &mut tb, 0), 2);
        p.stopping(&mut tb.cx(), 0, 0, Stop::Preempt);
        assert_eq!(p.pick_next(&mut tb.cx(), 0), Some(1));
        assert_eq!(p.tasks[0].array, Some(1 - p.rqs[0].active), "the hog waits in the expired array");
    }

    #[test]
    fn waking_better_task_preempts_unless_sync_or_new() {
        let mut p = ns("nicksched", 1);
        let mut tb = TestBed::new(1, 1000);
        add_hog(&mut p, &mut tb, 0, 0);
        p.pick_next(&mut tb.cx(), 0);
        tb.cpus[0].curr = Some(0);
        add_hog(&mut p, &mut tb, 1, 0);
        let timer = Wake { kind: WakeKind::Timer, prev_cpu: 0, waker_cpu: None };
        assert!(!p.wakeup_preempt(&mut tb.cx(), 0, 0, 1, &timer), "equal prio does not preempt");
        p.task_new(&mut tb.cx(), 2, 0, None);
        let new = Wake { kind: WakeKind::New { parent: None }, prev_cpu: 0, waker_cpu: None };
        p.enqueue(&mut tb.cx(), 2, 0, &new);
        assert!(!p.wakeup_preempt(&mut tb.cx(), 0, 0, 2, &new), "new tasks queue behind");
        assert!(p.wakeup_preempt(&mut tb.cx(), 0, 0, 2, &timer));
        let sync = Wake { kind: WakeKind::Sync, prev_cpu: 0, waker_cpu: Some(0) };
        assert!(!p.wakeup_preempt(&mut tb.cx(), 0, 0, 2, &sync));
    }

    #[test]
    fn a_sleep_across_an_array_swap_restarts_the_slice() {
        let mut p = ns("nicksched", 1);
        let mut tb = TestBed::new(1, 1000);
        let timer = Wake { kind: WakeKind::Timer, prev_cpu: 0, waker_cpu: None };
        add_hog(&mut p, &mut tb, 0, 0);
        add_hog(&mut p, &mut tb, 1, 0);
        // Task 0 runs 10 ticks and sleeps; task 1 runs its slice out, so the arrays swap.
        p.pick_next(&mut tb.cx(), 0);
        tb.now += 10_000_000;
        p.tasks[0].used_slice = 10;
        p.stopping(&mut tb.cx(), 0, 0, Stop::Sleep { io: false });
        assert_eq!(p.pick_next(&mut tb.cx(), 0), Some(1));
        ticks_to_resched(&mut p, &mut tb, 1);
        p.stopping(&mut tb.cx(), 0, 1, Stop::Preempt);
        assert_eq!(p.pick_next(&mut tb.cx(), 0), Some(1));
        assert_eq!(p.rqs[0].array_sequence, 1);
        p.enqueue(&mut tb.cx(), 0, 0, &timer);
        assert_eq!(p.tasks[0].used_slice, 0);
        // Without a swap the slice goes on.
        p.tasks[1].used_slice = 7;
        tb.now += 1_000_000;
        p.stopping(&mut tb.cx(), 0, 1, Stop::Sleep { io: false });
        assert_eq!(p.pick_next(&mut tb.cx(), 0), Some(0));
        p.enqueue(&mut tb.cx(), 1, 0, &timer);
        assert_eq!((p.rqs[0].array_sequence, p.tasks[1].used_slice), (1, 7));
    }

    #[test]
    fn fork_gives_the_child_a_quarter_of_the_history_and_half_the_slice() {
        let mut p = ns("nicksched", 1);
        let mut tb = TestBed::new(1, 1000);
        add_hog(&mut p, &mut tb, 0, 0);
        p.tasks[0].hist = History { total_time: 4_096_000, sleep_time: 2_048_000, sleep_avg: 512 };
        p.tasks[0].prio = Nicksched::task_priority(&p.tasks[0]);
        assert_eq!(p.tasks[0].prio, 130, "bonus round(20·512/1024) = 10");
        p.pick_next(&mut tb.cx(), 0);
        tb.cpus[0].curr = Some(0);
        p.tasks[0].used_slice = 10;
        // Alone at prio 130 the slice is 30·38/24 = 47: 37 left, 18 to the child, 19 kept.
        p.task_new(&mut tb.cx(), 1, 0, Some(0));
        let (parent, child) = (&p.tasks[0], &p.tasks[1]);
        assert_eq!((parent.used_slice, child.used_slice, child.first_time_slice), (29, 28, true));
        assert_eq!(child.hist, History { total_time: 1_024_000, sleep_time: 512_000, sleep_avg: 512 });
        assert_eq!(child.prio, 130);
        assert_eq!(parent.hist, History { total_time: 4_096_000, sleep_time: 1_536_000, sleep_avg: 384 });
        assert_eq!(parent.prio, 130, "the parent's prio waits for its next recompute");
        let w = Wake { kind: WakeKind::New { parent: Some(0) }, prev_cpu: 0, waker_cpu: Some(0) };
        assert_eq!(p.select_cpu(&mut tb.cx(), 1, &w), 0);
        p.enqueue(&mut tb.cx(), 1, 0, &w);
        assert!(tb.kick.is_empty(), "the parent keeps running");
        // A small child history is floored at MIN_HISTORY with the parent's ratio.
        p.tasks[0].hist = History { total_time: 1_024_000, sleep_time: 1_024_000, sleep_avg: 1024 };
        p.task_new(&mut tb.cx(), 2, 0, Some(0));
        assert_eq!(p.tasks[2].hist, History { total_time: 512_000, sleep_time: 512_000, sleep_avg: 1024 });
    }

    #[test]
    fn fork_on_the_last_tick_of_the_slice_expires_the_parent() {
        let mut p = ns("nicksched", 1);
        let mut tb = TestBed::new(1, 1000);
        add_hog(&mut p, &mut tb, 0, 0);
        p.pick_next(&mut tb.cx(), 0);
        tb.cpus[0].curr = Some(0);
        p.tasks[0].used_slice = 59;
        p.task_new(&mut tb.cx(), 1, 0, Some(0));
        assert_eq!(p.tasks[1].used_slice, 59);
        assert_eq!((p.tasks[0].used_slice, p.tasks[0].requeue), (0, Requeue::Expired));
        assert_eq!(tb.kick, vec![0]);
    }

    #[test]
    fn exit_returns_the_unused_first_slice_and_charges_the_parent() {
        let mut p = ns("nicksched", 1);
        let mut tb = TestBed::new(1, 1000);
        add_hog(&mut p, &mut tb, 0, 0);
        p.pick_next(&mut tb.cx(), 0);
        tb.cpus[0].curr = Some(0);
        p.task_new(&mut tb.cx(), 1, 0, Some(0));
        p.tasks[0].hist = History { total_time: 1_024_000, sleep_time: 512_000, sleep_avg: 512 };
        p.tasks[0].used_slice = 30;
        p.tasks[1].used_slice = 40;
        p.tasks[1].hist = History { total_time: 1_024_000, sleep_time: 0, sleep_avg: 0 };
        p.tasks[1].prio = 140;
        // The child's slice alone at 140 is 60: 20 unused go back. The child slept
        // less (0 < 512): the parent is charged 1000·512/1024/2 = 250 jiffies of RUN.
        p.task_exit(&mut tb.cx(), 1, Some(0));
        assert_eq!(p.tasks[0].used_slice, 10);
        let mut expect = History { total_time: 1_024_000, sleep_time: 512_000, sleep_avg: 512 };
        expect.add(MAX_SLEEP, 250, Stime::Run);
        assert_eq!(p.tasks[0].hist, expect);
        assert!(expect.sleep_avg < 512);
        // A give-back larger than the parent's used_slice wraps (u32), so its next tick ends the slice.
        p.task_new(&mut tb.cx(), 2, 0, Some(0));
        p.tasks[0].used_slice = 0;
        p.task_exit(&mut tb.cx(), 2, Some(0));
        assert!(p.tasks[0].used_slice > u32::MAX / 2);
        assert_eq!(ticks_to_resched(&mut p, &mut tb, 0), 1);
    }

    /// Two CPUs with `n0` and `n1` hogs queued now, each CPU running one of them.
    fn two_cpus(tb: &mut TestBed, n0: u32, n1: u32) -> Nicksched {
        let mut p = ns("nicksched", 2);
        for id in 0..n0 + n1 {
            add_hog(&mut p, tb, id, if id < n0 { 0 } else { 1 });
        }
        for cpu in 0..2 {
            p.pick_next(&mut tb.cx(), cpu);
        }
        p
    }

    #[test]
    fn balancing_follows_the_v13_imbalance_rule() {
        let mut tb = TestBed::new(2, 1000);
        let cold = |tb: &mut TestBed| tb.now += 10_000_000;
        // Busy, 2 vs 3: imbalance 1 and 4·1 >= 3, so it balances; imbalance/2 = 0
        // never stops the source's loop, so every movable task moves.
        let mut p = two_cpus(&mut tb, 2, 3);
        cold(&mut tb);
        assert!(!p.load_balance(&tb.cx(), 0, false), "equal prio: no preemption");
        assert_eq!((p.rqs[0].nr, p.rqs[1].nr), (4, 1));
        // Busy, 4 vs 5: 4·1 < 5, no balancing.
        let mut p = two_cpus(&mut tb, 4, 5);
        cold(&mut tb);
        p.load_balance(&tb.cx(), 0, false);
        assert_eq!((p.rqs[0].nr, p.rqs[1].nr), (4, 5));
        // Busy, 1 vs 5: imbalance 4, pulls 2, but not tasks queued within cache_decay (2 jiffies).
        let mut p = two_cpus(&mut tb, 1, 5);
        tb.now += 2_000_000;
        p.load_balance(&tb.cx(), 0, false);
        assert_eq!((p.rqs[0].nr, p.rqs[1].nr), (1, 5), "cache-hot");
        tb.now += 1_000_000;
        p.load_balance(&tb.cx(), 0, false);
        assert_eq!((p.rqs[0].nr, p.rqs[1].nr), (3, 3));
        // Going idle (pick_next on an empty queue): exactly one, cache-hot or not.
        let p = two_cpus(&mut tb, 0, 5);
        assert_eq!((p.rqs[0].nr, p.rqs[1].nr, p.rqs[0].curr.is_some()), (1, 4, true));
        // A pulled task better than the busy CPU's curr preempts it.
        let mut p = two_cpus(&mut tb, 1, 2);
        p.task_new(&mut tb.cx(), 3, 0, None);
        let w = Wake { kind: WakeKind::New { parent: None }, prev_cpu: 1, waker_cpu: None };
        p.enqueue(&mut tb.cx(), 3, 1, &w);
        cold(&mut tb);
        assert!(p.load_balance(&tb.cx(), 0, false));
        assert_eq!(p.tasks[3].cpu, 0);
    }
}
