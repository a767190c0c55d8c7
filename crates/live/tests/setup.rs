//! A case's machine-wide settings on the real kernel: a `kernel.sched_*`
//! tunable and a temporary cgroup (v2, and v1 for a controller a v1 hierarchy
//! holds), each applied, read back and put back
//! after the case, and — for a SIGKILLed measuring process — put back from
//! its recovery record as `schedlab check --restore` does. Killed runs are
//! child processes: this test binary re-executes itself with the test's
//! name and a role in `SCHEDLAB_TEST_CHILD`. They write real kernel files,
//! so they are ignored unless run as root (CI runs them). The sched_ext
//! state machine is tested against a fake sysfs in `harness/scx.rs`.

mod common;
use common::lock;
use schedlab_core::condition::{CgroupSetting, CpuMax, Tunable};
use schedlab_core::{BenchResult, Condition, SchedCondition};
use schedlab_live::cgroup;
use schedlab_live::recovery::{self, State};
use schedlab_live::{find, LiveError, Params, RunPlan};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ROLE: &str = "SCHEDLAB_TEST_CHILD";
/// Harmless to change for a few seconds: only SCHED_RR tasks' time slice.
const RR_SLICE: &str = "/proc/sys/kernel/sched_rr_timeslice_ms";

fn need_root() {
    // SAFETY: geteuid cannot fail.
    assert!(unsafe { libc::geteuid() } == 0, "this test writes kernel settings: run it as root");
}

fn read(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path.as_ref()).unwrap_or_else(|e| panic!("{}: {e}", path.as_ref().display())).trim().into()
}

/// A value for the RR time slice other than the current one.
fn other_rr_slice() -> String {
    let now: u64 = read(RR_SLICE).parse().unwrap();
    (if now == 50 { 60 } else { 50 }).to_string()
}

fn plan(condition: SchedCondition) -> RunPlan {
    RunPlan { condition, repeat: 1, warmup: 0, quick: true, ..Default::default() }
}

fn run(bench: &str, params: &str, p: &RunPlan) -> Result<BenchResult, LiveError> {
    let b = find(bench).unwrap();
    let case = b.cases(&Params::parse(params).unwrap(), p)?.remove(0);
    b.run(&case, p, &|_| {})
}

fn applied(r: &BenchResult) -> SchedCondition {
    match &r.condition {
        Condition::Live { applied: Some(a), .. } => a.clone(),
        other => panic!("no applied condition: {other:?}"),
    }
}

/// In a child started by [`spawn_child`]: run the role's case (the parent kills it).
fn child_role() {
    let Ok(role) = std::env::var(ROLE) else { return };
    let cond = match role.as_str() {
        "tunable" => SchedCondition {
            tunables: vec![Tunable { name: "kernel.sched_rr_timeslice_ms".into(), value: other_rr_slice() }],
            ..Default::default()
        },
        "cgroup" => SchedCondition { cgroup: Some(CgroupSetting::default()), ..Default::default() },
        "cgroup-weight" => SchedCondition { cgroup: Some(weight_50()), ..Default::default() },
        other => panic!("unknown child role {other}"),
    };
    // Long enough to be killed in the middle (bounded by the case limit).
    let r = run("threads", "threads=100000000", &plan(cond));
    eprintln!("child: the case ended: {:?}", r.map(|_| ()));
    std::process::exit(1);
}

fn weight_50() -> CgroupSetting {
    CgroupSetting { weight: Some(50), ..Default::default() }
}

/// This process's cgroups in the v1 hierarchies a cpu weight would be set in
/// (none when v2 has the cpu controller, or when no hierarchy has it).
fn v1_cpu_owns() -> Option<Vec<PathBuf>> {
    let h = cgroup::Hierarchy::locate().ok()?;
    let p = cgroup::check(&h, &weight_50()).ok()?;
    Some(v1_dirs(&h, [p.cpu]))
}

/// This process's cgroups in the v1 hierarchies among `places`.
fn v1_dirs<const N: usize>(h: &cgroup::Hierarchy, places: [Option<cgroup::Place>; N]) -> Vec<PathBuf> {
    places
        .into_iter()
        .flatten()
        .filter_map(|p| match p {
            cgroup::Place::V1(i) => Some(h.v1[i].own()),
            cgroup::Place::V2 => None,
        })
        .collect()
}

