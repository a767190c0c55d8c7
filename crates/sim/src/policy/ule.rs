//! FreeBSD ULE 2/3 (FreeBSD 7 → current), the default ULE model.
//!
//! Source: schedulers.md §2a (`sys/kern/sched_ule.c`, `sys/sys/priority.h`, `sys/sys/runq.h`).
//! - Interactivity score 0..100 from `runtime`/`slptime` (hz ticks ≪ 10),
//!   with the history limit at SLP_RUN_MAX = 5 s (cut to 1/1, halve, or ×4/5).
//! - `s = max(0, score + nice)`; `s < 30` → interactive `pri = 120 + s`
//!   (the kernel's `32/30·s` in integer math); otherwise batch
//!   `pri = 172 + min(%CPU ticks / (roundup(window, 32)/32), 31) + nice`
//!   over a ~10 s %CPU window (`sched_pctcpu_update`).
//! - Per-CPU `tdq`: a realtime runq (pri < 152, interactive threads, strict
//!   priority, 4 priorities per queue) and the timeshare calendar queue
//!   (bucket `64·(pri − 152)/72` after `idx`, removal from `ridx`; `idx`
//!   advances by one per stathz tick once `ridx` caught up, and `ridx` moves
//!   on when the last thread leaves its bucket: `tdq_runq_rem` →
//!   `runq_remove_idx`, kern_switch.c, not in schedulers.md §2a).
//! - stathz accounting (127 Hz derived from HZ, as in `4bsd`): per stat
//!   tick the running thread gets `runtime += tickincr` (`hz≪10/stathz`), its
//!   priority is recomputed, and its slice expires after `tdq_slice()` =
//!   `sched_slice` (stathz/10) / (load − 1), between `sched_slice/6` and `sched_slice`.
//! - Wakeup: `slptime += sleep` (≥ 1 tick), priority recomputed, slice reset;
//!   a thread woken from an I/O sleep is queued at `min(pri, static_boost 152)`
//!   until it runs. Preemption: locally when `pri < curpri` (NEEDRESCHED at
//!   userret); remotely only an interactive thread preempts a batch one (IPI;
//!   the preempted thread goes back to the head of its queue, SRQ_PREEMPTED).
//! - `sched_pickcpu`: previous CPU if idle and cache-warm, else the least
//!   loaded idle CPU, else the least loaded CPU running worse threads, else
//!   the least loaded; least-loaded compares `load·256 − 64 (previous CPU) −
//!   rand(0..32)`; the waker's CPU wins if it runs only worse threads and is
//!   at most one thread busier.
//! - Idle stealing from the most loaded CPU with `load ≥ steal_thresh` (realtime
//!   runq first, then the calendar from `ridx`); an idle CPU retries every tick.
//!   Periodic balance on CPU 0 every `balance_interval` stat ticks,
//!   randomised to [½, 1½)·interval: move one thread at a time from the most
//!   to the least loaded CPU while they differ by more than one.
//! - Fork: the child copies the history scaled to ≤ 0.5 s and the %CPU
//!   window, slice `tdq_slice − slice_min` used; the parent is charged a tick.
//!   Exit: `parent.runtime += child.runtime`. nice recomputes at once.
//!
//! Scheduler work (cost.rs): per-CPU `tdq`s, each with its lock: a wake-up
//! locks and queues on the chosen CPU (a second lock when the thread changes
//! CPU), each `sched_pickcpu` search examines every CPU; a schedule locks
//! its tdq and picks from the realtime queue or the calendar (1 lock, 1
//! queue), an idle CPU's steal examines every CPU and locks the victim; a
//! preempted thread is requeued; each step of the periodic balance examines
//! every CPU twice and locks both tdqs to move a thread.
//!
//! Simplifications: flat topology (one cache level, no SMT); the %CPU window
//! is updated at stat ticks and at switch-in/out (so queued time is not
//! counted as running); `td_priority` is recomputed on wakeup as in FreeBSD
//! 7–9; timer wakeups count as local to the sleeper's CPU; workload tasks
//! start with no history (score 50, batch) instead of inheriting a
//! launcher's; preemption requests take effect at once.

use super::{ensure, tunables, Ctx, Policy, PolicyInfo, PrioArray, Stop, TaskId, Wake, WakeKind};
use crate::spec::{BuildFor, Scale, Spec, Tunable};
use crate::SimError;
use rand::Rng;

const STATHZ: Tunable =
    Tunable::count("stathz", 127, 1, 10_000, "statistics clock rate (realstathz); accounting and slices run on it");
// A slice of 0 ticks would be no slice; the default is at least 1.
const SLICE: Tunable =
    Tunable::count("slice_stat_ticks", 12, 1, 100_000, "sched_slice in stathz ticks; slice_min is a sixth")
        .scales_with(Scale::StathzTenth);
