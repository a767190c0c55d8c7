//! # Methodology
//!
//! **Goal.** E4's kernel compile against parallelism: `time make -j N` for
//! several N, with wall, user and system time and CPU utilisation, to find
//! where more jobs stop helping (E4: -j3 was best on 2 cores) and how a
//! scheduling condition changes that. mmtests' kernbench and hyperfine's
//! `--parameter-scan` time the same kind of sweep.
//!
//! **What is built.** By default a C project that schedlab writes into a
//! fresh temp directory for the case (`units` translation units of `funcs`
//! functions each, plus a `main.c` that links them) and builds with the
//! system's `make` and a C compiler at `-O2`. The Makefile names the compiler
//! by its absolute path, found in PATH but skipping ccache wrappers, and sets
//! `CCACHE_DISABLE=1`, so every build compiles. The directory is removed
//! when the case ends, on every path (error, stop, panic). Or any command:
//! `cmd=` is run by `/bin/sh -c` with `{j}` replaced by the job count, in
//! the current directory, with `clean=` run before every build.
//!
//! **Sweep.** `jobs` is a list; each value is its own case (like exectime's
//! thread counts), so the report's sweep table gives the speed-up against
//! the first value and names the best; a case stores no cross-case figure.
//!
//! **Timed.** Each repetition: the clean step (untimed: the generated
//! project's objects are deleted; a `clean=` command runs to completion),
//! then the build. The measuring thread forks a child in a process group
//! of its own, in schedlab's session (a new session would also be a new
//! autogroup, weighted apart from everything else), that gets the condition
//! by pid (policy, priority, nice, affinity: everything it starts inherits
//! them) and waits on a pipe; the clock (`CLOCK_MONOTONIC`) starts when the child is
//! released to exec `/bin/sh -c CMD` and stops when the child's exit is seen
//! (a pidfd becomes readable; without pidfd, `waitid(WNOWAIT)` every 1 ms).
//! `wait4` then reaps it and gives its rusage, which covers the shell and
//! every descendant that was waited for (make waits for all its jobs): that
//! is `user_time` and `sys_time`, and only this build's, whatever else the
//! process runs. Processes the build left behind are killed with the group.
//!
//! **Stop.** The measuring thread polls the stop flag and the case's
//! deadline every 50 ms while a build runs; on either it SIGKILLs the whole
//! process group, reaps the shell and waits (up to 2 s) for the group to be
//! gone. A build that escapes the group (setsid) escapes this too. The
//! group is a background one on the terminal: Ctrl-C goes to schedlab only,
//! and a build that reads the terminal is stopped until the time limit
//! (stdin is /dev/null, so only one that opens /dev/tty).
//!
//! **Logs.** Each repetition's output (clean step and build, stdout and
//! stderr) goes to `$TMPDIR/schedlab-build-logs/<UTC time>-j<j>-<warmupN|repN>.log`;
//! a note names the directory. The generated project's logs are deleted once
//! its build succeeds; a custom command's are kept. A build that exits non-zero or is killed fails
//! the benchmark, quoting the log's last lines; it never gives a time.
//!
//! **Warm-up.** `warmup` builds are run and discarded: the first build loads
//! the compiler, make and the sources into the page cache.
//!
//! **Metrics.** Per repetition: `wall_time` (s, headline, lower is better),
//! `user_time` and `sys_time` (s of CPU of the build's processes), and
//! `cpu_percent` = (user + sys) / wall x 100, as E4 printed it (200 % = two
//! CPUs busy throughout).
//!
//! **Known biases.** The page cache: after the warm-up, sources, headers and
//! the compiler are cached, so this measures compiling, not the disk (E4's
//! kernel builds read from disk more). make's own scheduling: jobs start in
//! Makefile order and the link waits for the slowest object, so a small
//! project's -j curve has a tail. The environment is the caller's minus
//! `MAKEFLAGS`, `MFLAGS`, `MAKELEVEL` and `GNUMAKEFLAGS` (a parent make's
//! jobserver would cap -j). A `cmd=` that uses ccache or a remote cache
//! measures the cache. `--mlock` locks schedlab only: a child does not
//! inherit memory locks. SCHED_DEADLINE tasks cannot fork, so it is refused.

use crate::error::{last_errno, LiveError};
use crate::harness::params::{ParamKind, ParamSpec, Params};
use crate::harness::{self, condition, load, now_ns, Ctx};
use crate::{Benchmark, RunPlan};
use schedlab_core::{BenchResult, Direction, Metric, SchedCondition, Unit};
use std::ffi::CString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub struct Build;

const NAME: &str = "build";
const GENERATED: &str = "generated";
const AUTO: &str = "auto";
const NONE: &str = "none";
/// Nominal duration of one build of a command schedlab knows nothing about
/// (for the progress bar and the case's time limit, 60 s + 20 x the estimate).
const CUSTOM_BUILD_S: f64 = 120.0;
/// How often the measuring thread looks at the stop flag during a build.
const POLL_MS: i32 = 50;
/// Log lines quoted in the error of a failed build.
const TAIL_LINES: usize = 5;
/// Variables a parent make passes down; its jobserver would cap -j.
const MAKE_VARS: &[&str] = &["MAKEFLAGS", "MFLAGS", "MAKELEVEL", "GNUMAKEFLAGS"];

