//! Fast-forward: replaying run-step completions that change nothing but the
//! running task's own state, without going through the queue one by one.
//!
//! Most events of a message-passing workload are a running task finishing a
//! run step and starting the next after a send or receive that neither
//! blocks nor wakes anyone (hackbench: a 1.5 us write into a pipe that is
//! neither full nor awaited). Such a completion touches only its task, its
//! CPU and the counts of its task's channels: no policy callback, no random
//! draw, no other task. So between two *decisive* events (a tick, a timer, a
//! wakeup, a block, a preemption, any other step), each CPU's chain of
//! completions depends on nothing outside it, as long as no two running
//! tasks share a channel.
//!
//! [`Engine::fast_forward`] replays each CPU's chain on a private copy of its
//! state up to the first decisive event of any CPU, then writes the copies
//! back. The outcome is the same, byte for byte, as processing those
//! completions one by one (tests run every policy both ways), because the
//! queue orders simultaneous completions by CPU number rather than by push
//! order, so no chain's keys depend on another's. Inside a chain, a loop
//! whose body is only fixed run steps, sends and receives is skipped whole
//! iterations at a time, as far as the channel bounds, the loop count and the
//! horizon allow.
//!
//! Not replayed (left to the queue): RT tasks (their runtime feeds RT
//! throttling), CPUs with a pending reschedule, and tasks sharing a channel
//! with another running task. The engine's zero-time livelock guard counts
//! only steps outside a replay; a replayed completion always starts a run
//! step, so it cannot be part of a livelock.

use super::{done_key, Engine, EMPTY};
use crate::program::{Dur, Op};

const NONE: u32 = u32::MAX;
/// Deeper loop nests are left to the queue.
const MAX_DEPTH: usize = 8;
/// Channel operations one completion may perform and still be replayed.
const MAX_EVENT_CHAN_OPS: usize = 8;
/// Zero-time steps one completion may perform and still be replayed.
const MAX_EVENT_OPS: u32 = 256;
/// Channel capacities above this are treated as unbounded (keeps the
/// iteration arithmetic in range).
const CAP_LIMIT: u64 = 1 << 62;

/// A program step as the fast path sees it: channels renumbered into the
/// program's own list; anything that may need the scheduler is `Decisive`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FOp {
    Run(u64),
    Send(u16),
    Recv(u16),
    LoopBegin { count: u64, end: u32 },
    LoopEnd,
    Decisive,
}

/// Effect of one iteration of a simple loop on one channel, counted from the
/// loop's summary point: net change, and the highest (before a send) and
/// lowest (before a receive) offsets from the starting count.
#[derive(Debug, Clone, Copy)]
struct ChanSum {
    local: u16,
    delta: i64,
    send_hi: Option<i64>,
    recv_lo: Option<i64>,
}

/// One iteration of a simple loop (fixed run steps, sends, receives),
/// starting and ending at its summary point: the step right after the body's
/// first non-zero run step, where a completion is pending.
#[derive(Debug, Clone)]
struct LoopSum {
    /// pc of the first body step (the loop-stack entry's restart pc).
    body: u32,
    period: u64,
    /// Length of the run step that ends at the summary point.
    first_run: u64,
    events: u64,
    sends: u64,
    chans: Vec<ChanSum>,
}

/// A workload template's program, prepared for replay.
pub(super) struct FastProg {
    /// Global ids of the channels the program uses, sorted.
    chans: Vec<u32>,
    ops: Vec<FOp>,
    /// For each pc: index into `sums` if it is a loop's summary point, else NONE.
    sum_at: Vec<u32>,
    sums: Vec<LoopSum>,
}

