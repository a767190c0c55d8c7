//! Real-time safety and interrupts, seen from outside: the RT watchdog
//! catching a stall long before the case limit, a second Ctrl-C that must
//! not cut ftrace's restoration short, a SIGKILLed run's recovery record
//! restored as `schedlab check --restore` does, and how fast a Ctrl-C ends a
//! case (no zombies left). Interrupted runs are child processes: this test
//! binary re-executes itself with the test's name and a role in
//! `SCHEDLAB_TEST_CHILD`, and the test's first line hands such a child to
//! its role. The stop-latency bound (1 s, for a 0.2 s goal) is generous for
//! a noisy shared machine. Every test takes `LOCK` (they share ftrace, the
//! stop flag and this process's children).

mod common;
use common::lock;
use schedlab_core::SchedCondition;
use schedlab_live::recovery::{self, Record, State, Step};
use schedlab_live::{condition, find, hygiene, load, LiveError, Params, RunPlan};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ROLE: &str = "SCHEDLAB_TEST_CHILD";
const RT_RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";
const TRACEFS: &str = "/sys/kernel/tracing";

fn need_root_and_two_cpus() {
    // SAFETY: geteuid cannot fail.
    assert!(unsafe { libc::geteuid() } == 0, "this test needs root (RT policies, ftrace): run it as root");
    assert!(condition::online_cpus().unwrap().len() >= 2, "this test needs two online CPUs");
}

fn plan(loads: &[&str]) -> RunPlan {
    RunPlan {
        repeat: 1,
        warmup: 0,
        quick: true,
        loads: loads.iter().map(|l| load::parse(l).unwrap()).collect(),
        ..Default::default()
    }
}

/// In a child, SIGINT and SIGTERM are blocked before `main`, so in every
/// thread libtest starts, as `schedlab` blocks them before starting any:
/// the harness's signal thread is then the one that takes them. (Without
/// this, libtest's main thread, a normal one, would take the Ctrl-C, and an
/// RT load would delay it.)
#[used]
#[link_section = ".init_array"]
static BLOCK_IN_CHILD: extern "C" fn() = block_in_child;

