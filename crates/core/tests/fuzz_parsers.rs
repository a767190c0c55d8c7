//! Property tests over core's text parsers and formatters: durations with
//! units (`parse_duration_ns`), CPU lists (`parse_cpu_list` and its inverse
//! `format_cpu_list`) and policy names, fed arbitrary and structured input.
//! The properties: no panic; what is accepted is in range; formatting what
//! was accepted parses back to the same value.
//!
//! 256 cases per property by default; `PROPTEST_CASES=20000 cargo test -p
//! schedlab-core --test fuzz_parsers` runs longer (docs/testing.md).

use proptest::prelude::*;
use schedlab_core::condition::{format_cpu_list, parse_cpu_list, SchedPolicy, CPU_ID_MAX};
use schedlab_core::units::{format_duration_ns, group_thousands, parse_duration_ns, Unit};

/// Durations the way people write them, valid or nearly.
fn duration_text() -> impl Strategy<Value = String> {
    let num = prop_oneof![
        any::<u64>().prop_map(|n| n.to_string()),
        (0u64..100_000, 0u32..1000).prop_map(|(a, b)| format!("{a}.{b}")),
        proptest::sample::select(vec!["", "-1", "+5", ".5", "5.", "1e3", "nan", "inf", "1e400", "0x10", "1_000"])
            .prop_map(str::to_string),
    ];
    let unit = proptest::sample::select(vec!["ns", "us", "µs", "ms", "s", "m", "min", "h", "", "d", " s", "S", "e3s"]);
    (num, unit).prop_map(|(n, u)| format!("{n}{u}"))
}

/// CPU lists from numbers and ranges, valid or nearly.
fn cpu_list_text() -> impl Strategy<Value = String> {
    let n = prop_oneof![
        4 => 0usize..64,
        1 => proptest::sample::select(vec![CPU_ID_MAX - 1, CPU_ID_MAX, CPU_ID_MAX + 1, 100_000, usize::MAX]),
    ];
    let part = prop_oneof![
        n.clone().prop_map(|a| a.to_string()),
        (n.clone(), n).prop_map(|(a, b)| format!("{a}-{b}")),
        proptest::sample::select(vec!["", " ", "-", "1-", "-1", "a", "+1", "1--2", "1-2-3"]).prop_map(str::to_string),
    ];
    proptest::collection::vec(part, 1..6).prop_map(|p| p.join(","))
}

proptest! {
    #[test]
    fn durations_never_panic_and_stay_in_range(s in prop_oneof![duration_text(), any::<String>()]) {
        if let Ok(ns) = parse_duration_ns(&s) {
            prop_assert!(ns <= 1_000_000_000_000_000_000, "{s:?} -> {ns}");
        }
    }

    #[test]
    fn whole_durations_parse_exactly(n in 0u64..=1_000_000_000_000_000_000) {
        prop_assert_eq!(parse_duration_ns(&format!("{n}ns")), Ok(n));
        if n <= 1_000_000_000 {
            prop_assert_eq!(parse_duration_ns(&format!("{n}s")), Ok(n * 1_000_000_000));
        }
    }

    #[test]
    fn cpu_lists_are_bounded_and_round_trip(s in prop_oneof![4 => cpu_list_text(), 1 => any::<String>()]) {
        if let Ok(cpus) = parse_cpu_list(&s) {
            prop_assert!(!cpus.is_empty());
            prop_assert!(cpus.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats: {:?}", cpus);
            prop_assert!(cpus.iter().all(|&c| c <= CPU_ID_MAX), "{s:?}");
            prop_assert_eq!(parse_cpu_list(&format_cpu_list(&cpus)).unwrap(), cpus);
        }
    }

    #[test]
    fn formatted_cpu_sets_parse_back(set in proptest::collection::btree_set(0usize..=CPU_ID_MAX, 1..50)) {
        let cpus: Vec<usize> = set.into_iter().collect();
        prop_assert_eq!(parse_cpu_list(&format_cpu_list(&cpus)).unwrap(), cpus);
    }

    #[test]
    fn policy_names_never_panic(s in any::<String>()) {
        if let Ok(p) = s.parse::<SchedPolicy>() {
            prop_assert_eq!(p.name().parse::<SchedPolicy>().unwrap(), p);
        }
    }

    #[test]
    fn formatting_any_value_never_panics(v in any::<f64>()) {
        for u in [Unit::Nanoseconds, Unit::Seconds, Unit::PerSecond, Unit::PerMinute, Unit::KibPerSecond, Unit::Bytes, Unit::BytesPerSecond,
                  Unit::Count, Unit::Percent, Unit::Ratio] {
            prop_assert!(!u.format(v).is_empty());
        }
        prop_assert!(!format_duration_ns(v).is_empty());
        prop_assert!(!group_thousands(v).is_empty());
    }
}
