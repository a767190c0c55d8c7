//! # Methodology
//!
//! **Goal.** How the scheduler treats a web server under load: E1's Apache
//! Bench row (the default Apache page, 5,000 requests at concurrency 20,
//! per-request mean (sd) and max) and E2's web-serving soak (pages served
//! over time, average response, failed connections, and what the server
//! cost: CPU user/system, memory, swap). The *server* carries the run's
//! condition; the client measures it from outside.
//!
//! **Server.** By default schedlab's own, started for the case in a process
//! of its own (this binary re-executed, see `server.rs`), bound to
//! `listen` (127.0.0.1, a free port), serving from memory a page of `size`
//! bytes at `/` (default 10,701 bytes: Debian 12's stock Apache page,
//! `/usr/share/apache2/default-site/index.html` in apache2-data
//! 2.4.71-1~deb12u1, the page E1-style runs fetch) and `/n/BYTES` for any
//! other size up to 64 MiB. `server=threads`: a thread per open connection,
//! sleeping in the kernel while its connection is idle (Apache's worker
//! model; the pool grows with the connections and keeps its threads);
//! `server=event`: a tokio runtime of `workers` threads, each serving many
//! connections (nginx's model). hyper parses requests; heads above 8 KiB get
//! 431, bodies above 64 KiB 413, any `..`/`.` segment (raw or
//! %-encoded) 400. Or any server: `url=http://HOST:PORT/PATH` alone (schedlab
//! knows no process: the server's cost is unknown), with `server_pid=`
//! (its process tree is read), or with `server_cmd='nginx -c ...'`, which
//! schedlab starts by `/bin/sh -c` under the condition (given by pid before
//! the command runs, so every process and thread it starts inherits it),
//! waits for (`startup`, its stderr shown when it fails) and stops
//! (SIGTERM, then SIGKILL, as a process group). A server schedlab did not
//! start cannot be put under a condition: `url=` or `server_pid=` without
//! `server_cmd=` refuse `--policy/--prio/--nice/--cpus/--mlock`, and the
//! result says in a warning that no condition was applied (with
//! `server_pid=`, what its tasks ran under, read back at the end).
//!
//! **Client.** `client_threads` threads (default: one per client CPU, at
//! most 8 and at most `concurrency`), each driving its share of the
//! `concurrency` connections from one epoll loop (`client.rs`), on
//! `client_cpus` (default: the CPUs the process may use minus `--cpus`, when
//! that leaves any; else unpinned, sharing CPUs with the server as ab does
//! on one host). Requests are `GET PATH HTTP/1.1`, with `Connection: close`
//! unless `keepalive=on`. Closed loop (ab's model): `requests` requests in
//! all; each of the `concurrency` slots sends its next request the moment
//! its previous response is complete, and that request's time runs from
//! then, so `concurrency` requests are always outstanding and the client's
//! own delay in getting to a slot is charged, as ab charges its own (by
//! Little's law mean response time = concurrency / requests/s, for both).
//! Without keep-alive the finished socket waits apart for the server's
//! close, so the server keeps the TIME_WAIT (two sockets per slot at most).
//! Open loop (`rate=R`, wrk2's model): request j is due at `j/R` s and goes
//! on connection `j mod concurrency`; response times run from the due time
//! (`response_time`, coordinated omission corrected) and from the actual
//! send (`response_time_uncorrected`); when the server cannot keep up the
//! result warns with the achieved rate. Soak (`duration=T`): each
//! repetition runs for T (closed or open loop), and every `interval` the
//! pages served, mean and p99 response time and failures of that interval
//! are a point of a series (E2's "pages served over time"); a Ctrl-C or
//! `--timeout` during a soak keeps every finished interval (the result is
//! marked incomplete).
//!
//! **Timed.** Per request, as ab: connect (0 on a kept-alive connection),
//! waiting (request written to first response byte), total (start to last
//! byte; closed loop: start = when the slot became free), CLOCK_MONOTONIC. A repetition's wall time runs from the common
//! start to its last completion; requests/s = 2xx responses / wall time.
//! Failed requests (refused, reset, timeout after `timeout`, non-2xx, short
//! body, other) are counted per class and kept out of the time histograms;
//! a repetition where every request failed is an error, never a figure.
//!
//! **Server cost** (per repetition, `probe.rs`): CPU user and system time,
//! voluntary and involuntary context switches, average and peak resident
//! memory and average swap of the server's processes only. Unknown figures
//! (no server process known, a task that exited and took its counts with
//! it) are left out with a warning, never reported as zero.
//!
//! **Client cost.** Each client thread's CPU time; when the busiest was busy
//! 90 % or more of the wall time, the client, not the server, may have set
//! the pace (httperf's rule) and the result warns.
//!
//! **Warm-up.** `warmup` repetitions of a tenth of the requests (at least
//! 200 and `concurrency`; a soak: a tenth of `duration`, at most 10 s) are
//! run and discarded: the server's threads, page cache and the client's
//! connections are warm when the measured repetitions start.
//!
//! **Metrics.** Per repetition: `requests_per_s` (headline),
//! `pages_served`, `failures` and `failed_<class>`, `server_user_time`,
//! `server_sys_time`, `server_cpu_percent` (of one CPU over the wall time),
//! `server_cpu_per_request`, `server_voluntary_switches`,
//! `server_involuntary_switches`, `server_rss_avg`, `server_rss_peak`,
//! `server_swap_avg`, `client_cpu_percent` (busiest client thread); open
//! loop: `rate_achieved` (achieved / asked) and `sent_late` (sent > 1 ms
//! after their due time). Histograms (ns, one per repetition):
//! `response_time` (headline), `connect_time`, `waiting_time`,
//! `response_time_uncorrected` (open loop). Soak series: `pages_per_s`,
//! `response_mean`, `response_p99`, `interval_failures`.
//!
//! **Known biases.** Client and server share the machine (and, without
//! `--cpus`, its CPUs): the client's own scheduling is part of what a
//! closed loop measures. Loopback TCP has no network delay, so times are
//! mostly CPU and scheduling. The built-in server is not Apache: compare
//! its two models with each other, and real servers through `server_cmd`.
//! Without keep-alive, every request takes a new local port: a long fast
//! soak can run out of them (counted as `other` failures, with a hint).
//! SCHED_DEADLINE is refused: servers create threads.

mod client;
mod launch;
mod probe;
mod server;

use crate::error::LiveError;
use crate::harness::params::{ParamKind, ParamSpec, Params, SizeUnit, TimeUnit};
use crate::harness::{self, condition, load, now_ns, Ctx};
use crate::{Benchmark, RunPlan};
use client::{End, RepOut, CLASSES};
use schedlab_core::{BenchResult, BenchStatus, Direction, LatencyHistogram, Metric, SchedCondition, TimeSeries, Unit};
use server::Model;
use std::net::SocketAddr;

