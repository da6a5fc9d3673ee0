//! Invites routes. The visitor's calls (`state`, `answers`, forgetting
//! oneself) are public, answer CORS for the site's allowed origins (and the
//! same origin, when throng is served under the site's own domain), and
//! name the visitor by its signed id in `X-Invites-Visitor` or, first-party,
//! the `throng_iv_{siteId}` cookie set by the server. Sites, counts and
//! forgetting any visitor need an `admin` token.
//!
//! Error codes: 400 `invalid_path` / `malformed_json` / `visitor_required`;
//! 401 `missing_token` / `invalid_token` / `token_expired`; 403 `forbidden`,
//! `origin_not_allowed`; 404 `site_not_found`, `visitor_not_found`; 409
//! `already_answered`, `site_inactive`, `too_many_sites`; 415
//! `unsupported_media_type`; 422 `invalid_field`, `invalid_display`. A
//! forged, altered or truncated visitor id is a new visitor, never an error.
//! Nothing is written on any error.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::{FromRef, FromRequest, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::{
    AnyOfBuilder, ArrayBuilder, KnownFormat, Object, ObjectBuilder, Schema, Type,
};
use utoipa::openapi::RefOr;
use utoipa::ToSchema;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;

use super::model::{
    page_path, Answer, AnswerState, Device, Outcome, SiteInput, Standing, Style, Texts, Trigger,
    Visit, SITES_MAX,
};
use super::signed::{Signer, Visitor, DISPLAY_CHARS, VISITOR_CHARS};
use super::sites::{self, SiteEntry, Tally};
use super::store::{self, answers::AnswerCmd};
use super::InvitesState;
use crate::base::clock::{day_of, day_text, parse_day, rfc3339_ms};
use crate::platform::auth::{Caller, Role, TokenKeys};
use crate::platform::error::{ApiError, ApiResult};
use crate::platform::extract::ApiQuery;
use crate::platform::extract::{ApiJson, ApiPath};
use crate::platform::openapi::{
    closed_object, enum_schema, format_schema, int_schema, nullable, small_int_schema,
    string_schema,
};

/// The header that carries the signed visitor id.
pub const VISITOR_HEADER: &str = "x-invites-visitor";
/// The header that carries the browser's pacing token (see
/// `Signer::sign_pacing`).
pub const PACING_HEADER: &str = "x-invites-pacing";
/// Seconds a browser may cache a CORS preflight.
const PREFLIGHT_MAX_AGE_S: u32 = 600;
/// The first-party cookie's lifetime (Chromium's cap, 400 days).
const COOKIE_MAX_AGE_S: u32 = 400 * 86_400;

/// Invites' routes and their operations, for any state that gives
/// `Arc<InvitesState>` and the token keys (see `platform::service`).
pub fn routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<InvitesState>: FromRef<S>,
    Arc<TokenKeys>: FromRef<S>,
    Arc<crate::platform::session::Sessions>: FromRef<S>,
{
    OpenApiRouter::default()
        .routes(routes!(create_site, list_sites))
        .routes(routes!(get_site, update_site))
        .routes(routes!(pause_site))
        .routes(routes!(resume_site))
        .routes(routes!(site_stats))
        .routes(routes!(site_results))
        .merge(
            // The page's calls; the preflight is documented once, on .../answers.
            OpenApiRouter::default()
                .routes(routes!(post_answer, preflight))
                .routes(routes!(forget_me).map(preflighted))
                .route_layer(axum::middleware::from_fn(readable_errors)),
        )
        // The busiest call makes its errors readable itself (`readable`):
        // a middleware would clone the route and box its future on every
        // check.
        .routes(routes!(visitor_state).map(|m| {
            m.options(axum::handler::Handler::layer(
                preflight,
                axum::middleware::from_fn(readable_errors),
            ))
        }))
        .routes(routes!(forget_visitor))
        .merge(super::page::router().into())
}

/// `methods`, and the CORS preflight of its path.
fn preflighted<S>(methods: MethodRouter<S>) -> MethodRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<InvitesState>: FromRef<S>,
{
    methods.options(preflight)
}

fn site_not_found(id: i64) -> ApiError {
    ApiError::not_found("site_not_found", format!("no site with id {id}"))
}

fn entry(st: &InvitesState, site_id: i64) -> ApiResult<Arc<SiteEntry>> {
    st.sites
        .load()
        .get(site_id)
        .cloned()
        .ok_or_else(|| site_not_found(site_id))
}

// ---- CORS -------------------------------------------------------------

/// The request's `Origin` when it may call for this site: `Ok(None)` when
/// there is no Origin (not a cross-origin browser call) or it is throng's
/// own origin (served under the site's domain); `Ok(Some(origin))` for an
/// allowed origin, which the answer echoes; 403 otherwise.
fn allowed_origin(site: &SiteEntry, headers: &HeaderMap) -> ApiResult<Option<HeaderValue>> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(None);
    };
    let text = origin.to_str().unwrap_or("").to_ascii_lowercase();
    let own = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(|h| h.to_ascii_lowercase());
    let host_of_origin = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"));
    if own.is_some() && host_of_origin == own.as_deref() {
        return Ok(None);
    }
    if site.site().allows_origin(&text) {
        return Ok(Some(origin.clone()));
    }
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        "origin_not_allowed",
        format!(
            "pages of {text:?} may not call site {}; an admin adds the origin to the site's allowedOrigins",
            site.row.site_id
        ),
    ))
}

/// A page's calls answer errors with `Access-Control-Allow-Origin` set to
/// the page's origin, whatever it is: the page's script can then read the
/// envelope (`origin_not_allowed` says which origin to add) instead of a
/// browser's generic CORS failure. An error writes nothing and tells the
/// page nothing about any visitor, so no origin learns anything from it.
async fn readable_errors(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let origin = request.headers().get(header::ORIGIN).cloned();
    readable(next.run(request).await, origin)
}

/// `res`, an error made readable to the page of `origin` (see
/// `readable_errors`).
fn readable(mut res: Response, origin: Option<HeaderValue>) -> Response {
    let is_error = res.status().is_client_error() || res.status().is_server_error();
    if let Some(o) = origin.filter(|_| is_error) {
        let h = res.headers_mut();
        if !h.contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN) {
            h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, o);
            h.append(header::VARY, HeaderValue::from_static("origin"));
        }
    }
    res
}

fn with_cors(mut res: Response, origin: Option<HeaderValue>) -> Response {
    let h = res.headers_mut();
    h.append(header::VARY, HeaderValue::from_static("origin"));
    if let Some(o) = origin {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, o);
    }
    res
}

/// CORS preflight of a page's calls
///
/// Public. The browser's CORS preflight before a page's script calls the site's
/// state, answers or visitor; answered for the site's allowed origins only.
#[utoipa::path(options, path = "/api/invites/sites/{site_id}/answers", tag = "invites",
    params(("site_id" = i64, Path, example = 1),
           ("Origin" = Option<String>, Header, description = "One of the site's allowedOrigins", example = "https://shop.example")),
    responses((status = 204, description = "CORS preflight: Access-Control-Allow-Origin (the origin), -Methods GET, POST, DELETE, -Headers content-type, x-invites-visitor, x-invites-pacing, -Max-Age 600. The same for .../state and .../visitor."),
              (status = 403, description = "origin_not_allowed (with Access-Control-Allow-Origin: the origin, so a page's script can read the envelope; every error of .../state, .../answers and .../visitor carries it)"),
              (status = 404, description = "site_not_found")))]
