//! The command line, as clap derive types. Doc comments here are the `--help`
//! text; this file is the one place options are described.

use clap::builder::{PossibleValue, StringValueParser, TypedValueParser};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// `sim`'s default machine; `list` shows scaled tunable defaults for it.
pub const SIM_CPUS: u32 = 2;
pub const SIM_HZ: u32 = 1000;

/// Above this a typo is more likely than intent (repetitions, invocations, warm-ups, seeds).
pub const MAX_REPEAT: u32 = 10_000;

/// A whole-number option in `min..=max`. Used with `allow_negative_numbers`
/// so that `--repeat -1` is read as a bad value (and says the range) rather
/// than as an unknown flag.
fn count(min: u64, max: u64) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    move |s: &str| match s.trim().parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!("give a whole number from {min} to {max}")),
    }
}

/// `count` for the options stored as u32.
fn count32(min: u32, max: u32) -> impl Fn(&str) -> Result<u32, String> + Clone + Send + Sync + 'static {
    let parse = count(min.into(), max.into());
    move |s: &str| parse(s).map(|n| n as u32)
}

/// `count` for the options stored as usize.
fn count_usize(min: u32, max: u32) -> impl Fn(&str) -> Result<usize, String> + Clone + Send + Sync + 'static {
    let parse = count(min.into(), max.into());
    move |s: &str| parse(s).map(|n| n as usize)
}

/// Any whole number; the range is checked where it is defined (the simulator's options).
fn whole32(s: &str) -> Result<u32, String> {
    s.trim().parse::<u32>().map_err(|_| "give a whole number".to_string())
}

/// A positive, finite number (k-sigma).
fn positive(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(k) if k.is_finite() && k > 0.0 => Ok(k),
        _ => Err("give a positive number (E3 used 6)".into()),
    }
}

/// A string option whose usual values are known: clap lists `names` in `--help` and in
/// the shell completions, while `check` (not clap) decides what is accepted, so the
/// option keeps its parser's other spellings, its `[key=value]` suffixes and its messages.
#[derive(Clone)]
struct Listed {
    names: Vec<PossibleValue>,
    check: fn(&str) -> Result<(), String>,
}

impl TypedValueParser for Listed {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        let check = self.check;
        StringValueParser::new().try_map(move |s| check(&s).map(|()| s)).parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(self.names.iter().cloned()))
    }
}

/// `run --policy`: the live policies; core's parser also takes `SCHED_FIFO`, `normal`, ...
fn live_policy() -> Listed {
    use schedlab_core::condition::SchedPolicy;
    let help = |p: SchedPolicy| match p {
        SchedPolicy::Other => "SCHED_OTHER: the default fair time-sharing class (nice applies)",
        SchedPolicy::Batch => "SCHED_BATCH: fair class, treated as CPU-bound (nice applies)",
        SchedPolicy::Idle => "SCHED_IDLE: runs only when nothing else wants the CPU",
        SchedPolicy::Fifo => "SCHED_FIFO: real-time, runs until it blocks (--prio)",
        SchedPolicy::Rr => "SCHED_RR: real-time, round-robin among equal priorities (--prio)",
        SchedPolicy::Deadline => "SCHED_DEADLINE: earliest deadline first (--dl-runtime, --dl-deadline, --dl-period)",
    };
    Listed {
        names: SchedPolicy::ALL.into_iter().map(|p| PossibleValue::new(p.name()).help(help(p))).collect(),
        check: |s| s.parse::<SchedPolicy>().map(drop).map_err(|e| e.to_string()),
    }
}

/// `sim --policy`: the simulated schedulers' names. A whole `name[key=value,...]` spec
/// is accepted here and checked by the simulator, which names a bad policy or tunable.
fn sim_policy() -> Listed {
    Listed {
        names: schedlab_sim::policies()
            .into_iter()
            // The RT layer is always on under every policy; it is not one to choose.
            .filter(|p| p.name != "rt")
            .map(|p| PossibleValue::new(p.name).help(p.summary))
            .collect(),
        check: |_| Ok(()),
    }
}

const RUN_EXAMPLES: &str = "\
Examples:
  schedlab run                                    # the default suite, quick form
  schedlab run pipe:placement=same-cpu,mode=thread --invocations 5
  schedlab run spawn:count=1000 --invocations 1 --repeat 1 --warmup 0 --export-json -
  schedlab run threads --policy batch --nice 5 --name batch-nice5
  schedlab run cyclic --policy fifo --prio 95 --cpus 0 --mlock   # root or CAP_SYS_NICE
  schedlab run wakeup --load hackbench:10 --ksigma 6";

const SIM_EXAMPLES: &str = "\
Examples:
  schedlab sim --policy cfs --workload hogs
  schedlab sim --policy o1 --policy cfs --policy eevdf --policy 4bsd \\
               --workload hackbench:groups=10,loops=100 --cpus 2 --seeds 5
  schedlab sim --policy cfs:sched_latency=24ms --policy eevdf --workload hogs:nice=0,5
  schedlab sim --policy o1 --workload hogs:nice=0,0,5 --cpus 1 --duration 2s \\
               --timeline prio.png --slices slices.png
