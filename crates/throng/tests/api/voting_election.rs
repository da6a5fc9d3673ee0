//! An election authority runs its own election, through a real server on
//! both stores: a definition refused with the paths of its problems, a
//! roll of 10,000 imported with its credentials (a bad one importing
//! nothing), voters' logins (right, wrong, unknown, over the limit), every
//! step of the lifecycle with its event (the trustees' key given before the
//! opening, the box exported after the close, opened by the trustees and
//! their results imported), votes refused before the opening, while
//! suspended and after the close, results hidden until published, and each
//! audit export.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::{count, query, Api, Reply, StoreKind, TestServer};
use throng::platform::auth::Role;

both_stores!(
    a_definition_is_checked_with_paths,
    a_roll_of_10000_comes_with_credentials,
    a_bad_roll_imports_nothing,
    logins_right_wrong_unknown_and_limited,
    the_lifecycle_with_its_events_results_and_exports,
);

const FLAGS: &[&str] = &[
    "--voting-mix-ballots-min",
    "1",
    "--voting-mix-interval-ms",
    "20",
];
const WAIT: Duration = Duration::from_secs(20);

fn example(name: &str) -> String {
    let path = format!(
        "{}/../../examples/voting/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The shipped definition, open from an hour ago for `hours` more.
fn definition(hours: i64) -> Value {
    let mut d: Value = serde_json::from_str(&example("election.json")).unwrap();
    let at = |ms: i64| throng::base::clock::rfc3339_ms(ms);
    let now = throng::base::clock::now_ms();
    d["opensAt"] = at(now - 3_600_000).into();
    d["closesAt"] = at(now + hours * 3_600_000).into();
    d
}

fn admin(s: &TestServer) -> String {
    s.token(Role::ADMIN)
}

async fn create(s: &TestServer, d: &Value) -> Reply {
    s.api
        .send(
            s.api
                .http
                .post(s.api.url("/api/voting/elections"))
                .bearer_auth(admin(s))
                .json(d),
        )
        .await
}

async fn created(s: &TestServer, d: &Value) -> i64 {
    let r = create(s, d).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["state"], "draft");
    r.json()["electionId"].as_i64().unwrap()
}

async fn put_roll(s: &TestServer, id: i64, csv: &str) -> Reply {
    s.api
        .send(
            s.api
                .http
                .put(s.api.url(&format!("/api/voting/elections/{id}/roll")))
                .bearer_auth(admin(s))
                .header("content-type", "text/csv")
                .body(csv.to_string()),
        )
        .await
}

/// The credentials a roll import answered, by voter id.
fn credentials(r: &Reply) -> HashMap<String, String> {
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.headers["cache-control"], "no-store");
    let text = r.text();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("voter_id,credential"));
    lines
        .map(|l| {
            let (v, c) = l.split_once(',').unwrap();
            (v.to_string(), c.to_string())
        })
        .collect()
}

async fn step(s: &TestServer, id: i64, action: &str) -> Reply {
    s.api
        .send(
            s.api
                .http
                .post(s.api.url(&format!("/api/voting/elections/{id}/{action}")))
                .bearer_auth(admin(s)),
        )
        .await
}

async fn login(api: &Api, id: i64, voter: &str, credential: &str) -> Reply {
    api.post_json(
        &format!("/api/voting/elections/{id}/login"),
        &json!({"voterId": voter, "credential": credential}),
    )
    .await
}

/// A vote as the page casts it: the choice sealed to the election's key.
async fn vote(api: &Api, id: i64, session: &Value, body: &Value) -> Reply {
    let district = session["districtId"].as_i64().unwrap();
    let body = crate::sealing::sealed_body(api, id, district, body).await;
    let body = &body;
    api.send(
        api.http
            .post(api.url(&format!("/api/voting/elections/{id}/votes")))
            .header("voter-id", session["voterNumber"].to_string())
            .header("election-district-id", session["districtId"].to_string())
            .bearer_auth(session["token"].as_str().unwrap())
            .json(body),
    )
    .await
}

async fn admin_get(s: &TestServer, path: &str) -> Reply {
    s.api
        .send(s.api.http.get(s.api.url(path)).bearer_auth(admin(s)))
        .await
}

