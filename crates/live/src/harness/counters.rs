//! Kernel counters on every live result (on unless `RunPlan::counters` is
//! false, `--no-counters`): the measured tasks' voluntary and involuntary
//! switches, migrations and run-queue wait, and their CPUs' steal and
//! interrupt time, per measured repetition, as `kernel.*` metrics beside the
//! benchmark's own (what each is and where it comes from: `host/counters.rs`).
//!
//! A benchmark does nothing for them beyond marking its repetitions
//! (`Ctx::rep_starts`/`rep_ends`, which it does for the loads anyway): the
//! mark reads a snapshot in whichever process marks (the measuring thread
//! in the harness, or a runner process) and, at a repetition's end, writes
//! each counter's difference or the reason it has none into a memfd page
//! that the runner maps like the load page. The harness turns the page into
//! metrics (a counter absent from any repetition is left out) and into
//! notes that start with [`NOTE_PREFIX`], which `show` lists with `--all`.
//!
//! Nothing is read in a timed span: the marks are outside it. A mark reads
//! `sched`, `schedstat` and `children` of each measured task, the marking
//! process's threads' `sched` once more for the getrusage bracket, and
//! `/proc/stat`; `bench/counters-overhead.sh` measures what that costs.

use crate::error::LiveError;
use crate::host::counters::{self as host, Absent, Features, Scope, Snapshot, COUNTERS, N};
use schedlab_core::{Direction, Metric};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Warnings about the kernel counters start with this (see schedlab_core's
/// `KERNEL_NOTE_PREFIX`, which the report's views honour).
pub(crate) const NOTE_PREFIX: &str = schedlab_core::KERNEL_NOTE_PREFIX;

const MAGIC: u64 = 0x7363_6c62_6b63_7472; // "sclbkctr"
const H_WARMUP: usize = 1;
const H_REPEAT: usize = 2;
const HEADER: usize = 3;
/// Slot status: written with a value.
const PRESENT: u64 = 1;

/// Per measured repetition and counter: a status word (0 not marked,
/// [`PRESENT`], else an [`Absent`] code) and a value word.
pub(crate) struct CounterPage {
    ptr: *mut AtomicU64,
    words: usize,
    /// The harness's descriptor (None in a runner, which maps the harness's).
    fd: Option<OwnedFd>,
}

// SAFETY: the mapping holds only atomics and lives until drop.
unsafe impl Sync for CounterPage {}
// SAFETY: as above.
unsafe impl Send for CounterPage {}

impl CounterPage {
    fn words_for(repeat: usize) -> usize {
        HEADER + repeat * N * 2
    }

    fn create(warmup: u32, repeat: u32) -> Result<CounterPage, LiveError> {
        let words = Self::words_for(repeat as usize);
        // SAFETY: the name is a valid C string; flags are constants.
        let raw = unsafe { libc::memfd_create(c"schedlab-counters".as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(LiveError::last_os("memfd_create for the kernel counters", "needs Linux 3.17 or later"));
        }
        // SAFETY: a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: ftruncate on our own memfd.
        if unsafe { libc::ftruncate(raw, (words * 8) as libc::off_t) } != 0 {
            return Err(LiveError::last_os("ftruncate of the kernel counters page", "check available memory"));
        }
        let page = CounterPage { ptr: map(raw, words)?, words, fd: Some(fd) };
        page.word(H_WARMUP).store(warmup as u64, Ordering::Relaxed);
        page.word(H_REPEAT).store(repeat as u64, Ordering::Relaxed);
        page.word(0).store(MAGIC, Ordering::Release);
        Ok(page)
    }

    /// The harness's page from its descriptor, in a runner (None: -1 or not such a page).
    fn map_fd(fd: i32) -> Option<CounterPage> {
        // SAFETY: a zeroed stat is valid; fstat fills it or fails.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: st is writable.
        if fd < 0 || unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_size < (HEADER * 8) as libc::off_t {
            return None;
        }
        let words = st.st_size as usize / 8;
        let page = CounterPage { ptr: map(fd, words).ok()?, words, fd: None };
        let ok = page.word(0).load(Ordering::Acquire) == MAGIC
            && Self::words_for(page.word(H_REPEAT).load(Ordering::Relaxed) as usize) == words;
        ok.then_some(page)
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        assert!(i < self.words);
        // SAFETY: in bounds (checked) of a live, zero-filled (valid) mapping.
        unsafe { &*self.ptr.add(i) }
    }

    fn slot(&self, measured: usize, k: usize) -> (&AtomicU64, &AtomicU64) {
        let at = HEADER + (measured * N + k) * 2;
        (self.word(at), self.word(at + 1))
    }

    fn repeat(&self) -> usize {
        self.word(H_REPEAT).load(Ordering::Relaxed) as usize
    }

    /// The measured index of repetition `rep` (warm-ups first), if measured.
    fn measured(&self, rep: u64) -> Option<usize> {
        let m = rep.checked_sub(self.word(H_WARMUP).load(Ordering::Relaxed))? as usize;
        (m < self.repeat()).then_some(m)
    }

    fn store(&self, measured: usize, k: usize, v: Result<u64, Absent>) {
        let (status, value) = self.slot(measured, k);
        match v {
            Ok(v) => {
                value.store(v, Ordering::Relaxed);
                status.store(PRESENT, Ordering::Release);
            }
            Err(a) => status.store(a.code(), Ordering::Release),
        }
    }

    fn load(&self, measured: usize, k: usize) -> Result<u64, Absent> {
        let (status, value) = self.slot(measured, k);
        match status.load(Ordering::Acquire) {
            PRESENT => Ok(value.load(Ordering::Relaxed)),
            code => Err(Absent::from_code(code).unwrap_or(Absent::NotMarked)),
        }
    }
}

fn map(fd: i32, words: usize) -> Result<*mut AtomicU64, LiveError> {
    // SAFETY: a shared mapping of a memfd at least that long; checked for MAP_FAILED.
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), words * 8, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
    };
    if p == libc::MAP_FAILED {
        return Err(LiveError::last_os("mmap of the kernel counters page", "check ulimit -v"));
    }
    Ok(p.cast())
}

