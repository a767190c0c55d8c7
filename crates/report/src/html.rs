//! The HTML report: one self-contained file (inline CSS and SVG, no network)
//! that leads with the answer. In order:
//!
//! 1. **Summary**: for a comparison, each side's verdicts against the
//!    baseline (how many rows better, worse, within noise), the rows that
//!    changed with their change and 95 % interval, what the verdicts rest on
//!    and the environment differences; for one side, its headline figures.
//! 2. **One section per benchmark**: its table beside its plots (latency
//!    percentiles, bars with intervals, scaling curves, series), charts with
//!    nothing to show named instead of drawn, and the benchmark's own notes.
//!    With two or more runs that hold scheduler timelines, those are drawn
//!    together after the benchmarks instead: one figure, a panel per run.
//! 3. **Runs and environment**, fields that differ between sides highlighted.
//! 4. **Full tables**: the whole comparison and every side's results.
//!
//! Every figure comes from `compare` (verdicts, intervals) or `rows`
//! (single-side figures); nothing here computes a statistic of its own.
//!
//! `schedlab serve` shows the same pages: [`document`] around a nav bar and
//! [`report_body`], [`history_body`] or [`history_groups_body`], and its run
//! list from [`esc`], [`head_row`] and [`td`].

use crate::compare::{change_text, env_warning_lines, footer_lines, CompareRow, Comparison, Side, Verdict};
use crate::history::{history_chart, HistoryRow};
use crate::plot::{
    bars_svg_string, latency_percentiles, panels_svg_string, scaling, series, svg_string, timeline_panels,
    timeline_source, Bar, BarChart, Chart, PlotError, TIMELINE_TASKS,
};
use crate::rows::{rows_of_run, MetricRow, ParamTable, RowOptions};
use crate::table::{headline_value, params_heading};
use schedlab_core::replicate::{cases, pooled_run, replicate_interval, typical, Stat};
use schedlab_core::units::group_thousands;
use schedlab_core::{model::format_unix_ms, BenchResult, Environment, MetricData, Run, Timeline, Unit};
use std::collections::{BTreeMap, BTreeSet};

/// Text made safe to place in HTML, in an element or a double-quoted
/// attribute: every page schedlab renders (`report`, `serve`) escapes user
/// data (run names, labels, imported text) through this one function.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Plot size in the report: small enough that a phone (about 360 px for
/// the figure) shows its type (see `plot::fonts`) at three quarters of its
/// size; a desktop enlarges it to at most 600 px.
const PLOT_SIZE: (u32, u32) = (480, 360);

const STYLE: &str = "*{box-sizing:border-box}\
body{font-family:system-ui,sans-serif;margin:0 auto;padding:12px 16px;max-width:1440px;color:#222;line-height:1.4}\
h1{margin:.3em 0}h2{border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:1.6em}h3{margin:1em 0 .4em}\
.scroll{overflow-x:auto;max-width:100%}\
table{border-collapse:collapse;margin:.4em 0;font-size:14px}\
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}\
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\
tr.case th{background:#e8eef6}.better{color:#0a7a3a;font-weight:600}.worse{color:#b3261e;font-weight:600}\
.warn{background:#fff4e0;border-left:4px solid #e69f00;padding:6px 10px;margin:6px 0}\
ul.warn{padding-left:28px}tr.diff th,tr.diff td{background:#fff4e0}\
.lead{font-size:1.1em}.muted{color:#666}.params{color:#555;font-size:.9em;overflow-wrap:anywhere}\
.pair{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,600px);gap:24px;align-items:start}\
@media (max-width:1000px){.pair{grid-template-columns:minmax(0,1fr)}}\
figure{margin:0 0 16px}figure svg{display:block;width:100%;max-width:600px;height:auto;border:1px solid #eee}\
figcaption{font-size:13px;color:#555;margin-top:2px}p.omitted{font-size:13px;color:#666;margin:4px 0}\
nav a{margin-right:1em}\
@media (max-width:600px){table.stack,table.stack tbody,table.stack tr,table.stack td,table.stack th{display:block}\
table.stack tr.head{display:none}table.stack tr{border:1px solid #ccc;margin:0 0 8px}\
table.stack td,table.stack th{border:0;text-align:left;white-space:normal;padding:2px 8px}\
table.stack td[data-label]::before{content:attr(data-label) \": \";color:#555}table.stack td:first-child{font-weight:600}}";

/// A cell of a table that reads as cards on a phone: each cell but the
/// first of a row names its column there.
pub fn td(column: &str, class: &str, html: &str) -> String {
    let class = if class.is_empty() { String::new() } else { format!(" class=\"{class}\"") };
    let label = if column.is_empty() { String::new() } else { format!(" data-label=\"{}\"", esc(column)) };
    format!("<td{class}{label}>{html}</td>")
}

/// The heading row of a table that reads as cards on a phone ([`td`]).
pub fn head_row(columns: &[String]) -> String {
    let cells: String = columns.iter().map(|c| format!("<th>{}</th>", esc(c))).collect();
    format!("<tr class=\"head\">{cells}</tr>")
}

/// Marks the document once it has loaded, for the headless-browser test:
/// every plot present, the order of the top-level sections, whether the page
/// overflows the window horizontally, and whether each table sits beside its
/// plots or above them.
const CHECK_SCRIPT: &str = "<script>\
window.addEventListener('error',function(){document.body.dataset.reportError='1'});\
window.addEventListener('load',function(){var d=document.body.dataset;\
var f=document.querySelectorAll('figure');var ok=true;\
f.forEach(function(x){if(!x.querySelector('svg')){ok=false}});d.plots=String(f.length);\
d.sections=Array.prototype.map.call(document.querySelectorAll('body>section'),function(s){return s.id}).join(',');\
d.width=String(window.innerWidth);\
d.overflow=String(Math.max(0,document.documentElement.scrollWidth-window.innerWidth));\
d.layout=Array.prototype.map.call(document.querySelectorAll('.pair'),function(p){\
var t=p.children[0].getBoundingClientRect(),g=p.children[1].getBoundingClientRect();\
return g.left>=t.right-1?'side':(g.top>=t.bottom-1?'stacked':'overlap')}).join(',');\
d.reportOk=ok?'1':'0'});</script>";

/// One side's runs as one run: all their benchmarks, so that a case's
/// invocations from every run of the side pool together.
fn merge(side: &Side) -> Option<Run> {
    let mut run = side.runs.first()?.clone();
    for r in &side.runs[1..] {
        run.benchmarks.extend(r.benchmarks.iter().cloned());
    }
    if side.runs.len() > 1 {
        run.id = None;
        run.name = Some(side.label.clone());
    }
    Some(run)
}

/// A benchmark and its cases, in order of first appearance.
struct Bench {
    name: String,
    /// Parameters every case shares, "k=v k=v".
    common: String,
    /// (case key, the parameters that tell it from the others; "" for one case).
    cases: Vec<(String, String)>,
}

