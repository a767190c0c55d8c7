//! `schedlab run`: validate everything, then measure benchmark by benchmark,
//! committing each finished one to the store before starting the next.

use super::show::print_run;
use super::{write_output, Outcome};
use crate::args::{ConditionArgs, RunArgs};
use crate::context::{hostname, now_unix_ms, open_store, partly_stored, tool_info, Recorder};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use schedlab_core::condition::{parse_cpu_list, DeadlineParams, RT_PRIO_MAX, RT_PRIO_MIN};
use schedlab_core::units::parse_duration_ns;
use schedlab_core::{BenchResult, BenchStatus, Condition, Run, RunKind, RunStatus, SchedCondition, SchedPolicy};
use schedlab_live::{hygiene, Benchmark, Params, RunPlan};
use schedlab_report::rows::RowOptions;
use schedlab_report::ExportFormat;
use schedlab_store::Store;
use std::path::Path;
use std::time::Duration;

/// Repetitions per invocation when the user gives none.
const DEFAULT_REPEAT: u32 = 3;
const DEFAULT_REPEAT_QUICK: u32 = 2;
/// Invocations per case when the user gives none: the replicates a verdict
/// needs (`schedlab_core::replicate::MIN_REPLICATES`).
pub const DEFAULT_INVOCATIONS: u32 = 3;

/// One benchmark case under one condition of the sweep, fully validated,
/// ready to run.
struct Case {
    bench: &'static dyn Benchmark,
    params: Params,
    estimate_s: f64,
    /// Index of its plan (condition and loads) in [`Prepared::plans`].
    plan: usize,
}

/// A validated run, ready to execute (possibly several times, by calibrate).
pub struct Prepared {
    /// One plan per condition of the sweep (one without lists): the product
    /// of the listed policies, priorities, nice values and load alternatives.
    plans: Vec<RunPlan>,
    cases: Vec<Case>,
    invocations: u32,
    /// `--label KEY=VALUE`, stored with the run.
    labels: std::collections::BTreeMap<String, String>,
}

/// How one execution of a prepared run ended.
pub struct Executed {
    pub run: Run,
    pub facts: schedlab_live::readiness::Facts,
    pub outcome: Outcome,
    /// The file holding the whole run when the store took only part of it.
    pub unsaved: Option<std::path::PathBuf>,
}

/// Everything that can be wrong with the input is found here, before
/// anything runs.
pub fn prepare(a: &RunArgs) -> Result<Prepared> {
    if let Some(problem) = a.name.as_deref().and_then(schedlab_core::model::run_name_problem) {
        bail!("--name: {problem}: choose another name");
    }
    let quick = a.quick || a.benchmarks.is_empty();
    // Ranges of --repeat, --invocations, --warmup and --ksigma are checked by clap (args.rs).
    let repeat = a.repeat.unwrap_or(if quick { DEFAULT_REPEAT_QUICK } else { DEFAULT_REPEAT });
    let invocations = a.invocations.unwrap_or(DEFAULT_INVOCATIONS);
    let warmup = a.warmup.unwrap_or(1);
    let explicit_condition =
        !(a.condition.policy.is_empty() && a.condition.prio.is_empty() && a.condition.nice.is_empty());
    let observe = a.observe.as_deref().map(schedlab_live::observe::Observe::parse).transpose()?;
    // The sched file there, or ftrace free and writable for =trace: refused before anything runs.
    if let Some(o) = &observe {
        o.check()?;
    }
    let mut plans = Vec::new();
    for condition in sweep_conditions(&a.condition)? {
        schedlab_live::condition::preflight(&condition)?;
        for loads in sweep_loads(&a.loads)? {
            schedlab_live::load::check(&loads, 0, a.force)?;
            plans.push(RunPlan {
                condition: condition.clone(),
                repeat,
                warmup,
                quick,
                loads,
                force: a.force,
                explicit_condition,
                counters: !a.no_counters,
                observe,
            });
        }
    }
    let mut cases = Vec::new();
    for (i, plan) in plans.iter().enumerate() {
        cases.extend(plan_cases(&a.benchmarks, plan, i)?);
    }
    if plans.len() > 1 && cases.len() > a.sweep_limit {
        let minutes: f64 = cases.iter().map(|c| c.estimate_s).sum::<f64>() * invocations as f64 / 60.0;
        bail!(
            "this sweep makes {} cases ({} conditions), about {minutes:.0} min with {invocations} invocations: \
             shorten a list, or pass --sweep-limit {} to run it",
            cases.len(),
            plans.len(),
            cases.len()
        );
    }
    Ok(Prepared { plans, cases, invocations, labels: a.labels.iter().cloned().collect() })
}