pub struct Http;

/// The built-in server, a fresh image of this binary started through the
/// harness's re-exec hook (`harness/runner.rs`).
pub(crate) const SERVER_PROCESS: crate::harness::runner::ProcessEntry =
    crate::harness::runner::ProcessEntry { name: "http-server", main: server::process_main };

const NAME: &str = "http";

/// Bytes of Debian 12's stock Apache index page
/// (`/usr/share/apache2/default-site/index.html`, apache2-data
/// 2.4.71-1~deb12u1), the default page size.
pub const DEBIAN_APACHE_PAGE_BYTES: u64 = 10_701;

/// Most connections accepted at all; the open-file limit refuses fewer.
const MAX_CONCURRENCY: u64 = 1_000_000;
const MAX_RATE: f64 = 10_000_000.0;
const MAX_DURATION_NS: u64 = 30 * 24 * 3600 * 1_000_000_000;
/// Descriptors the client and server need beside one per connection.
const FD_SLACK: u64 = 64;
/// Nominal cost of one closed-loop request on loopback, for the estimate.
const NOMINAL_REQUEST_S: f64 = 60e-6;

pub(crate) const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "requests",
        default: "5000",
        quick_default: Some("2000"),
        unit: "requests",
        help: "requests per repetition, succeeded or failed (E1: 5,000; ab -n); not with duration=",
        kind: ParamKind::Count { min: 1, max: 1_000_000_000 },
        diagnostic: false,
    },
    ParamSpec {
        name: "concurrency",
        default: "20",
        quick_default: None,
        unit: "connections",
        help: "connections open at once, one request in flight on each (E1: 20; ab -c)",
        kind: ParamKind::Count { min: 1, max: MAX_CONCURRENCY },
        diagnostic: false,
    },
    ParamSpec {
        name: "keepalive",
        default: "off",
        quick_default: None,
        unit: "",
        help: "reuse connections (ab -k); off: Connection: close, a new connection per request",
        kind: ParamKind::Flag,
        diagnostic: false,
    },
    ParamSpec {
        name: "rate",
        default: "off",
        quick_default: None,
        unit: "requests/s",
        help: "open loop at this many requests per second (wrk2 -R), times charged from each request's due time; off: closed loop",
        kind: ParamKind::Text,
        diagnostic: false,
    },
    ParamSpec {
        name: "duration",
        default: "off",
        quick_default: None,
        unit: "",
        help: "soak: run each repetition this long (e.g. 10m, 24h) with a per-interval series; off: requests= decides",
        kind: ParamKind::Text,
        diagnostic: false,
    },
    ParamSpec {
        name: "interval",
        default: "1000",
        quick_default: None,
        unit: "",
        help: "a soak's series interval (pages/s, mean and p99 response, failures per interval)",
        kind: ParamKind::Duration { unit: TimeUnit::Ms, min: 10, max: 3_600_000 },
        diagnostic: false,
    },
    ParamSpec {
        name: "server",
        default: "threads",
        quick_default: None,
        unit: "",
        help: "built-in server model: threads (a thread per open connection, like Apache's worker) or event (workers= event-loop threads, like nginx)",
        kind: ParamKind::Choice(&["threads", "event"]),
        diagnostic: false,
    },
    ParamSpec {
        name: "workers",
        default: "0",
        quick_default: None,
        unit: "threads",
        help: "event: event-loop threads; threads: threads started before the first connection (the pool grows); 0: event one per server CPU, threads 1",
        kind: ParamKind::Count { min: 0, max: 4096 },
        diagnostic: false,
    },
    ParamSpec {
        name: "size",
        default: "10701",
        quick_default: None,
        unit: "",
        help: "bytes of the built-in server's page at / (default: Debian's stock Apache page); /n/BYTES serves other sizes",
        kind: ParamKind::Size { unit: SizeUnit::Bytes, min: 0, max: server::SIZED_MAX },
        diagnostic: false,
    },
    ParamSpec {
        name: "path",
        default: "/",
        quick_default: None,
        unit: "",
        help: "path requested from the built-in server or server_cmd's (e.g. /n/4096); with url= the path is the URL's",
        kind: ParamKind::Text,
        diagnostic: false,
    },
    ParamSpec {
        name: "listen",
        default: "127.0.0.1:0",
        quick_default: None,
        unit: "",
        help: "address:port of the built-in server; port 0: a free one; loopback unless you ask otherwise",
        kind: ParamKind::Text,
        diagnostic: false,
    },
    ParamSpec {
        name: "url",
        default: "none",
        quick_default: None,
        unit: "",
        help: "measure another server: http://HOST:PORT/PATH (alone, with server_pid= or with server_cmd=); none: the built-in server",
        kind: ParamKind::Text,
        diagnostic: false,
    },
    ParamSpec {
        name: "server_cmd",
        default: "none",
        quick_default: None,
        unit: "",
        help: "start this server under the condition with /bin/sh -c, in the foreground, listening at url=; quote it: server_cmd='nginx -c /etc/x.conf -g \"daemon off;\"'",
        kind: ParamKind::Text,
        diagnostic: false,
    },
    ParamSpec {
        name: "server_pid",
        default: "0",
        quick_default: None,
        unit: "",
        help: "pid of the running server at url= whose process tree's CPU, switches and memory are recorded; 0: none",
        kind: ParamKind::Count { min: 0, max: 4_194_304 },
        diagnostic: false,
    },
    ParamSpec {
        name: "startup",
        default: "10000",
        quick_default: None,
        unit: "",
        help: "how long server_cmd's server may take to accept connections",
        kind: ParamKind::Duration { unit: TimeUnit::Ms, min: 10, max: 600_000 },
        diagnostic: false,
    },
    ParamSpec {
        name: "timeout",
        default: "30000",
        quick_default: None,
        unit: "",
        help: "a request without a complete response after this fails as a timeout (ab -s: 30 s)",
        kind: ParamKind::Duration { unit: TimeUnit::Ms, min: 1, max: 3_600_000 },
        diagnostic: false,
    },
    ParamSpec {
        name: "client_cpus",
        default: "auto",
        quick_default: None,
        unit: "",
        help: "CPUs of the client's threads, e.g. 2-3; auto: those the process may use minus --cpus, when any are left, else unpinned",
        kind: ParamKind::Text,
        diagnostic: false,
    },
    ParamSpec {
        name: "client_threads",
        default: "0",
        quick_default: None,
        unit: "threads",
        help: "client threads, each driving its share of the connections; 0: one per client CPU, at most 8",
        kind: ParamKind::Count { min: 0, max: 256 },
        diagnostic: false,
    },
];

