//! Signing in to the admin console: one-time links and sessions.
//!
//! `throng admin link` stores a link ([`Sessions::create_link`]): 32 random
//! bytes, printed once in the link's fragment (`/admin/signin#...`, so it
//! never reaches a log or a `Referer`) and kept in the store only as their
//! SHA-256, with the claims it grants and its expiry (at most
//! [`LINK_TTL_MS`]). The sign-in page posts it back; one conditional
//! `UPDATE` marks it used, so it signs in once, on whichever node of a
//! cluster ([`Sessions::redeem_link`]). Redeeming it creates a session
//! ([`Sessions::create`], the one way in, which an identity provider's
//! login can call with the claims it verified): another 32 random bytes,
//! the browser's cookie (HttpOnly, SameSite=Strict, Path=/, Secure and
//! `__Host-` under an https public URL), stored as their SHA-256 with the
//! subject, role and claims, ending [`SESSION_TTL_MS`] after sign-in or
//! [`SESSION_IDLE_MS`] after its last use, whichever comes first. Signing
//! out deletes the row.
//!
//! A request made with the cookie that changes something must come from
//! this server's own pages ([`check_same_origin`]): the header
//! [`REQUEST_HEADER`] (which `/assets/throng.js` sets on its own origin's
//! requests; a cross-site form cannot set a header, and a cross-site
//! `fetch` setting one needs a CORS preflight this server never grants),
//! and an `Origin` or `Sec-Fetch-Site` naming this origin.

use axum::http::{header, HeaderMap, HeaderValue, Method};
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::public_url::PublicUrl;
use crate::base::clock::Clock;
use crate::store::{Columns, Sql, Store, StoreError};

/// How long a sign-in link may be used at most (and by default).
pub const LINK_TTL_MS: i64 = 10 * 60_000;
/// A session ends this long after its sign-in, however busy.
pub const SESSION_TTL_MS: i64 = 8 * 3_600_000;
/// A session ends after this long without a request.
pub const SESSION_IDLE_MS: i64 = 30 * 60_000;
/// A session's last use is written at most this often (one write a
/// minute per session, not one per request).
const SEEN_WRITE_EVERY_MS: i64 = 60_000;
/// The header the console's pages send with every request that changes
/// something (set by `/assets/throng.js` on same-origin requests).
pub const REQUEST_HEADER: &str = "x-throng-request";
/// Where a sign-in link points, below the public URL.
pub const SIGNIN_PATH: &str = "/admin/signin";
/// The console's page.
pub const CONSOLE_PATH: &str = "/admin/";
/// Characters of a link's or a session's secret (32 bytes, base64url).
const SECRET_CHARS: usize = 43;

/// Claims someone was verified to hold (by a sign-in link, or by an
/// identity provider's login), from which a session is made: `sub`,
/// `role` and the role's other claims (`places` of a staff member).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VerifiedClaims {
    pub sub: String,
    pub role: String,
    /// Claims beside `sub` and `role`.
    #[serde(default)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl VerifiedClaims {
    /// Every claim as one JSON object, as a token would carry them.
    pub fn to_map(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut map = serde_json::Map::new();
        for (k, v) in &self.extra {
            if !super::auth::RESERVED_CLAIMS.contains(&k.as_str()) {
                map.insert(k.clone(), v.clone());
            }
        }
        map.insert("sub".into(), self.sub.clone().into());
        map.insert("role".into(), self.role.clone().into());
        map
    }
}

/// A live session.
#[derive(Clone, Debug)]
pub struct Session {
    pub sub: String,
    pub role: String,
    /// Every claim (`sub` and `role` included), as a token's.
    pub claims: serde_json::Map<String, serde_json::Value>,
    pub created_ms: i64,
    pub expires_ms: i64,
    /// When it ends unless used before.
    pub idle_until_ms: i64,
}

/// A session just made: the cookie's secret and the session.
pub struct NewSession {
    pub secret: String,
    pub session: Session,
}

