//! Test support, not part of the store's interface: a throw-away PostgreSQL
//! cluster for the tests of the PostgreSQL backend and of the commands.
//!
//! One cluster per test process, started on first use (`initdb` and
//! `pg_ctl`, as the unprivileged user `nobody` when running as root, which
//! PostgreSQL refuses) in a temporary directory on a free loopback port; a
//! watcher process stops it and removes the directory once the test process
//! has exited, however it exits. Each test gets a database of its own.
//! Connections over TCP need a password (scram-sha-256), so tests of wrong
//! credentials mean something.

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// What a test that needs the server says when there is none.
pub const MISSING: &str = "needs PostgreSQL (initdb and pg_ctl): install Debian's postgresql (CI's .ci/run does), \
                           or put the directory holding initdb on PATH";

/// The cluster's superuser.
pub const ADMIN: &str = "postgres";

pub struct PgCluster {
    dir: PathBuf,
    port: u16,
    password: String,
}

/// The directory holding `initdb` and `pg_ctl`: on PATH, else Debian's
/// /usr/lib/postgresql/VERSION/bin (newest first), which is not on PATH.
pub fn bin_dir() -> Option<PathBuf> {
    let has_tools = |d: &Path| d.join("initdb").is_file() && d.join("pg_ctl").is_file();
    if let Some(path) = std::env::var_os("PATH") {
        if let Some(dir) = std::env::split_paths(&path).find(|d| has_tools(d)) {
            return Some(dir);
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse::<u32>().ok()?, e.path().join("bin"))))
        .filter(|(_, d)| has_tools(d))
        .collect();
    versions.sort();
    versions.pop().map(|(_, d)| d).or_else(|| Some(PathBuf::from("/usr/local/pgsql/bin")).filter(|d| has_tools(d)))
}

/// The shared cluster, started on first use. Panics (with [`MISSING`] when
/// PostgreSQL is not installed) if it cannot start.
pub fn cluster() -> &'static PgCluster {
    static CLUSTER: OnceLock<PgCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| PgCluster::start().unwrap_or_else(|e| panic!("{e}")))
}

fn running_as_root() -> bool {
    std::fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false)
}

/// The account PostgreSQL runs as when the tests run as root.
const UNPRIVILEGED: &str = "nobody";

fn ids_of(user: &str) -> Result<(u32, u32), String> {
    let id = |flag: &str| -> Result<u32, String> {
        let out = Command::new("id").args([flag, user]).output().map_err(|e| format!("id {flag} {user}: {e}"))?;
        // (id is in /usr/bin, on every PATH.)
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(|_| format!("there is no user '{user}' to run PostgreSQL as"))
    };
    Ok((id("-u")?, id("-g")?))
}

/// util-linux's runuser, which root's PATH may lack (it lives in /usr/sbin).
fn runuser() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join("runuser"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("runuser"))
}

/// `tool` from `bin` with `args`, as the unprivileged user when root.
fn tool(bin: &Path, tool: &str, args: &[&str]) -> Command {
    let exe = bin.join(tool);
    if running_as_root() {
        let mut c = Command::new(runuser());
        c.args(["-u", UNPRIVILEGED, "--"]).arg(exe).args(args);
        c
    } else {
        let mut c = Command::new(exe);
        c.args(args);
        c
    }
}