(`schedlab list` names every policy, workload and tunable.)";

const COMPARE_EXAMPLES: &str = "\
Examples:
  schedlab compare last~1 last                    # the previous run is the baseline
  schedlab compare baseline last --noise 2%
  schedlab compare 3,4,5 6,7,8                    # three runs pooled per side
  schedlab compare last~1 last --export-markdown changes.md";

const REPORT_EXAMPLES: &str = "\
Examples:
  schedlab report last                            # writes report.html
  schedlab report baseline last -o report.html    # with a comparison against baseline
  schedlab report 3,4,5 6,7,8 -o pooled.html --noise 2%";

#[derive(Debug, Parser)]
#[command(
    name = "schedlab",
    version,
    about = "Measure, simulate and compare CPU schedulers",
    long_about = "Measure, simulate and compare CPU schedulers.\n\n\
        `schedlab run` measures the running kernel (pipe context switches, process and thread \
        creation, ...) under a chosen scheduling condition and stores every result; \
        `schedlab show` prints a stored run; `schedlab list` names the benchmarks and their parameters."
)]
pub struct Cli {
    /// Result store: a SQLite file, or a PostgreSQL database as
    /// postgres://USER@HOST[:PORT]/DATABASE (password from ~/.pgpass, $PGPASSFILE or
    /// $PGPASSWORD; see docs/fleet.md). Default: $SCHEDLAB_DB, else the per-user data directory
    /// (~/.local/share/schedlab/results.db). A store another process holds is waited for
    /// ($SCHEDLAB_BUSY_TIMEOUT per statement, default 30s); a finished result keeps trying for
    /// $SCHEDLAB_STORE_PATIENCE (default 10m), then goes to a JSON file beside the store that
    /// `schedlab import` takes.
    #[arg(long, global = true, value_name = "PATH")]
    pub db: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run live benchmarks (the default suite when none is named) and store the results.
    #[command(after_help = RUN_EXAMPLES)]
    Run(RunArgs),
    /// Print a stored run as a table (the last run by default).
    Show(ShowArgs),
    /// List stored runs, most recent first.
    Runs(RunsArgs),
    /// Remove stored runs with their benchmarks, metrics and the noise profiles made from them.
    Rm(RmArgs),
    /// Compare runs side by side: the first is the baseline.
    #[command(after_help = COMPARE_EXAMPLES)]
    Compare(CompareArgs),
    /// One metric of one benchmark across all stored runs, as a table and a plot.
    History(HistoryArgs),
    /// Write a self-contained HTML report (environment, tables, plots) of one or more runs.
    #[command(after_help = REPORT_EXAMPLES)]
    Report(ReportArgs),
    /// Plot one benchmark of one or more runs: latency CDF or histogram, or bars.
    Plot(PlotArgs),
    /// Import another tool's results (cyclictest --json, schbench -j, hackbench output,
    /// one latency per line, or schedlab JSON) as a stored run.
    Import(ImportArgs),
    /// Simulate a workload under one or more historical or current schedulers.
    #[command(after_help = SIM_EXAMPLES)]
    Sim(SimArgs),
    /// Measure this host's run-to-run noise: run the suite (or the benchmarks named) several
    /// times as A/A runs and save a noise profile that `compare` and `history` use as each
    /// row's smallest change worth a verdict.
    Calibrate(CalibrateArgs),
    /// List the benchmarks and their parameters with defaults and units.
    List,
    /// Check this machine for what distorts scheduler and latency measurements
    /// (preemption model, VM, idle states, governors, isolation, ...) and how to fix each,
    /// and list kernel settings that a killed schedlab run left changed.
    Check(CheckArgs),
    /// Print a shell completion script, e.g.
    /// `schedlab completions bash > ~/.local/share/bash-completion/completions/schedlab`.
    Completions(CompletionsArgs),
    /// Write man pages (schedlab.1 and one per command) to DIR, e.g.
    /// `schedlab manpage ~/.local/share/man/man1`.
    Manpage(ManpageArgs),
    /// Copy runs from this store (--db) to another, e.g. a team's PostgreSQL store. A run
    /// already there (by its unique id) is not copied again, so pushing twice, or again after
    /// an interruption, adds only what is missing.
    #[command(after_help = PUSH_EXAMPLES)]
    Push(PushArgs),
    /// Copy runs from another store (e.g. a team's PostgreSQL store) into this one (--db);
    /// like push, a run already here is not copied again.
    Pull(PullArgs),
    /// Browse the store (--db) in a web browser, read-only: the run list with filters, each
    /// run as `report` renders it, and a comparison of the runs you tick. Ctrl-C stops it.
    #[command(after_help = SERVE_EXAMPLES)]
    Serve(ServeArgs),
    /// Write runs (every run, or those named or selected) to a JSON-lines archive, one run per
    /// line with its unique id; `schedlab import FILE.jsonl` reads it into any store, adding only
    /// the runs not already there.
    Export(ArchiveArgs),
}

