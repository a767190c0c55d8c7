//! Import results of other tools as runs, so their numbers sit beside
//! schedlab's in `show`, `compare` and reports. Parsing only: the caller reads
//! the file and stores the run.
//!
//! Formats:
//! - `cyclictest`: rt-tests `--json` output (file_version 1). Per-thread
//!   histograms become one latency histogram per thread plus a merged one.
//!   Samples beyond the `-h` range are not in the JSON (cycles exceed the
//!   bucket sum); they are recorded at the thread's exact max, an upper bound,
//!   and a warning says so.
//! - `schbench`: `-j` output. It holds percentiles, not histograms, so each
//!   percentile becomes a scalar metric.
//! - `hackbench`: plain text; every `Time: S` line is one repetition.
//! - `samples`: one latency per line (a unit must be given), e.g. a trace
//!   export; becomes a histogram.
//! - `schedlab`: the JSON interchange format itself.

use schedlab_core::{
    BenchResult, BenchStatus, Condition, Direction, LatencyHistogram, Metric, MetricData, Run, RunKind, RunStatus,
    SchedCondition, ToolInfo, SCHEMA_VERSION,
};
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportFormat {
    Cyclictest,
    Schbench,
    Hackbench,
    /// One value per line, in the given nanoseconds-per-unit.
    Samples {
        ns_per_unit: u64,
    },
    Schedlab,
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot tell the format of {0}: pass --format cyclictest|schbench|hackbench|samples|schedlab")]
    Unknown(String),
    #[error("{file} is not valid {format} output: {reason}")]
    Bad { file: String, format: &'static str, reason: String },
    #[error(
        "{file} was written by a newer schedlab (schema {found}, this build reads up to {supported}): upgrade schedlab"
    )]
    NewerSchema { file: String, found: u32, supported: u32 },
    #[error("{file}: {what} is {value}, which no measurement can be: fix or remove that value and import again")]
    BadValue { file: String, what: String, value: String },
}

/// Larger than any measured value (1e15 s is 30 million years, 1e15 ns 11
/// days for one latency, 1e15/s a petahertz); a sum of a few of them
/// overflowed a summary to infinity (found by fuzz_import: two hackbench
/// `Time: 1e308` lines).
const MAX_VALUE: f64 = 1e15;

fn first_huge(m: &Metric) -> Option<f64> {
    match &m.data {
        MetricData::Samples { values } | MetricData::Entities { values, .. } => {
            values.iter().copied().find(|v| *v > MAX_VALUE)
        }
        MetricData::Series { series } => series.values.iter().copied().find(|v| *v > MAX_VALUE),
        MetricData::Histogram { .. } => None,
    }
}

/// Sample counts of every histogram in a schedlab JSON value: beyond
/// [`MAX_SAMPLES`] they are corrupt, and summing them overflowed while the
/// histogram was read (found by fuzz_import).
fn check_histogram_counts(v: &Value) -> Result<(), String> {
    match v {
        Value::Object(o) => {
            if let (Some(Value::Array(buckets)), Some(overflow)) = (o.get("buckets"), o.get("overflow")) {
                let counts = buckets.iter().map(|b| b.get(1).and_then(Value::as_u64).unwrap_or(0));
                let total = counts.fold(overflow.as_u64().unwrap_or(0), u64::saturating_add);
                if total > MAX_SAMPLES {
                    return Err(format!(
                        "a histogram holds {total} samples, more than any run records: a corrupt count"
                    ));
                }
            }
            o.values().try_for_each(check_histogram_counts)
        }
        Value::Array(a) => a.iter().try_for_each(check_histogram_counts),
        _ => Ok(()),
    }
}

/// More samples than one file can hold for real (a year at 1 MHz is 3e13):
/// a corrupt count, and beyond it sums could overflow.
const MAX_SAMPLES: u64 = 1 << 53;

fn bad(file: &str, format: &'static str, reason: impl Into<String>) -> ImportError {
    ImportError::Bad { file: file.into(), format, reason: reason.into() }
}

