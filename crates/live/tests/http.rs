//! The `http` benchmark on the live kernel: tiny cases through the public
//! API, the built-in server in both models (no root needed), bad input,
//! and a real nginx through `server_cmd` (ignored: CI installs
//! nginx-light). Each test takes `LOCK` (stop flag, children). No timing
//! assertions: counts, states, figures that must exist, and messages.

mod common;
use common::{lock, plan};
use schedlab_core::{BenchResult, BenchStatus, MetricData};
use schedlab_live::{find, hygiene, LiveError, Params, RunPlan};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn run(params: &str, plan: &RunPlan) -> Result<Vec<BenchResult>, LiveError> {
    common::run("http", params, plan)
}

fn err(params: &str) -> String {
    let e = run(params, &plan(1, 0)).expect_err(params);
    assert!(!matches!(e, LiveError::Interrupted), "{params}: {e}");
    e.to_string()
}

/// Remove the server log an error names ("its output is in PATH;"), and
/// say whether it existed.
fn remove_named_log(e: &str) -> bool {
    let Some(rest) = e.split("its output is in ").nth(1) else { return false };
    let path = rest.split(';').next().unwrap_or("");
    std::fs::remove_file(path).is_ok()
}

fn my_children() -> Vec<i32> {
    hygiene::children_of(std::process::id() as i32)
}

fn samples(r: &BenchResult, name: &str) -> Vec<f64> {
    match &r.metric(name).unwrap_or_else(|| panic!("no metric {name}")).data {
        MetricData::Samples { values } => values.clone(),
        other => panic!("{name} is not samples: {other:?}"),
    }
}

fn hist_count(r: &BenchResult, name: &str) -> u64 {
    match &r.metric(name).unwrap_or_else(|| panic!("no metric {name}")).data {
        MetricData::Histogram { histogram, repetitions } => {
            assert_eq!(repetitions.iter().map(|h| h.count()).sum::<u64>(), histogram.count());
            histogram.count()
        }
        other => panic!("{name} is not a histogram: {other:?}"),
    }
}

/// The closed-loop figures every run must carry.
fn check_closed_loop(r: &BenchResult, requests: u64, reps: usize) {
    assert_eq!(r.status, BenchStatus::Complete, "{:?}", r.warnings);
    assert_eq!(samples(r, "requests_per_s").len(), reps);
    assert!(samples(r, "requests_per_s").iter().all(|v| *v > 0.0));
    assert_eq!(samples(r, "pages_served"), vec![requests as f64; reps], "{:?}", r.warnings);
    assert_eq!(samples(r, "failures"), vec![0.0; reps], "{:?}", r.warnings);
    for name in ["response_time", "connect_time", "waiting_time"] {
        assert_eq!(hist_count(r, name), requests * reps as u64, "{name}");
    }
    for class in ["refused", "reset", "timeout", "non2xx", "short_body", "other"] {
        assert_eq!(samples(r, &format!("failed_{class}")), vec![0.0; reps]);
    }
    // The built-in server's cost: known, from its own process.
    let cpu: Vec<f64> =
        samples(r, "server_user_time").iter().zip(samples(r, "server_sys_time")).map(|(u, s)| u + s).collect();
    assert!(cpu.iter().all(|c| *c > 0.0), "the server served {requests} requests without CPU time? {cpu:?}");
    assert!(samples(r, "server_voluntary_switches").iter().all(|v| *v > 0.0));
    assert!(samples(r, "server_rss_peak").iter().all(|v| *v > 100_000.0));
    assert!(samples(r, "server_rss_avg").iter().zip(samples(r, "server_rss_peak")).all(|(a, p)| *a <= p + 1.0));
    assert_eq!(samples(r, "client_cpu_percent").len(), reps);
    assert_eq!(my_children(), Vec::<i32>::new(), "the server outlived its case");
}

#[test]
fn built_in_threads_server_closed_loop() {
    let _g = lock();
    let r = run("requests=300,concurrency=8,server=threads", &plan(2, 1)).unwrap().remove(0);
    check_closed_loop(&r, 300, 2);
    assert!(r.params.contains_key("server") && !r.params.contains_key("url") && !r.params.contains_key("interval"));
    assert!(r.metric("response_time_uncorrected").is_none(), "closed loop has no uncorrected figure");
}