const SERVE_EXAMPLES: &str = "\
Examples:
  schedlab serve                                  # http://127.0.0.1:8080/
  schedlab --db postgres://lab@db.example/schedlab serve --listen 127.0.0.1:9000
  ssh -L 8080:127.0.0.1:8080 lab-host schedlab serve   # another machine's store, privately";

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address and port to listen on (port 0: any free port, printed at start). Anything but a
    /// loopback address lets every machine that reaches it read every stored run: there is no
    /// login, so prefer an ssh tunnel.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:8080", value_parser = listen_addr)]
    pub listen: std::net::SocketAddr,
}

fn listen_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    s.trim().parse().map_err(|_| "give an IP address and a port, e.g. 127.0.0.1:8080 or [::1]:8080".to_string())
}

const PUSH_EXAMPLES: &str = "\
Examples:
  schedlab push --to postgres://lab@db.example/schedlab          # every finished run
  schedlab push --to postgres://lab@db.example/schedlab last baseline
  schedlab --db postgres://lab@db.example/schedlab runs          # the team's runs
  schedlab pull --from postgres://lab@db.example/schedlab last~3,last~2";

#[derive(Debug, Args)]
pub struct PushArgs {
    /// The store to copy to: postgres://USER@HOST[:PORT]/DATABASE, or a SQLite file.
    #[arg(long, value_name = "URL")]
    pub to: PathBuf,
    /// Runs to copy: ids, names, `last`, `last~N`, comma lists. Default: every run that is
    /// not still running.
    #[arg(value_name = "RUNS")]
    pub runs: Vec<String>,
}

#[derive(Debug, Args)]
pub struct PullArgs {
    /// The store to copy from: postgres://USER@HOST[:PORT]/DATABASE, or a SQLite file.
    #[arg(long, value_name = "URL")]
    pub from: PathBuf,
    /// Runs to copy, as that store names them (ids, names, `last`, `last~N`, comma lists).
    /// Default: every run that is not still running.
    #[arg(value_name = "RUNS")]
    pub runs: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// Shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManpageArgs {
    /// Directory to write the pages to (created if missing).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Put back the kernel settings (ftrace, ...) that schedlab runs which ended without
    /// cleaning up (SIGKILL, crash, power cut) left changed, as their recovery records say,
    /// and remove the records.
    #[arg(long)]
    pub restore: bool,
}

