//! One active registration per person (`--booking-one-registration`): a
//! keyed blind index of the national id, decided in the write that takes
//! the slot, on both stores and across nodes.

use serde_json::Value;
use throng::store::Columns;

use crate::helpers::{person, ProcessServer, StoreKind, TestServer, FROM};
use crate::{both_stores, postgres_only};

both_stores!(
    one_national_id_one_registration,
    cancelling_frees_the_person,
    the_rule_per_day_and_off,
    the_stored_index_is_neither_the_id_nor_its_hash,
    the_rule_survives_a_restart
);
postgres_only!(two_nodes_at_once_give_one_registration);

/// `person(n)` with another name, phone and email but `n`'s national id,
/// written another way (`900101/0007` as `9001010007`).
fn same_id_other_person(n: u64) -> Value {
    let mut p = person(n + 1_000_000);
    p["nationalId"] = person(n)["nationalId"]
        .as_str()
        .unwrap()
        .replace('/', "")
        .into();
    p
}

async fn one_national_id_one_registration(kind: StoreKind) {
    let s = TestServer::seeded(kind, 2, 1, 25).await;
    let api = &s.api;
    // Ten people, each sending two registrations at once for two slots.
    for n in 0..10u64 {
        let (a, b) = tokio::join!(
            api.register(1, FROM, n as i64, person(n)),
            api.register(2, FROM, n as i64, same_id_other_person(n)),
        );
        let mut statuses = [a.status, b.status];
        statuses.sort();
        assert_eq!(
            statuses,
            [201, 409],
            "person {n}: {} / {}",
            a.text(),
            b.text()
        );
        let refused = if a.status == 409 { &a } else { &b };
        refused.assert_error(409, "already_registered");
    }
    assert_eq!(s.registrations().await, 10);
    // The refused one took no slot: exactly ten are taken.
    let taken = api.taken_slots(1, FROM, 1).await.len() + api.taken_slots(2, FROM, 1).await.len();
    assert_eq!(taken, 10);
    // Another person is not affected.
    assert_eq!(api.register(2, FROM, 20, person(20)).await.status, 201);
}

async fn cancelling_frees_the_person(kind: StoreKind) {
    let s = TestServer::seeded(kind, 1, 1, 5).await;
    let api = &s.api;
    let r = api.register(1, FROM, 0, person(7)).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    api.register(1, FROM, 1, person(7))
        .await
        .assert_error(409, "already_registered");
    let (id, code) = (
        v["registrationId"].as_str().unwrap(),
        v["accessCode"].as_str().unwrap(),
    );
    assert_eq!(api.cancel(id, Some(code)).await.status, 204);
    assert_eq!(api.register(1, FROM, 1, person(7)).await.status, 201);
}

async fn the_rule_per_day_and_off(kind: StoreKind) {
    let day2 = "2030-01-02";
    let s = TestServer::start_seeded(
        kind,
        &["--booking-one-registration", "person-day"],
        Some((1, 2, 5)),
    )
    .await;
    let api = &s.api;
    assert_eq!(api.register(1, FROM, 0, person(1)).await.status, 201);
    assert_eq!(
        api.register(1, day2, 0, person(1)).await.status,
        201,
        "another day"
    );
    let msg = api
        .register(1, FROM, 1, person(1))
        .await
        .assert_error(409, "already_registered");
    assert!(msg.contains("this day"), "{msg}");
    drop(s);

    let s = TestServer::start_seeded(
        kind,
        &["--booking-one-registration", "off"],
        Some((1, 1, 5)),
    )
    .await;
    assert_eq!(s.api.register(1, FROM, 0, person(1)).await.status, 201);
    assert_eq!(s.api.register(1, FROM, 1, person(1)).await.status, 201);
}

