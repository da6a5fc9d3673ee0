//! Who may act in the back office: an admin, or staff of a place. A staff
//! token carries the places it covers in its `places` claim (a list of ids,
//! a comma-separated string, or `"*"` for a call centre covering every
//! place), so an identity provider can supply it as one more claim; `throng
//! token --role staff --claim places=12,15` makes one.

use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::Deserialize;

use crate::platform::auth::{self, ClaimSpec, IdList, Role, RoleSpec, TokenKeys};
use crate::platform::error::ApiError;

/// Staff of the places its token's `places` claim names.
pub const STAFF: Role = Role::new("staff");
/// The claim naming a staff token's places.
pub const PLACES_CLAIM: &str = "places";

/// Booking's roles, as `throng token --role` offers them.
pub const ROLES: &[RoleSpec] = &[RoleSpec {
    role: STAFF,
    about: "staff of the places its 'places' claim names (ids, or '*' for every place: a call \
            centre): their day lists with personal data, check-in, bookings on a person's \
            behalf, support lookups, closing a day",
    claims: &[ClaimSpec::id_list(PLACES_CLAIM)],
}];

/// A token's claims as the back office reads them.
#[derive(Deserialize)]
struct StaffClaims {
    sub: String,
    role: String,
    #[serde(default)]
    places: Option<serde_json::Value>,
}

/// A caller of the back office: an admin (every place) or staff (the
/// places of their claim).
#[derive(Clone, Debug)]
pub struct Staff {
    /// The token's subject: who acted, as the audit events name them.
    pub sub: String,
    /// `admin` or `staff`.
    pub role: &'static str,
    places: IdList,
}

impl Staff {
    /// Whether this caller may act on `place_id`'s data.
    pub fn covers(&self, place_id: i64) -> bool {
        self.places.contains(place_id)
    }

    /// 403 `not_your_place`, naming the place and the caller's places,
    /// unless this caller covers `place_id`.
    pub fn require_place(&self, place_id: i64) -> Result<(), ApiError> {
        if self.covers(place_id) {
            return Ok(());
        }
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "not_your_place",
            format!(
                "this token's staff role covers places {}, not place {place_id}; ask an admin \
                 for a token whose 'places' claim names it",
                self.places
            ),
        ))
    }

    /// The caller as audit events record them.
    pub fn actor(&self) -> Actor {
        Actor {
            sub: self.sub.clone(),
            role: self.role.to_string(),
        }
    }
}

/// Who acted, in an audit event.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Actor {
    pub sub: String,
    pub role: String,
}

impl<S> FromRequestParts<S> for Staff
where
    S: Send + Sync,
    Arc<TokenKeys>: FromRef<S>,
{
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let keys = Arc::<TokenKeys>::from_ref(state);
        let claims: StaffClaims = auth::bearer_claims(&keys, &parts.headers).await?;
        if claims.role == Role::ADMIN {
            return Ok(Staff {
                sub: claims.sub,
                role: Role::ADMIN.name(),
                places: IdList::All,
            });
        }
        if claims.role != STAFF {
            return Err(ApiError::forbidden(format!(
                "this needs the role '{STAFF}' (or '{}'); the token has '{}'",
                Role::ADMIN,
                claims.role
            )));
        }
        let places = claims
            .places
            .as_ref()
            .and_then(IdList::from_claim)
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::FORBIDDEN,
                    "no_places",
                    format!(
                        "a staff token must name its places in the '{PLACES_CLAIM}' claim: ids \
                         ([12, 15] or \"12,15\", at most {}) or \"*\" for every place",
                        auth::ID_LIST_CLAIM_IDS_MAX
                    ),
                )
            })?;
        Ok(Staff {
            sub: claims.sub,
            role: STAFF.name(),
            places,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staff_cover_their_places_only() {
        let staff = Staff {
            sub: "s".into(),
            role: "staff",
            places: IdList::from_claim(&"15, 12".into()).unwrap(),
        };
        assert!(staff.covers(12) && staff.covers(15) && !staff.covers(13));
        let err = staff.require_place(13).unwrap_err();
        assert_eq!(err.code, "not_your_place");
        assert!(
            err.message.contains("places 12, 15, not place 13"),
            "{}",
            err.message
        );
        assert!(IdList::from_claim(&serde_json::json!([3, "4"]))
            .unwrap()
            .contains(4));
        assert_eq!(IdList::from_claim(&"*".into()), Some(IdList::All));
        for bad in [
            serde_json::json!([]),
            "".into(),
            "1,,2".into(),
            serde_json::json!(true),
        ] {
            assert_eq!(IdList::from_claim(&bad), None, "{bad}");
        }
    }
}
