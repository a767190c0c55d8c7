//! FreeBSD ULE 1.x (FreeBSD 5.1–6.x, 2003–2006): the ULE seed E1 measured.
//!
//! Source: schedulers.md §2b (`sys/kern/sched_ule.c` @0005e2b2, KSE era);
//! the score and its history limit are §2a's (`sched_interact_score`,
//! `sched_interact_update`, which §2b says are the same).
//! - Interactivity score 0..100 from `runtime`/`slptime` (hz ticks ≪ 10),
//!   history limit at SLP_RUN_MAX = 5 s; a sleep of 5 s or more sets
//!   `slp = MAX, run = 1`; interactive ⇔ `score < interact` (30).
//! - Priority `160 + score·64/100 + nice`, clamped to 160..223, recomputed at
//!   wake-up, slice end, fork and nice (not every tick, unlike ULE 2/3).
//! - Per-CPU `kseq` with two timeshare runqs, **curr** and **next** (64 queues
//!   of 4 priorities each, like O(1)'s active/expired). A thread is added to
//!   curr if it is interactive or its `td_priority` is better than its user
//!   priority (woken from a kernel sleep), else to next. `kseq_choose` takes
//!   the best of curr; a thread with slice 0 is re-sliced and moved to next;
//!   an empty curr is swapped with next once per choice (a second empty curr
//!   leaves the CPU idle until it picks again, as the kernel's `swap` guard does).
//! - Slices (hz ticks): `slice_min = hz/100`, `slice_max = hz/7`; interactive
//!   threads get slice_max; otherwise, with `d = nice − nicemin` (the lowest
//!   nice of the CPU's timeshare threads): slice_max if the CPU has no
//!   timeshare load or `nice < nicemin`, `slice_max − d·(slice_max −
//!   slice_min + 1)/19` if `d ≤ 19`, else slice_min at nice 0 and 0 (no CPU)
//!   otherwise.
//! - Per tick: `runtime += 1 tick ≪ 10`, history limit; when the slice runs
//!   out: recompute priority and slice, requeue (curr or next), NEEDRESCHED.
//! - Wake-up: the thread goes back to its last CPU (`ke_cpu`). There,
//!   NEEDRESCHED if it beats the current thread; on another CPU
//!   `kseq_notify` queues it and sends an IPI if it beats that CPU's thread
//!   or the CPU is idle. A wake-up on the waker's own CPU while that CPU's
//!   load is above 1 hands the thread to an idle CPU (`kseq_transfer`, the
//!   lowest-numbered idle one) with an IPI.
//! - An idle CPU steals from the most loaded CPU (next first, then curr).
//!   Every `rand(0..balance_max)` `sched_balance` moves `ceil(diff/2)`
//!   threads from the most to the least loaded CPU.
//! - Fork: the child's history scaled to ≤ 0.5 s (SLP_RUN_FORK), slice 1
//!   (it learns its interactivity quickly), same CPU; the parent is charged
//!   a tick of runtime. Exit: `parent.runtime += child.runtime`.
//!
//! Scheduler work (cost.rs): FreeBSD 5's `sched_lock` is one global spin lock
//! held over every scheduler operation. A wake-up takes it and queues (1
//! lock, 1 queue), `kseq_transfer` examines every CPU; a schedule takes it
//! and picks (1 lock, 1 queue), a steal examines every CPU and queues once
//! more, each balance move examines every CPU twice and queues twice. E1's
//! pipe result hangs on what 2003 hardware and locking added per switch and
//! per IPI (schedulers.md §2b's note), which no source gives as figures ⚠,
//! so both are tunables, in lock operations priced by the cost table's
//! `lock` cost: `switch_locks` extra per context switch (a pick of a thread
//! other than the CPU's previous one) and `ipi_locks` extra per reschedule
//! IPI a wake-up causes (counted on the waking CPU, so they also delay the
//! IPI). Both default to 0: the model's own counts, no guess.
//!
//! Simplifications: one CPU group (flat topology: every CPU is a sibling for
//! stealing and transfers); ticks at HZ drive accounting and slices (the
//! kernel's statclock ran at about 128 Hz); a thread woken from a channel
//! sleep keeps the kernel priority `sleep_pri` until it runs (⚠ one value
//! for every wait channel, where the kernel used the sleep's own priority;
//! any kernel priority beats every timeshare one, so only boosted threads'
//! order among themselves depends on it); the child of a fork gets its
//! priority from its own scaled history instead of copying the parent's;
//! `sched_balance` needs a difference of 2 or more (a difference of one
//! would swap the loads back and forth); workload tasks start with no
//! history (score 0, interactive); preemption requests take effect at once.

use super::{ensure, tunables, Ctx, Policy, PolicyInfo, PrioArray, Stop, TaskId, Wake, WakeKind};
use crate::spec::{Spec, Tunable};
use crate::SimError;
use rand::Rng;

const INTERACT: Tunable = Tunable::count("interact", 30, 0, 100, "interactivity threshold (SCHED_INTERACT_THRESH)");
const SLICE_MIN: Tunable =
    Tunable::duration("slice_min", 10_000_000, 1, 10_000_000_000, "SCHED_SLICE_MIN, hz/100 (rounded down to ticks)");
