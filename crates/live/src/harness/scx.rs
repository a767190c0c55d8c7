//! A sched_ext scheduler for a case (`--scx NAME`, `--scx-cmd '...'`).
//!
//! sched_ext (Linux 6.12+, CONFIG_SCHED_CLASS_EXT) runs a BPF scheduler that
//! a user-space program loads; the kernel says what it is doing in
//! /sys/kernel/sched_ext: `state` (disabled, enabling, enabled, disabling),
//! `root/ops` (the loaded scheduler's name) and `enable_seq` (how many times
//! one was enabled since boot). The state machine:
//!
//! ```text
//!  preflight  sysfs dir exists (else: this kernel has no sched_ext), root,
//!             the program found in PATH, state = disabled (nobody else's)
//!  start      spawn it (own process group; PR_SET_PDEATHSIG = SIGINT, so it
//!             unloads when schedlab dies, even by SIGKILL) ─> poll state
//!             until enabled (its exit or a timeout: error with its output)
//!             ─> read root/ops and enable_seq
//!  ... case ...
//!  stop       did it run throughout? (still alive, still enabled, same
//!             enable_seq) ─> SIGINT to its group (SIGKILL after a grace)
//!             ─> poll until state = disabled
//! ```
//!
//! The sysfs directory is configurable, so the machine is tested against a
//! fake directory whose "scheduler" is a shell script flipping its `state`
//! file. It was not run against a real sched_ext kernel (docs/live.md).

use crate::error::LiveError;
use crate::harness::hygiene;
use crate::harness::setup::{is_root, SetupError};
use schedlab_core::condition::ScxSetting;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SYSFS: &str = "/sys/kernel/sched_ext";

/// How many schedulers this process runs now: its own is not "someone else's"
/// to a preflight made while it runs.
static OURS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Where and how to drive sched_ext.
#[derive(Debug, Clone)]
pub struct ScxControl {
    /// /sys/kernel/sched_ext, or a fake one.
    pub sysfs: PathBuf,
    /// Refuse to start without root (the real kernel refuses anyway).
    pub need_root: bool,
    /// The PATH to find `scx_NAME` in (None: this process's).
    pub path: Option<OsString>,
    /// How long a scheduler may take to load (BPF verification takes seconds).
    pub enable_timeout: Duration,
    /// How long it may take to exit and the kernel to fall back.
    pub disable_timeout: Duration,
}

impl ScxControl {
    pub fn system() -> ScxControl {
        ScxControl {
            sysfs: PathBuf::from(SYSFS),
            need_root: true,
            path: None,
            enable_timeout: Duration::from_secs(30),
            disable_timeout: Duration::from_secs(10),
        }
    }

    fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.sysfs.join(rel)).ok().map(|s| s.trim().to_string())
    }

    /// The kernel's sched_ext state ("disabled", "enabled", ...).
    pub fn state(&self) -> Option<String> {
        self.read("state")
    }

    /// The argv to run: `scx_NAME`, or the `--scx-cmd` line split as a shell
    /// would (no shell runs it), its program found in PATH.
    pub fn command(&self, s: &ScxSetting) -> Result<Vec<String>, SetupError> {
        let mut argv = match &s.cmd {
            Some(c) => shlex::split(c).filter(|a| !a.is_empty()).ok_or_else(|| SetupError::Failed {
                what: "reading --scx-cmd".into(),
                detail: format!("'{c}' has unbalanced quotes or is empty"),
                fix: "quote it as a shell would, e.g. --scx-cmd 'scx_rusty --slice-us 5000'".into(),
            })?,
            None => vec![format!("scx_{}", s.name)],
        };
        let program = argv[0].clone();
        let found = if program.contains('/') {
            Some(PathBuf::from(&program)).filter(|p| executable(p))
        } else {
            let path = self.path.clone().or_else(|| std::env::var_os("PATH")).unwrap_or_default();
            std::env::split_paths(&path).map(|d| d.join(&program)).find(|p| executable(p))
        };
        argv[0] = found.ok_or(SetupError::ScxMissing { program })?.to_string_lossy().into_owned();
        Ok(argv)
    }

    /// Check that `s` can start now; its argv.
    pub fn preflight(&self, s: &ScxSetting) -> Result<Vec<String>, SetupError> {
        if !self.sysfs.is_dir() {
            return Err(SetupError::NoSchedExt { dir: self.sysfs.display().to_string() });
        }
        if self.need_root && !is_root() {
            return Err(SetupError::NotRoot { what: "--scx (loading a sched_ext scheduler)" });
        }
        let argv = self.command(s)?;
        match self.state().as_deref() {
            Some("disabled") => Ok(argv),
            Some(_) if OURS.load(std::sync::atomic::Ordering::SeqCst) > 0 => Ok(argv),
            other => Err(SetupError::ScxBusy {
                state: other.unwrap_or("unreadable").to_string(),
                ops: self.read("root/ops").unwrap_or_else(|| "unknown scheduler".into()),
            }),
        }
    }

    /// Start `s` and wait until the kernel runs it. A stop request (Ctrl-C)
    /// ends the wait: the scheduler is stopped and `Interrupted` returned.
    pub fn start(&self, s: &ScxSetting) -> Result<Running, LiveError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let argv = self.preflight(s)?;
        let log = std::env::temp_dir().join(format!(
            "schedlab-scx-{}-{}.log",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let out = std::fs::File::create(&log).map_err(|e| SetupError::Failed {
            what: "creating the sched_ext scheduler's log".into(),
            detail: format!("{}: {e}", log.display()),
            fix: "make the temp dir writable".into(),
        })?;
        let err = out.try_clone().map_err(|e| LiveError::Os {
            what: "duplicating the log descriptor",
            detail: e.to_string(),
            hint: "raise ulimit -n",
        })?;
        // SAFETY: getpid cannot fail.
        let parent = unsafe { libc::getpid() };
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]).stdin(Stdio::null()).stdout(out).stderr(err).process_group(0);
        // SAFETY: the closure runs in the child between fork and exec and
        // only makes async-signal-safe calls (sigaction, sigprocmask,
        // prctl, getppid, _exit).
        unsafe {
            cmd.pre_exec(move || {
                // SIGINT must reach it as a stop request, even if schedlab
                // was started with it ignored (a background job of a script).
                hygiene::default_signals_in_child();
                // Unload with schedlab: the kernel signals it when its parent thread dies.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGINT as libc::c_ulong, 0, 0, 0);
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| SetupError::ScxFailed {
            name: s.name.clone(),
            detail: format!("could not be started ({}: {e})", argv[0]),
            output: String::new(),
        })?;
        OURS.fetch_add(1, Ordering::SeqCst);
        let mut running = Running {
            control: self.clone(),
            name: s.name.clone(),
            child: Some(child),
            ops: String::new(),
            enable_seq: None,
            log,
        };
        let t0 = Instant::now();
        loop {
            if hygiene::stop_requested() {
                let _ = running.stop_now();
                return Err(LiveError::Interrupted);
            }
            let exited = running.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                running.child = None;
                OURS.fetch_sub(1, Ordering::SeqCst);
                return Err(running.failed(format!("exited ({status}) before sched_ext was enabled")).into());
            }
            if self.state().as_deref() == Some("enabled") {
                break;
            }
            if t0.elapsed() > self.enable_timeout {
                let state = self.state().unwrap_or_else(|| "unreadable".into());
                let e = running.failed(format!(
                    "did not enable sched_ext within {} s (state: {state}); it was stopped",
                    self.enable_timeout.as_secs_f64()
                ));
                let _ = running.stop_now();
                return Err(e.into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        running.ops = self.read("root/ops").filter(|o| !o.is_empty()).unwrap_or_else(|| s.name.clone());
        running.enable_seq = self.read("enable_seq");
        Ok(running)
    }
}

fn executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A sched_ext scheduler schedlab started; stopped by [`Running::stop`] or on drop.
#[derive(Debug)]
pub struct Running {
    control: ScxControl,
    name: String,
    child: Option<Child>,
    ops: String,
    /// `enable_seq` once enabled: another value at the end means it was reloaded.
    enable_seq: Option<String>,
    log: PathBuf,
}

impl Running {
    /// The scheduler's name as the kernel reports it (`root/ops`).
    pub fn ops(&self) -> &str {
        &self.ops
    }

    /// The last lines the scheduler printed, for an error.
    fn output_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        if lines.is_empty() {
            return String::new();
        }
        let tail = lines[lines.len().saturating_sub(4)..].join(" | ");
        let tail: String = tail.chars().take(400).collect();
        format!("; its last output: {tail}")
    }

    fn failed(&self, detail: String) -> SetupError {
        SetupError::ScxFailed { name: self.name.clone(), detail, output: self.output_tail() }
    }

    /// Stop the scheduler and wait until the kernel is back on its default
    /// classes. An error also when it did not run throughout the case.
    pub fn stop(mut self) -> Result<(), SetupError> {
        self.stop_now()
    }

    fn stop_now(&mut self) -> Result<(), SetupError> {
        let Some(mut child) = self.child.take() else { return Ok(()) };
        OURS.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        let c = &self.control;
        let state = c.state().unwrap_or_else(|| "unreadable".into());
        let lost = match child.try_wait() {
            Ok(Some(status)) => Some(format!("exited ({status}) during the case")),
            _ if state != "enabled" => Some(format!("was unloaded during the case (state: {state})")),
            _ if self.enable_seq.is_some() && c.read("enable_seq") != self.enable_seq => {
                Some("was unloaded and loaded again during the case".into())
            }
            _ => None,
        };
        let pgid = child.id() as i32;
        // SAFETY: signalling the process group of our own unreaped child.
        unsafe { libc::kill(-pgid, libc::SIGINT) };
        let t0 = Instant::now();
        let mut killed = false;
        loop {
            if child.try_wait().ok().flatten().is_some() {
                break;
            }
            if t0.elapsed() > c.disable_timeout && !killed {
                // SAFETY: as above.
                unsafe { libc::kill(-pgid, libc::SIGKILL) };
                killed = true;
            }
            if t0.elapsed() > c.disable_timeout * 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.try_wait();
        let t1 = Instant::now();
        while c.state().as_deref().is_some_and(|s| s != "disabled") && t1.elapsed() < c.disable_timeout {
            std::thread::sleep(Duration::from_millis(10));
        }
        let end = c.state().unwrap_or_else(|| "unreadable".into());
        let result = if let Some(l) = lost {
            Err(self.failed(format!("{l}: the measurement did not run under it throughout")))
        } else if end != "disabled" {
            Err(self.failed(format!(
                "was stopped but sched_ext is still {end} after {} s (the kernel should fall back to its default classes)",
                c.disable_timeout.as_secs_f64()
            )))
        } else {
            Ok(())
        };
        // Errors quote its output; the file goes either way.
        let _ = std::fs::remove_file(&self.log);
        result
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Err(e) = self.stop_now() {
            eprintln!("schedlab: {e}");
        }
        // Also when it never got as far as running (its output is in the error).
        let _ = std::fs::remove_file(&self.log);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake /sys/kernel/sched_ext and a directory of fake scheduler programs.
    struct Fake {
        dir: PathBuf,
        control: ScxControl,
    }

    /// A fake scheduler: announces itself like the kernel would (enabling,
    /// then enabled with its ops name; disabling, then disabled on SIGINT).
    /// `@DIR@` is the fake sysfs directory.
    const GOOD: &str = r#"#!/bin/sh
d="@DIR@"
echo $$ > "$d/pid"
trap 'echo disabling > "$d/state"; sleep 0.05; echo disabled > "$d/state"; echo stopped; exit 0' INT TERM
echo "loading $1"
echo enabling > "$d/state"
sleep 0.1
echo fake_ops > "$d/root/ops"
echo 1 > "$d/enable_seq"
echo enabled > "$d/state"
while :; do sleep 0.02 & wait $!; done
"#;

    impl Fake {
        fn new(tag: &str) -> Fake {
            let dir = std::env::temp_dir().join(format!("schedlab-scx-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let sysfs = dir.join("sched_ext");
            std::fs::create_dir_all(sysfs.join("root")).unwrap();
            std::fs::create_dir_all(dir.join("bin")).unwrap();
            std::fs::write(sysfs.join("state"), "disabled\n").unwrap();
            std::fs::write(sysfs.join("enable_seq"), "0\n").unwrap();
            let control = ScxControl {
                sysfs,
                need_root: false,
                path: Some(dir.join("bin").into_os_string()),
                enable_timeout: Duration::from_secs(5),
                // The fake stops in 50 ms; the margin is for a loaded
                // machine (2 s once ran out under a parallel build).
                disable_timeout: Duration::from_secs(10),
            };
            Fake { dir, control }
        }

        fn program(&self, name: &str, text: &str) {
            let p = self.dir.join("bin").join(name);
            std::fs::write(&p, text.replace("@DIR@", &self.control.sysfs.to_string_lossy())).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }

        fn state(&self) -> String {
            self.control.state().unwrap()
        }

        fn script_pid(&self) -> i32 {
            std::fs::read_to_string(self.control.sysfs.join("pid")).unwrap().trim().parse().unwrap()
        }
    }

    impl Drop for Fake {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    fn alive(pid: i32) -> bool {
        // A reaped process has no /proc entry; a zombie would still say "Z".
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, r)| !r.trim_start().starts_with('Z')))
    }

    // One fake scheduler at a time: each waits on polled files, so they
    // should not compete for the CPU with each other.
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn lock() -> std::sync::MutexGuard<'static, ()> {
        LOCK.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn a_scheduler_is_started_waited_for_and_stopped() {
        let _g = lock();
        let f = Fake::new("cycle");
        f.program("scx_fake", GOOD);
        let s = ScxSetting::named("fake").unwrap();
        let running = f.control.start(&s).unwrap();
        assert_eq!(f.state(), "enabled", "start returns once the kernel runs it");
        assert_eq!(running.ops(), "fake_ops", "the ops name is read back");
        let pid = f.script_pid();
        assert!(alive(pid));
        running.stop().unwrap();
        assert_eq!(f.state(), "disabled", "stop returns once the kernel is back on its default classes");
        assert!(!alive(pid), "the scheduler process is gone");
        // --scx-cmd: split like a shell, arguments passed.
        let cmd = ScxSetting::command("scx_fake --slice-us '5 000'").unwrap();
        let argv = f.control.command(&cmd).unwrap();
        assert_eq!(&argv[1..], ["--slice-us", "5 000"]);
        assert!(argv[0].ends_with("/bin/scx_fake"), "{argv:?}");
        let running = f.control.start(&cmd).unwrap();
        drop(running);
        assert_eq!(f.state(), "disabled", "dropping stops it too");
    }

    #[test]
    fn a_scheduler_that_fails_to_load_is_reported_with_its_output() {
        let _g = lock();
        let f = Fake::new("fail");
        f.program("scx_broken", "#!/bin/sh\necho 'libbpf: failed to load BPF skeleton' >&2\nexit 3\n");
        let e = f.control.start(&ScxSetting::named("broken").unwrap()).unwrap_err().to_string();
        assert!(e.contains("exited (exit status: 3) before sched_ext was enabled"), "{e}");
        assert!(e.contains("failed to load BPF skeleton"), "its output is quoted: {e}");
        assert_eq!(f.state(), "disabled");
    }

    #[test]
    fn a_scheduler_that_never_enables_is_stopped_after_the_timeout() {
        let _g = lock();
        let mut f = Fake::new("slow");
        f.control.enable_timeout = Duration::from_millis(300);
        f.program("scx_slow", "#!/bin/sh\necho $$ > \"@DIR@/pid\"\nwhile :; do sleep 0.02; done\n");
        let e = f.control.start(&ScxSetting::named("slow").unwrap()).unwrap_err().to_string();
        assert!(e.contains("did not enable sched_ext within 0.3 s (state: disabled); it was stopped"), "{e}");
        assert!(!alive(f.script_pid()), "the scheduler process was stopped");
    }

    #[test]
    fn a_scheduler_lost_during_the_case_fails_the_case() {
        let _g = lock();
        let f = Fake::new("lost");
        // Enables, then the "kernel" ejects it and the program exits.
        let ejected =
            GOOD.replace("while :; do sleep 0.02 & wait $!; done", "sleep 0.1; echo disabled > \"$d/state\"; exit 1");
        f.program("scx_ejected", &ejected);
        let running = f.control.start(&ScxSetting::named("ejected").unwrap()).unwrap();
        std::thread::sleep(Duration::from_millis(400));
        let e = running.stop().unwrap_err().to_string();
        assert!(e.contains("exited (exit status: 1) during the case"), "{e}");
        assert!(e.contains("did not run under it throughout"), "{e}");
        // Reloaded behind our back: enable_seq moves on.
        f.program("scx_fake", GOOD);
        let running = f.control.start(&ScxSetting::named("fake").unwrap()).unwrap();
        std::fs::write(f.control.sysfs.join("enable_seq"), "2\n").unwrap();
        let e = running.stop().unwrap_err().to_string();
        assert!(e.contains("loaded again during the case"), "{e}");
    }

    #[test]
    fn preflight_names_what_is_missing() {
        let _g = lock();
        let f = Fake::new("pre");
        let e = f.control.preflight(&ScxSetting::named("lavd").unwrap()).unwrap_err().to_string();
        assert!(e.contains("scx_lavd is not in PATH") && e.contains("--scx-cmd"), "{e}");
        let e = f.control.command(&ScxSetting::command("scx_lavd 'unbalanced").unwrap()).unwrap_err().to_string();
        assert!(e.contains("unbalanced quotes"), "{e}");
        f.program("scx_fake", GOOD);
        std::fs::write(f.control.sysfs.join("state"), "enabled\n").unwrap();
        std::fs::write(f.control.sysfs.join("root/ops"), "rusty\n").unwrap();
        let e = f.control.preflight(&ScxSetting::named("fake").unwrap()).unwrap_err().to_string();
        assert!(e.contains("sched_ext is already enabled (rusty)"), "{e}");
        let gone = ScxControl { sysfs: f.dir.join("nope"), ..f.control.clone() };
        let e = gone.preflight(&ScxSetting::named("fake").unwrap()).unwrap_err().to_string();
        assert!(e.contains("needs a kernel with sched_ext") && e.contains("this kernel lacks it"), "{e}");
    }

    #[test]
    fn this_machine_without_sched_ext_says_so() {
        // On a kernel with sched_ext this checks the other errors instead.
        let e = ScxControl::system().preflight(&ScxSetting::named("lavd").unwrap()).unwrap_err().to_string();
        if !Path::new(SYSFS).exists() {
            assert!(e.contains("/sys/kernel/sched_ext is missing"), "{e}");
        } else {
            assert!(e.contains("root") || e.contains("scx_lavd") || e.contains("already"), "{e}");
        }
    }
}
