//! `interactive`: E3's Interbench (the live `interactive` benchmark's tasks,
//! loads and figures, so `compare LIVE SIM` lines the two up row by row).
//!
//! Tasks (all run together, each measured): audio (5 % every 50 ms), video
//! (40 % at 60 Hz), X (100 cycles of 100 ms working 0..99 ms, each due by its
//! cycle's end) and gaming (CPU-bound, judged by its CPU share).
//!
//! Loads, as rows (`loads=`, the live benchmark's names): `none`; `video`
//! and `x` (one background copy of the task, not measured); `burn` (nice-0
//! hogs, one per CPU as the live `burn:N`, interbench's default `-L`);
//! `write` (a writer: `write_block_cpu` of CPU per 64 KiB block, copying it
//! into the page cache, then `write_io_wait` waiting for the device);
//! `read` (a reader: `read_block_cpu` per block from the page cache, and
//! for `read_miss` % of its blocks a wait of `read_io_wait` for the device);
//! `compile` (interbench's own definition: burn, write and read at once).
//! Each row is simulated alone for the whole duration, with the same seed,
//! and reported as one entity of the table ([`join_rows`]); a live run
//! likewise measures its rows one after the other.
//!
//! Where the defaults come from: a 64 KiB block (the live loads' `BLOCK`),
//! copied at ~3 GB/s with its page allocations into the cache (~25 us) and
//! out of it at ~7 GB/s (~10 us), on a SATA-SSD-class device of ~500 MB/s
//! (64 KiB per ~130 us, so a writer waits ~100 us per block after its
//! CPU). They are estimates: measure a machine's own on it, alone, with
//! `schedlab run fileio:block=64KiB` (its call latencies are the per-block
//! CPU) and `schedlab run interactive:task=audio,loads=write,read`
//! (`write.kb_per_s@write`: 65536 B / that rate is a block's whole time).
//! `read_miss=0` is the live read row (`read:1`, `from=cache`), a reader
//! that never waits; `read_miss=100` is interbench's (a file the size of RAM,
//! every block from the device; the live `read:1,from=disk`).
//!
//! Left out: a device wait is a timed sleep, woken from interrupt context
//! as a disk completion is, but the kernel's uninterruptible sleep is not
//! told apart (O(1) credits it less, `activated = -1`); dirty-page
//! throttling (`balance_dirty_pages` pausing a writer for up to 200 ms at
//! a time) is spread evenly over the blocks; the flusher threads' and the
//! device driver's CPU are not modelled; the live `compile` row runs real
//! compiler jobs (N = CPUs), which pair with this one in `compare` but are
//! not interbench's mix.
//!
//! `loads=combined` (the default) is the one row this workload always had:
//! the loads `burn=` (hogs per CPU), `video_load=` and `x_load=` give, all
//! at once, labelled `burn`, `burn+video`, `none`, ... Stored runs and
//! scenarios use it; its recorded parameters are the ones they had.

use super::{empty, task, upto, TaskDef, WorkloadDef, MAYBE_NO_CPU, PERCENT, PERIOD, STEP};
use crate::program::{Class, Dur, Step};
use crate::spec::Spec;
use crate::{SimError, SimOutcome};
use schedlab_core::model::interactive_load_label;
use schedlab_core::param::{Kind, Param, Resolved};
use schedlab_core::{Direction, Metric, MetricData, Unit};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The live benchmark's rows, in its order.
pub const ROWS: [&str; 7] = ["none", "video", "x", "burn", "write", "read", "compile"];
/// `loads=` for the one combined row.
const COMBINED: &str = "combined";
/// Parameters a combined run does not use: left out of its record, so its
/// key is the one stored runs have.
const ROWS_ONLY: [&str; 6] =
    ["loads", "write_block_cpu", "write_io_wait", "read_block_cpu", "read_miss", "read_io_wait"];
/// Forever, for a task that never blocks.
const FOREVER: u64 = u64::MAX / 4;

