//! `schedlab check`: what on this machine will distort scheduler and
//! latency measurements, and how to fix it. [`Facts::gather`] reads the
//! system (the environment fingerprint plus a few files that only matter
//! here); [`assess`] turns facts into findings and is pure, so it is tested
//! on made-up machines. Kernel settings a schedlab run left changed (its
//! recovery records, `harness/recovery.rs`, whose owner is gone) are a
//! warning whose fix is `schedlab check --restore`.

use crate::host::fingerprint;
use schedlab_core::Environment;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// As good as it gets for measuring.
    Good,
    /// Worth knowing when reading the numbers.
    Note,
    /// Distorts measurements; there is a fix.
    Warn,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub level: Level,
    pub topic: &'static str,
    pub finding: String,
    pub fix: Option<String>,
}

/// What the assessment needs to know about the machine.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub env: Environment,
    pub root: bool,
    /// RLIMIT_RTPRIO soft limit (0: no RT priority without privilege).
    pub rtprio_limit: u64,
    pub cpuidle_driver: Option<String>,
    /// Largest exit latency of an enabled idle state, us.
    pub deepest_idle_exit_us: Option<u64>,
    /// The selected modes of /sys/kernel/mm/transparent_hugepage/{enabled,defrag}.
    pub thp_enabled: Option<String>,
    pub thp_defrag: Option<String>,
    pub swap_active: bool,
    pub irqbalance_running: bool,
    pub isolated_cpus: Option<String>,
    pub nohz_full: Option<String>,
    pub tracefs: bool,
    /// Peer tools on PATH, for the bench/ scripts.
    pub peers_missing: Vec<&'static str>,
    /// Recovery records left by schedlab runs that did not restore their
    /// kernel settings (stale, obsolete or unreadable), one line each.
    pub leftovers: Vec<String>,
}

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// The `[selected]` word of a sysfs choice file.
fn selected(s: &str) -> Option<String> {
    let start = s.find('[')? + 1;
    Some(s[start..start + s[start..].find(']')?].to_string())
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

impl Facts {
    pub fn gather() -> Facts {
        // SAFETY: getrlimit writes into a valid struct; geteuid cannot fail.
        let (root, rtprio_limit) = unsafe {
            let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            libc::getrlimit(libc::RLIMIT_RTPRIO, &mut r);
            (libc::geteuid() == 0, r.rlim_cur)
        };
        let deepest_idle_exit_us = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cpuidle").ok().and_then(|states| {
            states
                .flatten()
                .filter(|s| read_trim(&format!("{}/disable", s.path().display())).as_deref() != Some("1"))
                .filter_map(|s| read_trim(&format!("{}/latency", s.path().display()))?.parse::<u64>().ok())
                .max()
        });
        let irqbalance_running = std::fs::read_dir("/proc").is_ok_and(|procs| {
            procs
                .flatten()
                .any(|p| std::fs::read_to_string(p.path().join("comm")).is_ok_and(|c| c.trim() == "irqbalance"))
        });
        let swap_active = std::fs::read_to_string("/proc/swaps").is_ok_and(|s| s.lines().count() > 1);
        let nonempty = |s: Option<String>| s.filter(|s| !s.is_empty() && s != "(null)");
        Facts {
            env: fingerprint::capture(),
            root,
            rtprio_limit,
            cpuidle_driver: nonempty(read_trim("/sys/devices/system/cpu/cpuidle/current_driver")),
            deepest_idle_exit_us,
            thp_enabled: read_trim("/sys/kernel/mm/transparent_hugepage/enabled").and_then(|s| selected(&s)),
            thp_defrag: read_trim("/sys/kernel/mm/transparent_hugepage/defrag").and_then(|s| selected(&s)),
            swap_active,
            irqbalance_running,
            isolated_cpus: nonempty(read_trim("/sys/devices/system/cpu/isolated")),
            nohz_full: nonempty(read_trim("/sys/devices/system/cpu/nohz_full")),
            tracefs: std::path::Path::new("/sys/kernel/tracing/trace").exists()
                || std::path::Path::new("/sys/kernel/debug/tracing/trace").exists(),
            peers_missing: ["cyclictest", "hackbench", "perf"].into_iter().filter(|t| !on_path(t)).collect(),
            leftovers: crate::harness::recovery::scan()
                .iter()
                .filter(|f| f.state != crate::harness::recovery::State::Active)
                .map(crate::harness::recovery::Found::describe)
                .collect(),
        }
    }
}

