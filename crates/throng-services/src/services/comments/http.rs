//! Comments routes. Reading is public; commenting needs a `user` token,
//! replying the token of the course's provider (`provider`, `sub` = the
//! course's provider id).
//!
//! The listing answers at `/api/comments` and, unchanged, at the write-up's
//! two paths (`/api/comments/method/jsonfromdapper`, `.../jsonfromlinq`), so
//! its Artillery script runs as printed. Its body is exactly the write-up's
//! array of user blocks; paging metadata travels in headers (`ETag`,
//! `X-Next-Cursor`).
//!
//! Error codes: 400 `invalid_query`/`invalid_path`/`malformed_json`;
//! 401 `missing_token`/`invalid_token`/`token_expired`; 403 `forbidden`
//! (wrong role), `unknown_user` (no such user), `not_the_provider`;
//! `not_the_author` (editing or deleting someone else's comment);
//! 404 `course_not_found`/`comment_not_found`; 422 `invalid_field`,
//! `edit_reply` (PATCH names a reply: replies change through PUT) and
//! `reply_to_reply` (replies cannot be replied to: the request is well formed
//! but names a reply, so 422 rather than 409, which would suggest retrying
//! after some other change).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, MethodRouter};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, SchemaType, Type};
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;

use super::cache::Page;
use super::model::{
    caller_id, parse_id, CommentRequest, CommentType, Cursor, Deleter, EditRequest, ListQuery,
    ReplyRequest, Sort, CURSOR_CHARS_MAX, ID_MIN, PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX, RATING_MAX,
    RATING_MIN, REMARKS_CHARS_MAX, SKIP_MAX, TITLE_CHARS_MAX,
};
use super::site::sign_in_name;
use super::store::{
    CommentOut, DeleteOutcome, EditOutcome, PostOutcome, RatingOut, ReplyOutcome, UserBlock,
};
use super::CommentsState;
use crate::base::clock::now_ms;
use crate::platform::auth::{Caller, Role, TokenKeys};
use crate::platform::error::{ApiError, ApiResult};
use crate::platform::extract::{ApiJson, ApiPath, ApiQuery};
use crate::platform::headers;
use crate::platform::openapi::{
    closed_object, int_schema, nullable, pattern_schema, small_int_schema, text_schema,
};

pub const NEXT_CURSOR_HEADER: &str = "x-next-cursor";

/// Comments' routes and their operations, for any state that gives
/// `Arc<CommentsState>` and the token keys (see `platform::service`).
pub fn routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<CommentsState>: axum::extract::FromRef<S>,
    Arc<TokenKeys>: axum::extract::FromRef<S>,
    Arc<crate::platform::session::Sessions>: axum::extract::FromRef<S>,
{
    OpenApiRouter::default()
        .routes(routes!(list_comments).map(preflighted))
        // The write-up's paths for the same listing, left out of the document.
        .route(
            "/api/comments/method/jsonfromdapper",
            preflighted(get(list_comments)),
        )
        .route(
            "/api/comments/method/jsonfromlinq",
            preflighted(get(list_comments)),
        )
        .routes(routes!(edit_comment, delete_comment).map(preflighted))
        .routes(routes!(put_reply).map(preflighted))
        .routes(routes!(post_comment).map(preflighted))
        .routes(routes!(rating).map(preflighted))
        .route(
            "/api/comments/demo-token",
            preflighted(get(demo_token)).layer(axum::middleware::map_response(headers::no_store)),
        )
        .merge(super::site::routes())
        .layer(axum::middleware::from_fn(cors))
        .merge(super::page::router().into())
}

/// `methods`, and the CORS preflight of its path.
fn preflighted<S: Clone + Send + Sync + 'static>(methods: MethodRouter<S>) -> MethodRouter<S> {
    methods.options(preflight)
}

/// CORS preflight: answered by `cors`, which adds the headers.
async fn preflight() -> StatusCode {
    StatusCode::NO_CONTENT
}

