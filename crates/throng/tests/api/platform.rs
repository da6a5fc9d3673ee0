//! The platform around every service: health, readiness, metrics, the
//! OpenAPI document, a database that goes away, and the event log's order
//! under concurrent writers from two store handles.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use throng::store::Columns;

use crate::helpers::{person, pg_admin, PgDb, ProcessServer, StoreKind, TestServer, FROM};
use crate::{both_stores, postgres_only};
use throng::store::{NewEvent, Store, StoreLimits, StoreUrl};

both_stores!(
    health_ready_metrics_and_openapi,
    event_log_is_gapless_under_two_writers,
    a_record_of_versions_alone_is_adopted,
    a_bulk_load_replaces_its_tables_and_keeps_their_indexes,
    a_replacing_bulk_load_keeps_the_rows_of_other_keys
);

postgres_only!(
    a_load_dropped_before_it_ends_changes_nothing,
    a_database_that_goes_away_answers_503,
    nodes_started_at_once_on_a_fresh_database_agree
);

/// Three nodes start at the same moment on an empty database and an empty
/// data dir: migrations, secrets and the PII key fingerprint must not race.
async fn nodes_started_at_once_on_a_fresh_database_agree(_kind: StoreKind) {
    let db = PgDb::fresh().await;
    let dir = tempfile::TempDir::new().unwrap();
    let (a, b, c) = tokio::join!(
        ProcessServer::start(dir.path(), Some(&db.url), &[]),
        ProcessServer::start(dir.path(), Some(&db.url), &[]),
        ProcessServer::start(dir.path(), Some(&db.url), &[]),
    );
    let token = a.admin_token();
    for node in [&a, &b, &c] {
        assert_eq!(node.api.get("/ready").await.status, 200);
        assert_eq!(node.api.stats(&token).await["places"], 0);
    }
    // One node's registration opens on another: they share the PII key.
    crate::helpers::seed_with_cli(dir.path(), Some(&db.url), 1, 1, 3).await;
    let r = a.api.register(1, FROM, 0, person(1)).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    let (id, code) = (
        v["registrationId"].as_str().unwrap(),
        v["accessCode"].as_str().unwrap(),
    );
    for node in [&b, &c] {
        assert_eq!(
            node.api.get_registration(id, Some(code)).await.json()["person"],
            person(1)
        );
    }
}

