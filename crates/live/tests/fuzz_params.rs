//! Property tests over the live parsers that take user text: benchmark
//! parameters (`key=value,...`, with quoted values and count lists), the
//! `BENCH[:params]` selection of `schedlab run`, and `--load` specs. Pure
//! parsing: nothing here runs a benchmark or touches the kernel.
//!
//! The properties: no panic; what is accepted is in range (counts within
//! their spec's bounds, loads within 1..=100000 with a valid condition); the
//! normalised text of what is accepted parses back to the same value; a
//! benchmark's time estimate for accepted parameters is finite and >= 0.
//!
//! 256 cases per property by default; `PROPTEST_CASES=20000 cargo test -p
//! schedlab-live --test fuzz_params` runs longer (docs/testing.md).

use proptest::prelude::*;
use schedlab_live::load::{self, LoadKind};
use schedlab_live::{ParamKind, ParamSpec, Params, RunPlan};

/// What `schedlab run` does with one `BENCH[:k=v,...]` argument up to the cases.
fn select(arg: &str) -> Result<(&'static dyn schedlab_live::Benchmark, Params), schedlab_live::LiveError> {
    let (name, params) = arg.split_once(':').unwrap_or((arg, ""));
    let bench = schedlab_live::find(name)?;
    let params = Params::parse(params)?.resolve(bench.name(), bench.params(), false)?;
    Ok((bench, params))
}

/// Values at and beside every bound of every benchmark's counts, plus junk.
fn values_for(spec: &ParamSpec) -> Vec<String> {
    let mut v: Vec<String> = [
        "0",
        "1",
        "-1",
        "",
        " ",
        "x",
        "1e3",
        "1_000",
        "_1",
        "18446744073709551615",
        "18446744073709551616",
        "'a,b'",
        "\"q\"",
        "1,2",
        "1,1",
        "yes",
        "no",
        "/tmp",
        "{j}",
    ]
    .map(String::from)
    .to_vec();
    match spec.kind {
        ParamKind::Count { min, max }
        | ParamKind::CountList { min, max }
        | ParamKind::Duration { min, max, .. }
        | ParamKind::Size { min, max, .. } => {
            for n in [min, max, min.saturating_sub(1), max.saturating_add(1), (min + max) / 2] {
                v.push(n.to_string());
            }
            v.push(format!("{min},{max}"));
            // With units, including ones that are not a whole number of the key's unit.
            v.extend(["2ms", "1500ns", "1s", "16MiB", "3KiB", "1.5ms"].map(String::from));
        }
        ParamKind::IntList { min, max } => v.extend([min, max, min - 1, max + 1].map(|n| n.to_string())),
        ParamKind::Choice(words) => v.extend(words.iter().map(|w| w.to_uppercase())),
        ParamKind::Text => v.push("make -j{j}".into()),
        ParamKind::Flag => v.extend(["on", "OFF", "2"].map(String::from)),
    }
    v
}

/// `bench:key=value,...` from real names, keys and bound values.
fn selection() -> impl Strategy<Value = String> {
    let benches: Vec<&'static dyn schedlab_live::Benchmark> = schedlab_live::benchmarks();
    (0..benches.len(), proptest::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>()), 0..4))
        .prop_map(move |(b, picks)| {
            let bench = benches[b];
            let specs = bench.params();
            let mut seen = Vec::new();
            let mut kv = Vec::new();
            for (k, v) in picks {
                if specs.is_empty() {
                    break;
                }
                let spec = &specs[k.index(specs.len())];
                if seen.contains(&spec.name) {
                    continue;
                }
                seen.push(spec.name);
                let vals = values_for(spec);
                kv.push(format!("{}={}", spec.name, vals[v.index(vals.len())]));
            }
            if kv.is_empty() {
                bench.name().to_string()
            } else {
                format!("{}:{}", bench.name(), kv.join(","))
            }
        })
}

fn check_in_range(bench: &dyn schedlab_live::Benchmark, p: &Params) {
    for spec in bench.params() {
        let v = p.get(spec.name).unwrap_or_else(|| panic!("{}: {} missing after resolve", bench.name(), spec.name));
        match spec.kind {
            ParamKind::Count { min, max } | ParamKind::Duration { min, max, .. } | ParamKind::Size { min, max, .. } => {
                let n = p.count(spec.name).unwrap();
                assert!((min..=max).contains(&n), "{}.{} = {n}", bench.name(), spec.name);
            }
            ParamKind::CountList { min, max } => {
                let ns = p.counts(spec.name).unwrap();
                assert!(
                    !ns.is_empty() && ns.iter().all(|n| (min..=max).contains(n)),
                    "{}.{} = {v}",
                    bench.name(),
                    spec.name
                );
            }
            ParamKind::Choice(words) => assert!(words.contains(&v), "{}.{} = {v}", bench.name(), spec.name),
            ParamKind::Text => assert!(!v.trim().is_empty()),
            ParamKind::IntList { .. } | ParamKind::Flag => {
                assert_eq!(spec.kind.parse(v).as_deref(), Ok(v), "{}.{} is canonical", bench.name(), spec.name)
            }
        }
    }
}