/// The widget runs on other sites' pages: allow any origin. No cookies are
/// used (tokens travel in Authorization), so `*` grants nothing ambient.
async fn cors(req: Request, next: Next) -> Response {
    let preflight = req.method() == Method::OPTIONS;
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("etag, x-next-cursor"),
    );
    if preflight {
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, PUT, PATCH, DELETE, OPTIONS"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("authorization, content-type, if-none-match"),
        );
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        );
    }
    res
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// `Course` (default) or `Service`.
    #[serde(alias = "ratingtype")]
    #[param(value_type = Option<RatingType>, inline)]
    rating_type: Option<String>,
    /// The course.
    #[serde(alias = "courseid")]
    #[param(value_type = Id, inline, example = 1)]
    course_id: i64,
    /// Only this user's block.
    #[serde(alias = "userid")]
    #[param(value_type = Option<Id>, inline)]
    user_id: Option<i64>,
    /// User blocks to skip (default 0), after `cursor` if given.
    #[param(value_type = Option<Skip>, inline)]
    skip: Option<i64>,
    /// User blocks per page, newest `lastUpdate` first (default 10).
    #[param(value_type = Option<PageSize>, inline)]
    size: Option<i64>,
    /// Comments of each user's thread to skip (default 0).
    #[param(value_type = Option<Skip>, inline)]
    skip_thread: Option<i64>,
    /// Comments per thread, newest first (default 10).
    #[param(value_type = Option<PageSize>, inline)]
    size_thread: Option<i64>,
    /// Start after the block named by a previous page's `X-Next-Cursor`
    /// (of the same `sort`).
    #[param(value_type = Option<CursorText>, inline)]
    cursor: Option<String>,
    /// The blocks' order: `newest` (default) or `oldest` last review,
    /// `highest` or `lowest` rating, `helpful` (most helpful votes).
    #[param(value_type = Option<SortName>, inline)]
    sort: Option<String>,
}

crate::schema_type!(
    /// A listing order (`Sort::parse`).
    SortName => ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(Sort::ALL.map(Sort::as_str)))
        .build()
);

crate::schema_type!(
    /// A user, course or comment id (`parse_id`; a course or comment below
    /// `ID_MIN` is not found).
    pub Id => int_schema(ID_MIN, i64::MAX)
);

crate::schema_type!(Skip => int_schema(0, SKIP_MAX));

crate::schema_type!(
    /// A comment type (`CommentType::parse`).
    RatingType => ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(CommentType::ALL.map(CommentType::as_str)))
        .build()
);

crate::schema_type!(
    /// A cursor as `X-Next-Cursor` gave it (`Cursor::encode`: base64url).
    CursorText => pattern_schema(format!("^[A-Za-z0-9_-]{{1,{CURSOR_CHARS_MAX}}}$"))
);

crate::schema_type!(
    /// Sizes over `PAGE_SIZE_MAX` are capped, not refused: only the minimum
    /// binds.
    PageSize => ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
        .minimum(Some(0))
        .description(Some(format!(
            "0 or more; over {PAGE_SIZE_MAX} is capped at {PAGE_SIZE_MAX}"
        )))
        .build()
);

/// A course in a path.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct CoursePath {
    #[param(value_type = Id, inline)]
    course_id: i64,
}

/// A comment in a path.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct CommentPath {
    #[param(value_type = Id, inline, example = 42)]
    comment_id: i64,
}

fn count(field: &str, v: Option<i64>, default: i64, max: i64, cap: bool) -> ApiResult<i64> {
    let v = v.unwrap_or(default);
    if v < 0 {
        return Err(ApiError::invalid_field(format!("{field}: 0 or more")));
    }
    if v > max {
        if cap {
            return Ok(max);
        }
        return Err(ApiError::invalid_field(format!(
            "{field}: at most {max}; page deeper with the cursor (X-Next-Cursor)"
        )));
    }
    Ok(v)
}

