//! # Methodology
//!
//! **Goal.** E1's BYTE/UnixBench "File write" and "File read" figures
//! (KB/s, higher is better; ULE 18,666 vs 4BSD 19,153 KB/s written, 367,421
//! vs 413,350 KB/s read): how fast one task moves a file through the kernel
//! with small calls, and how that changes with the scheduler and its load.
//! UnixBench `fstime` loops for 30 s over files of 500-8000 KB with 256,
//! 1024 or 4096-byte buffers; here one repetition writes then reads one
//! file of `size` KiB with `block`-byte calls, which takes a few seconds in
//! full form. KB means 1024 bytes throughout (as fstime's KBps).
//!
//! **Task.** A dedicated worker thread carries the run's condition (policy,
//! priority, nice, CPUs; read back after applying). It does all the I/O; the
//! kernel's writeback threads and the device do their part outside it.
//!
//! **Timed.** Each repetition creates a new file with a unique name
//! (`schedlab-fileio-<pid>-<n>.tmp`, O_CREAT|O_EXCL) in `dir`, then:
//! write phase, `pwrite` of `block` bytes at increasing offsets until `size`
//! bytes are written (with `fsync=yes`, one `fsync` follows before the clock
//! stops); read phase, `pread` of the same blocks from offset 0 on the same
//! descriptor. `clock_gettime(CLOCK_MONOTONIC)` (vDSO) is read once before
//! the first call and once after every call: a call's latency is the gap
//! between its stamp and the previous one (the call plus a few tens of ns of
//! loop and histogram bookkeeping), and a phase's throughput is its bytes /
//! (last stamp - first stamp). Between the phases the file's page-cache
//! residency is read (cachestat(2), or mincore(2) on a mapping when cachestat
//! is missing and mlock is off), untimed; afterwards the file is closed and
//! removed, untimed. A guard removes it on every exit path (error, stop
//! flag, panic). The stop flag and the deadline are checked every 256 calls.
//!
//! **Caches.** `cache=page` (default) goes through the page cache, as E1
//! did: writes end when the data is in memory (unless `fsync=yes`), and
//! caches are NOT dropped between write and read (E1 did not either), so
//! reads are normally served from memory; the result notes the cached
//! share it found. `cache=direct` opens the file with O_DIRECT (buffer,
//! offsets and lengths aligned to the filesystem's direct-I/O alignment from
//! statx, else the device's logical block size, else 4096) to measure the
//! device; it is refused on tmpfs/ramfs (files live in memory: older
//! kernels reject O_DIRECT with EINVAL, newer ones accept and ignore it)
//! and wherever a probe write with O_DIRECT fails.
//!
//! **Checks before anything runs.** `dir` exists, is a directory and a
//! probe file can be created in it; `size` plus 64 MiB headroom fits in the
//! free space (statvfs), and on tmpfs in memory; `block` is at most `size`.
//! The result notes the directory, its filesystem type and device (from
//! /proc/self/mountinfo, or the statfs magic).
//!
//! **Warm-up.** `warmup` repetitions are run and discarded (they also warm
//! the filesystem's metadata and the allocator).
//!
//! **Metrics.** `write_kb_per_s` and `read_kb_per_s` (KiB/s, stored with the
//! unit "/s" as KiB per second; one value per repetition, headline, higher
//! is better); `write_call_latency` and `read_call_latency` (ns, one
//! histogram per repetition); `cached_before_read` (% of the file in the
//! page cache when the read phase started, per repetition, informational;
//! absent when it cannot be read).
//!
//! **Known biases.** Page cache: with `cache=page` the read figure is a
//! memory-copy figure, not the device's (and on tmpfs there is no device at
//! all). Writeback: with `fsync=no` the write figure stops when the data is
//! dirty in memory; the kernel may write it back during the read phase or
//! the next repetition (each repetition's file is removed, which usually
//! discards dirty pages before they reach the device), and dirty-page
//! throttling (vm.dirty_ratio) slows writes once the file exceeds it.
//! Filesystem: block allocation, journaling and extent layout differ between
//! filesystems and with free space; a fresh file is extended by every write,
//! so it includes allocation. The per-call stamps cost one clock read per
//! call, a few % of a 1 KiB page-cache call.

use crate::error::{errno_text, format_bytes, LiveError};
use crate::harness::params::{ParamKind, ParamSpec, Params, SizeUnit};
use crate::harness::{self, condition, load, now_ns, Ctx};
use crate::{Benchmark, RunPlan};
use schedlab_core::{BenchResult, Direction, LatencyHistogram, Metric, SchedCondition, Unit};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub struct FileIo;

const NAME: &str = "fileio";

/// Free space kept beside the file, so the run does not fill the filesystem.
const HEADROOM: u64 = 64 << 20;

/// The `dir` value meaning the system temp dir (`std::env::temp_dir()`).
const TEMP: &str = "temp";