impl FastProg {
    pub(super) fn new(ops: &[Op]) -> Self {
        let mut chans: Vec<u32> = ops
            .iter()
            .filter_map(|op| match op {
                Op::Send(c) | Op::Recv(c) => Some(*c),
                _ => None,
            })
            .collect();
        chans.sort_unstable();
        chans.dedup();
        let local = |c: u32| chans.binary_search(&c).ok().and_then(|i| u16::try_from(i).ok());
        let fops: Vec<FOp> = ops
            .iter()
            .map(|op| match *op {
                Op::Run(Dur::Fixed(n)) => FOp::Run(n),
                Op::Run(Dur::Uniform(a, b)) if a == b => FOp::Run(a),
                Op::Send(c) => local(c).map_or(FOp::Decisive, FOp::Send),
                Op::Recv(c) => local(c).map_or(FOp::Decisive, FOp::Recv),
                Op::LoopBegin { count, end } => FOp::LoopBegin { count, end },
                Op::LoopEnd { .. } => FOp::LoopEnd,
                _ => FOp::Decisive,
            })
            .collect();
        let mut sum_at = vec![NONE; fops.len()];
        let mut sums = Vec::new();
        for (b, op) in fops.iter().enumerate() {
            if let FOp::LoopBegin { end, .. } = *op {
                if let Some((point, sum)) = summarize(&fops, b, end as usize) {
                    sum_at[point] = sums.len() as u32;
                    sums.push(sum);
                }
            }
        }
        FastProg { chans, ops: fops, sum_at, sums }
    }
}

/// Summary of the loop `LoopBegin` at `b` (its `LoopEnd` at `end - 1`) if its
/// body is simple and takes time.
fn summarize(ops: &[FOp], b: usize, end: usize) -> Option<(usize, LoopSum)> {
    let body = &ops[b + 1..end - 1];
    if body.iter().any(|op| !matches!(op, FOp::Run(_) | FOp::Send(_) | FOp::Recv(_))) {
        return None;
    }
    let first = body.iter().position(|op| matches!(op, FOp::Run(n) if *n > 0))?;
    let FOp::Run(first_run) = body[first] else { unreachable!() };
    // One iteration seen from the summary point: the rest of the body, then its head.
    let rotated = body[first + 1..].iter().chain(&body[..=first]);
    let (mut period, mut events, mut sends) = (0u64, 0u64, 0u64);
    let mut chans: Vec<ChanSum> = Vec::new();
    fn at(chans: &mut Vec<ChanSum>, l: u16) -> &mut ChanSum {
        let i = chans.iter().position(|c| c.local == l).unwrap_or_else(|| {
            chans.push(ChanSum { local: l, delta: 0, send_hi: None, recv_lo: None });
            chans.len() - 1
        });
        &mut chans[i]
    }
    for op in rotated {
        match *op {
            FOp::Run(n) => {
                period = period.checked_add(n)?;
                events += u64::from(n > 0);
            }
            FOp::Send(l) => {
                let c = at(&mut chans, l);
                c.send_hi = Some(c.send_hi.map_or(c.delta, |h| h.max(c.delta)));
                c.delta += 1;
                sends += 1;
            }
            FOp::Recv(l) => {
                let c = at(&mut chans, l);
                c.recv_lo = Some(c.recv_lo.map_or(c.delta, |h| h.min(c.delta)));
                c.delta -= 1;
            }
            _ => unreachable!("checked above"),
        }
    }
    Some((b + 1 + first + 1, LoopSum { body: b as u32 + 1, period, first_run, events, sends, chans }))
}

/// One CPU's chain of completions, replayed on a private copy of its state.
#[derive(Default)]
pub(super) struct Chain {
    cpu: usize,
    task: usize,
    prog: usize,
    /// Time of the pending completion.
    due: u64,
    /// Start of the current run step: the time of the last replayed completion.
    run_start: u64,
    pc: u32,
    loops: [(u32, u64); MAX_DEPTH],
    depth: usize,
    counts: Vec<u64>,
    caps: Vec<u64>,
    /// No task waits to receive (a send wakes nobody).
    quiet_recv: Vec<bool>,
    /// No task waits to send (a receive wakes nobody).
    quiet_send: Vec<bool>,
    events: u64,
    messages: u64,
    /// Key of the first completion not replayed.
    stop: u128,
    /// Key of the last replayed completion, 0 if none.
    last: u128,
}

