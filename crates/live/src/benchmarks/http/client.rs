//! The load client: a few threads, each driving many connections from one
//! epoll loop (as wrk does), with non-blocking sockets, a `timerfd` for
//! precise open-loop send times and httparse for response heads.
//!
//! A connection slot runs one request at a time. Closed loop: the next
//! request starts the moment the previous one's response is complete, in
//! the same pass over epoll's events (ab's `-c` workers), the number of
//! requests shared out from one counter; or until the soak's end. Its time
//! runs from that moment (when it could be sent), so the `concurrency`
//! slots always have a request outstanding and, by Little's law, the mean
//! response time is `concurrency` / requests per second, as ab's is. Without
//! keep-alive the finished socket is handed to a lingering list that waits
//! for the server's close (so the server, not the client, holds the
//! TIME_WAIT and the client's local ports last), while the slot opens a new
//! one: up to two sockets per slot.
//! Open loop (wrk2's model): request j of the whole run is due at
//! `t0 + j / rate` and belongs to connection `j mod C`; a connection that
//! is still busy when its next request is due sends it as soon as it is
//! free, and the response time is charged from the due time (corrected),
//! with the time from the actual send kept beside it (uncorrected).
//!
//! Times per request (CLOCK_MONOTONIC), as ab takes them: start (closed
//! loop: when the slot became free; open loop: the connect, or the write on
//! a kept-alive connection), connected, request
//! written, first response byte, response complete. `connect` = connected -
//! start (0 on a kept-alive connection), `waiting` = first byte - written,
//! `total` = complete - start (open loop: - due time). Failed requests are
//! counted by class and kept out of the histograms; a kept-alive connection
//! that the server closed before any byte of the response is retried once
//! on a fresh connection without counting a failure (ab and browsers do).

use crate::error::LiveError;
use crate::harness::now_ns;
use schedlab_core::LatencyHistogram;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// Why a request failed; each class is its own metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fail {
    /// The connection was refused (nothing listens).
    Refused,
    /// Reset or closed by the server before a response began.
    Reset,
    /// No complete response within `timeout`.
    Timeout,
    /// A complete response with a status outside 200-299.
    Non2xx,
    /// The connection closed in the middle of the response.
    ShortBody,
    /// Anything else: a malformed response, no local port left, ...
    Other,
}

pub(crate) const CLASSES: [Fail; 6] =
    [Fail::Refused, Fail::Reset, Fail::Timeout, Fail::Non2xx, Fail::ShortBody, Fail::Other];

impl Fail {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Fail::Refused => "refused",
            Fail::Reset => "reset",
            Fail::Timeout => "timeout",
            Fail::Non2xx => "non2xx",
            Fail::ShortBody => "short_body",
            Fail::Other => "other",
        }
    }

    fn of_errno(e: i32) -> Fail {
        match e {
            libc::ECONNREFUSED => Fail::Refused,
            libc::ECONNRESET | libc::EPIPE | libc::ECONNABORTED => Fail::Reset,
            libc::ETIMEDOUT => Fail::Timeout,
            _ => Fail::Other,
        }
    }
}

/// When a repetition ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// After this many requests (succeeded or failed).
    Requests(u64),
    /// No request starts after this many ns (the soak).
    For(u64),
}

/// One repetition's load.
#[derive(Debug, Clone)]
pub(crate) struct Load {
    pub addr: SocketAddr,
    pub request: Vec<u8>,
    pub concurrency: usize,
    pub keepalive: bool,
    pub timeout_ns: u64,
    /// Requests per second (open loop); None: closed loop.
    pub rate: Option<f64>,
    pub end: End,
    /// Soak series interval; None: no series.
    pub interval_ns: Option<u64>,
    pub threads: usize,
    pub cpus: Option<Vec<usize>>,
}

/// One finished interval of the soak series.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Point {
    /// End of the interval, ns since the repetition's start.
    pub t_ns: u64,
    pub pages: u64,
    pub failures: u64,
    pub mean_ns: Option<f64>,
    pub p99_ns: Option<u64>,
}

/// What one repetition measured.
#[derive(Debug)]
pub(crate) struct RepOut {
    pub response: LatencyHistogram,
    /// Open loop only: from the actual send.
    pub uncorrected: LatencyHistogram,
    pub connect: LatencyHistogram,
    pub waiting: LatencyHistogram,
    pub ok: u64,
    pub failures: [u64; 6],
    /// The first error of each class, for messages.
    pub first_error: [Option<String>; 6],
    /// The common start (CLOCK_MONOTONIC ns).
    pub t0: u64,
    /// Start to the last completion, ns.
    pub wall_ns: u64,
    /// Open loop: requests sent more than 1 ms after their due time.
    pub late: u64,
    /// CPU time of each client thread.
    pub thread_cpu_ns: Vec<u64>,
    pub intervals: Vec<Point>,
    /// Stopped early (Ctrl-C, --timeout) with the finished intervals kept.
    pub interrupted: bool,
}

impl RepOut {
    pub(crate) fn failed(&self) -> u64 {
        self.failures.iter().sum()
    }
}

/// A send later than this after its due time counts as late.
const LATE_NS: u64 = 1_000_000;
/// Timeouts, the stop flag and the soak's intervals are looked at this often.
const SWEEP_NS: u64 = 10_000_000;
/// A soak connection that was refused waits this long before trying again.
const BACKOFF_NS: u64 = 10_000_000;
/// Largest response head accepted.
const HEAD_CAP: usize = 64 * 1024;
const TIMER: u64 = u64::MAX;
/// Epoll tokens of lingering sockets: this bit and the index (connection
/// tokens keep their generation below 2^31, so never set it).
const LINGER: u64 = 1 << 63;

/// Shared by the client threads and the coordinator.
struct State {
    abort: AtomicBool,
    remaining: AtomicU64,
    completed: AtomicU64,
    t0: AtomicU64,
}

/// Every client thread set up, then all go at once (at `State::t0`).
struct Gate {
    m: std::sync::Mutex<(usize, bool)>,
    cv: std::sync::Condvar,
}

