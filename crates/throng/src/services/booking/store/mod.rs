//! Booking SQL for both dialects. A slot is decided by one conditional write
//! (`UPDATE .. WHERE registration_id IS NULL`), which holds across every node
//! sharing one PostgreSQL: a concurrent second update waits for the first to
//! commit, re-checks the condition and finds the slot held.

use rusqlite::{params, Connection, OptionalExtension};

use super::model::{
    self, Day, Place, RegisterOutcome, SealedRegistration, EVENT_CANCELLED, EVENT_CONFIRMED,
};
use crate::store::postgres::{PgFuture, PgGroup, PgTx};
use crate::store::{eventlog, NewEvent, Store, StoreError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::availability::{Availability, SlotState};

/// One time slot of one day, as the slot query returns it.
#[derive(Clone, Debug)]
pub struct SlotRow {
    pub day: Day,
    pub time_slot: i32,
    pub free: bool,
}

/// What a cancellation did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelOutcome {
    /// Cancelled; the slot it held is free again.
    Cancelled {
        place_id: i64,
        day: Day,
        time_slot: i32,
        /// Its person key in the availability index (`person_of`), if any.
        person: Option<u64>,
    },
    /// No such registration, or the access code did not match.
    NotFound,
}

/// Booking's counts and the notifier's place in the event log.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BookingStats {
    pub places: i64,
    pub slots: i64,
    pub registrations: i64,
    pub last_event_position: i64,
    pub notifier_position: i64,
}

fn place_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Place> {
    Ok(Place {
        id: r.get(0)?,
        name: r.get(1)?,
        address: r.get(2)?,
        first_slot_minute: r.get(3)?,
        slot_minutes: r.get(4)?,
    })
}

fn place_from_pg(r: &tokio_postgres::Row) -> Place {
    Place {
        id: r.get(0),
        name: r.get(1),
        address: r.get(2),
        first_slot_minute: r.get(3),
        slot_minutes: r.get(4),
    }
}

pub async fn list_places(
    store: &Store,
    skip: i64,
    size: i64,
) -> Result<(Vec<Place>, i64), StoreError> {
    match store {
        Store::Sqlite(s) => {
            s.read(move |c| {
                let places = c
                    .prepare_cached(
                        "SELECT id, name, address, first_slot_minute, slot_minutes
                         FROM booking_places ORDER BY id LIMIT ?1 OFFSET ?2",
                    )?
                    .query_map([size, skip], place_from_row)?
                    .collect::<Result<Vec<_>, _>>()?;
                let total = c.query_row("SELECT COUNT(*) FROM booking_places", [], |r| r.get(0))?;
                Ok((places, total))
            })
            .await
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            let rows = client
                .query(
                    "SELECT id, name, address, first_slot_minute, slot_minutes
                     FROM booking_places ORDER BY id LIMIT $1 OFFSET $2",
                    &[&size, &skip],
                )
                .await?;
            let total: i64 = client
                .query_one("SELECT COUNT(*) FROM booking_places", &[])
                .await?
                .get(0);
            Ok((rows.iter().map(place_from_pg).collect(), total))
        }
    }
}

pub async fn place(store: &Store, id: i64) -> Result<Option<Place>, StoreError> {
    match store {
        Store::Sqlite(s) => {
            s.read(move |c| {
                Ok(c.prepare_cached(
                    "SELECT id, name, address, first_slot_minute, slot_minutes
                     FROM booking_places WHERE id = ?1",
                )?
                .query_row([id], place_from_row)
                .optional()?)
            })
            .await
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            let stmt = client
                .prepare_cached(
                    "SELECT id, name, address, first_slot_minute, slot_minutes
                     FROM booking_places WHERE id = $1",
                )
                .await?;
            Ok(client
                .query_opt(&stmt, &[&id])
                .await?
                .as_ref()
                .map(place_from_pg))
        }
    }
}

/// A place and its slots from `from` for `days` days, in one read.
pub async fn place_slots(
    store: &Store,
    place_id: i64,
    from: Day,
    days: i32,
) -> Result<Option<(Place, Vec<SlotRow>)>, StoreError> {
    let (lo, hi) = (from.0, from.0 + days - 1);
    match store {
        // SQLite slots are served from the availability index (http.rs).
        Store::Sqlite(_) => Err(StoreError::Internal(
            "SQLite slot reads go through the availability index".into(),
        )),
        Store::Postgres(p) => {
            let client = p.client().await?;
            let place_stmt = client
                .prepare_cached(
                    "SELECT id, name, address, first_slot_minute, slot_minutes
                     FROM booking_places WHERE id = $1",
                )
                .await?;
            let slots_stmt = client
                .prepare_cached(
                    "SELECT day, time_slot, registration_id IS NULL FROM booking_slots
                     WHERE place_id = $1 AND day BETWEEN $2 AND $3 ORDER BY day, time_slot",
                )
                .await?;
            // Both queries pipelined on one connection.
            let place_params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&place_id];
            let slot_params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
                [&place_id, &lo, &hi];
            let (place, slots) = tokio::try_join!(
                client.query_opt(&place_stmt, &place_params),
                client.query(&slots_stmt, &slot_params)
            )?;
            let Some(place) = place.as_ref().map(place_from_pg) else {
                return Ok(None);
            };
            let slots = slots
                .iter()
                .map(|r| SlotRow {
                    day: Day(r.get(0)),
                    time_slot: r.get(1),
                    free: r.get(2),
                })
                .collect();
            Ok(Some((place, slots)))
        }
    }
}