impl<'w> Engine<'w> {
    /// Replay every CPU's boring completions up to the first decisive event.
    /// Returns the number of completions replayed.
    pub(super) fn fast_forward(&mut self) -> u64 {
        let n = self.cpus.len();
        if self.q.min_slot() >= n {
            return 0; // a tick or timer comes first
        }
        // Decisive events bound the replay: ticks, timers, the end of the run,
        // and completions of CPUs that are not replayed.
        let mut bound = self.q.keys[n..=2 * n].iter().copied().min().unwrap_or(EMPTY);
        bound = bound.min(done_key(self.opts.duration_ns.saturating_add(1), 0));
        let mut ff = std::mem::take(&mut self.ff);
        ff.epoch = ff.epoch.wrapping_add(1);
        ff.cands.clear();
        ff.excluded.clear();
        ff.excluded.resize(n, false);
        for c in 0..n {
            let key = self.q.keys[c];
            if key == EMPTY || self.q.done_gen[c] != self.cpus[c].gen {
                continue; // nothing pending, or a stale completion the queue will drop
            }
            let eligible = match self.view[c].curr {
                Some(t) => {
                    !self.view[c].curr_rt
                        && !self.cpus[c].need_resched
                        && self.tasks[t as usize].loops.len() <= MAX_DEPTH
                }
                None => false,
            };
            if !eligible {
                bound = bound.min(key);
                continue;
            }
            let def = self.tasks[self.view[c].curr.expect("eligible") as usize].def as usize;
            for &ch in &ff.progs[def].chans {
                let owner = &mut ff.owner[ch as usize];
                if owner.0 == ff.epoch && owner.1 as usize != c {
                    ff.excluded[owner.1 as usize] = true;
                    ff.excluded[c] = true;
                } else {
                    *owner = (ff.epoch, c as u32);
                }
            }
            ff.cands.push(c);
        }
        let mut limit = bound;
        for &c in &ff.cands {
            if ff.excluded[c] {
                limit = limit.min(self.q.keys[c]);
            }
        }
        let mut replayed = 0;
        let mut active = std::mem::take(&mut ff.cands);
        active.retain(|&c| !ff.excluded[c]);
        if active.iter().any(|&c| self.q.keys[c] < limit) {
            // Each chain stops before the earliest decisive event found so far.
            for &c in &active {
                self.chain_init(&mut ff.chains[c], &ff.progs, c);
                ff.chains[c].run(&ff.progs, limit);
                limit = limit.min(ff.chains[c].stop);
            }
            for &c in &active {
                let ch = &mut ff.chains[c];
                if ch.last >= limit {
                    // It went past a decisive event found later: replay it again, shorter.
                    self.chain_init(ch, &ff.progs, c);
                    ch.run(&ff.progs, limit);
                }
                replayed += ch.events;
                self.chain_commit(ch, &ff.progs);
            }
        }
        ff.cands = active;
        self.ff = ff;
        replayed
    }

    fn chain_init(&self, ch: &mut Chain, progs: &[FastProg], cpu: usize) {
        let t = self.view[cpu].curr.expect("replayed CPUs run a task") as usize;
        let task = &self.tasks[t];
        let prog = &progs[task.def as usize];
        ch.cpu = cpu;
        ch.task = t;
        ch.prog = task.def as usize;
        ch.due = (self.q.keys[cpu] >> 64) as u64;
        ch.run_start = self.cpus[cpu].run_start;
        ch.pc = task.pc;
        ch.depth = task.loops.len();
        ch.loops[..ch.depth].copy_from_slice(&task.loops);
        ch.counts.clear();
        ch.caps.clear();
        ch.quiet_recv.clear();
        ch.quiet_send.clear();
        for &c in &prog.chans {
            let chan = &self.chans[c as usize];
            ch.counts.push(chan.count);
            ch.caps.push(chan.cap.min(CAP_LIMIT));
            ch.quiet_recv.push(chan.receivers.is_empty());
            ch.quiet_send.push(chan.senders.is_empty());
        }
        ch.events = 0;
        ch.messages = 0;
        ch.stop = EMPTY;
        ch.last = 0;
    }

    fn chain_commit(&mut self, ch: &Chain, progs: &[FastProg]) {
        if ch.events == 0 {
            return;
        }
        let cpu = ch.cpu;
        let ran = ch.run_start - self.cpus[cpu].run_start;
        let task = &mut self.tasks[ch.task];
        task.pc = ch.pc;
        task.loops.clear();
        task.loops.extend_from_slice(&ch.loops[..ch.depth]);
        task.busy = ch.due - ch.run_start;
        task.cpu_ns += ran;
        let c = &mut self.cpus[cpu];
        c.busy_ns += ran;
        c.run_start = ch.run_start;
        // One run step started per replayed completion, each bumping the generation.
        c.gen = c.gen.wrapping_add(ch.events as u32);
        let gen = c.gen;
        self.q.push_done(ch.due, cpu, gen);
        for (i, &chan) in progs[ch.prog].chans.iter().enumerate() {
            self.chans[chan as usize].count = ch.counts[i];
        }
        self.st.events += ch.events;
        self.st.fast_events += ch.events;
        self.st.messages += ch.messages;
    }
}

