//! `schedlab export --jsonl FILE [RUNS]` and the archive side of `schedlab
//! import FILE.jsonl`: whole stores as JSON lines, one run per line in the
//! core interchange form plus the run's `uuid`. Importing is idempotent by
//! that uuid (as `push` and `pull` are), so an archive can be imported again,
//! or into a store that already holds some of its runs, and adds only what is
//! missing.

use super::Outcome;
use crate::args::ArchiveArgs;
use crate::context::{now_unix_ms, open_store, open_store_to_read};
use anyhow::{anyhow, bail, Context, Result};
use schedlab_core::Run;
use schedlab_report::import::{import, ImportFormat};
use schedlab_store::{Inserted, Store, StoreError, Uuid};
use std::io::Write;
use std::path::Path;

/// One archive line: the run's JSON with its uuid beside its fields.
fn line_of(run: &Run, uuid: Uuid) -> Result<String> {
    let mut v = serde_json::to_value(run)?;
    let obj = v.as_object_mut().ok_or_else(|| anyhow!("a run's JSON is not an object"))?;
    // The store gives ids; in another store this one would mean another run.
    obj.remove("id");
    obj.insert("uuid".into(), serde_json::Value::String(uuid.to_string()));
    Ok(serde_json::to_string(&v)?)
}

/// The runs to export: those named (in order, each once), else every run the
/// selectors take, oldest first.
fn chosen(store: &dyn Store, a: &ArchiveArgs) -> Result<Vec<i64>> {
    let filter = a.select.filter();
    if a.runs.is_empty() {
        return Ok(store.run_ids_where(&filter)?);
    }
    let selected = if filter.is_empty() { None } else { Some(store.run_ids_where(&filter)?) };
    let mut ids = Vec::new();
    for sel in a.runs.iter().flat_map(|s| s.split(',')).map(str::trim).filter(|s| !s.is_empty()) {
        let id = store.resolve(sel)?;
        if !ids.contains(&id) && selected.as_ref().is_none_or(|s| s.binary_search(&id).is_ok()) {
            ids.push(id);
        }
    }
    Ok(ids)
}

