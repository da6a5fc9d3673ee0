//! Signing in to the admin console with an identity provider (OpenID
//! Connect, authorization code with PKCE): the test plays the provider on
//! loopback (discovery, key set, an authorization endpoint that sends the
//! browser back with a code, a token endpoint that checks the code, the
//! client and the PKCE verifier and answers an ID token signed with the
//! test's RSA key), and plays the browser, following each redirect itself.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use serde_json::{json, Map, Value};
use sha2::Digest;

use crate::both_stores;
use crate::helpers::{run_throng, store_flags, StoreKind, TestServer};
use crate::identity::{now_s, rsa_key, sign, TestKey};
use throng::platform::auth::Role;

both_stores!(
    the_provider_signs_a_person_in_to_the_console,
    states_are_bound_to_the_browser_used_once_and_expire,
    id_tokens_are_refused_for_what_is_wrong,
    the_providers_refusals_are_shown_in_words,
    the_provider_login_is_off_unless_configured,
);

const CLIENT_ID: &str = "throng-console";
const CLIENT_SECRET: &str = "s3cret/with+chars";

/// A code the fake provider handed out, with what its request said.
struct Grant {
    challenge: String,
    nonce: String,
    client_id: String,
    redirect_uri: String,
}

/// The fake provider's state.
struct Fake {
    issuer: String,
    key: TestKey,
    /// The person who signs in next: sub and realm roles.
    person: Mutex<(String, Vec<String>)>,
    /// Claims the next ID tokens carry instead of the right ones.
    tamper: Mutex<Map<String, Value>>,
    /// The authorization endpoint answers access_denied.
    deny: AtomicBool,
    /// The token endpoint compares the verifier with another challenge.
    break_pkce: AtomicBool,
    /// The authorization requests received.
    seen: Mutex<Vec<HashMap<String, String>>>,
    codes: Mutex<HashMap<String, Grant>>,
}

struct Idp {
    fake: Arc<Fake>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Idp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn authorize(
    State(fake): State<Arc<Fake>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    fake.seen.lock().unwrap().push(q.clone());
    let redirect = q["redirect_uri"].clone();
    let state = q.get("state").cloned().unwrap_or_default();
    if fake.deny.load(Ordering::SeqCst) {
        return Redirect::to(&format!(
            "{redirect}?error=access_denied&error_description=The+user+denied+the+request&state={state}"
        ))
        .into_response();
    }
    let code = uuid::Uuid::new_v4().to_string();
    fake.codes.lock().unwrap().insert(
        code.clone(),
        Grant {
            challenge: q["code_challenge"].clone(),
            nonce: q["nonce"].clone(),
            client_id: q["client_id"].clone(),
            redirect_uri: redirect.clone(),
        },
    );
    Redirect::to(&format!(
        "{redirect}?code={code}&state={state}&session_state=x"
    ))
    .into_response()
}

fn token_error(error: &str, description: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({"error": error, "error_description": description})),
    )
        .into_response()
}

async fn token(
    State(fake): State<Arc<Fake>>,
    headers: HeaderMap,
    Form(f): Form<HashMap<String, String>>,
) -> Response {
    let expected_basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!(
            "{CLIENT_ID}:{}",
            form_urlencoded::byte_serialize(CLIENT_SECRET.as_bytes()).collect::<String>()
        ))
    );
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(&expected_basic) {
        return token_error("invalid_client", "client authentication failed");
    }
    if f.get("grant_type").map(String::as_str) != Some("authorization_code") {
        return token_error("unsupported_grant_type", "");
    }
    let Some(grant) = fake.codes.lock().unwrap().remove(&f["code"]) else {
        return token_error("invalid_grant", "Code not valid");
    };
    if f.get("client_id") != Some(&grant.client_id) || grant.client_id != CLIENT_ID {
        return token_error("invalid_client", "client_id");
    }
    if f.get("redirect_uri") != Some(&grant.redirect_uri) {
        return token_error("invalid_grant", "Incorrect redirect_uri");
    }
    let verifier = f.get("code_verifier").cloned().unwrap_or_default();
    let mut challenge = B64.encode(sha2::Sha256::digest(verifier.as_bytes()));
    if fake.break_pkce.load(Ordering::SeqCst) {
        challenge.push('x');
    }
    if verifier.len() < 43 || challenge != grant.challenge {
        return token_error("invalid_grant", "PKCE verification failed: Code mismatch");
    }
    let (sub, roles) = fake.person.lock().unwrap().clone();
    let mut claims = json!({
        "iss": fake.issuer, "aud": CLIENT_ID, "azp": CLIENT_ID, "sub": sub,
        "iat": now_s(), "exp": now_s() + 300, "nonce": grant.nonce,
        "name": "Alice Admin", "email": "alice@example.org",
        "realm_access": {"roles": roles}, "throng_places": [3, 5],
    });
    for (k, v) in fake.tamper.lock().unwrap().iter() {
        claims[k] = v.clone();
    }
    axum::Json(
        json!({"access_token": "opaque", "token_type": "Bearer", "expires_in": 300,
                      "id_token": sign(&fake.key, &claims)}),
    )
    .into_response()
}