async fn health_ready_metrics_and_openapi(kind: StoreKind) {
    let s = TestServer::seeded(kind, 1, 1, 2).await;
    let api = &s.api;
    let r = api.get("/health").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"], "ok");
    let r = api.get("/ready").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["status"], "ready");

    // Some traffic first, so every series has samples.
    assert_eq!(api.register(1, FROM, 0, person(1)).await.status, 201);
    assert_eq!(api.slots(1, FROM, 1).await.status, 200);
    let r = api.get("/metrics").await;
    assert_eq!(r.status, 200);
    assert!(r.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let text = r.text();
    for name in [
        "throng_http_requests_total",
        "throng_http_request_duration_seconds",
        "throng_http_in_flight",
        "throng_http_rejected_429_total",
        "throng_store_write_batch_commands",
        "throng_store_commit_seconds",
    ] {
        assert!(
            text.contains(&format!("# TYPE {name} ")),
            "/metrics has {name}:\n{text}"
        );
    }
    // Requests are counted by their route template, not by raw path.
    assert!(
        text.contains(r#"route="/api/booking/places/{place_id}/slots""#),
        "requests are labelled by route:\n{}",
        text.lines()
            .filter(|l| l.starts_with("throng_http_requests_total"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        !text.contains("route=\"/api/booking/places/1/slots\""),
        "no raw paths as labels"
    );

    let r = api.get("/openapi.json").await;
    assert_eq!(r.status, 200);
    let doc = r.json();
    assert!(
        doc["openapi"].as_str().is_some_and(|v| v.starts_with('3')),
        "{}",
        doc["openapi"]
    );
    let paths = doc["paths"].as_object().expect("paths");
    for (path, method) in [
        ("/api/booking/places", "get"),
        ("/api/booking/places/{place_id}/slots", "get"),
        ("/api/booking/registrations", "post"),
        ("/api/booking/registrations/{registration_id}", "get"),
        ("/api/booking/registrations/{registration_id}", "delete"),
        ("/api/booking/admin/stats", "get"),
    ] {
        assert!(
            paths.get(path).and_then(|p| p.get(method)).is_some(),
            "openapi has {method} {path}"
        );
    }
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());

    // The pages are served.
    let r = api.get("/booking/").await;
    assert_eq!(r.status, 200);
    assert!(r.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    assert_eq!(api.get("/").await.status, 200);
}

/// Two store handles (two writers, as two nodes) append events while a reader
/// follows the log: it sees 1..N with no gap and no event twice.
async fn event_log_is_gapless_under_two_writers(kind: StoreKind) {
    const WRITERS_PER_STORE: usize = 8;
    const EVENTS_PER_WRITER: usize = 60;
    const TOTAL: usize = 2 * WRITERS_PER_STORE * EVENTS_PER_WRITER;
    let (url, _db, _dir) = match kind {
        StoreKind::Sqlite => {
            let dir = tempfile::TempDir::new().unwrap();
            (
                StoreUrl::Sqlite(dir.path().join("throng.db")),
                None,
                Some(dir),
            )
        }
        StoreKind::Postgres => {
            let db = PgDb::fresh().await;
            (StoreUrl::Postgres(db.url.clone()), Some(db), None)
        }
    };
    let a = Store::open(&url, StoreLimits::default()).await.unwrap();
    let b = Store::open(&url, StoreLimits::default()).await.unwrap();

    let mut writers = Vec::new();
    for (s, store) in [a.clone(), b.clone()].into_iter().enumerate() {
        for w in 0..WRITERS_PER_STORE {
            let store = store.clone();
            writers.push(tokio::spawn(async move {
                for i in 0..EVENTS_PER_WRITER {
                    // Some commands append two events, so batches mix sizes.
                    let n = 1 + (i % 3 == 0) as usize;
                    let events: Vec<NewEvent> = (0..n)
                        .map(|k| {
                            let key = format!("{s}-{w}-{i}-{k}");
                            NewEvent::json(
                                format!("test-{s}-{w}"),
                                "TestEvent",
                                &serde_json::json!({ "key": key }),
                            )
                        })
                        .collect();
                    append(&store, events).await;
                }
            }));
        }
    }
    // Written per writer: sum over i of 1 + (i % 3 == 0).
    let per_writer: usize = (0..EVENTS_PER_WRITER)
        .map(|i| 1 + (i % 3 == 0) as usize)
        .sum();
    let expected = 2 * WRITERS_PER_STORE * per_writer;
    assert!(expected > TOTAL);

    let reader = tokio::spawn(async move {
        let (mut last, mut keys) = (0i64, HashSet::new());
        let deadline = Instant::now() + Duration::from_secs(60);
        while (last as usize) < expected && Instant::now() < deadline {
            let batch = a.events_after(last, 100).await.unwrap();
            if batch.is_empty() {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            for e in batch {
                assert_eq!(e.position, last + 1, "the reader never skips a position");
                last = e.position;
                let v: serde_json::Value = serde_json::from_slice(&e.payload).unwrap();
                assert!(
                    keys.insert(v["key"].as_str().unwrap().to_string()),
                    "event twice: {v}"
                );
            }
        }
        (last, keys.len())
    });
    for w in writers {
        w.await.unwrap();
    }
    let (last, distinct) = reader.await.unwrap();
    assert_eq!(last as usize, expected, "the reader saw every event");
    assert_eq!(distinct, expected);
    assert!(
        b.events_after(last, 100).await.unwrap().is_empty(),
        "and nothing more"
    );
}

async fn append(store: &Store, events: Vec<NewEvent>) {
    let events = Arc::new(events);
    store
        .write(move |tx| {
            let events = events.clone();
            Box::pin(async move {
                for e in events.iter() {
                    tx.append(e.clone())?;
                }
                Ok(())
            })
        })
        .await
        .unwrap()
}

/// The database is dropped under a running server: readiness and writes
/// answer 503 `store_unavailable` quickly, never 500 and never a hang.
async fn a_database_that_goes_away_answers_503(kind: StoreKind) {
    let mut s = TestServer::seeded(kind, 1, 1, 5).await;
    assert_eq!(s.api.register(1, FROM, 0, person(1)).await.status, 201);
    assert_eq!(s.api.get("/ready").await.status, 200);
    let pg = s.pg.take().unwrap();
    pg_admin(
        &pg.admin_url,
        &format!("DROP DATABASE {} WITH (FORCE)", pg.name),
    )
    .await;

    for attempt in 0..3 {
        let started = Instant::now();
        let r = s.api.get("/ready").await;
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "/ready took {:?}",
            started.elapsed()
        );
        r.assert_error(503, "store_unavailable");
        assert!(r.headers.get("retry-after").is_some());

        let started = Instant::now();
        let r = s.api.register(1, FROM, 1 + attempt, person(2)).await;
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "register took {:?}",
            started.elapsed()
        );
        r.assert_error(503, "store_unavailable");

        let r = s.api.slots(1, FROM, 1).await;
        r.assert_error(503, "store_unavailable");
    }
    // The server itself is alive.
    assert_eq!(s.api.get("/health").await.status, 200);
    s.stop().await;
    drop(pg);
}

/// Batches the store's writer committed, from `/metrics`.
async fn commits(api: &crate::helpers::Api) -> u64 {
    let text = api.get("/metrics").await.text();
    text.lines()
        .find_map(|l| l.strip_prefix("throng_store_write_batch_commands_count "))
        .unwrap_or_else(|| panic!("no batch count in /metrics:\n{text}"))
        .trim()
        .parse()
        .expect("a count")
}

/// An idle demo server (every service's workers running: the mixer looking
/// at the box every 100 ms, the tally projector, the confirmation worker)
/// commits nothing while nothing happens. Its own process, so that no other
/// test's writes reach the counter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_server_does_not_commit() {
    let data = tempfile::TempDir::new().unwrap();
    let server =
        crate::helpers::ProcessServer::start(data.path(), None, &["--demo", "--with-notifier"])
            .await;
    // Start-up work (the projector catching up with the demo's events).
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let before = commits(&server.api).await;
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let after = commits(&server.api).await;
    assert!(
        after - before <= 2,
        "{} commits in 5 s of idling ({before} -> {after})",
        after - before
    );
}

/// Rows of `schema_versions` as (owner, version), in key order.
async fn versions(store: &Store) -> Vec<(String, i64)> {
    crate::helpers::query(
        store,
        "SELECT owner, version FROM schema_versions ORDER BY owner, version",
        vec![],
        |r| Ok((r.text(0)?, r.int(1)?)),
    )
    .await
}

/// A database whose migrations were recorded by version alone (the older
/// `schema_migrations`) opens with every migration kept as applied, now
/// recorded by owner and version, and none run twice (they would fail on
/// tables that exist).
async fn a_record_of_versions_alone_is_adopted(kind: StoreKind) {
    let dir = tempfile::TempDir::new().unwrap();
    let pg = match kind {
        StoreKind::Sqlite => None,
        StoreKind::Postgres => Some(PgDb::fresh().await),
    };
    let url = match &pg {
        Some(pg) => StoreUrl::Postgres(pg.url.clone()),
        None => StoreUrl::Sqlite(dir.path().join("throng.db")),
    };
    let sets = throng::services::migrations();
    let store = Store::open_with(&url, StoreLimits::default(), &sets)
        .await
        .unwrap();
    let recorded = versions(&store).await;
    assert!(recorded.iter().any(|(o, v)| o == "store" && *v == 1));
    assert!(recorded.iter().any(|(o, _)| o == "booking"));
    const TO_OLDER: &str = "CREATE TABLE schema_migrations (
            version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at_ms BIGINT NOT NULL);
        INSERT INTO schema_migrations SELECT version, name, applied_at_ms FROM schema_versions;
        DROP TABLE schema_versions;";
    crate::helpers::batch(&store, TO_OLDER).await;
    drop(store);
    let store = Store::open_with(&url, StoreLimits::default(), &sets)
        .await
        .expect("reopens without running a migration twice");
    assert_eq!(versions(&store).await, recorded);
    let older_tables = throng::store::Sql::owned_per_dialect(
        "SELECT COUNT(*) FROM sqlite_master WHERE name = 'schema_migrations'".into(),
        "SELECT COUNT(*) FROM pg_tables WHERE tablename = 'schema_migrations'".into(),
    );
    let older = store
        .read(move |c| Box::pin(async move { c.query_one(&older_tables, &[], |r| r.int(0)).await }))
        .await
        .unwrap();
    assert_eq!(older, 0, "the older record is gone");
}

