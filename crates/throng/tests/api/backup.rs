//! `throng backup` and `throng restore`, from outside: a backup taken while
//! the server takes writes holds every write acknowledged before it began;
//! the restored store serves with its secrets (tokens signed before still
//! work); bad copies, a missing secrets bundle and an occupied target are
//! refused before anything is touched.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::{run_throng, store_flags, Api, PgDb, ProcessServer, StoreKind};

both_stores!(a_backup_under_write_load_restores_every_acknowledged_write);

fn args(command: &str, rest: &[&str], data_dir: &Path, pg: Option<&str>) -> Vec<String> {
    let mut a = vec![command.to_string()];
    a.extend(rest.iter().map(|s| s.to_string()));
    a.extend(store_flags(data_dir, pg));
    a
}

/// Appends one event to a stream of its own; answers its id once the
/// server acknowledged it.
async fn append(api: &Api, token: &str, n: u64) -> Option<String> {
    let id = uuid::Uuid::new_v4().to_string();
    let body = json!([{ "eventId": id, "type": "ledger.Posted", "data": { "n": n } }]);
    let req = api
        .http
        .post(api.url(&format!("/api/events/streams/ledger-{n}")))
        .bearer_auth(token)
        .json(&body);
    let r = api.try_send(req).await.ok()?;
    (r.status == 201).then_some(id)
}

async fn event_ids(api: &Api, token: &str) -> HashSet<String> {
    let mut ids = HashSet::new();
    let mut from = 1;
    loop {
        let path = format!("/api/events/all?from={from}&limit=1000&typePrefix=ledger.");
        let r = api
            .send(api.http.get(api.url(&path)).bearer_auth(token))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let v: Value = r.json();
        for e in v["events"].as_array().unwrap() {
            ids.insert(e["eventId"].as_str().unwrap().to_string());
        }
        let (next, head) = (v["next"].as_i64().unwrap(), v["head"].as_i64().unwrap());
        if next > head {
            return ids;
        }
        from = next;
    }
}

async fn a_backup_under_write_load_restores_every_acknowledged_write(kind: StoreKind) {
    let (pg, pg_restored) = match kind {
        StoreKind::Sqlite => (None, None),
        StoreKind::Postgres => (Some(PgDb::fresh().await), Some(PgDb::fresh().await)),
    };
    let (pg_url, restored_url) = (
        pg.as_ref().map(|p| p.url.as_str()),
        pg_restored.as_ref().map(|p| p.url.as_str()),
    );
    let dir = tempfile::TempDir::new().unwrap();
    let data = dir.path().join("data");
    let mut server = ProcessServer::start(&data, pg_url, &[]).await;
    let token = server.admin_token();

    // Four writers, each appending until told to stop (bounded: 20 s).
    let acked: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..4u64 {
        let (api, token, acked, stop) = (
            server.api.clone(),
            token.clone(),
            acked.clone(),
            stop.clone(),
        );
        writers.push(tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(20);
            let mut n = w;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < deadline {
                if let Some(id) = append(&api, &token, n).await {
                    acked.lock().unwrap().push((Instant::now(), id));
                }
                n += 4;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    let copy = dir.path().join("throng.backup");
    let began = Instant::now();
    let (ok, out) = run_throng(&args(
        "backup",
        &["--to", copy.to_str().unwrap()],
        &data,
        pg_url,
    ))
    .await;
    assert!(ok, "backup failed: {out}");
    assert!(out.contains("keep it apart"), "{out}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let before: Vec<&String> = acked
        .iter()
        .filter(|(at, _)| *at < began)
        .map(|(_, id)| id)
        .collect();
    let after = acked.len() - before.len();
    assert!(
        before.len() >= 20,
        "only {} writes before the backup",
        before.len()
    );
    assert!(after > 0, "no write went on during the backup");
    if kind == StoreKind::Sqlite {
        let (ok, out) = run_throng(&args(
            "restore",
            &[copy.to_str().unwrap(), "--force"],
            &data,
            pg_url,
        ))
        .await;
        assert!(!ok && out.contains("stop it before restoring"), "{out}");
    }
    let secrets = dir.path().join("throng.backup.secrets");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&secrets).unwrap().permissions(),
    );
    assert_eq!(mode & 0o077, 0, "the secrets bundle is private");
    server.kill().await;

    // Refused before anything is touched: an occupied target, a file that
    // is no backup, a backup without its secrets.
    let (ok, out) = run_throng(&args("restore", &[copy.to_str().unwrap()], &data, pg_url)).await;
    assert!(!ok && out.contains("--force"), "{out}");
    let junk = dir.path().join("junk.backup");
    std::fs::write(&junk, b"not a database at all").unwrap();
    std::fs::copy(&secrets, dir.path().join("junk.backup.secrets")).unwrap();
    let fresh = dir.path().join("restored");
    let (ok, out) = run_throng(&args(
        "restore",
        &[junk.to_str().unwrap()],
        &fresh,
        restored_url,
    ))
    .await;
    assert!(!ok, "{out}");
    let lone = dir.path().join("lone.backup");
    std::fs::copy(&copy, &lone).unwrap();
    let (ok, out) = run_throng(&args(
        "restore",
        &[lone.to_str().unwrap()],
        &fresh,
        restored_url,
    ))
    .await;
    assert!(!ok && out.contains("no secrets bundle"), "{out}");
    assert!(!fresh.join("throng.db").exists(), "nothing installed");

    // The restore, and a server on it.
    let (ok, out) = run_throng(&args(
        "restore",
        &[copy.to_str().unwrap()],
        &fresh,
        restored_url,
    ))
    .await;
    assert!(ok, "restore failed: {out}");
    let restored = ProcessServer::start(&fresh, restored_url, &[]).await;
    // A token signed with the old data directory's secret still works.
    let ids = event_ids(&restored.api, &token).await;
    let missing: Vec<&&String> = before.iter().filter(|id| !ids.contains(**id)).collect();
    assert!(
        missing.is_empty(),
        "{} of {} writes acknowledged before the backup are missing",
        missing.len(),
        before.len()
    );
    assert!(ids.len() <= acked.len(), "nothing made up");
    assert_eq!(restored.api.get("/health").await.status, 200);
}
