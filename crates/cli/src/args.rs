//! The command line, as clap derive types. Doc comments here are the `--help`
//! text; this file is the one place options are described.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

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
    /// Result store (SQLite file). Default: $SCHEDLAB_DB, else the per-user data directory
    /// (~/.local/share/schedlab/results.db).
    #[arg(long, global = true, value_name = "PATH")]
    pub db: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run live benchmarks (the default suite when none is named) and store the results.
    Run(RunArgs),
    /// Print a stored run as a table (the last run by default).
    Show(ShowArgs),
    /// List stored runs, most recent first.
    Runs(RunsArgs),
    /// Compare runs side by side: the first is the baseline.
    Compare(CompareArgs),
    /// One metric of one benchmark across all stored runs, as a table and a plot.
    History(HistoryArgs),
    /// Write a self-contained HTML report (environment, tables, plots) of one or more runs.
    Report(ReportArgs),
    /// Plot one benchmark of one or more runs: latency CDF or histogram, or bars.
    Plot(PlotArgs),
    /// Import another tool's results (cyclictest --json, schbench -j, hackbench output,
    /// one latency per line, or schedlab JSON) as a stored run.
    Import(ImportArgs),
    /// Simulate a workload under one or more historical or current schedulers.
    Sim(SimArgs),
    /// Measure this host's run-to-run noise: run the suite (or the benchmarks named) several
    /// times as A/A runs and save a noise profile that `compare` and `history` use as each
    /// row's smallest change worth a verdict.
    Calibrate(CalibrateArgs),
    /// List the benchmarks and their parameters with defaults and units.
    List,
    /// Check this machine for what distorts scheduler and latency measurements
    /// (preemption model, VM, idle states, governors, isolation, ...) and how to fix each.
    Check,
}