const INTERACT: Tunable = Tunable::count("interact", 30, 0, 100, "interactivity threshold (kern.sched.interact)");
const STATIC_BOOST: Tunable = Tunable::count(
    "static_boost",
    PRI_MIN_BATCH as u64,
    0,
    255,
    "priority a thread woken from an I/O sleep is queued at; 0 disables",
);
const STEAL_THRESH: Tunable =
    Tunable::count("steal_thresh", 2, 1, 100_000, "an idle CPU steals from a CPU with at least this load");
const BALANCE_INTERVAL: Tunable = Tunable::count(
    "balance_interval",
    127,
    0,
    1_000_000,
    "periodic balance interval in stathz ticks (randomised); 0 disables",
)
.scales_with(Scale::Stathz);
const AFFINITY: Tunable = Tunable::count("affinity_ticks", 1, 0, 1_000_000, "cache affinity per level in hz ticks")
    .scales_with(Scale::HzPerMs);

pub const TUNABLES: &[Tunable] = &[STATHZ, SLICE, INTERACT, STATIC_BOOST, STEAL_THRESH, BALANCE_INTERVAL, AFFINITY];

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "ule",
        summary: "FreeBSD ULE 2/3: interactivity score, per-CPU queues with a timeshare calendar, load-scaled slices",
        priority_quantity: "td_priority 120..223 (lower is better)",
        tunables: tunables(TUNABLES),
    }
}

const PRI_MIN_INTERACT: u32 = 120;
const PRI_MIN_BATCH: u32 = 152;
const PRI_MAX_BATCH: u32 = 223;
const SCHED_PRI_MIN: u32 = 172;
const SCHED_PRI_RANGE: u64 = 32;
const INTERACT_HALF: u64 = 50;
const TICK_SHIFT: u32 = 10;
const NQS: usize = 64;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum St {
    #[default]
    Asleep,
    /// In a runq of this CPU: realtime (index) or calendar (bucket).
    Queued {
        cpu: usize,
        rt: bool,
        idx: usize,
    },
    Running,
    Dead,
}

#[derive(Debug, Clone, Default)]
struct T {
    runtime: u64,
    slptime: u64,
    /// %CPU window: run ticks ≪ 10, last and first update (hz ticks).
    pct_ticks: u64,
    ltick: u64,
    ftick: u64,
    /// Stat ticks of the current slice used.
    slice: u64,
    slptick: Option<u64>,
    io_sleep: bool,
    nice: i32,
    /// `sched_priority` result; `pri` is the current td_priority (boosted while woken from I/O).
    user_pri: u32,
    pri: u32,
    cpu: usize,
    rltick: u64,
    /// The next requeue goes to the head (SRQ_PREEMPTED by a remote IPI).
    preempted: bool,
    st: St,
}

#[derive(Debug, Clone)]
struct Tdq {
    realtime: PrioArray,
    ts: PrioArray,
    idx: usize,
    ridx: usize,
    /// Running plus queued threads.
    load: u64,
    curr: Option<TaskId>,
    stat_acc: u64,
}

impl Tdq {
    /// `tdq_runq_rem` → `runq_remove_idx(…, &tdq_ridx)`: once the last thread
    /// leaves the calendar bucket at `ridx` while `idx` is ahead, removal moves
    /// on to the next bucket. Without this `ridx` would advance only at a stat
    /// tick that finds its bucket empty, and a thread queued there at every
    /// tick would hold `idx` one ahead for good: the calendar would freeze into
    /// strict priority order and starve the worst batch threads.
    fn drained(&mut self, bucket: usize) {
        if self.idx != self.ridx && self.ridx == bucket && self.ts.lists[bucket].is_empty() {
            self.ridx = (bucket + 1) % NQS;
        }
    }
}

pub struct Ule {
    stathz: u64,
    hz: u64,
    sched_slice: u64,
    slice_min: u64,
    interact: u64,
    static_boost: u32,
    steal_thresh: u64,
    balance_interval: u64,
    balance_ticks: i64,
    affinity: u64,
    /// `runtime` per stat tick: one stat tick in hz ticks ≪ 10.
    tickincr: u64,
    slp_run_max: u64,
    tdqs: Vec<Tdq>,
    tasks: Vec<T>,
}

impl Ule {
    pub fn new(spec: &Spec, ncpus: usize, hz: u32) -> Result<Self, SimError> {
        let stathz = spec.tunable(&STATHZ)?;
        let at = BuildFor { ncpus, hz, stathz };
        let sched_slice = spec.tunable_for(&SLICE, &at)?;
        let interact = spec.tunable(&INTERACT)?;
        let hz = hz as u64;
        let balance_interval = spec.tunable_for(&BALANCE_INTERVAL, &at)?;
        Ok(Ule {
            stathz,
            hz,
            sched_slice,
            slice_min: (sched_slice / 6).max(1),
            interact,
            static_boost: spec.tunable(&STATIC_BOOST)? as u32,
            steal_thresh: spec.tunable(&STEAL_THRESH)?,
            balance_interval,
            balance_ticks: balance_interval as i64,
            affinity: spec.tunable_for(&AFFINITY, &at)?,
            tickincr: (hz << TICK_SHIFT) / stathz,
            slp_run_max: (hz * 5) << TICK_SHIFT,
            tdqs: vec![
                Tdq {
                    realtime: PrioArray::new(NQS),
                    ts: PrioArray::new(NQS),
                    idx: 0,
                    ridx: 0,
                    load: 0,
                    curr: None,
                    stat_acc: 0,
                };
                ncpus
            ],
            tasks: Vec::new(),
        })
    }

