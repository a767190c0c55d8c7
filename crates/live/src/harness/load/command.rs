//! The loads that run other programs: `compile:N` (a real `cc -O2` on a
//! generated C source), `stress:ARGS` (stress-ng) and `cmd:'COMMAND'`
//! (`/bin/sh -c`), each restarted whenever it exits.
//!
//! ```text
//! harness thread ── fork ──> supervisor (schedlab-loadsup; a child subreaper,
//!                            so whatever its runs orphan comes back to it)
//!   applies the load's        waits for GO (its condition is applied), then:
//!   condition, sets GO        loop { fork ─> PDEATHSIG, stdin/stdout/stderr,
//!                                            execve(cc | stress-ng | sh -c)
//!                                    wait (reaping orphans too); count }
//! ```
//!
//! Counted work: `compile` counts compiles that succeeded; `stress` and
//! `cmd` count the CPU milliseconds of their whole tree (the supervisor's
//! reaped children from `getrusage`, the live ones from `/proc/PID/stat`,
//! polled every 10 ms), since a command's own unit of work is unknown and
//! stress-ng runs until killed. Children a process forks from a thread
//! other than its main one are not found by the /proc walk (only the main
//! thread's `children` file is read) until they are reaped.
//!
//! A command whose runs end within 100 ms three times in a row (a compile
//! only when it fails) "exits at once": the supervisor stops and the load
//! fails with the exit status and the last line of its standard error
//! (kept in a memfd, emptied at each run).
//!
//! Stopping ([`stop_trees`], on every exit path): the stop word is set, so
//! no supervisor starts another run; the supervisors' descendants are found
//! in /proc and frozen with SIGSTOP until no new one appears (a frozen task
//! cannot fork), then SIGKILLed; the supervisors reap them and exit, and the
//! harness reaps the supervisors. stress-ng moves its workers to a process
//! group of their own, so a group kill alone would miss them.

use super::status::{Line, Op, FAST_MS, FAST_RUNS};
use super::{LoadKind, LoadSpec, Slots, Started};
use crate::error::{last_errno, LiveError};
use crate::harness::hygiene::Children;
use crate::harness::now_ns;
use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

extern "C" {
    /// The process's environment, handed to the commands as it is.
    static environ: *const *const libc::c_char;
}

