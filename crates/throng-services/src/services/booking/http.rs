//! Booking routes. Booking itself is public (citizens have no account); the
//! statistics are for admins.

use std::sync::Arc;

use axum::extract::{FromRef, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::map_response;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::KnownFormat;
use utoipa::ToSchema;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;

use super::availability::SlotState;
use super::model::{
    national_id_key, Day, MoveOutcome, MoveRequest, NewRegistration, OneRegistration, Person,
    Place, PlaceClock, PlaceId, RegisterOutcome, RegistrationRequest, SealedRegistration, SlotRef,
    EMAIL_CHARS_MAX, NAME_CHARS_MAX, NATIONAL_ID_CHARS_MAX, PHONE_DIGITS_MAX, PHONE_DIGITS_MIN,
    PLACES_PAGE_SIZE_DEFAULT, PLACES_PAGE_SIZE_MAX, PLACE_ID_MAX, PLACE_ID_MIN, SLOTS_PER_DAY_MAX,
    SLOT_QUERY_DAYS_MAX,
};
use super::store::{self, BookingStats, CancelOutcome, ParkedNotification};
use super::BookingState;
use crate::platform::auth::{Caller, Role, TokenKeys};
use crate::platform::error::{ApiError, ApiResult};
use crate::platform::extract::{ApiJson, ApiPath, ApiQuery};
use crate::platform::headers;
use crate::platform::openapi::{
    closed_object, format_schema, int_schema, pattern_schema, small_int_schema, text_schema,
};

/// Booking's routes and their operations, for any state that gives
/// `Arc<BookingState>` and the token keys (see `platform::service`).
pub fn routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<BookingState>: FromRef<S>,
    Arc<TokenKeys>: FromRef<S>,
    Arc<crate::platform::session::Sessions>: FromRef<S>,
{
    OpenApiRouter::default()
        .routes(routes!(list_places))
        .routes(routes!(place_filters))
        .routes(routes!(place_slots))
        // An access code (POST) and personal data (GET): never cached.
        .routes(routes!(register).layer(map_response(headers::no_store)))
        .routes(
            routes!(get_registration, cancel_registration)
                .layer(map_response(headers::no_store_vary_access_code)),
        )
        .routes(routes!(move_registration).layer(map_response(headers::no_store_vary_access_code)))
        .routes(routes!(registration_ics).layer(map_response(headers::no_store_vary_access_code)))
        .routes(routes!(place_calendar))
        .routes(routes!(stats))
        .routes(routes!(parked_notifications))
        .merge(super::backoffice::http::routes())
        .merge(super::places::http::routes())
        .merge(super::page::router().into())
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PlacesQuery {
    /// Places to skip after the cursor (default 0).
    #[param(value_type = Option<Skip>, inline)]
    skip: Option<i64>,
    /// Places per page (default 20).
    #[param(value_type = Option<PlacesPageSize>, inline)]
    size: Option<i64>,
    /// Part of the name, city or postcode, any case.
    #[param(value_type = Option<SearchText>, inline)]
    q: Option<String>,
    /// The region, exactly.
    #[param(value_type = Option<RegionText>, inline)]
    region: Option<String>,
    /// A service code the place offers.
    #[param(value_type = Option<ServiceCode>, inline)]
    service: Option<String>,
    /// `nextCursor` of the page before: the next page starts after it.
    #[param(value_type = Option<PlaceCursor>, inline)]
    cursor: Option<i64>,
}

/// Characters of a search text at most.
pub const SEARCH_CHARS_MAX: usize = 100;

crate::schema_type!(pub SearchText => text_schema(0, SEARCH_CHARS_MAX, false));
crate::schema_type!(pub RegionText => text_schema(0, super::places::REGION_CHARS_MAX, false));
crate::schema_type!(pub ServiceCode => pattern_schema(format!("^[a-z0-9_-]{{0,{}}}$", super::places::SERVICE_CHARS_MAX)));
crate::schema_type!(PlaceCursor => int_schema(0, PLACE_ID_MAX));

impl PlacesQuery {
    /// The search asked for, checked.
    pub fn search(&self) -> Result<store::PlaceSearch, ApiError> {
        search_of(
            self.q.as_deref(),
            self.region.as_deref(),
            self.service.as_deref(),
        )
    }
}

/// A place search from its query parameters, each checked.
pub fn search_of(
    q: Option<&str>,
    region: Option<&str>,
    service: Option<&str>,
) -> Result<store::PlaceSearch, ApiError> {
    let q = q.unwrap_or("").trim();
    let refused = |c: char| crate::platform::openapi::refused_char(c, false);
    if q.chars().count() > SEARCH_CHARS_MAX || q.chars().any(refused) {
        return Err(ApiError::invalid_field(format!(
            "q: at most {SEARCH_CHARS_MAX} characters, no control characters"
        )));
    }
    let region = region.unwrap_or("").trim();
    if region.chars().count() > super::places::REGION_CHARS_MAX || region.chars().any(refused) {
        return Err(ApiError::invalid_field(format!(
            "region: at most {} characters, no control characters",
            super::places::REGION_CHARS_MAX
        )));
    }
    let service = match service.map(str::trim).filter(|s| !s.is_empty()) {
        None => String::new(),
        Some(s) => super::places::services(&[s.to_string()])
            .map_err(|e| ApiError::invalid_field(format!("service: {}", e.message)))?
            .remove(0),
    };
    Ok(store::PlaceSearch {
        q: q.to_string(),
        region: region.to_string(),
        service,
    })
}

crate::schema_type!(Skip => int_schema(0, i64::MAX));
crate::schema_type!(PlacesPageSize => int_schema(1, PLACES_PAGE_SIZE_MAX));

/// A place in a path: ids outside the range are never found (404).
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct PlacePath {
    #[param(value_type = PlaceIdRange, inline)]
    place_id: i64,
}

crate::schema_type!(PlaceIdRange => int_schema(PLACE_ID_MIN, PLACE_ID_MAX));

/// A page of places.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct PlacesPage {
    pub places: Vec<Place>,
    pub skip: i64,
    pub size: i64,
    /// Places in all (matching the search).
    pub total: i64,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(default)]
    pub next_cursor: Option<i64>,
}

