//! Signing in to the admin console with the organisation's identity
//! provider: OpenID Connect's authorization code flow with PKCE (RFC 7636).
//!
//! `GET /admin/oidc/login` makes a `state`, a `nonce` and a PKCE verifier
//! (32 random bytes each, from the OS), keeps them in the store for
//! [`LoginConfig::state_ttl`] (every node of a cluster sees them: the
//! provider may send the browser back to another node), keyed by the
//! SHA-256 of the state, and sets a cookie holding the state, bound to
//! this browser: HttpOnly, `SameSite=Lax` (the return from the provider is
//! a cross-site navigation, on which a `Strict` cookie is not sent), its
//! `Path` the callback's only, and its `Max-Age` the state's lifetime. It
//! then sends the browser to the provider's `authorization_endpoint` with
//! the S256 challenge of the verifier.
//!
//! `GET /admin/oidc/callback` compares the returned state with the
//! cookie's in constant time (a sign-in another site began cannot be
//! finished in this browser), takes the stored row with one `DELETE ...
//! RETURNING` (so a state is used once, on whichever node), refuses it past
//! its expiry, exchanges the code at the `token_endpoint` with the
//! verifier (and the client's secret when one is set, HTTP Basic) within
//! [`LoginConfig::token_timeout`] and [`LoginConfig::token_body_bytes_max`],
//! checks the ID token with the provider's keys and the rules of its bearer
//! tokens (`TokenKeys::verify_id_token`: issuer, expiry, signature; the
//! audience is the client id) and its `nonce`, maps its claims with the
//! `[token-claims]` mapping, and makes the session
//! (`Sessions::create`). Every refusal is a page saying what happened,
//! with a link to try again.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa_axum::routes;

use super::jwks::Provider;
use crate::base::clock::Clock;
use crate::platform::audit::{Actor, Audit};
use crate::platform::auth::TokenKeys;
use crate::platform::headers::set_no_store;
use crate::platform::public_url::PublicUrl;
use crate::platform::service::{AppState, OpenApiRouter};
use crate::platform::session::{Sessions, VerifiedClaims, CONSOLE_PATH};
use crate::store::{Columns, Sql, Store, StoreError};

/// Where a sign-in with the provider begins.
pub const LOGIN_PATH: &str = "/admin/oidc/login";
/// Where the provider sends the browser back (the redirect URI, below the
/// public URL).
pub const CALLBACK_PATH: &str = "/admin/oidc/callback";
/// The scopes asked for.
pub const SCOPES: &str = "openid profile email";
/// Claims of the ID token that are about the token, not the person: not
/// kept in the session.
const TOKEN_CLAIMS: [&str; 18] = [
    "iss",
    "aud",
    "exp",
    "iat",
    "nbf",
    "jti",
    "nonce",
    "azp",
    "at_hash",
    "c_hash",
    "sid",
    "auth_time",
    "typ",
    "acr",
    "amr",
    "session_state",
    "realm_access",
    "resource_access",
];

/// The client's secret: never printed (its `Debug` says so).
#[derive(Clone)]
pub struct ClientSecret(pub String);

impl std::fmt::Debug for ClientSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientSecret(..)")
    }
}

impl std::str::FromStr for ClientSecret {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err("the client secret is empty".into());
        }
        Ok(ClientSecret(s.to_string()))
    }
}

/// `serve --oidc-*`, checked.
#[derive(Clone, Debug)]
pub struct LoginConfig {
    pub client_id: String,
    pub client_secret: Option<ClientSecret>,
    /// A sign-in must come back from the provider within this.
    pub state_ttl: Duration,
    /// The code's exchange at the token endpoint takes this long at most.
    pub token_timeout: Duration,
    /// The token endpoint's answer has this many bytes at most.
    pub token_body_bytes_max: usize,
}

/// The console's sign-in with the provider.
pub struct OidcLogin {
    config: LoginConfig,
    provider: Arc<Provider>,
    keys: Arc<TokenKeys>,
    store: Store,
    clock: Clock,
    public_url: PublicUrl,
    client: reqwest::Client,
    /// The roles that use the console (`RoleSpec::console`).
    console_roles: Vec<&'static str>,
}