impl Gate {
    fn new() -> Gate {
        Gate { m: std::sync::Mutex::new((0, false)), cv: std::sync::Condvar::new() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (usize, bool)> {
        self.m.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn arrive_and_wait(&self) {
        let mut g = self.lock();
        g.0 += 1;
        self.cv.notify_all();
        while !g.1 {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn wait_for(&self, n: usize) {
        let mut g = self.lock();
        while g.0 < n {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn open(&self) {
        self.lock().1 = true;
        self.cv.notify_all();
    }
}

enum Msg {
    Interval(u64, Acc),
}

#[derive(Debug)]
struct Acc {
    ok: u64,
    fail: u64,
    hist: LatencyHistogram,
}

impl Acc {
    fn new() -> Acc {
        Acc { ok: 0, fail: 0, hist: LatencyHistogram::new() }
    }
}

/// Run one repetition. `tick` is called every ~20 ms from this thread with
/// the units done (requests, or ms of the soak); its error stops the
/// client. A stop (`Interrupted`) during a soak returns the finished
/// intervals with `interrupted` set; any other error is returned.
pub(crate) fn run(load: &Load, tick: &mut dyn FnMut(u64) -> Result<(), LiveError>) -> Result<RepOut, LiveError> {
    let threads = load.threads.clamp(1, load.concurrency.max(1));
    let st = State {
        abort: AtomicBool::new(false),
        remaining: AtomicU64::new(match load.end {
            End::Requests(n) => n,
            End::For(_) => u64::MAX,
        }),
        completed: AtomicU64::new(0),
        t0: AtomicU64::new(0),
    };
    let gate = Gate::new();
    let (tx, rx) = mpsc::channel::<Msg>();
    std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(threads);
        let mut spawn_error = None;
        for t in 0..threads {
            let (st, gate, tx) = (&st, &gate, tx.clone());
            match std::thread::Builder::new()
                .name(format!("schedlab-httpc{t}"))
                .spawn_scoped(s, move || client_thread(t, threads, load, st, gate, tx))
            {
                Ok(h) => handles.push(h),
                Err(e) => {
                    spawn_error = Some(LiveError::Os {
                        what: "spawning a client thread",
                        detail: e.to_string(),
                        hint: "check ulimit -u",
                    });
                    break;
                }
            }
        }
        drop(tx);
        gate.wait_for(handles.len());
        let t0 = now_ns();
        st.t0.store(t0, Ordering::SeqCst);
        if spawn_error.is_some() {
            st.abort.store(true, Ordering::SeqCst);
        }
        gate.open();
        if let Some(e) = spawn_error {
            for h in handles {
                let _ = h.join();
            }
            return Err(e);
        }
        let mut merger = Merger::new(threads, load.interval_ns.unwrap_or(1));
        let mut stop: Option<LiveError> = None;
        loop {
            match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(Msg::Interval(k, acc)) => merger.add(k, acc),
                Err(mpsc::RecvTimeoutError::Timeout) | Err(mpsc::RecvTimeoutError::Disconnected) => {}
            }
            if handles.iter().all(|h| h.is_finished()) {
                break;
            }
            if stop.is_none() {
                let done = match load.end {
                    End::Requests(_) => st.completed.load(Ordering::Relaxed),
                    End::For(_) => now_ns().saturating_sub(t0) / 1_000_000,
                };
                if let Err(e) = tick(done) {
                    st.abort.store(true, Ordering::SeqCst);
                    stop = Some(e);
                }
            }
        }
        while let Ok(Msg::Interval(k, acc)) = rx.try_recv() {
            merger.add(k, acc);
        }
        let mut outs = Vec::with_capacity(threads);
        let mut first_err = None;
        for h in handles {
            match h.join() {
                Ok(Ok(o)) => outs.push(o),
                Ok(Err(e)) => first_err = first_err.or(Some(e)),
                Err(_) => {
                    first_err = first_err
                        .or(Some(LiveError::Measurement { bench: "http", detail: "a client thread panicked".into() }))
                }
            }
        }
        let interrupted = match stop {
            Some(LiveError::Interrupted) if load.interval_ns.is_some() => true,
            Some(e) => return Err(e),
            None => false,
        };
        if let Some(e) = first_err {
            return Err(e);
        }
        let mut out = RepOut {
            response: LatencyHistogram::new(),
            uncorrected: LatencyHistogram::new(),
            connect: LatencyHistogram::new(),
            waiting: LatencyHistogram::new(),
            ok: 0,
            failures: [0; 6],
            first_error: Default::default(),
            t0,
            wall_ns: 0,
            late: 0,
            thread_cpu_ns: Vec::with_capacity(threads),
            intervals: merger.points,
            interrupted,
        };
        let mut last = t0;
        for o in outs {
            out.response.merge(&o.response);
            out.uncorrected.merge(&o.uncorrected);
            out.connect.merge(&o.connect);
            out.waiting.merge(&o.waiting);
            out.ok += o.ok;
            out.late += o.late;
            for (i, n) in o.failures.iter().enumerate() {
                out.failures[i] += n;
                if out.first_error[i].is_none() {
                    out.first_error[i] = o.first_error[i].clone();
                }
            }
            out.thread_cpu_ns.push(o.cpu_ns);
            last = last.max(o.last);
        }
        out.wall_ns = last - t0;
        Ok(out)
    })
}

/// Collects each thread's report of each interval; a point is finished
/// when every thread has reported it.
struct Merger {
    threads: usize,
    interval_ns: u64,
    pending: BTreeMap<u64, (usize, Acc)>,
    points: Vec<Point>,
}

impl Merger {
    fn new(threads: usize, interval_ns: u64) -> Merger {
        Merger { threads, interval_ns, pending: BTreeMap::new(), points: Vec::new() }
    }

    fn add(&mut self, k: u64, acc: Acc) {
        let e = self.pending.entry(k).or_insert_with(|| (0, Acc::new()));
        e.0 += 1;
        e.1.ok += acc.ok;
        e.1.fail += acc.fail;
        e.1.hist.merge(&acc.hist);
        if e.0 == self.threads {
            let (_, a) = self.pending.remove(&k).expect("present");
            self.points.push(Point {
                t_ns: (k + 1) * self.interval_ns,
                pages: a.ok,
                failures: a.fail,
                mean_ns: a.hist.mean(),
                p99_ns: a.hist.quantile(0.99),
            });
            self.points.sort_by_key(|p| p.t_ns);
        }
    }
}

struct ThreadOut {
    response: LatencyHistogram,
    uncorrected: LatencyHistogram,
    connect: LatencyHistogram,
    waiting: LatencyHistogram,
    ok: u64,
    failures: [u64; 6],
    first_error: [Option<String>; 6],
    late: u64,
    last: u64,
    cpu_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    Scheduled,
    Connecting,
    Writing,
    Reading,
    Done,
}

struct Conn {
    fd: RawFd,
    /// Bumped at each new socket: epoll events of an old one are ignored.
    gen: u32,
    phase: Phase,
    reused: bool,
    retried: bool,
    due: u64,
    start: u64,
    connected: u64,
    written: u64,
    first: u64,
    wrote: usize,
    deadline: u64,
    /// Open loop: this connection's next request index (gid, gid + C, ...).
    next_seq: u64,
    not_before: u64,
    /// When the slot last became free after a failure (its next request could go from then).
    free_at: u64,
    /// Its previous socket, lingering (at most one: two open files per slot).
    linger: Option<usize>,
    resp: Resp,
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn errno() -> i32 {
    crate::error::last_errno()
}

fn client_thread(
    t: usize,
    threads: usize,
    load: &Load,
    st: &State,
    gate: &Gate,
    tx: mpsc::Sender<Msg>,
) -> Result<ThreadOut, LiveError> {
    let setup = Worker::new(t, threads, load, st, tx);
    gate.arrive_and_wait();
    let mut w = setup?;
    if st.abort.load(Ordering::SeqCst) {
        return Ok(w.into_out());
    }
    let cpu0 = thread_cpu_ns();
    w.t0 = st.t0.load(Ordering::SeqCst);
    let r = w.run();
    w.cpu_ns = thread_cpu_ns() - cpu0;
    r.map(|_| w.into_out())
}

struct Worker<'a> {
    load: &'a Load,
    st: &'a State,
    ep: OwnedFd,
    tfd: OwnedFd,
    armed: u64,
    conns: Vec<Conn>,
    ready: Vec<usize>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    active: usize,
    t0: u64,
    rbuf: Vec<u8>,
    /// Sockets whose response is recorded, waiting for the server's close
    /// (then closed): the deadline after which we close them ourselves, and
    /// the slot they came from.
    lingering: Vec<Option<(RawFd, u64, usize)>>,
    linger_free: Vec<usize>,
    sa: (libc::c_int, libc::sockaddr_storage, libc::socklen_t),
    period: f64,
    // Results.
    response: LatencyHistogram,
    uncorrected: LatencyHistogram,
    connect: LatencyHistogram,
    waiting: LatencyHistogram,
    ok: u64,
    failures: [u64; 6],
    first_error: [Option<String>; 6],
    late: u64,
    last: u64,
    cpu_ns: u64,
    unpublished: u64,
    // Soak series.
    tx: mpsc::Sender<Msg>,
    iv_k: u64,
    iv_end: u64,
    iv_count: u64,
    iv: Acc,
    fatal: Option<LiveError>,
}

impl<'a> Worker<'a> {
    fn new(t: usize, threads: usize, load: &'a Load, st: &'a State, tx: mpsc::Sender<Msg>) -> Result<Self, LiveError> {
        if let Some(cpus) = &load.cpus {
            crate::harness::condition::set_affinity(0, cpus).map_err(|e| {
                LiveError::os("pinning a client thread to client_cpus", e, "choose CPUs this process may use")
            })?;
        }
        // Timer slack 1 ns: open-loop sends leave on time (the default 50 us would add to every one).
        // SAFETY: prctl with integer arguments on the calling thread.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
        // SAFETY: plain system calls; results checked.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(LiveError::last_os("epoll_create1", "raise ulimit -n"));
        }
        // SAFETY: a fresh descriptor that nothing else owns.
        let ep = unsafe { OwnedFd::from_raw_fd(ep) };
        // SAFETY: as above.
        let tfd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if tfd < 0 {
            return Err(LiveError::last_os("timerfd_create", "raise ulimit -n"));
        }
        // SAFETY: a fresh descriptor that nothing else owns.
        let tfd = unsafe { OwnedFd::from_raw_fd(tfd) };
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: TIMER };
        // SAFETY: valid descriptors and event.
        if unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, tfd.as_raw_fd(), &mut ev) } != 0 {
            return Err(LiveError::last_os("epoll_ctl", "check the kernel"));
        }
        let conns: Vec<Conn> = (t..load.concurrency)
            .step_by(threads)
            .map(|gid| Conn {
                fd: -1,
                gen: 0,
                phase: Phase::Idle,
                reused: false,
                retried: false,
                due: 0,
                start: 0,
                connected: 0,
                written: 0,
                first: 0,
                wrote: 0,
                deadline: 0,
                next_seq: gid as u64,
                not_before: 0,
                free_at: 0,
                linger: None,
                resp: Resp::new(),
            })
            .collect();
        let iv_count = match (load.interval_ns, load.end) {
            (Some(iv), End::For(t)) => t / iv.max(1),
            _ => 0,
        };
        Ok(Worker {
            load,
            st,
            ep,
            tfd,
            armed: 0,
            active: conns.len(),
            ready: (0..conns.len()).rev().collect(),
            conns,
            heap: BinaryHeap::new(),
            t0: 0,
            rbuf: vec![0; 256 * 1024],
            lingering: Vec::new(),
            linger_free: Vec::new(),
            sa: super::server::sockaddr(load.addr),
            period: load.rate.map_or(0.0, |r| 1e9 / r),
            response: LatencyHistogram::new(),
            uncorrected: LatencyHistogram::new(),
            connect: LatencyHistogram::new(),
            waiting: LatencyHistogram::new(),
            ok: 0,
            failures: [0; 6],
            first_error: Default::default(),
            late: 0,
            last: 0,
            cpu_ns: 0,
            unpublished: 0,
            tx,
            iv_k: 0,
            iv_end: 0,
            iv_count,
            iv: Acc::new(),
            fatal: None,
        })
    }

