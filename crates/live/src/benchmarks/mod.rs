//! The benchmarks, one file each, and the registry: the only list of them.
//! The machinery in `harness` and `host` never names a benchmark; the
//! runner finds a benchmark's runner entry through [`find`].

pub mod build;
pub mod cyclic;
pub mod exectime;
pub mod fileio;
pub mod hackbench;
pub mod hogs;
pub mod http;
pub mod interactive;
pub mod pipe;
pub mod shell;
pub mod spawn;
pub mod threads;
pub mod wakeup;

use crate::{Benchmark, LiveError};

static PIPE: pipe::Pipe = pipe::Pipe;
static SPAWN: spawn::Spawn = spawn::Spawn;
static THREADS: threads::Threads = threads::Threads;
static HACKBENCH: hackbench::Hackbench = hackbench::Hackbench;
static WAKEUP: wakeup::Wakeup = wakeup::Wakeup;
static CYCLIC: cyclic::Cyclic = cyclic::Cyclic;
static EXECTIME: exectime::ExecTime = exectime::ExecTime;
static SHELL: shell::Shell = shell::Shell;
static FILEIO: fileio::FileIo = fileio::FileIo;
static HTTP: http::Http = http::Http;
static BUILD: build::Build = build::Build;
static INTERACTIVE: interactive::Interactive = interactive::Interactive;
static HOGS: hogs::Hogs = hogs::Hogs;

/// All benchmarks, in suite order.
pub fn all() -> Vec<&'static dyn Benchmark> {
    vec![
        &PIPE,
        &SPAWN,
        &THREADS,
        &HACKBENCH,
        &WAKEUP,
        &CYCLIC,
        &EXECTIME,
        &SHELL,
        &FILEIO,
        &HTTP,
        &BUILD,
        &INTERACTIVE,
        &HOGS,
    ]
}

/// Look a benchmark up by name (case-insensitive).
pub fn find(name: &str) -> Result<&'static dyn Benchmark, LiveError> {
    let all = all();
    all.iter().copied().find(|b| b.name().eq_ignore_ascii_case(name.trim())).ok_or_else(|| {
        LiveError::UnknownBenchmark {
            name: name.to_string(),
            valid: all.iter().map(|b| b.name()).collect::<Vec<_>>().join(", "),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Params;

    #[test]
    fn registry_finds_by_name_and_lists_valid_names() {
        assert_eq!(find("PIPE").unwrap().name(), "pipe");
        let e = find("hackbenchx").unwrap_err().to_string();
        assert!(
            e.contains(
                "pipe, spawn, threads, hackbench, wakeup, cyclic, exectime, shell, fileio, http, build, interactive"
            ),
            "{e}"
        );
        for b in all() {
            assert!(!b.summary().is_empty());
            for p in b.params() {
                assert!(!p.help.is_empty(), "{}.{} has no help", b.name(), p.name);
                // Every default must pass its own validation.
                Params::new().resolve(b.name(), b.params(), false).unwrap();
                Params::new().resolve(b.name(), b.params(), true).unwrap();
            }
        }
    }
}