#[derive(Debug, Args)]
pub struct SimArgs {
    /// Scheduler and tunables, `name:key=value,...` (e.g. `cfs`, `o1`, `ule:slice_stat_ticks=6`,
    /// `staircase:rr_interval=10ms`; `name[key=value,...]` also works).
    /// Repeat to compare several side by side; the first is the baseline.
    #[arg(long, required_unless_present_any = ["scenario", "calibrate"], value_name = "SPEC",
          value_parser = sim_policy())]
    pub policy: Vec<String>,
    /// Workload, `name:key=value,...` (e.g. `hackbench:groups=10,loops=100`, `hogs:nice=0,5`, `wakeup`),
    /// or `@FILE` with a JSON workload description.
    #[arg(long, value_name = "SPEC", required_unless_present_any = ["scenario", "calibrate"])]
    pub workload: Option<String>,
    /// Simulated CPUs.
    #[arg(long, default_value_t = SIM_CPUS, allow_negative_numbers = true, value_parser = whole32)]
    pub cpus: u32,
    /// Tick rate.
    #[arg(long, default_value_t = SIM_HZ, allow_negative_numbers = true, value_parser = whole32)]
    pub hz: u32,
    /// Simulated time limit (the run also ends when every task exited).
    #[arg(long, default_value = schedlab_sim::RUN_PARAMS[0].default, allow_hyphen_values = true)]
    pub duration: String,
    /// First seed of the simulator's one random generator: same seed, same result.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = count(0, u64::MAX))]
    pub seed: u64,
    /// Seeds to run (SEED, SEED+1, ...), in parallel: the simulator's replicates, which
    /// intervals and verdicts rest on (3 or more for a verdict).
    #[arg(long, default_value_t = schedlab_sim::DEFAULT_SEEDS, allow_negative_numbers = true,
          value_parser = count32(1, MAX_REPEAT))]
    pub seeds: u32,
    /// Smallest change worth a verdict when several policies are compared.
    #[arg(long, value_name = "PERCENT", allow_hyphen_values = true)]
    pub noise: Option<String>,
    /// CPU time charged per context switch [default: 2us, or the --calibration's].
    #[arg(long, allow_hyphen_values = true)]
    pub ctx_switch: Option<String>,
    /// Extra CPU time charged when a task resumes on another CPU [default: 10us, or the
    /// --calibration's].
    #[arg(long, allow_hyphen_values = true)]
    pub migration: Option<String>,
    /// Measure this host's costs with the live benchmarks (context switch from a same-CPU
    /// pipe, migration and idle exit from cross-CPU against same-CPU, send/recv of a
    /// hackbench message on one CPU, the channel wake cost and the IPI cost from socket
    /// writes that wake a reader on the same CPU, on another CPU or none, the wake cost from
    /// an RT wake-up on one CPU, the IPI latency from an RT wake-up onto a busy CPU), store
    /// them as a `sim-calibration` run and print them with the flag each feeds;
    /// `--calibration last` then uses them. Takes about two minutes (--quick: seconds).
    #[arg(long, conflicts_with_all = ["policy", "workload", "scenario", "calibration"])]
    pub calibrate: bool,
    /// With --calibrate: small live runs (seconds, noisier figures).
    #[arg(long, requires = "calibrate")]
    pub quick: bool,
    /// Take the cost flags not given (--ctx-switch, --migration, --ipi-cost, --ipi-latency,
    /// --wake-cost, --channel-wake-cost, --idle-exit, and the workload's send_cost/recv_cost
    /// keys) from a stored `sim --calibrate` run: `last` (the newest) or a run id or name.
    /// One from another host warns, naming both.
    #[arg(long, value_name = "last|RUN")]
    pub calibration: Option<String>,
    /// Scheduler CPU time per entry a decision examines (a task or CPU scanned, a tree level).
    #[arg(long, default_value = schedlab_sim::RUN_PARAMS[3].default, allow_hyphen_values = true)]
    pub scan_cost: String,
    /// Scheduler CPU time per run queue searched, inserted into or removed from.
    #[arg(long, default_value = schedlab_sim::RUN_PARAMS[4].default, allow_hyphen_values = true)]
    pub queue_cost: String,
    /// Scheduler CPU time per runqueue lock taken.
    #[arg(long, default_value = schedlab_sim::RUN_PARAMS[5].default, allow_hyphen_values = true)]
    pub lock_cost: String,
    /// CPU time to send a reschedule IPI to another CPU (on a virtual machine a VM exit)
    /// [default: 500ns, or the --calibration's].
    #[arg(long, allow_hyphen_values = true)]
    pub ipi_cost: Option<String>,
    /// From sending a reschedule IPI to the target CPU acting on it (a busy CPU: the
    /// interrupt's delivery and the way to a preemption point) [default: 2us, or the
    /// --calibration's].
    #[arg(long, allow_hyphen_values = true)]
    pub ipi_latency: Option<String>,
    /// The waker's CPU time around a condition wake-up (a futex wake and the system calls
    /// beside it), per task woken [default: 0ns, or the --calibration's].
    #[arg(long, allow_hyphen_values = true)]
    pub wake_cost: Option<String>,
    /// The waker's CPU time when a pipe or socket write (or a read that frees room) wakes the
    /// task blocked on it, per task woken [default: 0ns, or the --calibration's].
    #[arg(long, allow_hyphen_values = true)]
    pub channel_wake_cost: Option<String>,
    /// From an idle CPU being given work (a wake-up's IPI, its own timer) to it acting on it:
    /// a C-state exit, or a halted vCPU woken through the hypervisor
    /// [default: 0ns, or the --calibration's].
    #[arg(long, allow_hyphen_values = true)]
    pub idle_exit: Option<String>,
    /// Make the scheduler's own work free (the five costs above, the two wake costs and
    /// --idle-exit 0), as the model was before it priced them.
    #[arg(long, conflicts_with_all = ["scan_cost", "queue_cost", "lock_cost", "ipi_cost", "ipi_latency", "wake_cost", "channel_wake_cost", "idle_exit"])]
    pub no_sched_cost: bool,
    /// Run a scenario, a seed's experiment in one command: a shipped name (`e1`, `e3`) or a
    /// TOML file. It names its policies, workloads and options, and prints its tables.
    #[arg(long, value_name = "NAME|FILE", conflicts_with_all = ["policy", "workload", "timeline", "slices", "name"])]
    pub scenario: Option<String>,
    /// Write the timeline of each task's scheduler state (its dynamic priority and the
    /// policy's other state variables): .csv (one row per change: task_id, task, time_ns,
    /// quantity, value), .json, or a plot (.svg/.png). With several policies, one file per
    /// policy (the policy is added to the name).
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<std::path::PathBuf>,
    /// The timeline's state variables to write (e.g. `prio,sleep_avg`; an unknown name lists
    /// the policy's). Default: every one in .csv/.json, the dynamic priority in a plot; a plot
    /// of several makes one file per variable (the name is added to the file's).
    #[arg(long, value_name = "Q[,Q...]", value_delimiter = ',', requires = "timeline")]
    pub quantity: Vec<String>,
    /// Tasks drawn in a timeline plot (the first N by id).
    #[arg(long, default_value_t = 12, allow_negative_numbers = true, value_parser = count_usize(1, 100_000))]
    pub timeline_tasks: usize,
    /// Draw each policy's timeslice-vs-nice curve to FILE (.svg/.png).
    #[arg(long, value_name = "FILE")]
    pub slices: Option<std::path::PathBuf>,
    /// Show every metric, not only the headline ones.
    #[arg(long)]
    pub all: bool,
    /// Name the stored run (with several policies, the policy is appended).
    #[arg(long)]
    pub name: Option<String>,
    /// Tag the stored run(s) KEY=VALUE (repeatable), e.g. --label model=v2; `runs`, `history` and
    /// `compare` select by --label and group by --by label:KEY.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = label)]
    pub labels: Vec<(String, String)>,
    /// Do not store the results.
    #[arg(long)]
    pub no_store: bool,
    /// Also print the simulator's speed (events per second, wall time).
    #[arg(long)]
    pub bench: bool,
    /// Most events one seed may take. A spec estimated to need more is refused before
    /// anything runs (the message gives the estimate); a run that gets past it is stopped.
    /// Raise it to run a long simulation on purpose (progress is shown on a terminal).
    #[arg(long, value_name = "N", default_value_t = schedlab_sim::DEFAULT_MAX_EVENTS,
          allow_negative_numbers = true, value_parser = count(1, u64::MAX))]
    pub max_events: u64,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ImportKind {
    Cyclictest,
    Schbench,
    Hackbench,
    /// One latency per line; needs --unit.
    Samples,
    Schedlab,
    /// A whole-store archive from `schedlab export --jsonl` (also chosen by a .jsonl name).
    Jsonl,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    pub file: std::path::PathBuf,
    /// Input format (detected from the content when omitted, except samples).
    #[arg(long, value_enum)]
    pub format: Option<ImportKind>,
    /// Unit of each value for --format samples: ns, us, ms or s.
    #[arg(long)]
    pub unit: Option<String>,
    /// Name the imported run.
    #[arg(long)]
    pub name: Option<String>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Runs to include (ids, names, `last`, `last~N`, or `A1,A2,A3` pooled into one side);
    /// with two or more, the first is the baseline of a comparison.
    #[arg(required = true, value_name = "RUN[,RUN...]")]
    pub runs: Vec<String>,
    /// Output file.
    #[arg(short, long, default_value = "report.html")]
    pub output: std::path::PathBuf,
    /// Smallest change worth a verdict; default as for `compare`.
    #[arg(long, allow_hyphen_values = true)]
    pub noise: Option<String>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum PlotKind {
    /// Latency percentiles (p50 ... p99.99 on a log axis of nines, HdrHistogram style), runs overlaid.
    #[value(alias = "percentiles")]
    Cdf,
    /// Latency histogram (log bins), runs overlaid.
    Hist,
    /// Mean of a scalar metric, one bar per run and benchmark case.
    Bars,
    /// A metric against a swept numeric parameter (--x), one line per run.
    Scaling,
    /// A time-series metric over the benchmark's duration.
    Series,
}

impl PlotKind {
    pub fn is_latency(self) -> bool {
        matches!(self, PlotKind::Cdf | PlotKind::Hist)
    }
}

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Runs to plot (ids, names, `last`, `last~N`).
    #[arg(required = true, value_name = "RUN")]
    pub runs: Vec<String>,
    /// Benchmark, optionally narrowed: `pipe`, `pipe:placement=same-cpu`.
    #[arg(long, value_name = "BENCH[:KEY=VALUE,...]", required_unless_present = "timeline")]
    pub bench: Option<String>,
    /// Draw the stored scheduler timeline of each run's result (`run --observe`, `sim
    /// --timeline`): each task's --quantity over time. --bench narrows which result.
    #[arg(long, conflicts_with_all = ["metric", "kind", "x"])]
    pub timeline: bool,
    /// The timeline quantity drawn (prio, policy, vruntime, slice, sum_exec_runtime,
    /// nr_switches, nr_migrations, run_delay, ...; a simulated run: its policy's state
    /// variables, e.g. sleep_avg, score, lag; default: prio, or the simulator's priority).
    #[arg(long, requires = "timeline")]
    pub quantity: Option<String>,
    /// Tasks drawn in a timeline (measured tasks first).
    #[arg(long, requires = "timeline", default_value_t = schedlab_report::plot::TIMELINE_TASKS,
          allow_negative_numbers = true, value_parser = count_usize(1, 100))]
    pub tasks: usize,
    /// Metric (default: the first latency metric for cdf/hist, the first scalar one for bars).
    #[arg(long)]
    pub metric: Option<String>,
    #[arg(long, value_enum, default_value = "cdf")]
    pub kind: PlotKind,
    /// The swept parameter for --kind scaling (e.g. threads, groups, jobs).
    #[arg(long, value_name = "PARAM")]
    pub x: Option<String>,
    #[arg(long)]
    pub title: Option<String>,
    /// Output file (.svg or .png).
    #[arg(short, long, default_value = "plot.png")]
    pub output: std::path::PathBuf,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Benchmark, optionally narrowed by parameters: `pipe`, `pipe:placement=same-cpu`.
    #[arg(value_name = "BENCH[:KEY=VALUE,...]")]
    pub bench: String,

    /// Metric to follow (default: the benchmark's first headline metric).
    pub metric: Option<String>,

    /// Also draw the history to FILE (.svg or .png).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<std::path::PathBuf>,

    /// Smallest change worth a verdict against the first run; default as for `compare`.
    #[arg(long, allow_hyphen_values = true)]
    pub noise: Option<String>,

    /// One row per group of runs instead of per run (host, kernel, cpu_model, label:KEY; comma
    /// separated): each group's runs pooled as `compare A1,A2` pools them, the first group the
    /// baseline.
    #[arg(long, value_name = "KEY[,KEY...]", value_parser = group_keys, conflicts_with = "plot")]
    pub by: Option<GroupBy>,

    #[command(flatten)]
    pub select: SelectArgs,

    #[command(flatten)]
    pub export: ExportArgs,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Sides to compare, the first being the baseline: each a run (id, name, `last`, `last~N`)
    /// or several runs pooled into one side, `A1,A2,A3`.
    #[arg(required_unless_present = "by", num_args = 2.., value_name = "RUN[,RUN...]")]
    pub runs: Vec<String>,

    /// Smallest change worth a verdict (e.g. 2%, 0.5%). Default: each row's run-to-run
    /// variation from this host's noise profile (`schedlab calibrate`), else 2%.
    #[arg(long, allow_hyphen_values = true)]
    pub noise: Option<String>,

    /// Compare groups of runs instead of the runs named: the runs the selectors below take,
    /// grouped by these keys (host, kernel, cpu_model, label:KEY), each group pooled as one
    /// side, the first group the baseline.
    #[arg(long, value_name = "KEY[,KEY...]", value_parser = group_keys, conflicts_with = "runs")]
    pub by: Option<GroupBy>,

    #[command(flatten)]
    pub select: SelectArgs,

    #[command(flatten)]
    pub export: ExportArgs,
}

