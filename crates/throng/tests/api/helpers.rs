//! Test harness: a real server on 127.0.0.1 port 0 with a fresh store per
//! test (a temporary data dir for SQLite, a fresh database for PostgreSQL),
//! either in-process (`TestServer`) or as the real binary (`ProcessServer`),
//! and a typed HTTP client (`Api`).
//!
//! PostgreSQL tests need `THRONG_TEST_PG_URL` (an admin URL, e.g.
//! postgres://postgres@127.0.0.1:5432/test) when they are built. Without it
//! `build.rs` leaves `cfg(throng_pg_tests)` unset and the macros below mark
//! them `#[ignore]` with the reason, so cargo reports them as ignored, never
//! as passed; under CI (env `CI` set) they are built anyway and fail without
//! the URL. `scripts/test` sets the URL when a local PostgreSQL answers.

#![allow(dead_code)] // each test module uses a different part of the harness

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use serde_json::{json, Value};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};

use throng::app::{AppState, Running, ServeArgs};
use throng::platform::auth::{Role, TokenKeys};
use throng::platform::secrets::Secrets;
use throng::services::booking::seed::SeedBookingArgs;
pub use throng::store::Columns;

/// The first day of every seeded data set (far in the future, fixed).
pub const FROM: &str = "2030-01-01";
/// How long one HTTP request may take in a test before it counts as a hang.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a process gets to print its listening line.
const PROCESS_START_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    Sqlite,
    Postgres,
}

/// Instantiates `async fn case(kind: StoreKind)` once per store, as
/// `case::sqlite` and `case::postgres`.
#[macro_export]
macro_rules! both_stores {
    ($($case:ident),+ $(,)?) => {$(
        mod $case {
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                super::$case($crate::helpers::StoreKind::Sqlite).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            #[cfg_attr(
                not(throng_pg_tests),
                ignore = "PostgreSQL: THRONG_TEST_PG_URL was not set when the tests were built \
                          (e.g. postgres://postgres@127.0.0.1:5432/test; scripts/test finds a local server)"
            )]
            async fn postgres() {
                super::$case($crate::helpers::StoreKind::Postgres).await
            }
        }
    )+};
}

/// Instantiates `async fn case(kind: StoreKind)` for PostgreSQL only.
#[macro_export]
macro_rules! postgres_only {
    ($($case:ident),+ $(,)?) => {$(
        mod $case {
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            #[cfg_attr(
                not(throng_pg_tests),
                ignore = "PostgreSQL: THRONG_TEST_PG_URL was not set when the tests were built \
                          (e.g. postgres://postgres@127.0.0.1:5432/test; scripts/test finds a local server)"
            )]
            async fn postgres() {
                super::$case($crate::helpers::StoreKind::Postgres).await
            }
        }
    )+};
}

// ---------------------------------------------------------------- PostgreSQL

/// The admin URL for PostgreSQL tests. A PostgreSQL test that runs has one:
/// without `THRONG_TEST_PG_URL` at build time the tests are ignored (see the
/// macros), so a missing URL now (CI, or a binary built with it and run
/// without it) fails the test instead of passing it having done nothing.
pub fn pg_admin_url() -> String {
    match std::env::var("THRONG_TEST_PG_URL") {
        Ok(url) if !url.trim().is_empty() => url.trim().to_string(),
        _ => panic!(
            "this PostgreSQL test needs THRONG_TEST_PG_URL (e.g. \
             postgres://postgres@127.0.0.1:5432/test){}",
            if std::env::var_os("CI").is_some() {
                "; CI must run the PostgreSQL tests"
            } else {
                ""
            }
        ),
    }
}

