//! Booking on the embedded SQLite store: one writer in one process, so the
//! availability index (`availability.rs`) is kept in memory and decides
//! slots and persons inside the writer's commands. A registration appends
//! its row and its event; no slot row is rewritten, so a registration
//! costs appended pages only.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use futures::future::BoxFuture;
use indicatif::ProgressBar;
use rusqlite::{params, Connection};

use super::super::availability::{person_of, Availability, SlotState};
use super::super::model::{Day, MoveOutcome, Place, RegisterOutcome, SealedRegistration, SlotRef};
use super::super::seed::{place_name, refuse_reseed, SeedBookingArgs, PLACES_PER_CHUNK};
use super::{
    cancelled, cancelled_event, confirmed_event, counts_row, moved_event, parked_row,
    person_of_reg, place_row, registration_row, slot_of, sql, AvailabilityHandle, BookingCounts,
    BookingStore, CancelOutcome, ParkedNotification, PlaceSlots,
};
use crate::store::sqlite::{optional, SqliteStore};
use crate::store::{eventlog, NewEvent, StoreError};

pub struct SqliteBooking {
    db: Arc<SqliteStore>,
    /// The naive design's own connection (opened on first use).
    naive: Arc<Mutex<Option<Connection>>>,
}

impl SqliteBooking {
    pub fn new(db: Arc<SqliteStore>) -> SqliteBooking {
        SqliteBooking {
            db,
            naive: Arc::default(),
        }
    }
}

fn needs_index() -> StoreError {
    StoreError::Internal("the SQLite booking store needs its availability index".into())
}

fn registration_in(c: &Connection, id: &str) -> Result<Option<SealedRegistration>, StoreError> {
    optional(&mut *c.prepare_cached(sql::REGISTRATION)?, [id], |r| {
        registration_row(r)
    })
}

/// Decides `reg`'s slot by the index's test-and-set and appends the
/// registration and its event, in the writer's transaction; `took` says
/// whether the slot's bit (and the person's) is this command's.
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

/// What a move's writer command changed in the index, so the caller can
/// undo it if the batch does not commit, or finish it if it does.
#[derive(Default)]
struct MoveMarks {
    /// The new slot's bit, set by this command.
    took: Option<SlotRef>,
    /// A person key taken for the new day (`--booking-one-registration
    /// person-day`).
    took_person: Option<u64>,
    /// The old person key, released once the move commits.
    release_person: Option<u64>,
}

fn sqlite_move(
    c: &Connection,
    index: &Availability,
    marks: &mut MoveMarks,
    id: &str,
    code: &str,
    to: SlotRef,
    to_person_key: Option<Vec<u8>>,
) -> Result<MoveOutcome, StoreError> {
    let Some(reg) = registration_in(c, id)? else {
        return Ok(MoveOutcome::NotFound);
    };
    if !crate::platform::crypto::code_matches(code, &reg.access_hash) {
        return Ok(MoveOutcome::NotFound);
    }
    let from = slot_of(&reg);
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
        .map(person_of);
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
    c.prepare_cached(sql::MOVE_REGISTRATION)?.execute(params![
        reg.id,
        to.place_id,
        to.day.0,
        to.time_slot,
        to_person_key
    ])?;
    eventlog::sqlite_append(c, &moved_event(&reg, to))?;
    Ok(MoveOutcome::Moved { from })
}