#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// A/A runs to make (3 or more; each has the usual invocations).
    // Fewer runs give a band from too few degrees of freedom to mean much.
    #[arg(long, default_value_t = 5, allow_negative_numbers = true, value_parser = count32(3, 1000))]
    pub runs: u32,

    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Benchmarks to run, each optionally with parameters: `pipe`, `pipe:placement=cross-cpu,mode=thread`.
    /// With none, the default suite runs: every benchmark in quick form.
    #[arg(value_name = "BENCH[:KEY=VALUE,...]")]
    pub benchmarks: Vec<String>,

    #[command(flatten)]
    pub condition: ConditionArgs,

    /// Invocations of each benchmark case: separate executions, interleaved with the other
    /// cases in rounds (A B C A B C ...). They are the replicates that intervals and verdicts
    /// rest on; 3 or more are needed for a verdict. Default: 3.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = count32(1, MAX_REPEAT))]
    pub invocations: Option<u32>,

    /// Measured repetitions inside each invocation (after warm-up). Default: 3, or 2 with --quick.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = count32(1, MAX_REPEAT))]
    pub repeat: Option<u32>,

    /// Warm-up repetitions of each invocation, run and discarded. Default: 1.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = count32(0, MAX_REPEAT))]
    pub warmup: Option<u32>,

    /// Short runs: smaller loop counts and fewer repetitions (the default suite uses this).
    #[arg(long)]
    pub quick: bool,

    /// Stop the whole run after this long (e.g. 90s, 5m); finished benchmarks are kept.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub timeout: Option<String>,

    /// Name the run so it can be referred to later (`show NAME`, `compare NAME ...`);
    /// `--save-baseline NAME` is the same, in criterion's words.
    #[arg(long, alias = "save-baseline")]
    pub name: Option<String>,
    /// Tag the run KEY=VALUE (repeatable), e.g. --label kernel=6.18-rt; `runs`, `history` and
    /// `compare` select by --label and group by --by label:KEY.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = label)]
    pub labels: Vec<(String, String)>,

    /// Also write the run as JSON (the versioned interchange schema) to FILE, or `-` for stdout.
    // Named as in `show`; `--json` was its first name and is still taken.
    #[arg(long, alias = "json", value_name = "FILE")]
    pub export_json: Option<PathBuf>,

    /// Add E3's k-sigma filter column to the summary table (e.g. 6).
    #[arg(long, value_name = "K", allow_negative_numbers = true, value_parser = positive)]
    pub ksigma: Option<f64>,

    /// Background load during every benchmark (repeatable, combinable): `none`, `hackbench:G`
    /// (G groups of 20+20 tasks), `burn:N` (N CPU hogs), each optionally with its own condition:
    /// `burn:2,nice=10`, `hackbench:10,policy=batch,cpus=1`. Its throughput is recorded. A list
    /// of loads in one flag (`none,hackbench:10`) makes the load a sweep axis.
    #[arg(long = "load", value_name = "SPEC")]
    pub loads: Vec<String>,

    /// Run even when the RT tasks of a case could starve the machine (e.g. more busy FIFO
    /// threads than CPUs with RT throttling off).
    #[arg(long)]
    pub force: bool,

    /// Do not read the kernel's counters of the measured tasks around each repetition
    /// (context switches, migrations, run-queue wait, CPU steal and interrupt time: the
    /// `kernel.*` metrics that `show --all` lists).
    #[arg(long)]
    pub no_counters: bool,

    /// Sample the measured tasks' and the loads' scheduler state (prio, policy, vruntime,
    /// slice, run time, switches, migrations, run delay) from /proc while each case runs,
    /// the measured tasks RATE times a second (default: up to 100, within 2 % of a CPU) and
    /// the loads' in turn, and store it with the result: `schedlab plot RUN --timeline` draws
    /// it. `--observe=trace` records the scheduler's tracepoints instead (state, CPU, prio,
    /// wake-up latency, migrations; as root, with ftrace free).
    #[arg(long, value_name = "RATE|trace", num_args = 0..=1, require_equals = true, default_missing_value = "auto")]
    pub observe: Option<String>,

    /// Most cases a sweep (lists given to --policy, --prio, --nice, --load) may make
    /// before it is refused with its size and estimated time.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = count_usize(1, 1_000_000))]
    pub sweep_limit: usize,
}

