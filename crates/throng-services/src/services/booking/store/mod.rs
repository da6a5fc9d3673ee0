//! Booking storage, each operation written once against the store's seam
//! (`crate::store::seam`): places and slots read from the tables
//! (`places.rs`), registrations (`registrations.rs`), parked confirmations
//! (`notifications.rs`) and the seed's bulk load (`seed.rs`).
//!
//! What genuinely differs between stores is how a slot is decided, a named
//! strategy ([`Slots`]) chosen once from [`Store::writers`] when [`Booking`]
//! is opened:
//!
//! - one process writes (SQLite): the availability index in the writer's
//!   memory decides slots and persons (`in_memory.rs`; see
//!   `availability.rs` for why), and serves the slot reads;
//! - writers are shared (PostgreSQL, several nodes): the slot's row decides
//!   by one conditional write (`UPDATE .. SET seats_left = seats_left - 1
//!   WHERE seats_left > 0`), which holds across every node sharing the
//!   database: a concurrent second update waits for the first to commit,
//!   re-checks the condition and finds the last seat gone; a batch's try-registers are one set-based
//!   statement (`slot_rows.rs`).
//!
//! Handlers, the notifier and the seed reach the booking tables only
//! through [`Booking`] (or, for the seed, the topic modules' functions over
//! a [`Store`]) and never ask which store it is.

mod in_memory;
pub mod messages;
pub mod notifications;
pub mod place_defs;
pub mod places;
pub mod registrations;
pub mod seed;
pub mod slot_rows;

use std::sync::Arc;

use super::availability::SlotState;
use super::model::{
    self, BookingClock, Day, MoveOutcome, Place, PlacePolicy, RegisterOutcome, SealedRegistration,
    SlotRef, EVENT_CANCELLED, EVENT_CONFIRMED,
};
use super::places::{ChangeRefused, ChangeSummary, PlaceChange};
use crate::store::{Columns, NewEvent, Param, Sql, Store, StoreError, Tx, Writers};

pub use notifications::ParkedNotification;
pub use places::{PlaceSearch, PlaceSlots, SlotRow};

/// Places an earliest-slots search looks at at most.
pub const EARLIEST_PLACES_MAX: i64 = 10_000;

/// Each place's first slot with a seat left at or after (day, time slot)
/// given per place (where writers are shared; the index answers it in
/// memory otherwise).
static FIRST_FREE: Sql = Sql::new(
    "SELECT r.place_id, f.day, f.time_slot, f.seats, f.seats_left
       FROM unnest(?1::BIGINT[], ?2::INT[], ?3::INT[], ?4::INT[]) AS r(place_id, day, slot, last_day)
      CROSS JOIN LATERAL (
        SELECT s.day, s.time_slot, s.seats, s.seats_left FROM booking_slots s
         WHERE s.place_id = r.place_id AND s.day BETWEEN r.day AND r.last_day
           AND (s.day > r.day OR s.time_slot >= r.slot)
           AND s.seats_left > 0 AND s.seats > 0
         ORDER BY s.day, s.time_slot LIMIT 1) f",
);

/// A place's earliest slot with a seat left.
#[derive(Clone, Debug)]
pub struct EarliestSlot {
    pub place: Place,
    pub day: Day,
    pub time_slot: i32,
    pub seats: i32,
    pub seats_left: i32,
}

/// How slots are decided: the named strategy of each way a store is
/// written (see the module's documentation).
enum Slots {
    /// One process writes: the availability index decides, in memory.
    InMemory(in_memory::InMemorySlots),
    /// Writers are shared: the slot's row decides.
    Rows(slot_rows::SlotRows),
}

/// The booking service's storage. Every method is one operation of the
/// service; a write is one command of the store's group commit. Cheap to
/// clone.
#[derive(Clone)]
pub struct Booking {
    store: Store,
    slots: Arc<Slots>,
}