impl ListParams {
    /// The common case without serde: known keys, each at most once, numbers
    /// that parse as `i64` (as serde_urlencoded parses them). Anything else
    /// returns `None`, and the caller goes through the serde path, which
    /// gives the same value or the same error.
    fn parse_simple(query: &str) -> Option<ListParams> {
        let mut p = ListParams {
            rating_type: None,
            course_id: 0,
            user_id: None,
            skip: None,
            size: None,
            skip_thread: None,
            size_thread: None,
            cursor: None,
            sort: None,
        };
        let mut course_id = None;
        fn set<T>(slot: &mut Option<T>, v: T) -> Option<()> {
            if slot.is_some() {
                return None;
            }
            *slot = Some(v);
            Some(())
        }
        // Percent-encoded or `+` text, empty pairs, keys without `=`: left
        // to the serde path.
        if query.contains(['%', '+']) {
            return None;
        }
        for pair in query.split('&') {
            let (k, v) = pair.split_once('=')?;
            match k {
                "courseId" | "courseid" => set(&mut course_id, v.parse::<i64>().ok()?)?,
                "ratingType" | "ratingtype" => set(&mut p.rating_type, v.to_string())?,
                "userId" | "userid" => set(&mut p.user_id, v.parse::<i64>().ok()?)?,
                "skip" => set(&mut p.skip, v.parse::<i64>().ok()?)?,
                "size" => set(&mut p.size, v.parse::<i64>().ok()?)?,
                "skipThread" => set(&mut p.skip_thread, v.parse::<i64>().ok()?)?,
                "sizeThread" => set(&mut p.size_thread, v.parse::<i64>().ok()?)?,
                "cursor" => set(&mut p.cursor, v.to_string())?,
                "sort" => set(&mut p.sort, v.to_string())?,
                _ => return None,
            }
        }
        p.course_id = course_id?;
        Some(p)
    }

    pub fn parse(self) -> ApiResult<ListQuery> {
        let sort = match &self.sort {
            Some(s) => Sort::parse(s)?,
            None => Sort::Newest,
        };
        let after = self
            .cursor
            .as_deref()
            .filter(|c| !c.is_empty())
            .map(Cursor::decode)
            .transpose()?;
        if let Some(c) = &after {
            if c.sort != sort {
                return Err(ApiError::invalid_field(format!(
                    "cursor: it continues the {} order; ask with sort={} or start again without the cursor",
                    c.sort.as_str(),
                    c.sort.as_str()
                )));
            }
        }
        Ok(ListQuery {
            sort,
            comment_type: match &self.rating_type {
                Some(t) => CommentType::parse("ratingType", t)?,
                None => CommentType::Course,
            },
            course_id: self.course_id,
            user_id: self.user_id.map(|u| parse_id("userId", u)).transpose()?,
            skip: count("skip", self.skip, 0, SKIP_MAX, false)?,
            size: count("size", self.size, PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX, true)?,
            skip_thread: count("skipThread", self.skip_thread, 0, SKIP_MAX, false)?,
            size_thread: count(
                "sizeThread",
                self.size_thread,
                PAGE_SIZE_DEFAULT,
                PAGE_SIZE_MAX,
                true,
            )?,
            after,
        })
    }
}

fn course_not_found(id: i64) -> ApiError {
    ApiError::not_found("course_not_found", format!("no course with id {id}"))
}

/// The page cache's name in `throng_cache_reads_total`.
const CACHE_METRIC: &str = "comments_pages";

/// Reads a page, through the cache when it is on, unless `revalidate`
/// (the request said `Cache-Control: no-cache`).
pub async fn read_page(
    comments: &CommentsState,
    q: &ListQuery,
    revalidate: bool,
) -> ApiResult<Arc<Page>> {
    let cache = &comments.cache;
    let storage = &comments.storage;
    // While the versions are not known current (other nodes' writes arrive
    // late), pages are read from the database.
    let version = (cache.enabled() && !revalidate && storage.cache_versions_current())
        .then(|| cache.local_version(q.course_id));
    use crate::base::metrics::{observe_cache_read, CacheRead};
    if let Some(page) = version.and_then(|v| cache.get(q, v)) {
        observe_cache_read(CACHE_METRIC, CacheRead::Hit);
        return Ok(page);
    }
    observe_cache_read(
        CACHE_METRIC,
        if version.is_some() {
            CacheRead::Miss
        } else {
            CacheRead::Bypass
        },
    );
    let listed = storage.list_page(q, comments.json_build).await?;
    if listed.blocks == 0 && storage.course(q.course_id).await?.is_none() {
        return Err(course_not_found(q.course_id));
    }
    let next = (q.size > 0 && listed.blocks as i64 == q.size)
        .then(|| listed.last.map(Cursor::encode))
        .flatten();
    let page = Arc::new(Page::new(listed.body, next));
    if let Some(v) = version {
        cache.put(q, v, page.clone());
    }
    Ok(page)
}

