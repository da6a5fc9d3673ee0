//! The admin console's sign-in: one-time links, the session cookie on the
//! services' API, cross-site requests refused, bearer tokens unchanged,
//! signing out, and the audit log.

use serde_json::{json, Value};
use throng::platform::auth::Role;
use throng::platform::session::{VerifiedClaims, LINK_TTL_MS, SESSION_IDLE_MS};

use crate::both_stores;
use crate::helpers::{run_throng, store_flags, Reply, StoreKind, TestServer};

both_stores!(
    a_link_signs_in_once_and_its_session_calls_the_api,
    expired_links_and_idle_sessions_are_refused,
    a_staff_session_sees_its_pages_not_the_audit_log,
    the_cli_prints_a_link_the_server_honours
);

fn claims(sub: &str, role: &str, extra: Value) -> VerifiedClaims {
    VerifiedClaims {
        sub: sub.into(),
        role: role.into(),
        extra: extra.as_object().cloned().unwrap_or_default(),
    }
}

/// A request as the console's pages send it: same origin, the header.
fn from_page(s: &TestServer, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    req.header("origin", s.api.base.clone())
        .header("x-throng-request", "1")
}

async fn sign_in(s: &TestServer, link: &str) -> Reply {
    s.api
        .send(from_page(
            s,
            s.api
                .http
                .post(s.api.url("/api/admin/session"))
                .json(&json!({ "link": link })),
        ))
        .await
}

/// The `name=value` of a sign-in's Set-Cookie.
fn cookie_of(r: &Reply) -> String {
    let set = r
        .headers
        .get("set-cookie")
        .expect("a Set-Cookie")
        .to_str()
        .unwrap();
    set.split(';').next().unwrap().to_string()
}

async fn new_session(s: &TestServer, sub: &str, role: &str, extra: Value) -> String {
    let link = s
        .state
        .sessions
        .create_link(&claims(sub, role, extra), LINK_TTL_MS)
        .await
        .unwrap();
    let r = sign_in(s, &link).await;
    assert_eq!(r.status, 201, "{}", r.text());
    cookie_of(&r)
}

fn site(name: &str) -> Value {
    json!({"name": name, "surveyUrl": "https://survey.example/s/1",
           "allowedOrigins": ["https://shop.example"]})
}