fn finding(level: Level, topic: &'static str, finding: impl Into<String>, fix: Option<&str>) -> Finding {
    Finding { level, topic, finding: finding.into(), fix: fix.map(str::to_string) }
}

/// Findings, worst first (stable within a level: the order below).
pub fn assess(f: &Facts) -> Vec<Finding> {
    use Level::*;
    let e = &f.env;
    let mut out = Vec::new();

    if f.root {
        out.push(finding(Good, "privilege", "running as root: every policy, priority and mlock is available", None));
    } else if f.rtprio_limit > 0 {
        out.push(finding(
            Note,
            "privilege",
            format!("not root; RLIMIT_RTPRIO {} allows RT priorities up to it", f.rtprio_limit),
            Some("for negative nice, SCHED_DEADLINE and mlock run as root or grant CAP_SYS_NICE"),
        ));
    } else {
        out.push(finding(
            Warn,
            "privilege",
            "not root and RLIMIT_RTPRIO is 0: RT policies (cyclic, wakeup and exectime default to FIFO) will be refused",
            Some("run as root, grant CAP_SYS_NICE (setcap cap_sys_nice+ep $(which schedlab)), or ulimit -r 99"),
        ));
    }

    // "dynamic(none)" on PREEMPT_DYNAMIC kernels: the mode in effect is inside.
    let preempt =
        e.preempt_model.as_deref().map(|m| m.strip_prefix("dynamic(").and_then(|x| x.strip_suffix(')')).unwrap_or(m));
    match preempt {
        Some(m @ ("none" | "voluntary")) => out.push(finding(
            Warn,
            "preemption",
            format!(
                "the kernel preempts {m}: a woken RT task waits until a running task's kernel path reaches a preemption point (milliseconds under load; cyclic:breaktrace=US shows it)"
            ),
            Some("boot with preempt=full (PREEMPT_DYNAMIC kernels) or use a PREEMPT_RT kernel"),
        )),
        Some(m @ ("full" | "lazy")) => out.push(finding(Good, "preemption", format!("preempt={m}: RT wake-ups preempt kernel paths"), None)),
        Some(m) => out.push(finding(Good, "preemption", format!("preemption model {m}"), None)),
        None => out.push(finding(Note, "preemption", "the preemption model could not be read", Some("mount debugfs for /sys/kernel/debug/sched/preempt"))),
    }

    if let Some(v) = &e.virtualization {
        out.push(finding(
            Warn,
            "virtualization",
            format!("a VM ({v}): timer interrupts and cross-CPU wakeups go through the hypervisor, and the host can stall a vCPU for milliseconds; steal time is recorded with each run"),
            Some("measure on bare metal for absolute figures; in a VM compare runs made on the same host"),
        ));
    }

    match (&f.cpuidle_driver, f.deepest_idle_exit_us) {
        (Some(d), Some(us)) if us > 10 => out.push(finding(
            Warn,
            "idle states",
            format!("cpuidle driver {d}: the deepest enabled state takes {us} us to leave, which idle wake-ups pay"),
            Some("cyclic holds /dev/cpu_dma_latency at 0 by default (pm_qos=yes); for other benchmarks disable deep states (cpupower idle-set -D 10) or boot with processor.max_cstate=1"),
        )),
        (Some(d), _) => out.push(finding(Good, "idle states", format!("cpuidle driver {d}: shallow exit latencies"), None)),
        (None, _) => {}
    }

    if let Some(g) = &e.governors {
        let slow: Vec<&String> = g.iter().filter(|g| g.as_str() != "performance").collect();
        if slow.is_empty() {
            out.push(finding(Good, "cpufreq", "every CPU uses the performance governor", None));
        } else {
            let mut names: Vec<&str> = slow.iter().map(|s| s.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            out.push(finding(
                Warn,
                "cpufreq",
                format!("governor {}: frequency ramps add latency and run-to-run noise", names.join(", ")),
                Some("cpupower frequency-set -g performance"),
            ));
        }
    }

    if e.smt_active == Some(true) {
        out.push(finding(
            Note,
            "SMT",
            "SMT is on: sibling threads share a core, so a task on the sibling slows the measured one",
            Some("measure on one thread per core (--cpus), or echo off > /sys/devices/system/cpu/smt/control"),
        ));
    }

    match (e.rt_runtime_us, e.rt_period_us) {
        (Some(-1), _) => out.push(finding(
            Warn,
            "RT throttling",
            "off (sched_rt_runtime_us = -1): a runaway RT task can freeze the machine; schedlab refuses starving cases unless --force",
            Some("sysctl kernel.sched_rt_runtime_us=950000 unless you need 100 % RT"),
        )),
        (Some(r), Some(p)) => out.push(finding(
            Note,
            "RT throttling",
            format!("RT tasks may use {r} us of every {p} us; exectime notes when throttling cuts in"),
            None,
        )),
        _ => {}
    }

    match (&f.isolated_cpus, &f.nohz_full) {
        (None, None) => out.push(finding(
            Note,
            "isolation",
            "no isolated or nohz_full CPUs: other tasks and the tick share the measured CPUs",
            Some("for RT work boot with isolcpus=, nohz_full= and rcu_nocbs= and measure there with --cpus"),
        )),
        (iso, nohz) => out.push(finding(
            Good,
            "isolation",
            format!(
                "isolated CPUs {}, nohz_full {}: measure there with --cpus",
                iso.as_deref().unwrap_or("none"),
                nohz.as_deref().unwrap_or("none")
            ),
            None,
        )),
    }

    if f.irqbalance_running {
        out.push(finding(
            Note,
            "interrupts",
            "irqbalance is running: it may move device interrupts onto the measured CPUs mid-run",
            Some("stop it while measuring (systemctl stop irqbalance) or ban the measured CPUs (IRQBALANCE_BANNED_CPULIST)"),
        ));
    }

    if f.thp_enabled.as_deref() == Some("always") && matches!(f.thp_defrag.as_deref(), Some("always")) {
        out.push(finding(
            Warn,
            "memory",
            "transparent hugepages: enabled=always with defrag=always: page faults can stall in direct compaction",
            Some("echo madvise > /sys/kernel/mm/transparent_hugepage/defrag"),
        ));
    }
    if f.swap_active {
        out.push(finding(
            Note,
            "memory",
            "swap is on: a measured task's pages can be swapped out",
            Some("use --mlock (cyclic locks by default)"),
        ));
    }

    if let Some(c) = &e.clocksource {
        if c != "tsc" && c != "arch_sys_counter" {
            out.push(finding(
                Warn,
                "clock",
                format!(
                    "clocksource {c}: clock reads may be system calls costing microseconds, inside every timed loop"
                ),
                Some("use the tsc clocksource if the CPU has an invariant TSC (clocksource=tsc tsc=reliable)"),
            ));
        }
    }

    if let Some(l) = e.loadavg_1m {
        let cpus = e.online_cpus.as_ref().map_or(1, Vec::len).max(1) as f64;
        if l > 0.5 * cpus {
            out.push(finding(
                Warn,
                "load",
                format!("load average {l:.2} on {cpus} CPU(s): other work will disturb the results"),
                Some("stop other work, or compare only runs made side by side (interleaved)"),
            ));
        }
    }

    // Anything but "none"/"unsupported" is a loaded BPF scheduler's name (or a transition state).
    if let Some(s) = e.sched_ext.as_deref().filter(|s| !matches!(*s, "none" | "unsupported")) {
        out.push(finding(
            Note,
            "scheduler",
            format!("sched_ext scheduler {s} is active: results are that scheduler's"),
            None,
        ));
    }

    for l in &f.leftovers {
        out.push(finding(
            Warn,
            "leftovers",
            l.clone(),
            Some("schedlab check --restore (puts the settings back and removes the record)"),
        ));
    }

    if !f.tracefs {
        out.push(finding(
            Note,
            "tracing",
            "tracefs is not mounted: breaktrace (cyclic, wakeup) cannot explain stalls",
            Some("mount -t tracefs nodev /sys/kernel/tracing"),
        ));
    }
    if !f.peers_missing.is_empty() {
        out.push(finding(
            Note,
            "peer tools",
            format!("not found: {} (the bench/ comparison scripts need them)", f.peers_missing.join(", ")),
            Some("apt-get install rt-tests linux-perf"),
        ));
    }

    out.sort_by_key(|x| std::cmp::Reverse(x.level));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quiet_metal() -> Facts {
        Facts {
            env: Environment {
                preempt_model: Some("full".into()),
                governors: Some(vec!["performance".into(); 4]),
                rt_runtime_us: Some(950_000),
                rt_period_us: Some(1_000_000),
                clocksource: Some("tsc".into()),
                online_cpus: Some(vec![0, 1, 2, 3]),
                loadavg_1m: Some(0.1),
                smt_active: Some(false),
                ..Default::default()
            },
            root: true,
            cpuidle_driver: Some("intel_idle".into()),
            deepest_idle_exit_us: Some(2),
            isolated_cpus: Some("2-3".into()),
            tracefs: true,
            ..Default::default()
        }
    }

    fn levels(f: &Facts, topic: &str) -> Vec<Level> {
        assess(f).into_iter().filter(|x| x.topic == topic).map(|x| x.level).collect()
    }

    #[test]
    fn a_quiet_tuned_machine_has_no_warnings() {
        let a = assess(&quiet_metal());
        assert!(a.iter().all(|x| x.level != Level::Warn), "{a:#?}");
        assert_eq!(levels(&quiet_metal(), "isolation"), [Level::Good]);
    }

    #[test]
    fn each_distortion_is_a_warning_with_a_fix() {
        let mut f = quiet_metal();
        f.env.preempt_model = Some("dynamic(none)".into());
        f.env.virtualization = Some("kvm".into());
        f.env.governors = Some(vec!["powersave".into(), "performance".into()]);
        f.env.rt_runtime_us = Some(-1);
        f.env.clocksource = Some("hpet".into());
        f.env.loadavg_1m = Some(3.0);
        f.deepest_idle_exit_us = Some(133);
        f.thp_enabled = Some("always".into());
        f.thp_defrag = Some("always".into());
        f.root = false;
        f.leftovers = vec!["ftrace left changed by a schedlab that ended without restoring it".into()];
        let a = assess(&f);
        let warned: Vec<&str> = a.iter().filter(|x| x.level == Level::Warn).map(|x| x.topic).collect();
        for t in [
            "preemption",
            "virtualization",
            "cpufreq",
            "RT throttling",
            "clock",
            "load",
            "idle states",
            "memory",
            "privilege",
            "leftovers",
        ] {
            assert!(warned.contains(&t), "{t} not warned: {a:#?}");
        }
        assert!(
            a.iter().filter(|x| x.level == Level::Warn).all(|x| x.fix.is_some()),
            "every warning says how to fix it"
        );
        assert_eq!(a[0].level, Level::Warn, "worst first");
        let gov = a.iter().find(|x| x.topic == "cpufreq").unwrap();
        assert!(gov.finding.contains("powersave") && !gov.finding.contains("performance"), "{}", gov.finding);
    }

    #[test]
    fn preemption_and_sched_ext_are_read_from_the_fingerprint_labels() {
        let mut f = quiet_metal();
        for (label, level) in [
            ("dynamic(full)", Level::Good),
            ("voluntary", Level::Warn),
            ("dynamic(lazy)", Level::Good),
            ("rt", Level::Good),
        ] {
            f.env.preempt_model = Some(label.into());
            assert_eq!(levels(&f, "preemption"), [level], "{label}");
        }
        for (state, shown) in [("none", false), ("unsupported", false), ("scx_rusty", true)] {
            f.env.sched_ext = Some(state.into());
            assert_eq!(!levels(&f, "scheduler").is_empty(), shown, "{state}");
        }
    }

    #[test]
    fn thresholds_hold_at_their_edges() {
        let mut f = quiet_metal();
        f.deepest_idle_exit_us = Some(10);
        assert_eq!(levels(&f, "idle states"), [Level::Good]);
        f.deepest_idle_exit_us = Some(11);
        assert_eq!(levels(&f, "idle states"), [Level::Warn]);
        f.env.loadavg_1m = Some(2.0); // half of 4 CPUs: still fine
        assert!(levels(&f, "load").is_empty());
        f.env.loadavg_1m = Some(2.1);
        assert_eq!(levels(&f, "load"), [Level::Warn]);
        f.thp_defrag = Some("madvise".into());
        f.thp_enabled = Some("always".into());
        assert!(levels(&f, "memory").is_empty(), "THP always without synchronous defrag does not stall faults");
        f.root = false;
        f.rtprio_limit = 99;
        assert_eq!(levels(&f, "privilege"), [Level::Note]);
    }

    #[test]
    fn sysfs_choices_read_the_selected_word() {
        assert_eq!(selected("always [madvise] never").as_deref(), Some("madvise"));
        assert_eq!(selected("never"), None);
    }

    #[test]
    fn this_machine_can_be_gathered_and_assessed() {
        let f = Facts::gather();
        let a = assess(&f);
        assert!(a.iter().any(|x| x.topic == "privilege"), "privilege is always assessed: {a:#?}");
    }
}
