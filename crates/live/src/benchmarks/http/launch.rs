//! Starting, watching and stopping the server under test: the built-in one
//! (see `server.rs`), a `server_cmd` (forked in its own process group,
//! given the condition by pid before it execs `/bin/sh -c CMD`, waited for
//! until it accepts connections, SIGTERMed then SIGKILLed as a group), or
//! an external one that schedlab only reads (`server_pid`).

use super::probe::{Probe, Source};
use super::server::{self, Model};
use crate::error::LiveError;
use crate::harness::hygiene::Children;
use crate::harness::{self, condition, now_ns, runner, Ctx};
use schedlab_core::SchedCondition;
use std::ffi::CString;
use std::io::BufReader;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::Duration;

const NAME: &str = "http";
/// The built-in server says "ok" within this.
const HELLO_MS: u64 = 10_000;

/// A running server and what schedlab knows of it.
pub(crate) struct Server {
    /// Killed (group SIGKILL) and reaped on drop.
    kids: Children,
    pub pid: Option<i32>,
    pub addr: SocketAddr,
    pub applied: Option<SchedCondition>,
    pub probe: Option<Probe>,
    /// The server's stdout and stderr; removed on drop unless an error names it.
    log: Option<PathBuf>,
    keep_log: std::cell::Cell<bool>,
    /// The built-in server's control pipe (closing it stops the server).
    ctl: Option<OwnedFd>,
    what: String,
    pub warnings: Vec<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        // A server_cmd gets SIGTERM first, so nginx and friends clean up.
        if self.ctl.is_none() {
            if let Some(pid) = self.pid.filter(|_| !self.kids.pids().is_empty()) {
                // SAFETY: killpg on the group of our own unreaped child.
                unsafe { libc::killpg(pid, libc::SIGTERM) };
                let until = now_ns() + 2_000_000_000;
                while now_ns() < until && !exited(pid) {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
        self.ctl = None;
        self.kids.kill_all();
        if let Some(log) = self.log.as_ref().filter(|_| !self.keep_log.get()) {
            let _ = std::fs::remove_file(log);
        }
    }
}

/// Whether our child `pid` has exited (it stays a zombie for the reaper).
fn exited(pid: i32) -> bool {
    // SAFETY: siginfo_t is plain data; zeroed is valid and si_pid stays 0 if nothing exited.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: info is writable; WNOWAIT leaves the child for the reaper.
    let r = unsafe {
        libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT)
    };
    // SAFETY: waitid filled info (or left it zeroed).
    r != 0 || unsafe { info.si_pid() } != 0
}

/// Exit status of an exited child, as text, without reaping it.
fn exit_text(pid: i32) -> String {
    // SAFETY: as in `exited`.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: as in `exited`.
    unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT) };
    // SAFETY: waitid filled info for an exited child.
    let (code, status) = unsafe { (info.si_code, info.si_status()) };
    match code {
        libc::CLD_EXITED => format!("exit status {status}"),
        _ => format!("killed by signal {status}"),
    }
}

/// The last non-blank lines of a log, joined with " | ".
pub(crate) fn tail(path: &std::path::Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let v: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    if v.is_empty() {
        return "(no output)".into();
    }
    v[v.len().saturating_sub(lines)..].join(" | ")
}

fn log_path(tag: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    std::env::temp_dir().join(format!("schedlab-http-{tag}-{}-{n}.log", std::process::id()))
}

fn open_log(path: &std::path::Path) -> Result<std::fs::File, LiveError> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().create(true).truncate(true).write(true).mode(0o600).open(path).map_err(|e| {
        LiveError::Os { what: "creating the server's log file", detail: e.to_string(), hint: "check $TMPDIR" }
    })
}

fn devnull() -> Result<OwnedFd, LiveError> {
    std::fs::OpenOptions::new().read(true).write(true).open("/dev/null").map(OwnedFd::from).map_err(|e| LiveError::Os {
        what: "opening /dev/null",
        detail: e.to_string(),
        hint: "check /dev",
    })
}

fn cstring(s: impl Into<Vec<u8>>) -> Result<CString, LiveError> {
    CString::new(s)
        .map_err(|_| LiveError::Measurement { bench: NAME, detail: "a NUL byte in the server's command".into() })
}

/// Apply the condition to `pid` and read it back; RT tasks are watched.
fn condition_on(ctx: &Ctx, pid: i32, cond: &SchedCondition) -> Result<SchedCondition, LiveError> {
    if cond.policy.is_realtime() {
        ctx.watch(pid);
    }
    condition::apply(pid, cond, None)?;
    condition::read_back(pid)
}

