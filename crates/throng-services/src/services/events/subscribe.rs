//! Following the log: server-sent events (catch-up, then live), long
//! polls, and named consumers with durable checkpoints and a lease (one
//! active delivery at a time; booking's confirmation worker is one such
//! consumer, `booking-notifier`, through the same `Store` calls).
//!
//! A subscription holds one page of events at most: the next page is read
//! only when the client has taken the previous one (hyper polls the stream
//! when the socket can take more), so a slow client costs its connection
//! and one page, never a growing buffer. Live, a subscription is woken by
//! an append through this node's API and otherwise looks again every
//! [`LIVE_POLL_MS`] (other nodes, the services' own appends).

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::http::{
    event_json, filter_of, limit_of, position_of, CategoryText, EventTypeText, LogPage, Position,
    ReadLimit,
};
use super::EventsState;
use crate::platform::auth::{Caller, Role};
use crate::platform::error::{ApiError, ApiResult};
use crate::platform::extract::{whole, ApiJson, ApiPath, ApiQuery};
use crate::platform::openapi;
use crate::platform::streams::LiveStreams;
use crate::store::streams::Filter;

/// A live subscription looks for new events at least this often.
pub const LIVE_POLL_MS: u64 = 250;
/// When this node appended past the head a read saw (PostgreSQL's horizon
/// trails a commit by about one write transaction, see store/horizon.rs),
/// the read is tried again this soon instead of after a live poll.
const BEHIND_HORIZON_RETRY_MS: u64 = 5;

/// How long a caught-up reader at `head` naps: briefly when this node
/// already appended past `head` (the horizon is about to move), else until
/// woken or a live poll.
fn nap_ms(appended: i64, head: i64) -> u64 {
    if appended > head {
        BEHIND_HORIZON_RETRY_MS
    } else {
        LIVE_POLL_MS
    }
}
/// Events read per page by a subscription.
const SUBSCRIBE_PAGE: i64 = 256;
/// A long poll waits this long at most.
pub(super) const POLL_WAIT_MS_MAX: u64 = 30_000;
/// Consumer leases last this long at least and at most.
pub(super) const LEASE_MS_MIN: i64 = 1_000;
pub(super) const LEASE_MS_MAX: i64 = 300_000;
/// A lease owner's name, in characters.
pub(super) const OWNER_CHARS_MAX: usize = 100;
/// A consumer's name, in bytes of `A-Z a-z 0-9 - _ .`.
pub(super) const CONSUMER_BYTES_MAX: usize = 100;

fn too_many() -> ApiError {
    ApiError {
        retry_after_s: Some(5),
        ..ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_subscribers",
            "the node's subscriptions are all taken (--events-subscribers-max); retry later",
        )
    }
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubscribeQuery {
    /// The first position to send (default 1); `Last-Event-ID` (the last
    /// position received) takes precedence.
    #[param(value_type = Option<Position>, inline)]
    from: Option<u64>,
    /// Only events of this type.
    #[serde(rename = "type")]
    #[param(value_type = Option<EventTypeText>, inline)]
    event_type: Option<String>,
    /// Only events whose type starts with this.
    #[param(value_type = Option<EventTypeText>, inline)]
    type_prefix: Option<String>,
    /// Only events of this category's streams.
    #[param(value_type = Option<CategoryText>, inline)]
    category: Option<String>,
}

/// A server-sent event of a subscription.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct EventMessage {
    /// The event's position.
    id: String,
    /// The event's type.
    event: String,
    /// The event as in /api/events/all.
    #[schema(content_media_type = "application/json")]
    data: String,
}

/// The largest `Last-Event-ID`: the stream resumes at the next position,
/// which must still be a position (`/openapi.json` states this bound).
pub const LAST_EVENT_ID_MAX: i64 = i64::MAX - 1;

crate::schema_type!(
    /// `Last-Event-ID` (`resume_from`).
    LastEventId => openapi::int_schema(0, LAST_EVENT_ID_MAX)
);

/// `Last-Event-ID` as the next position to send.
fn resume_from(headers: &HeaderMap) -> ApiResult<Option<i64>> {
    let Some(v) = headers.get("last-event-id") else {
        return Ok(None);
    };
    v.to_str()
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .filter(|p| (0..=LAST_EVENT_ID_MAX).contains(p))
        .map(|p| Some(p + 1))
        .ok_or_else(|| {
            ApiError::bad_request(
                "invalid_last_event_id",
                format!(
                    "Last-Event-ID is the position of the last event received: 0 to {LAST_EVENT_ID_MAX}"
                ),
            )
        })
}

