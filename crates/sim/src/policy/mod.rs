//! The policy interface and the resolver from spec strings to policies.
//!
//! A policy owns its runqueues and per-task state; the engine owns time,
//! CPUs, task programs, preemption and the trace. Callbacks are named after
//! scheduler events (like sched_ext's ops) and return decisions (a CPU, a
//! task to run, "reschedule") that the engine applies, so each policy can be
//! driven directly in unit tests.
//!
//! RT tasks (FIFO/RR) and SCHED_DEADLINE tasks never reach the policy: the
//! engine runs them through the layer in [`rt`], which sits above whichever
//! normal policy is chosen and asks the [`deadline`] class first.

pub mod bfs;
pub mod bsd4;
pub mod cfs;
pub mod deadline;
pub mod eevdf;
pub mod fair;
pub mod fixedprio;
pub mod ingo_ll;
pub mod linux24;
pub mod nicksched;
pub mod o1;
pub mod rt;
pub mod staircase;
pub mod ule;
pub mod ule1;

use crate::cost::OpCounter;
use crate::spec::{BuildFor, Spec, Tunable};
use crate::SimError;
use rand_pcg::Pcg64;

pub type TaskId = u32;

/// What the engine shows a policy about one CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuView {
    /// The task running now (normal or RT), if any.
    pub curr: Option<TaskId>,
    /// The running task is RT (so the CPU is busy for the normal class).
    pub curr_rt: bool,
}

/// Context lent to every callback.
pub struct Ctx<'a> {
    pub now: u64,
    pub hz: u32,
    pub cpus: &'a [CpuView],
    /// The engine's one seeded RNG (ULE's randomised balance and CPU choice use it).
    pub rng: &'a mut Pcg64,
    /// Decision output: CPUs that received work and should pick again if idle.
    pub kick: &'a mut Vec<usize>,
    /// Decision output: set when the policy changed many tasks' priorities at
    /// once (e.g. 4BSD's once-a-second decay in `tick`, Linux 2.4's epoch
    /// recalculation in `pick_next`), so the timeline rescans them.
    pub touched_all: &'a mut bool,
    /// Operation counts of the decision under way (see [`crate::cost`]).
    pub ops: &'a OpCounter,
}

impl Ctx<'_> {
    /// Report scheduler work done by this decision: entries examined one at
    /// a time, run queues touched, locks taken (see [`crate::cost`]).
    pub fn work(&self, scanned: u64, queues: u64, locks: u64) {
        self.ops.add(scanned, queues, locks);
    }
    pub fn ncpus(&self) -> usize {
        self.cpus.len()
    }
    pub fn tick_ns(&self) -> u64 {
        1_000_000_000 / self.hz as u64
    }
    /// Number of whole ticks since time 0 (the kernel's `jiffies`/`ticks`).
    pub fn jiffies(&self) -> u64 {
        self.now / self.tick_ns()
    }
    pub fn idle(&self, cpu: usize) -> bool {
        self.cpus[cpu].curr.is_none()
    }
}

/// Why a task becomes runnable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WakeKind {
    /// A new task. `parent` is the forking task (running on the waker CPU);
    /// `None` for the workload's initial tasks.
    New { parent: Option<TaskId> },
    /// Timer expiry (the end of a timed sleep): interrupt context.
    Timer,
    /// A pipe-like channel wakeup by a task on `waker_cpu` (a sync wakeup).
    Sync,
    /// Any other wakeup by a running task (a condition broadcast).
    Normal,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wake {
    pub kind: WakeKind,
    /// CPU the task last ran on (for a new task, the parent's CPU or 0).
    pub prev_cpu: usize,
    /// CPU of the waking task, if a task woke it.
    pub waker_cpu: Option<usize>,
}