    /// `sched_interact_score`.
    fn score(&self, t: &T) -> u64 {
        let (run, slp) = (t.runtime, t.slptime);
        if self.interact <= INTERACT_HALF && run >= slp {
            return INTERACT_HALF;
        }
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

    /// `sched_pctcpu_update` at hz tick `now`.
    fn pctcpu_update(&mut self, id: TaskId, now: u64, run: bool) {
        let (targ, max) = (10 * self.hz, 11 * self.hz);
        let t = &mut self.tasks[id as usize];
        if now.saturating_sub(t.ltick) >= targ {
            t.pct_ticks = 0;
            t.ftick = now.saturating_sub(targ);
        } else if now.saturating_sub(t.ftick) >= max {
            let span = (t.ltick - t.ftick).max(1);
            t.pct_ticks = (t.pct_ticks / span) * t.ltick.saturating_sub(now - targ);
            t.ftick = now - targ;
        }
        if run {
            t.pct_ticks += (now - t.ltick.min(now)) << TICK_SHIFT;
        }
        t.ltick = now;
    }

    /// `sched_priority`: sets `user_pri`.
    fn priority(&mut self, id: TaskId) {
        let t = &self.tasks[id as usize];
        let s = (self.score(t) as i64 + t.nice as i64).max(0) as u64;
        let pri = if s < self.interact {
            // The kernel's integer order: (32 / interact) * score, i.e. 120 + s at 30.
            (PRI_MIN_INTERACT as u64 + (32 / self.interact) * s) as i64
        } else {
            let total = (t.ltick - t.ftick).max(self.hz);
            let per = total.div_ceil(SCHED_PRI_RANGE);
            let used = ((t.pct_ticks >> TICK_SHIFT) / per.max(1)).min(SCHED_PRI_RANGE - 1);
            (SCHED_PRI_MIN as u64 + used) as i64 + t.nice as i64
        };
        self.tasks[id as usize].user_pri = pri.clamp(PRI_MIN_INTERACT as i64, PRI_MAX_BATCH as i64) as u32;
    }

    /// `tdq_slice` in stat ticks.
    fn tdq_slice(&self, cpu: usize) -> u64 {
        let load = self.tdqs[cpu].load.saturating_sub(1);
        if load >= 6 {
            self.slice_min
        } else if load <= 1 {
            self.sched_slice
        } else {
            self.sched_slice / load
        }
    }

    /// The best priority present on `cpu` (`tdq_lowpri`): 255 when idle.
    fn lowpri(&self, cpu: usize) -> u32 {
        let q = &self.tdqs[cpu];
        let mut p = q.curr.map_or(255, |c| self.tasks[c as usize].pri);
        if let Some(i) = q.realtime.best() {
            p = p.min(i as u32 * 4);
        }
        if !q.ts.is_empty() {
            p = p.min(PRI_MIN_BATCH);
        }
        p
    }

    /// `tdq_runq_add` (the load is counted by the caller).
    fn runq_add(&mut self, id: TaskId, cpu: usize) {
        let t = &mut self.tasks[id as usize];
        let head = std::mem::take(&mut t.preempted);
        let pri = t.pri;
        t.cpu = cpu;
        let q = &mut self.tdqs[cpu];
        let (rt, idx) = if pri < PRI_MIN_BATCH {
            (true, pri as usize / 4)
        } else if head {
            (false, q.ridx)
        } else {
            let b =
                NQS * (pri.min(PRI_MAX_BATCH) - PRI_MIN_BATCH) as usize / (PRI_MAX_BATCH - PRI_MIN_BATCH + 1) as usize;
            let mut i = (b + q.idx) % NQS;
            if q.ridx != q.idx && i == q.ridx {
                i = (i + NQS - 1) % NQS;
            }
            (false, i)
        };
        let arr = if rt { &mut q.realtime } else { &mut q.ts };
        if head {
            arr.push_front(idx, id);
        } else {
            arr.push_back(idx, id);
        }
        self.tasks[id as usize].st = St::Queued { cpu, rt, idx };
    }

    fn runq_remove(&mut self, id: TaskId) {
        if let St::Queued { cpu, rt, idx } = self.tasks[id as usize].st {
            let q = &mut self.tdqs[cpu];
            if rt {
                q.realtime.remove(idx, id);
            } else {
                q.ts.remove(idx, id);
                q.drained(idx);
            }
        }
    }

    /// `tdq_choose` without taking the thread off: (realtime?, queue index).
    fn choose(&self, cpu: usize) -> Option<(bool, usize)> {
        let q = &self.tdqs[cpu];
        if let Some(i) = q.realtime.best() {
            return Some((true, i));
        }
        q.ts.map.first_from(q.ridx).or_else(|| q.ts.best()).map(|i| (false, i))
    }

    fn take(&mut self, cpu: usize) -> Option<TaskId> {
        let (rt, i) = self.choose(cpu)?;
        let q = &mut self.tdqs[cpu];
        if rt {
            return q.realtime.pop_at(i);
        }
        let id = q.ts.pop_at(i);
        q.drained(i);
        id
    }

    fn queued(&self, cpu: usize) -> usize {
        self.tdqs[cpu].realtime.len + self.tdqs[cpu].ts.len
    }

    /// Move one queued thread from `src` to `dst` (`tdq_move`).
    fn move_one(&mut self, src: usize, dst: usize) -> Option<TaskId> {
        let id = self.take(src)?;
        self.tdqs[src].load -= 1;
        self.tdqs[dst].load += 1;
        self.runq_add(id, dst);
        Some(id)
    }

    /// Least loaded CPU among those passing `ok`, by `load·256 − 64 (prefer) − rand(0..32)`.
    fn least_loaded(&self, cx: &mut Ctx, ok: impl Fn(&Self, usize) -> bool, prefer: usize) -> Option<usize> {
        cx.work(self.tdqs.len() as u64, 0, 0);
        (0..self.tdqs.len()).filter(|&c| ok(self, c)).min_by_key(|&c| {
            let l = (self.tdqs[c].load * 256) as i64 - if c == prefer { 64 } else { 0 };
            (l - cx.rng.gen_range(0..32i64), c)
        })
    }

    /// `sched_balance`: one thread at a time from the most to the least loaded CPU.
    fn balance(&mut self, cx: &mut Ctx) {
        let n = self.tdqs.len();
        let mut received = vec![false; n];
        for _ in 0..n * n {
            cx.work(2 * n as u64, 0, 0);
            let Some(high) = (0..n)
                .filter(|&c| !received[c] && self.tdqs[c].load >= 2 && self.queued(c) > 0)
                .max_by_key(|&c| (self.tdqs[c].load, std::cmp::Reverse(c)))
            else {
                return;
            };
            let hl = self.tdqs[high].load;
            let Some(low) = (0..n).filter(|&c| self.tdqs[c].load + 1 < hl).min_by_key(|&c| (self.tdqs[c].load, c))
            else {
                return;
            };
            cx.work(0, 2, 2);
            self.move_one(high, low);
            received[low] = true;
            if cx.idle(low) {
                cx.kick.push(low);
            }
        }
    }

    fn stat_tick(&mut self, cx: &mut Ctx, cpu: usize, curr: Option<TaskId>) -> bool {
        let q = &mut self.tdqs[cpu];
        if q.idx == q.ridx {
            q.idx = (q.idx + 1) % NQS;
            if q.ts.lists[q.ridx].is_empty() {
                q.ridx = q.idx;
            }
        }
        if cpu == 0 && self.tdqs.len() > 1 && self.balance_interval > 0 {
            self.balance_ticks -= 1;
            if self.balance_ticks <= 0 {
                self.balance(cx);
                let iv = self.balance_interval;
                self.balance_ticks = ((iv / 2).max(1) + cx.rng.gen_range(0..iv)) as i64;
            }
        }
        let Some(id) = curr else { return false };
        let now = cx.jiffies();
        self.pctcpu_update(id, now, true);
        self.tasks[id as usize].runtime += self.tickincr;
        self.interact_update(id);
        self.priority(id);
        let slice = self.tdq_slice(cpu);
        let t = &mut self.tasks[id as usize];
        t.pri = t.user_pri;
        t.slice += 1;
        if t.slice >= slice {
            t.slice = 0;
            return true;
        }
        false
    }

    /// Whether `cpu` is the local CPU of this wakeup (NEEDRESCHED there, no IPI).
    fn local(w: &Wake, cpu: usize) -> bool {
        match w.waker_cpu {
            Some(c) => c == cpu,
            None => w.prev_cpu == cpu,
        }
    }
}

impl Policy for Ule {
    fn priority(&self, t: TaskId, _now: u64) -> i64 {
        self.tasks[t as usize].pri as i64
    }