pub(super) const PARAMS: &[Param] = &[
    Param::new("audio", upto(1000), "1", "audio tasks"),
    Param::new("video", upto(1000), "1", "video tasks"),
    Param::new(
        "burn",
        upto(1000),
        "4",
        "nice-0 CPU hogs per CPU (interbench's burn load); with loads=, the burn and compile rows' (unset: 1, as live)",
    ),
    Param::new("audio_period", PERIOD, "50ms", "audio period").was("audio_period_ns"),
    Param::new("audio_pct", PERCENT, "5", "audio CPU percent per period"),
    Param::new("video_period", PERIOD, "16666667ns", "video period (60 Hz)").was("video_period_ns"),
    Param::new("video_pct", PERCENT, "40", "video CPU percent per period"),
    Param::new(
        "x",
        upto(1000),
        "0",
        "X tasks: 100 ms cycles working 0, 1, ..., 99 ms (interbench's ramp), each due by its cycle's end",
    ),
    Param::new("gaming", upto(1000), "0", "gaming tasks: CPU-bound, no deadline (their CPU share is reported)"),
    Param::new(
        "video_load",
        upto(1000),
        "0",
        "background video tasks (interbench's video load: not measured); with loads=, the video row's (unset: 1)",
    ),
    Param::new(
        "x_load",
        upto(1000),
        "0",
        "background X tasks (interbench's X load: not measured); with loads=, the x row's (unset: 1)",
    ),
    Param::new(
        "loads",
        Kind::Text,
        COMBINED,
        "combined: one row, the loads of burn=, video_load= and x_load= together; or rows from none, video, x, burn, write, read, compile (the live benchmark's loads=), each simulated alone for the whole duration",
    ),
    Param::new("write_block_cpu", STEP, "25us", "write and compile rows: the writer's CPU per 64 KiB block (into the page cache)"),
    Param::new("write_io_wait", MAYBE_NO_CPU, "100us", "the writer's wait for the device per block (~500 MB/s, less its CPU)"),
    Param::new("read_block_cpu", STEP, "10us", "read and compile rows: the reader's CPU per 64 KiB block (from the page cache)"),
    Param::new(
        "read_miss",
        upto(100),
        "0",
        "% of the reader's blocks read from the device: 0 as the live read row (from=cache), 100 as interbench's",
    ),
    Param::new("read_io_wait", MAYBE_NO_CPU, "130us", "the reader's wait per block read from the device (~500 MB/s)"),
];

fn periodic(name: &str, n: u64, period: u64, pct: u64) -> TaskDef {
    let run = period * pct / 100;
    let prog = vec![Step::Loop(None, vec![Step::PeriodStart(period), Step::Run(Dur::Fixed(run)), Step::PeriodEnd])];
    let mut t = task(name, Class::Normal, 0, n as u32, prog);
    t.probe = true;
    t.deadline_group = Some(name.into());
    t
}

/// interbench's X: 100 cycles of 100 ms whose work ramps 0, 1, ..., 99 ms,
/// each due by its cycle's end (the live benchmark's ramp at
/// duration=10s; interbench's own 100 % step has no deadline, so it is left out).
fn x_program() -> Vec<Step> {
    const MS: u64 = 1_000_000;
    let mut cycles = Vec::new();
    for j in 0..100 {
        cycles.push(Step::PeriodStart(100 * MS));
        if j > 0 {
            cycles.push(Step::Run(Dur::Fixed(j * MS)));
        }
        cycles.push(Step::PeriodEnd);
    }
    vec![Step::Loop(None, cycles)]
}

/// A background copy of a measured template: no probe, no deadline group.
fn background(mut t: TaskDef, name: &str, count: u64) -> TaskDef {
    t.name = name.into();
    t.count = count as u32;
    t.probe = false;
    t.deadline_group = None;
    t
}

