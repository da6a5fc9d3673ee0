//! The identity provider's signing keys (its JWKS), fetched, cached and
//! refreshed, and the check of its tokens with them.
//!
//! The keys are fetched at start, then every `refresh` (the cache's
//! lifetime); a token naming a key id (`kid`) the cache lacks fetches them
//! again at once (the provider rotated its keys), at most once per
//! `refetch_min` whatever the number of such tokens. A failed fetch keeps
//! the last good keys and says so in the log. Only RS256 (RSA), ES256
//! (P-256) and EdDSA (Ed25519) signing keys are kept; a symmetric key
//! (`kty: oct`) never is, and a token is checked only with a key whose
//! algorithm is its header's.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use axum::http::StatusCode;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Header, Validation};
use serde_json::{Map, Value};

use super::mapping::{ClaimMapping, MappingConfig};
use crate::platform::auth::RoleSpec;
use crate::platform::error::ApiError;

/// Seconds of clock difference forgiven between the provider and us, for
/// `exp` and `nbf` alike (as for throng's own tokens).
pub const CLOCK_LEEWAY_S: u64 = 5;

/// Provider tokens whose signature and claims were checked, kept (by the
/// token's SHA-256) with their mapped claims so that a client sending the
/// same token again costs a hash, not a signature check; emptied when
/// full and whenever the keys change. A kept token is still refused once
/// expired, and still checked against the revocations.
pub const VERIFIED_TOKENS_MAX: usize = 10_000;

/// Where the keys are found.
#[derive(Clone, Debug)]
pub enum KeySource {
    /// The key set's URL (`--jwks-url`).
    Jwks(String),
    /// The issuer, whose discovery document names the key set
    /// (`--oidc-issuer`).
    Discovery(String),
}

/// The bounds of fetching the keys (`serve --jwks-*`).
#[derive(Clone, Debug)]
pub struct JwksLimits {
    /// Keys kept this long, then fetched again.
    pub refresh: Duration,
    /// Two fetches are this far apart at least (an unknown `kid` fetches).
    pub refetch_min: Duration,
    /// One fetch (connect, answer and body) takes this long at most.
    pub fetch_timeout: Duration,
    /// A key set or discovery document has this many bytes at most.
    pub body_bytes_max: usize,
    /// Keys kept of a key set at most.
    pub keys_max: usize,
}

/// The provider's settings, as `serve`'s flags give them.
#[derive(Clone, Debug)]
pub struct ProviderConfig {
    pub source: KeySource,
    /// The `iss` its tokens must carry.
    pub issuer: String,
    /// Its tokens must carry one of these in `aud`.
    pub audience: Vec<String>,
    pub mapping: MappingConfig,
    pub limits: JwksLimits,
}

/// A signing key of the provider's.
pub struct ProviderKey {
    pub kid: Option<String>,
    pub alg: Algorithm,
    key: DecodingKey,
}

/// The keys in use, and when they were fetched.
#[derive(Default)]
pub struct KeySet {
    pub keys: Vec<ProviderKey>,
    pub fetched_at: Option<Instant>,
}

impl KeySet {
    /// The key a token's `kid` names; a token without `kid` gets the only
    /// key when there is one.
    fn find(&self, kid: Option<&str>) -> Option<&ProviderKey> {
        match kid {
            Some(kid) => self.keys.iter().find(|k| k.kid.as_deref() == Some(kid)),
            None if self.keys.len() == 1 => self.keys.first(),
            None => None,
        }
    }
}

/// Why a provider's token is not accepted.
pub enum Refusal {
    /// Refused for good: the answer.
    Error(ApiError),
    /// No key of the cached set has the token's `kid`: fetching the set
    /// again may find it.
    UnknownKey(Option<String>),
}

impl From<ApiError> for Refusal {
    fn from(e: ApiError) -> Refusal {
        Refusal::Error(e)
    }
}

