//! The trustees' commands, offline: the key ceremony, the opening of an
//! exported box with the trustees' shares, and the recount.

use std::path::Path;

use throng::services::voting::ballot::{self, Choice};
use throng::services::voting::opening::{
    self, BoxBallot, BoxDistrict, BoxFile, BoxList, ResultsFile,
};

use crate::helpers::run_throng;

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A closed election's box as the server exports it: district 1 with three
/// ballots (one naming more candidates than allowed), district 2 (no
/// region) with one, published apart from 2 ballots.
fn exported_box(public: &[u8]) -> BoxFile {
    let district = |id: i64| BoxDistrict {
        id,
        code: Some(format!("D{id}")),
        name: format!("District {id}"),
        region: None,
        lists: vec![BoxList {
            party_id: 10,
            candidate_ids: vec![100, 101, 102],
        }],
        ballots: Vec::new(),
        digest: String::new(),
    };
    let mut b = BoxFile {
        format: opening::BOX_FORMAT.into(),
        election_id: 3,
        election_name: "Council".into(),
        public_key: ballot::b64(public),
        candidates_per_vote_max: 2,
        ballots_min: 2,
        districts: vec![district(1), district(2)],
        digest: String::new(),
    };
    let mut rng = rand::rngs::OsRng;
    for (d, candidates) in [
        (0, vec![0]),
        (0, vec![0, 2]),
        (0, vec![0, 1, 2]),
        (1, vec![1]),
        (1, vec![0]),
    ] {
        let plain = Choice {
            list: 1,
            candidates,
        }
        .encode();
        let id = b.districts[d].id;
        let sealed = ballot::seal(public, 3, id, &plain, &mut rng).unwrap();
        b.districts[d].ballots.push(BoxBallot {
            period: 1,
            sealed: ballot::b64(&sealed),
        });
    }
    opening::seal_digests(&mut b);
    b
}

#[tokio::test]
async fn the_trustees_make_the_key_open_the_box_and_recount() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    let (ok, text) = run_throng(&args(&[
        "voting",
        "keygen",
        "--threshold",
        "2",
        "--trustees",
        "3",
        "--out",
        p(&keys),
    ]))
    .await;
    assert!(ok, "{text}");
    assert!(text.contains("split 2 of 3"), "{text}");
    let (ok, text) = run_throng(&args(&[
        "voting",
        "keygen",
        "--threshold",
        "2",
        "--trustees",
        "3",
        "--out",
        p(&keys),
    ]))
    .await;
    assert!(!ok && text.contains("not empty"), "{text}");
    let (ok, text) = run_throng(&args(&[
        "voting",
        "keygen",
        "--threshold",
        "4",
        "--trustees",
        "3",
        "--out",
        p(&dir.path().join("other")),
    ]))
    .await;
    assert!(!ok && text.contains("threshold of 4 of 3"), "{text}");

    let key: serde_json::Value =
        serde_json::from_slice(&std::fs::read(keys.join("election-key.json")).unwrap()).unwrap();
    let public = ballot::from_b64(key["publicKey"].as_str().unwrap()).unwrap();
    let b = exported_box(&public);
    let box_file = dir.path().join("box.json");
    std::fs::write(&box_file, serde_json::to_vec(&b).unwrap()).unwrap();
    let share = |i: usize| keys.join(format!("share-{i}-of-3.json"));
    let results = dir.path().join("results.json");
    let open = |shares: &[usize], extra: &[&str], out: &Path| {
        let mut a = args(&["voting", "open", "--box", p(&box_file), "--out", p(out)]);
        for &i in shares {
            a.push("--share".into());
            a.push(p(&share(i)).into());
        }
        a.extend(args(extra));
        a
    };

    let (ok, text) = run_throng(&open(&[2], &[], &results)).await;
    assert!(!ok && text.contains("needs 2"), "{text}");
    assert!(!results.exists());
    let (ok, text) = run_throng(&open(
        &[1, 3],
        &["--board-digest", &"0".repeat(64)],
        &results,
    ))
    .await;
    assert!(!ok && text.contains("not the board's"), "{text}");
    assert!(!results.exists());

    let (ok, text) = run_throng(&open(&[1, 3], &["--board-digest", &b.digest], &results)).await;
    assert!(ok, "{text}");
    assert!(
        text.contains("district D1 (districts [1]): 3 ballots, 1 spoiled; party 10 2"),
        "{text}"
    );
    assert!(
        text.contains("district D2 (districts [2]): 2 ballots, 0 spoiled"),
        "{text}"
    );
    let r: ResultsFile = serde_json::from_slice(&std::fs::read(&results).unwrap()).unwrap();
    assert_eq!(r.box_digest, b.digest);
    let (ok, text) = run_throng(&open(&[1, 2], &[], &results)).await;
    assert!(!ok && text.contains("exists"), "{text}");

    let (ok, text) = run_throng(&args(&["voting", "recount", p(&results)])).await;
    assert!(ok && text.contains("recount matches"), "{text}");
    let (ok, text) = run_throng(&args(&[
        "voting",
        "recount",
        p(&results),
        "--box",
        p(&box_file),
    ]))
    .await;
    assert!(ok && text.contains("recount matches"), "{text}");

    let mut altered = r.clone();
    altered.units[0].parties[0].candidates[1].votes += 1;
    let altered_file = dir.path().join("altered.json");
    std::fs::write(&altered_file, serde_json::to_vec(&altered).unwrap()).unwrap();
    let (ok, text) = run_throng(&args(&["voting", "recount", p(&altered_file)])).await;
    assert!(!ok, "{text}");
    assert!(
        text.contains("unit D1 (District): candidate 101 of party 10 has 1 votes but the opened ballots give 0"),
        "{text}"
    );
}

/// `throng bench voting-opening` needs no server: it seals, opens with 3
/// of 5 shares and recounts what it opened.
#[tokio::test]
async fn the_opening_bench_runs_offline() {
    let (ok, text) = run_throng(&args(&["bench", "voting-opening", "--ballots", "300"])).await;
    assert!(ok, "{text}");
    assert!(text.contains("open (3 of 5 shares)"), "{text}");
    assert!(text.contains("recount (with the box check)"), "{text}");
    assert!(text.contains("matches"), "{text}");
    let (ok, text) = run_throng(&args(&["bench", "voting-opening", "--ballots", "0"])).await;
    assert!(
        !ok && text.contains("--ballots must be at least 1"),
        "{text}"
    );
}
