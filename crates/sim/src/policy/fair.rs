//! The SMP half of Linux's fair class, shared by `cfs` and `eevdf`.
//!
//! In the kernel both policies are `kernel/sched/fair.c`: EEVDF replaced the
//! pick and placement, not `select_task_rq_fair` or the load balancer. So the
//! simplified model lives here once: wake-affine plus an idle search, fork to
//! the least-loaded CPU, a newidle pull of one cache-cold task, and a periodic
//! pull of up to half the imbalance (instantaneous weighted load, no PELT).
//! Each policy implements [`FairRq`] over its own runqueues; how a task moves
//! between queues (vruntime renormalisation vs. lag-preserving dequeue and
//! enqueue) stays with the policy.
//!
//! Scheduler work (cost.rs) counted here: the CPUs `select_cpu` examines
//! (fork: all of them; wake-up: the two loads wake_affine compares, then
//! target, prev and the idle search's CPUs), the CPUs a balance examines for
//! the busiest, and to pull, the busiest runqueue's lock and each candidate
//! examined. The policies count their own tree work (⌈log2(n+1)⌉ levels per
//! insert or pick, as Linux's rbtree).

use super::{Ctx, TaskId, Wake, WakeKind};
use crate::spec::{Spec, Tunable};
use crate::SimError;
use std::cmp::Reverse;
use std::collections::BTreeSet;

/// The load-balance tunables both fair policies accept.
#[derive(Debug, Clone, Copy)]
pub struct FairTunables {
    migration_cost: u64,
    busy_factor: u64,
    imbalance_pct: u64,
}

const MIGRATION_COST: Tunable = Tunable::duration(
    "migration_cost",
    500_000,
    0,
    10_000_000_000,
    "a task that ran this recently is cache-hot and not migrated",
)
.was("migration_cost_ns");
const BUSY_FACTOR: Tunable =
    Tunable::count("busy_factor", 16, 1, 1024, "periodic balance interval multiplier on a busy CPU");
const IMBALANCE_PCT: Tunable =
    Tunable::count("imbalance_pct", 117, 100, 1000, "busiest must exceed local load by this percentage to balance");

impl FairTunables {
    /// The load-balance tunables, listed after each fair policy's own.
    pub const TABLE: &'static [Tunable] = &[MIGRATION_COST, BUSY_FACTOR, IMBALANCE_PCT];

    pub fn parse(spec: &Spec) -> Result<Self, SimError> {
        Ok(FairTunables {
            migration_cost: spec.tunable(&MIGRATION_COST)?,
            busy_factor: spec.tunable(&BUSY_FACTOR)?,
            imbalance_pct: spec.tunable(&IMBALANCE_PCT)?,
        })
    }
}

/// A queued task's place in its runqueue: (key, id).
type Key = (i64, TaskId);

/// A fair runqueue's queued tasks in (key, id) order, with the part of
/// `BTreeSet`'s interface the policies use. Queues are usually short (tens
/// of tasks), where a sorted array beats a B-tree's node walks and
/// rebalancing: kept in descending order, the leftmost is its last element,
/// so a pick moves nothing and a wake-up placed near the left shifts little.
/// Past `BIG` tasks it becomes a `BTreeSet` (back below `SMALL`), so long
/// queues keep O(log n) updates. Either way the order, so every result, is
/// the same.
#[derive(Debug, Clone)]
pub enum RunTree {
    /// Descending.
    Small(Vec<Key>),
    Big(BTreeSet<Key>),
}

impl Default for RunTree {
    fn default() -> Self {
        RunTree::Small(Vec::new())
    }
}

impl RunTree {
    const BIG: usize = 256;
    const SMALL: usize = 64;