/// An identity provider whose tokens are accepted.
pub struct Provider {
    source: KeySource,
    issuer: String,
    mapping: ClaimMapping,
    limits: JwksLimits,
    client: reqwest::Client,
    keys: ArcSwap<KeySet>,
    /// The key set's URL, once known (from discovery).
    jwks_uri: Mutex<Option<String>>,
    /// The authorization and token endpoints, once discovered.
    endpoints: Mutex<Option<Endpoints>>,
    /// When a fetch last began; held while fetching, so that one fetch
    /// runs at a time.
    last_fetch: tokio::sync::Mutex<Option<Instant>>,
    /// One validation per accepted algorithm.
    validations: Vec<(Algorithm, Validation)>,
    /// Checked tokens (see [`VERIFIED_TOKENS_MAX`]): SHA-256 of the token
    /// -> its mapped claims and `exp`.
    verified: std::sync::RwLock<std::collections::HashMap<[u8; 32], Verified>>,
}

/// A checked token's mapped claims.
struct Verified {
    claims: Map<String, Value>,
    exp: u64,
}

/// Where a browser signs in (`authorization_endpoint`) and where the code
/// is exchanged (`token_endpoint`), from the discovery document.
#[derive(Clone, Debug)]
pub struct Endpoints {
    pub authorization: String,
    pub token: String,
}

/// The algorithms accepted from a provider.
pub const PROVIDER_ALGORITHMS: [Algorithm; 3] =
    [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];

