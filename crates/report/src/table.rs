//! Terminal tables in the shape of the seeds' tables: one row per benchmark
//! metric, the figure, its uncertainty and its spread.

use crate::rows::{rows_of_run, MetricRow, RowOptions};
use crate::text::{Align, Grid};
use std::collections::BTreeMap;

/// Width given to grids in the wide forms: as wide as they need.
const WIDE: usize = 10_000;
use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, CellAlignment, ContentArrangement, Table};
use schedlab_core::replicate::{cases, Case, Stat};
use schedlab_core::stats::Summary;
use schedlab_core::{model::format_unix_ms, Environment, Level, MetricData, Run, Unit, KERNEL_NOTE_PREFIX};

/// "Run #3 · live · complete · 2026-11-22 11:40:01 UTC · host vm · schedlab 0.1.0 (abc1234)"
pub fn run_header(run: &Run) -> String {
    let mut s = format!(
        "Run {} · {} · {} · {} · host {} · {} {}",
        run.label(),
        run.kind.name(),
        run.status.name(),
        format_unix_ms(run.started_unix_ms),
        run.host,
        run.tool.name,
        run.tool.version
    );
    if let Some(rev) = &run.tool.git_rev {
        s.push_str(&format!(" ({rev})"));
    }
    if let (Some(a), Some(b)) = (&run.env_start, &run.env_end) {
        if let Some(steal) = Environment::steal_percent_between(a, b) {
            s.push_str(&format!(" · steal {steal:.2}%"));
        }
    }
    s
}

/// Two or three lines describing the machine.
pub fn environment_block(env: &Environment) -> String {
    fn u<T: ToString>(v: &Option<T>) -> String {
        v.as_ref().map(|x| x.to_string()).unwrap_or_else(|| "unknown".into())
    }
    let cpus = env.online_cpus.as_ref().map(|c| c.len().to_string()).unwrap_or_else(|| "unknown".into());
    let governors = env.governors.as_ref().map(|g| g.join(",")).unwrap_or_else(|| "unknown".into());
    let rt = match (env.rt_runtime_us, env.rt_period_us) {
        (Some(-1), _) => "off".to_string(),
        (Some(r), Some(p)) => format!("{}/{} ms", r / 1000, p / 1000),
        _ => "unknown".into(),
    };
    format!(
        "kernel {} {} · preempt {} · HZ {} · clocksource {}\ncpu {} · {} CPUs · SMT {} · governor {} · VM {} · autogroup {} · RT throttling {}",
        u(&env.kernel_release),
        u(&env.kernel_version),
        u(&env.preempt_model),
        u(&env.hz),
        u(&env.clocksource),
        u(&env.cpu_model),
        cpus,
        match env.smt_active {
            Some(true) => "on",
            Some(false) => "off",
            None => "unknown",
        },
        governors,
        u(&env.virtualization),
        match env.autogroup_enabled {
            Some(true) => "on",
            Some(false) => "off",
            None => "unknown",
        },
        rt,
    )
}

/// The figure a row leads with: mean for repetitions, median for
/// distributions (a tail table follows for those).
pub fn headline_value(row: &MetricRow) -> String {
    match &row.summary {
        None => "no data".into(),
        Some(s) if row.is_distribution() => format!("p50 {}", row.unit.format(s.median)),
        Some(s) => row.unit.format(s.mean),
    }
}

fn ci_text(row: &MetricRow, s: &Summary) -> String {
    let ci = if row.is_distribution() { s.median_ci } else { s.mean_ci };
    match ci {
        Some(ci) if s.n > 1 => {
            let center = if row.is_distribution() { s.median } else { s.mean };
            if center != 0.0 {
                format!("±{:.1}%", 100.0 * (ci.hi - ci.lo) / 2.0 / center.abs())
            } else {
                "-".into()
            }
        }
        _ => "-".into(),
    }
}

fn spread_text(row: &MetricRow, s: &Summary) -> String {
    if row.is_distribution() {
        format!("p99 {} · p99.9 {} · max {}", row.unit.format(s.p99), row.unit.format(s.p999), row.unit.format(s.max))
    } else {
        let cv = s.cv.map(|cv| format!("cv {:.1}%", cv * 100.0)).unwrap_or_else(|| "cv -".into());
        format!("{} … {} · {}", row.unit.format(s.min), row.unit.format(s.max), cv)
    }
}

