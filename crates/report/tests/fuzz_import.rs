//! Property tests over every importer (`import::detect` and `import::import`
//! for cyclictest, schbench, hackbench, plain samples and schedlab JSON), fed
//! arbitrary text and valid files with their numbers, keys and lines
//! replaced by extreme, negative, fractional and malformed ones.
//!
//! The properties: no panic; an imported run's values are finite and
//! non-negative (every metric schedlab knows is a time, rate, count or
//! share), its summaries compute, and it survives the store's JSON round
//! trip (what `import` then does with it).
//!
//! 256 cases per property by default; `PROPTEST_CASES=20000 cargo test -p
//! schedlab-report --test fuzz_import` runs longer (docs/testing.md).

use proptest::prelude::*;
use schedlab_core::{MetricData, Run};
use schedlab_report::import::{detect, import, ImportFormat};

const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "15",
    "100",
    "1000",
    "1.5",
    "-0.0",
    "1e308",
    "-1e308",
    "1e400",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "-9223372036854775808",
    "4294967296",
    "null",
    "\"7\"",
    "true",
    "{}",
    "[]",
];

/// A cyclictest --json file with each number a placeholder.
const CYCLICTEST: &str = r#"{"file_version": 1, "cmdline:": "cyclictest -m -p 80 -h 100 --json=x",
  "rt_test_version:": "2.40", "sysinfo": {"nodename": "vm", "release": "6.8"}, "num_threads": 2,
  "resolution_in_ns": @,
  "thread": {"0": {"histogram": {"15": @, "@": @, "42": 1}, "cycles": @, "min": 15, "max": @},
             "@": {"histogram": {"@": @}, "cycles": @, "max": @}}}"#;

/// A schbench -j file with each number a placeholder.
const SCHBENCH: &str = r#"{"normal": {"version": "6.9", "hostname": "box", "cmdline": "schbench -j x"},
  "int": {"time": @, "wakeup_latency_pct50.0": @, "wakeup_latency_pct99.0": @, "request_latency_pct99.0": @,
          "rps_pct50.0": @, "rps_min": @, "runtime": @}}"#;

/// Replace each `@` with one of `values`.
fn fill(template: &'static str) -> impl Strategy<Value = String> {
    let holes = template.matches('@').count();
    proptest::collection::vec(proptest::sample::select(NUMBERS), holes).prop_map(move |vals| {
        let mut out = String::new();
        let mut vals = vals.into_iter();
        for (i, piece) in template.split('@').enumerate() {
            if i > 0 {
                let v = vals.next().unwrap();
                // Keys must stay strings: a hole inside quotes takes the bare text.
                out.push_str(if out.ends_with('"') { v.trim_matches('"') } else { v });
            }
            out.push_str(piece);
        }
        out
    })
}

/// hackbench output: its own lines with odd numbers, cut short or reordered.
fn hackbench_text() -> impl Strategy<Value = String> {
    let n = proptest::sample::select(NUMBERS);
    let line = prop_oneof![
        n.prop_map(|v| format!("Time: {v}")),
        proptest::sample::select(NUMBERS).prop_map(|v| format!(
            "Running in process mode with {v} groups using 40 file descriptors each (== 400 tasks)"
        )),
        proptest::sample::select(NUMBERS).prop_map(|v| format!("Each sender will pass {v} messages of 100 bytes")),
        proptest::sample::select(vec![
            "Running in groups",
            "Running in ",
            "Each sender will pass ",
            "Time:",
            "Time: ",
            "groups",
            "Running in thread mode with groups"
        ])
        .prop_map(str::to_string),
        "[ -~]{0,30}",
    ];
    proptest::collection::vec(line, 0..6).prop_map(|l| l.join("\n"))
}

fn samples_text() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        proptest::sample::select(NUMBERS).prop_map(str::to_string),
        proptest::sample::select(vec!["# comment", "", "  ", "NaN", "inf", "-inf", " 5 ", "1e-300", "5us"])
            .prop_map(str::to_string),
        any::<f64>().prop_map(|v| v.to_string()),
    ];
    proptest::collection::vec(line, 0..8).prop_map(|l| l.join("\n"))
}

