//! A moderator's action on one node reaches every node's page cache within
//! the cache's freshness bound (`comments::cache::FRESH_BOUND`): the
//! listing each node serves from memory stops showing a hidden review.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::{run_throng, store_flags, Api, PgDb};
use crate::lb::{pg_admin_url_or_fail, start_nodes};

const NODES: usize = 3;
const COURSE: i64 = 1;

async fn seed_comments(data_dir: &std::path::Path, pg_url: &str) {
    let mut args: Vec<String> = vec!["seed".into()];
    args.extend(store_flags(data_dir, Some(pg_url)));
    args.extend(
        [
            "comments",
            "--users",
            "200",
            "--courses",
            "3",
            "--comments-per-course",
            "12",
        ]
        .map(String::from),
    );
    let (ok, printed) = run_throng(&args).await;
    assert!(ok, "seed comments: {printed}");
}

/// The review ids of the course's first page as a reader gets it (from the
/// node's page cache when it holds the page).
async fn listed_reviews(api: &Api) -> Vec<i64> {
    let r = api
        .send(api.http.get(api.url(&format!(
            "/api/comments?courseId={COURSE}&size=20&sizeThread=20"
        ))))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
        .as_array()
        .expect("user blocks")
        .iter()
        .flat_map(|b| b["thread"].as_array().cloned().unwrap_or_default())
        .map(|c: Value| c["commentId"].as_i64().expect("commentId"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(throng_cluster_tests),
    ignore = "needs haproxy and THRONG_TEST_PG_URL when the tests were built (apt-get install haproxy; scripts/test finds a local PostgreSQL)"
)]
async fn a_hidden_review_leaves_every_nodes_cache_within_the_bound() {
    let _serial = crate::lb::one_at_a_time().await;
    let admin = pg_admin_url_or_fail();
    let db = PgDb::create(&admin).await;
    let dir = tempfile::TempDir::new().unwrap();
    seed_comments(dir.path(), &db.url).await;
    let nodes = start_nodes(NODES, dir.path(), &db.url, &[]).await;

    // Every node reads the page twice: the second answer is its cache's.
    let mut before = Vec::new();
    for n in &nodes {
        listed_reviews(&n.api).await;
        before = listed_reviews(&n.api).await;
        assert!(!before.is_empty(), "the seeded course lists reviews");
    }
    let target = before[0];

    let r = nodes[0]
        .api
        .send(
            nodes[0]
                .api
                .http
                .post(
                    nodes[0]
                        .api
                        .url(&format!("/api/comments/{target}/moderation")),
                )
                .bearer_auth(nodes[0].admin_token())
                .json(&json!({"action": "hide", "reason": "personal attack"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let answered = Instant::now();

    // Each node, polled until its listing drops the review; bounded.
    let bound = throng::services::comments::cache::FRESH_BOUND;
    let mut seen_after = Vec::new();
    for n in &nodes {
        let gone = loop {
            if !listed_reviews(&n.api).await.contains(&target) {
                break answered.elapsed();
            }
            assert!(
                answered.elapsed() < bound + Duration::from_millis(500),
                "node {} still lists the hidden review {:?} after the moderator's answer",
                n.addr,
                answered.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        seen_after.push(gone);
    }
    // Past the bound, every node's every read leaves it out.
    tokio::time::sleep(bound.saturating_sub(answered.elapsed())).await;
    for n in &nodes {
        assert!(!listed_reviews(&n.api).await.contains(&target));
    }
    println!(
        "FIGURE moderation: a review hidden on one of {NODES} nodes left every node's listing \
         within {:?} of the answer (per node: {seen_after:?}; bound {bound:?})",
        seen_after.iter().max().unwrap()
    );
}
