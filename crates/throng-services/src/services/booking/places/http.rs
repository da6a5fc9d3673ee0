//! Places' routes: an admin defines places (one, or a CSV of many), their
//! hours and their days; anyone reads a place and the earliest free slots.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRef, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::super::model::{Day, Place, PlaceId, PLACE_ID_MAX, PLACE_ID_MIN};
use super::super::BookingState;
use super::hours::{DayHours, WeekHours};
use super::{import, ChangeRefused, ChangeSummary, FieldError, PlaceChange, PlaceInput};
use crate::platform::auth::{Caller, Role, TokenKeys};
use crate::platform::error::{ApiError, ApiResult};
use crate::platform::extract::{ApiJson, ApiPath, ApiQuery};
use crate::platform::openapi::int_schema;

/// Earliest slots listed at most, and by default.
pub const EARLIEST_LIMIT_MAX: i64 = 50;
pub const EARLIEST_LIMIT_DEFAULT: i64 = 10;
/// Days from today an earliest-slots search looks at, by default and at
/// most.
pub const EARLIEST_DAYS_DEFAULT: i64 = 60;
pub const EARLIEST_DAYS_MAX: i64 = 366;

pub fn routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<BookingState>: FromRef<S>,
    Arc<TokenKeys>: FromRef<S>,
    Arc<crate::platform::session::Sessions>: FromRef<S>,
{
    OpenApiRouter::default()
        .routes(routes!(create_place))
        .routes(routes!(get_place, update_place))
        .routes(routes!(set_hours))
        .routes(routes!(set_day, remove_day))
        .routes(routes!(import_places))
        .routes(routes!(extend_horizon))
        .routes(routes!(earliest_slots))
}

fn invalid(e: FieldError) -> ApiError {
    ApiError::invalid_field(format!("{}: {}", e.json, e.message))
}

fn place_not_found(id: i64) -> ApiError {
    ApiError::not_found("place_not_found", format!("no place with id {id}"))
}

/// A refusal as an answer; `line_of` names where a change came from.
pub fn refusal(r: ChangeRefused, line_of: impl Fn(usize) -> String) -> ApiError {
    match r {
        ChangeRefused::UnknownPlace(id) => place_not_found(id),
        ChangeRefused::SlotMinutesFixed { at, code } => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_field",
            format!(
                "{}slot_minutes: place {code} has slots, and a registration holds its time by \
                 slot number; keep its slot length, or define a new place",
                line_of(at)
            ),
        ),
        ChangeRefused::OffGrid { at, message } => {
            ApiError::invalid_field(format!("{}hours: {message}", line_of(at)))
        }
        ChangeRefused::CodeTaken { at, code } => ApiError::conflict(
            "code_taken",
            format!("{}code: another place has the code {code}", line_of(at)),
        ),
    }
}

/// Runs changes, answering the summary or why nothing was written.
async fn change(
    st: &BookingState,
    changes: Vec<PlaceChange>,
    line_of: impl Fn(usize) -> String,
) -> ApiResult<ChangeSummary> {
    st.storage
        .change_places(changes, st.clock)
        .await?
        .map_err(|r| refusal(r, line_of))
}

fn no_line(_: usize) -> String {
    String::new()
}

/// A place and what its change did.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct PlaceChanged {
    pub place: Place,
    pub summary: ChangeSummary,
}

/// A place with its days of other hours (closed when `hours` is empty)
/// from today on.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct PlaceDetail {
    pub place: Place,
    pub days: Vec<OwnDay>,
}

/// A day of other hours.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct OwnDay {
    /// YYYY-MM-DD.
    pub day: String,
    /// `08:00-12:00,13:00-16:00`; empty: closed.
    pub hours: String,
}

/// The example of a place's definition.
fn place_input_example() -> serde_json::Value {
    serde_json::json!({"code": "BA-01", "name": "Poliklinika Ružinov", "address": "Ružinovská 10",
        "city": "Bratislava", "postcode": "821 01", "region": "BA", "timeZone": "Europe/Bratislava",
        "latitude": 48.153, "longitude": 17.155, "services": ["vaccine-flu", "test-pcr"],
        "slotMinutes": 15, "seats": 2, "hours": "Mo-Fr 08:00-12:00,13:00-16:00; Sa 09:00-12:00",
        "bookAheadDays": 60, "noticeMinutes": 60})
}

