//! `throng bench tokens`: what checking an identity provider's RS256 token
//! (its key from a JWKS) costs beside throng's own HS256 token, on the same
//! admin endpoint (`GET /api/admin/tokens/revocations`, an empty list).
//!
//! The bench plays the provider: a loopback HTTP server serving the public
//! half of an RSA key made for this bench only (`tokens-bench-key.pem`,
//! trusted by nothing but the bench's own child servers) as a JWKS, named
//! to the child servers with `--jwks-url`. The HS256 workload is set beside
//! the RS256 one as its alternative: the report's ratio is RS256 req/s over
//! HS256 req/s, and the target is at least 0.95 (RS256 costs at most 5%
//! more).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use throng_load::measure::RequestSpec;

use crate::experiment::{Backends, Experiment, Scale, Workload};
use crate::platform::auth::{Role, TokenKeys};
use crate::token_secret::token_secret;

pub struct TokensBench;

/// The bench's RSA key (2048 bits, PKCS#1 PEM), made for it alone.
const KEY_PEM: &str = include_str!("tokens-bench-key.pem");
/// Its modulus and exponent, base64url, as its JWK publishes them.
const KEY_N: &str = "iRzEM7Q7kQ1OU9sgQzadYJlYso7yrN2cmJcGt-DdyJenj4gafHBc7t0BHfK9Q8zGlXZbq6PNUHxH8kfj6vuKHjzrlpHXyjXnYxvFAnDU3Roumv482ccmZrbJZqXFHEX2AtUebFLL1e58Yzv7Yl5yRByDmy8CHc4laLt1K4ftXbuplzqoeloUN8xTAtPRwqVBTZTgs0fJp9oAPBpZorUPQRw7QYdBVkSFZvJcLfLBPY_uXHHFmYZQNehwlSLOXiPZjDR6T1cvQvca7XepeYxqAus7hg7XEDK-zQcChInbpCun0sZ2SA7tqhbg05lm3u366BLuXQAS84fwE0KaV7kpdw";
const KEY_E: &str = "AQAB";
const KID: &str = "bench-rsa-1";
const ISSUER: &str = "https://idp.bench.invalid/realms/bench";
const AUDIENCE: &str = "throng-bench";
/// The endpoint both workloads call: admin-only, an empty list.
const PATH: &str = "/api/admin/tokens/revocations";
const RS256_NAME: &str = "GET admin list, RS256 token (provider's JWKS)";

impl Experiment for TokensBench {
    fn name(&self) -> &'static str {
        "tokens"
    }
    fn about(&self) -> &'static str {
        "an identity provider's RS256 token (JWKS) against throng's own HS256, same endpoint"
    }
    fn seed_args(&self, _scale: Scale) -> Vec<String> {
        // Nothing to measure in the data: the smallest seed there is.
        vec!["events".into(), "--events".into(), "1".into()]
    }
    fn serve_args(&self) -> Vec<String> {
        // Sets THRONG_TOKEN_SECRET before the server starts (it inherits it).
        token_secret();
        Vec::new()
    }
    fn start_backends(&self, _data_dir: &std::path::Path) -> anyhow::Result<Backends> {
        let jwks = JwksServer::start()?;
        Ok(Backends {
            serve_args: vec![
                "--jwks-url".into(),
                jwks.url.clone(),
                "--token-issuer".into(),
                ISSUER.into(),
                "--token-audience".into(),
                AUDIENCE.into(),
                "--token-claims".into(),
                r#"{"roles": {"bench-admins": "admin"}}"#.into(),
            ],
            keep: vec![Box::new(jwks)],
        })
    }
    fn workloads(&self, _scale: Scale) -> Vec<Workload> {
        let own = format!(
            "Bearer {}",
            TokenKeys::new(token_secret()).issue("bench", Role::ADMIN, 24 * 3600)
        );
        let provider = format!("Bearer {}", provider_token());
        let with = |bearer: String| {
            Arc::new(move |_seq: u64| {
                let mut spec = RequestSpec::get(PATH);
                spec.headers.push(("authorization".into(), bearer.clone()));
                spec
            })
        };
        vec![
            Workload {
                name: RS256_NAME.into(),
                factory: with(provider),
                published: "target: at least 0.95 of HS256's req/s".into(),
                ..Workload::default()
            },
            Workload {
                name: "GET admin list, HS256 token (throng's own)".into(),
                factory: with(own),
                published: "(the baseline)".into(),
                comparison: true,
                alternative_to: Some(RS256_NAME.into()),
                ..Workload::default()
            },
        ]
    }
    fn notes(&self) -> Vec<String> {
        vec![
            "RS256: an RSA-2048 signature checked with the key the child servers fetched from \
             the bench's JWKS; HS256: HMAC-SHA256 with the data directory's secret. Both then \
             pass the same revocation check and handler. Target: RS256/HS256 >= 0.95."
                .into(),
            "Each workload sends one token again and again, as a signed-in client does: an \
             RS256 token's signature is checked once, then found by its SHA-256 among the \
             checked tokens (VERIFIED_TOKENS_MAX); its expiry and the revocations are checked \
             on every request."
                .into(),
        ]
    }
}

/// A token of the bench's provider for an admin, valid for a day.
fn provider_token() -> String {
    let now = (crate::base::clock::now_ms() / 1000) as u64;
    let claims = serde_json::json!({
        "iss": ISSUER, "aud": AUDIENCE, "sub": "bench-admin",
        "iat": now, "exp": now + 24 * 3600, "jti": uuid::Uuid::new_v4().to_string(),
        "roles": ["bench-admins"],
    });
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(KID.into());
    let key = EncodingKey::from_rsa_pem(KEY_PEM.as_bytes()).expect("the bench key reads");
    jsonwebtoken::encode(&header, &claims, &key).expect("RS256 signing")
}

/// The bench's JWKS on a loopback port, answered by a thread of its own
/// until dropped.
struct JwksServer {
    url: String,
    stop: Arc<AtomicBool>,
    addr: std::net::SocketAddr,
}

impl JwksServer {
    fn start() -> anyhow::Result<JwksServer> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let body = serde_json::json!({"keys": [{
            "kty": "RSA", "use": "sig", "alg": "RS256", "kid": KID, "n": KEY_N, "e": KEY_E
        }]})
        .to_string();
        let stopped = stop.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut conn) = conn else { continue };
                // One request per connection: read its head, answer, close.
                let mut reader = BufReader::new(&conn);
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: \
                     {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Ok(JwksServer {
            url: format!("http://{addr}/jwks"),
            stop,
            addr,
        })
    }
}

impl Drop for JwksServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = std::net::TcpStream::connect(self.addr);
    }
}