const SPECS: &[ParamSpec] = &[
    ParamSpec {
        name: "jobs",
        default: "1,2,3,4,8",
        quick_default: Some("1,2,4"),
        unit: "jobs",
        help: "make -j values, one case each, in this order (E4: 1,2,3,4,8); the report's speed-up is against the first",
        kind: ParamKind::CountList { min: 1, max: 1024 },
        diagnostic: false,
    },
    ParamSpec {
        name: "cmd",
        default: GENERATED,
        quick_default: None,
        unit: "",
        help: "build command for /bin/sh -c, {j} replaced by the job count; quote it: cmd='make -C ~/src/linux -j{j}'; generated: schedlab's own C project, make -j{j}",
        kind: ParamKind::Text,
        diagnostic: false,
    },
    ParamSpec {
        name: "clean",
        default: AUTO,
        quick_default: None,
        unit: "",
        help: "command run before every build, untimed, so each build compiles everything (needed with cmd=; none: cmd= rebuilds all itself); auto: delete the generated project's objects",
        kind: ParamKind::Text,
        diagnostic: false,
    },
    ParamSpec {
        name: "units",
        default: "16",
        quick_default: Some("4"),
        unit: "files",
        help: "translation units of the generated project",
        kind: ParamKind::Count { min: 1, max: 4096 },
        diagnostic: false,
    },
    ParamSpec {
        name: "funcs",
        default: "30",
        quick_default: Some("4"),
        unit: "functions",
        help: "functions per unit of the generated project (each ~6 ms of cc -O2 on a 2020s CPU)",
        kind: ParamKind::Count { min: 1, max: 10_000 },
        diagnostic: false,
    },
];

/// What a case builds, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    Generated { units: u64, funcs: u64, cc: PathBuf, make: PathBuf },
    Custom { cmd: String, clean: Option<String> },
}

impl Benchmark for Build {
    fn name(&self) -> &'static str {
        NAME
    }

    fn summary(&self) -> &'static str {
        "E4: a build timed across a -j sweep: wall, user and system time and CPU % per job count"
    }

    fn params(&self) -> &'static [ParamSpec] {
        SPECS
    }

    fn cases(&self, params: &Params, plan: &RunPlan) -> Result<Vec<Params>, LiveError> {
        let p = params.resolve(NAME, SPECS, plan.quick)?;
        plan.refuse_deadline(NAME)?;
        let usable = condition::preflight(&plan.condition)?;
        let jobs = p.counts("jobs")?;
        let src = source(&p, plan.quick)?;
        let custom = matches!(src, Source::Custom { .. });
        if let Source::Custom { cmd, .. } = src {
            if jobs.len() > 1 && !cmd.contains("{j}") {
                return Err(LiveError::BadParam {
                    bench: NAME,
                    key: "cmd".into(),
                    value: cmd,
                    expected: "a command with {j} where the job count goes (e.g. make -j{j}): without it every jobs= case runs the same command".into(),
                });
            }
        }
        let rt = plan.condition.policy.is_realtime();
        let mut cases = Vec::new();
        for j in jobs {
            // Each make job is a busy compiler process under the condition.
            let busy = if rt { j } else { 0 };
            load::check(&plan.loads, busy, plan.force)?;
            load::check_starvation(&format!("build jobs={j}"), busy, usable.len(), plan.force)?;
            let mut c = p.clone();
            c.set("jobs", j);
            if custom {
                // The generated project's shape means nothing here: not stored, not in the case's identity.
                c.remove("units");
                c.remove("funcs");
            }
            cases.push(c);
        }
        Ok(cases)
    }

    fn estimate_s(&self, case: &Params, plan: &RunPlan) -> f64 {
        let Ok(p) = case.resolve(NAME, SPECS, plan.quick) else { return 1.0 };
        let builds = (plan.repeat + plan.warmup) as f64;
        if p.word("cmd").map_or(true, |c| c != GENERATED) {
            return CUSTOM_BUILD_S * builds;
        }
        let j = p.counts("jobs").ok().and_then(|v| v.first().copied()).unwrap_or(1) as f64;
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let (units, funcs) = (p.count("units").unwrap_or(1) as f64, p.count("funcs").unwrap_or(1) as f64);
        // Measured with gcc 12 -O2: ~25 ms per compiler run plus ~6.5 ms per function.
        let cpu_s = (units + 1.0) * 0.025 + units * funcs * 0.0065;
        builds * (cpu_s / j.min(cpus) + 0.05)
    }

    fn run(&self, case: &Params, plan: &RunPlan, progress: &dyn Fn(f64)) -> Result<BenchResult, LiveError> {
        let started = harness::unix_ms();
        let p = case.resolve(NAME, SPECS, plan.quick)?;
        let jobs = p.counts("jobs")?;
        let [j] = jobs[..] else {
            return Err(LiveError::BadParam {
                bench: NAME,
                key: "jobs".into(),
                value: p.word("jobs")?.to_string(),
                expected: "one job count for a single case (cases() expands the list)".into(),
            });
        };
        let src = source(&p, plan.quick)?;
        let p = self.cases(&p, plan)?.remove(0);
        let logs = Logs::open()?;
        let env = child_env();
        let mut warnings = Vec::new();
        // Generated here so that it is removed when run() returns, whatever happens.
        let (project, build, clean) = match &src {
            Source::Generated { units, funcs, cc, make } => {
                let project = Project::generate(*units, *funcs, cc)?;
                let build =
                    Shell::new(&format!("{} -j{j}", shell_quote(&make.to_string_lossy())), Some(&project.dir), &env)?;
                let clean = Clean::Outputs(project.dir.clone());
                warnings.push(format!(
                    "generated project: {units} units x {funcs} functions, {} -O2 ({}), {}; a failing build's log is kept in {}/",
                    cc.display(),
                    first_line(cc, "--version"),
                    first_line(make, "--version"),
                    logs.dir.display(),
                ));
                (Some(project), build, clean)
            }
            Source::Custom { cmd, clean } => {
                let build = Shell::new(&cmd.replace("{j}", &j.to_string()), None, &env)?;
                let clean = match clean {
                    Some(c) => Clean::Command(Shell::new(&c.replace("{j}", &j.to_string()), None, &env)?),
                    None => Clean::Nothing,
                };
                warnings.push(format!("build output is logged in {}/ (<time>-j{j}-<rep>.log)", logs.dir.display()));
                (None, build, clean)
            }
        };
        if plan.condition.mlock {
            warnings.push(
                "--mlock locks schedlab's own memory only: the build's processes do not inherit memory locks".into(),
            );
        }
        let est = self.estimate_s(&p, plan);
        let total = (plan.warmup + plan.repeat) as u64;
        let job = Job { j, build, clean, logs: &logs };
        let (m, loads) = harness::drive(NAME, plan, est, total, progress, |ctx| measure(ctx, plan, &job))?;
        drop(project);
        let applied = harness::merge_applied(&m.applied, plan.condition.mlock, &mut warnings);
        let cpu: Vec<f64> = (0..m.wall.len())
            .map(|i| if m.wall[i] > 0.0 { (m.user[i] + m.sys[i]) / m.wall[i] * 100.0 } else { f64::NAN })
            .collect();
        let mut r = harness::result(NAME, &p, SPECS, plan, applied, started, &loads);
        r.metrics = vec![
            Metric::samples("wall_time", Unit::Seconds, Direction::LowerIsBetter, m.wall).headline(),
            Metric::samples("user_time", Unit::Seconds, Direction::LowerIsBetter, m.user),
            Metric::samples("sys_time", Unit::Seconds, Direction::LowerIsBetter, m.sys),
            Metric::samples("cpu_percent", Unit::Percent, Direction::Neutral, cpu),
        ];
        r.metrics.extend(loads.metrics);
        r.warnings.extend(warnings);
        Ok(r)
    }
}