fn count_text(row: &MetricRow, s: &Summary) -> String {
    let inv = if row.invocations == 1 { "1 inv".to_string() } else { format!("{} inv", row.invocations) };
    let mut t = match row.kind {
        "histogram" => format!("{} samples, {inv}", s.n),
        "entities" => format!("{} entities, {inv}", s.n),
        _ => format!("{inv} × {} reps", (s.n as usize).div_ceil(row.invocations.max(1))),
    };
    if s.outliers.total() > 0 && row.kind == "samples" {
        t.push_str(&format!(", {} outlier(s)", s.outliers.total()));
    }
    if s.overflow > 0 {
        t.push_str(&format!(", {} overflow", s.overflow));
    }
    t
}

/// A case's heading: its benchmark and the parameters worth reading, those
/// that vary among the run's cases of the same benchmark or differ from
/// their defaults.
fn case_heading(case: &Case<'_>, all: &[Case<'_>], opts: &RowOptions) -> String {
    let first = case.invocations[0];
    let siblings: Vec<&BTreeMap<String, serde_json::Value>> =
        all.iter().map(|c| c.invocations[0]).filter(|b| b.name == first.name).map(|b| &b.params).collect();
    params_heading(&first.name, &first.params, first.quick, &siblings, &opts.params)
}

/// `name key=value ...` with the parameters that vary among `siblings` (the
/// same benchmark's cases shown together) or are not at their default for
/// the mode the result ran in; durations and sizes with their unit.
pub fn params_heading(
    name: &str,
    params: &BTreeMap<String, serde_json::Value>,
    quick: bool,
    siblings: &[&BTreeMap<String, serde_json::Value>],
    table: &crate::rows::ParamTable,
) -> String {
    let known = table.get(name);
    // As the parser takes it: a list as `0,5`, not JSON's `[0,5]`.
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(items) => items.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    };
    let mut out = name.to_string();
    for (k, v) in params {
        let info = known.and_then(|d| d.get(k));
        let varies = siblings.iter().any(|p| p.get(k) != Some(v));
        let default = info.is_some_and(|i| i.is_default(&text(v), quick));
        if varies || !default {
            // Durations and sizes with their unit (`interval=1ms`, not 1000).
            let shown = info.map_or_else(|| text(v), |i| i.kind.show(&text(v)));
            out.push_str(&format!(" {k}={shown}"));
        }
    }
    out
}

