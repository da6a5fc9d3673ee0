//! Voting through a real server on both stores: every rule and error code
//! in both identity modes (nothing written on any error), sealed ballots
//! and their trackers on the public board, one vote per voter under a
//! crowd (and across two nodes on PostgreSQL), turnout and its live
//! stream, and durability under SIGKILL. (The secret ballot against the
//! operator and the trustees' opening: `voting_secrecy.rs`.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::{
    count, query, store_flags, throng_bin, Api, PgDb, ProcessServer, Reply, StoreKind, TestServer,
};
use throng::platform::auth::Role;
use throng::services::voting::ballot;
use throng::services::voting::http::{Ballot, Cast, ElectionDetail, ElectionList, Results};
use throng::services::voting::seed::{candidate_id, district_of, SeedVotingArgs};
use throng::store::Columns;
use throng::store::Store;

both_stores!(
    elections_and_ballots,
    votes_in_headers_mode,
    votes_in_token_mode,
    one_vote_among_200_concurrent,
    bad_input_writes_nothing,
    turnout_moves_with_the_board_and_streams_it,
    closed_elections_refuse_votes,
    demo_voter_only_with_demo,
    baseline_routes_only_on_the_bench_child,
    every_tracker_on_the_board_after_sigkill,
    results_carry_turnout_update_time_and_colors,
    streams_are_capped_per_client_and_end_at_their_lifetime,
    sigterm_ends_every_stream_within_the_drain,
);
crate::postgres_only!(one_vote_across_two_nodes);

const VOTERS: i64 = 600;
const DISTRICTS: i64 = 3;
const PARTIES: i64 = 3;
const CANDIDATES: i64 = 5;
const HEADERS_MODE: &[&str] = &[
    "--voting-identity",
    "headers",
    "--voting-mix-ballots-min",
    "1",
    "--voting-mix-interval-ms",
    "20",
    "--voting-board-period-ms",
    "50",
];
const WAIT: Duration = Duration::from_secs(20);

fn seed_args() -> SeedVotingArgs {
    SeedVotingArgs {
        voters: VOTERS,
        districts: DISTRICTS,
        parties: PARTIES,
        candidates_per_party: CANDIDATES,
        candidates_per_vote_max: 4,
        election: 1,
        name: Some("Test election".into()),
        opens_at: None,
        closes_at: None,
        force: false,
        voters_csv: None,
        trustees_out: None,
    }
}

fn district(voter: i64) -> i64 {
    district_of(1, voter, DISTRICTS)
}

fn cand(d: i64, party: i64, pos: i64) -> i64 {
    candidate_id(&seed_args(), d, party, pos)
}

/// A server with the test election seeded (and loaded by its seed watcher).
async fn start(kind: StoreKind, flags: &[&str], args: SeedVotingArgs) -> TestServer {
    let s = TestServer::start(kind, flags).await;
    throng::services::voting::seed::seed(&s.state.store, &args, false)
        .await
        .expect("seed voting");
    wait_until(|| async { s.api.get("/api/voting/elections/1").await.status == 200 }).await;
    s
}

async fn wait_until<F, Fut>(f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    wait_until_within(WAIT, f).await
}

/// After a SIGKILL the killed process's leases on the mixer and the
/// projector (15 s, renewed every 5 s) must run out before the restarted
/// node takes them (it retries every 5 s): up to ~20 s before its first
/// round, more under load.
const WAIT_AFTER_KILL: Duration = Duration::from_secs(45);