const SPECS: &[ParamSpec] = &[
    ParamSpec {
        name: "size",
        default: "262144",
        quick_default: Some("16384"),
        unit: "",
        help:
            "file written then read per repetition (KB = 1024 bytes; UnixBench fstime: 500-8000 KB files, 30 s loops)",
        kind: ParamKind::Size { unit: SizeUnit::KiB, min: 1, max: 1 << 32 },
        diagnostic: false,
    },
    ParamSpec {
        name: "block",
        default: "1024",
        quick_default: None,
        unit: "",
        help: "bytes per write/read call (UnixBench fstime: 256, 1024, 4096)",
        kind: ParamKind::Size { unit: SizeUnit::Bytes, min: 1, max: 64 << 20 },
        diagnostic: false,
    },
    ParamSpec {
        name: "cache",
        default: "page",
        quick_default: None,
        unit: "",
        help: "page: through the page cache, reads likely from memory (as E1); direct: O_DIRECT, the device",
        kind: ParamKind::Choice(&["page", "direct"]),
        diagnostic: false,
    },
    ParamSpec {
        name: "fsync",
        default: "no",
        quick_default: None,
        unit: "",
        help: "yes: fsync after the last write, before the write clock stops",
        kind: ParamKind::Choice(&["no", "yes"]),
        diagnostic: false,
    },
    ParamSpec {
        name: "dir",
        default: TEMP,
        quick_default: None,
        unit: "",
        help: "directory for the file; temp = the system temp dir ($TMPDIR or /tmp)",
        kind: ParamKind::Text,
        diagnostic: false,
    },
];

impl Benchmark for FileIo {
    fn name(&self) -> &'static str {
        NAME
    }

    fn summary(&self) -> &'static str {
        "E1 file write/read: write then read a file with small calls; KiB/s and per-call latency"
    }

    fn params(&self) -> &'static [ParamSpec] {
        SPECS
    }

    fn cases(&self, params: &Params, plan: &RunPlan) -> Result<Vec<Params>, LiveError> {
        let (p, _) = prepare(params, plan)?;
        Ok(vec![p])
    }

    fn estimate_s(&self, case: &Params, plan: &RunPlan) -> f64 {
        let Ok(p) = case.resolve(NAME, SPECS, plan.quick) else { return 1.0 };
        let size = p.count("size").unwrap_or(0) * 1024;
        let calls = size.div_ceil(p.count("block").unwrap_or(1).max(1));
        // Page cache here: ~1.5 us per call pair plus ~1 GB/s of copying; O_DIRECT: a slow disk.
        let per_rep = calls as f64 * 1.5e-6 + size as f64 / 1e9;
        let slow = if p.word("cache").is_ok_and(|c| c == "direct") { 4.0 } else { 1.0 };
        (plan.repeat + plan.warmup) as f64 * per_rep * slow
    }

    fn run(&self, case: &Params, plan: &RunPlan, progress: &dyn Fn(f64)) -> Result<BenchResult, LiveError> {
        let started = harness::unix_ms();
        let (p, target) = prepare(case, plan)?;
        let job = Job {
            size: p.count("size")? * 1024,
            block: p.count("block")? as usize,
            direct: p.word("cache")? == "direct",
            fsync: p.word("fsync")? == "yes",
        };
        let est = self.estimate_s(&p, plan);
        let total = 2 * job.calls() * (plan.warmup + plan.repeat) as u64;
        let (m, loads) = harness::drive(NAME, plan, est, total, progress, |ctx| measure(ctx, plan, &target, &job))?;
        let mut warnings = vec![target.note()];
        warnings.extend(cache_notes(&target, &job, &m.cached));
        let applied = harness::merge_applied(&[m.applied], plan.condition.mlock, &mut warnings);
        let mut r = harness::result(NAME, &p, SPECS, plan, applied, started, &loads);
        r.metrics = vec![
            Metric::samples("write_kb_per_s", Unit::KibPerSecond, Direction::HigherIsBetter, m.write_kib_s).headline(),
            Metric::samples("read_kb_per_s", Unit::KibPerSecond, Direction::HigherIsBetter, m.read_kib_s).headline(),
            Metric::histogram_per_repetition("write_call_latency", Direction::LowerIsBetter, m.write_lat),
            Metric::histogram_per_repetition("read_call_latency", Direction::LowerIsBetter, m.read_lat),
        ];
        let cached: Option<Vec<f64>> = m.cached.iter().copied().collect();
        if let Some(c) = cached {
            r.metrics.push(Metric::samples("cached_before_read", Unit::Percent, Direction::Neutral, c));
        }
        r.metrics.extend(loads.metrics);
        r.warnings.extend(warnings);
        Ok(r)
    }
}

/// What one repetition does.
struct Job {
    /// Bytes written and read.
    size: u64,
    block: usize,
    direct: bool,
    fsync: bool,
}

impl Job {
    fn calls(&self) -> u64 {
        self.size.div_ceil(self.block as u64)
    }
}

/// Where the file goes, checked.
#[derive(Debug)]
struct Target {
    dir: PathBuf,
    fs: FsInfo,
    /// Direct-I/O alignment of offsets, lengths and the buffer (1: not direct).
    align: usize,
}

impl Target {
    fn note(&self) -> String {
        format!("file in {} on {}", self.dir.display(), self.fs.describe())
    }
}