/// The checked build of a resolved case: the generated project with its
/// tools found, or the user's command with its clean step.
fn source(p: &Params, quick: bool) -> Result<Source, LiveError> {
    let cmd = p.word("cmd")?;
    let clean = p.word("clean")?;
    let bad = |key: &str, value: &str, expected: &str| LiveError::BadParam {
        bench: NAME,
        key: key.into(),
        value: value.into(),
        expected: expected.into(),
    };
    if cmd == GENERATED {
        if clean != AUTO {
            return Err(bad(
                "clean",
                clean,
                "auto with the generated project (schedlab deletes its objects); clean= goes with cmd=",
            ));
        }
        let cc = find_cc().ok_or(LiveError::MissingTool {
            bench: NAME,
            tool: "a C compiler (cc) for its generated project".into(),
            fix:
                "install one (Debian/Ubuntu: apt install build-essential), or time your own build with cmd= and clean=",
        })?;
        let make = which("make").ok_or(LiveError::MissingTool {
            bench: NAME,
            tool: "make for its generated project".into(),
            fix: "install it (Debian/Ubuntu: apt install make), or time your own build with cmd= and clean=",
        })?;
        return Ok(Source::Generated { units: p.count("units")?, funcs: p.count("funcs")?, cc, make });
    }
    // units= and funcs= would be stored with the result but change nothing.
    for key in ["units", "funcs"] {
        let spec = SPECS.iter().find(|s| s.name == key).expect("spec exists");
        if p.word(key)? != spec.default_for(quick) {
            return Err(bad(key, p.word(key)?, "no value with cmd=: it shapes the generated project only"));
        }
    }
    if clean == AUTO {
        return Err(bad(
            "clean",
            clean,
            "with cmd=, the command that deletes the build's outputs so that each build compiles everything (e.g. clean='make -C ~/src/linux clean'), or clean=none when cmd= rebuilds everything itself",
        ));
    }
    check_command("cmd", cmd)?;
    let clean = (clean != NONE).then(|| clean.to_string());
    if let Some(c) = &clean {
        check_command("clean", c)?;
    }
    Ok(Source::Custom { cmd: cmd.to_string(), clean })
}

/// Words the shell runs itself (no PATH look-up needed).
const SHELL_WORDS: &[&str] = &[
    ".", ":", "[", "!", "{", "(", "alias", "break", "case", "cd", "command", "continue", "echo", "eval", "exec",
    "exit", "export", "false", "for", "if", "kill", "printf", "pwd", "read", "return", "set", "shift", "test", "time",
    "times", "trap", "true", "type", "ulimit", "umask", "unset", "until", "wait", "while",
];

