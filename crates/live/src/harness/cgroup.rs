//! A temporary cgroup for a case's measured tasks (`--cgroup-weight`,
//! `--cgroup-max`, `--cgroup-cpus`), in cgroup v2 and, on a hybrid layout
//! where cpu or cpuset is bound to a cgroup v1 hierarchy, in that hierarchy
//! too.
//!
//! Measured tasks are threads of this process (threads, cyclic, ...) as well
//! as processes it forks (runners and their helpers, shell commands). A
//! thread can only move within the threaded subtree of the cgroup its
//! process is in, so the v2 cgroup is a *threaded* child of the cgroup
//! schedlab runs in, `<own>/schedlab-<pid>-<n>`; cpu and cpuset are threaded
//! controllers, so they work there although `<own>` holds processes (this
//! one). It is made for every case with a cgroup, limits or not, and holds
//! the limits whose controller v2 has. A controller that v2 lacks because a
//! v1 hierarchy holds it (Ubuntu 20.04, Debian 10/11, RHEL 8 and this
//! project's CI machines boot that way) gets a child of the same name in
//! that hierarchy, under this process's cgroup there; v1 moves single
//! threads (`tasks`) as well as processes (`cgroup.procs`), so no threaded
//! mode is needed. [`enter`], called by `condition::apply` before a task's
//! affinity and policy are set, moves a thread of this process by tid and
//! another process whole, into each of the case's cgroups; what they start
//! later is born inside. Loads are started before and stay outside.
//!
//! ```text
//!  check    cgroup v2 mounted; each controller in <own>/cgroup.controllers
//!           or in a mounted v1 hierarchy; the directories writable
//!           (root or delegated)
//!  create   record (rmdir each; controllers this enabled) ─> mkdir ─>
//!           v2: cgroup.type = threaded ─> +cpu/+cpuset in
//!           <own>/cgroup.subtree_control when missing; v1 cpuset: cpuset.mems
//!           copied from the parent ─> the limits ─> read back
//!  remove   tasks left go back to the parent, rmdir, controllers disabled
//! ```
//!
//! v1 takes the same limits in its own files: `cpu.weight` W is
//! `cpu.shares` W × 1024 / 100 (the kernel's own conversion, so weight 100
//! is 1024 shares, a nice-0 task), `cpu.max` is `cpu.cfs_quota_us` (-1 for
//! max) over `cpu.cfs_period_us`, `cpuset.cpus` is the same list.

use crate::error::LiveError;
use crate::harness::recovery::{Record, Step, CGROUP_PREFIX};
use crate::harness::setup::{io_errno_text, is_root, SetupError};
use schedlab_core::condition::{format_cpu_list, parse_cpu_list, CgroupSetting, CpuMax};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// A mounted cgroup v1 hierarchy and this process's cgroup in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V1Hierarchy {
    /// Its controllers as /proc/self/cgroup names them ("cpu,cpuacct").
    pub controllers: String,
    pub mount: PathBuf,
    /// This process's cgroup in it ("/").
    pub own_rel: String,
}

impl V1Hierarchy {
    pub fn own(&self) -> PathBuf {
        under(&self.mount, &self.own_rel)
    }

    fn has(&self, controller: &str) -> bool {
        self.controllers.split(',').any(|c| c == controller)
    }
}

fn under(mount: &Path, rel: &str) -> PathBuf {
    match rel.trim_matches('/') {
        "" => mount.to_path_buf(),
        rel => mount.join(rel),
    }
}

/// Where this process sits in cgroup v2 (and in the v1 hierarchies beside it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    /// The cgroup2 mount point.
    pub mount: PathBuf,
    /// This process's cgroup, as /proc/self/cgroup names it ("/user.slice/...").
    pub own_rel: String,
    /// Controllers bound to cgroup v1 hierarchies (then absent from v2).
    pub v1_bound: Vec<String>,
    /// The v1 hierarchies among those that are mounted.
    pub v1: Vec<V1Hierarchy>,
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
        Ok(Hierarchy { mount, own_rel, v1_bound: v1_controllers(&own), v1: parse_v1(&mounts, &own) })
    }

    /// The directory of this process's cgroup.
    pub fn own(&self) -> PathBuf {
        under(&self.mount, &self.own_rel)
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
    path_in(proc_cgroup, "")
}

