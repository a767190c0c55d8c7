//! `schedlab serve` end to end: the binary serves a temporary SQLite store
//! holding two runs on a free port, and a plain HTTP/1.1 client (a
//! TcpStream) and, in the ignored test, headless Chromium fetch its pages.

use schedlab_core::*;
use schedlab_store::{Access, SqliteStore, Store};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What a run name may hold that a page must show as text, never run.
const EVIL: &str = "<script>alert(\"x\")</script><img src=x onerror=alert(1)>";

/// A case with three invocations: a headline rate and a latency histogram
/// starting at `base` ns.
fn case(name: &str, rate: f64, base: u64) -> Vec<BenchResult> {
    (0..3u32)
        .map(|i| {
            let cond = Condition::Live { requested: SchedCondition::default(), applied: None, loads: vec![] };
            let mut b = BenchResult::new(name, cond, 0).param("placement", "same-cpu");
            b.invocation = i;
            b.status = BenchStatus::Complete;
            let r = rate * (1.0 + 0.01 * f64::from(i));
            b.metrics.push(
                Metric::samples("rate", Unit::PerSecond, Direction::HigherIsBetter, vec![r, r * 1.01, r * 0.99])
                    .headline(),
            );
            let mut h = LatencyHistogram::new();
            for k in 0..500 {
                h.record(base + k * 20 + u64::from(i) * 50);
            }
            b.metrics.push(Metric::histogram("latency", Direction::LowerIsBetter, h));
            b
        })
        .collect()
}

fn run(name: &str, host: &str, base: u64, started: i64) -> Run {
    let tool = ToolInfo { name: "schedlab".into(), version: "0".into(), git_rev: None };
    let mut r = Run::new(RunKind::Live, tool, vec![], host.into(), started);
    r.name = Some(name.into());
    r.status = RunStatus::Complete;
    r.env_start = Some(Environment { kernel_release: Some("6.18.4".into()), ..Default::default() });
    r.benchmarks.extend(case("pipe", 1e5, base));
    r
}

/// A store with run #1 (named [`EVIL`], host "lab<1>") and run #2 (host
/// "other", its latency 80 % higher, so every latency row is worse).
fn store(dir: &Path) -> PathBuf {
    let path = dir.join("results.db");
    let mut s = SqliteStore::open_with(&path, Access::Create, Duration::from_secs(5)).unwrap();
    assert_eq!(s.insert_run(&run(EVIL, "lab<1>", 5000, 1_700_000_000_000)).unwrap(), 1);
    assert_eq!(s.insert_run(&run("after", "other", 9000, 1_700_000_100_000)).unwrap(), 2);
    path
}

/// A running `schedlab serve`, killed when dropped.
struct Server {
    child: Child,
    addr: String,
    stderr: Vec<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(db: &Path, listen: &str) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .arg("--db")
        .arg(db)
        .args(["serve", "--listen", listen])
        .env_remove("SCHEDLAB_DB")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut stderr = Vec::new();
    // The address, port 0 resolved, is on the line that says where it serves.
    for line in lines.by_ref() {
        let line = line.unwrap();
        stderr.push(line.clone());
        if let Some(at) = line.find("http://") {
            let addr = line[at + 7..].split('/').next().unwrap().to_string();
            // Drain stderr so the server never blocks on a full pipe.
            std::thread::spawn(move || lines.for_each(drop));
            return Server { child, addr, stderr };
        }
    }
    let _ = child.kill();
    let status = child.wait();
    panic!("serve did not say where it listens ({status:?}):\n{}", stderr.join("\n"));
}

struct Reply {
    status: u16,
    headers: String,
    body: String,
}

fn request(addr: &str, method: &str, path: &str, host: &str) -> Reply {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(s, "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (headers, body) = raw.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no header end in {raw:?}"));
    let status = headers.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap();
    Reply { status, headers: headers.to_ascii_lowercase(), body: body.to_string() }
}

fn get(srv: &Server, path: &str) -> Reply {
    request(&srv.addr, "GET", path, &srv.addr)
}

/// Every `href="..."` of a page that leads to another page of the server.
fn links(body: &str) -> Vec<String> {
    body.split("href=\"")
        .skip(1)
        .map(|s| s[..s.find('"').unwrap()].replace("&amp;", "&"))
        .filter(|l| l.starts_with('/'))
        .collect()
}

