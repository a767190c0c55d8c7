//! # Methodology
//!
//! **Goal.** E1's "Shell scripts (1 concurrent)" and "(8 concurrent)"
//! (BYTE/UnixBench shell1 and shell8): how many runs of a small shell script
//! the machine completes per minute while N copies run at once. One run
//! starts nine processes (sh, sort twice, od, grep, tee, wc twice, rm) joined
//! by pipes and small files, so the figure measures fork, exec, the dynamic
//! loader, pipes and page-cache file I/O as much as the scheduler; the
//! scheduler's part is where those short-lived processes run and who waits
//! (E1: ULE lost a third at 1 copy and nothing at 8).
//!
//! **The script.** schedlab writes [`SCRIPT`] and a generated input text
//! ([`input_text`]: 400 lines of pseudo-random words from a fixed seed,
//! ~17 KB, the same every run) into a private temp dir (mode 0700 under
//! `$TMPDIR` or /tmp, one subdirectory per copy), removed on every exit
//! path: the end, an error, the stop flag (Ctrl-C, `--timeout`). One run,
//! inside its copy's directory: sort the text into a file; `od` that file and
//! sort the dump numerically; `grep the | tee FILE | wc`; `wc` the three
//! files; `rm` them. It runs as `/bin/sh SCRIPT DIR` with stdin and stdout
//! on /dev/null, stderr on a pipe that schedlab reads, and an environment of
//! just PATH (schedlab's own) and `LC_ALL=C` (bytewise sort: a locale's
//! collation would tie the figure to the host's locale data). A run that
//! exits non-zero fails the case with the end of its stderr.
//!
//! **Concurrency.** The measuring thread carries the condition; the scripts
//! inherit policy, priority, nice and affinity from it (posix_spawn is a
//! clone of that thread), and their pipelines from them through fork. It
//! starts N runs, and whenever one ends it starts that copy's next run,
//! until the repetition's `duration` has passed; then it waits for the runs
//! still in flight (none is cut short). It waits with poll(2) on the copies'
//! stderr pipes (a pipe hangs up when the script and every process it
//! started have exited), so one thread serves every copy; a run that ends
//! while the thread starts another is noticed a few µs late. UnixBench
//! instead loops `multi.sh N`: N copies started together, the next batch
//! when all N have ended, counting batches, so its shell8 figure is about
//! this one's `scripts_per_min` / 8; here copies never wait for each other.
//! With `copies` a list (default `1,8`, E1's two rows), each count is a case.
//!
//! **Timed.** `CLOCK_MONOTONIC` before each run's spawn and after its reap:
//! `script_time` (spawn to reaped, as a shell loop sees it). A repetition's
//! wall time runs from its first spawn to its last reap, and
//! `scripts_per_min` = runs completed x 60 s / wall time: runs still in
//! flight at `duration` are waited for and counted, so no work is dropped.
//!
//! **Warm-up.** `warmup` repetitions are run and discarded; after them the
//! tools, the script and the input are in the page cache.
//!
//! **Children.** Spawned with posix_spawn (a vfork-like clone: schedlab's
//! memory map is not copied, as a small shell's fork would not copy much),
//! each run leading its own process group. On stop, time limit or error a
//! guard SIGKILLs every group (the script and its pipeline) and reaps the
//! scripts; the terminal's Ctrl-C reaches only schedlab, which then does
//! this. The runs have no PDEATHSIG (posix_spawn cannot set it, and a fork
//! would be timed): if schedlab is SIGKILLed, the runs in flight end on
//! their own within milliseconds, and the temp dir stays.
//!
//! **Metrics.** `scripts_per_min` (one value per repetition, headline,
//! higher is better) and `script_time` (ns, one histogram per repetition,
//! headline).
//!
//! **Known biases.** The figure belongs to the whole userland: /bin/sh (dash
//! starts several times faster than bash), coreutils, grep, the loader and
//! libc; compare runs made on the same image only. The temp dir's file
//! system matters (tmpfs or disk; the files are small and are removed before
//! writeback, so it is mostly page cache either way). `--mlock` covers
//! schedlab only (exec'd processes do not inherit it). Under an RT policy
//! every process of every copy runs at it; the measuring thread is one more
//! task of the same priority that needs a CPU to start the next run.
//! SCHED_DEADLINE tasks cannot fork, so that policy is refused.

