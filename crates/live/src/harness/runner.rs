//! Exec'd runner processes for fork-heavy loops.
//!
//! fork() cost grows with the parent's memory map (VMAs and page tables are
//! copied, then torn down at the child's exit). Measured on the 2-vCPU VM: a
//! C fork loop loses ~20 % when its process has one idle extra thread (one
//! more stack and malloc arena), and still does when a single-threaded child
//! of that process runs the loop. So a forked runner is not enough: the
//! runner must be a fresh image. The harness re-executes its own binary
//! (`/proc/self/exe`) with `SCHEDLAB_LIVE_RUNNER` set; a constructor in
//! `.init_array` sees it before `main`, runs the loop, writes JSON to a pipe
//! and `_exit`s, so the binary's `main` never runs and the runner's map is
//! as small as a freshly exec'd program's.
//!
//! ```text
//! harness thread                      runner (exec'd /proc/self/exe, pre-main)
//!  fork ─ clear CLOEXEC, /dev/null on 0-2, execve ──> hook(): fork its helper
//!                                                      tasks (pipe: the echo task)
//!  <── "h" + helper pids (hello, 10 s timeout)         wait for "go"
//!  apply condition by pid to runner and
//!  helpers, read back; "go" ──>                        loop (stop word + progress
//!  read JSON until EOF, reap                           in the memfd page), JSON, _exit
//! ```
//!
//! Helpers are forked before the hello, so the harness applies the condition
//! to them by pid (a deadline task may not fork). A single-threaded
//! measuring process matters for context-switch loops too: on the 2-vCPU VM
//! a C pipe ping-pong's fastest round trip grows by ~0.15 us when its process
//! has one idle extra thread (`bench/pipe.c`-style loop, 4 rounds each).
//! The loads' counter page (a memfd too, `LOADS_FD` in the spec) is mapped
//! by the runner, so it marks its own repetitions for the loads' throughput;
//! so is the kernel counters' page (`COUNTERS_FD`), whose marks read the
//! runner process and its descendants (`harness/counters.rs`).
//!
//! If the constructor mechanism did not run in this process (it records that
//! it ran), or the runner does not say hello, callers fall back to a forked
//! runner and say so in a warning.
//!
//! The same hook starts other processes that must be fresh images of this
//! binary but are not a measuring loop, such as http's built-in server:
//! `SCHEDLAB_LIVE_RUNNER="process NAME ARGS"` runs the [`ProcessEntry`]
//! NAME of [`PROCESSES`] with ARGS before `main` and exits with its code;
//! their callers do their own fork and protocol ([`exec_env`] builds the
//! environment).
//!
//! A stop is seen at once while waiting for the hello or the runner's words
//! (the harness polls the stop fd beside the pipe); the runner's process
//! group is then killed, and the workers it forked (hackbench's, up to 400)
//! are reaped by the harness (see `hygiene::Children::kill_all`). The runner
//! and its helpers are registered with the watchdog before they get the
//! condition.

use crate::error::LiveError;
use crate::harness::hygiene::Children;
use crate::harness::{self, read_exact, write_exact, Ctx};
use schedlab_core::SchedCondition;
use std::ffi::{CStr, CString};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};

const ENV: &str = "SCHEDLAB_LIVE_RUNNER";
static HOOK_RAN: AtomicBool = AtomicBool::new(false);

#[used]
#[link_section = ".init_array"]
static HOOK: extern "C" fn() = hook;

extern "C" fn hook() {
    HOOK_RAN.store(true, Ordering::SeqCst);
    // SAFETY: getenv with a valid C string; the environment is set up before
    // constructors run, and nothing else runs yet.
    let v = unsafe { libc::getenv(c"SCHEDLAB_LIVE_RUNNER".as_ptr()) };
    if v.is_null() {
        return;
    }
    // SAFETY: getenv returned a valid NUL-terminated string.
    let spec = unsafe { CStr::from_ptr(v) }.to_string_lossy().into_owned();
    // A stray variable that is not our spec must not hijack the program.
    let code = if let Some(rest) = spec.strip_prefix(PROCESS_PREFIX) {
        let (name, args) = rest.split_once(' ').unwrap_or((rest, ""));
        let Some(entry) = PROCESSES.iter().find(|p| p.name == name) else { return };
        match std::panic::catch_unwind(|| (entry.main)(args)) {
            Ok(Some(code)) => code,
            Ok(None) => return,
            Err(_) => 101,
        }
    } else {
        let Some(spec) = Spec::parse(&spec) else { return };
        std::panic::catch_unwind(|| runner_main(&spec)).unwrap_or(101)
    };
    // SAFETY: leave before main; nothing of the binary's own has started.
    unsafe { libc::_exit(code) };
}

