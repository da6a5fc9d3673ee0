//! Events routes. Every route needs a token (401 without a valid one); an
//! `admin` token reads and appends everything (other roles: 403), except
//! the services' own streams, which only their service writes (403
//! `stream_owned_by_service`).
//!
//! Error codes: 400 `invalid_stream` / `invalid_category` /
//! `invalid_expected_version` / `invalid_query` / `malformed_json` /
//! `malformed_msgpack`; 401 `missing_token` / `invalid_token` /
//! `token_expired`; 403 `forbidden` / `stream_owned_by_service`; 404
//! `stream_not_found`; 409 `wrong_expected_version` (the message names the
//! stream's current version) / `event_ids_in_use`; 410 `stream_deleted`;
//! 413 `event_too_large` / `payload_bomb` (an LZ4 block claiming more than
//! --events-event-bytes-max); 415 `unsupported_media_type`; 422
//! `invalid_field` / `too_many_events` / `no_events` /
//! `duplicate_event_id`. Nothing is written on any error.

use std::sync::Arc;

use axum::extract::{FromRef, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, SchemaType, Type};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::codec::{self, CodecError};
use super::model::{self, StreamName, STREAM_BYTES_MAX, TYPE_BYTES_MAX};
use super::subscribe;
use super::EventsState;
use crate::platform::auth::{Caller, Role, TokenKeys};
use crate::platform::error::{ApiError, ApiResult};
use crate::platform::extract::{ApiPath, ApiQuery};
use crate::platform::openapi::{closed_object, pattern_schema};
use crate::store::eventlog::{NewEvent, StoredEvent, FORMAT_JSON, FORMAT_MSGPACK, TOMBSTONE_TYPE};
use crate::store::streams::{AppendOutcome, Expected, Filter, StreamAppend};

/// The events API's routes and their operations, for any state that gives
/// `Arc<EventsState>`, the token keys and the live streams (see
/// `platform::service`).
pub fn routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<EventsState>: FromRef<S>,
    Arc<TokenKeys>: FromRef<S>,
    Arc<crate::platform::session::Sessions>: FromRef<S>,
    Arc<crate::platform::streams::LiveStreams>: FromRef<S>,
{
    OpenApiRouter::default()
        .routes(routes!(read_stream, append, delete_stream))
        .routes(routes!(read_all))
        .routes(routes!(read_category))
        .routes(routes!(subscribe::subscribe))
        .routes(routes!(subscribe::poll))
        .routes(routes!(subscribe::get_consumer))
        .routes(routes!(subscribe::lease, subscribe::release))
}

crate::schema_type!(
    /// A stream name (`StreamName::parse`).
    pub(super) StreamNameText => pattern_schema(format!(
        "^[A-Za-z0-9][A-Za-z0-9_.:@-]{{0,{}}}$",
        STREAM_BYTES_MAX - 1
    ))
);

crate::schema_type!(
    /// A category (`model::parse_category`): a stream name without `-`.
    pub(super) CategoryText => pattern_schema(format!(
        "^[A-Za-z0-9][A-Za-z0-9_.:@]{{0,{}}}$",
        STREAM_BYTES_MAX - 2
    ))
);

crate::schema_type!(
    /// An event type (`model::parse_type`), also a filter on one.
    pub(super) EventTypeText => pattern_schema(format!(
        "^[A-Za-z][A-Za-z0-9_.:-]{{0,{}}}$",
        TYPE_BYTES_MAX - 1
    ))
);

crate::schema_type!(
    /// `Expected-Version` (`model::expected_version`).
    ExpectedVersionText => ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some("^(any|no_stream|exists|[0-9]{1,18})$"))
        .description(Some("any (default), no_stream, exists or a version"))
        .build()
);

/// An append as JSON (`events_from_json`); MessagePack (the same fields,
/// maps for data and metadata) is described in the operation's text. Its
/// most events are `--events-per-append-max`'s default.
struct AppendBody;

crate::schema_type!(
    for AppendBody => {
        let event = closed_object(
            [
                (
                    "eventId",
                    pattern_schema(
                        "^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"
                            .into(),
                    )
                    .into(),
                ),
                ("type", <EventTypeText as utoipa::PartialSchema>::schema()),
                (
                    "data",
                    ObjectBuilder::new().schema_type(Type::Object).build().into(),
                ),
                (
                    "metadata",
                    ObjectBuilder::new()
                        .schema_type(SchemaType::from_iter([Type::Object, Type::Null]))
                        .build()
                        .into(),
                ),
            ],
            &["eventId", "type", "data"],
        );
        ArrayBuilder::new()
            .items(event)
            .min_items(Some(1))
            .max_items(Some(super::PER_APPEND_MAX_DEFAULT))
            .build()
    }
);