/// The conditions a run covers: the product of the listed policies,
/// priorities and nice values (one condition without lists). Where a value
/// does not apply (nice with fifo, a priority with other), that policy runs
/// without it, once, and a note says so; without a list the error stands.
fn sweep_conditions(a: &ConditionArgs) -> Result<Vec<SchedCondition>> {
    fn or_none<T: Clone>(v: &[T]) -> Vec<Option<T>> {
        if v.is_empty() {
            vec![None]
        } else {
            v.iter().cloned().map(Some).collect()
        }
    }
    // `--tunable NAME=V1,V2` is an axis too: one tunable set per combination.
    let mut tunable_sets: Vec<Vec<String>> = vec![Vec::new()];
    for t in &a.tunables {
        let values: Vec<String> = match t.split_once('=') {
            Some((name, vals)) if vals.contains(',') => {
                vals.split(',').map(|v| format!("{name}={}", v.trim())).collect()
            }
            _ => vec![t.clone()],
        };
        tunable_sets = tunable_sets
            .into_iter()
            .flat_map(|set| values.iter().map(move |v| [set.clone(), vec![v.clone()]].concat()))
            .collect();
    }
    let sweep = a.policy.len() > 1 || a.prio.len() > 1 || a.nice.len() > 1 || tunable_sets.len() > 1;
    let mut out: Vec<SchedCondition> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    for (policy, tunables) in
        or_none(&a.policy).into_iter().flat_map(|p| tunable_sets.iter().map(move |t| (p.clone(), t.clone())))
    {
        for prio in or_none(&a.prio) {
            for nice in or_none(&a.nice) {
                let one = |prio: Option<i64>, nice: Option<i64>| {
                    let args = ConditionArgs {
                        policy: policy.clone().into_iter().collect(),
                        prio: prio.into_iter().collect(),
                        nice: nice.into_iter().collect(),
                        tunables: tunables.clone(),
                        ..a.clone()
                    };
                    condition_from_args(&args)
                };
                let c = match one(prio, nice) {
                    Ok(c) => c,
                    Err(e) if !sweep => return Err(e),
                    Err(e) => {
                        // Drop what does not apply: nice, then the priority, then both.
                        let tries = [(prio, None), (None, nice), (None, None)];
                        let Some(c) = tries.into_iter().find_map(|(p, n)| one(p, n).ok()) else { return Err(e) };
                        let note = format!("sweep: {} runs without what does not apply to it ({e})", c.policy.name());
                        if !notes.contains(&note) {
                            notes.push(note);
                        }
                        c
                    }
                };
                if !out.contains(&c) {
                    out.push(c);
                }
            }
        }
    }
    notes.iter().for_each(crate::term::note);
    Ok(out)
}

