//! The `interactive` benchmark (E3's Interbench) on tiny cases, and the load
//! library it brought (write, read, compile, video, x, stress, cmd): their
//! figures, their bad input, and that nothing of theirs outlives a case,
//! whether it ends, fails or is stopped. No test asserts a timing.

mod common;
use common::{lock, plan};
use schedlab_core::{BenchResult, MetricData};
use schedlab_live::{find, hygiene, LiveError, Params, RunPlan};
use std::time::Duration;

/// Every case of `interactive` with `params`.
fn run(params: &str, p: &RunPlan) -> Result<Vec<BenchResult>, LiveError> {
    common::run("interactive", params, p)
}

/// (labels, values) of an entity metric.
fn entities(r: &BenchResult, name: &str) -> (Vec<String>, Vec<f64>) {
    match &r.metric(name).unwrap_or_else(|| panic!("no {name} in {:?}", names(r))).data {
        MetricData::Entities { entity, labels, values } => {
            assert_eq!(entity, "load");
            (labels.clone(), values.clone())
        }
        other => panic!("{name} is not per load: {other:?}"),
    }
}

fn names(r: &BenchResult) -> Vec<String> {
    r.metrics.iter().map(|m| m.name.clone()).collect()
}

fn samples(r: &BenchResult, name: &str) -> Vec<f64> {
    match &r.metric(name).unwrap_or_else(|| panic!("no {name} in {:?}", names(r))).data {
        MetricData::Samples { values } => values.clone(),
        other => panic!("{name} is not per repetition: {other:?}"),
    }
}

/// Processes whose command line holds `marker` (they must all be gone).
fn processes_with(marker: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if e.file_name().to_string_lossy().parse::<u32>().is_err() {
            continue;
        }
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(marker) {
            out.push(format!("{}: {cmd}", e.file_name().to_string_lossy()));
        }
    }
    out
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn one_case_per_task_prints_interbench_rows_per_load() {
    let _g = lock();
    let r = run("task=video,x,loads=none,burn,duration=200ms", &plan(1, 0)).unwrap();
    assert_eq!(r.len(), 2, "one case per task");
    let video = &r[0];
    assert!(video.param_is("task", "video") && !video.params.contains_key("period"), "{:?}", video.params);
    for name in
        ["latency_mean.video", "latency_sd.video", "latency_max.video", "desired_cpu.video", "deadlines_met.video"]
    {
        let (labels, values) = entities(video, name);
        assert_eq!(labels, ["none", "burn"], "{name}");
        assert!(values.iter().all(|v| v.is_finite() && *v >= 0.0), "{name}: {values:?}");
    }
    for name in ["desired_cpu.video", "deadlines_met.video"] {
        assert!(entities(video, name).1.iter().all(|v| *v <= 100.0), "{name} is a percentage");
    }
    let (_, mean) = entities(video, "latency_mean.video");
    let (_, max) = entities(video, "latency_max.video");
    assert!(mean.iter().zip(&max).all(|(m, x)| m <= x), "mean {mean:?} above max {max:?}");
    // 200 ms at 60 Hz: 12 periods, each charged once.
    let m = video.metric("latency.video@none").unwrap();
    let MetricData::Histogram { histogram, repetitions } = &m.data else { panic!() };
    assert_eq!((histogram.count(), repetitions.len(), m.headline), (12, 1, true));
    assert!(samples(video, "calibration_loops_per_ms")[0] > 1.0);
    assert_eq!(samples(video, "load.burn.loops_per_s@burn").len(), 1, "the row's load, per repetition");
    // X ramps within the repetition: 2 cycles at duration=200ms.
    let x = &r[1];
    let m = x.metric("latency.x@burn").unwrap();
    let MetricData::Histogram { histogram, .. } = &m.data else { panic!() };
    assert_eq!(histogram.count(), 2);
}