/// A page of places, in id order, by name, city, postcode, region or service
///
/// Public. Searches places by part of the name, city or postcode (`q`, any
/// case), narrowed by `region` and `service`, in id order. Pass `nextCursor` of
/// one page as `cursor` to read the next.
#[utoipa::path(get, path = "/api/booking/places", params(PlacesQuery), tag = "booking",
    responses((status = 200, body = PlacesPage, description = "A page of the places matching q (part of the name, city or postcode, any case), region and service, in id order; nextCursor continues it",
               example = json!({"places": [{"id": 1, "code": "BA-01", "name": "Town hall", "address": "Main square 1",
                                            "city": "Bratislava", "postcode": "811 01", "region": "BA",
                                            "timeZone": "Europe/Bratislava", "latitude": 48.14, "longitude": 17.11,
                                            "services": ["vaccine-flu"], "slotMinutes": 15, "seats": 2,
                                            "hours": "Mo-Fr 08:00-12:00,13:00-16:00", "bookAheadDays": 60, "noticeMinutes": 60}],
                                "skip": 0, "size": 20, "total": 1})),
              (status = 422, description = "invalid_field: skip, size, q, region, service or cursor out of range")))]
pub async fn list_places(
    State(st): State<Arc<BookingState>>,
    ApiQuery(q): ApiQuery<PlacesQuery>,
) -> ApiResult<Json<PlacesPage>> {
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
    let search = q.search()?;
    let after = q.cursor.unwrap_or(0);
    if !(0..=PLACE_ID_MAX).contains(&after) {
        return Err(ApiError::invalid_field(format!(
            "cursor: 0 to {PLACE_ID_MAX}"
        )));
    }
    let (places, total) = st.storage.search_places(search, after, skip, size).await?;
    let next_cursor = (places.len() as i64 == size)
        .then(|| places.last().map(|p| p.id))
        .flatten();
    Ok(Json(PlacesPage {
        places,
        skip,
        size,
        total,
        next_cursor,
    }))
}

/// A value a place search can be narrowed by, and how many places have it.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct FilterValue {
    pub value: String,
    pub places: i64,
}

/// What a place search can be narrowed by.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct PlaceFilters {
    /// The places' regions, in order (`region` of a search).
    pub regions: Vec<FilterValue>,
    /// The services places offer, in order (`service` of a search).
    pub services: Vec<FilterValue>,
}

/// The regions and services a place search can be narrowed by
///
/// Public. Every region and service places have, each with its count of places:
/// the choices a search form offers for `region` and `service`.
#[utoipa::path(get, path = "/api/booking/places/filters", tag = "booking",
    responses((status = 200, body = PlaceFilters, description = "Every region places are in and every service they offer, each with its count of places, in order: the choices of a search's region and service",
               example = json!({"regions": [{"value": "BA", "places": 120}, {"value": "KE", "places": 95}],
                                "services": [{"value": "test-pcr", "places": 40}, {"value": "vaccine-flu", "places": 180}]}))))]
