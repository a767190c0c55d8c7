//! interbench's emulated tasks as background loads (`video:N`, `x:N`), and
//! the definitions the `interactive` benchmark measures them by.
//!
//! interbench v0.31 (`emulate_video`, `emulate_x`): video uses 40 % of a
//! CPU at 60 frames a second; X runs in 100 ms cycles whose work ramps from
//! 0 to 100 ms in 1 ms steps. As loads they burn *CPU time* (the kernel's
//! accounting of the task, `CLOCK_THREAD_CPUTIME_ID`), so they need no
//! calibration and take the same share of a CPU on any machine; a frame
//! whose period has passed is dropped, as a player drops a late frame. Each
//! task counts the frames (video) or cycles (X) it completed.

use super::{LoadKind, LoadSpec, Slots, Started};
use crate::error::LiveError;
use crate::harness::hygiene::Children;
use crate::harness::now_ns;
use std::sync::atomic::{AtomicU64, Ordering};

/// Video: 60 Hz (interbench's 1,000,000/60 us), 40 % of each period.
pub(crate) const VIDEO_PERIOD_NS: u64 = 1_000_000_000 / 60;
pub(crate) const VIDEO_PERCENT: u64 = 40;
/// Audio: every 50 ms, 5 % of each period.
pub(crate) const AUDIO_PERIOD_NS: u64 = 50_000_000;
pub(crate) const AUDIO_PERCENT: u64 = 5;
/// X: 100 ms cycles; gaming: 100 ms chunks of work with no deadline.
pub(crate) const X_PERIOD_NS: u64 = 100_000_000;
pub(crate) const GAMING_CHUNK_NS: u64 = 100_000_000;

pub(super) fn start(kids: &mut Children, spec: &LoadSpec, s: &Slots<'_>) -> Result<Started, LiveError> {
    let video = matches!(spec.kind, LoadKind::Video { .. });
    let mut pids = Vec::new();
    for i in s.first..s.first + s.n {
        super::stop_check()?;
        let (slot, stop, deadline) = (s.page.slot(i), s.page.stop_word(), s.deadline_ns);
        // SAFETY: the child only sleeps, spins, reads clocks and stores atomics.
        pids.push(unsafe {
            kids.fork(|| {
                crate::harness::hygiene::name_task(if video { c"schedlab-video" } else { c"schedlab-x" });
                emulate(video, slot, stop, deadline)
            })
        }?);
    }
    Ok(Started { pids, note: None })
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn sleep_until(ns: u64) {
    let t =
        libc::timespec { tv_sec: (ns / 1_000_000_000) as libc::time_t, tv_nsec: (ns % 1_000_000_000) as libc::c_long };
    // SAFETY: valid timespec; no remaining-time output for TIMER_ABSTIME.
    unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &t, std::ptr::null_mut()) };
}

/// Spin until this task has used `ns` of CPU time; false when stopped.
fn burn_cpu(ns: u64, stop: &AtomicU64, deadline_ns: u64) -> bool {
    let start = thread_cpu_ns();
    while thread_cpu_ns().saturating_sub(start) < ns {
        for _ in 0..2048 {
            // SAFETY: an empty instruction sequence the compiler may not remove.
            unsafe { std::arch::asm!("", options(nostack, preserves_flags)) };
        }
        if stop.load(Ordering::Relaxed) != 0 || now_ns() > deadline_ns {
            return false;
        }
    }
    true
}

fn emulate(video: bool, slot: &AtomicU64, stop: &AtomicU64, deadline_ns: u64) -> i32 {
    let period = if video { VIDEO_PERIOD_NS } else { X_PERIOD_NS };
    let mut next = now_ns() + period;
    let mut step: u64 = 0;
    loop {
        let run = if video { period * VIDEO_PERCENT / 100 } else { (step % 101) * 1_000_000 };
        step += 1;
        if !burn_cpu(run, stop, deadline_ns) {
            return 0;
        }
        slot.fetch_add(1, Ordering::Relaxed);
        let now = now_ns();
        if next < now {
            // Periods that passed while this one ran are dropped.
            next += (now - next) / period * period + period;
        }
        sleep_until(next);
        next += period;
        if stop.load(Ordering::Relaxed) != 0 || now_ns() > deadline_ns {
            return 0;
        }
    }
}
