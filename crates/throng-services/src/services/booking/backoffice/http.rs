//! The back office's routes (staff of a place, or an admin; see
//! `access.rs`). Answers carrying personal data are `no-store`.

use std::sync::Arc;

use axum::extract::{FromRef, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::map_response;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;

use super::super::availability::SlotState;
use super::super::http::{
    already_registered, open_person, place_not_found, plausible_id, refuse_passed, seal, slot_full,
    slot_not_found, Registered, RegistrationOut,
};
use super::super::model::{
    national_id_key, Day, OneRegistration, Person, PlaceId, RegisterOutcome, RegistrationRequest,
    SealedRegistration, NATIONAL_ID_CHARS_MAX,
};
use super::super::store::messages as kept;
use super::super::BookingState;
use super::access::Staff;
use super::store::{self as office, Attendance, PendingCode};
use crate::platform::auth::TokenKeys;
use crate::platform::error::{ApiError, ApiResult};
use crate::platform::extract::{ApiJson, ApiPath};
use crate::platform::headers;
use crate::platform::openapi::{closed_object, format_schema, pattern_schema, text_schema};
use utoipa::openapi::schema::KnownFormat;

/// A support lookup's reason: characters at least and at most.
pub const REASON_CHARS_MIN: usize = 5;
pub const REASON_CHARS_MAX: usize = 500;

/// The back office's routes and operations.
pub fn routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<BookingState>: FromRef<S>,
    Arc<TokenKeys>: FromRef<S>,
    Arc<crate::platform::session::Sessions>: FromRef<S>,
{
    // Every answer here may carry personal data or an access code.
    OpenApiRouter::default()
        .routes(routes!(day_registrations).layer(map_response(headers::no_store)))
        .routes(routes!(close_day).layer(map_response(headers::no_store)))
        .routes(routes!(mark_attendance).layer(map_response(headers::no_store)))
        .routes(routes!(support_lookup).layer(map_response(headers::no_store)))
        .routes(routes!(book_on_behalf).layer(map_response(headers::no_store)))
        .routes(routes!(resend_confirmation).layer(map_response(headers::no_store)))
        .routes(routes!(new_access_code).layer(map_response(headers::no_store)))
        .merge(super::page::router().into())
}

/// A place's day in a path.
#[derive(Deserialize)]
pub struct DayPath {
    place_id: i64,
    day: String,
}

impl DayPath {
    /// The place (404 outside the id range) and the day (422 unless
    /// YYYY-MM-DD).
    fn parse(&self) -> Result<(i64, Day), ApiError> {
        let day = Day::parse("day", &self.day)?;
        if !PlaceId::exists_in_range(self.place_id) {
            return Err(place_not_found(self.place_id));
        }
        Ok((self.place_id, day))
    }
}

/// A place's day: who is expected, when, and whether they came.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct DayList {
    pub place_id: i64,
    pub place_name: String,
    pub address: String,
    /// YYYY-MM-DD.
    pub day: String,
    /// The place closed this day (its registrations were cancelled).
    pub closed: bool,
    pub count: usize,
    /// More registrations than a list holds (`DAY_LIST_REGISTRATIONS_MAX`).
    pub truncated: bool,
    pub registrations: Vec<DayEntry>,
}

/// One person expected on a place's day.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct DayEntry {
    pub registration_id: String,
    pub time_slot: i32,
    /// HH:MM.
    pub start: String,
    /// RFC 3339.
    pub created_at: String,
    pub person: Person,
    /// `checked_in`, `no_show`, or absent while neither was recorded.
    pub attendance: Option<Attendance>,
    /// Who recorded it (a token's subject).
    pub attendance_by: Option<String>,
    /// RFC 3339.
    pub attendance_at: Option<String>,
}

