//! The kernel counters on live results (`kernel.*` metrics): they cover the
//! measured side (a runner and its forked children or threads), they are
//! absent with a note where the kernel does not keep them, and `counters:
//! false` (`--no-counters`) leaves them out. No root needed; no timing
//! asserted: only counts that follow from what the benchmark does.

mod common;
use common::{lock, plan, run};
use schedlab_core::{BenchResult, MetricData, KERNEL_NOTE_PREFIX};
use schedlab_live::RunPlan;

fn counter(r: &BenchResult, name: &str) -> Option<Vec<f64>> {
    match &r.metric(name)?.data {
        MetricData::Samples { values } => Some(values.clone()),
        other => panic!("{name} is not samples: {other:?}"),
    }
}

fn notes(r: &BenchResult) -> Vec<&String> {
    r.warnings.iter().filter(|w| w.starts_with(KERNEL_NOTE_PREFIX)).collect()
}

#[test]
fn pipe_counts_both_tasks_switches_on_one_cpu() {
    let _g = lock();
    let loops = 20_000;
    let r = run("pipe", &format!("placement=same-cpu,loops={loops}"), &plan(2, 1)).unwrap().remove(0);
    let vol = counter(&r, "kernel.ctx_switches_voluntary").unwrap_or_else(|| panic!("no switches: {:?}", r.warnings));
    let invol = counter(&r, "kernel.ctx_switches_involuntary").expect("involuntary beside voluntary");
    assert_eq!(vol.len(), r.repetitions as usize, "one value per measured repetition");
    for (v, i) in vol.iter().zip(&invol) {
        assert!(*v > 0.0, "the echo task blocks on an empty pipe: {vol:?}");
        // On one CPU each round trip needs the runner to leave the CPU to its
        // child and back: at least one switch per round trip.
        assert!(v + i >= (loops - 1) as f64, "{v} + {i} switches for {loops} round trips on one CPU");
    }
    // Pinned before the first warm-up, neither task may move in a measured repetition.
    assert_eq!(counter(&r, "kernel.migrations"), Some(vec![0.0, 0.0]), "{:?}", notes(&r));
    let wait = counter(&r, "kernel.run_queue_wait").unwrap_or_else(|| panic!("{:?}", notes(&r)));
    assert_eq!(wait.len(), 2);
    assert!(counter(&r, "kernel.cpu_steal").is_some() && counter(&r, "kernel.cpu_irq").is_some(), "{:?}", notes(&r));
    assert!(r.metrics.iter().filter(|m| m.name.starts_with("kernel.")).all(|m| !m.headline));
}

/// One sender and one receiver, forked by the runner (or its threads), all
/// on CPU 0: each repetition moves 20,000 messages of 4 KiB through one
/// socket, whose buffer holds a few hundred KiB at most, so the two must take
/// turns on the CPU hundreds of times (each turn a switch, voluntary or not).
/// The runner itself writes one byte and waits twice (waitpid) in a
/// repetition: a handful of switches at most.
#[test]
fn hackbench_counters_cover_forked_children_and_threads() {
    let _g = lock();
    let on_cpu0 = RunPlan {
        condition: schedlab_core::SchedCondition { cpus: Some(vec![0]), ..Default::default() },
        ..plan(2, 1)
    };
    for mode in ["process", "thread"] {
        let params = format!("groups=1,fds=1,loops=20000,datasize=4096,mode={mode}");
        let r = run("hackbench", &params, &on_cpu0).unwrap().remove(0);
        let vol = counter(&r, "kernel.ctx_switches_voluntary").unwrap_or_else(|| panic!("{mode}: {:?}", notes(&r)));
        let invol = counter(&r, "kernel.ctx_switches_involuntary").expect("involuntary beside voluntary");
        for (v, i) in vol.iter().zip(&invol) {
            assert!(v + i > 20.0, "{mode}: the workers' turns on one CPU are missing: {vol:?} {invol:?}");
        }
        // The workers end within each repetition: what the kernel discards is absent, and said so.
        assert!(counter(&r, "kernel.run_queue_wait").is_none() && counter(&r, "kernel.migrations").is_none());
        let n = notes(&r);
        assert!(
            n.iter().any(|w| w.contains("kernel.migrations, kernel.run_queue_wait absent: measured tasks ended")),
            "{mode}: {n:?}"
        );
    }
}

/// `threads` measures in the harness process: the threads it creates and
/// joins are counted through RUSAGE_SELF, less the harness's own threads.
#[test]
fn threads_in_the_harness_process_are_counted_after_they_end() {
    let _g = lock();
    let r = run("threads", "threads=2000,alive=4", &plan(1, 0)).unwrap().remove(0);
    match counter(&r, "kernel.ctx_switches_voluntary") {
        // Joining 2,000 threads blocks the measuring thread; the counts of ended threads are the kernel's.
        Some(v) => assert!(v[0] > 0.0, "{v:?}"),
        // Another test's thread of this test binary ended meanwhile: that is said, not hidden.
        None => assert!(notes(&r).iter().any(|w| w.contains("a thread of the harness ended")), "{:?}", notes(&r)),
    }
}

#[test]
fn no_counters_leaves_them_out() {
    let _g = lock();
    let p = RunPlan { counters: false, ..plan(1, 0) };
    for (bench, params) in [("pipe", "placement=same-cpu,loops=2000"), ("hackbench", "groups=1,fds=2,loops=50")] {
        let r = run(bench, params, &p).unwrap().remove(0);
        assert!(r.metrics.iter().all(|m| !m.name.starts_with("kernel.")), "{bench}: {:?}", r.metrics);
        assert!(notes(&r).is_empty(), "{bench}: {:?}", r.warnings);
        assert!(!r.metrics.is_empty(), "{bench}: its own metrics are still there");
    }
}