#[test]
fn built_in_event_server_closed_loop_with_keepalive() {
    let _g = lock();
    let r = run("requests=400,concurrency=10,server=event,workers=2,keepalive=on", &plan(2, 1)).unwrap().remove(0);
    check_closed_loop(&r, 400, 2);
    // Kept-alive connections: at most one connect per connection and repetition.
    if let MetricData::Histogram { histogram, .. } = &r.metric("connect_time").unwrap().data {
        assert!(histogram.count_above(0) <= 2 * 10, "{} connects above 0 ns", histogram.count_above(0));
    }
}

/// Little's law holds by construction for a closed loop whose `concurrency`
/// slots always have a request outstanding (each request's time runs from
/// when its slot became free): mean response time x requests/s =
/// concurrency, less a little at the end where slots retire one by one. A
/// client that lets a slot sit idle between requests (waiting for its
/// thread, or for the server's close) reports less.
#[test]
fn closed_loop_keeps_every_slot_outstanding() {
    let _g = lock();
    for (params, c) in [
        ("requests=2000,concurrency=8,server=event,workers=1,client_threads=1", 8.0),
        ("requests=2000,concurrency=8,server=event,workers=1,client_threads=2", 8.0),
        ("requests=2000,concurrency=6,server=threads,keepalive=on,client_threads=2", 6.0),
    ] {
        let r = run(params, &plan(1, 0)).unwrap().remove(0);
        check_closed_loop(&r, 2000, 1);
        let MetricData::Histogram { histogram, .. } = &r.metric("response_time").unwrap().data else {
            panic!("response_time is not a histogram")
        };
        let mean_s = histogram.mean().unwrap() / 1e9;
        let outstanding = mean_s * samples(&r, "requests_per_s")[0] / c;
        assert!((0.9..=1.02).contains(&outstanding), "{params}: mean x rate / concurrency = {outstanding:.3}");
    }
}

#[test]
fn built_in_server_serves_sized_pages() {
    let _g = lock();
    let r = run("requests=100,concurrency=4,path=/n/100000", &plan(1, 0)).unwrap().remove(0);
    check_closed_loop(&r, 100, 1);
}

#[test]
fn open_loop_reports_corrected_and_uncorrected_times() {
    let _g = lock();
    let r = run("requests=200,concurrency=4,rate=1000,server=event,workers=1", &plan(1, 0)).unwrap().remove(0);
    assert_eq!(r.status, BenchStatus::Complete);
    assert_eq!(hist_count(&r, "response_time"), 200);
    assert_eq!(hist_count(&r, "response_time_uncorrected"), 200);
    let ratio = samples(&r, "rate_achieved")[0];
    assert!(ratio > 0.0 && ratio <= 1.0 + 1e-9, "achieved/asked = {ratio}");
    assert_eq!(samples(&r, "sent_late").len(), 1);
}

#[test]
fn soak_gives_a_series_per_interval() {
    let _g = lock();
    let r = run("duration=600ms,interval=100ms,concurrency=2,server=event,workers=1,keepalive=on", &plan(1, 0))
        .unwrap()
        .remove(0);
    assert_eq!(r.status, BenchStatus::Complete);
    assert!(!r.params.contains_key("requests"), "a soak has no requests=");
    let MetricData::Series { series } = &r.metric("pages_per_s").unwrap().data else { panic!("not a series") };
    assert_eq!(series.t_ns, (1..=6).map(|k| k * 100_000_000).collect::<Vec<u64>>());
    assert!(series.values.iter().all(|v| *v > 0.0), "{:?}", series.values);
    for name in ["response_mean", "response_p99", "interval_failures"] {
        assert!(matches!(r.metric(name).unwrap().data, MetricData::Series { .. }), "{name}");
    }
    assert!(samples(&r, "pages_served")[0] > 0.0);
}

#[test]
fn soak_interrupted_keeps_the_finished_intervals() {
    let _g = lock();
    let b = find("http").unwrap();
    let p = plan(1, 0);
    let case = b
        .cases(&Params::parse("duration=30s,interval=100ms,concurrency=2,server=event,workers=1").unwrap(), &p)
        .unwrap()
        .remove(0);
    let stopper = std::thread::spawn(|| {
        std::thread::sleep(Duration::from_millis(1200));
        hygiene::request_stop();
    });
    let r = b.run(&case, &p, &|_| {}).unwrap();
    stopper.join().unwrap();
    hygiene::clear_stop();
    assert!(matches!(r.status, BenchStatus::Incomplete { .. }), "{:?}", r.status);
    let MetricData::Series { series } = &r.metric("pages_per_s").unwrap().data else { panic!("not a series") };
    assert!((3..=12).contains(&series.t_ns.len()), "{} intervals kept", series.t_ns.len());
    assert_eq!(my_children(), Vec::<i32>::new(), "the server outlived an interrupted soak");
}

