//! Places as an authority defines them, written: a list of changes
//! (definitions, hours, days of other hours, the horizon's next days)
//! applied in one transaction, each place's slots made again for its
//! horizon (`places/horizon.rs`). Every change is checked before anything
//! is written, so a refused list writes nothing.

use std::collections::{BTreeMap, HashMap};

use super::super::model::{self, BookingClock, Day, Place, EVENT_SLOT_WITHDRAWN};
use super::super::places::horizon::{self, Made};
use super::super::places::hours::{DayHours, WeekHours};
use super::super::places::{ChangeRefused, ChangeSummary, PlaceChange, PlaceDef};
use super::places::{place_row, select_place};
use crate::store::{Columns, NewEvent, Sql, StoreError, Tx};

/// Serialises the writes of places across nodes (a place's new id is the
/// largest plus one); SQLite's one writer needs nothing.
static LOCK_PLACES: Sql = Sql::per_dialect("", "SELECT pg_advisory_xact_lock(7340041)");
static PLACE_BY_CODE: Sql = Sql::new(concat!(select_place!(), " WHERE code = ?1"));
static PLACE_BY_ID: Sql = Sql::new(concat!(select_place!(), " WHERE id = ?1"));
static HORIZON_PLACES: Sql =
    Sql::new("SELECT id FROM booking_places WHERE book_ahead_days > 0 ORDER BY id");
static NEXT_ID: Sql = Sql::new("SELECT COALESCE(MAX(id), 0) + 1 FROM booking_places");
static HAS_SLOTS: Sql = Sql::new("SELECT EXISTS (SELECT 1 FROM booking_slots WHERE place_id = ?1)");
static INSERT_PLACE: Sql = Sql::new(
    "INSERT INTO booking_places
        (id, name, address, first_slot_minute, slot_minutes, code, city, postcode, region,
         time_zone, latitude, longitude, services, seats, hours, book_ahead_days,
         notice_minutes, search_text)
     VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
);
static UPDATE_PLACE: Sql = Sql::new(
    "UPDATE booking_places SET name = ?2, address = ?3, slot_minutes = ?4, code = ?5,
        city = ?6, postcode = ?7, region = ?8, time_zone = ?9, latitude = ?10,
        longitude = ?11, services = ?12, seats = ?13, hours = ?14, book_ahead_days = ?15,
        notice_minutes = ?16, search_text = ?17
     WHERE id = ?1",
);
static SET_HOURS: Sql = Sql::new("UPDATE booking_places SET hours = ?2 WHERE id = ?1");
static OWN_DAYS: Sql = Sql::new(
    "SELECT day, hours FROM booking_place_days WHERE place_id = ?1 AND day BETWEEN ?2 AND ?3
     ORDER BY day",
);
static OWN_DAYS_FROM: Sql = Sql::new(
    "SELECT day, hours FROM booking_place_days WHERE place_id = ?1 AND day >= ?2 ORDER BY day",
);
static SET_DAY: Sql = Sql::new(
    "INSERT INTO booking_place_days (place_id, day, hours) VALUES (?1, ?2, ?3)
     ON CONFLICT (place_id, day) DO UPDATE SET hours = excluded.hours",
);
static DELETE_DAY: Sql =
    Sql::new("DELETE FROM booking_place_days WHERE place_id = ?1 AND day = ?2");
static DELETE_CLOSED_DAYS: Sql =
    Sql::new("DELETE FROM booking_place_days WHERE place_id = ?1 AND hours = ''");
/// A place's slots over its horizon, locked where writers are shared so no
/// seat is taken between this read and the writes that follow.
static SLOTS_FOR_CHANGE: Sql = Sql::per_dialect(
    "SELECT day, time_slot, seats, seats_left FROM booking_slots
      WHERE place_id = ?1 AND day BETWEEN ?2 AND ?3",
    "SELECT day, time_slot, seats, seats_left FROM booking_slots
      WHERE place_id = $1 AND day BETWEEN $2 AND $3 FOR UPDATE",
);
/// New slots of a place, `?2` a JSON array of `day * SLOT_KEY_DAY + slot`.
static INSERT_SLOTS: Sql = Sql::per_dialect(
    "INSERT INTO booking_slots (place_id, day, time_slot, seats, seats_left)
     SELECT ?1, value / 2048, value % 2048, ?3, ?3 FROM json_each(?2)",
    "INSERT INTO booking_slots (place_id, day, time_slot, seats, seats_left)
     SELECT $1::BIGINT, (v::BIGINT / 2048)::INT, (v::BIGINT % 2048)::INT, $3::INT, $3::INT
       FROM jsonb_array_elements_text($2::jsonb) AS t(v)",
);
/// The factor of a day in [`INSERT_SLOTS`]' keys (above every time slot).
const SLOT_KEY_DAY: i64 = 2048;
static DELETE_SLOT: Sql =
    Sql::new("DELETE FROM booking_slots WHERE place_id = ?1 AND day = ?2 AND time_slot = ?3");
