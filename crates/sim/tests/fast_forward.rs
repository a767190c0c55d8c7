//! The fast path (engine/fast.rs) must not change any result: every policy,
//! on workloads that hit its edges (full and empty channels, RT tasks,
//! random run lengths, finite and nested loops, several channels per step,
//! many CPUs), gives byte-identical results, timelines and event counts with
//! the fast path on and off; and on hackbench it does replay most events.

use schedlab_sim::{run, CostTable, SimOptions, SimOutcome};

const POLICIES: [&str; 12] =
    ["cfs", "eevdf", "linux24", "o1", "4bsd", "ule", "staircase", "nicksched", "ingo_ll", "fixedprio", "bfs", "ule1"];

/// Pipelines that share channels across tasks, a task writing two channels
/// per step, nested finite loops, fixed and degenerate-uniform run lengths,
/// and a hog so that CPUs switch between chains.
const PIPELINE: &str = r#"{"name":"pipeline","tasks":[
    {"name":"src","count":2,"program":[{"loop":400,"do":[{"run":"3us"},{"send":"a"},{"send":"b"}]}]},
    {"name":"mid","count":2,"program":[{"loop":"forever","do":[{"recv":"a"},{"loop":3,"do":[{"run":{"uniform":["1us","1us"]}}]},{"send":"c"}]}]},
    {"name":"sinkb","program":[{"loop":"forever","do":[{"recv":"b"},{"run":"2us"}]}]},
    {"name":"sinkc","program":[{"loop":"forever","do":[{"recv":"c"},{"run":"4us"},{"recv":"c"},{"run":"1us"}]}]},
    {"name":"noise","program":[{"loop":"forever","do":[{"run":{"uniform":["10us","300us"]}},{"sleep":"1ms"}]}]},
    {"name":"hog","nice":5,"program":[{"run":"1s"}]}]}"#;

fn both(policy: &str, workload: &str, opts: &SimOptions) -> (SimOutcome, SimOutcome) {
    let on = run(policy, workload, &SimOptions { fast_forward: true, ..opts.clone() }).unwrap();
    let off = run(policy, workload, &SimOptions { fast_forward: false, ..opts.clone() }).unwrap();
    (on, off)
}

fn assert_identical(policy: &str, label: &str, on: &SimOutcome, off: &SimOutcome) {
    let j = |o: &SimOutcome| serde_json::to_string(&o.result).unwrap();
    assert_eq!(j(on), j(off), "{policy} {label}: results differ");
    assert_eq!(on.events, off.events, "{policy} {label}: event counts differ");
    let tl = |o: &SimOutcome| o.timeline.as_ref().map(|t| t.to_csv());
    assert_eq!(tl(on), tl(off), "{policy} {label}: timelines differ");
    assert_eq!(off.fast_events, 0);
}

#[test]
fn fast_path_changes_no_result() {
    check_every_policy(CostTable::DEFAULT);
}

/// Free scheduler work takes other engine paths (no charges, no delayed IPIs).
#[test]
fn fast_path_changes_no_result_at_zero_cost() {
    check_every_policy(CostTable::ZERO);
}

fn check_every_policy(cost: CostTable) {
    let cases: [(&str, &str, u32, f64); 7] = [
        ("hackbench-2cpu", "hackbench[groups=3,loops=40]", 2, 5.0),
        ("hackbench-cap3", "hackbench[groups=2,loops=0,capacity=3]", 3, 0.05),
        ("hackbench-1cpu", "hackbench[groups=1,loops=20]", 1, 5.0),
        ("hackbench-40cpu", "hackbench[groups=4,loops=0]", 40, 0.02),
        ("wakeup", "wakeup[samples=30,interval=2ms,groups=2]", 2, 5.0),
        ("pipeline", PIPELINE, 2, 0.05),
        ("interactive", "interactive[burn=1]", 2, 0.2),
    ];
    for p in POLICIES {
        for (label, wl, cpus, secs) in cases {
            let o = SimOptions {
                cpus,
                duration_ns: (secs * 1e9) as u64,
                record_timeline: true,
                cost,
                ..SimOptions::default()
            };
            let (on, off) = both(p, wl, &o);
            assert_identical(p, label, &on, &off);
        }
    }
}

#[test]
fn fast_path_replays_most_hackbench_completions() {
    // Under EEVDF, hackbench tasks run many sends or receives between
    // decisions; the fast path should take the bulk of them.
    let o = SimOptions { cpus: 2, duration_ns: 200_000_000, ..SimOptions::default() };
    let (on, off) = both("eevdf", "hackbench[groups=10,loops=0]", &o);
    assert_identical("eevdf", "hackbench-10", &on, &off);
    assert!(on.fast_events * 2 > on.events, "replayed {} of {} events", on.fast_events, on.events);
}
