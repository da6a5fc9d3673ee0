//! Booking on a shared PostgreSQL: other nodes write too, so slots are read
//! from the table and decided by their rows. A registration takes its slot
//! with one conditional `UPDATE .. WHERE registration_id IS NULL` and is
//! inserted in the same statement, with the other registrations of the
//! writer's batch ([`PgTryRegister`]); the unique constraint on
//! `person_key` holds the one-registration rule across nodes. Reads and
//! writes of one registration by a move or a cancel lock its row
//! (`FOR UPDATE`), which serialises them.

use std::sync::{Arc, LazyLock};

use futures::future::BoxFuture;
use indicatif::ProgressBar;

use super::super::availability::Availability;
use super::super::bench::baseline::NAIVE_PG_CONNECTIONS;
use super::super::model::{Day, MoveOutcome, Place, RegisterOutcome, SealedRegistration, SlotRef};
use super::super::seed::{place_name, refuse_reseed, SeedBookingArgs, PLACES_PER_CHUNK};
use super::{
    cancelled, cancelled_event, confirmed_event, counts_row, moved_event, parked_row, place_row,
    registration_row, sql, AvailabilityHandle, BookingCounts, BookingStore, CancelOutcome,
    ParkedNotification, PlaceSlots, SlotRow,
};
use crate::store::postgres::{PgFuture, PgGroup, PgStore, PgTx};
use crate::store::{pg_placeholders, NewEvent, StoreError};

static LIST_PLACES: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::LIST_PLACES));
static PLACE: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::PLACE));
static REGISTRATION: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::REGISTRATION));
/// A registration read by the write that changes it: the row lock
/// serialises moves and cancels of one registration.
static REGISTRATION_FOR_UPDATE: LazyLock<String> =
    LazyLock::new(|| format!("{} FOR UPDATE", pg_placeholders(sql::REGISTRATION)));
static DELETE_REGISTRATION: LazyLock<String> =
    LazyLock::new(|| pg_placeholders(sql::DELETE_REGISTRATION));
static MOVE_REGISTRATION: LazyLock<String> =
    LazyLock::new(|| pg_placeholders(sql::MOVE_REGISTRATION));
static TAKE_SLOT: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::TAKE_SLOT));
static PARK_NOTIFICATION: LazyLock<String> =
    LazyLock::new(|| pg_placeholders(sql::PARK_NOTIFICATION));
static PARKED_NOTIFICATIONS: LazyLock<String> =
    LazyLock::new(|| pg_placeholders(sql::PARKED_NOTIFICATIONS));

/// Slots have rows here: a place's slots over a range of days.
const SLOTS: &str = "SELECT day, time_slot, registration_id IS NULL FROM booking_slots
     WHERE place_id = $1 AND day BETWEEN $2 AND $3 ORDER BY day, time_slot";
/// Frees a slot held by registration $4.
const FREE_SLOT: &str = "UPDATE booking_slots SET registration_id = NULL
     WHERE place_id = $1 AND day = $2 AND time_slot = $3 AND registration_id = $4";

pub struct PgBooking {
    db: Arc<PgStore>,
    /// The naive design's own pool (opened on first use).
    naive: tokio::sync::OnceCell<deadpool_postgres::Pool>,
}