#[test]
fn pages_escape_link_and_compare_with_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let srv = serve(&store(dir.path()), "127.0.0.1:0");
    assert!(srv.addr.starts_with("127.0.0.1:") && !srv.addr.ends_with(":0"), "{}", srv.addr);
    assert!(!srv.stderr.iter().any(|l| l.contains("warning")), "no warning on loopback: {:?}", srv.stderr);

    let list = get(&srv, "/");
    assert_eq!(list.status, 200, "{}", list.body);
    assert!(list.headers.contains("content-type: text/html; charset=utf-8"), "{}", list.headers);
    assert!(list.headers.contains("content-security-policy: default-src 'none'"), "{}", list.headers);
    assert!(list.body.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img src=x"), "{}", list.body);
    assert!(!list.body.contains("<script>alert") && !list.body.contains("<img"), "the run name is escaped");
    assert!(list.body.contains("lab&lt;1&gt;") && !list.body.contains("lab<1>"), "the host is escaped");
    assert!(list.body.contains("<input type=\"checkbox\" name=\"tick\" value=\"1\""));
    assert!(list.body.contains("<form method=\"get\" action=\"/compare\""));
    // Every link on the list leads to a page that loads.
    let found = links(&list.body);
    for want in ["/run/1", "/run/2", "/?host=lab%3C1%3E", "/?kernel=6%2E18%2E4", "/history?bench=pipe"] {
        assert!(found.iter().any(|l| l == want), "no link {want} in {found:?}");
    }
    for l in &found {
        let r = get(&srv, l);
        assert_eq!(r.status, 200, "{l}: {}", r.body);
    }

    // Filters: by host, by kernel release (a prefix selects it).
    let other = get(&srv, "/?host=other");
    assert!(other.body.contains("href=\"/run/2\"") && !other.body.contains("href=\"/run/1\""), "{}", other.body);
    let evil_host = get(&srv, "/?host=lab%3C1%3E");
    assert!(evil_host.body.contains("href=\"/run/1\"") && !evil_host.body.contains("href=\"/run/2\""));
    assert!(evil_host.body.contains("value=\"lab&lt;1&gt;\""), "the filter is shown back escaped");
    assert!(get(&srv, "/?kernel=6.18").body.contains("href=\"/run/2\""));
    assert!(get(&srv, "/?kernel=6.19").body.contains("No runs match."));

    // A run as `report` renders it, escaped.
    let one = get(&srv, "/run/1");
    assert_eq!(one.status, 200);
    assert!(one.body.contains("<section id=\"bench-pipe\"") && one.body.contains("<figure>"));
    assert!(one.body.contains("One side, so no verdicts"));
    assert!(!one.body.contains("<script>alert") && !one.body.contains("<img"), "escaped on the run page");
    assert!(one.body.contains("<a href=\"/\">all runs</a>"));

    // The comparison: verdicts against the baseline, either way of asking.
    for path in ["/compare?runs=1,2", "/compare?runs=1&runs=2", "/compare?tick=2&tick=1"] {
        let c = get(&srv, path);
        assert_eq!(c.status, 200, "{path}: {}", c.body);
        let summary = &c.body[c.body.find("<section id=\"summary\"").unwrap()..];
        assert!(
            summary.contains("<b>#2 after</b> against baseline <b>#1 &lt;script&gt;alert(&quot;x&quot;)"),
            "{path}: baseline is #1: {}",
            &summary[..600]
        );
        assert!(summary.contains("<span class=\"worse\">4 worse</span>"), "{path}: {summary}");
        assert!(!c.body.contains("<script>alert") && !c.body.contains("<img"), "escaped on the compare page");
    }

    // A metric's history: its plot and a row per run, linked to the run.
    let hist = get(&srv, "/history?bench=pipe:placement=same-cpu&metric=latency");
    assert_eq!(hist.status, 200, "{}", hist.body);
    assert_eq!(hist.body.matches("<figure>").count(), 1, "{}", hist.body);
    assert!(hist.body.contains("<a href=\"/run/1\">#1 &lt;script&gt;") && hist.body.contains("href=\"/run/2\""));
    assert!(!hist.body.contains("<script>alert") && !hist.body.contains("<img"), "escaped on the history page");
    assert_eq!(get(&srv, "/history").status, 400);
    assert_eq!(get(&srv, "/history?bench=pipe:placement=x,loops").status, 400, "a filter without =");
    assert_eq!(get(&srv, "/history?bench=spawn").status, 404);
    let no_metric = get(&srv, "/history?bench=pipe&metric=%3Cx%3E");
    assert_eq!(no_metric.status, 400);
    assert!(no_metric.body.contains("has no metric '&lt;x&gt;'"), "{}", no_metric.body);

    // Errors are pages with their status, and nothing else is served.
    assert_eq!(get(&srv, "/run/99").status, 404);
    assert_eq!(get(&srv, "/etc/passwd").status, 404);
    assert_eq!(get(&srv, "/run/..%2F..%2Fresults.db").status, 404);
    assert_eq!(get(&srv, "/favicon.ico").status, 404);
    let short = get(&srv, "/compare?runs=1");
    assert_eq!(short.status, 400);
    assert!(short.body.contains("a comparison needs two runs or more"), "{}", short.body);
    assert_eq!(get(&srv, "/?page=0").status, 400);
    let missing = get(&srv, "/compare?runs=1,%3Cb%3Enope");
    assert_eq!(missing.status, 404);
    assert!(missing.body.contains("no run matches '&lt;b&gt;nope'"), "{}", missing.body);
    for method in ["POST", "PUT", "DELETE"] {
        let r = request(&srv.addr, method, "/", &srv.addr);
        assert_eq!(r.status, 405, "{method}");
        assert!(r.headers.contains("allow: get, head"), "{}", r.headers);
    }
    let head = request(&srv.addr, "HEAD", "/", &srv.addr);
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty(), "HEAD has no body: {:?}", head.body);
    // A page elsewhere that rebinds its name to 127.0.0.1 is refused.
    assert_eq!(request(&srv.addr, "GET", "/", "evil.example").status, 403);
    let port = srv.addr.rsplit(':').next().unwrap();
    assert_eq!(request(&srv.addr, "GET", "/", &format!("localhost:{port}")).status, 200);
}

