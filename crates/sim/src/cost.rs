//! The scheduler's own work: what each decision does, counted by the policy,
//! and the table that turns those counts into CPU time and wake-up latency.
//!
//! # The counts
//! A *decision* is one of:
//! - a wake-up: `select_cpu` + `enqueue` + `wakeup_preempt` (a fork's
//!   `task_new` too), made by the waking task's CPU, or for a timer wake-up
//!   by the CPU the task slept on (the timer interrupt fires there);
//! - a schedule: the outgoing task's `stopping` + `pick_next` (newidle
//!   balancing and stealing included), made by the CPU that switches;
//! - a tick: `tick` (periodic balancing included), made by the ticking CPU;
//! - a nice change, made by the CPU running the task that changes it.
//!
//! During a decision the policy reports, through [`Ctx::work`](crate::policy::Ctx::work):
//! - `scanned`: entries examined one at a time: tasks in an O(n) walk (Linux
//!   2.4's goodness loop, 4BSD's once-a-second `schedcpu`, a balancer's
//!   candidates), CPUs in a search over CPUs, levels of a tree descent
//!   (⌈log2(n+1)⌉ for a tree of n);
//! - `queues`: run queues searched, inserted into or removed from (one bitmap
//!   look-up or list splice each);
//! - `locks`: runqueue or scheduler locks taken (a global lock counts as one;
//!   contention is not modelled).
//!
//! The engine adds `ipis`: each reschedule a decision asks of another CPU (a
//! wake-up that preempts or fills a remote CPU, a policy's kick of one) is a
//! reschedule interrupt. RT tasks (the POSIX layer) are counted by the
//! engine: one queue and one lock per wake-up and per pick, plus a scan of
//! every CPU when a wake-up does not stay on the task's last CPU.
//!
//! # The table
//! `cost = scanned·scan + queues·queue + locks·lock + ipis·ipi`, charged as
//! CPU time to the CPU that made the decision:
//! - a wake-up or nice change made by a running task: that task (it is in the
//!   kernel doing it), so it reaches its next step later;
//! - a timer wake-up or a tick on a CPU running a task: that task (interrupt
//!   time), its current run step ends later;
//! - a schedule: the task switched in, like the context-switch cost; when the
//!   CPU picks nothing the cost vanishes into idle time;
//! - a decision on an idle CPU, or on one about to reschedule: owed by the
//!   next task that CPU picks.
//!
//! Wake-up latency (wake → first run) grows by the cost of the pick that
//! chose the task plus what that CPU owed; a wake-up handled on the task's own
//! CPU delays its pick by the wake-up path itself; a remote one reaches the
//! target CPU `cost + ipi_latency` after the wake-up began (the IPI leaves
//! when the wake-up path ends), so the target reschedules then, unless it
//! switched tasks meanwhile (the IPI then finds nothing to do).
//! The context-switch cost stays outside the latency, as before.
//!
//! A CPU that is idle when it is given work (a reschedule IPI reaching it,
//! or a wake-up it handles itself, its own timer firing) first leaves its
//! idle state: `idle_exit` later it acts, so every wake-up onto an idle CPU
//! waits that much longer (a C-state exit on bare metal, a halted vCPU's
//! wake-up through the hypervisor on a virtual machine).
//!
//! # Defaults
//! Order-of-magnitude figures for the kind of machine the other defaults
//! describe (a 2 us context switch, a 10 us cache refill: a 2003–2006
//! desktop or server, the seeds' era), not measurements; `sim`'s flags set
//! them and a calibration from live measurements should replace them:
//! - `scan` 50 ns: one entry examined, a task_struct line fetched from L2 or
//!   memory and compared (2.4's goodness() per runnable task);
//! - `queue` 40 ns: a bitmap search plus a list insert or removal;
//! - `lock` 60 ns: an uncontended spin lock taken and released, one locked
//!   instruction on a shared line;
//! - `ipi` 500 ns: sending a reschedule IPI (APIC write, sender side).
//!   Measured, 5-7 us on a 2-vCPU KVM guest, where the write is a VM exit:
//!   a calibration sets it from socket writes that wake a reader on another
//!   CPU against ones that wake a reader on the writer's;
//! - `ipi_latency` 2 us: from the send to the target CPU acting on it
//!   (delivery, interrupt entry, need_resched, and on a kernel without full
//!   preemption the running task's way to its next preemption point).
//!   Measured, it is larger on a virtual machine, where the interrupt is
//!   injected into a running vCPU through the host: 9-12 us on a 2-vCPU
//!   guest. A calibration sets it from the RT wake-up probe with the
//!   waiter's CPU busy;
//! - `wake_cost` 0: the waker's own path around a condition wake-up (a
//!   broadcast; a channel's is `channel_wake`), charged
//!   like a decision's cost per task woken. Measured, it is large on a
//!   virtual machine (a futex wake and the timer the waker arms next cost
//!   VM exits: 3-12 us on a 2-vCPU KVM guest), small on bare metal; only a
//!   calibration sets it.
//! - `channel_wake` 0: the waker's own path when a pipe or socket write (or
//!   a read that frees room) wakes the task blocked on it: the wait queue
//!   and try_to_wake_up, per task woken, charged like `wake_cost`. Measured,
//!   about 1 us on a 2-vCPU KVM guest (a socket write that wakes a reader
//!   against one that does not). The waker pays it, not the task switched
//!   to (as it would inside `ctx_switch`), so a sender that wakes a receiver
//!   per message costs more than one that wakes nobody: that decides whether
//!   hackbench's receivers keep up (docs/sim.md, session 13). Only a
//!   calibration sets it.
//! - `idle_exit` 0: from an idle CPU being given work to it acting on it.
//!   Measured, it is tens of microseconds on a virtual machine (a halted
//!   vCPU is woken through the host) and 1-100 us on bare metal by C-state
//!   depth; only a calibration (from the cross-CPU pipe, whose partner CPU
//!   idles between messages) sets it.
//!
//! With every field 0 ([`CostTable::ZERO`]) no decision costs anything and
//! the engine takes exactly the paths it took before costs existed: results
//! are byte-identical to those (tests/snapshots.rs checks the stored
//! snapshots at zero cost).

