//! Revoked tokens, shared by every node through the store
//! (`token_revocations`): by token id (`jti`), or by subject (every token
//! of that `sub` issued up to the revocation, `iat` at or before it).
//!
//! Each node keeps the revocations in memory ([`Revocations`]) and reads
//! them again every `--revocation-refresh-ms`: a token revoked on another
//! node is refused here at most that long (plus one read of the store)
//! later; on the node that revoked it, at once. A failed read keeps the
//! last set and says so in the log. A revocation is kept until its `until`
//! (the revoked tokens' expiry at the latest), then purged by whichever
//! node purges first.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::platform::error::ApiError;
use crate::store::{Columns, Sql, Store, StoreError};

/// How far ahead a revocation may be kept at most.
pub const REVOCATION_UNTIL_MAX_DAYS: i64 = 366;
/// How long a revocation is kept when `until` is not given: the default
/// lifetime of throng's own tokens (`throng token --ttl-s`).
pub const REVOCATION_DEFAULT_S: i64 = 24 * 3600;
/// Bytes of a revoked `jti` or `sub` at most.
pub const REVOCATION_VALUE_BYTES_MAX: usize = 256;
/// Bytes of a revocation's reason at most.
pub const REVOCATION_REASON_BYTES_MAX: usize = 500;
/// Revocations `GET /api/admin/tokens/revocations` lists at most.
pub const REVOCATIONS_LISTED_MAX: i64 = 1000;
/// Reads between two purges of expired revocations by a node.
const PURGE_EVERY_READS: u64 = 30;

static UPSERT: Sql = Sql::new(
    "INSERT INTO token_revocations (kind, value, revoked_at_ms, until_ms, reason) \
     VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (kind, value) DO UPDATE SET \
     revoked_at_ms = excluded.revoked_at_ms, \
     until_ms = CASE WHEN excluded.until_ms > token_revocations.until_ms \
                THEN excluded.until_ms ELSE token_revocations.until_ms END, \
     reason = excluded.reason",
);
static CURRENT: Sql =
    Sql::new("SELECT kind, value, revoked_at_ms FROM token_revocations WHERE until_ms > ?1");
static LIST: Sql = Sql::new(
    "SELECT kind, value, revoked_at_ms, until_ms, reason FROM token_revocations \
     WHERE until_ms > ?1 ORDER BY revoked_at_ms DESC, kind, value LIMIT ?2",
);
static ONE: Sql = Sql::new(
    "SELECT kind, value, revoked_at_ms, until_ms, reason FROM token_revocations \
     WHERE kind = ?1 AND value = ?2",
);
static PURGE: Sql = Sql::new("DELETE FROM token_revocations WHERE until_ms <= ?1");

/// What is revoked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RevokedKind {
    /// One token, by its `jti`.
    Jti,
    /// Every token of a subject issued up to the revocation.
    Sub,
}

impl RevokedKind {
    fn as_str(self) -> &'static str {
        match self {
            RevokedKind::Jti => "jti",
            RevokedKind::Sub => "sub",
        }
    }
}

/// A revocation to record.
#[derive(Clone, Debug)]
pub struct NewRevocation {
    pub kind: RevokedKind,
    pub value: String,
    pub until_ms: i64,
    pub reason: String,
}

impl NewRevocation {
    /// Checks the bounds; `until_ms` `None` is [`REVOCATION_DEFAULT_S`]
    /// from now. The message names what to change.
    pub fn new(
        kind: RevokedKind,
        value: &str,
        until_ms: Option<i64>,
        reason: Option<&str>,
    ) -> Result<NewRevocation, String> {
        let value = value.trim();
        if value.is_empty() || value.len() > REVOCATION_VALUE_BYTES_MAX {
            return Err(format!(
                "the {} to revoke must have 1 to {REVOCATION_VALUE_BYTES_MAX} bytes",
                kind.as_str()
            ));
        }
        let reason = reason.unwrap_or("").trim();
        if reason.len() > REVOCATION_REASON_BYTES_MAX {
            return Err(format!(
                "the reason has more than {REVOCATION_REASON_BYTES_MAX} bytes"
            ));
        }
        let now = crate::base::clock::now_ms();
        let until_ms = until_ms.unwrap_or(now + REVOCATION_DEFAULT_S * 1000);
        if until_ms <= now {
            return Err(
                "until is in the past: a revocation is kept until the revoked tokens \
                        expire, so give their expiry (or a later time)"
                    .into(),
            );
        }
        if until_ms > now + REVOCATION_UNTIL_MAX_DAYS * 24 * 3600 * 1000 {
            return Err(format!(
                "until is more than {REVOCATION_UNTIL_MAX_DAYS} days ahead; no token lives that \
                 long"
            ));
        }
        Ok(NewRevocation {
            kind,
            value: value.to_string(),
            until_ms,
            reason: reason.to_string(),
        })
    }
}

