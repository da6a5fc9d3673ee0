//! The routes of comments on a host's site, beside the reviews' own
//! (`http.rs`): who a signed-in caller is on a course (their first sign-in
//! creates the user from the token's `name` claim) and their own reviews
//! with their status; readers' reports and helpful votes; moderation (a
//! comment's hiding, restoring or approving, removal, reports dismissed;
//! bans; the queue); and the host's registrations of providers, courses
//! and enrolments, one by one or as CSV.
//!
//! Error codes beside `http.rs`'s: 403 `banned`, `not_enrolled`,
//! `unknown_user`; 404 `user_not_found`; 409 `already_so`; 415
//! `unsupported_media_type`; 422 `invalid_csv` (naming the line),
//! `not_votable`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;

use super::model::{
    caller_id, name_claim, parse_id, text, COURSE_TITLE_CHARS_MAX, ID_MIN, NAME_CHARS_MAX,
    NAME_CLAIM, REASON_CHARS_MAX,
};
use super::store::{
    BanOutcome, HelpfulOutcome, ImportRows, MineItem, ModAction, ModOutcome, Moderation,
    ParkedCommentNotification, QueueItem, ReportOutcome,
};
use super::CommentsState;
use crate::base::clock::now_ms;
use crate::platform::auth::{Caller, TokenKeys};
use crate::platform::error::{ApiError, ApiResult};
use crate::platform::extract::{ApiJson, ApiPath, ApiQuery};
use crate::platform::openapi::{closed_object, int_schema, text_schema};

/// A user's own reviews shown at most (`GET /api/comments/mine`).
pub const MINE_MAX: i64 = 50;
/// Queue items per page at most, and by default.
pub const QUEUE_PAGE_MAX: i64 = 100;
pub const QUEUE_PAGE_DEFAULT: i64 = 20;
/// Rows of one CSV import at most (the body limit, `--body-limit-bytes`,
/// bounds it too: import large sets in several requests).
pub const IMPORT_ROWS_MAX: usize = 20_000;

pub fn routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<CommentsState>: axum::extract::FromRef<S>,
    Arc<TokenKeys>: axum::extract::FromRef<S>,
    Arc<crate::platform::session::Sessions>: axum::extract::FromRef<S>,
{
    let p = |m: axum::routing::MethodRouter<S>| m.options(|| async { StatusCode::NO_CONTENT });
    let no_store = || axum::middleware::map_response(crate::platform::headers::no_store);
    OpenApiRouter::default()
        .routes(routes!(me).map(|m| p(m).layer(no_store())))
        .routes(routes!(mine).map(|m| p(m).layer(no_store())))
        .routes(routes!(report).map(p))
        .routes(routes!(helpful).map(p))
        .routes(routes!(moderate).map(p))
        .routes(routes!(ban, unban).map(p))
        .routes(routes!(queue).map(|m| p(m).layer(no_store())))
        .routes(routes!(put_provider).map(p))
        .routes(routes!(put_course).map(p))
        .routes(routes!(enrol, unenrol).map(p))
        .routes(routes!(import).map(p))
        .routes(routes!(parked_notifications).map(|m| p(m).layer(no_store())))
}

/// The token's display-name claim, read from the request's bearer token
/// (already verified by `Caller`): the name a first sign-in creates the
/// user with.
pub fn sign_in_name(keys: &TokenKeys, headers: &HeaderMap) -> ApiResult<Option<String>> {
    #[derive(Deserialize)]
    struct Named {
        #[serde(default)]
        name: Option<serde_json::Value>,
    }
    let Some(token) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    else {
        return Ok(None);
    };
    let named: Named = keys.verify_as(token.trim())?;
    name_claim(named.name.as_ref())
}

pub fn unknown_user() -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "unknown_user",
        format!(
            "this user has not signed in before: the host's token needs a '{NAME_CLAIM}' claim \
             (the name shown with their reviews) the first time"
        ),
    )
}

pub fn banned() -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "banned",
        "a moderator has suspended this account from posting",
    )
}

fn comment_not_found(id: i64) -> ApiError {
    ApiError::not_found("comment_not_found", format!("no comment with id {id}"))
}

fn course_not_found(id: i64) -> ApiError {
    ApiError::not_found("course_not_found", format!("no course with id {id}"))
}

/// The token's subject as a moderator's name in events.
fn moderator_of(caller: &Caller) -> ApiResult<String> {
    Ok(caller.require(super::MODERATOR)?.sub.clone())
}

// ------------------------------------------------------------ signed in

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct CourseQuery {
    /// The course the widget shows.
    #[param(value_type = Option<super::http::Id>, inline)]
    course_id: Option<i64>,
}

/// Who the caller is, and what they may do on a course.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeOut {
    /// The token's subject.
    pub sub: String,
    /// The token's role.
    pub role: String,
    /// The name shown with their reviews (users and providers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    pub banned: bool,
    /// May review the course (a user enrolled on it, or reviews are open).
    pub can_review: bool,
    /// May reply to the course's reviews (its provider).
    pub can_reply: bool,
    /// May report reviews and vote them helpful (a user not banned).
    pub can_react: bool,
    /// May moderate (a moderator or admin).
    pub can_moderate: bool,
}

