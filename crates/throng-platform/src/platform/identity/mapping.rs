//! A provider's claims as throng's: which claim holds the person's roles or
//! groups, which throng role each maps to, and which provider claims supply
//! the role's scope claims (a staff member's `places`), from the
//! configuration's `[token-claims]` table:
//!
//! ```toml
//! [token-claims]
//! role-claim = "realm_access.roles"   # Keycloak's realm roles
//! default-role = "user"               # optional: anyone else signed in
//! [token-claims.roles]
//! city-admins = "admin"
//! booking-desk = "staff"
//! [token-claims.scopes]
//! places = "throng_places"            # throng claim = provider claim
//! ```
//!
//! The mapped claims replace `role` and every scope claim a throng role
//! declares (`RoleSpec::claims`): a provider's own `places` claim counts
//! only where `scopes` names it (by default, the claim of the same name).
//! The other claims (`sub`, `name`, ...) pass as they are.

use std::collections::{BTreeMap, HashMap};

use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::platform::auth::{Role, RoleSpec};
use crate::platform::error::ApiError;

/// The claim holding the roles when `role-claim` is not given.
pub const DEFAULT_ROLE_CLAIM: &str = "roles";

/// The `[token-claims]` table as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct MappingConfig {
    /// The claim holding the role or group names: a string or a list of
    /// strings; a dotted path reaches into objects (`realm_access.roles`).
    #[serde(default)]
    pub role_claim: Option<String>,
    /// Provider role or group name -> throng role.
    #[serde(default)]
    pub roles: BTreeMap<String, String>,
    /// The throng role of a token none of whose names is mapped; without
    /// it, such a token is refused (403 `role_not_mapped`).
    #[serde(default)]
    pub default_role: Option<String>,
    /// Throng scope claim -> the provider claim (path) supplying it.
    #[serde(default)]
    pub scopes: BTreeMap<String, String>,
}

/// The checked mapping.
#[derive(Debug)]
pub struct ClaimMapping {
    role_claim: String,
    roles: HashMap<String, Role>,
    default_role: Option<Role>,
    /// Every scope claim throng's roles declare, with the provider claim
    /// supplying it.
    scopes: Vec<(&'static str, String)>,
}

impl ClaimMapping {
    /// Checks `config` against throng's `roles`: a name that is no throng
    /// role, or a scope that no role declares, is refused here, at start.
    pub fn new(config: &MappingConfig, roles: &[&RoleSpec]) -> anyhow::Result<ClaimMapping> {
        let role_names: Vec<&str> = roles.iter().map(|r| r.role.name()).collect();
        let find = |what: &str, name: &str| -> anyhow::Result<Role> {
            roles
                .iter()
                .find(|r| r.role.name() == name)
                .map(|r| r.role)
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "{what} names the role '{name}', which throng does not have; its roles \
                         are {}",
                        role_names.join(", ")
                    )
                })
        };
        let mut mapped = HashMap::new();
        for (from, to) in &config.roles {
            mapped.insert(
                from.clone(),
                find(&format!("[token-claims] roles: '{from}'"), to)?,
            );
        }
        let default_role = match &config.default_role {
            Some(name) => Some(find("[token-claims] default-role", name)?),
            None => None,
        };
        let mut declared: Vec<&'static str> = roles
            .iter()
            .flat_map(|r| r.claims.iter().map(|c| c.name))
            .collect();
        declared.sort_unstable();
        declared.dedup();
        for name in config.scopes.keys() {
            if !declared.contains(&name.as_str()) {
                anyhow::bail!(
                    "[token-claims] scopes names '{name}', which is no role's scope claim; the \
                     scope claims are {}",
                    declared.join(", ")
                );
            }
        }
        let role_claim = config
            .role_claim
            .clone()
            .unwrap_or_else(|| DEFAULT_ROLE_CLAIM.to_string());
        if role_claim.trim().is_empty() {
            anyhow::bail!("[token-claims] role-claim is empty: name the claim holding the roles");
        }
        Ok(ClaimMapping {
            role_claim,
            roles: mapped,
            default_role,
            scopes: declared
                .into_iter()
                .map(|name| {
                    let from = config
                        .scopes
                        .get(name)
                        .cloned()
                        .unwrap_or_else(|| name.to_string());
                    (name, from)
                })
                .collect(),
        })
    }

    /// The provider's claims with throng's `role` and scope claims. A
    /// token whose names map to several roles gets `admin` if one is, else
    /// the first of its list that maps.
    pub fn apply(&self, mut claims: Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
        let names: Vec<&str> = match lookup(&claims, &self.role_claim) {
            Some(Value::String(s)) => vec![s.as_str()],
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let matched: Vec<Role> = names
            .iter()
            .filter_map(|n| self.roles.get(*n).copied())
            .collect();
        let role = if matched.contains(&Role::ADMIN) {
            Role::ADMIN
        } else if let Some(first) = matched.first() {
            *first
        } else if let Some(default) = self.default_role {
            default
        } else {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "role_not_mapped",
                format!(
                    "the token's roles in '{}' ({}) map to no throng role; map one in the \
                     configuration's [token-claims] roles",
                    self.role_claim,
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                ),
            ));
        };
        let scoped: Vec<(&'static str, Option<Value>)> = self
            .scopes
            .iter()
            .map(|(name, from)| (*name, lookup(&claims, from).cloned()))
            .collect();
        for (name, value) in scoped {
            match value {
                Some(v) => claims.insert(name.to_string(), v),
                None => claims.remove(name),
            };
        }
        claims.insert("role".into(), Value::String(role.name().to_string()));
        Ok(claims)
    }
}

