//! ingo_ll (PlugSched 6.3, Peter Williams, 2006): ingosched whose interactive
//! bonus is driven by measured wake-up latency instead of sleep time.
//!
//! Sources: schedulers.md §4 (ingo_ll) from the LKML "[ANNOUNCE][RFC]
//! PlugSched-6.3" mail (2006-02-10); the mechanism from Williams' patches
//! that led to it: "[RFC] CPU scheduler: Simplified interactive bonus
//! mechanism" (2005-12-27, with Ingo Molnar's port to -mm in that thread)
//! and its successor `lial-test.patch` (2005-12-31, "[SCHED] wrong priority
//! calc"), the first with the non-interactive rule the announcement
//! describes; where the two differ, the later one is followed.
//! PlugSched's own `kernel/ingo_ll.c` was not retrieved.
//! - Everything but the bonus is ingosched: the O(1) machinery of `o1.rs`
//!   (arrays, nice-scaled slices, expiry and EXPIRED_STARVING, TASK_INTERACTIVE
//!   with DELTA, interactive round-robin, fork slice split, balancing).
//! - `prio = static_prio − (CURRENT_BONUS − 5)`, where `CURRENT_BONUS =
//!   latency_bonus + 1` while the task has just woken from an interactive
//!   sleep and `latency_bonus` otherwise; `latency_bonus` is 0..=9 (one
//!   point is reserved for interactive wake-ups; the RFC had 0..=10 and no
//!   reserved point). No sleep_avg, no
//!   run-time charge, no runqueue-wait credit, no child penalty, no exit
//!   blend: all of ingosched's sleep bookkeeping is gone.
//! - Latency: when `schedule()` switches to a just-woken task, `delta = now −
//!   activation time` and `avg = avg·15/16 + delta` (kept ×16, as the
//!   kernel's `SCHED_AVG_OFFSET = 4` does; one average over all wake-ups,
//!   as in the later patch). The bonus rises by one if the
//!   average exceeds the limit and falls by one if it is below `limit >>
//!   acceptability_factor` (2⁸ by default).
//!   - Interactive sleep (TASK_INTERRUPTIBLE without TASK_NONINTERACTIVE):
//!     the limit is `unacceptable_ia_latency`.
//!   - Non-interactive sleep: the limit grows with the queue, `limit +
//!     avg_cpu_run·(nr_running − 1)`, where `avg_cpu_run` is the task's
//!     average CPU burst (`avg = (avg + run)·15/16` at each switch-out).
//! - Slice expiry takes a point off the bonus (so a task that turns into a
//!   hog loses it) before the prio is recomputed.
//! - Fork: the child keeps the parent's bonus, with empty averages.
//!
//! Which simulated sleeps are interactive: `pipe_wait` (Linux 2.6.14 on) sleeps
//! `TASK_INTERRUPTIBLE | TASK_NONINTERACTIVE`, and the patch sets
//! PF_IA_WAKE_UP only for a plain TASK_INTERRUPTIBLE sleep, so a channel
//! wake-up (the engine's sync wake-up) is non-interactive; a condition
//! (futex) or a timed sleep is interactive.
//!
//! Choices where the sources disagree or are silent (⚠uncertain, tunables):
//! - `unacceptable_ia_latency` default 150 us, the December-31 patch's value
//!   (the December-27 RFC had 800 us); PlugSched 6.3's own default is unknown.
//! - `average_latency` (on): compare the average, as the announcement says;
//!   off compares each wake-up's own latency, as `lial-test.patch` did.
//! - `pipe_interactive` (off): whether PlugSched's ingo_ll kept that test
//!   is unknown; on, pipe sleeps count as interactive. It matters under
//!   hackbench load: with it on, hackbench tasks earn bonuses as fast as a
//!   probe waiter does and the waiter's wake-ups queue behind them.
//! - Step size: one bonus point up or down, as both patches do.
//!
//! Simplifications: the balancer counts tasks (o1's), not the smpnice
//! priority-biased load the patches were written against; `avg_cpu_run` is
//! decayed at every switch-out, also when the same task is picked again
//! (the kernel decays it only when another task runs next); the workload's
//! initial tasks start with bonus 0 (prio 125), a launcher that never
//! waited long.