/// Signs a caller in and says what they may do on a course
///
/// A token of any role. Says who the caller is and what they may do on the
/// course (review, reply, moderate); a user's first call creates them from the
/// token's `name` claim.
#[utoipa::path(get, path = "/api/comments/me", tag = "comments", params(CourseQuery),
    security(("bearer" = [])),
    responses((status = 200, body = MeOut, description = "The caller; a user's first sign-in creates them \
                from the token's name claim",
               example = json!({"sub": "500001", "role": "user", "displayName": "Mia K.", "banned": false,
                                "canReview": true, "canReply": false, "canReact": true, "canModerate": false})),
              (status = 401, description = "missing_token, invalid_token or token_expired"),
              (status = 403, description = "unknown_user (a user's first sign-in needs the name claim)"),
              (status = 422, description = "invalid_field (courseId: a positive integer)")))]
pub async fn me(
    State(st): State<Arc<CommentsState>>,
    caller: Caller,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<CourseQuery>,
) -> ApiResult<Json<MeOut>> {
    let course_id = q.course_id.map(|c| parse_id("courseId", c)).transpose()?;
    let claims = &caller.0;
    let mut out = MeOut {
        sub: claims.sub.clone(),
        role: claims.role.clone(),
        display_name: None,
        banned: false,
        can_review: false,
        can_reply: false,
        can_react: false,
        can_moderate: caller.require(super::MODERATOR).is_ok(),
    };
    if claims.role == super::USER {
        let user_id = caller_id(claims, super::USER)?;
        let name = sign_in_name(&st.keys, &headers)?;
        let who = st
            .storage
            .sign_in(user_id, name, course_id.unwrap_or(0))
            .await?;
        if who.display_name.is_none() {
            return Err(unknown_user());
        }
        out.display_name = who.display_name;
        out.banned = who.banned;
        out.can_react = !who.banned;
        out.can_review = !who.banned && course_id.is_some() && (who.enrolled || st.reviews_open);
    } else if claims.role == super::PROVIDER {
        let provider_id = caller_id(claims, super::PROVIDER)?;
        if let Some(course_id) = course_id {
            let course = st.storage.course(course_id).await?;
            out.can_reply = course.is_some_and(|c| c.provider_id == provider_id);
        }
    }
    Ok(Json(out))
}

/// One's own reviews on a course, with their status
///
/// A user token. The caller's own reviews on a course, newest first (at most
/// 50), including held and hidden ones, each with its status.
#[utoipa::path(get, path = "/api/comments/mine", tag = "comments", params(CourseQuery),
    security(("bearer" = [])),
    responses((status = 200, body = Vec<MineItem>, description = "Newest first (at most 50), held and hidden ones too",
               example = json!([{"commentId": 42, "commentType": "Course", "rating": 5, "title": "Clear",
                                 "remarks": "Good.", "createdDate": "2030-01-02T09:30:00.000Z",
                                 "status": "held", "helpful": 0}])),
              (status = 401, description = "missing_token, invalid_token or token_expired"),
              (status = 403, description = "forbidden (not a user token)"),
              (status = 422, description = "invalid_field (courseId is required)")))]
pub async fn mine(
    State(st): State<Arc<CommentsState>>,
    caller: Caller,
    ApiQuery(q): ApiQuery<CourseQuery>,
) -> ApiResult<Json<Vec<MineItem>>> {
    let user_id = caller_id(&caller.0, super::USER)?;
    let Some(course_id) = q.course_id else {
        return Err(ApiError::invalid_field(
            "courseId: the course whose reviews to show",
        ));
    };
    let course_id = parse_id("courseId", course_id)?;
    Ok(Json(st.storage.mine(course_id, user_id, MINE_MAX).await?))
}

// ------------------------------------------------------- reports, votes

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReasonRequest {
    pub reason: String,
}

crate::schema_type!(
    for ReasonRequest => closed_object(
        [("reason", text_schema(1, REASON_CHARS_MAX, true).into())],
        &["reason"],
    ).build()
);

fn reason_of(r: &str) -> ApiResult<String> {
    text("reason", r, 1, REASON_CHARS_MAX, true)
}

#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReportOut {
    pub comment_id: i64,
    /// This reader's first report of it (a second one is not counted).
    pub counted: bool,
    /// Reports moderators have not dealt with yet.
    pub reports_open: i64,
}

/// Reports a comment to the moderators (once per reader)
///
/// A user token. Reports a review or reply to the moderators, with a reason.
/// Each reader counts once: a second report answers 200 and is not counted.
#[utoipa::path(post, path = "/api/comments/{comment_id}/reports", tag = "comments",
    params(super::http::CommentPath), security(("bearer" = [])),
    request_body(content = inline(ReasonRequest), description = "{reason}",
                 example = json!({"reason": "Spam: an advert for another course"})),
    responses((status = 201, body = ReportOut, description = "Reported",
               example = json!({"commentId": 42, "counted": true, "reportsOpen": 1})),
              (status = 200, body = ReportOut, description = "Already reported by this reader: not counted again",
               example = json!({"commentId": 42, "counted": false, "reportsOpen": 1})),
              (status = 401, description = "missing_token, invalid_token or token_expired"),
              (status = 403, description = "forbidden (not a user token), unknown_user or banned"),
              (status = 404, description = "comment_not_found"),
              (status = 422, description = "invalid_field")))]