/// The default terminal view of a run: a block per benchmark case (a
/// heading with the parameters that matter, its condition and replicates,
/// then one line per metric: value, 95 % interval, spread), its warnings
/// under it, all within `width` columns. `run_table` is the wide form.
pub fn run_view(run: &Run, opts: &RowOptions, width: usize) -> String {
    use crate::text::{wrap, wrap_parts};
    use textwrap::core::display_width;
    let width = width.max(crate::text::MIN_WIDTH);
    let all = cases(&run.benchmarks, false);
    let blocks: Vec<(String, Vec<MetricRow>, Vec<String>)> = all
        .iter()
        .map(|c| {
            let rows = crate::rows::rows_of_case(run.id, c, opts);
            let mut heading = vec![case_heading(c, &all, opts), rows[0].condition.clone()];
            match rows.iter().find_map(|r| r.summary.as_ref().map(|s| (r, s))) {
                Some((r, _)) if r.status == "complete" => heading.push(replicates_text(c, &rows)),
                _ => heading.push(rows[0].status.clone()),
            }
            (heading.join(" · "), rows, case_warnings(c))
        })
        .collect();
    let rows = || blocks.iter().flat_map(|b| b.1.iter());
    // Columns aligned across the whole run; the label column never takes
    // more than a third of the width.
    let label_w = rows().map(|r| display_width(&view_label(r))).max().unwrap_or(0).min(width / 3);
    let value_w = rows().filter(|r| r.summary.is_some()).map(|r| display_width(&headline_value(r))).max().unwrap_or(0);
    let ci_w = rows().filter_map(|r| r.summary.as_ref().map(|s| display_width(&ci_text(r, s)))).max().unwrap_or(0);
    let detail_col = 2 + label_w + 2 + value_w + 2 + ci_w + 2;
    let mut out: Vec<String> = Vec::new();
    // A warning shared by several cases of a benchmark is said once.
    let mut said: Vec<(String, String)> = Vec::new();
    for (case, (heading, rows, warnings)) in all.iter().zip(&blocks) {
        let bench = &case.invocations[0].name;
        out.push(wrap(heading, width, 4));
        for row in rows {
            let label = view_label(row);
            let Some(s) = &row.summary else {
                out.push(wrap(&format!("  {label}  {}", row.status), width, 4));
                continue;
            };
            let mut parts = spread_parts(row, s);
            if let Some(p) = &opts.profile {
                let stat = if row.is_distribution() { Stat::P50 } else { Stat::Mean };
                if let Some(b) = p.bands.get(&(row.benchmark.clone(), row.metric.clone(), stat)) {
                    parts.push(format!("run-to-run ±{:.1}%", b * 100.0));
                }
            }
            let head = format!(
                "  {label:<lw$}  {value:>vw$}  {ci:>cw$}  ",
                label = label,
                lw = label_w,
                value = headline_value(row),
                vw = value_w,
                ci = ci_text(row, s),
                cw = ci_w
            );
            let fits_row = display_width(&label) <= label_w && detail_col + 16 <= width;
            if fits_row {
                let lines = wrap_parts(&parts, width - detail_col, width, detail_col);
                out.push(format!("{head}{}", lines[0]).trim_end().to_string());
                for l in &lines[1..] {
                    out.push(format!("{}{l}", " ".repeat(detail_col)));
                }
            } else {
                // Narrow: the label on its own line, the figures under it,
                // the spread beside them where it fits.
                out.push(format!("  {label}"));
                let figures = format!("    {}  {}  ", headline_value(row), ci_text(row, s));
                let fw = display_width(&figures);
                if fw + 16 <= width {
                    let lines = wrap_parts(&parts, width - fw, width, fw);
                    out.push(format!("{figures}{}", lines[0]).trim_end().to_string());
                    for l in &lines[1..] {
                        out.push(format!("{}{l}", " ".repeat(fw)));
                    }
                } else {
                    out.push(figures.trim_end().to_string());
                    for l in wrap_parts(&parts, width - 4, width, 4) {
                        out.push(format!("    {l}"));
                    }
                }
            }
            if let Some(f) = &row.filtered {
                let text = format!("k-sigma: {}", ksigma_text(row, f));
                out.push(format!("    {}", wrap(&text, width - 4, 4).replace('\n', "\n    ")));
            }
        }
        for w in warnings {
            if (!opts.all_metrics && is_counter_note(w)) || said.iter().any(|(b, t)| b == bench && t == w) {
                continue;
            }
            said.push((bench.clone(), w.clone()));
            out.push(wrap(&format!("  ! {w}"), width, 4));
        }
        out.push(String::new());
    }
    out.push(wrap(
        "value: mean of the invocations (p50 for latency distributions) · ±: half-width of its 95% interval \
         across invocations · then min … max and the coefficient of variation, or the tail percentiles",
        width,
        0,
    ));
    let mut text = out.join("\n");
    for t in sweep_tables(run, width).into_iter().chain(entity_tables(run, width, &opts.params)) {
        text.push_str("\n\n");
        text.push_str(&t);
    }
    text
}

/// E3's k-sigma filter beside the raw figures: "mean · sd · max (N dropped beyond Kσ)".
fn ksigma_text(row: &MetricRow, f: &schedlab_core::stats::Filtered) -> String {
    match &f.summary {
        Some(fs) => format!(
            "mean {} · sd {} · max {} ({} dropped beyond {}σ)",
            row.unit.format(fs.mean),
            row.unit.format(fs.sd),
            row.unit.format(fs.max),
            f.dropped,
            f.k
        ),
        None => "-".into(),
    }
}

/// "3 invocations × 2 reps" for a case (repetition metrics), or just the
/// invocations when it has only distributions.
fn replicates_text(case: &Case<'_>, rows: &[MetricRow]) -> String {
    let inv = case.invocations.len();
    let inv_text = if inv == 1 { "1 invocation".to_string() } else { format!("{inv} invocations") };
    match rows.iter().find(|r| r.kind == "samples").and_then(|r| r.summary.as_ref().map(|s| (r, s))) {
        Some((r, s)) => format!("{inv_text} × {} reps", (s.n as usize).div_ceil(r.invocations.max(1))),
        None => inv_text,
    }
}