/// A slot taken out of the hours while it holds people: never offered, its
/// registrations kept (seats_left stays seats minus the people it holds).
static WITHDRAW_SLOT: Sql = Sql::new(
    "UPDATE booking_slots SET seats_left = seats_left - seats, seats = 0
      WHERE place_id = ?1 AND day = ?2 AND time_slot = ?3",
);
/// New seats for a slot (`?4`), its seats left moved by as many.
static SET_SEATS: Sql = Sql::new(
    "UPDATE booking_slots SET seats_left = seats_left + (?4 - seats), seats = ?4
      WHERE place_id = ?1 AND day = ?2 AND time_slot = ?3",
);
/// The registrations of a place over days, to find those on withdrawn
/// slots (a scan: booking_registrations has no index by place, which would
/// cost every registration a random index write).
static REGISTRATIONS_OF_PLACE: Sql = Sql::new(
    "SELECT id, day, time_slot FROM booking_registrations
      WHERE place_id = ?1 AND day BETWEEN ?2 AND ?3",
);

/// Where the seats a slot holds are known: its row (where writers are
/// shared, `seats - seats_left`) or the writer's availability index.
pub enum HeldFrom<'a> {
    Rows,
    Index(&'a (dyn Fn(i64, Day, i32) -> i32 + Sync)),
}