const SLICE_MAX: Tunable = Tunable::duration(
    "slice_max",
    142_857_142,
    1,
    10_000_000_000,
    "SCHED_SLICE_MAX, hz/7; interactive threads' slice (rounded down to ticks)",
);
const SLEEP_PRI: Tunable = Tunable::count(
    "sleep_pri",
    80,
    0,
    159,
    "kernel priority a thread woken from a channel sleep runs at until it is picked; 0 disables",
);
const STEAL: Tunable = Tunable::boolean("steal", true, "an idle CPU steals a thread from the most loaded CPU");
const BALANCE_MAX: Tunable = Tunable::duration(
    "balance_max",
    2_000_000_000,
    0,
    100_000_000_000,
    "sched_balance runs every rand(0..this); 0 disables",
);
const SWITCH_LOCKS: Tunable = Tunable::count(
    "switch_locks",
    0,
    0,
    1_000_000,
    "extra lock operations charged per context switch (2003 switch overhead, priced by the lock cost)",
);
const IPI_LOCKS: Tunable = Tunable::count(
    "ipi_locks",
    0,
    0,
    1_000_000,
    "extra lock operations charged per IPI a wake-up sends (2003 IPI overhead, priced by the lock cost)",
);

pub const TUNABLES: &[Tunable] =
    &[INTERACT, SLICE_MIN, SLICE_MAX, SLEEP_PRI, STEAL, BALANCE_MAX, SWITCH_LOCKS, IPI_LOCKS];

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "ule1",
        summary: "FreeBSD ULE 1.x (5.1-6.x, E1's ULE): interactivity score, per-CPU curr/next queues, slices from nice distance",
        priority_quantity: "td_priority 160..223, lower in a kernel sleep boost (lower is better)",
        tunables: tunables(TUNABLES),
    }
}

const PRI_MIN_TIMESHARE: i64 = 160;
const PRI_MAX_TIMESHARE: i64 = 223;
const INTERACT_HALF: u64 = 50;
const TICK_SHIFT: u32 = 10;
/// SCHED_SLICE_NTHRESH: nice distance beyond which a thread gets no slice.
const NTHRESH: i64 = 19;
const NQS: usize = 64;
/// runq priorities per queue (RQ_PPQ).
const PPQ: u32 = 4;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum St {
    #[default]
    Asleep,
    /// In `cpu`'s runq `rq[arr]` (curr or next, as `which_curr` says) at queue `idx`.
    Queued {
        cpu: usize,
        arr: usize,
        idx: usize,
    },
    Running,
    Dead,
}

#[derive(Debug, Clone, Default)]
struct T {
    runtime: u64,
    slptime: u64,
    /// Ticks of the current slice left (`ke_slice`).
    slice: u64,
    slptick: Option<u64>,
    io_sleep: bool,
    nice: i32,
    user_pri: u32,
    /// td_priority: `user_pri`, or `sleep_pri` after a channel sleep until picked.
    pri: u32,
    /// `ke_cpu`: the CPU whose load counts it (or that it last ran on).
    cpu: usize,
    st: St,
}

#[derive(Debug, Clone)]
struct Kseq {
    /// `[curr, next]` by `which_curr`.
    rq: [PrioArray; 2],
    which_curr: usize,
    /// Running plus queued threads (`ksq_load`; all timeshare here).
    load: u64,
    /// Timeshare threads counted in `load` per nice + 20 (`ksq_nice`).
    nice: [u32; 40],
    /// The task this CPU ran last (to count switches).
    last: Option<TaskId>,
}

impl Kseq {
    fn nicemin(&self) -> Option<i32> {
        self.nice.iter().position(|&n| n > 0).map(|i| i as i32 - 20)
    }
    fn queued(&self) -> usize {
        self.rq[0].len + self.rq[1].len
    }
}

pub struct Ule1 {
    hz: u64,
    interact: u64,
    slice_min: u64,
    slice_max: u64,
    sleep_pri: u32,
    steal: bool,
    /// `sched_balance` period bound in ticks (0: never).
    balance_max: u64,
    balance_in: u64,
    switch_locks: u64,
    ipi_locks: u64,
    slp_run_max: u64,
    kseqs: Vec<Kseq>,
    tasks: Vec<T>,
}

impl Ule1 {
    pub fn new(spec: &Spec, ncpus: usize, hz: u32) -> Result<Self, SimError> {
        let hz = hz as u64;
        let ticks = |ns: u64| (ns as u128 * hz as u128 / 1_000_000_000) as u64;
        let slice_min = ticks(spec.tunable(&SLICE_MIN)?).max(1);
        let slice_max = ticks(spec.tunable(&SLICE_MAX)?).max(1);
        if slice_max < slice_min {
            // Name the key that was set (slice_min when slice_max is its default).
            let key = if spec.get("slice_max").is_some() { "slice_max" } else { "slice_min" };
            return Err(spec.bad_value(
                key,
                spec.get(key).unwrap_or_default(),
                &format!(
                    "slice_min ({slice_min} ticks) no longer than slice_max ({slice_max} ticks at {hz} Hz): \
                     lower slice_min or raise slice_max"
                ),
            ));
        }
        let balance_max = ticks(spec.tunable(&BALANCE_MAX)?);
        Ok(Ule1 {
            hz,
            interact: spec.tunable(&INTERACT)?,
            slice_min,
            slice_max,
            sleep_pri: spec.tunable(&SLEEP_PRI)? as u32,
            steal: spec.flag(&STEAL)?,
            balance_max,
            balance_in: balance_max,
            switch_locks: spec.tunable(&SWITCH_LOCKS)?,
            ipi_locks: spec.tunable(&IPI_LOCKS)?,
            slp_run_max: (hz * 5) << TICK_SHIFT,
            kseqs: vec![
                Kseq {
                    rq: [PrioArray::new(NQS), PrioArray::new(NQS)],
                    which_curr: 0,
                    load: 0,
                    nice: [0; 40],
                    last: None,
                };
                ncpus
            ],
            tasks: Vec::new(),
        })
    }

