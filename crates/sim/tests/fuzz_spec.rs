//! Property tests over the simulator's parsers: `name[key=value]` policy and
//! workload specs, their values, and JSON workload files, each fed arbitrary,
//! mutated-valid and structured input. The properties: no panic anywhere
//! (parsing, building, a short run), a parsed spec's canonical form parses
//! back to it, and an accepted spec runs to a result whose values are finite
//! and non-negative, or is refused with a message.
//!
//! 256 cases per property by default (proptest's); `PROPTEST_CASES=20000
//! cargo test -p schedlab-sim --test fuzz_spec` runs longer (docs/testing.md).

use proptest::prelude::*;
use schedlab_core::MetricData;
use schedlab_sim::spec::{fmt_ns, parse_ns, Spec};
use schedlab_sim::{check_run, parse_workload_file, policies, run, workloads, SimError, SimOptions, SimOutcome};

/// Values at and around every bound the simulator's specs use, plus junk.
const VALUES: &[&str] = &[
    "0",
    "1",
    "2",
    "4",
    "5",
    "9",
    "10",
    "15",
    "16",
    "99",
    "100",
    "101",
    "127",
    "255",
    "256",
    "1000",
    "1024",
    "1025",
    "10000",
    "100000",
    "999999",
    "1000000",
    "1000001",
    "1000000000",
    "1000000001",
    "10000000000",
    "100000000000",
    "1000000000000",
    "2000000000000",
    "1000000000000000",
    "18446744073709551615",
    "18446744073709551616",
    "-1",
    "1us",
    "999ns",
    "1ms",
    "1.5ms",
    "6ms",
    "1s",
    "10s",
    "100s",
    "1e3",
    "0x10",
    "",
    "abc",
    "on",
    "true",
    "1,2",
    "0,5,10",
    "-20,19",
    "0:5",
    "1_000",
    "_1",
    "1__0",
    "nan",
    "infs",
    "1e30s",
    "-0s",
    "0.5ns",
];

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(VALUES).prop_map(str::to_string),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        2 => (0u64..20_000_000_000).prop_map(|n| n.to_string()),
        1 => "[0-9a-z_.,:-]{0,12}",
    ]
}

/// A spec built from real names and keys (so most of it gets past the
/// parser and reaches the values' checks), with some unknown keys.
fn structured(names: Vec<(String, Vec<String>)>) -> impl Strategy<Value = String> {
    proptest::sample::select(names).prop_flat_map(|(name, keys)| {
        let mut keys = keys;
        keys.push("bogus".into());
        let pair = (proptest::sample::select(keys), value());
        proptest::collection::vec(pair, 0..4).prop_map(move |kv| {
            let mut seen = Vec::new();
            let body: Vec<String> = kv
                .into_iter()
                .filter(|(k, _)| {
                    let new = !seen.contains(k);
                    seen.push(k.clone());
                    new
                })
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            if body.is_empty() {
                name.clone()
            } else {
                format!("{name}[{}]", body.join(","))
            }
        })
    })
}

fn policy_names() -> Vec<(String, Vec<String>)> {
    let all = policies();
    let rt: Vec<String> =
        all.iter().filter(|p| p.name == "rt").flat_map(|p| p.tunables.iter().map(|t| t.key.to_string())).collect();
    all.into_iter()
        .filter(|p| p.name != "rt")
        .map(|p| {
            let mut keys: Vec<String> = p.tunables.iter().map(|t| t.key.to_string()).collect();
            keys.extend(rt.iter().cloned());
            (p.name.to_string(), keys)
        })
        .collect()
}

fn workload_names() -> Vec<(String, Vec<String>)> {
    workloads()
        .into_iter()
        .map(|w| (w.name.to_string(), w.params.iter().map(|p| p.name.to_string()).collect()))
        .collect()
}

/// A valid spec with random edits: characters inserted, deleted or replaced.
fn mutated(valid: &'static [&'static str]) -> impl Strategy<Value = String> {
    let edit = (any::<prop::sample::Index>(), 0u8..3, proptest::sample::select(&b"[]=,_-.:0129az ms\x00\xff"[..]));
    (proptest::sample::select(valid), proptest::collection::vec(edit, 1..4)).prop_map(|(v, edits)| {
        let mut b = v.as_bytes().to_vec();
        for (at, op, c) in edits {
            let i = at.index(b.len() + 1);
            match op {
                0 => b.insert(i, c),
                1 if i < b.len() => {
                    b.remove(i);
                }
                _ if i < b.len() => b[i] = c,
                _ => b.push(c),
            }
        }
        String::from_utf8_lossy(&b).into_owned()
    })
}