pub async fn preflight(
    State(st): State<Arc<InvitesState>>,
    ApiPath(site_id): ApiPath<i64>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let e = entry(&st, site_id)?;
    let origin = allowed_origin(&e, &headers)?;
    let mut res = StatusCode::NO_CONTENT.into_response();
    let h = res.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, DELETE"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("content-type, x-invites-visitor, x-invites-pacing"),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from(PREFLIGHT_MAX_AGE_S),
    );
    Ok(with_cors(res, origin))
}

// ---- the visitor ------------------------------------------------------

/// The first-party cookie's name is this and the site's id.
const COOKIE_PREFIX: &str = "throng_iv_";

fn cookie_name(site_id: i64) -> String {
    format!("{COOKIE_PREFIX}{site_id}")
}

/// The visitor a request names (header first, then the cookie), if genuine.
fn claimed_visitor(signer: &Signer, site_id: i64, headers: &HeaderMap) -> Option<Visitor> {
    claimed_visitor_signed(signer, site_id, headers).map(|(v, _)| v)
}

/// The visitor a request names and the signed text that named it (the
/// same text `sign_visitor` makes: the signature is deterministic).
fn claimed_visitor_signed<'h>(
    signer: &Signer,
    site_id: i64,
    headers: &'h HeaderMap,
) -> Option<(Visitor, &'h str)> {
    let from_header = headers
        .get(VISITOR_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| v.len() == VISITOR_CHARS)
        .and_then(|v| Some((signer.verify_visitor(site_id, v)?, v)));
    if from_header.is_some() {
        return from_header;
    }
    let name = cookie_name(site_id);
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .filter(|(k, _)| *k == name)
        .find_map(|(_, v)| Some((signer.verify_visitor(site_id, v.trim())?, v.trim())))
}

fn visitor_required() -> ApiError {
    ApiError::bad_request(
        "visitor_required",
        format!(
            "send the visitor id that GET .../state returned in {VISITOR_HEADER} (or its cookie)"
        ),
    )
}

fn set_cookie(st: &InvitesState, res: &mut Response, site_id: i64, signed: &str) {
    let mut site_text = itoa::Buffer::new();
    let site = site_text.format(site_id);
    let mut cookie = String::with_capacity(128);
    for part in [
        COOKIE_PREFIX,
        site,
        "=",
        signed,
        "; Path=/api/invites/sites/",
        site,
        "; Max-Age=",
        itoa::Buffer::new().format(COOKIE_MAX_AGE_S),
        "; HttpOnly; SameSite=Lax",
        if st.cookie_secure { "; Secure" } else { "" },
    ] {
        cookie.push_str(part);
    }
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        res.headers_mut().append(header::SET_COOKIE, v);
    }
}

/// What a visitor's check answers. Written as text by `visitor_state`
/// (the site's part rendered once per site); this type is its shape.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VisitorState {
    pub site_id: i64,
    /// The signed visitor id to keep and send back in `X-Invites-Visitor`.
    pub visitor: String,
    pub state: AnswerState,
    /// How often this visitor closed the popup.
    pub closes: i64,
    pub closes_max: i64,
    /// Whether to show the popup now.
    pub show: bool,
    /// Why not: site_paused, not_yet_active, ended, page_excluded,
    /// device_excluded, answered_yes, answered_no, closed_out, not_sampled
    /// or visitor_cap; null when shown.
    pub reason: Option<String>,
    /// When shown: the display to answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_id: Option<String>,
    /// When shown: the survey's URL, absolute, its placeholders
    /// ({visitor}, {display}, {page}, {site}) filled in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub survey_url: Option<String>,
    /// When shown: the browser's pacing token to keep and send back in
    /// X-Invites-Pacing (the days of its recent invitations, for the cap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing: Option<String>,
    /// When shown: the popup's texts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub popup: Option<Texts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<Trigger>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scroll_percent: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub style: Option<Style>,
}

/// What a page's check says of where it runs.
#[derive(Deserialize, Debug, Default)]
pub struct StateQuery {
    /// The page's URL or path.
    pub page: Option<String>,
    /// desktop, phone or tablet.
    pub device: Option<String>,
}

/// A visitor's standing, and whether to show the popup now
///
/// Public, from a page of the site. Says whether to show the invitation popup
/// to this visitor now, and sets the visitor's first-party cookie.
#[utoipa::path(get, path = "/api/invites/sites/{site_id}/state", tag = "invites",
    params(("site_id" = i64, Path),
           ("page" = Option<String>, Query, description = "The page's URL (or path): its path is matched against the site's pagesInclude/pagesExclude and counted in the results; anything but an http(s) URL or a /path is no page", example = "https://shop.example/checkout/done?order=1"),
           ("device" = Option<String>, Query, description = "desktop, phone or tablet, as the page sees itself; missing or another value: from the User-Agent", example = "phone"),
           ("X-Invites-Pacing" = Option<String>, Header, description = "The pacing token an earlier answer returned (the days of this browser's recent invitations, for the site's capInvitations); missing or forged: none"),
           ("X-Invites-Visitor" = Option<String>, Header, description = "The signed visitor id (27 characters) an earlier answer returned; missing, forged or altered: a new visitor"),
           ("Origin" = Option<String>, Header, description = "A cross-origin page's origin: one of the site's allowedOrigins")),
    responses((status = 200, body = VisitorState, description = "The visitor's standing and whether to show the popup. Set-Cookie throng_iv_{siteId} (first-party use). Cache-Control: no-store.",
               example = json!({"siteId": 1, "visitor": "AAAAAAAAAAEBq3xY0pQ2r7sT9vW", "state": "asking", "closes": 0,
                                "closesMax": 3, "show": true, "reason": null, "displayId": "Xk2p9QvL0aB7cD1eF3gH5i",
                                "surveyUrl": "https://survey.example/s/42",
                                "popup": {"title": "Got a minute?", "body": "Tell us how we are doing.",
                                          "yes": "Yes, open the survey", "no": "No, thanks", "close": "Close"},
                                "trigger": "load", "delaySeconds": 10, "scrollPercent": 50, "style": "modal"})),
              (status = 400, description = "invalid_path"),
              (status = 403, description = "origin_not_allowed"),
              (status = 404, description = "site_not_found"),
              (status = 429, description = "over capacity; see Retry-After"),
              (status = 503, description = "store_unavailable")))]
pub async fn visitor_state(
    State(st): State<Arc<InvitesState>>,
    request: axum::extract::Request,
) -> Response {
    // Taken apart, not extracted: the handler reads the headers in place
    // (a `HeaderMap` argument is a copy of them).
    let (mut parts, _) = request.into_parts();
    let origin = parts.headers.get(header::ORIGIN).cloned();
    let res = match check_state(&st, &mut parts).await {
        Ok(res) => res,
        Err(e) => e.into_response(),
    };
    readable(res, origin)
}