/// A place's day of registrations with the people's data (staff of the place)
///
/// For the staff of a place: every registration of one day, in slot order, with
/// the person's name, contact and attendance. A staff token only opens the
/// places in its `places` claim (an admin token opens every place). Each read
/// is recorded in the booking audit stream with who read which day.
#[utoipa::path(get, path = "/api/booking/places/{place_id}/days/{day}/registrations", tag = "booking",
    params(("place_id" = i64, Path, minimum = 1), ("day" = String, Path, format = Date, example = "2030-01-07"),
           ("Accept" = Option<String>, Header, description = "text/csv for a CSV file (one row per registration); JSON otherwise")),
    security(("bearer" = [])),
    responses((status = 200, description = "The day's registrations in slot order, with each person's data and attendance; every read is recorded (DayListRead in the booking-audit stream: who, which place and day, when)",
               content((DayList = "application/json", example = json!({"placeId": 1, "placeName": "Town hall", "address": "Main square 1",
                   "day": "2030-01-07", "closed": false, "count": 1, "truncated": false, "registrations": [{
                       "registrationId": "01943b6e-8f1a-7c3e-9a4b-2d5e6f708192", "timeSlot": 0, "start": "08:00",
                       "createdAt": "2030-01-02T09:30:00.000Z",
                       "person": {"name": "Ana Horvat", "nationalId": "12345678901", "phone": "+385 91 234 5678", "email": "ana@example.org"},
                       "attendance": "checked_in", "attendanceBy": "nurse-7", "attendanceAt": "2030-01-07T08:02:11.000Z"}]})),
                       (String = "text/csv", example = json!("start,time_slot,registration_id,name,national_id,phone,email,attendance\r\n08:00,0,01943b6e-8f1a-7c3e-9a4b-2d5e6f708192,Ana Horvat,12345678901,'+385 91 234 5678,ana@example.org,checked_in\r\n")))),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden (not staff), no_places (a staff token without its places claim) or not_your_place (the place is not among the token's places)"),
              (status = 404, description = "place_not_found"),
              (status = 422, description = "invalid_field: day is not YYYY-MM-DD")))]
pub async fn day_registrations(
    State(st): State<Arc<BookingState>>,
    staff: Staff,
    ApiPath(path): ApiPath<DayPath>,
    request_headers: HeaderMap,
) -> ApiResult<Response> {
    let (place_id, day) = path.parse()?;
    staff.require_place(place_id)?;
    let place = st
        .storage
        .place(place_id)
        .await?
        .ok_or_else(|| place_not_found(place_id))?;
    let csv = request_headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.to_ascii_lowercase().contains("text/csv"));
    let limit = office::DAY_LIST_REGISTRATIONS_MAX;
    let (rows, closed) = futures::try_join!(
        office::day_list(&st.store, place_id, day, limit + 1),
        office::closed_day(&st.store, place_id, day)
    )?;
    let truncated = rows.len() as i64 > limit;
    let mut entries = Vec::with_capacity(rows.len());
    for row in rows.into_iter().take(limit as usize) {
        let person = st
            .pii
            .open(&row.id, &row.person_sealed)
            .and_then(|b| serde_json::from_slice::<Person>(&b).ok())
            .ok_or_else(|| {
                tracing::error!(registration_id = %row.id, "sealed personal data does not open with this key");
                ApiError::internal()
            })?;
        let (attendance, attendance_by, attendance_at) = match row.attendance {
            Some((a, by, at)) => (Some(a), Some(by), Some(crate::base::clock::rfc3339_ms(at))),
            None => (None, None, None),
        };
        entries.push(DayEntry {
            start: place.slot_start(row.time_slot),
            created_at: crate::base::clock::rfc3339_ms(row.created_at_ms),
            registration_id: row.id,
            time_slot: row.time_slot,
            person,
            attendance,
            attendance_by,
            attendance_at,
        });
    }
    // Recorded before anything is answered: no read goes unrecorded.
    office::audit(
        &st.store,
        office::AUDIT_STREAM.to_string(),
        office::EVENT_DAY_LIST_READ,
        serde_json::json!({
            "by": staff.actor(), "placeId": place_id, "day": day.to_text(),
            "format": if csv { "csv" } else { "json" }, "registrations": entries.len(),
            "atMs": crate::base::clock::now_ms(),
        }),
    )
    .await?;
    if csv {
        return Ok(day_csv(place_id, day, &entries));
    }
    Ok(Json(DayList {
        place_id,
        place_name: place.name,
        address: place.address,
        day: day.to_text(),
        closed: closed.is_some(),
        count: entries.len(),
        truncated,
        registrations: entries,
    })
    .into_response())
}

/// A cell a spreadsheet would not run as a formula: text starting with
/// `=`, `+`, `-`, `@`, a tab or a carriage return gets a leading `'`.
fn cell(text: &str) -> std::borrow::Cow<'_, str> {
    match text.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r') => format!("'{text}").into(),
        _ => text.into(),
    }
}