/// Resolve and check everything before the measurement: the params, the
/// condition, the directory (exists, is one, writable, room for the file)
/// and, for `cache=direct`, O_DIRECT support and alignment.
fn prepare(params: &Params, plan: &RunPlan) -> Result<(Params, Target), LiveError> {
    let p = params.resolve(NAME, SPECS, plan.quick)?;
    condition::preflight(&plan.condition)?;
    // Two histograms per repetition, the warm-up's and the merged ones.
    load::check_memory(
        &format!("fileio with --repeat {} (histograms)", plan.repeat),
        load::histograms_bytes(2 * plan.repeat as u64 + 4),
        "lower --repeat",
    )?;
    let size = p.count("size")? * 1024;
    let block = p.count("block")?;
    if block > size {
        return Err(bad(
            "block",
            &block.to_string(),
            format!("at most the file size ({size} bytes, size={} KiB): lower block= or raise size=", size / 1024),
        ));
    }
    let direct = p.word("cache")? == "direct";
    let raw_dir = p.word("dir")?;
    let dir = if raw_dir == TEMP { std::env::temp_dir() } else { PathBuf::from(raw_dir) };
    check_dir(raw_dir, &dir)?;
    let fs = FsInfo::of(&dir);
    // Writable: create (and remove) a probe file; access(2) says yes to root on /proc.
    let probe = TestFile::create(&dir, false).map_err(|e| {
        bad(
            "dir",
            raw_dir,
            format!(
                "a writable directory: creating a file in {} failed with {}; it is on {}; choose dir= on a writable filesystem",
                dir.display(),
                errno_text(e),
                fs.describe()
            ),
        )
    })?;
    check_space(&dir, &fs, size, raw_dir)?;
    let align = if direct { check_direct(&dir, &fs, &probe, size, block as usize)? } else { 1 };
    drop(probe);
    Ok((p, Target { dir, fs, align }))
}

fn bad(key: &str, value: &str, expected: String) -> LiveError {
    LiveError::BadParam { bench: NAME, key: key.into(), value: value.into(), expected }
}

fn check_dir(raw: &str, dir: &Path) -> Result<(), LiveError> {
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(bad(
            "dir",
            raw,
            format!("an existing directory: {} does not exist; create it or choose another dir=", dir.display()),
        )),
        Err(e) => Err(bad("dir", raw, format!("a directory schedlab can read: {}: {e}", dir.display()))),
        Ok(m) if !m.is_dir() => {
            Err(bad("dir", raw, format!("a directory: {} is not one; choose a directory for dir=", dir.display())))
        }
        Ok(_) => Ok(()),
    }
}

/// `size` plus [`HEADROOM`] must fit in the space free to this user; on
/// tmpfs/ramfs the file also takes memory.
fn check_space(dir: &Path, fs: &FsInfo, size: u64, raw_dir: &str) -> Result<(), LiveError> {
    let free = free_bytes(dir).map_err(|e| LiveError::os("statvfs of dir", e, "check that dir= is readable"))?;
    let need = size.saturating_add(HEADROOM);
    if need > free {
        return Err(bad(
            "size",
            &(size / 1024).to_string(),
            format!(
                "a file that fits: {} plus {} headroom is more than the {} free in {}, on {}; lower size= or choose dir= on a filesystem with more free space",
                format_bytes(size),
                format_bytes(HEADROOM),
                format_bytes(free),
                dir.display(),
                fs.describe()
            ),
        ));
    }
    if fs.in_memory() {
        load::check_memory(
            &format!("fileio size={} KiB in {} (tmpfs keeps the file in memory)", size / 1024, raw_dir),
            size,
            "lower size= or choose dir= on a disk filesystem",
        )?;
    }
    Ok(())
}

fn free_bytes(dir: &Path) -> Result<u64, i32> {
    let c = cpath(dir)?;
    // SAFETY: statvfs is plain old data; all-zero is a valid value.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a NUL-terminated path, s a writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return Err(crate::error::last_errno());
    }
    Ok((s.f_bavail as u64).saturating_mul(s.f_frsize as u64))
}

fn cpath(p: &Path) -> Result<std::ffi::CString, i32> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)
}

