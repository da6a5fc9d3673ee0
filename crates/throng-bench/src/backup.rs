//! `throng bench backup`: `throng backup` of a live booking store (2,000
//! places x 100 days x 25 slots: 5,000,000 slots by default) while clients
//! keep writing to it, then `throng restore` of the copy into a fresh data
//! directory, both timed as an operator runs them (the commands themselves,
//! as child processes); then a server on the restored store, checked to hold
//! every write acknowledged before the backup began. Targets: under 10 s
//! each. SQLite, the embedded store (PostgreSQL's copy is `pg_dump`'s).
//!
//! The writes are event appends (`POST /api/events/streams/...`, one event
//! each, durable before the answer), from `--backup-writers` clients that
//! run before, during and after the backup; their answers give the set the
//! restored store must hold.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::harness::ChildServer;
use crate::experiment::{Experiment, Scale, Workload};
use crate::platform::auth::{Role, TokenKeys};
use crate::token_secret::token_secret;

pub struct BackupBench;

const DEFAULT_PLACES: i64 = 2_000;
const DEFAULT_WRITERS: usize = 16;
/// Writes go on this long before the backup starts, and this long after
/// it ended, so the copy is taken under a steady load.
const LOAD_AROUND_MS: u64 = 2_000;
/// The writers stop by themselves after this long, whatever happens.
const LOAD_MS_MAX: u64 = 600_000;
/// Events read back per request from the restored server.
const READ_BACK_PAGE: usize = 1_000;
const TARGET_S: f64 = 10.0;
/// The event type prefix of the bench's writes.
const TYPE_PREFIX: &str = "benchbackup.";

impl Experiment for BackupBench {
    fn name(&self) -> &'static str {
        "backup"
    }
    fn about(&self) -> &'static str {
        "throng backup of a live 5,000,000-slot store under write load, and throng restore, timed"
    }
    fn seed_args(&self, _scale: Scale) -> Vec<String> {
        Vec::new()
    }
    fn workloads(&self, _scale: Scale) -> Vec<Workload> {
        Vec::new()
    }
    fn args(&self, cmd: clap::Command) -> clap::Command {
        cmd.arg(
            clap::Arg::new("backup-places")
                .long("backup-places")
                .value_name("N")
                .value_parser(clap::value_parser!(i64).range(1..))
                .help(format!(
                    "backup: booking places seeded, each 100 days x 25 slots [default: {DEFAULT_PLACES}]"
                )),
        )
        .arg(
            clap::Arg::new("backup-writers")
                .long("backup-writers")
                .value_name("N")
                .value_parser(clap::value_parser!(usize))
                .help(format!(
                    "backup: clients writing while the copy is taken [default: {DEFAULT_WRITERS}]"
                )),
        )
    }
    fn standalone(&self, matches: &clap::ArgMatches) -> Option<anyhow::Result<Vec<String>>> {
        let places = matches
            .get_one::<i64>("backup-places")
            .copied()
            .unwrap_or(DEFAULT_PLACES);
        let writers = matches
            .get_one::<usize>("backup-writers")
            .copied()
            .unwrap_or(DEFAULT_WRITERS)
            .max(1);
        Some(run(places, writers))
    }
}

fn run(places: i64, writers: usize) -> anyhow::Result<Vec<String>> {
    let temp = tempfile::Builder::new()
        .prefix("throng-bench-backup-")
        .tempdir()?;
    let (data, restored) = (temp.path().join("data"), temp.path().join("restored"));
    let copy = temp.path().join("throng.backup");
    let exe = std::env::current_exe()?;
    let mut lines = Vec::new();

    let (seed_time, _) = throng(
        &exe,
        &["seed", "booking", "--places", &places.to_string()],
        &data,
    )?;
    lines.push(format!(
        "seeded {places} places x 100 days x 25 slots ({} slots) in {:.1} s; store {}",
        places * 2_500,
        seed_time.as_secs_f64(),
        mib(&store_files(&data))
    ));
    // The child servers inherit THRONG_TOKEN_SECRET from this process.
    let token = TokenKeys::new(token_secret()).issue("bench", Role::ADMIN, 3600);
    let mut server = ChildServer::start(&exe, "backup", &data_flags(&data), &[])?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let load = rt.block_on(backup_under_load(
        server.addr,
        &token,
        writers,
        &exe,
        &data,
        &copy,
    ))?;
    server.stop();
    lines.push(format!(
        "backup: {:.2} s (target < {TARGET_S:.0} s: {}), copy {}, while {writers} clients wrote: \
         {:.0} writes/s before, {:.0} during, {} acknowledged during the copy",
        load.backup_time.as_secs_f64(),
        met(load.backup_time),
        mib(std::slice::from_ref(&copy)),
        load.rate_before,
        load.rate_during,
        load.during
    ));

    let (restore_time, _) = throng(&exe, &["restore", path_str(&copy)?], &restored)?;
    lines.push(format!(
        "restore into a fresh data directory: {:.2} s (target < {TARGET_S:.0} s: {})",
        restore_time.as_secs_f64(),
        met(restore_time)
    ));

    let mut server = ChildServer::start(&exe, "backup", &data_flags(&restored), &[])?;
    let held = rt.block_on(written_ids(server.addr, &token))?;
    server.stop();
    let missing = load.before.iter().filter(|id| !held.contains(*id)).count();
    lines.push(format!(
        "restored server: {} of {} writes acknowledged before the backup began are there \
         ({missing} missing); {} writes in all",
        load.before.len() - missing,
        load.before.len(),
        held.len()
    ));
    anyhow::ensure!(
        missing == 0,
        "{missing} writes acknowledged before the backup are missing from the restored store"
    );
    Ok(lines)
}