/// A benchmark's cases, their parameters written as `show` heads a case
/// ([`params_heading`]): durations and sizes with their unit, and of those
/// every case shares only the ones not at their default. `params` knows
/// each benchmark's parameters; one it does not know is shown as stored.
fn benches(runs: &[Run], params: &ParamTable) -> Vec<Bench> {
    let mut order: Vec<String> = Vec::new();
    let mut firsts: BTreeMap<String, Vec<&BenchResult>> = BTreeMap::new();
    for b in runs.iter().flat_map(|r| &r.benchmarks) {
        let list = firsts.entry(b.name.clone()).or_default();
        if list.is_empty() {
            order.push(b.name.clone());
        }
        if !list.iter().any(|x| x.key() == b.key()) {
            list.push(b);
        }
    }
    order
        .into_iter()
        .map(|name| {
            let list = &firsts[&name];
            let keys: BTreeSet<&String> = list.iter().flat_map(|b| b.params.keys()).collect();
            let (varying, common): (Vec<&String>, Vec<&String>) =
                keys.into_iter().partition(|k| list.iter().any(|b| b.params.get(*k) != list[0].params.get(*k)));
            let siblings: Vec<&BTreeMap<String, serde_json::Value>> = list.iter().map(|b| &b.params).collect();
            // The heading of `b`'s parameters among `keys`, without the name;
            // against its siblings every varying key is shown, at default or not.
            let text = |b: &BenchResult, keys: &[&String], siblings: &[&BTreeMap<String, serde_json::Value>]| {
                let some: BTreeMap<String, serde_json::Value> =
                    b.params.iter().filter(|(k, _)| keys.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
                let heading = params_heading(&name, &some, b.quick, siblings, params);
                let mut text = heading[name.len()..].trim_start().to_string();
                // A key this case lacks still tells it from the others.
                for k in keys.iter().filter(|k| !b.params.contains_key(**k)) {
                    text.push_str(&format!("{}{k}=-", if text.is_empty() { "" } else { " " }));
                }
                text
            };
            Bench {
                common: text(list[0], &common, &[]),
                cases: list.iter().map(|b| (b.key(), text(b, &varying, &siblings))).collect(),
                name: name.clone(),
            }
        })
        .collect()
}

fn slug(name: &str) -> String {
    let s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    format!("bench-{s}")
}

/// Legend names of the sides for one case: the side's label, plus the words
/// of its condition that not every side shares ("#3 cfs", "#4 o1").
fn side_names(runs: &[Run], key: &str) -> Vec<String> {
    let conds: Vec<Option<String>> =
        runs.iter().map(|r| r.benchmarks.iter().find(|b| b.key() == key).map(|b| b.condition.label())).collect();
    let present: Vec<&String> = conds.iter().flatten().collect();
    runs.iter()
        .zip(&conds)
        .map(|(r, c)| {
            let own: Vec<&str> = c
                .as_deref()
                .map(|c| {
                    c.split_whitespace()
                        .filter(|w| !present.iter().all(|p| p.split_whitespace().any(|x| x == *w)))
                        .collect()
                })
                .unwrap_or_default();
            if own.is_empty() || present.len() < 2 {
                r.label()
            } else {
                format!("{} {}", r.label(), own.join(" "))
            }
        })
        .collect()
}

/// The report of `sides` (each one or more runs pooled); with a comparison
/// of them (two or more sides, the first the baseline) it leads with its
/// verdicts.
///
/// Parameters are written as stored; [`report_with_params`] writes them as
/// `show` does.
pub fn report(sides: &[Side], comparison: Option<&Comparison>) -> String {
    report_with_params(sides, comparison, &ParamTable::new())
}

/// [`report`], its headings naming parameters as `show` does (units, only
/// those not at their default or that tell cases apart), from `params`.
pub fn report_with_params(sides: &[Side], comparison: Option<&Comparison>, params: &ParamTable) -> String {
    document("schedlab report", &report_body(sides, comparison, params))
}

/// A whole page: the report's head and style around `body` (already HTML),
/// with the load script that the headless-browser tests read.
pub fn document(title: &str, body: &str) -> String {
    let mut h = String::new();
    h.push_str("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">");
    h.push_str(&format!(
        "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{}</title>",
        esc(title)
    ));
    h.push_str(&format!("<style>{STYLE}</style></head><body>"));
    h.push_str(body);
    h.push_str(CHECK_SCRIPT);
    h.push_str("</body></html>\n");
    h
}

/// What [`report`] shows inside its page: heading, summary, a section per
/// benchmark, environment and full tables; headings write parameters with
/// `params` as [`report_with_params`] does.
pub fn report_body(sides: &[Side], comparison: Option<&Comparison>, params: &ParamTable) -> String {
    let merged: Vec<Run> = sides.iter().filter_map(merge).collect();
    // Distributions and warnings are drawn once per case, invocations pooled.
    let pooled: Vec<Run> = merged.iter().map(pooled_run).collect();
    let benches = benches(&merged, params);
    let timelines = timelines_section(&merged);
    let mut h = String::new();
    h.push_str("<h1>schedlab report</h1>");
    h.push_str(&format!("<p class=\"muted\">{}</p>", esc(&runs_line(&merged, comparison.is_some()))));

    h.push_str(&summary(&merged, &benches, comparison, timelines.is_some()));
    for bench in &benches {
        h.push_str(&bench_section(bench, &merged, &pooled, comparison, timelines.is_some()));
    }
    h.push_str(&timelines.unwrap_or_default());
    h.push_str("<section id=\"environment\"><h2>Runs and environment</h2>");
    h.push_str(&environment_table(&merged));
    h.push_str("</section>");

    h.push_str("<section id=\"full\"><h2>Full tables</h2>");
    if let Some(c) = comparison {
        h.push_str(&format!("<h3>Comparison (baseline {})</h3>", esc(&c.runs[0])));
        h.push_str(&comparison_table(c));
    }
    for run in &merged {
        h.push_str(&format!("<h3>Results of {}</h3>", esc(&run.label())));
        h.push_str(&run_table(run));
    }
    h.push_str("</section>");
    h.push_str(&format!(
        "<p><small>generated by schedlab {} · {}</small></p>",
        env!("CARGO_PKG_VERSION"),
        "95% confidence intervals over independent invocations (seeds for the simulator)"
    ));
    h
}

/// The history of one metric (`schedlab history`): its plot, then one row per
/// run with its value, interval and verdict against the first run of its case
/// and host. `controls`: HTML under the heading (`serve`'s selectors);
/// `run_href` links a run id to its page; `note` says how the verdicts were
/// made.
pub fn history_body(
    title: &str,
    controls: &str,
    rows: &[HistoryRow],
    run_href: &dyn Fn(i64) -> String,
    note: &str,
) -> String {
    let mut h = format!("<h1>{}</h1>{controls}<section id=\"history\">", esc(title));
    let mut chart = history_chart(rows);
    chart.size = PLOT_SIZE;
    match svg_string(&chart) {
        Ok(svg) => h.push_str(&format!(
            "<figure>{}<figcaption>{}</figcaption></figure>",
            strip_xml_decl(&svg),
            esc("each run's value, one line per case and host, in the order the runs were made (the table gives each value's 95% interval)")
        )),
        Err(e) => h.push_str(&format!("<p class=\"omitted\">{}</p>", esc(&format!("no chart: {e}")))),
    }
    let cols = ["run", "started", "host", "kernel", "value", "95% CI", "inv", "vs first run"];
    h.push_str("<div class=\"scroll\"><table class=\"stack\">");
    h.push_str(&head_row(&cols.map(String::from)));
    let mut last = None;
    for r in rows {
        let what = format!("{} · {} · {} {}", r.heading, r.condition, r.metric, r.statistic);
        if last.as_ref() != Some(&what) {
            h.push_str(&format!("<tr class=\"case\"><th colspan=\"{}\">{}</th></tr>", cols.len(), esc(&what)));
            last = Some(what);
        }
        let run = match r.run_id {
            Some(id) => format!("<a href=\"{}\">{}</a>", esc(&run_href(id)), esc(&r.run)),
            None => esc(&r.run),
        };
        let ci =
            r.ci.map(|c| format!("{} … {}", r.unit.format(c.lo), r.unit.format(c.hi))).unwrap_or_else(|| "-".into());
        let (class, verdict) = match (r.change, r.verdict) {
            (Some(c), Some(v)) => (verdict_class(v), format!("{:+.1}% {}", (c.ratio - 1.0) * 100.0, v.label())),
            (None, Some(v)) => (verdict_class(v), v.label().to_string()),
            _ => ("", "-".into()),
        };
        h.push_str(&format!(
            "<tr>{}{}{}{}{}{}{}{}</tr>",
            td("", "", &run),
            td(cols[1], "", &esc(&format_unix_ms(r.started_unix_ms))),
            td(cols[2], "", &esc(&r.host)),
            td(cols[3], "", &esc(&r.kernel)),
            td(cols[4], "num", &esc(&r.unit.format(r.value))),
            td(cols[5], "num", &esc(&ci)),
            td(cols[6], "num", &r.invocations.to_string()),
            td(cols[7], class, &esc(&verdict)),
        ));
    }
    h.push_str("</table></div>");
    h.push_str(&format!("<p class=\"muted\">{}</p></section>", esc(note)));
    h
}

/// `schedlab history --by`: groups of runs, each pooled, against the first
/// group: a block per case and metric, a line per group (it reads down the
/// page however many groups there are). `controls`: HTML under the heading;
/// `note` says how the groups were made.
pub fn history_groups_body(title: &str, controls: &str, c: &Comparison, note: &str) -> String {
    let mut h = format!("<h1>{}</h1>{controls}<section id=\"history\">", esc(title));
    let cols = ["group", "value", "change [95% CI] verdict"];
    h.push_str("<div class=\"scroll\"><table class=\"stack\">");
    h.push_str(&head_row(&cols.map(String::from)));
    for row in &c.rows {
        let what = format!("{} · {}", row.benchmark, row.label());
        h.push_str(&format!("<tr class=\"case\"><th colspan=\"{}\">{}</th></tr>", cols.len(), esc(&what)));
        for (i, (cell, group)) in row.cells.iter().zip(&c.runs).enumerate() {
            let value = cell.value.map(|v| row.unit.format(v)).unwrap_or_else(|| "-".into());
            let (class, change) =
                if i == 0 { ("", "baseline".to_string()) } else { (verdict_class(cell.verdict), change_text(cell)) };
            h.push_str(&format!(
                "<tr>{}{}{}</tr>",
                td("", "", &esc(group)),
                td(cols[1], "num", &esc(&value)),
                td(cols[2], class, &esc(&change))
            ));
        }
    }
    h.push_str("</table></div>");
    for line in footer_lines(c) {
        h.push_str(&format!("<p class=\"muted\">{}</p>", esc(&line)));
    }
    h.push_str(&format!("<p class=\"muted\">{}</p></section>", esc(note)));
    h
}

/// "#6 (baseline) live 2026-11-23 11:26 UTC · #8 live ..."
fn runs_line(runs: &[Run], compared: bool) -> String {
    runs.iter()
        .enumerate()
        .map(|(i, r)| {
            let base = if compared && i == 0 { " (baseline)" } else { "" };
            format!("{}{base}: {} {}, {}", r.label(), r.kind.name(), r.status.name(), format_unix_ms(r.started_unix_ms))
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

/// "pipe · placement=same-cpu", with a link to the benchmark's section.
fn case_link(benches: &[Bench], key: &str) -> String {
    for b in benches {
        if let Some((_, label)) = b.cases.iter().find(|(k, _)| k == key) {
            let text = if label.is_empty() { b.name.clone() } else { format!("{} · {label}", b.name) };
            return format!("<a href=\"#{}\">{}</a>", slug(&b.name), esc(&text));
        }
    }
    esc(key)
}

fn verdict_class(v: Verdict) -> &'static str {
    match v {
        Verdict::Better => "better",
        Verdict::Worse => "worse",
        _ => "",
    }
}

fn summary(runs: &[Run], benches: &[Bench], comparison: Option<&Comparison>, timelines: bool) -> String {
    let mut h = String::from("<section id=\"summary\"><h2>Summary</h2>");
    match comparison {
        Some(c) => h.push_str(&comparison_summary(c, benches)),
        None => h.push_str(&single_summary(runs, benches)),
    }
    h.push_str("<nav>");
    for b in benches {
        h.push_str(&format!("<a href=\"#{}\">{}</a>", slug(&b.name), esc(&b.name)));
    }
    if timelines {
        h.push_str("<a href=\"#timelines\">scheduler timelines</a>");
    }
    h.push_str("<a href=\"#environment\">environment</a><a href=\"#full\">full tables</a></nav></section>");
    h
}

fn comparison_summary(c: &Comparison, benches: &[Bench]) -> String {
    let mut h = String::new();
    for (i, side) in c.runs.iter().enumerate().skip(1) {
        let count = |v: Verdict| c.rows.iter().filter(|r| r.cells[i].verdict == v).count();
        let judged = c.rows.iter().filter(|r| r.cells[i].change.is_some()).count();
        let (better, worse, changed, within, short) = (
            count(Verdict::Better),
            count(Verdict::Worse),
            count(Verdict::Changed),
            count(Verdict::WithinNoise),
            count(Verdict::NotEnoughRuns),
        );
        let mut parts = vec![
            format!("<span class=\"worse\">{worse} worse</span>"),
            format!("<span class=\"better\">{better} better</span>"),
        ];
        if changed > 0 {
            parts.push(format!("{changed} changed (informational)"));
        }
        parts.push(format!("{within} within noise"));
        let mut line = format!(
            "<p class=\"lead\"><b>{}</b> against baseline <b>{}</b>: {} of {judged} judged rows",
            esc(side),
            esc(&c.runs[0]),
            parts.join(", ")
        );
        if short > 0 {
            line.push_str(&format!("; {short} rows have not enough runs for a verdict"));
        }
        line.push_str(".</p>");
        h.push_str(&line);
    }
    for w in env_warning_lines(c, &c.runs[0]) {
        h.push_str(&format!("<div class=\"warn\">environment differs: {}</div>", esc(&w)));
    }

    // The rows that changed, worst first, then by size of the change.
    let mut changed: Vec<(usize, &CompareRow)> = Vec::new();
    for row in &c.rows {
        for (i, cell) in row.cells.iter().enumerate().skip(1) {
            if matches!(cell.verdict, Verdict::Better | Verdict::Worse | Verdict::Changed) {
                changed.push((i, row));
            }
        }
    }
    let rank = |v: Verdict| match v {
        Verdict::Worse => 0,
        Verdict::Better => 1,
        _ => 2,
    };
    let size = |(i, row): &(usize, &CompareRow)| row.cells[*i].ratio().map_or(0.0, |r| r.ln().abs());
    changed.sort_by(|a, b| {
        rank(a.1.cells[a.0].verdict).cmp(&rank(b.1.cells[b.0].verdict)).then(size(b).total_cmp(&size(a)))
    });
    h.push_str("<h3>What changed</h3>");
    if changed.is_empty() {
        h.push_str("<p>Nothing changed beyond the noise band: no row is better or worse.</p>");
    } else {
        let cols = ["benchmark", "metric", "side", "baseline", "value", "change [95% CI] verdict"];
        h.push_str("<div class=\"scroll\"><table class=\"stack\">");
        h.push_str(&head_row(&cols.map(String::from)));
        for (i, row) in changed {
            let cell = &row.cells[i];
            let fmt = |v: Option<f64>| v.map(|v| row.unit.format(v)).unwrap_or_else(|| "-".into());
            h.push_str(&format!(
                "<tr>{}{}{}{}{}{}</tr>",
                td("", "", &case_link(benches, &row.benchmark)),
                td(cols[1], "", &esc(&row.label())),
                td(cols[2], "", &esc(&c.runs[i])),
                td(cols[3], "num", &esc(&fmt(row.cells[0].value))),
                td(cols[4], "num", &esc(&fmt(cell.value))),
                td(cols[5], verdict_class(cell.verdict), &esc(&change_text(cell)))
            ));
        }
        h.push_str("</table></div>");
    }

    h.push_str("<h3>How sure</h3><ul>");
    for l in footer_lines(c) {
        h.push_str(&format!("<li>{}</li>", esc(&l)));
    }
    h.push_str("</ul>");
    let compared: BTreeSet<&str> = c.rows.iter().map(|r| r.benchmark.as_str()).collect();
    let missing: Vec<String> = benches
        .iter()
        .flat_map(|b| &b.cases)
        .filter(|(k, _)| !compared.contains(k.as_str()))
        .map(|(k, _)| case_link(benches, k))
        .collect();
    if !missing.is_empty() {
        h.push_str(&format!(
            "<p>Not compared (the baseline or every other side lacks them; see the full tables): {}.</p>",
            missing.join(", ")
        ));
    }
    h
}

fn single_summary(runs: &[Run], benches: &[Bench]) -> String {
    let mut h = String::new();
    for run in runs {
        let rows = rows_of_run(run, &RowOptions::default());
        let cases = rows.iter().map(|r| r.benchmark.as_str()).collect::<BTreeSet<_>>().len();
        let bad: Vec<&MetricRow> = rows.iter().filter(|r| r.status != "complete").collect();
        h.push_str(&format!(
            "<p class=\"lead\"><b>{}</b>: {} {}, {cases} benchmark case(s){}. {}</p>",
            esc(&run.label()),
            run.kind.name(),
            run.status.name(),
            if bad.is_empty() { ", all complete".to_string() } else { format!(", {} not complete", bad.len()) },
            if runs.len() > 1 {
                "Not compared: these runs share no benchmark case (a live benchmark and a simulated workload \
                 are different benchmarks), so each is shown on its own."
            } else {
                "One side, so no verdicts: name a baseline and another run \
                 (<code>schedlab report BASE RUN</code>) to compare."
            }
        ));
        let cols = ["benchmark", "metric", "value", "95% CI", "status"];
        h.push_str("<div class=\"scroll\"><table class=\"stack\">");
        h.push_str(&head_row(&cols.map(String::from)));
        for r in &rows {
            h.push_str(&format!(
                "<tr>{}{}{}{}{}</tr>",
                td("", "", &case_link(benches, &r.benchmark)),
                td(cols[1], "", &esc(&r.metric)),
                td(cols[2], "num", &esc(&headline_value(r))),
                td(cols[3], "num", &esc(&ci_text(r))),
                td(cols[4], "", &esc(&r.status))
            ));
        }
        h.push_str("</table></div>");
    }
    h
}

/// The interval a row's headline figure has: of the median for
/// distributions, of the mean otherwise (over invocations; "-" with one).
fn ci_text(r: &MetricRow) -> String {
    let Some(s) = &r.summary else { return "-".into() };
    match if r.is_distribution() { s.median_ci } else { s.mean_ci } {
        Some(ci) => format!("{} … {}", r.unit.format(ci.lo), r.unit.format(ci.hi)),
        None => "-".into(),
    }
}

fn bench_section(
    bench: &Bench,
    merged: &[Run],
    pooled: &[Run],
    comparison: Option<&Comparison>,
    timelines_apart: bool,
) -> String {
    let mut h = format!("<section id=\"{}\" class=\"bench\"><h2>{}</h2>", slug(&bench.name), esc(&bench.name));
    if !bench.common.is_empty() {
        h.push_str(&format!("<p class=\"params\">{}</p>", esc(&bench.common)));
    }
    let compared = |c: &Comparison| bench.cases.iter().any(|(k, _)| c.rows.iter().any(|r| &r.benchmark == k));
    let table = match comparison {
        Some(c) if compared(c) => bench_comparison_table(bench, c),
        // Not on the baseline and another side: each side's own results.
        Some(_) => merged
            .iter()
            .filter(|r| r.benchmarks.iter().any(|b| b.name == bench.name))
            .map(|r| {
                format!(
                    "<p class=\"muted\">Only {} has this benchmark: not compared.</p>{}",
                    esc(&r.label()),
                    bench_run_table(bench, r)
                )
            })
            .collect(),
        // Several runs not compared (they share no case): each one's own.
        None if merged.len() > 1 => merged
            .iter()
            .filter(|r| r.benchmarks.iter().any(|b| b.name == bench.name))
            .map(|r| format!("<p class=\"muted\">{}</p>{}", esc(&r.label()), bench_run_table(bench, r)))
            .collect(),
        None => bench_run_table(bench, &merged[0]),
    };
    let (figures, omitted) = bench_plots(bench, merged, pooled, comparison.is_some(), timelines_apart);
    if figures.is_empty() && omitted.is_empty() {
        h.push_str(&table);
    } else {
        h.push_str(&format!("<div class=\"pair\"><div class=\"tables\">{table}</div><div class=\"figs\">"));
        for (caption, svg) in &figures {
            h.push_str(&format!("<figure>{}<figcaption>{}</figcaption></figure>", strip_xml_decl(svg), esc(caption)));
        }
        for o in &omitted {
            h.push_str(&format!("<p class=\"omitted\">{}</p>", esc(o)));
        }
        h.push_str("</div></div>");
    }
    h.push_str(&bench_notes(bench, pooled));
    h.push_str("</section>");
    h
}

/// The comparison rows of one benchmark, a header row per case.
fn bench_comparison_table(bench: &Bench, c: &Comparison) -> String {
    let mut cols = vec!["metric".to_string()];
    for (i, r) in c.runs.iter().enumerate() {
        cols.push(format!("{r}{}", if i == 0 { " (baseline)" } else { "" }));
        if i > 0 {
            cols.push(format!("{r}: change [95% CI] verdict"));
        }
    }
    let mut t = format!("<div class=\"scroll\"><table class=\"stack\">{}", head_row(&cols));
    let width = cols.len();
    for (key, label) in &bench.cases {
        let rows: Vec<&CompareRow> = c.rows.iter().filter(|r| &r.benchmark == key).collect();
        if !label.is_empty() {
            t.push_str(&format!("<tr class=\"case\"><th colspan=\"{width}\">{}</th></tr>", esc(label)));
        }
        if rows.is_empty() {
            t.push_str(&format!(
                "<tr><td colspan=\"{width}\" class=\"muted\">not compared: the baseline or every other side lacks this case</td></tr>"
            ));
        }
        for row in rows {
            t.push_str(&format!("<tr>{}", td("", "", &esc(&row.label()))));
            let mut col = 1;
            for (i, cell) in row.cells.iter().enumerate() {
                let v = cell.value.map(|v| row.unit.format(v)).unwrap_or_else(|| "-".into());
                t.push_str(&td(&cols[col], "num", &esc(&v)));
                col += 1;
                if i > 0 {
                    t.push_str(&td(&cols[col], verdict_class(cell.verdict), &esc(&change_text(cell))));
                    col += 1;
                }
            }
            t.push_str("</tr>");
        }
    }
    t.push_str("</table></div>");
    t
}

fn bench_run_table(bench: &Bench, run: &Run) -> String {
    let rows = rows_of_run(run, &RowOptions { all_metrics: true, ..Default::default() });
    let cols = ["metric", "value", "95% CI", "p99", "max", "n"];
    let mut t = format!("<div class=\"scroll\"><table class=\"stack\">{}", head_row(&cols.map(String::from)));
    for (key, label) in &bench.cases {
        if !label.is_empty() {
            t.push_str(&format!("<tr class=\"case\"><th colspan=\"6\">{}</th></tr>", esc(label)));
        }
        for r in rows.iter().filter(|r| &r.benchmark == key) {
            let (p99, max, n) = match &r.summary {
                Some(s) => (r.unit.format(s.p99), r.unit.format(s.max), group_thousands(s.n as f64)),
                None => ("-".into(), "-".into(), "0".into()),
            };
            let vals = [esc(&headline_value(r)), esc(&ci_text(r)), esc(&p99), esc(&max), n];
            t.push_str(&format!("<tr>{}", td("", "", &esc(&r.metric))));
            for (col, v) in cols[1..].iter().zip(vals) {
                t.push_str(&td(col, "num", &v));
            }
            t.push_str("</tr>");
            if r.status != "complete" {
                t.push_str(&format!("<tr><td colspan=\"6\" class=\"worse\">{}</td></tr>", esc(&r.status)));
            }
        }
    }
    t.push_str("</table></div>");
    t
}

/// What each benchmark said about its own numbers (VM effects, missed
/// periods and where their time went, filters, throttling), per side.
fn bench_notes(bench: &Bench, pooled: &[Run]) -> String {
    // (case label, warning) -> the sides that gave it, in order.
    let mut notes: Vec<((String, String), Vec<String>)> = Vec::new();
    for run in pooled {
        for b in run.benchmarks.iter().filter(|b| b.name == bench.name) {
            let case = bench.cases.iter().find(|(k, _)| *k == b.key()).map(|(_, l)| l.clone()).unwrap_or_default();
            for w in &b.warnings {
                let key = (case.clone(), w.clone());
                match notes.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, sides)) => sides.push(run.label()),
                    None => notes.push((key, vec![run.label()])),
                }
            }
        }
    }
    let items: Vec<String> = notes
        .into_iter()
        .map(|((case, w), sides)| {
            let sides = sides.join(", ");
            let who = if case.is_empty() { sides } else { format!("{sides} · {case}") };
            format!("<li><b>{}</b>: {}</li>", esc(&who), esc(&w))
        })
        .collect();
    if items.is_empty() {
        String::new()
    } else {
        format!("<h3>Notes</h3><ul class=\"warn\">{}</ul>", items.concat())
    }
}

type Figure = (String, String);

/// The benchmark's plots, headline figures first, and a line for each chart
/// left out because it would show nothing. A side keeps its colour in every
/// chart (its position among the sides).
/// `timelines_apart`: the runs' timelines are drawn together in their own
/// section ([`timelines_section`]), not here.
fn bench_plots(
    bench: &Bench,
    merged: &[Run],
    pooled: &[Run],
    compared: bool,
    timelines_apart: bool,
) -> (Vec<Figure>, Vec<String>) {
    let mut figures = Vec::new();
    let mut omitted = Vec::new();
    let mut add = |what: String, caption: String, drawn: Result<String, PlotError>| match drawn {
        Ok(svg) => figures.push((caption, svg)),
        Err(PlotError::Zero(_)) => omitted.push(format!("{what}: every value is 0 on every side, so no chart.")),
        Err(PlotError::Empty(_)) => omitted.push(format!("{what}: no data to draw.")),
        Err(e) => omitted.push(format!("{what}: {e}")),
    };
    // Lines labelled with a run's label get that run's colour.
    let sized = |mut c: Chart| {
        c.size = PLOT_SIZE;
        c.colors = c.lines.iter().map(|l| pooled.iter().position(|r| r.label() == l.label).unwrap_or(0)).collect();
        c
    };

    let swept: Vec<(String, String, String)> =
        sweeps(pooled).into_iter().filter(|(name, _, _)| *name == bench.name).collect();
    for (name, x, metric) in &swept {
        let chart = sized(scaling(pooled, name, x, metric));
        add(
            format!("{metric} against {x}"),
            format!("{metric} against {x}: mean of repetitions (median of a distribution), invocations pooled"),
            svg_string(&chart),
        );
    }

    // Bars: one chart per headline scalar metric (a sweep draws its own).
    let mut scalar: Vec<(String, Unit)> = Vec::new();
    for b in merged.iter().flat_map(|r| &r.benchmarks).filter(|b| b.name == bench.name) {
        for m in b.metrics.iter().filter(|m| m.headline && matches!(m.data, MetricData::Samples { .. })) {
            if !scalar.iter().any(|(n, _)| n == &m.name) && !swept.iter().any(|(_, _, s)| s == &m.name) {
                scalar.push((m.name.clone(), m.unit));
            }
        }
    }
    for (metric, unit) in scalar {
        let chart = bar_chart(bench, merged, &metric, unit, compared);
        let what = chart.title.clone();
        let caption = if compared {
            format!("{metric}: each side's typical value over its invocations (geometric mean, as the comparison uses) with its 95% interval; no whisker with fewer than two invocations")
        } else {
            format!("{metric}: mean with its 95% interval over invocations; no whisker with fewer than two invocations")
        };
        add(what, caption, bars_svg_string(&chart));
    }

    // Latency percentiles: one chart per case and latency metric, sides overlaid.
    for (key, label) in &bench.cases {
        let names = side_names(pooled, key);
        let mut metrics: Vec<&str> = Vec::new();
        for b in pooled.iter().flat_map(|r| &r.benchmarks).filter(|b| &b.key() == key) {
            for m in b.metrics.iter().filter(|m| matches!(m.data, MetricData::Histogram { .. })) {
                if !metrics.contains(&m.name.as_str()) {
                    metrics.push(&m.name);
                }
            }
        }
        for metric in metrics {
            let (sides, hists): (Vec<usize>, Vec<(String, &schedlab_core::LatencyHistogram)>) = pooled
                .iter()
                .zip(&names)
                .enumerate()
                .filter_map(|(i, (r, n))| {
                    let b = r.benchmarks.iter().find(|b| &b.key() == key)?;
                    match &b.metric(metric)?.data {
                        MetricData::Histogram { histogram, .. } if !histogram.is_empty() => {
                            Some((i, (n.clone(), histogram)))
                        }
                        _ => None,
                    }
                })
                .unzip();
            let what = if label.is_empty() { metric.to_string() } else { format!("{metric} · {label}") };
            let mut chart = latency_percentiles(&what, &hists);
            chart.size = PLOT_SIZE;
            chart.colors = sides;
            if hists.iter().any(|(_, h)| h.min() == Some(0)) {
                chart.y_label = "latency (log scale; 0 drawn at the bottom)".into();
            }
            add(
                what.clone(),
                format!("{what}: latency percentiles of every invocation's samples pooled; each line runs from the minimum to the maximum"),
                svg_string(&chart),
            );
        }
    }

    let mut seen = BTreeSet::new();
    for b in pooled.iter().flat_map(|r| &r.benchmarks).filter(|b| b.name == bench.name) {
        for m in b.metrics.iter().filter(|m| matches!(m.data, MetricData::Series { .. })) {
            if seen.insert(m.name.clone()) {
                let mut chart = series(pooled, &bench.name, &m.name);
                chart.size = PLOT_SIZE;
                add(format!("{} over time", m.name), format!("{} over time", m.name), svg_string(&chart));
            }
        }
    }

    // Stored scheduler timelines (`run --observe`, `sim --timeline`): each
    // side's first of each case, live and simulated drawn alike.
    let mut problems = Vec::new();
    let has_timeline = |r: &Run| r.benchmarks.iter().any(|b| b.name == bench.name && b.timeline.is_some());
    if timelines_apart && merged.iter().any(has_timeline) {
        problems.push("scheduler timelines: drawn beside the other runs' under Scheduler timelines below.".into());
    }
    for (key, label) in bench.cases.iter().filter(|_| !timelines_apart) {
        for (run, name) in merged.iter().zip(side_names(merged, key)) {
            let Some(tl) = run.benchmarks.iter().filter(|b| &b.key() == key).find_map(|b| b.timeline.as_ref()) else {
                continue;
            };
            let what = if label.is_empty() { name.clone() } else { format!("{name} · {label}") };
            let what = format!("scheduler timeline · {what}");
            match crate::plot::timeline(tl, &what, None, crate::plot::TIMELINE_TASKS) {
                Ok(mut chart) => {
                    chart.size = PLOT_SIZE;
                    let caption = format!(
                        "{what}: each task's {} over time, from {}{}",
                        tl.primary,
                        tl.source,
                        if tl.missing.is_empty() {
                            String::new()
                        } else {
                            let m: Vec<&str> = tl.missing.iter().map(|m| m.name.as_str()).collect();
                            format!("; not available: {}", m.join(", "))
                        }
                    );
                    add(what, caption, svg_string(&chart));
                }
                Err(e) => problems.push(format!("{what}: {e}")),
            }
        }
    }
    omitted.extend(problems);
    (figures, omitted)
}

/// Most panels in the report's figure of timelines.
const MAX_PANELS: usize = 8;

/// With two or more runs that hold timelines (`run --observe`, `sim
/// --timeline`): all of them in one figure, a panel per run and case on one
/// time span and, for one quantity, one scale, so that a live run reads
/// beside its simulated twin (whose benchmark has another name). None with
/// fewer: each benchmark section draws its own.
fn timelines_section(merged: &[Run]) -> Option<String> {
    let with_timeline = |r: &&Run| r.benchmarks.iter().any(|b| b.timeline.is_some());
    if merged.iter().filter(with_timeline).count() < 2 {
        return None;
    }
    let mut panels: Vec<(String, Result<&Timeline, String>)> = Vec::new();
    for run in merged {
        let mut keys = BTreeSet::new();
        let cases: Vec<(&BenchResult, &Timeline)> = run
            .benchmarks
            .iter()
            .filter_map(|b| b.timeline.as_ref().map(|tl| (b, tl)))
            .filter(|(b, _)| keys.insert(b.key()))
            .collect();
        if cases.is_empty() {
            let why = "no stored timeline in this run (recorded by run --observe or sim --timeline)";
            panels.push((run.label(), Err(why.to_string())));
        }
        for &(b, tl) in &cases {
            let what = if cases.len() > 1 { b.key() } else { b.name.clone() };
            panels.push((timeline_source(run, &what, tl), Ok(tl)));
        }
    }
    let mut h = String::from("<section id=\"timelines\"><h2>Scheduler timelines</h2>");
    let left_out = panels.len().saturating_sub(MAX_PANELS);
    panels.truncate(MAX_PANELS);
    let quantity = panels.iter().find_map(|(_, tl)| tl.as_ref().ok()).map(|tl| tl.primary.clone()).unwrap_or_default();
    let mut fig = timeline_panels(&panels, "scheduler timelines, one panel per run", None, TIMELINE_TASKS);
    fig.size = (PLOT_SIZE.0 + 120, 100 + 240 * fig.panels.len() as u32);
    let caption = format!(
        "each task's {quantity} over time, a panel per run on one time span, panels of one quantity on one \
         scale; tasks of one kind (a class of waiters, a load's tasks) share a colour, live and simulated alike"
    );
    match panels_svg_string(&fig) {
        Ok(svg) => {
            h.push_str(&format!("<figure>{}<figcaption>{}</figcaption></figure>", strip_xml_decl(&svg), esc(&caption)))
        }
        Err(e) => h.push_str(&format!("<p class=\"omitted\">{}</p>", esc(&format!("no figure: {e}")))),
    }
    let mut lines: Vec<String> = fig.messages().map(|(t, why)| format!("{t}: {why}")).collect();
    for (title, tl) in panels.iter().filter_map(|(t, tl)| Some((t, tl.as_ref().ok()?))) {
        if !tl.missing.is_empty() {
            let m: Vec<&str> = tl.missing.iter().map(|m| m.name.as_str()).collect();
            lines.push(format!("{title}: not available: {}", m.join(", ")));
        }
        lines.extend(tl.notes.iter().map(|n| format!("{title}: {n}")));
    }
    if left_out > 0 {
        lines.push(format!("{left_out} more timeline(s) left out: `schedlab plot RUN --timeline` draws any of them"));
    }
    for l in lines {
        h.push_str(&format!("<p class=\"omitted\">{}</p>", esc(&l)));
    }
    h.push_str("</section>");
    Some(h)
}

/// Bars of one scalar metric: a group per case, a bar per side. Compared,
/// the value and interval are the comparison's (typical value of the
/// invocations and its interval); alone, the table's (mean and interval).
fn bar_chart(bench: &Bench, merged: &[Run], metric: &str, unit: Unit, compared: bool) -> BarChart {
    let y_label = if unit.ns_per_unit().is_some() || unit.symbol().is_empty() {
        metric.to_string()
    } else {
        format!("{metric} [{}]", unit.symbol())
    };
    let mut chart = BarChart::new(metric, &y_label, Some(unit));
    chart.size = (PLOT_SIZE.0, PLOT_SIZE.1 - 20);
    let keys: Vec<&(String, String)> = bench
        .cases
        .iter()
        .filter(|(k, _)| merged.iter().flat_map(|r| &r.benchmarks).any(|b| &b.key() == k && b.metric(metric).is_some()))
        .collect();
    chart.groups = keys.iter().map(|(_, l)| if l.is_empty() { bench.name.clone() } else { l.clone() }).collect();
    // Cases that differ in one parameter: its values under the bars, its name below.
    let split: Vec<Option<(&str, &str)>> =
        chart.groups.iter().map(|g| g.split_once('=').filter(|(_, v)| !v.contains('='))).collect();
    if let Some(Some((param, _))) = split.first() {
        if split.iter().all(|s| s.is_some_and(|(k, _)| k == *param)) {
            chart.x_label = param.to_string();
            chart.groups = split.iter().flatten().map(|(_, v)| v.to_string()).collect();
        }
    }
    let names = keys.first().map(|(k, _)| side_names(merged, k)).unwrap_or_default();
    for (side, (run, name)) in merged.iter().zip(names).enumerate() {
        let all = cases(&run.benchmarks, true);
        let bars = keys
            .iter()
            .map(|(k, _)| {
                let case = all.iter().find(|c| &c.key == k)?;
                if compared {
                    let values = case.replicate_values(metric, Stat::Mean, None);
                    let value = typical(&values)?;
                    Some(Bar { value, interval: replicate_interval(&values).map(|i| (i.lo, i.hi)) })
                } else {
                    let s = case.summary(metric)?;
                    Some(Bar { value: s.mean, interval: s.mean_ci.map(|i| (i.lo, i.hi)) })
                }
            })
            .collect::<Vec<Option<Bar>>>();
        // A side without this metric is left out, not drawn empty.
        if bars.iter().any(Option::is_some) {
            chart.series.push((name, bars));
            chart.colors.push(side);
        }
    }
    chart
}

fn strip_xml_decl(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => svg,
    }
}

