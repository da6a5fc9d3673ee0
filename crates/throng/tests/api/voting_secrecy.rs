//! The secret ballot against whoever runs the server, and the trustees'
//! opening, through a real server process on both stores:
//! - the operator, holding copies of the database and its WAL taken around
//!   each vote, PostgreSQL's WAL, heap and a statement log of every
//!   statement, and every secret in the data directory, finds no choice in
//!   them and opens no ballot; the trustees' shares open every one;
//! - the authority's path after the close: the box exported, checked
//!   against the public board, opened away from the server with 2 of 3
//!   shares, imported and published; a district below the minimum is
//!   published only inside its region; the opened order is independent of
//!   the casting order (rank correlation over 1,000 ballots); a ballot
//!   deleted from the box after the close is caught by the board's digest.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use throng::services::voting::ballot::{self, Choice};
use throng::services::voting::opening::{self, BoxFile, ResultsFile};
use throng::services::voting::trustee;

use crate::both_stores;
use crate::helpers::{store_flags, throng_bin, Api, PgDb, ProcessServer, StoreKind};
use crate::sealing::{ballot_of, seal_plain};

both_stores!(
    the_operator_with_every_copy_and_secret_opens_no_ballot,
    the_trustees_open_the_box_and_the_authority_publishes
);

const FLAGS: &[&str] = &[
    "--voting-identity",
    "headers",
    "--voting-board-period-ms",
    "50",
    "--voting-mix-interval-ms",
    "20",
    "--voting-mix-ballots-min",
    "3",
];