/// O_DIRECT checks: not an in-memory filesystem, `block` and `size` aligned,
/// and a probe write with O_DIRECT accepted. Returns the alignment.
fn check_direct(dir: &Path, fs: &FsInfo, probe: &TestFile, size: u64, block: usize) -> Result<usize, LiveError> {
    let no_direct = |why: String| {
        bad(
            "cache",
            "direct",
            format!(
                "page: {why}; use cache=page, or dir= on a disk filesystem that supports O_DIRECT (ext4, xfs, btrfs)",
            ),
        )
    };
    if fs.in_memory() {
        return Err(no_direct(format!(
            "{} is on {}, which keeps files in memory, so O_DIRECT cannot bypass a cache there (older kernels refuse it with EINVAL, newer ones accept and ignore it)",
            dir.display(),
            fs.describe()
        )));
    }
    let align = direct_alignment(probe, fs);
    // align is a power of two (direct_alignment).
    if block & (align - 1) != 0 {
        return Err(bad(
            "block",
            &block.to_string(),
            format!("a multiple of {align} bytes with cache=direct: the O_DIRECT alignment on {}", fs.describe()),
        ));
    }
    if size & (align as u64 - 1) != 0 {
        return Err(bad(
            "size",
            &(size / 1024).to_string(),
            format!("a multiple of {align} bytes with cache=direct: the O_DIRECT alignment on {}", fs.describe()),
        ));
    }
    let file = TestFile::create(dir, true).map_err(|e| {
        no_direct(format!(
            "opening a file in {} with O_DIRECT failed with {}; it is on {}",
            dir.display(),
            errno_text(e),
            fs.describe()
        ))
    })?;
    let mut buf = AlignedBuf::new(align, align)?;
    buf.fill();
    // SAFETY: buf holds `align` readable bytes, aligned to `align`.
    let n = unsafe { libc::pwrite(file.fd(), buf.as_ptr().cast(), align, 0) };
    if n != align as isize {
        let e = if n < 0 { errno_text(crate::error::last_errno()) } else { format!("a short write of {n} bytes") };
        return Err(no_direct(format!(
            "a {align}-byte O_DIRECT write in {} failed with {e}; it is on {}",
            dir.display(),
            fs.describe()
        )));
    }
    Ok(align)
}

/// Direct-I/O alignment: statx's STATX_DIOALIGN (Linux 6.1+), else the
/// device's logical block size from sysfs, else 4096.
fn direct_alignment(probe: &TestFile, fs: &FsInfo) -> usize {
    // SAFETY: statx is plain old data; all-zero is a valid value.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: an empty path with AT_EMPTY_PATH names the open descriptor; stx is writable.
    let rc = unsafe { libc::statx(probe.fd(), c"".as_ptr(), libc::AT_EMPTY_PATH, libc::STATX_DIOALIGN, &mut stx) };
    if rc == 0 && stx.stx_mask & libc::STATX_DIOALIGN != 0 {
        let a = stx.stx_dio_offset_align.max(stx.stx_dio_mem_align) as usize;
        if a.is_power_of_two() {
            return a;
        }
    }
    let (maj, min) = fs.dev;
    for rel in ["queue/logical_block_size", "../queue/logical_block_size"] {
        let path = format!("/sys/dev/block/{maj}:{min}/{rel}");
        if let Some(n) = std::fs::read_to_string(path).ok().and_then(|s| s.trim().parse::<usize>().ok()) {
            if n.is_power_of_two() {
                return n;
            }
        }
    }
    4096
}

/// The filesystem a directory is on.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FsInfo {
    /// Type name ("ext4"), from mountinfo, else from the statfs magic.
    fstype: String,
    /// Mount source ("/dev/vda1"), when mountinfo names it.
    source: Option<String>,
    mount_point: Option<String>,
    /// statfs f_type (0: unknown).
    magic: u64,
    /// st_dev as major, minor.
    dev: (u32, u32),
}

const TMPFS_MAGIC: u64 = 0x0102_1994;
const RAMFS_MAGIC: u64 = 0x8584_58f6;

impl FsInfo {
    fn of(dir: &Path) -> FsInfo {
        use std::os::unix::fs::MetadataExt;
        let dev = std::fs::metadata(dir).map(|m| m.dev()).unwrap_or(0);
        let dev = (libc::major(dev), libc::minor(dev));
        let magic = statfs_magic(dir).unwrap_or(0);
        let canonical = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let mount = std::fs::read_to_string("/proc/self/mountinfo")
            .ok()
            .and_then(|t| mount_of(&t, dev, &canonical.to_string_lossy()));
        match mount {
            Some(m) => {
                FsInfo { fstype: m.fstype, source: Some(m.source), mount_point: Some(m.mount_point), magic, dev }
            }
            None => FsInfo { fstype: magic_name(magic).into(), source: None, mount_point: None, magic, dev },
        }
    }

    fn in_memory(&self) -> bool {
        matches!(self.magic, TMPFS_MAGIC | RAMFS_MAGIC) || matches!(self.fstype.as_str(), "tmpfs" | "ramfs")
    }

    /// "ext4 (/dev/vda1, mounted at /)".
    fn describe(&self) -> String {
        let mut parts = Vec::new();
        // Pseudo filesystems name themselves as the source ("proc", "tmpfs").
        if let Some(s) = self.source.as_deref().filter(|s| !s.is_empty() && *s != "none" && *s != self.fstype) {
            parts.push(s.to_string());
        } else if self.mount_point.is_none() {
            parts.push(format!("device {}:{}", self.dev.0, self.dev.1));
        }
        if let Some(m) = &self.mount_point {
            parts.push(format!("mounted at {m}"));
        }
        format!("{} ({})", self.fstype, parts.join(", "))
    }
}