pub async fn place_filters(State(st): State<Arc<BookingState>>) -> ApiResult<Json<PlaceFilters>> {
    let (regions, services) = st.storage.place_filters().await?;
    let values = |v: Vec<(String, i64)>| {
        v.into_iter()
            .map(|(value, places)| FilterValue { value, places })
            .collect()
    };
    Ok(Json(PlaceFilters {
        regions: values(regions),
        services: values(services),
    }))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct SlotsQuery {
    /// First day, YYYY-MM-DD.
    #[param(format = Date, example = "2030-01-07")]
    from: String,
    /// Days from `from` (default 1).
    #[param(value_type = Option<SlotDays>, inline)]
    days: Option<u32>,
}

crate::schema_type!(SlotDays => int_schema(1, SLOT_QUERY_DAYS_MAX.into()));

/// A place's slots, per day. Written by `render_slots`; this type is its
/// shape.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SlotsPage {
    pub place_id: i64,
    /// YYYY-MM-DD.
    pub from: String,
    pub days: Vec<SlotsDay>,
}

/// A day's slots.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SlotsDay {
    /// YYYY-MM-DD.
    pub day: String,
    pub slots: Vec<SlotOut>,
}

/// A time slot.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SlotOut {
    pub time_slot: i32,
    /// HH:MM.
    pub start: String,
    /// A seat is left and the slot can still be booked.
    pub free: bool,
    /// People the slot takes.
    pub seats: i32,
    /// Seats not taken (0 once the slot has started).
    pub seats_left: i32,
}

/// A place's time slots, per day, and which are free
///
/// Public. A place's time slots from `from`, for `days` days: each with its
/// start in the place's time zone, its seats, the seats left and whether it can
/// be booked now. A slot that has started, or is closer than the place's
/// minimum notice, is not free.
#[utoipa::path(get, path = "/api/booking/places/{place_id}/slots", params(SlotsQuery, PlacePath),
    tag = "booking",
    responses((status = 200, body = SlotsPage, description = "Per day, each time slot with its start (at the place's time zone, or --booking-utc-offset), its seats and seats left, and whether it is free; a slot that has started, or is closer than the place's minimum notice, is never free",
               example = json!({"placeId": 1, "from": "2030-01-07", "days": [{"day": "2030-01-07", "slots": [
                   {"timeSlot": 0, "start": "08:00", "free": true, "seats": 2, "seatsLeft": 1},
                   {"timeSlot": 1, "start": "08:15", "free": false, "seats": 2, "seatsLeft": 0}]}]})),
              (status = 404, description = "Unknown place"),
              (status = 422, description = "invalid_field: from is not a date, days out of range, or the range ends after 9999-12-31")))]
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
    let (clock, now_ms) = (st.clock, crate::base::clock::now_ms());
    st.storage
        .with_place_slots(place_id, from, days as i32, |place, slots| {
            render_slots(
                place,
                from,
                days as i32,
                slots,
                place.policy().clock(clock, now_ms),
            )
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
    now: PlaceClock,
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
            // A slot that has started (or is closer than the notice) is
            // not offered.
            let bookable = now.bookable(day, m);
            let free = s.free() && bookable;
            let left = if bookable { s.seats_left.max(0) } else { 0 };
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
            out.push_str(if free {
                "\",\"free\":true,\"seats\":"
            } else {
                "\",\"free\":false,\"seats\":"
            });
            out.push_str(int.format(s.seats));
            out.push_str(",\"seatsLeft\":");
            out.push_str(int.format(left));
            out.push('}');
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

pub(super) fn place_not_found(id: i64) -> ApiError {
    ApiError::not_found("place_not_found", format!("no place with id {id}"))
}

/// Books a free time slot for a person
///
/// Public. Books a free slot for the person in the body. The answer holds the
/// registration id and its access code: both are needed to read, move or cancel
/// it later, and are sent to the person's contact. A full slot answers 409
/// `slot_full`; a person who already holds a registration answers 409
/// `already_registered`.
#[utoipa::path(post, path = "/api/booking/registrations", tag = "booking",
    request_body(content = inline(RegistrationRequest), description = "{placeId, day: YYYY-MM-DD, timeSlot, person:{name, nationalId, phone, email}}",
                 example = json!({"placeId": 1, "day": "2030-01-07", "timeSlot": 0,
                                  "person": {"name": "Ana Horvat", "nationalId": "12345678901",
                                             "phone": "+385 91 234 5678", "email": "ana@example.org"}})),
    responses((status = 201, body = Registered, description = "The registration; keep the access code",
               example = json!({"registrationId": "01943b6e-8f1a-7c3e-9a4b-2d5e6f708192",
                                "accessCode": "K7QM-3XHT-9WCF", "placeId": 1, "day": "2030-01-07", "timeSlot": 0})),
              (status = 409, description = "slot_full: every seat of the slot is taken, or already_registered: the person (by national id) already holds a registration (per --booking-one-registration: at all, or that day)"), (status = 404, description = "place_not_found or slot_not_found"),
              (status = 422, description = "invalid_field, naming the field; day_passed: the day is before today; slot_passed: today's slot has already started; notice_too_short: the slot starts sooner than the place's minimum notice (slot times are at the place's time zone, or --booking-utc-offset)"), (status = 429, description = "over capacity; see Retry-After")))]