/// What is stored is an HMAC under the data directory's own key: not the
/// national id, not its SHA-256 (which anyone could compute for every id).
async fn the_stored_index_is_neither_the_id_nor_its_hash(kind: StoreKind) {
    use sha2::Digest;
    let s = TestServer::seeded(kind, 1, 1, 5).await;
    assert_eq!(s.api.register(1, FROM, 0, person(42)).await.status, 201);
    let keys = crate::helpers::query(
        &s.state.store,
        "SELECT person_key FROM booking_registrations",
        vec![],
        |r| r.bytes(0),
    )
    .await;
    assert_eq!(keys.len(), 1);
    let key = &keys[0];
    assert_eq!(key.len(), 32);
    let id = person(42)["nationalId"].as_str().unwrap().to_string();
    let normalized = id.replace('/', "");
    for plain in [id.as_bytes(), normalized.as_bytes()] {
        assert!(
            !key.windows(plain.len()).any(|w| w == plain),
            "the id itself"
        );
        assert_ne!(
            key.as_slice(),
            sha2::Sha256::digest(plain).as_slice(),
            "a plain hash"
        );
        let mut scoped = b"person".to_vec();
        scoped.extend_from_slice(plain);
        assert_ne!(key.as_slice(), sha2::Sha256::digest(&scoped).as_slice());
    }
    // Keyed by the data directory's blind-index key: another key gives
    // another entry for the same id.
    let secrets = throng::platform::secrets::Secrets::load_or_create(&s.data_dir).unwrap();
    let ours = throng::platform::crypto::BlindIndex::new(
        &secrets
            .key(&throng::services::booking::BLIND_INDEX_KEY)
            .unwrap(),
    );
    let mut scope = b"person".to_vec();
    assert_eq!(
        key.as_slice(),
        ours.of(&scope, normalized.as_bytes()).as_slice()
    );
    scope.push(b'x');
    assert_ne!(
        key.as_slice(),
        ours.of(&scope, normalized.as_bytes()).as_slice()
    );
}

/// Two nodes on one PostgreSQL, one person registering on both at once:
/// the unique constraint decides.
async fn two_nodes_at_once_give_one_registration(_kind: StoreKind) {
    let db = crate::helpers::PgDb::fresh().await;
    let dir = tempfile::TempDir::new().unwrap();
    crate::helpers::seed_with_cli(dir.path(), Some(&db.url), 2, 1, 25).await;
    let (a, b) = tokio::join!(
        ProcessServer::start(dir.path(), Some(&db.url), &[]),
        ProcessServer::start(dir.path(), Some(&db.url), &[]),
    );
    for n in 0..10u64 {
        let (ra, rb) = tokio::join!(
            a.api.register(1, FROM, n as i64, person(n)),
            b.api.register(2, FROM, n as i64, same_id_other_person(n)),
        );
        let mut statuses = [ra.status, rb.status];
        statuses.sort();
        assert_eq!(
            statuses,
            [201, 409],
            "person {n}: {} / {}",
            ra.text(),
            rb.text()
        );
    }
    let stats = a.api.stats(&a.admin_token()).await;
    assert_eq!(stats["registrations"], 10);
    let taken =
        a.api.taken_slots(1, FROM, 1).await.len() + a.api.taken_slots(2, FROM, 1).await.len();
    assert_eq!(taken, 10, "no slot is held by a refused registration");
}

/// On SQLite the writer decides from memory, rebuilt at start from the
/// stored keys: after a kill and a restart the person still holds theirs,
/// and a cancelled one stays free.
async fn the_rule_survives_a_restart(kind: StoreKind) {
    let db = match kind {
        StoreKind::Sqlite => None,
        StoreKind::Postgres => Some(crate::helpers::PgDb::fresh().await),
    };
    let pg = db.as_ref().map(|d| d.url.as_str());
    let dir = tempfile::TempDir::new().unwrap();
    crate::helpers::seed_with_cli(dir.path(), pg, 1, 1, 5).await;
    let mut s = ProcessServer::start(dir.path(), pg, &[]).await;
    assert_eq!(s.api.register(1, FROM, 0, person(1)).await.status, 201);
    let r = s.api.register(1, FROM, 1, person(2)).await;
    assert_eq!(r.status, 201);
    let v = r.json();
    let (id, code) = (
        v["registrationId"].as_str().unwrap().to_string(),
        v["accessCode"].as_str().unwrap().to_string(),
    );
    assert_eq!(s.api.cancel(&id, Some(&code)).await.status, 204);
    s.kill().await;
    let s = ProcessServer::start(dir.path(), pg, &[]).await;
    s.api
        .register(1, FROM, 2, same_id_other_person(1))
        .await
        .assert_error(409, "already_registered");
    assert_eq!(s.api.register(1, FROM, 3, person(2)).await.status, 201);
}