const VALID_POLICIES: &[&str] = &[
    "cfs[sched_latency=6ms,min_granularity=750000]",
    "eevdf[base_slice=3ms,run_to_parity=0]",
    "o1[def_timeslice=100ms,min_timeslice=5ms]",
    "4bsd[slice_stat_ticks=12,rq_ppq=1]",
    "ule[slice_stat_ticks=12,interact=30]",
    "nicksched[min_timeslice=1ms]",
    "linux24[proc_change_penalty=15]",
    "staircase[rr_interval=6ms,rt_period=1s,rt_runtime=950ms]",
    "ingo_ll[unacceptable_ia_latency=150us,acceptability_factor=8,average_latency=off]",
    "fixedprio[base_slice=20ms]",
    "bfs[rr_interval=10ms,sticky=off,skiplist=on,muqss=on]",
    "ule1[slice_min=10ms,slice_max=140ms,switch_locks=4,ipi_locks=2,steal=off]",
];

const VALID_WORKLOADS: &[&str] = &[
    "hackbench[groups=1,loops=3]",
    "wakeup[samples=5,interval=1ms,groups=1]",
    "hogs[nice=0,5,10]",
    "interactive[audio=1,video=1,burn=1]",
    "forkstorm[parents=2,children=5]",
    "yield[yielders=2,hogs=1,work=100us]",
];

/// Tasks of every kind a policy handles: weighted hogs, a sleeper, a
/// channel pair, a yielder, a forker and its children, FIFO and RR tasks.
const MIX: &str = r#"{"name":"mix","tasks":[
    {"name":"hog0","share":true,"program":[{"run":"100s"}]},
    {"name":"hog19","nice":19,"program":[{"run":"100s"}]},
    {"name":"hogm20","nice":-20,"program":[{"run":"100s"}]},
    {"name":"sleeper","program":[{"loop":"forever","do":[{"run":"1ms"},{"sleep":{"exp":"5ms"}}]}]},
    {"name":"ping","program":[{"loop":"forever","do":[{"run":"50us"},{"send":"a"},{"recv":"b"}]}]},
    {"name":"pong","program":[{"loop":"forever","do":[{"recv":"a"},{"run":"80us"},{"send":"b"}]}]},
    {"name":"yielder","program":[{"loop":"forever","do":[{"run":"200us"},"yield",{"nice":5},{"run":"1ms"},{"nice":0}]}]},
    {"name":"forker","program":[{"loop":"forever","do":[{"run":"2ms"},{"fork":"kid"}]}]},
    {"name":"kid","count":0,"program":[{"run":{"uniform":["10us","3ms"]}}]},
    {"name":"fifo","class":"fifo:50","program":[{"loop":"forever","do":[{"run":"300us"},{"sleep":"2ms"}]}]},
    {"name":"rr","class":"rr:10","program":[{"loop":"forever","do":[{"run":"30ms"},{"sleep":"5ms"}]}]}]}"#;

/// Every value of a result is finite and non-negative.
fn check_outcome(out: &SimOutcome, what: &str) {
    for m in &out.result.metrics {
        let values: Vec<f64> = match &m.data {
            MetricData::Samples { values } | MetricData::Entities { values, .. } => values.clone(),
            MetricData::Series { series } => series.values.clone(),
            MetricData::Histogram { histogram, .. } => {
                vec![histogram.mean().unwrap_or(0.0), histogram.max().unwrap_or(0) as f64]
            }
        };
        for v in values {
            assert!(v.is_finite() && v >= 0.0, "{what}: metric {} has value {v}", m.name);
        }
    }
}

/// A refusal must say something; these are the only errors a run may end in.
fn check_refusal(e: &SimError, what: &str) {
    let msg = e.to_string();
    assert!(msg.len() > 20 && !msg.contains("panicked"), "{what}: {msg}");
}

fn opts(cpus: u32, hz: u32, ms: u64) -> SimOptions {
    SimOptions { cpus, hz, duration_ns: ms * 1_000_000, ..SimOptions::default() }
}

