//! The test cluster's parts: HAProxy from the deploy template, throng nodes
//! behind it, a PostgreSQL cluster of the test's own, a booking load.

#![allow(dead_code)] // each test module uses a different part

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

use crate::helpers::{person, registration_body, Api, ProcessServer, FROM};

/// Health checks every 200 ms in the tests (the deploy default is 1 s), so
/// a node leaves after 2 failed checks: ~0.4 s.
pub const CHECK_MS: u64 = 200;
/// A node's drain in the tests: above CHECK_MS x fall (2), with margin.
pub const DRAIN_MS: u64 = 1_000;

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Held by each cluster test for its whole run: one cluster at a time on
/// the machine, so one test's crowd does not slow another's measurements.
pub async fn one_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    SERIAL.lock().await
}

/// Flags every node behind the balancer gets.
pub fn node_flags() -> Vec<String> {
    vec![
        "--trusted-proxies".into(),
        "127.0.0.1/32".into(),
        "--drain-ms".into(),
        DRAIN_MS.to_string(),
    ]
}

/// Polls `f` every 50 ms until it holds; panics after `limit` naming `what`.
pub async fn wait_for<F, Fut>(what: &str, limit: Duration, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !f().await {
        assert!(
            started.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A free loopback port (bound, read, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Whether the tests must run (CI) rather than explain why they cannot.
fn in_ci() -> bool {
    std::env::var_os("CI").is_some()
}

/// The admin URL of the shared PostgreSQL; panics (the test fails, saying
/// why) when it is not configured: these tests never pass without running.
pub fn pg_admin_url_or_fail() -> String {
    match std::env::var("THRONG_TEST_PG_URL") {
        Ok(u) if !u.trim().is_empty() => u.trim().to_string(),
        _ => panic!(
            "NOT RUN: the cluster tests need PostgreSQL; set THRONG_TEST_PG_URL \
             (e.g. postgres://postgres@127.0.0.1:5432/test), as .ci/run does"
        ),
    }
}

/// The `haproxy` binary; panics (the test fails, saying why) when absent.
pub fn haproxy_bin() -> PathBuf {
    for dir in ["/usr/sbin", "/usr/local/sbin", "/usr/bin", "/usr/local/bin"] {
        let p = Path::new(dir).join("haproxy");
        if p.exists() {
            return p;
        }
    }
    panic!(
        "NOT RUN: haproxy is not installed (apt-get install haproxy; .ci/run installs it){}",
        if in_ci() {
            " - and CI must run these tests"
        } else {
            ""
        }
    );
}

/// `deploy/haproxy.cfg` with one `server` line per node.
pub fn render_haproxy_config(nodes: &[SocketAddr]) -> String {
    let template = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/haproxy.cfg"),
    )
    .expect("deploy/haproxy.cfg");
    let servers: Vec<String> = nodes
        .iter()
        .enumerate()
        .map(|(i, a)| format!("    server n{} {a}", i + 1))
        .collect();
    let marker = "    # @SERVERS@";
    assert!(
        template.lines().any(|l| l == marker),
        "the template has its servers marker"
    );
    template
        .lines()
        .map(|l| {
            if l == marker {
                servers.join("\n")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// HAProxy on loopback in front of `nodes`; killed on drop.
pub struct Haproxy {
    pub addr: SocketAddr,
    pub stats: SocketAddr,
    pub api: Api,
    child: tokio::process::Child,
    pub log_path: PathBuf,
    _dir: TempDir,
}

impl Haproxy {
    /// Starts HAProxy; with `rate_limit` its per-client limit (requests per
    /// 10 s) is on. Returns once every node is UP.
    pub async fn start(nodes: &[SocketAddr], rate_limit: Option<u32>) -> Haproxy {
        let bin = haproxy_bin();
        let dir = TempDir::new().unwrap();
        let cfg = dir.path().join("haproxy.cfg");
        std::fs::write(&cfg, render_haproxy_config(nodes)).unwrap();
        let log_path = dir.path().join("haproxy.log");
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let stats: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut cmd = tokio::process::Command::new(bin);
        cmd.arg("-db")
            .arg("-f")
            .arg(&cfg)
            .env("THRONG_LB_BIND", addr.to_string())
            .env("THRONG_LB_STATS_BIND", stats.to_string())
            .env("THRONG_LB_CHECK_MS", CHECK_MS.to_string())
            .env_remove("THRONG_LB_RATE_LIMIT")
            .stdin(Stdio::null())
            .stdout(Stdio::from(std::fs::File::create(&log_path).unwrap()))
            .stderr(Stdio::from(
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(&log_path)
                    .unwrap(),
            ))
            .kill_on_drop(true);
        if let Some(r) = rate_limit {
            cmd.env("THRONG_LB_RATE_LIMIT", r.to_string());
        }
        let child = cmd.spawn().expect("spawn haproxy");
        let lb = Haproxy {
            addr,
            stats,
            api: Api::new(addr),
            child,
            log_path,
            _dir: dir,
        };
        lb.wait_up(nodes.len(), Duration::from_secs(20)).await;
        lb
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Each server's row of the stats CSV, as (name, column -> value).
    /// A HAProxy that does not answer (yet, or any more) has none: callers
    /// poll until the one they wait for shows.
    pub async fn servers(&self) -> Vec<(String, std::collections::HashMap<String, String>)> {
        let text = self.stats_csv().await.unwrap_or_default();
        let mut lines = text.lines();
        let head = lines.next().unwrap_or_default();
        let cols: Vec<&str> = head.trim_start_matches("# ").split(',').collect();
        lines
            .filter_map(|l| {
                let row: std::collections::HashMap<String, String> = cols
                    .iter()
                    .zip(l.split(','))
                    .map(|(c, v)| (c.to_string(), v.to_string()))
                    .collect();
                let name = row.get("svname")?.clone();
                (row.get("pxname").map(String::as_str) == Some("nodes") && name.starts_with('n'))
                    .then_some((name, row))
            })
            .collect()
    }

    /// The stats page as CSV; `None` when HAProxy does not answer in 5 s.
    async fn stats_csv(&self) -> Option<String> {
        let url = format!("http://{}/stats;csv", self.stats);
        let res = tokio::time::timeout(
            Duration::from_secs(5),
            reqwest::Client::new().get(&url).send(),
        )
        .await
        .ok()?
        .ok()?;
        res.text().await.ok()
    }

    /// `server`'s status (UP, DOWN, UP 1/2, ...).
    pub async fn status(&self, server: &str) -> String {
        self.servers()
            .await
            .into_iter()
            .find(|(n, _)| n == server)
            .and_then(|(_, r)| r.get("status").cloned())
            .unwrap_or_default()
    }

    /// Sessions HAProxy sent to `server` so far.
    pub async fn sessions(&self, server: &str) -> u64 {
        self.servers()
            .await
            .into_iter()
            .find(|(n, _)| n == server)
            .and_then(|(_, r)| r.get("stot").and_then(|v| v.parse().ok()))
            .unwrap_or(0)
    }

    pub async fn wait_up(&self, count: usize, limit: Duration) {
        wait_for(&format!("{count} nodes UP in HAProxy"), limit, || async {
            let s = self.servers().await;
            s.len() == count
                && s.iter()
                    .all(|(_, r)| r.get("status").map(String::as_str) == Some("UP"))
        })
        .await;
    }

    pub async fn wait_status(&self, server: &str, want: &str, limit: Duration) {
        wait_for(&format!("{server} {want} in HAProxy"), limit, || async {
            self.status(server).await == want
        })
        .await;
    }
}

/// `count` nodes on one store, sharing `data_dir`'s secrets.
pub async fn start_nodes(
    count: usize,
    data_dir: &Path,
    pg_url: &str,
    extra: &[&str],
) -> Vec<ProcessServer> {
    let mut flags = node_flags();
    flags.extend(extra.iter().map(|s| s.to_string()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut nodes = Vec::new();
    for _ in 0..count {
        nodes.push(ProcessServer::start(data_dir, Some(pg_url), &flags).await);
    }
    nodes
}

/// Restarts a node on `addr` (its old port, so HAProxy finds it again).
pub async fn restart_node(
    addr: SocketAddr,
    data_dir: &Path,
    pg_url: &str,
    extra: &[&str],
) -> ProcessServer {
    let mut flags = node_flags();
    flags.extend(extra.iter().map(|s| s.to_string()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    ProcessServer::start_at(&addr.to_string(), data_dir, Some(pg_url), &flags).await
}

// ---------------------------------------------------------------- booking load

/// The slot behind the `n`th registration of a seed of `days` x `slots`
/// per place: (place, day, slot).
pub fn slot_of(n: u64, days: u64, slots: u64) -> (i64, String, i64) {
    let place = (n / (days * slots)) as i64 + 1;
    let day_index = (n / slots) % days;
    let from = time::Date::parse(
        FROM,
        &time::macros::format_description!("[year]-[month]-[day]"),
    )
    .unwrap();
    let day = from + time::Duration::days(day_index as i64);
    (place, day.to_string(), (n % slots) as i64)
}

/// One answer the load got.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Since the load started.
    pub at: Duration,
    pub latency: Duration,
    /// 0 for a transport error (connection reset, timeout).
    pub status: u16,
    pub code: Option<String>,
    pub retry_after: Option<String>,
    /// The registration id of a 201.
    pub id: Option<String>,
}

/// Writers registering distinct slots through `api` until `stop` is set:
/// each takes the next slot number. Outcomes are kept in order of arrival.
pub struct BookingLoad {
    pub outcomes: Arc<Mutex<Vec<Outcome>>>,
    pub started: Instant,
    stop: Arc<std::sync::atomic::AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl BookingLoad {
    pub fn start(
        api: &Api,
        writers: usize,
        days: u64,
        slots: u64,
        slots_total: u64,
        pause: Duration,
    ) -> BookingLoad {
        let outcomes = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let next = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        // Its own client with a shorter timeout than a test's.
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .no_proxy()
            .build()
            .unwrap();
        let tasks = (0..writers)
            .map(|_| {
                let (outcomes, stop, next, http) =
                    (outcomes.clone(), stop.clone(), next.clone(), http.clone());
                let url = api.url("/api/booking/registrations");
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let n = next.fetch_add(1, Ordering::Relaxed);
                        assert!(n < slots_total, "the load ran out of slots");
                        let (place, day, slot) = slot_of(n, days, slots);
                        let body = registration_body(place, &day, slot, person(n + 1));
                        let t0 = Instant::now();
                        let res = http.post(&url).json(&body).send().await;
                        let mut o = Outcome {
                            at: t0 - started,
                            latency: Duration::ZERO,
                            status: 0,
                            code: None,
                            retry_after: None,
                            id: None,
                        };
                        if let Err(e) = &res {
                            o.code = Some(format!("transport: {e:?}"));
                        }
                        if let Ok(res) = res {
                            o.status = res.status().as_u16();
                            o.retry_after = res
                                .headers()
                                .get("retry-after")
                                .and_then(|v| v.to_str().ok())
                                .map(str::to_string);
                            let body = res.bytes().await.unwrap_or_default();
                            let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                            o.id = v["registrationId"].as_str().map(str::to_string);
                            o.code = v["error"]["code"].as_str().map(str::to_string);
                            if o.status == 201 {
                                assert!(o.id.is_some(), "a 201 names its registration: {v}");
                            }
                        }
                        o.latency = t0.elapsed();
                        let failed = o.status != 201;
                        outcomes.lock().unwrap().push(o);
                        // After a failure a client waits before trying again.
                        let pause = if failed {
                            pause.max(Duration::from_millis(100))
                        } else {
                            pause
                        };
                        if !pause.is_zero() {
                            tokio::time::sleep(pause).await;
                        }
                    }
                })
            })
            .collect();
        BookingLoad {
            outcomes,
            started,
            stop,
            tasks,
        }
    }

    /// How many answers so far.
    pub fn count(&self) -> usize {
        self.outcomes.lock().unwrap().len()
    }

    /// Stops the writers (each finishes its request) and returns every outcome.
    pub async fn finish(self) -> Vec<Outcome> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            tokio::time::timeout(Duration::from_secs(30), t)
                .await
                .expect("a writer stops within its request timeout")
                .expect("a writer did not panic");
        }
        let v = self.outcomes.lock().unwrap().clone();
        v
    }
}

/// Every registration id in the database.
pub async fn registration_ids(pg_url: &str) -> std::collections::HashSet<String> {
    let (client, conn) = tokio_postgres::connect(pg_url, tokio_postgres::NoTls)
        .await
        .expect("connect to the test database");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
        .query("SELECT id FROM booking_registrations", &[])
        .await
        .expect("read the registrations")
        .iter()
        .map(|r| r.get::<_, String>(0))
        .collect()
}

// ---------------------------------------------------------------- own PostgreSQL

/// A PostgreSQL cluster of the test's own (initdb into a temporary folder,
/// on a free loopback port), so stopping it disturbs nothing else. Run as
/// the `postgres` user when the tests run as root. Stopped on drop.
pub struct OwnPostgres {
    pub port: u16,
    bin: PathBuf,
    data: PathBuf,
    _dir: TempDir,
}

fn pg_bin_dir() -> PathBuf {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, b)| b).unwrap_or_else(|| {
        panic!(
            "NOT RUN: PostgreSQL's server binaries (/usr/lib/postgresql/*/bin/initdb) are not \
             installed (apt-get install postgresql)"
        )
    })
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

impl OwnPostgres {
    pub async fn create() -> OwnPostgres {
        let bin = pg_bin_dir();
        let dir = TempDir::new().unwrap();
        let data = dir.path().join("data");
        if is_root() {
            let st = std::process::Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(st.success(), "chown the PostgreSQL folder to postgres");
        }
        let pg = OwnPostgres {
            port: free_port(),
            bin,
            data,
            _dir: dir,
        };
        let data = pg.data.display().to_string();
        let b = tokio::task::spawn_blocking({
            let pg_cmd = pg.shallow();
            move || {
                pg_cmd.run(
                    "initdb",
                    &[
                        "-D",
                        &data,
                        "-A",
                        "trust",
                        "-U",
                        "postgres",
                        "--no-sync",
                        "-E",
                        "UTF8",
                    ],
                )
            }
        });
        tokio::time::timeout(Duration::from_secs(120), b)
            .await
            .expect("initdb in time")
            .unwrap();
        pg.start().await;
        pg
    }

    /// A copy naming the same folders (for blocking tasks); not dropped as one.
    fn shallow(&self) -> OwnPostgresCmd {
        OwnPostgresCmd {
            bin: self.bin.clone(),
            data: self.data.clone(),
            port: self.port,
        }
    }

    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Starts the server and waits until it accepts connections. It runs
    /// with `fsync=off`: the tests stop the server process, never the
    /// machine, so what it wrote to the kernel survives (commits are still
    /// synchronous: acknowledged only once written to the WAL), and a disk
    /// shared with other work does not stall it.
    pub async fn start(&self) {
        let cmd = self.shallow();
        tokio::time::timeout(
            Duration::from_secs(60),
            tokio::task::spawn_blocking(move || cmd.start()),
        )
        .await
        .expect("PostgreSQL starts in time")
        .unwrap();
    }

    /// Stops the server at once, as a crash would (`-m immediate`: no
    /// checkpoint; the restart replays the WAL).
    pub async fn stop_immediate(&self) {
        let cmd = self.shallow();
        tokio::time::timeout(
            Duration::from_secs(60),
            tokio::task::spawn_blocking(move || cmd.stop("immediate")),
        )
        .await
        .expect("PostgreSQL stops in time")
        .unwrap();
    }
}

/// What a blocking task needs to run PostgreSQL's programs.
struct OwnPostgresCmd {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
}

impl OwnPostgresCmd {
    fn run(&self, program: &str, args: &[&str]) {
        OwnPostgres::run_with(&self.bin, program, args)
    }

    fn start(&self) {
        let data = self.data.display().to_string();
        let log = self.data.with_file_name("server.log").display().to_string();
        let sock = self.data.with_file_name("").display().to_string();
        let opts = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {sock} -c max_connections=200 -c fsync=off",
            self.port
        );
        self.run(
            "pg_ctl",
            &[
                "-D", &data, "-l", &log, "-o", &opts, "-w", "-t", "50", "start",
            ],
        );
    }

    fn stop(&self, mode: &str) {
        let data = self.data.display().to_string();
        self.run(
            "pg_ctl",
            &["-D", &data, "-m", mode, "-w", "-t", "50", "stop"],
        );
    }
}

impl OwnPostgres {
    fn run_with(bin: &Path, program: &str, args: &[&str]) {
        let path = bin.join(program);
        let mut c = if is_root() {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            std::process::Command::new(path)
        };
        let out = c
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .unwrap_or_else(|e| panic!("run {program}: {e}"));
        assert!(
            out.status.success(),
            "{program} {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        let data = self.data.display().to_string();
        let bin = self.bin.clone();
        let _ = std::panic::catch_unwind(move || {
            OwnPostgres::run_with(
                &bin,
                "pg_ctl",
                &["-D", &data, "-m", "immediate", "-w", "-t", "20", "stop"],
            )
        });
    }
}