impl PgBooking {
    pub fn new(db: Arc<PgStore>) -> PgBooking {
        PgBooking {
            db,
            naive: Default::default(),
        }
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
                        tx.append_opening(event.clone());
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
            tx.append_opening(event.clone());
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

async fn pg_move(
    tx: &PgTx<'_>,
    id: &str,
    code: &str,
    to: SlotRef,
    to_person_key: Option<Vec<u8>>,
) -> Result<MoveOutcome, StoreError> {
    let Some(reg) = tx
        .tx
        .query_opt(REGISTRATION_FOR_UPDATE.as_str(), &[&id])
        .await?
        .as_ref()
        .map(registration_row)
        .transpose()?
    else {
        return Ok(MoveOutcome::NotFound);
    };
    if !crate::platform::crypto::code_matches(code, &reg.access_hash) {
        return Ok(MoveOutcome::NotFound);
    }
    let from = super::slot_of(&reg);
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
            TAKE_SLOT.as_str(),
            &[&id, &to.place_id, &to.day.0, &to.time_slot],
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
            FREE_SLOT,
            &[&from.place_id, &from.day.0, &from.time_slot, &id],
        )
        .await?;
    tx.tx
        .execute(
            MOVE_REGISTRATION.as_str(),
            &[&id, &to.place_id, &to.day.0, &to.time_slot, &to_person_key],
        )
        .await?;
    tx.append(moved_event(&reg, to));
    Ok(MoveOutcome::Moved { from })
}

impl BookingStore for PgBooking {
    fn list_places(
        &self,
        skip: i64,
        size: i64,
    ) -> BoxFuture<'_, Result<(Vec<Place>, i64), StoreError>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let rows = client.query(LIST_PLACES.as_str(), &[&size, &skip]).await?;
            let total: i64 = client.query_one(sql::COUNT_PLACES, &[]).await?.get(0);
            let places = rows.iter().map(place_row).collect::<Result<_, _>>()?;
            Ok((places, total))
        })
    }

    fn place(&self, id: i64) -> BoxFuture<'_, Result<Option<Place>, StoreError>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let stmt = client.prepare_cached(&PLACE).await?;
            client
                .query_opt(&stmt, &[&id])
                .await?
                .as_ref()
                .map(place_row)
                .transpose()
        })
    }

    fn place_slots(
        &self,
        place_id: i64,
        from: Day,
        days: i32,
    ) -> BoxFuture<'_, Result<Option<PlaceSlots>, StoreError>> {
        let (lo, hi) = (from.0, from.0 + days - 1);
        Box::pin(async move {
            let client = self.db.client().await?;
            let place_stmt = client.prepare_cached(&PLACE).await?;
            let slots_stmt = client.prepare_cached(SLOTS).await?;
            // Both queries pipelined on one connection.
            let place_params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&place_id];
            let slot_params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
                [&place_id, &lo, &hi];
            let (place, slots) = tokio::try_join!(
                client.query_opt(&place_stmt, &place_params),
                client.query(&slots_stmt, &slot_params)
            )?;
            let Some(place) = place.as_ref().map(place_row).transpose()? else {
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
        })
    }

    /// Nodes share the store: none keeps an index.
    fn load_availability(&self) -> BoxFuture<'_, Result<Option<Availability>, StoreError>> {
        Box::pin(async { Ok(None) })
    }

    fn reload_availability(
        &self,
        _handle: AvailabilityHandle,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async {
            Err(StoreError::Internal(
                "the availability index is for SQLite stores".into(),
            ))
        })
    }

    fn try_register(
        &self,
        _index: Option<AvailabilityHandle>,
        reg: SealedRegistration,
    ) -> BoxFuture<'_, Result<RegisterOutcome, StoreError>> {
        Box::pin(async move {
            let event = confirmed_event(&reg);
            self.db.write_grouped::<PgTryRegister>((reg, event)).await
        })
    }

    fn registration(
        &self,
        id: &str,
    ) -> BoxFuture<'_, Result<Option<SealedRegistration>, StoreError>> {
        let id = id.to_string();
        Box::pin(async move {
            let client = self.db.client().await?;
            let stmt = client.prepare_cached(&REGISTRATION).await?;
            client
                .query_opt(&stmt, &[&id])
                .await?
                .as_ref()
                .map(registration_row)
                .transpose()
        })
    }

    fn cancel(
        &self,
        id: &str,
        access_code: &str,
    ) -> BoxFuture<'_, Result<CancelOutcome, StoreError>> {
        let (id, code) = (id.to_string(), access_code.to_string());
        Box::pin(self.db.write(move |tx| {
            let (id, code) = (id.clone(), code.clone());
            Box::pin(async move {
                let Some(reg) = tx
                    .tx
                    .query_opt(REGISTRATION_FOR_UPDATE.as_str(), &[&id])
                    .await?
                    .as_ref()
                    .map(registration_row)
                    .transpose()?
                else {
                    return Ok(CancelOutcome::NotFound);
                };
                if !crate::platform::crypto::code_matches(&code, &reg.access_hash) {
                    return Ok(CancelOutcome::NotFound);
                }
                let deleted = tx.tx.execute(DELETE_REGISTRATION.as_str(), &[&id]).await?;
                if deleted == 0 {
                    return Ok(CancelOutcome::NotFound);
                }
                tx.tx
                    .execute(FREE_SLOT, &[&reg.place_id, &reg.day.0, &reg.time_slot, &id])
                    .await?;
                tx.append(cancelled_event(&reg));
                Ok(cancelled(&reg))
            })
        }))
    }

    fn move_registration(
        &self,
        _index: Option<AvailabilityHandle>,
        id: &str,
        access_code: &str,
        to: SlotRef,
        to_person_key: Option<Vec<u8>>,
    ) -> BoxFuture<'_, Result<MoveOutcome, StoreError>> {
        let (id, code) = (id.to_string(), access_code.to_string());
        Box::pin(self.db.write(move |tx| {
            let (id, code, key) = (id.clone(), code.clone(), to_person_key.clone());
            Box::pin(async move { pg_move(tx, &id, &code, to, key).await })
        }))
    }

    fn counts(&self) -> BoxFuture<'_, Result<BookingCounts, StoreError>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            counts_row(&client.query_one(sql::COUNTS, &[]).await?)
        })
    }

    fn park_notification(&self, p: ParkedNotification) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.db.write(move |tx| {
            let p = p.clone();
            Box::pin(async move {
                tx.tx
                    .execute(
                        PARK_NOTIFICATION.as_str(),
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
        }))
    }

    fn parked_notifications(
        &self,
        limit: i64,
    ) -> BoxFuture<'_, Result<(Vec<ParkedNotification>, i64), StoreError>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let rows = client
                .query(PARKED_NOTIFICATIONS.as_str(), &[&limit])
                .await?;
            let (mut list, mut total) = (Vec::with_capacity(rows.len()), 0);
            for r in &rows {
                let (parked, count) = parked_row(r)?;
                list.push(parked);
                total = count;
            }
            Ok((list, total))
        })
    }

    fn seed_slots<'a>(
        &'a self,
        args: &'a SeedBookingArgs,
        from: Day,
        bar: &'a ProgressBar,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(seed_pg(&self.db, args, from, bar))
    }

    fn naive_take_slot<'a>(
        &'a self,
        id: &'a str,
        slot: SlotRef,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            let pool = self
                .naive
                .get_or_try_init(|| async { self.db.pool_of(NAIVE_PG_CONNECTIONS) })
                .await
                .map_err(|e| StoreError::Unavailable(e.to_string()))?;
            let client = pool.get().await.map_err(StoreError::from)?;
            let stmt = client
                .prepare_cached(&TAKE_SLOT)
                .await
                .map_err(StoreError::from)?;
            client
                .execute(&stmt, &[&id, &slot.place_id, &slot.day.0, &slot.time_slot])
                .await
                .map_err(StoreError::from)
        })
    }
}