/// Sign-in links and sessions in the store (every node of a cluster sees
/// the same).
pub struct Sessions {
    store: Store,
    clock: Clock,
    public_url: PublicUrl,
    /// Signing in with the organisation's identity provider, when set up.
    login: Option<std::sync::Arc<super::identity::login::OidcLogin>>,
}

mod sql {
    use super::Sql;
    pub static LINK_INSERT: Sql =
        Sql::new("INSERT INTO admin_links (hash, claims, expires_ms) VALUES (?1, ?2, ?3)");
    pub static LINK_REDEEM: Sql = Sql::new(
        "UPDATE admin_links SET used_ms = ?2 WHERE hash = ?1 AND used_ms IS NULL \
         AND expires_ms > ?2 RETURNING claims",
    );
    pub static LINK_STATE: Sql =
        Sql::new("SELECT expires_ms, used_ms FROM admin_links WHERE hash = ?1");
    /// Links a day past their expiry: kept that long to say why one is
    /// refused.
    pub static LINK_PURGE: Sql = Sql::new("DELETE FROM admin_links WHERE expires_ms < ?1");
    pub static SESSION_INSERT: Sql = Sql::new(
        "INSERT INTO admin_sessions (hash, sub, role, claims, created_ms, expires_ms, seen_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?5)",
    );
    pub static SESSION_GET: Sql = Sql::new(
        "SELECT sub, role, claims, created_ms, expires_ms, seen_ms FROM admin_sessions \
         WHERE hash = ?1",
    );
    pub static SESSION_SEEN: Sql =
        Sql::new("UPDATE admin_sessions SET seen_ms = ?2 WHERE hash = ?1 AND seen_ms < ?2");
    pub static SESSION_DELETE: Sql = Sql::new("DELETE FROM admin_sessions WHERE hash = ?1");
    pub static SESSION_PURGE: Sql =
        Sql::new("DELETE FROM admin_sessions WHERE expires_ms < ?1 OR seen_ms < ?2");
}