#[derive(Debug, Args)]
pub struct SimArgs {
    /// Scheduler and tunables, `name[key=value,...]` (e.g. `cfs`, `o1`, `ule[slice_ms=...]`).
    /// Repeat to compare several side by side; the first is the baseline.
    #[arg(long, required = true, value_name = "SPEC")]
    pub policy: Vec<String>,
    /// Workload, `name[key=value,...]` (e.g. `hackbench[groups=10,loops=100]`, `hogs`, `wakeup`),
    /// or `@FILE` with a JSON workload description.
    #[arg(long, value_name = "SPEC")]
    pub workload: String,
    /// Simulated CPUs.
    #[arg(long, default_value_t = 2)]
    pub cpus: u32,
    /// Tick rate.
    #[arg(long, default_value_t = 1000)]
    pub hz: u32,
    /// Simulated time limit (the run also ends when every task exited).
    #[arg(long, default_value = "10s")]
    pub duration: String,
    /// First seed of the simulator's one random generator: same seed, same result.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Seeds to run (SEED, SEED+1, ...), in parallel: the simulator's replicates, which
    /// intervals and verdicts rest on (3 or more for a verdict).
    #[arg(long, default_value_t = schedlab_sim::DEFAULT_SEEDS)]
    pub seeds: u32,
    /// Smallest change worth a verdict when several policies are compared.
    #[arg(long, value_name = "PERCENT")]
    pub noise: Option<String>,
    /// CPU time charged per context switch.
    #[arg(long, default_value = "2us")]
    pub ctx_switch: String,
    /// Extra CPU time charged when a task resumes on another CPU.
    #[arg(long, default_value = "10us")]
    pub migration: String,
    /// Write the dynamic-priority timeline: .csv, .json, or a plot (.svg/.png). With several
    /// policies, one file per policy (the policy is added to the name).
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<std::path::PathBuf>,
    /// Tasks drawn in a timeline plot (the first N by id).
    #[arg(long, default_value_t = 12)]
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
    /// Do not store the results.
    #[arg(long)]
    pub no_store: bool,
    /// Also print the simulator's speed (events per second, wall time).
    #[arg(long)]
    pub bench: bool,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ImportKind {
    Cyclictest,
    Schbench,
    Hackbench,
    /// One latency per line; needs --unit.
    Samples,
    Schedlab,
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
    #[arg(long)]
    pub noise: Option<String>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum PlotKind {
    /// Cumulative distribution of a latency histogram, runs overlaid.
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
    #[arg(long, value_name = "BENCH[:KEY=VALUE,...]")]
    pub bench: String,
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
    #[arg(long)]
    pub noise: Option<String>,

    #[command(flatten)]
    pub export: ExportArgs,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Sides to compare, the first being the baseline: each a run (id, name, `last`, `last~N`)
    /// or several runs pooled into one side, `A1,A2,A3`.
    #[arg(required = true, num_args = 2.., value_name = "RUN[,RUN...]")]
    pub runs: Vec<String>,

    /// Smallest change worth a verdict (e.g. 2%, 0.5%). Default: each row's run-to-run
    /// variation from this host's noise profile (`schedlab calibrate`), else 2%.
    #[arg(long)]
    pub noise: Option<String>,

    #[command(flatten)]
    pub export: ExportArgs,
}

#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// A/A runs to make (3 or more; each has the usual invocations).
    #[arg(long, default_value_t = 5)]
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
    #[arg(long, value_name = "N")]
    pub invocations: Option<u32>,

    /// Measured repetitions inside each invocation (after warm-up). Default: 3, or 2 with --quick.
    #[arg(long, value_name = "N")]
    pub repeat: Option<u32>,

    /// Warm-up repetitions of each invocation, run and discarded. Default: 1.
    #[arg(long, value_name = "N")]
    pub warmup: Option<u32>,

    /// Short runs: smaller loop counts and fewer repetitions (the default suite uses this).
    #[arg(long)]
    pub quick: bool,

    /// Stop the whole run after this long (e.g. 90s, 5m); finished benchmarks are kept.
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,

    /// Name the run so it can be referred to later (`show NAME`, `compare NAME ...`);
    /// `--save-baseline NAME` is the same, in criterion's words.
    #[arg(long, alias = "save-baseline")]
    pub name: Option<String>,

    /// Also write the run as JSON (the versioned interchange schema) to FILE, or `-` for stdout.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// Add E3's k-sigma filter column to the summary table (e.g. 6).
    #[arg(long, value_name = "K")]
    pub ksigma: Option<f64>,

    /// Background load during every benchmark (repeatable, combinable): `none`, `hackbench:G`
    /// (G groups of 20+20 tasks), `burn:N` (N CPU hogs), each optionally with its own condition
    /// after `@`: `burn:2@nice=10`, `hackbench:10@policy=batch,cpus=1`. Its throughput is recorded.
    #[arg(long = "load", value_name = "SPEC")]
    pub loads: Vec<String>,

    /// Run even when the RT tasks of a case could starve the machine (e.g. more busy FIFO
    /// threads than CPUs with RT throttling off).
    #[arg(long)]
    pub force: bool,
}

/// The scheduling condition the measured tasks run under.
#[derive(Debug, Args, Clone, Default)]
pub struct ConditionArgs {
    /// Scheduling policy: other, batch, idle, fifo, rr or deadline.
    #[arg(long, value_name = "POLICY")]
    pub policy: Option<String>,

    /// RT priority for fifo/rr, 1..99 (default 50).
    #[arg(long, value_name = "1-99", allow_negative_numbers = true)]
    pub prio: Option<i64>,

    /// Nice value for other/batch, -20..19.
    #[arg(long, value_name = "-20..19", allow_negative_numbers = true)]
    pub nice: Option<i64>,

    /// CPUs the measured tasks may use, e.g. 0 or 0,2-3.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,

    /// Lock all memory (mlockall) so page faults cannot add latency.
    #[arg(long)]
    pub mlock: bool,

    /// SCHED_DEADLINE runtime, e.g. 200us.
    #[arg(long, value_name = "DURATION")]
    pub dl_runtime: Option<String>,

    /// SCHED_DEADLINE relative deadline, e.g. 1ms.
    #[arg(long, value_name = "DURATION")]
    pub dl_deadline: Option<String>,

    /// SCHED_DEADLINE period, e.g. 1ms.
    #[arg(long, value_name = "DURATION")]
    pub dl_period: Option<String>,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Run id, name, `last` or `last~N`.
    #[arg(default_value = "last")]
    pub run: String,

    /// Show every metric, not only the headline ones.
    #[arg(long)]
    pub all: bool,

    /// Add E3's k-sigma filter column (e.g. 6): statistics after dropping samples beyond K sd.
    #[arg(long, value_name = "K")]
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
pub struct RunsArgs {
    /// How many runs to list.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
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