/// The day's list as CSV (RFC 4180, CRLF).
fn day_csv(place_id: i64, day: Day, entries: &[DayEntry]) -> Response {
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::CRLF)
        .from_writer(Vec::with_capacity(64 + entries.len() * 128));
    let written = (|| -> Result<(), csv::Error> {
        w.write_record([
            "start",
            "time_slot",
            "registration_id",
            "name",
            "national_id",
            "phone",
            "email",
            "attendance",
        ])?;
        for e in entries {
            let slot = e.time_slot.to_string();
            w.write_record([
                e.start.as_str(),
                &slot,
                &e.registration_id,
                &cell(&e.person.name),
                &cell(&e.person.national_id),
                &cell(&e.person.phone),
                &cell(&e.person.email),
                e.attendance.map_or("", Attendance::as_str),
            ])?;
        }
        Ok(())
    })();
    let body = match (written, w.into_inner()) {
        (Ok(()), Ok(body)) => body,
        _ => return ApiError::internal().into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!(
                    "attachment; filename=\"place-{place_id}-{}.csv\"",
                    day.to_text()
                ),
            ),
        ],
        body,
    )
        .into_response()
}

/// The answer of closing a day.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct DayClosed {
    pub place_id: i64,
    /// YYYY-MM-DD.
    pub day: String,
    /// Registrations cancelled (by this closing, or the earlier one).
    pub cancelled: i64,
    /// The day was closed before: nothing changed.
    pub already_closed: bool,
}

/// Closes a place's day: every registration on it cancelled, its slots no longer bookable (staff of the place)
///
/// For the staff of a place: cancels every registration of the day and removes
/// its slots in one write; each person is told. Closing a day that is already
/// closed changes nothing. A day that has passed cannot be closed
/// (`day_passed`).
#[utoipa::path(post, path = "/api/booking/places/{place_id}/days/{day}/close", tag = "booking",
    params(("place_id" = i64, Path, minimum = 1), ("day" = String, Path, format = Date, example = "2030-01-07")),
    security(("bearer" = [])),
    responses((status = 200, body = DayClosed, description = "The day is closed: in one write its slots were deleted and its registrations cancelled (each person gets a message); PlaceDayClosed in booking-place-{id} names who closed it. Closing a closed day changes nothing",
               example = json!({"placeId": 1, "day": "2030-01-07", "cancelled": 23, "alreadyClosed": false})),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden, no_places or not_your_place"),
              (status = 404, description = "place_not_found"),
              (status = 422, description = "invalid_field: day is not YYYY-MM-DD; day_passed: the day is before today (at --booking-utc-offset)")))]
pub async fn close_day(
    State(st): State<Arc<BookingState>>,
    staff: Staff,
    ApiPath(path): ApiPath<DayPath>,
) -> ApiResult<Json<DayClosed>> {
    let (place_id, day) = path.parse()?;
    staff.require_place(place_id)?;
    if st.storage.place(place_id).await?.is_none() {
        return Err(place_not_found(place_id));
    }
    let today = st.clock.now().today;
    if day < today {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "day_passed",
            format!(
                "day: {} has passed; a day from today ({}) on can be closed",
                day.to_text(),
                today.to_text()
            ),
        ));
    }
    let now = crate::base::clock::now_ms();
    let outcome = st
        .storage
        .close_day(place_id, day, staff.actor(), now)
        .await?;
    let (cancelled, already_closed) = match outcome {
        Some(regs) => {
            st.notify_worker.notify_one();
            (regs.len() as i64, false)
        }
        None => {
            let earlier = office::closed_day(&st.store, place_id, day).await?;
            (earlier.map_or(0, |c| c.registrations), true)
        }
    };
    Ok(Json(DayClosed {
        place_id,
        day: day.to_text(),
        cancelled,
        already_closed,
    }))
}

/// Attendance to record.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AttendanceRequest {
    /// `checked_in` or `no_show`; a later mark replaces an earlier one.
    pub status: Attendance,
}

/// A registration's attendance as recorded.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct AttendanceOut {
    pub registration_id: String,
    pub status: Attendance,
    pub by: String,
    /// RFC 3339.
    pub at: String,
}