/// A parsed `url=`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Url {
    /// HOST[:PORT] as written, for the Host header.
    pub authority: String,
    pub addr: SocketAddr,
    pub path: String,
}

/// `http://HOST[:PORT][/PATH]`; the host is resolved here.
pub(crate) fn parse_url(s: &str) -> Result<Url, String> {
    let s = s.trim();
    let lower = s.to_ascii_lowercase();
    let rest = if lower.starts_with("http://") {
        &s[7..]
    } else if lower.starts_with("https://") {
        return Err(
            "an http:// URL: https is not supported (the client speaks plain HTTP/1.1); put the server on plain http"
                .into(),
        );
    } else {
        return Err("an http:// URL such as http://127.0.0.1:8080/ (scheme, host, optional port and path)".into());
    };
    let (authority, path) = match rest.find(['/', '?', '#']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let path = path.split('#').next().unwrap_or("/");
    let path = if path.starts_with('/') { path.to_string() } else { format!("/{path}") };
    if authority.is_empty() || authority.contains('@') || path.contains(char::is_whitespace) {
        return Err("an http:// URL with a host, no user name and no spaces, e.g. http://127.0.0.1:8080/".into());
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or("an http:// URL: the IPv6 address has no closing ]")?;
        (h, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        None => 80,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|&p| p > 0)
            .ok_or_else(|| format!("an http:// URL: port '{p}' is not 1-65535"))?,
    };
    if host.is_empty() {
        return Err("an http:// URL with a host, e.g. http://127.0.0.1:8080/".into());
    }
    use std::net::ToSocketAddrs;
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("an http:// URL whose host resolves: '{host}' does not ({e})"))?
        .next()
        .ok_or_else(|| format!("an http:// URL whose host resolves: '{host}' has no address"))?;
    Ok(Url { authority: authority.to_string(), addr, path })
}

#[derive(Debug, Clone)]
enum Target {
    Builtin { listen: SocketAddr, model: Model, workers: usize, size: usize, path: String },
    Command { cmd: String, url: Url, startup_ms: u64 },
    External { url: Url, pid: Option<i32> },
}

/// A resolved case.
#[derive(Debug, Clone)]
struct Cfg {
    target: Target,
    requests: u64,
    concurrency: usize,
    keepalive: bool,
    rate: Option<f64>,
    duration_ns: Option<u64>,
    interval_ns: u64,
    timeout_ns: u64,
    client_cpus: Option<Vec<usize>>,
    client_threads: usize,
    /// Client CPUs overlap the server's (or either is unpinned).
    shared_cpus: bool,
}

impl Cfg {
    /// Open files per connection in the process that needs the most: the
    /// client's one, two without keep-alive (a closed socket may wait for
    /// the server's close while its slot opens the next), or the built-in
    /// threads server's three.
    fn fds_per_connection(&self) -> u64 {
        let client = if self.keepalive { 1 } else { 2 };
        match self.target {
            Target::Builtin { model: Model::Threads, .. } => 3,
            _ => client,
        }
    }

    fn starts_server(&self) -> bool {
        !matches!(self.target, Target::External { .. })
    }

    /// Units (requests, or ms of a soak) and the end of repetition `rep`.
    fn end(&self, warm: bool) -> End {
        match self.duration_ns {
            Some(t) if warm => End::For((t / 10).clamp(1_000_000, 10_000_000_000)),
            Some(t) => End::For(t),
            None if warm => {
                End::Requests((self.requests / 10).max(200).max(self.concurrency as u64).min(self.requests))
            }
            None => End::Requests(self.requests),
        }
    }
}

fn units(end: End) -> u64 {
    match end {
        End::Requests(n) => n,
        End::For(ns) => ns / 1_000_000,
    }
}

fn nominal_s(end: End, rate: Option<f64>) -> f64 {
    match (end, rate) {
        (End::For(ns), _) => ns as f64 / 1e9,
        (End::Requests(n), Some(r)) => n as f64 / r,
        (End::Requests(n), None) => n as f64 * NOMINAL_REQUEST_S,
    }
}

fn bad(key: &str, value: &str, expected: impl Into<String>) -> LiveError {
    LiveError::BadParam { bench: NAME, key: key.into(), value: value.into(), expected: expected.into() }
}

/// The given (not defaulted) value of `key`, if any.
fn given<'a>(user: &'a Params, key: &str) -> Option<&'a str> {
    user.get(key)
}

