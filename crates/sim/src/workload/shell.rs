//! `shell`: E1's "shell scripts (N concurrent)" (BYTE shell1/shell8, the
//! live `shell` benchmark): `copies` launchers each run one script after
//! another; a script is `sh` starting a pipeline of `commands` short-lived
//! processes and waiting for the last.
//!
//! Model: `sh` pays `sh_work`, then `fork_cost` per command it starts. A
//! command does half its `command_work` at once (exec, the loader: this
//! overlaps with the stages before it, as in a real pipeline), then waits
//! for its input (the previous stage's end), does the other half and hands
//! on. No file I/O: the live script's files stay in the page cache.
//! `script_time` is launch to sh's exit, as live.

use super::{empty, task, MAYBE_NO_CPU, PIPE_MSGS};
use crate::program::{Class, Dur, Step};
use crate::spec::Spec;
use crate::workload::{Report, WorkloadDef};
use crate::SimError;
use schedlab_core::param::{Kind, Param, Resolved};

pub(super) const PARAMS: &[Param] = &[
    Param::new("copies", Kind::Count { min: 1, max: 1000 }, "1", "scripts running at once (E1: 1 and 8)"),
    Param::new(
        "commands",
        Kind::Count { min: 1, max: 64 },
        "8",
        "processes the script starts, as one pipeline (the live script: 8 besides sh)",
    ),
    Param::new("sh_work", MAYBE_NO_CPU, "1ms", "CPU of sh itself per run (start-up, parsing)"),
    Param::new("fork_cost", MAYBE_NO_CPU, "100us", "CPU in sh per command it starts (fork)"),
    Param::new("command_work", MAYBE_NO_CPU, "400us", "CPU per command (exec, the loader, its work, exit)"),
];

pub(super) fn build(spec: &Spec, v: &Resolved) -> Result<WorkloadDef, SimError> {
    let (copies, commands) = (v.u64("copies") as usize, v.u64("commands") as usize);
    let (sh_work, fork, work) = (v.u64("sh_work"), v.u64("fork_cost"), v.u64("command_work"));
    if sh_work + commands as u64 * (fork + work) == 0 {
        // A script taking no time would spin the launcher at one instant.
        return Err(spec.bad_value(
            "command_work",
            "0",
            "some CPU per script: sh_work, fork_cost or command_work above 0",
        ));
    }
    let mut wl = empty("shell");
    for c in 0..copies {
        // Channel `first + i` feeds command i (i >= 1); `first + commands` is
        // the last command's output to sh, `first + commands + 1` sh's exit.
        let first = wl.channels.len();
        wl.channels.extend(std::iter::repeat_n(PIPE_MSGS, commands + 2));
        let done = first + commands + 1;
        let cmd0 = wl.tasks.len();
        for i in 0..commands {
            let mut prog = vec![Step::Run(Dur::Fixed(work / 2))];
            if i > 0 {
                prog.push(Step::Recv(first + i));
            }
            prog.extend([Step::Run(Dur::Fixed(work - work / 2)), Step::Send(first + i + 1)]);
            wl.tasks.push(task(&format!("cmd{c}.{i}"), Class::Normal, 0, 0, prog));
        }
        let mut sh = vec![Step::Run(Dur::Fixed(sh_work))];
        for i in 0..commands {
            sh.extend([Step::Run(Dur::Fixed(fork)), Step::Fork(cmd0 + i)]);
        }
        sh.extend([Step::Recv(first + commands), Step::Send(done)]);
        let sh_t = wl.tasks.len();
        wl.tasks.push(task(&format!("sh{c}"), Class::Normal, 0, 0, sh));
        let launcher = vec![Step::Loop(None, vec![Step::Stamp, Step::Fork(sh_t), Step::Recv(done), Step::Record(0)])];
        wl.tasks.push(task(&format!("copy{c}"), Class::Normal, 0, 1, launcher));
    }
    wl.series = vec!["script_time".into()];
    wl.report = Report::Shell;
    wl.headline = vec!["scripts_per_min".into(), "script_time".into()];
    Ok(wl)
}