impl Idp {
    async fn start() -> Idp {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let issuer = format!("http://{addr}/realms/city");
        let key = rsa_key("rsa-login");
        let jwk = key.jwk.clone();
        let fake = Arc::new(Fake {
            issuer: issuer.clone(),
            key,
            person: Mutex::new(("alice".into(), vec!["city-admins".into()])),
            tamper: Mutex::new(Map::new()),
            deny: AtomicBool::new(false),
            break_pkce: AtomicBool::new(false),
            seen: Mutex::new(Vec::new()),
            codes: Mutex::new(HashMap::new()),
        });
        let doc = json!({
            "issuer": issuer, "jwks_uri": format!("{issuer}/certs"),
            "authorization_endpoint": format!("{issuer}/protocol/openid-connect/auth"),
            "token_endpoint": format!("{issuer}/protocol/openid-connect/token"),
        });
        let app = axum::Router::new()
            .route(
                "/realms/city/.well-known/openid-configuration",
                axum::routing::get(move || {
                    let doc = doc.clone();
                    async move { axum::Json(doc) }
                }),
            )
            .route(
                "/realms/city/certs",
                axum::routing::get(move || {
                    let jwk = jwk.clone();
                    async move { axum::Json(json!({ "keys": [jwk] })) }
                }),
            )
            .route(
                "/realms/city/protocol/openid-connect/auth",
                axum::routing::get(authorize),
            )
            .route(
                "/realms/city/protocol/openid-connect/token",
                axum::routing::post(token),
            )
            .with_state(fake.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Idp { fake, task }
    }

    fn flags(&self) -> Vec<String> {
        vec![
            "--oidc-issuer".into(),
            self.fake.issuer.clone(),
            "--oidc-client-id".into(),
            CLIENT_ID.into(),
            "--oidc-client-secret".into(),
            CLIENT_SECRET.into(),
            "--token-claims".into(),
            json!({"role-claim": "realm_access.roles",
                   "roles": {"city-admins": "admin", "booking-desk": "staff",
                             "reviewers": "user"},
                   "scopes": {"places": "throng_places"}})
            .to_string(),
        ]
    }

    fn sign_in_as(&self, sub: &str, roles: &[&str]) {
        *self.fake.person.lock().unwrap() =
            (sub.into(), roles.iter().map(|r| r.to_string()).collect());
    }

    fn tamper(&self, claims: Value) {
        *self.fake.tamper.lock().unwrap() = claims.as_object().cloned().unwrap_or_default();
    }
}

async fn start(kind: StoreKind, idp: &Idp) -> TestServer {
    let flags = idp.flags();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    TestServer::start(kind, &flags).await
}

/// A browser that follows no redirect by itself.
fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(std::time::Duration::from_secs(20))
        .build()
        .unwrap()
}

struct Answer {
    status: u16,
    location: String,
    set_cookies: Vec<String>,
    body: String,
}

impl Answer {
    /// The `name=value` of the Set-Cookie naming `name`.
    fn cookie(&self, name: &str) -> Option<String> {
        self.set_cookies
            .iter()
            .find(|c| c.starts_with(&format!("{name}=")))
            .map(|c| c.split(';').next().unwrap().to_string())
    }

    fn set_cookie(&self, name: &str) -> &str {
        self.set_cookies
            .iter()
            .find(|c| c.starts_with(&format!("{name}=")))
            .unwrap_or_else(|| panic!("a Set-Cookie for {name}: {:?}", self.set_cookies))
    }

