//! Data that must survive: every 201 survives a SIGKILL of the real binary
//! mid-load, no slot is held twice, and personal data is never on disk, in
//! events or in the log in the clear; under writes that never pause the
//! SQLite WAL is reused rather than grown.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;

use crate::both_stores;
use crate::helpers::{person, seed_with_cli, PgDb, ProcessServer, StoreKind, TestServer, FROM};

both_stores!(every_201_survives_sigkill);

const PLACES: i64 = 20;
const DAYS: u32 = 5;
const SLOTS_PER_DAY: i64 = 25;
const LOAD_CLIENTS: usize = 32;
const LOAD_FOR: Duration = Duration::from_secs(2);
const KILL_AFTER: Duration = Duration::from_millis(1200);

fn day_text(offset: u32) -> String {
    format!("2030-01-{:02}", 1 + offset)
}

/// A slot drawn at random among `places` places and the seeded days.
fn random_slot(places: i64) -> (i64, String, i64) {
    let mut rng = rand::thread_rng();
    (
        rng.gen_range(1..=places),
        day_text(rng.gen_range(0..DAYS)),
        rng.gen_range(0..SLOTS_PER_DAY),
    )
}

/// A registration answered 201: (id, code, place, day, slot).
type Confirmed = (String, String, i64, String, i64);