mod sql {
    use super::Sql;
    pub static INSERT: Sql = Sql::new(
        "INSERT INTO admin_oidc_states (hash, nonce, verifier, redirect_uri, expires_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    );
    pub static TAKE: Sql = Sql::new(
        "DELETE FROM admin_oidc_states WHERE hash = ?1 \
         RETURNING nonce, verifier, redirect_uri, expires_ms",
    );
    pub static PURGE: Sql = Sql::new("DELETE FROM admin_oidc_states WHERE expires_ms < ?1");
}

/// 32 random bytes from the OS, base64url (43 characters).
fn random_secret() -> String {
    use base64::Engine;
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

/// The PKCE S256 challenge of a verifier: base64url(SHA-256(verifier)).
pub fn pkce_challenge(verifier: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier))
}

fn equal(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// A refusal shown as a page.
struct Refused {
    status: StatusCode,
    code: &'static str,
    message: String,
}

fn refused(status: StatusCode, code: &'static str, message: impl Into<String>) -> Refused {
    Refused {
        status,
        code,
        message: message.into(),
    }
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The page of a refused sign-in: what happened, and links to try again
/// and to the console.
fn page(status: StatusCode, code: &str, message: &str, base: &str, retry: bool) -> Response {
    let again = if retry {
        format!("<a href=\"{base}{LOGIN_PATH}\">Try signing in again</a> · ")
    } else {
        String::new()
    };
    let body = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <link rel=\"icon\" href=\"data:,\">\
         <title>Signing in was refused · throng</title>\
         <link rel=\"stylesheet\" href=\"{base}/admin/console.css\"></head>\
         <body><main><h1>Signing in was refused</h1>\
         <p role=\"alert\" id=\"refusal\" data-code=\"{code}\">{}</p>\
         <p class=\"links\">{again}<a href=\"{base}{CONSOLE_PATH}\">Back to the console</a></p>\
         </main></body></html>\n",
        escape(message),
        code = escape(code),
    );
    let mut res = (status, Html(body)).into_response();
    set_no_store(&mut res);
    res
}

impl OidcLogin {
    pub fn new(
        config: LoginConfig,
        provider: Arc<Provider>,
        keys: Arc<TokenKeys>,
        store: Store,
        clock: Clock,
        public_url: PublicUrl,
        console_roles: Vec<&'static str>,
    ) -> anyhow::Result<OidcLogin> {
        let client = reqwest::Client::builder()
            .timeout(config.token_timeout)
            .connect_timeout(config.token_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("throng/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(OidcLogin {
            config,
            provider,
            keys,
            store,
            clock,
            public_url,
            client,
            console_roles,
        })
    }

    pub fn client_id(&self) -> &str {
        &self.config.client_id
    }

    fn secure(&self) -> bool {
        self.public_url
            .configured()
            .is_some_and(|u| u.starts_with("https://"))
    }

    /// The cookie binding a sign-in to the browser that began it.
    fn cookie_name(&self) -> &'static str {
        if self.secure() {
            "__Secure-throng_oidc"
        } else {
            "throng_oidc"
        }
    }

    /// The callback's path as the browser sees it (below the public URL's
    /// path, when it has one): the cookie's `Path`.
    fn cookie_path(&self) -> String {
        let prefix = self
            .public_url
            .configured()
            .and_then(|u| u.split_once("://"))
            .and_then(|(_, rest)| rest.find('/').map(|i| rest[i..].to_string()))
            .unwrap_or_default();
        format!("{}{CALLBACK_PATH}", prefix.trim_end_matches('/'))
    }

    fn set_cookie(&self, state: &str) -> HeaderValue {
        let secure = if self.secure() { "; Secure" } else { "" };
        HeaderValue::from_str(&format!(
            "{}={state}; Path={}; Max-Age={}; HttpOnly; SameSite=Lax{secure}",
            self.cookie_name(),
            self.cookie_path(),
            self.config.state_ttl.as_secs()
        ))
        .expect("a state is a header value")
    }

    fn clear_cookie(&self) -> HeaderValue {
        let secure = if self.secure() { "; Secure" } else { "" };
        HeaderValue::from_str(&format!(
            "{}=; Path={}; Max-Age=0; HttpOnly; SameSite=Lax{secure}",
            self.cookie_name(),
            self.cookie_path()
        ))
        .expect("a header value")
    }

    fn cookie_of<'h>(&self, headers: &'h HeaderMap) -> Option<&'h str> {
        let name = self.cookie_name();
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.trim())
    }

    /// Begins a sign-in: the provider's authorization URL to send the
    /// browser to, and the state (the cookie's value).
    async fn begin(&self, base: &str, hint: Option<&str>) -> Result<(String, String), Refused> {
        let endpoints = self.provider.endpoints().await.map_err(|e| {
            tracing::warn!(error = %format!("{e:#}"), "cannot find the identity provider's endpoints");
            refused(
                StatusCode::BAD_GATEWAY,
                "provider_unreachable",
                "the organisation's identity provider cannot be reached just now (its discovery \
                 document did not answer); try again in a minute, or sign in with a one-time \
                 link from throng admin link",
            )
        })?;
        let (state, nonce, verifier) = (random_secret(), random_secret(), random_secret());
        let redirect_uri = format!("{base}{CALLBACK_PATH}");
        let now = self.clock.now_ms();
        let expires = now + self.config.state_ttl.as_millis() as i64;
        // Kept a day past their expiry, to say "expired" rather than
        // "unknown" to a late return.
        let purge_before = now - 86_400_000;
        let hashed = sha256_hex(&state);
        let row = (
            hashed,
            nonce.clone(),
            verifier.clone(),
            redirect_uri.clone(),
        );
        self.store
            .write(move |tx| {
                let (h, n, v, r) = row.clone();
                Box::pin(async move {
                    tx.execute(&sql::PURGE, &[&purge_before]).await?;
                    tx.execute(&sql::INSERT, &[&h, &n, &v, &r, &expires])
                        .await?;
                    Ok(())
                })
            })
            .await
            .map_err(store_refusal)?;
        let mut query = form_urlencoded::Serializer::new(String::new());
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.config.client_id)
            .append_pair("redirect_uri", &redirect_uri)
            .append_pair("scope", SCOPES)
            .append_pair("state", &state)
            .append_pair("nonce", &nonce)
            .append_pair("code_challenge", &pkce_challenge(&verifier))
            .append_pair("code_challenge_method", "S256");
        if let Some(hint) = hint {
            query.append_pair("login_hint", hint);
        }
        let query = query.finish();
        let sep = if endpoints.authorization.contains('?') {
            '&'
        } else {
            '?'
        };
        Ok((format!("{}{sep}{query}", endpoints.authorization), state))
    }

    /// Finishes a sign-in: the claims of the person the provider signed in.
    async fn finish(
        &self,
        q: &CallbackQuery,
        headers: &HeaderMap,
    ) -> Result<VerifiedClaims, Refused> {
        let cookie = self.cookie_of(headers);
        let minutes = self.config.state_ttl.as_secs().div_ceil(60);
        if let Some(error) = &q.error {
            // The provider's answer ends this sign-in: its state is spent.
            if let (Some(state), Some(cookie)) = (&q.state, cookie) {
                if equal(state, cookie) {
                    let _ = self.take(state).await;
                }
            }
            let detail = q
                .error_description
                .as_deref()
                .map(|d| format!(" ({})", d.chars().take(300).collect::<String>()))
                .unwrap_or_default();
            let error: String = error.chars().take(100).collect();
            return Err(if error == "access_denied" {
                refused(
                    StatusCode::FORBIDDEN,
                    "access_denied",
                    format!(
                        "the identity provider did not sign you in: access was denied \
                         (access_denied{detail}); sign in there with an account allowed to use \
                         throng's console, or ask its administrators"
                    ),
                )
            } else {
                refused(
                    StatusCode::BAD_REQUEST,
                    "provider_error",
                    format!("the identity provider did not sign you in: {error}{detail}"),
                )
            });
        }
        let (Some(code), Some(state)) = (q.code.as_deref(), q.state.as_deref()) else {
            return Err(refused(
                StatusCode::BAD_REQUEST,
                "callback_incomplete",
                "this address is where the identity provider sends you back after signing in, \
                 with a code and a state; it was opened without them",
            ));
        };
        let Some(cookie) = cookie else {
            return Err(refused(
                StatusCode::BAD_REQUEST,
                "state_not_this_browser",
                format!(
                    "this browser did not begin this sign-in, or began it more than {minutes} \
                     minutes ago (its sign-in cookie is missing; cookies must be allowed for \
                     this site)"
                ),
            ));
        };
        if !equal(state, cookie) {
            return Err(refused(
                StatusCode::BAD_REQUEST,
                "state_mismatch",
                "the state the identity provider sent back is not the one this browser's \
                 sign-in began with (another sign-in was begun since, or the link came from \
                 elsewhere)",
            ));
        }
        let Some((nonce, verifier, redirect_uri, expires_ms)) = self.take(state).await? else {
            return Err(refused(
                StatusCode::BAD_REQUEST,
                "state_used",
                "this sign-in was finished already (each return from the identity provider is \
                 used once) or is unknown to this server",
            ));
        };
        if self.clock.now_ms() >= expires_ms {
            return Err(refused(
                StatusCode::BAD_REQUEST,
                "state_expired",
                format!(
                    "this sign-in took longer than the {minutes} minutes allowed between \
                     leaving for the identity provider and coming back"
                ),
            ));
        }
        let id_token = self.exchange(code, &verifier, &redirect_uri).await?;
        let claims = self
            .keys
            .verify_id_token(&id_token, &self.config.client_id)
            .await
            .map_err(|e| {
                let (status, message) = match e.code {
                    "role_not_mapped" => (
                        StatusCode::FORBIDDEN,
                        format!(
                            "you are signed in at the identity provider, but your {}",
                            e.message.trim_start_matches("the token's ")
                        ),
                    ),
                    "wrong_audience" => (
                        StatusCode::UNAUTHORIZED,
                        format!(
                            "the identity provider's ID token is for another application: its \
                             aud is not the client id {} (--oidc-client-id)",
                            self.config.client_id
                        ),
                    ),
                    _ => (
                        StatusCode::UNAUTHORIZED,
                        format!("the identity provider's ID token is refused: {}", e.message),
                    ),
                };
                refused(status, e.code, message)
            })?;
        let given_nonce = claims.get("nonce").and_then(Value::as_str).unwrap_or("");
        if !equal(given_nonce, &nonce) {
            return Err(refused(
                StatusCode::UNAUTHORIZED,
                "nonce_mismatch",
                "the identity provider's ID token does not carry the nonce this sign-in sent \
                 (it was made for another sign-in)",
            ));
        }
        let claims = verified_claims(claims)?;
        if !self.console_roles.contains(&claims.role.as_str()) {
            return Err(refused(
                StatusCode::FORBIDDEN,
                "not_a_console_role",
                format!(
                    "you are signed in at the identity provider as {}, but your roles there map \
                     to the throng role '{}', which does not use the console (the console's \
                     roles: {}); ask for one of those, mapped in the configuration's \
                     [token-claims] roles",
                    claims.sub,
                    claims.role,
                    self.console_roles.join(", ")
                ),
            ));
        }
        Ok(claims)
    }

    /// The stored sign-in of a state, taken (deleted) once.
    async fn take(&self, state: &str) -> Result<Option<(String, String, String, i64)>, Refused> {
        let hashed = sha256_hex(state);
        self.store
            .write(move |tx| {
                let h = hashed.clone();
                Box::pin(async move {
                    tx.query_opt(&sql::TAKE, &[&h], |r| {
                        Ok((r.text(0)?, r.text(1)?, r.text(2)?, r.int(3)?))
                    })
                    .await
                })
            })
            .await
            .map_err(store_refusal)
    }

    /// Exchanges the code at the token endpoint: the ID token.
    async fn exchange(
        &self,
        code: &str,
        verifier: &str,
        redirect_uri: &str,
    ) -> Result<String, Refused> {
        let unreachable = |what: String| {
            tracing::warn!(error = %what, "the identity provider's token endpoint failed");
            refused(
                StatusCode::BAD_GATEWAY,
                "provider_unreachable",
                format!(
                    "the identity provider's token endpoint did not answer as it should ({what}); \
                     try again in a minute"
                ),
            )
        };
        let endpoints = self
            .provider
            .endpoints()
            .await
            .map_err(|e| unreachable(format!("{e:#}")))?;
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("client_id", self.config.client_id.as_str()),
            ("code_verifier", verifier),
        ];
        let body = serde_urlencoded::to_string(form).expect("a form encodes");
        let mut req = self
            .client
            .post(&endpoints.token)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::ACCEPT, "application/json")
            .body(body);
        if let Some(secret) = &self.config.client_secret {
            // RFC 6749 2.3.1: each form-encoded, then Basic.
            let enc = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            req = req.basic_auth(enc(&self.config.client_id), Some(enc(&secret.0)));
        }
        let mut resp = req
            .send()
            .await
            .map_err(|e| unreachable(e.without_url().to_string()))?;
        let status = resp.status();
        let max = self.config.token_body_bytes_max;
        let mut bytes = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| unreachable(e.without_url().to_string()))?
        {
            if bytes.len() + chunk.len() > max {
                return Err(unreachable(format!(
                    "its answer is over --oidc-token-body-bytes-max ({max} bytes)"
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        let json: Option<Value> = serde_json::from_slice(&bytes).ok();
        if !status.is_success() {
            let said = |k: &str| {
                json.as_ref()
                    .and_then(|j| j.get(k))
                    .and_then(Value::as_str)
                    .map(|s| s.chars().take(300).collect::<String>())
            };
            let (error, description) = (said("error"), said("error_description"));
            if status.is_client_error() {
                return Err(refused(
                    StatusCode::UNAUTHORIZED,
                    "code_refused",
                    format!(
                        "the identity provider refused to complete the sign-in: {}{} (HTTP \
                         {}); try signing in again",
                        error.as_deref().unwrap_or("no reason given"),
                        description.map(|d| format!(": {d}")).unwrap_or_default(),
                        status.as_u16()
                    ),
                ));
            }
            return Err(unreachable(format!("HTTP {}", status.as_u16())));
        }
        json.as_ref()
            .and_then(|j| j.get("id_token"))
            .and_then(Value::as_str)
            .map(String::from)
            .ok_or_else(|| unreachable("its answer holds no id_token".into()))
    }
}

fn store_refusal(e: StoreError) -> Refused {
    tracing::error!(error = %e, "the console's sign-in could not use the store");
    refused(
        StatusCode::SERVICE_UNAVAILABLE,
        "store_unavailable",
        "this server cannot reach its store just now; try again in a minute",
    )
}

/// The session's claims of a checked, mapped ID token: `sub`, the mapped
/// `role`, and the person's claims (scope claims, name, email...).
fn verified_claims(mut claims: Map<String, Value>) -> Result<VerifiedClaims, Refused> {
    let text = |claims: &Map<String, Value>, k: &str| {
        claims
            .get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(String::from)
    };
    let (Some(sub), Some(role)) = (text(&claims, "sub"), text(&claims, "role")) else {
        return Err(refused(
            StatusCode::UNAUTHORIZED,
            "invalid_token",
            "the identity provider's ID token names no subject (sub)",
        ));
    };
    for k in TOKEN_CLAIMS {
        claims.remove(k);
    }
    claims.remove("sub");
    claims.remove("role");
    Ok(VerifiedClaims {
        sub,
        role,
        extra: claims,
    })
}

/// The sign-in routes (pages: browser redirects) and the status read by
/// the console's page.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(login))
        .routes(routes!(callback))
        .routes(routes!(login_status))
}

/// Bytes of a `login_hint` passed on at most (a longer one is dropped).
pub const LOGIN_HINT_BYTES_MAX: usize = 200;

/// How a sign-in begins.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LoginQuery {
    /// Passed to the provider as OpenID Connect's `login_hint` (the
    /// account to sign in with, pre-filled there); at most 200 bytes.
    #[param(example = "alice@example.org")]
    pub login_hint: Option<String>,
}

/// What the provider sends the browser back with.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CallbackQuery {
    /// The authorization code, exchanged once at the token endpoint.
    #[param(example = "6f1c2b7e-0d1a-4c8e-9a4f-3b2d1e0f9c8a.4e3d2c1b")]
    pub code: Option<String>,
    /// The state this server sent (checked against this browser's cookie).
    #[param(example = "Vq3x8LkP2nR5tY7wE0aS4dF6gH9jK1lZ2xC3vB5nM7Q")]
    pub state: Option<String>,
    /// The provider's refusal instead of a code (`access_denied`...).
    #[param(example = "access_denied")]
    pub error: Option<String>,
    /// The provider's words about its refusal.
    #[param(example = "The user denied the request")]
    pub error_description: Option<String>,
}