/// A new secret: 32 bytes from the OS's generator, base64url.
fn new_secret() -> String {
    use base64::Engine;
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// What the store keeps of a secret.
fn hash(secret: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Whether `s` has a secret's form (checked before any lookup).
fn secret_form(s: &str) -> bool {
    s.len() == SECRET_CHARS
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn link_refused(code: &'static str, message: &str) -> ApiError {
    ApiError::unauthorized(code, message)
}

impl Sessions {
    pub fn new(store: Store, clock: Clock, public_url: PublicUrl) -> Sessions {
        Sessions {
            store,
            clock,
            public_url,
            login: None,
        }
    }

    /// With signing in through the organisation's identity provider.
    pub fn with_login(
        mut self,
        login: Option<std::sync::Arc<super::identity::login::OidcLogin>>,
    ) -> Sessions {
        self.login = login;
        self
    }

    /// Signing in with the identity provider, when set up.
    pub fn login(&self) -> Option<&std::sync::Arc<super::identity::login::OidcLogin>> {
        self.login.as_ref()
    }

    /// Where browsers reach this server.
    pub fn public_url(&self) -> &PublicUrl {
        &self.public_url
    }

    /// The clock every expiry is read on (tests move it on).
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Whether cookies are `Secure` (the public URL is https).
    pub fn secure(&self) -> bool {
        self.public_url
            .configured()
            .is_some_and(|u| u.starts_with("https://"))
    }

    /// The session cookie's name: `__Host-` prefixed when `Secure`, so a
    /// sibling subdomain cannot set it.
    pub fn cookie_name(&self) -> &'static str {
        if self.secure() {
            "__Host-throng_session"
        } else {
            "throng_session"
        }
    }

    /// Stores a one-time link granting `claims` for `ttl_ms` (at most
    /// [`LINK_TTL_MS`]); returns its secret, which is not kept.
    pub async fn create_link(
        &self,
        claims: &VerifiedClaims,
        ttl_ms: i64,
    ) -> Result<String, StoreError> {
        let secret = new_secret();
        let hashed = hash(&secret);
        let now = self.clock.now_ms();
        let expires = now + ttl_ms.clamp(1, LINK_TTL_MS);
        let text = serde_json::to_string(claims).expect("claims serialize");
        let purge_before = now - 86_400_000;
        self.store
            .write(move |tx| {
                let (hashed, text) = (hashed.clone(), text.clone());
                Box::pin(async move {
                    tx.execute(&sql::LINK_PURGE, &[&purge_before]).await?;
                    tx.execute(&sql::LINK_INSERT, &[&hashed, &text, &expires])
                        .await?;
                    Ok(())
                })
            })
            .await?;
        Ok(secret)
    }

    /// Uses a link: its claims, once; refused when it is unknown, used or
    /// expired (each said in words).
    pub async fn redeem_link(&self, secret: &str) -> Result<VerifiedClaims, ApiError> {
        let unknown = || {
            link_refused(
                "link_invalid",
                "this sign-in link is not one this server made (check it was copied whole); \
                 print a new one with throng admin link",
            )
        };
        if !secret_form(secret) {
            return Err(unknown());
        }
        let hashed = hash(secret);
        let now = self.clock.now_ms();
        let h = hashed.clone();
        let redeemed = self
            .store
            .write(move |tx| {
                let h = h.clone();
                Box::pin(async move {
                    tx.query_opt(&sql::LINK_REDEEM, &[&h, &now], |r| r.text(0))
                        .await
                })
            })
            .await?;
        if let Some(text) = redeemed {
            return serde_json::from_str(&text).map_err(|_| ApiError::internal());
        }
        let state = self
            .store
            .read(move |c| {
                Box::pin(async move {
                    c.query_opt(&sql::LINK_STATE, &[&hashed], |r| {
                        Ok((r.int(0)?, r.opt_int(1)?))
                    })
                    .await
                })
            })
            .await?;
        Err(match state {
            Some((_, Some(_))) => link_refused(
                "link_used",
                "this sign-in link was used already (each signs in once); print a new one \
                 with throng admin link",
            ),
            Some(_) => link_refused(
                "link_expired",
                &format!(
                    "this sign-in link has expired (links last {} minutes at most); print a \
                     new one with throng admin link",
                    LINK_TTL_MS / 60_000
                ),
            ),
            None => unknown(),
        })
    }

    /// Creates a session for claims someone was verified to hold: a sign-in
    /// link's, or an identity provider's once its login checked them.
    pub async fn create(&self, claims: VerifiedClaims) -> Result<NewSession, StoreError> {
        let secret = new_secret();
        let hashed = hash(&secret);
        let now = self.clock.now_ms();
        let expires = now + SESSION_TTL_MS;
        let map = claims.to_map();
        let text = serde_json::Value::Object(map.clone()).to_string();
        let (sub, role) = (claims.sub.clone(), claims.role.clone());
        let idle_before = now - SESSION_IDLE_MS;
        self.store
            .write(move |tx| {
                let (hashed, sub, role, text) =
                    (hashed.clone(), sub.clone(), role.clone(), text.clone());
                Box::pin(async move {
                    tx.execute(&sql::SESSION_PURGE, &[&now, &idle_before])
                        .await?;
                    tx.execute(
                        &sql::SESSION_INSERT,
                        &[&hashed, &sub, &role, &text, &now, &expires],
                    )
                    .await?;
                    Ok(())
                })
            })
            .await?;
        Ok(NewSession {
            secret,
            session: Session {
                sub: claims.sub,
                role: claims.role,
                claims: map,
                created_ms: now,
                expires_ms: expires,
                idle_until_ms: now + SESSION_IDLE_MS,
            },
        })
    }

    /// The live session a cookie's secret names, its last use moved to now;
    /// `None` when there is none (signed out, expired, idle too long).
    pub async fn lookup(&self, secret: &str) -> Result<Option<Session>, StoreError> {
        if !secret_form(secret) {
            return Ok(None);
        }
        let hashed = hash(secret);
        let h = hashed.clone();
        let row = self
            .store
            .read(move |c| {
                Box::pin(async move {
                    c.query_opt(&sql::SESSION_GET, &[&h], |r| {
                        Ok((
                            r.text(0)?,
                            r.text(1)?,
                            r.text(2)?,
                            r.int(3)?,
                            r.int(4)?,
                            r.int(5)?,
                        ))
                    })
                    .await
                })
            })
            .await?;
        let Some((sub, role, claims, created_ms, expires_ms, seen_ms)) = row else {
            return Ok(None);
        };
        let now = self.clock.now_ms();
        if now >= expires_ms || now >= seen_ms + SESSION_IDLE_MS {
            return Ok(None);
        }
        if now - seen_ms >= SEEN_WRITE_EVERY_MS {
            self.store
                .write(move |tx| {
                    let h = hashed.clone();
                    Box::pin(async move {
                        tx.execute(&sql::SESSION_SEEN, &[&h, &now]).await?;
                        Ok(())
                    })
                })
                .await?;
        }
        let seen = if now - seen_ms >= SEEN_WRITE_EVERY_MS {
            now
        } else {
            seen_ms
        };
        let claims = match serde_json::from_str::<serde_json::Value>(&claims) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => {
                return Err(StoreError::Internal(
                    "a session's claims are not JSON".into(),
                ))
            }
        };
        Ok(Some(Session {
            sub,
            role,
            claims,
            created_ms,
            expires_ms,
            idle_until_ms: (seen + SESSION_IDLE_MS).min(expires_ms),
        }))
    }

    /// Deletes the session a cookie's secret names; whether there was one.
    pub async fn end(&self, secret: &str) -> Result<bool, StoreError> {
        if !secret_form(secret) {
            return Ok(false);
        }
        let hashed = hash(secret);
        self.store
            .write(move |tx| {
                let h = hashed.clone();
                Box::pin(async move { Ok(tx.execute(&sql::SESSION_DELETE, &[&h]).await? > 0) })
            })
            .await
    }

    /// The session cookie's secret in a request's `Cookie` headers.
    pub fn cookie_of<'h>(&self, headers: &'h HeaderMap) -> Option<&'h str> {
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

    /// `Set-Cookie` for a new session.
    pub fn set_cookie(&self, secret: &str) -> HeaderValue {
        let secure = if self.secure() { "; Secure" } else { "" };
        HeaderValue::from_str(&format!(
            "{}={secret}; Path=/; Max-Age={}; HttpOnly; SameSite=Strict{secure}",
            self.cookie_name(),
            SESSION_TTL_MS / 1000
        ))
        .expect("a secret is a header value")
    }

    /// `Set-Cookie` removing the session's cookie.
    pub fn clear_cookie(&self) -> HeaderValue {
        let secure = if self.secure() { "; Secure" } else { "" };
        HeaderValue::from_str(&format!(
            "{}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict{secure}",
            self.cookie_name()
        ))
        .expect("a header value")
    }

    /// Refuses a request that changes something unless it comes from this
    /// server's own pages (see the module's comment): the cookie's
    /// requests, and the sign-in itself (so no other site can sign a
    /// browser in to a session of its choosing).
    pub fn check_same_origin(&self, method: &Method, headers: &HeaderMap) -> Result<(), ApiError> {
        if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
            return Ok(());
        }
        check_same_origin(&self.public_url, headers)
    }

    /// Refuses a request not made by this server's own pages, whatever
    /// its method (the sign-in: no other site may sign a browser in to a
    /// session of its choosing).
    pub fn check_from_own_pages(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        check_same_origin(&self.public_url, headers)
    }

    /// The sign-in link for a link's secret, below `base` (the public URL).
    pub fn link_url(base: &str, secret: &str) -> String {
        format!("{}{SIGNIN_PATH}#{secret}", base.trim_end_matches('/'))
    }
}