/// The load sets a run covers: each `--load` flag may list alternatives
/// (`none,hackbench:10`), and the sets are their product, one choice per
/// flag; the loads of a set run together.
fn sweep_loads(flags: &[String]) -> Result<Vec<Vec<schedlab_live::LoadSpec>>> {
    let mut sets: Vec<Vec<schedlab_live::LoadSpec>> = vec![Vec::new()];
    for flag in flags {
        let mut next = Vec::new();
        for alternative in schedlab_live::load::alternatives(flag)? {
            let load = schedlab_live::load::parse(&alternative)?;
            if load.old_spelling {
                crate::term::note(format!(
                    "load '{alternative}': a condition after @ is the older spelling, accepted until schedlab 0.3; \
                     write {}",
                    load.text
                ));
            }
            for set in &sets {
                next.push(set.iter().cloned().chain([load.clone()]).collect());
            }
        }
        sets = next;
    }
    Ok(sets)
}

pub fn parse_timeout(a: &RunArgs) -> Result<Option<Duration>> {
    a.timeout
        .as_deref()
        .map(|t| match parse_duration_ns(t) {
            Ok(0) => Err(format!("'{t}' would stop the run before it starts: give e.g. 90s or 5m")),
            r => r.map(Duration::from_nanos),
        })
        .transpose()
        .map_err(|e| anyhow::anyhow!("--timeout: {e}"))
}

pub fn run(db: Option<&Path>, a: RunArgs) -> Result<Outcome> {
    let prepared = prepare(&a)?;
    let timeout = parse_timeout(&a)?;
    let mut store = open_store(db)?;
    hygiene::install_signal_handlers().context("cannot install signal handlers")?;
    let _timeout = timeout.map(hygiene::arm_timeout);
    let Executed { run, facts, outcome, unsaved } = execute(&mut store, &prepared, a.name.clone())?;

    let opts = RowOptions {
        all_metrics: false,
        ksigma: a.ksigma,
        profile: super::compare::load_profile(&store, &hostname()).ok().flatten(),
        params: super::show::param_table(),
    };
    let json_to_stdout = a.export_json.as_ref().is_some_and(|p| p.as_os_str() == "-");
    if let Some(p) = &a.export_json {
        write_output(p, &schedlab_report::export(std::slice::from_ref(&run), ExportFormat::Json, &opts))?;
    }
    if !json_to_stdout {
        print_run(&run, &opts);
        if unsaved.is_none() {
            crate::term::say(format!("stored as run #{} in {}", run.id.unwrap_or_default(), store.location()));
        }
        if let Some(line) = distortions(&facts) {
            crate::term::say(line);
        }
        if matches!(outcome, Outcome::Interrupted) {
            crate::term::say(format!("run interrupted ({}): finished benchmarks were kept", stop_text()));
        }
    }
    if let Some(file) = unsaved {
        return Err(partly_stored(&store, run.id.unwrap_or_default(), &file));
    }
    Ok(outcome)
}