async fn check_state(st: &InvitesState, parts: &mut Parts) -> ApiResult<Response> {
    let ApiPath(site_id) = ApiPath::<i64>::from_request_parts(parts, &()).await?;
    let ApiQuery(q) = ApiQuery::<StateQuery>::from_request_parts(parts, &()).await?;
    let headers = &parts.headers;
    let e = entry(st, site_id)?;
    let origin = allowed_origin(&e, headers)?;
    let site = e.site();
    let now = st.clock.now_ms();
    let today = day_of(now);
    let page = q.page.as_deref().and_then(page_path);
    let device = q
        .device
        .as_deref()
        .and_then(Device::parse)
        .unwrap_or_else(|| {
            Device::from_user_agent(
                headers
                    .get(header::USER_AGENT)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or(""),
            )
        });
    let pacing_sent = headers.get(PACING_HEADER).and_then(|v| v.to_str().ok());
    // Verified only where a cap reads it (or a display adds to it).
    let pacing = |sent: Option<&str>| {
        sent.map(|t| st.signer.verify_pacing(&site.owner, t.trim()))
            .unwrap_or_default()
    };
    let mut invited_days = if site.cap_invitations > 0 {
        pacing(pacing_sent)
    } else {
        Vec::new()
    };
    let claimed = claimed_visitor_signed(&st.signer, site_id, headers);
    let known_text = claimed.map(|(_, text)| text);
    let (visitor, standing) = match claimed.map(|(v, _)| v) {
        Some(v) => {
            // From memory on the embedded store (index.rs), else the table.
            let key = st.storage.visitor_key(v.id);
            (v, st.storage.standing(site_id, key).await?)
        }
        None => {
            // A first visit: sampled once, now, and kept in the signed id.
            let draw = (rand::random::<u64>() >> 32) as u32;
            let v = Visitor {
                id: st.storage.mint_visitor().await,
                sampled: site.samples_in(draw),
            };
            e.seen.visitors.fetch_add(1, Ordering::Relaxed);
            if v.sampled {
                e.seen.invited.fetch_add(1, Ordering::Relaxed);
            }
            (v, Standing::default())
        }
    };
    // As the rules see it: a "No" or closed-out standing whose wait has
    // passed is asked again, its closes afresh.
    let standing = site.rules().reopen(standing, today);
    // A known visitor's signed id is the text it sent (signing is
    // deterministic): not signed again.
    let signed = match known_text {
        Some(text) => text.to_string(),
        None => st.signer.sign_visitor(site_id, visitor),
    };
    // Built as text: the ids are base64url and the site's part is rendered
    // once (`SiteEntry::show_json`), so nothing here needs escaping.
    let mut body = String::with_capacity(160 + e.show_json.len());
    body.push_str("{\"siteId\":");
    body.push_str(itoa::Buffer::new().format(site_id));
    body.push_str(",\"visitor\":\"");
    body.push_str(&signed);
    body.push_str("\",\"state\":\"");
    body.push_str(standing.state.name());
    body.push_str("\",\"closes\":");
    body.push_str(itoa::Buffer::new().format(standing.closes));
    body.push_str(",\"closesMax\":");
    body.push_str(itoa::Buffer::new().format(site.closes_max));
    let visit = Visit {
        page,
        device,
        targeting: &e.targeting,
        invited_days: &invited_days,
    };
    match site.decide(now, visitor.sampled, standing, &visit) {
        Ok(()) => {
            e.seen.displays.fetch_add(1, Ordering::Relaxed);
            e.seen.tally(today, page, Tally::Shown);
            let (_, display) = st.signer.new_display(site_id, visitor.id);
            if site.cap_invitations == 0 {
                invited_days = pacing(pacing_sent);
            }
            invited_days.push(today);
            let link = e.survey_link(&st.public_url.base(headers), visitor.id, &display, page);
            body.push_str(",\"show\":true,\"reason\":null,\"displayId\":\"");
            body.push_str(&display);
            body.push_str("\",\"surveyUrl\":");
            body.push_str(&serde_json::Value::from(link).to_string());
            // base64url: nothing to escape.
            body.push_str(",\"pacing\":\"");
            body.push_str(&st.signer.sign_pacing(&site.owner, &invited_days));
            body.push('"');
            body.push_str(&e.show_json);
        }
        Err(why) => {
            body.push_str(",\"show\":false,\"reason\":\"");
            body.push_str(why.reason());
            body.push('"');
        }
    }
    body.push('}');
    let mut res = (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response();
    crate::platform::headers::set_no_store(&mut res);
    // A first-party cookie, set (and its lifetime renewed) on every check
    // from throng's own origin; a cross-origin page's browser would not
    // store it (the script sends no credentials there).
    if origin.is_none() {
        set_cookie(st, &mut res, site_id, &signed);
    }
    Ok(with_cors(res, origin))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnswerRequest {
    pub answer: Answer,
    /// The displayId of the popup answered.
    #[schema(value_type = DisplayId, inline)]
    pub display_id: String,
    /// The page's URL (or path) it was answered on, for the results by
    /// page and the survey link's {page}.
    #[serde(default)]
    #[schema(max_length = 2000)]
    pub page: Option<String>,
}

crate::schema_type!(
    /// A displayId as `Signer::new_display` writes it (base64url).
    DisplayId => crate::platform::openapi::string_schema(
        DISPLAY_CHARS,
        DISPLAY_CHARS,
        Some(format!("^[A-Za-z0-9_-]{{{DISPLAY_CHARS}}}$"))
    )
);

/// What an answer answers.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Answered {
    pub site_id: i64,
    pub state: AnswerState,
    pub closes: i64,
    pub closes_max: i64,
    /// False: this display was answered before, nothing changed.
    pub counted: bool,
    /// The survey's URL (absolute, its placeholders filled in), on yes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub survey_url: Option<String>,
}

/// What forgetting a visitor answers.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Forgotten {
    pub visitor_id: i64,
    pub answers_deleted: u64,
}

/// A site as the admin answers give it.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SiteOut {
    pub site_id: i64,
    pub name: String,
    /// Absolute.
    pub survey_url: String,
    pub allowed_origins: Vec<String>,
    pub invite_share: f64,
    pub closes_max: i64,
    /// RFC 3339, or null.
    pub active_from: Option<String>,
    /// RFC 3339, or null.
    pub active_until: Option<String>,
    pub paused: bool,
    pub retention_days: i64,
    pub texts: Texts,
    pub trigger: Trigger,
    pub delay_seconds: i64,
    pub scroll_percent: i64,
    pub style: Style,
    pub owner: String,
    pub pages_include: Vec<String>,
    pub pages_exclude: Vec<String>,
    pub devices: Vec<Device>,
    /// 0: never.
    pub ask_again_after_no_days: i64,
    /// 0: never.
    pub ask_again_after_closes_days: i64,
    /// 0: no cap.
    pub cap_invitations: i64,
    pub cap_days: i64,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
    /// A script tag with an absolute src (--public-url, else http:// and
    /// the request's Host) to paste on the site's pages.
    pub snippet: String,
}

/// Every site.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct SiteList {
    /// In id order.
    pub sites: Vec<SiteOut>,
}

/// A site's counts.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SiteStats {
    pub site_id: i64,
    /// First visits.
    pub visitors: i64,
    /// First visits sampled in.
    pub invited: i64,
    pub displays: i64,
    pub yes: i64,
    pub no: i64,
    pub closes: i64,
    pub closed_out: i64,
    /// yes / invited; null before any invitation.
    pub conversion: Option<f64>,
}

fn answered_message(state: AnswerState) -> String {
    match state {
        AnswerState::Yes => "this visitor already said yes to this survey".into(),
        AnswerState::No => "this visitor already said no to this survey".into(),
        _ => "this visitor closed the invitation the most times allowed; it is not shown again"
            .into(),
    }
}