/// Follows the log as server-sent events: catch-up, then live
///
/// Admin token. Server-sent events: first every event from `from` on, then each
/// new one as it commits. Each message's `id:` is its position, so a client
/// reconnects with `from` set to the last id plus one.
#[utoipa::path(get, path = "/api/events/subscribe", tag = "events",
    params(SubscribeQuery,
           ("Last-Event-ID" = inline(Option<LastEventId>), Header, description = "the last position received: the stream resumes after it")),
    security(("bearer" = [])),
    responses((status = 200, content_type = "text/event-stream", body = EventMessage,
               description = "text/event-stream: every event from `from` on in the global order (catch-up), then each new one as it commits (live); `id:` the position, `event:` the type, `data:` the event as in /api/events/all; `: keep-alive` every 15 s (a third of --idle-timeout-ms when that is less). A filtered stream scans at most --events-scan-max positions per read. After --request-timeout-ms, or when the node stops, the stream ends with a comment `: end lifetime` or `: end stopping`: reconnect with Last-Event-ID.",
               example = json!("id: 981\nevent: OrderPlaced\ndata: {\"position\":981,\"stream\":\"order-17\",\"version\":0,\"type\":\"OrderPlaced\",\"eventId\":\"3f6c2a9e-8b1d-4e57-a0c4-9d2f7e1b5a63\",\"created\":\"2030-01-02T09:30:00.000Z\",\"data\":{\"orderId\":17},\"metadata\":null}\n\n: keep-alive\n\n")),
              (status = 400, description = "invalid_query, invalid_last_event_id"),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden"),
              (status = 503, description = "too_many_subscribers (--events-subscribers-max), draining (the node is stopping); Retry-After")))]
pub async fn subscribe(
    caller: Caller,
    State(st): State<Arc<EventsState>>,
    State(live): State<Arc<LiveStreams>>,
    ApiQuery(q): ApiQuery<SubscribeQuery>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    caller.require(Role::ADMIN)?;
    let filter = filter_of(q.event_type, q.type_prefix, q.category)?;
    let from = match resume_from(&headers)? {
        Some(p) => p,
        None => position_of(q.from, 1)?.max(1),
    };
    live.admit()?;
    let permit = st
        .subscribers
        .clone()
        .try_acquire_owned()
        .map_err(|_| too_many())?;
    let wake = st.appended.subscribe();
    let state = Follow {
        st: st.clone(),
        filter,
        next: from,
        page: Vec::new().into_iter(),
        wake,
        _permit: permit,
    };
    let stream = futures::stream::unfold(state, |mut f| async move {
        let e = f.next_event().await?;
        let data = serde_json::to_string(&event_json(&f.st, &e)).expect("an event serializes");
        let event = Event::default()
            .id(e.position.to_string())
            .event(e.event_type.clone())
            .data(data);
        Some((event, f))
    });
    Ok(live.respond(stream, None))
}

/// A subscription's place in the log and its one page.
struct Follow {
    st: Arc<EventsState>,
    filter: Filter,
    next: i64,
    page: std::vec::IntoIter<crate::store::StoredEvent>,
    wake: tokio::sync::watch::Receiver<i64>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Follow {
    /// The next event, waiting for one when caught up; `None` ends the
    /// stream (the store failed: the client reconnects with Last-Event-ID).
    async fn next_event(&mut self) -> Option<crate::store::StoredEvent> {
        loop {
            if let Some(e) = self.page.next() {
                return Some(e);
            }
            self.wake.borrow_and_update();
            let page = match self
                .st
                .store
                .scan_events(
                    self.next,
                    SUBSCRIBE_PAGE,
                    self.st.limits.scan_max,
                    self.filter.clone(),
                )
                .await
            {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(error = %e, "a subscription's read failed; closing it");
                    return None;
                }
            };
            self.next = page.next;
            let head = page.head;
            let caught_up = page.events.is_empty() && page.next > page.head;
            self.page = page.events.into_iter();
            if caught_up {
                let nap = nap_ms(*self.wake.borrow(), head);
                let _ = tokio::time::timeout(Duration::from_millis(nap), self.wake.changed()).await;
            }
        }
    }
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PollQuery {
    /// The first position wanted (default 1).
    #[param(value_type = Option<Position>, inline)]
    from: Option<u64>,
    /// Events at most, 1 to --events-read-max (1000); default 100.
    #[param(value_type = Option<ReadLimit>, inline)]
    limit: Option<u64>,
    /// How long to wait for an event at `from` or later, in ms (default
    /// 20,000).
    #[param(value_type = Option<PollWaitMs>, inline)]
    wait_ms: Option<u64>,
    /// Only events of this type.
    #[serde(rename = "type")]
    #[param(value_type = Option<EventTypeText>, inline)]
    event_type: Option<String>,
    /// Only events whose type starts with this.
    #[param(value_type = Option<EventTypeText>, inline)]
    type_prefix: Option<String>,
    /// Only events of this category's streams.
    #[param(value_type = Option<CategoryText>, inline)]
    category: Option<String>,
}

/// Waits for events at a position or later (long poll)
///
/// Admin token. Long poll: answers as soon as there are events at `from` or
/// later, or after `waitMs` with none. For clients that cannot hold a server-
/// sent event stream.
#[utoipa::path(get, path = "/api/events/poll", tag = "events",
    params(PollQuery),
    security(("bearer" = [])),
    responses((status = 200, body = LogPage, description = "As /api/events/all, answered as soon as there are events at `from` or later (or after waitMs with none, or at once when the node stops)",
               example = json!({"next": 982, "head": 981, "events": [{"position": 981, "stream": "order-17",
                   "version": 0, "type": "OrderPlaced", "eventId": "3f6c2a9e-8b1d-4e57-a0c4-9d2f7e1b5a63",
                   "created": "2030-01-02T09:30:00.000Z", "data": {"orderId": 17, "total": 42.5}, "metadata": null}]})),
              (status = 400, description = "invalid_query"),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden"),
              (status = 503, description = "too_many_subscribers; Retry-After")))]