pub async fn report(
    State(st): State<Arc<CommentsState>>,
    ApiPath(comment_id): ApiPath<i64>,
    caller: Caller,
    headers: HeaderMap,
    ApiJson(req): ApiJson<ReasonRequest>,
) -> ApiResult<Response> {
    let user_id = caller_id(&caller.0, super::USER)?;
    let reason = reason_of(&req.reason)?;
    if comment_id < ID_MIN {
        return Err(comment_not_found(comment_id));
    }
    let name = sign_in_name(&st.keys, &headers)?;
    match st
        .storage
        .report(comment_id, user_id, name, reason, now_ms())
        .await?
    {
        ReportOutcome::Filed {
            counted,
            reports_open,
        } => {
            if counted {
                st.notify.notify_one();
            }
            let status = if counted {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            let out = ReportOut {
                comment_id,
                counted,
                reports_open,
            };
            Ok((status, Json(out)).into_response())
        }
        ReportOutcome::CommentNotFound => Err(comment_not_found(comment_id)),
        ReportOutcome::Banned => Err(banned()),
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HelpfulOut {
    pub comment_id: i64,
    /// This reader's first vote on it (a second one is not counted).
    pub counted: bool,
    /// Readers who found it helpful, as this vote's write read it (a
    /// repeat's answer may not count a vote committing beside it).
    pub helpful: i64,
}

/// Votes a review helpful (once per reader)
///
/// A user token. Counts the review as helpful, once per reader; a second vote
/// answers 200 and is not counted. A reply or one's own review cannot be voted.
#[utoipa::path(post, path = "/api/comments/{comment_id}/helpful", tag = "comments",
    params(super::http::CommentPath), security(("bearer" = [])),
    responses((status = 201, body = HelpfulOut, description = "Counted",
               example = json!({"commentId": 42, "counted": true, "helpful": 3})),
              (status = 200, body = HelpfulOut, description = "Already voted by this reader: not counted again",
               example = json!({"commentId": 42, "counted": false, "helpful": 3})),
              (status = 401, description = "missing_token, invalid_token or token_expired"),
              (status = 403, description = "forbidden (not a user token), unknown_user or banned"),
              (status = 404, description = "comment_not_found"),
              (status = 422, description = "not_votable (a reply, or one's own review)")))]
pub async fn helpful(
    State(st): State<Arc<CommentsState>>,
    ApiPath(comment_id): ApiPath<i64>,
    caller: Caller,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let user_id = caller_id(&caller.0, super::USER)?;
    if comment_id < ID_MIN {
        return Err(comment_not_found(comment_id));
    }
    let name = sign_in_name(&st.keys, &headers)?;
    match st.vote_helpful(comment_id, user_id, name, now_ms()).await? {
        HelpfulOutcome::Voted {
            counted, helpful, ..
        } => {
            let status = if counted {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            let out = HelpfulOut {
                comment_id,
                counted,
                helpful,
            };
            Ok((status, Json(out)).into_response())
        }
        HelpfulOutcome::CommentNotFound => Err(comment_not_found(comment_id)),
        HelpfulOutcome::NotVotable(why) => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "not_votable",
            why,
        )),
        HelpfulOutcome::Banned => Err(banned()),
    }
}

// ------------------------------------------------------------ moderation

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModerationRequest {
    pub action: String,
    pub reason: String,
}

crate::schema_type!(
    for ModerationRequest => closed_object(
        [
            ("action", ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(ModAction::ALL.map(ModAction::as_str)))
                .description(Some("hide, restore (a hidden comment, or approve a held one), remove, dismiss (close its reports)"))
                .into()),
            ("reason", text_schema(1, REASON_CHARS_MAX, true).into()),
        ],
        &["action", "reason"],
    ).build()
);

#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModerationOut {
    pub comment_id: i64,
    pub course_id: i64,
    /// visible, held, hidden, or removed.
    pub status: String,
}

/// Hides, restores (approves), removes a review or reply, or dismisses its reports
///
/// A moderator or admin token. Hides, restores, or removes a review or reply,
/// or dismisses its reports. Listings and the rating follow at once; an event
/// records who did what.
#[utoipa::path(post, path = "/api/comments/{comment_id}/moderation", tag = "comments",
    params(super::http::CommentPath), security(("bearer" = [])),
    request_body(content = inline(ModerationRequest), description = "{action, reason}",
                 example = json!({"action": "hide", "reason": "Personal attack on the instructor"})),
    responses((status = 200, body = ModerationOut, description = "Done: the listing and the rating follow at once, \
                on every node within a second; an event records it",
               example = json!({"commentId": 42, "courseId": 1, "status": "hidden"})),
              (status = 401, description = "missing_token, invalid_token or token_expired"),
              (status = 403, description = "forbidden (not a moderator or admin token)"),
              (status = 404, description = "comment_not_found"),
              (status = 409, description = "already_so (hiding a hidden comment, restoring a listed one)"),
              (status = 422, description = "invalid_field")))]