/// `name` in the directories of `path` (a PATH value), if executable there.
pub(super) fn find_in_path(name: &str, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path?)
        .map(|d| d.join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

fn path_var() -> Option<std::ffi::OsString> {
    std::env::var_os("PATH")
}

/// The C compiler `compile` runs: cc, else gcc or clang, from PATH.
pub(super) fn compiler() -> Result<PathBuf, LiveError> {
    compiler_in(path_var().as_deref())
}

pub(super) fn compiler_in(path: Option<&std::ffi::OsStr>) -> Result<PathBuf, LiveError> {
    ["cc", "gcc", "clang"].iter().find_map(|c| find_in_path(c, path)).ok_or_else(|| LiveError::MissingTool {
        bench: "load compile",
        tool: "a C compiler (cc, gcc or clang)".into(),
        fix: "install one (apt-get install gcc) or choose another load",
    })
}

pub(super) fn stress_ng() -> Result<PathBuf, LiveError> {
    stress_ng_in(path_var().as_deref())
}

pub(super) fn stress_ng_in(path: Option<&std::ffi::OsStr>) -> Result<PathBuf, LiveError> {
    find_in_path("stress-ng", path).ok_or_else(|| LiveError::MissingTool {
        bench: "load stress",
        tool: "stress-ng".into(),
        fix: "install it (apt-get install stress-ng, dnf install stress-ng) or choose another load",
    })
}

pub(super) fn shell() -> Result<PathBuf, LiveError> {
    let sh = PathBuf::from("/bin/sh");
    if sh.exists() {
        Ok(sh)
    } else {
        Err(LiveError::MissingTool {
            bench: "load cmd",
            tool: "/bin/sh".into(),
            fix: "install a POSIX shell at /bin/sh",
        })
    }
}

/// Workers stress-ng's arguments ask for: the numbers after its options
/// (`--cpu 2 --vm 1` is 3; 0 means one per online CPU), for the task check.
pub(super) fn stress_workers(args: &str) -> u64 {
    let words = shlex::split(args).unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    let mut n: u64 = 0;
    for pair in words.windows(2) {
        if pair[0].starts_with('-') && !pair[0].contains("timeout") {
            if let Ok(k) = pair[1].parse::<u64>() {
                n = n.saturating_add(if k == 0 { cpus } else { k.min(100_000) });
            }
        }
    }
    n
}

/// A C source whose `-O2` compile takes several tens of ms (about 80 ms on
/// the 2-vCPU dev VM): small functions with loops and branches for the
/// optimiser, reading no header.
pub(super) fn generated_source() -> String {
    const FUNCTIONS: u32 = 12;
    let mut s = String::from("/* generated by schedlab: a compile load */\n");
    for f in 0..FUNCTIONS {
        s.push_str(&format!(
            "static unsigned long f{f}(unsigned long x, const unsigned char *p, unsigned long n) {{\n\
             \x20   unsigned long h = {f}u * 2654435761u ^ x;\n\
             \x20   for (unsigned long i = 0; i < n; i++) {{\n\
             \x20       switch ((p[i] + {f}) & 7) {{\n\
             \x20       case 0: h = h * 31 + p[i]; break;\n\
             \x20       case 1: h ^= h >> {s1}; break;\n\
             \x20       case 2: h += (h << {s2}) | i; break;\n\
             \x20       case 3: if (h & 1) h = h / 3 + i; else h = h * 5; break;\n\
             \x20       default: h = (h ^ p[i]) * 0x100000001b3ul;\n\
             \x20       }}\n\
             \x20   }}\n\
             \x20   return h;\n\
             }}\n",
            s1 = 3 + f % 11,
            s2 = 1 + f % 7,
        ));
    }
    s.push_str("unsigned long schedlab_load(const unsigned char *p, unsigned long n) {\n    unsigned long h = 0;\n");
    for f in 0..FUNCTIONS {
        s.push_str(&format!("    h += f{f}(h, p, n);\n"));
    }
    s.push_str("    return h;\n}\n");
    s
}

/// A memfd holding `text`, for a command's standard input.
fn memfd_with(name: &CStr, text: &[u8]) -> Result<OwnedFd, LiveError> {
    // SAFETY: a valid name; the flags are constants.
    let raw = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if raw < 0 {
        return Err(LiveError::last_os("memfd_create for a load", "needs Linux 3.17 or later"));
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    if !text.is_empty() && !crate::harness::write_exact(raw, text) {
        return Err(LiveError::last_os("writing a load's memfd", "check available memory"));
    }
    Ok(fd)
}

/// The first line a tool prints for `--version`.
fn version_of(tool: &Path) -> Option<String> {
    let out = std::process::Command::new(tool).arg("--version").stdin(std::process::Stdio::null()).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    text.lines().map(str::trim).find(|l| !l.is_empty()).map(str::to_string)
}

/// A program to run, with everything `execve` needs prepared before the fork.
struct Exec {
    path: CString,
    /// Kept alive for `argv_ptrs`.
    _argv: Vec<CString>,
    argv_ptrs: Vec<*const libc::c_char>,
    /// Standard input (a memfd with the source for `compile`), or /dev/null.
    stdin: i32,
    devnull: OwnedFd,
}

impl Exec {
    fn new(path: &Path, args: &[String], stdin: Option<i32>) -> Result<Exec, LiveError> {
        use std::os::unix::ffi::OsStrExt;
        let bad = || LiveError::Os {
            what: "preparing a load's command",
            detail: "a NUL byte in it".into(),
            hint: "remove it",
        };
        let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|_| bad())?;
        let argv: Vec<CString> =
            args.iter().map(|a| CString::new(a.as_bytes())).collect::<Result<_, _>>().map_err(|_| bad())?;
        let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        argv_ptrs.push(std::ptr::null());
        // SAFETY: a valid path; O_CLOEXEC (dup2 clears it on 0-2).
        let dn = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if dn < 0 {
            return Err(LiveError::last_os("opening /dev/null", "mount devtmpfs on /dev"));
        }
        // SAFETY: a fresh descriptor.
        let devnull = unsafe { OwnedFd::from_raw_fd(dn) };
        Ok(Exec { path: c_path, _argv: argv, argv_ptrs, stdin: stdin.unwrap_or(-1), devnull })
    }
}

/// What a supervisor counts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Count {
    /// Successful runs (compiles).
    Successes,
    /// CPU milliseconds of the supervisor's whole tree.
    CpuMs,
}

