//! The admin console: `/admin/` (who is signed in, the services'
//! administrative pages, the audit log) and `/admin/signin` (a one-time
//! link's landing page), over `/api/admin/...`: signing in with a link,
//! the session, signing out, the pages and the audit log. Sessions and
//! links are `platform::session`'s, the log `platform::audit`'s.

use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa_axum::routes;

use super::assets::{self, Bundle};
use super::audit::{self, Actor, AuditEvent, AuditSlot};
use super::auth::{Caller, Role};
use super::error::{ApiError, ApiResult};
use super::extract::{ApiJson, ApiQuery};
use super::headers::set_no_store;
use super::service::{AdminPage, AppState, OpenApiRouter};
use super::session::{Session, Sessions, SESSION_IDLE_MS, SESSION_TTL_MS};
use crate::base::clock::rfc3339_ms;

/// The services' administrative pages, each with its service's name, and
/// the services' names (what the audit log can be filtered by).
#[derive(Clone, Default)]
pub struct ConsolePages {
    pub pages: Vec<(&'static str, AdminPage)>,
    pub services: Vec<&'static str>,
}

const CONSOLE_HTML: &str = include_str!("assets/console/index.html");
const SIGNIN_HTML: &str = include_str!("assets/console/signin.html");
const CONSOLE_JS: &str = include_str!("assets/console/console.js");
const SIGNIN_JS: &str = include_str!("assets/console/signin.js");
const CONSOLE_CSS: &str = include_str!("assets/console/console.css");

fn bundle() -> Bundle {
    Bundle::new()
        .file("/admin/console.js", assets::JS, CONSOLE_JS)
        .file("/admin/signin.js", assets::JS, SIGNIN_JS)
        .file("/admin/console.css", assets::CSS, CONSOLE_CSS)
}

/// The console's routes, documented, with its pages.
pub fn routes(pages: ConsolePages) -> OpenApiRouter<AppState> {
    let files = bundle();
    let pages_router = axum::Router::new()
        .route("/admin", get(|| async { Redirect::permanent("/admin/") }))
        .route("/admin/", assets::html_page(files.page(CONSOLE_HTML)))
        .route("/admin/signin", assets::html_page(files.page(SIGNIN_HTML)))
        .merge(files.router());
    OpenApiRouter::new()
        .routes(routes!(sign_in, session_of, sign_out))
        .routes(routes!(admin_pages))
        .routes(routes!(audit_log))
        .layer(Extension(Arc::new(pages)))
        .merge(super::identity::login::routes())
        .merge(OpenApiRouter::from(pages_router))
}

/// The one-time link's secret, from the fragment of the link `throng
/// admin link` printed.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SignIn {
    /// The text after `#` in `/admin/signin#...` (43 characters).
    #[schema(example = "q5Jd0mU3zV6x1b8c2N4aR7tY9wE0pLkHs3fGhJ2k1Ao")]
    pub link: String,
}

/// Who is signed in.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Whoami {
    pub sub: String,
    pub role: String,
    /// Every claim of the session (`places` of a staff member...).
    #[schema(value_type = Object)]
    pub claims: serde_json::Map<String, serde_json::Value>,
    /// When the session ends at the latest (RFC 3339).
    pub expires_at: String,
    /// When it ends unless used before (RFC 3339).
    pub idle_until: String,
    /// Seconds a session lasts at most, and without a request.
    pub lifetime_s: i64,
    pub idle_timeout_s: i64,
}

fn whoami(s: &Session) -> Whoami {
    Whoami {
        sub: s.sub.clone(),
        role: s.role.clone(),
        claims: s.claims.clone(),
        expires_at: rfc3339_ms(s.expires_ms),
        idle_until: rfc3339_ms(s.idle_until_ms),
        lifetime_s: SESSION_TTL_MS / 1000,
        idle_timeout_s: SESSION_IDLE_MS / 1000,
    }
}

fn not_signed_in() -> ApiError {
    ApiError::unauthorized(
        "not_signed_in",
        "this browser is not signed in to the console (or its session ended); open a new link \
         from throng admin link",
    )
}