proptest! {
    #[test]
    fn spec_parser_never_panics_and_canonical_forms_parse_back(s in any::<String>()) {
        if let Ok(spec) = Spec::parse(&s, "policy") {
            let again = Spec::parse(&spec.canonical(), "policy").expect("a canonical form parses");
            prop_assert_eq!(again, spec);
        }
    }

    #[test]
    fn spec_like_text_parses_back_to_itself(s in "[a-zA-Z0-9 _\\[\\]=,:.-]{0,40}") {
        if let Ok(spec) = Spec::parse(&s, "workload") {
            prop_assert_eq!(Spec::parse(&spec.canonical(), "workload").unwrap(), spec);
        }
    }

    #[test]
    // Durations with a unit stop at 30 years (core's parse_duration_ns).
    fn durations_never_panic_and_round_trip(s in "[0-9 ._a-z-]{0,16}", n in 0u64..=1_000_000_000_000_000_000) {
        let _ = parse_ns(&s);
        prop_assert_eq!(parse_ns(&fmt_ns(n)), Some(n));
    }

    #[test]
    fn policies_accept_only_what_they_can_run(
        spec in prop_oneof![3 => structured(policy_names()), 1 => mutated(VALID_POLICIES)],
        cpus in 1u32..5,
        hz in proptest::sample::select(vec![10u32, 100, 250, 1000, 100_000]),
    ) {
        let what = format!("{spec} on {cpus} CPUs at {hz} Hz");
        match check_run(&spec, MIX, &opts(cpus, hz, 100)) {
            Err(e) => check_refusal(&e, &what),
            Ok(_) => {
                let out = run(&spec, MIX, &opts(cpus, hz, 100)).unwrap_or_else(|e| panic!("{what}: {e}"));
                check_outcome(&out, &what);
                // Every policy gives a timeslice curve for what it accepts.
                let _ = schedlab_sim::timeslice_curve(&spec, hz);
            }
        }
    }

    #[test]
    fn workloads_accept_only_what_they_can_run(
        spec in prop_oneof![3 => structured(workload_names()), 1 => mutated(VALID_WORKLOADS)],
        policy in proptest::sample::select(vec!["cfs", "o1", "ule", "linux24"]),
        cpus in 1u32..4,
    ) {
        let what = format!("{spec} under {policy} on {cpus} CPUs");
        // A short run: accepted specs may still be too big for it.
        let o = SimOptions { max_events: 2_000_000, ..opts(cpus, 1000, 20) };
        match run(policy, &spec, &o) {
            Ok(out) => check_outcome(&out, &what),
            Err(e) => check_refusal(&e, &what),
        }
    }

    #[test]
    fn workload_files_never_panic(text in mutated(&[MIX]), cpus in 1u32..3) {
        if let Ok(wl) = parse_workload_file(&text) {
            let o = SimOptions { max_events: 2_000_000, ..opts(cpus, 1000, 20) };
            match schedlab_sim::run_workload("cfs", &wl, &o) {
                Ok(out) => check_outcome(&out, &text),
                Err(e) => check_refusal(&e, &text),
            }
        }
    }

    #[test]
    fn generated_programs_run_or_are_refused(json in program_file(), cpus in 1u32..3) {
        let Ok(wl) = parse_workload_file(&json) else { return Ok(()) };
        let o = SimOptions { max_events: 1_000_000, ..opts(cpus, 1000, 20) };
        match schedlab_sim::run_workload("eevdf", &wl, &o) {
            Ok(out) => check_outcome(&out, &json),
            Err(e) => check_refusal(&e, &json),
        }
    }
}

fn duration() -> impl Strategy<Value = String> {
    let fixed = prop_oneof![
        proptest::sample::select(vec![
            "0",
            "1",
            "1000",
            "\"10us\"",
            "\"1ms\"",
            "\"30ms\"",
            "\"1s\"",
            "\"1000000s\"",
            "\"1000001s\"",
            "18446744073709551615",
            "-5",
            "1.5",
            "\"x\""
        ])
        .prop_map(str::to_string),
        (0u64..5_000_000).prop_map(|n| n.to_string()),
    ];
    prop_oneof![
        4 => fixed.clone(),
        1 => (fixed.clone(), fixed.clone()).prop_map(|(a, b)| format!("{{\"uniform\":[{a},{b}]}}")),
        1 => fixed.prop_map(|m| format!("{{\"exp\":{m}}}")),
    ]
}

