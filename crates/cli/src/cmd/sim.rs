//! `schedlab sim`: run a workload under one or more simulated schedulers,
//! store one run per policy and print them side by side.

use super::compare::{parse_noise, DEFAULT_NOISE};
use super::show::print_run;
use super::Outcome;
use crate::args::SimArgs;
use crate::context::{hostname, now_unix_ms, open_store, store_or_save, tool_info, unsaved_error};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use schedlab_core::units::parse_duration_ns;
use schedlab_core::{Run, RunKind, RunStatus};
use schedlab_report::compare::{compare, footer_lines, sweep_table, CompareOptions};
use schedlab_report::plot::{draw, Chart, Line};
use schedlab_report::rows::RowOptions;
use schedlab_report::text::{Align, Grid};
use schedlab_sim::{CostTable, Progress, SimOptions, SimOutcome, Timeline};
use schedlab_store::Store;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub fn run(db: Option<&Path>, mut a: SimArgs) -> Result<Outcome> {
    if a.calibrate {
        return super::sim_calibrate::calibrate(db, &a);
    }
    let cal = a.calibration.as_deref().map(|c| super::sim_calibrate::for_sim(db, c)).transpose()?;
    let cal_cost = |given: &Option<String>, name: &str, param: usize, flag: &str| {
        let default = schedlab_sim::RUN_PARAMS[param].default;
        super::sim_calibrate::cost_ns(given.as_deref(), cal.as_ref(), name, default, flag)
    };
    let dur = |s: &str, flag: &str| parse_duration_ns(s).map_err(|e| anyhow::anyhow!("{flag}: {e}"));
    let cost = if a.no_sched_cost {
        CostTable::ZERO
    } else {
        CostTable {
            scan_ns: dur(&a.scan_cost, "--scan-cost")?,
            queue_ns: dur(&a.queue_cost, "--queue-cost")?,
            lock_ns: dur(&a.lock_cost, "--lock-cost")?,
            ipi_ns: cal_cost(&a.ipi_cost, "ipi_cost_ns", 6, "--ipi-cost")?,
            ipi_latency_ns: cal_cost(&a.ipi_latency, "ipi_latency_ns", 7, "--ipi-latency")?,
            wake_ns: cal_cost(&a.wake_cost, "wake_cost_ns", 8, "--wake-cost")?,
            channel_wake_ns: cal_cost(&a.channel_wake_cost, "channel_wake_ns", 9, "--channel-wake-cost")?,
            idle_exit_ns: cal_cost(&a.idle_exit, "idle_exit_ns", 10, "--idle-exit")?,
        }
    };
    let opts = SimOptions {
        cpus: a.cpus,
        hz: a.hz,
        duration_ns: dur(&a.duration, "--duration")?,
        seed: a.seed,
        record_timeline: a.timeline.is_some(),
        ctx_switch_ns: cal_cost(&a.ctx_switch, "ctx_switch_ns", 1, "--ctx-switch")?,
        migration_ns: cal_cost(&a.migration, "migration_ns", 2, "--migration")?,
        cost,
        max_events: a.max_events,
        ..SimOptions::default()
    };
    if let Some(name) = &a.scenario {
        return run_scenario(name, &a, &opts);
    }
    // Lists in a policy's tunables sweep them: one policy spec per value.
    let mut swept = Vec::new();
    for p in &a.policy {
        swept.extend(schedlab_sim::sweep_policies(p)?);
    }
    if swept.len() > a.policy.len() {
        crate::term::note(format!("sweep: {} policy settings: {}", swept.len(), swept.join(" | ")));
    }
    a.policy = swept;
    if let Some(problem) = a.name.as_deref().and_then(schedlab_core::model::run_name_problem) {
        bail!("--name: {problem}: choose another name");
    }
    // clap requires --workload unless --scenario is given, and that returned above.
    let given = a.workload.clone().unwrap_or_default();
    let workload = match given.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read workload file {path}: check the path after '@'"))?,
        None => given,
    };
    // The calibration's send/recv costs for the workload keys not given.
    let workload = match &cal {
        Some(c) => super::sim_calibrate::workload_with_costs(&workload, c)?,
        None => workload,
    };
    if let Some(p) = &a.timeline {
        check_ext(p, &["csv", "json", "svg", "png"], "--timeline")?;
    }
    if let Some(p) = &a.slices {
        check_ext(p, &["svg", "png"], "--slices")?;
    }
    // A list for a workload key that takes one value sweeps it: each value is
    // a case of every policy's run (a scaling table in `show`).
    let workloads = schedlab_sim::sweep_workloads(&workload)?;
    if workloads.len() > 1 {
        crate::term::note(format!("sweep: {} workloads: {}", workloads.len(), workloads.join(" | ")));
    }
    // Validate every policy, and each run's size, before simulating anything.
    for p in &a.policy {
        for w in &workloads {
            schedlab_sim::check_run(p, w, &opts)?;
        }
    }
    // Each --quantity must be a state variable of every policy's timeline.
    if !a.quantity.is_empty() {
        for p in &a.policy {
            let vars = schedlab_sim::state_vars(p)?;
            schedlab_sim::timeline::pick(vars, &a.quantity)
                .with_context(|| format!("--quantity {} (policy {p})", a.quantity.join(",")))?;
        }
    }
    // Once each: the workload's notes come with every policy.
    let mut notes: Vec<String> = Vec::new();
    for n in a.policy.iter().flat_map(|p| schedlab_sim::spelling_notes(p, &workload)) {
        if !notes.contains(&n) {
            crate::term::note(&n);
            notes.push(n);
        }
    }
    // Output files too: a bad path found after the work would lose it, or
    // leave a stored run without the file asked for.
    if let Some(path) = &a.timeline {
        for p in &a.policy {
            for (file, _) in timeline_files(&per_policy_path(path, p, a.policy.len()), &a.quantity) {
                check_writable(&file, "--timeline")?;
            }
        }
    }
    if let Some(path) = &a.slices {
        check_writable(path, "--slices")?;
    }

    // --seeds' range is checked by clap; --noise is checked before any work is done.
    let noise = a.noise.as_deref().map(parse_noise).transpose()?.unwrap_or(DEFAULT_NOISE);
    let mut store = if a.no_store { None } else { Some(open_store(db)?) };
    let mut runs = Vec::new();
    let mut unsaved = Vec::new();
    for policy in &a.policy {
        let started = now_unix_ms();
        let clock = Instant::now();
        let mut outcomes = Vec::new();
        for w in &workloads {
            outcomes.extend(run_seeds(policy, w, &opts, a.seeds)?);
        }
        let wall = clock.elapsed();
        if a.bench {
            let secs = wall.as_secs_f64();
            let events: u64 = outcomes.iter().map(|o| o.events).sum();
            let fast: u64 = outcomes.iter().map(|o| o.fast_events).sum();
            crate::term::say(format!(
                "{policy}: {events} events in {} seed(s) ({:.1} % replayed by the fast path) in {:.3} s wall = {:.2} M events/s; {:.1} simulated s per wall s",
                a.seeds,
                100.0 * fast as f64 / events.max(1) as f64,
                secs,
                events as f64 / secs / 1e6,
                a.seeds as f64 * opts.duration_ns as f64 / 1e9 / secs
            ));
        }
        let mut run = Run::new(RunKind::Sim, tool_info(), std::env::args().collect(), hostname(), started);
        run.labels = a.labels.iter().cloned().collect();
        let mut timeline = None;
        for outcome in outcomes {
            let mut bench = outcome.result;
            bench.started_unix_ms = started;
            bench.ended_unix_ms = Some(now_unix_ms());
            // Stored with the result, for `plot --timeline` and the report.
            bench.timeline =
                outcome.timeline.as_ref().map(|t| t.to_core(&format!("simulator: {policy}, seed {}", a.seed)));
            run.benchmarks.push(bench);
            timeline = timeline.or(outcome.timeline);
        }
        run.status = RunStatus::Complete;
        run.ended_unix_ms = Some(now_unix_ms());
        if a.policy.len() == 1 {
            run.name = a.name.clone();
        } else if let Some(n) = &a.name {
            run.name = Some(format!("{n}-{}", policy_slug(policy)));
        }
        // The file first: a run is stored only once what was asked of it is done.
        if let (Some(path), Some(tl)) = (&a.timeline, &timeline) {
            let path = per_policy_path(path, policy, a.policy.len());
            for (file, drawn) in timeline_files(&path, &a.quantity) {
                let what = write_timeline(tl, &file, policy, &a.quantity, drawn, a.timeline_tasks)
                    .with_context(|| format!("--timeline {}: cannot write the timeline", file.display()))?;
                crate::term::say(format!(
                    "timeline of {policy} (seed {}) written to {}: {what}",
                    a.seed,
                    file.display()
                ));
            }
        }
        if let Some(s) = store.as_mut() {
            match store_or_save(s, &run, &format!("the simulated run of {policy}"))? {
                Ok(id) => run.id = Some(id),
                Err(file) => unsaved.push(file),
            }
        }
        runs.push(run);
    }

    if let Some(path) = &a.slices {
        let mut chart = Chart::new(&format!("timeslice vs nice (HZ {})", opts.hz), "nice", "timeslice (ms)");
        chart.markers = true;
        for p in &a.policy {
            let curve = schedlab_sim::timeslice_curve(p, opts.hz)?;
            chart.lines.push(Line {
                label: p.clone(),
                points: curve.iter().map(|&(n, ns)| (n as f64, ns as f64 / 1e6)).collect(),
            });
        }
        draw(&chart, path).with_context(|| format!("--slices {}: cannot write the curves", path.display()))?;
        println!("timeslice curves written to {}", path.display());
    }

    if runs.len() == 1 {
        print_run(
            &runs[0],
            &RowOptions { all_metrics: a.all, params: super::show::param_table(), ..Default::default() },
        );
    } else {
        for r in &runs {
            println!("{:<8} {}", r.label(), r.benchmarks[0].condition.label());
        }
        let c = compare(&runs, &CompareOptions::fixed(noise))?;
        println!("{}", sweep_table(&c, crate::term::width(), &super::show::param_table()));
        println!("first policy is the baseline");
        for line in footer_lines(&c) {
            crate::term::say(line);
        }
    }
    if let Some(s) = &store {
        let ids: Vec<String> = runs.iter().filter_map(|r| r.id).map(|i| format!("#{i}")).collect();
        if !ids.is_empty() {
            crate::term::say(format!("stored as run {} in {}", ids.join(", "), s.location()));
        }
        if !unsaved.is_empty() {
            return Err(unsaved_error(s, &unsaved));
        }
    }
    Ok(Outcome::Done)
}