pub async fn register(
    State(st): State<Arc<BookingState>>,
    ApiJson(req): ApiJson<RegistrationRequest>,
) -> ApiResult<Response> {
    let new = req.parse()?;
    refuse_passed(&st, new.place_id, new.day, new.time_slot).await?;
    match st.storage.known_state(new.place_id, new.day, new.time_slot) {
        Some(SlotState::Taken) => return Err(slot_full()),
        Some(SlotState::UnknownPlace) => return Err(place_not_found(new.place_id)),
        Some(SlotState::UnknownSlot) => return Err(slot_not_found(&new)),
        Some(SlotState::Free) | None => {}
    }
    let access_code = super::access_code::mint();
    let sealed = seal(&st, &new, &access_code);
    let id = sealed.id.clone();
    match st.try_register(sealed).await? {
        RegisterOutcome::Registered => {
            let body = Registered {
                registration_id: id,
                access_code,
                place_id: new.place_id,
                day: new.day.to_text(),
                time_slot: new.time_slot,
            };
            Ok((StatusCode::CREATED, Json(body)).into_response())
        }
        RegisterOutcome::SlotTaken => Err(slot_full()),
        RegisterOutcome::AlreadyRegistered => Err(already_registered(st.one_registration)),
        RegisterOutcome::PlaceNotFound => Err(place_not_found(new.place_id)),
        RegisterOutcome::SlotNotFound => Err(slot_not_found(&new)),
    }
}

/// The 201 answer of a registration.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Registered {
    pub registration_id: String,
    /// Opens, moves and cancels the registration (X-Access-Code); shown
    /// once. Twelve letters without 0/O or 1/I/l, in groups of four; typed
    /// in any case, with or without the dashes.
    pub access_code: String,
    pub place_id: i64,
    /// YYYY-MM-DD.
    pub day: String,
    pub time_slot: i32,
}

/// A registration with the person's data.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationOut {
    pub registration_id: String,
    pub place_id: i64,
    pub place_name: Option<String>,
    /// YYYY-MM-DD.
    pub day: String,
    pub time_slot: i32,
    /// HH:MM.
    pub start: Option<String>,
    pub address: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    #[schema(value_type = Person)]
    pub person: serde_json::Value,
}

/// Days past the server's today within which the place's own clock (its
/// time zone, its notice) is read: every zone's today is within a day of
/// the server's, and the notice is at most `NOTICE_MINUTES_MAX`.
const POLICY_DAYS_AHEAD: i32 = 2 + super::places::NOTICE_MINUTES_MAX / (24 * 60);

/// A day before today, or a slot whose start has passed or is closer than
/// the place's minimum notice (at the place's time zone, or the booking's
/// offset), cannot be booked or moved to: 422 naming the field.
pub(super) async fn refuse_passed(
    st: &BookingState,
    place_id: i64,
    day: Day,
    time_slot: i32,
) -> Result<(), ApiError> {
    let now_ms = crate::base::clock::now_ms();
    let server = st.clock.at_ms(now_ms);
    if day < server.today.plus(-1) {
        return Err(day_passed(day, server.today));
    }
    if day > server.today.plus(POLICY_DAYS_AHEAD) {
        return Ok(());
    }
    // Near today: the place's clock decides (an unknown place answers 404
    // later).
    let Some(policy) = st.storage.policy(place_id).await? else {
        return Ok(());
    };
    let at = policy.clock(st.clock, now_ms);
    if day < at.now.today {
        return Err(day_passed(day, at.now.today));
    }
    let start = policy.start_minute(time_slot);
    let hhmm = format!("{:02}:{:02}", (start / 60) % 24, start % 60);
    if at.now.has_passed(day, start) {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "slot_passed",
            format!(
                "timeSlot: the {hhmm} slot today has already started; choose a later time or another day"
            ),
        ));
    }
    if !at.bookable(day, start) {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "notice_too_short",
            format!(
                "timeSlot: the {hhmm} slot starts in less than the place's minimum notice of {} minutes; choose a later time",
                policy.notice_minutes
            ),
        ));
    }
    Ok(())
}

fn day_passed(day: Day, today: Day) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "day_passed",
        format!(
            "day: {} has passed; choose today ({}) or a later day",
            day.to_text(),
            today.to_text()
        ),
    )
}

/// Every seat of the slot is taken (a slot of one seat included: one code
/// for both).
pub(super) fn slot_full() -> ApiError {
    ApiError::conflict(
        "slot_full",
        "this time slot is already taken (every seat is booked); choose another",
    )
}

pub(super) fn already_registered(rule: OneRegistration) -> ApiError {
    ApiError::conflict(
        "already_registered",
        match rule {
            OneRegistration::PersonDay => {
                "this person already holds a registration on this day; open it with its \
                 registration id and access code (the page /booking/manage) to move or cancel it"
            }
            _ => {
                "this person already holds a registration; open it with its registration id \
                 and access code (the page /booking/manage) to move or cancel it"
            }
        },
    )
}

