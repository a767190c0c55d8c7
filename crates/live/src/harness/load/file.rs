//! The `write` and `read` loads: streaming writes into, and passes over,
//! unnamed files (O_TMPFILE; where a filesystem has none, a file created
//! and unlinked at once), so no file outlives its descriptors, not even
//! after a SIGKILL. The harness opens the files (and fills the readers'),
//! the forked tasks only write and read them.

use super::status::{Line, Op};
use super::{LoadSpec, Slots, Started};
use crate::error::{errno_text, last_errno, LiveError};
use crate::harness::hygiene::Children;
use crate::harness::now_ns;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes per write or read call.
const BLOCK: usize = 64 << 10;
/// Room left free on the filesystem beside the files.
const HEADROOM: u64 = 64 << 20;

/// The directory a `dir=` value names (`temp`: $TMPDIR or /tmp).
pub(super) fn dir_of(raw: &str) -> PathBuf {
    if raw == "temp" {
        std::env::temp_dir()
    } else {
        PathBuf::from(raw)
    }
}

fn cpath(p: &Path) -> Result<std::ffi::CString, i32> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)
}

/// An unnamed file in `dir`, read-write: O_TMPFILE, or a fresh name that
/// is unlinked at once where the filesystem cannot make unnamed files.
pub(super) fn open_unnamed(dir: &Path) -> Result<OwnedFd, i32> {
    let c = cpath(dir)?;
    // SAFETY: a valid path; the flags ask for an unnamed regular file.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC, 0o600) };
    if fd >= 0 {
        // SAFETY: a fresh descriptor that nothing else owns.
        return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    let e = last_errno();
    if !matches!(e, libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL) {
        return Err(e);
    }
    static N: AtomicU64 = AtomicU64::new(0);
    let name = dir.join(format!("schedlab-load-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
    let c = cpath(&name)?;
    // SAFETY: a valid path; O_EXCL makes it ours.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC, 0o600) };
    if fd < 0 {
        return Err(last_errno());
    }
    // SAFETY: as above; then the name goes, the open file stays.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: a valid path we just created.
    unsafe { libc::unlink(c.as_ptr()) };
    Ok(owned)
}

/// The filesystem a directory is on ("ext4", "tmpfs", ...), and whether it
/// keeps files in memory.
pub(super) fn filesystem(dir: &Path) -> (String, bool) {
    let Ok(c) = cpath(dir) else { return ("an unknown filesystem".into(), false) };
    // SAFETY: statfs is plain old data; all-zero is valid.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid path and a writable statfs.
    if unsafe { libc::statfs(c.as_ptr(), &mut s) } != 0 {
        return ("an unknown filesystem".into(), false);
    }
    let name = match s.f_type as u64 {
        0xEF53 => "ext4",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0x0102_1994 => "tmpfs",
        0x8584_58f6 => "ramfs",
        0x794c_7630 => "overlayfs",
        0x6969 => "nfs",
        0x2fc1_2fc1 => "zfs",
        0xF2F5_2010 => "f2fs",
        0x4d44 => "vfat",
        0x9fa0 => "proc",
        0x6265_6572 => "sysfs",
        other => return (format!("filesystem type 0x{other:x}"), false),
    };
    (name.to_string(), matches!(name, "tmpfs" | "ramfs"))
}

fn free_bytes(dir: &Path) -> Option<u64> {
    let c = cpath(dir).ok()?;
    // SAFETY: statvfs is plain old data; all-zero is valid.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid path and a writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    Some((s.f_bavail as u64).saturating_mul(s.f_frsize as u64))
}

/// What an errno from creating a file in `dir` means, with the fix.
pub(super) fn create_error(dir: &Path, fs: &str, errno: i32) -> String {
    let d = dir.display();
    match errno {
        libc::EROFS => format!(
            "cannot create its file: {d} is on a read-only filesystem ({fs}): give dir= a writable directory (e.g. dir=/var/tmp)"
        ),
        libc::EACCES | libc::EPERM => format!(
            "cannot create its file: {d} ({fs}) takes no new files from this user: give dir= a directory it may write"
        ),
        libc::ENOSPC | libc::EDQUOT => {
            format!("cannot create its file: {d} ({fs}) is full: free space there or give dir= another filesystem")
        }
        libc::ENOENT | libc::ENOTDIR => format!("cannot create its file: {d} is not a directory: give dir= an existing directory"),
        e => format!("cannot create its file in {d} ({fs}): {}: give dir= a writable directory", errno_text(e)),
    }
}

/// `need` bytes must fit beside [`HEADROOM`] in what `free` leaves.
pub(super) fn space_error(dir: &Path, fs: &str, need: u64, free: u64) -> Option<String> {
    let fmt = crate::error::format_bytes;
    (need.saturating_add(HEADROOM) > free).then(|| {
        format!(
            "needs {} for its files plus {} headroom, but {} ({fs}) has {} free: lower size= or the count, or give dir= another filesystem",
            fmt(need),
            fmt(HEADROOM),
            dir.display(),
            fmt(free)
        )
    })
}

/// Before anything starts: `dir` exists, takes a file, has room for
/// `bytes`; on tmpfs the files take memory; `disk` (read from=disk) needs a
/// device under it.
pub(super) fn check_dir(spec: &str, dir: &Path, bytes: u64, disk: bool) -> Result<(), LiveError> {
    let failed = |detail: String| LiveError::LoadFailed { spec: spec.to_string(), detail };
    let (fs, in_memory) = filesystem(dir);
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        _ => return Err(failed(create_error(dir, &fs, libc::ENOENT))),
    }
    open_unnamed(dir).map_err(|e| {
        // It is a directory: one that takes no new files (/proc, /sys).
        let e = if matches!(e, libc::ENOENT | libc::ENOTDIR) { libc::EACCES } else { e };
        failed(create_error(dir, &fs, e))
    })?;
    if disk && in_memory {
        return Err(failed(format!(
            "from=disk needs a device, but {} is on {fs}, which keeps files in memory: give dir= a directory on a disk, or use from=cache",
            dir.display()
        )));
    }
    if let Some(free) = free_bytes(dir) {
        if let Some(e) = space_error(dir, &fs, bytes, free) {
            return Err(failed(e));
        }
    }
    if in_memory {
        super::check_memory(
            &format!("load {spec} ({} keeps its files in memory)", dir.display()),
            bytes,
            "lower size= or give dir= a directory on a disk",
        )?;
    }
    Ok(())
}

/// The load's size, fsync cadence (bytes; 0 never), directory and source.
struct FileOptions {
    size: u64,
    fsync: u64,
    dir: PathBuf,
    disk: bool,
}

fn options(spec: &LoadSpec) -> FileOptions {
    let mib = |k: &str| spec.option_or_default(k).parse::<u64>().unwrap_or(0) << 20;
    FileOptions {
        size: mib("size"),
        fsync: if matches!(spec.kind, super::LoadKind::Write { .. }) { mib("fsync") } else { 0 },
        dir: dir_of(&spec.option_or_default("dir")),
        disk: matches!(spec.kind, super::LoadKind::Read { .. }) && spec.option_or_default("from") == "disk",
    }
}

fn open_for(spec: &LoadSpec, o: &FileOptions) -> Result<OwnedFd, LiveError> {
    open_unnamed(&o.dir).map_err(|e| LiveError::LoadFailed {
        spec: spec.text.clone(),
        detail: create_error(&o.dir, &filesystem(&o.dir).0, e),
    })
}

pub(super) fn start_writers(
    kids: &mut Children,
    spec: &LoadSpec,
    s: &Slots<'_>,
    files: &mut Vec<OwnedFd>,
) -> Result<Started, LiveError> {
    let o = options(spec);
    let (fs, _) = filesystem(&o.dir);
    let buf = vec![0x5au8; BLOCK];
    let mut pids = Vec::new();
    for i in s.first..s.first + s.n {
        super::stop_check()?;
        let fd = open_for(spec, &o)?;
        let raw = fd.as_raw_fd();
        files.push(fd);
        s.status.set_fix(i, format!("free space in {} ({fs}) or give dir= another filesystem", o.dir.display()));
        let (slot, stop, line, deadline) = (s.page.slot(i), s.page.stop_word(), s.status.line(i), s.deadline_ns);
        let (ptr, size, fsync) = (buf.as_ptr(), o.size, o.fsync);
        // SAFETY: the child makes only system calls (pwrite, ftruncate,
        // fdatasync, clock) and atomic stores on shared pages.
        pids.push(unsafe {
            kids.fork(|| {
                crate::harness::hygiene::name_task(c"schedlab-write");
                write_loop(raw, ptr, size, fsync, slot, stop, line, deadline)
            })
        }?);
    }
    let sync = if o.fsync == 0 {
        "never synced (the kernel's writeback decides)".to_string()
    } else {
        format!("fdatasync every {}", crate::error::format_bytes(o.fsync))
    };
    let note = format!(
        "load {}: streams 64 KiB writes into an unnamed file in {} ({fs}), {} a pass, {sync}; throughput in KiB written per second",
        spec.text,
        o.dir.display(),
        crate::error::format_bytes(o.size)
    );
    Ok(Started { pids, note: Some(note) })
}

#[allow(clippy::too_many_arguments)]
fn write_loop(
    fd: i32,
    buf: *const u8,
    size: u64,
    fsync: u64,
    slot: &AtomicU64,
    stop: &AtomicU64,
    line: Line<'_>,
    deadline_ns: u64,
) -> i32 {
    loop {
        // A new pass truncates, as interbench reopens its file with "w".
        // SAFETY: our descriptor.
        if unsafe { libc::ftruncate(fd, 0) } != 0 {
            line.fail(last_errno(), Op::Truncate);
            return 1;
        }
        let (mut off, mut since) = (0u64, 0u64);
        while off < size {
            let len = BLOCK.min((size - off) as usize);
            // SAFETY: buf holds BLOCK readable bytes (the parent's, copied at fork).
            let n = unsafe { libc::pwrite(fd, buf.cast(), len, off as libc::off_t) };
            if n < 0 {
                let e = last_errno();
                if e == libc::EINTR {
                    continue;
                }
                line.fail(e, Op::Write);
                return 1;
            }
            off += n as u64;
            since += n as u64;
            slot.fetch_add(n as u64 / 1024, Ordering::Relaxed);
            // SAFETY: our descriptor.
            if fsync > 0 && since >= fsync && unsafe { libc::fdatasync(fd) } != 0 {
                line.fail(last_errno(), Op::Sync);
                return 1;
            }
            if fsync > 0 && since >= fsync {
                since = 0;
            }
            if stop.load(Ordering::Relaxed) != 0 || now_ns() > deadline_ns {
                return 0;
            }
        }
    }
}

pub(super) fn start_readers(
    kids: &mut Children,
    spec: &LoadSpec,
    s: &Slots<'_>,
    files: &mut Vec<OwnedFd>,
) -> Result<Started, LiveError> {
    let o = options(spec);
    let (fs, _) = filesystem(&o.dir);
    let mut buf = vec![0x5au8; BLOCK];
    let mut pids = Vec::new();
    for i in s.first..s.first + s.n {
        let fd = open_for(spec, &o)?;
        fill(spec, &o, &fd, &buf)?;
        let raw = fd.as_raw_fd();
        files.push(fd);
        s.status.set_fix(i, format!("check {} ({fs}) and the device under it", o.dir.display()));
        let (slot, stop, line, deadline) = (s.page.slot(i), s.page.stop_word(), s.status.line(i), s.deadline_ns);
        let (ptr, size, disk) = (buf.as_mut_ptr(), o.size, o.disk);
        // SAFETY: the child makes only system calls (pread, fadvise, clock)
        // and atomic stores; it reads into its own copy of the buffer.
        pids.push(unsafe {
            kids.fork(|| {
                crate::harness::hygiene::name_task(c"schedlab-read");
                read_loop(raw, ptr, size, disk, slot, stop, line, deadline)
            })
        }?);
    }
    let from = if o.disk {
        "from the device (its cached pages dropped before each pass)"
    } else {
        "from the page cache (from=disk reads the device)"
    };
    let note = format!(
        "load {}: re-reads an unnamed {} file in {} ({fs}) {from}; throughput in KiB read per second",
        spec.text,
        crate::error::format_bytes(o.size),
        o.dir.display()
    );
    Ok(Started { pids, note: Some(note) })
}

/// Write the reader's file whole (a stop between blocks ends it); for
/// from=disk, sync it and drop its pages.
fn fill(spec: &LoadSpec, o: &FileOptions, fd: &OwnedFd, buf: &[u8]) -> Result<(), LiveError> {
    let failed = |what: &str, e: i32| LiveError::LoadFailed {
        spec: spec.text.clone(),
        detail: format!(
            "could not prepare its file in {}: {what} failed with {}: free space there or give dir= another filesystem",
            o.dir.display(),
            errno_text(e)
        ),
    };
    let mut off = 0u64;
    while off < o.size {
        if off.is_multiple_of(16 << 20) {
            super::stop_check()?;
        }
        let len = buf.len().min((o.size - off) as usize);
        // SAFETY: buf is readable for len bytes; our descriptor.
        let n = unsafe { libc::pwrite(fd.as_raw_fd(), buf.as_ptr().cast(), len, off as libc::off_t) };
        if n < 0 {
            let e = last_errno();
            if e == libc::EINTR {
                continue;
            }
            return Err(failed("writing", e));
        }
        off += n as u64;
    }
    if o.disk {
        // SAFETY: our descriptor.
        if unsafe { libc::fdatasync(fd.as_raw_fd()) } != 0 {
            return Err(failed("fdatasync", last_errno()));
        }
        // SAFETY: as above; advice only.
        unsafe { libc::posix_fadvise(fd.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn read_loop(
    fd: i32,
    buf: *mut u8,
    size: u64,
    disk: bool,
    slot: &AtomicU64,
    stop: &AtomicU64,
    line: Line<'_>,
    deadline_ns: u64,
) -> i32 {
    loop {
        if disk {
            // SAFETY: our descriptor; advice only (the pages are clean).
            unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
        let mut off = 0u64;
        while off < size {
            // SAFETY: buf is writable for BLOCK bytes (this task's copy).
            let n = unsafe { libc::pread(fd, buf.cast(), BLOCK, off as libc::off_t) };
            if n < 0 {
                let e = last_errno();
                if e == libc::EINTR {
                    continue;
                }
                line.fail(e, Op::Read);
                return 1;
            }
            if n == 0 {
                break;
            }
            off += n as u64;
            slot.fetch_add(n as u64 / 1024, Ordering::Relaxed);
            if stop.load(Ordering::Relaxed) != 0 || now_ns() > deadline_ns {
                return 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_errors_name_the_cause_and_the_fix() {
        let d = Path::new("/mnt/ro");
        let e = create_error(d, "ext4", libc::EROFS);
        assert!(e.contains("read-only filesystem (ext4)") && e.contains("give dir= a writable directory"), "{e}");
        assert!(create_error(d, "ext4", libc::EACCES).contains("takes no new files from this user"));
        assert!(create_error(d, "xfs", libc::ENOSPC).contains("is full"));
        let e = space_error(d, "ext4", 1 << 30, 100 << 20).unwrap();
        assert!(e.contains("1.0 GiB") && e.contains("100.0 MiB free") && e.contains("lower size="), "{e}");
        assert!(space_error(d, "ext4", 1 << 20, 1 << 30).is_none());
    }

    #[test]
    fn an_unnamed_file_leaves_no_name_behind() {
        let dir = std::env::temp_dir().join(format!("schedlab-unnamed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fd = open_unnamed(&dir).expect("an unnamed file in the temp dir");
        // SAFETY: writing 3 bytes from a valid buffer to our descriptor.
        assert_eq!(unsafe { libc::write(fd.as_raw_fd(), b"abc".as_ptr().cast(), 3) }, 3);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "no name in the directory");
        drop(fd);
        std::fs::remove_dir(&dir).unwrap();
        let e = check_dir("write:1", Path::new("/nonexistent/dir"), 1, false).unwrap_err().to_string();
        assert!(e.contains("not a directory") && e.contains("give dir="), "{e}");
    }
}