fn admin(caller: &Caller) -> ApiResult<()> {
    caller.require(Role::ADMIN).map(|_| ())
}

/// A stream a client may append to (or delete): not a service's.
fn writable(st: &EventsState, stream: &StreamName) -> ApiResult<()> {
    match st.owner_of(stream.category()) {
        Some(service) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "stream_owned_by_service",
            format!(
                "streams of the category '{}' are written by the {service} service only",
                stream.category()
            ),
        )),
        None => Ok(()),
    }
}

// ------------------------------------------------------------------ append

/// One event of a JSON append.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EventIn {
    event_id: String,
    #[serde(rename = "type")]
    event_type: String,
    /// Transcoded to MessagePack while the body is parsed (no `Value`
    /// built, and the text is read once).
    data: Transcoded,
    #[serde(default)]
    metadata: Option<Transcoded>,
}

/// A JSON value as MessagePack, transcoded while the body is parsed
/// ([`codec::transcode`]): map entries stay in the order sent.
struct Transcoded(Vec<u8>);

impl<'de> Deserialize<'de> for Transcoded {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        codec::transcode(d)
            .map(Transcoded)
            .map_err(serde::de::Error::custom)
    }
}

impl Transcoded {
    /// Whether the value is a map (a JSON object).
    fn is_object(&self) -> bool {
        matches!(self.0.first(), Some(0x80..=0x8f | 0xde | 0xdf))
    }

    fn is_null(&self) -> bool {
        self.0 == [0xc0]
    }
}

fn field(i: usize, msg: impl std::fmt::Display) -> ApiError {
    ApiError::invalid_field(format!("[{i}].{msg}"))
}

fn parse_event_id(i: usize, s: &str) -> ApiResult<[u8; 16]> {
    match uuid::Uuid::try_parse(s) {
        Ok(id) if s.len() == 36 => Ok(id.into_bytes()),
        _ => Err(field(i, "eventId: a UUID (8-4-4-4-12 hex digits)")),
    }
}

fn too_large(i: usize, bytes: usize, max: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "event_too_large",
        format!(
            "event [{i}]: data and metadata are {bytes} bytes as MessagePack; at most {max} are \
             accepted (--events-event-bytes-max)"
        ),
    )
}

fn codec_error(i: usize, what: &str, e: CodecError) -> ApiError {
    match e {
        CodecError::TooLarge { .. } => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_bomb",
            format!("event [{i}].{what}: {e}"),
        ),
        CodecError::Shape(_) => field(i, format_args!("{what}: {e}")),
        _ => ApiError::bad_request("malformed_msgpack", format!("event [{i}].{what}: {e}")),
    }
}

/// A map as stored (MessagePack, maybe LZ4-wrapped) and its size
/// uncompressed.
type Encoded = (Vec<u8>, usize);

/// Builds the event to store from its encoded data and metadata.
fn new_event(
    st: &EventsState,
    i: usize,
    stream: &StreamName,
    id: [u8; 16],
    event_type: &str,
    data: Encoded,
    metadata: Option<Encoded>,
) -> ApiResult<NewEvent> {
    model::parse_type(event_type).map_err(|m| field(i, format_args!("type: {m}")))?;
    let bytes = data.1 + metadata.as_ref().map_or(0, |m| m.1);
    if bytes > st.limits.event_bytes_max {
        return Err(too_large(i, bytes, st.limits.event_bytes_max));
    }
    Ok(NewEvent {
        stream: stream.as_str().to_string(),
        event_type: event_type.to_string(),
        payload: data.0,
        event_id: Some(id),
        metadata: metadata.map(|m| m.0),
        format: FORMAT_MSGPACK,
    })
}

/// A JSON object as stored.
fn encode_json(value: Transcoded) -> Encoded {
    let size = value.0.len();
    (codec::compress(value.0), size)
}

fn events_from_json(
    st: &EventsState,
    stream: &StreamName,
    body: &[u8],
) -> ApiResult<Vec<NewEvent>> {
    let list: Vec<EventIn> = match serde_json::from_slice(body) {
        Ok(list) => list,
        // Syntax errors inside data or metadata reach here as data errors
        // (through the transcoder): the body's syntax decides.
        Err(e)
            if (e.is_data() || e.is_eof())
                && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok() =>
        {
            return Err(ApiError::invalid_field(format!(
                "the body is a JSON array of {{eventId, type, data, metadata?}}: {e}"
            )))
        }
        Err(e) => {
            return Err(ApiError::bad_request(
                "malformed_json",
                format!("the body is not valid JSON: {e}"),
            ))
        }
    };
    check_count(st, list.len())?;
    list.into_iter()
        .enumerate()
        .map(|(i, e)| {
            let id = parse_event_id(i, &e.event_id)?;
            if !e.data.is_object() {
                return Err(field(i, "data: a JSON object"));
            }
            let metadata = match e.metadata {
                None => None,
                Some(m) if m.is_null() => None,
                Some(m) if m.is_object() => Some(encode_json(m)),
                Some(_) => return Err(field(i, "metadata: a JSON object")),
            };
            new_event(
                st,
                i,
                stream,
                id,
                &e.event_type,
                encode_json(e.data),
                metadata,
            )
        })
        .collect()
}