/// `sim --scenario NAME|FILE`: a shipped scenario or a TOML file, run and
/// printed (not stored). The file's options win over the flags.
fn run_scenario(name: &str, a: &SimArgs, opts: &SimOptions) -> Result<Outcome> {
    use schedlab_sim::scenario;
    let (text, origin) = match scenario::shipped(name) {
        Some(text) => (text.to_string(), format!("{name} (shipped)")),
        None => {
            let path = Path::new(name);
            if !path.exists() {
                bail!(
                    "--scenario {name}: no shipped scenario has that name ({}) and no such file exists: \
                     give one of those names or the path of a scenario file (TOML, see docs/sim.md)",
                    scenario::shipped_names().join(", ")
                );
            }
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--scenario {name}: cannot read the scenario file"))?;
            (text, path.display().to_string())
        }
    };
    let sc = scenario::parse(&text, &origin, opts, a.seeds)?;
    let out = sc.run()?;
    let width = crate::term::width();
    println!("{}", schedlab_report::text::wrap(&out.title, width, 0));
    if let Some(src) = &out.source {
        println!("{}", schedlab_report::text::wrap(&format!("({src})"), width, 1));
    }
    for t in &out.tables {
        println!();
        println!("{}", t.title);
        println!("{}", schedlab_report::text::wrap(&t.setup, width, 2));
        let mut align = vec![Align::Right; t.header.len()];
        align[0] = Align::Left;
        let mut grid = Grid::new(t.header.clone(), align);
        for row in &t.rows {
            grid.row(row.clone());
        }
        println!("{}", grid.render(width).trim_end());
        if let Some(n) = &t.note {
            println!("{}", schedlab_report::text::wrap(&format!("note: {n}"), width, 2));
        }
    }
    Ok(Outcome::Done)
}