fn statfs_magic(dir: &Path) -> Option<u64> {
    let c = cpath(dir).ok()?;
    // SAFETY: statfs is plain old data; all-zero is a valid value.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a NUL-terminated path, s a writable statfs.
    (unsafe { libc::statfs(c.as_ptr(), &mut s) } == 0).then_some(s.f_type as u64)
}

/// Names of common filesystem magics (statfs(2)), for when mountinfo fails.
fn magic_name(magic: u64) -> &'static str {
    match magic {
        0xEF53 => "ext2/ext3/ext4",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        TMPFS_MAGIC => "tmpfs",
        RAMFS_MAGIC => "ramfs",
        0x794C_7630 => "overlay",
        0xF2F5_2010 => "f2fs",
        0x2FC1_2FC1 => "zfs",
        0x6969 => "nfs",
        0x6573_5546 => "fuse",
        0x0102_1997 => "9p",
        0x9FA0 => "proc",
        0x6265_6572 => "sysfs",
        _ => "an unknown filesystem",
    }
}

#[derive(Debug, PartialEq, Eq)]
struct Mount {
    mount_point: String,
    fstype: String,
    source: String,
}

/// The mount holding `path`: among mountinfo lines with device `dev`, the
/// one whose mount point is the longest prefix of `path` (bind mounts of
/// the same device are told apart by where they are mounted).
fn mount_of(mountinfo: &str, dev: (u32, u32), path: &str) -> Option<Mount> {
    let want = format!("{}:{}", dev.0, dev.1);
    let mut best: Option<Mount> = None;
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let f: Vec<&str> = left.split(' ').collect();
        let r: Vec<&str> = right.split(' ').collect();
        if f.len() < 5 || r.len() < 2 || f[2] != want {
            continue;
        }
        let mp = unescape(f[4]);
        let under = path == mp || mp == "/" || path.starts_with(&format!("{mp}/"));
        if under && best.as_ref().is_none_or(|b| mp.len() >= b.mount_point.len()) {
            best = Some(Mount { mount_point: mp, fstype: r[0].to_string(), source: unescape(r[1]) });
        }
    }
    best
}

/// mountinfo escapes space, tab, newline and backslash as \ooo.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b.get(i + 1..i + 4).filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        if let (b'\\', Some(d)) = (b[i], octal) {
            out.push(d.iter().fold(0u8, |v, c| v.wrapping_mul(8).wrapping_add(c - b'0')));
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The test file: created with a unique name, removed when dropped (also on
/// an error return, the stop flag or a panic unwinding through its owner).
struct TestFile {
    path: PathBuf,
    file: std::fs::File,
}

impl TestFile {
    /// A new file `schedlab-fileio-<pid>-<n>.tmp` in `dir` (O_EXCL: never an
    /// existing one), read-write, O_DIRECT when `direct`. Err: the errno.
    fn create(dir: &Path, direct: bool) -> Result<TestFile, i32> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        loop {
            let n = N.fetch_add(1, Ordering::Relaxed);
            let path = dir.join(format!("schedlab-fileio-{}-{n}.tmp", std::process::id()));
            let mut o = std::fs::OpenOptions::new();
            o.read(true).write(true).create_new(true).mode(0o600);
            if direct {
                o.custom_flags(libc::O_DIRECT);
            }
            match o.open(&path) {
                Ok(file) => return Ok(TestFile { path, file }),
                // Left by a killed run of a process with our pid: take the next name.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e.raw_os_error().unwrap_or(libc::EIO)),
            }
        }
    }

    fn fd(&self) -> i32 {
        self.file.as_raw_fd()
    }
}

impl Drop for TestFile {
    fn drop(&mut self) {
        // Unlinking an open file is fine; the descriptor closes right after.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A zeroed heap buffer aligned for O_DIRECT.
struct AlignedBuf {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl AlignedBuf {
    fn new(len: usize, align: usize) -> Result<AlignedBuf, LiveError> {
        let layout = std::alloc::Layout::from_size_align(len.max(1), align.max(4096))
            .map_err(|_| LiveError::Measurement { bench: NAME, detail: format!("bad buffer layout {len}/{align}") })?;
        // SAFETY: layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(LiveError::Os {
                what: "allocating the I/O buffer",
                detail: format_bytes(len as u64),
                hint: "lower block=",
            });
        }
        Ok(AlignedBuf { ptr, layout })
    }

    /// A non-zero pattern, so no filesystem can treat the data as holes.
    fn fill(&mut self) {
        // SAFETY: ptr is valid for layout.size() bytes and uniquely owned.
        let s = unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) };
        s.iter_mut().enumerate().for_each(|(i, b)| *b = (i % 251) as u8 + 1);
    }

    fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in new() with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

struct Measured {
    write_kib_s: Vec<f64>,
    read_kib_s: Vec<f64>,
    write_lat: Vec<LatencyHistogram>,
    read_lat: Vec<LatencyHistogram>,
    /// Per measured repetition: % of the file cached before the read phase.
    cached: Vec<Option<f64>>,
    applied: SchedCondition,
}