#[test]
fn a_port_in_use_is_a_one_line_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = store(dir.path());
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .arg("--db")
        .arg(&db)
        .args(["serve", "--listen", &addr])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&format!("{addr} is in use")) && stderr.contains("--listen"), "{stderr}");

    // A store that is not there is reported before anything listens.
    let out = Command::new(env!("CARGO_BIN_EXE_schedlab"))
        .arg("--db")
        .arg(dir.path().join("missing.db"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("http://"));
}

#[test]
fn bound_beyond_loopback_it_warns_and_ctrl_c_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut srv = serve(&store(dir.path()), "0.0.0.0:0");
    let said = srv.stderr.join("\n");
    assert!(said.contains("warning: listening on 0.0.0.0:") && said.contains("no login"), "{said}");
    // Any Host is answered when the user chose to serve beyond loopback.
    let port = srv.addr.rsplit(':').next().unwrap().to_string();
    assert_eq!(request(&format!("127.0.0.1:{port}"), "GET", "/", "lab.example").status, 200);

    // SAFETY: signalling the child this test started.
    assert_eq!(unsafe { libc::kill(srv.child.id() as i32, libc::SIGINT) }, 0);
    let start = Instant::now();
    let status = loop {
        if let Some(s) = srv.child.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "serve did not stop on Ctrl-C");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0), "Ctrl-C stops it cleanly");
    assert!(TcpStream::connect(format!("127.0.0.1:{port}")).is_err(), "nothing listens any more");
}

const BROWSERS: [&str; 3] = ["chromium", "chromium-browser", "google-chrome"];

/// The page's `<body data-...>` attributes after load, which the report's
/// load script writes (plots found, script errors).
fn chromium_body(browser: &str, url: &str, profile: &Path) -> (std::collections::BTreeMap<String, String>, String) {
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=5000",
            "--window-size=1400,2000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(url)
        .output()
        .unwrap();
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    let dom = String::from_utf8_lossy(&out.stdout).to_string();
    let body = dom.find("<body").map(|i| &dom[i..]).unwrap_or_else(|| panic!("no <body> in:\n{dom}"));
    let tag = &body[..body.find('>').unwrap()];
    let data = tag
        .split(" data-")
        .skip(1)
        .filter_map(|a| a.split_once("=\""))
        .map(|(k, v)| (k.to_string(), v.trim_end_matches('"').to_string()))
        .collect();
    (data, dom)
}