pub fn run(db: Option<&Path>, a: ArchiveArgs) -> Result<Outcome> {
    let store = open_store_to_read(db)?;
    let ids = chosen(&*store, &a)?;
    let to_stdout = a.jsonl.as_os_str() == "-";
    // Written beside the archive and renamed into place at the end: a
    // failed export leaves no half archive that an import would take whole.
    let mut file = if to_stdout {
        None
    } else {
        let dir = a.jsonl.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let tmp = tempfile::NamedTempFile::new_in(dir).with_context(|| {
            format!("cannot write {}: check that {} exists and is writable", a.jsonl.display(), dir.display())
        })?;
        Some(tmp)
    };
    let mut out: Box<dyn Write> = match &mut file {
        Some(tmp) => Box::new(std::io::BufWriter::new(tmp.as_file_mut())),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let (mut written, mut left_out) = (0usize, 0usize);
    for id in ids {
        let (run, uuid) = match store.load_run(id).and_then(|r| Ok((r, store.run_uuid(id)?))) {
            Ok(found) => found,
            Err(e @ StoreError::BadRun { .. }) => {
                crate::term::warn(format!("{e}; not exported"));
                left_out += 1;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        writeln!(out, "{}", line_of(&run, uuid)?)?;
        written += 1;
    }
    out.flush()?;
    drop(out);
    if let Some(tmp) = file {
        tmp.persist(&a.jsonl).map_err(|e| anyhow!("cannot write {}: {}", a.jsonl.display(), e.error))?;
        let skipped = if left_out > 0 { format!(" ({left_out} unreadable run(s) left out)") } else { String::new() };
        crate::term::say(format!(
            "exported {written} run(s) from {} to {}{skipped}",
            store.location(),
            a.jsonl.display()
        ));
    }
    Ok(Outcome::Done)
}

/// Whether `file` is to be read as an archive: `--format jsonl`, or a
/// `.jsonl` name.
pub fn is_archive(file: &Path) -> bool {
    file.extension().is_some_and(|e| e.eq_ignore_ascii_case("jsonl"))
}

/// Every line of an archive as (line number, uuid, run), or the first bad
/// line's error: nothing is stored unless every line reads.
pub fn read_archive(name: &str, text: &str) -> Result<Vec<(usize, Uuid, Run)>> {
    let mut runs = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let bad = |why: String| {
            anyhow!(
                "{name} line {n}: {why}; nothing was imported: fix or remove that line (each line is one run as \
                 `schedlab export --jsonl` writes it)"
            )
        };
        let v: serde_json::Value = serde_json::from_str(line).map_err(|e| bad(format!("not JSON ({e})")))?;
        let uuid = v
            .get("uuid")
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| bad("no \"uuid\" field".into()))
            .and_then(|u| Uuid::parse_str(u).map_err(|e| bad(format!("uuid '{u}': {e}"))))?;
        // The same checks as importing one run's JSON (counts, schema).
        let run = import(name, line, ImportFormat::Schedlab, now_unix_ms()).map_err(|e| bad(format!("{e}")))?;
        if let Some((k, v, problem)) =
            run.labels.iter().find_map(|(k, v)| schedlab_core::model::label_problem(k, v).map(|p| (k, v, p)))
        {
            return Err(bad(format!("label {k}={v}: {problem}")));
        }
        if let Some(problem) = run.name.as_deref().and_then(schedlab_core::model::run_name_problem) {
            return Err(bad(format!("run name: {problem}")));
        }
        if let Some(&(first, _, _)) = runs.iter().find(|(_, u, _)| *u == uuid) {
            return Err(bad(format!("uuid {uuid} is also on line {first}")));
        }
        runs.push((n, uuid, run));
    }
    if runs.is_empty() {
        bail!("{name} holds no runs: `schedlab export --jsonl {name}` writes one run per line");
    }
    Ok(runs)
}

/// `schedlab import FILE.jsonl`: each run not yet in the store, by uuid.
pub fn import_archive(db: Option<&Path>, file: &Path, name_given: bool) -> Result<Outcome> {
    if name_given {
        bail!("--name names one imported run; an archive's runs keep their own names: leave --name out");
    }
    let name = file.display().to_string();
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("cannot read {name}: check the path and that it is a text file"))?;
    let runs = read_archive(&name, &text)?;
    let mut store = open_store(db)?;
    let (mut added, mut present) = (0usize, 0usize);
    for (n, uuid, run) in &runs {
        match super::sync::insert(store.as_mut(), run, *uuid) {
            Ok(Inserted::Added(_)) => added += 1,
            Ok(Inserted::Present(_)) => present += 1,
            Err(e) => bail!(
                "{name} line {n}: {e}; {added} run(s) were imported before it: run the same import again to add \
                 the rest (runs already imported are not added twice)"
            ),
        }
    }
    let already = if present > 0 { format!(" ({present} already there)") } else { String::new() };
    crate::term::say(format!("imported {added} run(s) from {name} into {}{already}", store.location()));
    Ok(Outcome::Done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Run {
        let mut r = schedlab_store::testing::sample_run();
        r.benchmarks.push(schedlab_store::testing::sample_bench("pipe"));
        r.labels.insert("kernel".into(), "6.18-rt".into());
        r.id = Some(7);
        r
    }

    #[test]
    fn a_line_reads_back_as_its_run_and_uuid() {
        let (run, uuid) = (sample(), Uuid::new_v4());
        let line = line_of(&run, uuid).unwrap();
        assert!(!line.contains('\n') && !line.contains("\"id\""), "{line}");
        let back = read_archive("a.jsonl", &format!("{line}\n\n{}\n", line_of(&run, Uuid::new_v4()).unwrap())).unwrap();
        assert_eq!(back.len(), 2, "blank lines are skipped");
        assert_eq!((back[0].0, back[0].1), (1, uuid));
        assert_eq!(back[0].2.labels, run.labels);
        assert_eq!(back[0].2.benchmarks, run.benchmarks);
        assert_eq!(back[1].0, 3, "line numbers count every line");
    }

    #[test]
    fn a_bad_line_is_named_by_its_number() {
        let good = line_of(&sample(), Uuid::new_v4()).unwrap();
        let cases = [
            ("{not json".to_string(), "not JSON"),
            (good.replace("\"uuid\"", "\"uid\""), "no \"uuid\""),
            (good.replacen("\"uuid\":\"", "\"uuid\":\"x", 1), "uuid 'x"),
            (good.replace("\"kernel\":\"6.18-rt\"", "\"bad key\":\"v\""), "label bad key=v"),
            (good.clone(), "also on line 1"),
        ];
        for (bad, want) in cases {
            let err = read_archive("a.jsonl", &format!("{good}\n{bad}\n")).unwrap_err().to_string();
            assert!(
                err.contains("a.jsonl line 2") && err.contains(want) && err.contains("nothing was imported"),
                "{err}"
            );
        }
        assert!(read_archive("a.jsonl", "\n").unwrap_err().to_string().contains("holds no runs"));
    }
}