/// `throng seed voting` with the trustees' files written to `trustees`.
async fn seed(data_dir: &Path, pg_url: Option<&str>, trustees: &Path, extra: &[&str]) {
    let mut args: Vec<String> = vec!["seed".into()];
    args.extend(store_flags(data_dir, pg_url));
    args.extend(["voting".to_string(), "--trustees-out".into()]);
    args.push(trustees.display().to_string());
    args.extend(extra.iter().map(|s| s.to_string()));
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

async fn wait_until<F, Fut>(mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = std::time::Instant::now();
    while !f().await {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "timed out waiting"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

async fn cast(api: &Api, voter: i64, district: i64, sealed: &str) -> Value {
    let r = api
        .send(
            api.http
                .post(api.url("/api/voting/elections/1/votes"))
                .header("voter-id", voter.to_string())
                .header("election-district-id", district.to_string())
                .json(&json!({ "sealed": sealed })),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    r.json()
}

/// The district of each voter, from the roll as the server checks it: the
/// first district that does not answer `not_on_roll`.
async fn districts_of(api: &Api, voters: std::ops::RangeInclusive<i64>) -> Vec<(i64, i64)> {
    let e = api.get("/api/voting/elections/1").await.json();
    let n = e["districts"].as_array().unwrap().len() as i64;
    voters
        .map(|v| (v, throng::services::voting::seed::district_of(1, v, n)))
        .collect()
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Every 32-byte secret the server holds in its data directory.
fn server_secrets(data_dir: &Path) -> Vec<Vec<u8>> {
    let mut files = Vec::new();
    files_under(data_dir, &mut files);
    let mut secrets = Vec::new();
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        if !(name.ends_with(".key") || name.ends_with(".secret")) {
            continue;
        }
        let bytes = std::fs::read(&f).unwrap();
        let text = String::from_utf8_lossy(&bytes).trim().to_string();
        for candidate in [
            hex::decode(&text).ok(),
            ballot::from_b64(&text),
            Some(bytes.clone()),
        ]
        .into_iter()
        .flatten()
        {
            if candidate.len() >= 32 {
                secrets.push(candidate[..32].to_vec());
            }
        }
    }
    assert!(
        secrets.len() >= 3,
        "the data directory's secrets were found ({})",
        secrets.len()
    );
    secrets
}

/// Where PostgreSQL writes its log, if this test can read it.
fn pg_log_file() -> Option<PathBuf> {
    let mut files = Vec::new();
    files_under(Path::new("/var/log/postgresql"), &mut files);
    files
        .into_iter()
        .filter(|f| f.to_string_lossy().ends_with(".log"))
        .filter(|f| std::fs::File::open(f).is_ok())
        .max_by_key(|f| std::fs::metadata(f).and_then(|m| m.modified()).ok())
}

async fn pg_admin(url: &str, sql: &str) -> Vec<String> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .simple_query(sql)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
            _ => None,
        })
        .collect()
}

async fn the_operator_with_every_copy_and_secret_opens_no_ballot(kind: StoreKind) {
    const VOTES: i64 = 50;
    let db = match kind {
        StoreKind::Sqlite => None,
        StoreKind::Postgres => Some(PgDb::fresh().await),
    };
    let pg_url = db.as_ref().map(|d| d.url.as_str());
    let dir = tempfile::TempDir::new().unwrap();
    let trustees = tempfile::TempDir::new().unwrap();
    seed(
        dir.path(),
        pg_url,
        trustees.path(),
        &["--voters", "600", "--districts", "3", "--parties", "3"],
    )
    .await;
    // PostgreSQL logs every statement of this database from here on.
    let log = pg_log_file();
    let log_from = log
        .as_ref()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .unwrap_or(0);
    if let Some(db) = &db {
        pg_admin(
            &db.admin_url,
            &format!("ALTER DATABASE \"{}\" SET log_statement = 'all'", db.name),
        )
        .await;
        pg_admin(
            &db.admin_url,
            &format!(
                "ALTER DATABASE \"{}\" SET log_min_duration_statement = 0",
                db.name
            ),
        )
        .await;
    }
    let server = ProcessServer::start(dir.path(), pg_url, FLAGS).await;
    let api = &server.api;
    let mut ballots = Vec::new();
    for d in 1..=3 {
        ballots.push(ballot_of(api, 1, d).await);
    }
    // 50 votes with known choices; the database and its WAL copied after
    // each (SQLite: the files as they are on disk while the server runs).
    let copies = tempfile::TempDir::new().unwrap();
    let mut plains: Vec<[u8; ballot::PLAIN_BYTES]> = Vec::new();
    let mut sealed_all = Vec::new();
    for (i, (voter, d)) in districts_of(api, 1..=VOTES).await.into_iter().enumerate() {
        let b = &ballots[d as usize - 1];
        let parties = b["parties"].as_array().unwrap();
        let list = 1 + (i % parties.len());
        let n = parties[list - 1]["candidates"].as_array().unwrap().len();
        let choice = Choice {
            list: list as u8,
            candidates: vec![(i % n) as u16, ((i / 3) % n) as u16],
        };
        let mut choice = choice;
        choice.candidates.sort_unstable();
        choice.candidates.dedup();
        let plain = choice.encode();
        let sealed = seal_plain(b, &plain);
        cast(api, voter, d, &sealed).await;
        plains.push(plain);
        sealed_all.push(ballot::from_b64(&sealed).unwrap());
        if kind == StoreKind::Sqlite {
            for f in ["throng.db", "throng.db-wal"] {
                let from = dir.path().join(f);
                if from.exists() {
                    std::fs::copy(&from, copies.path().join(format!("{i}-{f}"))).unwrap();
                }
            }
        }
    }
    wait_until(|| async {
        api.get("/api/voting/elections/1/results").await.json()["ballots"] == VOTES
    })
    .await;
    // Everything the operator holds.
    let mut held: Vec<PathBuf> = Vec::new();
    files_under(copies.path(), &mut held);
    files_under(dir.path(), &mut held);
    let server_log = copies.path().join("server.log");
    std::fs::write(&server_log, server.log_text()).unwrap();
    held.push(server_log);
    if let Some(db) = &db {
        let data = pg_admin(&db.admin_url, "SHOW data_directory").await;
        let oid = pg_admin(
            &db.admin_url,
            &format!("SELECT oid FROM pg_database WHERE datname = '{}'", db.name),
        )
        .await;
        pg_admin(&db.url, "CHECKPOINT").await;
        let data = PathBuf::from(&data[0]);
        files_under(&data.join("pg_wal"), &mut held);
        files_under(&data.join("base").join(&oid[0]), &mut held);
    }
    let mut bytes_held = 0usize;
    let mut sealed_seen = 0;
    for f in &held {
        let Ok(content) = std::fs::read(f) else {
            continue;
        };
        bytes_held += content.len();
        for (i, plain) in plains.iter().enumerate() {
            assert!(
                !contains(&content, plain),
                "vote {i}'s choice in clear in {}",
                f.display()
            );
        }
        sealed_seen += sealed_all
            .iter()
            .filter(|s| contains(&content, &s[..]))
            .count();
    }
    assert!(
        bytes_held > 100_000,
        "the copies were read ({bytes_held} bytes)"
    );
    assert!(
        sealed_seen >= VOTES as usize,
        "the sealed ballots are in what the operator holds ({sealed_seen})"
    );
    // The statement log holds the sealed ballots (and so the voters'), never
    // a choice: checked above with the other files when it could be read.
    if let (Some(log), Some(_)) = (&log, &db) {
        let text = std::fs::read(log).unwrap();
        let ours = &text[log_from as usize..];
        assert!(
            contains(ours, b"voting_ballot_box") || contains(ours, b"voting_marks"),
            "the statement log records the votes"
        );
        for plain in &plains {
            assert!(!contains(ours, plain));
            assert!(!contains(ours, ballot::b64(plain).as_bytes()));
        }
    }
    // Every secret of the server tried as the election's key: nothing opens.
    for secret in server_secrets(dir.path()) {
        let Some(opener) = ballot::Opener::new(&secret) else {
            continue;
        };
        for (i, s) in sealed_all.iter().enumerate() {
            let d = 1 + (i as i64 % 3);
            for district in [d, 1, 2, 3] {
                assert_eq!(
                    opener.open(1, district, s),
                    None,
                    "a server secret opened a ballot"
                );
            }
        }
    }
    // The trustees' shares (2 of 3) open every one, to its choice: what the
    // operator holds are the real ballots.
    let shares: Vec<trustee::ShareFile> = [1, 2]
        .iter()
        .map(|i| {
            trustee::read_share(&trustees.path().join(trustee::share_file_name(*i, 3))).unwrap()
        })
        .collect();
    let (private, _) = trustee::combine(&shares).unwrap();
    let opener = ballot::Opener::new(&private[..]).unwrap();
    let districts = districts_of(api, 1..=VOTES).await;
    for (i, s) in sealed_all.iter().enumerate() {
        let plain = opener
            .open(1, districts[i].1, s)
            .expect("the trustees open it");
        assert_eq!(plain, plains[i].to_vec());
    }
    // One share alone opens nothing.
    assert!(trustee::combine(&shares[..1]).is_err());
    // Nothing public counts votes one by one: /metrics holds no vote route.
    let metrics = api.get("/metrics").await.text();
    assert!(
        !metrics.contains("/votes"),
        "the public /metrics counts votes"
    );
    if let Some(db) = &db {
        pg_admin(
            &db.admin_url,
            &format!("ALTER DATABASE \"{}\" RESET ALL", db.name),
        )
        .await;
    }
}

/// Spearman's rank correlation of two permutations of 0..n.
fn spearman(a: &[usize], b: &[usize]) -> f64 {
    let n = a.len() as f64;
    let d2: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| (*x as f64 - *y as f64).powi(2))
        .sum();
    1.0 - 6.0 * d2 / (n * (n * n - 1.0))
}