/// A visitor's answer to the popup: yes, no or close
///
/// Public, from a page of the site. Records the visitor's answer to the popup:
/// yes, no or close. Yes and no are final; a second answer answers 409
/// `already_answered`.
#[utoipa::path(post, path = "/api/invites/sites/{site_id}/answers", tag = "invites",
    params(("site_id" = i64, Path),
           ("X-Invites-Visitor" = inline(VisitorText), Header, description = "The signed visitor id (or its cookie)"),
           ("Origin" = Option<String>, Header, description = "A cross-origin page's origin: one of the site's allowedOrigins")),
    request_body(content = AnswerRequest, description = "{answer: yes | no | close, displayId}",
                 example = json!({"answer": "yes", "displayId": "Xk2p9QvL0aB7cD1eF3gH5i"})),
    responses((status = 200, body = Answered, description = "The visitor's standing after the answer. Cache-Control: no-store.",
               example = json!({"siteId": 1, "state": "yes", "closes": 0, "closesMax": 3, "counted": true,
                                "surveyUrl": "https://survey.example/s/42"})),
              (status = 400, description = "visitor_required, malformed_json, invalid_path"),
              (status = 403, description = "origin_not_allowed"),
              (status = 404, description = "site_not_found"),
              (status = 409, description = "already_answered (yes, no or closed out is final), site_inactive (paused, not yet active or ended)"),
              (status = 413, description = "body_too_large"),
              (status = 415, description = "unsupported_media_type"),
              (status = 422, description = "invalid_field (answer), invalid_display (not a display of this visitor)"),
              (status = 429, description = "over capacity; see Retry-After"),
              (status = 503, description = "store_unavailable")))]
pub async fn post_answer(
    State(st): State<Arc<InvitesState>>,
    ApiPath(site_id): ApiPath<i64>,
    request: axum::extract::Request,
) -> ApiResult<Response> {
    let checked = check_answer(&st, site_id, request).await?;
    let outcome = st.storage.answer(checked.cmd).await?;
    if outcome.1 == Outcome::Counted {
        let tally = match checked.cmd.answer {
            Answer::Yes => Tally::Yes,
            Answer::No => Tally::No,
            Answer::Close => Tally::Closed,
        };
        checked
            .entry
            .seen
            .tally(day_of(checked.cmd.now_ms), checked.page.as_deref(), tally);
    }
    answer_response(&checked, outcome)
}

/// An answer that passed every check, ready to be written.
pub struct CheckedAnswer {
    entry: Arc<SiteEntry>,
    origin: Option<HeaderValue>,
    /// The site's survey URL, absolute, its placeholders filled in.
    survey_url: String,
    /// The page's path, if the answer named one.
    page: Option<String>,
    pub cmd: AnswerCmd,
}

/// Everything an answer is checked for before it is written: the site,
/// the origin and the visitor first (a refused page's body is not read),
/// then the body, the display and the site's activity.
pub async fn check_answer(
    st: &InvitesState,
    site_id: i64,
    request: axum::extract::Request,
) -> ApiResult<CheckedAnswer> {
    let e = entry(st, site_id)?;
    let origin = allowed_origin(&e, request.headers())?;
    let base = st.public_url.base(request.headers());
    let visitor =
        claimed_visitor(&st.signer, site_id, request.headers()).ok_or_else(visitor_required)?;
    let ApiJson(req) = ApiJson::<AnswerRequest>::from_request(request, &()).await?;
    let display = st
        .signer
        .verify_display(site_id, visitor.id, req.display_id.trim())
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_display",
                "displayId: send the displayId of a popup GET .../state showed this visitor",
            )
        })?;
    let page = req.page.as_deref().and_then(page_path).map(str::to_string);
    let survey_url = e.survey_link(&base, visitor.id, req.display_id.trim(), page.as_deref());
    let now = st.clock.now_ms();
    let site = e.site();
    if let Err(why) = site.active(now) {
        return Err(ApiError::conflict(
            "site_inactive",
            format!("site {site_id} takes no answers now ({})", why.reason()),
        ));
    }
    let cmd = AnswerCmd {
        site_id,
        visitor_id: st.storage.visitor_key(visitor.id),
        display,
        answer: req.answer,
        rules: site.rules(),
        now_ms: now,
        shard: st.storage.counts_shard(),
    };
    Ok(CheckedAnswer {
        entry: e,
        origin,
        survey_url,
        page,
        cmd,
    })
}

/// The answer to an answer that was written.
pub fn answer_response(
    checked: &CheckedAnswer,
    (after, outcome): (Standing, Outcome),
) -> ApiResult<Response> {
    if outcome == Outcome::Final {
        return Err(ApiError::conflict(
            "already_answered",
            answered_message(after.state),
        ));
    }
    let site = checked.entry.site();
    let body = Answered {
        site_id: checked.cmd.site_id,
        state: after.state,
        closes: after.closes,
        closes_max: site.closes_max,
        counted: outcome == Outcome::Counted,
        survey_url: (after.state == AnswerState::Yes).then(|| checked.survey_url.clone()),
    };
    let mut res = Json(body).into_response();
    crate::platform::headers::set_no_store(&mut res);
    Ok(with_cors(res, checked.origin.clone()))
}

/// A visitor forgets themselves: every answer is deleted
///
/// Public, from a page of the site. Deletes every answer of this visitor and
/// clears the cookie.
#[utoipa::path(delete, path = "/api/invites/sites/{site_id}/visitor", tag = "invites",
    params(("site_id" = i64, Path, example = 1),
           ("X-Invites-Visitor" = inline(VisitorText), Header, description = "The signed visitor id (or its cookie)",
            example = "AAAAAAAAAAEBq3xY0pQ2r7sT9vW")),
    responses((status = 204, description = "Every answer of this visitor is deleted; the cookie is cleared"),
              (status = 400, description = "visitor_required"),
              (status = 403, description = "origin_not_allowed"),
              (status = 404, description = "site_not_found"),
              (status = 503, description = "store_unavailable")))]
pub async fn forget_me(
    State(st): State<Arc<InvitesState>>,
    ApiPath(site_id): ApiPath<i64>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let e = entry(&st, site_id)?;
    let origin = allowed_origin(&e, &headers)?;
    let visitor = claimed_visitor(&st.signer, site_id, &headers).ok_or_else(visitor_required)?;
    st.storage
        .forget_visitor(st.storage.visitor_key(visitor.id))
        .await?;
    let mut res = StatusCode::NO_CONTENT.into_response();
    if let Ok(v) = HeaderValue::from_str(&format!(
        "{}=; Path=/api/invites/sites/{site_id}; Max-Age=0; HttpOnly; SameSite=Lax",
        cookie_name(site_id)
    )) {
        res.headers_mut().append(header::SET_COOKIE, v);
    }
    Ok(with_cors(res, origin))
}

/// Forgets a visitor by number, on every site (admin)
///
/// Admin token. Deletes a visitor's answers on every site, by the visitor
/// number they quote (a privacy request made outside the page).
#[utoipa::path(delete, path = "/api/invites/visitors/{visitor_id}", tag = "invites",
    params(("visitor_id" = inline(VisitorId), Path, description = "The visitor's numeric id (1 to 9223372036854775807), as a support request or a data subject request names it")),
    security(("bearer" = [])),
    responses((status = 200, body = Forgotten, example = json!({"visitorId": 1234567, "answersDeleted": 2})),
              (status = 400, description = "invalid_path"),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden (not an admin token)"),
              (status = 503, description = "store_unavailable")))]
pub async fn forget_visitor(
    State(st): State<Arc<InvitesState>>,
    caller: Caller,
    ApiPath(visitor_id): ApiPath<i64>,
) -> ApiResult<Json<Forgotten>> {
    caller.require(Role::ADMIN)?;
    if visitor_id < 1 {
        return Err(ApiError::bad_request(
            "invalid_path",
            "visitor_id: 1 to 9223372036854775807",
        ));
    }
    let n = st
        .storage
        .forget_visitor(st.storage.visitor_key(visitor_id))
        .await?;
    Ok(Json(Forgotten {
        visitor_id,
        answers_deleted: n,
    }))
}

