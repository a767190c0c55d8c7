//! What lets a user find their way without the source (issue 13): shell
//! completions and man pages written by the binary, the Examples section of
//! `--help`, option values listed where they are a fixed set, and one name
//! (`--export-json`) for writing a run as JSON.

use assert_cmd::Command;
use std::path::Path;

const LIVE_POLICIES: [&str; 6] = ["other", "batch", "idle", "fifo", "rr", "deadline"];

/// Commands every completion script and the man pages must know.
const COMMANDS: [&str; 19] = [
    "run",
    "show",
    "runs",
    "rm",
    "compare",
    "history",
    "report",
    "plot",
    "import",
    "sim",
    "calibrate",
    "list",
    "check",
    "completions",
    "manpage",
    "push",
    "pull",
    "serve",
    "export",
];

fn schedlab(db: &Path) -> Command {
    let mut c = Command::cargo_bin("schedlab").unwrap();
    c.arg("--db").arg(db).env_remove("SCHEDLAB_DB").env("COLUMNS", "100");
    c
}

/// The simulator's choosable policies (the RT layer is always on, not chosen).
fn sim_policies() -> Vec<&'static str> {
    schedlab_sim::policies().into_iter().map(|p| p.name).filter(|&n| n != "rt").collect()
}

fn stdout_of(db: &Path, args: &[&str]) -> String {
    let out = schedlab(db).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn completion_script(shell: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let script = stdout_of(&dir.path().join("r.db"), &["completions", shell]);
    assert!(script.len() > 1000, "{shell} script is suspiciously short:\n{script}");
    script
}

/// Ask bash's completion function what it offers for `words` (the last one
/// being completed), as bash would after a Tab.
fn bash_offers(script: &Path, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let cword = words.len() - 1;
    let prev = if cword > 0 { words[cword - 1] } else { "" };
    let body = format!(
        "source '{}'; COMP_WORDS=({}); COMP_CWORD={cword}; COMP_LINE='{}'; COMP_POINT=${{#COMP_LINE}}; \
         _schedlab schedlab '{}' '{prev}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        quoted.join(" "),
        words.join(" "),
        words[cword],
    );
    let out = std::process::Command::new("bash").args(["--norc", "-c", &body]).output().expect("bash runs");
    assert!(out.status.success(), "bash completion failed for {words:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect()
}

#[test]
fn bash_completion_offers_commands_and_policy_values() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("schedlab.bash");
    std::fs::write(&script, completion_script("bash")).unwrap();

    let commands = bash_offers(&script, &["schedlab", ""]);
    for c in COMMANDS {
        assert!(commands.iter().any(|o| o == c), "bash does not offer command {c}: {commands:?}");
    }
    assert_eq!(bash_offers(&script, &["schedlab", "comp"]), ["compare", "completions"]);
    assert_eq!(bash_offers(&script, &["schedlab", "run", "--policy", ""]), LIVE_POLICIES);
    assert_eq!(bash_offers(&script, &["schedlab", "calibrate", "--policy", "f"]), ["fifo"]);
    assert_eq!(bash_offers(&script, &["schedlab", "sim", "--policy", ""]), sim_policies());
    assert_eq!(bash_offers(&script, &["schedlab", "run", "--export-j"]), ["--export-json"]);
}

#[test]
fn zsh_and_fish_completion_list_commands_and_policy_values() {
    // Each shell writes a value with its description as `name\:"..."` (zsh) or
    // `name\t'...'` (fish): forms that only a list of values produces; and a
    // command as `'name:...` (zsh) or `-a "name"` (fish).
    for (shell, value_form, command_form) in [("zsh", "{}\\:\"", "\n'{}:"), ("fish", "{}\\t'", "-a \"{}\" -d")] {
        let script = completion_script(shell);
        for c in COMMANDS {
            let form = command_form.replace("{}", c);
            assert!(script.contains(&form), "{shell} script does not offer command {c} (no {form})");
        }
        for p in LIVE_POLICIES.into_iter().chain(sim_policies()) {
            let form = value_form.replace("{}", p);
            assert!(script.contains(&form), "{shell} script does not offer policy {p} (no {form})");
        }
    }
}

#[test]
fn man_pages_are_written_for_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let man1 = dir.path().join("share/man/man1");
    let said = stdout_of(&dir.path().join("r.db"), &["manpage", man1.to_str().unwrap()]);
    assert!(said.contains("wrote 20 man pages"), "{said}");
    let main = std::fs::read_to_string(man1.join("schedlab.1")).unwrap();
    assert!(main.contains("\n.TH schedlab 1 ") && main.contains("\n.SH NAME"), "not a man page:\n{main}");
    for c in COMMANDS {
        assert!(main.contains(&format!("schedlab\\-{c}(1)")), "schedlab.1 does not list {c}");
        assert!(man1.join(format!("schedlab-{c}.1")).is_file(), "no page schedlab-{c}.1");
    }
    let run = std::fs::read_to_string(man1.join("schedlab-run.1")).unwrap();
    for needle in ["Examples:", "\\-\\-export\\-json", "deadline"] {
        assert!(run.contains(needle), "schedlab-run.1 lacks {needle}");
    }
}

