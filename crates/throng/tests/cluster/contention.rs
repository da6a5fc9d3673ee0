//! Contention through the balancer: racing clients spread over three nodes
//! by HAProxy's round robin meet in the one store.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::helpers::{person, seed_with_cli_and, store_flags, throng_bin, PgDb, FROM};
use crate::lb::{pg_admin_url_or_fail, start_nodes, Haproxy};

const NODES: usize = 3;
const CLIENTS: usize = 200;
const SLOTS: i64 = 10;
/// Clients racing for one slot of [`SEATS`] seats (place 2's slots).
const RACERS: usize = 50;
const SEATS: usize = 3;
const VOTERS: i64 = 60;
const DISTRICTS: i64 = 3;

async fn seed_voting(data_dir: &std::path::Path, pg_url: &str) {
    let mut args: Vec<String> = vec!["seed".into()];
    args.extend(store_flags(data_dir, Some(pg_url)));
    for a in [
        "voting",
        "--voters",
        &VOTERS.to_string(),
        "--districts",
        &DISTRICTS.to_string(),
        "--parties",
        "3",
        "--candidates-per-party",
        "5",
    ] {
        args.push(a.to_string());
    }
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(throng_bin())
            .args(&args)
            .env("RUST_LOG", "warn")
            .output(),
    )
    .await
    .expect("seed voting in time")
    .unwrap();
    assert!(
        out.status.success(),
        "seed voting: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(throng_cluster_tests),
    ignore = "needs haproxy and THRONG_TEST_PG_URL when the tests were built (apt-get install haproxy; scripts/test finds a local PostgreSQL)"
)]
async fn racing_clients_through_the_balancer() {
    let _serial = crate::lb::one_at_a_time().await;
    let admin = pg_admin_url_or_fail();
    let db = PgDb::create(&admin).await;
    let dir = tempfile::TempDir::new().unwrap();
    // Place 1's slots take one person; place 2's take `SEATS`.
    seed_with_cli_and(
        dir.path(),
        Some(&db.url),
        2,
        1,
        SLOTS as i32,
        &["--seats", &SEATS.to_string(), "--seats-every", "2"],
    )
    .await;
    seed_voting(dir.path(), &db.url).await;
    let nodes = start_nodes(
        NODES,
        dir.path(),
        &db.url,
        &[
            "--voting-identity",
            "headers",
            "--voting-mix-ballots-min",
            "1",
            "--voting-mix-interval-ms",
            "50",
        ],
    )
    .await;
    let addrs: Vec<_> = nodes.iter().map(|n| n.addr).collect();
    let lb = Haproxy::start(&addrs, None).await;

    // 200 clients, 10 slots: client i wants slot i % 10, all at once.
    let barrier = Arc::new(tokio::sync::Barrier::new(CLIENTS));
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (api, barrier) = (lb.api.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                api.register(1, FROM, i as i64 % SLOTS, person(i as u64 + 1))
                    .await
            })
        })
        .collect();
    let (mut won, mut lost, mut other) = (0, 0, Vec::new());
    for t in tasks {
        let r = t.await.unwrap();
        match r.status {
            201 => won += 1,
            409 => {
                r.assert_error(409, "slot_full");
                lost += 1
            }
            _ => other.push(format!("{} {}", r.status, r.text())),
        }
    }
    assert!(other.is_empty(), "only 201 and 409: {other:?}");
    assert_eq!((won, lost), (SLOTS as usize, CLIENTS - SLOTS as usize));
    // Every node took part, and every node sees the 10 taken.
    for (i, n) in nodes.iter().enumerate() {
        assert!(
            lb.sessions(&format!("n{}", i + 1)).await > 0,
            "node {i} got traffic"
        );
        assert_eq!(n.api.taken_slots(1, FROM, 1).await.len(), SLOTS as usize);
    }
    println!("FIGURE contention booking: {CLIENTS} clients, {SLOTS} slots, {NODES} nodes: {won} x 201, {lost} x 409, 0 other");

    // 50 clients, one slot of 3 seats: exactly 3 get a seat.
    let barrier = Arc::new(tokio::sync::Barrier::new(RACERS));
    let tasks: Vec<_> = (0..RACERS)
        .map(|i| {
            let (api, barrier) = (lb.api.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                api.register(2, FROM, 0, person(10_000 + i as u64)).await
            })
        })
        .collect();
    let (mut seated, mut full, mut other) = (0, 0, Vec::new());
    for t in tasks {
        let r = t.await.unwrap();
        match r.status {
            201 => seated += 1,
            409 => {
                r.assert_error(409, "slot_full");
                full += 1
            }
            _ => other.push(format!("{} {}", r.status, r.text())),
        }
    }
    assert!(other.is_empty(), "only 201 and 409: {other:?}");
    assert_eq!((seated, full), (SEATS, RACERS - SEATS));
    for n in &nodes {
        assert_eq!(
            n.api.taken_slots(2, FROM, 1).await,
            vec![(FROM.to_string(), 0)],
            "the slot is full on every node"
        );
    }
    println!("FIGURE contention seats: {RACERS} clients, one slot of {SEATS} seats, {NODES} nodes: {seated} x 201, {full} x 409, 0 other");

    // One voter votes on every node at once (round robin: each node gets
    // a third of the 60 requests): one vote is counted.
    let voter = 7i64;
    let district = throng::services::voting::seed::district_of(1, voter, DISTRICTS);
    const VOTES: usize = 60;
    // Each request a ballot of its own, sealed to the election's key as the
    // vote page seals it.
    use throng::services::voting::ballot;
    let sealed_to = lb
        .api
        .get(&format!(
            "/api/voting/elections/1/districts/{district}/ballot"
        ))
        .await
        .json()["sealTo"]["publicKey"]
        .as_str()
        .expect("the election has a key")
        .to_string();
    let key = ballot::from_b64(&sealed_to).unwrap();
    let barrier = Arc::new(tokio::sync::Barrier::new(VOTES));
    let tasks: Vec<_> = (0..VOTES)
        .map(|i| {
            let (api, barrier) = (lb.api.clone(), barrier.clone());
            let choice = ballot::Choice {
                list: 1 + (i % 3) as u8,
                candidates: vec![],
            };
            let sealed =
                ballot::seal(&key, 1, district, &choice.encode(), &mut rand::rngs::OsRng).unwrap();
            tokio::spawn(async move {
                barrier.wait().await;
                let req = api
                    .http
                    .post(api.url("/api/voting/elections/1/votes"))
                    .header("voter-id", voter.to_string())
                    .header("election-district-id", district.to_string())
                    .json(&json!({ "sealed": ballot::b64(&sealed) }));
                api.send(req).await
            })
        })
        .collect();
    let (mut won, mut other) = (0, Vec::new());
    for t in tasks {
        let r = t.await.unwrap();
        match r.status {
            201 => won += 1,
            409 => {
                r.assert_error(409, "already_voted");
            }
            _ => other.push(format!("{} {}", r.status, r.text())),
        }
    }
    assert!(other.is_empty(), "only 201 and 409: {other:?}");
    assert_eq!(won, 1, "one vote for one voter across {NODES} nodes");
    // On the board once, as every node reports it.
    for n in &nodes {
        crate::lb::wait_for(
            "the ballot on the board",
            Duration::from_secs(30),
            || async {
                let v = n.api.get("/api/voting/elections/1/results").await.json();
                v["ballots"] == 1
            },
        )
        .await;
    }
    let (client, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let marks: i64 = client
        .query_one("SELECT count(*) FROM voting_marks", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(marks, 1, "one mark in the roll");
    println!("FIGURE contention voting: {VOTES} votes of one voter over {NODES} nodes: 1 x 201, {} x 409, 1 ballot on the board", VOTES - 1);
}