    /// `sched_interact_score` (ULE 1.x has no fast path).
    fn score(t: &T) -> u64 {
        let (run, slp) = (t.runtime, t.slptime);
        if run > slp {
            let div = (run / INTERACT_HALF).max(1);
            return INTERACT_HALF + (INTERACT_HALF - slp / div);
        }
        if slp > run {
            let div = (slp / INTERACT_HALF).max(1);
            return run / div;
        }
        if run > 0 {
            INTERACT_HALF
        } else {
            0
        }
    }

    fn interactive(&self, t: &T) -> bool {
        Self::score(t) < self.interact
    }

    /// `sched_interact_update`: the history limit.
    fn interact_update(&mut self, id: TaskId) {
        let max = self.slp_run_max;
        let t = &mut self.tasks[id as usize];
        let sum = t.runtime + t.slptime;
        if sum < max {
            return;
        }
        if sum > 2 * max {
            if t.runtime > t.slptime {
                (t.runtime, t.slptime) = (max, 1);
            } else {
                (t.slptime, t.runtime) = (max, 1);
            }
        } else if sum > (max / 5) * 6 {
            t.runtime /= 2;
            t.slptime /= 2;
        } else {
            t.runtime = (t.runtime / 5) * 4;
            t.slptime = (t.slptime / 5) * 4;
        }
    }

    /// `sched_priority`: `user_pri = 160 + score·64/100 + nice`, clamped.
    fn sched_priority(&mut self, id: TaskId) {
        let t = &self.tasks[id as usize];
        let range = (PRI_MAX_TIMESHARE - PRI_MIN_TIMESHARE + 1) as u64;
        let pri = PRI_MIN_TIMESHARE + (Self::score(t) * range / 100) as i64 + t.nice as i64;
        self.tasks[id as usize].user_pri = pri.clamp(PRI_MIN_TIMESHARE, PRI_MAX_TIMESHARE) as u32;
    }

    /// `sched_slice` against `cpu`'s kseq.
    fn slice(&self, id: TaskId, cpu: usize) -> u64 {
        let t = &self.tasks[id as usize];
        if self.interactive(t) {
            return self.slice_max;
        }
        let q = &self.kseqs[cpu];
        let nicemin = q.nicemin();
        let Some(nicemin) = nicemin.filter(|&m| q.load > 0 && t.nice >= m) else {
            return self.slice_max;
        };
        let d = (t.nice - nicemin) as i64;
        if d <= NTHRESH {
            let (max, min) = (self.slice_max as i64, self.slice_min as i64);
            (max - d * (max - min + 1) / NTHRESH).max(0) as u64
        } else if t.nice == 0 {
            self.slice_min
        } else {
            0
        }
    }

    fn load_add(&mut self, id: TaskId, cpu: usize) {
        let nice = self.tasks[id as usize].nice;
        let q = &mut self.kseqs[cpu];
        q.load += 1;
        q.nice[(nice + 20) as usize] += 1;
        self.tasks[id as usize].cpu = cpu;
    }

    fn load_rem(&mut self, id: TaskId) {
        let t = &self.tasks[id as usize];
        let q = &mut self.kseqs[t.cpu];
        q.load -= 1;
        q.nice[(t.nice + 20) as usize] -= 1;
    }

    /// `kseq_runq_add`: curr if interactive or boosted, else next.
    fn runq_add(&mut self, id: TaskId, cpu: usize) {
        let t = &self.tasks[id as usize];
        let to_curr = self.interactive(t) || t.pri < t.user_pri;
        let idx = (t.pri / PPQ) as usize;
        let q = &mut self.kseqs[cpu];
        let arr = if to_curr { q.which_curr } else { 1 - q.which_curr };
        q.rq[arr].push_back(idx, id);
        self.tasks[id as usize].st = St::Queued { cpu, arr, idx };
    }

    fn runq_remove(&mut self, id: TaskId) {
        if let St::Queued { cpu, arr, idx } = self.tasks[id as usize].st {
            self.kseqs[cpu].rq[arr].remove(idx, id);
        }
    }

    /// Whether queued thread `id` is on its CPU's curr runq.
    #[cfg(test)]
    fn on_curr(&self, id: TaskId) -> bool {
        matches!(self.tasks[id as usize].st, St::Queued { cpu, arr, .. } if arr == self.kseqs[cpu].which_curr)
    }