/// The path of the /proc/<pid>/cgroup line whose controller field is
/// `controllers` ("" for v2's "0::" line).
fn path_in(proc_cgroup: &str, controllers: &str) -> Option<String> {
    proc_cgroup
        .lines()
        .find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (id, field, path) = (f.next()?, f.next()?, f.next()?);
            let v2 = id == "0" && field.is_empty();
            (v2 == controllers.is_empty() && field == controllers).then(|| path.trim().to_string())
        })
        .filter(|p| p.starts_with('/'))
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

/// The mounted v1 hierarchies with controllers, this process's cgroup in
/// each (a hierarchy mounted twice: the first mount under /sys/fs/cgroup,
/// else the first).
pub fn parse_v1(mounts: &str, proc_cgroup: &str) -> Vec<V1Hierarchy> {
    let v1_mounts: Vec<(&str, Vec<&str>)> = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && f[2] == "cgroup").then(|| (f[1], f[3].split(',').collect()))
        })
        .collect();
    proc_cgroup
        .lines()
        .filter_map(|l| l.split(':').nth(1))
        .filter(|c| !c.is_empty() && !c.starts_with("name="))
        .filter_map(|controllers| {
            let wanted: Vec<&str> = controllers.split(',').collect();
            let holds = |opts: &Vec<&str>| wanted.iter().all(|w| opts.contains(w));
            let mount = v1_mounts
                .iter()
                .filter(|(_, opts)| holds(opts))
                .map(|(m, _)| *m)
                .min_by_key(|m| !m.starts_with("/sys/fs/cgroup/"))?;
            Some(V1Hierarchy {
                controllers: controllers.to_string(),
                mount: PathBuf::from(mount),
                own_rel: path_in(proc_cgroup, controllers)?,
            })
        })
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

/// Which hierarchy holds a controller a case needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    V2,
    /// An index into [`Hierarchy::v1`].
    V1(usize),
}

/// Where a case's limits go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    pub cpu: Option<Place>,
    pub cpuset: Option<Place>,
    /// v2 controllers to enable in `<own>/cgroup.subtree_control`.
    pub enable: Vec<&'static str>,
}

impl Placement {
    /// The v1 hierarchies used, each once.
    fn v1(&self) -> Vec<usize> {
        let mut v: Vec<usize> = [self.cpu, self.cpuset]
            .into_iter()
            .filter_map(|p| match p {
                Some(Place::V1(i)) => Some(i),
                _ => None,
            })
            .collect();
        v.dedup();
        v
    }
}

