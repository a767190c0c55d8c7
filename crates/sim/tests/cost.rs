//! The scheduler's own work (src/cost.rs): counted per decision, priced by
//! the cost table, charged as CPU time and as wake-up latency. Zero cost
//! reproducing the earlier model exactly is checked by tests/snapshots.rs
//! (its `<policy>.txt` files predate the cost model, re-recorded once for the
//! RT pull rule) and the fast path's
//! exactness under both by tests/fast_forward.rs.

use schedlab_core::MetricData;
use schedlab_sim::{run, CostTable, SimOptions, SimOutcome};

const POLICIES: [&str; 12] =
    ["cfs", "eevdf", "linux24", "o1", "4bsd", "ule", "staircase", "nicksched", "ingo_ll", "fixedprio", "bfs", "ule1"];

fn opts(cpus: u32, secs: f64, cost: CostTable) -> SimOptions {
    SimOptions { cpus, duration_ns: (secs * 1e9) as u64, cost, ..SimOptions::default() }
}

fn value(out: &SimOutcome, name: &str) -> f64 {
    match &out.result.metric(name).unwrap_or_else(|| panic!("no {name}")).data {
        MetricData::Samples { values } => values[0],
        _ => panic!("{name} is not a sample"),
    }
}

#[test]
fn rt_wakeup_latency_is_the_scheduler_work_and_zero_only_when_it_is_free() {
    // E3's probe on one CPU: the RT waker (prio 90) broadcasts to an RT
    // waiter (50) and a normal one. Free, the waiter runs at the instant the
    // waker sleeps; priced, it waits for the waker's two wake-up paths and
    // its own pick (a few hundred ns at the defaults, far below a tick).
    let wl = "wakeup:samples=200,interval=2ms,groups=1";
    for p in POLICIES {
        let free = run(p, wl, &opts(1, 2.0, CostTable::ZERO)).unwrap();
        let lat = free.result.metric("wakeup_latency.rt").unwrap().summary().unwrap();
        assert_eq!((lat.n, lat.max), (199, 0.0), "{p}");
        assert!(free.result.metric("scheduler_cpu").is_none(), "{p}: zero-cost results gain no metric");
        let priced = run(p, wl, &opts(1, 2.0, CostTable::DEFAULT)).unwrap();
        let lat = priced.result.metric("wakeup_latency.rt").unwrap().summary().unwrap();
        assert!(lat.n == 199 && lat.min > 0.0 && lat.max < 5_000.0, "{p}: {lat:?}");
        assert!(value(&priced, "scheduler_cpu") > 0.0, "{p}");
    }
}

#[test]
fn linux24s_goodness_scan_grows_with_the_runnable_tasks_and_o1s_pick_does_not() {
    // hackbench on one CPU, 10 and 30 groups (400 and 1200 tasks). Free, the
    // two policies take the same time within 1 %; priced, Linux 2.4 scans the
    // whole runqueue list at every schedule (50 ns a task), so its scheduler
    // time grows with the groups (2.0 % of the CPU at 10 groups, 4.6 % at 30)
    // while O(1)'s stays under 0.2 %, and its makespan falls 4 % behind at 30.
    let run_g = |p: &str, g: u32, cost| run(p, &format!("hackbench:groups={g}"), &opts(1, 600.0, cost)).unwrap();
    for g in [10, 30] {
        let (l, o) = (run_g("linux24", g, CostTable::ZERO), run_g("o1", g, CostTable::ZERO));
        let ratio = value(&l, "makespan") / value(&o, "makespan");
        assert!((ratio - 1.0).abs() < 0.01, "free, groups={g}: linux24/o1 = {ratio}");
    }
    let (l10, l30) = (run_g("linux24", 10, CostTable::DEFAULT), run_g("linux24", 30, CostTable::DEFAULT));
    let (o10, o30) = (run_g("o1", 10, CostTable::DEFAULT), run_g("o1", 30, CostTable::DEFAULT));
    let s = |o: &SimOutcome| value(o, "scheduler_cpu");
    assert!(s(&l30) > 2.0 * s(&l10), "linux24: {} % at 10 groups, {} % at 30", s(&l10), s(&l30));
    assert!(s(&o10) < 0.2 && s(&o30) < 0.2, "o1: {} % and {} %", s(&o10), s(&o30));
    assert!(s(&l30) > 20.0 * s(&o30));
    let ratio = value(&l30, "makespan") / value(&o30, "makespan");
    assert!(ratio > 1.03, "priced, groups=30: linux24/o1 = {ratio}");
}

