//! A temporary cgroup v2 for a case's measured tasks (`--cgroup-weight`,
//! `--cgroup-max`, `--cgroup-cpus`).
//!
//! Measured tasks are threads of this process (threads, cyclic, ...) as well
//! as processes it forks (runners and their helpers, shell commands). A
//! thread can only move within the threaded subtree of the cgroup its
//! process is in, so the temporary cgroup is a *threaded* child of the cgroup
//! schedlab runs in, `<own>/schedlab-<pid>-<n>`; cpu and cpuset are threaded
//! controllers, so they work there although `<own>` holds processes (this
//! one). [`enter`], called by `condition::apply` before a task's affinity and
//! policy are set, moves a thread of this process by tid (`cgroup.threads`)
//! and another process whole (`cgroup.procs`); what they start later is
//! born inside. Loads are started before and stay outside.
//!
//! ```text
//!  check    cgroup v2 mounted, the controllers in <own>/cgroup.controllers,
//!           <own> writable (root or delegated)
//!  create   record (rmdir; controllers this enabled) ─> mkdir ─> cgroup.type
//!           = threaded ─> +cpu/+cpuset in <own>/cgroup.subtree_control when
//!           missing ─> cpu.weight, cpu.max, cpuset.cpus ─> read back
//!  remove   tasks left go back to <own>, rmdir, controllers disabled again
//! ```

use crate::error::LiveError;
use crate::harness::recovery::{Record, Step, CGROUP_PREFIX};
use crate::harness::setup::{io_errno_text, is_root, SetupError};
use schedlab_core::condition::{format_cpu_list, parse_cpu_list, CgroupSetting, CpuMax};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Where this process sits in cgroup v2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    /// The cgroup2 mount point.
    pub mount: PathBuf,
    /// This process's cgroup, as /proc/self/cgroup names it ("/user.slice/...").
    pub own_rel: String,
    /// Controllers bound to cgroup v1 hierarchies (then absent from v2).
    pub v1_bound: Vec<String>,
}

impl Hierarchy {
    pub fn locate() -> Result<Hierarchy, SetupError> {
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let mount = parse_mounts(&mounts)
            .ok_or_else(|| SetupError::NoCgroupV2 { detail: "no cgroup2 file system is mounted".into() })?;
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let own_rel = parse_own(&own).ok_or_else(|| SetupError::NoCgroupV2 {
            detail: "/proc/self/cgroup has no cgroup v2 line (0::/...)".into(),
        })?;
        Ok(Hierarchy { mount, own_rel, v1_bound: v1_controllers(&own) })
    }

    /// The directory of this process's cgroup.
    pub fn own(&self) -> PathBuf {
        match self.own_rel.trim_matches('/') {
            "" => self.mount.clone(),
            rel => self.mount.join(rel),
        }
    }
}

/// The cgroup2 mount point from /proc/self/mounts (/sys/fs/cgroup preferred).
pub fn parse_mounts(mounts: &str) -> Option<PathBuf> {
    let all: Vec<&str> = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 3 && f[2] == "cgroup2").then(|| f[1])
        })
        .collect();
    all.iter().find(|m| **m == "/sys/fs/cgroup").or(all.first()).map(PathBuf::from)
}

/// The v2 path ("0::/path") of /proc/<pid>/cgroup.
pub fn parse_own(proc_cgroup: &str) -> Option<String> {
    proc_cgroup.lines().find_map(|l| l.strip_prefix("0::")).map(|p| p.trim().to_string()).filter(|p| p.starts_with('/'))
}

/// Controllers of the cgroup v1 lines ("4:cpu,cpuacct:/").
pub fn v1_controllers(proc_cgroup: &str) -> Vec<String> {
    proc_cgroup
        .lines()
        .filter(|l| !l.starts_with("0::"))
        .filter_map(|l| l.split(':').nth(1))
        .flat_map(|c| c.split(','))
        .filter(|c| !c.is_empty() && !c.starts_with("name="))
        .map(str::to_string)
        .collect()
}

/// (controller, option) pairs the setting needs.
fn needed(s: &CgroupSetting) -> Vec<(&'static str, &'static str)> {
    let mut n = Vec::new();
    if s.weight.is_some() {
        n.push(("cpu", "--cgroup-weight"));
    }
    if s.max.is_some() && s.weight.is_none() {
        n.push(("cpu", "--cgroup-max"));
    }
    if s.cpus.is_some() {
        n.push(("cpuset", "--cgroup-cpus"));
    }
    n
}

