//! Kernel scheduler tunables for a case (`--tunable NAME=VALUE`): the files
//! of /sys/kernel/debug/sched (the fair class's `base_slice_ns`,
//! `migration_cost_ns`, `fair_server/cpu0/runtime`, ...; `preempt` takes one
//! of its choices) and the `kernel.sched_*` sysctls of /proc/sys/kernel.
//!
//! A name `kernel.sched_x` (or `sched_x` when /proc/sys/kernel has it) is the
//! sysctl; any other is a path below the debugfs directory. Every old value
//! is written to a recovery record *before* the first write, so a killed run
//! leaves what `schedlab check --restore` puts back; the [`Guard`] restores
//! them after the case, last written first. Names are resolved over
//! configurable [`Roots`], so resolution is tested on a fake tree.

use crate::error::LiveError;
use crate::harness::recovery::{Record, Step};
use crate::harness::setup::{io_errno_text, is_root, SetupError};
use schedlab_core::condition::Tunable;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Where debugfs is mounted when it is.
const DEBUGFS: &str = "/sys/kernel/debug";

/// The two directories tunables live in.
#[derive(Debug, Clone)]
pub struct Roots {
    /// /sys/kernel/debug/sched
    pub sched_debug: PathBuf,
    /// /proc/sys/kernel
    pub sysctl_kernel: PathBuf,
}

impl Roots {
    pub fn system() -> Roots {
        Roots { sched_debug: Path::new(DEBUGFS).join("sched"), sysctl_kernel: PathBuf::from("/proc/sys/kernel") }
    }
}

/// Files of the debugfs directory that are not one-value settings.
const NOT_SETTINGS: &[(&str, &str)] = &[
    ("debug", "it is a dump of every run queue, not a setting"),
    ("features", "it is a set of flags (write NO_NAME or NAME one at a time): not supported as --tunable"),
];

/// The debugfs subdirectory too large to suggest names from (one per CPU and domain).
const NOT_LISTED: &[&str] = &["domains"];

/// A tunable found on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// As the user wrote it (`base_slice_ns`, `kernel.sched_rt_runtime_us`).
    pub name: String,
    pub value: String,
    pub path: PathBuf,
}

/// Resolve every tunable (all errors are the first one's). Debugfs is mounted
/// first when a debugfs name needs it and the roots are the system's.
pub fn resolve_all(list: &[Tunable], roots: &Roots) -> Result<Vec<Resolved>, LiveError> {
    if !is_root() {
        return Err(SetupError::NotRoot { what: "--tunable (writing kernel scheduler settings)" }.into());
    }
    list.iter().map(|t| resolve(t, roots).map_err(LiveError::from)).collect()
}

/// Find `t` under `roots`: it must exist, be a file, a setting and writable.
pub fn resolve(t: &Tunable, roots: &Roots) -> Result<Resolved, SetupError> {
    let name = t.name.as_str();
    let sysctl = match name.strip_prefix("kernel.") {
        Some(rest) if rest.starts_with("sched_") && !rest.contains(['/', '.']) => Some(rest),
        Some(_) => {
            return Err(SetupError::NotATunable {
                name: name.into(),
                why: "of the sysctls only kernel.sched_* are scheduler tunables".into(),
            })
        }
        None if name.starts_with("sched_") && roots.sysctl_kernel.join(name).is_file() => Some(name),
        None => None,
    };
    let path = match sysctl {
        Some(file) => roots.sysctl_kernel.join(file),
        None => {
            if roots.sched_debug == Roots::system().sched_debug {
                ensure_debugfs()?;
            } else if !roots.sched_debug.is_dir() {
                return Err(SetupError::Debugfs {
                    detail: format!("{} is missing", roots.sched_debug.display()),
                    fix: "mount debugfs",
                });
            }
            if let Some((_, why)) = NOT_SETTINGS.iter().find(|(n, _)| *n == name) {
                return Err(SetupError::NotATunable { name: name.into(), why: (*why).into() });
            }
            roots.sched_debug.join(name)
        }
    };
    let meta = std::fs::metadata(&path).map_err(|_| SetupError::UnknownTunable {
        name: name.into(),
        looked: match sysctl {
            Some(_) => format!("{} does not exist", path.display()),
            None => format!("neither {} nor /proc/sys/kernel/{name} exists", path.display()),
        },
        similar: similar_text(name, roots),
    })?;
    if meta.is_dir() {
        return Err(SetupError::NotATunable {
            name: name.into(),
            why: format!("{} is a directory: name a file in it (e.g. {name}/...)", path.display()),
        });
    }
    if meta.permissions().mode() & 0o222 == 0 {
        return Err(SetupError::ReadOnly { name: name.into(), path: path.display().to_string() });
    }
    // Read now, so that a file the kernel will not let us at fails here, before anything runs.
    read_value(&path).map_err(|e| unreadable(name, &path, sysctl.is_none(), &e))?;
    Ok(Resolved { name: name.into(), value: t.value.clone(), path })
}

