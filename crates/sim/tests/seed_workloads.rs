//! The seeds' workloads (issue 17): spawn, shell, make, web, periodic and
//! exectime run under every policy, report the live benchmarks' metric
//! names, and show the behaviour the seeds' scenarios rest on.

use schedlab_core::MetricData;
use schedlab_sim::{policies, run, scenario, SimOptions, SimOutcome};

fn opts(cpus: u32, secs: f64) -> SimOptions {
    SimOptions { cpus, duration_ns: (secs * 1e9) as u64, ..SimOptions::default() }
}

fn mean(out: &SimOutcome, name: &str) -> f64 {
    out.result.metric(name).unwrap_or_else(|| panic!("metric {name} missing")).summary().unwrap().mean
}

fn stat(out: &SimOutcome, name: &str) -> schedlab_core::stats::Summary {
    out.result.metric(name).unwrap_or_else(|| panic!("metric {name} missing")).summary().unwrap()
}

fn count(out: &SimOutcome, name: &str) -> u64 {
    match &out.result.metric(name).unwrap_or_else(|| panic!("metric {name} missing")).data {
        MetricData::Histogram { histogram, .. } => histogram.count(),
        _ => panic!("{name} is not a histogram"),
    }
}

/// Every normal-class policy the simulator lists (new ones join by themselves).
fn all_policies() -> Vec<&'static str> {
    policies().into_iter().map(|p| p.name).filter(|n| *n != "rt").collect()
}

#[test]
fn every_seed_workload_runs_under_every_policy_with_the_live_names() {
    let cases: [(&str, &[&str]); 6] = [
        ("spawn:count=200", &["spawn_latency", "processes_per_s"]),
        ("shell:copies=2,commands=4", &["script_time", "scripts_per_min"]),
        ("make:jobs=3,units=12,work=20ms,read=5ms,write=2ms,link=10ms", &["wall_time", "user_time", "cpu_percent"]),
        ("web:rate=400,work=500us", &["response_time", "requests_per_s", "pages_served"]),
        ("periodic:loops=200,hogs=1", &["latency", "period", "max_latency", "missed_periods"]),
        ("exectime:threads=3,rounds=10,hogs=1", &["thread_time", "best", "average", "worst", "worst_over_average"]),
    ];
    let policies = all_policies();
    assert!(policies.len() >= 12, "{policies:?}");
    for p in &policies {
        for (wl, names) in cases {
            let out = run(p, wl, &opts(2, 1.0)).unwrap_or_else(|e| panic!("{p} {wl}: {e}"));
            for n in names {
                let m = out.result.metric(n).unwrap_or_else(|| panic!("{p} {wl}: no {n}"));
                let v = m.summary().unwrap().mean;
                assert!(v.is_finite() && v >= 0.0, "{p} {wl}: {n} = {v}");
            }
            assert!(out.result.metric(names[0]).unwrap().headline, "{p} {wl}: {} is a headline", names[0]);
        }
    }
}

#[test]
fn spawn_times_every_child_from_fork_to_reaped() {
    let out = run("cfs", "spawn:count=300,fork_cost=60us,child_work=40us", &opts(1, 5.0)).unwrap();
    assert_eq!(count(&out, "spawn_latency"), 300);
    // On one CPU a spawn is at least the parent's fork and the child's work.
    let lat = stat(&out, "spawn_latency");
    assert!(lat.min >= 100_000.0, "{lat:?}");
    // The rate is the children over the run, which is nearly all spawning.
    let rate = mean(&out, "processes_per_s");
    let expect = 1e9 / lat.mean;
    assert!((rate / expect - 1.0).abs() < 0.02, "rate {rate} against 1/latency {expect}");
    assert!(run("cfs", "spawn:parents=1000,count=1000", &opts(1, 1.0))
        .unwrap_err()
        .to_string()
        .contains("fewer parents"));
}