impl Booking {
    /// The booking storage of `store`, with the strategy its writers call
    /// for (loading the availability index where one process writes).
    pub async fn open(store: &Store) -> Result<Booking, StoreError> {
        let slots = match store.writers() {
            Writers::OneProcess => Slots::InMemory(in_memory::InMemorySlots::load(store).await?),
            Writers::Shared => Slots::Rows(slot_rows::SlotRows),
        };
        Ok(Booking {
            store: store.clone(),
            slots: Arc::new(slots),
        })
    }

    /// A page of the places matching `search` in id order, after id `after`
    /// and `skip` more, and how many match.
    pub async fn search_places(
        &self,
        search: PlaceSearch,
        after: i64,
        skip: i64,
        size: i64,
    ) -> Result<(Vec<Place>, i64), StoreError> {
        places::search(&self.store, search, after, skip, size).await
    }

    /// The regions and services a place search can be narrowed by, each
    /// with its count of places.
    #[allow(clippy::type_complexity)]
    pub async fn place_filters(
        &self,
    ) -> Result<(Vec<(String, i64)>, Vec<(String, i64)>), StoreError> {
        places::filters(&self.store).await
    }

    /// A place by id, from the table.
    pub async fn place_fresh(&self, id: i64) -> Result<Option<Place>, StoreError> {
        places::place(&self.store, id).await
    }

    /// A place's days of other hours from `from` on (hours '' for closed).
    pub async fn own_days(&self, id: i64, from: Day) -> Result<Vec<(Day, String)>, StoreError> {
        place_defs::own_days(&self.store, id, from).await
    }

    /// A place by its code.
    pub async fn place_by_code(&self, code: &str) -> Result<Option<Place>, StoreError> {
        places::place_by_code(&self.store, code).await
    }

    /// What the booking rules need of a place.
    pub async fn policy(&self, id: i64) -> Result<Option<PlacePolicy>, StoreError> {
        match &*self.slots {
            Slots::InMemory(m) => Ok(m.policy(id)),
            Slots::Rows(_) => Ok(places::place(&self.store, id).await?.map(|p| p.policy())),
        }
    }

    /// The earliest slots that can be booked now at the places matching
    /// `search` (at most [`EARLIEST_PLACES_MAX`] places looked at), one per
    /// place, soonest first, at most `limit`.
    pub async fn earliest(
        &self,
        search: PlaceSearch,
        limit: usize,
        days: i32,
        clock: BookingClock,
        now_ms: i64,
    ) -> Result<Vec<EarliestSlot>, StoreError> {
        let (places, _) = places::search(&self.store, search, 0, 0, EARLIEST_PLACES_MAX).await?;
        // Per place, the first slot not passed (with its notice): today at
        // the place and the first time slot starting later.
        let first: Vec<(Day, i32)> = places
            .iter()
            .map(|p| {
                let policy = p.policy();
                let earliest = policy.clock(clock, now_ms).earliest;
                let second = earliest.second_of_day - policy.first_slot_minute * 60;
                let slot = if second < 0 {
                    0
                } else {
                    second / (policy.slot_minutes.max(1) * 60) + 1
                };
                (earliest.today, slot)
            })
            .collect();
        let mut found: Vec<EarliestSlot> = match &*self.slots {
            Slots::InMemory(m) => {
                let wanted: Vec<(i64, Day, i32)> = places
                    .iter()
                    .zip(&first)
                    .map(|(p, &(day, slot))| (p.id, day, slot))
                    .collect();
                m.first_free(&wanted, days + 1)
                    .into_iter()
                    .map(|(place, day, time_slot, seats_left)| EarliestSlot {
                        seats: place.seats,
                        place,
                        day,
                        time_slot,
                        seats_left,
                    })
                    .collect()
            }
            Slots::Rows(_) => {
                let ids: Vec<i64> = places.iter().map(|p| p.id).collect();
                let from_days: Vec<i64> = first.iter().map(|f| i64::from(f.0 .0)).collect();
                let from_slots: Vec<i64> = first.iter().map(|f| i64::from(f.1)).collect();
                let last_days: Vec<i64> = first.iter().map(|f| i64::from(f.0 .0 + days)).collect();
                let rows = self
                    .store
                    .read(move |c| {
                        Box::pin(async move {
                            let params: [&dyn Param; 4] =
                                [&ids, &from_days, &from_slots, &last_days];
                            c.query(&FIRST_FREE, &params, |r| {
                                Ok((
                                    r.int(0)?,
                                    Day(r.int4(1)?),
                                    r.int4(2)?,
                                    r.int4(3)?,
                                    r.int4(4)?,
                                ))
                            })
                            .await
                        })
                    })
                    .await?;
                let by_id: std::collections::HashMap<i64, &Place> =
                    places.iter().map(|p| (p.id, p)).collect();
                rows.into_iter()
                    .filter_map(|(id, day, time_slot, seats, seats_left)| {
                        Some(EarliestSlot {
                            place: (*by_id.get(&id)?).clone(),
                            day,
                            time_slot,
                            seats,
                            seats_left,
                        })
                    })
                    .collect()
            }
        };
        found.sort_by_key(|e| {
            let policy = e.place.policy();
            (
                policy.epoch_ms(clock, e.day, policy.start_minute(e.time_slot)),
                e.place.id,
            )
        });
        found.truncate(limit);
        Ok(found)
    }