/// The claim `path` names: a top-level claim of that exact name (claim
/// names may hold dots, as namespaced URLs do), else the dotted path
/// through objects.
fn lookup<'a>(claims: &'a Map<String, Value>, path: &str) -> Option<&'a Value> {
    if let Some(v) = claims.get(path) {
        return Some(v);
    }
    let mut parts = path.split('.');
    let mut at = claims.get(parts.next()?)?;
    for part in parts {
        at = at.as_object()?.get(part)?;
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::auth::{ClaimSpec, PLATFORM_ROLES};
    use serde_json::json;

    const STAFF: RoleSpec = RoleSpec {
        role: Role::new("staff"),
        about: "",
        claims: &[ClaimSpec::id_list("places")],
        console: false,
    };

    fn roles() -> Vec<&'static RoleSpec> {
        vec![&PLATFORM_ROLES[0], &STAFF]
    }

    fn mapping(config: Value) -> anyhow::Result<ClaimMapping> {
        ClaimMapping::new(&serde_json::from_value(config).unwrap(), &roles())
    }

    fn claims(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn unknown_roles_and_scopes_are_refused_at_start() {
        let err = mapping(json!({"roles": {"desk": "clerk"}}))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("'clerk'") && err.contains("admin, staff"),
            "{err}"
        );
        let err = mapping(json!({"default-role": "nobody"}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("default-role"), "{err}");
        let err = mapping(json!({"scopes": {"rooms": "x"}}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("'rooms'") && err.contains("places"), "{err}");
        assert!(serde_json::from_value::<MappingConfig>(json!({"role": "x"})).is_err());
    }

    #[test]
    fn nested_roles_map_and_scopes_come_from_their_claim() {
        let m = mapping(json!({
            "role-claim": "realm_access.roles",
            "roles": {"desk": "staff", "boss": "admin"},
            "scopes": {"places": "throng_places"}
        }))
        .unwrap();
        let out = m
            .apply(claims(json!({
                "sub": "u1", "role": "admin", "places": "*",
                "realm_access": {"roles": ["offline_access", "desk"]},
                "throng_places": [3]
            })))
            .unwrap();
        assert_eq!(out["role"], "staff");
        assert_eq!(
            out["places"],
            json!([3]),
            "the provider's own places do not count"
        );
        let out = m
            .apply(claims(
                json!({"sub": "u1", "realm_access": {"roles": ["desk", "boss"]}}),
            ))
            .unwrap();
        assert_eq!(out["role"], "admin");
        assert!(out.get("places").is_none());
        let err = m
            .apply(claims(
                json!({"sub": "u1", "realm_access": {"roles": ["guest"]}}),
            ))
            .unwrap_err();
        assert_eq!(err.code, "role_not_mapped");
    }

    #[test]
    fn a_dotted_claim_name_is_read_whole_first() {
        let m = mapping(json!({
            "role-claim": "https://example.org/roles",
            "roles": {"desk": "staff"}
        }))
        .unwrap();
        let out = m
            .apply(claims(
                json!({"https://example.org/roles": "desk", "places": "1,2"}),
            ))
            .unwrap();
        assert_eq!(out["role"], "staff");
        assert_eq!(out["places"], "1,2");
    }
}
