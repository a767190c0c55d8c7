//! The built-in HTTP server: hyper on tokio, in a process of its own.
//!
//! The measuring thread binds the listening socket (so a port in use is
//! its error, said plainly) and forks; the child re-executes this binary
//! (`/proc/self/exe`) as the harness's process entry `http-server`
//! (`harness/runner.rs`: its constructor runs [`process_main`] before
//! `main`): a fresh image, so the server's memory is its own and not a copy
//! of the harness. Where re-execution is unavailable the forked child
//! serves in its copy of the harness (see `launch.rs`).
//! The child waits for a "go" byte while the parent applies the run's
//! condition to it by pid; every thread it starts afterwards inherits
//! policy, priority, nice and affinity. It then starts its threads, says
//! "ok", and answers rusage requests on the control pipe until the pipe
//! closes (the parent stopped or died), when it exits.
//!
//! Models: `event` is a tokio multi-thread runtime of `workers` threads
//! (nginx-like: few threads, many connections each); `threads` is a pool in
//! which each thread accepts one connection and serves it to its end
//! (Apache worker-like: a sleeping thread per open connection), growing by
//! one thread whenever the last idle one takes a connection.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use std::convert::Infallible;
use std::net::TcpListener;
use std::os::fd::{FromRawFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

/// Request head (request line and headers) accepted, bytes: hyper answers
/// 431 above it. Apache's default LimitRequestFieldSize is 8190 per field.
pub(crate) const HEADER_CAP: usize = 8 * 1024;
/// Request body accepted (POST), bytes: 413 above it.
pub(crate) const BODY_CAP: usize = 64 * 1024;
/// Largest `/n/BYTES` page.
pub(crate) const SIZED_MAX: u64 = 64 << 20;
/// Most threads of the `threads` model; connections beyond wait in the backlog.
pub(crate) const MAX_THREADS: usize = 10_000;
/// Idle keep-alive connections and slow request heads are closed after this.
const IDLE_S: u64 = 60;
/// Listen backlog (the kernel caps it at net.core.somaxconn).
pub(crate) const BACKLOG: i32 = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Model {
    Threads,
    Event,
}

impl Model {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Model::Threads => "threads",
            Model::Event => "event",
        }
    }
}

/// What the server process is told: "LISTEN CTL REP MODEL WORKERS SIZE MLOCK".
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spec {
    pub listen: RawFd,
    pub ctl: RawFd,
    pub rep: RawFd,
    pub model: Model,
    pub workers: usize,
    pub page_size: usize,
    pub mlock: bool,
}

impl Spec {
    pub(crate) fn encode(&self) -> String {
        format!(
            "{} {} {} {} {} {} {}",
            self.listen,
            self.ctl,
            self.rep,
            self.model.name(),
            self.workers,
            self.page_size,
            u8::from(self.mlock)
        )
    }

    pub(crate) fn parse(s: &str) -> Option<Spec> {
        let f: Vec<&str> = s.split(' ').collect();
        if f.len() != 7 {
            return None;
        }
        let fd = |i: usize| f[i].parse::<RawFd>().ok().filter(|n| *n >= 0);
        Some(Spec {
            listen: fd(0)?,
            ctl: fd(1)?,
            rep: fd(2)?,
            model: match f[3] {
                "threads" => Model::Threads,
                "event" => Model::Event,
                _ => return None,
            },
            workers: f[4].parse().ok().filter(|n| (1..=4096).contains(n))?,
            page_size: f[5].parse().ok().filter(|n| *n as u64 <= SIZED_MAX)?,
            mlock: match f[6] {
                "0" => false,
                "1" => true,
                _ => return None,
            },
        })
    }
}

/// The process entry's main: serve the spec in `args` ("LISTEN CTL ...");
/// None when `args` is not a spec (a stray variable runs the program on).
pub(crate) fn process_main(args: &str) -> Option<i32> {
    Some(serve(&Spec::parse(args)?))
}

/// The pages: the static page and a filler that `/n/BYTES` slices.
pub(crate) struct Site {
    page: Bytes,
    fill: RwLock<Bytes>,
}

impl Site {
    pub(crate) fn new(page_size: usize) -> Site {
        Site { page: Bytes::from(page(page_size)), fill: RwLock::new(Bytes::new()) }
    }