/// Measure every case `invocations` times, interleaved in rounds (A B C A
/// B C ...) so that drift and host activity spread over all cases alike,
/// committing each finished invocation before starting the next.
pub fn execute(store: &mut dyn Store, p: &Prepared, name: Option<String>) -> Result<Executed> {
    let mut run = Run::new(RunKind::Live, tool_info(), std::env::args().collect(), hostname(), now_unix_ms());
    run.name = name;
    run.labels = p.labels.clone();
    // Read before anything runs: the load average after a suite is its own.
    let facts = schedlab_live::readiness::Facts::gather();
    run.env_start = Some(facts.env.clone());
    let mut recorder = Recorder::start(store, &run)?;
    run.id = Some(recorder.run_id());

    let total_s: f64 = p.cases.iter().map(|c| c.estimate_s).sum::<f64>() * p.invocations as f64;
    let bar = progress_bar(total_s);
    let mut done_s = 0.0;
    let mut failed = 0;
    let mut interrupted = false;
    'rounds: for invocation in 0..p.invocations {
        for case in &p.cases {
            let plan = &p.plans[case.plan];
            let label = format!("{} {}", case.bench.name(), case.params);
            let mut message = format!("({}/{}) {}", invocation + 1, p.invocations, short_label(case, plan.quick));
            if p.plans.len() > 1 {
                message.push_str(&format!(" · {}", live_label(plan)));
            }
            bar.set_message(message);
            let mut placeholder = BenchResult::new(
                case.bench.name(),
                Condition::Live {
                    requested: plan.condition.clone(),
                    applied: None,
                    loads: plan.loads.iter().map(|l| l.text.clone()).collect(),
                },
                now_unix_ms(),
            );
            placeholder.params = case.params.to_json(case.bench.params());
            placeholder.invocation = invocation;
            placeholder.quick = plan.quick;
            recorder.begin(&run, &placeholder)?;
            let progress = |f: f64| bar.set_position(((done_s + f.clamp(0.0, 1.0) * case.estimate_s) * 1000.0) as u64);
            let outcome = if hygiene::stop_requested() {
                Err(schedlab_live::LiveError::Interrupted)
            } else {
                case.bench.run(&case.params, plan, &progress)
            };
            let mut result = match outcome {
                Ok(r) => r,
                Err(schedlab_live::LiveError::Interrupted) => {
                    interrupted = true;
                    placeholder.status = BenchStatus::Incomplete { reason: stop_text() };
                    placeholder.ended_unix_ms = Some(now_unix_ms());
                    placeholder
                }
                Err(e) => {
                    failed += 1;
                    bar.suspend(|| crate::term::warn(format!("{label} could not measure: {e}")));
                    placeholder.status = BenchStatus::Failed { reason: e.to_string() };
                    placeholder.ended_unix_ms = Some(now_unix_ms());
                    placeholder
                }
            };
            result.invocation = invocation;
            // A benchmark that keeps what it finished (http's soak) returns
            // normally when stopped: the run is interrupted all the same.
            if hygiene::stop_requested() {
                interrupted = true;
            }
            run.benchmarks.push(result);
            recorder.finish(&run)?;
            done_s += case.estimate_s;
            bar.set_position((done_s * 1000.0) as u64);
            if interrupted {
                break 'rounds;
            }
        }
    }
    bar.finish_and_clear();

    run.status = if interrupted { RunStatus::Interrupted } else { RunStatus::Complete };
    run.ended_unix_ms = Some(now_unix_ms());
    run.env_end = Some(schedlab_live::fingerprint::capture());
    let unsaved = recorder.end(&run)?;
    let outcome = if interrupted {
        Outcome::Interrupted
    } else if failed > 0 {
        Outcome::SomeFailed
    } else {
        Outcome::Done
    };
    Ok(Executed { run, facts, outcome, unsaved })
}

pub fn stop_text() -> String {
    match hygiene::stop_reason() {
        Some(hygiene::StopReason::Signal) => "interrupted by a signal (Ctrl-C or SIGTERM)",
        Some(hygiene::StopReason::Timeout) => "--timeout expired",
        Some(hygiene::StopReason::Watchdog) => {
            "the RT watchdog stopped a benchmark that stalled the machine or overran"
        }
        Some(hygiene::StopReason::Requested) | None => "stopped",
    }
    .to_string()
}

/// A plan's condition as result headings name it.
fn live_label(plan: &RunPlan) -> String {
    let loads = plan.loads.iter().map(|l| l.text.clone()).collect();
    Condition::Live { requested: plan.condition.clone(), applied: None, loads }.label()
}

/// A case as the progress line names it: the benchmark and the parameters
/// not at their default for this mode, with units (the full list does not
/// fit a terminal line).
fn short_label(case: &Case, quick: bool) -> String {
    let mut out = case.bench.name().to_string();
    for (k, v) in case.params.iter() {
        let spec = case.bench.params().iter().find(|s| s.name == k);
        match spec {
            Some(s) if s.kind.parse(s.default_for(quick)).as_deref() == Ok(v) => {}
            Some(s) => out.push_str(&format!(" {k}={}", s.shown(v))),
            None => out.push_str(&format!(" {k}={v}")),
        }
    }
    out
}