/// Poll `fd` for input up to `ms`, watching the stop flag and the deadline.
fn wait_readable(ctx: &Ctx, fd: i32, ms: u64) -> Result<bool, LiveError> {
    let until = now_ns() + ms * 1_000_000;
    loop {
        ctx.check_stop(now_ns())?;
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, 100) };
        if r > 0 {
            return Ok(true);
        }
        if now_ns() >= until {
            return Ok(false);
        }
    }
}

/// What the built-in server is told.
pub(crate) struct BuiltinCfg {
    pub listen: SocketAddr,
    pub model: Model,
    pub workers: usize,
    pub page_size: usize,
}

/// Bind, fork, exec the built-in server, give it the condition, wait for "ok".
pub(crate) fn builtin(ctx: &Ctx, cond: &SchedCondition, cfg: &BuiltinCfg) -> Result<Server, LiveError> {
    builtin_with(ctx, cond, cfg, runner::available())
}

/// [`builtin`], re-executing this binary (`exec`) or serving in the forked
/// copy (the fallback where the constructor mechanism did not run).
fn builtin_with(ctx: &Ctx, cond: &SchedCondition, cfg: &BuiltinCfg, exec: bool) -> Result<Server, LiveError> {
    let listener = server::bind(cfg.listen).map_err(|e| bind_error(cfg.listen, &e))?;
    let addr = listener.local_addr().map_err(|e| LiveError::Os {
        what: "reading the server's port",
        detail: e.to_string(),
        hint: "check the network stack",
    })?;
    let (ctl_r, ctl_w) = harness::pipe()?;
    let (rep_r, rep_w) = harness::pipe()?;
    let spec = server::Spec {
        listen: listener.as_raw_fd(),
        ctl: ctl_r.as_raw_fd(),
        rep: rep_w.as_raw_fd(),
        model: cfg.model,
        workers: cfg.workers,
        page_size: cfg.page_size,
        mlock: cond.mlock,
    };
    let env = runner::process_env(super::SERVER_PROCESS.name, &spec.encode())?;
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|c| c.as_ptr()).collect();
    envp.push(std::ptr::null());
    let argv0 = cstring("schedlab-httpd")?;
    let argv = [argv0.as_ptr(), std::ptr::null()];
    let log = log_path("builtin");
    let logf = open_log(&log)?;
    let null = devnull()?;
    let (lfd, nfd, cw, rr) = (logf.as_raw_fd(), null.as_raw_fd(), ctl_w.as_raw_fd(), rep_r.as_raw_fd());
    let mut kids = Children::new();
    // SAFETY (exec): the child only calls close, fcntl, dup2 and execve on
    // values prepared above (async-signal-safe), then _exits if execve fails.
    // SAFETY (fallback): the child runs the server in this image: it
    // allocates (glibc resets its malloc locks in the child of fork) and
    // takes no lock a parent thread could hold (no stdio, no shared std::sync).
    let pid = unsafe {
        kids.fork(|| {
            libc::close(cw);
            libc::close(rr);
            libc::dup2(nfd, 0);
            libc::dup2(nfd, 1);
            libc::dup2(lfd, 2);
            if !exec {
                return server::serve(&spec);
            }
            for fd in [spec.listen, spec.ctl, spec.rep] {
                libc::fcntl(fd, libc::F_SETFD, 0);
            }
            libc::execve(c"/proc/self/exe".as_ptr(), argv.as_ptr(), envp.as_ptr());
            127
        })
    }?;
    // The server's copies are its own: closing ours makes a dead server
    // refuse connections instead of leaving them queued here.
    drop((listener, ctl_r, rep_w, logf, null));
    let mut srv = Server {
        kids,
        pid: Some(pid),
        addr,
        applied: None,
        probe: None,
        log: Some(log),
        keep_log: std::cell::Cell::new(false),
        ctl: None,
        what: format!("the built-in server ({})", cfg.model.name()),
        warnings: Vec::new(),
    };
    if !exec {
        srv.warnings.push(
            "the built-in server runs in a forked copy of schedlab (this binary could not re-execute itself): its memory figures include schedlab's own pages".into(),
        );
    }
    srv.applied = Some(condition_on(ctx, pid, cond)?);
    if !harness::write_exact(cw, b"g") {
        return Err(srv.died("before it started"));
    }
    srv.ctl = Some(ctl_w);
    if !wait_readable(ctx, rr, HELLO_MS)? {
        return Err(srv.died(&format!("without saying it was ready within {} s", HELLO_MS / 1000)));
    }
    let mut rep = BufReader::new(std::fs::File::from(rep_r));
    let mut line = String::new();
    let _ = std::io::BufRead::read_line(&mut rep, &mut line);
    if line.trim() != "ok" {
        let why = line.trim().strip_prefix("err ").map_or("before it was ready".to_string(), |m| format!("({m})"));
        return Err(srv.died(&why));
    }
    let ctl = srv.ctl.as_ref().map_or(-1, |c| c.as_raw_fd());
    srv.probe = Some(Probe::new(pid, Source::Builtin { ctl, rep }));
    Ok(srv)
}