fn unreadable(name: &str, path: &Path, debugfs: bool, e: &std::io::Error) -> SetupError {
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) if !is_root() => {
            SetupError::NotRoot { what: "--tunable (writing kernel scheduler settings)" }
        }
        // Root refused: kernel lockdown ("Lockdown: debugfs access is restricted" in dmesg).
        Some(libc::EPERM) if debugfs => SetupError::Debugfs {
            detail: format!("reading {} was refused although running as root ({})", path.display(), io_errno_text(e)),
            fix: "kernel lockdown restricts debugfs (dmesg says so; man kernel_lockdown.7): boot without it (lockdown=none, Secure Boot off) or use the kernel.sched_* sysctls",
        },
        _ => SetupError::Failed {
            what: format!("reading tunable {name} ({})", path.display()),
            detail: io_errno_text(e),
            fix: "check that the file is a kernel setting this user may read".into(),
        },
    }
}

/// Mount debugfs on /sys/kernel/debug when the scheduler's directory is not
/// there yet. Returns whether this call mounted it.
fn ensure_debugfs() -> Result<bool, SetupError> {
    let sched = Roots::system().sched_debug;
    if sched.is_dir() {
        return Ok(false);
    }
    if !is_root() {
        return Err(SetupError::NotRoot { what: "--tunable (writing kernel scheduler settings)" });
    }
    let target = Path::new(DEBUGFS);
    let empty = std::fs::read_dir(target).map(|mut d| d.next().is_none()).unwrap_or(false);
    if !empty {
        return Err(SetupError::Debugfs {
            detail: format!("{} is missing", sched.display()),
            fix: "the kernel has no scheduler directory in debugfs (kernels before 6.15 need CONFIG_SCHED_DEBUG); use the kernel.sched_* sysctls",
        });
    }
    // SAFETY: valid C strings; no data argument.
    let rc = unsafe {
        libc::mount(c"debugfs".as_ptr(), c"/sys/kernel/debug".as_ptr(), c"debugfs".as_ptr(), 0, std::ptr::null())
    };
    if rc != 0 {
        return Err(SetupError::Debugfs {
            detail: format!(
                "mounting debugfs on {DEBUGFS} failed: {}",
                io_errno_text(&std::io::Error::last_os_error())
            ),
            fix: "mount it (mount -t debugfs none /sys/kernel/debug) or use a kernel with CONFIG_DEBUG_FS",
        });
    }
    MOUNTED.store(true, std::sync::atomic::Ordering::SeqCst);
    if !sched.is_dir() {
        return Err(SetupError::Debugfs {
            detail: format!("debugfs is mounted but has no {}", sched.display()),
            fix: "kernels before 6.15 need CONFIG_SCHED_DEBUG; use the kernel.sched_* sysctls",
        });
    }
    Ok(true)
}

/// Set when this process mounted debugfs (it stays mounted: other tools expect it).
static MOUNTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Every tunable name under `roots`, as `--tunable` takes it.
pub fn names(roots: &Roots) -> Vec<String> {
    fn walk(dir: &Path, prefix: &str, depth: usize, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let rel = format!("{prefix}{name}");
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                if depth < 2 && !NOT_LISTED.contains(&rel.as_str()) {
                    walk(&e.path(), &format!("{rel}/"), depth + 1, out);
                }
            } else if meta.permissions().mode() & 0o222 != 0 && !NOT_SETTINGS.iter().any(|(n, _)| *n == rel) {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(&roots.sched_debug, "", 0, &mut out);
    if let Ok(entries) = std::fs::read_dir(&roots.sysctl_kernel) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("sched_") && e.path().is_file() {
                out.push(format!("kernel.{name}"));
            }
        }
    }
    // Top-level names first: per-CPU ones (fair_server/cpu0/...) would crowd a list.
    out.sort_by(|a, b| (a.matches('/').count(), a).cmp(&(b.matches('/').count(), b)));
    out
}