impl Chain {
    /// Replay completions with keys below `limit` until one is decisive.
    fn run(&mut self, progs: &[FastProg], limit: u128) {
        let prog = &progs[self.prog];
        loop {
            let key = done_key(self.due, self.cpu);
            if key >= limit {
                self.stop = key;
                return;
            }
            let s = prog.sum_at[self.pc as usize];
            if s != NONE && self.skip_iterations(&prog.sums[s as usize], limit) {
                continue;
            }
            if !self.step(prog) {
                self.stop = key;
                return;
            }
            self.last = key;
        }
    }

    /// At a loop's summary point, skip as many whole iterations as stay
    /// boring and below `limit`. False if none could be skipped.
    fn skip_iterations(&mut self, sum: &LoopSum, limit: u128) -> bool {
        let Some(top) = self.depth.checked_sub(1) else { return false };
        let (restart, remaining) = self.loops[top];
        if restart != sum.body {
            return false;
        }
        // Each iteration passes the LoopEnd once, which must jump back.
        let mut k = if remaining == u64::MAX { u64::MAX } else { remaining - 1 };
        // The last completion of iteration k is at due + (k-1)*period + last_off.
        let (lt, lc) = ((limit >> 64) as u64, limit as u64);
        let xmax = if (self.cpu as u64) < lc { Some(lt) } else { lt.checked_sub(1) };
        let last_off = sum.period - sum.first_run;
        match xmax.and_then(|x| x.checked_sub(self.due)).and_then(|x| x.checked_sub(last_off)) {
            Some(room) => k = k.min(room / sum.period + 1),
            None => return false,
        }
        for c in &sum.chans {
            let l = c.local as usize;
            let (count, cap) = (self.counts[l] as i128, self.caps[l] as i128);
            let d = c.delta as i128;
            if let Some(hi) = c.send_hi {
                // Sends of iteration j find count + j*d + hi messages: below cap, nobody waiting.
                let room = cap - 1 - count - hi as i128;
                if !self.quiet_recv[l] || room < 0 {
                    return false;
                }
                if d > 0 {
                    k = k.min((room / d + 1) as u64);
                }
            }
            if let Some(lo) = c.recv_lo {
                let room = count + lo as i128 - 1;
                if !self.quiet_send[l] || room < 0 {
                    return false;
                }
                if d < 0 {
                    k = k.min((room / -d + 1) as u64);
                }
            }
        }
        if k < 2 {
            return false; // one iteration is as cheap step by step
        }
        for c in &sum.chans {
            let l = c.local as usize;
            self.counts[l] = (self.counts[l] as i128 + c.delta as i128 * k as i128) as u64;
        }
        if remaining != u64::MAX {
            self.loops[top].1 = remaining - k;
        }
        self.events += k * sum.events;
        self.messages += k * sum.sends;
        self.last = done_key(self.due + (k - 1) * sum.period + last_off, self.cpu);
        self.due += k * sum.period;
        self.run_start = self.due - sum.first_run;
        true
    }

