//! The dynamic-priority timeline: every change of each normal task's
//! priority quantity (the TIMELINE line of schedulers.md), with its time.
//! RT tasks are not recorded: their priority is fixed.

use schedlab_core::timeline as core;
use serde_json::{json, Value};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineTask {
    pub id: u32,
    pub name: String,
    /// `(time_ns, value)`, one point per change, in time order.
    pub points: Vec<(u64, i64)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeline {
    /// The quantity's name, e.g. "prio" or "vruntime - min_vruntime (ns)".
    pub quantity: String,
    pub lower_is_better: bool,
    pub tasks: Vec<TimelineTask>,
}

impl Timeline {
    /// `task_id,task,time_ns,value` rows, tasks in id order.
    pub fn to_csv(&self) -> String {
        let mut s = String::from("task_id,task,time_ns,value\n");
        for t in &self.tasks {
            for (at, v) in &t.points {
                s.push_str(&format!("{},{},{},{}\n", t.id, csv_field(&t.name), at, v));
            }
        }
        s
    }

    /// `{"quantity":..,"lower_is_better":..,"tasks":[{"id","name","points":[[t,v],..]}]}`.
    pub fn to_json(&self) -> Value {
        json!({
            "quantity": self.quantity,
            "lower_is_better": self.lower_is_better,
            "tasks": self.tasks.iter().map(|t| json!({
                "id": t.id,
                "name": t.name,
                "points": t.points.iter().map(|(a, v)| json!([a, v])).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })
    }

    pub fn task(&self, name: &str) -> Option<&TimelineTask> {
        self.tasks.iter().find(|t| t.name == name)
    }

    /// The shared timeline form (stored with the run, drawn by `plot
    /// --timeline` like a live one): the policy's one quantity per task.
    /// `source` says which policy and seed.
    pub fn to_core(&self, source: &str) -> core::Timeline {
        let end_ns = self.tasks.iter().filter_map(|t| t.points.last()).map(|p| p.0).max().unwrap_or(0);
        core::Timeline {
            source: source.to_string(),
            primary: self.quantity.clone(),
            quantities: vec![core::Quantity {
                name: self.quantity.clone(),
                unit: String::new(),
                lower_runs_first: Some(self.lower_is_better),
            }],
            missing: Vec::new(),
            end_ns,
            tasks: self
                .tasks
                .iter()
                .map(|t| {
                    let mut c = core::TimelineTask::new(u64::from(t.id), t.name.clone(), "task");
                    c.series.insert(self.quantity.clone(), t.points.iter().map(|&(at, v)| (at, v as f64)).collect());
                    c
                })
                .collect(),
            notes: Vec::new(),
        }
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exports_csv_and_json() {
        let tl = Timeline {
            quantity: "prio".into(),
            lower_is_better: true,
            tasks: vec![TimelineTask { id: 3, name: "hog,0".into(), points: vec![(0, 120), (5, 125)] }],
        };
        assert_eq!(tl.to_csv(), "task_id,task,time_ns,value\n3,\"hog,0\",0,120\n3,\"hog,0\",5,125\n");
        assert_eq!(tl.to_json()["tasks"][0]["points"][1], json!([5, 125]));
        let c = tl.to_core("simulator: o1, seed 1");
        assert_eq!((c.primary.as_str(), c.end_ns, c.quantities[0].lower_runs_first), ("prio", 5, Some(true)));
        assert_eq!(c.tasks[0].points("prio"), &[(0, 120.0), (5, 125.0)]);
        assert_eq!(c.tasks[0].id, 3);
    }
}
