//! `schedlab serve`: the store as web pages, read-only. `/` lists the runs
//! (paged, `?host=&kernel=&cpu=&label=KEY=VALUE` filters, tickboxes to
//! compare), `/run/RUN` shows one run and `/compare?runs=A,B` compares runs,
//! each rendered by `report::html` exactly as `schedlab report` renders them;
//! `/history?bench=BENCH&metric=M` is `schedlab history` with its plot, and
//! takes the run list's filters as `history`'s selectors (`--host`,
//! `--kernel`, `--cpu-model`, `--label`) and `by=host,kernel` as its `--by`;
//! the run list's benchmarks link to the history of the same selection. GET
//! and HEAD only; nothing else is served.
//!
//! One current-thread tokio runtime accepts connections; each request opens
//! the store read-only on a blocking thread (`open_store_to_read`), so the
//! synchronous store clients never run inside async code and a page always
//! shows what is stored now.

use super::Outcome;
use crate::args::{GroupBy, GroupKey, ServeArgs};
use crate::context::open_store_to_read;
use anyhow::{Context, Result};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CACHE_CONTROL, CONTENT_TYPE, HOST};
use hyper::{Method, Request, Response, StatusCode};
use percent_encoding::{percent_decode_str, utf8_percent_encode, NON_ALPHANUMERIC};
use schedlab_report::history::HistoryError;
use schedlab_report::html::{document, esc, head_row, history_body, history_groups_body, report_body, td};
use schedlab_store::{PageStart, RunFilter, Store, StoreError};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Runs per page of the run list.
const PAGE: usize = 50;
/// The deepest page served (a bound on one request's work).
const MAX_PAGE: usize = 20_000;
/// The most sides one compare page takes.
const MAX_SIDES: usize = 20;
/// Blocking threads rendering pages at once.
const WORKERS: usize = 4;

/// What every page may load: its own inline style and load script, and
/// forms that go back to this server; nothing from anywhere else.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; \
                   img-src data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

struct Site {
    db: Option<PathBuf>,
    /// Bound to a loopback address: requests must name a loopback host, so a
    /// web page elsewhere cannot read the store by DNS rebinding.
    loopback: bool,
}

pub fn serve(db: Option<&Path>, a: ServeArgs) -> Result<Outcome> {
    // A store that cannot be read is reported now, not on the first page.
    let location = open_store_to_read(db)?.location();
    let listener = std::net::TcpListener::bind(a.listen).map_err(|e| match e.kind() {
        std::io::ErrorKind::AddrInUse => {
            anyhow::anyhow!("{} is in use by another program: choose another port with --listen ADDR:PORT", a.listen)
        }
        std::io::ErrorKind::AddrNotAvailable => anyhow::anyhow!(
            "{} is not an address of this machine: choose one it has (127.0.0.1 for this machine only)",
            a.listen.ip()
        ),
        std::io::ErrorKind::PermissionDenied => {
            anyhow::anyhow!("no permission to listen on {}: choose a port above 1023 with --listen", a.listen)
        }
        _ => anyhow::anyhow!("cannot listen on {}: {e}", a.listen),
    })?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let loopback = addr.ip().is_loopback();
    if !loopback {
        crate::term::warn(format!(
            "listening on {addr}, which other machines can reach: anyone who can connect reads every run in \
             the store (there is no login). Use --listen 127.0.0.1:PORT and an ssh tunnel unless that is meant."
        ));
    }
    eprintln!("serving {location} read-only at http://{}/ (Ctrl-C stops)", url_host(addr));
    let site = Arc::new(Site { db: db.map(Path::to_path_buf), loopback });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .max_blocking_threads(WORKERS)
        .build()
        .context("cannot start the web server's runtime")?;
    let result = rt.block_on(accept_loop(listener, site));
    // Pages being rendered are finished or dropped quickly; nothing is written.
    rt.shutdown_timeout(Duration::from_secs(2));
    result?;
    eprintln!("stopped");
    Ok(Outcome::Done)
}

/// "127.0.0.1:8080", "[::1]:8080"; 0.0.0.0 shown as the address to type.
fn url_host(addr: SocketAddr) -> String {
    match addr {
        SocketAddr::V4(v) if v.ip().is_unspecified() => format!("127.0.0.1:{}", v.port()),
        SocketAddr::V6(v) if v.ip().is_unspecified() => format!("[::1]:{}", v.port()),
        a => a.to_string(),
    }
}