/// Guess the format from the content.
pub fn detect(file: &str, text: &str) -> Result<ImportFormat, ImportError> {
    let head = text.trim_start();
    if head.starts_with('{') {
        if let Ok(v) = serde_json::from_str::<Value>(head) {
            if v.get("schema_version").is_some() && v.get("benchmarks").is_some() {
                return Ok(ImportFormat::Schedlab);
            }
            if v.get("thread").is_some() && v.get("file_version").is_some() {
                return Ok(ImportFormat::Cyclictest);
            }
            if v.get("normal").is_some() && v.get("int").is_some() {
                return Ok(ImportFormat::Schbench);
            }
        }
    }
    if text.lines().any(|l| l.trim_start().starts_with("Time:")) {
        return Ok(ImportFormat::Hackbench);
    }
    Err(ImportError::Unknown(file.into()))
}

fn import_run(tool: &str, version: Option<String>, host: String, started_unix_ms: i64, cmd: Vec<String>) -> Run {
    let info = ToolInfo { name: tool.into(), version: version.unwrap_or_else(|| "unknown".into()), git_rev: None };
    let mut run = Run::new(RunKind::Import, info, cmd, host, started_unix_ms);
    run.status = RunStatus::Complete;
    run.ended_unix_ms = Some(started_unix_ms);
    run
}

fn unknown_condition() -> Condition {
    // The foreign tool's own scheduling settings are not known; record the
    // default as requested and nothing as applied, which is the truth.
    Condition::Live { requested: SchedCondition::default(), applied: None, loads: vec![] }
}

/// Parse `text` (the content of `file`) into a run.
pub fn import(file: &str, text: &str, format: ImportFormat, now_unix_ms: i64) -> Result<Run, ImportError> {
    let run = parse(file, text, format, now_unix_ms)?;
    // One bad value would make the stored run unreadable, and every view of
    // the store with it: refuse it here, naming the metric.
    for b in &run.benchmarks {
        for m in &b.metrics {
            if let Some(v) = m.first_non_finite().or_else(|| m.first_negative()).or_else(|| first_huge(m)) {
                return Err(ImportError::BadValue {
                    file: file.into(),
                    what: format!("{} {}", b.key(), m.name),
                    value: v.to_string(),
                });
            }
            // A histogram's exact extremes must bracket its samples (a
            // schedlab JSON file can say anything; found by fuzz_import).
            if let MetricData::Histogram { histogram: h, .. } = &m.data {
                if let (Some(lo), Some(hi)) = (h.min(), h.max()) {
                    if lo > hi {
                        return Err(ImportError::BadValue {
                            file: file.into(),
                            what: format!("{} {} minimum", b.key(), m.name),
                            value: format!("{lo} ns, above its maximum {hi} ns,"),
                        });
                    }
                }
            }
        }
    }
    Ok(run)
}

fn parse(file: &str, text: &str, format: ImportFormat, now_unix_ms: i64) -> Result<Run, ImportError> {
    match format {
        ImportFormat::Cyclictest => cyclictest(file, text, now_unix_ms),
        ImportFormat::Schbench => schbench(file, text, now_unix_ms),
        ImportFormat::Hackbench => hackbench(file, text, now_unix_ms),
        ImportFormat::Samples { ns_per_unit } => samples(file, text, ns_per_unit, now_unix_ms),
        ImportFormat::Schedlab => {
            // Counts first: reading an absurd one into a histogram overflows.
            let v: Value = serde_json::from_str(text).map_err(|e| bad(file, "schedlab JSON", e.to_string()))?;
            check_histogram_counts(&v).map_err(|why| bad(file, "schedlab JSON", why))?;
            let run: Run = serde_json::from_str(text).map_err(|e| bad(file, "schedlab JSON", e.to_string()))?;
            if run.schema_version > SCHEMA_VERSION {
                return Err(ImportError::NewerSchema {
                    file: file.into(),
                    found: run.schema_version,
                    supported: SCHEMA_VERSION,
                });
            }
            let mut run = Run { id: None, ..run };
            // Schema 1 stored the simulator's per-task values as repetitions.
            for b in &mut run.benchmarks {
                for m in &mut b.metrics {
                    schedlab_core::model::upgrade_v1_metric(&b.name, m);
                }
            }
            run.schema_version = SCHEMA_VERSION;
            Ok(run)
        }
    }
}