pub async fn moderate(
    State(st): State<Arc<CommentsState>>,
    ApiPath(comment_id): ApiPath<i64>,
    caller: Caller,
    ApiJson(req): ApiJson<ModerationRequest>,
) -> ApiResult<Json<ModerationOut>> {
    let moderator = moderator_of(&caller)?;
    let action = ModAction::ALL
        .into_iter()
        .find(|a| a.as_str() == req.action)
        .ok_or_else(|| ApiError::invalid_field("action: one of hide, restore, remove, dismiss"))?;
    let reason = reason_of(&req.reason)?;
    if comment_id < ID_MIN {
        return Err(comment_not_found(comment_id));
    }
    let m = Moderation {
        comment_id,
        moderator,
        action,
        reason,
        at_ms: now_ms(),
    };
    match st.moderate(m).await? {
        ModOutcome::Done { course_id, status } => Ok(Json(ModerationOut {
            comment_id,
            course_id,
            status: status.map(|s| s.as_str()).unwrap_or("removed").to_string(),
        })),
        ModOutcome::CommentNotFound => Err(comment_not_found(comment_id)),
        ModOutcome::AlreadySo(status) => Err(ApiError::conflict(
            "already_so",
            format!("the comment is {} already", status.as_str()),
        )),
    }
}

/// A user in a path.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct UserPath {
    #[param(value_type = super::http::Id, inline, example = 500001)]
    user_id: i64,
}

fn ban_answer(outcome: BanOutcome, user_id: i64) -> ApiResult<StatusCode> {
    match outcome {
        BanOutcome::Done => Ok(StatusCode::NO_CONTENT),
        BanOutcome::UserNotFound => Err(ApiError::not_found(
            "user_not_found",
            format!("no user with id {user_id} has signed in here"),
        )),
    }
}

/// Bans a user from posting, editing, reporting and voting
///
/// A moderator or admin token. Bans a user from posting, editing, reporting and
/// voting, with a reason (banning again replaces it). Their existing reviews
/// stay as they are.
#[utoipa::path(put, path = "/api/comments/users/{user_id}/ban", tag = "comments",
    params(UserPath), security(("bearer" = [])),
    request_body(content = inline(ReasonRequest), description = "{reason}",
                 example = json!({"reason": "Repeated spam"})),
    responses((status = 204, description = "Banned (again: the reason replaced); an event records it"),
              (status = 401, description = "missing_token, invalid_token or token_expired"),
              (status = 403, description = "forbidden (not a moderator or admin token)"),
              (status = 404, description = "user_not_found"),
              (status = 422, description = "invalid_field")))]
pub async fn ban(
    State(st): State<Arc<CommentsState>>,
    ApiPath(user_id): ApiPath<i64>,
    caller: Caller,
    ApiJson(req): ApiJson<ReasonRequest>,
) -> ApiResult<StatusCode> {
    let moderator = moderator_of(&caller)?;
    let reason = reason_of(&req.reason)?;
    let user_id = parse_id("userId", user_id)?;
    let outcome = st
        .storage
        .ban(user_id, moderator, Some(reason), now_ms())
        .await?;
    ban_answer(outcome, user_id)
}

/// Lifts a user's ban
///
/// A moderator or admin token. Lifts a user's ban; they may post again.
#[utoipa::path(delete, path = "/api/comments/users/{user_id}/ban", tag = "comments",
    params(UserPath), security(("bearer" = [])),
    responses((status = 204, description = "Not banned (an event records it)"),
              (status = 401, description = "missing_token, invalid_token or token_expired"),
              (status = 403, description = "forbidden (not a moderator or admin token)"),
              (status = 404, description = "user_not_found"),
              (status = 422, description = "invalid_field (userId: a positive integer)")))]
pub async fn unban(
    State(st): State<Arc<CommentsState>>,
    ApiPath(user_id): ApiPath<i64>,
    caller: Caller,
) -> ApiResult<StatusCode> {
    let moderator = moderator_of(&caller)?;
    let user_id = parse_id("userId", user_id)?;
    let outcome = st.storage.ban(user_id, moderator, None, now_ms()).await?;
    ban_answer(outcome, user_id)
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct QueueParams {
    /// Items after this comment id (the last one of the previous page).
    #[param(value_type = Option<QueueAfter>, inline)]
    after: Option<i64>,
    /// Items per page (default 20).
    #[param(value_type = Option<QueueLimit>, inline)]
    limit: Option<i64>,
}

crate::schema_type!(QueueAfter => int_schema(0, i64::MAX));
crate::schema_type!(QueueLimit => int_schema(1, QUEUE_PAGE_MAX));

/// The moderation queue: held comments and comments with open reports
///
/// A moderator or admin token. Held comments and comments with open reports,
/// oldest first. Page with `after` set to the last commentId read.
#[utoipa::path(get, path = "/api/comments/moderation/queue", tag = "comments",
    params(QueueParams), security(("bearer" = [])),
    responses((status = 200, body = Vec<QueueItem>, description = "Oldest first; page with after = the last commentId",
               example = json!([{"commentId": 42, "courseId": 1, "userId": 500001, "displayName": "Mia K.",
                                 "commentType": "Course", "rating": 1, "title": "Cheap pills",
                                 "remarks": "see pills.example.com", "createdDate": "2030-01-02T09:30:00.000Z",
                                 "status": "held", "note": "held by the filter: it has a link",
                                 "reportsOpen": 0, "reportReasons": [], "authorBanned": false}])),
              (status = 401, description = "missing_token, invalid_token or token_expired"),
              (status = 403, description = "forbidden (not a moderator or admin token)"),
              (status = 422, description = "invalid_field")))]
