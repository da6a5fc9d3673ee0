//! Booking routes. Booking itself is public (citizens have no account); the
//! statistics are for admins.

use std::sync::Arc;

use axum::extract::{FromRef, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::map_response;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use super::availability::SlotState;
use super::model::{
    national_id_key, Day, NewRegistration, OneRegistration, PlaceId, RegisterOutcome,
    RegistrationRequest, SealedRegistration, PLACES_PAGE_SIZE_DEFAULT, PLACES_PAGE_SIZE_MAX,
    SLOT_QUERY_DAYS_MAX,
};
use super::store::{self, CancelOutcome};
use super::BookingState;
use crate::platform::auth::{Caller, Role, TokenKeys};
use crate::platform::error::{ApiError, ApiResult};
use crate::platform::extract::{ApiJson, ApiPath, ApiQuery};
use crate::platform::{crypto, headers};

/// Booking's routes, for any state that gives `Arc<BookingState>` and the
/// token keys (see `platform::service`).
pub fn router<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<BookingState>: FromRef<S>,
    Arc<TokenKeys>: FromRef<S>,
{
    Router::new()
        .route("/api/booking/places", get(list_places))
        .route("/api/booking/places/{place_id}/slots", get(place_slots))
        // An access code (POST) and personal data (GET): never cached.
        .route(
            "/api/booking/registrations",
            post(register).layer(map_response(headers::no_store)),
        )
        .route(
            "/api/booking/registrations/{registration_id}",
            get(get_registration)
                .delete(cancel_registration)
                .layer(map_response(headers::no_store_vary_access_code)),
        )
        .route("/api/booking/admin/stats", get(stats))
        .route(
            "/api/booking/admin/notifications/parked",
            get(parked_notifications),
        )
        .merge(super::page::router())
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PlacesQuery {
    /// Places to skip (default 0).
    skip: Option<i64>,
    /// Places per page, 1 to 100 (default 20).
    size: Option<i64>,
}

#[utoipa::path(get, path = "/api/booking/places", params(PlacesQuery), tag = "booking",
    responses((status = 200, description = "A page of places: {places:[{id,name,address}], skip, size, total}")))]
pub async fn list_places(
    State(st): State<Arc<BookingState>>,
    ApiQuery(q): ApiQuery<PlacesQuery>,
) -> ApiResult<Json<serde_json::Value>> {
    let skip = q.skip.unwrap_or(0);
    let size = q.size.unwrap_or(PLACES_PAGE_SIZE_DEFAULT);
    if skip < 0 {
        return Err(ApiError::invalid_field("skip: 0 or more"));
    }
    if !(1..=PLACES_PAGE_SIZE_MAX).contains(&size) {
        return Err(ApiError::invalid_field(format!(
            "size: 1 to {PLACES_PAGE_SIZE_MAX}"
        )));
    }
    let (places, total) = store::list_places(&st.store, skip, size).await?;
    Ok(Json(
        serde_json::json!({ "places": places, "skip": skip, "size": size, "total": total }),
    ))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct SlotsQuery {
    /// First day, YYYY-MM-DD.
    from: String,
    /// Days from `from`, 1 to 14 (default 1).
    days: Option<u32>,
}

#[utoipa::path(get, path = "/api/booking/places/{place_id}/slots", params(SlotsQuery, ("place_id" = i64, Path)),
    tag = "booking",
    responses((status = 200, description = "Per day, each time slot with its start and whether it is free"),
              (status = 404, description = "Unknown place")))]
pub async fn place_slots(
    State(st): State<Arc<BookingState>>,
    ApiPath(place_id): ApiPath<i64>,
    ApiQuery(q): ApiQuery<SlotsQuery>,
) -> ApiResult<Response> {
    let from = Day::parse("from", &q.from)?;
    let days = q.days.unwrap_or(1);
    if !(1..=SLOT_QUERY_DAYS_MAX).contains(&days) {
        return Err(ApiError::invalid_field(format!(
            "days: 1 to {SLOT_QUERY_DAYS_MAX}"
        )));
    }
    // Days past 9999-12-31 have no YYYY-MM-DD form (they rendered as -9999-01-01).
    if from.plus(days as i32 - 1) > Day::from_date(time::Date::MAX) {
        return Err(ApiError::invalid_field(
            "days: the range must end by 9999-12-31",
        ));
    }
    if !PlaceId::exists_in_range(place_id) {
        return Err(place_not_found(place_id));
    }
    st.with_place_slots(place_id, from, days as i32, |place, slots| {
        render_slots(place, from, days as i32, slots)
    })
    .await?
    .ok_or_else(|| place_not_found(place_id))
}