/// Whether exec'd runners can work in this binary (the constructor ran).
pub fn available() -> bool {
    // Referencing HOOK keeps its object file, and so the constructor, linked.
    std::hint::black_box(&HOOK);
    HOOK_RAN.load(Ordering::SeqCst)
}

/// A process other than a benchmark's loop that the harness starts as a
/// fresh image of this binary (see the module comment).
pub(crate) struct ProcessEntry {
    pub name: &'static str,
    /// Runs the process from its arguments and returns its exit code; None:
    /// the arguments are not this entry's, and the program runs on as usual.
    pub main: fn(&str) -> Option<i32>,
}

const PROCESS_PREFIX: &str = "process ";

/// Every process entry the hook knows.
pub(crate) const PROCESSES: &[ProcessEntry] = &[crate::benchmarks::http::SERVER_PROCESS];

/// This process's environment for an exec'd child: without the runner
/// variable, or with it set to `spec`.
pub(crate) fn exec_env(spec: Option<&str>) -> Result<Vec<CString>, LiveError> {
    use std::os::unix::ffi::OsStrExt;
    let mut env: Vec<CString> = Vec::new();
    for (k, v) in std::env::vars_os() {
        if k != ENV {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            if let Ok(c) = CString::new(kv) {
                env.push(c);
            }
        }
    }
    if let Some(spec) = spec {
        env.push(CString::new(format!("{ENV}={spec}")).map_err(|_| LiveError::Measurement {
            bench: "runner",
            detail: "a NUL byte in an exec'd process's arguments".into(),
        })?);
    }
    Ok(env)
}

/// The environment that makes this binary, re-executed, run process `name` with `args`.
pub(crate) fn process_env(name: &str, args: &str) -> Result<Vec<CString>, LiveError> {
    exec_env(Some(&format!("{PROCESS_PREFIX}{name} {args}")))
}

/// "BENCH GO_FD RESULT_FD SHARED_FD LOADS_FD COUNTERS_FD DEADLINE_NS TOTAL MLOCK ARGS..."
/// (LOADS_FD -1: no load tasks; COUNTERS_FD -1: kernel counters off).
pub(crate) struct Spec {
    bench: &'static str,
    /// The benchmark's loop, looked up once from `bench`.
    entry: RunnerEntry,
    go: i32,
    res: i32,
    shm: i32,
    loads: i32,
    counters: i32,
    deadline_ns: u64,
    total: u64,
    /// The condition asks for mlockall: a fresh image does not inherit it.
    mlock: bool,
    args: Vec<String>,
}

impl Spec {
    fn parse(s: &str) -> Option<Spec> {
        let f: Vec<&str> = s.split(' ').collect();
        let num = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok());
        let fd = |i: usize| num(i).and_then(|n| i32::try_from(n).ok());
        let b = crate::find(f.first()?).ok()?;
        let (bench, entry) = (b.name(), b.runner()?);
        let optional_fd = |i: usize| match *f.get(i)? {
            "-1" => Some(-1),
            _ => fd(i),
        };
        let (loads, counters) = (optional_fd(4)?, optional_fd(5)?);
        Some(Spec {
            bench,
            entry,
            go: fd(1)?,
            res: fd(2)?,
            shm: fd(3)?,
            loads,
            counters,
            deadline_ns: num(6)?,
            total: num(7)?,
            mlock: match num(8)? {
                0 => false,
                1 => true,
                _ => return None,
            },
            args: f[9..].iter().map(|s| s.to_string()).collect(),
        })
    }
}

