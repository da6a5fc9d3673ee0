//! Slots decided by their rows, where writers are shared (PostgreSQL:
//! other nodes write too), so slots are read from the table and a seat is
//! decided by one conditional `UPDATE .. SET seats_left = seats_left - 1
//! WHERE seats_left > 0`. The
//! registrations of a writer's batch take their slots and are inserted in
//! one statement ([`TryRegisterRows`]); the unique constraint on
//! `person_key` holds the one-registration rule across nodes. Reads and
//! writes of one registration by a move or a cancel lock its row (`FOR
//! UPDATE`), which serialises them.
//!
//! The set-based statements take arrays (`unnest`), which only PostgreSQL
//! has: only stores whose writers are shared run them.

use std::collections::HashMap;

use super::super::model::{MoveOutcome, RegisterOutcome, SealedRegistration, SlotRef};
use super::registrations::{self, Change};
use super::{miss_outcome, slot_of, CancelOutcome};
use crate::store::{Columns, Group, NewEvent, Sql, Store, StoreError, StoreFuture, Tx};

/// The conditional write that takes a seat of a slot, if one is left.
pub static TAKE_SLOT: Sql = Sql::new(
    "UPDATE booking_slots SET seats_left = seats_left - 1
         WHERE place_id = ?1 AND day = ?2 AND time_slot = ?3 AND seats_left > 0",
);
/// Gives a seat of a slot back (its registration was deleted or moved in
/// the same transaction).
static FREE_SLOT: Sql = Sql::new(
    "UPDATE booking_slots SET seats_left = seats_left + 1
     WHERE place_id = ?1 AND day = ?2 AND time_slot = ?3",
);
/// Takes the slots of a group of registrations (no two of them the same
/// slot or person) and inserts the registrations that got theirs. A person
/// who holds a registration takes no slot; two nodes registering one
/// person at once both pass that check, and the unique constraint makes
/// the later insert do nothing (after waiting for the first to commit):
/// the slot was taken, the registration not inserted.
static TAKE_SLOTS: Sql = Sql::new(
    "WITH r AS (
        SELECT * FROM unnest(?1::TEXT[], ?2::BIGINT[], ?3::INT[], ?4::INT[],
                             ?5::BYTEA[], ?6::BYTEA[], ?7::BIGINT[], ?8::BYTEA[])
          AS r(id, place_id, day, time_slot, access_hash, person_sealed,
               created_at_ms, person_key)),
     taken AS (
        UPDATE booking_slots s SET seats_left = s.seats_left - 1
          FROM r
         WHERE s.place_id = r.place_id AND s.day = r.day AND s.time_slot = r.time_slot
           AND s.seats_left > 0
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
);
/// Why each of a group of registrations missed its slot.
static WHY_MISSED_ALL: Sql = Sql::new(
    "SELECT r.ord,
            EXISTS (SELECT 1 FROM booking_places p WHERE p.id = r.place_id),
            EXISTS (SELECT 1 FROM booking_slots s
                     WHERE s.place_id = r.place_id AND s.day = r.day
                       AND s.time_slot = r.time_slot AND s.seats > 0),
            r.person_key IS NOT NULL AND EXISTS (
                SELECT 1 FROM booking_registrations b WHERE b.person_key = r.person_key)
       FROM unnest(?1::INT[], ?2::BIGINT[], ?3::INT[], ?4::INT[], ?5::BYTEA[])
         AS r(ord, place_id, day, time_slot, person_key)",
);
/// Why one registration missed its slot.
static WHY_MISSED: Sql = Sql::new(
    "SELECT (SELECT COUNT(*) FROM booking_places WHERE id = ?1),
            (SELECT COUNT(*) FROM booking_slots
             WHERE place_id = ?1 AND day = ?2 AND time_slot = ?3 AND seats > 0),
            ?4::bytea IS NOT NULL AND EXISTS (
                SELECT 1 FROM booking_registrations WHERE person_key = ?4)",
);
/// Another registration of the person under the new day's key (the unique
/// index on person_key still decides a race between nodes).
static PERSON_HOLDS_ANOTHER: Sql = Sql::new(
    "SELECT EXISTS (SELECT 1 FROM booking_registrations
                     WHERE person_key = ?1 AND id <> ?2)",
);
static PLACE_AND_SLOT_EXIST: Sql = Sql::new(
    "SELECT (SELECT COUNT(*) FROM booking_places WHERE id = ?1),
            (SELECT COUNT(*) FROM booking_slots
              WHERE place_id = ?1 AND day = ?2 AND time_slot = ?3 AND seats > 0)",
);

/// The strategy where writers are shared: the slot's row decides.
pub struct SlotRows;

impl SlotRows {
    /// Takes the slot with the other try-registers of the writer's batch
    /// ([`TryRegisterRows`]).
    pub async fn try_register(
        &self,
        store: &Store,
        reg: SealedRegistration,
        event: NewEvent,
    ) -> Result<RegisterOutcome, StoreError> {
        store.write_grouped::<TryRegisterRows>((reg, event)).await
    }