/// Whether a name is one of a per-CPU directory's (`fair_server/cpu3/runtime`).
pub fn per_cpu(name: &str) -> bool {
    name.split('/')
        .any(|p| p.strip_prefix("cpu").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())))
}

/// "similar names: a, b" (or what there is, when nothing is similar).
fn similar_text(name: &str, roots: &Roots) -> String {
    let all = names(roots);
    if all.is_empty() {
        return format!(
            "no tunables are readable here ({} and {}): run as root and mount debugfs",
            roots.sched_debug.display(),
            roots.sysctl_kernel.display()
        );
    }
    let similar = similar_names(name, &all);
    if similar.is_empty() {
        let shown: Vec<&str> = all.iter().map(String::as_str).take(12).collect();
        format!("the tunables here are {}{}", shown.join(", "), if all.len() > 12 { ", ..." } else { "" })
    } else {
        format!("did you mean {}?", similar.join(", "))
    }
}

/// Up to five of `all` that look like `name` (a typo or a missing prefix).
pub fn similar_names(name: &str, all: &[String]) -> Vec<String> {
    let bare = |s: &str| s.trim_start_matches("kernel.").trim_start_matches("sched_").to_ascii_lowercase();
    let want = bare(name);
    let mut scored: Vec<(f64, &String)> = all
        .iter()
        .map(|c| {
            let have = bare(c);
            let contains = !want.is_empty() && (have.contains(&want) || want.contains(&have));
            (if contains { 1.0 } else { strsim::jaro_winkler(&want, &have) }, c)
        })
        .filter(|(s, _)| *s >= 0.85)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    scored.into_iter().take(5).map(|(_, c)| c.clone()).collect()
}

/// A tunable's current value: the file's text, or for a choice file such as
/// `preempt` ("none voluntary (full) lazy") the chosen word.
pub fn read_value(path: &Path) -> std::io::Result<String> {
    let text = std::fs::read_to_string(path)?;
    Ok(chosen(&text).unwrap_or_else(|| text.trim().to_string()))
}

fn chosen(text: &str) -> Option<String> {
    let start = text.find('(')?;
    let end = text[start..].find(')')? + start;
    let word = text[start + 1..end].trim();
    (!word.is_empty() && !word.contains(char::is_whitespace)).then(|| word.to_string())
}

/// Tunables set for a case; restored by [`Guard::restore`] or on drop.
pub struct Guard {
    /// Written down before the first write (None in tests on a fake tree,
    /// whose paths a record refuses): restoring applies it.
    record: Option<Record>,
    /// (path, old value), last written first: restored directly without a record.
    olds: Vec<(PathBuf, String)>,
    /// What the kernel holds after the writes, by the names given.
    pub read_back: Vec<Tunable>,
    /// Values the kernel adjusted; debugfs mounted by schedlab.
    pub notes: Vec<String>,
}

/// Write every tunable after writing their old values down.
pub fn apply(list: &[Resolved]) -> Result<Guard, LiveError> {
    apply_with(list, |steps| Record::create("tunables", steps).map(Some))
}

/// [`apply`] with the recovery record made by `record` (given the steps that
/// restore the old values).
pub(crate) fn apply_with(
    list: &[Resolved],
    record: impl FnOnce(Vec<Step>) -> Result<Option<Record>, LiveError>,
) -> Result<Guard, LiveError> {
    let mut olds = Vec::new();
    for r in list {
        let old = read_value(&r.path).map_err(|e| unreadable(&r.name, &r.path, !r.name.starts_with("kernel."), &e))?;
        olds.push((r.path.clone(), old));
    }
    olds.reverse();
    let steps = olds.iter().map(|(p, v)| Step::write(p, v)).collect();
    let mut guard = Guard { record: record(steps)?, olds, read_back: Vec::new(), notes: Vec::new() };
    if MOUNTED.load(std::sync::atomic::Ordering::SeqCst) {
        guard
            .notes
            .push(format!("schedlab mounted debugfs on {DEBUGFS} to reach the scheduler tunables; it stays mounted"));
    }
    for r in list {
        // An error drops the guard, which restores what was written so far.
        write(r, guard.olds.iter().find(|(p, _)| *p == r.path).map_or("", |(_, v)| v.as_str()))?;
        let now = read_value(&r.path).unwrap_or_default();
        if now != r.value {
            guard.notes.push(format!("tunable {}: asked for {}, the kernel holds {now}", r.name, r.value));
        }
        guard.read_back.push(Tunable { name: r.name.clone(), value: now });
    }
    Ok(guard)
}