/// Renders the slot page by hand: this is the hottest read, and writing the
/// JSON straight into one buffer avoids building a tree of values.
fn render_slots(
    place: &super::model::Place,
    from: Day,
    days: i32,
    slots: &[store::SlotRow],
) -> Response {
    // Integers through itoa and days through `Day::write_text`: no
    // `core::fmt` machinery and no allocation per slot.
    let mut int = itoa::Buffer::new();
    let mut out = String::with_capacity(64 + days.max(0) as usize * 32 + slots.len() * 48);
    out.push_str("{\"placeId\":");
    out.push_str(int.format(place.id));
    out.push_str(",\"from\":\"");
    from.write_text(&mut out);
    out.push_str("\",\"days\":[");
    let mut i = 0;
    for d in 0..days {
        let day = from.plus(d);
        if d > 0 {
            out.push(',');
        }
        out.push_str("{\"day\":\"");
        day.write_text(&mut out);
        out.push_str("\",\"slots\":[");
        let mut first = true;
        while i < slots.len() && slots[i].day == day {
            let s = &slots[i];
            if !first {
                out.push(',');
            }
            first = false;
            let m = place.first_slot_minute + s.time_slot * place.slot_minutes;
            let (h, m) = (((m / 60) % 24) as u8, (m % 60) as u8);
            out.push_str("{\"timeSlot\":");
            out.push_str(int.format(s.time_slot));
            out.push_str(",\"start\":\"");
            for digit in [h / 10, h % 10] {
                out.push((b'0' + digit) as char);
            }
            out.push(':');
            for digit in [m / 10, m % 10] {
                out.push((b'0' + digit) as char);
            }
            out.push_str(if s.free {
                "\",\"free\":true}"
            } else {
                "\",\"free\":false}"
            });
            i += 1;
        }
        out.push_str("]}");
    }
    out.push_str("]}");
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        out,
    )
        .into_response()
}

fn place_not_found(id: i64) -> ApiError {
    ApiError::not_found("place_not_found", format!("no place with id {id}"))
}

#[utoipa::path(post, path = "/api/booking/registrations", tag = "booking",
    request_body(content = serde_json::Value, description = "{placeId, day: YYYY-MM-DD, timeSlot, person:{name, nationalId, phone, email}}"),
    responses((status = 201, description = "{registrationId, accessCode, placeId, day, timeSlot}"),
              (status = 409, description = "slot_taken, or already_registered: the person (by national id) already holds a registration (per --booking-one-registration: at all, or that day)"), (status = 404, description = "place_not_found or slot_not_found"),
              (status = 422, description = "invalid_field, naming the field"), (status = 429, description = "over capacity; see Retry-After")))]
pub async fn register(
    State(st): State<Arc<BookingState>>,
    ApiJson(req): ApiJson<RegistrationRequest>,
) -> ApiResult<Response> {
    let new = req.parse()?;
    match st.known_state(new.place_id, new.day, new.time_slot) {
        Some(SlotState::Taken) => return Err(slot_taken()),
        Some(SlotState::UnknownPlace) => return Err(place_not_found(new.place_id)),
        Some(SlotState::UnknownSlot) => return Err(slot_not_found(&new)),
        Some(SlotState::Free) | None => {}
    }
    let access_code = crypto::random_token(16);
    let sealed = seal(&st, &new, &access_code);
    let id = sealed.id.clone();
    match st.try_register(sealed).await? {
        RegisterOutcome::Registered => {
            let body = Registered {
                registration_id: &id,
                access_code: &access_code,
                place_id: new.place_id,
                day: new.day.to_text(),
                time_slot: new.time_slot,
            };
            Ok((StatusCode::CREATED, Json(body)).into_response())
        }
        RegisterOutcome::SlotTaken => Err(slot_taken()),
        RegisterOutcome::AlreadyRegistered => Err(already_registered(st.one_registration)),
        RegisterOutcome::PlaceNotFound => Err(place_not_found(new.place_id)),
        RegisterOutcome::SlotNotFound => Err(slot_not_found(&new)),
    }
}

/// The 201 answer of a registration.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Registered<'a> {
    registration_id: &'a str,
    access_code: &'a str,
    place_id: i64,
    day: String,
    time_slot: i32,
}

fn slot_taken() -> ApiError {
    ApiError::conflict(
        "slot_taken",
        "this time slot is already taken; choose another",
    )
}

