//! Tokens from an organisation's identity provider (OpenID Connect), beside
//! throng's own, and the revocation of tokens.
//!
//! Two kinds of bearer token are accepted, told apart by the header's
//! `alg` (see `auth::TokenKeys::verify_as`):
//!
//! - `HS256`: throng's own, signed with the data directory's token secret
//!   (`throng token`, demo and voter tokens). Never checked against a
//!   provider's key; an HS256 token naming a provider key (`kid`) or the
//!   provider's issuer is refused as `wrong_algorithm` (algorithm
//!   confusion: a public key used as an HMAC secret).
//! - `RS256`, `ES256`, `EdDSA`: the provider's, checked with a key of its
//!   JWKS ([`jwks::Provider`]) whose algorithm is the header's, then its
//!   issuer, audience, expiry; its claims are mapped to a throng role and
//!   the role's scope claims ([`mapping::ClaimMapping`]).
//!
//! Either kind is then checked against the revocations every node shares
//! ([`revocation::Revocations`]). The checks are in one place,
//! `TokenKeys::verify_as` (behind `Caller` and `bearer_claims`), and take
//! the token alone, so a browser sign-in can verify an ID token with the
//! same keys.

pub mod http;
pub mod jwks;
pub mod login;
pub mod mapping;
pub mod revocation;

use std::time::Duration;

/// `throng serve`'s identity flags.
#[derive(Clone, Debug, clap::Args)]
pub struct IdentityArgs {
    /// The identity provider's key set (JWKS) URL: its RS256, ES256 and
    /// EdDSA tokens are accepted beside throng's own HS256 ones. Needs
    /// --token-issuer and --token-audience. Or give --oidc-issuer.
    #[arg(long, env = "THRONG_JWKS_URL", conflicts_with = "oidc_issuer")]
    pub jwks_url: Option<String>,
    /// The identity provider's issuer URL (OpenID Connect): the key set is
    /// found through ISSUER/.well-known/openid-configuration (its
    /// jwks_uri), and --token-issuer defaults to it.
    #[arg(long, env = "THRONG_OIDC_ISSUER")]
    pub oidc_issuer: Option<String>,
    /// The `iss` the provider's tokens must carry.
    #[arg(long, env = "THRONG_TOKEN_ISSUER")]
    pub token_issuer: Option<String>,
    /// An `aud` the provider's tokens must carry (comma-separated: any one
    /// of them).
    #[arg(long, env = "THRONG_TOKEN_AUDIENCE", value_delimiter = ',')]
    pub token_audience: Vec<String>,
    /// How the provider's claims map to throng's roles and their scope
    /// claims, as JSON (in the configuration file: a `[token-claims]`
    /// table). Keys: role-claim (default "roles"; a dotted path such as
    /// "realm_access.roles" reaches into objects), roles (provider role or
    /// group name -> throng role), default-role, scopes (throng claim ->
    /// provider claim path, e.g. {"places": "throng_places"}).
    #[arg(long, env = "THRONG_TOKEN_CLAIMS", value_name = "JSON")]
    pub token_claims: Option<String>,
    /// Seconds the provider's keys are kept before they are fetched again
    /// (the key cache's lifetime, and the periodic refresh).
    #[arg(long, env = "THRONG_JWKS_REFRESH_S", default_value_t = 300)]
    pub jwks_refresh_s: u64,
    /// Milliseconds between two fetches at least: a token naming an
    /// unknown key id fetches the key set again (a rotation), at most once
    /// per this.
    #[arg(long, env = "THRONG_JWKS_REFETCH_MIN_MS", default_value_t = 5_000)]
    pub jwks_refetch_min_ms: u64,
    /// Milliseconds one fetch of the key set (or the discovery document)
    /// may take.
    #[arg(long, env = "THRONG_JWKS_FETCH_TIMEOUT_MS", default_value_t = 5_000)]
    pub jwks_fetch_timeout_ms: u64,
    /// Bytes of a key set or discovery document at most.
    #[arg(long, env = "THRONG_JWKS_BODY_BYTES_MAX", default_value_t = 256 * 1024)]
    pub jwks_body_bytes_max: usize,
    /// Keys of a key set kept at most (the rest are ignored, with a warning).
    #[arg(long, env = "THRONG_JWKS_KEYS_MAX", default_value_t = 64)]
    pub jwks_keys_max: usize,
    /// Milliseconds between two reads of the shared revocations: a token
    /// revoked on another node is refused here at most this long (plus one
    /// read) later; on the node that revoked it, at once.
    #[arg(long, env = "THRONG_REVOCATION_REFRESH_MS", default_value_t = 2_000)]
    pub revocation_refresh_ms: u64,
    /// The client id registered for throng at the provider: turns on
    /// signing in to the admin console with the provider (authorization
    /// code with PKCE; the redirect URI is PUBLIC_URL/admin/oidc/callback).
    /// Needs --oidc-issuer. The ID token's `aud` must be this id.
    #[arg(long, env = "THRONG_OIDC_CLIENT_ID")]
    pub oidc_client_id: Option<String>,
    /// The client's secret (a confidential client; sent to the token
    /// endpoint with HTTP Basic). Never logged. Or --oidc-client-secret-file.
    #[arg(long, env = "THRONG_OIDC_CLIENT_SECRET", hide_env_values = true)]
    pub oidc_client_secret: Option<login::ClientSecret>,
    /// A file holding the client's secret (its first line).
    #[arg(
        long,
        env = "THRONG_OIDC_CLIENT_SECRET_FILE",
        conflicts_with = "oidc_client_secret"
    )]
    pub oidc_client_secret_file: Option<std::path::PathBuf>,
    /// Seconds a sign-in begun at the provider may take before its return
    /// is refused (its state, nonce and PKCE verifier are forgotten).
    #[arg(long, env = "THRONG_OIDC_STATE_TTL_S", default_value_t = 600)]
    pub oidc_state_ttl_s: u64,
    /// Milliseconds the provider's token endpoint may take to answer (the
    /// exchange of the code).
    #[arg(long, env = "THRONG_OIDC_TOKEN_TIMEOUT_MS", default_value_t = 10_000)]
    pub oidc_token_timeout_ms: u64,
    /// Bytes of the token endpoint's answer at most.
    #[arg(long, env = "THRONG_OIDC_TOKEN_BODY_BYTES_MAX", default_value_t = 64 * 1024)]
    pub oidc_token_body_bytes_max: usize,
}