    /// The refusal page's code.
    fn refusal(&self) -> String {
        let at = self
            .body
            .find("data-code=\"")
            .unwrap_or_else(|| panic!("a refusal page: {} {}", self.status, self.body));
        let rest = &self.body[at + 11..];
        rest[..rest.find('"').unwrap()].to_string()
    }
}

async fn get(http: &reqwest::Client, url: &str, cookie: Option<&str>) -> Answer {
    let mut req = http.get(url);
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let location = res
        .headers()
        .get("location")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let set_cookies = res
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let body = res.text().await.unwrap();
    Answer {
        status,
        location,
        set_cookies,
        body,
    }
}

/// A sign-in up to the provider's answer: the login's answer (with its
/// state cookie) and the callback URL the provider sent the browser to.
async fn to_provider_and_back(s: &TestServer, http: &reqwest::Client) -> (Answer, String) {
    let login = get(http, &s.api.url("/admin/oidc/login"), None).await;
    assert_eq!(login.status, 302, "{}", login.body);
    let back = get(http, &login.location, None).await;
    assert_eq!(back.status, 303, "the provider redirects: {}", back.body);
    (login, back.location)
}

/// A whole sign-in: the callback's answer.
async fn sign_in(s: &TestServer, http: &reqwest::Client) -> Answer {
    let (login, callback) = to_provider_and_back(s, http).await;
    let cookie = login.cookie("throng_oidc").expect("a state cookie");
    get(http, &callback, Some(&cookie)).await
}

fn query_of(url: &str) -> HashMap<String, String> {
    let q = url.split_once('?').map(|(_, q)| q).unwrap_or("");
    form_urlencoded::parse(q.as_bytes()).into_owned().collect()
}

async fn the_provider_signs_a_person_in_to_the_console(kind: StoreKind) {
    let idp = Idp::start().await;
    let s = start(kind, &idp).await;
    let http = browser();

    let status = s.api.get("/api/admin/oidc").await;
    assert_eq!(status.status, 200);
    assert_eq!(status.json()["enabled"], true);
    assert_eq!(status.json()["login"], "/admin/oidc/login");

    let login = get(&http, &s.api.url("/admin/oidc/login"), None).await;
    assert_eq!(login.status, 302, "{}", login.body);
    assert!(
        login.location.starts_with(&format!(
            "{}/protocol/openid-connect/auth?",
            idp.fake.issuer
        )),
        "{}",
        login.location
    );
    let q = query_of(&login.location);
    assert_eq!(q["response_type"], "code");
    assert_eq!(q["client_id"], CLIENT_ID);
    assert_eq!(
        q["redirect_uri"],
        s.api.url("/admin/oidc/callback"),
        "PUBLIC_URL/admin/oidc/callback"
    );
    assert_eq!(q["scope"], "openid profile email");
    assert_eq!(q["code_challenge_method"], "S256");
    for k in ["state", "nonce", "code_challenge"] {
        assert_eq!(q[k].len(), 43, "{k}: 32 bytes, base64url");
    }
    assert_ne!(q["state"], q["nonce"]);
    let set = login.set_cookie("throng_oidc");
    for part in [
        "HttpOnly",
        "SameSite=Lax",
        "Path=/admin/oidc/callback",
        "Max-Age=600",
    ] {
        assert!(set.contains(part), "{set}");
    }
    assert_eq!(
        login.cookie("throng_oidc").unwrap(),
        format!("throng_oidc={}", q["state"])
    );

    let back = get(&http, &login.location, None).await;
    assert_eq!(back.status, 303);
    let done = get(
        &http,
        &back.location,
        Some(&login.cookie("throng_oidc").unwrap()),
    )
    .await;
    assert_eq!(done.status, 303, "{}", done.body);
    assert_eq!(done.location, s.api.url("/admin/"));
    assert!(
        done.set_cookie("throng_oidc").contains("Max-Age=0"),
        "the state cookie is cleared"
    );
    let session_set = done.set_cookie("throng_session");
    assert!(
        session_set.contains("SameSite=Strict") && session_set.contains("HttpOnly"),
        "{session_set}"
    );
    let session = done.cookie("throng_session").unwrap();
    let who = get(&http, &s.api.url("/api/admin/session"), Some(&session)).await;
    assert_eq!(who.status, 200, "{}", who.body);
    let who: Value = serde_json::from_str(&who.body).unwrap();
    assert_eq!(who["sub"], "alice");
    assert_eq!(who["role"], "admin", "city-admins maps to admin");
    assert_eq!(who["claims"]["email"], "alice@example.org");
    assert!(
        who["claims"].get("nonce").is_none() && who["claims"].get("aud").is_none(),
        "the token's own claims are not kept: {who}"
    );

    // The sign-in is in the audit log, by way of the provider.
    let audit = s
        .api
        .send(
            s.api
                .http
                .get(s.api.url("/api/admin/audit?service=console"))
                .bearer_auth(s.token(Role::ADMIN)),
        )
        .await;
    assert_eq!(audit.status, 200, "{}", audit.text());
    let events = audit.json()["events"].as_array().unwrap().clone();
    assert!(
        events.iter().any(|e| e["via"] == "oidc"
            && e["sub"] == "alice"
            && e["path"] == "/admin/oidc/callback"
            && e["status"] == 303),
        "{events:?}"
    );

    // A staff member's places come from the mapped claim.
    idp.sign_in_as("desk-1", &["booking-desk"]);
    let done = sign_in(&s, &http).await;
    assert_eq!(done.status, 303, "{}", done.body);
    let who = get(
        &http,
        &s.api.url("/api/admin/session"),
        Some(&done.cookie("throng_session").unwrap()),
    )
    .await;
    let who: Value = serde_json::from_str(&who.body).unwrap();
    assert_eq!(who["role"], "staff");
    assert_eq!(who["claims"]["places"], json!([3, 5]));

    // A login_hint is passed on.
    let login = get(
        &http,
        &s.api
            .url("/admin/oidc/login?login_hint=alice%40example.org"),
        None,
    )
    .await;
    assert_eq!(query_of(&login.location)["login_hint"], "alice@example.org");
}