/// The program a shell command line starts with, when that is plain enough
/// to look up: leading `NAME=value` words skipped; None for builtins and
/// anything with quotes, expansions or redirections (the shell decides).
fn first_program(cmd: &str) -> Option<&str> {
    let word = cmd.split_whitespace().find(|w| {
        let assignment = w.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty()
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && !name.as_bytes()[0].is_ascii_digit()
        });
        !assignment
    })?;
    let plain = word.bytes().all(|b| b.is_ascii_alphanumeric() || b"._+-/".contains(&b));
    (plain && !SHELL_WORDS.contains(&word)).then_some(word)
}

fn check_command(key: &'static str, cmd: &str) -> Result<(), LiveError> {
    let Some(prog) = first_program(cmd) else { return Ok(()) };
    let found = if prog.contains('/') { is_executable(Path::new(prog)) } else { which(prog).is_some() };
    if found {
        return Ok(());
    }
    Err(LiveError::MissingTool {
        bench: NAME,
        tool: format!("'{prog}' (the program {key}= starts)"),
        fix: "check the spelling, install it, or give its full path",
    })
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn path_dirs() -> Vec<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path).filter(|d| !d.as_os_str().is_empty()).collect()
}

/// `name` in PATH, as the shell would find it.
fn which(name: &str) -> Option<PathBuf> {
    path_dirs().into_iter().map(|d| d.join(name)).find(|p| is_executable(p))
}

/// A C compiler in PATH that is not a ccache wrapper (Debian's
/// /usr/lib/ccache/cc links to ccache; so does a `cc` set up by hand).
fn find_cc() -> Option<PathBuf> {
    let ccache = |p: &Path| p.to_string_lossy().contains("ccache");
    ["cc", "gcc", "clang"].iter().find_map(|name| {
        path_dirs()
            .into_iter()
            .map(|d| d.join(name))
            .find(|p| is_executable(p) && !ccache(p) && !std::fs::canonicalize(p).is_ok_and(|real| ccache(&real)))
    })
}

/// The first line `prog arg` prints (tool versions for the result's note).
fn first_line(prog: &Path, arg: &str) -> String {
    let out = std::process::Command::new(prog).arg(arg).stdin(std::process::Stdio::null()).output();
    out.ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).lines().next().map(|l| l.trim().to_string()))
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| format!("{} (version unknown)", prog.display()))
}

/// `s` in single quotes for /bin/sh.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The caller's environment minus a parent make's variables.
fn child_env() -> Vec<CString> {
    std::env::vars_os()
        .filter(|(k, _)| !MAKE_VARS.iter().any(|m| k == m))
        .filter_map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).ok()
        })
        .collect()
}

/// The generated C project in its temp directory, removed on drop.
struct Project {
    dir: PathBuf,
}

impl Project {
    fn generate(units: u64, funcs: u64, cc: &Path) -> Result<Project, LiveError> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("schedlab-{}-{n}-build", std::process::id()));
        let io = |e: std::io::Error| LiveError::Os {
            what: "writing the generated build project",
            detail: e.to_string(),
            hint: "check that the temp directory (TMPDIR) is writable and has space",
        };
        std::fs::DirBuilder::new().mode(0o700).create(&dir).map_err(io)?;
        // From here on the directory goes away with `project`.
        let project = Project { dir };
        for u in 0..units {
            std::fs::write(project.dir.join(format!("u{u}.c")), unit_source(u, funcs)).map_err(io)?;
        }
        std::fs::write(project.dir.join("main.c"), main_source(units)).map_err(io)?;
        std::fs::write(project.dir.join("Makefile"), makefile(units, cc)).map_err(io)?;
        Ok(project)
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One translation unit: `funcs` static functions (a xorshift loop with a
/// switch, which -O2 unrolls and schedules: ~6 ms of gcc each) and an
/// exported `uN` that chains them, so none is dead code.
fn unit_source(u: u64, funcs: u64) -> String {
    use std::fmt::Write as _;
    let mut s = String::from("/* Generated by schedlab's build benchmark. */\n");
    for k in 0..funcs {
        let _ = write!(
            s,
            "static unsigned f{k}(unsigned x, const unsigned *t)\n{{\n\
             \x20   unsigned a = x * 2654435761u + {seed}u;\n\
             \x20   for (int i = 0; i < 16; i++) {{\n\
             \x20       a ^= a << 13;\n\
             \x20       a ^= a >> 17;\n\
             \x20       a ^= a << 5;\n\
             \x20       switch ((a + (unsigned)i) & 7u) {{\n\
             \x20       case 0: a += t[i & 15] * {k3}u; break;\n\
             \x20       case 1: a -= t[(i + 3) & 15] ^ {k5}u; break;\n\
             \x20       case 2: a *= t[(i + 7) & 15] | 1u; break;\n\
             \x20       case 3: a = (a >> 3) | (a << 29); break;\n\
             \x20       default: a += (unsigned)i * {k7}u;\n\
             \x20       }}\n\
             \x20   }}\n\
             \x20   return a;\n}}\n\n",
            seed = u * 1000 + k,
            k3 = k + 3,
            k5 = k + 5,
            k7 = k + 7,
        );
    }
    let table: Vec<String> = (0..16).map(|i| ((u * 31 + i * 7) % 97).to_string()).collect();
    let _ = writeln!(s, "unsigned u{u}(unsigned x)\n{{\n    static const unsigned t[16] = {{{}}};", table.join(", "));
    s.push_str("    unsigned s = x;\n");
    for k in 0..funcs {
        let _ = writeln!(s, "    s += f{k}(s, t);");
    }
    s.push_str("    return s;\n}\n");
    s
}

fn main_source(units: u64) -> String {
    let mut s = String::from("/* Generated by schedlab's build benchmark. */\n");
    for u in 0..units {
        s.push_str(&format!("unsigned u{u}(unsigned);\n"));
    }
    s.push_str("\nint main(void)\n{\n    unsigned s = 1;\n");
    for u in 0..units {
        s.push_str(&format!("    s = u{u}(s);\n"));
    }
    s.push_str("    return (int)(s & 1u);\n}\n");
    s
}

fn makefile(units: u64, cc: &Path) -> String {
    let objs: Vec<String> = (0..units).map(|u| format!("u{u}.o")).chain(["main.o".to_string()]).collect();
    format!(
        "# Generated by schedlab's build benchmark; deleted after the case.\n\
         # The compiler by absolute path, never a ccache wrapper: every build compiles.\n\
         CC := {cc}\n\
         CFLAGS := -O2\n\
         export CCACHE_DISABLE := 1\n\
         OBJS := {objs}\n\n\
         prog: $(OBJS)\n\t$(CC) -o $@ $(OBJS)\n\n\
         %.o: %.c\n\t$(CC) $(CFLAGS) -c -o $@ $<\n\n\
         .PHONY: clean\n\
         clean:\n\trm -f $(OBJS) prog\n",
        cc = cc.display(),
        objs = objs.join(" "),
    )
}

/// Delete what a build of the generated project made (its clean step).
fn remove_outputs(dir: &Path) -> Result<(), LiveError> {
    let io = |e: std::io::Error| LiveError::Os {
        what: "deleting the generated project's objects",
        detail: e.to_string(),
        hint: "check the temp directory",
    };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.extension().is_some_and(|e| e == "o") || path.file_name().is_some_and(|n| n == "prog") {
            std::fs::remove_file(&path).map_err(io)?;
        }
    }
    Ok(())
}