/// `url` with its database name replaced by `db`.
fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let host_and_path = &base[scheme_end..];
    let host = match host_and_path.find('/') {
        Some(i) => &host_and_path[..i],
        None => host_and_path,
    };
    let mut out = format!("{}{host}/{db}", &base[..scheme_end]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

async fn pg_connect(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to THRONG_TEST_PG_URL: {e}"));
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// Runs one admin statement (CREATE/DROP/ALTER DATABASE, ...) on the admin URL.
pub async fn pg_admin(admin_url: &str, sql: &str) {
    let client = pg_connect(admin_url).await;
    client
        .batch_execute(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

static STALE_DROPPED: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();

/// Drops test databases left by test processes that are gone (killed runs);
/// databases of live processes (other test binaries running now) are kept.
async fn drop_stale_databases(admin_url: &str) {
    let client = pg_connect(admin_url).await;
    let rows = client
        .query(
            "SELECT datname FROM pg_database WHERE datname LIKE 'throng\\_t\\_%'",
            &[],
        )
        .await
        .expect("list test databases");
    for row in rows {
        let name: String = row.get(0);
        let pid = name.split('_').nth(2).and_then(|p| p.parse::<u32>().ok());
        let alive = pid.is_some_and(|p| Path::new(&format!("/proc/{p}")).exists());
        if !alive {
            let _ = client
                .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .await;
        }
    }
}

/// A fresh PostgreSQL database, dropped (best effort) on drop.
pub struct PgDb {
    pub admin_url: String,
    pub name: String,
    pub url: String,
}

impl PgDb {
    pub async fn create(admin_url: &str) -> PgDb {
        STALE_DROPPED
            .get_or_init(|| drop_stale_databases(admin_url))
            .await;
        let name = format!(
            "throng_t_{}_{:016x}",
            std::process::id(),
            rand::random::<u64>()
        );
        pg_admin(admin_url, &format!("CREATE DATABASE {name}")).await;
        PgDb {
            admin_url: admin_url.to_string(),
            url: with_database(admin_url, &name),
            name,
        }
    }

    /// A fresh database on the server of `THRONG_TEST_PG_URL`; panics
    /// when the URL is missing or the server refuses (see `pg_admin_url`).
    pub async fn fresh() -> PgDb {
        PgDb::create(&pg_admin_url()).await
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        let (admin, name) = (self.admin_url.clone(), self.name.clone());
        // Drop may run inside a runtime: use a thread with its own.
        let t = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                // A server gone by now leaves nothing to drop.
                if let Ok((client, conn)) =
                    tokio_postgres::connect(&admin, tokio_postgres::NoTls).await
                {
                    tokio::spawn(async move {
                        let _ = conn.await;
                    });
                    let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                    let _ =
                        tokio::time::timeout(Duration::from_secs(10), client.batch_execute(&sql))
                            .await;
                }
            });
        });
        let _ = t.join();
    }
}

// ---------------------------------------------------------------- in-process server

/// Wraps `ServeArgs` so it can be parsed from a flag list as the binary does.
#[derive(Parser)]
#[command(name = "throng-test")]
struct W {
    #[command(flatten)]
    serve: ServeArgs,
}

/// `W` with the comparison designs' flags, as `throng bench-server` has them.
#[derive(Parser)]
#[command(name = "throng-test")]
struct WithComparisons {
    #[command(flatten)]
    serve: ServeArgs,
    #[command(flatten)]
    _comparisons: throng::bench::ComparisonArgs,
}

/// A server running in the test's runtime on 127.0.0.1 port 0.
pub struct TestServer {
    pub api: Api,
    pub addr: SocketAddr,
    /// Set with `--metrics-listen`.
    pub metrics_addr: Option<SocketAddr>,
    pub state: AppState,
    pub kind: StoreKind,
    pub data_dir: PathBuf,
    running: Option<Running>,
    pub pg: Option<PgDb>,
    _dir: TempDir,
}

impl TestServer {
    /// Starts a server with a fresh store; panics when it cannot (for
    /// PostgreSQL, see `pg_admin_url`). `extra_args` are `serve` flags;
    /// `--with-notifier` runs the confirmation worker (off by default).
    pub async fn start(kind: StoreKind, extra_args: &[&str]) -> TestServer {
        TestServer::start_seeded(kind, extra_args, None).await
    }

    /// Like `start`, seeding `(places, days, slots_per_day)` from `FROM`
    /// first, as `throng seed` then `throng serve` would (a server may keep
    /// state derived from the data it found at start).
    pub async fn start_seeded(
        kind: StoreKind,
        extra_args: &[&str],
        seed: Option<(i64, i32, i32)>,
    ) -> TestServer {
        TestServer::start_seeded_from(kind, extra_args, FROM, seed).await
    }

    /// `start_seeded` with the seed's first day `from` (YYYY-MM-DD).
    pub async fn start_seeded_from(
        kind: StoreKind,
        extra_args: &[&str],
        from: &str,
        seed: Option<(i64, i32, i32)>,
    ) -> TestServer {
        TestServer::start_services(kind, extra_args, from, seed, throng::services::all(), false)
            .await
    }