/// Applies `changes` in `tx`: every change checked first (a refusal writes
/// nothing), then written, each place's slots made again for its horizon.
/// Answers the summary and the ids of the places whose slots changed.
pub async fn apply(
    tx: &Tx<'_>,
    changes: &[PlaceChange],
    held: &HeldFrom<'_>,
    clock: BookingClock,
    now_ms: i64,
) -> Result<Result<(ChangeSummary, Vec<i64>), ChangeRefused>, StoreError> {
    tx.batch(&LOCK_PLACES).await?;
    // Checks.
    let mut existing: Vec<Option<Place>> = Vec::with_capacity(changes.len());
    for (at, change) in changes.iter().enumerate() {
        match change {
            PlaceChange::Define { id, def, .. } => {
                let by_code = tx
                    .query_opt(&PLACE_BY_CODE, &[&def.code], |r| place_row(r))
                    .await?;
                let found = match id {
                    None => by_code,
                    Some(id) => {
                        if by_code.is_some_and(|p| p.id != *id) {
                            return Ok(Err(ChangeRefused::CodeTaken {
                                at,
                                code: def.code.clone(),
                            }));
                        }
                        let Some(p) = place_by_id(tx, *id).await? else {
                            return Ok(Err(ChangeRefused::UnknownPlace(*id)));
                        };
                        Some(p)
                    }
                };
                if let Some(p) = &found {
                    if p.slot_minutes != def.slot_minutes
                        && tx
                            .query_one(&HAS_SLOTS, &[&p.id], |r| r.col::<bool>(0))
                            .await?
                    {
                        return Ok(Err(ChangeRefused::SlotMinutesFixed {
                            at,
                            code: def.code.clone(),
                        }));
                    }
                    if let Err(message) =
                        def.hours.check_grid(p.first_slot_minute, def.slot_minutes)
                    {
                        return Ok(Err(ChangeRefused::OffGrid { at, message }));
                    }
                }
                existing.push(found);
            }
            PlaceChange::Hours { id, hours } => {
                let Some(p) = place_by_id(tx, *id).await? else {
                    return Ok(Err(ChangeRefused::UnknownPlace(*id)));
                };
                if let Err(message) = hours.check_grid(p.first_slot_minute, p.slot_minutes) {
                    return Ok(Err(ChangeRefused::OffGrid { at, message }));
                }
                existing.push(Some(p));
            }
            PlaceChange::Day { id, hours, .. } => {
                let Some(p) = place_by_id(tx, *id).await? else {
                    return Ok(Err(ChangeRefused::UnknownPlace(*id)));
                };
                if let Some(Err(message)) = hours
                    .as_ref()
                    .map(|h| h.check_grid(p.first_slot_minute, p.slot_minutes))
                {
                    return Ok(Err(ChangeRefused::OffGrid { at, message }));
                }
                existing.push(Some(p));
            }
            PlaceChange::Extend => existing.push(None),
        }
    }
    // Writes.
    let mut summary = ChangeSummary::default();
    let mut changed = Vec::new();
    for (change, found) in changes.iter().zip(existing) {
        let ids = match change {
            PlaceChange::Define { def, closed, .. } => {
                let id = match found {
                    Some(p) => {
                        write_place(tx, &UPDATE_PLACE, p.id, def).await?;
                        summary.updated += 1;
                        p.id
                    }
                    None => {
                        let id = tx.query_one(&NEXT_ID, &[], |r| r.int(0)).await?;
                        write_place(tx, &INSERT_PLACE, id, def).await?;
                        summary.created += 1;
                        id
                    }
                };
                if let Some(days) = closed {
                    tx.execute(&DELETE_CLOSED_DAYS, &[&id]).await?;
                    let empty = String::new();
                    for d in days {
                        tx.execute(&SET_DAY, &[&id, &d.0, &empty]).await?;
                    }
                }
                summary.place_ids.push(id);
                vec![id]
            }
            PlaceChange::Hours { id, hours } => {
                tx.execute(&SET_HOURS, &[id, &hours.to_text()]).await?;
                summary.place_ids.push(*id);
                vec![*id]
            }
            PlaceChange::Day { id, day, hours } => {
                match hours {
                    Some(h) => tx.execute(&SET_DAY, &[id, &day.0, &h.to_text()]).await?,
                    None => tx.execute(&DELETE_DAY, &[id, &day.0]).await?,
                };
                summary.place_ids.push(*id);
                vec![*id]
            }
            PlaceChange::Extend => tx.query(&HORIZON_PLACES, &[], |r| r.int(0)).await?,
        };
        for id in ids {
            let made = make_days(tx, id, held, clock, now_ms).await?;
            if made.added + made.removed + made.changed > 0 {
                changed.push(id);
            }
            summary.add(made);
        }
    }
    changed.sort_unstable();
    changed.dedup();
    Ok(Ok((summary, changed)))
}

/// A place's days of other hours from `from` on (hours '' for closed).
pub async fn own_days(
    store: &crate::store::Store,
    id: i64,
    from: Day,
) -> Result<Vec<(Day, String)>, StoreError> {
    store
        .read(move |c| {
            Box::pin(async move {
                c.query(&OWN_DAYS_FROM, &[&id, &from.0], |r| {
                    Ok((Day(r.int4(0)?), r.text(1)?))
                })
                .await
            })
        })
        .await
}

async fn place_by_id(tx: &Tx<'_>, id: i64) -> Result<Option<Place>, StoreError> {
    tx.query_opt(&PLACE_BY_ID, &[&id], |r| place_row(r)).await
}

async fn write_place(tx: &Tx<'_>, sql: &Sql, id: i64, def: &PlaceDef) -> Result<(), StoreError> {
    tx.execute(
        sql,
        &[
            &id,
            &def.name,
            &def.address,
            &def.slot_minutes,
            &def.code,
            &def.city,
            &def.postcode,
            &def.region,
            &def.time_zone,
            &def.latitude,
            &def.longitude,
            &def.services_text(),
            &def.seats,
            &def.hours.to_text(),
            &def.book_ahead_days,
            &def.notice_minutes,
            &def.search_text(),
        ],
    )
    .await?;
    Ok(())
}