    /// Applies changes to places in one transaction apart from the
    /// registrations' batches, making their slots again for their horizon
    /// (where one process writes, the availability index takes the changed
    /// places at once, in the same writer command). A refusal writes
    /// nothing.
    pub async fn change_places(
        &self,
        changes: Vec<PlaceChange>,
        clock: BookingClock,
    ) -> Result<Result<ChangeSummary, ChangeRefused>, StoreError> {
        let changes = Arc::new(changes);
        let now_ms = crate::base::clock::now_ms();
        match &*self.slots {
            Slots::InMemory(m) => {
                m.change_places(&self.store, move |tx, index| {
                    let changes = changes.clone();
                    Box::pin(async move {
                        let current = index.load_full();
                        let held = |p: i64, d: Day, s: i32| current.held(p, d, s);
                        let from = place_defs::HeldFrom::Index(&held);
                        Ok(
                            match place_defs::apply(tx, &changes, &from, clock, now_ms).await? {
                                Ok((summary, changed)) => (Ok(summary), changed),
                                Err(refused) => (Err(refused), Vec::new()),
                            },
                        )
                    })
                })
                .await
            }
            Slots::Rows(_) => {
                self.store
                    .write_apart(move |tx| {
                        let changes = changes.clone();
                        Box::pin(async move {
                            let from = place_defs::HeldFrom::Rows;
                            Ok(place_defs::apply(tx, &changes, &from, clock, now_ms)
                                .await?
                                .map(|(summary, _)| summary))
                        })
                    })
                    .await
            }
        }
    }

    /// A place by id.
    pub async fn place(&self, id: i64) -> Result<Option<Place>, StoreError> {
        match &*self.slots {
            Slots::InMemory(m) => Ok(m.place(id)),
            Slots::Rows(_) => places::place(&self.store, id).await,
        }
    }

    /// Renders a place's slots for `days` from `from` with `render`; `None`
    /// for an unknown place.
    pub async fn with_place_slots<R>(
        &self,
        place_id: i64,
        from: Day,
        days: i32,
        render: impl FnOnce(&Place, &[SlotRow]) -> R,
    ) -> Result<Option<R>, StoreError> {
        match &*self.slots {
            Slots::InMemory(m) => Ok(m.with_place_slots(place_id, from, days, render)),
            Slots::Rows(_) => Ok(places::place_slots(&self.store, place_id, from, days)
                .await?
                .map(|(place, rows)| render(&place, &rows))),
        }
    }