#[test]
fn the_cpu_time_of_a_ping_pong_is_the_token_path_plus_the_scheduler_work() {
    // One CPU, every policy: per round trip 6 us of reads and writes, per
    // switch 3 us; what is left of the second is exactly the scheduler time
    // charged (scheduler_cpu), within a trip. Fewer trips than the 83,333
    // of free scheduling, and the policies no longer all agree.
    let wl = "pipe:send_cost=1us,recv_cost=2us";
    let mut trips_seen = Vec::new();
    for p in POLICIES {
        let o = SimOptions { ctx_switch_ns: 3_000, ..opts(1, 1.0, CostTable::DEFAULT) };
        let out = run(p, wl, &o).unwrap();
        let trips = value(&out, "round_trips_per_s");
        let busy_us = trips * 6.0 + value(&out, "context_switches") * 3.0 + value(&out, "scheduler_cpu") * 1e4;
        assert!((busy_us - 1e6).abs() <= 12.0, "{p}: {busy_us} us of 1e6 accounted");
        assert!(trips < 83_000.0, "{p}: {trips}");
        trips_seen.push(trips as u64);
    }
    trips_seen.sort_unstable();
    trips_seen.dedup();
    assert!(trips_seen.len() > 2, "{trips_seen:?}");
}

#[test]
fn a_wakeup_onto_another_cpu_waits_for_the_ipi() {
    // Pipe ping-pong on 2 CPUs under CFS, where the two tasks settle on
    // different CPUs: with only an IPI latency of 10 us priced, each wake-up
    // reaches its idle CPU 10 us later (earlier only when that CPU's tick
    // polls it first), so a round trip takes two IPIs more.
    let cost = CostTable { ipi_latency_ns: 10_000, ..CostTable::ZERO };
    let out = run("cfs", "pipe", &opts(2, 0.1, cost)).unwrap();
    let lat = out.result.metric("wakeup_latency.normal").unwrap().summary().unwrap();
    assert_eq!((lat.median, lat.max), (10_000.0, 10_000.0), "{lat:?}");
    assert!(lat.min > 0.0);
    assert_eq!(value(&out, "ipis"), lat.n as f64);
    // Free IPIs (the same decisions, priced at nothing): no delay at all.
    let cost = CostTable { ipi_latency_ns: 0, ..cost };
    let out = run("cfs", "pipe", &opts(2, 0.1, cost)).unwrap();
    assert_eq!(out.result.metric("wakeup_latency.normal").unwrap().summary().unwrap().max, 0.0);
}

