//! # Methodology
//!
//! **Goal.** rt-tests `hackbench` (E3's `hackbench 30`), with the same
//! semantics and defaults so figures are comparable: `groups` groups of
//! `fds` (20) senders and `fds` receivers; each sender sends `loops` (100)
//! messages of `datasize` (100) bytes to every receiver of its group, over
//! AF_UNIX stream socketpairs (`transport=socket`, hackbench's default) or
//! pipes (`-p`); tasks are processes (fork, default) or threads (`-T`).
//!
//! **Where.** Like `spawn`, the whole run happens in an exec'd *runner*
//! (a fresh, single-threaded image of this binary, see `runner.rs`), so the
//! forked workers copy and tear down a map as small as a C program's, and the
//! harness's threads are not in the way. The harness applies the condition
//! to the runner by pid; workers inherit it through fork/clone.
//!
//! **Timed.** As in hackbench.c: per group, the receivers are created first
//! (each owns the read end of one socketpair/pipe), then the senders (each
//! holds the write ends of all receivers of its group). Forked workers close
//! every descriptor of their group they do not use, as hackbench's do: a
//! receiver keeps only its read end, a sender only the write ends. (With the
//! extra ends left open, pipe mode measured 1.068x rt-tests' time, 9 rounds;
//! closed, 0.990x.) Every worker writes
//! one byte to a "ready" pipe and then `poll`s a "wake" pipe. When all are
//! ready, the runner takes `CLOCK_MONOTONIC` (hackbench: `gettimeofday`),
//! writes one byte to the wake pipe, reaps every worker in creation order
//! (`waitpid`, or `pthread_join` for threads) and takes the clock again.
//! Worker creation and setup are not timed; worker exit and reaping are.
//! Senders write each message whole (retrying partial writes), receivers
//! read `fds x loops` messages, each completed across partial reads.
//!
//! **Warm-up.** `warmup` whole runs are done first and discarded.
//!
//! **Metrics.** `total_time` (s, one sample per repetition, headline, lower
//! is better: hackbench's `Time:`), `messages_per_s` (groups x fds^2 x loops /
//! total time).
//!
//! **Known biases.** One repetition is one hackbench invocation minus
//! process start-up; rt-tests' figure also contains nothing else. The stop
//! flag is seen between repetitions by the runner and every 100 ms by the
//! harness, which kills the runner's process group on a stop.

use crate::error::LiveError;
use crate::harness::params::{ParamKind, ParamSpec, Params, SizeUnit};
use crate::harness::runner::{RunnerEntry, Sink};
use crate::harness::{self, now_ns, write_exact, Ctx};
use crate::{harness::condition, harness::load, Benchmark, RunPlan};
use schedlab_core::{BenchResult, Direction, Metric, Unit};
use std::os::fd::{AsRawFd, OwnedFd};

pub struct Hackbench;

const NAME: &str = "hackbench";
/// Nominal cost of one message (socket), for progress estimates only.
const NOMINAL_MSG_S: f64 = 2e-6;

const SPECS: &[ParamSpec] = &[
    ParamSpec {
        name: "groups",
        default: "10",
        quick_default: Some("2"),
        unit: "groups",
        help: "groups of fds senders + fds receivers (hackbench -g; rt-tests default 10)",
        kind: ParamKind::Count { min: 1, max: 100_000 },
        diagnostic: false,
    },
    ParamSpec {
        name: "loops",
        default: "100",
        quick_default: None,
        unit: "messages",
        help: "messages each sender sends to each receiver (hackbench -l; default 100)",
        kind: ParamKind::Count { min: 1, max: 1_000_000_000 },
        diagnostic: false,
    },
    ParamSpec {
        name: "fds",
        default: "20",
        quick_default: None,
        unit: "tasks",
        help: "senders and receivers per group (hackbench -f; default 20)",
        kind: ParamKind::Count { min: 1, max: 1_000 },
        diagnostic: false,
    },
    ParamSpec {
        name: "datasize",
        default: "100",
        quick_default: None,
        unit: "",
        help: "message size (hackbench -s; default 100)",
        kind: ParamKind::Size { unit: SizeUnit::Bytes, min: 1, max: 65_536 },
        diagnostic: false,
    },
    ParamSpec {
        name: "transport",
        default: "socket",
        quick_default: None,
        unit: "",
        help: "socket (AF_UNIX socketpair, hackbench's default) or pipe (hackbench -p)",
        kind: ParamKind::Choice(&["socket", "pipe"]),
        diagnostic: false,
    },
    ParamSpec {
        name: "mode",
        default: "process",
        quick_default: None,
        unit: "",
        help: "workers are forked processes (default) or threads (hackbench -T)",
        kind: ParamKind::Choice(&["process", "thread"]),
        diagnostic: false,
    },
];