    /// A child server of `throng bench EXPERIMENT`: the services plus the
    /// experiment's comparison designs (as `throng bench-server` runs them);
    /// `extra_args` may hold the designs' flags.
    pub async fn start_bench_child(
        kind: StoreKind,
        experiment: &str,
        extra_args: &[&str],
    ) -> TestServer {
        let list = throng::bench::child_services(experiment).expect("a known experiment");
        TestServer::start_services(kind, extra_args, FROM, None, list, true).await
    }

    async fn start_services(
        kind: StoreKind,
        extra_args: &[&str],
        from: &str,
        seed: Option<(i64, i32, i32)>,
        list: &'static [&'static dyn throng::platform::service::AnyService],
        bench_child: bool,
    ) -> TestServer {
        let pg = match kind {
            StoreKind::Sqlite => None,
            StoreKind::Postgres => Some(PgDb::fresh().await),
        };
        let dir = TempDir::new().expect("temp dir");
        let data_dir = dir.path().to_path_buf();
        let mut flags: Vec<String> = vec![
            "throng-test".into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--data-dir".into(),
            data_dir.display().to_string(),
        ];
        if let Some(pg) = &pg {
            flags.extend(["--store".into(), pg.url.clone()]);
        } else {
            flags.extend([
                "--store".into(),
                format!("sqlite:{}", data_dir.join("throng.db").display()),
            ]);
        }
        if !extra_args.contains(&"--with-notifier") {
            flags.push("--no-notifier".into());
        }
        flags.extend(
            extra_args
                .iter()
                .filter(|a| **a != "--with-notifier")
                .map(|a| a.to_string()),
        );
        let args = if bench_child {
            WithComparisons::try_parse_from(&flags).map(|w| w.serve)
        } else {
            W::try_parse_from(&flags).map(|w| w.serve)
        }
        .unwrap_or_else(|e| panic!("bad test flags: {e}"));
        if let Some((places, days, slots_per_day)) = seed {
            let (store, _) = throng::app::open_store(&args.store)
                .await
                .unwrap_or_else(|e| panic!("cannot open the {kind:?} store to seed it: {e:#}"));
            seed_store_from(&store, from, places, days, slots_per_day).await;
        }
        let running = throng::app::start_for(args, list)
            .await
            .unwrap_or_else(|e| panic!("the test server on {kind:?} did not start: {e:#}"));
        TestServer {
            api: Api::new(running.addr),
            addr: running.addr,
            metrics_addr: running.metrics_addr,
            state: running.state.clone(),
            kind,
            data_dir,
            running: Some(running),
            pg,
            _dir: dir,
        }
    }

    /// A second node serving this server's PostgreSQL store with its data
    /// directory (the same secrets), and `extra_args`. SQLite is served by
    /// one process, so this is for PostgreSQL only.
    pub async fn start_sharing(&self, extra_args: &[&str]) -> TestServer {
        let pg = self
            .pg
            .as_ref()
            .expect("a second node shares a PostgreSQL store");
        let mut flags: Vec<String> = vec![
            "throng-test".into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--data-dir".into(),
            self.data_dir.display().to_string(),
            "--store".into(),
            pg.url.clone(),
            "--no-notifier".into(),
        ];
        flags.extend(extra_args.iter().map(|a| a.to_string()));
        let args = W::try_parse_from(&flags)
            .map(|w| w.serve)
            .unwrap_or_else(|e| panic!("bad test flags: {e}"));
        let running = throng::app::start(args)
            .await
            .unwrap_or_else(|e| panic!("the second node did not start: {e:#}"));
        TestServer {
            api: Api::new(running.addr),
            addr: running.addr,
            metrics_addr: running.metrics_addr,
            state: running.state.clone(),
            kind: self.kind,
            data_dir: self.data_dir.clone(),
            running: Some(running),
            pg: None,
            _dir: TempDir::new().expect("temp dir"),
        }
    }

    /// Starts a server and seeds `places` x `days` x `slots_per_day` from `FROM`.
    pub async fn seeded(kind: StoreKind, places: i64, days: i32, slots_per_day: i32) -> TestServer {
        TestServer::start_seeded(kind, &[], Some((places, days, slots_per_day))).await
    }

    /// Seeds booking through the running server's store handle.
    pub async fn seed(&self, places: i64, days: i32, slots_per_day: i32) {
        seed_store(&self.state.store, places, days, slots_per_day).await;
    }

    /// Stops accepting and waits for requests in flight.
    pub async fn stop(&mut self) {
        if let Some(r) = self.running.take() {
            r.stop().await;
        }
    }

    pub fn token(&self, role: Role) -> String {
        self.state.keys.issue("test-subject", role, 600)
    }

    /// Booking statistics through the admin endpoint.
    pub async fn stats(&self) -> Value {
        self.api.stats(&self.token(Role::ADMIN)).await
    }

    pub async fn registrations(&self) -> i64 {
        self.stats().await["registrations"]
            .as_i64()
            .expect("registrations count")
    }
}