async fn a_link_signs_in_once_and_its_session_calls_the_api(kind: StoreKind) {
    let mut s = TestServer::start(kind, &[]).await;
    let link = s
        .state
        .sessions
        .create_link(
            &claims("alice@example.org", "admin", json!({})),
            LINK_TTL_MS,
        )
        .await
        .unwrap();
    let r = sign_in(&s, &link).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["sub"], "alice@example.org");
    assert_eq!(r.json()["role"], "admin");
    let set = r.headers["set-cookie"].to_str().unwrap().to_string();
    for part in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(part), "{set}");
    }
    assert!(!set.contains("Secure"), "plain http: {set}");
    let cookie = cookie_of(&r);
    // Single use.
    sign_in(&s, &link).await.assert_error(401, "link_used");
    sign_in(&s, "not-a-link")
        .await
        .assert_error(401, "link_invalid");

    let who = s
        .api
        .send(
            s.api
                .http
                .get(s.api.url("/api/admin/session"))
                .header("cookie", &cookie),
        )
        .await;
    assert_eq!(who.status, 200, "{}", who.text());
    assert_eq!(who.json()["sub"], "alice@example.org");
    assert_eq!(
        s.api.get("/api/admin/session").await.status,
        204,
        "no cookie, no session"
    );

    // The session calls a service's admin API: reads as they are, changes
    // from the server's own pages only.
    let post_site = |name: &str| {
        s.api
            .http
            .post(s.api.url("/api/invites/sites"))
            .json(&site(name))
            .header("cookie", &cookie)
    };
    let r = s.api.send(from_page(&s, post_site("by session"))).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let r = s
        .api
        .send(
            s.api
                .http
                .get(s.api.url("/api/invites/sites"))
                .header("cookie", &cookie),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["sites"].as_array().unwrap().len(), 1);
    let msg = s
        .api
        .send(post_site("no header").header("origin", s.api.base.clone()))
        .await
        .assert_error(403, "request_header_missing");
    assert!(msg.contains("x-throng-request"), "{msg}");
    s.api
        .send(
            post_site("other origin")
                .header("origin", "http://127.0.0.1:1")
                .header("x-throng-request", "1"),
        )
        .await
        .assert_error(403, "cross_site_request");
    s.api
        .send(
            post_site("cross site")
                .header("sec-fetch-site", "cross-site")
                .header("x-throng-request", "1"),
        )
        .await
        .assert_error(403, "cross_site_request");
    // A sign-in from another site is refused too.
    let other = s
        .state
        .sessions
        .create_link(&claims("mallory", "admin", json!({})), LINK_TTL_MS)
        .await
        .unwrap();
    s.api
        .send(
            s.api
                .http
                .post(s.api.url("/api/admin/session"))
                .header("origin", "http://127.0.0.1:1")
                .header("x-throng-request", "1")
                .json(&json!({ "link": other })),
        )
        .await
        .assert_error(403, "cross_site_request");

    // Bearer tokens work as before: no header, no origin.
    let token = s.token(Role::ADMIN);
    let r = s
        .api
        .send(
            s.api
                .http
                .post(s.api.url("/api/invites/sites"))
                .bearer_auth(&token)
                .json(&site("by token")),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());

    // The audit log: who, what, when, outcome; filtered and paged.
    let audit = |query: &str| {
        s.api.send(
            s.api
                .http
                .get(s.api.url(&format!("/api/admin/audit{query}")))
                .header("cookie", &cookie),
        )
    };
    let all = audit("").await;
    assert_eq!(all.status, 200, "{}", all.text());
    let events = all.json()["events"].as_array().unwrap().clone();
    let find = |service: &str, via: &str, status: i64| {
        events.iter().any(|e| {
            e["service"] == service
                && e["via"] == via
                && e["status"] == status
                && e["method"] == "POST"
        })
    };
    assert!(find("invites", "session", 201), "{events:?}");
    assert!(find("invites", "session", 403), "{events:?}");
    assert!(find("invites", "token", 201), "{events:?}");
    assert!(find("console", "link", 201), "{events:?}");
    let first = &events[0];
    assert_eq!(first["path"], "/api/invites/sites");
    assert_eq!(first["sub"], "test-subject");
    assert!(first["at"].as_str().unwrap().ends_with('Z'));
    let invites = audit("?service=invites").await.json();
    let invites = invites["events"].as_array().unwrap();
    assert!(invites.iter().all(|e| e["service"] == "invites"));
    assert_eq!(invites.len(), 5, "{invites:?}");
    let page = audit("?service=invites&limit=2").await.json();
    assert_eq!(page["events"].as_array().unwrap().len(), 2);
    let next = page["next"].as_i64().expect("a next page");
    let page2 = audit(&format!("?service=invites&limit=2&before={next}"))
        .await
        .json();
    assert!(page2["events"][0]["id"].as_i64().unwrap() < next);
    audit("?limit=0").await.assert_error(422, "invalid_field");
    // A read is not a change: not recorded.
    assert!(!events.iter().any(|e| e["method"] == "GET"));

    // Signing out ends the session everywhere.
    let r = s
        .api
        .send(from_page(
            &s,
            s.api
                .http
                .delete(s.api.url("/api/admin/session"))
                .header("cookie", &cookie),
        ))
        .await;
    assert_eq!(r.status, 204, "{}", r.text());
    assert!(r.headers["set-cookie"]
        .to_str()
        .unwrap()
        .contains("Max-Age=0"));
    let r = s
        .api
        .send(
            s.api
                .http
                .get(s.api.url("/api/admin/session"))
                .header("cookie", &cookie),
        )
        .await;
    assert_eq!(r.status, 204, "signed out: {}", r.text());
    s.api
        .send(from_page(&s, post_site("after sign-out")))
        .await
        .assert_error(401, "session_ended");
    s.stop().await;
}