    fn task_new(&mut self, cx: &mut Ctx, id: TaskId, nice: i32, parent: Option<TaskId>) {
        ensure(&mut self.tasks, id);
        let now = cx.jiffies();
        let mut t = T { nice, ltick: now, ftick: now, ..Default::default() };
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
            t.runtime = run;
            t.slptime = slp;
            (t.pct_ticks, t.ltick, t.ftick) = (pt.pct_ticks, pt.ltick, pt.ftick);
            t.cpu = pt.cpu;
            t.slice = self.tdq_slice(pt.cpu).saturating_sub(self.slice_min);
            self.tasks[p as usize].runtime += self.tickincr;
            self.interact_update(p);
            self.priority(p);
            let pp = &mut self.tasks[p as usize];
            pp.pri = pp.user_pri;
        }
        self.tasks[id as usize] = t;
        self.priority(id);
        let t = &mut self.tasks[id as usize];
        t.pri = t.user_pri;
    }

    fn select_cpu(&mut self, cx: &mut Ctx, id: TaskId, w: &Wake) -> usize {
        let n = self.tdqs.len();
        if n == 1 {
            return 0;
        }
        if !matches!(w.kind, WakeKind::New { .. }) {
            // The priority the thread will be queued at decides where it can preempt.
            self.wake_prepare(cx, id);
        }
        let pri = self.tasks[id as usize].pri;
        let prev = w.prev_cpu;
        let now = cx.jiffies();
        let idle = |s: &Self, c: usize| s.lowpri(c) > PRI_MAX_BATCH;
        let warm = self.tasks[id as usize].rltick + 2 * self.affinity > now;
        let mut cpu = if idle(self, prev) && warm {
            prev
        } else if let Some(c) = self.least_loaded(cx, idle, prev) {
            c
        } else if let Some(c) = self.least_loaded(cx, |s, c| s.lowpri(c) > pri, prev) {
            c
        } else {
            self.least_loaded(cx, |_, _| true, prev).unwrap_or(prev)
        };
        let me = w.waker_cpu.unwrap_or(prev);
        if me != cpu && self.lowpri(me) > pri && !idle(self, cpu) && self.tdqs[me].load <= self.tdqs[cpu].load + 1 {
            cpu = me;
        }
        cpu
    }

