//! The back office's statements, written once against the store's seam: a
//! place's day read from `booking_registrations` by place and day (never
//! one registration per slot: a slot may hold several), attendance, closing
//! a day, support lookups, access codes waiting to be sent and the audit
//! events that record who read or changed what.

use super::super::model::{self, Day, SealedRegistration};
use crate::store::{Columns, NewEvent, Sql, Store, StoreError, Tx};

/// A day's registrations read at most; a longer list says it was cut.
pub const DAY_LIST_REGISTRATIONS_MAX: i64 = 20_000;
/// Registrations a support lookup answers at most.
pub const LOOKUP_REGISTRATIONS_MAX: i64 = 100;

/// The stream of the back office's audit events (reads of personal data,
/// lookups) and of a place's own events.
pub const AUDIT_STREAM: &str = "booking-audit";
pub fn place_stream(place_id: i64) -> String {
    format!("booking-place-{place_id}")
}

pub const EVENT_DAY_LIST_READ: &str = "DayListRead";
pub const EVENT_SUPPORT_LOOKUP: &str = "SupportLookup";
pub const EVENT_CHECKED_IN: &str = "RegistrationCheckedIn";
pub const EVENT_NO_SHOW: &str = "RegistrationNoShow";
pub const EVENT_BOOKED_ON_BEHALF: &str = "RegistrationBookedOnBehalf";
pub const EVENT_CONFIRMATION_RESENT: &str = "ConfirmationResent";
pub const EVENT_ACCESS_CODE_REISSUED: &str = "AccessCodeReissued";
pub const EVENT_CANCELLED_BY_PLACE: &str = "RegistrationCancelledByPlace";
pub const EVENT_PLACE_DAY_CLOSED: &str = "PlaceDayClosed";

/// Check-in or no-show.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Attendance {
    CheckedIn,
    NoShow,
}

impl Attendance {
    pub fn as_str(self) -> &'static str {
        match self {
            Attendance::CheckedIn => "checked_in",
            Attendance::NoShow => "no_show",
        }
    }
    fn parse(text: &str) -> Option<Attendance> {
        match text {
            "checked_in" => Some(Attendance::CheckedIn),
            "no_show" => Some(Attendance::NoShow),
            _ => None,
        }
    }
    pub fn event_type(self) -> &'static str {
        match self {
            Attendance::CheckedIn => EVENT_CHECKED_IN,
            Attendance::NoShow => EVENT_NO_SHOW,
        }
    }
}

/// A registration of a day's list, its person still sealed.
pub struct DayRow {
    pub id: String,
    pub time_slot: i32,
    pub person_sealed: Vec<u8>,
    pub created_at_ms: i64,
    pub attendance: Option<(Attendance, String, i64)>,
}

static DAY_LIST: Sql = Sql::new(
    "SELECT r.id, r.time_slot, r.person_sealed, r.created_at_ms, a.status, a.by_sub, a.at_ms
     FROM booking_registrations r
     LEFT JOIN booking_attendance a ON a.registration_id = r.id
     WHERE r.day = ?1 AND r.place_id = ?2
     ORDER BY r.time_slot, r.created_at_ms, r.id
     LIMIT ?3",
);

/// A place's registrations on `day` in slot order, at most `limit`.
pub async fn day_list(
    store: &Store,
    place_id: i64,
    day: Day,
    limit: i64,
) -> Result<Vec<DayRow>, StoreError> {
    store
        .read(move |c| {
            Box::pin(async move {
                c.query(&DAY_LIST, &[&day.0, &place_id, &limit], |r| {
                    let status: Option<String> = r.col(4)?;
                    let attendance = match status.as_deref().and_then(Attendance::parse) {
                        Some(a) => Some((a, r.text(5)?, r.int(6)?)),
                        None => None,
                    };
                    Ok(DayRow {
                        id: r.text(0)?,
                        time_slot: r.int4(1)?,
                        person_sealed: r.bytes(2)?,
                        created_at_ms: r.int(3)?,
                        attendance,
                    })
                })
                .await
            })
        })
        .await
}

/// Appends one audit event in a command of its own (before the read it
/// records is answered).
pub async fn audit(
    store: &Store,
    stream: String,
    event_type: &'static str,
    payload: serde_json::Value,
) -> Result<(), StoreError> {
    store
        .append_event(NewEvent::json(stream, event_type, &payload))
        .await
}

static MARK: Sql = Sql::new(
    "INSERT INTO booking_attendance (registration_id, place_id, day, status, by_sub, at_ms)
     SELECT id, place_id, day, ?3, ?4, ?5 FROM booking_registrations
      WHERE id = ?1 AND place_id = ?2
     ON CONFLICT (registration_id) DO UPDATE
        SET status = excluded.status, by_sub = excluded.by_sub, at_ms = excluded.at_ms",
);

