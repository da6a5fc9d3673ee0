//! Slots decided in memory, where one process writes (SQLite: one writer in
//! one process, which sees every write): the availability index
//! (`availability.rs`) decides slots and persons inside the writer's
//! commands, by a test-and-set of the slot's bit, and serves the slot
//! reads. A registration appends its row and its event; no slot row is
//! rewritten, so a registration costs appended pages only.
//!
//! A bit a command took is handed back if the command or its batch does not
//! commit ([`Held`]); what a committed cancel or move frees is freed before
//! its caller is answered.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use super::super::availability::{person_of, Availability, SlotState};
use super::super::model::{
    Day, MoveOutcome, Place, PlacePolicy, RegisterOutcome, SealedRegistration, SlotRef,
};
use super::super::seed::SEED_GENERATION_KEY;
use super::registrations::{self, Change};
use super::{slot_of, CancelOutcome, SlotRow};
use crate::store::{NewEvent, Store, StoreError, StoreFuture, Tx};

pub struct InMemorySlots {
    /// Swapped whole by a reload, inside a writer command of its own; write
    /// commands read it when they run (not when they were sent), so every
    /// command after a reload decides on the new index.
    index: Arc<ArcSwap<Availability>>,
    /// The seed generation the index was loaded at (for the seed watcher).
    loaded_generation: Option<String>,
}