impl Drop for CounterPage {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in create/map_fd; no reference outlives self.
        unsafe { libc::munmap(self.ptr.cast(), self.words * 8) };
    }
}

/// The counters of one case, in the process that marks its repetitions.
pub(crate) struct Counters {
    page: CounterPage,
    scope: Scope,
    features: Features,
    /// The snapshot at the start of the repetition now running.
    start: Mutex<Option<(u64, Snapshot)>>,
}

impl Counters {
    /// In the harness, on the calling thread before the measuring thread
    /// exists: every thread of this process now is the harness's own.
    pub(crate) fn for_harness(warmup: u32, repeat: u32) -> Result<Counters, LiveError> {
        Ok(Counters {
            page: CounterPage::create(warmup, repeat)?,
            scope: Scope::harness(),
            features: Features::probe(),
            start: Mutex::new(None),
        })
    }

    /// In a runner: the harness's page, this whole process measured (None: no counters).
    pub(crate) fn in_runner(fd: i32) -> Option<Counters> {
        Some(Counters {
            page: CounterPage::map_fd(fd)?,
            scope: Scope::Process,
            features: Features::probe(),
            start: Mutex::new(None),
        })
    }

    /// The page's descriptor for a runner (-1 in a runner itself).
    pub(crate) fn raw_fd(&self) -> i32 {
        self.page.fd.as_ref().map_or(-1, |f| f.as_raw_fd())
    }

    /// Repetition `rep` (warm-ups first) starts or ends now; warm-ups are not read.
    pub(crate) fn mark(&self, rep: u64, end: bool) {
        let Some(measured) = self.page.measured(rep) else { return };
        let mut start = self.start.lock().unwrap_or_else(|e| e.into_inner());
        if !end {
            *start = Some((rep, host::snapshot(&self.scope, &self.features)));
            return;
        }
        // An end without its start (a benchmark that marks only ends) stays "not marked".
        let Some((r, s)) = start.take().filter(|(r, _)| *r == rep) else { return };
        debug_assert_eq!(r, rep);
        let e = host::snapshot(&self.scope, &self.features);
        for (k, v) in host::delta(&s, &e, &self.features).into_iter().enumerate() {
            self.page.store(measured, k, v);
        }
    }

