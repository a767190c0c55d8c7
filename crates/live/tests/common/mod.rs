//! Helpers shared by the live integration tests (each test binary uses
//! some of them).
#![allow(dead_code)]

use schedlab_core::{BenchResult, SchedCondition};
use schedlab_live::{find, hygiene, LiveError, Params, RunPlan};
use std::sync::{Mutex, MutexGuard};

/// The stop flag and this process's children are global: tests that run a
/// benchmark take this lock, which also clears the stop flag.
static LOCK: Mutex<()> = Mutex::new(());

pub fn lock() -> MutexGuard<'static, ()> {
    let g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    hygiene::clear_stop();
    g
}

/// A quick plan under the default condition.
pub fn plan(repeat: u32, warmup: u32) -> RunPlan {
    RunPlan { condition: SchedCondition::default(), repeat, warmup, quick: true, ..Default::default() }
}

/// Every case of `bench` with `params`, run under `plan`.
pub fn run(bench: &str, params: &str, plan: &RunPlan) -> Result<Vec<BenchResult>, LiveError> {
    let b = find(bench)?;
    let cases = b.cases(&Params::parse(params)?, plan)?;
    cases.iter().map(|c| b.run(c, plan, &|_| {})).collect()
}

/// ftrace's settings that a breaktrace session changes.
/// The buffer size is in 8 KiB steps (the kernel rounds to pages): an
/// unused buffer ("7 (expanded: 1408)") comes back allocated at its
/// expanded size, which may read 1410.
pub fn ftrace_settings(dir: &std::path::Path) -> Vec<String> {
    ["tracing_on", "tracing_cpumask", "buffer_size_kb", "trace_clock", "set_event", "current_tracer"]
        .iter()
        .map(|f| {
            let v = std::fs::read_to_string(dir.join(f)).unwrap_or_default();
            let v = match *f {
                "buffer_size_kb" => {
                    let kb = v.split_once("(expanded:").map_or(v.as_str(), |(_, e)| e.trim_end().trim_end_matches(')'));
                    format!("{}", kb.trim().parse::<u64>().unwrap_or(0) / 8)
                }
                _ => v,
            };
            format!("{f}={v}")
        })
        .collect()
}