#[test]
fn a_wakeup_onto_an_idle_cpu_waits_for_it_to_leave_idle_and_one_onto_a_busy_cpu_does_not() {
    // The same ping-pong: each wake-up finds the other CPU idle, so with an
    // idle exit of 15 us priced beside the 10 us IPI every one waits 25 us.
    let cost = CostTable { ipi_latency_ns: 10_000, idle_exit_ns: 15_000, ..CostTable::ZERO };
    let out = run("cfs", "pipe", &opts(2, 0.1, cost)).unwrap();
    let lat = out.result.metric("wakeup_latency.normal").unwrap().summary().unwrap();
    assert_eq!((lat.median, lat.max), (25_000.0, 25_000.0), "{lat:?}");
    assert_eq!(out.result.params["idle_exit"].as_u64(), Some(15_000), "recorded when set");
    // A timer wake-up on its own idle CPU waits the idle exit too: E5's
    // periodic RT timer task alone on one CPU, idle between expiries.
    let timer = |idle_exit_ns| {
        let cost = CostTable { idle_exit_ns, ..CostTable::ZERO };
        let out = run("eevdf", "periodic:loops=100", &opts(1, 1.0, cost)).unwrap();
        out.result.metric("latency").unwrap().summary().unwrap()
    };
    let (base, exit) = (timer(0), timer(40_000));
    assert_eq!((exit.min - base.min, exit.max - base.max), (40_000.0, 40_000.0), "{base:?} {exit:?}");
    // On one CPU the partner is never idle when woken: no change at all.
    let one = |idle_exit_ns| {
        let cost = CostTable { idle_exit_ns, ..CostTable::DEFAULT };
        value(&run("cfs", "pipe", &opts(1, 0.05, cost)).unwrap(), "round_trips_per_s")
    };
    assert_eq!(one(0), one(50_000));
    let unset = run("cfs", "pipe", &opts(1, 0.01, CostTable::DEFAULT)).unwrap();
    assert!(!unset.result.params.contains_key("idle_exit"), "left out at 0: older results keep their identity");
    let e = run("cfs", "pipe", &opts(1, 0.01, CostTable { idle_exit_ns: 2_000_000_000, ..CostTable::ZERO }));
    let e = e.unwrap_err().to_string();
    assert!(e.contains("idle_exit 2s: give at most 1s of latency"), "{e}");
}

#[test]
fn a_wakeup_onto_a_busy_cpu_waits_the_ipi_latency_alone() {
    // Two CPUs, both busy with a hog; an RT waker broadcasts every 10 ms to
    // an RT waiter, which the kernel places on the CPU the waker does not
    // hold: each wake-up is a reschedule IPI to a busy CPU, and waits its
    // latency exactly, with no idle exit. (The waker's CPU does not pull the
    // waiter when the waker sleeps: the waiter outranks the hog it waits
    // behind, so it stays for the IPI, as Linux's pull_rt_task leaves it.)
    let remote = r#"{"name":"remote","tasks":[
      {"name":"hog","count":2,"program":[{"loop":"forever","do":[{"run":"1ms"}]}]},
      {"name":"waker","class":"fifo:90","program":[{"loop":"forever","do":[{"sleep":"10ms"},{"broadcast":"c"},{"run":"50us"}]}]},
      {"name":"waiter","class":"fifo:50","probe":true,"program":[{"loop":"forever","do":[{"wait":"c"},{"run":"10us"}]}]}]}"#;
    let lat = |ipi_latency_ns| {
        let cost = CostTable { ipi_latency_ns, idle_exit_ns: 15_000, ..CostTable::ZERO };
        let out = run("eevdf", remote, &opts(2, 1.0, cost)).unwrap();
        out.result.metric("wakeup_latency.rt").unwrap().summary().unwrap()
    };
    let (short, long) = (lat(10_000), lat(25_000));
    assert_eq!((short.min, short.max), (10_000.0, 10_000.0), "{short:?}");
    assert_eq!((long.min, long.max, long.n), (25_000.0, 25_000.0, short.n), "{long:?}");
}

#[test]
fn each_operation_is_priced_by_its_own_entry() {
    // Linux 2.4 hackbench: only scanning priced gives most of the default
    // table's scheduler time (its cost is the O(n) scan); only locking gives
    // a little, and doubling a price roughly doubles that time.
    let wl = "hackbench:groups=10";
    let sched = |cost| value(&run("linux24", wl, &opts(1, 600.0, cost)).unwrap(), "scheduler_cpu");
    let scan = sched(CostTable { scan_ns: 50, ..CostTable::ZERO });
    let lock = sched(CostTable { lock_ns: 60, ..CostTable::ZERO });
    let all = sched(CostTable::DEFAULT);
    assert!(scan > 0.8 * all && lock < 0.1 * all, "scan {scan} %, lock {lock} %, all {all} %");
    let scan2 = sched(CostTable { scan_ns: 100, ..CostTable::ZERO });
    assert!((scan2 / scan - 2.0).abs() < 0.3, "{scan} % -> {scan2} %");
}