/// A valid schedlab JSON run (an imported hackbench result and a simulated
/// one, with a histogram and per-task values), then numbers swapped.
fn schedlab_json() -> impl Strategy<Value = String> {
    let hb = import("hb", "Time: 0.25\nTime: 0.5\n", ImportFormat::Hackbench, 0).unwrap();
    let o = schedlab_sim::SimOptions { duration_ns: 50_000_000, ..Default::default() };
    let mut sim = hb.clone();
    sim.benchmarks = vec![schedlab_sim::run("cfs", "wakeup[samples=5,interval=2ms,groups=1]", &o).unwrap().result];
    sim.benchmarks.push(schedlab_sim::run("cfs", "hogs", &o).unwrap().result);
    let texts = [serde_json::to_string(&hb).unwrap(), serde_json::to_string(&sim).unwrap()];
    (
        proptest::sample::select(texts.to_vec()),
        proptest::collection::vec((any::<prop::sample::Index>(), proptest::sample::select(NUMBERS)), 1..4),
    )
        .prop_map(|(text, swaps)| {
            // The numbers of the text, by their byte ranges.
            let b = text.as_bytes();
            let mut spans = Vec::new();
            let mut i = 0;
            while i < b.len() {
                if b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_alphanumeric() && b[i - 1] != b'_') {
                    let start = if i > 0 && b[i - 1] == b'-' { i - 1 } else { i };
                    let mut j = i;
                    while j < b.len() && (b[j].is_ascii_digit() || b".eE+-".contains(&b[j])) {
                        j += 1;
                    }
                    if j == b.len() || !b[j].is_ascii_alphabetic() {
                        spans.push((start, j));
                    }
                    i = j;
                } else {
                    i += 1;
                }
            }
            let mut out = text.clone();
            let mut picks: Vec<(usize, usize, &str)> = swaps
                .iter()
                .map(|(at, v)| {
                    let (s, e) = spans[at.index(spans.len())];
                    (s, e, *v)
                })
                .collect();
            picks.sort_by_key(|p| std::cmp::Reverse(p.0));
            picks.dedup_by_key(|p| p.0);
            for (s, e, v) in picks {
                out.replace_range(s..e, v);
            }
            out
        })
}

/// What an accepted run must satisfy.
fn check(run: &Run, what: &str) {
    for b in &run.benchmarks {
        for m in &b.metrics {
            let values: Vec<f64> = match &m.data {
                MetricData::Samples { values } | MetricData::Entities { values, .. } => values.clone(),
                MetricData::Series { series } => series.values.clone(),
                MetricData::Histogram { histogram, .. } => {
                    let (lo, hi) = (histogram.min().unwrap_or(0), histogram.max().unwrap_or(0));
                    assert!(lo <= hi, "{what}: {} min {lo} > max {hi}", m.name);
                    vec![histogram.mean().unwrap_or(0.0), histogram.stdev().unwrap_or(0.0)]
                }
            };
            for v in values {
                assert!(v.is_finite() && v >= 0.0, "{what}: {} {} = {v}", b.name, m.name);
            }
            if let Some(s) = m.summary() {
                assert!(s.mean.is_finite() && s.max.is_finite(), "{what}: {} summary {s:?}", m.name);
            }
        }
    }
    // The store keeps a run as this JSON; it must read back.
    let json = serde_json::to_string(run).unwrap();
    let back = import("roundtrip", &json, ImportFormat::Schedlab, 0)
        .unwrap_or_else(|e| panic!("{what}: an accepted run does not read back: {e}"));
    assert_eq!(back.benchmarks, run.benchmarks, "{what}");
}

fn try_all(text: &str) {
    let _ = detect("f", text);
    let formats = [
        ImportFormat::Cyclictest,
        ImportFormat::Schbench,
        ImportFormat::Hackbench,
        ImportFormat::Samples { ns_per_unit: 1 },
        ImportFormat::Samples { ns_per_unit: 1_000_000_000 },
        ImportFormat::Schedlab,
    ];
    for f in formats {
        if let Ok(run) = import("f", text, f, 0) {
            check(&run, &format!("{f:?} of {text:?}"));
        }
    }
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics_any_importer(s in any::<String>()) {
        try_all(&s);
    }

    #[test]
    fn cyclictest_with_odd_numbers(text in fill(CYCLICTEST)) {
        try_all(&text);
    }

    #[test]
    fn schbench_with_odd_numbers(text in fill(SCHBENCH)) {
        try_all(&text);
    }

    #[test]
    fn hackbench_with_odd_lines(text in hackbench_text()) {
        try_all(&text);
    }

    #[test]
    fn samples_with_odd_lines(text in samples_text()) {
        try_all(&text);
    }

    #[test]
    fn schedlab_json_with_odd_numbers(text in schedlab_json()) {
        try_all(&text);
    }
}
