//! In-memory availability index for the single-node SQLite store: which slots
//! exist, one bit each, and which are taken: for a place of one seat a slot
//! a bit each too (5,000,000 slots of 25 per day take ~3.2 MB: one 64-bit
//! word per day per array), for a place of several seats a byte per slot
//! counting the seats taken (~5 MB more for 5,000,000 slots, indexed by the
//! slot's rank among its day's slots).
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

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use super::model::{Day, Place, PlacePolicy, SEATS_MAX};
use super::persons::PersonSet;
use super::store::places::{place_row, ALL_PLACES};
use super::store::SlotRow;
use crate::store::{Columns, Conn, Sql, StoreError};

/// Places indexed at most (ids are dense from 1 when seeded or imported).
const PLACE_ID_MAX: i64 = 10_000_000;

/// Every slot that is offered (withdrawn ones, of seats 0, are not), in
/// key order.
static ALL_SLOTS: Sql = Sql::new(
    "SELECT place_id, day, time_slot FROM booking_slots WHERE seats > 0
     ORDER BY place_id, day, time_slot",
);
/// One place's offered slots, in key order.
static PLACE_SLOTS: Sql = Sql::new(
    "SELECT place_id, day, time_slot FROM booking_slots WHERE place_id = ?1 AND seats > 0
     ORDER BY day, time_slot",
);
static PLACE: Sql = Sql::new(concat!(
    crate::services::booking::store::places::select_place!(),
    " WHERE id = ?1"
));
static ALL_REGISTRATIONS: Sql =
    Sql::new("SELECT place_id, day, time_slot, person_key FROM booking_registrations");

/// How a place's taken seats are kept.
enum Seats {
    /// One seat a slot: a taken bit per slot, laid out as `exists`.
    One(Box<[AtomicU64]>),
    /// Several: the seats taken of each slot, at `day_start[day]` plus the
    /// slot's rank among its day's slots.
    Many {
        day_start: Box<[u32]>,
        held: Box<[AtomicU8]>,
    },
}

/// Where a slot's taken seats are.
enum SeatRef<'a> {
    Bit(&'a AtomicU64, u64),
    Count(&'a AtomicU8, u8),
}

impl SeatRef<'_> {
    fn held(&self) -> i32 {
        match self {
            SeatRef::Bit(w, b) => i32::from(w.load(Ordering::Acquire) & b != 0),
            SeatRef::Count(c, _) => i32::from(c.load(Ordering::Acquire)),
        }
    }
    fn seats(&self) -> i32 {
        match self {
            SeatRef::Bit(..) => 1,
            SeatRef::Count(_, seats) => i32::from(*seats),
        }
    }
    /// Takes a seat if one is left: the test-and-set that decides it.
    fn take(&self) -> bool {
        match self {
            SeatRef::Bit(w, b) => w.fetch_or(*b, Ordering::AcqRel) & b == 0,
            SeatRef::Count(c, seats) => c
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| {
                    (h < *seats).then_some(h + 1)
                })
                .is_ok(),
        }
    }
    /// Adds a held seat whatever is left (loading registrations).
    fn add(&self) {
        match self {
            SeatRef::Bit(w, b) => {
                w.fetch_or(*b, Ordering::AcqRel);
            }
            SeatRef::Count(c, _) => {
                let _ = c.fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| h.checked_add(1));
            }
        }
    }
    /// Gives a seat back.
    fn give_back(&self) {
        match self {
            SeatRef::Bit(w, b) => {
                w.fetch_and(!b, Ordering::AcqRel);
            }
            SeatRef::Count(c, _) => {
                let _ = c.fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| h.checked_sub(1));
            }
        }
    }
}

/// A place's days, `words_per_day` words each, in one allocation per kind:
/// a lookup touches the place, then one word of each array (one box per day
/// made every try-register chase two more pointers to random heap lines).
struct PlaceSlots {
    place: Place,
    /// Seats a slot, at most `SEATS_MAX`.
    seats: u8,
    first_day: i32,
    words_per_day: usize,
    exists: Box<[u64]>,
    taken: Seats,
}