    /// `n` bytes of filler, sharing one buffer that grows (doubling) on demand.
    fn sized(&self, n: usize) -> Bytes {
        {
            let f = self.fill.read().unwrap_or_else(|e| e.into_inner());
            if f.len() >= n {
                return f.slice(..n);
            }
        }
        let mut f = self.fill.write().unwrap_or_else(|e| e.into_inner());
        if f.len() < n {
            let len = n.max(f.len() * 2).min(SIZED_MAX as usize).max(n);
            *f = Bytes::from(filler(len));
        }
        f.slice(..n)
    }
}

/// An HTML page of exactly `size` bytes (a small document, padded with
/// filler paragraphs), so the default reproduces the size of Debian's stock
/// Apache page without its text.
pub(crate) fn page(size: usize) -> Vec<u8> {
    const HEAD: &str = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>schedlab</title></head>\n<body><h1>schedlab</h1>\n<p>";
    const TAIL: &str = "</p>\n</body></html>\n";
    if size < HEAD.len() + TAIL.len() {
        return filler(size);
    }
    let mut v = Vec::with_capacity(size);
    v.extend_from_slice(HEAD.as_bytes());
    v.extend(filler(size - HEAD.len() - TAIL.len()));
    v.extend_from_slice(TAIL.as_bytes());
    v
}

/// `n` bytes of printable text, lines of 64.
fn filler(n: usize) -> Vec<u8> {
    const LINE: &[u8] = b"schedlab serves this page from memory to measure the scheduler.\n";
    LINE.iter().copied().cycle().take(n).collect()
}

/// What a request path asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    Page,
    Sized(u64),
    /// `..` or `.` segments, backslashes or NULs, raw or percent-encoded.
    Traversal,
    /// `/n/BYTES` above [`SIZED_MAX`].
    TooLarge,
    NotFound,
}

pub(crate) fn route(path: &str) -> Route {
    let decoded = percent_decode(path);
    if decoded.contains(['\\', '\0']) || decoded.split('/').any(|s| s == ".." || s == ".") {
        return Route::Traversal;
    }
    match decoded.as_str() {
        "/" | "/index.html" => Route::Page,
        p => match p.strip_prefix("/n/") {
            Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => match n.parse::<u64>() {
                Ok(n) if n <= SIZED_MAX => Route::Sized(n),
                _ => Route::TooLarge,
            },
            _ => Route::NotFound,
        },
    }
}

/// `%XX` decoded (bytes kept as Latin-1 chars, so nothing is lost); a `%`
/// not followed by two hex digits stays as is.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push(char::from((h * 16 + l) as u8));
                i += 3;
                continue;
            }
        }
        out.push(char::from(b[i]));
        i += 1;
    }
    out
}

fn text(status: StatusCode, msg: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(msg.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("text/plain"));
    r
}

async fn handle(site: Arc<Site>, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    use hyper::header::{HeaderValue, ALLOW, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
    let (parts, body) = req.into_parts();
    match parts.method {
        Method::GET | Method::HEAD => {}
        Method::POST => {
            let declared = parts.headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
            let mut too_large = declared.is_some_and(|n| n > BODY_CAP as u64);
            if !too_large {
                too_large = Limited::new(body, BODY_CAP).collect().await.is_err();
            }
            if too_large {
                // The rest of the body is not read: the connection must close.
                let mut r = text(StatusCode::PAYLOAD_TOO_LARGE, "request body above 64 KiB refused\n");
                r.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
                return Ok(r);
            }
        }
        _ => {
            let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "only GET, HEAD and POST\n");
            r.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD, POST"));
            return Ok(r);
        }
    }
    Ok(match route(parts.uri.path()) {
        Route::Page => {
            let mut r = Response::new(Full::new(site.page.clone()));
            r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/html"));
            r
        }
        Route::Sized(n) => {
            let mut r = Response::new(Full::new(site.sized(n as usize)));
            r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
            r
        }
        Route::Traversal => text(StatusCode::BAD_REQUEST, "path traversal refused\n"),
        Route::TooLarge => text(StatusCode::BAD_REQUEST, "/n/BYTES takes at most 64 MiB\n"),
        Route::NotFound => text(StatusCode::NOT_FOUND, "not found: this server has / and /n/BYTES\n"),
    })
}

fn http1() -> hyper::server::conn::http1::Builder {
    let mut b = hyper::server::conn::http1::Builder::new();
    b.max_buf_size(HEADER_CAP.max(8192) * 2)
        .max_header_size(HEADER_CAP)
        .keep_alive(true)
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(std::time::Duration::from_secs(IDLE_S));
    b
}