/// A recorded revocation.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Revocation {
    pub kind: RevokedKind,
    /// The revoked `jti` or `sub`.
    pub value: String,
    /// When it was revoked (RFC 3339, UTC): a `sub`'s tokens issued up to
    /// then are refused.
    pub revoked_at: String,
    /// Kept (and the tokens refused) until then (RFC 3339, UTC).
    pub until: String,
    pub reason: String,
}

/// Milliseconds since the epoch as RFC 3339 (UTC).
pub fn rfc3339(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| ms.to_string())
}

/// RFC 3339 as milliseconds since the epoch.
pub fn parse_rfc3339(text: &str) -> Result<i64, String> {
    time::OffsetDateTime::parse(text.trim(), &time::format_description::well_known::Rfc3339)
        .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
        .map_err(|_| format!("'{text}' is no RFC 3339 time, e.g. 2026-12-01T18:00:00Z"))
}

/// Records a revocation in the store (again: its `until` only grows, and a
/// subject's revocation moves to now).
pub async fn record(store: &Store, r: &NewRevocation) -> Result<Revocation, StoreError> {
    let now = crate::base::clock::now_ms();
    let (kind, value, until, reason) = (
        r.kind.as_str().to_string(),
        r.value.clone(),
        r.until_ms,
        r.reason.clone(),
    );
    store
        .write(move |tx| {
            let (kind, value, reason) = (kind.clone(), value.clone(), reason.clone());
            Box::pin(async move {
                tx.execute(&UPSERT, &[&kind, &value, &now, &until, &reason])
                    .await?;
                tx.query_one(&ONE, &[&kind, &value], row).await
            })
        })
        .await
}

fn row(r: &crate::store::Row) -> Result<Revocation, StoreError> {
    Ok(Revocation {
        kind: if r.text(0)? == "sub" {
            RevokedKind::Sub
        } else {
            RevokedKind::Jti
        },
        value: r.text(1)?,
        revoked_at: rfc3339(r.int(2)?),
        until: rfc3339(r.int(3)?),
        reason: r.text(4)?,
    })
}

/// The revocations in force, newest first, at most `limit`.
pub async fn list(store: &Store, limit: i64) -> Result<Vec<Revocation>, StoreError> {
    let now = crate::base::clock::now_ms();
    store
        .read(move |c| Box::pin(async move { c.query(&LIST, &[&now, &limit], row).await }))
        .await
}

/// Deletes the revocations whose `until` has passed; answers how many.
pub async fn purge(store: &Store) -> Result<u64, StoreError> {
    let now = crate::base::clock::now_ms();
    store
        .write(move |tx| Box::pin(async move { tx.execute(&PURGE, &[&now]).await }))
        .await
}

/// The revocations in force, as a node holds them.
#[derive(Default)]
struct RevokedSet {
    jti: HashSet<String>,
    /// Subject -> when it was revoked (ms).
    sub: HashMap<String, i64>,
}

/// This node's copy of the revocations (see the module's doc).
pub struct Revocations {
    set: ArcSwap<RevokedSet>,
    store: Option<Store>,
    reads: std::sync::atomic::AtomicU64,
    /// Held by a read of the store and by a revocation, so that a read
    /// begun before a revocation was recorded cannot replace the set after
    /// the revocation added itself to it.
    updating: tokio::sync::Mutex<()>,
}