async fn wait_until_within<F, Fut>(limit: Duration, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !f().await {
        assert!(started.elapsed() < limit, "timed out waiting");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn vote_request(
    api: &Api,
    election: i64,
    voter: Option<&str>,
    district: Option<&str>,
    body: &Value,
    token: Option<&str>,
) -> reqwest::RequestBuilder {
    let mut req = api
        .http
        .post(api.url(&format!("/api/voting/elections/{election}/votes")))
        .json(body);
    if let Some(v) = voter {
        req = req.header("voter-id", v);
    }
    if let Some(d) = district {
        req = req.header("election-district-id", d);
    }
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req
}

/// A vote as the page casts it: `{partyId, candidateIds}` sealed to the
/// election's key (other bodies as they are).
async fn vote(api: &Api, voter: i64, district: i64, body: &Value) -> Reply {
    let body = sealed(api, district, body).await;
    api.send(vote_request(
        api,
        1,
        Some(&voter.to_string()),
        Some(&district.to_string()),
        &body,
        None,
    ))
    .await
}

/// `body` sealed for `district` of election 1.
async fn sealed(api: &Api, district: i64, body: &Value) -> Value {
    crate::sealing::sealed_body(api, 1, district, body).await
}

fn body(d: i64, party: i64, positions: &[i64]) -> Value {
    json!({ "partyId": party, "candidateIds": positions.iter().map(|p| cand(d, party, *p)).collect::<Vec<_>>() })
}

/// Voters marked as voted: on SQLite the marks not yet folded plus the
/// bits set in `voting_marks_bits`.
async fn marks(store: &Store) -> i64 {
    let by_voter = count(store, "SELECT COUNT(*) FROM voting_marks").await;
    if store.writers() == throng::store::Writers::Shared {
        return by_voter;
    }
    let rows = query(store, "SELECT bits FROM voting_marks_bits", vec![], |r| {
        r.bytes(0)
    })
    .await;
    let bits: i64 = rows.iter().flatten().map(|b| b.count_ones() as i64).sum();
    by_voter + bits
}

/// (marks, sealed ballots in the box or waiting for the board's period).
async fn written(store: &Store) -> (i64, i64) {
    let marks = marks(store).await;
    let ballots = count(store, "SELECT COUNT(*) FROM voting_ballot_box").await
        + match store.writers() {
            throng::store::Writers::OneProcess => {
                count(store, "SELECT COUNT(*) FROM voting_ballot_intake").await
            }
            throng::store::Writers::Shared => 0,
        };
    (marks, ballots)
}

async fn results(api: &Api, query: &str) -> Value {
    let r = api
        .get(&format!("/api/voting/elections/1/results{query}"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let typed: Results = r.body();
    assert_eq!(typed.election_id, 1);
    r.json()
}

/// Waits until `ballots` ballots are on the board.
async fn wait_counted(api: &Api, ballots: i64) {
    wait_until(|| async { results(api, "").await["ballots"] == ballots }).await;
}

fn voter_token(
    s: &TestServer,
    voter: i64,
    district: i64,
    election: Option<i64>,
    role: Role,
) -> String {
    let mut claims = serde_json::Map::new();
    claims.insert("district".into(), district.into());
    if let Some(e) = election {
        claims.insert("election".into(), e.into());
    }
    s.state
        .keys
        .issue_with(&voter.to_string(), role, 600, claims)
}

// ---------------------------------------------------------------- reads

async fn elections_and_ballots(kind: StoreKind) {
    let s = start(kind, HEADERS_MODE, seed_args()).await;
    let api = &s.api;
    let v: ElectionList = api.get("/api/voting/elections").await.body();
    let e = &v.elections[0];
    assert_eq!(
        (e.election_id, e.open, e.candidates_per_vote_max),
        (1, true, 4)
    );
    assert!(e.opens_at.ends_with('Z') && e.closes_at.ends_with('Z'));
    let v: ElectionDetail = api.get("/api/voting/elections/1").await.body();
    assert_eq!((v.election_id, &v.name), (1, &e.name));
    assert_eq!(v.districts.len() as i64, DISTRICTS);
    let total: i64 = v.districts.iter().map(|d| d.voters).sum();
    assert_eq!(total, VOTERS);
    api.get("/api/voting/elections/2")
        .await
        .assert_error(404, "election_not_found");
    api.get("/api/voting/elections/0")
        .await
        .assert_error(404, "election_not_found");
    api.get("/api/voting/elections/x")
        .await
        .assert_error(400, "invalid_path");

    let r = api.get("/api/voting/elections/1/districts/2/ballot").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["cache-control"], "public, max-age=60");
    let etag = r.headers["etag"].to_str().unwrap().to_string();
    let typed: Ballot = r.body();
    assert_eq!((typed.election_id, typed.district_id), (1, 2));
    assert_eq!(typed.parties.len() as i64, PARTIES);
    assert_eq!(typed.parties[0].candidates[0].list_position, 1);
    let b = r.json();
    let parties = b["parties"].as_array().unwrap();
    assert_eq!(parties.len() as i64, PARTIES);
    assert_eq!(parties[0]["candidates"][0]["candidateId"], cand(2, 1, 1));
    assert_eq!(parties[0]["candidates"][0]["listPosition"], 1);
    let r = api
        .send(
            api.http
                .get(api.url("/api/voting/elections/1/districts/2/ballot"))
                .header("if-none-match", &etag),
        )
        .await;
    assert_eq!(r.status, 304);
    assert!(r.body.is_empty());
    assert_eq!(r.headers["vary"], "accept-encoding");
    // A browser's Accept-Encoding gets the same ballot gzip-compressed, under
    // its own ETag; a client that refuses gzip gets it plain.
    let gz_get = |accept: &'static str, if_none_match: Option<String>| {
        let mut rb = api
            .http
            .get(api.url("/api/voting/elections/1/districts/2/ballot"))
            .header("accept-encoding", accept);
        if let Some(tag) = if_none_match {
            rb = rb.header("if-none-match", tag);
        }
        api.send(rb)
    };
    let gz = gz_get("gzip, deflate, br, zstd", None).await;
    assert_eq!(gz.status, 200);
    assert_eq!(gz.headers["content-encoding"], "gzip");
    assert_eq!(gz.headers["vary"], "accept-encoding");
    let gz_etag = gz.headers["etag"].to_str().unwrap().to_string();
    assert_ne!(gz_etag, etag);
    let mut plain = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&gz.body[..]), &mut plain)
        .unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&plain).unwrap(),
        b
    );
    assert!(
        gz.body.len() * 2 < plain.len(),
        "{} of {} bytes",
        gz.body.len(),
        plain.len()
    );
    assert_eq!(gz_get("gzip", Some(gz_etag.clone())).await.status, 304);
    // The plain ETag does not stand for the gzip body, nor the other way.
    assert_eq!(gz_get("gzip", Some(etag.clone())).await.status, 200);
    let refused = gz_get("gzip;q=0, br", Some(gz_etag)).await;
    assert_eq!(refused.status, 200);
    assert!(refused.headers.get("content-encoding").is_none());
    assert_eq!(refused.json(), b);
    let other = api.get("/api/voting/elections/1/districts/1/ballot").await;
    assert_ne!(other.headers["etag"].to_str().unwrap(), etag);
    api.get("/api/voting/elections/1/districts/9/ballot")
        .await
        .assert_error(404, "district_not_found");
    api.get("/api/voting/elections/7/districts/1/ballot")
        .await
        .assert_error(404, "election_not_found");
}

// ---------------------------------------------------------------- votes