    pub fn len(&self) -> usize {
        match self {
            RunTree::Small(v) => v.len(),
            RunTree::Big(s) => s.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The leftmost (smallest) entry.
    pub fn first(&self) -> Option<&Key> {
        match self {
            RunTree::Small(v) => v.last(),
            RunTree::Big(s) => s.first(),
        }
    }

    /// Add `k`; false if it was there.
    pub fn insert(&mut self, k: Key) -> bool {
        match self {
            RunTree::Small(v) => {
                // Descending: entries greater than `k` come first. Searched
                // from the end: wake-ups are placed near the leftmost.
                let i = v.iter().rposition(|e| *e >= k).map_or(0, |i| i + 1);
                if i > 0 && v[i - 1] == k {
                    return false;
                }
                v.insert(i, k);
                if v.len() > Self::BIG {
                    *self = RunTree::Big(v.iter().copied().collect());
                }
                true
            }
            RunTree::Big(s) => s.insert(k),
        }
    }

    /// Remove `k`; false if it was not there.
    pub fn remove(&mut self, k: &Key) -> bool {
        match self {
            RunTree::Small(v) => {
                let Ok(i) = v.binary_search_by(|e| k.cmp(e)) else { return false };
                v.remove(i);
                true
            }
            RunTree::Big(s) => {
                let found = s.remove(k);
                self.shrink();
                found
            }
        }
    }

    /// Remove and return the leftmost entry.
    pub fn pop_first(&mut self) -> Option<Key> {
        match self {
            RunTree::Small(v) => v.pop(),
            RunTree::Big(s) => {
                let k = s.pop_first();
                self.shrink();
                k
            }
        }
    }

    fn shrink(&mut self) {
        if let RunTree::Big(s) = self {
            if s.len() < Self::SMALL {
                *self = RunTree::Small(s.iter().rev().copied().collect());
            }
        }
    }

    /// The entries in ascending order.
    pub fn iter(&self) -> RunTreeIter<'_> {
        match self {
            RunTree::Small(v) => RunTreeIter::Small(v.iter().rev()),
            RunTree::Big(s) => RunTreeIter::Big(s.iter()),
        }
    }
}

/// [`RunTree::iter`]'s iterator.
pub enum RunTreeIter<'a> {
    Small(std::iter::Rev<std::slice::Iter<'a, Key>>),
    Big(std::collections::btree_set::Iter<'a, Key>),
}

impl<'a> Iterator for RunTreeIter<'a> {
    type Item = &'a Key;
    fn next(&mut self) -> Option<&'a Key> {
        match self {
            RunTreeIter::Small(i) => i.next(),
            RunTreeIter::Big(i) => i.next(),
        }
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            RunTreeIter::Small(i) => i.size_hint(),
            RunTreeIter::Big(i) => i.size_hint(),
        }
    }
}

impl DoubleEndedIterator for RunTreeIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            RunTreeIter::Small(i) => i.next_back(),
            RunTreeIter::Big(i) => i.next_back(),
        }
    }
}

/// What every fair runqueue keeps, whatever its order: the queued tasks
/// keyed by the policy's order (CFS: vruntime, EEVDF: deadline), the running
/// task, the count and weight of both, and the balancer's state.
#[derive(Debug, Clone, Default)]
pub struct FairQueue {
    /// Queued tasks (curr excluded) by (key, id).
    pub tree: RunTree,
    pub curr: Option<TaskId>,
    /// Weighted load of queued tasks and curr.
    pub load: u64,
    /// Tasks counted: queued and curr.
    pub nr: u64,
    pub balance: BalanceState,
}

/// Per-runqueue periodic-balance state.
#[derive(Debug, Clone, Default)]
pub struct BalanceState {
    next_balance: u64,
    failed: u32,
}

/// What the shared fair-class SMP code needs from a policy's runqueues.
pub trait FairRq {
    fn fair_tunables(&self) -> &FairTunables;
    fn nr_rqs(&self) -> usize;
    fn queue(&self, cpu: usize) -> &FairQueue;
    fn queue_mut(&mut self, cpu: usize) -> &mut FairQueue;
    fn weight(&self, t: TaskId) -> u64;
    fn exec_start(&self, t: TaskId) -> u64;
    /// Move queued task `t` from `src` to `dst`.
    fn migrate(&mut self, t: TaskId, src: usize, dst: usize);