pub(super) fn start(kids: &mut Children, spec: &LoadSpec, s: &Slots<'_>) -> Result<Started, LiveError> {
    let (path, args, count, note): (PathBuf, Vec<String>, Count, String) = match spec.kind {
        LoadKind::Compile { jobs } => {
            let cc = compiler()?;
            let version = version_of(&cc).unwrap_or_else(|| cc.display().to_string());
            let lines = generated_source().lines().count();
            let note = format!(
                "load {}: {version} compiles a generated {lines}-line C source with -O2 in a loop, {jobs} at a time (a real compiler, not interbench's burn+write+read mix); throughput in compiles per second",
                spec.text
            );
            let args = ["cc", "-O2", "-pipe", "-x", "c", "-c", "-", "-o", "/dev/null"].map(String::from).to_vec();
            (cc, args, Count::Successes, note)
        }
        LoadKind::Stress => {
            let bin = stress_ng()?;
            let mut args = vec!["stress-ng".to_string()];
            args.extend(shlex::split(spec.option("args").unwrap_or_default()).unwrap_or_default());
            let version = version_of(&bin).unwrap_or_else(|| "stress-ng".into());
            let note = format!(
                "load {}: {version}, restarted if it exits; throughput in CPU used by its processes (% of one CPU)",
                spec.text
            );
            (bin, args, Count::CpuMs, note)
        }
        _ => {
            let sh = shell()?;
            let args = vec!["sh".to_string(), "-c".to_string(), spec.option("command").unwrap_or_default().to_string()];
            let note = format!(
                "load {}: /bin/sh -c, restarted when it exits; throughput in CPU used by its processes (% of one CPU)",
                spec.text
            );
            (sh, args, Count::CpuMs, note)
        }
    };
    let source = (count == Count::Successes).then(generated_source);
    // SAFETY: sysconf has no preconditions.
    let tick_ms = (1000 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1)) as u64;
    let mut pids = Vec::new();
    for i in s.first..s.first + s.n {
        super::stop_check()?;
        let src = match &source {
            Some(text) => Some(memfd_with(c"schedlab-compile-src", text.as_bytes())?),
            None => None,
        };
        let x = Exec::new(&path, &args, src.as_ref().map(|f| f.as_raw_fd()))?;
        let err = memfd_with(c"schedlab-load-stderr", b"")?;
        let err_fd = err.as_raw_fd();
        s.status.set_command(i, path.display().to_string(), err);
        let (slot, stop, line, deadline) = (s.page.slot(i), s.page.stop_word(), s.status.line(i), s.deadline_ns);
        let x = &x;
        // SAFETY: the child makes only system calls (fork, execve, waitpid,
        // reads of /proc into stack buffers) and atomic stores, on values
        // prepared above.
        pids.push(unsafe {
            kids.fork(|| {
                crate::harness::hygiene::name_task(c"schedlab-loadsup");
                supervise(x, err_fd, slot, stop, line, deadline, count, tick_ms)
            })
        }?);
        // The source's memfd and the Exec's descriptors close here; the
        // supervisor has its own copies.
        drop(src);
    }
    Ok(Started { pids, note: Some(note) })
}

/// The supervisor: wait for GO, then run the command again and again.
#[allow(clippy::too_many_arguments)]
fn supervise(
    x: &Exec,
    err: i32,
    slot: &AtomicU64,
    stop: &AtomicU64,
    line: Line<'_>,
    deadline_ns: u64,
    count: Count,
    tick_ms: u64,
) -> i32 {
    let halt = || stop.load(Ordering::Relaxed) != 0 || now_ns() > deadline_ns;
    // SAFETY: prctl with constant arguments: orphans of the runs come here.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    while !line.may_go() {
        if halt() {
            return 0;
        }
        nap(1_000_000);
    }
    let mut fast = 0;
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    while !halt() {
        // Each run reads its source from the start and starts a fresh log.
        // SAFETY: our own descriptors.
        unsafe {
            if x.stdin >= 0 {
                libc::lseek(x.stdin, 0, libc::SEEK_SET);
            }
            libc::ftruncate(err, 0);
            libc::lseek(err, 0, libc::SEEK_SET);
        }
        let t0 = now_ns();
        // SAFETY: fork in a single-threaded process (this supervisor).
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            line.fail(last_errno(), Op::Fork);
            return drain();
        }
        if pid == 0 {
            run(x, err, me, line);
        }
        let Some(status) = wait_run(pid, count, slot, me, tick_ms, stop, deadline_ns) else { return drain() };
        let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
        line.ran(status, ok);
        if count == Count::Successes && ok {
            slot.fetch_add(1, Ordering::Relaxed);
        }
        let at_once = now_ns() - t0 < FAST_MS * 1_000_000 && (count == Count::CpuMs || !ok);
        fast = if at_once { fast + 1 } else { 0 };
        if fast >= FAST_RUNS {
            line.fail_fast();
            return drain();
        }
    }
    drain()
}

