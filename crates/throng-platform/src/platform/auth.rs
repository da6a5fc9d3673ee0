//! JWT bearer tokens, checked in one place ([`TokenKeys::verify_as`], behind
//! the [`Caller`] extractor and [`bearer_claims`]): throng's own (HS256,
//! signed with the generated secret; claims `sub`, `role`, `jti`, `exp`,
//! `iat`) and, when one is configured, an identity provider's (RS256, ES256,
//! EdDSA; see `platform::identity`), both checked against the revocations.
//! Citizens booking a slot have no account; anything administrative needs a
//! token.

use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use super::audit::{Actor, AuditSlot};
use super::error::ApiError;
use super::identity::jwks::{wrong_algorithm, Provider, Refusal, PROVIDER_ALGORITHMS};
use super::identity::revocation::Revocations;
use super::session::Sessions;
use serde_json::{Map, Value};

/// A role a token carries: the platform's [`Role::ADMIN`], or one a service
/// declares (`Service::roles`) and checks with [`Caller::require`]. Admin
/// passes every role's check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Role(&'static str);

impl Role {
    /// Everything administrative, in every service.
    pub const ADMIN: Role = Role("admin");

    pub const fn new(name: &'static str) -> Role {
        Role(name)
    }

    pub fn name(self) -> &'static str {
        self.0
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl Serialize for Role {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

/// A token's `role` claim is this role.
impl PartialEq<Role> for String {
    fn eq(&self, role: &Role) -> bool {
        self == role.0
    }
}

/// A role as its service declares it: what `throng token --role` offers.
pub struct RoleSpec {
    pub role: Role,
    /// What a holder may do, for `throng token --help`.
    pub about: &'static str,
    /// Claims a token of this role must carry (refused by `throng token`
    /// without them).
    pub claims: &'static [ClaimSpec],
    /// An administrative role: may sign in to the console (`throng admin
    /// link`), and its calls that change something are in the audit log.
    pub console: bool,
}

/// A claim a role's tokens must carry, and its form.
#[derive(Clone, Copy, Debug)]
pub struct ClaimSpec {
    pub name: &'static str,
    pub kind: ClaimKind,
}

/// The form of a required claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimKind {
    /// One integer (`--claim election=1`).
    Integer,
    /// A list of positive integer ids, or every id: a JSON array of
    /// integers, one integer, a comma-separated string (`--claim
    /// places=12,15`, as an identity provider may map a group list), or
    /// `"*"` (see [`IdList`]).
    IdList,
}

impl ClaimSpec {
    pub const fn integer(name: &'static str) -> ClaimSpec {
        ClaimSpec {
            name,
            kind: ClaimKind::Integer,
        }
    }

    pub const fn id_list(name: &'static str) -> ClaimSpec {
        ClaimSpec {
            name,
            kind: ClaimKind::IdList,
        }
    }

    /// Whether `value` has this claim's form.
    pub fn accepts(&self, value: &serde_json::Value) -> bool {
        match self.kind {
            ClaimKind::Integer => value.is_i64(),
            ClaimKind::IdList => IdList::from_claim(value).is_some(),
        }
    }

    /// What the claim looks like on `throng token`'s command line.
    pub fn example(&self) -> String {
        match self.kind {
            ClaimKind::Integer => format!("--claim {}=<id>", self.name),
            ClaimKind::IdList => format!("--claim {}=<id>,<id>,... (or '*' for all)", self.name),
        }
    }
}

/// Ids a list claim names at most.
pub const ID_LIST_CLAIM_IDS_MAX: usize = 1000;

/// A list claim's ids (see [`ClaimKind::IdList`]), sorted and without
/// repeats.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IdList {
    /// `"*"`: every id.
    All,
    Ids(Vec<i64>),
}

