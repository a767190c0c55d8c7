//! The HTML report in headless Chromium, at a desktop width (1400 px) and a
//! phone width (390 px): it loads without script errors, every plot is
//! present, the summary comes first and each benchmark has its section, the
//! page never overflows the window sideways, and each table sits beside its
//! plots on the desktop and above them on the phone. The report's own load
//! script writes what it measured onto `<body data-...>`, which
//! `--dump-dom` prints. Chromium comes from Debian's `chromium` package,
//! which `.ci/run` installs.

use schedlab_core::*;
use schedlab_report::compare::{compare_sides, CompareOptions, Side};
use std::path::Path;
use std::process::Command;

const BROWSERS: [&str; 3] = ["chromium", "chromium-browser", "google-chrome"];

fn chromium() -> &'static str {
    BROWSERS
        .into_iter()
        .find(|b| Command::new(b).arg("--version").output().map(|o| o.status.success()).unwrap_or(false))
        .unwrap_or_else(|| {
            panic!("none of {BROWSERS:?} runs: install Chromium (apt-get install chromium) to run the browser test")
        })
}

/// A case with three invocations: a headline rate and a latency histogram.
fn case(name: &str, params: &[(&str, &str)], rate: f64, base: u64) -> Vec<BenchResult> {
    (0..3u32)
        .map(|i| {
            let cond = Condition::Live { requested: SchedCondition::default(), applied: None, loads: vec![] };
            let mut b = BenchResult::new(name, cond, 0);
            for (k, v) in params {
                b = b.param(k, *v);
            }
            b.invocation = i;
            b.status = BenchStatus::Complete;
            let r = rate * (1.0 + 0.02 * i as f64);
            b.metrics.push(
                Metric::samples("rate", Unit::PerSecond, Direction::HigherIsBetter, vec![r, r * 1.01, r * 0.99])
                    .headline(),
            );
            let mut h = LatencyHistogram::new();
            for k in 0..500 {
                h.record(base + k * 20 + u64::from(i) * 50);
            }
            h.record(base * 40);
            b.metrics.push(Metric::histogram("latency", Direction::LowerIsBetter, h));
            b
        })
        .collect()
}

fn run(id: i64, base: u64, kernel: &str) -> Run {
    let tool = ToolInfo { name: "schedlab".into(), version: "0".into(), git_rev: None };
    let mut r = Run::new(RunKind::Live, tool, vec![], "host".into(), 0);
    r.id = Some(id);
    r.env_start = Some(Environment { kernel_release: Some(kernel.into()), ..Default::default() });
    // A long parameter value, which a phone-width page must wrap or scroll
    // inside its table, never across the page.
    let long = "a-very-long-parameter-value-that-does-not-fit-on-a-phone-screen-at-all";
    r.benchmarks.extend(case("pipe", &[("placement", "same-cpu"), ("note", long)], 1e5, base));
    r.benchmarks.extend(case("pipe", &[("placement", "cross-cpu"), ("note", long)], 5e4, base * 2));
    r.benchmarks.extend(case("spawn", &[("count", "2000")], 3000.0, base * 10));
    r
}

/// Load the report inside an iframe `width` px wide (Chromium's window is
/// never narrower than 500 px, a phone's viewport is) and return the data
/// attributes that the report's load script wrote onto its `<body>`. The
/// frame is a `srcdoc`, so it shares the page's origin and the page can copy
/// them onto its own body, which `--dump-dom` prints.
fn load(browser: &str, html: &str, width: u32, dir: &Path) -> std::collections::BTreeMap<String, String> {
    let escaped = html.replace('&', "&amp;").replace('"', "&quot;");
    let page = format!(
        "<!DOCTYPE html><html><body style=\"margin:0\">\
         <iframe id=\"r\" style=\"border:0;width:{width}px;height:20000px\" srcdoc=\"{escaped}\"></iframe>\
         <script>document.getElementById('r').addEventListener('load',function(){{var f=this;\
         setTimeout(function(){{var s=f.contentDocument.body.dataset;for(var k in s){{document.body.dataset[k]=s[k]}}}},0)}})\
         </script></body></html>"
    );
    let file = dir.join(format!("page-{width}.html"));
    std::fs::write(&file, page).unwrap();
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--window-size={},2000", (width + 40).max(500)))
        .arg(format!("--user-data-dir={}", dir.join(format!("profile-{width}")).display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", file.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    let dom = String::from_utf8_lossy(&out.stdout).to_string();
    // The page's own <body> tag (the iframe's markup sits inside its srcdoc).
    let body = dom.find("<body").map(|i| &dom[i..]).unwrap_or_else(|| panic!("no <body> in:\n{dom}"));
    let tag = &body[..body.find('>').unwrap()];
    tag.split(" data-")
        .skip(1)
        .filter_map(|a| a.split_once("=\""))
        .map(|(k, v)| (k.to_string(), v.trim_end_matches('"').to_string()))
        .collect()
}

#[test]
#[ignore = "needs chromium: CI runs ignored tests as root (cargo test -- --ignored)"]
fn report_in_headless_chromium_at_desktop_and_phone_width() {
    let browser = chromium();
    let dir = tempfile::tempdir().unwrap();
    let sides = [Side::of(run(1, 4000, "6.18")), Side::of(run(2, 6000, "6.19"))];
    let c = compare_sides(&sides, &CompareOptions::fixed(0.02)).unwrap();
    let html = schedlab_report::html::report(&sides, Some(&c));

    for (width, layout) in [(1400, "side"), (390, "stacked")] {
        let d = load(browser, &html, width, dir.path());
        let at = format!("at {width} px: {d:?}");
        assert_eq!(d.get("report-ok").map(String::as_str), Some("1"), "plots missing or page not loaded {at}");
        assert!(!d.contains_key("report-error"), "a script error occurred {at}");
        assert_eq!(d["width"], width.to_string(), "the window is {width} px wide {at}");
        assert_eq!(d["sections"], "summary,bench-pipe,bench-spawn,environment,full", "summary first {at}");
        // pipe: a percentile chart per case and the rate bars; spawn: one of each.
        assert_eq!(d["plots"], "5", "{at}");
        assert_eq!(
            d["layout"],
            format!("{layout},{layout}"),
            "tables beside plots on a desktop, above on a phone {at}"
        );
        assert_eq!(d["overflow"], "0", "the page is wider than the window {at}");
    }
}