    /// Replay the pending completion if it is boring: the steps up to the
    /// next run step neither block, wake, draw a random number nor need the
    /// policy. Nothing changes if it is decisive.
    fn step(&mut self, prog: &FastProg) -> bool {
        let mut pc = self.pc as usize;
        let mut loops = self.loops;
        let mut depth = self.depth;
        let mut pend = [(0u16, 0i64); MAX_EVENT_CHAN_OPS];
        let mut npend = 0;
        let mut messages = 0;
        let mut steps = 0;
        let run = loop {
            steps += 1;
            if steps > MAX_EVENT_OPS {
                return false;
            }
            let mut chan_op = |l: u16, d: i64| -> bool {
                let i = match pend[..npend].iter().position(|p| p.0 == l) {
                    Some(i) => i,
                    None if npend < MAX_EVENT_CHAN_OPS => {
                        pend[npend] = (l, 0);
                        npend += 1;
                        npend - 1
                    }
                    None => return false,
                };
                let l = l as usize;
                let count = self.counts[l] as i64 + pend[i].1;
                let ok = if d > 0 {
                    self.quiet_recv[l] && (count as u64) < self.caps[l]
                } else {
                    self.quiet_send[l] && count > 0
                };
                if ok {
                    pend[i].1 += d;
                }
                ok
            };
            match prog.ops[pc] {
                FOp::Run(n) => {
                    pc += 1;
                    if n > 0 {
                        break n;
                    }
                }
                FOp::Send(l) => {
                    if !chan_op(l, 1) {
                        return false;
                    }
                    messages += 1;
                    pc += 1;
                }
                FOp::Recv(l) => {
                    if !chan_op(l, -1) {
                        return false;
                    }
                    pc += 1;
                }
                FOp::LoopBegin { count, end } => {
                    if count == 0 {
                        pc = end as usize;
                    } else {
                        if depth == MAX_DEPTH {
                            return false;
                        }
                        loops[depth] = (pc as u32 + 1, count);
                        depth += 1;
                        pc += 1;
                    }
                }
                FOp::LoopEnd => {
                    let Some(top) = depth.checked_sub(1) else { return false };
                    let e = &mut loops[top];
                    if e.1 != u64::MAX {
                        e.1 -= 1;
                    }
                    if e.1 > 0 {
                        pc = e.0 as usize;
                    } else {
                        depth -= 1;
                        pc += 1;
                    }
                }
                FOp::Decisive => return false,
            }
        };
        for &(l, d) in &pend[..npend] {
            self.counts[l as usize] = (self.counts[l as usize] as i64 + d) as u64;
        }
        self.pc = pc as u32;
        self.loops = loops;
        self.depth = depth;
        self.messages += messages;
        self.events += 1;
        self.run_start = self.due;
        self.due += run;
        true
    }
}

/// Fast-forward state kept between replays (buffers reused).
#[derive(Default)]
pub(super) struct FastState {
    pub(super) progs: Vec<FastProg>,
    chains: Vec<Chain>,
    /// Per channel: (epoch, CPU) of the last chain that claimed it.
    owner: Vec<(u32, u32)>,
    epoch: u32,
    cands: Vec<usize>,
    excluded: Vec<bool>,
}

impl FastState {
    pub(super) fn new(progs: &[Vec<Op>], channels: usize, cpus: usize) -> Self {
        FastState {
            progs: progs.iter().map(|p| FastProg::new(p)).collect(),
            chains: (0..cpus).map(|_| Chain::default()).collect(),
            owner: vec![(0, 0); channels],
            epoch: 0,
            cands: Vec::new(),
            excluded: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::{compile, Step};

    #[test]
    fn summary_of_a_hackbench_sender_starts_after_its_first_write_cost() {
        let body: Vec<Step> = (0..3).flat_map(|r| [Step::Run(Dur::Fixed(10)), Step::Send(r)]).collect();
        let p = FastProg::new(&compile(&[Step::Loop(None, body)]));
        // ops: LoopBegin, (Run, Send) x3, LoopEnd, Exit; summary point after the first Run.
        assert_eq!(p.sum_at.iter().position(|&s| s != NONE), Some(2));
        let s = &p.sums[0];
        assert_eq!((s.period, s.first_run, s.events, s.sends), (30, 10, 3, 3));
        assert!(s.chans.iter().all(|c| c.delta == 1 && c.send_hi == Some(0) && c.recv_lo.is_none()));
    }

    #[test]
    fn loops_with_decisive_or_random_steps_have_no_summary() {
        for body in [
            vec![Step::Run(Dur::Fixed(10)), Step::Yield],
            vec![Step::Run(Dur::Uniform(1, 9)), Step::Send(0)],
            vec![Step::Run(Dur::Fixed(0)), Step::Send(0)],
        ] {
            let p = FastProg::new(&compile(&[Step::Loop(None, body.clone())]));
            assert!(p.sums.is_empty(), "{body:?}");
        }
    }

    #[test]
    fn a_receive_then_send_loop_tracks_offsets_per_channel() {
        // recv(0), run, send(0): from the point after the run, the send sees the
        // starting count (offset 0), the receive one more (offset +1), net 0.
        let p = FastProg::new(&compile(&[Step::Loop(
            Some(5),
            vec![Step::Recv(0), Step::Run(Dur::Fixed(7)), Step::Send(0)],
        )]));
        let c = p.sums[0].chans[0];
        assert_eq!((c.delta, c.send_hi, c.recv_lo), (0, Some(0), Some(1)));
    }
}