    /// Deletes the registration and frees its slot's row, in one command.
    pub async fn cancel(&self, store: &Store, change: Change) -> Result<CancelOutcome, StoreError> {
        store
            .write(move |tx| {
                let change = change.clone();
                Box::pin(async move {
                    let Some(reg) = change.delete(tx).await? else {
                        return Ok(CancelOutcome::NotFound);
                    };
                    tx.execute(&FREE_SLOT, &[&reg.place_id, &reg.day.0, &reg.time_slot])
                        .await?;
                    Ok(CancelOutcome::Cancelled)
                })
            })
            .await
    }

    /// Takes the new slot by the conditional write that decides a
    /// registration's and frees the old one, in one command.
    pub async fn move_to(
        &self,
        store: &Store,
        change: Change,
        to: SlotRef,
        to_person_key: Option<Vec<u8>>,
    ) -> Result<MoveOutcome, StoreError> {
        store
            .write(move |tx| {
                let (change, to_person_key) = (change.clone(), to_person_key.clone());
                Box::pin(async move {
                    let Some(reg) = change.read(tx).await? else {
                        return Ok(MoveOutcome::NotFound);
                    };
                    let from = slot_of(&reg);
                    if from == to {
                        return Ok(MoveOutcome::Unchanged);
                    }
                    if let Some(key) = &to_person_key {
                        let held = tx
                            .query_one(&PERSON_HOLDS_ANOTHER, &[key, &reg.id], |r| r.col(0))
                            .await?;
                        if held {
                            return Ok(MoveOutcome::AlreadyRegistered);
                        }
                    }
                    let took = tx
                        .execute(&TAKE_SLOT, &[&to.place_id, &to.day.0, &to.time_slot])
                        .await?;
                    if took == 0 {
                        let (places, slots) = tx
                            .query_one(
                                &PLACE_AND_SLOT_EXIST,
                                &[&to.place_id, &to.day.0, &to.time_slot],
                                |r| Ok((r.int(0)?, r.int(1)?)),
                            )
                            .await?;
                        return Ok(match miss_outcome(places, slots) {
                            RegisterOutcome::PlaceNotFound => MoveOutcome::PlaceNotFound,
                            RegisterOutcome::SlotNotFound => MoveOutcome::SlotNotFound,
                            _ => MoveOutcome::SlotTaken,
                        });
                    }
                    tx.execute(&FREE_SLOT, &[&from.place_id, &from.day.0, &from.time_slot])
                        .await?;
                    registrations::record_move(tx, &reg, to, &to_person_key).await?;
                    Ok(MoveOutcome::Moved { from })
                })
            })
            .await
    }
}

/// Try-register where writers are shared: the registrations of a writer's
/// batch decided together, in one statement (a slot is taken by one
/// conditional UPDATE per row, the registration inserted in the same
/// statement), and the answers of the ones that missed found by a second
/// one. A registration that asks for a slot or a person an earlier one of
/// the batch asks for runs after them, alone, with the same rules
/// ([`try_register_one`]).
pub struct TryRegisterRows;

impl Group for TryRegisterRows {
    type Item = (SealedRegistration, NewEvent);
    type Out = RegisterOutcome;

    fn run<'a>(
        tx: &'a Tx<'a>,
        items: Vec<&'a Self::Item>,
    ) -> StoreFuture<'a, Vec<RegisterOutcome>> {
        Box::pin(async move {
            // The first claim to each slot and each person runs in the
            // group; a later one in the batch waits for the first's answer
            // (`after`: index of the item, index of the first claim).
            let slot_of = |i: usize| (items[i].0.place_id, items[i].0.day.0, items[i].0.time_slot);
            let mut slots = HashMap::with_capacity(items.len());
            let mut persons = HashMap::with_capacity(items.len());
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
            let took = take_slots(tx, &regs).await?;
            let mut missed = Vec::new();
            for (&i, took) in together.iter().zip(took) {
                let (reg, event) = items[i];
                match took {
                    Took::Registered => {
                        tx.append_opening(event.clone())?;
                        out[i] = RegisterOutcome::Registered;
                    }
                    // Another node registered the person meanwhile: the
                    // seat goes back, and the answer says why.
                    Took::PersonRaced => out[i] = hand_back(tx, reg).await?,
                    Took::Missed => missed.push(i),
                }
            }
            let regs: Vec<&SealedRegistration> = missed.iter().map(|&i| &items[i].0).collect();
            for (&i, outcome) in missed.iter().zip(why_missed_all(tx, &regs).await?) {
                out[i] = outcome;
            }
            // A later claim whose first claim decided the same thing for it
            // gets that answer without touching a row (no row lock held by
            // this batch out of order); the rest run alone, in slot order.
            after.sort_by_key(|&(i, _, _)| slot_of(i));
            for (i, slot_first, person_first) in after {
                let known = if slot_first != i {
                    match out[slot_first] {
                        // Every seat is gone, or the slot is unknown, for every
                        // claim alike; after a registration a seat may be
                        // left, so the claim runs alone.
                        RegisterOutcome::SlotTaken
                        | RegisterOutcome::PlaceNotFound
                        | RegisterOutcome::SlotNotFound => Some(out[slot_first]),
                        _ => None,
                    }
                } else if person_first != i && out[person_first] == RegisterOutcome::Registered {
                    Some(RegisterOutcome::AlreadyRegistered)
                } else {
                    None
                };
                out[i] = match known {
                    Some(o) => o,
                    None => {
                        let (reg, event) = items[i];
                        try_register_one(tx, reg, event).await?
                    }
                };
            }
            Ok(out)
        })
    }
}