// ---- sites (admin) ----------------------------------------------------

/// A site as the admin answers give it; `base` is the public URL, so the
/// survey URL and the snippet are absolute (the snippet is pasted on
/// another site, where a relative `src` would load from that site).
fn site_json(e: &SiteEntry, base: &str) -> SiteOut {
    let s = e.site();
    SiteOut {
        site_id: e.row.site_id,
        name: s.name.clone(),
        survey_url: e.survey_url(base),
        allowed_origins: s.allowed_origins.clone(),
        invite_share: s.invite_share,
        closes_max: s.closes_max,
        active_from: s.active_from_ms.map(rfc3339_ms),
        active_until: s.active_until_ms.map(rfc3339_ms),
        paused: s.paused,
        retention_days: s.retention_days,
        texts: s.texts.clone(),
        trigger: s.trigger,
        delay_seconds: s.delay_seconds,
        scroll_percent: s.scroll_percent,
        style: s.style,
        owner: s.owner.clone(),
        pages_include: s.pages_include.clone(),
        pages_exclude: s.pages_exclude.clone(),
        devices: s.devices.clone(),
        ask_again_after_no_days: s.ask_again_after_no_days,
        ask_again_after_closes_days: s.ask_again_after_closes_days,
        cap_invitations: s.cap_invitations,
        cap_days: s.cap_days,
        created_at: rfc3339_ms(e.row.created_at_ms),
        updated_at: rfc3339_ms(e.row.updated_at_ms),
        snippet: format!(
            "<script src=\"{base}/invite.js\" data-site=\"{}\" async></script>",
            e.row.site_id
        ),
    }
}

async fn reload(st: &InvitesState) -> ApiResult<()> {
    sites::reload_and_announce(&st.store, &st.sites)
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "invites: reloading the sites failed");
            ApiError::unavailable("the site was saved but this node could not reload it; retry")
        })
}

/// Adds a site (admin)
///
/// Admin token. Adds a site: its name, the origins whose pages may show the
/// popup, and when and to whom to show it. The answer's Location names the new
/// site.
#[utoipa::path(post, path = "/api/invites/sites", tag = "invites",
    security(("bearer" = [])),
    request_body(content = inline(SiteCreate),
                 description = "surveyUrl (absolute http(s) URL, or a /path on this server) and allowedOrigins (scheme://host[:port], stored normalised: lowercase, default port and trailing / dropped) required; name (1-100 chars), inviteShare (0-1, default 1), closesMax (1-10, default 3), activeFrom/activeUntil (RFC 3339), paused, retentionDays (1-3650, default 365), texts, trigger (load, delay, scroll, exit_intent; default load), delaySeconds (0-600, default 10), scrollPercent (1-100, default 50), style (modal, slide_in; default modal)",
                 example = json!({"name": "Shop survey", "surveyUrl": "https://survey.example/s/42",
                                  "allowedOrigins": ["https://shop.example"], "inviteShare": 0.25})),
    responses((status = 201, body = SiteOut, description = "The site; Location",
               example = json!({"siteId": 1, "name": "Shop survey", "surveyUrl": "https://survey.example/s/42",
                                "allowedOrigins": ["https://shop.example"], "inviteShare": 0.25, "closesMax": 3,
                                "activeFrom": null, "activeUntil": null, "paused": false, "retentionDays": 365,
                                "texts": {"title": "Got a minute?", "body": "Tell us how we are doing.",
                                          "yes": "Yes, open the survey", "no": "No, thanks", "close": "Close"},
                                "trigger": "load", "delaySeconds": 10, "scrollPercent": 50, "style": "modal",
                                "createdAt": "2030-01-02T09:30:00.000Z", "updatedAt": "2030-01-02T09:30:00.000Z",
                                "snippet": "<script src=\"https://throng.example/invite.js\" data-site=\"1\" async></script>"})),
              (status = 400, description = "malformed_json"),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden (not an admin token)"),
              (status = 409, description = "too_many_sites (10,000 at most)"),
              (status = 415, description = "unsupported_media_type"),
              (status = 422, description = "invalid_field, naming the field and what is accepted"),
              (status = 503, description = "store_unavailable")))]
pub async fn create_site(
    State(st): State<Arc<InvitesState>>,
    caller: Caller,
    headers: HeaderMap,
    ApiJson(input): ApiJson<SiteInput>,
) -> ApiResult<Response> {
    caller.require(Role::ADMIN)?;
    let site = input.apply(None)?;
    let id = store::create_site(&st.store, &site, st.clock.now_ms(), SITES_MAX as i64)
        .await?
        .ok_or_else(|| {
            ApiError::conflict(
                "too_many_sites",
                format!("a store holds at most {SITES_MAX} sites"),
            )
        })?;
    reload(&st).await?;
    let e = entry(&st, id)?;
    let base = st.public_url.base(&headers);
    let mut res = (StatusCode::CREATED, Json(site_json(&e, &base))).into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("/api/invites/sites/{id}")) {
        res.headers_mut().insert(header::LOCATION, v);
    }
    Ok(res)
}

/// Every site (admin)
///
/// Admin token. Every site with its settings.
#[utoipa::path(get, path = "/api/invites/sites", tag = "invites",
    security(("bearer" = [])),
    responses((status = 200, body = SiteList, example = json!({"sites": [{"siteId": 1, "name": "Shop survey", "surveyUrl": "https://survey.example/s/42",
                                "allowedOrigins": ["https://shop.example"], "inviteShare": 0.25, "closesMax": 3,
                                "activeFrom": null, "activeUntil": null, "paused": false, "retentionDays": 365,
                                "texts": {"title": "Got a minute?", "body": "Tell us how we are doing.",
                                          "yes": "Yes, open the survey", "no": "No, thanks", "close": "Close"},
                                "trigger": "load", "delaySeconds": 10, "scrollPercent": 50, "style": "modal",
                                "createdAt": "2030-01-02T09:30:00.000Z", "updatedAt": "2030-01-02T09:30:00.000Z",
                                "snippet": "<script src=\"https://throng.example/invite.js\" data-site=\"1\" async></script>"}]})),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden (not an admin token)")))]
pub async fn list_sites(
    State(st): State<Arc<InvitesState>>,
    caller: Caller,
    headers: HeaderMap,
) -> ApiResult<Json<SiteList>> {
    caller.require(Role::ADMIN)?;
    let base = st.public_url.base(&headers);
    let sites = st
        .sites
        .load()
        .list()
        .iter()
        .map(|e| site_json(e, &base))
        .collect();
    Ok(Json(SiteList { sites }))
}

/// A site (admin)
///
/// Admin token. One site's settings.
#[utoipa::path(get, path = "/api/invites/sites/{site_id}", tag = "invites",
    params(("site_id" = i64, Path)),
    security(("bearer" = [])),
    responses((status = 200, body = SiteOut, example = json!({"siteId": 1, "name": "Shop survey", "surveyUrl": "https://survey.example/s/42",
                                "allowedOrigins": ["https://shop.example"], "inviteShare": 0.25, "closesMax": 3,
                                "activeFrom": null, "activeUntil": null, "paused": false, "retentionDays": 365,
                                "texts": {"title": "Got a minute?", "body": "Tell us how we are doing.",
                                          "yes": "Yes, open the survey", "no": "No, thanks", "close": "Close"},
                                "trigger": "load", "delaySeconds": 10, "scrollPercent": 50, "style": "modal",
                                "createdAt": "2030-01-02T09:30:00.000Z", "updatedAt": "2030-01-02T09:30:00.000Z",
                                "snippet": "<script src=\"https://throng.example/invite.js\" data-site=\"1\" async></script>"})),
              (status = 400, description = "invalid_path"),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden (not an admin token)"),
              (status = 404, description = "site_not_found")))]