/// Records `attendance` of registration `id` at `place_id` (the place the
/// caller was checked against: a registration moved away meanwhile is not
/// marked), with its event; `false` when no such registration is there.
pub async fn mark(
    store: &Store,
    id: String,
    place_id: i64,
    attendance: Attendance,
    actor: super::access::Actor,
    at_ms: i64,
) -> Result<bool, StoreError> {
    store
        .write(move |tx| {
            let (id, actor) = (id.clone(), actor.clone());
            Box::pin(async move {
                let n = tx
                    .execute(
                        &MARK,
                        &[&id, &place_id, &attendance.as_str(), &actor.sub, &at_ms],
                    )
                    .await?;
                if n == 0 {
                    return Ok(false);
                }
                tx.append(NewEvent::json(
                    model::stream_of(&id),
                    attendance.event_type(),
                    &serde_json::json!({
                        "registrationId": id, "placeId": place_id,
                        "by": actor, "atMs": at_ms,
                    }),
                ))?;
                Ok(true)
            })
        })
        .await
}

/// A registration's columns, as `registration_row` reads them.
macro_rules! select_registration {
    () => {
        "SELECT id, access_hash, place_id, day, time_slot, person_sealed, created_at_ms, person_key
         FROM booking_registrations"
    };
}

fn registration_row(r: &impl Columns) -> Result<SealedRegistration, StoreError> {
    Ok(SealedRegistration {
        id: r.text(0)?,
        access_hash: r.bytes(1)?,
        place_id: r.int(2)?,
        day: Day(r.int4(3)?),
        time_slot: r.int4(4)?,
        person_sealed: r.bytes(5)?,
        created_at_ms: r.int(6)?,
        person_key: r.opt_bytes(7)?,
    })
}

/// Registrations by their blind-index key. PostgreSQL finds them through
/// the unique index; SQLite has none on the key (a registration only
/// appends there), so this scans the table: a support lookup, not a hot
/// path (see ARCHITECTURE.md).
static BY_PERSON_KEY: Sql = Sql::new(concat!(
    select_registration!(),
    " WHERE person_key = ?1 ORDER BY day, time_slot LIMIT ?2"
));

/// The registrations holding blind-index key `key`.
pub async fn by_person_key(
    store: &Store,
    key: Vec<u8>,
) -> Result<Vec<SealedRegistration>, StoreError> {
    store
        .read_blocking(move |c| {
            Box::pin(async move {
                c.query(&BY_PERSON_KEY, &[&key, &LOOKUP_REGISTRATIONS_MAX], |r| {
                    registration_row(r)
                })
                .await
            })
        })
        .await
}

static CLOSED: Sql = Sql::new(
    "INSERT INTO booking_closed_days (place_id, day, closed_by, closed_at_ms, registrations)
     VALUES (?1, ?2, ?3, ?4, 0) ON CONFLICT (place_id, day) DO NOTHING",
);
static CLOSED_COUNT: Sql =
    Sql::new("UPDATE booking_closed_days SET registrations = ?3 WHERE place_id = ?1 AND day = ?2");
static DELETE_DAY_SLOTS: Sql =
    Sql::new("DELETE FROM booking_slots WHERE place_id = ?1 AND day = ?2");
static DAY_REGISTRATIONS: Sql = Sql::new(concat!(
    select_registration!(),
    " WHERE day = ?2 AND place_id = ?1"
));
static KEEP_DAY_CANCELLED: Sql = Sql::new(
    "INSERT INTO booking_cancelled (id, place_id, day, time_slot, person_sealed, cancelled_at_ms)
     SELECT id, place_id, day, time_slot, person_sealed, ?3 FROM booking_registrations
      WHERE day = ?2 AND place_id = ?1
     ON CONFLICT (id) DO NOTHING",
);
static DELETE_DAY_REGISTRATIONS: Sql =
    Sql::new("DELETE FROM booking_registrations WHERE day = ?2 AND place_id = ?1");
static IS_CLOSED: Sql =
    Sql::new("SELECT closed_by, closed_at_ms, registrations FROM booking_closed_days WHERE place_id = ?1 AND day = ?2");

/// A closed day as recorded.
#[derive(Clone, Debug)]
pub struct ClosedDay {
    pub closed_by: String,
    pub closed_at_ms: i64,
    pub registrations: i64,
}

/// Whether (and by whom) a place's day was closed.
pub async fn closed_day(
    store: &Store,
    place_id: i64,
    day: Day,
) -> Result<Option<ClosedDay>, StoreError> {
    store
        .read(move |c| {
            Box::pin(async move {
                c.query_opt(&IS_CLOSED, &[&place_id, &day.0], |r| {
                    Ok(ClosedDay {
                        closed_by: r.text(0)?,
                        closed_at_ms: r.int(1)?,
                        registrations: r.int(2)?,
                    })
                })
                .await
            })
        })
        .await
}