fn measure(ctx: &Ctx, plan: &RunPlan, target: &Target, job: &Job) -> Result<Measured, LiveError> {
    condition::apply(0, ctx.cond, None)?;
    let applied = condition::read_back(0)?;
    let tid = condition::gettid();
    ctx.watch(tid);
    let r = repetitions(ctx, plan, target, job);
    ctx.unwatch(tid);
    let _ = condition::demote(0);
    let mut m = r?;
    m.applied = applied;
    Ok(m)
}

fn repetitions(ctx: &Ctx, plan: &RunPlan, target: &Target, job: &Job) -> Result<Measured, LiveError> {
    let mut buf = AlignedBuf::new(job.block, target.align)?;
    buf.fill();
    let mut m = Measured {
        write_kib_s: Vec::new(),
        read_kib_s: Vec::new(),
        write_lat: Vec::new(),
        read_lat: Vec::new(),
        cached: Vec::new(),
        applied: SchedCondition::default(),
    };
    let (mut scratch_w, mut scratch_r) = (LatencyHistogram::new(), LatencyHistogram::new());
    let calls = job.calls();
    for rep in 0..(plan.warmup + plan.repeat) as u64 {
        let measured = rep >= plan.warmup as u64;
        let (w, r) = if measured {
            m.write_lat.push(LatencyHistogram::new());
            m.read_lat.push(LatencyHistogram::new());
            (m.write_lat.last_mut().expect("just pushed"), m.read_lat.last_mut().expect("just pushed"))
        } else {
            (&mut scratch_w, &mut scratch_r)
        };
        let file = TestFile::create(&target.dir, job.direct)
            .map_err(|e| LiveError::os("creating the test file", e, "check dir= (writable, not full)"))?;
        ctx.rep_starts(rep);
        let base = 2 * calls * rep;
        let write_ns = transfer(ctx, &file, &buf, job, Phase::Write, w, base)?;
        let cached = cached_percent(&file, job.size);
        let read_ns = transfer(ctx, &file, &buf, job, Phase::Read, r, base + calls)?;
        ctx.rep_ends(rep);
        drop(file);
        if write_ns == 0 || read_ns == 0 {
            return Err(LiveError::Measurement { bench: NAME, detail: "zero elapsed time (clock broken?)".into() });
        }
        if measured {
            let kib = job.size as f64 / 1024.0;
            m.write_kib_s.push(kib * 1e9 / write_ns as f64);
            m.read_kib_s.push(kib * 1e9 / read_ns as f64);
            m.cached.push(cached);
        }
    }
    Ok(m)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Write,
    Read,
}

/// One phase: `pwrite`/`pread` of `block` bytes from offset 0 to `size`,
/// a stamp after every call (latency = gap to the previous stamp); with
/// `fsync`, the write phase ends after fsync. Returns last - first stamp.
#[inline(never)]
fn transfer(
    ctx: &Ctx,
    file: &TestFile,
    buf: &AlignedBuf,
    job: &Job,
    phase: Phase,
    hist: &mut LatencyHistogram,
    done_base: u64,
) -> Result<u64, LiveError> {
    let fd = file.fd();
    let (size, block) = (job.size, job.block as u64);
    let mut off = 0u64;
    let mut calls = 0u64;
    let t0 = now_ns();
    let mut prev = t0;
    while off < size {
        let len = (size - off).min(block) as usize;
        // SAFETY: buf holds at least `block` >= len bytes, valid for reads and
        // writes; fd is open read-write for the whole call.
        let n = unsafe {
            match phase {
                Phase::Write => libc::pwrite(fd, buf.as_ptr().cast(), len, off as libc::off_t),
                Phase::Read => libc::pread(fd, buf.as_ptr().cast(), len, off as libc::off_t),
            }
        };
        let t = now_ns();
        if n <= 0 {
            let errno = crate::error::last_errno();
            if n < 0 && errno == libc::EINTR {
                continue;
            }
            return Err(io_failed(phase, n, errno, off, size));
        }
        hist.record(t - prev);
        prev = t;
        off += n as u64;
        calls += 1;
        if calls & 255 == 0 {
            ctx.check(t)?;
            ctx.set_done(done_base + calls);
        }
    }
    if phase == Phase::Write && job.fsync {
        // SAFETY: fd is open.
        if unsafe { libc::fsync(fd) } != 0 {
            return Err(LiveError::last_os("fsync of the test file", "check the device (dmesg) or use fsync=no"));
        }
        prev = now_ns();
    }
    ctx.set_done(done_base + calls);
    Ok(prev - t0)
}

fn io_failed(phase: Phase, n: isize, errno: i32, off: u64, size: u64) -> LiveError {
    match (phase, n, errno) {
        (Phase::Write, _, libc::ENOSPC | libc::EDQUOT) => LiveError::os(
            "writing the test file",
            errno,
            "the filesystem filled up during the run: free space, lower size= or choose another dir=",
        ),
        (Phase::Read, 0, _) => LiveError::Measurement {
            bench: NAME,
            detail: format!("the test file ended at byte {off} of the {size} written (changed by someone else?)"),
        },
        (Phase::Write, 0, _) => {
            LiveError::Measurement { bench: NAME, detail: format!("pwrite wrote nothing at byte {off} of {size}") }
        }
        (Phase::Write, _, _) => LiveError::os("pwrite of the test file", errno, "check the device (dmesg) and dir="),
        (Phase::Read, _, _) => LiveError::os("pread of the test file", errno, "check the device (dmesg) and dir="),
    }
}

