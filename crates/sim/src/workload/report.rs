//! Metrics the seeds' workloads derive from their series (the histograms
//! their `Record` and `Lap` steps fill) and from the run, under the names the
//! live benchmarks use, so a live and a simulated run compare in one table.

use super::WorkloadDef;
use schedlab_core::{Direction, LatencyHistogram, Metric, Unit};

/// Which derived metrics a workload reports besides its series.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Report {
    /// Only the engine's own metrics.
    #[default]
    None,
    /// `processes_per_s` (live `spawn`).
    Spawn,
    /// `scripts_per_min` (live `shell`).
    Shell,
    /// `wall_time`, `user_time`, `cpu_percent` (live `build`).
    Make,
    /// `requests_per_s`, `pages_served` (live `http`).
    Web,
    /// `max_latency`, `missed_periods` (live `cyclic`); the period is the workload's `period`.
    Periodic,
    /// `best`, `average`, `worst`, `worst_over_average` (live `exectime`).
    Exectime,
}

/// What a finished run tells the derived metrics.
pub struct RunFacts<'a> {
    pub series: &'a [LatencyHistogram],
    pub elapsed_ns: u64,
    /// Every task exited (a make's wall time exists only then).
    pub finished: bool,
    /// CPU time the CPUs were busy, summed.
    pub busy_ns: u64,
    pub timer_overruns: u64,
}

/// The series as histograms, then the workload's derived metrics.
pub fn metrics(wl: &WorkloadDef, f: &RunFacts) -> Vec<Metric> {
    let mut m = Vec::new();
    for (name, h) in wl.series.iter().zip(f.series) {
        if !h.is_empty() {
            // A measured period is neither better short nor long.
            let dir = if name == "period" { Direction::Neutral } else { Direction::LowerIsBetter };
            m.push(Metric::histogram(name, dir, h.clone()));
        }
    }
    let secs = f.elapsed_ns as f64 / 1e9;
    let count = f.series.first().map_or(0, LatencyHistogram::count) as f64;
    let rate = |name: &str, unit: Unit, per_s: f64| {
        Metric::samples(name, unit, Direction::HigherIsBetter, vec![count * per_s / secs])
    };
    if secs <= 0.0 {
        return m;
    }
    match wl.report {
        Report::None => {}
        Report::Spawn => m.push(rate("processes_per_s", Unit::PerSecond, 1.0)),
        Report::Shell => m.push(rate("scripts_per_min", Unit::PerMinute, 60.0)),
        Report::Web => {
            m.push(rate("requests_per_s", Unit::PerSecond, 1.0));
            m.push(Metric::samples("pages_served", Unit::Count, Direction::Neutral, vec![count]));
        }
        Report::Make if f.finished => {
            let busy = f.busy_ns as f64 / 1e9;
            m.push(Metric::samples("wall_time", Unit::Seconds, Direction::LowerIsBetter, vec![secs]));
            // No kernel time in the model: all busy time is the jobs' own.
            m.push(Metric::samples("user_time", Unit::Seconds, Direction::LowerIsBetter, vec![busy]));
            m.push(Metric::samples("cpu_percent", Unit::Percent, Direction::Neutral, vec![100.0 * busy / secs]));
        }
        Report::Make => {}
        Report::Periodic => {
            if let Some(h) = f.series.first().filter(|h| !h.is_empty()) {
                let period = wl.params.get("period").and_then(|v| v.as_u64()).unwrap_or(u64::MAX);
                let max = h.max().unwrap_or(0) as f64;
                m.push(Metric::samples("max_latency", Unit::Nanoseconds, Direction::LowerIsBetter, vec![max]));
                // As live cyclic: wake-ups later than a whole period, plus expiries folded into one.
                let missed = h.count_above(period) + f.timer_overruns;
                m.push(Metric::samples("missed_periods", Unit::Count, Direction::LowerIsBetter, vec![missed as f64]));
            }
        }
        Report::Exectime => {
            if let Some(h) = f.series.first().filter(|h| !h.is_empty()) {
                let (best, avg, worst) =
                    (h.min().unwrap_or(0) as f64, h.mean().unwrap_or(0.0), h.max().unwrap_or(0) as f64);
                for (name, v) in [("best", best), ("average", avg), ("worst", worst)] {
                    m.push(Metric::samples(name, Unit::Nanoseconds, Direction::LowerIsBetter, vec![v]));
                }
                if avg > 0.0 {
                    m.push(Metric::samples(
                        "worst_over_average",
                        Unit::Ratio,
                        Direction::LowerIsBetter,
                        vec![worst / avg],
                    ));
                }
            }
        }
    }
    m
}