pub(crate) fn runner_main(spec: &Spec) -> i32 {
    let (go, res, shm) = (spec.go, spec.res, spec.shm);
    // Exec'd as /proc/self/exe, the comm would be "exe"; helpers and workers inherit this.
    let entry = &spec.entry;
    crate::harness::hygiene::name_task(entry.comm);
    // Locked before the helpers are forked; a runner that cannot lock
    // exits without a hello and the harness reports it.
    // SAFETY: mlockall takes flags only.
    if spec.mlock && unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
        return 70;
    }
    let mut helpers = match entry.prepare {
        Some(prepare) => match prepare(&spec.args) {
            Ok(h) => h,
            Err(_) => return 69,
        },
        None => Helpers::default(),
    };
    let mut hello = vec![b'h'];
    hello.extend_from_slice(&(helpers.pids.len() as u32).to_le_bytes());
    for pid in &helpers.pids {
        hello.extend_from_slice(&pid.to_le_bytes());
    }
    if !write_exact(res, &hello) {
        return 65;
    }
    let mut b = [0u8; 1];
    if !read_exact(go, &mut b) || b[0] != 1 {
        return 0;
    }
    let Ok(shared) = harness::map_shared(shm) else { return 66 };
    // SAFETY: map_shared returned a live mapping that is never unmapped here.
    let shared = unsafe { &*shared };
    let cond = SchedCondition::default();
    // Unmappable load counters only cost the per-repetition load figures (the harness warns).
    let loads = crate::harness::load::LoadPage::map(spec.loads);
    // Unmappable, the counters are absent ("not marked") in the result.
    let counters = crate::harness::counters::Counters::in_runner(spec.counters);
    let ctx =
        Ctx::for_runner(spec.bench, &cond, shared, loads.as_ref(), counters.as_ref(), spec.deadline_ns, spec.total);
    let mut sink = Sink::new(res);
    let out = (entry.body)(&ctx, &spec.args, &mut helpers, &mut sink);
    let json = match out {
        Ok(()) => serde_json::json!({ "ok": true }),
        Err(e) => serde_json::json!({ "err": { "kind": harness::error_kind(&e), "msg": e.to_string() } }),
    };
    if sink.trailer(&serde_json::to_vec(&json).unwrap_or_default()) {
        0
    } else {
        68
    }
}

/// Starts a runner's helper tasks from its arguments, before the hello.
pub(crate) type PrepareFn = fn(&[String]) -> Result<Helpers, LiveError>;

/// What a benchmark runs inside an exec'd runner process (see
/// [`crate::Benchmark::runner`]): the process name, the helper tasks to start
/// before the hello, and the measuring loop after "go".
pub struct RunnerEntry {
    pub(crate) comm: &'static std::ffi::CStr,
    pub(crate) prepare: Option<PrepareFn>,
    pub(crate) body: fn(&Ctx, &[String], &mut Helpers, &mut Sink) -> Result<(), LiveError>,
}

/// Tasks a runner forks before its hello (their pids go to the harness) and
/// the descriptors the runner keeps to talk to them.
#[derive(Default)]
pub(crate) struct Helpers {
    pub pids: Vec<i32>,
    pub fds: Vec<i32>,
    /// A helper that is a thread of the runner (pipe's thread mode): joined, not reaped.
    pub thread: Option<std::thread::JoinHandle<i32>>,
}

/// At most this many helper pids in a hello.
const MAX_HELPERS: u32 = 64;

/// Word stream from a runner: latencies (ns, < 2^62), END_REP followed by
/// the repetition's elapsed ns, and TRAILER | byte length followed by JSON
/// padded to whole words. Batches of 4096 words keep the runner's own
/// memory to 32 KiB (a histogram would add ~55 touched pages, each of which
/// every fork copies) and cost one write(2) per 4096 operations.
const END_REP: u64 = 0b10 << 62;
const TRAILER: u64 = 0b11 << 62;
const TAG: u64 = 0b11 << 62;
const BATCH: usize = 4096;

pub(crate) struct Sink {
    fd: i32,
    buf: [u64; BATCH],
    n: usize,
    /// Warm-up: count nothing, send nothing.
    pub discard: bool,
}

impl Sink {
    fn new(fd: i32) -> Sink {
        Sink { fd, buf: [0; BATCH], n: 0, discard: false }
    }

    #[inline]
    pub(crate) fn push(&mut self, word: u64) -> Result<(), LiveError> {
        if self.discard {
            return Ok(());
        }
        self.buf[self.n] = word;
        self.n += 1;
        if self.n == BATCH {
            self.flush()?;
        }
        Ok(())
    }