pub async fn queue(
    State(st): State<Arc<CommentsState>>,
    caller: Caller,
    ApiQuery(q): ApiQuery<QueueParams>,
) -> ApiResult<Json<Vec<QueueItem>>> {
    moderator_of(&caller)?;
    let after = q.after.unwrap_or(0);
    if after < 0 {
        return Err(ApiError::invalid_field("after: 0 or more"));
    }
    let limit = q.limit.unwrap_or(QUEUE_PAGE_DEFAULT);
    if !(1..=QUEUE_PAGE_MAX).contains(&limit) {
        return Err(ApiError::invalid_field(format!(
            "limit: 1 to {QUEUE_PAGE_MAX}"
        )));
    }
    Ok(Json(st.storage.queue(after, limit).await?))
}

// ------------------------------------------------------------------ host

fn host(caller: &Caller) -> ApiResult<()> {
    caller.require(super::HOST).map(|_| ())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderRequest {
    pub name: String,
    #[serde(default)]
    pub premoderate: Option<bool>,
}

crate::schema_type!(
    for ProviderRequest => closed_object(
        [
            ("name", text_schema(1, NAME_CHARS_MAX, false).into()),
            ("premoderate", ObjectBuilder::new().schema_type(utoipa::openapi::schema::SchemaType::from_iter([Type::Boolean, Type::Null]))
                .description(Some("hold its courses' new reviews until a moderator approves them (default false)")).into()),
        ],
        &["name"],
    ).build()
);

#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderOut {
    pub provider_id: i64,
    pub name: String,
    pub premoderate: bool,
}

/// A provider in a path.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct ProviderPath {
    #[param(value_type = super::http::Id, inline, example = 3)]
    provider_id: i64,
}

/// Registers or updates a course provider (the host)
///
/// A host or admin token. Registers a course provider or changes its name; a
/// provider's token carries this id as its `sub`.
#[utoipa::path(put, path = "/api/comments/host/providers/{provider_id}", tag = "comments",
    params(ProviderPath), security(("bearer" = [])),
    request_body(content = inline(ProviderRequest), description = "{name, premoderate?}",
                 example = json!({"name": "Northwind Academy", "premoderate": false})),
    responses((status = 200, body = ProviderOut, description = "Registered; its token's sub is this id",
               example = json!({"providerId": 3, "name": "Northwind Academy", "premoderate": false})),
              (status = 401, description = "missing_token, invalid_token or token_expired"),
              (status = 403, description = "forbidden (not a host or admin token)"),
              (status = 422, description = "invalid_field")))]
pub async fn put_provider(
    State(st): State<Arc<CommentsState>>,
    ApiPath(provider_id): ApiPath<i64>,
    caller: Caller,
    ApiJson(req): ApiJson<ProviderRequest>,
) -> ApiResult<Json<ProviderOut>> {
    host(&caller)?;
    let provider_id = parse_id("providerId", provider_id)?;
    let name = text("name", &req.name, 1, NAME_CHARS_MAX, false)?;
    let premoderate = req.premoderate.unwrap_or(false);
    st.storage
        .put_provider(provider_id, name.clone(), premoderate)
        .await?;
    Ok(Json(ProviderOut {
        provider_id,
        name,
        premoderate,
    }))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CourseRequest {
    #[serde(deserialize_with = "crate::platform::extract::whole::int")]
    pub provider_id: i64,
    pub title: String,
    #[serde(default)]
    pub premoderate: Option<bool>,
}

crate::schema_type!(
    for CourseRequest => closed_object(
        [
            ("providerId", int_schema(ID_MIN, i64::MAX).into()),
            ("title", text_schema(1, COURSE_TITLE_CHARS_MAX, false).into()),
            ("premoderate", ObjectBuilder::new().schema_type(utoipa::openapi::schema::SchemaType::from_iter([Type::Boolean, Type::Null]))
                .description(Some("hold its new reviews until a moderator approves them (default false)")).into()),
        ],
        &["providerId", "title"],
    ).build()
);

#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CourseOut {
    pub course_id: i64,
    pub provider_id: i64,
    pub title: String,
    pub premoderate: bool,
}

/// Registers or updates a course (the host)
///
/// A host or admin token. Registers a course or changes its name and provider;
/// users enrolled on it may then review it.
#[utoipa::path(put, path = "/api/comments/host/courses/{course_id}", tag = "comments",
    params(super::http::CoursePath), security(("bearer" = [])),
    request_body(content = inline(CourseRequest), description = "{providerId, title, premoderate?}",
                 example = json!({"providerId": 3, "title": "Rust for services", "premoderate": false})),
    responses((status = 200, body = CourseOut, description = "Registered",
               example = json!({"courseId": 1, "providerId": 3, "title": "Rust for services", "premoderate": false})),
              (status = 401, description = "missing_token, invalid_token or token_expired"),
              (status = 403, description = "forbidden (not a host or admin token)"),
              (status = 422, description = "invalid_field")))]