/// Takes the slot for `reg` if it is free and stores the registration.
///
/// SQLite (one process, one writer): the slot is decided by the availability
/// index's test-and-set inside the writer's transaction, and the registration
/// and its event are appended; no slot row is rewritten, so a registration
/// costs appended pages only. PostgreSQL (several nodes): one conditional
/// UPDATE of the slot row decides, and the registration is inserted in the
/// same statement.
pub async fn try_register(
    store: &Store,
    index: Option<Arc<arc_swap::ArcSwap<Availability>>>,
    reg: SealedRegistration,
) -> Result<RegisterOutcome, StoreError> {
    // Built here, not in the write command: the writer thread is the
    // bottleneck, so it only runs SQL.
    let event = NewEvent::json(
        model::stream_of(&reg.id),
        EVENT_CONFIRMED,
        &reg.event_payload(),
    );
    match store {
        Store::Sqlite(s) => {
            let handle = index.ok_or_else(|| {
                StoreError::Internal("the SQLite booking store needs its availability index".into())
            })?;
            // The index the command decided on, read when it ran (a reload
            // swaps the index inside a writer command of its own).
            let used: Arc<std::sync::OnceLock<Arc<Availability>>> = Arc::default();
            let took = Arc::new(AtomicBool::new(false));
            let person = person_of_reg(&reg);
            let (slot, used_in_writer, took_in_writer) = (
                (reg.place_id, reg.day, reg.time_slot),
                used.clone(),
                took.clone(),
            );
            // Unguarded (no SAVEPOINT): the slot is decided by the index bit
            // before any SQL runs, and the two appends that follow can only
            // fail when the database does, which rolls back the batch; every
            // registration in it then frees its bit below.
            let outcome = s
                .write_unguarded(move |c| {
                    let index = used_in_writer.get_or_init(|| handle.load_full());
                    sqlite_try_register(c, index, &took_in_writer, &reg, &event)
                })
                .await;
            if let (Err(_), true, Some(index)) =
                (&outcome, took.load(Ordering::Acquire), used.get())
            {
                // The batch did not commit: the slot (and the person) are
                // free again.
                index.set_taken(slot.0, slot.1, slot.2, false);
                if let Some(p) = person {
                    index.release_person(p);
                }
            }
            outcome
        }
        Store::Postgres(p) => p.write_grouped::<PgTryRegister>((reg, event)).await,
    }
}

/// PostgreSQL's try-register: the registrations of a writer's batch decided
/// together, in one statement (a slot is taken by one conditional UPDATE
/// per row, the registration inserted in the same statement), and the
/// answers of the ones that missed found by a second one. A registration
/// that asks for a slot or a person an earlier one of the batch asks for
/// runs after them, alone, with the same rules ([`pg_try_register_one`]).
pub struct PgTryRegister;

impl PgGroup for PgTryRegister {
    type Item = (SealedRegistration, NewEvent);
    type Out = RegisterOutcome;