#[test]
fn interrupted_closed_loop_discards_and_cleans_up() {
    let _g = lock();
    let b = find("http").unwrap();
    let p = plan(1, 0);
    let case = b.cases(&Params::parse("requests=100000000,concurrency=2").unwrap(), &p).unwrap().remove(0);
    let stopper = std::thread::spawn(|| {
        std::thread::sleep(Duration::from_millis(500));
        hygiene::request_stop();
    });
    let e = b.run(&case, &p, &|_| {}).unwrap_err();
    stopper.join().unwrap();
    hygiene::clear_stop();
    assert!(matches!(e, LiveError::Interrupted), "{e}");
    assert_eq!(my_children(), Vec::<i32>::new());
}

/// One raw request to a built-in server of our own; returns the status line.
fn raw(addr: &str, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // The server may answer and close before the whole of a huge request is sent.
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).lines().next().unwrap_or("").to_string()
}

/// A free loopback port (bound, then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn built_in_server_refuses_traversal_and_caps_heads_and_bodies() {
    let _g = lock();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    // A soak on a fixed port keeps the server up while this thread probes it.
    let params = format!("duration=3s,interval=100ms,concurrency=1,listen={addr},server=event,workers=1");
    let runner = std::thread::spawn(move || run(&params, &plan(1, 0)));
    let up = std::time::Instant::now();
    while TcpStream::connect(&addr).is_err() {
        assert!(up.elapsed() < Duration::from_secs(10), "the server did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    let get =
        |path: &str| raw(&addr, format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes());
    assert!(get("/").contains("200"), "{}", get("/"));
    assert!(get("/n/10").contains("200"));
    assert!(get("/../etc/passwd").contains("400"), "{}", get("/../etc/passwd"));
    assert!(get("/%2e%2e/%2e%2e/etc/passwd").contains("400"));
    assert!(get("/n/..%2f..%2fetc").contains("400"));
    assert!(get("/etc/passwd").contains("404"));
    let big_head = format!("GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n", "a".repeat(20_000));
    let r = raw(&addr, big_head.as_bytes());
    assert!(r.contains("431"), "a 20 KB header: {r}");
    let big_body = format!("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n", 10 << 20);
    let r = raw(&addr, big_body.as_bytes());
    assert!(r.contains("413"), "a declared 10 MiB body: {r}");
    let mut chunked = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..20 {
        chunked.extend_from_slice(format!("{:x}\r\n{}\r\n", 8192, "b".repeat(8192)).as_bytes());
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let r = raw(&addr, &chunked);
    assert!(r.contains("413"), "a 160 KiB chunked body: {r}");
    let small = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
    assert!(raw(&addr, small).contains("200"));
    assert!(raw(&addr, b"DELETE / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").contains("405"));
    let r = runner.join().unwrap().unwrap().remove(0);
    assert_eq!(r.status, BenchStatus::Complete);
    assert_eq!(my_children(), Vec::<i32>::new());
}

#[test]
fn bad_input_is_refused_with_the_problem_and_the_fix() {
    let _g = lock();
    for (params, says) in [
        ("url=ftp://127.0.0.1/", "http:// URL"),
        ("url=https://127.0.0.1/", "https is not supported"),
        ("url=http://", "with a host"),
        ("url=not a url", "http:// URL"),
        ("requests=0", "requests"),
        ("requests=99999999999", "requests"),
        ("rate=0", "above 0"),
        ("rate=-5", "rate"),
        ("rate=fast", "requests per second"),
        ("rate=1e12", "at most"),
        ("duration=0s", "longer than 0"),
        ("duration=1000h", "at most 30 days"),
        ("duration=999999h", "out of range"),
        ("duration=5", "no unit"),
        ("duration=1s,requests=100", "a soak runs for its duration"),
        ("interval=2s", "belongs to a soak"),
        ("requests=10,concurrency=20", "at most requests=10"),
        ("concurrency=0", "concurrency"),
        ("listen=nonsense", "ADDRESS:PORT"),
        ("path=nopath", "starting with /"),
        ("server_cmd='nginx'", "url="),
        ("server_pid=1", "url="),
        ("url=http://127.0.0.1:9/,size=100", "built-in server"),
        ("url=http://127.0.0.1:9/,server_pid=4194000", "no process 4194000"),
        ("client_cpus=banana", "CPU list"),
        ("startup=5s", "server_cmd"),
    ] {
        let e = err(params);
        assert!(e.contains(says), "{params}: {e}");
    }
    assert_eq!(my_children(), Vec::<i32>::new());
}

#[test]
fn concurrency_above_the_open_file_limit_is_refused_naming_it() {
    let _g = lock();
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
    let hard: u64 = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(4)?.parse().ok())
        .unwrap_or(u64::MAX);
    // One open file per connection in the client, three in the threads server.
    let params = if hard < 1_000_000 {
        format!("concurrency={hard},requests={hard}")
    } else if hard < 3_000_000 {
        let c = hard / 3 + 1;
        format!("concurrency={c},requests={c},server=threads")
    } else {
        eprintln!("the open-file hard limit ({hard}) is above anything concurrency= can ask: nothing to refuse");
        return;
    };
    let e = err(&params);
    assert!(e.contains("RLIMIT_NOFILE") && e.contains("ulimit -n") && e.contains("concurrency"), "{params}: {e}");
}

#[test]
fn a_port_in_use_is_refused() {
    let _g = lock();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let e = err(&format!("listen={addr}"));
    assert!(e.contains("in use") && e.contains("port 0"), "{e}");
}

#[test]
fn a_server_that_refuses_everything_is_an_error_not_a_figure() {
    let _g = lock();
    let port = free_port();
    let e = err(&format!("url=http://127.0.0.1:{port}/,requests=50,concurrency=5"));
    assert!(e.contains("every one of its 50 requests failed") && e.contains("50 refused"), "{e}");
}

#[test]
fn a_path_the_server_does_not_have_fails_as_non2xx() {
    let _g = lock();
    let e = err("path=/nope,requests=30,concurrency=3");
    assert!(e.contains("30 non2xx") && e.contains("HTTP 404 for /nope"), "{e}");
    assert_eq!(my_children(), Vec::<i32>::new());
}

/// A minimal HTTP server on a thread of this process: one connection at a
/// time, a fixed response, until `stop` is set (then one connect wakes it).
fn tiny_server() -> (u16, std::sync::Arc<std::sync::atomic::AtomicBool>, std::thread::JoinHandle<()>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let s = std::sync::Arc::clone(&stop);
    let h = std::thread::spawn(move || {
        for conn in l.incoming() {
            if s.load(Ordering::SeqCst) {
                break;
            }
            let Ok(mut c) = conn else { continue };
            let mut buf = Vec::new();
            let mut b = [0u8; 1024];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match c.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&b[..n]),
                }
            }
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi");
        }
    });
    (port, stop, h)
}