fn check_count(st: &EventsState, n: usize) -> ApiResult<()> {
    if n == 0 {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "no_events",
            "an append holds 1 or more events",
        ));
    }
    if n > st.limits.per_append_max {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "too_many_events",
            format!(
                "an append holds at most {} events (--events-per-append-max); this one has {n}",
                st.limits.per_append_max
            ),
        ));
    }
    Ok(())
}

/// Depth of nested MessagePack arrays and maps accepted in a body.
const MSGPACK_DEPTH_MAX: usize = 64;

/// A map value (`data`, `metadata`) of a MessagePack append as it will be
/// stored: a map sent whole, or an LZ4 block (ext 99) kept as sent once its
/// claimed size was checked (before decompressing) and its content is a
/// map that reads as JSON; and the map's uncompressed size.
fn msgpack_map(
    st: &EventsState,
    i: usize,
    what: &str,
    v: &rmpv::Value,
) -> ApiResult<(Vec<u8>, usize)> {
    let mut raw = Vec::new();
    rmpv::encode::write_value(&mut raw, v).expect("writing to a Vec");
    let plain =
        codec::decompress(&raw, st.limits.event_bytes_max).map_err(|e| codec_error(i, what, e))?;
    codec::check_json_map(&plain, MSGPACK_DEPTH_MAX).map_err(|e| codec_error(i, what, e))?;
    let size = plain.len();
    match plain {
        std::borrow::Cow::Borrowed(_) => Ok((codec::compress(raw), size)),
        // Already compressed by the client: stored as sent.
        std::borrow::Cow::Owned(_) => Ok((raw, size)),
    }
}

fn events_from_msgpack(
    st: &EventsState,
    stream: &StreamName,
    body: &[u8],
) -> ApiResult<Vec<NewEvent>> {
    let malformed = |m: String| ApiError::bad_request("malformed_msgpack", m);
    codec::check_wellformed(body, MSGPACK_DEPTH_MAX)
        .map_err(|e| malformed(format!("the body is not one MessagePack value: {e}")))?;
    let mut rd = body;
    let value = rmpv::decode::read_value_with_max_depth(&mut rd, MSGPACK_DEPTH_MAX)
        .map_err(|e| malformed(format!("the body is not one MessagePack value: {e}")))?;
    if !rd.is_empty() {
        return Err(malformed(format!(
            "{} bytes after the body's value",
            rd.len()
        )));
    }
    let rmpv::Value::Array(list) = value else {
        return Err(ApiError::invalid_field(
            "the body is a MessagePack array of maps {eventId, type, data, metadata?}",
        ));
    };
    check_count(st, list.len())?;
    list.iter()
        .enumerate()
        .map(|(i, e)| {
            let rmpv::Value::Map(entries) = e else {
                return Err(field(i, "a map {eventId, type, data, metadata?}"));
            };
            let (mut id, mut ty, mut data, mut metadata) = (None, None, None, None);
            for (k, v) in entries {
                match k.as_str() {
                    Some("eventId") => id = v.as_str().map(|s| parse_event_id(i, s)),
                    Some("type") => ty = v.as_str(),
                    Some("data") => data = Some(v),
                    Some("metadata") if v.is_nil() => {}
                    Some("metadata") => metadata = Some(msgpack_map(st, i, "metadata", v)?),
                    _ => return Err(field(i, "only eventId, type, data and metadata")),
                }
            }
            let id = id.ok_or_else(|| field(i, "eventId: a UUID string"))??;
            let ty = ty.ok_or_else(|| field(i, "type: a string"))?;
            let data = data.ok_or_else(|| field(i, "data: a map"))?;
            let data = msgpack_map(st, i, "data", data)?;
            new_event(st, i, stream, id, ty, data, metadata)
        })
        .collect()
}

/// What an append answers.
#[derive(Serialize, Deserialize, ToSchema, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Appended {
    pub stream: String,
    /// The first appended event's position in the global order.
    pub first_position: i64,
    /// The last appended event's position (the positions are consecutive).
    pub last_position: i64,
    /// The stream's version after the append.
    pub version: i64,
}

/// What a stream's deletion answers: its tombstone, the stream's last event.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Deleted {
    pub stream: String,
    /// The tombstone's position in the global order.
    pub position: i64,
    /// The tombstone's version in the stream.
    pub version: i64,
}