    fn into_out(mut self) -> ThreadOut {
        for i in 0..self.conns.len() {
            self.close(i);
        }
        for k in 0..self.lingering.len() {
            self.unlinger(k);
        }
        self.st.completed.fetch_add(self.unpublished, Ordering::Relaxed);
        ThreadOut {
            response: std::mem::take(&mut self.response),
            uncorrected: std::mem::take(&mut self.uncorrected),
            connect: std::mem::take(&mut self.connect),
            waiting: std::mem::take(&mut self.waiting),
            ok: self.ok,
            failures: self.failures,
            first_error: std::mem::take(&mut self.first_error),
            late: self.late,
            last: self.last,
            cpu_ns: self.cpu_ns,
        }
    }

    fn run(&mut self) -> Result<(), LiveError> {
        self.iv_end = self.load.interval_ns.map_or(u64::MAX, |iv| self.t0 + iv);
        let mut next_sweep = now_ns() + SWEEP_NS;
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
        loop {
            while let Some(i) = self.ready.pop() {
                // A slot free since the start (or a failure) could send from then.
                let free = self.conns[i].free_at.max(self.t0);
                self.next(i, free, now_ns());
                if let Some(e) = self.fatal.take() {
                    return Err(e);
                }
            }
            if self.active == 0 {
                break;
            }
            let due = self.heap.peek().map_or(u64::MAX, |r| r.0 .0);
            self.arm(due.min(next_sweep).min(self.iv_end));
            // SAFETY: events is a writable array of events.len() entries.
            let n = unsafe { libc::epoll_wait(self.ep.as_raw_fd(), events.as_mut_ptr(), events.len() as i32, -1) };
            if n < 0 {
                if errno() == libc::EINTR {
                    continue;
                }
                return Err(LiveError::last_os("epoll_wait", "check the kernel"));
            }
            for ev in &events[..n as usize] {
                let (flags, token) = (ev.events, ev.u64);
                if token == TIMER {
                    let mut b = [0u8; 8];
                    // SAFETY: reading 8 bytes from our timerfd into b (clears its expiry count).
                    unsafe { libc::read(self.tfd.as_raw_fd(), b.as_mut_ptr().cast(), 8) };
                    continue;
                }
                if token & LINGER != 0 {
                    self.drain((token & !LINGER) as usize);
                    continue;
                }
                let (i, gen) = ((token & 0xffff_ffff) as usize, (token >> 32) as u32);
                if i < self.conns.len() && self.conns[i].gen == gen && self.conns[i].fd >= 0 {
                    self.on_event(i, flags);
                }
            }
            let now = now_ns();
            while let Some(&Reverse((due, i))) = self.heap.peek() {
                if due > now {
                    break;
                }
                self.heap.pop();
                if self.conns[i].phase == Phase::Scheduled {
                    self.send(i, self.conns[i].due, now);
                }
            }
            if now >= next_sweep {
                next_sweep = now + SWEEP_NS;
                if self.st.abort.load(Ordering::Relaxed) {
                    return Ok(());
                }
                self.sweep(now);
            }
            self.advance(now);
            if let Some(e) = self.fatal.take() {
                return Err(e);
            }
        }
        // A soak's intervals end at its end, whatever is still in flight;
        // a stopped one keeps only the intervals that ended before the stop.
        if let End::For(t) = self.load.end {
            let aborted = self.st.abort.load(Ordering::Relaxed);
            self.advance(if aborted { now_ns() } else { self.t0 + t });
        }
        Ok(())
    }