    /// What is already known of a slot without asking the writer (`None`
    /// where nothing is): under a crowd most attempts are for slots that
    /// are already gone, and answering those skips the writer.
    pub fn known_state(&self, place_id: i64, day: Day, slot: i32) -> Option<SlotState> {
        match &*self.slots {
            Slots::InMemory(m) => Some(m.state(place_id, day, slot)),
            Slots::Rows(_) => None,
        }
    }

    /// Takes the slot for `reg` if it is free and stores the registration
    /// with its `RegistrationConfirmed` event.
    pub async fn try_register(
        &self,
        reg: SealedRegistration,
    ) -> Result<RegisterOutcome, StoreError> {
        let event = confirmed_event(&reg);
        match &*self.slots {
            Slots::InMemory(m) => m.try_register(&self.store, reg, event).await,
            Slots::Rows(r) => r.try_register(&self.store, reg, event).await,
        }
    }

    /// A registration by id.
    pub async fn registration(&self, id: &str) -> Result<Option<SealedRegistration>, StoreError> {
        registrations::get(&self.store, id).await
    }

    /// Deletes a registration and frees its slot, if the access code
    /// matches, with its `RegistrationCancelled` event; the check and the
    /// delete are one write, so a code cannot race a cancel. The slot is
    /// free before this returns.
    pub async fn cancel(&self, id: &str, access_code: &str) -> Result<CancelOutcome, StoreError> {
        let change = registrations::Change {
            id: id.to_string(),
            access_code: access_code.to_string(),
        };
        match &*self.slots {
            Slots::InMemory(m) => m.cancel(&self.store, change).await,
            Slots::Rows(r) => r.cancel(&self.store, change).await,
        }
    }

    /// Moves registration `id` to `to` if `access_code` matches: in one
    /// transaction the new slot is taken by the same decision as a
    /// registration's (one winner per slot), the old slot freed, the
    /// registration updated and `RegistrationMoved` appended. A move that
    /// misses its slot changes nothing. `to_person_key` is the
    /// registration's blind-index key under the one-registration rule for
    /// the new day.
    pub async fn move_registration(
        &self,
        id: &str,
        access_code: &str,
        to: SlotRef,
        to_person_key: Option<Vec<u8>>,
    ) -> Result<MoveOutcome, StoreError> {
        let change = registrations::Change {
            id: id.to_string(),
            access_code: access_code.to_string(),
        };
        match &*self.slots {
            Slots::InMemory(m) => m.move_to(&self.store, change, to, to_person_key).await,
            Slots::Rows(r) => r.move_to(&self.store, change, to, to_person_key).await,
        }
    }

    /// Closes a place's day (`backoffice::store::close_day_tx`): its
    /// slots can no longer be taken and its registrations are cancelled,
    /// in one write; the registrations cancelled, or `None` when the day
    /// was closed already.
    pub async fn close_day(
        &self,
        place_id: i64,
        day: Day,
        actor: super::backoffice::access::Actor,
        at_ms: i64,
    ) -> Result<Option<Vec<SealedRegistration>>, StoreError> {
        let actor = Arc::new(actor);
        let body = command(move |tx| {
            let actor = actor.clone();
            Box::pin(async move {
                super::backoffice::store::close_day_tx(tx, place_id, day, &actor, at_ms).await
            })
        });
        match &*self.slots {
            Slots::InMemory(m) => m.close_day(&self.store, place_id, day, body).await,
            Slots::Rows(_) => self.store.write(body).await,
        }
    }

    /// Keeps a confirmation the notifier gave up on (once per event
    /// position).
    pub async fn park_notification(&self, p: ParkedNotification) -> Result<(), StoreError> {
        notifications::park(&self.store, p).await
    }

    /// The oldest `limit` parked confirmations and how many there are.
    pub async fn parked_notifications(
        &self,
        limit: i64,
    ) -> Result<(Vec<ParkedNotification>, i64), StoreError> {
        notifications::parked(&self.store, limit).await
    }