fn cyclictest(file: &str, text: &str, now: i64) -> Result<Run, ImportError> {
    const F: &str = "cyclictest --json";
    let v: Value = serde_json::from_str(text).map_err(|e| bad(file, F, e.to_string()))?;
    let threads = v.get("thread").and_then(Value::as_object).ok_or_else(|| bad(file, F, "no \"thread\" object"))?;
    if threads.is_empty() {
        return Err(bad(file, F, "the \"thread\" object is empty: cyclictest measured no thread"));
    }
    // rt-tests 2.x writes some keys with a stray colon ("cmdline:"); accept both.
    let get_str = |k: &str| v.get(k).or_else(|| v.get(format!("{k}:"))).and_then(Value::as_str).map(String::from);
    let ns_per_bucket: u64 = if v.get("resolution_in_ns").and_then(Value::as_u64) == Some(1) { 1 } else { 1000 };
    let host = v.pointer("/sysinfo/nodename").and_then(Value::as_str).unwrap_or("unknown").to_string();
    let cmd: Vec<String> =
        get_str("cmdline").map(|c| c.split_whitespace().map(String::from).collect()).unwrap_or_default();
    let mut run = import_run("cyclictest", get_str("rt_test_version"), host, now, cmd.clone());
    run.env_start = Some(schedlab_core::Environment {
        kernel_release: v.pointer("/sysinfo/release").and_then(Value::as_str).map(String::from),
        kernel_version: v.pointer("/sysinfo/version").and_then(Value::as_str).map(String::from),
        ..Default::default()
    });
    let mut bench = BenchResult::new("cyclictest", unknown_condition(), now);
    bench.params.insert("source".into(), "import".into());
    if let Some(c) = cmd.get(1..) {
        bench.params.insert("args".into(), c.join(" ").into());
    }
    let mut all = LatencyHistogram::new();
    let mut per_thread = Vec::new();
    // Samples in the file so far; counts beyond MAX_SAMPLES are corrupt (and overflow).
    let mut total = 0u64;
    let to_ns = |us: u64, what: String| us.checked_mul(ns_per_bucket).ok_or_else(|| bad(file, F, what));
    let mut ids: Vec<(&String, &Value)> = threads.iter().collect();
    ids.sort_by_key(|(k, _)| k.parse::<u64>().unwrap_or(u64::MAX));
    for (id, t) in ids {
        let cycles = t
            .get("cycles")
            .and_then(Value::as_u64)
            .ok_or_else(|| bad(file, F, format!("thread {id} has no cycles")))?;
        let max_us = t.get("max").and_then(Value::as_u64).unwrap_or(0);
        let mut h = LatencyHistogram::new();
        let mut in_buckets = 0u64;
        let mut top_ns = 0;
        if let Some(buckets) = t.get("histogram").and_then(Value::as_object) {
            for (k, c) in buckets {
                let bucket: u64 = k.parse().map_err(|_| bad(file, F, format!("bucket '{k}' is not a number")))?;
                let count = c.as_u64().ok_or_else(|| bad(file, F, format!("bucket {k} count is not a number")))?;
                let ns = to_ns(bucket, format!("bucket {k} is beyond any latency"))?;
                h.record_n(ns, count);
                top_ns = top_ns.max(if count > 0 { ns } else { 0 });
                in_buckets = in_buckets.saturating_add(count);
            }
        }
        if in_buckets == 0 {
            return Err(bad(file, F, format!("thread {id} has no histogram: run cyclictest with -h (e.g. -h 1000)")));
        }
        // Found by tests/fuzz_import.rs: these overflowed, or were taken as they came.
        total = total.saturating_add(in_buckets.max(cycles));
        if total > MAX_SAMPLES {
            return Err(bad(
                file,
                F,
                format!("thread {id}: more samples than any run records ({total}): a corrupt count"),
            ));
        }
        if cycles < in_buckets {
            return Err(bad(
                file,
                F,
                format!("thread {id} counts {cycles} cycles but its histogram holds {in_buckets} samples"),
            ));
        }
        let beyond = cycles - in_buckets;
        let max_ns = to_ns(max_us, format!("thread {id}'s max {max_us} is beyond any latency"))?;
        if beyond > 0 && max_ns < top_ns {
            return Err(bad(
                file,
                F,
                format!("thread {id} has {beyond} samples beyond its histogram, but its max ({max_us} us) is below the histogram's top bucket"),
            ));
        }
        if beyond > 0 {
            h.record_n(max_ns, beyond);
            bench.warnings.push(format!(
                "thread {id}: {beyond} of {cycles} samples were beyond cyclictest's -h range; recorded at the exact max ({max_us} us), so the tail above them is an upper bound"
            ));
        }
        all.merge(&h);
        per_thread.push((id.clone(), h));
    }
    bench.metrics.push(Metric::histogram("latency", Direction::LowerIsBetter, all).headline());
    if per_thread.len() > 1 {
        for (id, h) in per_thread {
            bench.metrics.push(Metric::histogram(&format!("latency.thread{id}"), Direction::LowerIsBetter, h));
        }
    }
    bench.repetitions = 1;
    bench.status = BenchStatus::Complete;
    bench.ended_unix_ms = Some(now);
    run.benchmarks.push(bench);
    Ok(run)
}