fn appended(stream: &StreamName, first: i64, last: i64, version: i64) -> Response {
    (
        StatusCode::CREATED,
        axum::Json(Appended {
            stream: stream.as_str().to_string(),
            first_position: first,
            last_position: last,
            version,
        }),
    )
        .into_response()
}

fn wrong_version(expected: Expected, current: Option<i64>) -> ApiError {
    let current = match current {
        Some(v) => format!("the stream's current version is {v}"),
        None => "the stream does not exist (current version: none)".into(),
    };
    ApiError::conflict(
        "wrong_expected_version",
        format!(
            "expected version {}, but {current}",
            model::expected_text(expected)
        ),
    )
}

fn stream_deleted(stream: &StreamName) -> ApiError {
    ApiError::new(
        StatusCode::GONE,
        "stream_deleted",
        format!("the stream '{}' was deleted", stream.as_str()),
    )
}

/// Appends events to a stream, all or none
///
/// Admin token. Appends one or more events to a stream, all or none, in JSON or
/// MessagePack. With `expectedVersion`, the append fails with 409 when the
/// stream has moved on. Appending the same event ids again returns the first
/// answer and writes nothing.
#[utoipa::path(post, path = "/api/events/streams/{stream}", tag = "events",
    params(("stream" = inline(StreamNameText), Path, description = "1 to 200 of A-Z a-z 0-9 - _ . : @, starting with a letter or digit; its category is the part before the first '-'"),
           ("Expected-Version" = inline(Option<ExpectedVersionText>), Header, description = "any (default), no_stream, exists, or the stream's current version (0 or more)")),
    security(("bearer" = [])),
    request_body(content = inline(AppendBody), description = "An array of 1 to --events-per-append-max (100) events {eventId: UUID, type: 1-128 of A-Z a-z 0-9 - _ . : starting with a letter, data: object, metadata?: object}. In MessagePack, data and metadata are maps, whole or as an LZ4 block (ext type 99: int32 uncompressed length, then the block). Data plus metadata at most --events-event-bytes-max (32768) bytes as uncompressed MessagePack. Appended all or none; stored as MessagePack maps with field names, LZ4-compressed when smaller.",
                 example = json!([{"eventId": "3f6c2a9e-8b1d-4e57-a0c4-9d2f7e1b5a63",
                 "type": "OrderPlaced", "data": {"orderId": 17, "total": 42.5}, "metadata": {"traceId": "a1b2c3"}}])),
    responses((status = 201, body = Appended, description = "The events' positions in the global order (consecutive) and the stream's new version. The same event ids appended again: the same answer, nothing written.",
               example = json!({"stream": "order-17", "firstPosition": 981, "lastPosition": 981, "version": 0})),
              (status = 400, description = "invalid_stream, invalid_expected_version, malformed_json, malformed_msgpack"),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden (not an admin token), stream_owned_by_service"),
              (status = 409, description = "wrong_expected_version (the message names the current version), event_ids_in_use (some of the ids were appended, but not as this append)"),
              (status = 410, description = "stream_deleted"),
              (status = 413, description = "event_too_large, payload_bomb (an LZ4 block claiming more than the limit)"),
              (status = 415, description = "unsupported_media_type"),
              (status = 422, description = "invalid_field, no_events, too_many_events, duplicate_event_id")))]
pub async fn append(
    caller: Caller,
    State(st): State<Arc<EventsState>>,
    ApiPath(stream): ApiPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    admin(&caller)?;
    let stream = StreamName::parse(&stream)?;
    writable(&st, &stream)?;
    let expected = model::expected_version(&headers)?;
    let content_type = model::essence(&headers, header::CONTENT_TYPE).unwrap_or_default();
    let events = if model::is_json(&content_type) {
        events_from_json(&st, &stream, &body)?
    } else if model::is_msgpack(&content_type) {
        events_from_msgpack(&st, &stream, &body)?
    } else {
        return Err(model::unsupported_media_type());
    };
    let mut ids = std::collections::HashSet::with_capacity(events.len());
    for (i, e) in events.iter().enumerate() {
        if !ids.insert(e.event_id) {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "duplicate_event_id",
                format!("event [{i}] repeats an earlier event's eventId"),
            ));
        }
    }
    let outcome = st
        .store
        .append_to_stream(StreamAppend {
            stream: stream.as_str().to_string(),
            expected,
            events,
        })
        .await?;
    match outcome {
        AppendOutcome::Appended {
            first_position,
            last_position,
            version,
        } => {
            st.appended.send_replace(last_position);
            Ok(appended(&stream, first_position, last_position, version))
        }
        AppendOutcome::AlreadyAppended {
            first_position,
            last_position,
            version,
        } => Ok(appended(&stream, first_position, last_position, version)),
        AppendOutcome::WrongExpectedVersion { current } => Err(wrong_version(expected, current)),
        AppendOutcome::StreamDeleted => Err(stream_deleted(&stream)),
        AppendOutcome::EventIdsInUse => Err(ApiError::conflict(
            "event_ids_in_use",
            "some of these event ids were appended before, but not as this append (other \
             events, stream or order)",
        )),
    }
}

