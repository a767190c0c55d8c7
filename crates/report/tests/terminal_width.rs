//! Terminal output fits the width it is given: the default suite's run view
//! and a comparison of it, at 80 and 100 columns (and a narrow and a wide
//! one), with no line longer than the width and no token split across lines.
//! The fixture is a real default-suite run (histograms coarsened to keep it
//! small).

use schedlab_core::Run;
use schedlab_report::compare::{compare_sides, compare_table, CompareOptions, Side};
use schedlab_report::rows::RowOptions;
use schedlab_report::run_view;
use schedlab_report::text::max_line_width;
use std::collections::BTreeSet;

fn suite() -> Run {
    let text = include_str!("fixtures/default-suite.json");
    serde_json::from_str(text).expect("fixture parses as a run")
}

fn tokens(text: &str) -> BTreeSet<&str> {
    text.split_whitespace().filter(|t| !t.chars().all(|c| c == '─')).collect()
}

/// Every token of the fitted text also appears in the unconstrained one:
/// a token cut in two would leave halves that do not.
fn assert_fits(name: &str, fitted: &str, unconstrained: &str, width: usize) {
    assert!(max_line_width(fitted) <= width, "{name} at {width} has a longer line:\n{fitted}");
    let whole = tokens(unconstrained);
    let split: Vec<&str> = tokens(fitted).into_iter().filter(|t| !whole.contains(t)).collect();
    assert!(split.is_empty(), "{name} at {width} split tokens {split:?}:\n{fitted}");
}

#[test]
fn the_default_suite_fits_80_and_100_columns() {
    let run = suite();
    assert!(run.benchmarks.len() >= 10, "the fixture is the whole suite");
    let opts = RowOptions::default();
    let wide = run_view(&run, &opts, 10_000);
    for width in [60, 80, 100, 132] {
        let text = run_view(&run, &opts, width);
        assert_fits("run view", &text, &wide, width);
        for bench in ["placement=same-cpu", "hackbench", "cyclic", "jobs=4", "round_trip_latency"] {
            assert!(text.contains(bench), "{bench} missing at {width}");
        }
    }
    // At 100 columns each scalar metric takes one line.
    let at100 = run_view(&run, &opts, 100);
    let line = at100.lines().find(|l| l.contains("round_trips_per_s")).unwrap();
    assert!(line.contains("cv "), "one line per metric at 100 columns: {line}");
}

#[test]
fn a_comparison_fits_80_and_100_columns() {
    let run = suite();
    let mut other = run.clone();
    other.id = Some(2);
    let sides = [Side::of(run), Side::of(other)];
    let c = compare_sides(&sides, &CompareOptions::fixed(0.02)).unwrap();
    let wide = compare_table(&c, 10_000, &Default::default());
    for width in [80, 100] {
        let text = compare_table(&c, width, &Default::default());
        assert_fits("compare", &text, &wide, width);
        assert!(text.contains("within noise"), "{text}");
    }
}