    fn run<'a>(tx: &'a PgTx<'a>, items: Vec<&'a Self::Item>) -> PgFuture<'a, Vec<RegisterOutcome>> {
        Box::pin(async move {
            // The first claim to each slot and each person runs in the
            // group; a later one in the batch waits for the first's answer
            // (`after`: index of the item, index of the first claim).
            let slot_of = |i: usize| (items[i].0.place_id, items[i].0.day.0, items[i].0.time_slot);
            let mut slots = std::collections::HashMap::with_capacity(items.len());
            let mut persons = std::collections::HashMap::with_capacity(items.len());
            let (mut together, mut after) = (Vec::new(), Vec::new());
            for (i, (reg, _)) in items.iter().enumerate() {
                let slot_first = *slots.entry(slot_of(i)).or_insert(i);
                let person_first = match reg.person_key.as_ref() {
                    Some(k) => *persons.entry(k.as_slice()).or_insert(i),
                    None => i,
                };
                if slot_first == i && person_first == i {
                    together.push(i);
                } else {
                    after.push((i, slot_first, person_first));
                }
            }
            // Slot rows are locked in one order by every batch of every
            // node, so two groups never wait on each other in a cycle.
            together.sort_by_key(|&i| slot_of(i));
            let mut out = vec![RegisterOutcome::SlotTaken; items.len()];
            let regs: Vec<&SealedRegistration> = together.iter().map(|&i| &items[i].0).collect();
            let took = pg_take_slots(tx, &regs).await?;
            let mut missed = Vec::new();
            for (&i, took) in together.iter().zip(took) {
                let (reg, event) = items[i];
                match took {
                    Took::Registered => {
                        tx.append(event.clone());
                        out[i] = RegisterOutcome::Registered;
                    }
                    // Another node registered the person meanwhile: the
                    // slot goes back, and the answer says why.
                    Took::PersonRaced => out[i] = pg_why_missed(tx, reg).await?,
                    Took::Missed => missed.push(i),
                }
            }
            let regs: Vec<&SealedRegistration> = missed.iter().map(|&i| &items[i].0).collect();
            for (&i, outcome) in missed.iter().zip(pg_why_missed_all(tx, &regs).await?) {
                out[i] = outcome;
            }
            // A later claim whose first claim decided the same thing for it
            // gets that answer without touching a row (no row lock held by
            // this batch out of order); the rest run alone, in slot order.
            after.sort_by_key(|&(i, _, _)| slot_of(i));
            for (i, slot_first, person_first) in after {
                let known = if slot_first != i {
                    match out[slot_first] {
                        // The batch's own registration holds the slot, or it
                        // is gone or unknown for every claim alike.
                        RegisterOutcome::Registered
                        | RegisterOutcome::SlotTaken
                        | RegisterOutcome::PlaceNotFound
                        | RegisterOutcome::SlotNotFound => Some(out[slot_first]),
                        _ => None,
                    }
                    .map(|o| match o {
                        RegisterOutcome::Registered => RegisterOutcome::SlotTaken,
                        o => o,
                    })
                } else if person_first != i && out[person_first] == RegisterOutcome::Registered {
                    Some(RegisterOutcome::AlreadyRegistered)
                } else {
                    None
                };
                out[i] = match known {
                    Some(o) => o,
                    None => {
                        let (reg, event) = items[i];
                        pg_try_register_one(tx, reg, event).await?
                    }
                };
            }
            Ok(out)
        })
    }
}

/// What [`pg_take_slots`] did for one registration.
enum Took {
    Registered,
    /// The slot was free but the person's key was inserted by another
    /// transaction first (the slot is still held: hand it back).
    PersonRaced,
    Missed,
}

/// Takes the slots of `regs` (no two of them the same slot or person) and
/// inserts the registrations that got theirs, in one statement.
async fn pg_take_slots(
    tx: &PgTx<'_>,
    regs: &[&SealedRegistration],
) -> Result<Vec<Took>, StoreError> {
    if regs.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<&str> = regs.iter().map(|r| r.id.as_str()).collect();
    let places: Vec<i64> = regs.iter().map(|r| r.place_id).collect();
    let days: Vec<i32> = regs.iter().map(|r| r.day.0).collect();
    let slots: Vec<i32> = regs.iter().map(|r| r.time_slot).collect();
    let hashes: Vec<&[u8]> = regs.iter().map(|r| r.access_hash.as_slice()).collect();
    let sealed: Vec<&[u8]> = regs.iter().map(|r| r.person_sealed.as_slice()).collect();
    let created: Vec<i64> = regs.iter().map(|r| r.created_at_ms).collect();
    let keys: Vec<Option<&[u8]>> = regs.iter().map(|r| r.person_key.as_deref()).collect();
    // A person who holds a registration takes no slot; two nodes
    // registering one person at once both pass that check, and the unique
    // constraint makes the later insert do nothing (after waiting for the
    // first to commit): PersonRaced.
    let stmt = tx
        .tx
        .prepare_cached(
            "WITH r AS (
                SELECT * FROM unnest($1::TEXT[], $2::BIGINT[], $3::INT[], $4::INT[],
                                     $5::BYTEA[], $6::BYTEA[], $7::BIGINT[], $8::BYTEA[])
                  AS r(id, place_id, day, time_slot, access_hash, person_sealed,
                       created_at_ms, person_key)),
             taken AS (
                UPDATE booking_slots s SET registration_id = r.id
                  FROM r
                 WHERE s.place_id = r.place_id AND s.day = r.day AND s.time_slot = r.time_slot
                   AND s.registration_id IS NULL
                   AND (r.person_key IS NULL OR NOT EXISTS (
                        SELECT 1 FROM booking_registrations b WHERE b.person_key = r.person_key))
                RETURNING r.id),
             inserted AS (
                INSERT INTO booking_registrations
                    (id, access_hash, place_id, day, time_slot, person_sealed, created_at_ms, person_key)
                SELECT r.id, r.access_hash, r.place_id, r.day, r.time_slot, r.person_sealed,
                       r.created_at_ms, r.person_key
                  FROM r JOIN taken ON taken.id = r.id
                ON CONFLICT (person_key) DO NOTHING
                RETURNING id)
             SELECT taken.id, inserted.id IS NOT NULL
               FROM taken LEFT JOIN inserted ON inserted.id = taken.id",
        )
        .await?;
    let rows = tx
        .tx
        .query(
            &stmt,
            &[
                &ids, &places, &days, &slots, &hashes, &sealed, &created, &keys,
            ],
        )
        .await?;
    let mut took: std::collections::HashMap<&str, bool> = std::collections::HashMap::new();
    for row in &rows {
        took.insert(row.get(0), row.get(1));
    }
    Ok(regs
        .iter()
        .map(|r| match took.get(r.id.as_str()) {
            Some(true) => Took::Registered,
            Some(false) => Took::PersonRaced,
            None => Took::Missed,
        })
        .collect())
}