pub(super) fn slot_not_found(new: &NewRegistration) -> ApiError {
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

pub(super) fn seal(
    st: &BookingState,
    new: &NewRegistration,
    access_code: &str,
) -> SealedRegistration {
    // Time-ordered (v7) ids append at the right edge of the primary-key B-tree
    // instead of landing on a random page; the access code is what guards access.
    let id = uuid::Uuid::now_v7().to_string();
    let person = serde_json::to_vec(&new.person).expect("person serializes");
    SealedRegistration {
        person_sealed: st.pii.seal(&id, &person),
        id,
        access_hash: super::access_code::hash(access_code),
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

pub(super) fn registration_not_found() -> ApiError {
    // The same answer for a wrong code and a missing registration, so codes
    // cannot be probed.
    ApiError::not_found(
        "registration_not_found",
        "no registration with this id and access code (send it in X-Access-Code)",
    )
}

/// Registration ids are UUIDs; anything else cannot exist.
pub(super) fn plausible_id(id: &str) -> bool {
    id.len() == 36 && uuid::Uuid::parse_str(id).is_ok()
}

/// A registration with the person's data, by its access code
///
/// Public, with the access code. Reads a registration with the person's data.
/// An unknown id and a wrong code answer the same 404, so ids cannot be probed.
#[utoipa::path(get, path = "/api/booking/registrations/{registration_id}", tag = "booking",
    params(("registration_id" = String, Path), ("X-Access-Code" = String, Header)),
    responses((status = 200, body = RegistrationOut, description = "The registration with the person's data",
               example = json!({"registrationId": "01943b6e-8f1a-7c3e-9a4b-2d5e6f708192", "placeId": 1,
                                "placeName": "Town hall", "day": "2030-01-07", "timeSlot": 0, "start": "08:00",
                                "address": "Main square 1", "createdAt": "2030-01-02T09:30:00.000Z",
                                "person": {"name": "Ana Horvat", "nationalId": "12345678901",
                                           "phone": "+385 91 234 5678", "email": "ana@example.org"}})),
              (status = 404, description = "Unknown id or wrong access code")))]
pub async fn get_registration(
    State(st): State<Arc<BookingState>>,
    ApiPath(id): ApiPath<String>,
    headers: HeaderMap,
) -> ApiResult<Json<RegistrationOut>> {
    let code = access_code(&headers).ok_or_else(registration_not_found)?;
    if !plausible_id(&id) {
        return Err(registration_not_found());
    }
    let reg = st
        .storage
        .registration(&id)
        .await?
        .ok_or_else(registration_not_found)?;
    if !super::access_code::matches(code, &reg.access_hash) {
        return Err(registration_not_found());
    }
    let person = open_person(&st, &reg)?;
    let place = st.storage.place(reg.place_id).await?;
    Ok(Json(RegistrationOut {
        place_name: place.as_ref().map(|p| p.name.clone()),
        start: place.as_ref().map(|p| p.slot_start(reg.time_slot)),
        address: place.as_ref().map(|p| p.address.clone()),
        created_at: crate::base::clock::rfc3339_ms(reg.created_at_ms),
        day: reg.day.to_text(),
        time_slot: reg.time_slot,
        place_id: reg.place_id,
        registration_id: reg.id,
        person,
    }))
}

/// Cancels a registration, freeing its slot
///
/// Public, with the access code. Cancels the registration; its seat is free
/// again at once. An unknown id and a wrong code answer the same 404.
#[utoipa::path(delete, path = "/api/booking/registrations/{registration_id}", tag = "booking",
    params(("registration_id" = String, Path, example = "01943b6e-8f1a-7c3e-9a4b-2d5e6f708192"),
           ("X-Access-Code" = String, Header, example = "K7QM-3XHT-9WCF")),
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
    match st.storage.cancel(&id, code).await? {
        CancelOutcome::Cancelled => Ok(StatusCode::NO_CONTENT),
        CancelOutcome::NotFound => Err(registration_not_found()),
    }
}

/// The answer of a move: where the registration is now.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Moved {
    pub registration_id: String,
    pub place_id: i64,
    /// YYYY-MM-DD.
    pub day: String,
    pub time_slot: i32,
    /// HH:MM.
    pub start: Option<String>,
    /// False when the registration already held that slot.
    pub moved: bool,
}