pub(crate) fn bind_error(addr: SocketAddr, e: &std::io::Error) -> LiveError {
    let value = addr.to_string();
    let expected = match e.raw_os_error() {
        Some(libc::EADDRINUSE) => format!(
            "a free address: {addr} is in use (EADDRINUSE); choose another port, or port 0 (listen={}:0) for a free one",
            addr.ip()
        ),
        Some(libc::EADDRNOTAVAIL) => format!("an address of this machine: {addr} is not one (EADDRNOTAVAIL); use 127.0.0.1:0"),
        Some(libc::EACCES) => format!("a port this user may bind: ports below 1024 need root or CAP_NET_BIND_SERVICE ({e})"),
        _ => format!("an address the server can listen on ({e})"),
    };
    LiveError::BadParam { bench: NAME, key: "listen".into(), value, expected }
}

impl Server {
    /// The error for a server that is gone or failed, with its stderr.
    fn died(&self, when: &str) -> LiveError {
        let status = match self.pid {
            Some(p) if exited(p) => exit_text(p),
            _ => "still running".into(),
        };
        let log = self.log.as_ref().map_or("(none)".into(), |l| l.display().to_string());
        let tail = self.log.as_deref().map_or_else(|| "(no output)".into(), |l| tail(l, 5));
        // The message names the log: it stays for the user.
        self.keep_log.set(true);
        LiveError::CommandFailed { bench: NAME, what: format!("{} stopped {when}", self.what), status, log, tail }
    }

    /// An error if the server we started has exited.
    pub(crate) fn check_alive(&self) -> Result<(), LiveError> {
        match self.pid {
            Some(p) if !self.kids.pids().is_empty() && exited(p) => Err(self.died("during the measurement")),
            _ => Ok(()),
        }
    }

    /// Read back the scheduling of every task of the server now (its
    /// threads inherit the condition; this says whether they kept it).
    pub(crate) fn applied_tasks(&self) -> Vec<SchedCondition> {
        if self.applied.is_none() {
            return Vec::new();
        }
        self.tasks_scheduling()
    }

    /// The scheduling of every task of the server's process tree now
    /// (empty when no pid is known).
    pub(crate) fn tasks_scheduling(&self) -> Vec<SchedCondition> {
        let Some(pid) = self.pid else { return Vec::new() };
        let mut out = Vec::new();
        for p in super::probe::tree(pid) {
            for tid in crate::host::counters::list_tasks(p).unwrap_or_default() {
                if let Ok(a) = condition::read_back(tid) {
                    out.push(a);
                }
            }
        }
        out
    }
}

/// Whether something accepts TCP connections at `addr` (within `ms`).
pub(crate) fn accepts(addr: SocketAddr, ms: u64) -> bool {
    std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(ms)).is_ok()
}

