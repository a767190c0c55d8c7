//! `schedlab compare BASELINE OTHER...`: each argument is one side, one run
//! or several pooled (`A1,A2,A3`). `compare --by KEYS [SELECTORS]` makes the
//! sides from groups of stored runs instead (runs of one host and kernel,
//! say), each group pooled as a comma list is.

use super::{write_exports, Outcome};
use crate::args::{CompareArgs, GroupBy, GroupKey};
use crate::context::{load_readable_runs, open_store_to_read};
use anyhow::{bail, Result};
use schedlab_core::model::format_unix_ms;
use schedlab_core::RunKind;
use schedlab_report::compare::{
    compare_csv, compare_markdown, compare_sides, compare_table, env_warning_lines, footer_lines, CompareOptions,
    NoiseProfile, Side,
};
use schedlab_report::text::{wrap, wrap_dots};
use schedlab_store::{RunFilter, RunSummary, Store};
use std::collections::BTreeMap;
use std::path::Path;

/// The band where no profile applies (and for the simulator).
pub const DEFAULT_NOISE: f64 = 0.02;

/// Parse "2%", "0.5%" or "0.02" into a fraction.
pub fn parse_noise(s: &str) -> Result<f64> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    };
    match v {
        Ok(v) if v.is_finite() && (0.0..1.0).contains(&v) => Ok(v),
        _ => bail!("--noise '{s}' is not a percentage between 0% and 100%: write e.g. --noise 2%"),
    }
}

/// Refuse a side with an empty run in its list; checked before the store
/// is opened, so the input's own problem is the one reported.
pub fn check_sides(sels: &[String]) -> Result<()> {
    if let Some(sel) = sels.iter().find(|s| s.split(',').any(|one| one.trim().is_empty())) {
        bail!("'{sel}' has an empty run in its list: write runs as A1,A2,A3 without spaces or doubled commas");
    }
    Ok(())
}

/// Load each argument (`12`, `last`, `baseline`, or `1,2,3` pooled) as a side.
pub fn load_sides(store: &dyn Store, sels: &[String]) -> Result<Vec<Side>> {
    check_sides(sels)?;
    let mut sides = Vec::new();
    for sel in sels {
        let mut runs = Vec::new();
        for one in sel.split(',').map(str::trim) {
            runs.push(store.load_run(store.resolve(one)?)?);
        }
        let label = runs.iter().map(|r| r.label()).collect::<Vec<_>>().join("+");
        sides.push(Side { label, runs });
    }
    Ok(sides)
}

/// Verdict options: `--noise` when given; else, for live runs, the noise
/// profile of the baseline's host when it has one; else the default band.
pub fn options(store: &dyn Store, sides: &[Side], noise: Option<&str>) -> Result<CompareOptions> {
    if let Some(n) = noise {
        return Ok(CompareOptions::fixed(parse_noise(n)?));
    }
    let mut opts = CompareOptions::fixed(DEFAULT_NOISE);
    let live = sides.iter().flat_map(|s| &s.runs).all(|r| r.kind == RunKind::Live);
    let host = sides.first().and_then(|s| s.runs.first()).map(|r| r.host.clone());
    if let (true, Some(host)) = (live, host) {
        opts.profile = load_profile(store, &host)?;
    }
    Ok(opts)
}

/// The newest noise profile of `host`, computed from its calibration runs.
pub fn load_profile(store: &dyn Store, host: &str) -> Result<Option<NoiseProfile>> {
    let rec = match store.latest_noise_profile(host) {
        Ok(Some(rec)) => rec,
        Ok(None) => return Ok(None),
        Err(e @ schedlab_store::StoreError::BadProfile { .. }) => {
            crate::term::warn(format!("{e}; it is not used here"));
            return Ok(None);
        }
        Err(e) => return Err(e.into()),
    };
    let runs = load_readable_runs(store, &rec.run_ids)?;
    let description = format!(
        "noise profile #{} of {} ({} runs, {}{})",
        rec.id.unwrap_or_default(),
        rec.host,
        runs.len(),
        format_unix_ms(rec.created_unix_ms),
        rec.kernel.as_ref().map(|k| format!(", kernel {k}")).unwrap_or_default()
    );
    Ok(Some(NoiseProfile::from_runs(description, &runs)))
}