/// Moves a registration to another free slot
///
/// Public, with the access code. Moves the registration to another slot in one
/// write: the new seat is taken and the old one freed together. When the new
/// slot is full the registration keeps its slot (409 `slot_full`).
#[utoipa::path(post, path = "/api/booking/registrations/{registration_id}/move", tag = "booking",
    params(("registration_id" = String, Path), ("X-Access-Code" = String, Header)),
    request_body(content = inline(MoveRequest), description = "{placeId, day: YYYY-MM-DD, timeSlot}: the slot to move to",
                 example = json!({"placeId": 1, "day": "2030-01-08", "timeSlot": 4})),
    responses((status = 200, body = Moved, description = "The registration holds the new slot and the old one is free (one write, RegistrationMoved appended); moved is false when it already held that slot",
               example = json!({"registrationId": "01943b6e-8f1a-7c3e-9a4b-2d5e6f708192", "placeId": 1,
                                "day": "2030-01-08", "timeSlot": 4, "start": "09:00", "moved": true})),
              (status = 404, description = "registration_not_found (unknown id or wrong access code), place_not_found or slot_not_found"),
              (status = 409, description = "slot_full: every seat of the new slot is taken, the registration keeps its slot; already_registered: the person holds another registration that day (--booking-one-registration person-day)"),
              (status = 422, description = "invalid_field, naming the field; day_passed, slot_passed or notice_too_short: the new slot has started or is closer than the place's minimum notice"),
              (status = 429, description = "over capacity; see Retry-After")))]
pub async fn move_registration(
    State(st): State<Arc<BookingState>>,
    ApiPath(id): ApiPath<String>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<MoveRequest>,
) -> ApiResult<Json<Moved>> {
    let code = access_code(&headers).ok_or_else(registration_not_found)?;
    if !plausible_id(&id) {
        return Err(registration_not_found());
    }
    let to = req.parse()?;
    refuse_passed(&st, to.place_id, to.day, to.time_slot).await?;
    // The code is checked first (a wrong one answers 404 whatever the
    // slot), and again in the write that moves.
    let reg = st
        .storage
        .registration(&id)
        .await?
        .filter(|r| super::access_code::matches(code, &r.access_hash))
        .ok_or_else(registration_not_found)?;
    let own = (reg.place_id, reg.day, reg.time_slot) == (to.place_id, to.day, to.time_slot);
    if !own && st.storage.known_state(to.place_id, to.day, to.time_slot) == Some(SlotState::Taken) {
        return Err(slot_taken_for_move());
    }
    // The person key for the new day (the rule may scope it by day), from
    // the national id in the sealed data.
    let to_person_key = match st.one_registration.scope(to.day) {
        None => None,
        Some(scope) => {
            let person = open_person(&st, &reg)?;
            let national_id = person["nationalId"].as_str().unwrap_or_default();
            Some(
                st.blind_index
                    .of(&scope, &national_id_key(national_id))
                    .to_vec(),
            )
        }
    };
    let moved = match st
        .storage
        .move_registration(&id, code, to, to_person_key)
        .await?
    {
        MoveOutcome::Moved { .. } => true,
        MoveOutcome::Unchanged => false,
        MoveOutcome::NotFound => return Err(registration_not_found()),
        MoveOutcome::SlotTaken => return Err(slot_taken_for_move()),
        MoveOutcome::AlreadyRegistered => return Err(already_registered(st.one_registration)),
        MoveOutcome::PlaceNotFound => return Err(place_not_found(to.place_id)),
        MoveOutcome::SlotNotFound => return Err(slot_ref_not_found(to)),
    };
    let place = st.storage.place(to.place_id).await?;
    Ok(Json(Moved {
        registration_id: id,
        place_id: to.place_id,
        day: to.day.to_text(),
        time_slot: to.time_slot,
        start: place.as_ref().map(|p| p.slot_start(to.time_slot)),
        moved,
    }))
}

fn slot_taken_for_move() -> ApiError {
    ApiError::conflict(
        "slot_full",
        "this time slot is already taken (every seat is booked); your registration keeps its time; choose another",
    )
}

fn slot_ref_not_found(to: SlotRef) -> ApiError {
    ApiError::not_found(
        "slot_not_found",
        format!(
            "place {} has no time slot {} on {}",
            to.place_id,
            to.time_slot,
            to.day.to_text()
        ),
    )
}

pub(super) fn open_person(
    st: &BookingState,
    reg: &SealedRegistration,
) -> ApiResult<serde_json::Value> {
    let person_json = st.pii.open(&reg.id, &reg.person_sealed).ok_or_else(|| {
        tracing::error!(registration_id = %reg.id, "sealed personal data does not open with this key");
        ApiError::internal()
    })?;
    serde_json::from_slice(&person_json).map_err(|_| ApiError::internal())
}

