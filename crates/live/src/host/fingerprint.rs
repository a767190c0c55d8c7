//! The environment fingerprint: kernel, preemption model, HZ, clocksource,
//! CPUs and topology, governors, RT throttling, steal time, virtualization,
//! sched_ext, the scheduler tunables and the cgroup schedlab runs in. Anything
//! that cannot be read is `None`, never a guess. Every parser is a pure
//! function over file contents, unit-tested on fixed text.

use schedlab_core::condition::parse_cpu_list;
use schedlab_core::Environment;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn read_trim(path: &str) -> Option<String> {
    read(path).map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// Take a fingerprint of this machine now.
pub fn capture() -> Environment {
    let uts = uname();
    let (release, version, hostname) = match &uts {
        Some((r, v, h)) => (Some(r.clone()), Some(v.clone()), Some(h.clone())),
        None => (None, None, None),
    };
    let config = release.as_deref().and_then(kernel_config);
    let cmdline = read_trim("/proc/cmdline");
    let (preempt_model, preempt_source) = preempt_model(
        read("/sys/kernel/debug/sched/preempt").as_deref(),
        version.as_deref(),
        cmdline.as_deref(),
        config.as_deref(),
    )
    .map_or((None, None), |(m, s)| (Some(m), Some(s)));
    let cpuinfo = read("/proc/cpuinfo");
    let online = read_trim("/sys/devices/system/cpu/online").and_then(|s| parse_cpu_list(&s).ok());
    let (cores, packages) = online.as_deref().map_or((None, None), topology_counts);
    let stat = read("/proc/stat").and_then(|s| parse_proc_stat(&s));
    Environment {
        captured_unix_ms: crate::harness::unix_ms(),
        hostname,
        kernel_release: release,
        kernel_version: version,
        preempt_model,
        preempt_source,
        hz: config.as_deref().and_then(parse_config_hz),
        clocksource: read_trim("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        cpu_model: cpuinfo.as_deref().and_then(parse_cpu_model),
        online_cpus: online.clone(),
        threads_per_core: read_trim("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list")
            .and_then(|s| parse_cpu_list(&s).ok())
            .map(|v| v.len() as u32),
        smt_active: read_trim("/sys/devices/system/cpu/smt/active").and_then(|s| parse_bool01(&s)),
        cores,
        packages,
        governors: online.as_deref().and_then(governors),
        autogroup_enabled: read_trim("/proc/sys/kernel/sched_autogroup_enabled").and_then(|s| parse_bool01(&s)),
        rt_runtime_us: read_trim("/proc/sys/kernel/sched_rt_runtime_us").and_then(|s| s.parse().ok()),
        rt_period_us: read_trim("/proc/sys/kernel/sched_rt_period_us").and_then(|s| s.parse().ok()),
        steal_ticks: stat.map(|s| s.0),
        total_ticks: stat.map(|s| s.1),
        virtualization: virtualization(cpuinfo.as_deref()),
        loadavg_1m: read("/proc/loadavg").and_then(|s| parse_loadavg(&s)),
        sched_ext: sched_ext(
            read_trim("/sys/kernel/sched_ext/state").as_deref(),
            read_trim("/sys/kernel/sched_ext/root/ops").as_deref(),
            config.as_deref(),
        )
        .or_else(|| {
            // sysfs is there but has no sched_ext: the kernel lacks it.
            (std::path::Path::new("/sys/kernel").is_dir() && !std::path::Path::new("/sys/kernel/sched_ext").exists())
                .then(|| "unsupported".to_string())
        }),
        kernel_cmdline: cmdline,
        sched_tunables: sched_tunables(),
        cgroup: read("/proc/self/cgroup").and_then(|s| crate::harness::cgroup::parse_own(&s)),
        cgroup_limits: cgroup_limits(),
    }
}

/// sysctls the fingerprint has fields of their own for.
const OWN_FIELDS: &[&str] =
    &["kernel.sched_autogroup_enabled", "kernel.sched_rt_runtime_us", "kernel.sched_rt_period_us"];

/// The scheduler tunables readable now, by `--tunable` names: debugfs files
/// (root only; `preempt` is `preempt_model`'s; not the per-CPU ones, which
/// would be hundreds on a large machine) and the other kernel.sched_* sysctls.
fn sched_tunables() -> Option<BTreeMap<String, String>> {
    use crate::harness::tunables::{names, per_cpu, read_value, Roots};
    let roots = Roots::system();
    let map: BTreeMap<String, String> = names(&roots)
        .into_iter()
        .filter(|n| n != "preempt" && !per_cpu(n) && !OWN_FIELDS.contains(&n.as_str()))
        .filter_map(|n| {
            let path = match n.strip_prefix("kernel.") {
                Some(sysctl) => roots.sysctl_kernel.join(sysctl),
                None => roots.sched_debug.join(&n),
            };
            read_value(&path).ok().map(|v| (n, v))
        })
        .collect();
    (!map.is_empty()).then_some(map)
}

/// cpu.max, cpu.weight and cpuset.cpus.effective of this process's v2
/// cgroup, and on a hybrid layout their v1 counterparts (cpu.shares,
/// cpu.cfs_quota_us, cpu.cfs_period_us, cpuset.effective_cpus) from the v1
/// hierarchies, where readable.
fn cgroup_limits() -> Option<BTreeMap<String, String>> {
    let h = crate::harness::cgroup::Hierarchy::locate().ok()?;
    let v2 = ["cpu.max", "cpu.weight", "cpuset.cpus.effective"].map(|f| h.own().join(f));
    let v1 = h.v1.iter().flat_map(|v| {
        ["cpu.shares", "cpu.cfs_quota_us", "cpu.cfs_period_us", "cpuset.effective_cpus"].map(|f| v.own().join(f))
    });
    let map: BTreeMap<String, String> = v2
        .into_iter()
        .chain(v1)
        .filter_map(|path| {
            let name = path.file_name()?.to_string_lossy().into_owned();
            read_trim(&path.to_string_lossy()).map(|v| (name, v))
        })
        .collect();
    (!map.is_empty()).then_some(map)
}

/// (release, version, nodename) from uname(2).
fn uname() -> Option<(String, String, String)> {
    // SAFETY: utsname is plain old data; zeroed is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: u is a valid, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f.iter().take_while(|c| **c != 0).map(|c| *c as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Some((field(&u.release), field(&u.version), field(&u.nodename)))
}

/// Kernel config text: /proc/config.gz, else /boot/config-<release>.
fn kernel_config(release: &str) -> Option<String> {
    if let Ok(f) = std::fs::File::open("/proc/config.gz") {
        let mut s = String::new();
        if flate2::read::GzDecoder::new(f).read_to_string(&mut s).is_ok() {
            return Some(s);
        }
    }
    read(&format!("/boot/config-{release}"))
}

/// The active model from /sys/kernel/debug/sched/preempt: the one in parentheses.
pub fn parse_debugfs_preempt(s: &str) -> Option<String> {
    let start = s.find('(')?;
    let end = s[start..].find(')')? + start;
    let m = s[start + 1..end].trim();
    (!m.is_empty()).then(|| m.to_string())
}

/// What `uname -v` tells: PREEMPT_RT, PREEMPT_DYNAMIC or PREEMPT (full).
/// Kernels built with none/voluntary print neither, so that is unknown here.
pub fn parse_version_preempt(version: &str) -> Option<&'static str> {
    let words: Vec<&str> = version.split_whitespace().collect();
    if words.contains(&"PREEMPT_RT") {
        Some("rt")
    } else if words.contains(&"PREEMPT_DYNAMIC") {
        Some("dynamic")
    } else if words.contains(&"PREEMPT") {
        Some("full")
    } else if words.contains(&"PREEMPT_LAZY") {
        Some("lazy")
    } else {
        None
    }
}

fn config_value<'a>(config: &'a str, key: &str) -> Option<&'a str> {
    config.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
}