    fn arm(&mut self, at: u64) {
        if at == self.armed {
            return;
        }
        self.armed = at;
        let ts = |ns: u64| libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        };
        let spec = libc::itimerspec { it_interval: ts(0), it_value: ts(at.max(1)) };
        // SAFETY: valid timerfd and itimerspec; no old value wanted.
        unsafe { libc::timerfd_settime(self.tfd.as_raw_fd(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
    }

    /// Start slot i's next request, schedule it, or retire the slot; `free`:
    /// when the slot became free (its previous response completed).
    fn next(&mut self, i: usize, free: u64, now: u64) {
        let c = &mut self.conns[i];
        c.phase = Phase::Idle;
        c.retried = false;
        if self.st.abort.load(Ordering::Relaxed) {
            return self.retire(i);
        }
        let due = if self.load.rate.is_some() {
            let j = c.next_seq;
            if let End::Requests(n) = self.load.end {
                if j >= n {
                    return self.retire(i);
                }
            }
            let due = self.t0 + (j as f64 * self.period) as u64;
            if let End::For(t) = self.load.end {
                if due >= self.t0 + t {
                    return self.retire(i);
                }
            }
            c.next_seq += self.load.concurrency as u64;
            due
        } else {
            match self.load.end {
                End::Requests(_) => {
                    if self
                        .st
                        .remaining
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |r| r.checked_sub(1))
                        .is_err()
                    {
                        return self.retire(i);
                    }
                }
                End::For(t) => {
                    if now >= self.t0 + t {
                        return self.retire(i);
                    }
                }
            }
            // Closed loop: due when the slot became free (or its back-off ends).
            c.not_before.max(free)
        };
        if due > now {
            c.phase = Phase::Scheduled;
            c.due = due;
            self.heap.push(Reverse((due, i)));
        } else {
            self.send(i, due, now);
        }
    }

    fn retire(&mut self, i: usize) {
        self.close(i);
        self.conns[i].phase = Phase::Done;
        self.active -= 1;
    }

    fn close(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if c.fd >= 0 {
            // SAFETY: our own socket; closing also drops it from the epoll set.
            unsafe { libc::close(c.fd) };
            c.fd = -1;
        }
    }

    fn send(&mut self, i: usize, due: u64, now: u64) {
        let open = self.load.rate.is_some();
        let c = &mut self.conns[i];
        c.due = due;
        // Closed loop: from when it could be sent, so the client's own delay
        // in getting to it is part of its time (ab's too), as Little's law wants.
        c.start = if open { now } else { due.min(now) };
        c.deadline = now + self.load.timeout_ns;
        c.first = 0;
        c.wrote = 0;
        c.resp.reset();
        if open && now > due + LATE_NS {
            self.late += 1;
        }
        if c.fd < 0 {
            self.connect(i);
        } else {
            c.reused = true;
            c.connected = now;
            self.write(i);
        }
    }

    fn connect(&mut self, i: usize) {
        let (family, sa, len) = self.sa;
        // SAFETY: plain socket(2) call.
        let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            let e = errno();
            if e == libc::EMFILE || e == libc::ENFILE {
                self.fatal = Some(LiveError::os(
                    "opening a client socket",
                    e,
                    "too many open files: raise ulimit -n (RLIMIT_NOFILE) or lower concurrency=",
                ));
                return self.retire(i);
            }
            return self.fail(i, Fail::Other, format!("socket: {}", crate::error::errno_text(e)));
        }
        let one: libc::c_int = 1;
        // SAFETY: our own socket; valid option pointer and length.
        unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        let c = &mut self.conns[i];
        c.fd = fd;
        c.gen = c.gen.wrapping_add(1) & 0x7fff_ffff;
        c.reused = false;
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: (u64::from(c.gen) << 32) | i as u64,
        };
        // SAFETY: valid epoll and socket descriptors and event.
        if unsafe { libc::epoll_ctl(self.ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
            let e = errno();
            return self.fail(i, Fail::Other, format!("epoll_ctl: {}", crate::error::errno_text(e)));
        }
        // SAFETY: sa is a valid socket address of len bytes.
        let r = unsafe { libc::connect(fd, (&sa as *const libc::sockaddr_storage).cast(), len) };
        if r == 0 {
            self.conns[i].connected = now_ns();
            return self.write(i);
        }
        let e = errno();
        if e == libc::EINPROGRESS {
            self.conns[i].phase = Phase::Connecting;
            return;
        }
        let hint = if e == libc::EADDRNOTAVAIL {
            " (no local port left: use keepalive=on, or widen net.ipv4.ip_local_port_range)"
        } else {
            ""
        };
        self.fail(
            i,
            Fail::of_errno(e),
            format!("connect to {}: {}{hint}", self.load.addr, crate::error::errno_text(e)),
        );
    }