/// Defines a place and makes its slots for its horizon (admin)
///
/// Admin token. Defines a place with its weekly hours and makes its slots for
/// the days of its horizon. A place whose code is already defined is updated
/// instead (200), as the CSV import does.
#[utoipa::path(post, path = "/api/booking/places", tag = "booking",
    security(("bearer" = [])),
    request_body(content = PlaceInput, description = "The place; its code is the authority's, unique (a code already defined updates that place, as the import does). Hours start and end on its slot grid (whole slots from midnight).",
                 example = json!(place_input_example())),
    responses((status = 201, body = PlaceChanged, description = "The place, and the slots made for its horizon",
               example = json!({"place": {"id": 7, "code": "BA-01", "name": "Poliklinika Ružinov", "address": "Ružinovská 10", "city": "Bratislava", "postcode": "821 01", "region": "BA", "timeZone": "Europe/Bratislava", "latitude": 48.153, "longitude": 17.155, "services": ["vaccine-flu", "test-pcr"], "slotMinutes": 15, "seats": 2, "hours": "Mo-Fr 08:00-12:00,13:00-16:00; Sa 09:00-12:00", "bookAheadDays": 60, "noticeMinutes": 60},
                                "summary": {"created": 1, "updated": 0, "slotsAdded": 1200, "slotsRemoved": 0, "slotsChanged": 0, "registrationsOnRemovedSlots": 0, "registrationsOverSeats": 0, "affectedRegistrations": [], "placeIds": [7]}})),
              (status = 200, body = PlaceChanged, description = "A place of this code was defined already: updated, as the import does",
               example = json!({"place": {"id": 7, "code": "BA-01", "name": "Poliklinika Ružinov", "address": "Ružinovská 10", "city": "Bratislava", "postcode": "821 01", "region": "BA", "timeZone": "Europe/Bratislava", "latitude": 48.153, "longitude": 17.155, "services": ["vaccine-flu", "test-pcr"], "slotMinutes": 15, "seats": 2, "hours": "Mo-Fr 08:00-12:00,13:00-16:00; Sa 09:00-12:00", "bookAheadDays": 60, "noticeMinutes": 60},
                                "summary": {"created": 0, "updated": 1, "slotsAdded": 0, "slotsRemoved": 0, "slotsChanged": 0, "registrationsOnRemovedSlots": 0, "registrationsOverSeats": 0, "affectedRegistrations": [], "placeIds": [7]}})),
              (status = 401, description = "No or bad token"), (status = 403, description = "Not an admin"),
              (status = 422, description = "invalid_field, naming the field")))]
pub async fn create_place(
    State(st): State<Arc<BookingState>>,
    caller: Caller,
    ApiJson(input): ApiJson<PlaceInput>,
) -> ApiResult<Response> {
    caller.require(Role::ADMIN)?;
    let def = input.validate().map_err(invalid)?;
    let changes = vec![PlaceChange::Define {
        id: None,
        def: Box::new(def),
        closed: None,
    }];
    let summary = change(&st, changes, no_line).await?;
    let place = changed_place(&st, &summary).await?;
    let status = if summary.created > 0 {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(PlaceChanged { place, summary })).into_response())
}

async fn changed_place(st: &BookingState, summary: &ChangeSummary) -> ApiResult<Place> {
    let id = *summary.place_ids.first().ok_or_else(ApiError::internal)?;
    st.storage
        .place_fresh(id)
        .await?
        .ok_or_else(|| place_not_found(id))
}

/// A place in a path.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct PlaceIdPath {
    #[param(value_type = PlaceIdRange, inline)]
    place_id: i64,
}

crate::schema_type!(PlaceIdRange => int_schema(PLACE_ID_MIN, PLACE_ID_MAX));

/// A place with its days of other hours
///
/// Public. A place's definition with its weekly hours, and its closed days and
/// days of other hours from today on.
#[utoipa::path(get, path = "/api/booking/places/{place_id}", params(PlaceIdPath), tag = "booking",
    responses((status = 200, body = PlaceDetail, description = "The place and its closed days and days of other hours from today on",
               example = json!({"place": {"id": 7, "code": "BA-01", "name": "Poliklinika Ružinov", "address": "Ružinovská 10", "city": "Bratislava", "postcode": "821 01", "region": "BA", "timeZone": "Europe/Bratislava", "services": ["vaccine-flu"], "slotMinutes": 15, "seats": 2, "hours": "Mo-Fr 08:00-12:00", "bookAheadDays": 60, "noticeMinutes": 60},
                                "days": [{"day": "2030-12-24", "hours": ""}, {"day": "2030-12-31", "hours": "08:00-10:00"}]})),
              (status = 404, description = "place_not_found")))]
