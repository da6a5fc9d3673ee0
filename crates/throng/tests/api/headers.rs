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
        "/booking/staff/",
        "/booking/admin/",
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
/// from this origin as JavaScript, the shared client first (after the
/// language script, which a page loads in its head).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_page_script_is_served_as_javascript() {
    let s = TestServer::start(StoreKind::Sqlite, &[]).await;
    for path in [
        "/booking/",
        "/booking/manage",
        "/booking/staff/",
        "/booking/admin/",
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
        // The embedded widget carries its own copy of the client; the
        // language script comes before it.
        let own: Vec<&&str> = scripts
            .iter()
            .filter(|src| !src.starts_with("/widget/") && !src.starts_with("/assets/i18n."))
            .collect();
        // The client, by its plain or content-hashed name.
        let client = own.first().map(|c| c.to_string()).unwrap_or_default();
        assert!(
            client == "/assets/throng.js"
                || (client.starts_with("/assets/throng.") && client.ends_with(".js")),
            "{path}: {client}"
        );
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

/// The names a page's `src="..."` and `href="..."` give.
fn referenced(html: &str) -> Vec<String> {
    let mut out = Vec::new();
    for attr in [r#"src=""#, r#"href=""#] {
        for rest in html.split(attr).skip(1) {
            if let Some(path) = rest.split('"').next() {
                out.push(path.to_string());
            }
        }
    }
    out
}

/// A page never goes silent under a per-client rate limit: its scripts and
/// style are named by content (`/assets/...`, cached as immutable) and are
/// answered whatever the client's rate; once the client is over its rate a
/// page load is answered by a page that says so and reloads itself after
/// `Retry-After` (and a script's fetch by the JSON envelope, as before).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn static_files_pass_the_rate_limit_and_a_refused_page_says_so() {
    // A burst of one page load each.
    let flags = ["--rate-limit-per-s", "1", "--rate-limit-burst", "4"];
    let s = TestServer::start(StoreKind::Sqlite, &flags).await;
    let api = &s.api;
    let mut pages = Vec::new();
    for path in [
        "/booking/",
        "/booking/manage",
        "/booking/staff/",
        "/booking/admin/",
    ] {
        let r = api.get(path).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(header(&r, "cache-control"), "no-cache", "{path}");
        pages.push((path, r.text()));
    }
    // Now over its rate (at most a few more): the API refuses this client.
    let mut refused = false;
    for _ in 0..5 {
        if api.get("/api/booking/places").await.status == 429 {
            refused = true;
            break;
        }
    }
    assert!(refused, "the client is over its rate");
    // Far more files than its burst of 4 and 1 a second would allow.
    for (path, html) in &pages {
        let files: Vec<String> = referenced(html)
            .into_iter()
            .filter(|p| p.ends_with(".js") || p.ends_with(".css"))
            .collect();
        assert!(files.len() >= 3, "{path}: {files:?}");
        for file in files {
            assert!(
                file.starts_with("/assets/"),
                "{path} names {file} by content"
            );
            for _ in 0..3 {
                let r = api.get(&file).await;
                assert_eq!(r.status, 200, "{path}: {file}");
                assert_eq!(
                    header(&r, "cache-control"),
                    "public, max-age=31536000, immutable",
                    "{file}"
                );
                let want = if file.ends_with(".css") {
                    "text/css"
                } else {
                    "text/javascript"
                };
                assert!(header(&r, "content-type").starts_with(want), "{file}");
                assert!(!r.body.is_empty(), "{file}");
            }
        }
    }
    // A browser's page load while over the rate: a page with a reason, a
    // refresh after Retry-After and a link to try again.
    let mut r = None;
    for _ in 0..5 {
        let got = api
            .send(
                api.http
                    .get(api.url("/booking/"))
                    .header("accept", "text/html,application/xhtml+xml,*/*;q=0.8"),
            )
            .await;
        if got.status == 429 {
            r = Some(got);
            break;
        }
    }
    let r = r.expect("a page load over the rate is refused");
    assert!(header(&r, "content-type").starts_with("text/html"));
    let wait: u64 = header(&r, "retry-after")
        .parse()
        .expect("Retry-After in seconds");
    assert!(wait >= 1);
    let body = r.text();
    assert!(
        body.contains(&format!(r#"<meta http-equiv="refresh" content="{wait}">"#)),
        "{body}"
    );
    assert!(
        body.contains("Try again now") && body.contains("Many people"),
        "{body}"
    );
    assert!(!body.contains("<script"), "{body}");
    // A script's request still gets the envelope.
    for _ in 0..5 {
        let r = api
            .send(api.http.get(api.url("/booking/")).header("accept", "*/*"))
            .await;
        if r.status == 429 {
            r.assert_error(429, "too_many_requests");
            return;
        }
    }
    panic!("a script's request over the rate is refused");
}

/// The plain names pages used before stay served (a page loaded before an
/// upgrade), asked for again each time; a file's hashed name changes with
/// its content only.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn plain_file_names_stay_served_and_hashed_names_are_stable() {
    let s = TestServer::start(StoreKind::Sqlite, &[]).await;
    let api = &s.api;
    for path in [
        "/booking/app.js",
        "/booking/common.js",
        "/booking/style.css",
        "/booking/limits.js",
        "/assets/throng.js",
    ] {
        let r = api.get(path).await;
        assert_eq!(r.status, 200, "{path}");
        assert!(!r.body.is_empty());
    }
    assert_eq!(
        header(&api.get("/booking/app.js").await, "cache-control"),
        "no-cache"
    );
    let first = referenced(&api.get("/booking/").await.text());
    let again = referenced(&api.get("/booking/").await.text());
    assert_eq!(first, again);
    let plain = api.get("/booking/common.js").await.body;
    let hashed = first
        .iter()
        .find(|p| p.starts_with("/assets/booking/common."))
        .expect("common.js by its hashed name");
    assert_eq!(
        api.get(hashed).await.body,
        plain,
        "the same file under both names"
    );
}