use std::cell::Cell;

/// Operations of one decision (see the module documentation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ops {
    pub scanned: u64,
    pub queues: u64,
    pub locks: u64,
    pub ipis: u64,
}

/// Where policies add their counts during a decision: cells, so that code
/// holding only `&Ctx` (the shared fair-class search) can count too.
#[derive(Debug, Default)]
pub struct OpCounter {
    scanned: Cell<u64>,
    queues: Cell<u64>,
    locks: Cell<u64>,
    ipis: Cell<u64>,
}

impl OpCounter {
    pub fn add(&self, scanned: u64, queues: u64, locks: u64) {
        // Wrapping: counts are read at each decision, and in zero-cost runs
        // never, where they may run on for billions of events.
        self.scanned.set(self.scanned.get().wrapping_add(scanned));
        self.queues.set(self.queues.get().wrapping_add(queues));
        self.locks.set(self.locks.get().wrapping_add(locks));
    }

    pub fn ipi(&self, n: u64) {
        self.ipis.set(self.ipis.get().wrapping_add(n));
    }

    /// The counts since the last take, and start again from zero.
    pub fn take(&self) -> Ops {
        Ops {
            scanned: self.scanned.take(),
            queues: self.queues.take(),
            locks: self.locks.take(),
            ipis: self.ipis.take(),
        }
    }
}

/// ⌈log2(n + 1)⌉: the levels a descent of a balanced tree of `n` visits.
pub fn tree_levels(n: u64) -> u64 {
    u64::from(64 - n.leading_zeros())
}

/// Nanoseconds per operation (see the module documentation for the defaults' basis).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CostTable {
    pub scan_ns: u64,
    pub queue_ns: u64,
    pub lock_ns: u64,
    /// Sender's CPU time per reschedule IPI.
    pub ipi_ns: u64,
    /// From an IPI's send to the target CPU acting on it (a busy one; an
    /// idle one takes `idle_exit_ns` more).
    pub ipi_latency_ns: u64,
    /// The waker's own path around a condition wake-up (a futex wake and
    /// the system calls beside it), charged per task it wakes. Not a
    /// scheduler operation: 0 unless calibrated (`sim --calibrate`). A
    /// pipe's or socket's wake-up pays `channel_wake_ns` instead.
    pub wake_ns: u64,
    /// The waker's own path when a pipe or socket operation wakes the task
    /// blocked on it, per task woken. 0 unless calibrated.
    pub channel_wake_ns: u64,
    /// From an idle CPU being given work (an IPI, its own timer) to it
    /// acting on it. 0 unless calibrated.
    pub idle_exit_ns: u64,
}

impl CostTable {
    /// Scheduler work is free: the model as it was before costs.
    pub const ZERO: CostTable = CostTable {
        scan_ns: 0,
        queue_ns: 0,
        lock_ns: 0,
        ipi_ns: 0,
        ipi_latency_ns: 0,
        wake_ns: 0,
        channel_wake_ns: 0,
        idle_exit_ns: 0,
    };
    /// The defaults (`sim`'s flags and [`crate::RUN_PARAMS`] say the same).
    pub const DEFAULT: CostTable = CostTable {
        scan_ns: 50,
        queue_ns: 40,
        lock_ns: 60,
        ipi_ns: 500,
        ipi_latency_ns: 2_000,
        wake_ns: 0,
        channel_wake_ns: 0,
        idle_exit_ns: 0,
    };

    pub fn is_zero(&self) -> bool {
        *self == Self::ZERO
    }

    /// CPU time of a decision's operations, saturating.
    pub fn ns(&self, o: &Ops) -> u64 {
        [(o.scanned, self.scan_ns), (o.queues, self.queue_ns), (o.locks, self.lock_ns), (o.ipis, self.ipi_ns)]
            .iter()
            .fold(0u64, |acc, &(n, ns)| acc.saturating_add(n.saturating_mul(ns)))
    }
}

impl Default for CostTable {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_is_the_weighted_sum_of_the_counts() {
        let c = CostTable::DEFAULT;
        let o = Ops { scanned: 10, queues: 2, locks: 1, ipis: 1 };
        assert_eq!(c.ns(&o), 10 * 50 + 2 * 40 + 60 + 500);
        assert_eq!(CostTable::ZERO.ns(&o), 0);
        assert!(CostTable::ZERO.is_zero() && !c.is_zero());
    }

    #[test]
    fn counter_takes_and_resets() {
        let k = OpCounter::default();
        k.add(3, 1, 1);
        k.add(2, 0, 1);
        k.ipi(1);
        assert_eq!(k.take(), Ops { scanned: 5, queues: 1, locks: 2, ipis: 1 });
        assert_eq!(k.take(), Ops::default());
    }

    #[test]
    fn tree_levels_are_log2_rounded_up() {
        assert_eq!([0, 1, 2, 3, 4, 7, 8, 1000].map(tree_levels), [0, 1, 2, 2, 3, 3, 4, 10]);
    }
}