    /// `kseq_choose` and removal: the best of curr; a thread with slice 0 is
    /// re-sliced and moved to next; an empty curr is swapped with next. The
    /// kernel's idle loop chooses again at once after a choice that only
    /// re-sliced threads, so this retries until a thread has a slice, or a
    /// swap found none that could get one (then the CPU idles).
    fn choose(&mut self, cpu: usize) -> Option<TaskId> {
        let mut fruitless_swap = false;
        loop {
            let q = &mut self.kseqs[cpu];
            let Some((_, id)) = q.rq[q.which_curr].pop_best() else {
                if fruitless_swap || q.rq[1 - q.which_curr].is_empty() {
                    return None;
                }
                fruitless_swap = true;
                q.which_curr = 1 - q.which_curr;
                continue;
            };
            if self.tasks[id as usize].slice == 0 {
                let slice = self.slice(id, cpu);
                fruitless_swap &= slice == 0;
                let t = &mut self.tasks[id as usize];
                t.slice = slice;
                let idx = (t.pri / PPQ) as usize;
                let q = &mut self.kseqs[cpu];
                let arr = 1 - q.which_curr;
                q.rq[arr].push_back(idx, id);
                self.tasks[id as usize].st = St::Queued { cpu, arr, idx };
                continue;
            }
            return Some(id);
        }
    }

    /// `kseq_steal`: next's best first, then curr's.
    fn steal_one(&mut self, src: usize) -> Option<TaskId> {
        let q = &mut self.kseqs[src];
        let next = 1 - q.which_curr;
        let id = match q.rq[next].pop_best() {
            Some((_, id)) => id,
            None => q.rq[q.which_curr].pop_best()?.1,
        };
        self.load_rem(id);
        Some(id)
    }

    /// Move one queued thread from `src` to `dst`'s queues.
    fn move_one(&mut self, src: usize, dst: usize) -> Option<TaskId> {
        let id = self.steal_one(src)?;
        self.load_add(id, dst);
        self.runq_add(id, dst);
        Some(id)
    }

    /// `sched_balance`: `ceil(diff/2)` threads from the most to the least loaded CPU.
    fn balance(&mut self, cx: &mut Ctx) {
        let n = self.kseqs.len();
        cx.work(2 * n as u64, 0, 1);
        let high = (0..n).max_by_key(|&c| (self.kseqs[c].load, std::cmp::Reverse(c))).expect("a CPU");
        let low = (0..n).min_by_key(|&c| (self.kseqs[c].load, c)).expect("a CPU");
        let diff = self.kseqs[high].load - self.kseqs[low].load;
        if diff < 2 {
            return;
        }
        for _ in 0..diff.div_ceil(2) {
            cx.work(0, 2, 0);
            if self.move_one(high, low).is_none() {
                break;
            }
        }
        if cx.idle(low) {
            cx.kick.push(low);
        }
    }

    /// The CPU that made this wake-up's decision.
    fn here(w: &Wake) -> usize {
        w.waker_cpu.unwrap_or(w.prev_cpu)
    }

    /// `sched_wakeup`'s bookkeeping, once per wake-up.
    fn wake_prepare(&mut self, cx: &Ctx, id: TaskId) {
        let now = cx.jiffies();
        let Some(slptick) = self.tasks[id as usize].slptick.take() else { return };
        let max = self.slp_run_max;
        let t = &mut self.tasks[id as usize];
        let slept = (now - slptick) << TICK_SHIFT;
        if slept >= max {
            (t.slptime, t.runtime) = (max, 1);
        } else {
            t.slptime += slept;
            self.interact_update(id);
        }
        self.sched_priority(id);
        let boost = self.sleep_pri;
        let t = &mut self.tasks[id as usize];
        t.pri = t.user_pri;
        if t.io_sleep && boost > 0 {
            t.pri = t.pri.min(boost);
        }
        self.tasks[id as usize].slice = self.slice(id, self.tasks[id as usize].cpu);
    }
}

impl Policy for Ule1 {
    fn priority(&self, t: TaskId, _now: u64) -> i64 {
        self.tasks[t as usize].pri as i64
    }

    fn task_new(&mut self, cx: &mut Ctx, id: TaskId, nice: i32, parent: Option<TaskId>) {
        ensure(&mut self.tasks, id);
        let mut t = T { nice, ..Default::default() };
        if let Some(p) = parent {
            let pt = &self.tasks[p as usize];
            // sched_interact_fork: the child's history is at most SLP_RUN_FORK (0.5 s).
            let fork_max = (self.hz / 2) << TICK_SHIFT;
            let (mut run, mut slp) = (pt.runtime, pt.slptime);
            let sum = run + slp;
            if sum > fork_max {
                let ratio = sum / fork_max;
                run /= ratio;
                slp /= ratio;
            }
            (t.runtime, t.slptime, t.cpu) = (run, slp, pt.cpu);
            self.tasks[p as usize].runtime += 1 << TICK_SHIFT;
            self.interact_update(p);
            cx.work(0, 0, 1);
        }
        // Attempt to learn interactivity quickly: a one-tick first slice.
        t.slice = 1;
        self.tasks[id as usize] = t;
        self.sched_priority(id);
        let t = &mut self.tasks[id as usize];
        t.pri = t.user_pri;
    }