/// A registration in a back-office path, read and checked against the
/// caller's places: 404 when there is none, 403 for another place's.
async fn staff_registration(
    st: &BookingState,
    staff: &Staff,
    id: &str,
) -> ApiResult<SealedRegistration> {
    if !plausible_id(id) {
        return Err(staff_registration_not_found());
    }
    let reg = st
        .storage
        .registration(id)
        .await?
        .ok_or_else(staff_registration_not_found)?;
    staff.require_place(reg.place_id)?;
    Ok(reg)
}

fn staff_registration_not_found() -> ApiError {
    ApiError::not_found(
        "registration_not_found",
        "no registration with this id (it may have been cancelled)",
    )
}

/// Checks a person in, or marks them absent (staff of the registration's place)
///
/// For the staff of the registration's place: records `checked_in` or `no_show`
/// on a registration, naming who recorded it in the registration's stream. Send
/// the status in the body.
#[utoipa::path(post, path = "/api/booking/staff/registrations/{registration_id}/attendance", tag = "booking",
    params(("registration_id" = String, Path, example = "01943b6e-8f1a-7c3e-9a4b-2d5e6f708192")),
    request_body(content = AttendanceRequest, example = json!({"status": "checked_in"})),
    security(("bearer" = [])),
    responses((status = 200, body = AttendanceOut, description = "Recorded, with RegistrationCheckedIn or RegistrationNoShow in the registration's stream naming who",
               example = json!({"registrationId": "01943b6e-8f1a-7c3e-9a4b-2d5e6f708192", "status": "checked_in", "by": "nurse-7", "at": "2030-01-07T08:02:11.000Z"})),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden, no_places or not_your_place (the registration is at another place)"),
              (status = 404, description = "registration_not_found"),
              (status = 422, description = "invalid_body: status is not checked_in or no_show")))]
pub async fn mark_attendance(
    State(st): State<Arc<BookingState>>,
    staff: Staff,
    ApiPath(id): ApiPath<String>,
    ApiJson(req): ApiJson<AttendanceRequest>,
) -> ApiResult<Json<AttendanceOut>> {
    let reg = staff_registration(&st, &staff, &id).await?;
    let at_ms = crate::base::clock::now_ms();
    // Marked only while the registration is still at the place checked
    // above (a move or a cancel meanwhile: 404).
    if !office::mark(
        &st.store,
        reg.id.clone(),
        reg.place_id,
        req.status,
        staff.actor(),
        at_ms,
    )
    .await?
    {
        return Err(staff_registration_not_found());
    }
    Ok(Json(AttendanceOut {
        registration_id: reg.id,
        status: req.status,
        by: staff.sub,
        at: crate::base::clock::rfc3339_ms(at_ms),
    }))
}

/// A support lookup: one of a national id or a registration id, and why.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LookupRequest {
    /// Looked up through the blind index (never stored in the clear).
    #[serde(default, deserialize_with = "given")]
    pub national_id: Option<String>,
    #[serde(default, deserialize_with = "given")]
    pub registration_id: Option<String>,
    /// YYYY-MM-DD: the day whose registration to find by national id,
    /// needed with --booking-one-registration person-day (the index is
    /// per day there).
    #[serde(default, deserialize_with = "given")]
    pub day: Option<String>,
    /// Why the person's data is looked at: recorded with the lookup.
    pub reason: String,
}

/// An optional field that, when present, is a string (`null` is refused,
/// as the document states).
fn given<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    String::deserialize(d).map(Some)
}

crate::schema_type!(
    for LookupRequest => closed_object(
        [
            (
                "nationalId",
                pattern_schema(format!("^[A-Za-z0-9/-]{{1,{NATIONAL_ID_CHARS_MAX}}}$")).into(),
            ),
            (
                "registrationId",
                pattern_schema(
                    "^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"
                        .into(),
                )
                .into(),
            ),
            ("day", format_schema(KnownFormat::Date).into()),
            ("reason", text_schema(REASON_CHARS_MIN, REASON_CHARS_MAX, false).into()),
        ],
        &["reason"],
    )
    .build()
);

/// Registrations a lookup found.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct LookupOut {
    pub count: usize,
    pub registrations: Vec<RegistrationOut>,
}