fn hogs(count: u64) -> TaskDef {
    task("burn", Class::Normal, 0, count as u32, vec![Step::Run(Dur::Fixed(FOREVER))])
}

/// CPU then a device wait, block after block; without a wait, a hog (the
/// same to the model, in far fewer events).
fn streamer(name: &str, cpu: u64, wait: u64) -> TaskDef {
    let prog = if wait == 0 {
        vec![Step::Run(Dur::Fixed(FOREVER))]
    } else {
        vec![Step::Loop(None, vec![Step::Run(Dur::Fixed(cpu)), Step::Sleep(Dur::Fixed(wait))])]
    };
    task(name, Class::Normal, 0, 1, prog)
}

fn writer(v: &Resolved) -> TaskDef {
    streamer("write", v.u64("write_block_cpu"), v.u64("write_io_wait"))
}

/// Misses spread evenly: the CPU of `100 / read_miss` blocks between two waits.
fn reader(v: &Resolved) -> TaskDef {
    let miss = v.u64("read_miss");
    let wait = if miss == 0 { 0 } else { v.u64("read_io_wait") };
    streamer("read", v.u64("read_block_cpu") * 100 / miss.max(1), wait)
}

/// The rows `loads=` lists, or None for the combined row.
fn rows_of(spec: &Spec, text: &str) -> Result<Option<Vec<&'static str>>, SimError> {
    if text.eq_ignore_ascii_case(COMBINED) {
        return Ok(None);
    }
    let mut rows: Vec<&'static str> = Vec::new();
    for word in text.split(',').map(|w| w.trim().to_ascii_lowercase()) {
        let Some(row) = ROWS.iter().find(|r| **r == word) else {
            let why = format!(
                "{COMBINED} (one row: burn=, video_load= and x_load= together), or rows from {}, comma-separated; '{word}' is neither",
                ROWS.join(", ")
            );
            return Err(spec.bad_value("loads", text, &why));
        };
        if rows.contains(row) {
            return Err(spec.bad_value("loads", text, &format!("each row once; {row} is listed twice")));
        }
        rows.push(*row);
    }
    Ok(Some(rows))
}

/// The live benchmark's headline figures for a row, by its names.
fn headline(label: &str, measured: &[TaskDef]) -> Vec<String> {
    let has = |n: &str| measured.iter().any(|t| t.name == n);
    ["audio", "video", "x"]
        .into_iter()
        .filter(|&t| has(t))
        .flat_map(|t| [format!("latency.{t}@{label}"), format!("deadlines_met.{t}")])
        .chain(has("gaming").then(|| "desired_cpu.gaming".to_string()))
        .collect()
}

/// A key given in the spec itself (not defaulted).
fn given(spec: &Spec, key: &str) -> bool {
    spec.params.iter().any(|(k, _)| k == key)
}

