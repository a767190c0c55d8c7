//! What the server cost over a repetition: CPU user and system time,
//! voluntary and involuntary context switches, resident memory (average
//! and peak) and swap, of the server's processes only.
//!
//! The built-in server answers `getrusage(RUSAGE_SELF)` on its control pipe
//! (microseconds, and every thread's switches, exited threads included).
//! An external server (`server_cmd`, `server_pid`) is read from /proc: the
//! process tree under its pid (the pid and its descendants, found through
//! `/proc/PID/task/*/children` by `host/counters.rs`, which also lists
//! the tasks and parses their switch counts), CPU from each process's `stat` (ticks of
//! `CLK_TCK`, with `cutime`/`cstime` so a worker that exits and is reaped
//! inside the tree still counts), switches summed over every thread's
//! `status`. A thread or process that exits during a repetition takes its
//! switch counts with it, so then those counts are unknown, never guessed.
//! Memory is summed over the tree's processes from `status` (VmRSS,
//! VmSwap) every 100 ms; for a single-process server the peak is also read
//! from VmHWM after resetting it at the repetition's start (clear_refs 5).

use crate::host::counters;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::os::fd::RawFd;

/// CPU and switch counters at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Counters {
    pub user_ns: u64,
    pub sys_ns: u64,
    /// None: unknown (an exited task's counts are gone).
    pub switches: Option<(u64, u64)>,
    /// Tasks whose switches are summed (for /proc trees).
    tasks: BTreeSet<i32>,
}

/// One repetition's server cost.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Cost {
    pub user_s: f64,
    pub sys_s: f64,
    pub voluntary: Option<u64>,
    pub involuntary: Option<u64>,
    /// Bytes; None when no sample could be read.
    pub rss_avg: Option<f64>,
    pub rss_peak: Option<u64>,
    pub swap_avg: Option<f64>,
}

pub(crate) enum Source {
    /// The built-in server's control pipe (write 'r', read a line).
    Builtin { ctl: RawFd, rep: BufReader<std::fs::File> },
    /// A process tree read from /proc.
    Tree,
}

pub(crate) struct Probe {
    pub root: i32,
    source: Source,
    pids: Vec<i32>,
    start: Option<Counters>,
    rss: Vec<u64>,
    swap: Vec<u64>,
    hwm_reset: bool,
}

impl Probe {
    pub(crate) fn new(root: i32, source: Source) -> Probe {
        Probe { root, source, pids: vec![root], start: None, rss: Vec::new(), swap: Vec::new(), hwm_reset: false }
    }

    /// Mark the repetition's start.
    pub(crate) fn begin(&mut self) -> Result<(), String> {
        self.pids = tree(self.root);
        if self.pids.is_empty() {
            return Err(format!("the server process {} is gone", self.root));
        }
        self.rss.clear();
        self.swap.clear();
        self.hwm_reset = self.pids.len() == 1 && std::fs::write(format!("/proc/{}/clear_refs", self.root), "5").is_ok();
        self.sample();
        self.start = Some(self.counters()?);
        Ok(())
    }

    /// One memory sample (call every ~100 ms); the tree is re-read each time
    /// for an external server, whose workers may come and go.
    pub(crate) fn sample(&mut self) {
        if matches!(self.source, Source::Tree) {
            self.pids = tree(self.root);
        }
        let (mut rss, mut swap, mut any) = (0, 0, false);
        for &p in &self.pids {
            if let Ok(s) = std::fs::read_to_string(format!("/proc/{p}/status")) {
                rss += status_kib(&s, "VmRSS:").unwrap_or(0) * 1024;
                swap += status_kib(&s, "VmSwap:").unwrap_or(0) * 1024;
                any = true;
            }
        }
        if any {
            self.rss.push(rss);
            self.swap.push(swap);
        }
    }

    /// The repetition's cost since [`Probe::begin`].
    pub(crate) fn end(&mut self) -> Result<Cost, String> {
        self.sample();
        let start = self.start.take().ok_or("no start mark")?;
        let end = self.counters()?;
        let mut peak = self.rss.iter().copied().max();
        if self.hwm_reset {
            let hwm = std::fs::read_to_string(format!("/proc/{}/status", self.root))
                .ok()
                .and_then(|s| status_kib(&s, "VmHWM:"))
                .map(|k| k * 1024);
            peak = peak.max(hwm);
        }
        let avg = |v: &[u64]| (!v.is_empty()).then(|| v.iter().sum::<u64>() as f64 / v.len() as f64);
        // A tree's switch counts hold only if no task left it.
        let switches = match (start.switches, end.switches) {
            (Some(a), Some(b)) if start.tasks.is_subset(&end.tasks) && b.0 >= a.0 && b.1 >= a.1 => {
                Some((b.0 - a.0, b.1 - a.1))
            }
            _ => None,
        };
        if end.user_ns < start.user_ns || end.sys_ns < start.sys_ns {
            return Err("the server's CPU time went backwards (a process left its tree)".into());
        }
        Ok(Cost {
            user_s: (end.user_ns - start.user_ns) as f64 / 1e9,
            sys_s: (end.sys_ns - start.sys_ns) as f64 / 1e9,
            voluntary: switches.map(|s| s.0),
            involuntary: switches.map(|s| s.1),
            rss_avg: avg(&self.rss),
            rss_peak: peak,
            swap_avg: avg(&self.swap),
        })
    }