    fn enqueue(&mut self, cx: &mut Ctx, id: TaskId, cpu: usize, w: &Wake) {
        if !matches!(w.kind, WakeKind::New { .. }) && self.tasks[id as usize].slptick.is_some() {
            self.wake_prepare(cx, id);
        }
        cx.work(0, 1, 1 + u64::from(cpu != w.prev_cpu));
        self.tdqs[cpu].load += 1;
        self.runq_add(id, cpu);
    }

    fn wakeup_preempt(&mut self, _cx: &mut Ctx, cpu: usize, curr: TaskId, id: TaskId, w: &Wake) -> bool {
        let (pri, cpri) = (self.tasks[id as usize].pri, self.tasks[curr as usize].pri);
        if pri >= cpri {
            return false;
        }
        if Self::local(w, cpu) {
            return true;
        }
        // sched_shouldpreempt(remote): an interactive thread IPIs a CPU running a batch one.
        if pri < PRI_MIN_BATCH && cpri >= PRI_MIN_BATCH {
            self.tasks[curr as usize].preempted = true;
            return true;
        }
        false
    }

    fn pick_next(&mut self, cx: &mut Ctx, cpu: usize) -> Option<TaskId> {
        cx.work(0, 1, 1);
        let id = match self.take(cpu) {
            Some(id) => id,
            None => {
                // tdq_trysteal / tdq_idled: the most loaded CPU with something to give.
                let n = self.tdqs.len();
                cx.work(n as u64, 1, 1);
                let src = (0..n)
                    .filter(|&c| c != cpu && self.tdqs[c].load >= self.steal_thresh && self.queued(c) > 0)
                    .max_by_key(|&c| (self.tdqs[c].load, std::cmp::Reverse(c)))?;
                let id = self.move_one(src, cpu)?;
                self.runq_remove(id);
                id
            }
        };
        let now = cx.jiffies();
        self.pctcpu_update(id, now, false);
        let t = &mut self.tasks[id as usize];
        t.st = St::Running;
        t.cpu = cpu;
        // userret: back to the user priority (ends the static boost).
        t.pri = t.user_pri;
        self.tdqs[cpu].curr = Some(id);
        Some(id)
    }

    fn stopping(&mut self, cx: &mut Ctx, cpu: usize, id: TaskId, why: Stop) {
        let now = cx.jiffies();
        self.pctcpu_update(id, now, true);
        self.tdqs[cpu].curr = None;
        self.tasks[id as usize].rltick = now;
        match why {
            Stop::Preempt | Stop::Yield => {
                cx.work(0, 1, 0);
                self.runq_add(id, cpu)
            }
            Stop::Sleep { io } => {
                self.tdqs[cpu].load -= 1;
                let t = &mut self.tasks[id as usize];
                t.st = St::Asleep;
                t.slptick = Some(now);
                t.io_sleep = io;
                t.preempted = false;
            }
            Stop::Exit => {
                self.tdqs[cpu].load -= 1;
                self.tasks[id as usize].st = St::Dead;
            }
        }
    }