fn config_set(config: &str, key: &str) -> bool {
    config_value(config, key) == Some("y")
}

/// The build-time preemption choice (for PREEMPT_DYNAMIC kernels, the boot default).
pub fn parse_config_preempt(config: &str) -> Option<&'static str> {
    if config_set(config, "CONFIG_PREEMPT_RT") {
        return Some("rt");
    }
    [
        ("CONFIG_PREEMPT_NONE", "none"),
        ("CONFIG_PREEMPT_VOLUNTARY", "voluntary"),
        ("CONFIG_PREEMPT_LAZY", "lazy"),
        ("CONFIG_PREEMPT", "full"),
    ]
    .into_iter()
    .find(|(k, _)| config_set(config, k))
    .map(|(_, v)| v)
}

/// `preempt=` from the kernel command line.
fn cmdline_preempt(cmdline: &str) -> Option<&str> {
    cmdline.split_whitespace().find_map(|w| w.strip_prefix("preempt=")).filter(|v| !v.is_empty())
}

/// (model, source). Priority: debugfs (the live setting), then the version
/// string, refined for PREEMPT_DYNAMIC by `preempt=` on the command line or
/// the config's boot default, then the config alone.
pub fn preempt_model(
    debugfs: Option<&str>,
    version: Option<&str>,
    cmdline: Option<&str>,
    config: Option<&str>,
) -> Option<(String, String)> {
    if let Some(m) = debugfs.and_then(parse_debugfs_preempt) {
        let label =
            if version.and_then(parse_version_preempt) == Some("dynamic") { format!("dynamic({m})") } else { m };
        return Some((label, "debugfs".into()));
    }
    let config_default = config.and_then(parse_config_preempt);
    match version.and_then(parse_version_preempt) {
        Some("dynamic") => {
            if let Some(m) = cmdline.and_then(cmdline_preempt) {
                Some((format!("dynamic({m})"), "version string + preempt= on the command line".into()))
            } else if let Some(m) = config_default {
                Some((
                    format!("dynamic({m})"),
                    "version string + config boot default (debugfs unreadable; may have been changed at run time)"
                        .into(),
                ))
            } else {
                Some(("dynamic".into(), "version string".into()))
            }
        }
        Some(m) => Some((m.into(), "version string".into())),
        None => config_default.map(|m| (m.into(), "kernel config".into())),
    }
}