pub async fn get_place(
    State(st): State<Arc<BookingState>>,
    ApiPath(place_id): ApiPath<i64>,
) -> ApiResult<Json<PlaceDetail>> {
    if !PlaceId::exists_in_range(place_id) {
        return Err(place_not_found(place_id));
    }
    let Some(place) = st.storage.place_fresh(place_id).await? else {
        return Err(place_not_found(place_id));
    };
    let from = place
        .policy()
        .clock(st.clock, crate::base::clock::now_ms())
        .now
        .today;
    let days = st
        .storage
        .own_days(place_id, from)
        .await?
        .into_iter()
        .map(|(day, hours)| OwnDay {
            day: day.to_text(),
            hours,
        })
        .collect();
    Ok(Json(PlaceDetail { place, days }))
}

/// Changes a place's definition and makes its slots again (admin)
///
/// Admin token. Replaces a place's definition and makes its slots again.
/// Registrations on slots the new hours no longer open are kept, and listed in
/// the answer so staff can move them. Another place's code answers 409
/// `code_taken`.
#[utoipa::path(put, path = "/api/booking/places/{place_id}", params(PlaceIdPath), tag = "booking",
    security(("bearer" = [])),
    request_body(content = PlaceInput, description = "The whole definition (its slot length stays while it has slots)",
                 example = json!(place_input_example())),
    responses((status = 200, body = PlaceChanged, description = "The place, and what changed in its slots; registrations on slots its new hours no longer open are kept (each gets a SlotWithdrawn event)",
               example = json!({"place": {"id": 7, "code": "BA-01", "name": "Poliklinika Ružinov", "address": "Ružinovská 10", "city": "Bratislava", "postcode": "821 01", "region": "BA", "timeZone": "Europe/Bratislava", "services": ["vaccine-flu"], "slotMinutes": 15, "seats": 2, "hours": "Mo-Fr 08:00-12:00", "bookAheadDays": 60, "noticeMinutes": 60},
                                "summary": {"created": 0, "updated": 1, "slotsAdded": 0, "slotsRemoved": 640, "slotsChanged": 0, "registrationsOnRemovedSlots": 1, "registrationsOverSeats": 0, "affectedRegistrations": ["01943b6e-8f1a-7c3e-9a4b-2d5e6f708192"], "placeIds": [7]}})),
              (status = 401, description = "No or bad token"), (status = 403, description = "Not an admin"),
              (status = 404, description = "place_not_found"),
              (status = 409, description = "code_taken: another place has the code"),
              (status = 422, description = "invalid_field, naming the field")))]
pub async fn update_place(
    State(st): State<Arc<BookingState>>,
    caller: Caller,
    ApiPath(place_id): ApiPath<i64>,
    ApiJson(input): ApiJson<PlaceInput>,
) -> ApiResult<Json<PlaceChanged>> {
    caller.require(Role::ADMIN)?;
    if !PlaceId::exists_in_range(place_id) {
        return Err(place_not_found(place_id));
    }
    let def = input.validate().map_err(invalid)?;
    let changes = vec![PlaceChange::Define {
        id: Some(place_id),
        def: Box::new(def),
        closed: None,
    }];
    let summary = change(&st, changes, no_line).await?;
    let place = changed_place(&st, &summary).await?;
    Ok(Json(PlaceChanged { place, summary }))
}

/// New weekly hours.
#[derive(Deserialize, Serialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HoursInput {
    /// E.g. `Mo-Fr 08:00-12:00,13:00-16:00; Sa 09:00-12:00`; days not
    /// named are closed.
    pub hours: String,
}

/// Sets a place's weekly hours and makes its slots again (admin)
///
/// Admin token. Replaces a place's weekly hours and makes its slots again.
/// Registrations on slots the new hours no longer open are kept and listed in
/// the answer.
#[utoipa::path(put, path = "/api/booking/places/{place_id}/hours", params(PlaceIdPath), tag = "booking",
    security(("bearer" = [])),
    request_body(content = HoursInput, example = json!({"hours": "Mo-Fr 08:00-12:00,13:00-16:00; Sa 09:00-12:00"})),
    responses((status = 200, body = ChangeSummary, description = "What changed in its slots; registrations on slots the hours no longer open are kept and listed",
               example = json!({"created": 0, "updated": 0, "slotsAdded": 96, "slotsRemoved": 40, "slotsChanged": 0, "registrationsOnRemovedSlots": 1, "registrationsOverSeats": 0, "affectedRegistrations": ["01943b6e-8f1a-7c3e-9a4b-2d5e6f708192"], "placeIds": [7]})),
              (status = 401, description = "No or bad token"), (status = 403, description = "Not an admin"),
              (status = 404, description = "place_not_found"),
              (status = 422, description = "invalid_field: hours, naming the part that is wrong")))]