pub async fn poll(
    caller: Caller,
    State(st): State<Arc<EventsState>>,
    State(live): State<Arc<LiveStreams>>,
    ApiQuery(q): ApiQuery<PollQuery>,
) -> ApiResult<Response> {
    caller.require(Role::ADMIN)?;
    let filter = filter_of(q.event_type, q.type_prefix, q.category)?;
    let limit = limit_of(&st, q.limit)?;
    let mut from = position_of(q.from, 1)?.max(1);
    let wait = q.wait_ms.unwrap_or(20_000);
    if wait > POLL_WAIT_MS_MAX {
        return Err(ApiError::bad_request(
            "invalid_query",
            format!("waitMs: 0 to {POLL_WAIT_MS_MAX}"),
        ));
    }
    let _permit = st
        .subscribers
        .clone()
        .try_acquire_owned()
        .map_err(|_| too_many())?;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(wait);
    let mut wake = st.appended.subscribe();
    loop {
        wake.borrow_and_update();
        let page = st
            .store
            .scan_events(from, limit, st.limits.scan_max, filter.clone())
            .await?;
        // A filtered page may hold nothing while more was scanned: go on
        // from where it stopped rather than waiting.
        let caught_up = page.next > page.head;
        // A stopping node answers what it has rather than hold the stop.
        if !page.events.is_empty() || tokio::time::Instant::now() >= deadline || live.stopping() {
            let events = page.events.iter().map(|e| event_json(&st, e)).collect();
            return Ok(axum::Json(LogPage {
                events,
                next: page.next,
                head: page.head,
            })
            .into_response());
        }
        from = page.next;
        if caught_up {
            let nap_ms = nap_ms(*wake.borrow(), page.head);
            let nap = deadline.min(tokio::time::Instant::now() + Duration::from_millis(nap_ms));
            tokio::select! {
                _ = tokio::time::timeout_at(nap, wake.changed()) => {}
                _ = live.stopped() => {}
            }
        }
    }
}

// --------------------------------------------------------------- consumers