impl Provider {
    /// Checks the settings (the mapping against `roles`, every role
    /// throng serves); the keys are fetched by [`Provider::refresh`].
    pub fn new(config: ProviderConfig, roles: &[&RoleSpec]) -> anyhow::Result<Provider> {
        let mapping = ClaimMapping::new(&config.mapping, roles)?;
        let client = reqwest::Client::builder()
            .timeout(config.limits.fetch_timeout)
            .connect_timeout(config.limits.fetch_timeout)
            .redirect(reqwest::redirect::Policy::limited(3))
            .user_agent(concat!("throng/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let validations = PROVIDER_ALGORITHMS
            .iter()
            .map(|alg| {
                let mut v = Validation::new(*alg);
                v.leeway = CLOCK_LEEWAY_S;
                v.validate_nbf = true;
                v.set_issuer(&[&config.issuer]);
                v.set_audience(&config.audience);
                v.set_required_spec_claims(&["exp", "sub", "iss", "aud"]);
                (*alg, v)
            })
            .collect();
        let jwks_uri = match &config.source {
            KeySource::Jwks(url) => Some(url.clone()),
            KeySource::Discovery(_) => None,
        };
        Ok(Provider {
            source: config.source,
            issuer: config.issuer,
            mapping,
            limits: config.limits,
            client,
            keys: ArcSwap::from_pointee(KeySet::default()),
            jwks_uri: Mutex::new(jwks_uri),
            endpoints: Mutex::new(None),
            last_fetch: tokio::sync::Mutex::new(None),
            validations,
            verified: Default::default(),
        })
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The keys in use.
    pub fn keys(&self) -> arc_swap::Guard<Arc<KeySet>> {
        self.keys.load()
    }

    /// Fetches the keys now (discovery first when the key set's URL is not
    /// known yet); on failure the keys in use stay. Answers how many keys
    /// are in use.
    pub async fn refresh(&self) -> anyhow::Result<usize> {
        let mut last = self.last_fetch.lock().await;
        *last = Some(Instant::now());
        self.fetch().await
    }

    /// [`Provider::refresh`], logged: a failure keeps the last good keys
    /// and says so.
    pub async fn refresh_logged(&self, why: &str) {
        match self.refresh().await {
            Ok(n) => tracing::debug!(keys = n, why, "fetched the identity provider's keys"),
            Err(e) => tracing::warn!(
                kept = self.keys.load().keys.len(),
                why,
                error = %format!("{e:#}"),
                "cannot fetch the identity provider's keys; keeping the last good ones"
            ),
        }
    }

    /// Fetches the keys again for a token naming an unknown key, unless a
    /// fetch began less than `refetch_min` ago (then the set is as fresh as
    /// it may be). Concurrent callers wait for one fetch.
    pub async fn refetch_for_unknown_key(&self) {
        let mut last = self.last_fetch.lock().await;
        if last.is_some_and(|at| at.elapsed() < self.limits.refetch_min) {
            return;
        }
        *last = Some(Instant::now());
        if let Err(e) = self.fetch().await {
            tracing::warn!(
                kept = self.keys.load().keys.len(),
                error = %format!("{e:#}"),
                "a token names a key the identity provider's key set lacked, and fetching the \
                 set again failed; keeping the last good keys"
            );
        }
    }

    /// Every `refresh`, fetches the keys again (forever: abort to stop).
    pub fn spawn_refresher(self: Arc<Self>) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(self.limits.refresh).await;
                self.refresh_logged("periodic refresh").await;
            }
        })
    }

    async fn fetch(&self) -> anyhow::Result<usize> {
        let uri = self.jwks_uri.lock().unwrap().clone();
        let uri = match uri {
            Some(uri) => uri,
            None => {
                let uri = self.discover().await?;
                *self.jwks_uri.lock().unwrap() = Some(uri.clone());
                uri
            }
        };
        let body = self.get_json(&uri).await?;
        let set = self.parse_key_set(&uri, &body)?;
        let n = set.keys.len();
        self.keys.store(Arc::new(set));
        // Tokens checked with a key that may be gone are checked again.
        self.verified.write().unwrap().clear();
        Ok(n)
    }

    /// The key set's URL from the issuer's discovery document, whose
    /// `issuer` must be the one configured (OpenID Connect Discovery 1.0,
    /// section 4.3).
    async fn discover(&self) -> anyhow::Result<String> {
        let KeySource::Discovery(issuer) = &self.source else {
            anyhow::bail!("no key set URL");
        };
        let url = format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        );
        let doc = self.get_json(&url).await?;
        let named = doc.get("issuer").and_then(Value::as_str).unwrap_or("");
        if named != issuer {
            anyhow::bail!(
                "the discovery document {url} names the issuer '{named}', not '{issuer}' \
                 (--oidc-issuer must be the issuer exactly as the provider writes it)"
            );
        }
        let jwks_uri = doc
            .get("jwks_uri")
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow::anyhow!("the discovery document {url} has no jwks_uri"))?;
        let endpoint = |name: &str| {
            doc.get(name)
                .and_then(Value::as_str)
                .and_then(|u| super::check_url(&format!("the discovery document's {name}"), u).ok())
        };
        if let (Some(authorization), Some(token)) = (
            endpoint("authorization_endpoint"),
            endpoint("token_endpoint"),
        ) {
            *self.endpoints.lock().unwrap() = Some(Endpoints {
                authorization,
                token,
            });
        }
        super::check_url("the discovery document's jwks_uri", jwks_uri)
    }

    /// The authorization and token endpoints (OpenID Connect Discovery),
    /// discovered now when not yet known.
    pub async fn endpoints(&self) -> anyhow::Result<Endpoints> {
        if let Some(e) = self.endpoints.lock().unwrap().clone() {
            return Ok(e);
        }
        self.discover().await?;
        self.endpoints.lock().unwrap().clone().ok_or_else(|| {
            anyhow::anyhow!(
                "the provider's discovery document names no authorization_endpoint and \
                 token_endpoint (https://, or http:// on this machine)"
            )
        })
    }

    /// Checks an ID token as [`Provider::verify`] checks a bearer token
    /// (the same keys, algorithms, issuer, expiry and claim mapping), but
    /// for the audience `client_id`: the console's sign-in. Not cached.
    pub fn verify_id_token(
        &self,
        token: &str,
        header: &Header,
        client_id: &str,
    ) -> Result<Map<String, Value>, Refusal> {
        self.verify_with(token, header, Some(client_id))
    }

    /// GETs `url` as JSON, within the fetch's bounds.
    async fn get_json(&self, url: &str) -> anyhow::Result<Value> {
        let max = self.limits.body_bytes_max;
        let mut resp = self
            .client
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("GET {url}: {e}"))?;
        if !resp.status().is_success() {
            anyhow::bail!("GET {url} answered {}", resp.status());
        }
        if resp.content_length().is_some_and(|n| n > max as u64) {
            anyhow::bail!("GET {url}: the body is over --jwks-body-bytes-max ({max} bytes)");
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| anyhow::anyhow!("GET {url}: {e}"))?
        {
            if body.len() + chunk.len() > max {
                anyhow::bail!("GET {url}: the body is over --jwks-body-bytes-max ({max} bytes)");
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|e| anyhow::anyhow!("GET {url}: not JSON: {e}"))
    }

    /// The signing keys of a key set that throng accepts; the others are
    /// skipped (logged at debug). None is an error: the keys in use stay.
    fn parse_key_set(&self, url: &str, body: &Value) -> anyhow::Result<KeySet> {
        let items = body
            .get("keys")
            .and_then(Value::as_array)
            .ok_or_else(|| anyhow::anyhow!("{url} is no key set (no \"keys\" array)"))?;
        let mut keys = Vec::new();
        for item in items {
            if keys.len() == self.limits.keys_max {
                tracing::warn!(
                    url,
                    kept = keys.len(),
                    "the identity provider's key set holds more keys than --jwks-keys-max; the \
                     rest are ignored"
                );
                break;
            }
            match usable_key(item) {
                Ok(key) => keys.push(key),
                Err(why) => tracing::debug!(url, kid = ?item.get("kid"), why, "key skipped"),
            }
        }
        if keys.is_empty() {
            anyhow::bail!("{url} holds no RS256, ES256 or EdDSA signing key");
        }
        Ok(KeySet {
            keys,
            fetched_at: Some(Instant::now()),
        })
    }

    /// Whether an HS256 token claims to be the provider's: its `kid` names
    /// a provider key, or its `iss` is the provider's. Such a token is
    /// algorithm confusion (a public key used as an HMAC secret), refused.
    pub fn claims_hs256_token(&self, header: &Header, token: &str) -> bool {
        if let Some(kid) = header.kid.as_deref() {
            if self.keys.load().find(Some(kid)).is_some() {
                return true;
            }
        }
        unverified_issuer(token).is_some_and(|iss| iss == self.issuer)
    }

    /// Checks a provider's token (RS256, ES256 or EdDSA) with the cached
    /// keys and answers its claims mapped to throng's role and scope
    /// claims.
    pub fn verify(&self, token: &str, header: &Header) -> Result<Map<String, Value>, Refusal> {
        use sha2::Digest;
        let digest: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
        let now = (crate::base::clock::now_ms() / 1000) as u64;
        if let Some(v) = self.verified.read().unwrap().get(&digest) {
            if now <= v.exp + CLOCK_LEEWAY_S {
                return Ok(v.claims.clone());
            }
        }
        let claims = self.verify_uncached(token, header)?;
        if let Some(exp) = claims.get("exp").and_then(Value::as_u64) {
            let mut verified = self.verified.write().unwrap();
            if verified.len() >= VERIFIED_TOKENS_MAX {
                verified.clear();
            }
            verified.insert(
                digest,
                Verified {
                    claims: claims.clone(),
                    exp,
                },
            );
        }
        Ok(claims)
    }

    fn verify_uncached(&self, token: &str, header: &Header) -> Result<Map<String, Value>, Refusal> {
        self.verify_with(token, header, None)
    }

    /// The check, with the configured audience or `audience` instead.
    fn verify_with(
        &self,
        token: &str,
        header: &Header,
        audience: Option<&str>,
    ) -> Result<Map<String, Value>, Refusal> {
        let keys = self.keys.load();
        let Some(key) = keys.find(header.kid.as_deref()) else {
            return Err(Refusal::UnknownKey(header.kid.clone()));
        };
        if key.alg != header.alg {
            return Err(wrong_algorithm(format!(
                "the token's header says {:?} but its key ({}) is a {:?} key",
                header.alg,
                key.kid.as_deref().unwrap_or("without kid"),
                key.alg
            ))
            .into());
        }
        let (_, validation) = self
            .validations
            .iter()
            .find(|(alg, _)| *alg == key.alg)
            .expect("a validation per accepted algorithm");
        let mut own;
        let validation = match audience {
            Some(aud) => {
                own = validation.clone();
                own.set_audience(&[aud]);
                &own
            }
            None => validation,
        };
        let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, validation)
            .map(|d| d.claims)
            .map_err(|e| self.refusal(e))?;
        Ok(self.mapping.apply(claims)?)
    }

    fn refusal(&self, e: jsonwebtoken::errors::Error) -> ApiError {
        use jsonwebtoken::errors::ErrorKind;
        match e.kind() {
            ErrorKind::ExpiredSignature => {
                ApiError::unauthorized("token_expired", "the token has expired; get a new one")
            }
            ErrorKind::ImmatureSignature => ApiError::unauthorized(
                "token_not_yet_valid",
                "the token is not valid yet (its nbf is in the future); check the issuer's clock",
            ),
            ErrorKind::InvalidIssuer => ApiError::unauthorized(
                "wrong_issuer",
                format!(
                    "the token was not issued by {}, the identity provider this server trusts \
                     (--token-issuer)",
                    self.issuer
                ),
            ),
            ErrorKind::InvalidAudience => ApiError::unauthorized(
                "wrong_audience",
                "the token is for another application: its aud names none of --token-audience; \
                 ask the provider for a token for this server's client id",
            ),
            ErrorKind::InvalidAlgorithm => {
                wrong_algorithm("the token's algorithm is not its key's".into())
            }
            ErrorKind::MissingRequiredClaim(claim) => ApiError::unauthorized(
                "invalid_token",
                format!("the token lacks the claim '{claim}'"),
            ),
            _ => ApiError::unauthorized("invalid_token", "the bearer token is not valid"),
        }
    }
}