pub async fn get_site(
    State(st): State<Arc<InvitesState>>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(site_id): ApiPath<i64>,
) -> ApiResult<Json<SiteOut>> {
    caller.require(Role::ADMIN)?;
    let base = st.public_url.base(&headers);
    Ok(Json(site_json(&*entry(&st, site_id)?, &base)))
}

async fn change_site(
    st: &InvitesState,
    headers: &HeaderMap,
    site_id: i64,
    input: SiteInput,
) -> ApiResult<Json<SiteOut>> {
    let e = entry(st, site_id)?;
    let site = input.apply(Some(e.site()))?;
    if !store::update_site(&st.store, site_id, &site, st.clock.now_ms()).await? {
        return Err(site_not_found(site_id));
    }
    reload(st).await?;
    let base = st.public_url.base(headers);
    Ok(Json(site_json(&*entry(st, site_id)?, &base)))
}

async fn set_paused(
    st: &InvitesState,
    caller: &Caller,
    headers: &HeaderMap,
    site_id: i64,
    paused: bool,
) -> ApiResult<Json<SiteOut>> {
    caller.require(Role::ADMIN)?;
    let input = SiteInput {
        paused: Some(paused),
        ..Default::default()
    };
    change_site(st, headers, site_id, input).await
}

/// Changes a site's settings (admin)
///
/// Admin token. Changes the fields given of a site's settings; the others stay.
#[utoipa::path(patch, path = "/api/invites/sites/{site_id}", tag = "invites",
    params(("site_id" = i64, Path)),
    security(("bearer" = [])),
    request_body(content = inline(SiteChange), description = "The fields to change, with the bounds of POST /api/invites/sites; activeFrom/activeUntil \"\" clears them",
                 example = json!({"inviteShare": 0.5, "activeUntil": "2030-03-01T00:00:00Z"})),
    responses((status = 200, body = SiteOut, description = "The site as changed", example = json!({"siteId": 1, "name": "Shop survey", "surveyUrl": "https://survey.example/s/42",
                                "allowedOrigins": ["https://shop.example"], "inviteShare": 0.25, "closesMax": 3,
                                "activeFrom": null, "activeUntil": null, "paused": false, "retentionDays": 365,
                                "texts": {"title": "Got a minute?", "body": "Tell us how we are doing.",
                                          "yes": "Yes, open the survey", "no": "No, thanks", "close": "Close"},
                                "trigger": "load", "delaySeconds": 10, "scrollPercent": 50, "style": "modal",
                                "createdAt": "2030-01-02T09:30:00.000Z", "updatedAt": "2030-01-02T09:30:00.000Z",
                                "snippet": "<script src=\"https://throng.example/invite.js\" data-site=\"1\" async></script>"})),
              (status = 400, description = "malformed_json, invalid_path"),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden (not an admin token)"),
              (status = 404, description = "site_not_found"),
              (status = 415, description = "unsupported_media_type"),
              (status = 422, description = "invalid_field"),
              (status = 503, description = "store_unavailable")))]
pub async fn update_site(
    State(st): State<Arc<InvitesState>>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(site_id): ApiPath<i64>,
    ApiJson(input): ApiJson<SiteInput>,
) -> ApiResult<Json<SiteOut>> {
    caller.require(Role::ADMIN)?;
    change_site(&st, &headers, site_id, input).await
}

/// Pauses a site: no popup, no answers (admin)
///
/// Admin token. Pauses a site: its pages show no popup and take no answer until
/// it is resumed.
#[utoipa::path(post, path = "/api/invites/sites/{site_id}/pause", tag = "invites",
    params(("site_id" = i64, Path, example = 1)),
    security(("bearer" = [])),
    responses((status = 200, body = SiteOut, description = "The site, paused: no popup, no answers",
                                example = json!({"siteId": 1, "name": "Shop survey", "surveyUrl": "https://survey.example/s/42",
                                "allowedOrigins": ["https://shop.example"], "inviteShare": 0.25, "closesMax": 3,
                                "activeFrom": null, "activeUntil": null, "paused": true, "retentionDays": 365,
                                "texts": {"title": "Got a minute?", "body": "Tell us how we are doing.",
                                          "yes": "Yes, open the survey", "no": "No, thanks", "close": "Close"},
                                "trigger": "load", "delaySeconds": 10, "scrollPercent": 50, "style": "modal",
                                "createdAt": "2030-01-02T09:30:00.000Z", "updatedAt": "2030-01-05T08:00:00.000Z",
                                "snippet": "<script src=\"https://throng.example/invite.js\" data-site=\"1\" async></script>"})),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden (not an admin token)"),
              (status = 404, description = "site_not_found"),
              (status = 503, description = "store_unavailable")))]
pub async fn pause_site(
    State(st): State<Arc<InvitesState>>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(site_id): ApiPath<i64>,
) -> ApiResult<Json<SiteOut>> {
    set_paused(&st, &caller, &headers, site_id, true).await
}

/// Resumes a paused site (admin)
///
/// Admin token. Resumes a paused site: its pages show the popup again by its
/// settings.
#[utoipa::path(post, path = "/api/invites/sites/{site_id}/resume", tag = "invites",
    params(("site_id" = i64, Path, example = 1)),
    security(("bearer" = [])),
    responses((status = 200, body = SiteOut, description = "The site, no longer paused",
                                example = json!({"siteId": 1, "name": "Shop survey", "surveyUrl": "https://survey.example/s/42",
                                "allowedOrigins": ["https://shop.example"], "inviteShare": 0.25, "closesMax": 3,
                                "activeFrom": null, "activeUntil": null, "paused": false, "retentionDays": 365,
                                "texts": {"title": "Got a minute?", "body": "Tell us how we are doing.",
                                          "yes": "Yes, open the survey", "no": "No, thanks", "close": "Close"},
                                "trigger": "load", "delaySeconds": 10, "scrollPercent": 50, "style": "modal",
                                "createdAt": "2030-01-02T09:30:00.000Z", "updatedAt": "2030-01-05T08:00:00.000Z",
                                "snippet": "<script src=\"https://throng.example/invite.js\" data-site=\"1\" async></script>"})),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden (not an admin token)"),
              (status = 404, description = "site_not_found"),
              (status = 503, description = "store_unavailable")))]
pub async fn resume_site(
    State(st): State<Arc<InvitesState>>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(site_id): ApiPath<i64>,
) -> ApiResult<Json<SiteOut>> {
    set_paused(&st, &caller, &headers, site_id, false).await
}

/// A site's counts and conversion (admin)
///
/// Admin token. A site's counts: visitors, invitations shown, answers and the
/// conversion. Counts kept in each node's memory are added to the store every
/// few seconds, so the latest may lag slightly.
#[utoipa::path(get, path = "/api/invites/sites/{site_id}/stats", tag = "invites",
    params(("site_id" = i64, Path)),
    security(("bearer" = [])),
    responses((status = 200, body = SiteStats, description = "Answers are counted in their own transaction; visitors, invited and displays are flushed from each node's memory every --invites-flush-ms (this node's before answering).",
               example = json!({"siteId": 1, "visitors": 10000, "invited": 2500, "displays": 2600, "yes": 300,
                                "no": 900, "closes": 1100, "closedOut": 150, "conversion": 0.12})),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden (not an admin token)"),
              (status = 404, description = "site_not_found"),
              (status = 503, description = "store_unavailable")))]