/// What [`take_slots`] did for one registration.
enum Took {
    Registered,
    /// The slot was free but the person's key was inserted by another
    /// transaction first (the slot is still held: hand it back).
    PersonRaced,
    Missed,
}

/// Takes the slots of `regs` (no two of them the same slot or person) and
/// inserts the registrations that got theirs, in one statement.
async fn take_slots(tx: &Tx<'_>, regs: &[&SealedRegistration]) -> Result<Vec<Took>, StoreError> {
    if regs.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<String> = regs.iter().map(|r| r.id.clone()).collect();
    let places: Vec<i64> = regs.iter().map(|r| r.place_id).collect();
    let days: Vec<i64> = regs.iter().map(|r| i64::from(r.day.0)).collect();
    let slots: Vec<i64> = regs.iter().map(|r| i64::from(r.time_slot)).collect();
    let hashes: Vec<Option<&[u8]>> = regs.iter().map(|r| Some(&r.access_hash[..])).collect();
    let sealed: Vec<Option<&[u8]>> = regs.iter().map(|r| Some(&r.person_sealed[..])).collect();
    let created: Vec<i64> = regs.iter().map(|r| r.created_at_ms).collect();
    let keys: Vec<Option<&[u8]>> = regs.iter().map(|r| r.person_key.as_deref()).collect();
    let rows = tx
        .query(
            &TAKE_SLOTS,
            &[
                &ids, &places, &days, &slots, &hashes, &sealed, &created, &keys,
            ],
            |r| Ok((r.text(0)?, r.col::<bool>(1)?)),
        )
        .await?;
    let took: HashMap<String, bool> = rows.into_iter().collect();
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
async fn why_missed_all(
    tx: &Tx<'_>,
    regs: &[&SealedRegistration],
) -> Result<Vec<RegisterOutcome>, StoreError> {
    if regs.is_empty() {
        return Ok(Vec::new());
    }
    let ords: Vec<i64> = (0..regs.len() as i64).collect();
    let places: Vec<i64> = regs.iter().map(|r| r.place_id).collect();
    let days: Vec<i64> = regs.iter().map(|r| i64::from(r.day.0)).collect();
    let slots: Vec<i64> = regs.iter().map(|r| i64::from(r.time_slot)).collect();
    let keys: Vec<Option<&[u8]>> = regs.iter().map(|r| r.person_key.as_deref()).collect();
    let rows = tx
        .query(
            &WHY_MISSED_ALL,
            &[&ords, &places, &days, &slots, &keys],
            |r| {
                Ok((
                    r.int(0)?,
                    r.col::<bool>(1)?,
                    r.col::<bool>(2)?,
                    r.col::<bool>(3)?,
                ))
            },
        )
        .await?;
    let mut out = vec![RegisterOutcome::SlotTaken; regs.len()];
    for (ord, place, slot, person_holds_one) in rows {
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
async fn try_register_one(
    tx: &Tx<'_>,
    reg: &SealedRegistration,
    event: &NewEvent,
) -> Result<RegisterOutcome, StoreError> {
    match take_slots(tx, &[reg]).await?.pop() {
        Some(Took::Registered) => {
            tx.append_opening(event.clone())?;
            Ok(RegisterOutcome::Registered)
        }
        Some(Took::PersonRaced) => hand_back(tx, reg).await,
        _ => why_missed(tx, reg).await,
    }
}

/// Gives back the seat `reg` took when its person was registered by
/// another node meanwhile, and answers why it missed.
async fn hand_back(tx: &Tx<'_>, reg: &SealedRegistration) -> Result<RegisterOutcome, StoreError> {
    tx.execute(&FREE_SLOT, &[&reg.place_id, &reg.day.0, &reg.time_slot])
        .await?;
    why_missed(tx, reg).await
}

/// Why `reg` missed its slot.
async fn why_missed(tx: &Tx<'_>, reg: &SealedRegistration) -> Result<RegisterOutcome, StoreError> {
    let row = tx
        .query_opt(
            &WHY_MISSED,
            &[&reg.place_id, &reg.day.0, &reg.time_slot, &reg.person_key],
            |r| Ok((r.int(0)?, r.int(1)?, r.col::<bool>(2)?)),
        )
        .await?;
    let (places, slots, person_holds_one) = row.unwrap_or((0, 0, false));
    if person_holds_one && places > 0 && slots > 0 {
        return Ok(RegisterOutcome::AlreadyRegistered);
    }
    Ok(miss_outcome(places, slots))
}