impl Revocations {
    /// None, and no store to read: for tools that only issue tokens.
    pub fn none() -> Arc<Revocations> {
        Arc::new(Revocations {
            set: ArcSwap::from_pointee(RevokedSet::default()),
            store: None,
            reads: Default::default(),
            updating: Default::default(),
        })
    }

    /// The revocations of `store`, read once now.
    pub async fn load(store: Store) -> Result<Arc<Revocations>, StoreError> {
        let r = Revocations {
            set: ArcSwap::from_pointee(RevokedSet::default()),
            store: Some(store),
            reads: Default::default(),
            updating: Default::default(),
        };
        r.refresh().await?;
        Ok(Arc::new(r))
    }

    /// Reads the revocations in force again.
    pub async fn refresh(&self) -> Result<(), StoreError> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        let _updating = self.updating.lock().await;
        let now = crate::base::clock::now_ms();
        let rows = store
            .read(move |c| {
                Box::pin(async move {
                    c.query(&CURRENT, &[&now], |r| {
                        Ok((r.text(0)?, r.text(1)?, r.int(2)?))
                    })
                    .await
                })
            })
            .await?;
        let mut set = RevokedSet::default();
        for (kind, value, at) in rows {
            if kind == "sub" {
                set.sub.insert(value, at);
            } else {
                set.jti.insert(value);
            }
        }
        self.set.store(Arc::new(set));
        Ok(())
    }

    /// Every `every`, reads the revocations again (and now and then purges
    /// the expired ones); forever: abort to stop.
    pub fn spawn_refresher(self: Arc<Self>, every: Duration) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if let Err(e) = self.refresh().await {
                    tracing::warn!(error = %e, "cannot read the token revocations; keeping the last ones read");
                    continue;
                }
                let n = self
                    .reads
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if n % PURGE_EVERY_READS == PURGE_EVERY_READS - 1 {
                    if let Some(store) = &self.store {
                        match purge(store).await {
                            Ok(0) => {}
                            Ok(n) => tracing::debug!(purged = n, "expired token revocations"),
                            Err(e) => {
                                tracing::warn!(error = %e, "cannot purge expired token revocations")
                            }
                        }
                    }
                }
            }
        })
    }

    /// Records a revocation in the store; this node refuses the tokens at
    /// once, the others at their next read.
    pub async fn revoke(&self, r: &NewRevocation) -> Result<Revocation, StoreError> {
        let store = self
            .store
            .as_ref()
            .expect("revocations are recorded by a serving node, which has its store");
        let _updating = self.updating.lock().await;
        let recorded = record(store, r).await?;
        let at =
            parse_rfc3339(&recorded.revoked_at).unwrap_or_else(|_| crate::base::clock::now_ms());
        let mut set = RevokedSet {
            jti: self.set.load().jti.clone(),
            sub: self.set.load().sub.clone(),
        };
        match r.kind {
            RevokedKind::Jti => {
                set.jti.insert(r.value.clone());
            }
            RevokedKind::Sub => {
                set.sub.insert(r.value.clone(), at);
            }
        }
        self.set.store(Arc::new(set));
        Ok(recorded)
    }

    /// 401 `token_revoked` when the token's `jti`, or its `sub` with an
    /// `iat` at or before the subject's revocation, is revoked.
    pub fn check(&self, claims: &Map<String, Value>) -> Result<(), ApiError> {
        let set = self.set.load();
        if set.jti.is_empty() && set.sub.is_empty() {
            return Ok(());
        }
        if let Some(jti) = claims.get("jti").and_then(Value::as_str) {
            if set.jti.contains(jti) {
                return Err(revoked("this token was revoked"));
            }
        }
        if let Some(sub) = claims.get("sub").and_then(Value::as_str) {
            if let Some(at_ms) = set.sub.get(sub) {
                let issued_ms = claims
                    .get("iat")
                    .and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
                    .map(|s| s.saturating_mul(1000));
                if issued_ms.is_none_or(|i| i <= *at_ms) {
                    return Err(revoked(
                        "the tokens of this subject issued before its revocation are refused",
                    ));
                }
            }
        }
        Ok(())
    }
}

fn revoked(detail: &str) -> ApiError {
    ApiError::unauthorized(
        "token_revoked",
        format!("{detail}; sign in again for a new token, or ask an admin why"),
    )
}