    fn on_event(&mut self, i: usize, flags: u32) {
        let out = flags & (libc::EPOLLOUT | libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0;
        let inp = flags & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0;
        match self.conns[i].phase {
            Phase::Connecting if out => {
                let mut err: libc::c_int = 0;
                let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
                // SAFETY: valid socket, option pointer and length.
                unsafe {
                    libc::getsockopt(
                        self.conns[i].fd,
                        libc::SOL_SOCKET,
                        libc::SO_ERROR,
                        (&mut err as *mut libc::c_int).cast(),
                        &mut len,
                    )
                };
                if err == 0 {
                    self.conns[i].connected = now_ns();
                    self.write(i);
                } else {
                    let msg = format!("connect to {}: {}", self.load.addr, crate::error::errno_text(err));
                    self.fail(i, Fail::of_errno(err), msg);
                }
            }
            Phase::Writing if out => self.write(i),
            Phase::Reading if inp => self.read(i),
            // The server closed a kept-alive connection between requests: not a failure.
            Phase::Idle | Phase::Scheduled
                if flags & (libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0 =>
            {
                self.close(i)
            }
            _ => {}
        }
    }

    fn write(&mut self, i: usize) {
        let req = &self.load.request;
        loop {
            let c = &mut self.conns[i];
            let rest = &req[c.wrote..];
            // SAFETY: rest is a readable slice; MSG_NOSIGNAL: EPIPE instead of SIGPIPE.
            let n = unsafe { libc::send(c.fd, rest.as_ptr().cast(), rest.len(), libc::MSG_NOSIGNAL) };
            if n > 0 {
                c.wrote += n as usize;
                if c.wrote == req.len() {
                    c.written = now_ns();
                    c.phase = Phase::Reading;
                    return;
                }
                continue;
            }
            let e = errno();
            match e {
                libc::EINTR => continue,
                libc::EAGAIN => {
                    c.phase = Phase::Writing;
                    return;
                }
                _ if c.reused && !c.retried => return self.retry(i),
                _ => return self.fail(i, Fail::of_errno(e), format!("send: {}", crate::error::errno_text(e))),
            }
        }
    }

    /// A kept-alive connection the server had closed: once more, on a fresh one.
    fn retry(&mut self, i: usize) {
        self.close(i);
        self.conns[i].retried = true;
        self.conns[i].first = 0;
        self.conns[i].wrote = 0;
        self.conns[i].resp.reset();
        self.connect(i);
    }

    fn read(&mut self, i: usize) {
        loop {
            let fd = self.conns[i].fd;
            // SAFETY: rbuf is a writable buffer of rbuf.len() bytes.
            let n = unsafe { libc::recv(fd, self.rbuf.as_mut_ptr().cast(), self.rbuf.len(), 0) };
            if n > 0 {
                let now = now_ns();
                let c = &mut self.conns[i];
                if c.first == 0 {
                    c.first = now;
                }
                match c.resp.feed(&self.rbuf[..n as usize]) {
                    Ok(Some(keep)) => return self.finish(i, now, keep, false),
                    Ok(None) => continue,
                    Err(msg) => return self.fail(i, Fail::Other, msg),
                }
            }
            let e = if n == 0 { 0 } else { errno() };
            match e {
                libc::EINTR => continue,
                libc::EAGAIN => return,
                _ => {}
            }
            let c = &self.conns[i];
            if n == 0 && c.resp.at_eof() {
                return self.finish(i, now_ns(), false, true);
            }
            if !c.resp.any && c.reused && !c.retried {
                return self.retry(i);
            }
            return match (n, c.resp.any) {
                (0, false) => self.fail(i, Fail::Reset, "the server closed the connection without a response".into()),
                (0, true) => self.fail(i, Fail::ShortBody, "the server closed the connection mid-response".into()),
                (_, true) if Fail::of_errno(e) == Fail::Reset => {
                    self.fail(i, Fail::ShortBody, format!("recv mid-response: {}", crate::error::errno_text(e)))
                }
                _ => self.fail(i, Fail::of_errno(e), format!("recv: {}", crate::error::errno_text(e))),
            };
        }
    }

    fn finish(&mut self, i: usize, now: u64, keep: bool, at_eof: bool) {
        let open = self.load.rate.is_some();
        let c = &self.conns[i];
        let status = c.resp.status;
        self.last = self.last.max(now);
        if (200..300).contains(&status) {
            self.ok += 1;
            let total = now - if open { c.due.min(c.start) } else { c.start };
            self.response.record(total);
            if open {
                self.uncorrected.record(now - c.start);
            }
            self.connect.record(if c.reused { 0 } else { c.connected.saturating_sub(c.start) });
            self.waiting.record(c.first.saturating_sub(c.written));
            self.count(now, Some(total));
        } else {
            let path = self.request_path();
            self.note(Fail::Non2xx, format!("HTTP {status} for {path}"));
            self.count(now, None);
        }
        if !(keep && self.load.keepalive) {
            if at_eof || keep {
                // Closed already, or kept open by a server we asked to close: our close.
                self.close(i);
            } else {
                self.linger(i, now);
            }
        }
        // The slot's next request goes now, not after the other events of this wake-up.
        self.next(i, now, now_ns());
    }

    /// Hand slot i's socket, whose response is recorded, to the lingering
    /// list until the server closes it (as ab waits for it); the slot is free.
    fn linger(&mut self, i: usize, now: u64) {
        // A server that has not closed the slot's previous socket by now gets our close.
        if let Some(k) = self.conns[i].linger {
            self.unlinger(k);
        }
        let fd = std::mem::replace(&mut self.conns[i].fd, -1);
        let k = self.linger_free.pop().unwrap_or_else(|| {
            self.lingering.push(None);
            self.lingering.len() - 1
        });
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: LINGER | k as u64,
        };
        // SAFETY: valid epoll and socket descriptors and event.
        if unsafe { libc::epoll_ctl(self.ep.as_raw_fd(), libc::EPOLL_CTL_MOD, fd, &mut ev) } != 0 {
            // SAFETY: our own socket, no longer referenced by the slot.
            unsafe { libc::close(fd) };
            self.linger_free.push(k);
            return;
        }
        self.lingering[k] = Some((fd, now + self.load.timeout_ns, i));
        self.conns[i].linger = Some(k);
        self.drain(k);
    }

    /// Read (and drop) what a lingering socket still receives; close it at the server's close.
    fn drain(&mut self, k: usize) {
        let Some(Some((fd, _, _))) = self.lingering.get(k).copied() else { return };
        loop {
            // SAFETY: rbuf is a writable buffer of rbuf.len() bytes.
            let n = unsafe { libc::recv(fd, self.rbuf.as_mut_ptr().cast(), self.rbuf.len(), 0) };
            if n > 0 {
                continue;
            }
            if n < 0 {
                match errno() {
                    libc::EINTR => continue,
                    libc::EAGAIN => return,
                    _ => {}
                }
            }
            return self.unlinger(k);
        }
    }

    fn unlinger(&mut self, k: usize) {
        if let Some((fd, _, slot)) = self.lingering[k].take() {
            // SAFETY: our own socket; closing also drops it from the epoll set.
            unsafe { libc::close(fd) };
            self.linger_free.push(k);
            self.conns[slot].linger = None;
        }
    }

    fn request_path(&self) -> String {
        let r = String::from_utf8_lossy(&self.load.request);
        r.split(' ').nth(1).unwrap_or("/").to_string()
    }

    fn note(&mut self, class: Fail, msg: String) {
        let k = CLASSES.iter().position(|c| *c == class).expect("a class");
        self.failures[k] += 1;
        if self.first_error[k].is_none() {
            self.first_error[k] = Some(msg);
        }
    }

    /// A request ended (ok: its response time) at `now`.
    fn count(&mut self, now: u64, ok: Option<u64>) {
        self.unpublished += 1;
        if self.unpublished >= 32 {
            self.st.completed.fetch_add(self.unpublished, Ordering::Relaxed);
            self.unpublished = 0;
        }
        if self.load.interval_ns.is_some() {
            self.advance(now);
            if self.iv_k < self.iv_count && now < self.iv_end {
                match ok {
                    Some(ns) => {
                        self.iv.ok += 1;
                        self.iv.hist.record(ns);
                    }
                    None => self.iv.fail += 1,
                }
            }
        }
    }

    /// Close the soak intervals that ended by `now`.
    fn advance(&mut self, now: u64) {
        let Some(iv) = self.load.interval_ns else { return };
        while now >= self.iv_end && self.iv_k < self.iv_count {
            let acc = std::mem::replace(&mut self.iv, Acc::new());
            let _ = self.tx.send(Msg::Interval(self.iv_k, acc));
            self.iv_k += 1;
            self.iv_end += iv;
        }
        if self.iv_k >= self.iv_count {
            self.iv_end = u64::MAX;
        }
    }

    fn fail(&mut self, i: usize, class: Fail, msg: String) {
        let now = now_ns();
        self.last = self.last.max(now);
        self.note(class, msg);
        self.count(now, None);
        self.close(i);
        let c = &mut self.conns[i];
        c.phase = Phase::Idle;
        c.free_at = now;
        if class == Fail::Refused && matches!(self.load.end, End::For(_)) {
            c.not_before = now + BACKOFF_NS;
        }
        self.ready.push(i);
    }

    fn sweep(&mut self, now: u64) {
        for k in 0..self.lingering.len() {
            // The response was recorded; a server slow to close is not a failure.
            if self.lingering[k].is_some_and(|(_, deadline, _)| now >= deadline) {
                self.unlinger(k);
            }
        }
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            if matches!(c.phase, Phase::Connecting | Phase::Writing | Phase::Reading) && now >= c.deadline {
                let what = match c.phase {
                    Phase::Connecting => "connecting",
                    Phase::Writing => "sending the request",
                    _ => "waiting for the response",
                };
                let msg = format!("no response within {} ms ({what})", self.load.timeout_ns / 1_000_000);
                self.fail(i, Fail::Timeout, msg);
            }
        }
    }
}