async fn every_201_survives_sigkill(kind: StoreKind) {
    let db = match kind {
        StoreKind::Sqlite => None,
        StoreKind::Postgres => Some(PgDb::fresh().await),
    };
    let pg_url = db.as_ref().map(|d| d.url.as_str());
    let dir = tempfile::TempDir::new().unwrap();
    seed_with_cli(
        dir.path(),
        pg_url,
        PLACES,
        DAYS as i32,
        SLOTS_PER_DAY as i32,
    )
    .await;
    let mut server = ProcessServer::start(dir.path(), pg_url, &[]).await;

    // Clients register random slots until LOAD_FOR; the server dies under them.
    let confirmed: Arc<Mutex<Vec<Confirmed>>> = Arc::default();
    let started = Instant::now();
    let mut clients = Vec::new();
    for c in 0..LOAD_CLIENTS {
        let (api, confirmed) = (server.api.clone(), confirmed.clone());
        clients.push(tokio::spawn(async move {
            let mut n = 0u64;
            let (mut other, mut transport_errors) = (Vec::new(), 0usize);
            while started.elapsed() < LOAD_FOR {
                let (place, day, slot) = random_slot(PLACES);
                n += 1;
                let req = api.register_request(place, &day, slot, person(c as u64 * 1_000_000 + n));
                match api.try_send(req.timeout(Duration::from_secs(5))).await {
                    Ok(r) if r.status == 201 => {
                        let v = r.json();
                        let id = v["registrationId"].as_str().unwrap().to_string();
                        let code = v["accessCode"].as_str().unwrap().to_string();
                        confirmed.lock().unwrap().push((id, code, place, day, slot));
                    }
                    Ok(r) if r.status == 409 => {}
                    Ok(r) => other.push(format!("{} {}", r.status, r.text())),
                    Err(_) => {
                        // The server is gone; don't spin on refused connections.
                        transport_errors += 1;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
            (other, transport_errors)
        }));
    }
    tokio::time::sleep(KILL_AFTER).await;
    let confirmed_before_kill = confirmed.lock().unwrap().len();
    server.kill().await;
    let mut transport_errors = 0;
    for c in clients {
        let (other, errors) = c.await.unwrap();
        assert!(
            other.is_empty(),
            "only 201 and 409 while the server lived: {other:?}"
        );
        transport_errors += errors;
    }
    let confirmed = std::mem::take(&mut *confirmed.lock().unwrap());
    assert!(
        confirmed_before_kill > 10,
        "the load got going before the kill ({confirmed_before_kill})"
    );
    assert!(transport_errors > 0, "the server was killed under load");

    println!(
        "{kind:?}: {} answered 201 ({confirmed_before_kill} before the kill), {transport_errors} transport errors",
        confirmed.len()
    );

    // Restart on the same data; every 201 is there and readable with its code.
    let server = ProcessServer::start(dir.path(), pg_url, &[]).await;
    let api = &server.api;
    let mut held: HashSet<(i64, String, i64)> = HashSet::new();
    for (id, code, place, day, slot) in &confirmed {
        let r = api.get_registration(id, Some(code)).await;
        assert_eq!(
            r.status,
            200,
            "registration {id} answered 201 before the kill: {}",
            r.text()
        );
        let v = r.json();
        assert_eq!(
            (
                v["placeId"].as_i64().unwrap(),
                v["day"].as_str().unwrap(),
                v["timeSlot"].as_i64().unwrap()
            ),
            (*place, day.as_str(), *slot)
        );
        assert!(
            held.insert((*place, day.clone(), *slot)),
            "two 201s for one slot: {place} {day} {slot}"
        );
    }
    // No slot is held twice and no registration lost its slot: the slots
    // taken are exactly as many as the registrations, and include every 201.
    let mut taken: HashMap<(i64, String, i64), ()> = HashMap::new();
    for place in 1..=PLACES {
        for (day, slot) in api.taken_slots(place, FROM, DAYS).await {
            taken.insert((place, day, slot), ());
        }
    }
    let stats = api.stats(&server.admin_token()).await;
    let registrations = stats["registrations"].as_i64().unwrap();
    assert_eq!(
        taken.len() as i64,
        registrations,
        "taken slots == registrations: {stats}"
    );
    assert!(
        registrations >= confirmed.len() as i64,
        "{registrations} < {}",
        confirmed.len()
    );
    for key in &held {
        assert!(
            taken.contains_key(key),
            "slot of a 201 is not taken after restart: {key:?}"
        );
    }
    assert_eq!(stats["slots"], PLACES * DAYS as i64 * SLOTS_PER_DAY);
    // The event log has one confirmation per registration (plus SlotsOpened).
    // SQLite's positions have no holes; PostgreSQL's batch that the kill cut
    // off took positions it never committed, so there the events are counted.
    let token = server.admin_token();
    let mut events = 0i64;
    let mut from = 1i64;
    loop {
        let path = format!("/api/events/all?from={from}&limit=1000");
        let r = api
            .send(api.http.get(api.url(&path)).bearer_auth(&token))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        let page = v["events"].as_array().unwrap().len() as i64;
        events += page;
        from = v["next"].as_i64().unwrap();
        if page == 0 && from > v["head"].as_i64().unwrap() {
            break;
        }
    }
    assert_eq!(events, registrations + 1, "{stats}");
    let last = stats["lastEventPosition"].as_i64().unwrap();
    match kind {
        StoreKind::Sqlite => assert_eq!(last, registrations + 1, "{stats}"),
        StoreKind::Postgres => assert!(last > registrations, "{stats}"),
    }
    // And the restarted server still takes registrations.
    let free = (1..SLOTS_PER_DAY).find(|s| !taken.contains_key(&(1, FROM.to_string(), *s)));
    if let Some(slot) = free {
        assert_eq!(
            api.register(1, FROM, slot, person(424_242)).await.status,
            201
        );
    }
}

// ---------------------------------------------------------------- personal data at rest

/// Distinctive personal data that cannot occur by chance.
fn secret_person(i: u64) -> serde_json::Value {
    serde_json::json!({
        "name": format!("Zuzana Secretname{i:03}"),
        "nationalId": format!("777123/98{i:02}"),
        "phone": format!("+421 955 31{i:04}"),
        "email": format!("zuzana.secret{i:03}@example.org"),
    })
}

/// What must never be found in the clear: each in its sent and compact form.
fn needles(i: u64) -> Vec<Vec<u8>> {
    let p = secret_person(i);
    let mut out = Vec::new();
    for field in ["name", "nationalId", "phone", "email"] {
        let text = p[field].as_str().unwrap().to_string();
        out.push(text.clone().into_bytes());
        out.push(text.replace(' ', "").into_bytes());
    }
    out
}

fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Panics naming the file if any needle is in any file under `dir`.
fn assert_not_in_files(dir: &Path, needles: &[Vec<u8>], when: &str) -> usize {
    let mut bytes_searched = 0;
    for path in files_under(dir) {
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        bytes_searched += bytes.len();
        for n in needles {
            assert!(
                !bytes.windows(n.len()).any(|w| w == n.as_slice()),
                "{when}: {} holds personal data in the clear: {:?}",
                path.display(),
                String::from_utf8_lossy(n)
            );
        }
    }
    bytes_searched
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn personal_data_is_never_stored_in_the_clear_sqlite() {
    let dir = tempfile::TempDir::new().unwrap();
    seed_with_cli(dir.path(), None, 2, 1, 25).await;
    // The notifier runs, so its log lines are checked too.
    let mut server = ProcessServer::start(dir.path(), None, &["--with-notifier"]).await;
    let mut all_needles = Vec::new();
    let mut sealed = Vec::new();
    for i in 0..20u64 {
        let r = server
            .api
            .register(1 + (i % 2) as i64, FROM, i as i64, secret_person(i))
            .await;
        assert_eq!(r.status, 201, "{}", r.text());
        let v = r.json();
        sealed.push((
            v["registrationId"].as_str().unwrap().to_string(),
            v["accessCode"].as_str().unwrap().to_string(),
            i,
        ));
        all_needles.extend(needles(i));
    }
    // Bad requests carrying personal data must not leak it either.
    let mut bad = secret_person(99);
    bad["email"] = serde_json::json!("not-an-email");
    assert_eq!(server.api.register(1, FROM, 24, bad).await.status, 422);
    all_needles.extend(
        needles(99)
            .into_iter()
            .filter(|n| !n.starts_with(b"zuzana.secret")),
    );
    // The person opens through the API with the code (so the data is there, sealed).
    for (id, code, i) in &sealed {
        assert_eq!(
            server.api.get_registration(id, Some(code)).await.json()["person"],
            secret_person(*i)
        );
    }
    // Let the notifier catch up, so the log holds its lines.
    let token = server.admin_token();
    for _ in 0..50 {
        let stats = server.api.stats(&token).await;
        if stats["notifierPosition"] == stats["lastEventPosition"] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // While running: the database, its WAL and shared memory.
    let db_files: Vec<_> = files_under(dir.path())
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(
        db_files.iter().any(|f| f == "throng.db-wal"),
        "the WAL is searched too: {db_files:?}"
    );
    let searched = assert_not_in_files(dir.path(), &all_needles, "while running");
    assert!(searched > 0);
    // The log (RUST_LOG=info) never holds personal data.
    let log = server.log_text();
    assert!(
        log.contains("throng listening"),
        "the log was captured: {log}"
    );
    for n in &all_needles {
        assert!(
            !log.as_bytes().windows(n.len()).any(|w| w == n.as_slice()),
            "the log holds {:?}",
            String::from_utf8_lossy(n)
        );
    }
    server.kill().await;
    assert_not_in_files(dir.path(), &all_needles, "after a kill");

    // The events carry ids and slots only.
    let store = throng::store::Store::open(
        &throng::store::StoreUrl::Sqlite(dir.path().join("throng.db")),
        Default::default(),
    )
    .await
    .unwrap();
    let events = store.events_after(0, 1000).await.unwrap();
    assert_eq!(events.len(), 21, "SlotsOpened + 20 confirmations");
    for e in &events {
        let payload: serde_json::Value = serde_json::from_slice(&e.payload).unwrap();
        for key in ["person", "name", "nationalId", "phone", "email"] {
            assert!(
                payload.get(key).is_none(),
                "event {} has {key}: {payload}",
                e.position
            );
        }
        for n in &all_needles {
            assert!(
                !e.payload.windows(n.len()).any(|w| w == n.as_slice()),
                "event {}: {payload}",
                e.position
            );
        }
    }
}

/// The same through an in-process server on PostgreSQL: the sealed column
/// holds no plain text (checked in the database itself).
async fn personal_data_is_sealed_in_the_database(kind: StoreKind) {
    let s = TestServer::seeded(kind, 1, 1, 5).await;
    for i in 0..5u64 {
        assert_eq!(
            s.api
                .register(1, FROM, i as i64, secret_person(i))
                .await
                .status,
            201
        );
    }
    let pg = s.pg.as_ref().expect("a PostgreSQL server has its database");
    let (client, conn) = tokio_postgres::connect(&pg.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    // Everything the booking tables and the log hold, as text.
    let rows = client
        .query(
            "SELECT encode(person_sealed, 'escape') || id || encode(access_hash, 'hex') FROM booking_registrations
             UNION ALL SELECT encode(payload, 'escape') FROM events",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 5 + 6);
    for row in rows {
        let text: String = row.get(0);
        for i in 0..5 {
            for n in needles(i) {
                let n = String::from_utf8(n).unwrap();
                assert!(!text.contains(&n), "{n} stored in the clear: {text}");
            }
        }
    }
}

crate::postgres_only!(personal_data_is_sealed_in_the_database);

/// An SQLite store has one server: booking decides slots in that server's
/// writer. A second `serve` on the same store must refuse to start (and a
/// killed server must not leave the store locked).
#[tokio::test(flavor = "multi_thread")]
async fn a_second_server_on_one_sqlite_store_is_refused() {
    let dir = tempfile::TempDir::new().unwrap();
    seed_with_cli(dir.path(), None, 1, 1, 5).await;
    let mut first = ProcessServer::start(dir.path(), None, &[]).await;
    let mut args = vec!["serve".to_string(), "--listen".into(), "127.0.0.1:0".into()];
    args.extend(crate::helpers::store_flags(dir.path(), None));
    let second = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(crate::helpers::throng_bin())
            .args(&args)
            .output(),
    )
    .await
    .expect("the second server exits at once")
    .unwrap();
    assert!(!second.status.success());
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("another throng server is serving"),
        "{stderr}"
    );
    // SIGKILL releases the lock: a new server starts and serves the data.
    first.kill().await;
    let again = ProcessServer::start(dir.path(), None, &[]).await;
    assert_eq!(again.api.register(1, FROM, 0, person(1)).await.status, 201);
}

/// The WAL header's checkpoint sequence number (it grows by one each time
/// SQLite starts writing the WAL from its beginning again) and the WAL's
/// size; only the header is read.
fn wal_sequence_and_size(dir: &Path) -> Option<(u32, u64)> {
    use std::io::Read;
    let mut wal = std::fs::File::open(dir.join("throng.db-wal")).ok()?;
    let mut head = [0u8; 16];
    wal.read_exact(&mut head).ok()?;
    let size = wal.metadata().ok()?.len();
    Some((u32::from_be_bytes(head[12..16].try_into().ok()?), size))
}

/// Under writes that never pause, with readers beside them, the WAL is
/// written from its start again and again rather than growing by every
/// commit (a growing file also costs every commit's sync a journal commit).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_wal_is_reused_under_writes_that_never_pause() {
    const WAL_PLACES: i64 = 400;
    const WAL_LOAD_FOR: Duration = Duration::from_secs(4);
    let dir = tempfile::TempDir::new().unwrap();
    seed_with_cli(
        dir.path(),
        None,
        WAL_PLACES,
        DAYS as i32,
        SLOTS_PER_DAY as i32,
    )
    .await;
    let server = ProcessServer::start(dir.path(), None, &[]).await;
    let started = Instant::now();
    let mut clients = Vec::new();
    for c in 0..LOAD_CLIENTS {
        let api = server.api.clone();
        clients.push(tokio::spawn(async move {
            let (mut created, mut n) = (0usize, 0u64);
            while started.elapsed() < WAL_LOAD_FOR {
                let (place, day, slot) = random_slot(WAL_PLACES);
                n += 1;
                let r = api
                    .register(place, &day, slot, person(c as u64 * 1_000_000 + n))
                    .await;
                assert!(matches!(r.status, 201 | 409), "{} {}", r.status, r.text());
                created += usize::from(r.status == 201);
                if c % 8 == 0 {
                    assert_eq!(api.slots(place, &day, 1).await.status, 200);
                }
            }
            created
        }));
    }
    // The sequence numbers seen while the load runs.
    let mut seen: Vec<u32> = Vec::new();
    let mut size_max = 0u64;
    while started.elapsed() < WAL_LOAD_FOR {
        if let Some((s, size)) = wal_sequence_and_size(dir.path()) {
            if seen.last() != Some(&s) {
                seen.push(s);
            }
            size_max = size_max.max(size);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut created = 0;
    for c in clients {
        created += c.await.unwrap();
    }
    println!(
        "{created} registrations; WAL sequence numbers seen {seen:?}, at most {size_max} bytes"
    );
    assert!(
        created > 200,
        "the load got going ({created} registrations)"
    );
    // The writer catches up every 250 ms, so ~16 restarts in 4 s; without
    // it the WAL restarted 3 times and grew to 32 MB in this test.
    assert!(
        seen.len() >= 9,
        "the WAL was restarted at least 8 times in {WAL_LOAD_FOR:?} of writes \
         ({created} registrations): sequence numbers seen {seen:?}, the WAL reached {size_max} bytes"
    );
}