pub(super) fn build(spec: &Spec, v: &Resolved, cpus: u32) -> Result<WorkloadDef, SimError> {
    let (ap, vp) = (v.u64("audio_pct"), v.u64("video_pct"));
    let (aper, vper) = (v.u64("audio_period"), v.u64("video_period"));
    let (na, nv, nx, ng) = (v.u64("audio"), v.u64("video"), v.u64("x"), v.u64("gaming"));
    if na + nv + nx + ng == 0 {
        return Err(spec.bad_value("audio", "0", "at least one audio, video, x or gaming task"));
    }
    let mut measured = Vec::new();
    if na > 0 {
        measured.push(periodic("audio", na, aper, ap));
    }
    if nv > 0 {
        measured.push(periodic("video", nv, vper, vp));
    }
    let mut x = task("x", Class::Normal, 0, nx as u32, x_program());
    x.probe = true;
    x.deadline_group = Some("x".into());
    if nx > 0 {
        measured.push(x.clone());
    }
    if ng > 0 {
        // CPU-bound with no deadline: judged by the CPU it gets (cpu_share).
        let mut g = task("gaming", Class::Normal, 0, ng as u32, vec![Step::Run(Dur::Fixed(FOREVER))]);
        g.share = true;
        measured.push(g);
    }
    let video_load = |n: u64| background(periodic("video", 1, vper, vp), "video_load", n);
    let Some(rows) = rows_of(spec, v.get("loads"))? else {
        let mut wl = empty("interactive");
        wl.tasks = measured;
        let burn = v.u64("burn") * u64::from(cpus);
        wl.tasks.push(hogs(burn));
        wl.tasks.push(video_load(v.u64("video_load")));
        wl.tasks.push(background(x, "x_load", v.u64("x_load")));
        wl.tasks.retain(|t| t.count > 0);
        let loads = ["burn", "video_load", "x_load"].map(|k| (k.to_string(), json!(v.u64(k))));
        let label = interactive_load_label(&loads.into_iter().collect());
        wl.headline = headline(&label, &wl.tasks);
        return Ok(wl);
    };
    // A row's size: as given, else the live benchmark's.
    let size = |key: &str| if given(spec, key) { v.u64(key) } else { 1 };
    let burn = size("burn") * u64::from(cpus);
    let mut wl = empty("interactive");
    for label in rows {
        let loads = match label {
            "none" => vec![],
            "video" => vec![video_load(size("video_load"))],
            "x" => vec![background(x.clone(), "x_load", size("x_load"))],
            "burn" => vec![hogs(burn)],
            "write" => vec![writer(v)],
            "read" => vec![reader(v)],
            "compile" => vec![hogs(burn), writer(v), reader(v)],
            _ => unreachable!("rows_of returns rows of ROWS"),
        };
        let mut row = empty("interactive");
        row.tasks = measured.iter().cloned().chain(loads.into_iter().filter(|t| t.count > 0)).collect();
        row.params.insert("load".into(), Value::String(label.into()));
        row.headline = headline(label, &measured);
        wl.headline.extend(row.headline.iter().filter(|h| h.starts_with("latency.")).cloned());
        wl.rows.push((label.to_string(), row));
    }
    // Figures of the whole table (one entity per row) once, after the rows' histograms.
    wl.headline.extend(headline("", &measured).into_iter().filter(|h| !h.starts_with("latency.")));
    Ok(wl)
}

/// The parameters a run is recorded with: a combined run's as they always
/// were (no `loads=` or I/O keys); with rows, the row sizes they used.
pub(super) fn record_params(params: &mut BTreeMap<String, Value>, spec: &Spec) {
    if params.get("loads").and_then(Value::as_str).is_some_and(|l| l.eq_ignore_ascii_case(COMBINED)) {
        for k in ROWS_ONLY {
            params.remove(k);
        }
        return;
    }
    for key in ["burn", "video_load", "x_load"] {
        if !given(spec, key) {
            params.insert(key.into(), json!(1));
        }
    }
}

