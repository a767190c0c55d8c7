//! Exports: JSON (the versioned interchange schema), CSV and Markdown (one
//! row per benchmark metric with its summary).

use crate::rows::{rows_of_run, MetricRow, RowOptions};
use crate::table::headline_value;
use schedlab_core::Run;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    Json,
    Csv,
    Markdown,
}

pub fn export(runs: &[Run], format: ExportFormat, opts: &RowOptions) -> String {
    match format {
        ExportFormat::Json => {
            let value = if runs.len() == 1 { serde_json::to_value(&runs[0]) } else { serde_json::to_value(runs) };
            let mut s = serde_json::to_string_pretty(&value.expect("the model always serialises")).unwrap_or_default();
            s.push('\n');
            s
        }
        ExportFormat::Csv => csv(&runs.iter().flat_map(|r| rows_of_run(r, opts)).collect::<Vec<_>>()),
        ExportFormat::Markdown => markdown(&runs.iter().flat_map(|r| rows_of_run(r, opts)).collect::<Vec<_>>()),
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

const CSV_HEADER: &str = "run_id,benchmark,condition,status,metric,unit,direction,kind,n,mean,sd,min,median,p90,p99,p999,max,ci_lo,ci_hi,outliers,overflow";

fn csv(rows: &[MetricRow]) -> String {
    let mut out = String::from(CSV_HEADER);
    out.push('\n');
    for r in rows {
        let unit = serde_json::to_value(r.unit).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
        let dir = serde_json::to_value(r.direction).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
        let mut fields = vec![
            r.run_id.map(|i| i.to_string()).unwrap_or_default(),
            csv_field(&r.benchmark),
            csv_field(&r.condition),
            csv_field(&r.status),
            csv_field(&r.metric),
            unit,
            dir,
            r.kind.to_string(),
        ];
        match &r.summary {
            Some(s) => {
                let ci = if r.is_distribution() { s.median_ci } else { s.mean_ci };
                fields.extend([
                    s.n.to_string(),
                    s.mean.to_string(),
                    s.sd.to_string(),
                    s.min.to_string(),
                    s.median.to_string(),
                    s.p90.to_string(),
                    s.p99.to_string(),
                    s.p999.to_string(),
                    s.max.to_string(),
                    ci.map(|c| c.lo.to_string()).unwrap_or_default(),
                    ci.map(|c| c.hi.to_string()).unwrap_or_default(),
                    s.outliers.total().to_string(),
                    s.overflow.to_string(),
                ]);
            }
            None => fields.extend(std::iter::repeat_n(String::new(), 13)),
        }
        out.push_str(&fields.join(","));
        out.push('\n');
    }
    out
}

fn markdown(rows: &[MetricRow]) -> String {
    let mut out =
        String::from("| benchmark | condition | metric | value | p99 | max | n |\n|---|---|---|---:|---:|---:|---:|\n");
    for r in rows {
        let (p99, max, n) = match &r.summary {
            Some(s) => (r.unit.format(s.p99), r.unit.format(s.max), s.n.to_string()),
            None => ("-".into(), "-".into(), "0".into()),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            r.benchmark.replace('|', "\\|"),
            r.condition.replace('|', "\\|"),
            r.metric,
            headline_value(r),
            p99,
            max,
            n
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_core::*;

    fn run() -> Run {
        let tool = ToolInfo { name: "schedlab".into(), version: "0.1.0".into(), git_rev: None };
        let mut r = Run::new(RunKind::Sim, tool, vec![], "box".into(), 0);
        r.id = Some(9);
        let cond = Condition::Sim(SimSetup { policy: "cfs".into(), cpus: 2, hz: 1000, seed: 1 });
        let mut b = BenchResult::new("sim:hogs", cond, 0).param("tasks", "a,b");
        b.status = BenchStatus::Complete;
        b.metrics.push(Metric::samples("makespan", Unit::Seconds, Direction::LowerIsBetter, vec![2.0, 4.0]).headline());
        r.benchmarks.push(b);
        r
    }

    #[test]
    fn csv_has_one_row_per_metric_and_quotes_commas() {
        let out = export(&[run()], ExportFormat::Csv, &RowOptions::default());
        let lines: Vec<_> = out.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0], CSV_HEADER);
        assert!(lines[1].starts_with("9,\"sim:hogs tasks=a,b\",sim cfs cpus=2 hz=1000 seed=1,"), "{}", lines[1]);
        assert!(lines[1].contains(",samples,2,3,"), "{}", lines[1]);
    }

    #[test]
    fn json_export_is_the_versioned_model() {
        let out = export(&[run()], ExportFormat::Json, &RowOptions::default());
        let back: Run = serde_json::from_str(&out).unwrap();
        assert_eq!(back.schema_version, SCHEMA_VERSION);
        assert_eq!(back.benchmarks[0].name, "sim:hogs");
    }

    #[test]
    fn markdown_is_a_table() {
        let out = export(&[run()], ExportFormat::Markdown, &RowOptions::default());
        assert!(out.starts_with("| benchmark |"));
        assert!(out.contains("| sim:hogs tasks=a,b | sim cfs cpus=2 hz=1000 seed=1 | makespan | 3.000 s |"), "{out}");
    }
}