    /// A latency in ns (clamped below the tag bits: 146 years).
    #[inline]
    pub(crate) fn latency(&mut self, ns: u64) -> Result<(), LiveError> {
        self.push(ns.min(!TAG))
    }

    pub(crate) fn end_rep(&mut self, elapsed_ns: u64) -> Result<(), LiveError> {
        self.push(END_REP)?;
        self.push(elapsed_ns)?;
        self.flush()
    }

    fn flush(&mut self) -> Result<(), LiveError> {
        let bytes: Vec<u8> = self.buf[..self.n].iter().flat_map(|w| w.to_le_bytes()).collect();
        self.n = 0;
        if write_exact(self.fd, &bytes) {
            Ok(())
        } else {
            Err(LiveError::Measurement { bench: "runner", detail: "the harness stopped reading".into() })
        }
    }

    fn trailer(&mut self, json: &[u8]) -> bool {
        self.discard = false;
        let mut padded = json.to_vec();
        padded.resize(json.len().div_ceil(8) * 8, b' ');
        let ok = self.push(TRAILER | json.len() as u64).is_ok() && self.flush().is_ok();
        ok && write_exact(self.fd, &padded)
    }
}

/// What the parent collected from a runner.
pub(crate) struct RunnerOut {
    /// Latencies of each measured repetition.
    pub reps: Vec<schedlab_core::LatencyHistogram>,
    /// Elapsed ns of each measured repetition.
    pub elapsed: Vec<u64>,
    /// Read back from the runner, then from each helper.
    pub applied: Vec<SchedCondition>,
    /// Whether the runner was a fresh exec'd image (false: forked fallback).
    pub exec: bool,
}

impl RunnerOut {
    /// Fail unless every one of the `repeat` measured repetitions came back.
    pub(crate) fn check_complete(&self, bench: &'static str, repeat: u32) -> Result<(), LiveError> {
        let n = repeat as usize;
        if self.elapsed.len() != n || self.reps.len() != n || self.elapsed.contains(&0) {
            return Err(LiveError::Measurement { bench, detail: "the runner reported incomplete repetitions".into() });
        }
        Ok(())
    }
}

/// Run `bench` with `args` in a runner: an exec'd fresh image when this
/// binary can host one, else a forked child of the harness (`exec: false`).
/// `cpus[0]` pins the runner, `cpus[i]` its i-th helper (missing or `None`:
/// the condition's own CPU set).
pub(crate) fn run(ctx: &Ctx, bench: &str, args: &[String], cpus: &[Option<&[usize]>]) -> Result<RunnerOut, LiveError> {
    if available() {
        if let Some(out) = start(ctx, bench, args, cpus, true)? {
            return Ok(out);
        }
    }
    start(ctx, bench, args, cpus, false)?
        .ok_or_else(|| LiveError::Measurement { bench: ctx.bench, detail: "the runner process did not start".into() })
}

