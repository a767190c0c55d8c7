//! The bad-input table: every input that once got through (a panic, a wrong
//! acceptance, an unclear message) with the exit code and the words its
//! error must contain. A regression of any of them fails here.
//!
//! `{dir}` in an argument is replaced by a scratch directory holding the
//! fixtures written by [`fixtures`]; a case with [`Setup::TwoRuns`] starts
//! from a store holding two simulated runs.

use std::path::Path;
use std::process::Command;

#[derive(Clone, Copy, PartialEq)]
enum Setup {
    /// A store path that does not exist yet.
    None,
    /// A store with two short simulated runs (#1, #2).
    TwoRuns,
}

struct Case {
    args: &'static [&'static str],
    setup: Setup,
    /// clap's usage errors and schedlab's own both exit 2.
    code: i32,
    words: &'static [&'static str],
}

const fn case(args: &'static [&'static str], words: &'static [&'static str]) -> Case {
    Case { args, setup: Setup::None, code: 2, words }
}

const fn with_runs(args: &'static [&'static str], words: &'static [&'static str]) -> Case {
    Case { args, setup: Setup::TwoRuns, code: 2, words }
}

#[rustfmt::skip]
const TABLE: &[Case] = &[
    // Benchmarks and their parameters.
    case(&["run", "pipez"], &["unknown benchmark 'pipez'", "pipe"]),
    case(&["run", "pipe:colour=blue"], &["colour", "placement"]),
    case(&["run", "pipe:placement=sideways"], &["sideways", "same-cpu"]),
    case(&["run", "pipe:loops=0"], &["loops"]),
    case(&["run", "pipe:loops=-5"], &["loops"]),
    case(&["run", "threads:alive=100000000"], &["alive"]),
    case(&["run", "hackbench:groups=100000,fds=1000"], &["tasks", "lower groups="]),
    case(&["run", "wakeup:samples=10000000,waiters=1000,classes=normal", "--policy", "other"],
         &["wakeup samples=10000000 with 1000 waiters", "TiB of memory", "MemAvailable", "lower samples="]),
    case(&["run", "wakeup:samples=10000000,classes=normal", "--repeat", "10000", "--policy", "other"],
         &["--repeat 10000", "TiB of memory", "or --repeat"]),
    case(&["run", "exectime:threads=4096,size=1048576", "--policy", "other"],
         &["exectime threads=4096 size=1048576 KiB", "TiB of memory", "lower threads= or size="]),
    // Loads.
    case(&["run", "pipe", "--load", "burn"], &["bad load 'burn'", "burn:2,nice=10"]),
    case(&["run", "pipe", "--load", "burn:2@nice=99"], &["bad load", "nice"]),
    case(&["run", "pipe", "--load", "none,,burn:1"], &["bad load", "empty element"]),
    case(&["run", "pipe", "--policy", "other,,fifo"], &["invalid value '' for '--policy"]),
    case(&["run", "pipe", "--nice", "0,5", "--sweep-limit", "0"], &["--sweep-limit"]),
    case(&["run", "pipe", "--load", "hackbench:100000"], &["needs 4000000 tasks", "fewer hackbench groups"]),
    // The scheduling condition.
    case(&["run", "pipe", "--policy", "realtime"], &["unknown policy 'realtime'", "fifo"]),
    case(&["run", "pipe", "--policy", "fifo", "--prio", "100"], &["priority 100", "between 1 and 99"]),
    case(&["run", "pipe", "--prio", "10"], &["--prio 10 does not apply", "--nice"]),
    case(&["run", "pipe", "--nice", "25"], &["nice 25 is out of range", "-20 and 19"]),
    case(&["run", "pipe", "--policy", "deadline", "--dl-runtime", "2ms", "--dl-deadline", "1ms", "--dl-period", "1ms"],
         &["runtime <= deadline <= period"]),
    case(&["run", "pipe", "--policy", "deadline"], &["--dl-runtime"]),
    case(&["run", "pipe", "--policy", "deadline", "--dl-runtime", "-1ms"], &["--dl-runtime", "negative"]),
    case(&["run", "pipe", "--cpus", "4000"], &["4000", "online"]),
    case(&["run", "pipe", "--cpus", "1-"], &["bad CPU list '1-'", "0,2-3"]),
    // Replication and run options: negative numbers are values, not flags (issue 12, item 11).
    case(&["run", "pipe", "--repeat", "0"], &["--repeat", "from 1 to 10000"]),
    case(&["run", "pipe", "--repeat", "-1"], &["--repeat", "from 1 to 10000"]),
    case(&["run", "pipe", "--repeat", "99999999999"], &["--repeat", "from 1 to 10000"]),
    case(&["run", "spawn", "--invocations", "0"], &["--invocations", "from 1 to 10000"]),
    case(&["run", "spawn", "--warmup", "-2"], &["--warmup", "from 0 to 10000"]),
    case(&["run", "pipe", "--timeout", "90"], &["--timeout", "no unit"]),
    case(&["run", "pipe", "--timeout", "-1"], &["--timeout", "negative"]),
    case(&["run", "pipe", "--timeout", "0s"], &["--timeout", "before it starts"]),
    case(&["run", "pipe", "--ksigma", "-1"], &["--ksigma", "positive number"]),
    case(&["show", "--ksigma", "0"], &["--ksigma", "positive number"]),
    case(&["calibrate", "--runs", "2"], &["--runs", "from 3 to 1000"]),
    case(&["runs", "--limit", "-3"], &["--limit", "whole number"]),
    // Run names that would read as selectors.
    case(&["run", "spawn:count=10", "--name", "last"], &["--name", "choose another name"]),
    case(&["run", "spawn:count=10", "--name", "7"], &["--name", "choose another name"]),
    case(&["run", "spawn:count=10", "--name", ""], &["--name", "choose another name"]),
    case(&["run", "spawn:count=10", "--name", "a,b"], &["--name", "choose another name"]),
    case(&["sim", "--policy", "cfs", "--workload", "hogs", "--name", "last~2"], &["--name", "choose another name"]),
    // The simulator's options, checked before any policy is built.
    case(&["sim", "--no-store", "--policy", "cfs", "--workload", "hackbench", "--hz", "0"], &["hz = 0", "tick rate between 10 and 100000"]),
    case(&["sim", "--no-store", "--policy", "eevdf", "--workload", "hackbench", "--hz", "4000000000"], &["tick rate"]),
    case(&["sim", "--no-store", "--policy", "linux24", "--workload", "hackbench", "--hz", "0"], &["hz = 0"]),
    case(&["sim", "--no-store", "--policy", "nicksched", "--workload", "hackbench", "--hz", "4000000000"], &["tick rate"]),
    case(&["sim", "--no-store", "--policy", "staircase", "--workload", "hackbench", "--cpus", "20000000"], &["cpus = 20000000", "1 to 1024"]),
    case(&["sim", "--no-store", "--policy", "cfs", "--workload", "hogs", "--cpus", "-1"], &["--cpus", "whole number"]),
    case(&["sim", "--policy", "cfs", "--workload", "hogs", "--seeds", "0"], &["--seeds", "from 1 to 10000"]),
    case(&["sim", "--policy", "cfs", "--workload", "hogs", "--seed", "-1"], &["--seed", "whole number"]),
    case(&["sim", "--policy", "cfs", "--workload", "hogs", "--duration", "-5ms"], &["--duration", "negative"]),
    // --noise is checked before anything is simulated or stored.
    case(&["sim", "--no-store", "--workload", "hogs", "--duration", "10ms", "--policy", "cfs", "--policy", "o1", "--noise", "-5%"],
         &["--noise '-5%'", "--noise 2%"]),
    // Selectors.
    with_runs(&["show", "last~-1"], &["no run matches 'last~-1'"]),
    with_runs(&["show", "42"], &["no run matches '42'"]),
    case(&["show"], &["store is empty"]),
    case(&["compare", "1,,2", "3"], &["empty run", "A1,A2,A3"]),
    with_runs(&["compare", "1", "2", "--noise", "-5%"], &["--noise '-5%'", "--noise 2%"]),
    // Zero and absurd simulator values (issue 12, items 10 and 12).
    case(&["sim", "--no-store", "--policy", "o1[def_timeslice=0]", "--workload", "hogs"], &["o1 key 'def_timeslice'", "from 1ns"]),
    case(&["sim", "--no-store", "--policy", "nicksched[min_timeslice=0]", "--workload", "hogs"], &["nicksched key 'min_timeslice'"]),
    case(&["sim", "--no-store", "--policy", "ule[slice_stat_ticks=0]", "--workload", "hogs"], &["ule key 'slice_stat_ticks'", "from 1"]),
    case(&["sim", "--no-store", "--policy", "4bsd[slice_stat_ticks=0]", "--workload", "hogs"], &["4bsd key 'slice_stat_ticks'", "from 1"]),
    case(&["sim", "--no-store", "--policy", "cfs[rr_timeslice=0]", "--workload", "hogs"], &["rr_timeslice"]),
    case(&["sim", "--no-store", "--policy", "cfs", "--workload", "yield[work=0]", "--cpus", "4", "--duration", "100ms"], &["work", "from 1ns"]),
    case(&["sim", "--no-store", "--policy", "cfs", "--workload", "hackbench[groups=40]", "--max-events", "1000"],
         &["would take about", "events per seed", "--max-events"]),
    // Output files are checked before anything is simulated or stored (item 11).
    case(&["sim", "--policy", "cfs", "--workload", "hogs", "--timeline", "/nonexistent/dir/t.csv"],
         &["--timeline /nonexistent/dir/t.csv", "create the directory", "nothing was simulated or stored"]),
    // Stores: a reading command creates nothing; a file that is not a store is refused (item 5).
    case(&["--db", "/nonexistent/dir/x.db", "show"], &["no store at /nonexistent/dir/x.db", "--db PATH"]),
    case(&["--db", "{dir}/not-a-store.db", "show"], &["not-a-store.db", "not a schedlab store"]),
    case(&["--db", "{dir}/not-a-store.db", "sim", "--policy", "cfs", "--workload", "hogs", "--duration", "10ms"], &["not-a-store.db", "not a schedlab store"]),
    case(&["--db", "{dir}/plain.txt", "runs"], &["plain.txt"]),
    // Imports that would have poisoned the store (issue 12, item 4).
    case(&["import", "{dir}/nan.txt", "--format", "hackbench"], &["nan.txt"]),
    case(&["import", "{dir}/inf.txt", "--format", "hackbench"], &["inf.txt"]),
    case(&["import", "{dir}/huge.txt", "--format", "hackbench"], &["huge.txt"]),
    case(&["import", "{dir}/negative.txt", "--format", "hackbench"], &["negative.txt"]),
    case(&["import", "{dir}/ct-empty.json"], &["ct-empty.json", "\"thread\" object is empty"]),
    case(&["import", "{dir}/ct-nocycles.json"], &["ct-nocycles.json", "thread 0 has no cycles"]),
    // --observe and timelines (issue 19).
    case(&["run", "pipe", "--observe=fast"], &["--observe: bad rate 'fast'", "between 1 and 1000"]),
    case(&["run", "pipe", "--observe=5000"], &["bad rate '5000'", "--observe=50"]),
    with_runs(&["plot", "last", "--timeline", "-o", "{dir}/t.png"], &["no stored timeline", "--observe"]),
];