#[test]
fn an_external_server_is_measured_and_its_cost_known_only_with_its_pid() {
    let _g = lock();
    let (port, stop, h) = tiny_server();
    let r = run(&format!("url=http://127.0.0.1:{port}/,requests=60,concurrency=1"), &plan(1, 0)).unwrap().remove(0);
    assert_eq!(samples(&r, "pages_served"), vec![60.0]);
    assert!(r.metric("server_user_time").is_none(), "no process known, no cost");
    assert!(r.warnings.iter().any(|w| w.contains("unknown") && w.contains("server_pid=")), "{:?}", r.warnings);
    assert!(r.warnings.iter().any(|w| w.contains("did not start") && w.contains("scheduling is unknown")));
    assert!(!r.params.contains_key("server") && !r.params.contains_key("size"), "{:?}", r.params);
    let me = std::process::id();
    let r = run(&format!("url=http://127.0.0.1:{port}/,server_pid={me},requests=60,concurrency=1"), &plan(1, 0))
        .unwrap()
        .remove(0);
    assert_eq!(samples(&r, "pages_served"), vec![60.0]);
    assert_eq!(samples(&r, "server_user_time").len(), 1, "{:?}", r.warnings);
    assert!(samples(&r, "server_rss_avg")[0] > 0.0);
    // Not started by schedlab: no condition of the run's, its tasks' own read back.
    assert!(
        r.warnings.iter().any(|w| w.contains("applied no condition") && w.contains(&format!("server_pid={me}'s"))),
        "{:?}",
        r.warnings
    );
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = TcpStream::connect(("127.0.0.1", port));
    h.join().unwrap();
}

