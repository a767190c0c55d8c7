//! The `shell` benchmark on the live kernel: tiny cases through the public
//! API. They share the stop flag and this process's children, so each takes
//! `LOCK`. No timing assertions, only counts, states and messages. They need
//! /bin/sh, coreutils and grep, and fail (with the missing tool named) where
//! those are absent.

mod common;
use common::{lock, plan};
use schedlab_core::{BenchResult, Condition, MetricData, SchedCondition, SchedPolicy};
use schedlab_live::{find, hygiene, load, LiveError, Params, RunPlan};
use std::time::{Duration, Instant};

fn run(params: &str, plan: &RunPlan) -> Result<Vec<BenchResult>, LiveError> {
    common::run("shell", params, plan)
}

fn my_children() -> Vec<i32> {
    hygiene::children_of(std::process::id() as i32)
}

/// This process's shell temp dirs still on disk.
fn temp_dirs_left() -> Vec<String> {
    let prefix = format!("schedlab-{}-shell-", std::process::id());
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// Processes (any parent) still working in one of this process's shell temp
/// dirs: the scripts' pipelines, which are not our children. Retried for a
/// second, since SIGKILLed processes take a moment to go.
fn script_processes_left() -> Vec<i32> {
    let needle = format!("schedlab-{}-shell-", std::process::id());
    let end = Instant::now() + Duration::from_secs(1);
    loop {
        let mut left = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
            let cwd = std::fs::read_link(e.path().join("cwd")).map(|p| p.to_string_lossy().into_owned());
            let cmd = std::fs::read(e.path().join("cmdline")).map(|b| String::from_utf8_lossy(&b).into_owned());
            if cwd.is_ok_and(|c| c.contains(&needle)) || cmd.is_ok_and(|c| c.contains(&needle)) {
                left.push(pid);
            }
        }
        if left.is_empty() || Instant::now() > end {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn assert_clean() {
    assert_eq!(my_children(), Vec::<i32>::new(), "children left behind");
    assert_eq!(script_processes_left(), Vec::<i32>::new(), "script processes left behind");
    assert_eq!(temp_dirs_left(), Vec::<String>::new(), "temp dirs left behind");
}

fn per_rep_counts(r: &BenchResult) -> Vec<u64> {
    match &r.metric("script_time").expect("script_time").data {
        MetricData::Histogram { histogram, repetitions } => {
            assert_eq!(repetitions.len(), r.repetitions as usize, "one histogram per repetition");
            assert_eq!(repetitions.iter().map(|h| h.count()).sum::<u64>(), histogram.count());
            // A run starts nine processes: far above 100 us, far below the time limit.
            let (min, max) = (histogram.min().unwrap(), histogram.max().unwrap());
            assert!(min >= 100_000, "min script time {min} ns");
            assert!(max < 60_000_000_000, "max script time {max} ns");
            repetitions.iter().map(|h| h.count()).collect()
        }
        other => panic!("script_time is not a histogram: {other:?}"),
    }
}

fn applied(r: &BenchResult) -> SchedCondition {
    match &r.condition {
        Condition::Live { applied: Some(a), .. } => a.clone(),
        other => panic!("no applied condition: {other:?}"),
    }
}

#[test]
fn a_copy_list_runs_one_case_per_count_with_plausible_figures() {
    let _g = lock();
    let p = plan(2, 1);
    let results = run("copies=1,3,duration=100", &p).unwrap();
    assert_eq!(results.len(), 2);
    for (r, copies) in results.iter().zip([1u64, 3]) {
        assert_eq!(r.params["copies"], serde_json::json!(copies), "each case holds one count, as a number");
        assert_eq!(r.params["duration"], serde_json::json!(100));
        let rates = match &r.metric("scripts_per_min").expect("scripts_per_min").data {
            MetricData::Samples { values } => values.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(rates.len(), 2, "one rate per measured repetition");
        let counts = per_rep_counts(r);
        for (rate, n) in rates.iter().zip(&counts) {
            // Every copy completes at least one run per repetition.
            assert!(*n >= copies, "{n} runs with {copies} copies");
            // n runs took at least 100 ms (the duration) and at most the case limit.
            assert!(*rate > 0.0 && *rate <= *n as f64 * 600.0 + 1e-9, "rate {rate} for {n} runs");
        }
        assert!(r.metric("scripts_per_min").unwrap().headline && r.metric("script_time").unwrap().headline);
        assert_eq!(applied(r).policy, SchedPolicy::Other);
        assert!(!r.warnings.iter().any(|w| w.contains("different policies")), "{:?}", r.warnings);
    }
    assert_clean();
}

#[test]
fn quick_defaults_are_both_rows_of_e1() {
    let _g = lock();
    let b = find("shell").unwrap();
    let cases = b.cases(&Params::new(), &plan(2, 1)).unwrap();
    let copies: Vec<u64> = cases.iter().map(|c| c.count("copies").unwrap()).collect();
    assert_eq!(copies, vec![1, 8]);
    assert!(cases.iter().all(|c| c.count("duration").unwrap() == 300));
    let full = b.cases(&Params::new(), &RunPlan { quick: false, ..plan(3, 1) }).unwrap();
    assert!(full.iter().all(|c| c.count("duration").unwrap() == 3000));
    // The CLI's normalised case string parses back to the same case.
    let again = b.cases(&Params::parse(&cases[1].to_string()).unwrap(), &plan(2, 1)).unwrap();
    assert_eq!(again, vec![cases[1].clone()]);
}

#[test]
fn the_scripts_inherit_nice_and_cpus_from_the_measuring_thread() {
    let _g = lock();
    let cpu = schedlab_live::condition::get_affinity(0).unwrap()[0];
    let p = RunPlan {
        condition: SchedCondition { nice: Some(5), cpus: Some(vec![cpu]), ..Default::default() },
        explicit_condition: true,
        ..plan(1, 0)
    };
    let r = run("copies=2,duration=50", &p).unwrap().remove(0);
    let a = applied(&r);
    assert_eq!((a.policy, a.nice, a.cpus.clone()), (SchedPolicy::Other, Some(5), Some(vec![cpu])));
    // The script's own read-back matched the thread's, or merge_applied would warn.
    assert!(!r.warnings.iter().any(|w| w.contains("different policies")), "{:?}", r.warnings);
    assert_clean();
}

#[test]
fn bad_copies_and_policies_are_refused_before_anything_runs() {
    let _g = lock();
    let b = find("shell").unwrap();
    let cases = |s: &str, p: &RunPlan| b.cases(&Params::parse(s).unwrap(), p);
    for bad in ["copies=0", "copies=1,0", "copies=5000", "copies=8,8", "copies=x"] {
        let e = cases(bad, &plan(1, 0)).unwrap_err();
        assert!(matches!(e, LiveError::BadParam { .. }), "{bad}: {e}");
        assert!(e.to_string().contains("from 1 to 4096, comma-separated"), "{bad}: {e}");
    }
    assert!(matches!(cases("duration=5", &plan(1, 0)), Err(LiveError::BadParam { .. })));
    assert!(matches!(cases("loops=5", &plan(1, 0)), Err(LiveError::UnknownParam { .. })));
    // The most copies accepted need ~32 GiB and 16,384 tasks: refused unless the machine has room.
    let (mem, _) = load::memory_room();
    let (tasks, _) = load::task_room();
    match cases("copies=4096", &plan(1, 0)) {
        Err(LiveError::TooMuchMemory { .. }) | Err(LiveError::TooManyTasks { .. }) => {}
        Err(LiveError::BadParam { key, .. }) if key == "copies" => {} // ulimit -n
        Ok(_) => assert!(mem >= 4096 << 23 && tasks >= 4 * 4096, "accepted without room"),
        Err(e) => panic!("unexpected error: {e}"),
    }
    let dl = RunPlan {
        condition: SchedCondition {
            policy: SchedPolicy::Deadline,
            deadline: Some(schedlab_core::condition::DeadlineParams {
                runtime_ns: 1_000_000,
                deadline_ns: 10_000_000,
                period_ns: 10_000_000,
            }),
            ..Default::default()
        },
        ..plan(1, 0)
    };
    assert!(matches!(cases("copies=1", &dl), Err(LiveError::DeadlineCannotFork { .. })));
    // run() takes one case, not a list.
    let e = b.run(&Params::parse("copies=1,2").unwrap(), &plan(1, 0), &|_| {}).unwrap_err();
    assert!(e.to_string().contains("single copy count"), "{e}");
    assert_clean();
}

#[test]
fn a_stopped_case_kills_every_script_and_removes_its_files() {
    let _g = lock();
    let started = Instant::now();
    // Progress comes every 100 ms once the measuring thread runs: stop
    // mid-repetition, with every copy's run in flight or being restarted.
    let calls = std::cell::Cell::new(0);
    let stop_soon = |_: f64| {
        calls.set(calls.get() + 1);
        if calls.get() == 4 {
            hygiene::request_stop();
        }
    };
    let b = find("shell").unwrap();
    let case = b.cases(&Params::parse("copies=4,duration=600000").unwrap(), &plan(1, 0)).unwrap().remove(0);
    let e = b.run(&case, &plan(1, 0), &stop_soon);
    assert!(matches!(e, Err(LiveError::Interrupted)), "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(30), "the stop was not noticed");
    assert_clean();
    hygiene::clear_stop();
    // Already stopped: a new case refuses to start and leaves nothing.
    hygiene::request_stop();
    assert!(matches!(run("copies=1,duration=50", &plan(1, 0)), Err(LiveError::Interrupted)));
    hygiene::clear_stop();
    assert_clean();
}
