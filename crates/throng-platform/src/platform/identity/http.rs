//! The admin API of token revocations.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::routes;

use super::revocation::{self, NewRevocation, Revocation, RevokedKind, REVOCATIONS_LISTED_MAX};
use crate::platform::auth::{Caller, Role};
use crate::platform::error::{ApiError, ApiResult};
use crate::platform::extract::ApiJson;
use crate::platform::service::{AppState, OpenApiRouter};

/// The platform's token routes.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(revoke, revocations))
}

/// A revocation asked for: exactly one of `jti` and `sub`.
#[derive(Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RevokeBody {
    /// One token's id (its `jti` claim).
    #[serde(default)]
    pub jti: Option<String>,
    /// A subject: every token of this `sub` issued up to now.
    #[serde(default)]
    pub sub: Option<String>,
    /// Refused until then (RFC 3339), at least the revoked tokens'
    /// expiry; default 24 hours from now, at most 366 days.
    #[serde(default)]
    pub until: Option<String>,
    /// Why, for the list (at most 500 bytes).
    #[serde(default)]
    pub reason: Option<String>,
}

/// The revocations in force.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct RevocationList {
    /// Newest first, at most 1000.
    pub revocations: Vec<Revocation>,
}

/// Revoke a token (by jti) or a subject's tokens (admin)
///
/// Refuses one token (its `jti`), or every token of a subject issued up to
/// now (`sub`), throng's own or the identity provider's, until `until`;
/// this node at once, every other node sharing the store within its
/// `--revocation-refresh-ms`. Asking again only lengthens `until`.
#[utoipa::path(post, path = "/api/admin/tokens/revocations", tag = "tokens",
    security(("bearer" = [])),
    request_body(content = RevokeBody, description = "Exactly one of jti (one token) and sub (every token of that subject issued up to now); until: RFC 3339, the revoked tokens' expiry at least (default 24 h from now, at most 366 days); reason: at most 500 bytes. Every node refuses the tokens within --revocation-refresh-ms (this node at once).",
                 example = json!({"sub": "f3a1c2d4-5b6e-4f70-8a9b-0c1d2e3f4a5b", "until": "2026-12-01T18:00:00Z", "reason": "laptop stolen"})),
    responses((status = 201, body = Revocation, description = "Recorded (again: until only grows, and a subject's revocation moves to now)",
               example = json!({"kind": "sub", "value": "f3a1c2d4-5b6e-4f70-8a9b-0c1d2e3f4a5b", "revokedAt": "2026-11-27T09:12:03.51Z",
                                "until": "2026-12-01T18:00:00Z", "reason": "laptop stolen"})),
              (status = 401, description = "missing_token, invalid_token, token_expired, token_revoked"),
              (status = 403, description = "forbidden (not an admin token)"),
              (status = 422, description = "invalid_field: neither or both of jti and sub, a bad or past until, a value or reason too long")))]
pub async fn revoke(
    State(st): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<RevokeBody>,
) -> ApiResult<(StatusCode, Json<Revocation>)> {
    caller.require(Role::ADMIN)?;
    let (kind, value) = match (&body.jti, &body.sub) {
        (Some(jti), None) => (RevokedKind::Jti, jti),
        (None, Some(sub)) => (RevokedKind::Sub, sub),
        _ => {
            return Err(ApiError::invalid_field(
                "give exactly one of jti (one token) and sub (every token of a subject)",
            ))
        }
    };
    let until_ms = match &body.until {
        Some(text) => Some(revocation::parse_rfc3339(text).map_err(ApiError::invalid_field)?),
        None => None,
    };
    let new = NewRevocation::new(kind, value, until_ms, body.reason.as_deref())
        .map_err(ApiError::invalid_field)?;
    let recorded = st.keys.revocations().revoke(&new).await?;
    tracing::info!(
        kind = ?recorded.kind,
        value = %recorded.value,
        by = %caller.0.sub,
        "token revoked"
    );
    Ok((StatusCode::CREATED, Json(recorded)))
}

/// The token revocations in force (admin)
///
/// Every revocation not yet past its `until`, newest first (at most 1000),
/// with who or what it refuses and why; expired ones are purged.
#[utoipa::path(get, path = "/api/admin/tokens/revocations", tag = "tokens",
    security(("bearer" = [])),
    responses((status = 200, body = RevocationList, description = "The revocations in force, newest first, at most 1000",
               example = json!({"revocations": [{"kind": "jti", "value": "0b7c9e2a-1f3d-4c5b-8a6e-7d9f0a1b2c3d", "revokedAt": "2026-11-27T09:12:03.51Z",
                                                 "until": "2026-11-28T09:12:03.51Z", "reason": ""}]})),
              (status = 401, description = "missing_token, invalid_token, token_expired, token_revoked"),
              (status = 403, description = "forbidden (not an admin token)")))]
pub async fn revocations(
    State(st): State<AppState>,
    caller: Caller,
) -> ApiResult<Json<RevocationList>> {
    caller.require(Role::ADMIN)?;
    Ok(Json(RevocationList {
        revocations: revocation::list(&st.store, REVOCATIONS_LISTED_MAX).await?,
    }))
}