#[test]
fn man_pages_to_an_unwritable_place_are_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let out = schedlab(&dir.path().join("r.db")).args(["manpage"]).arg(file.join("man1")).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot write man pages to") && stderr.contains("man1"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn help_of_the_main_commands_ends_with_examples() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    for c in ["run", "sim", "compare", "report"] {
        for flag in ["--help", "-h"] {
            let help = stdout_of(&db, &[c, flag]);
            let examples = help.split_once("\nExamples:\n").map(|(_, e)| e);
            let examples = examples.unwrap_or_else(|| panic!("`{c} {flag}` has no Examples section:\n{help}"));
            assert!(examples.starts_with(&format!("  schedlab {c} ")), "`{c} {flag}` examples:\n{examples}");
        }
    }
    // Fixed sets of values are listed in help, not only in prose.
    let run = stdout_of(&db, &["run", "-h"]).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(run.contains("[possible values: other, batch, idle, fifo, rr, deadline]"), "{run}");
    let sim = stdout_of(&db, &["sim", "--help"]);
    for p in sim_policies() {
        assert!(sim.contains(&format!("- {p}:")), "sim --help does not list policy {p}:\n{sim}");
    }
}

/// The example commands of `help` (`\` continuations joined, `# ...` comments
/// dropped), split into words; only single quotes are used in them.
fn examples(help: &str) -> Vec<Vec<String>> {
    let block = help.split_once("\nExamples:\n").expect("an Examples section").1;
    let joined = block.replace("\\\n", " ");
    let mut commands = Vec::new();
    for line in joined.lines().filter(|l| l.starts_with("  schedlab ")) {
        let line = line.split(" #").next().unwrap();
        assert!(!line.contains(['"', '\\']), "example needs a real shell parser: {line}");
        let mut words = Vec::new();
        for (i, part) in line.split('\'').enumerate() {
            if i % 2 == 1 {
                words.push(part.to_string());
            } else {
                words.extend(part.split_whitespace().map(str::to_string));
            }
        }
        assert_eq!(words.remove(0), "schedlab");
        commands.push(words);
    }
    commands
}

#[test]
fn sim_compare_and_report_examples_run_as_printed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let run = |args: &[String]| {
        let out = schedlab(&db).args(args).current_dir(dir.path()).output().unwrap();
        assert!(
            out.status.success(),
            "example `schedlab {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    // The comparisons name runs `baseline`, #3 to #8, `last~1` and `last`: all of
    // one simulated benchmark, made before and after the sim examples' own runs.
    let sim = |extra: &[&str]| {
        let mut a: Vec<String> =
            ["sim", "--policy", "cfs", "--workload", "hogs", "--duration", "100ms"].map(String::from).to_vec();
        a.extend(extra.iter().map(|s| s.to_string()));
        run(&a);
    };
    sim(&["--name", "baseline"]);
    for seed in 1..=7 {
        sim(&["--seed", &seed.to_string()]);
    }
    let sims = examples(&stdout_of(&db, &["sim", "--help"]));
    assert!(sims.len() >= 3, "{sims:?}");
    for e in &sims {
        run(e);
    }
    for seed in 8..=9 {
        sim(&["--seed", &seed.to_string()]);
    }
    for c in ["compare", "report"] {
        let list = examples(&stdout_of(&db, &[c, "--help"]));
        assert!(list.len() >= 2, "{list:?}");
        for e in &list {
            run(e);
        }
    }
    for file in ["prio.png", "slices.png", "changes.md", "report.html", "pooled.html"] {
        assert!(dir.path().join(file).is_file(), "an example should have written {file}");
    }
}

/// `run` writes JSON under the same name as `show`; the old `--json` is still taken.
#[test]
fn run_export_json_writes_the_run_to_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let tiny = ["run", "spawn:count=10", "--invocations", "1", "--repeat", "1", "--warmup", "0"];
    for (flag, policy) in [("--export-json", "other"), ("--json", "SCHED_BATCH")] {
        let mut args = tiny.to_vec();
        args.extend([flag, "-", "--policy", policy]);
        let out = stdout_of(&db, &args);
        let v: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("`{flag} -` printed more than JSON ({e}):\n{out}"));
        assert!(v["schema_version"].is_number(), "{v}");
        let bench = &v["benchmarks"][0];
        assert_eq!(bench["name"], "spawn", "{v}");
        // Core's parser still reads the policy: `SCHED_BATCH` is batch.
        let expected = if policy == "other" { "other" } else { "batch" };
        assert_eq!(bench["condition"]["requested"]["policy"], expected, "{v}");
    }
    let help = stdout_of(&db, &["run", "--help"]);
    assert!(help.contains("--export-json <FILE>") && !help.contains("--json"), "{help}");
}