async fn state(s: &TestServer, id: i64) -> String {
    let r = s.api.get(&format!("/api/voting/elections/{id}")).await;
    r.json()["state"].as_str().unwrap().to_string()
}

async fn wait_until<F, Fut>(mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !f().await {
        assert!(started.elapsed() < WAIT, "timed out waiting");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn roll_of(n: usize) -> String {
    let mut csv = String::from("voter_id,district\n");
    for i in 1..=n {
        csv.push_str(&format!("V{i:06},{}\n", if i % 3 == 0 { "S" } else { "N" }));
    }
    csv
}

// ---------------------------------------------------------------- cases

async fn a_definition_is_checked_with_paths(kind: StoreKind) {
    let s = TestServer::start(kind, FLAGS).await;
    let mut d = definition(2);
    d["districts"][1]["code"] = "N".into();
    d["parties"][0]["colour"] = "green".into();
    d["districts"][0]["lists"][2]["party"] = "XX".into();
    d["closesAt"] = "yesterday".into();
    let msg = create(&s, &d).await.assert_error(422, "invalid_definition");
    for path in [
        "closesAt:",
        "parties[0].colour:",
        "districts[0].lists[2].party:",
        "districts[1].code:",
    ] {
        assert!(msg.contains(path), "{path} in {msg}");
    }
    // A value of the wrong type: its path.
    let mut d = definition(2);
    d["districts"][1]["name"] = 7.into();
    let msg = create(&s, &d).await.assert_error(422, "invalid_definition");
    assert!(msg.starts_with("districts[1].name:"), "{msg}");
    let mut d = definition(2);
    d["extra"] = 1.into();
    create(&s, &d).await.assert_error(422, "invalid_definition");
    // Only an admin drafts.
    let r = s
        .api
        .send(
            s.api
                .http
                .post(s.api.url("/api/voting/elections"))
                .json(&definition(2)),
        )
        .await;
    r.assert_error(401, "missing_token");
    let r = s
        .api
        .send(
            s.api
                .http
                .post(s.api.url("/api/voting/elections"))
                .bearer_auth(s.token(Role::new("user")))
                .json(&definition(2)),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(
        count(&s.state.store, "SELECT COUNT(*) FROM voting_elections").await,
        0,
        "nothing drafted"
    );
    // Results cannot be live: nobody can count sealed ballots before the
    // trustees open them.
    let mut live = definition(2);
    live["liveResults"] = true.into();
    let r = create(&s, &live).await;
    let msg = r.assert_error(422, "invalid_definition");
    assert!(msg.contains("liveResults"), "{msg}");
    // The shipped definition is a draft with its codes, parties and lists.
    let id = created(&s, &definition(2)).await;
    let e = s
        .api
        .get(&format!("/api/voting/elections/{id}"))
        .await
        .json();
    assert_eq!(e["state"], "draft");
    assert_eq!(e["open"], false);
    assert_eq!(
        e["publicKey"],
        Value::Null,
        "no key until the authority gives it"
    );
    assert_eq!(e["districts"][0]["code"], "N");
    assert_eq!(e["districts"][0]["region"], "Riverside");
    assert_eq!(e["districts"][1]["name"], "South");
    let ballot = s
        .api
        .get(&format!("/api/voting/elections/{id}/districts/2/ballot"))
        .await
        .json();
    assert_eq!(ballot["parties"][1]["name"], "Civic Alliance");
    assert_eq!(
        ballot["parties"][1]["candidates"][2]["name"],
        "Monika Simko"
    );
    assert_eq!(created(&s, &definition(2)).await, id + 1);
}

async fn a_roll_of_10000_comes_with_credentials(kind: StoreKind) {
    let s = TestServer::start(kind, FLAGS).await;
    let id = created(&s, &definition(2)).await;
    let started = Instant::now();
    let creds = credentials(&put_roll(&s, id, &roll_of(10_000)).await);
    eprintln!("imported 10,000 voters in {:?}", started.elapsed());
    assert_eq!(creds.len(), 10_000);
    for c in creds.values() {
        assert_eq!(c.len(), 15, "{c}");
        assert!(!c.contains(['0', 'O', '1', 'l', 'I']), "{c}");
    }
    let distinct: std::collections::HashSet<&String> = creds.values().collect();
    assert_eq!(distinct.len(), 10_000);
    let e = s
        .api
        .get(&format!("/api/voting/elections/{id}"))
        .await
        .json();
    let voters: Vec<i64> = e["districts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["voters"].as_i64().unwrap())
        .collect();
    assert_eq!(voters, [6667, 3333]);
    // Stored: keyed hashes, never a credential.
    let hashes: Vec<Vec<u8>> = query(
        &s.state.store,
        "SELECT credential_hash FROM voting_credentials WHERE election_id = ?1",
        vec![id],
        |r| throng::store::Columns::bytes(r, 0),
    )
    .await;
    assert_eq!(hashes.len(), 10_000);
    assert!(hashes.iter().all(|h| h.len() == 16));
    let c1 = creds["V000001"].clone();
    assert!(!hashes
        .iter()
        .any(|h| h.windows(4).any(|w| w == &c1.as_bytes()[..4])));
    let session = login(&s.api, id, "V000001", &c1).await;
    assert_eq!(session.status, 200, "{}", session.text());
    // Amended while a draft: new credentials, the old ones no longer work.
    let again = credentials(&put_roll(&s, id, &roll_of(9_000)).await);
    assert_eq!(again.len(), 9_000);
    assert_ne!(again["V000001"], c1);
    login(&s.api, id, "V000001", &c1)
        .await
        .assert_error(401, "invalid_credentials");
    assert_eq!(
        login(&s.api, id, "V000001", &again["V000001"]).await.status,
        200
    );
    login(&s.api, id, "V009500", &creds["V009500"])
        .await
        .assert_error(401, "invalid_credentials");
    assert_eq!(
        count(&s.state.store, "SELECT COUNT(*) FROM voting_voters").await,
        9_000
    );
}

async fn a_bad_roll_imports_nothing(kind: StoreKind) {
    let s = TestServer::start(kind, FLAGS).await;
    let id = created(&s, &definition(2)).await;
    let good = example("roll.csv");
    let mut lines: Vec<String> = good.lines().map(str::to_string).collect();
    lines[4] = "RV-00004,EAST".into(); // line 5
    lines[7] = "RV-00002,S".into(); // line 8 repeats line 3
    lines[9] = "RV-00009".into(); // line 10
    let bad = lines.join("\n") + "\n";
    let msg = put_roll(&s, id, &bad)
        .await
        .assert_error(422, "invalid_roll");
    assert!(msg.contains("nothing was imported"), "{msg}");
    assert!(msg.contains("line 5: district \"EAST\""), "{msg}");
    assert!(
        msg.contains("line 8: voter id \"RV-00002\" is on line 3 too"),
        "{msg}"
    );
    assert!(msg.contains("line 10: 2 fields"), "{msg}");
    let msg = put_roll(&s, id, "id,district\nA,N\n")
        .await
        .assert_error(422, "invalid_roll");
    assert!(msg.contains("line 1:"), "{msg}");
    put_roll(&s, id, "voter_id,district\n")
        .await
        .assert_error(422, "invalid_roll");
    let r = s
        .api
        .send(
            s.api
                .http
                .put(s.api.url(&format!("/api/voting/elections/{id}/roll")))
                .bearer_auth(admin(&s))
                .json(&json!({"voter_id": "A"})),
        )
        .await;
    r.assert_error(415, "unsupported_media_type");
    let r = s
        .api
        .send(
            s.api
                .http
                .put(s.api.url(&format!("/api/voting/elections/{id}/roll")))
                .header("content-type", "text/csv")
                .body(good.clone()),
        )
        .await;
    r.assert_error(401, "missing_token");
    put_roll(&s, 99, &good)
        .await
        .assert_error(404, "election_not_found");
    for table in ["voting_voters", "voting_credentials"] {
        let sql: &'static str = Box::leak(format!("SELECT COUNT(*) FROM {table}").into_boxed_str());
        assert_eq!(count(&s.state.store, sql).await, 0, "{table}");
    }
    step(&s, id, "open").await.assert_error(409, "roll_empty");
    // The shipped roll imports.
    assert_eq!(credentials(&put_roll(&s, id, &good).await).len(), 40);
}

async fn logins_right_wrong_unknown_and_limited(kind: StoreKind) {
    let s = TestServer::start(kind, FLAGS).await;
    let id = created(&s, &definition(2)).await;
    let creds = credentials(&put_roll(&s, id, &example("roll.csv")).await);
    let right = &creds["RV-00002"];
    let r = login(
        &s.api,
        id,
        "RV-00002",
        &right.to_lowercase().replace('-', " "),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.headers["cache-control"], "no-store");
    let session = r.json();
    assert_eq!(session["districtId"], 2);
    assert_eq!(session["districtName"], "South");
    assert_eq!(session["voterNumber"], 2);
    let wrong = login(&s.api, id, "RV-00003", right)
        .await
        .assert_error(401, "invalid_credentials");
    let unknown = login(&s.api, id, "NOBODY", right)
        .await
        .assert_error(401, "invalid_credentials");
    assert_eq!(wrong, unknown, "unknown and wrong answer alike");
    login(&s.api, 99, "RV-00002", right)
        .await
        .assert_error(404, "election_not_found");
    // Five attempts a minute per voter id, right or wrong.
    for _ in 0..3 {
        login(&s.api, id, "RV-00005", "AAAA-AAAA-AAAAA")
            .await
            .assert_error(401, "invalid_credentials");
    }
    assert_eq!(
        login(&s.api, id, "RV-00005", &creds["RV-00005"])
            .await
            .status,
        200
    );
    login(&s.api, id, "RV-00005", "AAAA-AAAA-AAAAA")
        .await
        .assert_error(401, "invalid_credentials");
    let r = login(&s.api, id, "RV-00005", &creds["RV-00005"]).await;
    r.assert_error(429, "too_many_attempts");
    let wait: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    // Another voter is not held back by it.
    assert_eq!(
        login(&s.api, id, "RV-00006", &creds["RV-00006"])
            .await
            .status,
        200
    );
    // Per client: 60 a minute over all voter ids.
    let mut limited = false;
    for i in 7..=40 {
        for _ in 0..2 {
            let r = login(&s.api, id, &format!("RV-{i:05}"), "AAAA-AAAA-AAAAA").await;
            if r.status == 429 {
                r.assert_error(429, "too_many_attempts");
                limited = true;
            }
        }
    }
    assert!(limited, "the client's limit applies");
}

async fn the_lifecycle_with_its_events_results_and_exports(kind: StoreKind) {
    let s = TestServer::start(kind, FLAGS).await;
    let api = &s.api;
    let id = created(&s, &definition(2)).await;
    let creds = credentials(&put_roll(&s, id, &example("roll.csv")).await);
    let session = |v: &'static str| {
        let c = creds[v].clone();
        async move { login(api, id, v, &c).await.json() }
    };
    let north = session("RV-00001").await;
    let south = session("RV-00002").await;
    // North: GF 1-3, CA 4-5, SD 6-7; South: GF 8-9, CA 10-12, SD 13.
    let gf_ana = json!({"partyId": 1, "candidateIds": [1]});
    step(&s, id, "publish")
        .await
        .assert_error(409, "invalid_transition");
    // No key, no opening: the trustees' ceremony comes first.
    step(&s, id, "open").await.assert_error(409, "key_missing");
    let trustees = tempfile::TempDir::new().unwrap();
    let ceremony =
        throng::services::voting::trustee::make_key(2, 3, &mut rand::rngs::OsRng).unwrap();
    throng::services::voting::trustee::write_ceremony(trustees.path(), &ceremony).unwrap();
    let put_key = |key: Value| {
        api.send(
            api.http
                .put(api.url(&format!("/api/voting/elections/{id}/key")))
                .bearer_auth(admin(&s))
                .json(&key),
        )
    };
    let mut bad = serde_json::to_value(&ceremony.key).unwrap();
    bad["publicKey"] = "AAAA".into();
    put_key(bad).await.assert_error(422, "invalid_key");
    let r = put_key(serde_json::to_value(&ceremony.key).unwrap()).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["hasKey"], true);
    let opened = step(&s, id, "open").await;
    assert_eq!(opened.status, 200, "{}", opened.text());
    assert_eq!(opened.json()["state"], "open");
    assert_eq!(opened.json()["voters"], 40);
    step(&s, id, "open")
        .await
        .assert_error(409, "invalid_transition");
    put_key(serde_json::to_value(&ceremony.key).unwrap())
        .await
        .assert_error(409, "invalid_transition");
    put_roll(&s, id, &example("roll.csv"))
        .await
        .assert_error(409, "roll_frozen");
    assert_eq!(vote(api, id, &north, &gf_ana).await.status, 201);
    vote(api, id, &north, &gf_ana)
        .await
        .assert_error(409, "already_voted");
    assert_eq!(step(&s, id, "suspend").await.json()["state"], "suspended");
    let s4 = session("RV-00004").await;
    vote(api, id, &s4, &json!({"partyId": 2, "candidateIds": [10]}))
        .await
        .assert_error(409, "election_suspended");
    assert_eq!(step(&s, id, "resume").await.json()["state"], "open");
    assert_eq!(
        vote(
            api,
            id,
            &s4,
            &json!({"partyId": 2, "candidateIds": [10, 11]})
        )
        .await
        .status,
        201
    );
    assert_eq!(
        vote(
            api,
            id,
            &south,
            &json!({"partyId": 2, "candidateIds": [12]})
        )
        .await
        .status,
        201
    );
    // The closing time: only later, not earlier.
    let patch = |closes: String| {
        api.send(
            api.http
                .patch(api.url(&format!("/api/voting/elections/{id}")))
                .bearer_auth(admin(&s))
                .json(&json!({"closesAt": closes})),
        )
    };
    let later = throng::base::clock::rfc3339_ms(throng::base::clock::now_ms() + 5 * 3_600_000);
    let r = patch(later.clone()).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["closesAt"], later);
    patch("2020-01-01T00:00:00Z".into())
        .await
        .assert_error(422, "invalid_field");
    // While open: turnout only, no party figures.
    wait_until(|| async {
        api.get(&format!("/api/voting/elections/{id}/results"))
            .await
            .json()["ballots"]
            == 3
    })
    .await;
    let r = api
        .get(&format!("/api/voting/elections/{id}/results"))
        .await
        .json();
    assert_eq!(r["resultsShown"], false);
    assert_eq!(r["parties"], json!([]));
    assert_eq!(r["districtsReporting"], 2);
    assert_eq!(r["districts"][1]["ballots"], 2);
    assert_eq!(r["districts"][1]["votersOnRoll"], 20);
    let r = api
        .get(&format!("/api/voting/elections/{id}/results?districtId=2"))
        .await
        .json();
    assert_eq!(r["parties"], json!([]));
    // Audit before the close: turnout yes, who voted and results not yet.
    let t = admin_get(&s, &format!("/api/voting/elections/{id}/audit/turnout.csv")).await;
    assert_eq!(t.status, 200);
    assert_eq!(
        t.text(),
        "district,name,voters,ballots\nN,North,20,1\nS,South,20,2\n"
    );
    admin_get(&s, &format!("/api/voting/elections/{id}/audit/voters.csv"))
        .await
        .assert_error(409, "election_not_closed");
    admin_get(
        &s,
        &format!("/api/voting/elections/{id}/audit/results.json"),
    )
    .await
    .assert_error(409, "not_tallied");
    let r = api
        .get(&format!("/api/voting/elections/{id}/audit/log"))
        .await;
    r.assert_error(401, "missing_token");
    // The close: no vote after it.
    assert_eq!(step(&s, id, "close").await.json()["state"], "closed");
    let s6 = session("RV-00006").await;
    assert!(s6.get("token").is_none(), "no login after the close: {s6}");
    let s3 = north.clone();
    vote(api, id, &s3, &gf_ana)
        .await
        .assert_error(409, "election_closed");
    patch(later.clone())
        .await
        .assert_error(409, "invalid_transition");
    // The trustees: the box, opened with 2 of the 3 shares away from the
    // server, checked against the board, imported.
    wait_until(|| async {
        api.get(&format!("/api/voting/elections/{id}/board"))
            .await
            .json()["complete"]
            == true
    })
    .await;
    let board = api
        .get(&format!("/api/voting/elections/{id}/board"))
        .await
        .json();
    let boxed: throng::services::voting::opening::BoxFile =
        admin_get(&s, &format!("/api/voting/elections/{id}/box"))
            .await
            .body();
    assert_eq!(boxed.digest, board["digest"].as_str().unwrap());
    let results = throng::services::voting::opening::open_box_with_shares(
        &boxed,
        &ceremony.shares[1..],
        board["digest"].as_str(),
        &|_| {},
    )
    .unwrap();
    let one = throng::services::voting::opening::open_box_with_shares(
        &boxed,
        &ceremony.shares[..1],
        None,
        &|_| {},
    )
    .map(|_| ())
    .map_err(|e| e.to_string())
    .unwrap_err();
    assert!(one.contains("needs 2"), "one share opens nothing: {one}");
    let r = api
        .send(
            api.http
                .put(api.url(&format!("/api/voting/elections/{id}/results")))
                .bearer_auth(admin(&s))
                .json(&results),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    wait_until(|| async { state(&s, id).await == "tallied" }).await;
    let r = api
        .get(&format!("/api/voting/elections/{id}/results"))
        .await
        .json();
    assert_eq!(r["resultsShown"], false, "tallied, not yet published");
    assert_eq!(r["ballots"], 3);
    let voters = admin_get(&s, &format!("/api/voting/elections/{id}/audit/voters.csv")).await;
    assert_eq!(voters.text(), "voter_id\nRV-00001\nRV-00002\nRV-00004\n");
    let csv = admin_get(&s, &format!("/api/voting/elections/{id}/audit/results.csv")).await;
    let text = csv.text();
    assert!(
        text.starts_with("district,party,candidate,votes\n"),
        "{text}"
    );
    assert!(text.contains("N,GF,,1\nN,GF,Ana Horvat,1\n"), "{text}");
    assert!(text.contains("S,CA,,2\n"), "{text}");
    assert!(text.contains("S,CA,Zuzana Polak,1\n"), "{text}");
    assert!(text.contains("S,CA,Monika Simko,1\n"), "{text}");
    let json = admin_get(
        &s,
        &format!("/api/voting/elections/{id}/audit/results.json"),
    )
    .await
    .json();
    assert_eq!(json["districts"][1]["parties"][0]["partyId"], 2);
    assert_eq!(json["districts"][1]["parties"][0]["votes"], 2);
    // Published: the results are public.
    let p = step(&s, id, "publish").await;
    assert_eq!(p.json()["state"], "published");
    let r = api
        .get(&format!("/api/voting/elections/{id}/results"))
        .await
        .json();
    assert_eq!(r["resultsShown"], true);
    assert_eq!(r["parties"][0]["partyId"], 2);
    assert_eq!(r["parties"][0]["votes"], 2);
    assert_eq!(r["parties"][0]["color"], "#4e79a7");
    // The log: every step, who took it, in order.
    let log = admin_get(&s, &format!("/api/voting/elections/{id}/audit/log"))
        .await
        .json();
    let steps: Vec<(String, String)> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["eventType"].as_str().unwrap().to_string(),
                e["actor"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("voting.ElectionDrafted", "test-subject"),
        ("voting.RollImported", "test-subject"),
        ("voting.ElectionKeySet", "test-subject"),
        ("voting.ElectionOpened", "test-subject"),
        ("voting.ElectionSuspended", "test-subject"),
        ("voting.ElectionResumed", "test-subject"),
        ("voting.ClosingExtended", "test-subject"),
        ("voting.ElectionClosed", "test-subject"),
        ("voting.ElectionTallied", "test-subject"),
        ("voting.ResultsPublished", "test-subject"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(steps, expected);
    // The election's stream is the service's: readable, never writable.
    let r = api
        .send(
            api.http
                .post(api.url(&format!("/api/events/streams/election-{id}")))
                .bearer_auth(admin(&s))
                .json(&json!([{"eventId": "5d0c7a3e-1f2b-4c6d-8e9f-0a1b2c3d4e5f",
                               "type": "voting.ElectionOpened", "data": {}}])),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text());
}