/// Linux's cachestat(2) (6.5+): the same number on every architecture.
const SYS_CACHESTAT: libc::c_long = 451;

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// Share (%) of the file's pages in the page cache: cachestat(2), else
/// mincore(2) on a read-only mapping (skipped under mlockall, which would
/// fault the whole mapping in). None when neither works.
fn cached_percent(file: &TestFile, size: u64) -> Option<f64> {
    cachestat_percent(file, size).or_else(|| if condition::mlock_active() { None } else { mincore_percent(file, size) })
}

fn page_size() -> u64 {
    // SAFETY: sysconf cannot fail for _SC_PAGESIZE.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64
}

fn cachestat_percent(file: &TestFile, size: u64) -> Option<f64> {
    let range = CachestatRange { off: 0, len: size };
    let mut cs = Cachestat::default();
    // SAFETY: range and cs are valid for the kernel to read and write.
    let rc = unsafe { libc::syscall(SYS_CACHESTAT, file.fd() as libc::c_uint, &range, &mut cs, 0u32) };
    (rc == 0).then(|| percent(cs.nr_cache, size.div_ceil(page_size())))
}

fn mincore_percent(file: &TestFile, size: u64) -> Option<f64> {
    let (len, pages) = (size as usize, size.div_ceil(page_size()));
    // SAFETY: a fresh read-only shared mapping of the open file, unmapped below.
    let addr = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.fd(), 0) };
    if addr == libc::MAP_FAILED {
        return None;
    }
    let mut vec = vec![0u8; pages as usize];
    // SAFETY: addr..addr+len is our mapping; vec has one byte per page.
    let ok = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) } == 0;
    // SAFETY: unmapping the mapping made above.
    unsafe { libc::munmap(addr, len) };
    ok.then(|| percent(vec.iter().filter(|b| **b & 1 == 1).count() as u64, pages))
}

fn percent(part: u64, whole: u64) -> f64 {
    (part as f64 * 100.0 / whole.max(1) as f64).min(100.0)
}

