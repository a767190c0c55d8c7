//! A scheduler timeline: named quantities of each task (priority, policy,
//! vruntime, run time, switches, ...) over time, live or simulated, in one
//! form, so that `plot --timeline` and the HTML report draw both alike.
//!
//! Each quantity of each task is a series of `(time_ns, value)` points, one
//! per change (a level holds until the next point; [`Timeline::end_ns`] says
//! how long the last one held). A quantity the source cannot give (a field
//! this kernel does not print, schedstats off) is listed in
//! [`Timeline::missing`] with the reason: named, never filled in.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The store keeps a result's timeline in a row of this data type beside
/// its metrics (never read as a metric).
pub const TIMELINE_DATA_TYPE: &str = "timeline";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quantity {
    /// e.g. "prio", "vruntime", "nr_switches".
    pub name: String,
    /// "ns", "count", or "" for a level such as a priority or a policy number.
    pub unit: String,
    /// Some(true): a priority where lower runs first; Some(false): higher
    /// runs first; None: not an order (a counter, a time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower_runs_first: Option<bool>,
}

/// A quantity the source lacks, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Missing {
    pub name: String,
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineTask {
    /// Thread id (live) or task id (simulator).
    pub id: u64,
    pub name: String,
    /// "measured" or "load" (live), "task" (simulator).
    pub role: String,
    /// Quantity name → `(time_ns, value)`, one point per change, in time order.
    pub series: BTreeMap<String, Vec<(u64, f64)>>,
    /// The task's last sample, when it ended (or stopped being seen) before
    /// the timeline's end: its last levels hold until here only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen_ns: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// Where the values come from, e.g. "/proc/PID/task/TID/sched and
    /// schedstat, sampled at 100 Hz" or "simulator: eevdf, seed 1".
    pub source: String,
    /// The quantity drawn when none is asked for.
    pub primary: String,
    pub quantities: Vec<Quantity>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<Missing>,
    /// Time of the last sample (ns from the start): the last level holds until here.
    pub end_ns: u64,
    pub tasks: Vec<TimelineTask>,
    /// What a reader should know (a rate lowered to stay in budget, tasks left out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimelineError {
    #[error("the timeline has no quantity '{asked}': {why}; choose one of: {available}")]
    NoQuantity { asked: String, why: String, available: String },
    #[error("the timeline has no points of '{0}' for any task: nothing to draw; choose another --quantity")]
    Empty(String),
}

impl Timeline {
    pub fn quantity(&self, name: &str) -> Option<&Quantity> {
        self.quantities.iter().find(|q| q.name == name)
    }

    /// The quantity `asked` (the primary one when None), or an error that
    /// says whether the source lacks it and what there is instead.
    pub fn select(&self, asked: Option<&str>) -> Result<&Quantity, TimelineError> {
        let name = asked.unwrap_or(&self.primary);
        if let Some(q) = self.quantity(name) {
            return Ok(q);
        }
        let why = match self.missing.iter().find(|m| m.name == name) {
            Some(m) => format!("the source lacks it ({})", m.why),
            None => "no such quantity".to_string(),
        };
        let available = self.quantities.iter().map(|q| q.name.as_str()).collect::<Vec<_>>().join(", ");
        Err(TimelineError::NoQuantity { asked: name.to_string(), why, available })
    }

    pub fn task(&self, name: &str) -> Option<&TimelineTask> {
        self.tasks.iter().find(|t| t.name == name)
    }
}

impl TimelineTask {
    pub fn new(id: u64, name: impl Into<String>, role: impl Into<String>) -> TimelineTask {
        TimelineTask { id, name: name.into(), role: role.into(), series: BTreeMap::new(), last_seen_ns: None }
    }

    /// Record `value` of `quantity` at `t_ns` if it differs from the last point.
    pub fn push(&mut self, quantity: &str, t_ns: u64, value: f64) {
        let s = self.series.entry(quantity.to_string()).or_default();
        if s.last().is_none_or(|&(_, v)| v != value) {
            s.push((t_ns, value));
        }
    }

    pub fn points(&self, quantity: &str) -> &[(u64, f64)] {
        self.series.get(quantity).map_or(&[], Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tl() -> Timeline {
        let mut t = TimelineTask::new(7, "waiter 0", "measured");
        t.push("prio", 0, 120.0);
        t.push("prio", 10, 120.0);
        t.push("prio", 20, 98.0);
        Timeline {
            source: "test".into(),
            primary: "prio".into(),
            quantities: vec![Quantity { name: "prio".into(), unit: String::new(), lower_runs_first: Some(true) }],
            missing: vec![Missing { name: "lag".into(), why: "this kernel does not print se.vlag".into() }],
            end_ns: 30,
            tasks: vec![t],
            notes: Vec::new(),
        }
    }

    #[test]
    fn points_are_kept_per_change() {
        assert_eq!(tl().tasks[0].points("prio"), &[(0, 120.0), (20, 98.0)]);
        assert!(tl().tasks[0].points("vruntime").is_empty());
    }

    #[test]
    fn a_missing_quantity_is_named_with_its_reason() {
        let t = tl();
        assert_eq!(t.select(None).unwrap().name, "prio");
        let e = t.select(Some("lag")).unwrap_err().to_string();
        assert!(e.contains("'lag'") && e.contains("se.vlag") && e.contains("choose one of: prio"), "{e}");
        let e = t.select(Some("bogus")).unwrap_err().to_string();
        assert!(e.contains("no such quantity"), "{e}");
    }

    #[test]
    fn json_round_trips_and_old_fields_default() {
        let t = tl();
        let back: Timeline = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
        let bare = r#"{"source":"s","primary":"p","quantities":[],"end_ns":0,"tasks":[]}"#;
        let b: Timeline = serde_json::from_str(bare).unwrap();
        assert!(b.missing.is_empty() && b.notes.is_empty());
    }

    #[test]
    fn results_without_a_timeline_keep_their_old_json() {
        use crate::{BenchResult, Condition, SchedCondition};
        let cond = Condition::Live { requested: SchedCondition::default(), applied: None, loads: vec![] };
        let mut r = BenchResult::new("pipe", cond, 0);
        let json = serde_json::to_value(&r).unwrap();
        assert!(json.get("timeline").is_none(), "no key for no timeline: older readers see the old form");
        let old: BenchResult = serde_json::from_value(json).unwrap();
        assert_eq!(old.timeline, None, "an older result decodes");
        r.timeline = Some(tl());
        let back: BenchResult = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}