async fn expired_links_and_idle_sessions_are_refused(kind: StoreKind) {
    let mut s = TestServer::start(kind, &[]).await;
    let sessions = &s.state.sessions;
    let link = sessions
        .create_link(&claims("bob", "admin", json!({})), 60_000)
        .await
        .unwrap();
    sessions.clock().advance(61_000);
    let msg = sign_in(&s, &link).await.assert_error(401, "link_expired");
    assert!(msg.contains("throng admin link"), "{msg}");
    // A link lasts 10 minutes at most, whatever is asked.
    let long = sessions
        .create_link(&claims("bob", "admin", json!({})), 3_600_000)
        .await
        .unwrap();
    sessions.clock().advance(LINK_TTL_MS + 1_000);
    sign_in(&s, &long).await.assert_error(401, "link_expired");

    let cookie = new_session(&s, "bob", "admin", json!({})).await;
    let who = |cookie: String| {
        s.api.send(
            s.api
                .http
                .get(s.api.url("/api/invites/sites"))
                .header("cookie", cookie),
        )
    };
    assert_eq!(who(cookie.clone()).await.status, 200);
    s.state.sessions.clock().advance(SESSION_IDLE_MS + 1_000);
    who(cookie).await.assert_error(401, "session_ended");
    s.stop().await;
}

async fn a_staff_session_sees_its_pages_not_the_audit_log(kind: StoreKind) {
    let mut s = TestServer::start(kind, &[]).await;
    let cookie = new_session(&s, "carol", "staff", json!({"places": "12"})).await;
    let get = |path: &str| {
        s.api.send(
            s.api
                .http
                .get(s.api.url(path))
                .header("cookie", cookie.clone()),
        )
    };
    let pages = get("/api/admin/pages").await;
    assert_eq!(pages.status, 200, "{}", pages.text());
    let hrefs: Vec<String> = pages.json()["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["href"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(hrefs, ["/booking/staff/"]);
    get("/api/admin/audit").await.assert_error(403, "forbidden");
    // The staff claim reaches booking's back office: another place is not
    // theirs.
    get("/api/booking/places/13/days/2030-01-01/registrations")
        .await
        .assert_error(403, "not_your_place");
    // An admin sees every service's pages.
    let token = s.token(Role::ADMIN);
    let all = s
        .api
        .send(
            s.api
                .http
                .get(s.api.url("/api/admin/pages"))
                .bearer_auth(token),
        )
        .await
        .json();
    let hrefs: Vec<&str> = all["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["href"].as_str().unwrap())
        .collect();
    for href in [
        "/booking/staff/",
        "/booking/admin/",
        "/comments/moderate",
        "/voting/admin",
        "/invites/admin",
    ] {
        assert!(hrefs.contains(&href), "{hrefs:?}");
    }
    for page in ["/admin/", "/admin/signin"] {
        let r = s.api.get(page).await;
        assert_eq!(r.status, 200, "{page}");
        assert!(r.text().contains("name=\"viewport\""), "{page}");
    }
    s.stop().await;
}

async fn the_cli_prints_a_link_the_server_honours(kind: StoreKind) {
    let mut s = TestServer::start(kind, &[]).await;
    let pg = s.pg.as_ref().map(|p| p.url.clone());
    let mut args: Vec<String> = [
        "admin",
        "link",
        "--sub",
        "dan@example.org",
        "--role",
        "staff",
    ]
    .map(String::from)
    .to_vec();
    args.extend(store_flags(&s.data_dir, pg.as_deref()));
    args.extend(["--public-url".into(), s.api.base.clone()]);
    let (ok, out) = run_throng(&args).await;
    assert!(!ok, "a staff link needs its places: {out}");
    assert!(out.contains("--claim places="), "{out}");
    args.extend(["--claim".into(), "places=12".into()]);
    let (ok, out) = run_throng(&args).await;
    assert!(ok, "{out}");
    let url = out.lines().next().unwrap();
    let prefix = format!("{}/admin/signin#", s.api.base);
    let link = url.strip_prefix(&prefix).unwrap_or_else(|| panic!("{out}"));
    let r = sign_in(&s, link).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["claims"]["places"], 12);
    let (ok, out) = run_throng(&[
        "admin".into(),
        "link".into(),
        "--sub".into(),
        "eve".into(),
        "--role".into(),
        "voter".into(),
    ])
    .await;
    assert!(!ok && out.contains("voter"), "not a console role: {out}");
    s.stop().await;
}