async fn votes_in_headers_mode(kind: StoreKind) {
    let s = start(kind, HEADERS_MODE, seed_args()).await;
    let (api, store) = (&s.api, &s.state.store);
    let (v, d) = (1, district(1));
    let other_district = d % DISTRICTS + 1;
    // Every refusal first; nothing may be written.
    vote(api, v, 9, &body(d, 1, &[]))
        .await
        .assert_error(404, "district_not_found");
    vote(api, VOTERS + 1, d, &body(d, 1, &[]))
        .await
        .assert_error(404, "voter_not_found");
    vote(api, v, other_district, &body(other_district, 1, &[]))
        .await
        .assert_error(403, "not_on_roll");
    let r = api
        .send(vote_request(
            api,
            2,
            Some("1"),
            Some(&d.to_string()),
            &body(d, 1, &[]),
            None,
        ))
        .await;
    r.assert_error(404, "election_not_found");
    // What the server can check of a sealed ballot: its size. (What it
    // holds, a party off the ballot or too many candidates, only the
    // opening can see, and counts spoiled: voting_secrecy.rs.)
    vote(api, v, d, &json!({ "sealed": ballot::b64(&[7u8; 79]) }))
        .await
        .assert_error(422, "invalid_sealed_ballot");
    vote(api, v, d, &json!({ "sealed": ballot::b64(&[7u8; 81]) }))
        .await
        .assert_error(422, "invalid_sealed_ballot");
    vote(api, v, d, &json!({ "sealed": "not base64!" }))
        .await
        .assert_error(422, "invalid_sealed_ballot");
    // A choice in clear is not a vote.
    let clear = api
        .send(vote_request(
            api,
            1,
            Some(&v.to_string()),
            Some(&d.to_string()),
            &json!({ "partyId": 1, "candidateIds": [] }),
            None,
        ))
        .await;
    clear.assert_error(422, "invalid_field");
    vote(api, v, d, &json!({ "sealed": 5 }))
        .await
        .assert_error(422, "invalid_field");
    vote(api, v, d, &json!({}))
        .await
        .assert_error(422, "invalid_field");
    assert_eq!(written(store).await, (0, 0), "nothing written on any error");

    // A vote, then its repeat. Its tracker is SHA-256 of the sealed bytes,
    // which the voter's page computes itself.
    let body_sealed = sealed(api, d, &body(d, 2, &[3, 1])).await;
    let r = api
        .send(vote_request(
            api,
            1,
            Some(&v.to_string()),
            Some(&d.to_string()),
            &body_sealed,
            None,
        ))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let cast: Cast = r.body();
    let bytes = ballot::from_b64(body_sealed["sealed"].as_str().unwrap()).unwrap();
    assert_eq!(cast.tracker, ballot::tracker_text(&ballot::tracker(&bytes)));
    assert_eq!((cast.election_id, cast.district_id), (1, d));
    let id = cast.tracker.as_str();
    let board_url = format!("/api/voting/elections/1/districts/{d}/board/{id}");
    assert_eq!(r.headers["location"], board_url.as_str());
    assert_eq!(cast.board_url, board_url);
    vote(api, v, d, &body(d, 1, &[]))
        .await
        .assert_error(409, "already_voted");
    // Another voter of the district casting a copy of that sealed ballot
    // (to vote as someone else did) is refused, while it waits for the
    // board and once it is on it.
    let copier = (1..VOTERS).find(|x| *x != v && district(*x) == d).unwrap();
    let copy = || {
        api.send(vote_request(
            api,
            1,
            Some(&copier.to_string()),
            Some(&d.to_string()),
            &body_sealed,
            None,
        ))
    };
    copy().await.assert_error(409, "ballot_copied");
    // A vote without candidates is a party vote.
    assert_eq!(
        vote(api, 2, district(2), &json!({ "partyId": 3 }))
            .await
            .status,
        201
    );
    wait_counted(api, 2).await;
    copy().await.assert_error(409, "ballot_copied");
    assert_eq!(written(store).await, (2, 2));
    // On the board after its period: found by the voter's district.
    let r = api.get(&board_url).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["tracker"], id);
    assert!(r.json()["period"].as_i64().unwrap() >= 1);
    let page = api
        .get(&format!("/api/voting/elections/1/districts/{d}/board"))
        .await
        .json();
    assert!(page["trackers"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["tracker"] == id));
    let other = d % DISTRICTS + 1;
    api.get(&format!(
        "/api/voting/elections/1/districts/{other}/board/{id}"
    ))
    .await
    .assert_error(404, "tracker_not_on_board");
    let unknown = ballot::tracker_text(&ballot::tracker(b"never cast"));
    api.get(&format!(
        "/api/voting/elections/1/districts/{d}/board/{unknown}"
    ))
    .await
    .assert_error(404, "tracker_not_on_board");
    api.get(&format!(
        "/api/voting/elections/1/districts/{d}/board/not-a-tracker"
    ))
    .await
    .assert_error(400, "invalid_path");
    api.get(&format!("/api/voting/elections/2/districts/{d}/board/{id}"))
        .await
        .assert_error(404, "election_not_found");
}

async fn votes_in_token_mode(kind: StoreKind) {
    let s = start(kind, &["--voting-mix-ballots-min", "1"], seed_args()).await;
    let (api, store) = (&s.api, &s.state.store);
    let (v, d) = (5, district(5));
    let (vs, ds) = (v.to_string(), d.to_string());
    let b = sealed(api, d, &body(d, 1, &[1])).await;
    let send = |token: Option<String>| {
        let req = vote_request(api, 1, Some(&vs), Some(&ds), &b, token.as_deref());
        api.send(req)
    };
    send(None).await.assert_error(401, "missing_token");
    send(Some("not.a.jwt".into()))
        .await
        .assert_error(401, "invalid_token");
    let r = api
        .send(
            vote_request(api, 1, Some(&vs), Some(&ds), &b, None)
                .header("authorization", "Basic abc"),
        )
        .await;
    r.assert_error(401, "invalid_token");
    // Expired: signed with the server's secret, exp an hour ago.
    let secret = throng::platform::secrets::Secrets::load_or_create(&s.data_dir)
        .unwrap()
        .token_secret;
    let now = (throng::base::clock::now_ms() / 1000) as u64;
    let expired = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({ "sub": vs, "role": "voter", "district": d, "iat": now - 7200, "exp": now - 3600 }),
        &jsonwebtoken::EncodingKey::from_secret(&secret),
    )
    .unwrap();
    send(Some(expired)).await.assert_error(401, "token_expired");
    // A token without the district claim is not a voter token.
    send(Some(s.state.keys.issue(
        &vs,
        throng::services::voting::VOTER,
        600,
    )))
    .await
    .assert_error(401, "invalid_token");
    send(Some(voter_token(
        &s,
        v + 1,
        district(v + 1),
        Some(1),
        throng::services::voting::VOTER,
    )))
    .await
    .assert_error(403, "identity_mismatch");
    send(Some(voter_token(
        &s,
        v,
        d % DISTRICTS + 1,
        Some(1),
        throng::services::voting::VOTER,
    )))
    .await
    .assert_error(403, "identity_mismatch");
    send(Some(voter_token(
        &s,
        v,
        d,
        Some(2),
        throng::services::voting::VOTER,
    )))
    .await
    .assert_error(403, "identity_mismatch");
    send(Some(voter_token(&s, v, d, Some(1), Role::ADMIN)))
        .await
        .assert_error(403, "identity_mismatch");
    assert_eq!(written(store).await, (0, 0));
    let r = send(Some(voter_token(
        &s,
        v,
        d,
        Some(1),
        throng::services::voting::VOTER,
    )))
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    // A token must name its election: one without would vote in every one.
    let (v2, d2) = (6, district(6));
    let msg = api
        .send(vote_request(
            api,
            1,
            Some("6"),
            Some(&d2.to_string()),
            &sealed(api, d2, &body(d2, 1, &[])).await,
            Some(&voter_token(
                &s,
                v2,
                d2,
                None,
                throng::services::voting::VOTER,
            )),
        ))
        .await
        .assert_error(403, "identity_mismatch");
    assert!(msg.contains("names no election"), "{msg}");
    assert_eq!(written(store).await.0, 1, "only the first vote");
    send(Some(voter_token(
        &s,
        v,
        d,
        Some(1),
        throng::services::voting::VOTER,
    )))
    .await
    .assert_error(409, "already_voted");
    // `throng token --claim` issues the same tokens.
    let out = std::process::Command::new(throng_bin())
        .args([
            "token",
            "--sub",
            "7",
            "--role",
            "voter",
            "--claim",
            &format!("district={}", district(7)),
            "--claim",
            "election=1",
            "--data-dir",
        ])
        .arg(&s.data_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    // ... and refuses a voter token without its election.
    let refused = std::process::Command::new(throng_bin())
        .args([
            "token",
            "--sub",
            "7",
            "--role",
            "voter",
            "--claim",
            "district=1",
            "--data-dir",
        ])
        .arg(&s.data_dir)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--claim election="),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let r = api
        .send(vote_request(
            api,
            1,
            Some("7"),
            Some(&district(7).to_string()),
            &sealed(api, district(7), &body(district(7), 2, &[])).await,
            Some(&token),
        ))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
}

