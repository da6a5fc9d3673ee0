//! The comparison designs `throng bench` runs beside the services live with
//! the bench: `throng serve` creates no table, mounts no route and has no
//! flag of theirs; the bench's child servers (`throng bench-server`) get them.

use serde_json::json;
use throng::store::Store;

use crate::both_stores;
use crate::helpers::{throng_bin, StoreKind, TestServer};

both_stores!(
    serve_creates_and_mounts_no_comparison_design,
    the_bench_child_mounts_them
);

/// Tables and indexes of the comparison designs in the store's schema.
async fn comparison_relations(store: &Store) -> Vec<String> {
    match store {
        Store::Sqlite(s) => s
            .read(|c| {
                let mut stmt = c.prepare(
                    "SELECT name FROM sqlite_master
                     WHERE name LIKE '%baseline%' OR name = 'voting_candidates_by_list'",
                )?;
                let names = stmt
                    .query_map([], |r| r.get(0))?
                    .collect::<Result<Vec<String>, _>>()?;
                Ok(names)
            })
            .await
            .unwrap(),
        Store::Postgres(p) => p
            .client()
            .await
            .unwrap()
            .query(
                "SELECT relname::text FROM pg_class
                 WHERE relname LIKE '%baseline%' OR relname = 'voting_candidates_by_list'",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect(),
    }
}

async fn serve_creates_and_mounts_no_comparison_design(kind: StoreKind) {
    let Some(s) = TestServer::start(kind, &["--voting-identity", "headers"]).await else {
        return;
    };
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
    ] {
        api.post_json(path, &body)
            .await
            .assert_error(404, "route_not_found");
    }
    let doc = api.get("/openapi.json").await.text();
    assert!(!doc.contains("baseline"), "the document names no baseline");
}

async fn the_bench_child_mounts_them(kind: StoreKind) {
    let Some(s) = TestServer::start_bench_child(kind, "booking", &[]).await else {
        return;
    };
    // Routed (a slot that does not exist is the naive design's 409).
    s.api
        .post_json(
            "/api/booking/baseline/registrations",
            &json!({"placeId": 1, "day": "2030-01-01", "timeSlot": 0}),
        )
        .await
        .assert_error(409, "slot_taken");
    drop(s);
    let Some(s) = TestServer::start_bench_child(kind, "voting", &[]).await else {
        return;
    };
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
    assert!(!run(&["--help"]).contains("bench-server"));
    let child = run(&["bench-server", "--help"]);
    assert!(child.contains("--listen"), "{child}");
}
