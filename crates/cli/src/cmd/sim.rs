//! `schedlab sim`: run a workload under one or more simulated schedulers,
//! store one run per policy and print them side by side.

use super::compare::{parse_noise, DEFAULT_NOISE};
use super::show::print_run;
use super::Outcome;
use crate::args::SimArgs;
use crate::context::{hostname, now_unix_ms, open_store, tool_info};
use anyhow::{bail, Context, Result};
use schedlab_core::units::parse_duration_ns;
use schedlab_core::{Run, RunKind, RunStatus};
use schedlab_report::compare::{compare, compare_table, footer_lines, CompareOptions};
use schedlab_report::plot::{draw, Chart, Line};
use schedlab_report::rows::RowOptions;
use schedlab_sim::{SimOptions, Timeline};
use schedlab_store::Store;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Seeds are cheap, but a typo of 10000000 is not.
const MAX_SEEDS: u32 = 10_000;

pub fn run(db: Option<&Path>, a: SimArgs) -> Result<Outcome> {
    if let Some(problem) = a.name.as_deref().and_then(schedlab_core::model::run_name_problem) {
        bail!("--name: {problem}: choose another name");
    }
    let dur = |s: &str, flag: &str| parse_duration_ns(s).map_err(|e| anyhow::anyhow!("{flag}: {e}"));
    let opts = SimOptions {
        cpus: a.cpus,
        hz: a.hz,
        duration_ns: dur(&a.duration, "--duration")?,
        seed: a.seed,
        record_timeline: a.timeline.is_some(),
        ctx_switch_ns: dur(&a.ctx_switch, "--ctx-switch")?,
        migration_ns: dur(&a.migration, "--migration")?,
        ..SimOptions::default()
    };
    let workload = match a.workload.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read workload file {path}: check the path after '@'"))?,
        None => a.workload.clone(),
    };
    if let Some(p) = &a.timeline {
        check_ext(p, &["csv", "json", "svg", "png"], "--timeline")?;
    }
    if let Some(p) = &a.slices {
        check_ext(p, &["svg", "png"], "--slices")?;
    }
    // Validate every policy before simulating anything.
    for p in &a.policy {
        schedlab_sim::build_policy(p, opts.cpus, opts.hz)?;
    }

    if a.seeds == 0 || a.seeds > MAX_SEEDS {
        bail!("--seeds {}: give 1 to {MAX_SEEDS} seeds (3 or more for verdicts)", a.seeds);
    }
    let mut store = if a.no_store { None } else { Some(open_store(db)?) };
    let mut runs = Vec::new();
    for policy in &a.policy {
        let started = now_unix_ms();
        let clock = Instant::now();
        let outcomes = schedlab_sim::run_seeds(policy, &workload, &opts, a.seeds)?;
        let wall = clock.elapsed();
        if a.bench {
            let secs = wall.as_secs_f64();
            let events: u64 = outcomes.iter().map(|o| o.events).sum();
            let fast: u64 = outcomes.iter().map(|o| o.fast_events).sum();
            println!(
                "{policy}: {events} events in {} seed(s) ({:.1} % replayed by the fast path) in {:.3} s wall = {:.2} M events/s; {:.1} simulated s per wall s",
                a.seeds,
                100.0 * fast as f64 / events.max(1) as f64,
                secs,
                events as f64 / secs / 1e6,
                a.seeds as f64 * opts.duration_ns as f64 / 1e9 / secs
            );
        }
        let mut run = Run::new(RunKind::Sim, tool_info(), std::env::args().collect(), hostname(), started);
        let mut timeline = None;
        for outcome in outcomes {
            let mut bench = outcome.result;
            bench.started_unix_ms = started;
            bench.ended_unix_ms = Some(now_unix_ms());
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
        if let Some(s) = store.as_mut() {
            run.id = Some(s.insert_run(&run)?);
        }
        if let (Some(path), Some(tl)) = (&a.timeline, &timeline) {
            let path = per_policy_path(path, policy, a.policy.len());
            write_timeline(tl, &path, policy, a.timeline_tasks)?;
            println!("timeline of {policy} (seed {}) written to {}", a.seed, path.display());
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
        draw(&chart, path)?;
        println!("timeslice curves written to {}", path.display());
    }

    if runs.len() == 1 {
        print_run(&runs[0], &RowOptions { all_metrics: a.all, ..Default::default() });
    } else {
        for r in &runs {
            println!("{:<8} {}", r.label(), r.benchmarks[0].condition.label());
        }
        let noise = match &a.noise {
            Some(n) => parse_noise(n)?,
            None => DEFAULT_NOISE,
        };
        let c = compare(&runs, &CompareOptions::fixed(noise))?;
        println!("{}", compare_table(&c));
        println!("first policy is the baseline");
        for line in footer_lines(&c) {
            println!("{line}");
        }
    }
    if let Some(s) = &store {
        let ids: Vec<String> = runs.iter().filter_map(|r| r.id).map(|i| format!("#{i}")).collect();
        println!("stored as run {} in {}", ids.join(", "), s.location());
    }
    Ok(Outcome::Done)
}

fn check_ext(p: &Path, allowed: &[&str], flag: &str) -> Result<()> {
    let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
    if !allowed.contains(&ext) {
        bail!("{flag} {}: the file must end in .{}", p.display(), allowed.join(", ."));
    }
    Ok(())
}

/// "cfs[sched_latency_ns=6000000]" -> "cfs-sched_latency_ns-6000000"
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

fn write_timeline(tl: &Timeline, path: &Path, policy: &str, max_tasks: usize) -> Result<()> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("csv") => std::fs::write(path, tl.to_csv())?,
        Some("json") => std::fs::write(path, serde_json::to_string_pretty(&tl.to_json())? + "\n")?,
        _ => {
            let direction = if tl.lower_is_better { "lower runs first" } else { "higher runs first" };
            let mut chart = Chart::new(
                &format!("{policy}: dynamic priority over time"),
                "time (ms)",
                &format!("{} ({direction})", tl.quantity),
            );
            chart.step = true;
            chart.whole_y = true;
            for t in tl.tasks.iter().filter(|t| !t.points.is_empty()).take(max_tasks) {
                let mut points: Vec<(f64, f64)> = t.points.iter().map(|&(at, v)| (at as f64 / 1e6, v as f64)).collect();
                // Extend the last level to the end of the timeline so it stays visible.
                if let (Some(&(_, v)), Some(end)) =
                    (points.last(), tl.tasks.iter().flat_map(|t| t.points.last()).map(|p| p.0).max())
                {
                    points.push((end as f64 / 1e6, v));
                }
                chart.lines.push(Line { label: t.name.clone(), points });
            }
            draw(&chart, path)?;
        }
    }
    Ok(())
}