/// Whether a case warning (as [`case_warnings`] gives it) explains absent
/// kernel counters: views show it only with the non-headline metrics
/// (`show --all`), beside those counters.
pub fn is_counter_note(w: &str) -> bool {
    let text = w.strip_prefix("(invocation ").and_then(|r| r.split_once(") ")).map_or(w, |(_, t)| t);
    text.starts_with(KERNEL_NOTE_PREFIX)
}

/// Each distinct warning of a case once; one that only some invocations
/// raised names them.
pub fn case_warnings(case: &Case<'_>) -> Vec<String> {
    let mut seen: Vec<(&str, Vec<u32>)> = Vec::new();
    for b in &case.invocations {
        for w in &b.warnings {
            match seen.iter_mut().find(|(t, _)| *t == w.as_str()) {
                Some((_, inv)) => inv.push(b.invocation),
                None => seen.push((w, vec![b.invocation])),
            }
        }
    }
    seen.into_iter()
        .map(|(text, inv)| {
            if inv.len() == case.invocations.len() {
                text.to_string()
            } else {
                let list = inv.iter().map(|i| (i + 1).to_string()).collect::<Vec<_>>().join(",");
                format!("(invocation {list}) {text}")
            }
        })
        .collect()
}

/// The spread of a row as separate phrases, for wrapping at their seams.
fn spread_parts(row: &MetricRow, s: &Summary) -> Vec<String> {
    let mut parts = if row.is_distribution() {
        vec![
            format!("p99 {}", row.unit.format(s.p99)),
            format!("p99.9 {}", row.unit.format(s.p999)),
            format!("max {}", row.unit.format(s.max)),
        ]
    } else {
        let cv = s.cv.map(|cv| format!("cv {:.1}%", cv * 100.0)).unwrap_or_else(|| "cv -".into());
        vec![format!("{} … {}", row.unit.format(s.min), row.unit.format(s.max)), cv]
    };
    if s.outliers.total() > 0 && row.kind == "samples" {
        parts.push(format!("{} outlier(s)", s.outliers.total()));
    }
    if s.overflow > 0 {
        parts.push(format!("{} beyond the histogram", s.overflow));
    }
    parts
}

/// The wide table of `schedlab show --wide`: every column on one line per
/// metric, as wide as it needs (never reads the terminal).
pub fn run_table(run: &Run, opts: &RowOptions) -> String {
    let rows = rows_of_run(run, opts);
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Disabled);
    let mut header = vec!["benchmark", "condition", "metric", "value", "95% CI", "spread", "n"];
    if opts.profile.is_some() {
        header.push("run-to-run");
    }
    if opts.ksigma.is_some() {
        header.push("k-sigma filtered");
    }
    table.set_header(header);
    let mut last_bench = String::new();
    for row in &rows {
        let bench = if row.benchmark == last_bench { String::new() } else { row.benchmark.clone() };
        let cond = if bench.is_empty() { String::new() } else { row.condition.clone() };
        last_bench = row.benchmark.clone();
        let mut cells = vec![Cell::new(bench), Cell::new(cond), Cell::new(metric_label(row))];
        match &row.summary {
            Some(s) => {
                cells.push(Cell::new(headline_value(row)).set_alignment(CellAlignment::Right));
                cells.push(Cell::new(ci_text(row, s)).set_alignment(CellAlignment::Right));
                cells.push(Cell::new(spread_text(row, s)));
                cells.push(Cell::new(count_text(row, s)));
            }
            None => {
                cells.push(Cell::new(row.status.clone()));
                for _ in 0..3 {
                    cells.push(Cell::new(""));
                }
            }
        }
        if let Some(p) = &opts.profile {
            let stat = if row.is_distribution() { Stat::P50 } else { Stat::Mean };
            let band = p.bands.get(&(row.benchmark.clone(), row.metric.clone(), stat));
            cells.push(Cell::new(band.map_or("-".into(), |b| format!("±{:.1}%", b * 100.0))));
        }
        if let Some(f) = &row.filtered {
            cells.push(Cell::new(ksigma_text(row, f)));
        }
        table.add_row(cells);
    }
    let mut out = table.to_string();
    for t in sweep_tables(run, WIDE).into_iter().chain(entity_tables(run, WIDE, &opts.params)) {
        out.push('\n');
        out.push_str(&t);
    }
    out
}