fn spawn_child(test: &str, role: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--include-ignored", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

fn wait_until(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(t0.elapsed() < limit, "{what} did not happen within {limit:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn records_of(pid: u32) -> Vec<recovery::Found> {
    recovery::scan().into_iter().filter(|f| f.owner_pid == pid as i32).collect()
}

/// Restore the stale records of `pid` as `schedlab check --restore` does.
fn check_restore(pid: u32) {
    for f in records_of(pid).into_iter().filter(|f| f.state == State::Stale) {
        recovery::restore_found(&f).unwrap();
    }
    assert!(records_of(pid).is_empty(), "the records are removed");
}

/// This process's cgroup v2 directory.
fn own_cgroup() -> PathBuf {
    let mounts = read("/proc/self/mounts");
    let mount = mounts
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() > 2 && f[2] == "cgroup2")
        .map(|f| f[1].to_string())
        .min_by_key(|m| m != "/sys/fs/cgroup")
        .expect("this test needs cgroup v2 mounted (mount -t cgroup2 none /sys/fs/cgroup)");
    let own = read("/proc/self/cgroup").lines().find_map(|l| l.strip_prefix("0::").map(str::to_string)).unwrap();
    Path::new(&mount).join(own.trim_start_matches('/'))
}

/// schedlab's cgroups under `dir` made by `pid`.
fn case_cgroups(dir: &Path, pid: u32) -> Vec<PathBuf> {
    let prefix = format!("schedlab-{pid}-");
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

#[test]
#[ignore = "needs root (writes kernel.sched_rr_timeslice_ms for a moment): CI runs ignored tests as root"]
fn a_sysctl_tunable_is_set_for_the_case_read_back_and_restored() {
    child_role();
    let _g = lock();
    need_root();
    let before = read(RR_SLICE);
    let want = other_rr_slice();
    let cond = SchedCondition {
        tunables: vec![Tunable { name: "kernel.sched_rr_timeslice_ms".into(), value: want.clone() }],
        ..Default::default()
    };
    let r = run("threads", "threads=2000", &plan(cond)).unwrap();
    let a = applied(&r);
    assert_eq!(a.tunables, [Tunable { name: "kernel.sched_rr_timeslice_ms".into(), value: want.clone() }]);
    assert!(a.label().contains(&format!("kernel.sched_rr_timeslice_ms={want}")), "{}", a.label());
    assert_eq!(read(RR_SLICE), before, "restored after the case");
    assert!(records_of(std::process::id()).is_empty(), "the record is removed");

    // A value the kernel refuses (runtime above the period): the errno in words, nothing changed.
    let period = read("/proc/sys/kernel/sched_rt_period_us");
    let rt_before = read("/proc/sys/kernel/sched_rt_runtime_us");
    let refused = SchedCondition {
        tunables: vec![
            Tunable { name: "kernel.sched_rr_timeslice_ms".into(), value: want },
            Tunable {
                name: "kernel.sched_rt_runtime_us".into(),
                value: (period.parse::<u64>().unwrap() + 1000).to_string(),
            },
        ],
        ..Default::default()
    };
    let e = run("threads", "threads=2000", &plan(refused)).unwrap_err().to_string();
    assert!(e.contains("the kernel refused") && e.contains("EINVAL"), "{e}");
    assert_eq!(read(RR_SLICE), before, "the first tunable, written before the refusal, is back");
    assert_eq!(read("/proc/sys/kernel/sched_rt_runtime_us"), rt_before);
    assert!(records_of(std::process::id()).is_empty());

    // Unknown and read-only names are found before anything runs.
    let unknown =
        SchedCondition { tunables: vec![Tunable::parse("kernel.sched_rr_timeslice=5").unwrap()], ..Default::default() };
    let e = find("threads").unwrap().cases(&Params::default(), &plan(unknown)).unwrap_err().to_string();
    assert!(e.contains("did you mean kernel.sched_rr_timeslice_ms"), "{e}");
}

#[test]
#[ignore = "needs root (writes kernel.sched_rr_timeslice_ms and SIGKILLs a run holding it): CI runs ignored tests as root"]
fn a_sigkilled_runs_tunable_is_restored_by_check_restore() {
    child_role();
    let _g = lock();
    need_root();
    let before = read(RR_SLICE);
    let mut child = spawn_child("a_sigkilled_runs_tunable_is_restored_by_check_restore", "tunable");
    wait_until("the child's tunable", Duration::from_secs(60), || read(RR_SLICE) != before);
    // SAFETY: signalling our own unreaped child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    assert_ne!(read(RR_SLICE), before, "a SIGKILL leaves the tunable changed");
    let found = records_of(child.id());
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].state.clone(), found[0].what.as_str()), (State::Stale, "tunables"));
    check_restore(child.id());
    assert_eq!(read(RR_SLICE), before, "the old value is back");
}

#[test]
#[ignore = "needs root and cgroup v2 mounted (makes a cgroup under this process's): CI runs ignored tests as root"]
fn a_case_cgroup_holds_the_measured_tasks_and_is_removed() {
    child_role();
    let _g = lock();
    need_root();
    let own = own_cgroup();
    let me = std::process::id();
    // No limit: no controller needed, so this runs wherever cgroup v2 is mounted.
    let cond = SchedCondition { cgroup: Some(CgroupSetting::default()), ..Default::default() };
    for (bench, params) in [("threads", "threads=200000"), ("spawn", "count=2000")] {
        let p = plan(cond.clone());
        let seen = std::thread::scope(|s| {
            let h = s.spawn(|| run(bench, params, &p));
            // While it runs: a schedlab cgroup of this process with the measured tasks in it.
            let mut seen = false;
            while !h.is_finished() {
                seen |= case_cgroups(&own, me)
                    .iter()
                    .any(|d| !std::fs::read_to_string(d.join("cgroup.threads")).unwrap_or_default().trim().is_empty());
                std::thread::sleep(Duration::from_millis(2));
            }
            let r = h.join().unwrap().unwrap();
            assert_eq!(applied(&r).cgroup, Some(CgroupSetting::default()));
            seen
        });
        assert!(seen, "{bench}: its measured tasks ran in the case's cgroup");
        assert!(case_cgroups(&own, me).is_empty(), "{bench}: the cgroup is removed");
        assert!(records_of(me).is_empty(), "{bench}: the record is removed");
    }
}

