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
//!   by one conditional write (`UPDATE .. WHERE registration_id IS NULL`),
//!   which holds across every node sharing the database: a concurrent
//!   second update waits for the first to commit, re-checks the condition
//!   and finds the slot held; a batch's try-registers are one set-based
//!   statement (`slot_rows.rs`).
//!
//! Handlers, the notifier and the seed reach the booking tables only
//! through [`Booking`] (or, for the seed, the topic modules' functions over
//! a [`Store`]) and never ask which store it is.

mod in_memory;
pub mod messages;
pub mod notifications;
pub mod places;
pub mod registrations;
pub mod seed;
pub mod slot_rows;

use std::sync::Arc;

use super::availability::SlotState;
use super::model::{
    self, Day, MoveOutcome, Place, RegisterOutcome, SealedRegistration, SlotRef, EVENT_CANCELLED,
    EVENT_CONFIRMED,
};
use crate::store::{Columns, NewEvent, Sql, Store, StoreError, Tx, Writers};

pub use notifications::ParkedNotification;
pub use places::{PlaceSlots, SlotRow};

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

    /// A page of places in id order, and how many places there are.
    pub async fn list_places(&self, skip: i64, size: i64) -> Result<(Vec<Place>, i64), StoreError> {
        places::list(&self.store, skip, size).await
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
            "UPDATE booking_slots SET registration_id = $1
         WHERE place_id = $2 AND day = $3 AND time_slot = $4 AND registration_id IS NULL"
        );
    }
}
