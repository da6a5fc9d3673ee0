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
        let audience: Vec<String> = self
            .token_audience
            .iter()
            .map(|a| a.trim().to_string())
            .filter(|a| !a.is_empty())
            .collect();
        if audience.is_empty() {
            anyhow::bail!(
                "an identity provider's tokens need --token-audience: the `aud` its tokens for \
                 throng carry (the client id registered for throng at the provider), so that a \
                 token issued for another application is refused"
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