static PROBE: throng::store::bulk::BulkTable = throng::store::bulk::BulkTable {
    name: "bulk_probe",
    columns: &["id", "name", "n"],
    analyze: true,
};

/// A bulk load (the seeds' way in) empties its tables, stores every row
/// sent, in every type, and leaves the tables' indexes as they were: the
/// unique index refuses a duplicate afterwards.
async fn a_bulk_load_replaces_its_tables_and_keeps_their_indexes(kind: StoreKind) {
    let (store, _dir, _pg) = store_of_its_own(kind).await;
    crate::helpers::batch(
        &store,
        "CREATE TABLE bulk_probe (id BIGINT PRIMARY KEY, name TEXT, n INT NOT NULL);
         CREATE UNIQUE INDEX bulk_probe_name ON bulk_probe (name);
         INSERT INTO bulk_probe VALUES (999, 'before', 0);",
    )
    .await;
    static TABLES: &[&throng::store::bulk::BulkTable] = &[&PROBE];
    for round in 0..2i64 {
        let mut load = store.bulk_load(TABLES).await.unwrap();
        for chunk in 0..3i64 {
            let mut rows = load.rows(&PROBE, 100, 32);
            for i in 0..100 {
                let id = chunk * 100 + i;
                let name = (id % 7 != 0).then(|| format!("r{round}-{id}"));
                rows.row()
                    .int8(id)
                    .opt_text(name.as_deref())
                    .int4(id as i32 * 2);
            }
            assert_eq!(load.send(rows).await.unwrap(), 100);
        }
        load.finish().await.unwrap();
        let rows = crate::helpers::query(
            &store,
            "SELECT COUNT(*), COUNT(name), SUM(n), MAX(name) FROM bulk_probe",
            vec![],
            |r| Ok((r.int(0)?, r.int(1)?, r.int(2)?, r.text(3)?)),
        )
        .await;
        assert_eq!(
            rows[0],
            (300, 300 - 43, 299 * 300, format!("r{round}-99")),
            "round {round}: the earlier rows are gone, every row sent is stored"
        );
    }
    static DUPLICATE: throng::store::Sql =
        throng::store::Sql::new("INSERT INTO bulk_probe VALUES (1000, 'r1-1', 0)");
    let refused = store
        .write(|tx| Box::pin(tx.execute(&DUPLICATE, &[])))
        .await;
    assert!(refused.is_err(), "the unique index was built again");
}