fn schbench(file: &str, text: &str, now: i64) -> Result<Run, ImportError> {
    const F: &str = "schbench -j";
    let v: Value = serde_json::from_str(text).map_err(|e| bad(file, F, e.to_string()))?;
    let normal = v.get("normal").ok_or_else(|| bad(file, F, "no \"normal\" object"))?;
    let ints = v.get("int").and_then(Value::as_object).ok_or_else(|| bad(file, F, "no \"int\" object"))?;
    let s = |k: &str| normal.get(k).and_then(Value::as_str).map(String::from);
    let started = match ints.get("time").and_then(Value::as_i64) {
        None => now,
        Some(t) => t
            .checked_mul(1000)
            .filter(|ms| *ms >= 0)
            .ok_or_else(|| bad(file, F, format!("time {t} is not a Unix time in seconds")))?,
    };
    let cmd = s("cmdline").map(|c| c.split_whitespace().map(String::from).collect()).unwrap_or_default();
    let mut run = import_run("schbench", None, s("hostname").unwrap_or_else(|| "unknown".into()), started, cmd);
    run.env_start = Some(schedlab_core::Environment {
        kernel_release: s("version"),
        sched_ext: s("sched_ext"),
        ..Default::default()
    });
    let mut bench = BenchResult::new("schbench", unknown_condition(), started);
    if let Some(j) = s("jobname") {
        bench.params.insert("jobname".into(), j.into());
    }
    let mut keys: Vec<&String> = ints.keys().collect();
    keys.sort();
    for k in keys {
        let Some(val) = ints[k].as_f64() else { continue };
        let (unit, dir) = if k.starts_with("rps") {
            (schedlab_core::Unit::PerSecond, Direction::HigherIsBetter)
        } else if k.contains("latency") {
            (schedlab_core::Unit::Microseconds, Direction::LowerIsBetter)
        } else {
            continue;
        };
        let name = k.replace("_pct", "_p").replace(".0", "").replace("99.9", "999");
        let headline = matches!(name.as_str(), "wakeup_latency_p99" | "request_latency_p99" | "rps_p50");
        let m = Metric::samples(&name, unit, dir, vec![val]);
        bench.metrics.push(if headline { m.headline() } else { m });
    }
    if bench.metrics.is_empty() {
        return Err(bad(file, F, "no latency or rps values found"));
    }
    bench.repetitions = 1;
    bench.status = BenchStatus::Complete;
    bench
        .warnings
        .push("schbench JSON holds percentiles only; they are imported as single values, not distributions".into());
    run.benchmarks.push(bench);
    Ok(run)
}