/// Looks a person's registrations up by national id or registration id, recording who and why (staff)
///
/// For staff answering a person's call: finds registrations by national id or
/// by registration id (exactly one of the two), at the caller's places. The
/// body states why (`reason`); who looked, why and what was found is recorded
/// in the booking audit stream.
#[utoipa::path(post, path = "/api/booking/staff/lookup", tag = "booking",
    request_body(content = inline(LookupRequest), description = "One of nationalId or registrationId, and a reason (5 to 500 characters)",
                 example = json!({"nationalId": "12345678901", "reason": "caller lost the confirmation SMS"})),
    security(("bearer" = [])),
    responses((status = 200, body = LookupOut, description = "The registrations found at the caller's places (an admin's or a '*' token: every place); SupportLookup in the booking-audit stream records who looked, why, how and what was found",
               example = json!({"count": 1, "registrations": [{"registrationId": "01943b6e-8f1a-7c3e-9a4b-2d5e6f708192", "placeId": 1,
                   "placeName": "Town hall", "day": "2030-01-07", "timeSlot": 0, "start": "08:00", "address": "Main square 1",
                   "createdAt": "2030-01-02T09:30:00.000Z",
                   "person": {"name": "Ana Horvat", "nationalId": "12345678901", "phone": "+385 91 234 5678", "email": "ana@example.org"}}]})),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden or no_places"),
              (status = 422, description = "invalid_field: neither or both ids, a malformed id, a reason too short or too long, no day under the person-day rule; lookup_unavailable: with --booking-one-registration off no index of national ids is kept")))]
pub async fn support_lookup(
    State(st): State<Arc<BookingState>>,
    staff: Staff,
    ApiJson(req): ApiJson<LookupRequest>,
) -> ApiResult<Json<LookupOut>> {
    let reason = req.reason.trim().to_string();
    let refused = |c: char| crate::platform::openapi::refused_char(c, false);
    if reason.chars().count() < REASON_CHARS_MIN
        || req.reason.chars().count() > REASON_CHARS_MAX
        || req.reason.chars().any(refused)
    {
        return Err(ApiError::invalid_field(format!(
            "reason: {REASON_CHARS_MIN} to {REASON_CHARS_MAX} characters saying why the data is \
             looked at, no control characters or bidirectional controls"
        )));
    }
    // A day, when given, is checked whichever id is (and narrows either).
    let day = req
        .day
        .as_deref()
        .map(|d| Day::parse("day", d))
        .transpose()?;
    let (how, found) = match (&req.national_id, &req.registration_id) {
        (Some(nid), None) => ("nationalId", by_national_id(&st, nid, day).await?),
        (None, Some(id)) => {
            let found = if plausible_id(id) {
                st.storage.registration(id).await?.into_iter().collect()
            } else {
                return Err(ApiError::invalid_field(
                    "registrationId: a registration id (a UUID, 36 characters)",
                ));
            };
            ("registrationId", found)
        }
        _ => {
            return Err(ApiError::invalid_field(
                "nationalId or registrationId: give exactly one of them",
            ))
        }
    };
    let found: Vec<SealedRegistration> = found
        .into_iter()
        .filter(|r| staff.covers(r.place_id) && day.is_none_or(|d| r.day == d))
        .collect();
    let ids: Vec<&str> = found.iter().map(|r| r.id.as_str()).collect();
    office::audit(
        &st.store,
        office::AUDIT_STREAM.to_string(),
        office::EVENT_SUPPORT_LOOKUP,
        serde_json::json!({
            "by": staff.actor(), "reason": reason, "lookedUpBy": how,
            "registrationIds": ids, "atMs": crate::base::clock::now_ms(),
        }),
    )
    .await?;
    let mut registrations = Vec::with_capacity(found.len());
    for reg in &found {
        let person = open_person(&st, reg)?;
        let place = st.storage.place(reg.place_id).await?;
        registrations.push(RegistrationOut {
            registration_id: reg.id.clone(),
            place_id: reg.place_id,
            place_name: place.as_ref().map(|p| p.name.clone()),
            day: reg.day.to_text(),
            time_slot: reg.time_slot,
            start: place.as_ref().map(|p| p.slot_start(reg.time_slot)),
            address: place.as_ref().map(|p| p.address.clone()),
            created_at: crate::base::clock::rfc3339_ms(reg.created_at_ms),
            person,
        });
    }
    Ok(Json(LookupOut {
        count: registrations.len(),
        registrations,
    }))
}