/// Deletes a stream with a tombstone
///
/// Admin token. Ends a stream with a tombstone event. Its events keep their
/// places in the global order; reading the stream answers 410 from then on.
#[utoipa::path(delete, path = "/api/events/streams/{stream}", tag = "events",
    params(("stream" = inline(StreamNameText), Path),
           ("Expected-Version" = inline(Option<ExpectedVersionText>), Header, description = "any (default), exists, or the stream's current version")),
    security(("bearer" = [])),
    responses((status = 200, body = Deleted, description = "The tombstone ($streamDeleted), the stream's last event. Its events stay in the global order (no hole); the stream answers 410 from now on.",
               example = json!({"stream": "order-17", "position": 1204, "version": 3})),
              (status = 400, description = "invalid_stream, invalid_expected_version"),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden, stream_owned_by_service"),
              (status = 404, description = "stream_not_found"),
              (status = 409, description = "wrong_expected_version"),
              (status = 410, description = "stream_deleted (already)")))]
pub async fn delete_stream(
    caller: Caller,
    State(st): State<Arc<EventsState>>,
    ApiPath(stream): ApiPath<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    admin(&caller)?;
    let stream = StreamName::parse(&stream)?;
    writable(&st, &stream)?;
    let expected = match model::expected_version(&headers)? {
        // A tombstone is for a stream that exists.
        Expected::Any => Expected::Exists,
        e => e,
    };
    let tombstone = NewEvent {
        stream: stream.as_str().to_string(),
        event_type: TOMBSTONE_TYPE.to_string(),
        payload: codec::from_json(&json!({})),
        event_id: None,
        metadata: None,
        format: FORMAT_MSGPACK,
    };
    let outcome = st
        .store
        .append_to_stream(StreamAppend {
            stream: stream.as_str().to_string(),
            expected,
            events: vec![tombstone],
        })
        .await?;
    match outcome {
        AppendOutcome::Appended {
            last_position,
            version,
            ..
        } => {
            st.appended.send_replace(last_position);
            Ok(axum::Json(Deleted {
                stream: stream.as_str().to_string(),
                position: last_position,
                version,
            })
            .into_response())
        }
        AppendOutcome::WrongExpectedVersion { current: None } => Err(not_found(&stream)),
        AppendOutcome::WrongExpectedVersion { current } => Err(wrong_version(expected, current)),
        AppendOutcome::StreamDeleted => Err(stream_deleted(&stream)),
        other => {
            tracing::error!(?other, "unexpected outcome of a tombstone");
            Err(ApiError::internal())
        }
    }
}

fn not_found(stream: &StreamName) -> ApiError {
    ApiError::not_found(
        "stream_not_found",
        format!("the stream '{}' has no events", stream.as_str()),
    )
}

// ------------------------------------------------------------------- reads

/// An event as read.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct EventOut {
    /// Its place in the global order (1 or more).
    pub position: i64,
    pub stream: String,
    /// Its place in its stream (0 or more).
    pub version: i64,
    #[serde(rename = "type")]
    pub event_type: String,
    /// The UUID it was appended with; null for the services' own events.
    pub event_id: Option<String>,
    /// When it was committed, RFC 3339 with milliseconds.
    pub created: String,
    #[schema(value_type = Object)]
    pub data: Value,
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
}

/// A stream's page.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct StreamRead {
    pub stream: String,
    /// The stream's last version.
    pub version: i64,
    pub direction: Direction,
    pub events: Vec<EventOut>,
    /// The version to read from next; null at the end.
    pub next: Option<i64>,
}

/// The order a stream is read in.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Forward,
    Backward,
}

/// A page of the global order (all events, a category's, or a poll's).
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct LogPage {
    pub events: Vec<EventOut>,
    /// The position to read from next.
    pub next: i64,
    /// The last committed position.
    pub head: i64,
}

