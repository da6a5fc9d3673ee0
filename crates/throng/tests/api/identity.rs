//! Tokens from an identity provider: the test plays the provider, with
//! keys it makes and serves as a JWKS (and a discovery document) from its
//! own loopback HTTP server; and the revocation of tokens, throng's own and
//! the provider's, on both stores and across nodes.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use crate::helpers::{run_throng, store_flags, Reply, StoreKind, TestServer};
use crate::{both_stores, postgres_only};
use throng::platform::auth::Role;

both_stores!(
    rs256_es256_and_eddsa_tokens_are_accepted,
    provider_tokens_are_refused_for_what_is_wrong,
    tokens_are_revoked_by_jti_and_by_subject,
    a_mapped_staff_role_is_held_to_its_places,
);
postgres_only!(a_revocation_reaches_every_node);

const AUDIENCE: &str = "throng-api";

/// The mapping the tests configure: Keycloak-style realm roles.
fn mapping() -> String {
    json!({
        "role-claim": "realm_access.roles",
        "roles": {"city-admins": "admin", "booking-desk": "staff"},
        "scopes": {"places": "throng_places"}
    })
    .to_string()
}

/// A signing key of the test provider's, and its public JWK.
pub(crate) struct TestKey {
    kid: String,
    alg: Algorithm,
    encoding: EncodingKey,
    pub(crate) jwk: Value,
    /// The public key as PEM (RSA only): what an attacker would use as
    /// an HMAC secret.
    public_pem: Option<String>,
}

pub(crate) fn rsa_key(kid: &str) -> TestKey {
    use rsa::pkcs1::EncodeRsaPrivateKey;
    use rsa::pkcs8::{EncodePublicKey, LineEnding};
    use rsa::traits::PublicKeyParts;
    let key = rsa::RsaPrivateKey::new(&mut rand::thread_rng(), 2048).expect("an RSA key");
    let der = key.to_pkcs1_der().expect("PKCS#1 DER");
    let public = key.to_public_key();
    TestKey {
        kid: kid.into(),
        alg: Algorithm::RS256,
        encoding: EncodingKey::from_rsa_der(der.as_bytes()),
        jwk: json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                    "n": B64.encode(public.n().to_bytes_be()),
                    "e": B64.encode(public.e().to_bytes_be())}),
        public_pem: Some(public.to_public_key_pem(LineEnding::LF).unwrap()),
    }
}

fn ec_key(kid: &str) -> TestKey {
    use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let pair =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
    let point = pair.public_key().as_ref();
    assert_eq!(point.len(), 65, "an uncompressed P-256 point");
    TestKey {
        kid: kid.into(),
        alg: Algorithm::ES256,
        encoding: EncodingKey::from_ec_der(pkcs8.as_ref()),
        jwk: json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "alg": "ES256",
                    "x": B64.encode(&point[1..33]), "y": B64.encode(&point[33..])}),
        public_pem: None,
    }
}

fn ed_key(kid: &str) -> TestKey {
    use ring::signature::{Ed25519KeyPair, KeyPair};
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    TestKey {
        kid: kid.into(),
        alg: Algorithm::EdDSA,
        encoding: EncodingKey::from_ed_der(pkcs8.as_ref()),
        jwk: json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "use": "sig", "alg": "EdDSA",
                    "x": B64.encode(pair.public_key().as_ref())}),
        public_pem: None,
    }
}

