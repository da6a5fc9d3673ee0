//! In-memory availability index for the single-node SQLite store: which slots
//! exist and which are taken, one bit each, in two word arrays per place
//! (5,000,000 slots of 25 per day take ~3.2 MB: one 64-bit word per day).
//!
//! Why: the write-up kept its hot slots in an in-memory table; here SQLite
//! stays the durable truth and this index is a projection of it, loaded at
//! start and updated after each commit, before the caller is answered, so a
//! read never misses a write that was acknowledged. It serves the free-slot
//! reads and lets try-register answer 409/404 without touching the writer
//! when the answer is already known.
//!
//! On SQLite the index is also where a slot is decided: the single writer
//! test-and-sets the slot's bit inside its transaction and appends the
//! registration, so a registration writes only appended pages (no random
//! 4 KiB slot page per registration in the WAL). At start the taken bits are
//! rebuilt from `booking_registrations`.
//!
//! The single writer also decides one registration per person here: the
//! set of active registrations' person keys (the first 8 bytes of each
//! blind-index entry, in `persons::PersonSet`), rebuilt at start from the
//! `person_key` column. A
//! unique index on those random keys cost a random B-tree page per
//! registration (in a measurement of the insert alone, ~14 -> ~58 us per
//! row and 15x the WAL bytes), the cost registrations were made
//! append-only to avoid.
//!
//! Not used with PostgreSQL: several nodes write there, and a node's memory
//! would not see the others' writes. A seed made by another process while a
//! server runs bumps `meta.booking_seed_generation`; the server's seed
//! watcher (`store/in_memory.rs`) then loads a new index and
//! swaps it in, both inside one writer command: no registration commits
//! between the load and the swap, and every later command decides on the
//! new index (write commands read the index when they run). Reads use the
//! old one meanwhile; writes wait for the load.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::model::{Day, Place};
use super::persons::PersonSet;
use super::store::places::{place_row, ALL_PLACES};
use super::store::SlotRow;
use crate::store::{Columns, Conn, Sql, StoreError};

/// Places indexed at most (ids are dense from 1 when seeded).
const PLACE_ID_MAX: i64 = 10_000_000;

/// Every slot in key order, and whether its row is free.
static ALL_SLOTS: Sql = Sql::new(
    "SELECT place_id, day, time_slot, registration_id IS NULL FROM booking_slots
     ORDER BY place_id, day, time_slot",
);
static ALL_REGISTRATIONS: Sql =
    Sql::new("SELECT place_id, day, time_slot, person_key FROM booking_registrations");

/// One day's words of a place: which slots exist, which are taken.
struct DaySlots<'a> {
    exists: &'a [u64],
    taken: &'a [AtomicU64],
}

impl DaySlots<'_> {
    fn bit(&self, slot: i32) -> Option<(usize, u64)> {
        if slot < 0 {
            return None;
        }
        let (w, b) = ((slot / 64) as usize, 1u64 << (slot % 64));
        (w < self.exists.len() && self.exists[w] & b != 0).then_some((w, b))
    }
}

/// A place's days, `words_per_day` words each, in one allocation per kind:
/// a lookup touches the place, then one word of each array (one box per day
/// made every try-register chase two more pointers to random heap lines).
struct PlaceSlots {
    place: Place,
    first_day: i32,
    words_per_day: usize,
    exists: Box<[u64]>,
    taken: Box<[AtomicU64]>,
}