/// The group `run` belongs to under `keys` (one value per key), or the
/// first key it lacks.
fn group_of<'a>(run: &'a RunSummary, keys: &'a [GroupKey]) -> std::result::Result<Vec<&'a str>, &'a GroupKey> {
    keys.iter()
        .map(|k| {
            match k {
                GroupKey::Host => Some(run.host.as_str()),
                GroupKey::Kernel => run.kernel.as_deref(),
                GroupKey::CpuModel => run.cpu_model.as_deref(),
                GroupKey::Label(l) => run.labels.get(l).map(String::as_str),
            }
            .ok_or(k)
        })
        .collect()
}

/// The runs `filter` selects (and, when given, `only` lists), grouped by
/// `by`: each group's label and run ids (oldest first), groups in the order
/// of their values, so the baseline is the same whatever order runs arrived
/// in. Runs without a key's value are left out, with a note.
pub fn group_runs(
    store: &dyn Store,
    filter: &RunFilter,
    by: &GroupBy,
    only: Option<&[i64]>,
) -> Result<Vec<(String, Vec<i64>)>> {
    let mut groups: BTreeMap<Vec<String>, Vec<i64>> = BTreeMap::new();
    let mut lacking: BTreeMap<String, usize> = BTreeMap::new();
    for summary in store.list_runs_where(filter, usize::MAX)? {
        let summary = match summary {
            Ok(s) => s,
            Err(e) => {
                crate::term::warn(format!("{e}; left out here"));
                continue;
            }
        };
        if only.is_some_and(|ids| ids.binary_search(&summary.id).is_err()) {
            continue;
        }
        match group_of(&summary, &by.0) {
            Ok(values) => groups.entry(values.into_iter().map(String::from).collect()).or_default().push(summary.id),
            Err(key) => *lacking.entry(key.name().to_string()).or_default() += 1,
        }
    }
    for (key, n) in &lacking {
        crate::term::note(format!("{n} run(s) without a {key} are left out of the groups"));
    }
    let heading = |values: &[String]| -> String {
        by.0.iter()
            .zip(values)
            .map(|(k, v)| match k {
                GroupKey::Label(l) => format!("{l}={v}"),
                _ => v.clone(),
            })
            .collect::<Vec<_>>()
            .join(" · ")
    };
    Ok(groups
        .into_iter()
        .map(|(values, mut ids)| {
            ids.reverse();
            (heading(&values), ids)
        })
        .collect())
}

/// The runs `ids` (only their benchmarks named `bench`, when given), read in
/// a few queries, leaving out with a warning any that cannot be decoded or
/// is gone, as `load_readable_runs` does.
pub fn load_runs_of(store: &dyn Store, ids: &[i64], bench: Option<&str>) -> Result<Vec<schedlab_core::Run>> {
    let mut runs = Vec::with_capacity(ids.len());
    for (id, run) in ids.iter().zip(store.load_runs(ids, bench)?) {
        match run {
            Ok(run) => runs.push(run),
            Err(schedlab_store::StoreError::NoSuchRun(_)) => {
                crate::term::warn(format!("run #{id} is no longer in the store; left out here"))
            }
            Err(e) => crate::term::warn(format!("{e}; left out here")),
        }
    }
    Ok(runs)
}

/// Each group as a side (its runs pooled, `keep` choosing their benchmarks);
/// refused when fewer than two groups have runs to compare.
pub fn group_sides(
    store: &dyn Store,
    groups: Vec<(String, Vec<i64>)>,
    by: &GroupBy,
    bench: Option<&str>,
    keep: impl Fn(&schedlab_core::BenchResult) -> bool,
) -> Result<Vec<Side>> {
    let mut sides = Vec::new();
    for (label, ids) in groups {
        let mut runs = load_runs_of(store, &ids, bench)?;
        for r in &mut runs {
            r.benchmarks.retain(&keep);
        }
        runs.retain(|r| !r.benchmarks.is_empty());
        if !runs.is_empty() {
            sides.push(Side {
                label: format!("{label} ({} run{})", runs.len(), if runs.len() == 1 { "" } else { "s" }),
                runs,
            });
        }
    }
    if sides.len() < 2 {
        let keys = by.0.iter().map(GroupKey::name).collect::<Vec<_>>().join(",");
        bail!(
            "--by {keys} makes {} group(s) of runs here, and a comparison needs two: select more runs (fewer \
             --host/--kernel/--cpu-model/--label), or group by another key",
            sides.len()
        );
    }
    Ok(sides)
}