pub async fn put_course(
    State(st): State<Arc<CommentsState>>,
    ApiPath(course_id): ApiPath<i64>,
    caller: Caller,
    ApiJson(req): ApiJson<CourseRequest>,
) -> ApiResult<Json<CourseOut>> {
    host(&caller)?;
    let course_id = parse_id("courseId", course_id)?;
    let provider_id = parse_id("providerId", req.provider_id)?;
    let title = text("title", &req.title, 1, COURSE_TITLE_CHARS_MAX, false)?;
    let premoderate = req.premoderate.unwrap_or(false);
    st.storage
        .put_course(course_id, provider_id, title.clone(), premoderate)
        .await?;
    Ok(Json(CourseOut {
        course_id,
        provider_id,
        title,
        premoderate,
    }))
}

/// A course's enrolment in a path.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct EnrolmentPath {
    #[param(value_type = super::http::Id, inline, example = 1)]
    course_id: i64,
    #[param(value_type = super::http::Id, inline, example = 500001)]
    user_id: i64,
}

async fn set_enrolment(
    st: &CommentsState,
    caller: &Caller,
    (course_id, user_id): (i64, i64),
    on: bool,
) -> ApiResult<StatusCode> {
    host(caller)?;
    let course_id = parse_id("courseId", course_id)?;
    let user_id = parse_id("userId", user_id)?;
    if st.storage.enrol(course_id, user_id, on).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(course_not_found(course_id))
    }
}

/// Enrols a user on a course, so they may review it (the host)
///
/// A host or admin token. Enrols a user on a course, so they may review it.
/// Enrolling again changes nothing.
#[utoipa::path(put, path = "/api/comments/host/courses/{course_id}/enrolments/{user_id}", tag = "comments",
    params(EnrolmentPath), security(("bearer" = [])),
    responses((status = 204, description = "Enrolled (already: no change)"),
              (status = 401, description = "missing_token, invalid_token or token_expired"),
              (status = 403, description = "forbidden (not a host or admin token)"),
              (status = 404, description = "course_not_found"),
              (status = 422, description = "invalid_field (userId: a positive integer)")))]
pub async fn enrol(
    State(st): State<Arc<CommentsState>>,
    ApiPath(path): ApiPath<(i64, i64)>,
    caller: Caller,
) -> ApiResult<StatusCode> {
    set_enrolment(&st, &caller, path, true).await
}

/// Ends a user's enrolment on a course (their reviews stay)
///
/// A host or admin token. Ends a user's enrolment on a course: they may no
/// longer review it, and their reviews stay.
#[utoipa::path(delete, path = "/api/comments/host/courses/{course_id}/enrolments/{user_id}", tag = "comments",
    params(EnrolmentPath), security(("bearer" = [])),
    responses((status = 204, description = "Not enrolled"),
              (status = 401, description = "missing_token, invalid_token or token_expired"),
              (status = 403, description = "forbidden (not a host or admin token)"),
              (status = 404, description = "course_not_found"),
              (status = 422, description = "invalid_field (userId: a positive integer)")))]
pub async fn unenrol(
    State(st): State<Arc<CommentsState>>,
    ApiPath(path): ApiPath<(i64, i64)>,
    caller: Caller,
) -> ApiResult<StatusCode> {
    set_enrolment(&st, &caller, path, false).await
}

/// What an import holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportKind {
    Providers,
    Courses,
    Enrolments,
}

impl ImportKind {
    const ALL: [ImportKind; 3] = [
        ImportKind::Providers,
        ImportKind::Courses,
        ImportKind::Enrolments,
    ];
    fn as_str(self) -> &'static str {
        match self {
            ImportKind::Providers => "providers",
            ImportKind::Courses => "courses",
            ImportKind::Enrolments => "enrolments",
        }
    }
    /// The header line (the optional last column in brackets).
    fn header(self) -> &'static [&'static str] {
        match self {
            ImportKind::Providers => &["provider_id", "name", "premoderate"],
            ImportKind::Courses => &["course_id", "provider_id", "title", "premoderate"],
            ImportKind::Enrolments => &["course_id", "user_id"],
        }
    }
    /// Whether the last column may be left out.
    fn last_optional(self) -> bool {
        self != ImportKind::Enrolments
    }
}

crate::schema_type!(
    /// What a CSV import holds.
    ImportKindName => ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(ImportKind::ALL.map(ImportKind::as_str)))
        .build()
);

/// An import's kind in a path.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct ImportPath {
    #[param(value_type = ImportKindName, inline, example = "enrolments")]
    kind: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImportOut {
    /// providers, courses or enrolments.
    pub kind: String,
    /// Rows written.
    pub rows: u64,
}

