//! Kernel accounting read around a measurement, to say where lost time went:
//! a thread's own run delay (runnable, but another task or a non-preemptible
//! kernel path held its CPU) and a CPU's steal time (a VM's vCPU not running
//! because the hypervisor ran something else).

use std::os::unix::fs::FileExt;

/// This thread's /proc/thread-self/schedstat ("on-CPU ns, run-delay ns,
/// slices"), read with pread so each read costs one system call; the file
/// must be opened by the thread it describes.
pub(crate) struct SchedStat(Option<std::fs::File>);

impl SchedStat {
    pub(crate) fn open() -> SchedStat {
        SchedStat(std::fs::File::open("/proc/thread-self/schedstat").ok())
    }

    /// (on-CPU ns, run-delay ns).
    pub(crate) fn read(&self) -> Option<(u64, u64)> {
        let mut buf = [0u8; 96];
        let n = self.0.as_ref()?.read_at(&mut buf, 0).ok()?;
        let mut f = std::str::from_utf8(&buf[..n]).ok()?.split_whitespace().map(|v| v.parse::<u64>().ok());
        Some((f.next()??, f.next()??))
    }

    pub(crate) fn run_delay(&self) -> Option<u64> {
        self.read().map(|r| r.1)
    }
}

/// Steal time of some CPUs from /proc/stat, in ns. The kernel keeps it in ns
/// but prints it in USER_HZ ticks, so a difference of two reads is exact to
/// one tick (10 ms at USER_HZ 100) per CPU.
pub(crate) struct Steal {
    file: Option<std::fs::File>,
    cpus: Vec<usize>,
}

/// One USER_HZ tick in ns: the unit /proc/stat prints CPU times in.
pub(crate) fn user_tick_ns() -> u64 {
    // SAFETY: sysconf with a valid name.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        1_000_000_000 / hz as u64
    } else {
        10_000_000
    }
}

impl Steal {
    pub(crate) fn open(cpus: &[usize]) -> Steal {
        Steal { file: std::fs::File::open("/proc/stat").ok(), cpus: cpus.to_vec() }
    }

    /// Summed steal of the CPUs so far (None if /proc/stat is unreadable or
    /// lacks one of them).
    pub(crate) fn read(&self) -> Option<u64> {
        // The cpuN lines are ~160 bytes each and come right after the
        // aggregate line, so a buffer sized for the highest measured CPU
        // holds them; read between repetitions, never in a timed span.
        let file = self.file.as_ref()?;
        let mut buf = vec![0u8; 4096 + 160 * self.cpus.iter().max().map_or(0, |&c| c + 1)];
        let mut len = 0;
        while len < buf.len() {
            match file.read_at(&mut buf[len..], len as u64).ok()? {
                0 => break,
                n => len += n,
            }
        }
        let text = std::str::from_utf8(&buf[..len]).ok()?;
        self.cpus.iter().map(|&c| parse_cpu_steal(text, c)).sum::<Option<u64>>().map(|t| t * user_tick_ns())
    }
}

/// Steal ticks of `cpu` from /proc/stat's "cpuN" line (the 8th field).
pub(crate) fn parse_cpu_steal(stat: &str, cpu: usize) -> Option<u64> {
    let name = format!("cpu{cpu}");
    let line = stat.lines().find(|l| l.split_whitespace().next() == Some(name.as_str()))?;
    line.split_whitespace().nth(8)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_of_one_cpu_line() {
        let stat = "cpu  1277082 4016 772498 1306556 10422 0 1281 11134 0 0\n\
                    cpu0 614924 1981 427842 638563 2619 0 117 5337 0 0\n\
                    cpu1 662157 2035 344656 667992 7802 0 1163 5796 0 0\n\
                    cpu10 1 2 3 4 5 6 7 42 0 0\n\
                    intr 1 2 3\n";
        assert_eq!(parse_cpu_steal(stat, 0), Some(5337));
        assert_eq!(parse_cpu_steal(stat, 1), Some(5796));
        assert_eq!(parse_cpu_steal(stat, 10), Some(42), "cpu1 must not match cpu10");
        assert_eq!(parse_cpu_steal(stat, 2), None);
    }

    #[test]
    fn steal_reads_this_machine_and_never_goes_back() {
        // /proc/stat is part of every Linux procfs: no reason to skip.
        let s = Steal::open(&[0]);
        let a = s.read().expect("/proc/stat unreadable or without a cpu0 line: is procfs mounted on /proc?");
        assert_eq!(a % user_tick_ns(), 0);
        assert!(s.read().unwrap() >= a);
    }

    #[test]
    #[ignore = "needs /proc/thread-self/schedstat (CONFIG_SCHED_INFO): CI runs ignored tests as root (cargo test -- --ignored)"]
    fn schedstat_is_read_afresh_each_time() {
        let s = SchedStat::open();
        let a = s.read().expect("no /proc/thread-self/schedstat: this kernel lacks CONFIG_SCHED_INFO");
        // Spin until this thread has run 2 ms more: a stale pread would never see it.
        let mut x = 1u64;
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let b = loop {
            assert!(std::time::Instant::now() < give_up, "schedstat never changed: is pread re-reading it?");
            for i in 0..10_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
            let b = s.read().expect("readable once");
            if b.0 >= a.0 + 2_000_000 {
                break b;
            }
        };
        assert!(b.1 >= a.1, "run delay only grows: {a:?} then {b:?}");
    }
}