impl PlaceSlots {
    fn day_count(&self) -> usize {
        self.exists
            .len()
            .checked_div(self.words_per_day)
            .unwrap_or(0)
    }
    fn day(&self, day: Day) -> Option<DaySlots<'_>> {
        let i = usize::try_from(day.0.checked_sub(self.first_day)?).ok()?;
        if i >= self.day_count() {
            return None;
        }
        let words = i * self.words_per_day..(i + 1) * self.words_per_day;
        Some(DaySlots {
            exists: &self.exists[words.clone()],
            taken: &self.taken[words],
        })
    }
    /// Slots of the place's first day: a capacity guess for a page of rows.
    fn slots_per_day_hint(&self) -> usize {
        self.exists[..self.words_per_day.min(self.exists.len())]
            .iter()
            .map(|w| w.count_ones() as usize)
            .sum::<usize>()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotState {
    UnknownPlace,
    UnknownSlot,
    Taken,
    Free,
}

pub struct Availability {
    /// Index = place id.
    places: Vec<Option<PlaceSlots>>,
    slots: u64,
    /// Person keys of the active registrations (see `person_of`).
    persons: Mutex<PersonSet>,
}

/// The in-memory key of a blind-index entry: its first 8 bytes. Entries are
/// HMAC outputs, uniform and unknowable without the key, so no one can
/// choose two that share a prefix (two people do by chance with probability
/// ~n^2/2^65: ~7e-7 for 5,000,000 registrations) or that share a bucket.
pub fn person_of(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&key[..8]);
    u64::from_le_bytes(b)
}

/// Collects one day's bits while loading.
#[derive(Default)]
struct DayBuilder {
    exists: Vec<u64>,
    taken: Vec<u64>,
}

impl DayBuilder {
    fn set(&mut self, slot: i32, free: bool) {
        let w = (slot / 64) as usize;
        if self.exists.len() <= w {
            self.exists.resize(w + 1, 0);
            self.taken.resize(w + 1, 0);
        }
        self.exists[w] |= 1 << (slot % 64);
        if !free {
            self.taken[w] |= 1 << (slot % 64);
        }
    }
}

/// Lays a place's days out at a fixed stride of `words_per_day` words.
fn flatten(days: Vec<DayBuilder>) -> (usize, Box<[u64]>, Box<[AtomicU64]>) {
    let words_per_day = days.iter().map(|d| d.exists.len()).max().unwrap_or(0);
    let mut exists = vec![0u64; days.len() * words_per_day];
    let mut taken = vec![0u64; days.len() * words_per_day];
    for (i, d) in days.iter().enumerate() {
        let at = i * words_per_day;
        exists[at..at + d.exists.len()].copy_from_slice(&d.exists);
        taken[at..at + d.taken.len()].copy_from_slice(&d.taken);
    }
    (
        words_per_day,
        exists.into_boxed_slice(),
        taken.into_iter().map(AtomicU64::new).collect(),
    )
}

impl Availability {
    /// Builds the index from the database (one scan in primary-key order),
    /// row by row as the statements answer them.
    pub async fn load(c: &Conn<'_>) -> Result<Availability, StoreError> {
        let mut places: Vec<Option<PlaceSlots>> = Vec::new();
        c.query(&ALL_PLACES, &[], |r| {
            let place = place_row(r)?;
            if !(1..=PLACE_ID_MAX).contains(&place.id) {
                return Err(StoreError::Internal(format!(
                    "place id {} is outside 1..={PLACE_ID_MAX}",
                    place.id
                )));
            }
            let i = place.id as usize;
            if places.len() <= i {
                places.resize_with(i + 1, || None);
            }
            places[i] = Some(PlaceSlots {
                place,
                first_day: 0,
                words_per_day: 0,
                exists: Box::new([]),
                taken: Box::new([]),
            });
            Ok(())
        })
        .await?;
        let mut slots = 0u64;
        // (place id, first day, days so far) of the place being collected.
        let mut current: Option<(i64, i32, Vec<DayBuilder>)> = None;
        let finish = |places: &mut Vec<Option<PlaceSlots>>,
                      cur: Option<(i64, i32, Vec<DayBuilder>)>| {
            if let Some((id, first_day, days)) = cur {
                if let Some(Some(p)) = places.get_mut(id as usize) {
                    p.first_day = first_day;
                    (p.words_per_day, p.exists, p.taken) = flatten(days);
                }
            }
        };
        c.query(&ALL_SLOTS, &[], |r| {
            let (place_id, day, slot, free) = (r.int(0)?, r.int4(1)?, r.int4(2)?, r.col(3)?);
            if current.as_ref().map(|c| c.0) != Some(place_id) {
                finish(&mut places, current.take());
                current = Some((place_id, day, Vec::new()));
            }
            let (_, first_day, days) = current.as_mut().expect("set above");
            let i = (day - *first_day) as usize;
            if days.len() <= i {
                days.resize_with(i + 1, DayBuilder::default);
            }
            days[i].set(slot, free);
            slots += 1;
            Ok(())
        })
        .await?;
        finish(&mut places, current.take());
        let index = Availability {
            places,
            slots,
            persons: Mutex::default(),
        };
        // On SQLite the registrations are the truth about taken slots (see
        // `take` below) and about who holds one; the slots table only says
        // which slots exist.
        let mut persons = PersonSet::default();
        c.query(&ALL_REGISTRATIONS, &[], |r| {
            index.set_taken(r.int(0)?, Day(r.int4(1)?), r.int4(2)?, true);
            if let Some(key) = r.opt_bytes(3)?.filter(|k| k.len() >= 8) {
                persons.insert(person_of(&key));
            }
            Ok(())
        })
        .await?;
        *index.persons.lock().unwrap_or_else(|e| e.into_inner()) = persons;
        Ok(index)
    }