pub(crate) fn start(
    ctx: &Ctx,
    bench: &str,
    args: &[String],
    cpus: &[Option<&[usize]>],
    exec: bool,
) -> Result<Option<RunnerOut>, LiveError> {
    let (go_r, go_w) = harness::pipe()?;
    let (res_r, res_w) = harness::pipe()?;
    let (gr, gw, rr, rw, shm, lfd) =
        (go_r.as_raw_fd(), go_w.as_raw_fd(), res_r.as_raw_fd(), res_w.as_raw_fd(), ctx.shared_fd(), ctx.loads_fd());
    let cfd = ctx.counters_fd();
    let mlock = u8::from(ctx.cond.mlock);
    let spec =
        format!("{bench} {gr} {rw} {shm} {lfd} {cfd} {} {} {mlock} {}", ctx.deadline_ns, ctx.total, args.join(" "));
    let parsed = Spec::parse(&spec)
        .ok_or_else(|| LiveError::Measurement { bench: ctx.bench, detail: format!("bad runner spec '{spec}'") })?;
    // Everything the exec'ing child needs is prepared here: it may not allocate.
    let cstr = |s: String| {
        CString::new(s).map_err(|_| LiveError::Measurement { bench: ctx.bench, detail: "NUL in runner spec".into() })
    };
    let env = exec_env(Some(&spec))?;
    let argv0 = cstr(format!("schedlab-{bench}-runner"))?;
    let argv = [argv0.as_ptr(), std::ptr::null()];
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|c| c.as_ptr()).collect();
    envp.push(std::ptr::null());
    // SAFETY: valid C string path; the fd is ours (CLOEXEC, closed on drop).
    let devnull = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if devnull < 0 {
        return Err(LiveError::last_os("opening /dev/null", "check /dev"));
    }
    let _devnull = DropFd(devnull);

    let mut kids = Children::new();
    // SAFETY (exec): the child only calls close, fcntl, dup2 and execve on
    // values prepared above (async-signal-safe), then _exits if execve fails.
    // SAFETY (fallback): the child runs the runner in this image: it
    // allocates (glibc resets its malloc locks in the child of fork) but takes
    // no lock a parent thread could hold (no stdio, no shared std::sync).
    let pid = unsafe {
        kids.fork(|| {
            libc::close(gw);
            libc::close(rr);
            if !exec {
                return runner_main(&parsed);
            }
            for fd in [gr, rw, shm, lfd, cfd] {
                if fd >= 0 {
                    libc::fcntl(fd, libc::F_SETFD, 0);
                }
            }
            for std_fd in 0..3 {
                libc::dup2(devnull, std_fd);
            }
            libc::execve(c"/proc/self/exe".as_ptr(), argv.as_ptr(), envp.as_ptr());
            127
        })
    }?;
    drop(go_r);
    drop(res_w);
    // Hello: proves the runner (for exec: the constructor, before main) took over.
    if !wait_readable(ctx, rr, 10_000)? {
        return Ok(None); // `kids` kills and reaps the child.
    }
    let mut hello = [0u8; 5];
    if !read_exact(rr, &mut hello) || hello[0] != b'h' {
        return Ok(None); // `kids` kills and reaps the child.
    }
    let helpers = u32::from_le_bytes(hello[1..].try_into().expect("4 bytes"));
    let mut pids = vec![pid];
    for _ in 0..helpers.min(MAX_HELPERS) {
        let mut p = [0u8; 4];
        if !read_exact(rr, &mut p) {
            return Ok(None);
        }
        pids.push(i32::from_le_bytes(p));
    }
    // Helpers are in the runner's process group: `kids` kills them with it.
    // Watched before they get an RT condition (see `Watchdog::watch`).
    for &p in &pids {
        ctx.watch(p);
    }
    let mut applied = Vec::with_capacity(pids.len());
    for (i, &p) in pids.iter().enumerate() {
        let on = cpus.get(i).copied().flatten();
        match crate::harness::condition::apply(p, ctx.cond, on).and_then(|_| crate::harness::condition::read_back(p)) {
            Ok(a) => applied.push(a),
            Err(e) => {
                pids.iter().for_each(|&p| ctx.unwatch(p));
                return Err(e);
            }
        }
    }
    if !write_exact(gw, &[1]) {
        pids.iter().for_each(|&p| ctx.unwatch(p));
        return Err(LiveError::Measurement {
            bench: ctx.bench,
            detail: "the runner process died before starting".into(),
        });
    }
    let collected = collect(ctx, rr);
    for &p in &pids {
        ctx.unwatch(p);
    }
    // On a stop or an error, `kids` kills the runner's whole process group.
    let (reps, elapsed, trailer) = collected?;
    let code = kids.reap(pid)?;
    let json = trailer.ok_or_else(|| LiveError::Measurement {
        bench: ctx.bench,
        detail: format!("the runner process exited with {code} without a result"),
    })?;
    harness::decode_runner_output(ctx, &json, code)?;
    Ok(Some(RunnerOut { reps, elapsed, applied, exec }))
}

type Collected = (Vec<schedlab_core::LatencyHistogram>, Vec<u64>, Option<Vec<u8>>);