    fn tick(&mut self, cx: &mut Ctx, cpu: usize, curr: Option<TaskId>) -> bool {
        let mut resched = false;
        self.tdqs[cpu].stat_acc += self.stathz;
        while self.tdqs[cpu].stat_acc >= self.hz {
            self.tdqs[cpu].stat_acc -= self.hz;
            resched |= self.stat_tick(cx, cpu, curr);
        }
        resched
    }

    fn set_nice(&mut self, cx: &mut Ctx, id: TaskId, nice: i32, _running_on: Option<usize>) -> bool {
        cx.work(0, 0, 1);
        self.tasks[id as usize].nice = nice;
        self.priority(id);
        let t = &mut self.tasks[id as usize];
        let boosted = t.pri < t.user_pri && t.io_sleep;
        if !boosted {
            t.pri = t.user_pri;
        }
        if let St::Queued { cpu, .. } = t.st {
            self.runq_remove(id);
            self.runq_add(id, cpu);
        }
        false
    }

    fn task_exit(&mut self, _cx: &mut Ctx, id: TaskId, parent: Option<TaskId>) {
        if let Some(p) = parent {
            self.tasks[p as usize].runtime += self.tasks[id as usize].runtime;
            self.interact_update(p);
            self.priority(p);
        }
    }

    fn timeslice_ns(&self, _nice: i32) -> u64 {
        // Two threads on one CPU: load − 1 = 1, so the full sched_slice at every nice.
        self.sched_slice * 1_000_000_000 / self.stathz
    }

    fn state_quantities(&self) -> &'static [super::StateVar] {
        const VARS: &[super::StateVar] = &[
            super::StateVar::new(
                "td_priority",
                "",
                Some(true),
                "td_priority 120..223 (a kernel priority after an I/O sleep until it runs)",
            ),
            super::StateVar::new(
                "score",
                "",
                Some(true),
                "interactivity score 0..100 from runtime and slptime; below interact it is interactive",
            ),
            super::StateVar::new("runtime", "ns", None, "run history (ts_runtime) the score weighs"),
            super::StateVar::new("slptime", "ns", None, "sleep history (ts_slptime) the score weighs"),
            super::StateVar::new("user_pri", "", Some(true), "user priority from the score, or from %CPU when batch"),
            super::StateVar::new("slice", "ticks", None, "stat ticks used of its slice"),
        ];
        VARS
    }

    fn state(&self, t: TaskId, now: u64, out: &mut [i64]) {
        // Not the inherent `priority` (sched_priority), which recomputes it.
        out[0] = Policy::priority(self, t, now);
        let s = &self.tasks[t as usize];
        // The histories are hz ticks << TICK_SHIFT.
        let ns = |v: u64| ((v as u128 * 1_000_000_000 / self.hz as u128) >> TICK_SHIFT) as i64;
        out[1] = self.score(s) as i64;
        out[2] = ns(s.runtime);
        out[3] = ns(s.slptime);
        out[4] = i64::from(s.user_pri);
        out[5] = s.slice as i64;
    }
}