/// Imports providers, courses or enrolments from CSV, all or nothing (the host)
///
/// A host or admin token. Imports providers, courses or enrolments (the path's
/// `kind`) from a CSV file (Content-Type: text/csv) in one transaction: an
/// error names its line, and nothing is written.
#[utoipa::path(post, path = "/api/comments/host/import/{kind}", tag = "comments",
    params(ImportPath), security(("bearer" = [])),
    request_body(content = String, content_type = "text/csv",
                 description = "A header line, then a row per record: providers `provider_id,name[,premoderate]`, \
                    courses `course_id,provider_id,title[,premoderate]`, enrolments `course_id,user_id`. \
                    Fields may be quoted (\"a, b\"); premoderate is true/false, yes/no or 1/0. At most 20,000 rows \
                    and the body limit.",
                 example = "course_id,user_id\n1,500001\n1,500002\n"),
    responses((status = 200, body = ImportOut, description = "Every row written, in one transaction",
               example = json!({"kind": "enrolments", "rows": 2})),
              (status = 401, description = "missing_token, invalid_token or token_expired"),
              (status = 403, description = "forbidden (not a host or admin token)"),
              (status = 404, description = "route_not_found (an unknown kind)"),
              (status = 415, description = "unsupported_media_type (send Content-Type: text/csv)"),
              (status = 422, description = "invalid_csv: the message names the line; nothing was written")))]
pub async fn import(
    State(st): State<Arc<CommentsState>>,
    ApiPath(kind): ApiPath<String>,
    caller: Caller,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<Json<ImportOut>> {
    host(&caller)?;
    let Some(kind) = ImportKind::ALL.into_iter().find(|k| k.as_str() == kind) else {
        return Err(ApiError::not_found(
            "route_not_found",
            "import providers, courses or enrolments",
        ));
    };
    let csv = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("text/csv"));
    if !csv {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the rows as CSV with Content-Type: text/csv",
        ));
    }
    let text = std::str::from_utf8(&body)
        .map_err(|_| invalid_csv(0, "the body is not UTF-8 text".into()))?;
    let (rows, lines) = parse_import(kind, text)?;
    match st.storage.import(rows).await? {
        Ok(n) => Ok(Json(ImportOut {
            kind: kind.as_str().into(),
            rows: n,
        })),
        Err(i) => Err(invalid_csv(
            lines[i],
            "course_id: no such course; register it first (PUT /api/comments/host/courses/{id} or \
             an import of courses); nothing was written"
                .into(),
        )),
    }
}

fn invalid_csv(line: usize, message: String) -> ApiError {
    let at = if line == 0 {
        String::new()
    } else {
        format!("line {line}: ")
    };
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_csv",
        format!("{at}{message}"),
    )
}

/// The rows of an import, checked, and each row's line number.
fn parse_import(kind: ImportKind, body: &str) -> ApiResult<(ImportRows, Vec<usize>)> {
    let records = parse_csv(body.strip_prefix('\u{feff}').unwrap_or(body))?;
    let mut it = records.into_iter();
    let Some((_, head)) = it.next() else {
        return Err(invalid_csv(
            0,
            format!(
                "empty; the first line is the header {}",
                kind.header().join(",")
            ),
        ));
    };
    let want = kind.header();
    let head: Vec<String> = head.iter().map(|h| h.trim().to_lowercase()).collect();
    let head_ok = head == want || (kind.last_optional() && head == want[..want.len() - 1]);
    if !head_ok {
        return Err(invalid_csv(
            1,
            format!(
                "the header must be {}{}",
                if kind.last_optional() {
                    want[..want.len() - 1].join(",")
                } else {
                    want.join(",")
                },
                if kind.last_optional() {
                    format!(" (optionally ,{})", want[want.len() - 1])
                } else {
                    String::new()
                }
            ),
        ));
    }
    let columns = head.len();
    let mut lines = Vec::new();
    let mut providers = Vec::new();
    let mut courses = Vec::new();
    let mut enrolments = Vec::new();
    for (line, fields) in it {
        if fields.len() != columns {
            return Err(invalid_csv(
                line,
                format!("{} fields; the header has {columns}", fields.len()),
            ));
        }
        if lines.len() >= IMPORT_ROWS_MAX {
            return Err(invalid_csv(
                line,
                format!("at most {IMPORT_ROWS_MAX} rows per import; send the rest in another"),
            ));
        }
        let id = |i: usize| -> ApiResult<i64> {
            fields[i]
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|v| *v >= ID_MIN)
                .ok_or_else(|| invalid_csv(line, format!("{}: a positive whole number", want[i])))
        };
        let flag = |i: usize| -> ApiResult<bool> {
            match fields.get(i).map(|f| f.trim().to_lowercase()).as_deref() {
                None | Some("") | Some("false") | Some("no") | Some("0") => Ok(false),
                Some("true") | Some("yes") | Some("1") => Ok(true),
                Some(_) => Err(invalid_csv(line, format!("{}: true or false", want[i]))),
            }
        };
        let words = |i: usize, max: usize| -> ApiResult<String> {
            text(want[i], &fields[i], 1, max, false).map_err(|e| invalid_csv(line, e.message))
        };
        match kind {
            ImportKind::Providers => providers.push((id(0)?, words(1, NAME_CHARS_MAX)?, flag(2)?)),
            ImportKind::Courses => {
                courses.push((id(0)?, id(1)?, words(2, COURSE_TITLE_CHARS_MAX)?, flag(3)?))
            }
            ImportKind::Enrolments => enrolments.push((id(0)?, id(1)?)),
        }
        lines.push(line);
    }
    let rows = match kind {
        ImportKind::Providers => ImportRows::Providers(providers),
        ImportKind::Courses => ImportRows::Courses(courses),
        ImportKind::Enrolments => ImportRows::Enrolments(enrolments),
    };
    Ok((rows, lines))
}