async fn the_trustees_open_the_box_and_the_authority_publishes(kind: StoreKind) {
    const VOTERS: i64 = 1_000;
    let db = match kind {
        StoreKind::Sqlite => None,
        StoreKind::Postgres => Some(PgDb::fresh().await),
    };
    let pg_url = db.as_ref().map(|d| d.url.as_str());
    let dir = tempfile::TempDir::new().unwrap();
    let trustees = tempfile::TempDir::new().unwrap();
    // One district: 1,000 voters with distinct choices (one list of 20
    // candidates, up to 5 named), and 3 more whose ballots are spoiled.
    seed(
        dir.path(),
        pg_url,
        trustees.path(),
        &[
            "--voters",
            &(VOTERS + 3).to_string(),
            "--districts",
            "1",
            "--parties",
            "1",
            "--candidates-per-party",
            "20",
            "--candidates-per-vote-max",
            "5",
        ],
    )
    .await;
    let server = ProcessServer::start(dir.path(), pg_url, FLAGS).await;
    let api = &server.api;
    let b = ballot_of(api, 1, 1).await;
    let ids: Vec<i64> = b["parties"][0]["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["candidateId"].as_i64().unwrap())
        .collect();
    // Distinct choices: the i-th subset of up to 5 of 20 candidates.
    let mut subsets: Vec<Vec<u16>> = Vec::new();
    for a in 0..20u16 {
        for c in a + 1..20 {
            for e in c + 1..20 {
                subsets.push(vec![a, c, e]);
            }
        }
    }
    let cast_order: Vec<Vec<i64>> = (0..VOTERS as usize)
        .map(|i| subsets[i].iter().map(|&p| ids[p as usize]).collect())
        .collect();
    // Cast in order, eight at a time.
    let sealed: Vec<String> = (0..VOTERS as usize)
        .map(|i| {
            seal_plain(
                &b,
                &Choice {
                    list: 1,
                    candidates: subsets[i].clone(),
                }
                .encode(),
            )
        })
        .collect();
    for chunk in (0..VOTERS as usize).collect::<Vec<_>>().chunks(8) {
        let mut tasks = Vec::new();
        for &i in chunk {
            let (api, s) = (api.clone(), sealed[i].clone());
            tasks.push(tokio::spawn(async move {
                cast(&api, i as i64 + 1, 1, &s).await
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    }
    // Spoiled ballots look like any other until the opening: garbage of
    // the right size, six candidates where five are allowed, no list.
    let spoiled = [
        ballot::b64(&[0x5au8; ballot::SEALED_BYTES]),
        seal_plain(
            &b,
            &Choice {
                list: 1,
                candidates: vec![0, 1, 2, 3, 4, 5],
            }
            .encode(),
        ),
        seal_plain(
            &b,
            &Choice {
                list: 0,
                candidates: vec![],
            }
            .encode(),
        ),
    ];
    for (i, s) in spoiled.iter().enumerate() {
        cast(api, VOTERS + 1 + i as i64, 1, s).await;
    }
    let token = server.admin_token();
    let admin = |method: reqwest::Method, path: &str| {
        api.http.request(method, api.url(path)).bearer_auth(&token)
    };
    // No box before the close.
    let r = api
        .send(admin(reqwest::Method::GET, "/api/voting/elections/1/box"))
        .await;
    r.assert_error(409, "box_not_complete");
    let r = api
        .send(admin(
            reqwest::Method::POST,
            "/api/voting/elections/1/close",
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // The board completes after the close; its digest is public.
    wait_until(|| async {
        api.get("/api/voting/elections/1/board").await.json()["complete"] == true
    })
    .await;
    let board = api.get("/api/voting/elections/1/board").await.json();
    assert_eq!(board["districts"][0]["ballots"], VOTERS + 3);
    let board_digest = board["digest"].as_str().unwrap().to_string();
    let r = api
        .send(admin(reqwest::Method::GET, "/api/voting/elections/1/box"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let boxed: BoxFile = r.body();
    assert_eq!(boxed.digest, board_digest, "the box is the board's");
    assert_eq!(boxed.districts[0].ballots.len() as i64, VOTERS + 3);
    // The trustees: 2 of 3 shares, the board's digest.
    let shares: Vec<trustee::ShareFile> = [2, 3]
        .iter()
        .map(|i| {
            trustee::read_share(&trustees.path().join(trustee::share_file_name(*i, 3))).unwrap()
        })
        .collect();
    let results: ResultsFile =
        opening::open_box_with_shares(&boxed, &shares, Some(&board_digest), &|_| {}).unwrap();
    assert_eq!(opening::recount(&results), Ok(()));
    let unit = &results.units[0];
    assert_eq!((unit.ballots, unit.spoiled), (VOTERS + 3, 3));
    let mut reasons: Vec<&str> = unit
        .opened
        .iter()
        .filter_map(|o| o.spoiled.as_deref())
        .collect();
    reasons.sort_unstable();
    assert_eq!(reasons, ["blank", "too_many_candidates", "unopenable"]);
    assert!(unit
        .opened
        .iter()
        .all(|o| o.spoiled.is_none() || o.party_id.is_none()));
    // The opened order tells nothing of the casting order.
    let opened_rank: Vec<usize> = unit
        .opened
        .iter()
        .filter(|o| o.spoiled.is_none())
        .map(|o| {
            cast_order
                .iter()
                .position(|c| *c == o.candidate_ids)
                .expect("every opened ballot is one cast")
        })
        .collect();
    let mut seen = opened_rank.clone();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), VOTERS as usize, "each cast ballot opened once");
    let published: Vec<usize> = (0..VOTERS as usize).collect();
    let rho = spearman(&opened_rank, &published);
    assert!(rho.abs() < 0.15, "rank correlation {rho}");
    // Results the server did not open are refused: another box's digest.
    let mut forged = results.clone();
    forged.box_digest = "00".repeat(32);
    let r = api
        .send(admin(reqwest::Method::PUT, "/api/voting/elections/1/results").json(&forged))
        .await;
    r.assert_error(422, "results_mismatch");
    // The results are imported, checked, published.
    let r = api
        .send(admin(reqwest::Method::PUT, "/api/voting/elections/1/results").json(&results))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["state"], "tallied");
    let shown = api.get("/api/voting/elections/1/results").await.json();
    assert_eq!(shown["resultsShown"], false, "tallied, not yet published");
    let r = api
        .send(admin(
            reqwest::Method::POST,
            "/api/voting/elections/1/publish",
        ))
        .await;
    assert_eq!(r.json()["state"], "published");
    wait_until(|| async {
        api.get("/api/voting/elections/1/results").await.json()["resultsShown"] == true
    })
    .await;
    let shown = api
        .get("/api/voting/elections/1/results?districtId=1")
        .await
        .json();
    assert_eq!(shown["parties"][0]["votes"], VOTERS);
    let c0 = shown["parties"][0]["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["candidateId"] == ids[0])
        .unwrap()["votes"]
        .as_i64()
        .unwrap();
    let expected = cast_order.iter().filter(|c| c.contains(&ids[0])).count() as i64;
    assert_eq!(c0, expected);
    // After the close, a ballot taken out of the box is caught: the box no
    // longer matches the board's published digest.
    let store_url = match pg_url {
        Some(u) => throng::store::StoreUrl::Postgres(u.to_string()),
        None => throng::store::StoreUrl::Sqlite(dir.path().join("throng.db")),
    };
    // Gone before the next one starts: an SQLite store has one server,
    // whose lock goes with its process.
    let mut server = server;
    server.kill().await;
    drop(server);
    let store = throng::store::Store::open(&store_url, Default::default())
        .await
        .unwrap();
    crate::helpers::execute(
        &store,
        "DELETE FROM voting_ballot_box WHERE receipt_tag IN
          (SELECT receipt_tag FROM voting_ballot_box ORDER BY receipt_tag LIMIT 1)",
        vec![],
    )
    .await;
    drop(store);
    let server = ProcessServer::start(dir.path(), pg_url, FLAGS).await;
    let r = server
        .api
        .send(
            server
                .api
                .http
                .get(server.api.url("/api/voting/elections/1/box"))
                .bearer_auth(&token),
        )
        .await;
    let tampered: BoxFile = r.body();
    assert_eq!(tampered.districts[0].ballots.len() as i64, VOTERS + 2);
    let refused = opening::open_box_with_shares(&tampered, &shares, Some(&board_digest), &|_| {});
    assert!(refused.is_err(), "a box short of a ballot is refused");
}