/// An event as JSON. `data`/`metadata` are decoded from the stored
/// MessagePack (or the services' JSON).
pub fn event_json(st: &EventsState, e: &StoredEvent) -> EventOut {
    let decode = |bytes: &[u8]| -> Value {
        let decoded = if e.format == FORMAT_JSON {
            serde_json::from_slice(bytes).map_err(|e| e.to_string())
        } else {
            // Stored by this store within the limit; the limit still holds.
            codec::stored_to_json(bytes, st.limits.event_bytes_max.max(1 << 20))
                .map_err(|e| e.to_string())
        };
        decoded.unwrap_or_else(|err| {
            tracing::error!(position = e.position, %err, "undecodable stored payload");
            Value::Null
        })
    };
    EventOut {
        position: e.position,
        stream: e.stream.clone(),
        version: e.version,
        event_type: e.event_type.clone(),
        event_id: e
            .event_id
            .as_deref()
            .and_then(|b| uuid::Uuid::from_slice(b).ok())
            .map(|u| u.to_string()),
        created: crate::base::clock::rfc3339_ms(e.created_at_ms),
        data: decode(&e.payload),
        metadata: e.metadata.as_deref().map(decode),
    }
}

/// The MessagePack of `e`: its fields, `data` and `metadata` as stored
/// (a map, or an LZ4 block in ext 99: the bytes of the store, not
/// re-encoded); the services' JSON payloads are converted.
fn event_msgpack(out: &mut Vec<u8>, e: &StoredEvent) {
    let w = |out: &mut Vec<u8>, k: &str| rmp::encode::write_str(out, k).expect("a Vec");
    rmp::encode::write_map_len(out, 8).expect("a Vec");
    w(out, "position");
    rmp::encode::write_sint(out, e.position).expect("a Vec");
    w(out, "stream");
    w(out, &e.stream);
    w(out, "version");
    rmp::encode::write_sint(out, e.version).expect("a Vec");
    w(out, "type");
    w(out, &e.event_type);
    w(out, "eventId");
    match e
        .event_id
        .as_deref()
        .and_then(|b| uuid::Uuid::from_slice(b).ok())
    {
        Some(id) => w(out, &id.to_string()),
        None => rmp::encode::write_nil(out).expect("a Vec"),
    }
    w(out, "created");
    w(out, &crate::base::clock::rfc3339_ms(e.created_at_ms));
    let raw = |out: &mut Vec<u8>, bytes: &[u8]| {
        if e.format == FORMAT_JSON {
            match serde_json::from_slice::<Value>(bytes) {
                Ok(v) => out.extend_from_slice(&codec::from_json(&v)),
                Err(_) => rmp::encode::write_nil(out).expect("a Vec"),
            }
        } else {
            out.extend_from_slice(bytes);
        }
    };
    w(out, "data");
    raw(out, &e.payload);
    w(out, "metadata");
    match &e.metadata {
        Some(m) => raw(out, m),
        None => rmp::encode::write_nil(out).expect("a Vec"),
    }
}

/// A read's answer: `build(events)`, as JSON or, when the client accepts it
/// first, as MessagePack with the stored payloads (the answer's other
/// fields, then `events`).
fn answer<T: Serialize>(
    st: &EventsState,
    headers: &HeaderMap,
    build: impl FnOnce(Vec<EventOut>) -> T,
    events: &[StoredEvent],
) -> Response {
    if model::wants_msgpack(headers) {
        let Ok(Value::Object(mut fields)) = serde_json::to_value(build(Vec::new())) else {
            unreachable!("an answer is an object")
        };
        fields.remove("events");
        let mut out =
            Vec::with_capacity(64 + events.iter().map(|e| e.payload.len() + 128).sum::<usize>());
        rmp::encode::write_map_len(&mut out, fields.len() as u32 + 1).expect("a Vec");
        for (k, v) in &fields {
            rmp::encode::write_str(&mut out, k).expect("a Vec");
            out.extend_from_slice(&codec::from_json(v));
        }
        rmp::encode::write_str(&mut out, "events").expect("a Vec");
        rmp::encode::write_array_len(&mut out, events.len() as u32).expect("a Vec");
        for e in events {
            event_msgpack(&mut out, e);
        }
        return ([(header::CONTENT_TYPE, "application/vnd.msgpack")], out).into_response();
    }
    let events = events.iter().map(|e| event_json(st, e)).collect();
    axum::Json(build(events)).into_response()
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StreamQuery {
    /// The first version to read (forward: default 0; backward: default the
    /// stream's last).
    #[param(value_type = Option<Position>, inline)]
    from: Option<u64>,
    /// forward (default) or backward.
    #[param(value_type = Option<DirectionText>, inline)]
    direction: Option<String>,
    /// Events at most, 1 to --events-read-max (1000); default 100.
    #[param(value_type = Option<ReadLimit>, inline)]
    limit: Option<u64>,
}

crate::schema_type!(
    /// `direction` (`read_stream`).
    DirectionText => ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(["forward", "backward"]))
        .build()
);

crate::schema_type!(
    /// A position or version (`position_of`).
    pub Position => crate::platform::openapi::int_schema(0, i64::MAX)
);

crate::schema_type!(
    /// `limit` (`limit_of`); its maximum is `--events-read-max`'s default.
    pub ReadLimit => crate::platform::openapi::int_schema(1, super::READ_MAX_DEFAULT)
);