/// An HTTP/1.x response read incrementally: head with httparse, then the
/// body by Content-Length, chunks, or until the connection closes.
#[derive(Debug)]
pub(crate) struct Resp {
    head: Vec<u8>,
    pub status: u16,
    keep: bool,
    body: Body,
    /// Any byte of this response arrived.
    pub any: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Body {
    Head,
    Length(u64),
    Chunked(Chunk),
    UntilClose,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Chunk {
    Size(Vec<u8>),
    Data(u64),
    /// CR LF after a chunk's data; how many of the two bytes were seen.
    DataEnd(u8),
    Trailer(Vec<u8>),
}

/// A chunk-size or trailer line longer than this is refused.
const LINE_CAP: usize = 4096;

struct HeadInfo {
    len: usize,
    status: u16,
    keep: bool,
    body: Body,
}

impl Resp {
    pub(crate) fn new() -> Resp {
        Resp { head: Vec::new(), status: 0, keep: false, body: Body::Head, any: false }
    }

    pub(crate) fn reset(&mut self) {
        self.head.clear();
        self.status = 0;
        self.keep = false;
        self.body = Body::Head;
        self.any = false;
    }

    /// The connection closed: complete if the body runs to the close.
    pub(crate) fn at_eof(&self) -> bool {
        self.body == Body::UntilClose
    }

    /// Feed received bytes: `Some(keep-alive)` when the response is complete.
    pub(crate) fn feed(&mut self, data: &[u8]) -> Result<Option<bool>, String> {
        self.any = true;
        if self.body != Body::Head {
            return self.body_bytes(data);
        }
        let from_head = !self.head.is_empty();
        if from_head {
            self.head.extend_from_slice(data);
        }
        let parsed = parse_head(if from_head { &self.head } else { data })?;
        let Some(h) = parsed else {
            if !from_head {
                self.head.extend_from_slice(data);
            }
            if self.head.len() > HEAD_CAP {
                return Err(format!("response head longer than {} KiB", HEAD_CAP >> 10));
            }
            return Ok(None);
        };
        let rest: Vec<u8> = if from_head { self.head[h.len..].to_vec() } else { Vec::new() };
        let rest: &[u8] = if from_head { &rest } else { &data[h.len..] };
        self.head.clear();
        // An interim response (100 Continue): the real one follows.
        if (100..200).contains(&h.status) && h.status != 101 {
            return if rest.is_empty() { Ok(None) } else { self.feed(rest) };
        }
        self.status = h.status;
        self.keep = h.keep;
        self.body = h.body;
        if self.body == Body::Length(0) {
            return Ok(Some(self.keep && rest.is_empty()));
        }
        self.body_bytes(rest)
    }

    fn body_bytes(&mut self, data: &[u8]) -> Result<Option<bool>, String> {
        let mut i = 0;
        loop {
            match &mut self.body {
                Body::Head => unreachable!("the head is parsed first"),
                Body::UntilClose => return Ok(None),
                Body::Length(n) => {
                    let take = (*n).min((data.len() - i) as u64);
                    *n -= take;
                    i += take as usize;
                    if *n == 0 {
                        // Bytes beyond the response: the connection cannot be reused.
                        return Ok(Some(self.keep && i == data.len()));
                    }
                    return Ok(None);
                }
                Body::Chunked(state) => {
                    if i >= data.len() {
                        return Ok(None);
                    }
                    match state {
                        Chunk::Size(line) | Chunk::Trailer(line) => {
                            let nl = data[i..].iter().position(|&b| b == b'\n');
                            let end = nl.map_or(data.len(), |p| i + p);
                            line.extend_from_slice(&data[i..end]);
                            if line.len() > LINE_CAP {
                                return Err("chunk line too long".into());
                            }
                            if nl.is_none() {
                                return Ok(None);
                            }
                            i = end + 1;
                            let text = String::from_utf8_lossy(line).trim_end_matches('\r').to_string();
                            line.clear();
                            if matches!(state, Chunk::Trailer(_)) {
                                if text.is_empty() {
                                    return Ok(Some(self.keep && i == data.len()));
                                }
                                continue;
                            }
                            let hex = text.split(';').next().unwrap_or("").trim();
                            let n = u64::from_str_radix(hex, 16).map_err(|_| format!("bad chunk size '{hex}'"))?;
                            *state = if n == 0 { Chunk::Trailer(Vec::new()) } else { Chunk::Data(n) };
                        }
                        Chunk::Data(n) => {
                            let take = (*n).min((data.len() - i) as u64);
                            *n -= take;
                            i += take as usize;
                            if *n == 0 {
                                *state = Chunk::DataEnd(0);
                            }
                        }
                        Chunk::DataEnd(seen) => {
                            match (data[i], *seen) {
                                (b'\r', 0) => *seen = 1,
                                (b'\n', _) => *state = Chunk::Size(Vec::new()),
                                _ => return Err("chunk data not followed by CRLF".into()),
                            }
                            i += 1;
                        }
                    }
                }
            }
        }
    }
}

fn parse_head(buf: &[u8]) -> Result<Option<HeadInfo>, String> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut r = httparse::Response::new(&mut headers);
    let len = match r.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("malformed response head: {e}")),
    };
    let status = r.code.unwrap_or(0);
    let v11 = r.version == Some(1);
    let (mut close, mut keep_alive, mut chunked, mut length) = (false, false, false, None);
    for h in r.headers.iter() {
        let v = String::from_utf8_lossy(h.value).to_ascii_lowercase();
        if h.name.eq_ignore_ascii_case("connection") {
            close |= v.split(',').any(|t| t.trim() == "close");
            keep_alive |= v.split(',').any(|t| t.trim() == "keep-alive");
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = v.split(',').next_back().is_some_and(|t| t.trim() == "chunked");
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let n = v.trim().parse::<u64>().map_err(|_| format!("bad Content-Length '{}'", v.trim()))?;
            if length.is_some_and(|l| l != n) {
                return Err("conflicting Content-Length headers".into());
            }
            length = Some(n);
        }
    }
    let keep = if v11 { !close } else { keep_alive && !close };
    let body = if (100..200).contains(&status) || status == 204 || status == 304 {
        Body::Length(0)
    } else if chunked {
        Body::Chunked(Chunk::Size(Vec::new()))
    } else if let Some(n) = length {
        Body::Length(n)
    } else {
        Body::UntilClose
    };
    let keep = keep && body != Body::UntilClose;
    Ok(Some(HeadInfo { len, status, keep, body }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(resp: &[u8], step: usize) -> (Result<Option<bool>, String>, u16) {
        let mut r = Resp::new();
        let mut last = Ok(None);
        for part in resp.chunks(step.max(1)) {
            last = r.feed(part);
            if !matches!(last, Ok(None)) {
                break;
            }
        }
        (last, r.status)
    }

    #[test]
    fn responses_complete_by_length_chunks_or_close_in_any_split() {
        let cl = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=1\r\nhello\r\n0\r\nX-T: 1\r\n\r\n";
        let close = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi";
        let ten = b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi";
        let ten_ka = b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nhi";
        let not_found = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
        let interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
        for step in [1, 2, 3, 7, 1000] {
            assert_eq!(whole(cl, step), (Ok(Some(true)), 200), "step {step}");
            assert_eq!(whole(chunked, step), (Ok(Some(true)), 200), "step {step}");
            assert_eq!(whole(close, step), (Ok(Some(false)), 200), "step {step}");
            assert_eq!(whole(ten, step), (Ok(Some(false)), 200), "step {step}");
            assert_eq!(whole(ten_ka, step), (Ok(Some(true)), 200), "step {step}");
            assert_eq!(whole(not_found, step), (Ok(Some(true)), 404), "step {step}");
            assert_eq!(whole(interim, step), (Ok(Some(true)), 204), "step {step}");
        }
        // Incomplete: more is needed, and the close does not complete it.
        let mut r = Resp::new();
        assert_eq!(r.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc"), Ok(None));
        assert!(r.any && !r.at_eof());
        // No length: the body runs to the close.
        let mut r = Resp::new();
        assert_eq!(r.feed(b"HTTP/1.1 200 OK\r\n\r\nabc"), Ok(None));
        assert!(r.at_eof());
        // Extra bytes after the body: complete, not reusable.
        assert_eq!(whole(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxy", 1000), (Ok(Some(false)), 200));
    }

    #[test]
    fn malformed_responses_are_errors() {
        assert!(whole(b"garbage\r\n\r\n", 100).0.is_err());
        assert!(whole(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", 100).0.is_err());
        assert!(whole(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 100).0.is_err());
        assert!(whole(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 100).0.is_err());
        assert!(whole(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab", 100).0.is_err());
        let mut r = Resp::new();
        let long = format!("HTTP/1.1 200 OK\r\nX: {}", "a".repeat(HEAD_CAP + 10));
        assert!(r.feed(long.as_bytes()).is_err());
    }

    /// A server that says `Connection: close` but never closes: the client
    /// must not wait for it (its slots go on) nor pile up sockets (at most
    /// one lingering per slot, then its own close).
    #[test]
    fn a_server_that_does_not_close_neither_stalls_nor_floods_the_client() {
        use std::io::{Read, Write};
        const C: usize = 2;
        const N: u64 = 50;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let mut held: Vec<std::net::TcpStream> = Vec::new();
            let mut most_open = 0;
            for _ in 0..N {
                let (mut c, _) = l.accept().unwrap();
                // Those the client closed read EOF at once.
                held.retain(|h| {
                    h.set_nonblocking(true).unwrap();
                    !matches!((&*h).read(&mut [0u8; 64]), Ok(0))
                });
                let mut buf = [0u8; 1024];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    let n = c.read(&mut buf).unwrap();
                    assert!(n > 0, "the client closed before its request");
                    got.extend_from_slice(&buf[..n]);
                }
                c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi").unwrap();
                held.push(c);
                most_open = most_open.max(held.len());
            }
            (held, most_open)
        });
        let load = Load {
            addr,
            request: b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec(),
            concurrency: C,
            keepalive: false,
            timeout_ns: 60_000_000_000,
            rate: None,
            end: End::Requests(N),
            interval_ns: None,
            threads: 1,
            cpus: None,
        };
        let out = run(&load, &mut |_| Ok(())).unwrap();
        assert_eq!((out.ok, out.failed()), (N, 0));
        let (held, most_open) = server.join().unwrap();
        assert!(most_open <= 2 * C, "{most_open} sockets open at once for {C} slots");
        // Every socket closed by the client by the end, none left open.
        for mut h in held {
            h.set_nonblocking(false).unwrap();
            h.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
            assert_eq!(h.read(&mut [0u8; 64]).unwrap(), 0);
        }
    }

    #[test]
    fn intervals_finish_when_every_thread_reported() {
        let mut m = Merger::new(2, 1_000);
        let acc = |ok, fail, lat: &[u64]| {
            let mut a = Acc { ok, fail, hist: LatencyHistogram::new() };
            lat.iter().for_each(|&l| a.hist.record(l));
            a
        };
        m.add(0, acc(2, 0, &[100, 300]));
        assert!(m.points.is_empty(), "one thread of two");
        m.add(1, acc(0, 1, &[]));
        m.add(0, acc(1, 1, &[200]));
        assert_eq!(m.points.len(), 1);
        let p = &m.points[0];
        assert_eq!((p.t_ns, p.pages, p.failures), (1_000, 3, 1));
        assert!((p.mean_ns.unwrap() - 200.0).abs() < 2.0);
        m.add(1, acc(0, 0, &[]));
        assert_eq!(m.points[1].mean_ns, None, "an interval without responses has no mean");
    }
}