/// The scheduling condition the measured tasks run under.
#[derive(Debug, Args, Clone, Default)]
pub struct ConditionArgs {
    /// Scheduling policy of the measured tasks (`SCHED_` names and `normal` are taken too).
    /// A list (`other,fifo`) sweeps: every case runs under each, side by side.
    #[arg(long, value_name = "POLICY", value_parser = live_policy(), value_delimiter = ',')]
    pub policy: Vec<String>,

    /// RT priority for fifo/rr, 1..99 (default 50); a list (`10,90`) sweeps.
    #[arg(long, value_name = "1-99", allow_negative_numbers = true, value_delimiter = ',')]
    pub prio: Vec<i64>,

    /// Nice value for other/batch, -20..19; a list (`0,10`) sweeps.
    #[arg(long, value_name = "-20..19", allow_negative_numbers = true, value_delimiter = ',')]
    pub nice: Vec<i64>,

    /// CPUs the measured tasks may use, e.g. 0 or 0,2-3.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,

    /// Lock all memory (mlockall) so page faults cannot add latency.
    #[arg(long)]
    pub mlock: bool,

    /// SCHED_DEADLINE runtime, e.g. 200us.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub dl_runtime: Option<String>,

    /// SCHED_DEADLINE relative deadline, e.g. 1ms.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub dl_deadline: Option<String>,