    /// The counters as metrics (those present in every measured repetition)
    /// and a note for each reason some are absent.
    pub(crate) fn finish(&self) -> (Vec<Metric>, Vec<String>) {
        let repeat = self.page.repeat();
        let mut metrics = Vec::new();
        // (reason, counters, the repetitions it struck).
        let mut why: Vec<(Absent, Vec<&'static str>, Vec<usize>)> = Vec::new();
        for (k, def) in COUNTERS.iter().enumerate() {
            let got: Vec<Result<u64, Absent>> = (0..repeat).map(|m| self.page.load(m, k)).collect();
            if let Some(Err(first)) = got.iter().find(|v| v.is_err()) {
                let reps: Vec<usize> =
                    got.iter().enumerate().filter(|(_, v)| *v == &Err(*first)).map(|(i, _)| i + 1).collect();
                match why.iter_mut().find(|(a, _, r)| a == first && *r == reps) {
                    Some((_, names, _)) => names.push(def.name),
                    None => why.push((*first, vec![def.name], reps)),
                }
                continue;
            }
            let values = got.into_iter().map(|v| v.unwrap_or(0) as f64).collect();
            metrics.push(Metric::samples(def.name, def.unit, Direction::Neutral, values));
        }
        let notes = why
            .into_iter()
            .map(|(a, names, reps)| {
                let when = if reps.len() == repeat {
                    String::new()
                } else {
                    let list: Vec<String> = reps.iter().map(|r| r.to_string()).collect();
                    format!(" (repetition {})", list.join(", "))
                };
                format!("{NOTE_PREFIX}{} absent{when}: {}", names.join(", "), a.text())
            })
            .collect();
        (metrics, notes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_keeps_values_and_reasons_per_measured_repetition() {
        let page = CounterPage::create(1, 2).expect("memfd");
        assert_eq!(page.measured(0), None, "a warm-up is not stored");
        assert_eq!((page.measured(1), page.measured(2), page.measured(3)), (Some(0), Some(1), None));
        page.store(0, 0, Ok(42));
        page.store(1, 0, Err(Absent::TasksEnded));
        assert_eq!(page.load(0, 0), Ok(42));
        assert_eq!(page.load(1, 0), Err(Absent::TasksEnded));
        assert_eq!(page.load(1, 1), Err(Absent::NotMarked), "never written");
        // A runner maps the same page through its descriptor.
        let other = CounterPage::map_fd(page.fd.as_ref().unwrap().as_raw_fd()).expect("same page");
        assert_eq!(other.load(0, 0), Ok(42));
        assert!(CounterPage::map_fd(-1).is_none());
    }

    #[test]
    fn finish_keeps_complete_counters_and_explains_the_rest() {
        let c = Counters::for_harness(0, 2).expect("memfd");
        for m in 0..2 {
            for k in 0..N {
                let v = match (k, m) {
                    (3, _) => Err(Absent::TasksEnded),
                    (2, 1) => Err(Absent::TasksEnded),
                    (5, 0) => Err(Absent::NoCpuTimes),
                    _ => Ok(10 + m as u64),
                };
                c.page.store(m, k, v);
            }
        }
        let (metrics, notes) = c.finish();
        let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["kernel.ctx_switches_voluntary", "kernel.ctx_switches_involuntary", "kernel.cpu_steal"]);
        assert!(metrics.iter().all(|m| !m.headline && m.direction == Direction::Neutral));
        assert_eq!(notes.len(), 3, "one note per reason and set of repetitions: {notes:?}");
        assert!(notes.iter().all(|n| n.starts_with(NOTE_PREFIX)));
        assert!(notes[0].contains("kernel.migrations absent (repetition 2): measured tasks ended"), "{}", notes[0]);
        assert!(notes[1].contains("kernel.run_queue_wait absent: measured tasks ended"), "{}", notes[1]);
        assert!(notes[2].contains("kernel.cpu_irq absent (repetition 1): /proc/stat"), "{}", notes[2]);
    }

    #[test]
    fn a_marked_repetition_stores_every_counter() {
        // The whole test process is measured (other tests' threads come and
        // go here, so the harness scope could rightly say a thread ended).
        let c = Counters {
            page: CounterPage::create(1, 1).expect("memfd"),
            scope: Scope::Process,
            features: Features::probe(),
            start: Mutex::new(None),
        };
        c.mark(0, false);
        c.mark(0, true);
        assert_eq!(c.page.load(0, 0), Err(Absent::NotMarked), "a warm-up is not read");
        c.mark(1, false);
        for _ in 0..3 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        c.mark(1, true);
        // Other tests' children may end inside children of this process
        // meanwhile (then "inconsistent" is the right answer); the values
        // themselves are checked in tests/counters.rs, one benchmark at a time.
        for (k, def) in COUNTERS.iter().enumerate() {
            assert_ne!(c.page.load(0, k), Err(Absent::NotMarked), "{}: the end mark stores each counter", def.name);
        }
        if let Ok(v) = c.page.load(0, 0) {
            assert!(v >= 3, "three sleeps block three times: {v}");
        }
    }
}