/// Signs in with a one-time link
///
/// Uses the link (once: a second use, or one after it expired, is
/// refused) and answers with a session cookie (HttpOnly, SameSite=Strict).
/// Like every change made from the console, it must come from this
/// server's pages: the X-Throng-Request header and a same-origin Origin or
/// Sec-Fetch-Site.
#[utoipa::path(post, path = "/api/admin/session", tag = "console",
    params(("X-Throng-Request" = String, Header, description = "Any value: marks a request made by this server's pages (a cross-site form cannot send it)", example = "1")),
    request_body(content = SignIn, example = json!({"link": "q5Jd0mU3zV6x1b8c2N4aR7tY9wE0pLkHs3fGhJ2k1Ao"})),
    responses((status = 201, body = Whoami, description = "Signed in; Set-Cookie holds the session",
               example = json!({"sub": "alice@example.org", "role": "admin", "claims": {"sub": "alice@example.org", "role": "admin"},
                                "expiresAt": "2030-01-02T17:30:00.000Z", "idleUntil": "2030-01-02T10:00:00.000Z",
                                "lifetimeS": 28800, "idleTimeoutS": 1800})),
              (status = 401, description = "link_invalid, link_used, link_expired"),
              (status = 403, description = "request_header_missing, cross_site_request: not from this server's pages")))]
pub async fn sign_in(
    State(sessions): State<Arc<Sessions>>,
    headers: HeaderMap,
    extensions: axum::http::Extensions,
    ApiJson(body): ApiJson<SignIn>,
) -> ApiResult<Response> {
    sessions.check_from_own_pages(&headers)?;
    let claims = sessions.redeem_link(body.link.trim()).await?;
    let made = sessions.create(claims).await?;
    AuditSlot::note(
        &extensions,
        Actor {
            sub: made.session.sub.clone(),
            role: made.session.role.clone(),
            via: "link",
        },
    );
    let mut res = (StatusCode::CREATED, Json(whoami(&made.session))).into_response();
    res.headers_mut()
        .insert(header::SET_COOKIE, sessions.set_cookie(&made.secret));
    set_no_store(&mut res);
    Ok(res)
}

/// Who is signed in to the console
///
/// The session this browser's cookie names; 204 without one (signed out,
/// expired, idle too long, or never signed in), so a page asks without an
/// error.
#[utoipa::path(get, path = "/api/admin/session", tag = "console",
    responses((status = 200, body = Whoami,
               example = json!({"sub": "alice@example.org", "role": "staff", "claims": {"sub": "alice@example.org", "role": "staff", "places": "12"},
                                "expiresAt": "2030-01-02T17:30:00.000Z", "idleUntil": "2030-01-02T10:00:00.000Z",
                                "lifetimeS": 28800, "idleTimeoutS": 1800})),
              (status = 204, description = "Not signed in")))]
pub async fn session_of(
    State(sessions): State<Arc<Sessions>>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let session = match sessions.cookie_of(&headers) {
        Some(secret) => sessions.lookup(secret).await?,
        None => None,
    };
    let mut res = match session {
        Some(session) => Json(whoami(&session)).into_response(),
        None => StatusCode::NO_CONTENT.into_response(),
    };
    set_no_store(&mut res);
    Ok(res)
}

/// Signs out
///
/// Deletes this browser's session and its cookie. Needs the
/// X-Throng-Request header and a same-origin request, as every change
/// made with the session.
#[utoipa::path(delete, path = "/api/admin/session", tag = "console",
    params(("X-Throng-Request" = String, Header, description = "Any value: marks a request made by this server's pages (a cross-site form cannot send it)", example = "1")),
    security(("session" = [])),
    responses((status = 204, description = "Signed out; Set-Cookie clears the cookie"),
              (status = 401, description = "not_signed_in, session_ended"),
              (status = 403, description = "request_header_missing, cross_site_request")))]
pub async fn sign_out(
    State(sessions): State<Arc<Sessions>>,
    _caller: Caller,
    headers: HeaderMap,
) -> ApiResult<Response> {
    // Signing out is a browser's act: from this server's pages, whatever
    // authenticated the request.
    sessions.check_from_own_pages(&headers)?;
    let secret = sessions.cookie_of(&headers).ok_or_else(not_signed_in)?;
    sessions.end(secret).await?;
    let mut res = StatusCode::NO_CONTENT.into_response();
    res.headers_mut()
        .insert(header::SET_COOKIE, sessions.clear_cookie());
    Ok(res)
}