/// Fail now if `path` cannot be written: open it for writing without
/// truncating, and remove it again if it did not exist.
fn check_writable(path: &Path, flag: &str) -> Result<()> {
    let existed = path.symlink_metadata().is_ok();
    match std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(path) {
        Ok(_) => {
            if !existed {
                // Best effort: the real write comes later and replaces it anyway.
                let _ = std::fs::remove_file(path);
            }
            Ok(())
        }
        Err(e) => {
            let fix = match e.kind() {
                std::io::ErrorKind::NotFound => match path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    Some(dir) => format!("create the directory {} first, or choose another path", dir.display()),
                    None => "choose another path".into(),
                },
                std::io::ErrorKind::PermissionDenied => "choose a path you may write to".into(),
                _ if path.is_dir() => "give a file name, not a directory".into(),
                _ => "choose another path".into(),
            };
            bail!("{flag} {}: cannot write this file ({e}): {fix}; nothing was simulated or stored", path.display())
        }
    }
}

/// [`schedlab_sim::run_seeds`], with a progress bar on a terminal once a
/// run has taken a second. Without a terminal no progress is even counted.
fn run_seeds(policy: &str, workload: &str, opts: &SimOptions, seeds: u32) -> Result<Vec<SimOutcome>> {
    if !std::io::stderr().is_terminal() {
        return Ok(schedlab_sim::run_seeds(policy, workload, opts, seeds)?);
    }
    let progress = Progress::new();
    let done = AtomicBool::new(false);
    let total_ms = progress_total_ms(workload, opts, seeds);
    let out = std::thread::scope(|s| {
        let shower = s.spawn(|| show_progress(&progress, &done, total_ms, policy));
        let out = schedlab_sim::run_seeds_with_progress(policy, workload, opts, seeds, Some(&progress));
        done.store(true, Ordering::Relaxed);
        shower.thread().unpark();
        out
    });
    Ok(out?)
}