async fn seed_store(store: &throng::store::Store, places: i64, days: i32, slots_per_day: i32) {
    seed_store_from(store, FROM, places, days, slots_per_day).await
}

async fn seed_store_from(
    store: &throng::store::Store,
    from: &str,
    places: i64,
    days: i32,
    slots_per_day: i32,
) {
    let args = SeedBookingArgs {
        places,
        days,
        slots_per_day,
        from: Some(from.into()),
        force: false,
        first_slot_minute: 8 * 60,
        slot_minutes: 20,
        seats: 1,
        seats_every: 1,
        book_ahead_days: 0,
    };
    throng::services::booking::seed::seed(store, &args, false)
        .await
        .expect("seed booking");
}

// ---------------------------------------------------------------- the real binary

/// The real `throng` binary serving on 127.0.0.1 port 0; killed (SIGKILL) on drop.
pub struct ProcessServer {
    pub api: Api,
    pub addr: SocketAddr,
    pub data_dir: PathBuf,
    pub log_path: PathBuf,
    child: tokio::process::Child,
    _stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    _logs: TempDir,
}

/// The binary the tests run: the build's own, or `THRONG_TEST_BIN` (e.g.
/// target/release/throng, to measure an optimised build).
pub fn throng_bin() -> String {
    std::env::var("THRONG_TEST_BIN")
        .ok()
        .filter(|b| !b.trim().is_empty())
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_throng").to_string())
}