pub(super) fn limit_of(st: &EventsState, limit: Option<u64>) -> ApiResult<i64> {
    let limit = limit.unwrap_or(100);
    if limit < 1 || limit > st.limits.read_max as u64 {
        return Err(ApiError::bad_request(
            "invalid_query",
            format!("limit: 1 to {} (--events-read-max)", st.limits.read_max),
        ));
    }
    Ok(limit as i64)
}

pub(super) fn position_of(v: Option<u64>, default: i64) -> ApiResult<i64> {
    match v {
        None => Ok(default),
        Some(v) if v <= i64::MAX as u64 => Ok(v as i64),
        Some(_) => Err(ApiError::bad_request(
            "invalid_query",
            "from: 0 to 9223372036854775807",
        )),
    }
}

/// Reads a stream's events, forward or backward
///
/// Admin token. A stream's events, forward or backward from a version, a page
/// at a time (`limit`).
#[utoipa::path(get, path = "/api/events/streams/{stream}", tag = "events",
    params(("stream" = inline(StreamNameText), Path), StreamQuery,
           ("Accept" = Option<String>, Header, description = "application/vnd.msgpack (or application/msgpack): the same answer in MessagePack, each event's data and metadata the stored bytes (a map, or an LZ4 block as MessagePack ext 99)")),
    security(("bearer" = [])),
    responses((status = 200, content((StreamRead = "application/json", example = json!({"stream": "order-17", "version": 0,
                   "direction": "forward", "next": null, "events": [{"position": 981, "stream": "order-17", "version": 0,
                   "type": "OrderPlaced", "eventId": "3f6c2a9e-8b1d-4e57-a0c4-9d2f7e1b5a63",
                   "created": "2030-01-02T09:30:00.000Z", "data": {"orderId": 17, "total": 42.5},
                   "metadata": {"traceId": "a1b2c3"}}]})),
                   (StreamRead = "application/vnd.msgpack")), description = "The stream's events from `from` on in `direction`"),
              (status = 400, description = "invalid_stream, invalid_query"),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden"),
              (status = 404, description = "stream_not_found"),
              (status = 410, description = "stream_deleted")))]