/// Simulated ms the progress bar counts to: every simulation that will run,
/// each covering the duration: one per seed, and of a workload with rows
/// (interactive's `loads=`) one per row and seed, since each row runs alone.
fn progress_total_ms(workload: &str, opts: &SimOptions, seeds: u32) -> u64 {
    fn simulations(wl: &schedlab_sim::WorkloadDef) -> u64 {
        if wl.rows.is_empty() {
            1
        } else {
            wl.rows.iter().map(|(_, row)| simulations(row)).sum()
        }
    }
    // The workload was checked before anything ran; were it not, one simulation a seed.
    let per_seed = schedlab_sim::workload::build(workload, opts.cpus).map_or(1, |wl| simulations(&wl));
    per_seed.saturating_mul(seeds as u64).saturating_mul(opts.duration_ns / 1_000_000).max(1)
}

fn show_progress(progress: &Progress, done: &AtomicBool, total_ms: u64, policy: &str) {
    let start = Instant::now();
    let mut bar: Option<ProgressBar> = None;
    while !done.load(Ordering::Relaxed) {
        std::thread::park_timeout(Duration::from_millis(200));
        if done.load(Ordering::Relaxed) || start.elapsed() < Duration::from_secs(1) {
            continue;
        }
        let bar = bar.get_or_insert_with(|| {
            let b = ProgressBar::new(total_ms).with_elapsed(start.elapsed());
            b.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{elapsed_precise}] {wide_bar} {percent}% simulated, ~{eta} left  {msg}",
                )
                .expect("static template")
                .progress_chars("=> "),
            );
            b.set_prefix(policy.to_string());
            b
        });
        bar.set_position((progress.simulated_ns() / 1_000_000).min(total_ms));
        bar.set_message(format!("{:.1} M events", progress.events() as f64 / 1e6));
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
}

fn check_ext(p: &Path, allowed: &[&str], flag: &str) -> Result<()> {
    let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
    if !allowed.contains(&ext) {
        bail!("{flag} {}: the file must end in .{}", p.display(), allowed.join(", ."));
    }
    Ok(())
}

/// "cfs[sched_latency=6000000]" -> "cfs-sched_latency-6000000"
fn policy_slug(policy: &str) -> String {
    let s: String = policy.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '-' }).collect();
    s.trim_matches('-').split('-').filter(|p| !p.is_empty()).collect::<Vec<_>>().join("-")
}

fn per_policy_path(path: &Path, policy: &str, n: usize) -> PathBuf {
    if n == 1 {
        return path.to_path_buf();
    }
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("timeline");
    let ext = path.extension().and_then(|s| s.to_str()).unwrap_or("csv");
    path.with_file_name(format!("{stem}-{}.{ext}", policy_slug(policy)))
}