/// Runs the binary with `args` (within 120 s); answers whether it
/// succeeded and what it printed (stdout, then stderr).
pub async fn run_throng(args: &[String]) -> (bool, String) {
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(throng_bin())
            .args(args)
            .env("RUST_LOG", "warn")
            .output(),
    )
    .await
    .expect("the command finishes in time")
    .expect("the command runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `--store` flags for `data_dir` (SQLite) or a PostgreSQL URL.
pub fn store_flags(data_dir: &Path, pg_url: Option<&str>) -> Vec<String> {
    let mut f = vec![
        "--data-dir".to_string(),
        data_dir.display().to_string(),
        "--store".to_string(),
    ];
    f.push(match pg_url {
        Some(url) => url.to_string(),
        None => format!("sqlite:{}", data_dir.join("throng.db").display()),
    });
    f
}

/// Runs `throng seed booking` with the given sizes from `FROM`.
pub async fn seed_with_cli(
    data_dir: &Path,
    pg_url: Option<&str>,
    places: i64,
    days: i32,
    slots: i32,
) {
    seed_with_cli_and(data_dir, pg_url, places, days, slots, &[]).await
}

/// [`seed_with_cli`] with `extra` arguments after `seed booking`'s own
/// (e.g. `--seats 3 --seats-every 2`).
pub async fn seed_with_cli_and(
    data_dir: &Path,
    pg_url: Option<&str>,
    places: i64,
    days: i32,
    slots: i32,
    extra: &[&str],
) {
    let mut args: Vec<String> = vec!["seed".into()];
    args.extend(store_flags(data_dir, pg_url));
    args.extend([
        "booking".to_string(),
        "--places".into(),
        places.to_string(),
        "--days".into(),
        days.to_string(),
        "--slots-per-day".into(),
        slots.to_string(),
        "--from".into(),
        FROM.into(),
    ]);
    args.extend(extra.iter().map(|a| a.to_string()));
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(throng_bin())
            .args(&args)
            .env("RUST_LOG", "warn")
            .output(),
    )
    .await
    .expect("seed finishes in time")
    .expect("seed runs");
    assert!(
        out.status.success(),
        "throng seed failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl ProcessServer {
    /// Spawns `throng serve` on `data_dir` (and `pg_url` if given); waits for
    /// its `throng listening on http://ADDR` line. Its log goes to `log_path`.
    pub async fn start(
        data_dir: &Path,
        pg_url: Option<&str>,
        extra_args: &[&str],
    ) -> ProcessServer {
        ProcessServer::start_at("127.0.0.1:0", data_dir, pg_url, extra_args).await
    }

    /// `start` listening on `listen` (a node restarted on its old port).
    pub async fn start_at(
        listen: &str,
        data_dir: &Path,
        pg_url: Option<&str>,
        extra_args: &[&str],
    ) -> ProcessServer {
        let logs = TempDir::new().expect("temp dir");
        let log_path = logs.path().join("server.log");
        let log = std::fs::File::create(&log_path).expect("log file");
        let mut args: Vec<String> = vec!["serve".into(), "--listen".into(), listen.into()];
        args.extend(store_flags(data_dir, pg_url));
        if !extra_args.contains(&"--with-notifier") {
            args.push("--no-notifier".into());
        }
        args.extend(
            extra_args
                .iter()
                .filter(|a| **a != "--with-notifier")
                .map(|a| a.to_string()),
        );
        let mut child = tokio::process::Command::new(throng_bin())
            .args(&args)
            .env("RUST_LOG", "info")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .expect("spawn throng serve");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let addr = tokio::time::timeout(PROCESS_START_TIMEOUT, async {
            while let Some(line) = lines.next_line().await.expect("read stdout") {
                if let Some(addr) = line.strip_prefix("throng listening on http://") {
                    return Some(
                        addr.trim()
                            .parse::<SocketAddr>()
                            .expect("listening address"),
                    );
                }
            }
            None
        })
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| {
            panic!(
                "throng serve did not start; its log:\n{}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            )
        });
        ProcessServer {
            api: Api::new(addr),
            addr,
            data_dir: data_dir.to_path_buf(),
            log_path,
            child,
            _stdout: lines,
            _logs: logs,
        }
    }

    /// SIGKILL: no shutdown, no flush, no goodbye.
    /// The server's process id (`None` once it exited).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }

    /// SIGTERM: the graceful stop (drain, then finish requests in flight).
    pub fn terminate(&self) {
        let pid = self.child.id().expect("the server is running") as libc::pid_t;
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0, "SIGTERM");
    }

    /// Waits up to `limit` for the process to exit; `None` if it did not.
    pub async fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        tokio::time::timeout(limit, self.child.wait())
            .await
            .ok()
            .map(|r| r.expect("wait for the server"))
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// An admin token signed with the secret in the server's data dir.
    pub fn admin_token(&self) -> String {
        admin_token_for(&self.data_dir)
    }
}

pub fn admin_token_for(data_dir: &Path) -> String {
    let secrets = Secrets::load_or_create(data_dir).expect("secrets");
    TokenKeys::new(&secrets.token_secret).issue("test-admin", Role::ADMIN, 600)
}

// ---------------------------------------------------------------- typed client

/// An HTTP answer, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: bytes::Bytes,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body read into an answer's type.
    pub fn body<T: serde::de::DeserializeOwned>(&self) -> T {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "status {} body is not a {} ({e}): {}",
                self.status,
                std::any::type_name::<T>(),
                self.text()
            )
        })
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "status {} body is not JSON ({e}): {}",
                self.status,
                self.text()
            )
        })
    }

    /// Asserts the status and the error envelope `{"error":{"code","message"}}`
    /// with exactly those keys; returns the message.
    #[track_caller]
    pub fn assert_error(&self, status: u16, code: &str) -> String {
        assert_eq!(
            self.status,
            status,
            "expected {status} {code}, got: {}",
            self.text()
        );
        self.assert_envelope(code)
    }

    /// Asserts the error envelope with this code; returns the message.
    #[track_caller]
    pub fn assert_envelope(&self, code: &str) -> String {
        let ct = self
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        assert!(
            ct.starts_with("application/json"),
            "content-type {ct:?} for {}",
            self.text()
        );
        let v = self.json();
        let obj = v
            .as_object()
            .unwrap_or_else(|| panic!("not an object: {v}"));
        assert_eq!(obj.len(), 1, "only `error` at the top: {v}");
        let err = v["error"]
            .as_object()
            .unwrap_or_else(|| panic!("no error object: {v}"));
        assert_eq!(err.len(), 2, "error has code and message only: {v}");
        assert_eq!(v["error"]["code"], code, "{v}");
        let msg = v["error"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("no message: {v}"));
        assert!(!msg.is_empty(), "empty message: {v}");
        msg.to_string()
    }

    pub fn error_code(&self) -> Option<String> {
        let v: Value = serde_json::from_slice(&self.body).ok()?;
        v["error"]["code"].as_str().map(str::to_string)
    }
}