struct Cfg {
    groups: u64,
    loops: u64,
    fds: u64,
    datasize: u64,
    pipe: bool,
    thread: bool,
}

impl Cfg {
    fn from(p: &Params) -> Result<Cfg, LiveError> {
        Ok(Cfg {
            groups: p.count("groups")?,
            loops: p.count("loops")?,
            fds: p.count("fds")?,
            datasize: p.count("datasize")?,
            pipe: p.word("transport")? == "pipe",
            thread: p.word("mode")? == "thread",
        })
    }

    fn tasks(&self) -> u64 {
        self.groups * self.fds * 2
    }

    fn messages(&self) -> u64 {
        // Saturating: the largest accepted sizes overflow u64 (cases() refuses them anyway).
        self.groups.saturating_mul(self.fds).saturating_mul(self.fds).saturating_mul(self.loops)
    }

    fn args(&self, repeat: u32, warmup: u32) -> Vec<String> {
        [self.groups, self.fds, self.loops, self.datasize, self.pipe as u64, self.thread as u64]
            .iter()
            .map(|v| v.to_string())
            .chain([repeat.to_string(), warmup.to_string()])
            .collect()
    }
}

fn nofile_limit() -> u64 {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: r is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 || r.rlim_cur == libc::RLIM_INFINITY {
        return u64::MAX;
    }
    r.rlim_cur
}

impl Benchmark for Hackbench {
    fn runner(&self) -> Option<RunnerEntry> {
        Some(RunnerEntry {
            comm: c"schedlab-hb",
            prepare: None,
            body: |ctx, args, _, sink| runner_body(ctx, args, sink),
        })
    }

    fn name(&self) -> &'static str {
        NAME
    }

    fn summary(&self) -> &'static str {
        "rt-tests hackbench: groups of 20 senders x 20 receivers over sockets or pipes, total time"
    }

    fn params(&self) -> &'static [ParamSpec] {
        SPECS
    }

    fn cases(&self, params: &Params, plan: &RunPlan) -> Result<Vec<Params>, LiveError> {
        let p = params.resolve(NAME, SPECS, plan.quick)?;
        plan.refuse_deadline(NAME)?;
        let cfg = Cfg::from(&p)?;
        let what = format!("hackbench groups={} fds={}", cfg.groups, cfg.fds);
        load::check_tasks(what, cfg.tasks(), "lower groups= or fds=")?;
        // Thread mode keeps every group's descriptors open in one process.
        let fds_needed = if cfg.thread { cfg.tasks() + 16 } else { 2 * cfg.fds + 16 };
        let nofile = nofile_limit();
        if fds_needed > nofile {
            return Err(LiveError::TooManyTasks {
                what: format!("hackbench groups={} fds={} mode={}", cfg.groups, cfg.fds, p.word("mode")?),
                tasks: fds_needed,
                limit: nofile,
                limit_name: "RLIMIT_NOFILE (open descriptors; ulimit -n)".into(),
                fix: "raise ulimit -n, lower groups=, or use mode=process",
            });
        }
        condition::preflight(&plan.condition)?;
        Ok(vec![p])
    }

    fn estimate_s(&self, case: &Params, plan: &RunPlan) -> f64 {
        let Ok(cfg) = case.resolve(NAME, SPECS, plan.quick).and_then(|p| Cfg::from(&p)) else { return 1.0 };
        let per_msg = if cfg.pipe { NOMINAL_MSG_S / 3.0 } else { NOMINAL_MSG_S };
        cfg.messages() as f64 * per_msg * (plan.repeat + plan.warmup) as f64 + 0.01 * cfg.tasks() as f64
    }

    fn run(&self, case: &Params, plan: &RunPlan, progress: &dyn Fn(f64)) -> Result<BenchResult, LiveError> {
        let started = harness::unix_ms();
        let p = self.cases(case, plan)?.remove(0);
        let cfg = Cfg::from(&p)?;
        let est = self.estimate_s(&p, plan);
        let total = (plan.repeat + plan.warmup) as u64;
        let args = cfg.args(plan.repeat, plan.warmup);
        let (out, loads) = harness::drive(NAME, plan, est, total, progress, |ctx| {
            crate::harness::runner::run(ctx, NAME, &args, &[None])
        })?;
        out.check_complete(NAME, plan.repeat)?;
        let mut warnings = Vec::new();
        if !out.exec {
            warnings.push("hackbench ran in a forked runner (this binary could not re-execute itself): workers copy the harness's memory map".into());
        }
        let applied = harness::merge_applied(&out.applied, plan.condition.mlock, &mut warnings);
        let secs: Vec<f64> = out.elapsed.iter().map(|ns| *ns as f64 / 1e9).collect();
        let rates = secs.iter().map(|s| cfg.messages() as f64 / s).collect();
        let mut r = harness::result(NAME, &p, SPECS, plan, applied, started, &loads);
        r.metrics = vec![
            Metric::samples("total_time", Unit::Seconds, Direction::LowerIsBetter, secs).headline(),
            Metric::samples("messages_per_s", Unit::PerSecond, Direction::HigherIsBetter, rates),
        ];
        r.metrics.extend(loads.metrics);
        r.warnings.extend(warnings);
        Ok(r)
    }
}