#[test]
fn shell_rate_follows_script_time_and_copies_share_the_cpus() {
    let one = run("cfs", "shell:copies=1", &opts(2, 2.0)).unwrap();
    let per_min = mean(&one, "scripts_per_min");
    let from_time = 60e9 / stat(&one, "script_time").mean;
    assert!((per_min / from_time - 1.0).abs() < 0.05, "{per_min} against 60 s / script time {from_time}");
    // A script is at least sh's work, 8 forks and the pipeline's serial halves.
    assert!(stat(&one, "script_time").min >= 1e6 + 8.0 * 100e3 + 8.0 * 200e3, "{:?}", stat(&one, "script_time"));
    // Eight copies keep both CPUs busy: more scripts per minute, each slower.
    let eight = run("cfs", "shell:copies=8", &opts(2, 2.0)).unwrap();
    assert!(mean(&eight, "scripts_per_min") > per_min);
    assert!(stat(&eight, "script_time").mean > 2.0 * stat(&one, "script_time").mean);
    assert!(mean(&eight, "cpu_busy") > 99.0);
    assert!(run("cfs", "shell:sh_work=0,fork_cost=0,command_work=0", &opts(1, 1.0))
        .unwrap_err()
        .to_string()
        .contains("some CPU per script"));
}

const BUILD: &str = "units=40,work=100ms,link=100ms";

fn wall(policy: &str, jobs: u32, io: &str) -> f64 {
    let out = run(policy, &format!("make:jobs={jobs},{BUILD},{io}"), &opts(2, 60.0)).unwrap();
    mean(&out, "wall_time")
}

#[test]
fn make_on_two_cpus_is_fastest_above_two_jobs_because_of_io_waits() {
    for p in ["cfs", "eevdf"] {
        let io = "read=30ms,write=10ms";
        let (j1, j2, j3) = (wall(p, 1, io), wall(p, 2, io), wall(p, 3, io));
        // -j1: every job's I/O (40 x 40 ms) and CPU in turn.
        let out = run(p, &format!("make:jobs=1,{BUILD},{io}"), &opts(2, 60.0)).unwrap();
        assert_eq!(mean(&out, "wall_time"), j1);
        let io_s = j1 - mean(&out, "user_time");
        assert!((io_s - 1.6).abs() < 0.02, "{p}: -j1 {j1} leaves {io_s} s of I/O");
        // E4's finding: a third job fills the CPU a job waiting on I/O leaves idle.
        assert!(j3 < 0.95 * j2, "{p}: -j2 {j2}, -j3 {j3}");
        // Without I/O waits two jobs already fill two CPUs.
        let (c2, c3) = (wall(p, 2, "read=0,write=0"), wall(p, 3, "read=0,write=0"));
        assert!((c3 / c2 - 1.0).abs() < 0.03, "{p}: no I/O: -j2 {c2}, -j3 {c3}");
    }
    let out = run("cfs", &format!("make:jobs=1,{BUILD},read=0,write=0"), &opts(2, 60.0)).unwrap();
    // One job at a time uses one CPU of two: CPU % about 100 (E4's convention, 200 = both).
    let cpu = mean(&out, "cpu_percent");
    assert!((95.0..=101.0).contains(&cpu), "{cpu}");
    // Without I/O, -j1's wall time is its CPU time.
    assert!((mean(&out, "user_time") / mean(&out, "wall_time") - 1.0).abs() < 0.02);
}