#[test]
fn costs_are_recorded_with_the_run_and_checked() {
    let out = run("o1", "hogs", &opts(1, 0.01, CostTable::DEFAULT)).unwrap();
    let p = &out.result.params;
    let got: Vec<u64> = ["scan_cost", "queue_cost", "lock_cost", "ipi_cost", "ipi_latency"]
        .iter()
        .map(|k| p[*k].as_u64().unwrap_or_else(|| panic!("{k} recorded")))
        .collect();
    assert_eq!(got, [50, 40, 60, 500, 2_000]);
    // The recorded defaults are the table's.
    for (param, ns) in schedlab_sim::RUN_PARAMS.iter().zip(SimOptions::default().run_param_values()) {
        assert_eq!(schedlab_sim::spec::parse_ns(param.default), Some(ns), "{}", param.name);
    }
    let e = run("o1", "hogs", &opts(1, 0.01, CostTable { lock_ns: 2_000_000_000, ..CostTable::DEFAULT })).unwrap_err();
    assert!(e.to_string().contains("lock_cost 2s: give at most 1s"), "{e}");
}

#[test]
fn each_wake_up_costs_its_waker_its_own_path_condition_or_channel() {
    // One CPU, waker below its RT waiter (10 < 50): each broadcast preempts
    // the waker, so the waiter waits exactly the waker's wake-up path (the
    // rest of the table free). A channel wake-up costs channel_wake instead:
    // the wake cost leaves a pipe unchanged, and the channel one leaves the
    // broadcast unchanged.
    let wl = "wakeup:samples=100,interval=1ms,normal_waiters=0,waker_prio=10,groups=0";
    let median = |cost| {
        let out = run("eevdf", wl, &opts(1, 0.2, cost)).unwrap();
        out.result.metric("wakeup_latency.rt").unwrap().summary().unwrap().median
    };
    assert_eq!(median(CostTable::ZERO), 0.0);
    assert_eq!(median(CostTable { wake_ns: 12_000, ..CostTable::ZERO }), 12_000.0);
    assert_eq!(median(CostTable { channel_wake_ns: 12_000, ..CostTable::ZERO }), 0.0);
    // The pipe on one CPU under fixedprio, where a wakee never preempts its
    // equal: each task blocks before the other writes, so each round trip
    // wakes both and takes exactly two channel wake-ups longer. (Under cfs
    // the echo preempts the pinger before it blocks, and one is saved.)
    let trip_ns = |cost| {
        let o = opts(1, 0.05, cost);
        1e9 / value(&run("fixedprio", "pipe", &o).unwrap(), "round_trips_per_s")
    };
    // (Within 5 ns: the rate counts whole trips in 50 ms, 1 in 5,000.)
    let base = trip_ns(CostTable::ZERO);
    assert_eq!(trip_ns(CostTable { wake_ns: 50_000, ..CostTable::ZERO }), base);
    let priced = trip_ns(CostTable { channel_wake_ns: 3_000, ..CostTable::ZERO });
    assert!((priced - base - 6_000.0).abs() < 5.0, "{base} ns a trip, {priced} with a 3 us channel wake-up");
    // Recorded only when set: runs made before they existed keep their identity.
    let params = |cost| run("eevdf", wl, &opts(1, 0.01, cost)).unwrap().result.params;
    let (zero, set) =
        (params(CostTable::ZERO), params(CostTable { wake_ns: 5_000, channel_wake_ns: 700, ..CostTable::ZERO }));
    assert!(!zero.contains_key("wake_cost") && !zero.contains_key("channel_wake"), "{zero:?}");
    assert_eq!(set["wake_cost"].as_u64(), Some(5_000));
    assert_eq!(set["channel_wake"].as_u64(), Some(700));
}