async fn one_vote_among_200_concurrent(kind: StoreKind) {
    let s = start(kind, HEADERS_MODE, seed_args()).await;
    let d = district(42);
    let (wins, other) = race(std::slice::from_ref(&s.api), 42, d, 200).await;
    assert_eq!(wins, 1, "exactly one 201; others: {other:?}");
    wait_counted(&s.api, 1).await;
    assert_eq!(written(&s.state.store).await, (1, 1));
}

/// 200 concurrent votes for one voter spread over `apis`: (201s, non-409 answers).
async fn race(apis: &[Api], voter: i64, d: i64, n: usize) -> (usize, Vec<String>) {
    let barrier = Arc::new(tokio::sync::Barrier::new(n));
    let mut tasks = Vec::new();
    for i in 0..n {
        let (api, barrier) = (apis[i % apis.len()].clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            vote(&api, voter, d, &body(d, 1 + (i as i64 % PARTIES), &[])).await
        }));
    }
    let (mut wins, mut other) = (0, Vec::new());
    for t in tasks {
        let r = t.await.unwrap();
        match r.status {
            201 => wins += 1,
            409 => assert_eq!(r.error_code().as_deref(), Some("already_voted")),
            _ => other.push(format!("{} {}", r.status, r.text())),
        }
    }
    (wins, other)
}

async fn one_vote_across_two_nodes(_kind: StoreKind) {
    let db = PgDb::fresh().await;
    let dir = tempfile::TempDir::new().unwrap();
    seed_with_cli(dir.path(), Some(&db.url), VOTERS).await;
    let flags = [
        "--voting-identity",
        "headers",
        "--voting-mix-ballots-min",
        "1",
        "--voting-board-period-ms",
        "50",
    ];
    let (a, b) = tokio::join!(
        ProcessServer::start(dir.path(), Some(&db.url), &flags),
        ProcessServer::start(dir.path(), Some(&db.url), &flags),
    );
    for voter in [11, 12, 13] {
        let (wins, other) =
            race(&[a.api.clone(), b.api.clone()], voter, district(voter), 200).await;
        assert!(other.is_empty(), "{other:?}");
        assert_eq!(wins, 1, "one 201 across two nodes for voter {voter}");
    }
    // Both nodes show the three ballots on the board (one runs its
    // periods, both read it).
    wait_counted(&a.api, 3).await;
    wait_counted(&b.api, 3).await;
}