/// Why each of `regs` (none of which took its slot) missed, in one statement.
async fn pg_why_missed_all(
    tx: &PgTx<'_>,
    regs: &[&SealedRegistration],
) -> Result<Vec<RegisterOutcome>, StoreError> {
    if regs.is_empty() {
        return Ok(Vec::new());
    }
    let ords: Vec<i32> = (0..regs.len() as i32).collect();
    let places: Vec<i64> = regs.iter().map(|r| r.place_id).collect();
    let days: Vec<i32> = regs.iter().map(|r| r.day.0).collect();
    let slots: Vec<i32> = regs.iter().map(|r| r.time_slot).collect();
    let keys: Vec<Option<&[u8]>> = regs.iter().map(|r| r.person_key.as_deref()).collect();
    let stmt = tx
        .tx
        .prepare_cached(
            "SELECT r.ord,
                    EXISTS (SELECT 1 FROM booking_places p WHERE p.id = r.place_id),
                    EXISTS (SELECT 1 FROM booking_slots s
                             WHERE s.place_id = r.place_id AND s.day = r.day
                               AND s.time_slot = r.time_slot),
                    r.person_key IS NOT NULL AND EXISTS (
                        SELECT 1 FROM booking_registrations b WHERE b.person_key = r.person_key)
               FROM unnest($1::INT[], $2::BIGINT[], $3::INT[], $4::INT[], $5::BYTEA[])
                 AS r(ord, place_id, day, time_slot, person_key)",
        )
        .await?;
    let rows = tx
        .tx
        .query(&stmt, &[&ords, &places, &days, &slots, &keys])
        .await?;
    let mut out = vec![RegisterOutcome::SlotTaken; regs.len()];
    for row in rows {
        let ord: i32 = row.get(0);
        let (place, slot, person_holds_one): (bool, bool, bool) =
            (row.get(1), row.get(2), row.get(3));
        out[ord as usize] = if person_holds_one && place && slot {
            RegisterOutcome::AlreadyRegistered
        } else {
            miss_outcome(place as i64, slot as i64)
        };
    }
    Ok(out)
}

/// One registration alone: the slot, the registration and (when it missed)
/// why, in at most two statements.
async fn pg_try_register_one(
    tx: &PgTx<'_>,
    reg: &SealedRegistration,
    event: &NewEvent,
) -> Result<RegisterOutcome, StoreError> {
    match pg_take_slots(tx, &[reg]).await?.pop() {
        Some(Took::Registered) => {
            tx.append(event.clone());
            Ok(RegisterOutcome::Registered)
        }
        _ => pg_why_missed(tx, reg).await,
    }
}

/// Why `reg` missed its slot; hands the slot back if it holds it (a person
/// raced by another node).
async fn pg_why_missed(
    tx: &PgTx<'_>,
    reg: &SealedRegistration,
) -> Result<RegisterOutcome, StoreError> {
    let why = tx
        .tx
        .prepare_cached(
            "WITH handed_back AS (
                UPDATE booking_slots SET registration_id = NULL
                WHERE place_id = $1 AND day = $2 AND time_slot = $3
                  AND registration_id = $5
                RETURNING 1)
             SELECT (SELECT COUNT(*) FROM booking_places WHERE id = $1),
                    (SELECT COUNT(*) FROM booking_slots
                     WHERE place_id = $1 AND day = $2 AND time_slot = $3),
                    $4::bytea IS NOT NULL AND EXISTS (
                        SELECT 1 FROM booking_registrations WHERE person_key = $4),
                    (SELECT COUNT(*) FROM handed_back)",
        )
        .await?;
    let row = tx
        .tx
        .query_opt(
            &why,
            &[
                &reg.place_id,
                &reg.day.0,
                &reg.time_slot,
                &reg.person_key,
                &reg.id,
            ],
        )
        .await?;
    let (places, slots, person_holds_one): (i64, i64, bool) = row
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .unwrap_or((0, 0, false));
    if person_holds_one && places > 0 && slots > 0 {
        return Ok(RegisterOutcome::AlreadyRegistered);
    }
    Ok(miss_outcome(places, slots))
}

fn miss_outcome(places: i64, slots: i64) -> RegisterOutcome {
    match (places, slots) {
        (0, _) => RegisterOutcome::PlaceNotFound,
        (_, 0) => RegisterOutcome::SlotNotFound,
        _ => RegisterOutcome::SlotTaken,
    }
}