/// In the command's process: die with the supervisor, wire 0-2, exec.
fn run(x: &Exec, err: i32, supervisor: i32, line: Line<'_>) -> ! {
    // SAFETY: async-signal-safe calls on prepared values; _exit on failure.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
        if libc::getppid() != supervisor {
            libc::_exit(111);
        }
        let null = x.devnull.as_raw_fd();
        libc::dup2(if x.stdin >= 0 { x.stdin } else { null }, 0);
        libc::dup2(null, 1);
        libc::dup2(err, 2);
        libc::execve(x.path.as_ptr(), x.argv_ptrs.as_ptr(), environ);
        line.exec_failed(last_errno());
        libc::_exit(127)
    }
}

/// Wait for run `pid` to end, reaping orphans on the way; None when stopped.
/// Counting CPU, it polls every 10 ms and updates the counter.
fn wait_run(
    pid: i32,
    count: Count,
    slot: &AtomicU64,
    me: i32,
    tick_ms: u64,
    stop: &AtomicU64,
    deadline_ns: u64,
) -> Option<i32> {
    loop {
        let mut st = 0;
        let flags = if count == Count::CpuMs { libc::WNOHANG } else { 0 };
        // SAFETY: waiting for any child of this supervisor.
        let r = unsafe { libc::waitpid(-1, &mut st, flags) };
        if r == pid {
            if count == Count::CpuMs {
                slot.fetch_max(tree_cpu_ms(me, tick_ms), Ordering::Relaxed);
            }
            return (stop.load(Ordering::Relaxed) == 0).then_some(st);
        }
        if r > 0 {
            continue; // an orphan of a run, reaped
        }
        if r < 0 && last_errno() != libc::EINTR {
            return None;
        }
        if stop.load(Ordering::Relaxed) != 0 {
            return None; // the harness is killing the tree
        }
        if now_ns() > deadline_ns {
            // No harness stopped it in time: end this group (the supervisor
            // and its runs) at once; PDEATHSIG ends the runs' own children.
            // SAFETY: SIGKILL to our own process group.
            unsafe { libc::kill(0, libc::SIGKILL) };
            return None;
        }
        if count == Count::CpuMs {
            slot.fetch_max(tree_cpu_ms(me, tick_ms), Ordering::Relaxed);
            nap(10_000_000);
        }
    }
}

/// Reap every child left (the harness is killing them), then exit 0.
fn drain() -> i32 {
    loop {
        // SAFETY: blocking wait for any child of ours.
        let r = unsafe { libc::waitpid(-1, std::ptr::null_mut(), 0) };
        if r < 0 && last_errno() != libc::EINTR {
            return 0;
        }
    }
}

fn nap(ns: u64) {
    let t =
        libc::timespec { tv_sec: (ns / 1_000_000_000) as libc::time_t, tv_nsec: (ns % 1_000_000_000) as libc::c_long };
    // SAFETY: a valid timespec.
    unsafe { libc::nanosleep(&t, std::ptr::null_mut()) };
}

/// Append `bytes` to `buf` at `at`, leaving room for the NUL.
fn push(buf: &mut [u8; 64], at: &mut usize, bytes: &[u8]) {
    for &b in bytes {
        if *at + 1 < buf.len() {
            buf[*at] = b;
            *at += 1;
        }
    }
}