use crate::error::LiveError;
use crate::harness::params::{ParamKind, ParamSpec, Params, TimeUnit};
use crate::harness::{self, condition, load, now_ns, Ctx};
use crate::{Benchmark, RunPlan};
use schedlab_core::{BenchResult, Direction, LatencyHistogram, Metric, SchedCondition, Unit};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};

pub struct Shell;

const NAME: &str = "shell";

/// Most copies accepted at all; task, memory and descriptor room refuse
/// fewer on a small machine.
const MAX_COPIES: u64 = 4_096;

const SPECS: &[ParamSpec] = &[
    ParamSpec {
        name: "copies",
        default: "1,8",
        quick_default: None,
        unit: "copies",
        help: "copies of the script running at once; a list gives one case each (E1: 1,8)",
        kind: ParamKind::CountList { min: 1, max: MAX_COPIES },
        diagnostic: false,
    },
    ParamSpec {
        name: "duration",
        default: "3000",
        quick_default: Some("300"),
        unit: "",
        help: "time each copy keeps starting runs, per repetition (runs in flight then finish)",
        kind: ParamKind::Duration { unit: TimeUnit::Ms, min: 10, max: 3_600_000 },
        diagnostic: false,
    },
];

/// The workload, run as `/bin/sh SCRIPT COPY_DIR`; the input is `../input`
/// from there. `set -e` makes any failing step fail the run.
pub const SCRIPT: &str = r#"# schedlab shell workload (after UnixBench's shell1/shell8): one run.
# $1: this copy's own directory; the input text is ../input from there.
set -e
cd "$1"
sort ../input >sorted
od sorted | sort -n -k 2 >dump
grep the sorted | tee matches | wc >counts
wc sorted dump matches >>counts
rm sorted dump matches counts
"#;

/// Tools the script runs, with the package that provides them.
const TOOLS: &[(&str, &str)] = &[
    ("sort", "coreutils"),
    ("od", "coreutils"),
    ("tee", "coreutils"),
    ("wc", "coreutils"),
    ("rm", "coreutils"),
    ("grep", "grep"),
];

const SHELL: &str = "/bin/sh";

/// Processes of one copy alive at once: sh and a three-stage pipeline.
const TASKS_PER_COPY: u64 = 4;

/// Memory of one copy, an upper estimate: four small processes (a few MiB
/// of private pages each) and its files in the temp dir.
const BYTES_PER_COPY: u64 = 8 << 20;

/// Descriptors schedlab holds besides one stderr pipe per copy.
const FD_HEADROOM: u64 = 64;

/// Words of the input text; "the" is frequent so `grep the` has work.
const WORDS: &[&str] = &[
    "the",
    "the",
    "the",
    "scheduler",
    "runs",
    "a",
    "task",
    "on",
    "each",
    "cpu",
    "when",
    "it",
    "wakes",
    "queue",
    "of",
    "ready",
    "threads",
    "waits",
    "for",
    "its",
    "turn",
    "and",
    "time",
    "slice",
    "ends",
    "then",
    "next",
    "one",
    "priority",
    "nice",
    "value",
    "load",
    "balance",
    "moves",
    "work",
    "between",
    "cores",
    "idle",
    "steal",
    "from",
    "busy",
    "pipe",
    "fork",
    "exec",
    "shell",
    "script",
    "sort",
    "count",
    "lines",
    "words",
    "bytes",
    "file",
    "cache",
];

/// The input text: 400 lines of 4 to 12 words drawn by a fixed-seed
/// xorshift, so every run and every host sorts the same bytes.
pub fn input_text() -> String {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut out = String::new();
    for _ in 0..400 {
        let n = 4 + next() % 9;
        let line: Vec<&str> = (0..n).map(|_| WORDS[(next() % WORDS.len() as u64) as usize]).collect();
        out.push_str(&line.join(" "));
        out.push('\n');
    }
    out
}

/// Write the script, the input and `copies` copy directories (`c0`, `c1`,
/// ...) into `dir`; returns the script's path. Used by the benchmark and by
/// `examples/shell_workload.rs`, which gives bench/shell-vs-sh.sh the same files.
pub fn write_workload(dir: &Path, copies: u64) -> std::io::Result<PathBuf> {
    let script = dir.join("script.sh");
    std::fs::write(&script, SCRIPT)?;
    std::fs::write(dir.join("input"), input_text())?;
    for i in 0..copies {
        std::fs::create_dir(dir.join(format!("c{i}")))?;
    }
    Ok(script)
}