fn already_registered(rule: OneRegistration) -> ApiError {
    ApiError::conflict(
        "already_registered",
        match rule {
            OneRegistration::PersonDay => {
                "this person already holds a registration on this day; cancel it (DELETE with \
                 its access code) to book another"
            }
            _ => {
                "this person already holds a registration; cancel it (DELETE with its access \
                 code) to book another"
            }
        },
    )
}

fn slot_not_found(new: &NewRegistration) -> ApiError {
    ApiError::not_found(
        "slot_not_found",
        format!(
            "place {} has no time slot {} on {}",
            new.place_id,
            new.time_slot,
            new.day.to_text()
        ),
    )
}

fn seal(st: &BookingState, new: &NewRegistration, access_code: &str) -> SealedRegistration {
    // Time-ordered (v7) ids append at the right edge of the primary-key B-tree
    // instead of landing on a random page; the access code is what guards access.
    let id = uuid::Uuid::now_v7().to_string();
    let person = serde_json::to_vec(&new.person).expect("person serializes");
    SealedRegistration {
        person_sealed: st.pii.seal(&id, &person),
        id,
        access_hash: crypto::hash_code(access_code),
        place_id: new.place_id,
        day: new.day,
        time_slot: new.time_slot,
        created_at_ms: crate::base::clock::now_ms(),
        person_key: st.one_registration.scope(new.day).map(|scope| {
            st.blind_index
                .of(&scope, &national_id_key(&new.person.national_id))
                .to_vec()
        }),
    }
}

fn access_code(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("x-access-code")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

fn registration_not_found() -> ApiError {
    // The same answer for a wrong code and a missing registration, so codes
    // cannot be probed.
    ApiError::not_found(
        "registration_not_found",
        "no registration with this id and access code (send it in X-Access-Code)",
    )
}

/// Registration ids are UUIDs; anything else cannot exist.
fn plausible_id(id: &str) -> bool {
    id.len() == 36 && uuid::Uuid::parse_str(id).is_ok()
}

#[utoipa::path(get, path = "/api/booking/registrations/{registration_id}", tag = "booking",
    params(("registration_id" = String, Path), ("X-Access-Code" = String, Header)),
    responses((status = 200, description = "The registration with the person's data"),
              (status = 404, description = "Unknown id or wrong access code")))]
pub async fn get_registration(
    State(st): State<Arc<BookingState>>,
    ApiPath(id): ApiPath<String>,
    headers: HeaderMap,
) -> ApiResult<Json<serde_json::Value>> {
    let code = access_code(&headers).ok_or_else(registration_not_found)?;
    if !plausible_id(&id) {
        return Err(registration_not_found());
    }
    let reg = store::registration(&st.store, &id)
        .await?
        .ok_or_else(registration_not_found)?;
    if !crypto::code_matches(code, &reg.access_hash) {
        return Err(registration_not_found());
    }
    let person_json = st.pii.open(&reg.id, &reg.person_sealed).ok_or_else(|| {
        tracing::error!(registration_id = %reg.id, "sealed personal data does not open with this key");
        ApiError::internal()
    })?;
    let person: serde_json::Value =
        serde_json::from_slice(&person_json).map_err(|_| ApiError::internal())?;
    let place = st.place(reg.place_id).await?;
    Ok(Json(serde_json::json!({
        "registrationId": reg.id,
        "placeId": reg.place_id,
        "placeName": place.as_ref().map(|p| p.name.clone()),
        "day": reg.day.to_text(),
        "timeSlot": reg.time_slot,
        "start": place.as_ref().map(|p| p.slot_start(reg.time_slot)),
        "createdAt": crate::base::clock::rfc3339_ms(reg.created_at_ms),
        "person": person,
    })))
}

#[utoipa::path(delete, path = "/api/booking/registrations/{registration_id}", tag = "booking",
    params(("registration_id" = String, Path), ("X-Access-Code" = String, Header)),
    responses((status = 204, description = "Cancelled; the slot is free again"),
              (status = 404, description = "Unknown id or wrong access code")))]
pub async fn cancel_registration(
    State(st): State<Arc<BookingState>>,
    ApiPath(id): ApiPath<String>,
    headers: HeaderMap,
) -> ApiResult<StatusCode> {
    let code = access_code(&headers).ok_or_else(registration_not_found)?;
    if !plausible_id(&id) {
        return Err(registration_not_found());
    }
    match st.cancel(&id, code).await? {
        CancelOutcome::Cancelled { .. } => Ok(StatusCode::NO_CONTENT),
        CancelOutcome::NotFound => Err(registration_not_found()),
    }
}