/// 401 `wrong_algorithm`.
pub fn wrong_algorithm(detail: String) -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "wrong_algorithm",
        format!(
            "{detail}; this server accepts throng's own HS256 tokens and its identity \
             provider's RS256, ES256 and EdDSA tokens, each checked with its own key"
        ),
    )
}

/// A key of a key set as throng uses it, or why not.
fn usable_key(item: &Value) -> Result<ProviderKey, &'static str> {
    let jwk: Jwk = serde_json::from_value(item.clone()).map_err(|_| "not a key throng reads")?;
    if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
        return Err("an encryption key");
    }
    let alg = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => Algorithm::ES256,
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
            Algorithm::EdDSA
        }
        AlgorithmParameters::OctetKey(_) => return Err("a symmetric key"),
        _ => return Err("a curve throng does not accept"),
    };
    let stated = match jwk.common.key_algorithm {
        None => alg,
        Some(KeyAlgorithm::RS256) => Algorithm::RS256,
        Some(KeyAlgorithm::ES256) => Algorithm::ES256,
        Some(KeyAlgorithm::EdDSA) => Algorithm::EdDSA,
        Some(_) => return Err("an algorithm throng does not accept"),
    };
    if stated != alg {
        return Err("its alg is not its key type's");
    }
    let key = DecodingKey::from_jwk(&jwk).map_err(|_| "its parameters do not read")?;
    Ok(ProviderKey {
        kid: jwk.common.key_id.clone(),
        alg,
        key,
    })
}

/// The `iss` of a token's payload, read without checking anything.
fn unverified_issuer(token: &str) -> Option<String> {
    use base64::Engine;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    #[derive(serde::Deserialize)]
    struct Iss {
        iss: Option<String>,
    }
    serde_json::from_slice::<Iss>(&bytes).ok()?.iss
}