pub async fn set_hours(
    State(st): State<Arc<BookingState>>,
    caller: Caller,
    ApiPath(place_id): ApiPath<i64>,
    ApiJson(input): ApiJson<HoursInput>,
) -> ApiResult<Json<ChangeSummary>> {
    caller.require(Role::ADMIN)?;
    if !PlaceId::exists_in_range(place_id) {
        return Err(place_not_found(place_id));
    }
    let hours = WeekHours::parse(&input.hours)
        .map_err(|e| ApiError::invalid_field(format!("hours: {e}")))?;
    let changes = vec![PlaceChange::Hours {
        id: place_id,
        hours,
    }];
    Ok(Json(change(&st, changes, no_line).await?))
}

/// A day's own hours.
#[derive(Deserialize, Serialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DayInput {
    /// `08:00-12:00,13:00-16:00`; empty (or `closed`): the place is closed
    /// that day.
    pub hours: String,
}

/// A place and a day in a path.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct PlaceDayPath {
    #[param(value_type = PlaceIdRange, inline)]
    place_id: i64,
    /// YYYY-MM-DD.
    #[param(format = Date, example = "2030-12-24")]
    day: String,
}

fn path_day(text: &str) -> Result<Day, ApiError> {
    Day::parse("day", text)
}

/// Closes a place on a day, or gives the day other hours (admin)
///
/// Admin token. Closes a place on one day, or gives that day hours other than
/// the week's. Registrations on slots that go away are kept and listed in the
/// answer.
#[utoipa::path(put, path = "/api/booking/places/{place_id}/days/{day}", params(PlaceDayPath), tag = "booking",
    security(("bearer" = [])),
    request_body(content = DayInput, example = json!({"hours": ""})),
    responses((status = 200, body = ChangeSummary, description = "What changed in the day's slots; registrations on slots taken away are kept and listed (each gets a SlotWithdrawn event)",
               example = json!({"created": 0, "updated": 0, "slotsAdded": 0, "slotsRemoved": 28, "slotsChanged": 0, "registrationsOnRemovedSlots": 2, "registrationsOverSeats": 0, "affectedRegistrations": ["01943b6e-8f1a-7c3e-9a4b-2d5e6f708192", "01943b6e-9a2b-7c3e-9a4b-2d5e6f708193"], "placeIds": [7]})),
              (status = 401, description = "No or bad token"), (status = 403, description = "Not an admin"),
              (status = 404, description = "place_not_found"),
              (status = 422, description = "invalid_field: day or hours")))]
pub async fn set_day(
    State(st): State<Arc<BookingState>>,
    caller: Caller,
    ApiPath((place_id, day)): ApiPath<(i64, String)>,
    ApiJson(input): ApiJson<DayInput>,
) -> ApiResult<Json<ChangeSummary>> {
    caller.require(Role::ADMIN)?;
    if !PlaceId::exists_in_range(place_id) {
        return Err(place_not_found(place_id));
    }
    let day = path_day(&day)?;
    let hours = DayHours::parse(&input.hours)
        .map_err(|e| ApiError::invalid_field(format!("hours: {e}")))?;
    let changes = vec![PlaceChange::Day {
        id: place_id,
        day,
        hours: Some(hours),
    }];
    Ok(Json(change(&st, changes, no_line).await?))
}

/// Gives a day the week's hours again (admin)
///
/// Admin token. Undoes a closed day or a day of other hours: the day has the
/// week's hours again and their slots are made.
#[utoipa::path(delete, path = "/api/booking/places/{place_id}/days/{day}", params(PlaceDayPath), tag = "booking",
    security(("bearer" = [])),
    responses((status = 200, body = ChangeSummary, description = "The day has the week's hours again; the slots they open are made",
               example = json!({"created": 0, "updated": 0, "slotsAdded": 28, "slotsRemoved": 0, "slotsChanged": 0, "registrationsOnRemovedSlots": 0, "registrationsOverSeats": 0, "affectedRegistrations": [], "placeIds": [7]})),
              (status = 401, description = "No or bad token"), (status = 403, description = "Not an admin"),
              (status = 404, description = "place_not_found"),
              (status = 422, description = "invalid_field: day")))]