fn run(mut c: Command, what: &str) -> Result<(), String> {
    let out =
        c.stdin(Stdio::null()).output().map_err(|e| format!("{what}: cannot start {:?}: {e}", c.get_program()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(54329)
}

impl PgCluster {
    fn start() -> Result<PgCluster, String> {
        let bin = bin_dir().ok_or_else(|| MISSING.to_string())?;
        let dir = tempfile::Builder::new()
            .prefix("schedlab-pg-")
            .tempdir()
            .map_err(|e| format!("cannot make a directory for the test cluster: {e}"))?
            .keep();
        let data = dir.join("data");
        let (data_s, dir_s) = (data.to_string_lossy().into_owned(), dir.to_string_lossy().into_owned());
        let pw_s = dir.join("pw").to_string_lossy().into_owned();
        // The watcher first: from here on the directory goes when we do,
        // whatever fails below.
        let pg_ctl = bin.join("pg_ctl");
        let as_user =
            if running_as_root() { format!("'{}' -u {UNPRIVILEGED} -- ", runuser().display()) } else { String::new() };
        let watcher = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
             cd /; {as_user}'{pg_ctl}' -D '{data_s}' -m immediate stop >/dev/null 2>&1; rm -rf '{dir_s}'",
            pid = std::process::id(),
            pg_ctl = pg_ctl.display(),
        );
        Command::new("sh")
            .args(["-c", &watcher])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group: a Ctrl-C of the tests does not stop it.
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start the cluster's watcher: {e}"))?;
        let password = format!("admin-{}-{}", std::process::id(), free_port());
        std::fs::write(dir.join("pw"), &password).map_err(|e| e.to_string())?;
        if running_as_root() {
            let (uid, gid) = ids_of(UNPRIVILEGED)?;
            for p in [dir.as_path(), &dir.join("pw")] {
                std::os::unix::fs::chown(p, Some(uid), Some(gid)).map_err(|e| format!("chown {}: {e}", p.display()))?;
            }
        }
        let mut initdb = tool(
            &bin,
            "initdb",
            &[
                "-D",
                &data_s,
                "-U",
                ADMIN,
                "--pwfile",
                &pw_s,
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        initdb.current_dir(&dir);
        run(initdb, "initdb")?;
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            let options = format!(
                "-p {port} -k {dir_s} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off \
                 -c full_page_writes=off -c max_connections=200"
            );
            let log = dir.join("log").to_string_lossy().into_owned();
            let mut start =
                tool(&bin, "pg_ctl", &["-D", &data_s, "-l", &log, "-w", "-t", "120", "-o", &options, "start"]);
            start.current_dir(&dir);
            match run(start, "pg_ctl start") {
                Ok(()) => return Ok(PgCluster { dir, port, password }),
                Err(e) => {
                    last = format!("{e}\n{}", std::fs::read_to_string(dir.join("log")).unwrap_or_default());
                }
            }
        }
        Err(format!("the test cluster did not start: {last}"))
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A URL for `user` (with `password`, if any) on `database`.
    pub fn url(&self, user: &str, password: Option<&str>, database: &str) -> String {
        match password {
            Some(pw) => format!("postgres://{user}:{pw}@127.0.0.1:{}/{database}", self.port),
            None => format!("postgres://{user}@127.0.0.1:{}/{database}", self.port),
        }
    }

    /// The superuser's URL for `database`.
    pub fn admin_url(&self, database: &str) -> String {
        self.url(ADMIN, Some(&self.password), database)
    }

    /// A superuser session on `database`.
    pub fn admin(&self, database: &str) -> postgres::Client {
        postgres::Client::connect(&self.admin_url(database), postgres::NoTls)
            .unwrap_or_else(|e| panic!("cannot connect to the test cluster: {e}"))
    }

    /// A new, empty database; its name.
    pub fn create_database(&self) -> String {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!("t{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        self.admin("postgres").batch_execute(&format!("CREATE DATABASE {name}")).expect("CREATE DATABASE");
        name
    }

    /// A new login role with this password and nothing else.
    pub fn create_role(&self, name: &str, password: &str) {
        self.admin("postgres")
            .batch_execute(&format!("CREATE ROLE {name} LOGIN PASSWORD '{password}'"))
            .expect("CREATE ROLE");
    }
}

/// A live run as the store tests use it (host "h", kernel 6.18).
pub fn sample_run() -> schedlab_core::Run {
    use schedlab_core::{Environment, Run, RunKind, ToolInfo};
    let tool = ToolInfo { name: "schedlab".into(), version: "0.1.0".into(), git_rev: None };
    let mut r = Run::new(RunKind::Live, tool, vec!["schedlab".into(), "run".into()], "h".into(), 1000);
    r.env_start = Some(Environment { kernel_release: Some("6.18".into()), ..Default::default() });
    r
}

/// A complete benchmark `name` with a rate and a latency histogram.
pub fn sample_bench(name: &str) -> schedlab_core::BenchResult {
    use schedlab_core::{
        BenchResult, BenchStatus, Condition, Direction, LatencyHistogram, Metric, SchedCondition, Unit,
    };
    let cond = Condition::Live { requested: SchedCondition::default(), applied: None, loads: vec![] };
    let mut b = BenchResult::new(name, cond, 1001).param("loops", 1000);
    let mut h = LatencyHistogram::new();
    h.record_n(2000, 10);
    b.metrics.push(Metric::samples("rate", Unit::PerSecond, Direction::HigherIsBetter, vec![1.0, 2.0]).headline());
    b.metrics.push(Metric::histogram("latency", Direction::LowerIsBetter, h));
    b.status = BenchStatus::Complete;
    b.repetitions = 2;
    b
}