static KEYED_PROBE: throng::store::bulk::BulkTable = throng::store::bulk::BulkTable {
    name: "bulk_keyed_probe",
    columns: &["k", "id", "name"],
    analyze: true,
};
static KEYS_PROBE: throng::store::bulk::BulkTable = throng::store::bulk::BulkTable {
    name: "bulk_keys_probe",
    columns: &["id", "label"],
    analyze: false,
};

/// A replacing bulk load deletes and refills the rows of its key only, in
/// each table by that table's key column: the rows of another key stay,
/// and so do the indexes, which refuse a duplicate across keys afterwards.
async fn a_replacing_bulk_load_keeps_the_rows_of_other_keys(kind: StoreKind) {
    use throng::store::bulk::KeyedTable;
    let (store, _dir, _pg) = store_of_its_own(kind).await;
    crate::helpers::batch(
        &store,
        "CREATE TABLE bulk_keys_probe (id BIGINT PRIMARY KEY, label TEXT NOT NULL);
         CREATE TABLE bulk_keyed_probe (k BIGINT NOT NULL, id BIGINT NOT NULL, name TEXT,
                                        PRIMARY KEY (k, id));
         CREATE UNIQUE INDEX bulk_keyed_probe_name ON bulk_keyed_probe (name);
         INSERT INTO bulk_keys_probe VALUES (1, 'one'), (2, 'two');
         INSERT INTO bulk_keyed_probe VALUES (1, 1, 'old-1'), (1, 2, 'old-2'), (2, 1, 'two-1');",
    )
    .await;
    static TABLES: &[KeyedTable] = &[
        KeyedTable {
            table: &KEYED_PROBE,
            column: "k",
        },
        KeyedTable {
            table: &KEYS_PROBE,
            column: "id",
        },
    ];
    for round in 0..2i64 {
        let mut load = store.bulk_load_replacing(TABLES, 1).await.unwrap();
        let mut keys = load.rows(&KEYS_PROBE, 1, 32);
        keys.row().int8(1).text(&format!("one-{round}"));
        assert_eq!(load.send(keys).await.unwrap(), 1);
        let mut rows = load.rows(&KEYED_PROBE, 50, 40);
        for id in 0..50i64 {
            let name = (id % 5 != 0).then(|| format!("r{round}-{id}"));
            rows.row().int8(1).int8(id).opt_text(name.as_deref());
        }
        assert_eq!(load.send(rows).await.unwrap(), 50);
        load.finish().await.unwrap();
        let keyed = crate::helpers::query(
            &store,
            "SELECT k, COUNT(*), COUNT(name), MIN(name), MAX(name) FROM bulk_keyed_probe
             GROUP BY k ORDER BY k",
            vec![],
            |r| Ok((r.int(0)?, r.int(1)?, r.int(2)?, r.text(3)?, r.text(4)?)),
        )
        .await;
        assert_eq!(
            keyed,
            vec![
                (1, 50, 40, format!("r{round}-1"), format!("r{round}-9")),
                (2, 1, 1, "two-1".to_string(), "two-1".to_string()),
            ],
            "round {round}: key 1's rows replaced, key 2's kept"
        );
        let keys = crate::helpers::query(
            &store,
            "SELECT id, label FROM bulk_keys_probe ORDER BY id",
            vec![],
            |r| Ok((r.int(0)?, r.text(1)?)),
        )
        .await;
        assert_eq!(
            keys,
            vec![(1, format!("one-{round}")), (2, "two".to_string())],
            "round {round}: the key column is each table's own"
        );
    }
    static DUPLICATE: throng::store::Sql =
        throng::store::Sql::new("INSERT INTO bulk_keyed_probe VALUES (3, 1, 'two-1')");
    let refused = store
        .write(|tx| Box::pin(tx.execute(&DUPLICATE, &[])))
        .await;
    assert!(refused.is_err(), "the unique index is in place");
}