    fn counters(&mut self) -> Result<Counters, String> {
        match &mut self.source {
            Source::Builtin { ctl, rep } => {
                if !crate::harness::write_exact(*ctl, b"r") {
                    return Err("the built-in server's control pipe is closed (did it die?)".into());
                }
                let mut line = String::new();
                rep.read_line(&mut line).map_err(|e| format!("reading the server's rusage: {e}"))?;
                let f: Vec<u64> = line.split_whitespace().filter_map(|t| t.parse().ok()).collect();
                if f.len() != 4 {
                    return Err(format!("the built-in server answered '{}' to a rusage request", line.trim()));
                }
                Ok(Counters {
                    user_ns: f[0] * 1000,
                    sys_ns: f[1] * 1000,
                    switches: Some((f[2], f[3])),
                    tasks: BTreeSet::new(),
                })
            }
            Source::Tree => tree_counters(&self.pids),
        }
    }
}

/// Ticks per second of /proc's CPU times.
fn clk_tck() -> u64 {
    // SAFETY: sysconf takes a constant.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

fn tree_counters(pids: &[i32]) -> Result<Counters, String> {
    let tck = clk_tck();
    let (mut user, mut sys, mut vol, mut invol) = (0u64, 0u64, 0u64, 0u64);
    let mut tasks = BTreeSet::new();
    let mut seen = false;
    for &p in pids {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else { continue };
        let Some(t) = stat_times(&stat) else { continue };
        seen = true;
        user += t.0 + t.2;
        sys += t.1 + t.3;
        for tid in counters::list_tasks(p).unwrap_or_default() {
            let status = std::fs::read_to_string(format!("/proc/{p}/task/{tid}/status"));
            if let Some((v, i)) = status.ok().as_deref().and_then(counters::parse_status_switches) {
                vol += v;
                invol += i;
                tasks.insert(tid);
            }
        }
    }
    if !seen {
        return Err("the server's processes are gone".into());
    }
    let ns = |ticks: u64| ticks * 1_000_000_000 / tck;
    Ok(Counters { user_ns: ns(user), sys_ns: ns(sys), switches: Some((vol, invol)), tasks })
}

/// (utime, stime, cutime, cstime) in ticks from a /proc/PID/stat line.
pub(crate) fn stat_times(stat: &str) -> Option<(u64, u64, u64, u64)> {
    // Fields after the command (which may hold spaces and parentheses): state is field 3.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let n = |i: usize| f.get(i)?.parse::<u64>().ok();
    // utime is field 14 of the line, i.e. index 11 after the command.
    Some((n(11)?, n(12)?, n(13)?, n(14)?))
}

fn status_num(s: &str, key: &str) -> Option<u64> {
    s.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.split_whitespace().next()?.parse().ok())
}

fn status_kib(s: &str, key: &str) -> Option<u64> {
    status_num(s, key)
}

/// `root` and its live descendants (empty when root is gone).
pub(crate) fn tree(root: i32) -> Vec<i32> {
    counters::process_tree(root)
}

/// Whether a process exists (and can be read).
pub(crate) fn exists(pid: i32) -> bool {
    pid > 0 && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_commands_parse() {
        let line = "1234 (nginx: worker (x) 1) S 1 1234 1234 0 -1 4194624 100 0 0 0 17 5 3 2 20 0 1 0 100 0 0";
        assert_eq!(stat_times(line), Some((17, 5, 3, 2)));
        assert_eq!(stat_times("garbage"), None);
    }

    #[test]
    fn this_process_has_a_tree_and_counters() {
        let me = std::process::id() as i32;
        let t = tree(me);
        assert_eq!(t[0], me);
        let c = tree_counters(&t).unwrap();
        assert!(c.switches.is_some() && !c.tasks.is_empty());
        assert!(tree(i32::MAX).is_empty());
        assert!(!exists(i32::MAX) && exists(me));
        let mut p = Probe::new(me, Source::Tree);
        p.begin().unwrap();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(x);
        let cost = p.end().unwrap();
        assert!(cost.rss_avg.unwrap() > 0.0 && cost.rss_peak.unwrap() > 0);
        assert!(cost.user_s >= 0.0 && cost.sys_s >= 0.0);
    }
}