async fn accept_loop(listener: std::net::TcpListener, site: Arc<Site>) -> Result<()> {
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => return Ok(()),
            _ = term.recv() => return Ok(()),
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let site = Arc::clone(&site);
                tokio::spawn(async move {
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let svc = hyper::service::service_fn(move |req| handle(Arc::clone(&site), req));
                    // A client that goes away is the client's business.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .timer(hyper_util::rt::TokioTimer::new())
                        .header_read_timeout(Duration::from_secs(30))
                        .serve_connection(io, svc)
                        .await;
                });
            }
        }
    }
}

/// A page or an error page, before it becomes a response.
struct Page {
    status: StatusCode,
    html: String,
}

impl Page {
    fn ok(html: String) -> Page {
        Page { status: StatusCode::OK, html }
    }

    fn error(status: StatusCode, message: &str) -> Page {
        let body = format!(
            "{}<h1>{} {}</h1><p class=\"warn\">{}</p>",
            nav(),
            status.as_u16(),
            esc(status.canonical_reason().unwrap_or("")),
            esc(message)
        );
        Page { status, html: document(&format!("schedlab: {}", status.as_u16()), &body) }
    }
}

async fn handle(site: Arc<Site>, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = respond(Page::error(
            StatusCode::METHOD_NOT_ALLOWED,
            "this server only shows pages (GET and HEAD): nothing can be changed through it",
        ));
        r.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return Ok(r);
    }
    if site.loopback && !loopback_host(req.headers().get(HOST)) {
        return Ok(respond(Page::error(
            StatusCode::FORBIDDEN,
            "this server listens on a loopback address and answers only requests for localhost, \
             127.0.0.1 or [::1]",
        )));
    }
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let db = site.db.clone();
    let page = tokio::task::spawn_blocking(move || route(db.as_deref(), &path, &query))
        .await
        .unwrap_or_else(|e| Page::error(StatusCode::INTERNAL_SERVER_ERROR, &format!("the page failed: {e}")));
    Ok(respond(page))
}

fn respond(page: Page) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(page.html)));
    *r.status_mut() = page.status;
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    r
}