fn hackbench(file: &str, text: &str, now: i64) -> Result<Run, ImportError> {
    const F: &str = "hackbench";
    let mut times = Vec::new();
    let mut bench = BenchResult::new("hackbench", unknown_condition(), now);
    for line in text.lines().map(str::trim) {
        if let Some(t) = line.strip_prefix("Time:") {
            let secs: f64 = t.trim().parse().map_err(|_| bad(file, F, format!("bad time in '{line}'")))?;
            times.push(secs);
        } else if let Some(rest) = line.strip_prefix("Running in ") {
            // "Running in process mode with 10 groups using 40 file descriptors each (== 400 tasks)"
            let words: Vec<&str> = rest.split_whitespace().collect();
            if let Some(mode) = words.first() {
                bench.params.insert("mode".into(), (*mode).into());
            }
            // "groups" may come first in a damaged line (fuzz_import found the underflow).
            if let Some(i) = words.iter().position(|w| *w == "groups").filter(|&i| i > 0) {
                if let Some(g) = words.get(i - 1).and_then(|g| g.parse::<u64>().ok()) {
                    bench.params.insert("groups".into(), g.into());
                }
            }
        } else if let Some(rest) = line.strip_prefix("Each sender will pass ") {
            if let Some(l) = rest.split_whitespace().next().and_then(|l| l.parse::<u64>().ok()) {
                bench.params.insert("loops".into(), l.into());
            }
        }
    }
    if times.is_empty() {
        return Err(bad(file, F, "no 'Time:' line found"));
    }
    bench.repetitions = times.len() as u32;
    bench
        .metrics
        .push(Metric::samples("total_time", schedlab_core::Unit::Seconds, Direction::LowerIsBetter, times).headline());
    bench.status = BenchStatus::Complete;
    let mut run = import_run("hackbench", None, "unknown".into(), now, vec![]);
    run.benchmarks.push(bench);
    Ok(run)
}