/// What the cache mode means for the figures, with the residency found.
fn cache_notes(target: &Target, job: &Job, cached: &[Option<f64>]) -> Vec<String> {
    let known: Vec<f64> = cached.iter().flatten().copied().collect();
    let found = if known.is_empty() {
        "the cached share could not be read (no cachestat, and mincore skipped or failed)".to_string()
    } else {
        let lo = known.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = known.iter().copied().fold(0.0, f64::max);
        if (hi - lo).abs() < 0.05 {
            format!("{lo:.0} % of the file was in the page cache when the read phase started")
        } else {
            format!("{lo:.0}-{hi:.0} % of the file was in the page cache when the read phase started")
        }
    };
    let mut notes = Vec::new();
    if job.direct {
        notes.push(format!("cache=direct: O_DIRECT with {}-byte alignment, the page cache is bypassed", target.align));
    } else {
        let writes = if job.fsync {
            "writes are fsync'ed before the write clock stops"
        } else {
            "with fsync=no the write figure ends when the data is dirty in memory and writeback happens later, outside the clock"
        };
        notes.push(format!(
            "cache=page: caches are not dropped between write and read (as in E1 and UnixBench fstime), so reads are likely served from the page cache (memory copies, not the device): {found}; {writes}; use cache=direct to measure the device"
        ));
        if target.fs.in_memory() {
            notes.push(format!("{} keeps the file in memory: no device is involved", target.fs.fstype));
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24683656k
27 1 254:1 / / rw,relatime - ext4 /dev/vda1 rw,discard
40 27 254:1 /srv/data /mnt/my\\040data rw,relatime shared:5 - ext4 /dev/vda1 rw
41 27 8:16 / /mnt/fast rw,relatime - xfs /dev/sdb rw,attr2
";

    #[test]
    fn mountinfo_picks_the_mount_holding_the_path() {
        let m = mount_of(MOUNTINFO, (254, 1), "/tmp").unwrap();
        assert_eq!((m.mount_point.as_str(), m.fstype.as_str(), m.source.as_str()), ("/", "ext4", "/dev/vda1"));
        // A bind mount of the same device, with an escaped space and optional fields.
        let m = mount_of(MOUNTINFO, (254, 1), "/mnt/my data/x").unwrap();
        assert_eq!(m.mount_point, "/mnt/my data");
        // Same device, but "/mnt/my database" is not under "/mnt/my data".
        assert_eq!(mount_of(MOUNTINFO, (254, 1), "/mnt/my database").unwrap().mount_point, "/");
        assert_eq!(mount_of(MOUNTINFO, (8, 16), "/mnt/fast").unwrap().fstype, "xfs");
        assert_eq!(mount_of(MOUNTINFO, (0, 23), "/dev/shm/a").unwrap().fstype, "tmpfs");
        assert_eq!(mount_of(MOUNTINFO, (9, 9), "/x"), None, "unknown device");
    }

    #[test]
    fn unescape_handles_octal_and_plain_text() {
        assert_eq!(unescape("/a\\040b\\011c"), "/a b\tc");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape("/trail\\04"), "/trail\\04", "a cut escape stays as is");
    }

    #[test]
    fn filesystems_in_memory_are_recognised_by_magic_or_name() {
        let mut fs = FsInfo { fstype: "ext4".into(), source: None, mount_point: None, magic: 0xEF53, dev: (254, 1) };
        assert!(!fs.in_memory());
        assert_eq!(fs.describe(), "ext4 (device 254:1)");
        fs.magic = TMPFS_MAGIC;
        assert!(fs.in_memory());
        let fs = FsInfo {
            fstype: "ramfs".into(),
            source: Some("none".into()),
            mount_point: Some("/r".into()),
            magic: 0,
            dev: (0, 40),
        };
        assert!(fs.in_memory());
        assert_eq!(fs.describe(), "ramfs (mounted at /r)");
        assert_eq!(magic_name(0x5846_5342), "xfs");
        assert_eq!(magic_name(1), "an unknown filesystem");
    }

    #[test]
    fn test_files_get_unique_names_and_are_removed_even_on_panic() {
        let dir = std::env::temp_dir();
        let a = TestFile::create(&dir, false).unwrap();
        let b = TestFile::create(&dir, false).unwrap();
        assert_ne!(a.path, b.path);
        let (pa, pb) = (a.path.clone(), b.path.clone());
        assert!(pa.exists() && pb.exists());
        drop(a);
        assert!(!pa.exists());
        let r = std::panic::catch_unwind(move || {
            let _held = b;
            panic!("boom");
        });
        assert!(r.is_err());
        assert!(!pb.exists(), "the guard removes the file while unwinding");
    }

    #[test]
    fn dir_is_free_text_kept_as_given_and_quick_shrinks_the_file() {
        let p = Params::parse("dir= /Some/Dir ").unwrap().resolve(NAME, SPECS, false).unwrap();
        assert_eq!(p.word("dir").unwrap(), "/Some/Dir");
        assert_eq!(p.count("size").unwrap(), 262_144);
        let q = Params::new().resolve(NAME, SPECS, true).unwrap();
        assert_eq!((q.count("size").unwrap(), q.word("dir").unwrap()), (16_384, TEMP));
        assert_eq!(q.to_json(SPECS)["size"], serde_json::json!(16_384));
    }

    #[test]
    fn calls_round_up_and_percent_is_capped() {
        let job = Job { size: 10_000, block: 4096, direct: false, fsync: false };
        assert_eq!(job.calls(), 3);
        assert_eq!(percent(5, 10), 50.0);
        assert_eq!(percent(12, 10), 100.0, "a huge folio may count past the file's end");
        assert_eq!(percent(0, 0), 0.0);
    }

    #[test]
    fn cachestat_or_mincore_sees_a_freshly_written_file() {
        let f = TestFile::create(&std::env::temp_dir(), false).unwrap();
        let data = vec![7u8; 1 << 20];
        // SAFETY: data is readable for its length.
        assert_eq!(unsafe { libc::pwrite(f.fd(), data.as_ptr().cast(), data.len(), 0) }, data.len() as isize);
        let size = data.len() as u64;
        let m = mincore_percent(&f, size).expect("mincore works everywhere");
        assert!(m > 50.0, "a file just written is mostly cached: {m}");
        // cachestat needs Linux 6.5; where it exists it must agree.
        if let Some(c) = cachestat_percent(&f, size) {
            assert!((c - m).abs() < 10.0, "cachestat {c} vs mincore {m}");
        }
        assert!(cached_percent(&f, size).is_some());
    }

    #[test]
    fn notes_say_what_the_cache_mode_means() {
        let target = Target {
            dir: "/tmp".into(),
            fs: FsInfo {
                fstype: "ext4".into(),
                source: Some("/dev/vda1".into()),
                mount_point: Some("/".into()),
                magic: 0xEF53,
                dev: (254, 1),
            },
            align: 1,
        };
        assert_eq!(target.note(), "file in /tmp on ext4 (/dev/vda1, mounted at /)");
        let page = Job { size: 1 << 20, block: 1024, direct: false, fsync: false };
        let n = cache_notes(&target, &page, &[Some(100.0), Some(99.0)]);
        assert!(n[0].contains("likely served from the page cache") && n[0].contains("99-100 %"), "{n:?}");
        assert!(n[0].contains("with fsync=no the write figure ends"), "{n:?}");
        assert_eq!(n.len(), 1);
        let n = cache_notes(&target, &Job { fsync: true, ..page }, &[None]);
        assert!(n[0].contains("could not be read") && n[0].contains("fsync'ed"), "{n:?}");
        let direct = Job { size: 1 << 20, block: 4096, direct: true, fsync: false };
        assert!(cache_notes(&Target { align: 512, ..target }, &direct, &[])[0].contains("512-byte alignment"));
    }
}