/// A PostgreSQL load that ends without `finish` (an error, a cancelled
/// seed) rolls back: the tables are as they were, and no pooled connection
/// is left inside its transaction (a read on one would see the emptied
/// table).
async fn a_load_dropped_before_it_ends_changes_nothing(kind: StoreKind) {
    let pg = PgDb::fresh().await;
    let url = StoreUrl::Postgres(pg.url.clone());
    let limits = StoreLimits {
        read_connections: 1,
        ..StoreLimits::default()
    };
    let store = Store::open(&url, limits).await.unwrap();
    crate::helpers::batch(
        &store,
        "CREATE TABLE bulk_probe (id BIGINT PRIMARY KEY, name TEXT, n INT NOT NULL);
         INSERT INTO bulk_probe VALUES (999, 'before', 0);",
    )
    .await;
    static TABLES: &[&throng::store::bulk::BulkTable] = &[&PROBE];
    {
        let mut load = store.bulk_load(TABLES).await.unwrap();
        let mut rows = load.rows(&PROBE, 10, 32);
        for id in 0..10i64 {
            rows.row().int8(id).text("dropped").int4(1);
        }
        assert_eq!(load.send(rows).await.unwrap(), 10);
    }
    for _ in 0..3 {
        let rows = crate::helpers::query(
            &store,
            "SELECT COUNT(*), MAX(name) FROM bulk_probe",
            vec![],
            |r| Ok((r.int(0)?, r.text(1)?)),
        )
        .await;
        assert_eq!(rows[0], (1, "before".to_string()), "{kind:?}");
    }
}