/// One table per benchmark swept across one parameter (several cases that
/// differ in that parameter only, e.g. build over jobs or exectime over
/// threads), in E4's shape: one row per value, each repetition metric's
/// mean, and the speed-up of the first headline metric against the first
/// value, with the best value named.
pub fn sweep_tables(run: &Run, width: usize) -> Vec<String> {
    let all = cases(&run.benchmarks, true);
    let mut names: Vec<&str> = Vec::new();
    for c in &all {
        if !names.contains(&c.invocations[0].name.as_str()) {
            names.push(&c.invocations[0].name);
        }
    }
    let mut out = Vec::new();
    for name in names {
        let group: Vec<_> = all.iter().filter(|c| c.invocations[0].name == name).collect();
        if group.len() < 2 {
            continue;
        }
        let params = |i: usize| &group[i].invocations[0].params;
        let keys: Vec<&String> = params(0).keys().collect();
        let varying: Vec<&&String> =
            keys.iter().filter(|k| (1..group.len()).any(|i| params(i).get(**k) != params(0).get(**k))).collect();
        let [swept] = varying[..] else { continue };
        // A sweep is over numbers (jobs, threads, copies), not over modes.
        if !(0..group.len()).all(|i| params(i).get(*swept).is_some_and(|v| v.is_number())) {
            continue;
        }
        // The kernel's counters are detail for `show --all`, not a column here.
        let metrics: Vec<&str> = group[0]
            .metric_names()
            .into_iter()
            .filter(|n| !n.starts_with(schedlab_core::KERNEL_METRIC_PREFIX))
            .filter(|n| group[0].metric(n).is_some_and(|m| m.data.level() == Level::Repetition))
            .collect();
        // Speed-up means something for a time or a rate only.
        let lead = metrics.iter().copied().find(|n| {
            group[0].metric(n).is_some_and(|m| {
                m.headline
                    && m.direction != schedlab_core::Direction::Neutral
                    && (matches!(m.unit, Unit::Seconds | Unit::PerSecond | Unit::PerMinute | Unit::KibPerSecond)
                        || m.name.contains("_per_"))
            })
        });
        // Values carry their units ("1.2 ms", "99%"), so headers do not.
        let mut header = vec![format!("{name} · {swept}")];
        header.extend(metrics.iter().map(|m| m.to_string()));
        if let Some(l) = lead {
            header.push(format!("speed-up ({l})"));
        }
        let mut align = vec![Align::Right; header.len()];
        align[0] = Align::Left;
        let mut table = Grid::new(header, align);
        let mean = |c: &Case<'_>, m: &str| c.summary(m).map(|s| s.mean);
        // Speed-up: how many times better than the first value (>1 is better).
        let speedup = |c: &Case<'_>| {
            let l = lead?;
            let (base, v) = (mean(group[0], l)?, mean(c, l)?);
            let better_higher = group[0].metric(l)?.direction == schedlab_core::Direction::HigherIsBetter;
            (base > 0.0 && v > 0.0).then(|| if better_higher { v / base } else { base / v })
        };
        let best = (0..group.len())
            .max_by(|&a, &b| speedup(group[a]).unwrap_or(0.0).total_cmp(&speedup(group[b]).unwrap_or(0.0)));
        for (i, c) in group.iter().enumerate() {
            let v = params(i).get(*swept).map(|v| v.to_string().trim_matches('"').to_string()).unwrap_or_default();
            let mut row = vec![v];
            for m in &metrics {
                let unit = c.metric(m).map(|x| x.unit).unwrap_or(Unit::Count);
                row.push(mean(c, m).map(|v| unit.format(v)).unwrap_or_else(|| "-".into()));
            }
            if lead.is_some() {
                row.push(speedup(c).map_or("-".into(), |x| {
                    format!("{x:.2}x{}", if Some(i) == best && lead.is_some() { " best" } else { "" })
                }));
            }
            table.row(row);
        }
        out.push(table.render(width));
    }
    out
}

