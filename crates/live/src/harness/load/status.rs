//! Each load task's state beside its counter: how it failed (an errno and
//! the operation), and for the command loads their runs, failed runs and
//! last exit status. A MAP_SHARED anonymous mapping (the tasks are forked,
//! never exec'd), one 64-byte line per task; the tasks only store atomics.
//! The harness side keeps what the tasks cannot: what each failure means
//! in words, and the memfd that holds a command's standard error.

use crate::error::{errno_text, LiveError};
use std::cell::RefCell;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

const WORDS: usize = 8;
/// 0 running, or one of the `FAILED_*` states.
const STATE: usize = 0;
const ERRNO: usize = 1;
/// The operation that failed (`Op`).
const OP: usize = 2;
const RUNS: usize = 3;
const FAILED_RUNS: usize = 4;
/// The last run's raw wait status.
const LAST: usize = 5;
/// Set by the harness once the task's condition is applied: a supervisor
/// starts no command before (its commands inherit the condition).
const GO: usize = 6;
/// errno of a failed execve, stored by the command's own process.
const EXEC_ERRNO: usize = 7;

const FAILED_ERRNO: u64 = 1;
const FAILED_FAST: u64 = 2;

/// The operation a task was doing when it failed.
#[derive(Clone, Copy)]
pub(super) enum Op {
    Write = 1,
    Truncate = 2,
    Sync = 3,
    Read = 4,
    Fork = 5,
}

impl Op {
    fn text(n: u64) -> &'static str {
        match n {
            1 => "writing its file",
            2 => "truncating its file",
            3 => "fdatasync of its file",
            4 => "reading its file",
            5 => "forking the command",
            _ => "an operation",
        }
    }
}

/// What the harness knows of a task that the task cannot say.
#[derive(Default)]
struct Side {
    /// The fix to offer with an errno failure ("give dir= another filesystem").
    fix: String,
    /// The command's standard error (a memfd the supervisor truncates at each run).
    stderr: Option<OwnedFd>,
    /// What the command is, for messages.
    what: String,
}

pub(super) struct StatusPage {
    ptr: *mut AtomicU64,
    slots: usize,
    side: RefCell<Vec<Side>>,
}

impl StatusPage {
    pub(super) fn new(slots: usize) -> Result<StatusPage, LiveError> {
        let len = (slots.max(1) * WORDS * 8) as libc::size_t;
        // SAFETY: a fresh anonymous shared mapping; checked for MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(LiveError::last_os("mmap of the load status page", "check available memory"));
        }
        Ok(StatusPage { ptr: p.cast(), slots, side: RefCell::new((0..slots).map(|_| Side::default()).collect()) })
    }

    pub(super) fn word(&self, slot: usize, w: usize) -> &AtomicU64 {
        assert!(slot < self.slots && w < WORDS);
        // SAFETY: in bounds of a live, zero-filled mapping of atomics.
        unsafe { &*self.ptr.add(slot * WORDS + w) }
    }

    /// The task's line, for the task itself (after fork).
    pub(super) fn line(&self, slot: usize) -> Line<'_> {
        Line { page: self, slot }
    }

    pub(super) fn set_fix(&self, slot: usize, fix: String) {
        self.side.borrow_mut()[slot].fix = fix;
    }

    pub(super) fn set_command(&self, slot: usize, what: String, stderr: OwnedFd) {
        let mut s = self.side.borrow_mut();
        s[slot].what = what;
        s[slot].stderr = Some(stderr);
    }

    /// Let a supervisor start its commands (its condition is applied).
    pub(super) fn go(&self, slot: usize) {
        self.word(slot, GO).store(1, Ordering::Release);
    }

    /// Why the task stopped, in words with the fix; None while it is fine.
    pub(super) fn failure(&self, slot: usize) -> Option<String> {
        let get = |w| self.word(slot, w).load(Ordering::Acquire);
        let side = self.side.borrow();
        let s = &side[slot];
        match get(STATE) {
            FAILED_ERRNO => {
                let e = get(ERRNO) as i32;
                Some(format!("failed: {} failed with {}{}", Op::text(get(OP)), errno_text(e), fix_of(&s.fix)))
            }
            FAILED_FAST => {
                let exec = get(EXEC_ERRNO) as i32;
                let why = if exec != 0 {
                    format!("could not start {}: execve failed with {}", s.what, errno_text(exec))
                } else {
                    format!(
                        "exits at once: its last {FAST_RUNS} runs each ended within {} ms ({})",
                        FAST_MS,
                        describe_status(get(LAST) as i32)
                    )
                };
                Some(format!(
                    "{why}{}: a load must keep running while the measurement does; fix the command, or give one that runs for a while (a loop: cmd:'while :; do make; done')",
                    stderr_tail(s.stderr.as_ref())
                ))
            }
            _ => None,
        }
    }

    /// "3 of 40 runs failed (last: exit status 2; stderr: ...)" for the
    /// tasks in `slots`, when a run failed.
    pub(super) fn failed_runs(&self, slots: std::ops::Range<usize>) -> Option<String> {
        let (mut runs, mut failed, mut last, mut tail) = (0, 0, 0, String::new());
        for i in slots {
            let f = self.word(i, FAILED_RUNS).load(Ordering::Acquire);
            runs += self.word(i, RUNS).load(Ordering::Acquire);
            if f > 0 {
                failed += f;
                last = self.word(i, LAST).load(Ordering::Acquire) as i32;
                tail = stderr_tail(self.side.borrow()[i].stderr.as_ref());
            }
        }
        (failed > 0).then(|| format!("{failed} of {runs} runs failed (last: {}){tail}", describe_status(last)))
    }
}