/// A registration's appointment as an iCalendar file
///
/// Public, with the access code. The appointment as an iCalendar file to add to
/// a calendar: one event with the time in UTC and the place's name and address,
/// and no personal data.
#[utoipa::path(get, path = "/api/booking/registrations/{registration_id}/calendar.ics", tag = "booking",
    params(("registration_id" = String, Path), ("X-Access-Code" = String, Header)),
    responses((status = 200, description = "The appointment as an iCalendar file (RFC 5545, text/calendar): one VEVENT with UID, DTSTAMP, DTSTART and DTEND in UTC, SUMMARY and LOCATION; no personal data", content_type = "text/calendar", body = String,
               example = json!("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//throng//booking//EN\r\nCALSCALE:GREGORIAN\r\nMETHOD:PUBLISH\r\nBEGIN:VEVENT\r\nUID:01943b6e-8f1a-7c3e-9a4b-2d5e6f708192@booking.throng\r\nDTSTAMP:20300102T093000Z\r\nDTSTART:20300107T070000Z\r\nDTEND:20300107T071500Z\r\nSUMMARY:Appointment at Town hall\r\nLOCATION:Town hall\\, Main square 1\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")),
              (status = 404, description = "Unknown id or wrong access code")))]
pub async fn registration_ics(
    State(st): State<Arc<BookingState>>,
    ApiPath(id): ApiPath<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let code = access_code(&headers).ok_or_else(registration_not_found)?;
    if !plausible_id(&id) {
        return Err(registration_not_found());
    }
    let reg = st
        .storage
        .registration(&id)
        .await?
        .filter(|r| super::access_code::matches(code, &r.access_hash))
        .ok_or_else(registration_not_found)?;
    let place = st.storage.place(reg.place_id).await?.ok_or_else(|| {
        tracing::error!(registration_id = %reg.id, "a registration's place is missing");
        ApiError::internal()
    })?;
    let link = super::messages::manage_url(&st.public_url.base(&headers), &reg.id, None);
    let body =
        super::ics::registration(&reg, &place, st.clock, crate::base::clock::now_ms(), &link);
    Ok((
        [
            (
                axum::http::header::CONTENT_TYPE,
                "text/calendar; charset=utf-8",
            ),
            (
                axum::http::header::CONTENT_DISPOSITION,
                "attachment; filename=\"appointment.ics\"",
            ),
        ],
        body,
    )
        .into_response())
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct CalendarQuery {
    /// The month, YYYY-MM.
    #[param(pattern = "^[0-9]{4}-(0[1-9]|1[0-2])$", example = "2030-01")]
    month: String,
}

/// A place's month.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct CalendarOut {
    pub place_id: i64,
    /// YYYY-MM.
    pub month: String,
    /// YYYY-MM-DD, at --booking-utc-offset.
    pub today: String,
    pub days: Vec<DayFree>,
}

/// A day and its free slots that have not started.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct DayFree {
    /// YYYY-MM-DD.
    pub day: String,
    pub free: u32,
}

/// A place's month: free slots per day
///
/// Public. For a month (`month`, YYYY-MM), every day with its count of free
/// slots that have not started: what a date picker shows before the day's slots
/// are read.
#[utoipa::path(get, path = "/api/booking/places/{place_id}/calendar", params(CalendarQuery, PlacePath),
    tag = "booking",
    responses((status = 200, body = CalendarOut, description = "Every day of the month with its count of free slots that have not started (today is at --booking-utc-offset)",
               example = json!({"placeId": 1, "month": "2030-01", "today": "2030-01-02",
                                "days": [{"day": "2030-01-01", "free": 0}, {"day": "2030-01-02", "free": 12}]})),
              (status = 404, description = "Unknown place"),
              (status = 422, description = "invalid_field: month is not YYYY-MM")))]
pub async fn place_calendar(
    State(st): State<Arc<BookingState>>,
    ApiPath(place_id): ApiPath<i64>,
    ApiQuery(q): ApiQuery<CalendarQuery>,
) -> ApiResult<Json<CalendarOut>> {
    let first = Day::parse("month", &format!("{}-01", q.month.get(..7).unwrap_or("x")))
        .ok()
        .filter(|_| q.month.len() == 7)
        .ok_or_else(|| {
            ApiError::invalid_field(format!(
                "month: '{}' is not a month; expected YYYY-MM",
                q.month.chars().take(20).collect::<String>()
            ))
        })?;
    let date = first.date();
    let days = i32::from(date.month().length(date.year()));
    if !PlaceId::exists_in_range(place_id) {
        return Err(place_not_found(place_id));
    }
    let (clock, now_ms) = (st.clock, crate::base::clock::now_ms());
    let counts = st
        .storage
        .with_place_slots(place_id, first, days, |place, slots| {
            let at = place.policy().clock(clock, now_ms);
            (free_per_day(place, first, days, slots, at), at.now.today)
        })
        .await?
        .ok_or_else(|| place_not_found(place_id))?;
    let (counts, today) = counts;
    let days = counts
        .iter()
        .enumerate()
        .map(|(i, n)| DayFree {
            day: first.plus(i as i32).to_text(),
            free: *n,
        })
        .collect();
    Ok(Json(CalendarOut {
        place_id,
        month: q.month,
        today: today.to_text(),
        days,
    }))
}