#[test]
fn server_cmd_that_exits_at_once_shows_its_stderr() {
    let _g = lock();
    let port = free_port();
    let e = err(&format!("url=http://127.0.0.1:{port}/,server_cmd='echo bad config line 7 >&2; exit 3'"));
    assert!(e.contains("exited at once") || e.contains("at once"), "{e}");
    assert!(e.contains("bad config line 7") && e.contains("exit status 3"), "{e}");
    assert!(remove_named_log(&e), "the log the error names must exist: {e}");
    assert_eq!(my_children(), Vec::<i32>::new());
}

#[test]
fn server_cmd_that_never_listens_times_out_with_its_stderr() {
    let _g = lock();
    let port = free_port();
    let e = err(&format!("url=http://127.0.0.1:{port}/,startup=300ms,server_cmd='echo starting slowly >&2; sleep 30'"));
    assert!(e.contains("did not accept connections") && e.contains("starting slowly"), "{e}");
    assert!(remove_named_log(&e), "the log the error names must exist: {e}");
    assert_eq!(my_children(), Vec::<i32>::new(), "the command was not stopped");
}

#[test]
fn server_cmd_on_a_port_in_use_is_refused() {
    let _g = lock();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let e = err(&format!("url=http://{addr}/,server_cmd='sleep 5'"));
    assert!(e.contains("already accepts connections"), "{e}");
}

#[test]
fn a_condition_on_a_server_schedlab_did_not_start_is_refused() {
    let _g = lock();
    let mut p = plan(1, 0);
    p.condition.nice = Some(5);
    let e = run("url=http://127.0.0.1:9/", &p).unwrap_err().to_string();
    assert!(e.contains("server_cmd="), "{e}");
}

#[test]
fn the_quick_default_is_small() {
    let _g = lock();
    let b = find("http").unwrap();
    let p = plan(5, 1);
    let case = b.cases(&Params::new(), &p).unwrap().remove(0);
    assert_eq!(case.get("requests"), Some("2000"));
    assert_eq!(case.get("concurrency"), Some("20"));
    assert!(b.estimate_s(&case, &p) < 5.0, "quick http must take a few seconds");
}

/// nginx on a loopback port, started by `server_cmd` with a config in a temp dir.
#[test]
#[ignore = "needs nginx: CI installs nginx-light"]
fn nginx_through_server_cmd() {
    let _g = lock();
    let nginx = ["/usr/sbin/nginx", "/usr/bin/nginx"].into_iter().find(|p| std::path::Path::new(p).exists());
    let nginx = nginx.expect("nginx is not installed: apt-get install nginx-light");
    let dir = std::env::temp_dir().join(format!("schedlab-http-nginx-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("html")).unwrap();
    std::fs::write(dir.join("html/index.html"), vec![b'x'; 10_701]).unwrap();
    let port = free_port();
    let conf = format!(
        "daemon off;\nworker_processes 2;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{ worker_connections 1024; }}\nhttp {{\n access_log off;\n client_body_temp_path {d}/body;\n proxy_temp_path {d}/proxy;\n fastcgi_temp_path {d}/fastcgi;\n uwsgi_temp_path {d}/uwsgi;\n scgi_temp_path {d}/scgi;\n server {{ listen 127.0.0.1:{port}; root {d}/html; }}\n}}\n",
        d = dir.display()
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let params = format!(
        "url=http://127.0.0.1:{port}/,server_cmd='{nginx} -p {d} -c {d}/nginx.conf',requests=500,concurrency=10",
        d = dir.display()
    );
    let r = run(&params, &plan(2, 1)).unwrap().remove(0);
    assert_eq!(r.status, BenchStatus::Complete, "{:?}", r.warnings);
    assert_eq!(samples(&r, "pages_served"), vec![500.0, 500.0], "{:?}", r.warnings);
    assert_eq!(hist_count(&r, "response_time"), 1000);
    // nginx's master and workers are read from /proc.
    let cpu: Vec<f64> =
        samples(&r, "server_user_time").iter().zip(samples(&r, "server_sys_time")).map(|(u, s)| u + s).collect();
    assert!(cpu.iter().all(|c| *c >= 0.0));
    assert!(samples(&r, "server_rss_avg").iter().all(|v| *v > 100_000.0));
    assert!(r.metric("server_voluntary_switches").is_some(), "{:?}", r.warnings);
    assert_eq!(my_children(), Vec::<i32>::new(), "nginx outlived its case");
    // Nothing listens any more.
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err(), "nginx still listens");
    let _ = std::fs::remove_dir_all(&dir);
}
