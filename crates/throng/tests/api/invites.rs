//! Invites through a real server on both stores: every rule (three closes,
//! yes and no are final, sampling kept per visitor, paused and expired
//! sites, idempotent retries), 100 concurrent answers of one visitor, bad
//! input (forged, truncated and oversized visitor ids, unknown sites,
//! disallowed origins, bad answers: the envelope or a fresh visitor, never a
//! 5xx, nothing written), admin access, forgetting a visitor, the retention
//! purge, and SIGKILL under answer load; the site settings' rules (survey
//! URLs that would lead elsewhere, origins normalised), absolute snippets
//! (with and without --public-url), readable errors for refused pages, the
//! trigger settings, and deleted answers gone from the SQLite file.

use std::collections::HashMap;
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};
use throng::platform::auth::Role;
use throng::services::invites::http::{
    Answered, Forgotten, SiteList, SiteOut, SiteStats, VisitorState,
};
use throng::services::invites::model::AnswerState;

use crate::both_stores;
use crate::helpers::{Api, PgDb, ProcessServer, Reply, StoreKind, TestServer};

both_stores!(
    three_closes_then_never_again,
    yes_and_no_are_final_and_retries_count_once,
    sampling_is_decided_once_per_visitor_and_kept,
    paused_and_inactive_sites_show_nothing_and_take_no_answers,
    concurrent_answers_of_one_visitor_leave_one_state,
    bad_input_gets_the_envelope_or_a_fresh_visitor_and_writes_nothing,
    admin_endpoints_need_an_admin_token,
    a_visitor_can_be_forgotten,
    answers_past_the_retention_are_purged,
    acknowledged_answers_survive_sigkill,
    the_baseline_route_answers_only_on_the_bench_child,
    seeded_visitors_answer_as_seeded,
    survey_urls_a_browser_would_send_elsewhere_are_refused,
    origins_are_normalised_or_refused_with_a_reason,
    the_snippet_and_survey_url_are_absolute,
    the_snippet_follows_the_public_url,
    a_refused_origin_can_read_its_403,
    trigger_settings_round_trip_and_are_checked,
    deleted_and_purged_answers_leave_no_bytes_in_the_file,
);

/// Every `--invites-*` and the `--public-url` flag of `serve` says what it does.
#[test]
fn every_invites_serve_flag_has_help_text() {
    let out = std::process::Command::new(crate::helpers::throng_bin())
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = help.lines().collect();
    let mut flags = 0;
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        if t.starts_with("--invites-") || t.starts_with("--public-url") {
            flags += 1;
            let text = lines.get(i + 1).map(|l| l.trim()).unwrap_or("");
            assert!(
                text.len() > 20 && !text.starts_with('-') && !text.starts_with('['),
                "{t}: no help text ({text:?})"
            );
        }
    }
    assert!(flags >= 5, "{help}");
}

/// SQLite only: PostgreSQL keeps keying answers by visitor id.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn answers_stored_under_ids_are_rekeyed_by_number_at_start() {
    use throng::services::invites::signed::{Signer, KEY_PURPOSE};
    let dir = tempfile::TempDir::new().unwrap();
    seed_invites(dir.path(), None, 2000, false).await;
    let cipher = store_cipher(dir.path(), None).await;
    // Make the store look like one written before visitor numbers: rows
    // keyed by id, no mark.
    {
        let conn = rusqlite::Connection::open(dir.path().join("throng.db")).unwrap();
        let c2 = cipher.clone();
        conn.create_scalar_function(
            "id_of",
            1,
            rusqlite::functions::FunctionFlags::SQLITE_UTF8,
            move |ctx| Ok(c2.id_of(ctx.get::<i64>(0)? as u64)),
        )
        .unwrap();
        conn.execute_batch(
            "UPDATE invites_answers SET visitor_id = -visitor_id;
             UPDATE invites_answers SET visitor_id = id_of(-visitor_id);
             DELETE FROM meta WHERE key = 'invites_answers_keys';",
        )
        .unwrap();
        let keyed_by_id: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM invites_answers WHERE visitor_id = ?1",
                [cipher.id_of(7)],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(keyed_by_id, 1);
    }
    let server = ProcessServer::start(dir.path(), None, &[]).await;
    let secrets = throng::platform::secrets::Secrets::load_or_create(dir.path()).unwrap();
    let signer = Signer::new(
        throng::platform::auth::TokenKeys::new(&secrets.token_secret).derive(KEY_PURPOSE),
    );
    let numbers: Vec<u64> = (1..=40).chain(1990..=2000).collect();
    check_seeded(&server, &signer, &cipher, &numbers, 2000).await;
}

const ORIGIN: &str = "https://shop.example";

struct Inv {
    api: Api,
    admin: String,
    site: i64,
}

impl Inv {
    async fn new(server: &TestServer, settings: Value) -> Inv {
        let admin = server.token(Role::ADMIN);
        let api = server.api.clone();
        let site = create_site(&api, &admin, settings).await;
        Inv { api, admin, site }
    }

    fn path(&self, tail: &str) -> String {
        format!("/api/invites/sites/{}{tail}", self.site)
    }

    async fn state(&self, visitor: Option<&str>) -> Reply {
        let mut req = self.api.http.get(self.api.url(&self.path("/state")));
        if let Some(v) = visitor {
            req = req.header("x-invites-visitor", v);
        }
        self.api.send(req).await
    }

    /// A first visit that shows the popup: (visitor, displayId).
    async fn first_display(&self) -> (String, String) {
        let r = self.state(None).await;
        assert_eq!(r.status, 200, "{}", r.text());
        let v: VisitorState = r.body();
        assert!(v.show && v.reason.is_none(), "{v:?}");
        assert!(v.popup.is_some() && v.survey_url.is_some(), "{v:?}");
        (v.visitor, v.display_id.expect("shown: a display"))
    }

    /// A later display for a known visitor.
    async fn display(&self, visitor: &str) -> String {
        let v: VisitorState = self.state(Some(visitor)).await.body();
        assert!(v.show, "{v:?}");
        assert_eq!(v.visitor, visitor, "the same visitor");
        v.display_id.expect("shown: a display")
    }

    async fn answer(&self, visitor: &str, answer: &str, display: &str) -> Reply {
        self.api
            .send(
                self.api
                    .http
                    .post(self.api.url(&self.path("/answers")))
                    .header("x-invites-visitor", visitor)
                    .json(&json!({ "answer": answer, "displayId": display })),
            )
            .await
    }