/// The administrative pages of the services served.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdminPages {
    /// The pages the caller's role works on.
    pub pages: Vec<ServicePage>,
    /// Every service served (the audit log's filter).
    pub services: Vec<&'static str>,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServicePage {
    pub service: &'static str,
    #[serde(flatten)]
    pub page: AdminPage,
}

/// The services' administrative pages
///
/// Those the caller's role works on (an admin's: all), each with its
/// service, as the services declare them.
#[utoipa::path(get, path = "/api/admin/pages", tag = "console",
    security(("bearer" = []), ("session" = [])),
    responses((status = 200, body = AdminPages,
               example = json!({"pages": [{"service": "booking", "href": "/booking/staff/", "title": "Booking: a place's day",
                                           "about": "a place's list of the day with check-in, print and CSV.", "roles": ["staff"]}],
                                "services": ["booking", "comments", "voting", "invites", "events"]})),
              (status = 401, description = "missing_token, invalid_token, token_expired, session_ended")))]
pub async fn admin_pages(
    Extension(pages): Extension<Arc<ConsolePages>>,
    caller: Caller,
) -> Json<AdminPages> {
    let role = caller.0.role.as_str();
    let admin = role == Role::ADMIN.name();
    Json(AdminPages {
        pages: pages
            .pages
            .iter()
            .filter(|(_, p)| admin || p.roles.contains(&role))
            .map(|(service, page)| ServicePage {
                service,
                page: *page,
            })
            .collect(),
        services: pages.services.clone(),
    })
}

/// A page of the audit log.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// Only this service's calls (`console` for signing in and out).
    #[param(example = "booking")]
    pub service: Option<String>,
    /// Events older than this id (the previous page's `next`).
    #[param(example = 120, minimum = 1)]
    pub before: Option<i64>,
    /// Events on the page, 1-200 (default 50).
    #[param(example = 50, minimum = 1, maximum = 200)]
    pub limit: Option<i64>,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditPage {
    /// Newest first.
    pub events: Vec<AuditEvent>,
    /// `before` for the next page; null on the last.
    pub next: Option<i64>,
}

/// The audit log (admin)
///
/// Calls of administrative roles that changed something or tried to
/// (who, what, when, the answer's status), newest first, a page at a time.
#[utoipa::path(get, path = "/api/admin/audit", tag = "console",
    params(AuditQuery),
    security(("bearer" = []), ("session" = [])),
    responses((status = 200, body = AuditPage,
               example = json!({"events": [{"id": 120, "at": "2030-01-02T09:30:00.000Z", "service": "invites",
                                            "sub": "alice@example.org", "role": "admin", "via": "session",
                                            "method": "POST", "path": "/api/invites/sites/1/pause", "status": 200}],
                                "next": null})),
              (status = 401, description = "missing_token, invalid_token, token_expired, session_ended"),
              (status = 403, description = "forbidden (not an admin)"),
              (status = 422, description = "invalid_field: limit or before out of range")))]
pub async fn audit_log(
    State(st): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<AuditQuery>,
) -> ApiResult<Response> {
    caller.require(Role::ADMIN)?;
    let limit = q.limit.unwrap_or(50);
    if !(1..=audit::PAGE_MAX).contains(&limit) {
        return Err(ApiError::invalid_field(format!(
            "limit: 1 to {} events a page",
            audit::PAGE_MAX
        )));
    }
    if q.before.is_some_and(|b| b < 1) {
        return Err(ApiError::invalid_field(
            "before: an event's id (1 or more), the previous page's next",
        ));
    }
    let service = q.service.filter(|s| !s.is_empty());
    let events = audit::page(&st.store, service, q.before, limit + 1).await?;
    let more = events.len() as i64 > limit;
    let events: Vec<AuditEvent> = events.into_iter().take(limit as usize).collect();
    let next = if more {
        events.last().map(|e| e.id)
    } else {
        None
    };
    let mut res = Json(AuditPage { events, next }).into_response();
    set_no_store(&mut res);
    Ok(res)
}