fn progress_bar(total_s: f64) -> ProgressBar {
    let bar = ProgressBar::new((total_s * 1000.0).max(1.0) as u64);
    bar.set_style(
        // A fixed bar and a message cut to the line, so the line never wraps.
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:20} ~{eta} left  {wide_msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    // The spinner's ticker is a thread that wakes 5 times a second, anywhere:
    // without a terminal to draw on it would only disturb the measurement.
    if !bar.is_hidden() {
        bar.enable_steady_tick(Duration::from_millis(200));
    }
    bar
}

/// Expand `BENCH[:k=v,...]` arguments (or the default suite) into cases
/// under the plan at `plan_index`.
fn plan_cases(specs: &[String], plan: &RunPlan, plan_index: usize) -> Result<Vec<Case>> {
    let mut requested: Vec<(&'static dyn Benchmark, Params)> = Vec::new();
    if specs.is_empty() {
        for b in schedlab_live::benchmarks() {
            requested.push((b, Params::default()));
        }
    } else {
        for spec in specs {
            let (name, params) = spec.split_once(':').unwrap_or((spec.as_str(), ""));
            // `cyclic,exectime`: several benchmarks at their defaults in one argument.
            if !spec.contains(':') && name.contains(',') {
                for one in name.split(',').filter(|n| !n.trim().is_empty()) {
                    requested.push((schedlab_live::find(one)?, Params::default()));
                }
                continue;
            }
            if name.contains(',') {
                bail!("'{spec}': give each benchmark with parameters its own argument, e.g. `pipe spawn:count=1000`");
            }
            let bench = schedlab_live::find(name)?;
            let params = Params::parse(params).with_context(|| format!("in '{spec}'"))?;
            requested.push((bench, params));
        }
    }
    let mut cases = Vec::new();
    let default_suite = specs.is_empty();
    let requested = requested.into_iter().flat_map(|(b, p)| expand_lists(b, &p).into_iter().map(move |p| (b, p)));
    for (bench, params) in requested {
        let expanded = match bench.cases(&params, plan) {
            // The default suite skips RT benchmarks an unprivileged user cannot
            // run, and benchmarks whose tools (build: cc, make) are missing.
            Err(
                e @ (schedlab_live::LiveError::RtPrivilege { .. }
                | schedlab_live::LiveError::RtGroupBudget { .. }
                | schedlab_live::LiveError::MissingTool { .. }),
            ) if default_suite => {
                // Said once, not once per condition of a sweep.
                if plan_index == 0 {
                    crate::term::warn(format!("skipping {} in the default suite: {e}", bench.name()));
                }
                continue;
            }
            other => other?,
        };
        for p in expanded {
            let estimate_s = bench.estimate_s(&p, plan);
            cases.push(Case { bench, params: p, estimate_s, plan: plan_index });
        }
    }
    Ok(cases)
}

/// A benchmark's parameters with a list given to a key that takes one value
/// (`hackbench:groups=1,2,4,8`), as one set per combination, in order. Keys
/// whose kind is a list (`copies=1,8`) or free text keep their value.
fn expand_lists(bench: &dyn Benchmark, params: &Params) -> Vec<Params> {
    use schedlab_live::ParamKind;
    let mut sets = vec![params.clone()];
    for (key, value) in params.iter() {
        let single = bench.params().iter().any(|s| {
            s.name == key
                && matches!(
                    s.kind,
                    ParamKind::Count { .. }
                        | ParamKind::Duration { .. }
                        | ParamKind::Size { .. }
                        | ParamKind::Choice(_)
                        | ParamKind::Flag
                )
        });
        if !single || !value.contains(',') {
            continue;
        }
        sets = sets
            .into_iter()
            .flat_map(|set| value.split(',').map(move |v| set.clone().with(key, v.trim())).collect::<Vec<_>>())
            .collect();
    }
    sets
}

/// Turn the condition flags into a validated [`SchedCondition`].
pub fn condition_from_args(a: &ConditionArgs) -> Result<SchedCondition> {
    let mut c = SchedCondition::default();
    // One condition: the sweep (`sweep_conditions`) hands each value alone.
    if let Some(p) = a.policy.first() {
        c.policy = p.parse::<SchedPolicy>()?;
    }
    if let Some(&prio) = a.prio.first() {
        if prio < RT_PRIO_MIN as i64 || prio > RT_PRIO_MAX as i64 {
            bail!("priority {prio} is out of range for {}: use --prio between 1 and 99", c.policy);
        }
        c.priority = Some(prio as u32);
    }
    if let Some(&nice) = a.nice.first() {
        c.nice = Some(nice.clamp(i32::MIN as i64, i32::MAX as i64) as i32);
    }
    if let Some(cpus) = &a.cpus {
        c.cpus = Some(parse_cpu_list(cpus)?);
    }
    c.mlock = a.mlock;
    let dl = [&a.dl_runtime, &a.dl_deadline, &a.dl_period];
    if dl.iter().any(|d| d.is_some()) {
        let get = |v: &Option<String>, flag: &str| -> Result<u64> {
            let s = v.as_deref().ok_or_else(|| {
                anyhow::anyhow!("{flag} is missing: SCHED_DEADLINE needs --dl-runtime, --dl-deadline and --dl-period")
            })?;
            parse_duration_ns(s).map_err(|e| anyhow::anyhow!("{flag}: {e}"))
        };
        c.deadline = Some(DeadlineParams {
            runtime_ns: get(&a.dl_runtime, "--dl-runtime")?,
            deadline_ns: get(&a.dl_deadline, "--dl-deadline")?,
            period_ns: get(&a.dl_period, "--dl-period")?,
        });
    }
    use schedlab_core::condition::{CgroupSetting, CpuMax, ScxSetting, Tunable};
    (c.uclamp_min, c.uclamp_max) = (a.uclamp_min, a.uclamp_max);
    c.tunables = a.tunables.iter().map(|t| Tunable::parse(t)).collect::<Result<_, _>>()?;
    if a.cgroup_weight.is_some() || a.cgroup_max.is_some() || a.cgroup_cpus.is_some() {
        c.cgroup = Some(CgroupSetting {
            weight: a.cgroup_weight,
            max: a.cgroup_max.as_deref().map(CpuMax::parse).transpose()?,
            cpus: a.cgroup_cpus.as_deref().map(parse_cpu_list).transpose()?,
        });
    }
    c.scx = match (&a.scx, &a.scx_cmd) {
        (Some(name), _) => Some(ScxSetting::named(name)?),
        (None, Some(cmd)) => Some(ScxSetting::command(cmd)?),
        (None, None) => None,
    };
    c.validate()?;
    Ok(c)
}

/// One line naming what on this machine distorted the figures (the warnings
/// of `schedlab check`, as it was when the run started), or None.
fn distortions(facts: &schedlab_live::readiness::Facts) -> Option<String> {
    use schedlab_live::readiness::{assess, Level};
    let topics: Vec<&str> = assess(facts).into_iter().filter(|f| f.level == Level::Warn).map(|f| f.topic).collect();
    (!topics.is_empty()).then(|| {
        format!(
            "this machine distorts these figures ({}): run `schedlab check` for details and fixes",
            topics.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::distortions;
    use schedlab_live::readiness::Facts;

    #[test]
    fn the_closing_line_names_the_warnings_only() {
        let mut f = Facts { root: true, tracefs: true, ..Default::default() };
        f.env.preempt_model = Some("full".into());
        f.isolated_cpus = Some("1".into());
        assert_eq!(distortions(&f), None, "notes alone say nothing");
        f.env.preempt_model = Some("dynamic(none)".into());
        f.env.virtualization = Some("kvm".into());
        let line = distortions(&f).unwrap();
        assert!(line.contains("(preemption, virtualization)"), "{line}");
    }
}