impl Drop for StatusPage {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping; forked tasks have their own.
        unsafe { libc::munmap(self.ptr.cast(), self.slots.max(1) * WORDS * 8) };
    }
}

/// Three runs in a row that end within this many ms make a command "exit at once".
pub(super) const FAST_MS: u64 = 100;
pub(super) const FAST_RUNS: u64 = 3;

fn fix_of(fix: &str) -> String {
    if fix.is_empty() {
        String::new()
    } else {
        format!(": {fix}")
    }
}

/// A raw wait status in words.
pub(super) fn describe_status(st: i32) -> String {
    if libc::WIFEXITED(st) {
        match libc::WEXITSTATUS(st) {
            127 => "exit status 127: command not found".into(),
            126 => "exit status 126: not executable".into(),
            c => format!("exit status {c}"),
        }
    } else if libc::WIFSIGNALED(st) {
        format!("killed by signal {}", libc::WTERMSIG(st))
    } else {
        format!("wait status {st}")
    }
}

/// "; it said: LAST LINE" from a command's standard error, if it said anything.
fn stderr_tail(fd: Option<&OwnedFd>) -> String {
    let Some(fd) = fd else { return String::new() };
    let mut buf = vec![0u8; 4096];
    // SAFETY: a zeroed stat is valid; fstat fills it or fails.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: our own descriptor; st is writable.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 || st.st_size <= 0 {
        return String::new();
    }
    let from = (st.st_size as usize).saturating_sub(buf.len());
    // SAFETY: buf is writable for its length; pread leaves the shared offset alone.
    let n = unsafe { libc::pread(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), from as libc::off_t) };
    if n <= 0 {
        return String::new();
    }
    buf.truncate(n as usize);
    let text = String::from_utf8_lossy(&buf);
    match text.lines().rev().map(str::trim).find(|l| !l.is_empty()) {
        Some(l) => format!("; it said: {}", l.chars().take(200).collect::<String>()),
        None => String::new(),
    }
}

/// A task's own view of its line (async-signal-safe: atomics only).
#[derive(Clone, Copy)]
pub(super) struct Line<'a> {
    page: &'a StatusPage,
    slot: usize,
}

impl Line<'_> {
    fn w(&self, w: usize) -> &AtomicU64 {
        self.page.word(self.slot, w)
    }

    /// The task stops: `op` failed with `errno`.
    pub(super) fn fail(&self, errno: i32, op: Op) {
        self.w(ERRNO).store(errno as u64, Ordering::Relaxed);
        self.w(OP).store(op as u64, Ordering::Relaxed);
        self.w(STATE).store(FAILED_ERRNO, Ordering::Release);
    }

    /// The command ended FAST_RUNS times in a row within FAST_MS.
    pub(super) fn fail_fast(&self) {
        self.w(STATE).store(FAILED_FAST, Ordering::Release);
    }

    /// A run of the command ended with `status`; `ok`: it succeeded.
    pub(super) fn ran(&self, status: i32, ok: bool) {
        self.w(LAST).store(status as u32 as u64, Ordering::Relaxed);
        if !ok {
            self.w(FAILED_RUNS).fetch_add(1, Ordering::Relaxed);
        }
        self.w(RUNS).fetch_add(1, Ordering::Release);
    }

    pub(super) fn exec_failed(&self, errno: i32) {
        self.w(EXEC_ERRNO).store(errno as u64, Ordering::Release);
    }

    pub(super) fn may_go(&self) -> bool {
        self.w(GO).load(Ordering::Acquire) != 0
    }
}