impl BookingStore for SqliteBooking {
    fn list_places(
        &self,
        skip: i64,
        size: i64,
    ) -> BoxFuture<'_, Result<(Vec<Place>, i64), StoreError>> {
        Box::pin(self.db.read(move |c| {
            let mut places = Vec::new();
            {
                let mut stmt = c.prepare_cached(sql::LIST_PLACES)?;
                let mut rows = stmt.query([size, skip])?;
                while let Some(r) = rows.next()? {
                    places.push(place_row(r)?);
                }
            }
            let total = c.query_row(sql::COUNT_PLACES, [], |r| r.get(0))?;
            Ok((places, total))
        }))
    }

    fn place(&self, id: i64) -> BoxFuture<'_, Result<Option<Place>, StoreError>> {
        Box::pin(
            self.db.read(move |c| {
                optional(&mut *c.prepare_cached(sql::PLACE)?, [id], |r| place_row(r))
            }),
        )
    }

    /// Slots are served from the availability index (`BookingState`).
    fn place_slots(
        &self,
        _place_id: i64,
        _from: Day,
        _days: i32,
    ) -> BoxFuture<'_, Result<Option<PlaceSlots>, StoreError>> {
        Box::pin(async {
            Err(StoreError::Internal(
                "SQLite slot reads go through the availability index".into(),
            ))
        })
    }

    fn load_availability(&self) -> BoxFuture<'_, Result<Option<Availability>, StoreError>> {
        Box::pin(async move { Ok(Some(self.db.read_blocking(Availability::load).await?)) })
    }

    fn reload_availability(
        &self,
        handle: AvailabilityHandle,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(self.db.write(move |c| {
            let index = Availability::load(c)?;
            let slots = index.slots();
            handle.store(Arc::new(index));
            Ok(slots)
        }))
    }

    fn try_register(
        &self,
        index: Option<AvailabilityHandle>,
        reg: SealedRegistration,
    ) -> BoxFuture<'_, Result<RegisterOutcome, StoreError>> {
        Box::pin(async move {
            let event = confirmed_event(&reg);
            let handle = index.ok_or_else(needs_index)?;
            // The index the command decided on, read when it ran (a reload
            // swaps the index inside a writer command of its own).
            let used: Arc<OnceLock<Arc<Availability>>> = Arc::default();
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
            let outcome = self
                .db
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
        })
    }

    fn registration(
        &self,
        id: &str,
    ) -> BoxFuture<'_, Result<Option<SealedRegistration>, StoreError>> {
        let id = id.to_string();
        Box::pin(self.db.read(move |c| registration_in(c, &id)))
    }

    fn cancel(
        &self,
        id: &str,
        access_code: &str,
    ) -> BoxFuture<'_, Result<CancelOutcome, StoreError>> {
        let (id, code) = (id.to_string(), access_code.to_string());
        Box::pin(self.db.write(move |c| {
            let Some(reg) = registration_in(c, &id)? else {
                return Ok(CancelOutcome::NotFound);
            };
            if !crate::platform::crypto::code_matches(&code, &reg.access_hash) {
                return Ok(CancelOutcome::NotFound);
            }
            // The slot's bit is cleared by the caller once this commits.
            c.prepare_cached(sql::DELETE_REGISTRATION)?.execute([&id])?;
            eventlog::sqlite_append(c, &cancelled_event(&reg))?;
            Ok(cancelled(&reg))
        }))
    }

    fn move_registration(
        &self,
        index: Option<AvailabilityHandle>,
        id: &str,
        access_code: &str,
        to: SlotRef,
        to_person_key: Option<Vec<u8>>,
    ) -> BoxFuture<'_, Result<MoveOutcome, StoreError>> {
        let (id, code) = (id.to_string(), access_code.to_string());
        Box::pin(async move {
            let handle = index.ok_or_else(needs_index)?;
            let used: Arc<OnceLock<Arc<Availability>>> = Arc::default();
            let marks: Arc<Mutex<MoveMarks>> = Arc::default();
            let (used_w, marks_w) = (used.clone(), marks.clone());
            let outcome = self
                .db
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
        })
    }

    fn counts(&self) -> BoxFuture<'_, Result<BookingCounts, StoreError>> {
        Box::pin(self.db.read(|c| {
            optional(&mut c.prepare(sql::COUNTS)?, [], |r| counts_row(r))?
                .ok_or_else(|| StoreError::Internal("booking counts: no row".into()))
        }))
    }

    fn park_notification(&self, p: ParkedNotification) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.db.write(move |c| {
            c.prepare_cached(sql::PARK_NOTIFICATION)?.execute(params![
                p.position,
                p.registration_id,
                p.reason,
                p.attempts,
                p.parked_at_ms
            ])?;
            Ok(())
        }))
    }

    fn parked_notifications(
        &self,
        limit: i64,
    ) -> BoxFuture<'_, Result<(Vec<ParkedNotification>, i64), StoreError>> {
        Box::pin(self.db.read(move |c| {
            let mut stmt = c.prepare(sql::PARKED_NOTIFICATIONS)?;
            let mut rows = stmt.query([limit])?;
            let (mut list, mut total) = (Vec::new(), 0);
            while let Some(r) = rows.next()? {
                let (parked, count) = parked_row(r)?;
                list.push(parked);
                total = count;
            }
            Ok((list, total))
        }))
    }

    fn seed_slots<'a>(
        &'a self,
        args: &'a SeedBookingArgs,
        from: Day,
        bar: &'a ProgressBar,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        let (path, args, bar) = (self.db.path().to_path_buf(), args.clone(), bar.clone());
        Box::pin(async move {
            tokio::task::spawn_blocking(move || seed_sqlite(&path, &args, from, &bar)).await?
        })
    }

    fn naive_take_slot<'a>(
        &'a self,
        id: &'a str,
        slot: SlotRef,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        let (path, naive, id) = (
            self.db.path().to_path_buf(),
            self.naive.clone(),
            id.to_string(),
        );
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let mut guard = naive.lock().unwrap();
                if guard.is_none() {
                    let c = crate::store::sqlite::open_connection(&path, 4 * 1024, false)
                        .map_err(|e| StoreError::Unavailable(e.to_string()))?;
                    *guard = Some(c);
                }
                let c = guard.as_mut().expect("opened above");
                let updated = c.prepare_cached(sql::TAKE_SLOT)?.execute(params![
                    id,
                    slot.place_id,
                    slot.day.0,
                    slot.time_slot
                ])?;
                Ok::<_, StoreError>(updated as u64)
            })
            .await
            .map_err(|e| StoreError::Internal(format!("naive register task: {e}")))?
        })
    }
}