/// `throng seed voting` with the test sizes.
async fn seed_with_cli(data_dir: &std::path::Path, pg_url: Option<&str>, voters: i64) {
    let mut args: Vec<String> = vec!["seed".into()];
    args.extend(store_flags(data_dir, pg_url));
    args.extend(
        [
            "voting",
            "--voters",
            &voters.to_string(),
            "--districts",
            &DISTRICTS.to_string(),
            "--parties",
            &PARTIES.to_string(),
            "--candidates-per-party",
            &CANDIDATES.to_string(),
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let out = tokio::process::Command::new(throng_bin())
        .args(&args)
        .env("RUST_LOG", "warn")
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "seed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---------------------------------------------------------------- bad input

async fn bad_input_writes_nothing(kind: StoreKind) {
    let s = start(kind, HEADERS_MODE, seed_args()).await;
    let (api, store) = (&s.api, &s.state.store);
    let d = district(3);
    let ds = d.to_string();
    let ok = sealed(api, d, &body(d, 1, &[1])).await;
    let i64_past = "9223372036854775808";
    for (voter, dist) in [
        (None, Some(ds.as_str())),
        (Some("3"), None),
        (Some("0"), Some(ds.as_str())),
        (Some("-3"), Some(ds.as_str())),
        (Some(i64_past), Some(ds.as_str())),
        (Some("3"), Some(i64_past)),
        (Some("3"), Some("0")),
        (Some("abc"), Some(ds.as_str())),
        (Some("3.0"), Some(ds.as_str())),
        (Some(""), Some(ds.as_str())),
        (Some("3, 4"), Some(ds.as_str())),
    ] {
        let r = api.send(vote_request(api, 1, voter, dist, &ok, None)).await;
        let msg = r.assert_error(400, "invalid_header");
        assert!(
            msg.contains("voter-id") || msg.contains("election-district-id"),
            "{msg}"
        );
    }
    // Two voter-id headers.
    let r = api
        .send(vote_request(api, 1, Some("3"), Some(&ds), &ok, None).header("voter-id", "4"))
        .await;
    r.assert_error(400, "invalid_header");
    // Path ids out of range.
    let r = api
        .send(vote_request(api, 1, Some("3"), Some(&ds), &ok, None))
        .await;
    assert_eq!(r.status, 201, "the control vote: {}", r.text());
    let path = |e: &str| api.url(&format!("/api/voting/elections/{e}/votes"));
    for e in ["-1", "0", i64_past, "1e3"] {
        let r = api
            .send(
                api.http
                    .post(path(e))
                    .header("voter-id", "4")
                    .header("election-district-id", district(4).to_string())
                    .json(&body(district(4), 1, &[])),
            )
            .await;
        assert!(matches!(r.status, 400 | 404), "{e}: {}", r.text());
        r.assert_envelope(r.error_code().as_deref().unwrap());
    }
    let (v, d) = (4, district(4));
    let (vs, ds) = (v.to_string(), d.to_string());
    let raw = |bytes: Vec<u8>, ct: Option<&'static str>| {
        let mut req = api
            .http
            .post(api.url("/api/voting/elections/1/votes"))
            .header("voter-id", &vs)
            .header("election-district-id", &ds)
            .body(bytes);
        if let Some(ct) = ct {
            req = req.header("content-type", ct);
        }
        api.send(req)
    };
    let valid = serde_json::to_vec(&sealed(api, d, &body(d, 1, &[1])).await).unwrap();
    raw(valid.clone(), None)
        .await
        .assert_error(415, "unsupported_media_type");
    raw(valid.clone(), Some("text/plain"))
        .await
        .assert_error(415, "unsupported_media_type");
    raw(valid.clone(), Some("application/x-www-form-urlencoded"))
        .await
        .assert_error(415, "unsupported_media_type");
    raw(b"{\"sealed\":\"AAAA".to_vec(), Some("application/json"))
        .await
        .assert_error(400, "malformed_json");
    raw(b"[]".to_vec(), Some("application/json"))
        .await
        .assert_error(422, "invalid_field");
    raw(br#"{"sealed":null}"#.to_vec(), Some("application/json"))
        .await
        .assert_error(422, "invalid_field");
    raw(br#"{"sealed":["a"]}"#.to_vec(), Some("application/json"))
        .await
        .assert_error(422, "invalid_field");
    let huge = "A".repeat(2_000_000);
    let r = raw(
        serde_json::to_vec(&json!({ "sealed": huge })).unwrap(),
        Some("application/json"),
    )
    .await;
    assert_eq!(r.status, 413, "{}", r.text());
    wait_counted(api, 1).await;
    assert_eq!(
        written(store).await,
        (1, 1),
        "only the control vote was written"
    );
}

// ---------------------------------------------------------------- results

async fn turnout_moves_with_the_board_and_streams_it(kind: StoreKind) {
    let s = start(kind, HEADERS_MODE, seed_args()).await;
    let api = &s.api;
    let empty = results(api, "").await;
    assert_eq!(
        (empty["ballots"].as_i64(), empty.get("ballotsPending")),
        (Some(0), None),
        "no pending figure"
    );
    assert!(empty["districtId"].is_null());

    // A live stream: its first event at once.
    let mut stream = api
        .http
        .get(api.url("/api/voting/elections/1/results/stream?districtId=1"))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    assert!(stream.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let first = next_results_event(&mut stream).await;
    assert_eq!(first["ballots"], 0);

    // Votes; the board shows them a period later, per district.
    let mut per_district: HashMap<i64, i64> = HashMap::new();
    let mut n = 0;
    for voter in 1..=30 {
        let d = district(voter);
        let party = 1 + voter % PARTIES;
        let positions: Vec<i64> = (1..=(voter % 4)).collect();
        assert_eq!(
            vote(api, voter, d, &body(d, party, &positions))
                .await
                .status,
            201
        );
        *per_district.entry(d).or_insert(0) += 1;
        n += 1;
    }
    wait_counted(api, n).await;
    // The stream saw a change, within a bounded wait.
    let started = Instant::now();
    let d1_ballots = per_district.get(&1).copied().unwrap_or(0);
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(5), next_results_event(&mut stream))
            .await
            .expect("an update within 5 s");
        if ev["ballots"] == d1_ballots {
            break;
        }
        assert!(started.elapsed() < WAIT);
    }
    let all = results(api, "").await;
    assert_eq!(all["ballots"], n);
    assert_eq!(all["resultsShown"], false);
    assert_eq!(
        all["parties"],
        json!([]),
        "nobody can count before the opening"
    );
    for d in 1..=DISTRICTS {
        let r = results(api, &format!("?districtId={d}")).await;
        assert_eq!(r["districtId"], d);
        assert_eq!(r["ballots"], per_district.get(&d).copied().unwrap_or(0));
        assert_eq!(r["parties"], json!([]));
    }
    // The board says the same, with a digest per district.
    let board = api.get("/api/voting/elections/1/board").await.json();
    assert_eq!(board["complete"], false);
    for d in board["districts"].as_array().unwrap() {
        let id = d["districtId"].as_i64().unwrap();
        assert_eq!(d["ballots"], per_district.get(&id).copied().unwrap_or(0));
        assert_eq!(d["digest"].as_str().unwrap().len(), 64);
    }
    api.get("/api/voting/elections/1/results?districtId=9")
        .await
        .assert_error(404, "district_not_found");
    api.get("/api/voting/elections/1/results?district=1")
        .await
        .assert_error(400, "invalid_query");
    api.get("/api/voting/elections/5/results/stream")
        .await
        .assert_error(404, "election_not_found");
}

/// The next `event: results` of an SSE response, parsed.
async fn next_results_event(res: &mut reqwest::Response) -> Value {
    let mut buf = String::new();
    loop {
        if let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            if block.lines().any(|l| l == "event: results") {
                let data: String = block
                    .lines()
                    .filter_map(|l| l.strip_prefix("data: "))
                    .collect();
                return serde_json::from_str(&data).unwrap();
            }
            continue;
        }
        let chunk = res.chunk().await.unwrap().expect("the stream stays open");
        buf.push_str(&String::from_utf8_lossy(&chunk));
    }
}

async fn closed_elections_refuse_votes(kind: StoreKind) {
    let mut args = seed_args();
    args.opens_at = Some("2099-01-01T08:00:00Z".into());
    args.closes_at = Some("2099-01-01T20:00:00Z".into());
    let s = start(kind, HEADERS_MODE, args).await;
    let d = district(1);
    let msg = vote(&s.api, 1, d, &body(d, 1, &[]))
        .await
        .assert_error(409, "election_closed");
    assert!(msg.contains("opens at 2099-01-01T08:00:00"), "{msg}");
    let mut args = seed_args();
    args.force = true;
    args.opens_at = Some("2020-01-01T08:00:00Z".into());
    args.closes_at = Some("2020-01-01T20:00:00Z".into());
    throng::services::voting::seed::seed(&s.state.store, &args, false)
        .await
        .unwrap();
    wait_until(|| async {
        s.api.get("/api/voting/elections/1").await.json()["opensAt"]
            .as_str()
            .unwrap()
            .starts_with("2020")
    })
    .await;
    let msg = vote(&s.api, 1, d, &body(d, 1, &[]))
        .await
        .assert_error(409, "election_closed");
    assert!(msg.contains("closed at 2020-01-01T20:00:00"), "{msg}");
    assert_eq!(written(&s.state.store).await, (0, 0));
    // Re-seeding without --force is refused.
    assert!(
        throng::services::voting::seed::seed(&s.state.store, &seed_args(), false)
            .await
            .is_err()
    );
}

async fn demo_voter_only_with_demo(kind: StoreKind) {
    let s = start(kind, HEADERS_MODE, seed_args()).await;
    s.api
        .post_json(
            "/api/voting/demo/voter?electionId=1&districtId=1",
            &json!({}),
        )
        .await
        .assert_error(404, "route_not_found");
    let s = TestServer::start(kind, &["--demo"]).await;
    let api = &s.api;
    let e = api.get("/api/voting/elections/1").await.json();
    assert_eq!(e["name"], "Demo election");
    assert_eq!(e["districts"].as_array().unwrap().len(), 3);
    let r = api
        .send(
            api.http
                .post(api.url("/api/voting/demo/voter?electionId=1&districtId=2")),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["districtId"], 2);
    let ballot = api
        .get("/api/voting/elections/1/districts/2/ballot")
        .await
        .json();
    let party = &ballot["parties"][0];
    let choice = json!({ "partyId": party["partyId"], "candidateIds": [party["candidates"][0]["candidateId"]] });
    let choice = sealed(api, 2, &choice).await;
    let r = api
        .send(vote_request(
            api,
            1,
            Some(&v["voterId"].to_string()),
            Some("2"),
            &choice,
            v["token"].as_str(),
        ))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    // The demo's board shows the vote within its period (1 s), and the
    // tracker is found there.
    let tracker = r.json()["tracker"].as_str().unwrap().to_string();
    wait_until(|| async {
        api.get(&format!(
            "/api/voting/elections/1/districts/2/board/{tracker}"
        ))
        .await
        .status
            == 200
    })
    .await;
    wait_until(|| async { results(api, "").await["ballots"] == 1 }).await;
}

/// A vote through the write-up's design (the bench's `voting/baseline.rs`).
async fn baseline_vote(api: &Api, election: i64, voter: i64, district: i64, body: &Value) -> Reply {
    api.send(
        api.http
            .post(api.url(&format!("/api/voting/baseline/elections/{election}/votes")))
            .header("voter-id", voter.to_string())
            .header("election-district-id", district.to_string())
            .json(body),
    )
    .await
}

async fn baseline_routes_only_on_the_bench_child(kind: StoreKind) {
    let s = start(kind, HEADERS_MODE, seed_args()).await;
    s.api
        .get("/api/voting/baseline/elections/1/districts/1/ballot")
        .await
        .assert_error(404, "route_not_found");
    baseline_vote(&s.api, 1, 1, district(1), &body(district(1), 1, &[1]))
        .await
        .assert_error(404, "route_not_found");
    drop(s);

    let s = TestServer::start_bench_child(kind, "voting", HEADERS_MODE).await;
    throng::services::voting::seed::seed(&s.state.store, &seed_args(), false)
        .await
        .expect("seed voting");
    wait_until(|| async { s.api.get("/api/voting/elections/1").await.status == 200 }).await;
    let (api, store) = (&s.api, &s.state.store);
    // The same ballot JSON as the real endpoint's, read from the database.
    for d in 1..=DISTRICTS {
        let real = api
            .get(&format!("/api/voting/elections/1/districts/{d}/ballot"))
            .await;
        let base = api
            .get(&format!(
                "/api/voting/baseline/elections/1/districts/{d}/ballot"
            ))
            .await;
        assert_eq!((real.status, base.status), (200, 200));
        assert_eq!(base.text(), real.text(), "district {d}");
    }
    api.get("/api/voting/baseline/elections/1/districts/9/ballot")
        .await
        .assert_error(404, "district_not_found");
    api.get("/api/voting/baseline/elections/7/districts/1/ballot")
        .await
        .assert_error(404, "election_not_found");

    let (v, d) = (1, district(1));
    let other_district = d % DISTRICTS + 1;
    baseline_vote(api, 1, v, other_district, &body(other_district, 1, &[1]))
        .await
        .assert_error(403, "not_on_roll");
    baseline_vote(api, 1, VOTERS + 1, d, &body(d, 1, &[1]))
        .await
        .assert_error(404, "voter_not_found");
    baseline_vote(api, 2, v, d, &body(d, 1, &[1]))
        .await
        .assert_error(404, "election_not_found");
    baseline_vote(api, 1, v, d, &json!({ "partyId": 99, "candidateIds": [] }))
        .await
        .assert_error(422, "party_not_on_ballot");
    baseline_vote(
        api,
        1,
        v,
        d,
        &json!({ "partyId": 1, "candidateIds": [cand(d, 2, 1)] }),
    )
    .await
    .assert_error(422, "candidate_not_on_list");
    let r = baseline_vote(api, 1, v, d, &body(d, 1, &[1, 2])).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["receiptId"].as_str().unwrap().len(), 36);
    baseline_vote(api, 1, v, d, &body(d, 2, &[1]))
        .await
        .assert_error(409, "already_voted");
    assert_eq!(
        count(store, "SELECT COUNT(*) FROM voting_baseline_votes").await,
        1
    );
    // Apart from the real design's tables: no mark, no ballot.
    assert_eq!(written(store).await, (0, 0));
}

// ---------------------------------------------------------------- durability

async fn every_tracker_on_the_board_after_sigkill(kind: StoreKind) {
    const CLIENTS: usize = 64;
    let db = match kind {
        StoreKind::Sqlite => None,
        StoreKind::Postgres => Some(PgDb::fresh().await),
    };
    let pg_url = db.as_ref().map(|d| d.url.as_str());
    let dir = tempfile::TempDir::new().unwrap();
    seed_with_cli(dir.path(), pg_url, 20_000).await;
    let voters = 20_000i64;
    // A long board period: most ballots still wait for it at the kill.
    let mut server = ProcessServer::start(
        dir.path(),
        pg_url,
        &[
            "--voting-identity",
            "headers",
            "--voting-board-period-ms",
            "60000",
        ],
    )
    .await;
    let mut ballots_of = Vec::new();
    for d in 1..=DISTRICTS {
        ballots_of.push(crate::sealing::ballot_of(&server.api, 1, d).await);
    }
    let ballots_of = Arc::new(ballots_of);
    let receipts: Arc<Mutex<Vec<(String, i64)>>> = Arc::default();
    let next_voter = Arc::new(std::sync::atomic::AtomicI64::new(1));
    let started = Instant::now();
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let (api, receipts, next_voter) =
            (server.api.clone(), receipts.clone(), next_voter.clone());
        let ballots_of = ballots_of.clone();
        clients.push(tokio::spawn(async move {
            let mut other = Vec::new();
            while started.elapsed() < Duration::from_secs(3) {
                let voter = next_voter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if voter > voters {
                    break;
                }
                let d = district_of(1, voter, DISTRICTS);
                let b = &ballots_of[d as usize - 1];
                let choice = crate::sealing::choice_on(
                    b,
                    1 + voter % PARTIES,
                    &[candidate_id(&seed_args(), d, 1 + voter % PARTIES, 1)],
                );
                let body = json!({ "sealed": crate::sealing::seal_plain(b, &choice.encode()) });
                let req = vote_request(
                    &api,
                    1,
                    Some(&voter.to_string()),
                    Some(&d.to_string()),
                    &body,
                    None,
                );
                match api.try_send(req.timeout(Duration::from_secs(5))).await {
                    Ok(r) if r.status == 201 => receipts
                        .lock()
                        .unwrap()
                        .push((r.json()["tracker"].as_str().unwrap().to_string(), voter)),
                    Ok(r) => other.push(format!("{} {}", r.status, r.text())),
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            }
            other
        }));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before_kill = receipts.lock().unwrap().len();
    server.kill().await;
    for c in clients {
        let other = c.await.unwrap();
        assert!(
            other.is_empty(),
            "only 201 while the server lived: {other:?}"
        );
    }
    assert!(
        before_kill > 10,
        "the load got going ({before_kill}): {}",
        server.log_text()
    );
    let receipts = std::mem::take(&mut *receipts.lock().unwrap());
    let log = server.log_text();
    // Restart with a short period: every acknowledged ballot reaches the
    // board.
    let server = ProcessServer::start(
        dir.path(),
        pg_url,
        &[
            "--voting-identity",
            "headers",
            "--voting-board-period-ms",
            "100",
        ],
    )
    .await;
    let api = &server.api;
    let acknowledged = receipts.len() as i64;
    wait_until_within(WAIT_AFTER_KILL, || async {
        let v = results(api, "").await;
        v["ballots"].as_i64().unwrap() >= acknowledged
    })
    .await;
    let all = results(api, "").await;
    let ballots = all["ballots"].as_i64().unwrap();
    assert!(
        ballots >= receipts.len() as i64,
        "{ballots} < {}",
        receipts.len()
    );
    for (tracker, voter) in &receipts {
        let d = district_of(1, *voter, DISTRICTS);
        let r = api
            .get(&format!(
                "/api/voting/elections/1/districts/{d}/board/{tracker}"
            ))
            .await;
        assert_eq!(r.status, 200, "tracker {tracker}: {}", r.text());
    }
    // No voter counted twice: a second vote of any of them is refused, and
    // the ballots equal the marks.
    for (_, voter) in receipts.iter().take(20) {
        let d = district_of(1, *voter, DISTRICTS);
        vote(api, *voter, d, &body(d, 1, &[]))
            .await
            .assert_error(409, "already_voted");
    }
    let store = open(dir.path(), pg_url).await;
    let (marks, stored) = written(&store).await;
    assert_eq!(marks, stored, "marks = ballots");
    assert_eq!(stored, ballots);
    // The log never names a voter next to anything (no voter ids at all).
    let log = log + &server.log_text();
    for (id, voter) in receipts.iter().take(200) {
        assert!(!log.contains(id.as_str()), "a tracker in the log");
        assert!(
            !log.contains(&format!("voter_id={voter}")) && !log.contains(&format!("voter={voter}")),
            "a voter id in the log"
        );
    }
    assert!(!log.contains("voter_id"), "voter ids are never logged");
    // Headers mode says at start what it trusts.
    assert!(
        log.contains("--voting-identity headers")
            && log.contains("voter-id and election-district-id headers"),
        "a warning names what headers mode trusts"
    );
}

async fn open(dir: &std::path::Path, pg_url: Option<&str>) -> Store {
    let url = match pg_url {
        Some(u) => throng::store::StoreUrl::Postgres(u.to_string()),
        None => throng::store::StoreUrl::Sqlite(dir.join("throng.db")),
    };
    Store::open(&url, Default::default()).await.unwrap()
}

// ---------------------------------------------------------------- live streams

/// Reads an SSE response until its text holds `needle` (true) or the
/// stream ends (false), within `limit`.
async fn read_until(res: &mut reqwest::Response, needle: &str, limit: Duration) -> (bool, String) {
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if text.contains(needle) {
            return (true, text);
        }
        match tokio::time::timeout_at(deadline, res.chunk()).await {
            Ok(Ok(Some(chunk))) => text.push_str(&String::from_utf8_lossy(&chunk)),
            Ok(Ok(None)) | Ok(Err(_)) => return (false, text),
            Err(_) => panic!("no {needle:?} within {limit:?}; read so far:\n{text}"),
        }
    }
}

async fn open_stream(api: &Api, query: &str) -> reqwest::Response {
    api.http
        .get(api.url(&format!("/api/voting/elections/1/results/stream{query}")))
        .send()
        .await
        .unwrap()
}

async fn results_carry_turnout_update_time_and_colors(kind: StoreKind) {
    let s = start(kind, HEADERS_MODE, seed_args()).await;
    let api = &s.api;
    let all = results(api, "").await;
    assert_eq!(all["votersOnRoll"], VOTERS, "{all}");
    assert!(all["updatedAt"].is_null(), "nothing counted yet: {all}");
    let mut roll = 0;
    for d in 1..=DISTRICTS {
        roll += results(api, &format!("?districtId={d}")).await["votersOnRoll"]
            .as_i64()
            .unwrap();
    }
    assert_eq!(
        roll, VOTERS,
        "the districts' rolls add up to the election's"
    );
    assert_eq!(all["resultsShown"], false);
    assert_eq!(
        all["parties"],
        json!([]),
        "no party figure before the opening"
    );
    let before = throng::base::clock::now_ms();
    assert_eq!(
        vote(api, 1, district(1), &body(district(1), 1, &[1]))
            .await
            .status,
        201
    );
    wait_counted(api, 1).await;
    let d = results(api, &format!("?districtId={}", district(1))).await;
    assert_eq!(d["ballots"], 1);
    let at = d["updatedAt"].as_str().expect("updatedAt once counted");
    let at_ms = time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339)
        .unwrap()
        .unix_timestamp_nanos()
        / 1_000_000;
    assert!(
        at_ms as i64 >= before - 1000,
        "{at} is the board period's time"
    );
    assert!(at_ms as i64 <= throng::base::clock::now_ms());
}