    /// SCHED_DEADLINE period, e.g. 1ms.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub dl_period: Option<String>,

    /// Minimum utilisation clamp of the measured tasks, 0..1024 (sched_setattr; kernels with
    /// CONFIG_UCLAMP_TASK): boosts the frequency and CPU choice as if they used this much.
    #[arg(long, value_name = "0-1024", allow_negative_numbers = true, value_parser = count32(0, 1024))]
    pub uclamp_min: Option<u32>,

    /// Maximum utilisation clamp of the measured tasks, 0..1024.
    #[arg(long, value_name = "0-1024", allow_negative_numbers = true, value_parser = count32(0, 1024))]
    pub uclamp_max: Option<u32>,

    /// Set a kernel scheduler tunable for each case and restore it after (repeatable, root;
    /// `NAME=V1,V2` sweeps it):
    /// a file of /sys/kernel/debug/sched (`base_slice_ns=3000000`, `migration_cost_ns=0`;
    /// debugfs is mounted if needed) or a `kernel.sched_*` sysctl
    /// (`kernel.sched_rt_runtime_us=950000`). The old value is written down first, so
    /// `schedlab check --restore` puts it back even after a crash.
    #[arg(long = "tunable", value_name = "NAME=VALUE", allow_hyphen_values = true)]
    pub tunables: Vec<String>,

    /// Run the measured tasks in a temporary cgroup with this cpu.weight (1..10000; 100 is
    /// the default), made under schedlab's own cgroup and removed after each case (cgroup v2;
    /// a controller a v1 hierarchy holds is set there: cpu.shares, cpu.cfs_quota_us).
    #[arg(long, value_name = "W", allow_negative_numbers = true, value_parser = count32(1, 10_000))]
    pub cgroup_weight: Option<u32>,

    /// ... with this cpu.max: QUOTA/PERIOD, e.g. 50ms/100ms (or microseconds as cpu.max takes
    /// them, 50000/100000; QUOTA may be `max`).
    #[arg(long, value_name = "QUOTA/PERIOD", allow_hyphen_values = true)]
    pub cgroup_max: Option<String>,

    /// ... with this cpuset.cpus, e.g. 0-1.
    #[arg(long, value_name = "LIST")]
    pub cgroup_cpus: Option<String>,

    /// Load the sched_ext scheduler `scx_NAME` (from PATH) for each case and unload it after
    /// (root; Linux 6.12+ with CONFIG_SCHED_CLASS_EXT), e.g. --scx lavd.
    #[arg(long, value_name = "NAME")]
    pub scx: Option<String>,