/// The files `--timeline path` writes, each with the one quantity it draws
/// (None: a table of every quantity asked, or a plot of the primary one).
/// A plot draws one quantity: several asked make one plot each, named
/// `STEM-QUANTITY.EXT`.
fn timeline_files<'q>(path: &Path, quantities: &'q [String]) -> Vec<(PathBuf, Option<&'q str>)> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if matches!(ext, "csv" | "json") || quantities.is_empty() {
        return vec![(path.to_path_buf(), None)];
    }
    if let [one] = quantities {
        return vec![(path.to_path_buf(), Some(one.as_str()))];
    }
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("timeline");
    quantities.iter().map(|q| (path.with_file_name(format!("{stem}-{q}.{ext}")), Some(q.as_str()))).collect()
}

/// Write `tl` to `path`: the `quantities` asked (all when none) to a .csv or
/// .json, or a plot of `drawn` (the primary quantity when None). Returns
/// the quantities written, comma-separated.
fn write_timeline(
    tl: &Timeline,
    path: &Path,
    policy: &str,
    quantities: &[String],
    drawn: Option<&str>,
    max_tasks: usize,
) -> Result<String> {
    let ext = path.extension().and_then(|e| e.to_str());
    if matches!(ext, Some("csv" | "json")) {
        let t = tl.select(quantities)?;
        let text = if ext == Some("csv") { t.to_csv() } else { serde_json::to_string_pretty(&t.to_json())? + "\n" };
        std::fs::write(path, text)?;
        return Ok(t.vars.iter().map(|v| v.name).collect::<Vec<_>>().join(","));
    }
    // The same drawing as `plot --timeline` of a stored run, live or simulated.
    let q = drawn.unwrap_or(tl.quantity.as_str());
    let chart =
        schedlab_report::plot::timeline(&tl.to_core(policy), &format!("{policy}: {q} over time"), Some(q), max_tasks)?;
    draw(&chart, path)?;
    Ok(q.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{Cli, Command};
    use clap::Parser;

    /// The message `main` would print.
    fn err(r: Result<Outcome>) -> String {
        match r {
            Ok(_) => panic!("expected an error"),
            Err(e) => format!("{e:#}"),
        }
    }

    /// `schedlab sim` with `extra`, and a policy, workload, duration and seed count unless given.
    fn sim_args(extra: &[&str]) -> SimArgs {
        let mut argv = vec!["schedlab", "sim"];
        for (flag, default) in [("--policy", "cfs"), ("--workload", "hogs"), ("--duration", "20ms"), ("--seeds", "1")] {
            if !extra.contains(&flag) {
                argv.extend([flag, default]);
            }
        }
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Sim(a) => a,
            _ => unreachable!("a sim command line"),
        }
    }

    #[test]
    fn the_progress_total_counts_every_row_of_every_seed() {
        let opts = SimOptions { duration_ns: 2_000_000_000, ..SimOptions::default() };
        assert_eq!(progress_total_ms("hogs", &opts, 5), 5 * 2000);
        // interactive's loads= rows each simulate the duration alone.
        assert_eq!(progress_total_ms("interactive:loads=none,burn,video", &opts, 5), 3 * 5 * 2000);
        assert_eq!(progress_total_ms("interactive:loads=burn", &opts, 2), 2 * 2000);
    }

    #[test]
    fn an_unwritable_output_is_refused_before_anything_runs_or_is_stored() {
        // Issue 12: `--timeline /nonexistent/dir/t.csv` said only "No such
        // file or directory (os error 2)", after storing the run.
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("store.db");
        let bad = dir.path().join("nonexistent/t.csv");
        let e = err(run(Some(&db), sim_args(&["--timeline", bad.to_str().unwrap()])));
        assert!(e.starts_with("--timeline ") && e.contains("nonexistent/t.csv"), "{e}");
        assert!(e.contains("create the directory") && e.contains("nothing was simulated or stored"), "{e}");
        // With several policies, every per-policy file is checked.
        let e =
            err(run(Some(&db), sim_args(&["--policy", "cfs", "--policy", "o1", "--timeline", bad.to_str().unwrap()])));
        assert!(e.contains("nonexistent/t-cfs.csv"), "{e}");
        let slices = dir.path().join("a-directory.svg");
        std::fs::create_dir(&slices).unwrap();
        let e = err(run(Some(&db), sim_args(&["--slices", slices.to_str().unwrap()])));
        assert!(e.starts_with("--slices ") && e.contains("not a directory"), "{e}");
        assert!(!db.exists(), "the store was not even created");
        // A writable path passes, and the probe leaves nothing behind.
        let good = dir.path().join("t.csv");
        check_writable(&good, "--timeline").unwrap();
        assert!(!good.exists());
    }

    fn scenario_args(argv: &[&str]) -> Result<SimArgs, clap::Error> {
        let argv = ["schedlab", "sim"].iter().chain(argv);
        Cli::try_parse_from(argv).map(|c| match c.command {
            Command::Sim(a) => a,
            _ => unreachable!("a sim command line"),
        })
    }

    #[test]
    fn a_scenario_needs_no_policy_or_workload_and_takes_a_file_or_a_shipped_name() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("store.db");
        // Without --scenario, --policy and --workload are still required.
        assert!(scenario_args(&["--policy", "cfs"]).is_err());
        assert!(scenario_args(&["--workload", "hogs"]).is_err());
        // --scenario with --policy is refused: the file names the policies.
        assert!(scenario_args(&["--scenario", "e1", "--policy", "cfs"]).is_err());
        let file = dir.path().join("mine.toml");
        std::fs::write(
            &file,
            "title = \"mine\"\n[options]\nduration = \"20ms\"\nseeds = 1\n[[table]]\ntitle = \"t\"\n\
             workload = \"hogs\"\npolicies = [\"cfs\"]\ncolumns = [{ metric = \"cpu_busy\" }]\n",
        )
        .unwrap();
        let a = scenario_args(&["--scenario", file.to_str().unwrap()]).unwrap();
        assert!(matches!(run(Some(&db), a), Ok(Outcome::Done)));
        assert!(!db.exists(), "a scenario stores nothing");
        // An unknown key names the file and the key.
        std::fs::write(&file, "title = \"x\"\nflavour = 1\n").unwrap();
        let e = err(run(Some(&db), scenario_args(&["--scenario", file.to_str().unwrap()]).unwrap()));
        assert!(e.contains("mine.toml") && e.contains("unknown field `flavour`"), "{e}");
        // Neither a shipped name nor a file: the shipped names are listed.
        let e = err(run(Some(&db), scenario_args(&["--scenario", "e42"]).unwrap()));
        assert!(e.contains("--scenario e42") && e.contains("e1, e3"), "{e}");
    }

    #[test]
    fn cost_flags_reach_the_run_and_no_sched_cost_zeroes_them() {
        let a = sim_args(&["--no-sched-cost", "--no-store", "--workload", "wakeup:samples=5,interval=1ms,groups=0"]);
        assert!(matches!(run(None, a), Ok(Outcome::Done)));
        let e = err(run(None, sim_args(&["--lock-cost", "2s", "--no-store"])));
        assert!(e.contains("lock_cost 2s: give at most 1s"), "{e}");
        let e = err(run(None, sim_args(&["--ipi-latency", "soon", "--no-store"])));
        assert!(e.starts_with("--ipi-latency: "), "{e}");
        let both = ["--policy", "cfs", "--workload", "hogs", "--no-sched-cost", "--scan-cost", "1us"];
        assert!(scenario_args(&both).is_err(), "--no-sched-cost and a price conflict");
    }

    #[test]
    fn a_runaway_simulation_is_refused_with_its_estimate_before_it_starts() {
        // Issue 12: this (with work=0) ran 200 M events per 100 ms without a word.
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("store.db");
        let mut a = sim_args(&["--workload", "yield[work=1]", "--cpus", "4", "--duration", "10s"]);
        let e = err(run(Some(&db), a));
        assert!(e.contains("about 4.0e10 events") && e.contains("--max-events"), "{e}");
        assert!(!db.exists());
        a = sim_args(&["--workload", "yield[work=0]"]);
        let e = err(run(Some(&db), a));
        assert!(e.contains("work") && e.contains("from 1ns to 10s"), "{e}");
        // --max-events lowers (or raises) the limit.
        a = sim_args(&["--workload", "hogs", "--max-events", "10", "--no-store"]);
        let e = err(run(Some(&db), a));
        assert!(e.contains("more than the limit of 10"), "{e}");
    }
}