pub async fn read_stream(
    caller: Caller,
    State(st): State<Arc<EventsState>>,
    headers: HeaderMap,
    ApiPath(stream): ApiPath<String>,
    ApiQuery(q): ApiQuery<StreamQuery>,
) -> ApiResult<Response> {
    admin(&caller)?;
    let stream = StreamName::parse(&stream)?;
    let forward = match q.direction.as_deref() {
        None | Some("forward") => true,
        Some("backward") => false,
        Some(_) => {
            return Err(ApiError::bad_request(
                "invalid_query",
                "direction: forward or backward",
            ))
        }
    };
    let limit = limit_of(&st, q.limit)?;
    let from = position_of(q.from, if forward { 0 } else { i64::MAX })?;
    let head = st
        .store
        .stream_head(stream.as_str())
        .await?
        .ok_or_else(|| not_found(&stream))?;
    if head.deleted {
        return Err(stream_deleted(&stream));
    }
    let events = st
        .store
        .read_stream(stream.as_str(), from, forward, limit)
        .await?;
    let next = match events.last() {
        Some(last) if events.len() as i64 == limit => {
            if forward {
                Some(last.version + 1).filter(|v| *v <= head.version)
            } else {
                Some(last.version - 1).filter(|v| *v >= 0)
            }
        }
        _ => None,
    };
    let events: Vec<StoredEvent> = events
        .into_iter()
        .filter(|e| e.event_type != TOMBSTONE_TYPE)
        .collect();
    let build = |events| StreamRead {
        stream: stream.as_str().to_string(),
        version: head.version,
        direction: if forward {
            Direction::Forward
        } else {
            Direction::Backward
        },
        events,
        next,
    };
    Ok(answer(&st, &headers, build, &events))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AllQuery {
    /// The first position to read (default 1, the log's first).
    #[param(value_type = Option<Position>, inline)]
    from: Option<u64>,
    /// Events at most, 1 to --events-read-max (1000); default 100.
    #[param(value_type = Option<ReadLimit>, inline)]
    limit: Option<u64>,
    /// Only events of this type.
    #[serde(rename = "type")]
    #[param(value_type = Option<EventTypeText>, inline)]
    event_type: Option<String>,
    /// Only events whose type starts with this.
    #[param(value_type = Option<EventTypeText>, inline)]
    type_prefix: Option<String>,
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CategoryQuery {
    /// The first position to read (default 1).
    #[param(value_type = Option<Position>, inline)]
    from: Option<u64>,
    /// Events at most, 1 to --events-read-max (1000); default 100.
    #[param(value_type = Option<ReadLimit>, inline)]
    limit: Option<u64>,
}

async fn page(
    st: &EventsState,
    headers: &HeaderMap,
    from: Option<u64>,
    limit: Option<u64>,
    filter: Filter,
) -> ApiResult<Response> {
    let limit = limit_of(st, limit)?;
    let from = position_of(from, 1)?.max(1);
    let page = st
        .store
        .scan_events(from, limit, st.limits.scan_max, filter)
        .await?;
    let (next, head) = (page.next, page.head);
    let build = |events| LogPage { events, next, head };
    Ok(answer(st, headers, build, &page.events))
}

/// `type` and `typePrefix` are written as event types are (`model::parse_type`):
/// a filter no event type could match is a mistake worth naming.
fn type_filter(v: Option<String>, what: &str) -> ApiResult<Option<String>> {
    match v {
        Some(t) => match model::parse_type(&t) {
            Ok(()) => Ok(Some(t)),
            Err(e) => Err(ApiError::bad_request(
                "invalid_query",
                format!("{what}: {e}"),
            )),
        },
        None => Ok(None),
    }
}

/// A filter from query parameters.
pub(super) fn filter_of(
    event_type: Option<String>,
    type_prefix: Option<String>,
    category: Option<String>,
) -> ApiResult<Filter> {
    Ok(Filter {
        event_type: type_filter(event_type, "type")?,
        type_prefix: type_filter(type_prefix, "typePrefix")?,
        category: match category {
            Some(c) => Some(model::parse_category(&c).map_err(|e| {
                ApiError::bad_request("invalid_query", format!("category: {}", e.message))
            })?),
            None => None,
        },
    })
}

/// Reads every event in commit order, optionally by type
///
/// Admin token. Every event in commit order from a position, optionally only
/// those of some types; page by passing the last position read plus one as
/// `from`.
#[utoipa::path(get, path = "/api/events/all", tag = "events",
    params(AllQuery,
           ("Accept" = Option<String>, Header, description = "application/vnd.msgpack: MessagePack with the stored payloads, as for a stream")),
    security(("bearer" = [])),
    responses((status = 200, content((LogPage = "application/json", example = json!({"next": 982, "head": 981,
                   "events": [{"position": 981, "stream": "order-17", "version": 0, "type": "OrderPlaced",
                   "eventId": "3f6c2a9e-8b1d-4e57-a0c4-9d2f7e1b5a63", "created": "2030-01-02T09:30:00.000Z",
                   "data": {"orderId": 17, "total": 42.5}, "metadata": null}]})),
                   (LogPage = "application/vnd.msgpack")), description = "Every event in commit order, the services' included. With type or typePrefix, the matches among at most --events-scan-max (10,000) positions: a page may hold fewer than limit (even none) while next < head + 1."),
              (status = 400, description = "invalid_query"),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden")))]
pub async fn read_all(
    caller: Caller,
    State(st): State<Arc<EventsState>>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<AllQuery>,
) -> ApiResult<Response> {
    admin(&caller)?;
    let filter = filter_of(q.event_type, q.type_prefix, None)?;
    page(&st, &headers, q.from, q.limit, filter).await
}

/// Reads the events of a category's streams
///
/// Admin token. The events of every stream of a category (the part of a stream
/// name before its first `-`), in commit order.
#[utoipa::path(get, path = "/api/events/categories/{category}", tag = "events",
    params(("category" = inline(CategoryText), Path, description = "a stream name's part before its first '-'"), CategoryQuery,
           ("Accept" = Option<String>, Header, description = "application/vnd.msgpack: MessagePack with the stored payloads")),
    security(("bearer" = [])),
    responses((status = 200, content((LogPage = "application/json", example = json!({"next": 982, "head": 981,
                   "events": [{"position": 981, "stream": "order-17", "version": 0, "type": "OrderPlaced",
                   "eventId": "3f6c2a9e-8b1d-4e57-a0c4-9d2f7e1b5a63", "created": "2030-01-02T09:30:00.000Z",
                   "data": {"orderId": 17, "total": 42.5}, "metadata": null}]})),
                   (LogPage = "application/vnd.msgpack")), description = "As /api/events/all, for the streams {category}-... (and the stream named {category}), among at most --events-scan-max positions per page"),
              (status = 400, description = "invalid_category, invalid_query"),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden")))]
pub async fn read_category(
    caller: Caller,
    State(st): State<Arc<EventsState>>,
    headers: HeaderMap,
    ApiPath(category): ApiPath<String>,
    ApiQuery(q): ApiQuery<CategoryQuery>,
) -> ApiResult<Response> {
    admin(&caller)?;
    let category = model::parse_category(&category)?;
    let filter = Filter {
        category: Some(category),
        ..Filter::default()
    };
    page(&st, &headers, q.from, q.limit, filter).await
}