/// Makes place `id`'s slots for its horizon from its hours: adds the
/// missing ones, sets every slot's seats to the place's, deletes slots the
/// hours no longer open and withdraws those holding people (an event per
/// registration).
pub async fn make_days(
    tx: &Tx<'_>,
    id: i64,
    held: &HeldFrom<'_>,
    clock: BookingClock,
    now_ms: i64,
) -> Result<Made, StoreError> {
    let mut made = Made::default();
    let Some(place) = place_by_id(tx, id).await? else {
        return Ok(made);
    };
    let (from, days) = horizon::horizon(&place, clock, now_ms);
    if days == 0 {
        return Ok(made);
    }
    let last = from.plus(days - 1);
    let week = WeekHours::parse(&place.hours).map_err(|e| {
        StoreError::Internal(format!("place {id}'s stored hours do not parse: {e}"))
    })?;
    let own: Vec<(Day, DayHours)> = tx
        .query(&OWN_DAYS, &[&id, &from.0, &last.0], |r| {
            let hours: String = r.text(1)?;
            Ok((Day(r.int4(0)?), DayHours::parse(&hours).unwrap_or_default()))
        })
        .await?;
    let mut wanted: BTreeMap<(i32, i32), ()> = BTreeMap::new();
    for offset in 0..days {
        let day = from.plus(offset);
        let hours = horizon::hours_of_day(&week, &own, day);
        for slot in horizon::slots_of_day(&place, hours, day) {
            wanted.insert((day.0, slot), ());
        }
    }
    let rows: Vec<(i32, i32, i32, i32)> = tx
        .query(&SLOTS_FOR_CHANGE, &[&id, &from.0, &last.0], |r| {
            Ok((r.int4(0)?, r.int4(1)?, r.int4(2)?, r.int4(3)?))
        })
        .await?;
    let seats = place.seats;
    let mut withdrawn: HashMap<(i32, i32), ()> = HashMap::new();
    for &(day, slot, row_seats, seats_left) in &rows {
        let held_now = match held {
            HeldFrom::Rows => row_seats - seats_left,
            HeldFrom::Index(f) => f(id, Day(day), slot),
        };
        if wanted.remove(&(day, slot)).is_some() {
            if row_seats != seats {
                tx.execute(&SET_SEATS, &[&id, &day, &slot, &seats]).await?;
                made.changed += 1;
                if held_now > seats {
                    made.over_seats += i64::from(held_now);
                }
            }
        } else if row_seats > 0 {
            made.removed += 1;
            if held_now > 0 {
                tx.execute(&WITHDRAW_SLOT, &[&id, &day, &slot]).await?;
                withdrawn.insert((day, slot), ());
            } else {
                tx.execute(&DELETE_SLOT, &[&id, &day, &slot]).await?;
            }
        }
    }
    if !wanted.is_empty() {
        let keys: Vec<i64> = wanted
            .keys()
            .map(|&(d, s)| i64::from(d) * SLOT_KEY_DAY + i64::from(s))
            .collect();
        let json = serde_json::to_string(&keys).expect("integers serialise");
        tx.execute(&INSERT_SLOTS, &[&id, &json, &seats]).await?;
        made.added = keys.len() as i64;
    }
    if !withdrawn.is_empty() {
        let regs: Vec<(String, i32, i32)> = tx
            .query(&REGISTRATIONS_OF_PLACE, &[&id, &from.0, &last.0], |r| {
                Ok((r.text(0)?, r.int4(1)?, r.int4(2)?))
            })
            .await?;
        for (reg, day, slot) in regs {
            if withdrawn.contains_key(&(day, slot)) {
                tx.append(withdrawn_event(&reg, id, Day(day), slot))?;
                made.withdrawn_registrations.push(reg);
            }
        }
    }
    Ok(made)
}

/// The payload of `SlotWithdrawn`: ids and the slot only.
fn withdrawn_event(registration_id: &str, place_id: i64, day: Day, time_slot: i32) -> NewEvent {
    NewEvent::json(
        model::stream_of(registration_id),
        EVENT_SLOT_WITHDRAWN,
        &model::SlotEvent {
            registration_id: std::borrow::Cow::Borrowed(registration_id),
            place_id,
            day: day.to_text(),
            time_slot,
        },
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn slot_keys_leave_room_for_every_time_slot() {
        assert!(super::SLOT_KEY_DAY > i64::from(super::super::super::model::SLOTS_PER_DAY_MAX));
    }
}