/// Fixture files for the import cases.
fn fixtures(dir: &Path) {
    let files = [
        ("nan.txt", "Time: NaN\n"),
        ("inf.txt", "Time: inf\n"),
        ("huge.txt", "Time: 1e400\n"),
        ("negative.txt", "Time: -5\n"),
        ("ct-empty.json", r#"{"file_version": 1, "thread": {}}"#),
        ("ct-nocycles.json", r#"{"file_version": 1, "thread": {"0": {}}}"#),
    ];
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    std::fs::write(dir.join("plain.txt"), "not a database at all, just text that is long enough to be a header\n")
        .unwrap();
    // A SQLite file of some other program.
    let other = rusqlite::Connection::open(dir.join("not-a-store.db")).unwrap();
    other
        .execute_batch("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT); INSERT INTO notes VALUES (1, 'x');")
        .unwrap();
}

fn schedlab(db: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_schedlab"));
    c.arg("--db").arg(db).env_remove("SCHEDLAB_DB");
    c
}

/// stderr without clap's trailer and blank lines: what the user must read.
fn error_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| !l.trim().is_empty() && !l.starts_with("For more information, try")).collect()
}

#[test]
fn every_bad_input_is_refused_with_a_message_that_names_it() {
    let scratch = tempfile::tempdir().unwrap();
    fixtures(scratch.path());
    let dir = scratch.path().to_str().unwrap();
    let mut failures = Vec::new();
    for (i, c) in TABLE.iter().enumerate() {
        let store = tempfile::tempdir().unwrap();
        let db = store.path().join("results.db");
        if c.setup == Setup::TwoRuns {
            for _ in 0..2 {
                let out = schedlab(&db)
                    .args(["sim", "--policy", "cfs", "--workload", "hogs", "--duration", "10ms", "--seeds", "1"])
                    .output()
                    .unwrap();
                assert!(out.status.success(), "setup failed: {}", String::from_utf8_lossy(&out.stderr));
            }
        }
        let args: Vec<String> = c.args.iter().map(|a| a.replace("{dir}", dir)).collect();
        // A case that names its own store runs without the scratch one.
        let mut cmd = if c.args[0] == "--db" { Command::new(env!("CARGO_BIN_EXE_schedlab")) } else { schedlab(&db) };
        let out = cmd.env_remove("SCHEDLAB_DB").args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines = error_lines(&stderr);
        let mut problems = Vec::new();
        if out.status.code() != Some(c.code) {
            problems.push(format!("exit {:?}, expected {}", out.status.code(), c.code));
        }
        if stderr.contains("panicked") {
            problems.push("panicked".into());
        }
        if lines.len() != 1 || !lines[0].starts_with("error: ") {
            problems.push(format!("expected one 'error: ' line, got {}", lines.len()));
        }
        for w in c.words {
            if !stderr.contains(w) {
                problems.push(format!("lacks '{w}'"));
            }
        }
        if c.setup == Setup::None && !c.args.contains(&"--no-store") && db.exists() && c.args[0] != "show" {
            // A refused command stores nothing: a store it created must hold no run.
            let runs = schedlab(&db).arg("runs").output().unwrap();
            if String::from_utf8_lossy(&runs.stdout).lines().any(|l| l.trim_start().starts_with('#')) {
                problems.push("stored a run although refused".into());
            }
        }
        if !problems.is_empty() {
            failures.push(format!("case {i} {:?}: {}\n  stderr: {}", c.args, problems.join("; "), stderr.trim()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} bad inputs misbehave:\n{}",
        failures.len(),
        TABLE.len(),
        failures.join("\n")
    );
}