fn config(user: &Params, p: &Params, plan: &RunPlan) -> Result<Cfg, LiveError> {
    let requests = p.count("requests")?;
    let concurrency = p.count("concurrency")?;
    let keepalive = p.word("keepalive")? == "on";
    let rate = match p.word("rate")? {
        "off" => None,
        v => {
            let r: f64 = v
                .trim_end_matches("/s")
                .trim()
                .parse()
                .map_err(|_| bad("rate", v, "off, or requests per second above 0, e.g. rate=1000"))?;
            if !(r > 0.0 && r.is_finite()) {
                return Err(bad("rate", v, "a rate above 0 requests/s (leave rate out for a closed loop)"));
            }
            if r > MAX_RATE {
                return Err(bad("rate", v, format!("at most {MAX_RATE:.0} requests/s")));
            }
            Some(r)
        }
    };
    let interval_ns = p.count("interval")? * 1_000_000;
    let duration_ns = match p.word("duration")? {
        "off" => None,
        v => {
            let ns = schedlab_core::units::parse_duration_ns(v)
                .map_err(|e| bad("duration", v, format!("off or a duration: {e}")))?;
            if ns == 0 {
                return Err(bad("duration", v, "a soak longer than 0 (leave duration out to run requests=)"));
            }
            if ns > MAX_DURATION_NS {
                return Err(bad("duration", v, "at most 30 days (720h) per repetition"));
            }
            if ns < interval_ns {
                return Err(bad(
                    "duration",
                    v,
                    format!("at least one interval ({})", schedlab_core::units::exact_duration(interval_ns)),
                ));
            }
            Some(ns)
        }
    };
    if duration_ns.is_some() && given(user, "requests").is_some() {
        return Err(bad(
            "requests",
            p.get("requests").unwrap_or(""),
            "no value with duration=: a soak runs for its duration; give one of them",
        ));
    }
    if duration_ns.is_none() && given(user, "interval").is_some() {
        return Err(bad(
            "interval",
            p.get("interval").unwrap_or(""),
            "no value without duration=: the series interval belongs to a soak",
        ));
    }
    if duration_ns.is_none() && rate.is_none() && requests < concurrency {
        return Err(bad(
            "concurrency",
            &concurrency.to_string(),
            format!("at most requests={requests}: more connections than requests would leave some idle (ab refuses this too)"),
        ));
    }
    let url = match p.word("url")? {
        "none" => None,
        v => Some(parse_url(v).map_err(|e| bad("url", v, e))?),
    };
    let cmd = Some(p.word("server_cmd")?).filter(|c| *c != "none").map(str::to_string);
    let pid = Some(p.count("server_pid")?).filter(|&n| n > 0).map(|n| n as i32);
    let builtin_only = ["server", "workers", "size", "listen", "path"];
    let target = match (url, cmd, pid) {
        (None, None, None) => {
            for k in ["startup"] {
                if let Some(v) = given(user, k) {
                    return Err(bad(k, v, "no value: startup= applies to server_cmd="));
                }
            }
            let listen_text = p.word("listen")?;
            let listen: SocketAddr = listen_text.parse().map_err(|_| {
                bad("listen", listen_text, "ADDRESS:PORT, e.g. 127.0.0.1:0 (port 0: a free one) or 127.0.0.1:8080")
            })?;
            let path = p.word("path")?.to_string();
            if !path.starts_with('/') || path.contains(char::is_whitespace) {
                return Err(bad("path", &path, "a path starting with / and without spaces, e.g. / or /n/4096"));
            }
            let model = if p.word("server")? == "event" { Model::Event } else { Model::Threads };
            let server_cpus = condition::preflight(&plan.condition)?.len().max(1);
            let workers = match (p.count("workers")? as usize, model) {
                (0, Model::Event) => server_cpus.min(4096),
                (0, Model::Threads) => 1,
                (n, _) => n,
            };
            Target::Builtin { listen, model, workers, size: p.count("size")? as usize, path }
        }
        (None, Some(_), _) | (None, None, Some(_)) => {
            let key = if pid.is_some() { "server_pid" } else { "server_cmd" };
            return Err(bad(
                key,
                p.get(key).unwrap_or(""),
                "a server with url=http://HOST:PORT/PATH too, so the client knows where it listens",
            ));
        }
        (Some(_), Some(_), Some(_)) => {
            return Err(bad(
                "server_pid",
                &pid.unwrap_or(0).to_string(),
                "no value with server_cmd=: schedlab knows the processes it starts; give one of them",
            ));
        }
        (Some(url), cmd, pid) => {
            for k in builtin_only {
                if let Some(v) = given(user, k) {
                    return Err(bad(
                        k,
                        v,
                        format!("no value with url=: {k}= applies to the built-in server (put the path in the URL)"),
                    ));
                }
            }
            match cmd {
                Some(cmd) => Target::Command { cmd, url, startup_ms: p.count("startup")? },
                None => {
                    if let Some(v) = given(user, "startup") {
                        return Err(bad("startup", v, "no value: startup= applies to server_cmd="));
                    }
                    if let Some(pid) = pid {
                        if !probe::exists(pid) {
                            return Err(bad(
                                "server_pid",
                                &pid.to_string(),
                                format!("the pid of a running server: there is no process {pid} (it may have exited); find it with pgrep, e.g. pgrep -o nginx"),
                            ));
                        }
                    }
                    Target::External { url, pid }
                }
            }
        }
    };
    // The client's CPUs.
    let allowed = condition::get_affinity(0).unwrap_or_default();
    let server_cpus: Option<Vec<usize>> =
        if matches!(target, Target::External { .. }) { None } else { plan.condition.cpus.clone() };
    let cpus_text = p.word("client_cpus")?;
    let client_cpus = if cpus_text == "auto" {
        server_cpus.as_ref().and_then(|s| {
            let rest: Vec<usize> = allowed.iter().copied().filter(|c| !s.contains(c)).collect();
            (!rest.is_empty()).then_some(rest)
        })
    } else {
        let list = schedlab_core::condition::parse_cpu_list(cpus_text)
            .map_err(|_| bad("client_cpus", cpus_text, "auto or a CPU list such as 2-3 or 0,2"))?;
        condition::check_cpus(&list, &condition::online_cpus()?)?;
        Some(list)
    };
    let shared_cpus = match (&client_cpus, &server_cpus) {
        (Some(c), Some(s)) => c.iter().any(|x| s.contains(x)),
        _ => true,
    };
    let ncpu = client_cpus.as_ref().map_or(allowed.len(), Vec::len).max(1);
    let client_threads = match p.count("client_threads")? as usize {
        0 => ncpu.min(8),
        n => n,
    }
    .min(concurrency as usize)
    .max(1);
    Ok(Cfg {
        target,
        requests,
        concurrency: concurrency as usize,
        keepalive,
        rate,
        duration_ns,
        interval_ns,
        timeout_ns: p.count("timeout")? * 1_000_000,
        client_cpus,
        client_threads,
        shared_cpus,
    })
}

/// The open-file limit (soft, hard).
fn nofile() -> (u64, u64) {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: r is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return (1024, 1024);
    }
    (r.rlim_cur, r.rlim_max)
}

/// Open files one process needs for `concurrency` connections: one or two
/// each in the client; in the built-in `threads` server three (the
/// connection and its thread's runtime: an epoll and an event descriptor).
fn fds_needed(concurrency: u64, per_connection: u64) -> u64 {
    concurrency.saturating_mul(per_connection).saturating_add(FD_SLACK)
}

/// Whether `need` open files fit in the open-file limit (a soft limit below
/// is raised up to the hard one when the case runs).
pub(crate) fn check_fds(concurrency: u64, per_connection: u64, hard: u64) -> Result<(), LiveError> {
    if fds_needed(concurrency, per_connection) <= hard {
        return Ok(());
    }
    Err(bad(
        "concurrency",
        &concurrency.to_string(),
        format!(
            "at most {} connections: each needs {per_connection} open file(s) and RLIMIT_NOFILE's hard limit is {hard} (ulimit -Hn); raise it (ulimit -n as root, /etc/security/limits.conf, or systemd's LimitNOFILE=) or lower concurrency=",
            hard.saturating_sub(FD_SLACK) / per_connection.max(1)
        ),
    ))
}

/// The soft open-file limit as it was before [`raise_nofile`]; dropping it
/// puts that limit back, so the raise lasts one case.
#[must_use]
pub(crate) struct NofileRestore(Option<libc::rlimit>);

impl Drop for NofileRestore {
    fn drop(&mut self) {
        if let Some(old) = self.0.take() {
            // SAFETY: a valid rlimit (lowering the soft limit needs no privilege).
            unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &old) };
        }
    }
}