/// One table per case with per-entity metrics (e.g. each simulated task's
/// CPU share): entities are not replicates, so they get rows, not intervals.
pub fn entity_tables(run: &Run, width: usize, params: &crate::rows::ParamTable) -> Vec<String> {
    let mut out = Vec::new();
    let all = cases(&run.benchmarks, true);
    for case in &all {
        let names: Vec<&str> = case
            .metric_names()
            .into_iter()
            .filter(|n| case.metric(n).is_some_and(|m| m.data.level() == Level::Entity))
            .collect();
        let Some(first) = names.first() else { continue };
        let entity = match &case.metric(first).map(|m| &m.data) {
            Some(MetricData::Entities { entity, .. }) => entity.clone(),
            _ => continue,
        };
        // Named as the case's block is: the parameters worth reading, with units.
        let first_bench = case.invocations[0];
        let siblings: Vec<&BTreeMap<String, serde_json::Value>> =
            all.iter().map(|c| c.invocations[0]).filter(|b| b.name == first_bench.name).map(|b| &b.params).collect();
        let name = params_heading(&first_bench.name, &first_bench.params, first_bench.quick, &siblings, params);
        let mut header = vec![format!("{name} · {entity}")];
        let pooled: Vec<_> = names.iter().filter_map(|n| case.pooled(n)).collect();
        header.extend(pooled.iter().map(|m| m.name.clone()));
        let mut align = vec![Align::Right; header.len()];
        align[0] = Align::Left;
        let mut table = Grid::new(header, align);
        for label in case.entities(first) {
            let mut row = vec![label.clone()];
            for m in &pooled {
                let v = match &m.data {
                    MetricData::Entities { labels, values, .. } => {
                        labels.iter().position(|l| *l == label).and_then(|i| values.get(i).copied())
                    }
                    _ => None,
                };
                row.push(v.filter(|v| v.is_finite()).map(|v| m.unit.format(v)).unwrap_or_else(|| "-".into()));
            }
            table.row(row);
        }
        let n = case.invocations.len();
        out.push(format!(
            "{}\n{}",
            table.render(width),
            if n > 1 { format!("each value is the mean over {n} invocations") } else { "one invocation".into() }
        ));
    }
    out
}

/// The metric and its direction; the value beside it carries the unit.
fn view_label(row: &MetricRow) -> String {
    let arrow = match row.direction {
        schedlab_core::Direction::HigherIsBetter => " ↑",
        schedlab_core::Direction::LowerIsBetter => " ↓",
        schedlab_core::Direction::Neutral => "",
    };
    format!("{}{arrow}", row.metric)
}