impl InMemorySlots {
    /// Loads the index from the tables.
    pub async fn load(store: &Store) -> Result<InMemorySlots, StoreError> {
        let loaded_generation = store.meta_get(SEED_GENERATION_KEY).await?;
        let started = std::time::Instant::now();
        let index = store
            .read_blocking(|c| Box::pin(Availability::load(c)))
            .await?;
        tracing::info!(
            slots = index.slots(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "loaded the booking availability index"
        );
        Ok(InMemorySlots {
            index: Arc::new(ArcSwap::from_pointee(index)),
            loaded_generation,
        })
    }

    pub fn place(&self, id: i64) -> Option<Place> {
        self.index.load().place(id).cloned()
    }

    pub fn with_place_slots<R>(
        &self,
        place_id: i64,
        from: Day,
        days: i32,
        render: impl FnOnce(&Place, &[SlotRow]) -> R,
    ) -> Option<R> {
        self.index
            .load()
            .place_slots_rows(place_id, from, days)
            .map(|(place, rows)| render(place, &rows))
    }

    pub fn state(&self, place_id: i64, day: Day, slot: i32) -> SlotState {
        self.index.load().state(place_id, day, slot)
    }

    pub fn policy(&self, id: i64) -> Option<PlacePolicy> {
        self.index.load().policy(id)
    }

    /// For each place of `wanted` (its id, and the first day and time
    /// slot to look at), its first slot with a seat left within `days` days:
    /// the place, day, time slot and seats left.
    pub fn first_free(&self, wanted: &[(i64, Day, i32)], days: i32) -> Vec<(Place, Day, i32, i32)> {
        let index = self.index.load();
        wanted
            .iter()
            .filter_map(|&(id, from, slot)| {
                let place = index.place(id)?;
                let (day, time_slot, left) =
                    index.first_free(id, from, days, |d, s| d > from || s >= slot)?;
                Some((place.clone(), day, time_slot, left))
            })
            .collect()
    }

    /// Runs `change` (a writer command changing places and their slots) and,
    /// in the same command, loads the places it names again into a new
    /// index swapped in at once, so every later command decides on it; the
    /// old index comes back if the command does not commit.
    pub async fn change_places<T, F>(&self, store: &Store, change: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'a> Fn(
                &'a crate::store::Tx<'a>,
                Arc<ArcSwap<Availability>>,
            ) -> crate::store::StoreFuture<'a, (T, Vec<i64>)>
            + Send
            + Sync
            + 'static,
    {
        let old = self.index.load_full();
        let index = self.index.clone();
        let outcome = store
            .write_apart(move |tx| {
                let index = index.clone();
                let ran = change(tx, index.clone());
                Box::pin(async move {
                    let (out, changed) = ran.await?;
                    if !changed.is_empty() {
                        let current = index.load_full();
                        let fresh = current.reloaded(tx, &changed).await?;
                        index.store(Arc::new(fresh));
                    }
                    Ok(out)
                })
            })
            .await;
        if outcome.is_err() {
            self.index.store(old);
        }
        outcome
    }

    /// Decides the slot and the person in the index and appends the
    /// registration and its event, in the writer's transaction.
    pub async fn try_register(
        &self,
        store: &Store,
        reg: SealedRegistration,
        event: NewEvent,
    ) -> Result<RegisterOutcome, StoreError> {
        let held = Held::new(&self.index);
        let (index, in_writer, cmd) = (self.index.clone(), held.clone(), Arc::new((reg, event)));
        // Unguarded (no SAVEPOINT): the slot is decided by the index bit
        // before any SQL runs, and the two appends that follow can only
        // fail when the database does, which rolls back the batch; every
        // registration in it then frees its bit (`Held::settle`).
        let outcome = store
            .write_unguarded(move |tx| {
                let (held, cmd) = (in_writer.clone(), cmd.clone());
                held.decide_on(&index);
                Box::pin(async move {
                    let (reg, event) = &*cmd;
                    match held.take_slot(slot_of(reg)) {
                        SlotState::Free => {}
                        SlotState::Taken => return Ok(RegisterOutcome::SlotTaken),
                        SlotState::UnknownPlace => return Ok(RegisterOutcome::PlaceNotFound),
                        SlotState::UnknownSlot => return Ok(RegisterOutcome::SlotNotFound),
                    }
                    // One writer: the person is decided in its memory too
                    // (see `availability.rs`), before any SQL runs.
                    if let Some(p) = person_of_reg(reg) {
                        if !held.take_person(p) {
                            held.release();
                            return Ok(RegisterOutcome::AlreadyRegistered);
                        }
                    }
                    registrations::insert(tx, reg).await?;
                    tx.append(event.clone())?;
                    Ok(RegisterOutcome::Registered)
                })
            })
            .await;
        held.settle(&outcome);
        outcome
    }

    /// Deletes the registration; its slot and person are free in the index
    /// once that committed.
    pub async fn cancel(&self, store: &Store, change: Change) -> Result<CancelOutcome, StoreError> {
        let held = Held::new(&self.index);
        let (index, in_writer) = (self.index.clone(), held.clone());
        let outcome = store
            .write(move |tx| {
                let (held, change) = (in_writer.clone(), change.clone());
                held.decide_on(&index);
                Box::pin(async move {
                    let Some(reg) = change.delete(tx).await? else {
                        return Ok(CancelOutcome::NotFound);
                    };
                    held.free_on_commit(slot_of(&reg), person_of_reg(&reg));
                    Ok(CancelOutcome::Cancelled)
                })
            })
            .await;
        held.settle(&outcome);
        outcome
    }

    /// Takes the new slot by the same test-and-set that decides a
    /// registration's, and (where the rule scopes the person by day) the
    /// person's key for the new day; frees the old ones once the move
    /// committed.
    pub async fn move_to(
        &self,
        store: &Store,
        change: Change,
        to: SlotRef,
        to_person_key: Option<Vec<u8>>,
    ) -> Result<MoveOutcome, StoreError> {
        let held = Held::new(&self.index);
        let (index, in_writer) = (self.index.clone(), held.clone());
        let outcome = store
            .write(move |tx| {
                let held = in_writer.clone();
                held.decide_on(&index);
                let (change, to_person_key) = (change.clone(), to_person_key.clone());
                Box::pin(async move {
                    let Some(reg) = change.read(tx).await? else {
                        return Ok(MoveOutcome::NotFound);
                    };
                    let from = slot_of(&reg);
                    if from == to {
                        return Ok(MoveOutcome::Unchanged);
                    }
                    match held.take_slot(to) {
                        SlotState::Free => {}
                        SlotState::Taken => return Ok(MoveOutcome::SlotTaken),
                        SlotState::UnknownPlace => return Ok(MoveOutcome::PlaceNotFound),
                        SlotState::UnknownSlot => return Ok(MoveOutcome::SlotNotFound),
                    }
                    let old_person = person_of_reg(&reg);
                    let new_person = to_person_key
                        .as_deref()
                        .filter(|k| k.len() >= 8)
                        .map(person_of);
                    let mut frees_person = None;
                    if new_person != old_person {
                        if let Some(p) = new_person {
                            if !held.take_person(p) {
                                held.release();
                                return Ok(MoveOutcome::AlreadyRegistered);
                            }
                        }
                        frees_person = old_person;
                    }
                    held.free_on_commit(from, frees_person);
                    registrations::record_move(tx, &reg, to, &to_person_key).await?;
                    Ok(MoveOutcome::Moved { from })
                })
            })
            .await;
        held.settle(&outcome);
        outcome
    }

    /// Closes a place's day: every slot bit of the day taken inside the
    /// writer's command that runs `body` (so no registration or move after
    /// it in the writer's order takes one), handed back if the command does
    /// not commit; the persons of the registrations `body` cancelled are
    /// free once it did.
    pub async fn close_day<F>(
        &self,
        store: &Store,
        place_id: i64,
        day: Day,
        body: F,
    ) -> Result<Option<Vec<SealedRegistration>>, StoreError>
    where
        F: for<'a> Fn(&'a Tx<'a>) -> StoreFuture<'a, Option<Vec<SealedRegistration>>>
            + Send
            + Sync
            + 'static,
    {
        let took: Arc<Mutex<Option<DayTaken>>> = Arc::default();
        let (index, in_writer) = (self.index.clone(), took.clone());
        let outcome = store
            .write(move |tx| {
                let current = index.load_full();
                let seats = current.take_day(place_id, day);
                *in_writer.lock().unwrap_or_else(|e| e.into_inner()) = Some((current, seats));
                body(tx)
            })
            .await;
        let taken = took.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some((index, seats)) = taken {
            match &outcome {
                Err(_) => index.give_back_day(place_id, day, &seats),
                Ok(Some(cancelled)) => {
                    for p in cancelled.iter().filter_map(person_of_reg) {
                        index.release_person(p);
                    }
                }
                Ok(None) => {}
            }
        }
        outcome
    }

    /// Loads the index again when another process seeded the store (the
    /// seed bumps a generation in `meta`); reads use the old index
    /// meanwhile.
    pub fn spawn_seed_watcher(&self, store: &Store) -> tokio::task::JoinHandle<()> {
        let (index, reload_on) = (self.index.clone(), store.clone());
        crate::platform::seed_watch::spawn(
            store.clone(),
            SEED_GENERATION_KEY,
            self.loaded_generation.clone(),
            "the booking availability index",
            move || reload(reload_on.clone(), index.clone()),
        )
    }
}

/// Loads the index again and swaps it in, both inside one writer command:
/// no registration can commit between the read and the swap (it would be
/// missing from the new index, its slot free to book twice), and every
/// command after it decides on the new index. Writes wait for the load
/// (seconds for millions of slots).
async fn reload(store: Store, index: Arc<ArcSwap<Availability>>) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let slots = store
        .write(move |tx| {
            let index = index.clone();
            Box::pin(async move {
                let loaded = Availability::load(tx).await?;
                let slots = loaded.slots();
                index.store(Arc::new(loaded));
                Ok(slots)
            })
        })
        .await?;
    tracing::info!(
        slots,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "reloaded the booking availability index after a new seed (in the writer)"
    );
    Ok(())
}