/// Raise the soft open-file limit to cover `need` (up to the hard limit)
/// for the case: the client's sockets live in this process, and the server
/// started afterwards inherits it. Put back when the result is dropped.
pub(crate) fn raise_nofile(need: u64) -> NofileRestore {
    let (soft, hard) = nofile();
    if soft >= need {
        return NofileRestore(None);
    }
    let old = libc::rlimit { rlim_cur: soft as libc::rlim_t, rlim_max: hard as libc::rlim_t };
    let r = libc::rlimit { rlim_cur: need.min(hard) as libc::rlim_t, rlim_max: hard as libc::rlim_t };
    // SAFETY: a valid rlimit.
    let raised = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } == 0;
    NofileRestore(raised.then_some(old))
}

fn request_bytes(authority: &str, path: &str, keepalive: bool) -> Vec<u8> {
    let conn = if keepalive { "" } else { "Connection: close\r\n" };
    format!(
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: schedlab/{}\r\nAccept: */*\r\n{conn}\r\n",
        env!("CARGO_PKG_VERSION")
    )
    .into_bytes()
}

impl Benchmark for Http {
    fn name(&self) -> &'static str {
        NAME
    }

    fn summary(&self) -> &'static str {
        "HTTP serving under the condition (E1's ab row, E2's soak): built-in or any server, closed or open loop, response times, failures and the server's CPU, switches and memory"
    }

    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }

    fn cases(&self, params: &Params, plan: &RunPlan) -> Result<Vec<Params>, LiveError> {
        let mut p = params.resolve(NAME, PARAMS, plan.quick)?;
        let cfg = config(params, &p, plan)?;
        if cfg.starts_server() {
            plan.refuse_deadline(NAME)?;
            condition::preflight(&plan.condition)?;
        } else {
            let c = &plan.condition;
            if c.policy != schedlab_core::SchedPolicy::Other
                || c.priority.is_some()
                || c.nice.is_some()
                || c.cpus.is_some()
                || c.mlock
            {
                let (key, value) = match &cfg.target {
                    Target::External { pid: Some(pid), .. } => ("server_pid", pid.to_string()),
                    _ => ("url", p.get("url").unwrap_or("").to_string()),
                };
                return Err(bad(
                    key,
                    &value,
                    "no --policy/--prio/--nice/--cpus/--mlock with a server schedlab did not start: it cannot put that server under the condition; start it with server_cmd= (schedlab then applies the condition), or drop the condition",
                ));
            }
        }
        check_fds(cfg.concurrency as u64, cfg.fds_per_connection(), nofile().1)?;
        if let Target::Builtin { listen, model, workers, .. } = &cfg.target {
            // A port given explicitly must be free now (port 0 always is).
            if listen.port() != 0 {
                drop(server::bind(*listen).map_err(|e| launch::bind_error(*listen, &e))?);
            }
            let server_threads = match model {
                Model::Threads => (cfg.concurrency + 1).min(server::MAX_THREADS) as u64 + 2,
                Model::Event => *workers as u64 + 4,
            };
            let loads: u64 = plan.loads.iter().map(load::LoadSpec::tasks).sum();
            load::check_tasks(
                format!("http server={} with concurrency={} and its load", model.name(), cfg.concurrency),
                server_threads + cfg.client_threads as u64 + loads,
                "lower concurrency=, use server=event, or lower the load",
            )?;
        }
        load::check(&plan.loads, 0, plan.force)?;
        let hists = if cfg.rate.is_some() { 4 } else { 3 };
        load::check_memory(
            &format!("http with --repeat {} (histograms)", plan.repeat),
            load::histograms_bytes(hists * (plan.repeat as u64 + 2) + cfg.client_threads as u64 * hists)
                + cfg.client_threads as u64 * (256 << 10)
                + cfg.concurrency as u64 * 512,
            "lower --repeat or concurrency=",
        )?;
        // Keys that mean nothing for this case are neither stored nor part of its identity.
        let drop_keys: &[&str] = match &cfg.target {
            Target::Builtin { .. } => &["url", "server_cmd", "server_pid", "startup"],
            Target::Command { .. } => &["server", "workers", "size", "listen", "path", "server_pid"],
            Target::External { pid: None, .. } => {
                &["server", "workers", "size", "listen", "path", "server_cmd", "server_pid", "startup"]
            }
            Target::External { .. } => &["server", "workers", "size", "listen", "path", "server_cmd", "startup"],
        };
        for k in drop_keys {
            p.remove(k);
        }
        p.remove(if cfg.duration_ns.is_some() { "requests" } else { "interval" });
        Ok(vec![p])
    }

    fn estimate_s(&self, case: &Params, plan: &RunPlan) -> f64 {
        let Ok(p) = case.resolve(NAME, PARAMS, plan.quick) else { return 1.0 };
        let Ok(cfg) = config(case, &p, plan) else { return 1.0 };
        let one = |warm| nominal_s(cfg.end(warm), cfg.rate);
        0.2 + plan.warmup as f64 * one(true) + plan.repeat as f64 * one(false)
    }

    fn run(&self, case: &Params, plan: &RunPlan, progress: &dyn Fn(f64)) -> Result<BenchResult, LiveError> {
        let started = harness::unix_ms();
        let p = self.cases(case, plan)?.remove(0);
        let resolved = p.resolve(NAME, PARAMS, plan.quick)?;
        let cfg = config(&p, &resolved, plan)?;
        let est = self.estimate_s(&p, plan);
        let total = plan.warmup as u64 * units(cfg.end(true)) + plan.repeat as u64 * units(cfg.end(false));
        let (m, loads) = harness::drive(NAME, plan, est, total, progress, |ctx| measure(ctx, plan, &cfg))?;
        let mut warnings = m.warnings;
        let applied = harness::merge_applied(&m.applied, plan.condition.mlock, &mut warnings);
        let mut r = harness::result(NAME, &p, PARAMS, plan, applied, started, &loads);
        add_metrics(&mut r, &cfg, &m.reps, &m.costs, &mut warnings)?;
        if m.interrupted {
            let points: usize = m.reps.iter().map(|o| o.intervals.len()).sum();
            r.status = BenchStatus::Incomplete {
                reason: format!(
                    "soak interrupted after {} of {} repetitions began: the series keeps the {points} finished intervals; the last repetition's figures cover the requests completed before the stop",
                    m.reps.len(),
                    plan.repeat
                ),
            };
        }
        r.metrics.extend(loads.metrics);
        r.warnings.extend(warnings);
        Ok(r)
    }
}

struct Measured {
    reps: Vec<RepOut>,
    costs: Vec<Result<probe::Cost, String>>,
    applied: Vec<SchedCondition>,
    warnings: Vec<String>,
    interrupted: bool,
}

fn measure(ctx: &Ctx, plan: &RunPlan, cfg: &Cfg) -> Result<Measured, LiveError> {
    // Dropped last (after the server): the limit is back when the case ends.
    let _nofile = raise_nofile(fds_needed(cfg.concurrency as u64, cfg.fds_per_connection()));
    let cond = &plan.condition;
    let (mut srv, authority, path) = match &cfg.target {
        Target::Builtin { listen, model, workers, size, path } => {
            let b = launch::BuiltinCfg { listen: *listen, model: *model, workers: *workers, page_size: *size };
            let s = launch::builtin(ctx, cond, &b)?;
            let authority = s.addr.to_string();
            (s, authority, path.clone())
        }
        Target::Command { cmd, url, startup_ms } => {
            (launch::command(ctx, cond, cmd, url.addr, *startup_ms)?, url.authority.clone(), url.path.clone())
        }
        Target::External { url, pid } => (launch::external(url.addr, *pid), url.authority.clone(), url.path.clone()),
    };
    let request = request_bytes(&authority, &path, cfg.keepalive);
    let mut m = Measured {
        reps: Vec::new(),
        costs: Vec::new(),
        applied: Vec::new(),
        warnings: srv.warnings.clone(),
        interrupted: false,
    };
    let mut base = 0u64;
    for rep in 0..plan.warmup + plan.repeat {
        let warm = rep < plan.warmup;
        let end = cfg.end(warm);
        let load = client::Load {
            addr: srv.addr,
            request: request.clone(),
            concurrency: cfg.concurrency,
            keepalive: cfg.keepalive,
            timeout_ns: cfg.timeout_ns,
            rate: cfg.rate,
            end,
            interval_ns: cfg.duration_ns.filter(|_| !warm).map(|_| cfg.interval_ns),
            threads: cfg.client_threads,
            cpus: cfg.client_cpus.clone(),
        };
        ctx.rep_starts(rep as u64);
        let began = if warm { None } else { srv.probe.as_mut().map(|p| p.begin()) };
        let mut last_sample = now_ns();
        let probe = &mut srv.probe;
        let sampling = matches!(began, Some(Ok(())));
        let out = client::run(&load, &mut |done| {
            let now = now_ns();
            ctx.check(now)?;
            ctx.set_done(base + done);
            if sampling && now - last_sample >= 100_000_000 {
                last_sample = now;
                if let Some(p) = probe.as_mut() {
                    p.sample();
                }
            }
            Ok(())
        });
        ctx.rep_ends(rep as u64);
        let out = out?;
        let cost = match (began, srv.probe.as_mut()) {
            (Some(Ok(())), Some(p)) => Some(p.end()),
            (Some(Err(e)), _) => Some(Err(e)),
            _ => None,
        };
        srv.check_alive()?;
        base += units(end);
        if warm {
            continue;
        }
        let stop = out.interrupted;
        m.reps.push(out);
        if let Some(c) = cost {
            m.costs.push(c);
        }
        if stop {
            m.interrupted = true;
            break;
        }
    }
    m.applied = srv.applied_tasks();
    if m.applied.is_empty() {
        m.applied.extend(srv.applied.clone());
    }
    if let Target::External { url, pid } = &cfg.target {
        m.warnings.push(external_scheduling(url.addr, *pid, &srv.tasks_scheduling()));
    }
    Ok(m)
}

/// What the result says of a server schedlab did not start: the run's
/// condition is not its (cases() refuses one), and with `server_pid` what
/// its tasks ran under, read back at the end.
fn external_scheduling(addr: SocketAddr, pid: Option<i32>, tasks: &[SchedCondition]) -> String {
    let head = format!("schedlab did not start the server at {addr} and applied no condition to it");
    let Some(pid) = pid else {
        return format!("{head}; its scheduling is unknown (server_pid= reads it back; server_cmd= puts it under --policy/--nice/--cpus)");
    };
    if tasks.is_empty() {
        return format!("{head}; the scheduling of server_pid={pid}'s tasks could not be read back");
    }
    let mut seen: Vec<(String, usize)> = Vec::new();
    for t in tasks {
        let label = t.label();
        match seen.iter_mut().find(|(l, _)| *l == label) {
            Some((_, n)) => *n += 1,
            None => seen.push((label, 1)),
        }
    }
    let list: Vec<String> = seen.iter().map(|(l, n)| format!("{n} under {l}")).collect();
    format!(
        "{head}; server_pid={pid}'s {} task(s) ran as their owner set them, read back at the end: {}",
        tasks.len(),
        list.join(", ")
    )
}

/// The metrics of the measured repetitions, their warnings; an error when
/// a repetition has no successful response at all.
fn add_metrics(
    r: &mut BenchResult,
    cfg: &Cfg,
    reps: &[RepOut],
    costs: &[Result<probe::Cost, String>],
    warnings: &mut Vec<String>,
) -> Result<(), LiveError> {
    if reps.is_empty() {
        return Err(LiveError::Interrupted);
    }
    for (k, o) in reps.iter().enumerate() {
        if o.ok == 0 {
            return Err(LiveError::Measurement {
                bench: NAME,
                detail: format!("repetition {}: {}", k + 1, all_failed(o, cfg)),
            });
        }
    }
    r.repetitions = reps.len() as u32;
    let per = |f: &dyn Fn(&RepOut) -> f64| reps.iter().map(f).collect::<Vec<f64>>();
    let hists = |f: &dyn Fn(&RepOut) -> &LatencyHistogram| reps.iter().map(|o| f(o).clone()).collect::<Vec<_>>();
    let span = |o: &RepOut| -> f64 {
        let sched = match (cfg.rate, cfg.duration_ns) {
            (_, Some(t)) => t as f64,
            (Some(rate), None) => cfg.requests as f64 / rate * 1e9,
            (None, None) => 0.0,
        };
        (o.wall_ns as f64).max(sched).max(1.0)
    };
    let m = &mut r.metrics;
    m.push(
        Metric::samples(
            "requests_per_s",
            Unit::PerSecond,
            Direction::HigherIsBetter,
            per(&|o| o.ok as f64 * 1e9 / o.wall_ns.max(1) as f64),
        )
        .headline(),
    );
    m.push(
        Metric::histogram_per_repetition("response_time", Direction::LowerIsBetter, hists(&|o| &o.response)).headline(),
    );
    if cfg.rate.is_some() {
        m.push(Metric::histogram_per_repetition(
            "response_time_uncorrected",
            Direction::LowerIsBetter,
            hists(&|o| &o.uncorrected),
        ));
    }
    m.push(Metric::histogram_per_repetition("connect_time", Direction::LowerIsBetter, hists(&|o| &o.connect)));
    m.push(Metric::histogram_per_repetition("waiting_time", Direction::LowerIsBetter, hists(&|o| &o.waiting)));
    m.push(Metric::samples("pages_served", Unit::Count, Direction::Neutral, per(&|o| o.ok as f64)));
    m.push(Metric::samples("failures", Unit::Count, Direction::LowerIsBetter, per(&|o| o.failed() as f64)));
    for (i, class) in CLASSES.iter().enumerate() {
        m.push(Metric::samples(
            &format!("failed_{}", class.name()),
            Unit::Count,
            Direction::LowerIsBetter,
            per(&|o| o.failures[i] as f64),
        ));
    }
    if let Some(rate) = cfg.rate {
        let achieved = |o: &RepOut| o.ok as f64 * 1e9 / span(o);
        m.push(Metric::samples("rate_achieved", Unit::Ratio, Direction::HigherIsBetter, per(&|o| achieved(o) / rate)));
        m.push(Metric::samples("sent_late", Unit::Count, Direction::LowerIsBetter, per(&|o| o.late as f64)));
        for (k, o) in reps.iter().enumerate() {
            let a = achieved(o);
            if a < rate * 0.99 {
                warnings.push(format!(
                    "repetition {}: the server did not keep up with rate={rate}: {a:.1} requests/s achieved ({:.1} % short); {} requests were sent more than 1 ms after their due time, and response_time charges that wait",
                    k + 1,
                    (1.0 - a / rate) * 100.0,
                    o.late
                ));
            }
        }
    }
    // Client cost: the busiest thread's share of the wall time.
    let busy = per(&|o| o.thread_cpu_ns.iter().copied().max().unwrap_or(0) as f64 * 100.0 / o.wall_ns.max(1) as f64);
    m.push(Metric::samples("client_cpu_percent", Unit::Percent, Direction::Neutral, busy.clone()));
    if let Some((k, b)) = busy.iter().enumerate().find(|(_, b)| **b >= 90.0) {
        let share = if cfg.shared_cpus {
            " It shares CPUs with the server: give the server --cpus and the client other CPUs (client_cpus=)."
        } else {
            ""
        };
        warnings.push(format!(
            "the client may have been the bottleneck: in repetition {} a client thread was busy {b:.0} % of the time (httperf's rule: near 100 %, the client sets the pace); give it more threads (client_threads=) or CPUs.{share}",
            k + 1
        ));
    }
    server_cost(m, cfg, reps, costs, warnings);
    // The soak's series, repetitions end to end from the first one's start.
    if cfg.duration_ns.is_some() {
        let t0 = reps[0].t0;
        let iv_s = cfg.interval_ns as f64 / 1e9;
        let (mut pages, mut mean, mut p99, mut fails) = (
            TimeSeries { t_ns: vec![], values: vec![] },
            TimeSeries { t_ns: vec![], values: vec![] },
            TimeSeries { t_ns: vec![], values: vec![] },
            TimeSeries { t_ns: vec![], values: vec![] },
        );
        for o in reps {
            let off = o.t0 - t0;
            for pt in &o.intervals {
                let t = off + pt.t_ns;
                pages.t_ns.push(t);
                pages.values.push(pt.pages as f64 / iv_s);
                fails.t_ns.push(t);
                fails.values.push(pt.failures as f64);
                if let (Some(mn), Some(p)) = (pt.mean_ns, pt.p99_ns) {
                    mean.t_ns.push(t);
                    mean.values.push(mn);
                    p99.t_ns.push(t);
                    p99.values.push(p as f64);
                }
            }
        }
        m.push(Metric::series("pages_per_s", Unit::PerSecond, Direction::HigherIsBetter, pages));
        m.push(Metric::series("response_mean", Unit::Nanoseconds, Direction::LowerIsBetter, mean));
        m.push(Metric::series("response_p99", Unit::Nanoseconds, Direction::LowerIsBetter, p99));
        m.push(Metric::series("interval_failures", Unit::Count, Direction::LowerIsBetter, fails));
    }
    let failed: u64 = reps.iter().map(RepOut::failed).sum();
    if failed > 0 {
        let total: u64 = reps.iter().map(|o| o.ok + o.failed()).sum();
        warnings.push(format!("{failed} of {total} requests failed: {}", failure_text(reps)));
    }
    Ok(())
}

/// "3 refused (first: ...), 2 timeout (first: ...)".
fn failure_text(reps: &[RepOut]) -> String {
    let mut parts = Vec::new();
    for (i, class) in CLASSES.iter().enumerate() {
        let n: u64 = reps.iter().map(|o| o.failures[i]).sum();
        if n > 0 {
            let first = reps.iter().find_map(|o| o.first_error[i].clone()).unwrap_or_default();
            parts.push(format!("{n} {} (first: {first})", class.name()));
        }
    }
    parts.join(", ")
}

fn all_failed(o: &RepOut, cfg: &Cfg) -> String {
    let addr = match &cfg.target {
        Target::Command { url, .. } | Target::External { url, .. } => url.addr.to_string(),
        Target::Builtin { .. } => "the built-in server".into(),
    };
    format!(
        "every one of its {} requests failed: {}; is the server at {addr} up, and does it answer 2xx for the path?",
        o.failed(),
        failure_text(std::slice::from_ref(o))
    )
}

fn server_cost(
    m: &mut Vec<Metric>,
    cfg: &Cfg,
    reps: &[RepOut],
    costs: &[Result<probe::Cost, String>],
    warnings: &mut Vec<String>,
) {
    if costs.is_empty() {
        warnings.push(
            "the server's CPU time, context switches and memory are unknown: url= names no process; add server_pid= (its pid) or let schedlab start it (server_cmd=)".into(),
        );
        return;
    }
    let ok: Vec<&probe::Cost> = costs.iter().filter_map(|c| c.as_ref().ok()).collect();
    if ok.len() != reps.len() {
        let why = costs.iter().find_map(|c| c.as_ref().err()).cloned().unwrap_or_default();
        warnings.push(format!("the server's CPU time, context switches and memory are unknown: {why}"));
        return;
    }
    let v = |f: &dyn Fn(&probe::Cost) -> f64| ok.iter().map(|c| f(c)).collect::<Vec<f64>>();
    m.push(Metric::samples("server_user_time", Unit::Seconds, Direction::LowerIsBetter, v(&|c| c.user_s)));
    m.push(Metric::samples("server_sys_time", Unit::Seconds, Direction::LowerIsBetter, v(&|c| c.sys_s)));
    let pct: Vec<f64> =
        ok.iter().zip(reps).map(|(c, o)| (c.user_s + c.sys_s) * 1e11 / o.wall_ns.max(1) as f64).collect();
    m.push(Metric::samples("server_cpu_percent", Unit::Percent, Direction::LowerIsBetter, pct));
    let per_req: Vec<f64> = ok.iter().zip(reps).map(|(c, o)| (c.user_s + c.sys_s) * 1e6 / o.ok.max(1) as f64).collect();
    m.push(Metric::samples("server_cpu_per_request", Unit::Microseconds, Direction::LowerIsBetter, per_req));
    if ok.iter().all(|c| c.voluntary.is_some() && c.involuntary.is_some()) {
        m.push(Metric::samples(
            "server_voluntary_switches",
            Unit::Count,
            Direction::Neutral,
            v(&|c| c.voluntary.unwrap_or(0) as f64),
        ));
        m.push(Metric::samples(
            "server_involuntary_switches",
            Unit::Count,
            Direction::Neutral,
            v(&|c| c.involuntary.unwrap_or(0) as f64),
        ));
    } else {
        warnings.push("the server's context switches are unknown in some repetitions: a server thread or process exited during them and took its counts with it".into());
    }
    if ok.iter().all(|c| c.rss_avg.is_some() && c.rss_peak.is_some() && c.swap_avg.is_some()) {
        m.push(Metric::samples(
            "server_rss_avg",
            Unit::Bytes,
            Direction::LowerIsBetter,
            v(&|c| c.rss_avg.unwrap_or(0.0)),
        ));
        m.push(Metric::samples(
            "server_rss_peak",
            Unit::Bytes,
            Direction::LowerIsBetter,
            v(&|c| c.rss_peak.unwrap_or(0) as f64),
        ));
        m.push(Metric::samples(
            "server_swap_avg",
            Unit::Bytes,
            Direction::LowerIsBetter,
            v(&|c| c.swap_avg.unwrap_or(0.0)),
        ));
    } else {
        warnings.push("the server's memory is unknown: /proc/PID/status could not be read".into());
    }
    let _ = cfg;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_and_bad_ones_name_the_problem() {
        let u = parse_url("http://127.0.0.1:8080/x/y?z=1").unwrap();
        assert_eq!((u.authority.as_str(), u.addr.port(), u.path.as_str()), ("127.0.0.1:8080", 8080, "/x/y?z=1"));
        let u = parse_url("HTTP://127.0.0.1").unwrap();
        assert_eq!((u.addr.port(), u.path.as_str()), (80, "/"));
        let u = parse_url("http://[::1]:81/a#frag").unwrap();
        assert_eq!((u.addr.port(), u.path.as_str()), (81, "/a"));
        assert!(u.addr.is_ipv6());
        assert!(parse_url("http://localhost:9/").is_ok());
        for (bad, says) in [
            ("https://127.0.0.1/", "https is not supported"),
            ("ftp://127.0.0.1/", "http:// URL"),
            ("127.0.0.1:80", "http:// URL"),
            ("http://", "with a host"),
            ("http://:80/", "with a host"),
            ("http://127.0.0.1:0/", "not 1-65535"),
            ("http://127.0.0.1:99999/", "not 1-65535"),
            ("http://u@127.0.0.1/", "no user name"),
            ("http://[::1/", "closing ]"),
            ("http://no-such-host.invalid/", "does not"),
        ] {
            let e = parse_url(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn concurrency_above_the_open_file_limit_names_it_and_the_fix() {
        assert!(check_fds(100, 1, 1024).is_ok());
        assert!(check_fds(2000, 1, 4096).is_ok(), "a soft limit below is raised to the hard one");
        assert!(check_fds(2000, 3, 4096).is_err(), "the threads server needs three per connection");
        let e = check_fds(5000, 1, 4096).unwrap_err().to_string();
        assert!(
            e.contains("RLIMIT_NOFILE") && e.contains("ulimit") && e.contains("4096") && e.contains("concurrency"),
            "{e}"
        );
    }

    #[test]
    fn requests_are_plain_http11_with_close_unless_keepalive() {
        let r = String::from_utf8(request_bytes("127.0.0.1:80", "/n/5", false)).unwrap();
        assert!(
            r.starts_with("GET /n/5 HTTP/1.1\r\nHost: 127.0.0.1:80\r\n") && r.ends_with("Connection: close\r\n\r\n"),
            "{r}"
        );
        let r = String::from_utf8(request_bytes("h", "/", true)).unwrap();
        assert!(!r.contains("Connection") && r.ends_with("\r\n\r\n"));
    }

    #[test]
    fn an_external_server_is_said_to_be_outside_the_condition() {
        let addr: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let w = external_scheduling(addr, None, &[]);
        assert!(w.contains("did not start") && w.contains("unknown") && w.contains("server_pid="), "{w}");
        let other = SchedCondition::default();
        let niced = SchedCondition { nice: Some(5), ..SchedCondition::default() };
        let w = external_scheduling(addr, Some(42), &[other.clone(), niced.clone(), other]);
        assert!(w.contains("server_pid=42's 3 task(s)"), "{w}");
        assert!(w.contains(&format!("2 under {}", SchedCondition::default().label())), "{w}");
        assert!(w.contains(&format!("1 under {}", niced.label())), "{w}");
        assert!(external_scheduling(addr, Some(42), &[]).contains("could not be read back"));
    }

    #[test]
    fn the_nofile_raise_lasts_until_dropped() {
        let (soft, hard) = nofile();
        // Raise is only possible below the hard limit: make room by lowering the soft one by one.
        let base = if soft < hard { soft } else { soft - 1 };
        let set = |v: u64| {
            let r = libc::rlimit { rlim_cur: v as libc::rlim_t, rlim_max: hard as libc::rlim_t };
            // SAFETY: a valid rlimit.
            assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) }, 0);
        };
        set(base);
        {
            let _g = raise_nofile(base + 1);
            assert_eq!(nofile(), (base + 1, hard), "raised for the case");
            let _none = raise_nofile(10);
        }
        assert_eq!(nofile(), (base, hard), "put back when the case ends");
        set(soft);
    }

    #[test]
    fn the_default_page_is_debians_apache_page_size() {
        let spec = PARAMS.iter().find(|s| s.name == "size").unwrap();
        assert_eq!(spec.default, DEBIAN_APACHE_PAGE_BYTES.to_string());
    }
}