#[test]
fn make_follows_the_dag_and_refuses_a_cycle() {
    // A chain runs one job at a time whatever -j allows.
    let chain = "make:jobs=4,units=4,work=100ms,read=0,write=0,link=0,dag=0>1;1>2;2>3";
    let out = run("cfs", chain, &opts(2, 10.0)).unwrap();
    let w = mean(&out, "wall_time");
    let cpu = mean(&out, "user_time");
    assert!((w / cpu - 1.0).abs() < 0.02, "wall {w} against the chain's CPU {cpu}");
    let free = run("cfs", "make:jobs=4,units=4,work=100ms,read=0,write=0,link=0", &opts(2, 10.0)).unwrap();
    assert!(mean(&free, "wall_time") < 0.6 * w);
    let e = run("cfs", "make:units=4,dag=0>1;1>2;2>0", &opts(2, 1.0)).unwrap_err().to_string();
    assert!(e.contains("cycle (0>1>2>0)") && e.contains("remove one of its edges"), "{e}");
    assert!(e.contains("key 'dag': the dependencies form a cycle"), "a reason, not 'expected ...': {e}");
    let e = run("cfs", "make:units=4,dag=0>7", &opts(2, 1.0)).unwrap_err().to_string();
    assert!(e.contains("job 7 does not exist") && e.contains("0 to 3"), "{e}");
    let e = run("cfs", "make:units=4,dag=0-1", &opts(2, 1.0)).unwrap_err().to_string();
    assert!(e.contains("'0-1' is not A>B"), "{e}");
    let e = run("cfs", "make:units=4,dag=2>2", &opts(2, 1.0)).unwrap_err().to_string();
    assert!(e.contains("wait for itself"), "{e}");
    assert!(run("cfs", "make:jobs=0", &opts(2, 1.0)).unwrap_err().to_string().contains("jobs"));
}

#[test]
fn web_serves_the_offered_rate_until_the_cpus_run_out() {
    for server in ["threads", "event"] {
        let out = run("cfs", &format!("web:server={server},rate=500,work=1ms"), &opts(2, 4.0)).unwrap();
        let rps = mean(&out, "requests_per_s");
        assert!((rps / 500.0 - 1.0).abs() < 0.1, "{server}: {rps}");
        let rt = stat(&out, "response_time");
        assert!(rt.min >= 1e6 && rt.mean < 5e6, "{server}: {rt:?}");
        // Past the CPUs' capacity (2 CPUs / 1 ms = 2,000/s) responses queue up.
        let over = run("cfs", &format!("web:server={server},rate=3000,work=1ms"), &opts(2, 2.0)).unwrap();
        assert!(mean(&over, "requests_per_s") < 2100.0);
        assert!(stat(&over, "response_time").mean > 20.0 * rt.mean, "{server}");
    }
    // One event-loop worker serves one request at a time: half the capacity of two.
    let one = run("cfs", "web:server=event,workers=1,rate=1500,work=1ms", &opts(2, 2.0)).unwrap();
    assert!(mean(&one, "requests_per_s") < 1050.0, "{}", mean(&one, "requests_per_s"));
}

#[test]
fn periodic_timers_fire_at_ticks_without_hrtimers_and_on_time_with_them() {
    let at = |hz: u32, timer: &str| {
        let o = SimOptions { hz, ..opts(2, 10.0) };
        run("cfs", &format!("periodic:period=1ms,timer={timer},loops=1000"), &o).unwrap()
    };
    // HZ 250: a 1 ms timer is delivered every 4 ms tick, three expiries folded into each.
    let tick = at(250, "tick");
    let p = stat(&tick, "period");
    assert!((3.99e6..=4.01e6).contains(&p.min) && (3.99e6..=4.01e6).contains(&p.max), "{p:?}");
    assert!(mean(&tick, "missed_periods") >= 3.0 * 999.0);
    assert!(mean(&tick, "max_latency") > 2e6);
    // High-resolution timers: every period 1 ms, latency a wake-up and a switch.
    let hr = at(250, "hrtimer");
    let p = stat(&hr, "period");
    assert!((p.min - 1e6).abs() < 5e3 && (p.max - 1e6).abs() < 5e3, "{p:?}");
    assert!(mean(&hr, "max_latency") < 10e3, "{}", mean(&hr, "max_latency"));
    assert_eq!(mean(&hr, "missed_periods"), 0.0);
    assert_eq!(count(&hr, "latency"), 1000);
    // At HZ 1000 ticks come every period: 1 ms periods again, but late by up to a tick.
    let tick1000 = at(1000, "tick");
    assert!((stat(&tick1000, "period").mean - 1e6).abs() < 5e3);
    assert!(mean(&tick1000, "max_latency") > mean(&hr, "max_latency"));
}