/// `Cache-Control: no-cache` (or `Pragma: no-cache`): the client wants a
/// page read now, not one kept (after its own write, say).
fn no_cache(headers: &HeaderMap) -> bool {
    let says = |name| {
        headers.get_all(name).iter().any(|v| {
            v.to_str().is_ok_and(|v| {
                v.split(',')
                    .any(|d| d.trim().eq_ignore_ascii_case("no-cache"))
            })
        })
    };
    says(header::CACHE_CONTROL) || says(header::PRAGMA)
}

fn etag_matches(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(',')
                .map(str::trim)
                .any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t) == etag)
        })
}

/// A course's reviews, one block per user with their thread
///
/// Public. A course's reviews, newest first, one block per user with their
/// reviews and the provider's replies. Answers an ETag (send If-None-Match to
/// get 304); when a page is full, X-Next-Cursor gives the `cursor` of the next.
#[utoipa::path(get, path = "/api/comments", params(ListParams), tag = "comments",
    responses(
        (status = 200, body = Vec<UserBlock>, description = "The write-up's array of user blocks, newest lastUpdate first. \
            Headers: ETag; X-Next-Cursor when the page is full (pass it as `cursor`). \
            Also served at /api/comments/method/jsonfromdapper and /api/comments/method/jsonfromlinq.",
         example = json!([{"displayName": "Mia K.", "courseId": 1, "commentType": "Course",
                           "lastTitle": "Clear and practical", "lastRating": 5,
                           "lastRemarks": "The exercises made it stick.", "lastUpdate": "2030-01-02T09:30:00.000Z",
                           "lastCommentId": 42, "thread": [{"commentId": 42, "title": "Clear and practical",
                               "rating": 5, "remarks": "The exercises made it stick.",
                               "createdDate": "2030-01-02T09:30:00.000Z",
                               "reply": [{"commentId": 43, "displayName": "Course team", "title": "",
                                          "remarks": "Thank you!", "createdDate": "2030-01-03T08:00:00.000Z"}]}]}])),
        (status = 304, description = "If-None-Match matched the ETag"),
        (status = 404, description = "course_not_found"),
        (status = 422, description = "invalid_field (ratingType, negative skip or size, bad cursor)")))]
pub async fn list_comments(
    State(st): State<Arc<CommentsState>>,
    headers: HeaderMap,
    uri: Uri,
) -> ApiResult<Response> {
    let params = match uri.query().and_then(ListParams::parse_simple) {
        Some(p) => p,
        // The same extraction (and rejection) as `ApiQuery`.
        None => {
            crate::platform::extract::parse_query::<ListParams>(uri.query().unwrap_or_default())?
        }
    };
    let q = params.parse()?;
    if q.course_id < 1 {
        return Err(course_not_found(q.course_id));
    }
    let page = read_page(&st, &q, no_cache(&headers)).await?;
    let status = if etag_matches(&headers, &page.etag) {
        StatusCode::NOT_MODIFIED
    } else {
        StatusCode::OK
    };
    let mut res = if status == StatusCode::OK {
        let mut r = page.body.clone().into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        r
    } else {
        StatusCode::NOT_MODIFIED.into_response()
    };
    let h = res.headers_mut();
    if let Some(v) = &page.etag_header {
        h.insert(header::ETAG, v.clone());
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Some(next) = &page.next_cursor_header {
        h.insert(NEXT_CURSOR_HEADER, next.clone());
    }
    Ok(res)
}

/// Reviews a course (a user token)
///
/// A user token. Reviews a course the user is enrolled on, with a rating and a
/// text. The review is listed at once, or held for a moderator (pre-moderation
/// or the word and link filter), and then seen by its author only.
#[utoipa::path(post, path = "/api/courses/{course_id}/comments", tag = "comments",
    params(CoursePath), security(("bearer" = [])),
    request_body(content = inline(CommentRequest), description = "{rating, title, remarks, commentType?: Course|Service}",
                 example = json!({"rating": 5, "title": "Clear and practical", "remarks": "The exercises made it stick."})),
    responses((status = 201, body = CommentOut, description = "The review: listed, or held for a moderator \
                (status held: pre-moderation or the word and link filter; seen by its author only until approved)",
               example = json!({"commentId": 42, "courseId": 1, "userId": 7, "displayName": "Mia K.",
                                "commentType": "Course", "rating": 5, "title": "Clear and practical",
                                "remarks": "The exercises made it stick.", "createdDate": "2030-01-02T09:30:00.000Z"})),
              (status = 401, description = "missing_token, invalid_token or token_expired"),
              (status = 403, description = "forbidden (not a user token), unknown_user (a first sign-in \
                needs the token's name claim), not_enrolled (the host has not enrolled the user on the course) or banned"),
              (status = 404, description = "course_not_found"), (status = 422, description = "invalid_field")))]