    pub fn slots(&self) -> u64 {
        self.slots
    }

    fn place_slots(&self, id: i64) -> Option<&PlaceSlots> {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.places.get(i))
            .and_then(|p| p.as_ref())
    }

    pub fn place(&self, id: i64) -> Option<&Place> {
        self.place_slots(id).map(|p| &p.place)
    }

    /// The word holding a slot's taken bit, and the bit; or why there is none.
    fn locate(&self, place_id: i64, day: Day, slot: i32) -> Result<(&AtomicU64, u64), SlotState> {
        let p = self.place_slots(place_id).ok_or(SlotState::UnknownPlace)?;
        let d = p.day(day).ok_or(SlotState::UnknownSlot)?;
        let (w, b) = d.bit(slot).ok_or(SlotState::UnknownSlot)?;
        Ok((&d.taken[w], b))
    }

    pub fn state(&self, place_id: i64, day: Day, slot: i32) -> SlotState {
        match self.locate(place_id, day, slot) {
            Err(missing) => missing,
            Ok((word, b)) if word.load(Ordering::Acquire) & b != 0 => SlotState::Taken,
            Ok(_) => SlotState::Free,
        }
    }

    /// Takes a free slot: an atomic test-and-set of its bit. On the SQLite
    /// store this runs inside the single writer's transaction, which makes it
    /// the conditional write that decides the slot (the registration row is
    /// appended in the same transaction; see `store/in_memory.rs`).
    pub fn take(&self, place_id: i64, day: Day, slot: i32) -> SlotState {
        match self.locate(place_id, day, slot) {
            Err(missing) => missing,
            Ok((word, b)) if word.fetch_or(b, Ordering::AcqRel) & b != 0 => SlotState::Taken,
            // Was free; now ours.
            Ok(_) => SlotState::Free,
        }
    }

    /// Takes a person's place among the active registrations: `false` if
    /// the person already holds one. Run by the single writer, inside the
    /// transaction that appends the registration (as `take`).
    pub fn take_person(&self, person: u64) -> bool {
        self.persons
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(person)
    }

    /// Frees a person (a cancellation committed, or a registration's batch
    /// did not).
    pub fn release_person(&self, person: u64) {
        self.persons
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(person);
    }

    /// Records a committed change (call after the commit, before answering).
    pub fn set_taken(&self, place_id: i64, day: Day, slot: i32, taken: bool) {
        if let Ok((word, b)) = self.locate(place_id, day, slot) {
            if taken {
                word.fetch_or(b, Ordering::AcqRel);
            } else {
                word.fetch_and(!b, Ordering::AcqRel);
            }
        }
    }

    /// Takes every slot of a place's day (the place closes that day):
    /// the bits this call took, per word, for [`Availability::give_back_day`]
    /// should its command not commit. Run by the single writer.
    pub fn take_day(&self, place_id: i64, day: Day) -> Vec<u64> {
        let Some(d) = self.place_slots(place_id).and_then(|p| p.day(day)) else {
            return Vec::new();
        };
        d.exists
            .iter()
            .zip(d.taken)
            .map(|(exists, taken)| exists & !taken.fetch_or(*exists, Ordering::AcqRel))
            .collect()
    }

    /// Hands back what [`Availability::take_day`] took.
    pub fn give_back_day(&self, place_id: i64, day: Day, took: &[u64]) {
        if let Some(d) = self.place_slots(place_id).and_then(|p| p.day(day)) {
            for (taken, mine) in d.taken.iter().zip(took) {
                taken.fetch_and(!mine, Ordering::AcqRel);
            }
        }
    }

    /// The place and its slots from `from` for `days` days, as the store's
    /// query returns them.
    pub fn place_slots_rows(
        &self,
        place_id: i64,
        from: Day,
        days: i32,
    ) -> Option<(&Place, Vec<SlotRow>)> {
        let p = self.place_slots(place_id)?;
        let mut rows = Vec::with_capacity(days.max(0) as usize * p.slots_per_day_hint());
        for offset in 0..days {
            let day = from.plus(offset);
            let Some(d) = p.day(day) else { continue };
            for (w, exists) in d.exists.iter().enumerate() {
                let taken = d.taken[w].load(Ordering::Acquire);
                let mut bits = *exists;
                while bits != 0 {
                    let b = bits.trailing_zeros();
                    bits &= bits - 1;
                    rows.push(SlotRow {
                        day,
                        time_slot: (w as i32) * 64 + b as i32,
                        free: taken & (1u64 << b) == 0,
                    });
                }
            }
        }
        Some((&p.place, rows))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Store, StoreLimits, StoreUrl};

    #[tokio::test]
    async fn loads_and_tracks_slots() {
        let dir = tempfile::tempdir().unwrap();
        let url = StoreUrl::Sqlite(dir.path().join("throng.db"));
        let store = Store::open_with(&url, StoreLimits::default(), &[&super::super::MIGRATIONS])
            .await
            .unwrap();
        static ROWS: Sql = Sql::new(
            "INSERT INTO booking_places VALUES (1, 'A', 'a', 480, 20), (3, 'C', 'c', 480, 20);
             INSERT INTO booking_slots VALUES (1, 100, 0, NULL), (1, 100, 70, NULL), (1, 102, 5, NULL),
                                              (3, 50, 1, NULL);
             INSERT INTO booking_registrations VALUES ('r1', x'00', 1, 100, 70, x'00', 0,
                 x'0102030405060708ffff');
             INSERT INTO booking_registrations VALUES ('r2', x'00', 3, 50, 2, x'00', 0, NULL);",
        );
        store.write(|tx| Box::pin(tx.batch(&ROWS))).await.unwrap();
        let a = store
            .read_blocking(|c| Box::pin(Availability::load(c)))
            .await
            .unwrap();
        // The stored person holds their place; others are free.
        let held = person_of(&[1, 2, 3, 4, 5, 6, 7, 8, 0xff, 0xff]);
        assert!(!a.take_person(held));
        assert!(a.take_person(held ^ 1));
        a.release_person(held);
        assert!(a.take_person(held));
        assert_eq!(a.slots(), 4);
        assert_eq!(a.state(2, Day(100), 0), SlotState::UnknownPlace);
        assert_eq!(a.state(1, Day(101), 0), SlotState::UnknownSlot);
        assert_eq!(a.state(1, Day(100), 1), SlotState::UnknownSlot);
        assert_eq!(a.state(1, Day(100), 70), SlotState::Taken);
        assert_eq!(a.state(1, Day(100), 0), SlotState::Free);
        assert_eq!(a.take(1, Day(100), 0), SlotState::Free);
        assert_eq!(a.take(1, Day(100), 0), SlotState::Taken);
        assert_eq!(a.state(1, Day(100), 0), SlotState::Taken);
        a.set_taken(1, Day(100), 70, false);
        let (_, rows) = a.place_slots_rows(1, Day(99), 5).unwrap();
        let got: Vec<_> = rows
            .iter()
            .map(|r| (r.day.0, r.time_slot, r.free))
            .collect();
        assert_eq!(got, vec![(100, 0, false), (100, 70, true), (102, 5, true)]);
        assert_eq!(a.state(3, Day(50), 1), SlotState::Free);
        assert_eq!(a.state(1, Day(100), -1), SlotState::UnknownSlot);
    }
}