fn consumer_name(name: &str) -> ApiResult<String> {
    let ok = !name.is_empty()
        && name.len() <= CONSUMER_BYTES_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(name.to_string())
    } else {
        Err(ApiError::bad_request(
            "invalid_consumer",
            "a consumer name is 1 to 100 of A-Z a-z 0-9 - _ .",
        ))
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimIn {
    /// Who delivers (a node or worker id): a label echoed back, not what
    /// holds the lease.
    #[schema(value_type = Owner, inline)]
    owner: String,
    /// How long the lease lasts unless renewed, in ms.
    #[serde(deserialize_with = "whole::int")]
    #[schema(value_type = LeaseMs, inline)]
    lease_ms: i64,
    /// The token a claim answered: renews the lease it holds. Absent: a
    /// new claim, granted only while no lease is running.
    #[schema(value_type = Option<LeaseToken>, inline)]
    lease_token: Option<String>,
    /// The position delivered so far, saved while the lease is held.
    #[serde(default, deserialize_with = "whole::opt")]
    #[schema(value_type = Option<Position>, inline)]
    position: Option<i64>,
}

crate::schema_type!(PollWaitMs => openapi::int_schema(0, POLL_WAIT_MS_MAX as i64));
crate::schema_type!(
    /// A consumer's name (`consumer_name`).
    ConsumerName => openapi::pattern_schema(format!("^[A-Za-z0-9_.-]{{1,{CONSUMER_BYTES_MAX}}}$"))
);
crate::schema_type!(Owner => openapi::string_schema(1, OWNER_CHARS_MAX, None));
crate::schema_type!(LeaseMs => openapi::int_schema(LEASE_MS_MIN, LEASE_MS_MAX));
crate::schema_type!(
    /// A lease token (`lease_token_of`).
    LeaseToken => openapi::string_schema(
        2 * LEASE_TOKEN_BYTES,
        2 * LEASE_TOKEN_BYTES,
        Some(lease_token_pattern())
    )
);

/// The pattern of a lease token (`lease_token_of`).
fn lease_token_pattern() -> String {
    format!("^[0-9a-f]{{{}}}$", 2 * LEASE_TOKEN_BYTES)
}

/// A consumer's durable checkpoint.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Consumer {
    pub consumer: String,
    /// The position delivered so far (0 when never saved).
    pub position: i64,
}

/// A held lease.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    pub consumer: String,
    /// The owner label the claim gave.
    pub owner: String,
    /// Renews, saves positions and releases the lease.
    pub lease_token: String,
    /// The checkpoint: deliver events after it.
    pub position: i64,
    /// How long the lease lasts unless renewed.
    pub lease_ms: i64,
}

/// A lease token: [`LEASE_TOKEN_BYTES`] random bytes, hex.
pub(super) const LEASE_TOKEN_BYTES: usize = 16;

fn lease_token_of(token: &str) -> ApiResult<&str> {
    let ok = token.len() == 2 * LEASE_TOKEN_BYTES
        && token
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if ok {
        Ok(token)
    } else {
        Err(ApiError::invalid_field(format!(
            "leaseToken: the {} lowercase hex characters a claim answered",
            2 * LEASE_TOKEN_BYTES
        )))
    }
}

/// What the store keeps as the lease's holder: a digest of the token, so
/// the token itself is never at rest and no client-chosen name holds it.
fn lease_holder(token: &str) -> String {
    use sha2::{Digest, Sha256};
    format!("lease:{}", hex::encode(Sha256::digest(token.as_bytes())))
}