/// Read exactly buf.len() bytes across partial reads; false on EOF/error.
#[inline]
fn read_full(fd: i32, buf: &mut [u8]) -> bool {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: the range is inside buf.
        let n = unsafe { libc::read(fd, buf[done..].as_mut_ptr().cast(), buf.len() - done) };
        if n > 0 {
            done += n as usize;
        } else if n < 0 && crate::error::last_errno() == libc::EINTR {
            continue;
        } else {
            return false;
        }
    }
    true
}

/// Ready byte, then wait for the start signal (hackbench's `ready()`).
fn ready(ready_w: i32, wake_r: i32) -> bool {
    if !write_exact(ready_w, b"R") {
        return false;
    }
    let mut pfd = libc::pollfd { fd: wake_r, events: libc::POLLIN, revents: 0 };
    loop {
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, -1) };
        if r == 1 {
            return true;
        }
        if r < 0 && crate::error::last_errno() != libc::EINTR {
            return false;
        }
    }
}

#[derive(Clone, Copy)]
enum Role {
    Receiver { fd: i32, packets: u64 },
    Sender { loops: u64 },
}

#[derive(Clone, Copy)]
struct Shared {
    ready_w: i32,
    wake_r: i32,
    datasize: usize,
}

/// One worker: ready, wait for the start, then receive or send.
/// `out_fds`: the write ends of the group's receivers (senders only).
fn work(s: Shared, role: Role, out_fds: &[i32]) -> i32 {
    if !ready(s.ready_w, s.wake_r) {
        return 2;
    }
    // Sized to the message, like hackbench's `char data[DATASIZE]`: a fixed
    // 64 KiB array would fault in 16 fresh stack pages in every worker.
    let mut data = vec![0u8; s.datasize];
    let data = data.as_mut_slice();
    match role {
        Role::Receiver { fd, packets } => {
            for _ in 0..packets {
                if !read_full(fd, data) {
                    return 3;
                }
            }
        }
        Role::Sender { loops } => {
            for _ in 0..loops {
                for &fd in out_fds {
                    if !write_exact(fd, data) {
                        return 4;
                    }
                }
            }
        }
    }
    0
}

/// Workers of one run; dropping kills and reaps processes that are left
/// (threads die with the runner process).
struct Workers {
    pids: Vec<i32>,
    threads: Vec<std::thread::JoinHandle<i32>>,
}