/// The PATH the scripts get: schedlab's own, or a standard one when unset.
fn child_path() -> String {
    std::env::var("PATH").ok().filter(|p| !p.is_empty()).unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into())
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The first tool of [`TOOLS`] not found as an executable in `path`.
fn missing_tool(path: &str) -> Option<(&'static str, &'static str)> {
    TOOLS
        .iter()
        .copied()
        .find(|(tool, _)| !path.split(':').filter(|d| !d.is_empty()).any(|d| is_executable(&Path::new(d).join(tool))))
}

/// /bin/sh and every tool present, before anything runs.
fn check_tools(path: &str) -> Result<(), LiveError> {
    if !is_executable(Path::new(SHELL)) {
        return Err(LiveError::Os {
            what: "looking for /bin/sh",
            detail: "it does not exist or is not executable".into(),
            hint: "install a POSIX shell as /bin/sh (package dash or bash)",
        });
    }
    if let Some((tool, package)) = missing_tool(path) {
        return Err(LiveError::Os {
            what: "looking up the tools the shell script runs",
            detail: format!("`{tool}` is not an executable in PATH ({path})"),
            hint: if package == "grep" {
                "install package grep, or put grep in PATH"
            } else {
                "install package coreutils (sort, od, tee, wc, rm), or put them in PATH"
            },
        });
    }
    Ok(())
}

/// Room for `copies` concurrent copies: tasks, memory (with the
/// repetitions' histograms) and one descriptor each. `nofile`: the soft
/// RLIMIT_NOFILE.
fn check_room(copies: u64, room: (u64, String), nofile: u64) -> Result<(), LiveError> {
    let what = format!("shell copies={copies} (sh and a three-process pipeline each)");
    load::tasks_fit(what, copies * TASKS_PER_COPY, room, "lower copies=")?;
    if copies + FD_HEADROOM > nofile {
        return Err(LiveError::BadParam {
            bench: NAME,
            key: "copies".into(),
            value: copies.to_string(),
            expected: format!(
                "at most {} copies: schedlab holds a pipe per copy and RLIMIT_NOFILE (ulimit -n) is {nofile}; raise it or lower copies=",
                nofile.saturating_sub(FD_HEADROOM)
            ),
        });
    }
    Ok(())
}

fn nofile_limit() -> u64 {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: r is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 || r.rlim_cur == libc::RLIM_INFINITY {
        return u64::MAX;
    }
    r.rlim_cur
}