/// Where each repetition's output goes: $TMPDIR/schedlab-build-logs. The
/// generated project's logs are kept only when its build fails.
struct Logs {
    dir: PathBuf,
    /// UTC time of the case's start, prefix of its files.
    stamp: String,
}

impl Logs {
    fn open() -> Result<Logs, LiveError> {
        let stamp = utc_stamp(harness::unix_ms());
        // Not the working directory: a default suite would leave dozens of logs there.
        let candidates = [std::env::temp_dir().join("schedlab-build-logs")];
        let mut last = String::new();
        for dir in candidates {
            match std::fs::create_dir_all(&dir) {
                Ok(()) if writable(&dir) => return Ok(Logs { dir, stamp }),
                Ok(()) => last = format!("{} is not writable", dir.display()),
                Err(e) => last = format!("{}: {e}", dir.display()),
            }
        }
        Err(LiveError::Os {
            what: "creating the build log directory",
            detail: last,
            hint: "run from a writable directory or set TMPDIR to one",
        })
    }

    /// A new log file for one repetition (`tag`: warmup1, rep1, ...).
    fn create(&self, j: u64, tag: &str) -> Result<(File, PathBuf), LiveError> {
        let names =
            [format!("{}-j{j}-{tag}.log", self.stamp), format!("{}-{}-j{j}-{tag}.log", self.stamp, std::process::id())];
        let mut last = None;
        for name in names {
            let path = self.dir.join(name);
            // Append: the clean step's output, then the build's, each after our header line.
            match std::fs::OpenOptions::new().append(true).create_new(true).open(&path) {
                Ok(f) => return Ok((f, path)),
                Err(e) => last = Some(e),
            }
        }
        Err(LiveError::Os {
            what: "creating a build log file",
            detail: last.map(|e| e.to_string()).unwrap_or_default(),
            hint: "check the log directory named in the message",
        })
    }
}

fn writable(dir: &Path) -> bool {
    let Ok(c) = CString::new(dir.as_os_str().as_bytes()) else { return false };
    // SAFETY: c is a valid NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// "20261123-101059.123" (UTC) for a Unix time in ms.
fn utc_stamp(unix_ms: i64) -> String {
    let (secs, ms) = (unix_ms.div_euclid(1000), unix_ms.rem_euclid(1000));
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}{m:02}{d:02}-{:02}{:02}{:02}.{ms:03}", sod / 3600, sod % 3600 / 60, sod % 60)
}

/// The last `n` non-blank lines of a log, joined for a one-line message.
fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    let lines: Vec<&str> = text.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
    let tail: Vec<String> = lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| {
            if l.chars().count() > 200 {
                format!("{}...", l.chars().take(200).collect::<String>())
            } else {
                l.to_string()
            }
        })
        .collect();
    if tail.is_empty() {
        "(no output)".into()
    } else {
        tail.join(" | ")
    }
}

/// A `/bin/sh -c` command line prepared before any fork: the child may
/// not allocate.
struct Shell {
    text: String,
    argv: [CString; 3],
    env: Vec<CString>,
    dir: Option<CString>,
}