impl Drop for Workers {
    fn drop(&mut self) {
        for &p in &self.pids {
            // SAFETY: our own unreaped child.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
        for p in std::mem::take(&mut self.pids) {
            let _ = crate::harness::hygiene::wait_pid(p);
        }
    }
}

fn fail(detail: &str) -> LiveError {
    LiveError::Measurement { bench: NAME, detail: detail.to_string() }
}

/// One hackbench run (repetition `rep`); returns the timed ns.
fn one_run(ctx: &Ctx, cfg: &Cfg, rep: u64) -> Result<u64, LiveError> {
    let (ready_r, ready_w) = harness::pipe()?;
    let (wake_r, wake_w) = harness::pipe()?;
    let fds = cfg.fds as usize;
    let shared = Shared { ready_w: ready_w.as_raw_fd(), wake_r: wake_r.as_raw_fd(), datasize: cfg.datasize as usize };
    let mut w = Workers { pids: Vec::new(), threads: Vec::new() };
    // Thread mode: every descriptor stays open until all threads are joined;
    // process mode: the parent's copies of a group's fds close after its forks.
    let mut keep: Vec<OwnedFd> = Vec::new();
    for _ in 0..cfg.groups {
        let mut ins = Vec::with_capacity(fds);
        let mut outs = Vec::with_capacity(fds);
        for _ in 0..fds {
            let (r, wr) = if cfg.pipe { harness::pipe()? } else { harness::socketpair()? };
            // A receiver keeps only its own read end (hackbench closes the rest).
            let close: Vec<i32> =
                ins.iter().chain(&outs).map(|f: &OwnedFd| f.as_raw_fd()).chain([wr.as_raw_fd()]).collect();
            spawn_worker(
                cfg.thread,
                &mut w,
                shared,
                Role::Receiver { fd: r.as_raw_fd(), packets: cfg.fds * cfg.loops },
                &[],
                &close,
            )?;
            ins.push(r);
            outs.push(wr);
        }
        let out_fds: Vec<i32> = outs.iter().map(|f| f.as_raw_fd()).collect();
        // A sender keeps only the write ends.
        let in_fds: Vec<i32> = ins.iter().map(|f| f.as_raw_fd()).collect();
        for _ in 0..fds {
            spawn_worker(cfg.thread, &mut w, shared, Role::Sender { loops: cfg.loops }, &out_fds, &in_fds)?;
        }
        if cfg.thread {
            keep.extend(ins);
            keep.extend(outs);
        }
    }
    let total = (cfg.groups * cfg.fds * 2) as usize;
    let mut got = 0usize;
    let mut b = [0u8; 512];
    while got < total {
        // SAFETY: b is a writable buffer of at least the requested length.
        let n = unsafe { libc::read(ready_r.as_raw_fd(), b.as_mut_ptr().cast(), b.len().min(total - got)) };
        if n <= 0 {
            if n < 0 && crate::error::last_errno() == libc::EINTR {
                continue;
            }
            return Err(fail("a worker died before it was ready"));
        }
        got += n as usize;
    }
    ctx.rep_starts(rep);
    let t0 = now_ns();
    if !write_exact(wake_w.as_raw_fd(), b"W") {
        return Err(fail("could not release the workers"));
    }
    let mut bad = 0;
    for p in std::mem::take(&mut w.pids) {
        let st = crate::harness::hygiene::wait_pid(p)?;
        if !libc::WIFEXITED(st) || libc::WEXITSTATUS(st) != 0 {
            bad += 1;
        }
    }
    for t in std::mem::take(&mut w.threads) {
        if t.join().unwrap_or(1) != 0 {
            bad += 1;
        }
    }
    let t1 = now_ns();
    ctx.rep_ends(rep);
    drop(keep);
    if bad > 0 {
        return Err(fail(&format!("{bad} worker(s) failed (a socket or pipe broke)")));
    }
    Ok(t1 - t0)
}

fn spawn_worker(
    thread: bool,
    w: &mut Workers,
    s: Shared,
    role: Role,
    out_fds: &[i32],
    close: &[i32],
) -> Result<(), LiveError> {
    if thread {
        let outs = out_fds.to_vec();
        let h =
            std::thread::Builder::new().stack_size(256 * 1024).spawn(move || work(s, role, &outs)).map_err(|e| {
                LiveError::Os {
                    what: "creating a hackbench thread",
                    detail: e.to_string(),
                    hint: "lower groups= or check ulimit -u",
                }
            })?;
        w.threads.push(h);
        return Ok(());
    }
    // SAFETY: the runner is single-threaded, so the child may run ordinary
    // code (it allocates its message buffer); then it only does
    // read/write/poll on inherited descriptors and _exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(LiveError::last_os("fork", "too many processes? lower groups= or check ulimit -u"));
    }
    if pid == 0 {
        // SAFETY: prctl with constant arguments; _exit never returns.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
            for &fd in close {
                libc::close(fd);
            }
            libc::_exit(work(s, role, out_fds));
        }
    }
    w.pids.push(pid);
    Ok(())
}

/// The measurement inside a runner: args = [groups, fds, loops, datasize,
/// pipe(0/1), thread(0/1), repeat, warmup].
pub(crate) fn runner_body<S: AsRef<str>>(ctx: &Ctx, args: &[S], sink: &mut Sink) -> Result<(), LiveError> {
    let n = |i: usize| args.get(i).and_then(|s| s.as_ref().parse::<u64>().ok());
    let v: Vec<u64> = (0..8).filter_map(n).collect();
    if v.len() != 8 {
        return Err(fail("bad runner arguments"));
    }
    let cfg = Cfg { groups: v[0], fds: v[1], loops: v[2], datasize: v[3], pipe: v[4] == 1, thread: v[5] == 1 };
    let (repeat, warmup) = (v[6], v[7]);
    for rep in 0..warmup + repeat {
        ctx.check(now_ns())?;
        sink.discard = rep < warmup;
        let ns = one_run(ctx, &cfg, rep)?;
        if !sink.discard {
            sink.end_rep(ns)?;
        }
        ctx.set_done(rep + 1);
    }
    Ok(())
}