/// The registrations of a national id, through the blind index under the
/// one-registration rule's scope.
async fn by_national_id(
    st: &BookingState,
    national_id: &str,
    day: Option<Day>,
) -> ApiResult<Vec<SealedRegistration>> {
    // Exactly as stated (no trimming): what the document refuses is refused.
    let nid = national_id;
    let ok = (1..=NATIONAL_ID_CHARS_MAX).contains(&nid.len())
        && nid
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '/' || c == '-');
    if !ok {
        return Err(ApiError::invalid_field(format!(
            "nationalId: 1 to {NATIONAL_ID_CHARS_MAX} letters, digits, '/' or '-'"
        )));
    }
    let scope_day =
        match (st.one_registration, day) {
            (OneRegistration::Off, _) => return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "lookup_unavailable",
                "with --booking-one-registration off no index of national ids is kept; look the \
                 registration up by its id",
            )),
            (OneRegistration::PersonDay, None) => return Err(ApiError::invalid_field(
                "day: the day of the registration (YYYY-MM-DD) is needed to find it by national \
                 id under --booking-one-registration person-day",
            )),
            (_, day) => day.unwrap_or(Day(0)),
        };
    let scope = st
        .one_registration
        .scope(scope_day)
        .ok_or_else(ApiError::internal)?;
    let key = st.blind_index.of(&scope, &national_id_key(nid)).to_vec();
    Ok(office::by_person_key(&st.store, key).await?)
}

/// Books a slot on a person's behalf (a call centre: staff of the place)
///
/// For the staff of a place, on the phone with a person: books a slot by the
/// same rules as a public booking (`slot_full`, `already_registered`). The
/// person receives the confirmation with the access code; the registration's
/// stream names who booked.
#[utoipa::path(post, path = "/api/booking/staff/registrations", tag = "booking",
    request_body(content = inline(RegistrationRequest), description = "As a public booking: {placeId, day: YYYY-MM-DD, timeSlot, person:{name, nationalId, phone, email}}",
                 example = json!({"placeId": 1, "day": "2030-01-07", "timeSlot": 0,
                                  "person": {"name": "Ana Horvat", "nationalId": "12345678901",
                                             "phone": "+385 91 234 5678", "email": "ana@example.org"}})),
    security(("bearer" = [])),
    responses((status = 201, body = Registered, description = "Booked by the same rules as a public booking; RegistrationBookedOnBehalf in the registration's stream names who booked; the confirmation sent to the person carries the access code",
               example = json!({"registrationId": "01943b6e-8f1a-7c3e-9a4b-2d5e6f708192",
                                "accessCode": "K7QM-3XHT-9WCF", "placeId": 1, "day": "2030-01-07", "timeSlot": 0})),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden, no_places or not_your_place"),
              (status = 404, description = "place_not_found or slot_not_found"),
              (status = 409, description = "slot_full or already_registered"),
              (status = 422, description = "invalid_field, naming the field; day_passed or slot_passed")))]
pub async fn book_on_behalf(
    State(st): State<Arc<BookingState>>,
    staff: Staff,
    ApiJson(req): ApiJson<RegistrationRequest>,
) -> ApiResult<Response> {
    let new = req.parse()?;
    staff.require_place(new.place_id)?;
    refuse_passed(&st, new.place_id, new.day, new.time_slot).await?;
    match st.storage.known_state(new.place_id, new.day, new.time_slot) {
        Some(SlotState::Taken) => return Err(slot_full()),
        Some(SlotState::UnknownPlace) => return Err(place_not_found(new.place_id)),
        Some(SlotState::UnknownSlot) => return Err(slot_not_found(&new)),
        Some(SlotState::Free) | None => {}
    }
    let access_code = super::super::access_code::mint();
    let sealed = seal(&st, &new, &access_code);
    let (id, issued_at_ms) = (sealed.id.clone(), sealed.created_at_ms);
    // Kept before the registration commits, so its confirmation (which may
    // go out at once) hands the person the code.
    office::put_pending_code(
        &st.store,
        PendingCode {
            registration_id: id.clone(),
            code_sealed: st.pii.seal(&id, access_code.as_bytes()),
            issued_at_ms,
        },
    )
    .await?;
    let outcome = st.try_register(sealed.clone()).await;
    if !matches!(outcome, Ok(RegisterOutcome::Registered)) {
        kept::forget_code(&st.store, &id, issued_at_ms).await?;
    }
    match outcome? {
        RegisterOutcome::Registered => {}
        RegisterOutcome::SlotTaken => return Err(slot_full()),
        RegisterOutcome::AlreadyRegistered => return Err(already_registered(st.one_registration)),
        RegisterOutcome::PlaceNotFound => return Err(place_not_found(new.place_id)),
        RegisterOutcome::SlotNotFound => return Err(slot_not_found(&new)),
    }
    office::registration_event(
        &st.store,
        &sealed,
        office::EVENT_BOOKED_ON_BEHALF,
        serde_json::json!({ "by": staff.actor(), "atMs": crate::base::clock::now_ms() }),
    )
    .await?;
    let body = Registered {
        registration_id: id,
        access_code,
        place_id: new.place_id,
        day: new.day.to_text(),
        time_slot: new.time_slot,
    };
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// What was sent.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Queued {
    pub registration_id: String,
    /// The message queued (`confirmation` or `new_access_code`); the
    /// notifier sends it from the log.
    pub message: String,
}