async fn serve_conn(site: Arc<Site>, stream: tokio::net::TcpStream) {
    let _ = stream.set_nodelay(true);
    let io = hyper_util::rt::TokioIo::new(stream);
    let svc = hyper::service::service_fn(move |req| handle(Arc::clone(&site), req));
    // A client that goes away is the client's business.
    let _ = http1().serve_connection(io, svc).await;
}

/// Bind a listening TCP socket with SO_REUSEADDR and a deep backlog (std's
/// bind listens with 128, which a closed loop of thousands of connections
/// overflows: dropped SYNs come back after a 1 s retransmission).
pub(crate) fn bind(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    use std::os::fd::OwnedFd;
    let (family, sa, len) = sockaddr(addr);
    // SAFETY: plain socket(2) call.
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let one: libc::c_int = 1;
    // SAFETY: valid option pointer and length; sa is a valid sockaddr of len bytes.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        if libc::bind(fd, (&sa as *const libc::sockaddr_storage).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::listen(fd, BACKLOG) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(TcpListener::from(owned))
}

/// A socket address in the kernel's form.
pub(crate) fn sockaddr(addr: std::net::SocketAddr) -> (libc::c_int, libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data; all zeroes is valid.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match addr {
        std::net::SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_in fits in sockaddr_storage.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
            (libc::AF_INET, ss, std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t)
        }
        std::net::SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_in6 fits in sockaddr_storage.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
            (libc::AF_INET6, ss, std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t)
        }
    }
}

/// The server process's life: wait for "go", start the model's threads, say
/// "ok" (or "err MESSAGE"), then answer control requests until the pipe
/// closes. Returns the exit code.
pub(crate) fn serve(spec: &Spec) -> i32 {
    crate::harness::hygiene::name_task(c"schedlab-httpd");
    // SAFETY: the descriptors were handed to this process for it alone.
    let listener = unsafe { TcpListener::from_raw_fd(spec.listen) };
    let mut b = [0u8; 1];
    if !crate::harness::read_exact(spec.ctl, &mut b) || b[0] != b'g' {
        return 0;
    }
    // SAFETY: mlockall takes flags only.
    if spec.mlock && unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
        say(spec.rep, "err mlockall failed: raise ulimit -l or run as root, or drop --mlock\n");
        return 70;
    }
    let site = Arc::new(Site::new(spec.page_size));
    let started = match spec.model {
        Model::Event => start_event(spec.workers, listener, site).map(Running::Event),
        Model::Threads => start_threads(spec.workers, listener, site).map(|_| Running::Threads),
    };
    let _running = match started {
        Ok(r) => r,
        Err(e) => {
            say(spec.rep, &format!("err {}\n", e.replace('\n', " ")));
            return 71;
        }
    };
    if !say(spec.rep, "ok\n") {
        return 0;
    }
    control(spec.ctl, spec.rep)
}

/// Keeps the event model's runtime alive while the control loop runs.
enum Running {
    Event(#[allow(dead_code)] tokio::runtime::Runtime),
    Threads,
}

fn say(fd: RawFd, s: &str) -> bool {
    crate::harness::write_exact(fd, s.as_bytes())
}

/// 'r': "USER_US SYS_US VOLUNTARY INVOLUNTARY" of the whole process (every
/// thread, live or exited: getrusage(RUSAGE_SELF)); anything else or EOF: exit.
fn control(ctl: RawFd, rep: RawFd) -> i32 {
    loop {
        let mut b = [0u8; 1];
        if !crate::harness::read_exact(ctl, &mut b) || b[0] != b'r' {
            return 0;
        }
        // SAFETY: ru is a valid, writable rusage.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
        let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
        let line = format!("{} {} {} {}\n", us(ru.ru_utime), us(ru.ru_stime), ru.ru_nvcsw, ru.ru_nivcsw);
        if !say(rep, &line) {
            return 0;
        }
    }
}

fn start_event(workers: usize, listener: TcpListener, site: Arc<Site>) -> Result<tokio::runtime::Runtime, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("httpd-event")
        .enable_all()
        .build()
        .map_err(|e| format!("starting the tokio runtime: {e}"))?;
    listener.set_nonblocking(true).map_err(|e| format!("listener: {e}"))?;
    let l = {
        let _enter = rt.enter();
        tokio::net::TcpListener::from_std(listener).map_err(|e| format!("listener: {e}"))?
    };
    rt.spawn(async move {
        loop {
            match l.accept().await {
                Ok((s, _)) => {
                    tokio::spawn(serve_conn(Arc::clone(&site), s));
                }
                // EMFILE and friends: back off instead of spinning.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(1)).await,
            }
        }
    });
    Ok(rt)
}

