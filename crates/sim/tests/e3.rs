//! E3's wake-up probe (issue 17): why the non-RT waiter's latency under
//! hackbench differs by policy, and what the two new tunables move.

use schedlab_sim::{run, SimOptions};

/// Non-RT waiter latency (n, mean ns) under the probe on one CPU.
fn normal_waiter(policy: &str) -> (u64, f64) {
    let opts = SimOptions { cpus: 1, duration_ns: 10_000_000_000, ..SimOptions::default() };
    let out = run(policy, "wakeup:samples=300,groups=3", &opts).unwrap();
    let s = out.result.metric("wakeup_latency.normal").unwrap().summary().unwrap();
    (s.n, s.mean)
}

#[test]
fn staircase_pipe_sleeps_earn_no_bonus_so_the_waiter_preempts_hackbench() {
    // Default (E3's 2.6.17 + staircase v15): hackbench's pipe wake-ups are
    // NONSLEEP, so only the condition waiter gains bonus and it preempts.
    let (n, mean) = normal_waiter("staircase");
    assert!(n >= 299, "every broadcast caught: {n}");
    assert!(mean < 50_000.0, "{mean} ns");
    // Counting pipe sleeps lifts hackbench's receivers to the waiter's level.
    let (_, off) = normal_waiter("staircase:pipe_nonsleep=off");
    assert!(off > 10.0 * mean, "off {off} ns against on {mean} ns");
}

#[test]
fn nicksched_waiter_latency_is_not_a_jiffy_sampling_artefact() {
    // ns accounting leaves the waiter queued behind hackbench just as long:
    // sampling is not what keeps it from preempting.
    let (_, jiffy) = normal_waiter("nicksched");
    let (_, ns) = normal_waiter("nicksched:ns_accounting=on");
    assert!(jiffy > 1_000_000.0 && ns > 1_000_000.0, "jiffy {jiffy} ns, ns {ns} ns");
    assert!((ns / jiffy - 1.0).abs() < 0.5, "jiffy {jiffy} ns, ns {ns} ns");
}

#[test]
fn ingosched_with_noninteractive_pipe_sleeps_comes_near_e3s_ratio() {
    // 2.6.11's o1: hackbench's pipe sleepers reach the long-sleep level and
    // queue ahead of the waiter. 2.6.17's SLEEP_NONINTERACTIVE caps them at
    // INTERACTIVE_SLEEP, below the waiter, which then mostly preempts.
    let (n_old, old) = normal_waiter("o1");
    let (n_new, new) = normal_waiter("o1:pipe_noninteractive=on");
    let (_, staircase) = normal_waiter("staircase");
    assert!(n_new > n_old, "more broadcasts caught: {n_new} against {n_old}");
    assert!(new * 5.0 < old, "2.6.17 {new} ns against 2.6.11 {old} ns");
    // Still worse than staircase, as in E3 (11x there, raw means).
    assert!(new > 2.0 * staircase, "{new} ns against staircase {staircase} ns");
}