#[test]
#[ignore = "needs root and the cpu and cpuset controllers, in cgroup v2 or in mounted v1 hierarchies: CI runs ignored tests as root"]
fn a_case_cgroup_with_limits_reads_them_back() {
    child_role();
    let _g = lock();
    need_root();
    let own = own_cgroup();
    let cg = CgroupSetting { weight: Some(50), max: Some(CpuMax::parse("50ms/100ms").unwrap()), cpus: Some(vec![0]) };
    let h = cgroup::Hierarchy::locate().unwrap();
    let placement = cgroup::check(&h, &cg).unwrap_or_else(|e| {
        panic!("this test needs the cpu and cpuset controllers in cgroup v2 or in a mounted v1 hierarchy: {e}")
    });
    // Where the limits go on this machine (both paths are the product's: v2, or v1 on a hybrid layout).
    let v1_owns = v1_dirs(&h, [placement.cpu, placement.cpuset]);
    eprintln!("limits placed: cpu {:?}, cpuset {:?} ({v1_owns:?})", placement.cpu, placement.cpuset);
    let subtree_before = read(own.join("cgroup.subtree_control"));
    let me = std::process::id();
    let p = plan(SchedCondition { cgroup: Some(cg.clone()), ..Default::default() });
    let (r, seen_in_v1) = std::thread::scope(|s| {
        let h = s.spawn(|| run("threads", "threads=2000", &p));
        let mut seen = vec![false; v1_owns.len()];
        while !h.is_finished() {
            for (dir, seen) in v1_owns.iter().zip(seen.iter_mut()) {
                *seen |= case_cgroups(dir, me)
                    .iter()
                    .any(|d| !std::fs::read_to_string(d.join("tasks")).unwrap_or_default().trim().is_empty());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        (h.join().unwrap().unwrap(), seen)
    });
    assert_eq!(applied(&r).cgroup, Some(cg));
    assert!(seen_in_v1.iter().all(|s| *s), "the measured tasks ran in the v1 cgroups too: {v1_owns:?} {seen_in_v1:?}");
    assert!(case_cgroups(&own, me).is_empty(), "the cgroup is removed");
    for dir in &v1_owns {
        assert!(case_cgroups(dir, me).is_empty(), "the v1 cgroup under {} is removed", dir.display());
    }
    assert_eq!(read(own.join("cgroup.subtree_control")), subtree_before, "controllers it enabled are disabled again");
}

#[test]
#[ignore = "needs root and cgroup v2 mounted (SIGKILLs a run holding a cgroup, with a cpu weight where a controller takes it): CI runs ignored tests as root"]
fn a_sigkilled_runs_cgroup_is_removed_by_check_restore() {
    child_role();
    let _g = lock();
    need_root();
    let own = own_cgroup();
    // With a cpu weight where the cpu controller is anywhere (v2, or a v1
    // hierarchy, whose cgroup the record must remove too), else without.
    let v1 = v1_cpu_owns();
    let role = if v1.is_some() { "cgroup-weight" } else { "cgroup" };
    let v1 = v1.unwrap_or_default();
    let mut child = spawn_child("a_sigkilled_runs_cgroup_is_removed_by_check_restore", role);
    let pid = child.id();
    wait_until("the child's cgroups", Duration::from_secs(60), || {
        !case_cgroups(&own, pid).is_empty() && v1.iter().all(|d| !case_cgroups(d, pid).is_empty())
    });
    // SAFETY: signalling our own unreaped child.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    child.wait().unwrap();
    assert_eq!(case_cgroups(&own, pid).len(), 1, "a SIGKILL leaves the cgroup");
    for d in &v1 {
        assert_eq!(case_cgroups(d, pid).len(), 1, "a SIGKILL leaves the v1 cgroup under {}", d.display());
    }
    let found = records_of(pid);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].state.clone(), found[0].what.as_str()), (State::Stale, "cgroup"));
    check_restore(pid);
    assert!(case_cgroups(&own, pid).is_empty(), "the cgroup is removed");
    for d in &v1 {
        assert!(case_cgroups(d, pid).is_empty(), "the v1 cgroup under {} is removed", d.display());
    }
    eprintln!("role {role}, v1 cgroups checked: {v1:?}");
}