async fn streams_are_capped_per_client_and_end_at_their_lifetime(kind: StoreKind) {
    let mut flags = HEADERS_MODE.to_vec();
    flags.extend([
        "--voting-streams-per-client-max",
        "2",
        "--request-timeout-ms",
        "2000",
        "--body-timeout-ms",
        "1000",
    ]);
    let s = start(kind, &flags, seed_args()).await;
    let api = &s.api;
    let mut a = open_stream(api, "").await;
    let b = open_stream(api, "?districtId=1").await;
    assert_eq!((a.status().as_u16(), b.status().as_u16()), (200, 200));
    let refused = api.get("/api/voting/elections/1/results/stream").await;
    let message = refused.assert_error(429, "too_many_client_streams");
    assert!(
        message.contains("/results"),
        "names the fallback: {message}"
    );
    assert_eq!(refused.headers["retry-after"], "10");
    // The refusal holds no slot; a stream closed gives its slot back.
    drop(b);
    let started = Instant::now();
    let _again = loop {
        let r = open_stream(api, "").await;
        if r.status() == 200 {
            break r;
        }
        assert!(
            started.elapsed() < WAIT,
            "the closed stream's slot came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // /results is not a stream and is never capped.
    for _ in 0..5 {
        results(api, "").await;
    }
    // A stream ends by itself after the request timeout, naming why.
    let started = Instant::now();
    let (ended, text) = read_until(&mut a, "event: end", Duration::from_secs(10)).await;
    assert!(ended, "{text}");
    assert!(text.contains("event: results"), "{text}");
    assert!(text.contains(r#"data: {"reason":"lifetime"}"#), "{text}");
    let (more, rest) = read_until(&mut a, "event:", Duration::from_secs(5)).await;
    assert!(!more, "nothing after the end: {rest}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

async fn sigterm_ends_every_stream_within_the_drain(kind: StoreKind) {
    const DRAIN_MS: u64 = 1_500;
    let db = match kind {
        StoreKind::Sqlite => None,
        StoreKind::Postgres => Some(PgDb::fresh().await),
    };
    let pg_url = db.as_ref().map(|d| d.url.as_str());
    let dir = tempfile::TempDir::new().unwrap();
    seed_with_cli(dir.path(), pg_url, 300).await;
    let drain = DRAIN_MS.to_string();
    let mut server = ProcessServer::start(dir.path(), pg_url, &["--drain-ms", &drain]).await;
    let api = server.api.clone();
    let mut results_stream = open_stream(&api, "").await;
    assert_eq!(results_stream.status(), 200);
    let (first, text) = read_until(&mut results_stream, "event: results", WAIT).await;
    assert!(first, "{text}");
    let mut events_stream = api
        .http
        .get(api.url("/api/events/subscribe"))
        .bearer_auth(server.admin_token())
        .send()
        .await
        .unwrap();
    assert_eq!(events_stream.status(), 200);
    // Both streams stay open while the server runs.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let stopped_at = Instant::now();
    server.terminate();
    let (ended, text) = read_until(&mut results_stream, "event: end", Duration::from_secs(5)).await;
    assert!(ended, "{text}");
    assert!(text.contains(r#"data: {"reason":"stopping"}"#), "{text}");
    let (ended, text) =
        read_until(&mut events_stream, ": end stopping", Duration::from_secs(5)).await;
    assert!(ended, "{text}");
    // No new stream while draining: the page polls /results instead.
    let refused = api.get("/api/voting/elections/1/results/stream").await;
    refused.assert_error(503, "draining");
    assert_eq!(
        results(&api, "").await["electionId"],
        1,
        "results still answer"
    );
    let limit = Duration::from_millis(DRAIN_MS) + Duration::from_secs(3);
    let status = server.wait_exit(limit).await;
    assert!(
        status.is_some(),
        "the server did not exit within {limit:?} of SIGTERM with streams open; log:\n{}",
        server.log_text()
    );
    assert!(status.unwrap().success(), "{:?}", status);
    assert!(stopped_at.elapsed() < limit);
    // The clients held their connections to the end.
    drop((results_stream, events_stream));
}
