//! Issue 17: the timeline records every state variable a policy declares,
//! each task's points per change; the first is the dynamic priority, with
//! the same points as when it was the only one.

use schedlab_sim::engine::Engine;
use schedlab_sim::policy::{Ctx, Policy, Stop, TaskId, Wake};
use schedlab_sim::{build_policy, policies, run, state_vars, SimOptions, StateVar, Timeline};

/// A nice-0 hog and a task that runs 1 ms in every 21 on one CPU.
const HOG_AND_SLEEPER: &str = r#"{"name":"mix","tasks":[
    {"name":"hog","program":[{"run":"100s"}]},
    {"name":"sleeper","program":[{"loop":"forever","do":[{"run":"1ms"},{"sleep":"20ms"}]}]}]}"#;

fn normal_policies() -> Vec<&'static str> {
    policies().iter().map(|p| p.name).filter(|&n| n != "rt").collect()
}

fn timeline(policy: &str, secs: f64) -> Timeline {
    let opts = SimOptions { cpus: 1, duration_ns: (secs * 1e9) as u64, record_timeline: true, ..Default::default() };
    run(policy, HOG_AND_SLEEPER, &opts).unwrap().timeline.unwrap()
}

fn series<'a>(tl: &'a Timeline, task: &str, var: &str) -> &'a [(u64, i64)] {
    tl.points_of(task, var).unwrap_or_else(|| panic!("no {var} of {task} in {:?}", tl.vars))
}

fn last(tl: &Timeline, task: &str, var: &str) -> i64 {
    series(tl, task, var).last().unwrap().1
}

fn max(tl: &Timeline, task: &str, var: &str) -> i64 {
    series(tl, task, var).iter().map(|p| p.1).max().unwrap()
}

#[test]
fn every_policy_declares_short_unique_names_and_records_each_variable() {
    for p in normal_policies() {
        let vars = state_vars(p).unwrap();
        let tl = timeline(p, 0.5);
        assert_eq!(tl.vars, vars, "{p}: the timeline carries the declared variables, in order");
        assert_eq!((tl.quantity.as_str(), tl.lower_is_better), (vars[0].name, vars[0].lower_runs_first == Some(true)));
        for (i, v) in vars.iter().enumerate() {
            assert!(
                !v.name.is_empty() && v.name.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "{p}: '{}' is a short name without spaces",
                v.name
            );
            assert!(vars[..i].iter().all(|w| w.name != v.name), "{p}: {} twice", v.name);
            assert!(!v.help.is_empty() && ["", "ns", "ticks", "s"].contains(&v.unit), "{p}: {v:?}");
            for t in &tl.tasks {
                let s = t.series(i);
                assert!(!s.is_empty(), "{p}: {} of {} has no point", v.name, t.name);
                assert!(s.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 != w[1].1), "{p}: one point per change");
            }
        }
        // Beyond the priority, something moves (linux24 keeps only its counter;
        // 4BSD's slptime counts whole seconds asleep, which this sleeper never has).
        let moving = (1..vars.len()).filter(|&i| tl.tasks.iter().any(|t| t.series(i).len() > 1)).count();
        assert!(moving >= (vars.len() - 1).min(1), "{p}: nothing beyond the priority moves in 0.5 s");
    }
}

#[test]
fn o1_sleep_avg_rises_for_the_sleeper_and_drains_from_the_hog() {
    let tl = timeline("o1", 6.0);
    // MAX_SLEEP_AVG is 1 s at HZ 1000; a bonus level is 100 ms of it.
    assert!(last(&tl, "hog", "sleep_avg") < 100_000_000, "{:?}", series(&tl, "hog", "sleep_avg"));
    assert!(last(&tl, "sleeper", "sleep_avg") > 800_000_000, "{:?}", series(&tl, "sleeper", "sleep_avg"));
    // The hog's timeslice counts down between refills.
    assert!(series(&tl, "hog", "time_slice").len() > 10);
}

#[test]
fn ingo_ll_records_its_latency_bonus_and_averages() {
    let tl = timeline("ingo_ll", 3.0);
    // avg = (avg + run)·15/16, kept ×16: about 15/16 of the 1 ms burst.
    let burst = last(&tl, "sleeper", "avg_cpu_run");
    assert!((900_000..1_000_000).contains(&burst), "{burst}");
    assert!(last(&tl, "hog", "avg_cpu_run") > 10 * burst);
    // It preempts the hog at once: no latency, no bonus.
    assert_eq!((max(&tl, "sleeper", "avg_latency"), max(&tl, "sleeper", "bonus")), (0, 0));
}

#[test]
fn ule_scores_the_hog_batch_and_the_sleeper_interactive() {
    for p in ["ule", "ule1"] {
        let tl = timeline(p, 3.0);
        // ULE 2/3 scores any thread whose run exceeds its sleep 50 when interact ≤ 50.
        assert!(last(&tl, "hog", "score") >= 50, "{p}: {:?}", series(&tl, "hog", "score"));
        assert!(last(&tl, "sleeper", "score") < 30, "{p}: {:?}", series(&tl, "sleeper", "score"));
        assert!(last(&tl, "sleeper", "slptime") > last(&tl, "sleeper", "runtime"), "{p}");
    }
}