/// Whether a Host header names this machine's loopback (or is absent, as
/// from an HTTP/1.0 client; browsers always send it).
fn loopback_host(host: Option<&HeaderValue>) -> bool {
    let Some(host) = host else { return true };
    let Ok(host) = host.to_str() else { return false };
    let name = match host.rsplit_once(':') {
        // "[::1]:8080", "127.0.0.1:8080", "localhost:8080"; not the colons of a bare IPv6.
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !name.ends_with(':') => name,
        _ => host,
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn route(db: Option<&Path>, path: &str, query: &str) -> Page {
    let q = Query::parse(query);
    let result = match path {
        "/" => run_list(db, &q),
        "/compare" => compare_page(db, &q),
        "/history" => history_page(db, &q),
        // A path's `+` is itself (only a form's query spells a space so).
        _ => match path.strip_prefix("/run/").map(|s| percent_decode_str(s).decode_utf8_lossy().into_owned()) {
            Some(sel) if !sel.is_empty() && !sel.contains('/') => run_page(db, &sel),
            _ => {
                return Page::error(
                    StatusCode::NOT_FOUND,
                    "no such page: the pages are /, /run/RUN, /compare?runs=A,B and /history?bench=BENCH",
                )
            }
        },
    };
    result.unwrap_or_else(|e| {
        let status = match e.downcast_ref::<StoreError>() {
            Some(StoreError::NoSuchRun(_) | StoreError::Empty) => StatusCode::NOT_FOUND,
            _ if matches!(e.downcast_ref::<HistoryError>(), Some(HistoryError::NoRuns(_))) => StatusCode::NOT_FOUND,
            _ if e.downcast_ref::<HistoryError>().is_some() => StatusCode::BAD_REQUEST,
            _ if e.downcast_ref::<BadRequest>().is_some() => StatusCode::BAD_REQUEST,
            _ => {
                eprintln!("error: {path}: {e:#}");
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        Page::error(status, &format!("{e:#}"))
    })
}

/// A request this server cannot answer as asked (400).
#[derive(Debug)]
struct BadRequest(String);

impl std::fmt::Display for BadRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadRequest {}

/// Percent-decoding, with `+` as a space as HTML forms send it.
fn decode(s: &str) -> String {
    percent_decode_str(&s.replace('+', " ")).decode_utf8_lossy().into_owned()
}

fn encode(s: &str) -> String {
    utf8_percent_encode(s, NON_ALPHANUMERIC).to_string()
}

/// A query string's `key=value` pairs, in order, decoded.
struct Query(Vec<(String, String)>);

impl Query {
    fn parse(q: &str) -> Query {
        Query(
            q.split('&')
                .filter(|kv| !kv.is_empty())
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                    (decode(k), decode(v))
                })
                .collect(),
        )
    }

    /// The last non-empty value of `key`.
    fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().rev().find(|(k, v)| k == key && !v.trim().is_empty()).map(|(_, v)| v.trim())
    }

    fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> {
        self.0.iter().filter(move |(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

fn nav() -> String {
    "<nav class=\"top\"><a href=\"/\">all runs</a></nav>".to_string()
}

/// The runs a page takes: `host`, `kernel` (a release or its start), `cpu`
/// (or `cpu-model`: text in the CPU model) and `label=KEY=VALUE`
/// (repeatable, all must match); the run list's filters and `history`'s
/// selectors.
fn selection(q: &Query) -> Result<RunFilter, BadRequest> {
    let some = |key: &str| q.get(key).map(String::from);
    let mut labels = Vec::new();
    for l in q.all("label").filter(|l| !l.is_empty()) {
        labels.push(schedlab_core::model::parse_label(l).map_err(BadRequest)?);
    }
    let cpu_model = some("cpu").or_else(|| some("cpu-model"));
    Ok(RunFilter { host: some("host"), kernel: some("kernel"), cpu_model, labels })
}

/// The selection as query parameters, percent-encoded (not yet escaped for HTML).
fn selection_query(f: &RunFilter) -> Vec<String> {
    let mut params = Vec::new();
    for (key, v) in [("host", &f.host), ("kernel", &f.kernel), ("cpu", &f.cpu_model)] {
        if let Some(v) = v {
            params.push(format!("{key}={}", encode(v)));
        }
    }
    for (k, v) in &f.labels {
        params.push(format!("label={}", encode(&format!("{k}={v}"))));
    }
    params
}

/// The selection's form fields, filled in with `f`: an input per label it
/// holds, so that submitting keeps them all, and an empty one to add another.
fn selection_inputs(f: &RunFilter) -> String {
    let label_input = |value: &str| {
        format!("<label>label <input name=\"label\" value=\"{}\" placeholder=\"KEY=VALUE\"></label>", esc(value))
    };
    let labels: Vec<String> =
        f.labels.iter().map(|(k, v)| label_input(&format!("{k}={v}"))).chain([label_input("")]).collect();
    format!(
        "<label>host <input name=\"host\" value=\"{}\"></label> \
         <label>kernel <input name=\"kernel\" value=\"{}\" placeholder=\"6.18\"></label> \
         <label>cpu <input name=\"cpu\" value=\"{}\" placeholder=\"epyc\"></label> {}",
        esc(f.host.as_deref().unwrap_or("")),
        esc(f.kernel.as_deref().unwrap_or("")),
        esc(f.cpu_model.as_deref().unwrap_or("")),
        labels.join(" "),
    )
}

fn run_list(db: Option<&Path>, q: &Query) -> Result<Page> {
    let filter = selection(q)?;
    let page = match q.get("page") {
        None => 1,
        Some(p) => p.parse::<usize>().ok().filter(|p| (1..=MAX_PAGE).contains(p)).ok_or_else(|| {
            BadRequest(format!("page={p} is not a page number: give a whole number from 1 to {MAX_PAGE}"))
        })?,
    };
    // Deep pages go by keyset (`before=ID`, the last run of the page above):
    // one indexed query however far down, where an offset reads every run
    // it skips.
    let before = match q.get("before") {
        None => None,
        Some(b) => Some(b.parse::<i64>().ok().filter(|b| *b > 0).ok_or_else(|| {
            BadRequest(format!("before={b} is not a run id: give the id of the run the page starts below"))
        })?),
    };
    let store = open_store_to_read(db)?;
    let start = PageStart { before, skip: if before.is_some() { 0 } else { (page - 1) * PAGE } };
    let mut runs = store.list_runs_page(&filter, start, PAGE + 1)?;
    let more = runs.len() > PAGE;
    runs.truncate(PAGE);
    let last_id = runs.iter().rev().find_map(|r| r.as_ref().ok().map(|r| r.id));

    let mut h = nav();
    h.push_str("<h1>schedlab runs</h1>");
    h.push_str(&format!("<p class=\"muted\">{}, most recent first</p>", esc(&store.location())));
    h.push_str(&format!(
        "<form method=\"get\" action=\"/\">{} <button type=\"submit\">filter</button> <a href=\"/\">clear</a></form>",
        selection_inputs(&filter)
    ));
    if !filter.is_empty() {
        h.push_str("<p class=\"muted\">A benchmark's name below leads to its history over this selection.</p>");
    }
    if runs.is_empty() {
        h.push_str(if filter.is_empty() && page == 1 && before.is_none() {
            "<p>The store holds no runs yet: <code>schedlab run</code> or <code>schedlab sim</code> adds some.</p>"
        } else {
            "<p>No runs match.</p>"
        });
    } else {
        h.push_str(
            "<form method=\"get\" action=\"/compare\" id=\"compare\"><div class=\"scroll\"><table class=\"stack\">",
        );
        let cols = ["compare", "run", "name", "kind", "status", "started", "host", "kernel", "labels", "benchmarks"];
        h.push_str(&head_row(&cols.map(String::from)));
        for run in &runs {
            let r = match run {
                Ok(r) => r,
                Err(e) => {
                    h.push_str(&format!("<tr><td colspan=\"10\" class=\"worse\">{}</td></tr>", esc(&e.to_string())));
                    continue;
                }
            };
            let filter_link =
                |key: &str, value: &str| format!("<a href=\"/?{key}={}\">{}</a>", esc(&encode(value)), esc(value));
            h.push_str(&format!(
                "<tr>{}{}{}{}{}{}{}{}{}{}</tr>",
                td(
                    "",
                    "",
                    &format!(
                        "<input type=\"checkbox\" name=\"tick\" value=\"{}\" aria-label=\"compare #{}\">",
                        r.id, r.id
                    )
                ),
                td(cols[1], "", &format!("<a href=\"/run/{}\">#{}</a>", r.id, r.id)),
                td(cols[2], "", &esc(r.name.as_deref().unwrap_or(""))),
                td(cols[3], "", r.kind.name()),
                td(cols[4], "", r.status.name()),
                td(cols[5], "", &esc(&schedlab_core::model::format_unix_ms(r.started_unix_ms))),
                td(cols[6], "", &filter_link("host", &r.host)),
                td(cols[7], "", &r.kernel.as_deref().map(|k| filter_link("kernel", k)).unwrap_or_default()),
                td(
                    cols[8],
                    "",
                    &r.labels
                        .iter()
                        .map(|(k, v)| filter_link("label", &format!("{k}={v}")))
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
                td(cols[9], "", &r.benchmarks.iter().map(|b| history_link(b, &filter)).collect::<Vec<_>>().join(", ")),
            ));
        }
        h.push_str(
            "</table></div><p><button type=\"submit\">compare ticked runs</button> \
                    <span class=\"muted\">(the oldest ticked run is the baseline)</span></p></form>",
        );
    }
    let link = |at: Option<String>, text: &str| {
        let mut params: Vec<String> = at.into_iter().collect();
        params.extend(selection_query(&filter));
        format!("<a href=\"/?{}\">{text}</a>", esc(&params.join("&")))
    };
    h.push_str("<nav class=\"pages\">");
    match before {
        Some(b) => {
            h.push_str(&link(None, "newest runs"));
            h.push_str(&format!("<span class=\"muted\">runs before #{b}</span>"));
        }
        None => {
            if page > 1 {
                h.push_str(&link(Some(format!("page={}", page - 1)), "newer runs"));
            }
            h.push_str(&format!("<span class=\"muted\">page {page}</span>"));
        }
    }
    if let (true, Some(last)) = (more, last_id) {
        h.push_str(&link(Some(format!("before={last}")), "older runs"));
    }
    h.push_str("</nav>");
    Ok(Page::ok(document("schedlab runs", &h)))
}

fn run_page(db: Option<&Path>, sel: &str) -> Result<Page> {
    let store = open_store_to_read(db)?;
    let (sides, comparison) = super::report::sides_and_comparison(&*store, &[sel.to_string()], None)?;
    let body = format!("{}{}", nav(), report_body(&sides, comparison.as_ref(), &super::show::param_table()));
    Ok(Page::ok(document(&format!("schedlab run {sel}"), &body)))
}

/// The sides to compare: `runs=A,B` (or `runs=A&runs=B`) in the order given,
/// the baseline first; the run list's ticked runs (`tick=`) oldest first.
fn compare_sides_of(q: &Query) -> Result<Vec<String>> {
    let mut ticked: Vec<i64> = Vec::new();
    for t in q.all("tick") {
        ticked.push(t.trim().parse().map_err(|_| BadRequest(format!("tick={t} is not a run id")))?);
    }
    ticked.sort_unstable();
    ticked.dedup();
    let mut sides: Vec<String> =
        q.all("runs").flat_map(|v| v.split(',')).map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
    sides.extend(ticked.iter().map(i64::to_string));
    if sides.len() < 2 {
        return Err(BadRequest(
            "a comparison needs two runs or more: tick them in the run list, or ask for /compare?runs=A,B".into(),
        )
        .into());
    }
    if sides.len() > MAX_SIDES {
        return Err(BadRequest(format!("{} runs asked for: compare at most {MAX_SIDES} at once", sides.len())).into());
    }
    Ok(sides)
}

fn compare_page(db: Option<&Path>, q: &Query) -> Result<Page> {
    let sels = compare_sides_of(q)?;
    let store = open_store_to_read(db)?;
    let (sides, comparison) = super::report::sides_and_comparison(&*store, &sels, None)?;
    let body = format!("{}{}", nav(), report_body(&sides, comparison.as_ref(), &super::show::param_table()));
    Ok(Page::ok(document(&format!("schedlab compare {}", sels.join(" ")), &body)))
}

/// A link to a benchmark's history over the runs `select` takes.
fn history_link(bench: &str, select: &RunFilter) -> String {
    let mut params = vec![format!("bench={}", encode(bench))];
    params.extend(selection_query(select));
    format!("<a href=\"/history?{}\">{}</a>", esc(&params.join("&")), esc(bench))
}

/// `/history?bench=BENCH[:KEY=VALUE,...]&metric=NAME`, as `schedlab history`,
/// over the runs the selection takes ([`selection`]); with `by=KEY,...`
/// (host, kernel, cpu_model, label:KEY) a line per group of runs, as
/// `history --by`.
fn history_page(db: Option<&Path>, q: &Query) -> Result<Page> {
    let Some(bench) = q.get("bench") else {
        return Err(BadRequest(
            "name a benchmark: /history?bench=pipe or /history?bench=pipe:placement=same-cpu".into(),
        )
        .into());
    };
    let select = selection(q)?;
    let by = match q.get("by") {
        None => None,
        Some(keys) => Some(GroupBy(
            keys.split(',').map(|k| GroupKey::parse(k.trim())).collect::<Result<_, _>>().map_err(BadRequest)?,
        )),
    };
    let store = open_store_to_read(db)?;
    // What is neither the store's nor the history's error is the request's
    // (a bad KEY=VALUE filter, too few groups).
    let bad_request = |e: anyhow::Error| {
        if e.downcast_ref::<StoreError>().is_some() || e.downcast_ref::<HistoryError>().is_some() {
            e
        } else {
            BadRequest(format!("{e:#}")).into()
        }
    };
    let metric = q.get("metric");
    let controls = history_form(bench, metric, &select, q.get("by"));
    let title = format!("history of {bench}");
    let body = match &by {
        None => {
            let (rows, opts) =
                super::history::history_rows(&*store, bench, metric, None, &select).map_err(bad_request)?;
            let note = format!(
                "vs first run: the first run of each case and host is the baseline; verdicts as in compare ({})",
                match &opts.profile {
                    Some(p) => format!("noise bands from {}", p.description),
                    None => format!("±{:.1}% noise band; no noise profile for this host", opts.noise * 100.0),
                }
            );
            history_body(&title, &controls, &rows, &|id| format!("/run/{id}"), &note)
        }
        Some(by) => {
            let (sides, c) = history_groups(&*store, bench, metric, &select, by).map_err(bad_request)?;
            let keys = by.0.iter().map(GroupKey::name).collect::<Vec<_>>().join(" · ");
            let note = format!(
                "{} groups by {keys}; each group's runs pooled, the first group ({}) the baseline",
                sides.len(),
                sides[0].label
            );
            history_groups_body(&title, &controls, &c, &note)
        }
    };
    Ok(Page::ok(document(&title, &format!("{}{body}", nav()))))
}

/// `history --by`: the benchmark's runs that `select` takes, grouped by
/// `by`, each group pooled as one side of a comparison, the first group the
/// baseline; only `metric`'s rows (the headline ones without it).
fn history_groups(
    store: &dyn Store,
    spec: &str,
    metric: Option<&str>,
    select: &RunFilter,
    by: &GroupBy,
) -> Result<(Vec<schedlab_report::compare::Side>, schedlab_report::compare::Comparison)> {
    use super::compare::{group_runs, group_sides, keep_metric_rows, options};
    let (name, params) = super::history::parse_spec(spec)?;
    let with_bench = store.runs_with_benchmark(name)?;
    if with_bench.is_empty() {
        return Err(HistoryError::NoRuns(name.to_string()).into());
    }
    let groups = group_runs(store, select, by, Some(&with_bench))?;
    let keep = |b: &schedlab_core::BenchResult| b.name == name && params.iter().all(|(k, v)| b.param_is(k, v));
    let sides = group_sides(store, groups, by, Some(name), keep)?;
    let opts = options(store, &sides, None)?;
    let mut c = schedlab_report::compare::compare_sides(&sides, &opts)?;
    keep_metric_rows(&mut c, &sides, metric);
    if c.rows.is_empty() {
        anyhow::bail!(
            "{name} has no metric '{}' in these runs: name another metric, or leave it out for the headline",
            metric.unwrap_or("marked headline")
        );
    }
    Ok((sides, c))
}

/// The history page's selectors, filled in with the ones it shows, and a
/// link to the run list of the same selection.
fn history_form(bench: &str, metric: Option<&str>, select: &RunFilter, by: Option<&str>) -> String {
    let hidden = |name: &str, v: &str| format!("<input type=\"hidden\" name=\"{name}\" value=\"{}\">", esc(v));
    format!(
        "<form method=\"get\" action=\"/history\">{}{}{} <label>by <input name=\"by\" value=\"{}\" \
         placeholder=\"host,kernel\"></label> <button type=\"submit\">select</button> \
         <a href=\"/?{}\">the runs of this selection</a></form>",
        hidden("bench", bench),
        metric.map(|m| hidden("metric", m)).unwrap_or_default(),
        selection_inputs(select),
        esc(by.unwrap_or("")),
        esc(&selection_query(select).join("&")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_hosts_are_answered_on_loopback() {
        let ok = |h: &str| loopback_host(Some(&HeaderValue::from_str(h).unwrap()));
        for h in ["127.0.0.1:8080", "localhost:8080", "LOCALHOST", "[::1]:8080", "127.0.0.2", "::1"] {
            assert!(ok(h), "{h}");
        }
        for h in ["evil.example:8080", "10.0.0.1:8080", "localhost.evil.example", "[::2]:80"] {
            assert!(!ok(h), "{h}");
        }
        assert!(loopback_host(None));
    }

    #[test]
    fn the_history_form_keeps_every_label_escaped_and_offers_one_more() {
        let q = Query::parse("bench=pipe&label=kernel%3D6.18&label=rack%3Dr%3C1%22&label=");
        let select = selection(&q).unwrap();
        let form = history_form("pipe", None, &select, None);
        let inputs: Vec<&str> = form.match_indices("<input name=\"label\"").map(|(i, _)| &form[i..]).collect();
        assert_eq!(inputs.len(), 3, "two labels and an empty one: {form}");
        assert!(inputs[0].starts_with("<input name=\"label\" value=\"kernel=6.18\""), "{form}");
        assert!(inputs[1].starts_with("<input name=\"label\" value=\"rack=r&lt;1&quot;\""), "{form}");
        assert!(inputs[2].starts_with("<input name=\"label\" value=\"\""), "{form}");
        assert!(!form.contains("r<1"), "labels are escaped: {form}");
    }

    #[test]
    fn queries_decode_forms_and_lists() {
        let q = Query::parse("host=a+b%3Cc&runs=1,2&runs=3&tick=9&tick=4&host=");
        assert_eq!(q.get("host"), Some("a b<c"), "an empty later value does not override");
        assert_eq!(compare_sides_of(&q).unwrap(), ["1", "2", "3", "4", "9"]);
        assert!(compare_sides_of(&Query::parse("runs=1")).is_err());
        assert!(compare_sides_of(&Query::parse("tick=x&tick=2")).is_err());
    }
}
