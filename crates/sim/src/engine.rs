//! The discrete-event engine: integer-ns time, an event queue ordered by
//! `(time, seq)`, N CPUs with a periodic tick, task programs, channels and
//! conditions, and the metrics. Pure and deterministic: no clock, no I/O,
//! one seeded RNG, no hash-ordered containers.
//!
//! A CPU runs its current task's program: instantaneous steps (send, recv,
//! fork, ...) execute at once; a `run` step makes the CPU busy, and its end
//! is a `Done` event. Preemption requests (need_resched) are honoured at the
//! current instant, after the event that raised them: the model has no
//! kernel-mode time, so "at the next return to user mode" is "now".
//! Context-switch and migration costs are CPU time charged to the incoming
//! task before it resumes its program. The scheduler's own work (the
//! operations each decision counts, priced by [`crate::cost`]) is CPU time
//! charged to the CPU making the decision and delays the wake-ups it
//! handles; with a zero cost table none of that code runs.

use crate::cost::{CostTable, OpCounter};
use crate::policy::rt::RtLayer;
use crate::policy::{CpuView, Ctx, Policy, Stop, TaskId, Wake, WakeKind};
use crate::program::{compile, Class, Dur, Op};
use crate::timeline::{Recorder, Timeline};
use crate::workload::{WorkloadDef, MAX_TASKS};
use crate::{Progress, SimOptions};
use rand::Rng;
use rand_pcg::Pcg64;
use schedlab_core::LatencyHistogram;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

mod fast;
mod hist;
use fast::FastState;
use hist::BucketCounts;

/// The policy's [`Ctx`] over the engine's fields. A macro, not a method:
/// the context borrows `view`, `rng`, `kick` and `touched_all` while
/// `self.policy` is borrowed mutably beside it.
macro_rules! policy_cx {
    ($e:ident, $now:expr) => {
        Ctx {
            now: $now,
            hz: $e.opts.hz,
            cpus: &$e.view,
            rng: &mut $e.rng,
            kick: &mut $e.kick,
            touched_all: &mut $e.touched_all,
            ops: &$e.ops,
        }
    };
}