use super::o1::{self, BonusModel, MAX_BONUS, O1};
use super::{ensure, tunables, PolicyInfo, TaskId, WakeKind};
use crate::spec::{Spec, Tunable};
use crate::SimError;

// 0 would be "any latency is unacceptable"; 10 s is beyond any wake-up a run can show.
const UNACCEPTABLE: Tunable = Tunable::duration(
    "unacceptable_ia_latency",
    150_000,
    1,
    10_000_000_000,
    "average wake-up latency above which the bonus rises (⚠ default)",
);
// A factor past 32 would make the acceptable latency 0 for any limit above.
const ACCEPTABILITY: Tunable =
    Tunable::count("acceptability_factor", 8, 0, 32, "the bonus falls below unacceptable_ia_latency / 2^this");
const AVERAGE: Tunable =
    Tunable::boolean("average_latency", true, "compare the decayed average latency (on) or each wake-up's own (off) ⚠");
const PIPE_IA: Tunable = Tunable::boolean(
    "pipe_interactive",
    false,
    "count pipe (channel) sleeps as interactive, ignoring TASK_NONINTERACTIVE ⚠",
);

pub const TUNABLES: &[Tunable] = &[
    o1::DEF_TS,
    o1::MIN_TS,
    o1::GRAN,
    o1::STARVATION,
    o1::CACHE_HOT,
    o1::IMBALANCE_PCT,
    o1::BUSY_FACTOR,
    UNACCEPTABLE,
    ACCEPTABILITY,
    AVERAGE,
    PIPE_IA,
];

pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "ingo_ll",
        summary: "PlugSched 6.3 ingo_ll: O(1) ingosched with the bonus raised or lowered by measured wake-up latency",
        priority_quantity: "prio 100..139 (lower is better)",
        tunables: tunables(TUNABLES),
    }
}

/// Build the policy.
pub fn new(spec: &Spec, ncpus: usize, hz: u32) -> Result<O1<Latency>, SimError> {
    let limit = spec.tunable(&UNACCEPTABLE)?;
    let factor = spec.tunable(&ACCEPTABILITY)? as u32;
    let average = spec.flag(&AVERAGE)?;
    let pipe_ia = spec.flag(&PIPE_IA)?;
    O1::with_bonus(spec, ncpus, hz, |_, _| Ok(Latency { limit, factor, average, pipe_ia, tasks: Vec::new() }))
}

/// Fixed-point shift of the averages (`SCHED_AVG_OFFSET`): they are kept ×16.
const AVG_SHIFT: u32 = 4;

/// The measured-latency bonus.
#[derive(Debug, Clone)]
pub struct Latency {
    /// `unacceptable_ia_latency`, ns.
    limit: u64,
    factor: u32,
    average: bool,
    pipe_ia: bool,
    tasks: Vec<Lat>,
}

#[derive(Debug, Clone, Default)]
struct Lat {
    /// `latency_bonus`, 0..MAX_BONUS.
    bonus: u64,
    /// PF_JUST_WOKEN and PF_IA_WAKE_UP: set at activation, cleared when it runs.
    just_woken: bool,
    ia_wake: bool,
    /// Wake-up latency and CPU burst averages, ×16.
    avg_latency: u64,
    avg_cpu_run: u64,
}

/// `decay_avg_value`: `v·15/16`, in the kernel's order (multiply, then shift).
fn decay(v: u64) -> u64 {
    v.saturating_mul((1 << AVG_SHIFT) - 1) >> AVG_SHIFT
}