extern "C" fn block_in_child() {
    // SAFETY: getenv with a valid C string before any thread exists; then
    // a signal mask change of this (the only) thread.
    unsafe {
        if libc::getenv(c"SCHEDLAB_TEST_CHILD".as_ptr()).is_null() {
            return;
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// In a child started by [`spawn_child`]: run the role and exit with 130
/// when interrupted (as `schedlab run` does), 0 when it finished, 1 on an error.
fn child_role() {
    let Ok(role) = std::env::var(ROLE) else { return };
    hygiene::install_signal_handlers().unwrap();
    let (bench, params, p) = match role.as_str() {
        "wakeup-hackbench" => ("wakeup", "samples=200000,interval=1000", plan(&["hackbench:10"])),
        "wakeup-rtburn" => ("wakeup", "samples=200000,interval=1000", plan(&["burn:2,policy=fifo,prio=10"])),
        "hackbench" => ("hackbench", "groups=10,loops=100000000", plan(&[])),
        "breaktrace" => (
            "cyclic",
            "interval=500,loops=100000000,breaktrace=100000",
            RunPlan { condition: SchedCondition { cpus: Some(vec![0]), ..Default::default() }, ..plan(&[]) },
        ),
        "stuck" => {
            // A setting held while the cleanup hangs: only the forced exit can put it back.
            let mask = Path::new(TRACEFS).join("tracing_cpumask");
            let old = std::fs::read_to_string(&mask).unwrap();
            let _record = Record::create("ftrace", vec![Step::write(&mask, old.trim())]).unwrap();
            std::fs::write(&mask, "1").unwrap();
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        other => panic!("unknown child role {other}"),
    };
    let b = find(bench).unwrap();
    let case = b.cases(&Params::parse(params).unwrap(), &p).unwrap().remove(0);
    let code = match b.run(&case, &p, &|_| {}) {
        Ok(_) => 0,
        Err(LiveError::Interrupted) => 130,
        Err(e) => {
            eprintln!("child: {e}");
            1
        }
    };
    std::process::exit(code);
}

/// This test binary, running only `test` as a child in `role`.
fn spawn_child(test: &str, role: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--include-ignored", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: signalling our own unreaped child.
    unsafe { libc::kill(child.id() as i32, sig) };
}

/// Wait for the child's exit, at most `limit`; its exit code and how long that took.
fn wait_exit(child: &mut Child, limit: Duration) -> (Option<i32>, Duration) {
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return (st.code(), t0.elapsed());
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn wait_until(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(t0.elapsed() < limit, "{what} did not happen within {limit:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Every process below `pid` (children, grandchildren, ...).
fn descendants(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        for c in hygiene::children_of(p) {
            out.push(c);
            todo.push(c);
        }
    }
    out
}

/// Make this test process the reaper of whatever a child leaves behind, so
/// that leftovers (alive or zombie) show up as its own children.
fn adopt_leftovers() {
    // SAFETY: prctl with constant arguments.
    assert_eq!(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }, 0);
}

fn leftovers() -> Vec<String> {
    hygiene::children_of(std::process::id() as i32)
        .into_iter()
        .map(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default())
        .collect()
}

/// The ftrace settings a breaktrace session changes (see common::ftrace_settings).
fn ftrace_settings() -> Vec<String> {
    common::ftrace_settings(Path::new(TRACEFS))
}

/// ftrace, free: root, tracefs mounted, nothing else tracing.
fn free_ftrace() -> Vec<String> {
    need_root_and_two_cpus();
    assert!(
        Path::new(TRACEFS).join("trace").exists(),
        "this test needs tracefs: mount -t tracefs nodev /sys/kernel/tracing"
    );
    let s = ftrace_settings();
    assert!(
        s.contains(&"set_event=".to_string()) && s.contains(&"current_tracer=nop\n".to_string()),
        "ftrace is in use ({s:?}): stop it (trace-cmd reset, schedlab check --restore) and rerun"
    );
    s
}

fn records_of(pid: u32) -> Vec<recovery::Found> {
    recovery::scan().into_iter().filter(|f| f.owner_pid == pid as i32).collect()
}

#[test]
#[ignore = "needs root and two CPUs, and turns RT throttling off for ~2 s: CI runs ignored tests as root (cargo test -- --ignored)"]
fn a_starving_rt_load_is_demoted_within_two_seconds_of_the_stall() {
    let _g = lock();
    need_root_and_two_cpus();
    // The case: exectime's FIFO 50 copiers starved by FIFO 90 burners
    // on every CPU, throttling off, --force. Before, only the case limit
    // (60 s + 20 x the estimate) ended it. The timeout bounds a regression.
    let old = std::fs::read_to_string(RT_RUNTIME).unwrap().trim().to_string();
    let _safety = hygiene::arm_timeout(Duration::from_secs(15));
    let t0 = Instant::now();
    let result = {
        // Written down before the change: a SIGKILLed test leaves a record for `schedlab check --restore`.
        let _throttling = Record::create("sysctl", vec![Step::write(RT_RUNTIME, &old)]).unwrap();
        std::fs::write(RT_RUNTIME, "-1").unwrap();
        let p = RunPlan { force: true, ..plan(&["burn:2,policy=fifo,prio=90"]) };
        find("exectime").unwrap().run(&Params::parse("threads=2").unwrap(), &p, &|_| {})
    };
    let took = t0.elapsed();
    assert_eq!(std::fs::read_to_string(RT_RUNTIME).unwrap().trim(), old, "RT throttling restored");
    let reason = hygiene::stop_reason();
    hygiene::clear_stop();
    let msg = result.expect_err("the starved case cannot complete").to_string();
    eprintln!("watchdog: the case ended {:.2} s after it started: {msg}", took.as_secs_f64());
    assert_eq!(reason, Some(hygiene::StopReason::Watchdog), "{msg}");
    assert!(msg.contains("the RT watchdog fired") && msg.contains("schedlab-burn"), "{msg}");
    assert!(msg.contains("held CPU "), "the CPU is named: {msg}");
    let stalled: f64 = msg
        .split("no progress for ")
        .nth(1)
        .and_then(|r| r.split(" s ").next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no stall length in {msg}"));
    assert!((1.5..3.0).contains(&stalled), "demoted {stalled} s into the stall (goal: within 2 s): {msg}");
}

#[test]
#[ignore = "needs root, two CPUs and tracefs: CI runs ignored tests as root (cargo test -- --ignored)"]
fn a_second_ctrl_c_does_not_cut_ftrace_restoration_short() {
    child_role();
    let _g = lock();
    let before = free_ftrace();
    // The sequence: breaktrace on CPU 0, SIGINT, 20 ms, SIGINT.
    let mut child = spawn_child("a_second_ctrl_c_does_not_cut_ftrace_restoration_short", "breaktrace");
    wait_until("ftrace taken by the child", Duration::from_secs(30), || ftrace_settings() != before);
    std::thread::sleep(Duration::from_millis(300));
    signal(&child, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(20));
    signal(&child, libc::SIGINT);
    let (code, took) = wait_exit(&mut child, Duration::from_secs(10));
    assert_eq!(code, Some(130), "exit {code:?}");
    eprintln!("breaktrace child exited {:.3} s after the second SIGINT", took.as_secs_f64());
    assert_eq!(ftrace_settings(), before, "every ftrace setting is back");
    assert!(records_of(child.id()).is_empty(), "its recovery record is removed");

    // A cleanup that hangs: the second signal still restores what the
    // process holds (after the grace) before it exits.
    let mut child = spawn_child("a_second_ctrl_c_does_not_cut_ftrace_restoration_short", "stuck");
    wait_until("the child's setting", Duration::from_secs(30), || ftrace_settings() != before);
    assert_eq!(records_of(child.id()).len(), 1, "written down before the change");
    signal(&child, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(20));
    signal(&child, libc::SIGINT);
    let (code, _) = wait_exit(&mut child, Duration::from_secs(10));
    assert_eq!(code, Some(130), "exit {code:?}");
    assert_eq!(ftrace_settings(), before, "restored by the forced exit");
    assert!(records_of(child.id()).is_empty());
}

#[test]
#[ignore = "needs root, two CPUs and tracefs: CI runs ignored tests as root (cargo test -- --ignored)"]
fn a_sigkilled_runs_ftrace_is_restored_from_its_recovery_record() {
    child_role();
    let _g = lock();
    let before = free_ftrace();
    let mut child = spawn_child("a_sigkilled_runs_ftrace_is_restored_from_its_recovery_record", "breaktrace");
    wait_until("ftrace taken by the child", Duration::from_secs(30), || {
        ftrace_settings().iter().any(|s| s.starts_with("set_event=") && s.len() > "set_event=\n".len())
    });
    signal(&child, libc::SIGKILL);
    child.wait().unwrap();
    let left = ftrace_settings();
    assert_ne!(left, before, "a SIGKILL leaves ftrace changed");
    let found = records_of(child.id());
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].state.clone(), found[0].what.as_str()), (State::Stale, "ftrace"));
    assert!(found[0].describe().contains("ended without restoring"), "{}", found[0].describe());
    // A new breaktrace run is refused and told the fix.
    let p = RunPlan { condition: SchedCondition { cpus: Some(vec![0]), ..Default::default() }, ..plan(&[]) };
    let e = find("cyclic").unwrap().cases(&Params::parse("breaktrace=500").unwrap(), &p).unwrap_err().to_string();
    assert!(e.contains("ftrace is in use") && e.contains("schedlab check --restore"), "{e}");
    // What `schedlab check --restore` does.
    for f in recovery::scan().into_iter().filter(|f| f.state == State::Stale) {
        recovery::restore_found(&f).unwrap();
    }
    assert_eq!(ftrace_settings(), before, "every ftrace setting is back");
    assert!(records_of(child.id()).is_empty(), "the record is removed");
}

/// Time from SIGINT to the child's exit, with the child in `role`, signalled
/// once `ready` holds (given the child's pid); nothing may be left behind.
fn stop_latency(test: &str, role: &str, ready: impl Fn(i32) -> bool) -> Duration {
    adopt_leftovers();
    let mut child = spawn_child(test, role);
    let pid = child.id() as i32;
    // After the spawn (the child must not inherit it): FIFO, so an RT load
    // in the child cannot delay this side's signal or its look at the exit.
    let _back = condition::ThreadGuard::capture().unwrap();
    let fifo = SchedCondition { policy: schedlab_core::SchedPolicy::Fifo, priority: Some(50), ..Default::default() };
    condition::apply(0, &fifo, None).unwrap();
    wait_until(&format!("{role} ready"), Duration::from_secs(60), || ready(pid));
    signal(&child, libc::SIGINT);
    let (code, took) = wait_exit(&mut child, Duration::from_secs(20));
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    assert_eq!(code, Some(130), "{role}: exit {code:?}: {err}");
    assert_eq!(leftovers(), Vec::<String>::new(), "{role}: processes left behind (zombies if state Z)");
    eprintln!("{role}: exited {:.3} s after SIGINT", took.as_secs_f64());
    took
}

#[test]
#[ignore = "needs root and two CPUs (FIFO waker, RT load): CI runs ignored tests as root (cargo test -- --ignored)"]
fn ctrl_c_ends_a_case_at_once_under_loads_and_leaves_no_zombie() {
    child_role();
    let _g = lock();
    need_root_and_two_cpus();
    let me = "ctrl_c_ends_a_case_at_once_under_loads_and_leaves_no_zombie";
    let limit = Duration::from_secs(1);
    // While the 400 hackbench:10 load tasks are being forked...
    let t = stop_latency(me, "wakeup-hackbench", |pid| descendants(pid).len() >= 5);
    assert!(t < limit, "stop while starting hackbench:10 took {t:?}");
    // ... and while measuring under it.
    let t = stop_latency(me, "wakeup-hackbench", |pid| {
        descendants(pid).len() >= 400 && {
            std::thread::sleep(Duration::from_millis(500));
            true
        }
    });
    assert!(t < limit, "stop while measuring under hackbench:10 took {t:?}");
    // Two FIFO burners fill both CPUs: the harness's normal threads get the
    // CPU only once the RT tasks are demoted.
    let t = stop_latency(me, "wakeup-rtburn", |pid| {
        descendants(pid).len() >= 2 && {
            std::thread::sleep(Duration::from_millis(800));
            true
        }
    });
    assert!(t < limit, "stop under an RT burn load took {t:?}");
    // The hackbench benchmark's runner forks 400 workers: killed with it,
    // they are reaped by the harness, not left to init.
    let t = stop_latency(me, "hackbench", |pid| descendants(pid).len() >= 400);
    assert!(t < limit, "stop of hackbench groups=10 took {t:?}");
}