    /// Weighted load of `cpu` (queued tasks and curr).
    fn load(&self, cpu: usize) -> u64 {
        self.queue(cpu).load
    }
    /// Tasks counted on `cpu` (queued and curr).
    fn nr(&self, cpu: usize) -> u64 {
        self.queue(cpu).nr
    }
    /// Some task waits in `cpu`'s tree (curr excluded).
    fn has_queued(&self, cpu: usize) -> bool {
        !self.queue(cpu).tree.is_empty()
    }
    fn curr(&self, cpu: usize) -> Option<TaskId> {
        self.queue(cpu).curr
    }
    fn balance_state(&mut self, cpu: usize) -> &mut BalanceState {
        &mut self.queue_mut(cpu).balance
    }
    /// Tasks `detach_tasks` considers on `src`: the last 32 of its tree
    /// (sysctl_sched_nr_migrate; the least deserving by the tree's order),
    /// in the order it scans them.
    fn balance_candidates(&self, src: usize) -> Vec<TaskId> {
        self.queue(src).tree.iter().rev().take(32).map(|&(_, t)| t).collect()
    }
}

fn is_idle(p: &impl FairRq, cx: &Ctx, cpu: usize) -> bool {
    cx.idle(cpu) && p.nr(cpu) == 0
}

/// `select_task_rq_fair`, simplified: fork to the least-loaded CPU (RT-busy
/// CPUs count as one nice-0 task); a wakeup goes to the waker's CPU if it is
/// no busier (wake_affine), then to an idle CPU, target and prev first.
pub fn select_cpu(p: &impl FairRq, cx: &Ctx, t: TaskId, w: &Wake) -> usize {
    let n = p.nr_rqs();
    if let WakeKind::New { .. } = w.kind {
        cx.work(n as u64, 0, 0);
        let home = w.waker_cpu.unwrap_or(w.prev_cpu);
        return (0..n).min_by_key(|&c| (p.load(c) + cx.cpus[c].curr_rt as u64 * 1024, c != home, c)).unwrap_or(0);
    }
    let prev = w.prev_cpu;
    let mut target = prev;
    if let Some(wc) = w.waker_cpu {
        if wc != prev {
            cx.work(2, 0, 0);
            let mut this_load = p.load(wc);
            if w.kind == WakeKind::Sync {
                if let Some(c) = p.curr(wc) {
                    this_load = this_load.saturating_sub(p.weight(c));
                }
            }
            if this_load + p.weight(t) <= p.load(prev) {
                target = wc;
            }
        }
    }
    cx.work(1, 0, 0);
    if is_idle(p, cx, target) {
        return target;
    }
    cx.work(1, 0, 0);
    if is_idle(p, cx, prev) {
        return prev;
    }
    let mut seen = 0;
    let found = (0..n).map(|i| (target + i) % n).find(|&c| {
        seen += 1;
        is_idle(p, cx, c)
    });
    cx.work(seen, 0, 0);
    found.unwrap_or(target)
}

/// The busiest other CPU with queued tasks and at least `min_nr` counted.
fn busiest(p: &impl FairRq, cpu: usize, min_nr: u64) -> Option<usize> {
    (0..p.nr_rqs())
        .filter(|&c| c != cpu && p.has_queued(c) && p.nr(c) >= min_nr)
        .max_by_key(|&c| (p.load(c), Reverse(c)))
}