/// Why the running task stops running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Preempted (need_resched): it stays runnable and goes back on a queue.
    Preempt,
    /// sched_yield(): stays runnable.
    Yield,
    /// Blocks. `io` is true for a channel/condition sleep (a kernel sleep
    /// that BSD boosts) and false for a timed sleep.
    Sleep {
        io: bool,
    },
    Exit,
}

/// Information about a tunable, for `schedlab list`, built from its [`Tunable`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunableInfo {
    pub key: &'static str,
    /// The default as the spec grammar reads it ("6ms", "16", "1").
    pub default: String,
    pub help: &'static str,
    /// Its type, range and scaling.
    pub tunable: Tunable,
}

impl From<&Tunable> for TunableInfo {
    fn from(t: &Tunable) -> Self {
        TunableInfo { key: t.key, default: t.fmt_value(t.default), help: t.help, tunable: *t }
    }
}

/// A policy's listed tunables from its table.
pub fn tunables(table: &[Tunable]) -> Vec<TunableInfo> {
    table.iter().map(TunableInfo::from).collect()
}

/// Information about a policy, for `schedlab list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyInfo {
    pub name: &'static str,
    pub summary: &'static str,
    /// The dynamic-priority quantity recorded in the timeline.
    pub priority_quantity: &'static str,
    pub tunables: Vec<TunableInfo>,
}

impl PolicyInfo {
    /// The same, with each scaled default as it is for `ncpus` CPUs at `hz`
    /// (the listed ones hold at [`BuildFor::LISTED`]).
    pub fn for_machine(mut self, ncpus: usize, hz: u32) -> PolicyInfo {
        let stathz =
            self.tunables.iter().find(|t| t.key == "stathz").map_or(BuildFor::LISTED.stathz, |t| t.tunable.default);
        let at = BuildFor { ncpus, hz, stathz };
        for t in &mut self.tunables {
            t.default = t.tunable.fmt_value(t.tunable.default_for(&at));
        }
        self
    }
}

/// One variable of a policy's per-task state, as the timeline records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateVar {
    /// Short, without spaces: what `--quantity` takes ("prio", "sleep_avg").
    pub name: &'static str,
    /// "ns", "ticks", or "" for a level, a count or a flag.
    pub unit: &'static str,
    /// Some(true): lower runs first; Some(false): higher runs first; None: not an order.
    pub lower_runs_first: Option<bool>,
    /// What it is in the model, in one line.
    pub help: &'static str,
}

impl StateVar {
    pub const fn new(
        name: &'static str,
        unit: &'static str,
        lower_runs_first: Option<bool>,
        help: &'static str,
    ) -> Self {
        StateVar { name, unit, lower_runs_first, help }
    }
}