impl PlaceSlots {
    fn day_count(&self) -> usize {
        self.exists
            .len()
            .checked_div(self.words_per_day)
            .unwrap_or(0)
    }
    fn day_index(&self, day: Day) -> Option<usize> {
        let i = usize::try_from(day.0.checked_sub(self.first_day)?).ok()?;
        (i < self.day_count()).then_some(i)
    }
    /// Where a slot's seats are, or why there is no such slot.
    fn seat(&self, day: Day, slot: i32) -> Result<SeatRef<'_>, SlotState> {
        let i = self.day_index(day).ok_or(SlotState::UnknownSlot)?;
        if slot < 0 {
            return Err(SlotState::UnknownSlot);
        }
        let (w, b) = ((slot / 64) as usize, 1u64 << (slot % 64));
        let words = &self.exists[i * self.words_per_day..(i + 1) * self.words_per_day];
        if w >= words.len() || words[w] & b == 0 {
            return Err(SlotState::UnknownSlot);
        }
        Ok(match &self.taken {
            Seats::One(taken) => SeatRef::Bit(&taken[i * self.words_per_day + w], b),
            Seats::Many { day_start, held } => {
                let rank = words[..w].iter().map(|x| x.count_ones()).sum::<u32>()
                    + (words[w] & (b - 1)).count_ones();
                SeatRef::Count(&held[(day_start[i] + rank) as usize], self.seats)
            }
        })
    }
    /// Slots of the place's first day: a capacity guess for a page of rows.
    fn slots_per_day_hint(&self) -> usize {
        self.exists[..self.words_per_day.min(self.exists.len())]
            .iter()
            .map(|w| w.count_ones() as usize)
            .sum::<usize>()
    }
    fn slot_count(&self) -> u64 {
        self.exists.iter().map(|w| u64::from(w.count_ones())).sum()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotState {
    UnknownPlace,
    UnknownSlot,
    /// Every seat is taken.
    Taken,
    Free,
}

pub struct Availability {
    /// Index = place id. A place is shared with the index it was loaded in
    /// until it is loaded again (`reloaded`).
    places: Vec<Option<Arc<PlaceSlots>>>,
    slots: u64,
    /// Person keys of the active registrations (see `person_of`), shared by
    /// an index and the ones loaded from it.
    persons: Arc<Mutex<PersonSet>>,
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

/// Collects a place's slots while loading.
struct PlaceBuilder {
    place: Place,
    first_day: i32,
    /// Per day, which slots exist.
    days: Vec<Vec<u64>>,
}

impl PlaceBuilder {
    fn set(&mut self, day: i32, slot: i32) {
        if self.days.is_empty() {
            self.first_day = day;
        }
        let i = (day - self.first_day) as usize;
        if self.days.len() <= i {
            self.days.resize_with(i + 1, Vec::new);
        }
        let w = (slot / 64) as usize;
        let d = &mut self.days[i];
        if d.len() <= w {
            d.resize(w + 1, 0);
        }
        d[w] |= 1 << (slot % 64);
    }

    /// Lays the days out at a fixed stride, with a seat count per slot
    /// (turned into bits by [`PlaceSlots::settle_seats`] where one seat a
    /// slot holds everyone).
    fn build(self) -> PlaceSlots {
        let words_per_day = self.days.iter().map(Vec::len).max().unwrap_or(0);
        let mut exists = vec![0u64; self.days.len() * words_per_day];
        let mut day_start = Vec::with_capacity(self.days.len());
        let mut n = 0u32;
        for (i, d) in self.days.iter().enumerate() {
            exists[i * words_per_day..i * words_per_day + d.len()].copy_from_slice(d);
            day_start.push(n);
            n += d.iter().map(|w| w.count_ones()).sum::<u32>();
        }
        let seats = u8::try_from(self.place.seats.clamp(1, SEATS_MAX)).unwrap_or(u8::MAX);
        PlaceSlots {
            place: self.place,
            seats,
            first_day: self.first_day,
            words_per_day,
            exists: exists.into_boxed_slice(),
            taken: Seats::Many {
                day_start: day_start.into_boxed_slice(),
                held: (0..n).map(|_| AtomicU8::new(0)).collect(),
            },
        }
    }
}

impl PlaceSlots {
    /// A place of one seat whose slots hold at most one registration each
    /// keeps a bit per slot instead of a count.
    fn settle_seats(mut self) -> PlaceSlots {
        let Seats::Many { day_start, held } = &self.taken else {
            return self;
        };
        if self.seats != 1 || held.iter().any(|h| h.load(Ordering::Relaxed) > 1) {
            return self;
        }
        let mut bits = vec![0u64; self.exists.len()];
        for (i, &start) in day_start.iter().enumerate() {
            let mut rank = start as usize;
            for w in 0..self.words_per_day {
                let mut e = self.exists[i * self.words_per_day + w];
                while e != 0 {
                    let b = e.trailing_zeros();
                    e &= e - 1;
                    if held[rank].load(Ordering::Relaxed) > 0 {
                        bits[i * self.words_per_day + w] |= 1 << b;
                    }
                    rank += 1;
                }
            }
        }
        self.taken = Seats::One(bits.into_iter().map(AtomicU64::new).collect());
        self
    }
}

impl Availability {
    /// Builds the index from the database (one scan in primary-key order),
    /// row by row as the statements answer them.
    pub async fn load(c: &Conn<'_>) -> Result<Availability, StoreError> {
        let mut builders: Vec<Option<PlaceBuilder>> = Vec::new();
        c.query(&ALL_PLACES, &[], |r| {
            let place = place_row(r)?;
            let i = place_index(place.id)?;
            if builders.len() <= i {
                builders.resize_with(i + 1, || None);
            }
            builders[i] = Some(PlaceBuilder {
                place,
                first_day: 0,
                days: Vec::new(),
            });
            Ok(())
        })
        .await?;
        c.query(&ALL_SLOTS, &[], |r| {
            if let Some(Some(b)) = usize::try_from(r.int(0)?)
                .ok()
                .and_then(|i| builders.get_mut(i))
            {
                b.set(r.int4(1)?, r.int4(2)?);
            }
            Ok(())
        })
        .await?;
        let built: Vec<Option<PlaceSlots>> = builders
            .into_iter()
            .map(|b| b.map(PlaceBuilder::build))
            .collect();
        // On SQLite the registrations are the truth about taken seats (see
        // `take` below) and about who holds one; the slots table only says
        // which slots exist.
        let mut persons = PersonSet::default();
        c.query(&ALL_REGISTRATIONS, &[], |r| {
            let place = usize::try_from(r.int(0)?)
                .ok()
                .and_then(|i| built.get(i))
                .and_then(Option::as_ref);
            let (day, slot) = (Day(r.int4(1)?), r.int4(2)?);
            if let Some(Ok(seat)) = place.map(|p| p.seat(day, slot)) {
                seat.add();
            }
            if let Some(key) = r.opt_bytes(3)?.filter(|k| k.len() >= 8) {
                persons.insert(person_of(&key));
            }
            Ok(())
        })
        .await?;
        let mut index = Availability {
            places: built
                .into_iter()
                .map(|p| p.map(|p| Arc::new(p.settle_seats())))
                .collect(),
            slots: 0,
            persons: Arc::new(Mutex::new(persons)),
        };
        index.slots = index.count_slots();
        Ok(index)
    }

    /// This index with the places `ids` loaded again from the database
    /// (their definition, slots and registrations), sharing every other
    /// place and the person set: run by the writer in the transaction that
    /// changed them, so no registration of theirs commits in between.
    pub async fn reloaded(&self, c: &Conn<'_>, ids: &[i64]) -> Result<Availability, StoreError> {
        let mut places = self.places.clone();
        let mut fresh: Vec<(usize, PlaceSlots)> = Vec::with_capacity(ids.len());
        for &id in ids {
            let Some(place) = c.query_opt(&PLACE, &[&id], |r| place_row(r)).await? else {
                continue;
            };
            let i = place_index(id)?;
            let mut b = PlaceBuilder {
                place,
                first_day: 0,
                days: Vec::new(),
            };
            c.query(&PLACE_SLOTS, &[&id], |r| {
                b.set(r.int4(1)?, r.int4(2)?);
                Ok(())
            })
            .await?;
            fresh.push((i, b.build()));
        }
        if !fresh.is_empty() {
            let at: HashMap<i64, usize> = fresh
                .iter()
                .enumerate()
                .map(|(k, (i, _))| (*i as i64, k))
                .collect();
            c.query(&ALL_REGISTRATIONS, &[], |r| {
                if let Some(&k) = at.get(&r.int(0)?) {
                    if let Ok(seat) = fresh[k].1.seat(Day(r.int4(1)?), r.int4(2)?) {
                        seat.add();
                    }
                }
                Ok(())
            })
            .await?;
        }
        for (i, p) in fresh {
            if places.len() <= i {
                places.resize_with(i + 1, || None);
            }
            places[i] = Some(Arc::new(p.settle_seats()));
        }
        let mut index = Availability {
            places,
            slots: 0,
            persons: self.persons.clone(),
        };
        index.slots = index.count_slots();
        Ok(index)
    }

    fn count_slots(&self) -> u64 {
        self.places.iter().flatten().map(|p| p.slot_count()).sum()
    }

    pub fn slots(&self) -> u64 {
        self.slots
    }

    fn place_slots(&self, id: i64) -> Option<&PlaceSlots> {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.places.get(i))
            .and_then(|p| p.as_deref())
    }

    pub fn place(&self, id: i64) -> Option<&Place> {
        self.place_slots(id).map(|p| &p.place)
    }

    /// Every place's id, in id order.
    pub fn place_ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.places
            .iter()
            .enumerate()
            .filter(|(_, p)| p.is_some())
            .map(|(i, _)| i as i64)
    }

    pub fn policy(&self, id: i64) -> Option<PlacePolicy> {
        self.place(id).map(Place::policy)
    }

    fn seat(&self, place_id: i64, day: Day, slot: i32) -> Result<SeatRef<'_>, SlotState> {
        self.place_slots(place_id)
            .ok_or(SlotState::UnknownPlace)?
            .seat(day, slot)
    }

    pub fn state(&self, place_id: i64, day: Day, slot: i32) -> SlotState {
        match self.seat(place_id, day, slot) {
            Err(missing) => missing,
            Ok(seat) if seat.held() >= seat.seats() => SlotState::Taken,
            Ok(_) => SlotState::Free,
        }
    }

    /// Seats taken of a slot (0 for a slot the index does not offer).
    pub fn held(&self, place_id: i64, day: Day, slot: i32) -> i32 {
        self.seat(place_id, day, slot).map_or(0, |s| s.held())
    }

    /// Takes a seat of a slot: an atomic test-and-set of its bit, or an
    /// atomic increment of its count below the seats. On the SQLite store
    /// this runs inside the single writer's transaction, which makes it the
    /// conditional write that decides the seat (the registration row is
    /// appended in the same transaction; see `store/in_memory.rs`).
    pub fn take(&self, place_id: i64, day: Day, slot: i32) -> SlotState {
        match self.seat(place_id, day, slot) {
            Err(missing) => missing,
            Ok(seat) if seat.take() => SlotState::Free,
            Ok(_) => SlotState::Taken,
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

    /// Gives back a seat of a slot (a cancel or a move committed, or a
    /// registration's batch did not).
    pub fn give_back(&self, place_id: i64, day: Day, slot: i32) {
        if let Ok(seat) = self.seat(place_id, day, slot) {
            seat.give_back();
        }
    }

    /// Takes every seat left of a place's day (the place closes that day):
    /// the seats this call took, per slot, for
    /// [`Availability::give_back_day`] should its command not commit. Run
    /// by the single writer.
    pub fn take_day(&self, place_id: i64, day: Day) -> Vec<(i32, u8)> {
        let mut took = Vec::new();
        if let Some(p) = self.place_slots(place_id) {
            p.each_slot(day, |slot, seat| {
                let mut n = 0u8;
                while seat.take() {
                    n += 1;
                }
                if n > 0 {
                    took.push((slot, n));
                }
                false
            });
        }
        took
    }

    /// Hands back what [`Availability::take_day`] took.
    pub fn give_back_day(&self, place_id: i64, day: Day, took: &[(i32, u8)]) {
        for &(slot, n) in took {
            for _ in 0..n {
                self.give_back(place_id, day, slot);
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
            p.each_slot(day, |time_slot, seat| {
                rows.push(SlotRow {
                    day,
                    time_slot,
                    seats: seat.seats(),
                    seats_left: seat.seats() - seat.held(),
                });
                false
            });
        }
        Some((&p.place, rows))
    }

    /// The first slot of a place from `from` on (within `days` days) with a
    /// seat left for which `bookable` holds: its day, time slot and seats
    /// left.
    pub fn first_free(
        &self,
        place_id: i64,
        from: Day,
        days: i32,
        bookable: impl Fn(Day, i32) -> bool,
    ) -> Option<(Day, i32, i32)> {
        let p = self.place_slots(place_id)?;
        for offset in 0..days {
            let day = from.plus(offset);
            let mut found = None;
            p.each_slot(day, |time_slot, seat| {
                let left = seat.seats() - seat.held();
                if left > 0 && bookable(day, time_slot) {
                    found = Some((day, time_slot, left));
                    return true;
                }
                false
            });
            if found.is_some() {
                return found;
            }
        }
        None
    }
}

impl PlaceSlots {
    /// Calls `f` with each slot of `day` in time order, until it answers
    /// `true`.
    fn each_slot(&self, day: Day, mut f: impl FnMut(i32, SeatRef<'_>) -> bool) {
        let Some(i) = self.day_index(day) else { return };
        for w in 0..self.words_per_day {
            let mut bits = self.exists[i * self.words_per_day + w];
            while bits != 0 {
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                let slot = (w as i32) * 64 + b as i32;
                if let Ok(seat) = self.seat(day, slot) {
                    if f(slot, seat) {
                        return;
                    }
                }
            }
        }
    }
}

fn place_index(id: i64) -> Result<usize, StoreError> {
    if !(1..=PLACE_ID_MAX).contains(&id) {
        return Err(StoreError::Internal(format!(
            "place id {id} is outside 1..={PLACE_ID_MAX}"
        )));
    }
    Ok(id as usize)
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
            "INSERT INTO booking_places (id, name, address, first_slot_minute, slot_minutes, seats)
                 VALUES (1, 'A', 'a', 480, 20, 1), (3, 'C', 'c', 480, 20, 2);
             INSERT INTO booking_slots (place_id, day, time_slot)
                 VALUES (1, 100, 0), (1, 100, 70), (1, 102, 5), (3, 50, 1), (3, 50, 2);
             INSERT INTO booking_slots (place_id, day, time_slot, seats, seats_left)
                 VALUES (1, 100, 3, 0, -1);
             INSERT INTO booking_registrations VALUES ('r1', x'00', 1, 100, 70, x'00', 0,
                 x'0102030405060708ffff');
             INSERT INTO booking_registrations VALUES ('r2', x'00', 3, 50, 2, x'00', 0, NULL);
             INSERT INTO booking_registrations VALUES ('r3', x'00', 1, 100, 3, x'00', 0, NULL);",
        );
        store.write(|tx| Box::pin(tx.batch(&ROWS))).await.unwrap();
        let a = store
            .read_blocking(|c| Box::pin(Availability::load(c)))
            .await
            .unwrap();
        // The stored person holds their place; others are free.
        let held = person_of(&[1, 2, 3, 4, 5, 6, 7, 8, 0xff, 0xff]);
        assert!(!a.take_person(held));
        // Another person: a key that differs within the set's 60 bits.
        assert!(a.take_person(held ^ (1 << 32)));
        a.release_person(held);
        assert!(a.take_person(held));
        assert_eq!(a.slots(), 5, "the withdrawn slot is not offered");
        assert_eq!(a.state(1, Day(100), 3), SlotState::UnknownSlot);
        assert_eq!(a.state(2, Day(100), 0), SlotState::UnknownPlace);
        assert_eq!(a.state(1, Day(101), 0), SlotState::UnknownSlot);
        assert_eq!(a.state(1, Day(100), 1), SlotState::UnknownSlot);
        assert_eq!(a.state(1, Day(100), 70), SlotState::Taken);
        assert_eq!(a.state(1, Day(100), 0), SlotState::Free);
        assert_eq!(a.take(1, Day(100), 0), SlotState::Free);
        assert_eq!(a.take(1, Day(100), 0), SlotState::Taken);
        assert_eq!(a.state(1, Day(100), 0), SlotState::Taken);
        a.give_back(1, Day(100), 70);
        let (_, rows) = a.place_slots_rows(1, Day(99), 5).unwrap();
        let got: Vec<_> = rows
            .iter()
            .map(|r| (r.day.0, r.time_slot, r.free()))
            .collect();
        assert_eq!(got, vec![(100, 0, false), (100, 70, true), (102, 5, true)]);
        assert_eq!(a.state(1, Day(100), -1), SlotState::UnknownSlot);

        // Two seats: slot 2 holds one registration, slot 1 none.
        assert_eq!(a.held(3, Day(50), 2), 1);
        assert_eq!(a.take(3, Day(50), 2), SlotState::Free);
        assert_eq!(a.take(3, Day(50), 2), SlotState::Taken);
        assert_eq!(a.take(3, Day(50), 1), SlotState::Free);
        assert_eq!(a.state(3, Day(50), 1), SlotState::Free);
        let (_, rows) = a.place_slots_rows(3, Day(50), 1).unwrap();
        let got: Vec<_> = rows
            .iter()
            .map(|r| (r.time_slot, r.seats, r.seats_left))
            .collect();
        assert_eq!(got, vec![(1, 2, 1), (2, 2, 0)]);
        a.give_back(3, Day(50), 2);
        assert_eq!(a.state(3, Day(50), 2), SlotState::Free);
        assert_eq!(
            a.first_free(3, Day(49), 3, |_, s| s > 1),
            Some((Day(50), 2, 1))
        );
        assert_eq!(a.first_free(3, Day(49), 3, |_, _| false), None);
    }
}