/// The live `interactive` benchmark's figures for a simulated run, by its
/// names, so that `compare` lines the two up: per measured task `T`,
/// `latency_mean.T`, `latency_sd.T`, `latency_max.T`, `desired_cpu.T` and
/// `deadlines_met.T` as one entity labelled by this run's load (the live
/// benchmark's row), and the histogram `latency.T@LOAD`. Latency is per
/// period, as there ([`crate::engine::JobStats`]); gaming has only
/// `desired_cpu.gaming`, the CPU its tasks got over their lifetime (the
/// model does not time its chunks).
pub(crate) fn metrics(wl: &WorkloadDef, st: &crate::engine::Stats) -> Vec<Metric> {
    let label = wl
        .params
        .get("load")
        .and_then(Value::as_str)
        .map_or_else(|| interactive_load_label(&wl.params), str::to_string);
    let row = |name: &str, t: &str, unit: Unit, dir: Direction, v: f64| {
        Metric::entities(&format!("{name}.{t}"), unit, dir, "load", vec![label.clone()], vec![v])
    };
    let (lower, higher) = (Direction::LowerIsBetter, Direction::HigherIsBetter);
    let mut out = Vec::new();
    for ((t, met, missed), j) in st.deadlines.iter().zip(&st.jobs) {
        let h = &j.latency;
        if h.is_empty() {
            continue;
        }
        out.push(row("latency_mean", t, Unit::Nanoseconds, lower, h.mean().unwrap_or(0.0)));
        out.push(row("latency_sd", t, Unit::Nanoseconds, lower, h.stdev().unwrap_or(0.0)));
        out.push(row("latency_max", t, Unit::Nanoseconds, lower, h.max().unwrap_or(0) as f64));
        let desired = if j.due_ns > 0 { 100.0 * j.done_ns as f64 / j.due_ns as f64 } else { 100.0 };
        out.push(row("desired_cpu", t, Unit::Percent, higher, desired));
        let deadlines = if met + missed > 0 { 100.0 * *met as f64 / (met + missed) as f64 } else { 100.0 };
        out.push(row("deadlines_met", t, Unit::Percent, higher, deadlines));
        out.push(Metric::histogram(&format!("latency.{t}@{label}"), lower, h.clone()));
    }
    let gaming: Vec<_> = st.tasks.iter().filter(|t| wl.tasks[t.0 as usize].name == "gaming").collect();
    let lifetime: u64 = gaming.iter().map(|t| t.5).sum();
    if lifetime > 0 {
        let cpu: u64 = gaming.iter().map(|t| t.4).sum();
        let share = (100.0 * cpu as f64 / lifetime as f64).min(100.0);
        out.push(row("desired_cpu", "gaming", Unit::Percent, higher, share));
    }
    out
}

/// One result from a workload's rows, each simulated alone (`loads=`), as
/// the live benchmark writes one: the table's figures (entities by load)
/// joined row after row; the latency histograms already name their row;
/// every other figure of a row as `NAME@ROW`, as live names a row's kernel
/// counters. Events add up; the timeline is the first row's.
pub(crate) fn join_rows(wl: &WorkloadDef, rows: Vec<(String, SimOutcome)>) -> SimOutcome {
    let mut rows = rows.into_iter();
    let (first_label, mut joined) = rows.next().expect("a workload with rows has one at least");
    let mut metrics = Vec::new();
    let mut warnings = Vec::new();
    let mut add = |label: &str, out: &mut SimOutcome| {
        warnings.extend(out.result.warnings.drain(..).map(|w| format!("row {label}: {w}")));
        for mut m in out.result.metrics.drain(..) {
            if let MetricData::Entities { entity, labels, values } = &m.data {
                if entity == "load" {
                    let same = metrics.iter_mut().find(|j: &&mut Metric| j.name == m.name);
                    if let Some(Metric { data: MetricData::Entities { labels: l, values: v, .. }, .. }) = same {
                        l.extend(labels.iter().cloned());
                        v.extend(values.iter().copied());
                        continue;
                    }
                    metrics.push(m);
                    continue;
                }
            }
            if !m.name.contains('@') {
                m.name = format!("{}@{label}", m.name);
            }
            metrics.push(m);
        }
    };
    add(&first_label, &mut joined);
    for (label, mut out) in rows {
        add(&label, &mut out);
        joined.events += out.events;
        joined.fast_events += out.fast_events;
    }
    let r = &mut joined.result;
    // The workload's parameters, beside the run's own settings.
    let run: Vec<(String, Value)> = std::mem::take(&mut r.params).into_iter().filter(|(k, _)| k != "load").collect();
    r.params = wl.params.clone();
    r.params.extend(run);
    r.metrics = metrics;
    r.warnings = warnings;
    joined
}

#[cfg(test)]
mod tests {
    use crate::program::{Dur, Step};
    use crate::workload::build;
    use schedlab_core::MetricData;
    use serde_json::json;