/// Check that a cgroup for `s` can be made under this process's cgroup, and
/// say where each limit goes.
pub fn check(h: &Hierarchy, s: &CgroupSetting) -> Result<Placement, SetupError> {
    let own = h.own();
    if !own.join("cgroup.procs").exists() {
        return Err(SetupError::NoCgroupV2 { detail: format!("{} is not a cgroup v2 directory", own.display()) });
    }
    let available = words(&own.join("cgroup.controllers"));
    let enabled = words(&own.join("cgroup.subtree_control"));
    let mut p = Placement::default();
    for (c, flag) in needed(s) {
        let place = if available.iter().any(|a| a == c) {
            if !enabled.iter().any(|e| e == c) && !p.enable.contains(&c) {
                p.enable.push(c);
            }
            Place::V2
        } else if let Some(i) = h.v1.iter().position(|v| v.has(c) && v.own().join("cgroup.procs").exists()) {
            Place::V1(i)
        } else {
            let fix = if h.v1_bound.iter().any(|v| v == c) {
                format!(
                    "it is bound to a cgroup v1 hierarchy (/proc/self/cgroup lists it) that is not mounted here: mount it (mount -t cgroup -o {c} cgroup /sys/fs/cgroup/{c}) or free it for v2 (boot with cgroup_no_v1={c} or systemd.unified_cgroup_hierarchy=1)"
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
        };
        match c {
            "cpu" => p.cpu = Some(place),
            _ => p.cpuset = Some(place),
        }
    }
    if !is_root() {
        let mut files = vec![own.clone(), own.join("cgroup.threads"), own.join("cgroup.procs")];
        if !p.enable.is_empty() {
            files.push(own.join("cgroup.subtree_control"));
        }
        for i in p.v1() {
            let v1_own = h.v1[i].own();
            files.extend([v1_own.join("tasks"), v1_own.join("cgroup.procs"), v1_own]);
        }
        for f in files {
            if !writable(&f) {
                let cgroup = f.parent().filter(|_| !f.is_dir()).unwrap_or(&f).display().to_string();
                return Err(SetupError::NotDelegated { cgroup, detail: format!("{} is not writable", f.display()) });
            }
        }
    }
    Ok(p)
}

fn writable(p: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else { return false };
    // SAFETY: a valid C string; access only reads it.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// `cpu.weight` as v1's `cpu.shares`: the kernel schedules a v2 weight W
/// with the load weight W × 1024 / 100, which is what shares are.
pub fn weight_to_shares(weight: u32) -> u64 {
    (u64::from(weight) * 1024 + 50) / 100
}

/// The weight `cpu.shares` stands for (exact for every shares value
/// [`weight_to_shares`] gives, since a weight step is 10.24 shares).
pub fn shares_to_weight(shares: u64) -> u64 {
    (shares * 100 + 512) / 1024
}

/// One of a case's cgroups, where [`enter`] moves tasks.
#[derive(Debug, Clone)]
struct Target {
    dir: PathBuf,
    /// Its path as /proc/<pid>/cgroup shows it.
    rel: String,
    /// The controller field of its /proc/<pid>/cgroup line ("" for v2).
    controllers: String,
}

static ACTIVE: Mutex<Vec<Target>> = Mutex::new(Vec::new());

/// A case's temporary cgroups; removed by [`CaseCgroup::remove`] or on drop.
pub struct CaseCgroup {
    targets: Vec<Target>,
    record: Option<Record>,
    /// The limits read back from the cgroups' files (only those asked for).
    pub applied: CgroupSetting,
}

fn write(path: &Path, value: &str) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new().write(true).open(path)?.write_all(value.as_bytes())
}

impl CaseCgroup {
    /// Make the cgroups for `s` under this process's cgroups, after writing
    /// down how to remove them.
    pub fn create(h: &Hierarchy, s: &CgroupSetting) -> Result<CaseCgroup, LiveError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let placement = check(h, s)?;
        let own = h.own();
        let name = format!("{CGROUP_PREFIX}{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst));
        let rel_of = |own_rel: &str| format!("{}/{name}", own_rel.trim_end_matches('/'));
        let mut targets = vec![Target { dir: own.join(&name), rel: rel_of(&h.own_rel), controllers: String::new() }];
        let v1_index = placement.v1();
        for &i in &v1_index {
            let v = &h.v1[i];
            targets.push(Target {
                dir: v.own().join(&name),
                rel: rel_of(&v.own_rel),
                controllers: v.controllers.clone(),
            });
        }
        let dir_of = |place: Place| match place {
            Place::V2 => targets[0].dir.clone(),
            Place::V1(i) => targets[1 + v1_index.iter().position(|&j| j == i).unwrap_or(0)].dir.clone(),
        };
        let mut steps: Vec<Step> = targets.iter().map(|t| Step::rmdir(&t.dir)).collect();
        let subtree = own.join("cgroup.subtree_control");
        if !placement.enable.is_empty() {
            let off: Vec<String> = placement.enable.iter().map(|c| format!("-{c}")).collect();
            steps.push(Step::write(&subtree, off.join(" ")));
        }
        let record = Record::create("cgroup", steps)?;
        let mut cg = CaseCgroup { targets: targets.clone(), record: Some(record), applied: CgroupSetting::default() };
        let fail = |what: String, e: std::io::Error, fix: String| -> LiveError {
            SetupError::Failed { what, detail: io_errno_text(&e), fix }.into()
        };
        for t in &targets {
            std::fs::create_dir(&t.dir).map_err(|e| {
                fail(
                    format!("creating the cgroup {}", t.dir.display()),
                    e,
                    "run as root or from a delegated cgroup".into(),
                )
            })?;
        }
        let v2_dir = &targets[0].dir;
        write(&v2_dir.join("cgroup.type"), "threaded").map_err(|e| {
            fail(
                format!("making {} a threaded cgroup", v2_dir.display()),
                e,
                format!(
                    "{} must be able to hold threaded children (no populated child cgroups, no memory/io controllers enabled below it): run schedlab from a leaf cgroup, e.g. systemd-run --scope schedlab run ...",
                    own.display()
                ),
            )
        })?;
        if !placement.enable.is_empty() {
            let on: Vec<String> = placement.enable.iter().map(|c| format!("+{c}")).collect();
            write(&subtree, &on.join(" ")).map_err(|e| {
                fail(
                    format!("enabling {} in {}", placement.enable.join(" and "), subtree.display()),
                    e,
                    "enable them by hand, or run schedlab from a cgroup that has them".into(),
                )
            })?;
        }
        let limit = |dir: &Path, file: &str, value: String, fix: String| -> Result<(), LiveError> {
            write(&dir.join(file), &value)
                .map_err(|e| fail(format!("setting {}/{file} to {value}", dir.display()), e, fix))
        };
        let read = |dir: &Path, file: &str| std::fs::read_to_string(dir.join(file)).ok().map(|t| t.trim().to_string());
        let parent_read = |dir: &Path, file: &str| dir.parent().and_then(|p| read(p, file)).unwrap_or_default();
        if let Some(place) = placement.cpu {
            let dir = dir_of(place);
            let v1 = place != Place::V2;
            if v1 && dir.join("cpu.rt_runtime_us").exists() {
                // With RT group scheduling a new v1 cgroup has no RT runtime,
                // so an RT measured task could not run in it: lend it the
                // parent's. The kernel refuses (EINVAL) while a sibling holds
                // it, as the previous case's cgroup does for a moment after
                // its rmdir, until it is freed: retried for up to 2 s, then
                // left (an RT task then fails to join with a clear error).
                let runtime = parent_read(&dir, "cpu.rt_runtime_us");
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
                while write(&dir.join("cpu.rt_runtime_us"), &runtime).is_err() && std::time::Instant::now() < deadline {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            }
            if let Some(w) = s.weight {
                let (file, value) =
                    if v1 { ("cpu.shares", weight_to_shares(w).to_string()) } else { ("cpu.weight", w.to_string()) };
                limit(&dir, file, value, "give a weight from 1 to 10000".into())?;
            }
            if let Some(m) = &s.max {
                let fix = || "give a quota of at least 1 ms and a period from 1 ms to 1 s".to_string();
                if v1 {
                    limit(&dir, "cpu.cfs_period_us", m.period_us.to_string(), fix())?;
                    let quota = m.quota_us.map_or("-1".to_string(), |q| q.to_string());
                    limit(&dir, "cpu.cfs_quota_us", quota, fix())?;
                } else {
                    limit(&dir, "cpu.max", m.file_text(), fix())?;
                }
            }
            cg.applied.weight = s.weight.and_then(|_| {
                if v1 {
                    read(&dir, "cpu.shares")?.parse().ok().map(shares_to_weight).and_then(|w| u32::try_from(w).ok())
                } else {
                    read(&dir, "cpu.weight")?.parse().ok()
                }
            });
            cg.applied.max = s.max.and_then(|_| {
                if v1 {
                    let quota: i64 = read(&dir, "cpu.cfs_quota_us")?.parse().ok()?;
                    let period_us = read(&dir, "cpu.cfs_period_us")?.parse().ok()?;
                    Some(CpuMax { quota_us: u64::try_from(quota).ok(), period_us })
                } else {
                    CpuMax::from_file_text(&read(&dir, "cpu.max")?)
                }
            });
        }
        if let (Some(place), Some(cpus)) = (placement.cpuset, &s.cpus) {
            let dir = dir_of(place);
            let v1 = place != Place::V2;
            if v1 {
                // A v1 cpuset starts with no memory nodes and takes no task until it has some.
                let mems = parent_read(&dir, "cpuset.mems");
                limit(&dir, "cpuset.mems", mems, "the parent cpuset has no memory nodes".into())?;
            }
            let parent_cpus = parent_read(&dir, if v1 { "cpuset.effective_cpus" } else { "cpuset.cpus.effective" });
            limit(
                &dir,
                "cpuset.cpus",
                format_cpu_list(cpus),
                format!(
                    "choose CPUs of {} (its effective CPUs: {parent_cpus})",
                    dir.parent().unwrap_or(&dir).display()
                ),
            )?;
            let effective = read(&dir, if v1 { "cpuset.effective_cpus" } else { "cpuset.cpus.effective" });
            cg.applied.cpus = effective.and_then(|t| parse_cpu_list(&t).ok());
        }
        *ACTIVE.lock().unwrap_or_else(|e| e.into_inner()) = targets;
        Ok(cg)
    }

    /// Remove them (moving tasks left in them back) and disable the
    /// controllers enabled; the failures (the record then stays).
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
            if a.first().map(|t| &t.dir) == self.targets.first().map(|t| &t.dir) {
                a.clear();
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

/// Move a measured task into the case's cgroups: `tid` 0 is the calling
/// thread; a thread of this process moves alone, another process whole. Read
/// back from /proc before returning.
pub fn enter(tid: i32) -> Result<(), LiveError> {
    let targets = ACTIVE.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if targets.is_empty() {
        return Err(SetupError::Failed {
            what: "moving a measured task into the case's cgroup".into(),
            detail: "no case cgroup is set up".into(),
            fix: "a condition with a cgroup is applied by harness::drive, which makes the cgroup first".into(),
        }
        .into());
    }
    let tid = if tid == 0 { crate::harness::condition::gettid() } else { tid };
    let me = std::process::id() as i32;
    let owner = tgid(tid).unwrap_or(tid);
    let whole_process = owner == tid && tid != me;
    let proc_file = if owner == me { format!("/proc/{me}/task/{tid}/cgroup") } else { format!("/proc/{tid}/cgroup") };
    for t in &targets {
        let v2 = t.controllers.is_empty();
        let file = match (whole_process, v2) {
            (true, _) => "cgroup.procs",
            (false, true) => "cgroup.threads",
            (false, false) => "tasks",
        };
        write(&t.dir.join(file), &tid.to_string()).map_err(|e| SetupError::Failed {
            what: format!("moving task {tid} into {}", t.dir.display()),
            detail: io_errno_text(&e),
            fix: match e.raw_os_error() {
                Some(libc::ESRCH) => "the task ended before it could be moved".into(),
                Some(libc::EOPNOTSUPP) => "the task is in another cgroup subtree than schedlab itself: run the benchmark's tasks from schedlab's cgroup".into(),
                Some(libc::EINVAL) if !v2 => format!("an RT task cannot join a v1 cpu cgroup without RT runtime (RT group scheduling): give {} a share of cpu.rt_runtime_us, or run without --cgroup-*", t.dir.display()),
                _ => "run as root or from a delegated cgroup".into(),
            },
        })?;
        let now = std::fs::read_to_string(&proc_file).ok().and_then(|text| path_in(&text, &t.controllers));
        if now.as_deref() != Some(t.rel.as_str()) {
            return Err(SetupError::Failed {
                what: format!("moving task {tid} into the case's cgroup {}", t.dir.display()),
                detail: format!("{proc_file} says {}, not {}", now.as_deref().unwrap_or("nothing"), t.rel),
                fix: "something else moves tasks between cgroups (systemd, a container runtime): stop it or run without --cgroup-*".into(),
            }
            .into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID_MOUNTS: &str = "tmpfs /sys/fs/cgroup tmpfs rw 0 0\ncgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,relatime,cpu,cpuacct 0 0\ncgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0\ncgroup /sys/fs/cgroup/systemd cgroup rw,name=systemd 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n";
    const HYBRID_CGROUP: &str =
        "9:name=systemd:/\n4:cpu,cpuacct:/user.slice\n3:cpuset:/\n0::/user.slice/session-1.scope\n";

    #[test]
    fn the_v2_mount_and_own_cgroup_are_parsed() {
        assert_eq!(parse_mounts(HYBRID_MOUNTS), Some(PathBuf::from("/sys/fs/cgroup/unified")));
        let pure = "cgroup2 /other cgroup2 rw 0 0\ncgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n";
        assert_eq!(parse_mounts(pure), Some(PathBuf::from("/sys/fs/cgroup")));
        assert_eq!(parse_mounts("proc /proc proc rw 0 0\n"), None);
        assert_eq!(parse_own(HYBRID_CGROUP).as_deref(), Some("/user.slice/session-1.scope"));
        assert_eq!(v1_controllers(HYBRID_CGROUP), ["cpu", "cpuacct", "cpuset"]);
        assert_eq!(parse_own("4:cpu:/\n"), None);
    }

    #[test]
    fn mounted_v1_hierarchies_are_found_with_this_process_s_cgroup_in_each() {
        let v1 = parse_v1(HYBRID_MOUNTS, HYBRID_CGROUP);
        let cpu = V1Hierarchy {
            controllers: "cpu,cpuacct".into(),
            mount: "/sys/fs/cgroup/cpu,cpuacct".into(),
            own_rel: "/user.slice".into(),
        };
        let cpuset =
            V1Hierarchy { controllers: "cpuset".into(), mount: "/sys/fs/cgroup/cpuset".into(), own_rel: "/".into() };
        assert_eq!(v1, [cpu.clone(), cpuset.clone()], "named hierarchies (name=systemd) are left out");
        assert_eq!(cpu.own(), Path::new("/sys/fs/cgroup/cpu,cpuacct/user.slice"));
        assert_eq!(cpuset.own(), Path::new("/sys/fs/cgroup/cpuset"));
        // A line is matched by its whole controller field, never by a part of it.
        assert_eq!(path_in(HYBRID_CGROUP, "cpu"), None);
        assert_eq!(path_in(HYBRID_CGROUP, "cpu,cpuacct").as_deref(), Some("/user.slice"));
        // cpuset bound to v1 but not mounted: not offered as a place.
        let unmounted = HYBRID_MOUNTS.replace("cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0\n", "");
        assert_eq!(parse_v1(&unmounted, HYBRID_CGROUP), [cpu]);
        assert!(parse_v1("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n", "0::/\n").is_empty(), "pure v2");
    }

    #[test]
    fn a_v2_weight_becomes_the_shares_the_kernel_schedules_it_with_and_back() {
        assert_eq!(weight_to_shares(100), 1024, "the default weight is a nice-0 task's shares");
        assert_eq!((weight_to_shares(1), weight_to_shares(10_000)), (10, 102_400));
        for w in 1..=10_000u32 {
            assert_eq!(shares_to_weight(weight_to_shares(w)), u64::from(w), "weight {w}");
        }
    }

    /// A fake hierarchy: `<dir>/own` is this process's cgroup; `v1` names
    /// controllers given a fake v1 hierarchy at `<dir>/v1/own`.
    fn fake(tag: &str, controllers: &str, subtree: &str, v1: &[&str]) -> (PathBuf, Hierarchy) {
        let dir = std::env::temp_dir().join(format!("schedlab-cgroup-{tag}-{}", std::process::id()));
        let own = dir.join("own");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::write(own.join("cgroup.procs"), "").unwrap();
        std::fs::write(own.join("cgroup.controllers"), controllers).unwrap();
        std::fs::write(own.join("cgroup.subtree_control"), subtree).unwrap();
        let v1_hierarchies = if v1.is_empty() {
            Vec::new()
        } else {
            std::fs::create_dir_all(dir.join("v1/own")).unwrap();
            for f in ["cgroup.procs", "tasks"] {
                std::fs::write(dir.join("v1/own").join(f), "").unwrap();
            }
            vec![V1Hierarchy { controllers: v1.join(","), mount: dir.join("v1"), own_rel: "/own".into() }]
        };
        let h = Hierarchy {
            mount: dir.clone(),
            own_rel: "/own".into(),
            v1_bound: v1.iter().map(|s| s.to_string()).collect(),
            v1: v1_hierarchies,
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
        let (dir2, mut h) = fake("v1", "memory\n", "", &["cpu", "cpuset"]);
        h.v1.clear();
        let e = check(&h, &cpus).unwrap_err().to_string();
        assert!(e.contains("cpuset controller") && e.contains("v1 hierarchy") && e.contains("not mounted"), "{e}");
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
        let p = check(&h, &s).unwrap();
        assert_eq!((p.enable, p.cpu, p.cpuset), (vec!["cpu"], Some(Place::V2), Some(Place::V2)));
        let (dir2, h) = fake("enabled", "cpuset cpu\n", "cpu cpuset\n", &[]);
        assert!(check(&h, &s).unwrap().enable.is_empty());
        assert_eq!(check(&h, &CgroupSetting::default()).unwrap(), Placement::default(), "no limit needs no controller");
        let gone = Hierarchy { own_rel: "/nope".into(), ..h };
        let e = check(&gone, &s).unwrap_err().to_string();
        assert!(e.contains("needs cgroup v2") && e.contains("not a cgroup v2 directory"), "{e}");
        for d in [dir, dir2] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }

    #[test]
    fn a_controller_held_by_a_mounted_v1_hierarchy_is_placed_there() {
        let s = CgroupSetting { weight: Some(50), cpus: Some(vec![0]), ..Default::default() };
        // Hybrid: cpuset in v2, cpu in v1 (mixed layouts exist, e.g. cgroup_no_v1=cpuset).
        let (dir, h) = fake("hybrid", "cpuset memory\n", "", &["cpu"]);
        let p = check(&h, &s).unwrap();
        assert_eq!((p.cpu, p.cpuset, p.enable.clone()), (Some(Place::V1(0)), Some(Place::V2), vec!["cpuset"]));
        assert_eq!(p.v1(), [0]);
        // Both in one v1 hierarchy: it is used once.
        let (dir2, h) = fake("both", "memory\n", "", &["cpu", "cpuset"]);
        let p = check(&h, &s).unwrap();
        assert_eq!((p.cpu, p.cpuset, p.v1()), (Some(Place::V1(0)), Some(Place::V1(0)), vec![0]));
        assert!(p.enable.is_empty(), "nothing to enable in v2");
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