pub async fn remove_day(
    State(st): State<Arc<BookingState>>,
    caller: Caller,
    ApiPath((place_id, day)): ApiPath<(i64, String)>,
) -> ApiResult<Json<ChangeSummary>> {
    caller.require(Role::ADMIN)?;
    if !PlaceId::exists_in_range(place_id) {
        return Err(place_not_found(place_id));
    }
    let day = path_day(&day)?;
    let changes = vec![PlaceChange::Day {
        id: place_id,
        day,
        hours: None,
    }];
    Ok(Json(change(&st, changes, no_line).await?))
}

/// Runs an import of a whole file: every place checked, then all written in
/// one transaction (nothing on an error, which names the line and column).
pub async fn import_csv(st: &BookingState, bytes: &[u8]) -> ApiResult<ChangeSummary> {
    let parsed = import::parse(bytes).map_err(|e| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_csv",
            e.to_string(),
        )
    })?;
    let lines = parsed.lines.clone();
    change(st, parsed.changes, move |at| {
        lines
            .get(at)
            .map(|l| format!("line {l}: "))
            .unwrap_or_default()
    })
    .await
}

/// Defines places from a CSV file, all or none (admin)
///
/// Admin token. Defines or updates places from a CSV file (Content-Type:
/// text/csv), one place a line, in one transaction: any error names its line
/// and column, and nothing is written.
#[utoipa::path(post, path = "/api/booking/places/import", tag = "booking",
    security(("bearer" = [])),
    request_body(content = String, content_type = "text/csv",
                 description = "Header exactly code,name,address,city,postcode,region,time_zone,slot_minutes,seats,hours,closed, then any of services (space-separated codes), latitude, longitude, book_ahead_days (default 60), notice_minutes (default 0). hours like \"Mo-Fr 08:00-12:00,13:00-16:00; Sa 09:00-12:00\" (quoted: it has commas), closed like 2030-12-24 2030-12-25. A place is found by its code: importing again updates it, its closed days become the file's. At most --body-limit-bytes; larger files through `throng booking import-places FILE`.",
                 example = json!("code,name,address,city,postcode,region,time_zone,slot_minutes,seats,hours,closed,services\nBA-01,Poliklinika Ružinov,Ružinovská 10,Bratislava,821 01,BA,Europe/Bratislava,15,2,\"Mo-Fr 08:00-12:00,13:00-16:00\",2030-12-24,vaccine-flu\n")),
    responses((status = 200, body = ChangeSummary, description = "Places created and updated, slots added and removed, and the registrations on removed slots (kept, each with a SlotWithdrawn event)",
               example = json!({"created": 1, "updated": 0, "slotsAdded": 1240, "slotsRemoved": 0, "slotsChanged": 0, "registrationsOnRemovedSlots": 0, "registrationsOverSeats": 0, "affectedRegistrations": [], "placeIds": [7]})),
              (status = 401, description = "No or bad token"), (status = 403, description = "Not an admin"),
              (status = 409, description = "code_taken"),
              (status = 415, description = "unsupported_media_type: not text/csv"),
              (status = 422, description = "invalid_csv or invalid_field: names the line and column; nothing was written")))]
pub async fn import_places(
    State(st): State<Arc<BookingState>>,
    caller: Caller,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Json<ChangeSummary>> {
    caller.require(Role::ADMIN)?;
    let csv = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("text/csv"));
    if !csv {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the places as Content-Type: text/csv",
        ));
    }
    Ok(Json(import_csv(&st, &body).await?))
}

/// Makes the days of every place's horizon that are not made yet (admin)
///
/// Admin token. Makes the slots of the days that entered the places' horizons
/// since they were last made. The server also does this every hour; call it
/// after changing the clock or the horizon.
#[utoipa::path(post, path = "/api/booking/places/extend", tag = "booking",
    security(("bearer" = [])),
    responses((status = 200, body = ChangeSummary, description = "Slots made for the days that came into the places' horizons (the server also does this every hour)",
               example = json!({"created": 0, "updated": 0, "slotsAdded": 50000, "slotsRemoved": 0, "slotsChanged": 0, "registrationsOnRemovedSlots": 0, "registrationsOverSeats": 0, "affectedRegistrations": [], "placeIds": []})),
              (status = 401, description = "No or bad token"), (status = 403, description = "Not an admin")))]
