//! Issue 19: a live timeline (`run wakeup --observe --load hackbench:4`)
//! beside the simulator's `eevdf` on the same workload, in one figure of
//! stacked panels; the live one is built here in the shape `--observe`
//! stores, the simulated one comes from a short simulation.

use schedlab_core::timeline::{Missing, Quantity, Timeline, TimelineTask};
use schedlab_report::plot::{draw_panels, panels_svg_string, task_group, timeline_panels, PanelBody};
use std::collections::BTreeSet;

const LIVE_TITLE: &str = "#1 wakeup · kernel 6.18.4 · /proc/PID/task/TID/sched, sampled at 100.0 Hz";
const SIM_TITLE: &str = "#2 sim:wakeup · simulator: eevdf, seed 1";

/// What `run wakeup --observe --load hackbench:1` stores: the waker, one
/// waiter of each class (comm names cut to 15 bytes), and hackbench's
/// senders and receivers, over 50 ms.
fn live() -> Timeline {
    let mut tasks = Vec::new();
    let mut add = |tid: u64, comm: &str, role: &str, prio: f64| {
        let mut t = TimelineTask::new(tid, format!("{role} {comm} {tid}"), role);
        t.push("prio", 0, prio);
        t.push("vruntime", 0, 1e6);
        t.push("vruntime", 20_000_000, 3e6 + tid as f64);
        tasks.push(t);
    };
    add(100, "schedlab-wakeup", "measured", 9.0);
    add(101, "schedlab-wake-r", "measured", 49.0);
    add(102, "schedlab-wake-n", "measured", 120.0);
    for i in 0..4 {
        add(200 + i, "schedlab-hbsend", "load", 120.0);
        add(300 + i, "schedlab-hbrecv", "load", 120.0);
    }
    Timeline {
        source: "/proc/PID/task/TID/sched, sampled at 100.0 Hz".into(),
        primary: "prio".into(),
        quantities: vec![
            Quantity { name: "prio".into(), unit: String::new(), lower_runs_first: Some(true) },
            Quantity { name: "vruntime".into(), unit: "ns".into(), lower_runs_first: None },
        ],
        missing: vec![Missing { name: "lag".into(), why: "this kernel does not print se.vlag".into() }],
        end_ns: 50_000_000,
        tasks,
        notes: Vec::new(),
    }
}

fn simulated() -> Timeline {
    let opts = schedlab_sim::SimOptions { record_timeline: true, duration_ns: 100_000_000, ..Default::default() };
    let out = schedlab_sim::run("eevdf", "wakeup[samples=20,interval=2ms,groups=1]", &opts).unwrap();
    out.timeline.expect("a timeline was asked for").to_core("simulator: eevdf, seed 1")
}

/// Every `<text>` of an SVG, as plotters writes them ("<text ...>\nTEXT\n</text>").
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| Some(t.split_once(">\n")?.1.split_once("\n</text>")?.0.to_string()))
        .collect()
}

#[test]
fn a_live_and_a_simulated_timeline_stack_in_two_titled_panels() {
    let (live, sim) = (live(), simulated());
    let fig = timeline_panels(
        &[(LIVE_TITLE.into(), Ok(&live)), (SIM_TITLE.into(), Ok(&sim))],
        "scheduler timelines",
        None,
        12,
    );
    assert_eq!(fig.panels.len(), 2);
    assert!(
        fig.panels.iter().all(|p| matches!(p.body, PanelBody::Chart(_))),
        "both drawn: {:?}",
        fig.messages().collect::<Vec<_>>()
    );
    let svg = panels_svg_string(&fig).unwrap();
    let texts = texts(&svg);
    assert!(texts.iter().any(|t| t == "scheduler timelines"), "the figure's title");
    assert!(texts.iter().any(|t| t == LIVE_TITLE), "the live panel's title: {texts:?}");
    assert!(texts.iter().any(|t| t.starts_with(SIM_TITLE)), "the simulated panel's title: {texts:?}");
    // One legend: each group once, though both panels draw it.
    for group in ["rt waiter", "normal waiter", "hackbench"] {
        assert_eq!(texts.iter().filter(|t| *t == group).count(), 1, "{group} in the legend once: {texts:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("panels.png");
    draw_panels(&fig, &png).unwrap();
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[1..4], b"PNG");
    assert!(bytes.len() > 10_000, "a drawn PNG: {} bytes", bytes.len());
}

#[test]
fn a_panel_without_the_quantity_asked_says_so() {
    let (live, sim) = (live(), simulated());
    // A quantity of the simulator's that the live timeline lacks.
    let q =
        sim.quantities.iter().find(|q| live.quantity(&q.name).is_none()).expect("the simulator has its own quantity");
    let fig = timeline_panels(&[(LIVE_TITLE.into(), Ok(&live)), (SIM_TITLE.into(), Ok(&sim))], "t", Some(&q.name), 12);
    let messages: Vec<(&str, &str)> = fig.messages().collect();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0].0, LIVE_TITLE);
    let said = format!("no {} in this timeline", q.name);
    assert!(messages[0].1.starts_with(&said), "{messages:?}");
    let svg = panels_svg_string(&fig).unwrap();
    assert!(texts(&svg).iter().any(|t| t.starts_with(&said)), "the panel says so, never blank");
    // A run without any timeline gets a panel that says so too.
    let fig = timeline_panels(
        &[("#3".into(), Err("no stored timeline in this run".into())), (SIM_TITLE.into(), Ok(&sim))],
        "t",
        None,
        12,
    );
    assert!(texts(&panels_svg_string(&fig).unwrap()).iter().any(|t| t == "no stored timeline in this run"));
}

/// Item 3 of issue 19: the simulator's wakeup names its tasks so that they
/// fall in the live run's groups.
#[test]
fn the_simulated_wakeup_tasks_fall_in_the_live_groups() {
    let groups = |tl: &Timeline| tl.tasks.iter().map(task_group).collect::<BTreeSet<String>>();
    let (live, sim) = (groups(&live()), groups(&simulated()));
    assert!(sim.is_subset(&live), "every simulated group is a live one: {sim:?} against {live:?}");
    for g in ["normal waiter", "hackbench"] {
        assert!(sim.contains(g), "{g} in {sim:?}");
    }
}