/// A normal-class scheduling policy.
pub trait Policy {
    /// The dynamic priority of task `t` now: the first of [`Policy::state_quantities`].
    fn priority(&self, t: TaskId, now: u64) -> i64;
    /// The per-task state variables the timeline records, the dynamic
    /// priority ([`Policy::priority`]) first: the model's own state only.
    fn state_quantities(&self) -> &'static [StateVar];
    /// Task `t`'s value of each of [`Policy::state_quantities`] now, in
    /// order, into `out` (as long as that list). By default only the priority.
    fn state(&self, t: TaskId, now: u64, out: &mut [i64]) {
        out[0] = self.priority(t, now);
    }
    /// A new task. Called before it is enqueued; the parent (if any) is the
    /// running task on `Wake::waker_cpu`.
    fn task_new(&mut self, cx: &mut Ctx, t: TaskId, nice: i32, parent: Option<TaskId>);
    /// CPU for a waking or new task.
    fn select_cpu(&mut self, cx: &mut Ctx, t: TaskId, w: &Wake) -> usize;
    /// The task becomes runnable on `cpu`.
    fn enqueue(&mut self, cx: &mut Ctx, t: TaskId, cpu: usize, w: &Wake);
    /// Should the woken task `t` preempt `curr` (a normal task) on `cpu`?
    fn wakeup_preempt(&mut self, cx: &mut Ctx, cpu: usize, curr: TaskId, t: TaskId, w: &Wake) -> bool;
    /// Choose the next task for `cpu` (may steal from other CPUs) and make it current.
    fn pick_next(&mut self, cx: &mut Ctx, cpu: usize) -> Option<TaskId>;
    /// The current task of `cpu` stops running. On Preempt/Yield the policy requeues it.
    fn stopping(&mut self, cx: &mut Ctx, cpu: usize, t: TaskId, why: Stop);
    /// Periodic tick on `cpu` with its current normal task, if any. Returns "reschedule".
    fn tick(&mut self, cx: &mut Ctx, cpu: usize, curr: Option<TaskId>) -> bool;
    /// nice changed; `running_on` is the CPU if the task is running. Returns "reschedule that CPU".
    fn set_nice(&mut self, cx: &mut Ctx, t: TaskId, nice: i32, running_on: Option<usize>) -> bool;
    /// A task exited (after `stopping(Exit)`); `parent` is alive if Some.
    fn task_exit(&mut self, _cx: &mut Ctx, _t: TaskId, _parent: Option<TaskId>) {}
    /// The timeslice a nice-`nice` task gets on one CPU shared with one nice-0 hog (for the curve).
    fn timeslice_ns(&self, nice: i32) -> u64;
}

/// Linux `sched_prio_to_weight` (kernel/sched/core.c), index nice + 20.
pub const NICE_TO_WEIGHT: [u64; 40] = [
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904, 3906, 3121, 2501,
    1991, 1586, 1277, 1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
];

pub fn nice_weight(nice: i32) -> u64 {
    NICE_TO_WEIGHT[(nice.clamp(-20, 19) + 20) as usize]
}

/// Linux's tunable scaling factor `1 + ilog2(min(ncpus, 8))`.
pub fn linux_cpu_factor(ncpus: usize) -> u64 {
    let n = ncpus.clamp(1, 8) as u64;
    1 + (63 - n.leading_zeros() as u64)
}

/// Grow a per-task vector so index `t` exists.
pub fn ensure<T: Default + Clone>(v: &mut Vec<T>, t: TaskId) {
    if v.len() <= t as usize {
        v.resize(t as usize + 1, T::default());
    }
}

/// A 256-level bitmap of non-empty queues (priority arrays).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bitmap256([u64; 4]);

impl Bitmap256 {
    pub fn set(&mut self, i: usize) {
        self.0[i >> 6] |= 1 << (i & 63);
    }
    pub fn clear(&mut self, i: usize) {
        self.0[i >> 6] &= !(1 << (i & 63));
    }
    /// Lowest set index.
    pub fn first(&self) -> Option<usize> {
        self.0.iter().enumerate().find(|(_, w)| **w != 0).map(|(i, w)| i * 64 + w.trailing_zeros() as usize)
    }
    /// Lowest set index `>= from`.
    pub fn first_from(&self, from: usize) -> Option<usize> {
        if from >= 256 {
            return None;
        }
        let (w, b) = (from >> 6, from & 63);
        let masked = self.0[w] & (!0u64 << b);
        if masked != 0 {
            return Some(w * 64 + masked.trailing_zeros() as usize);
        }
        self.0[w + 1..]
            .iter()
            .enumerate()
            .find(|(_, x)| **x != 0)
            .map(|(i, x)| (w + 1 + i) * 64 + x.trailing_zeros() as usize)
    }
}

/// A priority array: FIFO lists indexed by priority plus a bitmap.
#[derive(Debug, Clone)]
pub struct PrioArray {
    pub lists: Vec<std::collections::VecDeque<TaskId>>,
    pub map: Bitmap256,
    pub len: usize,
}