fn samples(file: &str, text: &str, ns_per_unit: u64, now: i64) -> Result<Run, ImportError> {
    const F: &str = "samples (one value per line)";
    let mut h = LatencyHistogram::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let v: f64 = t.parse().map_err(|_| bad(file, F, format!("line {} is not a number: '{t}'", i + 1)))?;
        if !(v.is_finite() && v >= 0.0) {
            return Err(bad(file, F, format!("line {} is not a non-negative latency: '{t}'", i + 1)));
        }
        h.record((v * ns_per_unit as f64).round() as u64);
    }
    if h.is_empty() {
        return Err(bad(file, F, "no values"));
    }
    let mut bench = BenchResult::new("samples", unknown_condition(), now);
    bench.params.insert("file".into(), file.rsplit('/').next().unwrap_or(file).into());
    bench.metrics.push(Metric::histogram("latency", Direction::LowerIsBetter, h).headline());
    bench.repetitions = 1;
    bench.status = BenchStatus::Complete;
    let mut run = import_run("samples", None, "unknown".into(), now, vec![]);
    run.benchmarks.push(bench);
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CYCLICTEST: &str = r##"{
      "file_version": 1, "cmdline:": "cyclictest -m -p 80 -i 1000 -l 200 -h 100 -q --json=/tmp/ct.json",
      "rt_test_version:": "2.40", "start_time": "x", "end_time": "y", "return_code": 0,
      "sysinfo": {"sysname": "Linux", "nodename": "vm", "release": "6.18.44", "version": "#1 SMP PREEMPT_DYNAMIC", "machine": "x86_64", "realtime": 0},
      "num_threads": 1, "resolution_in_ns": 0,
      "thread": {"0": {"histogram": {"15": 1, "16": 2, "17": 21, "18": 52, "19": 46, "20": 25, "21": 24, "22": 7, "23": 5, "24": 4, "25": 1, "26": 2, "27": 2, "28": 1, "29": 2, "31": 1, "42": 1, "48": 1},
                 "cycles": 200, "min": 15, "max": 484, "avg": 22.75, "cpu": 0, "node": 0}}}"##;

    #[test]
    fn cyclictest_json_becomes_a_histogram_with_overflow_noted() {
        assert_eq!(detect("f", CYCLICTEST).unwrap(), ImportFormat::Cyclictest);
        let run = import("ct.json", CYCLICTEST, ImportFormat::Cyclictest, 5).unwrap();
        assert_eq!(run.kind, RunKind::Import);
        assert_eq!(run.tool.version, "2.40");
        assert_eq!(run.env_start.as_ref().unwrap().kernel_release.as_deref(), Some("6.18.44"));
        let b = &run.benchmarks[0];
        let s = b.metric("latency").unwrap().summary().unwrap();
        assert_eq!(s.n, 200, "cycles, not just the bucket sum");
        assert_eq!(s.min, 15_000.0);
        assert_eq!(s.max, 484_000.0);
        assert!(b.warnings[0].contains("2 of 200"), "{:?}", b.warnings);
        // The two overflowed samples sit at the max, so the mean is an upper bound of
        // cyclictest's own average (22.75 us), which knew their true values.
        assert!(s.mean / 1000.0 > 22.75 && s.mean / 1000.0 < 25.0, "{}", s.mean);
    }

    #[test]
    fn cyclictest_without_histogram_is_refused_with_a_hint() {
        let text = CYCLICTEST.replace(r#""histogram": {"15""#, r#""nohist": {"15""#);
        let err = import("ct.json", &text, ImportFormat::Cyclictest, 0).unwrap_err();
        assert!(err.to_string().contains("-h"), "{err}");
    }

    #[test]
    fn schbench_percentiles_become_scalars() {
        let text = r#"{"normal": {"version": "6.9", "hostname": "box", "sched_ext": "disabled", "cmdline": "schbench -r 10 -j x"},
          "int": {"time": 1700000000, "wakeup_latency_pct20.0": 5, "wakeup_latency_pct50.0": 9, "wakeup_latency_pct90.0": 14,
                  "wakeup_latency_pct99.0": 40, "wakeup_latency_pct99.9": 900, "wakeup_latency_min": 1, "wakeup_latency_max": 5000,
                  "rps_pct20.0": 100, "rps_pct50.0": 110, "rps_pct90.0": 120, "rps_min": 1, "rps_max": 130, "runtime": 10}}"#;
        assert_eq!(detect("f", text).unwrap(), ImportFormat::Schbench);
        let run = import("s.json", text, ImportFormat::Schbench, 0).unwrap();
        let b = &run.benchmarks[0];
        assert_eq!(b.metric("wakeup_latency_p99").unwrap().summary().unwrap().mean, 40.0);
        assert_eq!(b.metric("wakeup_latency_p999").unwrap().summary().unwrap().mean, 900.0);
        assert!(b.metric("wakeup_latency_p99").unwrap().headline);
        assert_eq!(b.metric("rps_p50").unwrap().direction, Direction::HigherIsBetter);
        assert_eq!(run.started_unix_ms, 1_700_000_000_000);
    }

    #[test]
    fn hackbench_time_lines_are_repetitions() {
        let text = "Running in process mode with 10 groups using 40 file descriptors each (== 400 tasks)\nEach sender will pass 100 messages of 100 bytes\nTime: 0.250\nTime: 0.270\n";
        assert_eq!(detect("f", text).unwrap(), ImportFormat::Hackbench);
        let run = import("hb.txt", text, ImportFormat::Hackbench, 0).unwrap();
        let b = &run.benchmarks[0];
        assert_eq!(b.key(), "hackbench groups=10 loops=100 mode=process");
        assert_eq!(b.metric("total_time").unwrap().summary().unwrap().n, 2);
        assert!(import("x", "Time: soon", ImportFormat::Hackbench, 0).is_err());
        // A schema-1 run: the simulator's per-task values become entities.
        let mut v1 = Run::new(
            RunKind::Sim,
            ToolInfo { name: "schedlab".into(), version: "0".into(), git_rev: None },
            vec![],
            "h".into(),
            0,
        );
        v1.schema_version = 1;
        let mut b = BenchResult::new("sim:hogs", unknown_condition(), 0);
        b.metrics.push(Metric::samples(
            "cpu_share",
            schedlab_core::Unit::Percent,
            Direction::Neutral,
            vec![60.0, 40.0],
        ));
        v1.benchmarks.push(b);
        let back = import("v1.json", &serde_json::to_string(&v1).unwrap(), ImportFormat::Schedlab, 0).unwrap();
        assert_eq!(back.schema_version, SCHEMA_VERSION);
        assert_eq!(back.benchmarks[0].metrics[0].data.level(), schedlab_core::Level::Entity);
        // Issue 12: these were stored and made the whole store unreadable.
        for bad in ["Time: NaN", "Time: inf", "Time: 1e400", "Time: -5"] {
            let e = import("h", &format!("{bad}\n"), ImportFormat::Hackbench, 0).unwrap_err().to_string();
            assert!(e.contains("hackbench total_time") && e.contains("no measurement can be"), "{bad}: {e}");
        }
    }

    #[test]
    fn damaged_files_found_by_fuzzing_are_refused_not_panicked_on() {
        // tests/fuzz_import.rs found each: a panic (overflow, underflow) or a
        // value accepted that no measurement can be.
        let e = |text: &str, f| import("f", text, f, 0).unwrap_err().to_string();
        assert!(import("h", "Running in groups\nTime: 1\n", ImportFormat::Hackbench, 0).is_ok());
        assert!(e("Time: 1e308\nTime: 1e308\n", ImportFormat::Hackbench).contains("no measurement can be"));
        let huge = CYCLICTEST.replace(r#""15": 1,"#, r#""15": 18446744073709551615,"#);
        assert!(e(&huge, ImportFormat::Cyclictest).contains("a corrupt count"));
        let few = CYCLICTEST.replace(r#""cycles": 200"#, r#""cycles": 100"#);
        assert!(e(&few, ImportFormat::Cyclictest).contains("counts 100 cycles but its histogram holds 198"));
        let low_max = CYCLICTEST.replace(r#""max": 484"#, r#""max": 0"#);
        assert!(e(&low_max, ImportFormat::Cyclictest).contains("below the histogram's top bucket"));
        let far = CYCLICTEST.replace(r#""48": 1"#, r#""18446744073709551615": 1"#);
        assert!(e(&far, ImportFormat::Cyclictest).contains("beyond any latency"));
        let sb = r#"{"normal": {}, "int": {"time": 9223372036854775807, "rps_pct50.0": 5}}"#;
        assert!(e(sb, ImportFormat::Schbench).contains("not a Unix time"));
        let run = import("s", "5\n7\n", ImportFormat::Samples { ns_per_unit: 1 }, 0).unwrap();
        let json = serde_json::to_string(&run).unwrap();
        let overflow = json.replace(r#""overflow":0"#, r#""overflow":18446744073709551615"#);
        assert!(e(&overflow, ImportFormat::Schedlab).contains("a corrupt count"));
        let inverted = json.replace(r#""min_ns":5"#, r#""min_ns":9"#);
        assert!(e(&inverted, ImportFormat::Schedlab).contains("above its maximum"));
    }

    #[test]
    fn plain_samples_and_schedlab_json() {
        let run = import("lat.txt", "# us\n10\n20.5\n30\n", ImportFormat::Samples { ns_per_unit: 1000 }, 0).unwrap();
        let s = run.benchmarks[0].metric("latency").unwrap().summary().unwrap();
        assert_eq!((s.n, s.min, s.max), (3, 10_000.0, 30_000.0));
        let err = import("lat.txt", "10\nten\n", ImportFormat::Samples { ns_per_unit: 1 }, 0).unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");

        let json = serde_json::to_string(&run).unwrap();
        assert_eq!(detect("r.json", &json).unwrap(), ImportFormat::Schedlab);
        let back = import("r.json", &json, ImportFormat::Schedlab, 0).unwrap();
        assert_eq!(back.benchmarks, run.benchmarks);
        let newer = json.replace("\"schema_version\":2", "\"schema_version\":99");
        assert!(matches!(import("r.json", &newer, ImportFormat::Schedlab, 0), Err(ImportError::NewerSchema { .. })));
        assert!(matches!(detect("x", "hello"), Err(ImportError::Unknown(_))));
    }
}