/// Events. `Kick` is a reschedule IPI reaching `cpu`; it acts only if the
/// CPU still runs `expect` (the task it ran when the IPI was sent, None:
/// idle). `DlTimer` is a SCHED_DEADLINE replenishment timer, stale unless
/// `gen` is still the task's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EvKind {
    Tick(u32),
    Done { cpu: u32, gen: u32 },
    Wake { task: u32, gen: u32 },
    RtPeriod,
    Kick { cpu: u32, expect: Option<TaskId> },
    DlTimer { task: u32, gen: u32 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ev {
    time: u64,
    seq: u64,
    kind: EvKind,
}

impl Ord for Ev {
    fn cmp(&self, o: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap and we want the earliest first.
        (o.time, o.seq).cmp(&(self.time, self.seq))
    }
}
impl PartialOrd for Ev {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// The pending events. Each CPU has at most one live run-step completion and
/// one tick, so those live in fixed slots (a newer `Done` overwrites an older
/// one, which was stale anyway: its CPU's `gen` moved on); timed wakeups and
/// the RT period timer go to a heap whose top is one more slot. The earliest
/// key is found by a linear scan of the slots for up to `SCAN_SLOTS` slots
/// (cheapest for the usual few CPUs), else by a tournament tree (O(log
/// ncpus) per update). No allocation, no stale entries to pop.
///
/// Order: by time; at one instant, run-step completions first, by CPU
/// number, then ticks and timers in push order (`seq`). Completions are
/// ordered by CPU rather than by push order so that a CPU's chain of
/// completions does not depend on when other CPUs pushed theirs: that is
/// what lets [`fast`] replay one CPU's chain on its own.
struct Queue {
    ncpus: usize,
    /// Slot keys `time << 64 | seq` (`u128::MAX` = empty): `[done 0..n, tick 0..n, timer top]`, padded.
    keys: Vec<u128>,
    /// `gen` of each CPU's pending `Done`.
    done_gen: Vec<u32>,
    /// Tournament tree (empty when scanning): node k holds the slot with the
    /// smaller key of its children; leaves at `m + slot`.
    tree: Vec<u32>,
    m: usize,
    /// Scanning only: the slot with the smallest key among ticks and the
    /// timer top. Those change once a tick; completions change every event,
    /// so a scan compares the `ncpus` completion keys with this one.
    tmin: usize,
    timers: BinaryHeap<Ev>,
    seq: u64,
}

const EMPTY: u128 = u128::MAX;
const SCAN_SLOTS: usize = 16;
/// Set in the key of ticks and timers: after every completion of the same instant.
const TIMER_BIT: u64 = 1 << 63;

/// Queue key of CPU `cpu`'s run-step completion at `time`.
fn done_key(time: u64, cpu: usize) -> u128 {
    (time as u128) << 64 | cpu as u128
}

impl Queue {
    fn new(ncpus: usize) -> Self {
        let slots = 2 * ncpus + 1;
        let m = if slots <= SCAN_SLOTS { slots } else { slots.next_power_of_two() };
        let mut tree = Vec::new();
        if slots > SCAN_SLOTS {
            tree = vec![0u32; 2 * m];
            for i in 0..m {
                tree[m + i] = i as u32;
            }
            for k in (1..m).rev() {
                tree[k] = tree[2 * k];
            }
        }
        let keys = vec![EMPTY; m];
        Queue { ncpus, keys, done_gen: vec![0; ncpus], tree, m, tmin: ncpus, timers: BinaryHeap::new(), seq: 0 }
    }

    /// Set a completion slot (`slot < ncpus`): the per-event case, kept short.
    #[inline]
    fn set_done(&mut self, slot: usize, key: u128) {
        self.keys[slot] = key;
        if !self.tree.is_empty() {
            self.update_tree(slot);
        }
    }

    /// Set any slot; for a tick or the timer top, keep `tmin` up to date.
    #[inline]
    fn set(&mut self, slot: usize, key: u128) {
        self.keys[slot] = key;
        if !self.tree.is_empty() {
            self.update_tree(slot);
        } else if slot >= self.ncpus {
            self.tmin = Self::scan(&self.keys, self.ncpus, 2 * self.ncpus + 1);
        }
    }

    fn update_tree(&mut self, slot: usize) {
        let mut k = (self.m + slot) / 2;
        while k > 0 {
            let (a, b) = (self.tree[2 * k], self.tree[2 * k + 1]);
            self.tree[k] = if self.keys[b as usize] < self.keys[a as usize] { b } else { a };
            k /= 2;
        }
    }

    fn timer_key(time: u64, seq: u64) -> u128 {
        (time as u128) << 64 | (TIMER_BIT | seq) as u128
    }

    /// CPU `cpu`'s run-step completion of generation `gen` at `time`: the
    /// per-event push, without `push`'s dispatch.
    #[inline]
    fn push_done(&mut self, time: u64, cpu: usize, gen: u32) {
        self.done_gen[cpu] = gen;
        self.set_done(cpu, done_key(time, cpu));
    }

    fn push(&mut self, time: u64, kind: EvKind) {
        match kind {
            EvKind::Done { cpu, gen } => self.push_done(time, cpu as usize, gen),
            EvKind::Tick(c) => {
                self.seq += 1;
                self.set(self.ncpus + c as usize, Self::timer_key(time, self.seq));
            }
            _ => {
                self.seq += 1;
                self.timers.push(Ev { time, seq: self.seq, kind });
                self.sync_timer_slot();
            }
        }
    }

    fn sync_timer_slot(&mut self) {
        let k = self.timers.peek().map_or(EMPTY, |e| Self::timer_key(e.time, e.seq));
        if self.keys[2 * self.ncpus] != k {
            self.set(2 * self.ncpus, k);
        }
    }

    fn min_slot(&self) -> usize {
        if !self.tree.is_empty() {
            return self.tree[1] as usize;
        }
        // Completion keys never equal tick or timer keys (TIMER_BIT), so
        // only EMPTY ties, and which empty slot wins does not matter.
        let (mut best, mut best_key) = (self.tmin, self.keys[self.tmin]);
        for (i, &k) in self.keys[..self.ncpus].iter().enumerate() {
            if k < best_key {
                (best, best_key) = (i, k);
            }
        }
        best
    }

    /// The slot in `from..to` with the smallest key (the first among equals).
    fn scan(keys: &[u128], from: usize, to: usize) -> usize {
        let (mut best, mut best_key) = (from, keys[from]);
        for (i, &k) in keys[..to].iter().enumerate().skip(from + 1) {
            if k < best_key {
                (best, best_key) = (i, k);
            }
        }
        best
    }

    fn pop(&mut self) -> Option<Ev> {
        let slot = self.min_slot();
        let key = self.keys[slot];
        if key == EMPTY {
            return None;
        }
        let (time, seq) = ((key >> 64) as u64, key as u64 & !TIMER_BIT);
        let n = self.ncpus;
        let kind = if slot < n {
            self.set_done(slot, EMPTY);
            EvKind::Done { cpu: slot as u32, gen: self.done_gen[slot] }
        } else if slot < 2 * n {
            self.set(slot, EMPTY);
            EvKind::Tick((slot - n) as u32)
        } else {
            let ev = self.timers.pop().expect("timer slot mirrors the heap top");
            self.sync_timer_slot();
            return Some(ev);
        };
        Some(Ev { time, seq, kind })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    Runnable,
    Running,
    Blocked,
    Exited,
}

const NO_CPU: usize = usize::MAX;

struct Task {
    def: u32,
    /// Start of its program in `Engine::code`.
    code: u32,
    class: Class,
    nice: i32,
    pc: u32,
    loops: Vec<(u32, u64)>,
    /// CPU time left before the next program step may execute.
    busy: u64,
    state: St,
    /// CPU it last ran on (NO_CPU before it first runs).
    cpu: usize,
    woke_at: u64,
    woken: bool,
    queued_at: u64,
    parent: Option<TaskId>,
    cpu_ns: u64,
    sleep_gen: u32,
    release: Option<u64>,
    period: u64,
    /// Time noted by `Stamp` (creation, or the expiry a `Timer` woke it for).
    stamp: u64,
    /// Time of the previous `Lap`.
    lap: Option<u64>,
    /// Next expiry of its `Timer` (None: not armed).
    timer_next: Option<u64>,
    /// Run time given to the current period's job so far.
    job_work: u64,
    created: u64,
}

#[derive(Default, Clone)]
struct CpuSt {
    run_start: u64,
    gen: u32,
    need_resched: bool,
    /// The task that ran last, None after idling (for context-switch counting).
    prev: Option<TaskId>,
    busy_ns: u64,
    /// Scheduler work done while idle or about to switch, owed by the next
    /// task picked (costly runs only).
    debt: u64,
}

struct Chan {
    count: u64,
    cap: u64,
    receivers: VecDeque<TaskId>,
    senders: VecDeque<TaskId>,
}

/// Raw results of a run, turned into a BenchResult by `lib.rs`.
pub struct Stats {
    pub elapsed_ns: u64,
    pub finished: bool,
    pub events: u64,
    pub ctx_switches: u64,
    pub migrations: u64,
    pub messages: u64,
    /// Run-step completions replayed by the fast path (included in `events`).
    pub fast_events: u64,
    pub forks: u64,
    pub wake_rt: LatencyHistogram,
    /// Wake-ups of SCHED_DEADLINE tasks (not in `wake_rt`).
    pub wake_dl: LatencyHistogram,
    /// Per SCHED_DEADLINE task: its name and results.
    pub dl: Vec<(String, crate::policy::deadline::DlStats)>,
    pub wake_normal: LatencyHistogram,
    pub rq_wait: LatencyHistogram,
    /// Per task: (template index, name, class, nice, cpu ns, lifetime ns).
    pub tasks: Vec<(u32, String, Class, i32, u64, u64)>,
    /// Per deadline group: (name, met, missed).
    pub deadlines: Vec<(String, u64, u64)>,
    /// Per deadline group, in `deadlines`' order: its periods' latency and work.
    pub jobs: Vec<JobStats>,
    pub cpu_busy_ns: Vec<u64>,
    /// The workload's series (`WorkloadDef::series`), filled by `Record` and `Lap` steps.
    pub series: Vec<LatencyHistogram>,
    /// Timer expiries folded into a later one (`Timer` steps).
    pub timer_overruns: u64,
    /// CPU time charged for scheduler decisions (costly runs only).
    pub sched_ns: u64,
    /// Reschedule IPIs sent (costly runs only).
    pub ipis: u64,
    pub warnings: Vec<String>,
    /// Set when the run was stopped at a limit; its figures are not a result.
    pub abort: Option<Abort>,
}

/// A deadline group's periods as the live `interactive` benchmark books
/// them: each period's latency is the moment its job starts minus its
/// release, and a period skipped after an overrun is charged in full (the
/// moment the task got past it minus its release); its work counts as due
/// and not done (the work of the job that overran: exact for fixed work).
#[derive(Debug, Clone, Default)]
pub struct JobStats {
    pub latency: LatencyHistogram,
    pub due_ns: u64,
    pub done_ns: u64,
}

/// Book `k` skipped periods, whose latencies are `oldest`, `oldest - p`,
/// ...: each one up to a bound, beyond it the oldest (the max) and equal
/// runs at their midpoints, which keeps the sum (so the mean) and bounds the
/// work after a long overrun of a short period.
pub(crate) fn charge_skipped(h: &mut LatencyHistogram, oldest: u64, p: u64, k: u64) {
    const EACH: u64 = 4096;
    if k <= EACH {
        (0..k).for_each(|i| h.record(oldest - i * p));
        return;
    }
    h.record(oldest);
    let run = (k - 1).div_ceil(EACH);
    let mut i = 1;
    while i < k {
        let n = run.min(k - i);
        h.record_n(oldest - i * p - (n - 1) * p / 2, n);
        i += n;
    }
}

/// Why a run was stopped before its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abort {
    /// More events than `SimOptions::max_events`.
    Events,
    /// Forks would create more than [`MAX_TASKS`] tasks.
    Tasks,
}

/// Events between two progress reports (a few hundred a second at the
/// engine's speed: often enough for a bar, rare enough to cost nothing).
const PROGRESS_EVERY: u64 = 1 << 16;

pub struct Engine<'w> {
    opts: SimOptions,
    wl: &'w WorkloadDef,
    progs: Vec<Vec<Op>>,
    /// Every template's program, one after another: `Task::code` is where its
    /// own starts (one index per step instead of two).
    code: Vec<Op>,
    code_at: Vec<u32>,
    names: Vec<String>,
    now: u64,
    q: Queue,
    tasks: Vec<Task>,
    cpus: Vec<CpuSt>,
    view: Vec<CpuView>,
    policy: Box<dyn Policy>,
    rt: RtLayer,
    rng: Pcg64,
    kick: Vec<usize>,
    touched_all: bool,
    /// Operation counts of the decision under way.
    ops: OpCounter,
    cost: CostTable,
    /// Scheduler work costs something: the cost paths run.
    costly: bool,
    /// CPUs the decision under way sends a reschedule IPI.
    ipi_to: Vec<usize>,
    chans: Vec<Chan>,
    conds: Vec<Vec<TaskId>>,
    resched: VecDeque<usize>,
    live: usize,
    stop: bool,
    any_probe: bool,
    tick_ns: u64,
    spin: u64,
    timeline: Option<Recorder>,
    /// The workload has RT or deadline templates: without, the RT layer never has a task to pick.
    any_rt: bool,
    /// Per-switch latencies, drained into `st`'s histograms at the end (hist.rs).
    rq_wait: BucketCounts,
    wake_rt: BucketCounts,
    wake_dl: BucketCounts,
    wake_normal: BucketCounts,
    /// Fast-forward state (empty when `fast` is off).
    ff: FastState,
    fast: bool,
    /// Decisive events to process before trying to fast-forward again.
    ff_skip: u32,
    ff_backoff: u32,
    st: Stats,
    /// Where to add progress, if someone shows it.
    progress: Option<&'w Progress>,
    /// `st.events` at which to report progress or check the event limit next.
    next_check: u64,
    /// Simulated ns and events already added to `progress`.
    reported: (u64, u64),
}

/// Zero-time steps allowed at one instant before the engine declares a livelock.
const SPIN_LIMIT: u64 = 50_000_000;

impl<'w> Engine<'w> {
    pub fn new(opts: &SimOptions, wl: &'w WorkloadDef, policy: Box<dyn Policy>, rt: RtLayer) -> Self {
        let n = opts.cpus as usize;
        let timeline = opts.record_timeline.then(|| Recorder::new(policy.state_quantities()));
        let progs: Vec<Vec<Op>> = wl.tasks.iter().map(|t| compile(&t.program)).collect();
        let code_at = progs.iter().scan(0, |at, p| Some(std::mem::replace(at, *at + p.len() as u32))).collect();
        Engine {
            opts: opts.clone(),
            wl,
            code: progs.concat(),
            code_at,
            progs,
            names: Vec::new(),
            now: 0,
            q: Queue::new(n),
            tasks: Vec::new(),
            cpus: vec![CpuSt::default(); n],
            view: vec![CpuView::default(); n],
            policy,
            rt,
            rng: rand::SeedableRng::seed_from_u64(opts.seed),
            kick: Vec::new(),
            touched_all: false,
            ops: OpCounter::default(),
            cost: opts.cost,
            costly: !opts.cost.is_zero(),
            ipi_to: Vec::new(),
            chans: wl
                .channels
                .iter()
                .map(|&cap| Chan { count: 0, cap, receivers: VecDeque::new(), senders: VecDeque::new() })
                .collect(),
            conds: vec![Vec::new(); wl.conditions],
            resched: VecDeque::new(),
            live: 0,
            stop: false,
            any_probe: wl.tasks.iter().any(|t| t.probe),
            tick_ns: 1_000_000_000 / opts.hz as u64,
            spin: 0,
            timeline,
            any_rt: wl.tasks.iter().any(|t| t.class.is_rt()),
            rq_wait: BucketCounts::new(),
            wake_rt: BucketCounts::new(),
            wake_dl: BucketCounts::new(),
            wake_normal: BucketCounts::new(),
            ff: FastState::default(),
            fast: opts.fast_forward,
            ff_skip: 0,
            ff_backoff: 0,
            st: Stats {
                elapsed_ns: 0,
                finished: false,
                events: 0,
                ctx_switches: 0,
                migrations: 0,
                messages: 0,
                fast_events: 0,
                forks: 0,
                wake_rt: LatencyHistogram::new(),
                wake_dl: LatencyHistogram::new(),
                dl: Vec::new(),
                wake_normal: LatencyHistogram::new(),
                rq_wait: LatencyHistogram::new(),
                tasks: Vec::new(),
                deadlines: Vec::new(),
                jobs: Vec::new(),
                cpu_busy_ns: Vec::new(),
                series: vec![LatencyHistogram::new(); wl.series.len()],
                timer_overruns: 0,
                sched_ns: 0,
                ipis: 0,
                warnings: Vec::new(),
                abort: None,
            },
            progress: None,
            next_check: opts.max_events.saturating_add(1),
            reported: (0, 0),
        }
    }

    /// Add this run's simulated time and events to `p` as it goes. Only
    /// counters are written: the run's results are the same with or without.
    pub fn with_progress(mut self, p: &'w Progress) -> Self {
        self.progress = Some(p);
        self.next_check = self.next_check.min(PROGRESS_EVERY);
        self
    }

    /// Report progress and enforce the event limit; true: stop the run.
    #[cold]
    #[inline(never)]
    fn checkpoint(&mut self) -> bool {
        self.report_progress();
        if self.st.events > self.opts.max_events {
            self.st.abort = Some(Abort::Events);
            return true;
        }
        let limit = self.opts.max_events.saturating_add(1);
        self.next_check = match self.progress {
            Some(_) => limit.min(self.st.events.saturating_add(PROGRESS_EVERY)),
            None => limit,
        };
        false
    }

    /// The deadline group of task `ti`, as an index into `st.deadlines`.
    fn group_of(&self, ti: usize) -> Option<usize> {
        let g = self.wl.tasks[self.tasks[ti].def as usize].deadline_group.as_ref()?;
        Some(self.st.deadlines.iter().position(|e| e.0 == *g).expect("groups collected at start"))
    }

    fn report_progress(&mut self) {
        if let Some(p) = self.progress {
            p.add(self.now - self.reported.0, self.st.events - self.reported.1);
            self.reported = (self.now, self.st.events);
        }
    }

    pub fn run(mut self) -> (Stats, Option<Timeline>) {
        if self.fast {
            self.ff = FastState::new(&self.progs, self.chans.len(), self.cpus.len());
        }
        let mut groups: Vec<String> = Vec::new();
        for t in &self.wl.tasks {
            if let Some(g) = &t.deadline_group {
                if !groups.contains(g) {
                    groups.push(g.clone());
                }
            }
        }
        self.st.deadlines = groups.into_iter().map(|g| (g, 0, 0)).collect();
        self.st.jobs = vec![JobStats::default(); self.st.deadlines.len()];
        for c in 0..self.cpus.len() {
            self.q.push(self.tick_ns, EvKind::Tick(c as u32));
        }
        if self.rt.runtime_ns > 0 {
            self.q.push(self.rt.period_ns, EvKind::RtPeriod);
        }
        let initial: u64 = self.wl.tasks.iter().map(|t| u64::from(t.count)).sum();
        if initial > MAX_TASKS {
            self.st.abort = Some(Abort::Tasks);
            self.stop = true;
        }
        for (d, def) in self.wl.tasks.iter().enumerate() {
            for i in 0..def.count {
                if self.stop {
                    break;
                }
                let name = if def.count > 1 { format!("{}.{i}", def.name) } else { def.name.clone() };
                self.spawn(d, name, None, 0);
            }
        }
        let end = self.opts.duration_ns;
        let mut last_time = 0;
        loop {
            self.flush();
            if self.stop {
                break;
            }
            if self.fast {
                self.try_fast_forward();
            }
            if self.st.events >= self.next_check && self.checkpoint() {
                break;
            }
            let Some(ev) = self.q.pop() else { break };
            if ev.time > end {
                self.now = end;
                break;
            }
            if ev.time != last_time {
                self.spin = 0;
                last_time = ev.time;
            }
            self.now = ev.time;
            match ev.kind {
                EvKind::Tick(c) => {
                    self.st.events += 1;
                    self.on_tick(c as usize);
                }
                EvKind::Done { cpu, gen } => {
                    let cpu = cpu as usize;
                    if self.cpus[cpu].gen == gen {
                        self.st.events += 1;
                        self.account(cpu);
                        self.advance(cpu);
                    }
                }
                EvKind::Wake { task, gen } => {
                    let t = &self.tasks[task as usize];
                    if t.sleep_gen == gen && t.state == St::Blocked {
                        self.st.events += 1;
                        self.wake(task, WakeKind::Timer, None);
                    }
                }
                EvKind::RtPeriod => {
                    self.st.events += 1;
                    self.q.push(self.now + self.rt.period_ns, EvKind::RtPeriod);
                    for c in self.rt.period_timer() {
                        self.mark(c);
                    }
                }
                EvKind::DlTimer { task, gen } => {
                    self.st.events += 1;
                    self.rt.dl_timer(task, gen, self.now);
                }
                EvKind::Kick { cpu, expect } => {
                    self.st.events += 1;
                    if self.view[cpu as usize].curr == expect {
                        self.mark(cpu as usize);
                    }
                }
            }
        }
        for c in 0..self.cpus.len() {
            self.account(c);
        }
        self.report_progress();
        self.rq_wait.drain_into(&mut self.st.rq_wait);
        self.wake_rt.drain_into(&mut self.st.wake_rt);
        self.wake_dl.drain_into(&mut self.st.wake_dl);
        self.wake_normal.drain_into(&mut self.st.wake_normal);
        self.st.finished = self.live == 0;
        self.st.elapsed_ns = self.now;
        self.st.cpu_busy_ns = self.cpus.iter().map(|c| c.busy_ns).collect();
        self.st.dl = self.rt.dl.stats().into_iter().map(|(t, s)| (self.names[t as usize].clone(), s)).collect();
        for (i, t) in self.tasks.iter().enumerate() {
            let life = self.now.saturating_sub(t.created);
            self.st.tasks.push((t.def, self.names[i].clone(), t.class, t.nice, t.cpu_ns, life));
        }
        let timeline = self.timeline.take().map(Recorder::finish);
        (self.st, timeline)
    }

    /// Fast-forward when it may pay: after a try that replayed fewer than
    /// `FF_PAYS` completions, wait for 1, 3, 7, ... up to 255 events before
    /// trying again, so workloads where nearly every event is decisive (CFS
    /// switching on every hackbench message) pay almost nothing for a try
    /// (one costs as much as tens of events; at 63 the tries were still 3-5 %
    /// of 4BSD's and CFS's run time, and the replay lost at 255 is ~1 %).
    fn try_fast_forward(&mut self) {
        const FF_PAYS: u64 = 16;
        if self.ff_skip > 0 {
            self.ff_skip -= 1;
            return;
        }
        if self.fast_forward() >= FF_PAYS {
            self.ff_backoff = 0;
        } else {
            self.ff_backoff = (self.ff_backoff * 2 + 1).min(255);
            self.ff_skip = self.ff_backoff;
        }
    }

    fn sample(&mut self, d: Dur) -> u64 {
        match d {
            Dur::Fixed(n) => n,
            Dur::Uniform(a, b) => {
                if a == b {
                    a
                } else {
                    self.rng.gen_range(a..=b)
                }
            }
            Dur::Exp(mean) => {
                let u: f64 = self.rng.gen_range(f64::EPSILON..1.0);
                ((-u.ln()).min(20.0) * mean as f64) as u64
            }
        }
    }

    fn mark(&mut self, cpu: usize) {
        if !self.cpus[cpu].need_resched {
            self.cpus[cpu].need_resched = true;
            self.resched.push_back(cpu);
        }
    }

    fn flush(&mut self) {
        loop {
            if self.any_rt && self.rt.dl.busy() {
                self.dl_work();
            }
            while let Some(k) = self.kick.pop() {
                self.mark(k);
            }
            let Some(c) = self.resched.pop_front() else { break };
            if self.cpus[c].need_resched && !self.stop {
                self.resched_cpu(c);
                self.advance(c);
            }
        }
    }

    /// SCHED_DEADLINE: arm the replenishment timers the class asked for,
    /// and once the pending reschedules are done, reschedule a CPU that
    /// DL or RT work should move to.
    fn dl_work(&mut self) {
        for (at, task, gen) in std::mem::take(&mut self.rt.dl.timers) {
            self.q.push(at, EvKind::DlTimer { task, gen });
        }
        if self.resched.is_empty() {
            if let Some(c) = self.rt.dl_push(&self.view) {
                self.mark(c);
            }
        }
    }

    /// Record task `t`'s state in the timeline, if one is kept. The check
    /// is inlined: most runs keep none and call this on every decision.
    #[inline]
    fn note(&mut self, t: TaskId) {
        if self.timeline.is_some() {
            self.note_timeline(t);
        }
    }

    fn note_timeline(&mut self, t: TaskId) {
        if let Some(tl) = &mut self.timeline {
            let task = &self.tasks[t as usize];
            if task.class.is_rt() || task.state == St::Exited {
                return;
            }
            tl.note(t, self.now, &*self.policy);
        }
    }

    fn note_all(&mut self) {
        if self.timeline.is_some() {
            for t in 0..self.tasks.len() as TaskId {
                self.note(t);
            }
        }
    }

    fn spawn(&mut self, def: usize, name: String, parent: Option<TaskId>, cpu: usize) -> TaskId {
        let d = &self.wl.tasks[def];
        let id = self.tasks.len() as TaskId;
        self.tasks.push(Task {
            def: def as u32,
            code: self.code_at[def],
            class: d.class,
            nice: d.nice,
            pc: 0,
            loops: Vec::new(),
            busy: 0,
            state: St::Blocked,
            cpu: NO_CPU,
            woke_at: 0,
            woken: false,
            queued_at: 0,
            parent,
            cpu_ns: 0,
            sleep_gen: 0,
            release: None,
            period: 0,
            stamp: self.now,
            lap: None,
            timer_next: None,
            job_work: 0,
            created: self.now,
        });
        self.names.push(name.clone());
        if let Some(tl) = &mut self.timeline {
            tl.add_task(id, name);
        }
        self.live += 1;
        if d.class.is_rt() {
            self.rt.task_new(id, d.class);
        } else {
            let p = parent.filter(|p| !self.tasks[*p as usize].class.is_rt());
            let mut cx = policy_cx!(self, self.now);
            self.policy.task_new(&mut cx, id, d.nice, p);
            if let Some(p) = p {
                self.note(p);
            }
        }
        self.wake(id, WakeKind::New { parent }, parent.map(|_| cpu));
        id
    }

    fn wake(&mut self, t: TaskId, kind: WakeKind, waker_cpu: Option<usize>) {
        let now = self.now;
        let task = &mut self.tasks[t as usize];
        task.state = St::Runnable;
        task.woke_at = now;
        task.woken = !matches!(kind, WakeKind::New { .. });
        task.queued_at = now;
        let prev = if task.cpu == NO_CPU { waker_cpu.unwrap_or(0) } else { task.cpu };
        // The launcher's forks of the initial tasks are setup, not the run: free.
        let charged = self.costly && kind != (WakeKind::New { parent: None });
        if task.class.is_rt() {
            let cpu = self.rt.select_cpu(&self.view, t, prev);
            self.rt.enqueue(cpu, t, now);
            let resched = self.rt.preempts(cpu, &self.view[cpu], t);
            if charged {
                // The POSIX layer's work (cost.rs): its queue and lock, and a
                // search of every CPU when the task does not stay where it was.
                let scanned = if cpu == prev { 0 } else { self.cpus.len() as u64 };
                self.ops.add(scanned, 1, 1);
                self.settle_wake(prev, waker_cpu, resched.then_some(cpu), kind);
            } else if resched {
                self.mark(cpu);
            }
            return;
        }
        let w = Wake { kind, prev_cpu: prev, waker_cpu };
        let mut cx = policy_cx!(self, now);
        let cpu = self.policy.select_cpu(&mut cx, t, &w);
        self.policy.enqueue(&mut cx, t, cpu, &w);
        let resched = match cx.cpus[cpu] {
            CpuView { curr: None, .. } => true,
            CpuView { curr: Some(_), curr_rt: true } => false,
            CpuView { curr: Some(c), curr_rt: false } => self.policy.wakeup_preempt(&mut cx, cpu, c, t, &w),
        };
        if charged {
            self.settle_wake(prev, waker_cpu, resched.then_some(cpu), kind);
        } else {
            if self.costly {
                self.ops.take();
            }
            if resched {
                self.mark(cpu);
            }
        }
        self.note(t);
    }

    /// Costly runs: charge a wake-up's work to the CPU that did it (the
    /// waker's, else the one the task slept on, where its timer fired) and
    /// deliver the reschedule it asks for, by IPI if that is another CPU.
    fn settle_wake(&mut self, prev: usize, waker_cpu: Option<usize>, resched: Option<usize>, kind: WakeKind) {
        let here = waker_cpu.unwrap_or(prev);
        let path = match kind {
            WakeKind::Normal => self.cost.wake_ns,
            WakeKind::Sync => self.cost.channel_wake_ns,
            WakeKind::New { .. } | WakeKind::Timer => 0,
        };
        let ns = self.decision_ns(here, resched).saturating_add(path);
        if resched == Some(here) {
            // An idle CPU handling its own timer's wake-up leaves idle first.
            if self.view[here].curr.is_none() && self.cost.idle_exit_ns > 0 {
                self.q.push(self.now + self.cost.idle_exit_ns, EvKind::Kick { cpu: here as u32, expect: None });
            } else {
                self.mark(here);
            }
        }
        self.charge(here, ns, waker_cpu.is_some());
        self.send_ipis(ns);
    }

    /// Costly runs: the CPU time of the decision `here` just made: its
    /// counts, plus one IPI for each other CPU it asks to reschedule
    /// (`resched` and the policy's kicks of other CPUs, which are set aside
    /// for [`Self::send_ipis`]; kicks of `here` stay for `flush`).
    /// Inlined for the usual decision that asks no other CPU for anything.
    #[inline]
    fn decision_ns(&mut self, here: usize, resched: Option<usize>) -> u64 {
        if self.kick.is_empty() && self.ipi_to.is_empty() && resched.is_none_or(|c| c == here) {
            return self.cost.ns(&self.ops.take());
        }
        self.decision_ns_ipis(here, resched)
    }

    fn decision_ns_ipis(&mut self, here: usize, resched: Option<usize>) -> u64 {
        let mut i = 0;
        while i < self.kick.len() {
            if self.kick[i] == here {
                i += 1;
                continue;
            }
            let c = self.kick.remove(i);
            if !self.ipi_to.contains(&c) {
                self.ipi_to.push(c);
            }
        }
        if let Some(c) = resched.filter(|&c| c != here) {
            if !self.ipi_to.contains(&c) {
                self.ipi_to.push(c);
            }
        }
        self.ops.ipi(self.ipi_to.len() as u64);
        self.st.ipis += self.ipi_to.len() as u64;
        self.cost.ns(&self.ops.take())
    }

    /// Costly runs: `ns` of scheduler work done on `cpu` now. A running task
    /// pays it (if it is executing steps, `in_advance`, it simply reaches the
    /// next one later; else its current run step ends later); an idle CPU or
    /// one about to switch owes it to the next task it picks.
    fn charge(&mut self, cpu: usize, ns: u64, in_advance: bool) {
        if ns == 0 {
            return;
        }
        match self.view[cpu].curr {
            Some(t) if !self.cpus[cpu].need_resched => {
                self.st.sched_ns += ns;
                if in_advance {
                    self.tasks[t as usize].busy += ns;
                } else {
                    self.account(cpu);
                    let task = &mut self.tasks[t as usize];
                    task.busy += ns;
                    let due = self.now + task.busy;
                    self.arm_done(cpu, due);
                }
            }
            _ => self.cpus[cpu].debt += ns,
        }
    }

    /// Costly runs: send the IPIs [`Self::decision_ns`] set aside. Each
    /// leaves when the decision's `ns` of work is done and acts
    /// `ipi_latency` later, plus `idle_exit` on an idle CPU. Inlined: most
    /// decisions have none to send.
    #[inline]
    fn send_ipis(&mut self, ns: u64) {
        if !self.ipi_to.is_empty() {
            self.send_ipis_now(ns);
        }
    }

    fn send_ipis_now(&mut self, ns: u64) {
        while let Some(c) = self.ipi_to.pop() {
            let idle_exit = if self.view[c].curr.is_none() { self.cost.idle_exit_ns } else { 0 };
            let delay = ns + self.cost.ipi_latency_ns + idle_exit;
            if delay == 0 {
                self.mark(c);
            } else {
                let expect = self.view[c].curr;
                self.q.push(self.now + delay, EvKind::Kick { cpu: c as u32, expect });
            }
        }
    }

    /// Schedule `cpu`'s run-step completion at `due`, in a new generation
    /// (so a completion pending for it is stale).
    #[inline]
    fn arm_done(&mut self, cpu: usize, due: u64) {
        let c = &mut self.cpus[cpu];
        c.gen = c.gen.wrapping_add(1);
        self.q.push_done(due, cpu, c.gen);
    }

    /// Charge the time since the last accounting to the running task.
    #[inline]
    fn account(&mut self, cpu: usize) {
        let c = &mut self.cpus[cpu];
        if let Some(t) = self.view[cpu].curr {
            let ran = self.now - c.run_start;
            if ran > 0 {
                let task = &mut self.tasks[t as usize];
                task.busy -= ran.min(task.busy);
                task.cpu_ns += ran;
                c.busy_ns += ran;
                if self.view[cpu].curr_rt {
                    self.rt.account(cpu, ran);
                }
            }
        }
        c.run_start = self.now;
    }

    /// Take the current task off `cpu` (it must have been accounted).
    fn stop_curr(&mut self, cpu: usize, why: Stop) -> Option<TaskId> {
        let t = self.view[cpu].curr?;
        let is_rt = self.view[cpu].curr_rt;
        if is_rt {
            self.rt.stopping(cpu, t, why, self.now);
        } else {
            let mut cx = policy_cx!(self, self.now);
            self.policy.stopping(&mut cx, cpu, t, why);
        }
        self.view[cpu] = CpuView::default();
        self.cpus[cpu].prev = Some(t);
        self.cpus[cpu].gen = self.cpus[cpu].gen.wrapping_add(1);
        let task = &mut self.tasks[t as usize];
        task.state = match why {
            Stop::Preempt | Stop::Yield => {
                task.queued_at = self.now;
                St::Runnable
            }
            Stop::Sleep { .. } => St::Blocked,
            Stop::Exit => St::Exited,
        };
        if !is_rt {
            self.note(t);
        }
        Some(t)
    }

    fn resched_cpu(&mut self, cpu: usize) {
        self.cpus[cpu].need_resched = false;
        self.account(cpu);
        self.stop_curr(cpu, Stop::Preempt);
        self.pick(cpu);
    }

    fn pick(&mut self, cpu: usize) {
        let rt_next = if self.any_rt { self.rt.pick(cpu, &self.view) } else { None };
        let next = match rt_next {
            Some(t) => Some((t, true)),
            None => {
                let mut cx = policy_cx!(self, self.now);
                let next = self.policy.pick_next(&mut cx, cpu);
                if std::mem::take(&mut self.touched_all) {
                    self.note_all();
                }
                next.map(|t| (t, false))
            }
        };
        // Costly runs: this schedule's work (the outgoing task's stop
        // included) and what the CPU owed, paid by the task it picks.
        let mut sched_ns = 0;
        if self.costly {
            if matches!(next, Some((_, true))) {
                self.ops.add(0, 1, 1);
            }
            let ns = self.decision_ns(cpu, None);
            sched_ns = ns + std::mem::take(&mut self.cpus[cpu].debt);
            if next.is_some() {
                self.st.sched_ns += sched_ns;
            }
            self.send_ipis(ns);
        }
        let c = &mut self.cpus[cpu];
        c.gen = c.gen.wrapping_add(1);
        c.run_start = self.now;
        let Some((t, is_rt)) = next else {
            c.prev = None;
            return;
        };
        let task = &mut self.tasks[t as usize];
        debug_assert_eq!(task.state, St::Runnable);
        if c.prev != Some(t) {
            self.st.ctx_switches += 1;
            task.busy += self.opts.ctx_switch_ns;
        }
        if task.cpu != NO_CPU && task.cpu != cpu {
            self.st.migrations += 1;
            task.busy += self.opts.migration_ns;
        }
        task.busy += sched_ns;
        task.cpu = cpu;
        task.state = St::Running;
        self.rq_wait.record(self.now - task.queued_at);
        if task.woken {
            task.woken = false;
            if !self.any_probe || self.wl.tasks[task.def as usize].probe {
                // Wake-up to the end of the pick that chose it.
                let lat = self.now - task.woke_at + sched_ns;
                if task.class.is_dl() {
                    self.wake_dl.record(lat);
                } else if is_rt {
                    self.wake_rt.record(lat);
                } else {
                    self.wake_normal.record(lat);
                }
            }
        }
        self.view[cpu] = CpuView { curr: Some(t), curr_rt: is_rt };
        c.prev = Some(t);
        if !is_rt {
            self.note(t);
        }
    }

    fn block(&mut self, cpu: usize, why: Stop) {
        self.stop_curr(cpu, why);
        self.pick(cpu);
    }

    fn on_tick(&mut self, cpu: usize) {
        self.q.push(self.now + self.tick_ns, EvKind::Tick(cpu as u32));
        self.account(cpu);
        let v = self.view[cpu];
        let mut cx = policy_cx!(self, self.now);
        let resched = match v.curr {
            Some(t) if v.curr_rt => {
                self.policy.tick(&mut cx, cpu, None);
                self.rt.tick(cpu, t)
            }
            curr => self.policy.tick(&mut cx, cpu, curr),
        };
        if resched || v.curr.is_none() || (v.curr_rt && self.rt.throttles_curr(cpu)) {
            self.mark(cpu);
        }
        if self.costly {
            let ns = self.decision_ns(cpu, None);
            self.charge(cpu, ns, false);
            self.send_ipis(ns);
        }
        if std::mem::take(&mut self.touched_all) {
            self.note_all();
        } else if let (Some(t), false) = (v.curr, v.curr_rt) {
            self.note(t);
        }
    }

    /// Run the current task's program on `cpu` until it needs time or blocks.
    fn advance(&mut self, cpu: usize) {
        'task: loop {
            if self.stop {
                return;
            }
            let Some(t) = self.view[cpu].curr else { return };
            if self.cpus[cpu].need_resched {
                self.resched_cpu(cpu);
                continue;
            }
            let ti = t as usize;
            // Steps that touch only this task, its channels' counts and the
            // statistics loop here; one that may block, wake, switch or
            // stop goes back to the checks above.
            loop {
                if self.tasks[ti].busy > 0 {
                    self.arm_done(cpu, self.now + self.tasks[ti].busy);
                    return;
                }
                self.spin += 1;
                if self.spin > SPIN_LIMIT {
                    self.st.warnings.push(format!(
                        "stopped at {} ns: tasks executed {SPIN_LIMIT} steps without simulated time passing (a loop with no run/sleep step?)",
                        self.now
                    ));
                    self.stop = true;
                    return;
                }
                let task = &mut self.tasks[ti];
                let op = self.code[(task.code + task.pc) as usize];
                match op {
                    Op::Run(d) => {
                        task.pc += 1;
                        let n = match d {
                            Dur::Fixed(n) => n,
                            _ => self.sample(d),
                        };
                        let task = &mut self.tasks[ti];
                        task.busy = n;
                        task.job_work += n;
                        if n > 0 {
                            // What the next iteration would do (a run step raises no flags).
                            self.arm_done(cpu, self.now + n);
                            return;
                        }
                    }
                    Op::Sleep(d) => {
                        task.pc += 1;
                        task.sleep_gen = task.sleep_gen.wrapping_add(1);
                        let gen = task.sleep_gen;
                        let n = self.sample(d);
                        self.q.push(self.now + n, EvKind::Wake { task: t, gen });
                        self.block(cpu, Stop::Sleep { io: false });
                        continue 'task;
                    }
                    Op::Send(ch) => {
                        let chan = &mut self.chans[ch as usize];
                        if chan.count >= chan.cap {
                            chan.senders.push_back(t);
                            self.block(cpu, Stop::Sleep { io: true });
                            continue 'task;
                        } else {
                            chan.count += 1;
                            task.pc += 1;
                            self.st.messages += 1;
                            if let Some(r) = chan.receivers.pop_front() {
                                self.wake(r, WakeKind::Sync, Some(cpu));
                                continue 'task;
                            }
                        }
                    }
                    Op::Recv(ch) => {
                        let chan = &mut self.chans[ch as usize];
                        if chan.count > 0 {
                            chan.count -= 1;
                            task.pc += 1;
                            if let Some(s) = chan.senders.pop_front() {
                                self.wake(s, WakeKind::Sync, Some(cpu));
                                continue 'task;
                            }
                        } else {
                            chan.receivers.push_back(t);
                            self.block(cpu, Stop::Sleep { io: true });
                            continue 'task;
                        }
                    }
                    Op::Broadcast(c) => {
                        task.pc += 1;
                        let waiters = std::mem::take(&mut self.conds[c as usize]);
                        for w in waiters {
                            self.wake(w, WakeKind::Normal, Some(cpu));
                        }
                        continue 'task;
                    }
                    Op::Wait(c) => {
                        task.pc += 1;
                        self.conds[c as usize].push(t);
                        self.block(cpu, Stop::Sleep { io: true });
                        continue 'task;
                    }
                    Op::Fork(d) => {
                        if self.tasks.len() as u64 >= MAX_TASKS {
                            self.st.abort = Some(Abort::Tasks);
                            self.stop = true;
                            return;
                        }
                        let task = &mut self.tasks[ti];
                        task.pc += 1;
                        self.st.forks += 1;
                        let name = format!("{}#{}", self.wl.tasks[d as usize].name, self.tasks.len());
                        self.spawn(d as usize, name, Some(t), cpu);
                        continue 'task;
                    }
                    Op::Exit => {
                        self.exit(cpu, t);
                        continue 'task;
                    }
                    Op::Yield => {
                        task.pc += 1;
                        self.block(cpu, Stop::Yield);
                        continue 'task;
                    }
                    Op::Nice(n) => {
                        task.pc += 1;
                        task.nice = n;
                        if !task.class.is_rt() {
                            let mut cx = policy_cx!(self, self.now);
                            if self.policy.set_nice(&mut cx, t, n, Some(cpu)) {
                                self.mark(cpu);
                            }
                            if self.costly {
                                let ns = self.decision_ns(cpu, None);
                                self.charge(cpu, ns, true);
                                self.send_ipis(ns);
                            }
                            self.note(t);
                            continue 'task;
                        }
                    }
                    Op::LoopBegin { count, end } => {
                        if count == 0 {
                            task.pc = end;
                        } else {
                            task.loops.push((task.pc + 1, count));
                            task.pc += 1;
                        }
                    }
                    Op::LoopEnd { .. } => {
                        let top = task.loops.last_mut().expect("compiled loops are balanced");
                        if top.1 != u64::MAX {
                            top.1 -= 1;
                        }
                        if top.1 > 0 {
                            task.pc = top.0;
                        } else {
                            task.loops.pop();
                            task.pc += 1;
                        }
                    }
                    Op::PeriodStart(p) => {
                        task.pc += 1;
                        task.period = p;
                        if task.release.is_none() {
                            task.release = Some(self.now);
                        }
                        task.job_work = 0;
                        let late = self.now.saturating_sub(task.release.unwrap_or(self.now));
                        if let Some(g) = self.group_of(ti) {
                            self.st.jobs[g].latency.record(late);
                        }
                    }
                    Op::PeriodEnd => {
                        task.pc += 1;
                        let (rel, p) = (task.release.unwrap_or(self.now), task.period.max(1));
                        let met = self.now <= rel + p;
                        // Jobs whose whole period has already passed are skipped and count as missed.
                        // Skip the whole periods already past at once (a loop
                        // would take now/p steps after a long overrun).
                        let skipped = self.now.saturating_sub(rel + p) / p;
                        let next = rel + p + skipped * p;
                        let missed = u64::from(!met) + skipped;
                        task.release = Some(next);
                        let job = task.job_work;
                        if let Some(g) = self.group_of(ti) {
                            let e = &mut self.st.deadlines[g];
                            e.1 += u64::from(met);
                            e.2 += missed;
                            let j = &mut self.st.jobs[g];
                            j.done_ns += job;
                            j.due_ns += job * (1 + skipped);
                            if skipped > 0 {
                                charge_skipped(&mut j.latency, self.now - (rel + p), p, skipped);
                            }
                        }
                        if next > self.now {
                            let task = &mut self.tasks[ti];
                            task.sleep_gen = task.sleep_gen.wrapping_add(1);
                            let gen = task.sleep_gen;
                            self.q.push(next, EvKind::Wake { task: t, gen });
                            self.block(cpu, Stop::Sleep { io: false });
                            continue 'task;
                        }
                    }
                    Op::EndSim => {
                        task.pc += 1;
                        self.stop = true;
                        return;
                    }
                    Op::Stamp => {
                        task.pc += 1;
                        task.stamp = self.now;
                    }
                    Op::Record(i) => {
                        task.pc += 1;
                        let d = self.now.saturating_sub(task.stamp);
                        self.st.series[i as usize].record(d);
                    }
                    Op::Lap(i) => {
                        task.pc += 1;
                        if let Some(l) = task.lap.replace(self.now) {
                            self.st.series[i as usize].record(self.now - l);
                        }
                    }
                    Op::Timer { period, tick } => {
                        task.pc += 1;
                        let p = period.max(1);
                        let due = *task.timer_next.get_or_insert(self.now + p);
                        // Without high-resolution timers the timer wheel runs
                        // from the tick: an expiry is delivered at the next one.
                        let at = if tick { due.div_ceil(self.tick_ns) * self.tick_ns } else { due };
                        // Every expiry due by the time the task gets it folds
                        // into one wake-up (as a signal's overruns do).
                        let folded = (at.max(self.now) - due) / p;
                        self.st.timer_overruns += folded;
                        task.timer_next = Some(due + (folded + 1) * p);
                        task.stamp = due;
                        if at > self.now {
                            task.sleep_gen = task.sleep_gen.wrapping_add(1);
                            let gen = task.sleep_gen;
                            self.q.push(at, EvKind::Wake { task: t, gen });
                            self.block(cpu, Stop::Sleep { io: false });
                            continue 'task;
                        }
                    }
                }
            }
        }
    }

    fn exit(&mut self, cpu: usize, t: TaskId) {
        let is_rt = self.view[cpu].curr_rt;
        self.stop_curr(cpu, Stop::Exit);
        self.live -= 1;
        if !is_rt {
            let parent = self.tasks[t as usize].parent.filter(|p| {
                let pt = &self.tasks[*p as usize];
                pt.state != St::Exited && !pt.class.is_rt()
            });
            let mut cx = policy_cx!(self, self.now);
            self.policy.task_exit(&mut cx, t, parent);
            if let Some(p) = parent {
                self.note(p);
            }
        }
        if self.live == 0 {
            self.stop = true;
            return;
        }
        self.pick(cpu);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_pops_by_time_then_completions_by_cpu_then_timers_by_seq() {
        let mut q = Queue::new(4);
        q.push(5, EvKind::RtPeriod);
        q.push(3, EvKind::Tick(0));
        q.push(3, EvKind::Tick(1));
        q.push(1, EvKind::Tick(2));
        q.push(9, EvKind::Tick(3));
        q.push(3, EvKind::Done { cpu: 2, gen: 1 });
        q.push(3, EvKind::Done { cpu: 1, gen: 1 });
        let order: Vec<EvKind> = std::iter::from_fn(|| q.pop()).map(|e| e.kind).collect();
        assert_eq!(
            order,
            vec![
                EvKind::Tick(2),
                EvKind::Done { cpu: 1, gen: 1 },
                EvKind::Done { cpu: 2, gen: 1 },
                EvKind::Tick(0),
                EvKind::Tick(1),
                EvKind::RtPeriod,
                EvKind::Tick(3)
            ]
        );
    }

    #[test]
    fn queue_matches_a_reference_with_scan_and_tree() {
        // 3 CPUs scan the slots, 40 use the tournament tree. Reference: a list
        // of pending events where a CPU's newer Done/Tick replaces the older
        // one, ordered by (time, timer?, cpu for completions or push count).
        for n in [3usize, 40] {
            let mut q = Queue::new(n);
            let mut reference: Vec<((u64, bool, u64), EvKind)> = Vec::new();
            let mut pushes = 0u64;
            let mut x = 7u64;
            for i in 0..3000u64 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let t = i + (x >> 58);
                let c = ((x >> 20) % n as u64) as u32;
                let kind = match (x >> 40) % 3 {
                    0 => EvKind::Done { cpu: c, gen: i as u32 },
                    1 => EvKind::Tick(c),
                    _ => EvKind::Wake { task: c, gen: 0 },
                };
                q.push(t, kind);
                reference.retain(|e| match (e.1, kind) {
                    (EvKind::Done { cpu: a, .. }, EvKind::Done { cpu: b, .. }) => a != b,
                    (EvKind::Tick(a), EvKind::Tick(b)) => a != b,
                    _ => true,
                });
                let order = match kind {
                    EvKind::Done { cpu, .. } => (t, false, cpu as u64),
                    _ => {
                        pushes += 1;
                        (t, true, pushes)
                    }
                };
                reference.push((order, kind));
                if i % 3 == 0 || i >= 2900 {
                    let k = (0..reference.len()).min_by_key(|&k| reference[k].0).unwrap();
                    let want = reference.remove(k);
                    let got = q.pop().unwrap();
                    assert_eq!((got.time, got.kind), (want.0 .0, want.1), "n={n} i={i}");
                }
            }
        }
    }

    #[test]
    fn queue_keeps_one_done_per_cpu_and_orders_timers_by_seq() {
        let mut q = Queue::new(2);
        q.push(7, EvKind::Done { cpu: 0, gen: 1 });
        q.push(4, EvKind::Wake { task: 9, gen: 1 });
        q.push(4, EvKind::Done { cpu: 1, gen: 3 });
        // A newer completion for CPU 0 replaces the pending (stale) one.
        q.push(6, EvKind::Done { cpu: 0, gen: 2 });
        q.push(4, EvKind::Wake { task: 8, gen: 1 });
        let order: Vec<(u64, EvKind)> = std::iter::from_fn(|| q.pop()).map(|e| (e.time, e.kind)).collect();
        assert_eq!(
            order,
            vec![
                (4, EvKind::Done { cpu: 1, gen: 3 }),
                (4, EvKind::Wake { task: 9, gen: 1 }),
                (4, EvKind::Wake { task: 8, gen: 1 }),
                (6, EvKind::Done { cpu: 0, gen: 2 }),
            ]
        );
    }
}