/// Free slots that have not started, per day from `first`.
fn free_per_day(
    place: &Place,
    first: Day,
    days: i32,
    slots: &[store::SlotRow],
    now: PlaceClock,
) -> Vec<u32> {
    let mut out = vec![0u32; days.max(0) as usize];
    for s in slots {
        let i = (s.day.0 - first.0) as usize;
        let start = place.first_slot_minute + s.time_slot * place.slot_minutes;
        if s.free() && i < out.len() && now.bookable(s.day, start) {
            out[i] += 1;
        }
    }
    out
}

/// Booking's counts (admin)
///
/// Admin token. Booking's counts, and how far the notifier has read the event
/// log (its position against the log's last).
#[utoipa::path(get, path = "/api/booking/admin/stats", tag = "booking",
    security(("bearer" = [])),
    responses((status = 200, body = BookingStats, description = "Counts and the notifier's position in the event log",
               example = json!({"places": 50, "slots": 288000, "registrations": 1200,
                                "lastEventPosition": 2410, "notifierPosition": 2409})),
              (status = 401, description = "No or bad token"), (status = 403, description = "Not an admin")))]
pub async fn stats(
    State(st): State<Arc<BookingState>>,
    caller: Caller,
) -> ApiResult<Json<BookingStats>> {
    caller.require(Role::ADMIN)?;
    Ok(Json(st.storage.stats(super::notifier::CONSUMER).await?))
}

/// Parked confirmations listed at most.
const PARKED_LISTED_MAX: i64 = 1000;

/// Confirmations the notifier gave up on (admin)
///
/// Admin token. Confirmations the notifier gave up on, after its retries or
/// when the gateway refused them, oldest first (at most 1000). No personal
/// data: the registration ids tell staff whom to contact.
#[utoipa::path(get, path = "/api/booking/admin/notifications/parked", tag = "booking",
    security(("bearer" = [])),
    responses((status = 200, body = ParkedList, description = "Confirmations the notifier gave up on (after --notify-attempts-max, or refused by the gateway), oldest first, at most 1000; no personal data",
               example = json!({"count": 1, "parked": [{"position": 812, "registrationId": "01943b6e-8f1a-7c3e-9a4b-2d5e6f708192",
                                                        "reason": "gateway answered 400", "attempts": 1, "parkedAtMs": 1893575400000_i64}]})),
              (status = 401, description = "No or bad token"), (status = 403, description = "Not an admin")))]
pub async fn parked_notifications(
    State(st): State<Arc<BookingState>>,
    caller: Caller,
) -> ApiResult<Json<ParkedList>> {
    caller.require(Role::ADMIN)?;
    let (parked, count) = st.storage.parked_notifications(PARKED_LISTED_MAX).await?;
    Ok(Json(ParkedList { count, parked }))
}

/// Parked confirmations.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct ParkedList {
    /// Parked in all.
    pub count: i64,
    /// The oldest, at most `PARKED_LISTED_MAX`.
    pub parked: Vec<ParkedNotification>,
}

/// A body's slot: `placeId` (ids outside the place range are 404, not 422),
/// `day` and `timeSlot`, as `SlotRef` is parsed.
fn slot_fields() -> [(
    &'static str,
    utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
); 3] {
    [
        ("placeId", int_schema(PLACE_ID_MIN, i64::MAX).into()),
        ("day", format_schema(KnownFormat::Date).into()),
        (
            "timeSlot",
            small_int_schema(0, (SLOTS_PER_DAY_MAX - 1).into()).into(),
        ),
    ]
}

crate::schema_type!(for MoveRequest => closed_object(slot_fields(), &["placeId", "day", "timeSlot"]).build());

crate::schema_type!(
    for RegistrationRequest => closed_object(
        slot_fields().into_iter().chain([("person", person_in().into())]),
        &["placeId", "day", "timeSlot", "person"],
    )
    .build()
);

/// A person as `Person::check` accepts them.
fn person_in() -> utoipa::openapi::schema::Object {
    let email = utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .max_length(Some(EMAIL_CHARS_MAX))
        .pattern(Some(
        "^[^@\\s\\x00-\\x1f\\x7f-\\x9f]+@[^@.\\s\\x00-\\x1f\\x7f-\\x9f]+(\\.[^@.\\s\\x00-\\x1f\\x7f-\\x9f]+)+$",
        ))
        .build();
    closed_object(
        [
            ("name", text_schema(1, NAME_CHARS_MAX, false).into()),
            (
                "nationalId",
                pattern_schema(format!("^[A-Za-z0-9/-]{{1,{NATIONAL_ID_CHARS_MAX}}}$")).into(),
            ),
            (
                "phone",
                pattern_schema(format!(
                    "^\\+?([0-9] ?){{{PHONE_DIGITS_MIN},{PHONE_DIGITS_MAX}}}$"
                ))
                .into(),
            ),
            ("email", email.into()),
        ],
        &["name", "nationalId", "phone", "email"],
    )
    .build()
}