impl IdentityArgs {
    /// The provider's settings, `None` without --jwks-url or --oidc-issuer;
    /// an error names the flag to change.
    pub fn provider(&self) -> anyhow::Result<Option<jwks::ProviderConfig>> {
        let source = match (&self.jwks_url, &self.oidc_issuer) {
            (None, None) => {
                for (flag, given) in [
                    ("--token-issuer", self.token_issuer.is_some()),
                    ("--token-audience", !self.token_audience.is_empty()),
                    ("--token-claims", self.token_claims.is_some()),
                ] {
                    if given {
                        anyhow::bail!(
                            "{flag} is for an identity provider's tokens: give --jwks-url or \
                             --oidc-issuer too"
                        );
                    }
                }
                return Ok(None);
            }
            (Some(url), _) => jwks::KeySource::Jwks(check_url("--jwks-url", url)?),
            (None, Some(issuer)) => jwks::KeySource::Discovery(check_url("--oidc-issuer", issuer)?),
        };
        let issuer = match (&self.token_issuer, &source) {
            (Some(i), _) => i.clone(),
            (None, jwks::KeySource::Discovery(issuer)) => issuer.clone(),
            (None, jwks::KeySource::Jwks(_)) => anyhow::bail!(
                "--jwks-url needs --token-issuer: the `iss` the provider's tokens carry (its \
                 issuer URL), or give --oidc-issuer instead"
            ),
        };
        let mut audience: Vec<String> = self
            .token_audience
            .iter()
            .map(|a| a.trim().to_string())
            .filter(|a| !a.is_empty())
            .collect();
        if audience.is_empty() {
            // The console's client id: its ID tokens are for that `aud`.
            audience.extend(
                self.oidc_client_id
                    .as_deref()
                    .map(str::trim)
                    .filter(|id| !id.is_empty())
                    .map(String::from),
            );
        }
        if audience.is_empty() {
            anyhow::bail!(
                "an identity provider's tokens need --token-audience: the `aud` its tokens for \
                 throng carry (the client id registered for throng at the provider; by default \
                 --oidc-client-id), so that a token issued for another application is refused"
            );
        }
        for (name, v) in [
            ("--jwks-refresh-s", self.jwks_refresh_s),
            ("--jwks-refetch-min-ms", self.jwks_refetch_min_ms),
            ("--jwks-fetch-timeout-ms", self.jwks_fetch_timeout_ms),
            ("--jwks-body-bytes-max", self.jwks_body_bytes_max as u64),
            ("--jwks-keys-max", self.jwks_keys_max as u64),
        ] {
            if v == 0 {
                anyhow::bail!("{name} must be at least 1");
            }
        }
        let mapping = match &self.token_claims {
            None => mapping::MappingConfig::default(),
            Some(json) => serde_json::from_str(json).map_err(|e| {
                anyhow::anyhow!(
                    "--token-claims (the configuration's [token-claims] table) does not read: \
                     {e}"
                )
            })?,
        };
        Ok(Some(jwks::ProviderConfig {
            source,
            issuer,
            audience,
            mapping,
            limits: jwks::JwksLimits {
                refresh: Duration::from_secs(self.jwks_refresh_s),
                refetch_min: Duration::from_millis(self.jwks_refetch_min_ms),
                fetch_timeout: Duration::from_millis(self.jwks_fetch_timeout_ms),
                body_bytes_max: self.jwks_body_bytes_max,
                keys_max: self.jwks_keys_max,
            },
        }))
    }

