//! User-facing leftovers: `schedlab report` heads a simulated run's
//! sections as `show` does, and `schedlab list` names every quantity each
//! simulated policy's timeline records.

use assert_cmd::Command;
use std::path::Path;

fn schedlab(db: &Path) -> Command {
    let mut c = Command::cargo_bin("schedlab").unwrap();
    c.arg("--db").arg(db).env_remove("SCHEDLAB_DB").env("COLUMNS", "80");
    c
}

#[test]
fn the_report_heads_a_simulated_run_with_units_and_changed_parameters_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    schedlab(&db)
        .args(["sim", "--policy", "cfs", "--workload", "hogs", "--duration", "200ms", "--seeds", "2"])
        .assert()
        .success();
    let out = dir.path().join("report.html");
    schedlab(&db).args(["report", "last", "-o"]).arg(&out).assert().success();
    let html = std::fs::read_to_string(&out).unwrap();
    let start = html.find("<section id=\"bench-sim-hogs\"").expect("a section for sim:hogs");
    let section = &html[start..start + html[start..].find("</section>").unwrap()];
    // Stored as duration=200000000 (ns); ctx_switch=2000 is the default.
    assert!(section.contains("<p class=\"params\">duration=200ms</p>"), "{section}");
    assert!(!section.contains("200000000") && !section.contains("ctx_switch"), "{section}");
}

#[test]
fn list_names_every_timeline_quantity_of_each_policy_primary_first_within_80_columns() {
    let dir = tempfile::tempdir().unwrap();
    let out = schedlab(&dir.path().join("results.db")).arg("list").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let long: Vec<&str> = text.lines().filter(|l| l.chars().count() > 80).collect();
    assert!(long.is_empty(), "longer than 80 columns:\n{}", long.join("\n"));
    for p in schedlab_sim::policies() {
        let Ok(vars) = schedlab_sim::state_vars(p.name) else { continue };
        // The policy's entry: from its name line to the blank line after it.
        let at = text.find(&format!("\n  {:<11} ", p.name)).unwrap_or_else(|| panic!("no entry for {}", p.name));
        let entry = &text[at + 1..at + 1 + text[at + 1..].find("\n\n").unwrap()];
        // Wrapped lines joined again, so that a name cut by a wrap still reads whole.
        let joined = entry.split_whitespace().collect::<Vec<_>>().join(" ");
        let listed = joined.split("timeline quantities (sim --quantity): ").nth(1).unwrap_or_else(|| {
            panic!("{}: no timeline quantities line:\n{entry}", p.name);
        });
        let mut from = 0;
        for v in vars {
            let pos =
                listed[from..].find(v.name).unwrap_or_else(|| panic!("{}: {} not listed:\n{entry}", p.name, v.name));
            from += pos + v.name.len();
        }
        assert!(listed.starts_with(vars[0].name), "{}: primary first:\n{entry}", p.name);
    }
}