fn sqlite_try_register(
    c: &Connection,
    index: &Availability,
    took: &AtomicBool,
    reg: &SealedRegistration,
    event: &NewEvent,
) -> Result<RegisterOutcome, StoreError> {
    match index.take(reg.place_id, reg.day, reg.time_slot) {
        SlotState::Free => took.store(true, Ordering::Release),
        SlotState::Taken => return Ok(RegisterOutcome::SlotTaken),
        SlotState::UnknownPlace => return Ok(RegisterOutcome::PlaceNotFound),
        SlotState::UnknownSlot => return Ok(RegisterOutcome::SlotNotFound),
    }
    // One writer: the person is decided in its memory too (see
    // `availability.rs`), before any SQL runs.
    let person = person_of_reg(reg);
    if let Some(p) = person {
        if !index.take_person(p) {
            index.set_taken(reg.place_id, reg.day, reg.time_slot, false);
            took.store(false, Ordering::Release);
            return Ok(RegisterOutcome::AlreadyRegistered);
        }
    }
    let appended = (|| -> Result<(), StoreError> {
        c.prepare_cached(
            "INSERT INTO booking_registrations
                (id, access_hash, place_id, day, time_slot, person_sealed, created_at_ms, person_key)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?
        .execute(params![
            reg.id,
            reg.access_hash,
            reg.place_id,
            reg.day.0,
            reg.time_slot,
            reg.person_sealed,
            reg.created_at_ms,
            reg.person_key
        ])?;
        eventlog::sqlite_append(c, event)?;
        Ok(())
    })();
    if let Err(e) = appended {
        index.set_taken(reg.place_id, reg.day, reg.time_slot, false);
        if let Some(p) = person {
            index.release_person(p);
        }
        took.store(false, Ordering::Release);
        return Err(e);
    }
    Ok(RegisterOutcome::Registered)
}

fn registration_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SealedRegistration> {
    Ok(SealedRegistration {
        id: r.get(0)?,
        access_hash: r.get(1)?,
        place_id: r.get(2)?,
        day: Day(r.get(3)?),
        time_slot: r.get(4)?,
        person_sealed: r.get(5)?,
        created_at_ms: r.get(6)?,
        person_key: r.get(7)?,
    })
}

fn registration_from_pg(r: &tokio_postgres::Row) -> SealedRegistration {
    SealedRegistration {
        id: r.get(0),
        access_hash: r.get(1),
        place_id: r.get(2),
        day: Day(r.get(3)),
        time_slot: r.get(4),
        person_sealed: r.get(5),
        created_at_ms: r.get(6),
        person_key: None,
    }
}

const SELECT_REGISTRATION_SQLITE: &str =
    "SELECT id, access_hash, place_id, day, time_slot, person_sealed, created_at_ms, person_key
     FROM booking_registrations WHERE id = ?1";

/// A registration's person key in the availability index, if it has one.
fn person_of_reg(reg: &SealedRegistration) -> Option<u64> {
    reg.person_key
        .as_deref()
        .filter(|k| k.len() >= 8)
        .map(super::availability::person_of)
}
const SELECT_REGISTRATION_PG: &str =
    "SELECT id, access_hash, place_id, day, time_slot, person_sealed, created_at_ms
     FROM booking_registrations WHERE id = $1";

pub async fn registration(
    store: &Store,
    id: &str,
) -> Result<Option<SealedRegistration>, StoreError> {
    let id = id.to_string();
    match store {
        Store::Sqlite(s) => {
            s.read(move |c| {
                Ok(c.prepare_cached(SELECT_REGISTRATION_SQLITE)?
                    .query_row([&id], registration_from_row)
                    .optional()?)
            })
            .await
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            let stmt = client.prepare_cached(SELECT_REGISTRATION_PG).await?;
            Ok(client
                .query_opt(&stmt, &[&id])
                .await?
                .as_ref()
                .map(registration_from_pg))
        }
    }
}

/// Deletes a registration and frees its slot, if the access code matches;
/// the check and the delete are one write, so a code cannot race a cancel.
pub async fn cancel(
    store: &Store,
    id: &str,
    access_code: &str,
) -> Result<CancelOutcome, StoreError> {
    let (id, code) = (id.to_string(), access_code.to_string());
    match store {
        Store::Sqlite(s) => {
            s.write(move |c| {
                let Some(reg) = c
                    .prepare_cached(SELECT_REGISTRATION_SQLITE)?
                    .query_row([&id], registration_from_row)
                    .optional()?
                else {
                    return Ok(CancelOutcome::NotFound);
                };
                if !crate::platform::crypto::code_matches(&code, &reg.access_hash) {
                    return Ok(CancelOutcome::NotFound);
                }
                // The slot's bit is cleared by the caller once this commits.
                c.prepare_cached("DELETE FROM booking_registrations WHERE id = ?1")?.execute([&id])?;
                eventlog::sqlite_append(c, &cancelled_event(&reg))?;
                Ok(CancelOutcome::Cancelled { place_id: reg.place_id, day: reg.day, time_slot: reg.time_slot, person: person_of_reg(&reg) })
            })
            .await
        }
        Store::Postgres(p) => {
            p.write(move |tx| {
                let (id, code) = (id.clone(), code.clone());
                Box::pin(async move {
                    let Some(reg) = tx
                        .tx
                        .query_opt(
                            "SELECT id, access_hash, place_id, day, time_slot, person_sealed, created_at_ms
                             FROM booking_registrations WHERE id = $1 FOR UPDATE",
                            &[&id],
                        )
                        .await?
                        .as_ref()
                        .map(registration_from_pg)
                    else {
                        return Ok(CancelOutcome::NotFound);
                    };
                    if !crate::platform::crypto::code_matches(&code, &reg.access_hash) {
                        return Ok(CancelOutcome::NotFound);
                    }
                    let deleted = tx
                        .tx
                        .execute("DELETE FROM booking_registrations WHERE id = $1", &[&id])
                        .await?;
                    if deleted == 0 {
                        return Ok(CancelOutcome::NotFound);
                    }
                    tx.tx
                        .execute(
                            "UPDATE booking_slots SET registration_id = NULL
                             WHERE place_id = $1 AND day = $2 AND time_slot = $3 AND registration_id = $4",
                            &[&reg.place_id, &reg.day.0, &reg.time_slot, &id],
                        )
                        .await?;
                    tx.append(cancelled_event(&reg));
                    Ok(CancelOutcome::Cancelled { place_id: reg.place_id, day: reg.day, time_slot: reg.time_slot, person: person_of_reg(&reg) })
                })
            })
            .await
        }
    }
}

/// What a move's writer command changed in the index, so the caller can
/// undo it if the batch does not commit, or finish it if it does.
#[derive(Default)]
struct MoveMarks {
    /// The new slot's bit, set by this command.
    took: Option<model::SlotRef>,
    /// A person key taken for the new day (`--booking-one-registration
    /// person-day`).
    took_person: Option<u64>,
    /// The old person key, released once the move commits.
    release_person: Option<u64>,
}

/// Moves registration `id` to `to` if `access_code` matches: in one
/// transaction the new slot is taken by the same conditional write as a
/// registration (one winner per slot), the old slot freed, the
/// registration updated and `RegistrationMoved` appended. A move that
/// misses its slot changes nothing.
pub async fn move_registration(
    store: &Store,
    index: Option<Arc<arc_swap::ArcSwap<Availability>>>,
    id: &str,
    access_code: &str,
    to: model::SlotRef,
    to_person_key: Option<Vec<u8>>,
) -> Result<model::MoveOutcome, StoreError> {
    use model::MoveOutcome;
    let (id, code) = (id.to_string(), access_code.to_string());
    match store {
        Store::Sqlite(s) => {
            let handle = index.ok_or_else(|| {
                StoreError::Internal("the SQLite booking store needs its availability index".into())
            })?;
            let used: Arc<std::sync::OnceLock<Arc<Availability>>> = Arc::default();
            let marks: Arc<std::sync::Mutex<MoveMarks>> = Arc::default();
            let (used_w, marks_w) = (used.clone(), marks.clone());
            let outcome = s
                .write(move |c| {
                    let index = used_w.get_or_init(|| handle.load_full());
                    let mut marks = marks_w.lock().unwrap_or_else(|e| e.into_inner());
                    sqlite_move(c, index, &mut marks, &id, &code, to, to_person_key)
                })
                .await;
            let marks = std::mem::take(&mut *marks.lock().unwrap_or_else(|e| e.into_inner()));
            if let Some(index) = used.get() {
                match &outcome {
                    Ok(MoveOutcome::Moved { from }) => {
                        index.set_taken(from.place_id, from.day, from.time_slot, false);
                        if let Some(p) = marks.release_person {
                            index.release_person(p);
                        }
                    }
                    Err(_) => {
                        // The command or its batch did not commit: what it
                        // took is free again.
                        if let Some(t) = marks.took {
                            index.set_taken(t.place_id, t.day, t.time_slot, false);
                        }
                        if let Some(p) = marks.took_person {
                            index.release_person(p);
                        }
                    }
                    Ok(_) => {}
                }
            }
            outcome
        }
        Store::Postgres(p) => {
            p.write(move |tx| {
                let (id, code, key) = (id.clone(), code.clone(), to_person_key.clone());
                Box::pin(async move { pg_move(tx, &id, &code, to, key).await })
            })
            .await
        }
    }
}

fn moved_event(reg: &SealedRegistration, to: model::SlotRef) -> NewEvent {
    NewEvent::json(
        model::stream_of(&reg.id),
        model::EVENT_MOVED,
        &model::MovedEvent {
            registration_id: reg.id.clone(),
            place_id: to.place_id,
            day: to.day.to_text(),
            time_slot: to.time_slot,
            from_place_id: reg.place_id,
            from_day: reg.day.to_text(),
            from_time_slot: reg.time_slot,
        },
    )
}

fn sqlite_move(
    c: &Connection,
    index: &Availability,
    marks: &mut MoveMarks,
    id: &str,
    code: &str,
    to: model::SlotRef,
    to_person_key: Option<Vec<u8>>,
) -> Result<model::MoveOutcome, StoreError> {
    use model::MoveOutcome;
    let Some(reg) = c
        .prepare_cached(SELECT_REGISTRATION_SQLITE)?
        .query_row([id], registration_from_row)
        .optional()?
    else {
        return Ok(MoveOutcome::NotFound);
    };
    if !crate::platform::crypto::code_matches(code, &reg.access_hash) {
        return Ok(MoveOutcome::NotFound);
    }
    let from = model::SlotRef {
        place_id: reg.place_id,
        day: reg.day,
        time_slot: reg.time_slot,
    };
    if from == to {
        return Ok(MoveOutcome::Unchanged);
    }
    // The same test-and-set that decides a registration's slot.
    match index.take(to.place_id, to.day, to.time_slot) {
        SlotState::Free => marks.took = Some(to),
        SlotState::Taken => return Ok(MoveOutcome::SlotTaken),
        SlotState::UnknownPlace => return Ok(MoveOutcome::PlaceNotFound),
        SlotState::UnknownSlot => return Ok(MoveOutcome::SlotNotFound),
    }
    let old_person = person_of_reg(&reg);
    let new_person = to_person_key
        .as_deref()
        .filter(|k| k.len() >= 8)
        .map(super::availability::person_of);
    if new_person != old_person {
        if let Some(p) = new_person {
            if !index.take_person(p) {
                index.set_taken(to.place_id, to.day, to.time_slot, false);
                marks.took = None;
                return Ok(MoveOutcome::AlreadyRegistered);
            }
            marks.took_person = Some(p);
        }
        marks.release_person = old_person;
    }
    c.prepare_cached(
        "UPDATE booking_registrations SET place_id = ?2, day = ?3, time_slot = ?4, person_key = ?5
         WHERE id = ?1",
    )?
    .execute(params![
        reg.id,
        to.place_id,
        to.day.0,
        to.time_slot,
        to_person_key
    ])?;
    eventlog::sqlite_append(c, &moved_event(&reg, to))?;
    Ok(MoveOutcome::Moved { from })
}

async fn pg_move(
    tx: &PgTx<'_>,
    id: &str,
    code: &str,
    to: model::SlotRef,
    to_person_key: Option<Vec<u8>>,
) -> Result<model::MoveOutcome, StoreError> {
    use model::MoveOutcome;
    // The row lock serialises moves and cancels of one registration.
    let Some(reg) = tx
        .tx
        .query_opt(
            "SELECT id, access_hash, place_id, day, time_slot, person_sealed, created_at_ms
             FROM booking_registrations WHERE id = $1 FOR UPDATE",
            &[&id],
        )
        .await?
        .as_ref()
        .map(registration_from_pg)
    else {
        return Ok(MoveOutcome::NotFound);
    };
    if !crate::platform::crypto::code_matches(code, &reg.access_hash) {
        return Ok(MoveOutcome::NotFound);
    }
    let from = model::SlotRef {
        place_id: reg.place_id,
        day: reg.day,
        time_slot: reg.time_slot,
    };
    if from == to {
        return Ok(MoveOutcome::Unchanged);
    }
    // Another registration of the person under the new day's key (the
    // unique index on person_key still decides a race between nodes).
    if let Some(key) = &to_person_key {
        let held: bool = tx
            .tx
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM booking_registrations
                                 WHERE person_key = $1 AND id <> $2)",
                &[key, &id],
            )
            .await?
            .get(0);
        if held {
            return Ok(MoveOutcome::AlreadyRegistered);
        }
    }
    // The conditional write that decides the slot, as for a registration.
    let took = tx
        .tx
        .execute(
            "UPDATE booking_slots SET registration_id = $4
             WHERE place_id = $1 AND day = $2 AND time_slot = $3 AND registration_id IS NULL",
            &[&to.place_id, &to.day.0, &to.time_slot, &id],
        )
        .await?;
    if took == 0 {
        let row = tx
            .tx
            .query_one(
                "SELECT (SELECT COUNT(*) FROM booking_places WHERE id = $1),
                        (SELECT COUNT(*) FROM booking_slots
                          WHERE place_id = $1 AND day = $2 AND time_slot = $3)",
                &[&to.place_id, &to.day.0, &to.time_slot],
            )
            .await?;
        return Ok(match miss_outcome(row.get(0), row.get(1)) {
            RegisterOutcome::PlaceNotFound => MoveOutcome::PlaceNotFound,
            RegisterOutcome::SlotNotFound => MoveOutcome::SlotNotFound,
            _ => MoveOutcome::SlotTaken,
        });
    }
    tx.tx
        .execute(
            "UPDATE booking_slots SET registration_id = NULL
             WHERE place_id = $1 AND day = $2 AND time_slot = $3 AND registration_id = $4",
            &[&from.place_id, &from.day.0, &from.time_slot, &id],
        )
        .await?;
    tx.tx
        .execute(
            "UPDATE booking_registrations SET place_id = $2, day = $3, time_slot = $4, person_key = $5
             WHERE id = $1",
            &[&id, &to.place_id, &to.day.0, &to.time_slot, &to_person_key],
        )
        .await?;
    tx.append(moved_event(&reg, to));
    Ok(MoveOutcome::Moved { from })
}