    /// The console's sign-in with the provider, `None` without
    /// --oidc-client-id; an error names the flag to change.
    pub fn login(&self) -> anyhow::Result<Option<login::LoginConfig>> {
        let Some(client_id) = self.oidc_client_id.as_deref().map(str::trim) else {
            if self.oidc_client_secret.is_some() || self.oidc_client_secret_file.is_some() {
                anyhow::bail!(
                    "--oidc-client-secret is the secret of --oidc-client-id: give the client id \
                     too"
                );
            }
            return Ok(None);
        };
        if client_id.is_empty() {
            anyhow::bail!("--oidc-client-id is empty: give the client id registered for throng");
        }
        if self.oidc_issuer.is_none() {
            anyhow::bail!(
                "--oidc-client-id signs people in to the console through the provider's \
                 authorization and token endpoints, found through its discovery document: give \
                 --oidc-issuer too (--jwks-url alone names no such endpoints)"
            );
        }
        let secret = match (&self.oidc_client_secret, &self.oidc_client_secret_file) {
            (Some(s), _) => Some(s.clone()),
            (None, Some(path)) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    anyhow::anyhow!(
                        "--oidc-client-secret-file {}: cannot read it: {e}",
                        path.display()
                    )
                })?;
                let line = text.lines().next().unwrap_or("").trim().to_string();
                if line.is_empty() {
                    anyhow::bail!(
                        "--oidc-client-secret-file {}: the file is empty",
                        path.display()
                    );
                }
                Some(login::ClientSecret(line))
            }
            (None, None) => None,
        };
        for (name, v) in [
            ("--oidc-state-ttl-s", self.oidc_state_ttl_s),
            ("--oidc-token-timeout-ms", self.oidc_token_timeout_ms),
            (
                "--oidc-token-body-bytes-max",
                self.oidc_token_body_bytes_max as u64,
            ),
        ] {
            if v == 0 {
                anyhow::bail!("{name} must be at least 1");
            }
        }
        if self.oidc_state_ttl_s > 3600 {
            anyhow::bail!("--oidc-state-ttl-s is 3600 at most (a sign-in takes minutes)");
        }
        Ok(Some(login::LoginConfig {
            client_id: client_id.to_string(),
            client_secret: secret,
            state_ttl: Duration::from_secs(self.oidc_state_ttl_s),
            token_timeout: Duration::from_millis(self.oidc_token_timeout_ms),
            token_body_bytes_max: self.oidc_token_body_bytes_max,
        }))
    }

    pub fn revocation_refresh(&self) -> anyhow::Result<Duration> {
        if self.revocation_refresh_ms == 0 {
            anyhow::bail!("--revocation-refresh-ms must be at least 1");
        }
        Ok(Duration::from_millis(self.revocation_refresh_ms))
    }
}

fn check_url(flag: &str, url: &str) -> anyhow::Result<String> {
    let url = url.trim();
    if url.starts_with("https://") {
        return Ok(url.to_string());
    }
    // Plain HTTP only to this machine: keys fetched over the network
    // unauthenticated could be anyone's.
    let loopback = url.strip_prefix("http://").is_some_and(|rest| {
        let host = rest.split(['/', '?', '#']).next().unwrap_or("");
        let host = match host.rsplit_once(':') {
            Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
            _ => host,
        };
        matches!(host, "localhost" | "[::1]") || host.starts_with("127.")
    });
    if loopback {
        return Ok(url.to_string());
    }
    anyhow::bail!(
        "{flag} must be an https:// URL (http:// only on this machine), e.g. \
         https://login.example.org/realms/city"
    )
}