/// The index a day's closing ran on and the slot bits it took there.
type DayTaken = (Arc<Availability>, Vec<(i32, u8)>);

/// A registration's person key in the index, if it has one.
fn person_of_reg(reg: &SealedRegistration) -> Option<u64> {
    reg.person_key
        .as_deref()
        .filter(|k| k.len() >= 8)
        .map(person_of)
}

/// What a write command took in the index, and what it frees once
/// committed. Its batch may still fail after the command ran (on SQLite a
/// failed statement or commit rolls back every command of the batch), so
/// the caller settles it by the answer ([`Held::settle`]).
#[derive(Clone)]
struct Held(Arc<Mutex<HeldBits>>);

struct HeldBits {
    index: Arc<Availability>,
    slot: Option<SlotRef>,
    person: Option<u64>,
    /// A slot, and maybe a person, freed once the command committed.
    frees: Option<(SlotRef, Option<u64>)>,
}

impl Held {
    fn new(current: &ArcSwap<Availability>) -> Held {
        Held(Arc::new(Mutex::new(HeldBits {
            index: current.load_full(),
            slot: None,
            person: None,
            frees: None,
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HeldBits> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Decides on the index current when the command runs, remembered so
    /// what the command took goes back to the same index (a reload may swap
    /// another in before the batch's answer).
    fn decide_on(&self, current: &ArcSwap<Availability>) {
        self.lock().index = current.load_full();
    }

    /// The test-and-set of the slot's bit, which decides it: `Free` means
    /// it was free and is now this command's.
    fn take_slot(&self, slot: SlotRef) -> SlotState {
        let mut bits = self.lock();
        let state = bits.index.take(slot.place_id, slot.day, slot.time_slot);
        if state == SlotState::Free {
            bits.slot = Some(slot);
        }
        state
    }

    /// Takes the person's place; `false` when the person holds one.
    fn take_person(&self, person: u64) -> bool {
        let mut bits = self.lock();
        let took = bits.index.take_person(person);
        if took {
            bits.person = Some(person);
        }
        took
    }

    fn free_on_commit(&self, slot: SlotRef, person: Option<u64>) {
        self.lock().frees = Some((slot, person));
    }

    /// Hands back what the command took.
    fn release(&self) {
        let mut bits = self.lock();
        if let Some(s) = bits.slot.take() {
            bits.index.give_back(s.place_id, s.day, s.time_slot);
        }
        if let Some(p) = bits.person.take() {
            bits.index.release_person(p);
        }
    }

    /// Once the command's answer is known: what it took is handed back if
    /// it did not commit, and what it frees is freed if it did.
    fn settle<T>(&self, outcome: &Result<T, StoreError>) {
        if outcome.is_err() {
            return self.release();
        }
        let mut bits = self.lock();
        if let Some((slot, person)) = bits.frees.take() {
            bits.index
                .give_back(slot.place_id, slot.day, slot.time_slot);
            if let Some(p) = person {
                bits.index.release_person(p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Booking;
    use super::*;
    use crate::store::{Sql, StoreLimits, StoreUrl};

    fn registration(id: &str, time_slot: i32, person: u8) -> SealedRegistration {
        SealedRegistration {
            id: id.into(),
            access_hash: crate::platform::crypto::hash_code(id),
            place_id: 1,
            day: Day(100),
            time_slot,
            person_sealed: vec![0],
            created_at_ms: 0,
            person_key: Some(vec![person; 32]),
        }
    }

    fn slot(time_slot: i32) -> SlotRef {
        SlotRef {
            place_id: 1,
            day: Day(100),
            time_slot,
        }
    }

    /// What a command took is handed back when its batch does not commit,
    /// and what a committed move or cancel frees is free before it answers.
    #[tokio::test]
    async fn the_index_follows_what_committed() {
        let dir = tempfile::tempdir().unwrap();
        let url = StoreUrl::Sqlite(dir.path().join("throng.db"));
        let store = Store::open_with(
            &url,
            StoreLimits::default(),
            &[&super::super::super::MIGRATIONS],
        )
        .await
        .unwrap();
        static ROWS: Sql = Sql::new(
            "INSERT INTO booking_places (id, name, address, first_slot_minute, slot_minutes)
                 VALUES (1, 'A', 'a', 480, 20);
             INSERT INTO booking_slots (place_id, day, time_slot)
                 VALUES (1, 100, 0), (1, 100, 1), (1, 100, 2);",
        );
        store.write(|tx| Box::pin(tx.batch(&ROWS))).await.unwrap();
        let booking = Booking::open(&store).await.unwrap();
        let state = |slot| booking.known_state(1, Day(100), slot);
        let registered = booking.try_register(registration("a", 0, 1)).await;
        assert_eq!(registered.unwrap(), RegisterOutcome::Registered);
        assert_eq!(state(0), Some(SlotState::Taken));

        // The same id again fails in the database, after the slot's bit and
        // the person were taken: the batch rolls back and both go back.
        assert!(booking.try_register(registration("a", 1, 2)).await.is_err());
        assert_eq!(state(1), Some(SlotState::Free));
        let registered = booking.try_register(registration("b", 1, 2)).await;
        assert_eq!(registered.unwrap(), RegisterOutcome::Registered);

        let moved = booking
            .move_registration("a", "a", slot(2), Some(vec![3; 32]))
            .await
            .unwrap();
        assert_eq!(moved, MoveOutcome::Moved { from: slot(0) });
        assert_eq!(state(0), Some(SlotState::Free));
        assert_eq!(state(2), Some(SlotState::Taken));
        // Its old person key is free, its new one held.
        let again = booking.try_register(registration("c", 0, 3)).await;
        assert_eq!(again.unwrap(), RegisterOutcome::AlreadyRegistered);
        assert_eq!(state(0), Some(SlotState::Free));
        let again = booking.try_register(registration("c", 0, 1)).await;
        assert_eq!(again.unwrap(), RegisterOutcome::Registered);

        assert_eq!(
            booking.cancel("b", "b").await.unwrap(),
            CancelOutcome::Cancelled
        );
        assert_eq!(state(1), Some(SlotState::Free));
        let again = booking.try_register(registration("d", 1, 2)).await;
        assert_eq!(again.unwrap(), RegisterOutcome::Registered);
    }
}