#[test]
fn exectime_rt_threads_keep_their_time_and_normal_ones_under_load_do_not() {
    let fifo = run("cfs", "exectime:threads=8,work=7ms,rounds=50,hogs=1", &opts(2, 30.0)).unwrap();
    assert_eq!(count(&fifo, "thread_time"), 8 * 50);
    // FIFO threads run to the end once started: each takes its work and a switch.
    assert!(mean(&fifo, "worst_over_average") < 1.01, "{}", mean(&fifo, "worst_over_average"));
    assert!((mean(&fifo, "best") - 7e6).abs() < 20e3);
    let normal = run("cfs", "exectime:threads=8,work=7ms,rounds=50,hogs=1,class=normal", &opts(2, 30.0)).unwrap();
    assert!(mean(&normal, "worst_over_average") > 1.2, "{}", mean(&normal, "worst_over_average"));
    assert!(mean(&normal, "worst") > mean(&fifo, "worst") + 7e6);
}

#[test]
fn e4_and_e5_are_shipped_scenarios() {
    let names = scenario::shipped_names();
    assert!(names.contains(&"e4") && names.contains(&"e5"), "{names:?}");
    for name in ["e4", "e5"] {
        let s = scenario::parse(scenario::shipped(name).unwrap(), name, &SimOptions::default(), 5).unwrap();
        assert!(s.tables.iter().all(|t| !t.seed.is_empty() || t.note.is_some() || t.title.contains("-j")), "{name}");
    }
    let e4 = scenario::parse(scenario::shipped("e4").unwrap(), "e4", &SimOptions::default(), 5).unwrap();
    assert_eq!(e4.tables.len(), 8, "make -j 1..8");
    assert!(e4.tables.iter().all(|t| t.opts.cpus == 2));
    let e5 = scenario::parse(scenario::shipped("e5").unwrap(), "e5", &SimOptions::default(), 5).unwrap();
    assert!(e5.tables.iter().all(|t| t.opts.hz == 250));
}

#[test]
fn built_in_workloads_take_sched_deadline_tasks() {
    // exectime under class=dl: a budget above the work runs each release
    // through, ahead of the hogs, as FIFO does.
    let dl =
        run("cfs", "exectime:threads=3,work=7ms,rounds=20,hogs=1,class=dl,dl=8ms/20ms/20ms", &opts(2, 30.0)).unwrap();
    assert_eq!(count(&dl, "thread_time"), 3 * 20);
    assert!(mean(&dl, "worst_over_average") < 1.05, "{}", mean(&dl, "worst_over_average"));
    assert!((mean(&dl, "best") - 7e6).abs() < 50e3, "{}", mean(&dl, "best"));
    // A budget below the work: throttled at 3 ms of each 20 ms period, a
    // 7 ms job spans at least two more periods' replenishments (> 40 ms).
    let short = run("cfs", "exectime:threads=1,work=7ms,rounds=10,class=dl,dl=3ms/20ms/20ms", &opts(2, 30.0)).unwrap();
    assert!(mean(&short, "best") > 40e6, "{}", mean(&short, "best"));
    // periodic's timer task as SCHED_DEADLINE beside hogs: woken on time.
    let p = run("cfs", "periodic:loops=500,hogs=1,class=dl,dl=100us/1ms/1ms", &opts(2, 10.0)).unwrap();
    assert_eq!(count(&p, "latency"), 500);
    assert!(mean(&p, "max_latency") < 50e3, "{}", mean(&p, "max_latency"));
    // Bad parameters name the workload, the key and the rule.
    let e = run("cfs", "periodic:class=dl,dl=2ms/1ms/1ms", &opts(1, 1.0)).unwrap_err().to_string();
    assert!(e.contains("periodic") && e.contains("dl"), "{e}");
    let e = run("cfs", "exectime:class=dl,dl=fast", &opts(1, 1.0)).unwrap_err().to_string();
    assert!(e.contains("exectime") && e.contains("runtime/deadline/period"), "{e}");
}