pub async fn extend_horizon(
    State(st): State<Arc<BookingState>>,
    caller: Caller,
) -> ApiResult<Json<ChangeSummary>> {
    caller.require(Role::ADMIN)?;
    Ok(Json(change(&st, vec![PlaceChange::Extend], no_line).await?))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EarliestQuery {
    /// Part of the name, city or postcode, any case.
    #[param(value_type = Option<super::super::http::SearchText>, inline)]
    q: Option<String>,
    /// The region, exactly.
    #[param(value_type = Option<super::super::http::RegionText>, inline)]
    region: Option<String>,
    /// A service code the place offers.
    #[param(value_type = Option<super::super::http::ServiceCode>, inline)]
    service: Option<String>,
    /// Slots listed at most (default 10).
    #[param(value_type = Option<EarliestLimit>, inline)]
    limit: Option<i64>,
    /// Days from today looked at (default 60).
    #[param(value_type = Option<EarliestDays>, inline)]
    days: Option<i64>,
}

crate::schema_type!(EarliestLimit => int_schema(1, EARLIEST_LIMIT_MAX));
crate::schema_type!(EarliestDays => int_schema(1, EARLIEST_DAYS_MAX));

/// A place's earliest slot that can be booked now.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct EarliestOut {
    pub place: Place,
    /// YYYY-MM-DD, at the place.
    pub day: String,
    pub time_slot: i32,
    /// HH:MM, at the place.
    pub start: String,
    pub seats: i32,
    pub seats_left: i32,
}

/// Earliest slots.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct EarliestList {
    pub slots: Vec<EarliestOut>,
}

/// The earliest free slots, one per place, soonest first
///
/// Public. For the places matching `q`, `region` and `service`, each one's
/// first slot that can still be booked, soonest first: what a person who wants
/// any place soon is shown.
#[utoipa::path(get, path = "/api/booking/slots/earliest", params(EarliestQuery), tag = "booking",
    responses((status = 200, body = EarliestList, description = "For the places matching q, region and service (up to 10,000 looked at), each one's first slot with a seat left that can still be booked (not started, not closer than its notice), soonest first",
               example = json!({"slots": [{"place": {"id": 7, "code": "BA-01", "name": "Poliklinika Ružinov", "address": "Ružinovská 10", "city": "Bratislava", "postcode": "821 01", "region": "BA", "timeZone": "Europe/Bratislava", "services": ["vaccine-flu"], "slotMinutes": 15, "seats": 2, "hours": "Mo-Fr 08:00-12:00", "bookAheadDays": 60, "noticeMinutes": 60},
                                           "day": "2030-01-07", "timeSlot": 33, "start": "08:15", "seats": 2, "seatsLeft": 1}]})),
              (status = 422, description = "invalid_field: q, region, service, limit or days out of range")))]
pub async fn earliest_slots(
    State(st): State<Arc<BookingState>>,
    ApiQuery(q): ApiQuery<EarliestQuery>,
) -> ApiResult<Json<EarliestList>> {
    let search =
        super::super::http::search_of(q.q.as_deref(), q.region.as_deref(), q.service.as_deref())?;
    let limit = q.limit.unwrap_or(EARLIEST_LIMIT_DEFAULT);
    if !(1..=EARLIEST_LIMIT_MAX).contains(&limit) {
        return Err(ApiError::invalid_field(format!(
            "limit: 1 to {EARLIEST_LIMIT_MAX}"
        )));
    }
    let days = q.days.unwrap_or(EARLIEST_DAYS_DEFAULT);
    if !(1..=EARLIEST_DAYS_MAX).contains(&days) {
        return Err(ApiError::invalid_field(format!(
            "days: 1 to {EARLIEST_DAYS_MAX}"
        )));
    }
    let found = st
        .storage
        .earliest(
            search,
            limit as usize,
            days as i32,
            st.clock,
            crate::base::clock::now_ms(),
        )
        .await?;
    Ok(Json(EarliestList {
        slots: found
            .into_iter()
            .map(|e| EarliestOut {
                day: e.day.to_text(),
                time_slot: e.time_slot,
                start: e.place.slot_start(e.time_slot),
                seats: e.seats,
                seats_left: e.seats_left,
                place: e.place,
            })
            .collect(),
    }))
}