fn words(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().split_whitespace().map(str::to_string).collect()
}

/// Check that a cgroup for `s` can be made under this process's cgroup; the
/// controllers to enable in its `cgroup.subtree_control`.
pub fn check(h: &Hierarchy, s: &CgroupSetting) -> Result<Vec<&'static str>, SetupError> {
    let own = h.own();
    if !own.join("cgroup.procs").exists() {
        return Err(SetupError::NoCgroupV2 { detail: format!("{} is not a cgroup v2 directory", own.display()) });
    }
    let available = words(&own.join("cgroup.controllers"));
    let enabled = words(&own.join("cgroup.subtree_control"));
    let mut to_enable = Vec::new();
    for (c, flag) in needed(s) {
        if !available.iter().any(|a| a == c) {
            let fix = if h.v1_bound.iter().any(|v| v == c) {
                format!(
                    "it is bound to a cgroup v1 hierarchy (/proc/self/cgroup lists it): free it for v2 (boot with cgroup_no_v1={c} or systemd.unified_cgroup_hierarchy=1)"
                )
            } else if own == h.mount {
                format!("the root cgroup lacks it: this kernel has no {c} controller for cgroup v2")
            } else {
                let parent = own.parent().unwrap_or(&h.mount);
                format!(
                    "enable it for this cgroup: echo +{c} > {}/cgroup.subtree_control (as root; and in every ancestor that lacks it)",
                    parent.display()
                )
            };
            return Err(SetupError::ControllerUnavailable {
                controller: c,
                cgroup: own.display().to_string(),
                needed_by: flag,
                fix,
            });
        }
        if !enabled.iter().any(|e| e == c) && !to_enable.contains(&c) {
            to_enable.push(c);
        }
    }
    if !is_root() {
        let mut files = vec![own.clone(), own.join("cgroup.threads"), own.join("cgroup.procs")];
        if !to_enable.is_empty() {
            files.push(own.join("cgroup.subtree_control"));
        }
        for f in files {
            if !writable(&f) {
                return Err(SetupError::NotDelegated {
                    cgroup: own.display().to_string(),
                    detail: format!("{} is not writable", f.display()),
                });
            }
        }
    }
    Ok(to_enable)
}

fn writable(p: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else { return false };
    // SAFETY: a valid C string; access only reads it.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// The case cgroup tasks are moved into while a case runs.
struct Active {
    dir: PathBuf,
    /// Its path as /proc/<pid>/cgroup shows it.
    rel: String,
}

static ACTIVE: Mutex<Option<Active>> = Mutex::new(None);

/// A case's temporary cgroup; removed by [`CaseCgroup::remove`] or on drop.
pub struct CaseCgroup {
    dir: PathBuf,
    record: Option<Record>,
    /// The limits read back from the cgroup's files (only those asked for).
    pub applied: CgroupSetting,
}

fn write(path: &Path, value: &str) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new().write(true).open(path)?.write_all(value.as_bytes())
}

