//! The environment fingerprint: the facts about the machine and kernel that
//! decide whether two runs can be compared. `None` always means "could not be
//! read", never a guess. Captured by `schedlab-live` at the start and end of
//! every run.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// Unix time in milliseconds when this fingerprint was taken.
    pub captured_unix_ms: i64,
    pub hostname: Option<String>,
    /// `uname -r`
    pub kernel_release: Option<String>,
    /// `uname -v`, e.g. "#1 SMP PREEMPT_DYNAMIC ..."
    pub kernel_version: Option<String>,
    /// none / voluntary / full / lazy / rt / dynamic(full)...
    pub preempt_model: Option<String>,
    /// Where `preempt_model` came from (debugfs, version string, config).
    pub preempt_source: Option<String>,
    /// CONFIG_HZ, from /proc/config.gz or /boot/config-*.
    pub hz: Option<u32>,
    pub clocksource: Option<String>,
    pub cpu_model: Option<String>,
    pub online_cpus: Option<Vec<usize>>,
    /// Logical CPUs per core (1 = no SMT), from the topology of CPU 0.
    pub threads_per_core: Option<u32>,
    pub smt_active: Option<bool>,
    pub cores: Option<u32>,
    pub packages: Option<u32>,
    /// Governor of each online CPU, deduplicated ("performance", "schedutil").
    pub governors: Option<Vec<String>>,
    pub autogroup_enabled: Option<bool>,
    pub rt_runtime_us: Option<i64>,
    pub rt_period_us: Option<i64>,
    /// Cumulative steal ticks from /proc/stat (USER_HZ units); the difference
    /// between the start and end fingerprints is the steal over the run.
    pub steal_ticks: Option<u64>,
    /// Cumulative total ticks from /proc/stat, to turn steal into a share.
    pub total_ticks: Option<u64>,
    /// Hypervisor name if the machine is a guest ("kvm", "xen"...), "none" on
    /// bare metal, `None` if unknown.
    pub virtualization: Option<String>,
    pub loadavg_1m: Option<f64>,
    /// Active sched_ext scheduler (its ops name), "none" when sched_ext is
    /// off, "unsupported" when the kernel lacks it.
    pub sched_ext: Option<String>,
    pub kernel_cmdline: Option<String>,
    /// The scheduler tunables that could be read, by the name `--tunable`
    /// takes: the files of /sys/kernel/debug/sched (`base_slice_ns`, ...;
    /// root only) and the `kernel.sched_*` sysctls not recorded above.
    #[serde(default)]
    pub sched_tunables: Option<BTreeMap<String, String>>,
    /// The cgroup (v2 path) the schedlab process runs in.
    #[serde(default)]
    pub cgroup: Option<String>,
    /// That cgroup's CPU limits where readable (`cpu.max`, `cpu.weight`,
    /// `cpuset.cpus.effective`).
    #[serde(default)]
    pub cgroup_limits: Option<BTreeMap<String, String>>,
}

impl Environment {
    /// Steal time as a percentage of all CPU time between two fingerprints.
    pub fn steal_percent_between(start: &Environment, end: &Environment) -> Option<f64> {
        let steal = end.steal_ticks?.checked_sub(start.steal_ticks?)?;
        let total = end.total_ticks?.checked_sub(start.total_ticks?)?;
        (total > 0).then(|| 100.0 * steal as f64 / total as f64)
    }

