//! The comparison designs `throng bench` runs beside the services live with
//! the bench: `throng serve` creates no table, mounts no route and has no
//! flag of theirs; the bench's child servers (`throng bench-server`) get them.

use serde_json::json;
use throng::store::Columns;
use throng::store::Store;

use crate::both_stores;
use crate::helpers::{throng_bin, StoreKind, TestServer, FROM};

both_stores!(
    serve_creates_and_mounts_no_comparison_design,
    the_bench_child_mounts_them
);

/// Tables and indexes of the comparison designs in the store's schema.
async fn comparison_relations(store: &Store) -> Vec<String> {
    let relations = throng::store::Sql::owned_per_dialect(
        "SELECT name FROM sqlite_master
         WHERE name LIKE '%baseline%' OR name = 'voting_candidates_by_list'"
            .into(),
        "SELECT relname::text FROM pg_class
         WHERE relname LIKE '%baseline%' OR relname = 'voting_candidates_by_list'"
            .into(),
    );
    store
        .read(move |c| Box::pin(async move { c.query(&relations, &[], |r| r.text(0)).await }))
        .await
        .unwrap()
}

async fn serve_creates_and_mounts_no_comparison_design(kind: StoreKind) {
    let s = TestServer::start(kind, &["--voting-identity", "headers"]).await;
    // Every migration ran (the schema once made them; a later one drops them).
    assert_eq!(
        comparison_relations(&s.state.store).await,
        Vec::<String>::new()
    );
    let api = &s.api;
    api.get("/api/voting/baseline/elections/1/districts/1/ballot")
        .await
        .assert_error(404, "route_not_found");
    for (path, body) in [
        (
            "/api/voting/baseline/elections/1/votes",
            json!({"partyId": 1, "candidateIds": []}),
        ),
        (
            "/api/booking/baseline/registrations",
            json!({"placeId": 1, "day": "2030-01-01", "timeSlot": 0}),
        ),
        (
            "/api/invites/baseline/sites/1/answers",
            json!({"answer": "no", "displayId": "x"}),
        ),
        (
            "/api/booking/baseline/redis/registrations",
            registration(1, FROM, 0),
        ),
        (
            "/api/booking/baseline/redis-durable/registrations",
            registration(1, FROM, 0),
        ),
    ] {
        api.post_json(path, &body)
            .await
            .assert_error(404, "route_not_found");
    }
    let doc = api.get("/openapi.json").await.text();
    assert!(!doc.contains("baseline"), "the document names no baseline");
}

async fn the_bench_child_mounts_them(kind: StoreKind) {
    let s = TestServer::start_bench_child(kind, "booking", &[]).await;
    // Routed (a slot that does not exist is the naive design's 409).
    s.api
        .post_json(
            "/api/booking/baseline/registrations",
            &json!({"placeId": 1, "day": "2030-01-01", "timeSlot": 0}),
        )
        .await
        .assert_error(409, "slot_taken");
    drop(s);
    let s = TestServer::start_bench_child(kind, "voting", &[]).await;
    let mut made = comparison_relations(&s.state.store).await;
    made.retain(|n| !n.ends_with("_pkey"));
    made.sort();
    assert_eq!(made, ["voting_baseline_votes", "voting_candidates_by_list"]);
    // Not in the document: the bench's routes are not the API.
    let doc = s.api.get("/openapi.json").await.text();
    assert!(!doc.contains("baseline"));
}

#[test]
fn serve_has_no_baseline_flag_and_the_bench_child_is_hidden() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(throng_bin())
            .args(args)
            .output()
            .expect("throng runs");
        assert!(out.status.success(), "{args:?}");
        String::from_utf8_lossy(&out.stdout).to_lowercase()
    };
    let serve = run(&["serve", "--help"]);
    assert!(serve.contains("--listen"), "{serve}");
    assert!(!serve.contains("baseline"), "{serve}");
    assert!(!serve.contains("redis"), "{serve}");
    assert!(!run(&["--help"]).contains("bench-server"));
    let child = run(&["bench-server", "--help"]);
    assert!(child.contains("--listen"), "{child}");
    assert!(child.contains("--booking-redis-url"), "{child}");
    assert!(child.contains("--booking-redis-durable-url"), "{child}");
}