impl Latency {
    /// The bonus change for a latency `seen` (×16) against the limit `limit`
    /// (ns): +1 above it, −1 below `limit >> factor`, else 0.
    fn step(&self, seen: u64, limit: u64) -> i64 {
        let unacceptable = limit.saturating_mul(1 << AVG_SHIFT);
        if seen > unacceptable {
            1
        } else if seen < unacceptable >> self.factor {
            -1
        } else {
            0
        }
    }
}

impl BonusModel for Latency {
    fn bonus(&self, id: TaskId) -> u64 {
        let t = &self.tasks[id as usize];
        t.bonus + u64::from(t.ia_wake)
    }

    fn fork(&mut self, id: TaskId, parent: Option<TaskId>) {
        ensure(&mut self.tasks, id);
        let bonus = parent.map_or(0, |p| self.tasks[p as usize].bonus);
        self.tasks[id as usize] = Lat { bonus, ..Lat::default() };
    }

    fn wake(&mut self, id: TaskId, _static_prio: usize, kind: WakeKind, _since: u64, _now: u64) {
        let t = &mut self.tasks[id as usize];
        t.just_woken = true;
        // Pipes sleep TASK_NONINTERACTIVE; futexes and timed sleeps do not.
        t.ia_wake = kind != WakeKind::Sync || self.pipe_ia;
    }

    fn switch_in(&mut self, id: TaskId, _static_prio: usize, since: u64, now: u64, nr_running: u64) -> bool {
        let t = &self.tasks[id as usize];
        if !t.just_woken {
            return false;
        }
        let delta = now.saturating_sub(since);
        let avg = decay(t.avg_latency).saturating_add(delta);
        let seen = if self.average { avg } else { delta.saturating_mul(1 << AVG_SHIFT) };
        let limit = if t.ia_wake {
            self.limit
        } else {
            // SCHED_AVG_RND(avg_cpu_run): the mean burst, rounded.
            let burst = (t.avg_cpu_run + (1 << (AVG_SHIFT - 1))) >> AVG_SHIFT;
            self.limit.saturating_add(burst.saturating_mul(nr_running.saturating_sub(1)))
        };
        let step = self.step(seen, limit);
        let t = &mut self.tasks[id as usize];
        t.avg_latency = avg;
        t.bonus = t.bonus.saturating_add_signed(step).min(MAX_BONUS - 1);
        t.just_woken = false;
        t.ia_wake = false;
        false
    }

    fn switch_out(&mut self, id: TaskId, ran: u64) {
        let t = &mut self.tasks[id as usize];
        t.avg_cpu_run = decay(t.avg_cpu_run.saturating_add(ran));
    }

    fn slice_expired(&mut self, id: TaskId) {
        let t = &mut self.tasks[id as usize];
        t.bonus = t.bonus.saturating_sub(1);
    }