impl IdList {
    /// Reads a claim's value; `None` when it is not of the form (an empty
    /// list, a non-positive id, more than [`ID_LIST_CLAIM_IDS_MAX`] ids).
    pub fn from_claim(value: &serde_json::Value) -> Option<IdList> {
        let mut ids: Vec<i64> = match value {
            serde_json::Value::Number(n) => vec![n.as_i64()?],
            serde_json::Value::String(s) if s.trim() == "*" => return Some(IdList::All),
            serde_json::Value::String(s) => s
                .split(',')
                .map(|part| part.trim().parse::<i64>().ok())
                .collect::<Option<Vec<i64>>>()?,
            serde_json::Value::Array(items) => items
                .iter()
                .map(|v| {
                    v.as_i64()
                        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                })
                .collect::<Option<Vec<i64>>>()?,
            _ => return None,
        };
        if ids.is_empty() || ids.len() > ID_LIST_CLAIM_IDS_MAX || ids.iter().any(|id| *id < 1) {
            return None;
        }
        ids.sort_unstable();
        ids.dedup();
        Some(IdList::Ids(ids))
    }

    pub fn contains(&self, id: i64) -> bool {
        match self {
            IdList::All => true,
            IdList::Ids(ids) => ids.binary_search(&id).is_ok(),
        }
    }
}

impl std::fmt::Display for IdList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IdList::All => f.write_str("all"),
            IdList::Ids(ids) => {
                for (i, id) in ids.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{id}")?;
                }
                Ok(())
            }
        }
    }
}

/// The platform's own roles.
pub const PLATFORM_ROLES: &[RoleSpec] = &[RoleSpec {
    role: Role::ADMIN,
    about: "everything administrative, and every other role's checks",
    claims: &[],
    console: true,
}];

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Claims {
    pub sub: String,
    /// A role's name (see [`Role`]).
    pub role: String,
    /// 0 when the token has none (an identity provider may leave it out).
    #[serde(default)]
    pub iat: u64,
    pub exp: u64,
}

/// Claims every token has; `issue_with` does not let extra claims replace them.
pub const RESERVED_CLAIMS: [&str; 5] = ["sub", "role", "iat", "exp", "jti"];

/// The keys tokens are signed and checked with: throng's own secret, the
/// identity provider's keys when one is configured, and the revocations.
pub struct TokenKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    /// HMAC(secret, "throng key derivation v1"): the root of [`TokenKeys::derive`].
    derivation_root: [u8; 32],
    provider: Option<Arc<Provider>>,
    revocations: Arc<Revocations>,
}

impl TokenKeys {
    /// throng's own tokens only, with no revocations: for tools that issue
    /// tokens, and tests.
    pub fn new(secret: &[u8]) -> TokenKeys {
        TokenKeys::with_identity(secret, None, Revocations::none())
    }

    /// throng's own tokens, a provider's (when given), both checked
    /// against `revocations`.
    pub fn with_identity(
        secret: &[u8],
        provider: Option<Arc<Provider>>,
        revocations: Arc<Revocations>,
    ) -> TokenKeys {
        TokenKeys {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
            derivation_root: hmac_sha256(secret, b"throng key derivation v1"),
            provider,
            revocations,
        }
    }

    /// The identity provider whose tokens are accepted, if any.
    pub fn provider(&self) -> Option<&Arc<Provider>> {
        self.provider.as_ref()
    }

    /// The revocations this node holds.
    pub fn revocations(&self) -> &Arc<Revocations> {
        &self.revocations
    }

    /// A key of its own for `purpose` (such as the MAC of signed visitor
    /// ids), derived from the token secret: nodes sharing the secret share
    /// it, and no purpose's key reveals the secret or another's key.
    pub fn derive(&self, purpose: &str) -> [u8; 32] {
        hmac_sha256(&self.derivation_root, purpose.as_bytes())
    }

    pub fn issue(&self, sub: &str, role: Role, ttl_s: u64) -> String {
        let now = (crate::base::clock::now_ms() / 1000) as u64;
        #[derive(Serialize)]
        struct Issued<'a> {
            #[serde(flatten)]
            claims: Claims,
            jti: &'a str,
        }
        let jti = uuid::Uuid::new_v4().to_string();
        let claims = Issued {
            claims: Claims {
                sub: sub.to_string(),
                role: role.name().to_string(),
                iat: now,
                exp: now + ttl_s,
            },
            jti: &jti,
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .expect("HS256 signing does not fail")
    }

