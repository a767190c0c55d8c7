//! The build benchmark on tiny cases: the generated project across a -j
//! sweep, custom commands, failures with their logs, bad input, the
//! condition reaching the build's processes, and a stop that leaves no
//! process, project or child behind. The tests share the stop flag, the
//! working directory and PATH, so each takes `LOCK` and works in its own
//! temp directory (TMPDIR too: the build logs go there). No timing assertions.

mod common;
use common::plan;
use schedlab_core::{BenchResult, Condition, MetricData, SchedCondition};
use schedlab_live::{find, hygiene, LiveError, Params, RunPlan};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

static LOCK: Mutex<()> = Mutex::new(());

/// The lock, a clear stop flag and a fresh working directory (removed on drop).
struct Env {
    _g: MutexGuard<'static, ()>,
    dir: PathBuf,
    back: PathBuf,
    tmpdir: Option<std::ffi::OsString>,
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = std::env::set_current_dir(&self.back);
        match &self.tmpdir {
            Some(t) => std::env::set_var("TMPDIR", t),
            None => std::env::remove_var("TMPDIR"),
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        hygiene::clear_stop();
    }
}

fn env(tag: &str) -> Env {
    let g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    hygiene::clear_stop();
    let dir = std::env::temp_dir().join(format!("schedlab-buildtest-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let back = std::env::current_dir().unwrap();
    std::env::set_current_dir(&dir).unwrap();
    // The logs and the generated project go to the temp directory: this one.
    let tmpdir = std::env::var_os("TMPDIR");
    std::env::set_var("TMPDIR", &dir);
    Env { _g: g, dir, back, tmpdir }
}

fn in_path(name: &str) -> bool {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).any(|d| d.join(name).is_file())
}

/// The build benchmark's tests compile a generated project: without cc and
/// make they cannot run, so they fail saying so (never pass unrun).
fn require_toolchain() {
    assert!(
        in_path("cc") && in_path("make"),
        "this test cannot run here: it needs cc and make (apt-get install build-essential)"
    );
}

fn run(params: &str, plan: &RunPlan) -> Result<Vec<BenchResult>, LiveError> {
    common::run("build", params, plan)
}

fn samples<'a>(r: &'a BenchResult, metric: &str) -> &'a [f64] {
    match &r.metric(metric).unwrap_or_else(|| panic!("no metric {metric}")).data {
        MetricData::Samples { values } => values,
        other => panic!("{metric} is not samples: {other:?}"),
    }
}

fn my_children() -> Vec<i32> {
    hygiene::children_of(std::process::id() as i32)
}

/// Generated projects of this process still in the temp directory.
fn projects_left() -> Vec<PathBuf> {
    let prefix = format!("schedlab-{}-", std::process::id());
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            n.starts_with(&prefix) && n.ends_with("-build")
        })
        .collect()
}

/// Processes whose command line contains `marker`, or whose working
/// directory is under `dir`.
fn processes_with(marker: Option<&str>, dir: Option<&Path>) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let cwd = std::fs::read_link(e.path().join("cwd")).ok();
        if marker.is_some_and(|m| cmdline.contains(m)) || dir.is_some_and(|d| cwd.is_some_and(|c| c.starts_with(d))) {
            out.push(pid);
        }
    }
    out
}