    #[test]
    fn interactive_gains_x_and_gaming_tasks_and_interbench_loads() {
        let wl = build("interactive:audio=0,video=0,x=1,gaming=1,burn=0,video_load=2,x_load=1", 2).unwrap();
        let names: Vec<&str> = wl.tasks.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["x", "gaming", "video_load", "x_load"]);
        let x = &wl.tasks[0];
        assert_eq!((x.deadline_group.as_deref(), x.probe), (Some("x"), true));
        let Step::Loop(None, cycles) = &x.program[0] else { panic!() };
        let runs: Vec<u64> = cycles
            .iter()
            .filter_map(|s| if let Step::Run(Dur::Fixed(n)) = s { Some(n / 1_000_000) } else { None })
            .collect();
        assert_eq!(runs, (1..100).collect::<Vec<u64>>(), "0..99 ms in 100 cycles");
        assert_eq!(cycles.iter().filter(|s| matches!(s, Step::PeriodEnd)).count(), 100);
        assert!(wl.tasks[1].share && wl.tasks[1].deadline_group.is_none());
        assert!(wl.tasks[2..].iter().all(|t| !t.probe && t.deadline_group.is_none()), "loads are not measured");
        assert_eq!(wl.tasks[2].count, 2);
        assert_eq!(wl.headline, ["latency.x@video+x", "deadlines_met.x", "desired_cpu.gaming"]);
        // The defaults are the audio and video set the workload always had.
        let wl = build("interactive", 2).unwrap();
        assert_eq!(wl.tasks.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["audio", "video", "burn"]);
        assert!(build("interactive:audio=0,video=0", 2).unwrap_err().to_string().contains("x or gaming"));
    }

    #[test]
    fn a_combined_run_keeps_the_parameters_stored_runs_have() {
        let wl = build("interactive:burn=1", 2).unwrap();
        assert!(wl.rows.is_empty());
        for k in super::ROWS_ONLY {
            assert!(!wl.params.contains_key(k), "{k} is recorded, so stored runs no longer share the key");
        }
        assert_eq!((wl.params["burn"].clone(), wl.params["audio"].clone()), (json!(1), json!(1)));
    }

    #[test]
    fn rows_hold_the_measured_tasks_and_their_own_load() {
        let wl = build("interactive:audio=1,video=0,loads=none,burn,write,read,compile,read_miss=50", 2).unwrap();
        assert!(wl.tasks.is_empty(), "the rows run, not the workload itself");
        let labels: Vec<&str> = wl.rows.iter().map(|r| r.0.as_str()).collect();
        assert_eq!(labels, ["none", "burn", "write", "read", "compile"]);
        let names = |i: usize| wl.rows[i].1.tasks.iter().map(|t| (t.name.clone(), t.count)).collect::<Vec<_>>();
        let named = |v: &[(&str, u32)]| v.iter().map(|(n, c)| (n.to_string(), *c)).collect::<Vec<_>>();
        assert_eq!(names(0), named(&[("audio", 1)]));
        assert_eq!(names(1), named(&[("audio", 1), ("burn", 2)]), "one hog per CPU, as the live burn:N");
        assert_eq!(names(4), named(&[("audio", 1), ("burn", 2), ("write", 1), ("read", 1)]), "interbench's mix");
        // The writer: 25 us of CPU, then 100 us for the device; the reader misses every other block.
        let Step::Loop(None, w) = &wl.rows[2].1.tasks[1].program[0] else { panic!("a writer loops") };
        assert_eq!(w[..], [Step::Run(Dur::Fixed(25_000)), Step::Sleep(Dur::Fixed(100_000))]);
        let Step::Loop(None, r) = &wl.rows[3].1.tasks[1].program[0] else { panic!("a reader that misses loops") };
        assert_eq!(r[..], [Step::Run(Dur::Fixed(20_000)), Step::Sleep(Dur::Fixed(130_000))]);
        assert_eq!(wl.params["burn"], json!(1), "the size the rows used is recorded");
        assert_eq!(wl.headline[..2], ["latency.audio@none".to_string(), "latency.audio@burn".to_string()]);
        // A reader that never misses is a hog; burn= sizes the burn row when given.
        let wl = build("interactive:loads=read,burn,burn=3", 1).unwrap();
        assert!(matches!(wl.rows[0].1.tasks[2].program[..], [Step::Run(_)]));
        assert_eq!(wl.rows[1].1.tasks[2].count, 3);
        for (bad, says) in [("none,hackbench", "'hackbench' is neither"), ("burn,burn", "twice"), ("", "non-empty")] {
            let e = build(&format!("interactive:loads={bad}"), 1).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains("loads"), "{bad}: {e}");
        }
    }

    #[test]
    fn interactive_x_and_gaming_report_the_live_benchmarks_names() {
        let opts = crate::SimOptions { cpus: 1, duration_ns: 3_000_000_000, ..crate::SimOptions::default() };
        let out = crate::run("cfs", "interactive:audio=0,video=0,x=1,gaming=1,burn=0", &opts).unwrap();
        // The live benchmark's table: one entity per figure, labelled by the load row.
        for name in ["latency_mean.x", "latency_sd.x", "latency_max.x", "desired_cpu.x", "deadlines_met.x"] {
            let m = out.result.metric(name).unwrap_or_else(|| panic!("{name}, as the live benchmark names it"));
            let MetricData::Entities { entity, labels, .. } = &m.data else { panic!("{name} is not per load") };
            assert_eq!((entity.as_str(), labels.as_slice()), ("load", ["none".to_string()].as_slice()), "{name}");
        }
        assert!(out.result.metric("latency.x@none").is_some_and(|m| m.headline), "the histogram, as live names it");
        let pct = out.result.metric("deadlines_met.x").unwrap().summary().unwrap().mean;
        assert!((0.0..=100.0).contains(&pct), "{pct}");
        // Alone with X on one CPU, gaming gets what X leaves: some, not all.
        let share = out.result.metric("desired_cpu.gaming").expect("gaming's CPU").summary().unwrap().mean;
        assert!(share > 0.0 && share < 100.0, "{share}");
        assert!(out.result.metric("latency_mean.gaming").is_none(), "the model does not time gaming's chunks");
    }

    #[test]
    fn interactive_charges_skipped_periods_in_full() {
        // Audio asks 90 % of one CPU beside a hog: it overruns, and every
        // period of the 3 s (60 of 50 ms) is booked, skipped ones included.
        let opts = crate::SimOptions { cpus: 1, duration_ns: 3_000_000_000, ..crate::SimOptions::default() };
        let out = crate::run("cfs", "interactive:audio=1,video=0,burn=1,audio_pct=90", &opts).unwrap();
        let value = |n: &str| out.result.metric(n).unwrap_or_else(|| panic!("{n}")).summary().unwrap().mean;
        let MetricData::Histogram { histogram, .. } = &out.result.metric("latency.audio@burn").unwrap().data else {
            panic!("latency.audio@burn is a histogram")
        };
        assert!((58..=61).contains(&histogram.count()), "{} periods booked of 60", histogram.count());
        assert!(value("latency_max.audio") > 50e6, "a skipped period is charged past its own window");
        assert!(value("desired_cpu.audio") < 90.0 && value("deadlines_met.audio") < 50.0);
        // Alone it gets all it asks.
        let out = crate::run("cfs", "interactive:audio=1,video=0,burn=0,audio_pct=90", &opts).unwrap();
        let value = |n: &str| out.result.metric(n).unwrap_or_else(|| panic!("{n}")).summary().unwrap().mean;
        assert_eq!((value("desired_cpu.audio"), value("deadlines_met.audio")), (100.0, 100.0));
    }
}