impl CaseCgroup {
    /// Make the cgroup for `s` under this process's cgroup, after writing
    /// down how to remove it.
    pub fn create(h: &Hierarchy, s: &CgroupSetting) -> Result<CaseCgroup, LiveError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let to_enable = check(h, s)?;
        let own = h.own();
        let name = format!("{CGROUP_PREFIX}{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst));
        let dir = own.join(&name);
        let mut steps = vec![Step::rmdir(&dir)];
        let subtree = own.join("cgroup.subtree_control");
        if !to_enable.is_empty() {
            let off: Vec<String> = to_enable.iter().map(|c| format!("-{c}")).collect();
            steps.push(Step::write(&subtree, off.join(" ")));
        }
        let record = Record::create("cgroup", steps)?;
        let mut cg = CaseCgroup { dir: dir.clone(), record: Some(record), applied: CgroupSetting::default() };
        let fail = |what: String, e: std::io::Error, fix: String| -> LiveError {
            SetupError::Failed { what, detail: io_errno_text(&e), fix }.into()
        };
        std::fs::create_dir(&dir).map_err(|e| {
            fail(format!("creating the cgroup {}", dir.display()), e, "run as root or from a delegated cgroup".into())
        })?;
        write(&dir.join("cgroup.type"), "threaded").map_err(|e| {
            fail(
                format!("making {} a threaded cgroup", dir.display()),
                e,
                format!(
                    "{} must be able to hold threaded children (no populated child cgroups, no memory/io controllers enabled below it): run schedlab from a leaf cgroup, e.g. systemd-run --scope schedlab run ...",
                    own.display()
                ),
            )
        })?;
        if !to_enable.is_empty() {
            let on: Vec<String> = to_enable.iter().map(|c| format!("+{c}")).collect();
            write(&subtree, &on.join(" ")).map_err(|e| {
                fail(
                    format!("enabling {} in {}", to_enable.join(" and "), subtree.display()),
                    e,
                    "enable them by hand, or run schedlab from a cgroup that has them".into(),
                )
            })?;
        }
        let limit = |file: &str, value: String, fix: String| -> Result<(), LiveError> {
            write(&dir.join(file), &value).map_err(|e| fail(format!("setting {file} to {value}"), e, fix))
        };
        if let Some(w) = s.weight {
            limit("cpu.weight", w.to_string(), "give a weight from 1 to 10000".into())?;
        }
        if let Some(m) = &s.max {
            limit("cpu.max", m.file_text(), "give a quota of at least 1 ms and a period from 1 ms to 1 s".into())?;
        }
        if let Some(cpus) = &s.cpus {
            let parent_cpus = std::fs::read_to_string(own.join("cpuset.cpus.effective")).unwrap_or_default();
            limit(
                "cpuset.cpus",
                format_cpu_list(cpus),
                format!("choose CPUs of {} (cpuset.cpus.effective = {})", own.display(), parent_cpus.trim()),
            )?;
        }
        let read = |file: &str| std::fs::read_to_string(dir.join(file)).ok();
        cg.applied = CgroupSetting {
            weight: s.weight.and(read("cpu.weight")).and_then(|t| t.trim().parse().ok()),
            max: s.max.and(read("cpu.max")).and_then(|t| CpuMax::from_file_text(&t)),
            cpus: s.cpus.as_ref().and(read("cpuset.cpus.effective")).and_then(|t| parse_cpu_list(t.trim()).ok()),
        };
        let rel = format!("{}/{name}", h.own_rel.trim_end_matches('/'));
        *ACTIVE.lock().unwrap_or_else(|e| e.into_inner()) = Some(Active { dir, rel });
        Ok(cg)
    }

    /// Remove it (moving tasks left in it back) and disable the controllers
    /// it enabled; the failures (the record then stays).
    pub fn remove(mut self) -> Result<(), String> {
        let errors = self.remove_now();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    fn remove_now(&mut self) -> Vec<String> {
        {
            let mut a = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
            if a.as_ref().is_some_and(|a| a.dir == self.dir) {
                *a = None;
            }
        }
        self.record.take().map(|r| r.restore()).unwrap_or_default()
    }
}

impl Drop for CaseCgroup {
    fn drop(&mut self) {
        for e in self.remove_now() {
            eprintln!("schedlab: could not remove the case's cgroup ({e}): run `schedlab check --restore`");
        }
    }
}

/// Thread group id of a task (its process), from /proc.
fn tgid(tid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())
}

