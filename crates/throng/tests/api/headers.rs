//! Headers that keep personal data and tokens out of caches, and pages out
//! of frames and content sniffing.

use crate::both_stores;
use crate::helpers::{person, Reply, StoreKind, TestServer, FROM};

both_stores!(registration_answers_are_never_cached);

fn header<'a>(r: &'a Reply, name: &str) -> &'a str {
    r.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

async fn registration_answers_are_never_cached(kind: StoreKind) {
    let s = TestServer::seeded(kind, 1, 1, 3).await;
    let r = s.api.register(1, FROM, 0, person(1)).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(header(&r, "cache-control"), "no-store", "the access code");
    let v = r.json();
    let (id, code) = (
        v["registrationId"].as_str().unwrap(),
        v["accessCode"].as_str().unwrap(),
    );
    let r = s.api.get_registration(id, Some(code)).await;
    assert_eq!(r.status, 200);
    assert!(r.text().contains("nationalId"));
    assert_eq!(header(&r, "cache-control"), "no-store", "personal data");
    assert!(
        header(&r, "vary")
            .to_ascii_lowercase()
            .contains("x-access-code"),
        "the answer depends on X-Access-Code"
    );
    // A wrong code's 404 is not cached either (it would mask a later 200).
    let r = s.api.get_registration(id, Some("wrong")).await;
    assert_eq!(r.status, 404);
    assert_eq!(header(&r, "cache-control"), "no-store");
    // Public data may be cached by whoever wants to.
    let r = s.api.slots(1, FROM, 1).await;
    assert_ne!(header(&r, "cache-control"), "no-store");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn demo_tokens_are_never_cached() {
    let s = TestServer::start(StoreKind::Sqlite, &["--demo"]).await;
    let r = s.api.get("/api/comments/demo-token?role=user").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["token"].is_string());
    assert_eq!(header(&r, "cache-control"), "no-store");
    let r = s
        .api
        .send(
            s.api.http.post(
                s.api
                    .url("/api/voting/demo/voter?electionId=1&districtId=1"),
            ),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["token"].is_string());
    assert_eq!(header(&r, "cache-control"), "no-store");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_page_forbids_framing_and_sniffing() {
    let s = TestServer::start(StoreKind::Sqlite, &[]).await;
    for path in [
        "/",
        "/booking/",
        "/booking/manage",
        "/comments/",
        "/voting/",
        "/voting/results",
    ] {
        let r = s.api.get(path).await;
        assert_eq!(r.status, 200, "{path}");
        assert!(
            header(&r, "content-type").starts_with("text/html"),
            "{path}"
        );
        let csp = header(&r, "content-security-policy");
        for part in [
            "default-src 'none'",
            "script-src 'self'",
            "frame-ancestors 'none'",
            "base-uri 'none'",
        ] {
            assert!(csp.contains(part), "{path}: {part} in {csp:?}");
        }
        assert!(
            !csp.contains("script-src 'self' 'unsafe-inline'"),
            "{path}: no inline script allowed"
        );
        assert_eq!(header(&r, "x-frame-options"), "DENY", "{path}");
        assert_eq!(header(&r, "x-content-type-options"), "nosniff", "{path}");
        assert_eq!(header(&r, "referrer-policy"), "no-referrer", "{path}");
        // The page runs no inline script (the CSP would refuse it).
        assert!(
            !r.text().contains("<script>"),
            "{path} has an inline script"
        );
    }
    // Every answer, JSON and errors included, says nosniff.
    for path in ["/health", "/no/such/route"] {
        let r = s.api.get(path).await;
        assert_eq!(header(&r, "x-content-type-options"), "nosniff", "{path}");
        assert!(header(&r, "content-security-policy").is_empty(), "{path}");
    }
}

/// The pages run only their own files: every script a page names is served
/// from this origin as JavaScript, the shared client first.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_page_script_is_served_as_javascript() {
    let s = TestServer::start(StoreKind::Sqlite, &[]).await;
    for path in [
        "/booking/",
        "/booking/manage",
        "/comments/",
        "/voting/",
        "/voting/results",
        "/voting/receipt",
        "/docs/",
    ] {
        let page = s.api.get(path).await;
        assert_eq!(page.status, 200, "{path}");
        let html = page.text();
        let scripts: Vec<&str> = html
            .split(r#"<script src=""#)
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .collect();
        // The embedded widget carries its own copy of the client.
        let own: Vec<&&str> = scripts
            .iter()
            .filter(|src| !src.starts_with("/widget/"))
            .collect();
        assert_eq!(own.first(), Some(&&"/assets/throng.js"), "{path}");
        assert!(own.len() >= 2, "{path}: its own script too");
        for src in scripts {
            let r = s.api.get(src).await;
            assert_eq!(r.status, 200, "{path}: {src}");
            assert!(
                header(&r, "content-type").starts_with("text/javascript"),
                "{path}: {src}"
            );
            assert!(!r.text().is_empty(), "{path}: {src}");
        }
    }
}