/// Whether the console offers signing in with the provider.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoginStatus {
    /// Signing in with the organisation's identity provider is set up.
    pub enabled: bool,
    /// Where the sign-in begins (a link, not a call); null when off.
    pub login: Option<String>,
    /// The provider's issuer; null when off.
    pub issuer: Option<String>,
}

fn not_configured(base: &str) -> Response {
    page(
        StatusCode::NOT_FOUND,
        "provider_login_off",
        "signing in with the organisation's identity provider is not set up on this server \
         (serve --oidc-issuer and --oidc-client-id); sign in with a one-time link from throng \
         admin link",
        base,
        false,
    )
}

/// Begins signing in with the organisation's identity provider
///
/// A browser navigation, not an API call: answers 302 to the provider's
/// authorization endpoint (authorization code flow with PKCE S256, scopes
/// `openid profile email`, a fresh state and nonce) and sets a short-lived
/// HttpOnly, SameSite=Lax cookie bound to the callback's path holding the
/// state. 404 (a page saying so) when no provider login is configured; 502
/// (a page) when the provider's discovery document cannot be read.
#[utoipa::path(get, path = "/admin/oidc/login", tag = "console",
    params(LoginQuery),
    responses((status = 302, description = "To the provider's authorization endpoint; Set-Cookie holds the sign-in's state",
               headers(("Location" = String, description = "The provider's authorization URL: its authorization_endpoint?response_type=code&client_id=...&redirect_uri=PUBLIC_URL/admin/oidc/callback&scope=openid+profile+email&state=...&nonce=...&code_challenge=...&code_challenge_method=S256"))),
              (status = 404, content_type = "text/html", body = String, description = "provider_login_off: an HTML page saying no identity provider is set up (serve --oidc-issuer and --oidc-client-id), and how to sign in with a link"),
              (status = 502, content_type = "text/html", body = String, description = "provider_unreachable: an HTML page saying the provider's discovery could not be read, with a link to try again")))]