fn metric_label(row: &MetricRow) -> String {
    let arrow = match row.direction {
        schedlab_core::Direction::HigherIsBetter => " ↑",
        schedlab_core::Direction::LowerIsBetter => " ↓",
        schedlab_core::Direction::Neutral => "",
    };
    let unit =
        if row.unit == Unit::Count || row.is_distribution() { String::new() } else { format!(" [{}]", row.unit) };
    format!("{}{}{}", row.metric, unit, arrow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_core::*;

    fn run() -> Run {
        let tool = ToolInfo { name: "schedlab".into(), version: "0.1.0".into(), git_rev: None };
        let mut r = Run::new(RunKind::Live, tool, vec![], "box".into(), 0);
        r.id = Some(3);
        let cond = Condition::Live { requested: SchedCondition::default(), applied: None, loads: vec![] };
        let mut b = BenchResult::new("pipe", cond, 0).param("placement", "same-cpu");
        b.metrics.push(
            Metric::samples(
                "round_trips",
                Unit::PerSecond,
                Direction::HigherIsBetter,
                vec![100_000.0, 102_000.0, 98_000.0],
            )
            .headline(),
        );
        let mut h = LatencyHistogram::new();
        for v in 1..=1000u64 {
            h.record(v * 10);
        }
        b.metrics.push(Metric::histogram("latency", Direction::LowerIsBetter, h).headline());
        b.status = BenchStatus::Complete;
        r.benchmarks.push(b);
        r
    }

    #[test]
    fn headings_write_units_and_hide_only_the_defaults_of_the_runs_mode() {
        use crate::rows::ParamInfo;
        use schedlab_core::param::{Kind, TimeUnit};
        let us = Kind::Duration { unit: TimeUnit::Us, min: 1, max: 10_000_000 };
        let loops = Kind::Count { min: 1, max: 1_000_000 };
        let mut opts = RowOptions::default();
        opts.params.insert(
            "pipe".into(),
            [
                ("interval".to_string(), ParamInfo::new(us, "5ms", None)),
                ("loops".to_string(), ParamInfo::new(loops, "100000", Some("1000"))),
            ]
            .into(),
        );
        let heading = |interval: u64, loops: u64, quick: bool| {
            let mut r = run();
            let b = &mut r.benchmarks[0];
            b.params.insert("interval".into(), interval.into());
            b.params.insert("loops".into(), loops.into());
            b.quick = quick;
            run_view(&r, &opts, 100).lines().find(|l| l.starts_with("pipe")).unwrap().to_string()
        };
        let h = heading(5000, 100_000, false);
        assert!(!h.contains("interval") && !h.contains("loops"), "both at the full defaults: {h}");
        let h = heading(2000, 1000, true);
        assert!(h.contains("interval=2ms") && !h.contains("loops"), "a duration with its unit: {h}");
        let h = heading(5000, 1000, false);
        assert!(h.contains("loops=1000"), "the quick size in a full run is not a default: {h}");
    }

    #[test]
    fn table_shows_mean_ci_and_tails() {
        let t = run_table(&run(), &RowOptions::default());
        assert!(t.contains("pipe placement=same-cpu"), "{t}");
        assert!(t.contains("100,000/s"), "{t}");
        assert!(t.contains("1 inv × 3 reps"), "{t}");
        assert!(t.contains("95% CI"), "{t}");
        assert!(t.contains("p50 5.00 us"), "{t}");
        assert!(t.contains("p99.9 9.99 us"), "{t}");
        assert!(t.contains("max 10.00 us"), "{t}");
    }

    #[test]
    fn a_sweep_gets_one_row_per_value_and_names_the_best() {
        let mut r = run();
        r.benchmarks.clear();
        for (j, wall) in [(1, 8.0), (2, 4.4), (4, 4.1)] {
            let cond = Condition::Live { requested: SchedCondition::default(), applied: None, loads: vec![] };
            let mut b = BenchResult::new("build", cond, 0).param("jobs", j).param("units", 8);
            b.status = BenchStatus::Complete;
            b.metrics.push(
                Metric::samples("wall_time", Unit::Seconds, Direction::LowerIsBetter, vec![wall, wall]).headline(),
            );
            r.benchmarks.push(b);
        }
        let t = sweep_tables(&r, 80);
        assert_eq!(t.len(), 1, "{t:?}");
        assert!(t[0].contains("build · jobs") && t[0].contains("1.95x best") && t[0].contains("1.00x"), "{}", t[0]);
        r.benchmarks[2].params.insert("units".into(), 9.into());
        assert!(sweep_tables(&r, 80).is_empty(), "two parameters vary: not a sweep");
    }

    #[test]
    fn kernel_counters_and_their_notes_show_only_with_all() {
        let mut r = run();
        let b = &mut r.benchmarks[0];
        b.metrics.push(Metric::samples("kernel.migrations", Unit::Count, Direction::Neutral, vec![4.0, 5.0, 6.0]));
        b.warnings.push(format!("{KERNEL_NOTE_PREFIX}kernel.run_queue_wait absent: measured tasks ended"));
        b.warnings.push("unpinned: the scheduler chose".into());
        let plain = run_view(&r, &RowOptions::default(), 100);
        assert!(!plain.contains("kernel.") && plain.contains("unpinned"), "{plain}");
        let all = run_view(&r, &RowOptions { all_metrics: true, ..Default::default() }, 100);
        assert!(all.contains("kernel.migrations") && all.contains("kernel.run_queue_wait absent"), "{all}");
        assert!(is_counter_note(&format!("(invocation 2) {KERNEL_NOTE_PREFIX}x absent")));
        assert!(!is_counter_note("(invocation 2) unpinned"));
    }

    #[test]
    fn ksigma_column_appears_only_when_asked() {
        let opts = RowOptions { ksigma: Some(6.0), ..Default::default() };
        assert!(run_table(&run(), &opts).contains("dropped beyond 6σ"));
        assert!(!run_table(&run(), &RowOptions::default()).contains("dropped"));
    }
}