    /// Like [`TokenKeys::issue`], with `extra` claims beside `sub`, `role`,
    /// `iat`, `exp` and `jti` (which `extra` cannot replace: those keys are
    /// skipped).
    pub fn issue_with(
        &self,
        sub: &str,
        role: Role,
        ttl_s: u64,
        extra: serde_json::Map<String, serde_json::Value>,
    ) -> String {
        let now = (crate::base::clock::now_ms() / 1000) as u64;
        let mut claims = serde_json::Map::new();
        for (k, v) in extra {
            if !RESERVED_CLAIMS.contains(&k.as_str()) {
                claims.insert(k, v);
            }
        }
        claims.insert("sub".into(), sub.into());
        claims.insert(
            "role".into(),
            serde_json::to_value(role).expect("a role serializes"),
        );
        claims.insert("iat".into(), now.into());
        claims.insert("exp".into(), (now + ttl_s).into());
        claims.insert("jti".into(), uuid::Uuid::new_v4().to_string().into());
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .expect("HS256 signing does not fail")
    }

    pub fn verify(&self, token: &str) -> Result<Claims, ApiError> {
        self.verify_as::<Claims>(token)
    }

    /// Verifies a token and reads its claims as `T`: throng's own (HS256:
    /// signature, expiry, `sub`) or the identity provider's (its key,
    /// issuer, audience, expiry; claims mapped to throng's role and scope
    /// claims), then the revocations. Claims that do not fit `T` are
    /// `invalid_token`. A provider's token naming a key the cached set
    /// lacks is refused here (`unknown_key`) and the set is fetched again
    /// in the background; [`TokenKeys::verify_as_async`] waits for that
    /// fetch instead.
    pub fn verify_as<T: serde::de::DeserializeOwned>(&self, token: &str) -> Result<T, ApiError> {
        match self.verify_claims(token) {
            Ok(claims) => into_claims(claims),
            Err(Refusal::Error(e)) => Err(e),
            Err(Refusal::UnknownKey(kid)) => {
                if let Some(p) = &self.provider {
                    if let Ok(rt) = tokio::runtime::Handle::try_current() {
                        let p = p.clone();
                        rt.spawn(async move { p.refetch_for_unknown_key().await });
                    }
                }
                Err(unknown_key(kid))
            }
        }
    }

    /// [`TokenKeys::verify_as`], fetching the provider's keys again when
    /// the token names a key the cached set lacks (at most once per
    /// `--jwks-refetch-min-ms`): how a rotation is picked up.
    pub async fn verify_as_async<T: serde::de::DeserializeOwned>(
        &self,
        token: &str,
    ) -> Result<T, ApiError> {
        match self.verify_claims(token) {
            Ok(claims) => into_claims(claims),
            Err(Refusal::Error(e)) => Err(e),
            Err(Refusal::UnknownKey(kid)) => {
                let Some(p) = &self.provider else {
                    return Err(unknown_key(kid));
                };
                p.refetch_for_unknown_key().await;
                match self.verify_claims(token) {
                    Ok(claims) => into_claims(claims),
                    Err(Refusal::Error(e)) => Err(e),
                    Err(Refusal::UnknownKey(kid)) => Err(unknown_key(kid)),
                }
            }
        }
    }