    async fn stats(&self) -> SiteStats {
        let r = self
            .api
            .send(
                self.api
                    .http
                    .get(self.api.url(&self.path("/stats")))
                    .bearer_auth(&self.admin),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        r.body()
    }

    async fn patch(&self, body: Value) -> Reply {
        self.api
            .send(
                self.api
                    .http
                    .patch(self.api.url(&self.path("")))
                    .bearer_auth(&self.admin)
                    .json(&body),
            )
            .await
    }
}

async fn create_site(api: &Api, admin: &str, settings: Value) -> i64 {
    let mut body = json!({
        "surveyUrl": "https://survey.example/s/1",
        "allowedOrigins": [ORIGIN],
    });
    for (k, v) in settings.as_object().unwrap() {
        body[k] = v.clone();
    }
    let r = api
        .send(
            api.http
                .post(api.url("/api/invites/sites"))
                .bearer_auth(admin)
                .json(&body),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    r.body::<SiteOut>().site_id
}

/// The numeric id inside a signed visitor id (its first 8 bytes).
fn numeric_id(signed: &str) -> i64 {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(signed)
        .unwrap();
    i64::from_be_bytes(raw[..8].try_into().unwrap())
}

async fn three_closes_then_never_again(kind: StoreKind) {
    let server = TestServer::start(kind, &[]).await;
    let inv = Inv::new(&server, json!({})).await;
    let (visitor, mut display) = inv.first_display().await;
    for closes in 1..=3 {
        let r = inv.answer(&visitor, "close", &display).await;
        assert_eq!(r.status, 200, "{}", r.text());
        let v: Answered = r.body();
        assert_eq!((v.closes, v.counted, v.closes_max), (closes, true, 3));
        if closes < 3 {
            assert_eq!(v.state, AnswerState::Asking);
            // Close asks again next time: the next visit shows it.
            display = inv.display(&visitor).await;
        } else {
            assert_eq!(v.state, AnswerState::ClosedOut);
        }
    }
    let v: VisitorState = inv.state(Some(&visitor)).await.body();
    assert_eq!(
        (v.show, v.reason.as_deref(), v.state),
        (false, Some("closed_out"), AnswerState::ClosedOut)
    );
    assert!(v.display_id.is_none() && v.popup.is_none());
    // The last display answered again (a retry): nothing changes.
    let v = inv.answer(&visitor, "close", &display).await.json();
    assert_eq!(
        (v["counted"].clone(), v["closes"].clone()),
        (json!(false), json!(3))
    );
    let s = inv.stats().await;
    assert_eq!((s.closes, s.closed_out), (3, 1), "{s:?}");
    assert_eq!((s.visitors, s.invited), (1, 1), "{s:?}");
    assert_eq!(s.displays, 3, "{s:?}");
}

async fn yes_and_no_are_final_and_retries_count_once(kind: StoreKind) {
    let server = TestServer::start(kind, &[]).await;
    let inv = Inv::new(&server, json!({})).await;
    // Yes: final, with the survey URL; a double click counts once; another
    // display's answer is refused.
    let (visitor, d1) = inv.first_display().await;
    let d2 = inv.display(&visitor).await;
    let r = inv.answer(&visitor, "yes", &d1).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v: Answered = r.body();
    assert_eq!((v.state, v.counted), (AnswerState::Yes, true));
    assert_eq!(v.survey_url.as_deref(), Some("https://survey.example/s/1"));
    let again = inv.answer(&visitor, "yes", &d1).await.json();
    assert_eq!(
        (again["state"].clone(), again["counted"].clone()),
        (json!("yes"), json!(false))
    );
    inv.answer(&visitor, "no", &d2)
        .await
        .assert_error(409, "already_answered");
    let v = inv.state(Some(&visitor)).await.json();
    assert_eq!(
        (v["show"].clone(), v["reason"].clone()),
        (json!(false), json!("answered_yes"))
    );

    // No: final, no survey URL.
    let (visitor, d1) = inv.first_display().await;
    let d2 = inv.display(&visitor).await;
    let v: Answered = inv.answer(&visitor, "no", &d1).await.body();
    assert_eq!(v.state, AnswerState::No);
    assert!(v.survey_url.is_none());
    inv.answer(&visitor, "close", &d2)
        .await
        .assert_error(409, "already_answered");
    let v = inv.state(Some(&visitor)).await.json();
    assert_eq!(v["reason"], "answered_no");

    // Closes on two displays count twice; a retried close once.
    let (visitor, d1) = inv.first_display().await;
    let d2 = inv.display(&visitor).await;
    for d in [&d1, &d1, &d2, &d2] {
        assert_eq!(inv.answer(&visitor, "close", d).await.status, 200);
    }
    assert_eq!(inv.state(Some(&visitor)).await.json()["closes"], 2);

    let s = inv.stats().await;
    assert_eq!((s.yes, s.no, s.closes), (1, 1, 2), "{s:?}");
    assert_eq!(s.conversion, Some(1.0 / 3.0), "{s:?}");
}

async fn sampling_is_decided_once_per_visitor_and_kept(kind: StoreKind) {
    let server = TestServer::start(kind, &[]).await;
    let inv = Inv::new(&server, json!({ "inviteShare": 0.5 })).await;
    let mut decided = Vec::new();
    for _ in 0..200 {
        let v = inv.state(None).await.json();
        let show = v["show"] == true;
        if !show {
            assert_eq!(v["reason"], "not_sampled");
        }
        decided.push((v["visitor"].as_str().unwrap().to_string(), show));
    }
    let shown = decided.iter().filter(|d| d.1).count();
    assert!(
        (60..=140).contains(&shown),
        "about half of 200 invited: {shown}"
    );
    // Each visitor keeps its draw, even after the share changes.
    assert_eq!(inv.patch(json!({ "inviteShare": 0.0 })).await.status, 200);
    for (visitor, show) in decided.iter().take(40) {
        let v = inv.state(Some(visitor)).await.json();
        assert_eq!(v["show"] == true, *show, "{v}");
    }
    assert_eq!(inv.state(None).await.json()["reason"], "not_sampled");
    let s = inv.stats().await;
    assert_eq!(s.visitors, 201, "{s:?}");
    assert_eq!(s.invited, shown as i64, "{s:?}");
}

async fn paused_and_inactive_sites_show_nothing_and_take_no_answers(kind: StoreKind) {
    let server = TestServer::start(kind, &[]).await;
    let inv = Inv::new(&server, json!({})).await;
    let (visitor, display) = inv.first_display().await;
    let pause = |what: &'static str| {
        let api = inv.api.clone();
        let (admin, path) = (inv.admin.clone(), inv.path(what));
        async move {
            api.send(api.http.post(api.url(&path)).bearer_auth(admin))
                .await
        }
    };
    let r = pause("/pause").await;
    assert_eq!((r.status, r.json()["paused"].clone()), (200, json!(true)));
    assert_eq!(
        inv.state(Some(&visitor)).await.json()["reason"],
        "site_paused"
    );
    inv.answer(&visitor, "yes", &display)
        .await
        .assert_error(409, "site_inactive");
    assert_eq!(pause("/resume").await.status, 200);
    assert_eq!(inv.state(Some(&visitor)).await.json()["show"], true);

    assert_eq!(
        inv.patch(json!({ "activeUntil": "2020-01-01T00:00:00Z" }))
            .await
            .status,
        200
    );
    assert_eq!(inv.state(Some(&visitor)).await.json()["reason"], "ended");
    inv.answer(&visitor, "no", &display)
        .await
        .assert_error(409, "site_inactive");
    assert_eq!(
        inv.patch(json!({ "activeUntil": "", "activeFrom": "2999-01-01T00:00:00Z" }))
            .await
            .status,
        200
    );
    assert_eq!(
        inv.state(Some(&visitor)).await.json()["reason"],
        "not_yet_active"
    );
    assert_eq!(inv.patch(json!({ "activeFrom": "" })).await.status, 200);
    let r = inv.answer(&visitor, "yes", &display).await;
    assert_eq!(
        r.status,
        200,
        "the display still answers once the site is active: {}",
        r.text()
    );
}

async fn concurrent_answers_of_one_visitor_leave_one_state(kind: StoreKind) {
    let server = TestServer::start(kind, &[]).await;
    let inv = Inv::new(&server, json!({})).await;
    // 100 closes on 100 displays at once: exactly closesMax (3) count.
    let (visitor, first) = inv.first_display().await;
    let mut displays = vec![first];
    for _ in 0..99 {
        displays.push(inv.display(&visitor).await);
    }
    let answers =
        futures::future::join_all(displays.iter().map(|d| inv.answer(&visitor, "close", d))).await;
    let mut by_status: HashMap<u16, usize> = HashMap::new();
    for r in &answers {
        *by_status.entry(r.status).or_default() += 1;
        if r.status == 409 {
            r.assert_envelope("already_answered");
        }
    }
    assert_eq!(by_status.get(&200), Some(&3), "{by_status:?}");
    assert_eq!(by_status.get(&409), Some(&97), "{by_status:?}");
    let v = inv.state(Some(&visitor)).await.json();
    assert_eq!(
        (v["state"].clone(), v["closes"].clone()),
        (json!("closed_out"), json!(3))
    );

    // 100 answers of one display at once (yes, no and close mixed): one counts.
    let (visitor, display) = inv.first_display().await;
    let kinds = ["yes", "no", "close"];
    let answers =
        futures::future::join_all((0..100).map(|i| inv.answer(&visitor, kinds[i % 3], &display)))
            .await;
    let counted: Vec<&Reply> = answers
        .iter()
        .filter(|r| r.status == 200 && r.json()["counted"] == true)
        .collect();
    assert_eq!(counted.len(), 1);
    assert!(
        answers.iter().all(|r| r.status == 200),
        "repeats answer 200"
    );
    let final_state = counted[0].json()["state"].clone();
    assert_eq!(inv.state(Some(&visitor)).await.json()["state"], final_state);
    let s = inv.stats().await;
    let total = s.yes + s.no;
    let closes = s.closes;
    assert!(
        (total == 1 && closes == 3) || (total == 0 && closes == 4),
        "counts match the answers that counted: {s:?}"
    );
}

async fn bad_input_gets_the_envelope_or_a_fresh_visitor_and_writes_nothing(kind: StoreKind) {
    let server = TestServer::start(kind, &[]).await;
    let inv = Inv::new(&server, json!({})).await;
    let (visitor, display) = inv.first_display().await;
    let before = inv.stats().await;

    // Forged, altered, truncated, oversized and other sites' visitor ids:
    // a fresh visitor, never an error.
    let mut altered = visitor.clone().into_bytes();
    altered[5] = if altered[5] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    let other_site = create_site(&inv.api, &inv.admin, json!({})).await;
    let others = {
        let r = inv
            .api
            .get(&format!("/api/invites/sites/{other_site}/state"))
            .await;
        r.json()["visitor"].as_str().unwrap().to_string()
    };
    for bad in [
        "forged-visitor-id-000000000".to_string(),
        altered.clone(),
        visitor[..20].to_string(),
        format!("{visitor}{visitor}"),
        "x".repeat(4000),
        others,
        "é".into(),
    ] {
        let r = inv.state(Some(&bad)).await;
        assert_eq!(r.status, 200, "{bad:?}: {}", r.text());
        let v = r.json();
        assert_ne!(v["visitor"], visitor, "{bad:?}");
        assert_eq!(v["closes"], 0);
        // An answer needs a genuine visitor.
        inv.answer(&bad, "close", &display)
            .await
            .assert_error(400, "visitor_required");
    }
    // Answers: unknown answer, missing or foreign display, malformed JSON,
    // wrong content type, unknown site.
    for body in [
        json!({ "answer": "maybe", "displayId": display }),
        json!({ "answer": "yes" }),
        json!({ "answer": "yes", "displayId": display, "extra": 1 }),
        json!({ "answer": "yes", "displayId": 7 }),
    ] {
        let r = inv
            .api
            .send(
                inv.api
                    .http
                    .post(inv.api.url(&inv.path("/answers")))
                    .header("x-invites-visitor", &visitor)
                    .json(&body),
            )
            .await;
        r.assert_error(422, "invalid_field");
    }
    let (other_visitor, other_display) = inv.first_display().await;
    inv.answer(&visitor, "yes", &other_display)
        .await
        .assert_error(422, "invalid_display");
    inv.answer(&visitor, "yes", "not-a-display-id")
        .await
        .assert_error(422, "invalid_display");
    let post = |body: &'static str, ct: Option<&'static str>| {
        let mut req = inv
            .api
            .http
            .post(inv.api.url(&inv.path("/answers")))
            .header("x-invites-visitor", &visitor)
            .body(body);
        if let Some(ct) = ct {
            req = req.header("content-type", ct);
        }
        inv.api.send(req)
    };
    post("{\"answer\":", Some("application/json"))
        .await
        .assert_error(400, "malformed_json");
    post("answer=yes", Some("application/x-www-form-urlencoded"))
        .await
        .assert_error(415, "unsupported_media_type");
    inv.api
        .get("/api/invites/sites/999999/state")
        .await
        .assert_error(404, "site_not_found");
    inv.api
        .get("/api/invites/sites/abc/state")
        .await
        .assert_error(400, "invalid_path");

    // Origins: an allowed one is echoed; another is refused on every call.
    let with_origin = |method: reqwest::Method, tail: &str, origin: &str| {
        inv.api.send(
            inv.api
                .http
                .request(method, inv.api.url(&inv.path(tail)))
                .header("origin", origin)
                .header("x-invites-visitor", &visitor)
                .header("access-control-request-method", "POST"),
        )
    };
    let ok = with_origin(reqwest::Method::GET, "/state", ORIGIN).await;
    assert_eq!(ok.status, 200);
    assert_eq!(ok.headers["access-control-allow-origin"], ORIGIN);
    let pre = with_origin(reqwest::Method::OPTIONS, "/answers", ORIGIN).await;
    assert_eq!(pre.status, 204);
    assert!(pre.headers["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .contains("x-invites-visitor"));
    for (method, tail) in [
        (reqwest::Method::GET, "/state"),
        (reqwest::Method::OPTIONS, "/answers"),
        (reqwest::Method::POST, "/answers"),
    ] {
        let r = with_origin(method, tail, "https://evil.example").await;
        r.assert_error(403, "origin_not_allowed");
        // Readable by the refused page's script (it logs why).
        assert_eq!(
            r.headers["access-control-allow-origin"],
            "https://evil.example"
        );
    }

    // Nothing was written by any of it.
    let after = inv.stats().await;
    let counts = |s: &SiteStats| (s.yes, s.no, s.closes, s.closed_out);
    assert_eq!(counts(&after), counts(&before), "{after:?}");
    assert_eq!(inv.state(Some(&visitor)).await.json()["closes"], 0);
    assert_eq!(inv.state(Some(&other_visitor)).await.json()["closes"], 0);
}

async fn admin_endpoints_need_an_admin_token(kind: StoreKind) {
    let server = TestServer::start(kind, &[]).await;
    let api = &server.api;
    let admin = server.token(Role::ADMIN);
    let user = server.token(throng::services::comments::USER);
    let body = json!({ "surveyUrl": "https://s.example/1", "allowedOrigins": [ORIGIN] });
    api.post_json("/api/invites/sites", &body)
        .await
        .assert_error(401, "missing_token");
    api.send(
        api.http
            .post(api.url("/api/invites/sites"))
            .bearer_auth(&user)
            .json(&body),
    )
    .await
    .assert_error(403, "forbidden");
    api.send(
        api.http
            .get(api.url("/api/invites/sites"))
            .bearer_auth("nonsense"),
    )
    .await
    .assert_error(401, "invalid_token");
    for bad in [
        json!({ "allowedOrigins": [ORIGIN] }),
        json!({ "surveyUrl": "ftp://x", "allowedOrigins": [ORIGIN] }),
        json!({ "surveyUrl": "https://s.example", "allowedOrigins": ["https://a.example/path"] }),
        json!({ "surveyUrl": "https://s.example", "allowedOrigins": [], "closesMax": 11 }),
        json!({ "surveyUrl": "https://s.example", "allowedOrigins": [], "inviteShare": -0.1 }),
        json!({ "surveyUrl": "https://s.example", "allowedOrigins": [], "retentionDays": 0 }),
        json!({ "surveyUrl": "https://s.example", "allowedOrigins": [], "activeFrom": "tomorrow" }),
        json!({ "surveyUrl": "https://s.example", "allowedOrigins": [], "texts": { "title": "", "body": "b", "yes": "y", "no": "n", "close": "c" } }),
    ] {
        let r = api
            .send(
                api.http
                    .post(api.url("/api/invites/sites"))
                    .bearer_auth(&admin)
                    .json(&bad),
            )
            .await;
        let msg = r.assert_error(422, "invalid_field");
        assert!(!msg.is_empty());
    }
    let site = create_site(
        api,
        &admin,
        json!({ "name": "Course survey", "closesMax": 2 }),
    )
    .await;
    let list = api
        .send(
            api.http
                .get(api.url("/api/invites/sites"))
                .bearer_auth(&admin),
        )
        .await
        .json();
    assert_eq!(list["sites"].as_array().unwrap().len(), 1);
    let one = api
        .send(
            api.http
                .get(api.url(&format!("/api/invites/sites/{site}")))
                .bearer_auth(&admin),
        )
        .await
        .json();
    assert_eq!(
        (one["name"].clone(), one["closesMax"].clone()),
        (json!("Course survey"), json!(2))
    );
    api.send(
        api.http
            .get(api.url(&format!("/api/invites/sites/{site}/stats")))
            .bearer_auth(&user),
    )
    .await
    .assert_error(403, "forbidden");
    api.send(
        api.http
            .delete(api.url("/api/invites/visitors/12"))
            .bearer_auth(&user),
    )
    .await
    .assert_error(403, "forbidden");
    let r = api
        .send(
            api.http
                .patch(api.url("/api/invites/sites/999"))
                .bearer_auth(&admin)
                .json(&json!({})),
        )
        .await;
    r.assert_error(404, "site_not_found");
}

async fn a_visitor_can_be_forgotten(kind: StoreKind) {
    let server = TestServer::start(kind, &[]).await;
    let inv = Inv::new(&server, json!({})).await;
    // By the visitor itself (the snippet's "forget me").
    let (visitor, display) = inv.first_display().await;
    assert_eq!(inv.answer(&visitor, "no", &display).await.status, 200);
    assert_eq!(
        inv.state(Some(&visitor)).await.json()["reason"],
        "answered_no"
    );
    let r = inv
        .api
        .send(
            inv.api
                .http
                .delete(inv.api.url(&inv.path("/visitor")))
                .header("x-invites-visitor", &visitor),
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text());
    let v = inv.state(Some(&visitor)).await.json();
    assert_eq!(
        (v["show"].clone(), v["closes"].clone()),
        (json!(true), json!(0))
    );
    inv.api
        .send(inv.api.http.delete(inv.api.url(&inv.path("/visitor"))))
        .await
        .assert_error(400, "visitor_required");

    // By an admin, by numeric id (a data subject request).
    let (visitor, display) = inv.first_display().await;
    assert_eq!(inv.answer(&visitor, "close", &display).await.status, 200);
    let id = numeric_id(&visitor);
    let r = inv
        .api
        .send(
            inv.api
                .http
                .delete(inv.api.url(&format!("/api/invites/visitors/{id}")))
                .bearer_auth(&inv.admin),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v: Forgotten = r.body();
    assert_eq!((v.visitor_id, v.answers_deleted), (id, 1));
    assert_eq!(inv.state(Some(&visitor)).await.json()["closes"], 0);
}

async fn answers_past_the_retention_are_purged(kind: StoreKind) {
    let server = TestServer::start(kind, &["--invites-purge-interval-s", "1"]).await;
    let inv = Inv::new(&server, json!({ "retentionDays": 30 })).await;
    let (old, d) = inv.first_display().await;
    assert_eq!(inv.answer(&old, "no", &d).await.status, 200);
    let (fresh, d) = inv.first_display().await;
    assert_eq!(inv.answer(&fresh, "no", &d).await.status, 200);
    // Age one answer past 30 days, as time would.
    let old_id = numeric_id(&old);
    let aged = throng::base::clock::now_ms() - 31 * 86_400_000;
    // The embedded store keys answers by visitor number.
    let key = match server.state.store.writers() {
        throng::store::Writers::OneProcess => {
            throng::services::invites::visitor_ids::load_cipher(&server.state.store)
                .await
                .unwrap()
                .number_of(old_id) as i64
        }
        throng::store::Writers::Shared => old_id,
    };
    crate::helpers::execute(
        &server.state.store,
        "UPDATE invites_answers SET updated_at_ms = ?1 WHERE visitor_id = ?2",
        vec![aged, key],
    )
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        if inv.state(Some(&old)).await.json()["show"] == true {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the old answer was not purged"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        inv.state(Some(&fresh)).await.json()["reason"],
        "answered_no"
    );
}

async fn acknowledged_answers_survive_sigkill(kind: StoreKind) {
    let pg = match kind {
        StoreKind::Sqlite => None,
        StoreKind::Postgres => Some(PgDb::fresh().await),
    };
    let dir = tempfile::TempDir::new().unwrap();
    let pg_url = pg.as_ref().map(|p| p.url.as_str());
    let mut server = ProcessServer::start(dir.path(), pg_url, &[]).await;
    let admin = server.admin_token();
    let site = create_site(&server.api, &admin, json!({})).await;
    let api = server.api.clone();
    // 16 clients answer as fast as they can: a first visit, then an answer.
    let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(String, String, i64)>::new()));
    let stop = tokio::time::Instant::now() + Duration::from_millis(1500);
    let mut clients = Vec::new();
    for c in 0..16 {
        let (api, acked) = (api.clone(), acked.clone());
        clients.push(tokio::spawn(async move {
            let kinds = ["yes", "no", "close"];
            for i in 0..100_000usize {
                if tokio::time::Instant::now() > stop + Duration::from_secs(5) {
                    break;
                }
                let path = format!("/api/invites/sites/{site}");
                let Ok(r) = api
                    .try_send(api.http.get(api.url(&format!("{path}/state"))))
                    .await
                else {
                    break;
                };
                let v: Value = serde_json::from_slice(&r.body).unwrap_or_default();
                let (Some(visitor), Some(display)) =
                    (v["visitor"].as_str(), v["displayId"].as_str())
                else {
                    break;
                };
                let answer = kinds[(c + i) % 3];
                let req = api
                    .http
                    .post(api.url(&format!("{path}/answers")))
                    .header("x-invites-visitor", visitor)
                    .json(&json!({ "answer": answer, "displayId": display }));
                match api.try_send(req).await {
                    Ok(r) if r.status == 200 => {
                        let v: Value = serde_json::from_slice(&r.body).unwrap();
                        acked.lock().unwrap().push((
                            visitor.to_string(),
                            v["state"].as_str().unwrap().to_string(),
                            v["closes"].as_i64().unwrap(),
                        ));
                    }
                    _ => break,
                }
            }
        }));
    }
    tokio::time::sleep_until(stop).await;
    server.kill().await;
    for c in clients {
        c.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 20,
        "load ran: {} answers acknowledged",
        acked.len()
    );
    let server = ProcessServer::start(dir.path(), pg_url, &[]).await;
    for (visitor, state, closes) in &acked {
        let r = server
            .api
            .send(
                server
                    .api
                    .http
                    .get(server.api.url(&format!("/api/invites/sites/{site}/state")))
                    .header("x-invites-visitor", visitor),
            )
            .await;
        let v = r.json();
        assert_eq!(&v["visitor"], visitor, "the same visitor after restart");
        assert_eq!(
            (&v["state"], &v["closes"]),
            (&json!(state), &json!(closes)),
            "{v}"
        );
    }
    drop(pg);
}

async fn the_baseline_route_answers_only_on_the_bench_child(kind: StoreKind) {
    for mounted in [false, true] {
        let server = if mounted {
            TestServer::start_bench_child(kind, "invites", &[]).await
        } else {
            TestServer::start(kind, &[]).await
        };
        let inv = Inv::new(&server, json!({})).await;
        let (visitor, display) = inv.first_display().await;
        let r = inv
            .api
            .send(
                inv.api
                    .http
                    .post(
                        inv.api
                            .url(&format!("/api/invites/baseline/sites/{}/answers", inv.site)),
                    )
                    .header("x-invites-visitor", &visitor)
                    .json(&json!({ "answer": "no", "displayId": display })),
            )
            .await;
        if !mounted {
            r.assert_error(404, "route_not_found");
            continue;
        }
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["state"], "no");
        // The same rules and the same rows as the real endpoint.
        assert_eq!(
            inv.state(Some(&visitor)).await.json()["reason"],
            "answered_no"
        );
        assert_eq!(inv.stats().await.no, 1);
    }
}

async fn seeded_visitors_answer_as_seeded(kind: StoreKind) {
    use throng::services::invites::signed::{Signer, KEY_PURPOSE};
    let pg = match kind {
        StoreKind::Sqlite => None,
        StoreKind::Postgres => Some(PgDb::fresh().await),
    };
    let dir = tempfile::TempDir::new().unwrap();
    let pg_url = pg.as_ref().map(|p| p.url.as_str());
    seed_invites(dir.path(), pg_url, 5000, false).await;
    let server = ProcessServer::start(dir.path(), pg_url, &[]).await;
    let secrets = throng::platform::secrets::Secrets::load_or_create(dir.path()).unwrap();
    let signer = Signer::new(
        throng::platform::auth::TokenKeys::new(&secrets.token_secret).derive(KEY_PURPOSE),
    );
    let cipher = store_cipher(dir.path(), pg_url).await;
    let numbers: Vec<u64> = (1..=60).chain(4990..=5000).collect();
    check_seeded(&server, &signer, &cipher, &numbers, 5000).await;
    // Seeded again while serving, with more visitors: the server loads the
    // new answers (on SQLite its in-memory standings) within seconds.
    seed_invites(dir.path(), pg_url, 6000, true).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let later: Vec<u64> = (5990..=6000).collect();
    while !seeded_mismatches(&server, &signer, &cipher, &later)
        .await
        .is_empty()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server did not pick up the new seed's visitors"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    check_seeded(&server, &signer, &cipher, &numbers, 6000).await;
    let admin = server.admin_token();
    let mut visitors = 0;
    for site in 1..=3 {
        let s = server
            .api
            .send(
                server
                    .api
                    .http
                    .get(server.api.url(&format!("/api/invites/sites/{site}/stats")))
                    .bearer_auth(&admin),
            )
            .await
            .json();
        visitors += s["visitors"].as_i64().unwrap();
    }
    assert_eq!(visitors, 6000);
    // A first visit after the seed is numbered after the seeded visitors.
    let site = 1;
    let fresh = server
        .api
        .send(
            server
                .api
                .http
                .get(server.api.url(&format!("/api/invites/sites/{site}/state"))),
        )
        .await
        .json();
    let id = numeric_id(fresh["visitor"].as_str().unwrap());
    if matches!(kind, StoreKind::Sqlite) {
        assert!(
            cipher.number_of(id) > 6000,
            "visitor number {}",
            cipher.number_of(id)
        );
    }
    assert_eq!(fresh["state"], "asking");
    drop(pg);
}

async fn seed_invites(dir: &std::path::Path, pg_url: Option<&str>, visitors: u64, force: bool) {
    let mut args: Vec<String> = vec!["seed".into()];
    args.extend(crate::helpers::store_flags(dir, pg_url));
    args.extend(
        [
            "invites",
            "--visitors",
            &visitors.to_string(),
            "--sites",
            "3",
        ]
        .map(String::from),
    );
    if force {
        args.push("--force".into());
    }
    let out = tokio::process::Command::new(crate::helpers::throng_bin())
        .args(&args)
        .env("RUST_LOG", "warn")
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The store's visitor-id cipher (its key is in `meta`).
async fn store_cipher(
    dir: &std::path::Path,
    pg_url: Option<&str>,
) -> throng::services::invites::visitor_ids::IdCipher {
    let url: throng::store::StoreUrl = match pg_url {
        Some(u) => u.parse().unwrap(),
        None => throng::store::StoreUrl::Sqlite(dir.join("throng.db")),
    };
    let store = throng::store::Store::open(&url, throng::store::StoreLimits::default())
        .await
        .unwrap();
    throng::services::invites::visitor_ids::load_cipher(&store)
        .await
        .unwrap()
}

/// Whether seeded visitors `numbers` (of a seed over 3 sites) check in
/// with their seeded standing; the replies that do not, as text.
async fn seeded_mismatches(
    server: &ProcessServer,
    signer: &throng::services::invites::signed::Signer,
    cipher: &throng::services::invites::visitor_ids::IdCipher,
    numbers: &[u64],
) -> Vec<String> {
    use throng::services::invites::seed::{seeded_standing, site_of};
    use throng::services::invites::signed::Visitor;
    let mut wrong = Vec::new();
    for &i in numbers {
        let v = cipher.id_of(i);
        let site = site_of(v, 3);
        let signed = signer.sign_visitor(
            site,
            Visitor {
                id: v,
                sampled: true,
            },
        );
        let r = server
            .api
            .send(
                server
                    .api
                    .http
                    .get(server.api.url(&format!("/api/invites/sites/{site}/state")))
                    .header("x-invites-visitor", &signed),
            )
            .await
            .json();
        let (state, closes) = seeded_standing(v);
        let got = (
            r["state"].as_str().unwrap_or(""),
            r["closes"].as_i64().unwrap_or(-1),
        );
        if got != (state.name(), closes) || r["visitor"] != signed.as_str() {
            wrong.push(format!(
                "visitor {i}: expected {} {closes}, got {r}",
                state.name()
            ));
        }
    }
    wrong
}

async fn check_seeded(
    server: &ProcessServer,
    signer: &throng::services::invites::signed::Signer,
    cipher: &throng::services::invites::visitor_ids::IdCipher,
    numbers: &[u64],
    seeded: u64,
) {
    let wrong = seeded_mismatches(server, signer, cipher, numbers).await;
    assert!(wrong.is_empty(), "after a seed of {seeded}: {wrong:?}");
}

async fn post_site(api: &Api, admin: &str, body: &Value) -> Reply {
    api.send(
        api.http
            .post(api.url("/api/invites/sites"))
            .bearer_auth(admin)
            .json(body),
    )
    .await
}

async fn site_count(api: &Api, admin: &str) -> usize {
    let r = api
        .send(
            api.http
                .get(api.url("/api/invites/sites"))
                .bearer_auth(admin),
        )
        .await;
    r.body::<SiteList>().sites.len()
}

async fn survey_urls_a_browser_would_send_elsewhere_are_refused(kind: StoreKind) {
    let server = TestServer::start(kind, &[]).await;
    let inv = Inv::new(&server, json!({})).await;
    let before = site_count(&inv.api, &inv.admin).await;
    for bad in [
        "/\\evil.example/x",
        "\\\\evil.example",
        "//evil.example",
        "/\t/evil.example",
        "/\n/evil.example",
        "https://survey.example\\@evil.example/",
        "https://survey.example@evil.example/",
        "https://sur\tvey.example/",
        "javascript:alert(1)",
        "JavaScript:alert(1)",
        "data:text/html,x",
        "https:evil.example",
        "https:/evil.example",
        " https://survey.example/",
        "https://survey.example:99999/",
        "https://exämple.com/",
    ] {
        let r = post_site(
            &inv.api,
            &inv.admin,
            &json!({ "surveyUrl": bad, "allowedOrigins": [ORIGIN] }),
        )
        .await;
        let msg = r.assert_error(422, "invalid_field");
        assert!(
            msg.contains("surveyUrl") && msg.contains("absolute http:// or https:// URL"),
            "{bad:?}: {msg}"
        );
        inv.patch(json!({ "surveyUrl": bad }))
            .await
            .assert_error(422, "invalid_field");
    }
    assert_eq!(
        site_count(&inv.api, &inv.admin).await,
        before,
        "nothing made"
    );
    for good in [
        "https://survey.example/s?x=1#top",
        "http://survey.example:8080/",
        "/invites/demo/survey",
    ] {
        let r = inv.patch(json!({ "surveyUrl": good })).await;
        assert_eq!(r.status, 200, "{good}: {}", r.text());
    }
}

async fn origins_are_normalised_or_refused_with_a_reason(kind: StoreKind) {
    let server = TestServer::start(kind, &[]).await;
    let admin = server.token(Role::ADMIN);
    let api = &server.api;
    let r = post_site(
        api,
        &admin,
        &json!({ "surveyUrl": "https://s.example/1", "allowedOrigins": [
            "HTTPS://Shop.Example:443/", "https://shop.example", "http://shop.example:80",
            "https://shop.example:8443/"] }),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let site = r.json();
    assert_eq!(
        site["allowedOrigins"],
        json!([
            "https://shop.example",
            "http://shop.example",
            "https://shop.example:8443"
        ])
    );
    // The origin a browser sends is the stored form: allowed.
    let id = site["siteId"].as_i64().unwrap();
    let state = api
        .send(
            api.http
                .get(api.url(&format!("/api/invites/sites/{id}/state")))
                .header("origin", "https://shop.example"),
        )
        .await;
    assert_eq!(state.status, 200, "{}", state.text());
    assert_eq!(
        state.headers["access-control-allow-origin"],
        "https://shop.example"
    );
    for (bad, why) in [
        ("https://shop.example/path", "no path"),
        ("https://shop.example?x", "no path, query"),
        ("https://user@shop.example", "no user"),
        ("https://shop.example:99999", "1 to 65535"),
        ("https://shop..example", "host"),
        ("shop.example", "http:// or https://"),
        ("null", "http:// or https://"),
    ] {
        let r = post_site(
            api,
            &admin,
            &json!({ "surveyUrl": "https://s.example/1", "allowedOrigins": [bad] }),
        )
        .await;
        let msg = r.assert_error(422, "invalid_field");
        assert!(
            msg.contains("allowedOrigins") && msg.contains(why),
            "{bad}: {msg}"
        );
    }
}

/// The `src` of a snippet.
fn snippet_src(site: &Value) -> String {
    let snippet = site["snippet"].as_str().unwrap();
    let start = snippet.find("src=\"").unwrap() + 5;
    let end = start + snippet[start..].find('"').unwrap();
    snippet[start..end].to_string()
}

async fn the_snippet_and_survey_url_are_absolute(kind: StoreKind) {
    let server = TestServer::start(kind, &[]).await;
    let inv = Inv::new(&server, json!({ "surveyUrl": "/invites/demo/survey" })).await;
    let own = format!("http://{}", server.addr);
    let site = inv
        .api
        .send(
            inv.api
                .http
                .get(inv.api.url(&inv.path("")))
                .bearer_auth(&inv.admin),
        )
        .await
        .json();
    // No --public-url: the request's Host (what the caller reached).
    assert_eq!(snippet_src(&site), format!("{own}/invite.js"), "{site}");
    assert_eq!(site["surveyUrl"], format!("{own}/invites/demo/survey"));
    let script = inv.api.get("/invite.js").await;
    assert_eq!(script.status, 200);
    let state = inv.state(None).await.json();
    assert_eq!(state["surveyUrl"], format!("{own}/invites/demo/survey"));
    let visitor = state["visitor"].as_str().unwrap();
    let yes = inv
        .answer(visitor, "yes", state["displayId"].as_str().unwrap())
        .await;
    assert_eq!(
        yes.json()["surveyUrl"],
        format!("{own}/invites/demo/survey")
    );
    // Another Host (a proxy passing the browser's): followed.
    let r = inv
        .api
        .send(
            inv.api
                .http
                .get(inv.api.url(&inv.path("")))
                .header("host", "Shop-Throng.example:8443")
                .bearer_auth(&inv.admin),
        )
        .await;
    assert_eq!(
        snippet_src(&r.json()),
        "http://shop-throng.example:8443/invite.js"
    );
}

async fn the_snippet_follows_the_public_url(kind: StoreKind) {
    let server =
        TestServer::start(kind, &["--public-url", "https://throng.example/surveys/"]).await;
    let admin = server.token(Role::ADMIN);
    let r = post_site(
        &server.api,
        &admin,
        &json!({ "surveyUrl": "/invites/demo/survey", "allowedOrigins": [ORIGIN] }),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let site = r.json();
    assert_eq!(
        snippet_src(&site),
        "https://throng.example/surveys/invite.js"
    );
    assert_eq!(
        site["surveyUrl"],
        "https://throng.example/surveys/invites/demo/survey"
    );
    // An absolute survey URL is kept as given.
    let r = post_site(
        &server.api,
        &admin,
        &json!({ "surveyUrl": "https://survey.example/s/1", "allowedOrigins": [ORIGIN] }),
    )
    .await;
    assert_eq!(r.json()["surveyUrl"], "https://survey.example/s/1");
}

async fn a_refused_origin_can_read_its_403(kind: StoreKind) {
    let server = TestServer::start(kind, &[]).await;
    let inv = Inv::new(&server, json!({})).await;
    // A first visit from a page the site does not allow: the browser's
    // simple GET, no visitor header.
    let r = inv
        .api
        .send(
            inv.api
                .http
                .get(inv.api.url(&inv.path("/state")))
                .header("origin", "https://other.example"),
        )
        .await;
    let msg = r.assert_error(403, "origin_not_allowed");
    assert!(msg.contains("https://other.example"), "{msg}");
    assert_eq!(
        r.headers["access-control-allow-origin"],
        "https://other.example"
    );
    assert!(r.headers["vary"].to_str().unwrap().contains("origin"));
    // The same for an unknown site (the snippet's data-site mistyped).
    let r = inv
        .api
        .send(
            inv.api
                .http
                .get(inv.api.url("/api/invites/sites/987654/state"))
                .header("origin", "https://other.example"),
        )
        .await;
    r.assert_error(404, "site_not_found");
    assert_eq!(
        r.headers["access-control-allow-origin"],
        "https://other.example"
    );
}

async fn trigger_settings_round_trip_and_are_checked(kind: StoreKind) {
    let server = TestServer::start(kind, &[]).await;
    // Defaults: at once, as a modal.
    let plain = Inv::new(&server, json!({})).await;
    let s = plain.state(None).await.json();
    assert_eq!(
        (
            &s["trigger"],
            &s["style"],
            &s["delaySeconds"],
            &s["scrollPercent"]
        ),
        (&json!("load"), &json!("modal"), &json!(10), &json!(50))
    );
    let inv = Inv::new(
        &server,
        json!({ "trigger": "delay", "delaySeconds": 5.0, "scrollPercent": 30, "style": "slide_in" }),
    )
    .await;
    let get = || async {
        inv.api
            .send(
                inv.api
                    .http
                    .get(inv.api.url(&inv.path("")))
                    .bearer_auth(&inv.admin),
            )
            .await
            .json()
    };
    let site = get().await;
    assert_eq!(
        (
            &site["trigger"],
            &site["delaySeconds"],
            &site["scrollPercent"],
            &site["style"]
        ),
        (&json!("delay"), &json!(5), &json!(30), &json!("slide_in"))
    );
    let typed: SiteOut = serde_json::from_value(site.clone()).unwrap();
    assert_eq!(
        (typed.delay_seconds, typed.scroll_percent),
        (5, 30),
        "{typed:?}"
    );
    inv.patch(json!({ "scrollPercent": 30.5 }))
        .await
        .assert_error(422, "invalid_field");
    // Delivered to the script with the popup.
    let s = inv.state(None).await.json();
    assert_eq!(
        (
            &s["trigger"],
            &s["delaySeconds"],
            &s["scrollPercent"],
            &s["style"]
        ),
        (&json!("delay"), &json!(5), &json!(30), &json!("slide_in"))
    );
    // PATCH changes only what it names.
    let r = inv.patch(json!({ "trigger": "exit_intent" })).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let s = inv.state(None).await.json();
    assert_eq!(
        (&s["trigger"], &s["delaySeconds"], &s["style"]),
        (&json!("exit_intent"), &json!(5), &json!("slide_in"))
    );
    for (bad, field) in [
        (json!({ "trigger": "hover" }), "trigger"),
        (json!({ "style": "popup" }), "style"),
        (json!({ "delaySeconds": 601 }), "delaySeconds"),
        (json!({ "delaySeconds": -1 }), "delaySeconds"),
        (json!({ "scrollPercent": 0 }), "scrollPercent"),
        (json!({ "scrollPercent": 101 }), "scrollPercent"),
        (json!({ "delaySeconds": 2.5 }), "delaySeconds"),
    ] {
        let r = inv.patch(bad.clone()).await;
        let msg = r.assert_error(422, "invalid_field");
        assert!(msg.contains(field), "{bad}: {msg}");
    }
    let site = get().await;
    assert_eq!(
        (
            &site["trigger"],
            &site["delaySeconds"],
            &site["scrollPercent"]
        ),
        (&json!("exit_intent"), &json!(5), &json!(30)),
        "nothing changed by a refused PATCH"
    );
}

/// The display nonce inside a signed displayId (its first 8 bytes).
fn display_nonce(display: &str) -> [u8; 8] {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(display)
        .unwrap();
    raw[..8].try_into().unwrap()
}

/// The SQLite file's bytes after every committed page reached it.
async fn checkpointed_file(path: &std::path::Path) -> Vec<u8> {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    for _ in 0..100 {
        let (busy, log, done): (i64, i64, i64) = conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .unwrap();
        if busy == 0 && log == done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    std::fs::read(path).unwrap()
}

fn holds(file: &[u8], bytes: &[u8]) -> bool {
    file.windows(bytes.len()).any(|w| w == bytes)
}

async fn deleted_and_purged_answers_leave_no_bytes_in_the_file(kind: StoreKind) {
    let server = TestServer::start(kind, &["--invites-purge-interval-s", "1"]).await;
    let inv = Inv::new(&server, json!({ "retentionDays": 30 })).await;
    // Visitor A: two closes then no (the row rewritten twice), then
    // forgotten by an admin. Visitor B: no, then purged by retention.
    let (a, d1) = inv.first_display().await;
    assert_eq!(inv.answer(&a, "close", &d1).await.status, 200);
    let d2 = inv.display(&a).await;
    assert_eq!(inv.answer(&a, "close", &d2).await.status, 200);
    let d3 = inv.display(&a).await;
    assert_eq!(inv.answer(&a, "no", &d3).await.status, 200);
    let (b, db) = inv.first_display().await;
    assert_eq!(inv.answer(&b, "no", &db).await.status, 200);
    let marks: Vec<[u8; 8]> = [&d1, &d2, &d3, &db]
        .iter()
        .map(|d| display_nonce(d))
        .collect();
    let db_path = server.data_dir.join("throng.db");
    if kind == StoreKind::Sqlite {
        // The check can see the answers: each display's nonce is stored.
        let file = checkpointed_file(&db_path).await;
        for m in &marks[2..] {
            assert!(holds(&file, m), "the stored answer is in the file");
        }
    }
    let r = inv
        .api
        .send(
            inv.api
                .http
                .delete(
                    inv.api
                        .url(&format!("/api/invites/visitors/{}", numeric_id(&a))),
                )
                .bearer_auth(&inv.admin),
        )
        .await;
    assert_eq!(r.json()["answersDeleted"], 1, "{}", r.text());
    // Age B's answer past the retention; the purge (every second) takes it.
    let aged = throng::base::clock::now_ms() - 31 * 86_400_000;
    // The embedded store keys answers by visitor number.
    let key = match server.state.store.writers() {
        throng::store::Writers::OneProcess => {
            throng::services::invites::visitor_ids::load_cipher(&server.state.store)
                .await
                .unwrap()
                .number_of(numeric_id(&b)) as i64
        }
        throng::store::Writers::Shared => numeric_id(&b),
    };
    crate::helpers::execute(
        &server.state.store,
        "UPDATE invites_answers SET updated_at_ms = ?1 WHERE visitor_id = ?2",
        vec![aged, key],
    )
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while inv.state(Some(&b)).await.json()["show"] != true {
        assert!(tokio::time::Instant::now() < deadline, "B was not purged");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(inv.state(Some(&a)).await.json()["closes"], 0, "A forgotten");
    if kind == StoreKind::Sqlite {
        let file = checkpointed_file(&db_path).await;
        for (i, m) in marks.iter().enumerate() {
            assert!(
                !holds(&file, m),
                "display {i}'s answer is still readable in the database file"
            );
        }
    }
}
