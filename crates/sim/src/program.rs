//! Task programs: what a simulated task does, as a list of steps.
//!
//! Workloads build [`Step`] trees; [`compile`] flattens them into [`Op`]s with
//! explicit loop jumps, which the engine interprets with a program counter.

/// A duration, fixed or drawn from the engine's seeded RNG when the step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dur {
    Fixed(u64),
    /// Uniform in `[lo, hi]` ns.
    Uniform(u64, u64),
    /// Exponential with this mean (ns), capped at 20 means.
    Exp(u64),
}

/// Scheduling class of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// SCHED_OTHER with nice -20..19 (the nice lives on the task).
    Normal,
    /// SCHED_FIFO with rt_priority 1..99 (higher is better).
    Fifo(u8),
    /// SCHED_RR with rt_priority 1..99.
    Rr(u8),
    /// SCHED_DEADLINE (`dl=Q/D/P` in a workload; see `policy::deadline`).
    Deadline(DlParams),
}

/// SCHED_DEADLINE parameters in ns, checked `runtime <= deadline <= period`
/// by `policy::deadline::parse_params`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct DlParams {
    pub runtime: u64,
    pub deadline: u64,
    pub period: u64,
}

impl Class {
    /// Above the normal class: FIFO, RR and DEADLINE tasks all go through
    /// the engine's `RtLayer`, never the normal policy.
    pub fn is_rt(self) -> bool {
        !matches!(self, Class::Normal)
    }
    pub fn is_dl(self) -> bool {
        matches!(self, Class::Deadline(_))
    }
    /// rt_priority; 0 for normal and deadline tasks.
    pub fn rt_prio(self) -> u8 {
        match self {
            Class::Normal | Class::Deadline(_) => 0,
            Class::Fifo(p) | Class::Rr(p) => p,
        }
    }
}

/// One step of a task program.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Use the CPU for this long.
    Run(Dur),
    /// Timed sleep (nanosleep): the wakeup comes from a timer.
    Sleep(Dur),
    /// Put one message in a channel (blocks while it is full) and wake a
    /// blocked receiver, like a pipe write.
    Send(usize),
    /// Take one message (blocks while the channel is empty).
    Recv(usize),
    /// Wake every task waiting on the condition (pthread_cond_broadcast).
    Broadcast(usize),
    /// Wait for the next broadcast on the condition.
    Wait(usize),
    /// Create a task from task template `i` of the workload (its class, nice and program).
    Fork(usize),
    Exit,
    Yield,
    Nice(i32),
    /// Repeat the body `count` times; `None` repeats forever.
    Loop(Option<u64>, Vec<Step>),
    /// Start of a periodic job: the first one anchors the release time.
    PeriodStart(u64),
    /// End of a periodic job: counts a met or missed deadline, then sleeps
    /// until the next release.
    PeriodEnd,
    /// Stop the whole simulation (the measuring task is done).
    EndSim,
    /// Note the time (a task starts with its creation time noted).
    Stamp,
    /// Record the time since the task's note into the workload's series `i`.
    Record(usize),
    /// Record the time since this task's previous `Lap` into series `i` (the first only notes it).
    Lap(usize),
    /// Wait for the next expiry of the task's periodic timer (armed by the
    /// first wait, `period` from then); `tick`: expiries are delivered at the
    /// next scheduler tick, as a kernel without high-resolution timers does.
    /// Expiries already due when one is delivered fold into it (counted as
    /// overruns), and the task's note becomes the expiry it was woken for.
    Timer {
        period: u64,
        tick: bool,
    },
}

/// Flattened form of [`Step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Run(Dur),
    Sleep(Dur),
    Send(u32),
    Recv(u32),
    Broadcast(u32),
    Wait(u32),
    Fork(u32),
    Exit,
    Yield,
    Nice(i32),
    /// `count == u64::MAX` means forever; `end` is the pc after the matching `LoopEnd`.
    LoopBegin {
        count: u64,
        end: u32,
    },
    LoopEnd {
        begin: u32,
    },
    PeriodStart(u64),
    PeriodEnd,
    EndSim,
    Stamp,
    Record(u32),
    Lap(u32),
    Timer {
        period: u64,
        tick: bool,
    },
}

