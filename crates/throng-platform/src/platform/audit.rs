//! The audit log of administrative calls: one table (`admin_audit`),
//! written from one place.
//!
//! Every request that may change something (any method but GET, HEAD and
//! OPTIONS) passes through [`middleware`], which hands it an [`AuditSlot`].
//! Whoever authenticates the request (`auth::Caller` and the extractors
//! built on `auth::request_claims`, the console's sign-in) notes in it who
//! the caller is; once the answer is made, a caller of an administrative
//! role (`RoleSpec::console`) is recorded with the service, method, path
//! (without its query) and the answer's status, refusals included, before
//! the answer leaves. Reads are not recorded here: a service that must
//! record who read personal data does so itself (booking's `DayListRead`).

use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use serde::Serialize;

use crate::base::clock::Clock;
use crate::store::{Columns, Sql, Store, StoreError};

/// Who made a request, as the audit log records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Actor {
    pub sub: String,
    pub role: String,
    /// How they proved it: `token`, `session` or `link` (a sign-in).
    pub via: &'static str,
}

/// Where a request's authentication notes its caller (see the module's
/// comment); in the request's extensions while [`middleware`] runs.
#[derive(Clone, Default)]
pub struct AuditSlot(Arc<Mutex<Option<Actor>>>);

impl AuditSlot {
    /// Notes the caller of the request whose extensions hold a slot.
    pub fn note(extensions: &axum::http::Extensions, actor: Actor) {
        if let Some(slot) = extensions.get::<AuditSlot>() {
            *slot.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(actor);
        }
    }

    fn take(&self) -> Option<Actor> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// Characters of a path kept at most.
const PATH_CHARS_MAX: usize = 300;
/// Events on one page of the audit view at most.
pub const PAGE_MAX: i64 = 200;

/// What the middleware needs: the store, and which roles and services
/// there are.
pub struct Audit {
    store: Store,
    clock: Clock,
    /// Roles whose calls are recorded.
    roles: Vec<&'static str>,
    /// Services served, by name: a path's first segment (after `/api/`)
    /// names its service.
    services: Vec<&'static str>,
}

mod sql {
    use super::Sql;
    pub static INSERT: Sql = Sql::new(
        "INSERT INTO admin_audit (at_ms, service, sub, role, via, method, path, status) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    );
    pub static PAGE: Sql = Sql::new(
        "SELECT id, at_ms, service, sub, role, via, method, path, status FROM admin_audit \
         WHERE id < ?1 ORDER BY id DESC LIMIT ?2",
    );
    pub static PAGE_OF_SERVICE: Sql = Sql::new(
        "SELECT id, at_ms, service, sub, role, via, method, path, status FROM admin_audit \
         WHERE service = ?3 AND id < ?1 ORDER BY id DESC LIMIT ?2",
    );
}

/// One recorded call.
#[derive(Clone, Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    /// Its place in the log: page on with `before`.
    pub id: i64,
    /// When it was answered (RFC 3339, UTC).
    pub at: String,
    /// The service called (`console` for signing in and out).
    pub service: String,
    /// Who: the token's or session's subject.
    pub sub: String,
    pub role: String,
    /// `token`, `session` or `link`.
    pub via: String,
    pub method: String,
    pub path: String,
    /// The answer's status: the outcome.
    pub status: i64,
}

impl Audit {
    pub fn new(
        store: Store,
        clock: Clock,
        roles: Vec<&'static str>,
        services: Vec<&'static str>,
    ) -> Audit {
        Audit {
            store,
            clock,
            roles,
            services,
        }
    }

    /// The service a path belongs to.
    pub fn service_of(&self, path: &str) -> &'static str {
        let rest = path
            .strip_prefix("/api/")
            .unwrap_or(path.trim_start_matches('/'));
        let first = rest.split('/').next().unwrap_or("");
        if first == "admin" {
            return "console";
        }
        self.services
            .iter()
            .find(|s| **s == first)
            .copied()
            .unwrap_or("platform")
    }

    /// Records one call.
    pub async fn record(
        &self,
        actor: &Actor,
        method: &str,
        path: &str,
        status: u16,
    ) -> Result<(), StoreError> {
        let at = self.clock.now_ms();
        let service = self.service_of(path).to_string();
        let path: String = path.chars().take(PATH_CHARS_MAX).collect();
        let (sub, role, via, method) = (
            actor.sub.clone(),
            actor.role.clone(),
            actor.via.to_string(),
            method.to_string(),
        );
        let status = i64::from(status);
        self.store
            .write(move |tx| {
                let (service, sub, role, via, method, path) = (
                    service.clone(),
                    sub.clone(),
                    role.clone(),
                    via.clone(),
                    method.clone(),
                    path.clone(),
                );
                Box::pin(async move {
                    tx.execute(
                        &sql::INSERT,
                        &[&at, &service, &sub, &role, &via, &method, &path, &status],
                    )
                    .await?;
                    Ok(())
                })
            })
            .await
    }
}

/// A page of the log, newest first: events before `before` (an event's
/// id), of `service` when given, `limit` at most.
pub async fn page(
    store: &Store,
    service: Option<String>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<AuditEvent>, StoreError> {
    let before = before.unwrap_or(i64::MAX);
    let limit = limit.clamp(1, PAGE_MAX + 1);
    store
        .read(move |c| {
            Box::pin(async move {
                let map = |r: &crate::store::Row<'_>| {
                    Ok(AuditEvent {
                        id: r.int(0)?,
                        at: crate::base::clock::rfc3339_ms(r.int(1)?),
                        service: r.text(2)?,
                        sub: r.text(3)?,
                        role: r.text(4)?,
                        via: r.text(5)?,
                        method: r.text(6)?,
                        path: r.text(7)?,
                        status: r.int(8)?,
                    })
                };
                match &service {
                    Some(s) => {
                        c.query(&sql::PAGE_OF_SERVICE, &[&before, &limit, s], map)
                            .await
                    }
                    None => c.query(&sql::PAGE, &[&before, &limit], map).await,
                }
            })
        })
        .await
}

/// Gives every request that may change something a slot for its caller,
/// and records an administrative caller's call once answered.
pub async fn middleware(State(audit): State<Arc<Audit>>, mut req: Request, next: Next) -> Response {
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(req).await;
    }
    let slot = AuditSlot::default();
    req.extensions_mut().insert(slot.clone());
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let res = next.run(req).await;
    if let Some(actor) = slot.take() {
        if audit.roles.contains(&actor.role.as_str()) {
            if let Err(e) = audit
                .record(&actor, &method, &path, res.status().as_u16())
                .await
            {
                tracing::error!(error = %e, %method, %path, "the audit log could not record a call");
            }
        }
    }
    res
}