async fn states_are_bound_to_the_browser_used_once_and_expire(kind: StoreKind) {
    let idp = Idp::start().await;
    let s = start(kind, &idp).await;
    let http = browser();

    // Without the cookie (another browser), or with another sign-in's.
    let (login, callback) = to_provider_and_back(&s, &http).await;
    let r = get(&http, &callback, None).await;
    assert_eq!(
        (r.status, r.refusal().as_str()),
        (400, "state_not_this_browser")
    );
    assert!(r.body.contains("/admin/oidc/login"), "a link to try again");
    let (other, _) = to_provider_and_back(&s, &http).await;
    let r = get(
        &http,
        &callback,
        Some(&other.cookie("throng_oidc").unwrap()),
    )
    .await;
    assert_eq!((r.status, r.refusal().as_str()), (400, "state_mismatch"));
    // A state the server never made, with a cookie to match it.
    let forged = "A".repeat(43);
    let q = query_of(&callback);
    let r = get(
        &http,
        &s.api.url(&format!(
            "/admin/oidc/callback?code={}&state={forged}",
            q["code"]
        )),
        Some(&format!("throng_oidc={forged}")),
    )
    .await;
    assert_eq!((r.status, r.refusal().as_str()), (400, "state_used"));
    // The right one signs in; replayed, it is refused.
    let cookie = login.cookie("throng_oidc").unwrap();
    let r = get(&http, &callback, Some(&cookie)).await;
    assert_eq!(r.status, 303, "{}", r.body);
    let r = get(&http, &callback, Some(&cookie)).await;
    assert_eq!((r.status, r.refusal().as_str()), (400, "state_used"));
    // No code and state at all.
    let r = get(&http, &s.api.url("/admin/oidc/callback"), None).await;
    assert_eq!(
        (r.status, r.refusal().as_str()),
        (400, "callback_incomplete")
    );

    // Past its lifetime.
    let (login, callback) = to_provider_and_back(&s, &http).await;
    s.state.sessions.clock().advance(601_000);
    let r = get(
        &http,
        &callback,
        Some(&login.cookie("throng_oidc").unwrap()),
    )
    .await;
    assert_eq!((r.status, r.refusal().as_str()), (400, "state_expired"));
    assert!(r.body.contains("10 minutes"), "{}", r.body);
}