#[test]
#[ignore = "needs chromium: CI runs ignored tests as root (cargo test -- --ignored)"]
fn run_list_and_compare_in_headless_chromium() {
    let browser = BROWSERS
        .into_iter()
        .find(|b| Command::new(b).arg("--version").output().map(|o| o.status.success()).unwrap_or(false))
        .unwrap_or_else(|| panic!("none of {BROWSERS:?} runs: install Chromium (apt-get install chromium)"));
    let dir = tempfile::tempdir().unwrap();
    let srv = serve(&store(dir.path()), "127.0.0.1:0");

    let (list, dom) = chromium_body(browser, &format!("http://{}/", srv.addr), &dir.path().join("p1"));
    assert_eq!(list.get("report-ok").map(String::as_str), Some("1"), "the run list loaded: {list:?}");
    assert!(!list.contains_key("report-error"), "no script error: {list:?}");
    assert!(dom.contains("href=\"/run/1\"") && dom.contains("href=\"/run/2\""), "{dom}");
    assert!(!dom.contains("<script>alert"), "the run name stays text in the browser's DOM");

    for path in ["/compare?tick=1&tick=2", "/run/2", "/history?bench=pipe"] {
        let (page, dom) = chromium_body(browser, &format!("http://{}{path}", srv.addr), &dir.path().join("p2"));
        let at = format!("{path}: {page:?}");
        assert_eq!(page.get("report-ok").map(String::as_str), Some("1"), "plots missing or not loaded {at}");
        assert!(!page.contains_key("report-error"), "a script error occurred {at}");
        // pipe: the rate bars and the latency percentiles; a history: its plot.
        let plots = if path.starts_with("/history") { "1" } else { "2" };
        assert_eq!(page["plots"], plots, "{at}");
        if path.starts_with("/compare") {
            assert!(dom.contains("<span class=\"worse\">4 worse</span>"), "the verdicts are shown {at}");
        }
    }
}

#[test]
fn deep_pages_go_by_keyset_and_labels_filter_the_list() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.db");
    let mut s = SqliteStore::open_with(&path, Access::Create, Duration::from_secs(5)).unwrap();
    let mut last = 0;
    for i in 0..130 {
        let mut r = run(&format!("r{i}"), "h", 5000, 1_700_000_000_000 + i);
        r.benchmarks.truncate(1);
        if i % 10 == 0 {
            r.labels.insert("tier".into(), if i % 20 == 0 { "gold" } else { "<b>x</b>" }.into());
        }
        last = s.insert_run(&r).unwrap();
    }
    drop(s);
    let srv = serve(&path, "127.0.0.1:0");
    let first = get(&srv, "/");
    assert_eq!(first.status, 200);
    // The next page's link starts below the last run shown, whatever page it is.
    let older = links(&first.body).into_iter().find(|l| l.contains("before=")).expect("a link to older runs");
    let below: i64 = older.split("before=").nth(1).unwrap().split('&').next().unwrap().parse().unwrap();
    assert!(first.body.contains(&format!("/run/{below}\"")) && !first.body.contains(&format!("/run/{}\"", below - 1)));
    let second = get(&srv, &older.replace("&amp;", "&"));
    assert_eq!(second.status, 200);
    assert!(second.body.contains(&format!("/run/{}\"", below - 1)) && !second.body.contains(&format!("/run/{last}\"")));
    assert!(second.body.contains("newest runs"), "a way back to the top");
    // Deep in the store: the oldest runs, and no link further down.
    let deep = get(&srv, "/?before=3");
    assert!(deep.body.contains("/run/2\"") && deep.body.contains("/run/1\"") && !deep.body.contains("before=1"));
    assert_eq!(get(&srv, "/?before=x").status, 400);
    // Labels show, escaped, and select.
    let gold = get(&srv, "/?label=tier%3Dgold");
    assert_eq!(gold.status, 200);
    assert_eq!(gold.body.matches("type=\"checkbox\"").count(), 7, "runs 0, 20, ..., 120");
    assert!(first.body.contains("tier=&lt;b&gt;x&lt;/b&gt;") && !first.body.contains("<b>x</b>"));
    assert_eq!(get(&srv, "/?label=bad").status, 400);
}