/// Flatten steps; an implicit `Exit` ends every program.
pub fn compile(steps: &[Step]) -> Vec<Op> {
    fn emit(steps: &[Step], out: &mut Vec<Op>) {
        for s in steps {
            match s {
                Step::Run(d) => out.push(Op::Run(*d)),
                Step::Sleep(d) => out.push(Op::Sleep(*d)),
                Step::Send(c) => out.push(Op::Send(*c as u32)),
                Step::Recv(c) => out.push(Op::Recv(*c as u32)),
                Step::Broadcast(c) => out.push(Op::Broadcast(*c as u32)),
                Step::Wait(c) => out.push(Op::Wait(*c as u32)),
                Step::Fork(p) => out.push(Op::Fork(*p as u32)),
                Step::Exit => out.push(Op::Exit),
                Step::Yield => out.push(Op::Yield),
                Step::Nice(n) => out.push(Op::Nice(*n)),
                Step::PeriodStart(p) => out.push(Op::PeriodStart(*p)),
                Step::PeriodEnd => out.push(Op::PeriodEnd),
                Step::EndSim => out.push(Op::EndSim),
                Step::Stamp => out.push(Op::Stamp),
                Step::Record(i) => out.push(Op::Record(*i as u32)),
                Step::Lap(i) => out.push(Op::Lap(*i as u32)),
                Step::Timer { period, tick } => out.push(Op::Timer { period: *period, tick: *tick }),
                Step::Loop(count, body) => {
                    let begin = out.len();
                    out.push(Op::LoopBegin { count: count.unwrap_or(u64::MAX), end: 0 });
                    emit(body, out);
                    out.push(Op::LoopEnd { begin: begin as u32 });
                    let end = out.len() as u32;
                    out[begin] = Op::LoopBegin { count: count.unwrap_or(u64::MAX), end };
                }
            }
        }
    }
    let mut out = Vec::new();
    emit(steps, &mut out);
    out.push(Op::Exit);
    out
}

/// True if some path through a forever loop consumes no simulated time and
/// never blocks, which would spin the engine at one instant.
pub fn spins_forever(steps: &[Step]) -> bool {
    fn takes_time(steps: &[Step]) -> bool {
        steps.iter().any(|s| match s {
            Step::Run(d) | Step::Sleep(d) => !matches!(d, Dur::Fixed(0)),
            Step::Recv(_)
            | Step::Wait(_)
            | Step::Send(_)
            | Step::PeriodEnd
            | Step::Exit
            | Step::EndSim
            | Step::Yield => true,
            Step::Timer { period, .. } => *period > 0,
            Step::Loop(Some(0), _) => false,
            Step::Loop(_, b) => takes_time(b),
            _ => false,
        })
    }
    steps.iter().any(|s| match s {
        Step::Loop(None, b) => !takes_time(b) || spins_forever(b),
        Step::Loop(_, b) => spins_forever(b),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loops_compile_to_jumps() {
        let ops = compile(&[Step::Loop(Some(3), vec![Step::Run(Dur::Fixed(5)), Step::Yield]), Step::Exit]);
        assert_eq!(
            ops,
            vec![
                Op::LoopBegin { count: 3, end: 4 },
                Op::Run(Dur::Fixed(5)),
                Op::Yield,
                Op::LoopEnd { begin: 0 },
                Op::Exit,
                Op::Exit
            ]
        );
        assert!(spins_forever(&[Step::Loop(None, vec![Step::Nice(1)])]));
        assert!(!spins_forever(&[Step::Loop(None, vec![Step::Run(Dur::Fixed(1))])]));
    }
}