/// Append the decimal digits of `n`.
fn push_num(buf: &mut [u8; 64], at: &mut usize, n: i32) {
    let mut digits = [0u8; 12];
    let (mut n, mut k) = (n.max(0) as u32, 0);
    loop {
        digits[k] = b'0' + (n % 10) as u8;
        k += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    digits[..k].reverse();
    push(buf, at, &digits[..k]);
}

/// `/proc/PID<tail>` (with `/task/PID` between when `task`) into `buf` as a
/// C string, without allocating.
fn proc_path(buf: &mut [u8; 64], pid: i32, task: bool, tail: &[u8]) -> *const libc::c_char {
    let mut at = 0;
    push(buf, &mut at, b"/proc/");
    push_num(buf, &mut at, pid);
    if task {
        push(buf, &mut at, b"/task/");
        push_num(buf, &mut at, pid);
    }
    push(buf, &mut at, tail);
    buf[at] = 0;
    buf.as_ptr().cast()
}

/// Read a small /proc file into `buf` (async-signal-safe); its length.
fn read_small(path: *const libc::c_char, buf: &mut [u8]) -> usize {
    // SAFETY: a NUL-terminated path; buf is writable for its length.
    unsafe {
        let fd = libc::open(path, libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return 0;
        }
        let mut len = 0;
        while len < buf.len() {
            let n = libc::read(fd, buf[len..].as_mut_ptr().cast(), buf.len() - len);
            if n <= 0 {
                break;
            }
            len += n as usize;
        }
        libc::close(fd);
        len
    }
}

/// The u64 fields of a /proc/PID/stat line after the command's ')'.
fn stat_field(stat: &[u8], index_after_comm: usize) -> u64 {
    let Some(close) = stat.iter().rposition(|&b| b == b')') else { return 0 };
    stat[close + 1..]
        .split(|b| *b == b' ')
        .filter(|w| !w.is_empty())
        .nth(index_after_comm)
        .map(|w| w.iter().take_while(|b| b.is_ascii_digit()).fold(0u64, |a, b| a * 10 + (b - b'0') as u64))
        .unwrap_or(0)
}

/// CPU ms of this supervisor's tree: the runs it reaped (getrusage) and
/// its live descendants (utime + stime + their reaped children's), found
/// through each main thread's `children` file. No allocation.
fn tree_cpu_ms(me: i32, tick_ms: u64) -> u64 {
    // SAFETY: a zeroed rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv_ms = |t: libc::timeval| t.tv_sec as u64 * 1000 + t.tv_usec as u64 / 1000;
    let mut total = tv_ms(ru.ru_utime) + tv_ms(ru.ru_stime);
    let mut queue = [0i32; 512];
    let (mut head, mut tail) = (0usize, 1usize);
    queue[0] = me;
    let mut path = [0u8; 64];
    let mut buf = [0u8; 2048];
    while head < tail {
        let pid = queue[head];
        head += 1;
        // /proc/PID/task/PID/children: the main thread's children.
        let n = read_small(proc_path(&mut path, pid, true, b"/children"), &mut buf);
        for w in buf[..n].split(|b| *b == b' ' || *b == b'\n').filter(|w| !w.is_empty()) {
            let child = w.iter().take_while(|b| b.is_ascii_digit()).fold(0i64, |a, b| a * 10 + (b - b'0') as i64);
            if child > 0 && tail < queue.len() {
                queue[tail] = child as i32;
                tail += 1;
            }
        }
        if pid != me {
            let n = read_small(proc_path(&mut path, pid, false, b"/stat"), &mut buf);
            // After the comm: state 0, ppid 1, ... utime 11, stime 12, cutime 13, cstime 14.
            let ticks: u64 = (11..=14).map(|i| stat_field(&buf[..n], i)).sum();
            total += ticks * tick_ms;
        }
    }
    total
}

/// Descendants of `roots` (not the roots), from each task's `children`
/// file, or a scan of /proc where the kernel has none.
fn descendants(roots: &[i32]) -> Vec<i32> {
    let mut out: Vec<i32> = Vec::new();
    let mut todo: Vec<i32> = roots.to_vec();
    while let Some(p) = todo.pop() {
        let mut kids: Vec<i32> = Vec::new();
        match std::fs::read_dir(format!("/proc/{p}/task")) {
            Ok(tasks) => {
                let mut any_file = false;
                for t in tasks.flatten() {
                    if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
                        any_file = true;
                        kids.extend(text.split_whitespace().filter_map(|w| w.parse::<i32>().ok()));
                    }
                }
                if !any_file {
                    kids = crate::harness::hygiene::children_of(p);
                }
            }
            Err(_) => continue,
        }
        for k in kids {
            if !out.contains(&k) && !roots.contains(&k) {
                out.push(k);
                todo.push(k);
            }
        }
    }
    out
}