/// A body of the real `/api/booking/registrations`.
fn registration(place: i64, day: &str, slot: i64) -> serde_json::Value {
    json!({
        "placeId": place,
        "day": day,
        "timeSlot": slot,
        "person": {
            "name": "Test Person",
            "nationalId": "T123",
            "phone": "+421 900 000 000",
            "email": "t@example.org"
        }
    })
}

/// The Redis of the bench's Redis design. Its tests use database 14 (the
/// bench empties 15) and a place id of their own, so they neither see nor
/// disturb a bench or another test.
const TEST_REDIS_URL: &str = "redis://127.0.0.1:6379/14";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    not(throng_redis_tests),
    ignore = "Redis: nothing answered PING on 127.0.0.1:6379 when the tests were built \
              (the machine's Redis; .ci/run starts one)"
)]
async fn the_bench_child_decides_in_redis() {
    let client = redis::Client::open(TEST_REDIS_URL).unwrap();
    let mut redis = client
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|e| panic!("no Redis at {TEST_REDIS_URL}, as the build found: {e}"));
    let s = TestServer::start_bench_child(
        StoreKind::Sqlite,
        "booking",
        &["--booking-redis-url", TEST_REDIS_URL],
    )
    .await;
    let api = &s.api;
    let path = "/api/booking/baseline/redis/registrations";
    let place = 1_000_000 + rand::random::<u32>() as i64 % 1_000_000_000;
    let key = format!("booking:{place}:{FROM}");

    let first = api.post_json(path, &registration(place, FROM, 7)).await;
    assert_eq!(first.status, 201, "{}", first.text());
    let id = first.json()["id"].as_str().expect("an id").to_string();
    // One HSETNX: the slot's field in the place and day's hash holds it.
    let held: Option<String> = redis::cmd("HGET")
        .arg(&key)
        .arg(7)
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(held.as_deref(), Some(id.as_str()));
    api.post_json(path, &registration(place, FROM, 7))
        .await
        .assert_error(409, "slot_taken");
    let other = api.post_json(path, &registration(place, FROM, 8)).await;
    assert_eq!(other.status, 201, "another slot of the day is free");

    // Bad input is a 4xx with the envelope, as on the real endpoint, and
    // writes nothing.
    for (body, status, code) in [
        (registration(place, FROM, 1440), 422, "invalid_field"),
        (registration(place, FROM, -1), 422, "invalid_field"),
        (registration(0, FROM, 9), 422, "invalid_field"),
        (registration(place, "2030-02-30", 9), 422, "invalid_field"),
        (
            json!({"placeId": place, "day": FROM, "timeSlot": 9}),
            422,
            "invalid_field",
        ),
        (
            json!({"placeId": place, "day": FROM, "timeSlot": 9.5}),
            422,
            "invalid_field",
        ),
    ] {
        api.post_json(path, &body).await.assert_error(status, code);
    }
    api.raw_post(path, "{", Some("application/json"))
        .await
        .assert_error(400, "malformed_json");
    api.raw_post(path, "{}", None)
        .await
        .assert_error(415, "unsupported_media_type");
    let fields: Vec<String> = redis::cmd("HKEYS")
        .arg(&key)
        .query_async(&mut redis)
        .await
        .unwrap();
    let mut fields = fields;
    fields.sort();
    assert_eq!(fields, ["7", "8"]);

    // The durable route's Redis was not given to this server.
    api.post_json(
        "/api/booking/baseline/redis-durable/registrations",
        &registration(place, FROM, 9),
    )
    .await
    .assert_error(503, "redis_not_configured");
    let _: () = redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut redis)
        .await
        .unwrap();
}