/// Sends a registration's confirmation again (staff of its place)
///
/// For the staff of the registration's place: asks the notifier to send the
/// registration's confirmation again, to the contact on the registration.
/// Answers 202 at once; the message follows.
#[utoipa::path(post, path = "/api/booking/staff/registrations/{registration_id}/resend", tag = "booking",
    params(("registration_id" = String, Path, example = "01943b6e-8f1a-7c3e-9a4b-2d5e6f708192")),
    security(("bearer" = [])),
    responses((status = 202, body = Queued, description = "ConfirmationResent appended (naming who); the notifier sends the confirmation again",
               example = json!({"registrationId": "01943b6e-8f1a-7c3e-9a4b-2d5e6f708192", "message": "confirmation"})),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden, no_places or not_your_place"),
              (status = 404, description = "registration_not_found")))]
pub async fn resend_confirmation(
    State(st): State<Arc<BookingState>>,
    staff: Staff,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Response> {
    let reg = staff_registration(&st, &staff, &id).await?;
    office::registration_event(
        &st.store,
        &reg,
        office::EVENT_CONFIRMATION_RESENT,
        serde_json::json!({ "by": staff.actor(), "atMs": crate::base::clock::now_ms() }),
    )
    .await?;
    st.notify_worker.notify_one();
    Ok((
        StatusCode::ACCEPTED,
        Json(Queued {
            registration_id: reg.id,
            message: "confirmation".into(),
        }),
    )
        .into_response())
}

/// Issues a new access code and sends it to the person; the old one stops working (staff of its place)
///
/// For the staff of the registration's place, when a person lost their code:
/// issues a new access code and sends it to the person only; the old code stops
/// opening the registration at once.
#[utoipa::path(post, path = "/api/booking/staff/registrations/{registration_id}/access-code", tag = "booking",
    params(("registration_id" = String, Path, example = "01943b6e-8f1a-7c3e-9a4b-2d5e6f708192")),
    security(("bearer" = [])),
    responses((status = 202, body = Queued, description = "The old code no longer opens the registration; the new one goes to the person only (AccessCodeReissued names who asked)",
               example = json!({"registrationId": "01943b6e-8f1a-7c3e-9a4b-2d5e6f708192", "message": "new_access_code"})),
              (status = 401, description = "missing_token, invalid_token, token_expired"),
              (status = 403, description = "forbidden, no_places or not_your_place"),
              (status = 404, description = "registration_not_found")))]
pub async fn new_access_code(
    State(st): State<Arc<BookingState>>,
    staff: Staff,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<Response> {
    let reg = staff_registration(&st, &staff, &id).await?;
    let code = super::super::access_code::mint();
    let issued_at_ms = crate::base::clock::now_ms();
    let pending = PendingCode {
        registration_id: reg.id.clone(),
        code_sealed: st.pii.seal(&reg.id, code.as_bytes()),
        issued_at_ms,
    };
    if !office::reissue_code(
        &st.store,
        reg.id.clone(),
        super::super::access_code::hash(&code),
        pending,
        staff.actor(),
    )
    .await?
    {
        return Err(staff_registration_not_found());
    }
    st.notify_worker.notify_one();
    Ok((
        StatusCode::ACCEPTED,
        Json(Queued {
            registration_id: reg.id,
            message: "new_access_code".into(),
        }),
    )
        .into_response())
}