/// Whether `pid` (a child of ours) has exited, without reaping it.
fn has_exited(pid: i32) -> bool {
    // SAFETY: a zeroed siginfo is valid; waitid with WNOWAIT leaves the child unreaped.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above, for our own child.
    let r = unsafe {
        libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT)
    };
    // SAFETY: si_pid is set by waitid when a child changed state.
    r != 0 || unsafe { info.si_pid() } == pid
}

/// Freeze and kill everything below the supervisors `roots`, then give
/// them time to reap it and exit (they are reaped by their `Children`).
/// Twice, for a run forked between the stop word and the first walk.
pub(super) fn stop_trees(roots: &[i32]) {
    for _ in 0..2 {
        let mut seen: Vec<i32> = Vec::new();
        for _ in 0..64 {
            let new: Vec<i32> = descendants(roots).into_iter().filter(|p| !seen.contains(p)).collect();
            if new.is_empty() {
                break;
            }
            for &p in &new {
                // SAFETY: a descendant of our supervisors, not yet reaped
                // (stopped tasks cannot exit, so the pid stays theirs).
                unsafe { libc::kill(p, libc::SIGSTOP) };
            }
            seen.extend(new);
        }
        for &p in &seen {
            // SAFETY: as above; SIGKILL also ends a stopped task.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(1) && !roots.iter().all(|&r| has_exited(r)) {
            std::thread::sleep(Duration::from_millis(1));
        }
        if roots.iter().all(|&r| has_exited(r)) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_tools_are_named_with_the_fix() {
        let none = Some(std::ffi::OsStr::new("/nonexistent-dir"));
        let e = stress_ng_in(none).unwrap_err().to_string();
        assert!(e.contains("stress-ng") && e.contains("not in PATH") && e.contains("apt-get install stress-ng"), "{e}");
        let e = compiler_in(none).unwrap_err().to_string();
        assert!(e.contains("C compiler") && e.contains("apt-get install gcc"), "{e}");
        assert!(find_in_path("sh", Some(std::ffi::OsStr::new("/usr/bin:/bin"))).is_some());
    }

    #[test]
    fn the_generated_source_compiles() {
        let Ok(cc) = compiler() else { panic!("this test needs a C compiler (apt-get install gcc)") };
        let mut child = std::process::Command::new(cc)
            .args(["-O2", "-pipe", "-x", "c", "-c", "-", "-o", "/dev/null"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(generated_source().as_bytes()).unwrap();
        assert!(child.wait().unwrap().success(), "cc refused the generated source");
    }

    #[test]
    fn stress_workers_counts_the_numbers_after_options() {
        assert_eq!(stress_workers("--cpu 2 --vm 1 --timeout 10"), 3);
        assert_eq!(stress_workers("--hdd 4"), 4);
        assert!(stress_workers("--cpu 0") >= 1);
    }

    #[test]
    fn proc_stat_fields_and_paths_parse_without_allocating() {
        let stat = b"42 (a b) S 1 42 42 0 -1 4194304 100 0 0 0 7 3 2 1 20 0 1 0";
        assert_eq!((11..=14).map(|i| stat_field(stat, i)).collect::<Vec<_>>(), [7, 3, 2, 1]);
        let mut buf = [0u8; 64];
        let p = proc_path(&mut buf, 1234, false, b"/stat");
        // SAFETY: proc_path writes a NUL-terminated string.
        assert_eq!(unsafe { CStr::from_ptr(p) }.to_str().unwrap(), "/proc/1234/stat");
        let p = proc_path(&mut buf, 7, true, b"/children");
        // SAFETY: as above.
        assert_eq!(unsafe { CStr::from_ptr(p) }.to_str().unwrap(), "/proc/7/task/7/children");
        // SAFETY: getpid has no preconditions.
        assert!(tree_cpu_ms(unsafe { libc::getpid() }, 10) < u64::MAX);
    }
}