/// A named consumer's checkpoint
///
/// Admin token. The saved checkpoint of a named consumer: the position it has
/// processed up to (0 when never saved).
#[utoipa::path(get, path = "/api/events/consumers/{name}", tag = "events",
    params(("name" = inline(ConsumerName), Path)),
    security(("bearer" = [])),
    responses((status = 200, body = Consumer, description = "The durable checkpoint (0 when never saved)",
               example = json!({"consumer": "invoicing", "position": 981})),
              (status = 400, description = "invalid_consumer"),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden")))]
pub async fn get_consumer(
    caller: Caller,
    State(st): State<Arc<EventsState>>,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Response> {
    caller.require(Role::ADMIN)?;
    let name = consumer_name(&name)?;
    let position = st.store.consumer_position(&name).await?;
    Ok(axum::Json(Consumer {
        consumer: name,
        position,
    })
    .into_response())
}

/// Claims or renews a consumer's lease, saving its checkpoint
///
/// Admin token. Claims a named consumer's lease, or renews it with its
/// `leaseToken`, saving the checkpoint given. One holder at a time: a running
/// lease held by another answers 409 `lease_held`.
#[utoipa::path(post, path = "/api/events/consumers/{name}/lease", tag = "events",
    params(("name" = inline(ConsumerName), Path)),
    security(("bearer" = [])),
    request_body(content = ClaimIn, description = "{owner, leaseMs, leaseToken?, position?}: without leaseToken, claims the lease (granted only while none is running, whoever asks); with the token a claim answered, renews it; with position, saves the checkpoint too",
                 example = json!({"owner": "worker-1", "leaseMs": 30000})),
    responses((status = 200, body = Lease, description = "The lease is held, by the holder of leaseToken, for leaseMs; deliver events after position. Renew, save positions and release with leaseToken",
               example = json!({"consumer": "invoicing", "owner": "worker-1", "leaseToken": "9f2c4e6a8b0d1f3a5c7e9b1d3f5a7c9e",
                                "position": 981, "leaseMs": 30000})),
              (status = 400, description = "invalid_consumer, malformed_json"),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden, consumer_owned_by_service (a service's own worker, e.g. booking-notifier: readable, not leased here)"),
              (status = 409, description = "lease_held: a lease is running (claim again after it lapses); lease_not_held: leaseToken no longer holds the lease (it lapsed and was taken, or was released): claim again without it"),
              (status = 415, description = "unsupported_media_type"),
              (status = 422, description = "invalid_field")))]
pub async fn lease(
    caller: Caller,
    State(st): State<Arc<EventsState>>,
    ApiPath(name): ApiPath<String>,
    ApiJson(body): ApiJson<ClaimIn>,
) -> ApiResult<Response> {
    caller.require(Role::ADMIN)?;
    let name = consumer_name(&name)?;
    not_a_service_worker(&st, &name)?;
    if !(1..=OWNER_CHARS_MAX).contains(&body.owner.chars().count()) {
        return Err(ApiError::invalid_field(format!(
            "owner: 1 to {OWNER_CHARS_MAX} characters"
        )));
    }
    if !(LEASE_MS_MIN..=LEASE_MS_MAX).contains(&body.lease_ms) {
        return Err(ApiError::invalid_field(format!(
            "leaseMs: {LEASE_MS_MIN} to {LEASE_MS_MAX}"
        )));
    }
    if body.position.is_some_and(|p| p < 0) {
        return Err(ApiError::invalid_field("position: 0 or more"));
    }
    let (token, claimed) = match &body.lease_token {
        Some(t) => {
            let token = lease_token_of(t)?.to_string();
            let renewed = st
                .store
                .renew_consumer(&name, &lease_holder(&token), body.lease_ms)
                .await?;
            (token, renewed.ok_or_else(|| not_held(&name))?)
        }
        None => {
            let token = hex::encode(rand::random::<[u8; LEASE_TOKEN_BYTES]>());
            let claimed = st
                .store
                .claim_consumer(&name, &lease_holder(&token), body.lease_ms)
                .await?;
            let held = || {
                ApiError::conflict(
                    "lease_held",
                    format!("a lease of '{name}' is running; claim again after it lapses"),
                )
            };
            (token, claimed.ok_or_else(held)?)
        }
    };
    let mut position = claimed;
    if let Some(p) = body.position {
        if !st
            .store
            .save_leased_position(&name, &lease_holder(&token), p, body.lease_ms)
            .await?
        {
            return Err(not_held(&name));
        }
        position = p;
    }
    Ok(axum::Json(Lease {
        consumer: name,
        owner: body.owner,
        lease_token: token,
        position,
        lease_ms: body.lease_ms,
    })
    .into_response())
}

/// The header carrying a lease token to release.
pub const LEASE_TOKEN_HEADER: &str = "lease-token";

/// Releases a consumer's lease
///
/// Admin token. Releases a consumer's lease (send its Lease-Token header), so
/// the next claim is granted at once.
#[utoipa::path(delete, path = "/api/events/consumers/{name}/lease", tag = "events",
    params(("name" = inline(ConsumerName), Path, example = "invoicing"),
           ("Lease-Token" = inline(LeaseToken), Header, description = "the leaseToken a claim answered",
            example = "9f2c4e6a8b0d1f3a5c7e9b1d3f5a7c9e")),
    security(("bearer" = [])),
    responses((status = 204, description = "released: the next claim is granted at once"),
              (status = 400, description = "invalid_consumer"),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden, consumer_owned_by_service"),
              (status = 409, description = "lease_not_held: the token no longer holds the lease"),
              (status = 422, description = "invalid_field (Lease-Token missing or malformed)")))]
pub async fn release(
    caller: Caller,
    State(st): State<Arc<EventsState>>,
    ApiPath(name): ApiPath<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    caller.require(Role::ADMIN)?;
    let name = consumer_name(&name)?;
    not_a_service_worker(&st, &name)?;
    let token = headers
        .get(LEASE_TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| {
            ApiError::invalid_field("Lease-Token: the leaseToken a claim answered (a header)")
        })?;
    let token = lease_token_of(token)?;
    if !st
        .store
        .release_consumer(&name, &lease_holder(token))
        .await?
    {
        return Err(not_held(&name));
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

fn not_a_service_worker(st: &EventsState, name: &str) -> ApiResult<()> {
    match st.consumer_owner(name) {
        Some(service) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "consumer_owned_by_service",
            format!("'{name}' is the {service} service's worker; its lease is not taken through the API"),
        )),
        None => Ok(()),
    }
}

fn not_held(name: &str) -> ApiError {
    ApiError::conflict(
        "lease_not_held",
        format!(
            "this leaseToken no longer holds the lease of '{name}' (it lapsed and was taken, or \
             was released); claim it again without leaseToken"
        ),
    )
}
