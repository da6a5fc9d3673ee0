//! What the messages worker reads besides the log (`notifier.rs`): a
//! cancelled registration's sealed contact data, an access code waiting to
//! be sent, the reminders it appended, and the purge of what it kept.

use super::super::model::{self, Day};
use crate::store::{Columns, NewEvent, Sql, Store, StoreError};

/// The event a due reminder appends (in the registration's stream).
pub const EVENT_REMINDER_DUE: &str = "ReminderDue";

/// A cancelled registration as kept for its message.
#[derive(Clone, Debug)]
pub struct Cancelled {
    pub id: String,
    pub place_id: i64,
    pub day: Day,
    pub time_slot: i32,
    pub person_sealed: Vec<u8>,
}

static CANCELLED: Sql = Sql::new(
    "SELECT id, place_id, day, time_slot, person_sealed FROM booking_cancelled WHERE id = ?1",
);
static FORGET_CANCELLED: Sql = Sql::new("DELETE FROM booking_cancelled WHERE id = ?1");
static PENDING_CODE: Sql = Sql::new(
    "SELECT code_sealed, issued_at_ms FROM booking_codes_pending WHERE registration_id = ?1",
);
static FORGET_CODE: Sql =
    Sql::new("DELETE FROM booking_codes_pending WHERE registration_id = ?1 AND issued_at_ms = ?2");
static PURGE_CANCELLED: Sql = Sql::new("DELETE FROM booking_cancelled WHERE cancelled_at_ms < ?1");
static PURGE_CODES: Sql = Sql::new("DELETE FROM booking_codes_pending WHERE issued_at_ms < ?1");

/// A cancelled registration's kept contact data.
pub async fn cancelled(store: &Store, id: &str) -> Result<Option<Cancelled>, StoreError> {
    let id = id.to_string();
    store
        .read(move |c| {
            Box::pin(async move {
                c.query_opt(&CANCELLED, &[&id], |r| {
                    Ok(Cancelled {
                        id: r.text(0)?,
                        place_id: r.int(1)?,
                        day: Day(r.int4(2)?),
                        time_slot: r.int4(3)?,
                        person_sealed: r.bytes(4)?,
                    })
                })
                .await
            })
        })
        .await
}

/// Runs one statement of `id` (and maybe a second key) as a write.
async fn write_one(
    store: &Store,
    sql: &'static Sql,
    id: String,
    at: Option<i64>,
) -> Result<(), StoreError> {
    store
        .write(move |tx| {
            let id = id.clone();
            Box::pin(async move {
                match at {
                    Some(at) => tx.execute(sql, &[&id, &at]).await?,
                    None => tx.execute(sql, &[&id]).await?,
                };
                Ok(())
            })
        })
        .await
}

/// Deletes a cancelled registration's contact data (its message went out).
pub async fn forget_cancelled(store: &Store, id: &str) -> Result<(), StoreError> {
    write_one(store, &FORGET_CANCELLED, id.to_string(), None).await
}

/// The access code waiting for registration `id`'s message: sealed, and
/// when it was issued.
pub async fn pending_code(store: &Store, id: &str) -> Result<Option<(Vec<u8>, i64)>, StoreError> {
    let id = id.to_string();
    store
        .read(move |c| {
            Box::pin(async move {
                c.query_opt(&PENDING_CODE, &[&id], |r| Ok((r.bytes(0)?, r.int(1)?)))
                    .await
            })
        })
        .await
}

/// Deletes the code issued at `issued_at_ms` (a later one stays).
pub async fn forget_code(store: &Store, id: &str, issued_at_ms: i64) -> Result<(), StoreError> {
    write_one(store, &FORGET_CODE, id.to_string(), Some(issued_at_ms)).await
}

/// Deletes kept contact data and codes older than `before_ms` (messages
/// that never went out: parked, or no worker ran).
pub async fn purge(store: &Store, before_ms: i64) -> Result<(), StoreError> {
    store
        .write(move |tx| {
            Box::pin(async move {
                tx.execute(&PURGE_CANCELLED, &[&before_ms]).await?;
                tx.execute(&PURGE_CODES, &[&before_ms]).await?;
                Ok(())
            })
        })
        .await
}

/// Registrations whose start (at the booking's offset) falls in a window
/// and that were not reminded of that slot yet.
static DUE_REMINDERS: Sql = Sql::new(
    "SELECT r.id, r.place_id, r.day, r.time_slot
       FROM booking_registrations r
       JOIN booking_places p ON p.id = r.place_id
      WHERE r.day BETWEEN ?1 AND ?2
        AND (CAST(r.day AS BIGINT) * 86400
             + CAST(p.first_slot_minute + r.time_slot * p.slot_minutes AS BIGINT) * 60
             - ?3) * 1000 BETWEEN ?4 AND ?5
        AND NOT EXISTS (SELECT 1 FROM booking_reminders m
                         WHERE m.registration_id = r.id AND m.place_id = r.place_id
                           AND m.day = r.day AND m.time_slot = r.time_slot)
      ORDER BY r.day, r.place_id, r.time_slot
      LIMIT ?6",
);
static REMINDED: Sql = Sql::new(
    "INSERT INTO booking_reminders (registration_id, place_id, day, time_slot, at_ms)
     VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
);

/// What schedules reminders: the window and the clock's offset.
#[derive(Clone, Copy, Debug)]
pub struct ReminderWindow {
    pub now_ms: i64,
    pub before_ms: i64,
    pub offset_s: i64,
    pub limit: i64,
}

/// Appends a `ReminderDue` for every registration starting within
/// `before_ms` from now that was not reminded of its slot, and records
/// them, in one write; how many.
pub async fn schedule_reminders(store: &Store, w: ReminderWindow) -> Result<usize, StoreError> {
    // Days that can hold a start in the window, whatever the offset.
    let first = Day(((w.now_ms / 1000 + w.offset_s) / 86_400 - 1) as i32);
    let last = Day((((w.now_ms + w.before_ms) / 1000 + w.offset_s) / 86_400 + 1) as i32);
    store
        .write(move |tx| {
            Box::pin(async move {
                let due = tx
                    .query(
                        &DUE_REMINDERS,
                        &[
                            &first.0,
                            &last.0,
                            &w.offset_s,
                            &w.now_ms,
                            &(w.now_ms + w.before_ms),
                            &w.limit,
                        ],
                        |r| Ok((r.text(0)?, r.int(1)?, r.int4(2)?, r.int4(3)?)),
                    )
                    .await?;
                for (id, place_id, day, time_slot) in &due {
                    tx.execute(&REMINDED, &[id, place_id, day, time_slot, &w.now_ms])
                        .await?;
                    tx.append(NewEvent::json(
                        model::stream_of(id),
                        EVENT_REMINDER_DUE,
                        &model::SlotEvent {
                            registration_id: std::borrow::Cow::Borrowed(id),
                            place_id: *place_id,
                            day: Day(*day).to_text(),
                            time_slot: *time_slot,
                        },
                    ))?;
                }
                Ok(due.len())
            })
        })
        .await
}