#[test]
fn gaming_is_judged_by_the_cpu_it_gets_without_deadlines() {
    let _g = lock();
    let r = run("task=gaming,loads=none,duration=200ms", &plan(1, 0)).unwrap();
    let g = &r[0];
    assert!(g.metric("deadlines_met.gaming").is_none(), "gaming has no deadlines: {:?}", names(g));
    let (_, cpu) = entities(g, "desired_cpu.gaming");
    assert!(cpu[0] > 0.0 && cpu[0] <= 100.0, "{cpu:?}");
}

#[test]
fn a_calibration_from_elsewhere_is_used_stored_and_warned_about() {
    let _g = lock();
    let r = run("task=audio,loads=none,duration=100ms,calibration=1", &plan(1, 0)).unwrap();
    let a = &r[0];
    assert_eq!(samples(a, "calibration_loops_per_ms"), [1.0]);
    assert!(samples(a, "calibration_measured_loops_per_ms")[0] > 1.0);
    assert!(a.warnings.iter().any(|w| w.contains("below this machine's own")), "{:?}", a.warnings);
    assert!(a.param_is("calibration", "1"));
}

#[test]
fn bad_tasks_loads_and_periods_are_refused_before_anything_runs() {
    let _g = lock();
    let p = plan(1, 0);
    for (params, says) in [
        ("task=audio,doom", "audio, video, x, gaming, custom"),
        ("task=audio,audio", "each task once"),
        ("loads=none,hackbenc", "'hackbenc' is neither"),
        ("loads='none,spin:2'", "'spin:2' is neither"),
        ("loads='none,burn:1,color=red'", "unknown key 'color'"),
        ("loads=burn,burn", "twice"),
        ("task=custom,period=50us", "from 100us"),
        ("duration=10ms", "from 100ms"),
        ("loads='write:1,dir=/nonexistent/x'", "give dir= an existing directory"),
    ] {
        let e = run(params, &p).unwrap_err().to_string();
        assert!(e.contains(says), "{params}: {e}");
        assert!(!e.contains('\n'), "{params}: one line");
    }
}

#[test]
fn the_file_compile_and_emulated_loads_count_their_work_and_leave_nothing() {
    let _g = lock();
    let tmp = std::env::temp_dir();
    let before = std::fs::read_dir(&tmp).unwrap().count();
    let fds = open_fds();
    let loads = "loads='write:1,size=16MiB,read:1,size=16MiB,compile:1,video:1,x:1'";
    let r = run(&format!("task=audio,duration=200ms,{loads}"), &plan(1, 0)).unwrap();
    let a = &r[0];
    let (labels, _) = entities(a, "deadlines_met.audio");
    assert_eq!(labels, ["write:1,size=16MiB", "read:1,size=16MiB", "compile:1", "video:1", "x:1"]);
    for (metric, row) in [
        ("load.write.kb_per_s", "write:1,size=16MiB"),
        ("load.read.kb_per_s", "read:1,size=16MiB"),
        ("load.video.frames_per_s", "video:1"),
        ("load.x.frames_per_s", "x:1"),
    ] {
        let v = samples(a, &format!("{metric}@{row}"));
        assert!(v[0] > 0.0, "{metric} under {row}: {v:?}");
    }
    // A compile may outlast a 200 ms repetition: its figure exists, maybe 0.
    assert_eq!(samples(a, "load.compile.compiles_per_s@compile:1").len(), 1);
    assert!(a.warnings.iter().any(|w| w.contains("compiles a generated")), "{:?}", a.warnings);
    assert!(a.warnings.iter().any(|w| w.contains("from the page cache")), "{:?}", a.warnings);
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), before, "files left in {}", tmp.display());
    assert_eq!(open_fds(), fds, "descriptors left open");
    assert!(processes_with("schedlab-compile").is_empty());
}

#[test]
fn a_command_that_exits_at_once_fails_the_case_with_its_words() {
    let _g = lock();
    let e = run("task=audio,duration=100ms,loads='cmd:nosuchcommand-4710'", &plan(1, 0)).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, LiveError::LoadFailed { .. }), "{msg}");
    assert!(msg.contains("exits at once") && msg.contains("127: command not found"), "{msg}");
    assert!(msg.contains("nosuchcommand-4710: not found"), "its standard error is quoted: {msg}");
    assert!(processes_with("nosuchcommand-4710").is_empty());
}