/// One column per side; rows whose values differ between sides are
/// highlighted.
fn environment_table(runs: &[Run]) -> String {
    let envs: Vec<Environment> = runs.iter().map(|r| r.env_start.clone().unwrap_or_default()).collect();
    let mut rows: Vec<(&str, Vec<String>)> = vec![
        ("run", runs.iter().map(|r| r.label()).collect()),
        ("kind / status", runs.iter().map(|r| format!("{} / {}", r.kind.name(), r.status.name())).collect()),
        ("started", runs.iter().map(|r| format_unix_ms(r.started_unix_ms)).collect()),
        ("host", runs.iter().map(|r| r.host.clone()).collect()),
        (
            "schedlab",
            runs.iter().map(|r| format!("{} {}", r.tool.version, r.tool.git_rev.clone().unwrap_or_default())).collect(),
        ),
    ];
    let u = |v: Option<String>| v.unwrap_or_else(|| "unknown".into());
    type Field = (&'static str, fn(&Environment) -> Option<String>);
    let fields: Vec<Field> = vec![
        ("kernel", |e| e.kernel_release.clone()),
        ("kernel version", |e| e.kernel_version.clone()),
        ("preemption", |e| e.preempt_model.clone()),
        ("HZ", |e| e.hz.map(|v| v.to_string())),
        ("clocksource", |e| e.clocksource.clone()),
        ("CPU", |e| e.cpu_model.clone()),
        ("online CPUs", |e| e.online_cpus.as_ref().map(|c| c.len().to_string())),
        ("SMT", |e| e.smt_active.map(|v| v.to_string())),
        ("governor", |e| e.governors.as_ref().map(|g| g.join(","))),
        ("virtualization", |e| e.virtualization.clone()),
        ("autogroup", |e| e.autogroup_enabled.map(|v| v.to_string())),
        ("RT runtime/period us", |e| match (e.rt_runtime_us, e.rt_period_us) {
            (Some(r), Some(p)) => Some(format!("{r}/{p}")),
            _ => None,
        }),
    ];
    let identity = rows.len();
    for (name, f) in fields {
        rows.push((name, envs.iter().map(|e| u(f(e))).collect()));
    }
    let mut t = String::from("<div class=\"scroll\"><table>");
    for (i, (name, vals)) in rows.into_iter().enumerate() {
        // Run identity rows always differ; only the machine's fields are flagged.
        let differs = i >= identity && vals.iter().collect::<BTreeSet<_>>().len() > 1;
        t.push_str(&format!(
            "<tr{}><th>{}{}</th>",
            if differs { " class=\"diff\"" } else { "" },
            esc(name),
            if differs { " (differs)" } else { "" }
        ));
        for v in vals {
            t.push_str(&format!("<td>{}</td>", esc(&v)));
        }
        t.push_str("</tr>");
    }
    t.push_str("</table></div>");
    t
}

fn run_table(run: &Run) -> String {
    let mut t = String::from(
        "<div class=\"scroll\"><table><tr><th>benchmark</th><th>condition</th><th>metric</th><th>value</th><th>p99</th><th>max</th><th>n</th></tr>",
    );
    for r in rows_of_run(run, &RowOptions { all_metrics: true, ..Default::default() }) {
        let (p99, max, n) = match &r.summary {
            Some(s) => (r.unit.format(s.p99), r.unit.format(s.max), s.n.to_string()),
            None => ("-".into(), "-".into(), "0".into()),
        };
        t.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            esc(&r.benchmark),
            esc(&r.condition),
            esc(&r.metric),
            esc(&headline_value(&r)),
            esc(&p99),
            esc(&max),
            n
        ));
    }
    t.push_str("</table></div>");
    t
}