pub(crate) fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The test provider: a loopback HTTP server with a key set (that the
/// test changes) and a discovery document.
struct Idp {
    issuer: String,
    keys: Arc<Mutex<Vec<Value>>>,
    /// Key set fetches served.
    fetches: Arc<AtomicUsize>,
    /// While set, the key set answers 500.
    failing: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Idp {
    async fn start(keys: &[&TestKey]) -> Idp {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let issuer = format!("http://{addr}/realms/city");
        let served = Arc::new(Mutex::new(
            keys.iter().map(|k| k.jwk.clone()).collect::<Vec<Value>>(),
        ));
        let fetches = Arc::new(AtomicUsize::new(0));
        let failing = Arc::new(AtomicBool::new(false));
        let app = {
            let (served, fetches, failing) = (served.clone(), fetches.clone(), failing.clone());
            let doc = json!({"issuer": issuer, "jwks_uri": format!("{issuer}/certs"),
                             "id_token_signing_alg_values_supported": ["RS256", "ES256", "EdDSA"]});
            axum::Router::new()
                .route(
                    "/realms/city/certs",
                    axum::routing::get(move || {
                        let (served, fetches, failing) =
                            (served.clone(), fetches.clone(), failing.clone());
                        async move {
                            fetches.fetch_add(1, Ordering::SeqCst);
                            if failing.load(Ordering::SeqCst) {
                                return Err(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
                            }
                            let keys = served.lock().unwrap().clone();
                            Ok(axum::Json(json!({ "keys": keys })))
                        }
                    }),
                )
                .route(
                    "/realms/city/.well-known/openid-configuration",
                    axum::routing::get(move || {
                        let doc = doc.clone();
                        async move { axum::Json(doc) }
                    }),
                )
        };
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Idp {
            issuer,
            keys: served,
            fetches,
            failing,
            task,
        }
    }

    fn jwks_url(&self) -> String {
        format!("{}/certs", self.issuer)
    }

    fn serve_keys(&self, keys: &[&TestKey]) {
        *self.keys.lock().unwrap() = keys.iter().map(|k| k.jwk.clone()).collect();
    }

    /// Claims of a token of this provider's for throng, with `roles` in
    /// Keycloak's realm roles.
    fn claims(&self, sub: &str, roles: &[&str]) -> Value {
        json!({
            "iss": self.issuer, "aud": AUDIENCE, "sub": sub,
            "iat": now_s(), "exp": now_s() + 600,
            "jti": uuid::Uuid::new_v4().to_string(),
            "name": "Test Person",
            "realm_access": {"roles": roles},
        })
    }

    /// `serve` flags accepting this provider's tokens through its key set.
    fn flags(&self) -> Vec<String> {
        vec![
            "--jwks-url".into(),
            self.jwks_url(),
            "--token-issuer".into(),
            self.issuer.clone(),
            "--token-audience".into(),
            AUDIENCE.into(),
            "--token-claims".into(),
            mapping(),
            "--jwks-refetch-min-ms".into(),
            "100".into(),
            "--revocation-refresh-ms".into(),
            "200".into(),
        ]
    }
}

impl Drop for Idp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub(crate) fn sign(key: &TestKey, claims: &Value) -> String {
    let mut header = Header::new(key.alg);
    header.kid = Some(key.kid.clone());
    jsonwebtoken::encode(&header, claims, &key.encoding).expect("signs")
}

async fn start(kind: StoreKind, idp: &Idp, extra: &[&str]) -> TestServer {
    let mut flags = idp.flags();
    flags.extend(extra.iter().map(|s| s.to_string()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    TestServer::start(kind, &flags).await
}

async fn get_as(s: &TestServer, path: &str, bearer: &str) -> Reply {
    s.api
        .send(s.api.http.get(s.api.url(path)).bearer_auth(bearer))
        .await
}

const REVOCATIONS: &str = "/api/admin/tokens/revocations";

/// An admin-only read: whether `token` passes as an admin.
async fn admin_read(s: &TestServer, token: &str) -> Reply {
    get_as(s, REVOCATIONS, token).await
}

async fn revoke(s: &TestServer, body: Value) -> Reply {
    s.api
        .send(
            s.api
                .http
                .post(s.api.url(REVOCATIONS))
                .bearer_auth(s.token(Role::ADMIN))
                .json(&body),
        )
        .await
}

/// The claims of a token, read without checking it.
fn payload(token: &str) -> Value {
    let part = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&B64.decode(part).unwrap()).unwrap()
}

async fn rs256_es256_and_eddsa_tokens_are_accepted(kind: StoreKind) {
    let (rsa, ec, ed) = (rsa_key("rsa-1"), ec_key("ec-1"), ed_key("ed-1"));
    let idp = Idp::start(&[&rsa, &ec, &ed]).await;
    let s = start(kind, &idp, &[]).await;
    for key in [&rsa, &ec, &ed] {
        let token = sign(key, &idp.claims("boss", &["city-admins"]));
        let r = admin_read(&s, &token).await;
        assert_eq!(r.status, 200, "{:?}: {}", key.alg, r.text());
    }
    // throng's own tokens keep working beside the provider's, and carry a
    // jti so they can be revoked.
    let own = s.token(Role::ADMIN);
    assert_eq!(admin_read(&s, &own).await.status, 200);
    assert!(payload(&own)["jti"].as_str().is_some_and(|j| j.len() >= 32));
    // A provider token whose roles map to no throng role.
    let r = admin_read(&s, &sign(&rsa, &idp.claims("guest", &["offline_access"]))).await;
    let message = r.assert_error(403, "role_not_mapped");
    assert!(message.contains("offline_access"), "{message}");
    // A mapped role that is not admin passes the check of its own role only.
    let desk = idp.claims("desk-1", &["booking-desk"]);
    let mut desk = desk.as_object().unwrap().clone();
    desk.insert("throng_places".into(), json!([1]));
    admin_read(&s, &sign(&ec, &Value::Object(desk)))
        .await
        .assert_error(403, "forbidden");
}

async fn provider_tokens_are_refused_for_what_is_wrong(kind: StoreKind) {
    let (rsa, ec) = (rsa_key("rsa-1"), ec_key("ec-1"));
    let idp = Idp::start(&[&rsa, &ec]).await;
    let s = start(kind, &idp, &[]).await;
    let good = idp.claims("boss", &["city-admins"]);
    let with = |key: &str, value: Value| {
        let mut c = good.as_object().unwrap().clone();
        c.insert(key.into(), value);
        Value::Object(c)
    };

    let r = admin_read(
        &s,
        &sign(&rsa, &with("iss", json!("https://evil.example.org"))),
    )
    .await;
    r.assert_error(401, "wrong_issuer");
    let r = admin_read(&s, &sign(&rsa, &with("aud", json!("another-app")))).await;
    r.assert_error(401, "wrong_audience");
    let r = admin_read(&s, &sign(&rsa, &with("exp", json!(now_s() - 60)))).await;
    r.assert_error(401, "token_expired");

    // The header names the EC key but says RS256 (signed with the RSA key).
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(ec.kid.clone());
    let token = jsonwebtoken::encode(&header, &good, &rsa.encoding).unwrap();
    admin_read(&s, &token)
        .await
        .assert_error(401, "wrong_algorithm");

    // Algorithm confusion: HS256 with the RSA public key as the secret,
    // naming the RSA key, or the provider as issuer.
    let secret = EncodingKey::from_secret(rsa.public_pem.as_ref().unwrap().as_bytes());
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(rsa.kid.clone());
    let token = jsonwebtoken::encode(&header, &good, &secret).unwrap();
    admin_read(&s, &token)
        .await
        .assert_error(401, "wrong_algorithm");
    let token = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &good, &secret).unwrap();
    admin_read(&s, &token)
        .await
        .assert_error(401, "wrong_algorithm");
    // An HS256 token that claims nothing of the provider's is checked with
    // throng's secret, and fails there.
    let mut stranger = good.as_object().unwrap().clone();
    stranger.remove("iss");
    let token = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &stranger, &secret).unwrap();
    admin_read(&s, &token)
        .await
        .assert_error(401, "invalid_token");
    // alg none: no signature at all.
    let none = format!(
        "{}.{}.",
        B64.encode(br#"{"alg":"none","typ":"JWT"}"#),
        B64.encode(good.to_string())
    );
    admin_read(&s, &none)
        .await
        .assert_error(401, "invalid_token");
    // A signature by a key the provider does not have.
    let stray = ec_key("ec-1");
    admin_read(&s, &sign(&stray, &good))
        .await
        .assert_error(401, "invalid_token");
    // A key id the provider does not have.
    let unknown = ec_key("ec-9");
    let r = admin_read(&s, &sign(&unknown, &good)).await;
    let message = r.assert_error(401, "unknown_key");
    assert!(message.contains("ec-9"), "{message}");
}

async fn tokens_are_revoked_by_jti_and_by_subject(kind: StoreKind) {
    let ed = ed_key("ed-1");
    let idp = Idp::start(&[&ed]).await;
    let s = start(kind, &idp, &[]).await;

    // One provider token, by its jti, through the API.
    let claims = idp.claims("boss", &["city-admins"]);
    let (token, other) = (
        sign(&ed, &claims),
        sign(&ed, &idp.claims("boss", &["city-admins"])),
    );
    assert_eq!(admin_read(&s, &token).await.status, 200);
    let r = revoke(
        &s,
        json!({"jti": claims["jti"], "reason": "leaked in a log"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["kind"], "jti");
    admin_read(&s, &token)
        .await
        .assert_error(401, "token_revoked");
    assert_eq!(admin_read(&s, &other).await.status, 200, "its other token");

    // Every token of a subject issued up to the revocation.
    let r = revoke(&s, json!({"sub": "boss", "until": "2099-01-01T00:00:00Z"})).await;
    assert_eq!(r.status, 422, "more than 366 days ahead: {}", r.text());
    let r = revoke(&s, json!({"sub": "boss"})).await;
    assert_eq!(r.status, 201, "{}", r.text());
    admin_read(&s, &other)
        .await
        .assert_error(401, "token_revoked");
    let mut later = idp.claims("boss", &["city-admins"]);
    later["iat"] = json!(now_s() + 2);
    assert_eq!(
        admin_read(&s, &sign(&ed, &later)).await.status,
        200,
        "a token issued after the revocation"
    );
    revoke(&s, json!({"jti": "x", "sub": "y"}))
        .await
        .assert_error(422, "invalid_field");
    let list = admin_read(&s, &s.token(Role::ADMIN)).await.json();
    assert_eq!(list["revocations"].as_array().unwrap().len(), 2, "{list}");

    // throng's own token, by its jti, from the command line: the serving
    // node reads it from the store within --revocation-refresh-ms.
    let own = s.token(Role::ADMIN);
    assert_eq!(admin_read(&s, &own).await.status, 200);
    let mut args: Vec<String> = vec!["token".into(), "revoke".into(), "--jti".into()];
    args.push(payload(&own)["jti"].as_str().unwrap().into());
    args.extend(store_flags(
        &s.data_dir,
        s.pg.as_ref().map(|p| p.url.as_str()),
    ));
    let (ok, out) = run_throng(&args).await;
    assert!(ok, "{out}");
    assert!(out.contains("revoked token"), "{out}");
    let mut refused = false;
    for _ in 0..50 {
        if admin_read(&s, &own).await.status == 401 {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(refused, "the node did not read the revocation within 5 s");
    admin_read(&s, &own)
        .await
        .assert_error(401, "token_revoked");
}

async fn a_mapped_staff_role_is_held_to_its_places(kind: StoreKind) {
    let rsa = rsa_key("rsa-1");
    let idp = Idp::start(&[&rsa]).await;
    let mut flags = idp.flags();
    flags.push("--jwks-refresh-s".into());
    flags.push("600".into());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let s = TestServer::start_seeded(kind, &flags, Some((3, 1, 5))).await;
    let list = |place: i64| {
        format!(
            "/api/booking/places/{place}/days/{}/registrations",
            crate::helpers::FROM
        )
    };
    let mut claims = idp.claims("desk-1", &["offline_access", "booking-desk"]);
    claims["throng_places"] = json!([1]);
    // The provider's own `places` claim is not the mapped one.
    claims["places"] = json!("*");
    let token = sign(&rsa, &claims);
    let r = get_as(&s, &list(1), &token).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let message = get_as(&s, &list(2), &token)
        .await
        .assert_error(403, "not_your_place");
    assert!(message.contains("not place 2"), "{message}");
    // Without the scope claim the staff role covers nothing.
    let mut bare = idp.claims("desk-2", &["booking-desk"]);
    bare["places"] = json!("*");
    get_as(&s, &list(1), &sign(&rsa, &bare))
        .await
        .assert_error(403, "no_places");
}

async fn a_revocation_reaches_every_node(kind: StoreKind) {
    let ec = ec_key("ec-1");
    let idp = Idp::start(&[&ec]).await;
    let a = start(kind, &idp, &[]).await;
    let flags = idp.flags();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let b = a.start_sharing(&flags).await;
    let claims = idp.claims("boss", &["city-admins"]);
    let token = sign(&ec, &claims);
    assert_eq!(admin_read(&b, &token).await.status, 200);
    let own = a.token(Role::ADMIN);
    assert_eq!(
        admin_read(&b, &own).await.status,
        200,
        "the nodes share secrets"
    );
    assert_eq!(revoke(&a, json!({"jti": claims["jti"]})).await.status, 201);
    assert_eq!(
        revoke(&a, json!({"jti": payload(&own)["jti"]}))
            .await
            .status,
        201
    );
    let started = std::time::Instant::now();
    loop {
        let (r1, r2) = (admin_read(&b, &token).await, admin_read(&b, &own).await);
        if r1.status == 401 && r2.status == 401 {
            r1.assert_error(401, "token_revoked");
            r2.assert_error(401, "token_revoked");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the second node did not refuse the revoked tokens within 5 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The staleness bound: the refresh interval plus a read.
    assert!(started.elapsed() < Duration::from_millis(2000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_key_rotation_is_picked_up_and_a_failed_fetch_keeps_the_keys() {
    let (old, new) = (rsa_key("2026-01"), ec_key("2026-02"));
    let idp = Idp::start(&[&old]).await;
    let s = start(StoreKind::Sqlite, &idp, &[]).await;
    let claims = idp.claims("boss", &["city-admins"]);
    assert_eq!(admin_read(&s, &sign(&old, &claims)).await.status, 200);
    let fetched = idp.fetches.load(Ordering::SeqCst);

    // The provider fails for a while: the last good keys stay in use.
    idp.failing.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let stray = ec_key("2026-99");
    admin_read(&s, &sign(&stray, &claims))
        .await
        .assert_error(401, "unknown_key");
    assert_eq!(
        idp.fetches.load(Ordering::SeqCst),
        fetched + 1,
        "one fetch, failed"
    );
    assert_eq!(admin_read(&s, &sign(&old, &claims)).await.status, 200);
    idp.failing.store(false, Ordering::SeqCst);

    // Rotation: the new key is served, the old one withdrawn.
    idp.serve_keys(&[&new]);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let r = admin_read(&s, &sign(&new, &claims)).await;
    assert_eq!(r.status, 200, "the new key, fetched on sight: {}", r.text());
    admin_read(&s, &sign(&old, &claims))
        .await
        .assert_error(401, "unknown_key");

    // Unknown key ids fetch at most once per --jwks-refetch-min-ms.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let before = idp.fetches.load(Ordering::SeqCst);
    for i in 0..20 {
        let k = ec_key(&format!("nobody-{i}"));
        admin_read(&s, &sign(&k, &claims))
            .await
            .assert_error(401, "unknown_key");
    }
    let extra = idp.fetches.load(Ordering::SeqCst) - before;
    assert!(
        (1..=5).contains(&extra),
        "{extra} fetches for 20 unknown keys"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_keys_are_found_through_discovery() {
    let ed = ed_key("ed-1");
    let idp = Idp::start(&[&ed]).await;
    let s = TestServer::start(
        StoreKind::Sqlite,
        &[
            "--oidc-issuer",
            &idp.issuer,
            "--token-audience",
            AUDIENCE,
            "--token-claims",
            &mapping(),
        ],
    )
    .await;
    let claims = idp.claims("boss", &["city-admins"]);
    assert_eq!(admin_read(&s, &sign(&ed, &claims)).await.status, 200);
    // The issuer defaults to --oidc-issuer.
    let mut other = claims.clone();
    other["iss"] = json!(format!("{}/", idp.issuer));
    admin_read(&s, &sign(&ed, &other))
        .await
        .assert_error(401, "wrong_issuer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mapping_naming_an_unknown_role_refuses_to_start() {
    let dir = tempfile::TempDir::new().unwrap();
    let mut args: Vec<String> = vec![
        "serve".into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--jwks-url".into(),
        "http://127.0.0.1:9/certs".into(),
        "--token-issuer".into(),
        "http://127.0.0.1:9".into(),
        "--token-audience".into(),
        AUDIENCE.into(),
        "--token-claims".into(),
        json!({"roles": {"booking-desk": "clerk"}}).to_string(),
    ];
    args.extend(store_flags(dir.path(), None));
    let (ok, out) = run_throng(&args).await;
    assert!(!ok, "{out}");
    assert!(
        out.contains("'clerk'") && out.contains("staff"),
        "names the role and throng's roles: {out}"
    );
    // A provider without an audience is refused too.
    let mut args: Vec<String> = vec![
        "serve".into(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--oidc-issuer".into(),
        "https://login.example.org/realms/city".into(),
    ];
    args.extend(store_flags(dir.path(), None));
    let (ok, out) = run_throng(&args).await;
    assert!(!ok && out.contains("--token-audience"), "{out}");
}