#[test]
fn command_loads_are_killed_with_what_left_their_group_at_the_end_and_on_a_stop() {
    let _g = lock();
    // setsid puts the first sleep in a session of its own: a group kill misses it.
    let marker = "sleep 4711.5";
    let loads = format!("loads='cmd:setsid {marker} & {marker}'");
    let r = run(&format!("task=audio,duration=100ms,{loads}"), &plan(1, 0)).unwrap();
    assert!(samples(&r[0], &format!("load.cmd.cpu_percent@cmd:'setsid {marker} & {marker}'")).len() == 1);
    assert_eq!(processes_with(marker), Vec::<String>::new(), "left after the case ended");
    // A stop (Ctrl-C) in the middle of a long case.
    let marker = "sleep 4712.5";
    let loads = format!("loads='cmd:setsid {marker} & {marker}'");
    let stopper = std::thread::spawn(|| {
        std::thread::sleep(Duration::from_millis(1500));
        hygiene::request_stop();
    });
    let e = run(&format!("task=audio,duration=60s,{loads}"), &plan(1, 0)).unwrap_err();
    stopper.join().unwrap();
    hygiene::clear_stop();
    assert!(matches!(e, LiveError::Interrupted), "{e}");
    assert_eq!(processes_with(marker), Vec::<String>::new(), "left after a stop");
}

#[test]
fn every_benchmark_takes_the_new_loads() {
    let _g = lock();
    // rteval's classic case, on a tiny scale: cyclic under a real compile.
    let p = RunPlan { loads: vec![schedlab_live::load::parse("compile:1").unwrap()], ..plan(1, 0) };
    let b = find("cyclic").unwrap();
    let cases = b.cases(&Params::parse("loops=200,interval=1ms,mlock=no,pm_qos=no").unwrap(), &p).unwrap();
    let plain = p.with_condition(schedlab_core::SchedCondition::default());
    let r = b.run(&cases[0], &plain, &|_| {}).unwrap();
    assert!(r.metric("load.compile.compiles_per_s").is_some(), "{:?}", names(&r));
    assert!(processes_with("schedlab-loadsup").is_empty());
}

#[test]
#[ignore = "needs root (mounts a read-only tmpfs): CI runs ignored tests as root"]
fn a_write_load_on_a_read_only_filesystem_is_refused_with_the_fix() {
    // SAFETY: geteuid cannot fail.
    assert!(unsafe { libc::geteuid() } == 0, "this test needs root to mount a read-only tmpfs: run it as root");
    let _g = lock();
    let dir = std::env::temp_dir().join(format!("schedlab-ro-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs"])
        .arg(&dir)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mount -t tmpfs -o ro failed");
    let e = run(&format!("task=audio,loads='write:1,size=1MiB,dir={}'", dir.display()), &plan(1, 0));
    let _ = std::process::Command::new("umount").arg(&dir).status();
    let _ = std::fs::remove_dir(&dir);
    let msg = e.unwrap_err().to_string();
    assert!(msg.contains("read-only filesystem (tmpfs)") && msg.contains("give dir= a writable directory"), "{msg}");
}

#[test]
#[ignore = "needs stress-ng (apt-get install stress-ng): CI runs ignored tests"]
fn a_stress_ng_load_reports_its_cpu_and_its_workers_die_with_it() {
    let has =
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).any(|d| d.join("stress-ng").exists());
    assert!(has, "this test needs stress-ng in PATH: apt-get install stress-ng");
    let _g = lock();
    let r = run("task=audio,duration=200ms,loads='stress:--cpu 1 --vm 1 --vm-bytes 16M'", &plan(1, 0)).unwrap();
    let v = samples(&r[0], "load.stress.cpu_percent@stress:'--cpu 1 --vm 1 --vm-bytes 16M'");
    assert!(v[0] > 0.0, "{v:?}");
    assert_eq!(processes_with("stress-ng"), Vec::<String>::new(), "stress-ng workers left behind");
}