pub fn parse_config_hz(config: &str) -> Option<u32> {
    config_value(config, "CONFIG_HZ")?.parse().ok()
}

pub fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    ["model name", "Model", "cpu model", "Processor"].iter().find_map(|key| {
        cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == *key && !v.trim().is_empty()).then(|| v.trim().to_string())
        })
    })
}

/// Whether the x86 "hypervisor" CPU flag is present (None if no flags line).
pub fn parse_hypervisor_flag(cpuinfo: &str) -> Option<bool> {
    let flags = cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "flags").then_some(v)
    })?;
    Some(flags.split_whitespace().any(|f| f == "hypervisor"))
}

fn parse_bool01(s: &str) -> Option<bool> {
    match s.trim() {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

/// (steal, total) ticks from the aggregate "cpu" line of /proc/stat. Total is
/// user+nice+system+idle+iowait+irq+softirq+steal (guest time is already in user).
pub fn parse_proc_stat(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line.split_whitespace().skip(1).map(|x| x.parse().ok()).collect::<Option<_>>()?;
    if v.len() < 8 {
        return None;
    }
    Some((v[7], v[..8].iter().sum()))
}

pub fn parse_loadavg(s: &str) -> Option<f64> {
    s.split_whitespace().next()?.parse().ok()
}

/// Distinct (package, core) pairs and distinct packages over the online CPUs.
fn topology_counts(online: &[usize]) -> (Option<u32>, Option<u32>) {
    let mut cores = BTreeSet::new();
    let mut packages = BTreeSet::new();
    for cpu in online {
        let base = format!("/sys/devices/system/cpu/cpu{cpu}/topology");
        let (Some(pkg), Some(core)) =
            (read_trim(&format!("{base}/physical_package_id")), read_trim(&format!("{base}/core_id")))
        else {
            return (None, None);
        };
        cores.insert((pkg.clone(), core));
        packages.insert(pkg);
    }
    (Some(cores.len() as u32), Some(packages.len() as u32))
}

fn governors(online: &[usize]) -> Option<Vec<String>> {
    let mut g: Vec<String> = online
        .iter()
        .filter_map(|c| read_trim(&format!("/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor")))
        .collect();
    g.sort();
    g.dedup();
    (!g.is_empty()).then_some(g)
}

/// Map a DMI vendor/product or CPUID hypervisor signature to a name, like
/// systemd-detect-virt does.
pub fn classify_vendor(s: &str) -> Option<&'static str> {
    const TABLE: &[(&str, &str)] = &[
        ("KVMKVMKVM", "kvm"),
        ("KVM", "kvm"),
        ("QEMU", "qemu"),
        ("TCGTCGTCGTCG", "qemu"),
        ("VMware", "vmware"),
        ("VirtualBox", "oracle"),
        ("VBoxVBoxVBox", "oracle"),
        ("Microsoft Hv", "microsoft"),
        ("Virtual Machine", "microsoft"),
        ("XenVMMXenVMM", "xen"),
        ("Xen", "xen"),
        ("bhyve", "bhyve"),
        ("ACRNACRNACRN", "acrn"),
        ("Amazon EC2", "amazon"),
        ("Google Compute Engine", "google"),
        ("Parallels", "parallels"),
        ("Firecracker", "firecracker"),
    ];
    TABLE.iter().find(|(k, _)| s.contains(k)).map(|(_, v)| *v)
}

#[cfg(target_arch = "x86_64")]
fn cpuid_hypervisor_signature() -> Option<String> {
    // SAFETY: CPUID exists on every x86_64 CPU; leaf 0x40000000 is reserved
    // for hypervisors and returns zeros or garbage on bare metal, which the
    // caller only uses after seeing the hypervisor flag. (`__cpuid` is a safe
    // fn since Rust 1.87; the block keeps 1.85, the workspace's MSRV, building.)
    #[allow(unused_unsafe)]
    let r = unsafe { std::arch::x86_64::__cpuid(0x4000_0000) };
    let bytes: Vec<u8> = [r.ebx, r.ecx, r.edx].iter().flat_map(|w| w.to_le_bytes()).filter(|b| *b != 0).collect();
    let s = String::from_utf8_lossy(&bytes).into_owned();
    (!s.trim().is_empty()).then_some(s)
}

#[cfg(not(target_arch = "x86_64"))]
fn cpuid_hypervisor_signature() -> Option<String> {
    None
}

fn virtualization(cpuinfo: Option<&str>) -> Option<String> {
    if let Some(t) = read_trim("/sys/hypervisor/type") {
        return Some(t);
    }
    for f in ["/sys/class/dmi/id/sys_vendor", "/sys/class/dmi/id/product_name", "/sys/class/dmi/id/bios_vendor"] {
        if let Some(v) = read_trim(f).as_deref().and_then(classify_vendor) {
            return Some(v.into());
        }
    }
    match cpuinfo.and_then(parse_hypervisor_flag) {
        Some(true) => Some(
            cpuid_hypervisor_signature()
                .map(|sig| classify_vendor(&sig).map_or_else(|| format!("unknown ({sig})"), String::from))
                .unwrap_or_else(|| "unknown hypervisor".into()),
        ),
        Some(false) => Some("none".into()),
        // No x86 flags line (other architectures): cannot tell.
        None => None,
    }
}

/// "none" when sched_ext is disabled, "unsupported" when the kernel lacks it,
/// else the ops name (or "enabled").
pub fn sched_ext(state: Option<&str>, ops: Option<&str>, config: Option<&str>) -> Option<String> {
    match state {
        Some("enabled") => Some(ops.filter(|o| !o.is_empty()).unwrap_or("enabled").to_string()),
        Some("disabled") => Some("none".into()),
        Some(other) => Some(other.to_string()),
        None if config.is_some_and(|c| c.contains("# CONFIG_SCHED_CLASS_EXT is not set")) => Some("unsupported".into()),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = "# comment\nCONFIG_HZ_250=y\nCONFIG_HZ=250\nCONFIG_PREEMPT_NONE=y\n# CONFIG_PREEMPT is not set\nCONFIG_PREEMPT_DYNAMIC=y\n# CONFIG_SCHED_CLASS_EXT is not set\n";

    #[test]
    fn preempt_model_prefers_debugfs_then_version_then_config() {
        assert_eq!(parse_debugfs_preempt("none voluntary (full) lazy\n").as_deref(), Some("full"));
        assert_eq!(parse_debugfs_preempt("none voluntary full"), None);
        let v = "#1 SMP PREEMPT_DYNAMIC Thu Jan  1 00:00:00 UTC 2026";
        assert_eq!(
            preempt_model(Some("none (voluntary) full"), Some(v), None, Some(CONFIG)),
            Some(("dynamic(voluntary)".into(), "debugfs".into()))
        );
        let (m, src) = preempt_model(None, Some(v), Some("quiet preempt=full"), Some(CONFIG)).unwrap();
        assert_eq!(m, "dynamic(full)");
        assert!(src.contains("command line"));
        let (m, src) = preempt_model(None, Some(v), Some("quiet"), Some(CONFIG)).unwrap();
        assert_eq!(m, "dynamic(none)");
        assert!(src.contains("config"));
        assert_eq!(preempt_model(None, Some("#1 SMP PREEMPT_RT Mon"), None, None).unwrap().0, "rt");
        assert_eq!(preempt_model(None, Some("#1 SMP PREEMPT Mon"), None, None).unwrap().0, "full");
        assert_eq!(
            preempt_model(None, Some("#1 SMP Mon"), None, Some("CONFIG_PREEMPT_VOLUNTARY=y\n")),
            Some(("voluntary".into(), "kernel config".into()))
        );
        assert_eq!(preempt_model(None, Some("#1 SMP Mon"), None, None), None);
    }

    #[test]
    fn config_hz_and_sched_ext() {
        assert_eq!(parse_config_hz(CONFIG), Some(250));
        assert_eq!(parse_config_hz("CONFIG_HZ_1000=y\n"), None);
        assert_eq!(sched_ext(None, None, Some(CONFIG)).as_deref(), Some("unsupported"));
        assert_eq!(sched_ext(Some("enabled"), Some("rusty"), None).as_deref(), Some("rusty"));
        assert_eq!(sched_ext(Some("disabled"), None, None).as_deref(), Some("none"));
        assert_eq!(sched_ext(None, None, None), None);
    }

    #[test]
    fn cpuinfo_model_and_hypervisor_flag() {
        let x86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu vme hypervisor lahf_lm\n";
        assert_eq!(parse_cpu_model(x86).as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(parse_hypervisor_flag(x86), Some(true));
        assert_eq!(parse_hypervisor_flag("flags : fpu vme\n"), Some(false));
        let arm = "processor\t: 0\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd\nModel\t: Raspberry Pi 4 Model B Rev 1.4\n";
        assert_eq!(parse_cpu_model(arm).as_deref(), Some("Raspberry Pi 4 Model B Rev 1.4"));
        assert_eq!(parse_hypervisor_flag(arm), None);
    }

    #[test]
    fn proc_stat_steal_and_total() {
        let stat = "cpu  25808 0 4083 59027 491 0 37 79 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1\n";
        assert_eq!(parse_proc_stat(stat), Some((79, 25808 + 4083 + 59027 + 491 + 37 + 79)));
        assert_eq!(parse_proc_stat("cpu  1 2 3\n"), None);
        assert_eq!(parse_proc_stat("intr 5\n"), None);
    }

    #[test]
    fn loadavg_and_vendor_classification() {
        assert_eq!(parse_loadavg("1.48 0.93 0.42 3/170 1234\n"), Some(1.48));
        assert_eq!(classify_vendor("KVMKVMKVM"), Some("kvm"));
        assert_eq!(classify_vendor("Microsoft Hv"), Some("microsoft"));
        assert_eq!(classify_vendor("Dell Inc."), None);
    }

    #[test]
    fn capture_reads_this_machine_without_guessing() {
        let env = capture();
        assert!(env.kernel_release.is_some());
        if !std::path::Path::new("/sys/kernel/sched_ext").exists() {
            assert_eq!(env.sched_ext.as_deref(), Some("unsupported"), "this kernel has no sched_ext");
        }
        let own = read("/proc/self/cgroup").unwrap_or_default();
        if own.contains("0::/") {
            assert_eq!(env.cgroup, crate::harness::cgroup::parse_own(&own));
        }
        // Any readable kernel.sched_* sysctl is recorded (sched_rr_timeslice_ms exists on every Linux).
        if let Some(v) = read_trim("/proc/sys/kernel/sched_rr_timeslice_ms") {
            let t = env.sched_tunables.as_ref().expect("tunables recorded");
            assert_eq!(t.get("kernel.sched_rr_timeslice_ms"), Some(&v));
            assert!(!t.contains_key("kernel.sched_rt_runtime_us"), "it has a field of its own");
        }
        let online = env.online_cpus.clone().unwrap_or_default();
        assert!(!online.is_empty() || env.online_cpus.is_none());
        if let (Some(s), Some(t)) = (env.steal_ticks, env.total_ticks) {
            assert!(s <= t);
        }
    }
}