impl Benchmark for Shell {
    fn name(&self) -> &'static str {
        NAME
    }

    fn summary(&self) -> &'static str {
        "E1/UnixBench shell1, shell8: N copies of a sort/od/grep/tee/wc script; runs per minute and run time"
    }

    fn params(&self) -> &'static [ParamSpec] {
        SPECS
    }

    fn cases(&self, params: &Params, plan: &RunPlan) -> Result<Vec<Params>, LiveError> {
        let p = params.resolve(NAME, SPECS, plan.quick)?;
        plan.refuse_deadline(NAME)?;
        let usable = condition::preflight(&plan.condition)?;
        check_tools(&child_path())?;
        let mut cases = Vec::new();
        for copies in p.counts("copies")? {
            check_room(copies, load::task_room(), nofile_limit())?;
            load::check_memory(
                &format!("shell copies={copies}"),
                copies.saturating_mul(BYTES_PER_COPY).saturating_add(load::histograms_bytes(plan.repeat as u64 + 2)),
                "lower copies=",
            )?;
            // A copy is one chain of mostly-waiting processes: count it as one busy task.
            let busy = if plan.condition.policy.is_realtime() { copies } else { 0 };
            load::check(&plan.loads, busy, plan.force)?;
            load::check_starvation(&format!("shell copies={copies}"), busy, usable.len(), plan.force)?;
            let mut c = p.clone();
            c.set("copies", copies);
            cases.push(c);
        }
        Ok(cases)
    }

    fn estimate_s(&self, case: &Params, plan: &RunPlan) -> f64 {
        let ms = case.resolve(NAME, SPECS, plan.quick).and_then(|p| p.count("duration")).unwrap_or(3000);
        // Plus the runs in flight at each repetition's end and the setup.
        (plan.repeat + plan.warmup) as f64 * (ms as f64 / 1e3 + 0.03) + 0.05
    }

    fn run(&self, case: &Params, plan: &RunPlan, progress: &dyn Fn(f64)) -> Result<BenchResult, LiveError> {
        let started = harness::unix_ms();
        let mut cases = self.cases(case, plan)?;
        if cases.len() != 1 {
            return Err(LiveError::BadParam {
                bench: NAME,
                key: "copies".into(),
                value: case.get("copies").unwrap_or("").into(),
                expected: "a single copy count for a single case (cases() expands the list)".into(),
            });
        }
        let p = cases.remove(0);
        let copies = p.count("copies")? as usize;
        let duration_ms = p.count("duration")?;
        let est = self.estimate_s(&p, plan);
        let total = (plan.warmup + plan.repeat) as u64 * duration_ms;
        let (m, loads) = harness::drive(NAME, plan, est, total, progress, |ctx| {
            measure(ctx, plan, copies, duration_ms * 1_000_000)
        })?;
        let mut warnings = Vec::new();
        if plan.condition.mlock {
            warnings.push("mlock covers schedlab only: the scripts' processes are exec'd and not locked".into());
        }
        let applied = harness::merge_applied(&m.applied, plan.condition.mlock, &mut warnings);
        let mut rates = Vec::new();
        let mut hists = Vec::new();
        for rep in m.reps {
            if rep.scripts == 0 || rep.wall_ns == 0 {
                return Err(LiveError::Measurement {
                    bench: NAME,
                    detail: "a repetition completed no script run".into(),
                });
            }
            rates.push(rep.scripts as f64 * 60e9 / rep.wall_ns as f64);
            hists.push(rep.times);
        }
        let mut r = harness::result(NAME, &p, SPECS, plan, applied, started, &loads);
        r.metrics = vec![
            Metric::samples("scripts_per_min", Unit::PerMinute, Direction::HigherIsBetter, rates).headline(),
            Metric::histogram_per_repetition("script_time", Direction::LowerIsBetter, hists).headline(),
        ];
        r.metrics.extend(loads.metrics);
        r.warnings.extend(warnings);
        Ok(r)
    }
}

/// A private directory, removed with everything in it on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn create() -> Result<TempDir, LiveError> {
        use std::os::unix::fs::DirBuilderExt;
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let path = std::env::temp_dir().join(format!("schedlab-{}-shell-{n}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&path).map_err(|e| LiveError::Os {
            what: "creating the shell benchmark's temp dir",
            detail: format!("{}: {e}", path.display()),
            hint: "check that $TMPDIR (or /tmp) exists and is writable",
        })?;
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One measured repetition.
struct Rep {
    scripts: u64,
    wall_ns: u64,
    times: LatencyHistogram,
}

struct Measured {
    reps: Vec<Rep>,
    /// The measuring thread's condition, then a script's as the kernel has it.
    applied: Vec<SchedCondition>,
}

fn measure(ctx: &Ctx, plan: &RunPlan, copies: usize, duration_ns: u64) -> Result<Measured, LiveError> {
    condition::apply(0, ctx.cond, None)?;
    let mut applied = vec![condition::read_back(0)?];
    let tid = condition::gettid();
    ctx.watch(tid);
    let r = repetitions(ctx, plan, copies, duration_ns, &mut applied);
    ctx.unwatch(tid);
    let _ = condition::demote(0);
    Ok(Measured { reps: r?, applied })
}

fn repetitions(
    ctx: &Ctx,
    plan: &RunPlan,
    copies: usize,
    duration_ns: u64,
    applied: &mut Vec<SchedCondition>,
) -> Result<Vec<Rep>, LiveError> {
    // Dropped last: every script is killed and reaped before the files go.
    let dir = TempDir::create()?;
    let script = write_workload(&dir.0, copies as u64).map_err(|e| LiveError::Os {
        what: "writing the shell script and its input",
        detail: format!("{}: {e}", dir.0.display()),
        hint: "check free space and permissions in $TMPDIR (or /tmp)",
    })?;
    let path = child_path();
    let mut cmds: Vec<Command> = (0..copies)
        .map(|i| {
            let mut c = Command::new(SHELL);
            c.arg(&script)
                .arg(dir.0.join(format!("c{i}")))
                .env_clear()
                .env("PATH", &path)
                .env("LC_ALL", "C")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .process_group(0);
            c
        })
        .collect();
    let duration_ms = duration_ns / 1_000_000;
    let mut reps = Vec::with_capacity(plan.repeat as usize);
    for rep in 0..(plan.warmup + plan.repeat) as u64 {
        let mut times = LatencyHistogram::new();
        ctx.rep_starts(rep);
        let first = applied.len() < 2;
        let (scripts, wall_ns, child) =
            one_repetition(ctx, &mut cmds, duration_ns, &mut times, rep * duration_ms, first)?;
        ctx.rep_ends(rep);
        applied.extend(child);
        if rep >= plan.warmup as u64 {
            reps.push(Rep { scripts, wall_ns, times });
        }
    }
    drop(dir);
    Ok(reps)
}