    fn select_cpu(&mut self, cx: &mut Ctx, id: TaskId, w: &Wake) -> usize {
        if !matches!(w.kind, WakeKind::New { .. }) {
            self.wake_prepare(cx, id);
        }
        let home = w.prev_cpu;
        let here = Self::here(w);
        // kseq_transfer: a wake-up on its own CPU while that CPU is busy
        // goes to the lowest-numbered idle CPU.
        if home == here && self.kseqs[here].load > 1 && self.kseqs.len() > 1 {
            cx.work(self.kseqs.len() as u64, 0, 0);
            if let Some(c) = (0..self.kseqs.len()).find(|&c| c != here && self.kseqs[c].load == 0) {
                return c;
            }
        }
        home
    }

    fn enqueue(&mut self, cx: &mut Ctx, id: TaskId, cpu: usize, w: &Wake) {
        if !matches!(w.kind, WakeKind::New { .. }) && self.tasks[id as usize].slptick.is_some() {
            self.wake_prepare(cx, id);
        }
        cx.work(0, 1, 1);
        // An idle remote CPU is always sent an IPI (kseq_notify); a busy one
        // only if the thread preempts (counted in wakeup_preempt).
        if cpu != Self::here(w) && cx.idle(cpu) {
            cx.work(0, 0, self.ipi_locks);
        }
        self.load_add(id, cpu);
        self.runq_add(id, cpu);
    }

    fn wakeup_preempt(&mut self, cx: &mut Ctx, cpu: usize, curr: TaskId, id: TaskId, w: &Wake) -> bool {
        let preempts = self.tasks[id as usize].pri < self.tasks[curr as usize].pri;
        if preempts && cpu != Self::here(w) {
            cx.work(0, 0, self.ipi_locks);
        }
        preempts
    }

    fn pick_next(&mut self, cx: &mut Ctx, cpu: usize) -> Option<TaskId> {
        cx.work(0, 1, 1);
        let id = match self.choose(cpu) {
            Some(id) => id,
            None => {
                if !self.steal || self.kseqs.len() == 1 {
                    self.kseqs[cpu].last = None;
                    return None;
                }
                let n = self.kseqs.len();
                cx.work(n as u64, 1, 0);
                let src = (0..n)
                    .filter(|&c| c != cpu && self.kseqs[c].queued() > 0)
                    .max_by_key(|&c| (self.kseqs[c].load, std::cmp::Reverse(c)));
                let Some(id) = src.and_then(|s| self.steal_one(s)) else {
                    self.kseqs[cpu].last = None;
                    return None;
                };
                self.load_add(id, cpu);
                id
            }
        };
        let q = &mut self.kseqs[cpu];
        if q.last != Some(id) {
            cx.work(0, 0, self.switch_locks);
        }
        q.last = Some(id);
        let t = &mut self.tasks[id as usize];
        t.st = St::Running;
        t.cpu = cpu;
        // userret: the kernel sleep priority ends.
        t.pri = t.user_pri;
        Some(id)
    }

    fn stopping(&mut self, cx: &mut Ctx, cpu: usize, id: TaskId, why: Stop) {
        match why {
            Stop::Preempt | Stop::Yield => {
                cx.work(0, 1, 0);
                self.runq_add(id, cpu);
            }
            Stop::Sleep { io } => {
                self.load_rem(id);
                let now = cx.jiffies();
                let t = &mut self.tasks[id as usize];
                t.st = St::Asleep;
                t.slptick = Some(now);
                t.io_sleep = io;
            }
            Stop::Exit => {
                self.load_rem(id);
                self.tasks[id as usize].st = St::Dead;
            }
        }
    }

    fn tick(&mut self, cx: &mut Ctx, cpu: usize, curr: Option<TaskId>) -> bool {
        if cpu == 0 && self.kseqs.len() > 1 && self.balance_max > 0 {
            self.balance_in = self.balance_in.saturating_sub(1);
            if self.balance_in == 0 {
                self.balance(cx);
                self.balance_in = cx.rng.gen_range(1..=self.balance_max);
            }
        }
        // An idle CPU picks again at every tick (the engine's idle loop).
        let Some(id) = curr else { return false };
        self.tasks[id as usize].runtime += 1 << TICK_SHIFT;
        self.interact_update(id);
        let t = &mut self.tasks[id as usize];
        if t.slice > 1 {
            t.slice -= 1;
            return false;
        }
        // Out of slice: new priority and slice; requeued by the switch.
        self.sched_priority(id);
        let t = &mut self.tasks[id as usize];
        t.pri = t.user_pri;
        self.tasks[id as usize].slice = self.slice(id, cpu);
        true
    }

    fn set_nice(&mut self, cx: &mut Ctx, id: TaskId, nice: i32, running_on: Option<usize>) -> bool {
        cx.work(0, 0, 1);
        let counted = !matches!(self.tasks[id as usize].st, St::Asleep | St::Dead);
        if counted {
            self.load_rem(id);
        }
        self.tasks[id as usize].nice = nice;
        if counted {
            let cpu = self.tasks[id as usize].cpu;
            self.load_add(id, cpu);
        }
        self.sched_priority(id);
        let t = &mut self.tasks[id as usize];
        if t.pri >= PRI_MIN_TIMESHARE as u32 {
            t.pri = t.user_pri;
        }
        if let St::Queued { cpu, .. } = t.st {
            self.runq_remove(id);
            self.runq_add(id, cpu);
        }
        running_on.is_some()
    }