pub async fn site_stats(
    State(st): State<Arc<InvitesState>>,
    caller: Caller,
    ApiPath(site_id): ApiPath<i64>,
) -> ApiResult<Json<SiteStats>> {
    caller.require(Role::ADMIN)?;
    entry(&st, site_id)?;
    sites::flush(&st.store, &st.sites, st.storage.counts_shard()).await;
    let c = store::counts(&st.store, site_id).await?;
    let conversion = (c.invited > 0).then(|| c.yes as f64 / c.invited as f64);
    Ok(Json(SiteStats {
        site_id,
        visitors: c.visitors,
        invited: c.invited,
        displays: c.displays,
        yes: c.yes,
        no: c.no,
        closes: c.closes,
        closed_out: c.closed_out,
        conversion,
    }))
}

/// Days a results read may span, and the span without `from`.
pub const RESULTS_DAYS_MAX: i64 = 366;
pub const RESULTS_DAYS_DEFAULT: i64 = 30;

/// The days of a site's results.
#[derive(Deserialize, Debug, Default, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ResultsQuery {
    /// First day, YYYY-MM-DD (UTC). Default: 29 days before `to`.
    #[param(example = "2030-01-01")]
    pub from: Option<String>,
    /// Last day, YYYY-MM-DD (UTC), at most 366 days after `from`. Default: today.
    #[param(example = "2030-01-30")]
    pub to: Option<String>,
}

/// Shown, yes, no and closed of one day (every day of the range, zeros
/// included).
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DayResults {
    /// YYYY-MM-DD (UTC).
    pub day: String,
    pub shown: i64,
    pub yes: i64,
    pub no: i64,
    /// Closes (each close of the popup).
    pub closed: i64,
}

/// Shown, yes, no and closed of one page over the range.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PageResults {
    /// The page's path; "(none)": checks that named no page; "(other)":
    /// pages past the 500 a node counts per day.
    pub page: String,
    pub shown: i64,
    pub yes: i64,
    pub no: i64,
    pub closed: i64,
}

/// Shown, yes, no and closed of one page on one day.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResultRow {
    pub day: String,
    pub page: String,
    pub shown: i64,
    pub yes: i64,
    pub no: i64,
    pub closed: i64,
}

/// A site's results over a range of days.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SiteResults {
    pub site_id: i64,
    pub from: String,
    pub to: String,
    /// Every day of the range, in order.
    pub days: Vec<DayResults>,
    /// The pages, most shown first.
    pub pages: Vec<PageResults>,
    /// By day, then page.
    pub rows: Vec<ResultRow>,
    /// Rows past 20,000 were left out (a shorter range reads them).
    pub truncated: bool,
}

fn invalid_query(message: impl Into<String>) -> ApiError {
    ApiError::bad_request("invalid_query", message)
}

/// The range of days a results read asks for.
fn results_range(q: &ResultsQuery, today: i32) -> ApiResult<(i32, i32)> {
    let day = |field: &str, v: &Option<String>| -> ApiResult<Option<i32>> {
        v.as_deref()
            .filter(|t| !t.is_empty())
            .map(|t| {
                parse_day(t).ok_or_else(|| {
                    invalid_query(format!("{field}: a day as YYYY-MM-DD, e.g. 2030-01-31"))
                })
            })
            .transpose()
    };
    let to = day("to", &q.to)?.unwrap_or(today);
    let from = day("from", &q.from)?.unwrap_or(to - (RESULTS_DAYS_DEFAULT as i32 - 1));
    if from > to {
        return Err(invalid_query("from: on or before to"));
    }
    if (to - from) as i64 >= RESULTS_DAYS_MAX {
        return Err(invalid_query(format!(
            "from..to: at most {RESULTS_DAYS_MAX} days; ask for a shorter range"
        )));
    }
    Ok((from, to))
}

/// A CSV field: quoted when it holds a comma, quote or line break, and a
/// leading `=`, `+`, `-` or `@` made text for spreadsheets.
fn csv_field(text: &str) -> String {
    let text = if text.starts_with(['=', '+', '-', '@']) {
        format!("'{text}")
    } else {
        text.to_string()
    };
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text
    }
}

/// A site's results by day and page: shown, yes, no, closed (admin)
///
/// Admin token. Invitations shown and answers (yes, no, closed) per day (UTC)
/// and page, between `from` and `to` (at most 366 days).
#[utoipa::path(get, path = "/api/invites/sites/{site_id}/results", tag = "invites",
    params(("site_id" = i64, Path, example = 1), ResultsQuery,
           ("Accept" = Option<String>, Header, description = "text/csv: the rows as CSV (day,page,shown,yes,no,closed)", example = "text/csv")),
    security(("bearer" = [])),
    responses((status = 200, description = "Invitations shown and answers (yes, no, each close) per day (UTC) and page. Counted in each node's memory and added every --invites-flush-ms (this node's before answering).",
               content((SiteResults = "application/json", example = json!({"siteId": 1, "from": "2030-01-01", "to": "2030-01-02",
                   "days": [{"day": "2030-01-01", "shown": 120, "yes": 14, "no": 40, "closed": 30},
                            {"day": "2030-01-02", "shown": 0, "yes": 0, "no": 0, "closed": 0}],
                   "pages": [{"page": "/checkout/done", "shown": 120, "yes": 14, "no": 40, "closed": 30}],
                   "rows": [{"day": "2030-01-01", "page": "/checkout/done", "shown": 120, "yes": 14, "no": 40, "closed": 30}],
                   "truncated": false})),
                       (String = "text/csv", example = "day,page,shown,yes,no,closed\n2030-01-01,/checkout/done,120,14,40,30\n"))),
              (status = 400, description = "invalid_query (from, to: YYYY-MM-DD, from on or before to, at most 366 days), invalid_path"),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden (not an admin token)"),
              (status = 404, description = "site_not_found"),
              (status = 503, description = "store_unavailable")))]
pub async fn site_results(
    State(st): State<Arc<InvitesState>>,
    caller: Caller,
    ApiPath(site_id): ApiPath<i64>,
    ApiQuery(q): ApiQuery<ResultsQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    caller.require(Role::ADMIN)?;
    entry(&st, site_id)?;
    let (from, to) = results_range(&q, st.clock.today())?;
    sites::flush(&st.store, &st.sites, st.storage.counts_shard()).await;
    let (rows, truncated) = store::daily_rows(&st.store, site_id, from, to).await?;
    let csv = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/csv"));
    if csv {
        let mut out = String::from("day,page,shown,yes,no,closed\n");
        for r in &rows {
            let [shown, yes, no, closed] = r.counts;
            out.push_str(&format!(
                "{},{},{shown},{yes},{no},{closed}\n",
                day_text(r.day),
                csv_field(&r.page)
            ));
        }
        let disposition = format!(
            "attachment; filename=\"invites-site-{site_id}-{}-{}.csv\"",
            day_text(from),
            day_text(to)
        );
        let mut res = (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/csv; charset=utf-8"),
            )],
            out,
        )
            .into_response();
        if let Ok(v) = HeaderValue::from_str(&disposition) {
            res.headers_mut().insert(header::CONTENT_DISPOSITION, v);
        }
        return Ok(res);
    }
    let mut days: Vec<DayResults> = (from..=to)
        .map(|d| DayResults {
            day: day_text(d),
            shown: 0,
            yes: 0,
            no: 0,
            closed: 0,
        })
        .collect();
    let mut pages: std::collections::HashMap<&str, [i64; 4]> = Default::default();
    for r in &rows {
        let d = &mut days[(r.day - from) as usize];
        let [shown, yes, no, closed] = r.counts;
        d.shown += shown;
        d.yes += yes;
        d.no += no;
        d.closed += closed;
        let p = pages.entry(r.page.as_str()).or_default();
        for (sum, n) in p.iter_mut().zip(r.counts) {
            *sum += n;
        }
    }
    let mut pages: Vec<PageResults> = pages
        .into_iter()
        .map(|(page, [shown, yes, no, closed])| PageResults {
            page: page.to_string(),
            shown,
            yes,
            no,
            closed,
        })
        .collect();
    pages.sort_by(|a, b| b.shown.cmp(&a.shown).then_with(|| a.page.cmp(&b.page)));
    let rows = rows
        .iter()
        .map(|r| {
            let [shown, yes, no, closed] = r.counts;
            ResultRow {
                day: day_text(r.day),
                page: r.page.clone(),
                shown,
                yes,
                no,
                closed,
            }
        })
        .collect();
    Ok(Json(SiteResults {
        site_id,
        from: day_text(from),
        to: day_text(to),
        days,
        pages,
        rows,
        truncated,
    })
    .into_response())
}