/// A valid person, distinct per `n` (national id included: one person
/// holds one registration).
pub fn person(n: u64) -> Value {
    json!({
        "name": format!("Test Person {n}"),
        "nationalId": format!("900101/{n:04}"),
        "phone": format!("+421 9{:08}", n % 100_000_000),
        "email": format!("person{n}@example.org"),
    })
}

/// The registration body for a slot.
pub fn registration_body(place: i64, day: &str, slot: i64, person: Value) -> Value {
    json!({ "placeId": place, "day": day, "timeSlot": slot, "person": person })
}

/// A client for one server; every request has a timeout, so no test hangs.
#[derive(Clone)]
pub struct Api {
    pub base: String,
    pub http: reqwest::Client,
}

impl Api {
    pub fn new(addr: SocketAddr) -> Api {
        assert!(addr.ip().is_loopback(), "tests talk to 127.0.0.1 only");
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .no_proxy()
            .pool_max_idle_per_host(256)
            .build()
            .expect("http client");
        Api {
            base: format!("http://{addr}"),
            http,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn send(&self, req: reqwest::RequestBuilder) -> Reply {
        let res = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("request failed: {e}"));
        Self::read(res).await
    }

    /// Like `send`, but a transport error (server killed) is `Err`.
    pub async fn try_send(&self, req: reqwest::RequestBuilder) -> Result<Reply, reqwest::Error> {
        let res = req.send().await?;
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let body = res.bytes().await?;
        Ok(Reply {
            status,
            headers,
            body,
        })
    }

    async fn read(res: reqwest::Response) -> Reply {
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let body = res
            .bytes()
            .await
            .unwrap_or_else(|e| panic!("reading the body failed: {e}"));
        Reply {
            status,
            headers,
            body,
        }
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(self.http.get(self.url(path))).await
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> Reply {
        self.send(self.http.post(self.url(path)).json(body)).await
    }

    /// POST of raw bytes; `content_type` `None` sends no Content-Type.
    pub async fn raw_post(
        &self,
        path: &str,
        bytes: impl Into<Vec<u8>>,
        content_type: Option<&str>,
    ) -> Reply {
        let mut req = self.http.post(self.url(path)).body(bytes.into());
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        self.send(req).await
    }

    pub fn register_request(
        &self,
        place: i64,
        day: &str,
        slot: i64,
        person: Value,
    ) -> reqwest::RequestBuilder {
        self.http
            .post(self.url("/api/booking/registrations"))
            .json(&registration_body(place, day, slot, person))
    }

    pub async fn register(&self, place: i64, day: &str, slot: i64, person: Value) -> Reply {
        self.send(self.register_request(place, day, slot, person))
            .await
    }

    pub async fn get_registration(&self, id: &str, code: Option<&str>) -> Reply {
        let mut req = self
            .http
            .get(self.url(&format!("/api/booking/registrations/{id}")));
        if let Some(c) = code {
            req = req.header("x-access-code", c);
        }
        self.send(req).await
    }

    pub async fn cancel(&self, id: &str, code: Option<&str>) -> Reply {
        let mut req = self
            .http
            .delete(self.url(&format!("/api/booking/registrations/{id}")));
        if let Some(c) = code {
            req = req.header("x-access-code", c);
        }
        self.send(req).await
    }

    pub async fn slots(&self, place: impl std::fmt::Display, from: &str, days: u32) -> Reply {
        self.get(&format!(
            "/api/booking/places/{place}/slots?from={from}&days={days}"
        ))
        .await
    }

    pub async fn places(&self, skip: i64, size: i64) -> Reply {
        self.get(&format!("/api/booking/places?skip={skip}&size={size}"))
            .await
    }

    pub async fn stats_reply(&self, token: Option<&str>) -> Reply {
        let mut req = self.http.get(self.url("/api/booking/admin/stats"));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        self.send(req).await
    }

    pub async fn stats(&self, admin_token: &str) -> Value {
        let r = self.stats_reply(Some(admin_token)).await;
        assert_eq!(r.status, 200, "stats: {}", r.text());
        r.json()
    }

    /// Whether each (day, timeSlot) of a place is free, over `days` from `from`.
    pub async fn taken_slots(&self, place: i64, from: &str, days: u32) -> Vec<(String, i64)> {
        let r = self.slots(place, from, days).await;
        assert_eq!(r.status, 200, "slots: {}", r.text());
        let v = r.json();
        let mut taken = Vec::new();
        for d in v["days"].as_array().expect("days") {
            for s in d["slots"].as_array().expect("slots") {
                if s["free"] == false {
                    taken.push((
                        d["day"].as_str().unwrap().to_string(),
                        s["timeSlot"].as_i64().unwrap(),
                    ));
                }
            }
        }
        taken
    }
}

/// The single integer `sql` answers (a count), on either store.
pub async fn count(store: &throng::store::Store, sql: &'static str) -> i64 {
    let rows = query(store, sql, vec![], |r| r.int(0)).await;
    rows.into_iter().next().expect(sql)
}

/// The rows `sql` answers for integer parameters `params`, each mapped by
/// `map`, on either store (`?N` placeholders).
pub async fn query<T: Send + 'static>(
    store: &throng::store::Store,
    sql: &str,
    params: Vec<i64>,
    map: fn(&throng::store::Row<'_>) -> Result<T, throng::store::StoreError>,
) -> Vec<T> {
    let statement = throng::store::Sql::owned(sql.to_string());
    store
        .read(move |c| {
            Box::pin(async move {
                let params: Vec<&dyn throng::store::Param> = params
                    .iter()
                    .map(|p| p as &dyn throng::store::Param)
                    .collect();
                c.query(&statement, &params, map).await
            })
        })
        .await
        .expect(sql)
}

/// Runs `sql` with integer parameters `params` as a write of its own, on
/// either store (`?N` placeholders); the rows it changed.
pub async fn execute(store: &throng::store::Store, sql: &str, params: Vec<i64>) -> u64 {
    let statement = std::sync::Arc::new(throng::store::Sql::owned(sql.to_string()));
    store
        .write(move |tx| {
            let (statement, params) = (statement.clone(), params.clone());
            Box::pin(async move {
                let params: Vec<&dyn throng::store::Param> = params
                    .iter()
                    .map(|p| p as &dyn throng::store::Param)
                    .collect();
                tx.execute(&statement, &params).await
            })
        })
        .await
        .expect(sql)
}

/// Runs statements `sql` (no parameters, separated by `;`) as a write of
/// their own, on either store.
pub async fn batch(store: &throng::store::Store, sql: &str) {
    let statement = std::sync::Arc::new(throng::store::Sql::owned(sql.to_string()));
    store
        .write(move |tx| {
            let statement = statement.clone();
            Box::pin(async move { tx.batch(&statement).await })
        })
        .await
        .expect(sql)
}

/// The event log's events after `position` (at most `limit`), read once
/// every position taken so far can be: on PostgreSQL the log is read up to
/// its horizon, which trails the newest commit while a write transaction of
/// the database still runs (store/horizon.rs), so a read right after the
/// writes could miss the last ones. Waits at most 10 s for the horizon to
/// reach the last position taken (read as the horizon reads it).
pub async fn log_events(
    store: &throng::store::Store,
    position: i64,
    limit: i64,
) -> Vec<throng::store::StoredEvent> {
    if store.writers() == throng::store::Writers::Shared {
        let taken = query(store, throng::store::horizon::LAST_SQL, vec![], |r| {
            r.int(0)
        })
        .await[0];
        let mut covered = false;
        for _ in 0..200 {
            if store.head_position().await.unwrap() >= taken {
                covered = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            covered,
            "the log's horizon did not reach position {taken} in 10 s"
        );
    }
    store.events_after(position, limit).await.unwrap()
}