/// A script run in flight.
struct Running {
    child: Child,
    stderr: ChildStderr,
    t0: u64,
}

/// The copies' runs in flight. Drop SIGKILLs each run's process group (the
/// script and its pipeline) and reaps the script.
struct Copies {
    slots: Vec<Option<Running>>,
    /// The end of the last run's stderr (for the error of a failed run).
    tail: Vec<u8>,
}

const TAIL_BYTES: usize = 2048;

impl Copies {
    fn start(&mut self, i: usize, cmd: &mut Command) -> Result<(), LiveError> {
        let t0 = now_ns();
        let mut child = cmd.spawn().map_err(|e| LiveError::Os {
            what: "starting /bin/sh for the shell benchmark",
            detail: e.to_string(),
            hint: "too many processes or open files? lower copies= or check ulimit -u and ulimit -n",
        })?;
        let stderr = child.stderr.take().expect("stderr is piped");
        self.slots[i] = Some(Running { child, stderr, t0 });
        Ok(())
    }

    /// Read what copy `i`'s stderr holds; true once it hung up (every
    /// process of the run has exited).
    fn drain(&mut self, i: usize, hangup: bool) -> bool {
        let Some(r) = self.slots[i].as_mut() else { return false };
        let mut buf = [0u8; 1024];
        loop {
            match r.stderr.read(&mut buf) {
                Ok(0) => return true,
                Ok(n) => {
                    self.tail.extend_from_slice(&buf[..n]);
                    if self.tail.len() > TAIL_BYTES {
                        self.tail.drain(..self.tail.len() - TAIL_BYTES);
                    }
                    // Without a hang-up another read could block.
                    if !hangup {
                        return false;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                // Nothing more can come from a broken pipe.
                Err(_) => return true,
            }
        }
    }

    /// Reap copy `i`'s finished run: its start time and exit status.
    fn reap(&mut self, i: usize) -> Result<(u64, std::process::ExitStatus), LiveError> {
        let mut r = self.slots[i].take().expect("a run in flight");
        let status = r.child.wait().map_err(|e| LiveError::Os {
            what: "waiting for a shell script",
            detail: e.to_string(),
            hint: "the child was reaped elsewhere (SIGCHLD set to SIG_IGN?)",
        })?;
        Ok((r.t0, status))
    }

    fn any(&self) -> bool {
        self.slots.iter().any(Option::is_some)
    }
}

impl Drop for Copies {
    fn drop(&mut self) {
        for mut r in self.slots.iter_mut().filter_map(Option::take) {
            // SAFETY: killpg on the group the unreaped script leads (its pid
            // cannot be reused before the reap below).
            unsafe { libc::killpg(r.child.id() as i32, libc::SIGKILL) };
            let _ = r.child.wait();
        }
    }
}

/// One line of a run's stderr tail for an error message.
fn tail_text(tail: &[u8]) -> String {
    let text = String::from_utf8_lossy(tail);
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let joined = lines[lines.len().saturating_sub(4)..].join(" | ");
    if joined.is_empty() {
        "(no stderr output)".into()
    } else {
        let start = joined.char_indices().rev().nth(299).map_or(0, |(i, _)| i);
        joined[start..].to_string()
    }
}

/// One repetition: N copies start runs until `duration_ns` has passed, then
/// the runs in flight finish. Returns the runs completed, the wall time
/// (first spawn to last reap) and, when `read_child`, the first script's
/// condition as the kernel has it.
fn one_repetition(
    ctx: &Ctx,
    cmds: &mut [Command],
    duration_ns: u64,
    times: &mut LatencyHistogram,
    done_base: u64,
    read_child: bool,
) -> Result<(u64, u64, Option<SchedCondition>), LiveError> {
    let n = cmds.len();
    let mut copies = Copies { slots: (0..n).map(|_| None).collect(), tail: Vec::new() };
    let start = now_ns();
    let end = start + duration_ns;
    for (i, cmd) in cmds.iter_mut().enumerate() {
        copies.start(i, cmd)?;
    }
    // Read while the script cannot have been reaped yet, so its pid is still its own.
    let child = if read_child {
        copies.slots[0].as_ref().and_then(|r| condition::read_back(r.child.id() as i32).ok())
    } else {
        None
    };
    let (mut scripts, mut last) = (0u64, start);
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(n);
    let mut which: Vec<usize> = Vec::with_capacity(n);
    while copies.any() {
        fds.clear();
        which.clear();
        for (i, r) in copies.slots.iter().enumerate() {
            if let Some(r) = r {
                fds.push(libc::pollfd { fd: r.stderr.as_raw_fd(), events: libc::POLLIN, revents: 0 });
                which.push(i);
            }
        }
        // Wake at least every 50 ms for the stop flag and the time limit.
        // SAFETY: fds is a valid array of fds.len() pollfd structs.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 50) };
        if rc < 0 && crate::error::last_errno() != libc::EINTR {
            return Err(LiveError::last_os("poll on the scripts' stderr pipes", "check ulimit -n"));
        }
        for k in 0..fds.len() {
            let ev = fds[k].revents;
            if ev == 0 {
                continue;
            }
            let i = which[k];
            if !copies.drain(i, ev & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0) {
                continue;
            }
            let (t0, status) = copies.reap(i)?;
            let t1 = now_ns();
            if !status.success() {
                return Err(LiveError::Measurement {
                    bench: NAME,
                    detail: format!("a run of the script {status}; its stderr ends: {}", tail_text(&copies.tail)),
                });
            }
            times.record(t1 - t0);
            scripts += 1;
            last = t1;
            if t1 < end {
                copies.start(i, &mut cmds[i])?;
            }
        }
        let now = now_ns();
        ctx.check(now)?;
        ctx.set_done(done_base + (now - start).min(duration_ns) / 1_000_000);
    }
    Ok((scripts, last - start, child))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_text_is_fixed_and_gives_grep_work() {
        let t = input_text();
        assert_eq!(t, input_text(), "the same bytes every time");
        assert_eq!(t.lines().count(), 400);
        assert!((10_000..40_000).contains(&t.len()), "{} bytes", t.len());
        let with_the = t.lines().filter(|l| l.split(' ').any(|w| w == "the")).count();
        assert!(with_the > 100, "{with_the} lines match grep the");
    }

    #[test]
    fn missing_tools_are_named_with_their_package() {
        let empty = std::env::temp_dir().join(format!("schedlab-{}-shell-notools", std::process::id()));
        std::fs::create_dir_all(&empty).unwrap();
        let path = empty.to_string_lossy().into_owned();
        assert_eq!(missing_tool(&path), Some(("sort", "coreutils")));
        let e = check_tools(&path).unwrap_err().to_string();
        assert!(e.contains("`sort` is not an executable in PATH") && e.contains("coreutils"), "{e}");
        // Only grep is missing: a directory with the coreutils ones.
        for (tool, _) in TOOLS.iter().filter(|(_, p)| *p == "coreutils") {
            let real = missing_tool_path(tool);
            std::os::unix::fs::symlink(real, empty.join(tool)).unwrap();
        }
        let e = check_tools(&path).unwrap_err().to_string();
        assert!(e.contains("`grep`") && e.contains("package grep"), "{e}");
        std::fs::remove_dir_all(&empty).unwrap();
        assert_eq!(missing_tool(""), Some(("sort", "coreutils")));
    }

    /// Where `tool` lives in this host's PATH (the test needs coreutils).
    fn missing_tool_path(tool: &str) -> PathBuf {
        child_path()
            .split(':')
            .map(|d| Path::new(d).join(tool))
            .find(|p| is_executable(p))
            .unwrap_or_else(|| panic!("{tool} not in PATH"))
    }

    #[test]
    fn copies_beyond_the_machine_are_refused() {
        let e = check_room(100, (300, "kernel.pid_max".into()), 1 << 20).unwrap_err().to_string();
        assert!(e.contains("400 tasks") && e.contains("kernel.pid_max") && e.contains("lower copies="), "{e}");
        let e = check_room(1000, (1 << 20, "x".into()), 1024).unwrap_err().to_string();
        assert!(e.contains("at most 960 copies") && e.contains("ulimit -n"), "{e}");
        check_room(8, (1 << 20, "x".into()), 1024).unwrap();
    }

    /// Pids in process group `pgid` (scans /proc).
    fn group_members(pgid: i32) -> Vec<i32> {
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
            // "pid (comm) state ppid pgrp ...": split after the last ')'.
            let fields: Vec<&str> = stat.rsplit_once(')').map_or(vec![], |(_, r)| r.split_whitespace().collect());
            if fields.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid) && fields.first() != Some(&"Z") {
                out.push(pid);
            }
        }
        out
    }