pub async fn post_comment(
    State(st): State<Arc<CommentsState>>,
    ApiPath(course_id): ApiPath<i64>,
    caller: Caller,
    headers: HeaderMap,
    ApiJson(req): ApiJson<CommentRequest>,
) -> ApiResult<Response> {
    let user_id = caller_id(&caller.0, super::USER)?;
    let mut new = req.parse(course_id, user_id, now_ms())?;
    if course_id < 1 {
        return Err(course_not_found(course_id));
    }
    new.sign_in_name = sign_in_name(&st.keys, &headers)?;
    new.hold = st.filter.check(&[&new.title, &new.remarks]);
    new.reviews_open = st.reviews_open;
    match st.post_comment(new).await? {
        PostOutcome::Posted(out) => Ok((StatusCode::CREATED, Json(out)).into_response()),
        PostOutcome::CourseNotFound => Err(course_not_found(course_id)),
        PostOutcome::UnknownUser => Err(super::site::unknown_user()),
        PostOutcome::Banned => Err(super::site::banned()),
        PostOutcome::NotEnrolled => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "not_enrolled",
            "only people enrolled on this course can review it",
        )),
    }
}

/// Replies to a review, or edits the reply (the course's provider)
///
/// The course provider's token. Replies to a review of one of the provider's
/// courses, or edits the reply already given (200). A reply cannot itself be
/// replied to.
#[utoipa::path(put, path = "/api/comments/{comment_id}/reply", tag = "comments",
    params(CommentPath), security(("bearer" = [])),
    request_body(content = inline(ReplyRequest), description = "{title?, remarks}",
                 example = json!({"remarks": "Thank you!"})),
    responses((status = 201, body = CommentOut, description = "Reply created",
               example = json!({"commentId": 43, "courseId": 1, "userId": 3, "displayName": "Course team",
                                "commentType": "CourseReply", "parentId": 42, "title": "", "remarks": "Thank you!",
                                "createdDate": "2030-01-03T08:00:00.000Z"})),
              (status = 200, body = CommentOut, description = "Reply edited (editedDate set)",
               example = json!({"commentId": 43, "courseId": 1, "userId": 3, "displayName": "Course team",
                                "commentType": "CourseReply", "parentId": 42, "title": "", "remarks": "Thank you, and see the new notes!",
                                "createdDate": "2030-01-03T08:00:00.000Z", "editedDate": "2030-01-04T10:15:00.000Z"})),
              (status = 401, description = "missing_token, invalid_token or token_expired"),
              (status = 403, description = "forbidden (not a provider token) or not_the_provider"),
              (status = 404, description = "comment_not_found"),
              (status = 422, description = "invalid_field, or reply_to_reply (the comment is itself a reply)")))]