fn comparison_table(c: &Comparison) -> String {
    let mut t = String::from("<div class=\"scroll\"><table><tr><th>benchmark</th><th>metric</th>");
    for (i, r) in c.runs.iter().enumerate() {
        t.push_str(&format!("<th>{}{}</th>", esc(r), if i == 0 { " (baseline)" } else { "" }));
        if i > 0 {
            t.push_str("<th>change [95% CI] verdict</th>");
        }
    }
    t.push_str("</tr>");
    for row in &c.rows {
        t.push_str(&format!("<tr><td>{}</td><td>{}</td>", esc(&row.benchmark), esc(&row.label())));
        for (i, cell) in row.cells.iter().enumerate() {
            let v = cell.value.map(|v| row.unit.format(v)).unwrap_or_else(|| "-".into());
            t.push_str(&format!("<td class=\"num\">{}</td>", esc(&v)));
            if i > 0 {
                t.push_str(&format!("<td class=\"{}\">{}</td>", verdict_class(cell.verdict), esc(&change_text(cell))));
            }
        }
        t.push_str("</tr>");
    }
    t.push_str("</table></div>");
    t
}

/// Benchmarks whose cases differ in exactly one numeric parameter: (bench,
/// swept parameter, headline metric) for a scaling curve.
fn sweeps(runs: &[Run]) -> Vec<(String, String, String)> {
    let mut by_bench: BTreeMap<String, Vec<&schedlab_core::BenchResult>> = BTreeMap::new();
    for b in runs.iter().flat_map(|r| &r.benchmarks) {
        by_bench.entry(b.name.clone()).or_default().push(b);
    }
    let mut out = Vec::new();
    for (name, cases) in by_bench {
        if cases.len() < 3 {
            continue;
        }
        let keys: BTreeSet<&String> = cases.iter().flat_map(|b| b.params.keys()).collect();
        let varying: Vec<&String> = keys
            .into_iter()
            .filter(|k| {
                let vals: BTreeSet<String> =
                    cases.iter().map(|b| b.params.get(*k).map(|v| v.to_string()).unwrap_or_default()).collect();
                vals.len() > 1
            })
            .collect();
        if let [x] = varying.as_slice() {
            if cases.iter().all(|b| b.params.get(*x).is_some_and(|v| v.is_number())) {
                for m in cases[0].metrics.iter().filter(|m| m.headline) {
                    out.push((name.clone(), (*x).clone(), m.name.clone()));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{compare_sides, CompareOptions};
    use schedlab_core::*;

    fn rep(runs: &[Run]) -> String {
        let sides: Vec<Side> = runs.iter().cloned().map(Side::of).collect();
        let c = (sides.len() >= 2).then(|| compare_sides(&sides, &CompareOptions::fixed(0.02)).unwrap());
        report(&sides, c.as_ref())
    }

    fn cond() -> Condition {
        Condition::Live { requested: SchedCondition::default(), applied: None, loads: vec![] }
    }

    /// A benchmark case with three invocations: a headline "rate" and a
    /// latency histogram starting at `base` ns.
    fn bench(name: &str, placement: &str, rate: f64, base: u64) -> Vec<BenchResult> {
        (0..3)
            .map(|i| {
                let mut b = BenchResult::new(name, cond(), 0).param("placement", placement);
                b.invocation = i;
                b.status = BenchStatus::Complete;
                let r = rate * (1.0 + 0.01 * i as f64);
                b.metrics.push(
                    Metric::samples("rate", Unit::PerSecond, Direction::HigherIsBetter, vec![r, r * 1.01, r * 0.99])
                        .headline(),
                );
                let mut h = LatencyHistogram::new();
                for k in 0..1000 {
                    h.record(base + k * 10 + i as u64 * 7);
                }
                b.metrics.push(Metric::histogram("latency", Direction::LowerIsBetter, h));
                b
            })
            .collect()
    }

    fn run(id: i64, base: u64) -> Run {
        let tool = ToolInfo { name: "schedlab".into(), version: "0".into(), git_rev: None };
        let mut r = Run::new(RunKind::Live, tool, vec![], "h<1>".into(), 0);
        r.id = Some(id);
        r.env_start = Some(Environment { kernel_release: Some("6.18".into()), ..Default::default() });
        r.benchmarks.extend(bench("pipe", "same-cpu", 1e5, base));
        r.benchmarks.extend(bench("pipe", "cross-cpu", 5e4, base * 2));
        r
    }

    fn section<'a>(html: &'a str, id: &str) -> &'a str {
        let start = html.find(&format!("<section id=\"{id}\"")).unwrap_or_else(|| panic!("no section {id}"));
        let end = html[start..].find("</section>").unwrap() + start;
        &html[start..end]
    }

    #[test]
    fn report_leads_with_the_verdicts_then_one_section_per_benchmark() {
        let (mut a, mut b) = (run(1, 5000), run(2, 9000));
        a.benchmarks.extend(bench("spawn", "-", 2000.0, 50_000));
        b.benchmarks.extend(bench("spawn", "-", 2000.0, 50_000));
        let html = rep(&[a, b]);
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(!html.contains("<link") && !html.contains("src=\""), "no external resources");
        let at = |id: &str| html.find(&format!("<section id=\"{id}\"")).unwrap_or_else(|| panic!("no {id}"));
        let order = ["summary", "bench-pipe", "bench-spawn", "environment", "full"].map(at);
        assert!(order.windows(2).all(|w| w[0] < w[1]), "sections in order: {order:?}");
        assert!(html.find("<table").unwrap() > at("summary"), "nothing precedes the summary");

        let summary = section(&html, "summary");
        assert!(summary.contains("<b>#2</b> against baseline <b>#1</b>"), "{summary}");
        // The latency rose by 80 % (worse); rates did not change.
        assert!(summary.contains("<span class=\"worse\">8 worse</span>"), "{summary}");
        assert!(summary.contains("<span class=\"better\">0 better</span>"), "{summary}");
        assert!(summary.contains("What changed") && summary.contains("latency p50"));
        assert!(summary.contains("<a href=\"#bench-pipe\">pipe · placement=cross-cpu</a>"), "{summary}");
        assert!(summary.contains("How sure") && summary.contains("Benjamini-Hochberg"));

        // Each section: its table beside its figures; the pipe section has a
        // percentile chart per case and one bar chart, spawn its own.
        let pipe = section(&html, "bench-pipe");
        assert!(pipe.contains("<div class=\"pair\"><div class=\"tables\">"));
        assert_eq!(pipe.matches("<figure>").count(), 3, "two percentile charts and one bar chart");
        assert!(pipe.contains("<tr class=\"case\"><th colspan=\"4\">placement=same-cpu</th></tr>"));
        let spawn = section(&html, "bench-spawn");
        assert_eq!(spawn.matches("<figure>").count(), 2);
        assert!(html.contains("h&lt;1&gt;"), "text is escaped");
        assert!(section(&html, "full").contains("Comparison (baseline #1)"));
    }

    #[test]
    fn different_benchmarks_never_share_a_chart() {
        // Both benchmarks call their headline metric "rate".
        let (mut a, mut b) = (run(1, 5000), run(2, 5000));
        a.benchmarks.extend(bench("spawn", "-", 2000.0, 50_000));
        b.benchmarks.extend(bench("spawn", "-", 2100.0, 50_000));
        let html = rep(&[a, b]);
        let pipe = section(&html, "bench-pipe");
        let spawn = section(&html, "bench-spawn");
        assert!(pipe.contains(">\nsame-cpu\n</text>") && !pipe.contains(">\nspawn\n</text>"));
        assert!(pipe.contains(">\nplacement\n</text>"), "the one parameter that differs names the groups");
        assert!(spawn.contains(">\nspawn\n</text>"), "spawn's bar chart names its one case");
    }

    #[test]
    fn bars_carry_the_comparisons_intervals() {
        let html = rep(&[run(1, 5000), run(2, 9000)]);
        let pipe = section(&html, "bench-pipe");
        let bars = pipe.split("<figure>").find(|f| f.contains("typical value over its invocations")).unwrap();
        // Two cases × two sides, three strokes per whisker.
        assert_eq!(bars.matches("stroke=\"#000000\" stroke-width=\"2\"").count(), 12);
    }

    #[test]
    fn charts_with_nothing_to_show_are_named_not_drawn() {
        let zero = |id| {
            let mut r = run(id, 5000);
            r.benchmarks.retain(|b| b.param_is("placement", "same-cpu"));
            for b in &mut r.benchmarks {
                let mut h = LatencyHistogram::new();
                h.record_n(0, 500);
                b.metrics.push(Metric::histogram("rt_latency", Direction::LowerIsBetter, h));
            }
            r
        };
        let html = rep(&[zero(1), zero(2)]);
        let pipe = section(&html, "bench-pipe");
        assert!(pipe.contains("<p class=\"omitted\">rt_latency: every value is 0 on every side, so no chart.</p>"));
        assert_eq!(pipe.matches("<figure>").count(), 2, "latency and rate are drawn, rt_latency is not");
    }

    #[test]
    fn environment_differences_are_highlighted() {
        let mut b = run(2, 5000);
        b.env_start = Some(Environment { kernel_release: Some("6.19".into()), ..Default::default() });
        let html = rep(&[run(1, 5000), b]);
        assert!(section(&html, "summary").contains("<div class=\"warn\">environment differs: #2 differs from #1"));
        let env = section(&html, "environment");
        assert!(env.contains("<tr class=\"diff\"><th>kernel (differs)</th><td>6.18</td><td>6.19</td></tr>"), "{env}");
        assert!(env.contains("<tr><th>HZ</th>"), "equal fields are not flagged");
    }

    #[test]
    fn benchmark_warnings_are_listed_in_their_section() {
        let mut r = run(1, 5000);
        r.benchmarks[0].warnings.push("breaktrace: a wake-up 2570.2 us late <on CPU 0>".into());
        let html = rep(&[r, run(2, 9000)]);
        let pipe = section(&html, "bench-pipe");
        assert!(
            pipe.contains(
                "<li><b>#1 · placement=same-cpu</b>: breaktrace: a wake-up 2570.2 us late &lt;on CPU 0&gt;</li>"
            ),
            "{pipe}"
        );
        assert_eq!(pipe.matches("<li>").count(), 1, "only the case that warned");
    }

    #[test]
    fn the_same_warning_from_several_sides_is_one_note() {
        let (mut a, mut b) = (run(1, 5000), run(2, 5000));
        a.benchmarks[0].warnings.push("unpinned: the scheduler chose".into());
        b.benchmarks[0].warnings.push("unpinned: the scheduler chose".into());
        let html = rep(&[a, b]);
        let pipe = section(&html, "bench-pipe");
        assert!(pipe.contains("<li><b>#1, #2 · placement=same-cpu</b>: unpinned: the scheduler chose</li>"), "{pipe}");
        assert_eq!(pipe.matches("<li>").count(), 1);
    }

    #[test]
    fn a_benchmark_one_side_lacks_shows_its_own_results() {
        let (a, mut b) = (run(1, 5000), run(2, 5000));
        b.benchmarks.extend(bench("spawn", "-", 2000.0, 50_000));
        let html = rep(&[a, b]);
        assert!(section(&html, "summary").contains("Not compared"));
        let spawn = section(&html, "bench-spawn");
        assert!(spawn.contains("Only #2 has this benchmark: not compared."), "{spawn}");
        assert!(spawn.contains("<td class=\"num\" data-label=\"value\">"), "its results table");
        // Its bars show #2 alone, in #2's colour (orange, as in pipe's charts).
        let bars = spawn.split("<figure>").find(|f| f.contains("typical value")).unwrap();
        assert!(bars.contains("#D55E00") && !bars.contains("fill=\"#0072B2\""), "{bars}");
    }

    #[test]
    fn legends_tell_sides_apart_by_their_condition() {
        let (a, mut b) = (run(1, 5000), run(2, 5000));
        for x in &mut b.benchmarks {
            x.condition = Condition::Live {
                requested: SchedCondition { policy: SchedPolicy::Fifo, priority: Some(50), ..Default::default() },
                applied: None,
                loads: vec![],
            };
        }
        let names = side_names(&[a.clone(), b], "pipe placement=same-cpu");
        assert_eq!(names, vec!["#1 other".to_string(), "#2 fifo:50".to_string()]);
        assert_eq!(side_names(&[a.clone(), a], "pipe placement=same-cpu"), vec!["#1", "#1"]);
    }

    #[test]
    fn a_parameter_sweep_gets_a_scaling_curve() {
        let mut r = run(1, 5000);
        for n in [1u64, 2, 4] {
            let mut b = BenchResult::new("exectime", cond(), 0).param("threads", n).param("mode", "fifo");
            b.status = BenchStatus::Complete;
            b.metrics.push(
                Metric::samples("worst", Unit::Milliseconds, Direction::LowerIsBetter, vec![n as f64]).headline(),
            );
            r.benchmarks.push(b);
        }
        assert_eq!(
            sweeps(std::slice::from_ref(&r)),
            vec![("exectime".to_string(), "threads".to_string(), "worst".to_string())]
        );
        let html = rep(&[r]);
        let ex = section(&html, "bench-exectime");
        assert!(ex.contains("exectime: worst against threads"));
        assert_eq!(ex.matches("<figure>").count(), 1, "the curve replaces the bars");
        assert!(ex.contains("<p class=\"params\">mode=fifo</p>"));
    }

    #[test]
    fn headings_write_parameters_as_show_does_with_units_and_only_changed_ones() {
        use crate::rows::ParamInfo;
        use schedlab_core::param::{Kind, TimeUnit};
        // A simulated run stores its durations in ns: `duration=2000000000`,
        // `ctx_switch=2000` (the default) read as `duration=2s` and nothing.
        let ns = Kind::Duration { unit: TimeUnit::Ns, min: 0, max: u64::MAX };
        let mut r = run(1, 5000);
        r.kind = RunKind::Sim;
        r.benchmarks.clear();
        for interval in [1_000_000u64, 2_000_000] {
            let mut b = BenchResult::new("sim:wakeup", cond(), 0)
                .param("duration", 2_000_000_000u64)
                .param("ctx_switch", 2000u64)
                .param("interval", interval);
            b.status = BenchStatus::Complete;
            b.metrics.push(Metric::samples("rate", Unit::PerSecond, Direction::HigherIsBetter, vec![1.0]).headline());
            r.benchmarks.push(b);
        }
        let mut params = ParamTable::new();
        let keys = [("duration", "10s"), ("ctx_switch", "2us"), ("interval", "1ms")];
        params.insert(
            "sim:wakeup".into(),
            keys.iter().map(|(k, d)| (k.to_string(), ParamInfo::new(ns, d, None))).collect(),
        );
        let html = report_with_params(&[Side::of(r.clone())], None, &params);
        let sec = section(&html, "bench-sim-wakeup");
        assert!(sec.contains("<p class=\"params\">duration=2s</p>"), "{sec}");
        assert!(!sec.contains("ctx_switch") && !sec.contains("2000000000"), "{sec}");
        // A case's row names what tells it apart, its default included.
        assert!(sec.contains(">interval=1ms</th>") && sec.contains(">interval=2ms</th>"), "{sec}");
        // A case without a parameter the others have says so.
        let mut lacking = r.benchmarks[0].clone();
        lacking.params.remove("interval");
        let mut with_lacking = r.clone();
        with_lacking.benchmarks.push(lacking);
        let html = report_with_params(&[Side::of(with_lacking)], None, &params);
        assert!(section(&html, "bench-sim-wakeup").contains(">interval=-</th>"));
        // Without the table (`report`) the parameters are shown as stored.
        let raw = rep(&[r]);
        assert!(section(&raw, "bench-sim-wakeup").contains("ctx_switch=2000 duration=2000000000"));
    }

    #[test]
    fn single_side_report_summarises_its_headline_figures() {
        let html = rep(&[run(1, 5000)]);
        let summary = section(&html, "summary");
        assert!(summary.contains("One side, so no verdicts"), "{summary}");
        assert!(summary.contains("<td data-label=\"metric\">rate</td>") && summary.contains("all complete"));
        assert!(!summary.contains("latency"), "headline figures only");
        let pipe = section(&html, "bench-pipe");
        assert_eq!(pipe.matches("<figure>").count(), 3);
        assert!(pipe.contains("mean with its 95% interval"));
        assert!(section(&html, "full").contains("Results of #1"));
    }
}

#[cfg(test)]
mod timeline_tests {
    use super::*;
    use schedlab_core::timeline::{Quantity, Timeline, TimelineTask};
    use schedlab_core::*;

    #[test]
    fn a_stored_timeline_is_drawn_in_its_benchmark_section() {
        let tool = ToolInfo { name: "schedlab".into(), version: "0".into(), git_rev: None };
        let mut r = Run::new(RunKind::Live, tool, vec![], "h".into(), 0);
        r.id = Some(1);
        let cond = Condition::Live { requested: SchedCondition::default(), applied: None, loads: vec![] };
        let mut b = BenchResult::new("wakeup", cond, 0);
        b.status = BenchStatus::Complete;
        b.metrics.push(Metric::samples("rate", Unit::PerSecond, Direction::HigherIsBetter, vec![1.0]).headline());
        let mut t = TimelineTask::new(41, "measured waiter 41", "measured");
        t.push("prio", 0, 49.0);
        let mut l = TimelineTask::new(42, "load hbsend 42", "load");
        l.push("prio", 0, 120.0);
        b.timeline = Some(Timeline {
            source: "/proc/PID/task/TID/sched".into(),
            primary: "prio".into(),
            quantities: vec![Quantity { name: "prio".into(), unit: String::new(), lower_runs_first: Some(true) }],
            missing: vec![schedlab_core::timeline::Missing { name: "lag".into(), why: "not printed".into() }],
            end_ns: 2_000_000_000,
            tasks: vec![t, l],
            notes: Vec::new(),
        });
        r.benchmarks.push(b);
        let html = report(&[Side::of(r)], None);
        assert!(html.contains("scheduler timeline"), "the timeline has a figure");
        assert!(html.contains("measured waiter 41") && html.contains("load hbsend 42"), "both tasks in the legend");
        assert!(html.contains("not available: lag"), "the missing field is named");
    }
}