/// The bulk load on a connection of its own: one prepared insert per row,
/// in transactions of `PLACES_PER_CHUNK` places.
fn seed_sqlite(
    path: &std::path::Path,
    args: &SeedBookingArgs,
    from: Day,
    bar: &ProgressBar,
) -> anyhow::Result<()> {
    let mut conn = crate::store::sqlite::open_connection(path, 64 * 1024, false)?;
    let existing: i64 = conn.query_row(sql::COUNT_PLACES, [], |r| r.get(0))?;
    refuse_reseed(existing, args.force)?;
    if existing > 0 {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute_batch(sql::DELETE_BOOKING_DATA)?;
        tx.commit()?;
    }
    let mut place = 1;
    while place <= args.places {
        let last = (place + PLACES_PER_CHUNK - 1).min(args.places);
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        {
            let mut ins_place = tx.prepare_cached(
                "INSERT INTO booking_places (id, name, address, first_slot_minute, slot_minutes)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            // Rows go in primary-key order, so every insert appends to the
            // B-tree's rightmost page.
            let mut ins_slot = tx.prepare_cached(
                "INSERT INTO booking_slots (place_id, day, time_slot) VALUES (?1, ?2, ?3)",
            )?;
            for p in place..=last {
                let (name, address) = place_name(p);
                ins_place.execute(rusqlite::params![
                    p,
                    name,
                    address,
                    args.first_slot_minute,
                    args.slot_minutes
                ])?;
                for d in 0..args.days {
                    for s in 0..args.slots_per_day {
                        ins_slot.execute(rusqlite::params![p, from.0 + d, s])?;
                    }
                }
                bar.inc((args.days * args.slots_per_day) as u64);
            }
        }
        tx.commit()?;
        place = last + 1;
    }
    // No ANALYZE: with STAT4 statistics SQLite re-prepares every statement
    // whose plan might depend on bound values (our day ranges) on each step,
    // and the primary key is the right plan for every booking query anyway.
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
    Ok(())
}