    /// An ID token of the identity provider's for the client `client_id`
    /// (the console's sign-in): checked as [`TokenKeys::verify_as_async`]
    /// checks the provider's bearer tokens (keys, algorithm, issuer,
    /// expiry, claim mapping, revocations), with `aud` = `client_id`.
    pub async fn verify_id_token(
        &self,
        token: &str,
        client_id: &str,
    ) -> Result<Map<String, Value>, ApiError> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| {
            ApiError::unauthorized(
                "invalid_token",
                "the provider's ID token is not valid (not a JWT, or an algorithm throng does \
                 not know)",
            )
        })?;
        let Some(p) = &self.provider else {
            return Err(wrong_algorithm("no identity provider is configured".into()));
        };
        if !PROVIDER_ALGORITHMS.contains(&header.alg) {
            return Err(wrong_algorithm(format!(
                "the ID token is {:?}; the provider's tokens are RS256, ES256 or EdDSA",
                header.alg
            )));
        }
        let check = || -> Result<Map<String, Value>, Refusal> {
            let claims = p.verify_id_token(token, &header, client_id)?;
            self.revocations.check(&claims)?;
            Ok(claims)
        };
        match check() {
            Ok(claims) => Ok(claims),
            Err(Refusal::Error(e)) => Err(e),
            Err(Refusal::UnknownKey(_)) => {
                p.refetch_for_unknown_key().await;
                match check() {
                    Ok(claims) => Ok(claims),
                    Err(Refusal::Error(e)) => Err(e),
                    Err(Refusal::UnknownKey(kid)) => Err(unknown_key(kid)),
                }
            }
        }
    }

    /// The token's claims, checked with the cached keys.
    fn verify_claims(&self, token: &str) -> Result<Map<String, Value>, Refusal> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| {
            ApiError::unauthorized(
                "invalid_token",
                "the bearer token is not valid (not a JWT, or an algorithm throng does not know)",
            )
        })?;
        let claims = match header.alg {
            Algorithm::HS256 => {
                if let Some(p) = &self.provider {
                    if p.claims_hs256_token(&header, token) {
                        return Err(wrong_algorithm(
                            "an HS256 token claims to be the identity provider's (its kid or iss \
                             is the provider's)"
                                .into(),
                        )
                        .into());
                    }
                }
                self.verify_own(token)?
            }
            alg if PROVIDER_ALGORITHMS.contains(&alg) => match &self.provider {
                Some(p) => p.verify(token, &header)?,
                None => {
                    return Err(wrong_algorithm(format!(
                        "the token is {alg:?}, and no identity provider is configured \
                         (--jwks-url or --oidc-issuer)"
                    ))
                    .into())
                }
            },
            alg => return Err(wrong_algorithm(format!("{alg:?} is not accepted")).into()),
        };
        self.revocations.check(&claims)?;
        Ok(claims)
    }

    /// A token signed with throng's own secret.
    fn verify_own(&self, token: &str) -> Result<Map<String, Value>, ApiError> {
        let mut v = Validation::new(Algorithm::HS256);
        // Seconds of clock difference forgiven between the issuer and us,
        // for `exp` and `nbf` alike.
        v.leeway = 5;
        v.validate_nbf = true;
        v.set_required_spec_claims(&["exp", "sub"]);
        jsonwebtoken::decode::<Map<String, Value>>(token, &self.decoding, &v)
            .map(|d| d.claims)
            .map_err(|e| {
                use jsonwebtoken::errors::ErrorKind;
                match e.kind() {
                    ErrorKind::ExpiredSignature => ApiError::unauthorized(
                        "token_expired",
                        "the token has expired; get a new one",
                    ),
                    ErrorKind::ImmatureSignature => ApiError::unauthorized(
                        "token_not_yet_valid",
                        "the token is not valid yet (its nbf is in the future); check the \
                         issuer's clock",
                    ),
                    _ => ApiError::unauthorized("invalid_token", "the bearer token is not valid"),
                }
            })
    }
}

/// Checked claims as `T`.
fn into_claims<T: serde::de::DeserializeOwned>(claims: Map<String, Value>) -> Result<T, ApiError> {
    serde_json::from_value(Value::Object(claims)).map_err(|_| {
        ApiError::unauthorized(
            "invalid_token",
            "the bearer token lacks a claim this needs (or has one of the wrong type)",
        )
    })
}