impl PrioArray {
    pub fn new(levels: usize) -> Self {
        PrioArray { lists: vec![Default::default(); levels], map: Bitmap256::default(), len: 0 }
    }
    pub fn push_back(&mut self, prio: usize, t: TaskId) {
        self.lists[prio].push_back(t);
        self.map.set(prio);
        self.len += 1;
    }
    pub fn push_front(&mut self, prio: usize, t: TaskId) {
        self.lists[prio].push_front(t);
        self.map.set(prio);
        self.len += 1;
    }
    /// Insert at position `pos` of list `prio` (clamped to its length).
    pub fn insert(&mut self, prio: usize, pos: usize, t: TaskId) {
        let l = &mut self.lists[prio];
        l.insert(pos.min(l.len()), t);
        self.map.set(prio);
        self.len += 1;
    }
    /// The best (lowest) non-empty level. `len` first: an empty array (ULE's
    /// realtime queue, mostly) answers without scanning the bitmap's words.
    pub fn best(&self) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        self.map.first()
    }
    pub fn pop_best(&mut self) -> Option<(usize, TaskId)> {
        let p = self.best()?;
        Some((p, self.pop_at(p)?))
    }
    pub fn pop_at(&mut self, prio: usize) -> Option<TaskId> {
        let l = &mut self.lists[prio];
        let t = l.pop_front()?;
        if l.is_empty() {
            self.map.clear(prio);
        }
        self.len -= 1;
        Some(t)
    }
    /// Remove a specific task; true if found.
    pub fn remove(&mut self, prio: usize, t: TaskId) -> bool {
        let l = &mut self.lists[prio];
        if let Some(i) = l.iter().position(|x| *x == t) {
            l.remove(i);
            if l.is_empty() {
                self.map.clear(prio);
            }
            self.len -= 1;
            true
        } else {
            false
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The O(1) balancer's `move_tasks` scan of one runqueue's `[PrioArray; 2]`
/// (o1, nicksched): the expired array before the active one, best priority
/// first, each list from its tail (the most recently queued, likely cache-cold,
/// first). Removes up to `max` tasks that `can_move` accepts and returns them
/// in scan order, each with whether it came from the expired array.
pub fn take_for_balance(
    arrays: &mut [PrioArray; 2],
    active: usize,
    max: u64,
    mut can_move: impl FnMut(TaskId) -> bool,
) -> Vec<(bool, TaskId)> {
    let mut taken = Vec::new();
    for (from_expired, which) in [(true, 1 - active), (false, active)] {
        let arr = &mut arrays[which];
        let mut prio = arr.best();
        while let Some(p) = prio {
            for i in (0..arr.lists[p].len()).rev() {
                if taken.len() as u64 >= max {
                    return taken;
                }
                let id = arr.lists[p][i];
                if can_move(id) {
                    arr.lists[p].remove(i);
                    arr.len -= 1;
                    taken.push((from_expired, id));
                }
            }
            if arr.lists[p].is_empty() {
                arr.map.clear(p);
            }
            prio = arr.map.first_from(p + 1);
        }
    }
    taken
}

/// Every normal-class policy, in `schedlab list` order.
pub fn policy_infos() -> Vec<PolicyInfo> {
    vec![
        cfs::info(),
        eevdf::info(),
        linux24::info(),
        o1::info(),
        bsd4::info(),
        ule::info(),
        staircase::info(),
        nicksched::info(),
        ingo_ll::info(),
        fixedprio::info(),
        bfs::info(),
        ule1::info(),
    ]
}

/// Build a policy from a parsed spec for `ncpus` CPUs at `hz`.
pub fn build(spec: &Spec, ncpus: usize, hz: u32) -> Result<Box<dyn Policy>, SimError> {
    let info = policy_infos().into_iter().find(|i| i.name == spec.name).ok_or_else(|| SimError::UnknownPolicy {
        name: spec.name.clone(),
        valid: policy_infos().iter().map(|i| i.name).collect::<Vec<_>>().join(", "),
    })?;
    let keys: Vec<&str> = info.tunables.iter().map(|t| t.key).collect();
    spec.check_keys("policy", &keys)?;
    Ok(match spec.name.as_str() {
        "cfs" => Box::new(cfs::Cfs::new(spec, ncpus, hz)?),
        "eevdf" => Box::new(eevdf::Eevdf::new(spec, ncpus, hz)?),
        "linux24" => Box::new(linux24::Linux24::new(spec, ncpus, hz)?),
        "o1" => Box::new(o1::O1::new(spec, ncpus, hz)?),
        "4bsd" => Box::new(bsd4::Bsd4::new(spec, ncpus, hz)?),
        "ule" => Box::new(ule::Ule::new(spec, ncpus, hz)?),
        "staircase" => Box::new(staircase::Staircase::new(spec, ncpus, hz)?),
        "nicksched" => Box::new(nicksched::Nicksched::new(spec, ncpus, hz)?),
        "ingo_ll" => Box::new(ingo_ll::new(spec, ncpus, hz)?),
        "fixedprio" => Box::new(fixedprio::FixedPrio::new(spec, ncpus, hz)?),
        "bfs" => Box::new(bfs::Bfs::new(spec, ncpus, hz)?),
        "ule1" => Box::new(ule1::Ule1::new(spec, ncpus, hz)?),
        _ => unreachable!("policy_infos and build list the same names"),
    })
}

/// A stand-alone context for driving a policy without the engine (tests).
pub struct TestBed {
    pub now: u64,
    pub hz: u32,
    pub cpus: Vec<CpuView>,
    pub rng: Pcg64,
    pub kick: Vec<usize>,
    pub touched_all: bool,
    pub ops: OpCounter,
}

impl TestBed {
    pub fn new(ncpus: usize, hz: u32) -> Self {
        TestBed {
            now: 0,
            hz,
            cpus: vec![CpuView::default(); ncpus],
            rng: rand::SeedableRng::seed_from_u64(1),
            kick: Vec::new(),
            touched_all: false,
            ops: OpCounter::default(),
        }
    }
    pub fn cx(&mut self) -> Ctx<'_> {
        Ctx {
            now: self.now,
            hz: self.hz,
            cpus: &self.cpus,
            rng: &mut self.rng,
            kick: &mut self.kick,
            touched_all: &mut self.touched_all,
            ops: &self.ops,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmap_finds_lowest() {
        let mut b = Bitmap256::default();
        assert_eq!(b.first(), None);
        b.set(130);
        b.set(64);
        assert_eq!(b.first(), Some(64));
        assert_eq!(b.first_from(65), Some(130));
        assert_eq!(b.first_from(131), None);
        b.clear(64);
        assert_eq!(b.first(), Some(130));
    }

    #[test]
    fn balance_scan_takes_expired_first_best_prio_first_from_list_tails() {
        let mut arrays = [PrioArray::new(140), PrioArray::new(140)];
        // Array 1 is active; array 0 expired.
        arrays[1].push_back(110, 1);
        arrays[0].push_back(130, 2);
        arrays[0].push_back(120, 3);
        arrays[0].push_back(120, 4);
        arrays[0].push_back(120, 5);
        // Task 4 is refused (e.g. cache-hot) and stays.
        let taken = take_for_balance(&mut arrays, 1, 4, |id| id != 4);
        assert_eq!(taken, vec![(true, 5), (true, 3), (true, 2), (false, 1)]);
        assert_eq!((arrays[0].len, arrays[0].best(), arrays[1].is_empty()), (1, Some(120), true));
        assert_eq!(take_for_balance(&mut arrays, 1, 0, |_| true), vec![]);
    }

    #[test]
    fn cpu_factor_matches_linux() {
        assert_eq!([1, 2, 3, 4, 8, 64].map(linux_cpu_factor), [1, 2, 2, 3, 4, 4]);
    }
}