    /// Like --scx, with the scheduler's whole command line, e.g. 'scx_rusty --slice-us 5000'.
    #[arg(long, value_name = "COMMAND", conflicts_with = "scx", allow_hyphen_values = true)]
    pub scx_cmd: Option<String>,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Run id, name, `last` or `last~N`.
    #[arg(default_value = "last")]
    pub run: String,

    /// Show every metric, not only the headline ones.
    #[arg(long)]
    pub all: bool,

    /// One wide table, a line per metric with every column, however wide the terminal.
    #[arg(long)]
    pub wide: bool,

    /// Add E3's k-sigma filter column (e.g. 6): statistics after dropping samples beyond K sd.
    #[arg(long, value_name = "K", allow_negative_numbers = true, value_parser = positive)]
    pub ksigma: Option<f64>,

    #[command(flatten)]
    pub export: ExportArgs,
}

#[derive(Debug, Args, Clone, Default)]
pub struct ExportArgs {
    /// Write JSON (versioned schema) to FILE, or `-` for stdout.
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,
    /// Write CSV (one row per benchmark metric) to FILE, or `-` for stdout.
    #[arg(long, value_name = "FILE")]
    pub export_csv: Option<PathBuf>,
    /// Write a Markdown table to FILE, or `-` for stdout.
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RmArgs {
    /// Runs to remove: ids, names, `last` or `last~N`. Nothing is removed unless every one is found.
    #[arg(required = true, value_name = "RUN")]
    pub runs: Vec<String>,
}

#[derive(Debug, Args)]
pub struct RunsArgs {
    /// How many runs to list.
    #[arg(long, default_value_t = 20, allow_negative_numbers = true, value_parser = count_usize(1, 1_000_000))]
    pub limit: usize,
    #[command(flatten)]
    pub select: SelectArgs,
}

/// Which stored runs a fleet query takes; all given must match.
#[derive(Debug, Args, Clone, Default)]
pub struct SelectArgs {
    /// Only runs made on this host (its name as `runs` shows it).
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Only runs made under this kernel release, or a release it begins (`6.18` selects
    /// 6.18 and 6.18.4-rt, not 6.180).
    #[arg(long, value_name = "RELEASE")]
    pub kernel: Option<String>,
    /// Only runs on a CPU whose model contains this text, any case (`--cpu-model epyc`).
    #[arg(long, value_name = "TEXT")]
    pub cpu_model: Option<String>,
    /// Only runs tagged KEY=VALUE (`run --label`); repeatable, all must match.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = label)]
    pub labels: Vec<(String, String)>,
}

impl SelectArgs {
    pub fn filter(&self) -> schedlab_store::RunFilter {
        schedlab_store::RunFilter {
            host: self.host.clone(),
            kernel: self.kernel.clone(),
            cpu_model: self.cpu_model.clone(),
            labels: self.labels.clone(),
        }
    }
}

/// `--label KEY=VALUE`.
fn label(s: &str) -> Result<(String, String), String> {
    schedlab_core::model::parse_label(s)
}

/// `--by host,kernel,cpu_model,label:KEY` (a bare KEY is a label).
fn group_keys(s: &str) -> Result<GroupBy, String> {
    s.split(',').map(|k| k.trim()).map(GroupKey::parse).collect::<Result<_, _>>().map(GroupBy)
}

/// The keys of one `--by`, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupBy(pub Vec<GroupKey>);

/// What `--by` groups runs by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupKey {
    Host,
    Kernel,
    CpuModel,
    Label(String),
}

impl GroupKey {
    pub fn parse(k: &str) -> Result<GroupKey, String> {
        let bad = |why: String| {
            Err(format!("--by '{k}': {why}; write host, kernel, cpu_model or label:KEY (or a bare label KEY), e.g. --by host,kernel"))
        };
        match k {
            "" => bad("an empty key".into()),
            "host" => Ok(GroupKey::Host),
            "kernel" => Ok(GroupKey::Kernel),
            "cpu_model" | "cpu-model" | "cpu" => Ok(GroupKey::CpuModel),
            other => {
                let key = other.strip_prefix("label:").unwrap_or(other);
                match schedlab_core::model::label_problem(key, "x") {
                    Some(problem) => bad(problem),
                    None => Ok(GroupKey::Label(key.to_string())),
                }
            }
        }
    }

    /// How a group's heading names the key.
    pub fn name(&self) -> &str {
        match self {
            GroupKey::Host => "host",
            GroupKey::Kernel => "kernel",
            GroupKey::CpuModel => "cpu",
            GroupKey::Label(k) => k,
        }
    }
}

#[derive(Debug, Args)]
pub struct ArchiveArgs {
    /// The archive to write: one run per line, schedlab's JSON with each run's uuid and labels
    /// (`-` for standard output). `schedlab import FILE.jsonl` reads it back.
    #[arg(long, value_name = "FILE", required = true)]
    pub jsonl: PathBuf,
    /// Runs to export (ids, names, `last`, comma lists; default: every run), after the
    /// selectors below.
    #[arg(value_name = "RUNS")]
    pub runs: Vec<String>,
    #[command(flatten)]
    pub select: SelectArgs,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
