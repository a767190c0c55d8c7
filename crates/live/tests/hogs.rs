//! The hogs benchmark: nice-weighted CPU shares on one CPU under the
//! simulator's metric names, bad input refused before anything starts, and
//! no hog left behind.

mod common;
use common::{lock, plan, run};
use schedlab_core::{BenchResult, MetricData, SchedCondition, SchedPolicy};
use schedlab_live::{find, hygiene, LiveError, Params};

fn entities(r: &BenchResult, metric: &str) -> Vec<(String, f64)> {
    match &r.metric(metric).unwrap_or_else(|| panic!("{metric} missing")).data {
        MetricData::Entities { labels, values, .. } => labels.iter().cloned().zip(values.iter().copied()).collect(),
        other => panic!("{metric} is not per task: {other:?}"),
    }
}

fn hogs_alive() -> usize {
    hygiene::children_of(std::process::id() as i32).len()
}

#[test]
fn two_hogs_at_nice_0_and_5_share_one_cpu_by_their_weights() {
    let _g = lock();
    let r = run("hogs", "nice=0,5,duration=1s", &plan(1, 1)).unwrap().remove(0);
    let share = entities(&r, "cpu_share");
    assert_eq!(share.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(), ["hog0.nice0", "hog1.nice5"]);
    // CFS/EEVDF weights 1024 : 335 split the hogs' CPU time 75.4 : 24.6. Taken
    // within the hogs' own total, so that other tasks on that CPU (a loaded
    // machine) do not move it; that is also what fair_share_error measures.
    let total: f64 = share.iter().map(|s| s.1).sum();
    assert!(total > 0.0, "the hogs got no CPU: {share:?}");
    let expected = [100.0 * 1024.0 / 1359.0, 100.0 * 335.0 / 1359.0];
    for ((label, got), want) in share.iter().zip(expected) {
        let within = 100.0 * got / total;
        assert!(
            (within - want).abs() < 5.0,
            "{label}: {within:.1} % of the hogs' CPU time, the weights say {want:.1} %"
        );
    }
    let err = entities(&r, "fair_share_error");
    assert!(err.iter().all(|(_, e)| *e < 20.0), "{err:?}");
    assert!(r.metric("fair_share_error").unwrap().headline);
    // What the hogs used of their one CPU together (less when others ran there).
    let busy = r.metric("cpu_busy").unwrap().summary().unwrap().mean;
    assert!((total - busy).abs() < 0.5 && busy <= 100.5, "cpu_busy {busy} against the shares' sum {total}");
    let applied = match &r.condition {
        schedlab_core::Condition::Live { applied: Some(a), .. } => a.clone(),
        other => panic!("no applied condition: {other:?}"),
    };
    assert_eq!(applied.cpus.as_ref().map(Vec::len), Some(1), "pinned to one CPU");
    assert_eq!(hogs_alive(), 0, "every hog is reaped");
}

#[test]
fn bad_hogs_input_is_refused_before_anything_starts() {
    let _g = lock();
    let b = find("hogs").unwrap();
    let e = b.cases(&Params::parse("nice=0,25").unwrap(), &plan(1, 0)).unwrap_err().to_string();
    assert!(e.contains("nice") && e.contains("19"), "{e}");
    let e = b.cases(&Params::parse("cpus=100000").unwrap(), &plan(1, 0)).unwrap_err().to_string();
    assert!(e.contains("cpus") && (e.contains("at most") || e.contains("4096")), "{e}");
    let deadline = SchedCondition { policy: SchedPolicy::Deadline, ..Default::default() };
    let e = b.cases(&Params::new(), &plan(1, 0).with_condition(deadline)).unwrap_err();
    assert!(matches!(e, LiveError::DeadlineCannotFork { .. }), "{e}");
    assert_eq!(hogs_alive(), 0);
}

#[test]
fn a_stop_kills_every_hog() {
    let _g = lock();
    let stopper = std::thread::spawn(|| {
        std::thread::sleep(std::time::Duration::from_millis(300));
        hygiene::request_stop();
    });
    let e = run("hogs", "nice=0,0,10,duration=5s", &plan(2, 0)).unwrap_err();
    stopper.join().unwrap();
    hygiene::clear_stop();
    assert!(matches!(e, LiveError::Interrupted), "{e}");
    assert_eq!(hogs_alive(), 0, "no hog survives a stop");
}