/// Load specs from their own vocabulary, valid or not.
fn load_spec() -> impl Strategy<Value = String> {
    let kind = proptest::sample::select(vec!["none", "burn", "hackbench", "Burn", "hb", ""]);
    let count = proptest::sample::select(vec!["", ":0", ":1", ":2", ":100000", ":100001", ":-1", ":x", ": 3", ":+4"]);
    let key = proptest::sample::select(vec!["policy", "prio", "nice", "cpus", "bogus", ""]);
    let val = proptest::sample::select(vec![
        "fifo", "rr", "other", "batch", "idle", "deadline", "0", "1", "50", "99", "100", "-20", "19", "20", "0-1",
        "0,2-3", "3-1", "", "x",
    ]);
    let cond = proptest::collection::vec((key, val), 0..4)
        .prop_map(|kv| kv.into_iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(","));
    // The condition after a comma (the grammar) or after @ (the older spelling).
    let sep = proptest::sample::select(vec![",", "@"]);
    (kind, count, proptest::option::of(cond), sep).prop_map(|(k, c, cond, sep)| match cond {
        Some(cond) => format!("{k}{c}{sep}{cond}"),
        None => format!("{k}{c}"),
    })
}

fn check_load(input: &str) {
    let Ok(spec) = load::parse(input) else { return };
    match spec.kind {
        LoadKind::None => assert!(spec.condition.is_none()),
        LoadKind::Burn { tasks: n } | LoadKind::Hackbench { groups: n } => {
            assert!((1..=100_000).contains(&n), "{input}: {n}")
        }
        // The newer loads (write, read, compile, ...) are not in this vocabulary.
        _ => {}
    }
    if let Some(c) = &spec.condition {
        c.validate().unwrap_or_else(|e| panic!("{input}: accepted an invalid condition: {e}"));
        // Each key once: a repeated one would silently override the first.
        let cond = spec.text.split_once(',').map_or("", |c| c.1);
        let keys: Vec<&str> = cond.split(',').filter_map(|kv| kv.split_once('=')).map(|kv| kv.0.trim()).collect();
        let mut unique = keys.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), keys.len(), "{input}: a condition key given twice was accepted");
    }
    let again = load::parse(&spec.text).unwrap_or_else(|e| panic!("{input}: its text {:?} is refused: {e}", spec.text));
    assert!(!again.old_spelling, "{input}: its text {:?} is in the older spelling", spec.text);
    assert_eq!(again, load::LoadSpec { old_spelling: false, ..spec }, "{input}");
}

proptest! {
    #[test]
    fn params_never_panic_and_their_text_parses_back(s in any::<String>()) {
        if let Ok(p) = Params::parse(&s) {
            prop_assert_eq!(Params::parse(&p.to_string()).unwrap(), p);
        }
    }

    #[test]
    fn params_like_text_parses_back(s in "[a-z0-9 =,'\"_{}-]{0,40}") {
        if let Ok(p) = Params::parse(&s) {
            let text = p.to_string();
            prop_assert_eq!(Params::parse(&text).unwrap_or_else(|e| panic!("{s:?} -> {text:?}: {e}")), p);
        }
    }

    #[test]
    fn selections_resolve_in_range_or_are_refused(arg in selection()) {
        if let Ok((bench, p)) = select(&arg) {
            check_in_range(bench, &p);
            // The stored form of the parameters selects the same again.
            let (_, again) = select(&format!("{}:{}", bench.name(), p)).unwrap();
            prop_assert_eq!(&again, &p);
            let est = bench.estimate_s(&p, &RunPlan::default());
            prop_assert!(est.is_finite() && est >= 0.0, "{}: estimate {}", arg, est);
        }
    }

    #[test]
    fn arbitrary_selections_never_panic(arg in any::<String>()) {
        let _ = select(&arg);
    }

    #[test]
    fn load_specs_are_in_range_and_parse_back(s in load_spec()) {
        check_load(&s);
    }

    #[test]
    fn arbitrary_load_specs_never_panic(s in any::<String>()) {
        check_load(&s);
    }
}