fn unknown_key(kid: Option<String>) -> ApiError {
    ApiError::unauthorized(
        "unknown_key",
        match kid {
            Some(kid) => format!(
                "the token's key ({kid}) is not among the identity provider's keys; if the \
                 provider has just rotated its keys, try again in a few seconds"
            ),
            None => "the token names no key (kid) and the identity provider has several".into(),
        },
    )
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> [u8; 32] {
    use hmac::{Hmac, Mac};
    let mut m =
        <Hmac<sha2::Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(data);
    m.finalize().into_bytes().into()
}

/// A verified caller: a bearer token's claims, or the console session's.
/// Use as a handler argument; `require` checks the role.
#[derive(Clone, Debug)]
pub struct Caller(pub Claims);

/// The bearer token of a request, checked: its claims as `T`, through the
/// same errors as [`Caller`] (a missing or malformed header is 401).
pub async fn bearer_claims<T: serde::de::DeserializeOwned>(
    keys: &TokenKeys,
    headers: &axum::http::HeaderMap,
) -> Result<T, ApiError> {
    let header = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(missing_credentials)?;
    let token = header
        .strip_prefix("Bearer ")
        .ok_or_else(|| ApiError::unauthorized("invalid_token", "expected 'Bearer <token>'"))?;
    keys.verify_as_async(token.trim()).await
}

fn missing_credentials() -> ApiError {
    ApiError::unauthorized(
        "missing_token",
        "send Authorization: Bearer <token>, or sign in to the console at /admin/",
    )
}

/// The one check of who calls: the claims of a request's bearer token, or,
/// without an `Authorization` header, of the console session its cookie
/// names (`platform::session`; a cookie's request that changes something
/// must come from this server's pages). Read as `T` (claims that do not
/// fit are `invalid_token`); the caller is noted for the audit log
/// (`platform::audit`).
pub async fn request_claims<T: serde::de::DeserializeOwned>(
    parts: &Parts,
    keys: &TokenKeys,
    sessions: &Sessions,
) -> Result<T, ApiError> {
    let note = |map: &serde_json::Map<String, serde_json::Value>, via: &'static str| {
        let text = |k: &str| {
            map.get(k)
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_string()
        };
        AuditSlot::note(
            &parts.extensions,
            Actor {
                sub: text("sub"),
                role: text("role"),
                via,
            },
        );
    };
    let map = if parts
        .headers
        .contains_key(axum::http::header::AUTHORIZATION)
    {
        let map: serde_json::Map<String, serde_json::Value> =
            bearer_claims(keys, &parts.headers).await?;
        note(&map, "token");
        map
    } else if let Some(secret) = sessions.cookie_of(&parts.headers) {
        let session = sessions.lookup(secret).await?.ok_or_else(|| {
            ApiError::unauthorized(
                "session_ended",
                "the console session has ended (signed out, expired or idle too long); sign \
                 in again with a new link from throng admin link",
            )
        })?;
        let mut map = session.claims;
        map.insert("iat".into(), (session.created_ms / 1000).into());
        map.insert("exp".into(), (session.idle_until_ms / 1000).into());
        note(&map, "session");
        sessions.check_same_origin(&parts.method, &parts.headers)?;
        map
    } else {
        return Err(missing_credentials());
    };
    serde_json::from_value(serde_json::Value::Object(map))
        .map_err(|_| ApiError::unauthorized("invalid_token", "the bearer token is not valid"))
}

impl Caller {
    pub fn require(&self, role: Role) -> Result<&Claims, ApiError> {
        if self.0.role == role || self.0.role == Role::ADMIN {
            Ok(&self.0)
        } else {
            Err(ApiError::forbidden(format!(
                "this needs the role '{role}'; the token has '{}'",
                self.0.role
            )))
        }
    }
}

impl<S> FromRequestParts<S> for Caller
where
    S: Send + Sync,
    Arc<TokenKeys>: FromRef<S>,
    Arc<Sessions>: FromRef<S>,
{
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let keys = Arc::<TokenKeys>::from_ref(state);
        let sessions = Arc::<Sessions>::from_ref(state);
        request_claims(parts, &keys, &sessions).await.map(Caller)
    }
}