#[utoipa::path(get, path = "/api/booking/admin/stats", tag = "booking",
    security(("bearer" = [])),
    responses((status = 200, description = "Counts and the notifier's position in the event log"),
              (status = 401, description = "No or bad token"), (status = 403, description = "Not an admin")))]
pub async fn stats(
    State(st): State<Arc<BookingState>>,
    caller: Caller,
) -> ApiResult<Json<store::BookingStats>> {
    caller.require(Role::Admin)?;
    Ok(Json(
        store::stats(&st.store, super::notifier::CONSUMER).await?,
    ))
}

/// Parked confirmations listed at most.
const PARKED_LISTED_MAX: i64 = 1000;

#[utoipa::path(get, path = "/api/booking/admin/notifications/parked", tag = "booking",
    security(("bearer" = [])),
    responses((status = 200, description = "{count, parked:[{position, registrationId, reason, attempts, parkedAtMs}]}: confirmations the notifier gave up on (after --notify-attempts-max, or refused by the gateway), oldest first, at most 1000; no personal data"),
              (status = 401, description = "No or bad token"), (status = 403, description = "Not an admin")))]
pub async fn parked_notifications(
    State(st): State<Arc<BookingState>>,
    caller: Caller,
) -> ApiResult<Json<serde_json::Value>> {
    caller.require(Role::Admin)?;
    let (parked, count) = store::parked_notifications(&st.store, PARKED_LISTED_MAX).await?;
    Ok(Json(
        serde_json::json!({ "count": count, "parked": parked }),
    ))
}

#[derive(utoipa::OpenApi)]
#[openapi(paths(
    list_places,
    place_slots,
    register,
    get_registration,
    cancel_registration,
    stats,
    parked_notifications
))]
pub struct BookingApi;

/// The bounds the handlers check, stated in the document from the same
/// constants (`platform::openapi`).
pub fn document_limits(doc: &mut serde_json::Value) {
    use super::model::{
        EMAIL_CHARS_MAX, NAME_CHARS_MAX, NATIONAL_ID_CHARS_MAX, PHONE_DIGITS_MAX, PHONE_DIGITS_MIN,
        SLOTS_PER_DAY_MAX,
    };
    use crate::platform::openapi::{
        body_schema, param_range, param_required, param_schema, response, text_schema,
    };
    use serde_json::json;
    let places = "/api/booking/places";
    param_range(doc, "get", places, "skip", 0, i64::MAX);
    param_range(doc, "get", places, "size", 1, PLACES_PAGE_SIZE_MAX);
    response(
        doc,
        "get",
        places,
        422,
        "invalid_field: skip or size out of range",
    );
    let slots = "/api/booking/places/{place_id}/slots";
    param_required(doc, "get", slots, "from");
    param_schema(doc, "get", slots, "from")["format"] = json!("date");
    param_range(doc, "get", slots, "days", 1, SLOT_QUERY_DAYS_MAX as i64);
    response(
        doc,
        "get",
        slots,
        422,
        "invalid_field: from is not a date, days out of range, or the range ends after 9999-12-31",
    );
    let person = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["name", "nationalId", "phone", "email"],
        "properties": {
            "name": text_schema(1, NAME_CHARS_MAX, false),
            "nationalId": {"type": "string", "pattern": format!("^[A-Za-z0-9/-]{{1,{NATIONAL_ID_CHARS_MAX}}}$")},
            "phone": {"type": "string", "pattern": format!("^\\+?([0-9] ?){{{PHONE_DIGITS_MIN},{PHONE_DIGITS_MAX}}}$")},
            "email": {"type": "string", "maxLength": EMAIL_CHARS_MAX,
                      "pattern": "^[^@\\s\\x00-\\x1f\\x7f-\\x9f]+@[^@.\\s\\x00-\\x1f\\x7f-\\x9f]+(\\.[^@.\\s\\x00-\\x1f\\x7f-\\x9f]+)+$"}
        }
    });
    body_schema(
        doc,
        "post",
        "/api/booking/registrations",
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["placeId", "day", "timeSlot", "person"],
            "properties": {
                "placeId": {"type": "integer", "format": "int64", "minimum": 1, "maximum": i64::MAX},
                "day": {"type": "string", "format": "date"},
                "timeSlot": {"type": "integer", "minimum": 0, "maximum": SLOTS_PER_DAY_MAX - 1},
                "person": person
            }
        }),
    );
}
