//! `wakeup`'s `sync=` modes and the split of each waiter's latency into
//! wake-up and mutex hand-over (issue 19, item 4). No timing assertions:
//! only counts, names and sums.

mod common;
use common::{lock, plan, run};
use schedlab_core::{BenchResult, Condition, LatencyHistogram, MetricData, SchedCondition};
use schedlab_live::{find, hygiene, LiveError, Params, RunPlan};

fn need_root() {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    assert!(root, "this test needs root (SCHED_FIFO waker and waiters): run it as root");
}

fn hist<'a>(r: &'a BenchResult, metric: &str) -> &'a LatencyHistogram {
    match &r.metric(metric).unwrap_or_else(|| panic!("no metric {metric}")).data {
        MetricData::Histogram { histogram, repetitions } => {
            assert_eq!(repetitions.len(), r.repetitions as usize, "{metric}: one histogram per repetition");
            histogram
        }
        other => panic!("{metric} is not a histogram: {other:?}"),
    }
}

/// The key a stored result gets for `params` (as `harness::result` builds it).
fn key_of(params: &str) -> String {
    let b = find("wakeup").unwrap();
    let p = Params::parse(params).unwrap().resolve("wakeup", b.params(), true).unwrap();
    let mut r = BenchResult::new(
        "wakeup",
        Condition::Live { requested: SchedCondition::default(), applied: None, loads: vec![] },
        0,
    );
    r.params = p.to_json(b.params());
    r.key()
}

#[test]
fn wakeup_default_sync_keeps_the_identity_of_an_old_run() {
    // The quick-mode wakeup result in crates/report/tests/fixtures/default-suite.json,
    // stored before sync= existed.
    let old = "wakeup classes=both interval=2000 k=6 normal_nice=0 rt_prio=50 samples=200 waiters=2";
    assert_eq!(key_of(""), old);
    assert_eq!(key_of("sync=condvar"), old);
    // Other values are kept (parameters sort by name).
    assert_eq!(key_of("sync=pi"), old.replace(" waiters", " sync=pi waiters"));
    assert_eq!(key_of("sync=futex"), old.replace(" waiters", " sync=futex waiters"));
}

#[test]
fn wakeup_refuses_a_bad_sync_naming_the_choices() {
    let _g = lock();
    let b = find("wakeup").unwrap();
    let e = b.cases(&Params::parse("sync=spin").unwrap(), &plan(1, 0)).unwrap_err();
    assert!(matches!(e, LiveError::BadParam { ref key, .. } if key == "sync"), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("'spin'") && msg.contains("one of condvar, pi, futex, split, split-pi"), "{msg}");
}

#[test]
#[ignore = "needs root (SCHED_FIFO waker and waiters): CI runs ignored tests as root"]
fn wakeup_runs_in_every_sync_mode_and_splits_the_split_modes() {
    let _g = lock();
    need_root();
    for sync in ["condvar", "pi", "futex", "split", "split-pi"] {
        let r = run("wakeup", &format!("samples=30,interval=1000,waiters=2,sync={sync}"), &plan(2, 1))
            .unwrap_or_else(|e| panic!("sync={sync}: {e}"));
        let r = &r[0];
        assert_eq!(r.key().contains("sync="), sync != "condvar", "{}", r.key());
        // The waker's side: one figure per measured broadcast.
        assert_eq!(hist(r, "broadcast_latency").count(), 2 * 30, "{sync}");
        for class in ["rt", "normal"] {
            let lat = hist(r, &format!("{class}.latency"));
            assert!(lat.count() > 0 && lat.count() <= 2 * 30 * 2, "{sync} {class}: {} samples", lat.count());
            let (wake, hand) = (format!("{class}.wake_latency"), format!("{class}.handover_latency"));
            if !sync.starts_with("split") {
                // futex: no mutex, the latency is the wake-up itself; glibc's
                // condvar re-takes the mutex before returning: one stamp.
                assert!(r.metric(&wake).is_none() && r.metric(&hand).is_none(), "{sync} {class}");
                continue;
            }
            let (w, h) = (hist(r, &wake), hist(r, &hand));
            // One part of each per sample, and the parts add up to the whole.
            assert_eq!((w.count(), h.count()), (lat.count(), lat.count()), "{sync} {class}");
            // Hand-over >= 0 and neither part above the whole (a negative
            // part would wrap to an overflowing u64).
            assert_eq!((w.overflow(), h.overflow()), (0, 0), "{sync} {class}");
            assert!(w.max() <= lat.max() && h.max() <= lat.max(), "{sync} {class}");
            let (lm, sum) = (lat.mean().unwrap(), w.mean().unwrap() + h.mean().unwrap());
            assert!((sum - lm).abs() <= 0.01 * lm + 100.0, "{sync} {class}: {sum} vs {lm}");
        }
        assert!(wake_threads().is_empty(), "{sync}: {:?}", wake_threads());
    }
}

#[test]
fn wakeup_every_sync_mode_runs_unprivileged_and_stops_cleanly() {
    let _g = lock();
    // A SCHED_OTHER waker and normal waiters need no privilege.
    let other = RunPlan { explicit_condition: true, ..plan(1, 0) };
    for sync in ["condvar", "pi", "futex", "split", "split-pi"] {
        let r = run("wakeup", &format!("samples=20,interval=1000,waiters=2,classes=normal,sync={sync}"), &other)
            .unwrap_or_else(|e| panic!("sync={sync}: {e}"));
        let n = hist(&r[0], "normal.latency").count();
        assert!(n > 0 && n <= 20 * 2, "{sync}: {n} samples");
        assert_eq!(r[0].metric("normal.handover_latency").is_some(), sync.starts_with("split"), "{sync}");
        assert_eq!(hist(&r[0], "broadcast_latency").count(), 20, "{sync}");
        // Interrupted mid-run: an error, and no waiter left waiting.
        let stop_when_started = |f: f64| {
            if f >= 0.0 {
                std::thread::sleep(std::time::Duration::from_millis(100));
                hygiene::request_stop();
            }
        };
        let e = find("wakeup").unwrap().run(
            &Params::parse(&format!("samples=100000,interval=1000,classes=normal,sync={sync}")).unwrap(),
            &other,
            &stop_when_started,
        );
        assert!(matches!(e, Err(LiveError::Interrupted)), "{sync}: {e:?}");
        hygiene::clear_stop();
        assert!(wake_threads().is_empty(), "{sync}: {:?}", wake_threads());
    }
}

/// This process's waiter threads ("schedlab-wake-*"); none outlives a run.
fn wake_threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .filter(|c| c.starts_with("schedlab-wake"))
        .collect()
}