#[test]
fn bsd4_estcpu_climbs_for_the_hog_only() {
    let tl = timeline("4bsd", 3.0);
    assert!(max(&tl, "hog", "estcpu") > 100, "{:?}", series(&tl, "hog", "estcpu"));
    assert!(max(&tl, "sleeper", "estcpu") < max(&tl, "hog", "estcpu") / 4);
}

#[test]
fn eevdf_lag_and_virtual_deadline_move_and_parity_protects() {
    let tl = timeline("eevdf", 1.0);
    for var in ["lag", "vdeadline"] {
        let distinct: std::collections::BTreeSet<i64> = series(&tl, "hog", var).iter().map(|p| p.1).collect();
        assert!(distinct.len() > 10, "{var}: {distinct:?}");
    }
    let protected: Vec<i64> = series(&tl, "hog", "protected").iter().map(|p| p.1).collect();
    assert!(protected.contains(&0) && protected.contains(&1), "{protected:?}");
}

#[test]
fn staircase_and_nicksched_reward_the_sleeper() {
    let tl = timeline("staircase", 3.0);
    assert!(last(&tl, "sleeper", "bonus") > last(&tl, "hog", "bonus"));
    let tl = timeline("nicksched", 3.0);
    assert!(last(&tl, "sleeper", "sleep_avg") > 900 && last(&tl, "hog", "sleep_avg") < 100);
}

#[test]
fn cfs_run_time_grows_and_the_turn_restarts() {
    let tl = timeline("cfs", 1.0);
    let run = series(&tl, "hog", "sum_exec_runtime");
    assert!(run.windows(2).all(|w| w[0].1 < w[1].1) && run.last().unwrap().1 > 800_000_000, "{run:?}");
    assert!(series(&tl, "hog", "slice_used").iter().any(|p| p.1 == 0), "a new turn starts at 0");
}

/// A policy that declares its priority only: the engine records it as it
/// did before there were other variables (one `priority()` per note).
struct PriorityOnly(Box<dyn Policy>);

impl Policy for PriorityOnly {
    fn priority(&self, t: TaskId, now: u64) -> i64 {
        self.0.priority(t, now)
    }
    fn state_quantities(&self) -> &'static [StateVar] {
        const PRIO: &[StateVar] = &[StateVar::new("priority", "", Some(true), "the dynamic priority")];
        PRIO
    }
    fn task_new(&mut self, cx: &mut Ctx, t: TaskId, nice: i32, parent: Option<TaskId>) {
        self.0.task_new(cx, t, nice, parent)
    }
    fn select_cpu(&mut self, cx: &mut Ctx, t: TaskId, w: &Wake) -> usize {
        self.0.select_cpu(cx, t, w)
    }
    fn enqueue(&mut self, cx: &mut Ctx, t: TaskId, cpu: usize, w: &Wake) {
        self.0.enqueue(cx, t, cpu, w)
    }
    fn wakeup_preempt(&mut self, cx: &mut Ctx, cpu: usize, curr: TaskId, t: TaskId, w: &Wake) -> bool {
        self.0.wakeup_preempt(cx, cpu, curr, t, w)
    }
    fn pick_next(&mut self, cx: &mut Ctx, cpu: usize) -> Option<TaskId> {
        self.0.pick_next(cx, cpu)
    }
    fn stopping(&mut self, cx: &mut Ctx, cpu: usize, t: TaskId, why: Stop) {
        self.0.stopping(cx, cpu, t, why)
    }
    fn tick(&mut self, cx: &mut Ctx, cpu: usize, curr: Option<TaskId>) -> bool {
        self.0.tick(cx, cpu, curr)
    }
    fn set_nice(&mut self, cx: &mut Ctx, t: TaskId, nice: i32, running_on: Option<usize>) -> bool {
        self.0.set_nice(cx, t, nice, running_on)
    }
    fn task_exit(&mut self, cx: &mut Ctx, t: TaskId, parent: Option<TaskId>) {
        self.0.task_exit(cx, t, parent)
    }
    fn timeslice_ns(&self, nice: i32) -> u64 {
        self.0.timeslice_ns(nice)
    }
}

#[test]
fn the_primary_variable_has_the_points_priority_alone_gave() {
    // Two CPUs and forks, so that migrations, exits and epoch-wide changes are noted too.
    let workloads = [HOG_AND_SLEEPER, "hackbench[groups=1,loops=20]", "forkstorm[parents=2,children=10]"];
    for p in normal_policies() {
        for w in workloads {
            let opts = SimOptions { cpus: 2, duration_ns: 300_000_000, record_timeline: true, ..Default::default() };
            let wl = schedlab_sim::workload::build(w, opts.cpus).unwrap();
            let (_, policy, rt) = build_policy(p, opts.cpus, opts.hz).unwrap();
            let (_, alone) = Engine::new(&opts, &wl, Box::new(PriorityOnly(policy)), rt).run();
            let (_, policy, rt) = build_policy(p, opts.cpus, opts.hz).unwrap();
            let (_, all) = Engine::new(&opts, &wl, policy, rt).run();
            let (alone, all) = (alone.unwrap(), all.unwrap());
            assert_eq!(alone.tasks.len(), all.tasks.len());
            for (a, b) in alone.tasks.iter().zip(&all.tasks) {
                assert_eq!(a.points, b.points, "{p} on {w}: {}'s {} differs", b.name, all.quantity);
            }
        }
    }
}