    const STATE: &'static [super::StateVar] = &[
        o1::PRIO,
        o1::TIME_SLICE,
        super::StateVar::new(
            "bonus",
            "",
            Some(false),
            "latency_bonus 0..9 (CURRENT_BONUS is one more after an interactive wake-up)",
        ),
        super::StateVar::new("avg_latency", "ns", None, "decayed average wake-up latency the bonus follows"),
        super::StateVar::new("avg_cpu_run", "ns", None, "decayed average CPU burst (raises a non-interactive limit)"),
    ];

    fn state(&self, id: TaskId, out: &mut [i64]) {
        let t = &self.tasks[id as usize];
        out[0] = t.bonus as i64;
        // Kept ×16 (SCHED_AVG_OFFSET).
        out[1] = (t.avg_latency >> AVG_SHIFT) as i64;
        out[2] = (t.avg_cpu_run >> AVG_SHIFT) as i64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Policy, Stop, TestBed, Wake};

    fn ll(spec: &str) -> O1<Latency> {
        new(&Spec::parse(spec, "policy").unwrap(), 1, 1000).unwrap()
    }

    fn wake(kind: WakeKind) -> Wake {
        Wake { kind, prev_cpu: 0, waker_cpu: if kind == WakeKind::Timer { None } else { Some(0) } }
    }

    /// One task on one CPU: it sleeps, is woken by `kind` at `at` and runs
    /// after `latency` ns; returns its bonus after running.
    fn wake_after(p: &mut O1<Latency>, tb: &mut TestBed, kind: WakeKind, latency: u64) -> u64 {
        p.stopping(&mut tb.cx(), 0, 0, Stop::Sleep { io: kind != WakeKind::Timer });
        tb.now += 5_000_000;
        p.enqueue(&mut tb.cx(), 0, 0, &wake(kind));
        tb.now += latency;
        assert_eq!(p.pick_next(&mut tb.cx(), 0), Some(0));
        tb.now += 10_000;
        p.bonus.tasks[0].bonus
    }

    fn one_task(spec: &str) -> (O1<Latency>, TestBed) {
        let mut p = ll(spec);
        let mut tb = TestBed::new(1, 1000);
        p.task_new(&mut tb.cx(), 0, 0, None);
        p.enqueue(&mut tb.cx(), 0, 0, &wake(WakeKind::New { parent: None }));
        assert_eq!(p.pick_next(&mut tb.cx(), 0), Some(0));
        (p, tb)
    }

    #[test]
    fn the_average_latency_moves_the_bonus_one_step_at_a_time() {
        // avg (×16) = avg·15/16 + delta against 150 us ×16 = 2.4 ms. Steady
        // 1 ms wake-ups from 0: 1.0, 1.94, 2.82 ms: the third crosses the
        // limit and each later one raises the bonus again.
        let (mut p, mut tb) = one_task("ingo_ll");
        let b: Vec<u64> = (0..6).map(|_| wake_after(&mut p, &mut tb, WakeKind::Timer, 1_000_000)).collect();
        assert_eq!(b, [0, 0, 1, 2, 3, 4]);
        // At most 9 from latency (the tenth point is the interactive wake-up's).
        let b: Vec<u64> = (0..10).map(|_| wake_after(&mut p, &mut tb, WakeKind::Timer, 1_000_000)).collect();
        assert_eq!(*b.last().unwrap(), MAX_BONUS - 1);
        // Instant wake-ups only decay the average by 15/16; the bonus falls
        // once it is below 2.4 ms >> 8 = 9375 (×16), after
        // ln(avg/9375)/ln(16/15) of them (±1 for the integer decay), then
        // one point per wake-up down to 0.
        let avg = p.bonus.tasks[0].avg_latency as f64;
        let fast: Vec<u64> = (0..150).map(|_| wake_after(&mut p, &mut tb, WakeKind::Timer, 0)).collect();
        let first_drop = fast.iter().position(|&b| b < MAX_BONUS - 1).unwrap();
        let expect = ((avg / 9375.0).ln() / (16.0f64 / 15.0).ln()).ceil() as usize - 1;
        assert!(first_drop.abs_diff(expect) <= 1, "first drop at {first_drop}, expected {expect}");
        assert_eq!(fast[first_drop..first_drop + 9], [8, 7, 6, 5, 4, 3, 2, 1, 0]);
        assert!(fast[first_drop + 9..].iter().all(|&b| b == 0));
    }

    #[test]
    fn raw_latency_mode_reacts_to_each_wake_up() {
        // average_latency=off compares delta itself: 200 us > 150 us rises at once,
        // 100 us (between 150/256 us and 150 us) holds, 0 falls.
        let (mut p, mut tb) = one_task("ingo_ll:average_latency=off");
        let b: Vec<u64> =
            [200_000, 200_000, 100_000, 0].iter().map(|&l| wake_after(&mut p, &mut tb, WakeKind::Timer, l)).collect();
        assert_eq!(b, [1, 2, 2, 1]);
    }

    #[test]
    fn an_interactive_wake_up_adds_the_reserved_point_until_the_task_runs() {
        let (mut p, mut tb) = one_task("ingo_ll");
        // Bonus 0: a hog's prio is static + 5; woken from a futex it is one better.
        p.stopping(&mut tb.cx(), 0, 0, Stop::Sleep { io: true });
        p.enqueue(&mut tb.cx(), 0, 0, &wake(WakeKind::Normal));
        assert_eq!(p.priority(0, tb.now), 124);
        // A pipe wake-up is non-interactive: no extra point.
        assert_eq!(p.pick_next(&mut tb.cx(), 0), Some(0));
        p.stopping(&mut tb.cx(), 0, 0, Stop::Sleep { io: true });
        p.enqueue(&mut tb.cx(), 0, 0, &wake(WakeKind::Sync));
        assert_eq!(p.priority(0, tb.now), 125);
        // Unless pipe sleeps are taken for interactive ones.
        let (mut p, mut tb) = one_task("ingo_ll:pipe_interactive=on");
        p.stopping(&mut tb.cx(), 0, 0, Stop::Sleep { io: true });
        p.enqueue(&mut tb.cx(), 0, 0, &wake(WakeKind::Sync));
        assert_eq!(p.priority(0, tb.now), 124);
    }

    #[test]
    fn a_non_interactive_limit_grows_with_the_queue() {
        // Bursts of 1 ms: avg_cpu_run tends to 15/16 of 16 ms, SCHED_AVG_RND ≈ 0.94 ms.
        // With 5 tasks runnable the pipe limit is 150 us + 4·burst ≈ 3.9 ms, so a
        // steady 2 ms latency (avg ×16 → 32 ms > 2.4 ms) would raise an interactive
        // task's bonus but not a pipe reader's.
        let mut p = ll("ingo_ll:average_latency=off");
        p.bonus.tasks = vec![Lat { avg_cpu_run: 15_000_000, ..Lat::default() }; 2];
        p.bonus.tasks[0].just_woken = true;
        p.bonus.tasks[1] = Lat { just_woken: true, ia_wake: true, ..p.bonus.tasks[0].clone() };
        p.bonus.switch_in(0, 120, 0, 2_000_000, 5);
        p.bonus.switch_in(1, 120, 0, 2_000_000, 5);
        assert_eq!((p.bonus.tasks[0].bonus, p.bonus.tasks[1].bonus), (0, 1));
        // Alone on its CPU the pipe reader's limit is the plain one: it rises.
        p.bonus.tasks[0].just_woken = true;
        p.bonus.switch_in(0, 120, 0, 2_000_000, 1);
        assert_eq!(p.bonus.tasks[0].bonus, 1);
    }

    #[test]
    fn slice_expiry_takes_a_point_and_a_hog_ends_at_static_plus_5() {
        let (mut p, mut tb) = one_task("ingo_ll");
        p.bonus.tasks[0].bonus = 3;
        let mut prios = Vec::new();
        // The launcher child's first slice is 50 ms, then 100 ms each.
        for _ in 0..400 {
            tb.now += 1_000_000;
            if p.tick(&mut tb.cx(), 0, Some(0)) {
                p.stopping(&mut tb.cx(), 0, 0, Stop::Preempt);
                assert_eq!(p.pick_next(&mut tb.cx(), 0), Some(0));
                prios.push(p.priority(0, tb.now));
            }
        }
        assert_eq!(prios, [123, 124, 125, 125]);
    }

    #[test]
    fn a_child_inherits_the_bonus_with_fresh_averages() {
        let (mut p, mut tb) = one_task("ingo_ll");
        p.bonus.tasks[0] = Lat { bonus: 6, avg_latency: 99, avg_cpu_run: 77, ..Lat::default() };
        tb.cpus[0].curr = Some(0);
        p.task_new(&mut tb.cx(), 1, 0, Some(0));
        assert_eq!((p.bonus.tasks[1].bonus, p.bonus.tasks[1].avg_latency, p.bonus.tasks[1].avg_cpu_run), (6, 0, 0));
    }
}