/// Keep only the headline metrics' rows (as `show` does without --all), or
/// `metric`'s.
pub fn keep_metric_rows(c: &mut schedlab_report::compare::Comparison, sides: &[Side], metric: Option<&str>) {
    match metric {
        Some(m) => c.rows.retain(|r| r.metric == m),
        None => {
            let headline = |m: &str| {
                sides
                    .iter()
                    .flat_map(|s| &s.runs)
                    .flat_map(|r| &r.benchmarks)
                    .any(|b| b.metric(m).is_some_and(|m| m.headline))
            };
            c.rows.retain(|r| headline(&r.metric));
        }
    }
}

/// `compare --by`: the selected runs' groups, side by side, one block per
/// metric with a line per group (it reads down the page however many
/// groups there are).
fn run_by(db: Option<&Path>, a: &CompareArgs, by: &GroupBy) -> Result<Outcome> {
    let store = open_store_to_read(db)?;
    let groups = group_runs(&*store, &a.select.filter(), by, None)?;
    let sides = group_sides(&*store, groups, by, None, |_| true)?;
    let opts = options(&*store, &sides, a.noise.as_deref())?;
    let mut c = compare_sides(&sides, &opts)?;
    keep_metric_rows(&mut c, &sides, None);
    if export_comparison(&a.export, &c)? {
        return Ok(Outcome::Done);
    }
    let width = crate::term::width();
    let keys = by.0.iter().map(GroupKey::name).collect::<Vec<_>>().join(" · ");
    println!("{}", wrap(&format!("{} groups by {keys}; baseline {}", sides.len(), sides[0].label), width, 2));
    println!();
    println!("{}", schedlab_report::compare::sweep_table(&c, width, &super::show::param_table()));
    println!();
    for line in footer_lines(&c) {
        println!("{}", wrap(&line, width, 2));
    }
    Ok(Outcome::Done)
}

/// Writes the comparison's exports; true when one went to stdout, which then
/// takes the place of the table.
fn export_comparison(export: &crate::args::ExportArgs, c: &schedlab_report::compare::Comparison) -> Result<bool> {
    write_exports(export, || Ok(serde_json::to_string_pretty(c)? + "\n"), || compare_csv(c), || compare_markdown(c))
}

pub fn run(db: Option<&Path>, a: CompareArgs) -> Result<Outcome> {
    if let Some(n) = &a.noise {
        parse_noise(n)?;
    }
    if let Some(by) = &a.by {
        return run_by(db, &a, by);
    }
    if !a.select.filter().is_empty() {
        bail!("--host, --kernel, --cpu-model and --label choose the runs of `compare --by`: add --by KEYS, or name the runs to compare");
    }
    check_sides(&a.runs)?;
    let store = open_store_to_read(db)?;
    let sides = load_sides(&store, &a.runs)?;
    let opts = options(&store, &sides, a.noise.as_deref())?;
    let c = compare_sides(&sides, &opts)?;
    if export_comparison(&a.export, &c)? {
        return Ok(Outcome::Done);
    }
    let width = crate::term::width();
    for (side, sel) in sides.iter().zip(&a.runs) {
        let run = &side.runs[0];
        let cond = run.benchmarks.first().map(|b| b.condition.label()).unwrap_or_default();
        let when = if side.runs.len() > 1 { format!("{} runs pooled", side.runs.len()) } else { run.started_at() };
        println!(
            "{}",
            wrap_dots(&format!("{:<12} {} · {} · {} · {}", sel, side.label, run.kind.name(), when, cond), width)
        );
    }
    println!();
    println!("{}", compare_table(&c, width, &super::show::param_table()));
    println!();
    for line in footer_lines(&c) {
        println!("{}", wrap(&line, width, 2));
    }
    for line in env_warning_lines(&c, &c.runs[0]) {
        println!("{}", wrap(&format!("warning: {line}"), width, 2));
    }
    Ok(Outcome::Done)
}

#[cfg(test)]
mod tests {
    use super::parse_noise;

    #[test]
    fn noise_accepts_percent_and_fraction() {
        assert_eq!(parse_noise("2%").unwrap(), 0.02);
        assert_eq!(parse_noise("0.05").unwrap(), 0.05);
        assert!(parse_noise("200%").is_err());
        assert!(parse_noise("abc").is_err());
    }
}