fn write(r: &Resolved, old: &str) -> Result<(), SetupError> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().write(true).truncate(true).open(&r.path).map_err(|e| {
        if !is_root() && matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) {
            SetupError::NotRoot { what: "--tunable (writing kernel scheduler settings)" }
        } else if e.raw_os_error() == Some(libc::EACCES) {
            SetupError::ReadOnly { name: r.name.clone(), path: r.path.display().to_string() }
        } else {
            SetupError::Failed {
                what: format!("opening tunable {} ({})", r.name, r.path.display()),
                detail: io_errno_text(&e),
                fix: "check that the file is a writable kernel setting".into(),
            }
        }
    })?;
    f.write_all(r.value.as_bytes()).map_err(|e| SetupError::Refused {
        name: r.name.clone(),
        value: r.value.clone(),
        path: r.path.display().to_string(),
        errno: io_errno_text(&e),
        current: old.to_string(),
    })
}

impl Guard {
    /// Put the old values back; the failures (the record then stays).
    pub fn restore(mut self) -> Vec<String> {
        self.restore_now()
    }

    fn restore_now(&mut self) -> Vec<String> {
        if let Some(r) = self.record.take() {
            return r.restore();
        }
        std::mem::take(&mut self.olds)
            .into_iter()
            .filter_map(|(p, v)| std::fs::write(&p, &v).err().map(|e| format!("writing {v:?} to {}: {e}", p.display())))
            .collect()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        for e in self.restore_now() {
            eprintln!("schedlab: could not restore a tunable ({e}): run `schedlab check --restore`");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake /sys/kernel/debug/sched and /proc/sys/kernel in a temp dir.
    struct Fake {
        dir: PathBuf,
        roots: Roots,
    }

    impl Fake {
        fn new(tag: &str) -> Fake {
            let dir = std::env::temp_dir().join(format!("schedlab-tunables-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let roots = Roots { sched_debug: dir.join("sched"), sysctl_kernel: dir.join("kernel") };
            for d in [&roots.sched_debug, &roots.sysctl_kernel, &roots.sched_debug.join("fair_server/cpu0")] {
                std::fs::create_dir_all(d).unwrap();
            }
            let f = Fake { dir, roots };
            f.file("sched/base_slice_ns", "3000000\n", 0o644);
            f.file("sched/migration_cost_ns", "500000\n", 0o644);
            f.file("sched/preempt", "none voluntary (full) lazy\n", 0o644);
            f.file("sched/features", "GENTLE_FAIR_SLEEPERS NO_HRTICK\n", 0o644);
            f.file("sched/fair_server/cpu0/runtime", "50000000\n", 0o644);
            f.file("kernel/sched_rt_runtime_us", "950000\n", 0o644);
            f.file("kernel/sched_autogroup_enabled", "1\n", 0o644);
            f.file("kernel/sched_schedstats_ro", "0\n", 0o444);
            f.file("kernel/hostname", "x\n", 0o644);
            f
        }

        fn file(&self, rel: &str, text: &str, mode: u32) {
            let p = self.dir.join(rel);
            std::fs::write(&p, text).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        }

        fn read(&self, rel: &str) -> String {
            std::fs::read_to_string(self.dir.join(rel)).unwrap()
        }
    }

    impl Drop for Fake {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    fn t(s: &str) -> Tunable {
        Tunable::parse(s).unwrap()
    }

    #[test]
    fn names_resolve_to_debugfs_files_and_sched_sysctls() {
        let f = Fake::new("resolve");
        let r = resolve(&t("base_slice_ns=700000"), &f.roots).unwrap();
        assert_eq!(r.path, f.roots.sched_debug.join("base_slice_ns"));
        let r = resolve(&t("kernel.sched_rt_runtime_us=900000"), &f.roots).unwrap();
        assert_eq!(r.path, f.roots.sysctl_kernel.join("sched_rt_runtime_us"));
        // Without the prefix, a sched_* sysctl is found too.
        let r = resolve(&t("sched_autogroup_enabled=0"), &f.roots).unwrap();
        assert_eq!(r.path, f.roots.sysctl_kernel.join("sched_autogroup_enabled"));
        let r = resolve(&t("fair_server/cpu0/runtime=40000000"), &f.roots).unwrap();
        assert!(r.path.ends_with("fair_server/cpu0/runtime"));
    }

    #[test]
    fn bad_names_say_what_is_wrong_and_what_is_similar() {
        let f = Fake::new("bad");
        let e = resolve(&t("base_slice=1"), &f.roots).unwrap_err().to_string();
        assert!(e.starts_with("unknown tunable 'base_slice'") && e.contains("did you mean base_slice_ns?"), "{e}");
        let e = resolve(&t("kernel.sched_rt_runtime=1"), &f.roots).unwrap_err().to_string();
        assert!(e.contains("kernel.sched_rt_runtime_us"), "{e}");
        let e = resolve(&t("zzz=1"), &f.roots).unwrap_err().to_string();
        assert!(e.contains("the tunables here are") && e.contains("kernel.sched_autogroup_enabled"), "{e}");
        assert!(!e.contains("kernel.hostname"), "only sched_* sysctls are listed: {e}");
        let e = resolve(&t("kernel.hostname=y"), &f.roots).unwrap_err().to_string();
        assert!(e.contains("only kernel.sched_* are scheduler tunables"), "{e}");
        let e = resolve(&t("kernel.sched_schedstats_ro=1"), &f.roots).unwrap_err().to_string();
        assert!(e.contains("is read-only"), "{e}");
        let e = resolve(&t("features=NO_HRTICK"), &f.roots).unwrap_err().to_string();
        assert!(e.contains("set of flags"), "{e}");
        let e = resolve(&t("fair_server=1"), &f.roots).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let missing = Roots { sched_debug: f.dir.join("nope"), ..f.roots.clone() };
        let e = resolve(&t("base_slice_ns=1"), &missing).unwrap_err().to_string();
        assert!(e.contains("debugfs tunables are unavailable"), "{e}");
    }

    #[test]
    fn choice_files_read_as_the_chosen_word() {
        assert_eq!(chosen("none voluntary (full) lazy\n").as_deref(), Some("full"));
        assert_eq!(chosen("3000000\n"), None);
        assert_eq!(similar_names("slice", &["base_slice_ns".into(), "nr_migrate".into()]), ["base_slice_ns"]);
        assert!(per_cpu("fair_server/cpu12/runtime") && !per_cpu("numa_balancing/scan_delay_ms") && !per_cpu("cpus"));
    }

    #[test]
    fn writes_read_back_and_restore_last_first_on_drop() {
        let f = Fake::new("apply");
        let list = vec![
            resolve(&t("base_slice_ns=700000"), &f.roots).unwrap(),
            resolve(&t("preempt=voluntary"), &f.roots).unwrap(),
            resolve(&t("kernel.sched_rt_runtime_us=900000"), &f.roots).unwrap(),
        ];
        let mut steps_seen = Vec::new();
        let guard = apply_with(&list, |steps| {
            steps_seen = steps;
            Ok(None)
        })
        .unwrap();
        // Old values were handed over before anything was written, last first.
        assert_eq!(steps_seen.len(), 3);
        assert_eq!(steps_seen[0], Step::write(f.roots.sysctl_kernel.join("sched_rt_runtime_us"), "950000"));
        assert_eq!(steps_seen[1], Step::write(f.roots.sched_debug.join("preempt"), "full"));
        assert_eq!(f.read("sched/base_slice_ns"), "700000");
        assert_eq!(f.read("kernel/sched_rt_runtime_us"), "900000");
        let back: Vec<(&str, &str)> = guard.read_back.iter().map(|t| (t.name.as_str(), t.value.as_str())).collect();
        assert_eq!(
            back,
            [("base_slice_ns", "700000"), ("preempt", "voluntary"), ("kernel.sched_rt_runtime_us", "900000")]
        );
        drop(guard);
        assert_eq!(f.read("sched/base_slice_ns"), "3000000");
        assert_eq!(f.read("sched/preempt"), "full");
        assert_eq!(f.read("kernel/sched_rt_runtime_us"), "950000");
    }

    #[test]
    fn a_value_the_kernel_adjusts_is_noted() {
        let f = Fake::new("adjust");
        // What is read back differs from what was written: "(lazy)" in a
        // choice file reads as the chosen word "lazy".
        let list = vec![resolve(&t("preempt=(lazy)"), &f.roots).unwrap()];
        let guard = apply_with(&list, |_| Ok(None)).unwrap();
        assert_eq!(guard.read_back[0].value, "lazy");
        assert!(guard.notes.iter().any(|n| n.contains("asked for (lazy), the kernel holds lazy")), "{:?}", guard.notes);
    }
}