fn cancelled_event(reg: &SealedRegistration) -> NewEvent {
    NewEvent::json(
        model::stream_of(&reg.id),
        EVENT_CANCELLED,
        &reg.event_payload(),
    )
}

pub async fn stats(store: &Store, notifier_consumer: &str) -> Result<BookingStats, StoreError> {
    let notifier_position = store.consumer_position(notifier_consumer).await?;
    const SQL: &str = "SELECT (SELECT COUNT(*) FROM booking_places),
                              (SELECT COUNT(*) FROM booking_slots),
                              (SELECT COUNT(*) FROM booking_registrations),
                              (SELECT COALESCE(MAX(position), 0) FROM events)";
    let (places, slots, registrations, last_event_position) = match store {
        Store::Sqlite(s) => {
            s.read(|c| {
                Ok(c.query_row(SQL, [], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })?)
            })
            .await?
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            let r = client.query_one(SQL, &[]).await?;
            (r.get(0), r.get(1), r.get(2), r.get(3))
        }
    };
    Ok(BookingStats {
        places,
        slots,
        registrations,
        last_event_position,
        notifier_position,
    })
}

/// A confirmation the notifier gave up on.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ParkedNotification {
    pub position: i64,
    pub registration_id: String,
    pub reason: String,
    pub attempts: i64,
    pub parked_at_ms: i64,
}