fn step() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        3 => duration().prop_map(|d| format!("{{\"run\":{d}}}")),
        2 => duration().prop_map(|d| format!("{{\"sleep\":{d}}}")),
        1 => proptest::sample::select(vec!["a", "b"]).prop_map(|c| format!("{{\"send\":\"{c}\"}}")),
        1 => proptest::sample::select(vec!["a", "b"]).prop_map(|c| format!("{{\"recv\":\"{c}\"}}")),
        1 => Just("{\"broadcast\":\"c\"}".to_string()),
        1 => Just("{\"wait\":\"c\"}".to_string()),
        1 => proptest::sample::select(vec!["t0", "t1", "t2"]).prop_map(|t| format!("{{\"fork\":\"{t}\"}}")),
        1 => (-21i64..21).prop_map(|n| format!("{{\"nice\":{n}}}")),
        1 => proptest::sample::select(vec!["\"yield\"", "\"exit\"", "\"end_sim\""]).prop_map(str::to_string),
    ];
    leaf.prop_recursive(3, 12, 4, |inner| {
        let body = proptest::collection::vec(inner, 0..4).prop_map(|v| v.join(","));
        prop_oneof![
            (proptest::sample::select(vec!["0", "1", "3", "\"forever\"", "1000"]), body.clone())
                .prop_map(|(n, b)| format!("{{\"loop\":{n},\"do\":[{b}]}}")),
            (duration(), body).prop_map(|(p, b)| format!("{{\"period\":{p},\"do\":[{b}]}}")),
        ]
    })
}

/// A workload file with up to three templates of random programs.
fn program_file() -> impl Strategy<Value = String> {
    let class = proptest::sample::select(vec!["normal", "fifo:1", "rr:99", "fifo:0", "batch"]);
    let task = (class, 0u32..4, -20i32..20, proptest::collection::vec(step(), 0..5));
    proptest::collection::vec(task, 1..4).prop_map(|tasks| {
        let t: Vec<String> = tasks
            .into_iter()
            .enumerate()
            .map(|(i, (class, count, nice, prog))| {
                format!(
                    "{{\"name\":\"t{i}\",\"class\":\"{class}\",\"count\":{count},\"nice\":{nice},\"program\":[{}]}}",
                    prog.join(",")
                )
            })
            .collect();
        format!("{{\"name\":\"gen\",\"channels\":{{\"a\":1}},\"tasks\":[{}]}}", t.join(","))
    })
}

/// The accepted range of `key`, read from the error for an absurd value
/// ("... from 1ns to 10s ..."); None for keys without one (booleans).
fn range_of(name: &str, key: &str, is_policy: bool, hz: u32) -> Option<(u64, u64)> {
    let spec = format!("{name}[{key}=18446744073709551615]");
    let o = opts(2, hz, 10);
    let e = if is_policy { check_run(&spec, MIX, &o) } else { check_run("cfs", &spec, &o) };
    let msg = e.err()?.to_string();
    let rest = &msg[msg.find(" from ")? + 6..];
    let (lo, rest) = rest.split_once(" to ")?;
    let hi = rest.split([' ', ';', ')', ':', ',']).next()?;
    Some((parse_ns(lo)?, parse_ns(hi)?))
}

#[test]
fn every_tunable_runs_at_both_ends_of_its_range() {
    // Short fuzzed runs rarely reach a bound; overflow hides there. Two
    // simulated seconds of the mix with each tunable at its least and its
    // most, at a slow and a fast tick.
    let mut checked = 0;
    for (name, keys) in policy_names() {
        for key in keys {
            for (hz, ms) in [(100, 2000), (100_000, 200)] {
                // Some ranges are in ticks: read them at this HZ.
                let Some((lo, hi)) = range_of(&name, &key, true, hz) else { continue };
                for v in [lo, hi] {
                    let spec = format!("{name}[{key}={v}]");
                    // rt_runtime must stay within rt_period.
                    let spec = if key == "rt_period" { format!("{name}[{key}={v},rt_runtime=0]") } else { spec };
                    match run(&spec, MIX, &opts(2, hz, ms)) {
                        Ok(out) => check_outcome(&out, &spec),
                        // ule1 refuses a slice_min above slice_max, naming both.
                        Err(e) => assert!(
                            (key == "rt_runtime" && e.to_string().contains("rt_period"))
                                || (key.starts_with("slice_") && e.to_string().contains("no longer than slice_max")),
                            "{spec} at {hz} Hz: {e}"
                        ),
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 150, "{checked} runs: the ranges were not found");
}

#[test]
fn every_workload_parameter_runs_at_both_ends_of_its_range() {
    let mut checked = 0;
    for (name, keys) in workload_names() {
        for key in keys {
            let Some((lo, hi)) = range_of(&name, &key, false, 1000) else { continue };
            for v in [lo, hi] {
                let spec = format!("{name}[{key}={v}]");
                // Big ones are refused by their estimate or cut at the event limit.
                let o = SimOptions { max_events: 200_000, ..opts(2, 1000, 50) };
                match run("cfs", &spec, &o) {
                    Ok(out) => check_outcome(&out, &spec),
                    Err(e) => check_refusal(&e, &spec),
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 40, "{checked} runs: the ranges were not found");
}