    /// Booking's counts, and where `notifier_consumer` is in the event log.
    pub async fn stats(&self, notifier_consumer: &str) -> Result<BookingStats, StoreError> {
        let notifier_position = self.store.consumer_position(notifier_consumer).await?;
        let counts = counts(&self.store).await?;
        Ok(BookingStats {
            places: counts.places,
            slots: counts.slots,
            registrations: counts.registrations,
            last_event_position: counts.last_event_position,
            notifier_position,
        })
    }

    /// Where the strategy keeps what a seed changes in memory (the
    /// availability index), a task that loads it again when another
    /// process seeds the store (see `in_memory.rs`).
    pub fn spawn_seed_watcher(&self) -> Option<tokio::task::JoinHandle<()>> {
        match &*self.slots {
            Slots::InMemory(m) => Some(m.spawn_seed_watcher(&self.store)),
            Slots::Rows(_) => None,
        }
    }
}

/// A write command as the store takes it (names the closure's
/// higher-ranked signature where it is built apart from the call).
fn command<T, F>(f: F) -> F
where
    F: for<'a> Fn(&'a Tx<'a>) -> crate::store::StoreFuture<'a, T>,
{
    f
}

/// What a cancellation did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelOutcome {
    /// Cancelled; the slot it held is free again.
    Cancelled,
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

/// What [`COUNTS`] reads.
struct BookingCounts {
    places: i64,
    slots: i64,
    registrations: i64,
    last_event_position: i64,
}

static COUNTS: Sql = Sql::new(
    "SELECT (SELECT COUNT(*) FROM booking_places),
            (SELECT COUNT(*) FROM booking_slots),
            (SELECT COUNT(*) FROM booking_registrations),
            (SELECT COALESCE(MAX(position), 0) FROM events)",
);

/// Places, slots, registrations and the event log's last position, in one
/// statement.
async fn counts(store: &Store) -> Result<BookingCounts, StoreError> {
    store
        .read(|c| {
            Box::pin(c.query_one(&COUNTS, &[], |r| {
                Ok(BookingCounts {
                    places: r.int(0)?,
                    slots: r.int(1)?,
                    registrations: r.int(2)?,
                    last_event_position: r.int(3)?,
                })
            }))
        })
        .await
}

/// The event of a registration that took its slot. Built by the caller's
/// task, not in the write command: the writer is the bottleneck, so it only
/// runs SQL.
fn confirmed_event(reg: &SealedRegistration) -> NewEvent {
    NewEvent::json(
        model::stream_of(&reg.id),
        EVENT_CONFIRMED,
        &reg.event_payload(),
    )
}

fn cancelled_event(reg: &SealedRegistration) -> NewEvent {
    NewEvent::json(
        model::stream_of(&reg.id),
        EVENT_CANCELLED,
        &reg.event_payload(),
    )
}

fn moved_event(reg: &SealedRegistration, to: SlotRef) -> NewEvent {
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

/// The slot a registration holds.
fn slot_of(reg: &SealedRegistration) -> SlotRef {
    SlotRef {
        place_id: reg.place_id,
        day: reg.day,
        time_slot: reg.time_slot,
    }
}

/// Why a slot was missed, from how many places and slots its ids name.
fn miss_outcome(places: i64, slots: i64) -> RegisterOutcome {
    match (places, slots) {
        (0, _) => RegisterOutcome::PlaceNotFound,
        (_, 0) => RegisterOutcome::SlotNotFound,
        _ => RegisterOutcome::SlotTaken,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn statements_take_postgres_placeholders() {
        assert_eq!(
            super::slot_rows::TAKE_SLOT.postgres(),
            "UPDATE booking_slots SET seats_left = seats_left - 1
         WHERE place_id = $1 AND day = $2 AND time_slot = $3 AND seats_left > 0"
        );
    }
}