pub async fn put_reply(
    State(st): State<Arc<CommentsState>>,
    ApiPath(comment_id): ApiPath<i64>,
    caller: Caller,
    ApiJson(req): ApiJson<ReplyRequest>,
) -> ApiResult<Response> {
    let provider_id = caller_id(&caller.0, super::PROVIDER)?;
    let reply = req.parse(comment_id, provider_id, now_ms())?;
    let not_found = || {
        ApiError::not_found(
            "comment_not_found",
            format!("no comment with id {comment_id}"),
        )
    };
    if comment_id < 1 {
        return Err(not_found());
    }
    let (status, out) = match st.put_reply(reply).await? {
        ReplyOutcome::Created(out) => (StatusCode::CREATED, out),
        ReplyOutcome::Edited(out) => (StatusCode::OK, out),
        ReplyOutcome::CommentNotFound => return Err(not_found()),
        ReplyOutcome::IsReply => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "reply_to_reply",
                "this is a reply; only comments can be replied to",
            ))
        }
        ReplyOutcome::NotTheProvider => {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "not_the_provider",
                "only the course's provider may reply to its comments",
            ))
        }
    };
    Ok((status, Json(out)).into_response())
}

fn comment_not_found(id: i64) -> ApiError {
    ApiError::not_found("comment_not_found", format!("no comment with id {id}"))
}

/// Edits one's own review
///
/// A user token. Edits the caller's own review; the course's rating counts the
/// user's last review. A provider edits a reply with PUT
/// /api/comments/{comment_id}/reply instead.
#[utoipa::path(patch, path = "/api/comments/{comment_id}", tag = "comments",
    params(CommentPath), security(("bearer" = [])),
    request_body(content = inline(EditRequest), description = "{rating?, title?, remarks?}, at least one",
                 example = json!({"rating": 4})),
    responses((status = 200, body = CommentOut, description = "The review as edited; \
                the course's rating counts the user's last review's rating",
               example = json!({"commentId": 42, "courseId": 1, "userId": 7, "displayName": "Mia K.",
                                "commentType": "Course", "rating": 4, "title": "Clear and practical",
                                "remarks": "The exercises made it stick.", "createdDate": "2030-01-02T09:30:00.000Z",
                                "editedDate": "2030-01-04T10:00:00.000Z"})),
              (status = 401, description = "missing_token, invalid_token or token_expired"),
              (status = 403, description = "forbidden (not a user token), not_the_author (another user's review) or banned"),
              (status = 404, description = "comment_not_found"),
              (status = 422, description = "invalid_field, or edit_reply (the comment is a provider's reply: PUT /api/comments/{comment_id}/reply on its review edits it)")))]
pub async fn edit_comment(
    State(st): State<Arc<CommentsState>>,
    ApiPath(comment_id): ApiPath<i64>,
    caller: Caller,
    ApiJson(req): ApiJson<EditRequest>,
) -> ApiResult<Response> {
    let user_id = caller_id(&caller.0, super::USER)?;
    let mut edit = req.parse(comment_id, user_id, now_ms())?;
    if comment_id < 1 {
        return Err(comment_not_found(comment_id));
    }
    let texts: Vec<&str> = [edit.title.as_deref(), edit.remarks.as_deref()]
        .into_iter()
        .flatten()
        .collect();
    edit.hold = st.filter.check(&texts);
    match st.edit_comment(edit).await? {
        EditOutcome::Edited(out) => Ok((StatusCode::OK, Json(out)).into_response()),
        EditOutcome::CommentNotFound => Err(comment_not_found(comment_id)),
        EditOutcome::IsReply => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "edit_reply",
            "this is a provider's reply; its provider edits it with PUT /api/comments/{review id}/reply",
        )),
        EditOutcome::NotTheAuthor => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "not_the_author",
            "this review is another user's; only its author may edit it",
        )),
        EditOutcome::Banned => Err(super::site::banned()),
    }
}