/// Closes a place's day in the writer's transaction: the day recorded as
/// closed, its slots deleted (so no registration or move can take one), its
/// registrations kept sealed for their messages and deleted, a
/// `RegistrationCancelledByPlace` per registration and a `PlaceDayClosed`.
/// The slots go first: where writers are shared, a registration taking one
/// of them commits before (and is then read and cancelled here) or finds
/// it gone. `None` when the day was closed already (nothing changes).
pub async fn close_day_tx(
    tx: &Tx<'_>,
    place_id: i64,
    day: Day,
    actor: &super::access::Actor,
    at_ms: i64,
) -> Result<Option<Vec<SealedRegistration>>, StoreError> {
    if tx
        .execute(&CLOSED, &[&place_id, &day.0, &actor.sub, &at_ms])
        .await?
        == 0
    {
        return Ok(None);
    }
    tx.execute(&DELETE_DAY_SLOTS, &[&place_id, &day.0]).await?;
    let regs = tx
        .query(&DAY_REGISTRATIONS, &[&place_id, &day.0], |r| {
            registration_row(r)
        })
        .await?;
    tx.execute(&KEEP_DAY_CANCELLED, &[&place_id, &day.0, &at_ms])
        .await?;
    tx.execute(&DELETE_DAY_REGISTRATIONS, &[&place_id, &day.0])
        .await?;
    let count = regs.len() as i64;
    tx.execute(&CLOSED_COUNT, &[&place_id, &day.0, &count])
        .await?;
    for reg in &regs {
        tx.append(NewEvent::json(
            model::stream_of(&reg.id),
            EVENT_CANCELLED_BY_PLACE,
            &reg.event_payload(),
        ))?;
    }
    tx.append(NewEvent::json(
        place_stream(place_id),
        EVENT_PLACE_DAY_CLOSED,
        &serde_json::json!({
            "placeId": place_id, "day": day.to_text(), "by": actor,
            "registrations": count, "atMs": at_ms,
        }),
    ))?;
    Ok(Some(regs))
}

static SET_ACCESS_HASH: Sql =
    Sql::new("UPDATE booking_registrations SET access_hash = ?2 WHERE id = ?1");
static PUT_CODE: Sql = Sql::new(
    "INSERT INTO booking_codes_pending (registration_id, code_sealed, issued_at_ms)
     VALUES (?1, ?2, ?3)
     ON CONFLICT (registration_id) DO UPDATE
        SET code_sealed = excluded.code_sealed, issued_at_ms = excluded.issued_at_ms",
);

/// An access code to send, sealed under the registration's id.
pub struct PendingCode {
    pub registration_id: String,
    pub code_sealed: Vec<u8>,
    pub issued_at_ms: i64,
}

/// Replaces registration `id`'s access code (the old one stops opening it
/// at once), keeps the new one sealed for its message and appends
/// `AccessCodeReissued`; `false` when there is no such registration.
pub async fn reissue_code(
    store: &Store,
    id: String,
    access_hash: Vec<u8>,
    code: PendingCode,
    actor: super::access::Actor,
) -> Result<bool, StoreError> {
    let code = std::sync::Arc::new(code);
    store
        .write(move |tx| {
            let (id, access_hash, code, actor) =
                (id.clone(), access_hash.clone(), code.clone(), actor.clone());
            Box::pin(async move {
                if tx.execute(&SET_ACCESS_HASH, &[&id, &access_hash]).await? == 0 {
                    return Ok(false);
                }
                tx.execute(
                    &PUT_CODE,
                    &[&code.registration_id, &code.code_sealed, &code.issued_at_ms],
                )
                .await?;
                tx.append(NewEvent::json(
                    model::stream_of(&id),
                    EVENT_ACCESS_CODE_REISSUED,
                    &serde_json::json!({
                        "registrationId": id, "by": actor, "codeIssuedAtMs": code.issued_at_ms,
                    }),
                ))?;
                Ok(true)
            })
        })
        .await
}

/// Keeps an access code to send with a registration's confirmation (a
/// booking made on a person's behalf), before the registration is written:
/// its confirmation can go out as soon as it commits.
pub async fn put_pending_code(store: &Store, code: PendingCode) -> Result<(), StoreError> {
    let code = std::sync::Arc::new(code);
    store
        .write(move |tx| {
            let code = code.clone();
            Box::pin(async move {
                tx.execute(
                    &PUT_CODE,
                    &[&code.registration_id, &code.code_sealed, &code.issued_at_ms],
                )
                .await?;
                Ok(())
            })
        })
        .await
}

/// Appends one event of a registration (a resent confirmation, a booking on
/// behalf) in a command of its own.
pub async fn registration_event(
    store: &Store,
    reg: &SealedRegistration,
    event_type: &'static str,
    extra: serde_json::Value,
) -> Result<(), StoreError> {
    let mut payload = serde_json::to_value(reg.event_payload()).expect("an event serializes");
    if let (Some(p), serde_json::Value::Object(extra)) = (payload.as_object_mut(), extra) {
        p.extend(extra);
    }
    store
        .append_event(NewEvent::json(
            model::stream_of(&reg.id),
            event_type,
            &payload,
        ))
        .await
}