/// Pull up to `max_load` weight (and `max_tasks` tasks) of queued tasks from `src` to `dst`.
fn pull(
    p: &mut impl FairRq,
    cx: &Ctx,
    src: usize,
    dst: usize,
    max_load: u64,
    max_tasks: usize,
    allow_hot: bool,
) -> usize {
    let migration_cost = p.fair_tunables().migration_cost;
    let (mut moved, mut moved_load) = (0, 0);
    cx.work(0, 2, 1);
    for t in p.balance_candidates(src) {
        if moved >= max_tasks || moved_load >= max_load {
            break;
        }
        cx.work(1, 0, 0);
        let w = p.weight(t);
        let hot = cx.now.saturating_sub(p.exec_start(t)) < migration_cost;
        if (hot && !allow_hot) || w > (max_load - moved_load).max(1).saturating_mul(2) {
            continue;
        }
        moved_load += w;
        p.migrate(t, src, dst);
        moved += 1;
    }
    moved
}

/// newidle balance before `cpu` picks from an empty tree: one cache-cold task from the busiest queue.
pub fn newidle_balance(p: &mut impl FairRq, cx: &Ctx, cpu: usize) {
    if !p.has_queued(cpu) && p.nr_rqs() > 1 {
        cx.work(p.nr_rqs() as u64, 0, 0);
        if let Some(src) = busiest(p, cpu, 2) {
            pull(p, cx, src, cpu, u64::MAX, 1, false);
        }
    }
}

/// Periodic balance at a tick: every `ncpus` ms (× busy_factor when busy),
/// pull cold tasks up to half the imbalance when `busiest·100 > local·imbalance_pct`;
/// hot tasks become movable after two failed attempts.
pub fn periodic_balance(p: &mut impl FairRq, cx: &mut Ctx, cpu: usize) {
    let ncpus = p.nr_rqs();
    if ncpus < 2 || cx.now < p.balance_state(cpu).next_balance {
        return;
    }
    let tun = *p.fair_tunables();
    let busy = !cx.idle(cpu);
    p.balance_state(cpu).next_balance = cx.now + ncpus as u64 * 1_000_000 * if busy { tun.busy_factor } else { 1 };
    let this = p.load(cpu);
    cx.work(ncpus as u64, 0, 0);
    let Some(src) = busiest(p, cpu, 0) else { return };
    let busiest = p.load(src);
    if busiest * 100 <= this * tun.imbalance_pct {
        p.balance_state(cpu).failed = 0;
        return;
    }
    let allow_hot = p.balance_state(cpu).failed > 1;
    if pull(p, cx, src, cpu, (busiest - this) / 2, usize::MAX, allow_hot) > 0 {
        p.balance_state(cpu).failed = 0;
        if cx.idle(cpu) {
            cx.kick.push(cpu);
        }
    } else {
        p.balance_state(cpu).failed += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_tree_matches_a_btreeset_small_and_big() {
        // Grow past BIG and shrink below SMALL, comparing every answer.
        let (mut t, mut r) = (RunTree::default(), BTreeSet::new());
        let (mut x, mut was_big) = (11u64, false);
        for i in 0..6000u32 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let k = ((x >> 40) as i64 % 500 - 250, (x >> 20) as u32 % 400);
            let grow = i < 3000;
            match (x >> 10) % 4 {
                0..=2 if grow => assert_eq!(t.insert(k), r.insert(k)),
                0 => assert_eq!(t.insert(k), r.insert(k)),
                1 | 2 => assert_eq!(t.pop_first(), r.pop_first()),
                _ => {
                    let k = r.iter().nth((x >> 5) as usize % (r.len() + 1)).copied().unwrap_or(k);
                    assert_eq!(t.remove(&k), r.remove(&k));
                }
            }
            assert_eq!(t.len(), r.len());
            was_big |= matches!(t, RunTree::Big(_));
            assert_eq!(t.first(), r.first());
            if i % 97 == 0 {
                assert!(t.iter().eq(r.iter()));
                assert!(t.iter().rev().take(32).eq(r.iter().rev().take(32)));
            }
        }
        assert!(was_big && matches!(t, RunTree::Small(_)), "grew big, shrank back");
    }
}