/// Deletes one's own review (with its reply) or reply
///
/// A user or provider token. Deletes the caller's own review (with the reply to
/// it) or reply; no copy of the text stays in the store.
#[utoipa::path(delete, path = "/api/comments/{comment_id}", tag = "comments",
    params(CommentPath), security(("bearer" = [])),
    responses((status = 204, description = "Deleted. A review goes with the provider's reply to it, and the user's rating \
                becomes their last remaining review's (none when it was their only one). A reply goes alone. \
                No copy of the text stays in the store's files (SQLite: zeroed, the WAL truncated)."),
              (status = 401, description = "missing_token, invalid_token or token_expired"),
              (status = 403, description = "forbidden (neither a user nor a provider token) or not_the_author \
                (a user deletes their own reviews, a provider their own replies)"),
              (status = 404, description = "comment_not_found")))]
pub async fn delete_comment(
    State(st): State<Arc<CommentsState>>,
    ApiPath(comment_id): ApiPath<i64>,
    caller: Caller,
) -> ApiResult<Response> {
    let role = if caller.0.role == super::USER {
        super::USER
    } else if caller.0.role == super::PROVIDER {
        super::PROVIDER
    } else {
        return Err(ApiError::forbidden(
            "deleting needs a token with the role 'user' (for one's reviews) or 'provider' (for one's replies)",
        ));
    };
    let provider = role == super::PROVIDER;
    let caller_id = caller_id(&caller.0, role)?;
    if comment_id < 1 {
        return Err(comment_not_found(comment_id));
    }
    let d = Deleter {
        comment_id,
        caller_id,
        provider,
        at_ms: now_ms(),
    };
    match st.delete_comment(d).await? {
        DeleteOutcome::Deleted { .. } => Ok(StatusCode::NO_CONTENT.into_response()),
        DeleteOutcome::CommentNotFound => Err(comment_not_found(comment_id)),
        DeleteOutcome::NotTheAuthor { is_reply } => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "not_the_author",
            if is_reply {
                "this is a provider's reply; only the provider who wrote it may delete it"
            } else {
                "this review is another user's; only its author may delete it"
            },
        )),
    }
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct RatingParams {
    /// `Course` (default) or `Service`.
    #[param(value_type = Option<RatingType>, inline)]
    rating_type: Option<String>,
}

/// A course's rating: each user's last review counts
///
/// Public. A course's average rating and count of ratings, each user counting
/// once with the rating of their last review.
#[utoipa::path(get, path = "/api/courses/{course_id}/rating", tag = "comments",
    params(CoursePath, RatingParams),
    responses((status = 200, body = RatingOut, description = "Each user counts once, with the rating of their last review",
               example = json!({"courseId": 1, "courseTitle": "Rust for services", "ratingType": "Course",
                                "count": 4, "average": 4.25, "stars": [0, 0, 1, 1, 2]})),
              (status = 404, description = "course_not_found"),
              (status = 422, description = "invalid_field: ratingType is Course or Service")))]