/// CSV records with their line numbers: comma-separated, fields optionally
/// in double quotes (`""` a quote inside), one record a line; blank lines
/// skipped.
fn parse_csv(text: &str) -> ApiResult<Vec<(usize, Vec<String>)>> {
    let mut out = Vec::new();
    for (i, raw) in text.split('\n').enumerate() {
        let line = i + 1;
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        if raw.trim().is_empty() {
            continue;
        }
        let mut fields = Vec::new();
        let mut field = String::new();
        let mut chars = raw.chars().peekable();
        let mut quoted = false;
        let mut was_quoted = false;
        while let Some(c) = chars.next() {
            match (quoted, c) {
                (true, '"') if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                (true, '"') => quoted = false,
                (true, c) => field.push(c),
                (false, '"') if field.trim().is_empty() && !was_quoted => {
                    field.clear();
                    quoted = true;
                    was_quoted = true;
                }
                (false, '"') => {
                    return Err(invalid_csv(
                        line,
                        "a quote inside an unquoted field; quote the whole field and double the quote (\"\")"
                            .into(),
                    ))
                }
                (false, ',') => {
                    fields.push(std::mem::take(&mut field));
                    was_quoted = false;
                }
                (false, c) => {
                    if was_quoted && !c.is_whitespace() {
                        return Err(invalid_csv(
                            line,
                            "text after a quoted field's closing quote".into(),
                        ));
                    }
                    field.push(c);
                }
            }
        }
        if quoted {
            return Err(invalid_csv(
                line,
                "a quoted field does not end on its line".into(),
            ));
        }
        fields.push(field);
        out.push((line, fields));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_quotes_and_errors_name_the_line() {
        let r = parse_csv("a,b\r\n\"x, y\",\"say \"\"hi\"\"\"\n\n1,2").unwrap();
        assert_eq!(r[0], (1, vec!["a".into(), "b".into()]));
        assert_eq!(r[1], (2, vec!["x, y".into(), "say \"hi\"".into()]));
        assert_eq!(r[2], (4, vec!["1".into(), "2".into()]));
        let e = parse_csv("a,b\n\"open,b").unwrap_err();
        assert!(e.message.starts_with("line 2:"), "{}", e.message);
    }

    #[test]
    fn imports_check_every_row_before_writing() {
        let (rows, lines) = parse_import(
            ImportKind::Courses,
            "course_id,provider_id,title\n1,3,\"Rust, fast\"\n",
        )
        .unwrap();
        assert!(
            matches!(rows, ImportRows::Courses(ref c) if c[0] == (1, 3, "Rust, fast".into(), false))
        );
        assert_eq!(lines, [2]);
        let e = parse_import(ImportKind::Enrolments, "course_id,user_id\n1,2\n1,x\n").unwrap_err();
        assert_eq!(e.message, "line 3: user_id: a positive whole number");
        let e = parse_import(ImportKind::Enrolments, "user_id,course_id\n").unwrap_err();
        assert!(
            e.message.starts_with("line 1: the header must be"),
            "{}",
            e.message
        );
        let e = parse_import(
            ImportKind::Providers,
            "provider_id,name,premoderate\n4,A,maybe\n",
        )
        .unwrap_err();
        assert_eq!(e.message, "line 2: premoderate: true or false");
    }
}

/// Parked notifications listed at most.
const PARKED_LISTED_MAX: i64 = 1000;

/// Parked notifications, oldest first.
#[derive(Serialize, Deserialize, utoipa::ToSchema, Debug)]
pub struct ParkedCommentNotifications {
    /// Parked in all.
    pub count: i64,
    /// The oldest, at most 1000.
    pub parked: Vec<ParkedCommentNotification>,
}

/// Notifications the webhook worker gave up on (host)
///
/// A host or admin token. The notifications `--comments-notify-webhook`
/// refused (a 4xx other than 408 and 429, or a redirect) or kept failing past
/// `--comments-notify-attempts-max`, oldest first, at most 1000, so the host
/// can send them by hand. Ids only, as the notifications themselves.
#[utoipa::path(get, path = "/api/comments/host/notifications/parked", tag = "comments",
    security(("bearer" = [])),
    responses((status = 200, body = ParkedCommentNotifications, description = "Parked notifications, oldest first, at most 1000, with how many in all",
               example = json!({"count": 1, "parked": [{"position": 4711, "event": "ReplyPosted", "commentId": 42,
                                                        "reason": "refused: answered 410 (redirects are not followed)",
                                                        "attempts": 1, "parkedAtMs": 1893575400000_i64}]})),
              (status = 401, description = "missing_token, invalid_token or token_expired"),
              (status = 403, description = "forbidden (not a host or admin token)")))]
pub async fn parked_notifications(
    State(st): State<Arc<CommentsState>>,
    caller: Caller,
) -> ApiResult<Json<ParkedCommentNotifications>> {
    host(&caller)?;
    let (parked, count) = st.storage.parked_notifications(PARKED_LISTED_MAX).await?;
    Ok(Json(ParkedCommentNotifications { count, parked }))
}