fn met(t: Duration) -> &'static str {
    if t.as_secs_f64() < TARGET_S {
        "met"
    } else {
        "NOT met"
    }
}

fn data_flags(dir: &Path) -> Vec<String> {
    vec!["--data-dir".into(), dir.display().to_string()]
}

fn path_str(p: &Path) -> anyhow::Result<&str> {
    p.to_str()
        .ok_or_else(|| anyhow::anyhow!("{} is not UTF-8", p.display()))
}

/// Runs `throng ARGS --data-dir DIR` to its end; its wall time and output.
fn throng(exe: &Path, args: &[&str], dir: &Path) -> anyhow::Result<(Duration, String)> {
    let started = Instant::now();
    let out = Command::new(exe)
        .args(args)
        .args(data_flags(dir))
        .output()?;
    let elapsed = started.elapsed();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    anyhow::ensure!(
        out.status.success(),
        "throng {} failed: {text}",
        args.join(" ")
    );
    Ok((elapsed, text))
}

/// The SQLite store's files in `dir`.
fn store_files(dir: &Path) -> Vec<PathBuf> {
    ["throng.db", "throng.db-wal"]
        .iter()
        .map(|n| dir.join(n))
        .collect()
}

fn mib(files: &[PathBuf]) -> String {
    let bytes: u64 = files
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum();
    format!("{:.0} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// What the load around the backup saw.
struct Load {
    backup_time: Duration,
    /// Writes acknowledged before the backup command started.
    before: Vec<String>,
    /// Writes acknowledged while it ran.
    during: usize,
    rate_before: f64,
    rate_during: f64,
}

/// Writers append for `LOAD_AROUND_MS`, `throng backup` runs, they go on
/// for `LOAD_AROUND_MS` more, then stop.
async fn backup_under_load(
    addr: std::net::SocketAddr,
    token: &str,
    writers: usize,
    exe: &Path,
    data: &Path,
    copy: &Path,
) -> anyhow::Result<Load> {
    let acked: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let http = reqwest::Client::new();
    let load_started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let (http, acked, stop) = (http.clone(), acked.clone(), stop.clone());
        let auth = format!("Bearer {token}");
        tasks.push(tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_millis(LOAD_MS_MAX);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                let id = uuid::Uuid::new_v4().to_string();
                let body = serde_json::json!([{
                    "eventId": id, "type": format!("{TYPE_PREFIX}Written"), "data": {"n": n}
                }]);
                let sent = http
                    .post(format!("http://{addr}/api/events/streams/backup-{w}"))
                    .header("authorization", &auth)
                    .json(&body)
                    .send()
                    .await;
                if sent.is_ok_and(|r| r.status().as_u16() == 201) {
                    acked.lock().unwrap().push((Instant::now(), id));
                }
                n += 1;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(LOAD_AROUND_MS)).await;
    let began = Instant::now();
    let (exe, data, copy) = (exe.to_path_buf(), data.to_path_buf(), copy.to_path_buf());
    let backed_up = tokio::task::spawn_blocking(move || {
        throng(&exe, &["backup", "--to", path_str(&copy)?], &data)
    })
    .await?;
    let ended = Instant::now();
    tokio::time::sleep(Duration::from_millis(LOAD_AROUND_MS)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await?;
    }
    let (backup_time, _) = backed_up?;
    let acked = std::mem::take(&mut *acked.lock().unwrap());
    let before: Vec<String> = acked
        .iter()
        .filter(|(at, _)| *at < began)
        .map(|(_, id)| id.clone())
        .collect();
    let during = acked
        .iter()
        .filter(|(at, _)| *at >= began && *at <= ended)
        .count();
    anyhow::ensure!(
        !before.is_empty(),
        "no write was acknowledged before the backup"
    );
    Ok(Load {
        backup_time,
        rate_before: before.len() as f64 / (began - load_started).as_secs_f64(),
        rate_during: during as f64 / (ended - began).as_secs_f64(),
        before,
        during,
    })
}

/// The ids of the bench's writes a server holds.
async fn written_ids(addr: std::net::SocketAddr, token: &str) -> anyhow::Result<HashSet<String>> {
    let http = reqwest::Client::new();
    let mut ids = HashSet::new();
    let mut from = 1i64;
    loop {
        let v: serde_json::Value = http
            .get(format!(
                "http://{addr}/api/events/all?from={from}&limit={READ_BACK_PAGE}&typePrefix={TYPE_PREFIX}"
            ))
            .bearer_auth(token)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        for e in v["events"].as_array().into_iter().flatten() {
            if let Some(id) = e["eventId"].as_str() {
                ids.insert(id.to_string());
            }
        }
        let (next, head) = (
            v["next"].as_i64().unwrap_or(i64::MAX),
            v["head"].as_i64().unwrap_or(0),
        );
        if next > head {
            return Ok(ids);
        }
        from = next;
    }
}