impl Shell {
    fn new(text: &str, dir: Option<&Path>, env: &[CString]) -> Result<Shell, LiveError> {
        let nul = || LiveError::BadParam {
            bench: NAME,
            key: "cmd".into(),
            value: text.escape_debug().to_string(),
            expected: "a command without NUL bytes".into(),
        };
        Ok(Shell {
            text: text.to_string(),
            argv: [c"sh".to_owned(), c"-c".to_owned(), CString::new(text).map_err(|_| nul())?],
            env: env.to_vec(),
            dir: dir.map(|d| CString::new(d.as_os_str().as_bytes())).transpose().map_err(|_| nul())?,
        })
    }
}

enum Clean {
    /// The generated project: delete its objects.
    Outputs(PathBuf),
    Command(Shell),
    Nothing,
}

struct Job<'a> {
    j: u64,
    build: Shell,
    clean: Clean,
    logs: &'a Logs,
}

#[derive(Default)]
struct Measured {
    wall: Vec<f64>,
    user: Vec<f64>,
    sys: Vec<f64>,
    applied: Vec<SchedCondition>,
}

fn measure(ctx: &Ctx, plan: &RunPlan, job: &Job) -> Result<Measured, LiveError> {
    let devnull = File::open("/dev/null").map_err(|e| LiveError::Os {
        what: "opening /dev/null",
        detail: e.to_string(),
        hint: "check /dev",
    })?;
    let mut m = Measured::default();
    for rep in 0..(plan.warmup + plan.repeat) as u64 {
        ctx.check(now_ns())?;
        let warm = rep < plan.warmup as u64;
        let tag = if warm { format!("warmup{}", rep + 1) } else { format!("rep{}", rep + 1 - plan.warmup as u64) };
        let (mut log, path) = job.logs.create(job.j, &tag)?;
        let failed = |what: String, status: i32| LiveError::CommandFailed {
            bench: NAME,
            what,
            status: status_text(status, &path),
            log: path.display().to_string(),
            tail: log_tail(&path, TAIL_LINES),
        };
        match &job.clean {
            Clean::Outputs(dir) => remove_outputs(dir)?,
            Clean::Command(sh) => {
                let _ = writeln!(log, "# schedlab build: clean step (untimed): {}", sh.text);
                let done = run_shell(ctx, sh, &log, &devnull, None)?;
                if done.status != 0 {
                    return Err(failed(format!("the clean step '{}'", sh.text), done.status));
                }
            }
            Clean::Nothing => {}
        }
        let _ = writeln!(log, "# schedlab build: {} (jobs={}, {tag})", job.build.text, job.j);
        ctx.rep_starts(rep);
        let done = run_shell(ctx, &job.build, &log, &devnull, Some(ctx.cond))?;
        ctx.rep_ends(rep);
        if done.status != 0 {
            return Err(failed(format!("the build '{}'", job.build.text), done.status));
        }
        if matches!(job.clean, Clean::Outputs(_)) {
            // The generated project's output says nothing once it built.
            let _ = std::fs::remove_file(&path);
        }
        if m.applied.is_empty() {
            m.applied.extend(done.applied);
        }
        if !warm {
            m.wall.push(done.wall_ns as f64 / 1e9);
            m.user.push(done.user_s);
            m.sys.push(done.sys_s);
        }
        ctx.set_done(rep + 1);
    }
    Ok(m)
}

/// "exit status 2", "killed by signal 9", with sh's "command not found" spelled out.
fn status_text(status: i32, log: &Path) -> String {
    if libc::WIFEXITED(status) {
        let code = libc::WEXITSTATUS(status);
        if code == 127 && log_tail(log, TAIL_LINES).contains("not found") {
            return "exit status 127: command not found".into();
        }
        format!("exit status {code}")
    } else if libc::WIFSIGNALED(status) {
        format!("killed by signal {}", libc::WTERMSIG(status))
    } else {
        format!("wait status {status:#x}")
    }
}

/// One finished command.
struct Done {
    /// Raw wait status; 0 = exited with 0.
    status: i32,
    wall_ns: u64,
    user_s: f64,
    sys_s: f64,
    /// Read back from the child when a condition was applied.
    applied: Option<SchedCondition>,
}

/// The forked shell and its process group (same id: see `run_shell`).
/// Dropped before [`Tree::reap`]: SIGKILL the group, reap the shell and
/// wait for the group to be gone.
struct Tree<'a> {
    pid: i32,
    live: bool,
    ctx: &'a Ctx<'a>,
}

impl Tree<'_> {
    /// The shell has exited: kill what it left behind, reap it with its rusage.
    fn reap(&mut self) -> Result<(i32, libc::rusage), LiveError> {
        // SAFETY: signalling our child's own group; the unreaped shell keeps the id taken.
        unsafe { libc::kill(-self.pid, libc::SIGKILL) };
        let r = wait4(self.pid);
        self.live = false;
        self.ctx.unwatch(self.pid);
        wait_group_gone(self.pid);
        r
    }
}

impl Drop for Tree<'_> {
    fn drop(&mut self) {
        if !self.live {
            return;
        }
        // SAFETY: our unreaped child and its group (the child alone if it
        // is not in its group yet; then it has no children either).
        unsafe {
            libc::kill(-self.pid, libc::SIGKILL);
            libc::kill(self.pid, libc::SIGKILL);
        }
        let _ = wait4(self.pid);
        self.ctx.unwatch(self.pid);
        wait_group_gone(self.pid);
    }
}

