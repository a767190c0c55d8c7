//! The state timeline: every change of each normal task's state variables
//! (the policy's [`StateVar`]s, its dynamic priority first: the TIMELINE
//! line of schedulers.md), with its time. RT tasks are not recorded: their
//! priority is fixed.

use crate::policy::{Policy, TaskId};
use crate::SimError;
use schedlab_core::timeline as core;
use serde_json::{json, Map, Value};

pub use crate::policy::StateVar;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineTask {
    pub id: u32,
    pub name: String,
    /// The primary variable's `(time_ns, value)`, one point per change, in time order.
    pub points: Vec<(u64, i64)>,
    /// The other variables' points, in the order of [`Timeline::vars`] after the first.
    pub others: Vec<Vec<(u64, i64)>>,
}

impl TimelineTask {
    /// The points of variable `i` of [`Timeline::vars`].
    pub fn series(&self, i: usize) -> &[(u64, i64)] {
        match i {
            0 => &self.points,
            _ => &self.others[i - 1],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeline {
    /// The primary variable's name (`vars[0]`), e.g. "prio" or "vruntime".
    pub quantity: String,
    pub lower_is_better: bool,
    /// Every variable recorded, the primary first.
    pub vars: Vec<StateVar>,
    pub tasks: Vec<TimelineTask>,
}

impl Timeline {
    /// `task_id,task,time_ns,quantity,value` rows: tasks in id order, each
    /// task's variables in [`Timeline::vars`] order, each in time order.
    pub fn to_csv(&self) -> String {
        let mut s = String::from("task_id,task,time_ns,quantity,value\n");
        for t in &self.tasks {
            let name = csv_field(&t.name);
            for (i, var) in self.vars.iter().enumerate() {
                for (at, v) in t.series(i) {
                    s.push_str(&format!("{},{name},{at},{},{v}\n", t.id, var.name));
                }
            }
        }
        s
    }

    /// `{"quantity", "lower_is_better", "quantities": [{"name", "unit",
    /// "lower_runs_first", "help"}], "tasks": [{"id", "name", "points",
    /// "series": {NAME: [[t, v], ..]}}]}`: `quantity`, `lower_is_better` and
    /// each task's `points` are the first variable's, as before there were several.
    pub fn to_json(&self) -> Value {
        let pairs = |p: &[(u64, i64)]| p.iter().map(|(a, v)| json!([a, v])).collect::<Vec<_>>();
        json!({
            "quantity": self.quantity,
            "lower_is_better": self.lower_is_better,
            "quantities": self.vars.iter().map(|v| json!({
                "name": v.name,
                "unit": v.unit,
                "lower_runs_first": v.lower_runs_first,
                "help": v.help,
            })).collect::<Vec<_>>(),
            "tasks": self.tasks.iter().map(|t| {
                let series: Map<String, Value> =
                    self.vars.iter().enumerate().map(|(i, v)| (v.name.to_string(), json!(pairs(t.series(i))))).collect();
                json!({"id": t.id, "name": t.name, "points": pairs(&t.points), "series": series})
            }).collect::<Vec<_>>(),
        })
    }

    pub fn task(&self, name: &str) -> Option<&TimelineTask> {
        self.tasks.iter().find(|t| t.name == name)
    }

    /// The points of variable `var` of task `task`, if both exist.
    pub fn points_of(&self, task: &str, var: &str) -> Option<&[(u64, i64)]> {
        let i = self.vars.iter().position(|v| v.name == var)?;
        Some(self.task(task)?.series(i))
    }

    /// The same timeline with only the variables `asked`, in that order (the
    /// first becomes the primary); all of them when `asked` is empty.
    pub fn select(&self, asked: &[String]) -> Result<Timeline, SimError> {
        if asked.is_empty() {
            return Ok(self.clone());
        }
        let picked = pick(&self.vars, asked)?;
        let first = self.vars[picked[0]];
        Ok(Timeline {
            quantity: first.name.to_string(),
            lower_is_better: first.lower_runs_first == Some(true),
            vars: picked.iter().map(|&i| self.vars[i]).collect(),
            tasks: self
                .tasks
                .iter()
                .map(|t| TimelineTask {
                    id: t.id,
                    name: t.name.clone(),
                    points: t.series(picked[0]).to_vec(),
                    others: picked[1..].iter().map(|&i| t.series(i).to_vec()).collect(),
                })
                .collect(),
        })
    }

    /// The shared timeline form (stored with the run, drawn by `plot
    /// --timeline` like a live one): every variable of every task, the
    /// primary one drawn by default. `source` says which policy and seed.
    pub fn to_core(&self, source: &str) -> core::Timeline {
        let end_ns = self
            .tasks
            .iter()
            .flat_map(|t| (0..self.vars.len()).filter_map(|i| t.series(i).last()))
            .map(|p| p.0)
            .max()
            .unwrap_or(0);
        core::Timeline {
            source: source.to_string(),
            primary: self.quantity.clone(),
            quantities: self
                .vars
                .iter()
                .map(|v| core::Quantity {
                    name: v.name.to_string(),
                    unit: v.unit.to_string(),
                    lower_runs_first: v.lower_runs_first,
                })
                .collect(),
            missing: Vec::new(),
            end_ns,
            tasks: self
                .tasks
                .iter()
                .map(|t| {
                    let mut c = core::TimelineTask::new(u64::from(t.id), t.name.clone(), "task");
                    for (i, v) in self.vars.iter().enumerate() {
                        let points = t.series(i).iter().map(|&(at, v)| (at, v as f64)).collect();
                        c.series.insert(v.name.to_string(), points);
                    }
                    c
                })
                .collect(),
            notes: Vec::new(),
        }
    }
}

/// The positions in `vars` of the names `asked`, or an error listing every
/// variable with its unit, order and meaning.
pub fn pick(vars: &[StateVar], asked: &[String]) -> Result<Vec<usize>, SimError> {
    asked
        .iter()
        .map(|a| {
            vars.iter()
                .position(|v| v.name == a.as_str())
                .ok_or_else(|| SimError::UnknownQuantity { asked: a.clone(), available: describe(vars) })
        })
        .collect()
}

/// One line per variable: name, unit and order, meaning.
pub fn describe(vars: &[StateVar]) -> String {
    let width = vars.iter().map(|v| v.name.len()).max().unwrap_or(0);
    let lines: Vec<String> = vars
        .iter()
        .map(|v| {
            let order = match v.lower_runs_first {
                Some(true) => ", lower runs first",
                Some(false) => ", higher runs first",
                None => "",
            };
            let unit = if v.unit.is_empty() { "level" } else { v.unit };
            format!("  {:width$}  ({unit}{order}) {}", v.name, v.help)
        })
        .collect();
    lines.join("\n")
}

/// Builds a run's timeline as the engine goes; the engine keeps one only
/// when the timeline is asked for, so a run without one pays nothing.
#[derive(Debug)]
pub(crate) struct Recorder {
    vars: &'static [StateVar],
    tasks: Vec<TimelineTask>,
    /// The policy's values of the task being noted (reused).
    values: Vec<i64>,
}

impl Recorder {
    pub(crate) fn new(vars: &'static [StateVar]) -> Recorder {
        assert!(!vars.is_empty(), "a policy declares at least its dynamic priority");
        Recorder { vars, tasks: Vec::new(), values: vec![0; vars.len()] }
    }

    /// A new task; ids come in order from 0.
    pub(crate) fn add_task(&mut self, id: u32, name: String) {
        debug_assert_eq!(id as usize, self.tasks.len());
        let others = vec![Vec::new(); self.vars.len() - 1];
        self.tasks.push(TimelineTask { id, name, points: Vec::new(), others });
    }

    /// Record task `t`'s variables at `now` where they changed.
    pub(crate) fn note(&mut self, t: TaskId, now: u64, policy: &dyn Policy) {
        policy.state(t, now, &mut self.values);
        let task = &mut self.tasks[t as usize];
        for (i, &v) in self.values.iter().enumerate() {
            let series = if i == 0 { &mut task.points } else { &mut task.others[i - 1] };
            if series.last().map(|p| p.1) != Some(v) {
                series.push((now, v));
            }
        }
    }

    pub(crate) fn finish(self) -> Timeline {
        let first = self.vars[0];
        Timeline {
            quantity: first.name.to_string(),
            lower_is_better: first.lower_runs_first == Some(true),
            vars: self.vars.to_vec(),
            tasks: self.tasks,
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

    const VARS: &[StateVar] = &[
        StateVar::new("prio", "", Some(true), "dynamic priority"),
        StateVar::new("sleep_avg", "ns", None, "sleep average"),
    ];

    fn tl() -> Timeline {
        Timeline {
            quantity: "prio".into(),
            lower_is_better: true,
            vars: VARS.to_vec(),
            tasks: vec![TimelineTask {
                id: 3,
                name: "hog,0".into(),
                points: vec![(0, 120), (5, 125)],
                others: vec![vec![(0, 900), (4, 0)]],
            }],
        }
    }

    #[test]
    fn exports_csv_and_json() {
        let tl = tl();
        assert_eq!(
            tl.to_csv(),
            "task_id,task,time_ns,quantity,value\n3,\"hog,0\",0,prio,120\n3,\"hog,0\",5,prio,125\n\
             3,\"hog,0\",0,sleep_avg,900\n3,\"hog,0\",4,sleep_avg,0\n"
        );
        let j = tl.to_json();
        assert_eq!(j["tasks"][0]["points"][1], json!([5, 125]));
        assert_eq!(j["tasks"][0]["series"]["sleep_avg"][1], json!([4, 0]));
        assert_eq!((&j["quantities"][1]["name"], &j["quantities"][1]["unit"]), (&json!("sleep_avg"), &json!("ns")));
        let c = tl.to_core("simulator: o1, seed 1");
        assert_eq!((c.primary.as_str(), c.end_ns, c.quantities[0].lower_runs_first), ("prio", 5, Some(true)));
        assert_eq!(c.tasks[0].points("prio"), &[(0, 120.0), (5, 125.0)]);
        assert_eq!(c.tasks[0].points("sleep_avg"), &[(0, 900.0), (4, 0.0)]);
        assert_eq!((c.quantities[1].unit.as_str(), c.quantities[1].lower_runs_first), ("ns", None));
        assert_eq!(c.tasks[0].id, 3);
    }

    #[test]
    fn selecting_keeps_the_asked_variables_in_order_and_refuses_an_unknown_one() {
        let tl = tl();
        let s = tl.select(&["sleep_avg".into()]).unwrap();
        assert_eq!((s.quantity.as_str(), s.lower_is_better, s.vars.len()), ("sleep_avg", false, 1));
        assert_eq!(s.tasks[0].points, vec![(0, 900), (4, 0)]);
        assert_eq!(tl.select(&[]).unwrap(), tl);
        let both = tl.select(&["sleep_avg".into(), "prio".into()]).unwrap();
        assert_eq!(both.tasks[0].others, vec![vec![(0, 120), (5, 125)]]);
        let e = tl.select(&["sleep".into()]).unwrap_err().to_string();
        assert!(e.contains("'sleep'") && e.contains("sleep_avg  (ns) sleep average"), "{e}");
        assert!(e.contains("prio       (level, lower runs first) dynamic priority"), "{e}");
    }
}