pub async fn login(
    State(sessions): State<Arc<Sessions>>,
    headers: HeaderMap,
    Query(q): Query<LoginQuery>,
) -> Response {
    let base = sessions.public_url().base(&headers);
    let Some(login) = sessions.login() else {
        return not_configured(&base);
    };
    let hint = q
        .login_hint
        .as_deref()
        .map(str::trim)
        .filter(|h| !h.is_empty() && h.len() <= LOGIN_HINT_BYTES_MAX);
    match login.begin(&base, hint).await {
        Ok((location, state)) => {
            let mut res = StatusCode::FOUND.into_response();
            let h = res.headers_mut();
            h.insert(
                header::LOCATION,
                HeaderValue::from_str(&location).expect("a URL is a header value"),
            );
            h.insert(header::SET_COOKIE, login.set_cookie(&state));
            set_no_store(&mut res);
            res
        }
        Err(r) => page(r.status, r.code, &r.message, &base, true),
    }
}

/// Finishes signing in with the organisation's identity provider
///
/// A browser navigation, the redirect URI registered at the provider: the
/// provider sends the browser here with `code` and `state` (or `error`).
/// The state must be this browser's (its cookie), unused and at most
/// --oidc-state-ttl-s old; the code is exchanged at the token endpoint
/// with the PKCE verifier; the ID token is checked with the provider's
/// keys (issuer, audience = the client id, expiry, nonce) and its roles
/// mapped with [token-claims]. Then 303 to /admin/ with the session
/// cookie (HttpOnly, SameSite=Strict). A refusal is an HTML page saying
/// why, with a link to try again: 400 (state missing, not this browser's,
/// used, expired; the provider's error), 401 (the ID token or the code
/// refused), 403 (access_denied; a role that maps to no throng role), 404
/// (not configured), 502 (the provider out of reach).
#[utoipa::path(get, path = "/admin/oidc/callback", tag = "console",
    params(CallbackQuery),
    responses((status = 303, description = "Signed in: to the console; Set-Cookie holds the session and clears the sign-in's state",
               headers(("Location" = String, description = "The console: PUBLIC_URL/admin/"))),
              (status = 400, content_type = "text/html", body = String, description = "callback_incomplete, state_not_this_browser, state_mismatch, state_used, state_expired, provider_error: an HTML page saying why, with a link to try again"),
              (status = 401, content_type = "text/html", body = String, description = "code_refused, nonce_mismatch, wrong_audience, wrong_issuer, token_expired: the code or the ID token refused"),
              (status = 403, content_type = "text/html", body = String, description = "access_denied, role_not_mapped, not_a_console_role"),
              (status = 404, content_type = "text/html", body = String, description = "provider_login_off: no identity provider is set up on this server"),
              (status = 502, content_type = "text/html", body = String, description = "provider_unreachable: the provider's token endpoint could not be reached")))]