/// Start `cmd` with `/bin/sh -c` under the condition and wait until it
/// accepts connections at `addr`.
pub(crate) fn command(
    ctx: &Ctx,
    cond: &SchedCondition,
    cmd: &str,
    addr: SocketAddr,
    startup_ms: u64,
) -> Result<Server, LiveError> {
    if accepts(addr, 200) {
        return Err(LiveError::BadParam {
            bench: NAME,
            key: "url".into(),
            value: addr.to_string(),
            expected: format!(
                "a port nothing listens on yet: something already accepts connections at {addr}, so server_cmd's server could not bind it and schedlab would measure the other one; stop it or choose another port"
            ),
        });
    }
    let (go_r, go_w) = harness::pipe()?;
    let argv_c = [cstring("/bin/sh")?, cstring("-c")?, cstring(cmd)?];
    let mut argv: Vec<*const libc::c_char> = argv_c.iter().map(|c| c.as_ptr()).collect();
    argv.push(std::ptr::null());
    let env = runner::exec_env(None)?;
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|c| c.as_ptr()).collect();
    envp.push(std::ptr::null());
    let log = log_path("server-cmd");
    let logf = open_log(&log)?;
    let null = devnull()?;
    let (lfd, nfd, gr, gw) = (logf.as_raw_fd(), null.as_raw_fd(), go_r.as_raw_fd(), go_w.as_raw_fd());
    let mut kids = Children::new();
    // SAFETY: the child only calls close, dup2, read and execve on values
    // prepared above (async-signal-safe), then _exits.
    let pid = unsafe {
        kids.fork(|| {
            libc::close(gw);
            libc::dup2(nfd, 0);
            libc::dup2(lfd, 1);
            libc::dup2(lfd, 2);
            let mut b = 0u8;
            loop {
                let n = libc::read(gr, (&mut b as *mut u8).cast(), 1);
                if n == 1 {
                    break;
                }
                if n < 0 && *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                // The parent gave up (the condition was refused): never run the command.
                return 112;
            }
            libc::execve(argv[0], argv.as_ptr(), envp.as_ptr());
            127
        })
    }?;
    drop((go_r, logf, null));
    let mut srv = Server {
        kids,
        pid: Some(pid),
        addr,
        applied: None,
        probe: None,
        log: Some(log),
        keep_log: std::cell::Cell::new(false),
        ctl: None,
        what: format!("server_cmd '{cmd}'"),
        warnings: Vec::new(),
    };
    srv.applied = Some(condition_on(ctx, pid, cond)?);
    if !harness::write_exact(gw, b"g") {
        return Err(srv.died("before it started"));
    }
    drop(go_w);
    let until = now_ns() + startup_ms * 1_000_000;
    loop {
        ctx.check_stop(now_ns())?;
        if exited(pid) {
            return Err(srv.died(
                "at once, before accepting connections (a server that daemonizes must stay in the foreground: nginx -g 'daemon off;', apache2ctl -DFOREGROUND)",
            ));
        }
        if accepts(addr, 100) {
            break;
        }
        if now_ns() >= until {
            return Err(srv.died(&format!(
                "waiting: it did not accept connections at {addr} within {} (raise startup=, or check the port in its configuration)",
                schedlab_core::units::exact_duration(startup_ms * 1_000_000)
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    srv.probe = Some(Probe::new(pid, Source::Tree));
    Ok(srv)
}

/// A server schedlab did not start: `url` only, or with `server_pid`.
pub(crate) fn external(addr: SocketAddr, pid: Option<i32>) -> Server {
    Server {
        kids: Children::new(),
        pid,
        addr,
        applied: None,
        probe: pid.map(|p| Probe::new(p, Source::Tree)),
        log: None,
        keep_log: std::cell::Cell::new(false),
        ctl: None,
        what: format!("the server at {addr}"),
        warnings: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// One GET over a fresh connection: (status line, body length).
    fn get(addr: SocketAddr, path: &str) -> (String, usize) {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let mut v = Vec::new();
        s.read_to_end(&mut v).unwrap();
        let text = String::from_utf8_lossy(&v).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        (head.lines().next().unwrap_or("").to_string(), body.len())
    }

    /// Start the built-in server by re-execution or by the fork fallback;
    /// it must serve, report its cost and be gone after the drop.
    fn serves(exec: bool) -> Vec<String> {
        let plan = crate::RunPlan { repeat: 1, warmup: 0, ..Default::default() };
        let cfg =
            BuiltinCfg { listen: "127.0.0.1:0".parse().unwrap(), model: Model::Event, workers: 1, page_size: 1234 };
        let (out, _) = harness::drive(NAME, &plan, 1.0, 1, &|_| {}, |ctx| {
            let mut srv = builtin_with(ctx, &plan.condition, &cfg, exec)?;
            let pid = srv.pid.expect("a started server has a pid");
            let probe = srv.probe.as_mut().expect("the built-in server is probed");
            probe.begin().map_err(|d| LiveError::Measurement { bench: NAME, detail: d })?;
            assert_eq!(get(srv.addr, "/"), ("HTTP/1.1 200 OK".into(), 1234));
            assert_eq!(get(srv.addr, "/n/77"), ("HTTP/1.1 200 OK".into(), 77));
            let cost =
                srv.probe.as_mut().unwrap().end().map_err(|d| LiveError::Measurement { bench: NAME, detail: d })?;
            assert!(cost.voluntary.is_some() && cost.rss_peak.is_some_and(|b| b > 0), "{cost:?}");
            srv.check_alive()?;
            // The exec'd image started with the process entry's variable; a forked copy has the test's environment.
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let entry = b"SCHEDLAB_LIVE_RUNNER=process http-server ";
            let reexecuted = environ.split(|&b| b == 0).any(|v| v.starts_with(entry));
            let warnings = srv.warnings.clone();
            drop(srv);
            assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "the server outlived its drop");
            Ok((reexecuted, warnings))
        })
        .unwrap();
        let (reexecuted, warnings) = out;
        assert_eq!(reexecuted, exec);
        warnings
    }

    #[test]
    fn built_in_server_runs_re_executed_through_the_runner_hook() {
        assert!(runner::available(), "the test binary links the harness's constructor");
        assert!(serves(true).is_empty());
    }

    #[test]
    fn built_in_server_falls_back_to_a_forked_copy() {
        let w = serves(false);
        assert!(w.len() == 1 && w[0].contains("forked copy"), "{w:?}");
    }
}