    fn sh(cmd: &str) -> Command {
        let mut c = Command::new(SHELL);
        c.args(["-c", cmd]).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).process_group(0);
        c
    }

    #[test]
    fn dropping_the_copies_kills_each_script_with_its_pipeline() {
        let mut cmd = sh("sleep 30 | sleep 30");
        let mut copies = Copies { slots: vec![None], tail: Vec::new() };
        copies.start(0, &mut cmd).unwrap();
        let pgid = copies.slots[0].as_ref().unwrap().child.id() as i32;
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while group_members(pgid).len() < 3 && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(group_members(pgid).len(), 3, "sh and both sleeps share the run's group");
        let t = std::time::Instant::now();
        drop(copies);
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "the drop waited for the script");
        while !group_members(pgid).is_empty() && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(group_members(pgid), Vec::<i32>::new(), "the pipeline survived");
    }

    #[test]
    fn a_failing_run_fails_the_case_with_its_stderr() {
        let plan = RunPlan { repeat: 1, warmup: 0, ..Default::default() };
        let e = harness::drive(NAME, &plan, 1.0, 1, &|_| {}, |ctx| {
            let mut cmds = [sh("echo first line >&2; echo 'od: sorted: No such file' >&2; exit 3")];
            one_repetition(ctx, &mut cmds, 50_000_000, &mut LatencyHistogram::new(), 0, false)
        })
        .map(|_| ())
        .unwrap_err()
        .to_string();
        assert!(e.contains("exit status: 3") && e.contains("first line | od: sorted: No such file"), "{e}");
        // A run killed by a signal fails it too.
        let e = harness::drive(NAME, &plan, 1.0, 1, &|_| {}, |ctx| {
            one_repetition(ctx, &mut [sh("kill -9 $$")], 50_000_000, &mut LatencyHistogram::new(), 0, false)
        })
        .map(|_| ())
        .unwrap_err()
        .to_string();
        assert!(e.contains("signal: 9") && e.contains("(no stderr output)"), "{e}");
    }

    #[test]
    fn a_repetition_counts_every_run_and_waits_for_those_in_flight() {
        let plan = RunPlan { repeat: 1, warmup: 0, ..Default::default() };
        let (out, _) = harness::drive(NAME, &plan, 1.0, 1, &|_| {}, |ctx| {
            let mut cmds = [sh("sleep 0.03"), sh("sleep 0.03")];
            let mut h = LatencyHistogram::new();
            let (n, wall, child) = one_repetition(ctx, &mut cmds, 100_000_000, &mut h, 0, true)?;
            Ok((n, wall, child, h))
        })
        .unwrap();
        let (n, wall, child, h) = out;
        assert_eq!(h.count(), n);
        // Two copies of runs of at least 30 ms for 100 ms: each copy starts
        // one at once and at most 4 before 100 ms (no timing assumed beyond that).
        assert!((2..=8).contains(&n), "{n} runs");
        assert!(wall >= 100_000_000 && wall >= h.max().unwrap(), "wall {wall} ns");
        assert!(h.min().unwrap() >= 30_000_000, "a run took {} ns", h.min().unwrap());
        assert_eq!(child.expect("the first script's condition was read").policy, schedlab_core::SchedPolicy::Other);
    }

    #[test]
    fn stderr_tail_is_one_short_line() {
        assert_eq!(tail_text(b""), "(no stderr output)");
        assert_eq!(tail_text(b"a\n\nb\nsort: bad\n"), "a | b | sort: bad");
        let long = "x".repeat(5000);
        assert_eq!(tail_text(long.as_bytes()).len(), 300);
        assert_eq!(tail_text("é".repeat(400).as_bytes()).chars().count(), 300, "cut on a char boundary");
    }
}