/// A store of its own on `kind` with the store's tables only, and what
/// holds it (its folder, its PostgreSQL database) until dropped.
async fn store_of_its_own(kind: StoreKind) -> (Store, tempfile::TempDir, Option<PgDb>) {
    let dir = tempfile::TempDir::new().unwrap();
    let pg = match kind {
        StoreKind::Sqlite => None,
        StoreKind::Postgres => Some(PgDb::fresh().await),
    };
    let url = match &pg {
        Some(pg) => StoreUrl::Postgres(pg.url.clone()),
        None => StoreUrl::Sqlite(dir.path().join("throng.db")),
    };
    let store = Store::open(&url, StoreLimits::default()).await.unwrap();
    (store, dir, pg)
}

/// A mistyped address: a browser gets a page that says so and leads back;
/// a client of the API (or any path under /api/) gets the error envelope.
/// Every page fits a phone's width (a viewport tag).
#[tokio::test]
async fn a_mistyped_address_answers_a_page_to_a_browser() {
    let s = crate::helpers::TestServer::start(StoreKind::Sqlite, &[]).await;
    let api = &s.api;
    let html = |path: &str| {
        api.http
            .get(api.url(path))
            .header("accept", "text/html,application/xhtml+xml,*/*;q=0.8")
    };
    let r = api.send(html("/bookin/")).await;
    assert_eq!(r.status, 404);
    assert!(r.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let page = r.text();
    assert!(
        page.contains("Page not found") && page.contains(r#"href="/""#),
        "{page}"
    );
    assert!(page.contains(r#"name="viewport""#));
    api.send(html("/api/nothing-here"))
        .await
        .assert_error(404, "route_not_found");
    api.get("/bookin/")
        .await
        .assert_error(404, "route_not_found");
    let index = api.send(html("/")).await.text();
    assert!(index.contains(r#"name="viewport""#), "{index}");
}

/// An id in a path written as a whole number with a zero fraction (`1.0`,
/// an integer to JSON Schema, as a body's numbers are) is that number; a
/// fraction that is not zero is refused in throng's words.
#[tokio::test]
async fn a_whole_number_with_a_zero_fraction_is_an_id_in_a_path() {
    let s = crate::helpers::TestServer::start(StoreKind::Sqlite, &["--demo"]).await;
    let api = &s.api;
    let whole = api.get("/api/courses/1.0/rating").await;
    assert_eq!(whole.status, api.get("/api/courses/1/rating").await.status);
    assert_eq!(whole.status, 200, "{}", whole.text());
    api.get("/api/courses/1.5/rating")
        .await
        .assert_error(400, "invalid_path");
}