/// Keeps a confirmation the notifier gave up on (once per event position).
pub async fn park_notification(store: &Store, p: ParkedNotification) -> Result<(), StoreError> {
    match store {
        Store::Sqlite(s) => {
            s.write(move |c| {
                c.prepare_cached(
                    "INSERT OR IGNORE INTO booking_notifications_parked
                        (position, registration_id, reason, attempts, parked_at_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )?
                .execute(params![
                    p.position,
                    p.registration_id,
                    p.reason,
                    p.attempts,
                    p.parked_at_ms
                ])?;
                Ok(())
            })
            .await
        }
        Store::Postgres(pg) => {
            pg.write(move |tx| {
                let p = p.clone();
                Box::pin(async move {
                    tx.tx
                        .execute(
                            "INSERT INTO booking_notifications_parked
                                (position, registration_id, reason, attempts, parked_at_ms)
                             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (position) DO NOTHING",
                            &[
                                &p.position,
                                &p.registration_id,
                                &p.reason,
                                &(p.attempts as i32),
                                &p.parked_at_ms,
                            ],
                        )
                        .await?;
                    Ok(())
                })
            })
            .await
        }
    }
}

/// The oldest `limit` parked confirmations and how many there are, read in
/// one statement (one snapshot): a count and a list read apart could
/// disagree while the notifier parks one between them.
pub async fn parked_notifications(
    store: &Store,
    limit: i64,
) -> Result<(Vec<ParkedNotification>, i64), StoreError> {
    const LIST: &str = "SELECT position, registration_id, reason, attempts, parked_at_ms,
                               (SELECT COUNT(*) FROM booking_notifications_parked)
                        FROM booking_notifications_parked ORDER BY position LIMIT ";
    match store {
        Store::Sqlite(s) => {
            s.read(move |c| {
                let mut total = 0;
                let list = c
                    .prepare(&format!("{LIST}?1"))?
                    .query_map([limit], |r| {
                        Ok((
                            ParkedNotification {
                                position: r.get(0)?,
                                registration_id: r.get(1)?,
                                reason: r.get(2)?,
                                attempts: r.get(3)?,
                                parked_at_ms: r.get(4)?,
                            },
                            r.get::<_, i64>(5)?,
                        ))
                    })?
                    .map(|row| {
                        row.map(|(p, n)| {
                            total = n;
                            p
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((list, total))
            })
            .await
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            let rows = client.query(&format!("{LIST}$1"), &[&limit]).await?;
            let total: i64 = rows.first().map(|r| r.get(5)).unwrap_or(0);
            let list = rows
                .iter()
                .map(|r| ParkedNotification {
                    position: r.get(0),
                    registration_id: r.get(1),
                    reason: r.get(2),
                    attempts: i64::from(r.get::<_, i32>(3)),
                    parked_at_ms: r.get(4),
                })
                .collect();
            Ok((list, total))
        }
    }
}