/// Move a measured task into the case's cgroup: `tid` 0 is the calling
/// thread; a thread of this process moves alone, another process whole. Read
/// back from /proc before returning.
pub fn enter(tid: i32) -> Result<(), LiveError> {
    let (dir, rel) = {
        let a = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
        let a = a.as_ref().ok_or_else(|| SetupError::Failed {
            what: "moving a measured task into the case's cgroup".into(),
            detail: "no case cgroup is set up".into(),
            fix: "a condition with a cgroup is applied by harness::drive, which makes the cgroup first".into(),
        })?;
        (a.dir.clone(), a.rel.clone())
    };
    let tid = if tid == 0 { crate::harness::condition::gettid() } else { tid };
    let me = std::process::id() as i32;
    let owner = tgid(tid).unwrap_or(tid);
    let file = if owner == tid && tid != me { "cgroup.procs" } else { "cgroup.threads" };
    write(&dir.join(file), &tid.to_string()).map_err(|e| SetupError::Failed {
        what: format!("moving task {tid} into {}", dir.display()),
        detail: io_errno_text(&e),
        fix: match e.raw_os_error() {
            Some(libc::ESRCH) => "the task ended before it could be moved".into(),
            Some(libc::EOPNOTSUPP) => "the task is in another cgroup subtree than schedlab itself: run the benchmark's tasks from schedlab's cgroup".into(),
            _ => "run as root or from a delegated cgroup".into(),
        },
    })?;
    let proc_file = if owner == me { format!("/proc/{me}/task/{tid}/cgroup") } else { format!("/proc/{tid}/cgroup") };
    let now = std::fs::read_to_string(&proc_file).ok().and_then(|t| parse_own(&t));
    if now.as_deref() != Some(rel.as_str()) {
        return Err(SetupError::Failed {
            what: format!("moving task {tid} into the case's cgroup"),
            detail: format!("{proc_file} says {}, not {rel}", now.as_deref().unwrap_or("nothing")),
            fix: "something else moves tasks between cgroups (systemd, a container runtime): stop it or run without --cgroup-*".into(),
        }
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_v2_mount_and_own_cgroup_are_parsed() {
        let mounts = "tmpfs /sys/fs/cgroup tmpfs rw 0 0\ncgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n";
        assert_eq!(parse_mounts(mounts), Some(PathBuf::from("/sys/fs/cgroup/unified")));
        let pure = "cgroup2 /other cgroup2 rw 0 0\ncgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n";
        assert_eq!(parse_mounts(pure), Some(PathBuf::from("/sys/fs/cgroup")));
        assert_eq!(parse_mounts("proc /proc proc rw 0 0\n"), None);
        let hybrid = "9:name=systemd:/\n4:cpu,cpuacct:/\n3:cpuset:/\n0::/user.slice/session-1.scope\n";
        assert_eq!(parse_own(hybrid).as_deref(), Some("/user.slice/session-1.scope"));
        assert_eq!(v1_controllers(hybrid), ["cpu", "cpuacct", "cpuset"]);
        assert_eq!(parse_own("4:cpu:/\n"), None);
    }

    /// A fake hierarchy: `<dir>/own` is this process's cgroup.
    fn fake(tag: &str, controllers: &str, subtree: &str, v1: &[&str]) -> (PathBuf, Hierarchy) {
        let dir = std::env::temp_dir().join(format!("schedlab-cgroup-{tag}-{}", std::process::id()));
        let own = dir.join("own");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::write(own.join("cgroup.procs"), "").unwrap();
        std::fs::write(own.join("cgroup.controllers"), controllers).unwrap();
        std::fs::write(own.join("cgroup.subtree_control"), subtree).unwrap();
        let h = Hierarchy {
            mount: dir.clone(),
            own_rel: "/own".into(),
            v1_bound: v1.iter().map(|s| s.to_string()).collect(),
        };
        (dir, h)
    }

    #[test]
    fn missing_controllers_name_the_file_to_write() {
        let weight = CgroupSetting { weight: Some(50), ..Default::default() };
        let cpus = CgroupSetting { cpus: Some(vec![0]), ..Default::default() };
        let (dir, h) = fake("missing", "memory pids\n", "", &[]);
        let e = check(&h, &weight).unwrap_err().to_string();
        assert!(e.contains("the cpu controller is not available") && e.contains("--cgroup-weight"), "{e}");
        assert!(e.contains(&format!("echo +cpu > {}/cgroup.subtree_control", dir.display())), "{e}");
        let (dir2, h) = fake("v1", "memory\n", "", &["cpu", "cpuset"]);
        let e = check(&h, &cpus).unwrap_err().to_string();
        assert!(e.contains("cpuset controller") && e.contains("bound to a cgroup v1 hierarchy"), "{e}");
        for d in [dir, dir2] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }

    #[test]
    fn controllers_not_yet_enabled_below_are_listed_once() {
        let s = CgroupSetting {
            weight: Some(50),
            max: Some(CpuMax { quota_us: Some(50_000), period_us: 100_000 }),
            cpus: Some(vec![0]),
        };
        let (dir, h) = fake("enable", "cpuset cpu io memory pids\n", "cpuset\n", &[]);
        // The fake files are this user's, so this holds with or without root.
        assert_eq!(check(&h, &s).unwrap(), ["cpu"]);
        let (dir2, h) = fake("enabled", "cpuset cpu\n", "cpu cpuset\n", &[]);
        assert!(check(&h, &s).unwrap().is_empty());
        assert!(check(&h, &CgroupSetting::default()).unwrap().is_empty(), "no limit needs no controller");
        let gone = Hierarchy { own_rel: "/nope".into(), ..h };
        let e = check(&gone, &s).unwrap_err().to_string();
        assert!(e.contains("needs cgroup v2") && e.contains("not a cgroup v2 directory"), "{e}");
        for d in [dir, dir2] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }

    #[test]
    fn entering_without_a_case_cgroup_is_an_error_not_a_guess() {
        // (This binary's tests never make a case cgroup: the root tests are in tests/setup.rs.)
        let e = enter(0).unwrap_err().to_string();
        assert!(e.contains("no case cgroup is set up"), "{e}");
    }
}