struct Pool {
    listener: TcpListener,
    site: Arc<Site>,
    idle: AtomicUsize,
    total: AtomicUsize,
}

fn start_threads(workers: usize, listener: TcpListener, site: Arc<Site>) -> Result<(), String> {
    let pool = Arc::new(Pool { listener, site, idle: AtomicUsize::new(0), total: AtomicUsize::new(0) });
    for _ in 0..workers {
        spawn_pool_thread(&pool).map_err(|e| format!("starting a server thread: {e}"))?;
    }
    Ok(())
}

fn spawn_pool_thread(pool: &Arc<Pool>) -> std::io::Result<()> {
    if pool.total.fetch_add(1, Ordering::SeqCst) >= MAX_THREADS {
        pool.total.fetch_sub(1, Ordering::SeqCst);
        return Ok(());
    }
    let p = Arc::clone(pool);
    std::thread::Builder::new()
        .name("httpd-conn".into())
        .stack_size(256 << 10)
        .spawn(move || pool_thread(p))
        .map(|_| ())
}

/// One connection at a time, each served to its end by this thread's own
/// current-thread runtime (so the thread sleeps in the kernel while its
/// connection is idle, as a blocking server's would).
fn pool_thread(pool: Arc<Pool>) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        pool.total.fetch_sub(1, Ordering::SeqCst);
        return;
    };
    loop {
        pool.idle.fetch_add(1, Ordering::SeqCst);
        let conn = pool.listener.accept();
        // The last idle thread took a connection: start a spare one, so
        // the next connection finds a thread waiting in accept.
        if pool.idle.fetch_sub(1, Ordering::SeqCst) == 1 {
            let _ = spawn_pool_thread(&pool);
        }
        match conn {
            Ok((s, _)) => {
                let site = Arc::clone(&pool.site);
                rt.block_on(async move {
                    if s.set_nonblocking(true).is_ok() {
                        if let Ok(s) = tokio::net::TcpStream::from_std(s) {
                            serve_conn(site, s).await;
                        }
                    }
                });
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_route_and_traversal_is_refused_raw_and_encoded() {
        assert_eq!(route("/"), Route::Page);
        assert_eq!(route("/index.html"), Route::Page);
        assert_eq!(route("/n/0"), Route::Sized(0));
        assert_eq!(route("/n/4096"), Route::Sized(4096));
        assert_eq!(route("/n/%34"), Route::Sized(4), "percent-encoded digits decode");
        assert_eq!(route(&format!("/n/{}", SIZED_MAX + 1)), Route::TooLarge);
        assert_eq!(route("/n/99999999999999999999999"), Route::TooLarge);
        assert_eq!(route("/n/"), Route::NotFound);
        assert_eq!(route("/n/12x"), Route::NotFound);
        assert_eq!(route("/etc/passwd"), Route::NotFound);
        for bad in ["/../etc/passwd", "/n/../../x", "/%2e%2e/x", "/%2E%2e/", "/./", "/a\\b", "/x%00", "/.."] {
            assert_eq!(route(bad), Route::Traversal, "{bad}");
        }
        assert_eq!(route("/..x"), Route::NotFound, "a name that starts with dots is not a parent");
        assert_eq!(route("/%"), Route::NotFound);
        assert_eq!(route("/%2"), Route::NotFound);
    }

    #[test]
    fn the_page_has_the_asked_size_and_is_html() {
        for n in [0, 1, 50, 10_701, 100_000] {
            assert_eq!(page(n).len(), n);
        }
        let p = String::from_utf8(page(10_701)).unwrap();
        assert!(p.starts_with("<!DOCTYPE html>") && p.ends_with("</html>\n"));
        let s = Site::new(100);
        assert_eq!(s.sized(10).len(), 10);
        assert_eq!(s.sized(5000).len(), 5000);
        assert_eq!(s.sized(3).len(), 3, "a smaller page slices the grown filler");
    }

    #[test]
    fn specs_round_trip_and_strays_are_refused() {
        let s = Spec { listen: 3, ctl: 4, rep: 7, model: Model::Event, workers: 2, page_size: 10_701, mlock: true };
        assert_eq!(Spec::parse(&s.encode()), Some(s));
        for bad in ["", "1 2 3", "3 4 7 fork 2 10 0", "3 4 7 event 0 10 0", "3 4 7 event 2 10 2", "-1 4 7 event 2 10 0"]
        {
            assert_eq!(Spec::parse(bad), None, "{bad}");
        }
    }
}