/// The origin (`scheme://host[:port]`) of a URL, lowercased.
fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    (!authority.is_empty()).then(|| format!("{scheme}://{authority}").to_ascii_lowercase())
}

/// See [`Sessions::check_same_origin`]: the header, then `Sec-Fetch-Site`
/// and `Origin` when sent (at least one must be).
pub fn check_same_origin(public_url: &PublicUrl, headers: &HeaderMap) -> Result<(), ApiError> {
    let refuse = |code: &'static str, message: String| {
        ApiError::new(axum::http::StatusCode::FORBIDDEN, code, message)
    };
    if headers.get(REQUEST_HEADER).is_none() {
        return Err(refuse(
            "request_header_missing",
            format!(
                "a change made with the console's sign-in must carry the header {REQUEST_HEADER} \
                 (the console's pages send it); API clients send Authorization: Bearer <token> \
                 instead"
            ),
        ));
    }
    let fetch_site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if let Some(site) = fetch_site {
        if site != "same-origin" {
            return Err(refuse(
                "cross_site_request",
                format!(
                    "this request came from another site (Sec-Fetch-Site: {site}); the console \
                     accepts changes from its own pages only"
                ),
            ));
        }
    }
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    match origin {
        Some(origin) => {
            let expected = match public_url.configured() {
                Some(configured) => origin_of(configured),
                None => headers
                    .get(header::HOST)
                    .and_then(|h| h.to_str().ok())
                    .map(|h| h.to_ascii_lowercase()),
            };
            let given = match public_url.configured() {
                Some(_) => origin_of(origin),
                None => origin_of(origin).and_then(|o| o.split_once("://").map(|(_, a)| a.into())),
            };
            if expected.is_none() || given != expected {
                return Err(refuse(
                    "cross_site_request",
                    format!(
                        "this request came from {origin}, not from this server's pages; the \
                         console accepts changes from its own pages only"
                    ),
                ));
            }
        }
        None if fetch_site.is_none() => {
            return Err(refuse(
                "cross_site_request",
                "a change made with the console's sign-in must say where it comes from \
                 (Origin or Sec-Fetch-Site, which browsers send)"
                    .into(),
            ));
        }
        None => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn only_the_servers_own_pages_change_things() {
        let local = PublicUrl::new(None, "127.0.0.1:8080".parse().unwrap());
        let ok = |h: &HeaderMap| check_same_origin(&local, h).map(|_| ()).map_err(|e| e.code);
        let host = ("host", "127.0.0.1:8080");
        let mark = (REQUEST_HEADER, "1");
        assert_eq!(
            ok(&headers(&[host, mark, ("origin", "http://127.0.0.1:8080")])),
            Ok(())
        );
        assert_eq!(
            ok(&headers(&[host, mark, ("sec-fetch-site", "same-origin")])),
            Ok(())
        );
        assert_eq!(
            ok(&headers(&[host, ("origin", "http://127.0.0.1:8080")])),
            Err("request_header_missing")
        );
        assert_eq!(
            ok(&headers(&[host, mark, ("origin", "http://127.0.0.1:9999")])),
            Err("cross_site_request")
        );
        assert_eq!(
            ok(&headers(&[host, mark, ("sec-fetch-site", "same-site")])),
            Err("cross_site_request")
        );
        assert_eq!(ok(&headers(&[host, mark])), Err("cross_site_request"));
        let public = PublicUrl::new(
            Some("https://t.example/throng".into()),
            "127.0.0.1:8080".parse().unwrap(),
        );
        let h = headers(&[host, mark, ("origin", "https://t.example")]);
        assert!(check_same_origin(&public, &h).is_ok());
        let h = headers(&[host, mark, ("origin", "http://t.example")]);
        assert!(check_same_origin(&public, &h).is_err());
    }

    #[test]
    fn secrets_have_one_form() {
        let s = new_secret();
        assert!(secret_form(&s), "{s}");
        assert!(!secret_form(&s[1..]));
        assert!(!secret_form(&format!("{}!", &s[1..])));
        assert_ne!(new_secret(), s);
        assert_eq!(hash(&s).len(), 64);
    }
}