    fn task_exit(&mut self, _cx: &mut Ctx, id: TaskId, parent: Option<TaskId>) {
        if let Some(p) = parent {
            self.tasks[p as usize].runtime += self.tasks[id as usize].runtime;
            self.interact_update(p);
        }
    }

    fn timeslice_ns(&self, nice: i32) -> u64 {
        // Beside one nice-0 hog (both batch): nicemin = min(nice, 0).
        let d = (nice - nice.min(0)) as i64;
        let (max, min) = (self.slice_max as i64, self.slice_min as i64);
        let ticks = if d <= NTHRESH { (max - d * (max - min + 1) / NTHRESH).max(0) } else { 0 };
        ticks as u64 * 1_000_000_000 / self.hz
    }

    fn state_quantities(&self) -> &'static [super::StateVar] {
        const VARS: &[super::StateVar] = &[
            super::StateVar::new(
                "td_priority",
                "",
                Some(true),
                "td_priority 160..223 (sleep_pri after a channel sleep until it runs)",
            ),
            super::StateVar::new(
                "score",
                "",
                Some(true),
                "interactivity score 0..100 from runtime and slptime; below interact it is interactive",
            ),
            super::StateVar::new("runtime", "ns", None, "run history (ke_runtime) the score weighs"),
            super::StateVar::new("slptime", "ns", None, "sleep history (ke_slptime) the score weighs"),
            super::StateVar::new("user_pri", "", Some(true), "user priority 160 + score·64/100 + nice"),
            super::StateVar::new("slice", "ticks", None, "ticks left of its slice (ke_slice)"),
        ];
        VARS
    }

    fn state(&self, t: TaskId, now: u64, out: &mut [i64]) {
        out[0] = self.priority(t, now);
        let s = &self.tasks[t as usize];
        // The histories are hz ticks << TICK_SHIFT.
        let ns = |v: u64| ((v as u128 * 1_000_000_000 / self.hz as u128) >> TICK_SHIFT) as i64;
        out[1] = Self::score(s) as i64;
        out[2] = ns(s.runtime);
        out[3] = ns(s.slptime);
        out[4] = i64::from(s.user_pri);
        out[5] = s.slice as i64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::TestBed;

    fn ule1(spec: &str, ncpus: usize) -> Ule1 {
        Ule1::new(&Spec::parse(spec, "policy").unwrap(), ncpus, 1000).unwrap()
    }

    fn wake_new() -> Wake {
        Wake { kind: WakeKind::New { parent: None }, prev_cpu: 0, waker_cpu: None }
    }

    const TICK: u64 = 1 << TICK_SHIFT;

    #[test]
    fn score_and_priority_follow_the_formulas() {
        let t = |run: u64, slp: u64, nice: i32| T { runtime: run * TICK, slptime: slp * TICK, nice, ..T::default() };
        // Sleeper 1:9: run / (slp/50) = 100 / 18 = 5 (integer division).
        assert_eq!(Ule1::score(&t(100, 900, 0)), 5);
        // Hog 1000:100: 50 + (50 - 100/20) = 95 (no fast path in ULE 1.x).
        assert_eq!(Ule1::score(&t(1000, 100, 0)), 95);
        assert_eq!(Ule1::score(&t(7, 7, 0)), 50);
        assert_eq!(Ule1::score(&t(0, 0, 0)), 0);
        let mut p = ule1("ule1", 1);
        // 160 + score·64/100 + nice, clamped to 160..223.
        let cases =
            [((100, 900, 0), 160 + 5 * 64 / 100), ((1000, 100, 0), 160 + 95 * 64 / 100), ((1000, 100, 19), 223)];
        for ((run, slp, nice), want) in cases {
            p.tasks = vec![t(run, slp, nice)];
            p.sched_priority(0);
            assert_eq!(p.tasks[0].user_pri, want, "run {run} slp {slp} nice {nice}");
        }
        p.tasks = vec![t(100, 900, -20)];
        p.sched_priority(0);
        assert_eq!(p.tasks[0].user_pri, 160, "clamped at the band's top");
    }

    #[test]
    fn slices_follow_the_nice_distance() {
        let mut p = ule1("ule1", 1);
        assert_eq!((p.slice_min, p.slice_max), (10, 142), "hz/100 and hz/7 at HZ 1000");
        // Batch threads (score 95); the kseq counts a nice-0 thread, so nicemin 0.
        let batch = |nice| T { runtime: 1000 * TICK, slptime: 100 * TICK, nice, ..T::default() };
        p.tasks = vec![batch(0), batch(5), batch(19), batch(-5)];
        p.load_add(0, 0);
        // d = 5: 142 - 5·133/19 = 142 - 35 = 107.
        assert_eq!(p.slice(1, 0), 142 - 5 * 133 / 19);
        // d = 19: 142 - 133 = 9 ticks.
        assert_eq!(p.slice(2, 0), 9);
        assert_eq!(p.slice(0, 0), 142, "d = 0: slice_max");
        assert_eq!(p.slice(3, 0), 142, "nice below nicemin: slice_max");
        // nicemin -20 (a nice -20 thread counted): d = 20 and 39 are past NTHRESH.
        p.tasks.push(batch(-20));
        p.load_add(4, 0);
        assert_eq!(p.slice(0, 0), 10, "nice 0 too far: slice_min");
        assert_eq!(p.slice(1, 0), 0, "nice 5 too far: no slice at all");
        // Interactive threads get slice_max whatever their nice.
        p.tasks.push(T { runtime: TICK, slptime: 900 * TICK, nice: 19, ..T::default() });
        assert_eq!(p.slice(5, 0), 142);
        // With no timeshare load on the CPU: slice_max.
        let q = ule1("ule1", 2);
        let mut q = q;
        q.tasks = vec![batch(19)];
        assert_eq!(q.slice(0, 1), 142);
        assert_eq!(q.timeslice_ns(0), 142_000_000);
        assert_eq!(q.timeslice_ns(19), 9_000_000);
        assert_eq!(q.timeslice_ns(-10), 142_000_000);
    }

    #[test]
    fn interactive_go_to_curr_batch_to_next_and_curr_swaps_when_empty() {
        let mut p = ule1("ule1", 1);
        p.tasks = vec![
            T { runtime: 1000 * TICK, slptime: 100 * TICK, slice: 5, ..T::default() }, // batch
            T { runtime: TICK, slptime: 900 * TICK, slice: 5, ..T::default() },        // interactive
        ];
        for id in 0..2 {
            p.sched_priority(id);
            let t = &mut p.tasks[id as usize];
            t.pri = t.user_pri;
            p.load_add(id, 0);
            p.runq_add(id, 0);
        }
        assert!(!p.on_curr(0), "batch: next");
        assert!(p.on_curr(1), "interactive: curr");
        assert_eq!(p.choose(0), Some(1));
        // curr empty: swap, and the batch thread runs.
        assert_eq!(p.choose(0), Some(0));
        assert_eq!(p.choose(0), None);
        // A boosted batch thread (woken from a channel sleep) goes to curr.
        p.tasks[0].pri = 80;
        p.runq_add(0, 0);
        assert!(p.on_curr(0) && matches!(p.tasks[0].st, St::Queued { idx: 20, .. }));
    }

    #[test]
    fn slice_zero_threads_are_resliced_into_next() {
        let mut p = ule1("ule1", 1);
        let batch = |nice, slice| T { runtime: 1000 * TICK, slptime: 100 * TICK, nice, slice, ..T::default() };
        // Running nice -20 thread (counted, not queued), queued nice 5 thread with slice 0.
        p.tasks = vec![batch(-20, 10), batch(5, 0)];
        for id in 0..2 {
            p.sched_priority(id);
            let t = &mut p.tasks[id as usize];
            t.pri = t.user_pri;
            p.load_add(id, 0);
        }
        p.runq_add(1, 0);
        // d = 25 > 19 and nice != 0: re-sliced to 0, moved to next; the swap
        // finds only it, re-sliced to 0 again: the CPU stays idle.
        assert_eq!(p.choose(0), None);
        assert_eq!(p.tasks[1].slice, 0);
        assert!(matches!(p.tasks[1].st, St::Queued { .. }));
        // The nice -20 thread sleeps: nicemin becomes 5 and the thread gets slice_max.
        p.stopping(&mut TestBed::new(1, 1000).cx(), 0, 0, Stop::Sleep { io: false });
        assert_eq!(p.choose(0), Some(1));
        assert_eq!(p.tasks[1].slice, 142);
    }

    #[test]
    fn tick_expires_the_slice_and_long_sleep_resets_history() {
        let mut p = ule1("ule1", 1);
        let mut tb = TestBed::new(1, 1000);
        p.task_new(&mut tb.cx(), 0, 0, None);
        p.enqueue(&mut tb.cx(), 0, 0, &wake_new());
        assert_eq!(p.pick_next(&mut tb.cx(), 0), Some(0));
        assert_eq!(p.tasks[0].slice, 1, "first slice: one tick");
        assert!(p.tick(&mut tb.cx(), 0, Some(0)), "one tick ends it");
        // Score 95ish -> batch; alone on its CPU: nicemin 0, d 0: slice_max.
        assert_eq!(p.tasks[0].slice, 142);
        for _ in 0..141 {
            assert!(!p.tick(&mut tb.cx(), 0, Some(0)));
        }
        assert!(p.tick(&mut tb.cx(), 0, Some(0)));
        assert_eq!(p.tasks[0].runtime, 143 * TICK);
        // A sleep of 5 s or more: slp = MAX, run = 1 -> score 0, interactive.
        p.stopping(&mut tb.cx(), 0, 0, Stop::Sleep { io: false });
        tb.now += 6_000_000_000;
        let w = Wake { kind: WakeKind::Timer, prev_cpu: 0, waker_cpu: None };
        p.select_cpu(&mut tb.cx(), 0, &w);
        p.enqueue(&mut tb.cx(), 0, 0, &w);
        assert_eq!((p.tasks[0].slptime, p.tasks[0].runtime), (p.slp_run_max, 1));
        assert_eq!(p.tasks[0].user_pri, 160);
    }

    #[test]
    fn fork_scales_history_gives_one_tick_and_charges_the_parent() {
        let mut p = ule1("ule1", 1);
        let mut tb = TestBed::new(1, 1000);
        p.task_new(&mut tb.cx(), 0, 0, None);
        p.tasks[0].runtime = 1000 * TICK;
        p.tasks[0].slptime = 3000 * TICK;
        p.task_new(&mut tb.cx(), 1, 0, Some(0));
        // Sum 4 s > 0.5 s: divided by 4000/500 = 8.
        assert_eq!((p.tasks[1].runtime, p.tasks[1].slptime, p.tasks[1].slice), (125 * TICK, 375 * TICK, 1));
        assert_eq!(p.tasks[0].runtime, 1001 * TICK);
        p.task_exit(&mut tb.cx(), 1, Some(0));
        assert_eq!(p.tasks[0].runtime, 1126 * TICK, "the child's runtime, not its sleep");
    }

    #[test]
    fn busy_local_wakeup_transfers_to_an_idle_cpu_and_counts_the_tunable_costs() {
        let mut p = ule1("ule1:switch_locks=7,ipi_locks=3", 2);
        let mut tb = TestBed::new(2, 1000);
        for id in 0..3 {
            p.task_new(&mut tb.cx(), id, 0, None);
        }
        let w = wake_new();
        let c0 = p.select_cpu(&mut tb.cx(), 0, &w);
        p.enqueue(&mut tb.cx(), 0, c0, &w);
        assert_eq!(c0, 0, "load 0: stays home");
        tb.ops.take();
        assert_eq!(p.pick_next(&mut tb.cx(), 0), Some(0));
        assert_eq!(tb.ops.take().locks, 1 + 7, "sched_lock plus the switch's extra");
        tb.cpus[0].curr = Some(0);
        // Load 1 on CPU 0: not above 1, the second thread queues there.
        assert_eq!(p.select_cpu(&mut tb.cx(), 1, &w), 0);
        p.enqueue(&mut tb.cx(), 1, 0, &w);
        tb.ops.take();
        // Load 2: the third goes to idle CPU 1, whose IPI costs ipi_locks more.
        let c = p.select_cpu(&mut tb.cx(), 2, &w);
        assert_eq!(c, 1);
        p.enqueue(&mut tb.cx(), 2, c, &w);
        let ops = tb.ops.take();
        assert_eq!((ops.scanned, ops.locks), (2, 1 + 3));
        assert_eq!((p.kseqs[0].load, p.kseqs[1].load), (2, 1));
        // Without the tunables the same decisions cost only sched_lock.
        let mut q = ule1("ule1", 2);
        let mut tb = TestBed::new(2, 1000);
        q.task_new(&mut tb.cx(), 0, 0, None);
        q.enqueue(&mut tb.cx(), 0, 0, &w);
        tb.ops.take();
        q.pick_next(&mut tb.cx(), 0);
        assert_eq!(tb.ops.take().locks, 1);
    }

    #[test]
    fn idle_cpu_steals_next_first_and_balance_halves_the_difference() {
        let mut p = ule1("ule1", 2);
        let mut tb = TestBed::new(2, 1000);
        let batch = T { runtime: 1000 * TICK, slptime: 100 * TICK, slice: 5, ..T::default() };
        let inter = T { runtime: TICK, slptime: 900 * TICK, slice: 5, ..T::default() };
        p.tasks = vec![inter.clone(), batch.clone(), batch.clone(), batch.clone(), batch];
        for id in 0..5 {
            p.sched_priority(id);
            let t = &mut p.tasks[id as usize];
            t.pri = t.user_pri;
            p.load_add(id, 0);
            p.runq_add(id, 0);
        }
        // CPU 1 is idle: it steals from next (a batch thread) before curr's interactive one.
        assert_eq!(p.pick_next(&mut tb.cx(), 1), Some(1));
        assert_eq!((p.kseqs[0].load, p.kseqs[1].load), (4, 1));
        // Balance: diff 3 -> ceil(3/2) = 2 threads move to CPU 1.
        p.balance(&mut tb.cx());
        assert_eq!((p.kseqs[0].load, p.kseqs[1].load), (2, 3));
        // Diff 1: nothing moves.
        p.balance(&mut tb.cx());
        assert_eq!((p.kseqs[0].load, p.kseqs[1].load), (2, 3));
    }

    #[test]
    fn bad_slices_are_refused_with_the_fix() {
        let e = Ule1::new(&Spec::parse("ule1:slice_min=50ms,slice_max=20ms", "policy").unwrap(), 1, 1000)
            .err()
            .expect("refused");
        assert!(e.to_string().contains("slice_max") && e.to_string().contains("lower slice_min"), "{e}");
        let e = Ule1::new(&Spec::parse("ule1:slice_min=1s", "policy").unwrap(), 1, 1000).err().expect("refused");
        assert!(e.to_string().contains("key 'slice_min'") && e.to_string().contains("142 ticks"), "{e}");
    }
}