/// The bulk load: each chunk of places in one transaction, its places in
/// one multi-row `INSERT` and its slots in one `INSERT .. SELECT` over
/// `generate_series`.
async fn seed_pg(
    store: &PgStore,
    args: &SeedBookingArgs,
    from: Day,
    bar: &ProgressBar,
) -> anyhow::Result<()> {
    let mut client = store.client().await?;
    let existing: i64 = client.query_one(sql::COUNT_PLACES, &[]).await?.get(0);
    refuse_reseed(existing, args.force)?;
    if existing > 0 {
        client.batch_execute(sql::DELETE_BOOKING_DATA).await?;
    }
    let mut place = 1;
    while place <= args.places {
        let last = (place + PLACES_PER_CHUNK - 1).min(args.places);
        let tx = client.transaction().await?;
        let mut values = String::from(
            "INSERT INTO booking_places (id, name, address, first_slot_minute, slot_minutes) VALUES ",
        );
        for p in place..=last {
            let (name, address) = place_name(p);
            if p > place {
                values.push(',');
            }
            // Generated names hold no quotes; escape anyway.
            values.push_str(&format!(
                "({p}, '{}', '{}', {}, {})",
                name.replace('\'', "''"),
                address.replace('\'', "''"),
                args.first_slot_minute,
                args.slot_minutes
            ));
        }
        tx.batch_execute(&values).await?;
        let (d_lo, d_hi, s_hi) = (from.0, from.0 + args.days - 1, args.slots_per_day - 1);
        tx.execute(
            "INSERT INTO booking_slots (place_id, day, time_slot)
             SELECT p, d, s FROM generate_series($1::BIGINT, $2::BIGINT) AS p,
                                 generate_series($3::INT, $4::INT) AS d,
                                 generate_series(0, $5::INT) AS s",
            &[&place, &last, &d_lo, &d_hi, &s_hi],
        )
        .await?;
        tx.commit().await?;
        bar.inc(((last - place + 1) * (args.days * args.slots_per_day) as i64) as u64);
        place = last + 1;
    }
    client
        .batch_execute("ANALYZE booking_slots; ANALYZE booking_places;")
        .await?;
    Ok(())
}