impl Ule {
    /// `sched_wakeup` bookkeeping, once per wakeup: sleep history, priority,
    /// slice reset and the I/O static boost.
    fn wake_prepare(&mut self, cx: &mut Ctx, id: TaskId) {
        let now = cx.jiffies();
        let Some(slptick) = self.tasks[id as usize].slptick.take() else { return };
        if now != slptick {
            self.tasks[id as usize].slptime += (now - slptick) << TICK_SHIFT;
            self.interact_update(id);
            self.pctcpu_update(id, now, false);
        }
        self.priority(id);
        let boost = self.static_boost;
        let t = &mut self.tasks[id as usize];
        t.slice = 0;
        t.pri = t.user_pri;
        if t.io_sleep && boost > 0 {
            t.pri = t.pri.min(boost);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::TestBed;

    fn ule(spec: &str, ncpus: usize) -> Ule {
        Ule::new(&Spec::parse(spec, "policy").unwrap(), ncpus, 1000).unwrap()
    }

    fn wake_new() -> Wake {
        Wake { kind: WakeKind::New { parent: None }, prev_cpu: 0, waker_cpu: None }
    }

    const TICK: u64 = 1 << TICK_SHIFT;

    #[test]
    fn score_follows_the_formula() {
        let p = ule("ule", 1);
        let t = |run: u64, slp: u64| T { runtime: run * TICK, slptime: slp * TICK, ..Default::default() };
        // Sleeper, 1:9 -> run / (slp/50) = 100 / (900/50) = 5 (integer division).
        assert_eq!(p.score(&t(100, 900)), 100 * TICK / (900 * TICK / 50));
        assert_eq!(p.score(&t(100, 900)), 5);
        // run >= slp takes the fast path: 50 for any hog (interact 30 <= 50).
        assert_eq!(p.score(&t(1000, 0)), 50);
        assert_eq!(p.score(&t(0, 0)), 50);
        // With interact above half the slow path shows: hog 1000:100 -> 50 + (50 - 100/20) = 95.
        let q = ule("ule[interact=60]", 1);
        assert_eq!(q.score(&t(1000, 100)), 95);
        assert_eq!(q.score(&t(0, 0)), 0);
    }

    #[test]
    fn history_limit_has_three_regimes() {
        let mut p = ule("ule", 1);
        let max = p.slp_run_max; // 5 s = 5000 ticks << 10
        p.tasks = vec![T { runtime: max * 3, slptime: 10, ..Default::default() }];
        p.interact_update(0);
        assert_eq!((p.tasks[0].runtime, p.tasks[0].slptime), (max, 1), "> 2 MAX: dominant to MAX, other 1");
        p.tasks[0] = T { runtime: max, slptime: max / 4 + 10, ..Default::default() };
        p.interact_update(0);
        assert_eq!((p.tasks[0].runtime, p.tasks[0].slptime), (max / 2, (max / 4 + 10) / 2), "> 1.2 MAX: halve");
        p.tasks[0] = T { runtime: max, slptime: 5, ..Default::default() };
        p.interact_update(0);
        assert_eq!((p.tasks[0].runtime, p.tasks[0].slptime), (max / 5 * 4, 4), "else x 4/5");
    }

    #[test]
    fn interactive_sleeper_and_hog_priorities() {
        let mut p = ule("ule", 1);
        let mut tb = TestBed::new(1, 1000);
        // A 1 ms run / 9 ms sleep task for 2 s; its score settles at 50*1/9 = 5.5
        // -> 5 (integer) give or take a point of tick rounding: pri 120+5.
        p.task_new(&mut tb.cx(), 0, 0, None);
        p.enqueue(&mut tb.cx(), 0, 0, &wake_new());
        for _ in 0..200 {
            assert_eq!(p.pick_next(&mut tb.cx(), 0), Some(0));
            tb.now += 1_000_000;
            p.tick(&mut tb.cx(), 0, Some(0));
            p.stopping(&mut tb.cx(), 0, 0, Stop::Sleep { io: false });
            tb.now += 9_000_000;
            let w = Wake { kind: WakeKind::Timer, prev_cpu: 0, waker_cpu: None };
            p.select_cpu(&mut tb.cx(), 0, &w);
            p.enqueue(&mut tb.cx(), 0, 0, &w);
        }
        let pri = p.tasks[0].pri;
        assert!((124..=126).contains(&pri), "sleeper pri {pri}");
        assert!(matches!(p.tasks[0].st, St::Queued { rt: true, .. }), "interactive threads use the realtime runq");
        // A hog running alone for 2 s: score 50 (batch), %CPU 100 % -> 172 + 31 = 203.
        let mut h = ule("ule", 1);
        let mut tb = TestBed::new(1, 1000);
        h.task_new(&mut tb.cx(), 0, 0, None);
        h.enqueue(&mut tb.cx(), 0, 0, &wake_new());
        h.pick_next(&mut tb.cx(), 0);
        for _ in 0..2000 {
            tb.now += 1_000_000;
            if h.tick(&mut tb.cx(), 0, Some(0)) {
                h.stopping(&mut tb.cx(), 0, 0, Stop::Preempt);
                h.pick_next(&mut tb.cx(), 0);
            }
        }
        assert_eq!(h.score(&h.tasks[0]), 50);
        assert_eq!(h.tasks[0].pri, 203);
        // nice +10 shifts the batch priority by 10; nice -20 makes the hog's
        // score 50-20 = 30, still not below the threshold 30.
        h.set_nice(&mut tb.cx(), 0, 10, Some(0));
        assert_eq!(h.tasks[0].pri, 213);
        h.set_nice(&mut tb.cx(), 0, -20, Some(0));
        assert_eq!(h.tasks[0].pri, 203 - 20);
    }

    #[test]
    fn slice_shrinks_with_load() {
        let mut p = ule("ule", 1);
        // sched_slice 12 stat ticks, slice_min 2; tdq_slice = 12 / (load - 1).
        let expect = [(1, 12), (2, 12), (3, 6), (4, 4), (5, 3), (6, 2), (7, 2), (50, 2)];
        for (load, slice) in expect {
            p.tdqs[0].load = load;
            assert_eq!(p.tdq_slice(0), slice, "load {load}");
        }
        assert_eq!(p.timeslice_ns(-20), 12 * 1_000_000_000 / 127);
        assert_eq!(p.timeslice_ns(19), p.timeslice_ns(0));
    }

    #[test]
    fn calendar_places_better_batch_threads_nearer_the_head() {
        let mut p = ule("ule", 1);
        p.tasks = vec![T::default(); 3];
        (p.tdqs[0].idx, p.tdqs[0].ridx) = (10, 10);
        for (id, pri) in [(0, 200), (1, 160), (2, 152)] {
            p.tasks[id as usize].pri = pri;
            p.runq_add(id, 0);
        }
        // Buckets 64*(pri-152)/72 after idx 10: 200 -> 42+10, 160 -> 7+10, 152 -> 0+10.
        assert_eq!(p.tasks[0].st, St::Queued { cpu: 0, rt: false, idx: 52 });
        assert_eq!(p.tasks[1].st, St::Queued { cpu: 0, rt: false, idx: 17 });
        assert_eq!(p.tasks[2].st, St::Queued { cpu: 0, rt: false, idx: 10 });
        assert_eq!([p.take(0), p.take(0), p.take(0)], [Some(2), Some(1), Some(0)]);
        // Removal moved on to ridx 20 while idx stayed 10: the 152 thread lands in
        // bucket 10, behind ridx, so the 200 thread (bucket 52) runs first, then the scan wraps.
        p.tdqs[0].ridx = 20;
        p.runq_add(2, 0);
        p.runq_add(0, 0);
        assert_eq!(p.take(0), Some(0));
        assert_eq!(p.take(0), Some(2));
    }

    #[test]
    fn removal_index_moves_on_when_its_bucket_drains() {
        // tdq_runq_rem → runq_remove_idx(&ridx): only while idx is ahead, only
        // when the bucket at ridx empties, and by one bucket.
        let mut p = ule("ule", 1);
        p.tasks = vec![T::default(); 3];
        (p.tdqs[0].idx, p.tdqs[0].ridx) = (12, 10);
        for id in 0..3 {
            p.tasks[id as usize].pri = 152;
            p.runq_add(id, 0);
        }
        // Bucket 0 after idx 12 is 12: the three share it; put one at ridx itself.
        p.runq_remove(2);
        p.tdqs[0].ts.push_back(10, 2);
        p.tasks[2].st = St::Queued { cpu: 0, rt: false, idx: 10 };
        assert_eq!(p.take(0), Some(2), "the scan starts at ridx");
        assert_eq!(p.tdqs[0].ridx, 11, "its bucket drained: ridx moves on by one");
        assert_eq!(p.take(0), Some(0));
        assert_eq!(p.tdqs[0].ridx, 11, "a bucket other than ridx's drains nothing");
        // Caught up (idx == ridx): removal leaves ridx alone; the stat tick moves both.
        (p.tdqs[0].idx, p.tdqs[0].ridx) = (12, 12);
        assert_eq!(p.take(0), Some(1));
        assert_eq!((p.tdqs[0].idx, p.tdqs[0].ridx), (12, 12));
    }

    #[test]
    fn fork_scales_history_and_charges_the_parent() {
        let mut p = ule("ule", 1);
        let mut tb = TestBed::new(1, 1000);
        p.task_new(&mut tb.cx(), 0, 0, None);
        p.tasks[0].runtime = 1000 * TICK;
        p.tasks[0].slptime = 3000 * TICK;
        p.task_new(&mut tb.cx(), 1, 0, Some(0));
        // Sum 4 s > 0.5 s: divided by 4000/500 = 8.
        assert_eq!((p.tasks[1].runtime, p.tasks[1].slptime), (125 * TICK, 375 * TICK));
        assert_eq!(p.tasks[0].runtime, 1000 * TICK + p.tickincr);
        // Exit returns the child's runtime (not its sleep) to the parent.
        p.task_exit(&mut tb.cx(), 1, Some(0));
        assert_eq!(p.tasks[0].runtime, 1125 * TICK + p.tickincr);
    }

    #[test]
    fn remote_wakeup_preempts_only_batch_for_interactive() {
        let mut p = ule("ule", 2);
        let mut tb = TestBed::new(2, 1000);
        p.tasks = vec![T::default(); 3];
        (p.tasks[0].pri, p.tasks[1].pri, p.tasks[2].pri) = (190, 160, 125);
        let remote = Wake { kind: WakeKind::Sync, prev_cpu: 1, waker_cpu: Some(0) };
        let local = Wake { kind: WakeKind::Sync, prev_cpu: 1, waker_cpu: Some(1) };
        assert!(!p.wakeup_preempt(&mut tb.cx(), 1, 0, 1, &remote), "batch over batch: no IPI");
        assert!(p.wakeup_preempt(&mut tb.cx(), 1, 0, 1, &local), "NEEDRESCHED locally");
        assert!(!p.tasks[0].preempted);
        assert!(p.wakeup_preempt(&mut tb.cx(), 1, 0, 2, &remote), "interactive IPIs a batch CPU");
        assert!(p.tasks[0].preempted, "SRQ_PREEMPTED: requeued at the head");
    }
}