pub async fn rating(
    State(st): State<Arc<CommentsState>>,
    ApiPath(course_id): ApiPath<i64>,
    ApiQuery(q): ApiQuery<RatingParams>,
) -> ApiResult<Json<RatingOut>> {
    let kind = match &q.rating_type {
        Some(t) => CommentType::parse("ratingType", t)?,
        None => CommentType::Course,
    };
    if course_id < 1 {
        return Err(course_not_found(course_id));
    }
    st.storage
        .rating(course_id, kind)
        .await?
        .map(Json)
        .ok_or_else(|| course_not_found(course_id))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DemoTokenParams {
    /// `user` (default), `provider` or `moderator`.
    role: Option<String>,
    /// For `provider`: the course whose provider to sign in as.
    course_id: Option<i64>,
}

/// Demo only (`serve --demo`): a short-lived token for the demo page, so it
/// answers at once without `throng token`. 404 otherwise.
async fn demo_token(
    State(st): State<Arc<CommentsState>>,
    ApiQuery(q): ApiQuery<DemoTokenParams>,
) -> ApiResult<Response> {
    if !st.demo {
        return Err(ApiError::not_found(
            "route_not_found",
            "demo tokens exist only with serve --demo",
        ));
    }
    let (sub, role) = match q.role.as_deref().unwrap_or("user") {
        "user" => (super::seed::DEMO_USER_ID, super::USER),
        "provider" => {
            let course_id = q.course_id.unwrap_or(1);
            // Only the demo's own courses: never a provider of real data.
            if !(1..=super::seed::DEMO_COURSES).contains(&course_id) {
                return Err(ApiError::not_found(
                    "course_not_found",
                    format!(
                        "demo provider tokens exist for the demo's courses 1 to {} only",
                        super::seed::DEMO_COURSES
                    ),
                ));
            }
            let course = st
                .storage
                .course(course_id)
                .await?
                .ok_or_else(|| course_not_found(course_id))?;
            (course.provider_id, super::PROVIDER)
        }
        "moderator" => (super::seed::DEMO_MODERATOR_ID, super::MODERATOR),
        _ => return Err(ApiError::invalid_field("role: user, provider or moderator")),
    };
    let mut claims = serde_json::Map::new();
    if role == super::USER {
        claims.insert(
            super::model::NAME_CLAIM.into(),
            super::seed::display_name(sub).into(),
        );
    }
    let token = st.keys.issue_with(&sub.to_string(), role, 3600, claims);
    Ok(Json(DemoToken { token, sub, role }).into_response())
}

/// A demo page's token.
#[derive(Serialize)]
struct DemoToken {
    token: String,
    sub: i64,
    role: Role,
}

/// A comment's fields as `CommentRequest::parse` and `EditRequest::parse`
/// check them.
fn comment_fields() -> [(
    &'static str,
    utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
); 3] {
    [
        ("rating", small_int_schema(RATING_MIN, RATING_MAX).into()),
        ("title", text_schema(1, TITLE_CHARS_MAX, false).into()),
        ("remarks", text_schema(1, REMARKS_CHARS_MAX, true).into()),
    ]
}

crate::schema_type!(
    for CommentRequest => {
        let comment_type = ObjectBuilder::new()
            .schema_type(SchemaType::AnyValue)
            .enum_values(Some(
                CommentType::ALL
                    .map(|t| json!(t.as_str()))
                    .into_iter()
                    .chain([serde_json::Value::Null]),
            ))
            .description(Some("default Course"));
        closed_object(
            comment_fields()
                .into_iter()
                .chain([("commentType", comment_type.into())]),
            &["rating", "title", "remarks"],
        )
        .build()
    }
);

crate::schema_type!(
    for EditRequest => closed_object(comment_fields(), &[]).min_properties(Some(1)).build()
);

crate::schema_type!(
    for ReplyRequest => {
        let title =
            nullable(text_schema(0, TITLE_CHARS_MAX, false)).description(Some("empty when absent"));
        closed_object(
            [
                ("title", title.into()),
                ("remarks", text_schema(1, REMARKS_CHARS_MAX, true).into()),
            ],
            &["remarks"],
        )
        .build()
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    fn serde_path(q: &str) -> Option<ListQuery> {
        let uri: Uri = format!("/api/comments?{q}").parse().unwrap();
        axum::extract::Query::<ListParams>::try_from_uri(&uri)
            .ok()
            .and_then(|p| p.0.parse().ok())
    }

    #[test]
    fn the_simple_parse_agrees_with_serde_or_defers() {
        for q in [
            "ratingType=Course&courseId=7&skip=1&size=4&skipThread=0&sizeThread=3",
            "courseid=7&ratingtype=Service&userid=9",
            "courseId=7&cursor=abc",
            "courseId=7&size=99",
            "courseId=+7",
            "courseId=7&courseid=8",
            "courseId=7&other=1",
            "courseId=x",
            "courseId=7&&size=2",
            "skip=1",
            "courseId=7&size",
            "courseId=%37",
        ] {
            // None: the serde path answers.
            if let Some(p) = ListParams::parse_simple(q) {
                assert_eq!(p.parse().ok(), serde_path(q), "{q}");
            }
        }
        assert!(ListParams::parse_simple("courseId=7&courseid=8").is_none());
        assert!(ListParams::parse_simple("courseId=7&other=1").is_none());
        assert!(ListParams::parse_simple("courseId=%37").is_none());
        assert!(ListParams::parse_simple("courseId=7&skip=1&size=4").is_some());
    }
}