fn logs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("schedlab-build-logs"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn the_generated_project_sweeps_jobs_and_leaves_nothing_behind() {
    let e = env("sweep");
    require_toolchain();
    let cores = std::thread::available_parallelism().unwrap().get() as f64;
    let r = run("jobs=1,2,units=3,funcs=2", &plan(2, 1)).unwrap();
    assert_eq!(r.len(), 2, "one case per job count");
    for (case, j) in r.iter().zip([1, 2]) {
        assert_eq!(case.params["jobs"], serde_json::json!(j), "each case holds its own job count, as a number");
        let wall = samples(case, "wall_time");
        let (user, sys, cpu) = (samples(case, "user_time"), samples(case, "sys_time"), samples(case, "cpu_percent"));
        assert_eq!([wall.len(), user.len(), sys.len(), cpu.len()], [2; 4], "one value per measured repetition");
        assert!(case.metric("wall_time").unwrap().headline);
        assert!(wall.iter().all(|w| *w > 0.0 && *w < 60.0), "{wall:?}");
        // The compilers are grandchildren of the shell: their CPU time must be counted.
        assert!(user.iter().zip(sys).all(|(u, s)| u + s > 0.0), "user {user:?} sys {sys:?}");
        assert!(cpu.iter().all(|c| *c > 0.0 && *c <= 100.0 * cores * 1.1), "cpu_percent {cpu:?} on {cores} CPUs");
        for i in 0..2 {
            assert!((cpu[i] - (user[i] + sys[i]) / wall[i] * 100.0).abs() < 1e-6);
        }
        let note = case.warnings.iter().find(|w| w.contains("schedlab-build-logs")).expect("a note names the logs");
        assert!(note.contains("3 units x 2 functions"), "{note}");
    }
    // The generated project's logs are kept only when a build fails.
    assert_eq!(logs(&e.dir), Vec::<PathBuf>::new(), "successful builds leave no log");
    assert!(!e.dir.join("schedlab-build-logs").read_dir().is_ok_and(|mut d| d.next().is_some()));
    assert_eq!(projects_left(), Vec::<PathBuf>::new(), "temp project left behind");
    assert_eq!(my_children(), Vec::<i32>::new(), "children left behind");
}

#[test]
fn a_custom_command_gets_j_and_its_clean_step_and_the_condition() {
    let e = env("custom");
    // `{j}` substituted, clean run before every build, the build's processes
    // (cat is the shell's child or its exec) niced by the condition.
    let p = RunPlan { condition: SchedCondition { nice: Some(5), ..Default::default() }, ..plan(2, 1) };
    let r =
        run("cmd=echo jobs {j} >> built.txt; cat /proc/self/stat,clean=echo clean >> built.txt,jobs=3", &p).unwrap();
    assert_eq!(r.len(), 1);
    let built = std::fs::read_to_string(e.dir.join("built.txt")).unwrap();
    assert_eq!(built, "clean\njobs 3\n".repeat(3), "clean before each of 3 builds");
    match &r[0].condition {
        Condition::Live { applied: Some(a), .. } => assert_eq!(a.nice, Some(5), "{a:?}"),
        other => panic!("no applied condition: {other:?}"),
    }
    for f in logs(&e.dir) {
        let text = std::fs::read_to_string(&f).unwrap();
        let stat = text.lines().find(|l| !l.starts_with('#')).unwrap_or_else(|| panic!("{f:?}: {text}"));
        // Fields after "(comm)": state is field 3, nice field 19.
        let nice = stat.rsplit_once(')').unwrap().1.split_whitespace().nth(16).unwrap();
        assert_eq!(nice, "5", "the build's process must inherit the condition: {stat}");
    }
    assert_eq!(samples(&r[0], "wall_time").len(), 2);
    let keys: Vec<&String> = r[0].params.keys().collect();
    assert_eq!(keys, ["clean", "cmd", "jobs"], "the generated project's shape is not stored with a command");
    assert_eq!(my_children(), Vec::<i32>::new());
}

#[test]
fn a_failing_build_fails_the_benchmark_and_quotes_its_log() {
    let e = env("fail");
    let err = run("cmd='false',clean=none,jobs=1", &plan(1, 0)).unwrap_err();
    assert!(matches!(err, LiveError::CommandFailed { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("exit status 1") && msg.contains("# schedlab build: false"), "{msg}");
    let err = run("cmd='echo compiling u0.c; echo \"u0.c:3: error: boom\" >&2; exit 2',clean=none,jobs=2", &plan(1, 1))
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("exit status 2") && msg.contains("compiling u0.c | u0.c:3: error: boom"), "{msg}");
    assert!(msg.contains("-j2-warmup1.log"), "the warm-up build failed and its log is named: {msg}");
    assert!(logs(&e.dir).iter().all(|f| f.exists()), "logs outlive the run");
    // A failing clean step fails it too, before any build.
    let err = run("cmd=true,clean=exit 3,jobs=1", &plan(1, 0)).unwrap_err().to_string();
    assert!(err.contains("the clean step 'exit 3' failed (exit status 3)"), "{err}");
    // A program the shell cannot find (quoted, so only the shell looks it up).
    let err = run("cmd='\"schedlab-no-such-tool\" -j{j}',clean=none,jobs=1", &plan(1, 0)).unwrap_err().to_string();
    assert!(err.contains("command not found") && err.contains("schedlab-no-such-tool"), "{err}");
    assert_eq!(my_children(), Vec::<i32>::new());
}

#[test]
fn bad_input_is_refused_before_anything_runs() {
    let _e = env("bad");
    let b = find("build").unwrap();
    let cases = |params: &str| b.cases(&Params::parse(params).unwrap(), &plan(1, 0));
    for jobs in ["0", "1,0", "x", "2,2", "1025", "-1"] {
        let err = cases(&format!("jobs={jobs}")).unwrap_err();
        assert!(matches!(err, LiveError::BadParam { .. }), "jobs={jobs}: {err}");
        assert!(err.to_string().contains("from 1 to 1024"), "{err}");
    }
    let err = cases("cmd=schedlab-no-such-tool -j{j},clean=none").unwrap_err();
    assert!(matches!(err, LiveError::MissingTool { .. }), "{err}");
    assert!(err.to_string().contains("'schedlab-no-such-tool'"), "{err}");
    let err = cases("cmd=sleep {j},clean=/no/such/cleaner").unwrap_err().to_string();
    assert!(err.contains("'/no/such/cleaner' (the program clean= starts)"), "{err}");
    let err = cases("cmd=sleep 4,clean=none,jobs=1,2").unwrap_err().to_string();
    assert!(err.contains("{j}"), "several job counts need {{j}}: {err}");
    assert!(cases("cmd=sleep 4,clean=none,jobs=4").is_ok(), "one job count needs no {{j}}");
    let err = cases("cmd=sleep {j}").unwrap_err().to_string();
    assert!(err.contains("clean=none"), "cmd= needs a clean step or clean=none: {err}");
    let err = cases("cmd=sleep {j},clean=none,units=8").unwrap_err().to_string();
    assert!(err.contains("units") && err.contains("generated project only"), "{err}");
    let err = cases("clean=make clean").unwrap_err().to_string();
    assert!(err.contains("clean= goes with cmd="), "{err}");
    let deadline = RunPlan {
        condition: SchedCondition { policy: schedlab_core::SchedPolicy::Deadline, ..Default::default() },
        ..plan(1, 0)
    };
    let err = b.cases(&Params::new(), &deadline).unwrap_err();
    assert!(matches!(err, LiveError::DeadlineCannotFork { .. } | LiveError::Condition(_)), "{err}");
    // A case holds one job count: run() refuses a list.
    let err = b.run(&Params::parse("jobs=1,2").unwrap(), &plan(1, 0), &|_| {}).unwrap_err().to_string();
    assert!(err.contains("one job count"), "{err}");
}

#[test]
fn a_missing_compiler_or_make_names_the_package_and_ccache_is_skipped() {
    let e = env("tools");
    let bin = e.dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let with_path = |p: &std::ffi::OsStr| {
        std::env::set_var("PATH", p);
        let r = find("build").unwrap().cases(&Params::new(), &plan(1, 0));
        std::env::set_var("PATH", &path);
        r
    };
    let exe = |name: &str, target: Option<&str>| {
        let p = bin.join(name);
        match target {
            Some(t) => std::os::unix::fs::symlink(t, &p).unwrap(),
            None => {
                std::fs::write(&p, "#!/bin/sh\nexit 0\n").unwrap();
                std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
            }
        }
    };
    let err = with_path(bin.as_os_str()).unwrap_err().to_string();
    assert!(err.contains("C compiler") && err.contains("build-essential"), "{err}");
    // A cc that is ccache in disguise does not count.
    exe("ccache", None);
    exe("cc", Some("ccache"));
    let err = with_path(bin.as_os_str()).unwrap_err().to_string();
    assert!(err.contains("C compiler"), "a ccache wrapper is no compiler here: {err}");
    std::fs::remove_file(bin.join("cc")).unwrap();
    exe("cc", None);
    let err = with_path(bin.as_os_str()).unwrap_err().to_string();
    assert!(err.contains("needs make") && err.contains("apt install make"), "{err}");
    exe("make", None);
    assert_eq!(with_path(bin.as_os_str()).unwrap().len(), 3, "quick jobs 1,2,4");
}

#[test]
fn a_stop_mid_build_kills_the_whole_tree_and_removes_the_project() {
    let e = env("stop");
    // Stop once the build has run `ms`: its shell is our child by then.
    let stop_after = |ms: u64| {
        move |_: f64| {
            if !my_children().is_empty() && !hygiene::stop_requested() {
                std::thread::sleep(Duration::from_millis(ms));
                hygiene::request_stop();
            }
        }
    };
    // Processes beside and after the shell's first child, one in the background.
    let marker = format!("31.{}", std::process::id());
    let case = Params::parse(&format!("cmd=sleep {marker} & sleep {marker}; wait,clean=none,jobs=1")).unwrap();
    let saw = std::cell::Cell::new(0);
    let t0 = Instant::now();
    let err = find("build")
        .unwrap()
        .run(&case, &plan(1, 0), &|f| {
            saw.set(saw.get().max(processes_with(Some(&marker), None).len()));
            stop_after(200)(f)
        })
        .unwrap_err();
    assert!(matches!(err, LiveError::Interrupted), "{err}");
    assert!(saw.get() >= 3, "the shell and both sleeps should have been running ({})", saw.get());
    assert!(t0.elapsed() < Duration::from_secs(10), "the stop must not wait for the build");
    assert_eq!(processes_with(Some(&marker), None), Vec::<i32>::new(), "the build's processes survived");
    assert_eq!(my_children(), Vec::<i32>::new());
    hygiene::clear_stop();
    require_toolchain();
    // The generated project, big enough to be compiling when the stop comes.
    let case = Params::parse("jobs=2,units=64,funcs=40").unwrap();
    let in_project = || {
        let prefix = format!("schedlab-{}-", std::process::id());
        processes_with(None, Some(&std::env::temp_dir()))
            .into_iter()
            .filter(|pid| {
                std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| {
                    c.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
                        && c.to_string_lossy().ends_with("-build")
                })
            })
            .collect::<Vec<i32>>()
    };
    let saw = std::cell::Cell::new(0);
    let err = find("build")
        .unwrap()
        .run(&case, &plan(1, 0), &|f| {
            saw.set(saw.get().max(in_project().len()));
            stop_after(500)(f)
        })
        .unwrap_err();
    assert!(matches!(err, LiveError::Interrupted), "{err}");
    assert!(saw.get() >= 2, "make and its compilers should have been running ({})", saw.get());
    assert_eq!(projects_left(), Vec::<PathBuf>::new(), "the temp project must go on a stop");
    assert_eq!(in_project(), Vec::<i32>::new(), "compilers survived the stop");
    assert_eq!(my_children(), Vec::<i32>::new());
    assert!(!logs(&e.dir).is_empty(), "the interrupted build's log stays");
}

#[test]
fn loads_see_each_build_as_a_repetition() {
    let _e = env("loads");
    let p = RunPlan { loads: vec![schedlab_live::load::parse("burn:1,nice=19").unwrap()], ..plan(3, 1) };
    let r = run("cmd=sleep 0.05,clean=none,jobs=1", &p).unwrap();
    let burn = samples(&r[0], "load.burn.loops_per_s");
    assert_eq!(burn.len(), 3, "one load figure per measured build");
    assert!(!r[0].warnings.iter().any(|w| w.contains("not marked")), "{:?}", r[0].warnings);
    let wall = samples(&r[0], "wall_time");
    assert!(wall.iter().all(|w| *w >= 0.05), "{wall:?}");
    assert_eq!(my_children(), Vec::<i32>::new(), "load tasks left behind");
}