    /// Fields whose values differ and would make a comparison suspect, as
    /// (field, this, other). Volatile fields (time, load, steal) are skipped.
    pub fn differences(&self, other: &Environment) -> Vec<(&'static str, String, String)> {
        fn show<T: std::fmt::Debug>(v: &Option<T>) -> String {
            match v {
                Some(x) => format!("{x:?}").trim_matches('"').to_string(),
                None => "unknown".into(),
            }
        }
        let mut out = Vec::new();
        macro_rules! cmp {
            ($($f:ident),*) => {$(
                if self.$f != other.$f {
                    out.push((stringify!($f), show(&self.$f), show(&other.$f)));
                }
            )*};
        }
        cmp!(
            hostname,
            kernel_release,
            kernel_version,
            preempt_model,
            hz,
            clocksource,
            cpu_model,
            online_cpus,
            smt_active,
            governors,
            autogroup_enabled,
            rt_runtime_us,
            rt_period_us,
            virtualization,
            sched_ext,
            cgroup
        );
        // Key by key, where both sides could read the key: one that only one
        // side could read (no root, an older schedlab) is unknown, not different.
        macro_rules! cmp_maps {
            ($($f:ident),*) => {$(
                if let (Some(a), Some(b)) = (&self.$f, &other.$f) {
                    for (k, x) in a {
                        match b.get(k) {
                            Some(y) if x != y => out.push((stringify!($f), format!("{k}={x}"), format!("{k}={y}"))),
                            _ => {}
                        }
                    }
                }
            )*};
        }
        cmp_maps!(sched_tunables, cgroup_limits);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_share_is_computed_from_deltas() {
        let a = Environment { steal_ticks: Some(100), total_ticks: Some(10_000), ..Default::default() };
        let b = Environment { steal_ticks: Some(150), total_ticks: Some(11_000), ..Default::default() };
        assert_eq!(Environment::steal_percent_between(&a, &b), Some(5.0));
        let unknown = Environment::default();
        assert_eq!(Environment::steal_percent_between(&a, &unknown), None);
    }

    #[test]
    fn differences_name_the_field_and_ignore_volatile_ones() {
        let a = Environment { kernel_release: Some("6.1".into()), loadavg_1m: Some(0.1), ..Default::default() };
        let b = Environment { kernel_release: Some("6.6".into()), loadavg_1m: Some(3.0), ..Default::default() };
        let d = a.differences(&b);
        assert_eq!(d, vec![("kernel_release", "6.1".to_string(), "6.6".to_string())]);
        assert!(a.differences(&a.clone()).is_empty());
    }

    #[test]
    fn tunables_and_cgroups_differ_key_by_key() {
        let map = |kv: &[(&str, &str)]| Some(kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        let a = Environment {
            sched_tunables: map(&[("base_slice_ns", "3000000"), ("migration_cost_ns", "500000")]),
            cgroup: Some("/user.slice".into()),
            sched_ext: Some("none".into()),
            ..Default::default()
        };
        let b = Environment {
            sched_tunables: map(&[("base_slice_ns", "700000"), ("migration_cost_ns", "500000"), ("nr_migrate", "32")]),
            cgroup: Some("/system.slice/x.scope".into()),
            sched_ext: Some("lavd".into()),
            cgroup_limits: map(&[("cpu.max", "50000 100000")]),
            ..Default::default()
        };
        let d = a.differences(&b);
        assert!(d.contains(&("sched_ext", "none".into(), "lavd".into())), "{d:?}");
        assert!(d.contains(&("cgroup", "/user.slice".into(), "/system.slice/x.scope".into())), "{d:?}");
        assert!(
            d.contains(&("sched_tunables", "base_slice_ns=3000000".into(), "base_slice_ns=700000".into())),
            "{d:?}"
        );
        assert_eq!(d.len(), 3, "equal, one-sided and unknown values are not listed: {d:?}");
        let c = Environment { cgroup_limits: map(&[("cpu.max", "max 100000")]), ..b.clone() };
        assert_eq!(b.differences(&c), [("cgroup_limits", "cpu.max=50000 100000".into(), "cpu.max=max 100000".into())]);
        // A fingerprint stored before these fields existed still decodes.
        let old: Environment = serde_json::from_str(r#"{"captured_unix_ms":1,"hostname":"h"}"#).unwrap();
        assert_eq!((old.sched_tunables, old.cgroup, old.cgroup_limits), (None, None, None));
    }
}