async fn id_tokens_are_refused_for_what_is_wrong(kind: StoreKind) {
    let idp = Idp::start().await;
    let s = start(kind, &idp).await;
    let http = browser();
    for (claims, status, code) in [
        (json!({"nonce": "another-sign-in"}), 401, "nonce_mismatch"),
        (json!({"aud": "another-app"}), 401, "wrong_audience"),
        (json!({"exp": now_s() - 60}), 401, "token_expired"),
        (
            json!({"iss": "https://evil.example.org"}),
            401,
            "wrong_issuer",
        ),
    ] {
        idp.tamper(claims.clone());
        let r = sign_in(&s, &http).await;
        assert_eq!(
            (r.status, r.refusal().as_str()),
            (status, code),
            "{claims}: {}",
            r.body
        );
        assert!(
            r.cookie("throng_session").is_none(),
            "no session for {claims}"
        );
    }
    idp.tamper(json!({}));
    // A role the mapping does not know.
    idp.sign_in_as("guest", &["offline_access"]);
    let r = sign_in(&s, &http).await;
    assert_eq!((r.status, r.refusal().as_str()), (403, "role_not_mapped"));
    assert!(r.body.contains("offline_access"), "{}", r.body);
    assert!(r.cookie("throng_session").is_none());
    // A role that maps to a throng role which does not use the console.
    idp.sign_in_as("reader", &["reviewers"]);
    let r = sign_in(&s, &http).await;
    assert_eq!(
        (r.status, r.refusal().as_str()),
        (403, "not_a_console_role")
    );
    assert!(r.body.contains("&#39;user&#39;"), "{}", r.body);
    assert!(r.cookie("throng_session").is_none());
}

async fn the_providers_refusals_are_shown_in_words(kind: StoreKind) {
    let idp = Idp::start().await;
    let s = start(kind, &idp).await;
    let http = browser();
    // The person declines at the provider.
    idp.fake.deny.store(true, Ordering::SeqCst);
    let r = sign_in(&s, &http).await;
    assert_eq!((r.status, r.refusal().as_str()), (403, "access_denied"));
    assert!(
        r.body.contains("access was denied") && r.body.contains("The user denied the request"),
        "{}",
        r.body
    );
    assert!(r.body.contains("Try signing in again"), "{}", r.body);
    idp.fake.deny.store(false, Ordering::SeqCst);
    // The token endpoint refuses the verifier.
    idp.fake.break_pkce.store(true, Ordering::SeqCst);
    let r = sign_in(&s, &http).await;
    assert_eq!((r.status, r.refusal().as_str()), (401, "code_refused"));
    assert!(r.body.contains("PKCE verification failed"), "{}", r.body);
    assert!(r.cookie("throng_session").is_none());
    idp.fake.break_pkce.store(false, Ordering::SeqCst);
    assert_eq!(sign_in(&s, &http).await.status, 303);
}

async fn the_provider_login_is_off_unless_configured(kind: StoreKind) {
    let s = TestServer::start(kind, &[]).await;
    let http = browser();
    let r = get(&http, &s.api.url("/admin/oidc/login"), None).await;
    assert_eq!(
        (r.status, r.refusal().as_str()),
        (404, "provider_login_off")
    );
    assert!(r.body.contains("throng admin link"), "{}", r.body);
    let r = get(
        &http,
        &s.api.url("/admin/oidc/callback?code=x&state=y"),
        None,
    )
    .await;
    assert_eq!(r.status, 404);
    let status = s.api.get("/api/admin/oidc").await;
    assert_eq!(status.json()["enabled"], false);

    // A client id without the provider's issuer is refused at start.
    let dir = tempfile::TempDir::new().unwrap();
    let mut args: Vec<String> = vec![
        "serve".into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--oidc-client-id".into(),
        CLIENT_ID.into(),
    ];
    args.extend(store_flags(dir.path(), None));
    let (ok, out) = run_throng(&args).await;
    assert!(!ok, "{out}");
    assert!(out.contains("--oidc-issuer"), "{out}");
    // And its secret never reaches the log.
    let mut args: Vec<String> = vec![
        "serve".into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--oidc-client-secret".into(),
        CLIENT_SECRET.into(),
    ];
    args.extend(store_flags(dir.path(), None));
    let (ok, out) = run_throng(&args).await;
    assert!(!ok, "{out}");
    assert!(
        out.contains("--oidc-client-id") && !out.contains(CLIENT_SECRET),
        "{out}"
    );
}