/// Read the runner's word stream until EOF.
fn collect(ctx: &Ctx, fd: i32) -> Result<Collected, LiveError> {
    let mut reps = Vec::new();
    let mut hist = schedlab_core::LatencyHistogram::new();
    let mut elapsed = Vec::new();
    let mut buf = vec![0u8; BATCH * 8];
    let mut pending: Vec<u8> = Vec::new();
    let mut want_elapsed = false;
    loop {
        // Wait for data at most 100 ms at a time, so the deadline is seen
        // even while the runner is silent (a long hackbench repetition); a
        // stop ends the wait at once.
        if !wait_readable(ctx, fd, 100)? {
            continue;
        }
        // SAFETY: buf is a writable buffer of buf.len() bytes.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 && crate::error::last_errno() == libc::EINTR {
            continue;
        }
        if n <= 0 {
            return Ok((reps, elapsed, None));
        }
        pending.extend_from_slice(&buf[..n as usize]);
        let whole = pending.len() / 8 * 8;
        let mut i = 0;
        while i < whole {
            let w = u64::from_le_bytes(pending[i..i + 8].try_into().expect("8 bytes"));
            i += 8;
            if want_elapsed {
                elapsed.push(w);
                want_elapsed = false;
            } else if w & TAG == END_REP {
                want_elapsed = true;
                reps.push(std::mem::take(&mut hist));
            } else if w & TAG == TRAILER {
                let len = (w & !TAG) as usize;
                let mut json = pending[i..].to_vec();
                let mut file = std::mem::ManuallyDrop::new(
                    // SAFETY: borrow the fd as a File without owning it (ManuallyDrop: never closed here).
                    unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) },
                );
                std::io::Read::read_to_end(&mut *file, &mut json).map_err(|e| LiveError::Measurement {
                    bench: ctx.bench,
                    detail: format!("reading the runner's result: {e}"),
                })?;
                json.truncate(len);
                return Ok((reps, elapsed, Some(json)));
            } else {
                hist.record(w);
            }
        }
        pending.drain(..whole);
    }
}

/// Wait until `fd` is readable (true) or `timeout_ms` passed (false);
/// Interrupted (or Overrun) as soon as a stop is requested or the deadline passed.
fn wait_readable(ctx: &Ctx, fd: i32, timeout_ms: i32) -> Result<bool, LiveError> {
    let stop = crate::harness::hygiene::stop_fd();
    let mut fds = [
        libc::pollfd { fd, events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: stop, events: libc::POLLIN, revents: 0 },
    ];
    // SAFETY: two valid pollfds (a negative fd is skipped).
    let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout_ms) };
    // The harness's own wait: no sign of progress for the watchdog.
    ctx.check_stop(harness::now_ns())?;
    Ok(ready > 0 && fds[0].revents != 0)
}

struct DropFd(i32);

impl Drop for DropFd {
    fn drop(&mut self) {
        // SAFETY: closing a descriptor this guard owns.
        unsafe { libc::close(self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_well_formed_spec_takes_over_the_process() {
        let s = Spec::parse("spawn 3 4 5 -1 7 1000 30 1 10 2 1").expect("valid spec");
        assert_eq!(
            (s.bench, s.go, s.res, s.shm, s.loads, s.counters, s.deadline_ns, s.total, s.mlock),
            ("spawn", 3, 4, 5, -1, 7, 1000, 30, true)
        );
        assert_eq!(s.args, ["10", "2", "1"]);
        let s = Spec::parse("hackbench 3 4 5 6 -1 1000 30 0").expect("valid spec");
        assert_eq!((s.loads, s.counters), (6, -1));
        for bad in [
            "",
            "1",
            "pipe 3 4 5 -1 -1 1000 30",
            "spawn 3 4 5 -1 -1 1000 30 2",
            "spin 3 4 5 -1 -1 1000 30 0",
            "spawn x 4 5 -1 -1 1000 30 0",
            "spawn 3 4",
            "spawn 99999999999 4 5 -1 -1 1 1 0",
            "spawn 3 4 5 -2 -1 1000 30 0",
            "spawn 3 4 5 -1 -2 1000 30 0",
            // The spec before the counters' descriptor was added: refused, not misread.
            "spawn 3 4 5 -1 1000 30 1",
        ] {
            assert!(Spec::parse(bad).is_none(), "{bad:?} must be ignored");
        }
        // A process entry's variable is never read as a benchmark runner's spec.
        for p in PROCESSES {
            assert!(Spec::parse(&format!("{PROCESS_PREFIX}{} 3 4 5 -1 -1 1000 30 0", p.name)).is_none());
            assert_eq!(PROCESSES.iter().filter(|q| q.name == p.name).count(), 1, "{}", p.name);
        }
        // This test binary links the constructor, so spawn can use exec'd runners here.
        assert!(available());
    }
}