/// Issue 18: the history page takes the run list's selectors, and `by=`
/// groups as `history --by` does; what users typed comes back escaped.
#[test]
fn history_takes_the_run_lists_selectors_and_groups() {
    const EVIL_TIER: &str = "<img src=x onerror=alert(1)>";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("labelled.db");
    let mut s = SqliteStore::open_with(&path, Access::Create, Duration::from_secs(5)).unwrap();
    for (i, (host, tier)) in [("lab", Some("gold")), ("lab", Some(EVIL_TIER)), ("other", Some("gold")), ("other", None)]
        .into_iter()
        .enumerate()
    {
        let mut r = run(&format!("r{i}"), host, 5000 + 1000 * i as u64, 1_700_000_000_000 + i as i64);
        if let Some(t) = tier {
            r.labels.insert("tier".into(), t.into());
        }
        assert_eq!(s.insert_run(&r).unwrap(), i as i64 + 1);
    }
    drop(s);
    let srv = serve(&path, "127.0.0.1:0");
    let runs_on = |body: &str| (1..=4).filter(|i| body.contains(&format!("href=\"/run/{i}\""))).collect::<Vec<_>>();

    // The run list's benchmarks lead to the history of the same selection.
    let list = get(&srv, "/?label=tier%3Dgold");
    let to_history = links(&list.body).into_iter().find(|l| l.starts_with("/history")).expect("a history link");
    assert_eq!(to_history, "/history?bench=pipe&label=tier%3Dgold");
    let gold = get(&srv, &to_history);
    assert_eq!(gold.status, 200, "{}", gold.body);
    assert_eq!(runs_on(&gold.body), [1, 3], "only the gold runs");
    assert!(gold.body.contains("value=\"tier=gold\""), "the selector is shown");
    assert!(links(&gold.body).contains(&"/?label=tier%3Dgold".to_string()), "and leads back to its runs");
    assert_eq!(runs_on(&get(&srv, "/history?bench=pipe&host=other").body), [3, 4]);
    assert_eq!(runs_on(&get(&srv, "/history?bench=pipe&host=lab&label=tier%3Dgold").body), [1]);

    // A label value that is markup selects its run and stays text.
    let evil = get(&srv, "/history?bench=pipe&label=tier%3D%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E");
    assert_eq!(evil.status, 200, "{}", evil.body);
    assert_eq!(runs_on(&evil.body), [2]);
    assert!(evil.body.contains("value=\"tier=&lt;img src=x onerror=alert(1)&gt;\""), "{}", evil.body);
    assert!(!evil.body.contains("<img"), "escaped on the history page");

    // by=: a line per group, the first the baseline; group names escaped.
    let by_host = get(&srv, "/history?bench=pipe&by=host");
    assert_eq!(by_host.status, 200, "{}", by_host.body);
    assert!(by_host.body.contains("2 groups by host") && by_host.body.contains(">lab (2 runs)<"), "{}", by_host.body);
    assert!(by_host.body.contains(">other (2 runs)<") && by_host.body.contains(">baseline<"), "{}", by_host.body);
    let by_tier = get(&srv, "/history?bench=pipe&by=label:tier");
    assert_eq!(by_tier.status, 200, "{}", by_tier.body);
    assert!(by_tier.body.contains("tier=&lt;img src=x onerror=alert(1)&gt; (1 run)"), "{}", by_tier.body);
    assert!(by_tier.body.contains("tier=gold (2 runs)") && !by_tier.body.contains("<img"), "{}", by_tier.body);
    let one_group = get(&srv, "/history?bench=pipe&by=host&host=lab");
    assert_eq!(one_group.status, 400, "{}", one_group.body);
    assert!(one_group.body.contains("makes 1 group(s)"), "{}", one_group.body);
    assert_eq!(get(&srv, "/history?bench=pipe&by=no%20such").status, 400);
    assert_eq!(get(&srv, "/history?bench=pipe&label=bad").status, 400);
}