/// wait4 with its rusage, retrying on EINTR.
fn wait4(pid: i32) -> Result<(i32, libc::rusage), LiveError> {
    let mut status = 0;
    // SAFETY: rusage is plain data; all zeroes is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: status and ru are valid, writable.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            return Ok((status, ru));
        }
        let e = last_errno();
        if r < 0 && e != libc::EINTR {
            return Err(LiveError::os("wait4", e, "the child was reaped elsewhere (SIGCHLD set to SIG_IGN?)"));
        }
    }
}

/// Wait (at most 2 s) until no process of group `pgid` is left: SIGKILLed
/// compilers take a moment to exit.
fn wait_group_gone(pgid: i32) {
    let t0 = std::time::Instant::now();
    // SAFETY: signal 0 only checks for existence.
    while unsafe { libc::kill(-pgid, 0) } == 0 && t0.elapsed() < std::time::Duration::from_secs(2) {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags; the returned descriptor (close-on-exec) is ours.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a fresh descriptor that nothing else owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Until the child `pid` has exited (not reaped): the time it was seen.
/// Checks the stop flag and the deadline every POLL_MS.
fn wait_exit(ctx: &Ctx, pid: i32, pidfd: Option<&OwnedFd>) -> Result<u64, LiveError> {
    loop {
        match pidfd {
            Some(fd) => {
                let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
                // SAFETY: one valid pollfd.
                let r = unsafe { libc::poll(&mut p, 1, POLL_MS) };
                if r > 0 {
                    return Ok(now_ns());
                }
                if r < 0 && last_errno() != libc::EINTR {
                    return Err(LiveError::last_os(
                        "poll on the build's pidfd",
                        "check the kernel (pidfd: Linux 5.3+)",
                    ));
                }
            }
            None => {
                for _ in 0..POLL_MS {
                    // SAFETY: siginfo_t is plain data; zeroed is valid and si_pid stays 0 if nothing exited.
                    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
                    // SAFETY: info is writable; WNOWAIT leaves the child for wait4.
                    let r = unsafe {
                        libc::waitid(
                            libc::P_PID,
                            pid as libc::id_t,
                            &mut info,
                            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
                        )
                    };
                    // SAFETY: waitid filled info (or left it zeroed).
                    if r == 0 && unsafe { info.si_pid() } != 0 {
                        return Ok(now_ns());
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
        }
        ctx.check(now_ns())?;
    }
}

/// Run `sh` in a process group of its own with stdin from /dev/null and stdout+stderr to
/// `log`; under `cond` (applied by pid before the shell starts) when given.
fn run_shell(
    ctx: &Ctx,
    sh: &Shell,
    log: &File,
    devnull: &File,
    cond: Option<&SchedCondition>,
) -> Result<Done, LiveError> {
    let (go_r, go_w) = harness::pipe()?;
    // Everything the child touches, prepared before fork.
    let argv: Vec<*const libc::c_char> =
        sh.argv.iter().map(|a| a.as_ptr()).chain(std::iter::once(std::ptr::null())).collect();
    let envp: Vec<*const libc::c_char> =
        sh.env.iter().map(|a| a.as_ptr()).chain(std::iter::once(std::ptr::null())).collect();
    let dir = sh.dir.as_ref().map_or(std::ptr::null(), |d| d.as_ptr());
    let fds =
        ChildFds { log: log.as_raw_fd(), null: devnull.as_raw_fd(), go: go_r.as_raw_fd(), go_w: go_w.as_raw_fd() };
    // SAFETY: getpid cannot fail.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the child runs only async-signal-safe calls on data prepared above.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(LiveError::last_os("fork", "too many processes? check ulimit -u and kernel.pid_max"));
    }
    if pid == 0 {
        // SAFETY: in the child of fork; pointers stay valid (copied address space).
        unsafe { child(parent, fds, dir, argv.as_ptr(), envp.as_ptr()) }
    }
    // Also from here, so the group exists before either side goes on.
    // SAFETY: setpgid on our own child, not yet exec'd.
    unsafe { libc::setpgid(pid, pid) };
    drop(go_r);
    let mut tree = Tree { pid, live: true, ctx };
    let applied = match cond {
        Some(c) => {
            condition::apply(pid, c, None)?;
            let a = condition::read_back(pid)?;
            if c.policy.is_realtime() {
                ctx.watch(pid);
            }
            Some(a)
        }
        None => None,
    };
    let pidfd = pidfd_open(pid);
    let t0 = now_ns();
    if !harness::write_exact(go_w.as_raw_fd(), &[1]) {
        return Err(LiveError::Measurement { bench: NAME, detail: "the build's shell died before it started".into() });
    }
    drop(go_w);
    let t1 = wait_exit(ctx, pid, pidfd.as_ref())?;
    let (status, ru) = tree.reap()?;
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(Done { status, wall_ns: t1 - t0, user_s: secs(ru.ru_utime), sys_s: secs(ru.ru_stime), applied })
}

#[derive(Clone, Copy)]
struct ChildFds {
    log: i32,
    null: i32,
    go: i32,
    go_w: i32,
}

/// The forked child: own process group, PDEATHSIG, default signal handling,
/// stdio, working directory; waits for the parent's go (the condition is
/// applied by then), then execs /bin/sh.
///
/// # Safety
/// Only in the child of fork(): async-signal-safe calls only, on pointers
/// prepared before the fork.
unsafe fn child(
    parent: i32,
    fds: ChildFds,
    dir: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
) -> ! {
    // SAFETY: raw system calls on values prepared before fork.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
        if libc::getppid() != parent {
            libc::_exit(111);
        }
        // Its own process group, killed as one. Not the terminal's
        // foreground group, so Ctrl-C reaches schedlab, which kills it.
        // Not a new session: that would put it in an autogroup of its own.
        libc::setpgid(0, 0);
        // Rust ignores SIGPIPE and exec keeps ignored signals: give the build the defaults.
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::close(fds.go_w);
        if libc::dup2(fds.null, 0) < 0 || libc::dup2(fds.log, 1) < 0 || libc::dup2(fds.log, 2) < 0 {
            libc::_exit(126);
        }
        if !dir.is_null() && libc::chdir(dir) != 0 {
            libc::_exit(126);
        }
        let mut b = 0u8;
        loop {
            let n = libc::read(fds.go, (&mut b as *mut u8).cast(), 1);
            if n == 1 {
                break;
            }
            if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            // The parent gave up (condition refused): never run the command.
            libc::_exit(112);
        }
        libc::execve(c"/bin/sh".as_ptr(), argv, envp);
        libc::_exit(127)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_of_a_command_line_is_found_when_plain() {
        assert_eq!(first_program("make -C ~/src/linux -j4"), Some("make"));
        assert_eq!(first_program("  CC=clang V=1 ninja -j4"), Some("ninja"));
        assert_eq!(first_program("./configure && make"), Some("./configure"));
        assert_eq!(first_program("cd src && make"), None, "builtin");
        assert_eq!(first_program("$MAKE -j4"), None, "expansion");
        assert_eq!(first_program("'my make' -j4"), None, "quoted");
        assert_eq!(first_program("CFLAGS=\"-O2 -g\" make"), None, "quoted assignment: the shell decides");
        assert_eq!(first_program("A=1"), None);
    }

    #[test]
    fn utc_stamps_are_civil_dates() {
        assert_eq!(utc_stamp(0), "19700101-000000.000");
        // 2000-02-29 23:59:59.999 (a leap day of a century leap year).
        assert_eq!(utc_stamp(951_868_799_999), "20000229-235959.999");
        assert_eq!(utc_stamp(1_763_892_659_123), "20251123-101059.123");
    }

    #[test]
    fn a_log_tail_keeps_the_last_non_blank_lines() {
        let dir = std::env::temp_dir().join(format!("schedlab-tail-test-{}", std::process::id()));
        std::fs::write(&dir, "a\nb\n\nc\nd\ne\nf\n\n").unwrap();
        assert_eq!(log_tail(&dir, 5), "b | c | d | e | f");
        std::fs::write(&dir, "").unwrap();
        assert_eq!(log_tail(&dir, 5), "(no output)");
        std::fs::remove_file(&dir).unwrap();
    }

    #[test]
    fn the_generated_project_is_complete_and_removed_on_drop() {
        let dir = {
            let p = Project::generate(3, 2, Path::new("/usr/bin/cc")).unwrap();
            let mk = std::fs::read_to_string(p.dir.join("Makefile")).unwrap();
            assert!(mk.contains("CC := /usr/bin/cc") && mk.contains("OBJS := u0.o u1.o u2.o main.o"), "{mk}");
            assert!(mk.contains("export CCACHE_DISABLE"));
            let u1 = std::fs::read_to_string(p.dir.join("u1.c")).unwrap();
            assert_eq!(u1.matches("static unsigned f").count(), 2);
            assert!(u1.contains("unsigned u1(unsigned x)"));
            assert!(std::fs::read_to_string(p.dir.join("main.c")).unwrap().contains("s = u2(s);"));
            std::fs::write(p.dir.join("u0.o"), b"").unwrap();
            std::fs::write(p.dir.join("prog"), b"").unwrap();
            remove_outputs(&p.dir).unwrap();
            assert!(!p.dir.join("u0.o").exists() && !p.dir.join("prog").exists() && p.dir.join("u0.c").exists());
            p.dir.clone()
        };
        assert!(!dir.exists(), "the project outlived its guard");
    }

    #[test]
    fn exits_are_seen_with_and_without_a_pidfd() {
        let plan = RunPlan { repeat: 1, warmup: 0, ..Default::default() };
        let (waited, _) = harness::drive(NAME, &plan, 1.0, 1, &|_| {}, |ctx| {
            let mut out = Vec::new();
            for use_pidfd in [true, false] {
                let mut child = std::process::Command::new("sleep").arg("0.05").spawn().unwrap();
                let pid = child.id() as i32;
                let fd = if use_pidfd { pidfd_open(pid) } else { None };
                let t0 = now_ns();
                let t1 = wait_exit(ctx, pid, fd.as_ref()).unwrap();
                // Not reaped by wait_exit: the status is still there to collect.
                assert!(child.wait().unwrap().success());
                out.push(t1 - t0);
            }
            Ok(out)
        })
        .unwrap();
        assert!(waited.iter().all(|ns| (40_000_000..5_000_000_000).contains(ns)), "{waited:?}");
    }

    #[test]
    fn shell_quoting_survives_quotes() {
        assert_eq!(shell_quote("/usr/bin/make"), "'/usr/bin/make'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn the_child_environment_drops_a_parent_makes_jobserver() {
        let env = child_env();
        assert!(env.iter().all(|kv| !kv.to_bytes().starts_with(b"MAKEFLAGS=")));
    }
}