pub async fn callback(
    State(sessions): State<Arc<Sessions>>,
    headers: HeaderMap,
    Query(q): Query<CallbackQuery>,
) -> Response {
    let base = sessions.public_url().base(&headers);
    let Some(login) = sessions.login() else {
        return not_configured(&base);
    };
    let clear = login.clear_cookie();
    let outcome = match login.finish(&q, &headers).await {
        Ok(claims) => sessions.create(claims).await.map_err(store_refusal),
        Err(r) => Err(r),
    };
    let mut res = match outcome {
        Ok(made) => {
            let actor = Actor {
                sub: made.session.sub.clone(),
                role: made.session.role.clone(),
                via: "oidc",
            };
            let audit = Audit::new(login.store.clone(), login.clock.clone(), vec![], vec![]);
            if let Err(e) = audit
                .record(&actor, "GET", CALLBACK_PATH, StatusCode::SEE_OTHER.as_u16())
                .await
            {
                tracing::error!(error = %e, "the audit log could not record a sign-in");
            }
            tracing::info!(sub = %actor.sub, role = %actor.role, "signed in to the console with the identity provider");
            let mut res = StatusCode::SEE_OTHER.into_response();
            let h = res.headers_mut();
            h.insert(
                header::LOCATION,
                HeaderValue::from_str(&format!("{base}{CONSOLE_PATH}"))
                    .expect("a URL is a header value"),
            );
            h.append(header::SET_COOKIE, sessions.set_cookie(&made.secret));
            res
        }
        Err(r) => {
            tracing::info!(
                code = r.code,
                "a sign-in with the identity provider was refused"
            );
            page(r.status, r.code, &r.message, &base, true)
        }
    };
    res.headers_mut().append(header::SET_COOKIE, clear);
    set_no_store(&mut res);
    res
}

/// Whether the console offers signing in with the provider
///
/// Read by the console's sign-in page to show "Sign in with your
/// organisation" beside the one-time link; needs no sign-in.
#[utoipa::path(get, path = "/api/admin/oidc", tag = "console",
    responses((status = 200, body = LoginStatus,
               example = json!({"enabled": true, "login": "/admin/oidc/login", "issuer": "https://login.example.org/realms/city"}))))]
pub async fn login_status(State(sessions): State<Arc<Sessions>>) -> Json<LoginStatus> {
    Json(match sessions.login() {
        Some(l) => LoginStatus {
            enabled: true,
            login: Some(LOGIN_PATH.into()),
            issuer: Some(l.provider.issuer().to_string()),
        },
        None => LoginStatus {
            enabled: false,
            login: None,
            issuer: None,
        },
    })
}