crate::schema_type!(
    /// A visitor id where one is required: an empty one names none (400
    /// `visitor_required`); on .../state it is a new visitor.
    VisitorText => ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .build()
);

crate::schema_type!(
    /// A visitor's number (`forget_visitor`).
    VisitorId => int_schema(1, i64::MAX)
);

/// A new site's settings: `surveyUrl` and `allowedOrigins` are required.
struct SiteCreate;

/// A site's changed settings: every field may be left out or null.
struct SiteChange;

crate::schema_type!(for SiteCreate => site_input(&["surveyUrl", "allowedOrigins"]));
crate::schema_type!(for SiteChange => site_input(&[]));

/// A site's settings as `SiteInput::apply` checks them; the `required`
/// fields are not nullable. One rule is not expressible in JSON Schema:
/// activeFrom before activeUntil (422), across two fields and, on PATCH,
/// the stored settings.
fn site_input(required: &[&'static str]) -> Object {
    use super::model::{
        ASK_AGAIN_DAYS_MAX, BAD_URL_CHARS_CLASS, BUTTON_CHARS_MAX, CAP_DAYS_MAX,
        CAP_INVITATIONS_MAX, CLOSES_MAX_LIMIT, DELAY_SECONDS_MAX, HOST_PATTERN, NAME_CHARS_MAX,
        ORIGINS_MAX, ORIGIN_CHARS_MAX, OWNER_CHARS_MAX, PAGE_PATTERNS_MAX, PATTERN_CHARS_MAX,
        PORT_PATTERN, RETENTION_DAYS_MAX, SCROLL_PERCENT_MAX, SCROLL_PERCENT_MIN, TEXT_CHARS_MAX,
        TITLE_CHARS_MAX, URL_CHARS_MAX,
    };
    let no_controls = || Some("^[^\\x00-\\x1f\\x7f-\\x9f]*$");
    let string = |max: usize, pattern: String| {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .max_length(Some(max))
            .pattern(Some(pattern))
    };
    let text = |max: usize| string_schema(1, max, no_controls().map(String::from));
    let time = || -> RefOr<Schema> {
        AnyOfBuilder::new()
            .item(format_schema(KnownFormat::DateTime))
            .item(enum_schema([""]))
            .item(ObjectBuilder::new().schema_type(Type::Null))
            .description(Some("RFC 3339; \"\" clears it"))
            .into()
    };
    let names = |names: &[&'static str]| {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(names.to_vec()))
            .build()
    };
    let survey_url = string(
        URL_CHARS_MAX,
        format!(
            "^(https?://{HOST_PATTERN}(:{PORT_PATTERN})?([/?#][^{BAD_URL_CHARS_CLASS}]*)?|/[^/{BAD_URL_CHARS_CLASS}][^{BAD_URL_CHARS_CLASS}]*)$"
        ),
    );
    let origins = ArrayBuilder::new()
        .items(string(
            ORIGIN_CHARS_MAX,
            format!("^[Hh][Tt][Tt][Pp][Ss]?://{HOST_PATTERN}(:{PORT_PATTERN})?/?$"),
        ))
        .max_items(Some(ORIGINS_MAX));
    let texts = closed_object(
        [
            ("title", text(TITLE_CHARS_MAX).into()),
            ("body", text(TEXT_CHARS_MAX).into()),
            ("yes", text(BUTTON_CHARS_MAX).into()),
            ("no", text(BUTTON_CHARS_MAX).into()),
            ("close", text(BUTTON_CHARS_MAX).into()),
        ],
        &["title", "body", "yes", "no", "close"],
    );
    let patterns = || {
        ArrayBuilder::new()
            .items(string(PATTERN_CHARS_MAX, "^/[!-~]*$".into()))
            .max_items(Some(PAGE_PATTERNS_MAX))
    };
    let fields: [(&'static str, RefOr<Schema>); 20] = [
        ("owner", text(OWNER_CHARS_MAX).into()),
        ("pagesInclude", patterns().into()),
        ("pagesExclude", patterns().into()),
        (
            "devices",
            ArrayBuilder::new()
                .items(names(&Device::ALL.map(Device::name)))
                .into(),
        ),
        (
            "askAgainAfterNoDays",
            small_int_schema(0, ASK_AGAIN_DAYS_MAX).into(),
        ),
        (
            "askAgainAfterClosesDays",
            small_int_schema(0, ASK_AGAIN_DAYS_MAX).into(),
        ),
        (
            "capInvitations",
            small_int_schema(0, CAP_INVITATIONS_MAX).into(),
        ),
        ("capDays", small_int_schema(1, CAP_DAYS_MAX).into()),
        (
            "name",
            string(NAME_CHARS_MAX, no_controls().unwrap().into())
                .description(Some("\"\" is Survey"))
                .into(),
        ),
        ("surveyUrl", survey_url.into()),
        ("allowedOrigins", origins.into()),
        (
            "inviteShare",
            ObjectBuilder::new()
                .schema_type(Type::Number)
                .minimum(Some(0))
                .maximum(Some(1))
                .into(),
        ),
        ("closesMax", small_int_schema(1, CLOSES_MAX_LIMIT).into()),
        (
            "paused",
            ObjectBuilder::new().schema_type(Type::Boolean).into(),
        ),
        (
            "retentionDays",
            small_int_schema(1, RETENTION_DAYS_MAX).into(),
        ),
        (
            "trigger",
            names(
                &[
                    Trigger::Load,
                    Trigger::Delay,
                    Trigger::Scroll,
                    Trigger::ExitIntent,
                ]
                .map(Trigger::name),
            )
            .into(),
        ),
        (
            "delaySeconds",
            small_int_schema(0, DELAY_SECONDS_MAX).into(),
        ),
        (
            "scrollPercent",
            small_int_schema(SCROLL_PERCENT_MIN, SCROLL_PERCENT_MAX).into(),
        ),
        (
            "style",
            names(&[Style::Modal, Style::SlideIn].map(Style::name)).into(),
        ),
        ("texts", texts.into()),
    ];
    let fields = fields.into_iter().map(|(name, schema)| {
        if required.contains(&name) {
            (name, schema)
        } else {
            (name, nullable(schema).into())
        }
    });
    closed_object(
        fields.chain([("activeFrom", time()), ("activeUntil", time())]),
        required,
    )
    .build()
}
