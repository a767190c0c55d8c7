//! The `interactive` workload's rows (`loads=`, the live benchmark's loads):
//! one table with a row per load under the live benchmark's names, and the
//! write and compile loads delaying audio as they should.

use schedlab_core::MetricData;
use schedlab_sim::{run, run_seeds, SimOptions, SimOutcome};

const ROWS: [&str; 7] = ["none", "video", "x", "burn", "write", "read", "compile"];

fn opts(cpus: u32, secs: u64) -> SimOptions {
    SimOptions { cpus, duration_ns: secs * 1_000_000_000, ..SimOptions::default() }
}

/// The value of entity metric `name` in row `load`.
fn at(out: &SimOutcome, name: &str, load: &str) -> f64 {
    let m = out.result.metric(name).unwrap_or_else(|| panic!("{name} missing"));
    let MetricData::Entities { entity, labels, values } = &m.data else { panic!("{name} is not per load") };
    assert_eq!(entity, "load");
    let i = labels.iter().position(|l| l == load).unwrap_or_else(|| panic!("{name} has no row {load}: {labels:?}"));
    values[i]
}

#[test]
fn loads_give_the_live_benchmarks_table_a_row_per_load() {
    let spec = format!("interactive:audio=1,video=1,loads={}", ROWS.join(","));
    let out = run("cfs", &spec, &opts(2, 2)).unwrap();
    for t in ["audio", "video"] {
        for name in ["latency_mean", "latency_sd", "latency_max", "desired_cpu", "deadlines_met"] {
            let m = out.result.metric(&format!("{name}.{t}")).unwrap();
            let MetricData::Entities { labels, values, .. } = &m.data else { panic!("{name}.{t} is not per load") };
            assert_eq!(labels, &ROWS.map(String::from), "{name}.{t}: one row per load, in the order given");
            assert!(values.iter().all(|v| v.is_finite() && *v >= 0.0), "{name}.{t}: {values:?}");
        }
        for load in ROWS {
            let h = out.result.metric(&format!("latency.{t}@{load}")).unwrap_or_else(|| panic!("{t}@{load}"));
            assert!(h.headline && matches!(h.data, MetricData::Histogram { .. }), "latency.{t}@{load}");
        }
    }
    // Every other figure of a row is named by it, as live names a row's counters.
    assert!(out.result.metric("context_switches@burn").is_some());
    assert!(out.result.metric("context_switches").is_none(), "no figure pooled over the rows");
    // The rows' loads are what they say: burn keeps both CPUs busy, none does not.
    let busy = |load: &str| out.result.metric(&format!("cpu_busy@{load}")).unwrap().summary().unwrap().mean;
    assert!(busy("burn") > 99.0 && busy("compile") > 99.0, "{} {}", busy("burn"), busy("compile"));
    let alone = (2.5 / 50.0 + 0.4) * 100.0 / 2.0;
    assert!((busy("none") - alone).abs() < 2.0, "audio and video alone: {} % of 2 CPUs", busy("none"));
    // A writer uses 25 us of every 125 us: a fifth of a CPU more than none.
    assert!((busy("write") - busy("none") - 10.0).abs() < 3.0, "write {} none {}", busy("write"), busy("none"));
    assert_eq!(out.result.params["loads"], ROWS.join(","));
}

#[test]
fn the_write_and_compile_loads_delay_audio_under_o1() {
    // One CPU, audio alone in each row: under none it never waits for a
    // CPU. O(1) gives a writer (asleep 80 % of the time) the same top bonus
    // as audio, and equal priorities do not preempt: audio waits out the
    // writer's block. Compile adds two hogs, which audio preempts at once
    // (their priority has fallen), but the writer's blocks stay.
    let spec = "interactive:audio=1,video=0,loads=none,write,compile";
    let out = run("o1", spec, &opts(1, 10)).unwrap();
    let mean = |load: &str| at(&out, "latency_mean.audio", load);
    assert!(mean("write") > mean("none"), "write {} none {}", mean("write"), mean("none"));
    assert!(mean("compile") > mean("none"), "compile {} none {}", mean("compile"), mean("none"));
    let max = |load: &str| at(&out, "latency_max.audio", load);
    assert!(max("compile") >= max("none") && max("write") > max("none"));
    let met = |load: &str| at(&out, "deadlines_met.audio", load);
    assert!(met("compile") <= met("none") && met("none") == 100.0);
}

#[test]
fn the_compile_load_costs_audio_more_than_write_and_write_more_than_none_under_cfs() {
    // CFS places a waking audio task half a latency period ahead of the
    // others, so its wait stays short; it still grows with the load.
    let spec = "interactive:audio=1,video=0,loads=none,write,compile";
    let out = run("cfs", spec, &opts(1, 10)).unwrap();
    let mean = |load: &str| at(&out, "latency_mean.audio", load);
    let (none, write, compile) = (mean("none"), mean("write"), mean("compile"));
    assert!(compile > write && write > none, "none {none} write {write} compile {compile}");
    assert_eq!(at(&out, "desired_cpu.audio", "none"), 100.0);
}

#[test]
fn rows_are_deterministic_per_seed_and_the_combined_form_is_unchanged() {
    let spec = "interactive:audio=1,video=0,loads=none,burn,read_miss=100";
    let a = run_seeds("o1", spec, &opts(1, 2), 2).unwrap();
    let b = run_seeds("o1", spec, &opts(1, 2), 2).unwrap();
    assert_eq!(a[0].result.metrics, b[0].result.metrics);
    assert_eq!(a[0].result.params["burn"], 1, "the burn row's size is recorded");
    // The one-row form: its label and parameters are those stored runs have.
    let one = run("cfs", "interactive:audio=1,video=0,burn=1", &opts(1, 2)).unwrap();
    assert!(one.result.metric("latency.audio@burn").is_some() && one.result.metric("context_switches").is_some());
    assert!(!one.result.params.contains_key("loads"), "{:?}", one.result.params.keys());
}
