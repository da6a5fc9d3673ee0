//! Booking storage: the operations the service needs ([`BookingStore`]),
//! implemented once per dialect (`sqlite.rs`, `postgres.rs`) and chosen
//! once, from the [`Store`], by [`open`]. The service state (and through it
//! the handlers), the notifier, the seed and the bench's baseline reach the
//! booking tables only through an `Arc<dyn BookingStore>` and never ask
//! which store it is: what differs between stores (the availability index
//! kept in memory and its reload, how a slot is decided, the bulk load of a
//! seed, the naive design's statement) is a method here.
//!
//! On SQLite (one process, one writer) a slot is decided by the
//! availability index's test-and-set inside the writer's transaction
//! (`availability.rs`). On PostgreSQL (several nodes) it is decided by one
//! conditional write (`UPDATE .. WHERE registration_id IS NULL`), which
//! holds across every node sharing the database: a concurrent second
//! update waits for the first to commit, re-checks the condition and finds
//! the slot held.
//!
//! SQL that is the same in both dialects is written once below, with
//! SQLite's placeholders (`?1`, turned into `$1` for PostgreSQL by
//! [`crate::store::pg_placeholders`]); rows of one shape are mapped once
//! ([`Columns`]).

pub mod postgres;
pub mod sqlite;

use std::sync::Arc;

use arc_swap::ArcSwap;
use futures::future::BoxFuture;
use indicatif::ProgressBar;

use super::availability::Availability;
use super::model::{
    self, Day, MoveOutcome, Place, RegisterOutcome, SealedRegistration, SlotRef, EVENT_CANCELLED,
    EVENT_CONFIRMED,
};
use super::seed::SeedBookingArgs;
use crate::store::{Columns, NewEvent, Store, StoreError};

/// The in-memory availability index as the service state holds it. Write
/// commands read it when they run (not when they were sent), so an index
/// swapped in by a writer command is the one every later command decides
/// on.
pub type AvailabilityHandle = Arc<ArcSwap<Availability>>;

/// The booking service's storage. Every method is one operation of the
/// service; a write is one command of the store's group commit unless said
/// otherwise. Where the availability index is kept, the writes that take a
/// slot decide on `index` and update it inside the writer.
pub trait BookingStore: Send + Sync {
    /// A page of places in id order, and how many places there are.
    fn list_places(
        &self,
        skip: i64,
        size: i64,
    ) -> BoxFuture<'_, Result<(Vec<Place>, i64), StoreError>>;

    /// A place by id, from the table.
    fn place(&self, id: i64) -> BoxFuture<'_, Result<Option<Place>, StoreError>>;

    /// A place and its slots from `from` for `days` days, in one read of
    /// the tables; an error where slots are read from the availability
    /// index instead.
    fn place_slots(
        &self,
        place_id: i64,
        from: Day,
        days: i32,
    ) -> BoxFuture<'_, Result<Option<PlaceSlots>, StoreError>>;

    /// The availability index, loaded from the tables, where this store
    /// keeps one in memory (one writer in one process, which sees every
    /// write; see `availability.rs`); `None` where nodes share the store
    /// and read slots from it.
    fn load_availability(&self) -> BoxFuture<'_, Result<Option<Availability>, StoreError>>;

    /// Loads the index again and swaps it into `handle`, both inside one
    /// writer command: no registration can commit between the read and the
    /// swap (it would be missing from the new index, its slot free to book
    /// twice), and every command after it decides on the new index. Writes
    /// wait for the load (seconds for millions of slots). The slots indexed;
    /// an error where no index is kept.
    fn reload_availability(
        &self,
        handle: AvailabilityHandle,
    ) -> BoxFuture<'_, Result<u64, StoreError>>;

    /// Takes the slot for `reg` if it is free and stores the registration
    /// with its `RegistrationConfirmed` event. Where an index is kept,
    /// `index` decides the slot and the person (see `sqlite.rs`); elsewhere
    /// the slot's row does (see `postgres.rs`).
    fn try_register(
        &self,
        index: Option<AvailabilityHandle>,
        reg: SealedRegistration,
    ) -> BoxFuture<'_, Result<RegisterOutcome, StoreError>>;

    /// A registration by id.
    fn registration(
        &self,
        id: &str,
    ) -> BoxFuture<'_, Result<Option<SealedRegistration>, StoreError>>;

    /// Deletes a registration and frees its slot's row where slots have
    /// rows, if the access code matches, with its `RegistrationCancelled`
    /// event; the check and the delete are one write, so a code cannot race
    /// a cancel. The index (where kept) is the caller's to update once this
    /// committed.
    fn cancel(
        &self,
        id: &str,
        access_code: &str,
    ) -> BoxFuture<'_, Result<CancelOutcome, StoreError>>;

    /// Moves registration `id` to `to` if `access_code` matches: in one
    /// transaction the new slot is taken by the same decision as a
    /// registration's (one winner per slot), the old slot freed, the
    /// registration updated and `RegistrationMoved` appended; `index` (where
    /// kept) follows before this returns. A move that misses its slot
    /// changes nothing.
    fn move_registration(
        &self,
        index: Option<AvailabilityHandle>,
        id: &str,
        access_code: &str,
        to: SlotRef,
        to_person_key: Option<Vec<u8>>,
    ) -> BoxFuture<'_, Result<MoveOutcome, StoreError>>;

    /// Places, slots, registrations and the event log's last position, in
    /// one statement.
    fn counts(&self) -> BoxFuture<'_, Result<BookingCounts, StoreError>>;

    /// Keeps a confirmation the notifier gave up on (once per event
    /// position).
    fn park_notification(&self, p: ParkedNotification) -> BoxFuture<'_, Result<(), StoreError>>;

    /// The oldest `limit` parked confirmations and how many there are, read
    /// in one statement (one snapshot): a count and a list read apart could
    /// disagree while the notifier parks one between them.
    fn parked_notifications(
        &self,
        limit: i64,
    ) -> BoxFuture<'_, Result<(Vec<ParkedNotification>, i64), StoreError>>;

    /// Replaces the places and slots (and, with `--force`, deletes every
    /// registration) with `args`' places x days x slots from `from`, in bulk
    /// and in chunks of places, outside the writer (`seed.rs`).
    fn seed_slots<'a>(
        &'a self,
        args: &'a SeedBookingArgs,
        from: Day,
        bar: &'a ProgressBar,
    ) -> BoxFuture<'a, anyhow::Result<()>>;

    /// The naive design's try-register (`bench/baseline.rs`): one
    /// conditional `UPDATE` of the slot for `id`, in autocommit, on
    /// connections of its own (opened on first use); the rows updated.
    fn naive_take_slot<'a>(
        &'a self,
        id: &'a str,
        slot: SlotRef,
    ) -> BoxFuture<'a, Result<u64, StoreError>>;
}

/// The booking storage of `store`.
pub fn open(store: &Store) -> Arc<dyn BookingStore> {
    store.choose(
        |s| Arc::new(sqlite::SqliteBooking::new(s.clone())) as Arc<dyn BookingStore>,
        |p| Arc::new(postgres::PgBooking::new(p.clone())),
    )
}

/// One time slot of one day, as the slot query returns it.
#[derive(Clone, Debug)]
pub struct SlotRow {
    pub day: Day,
    pub time_slot: i32,
    pub free: bool,
}

/// A place and its slots over a range of days.
pub type PlaceSlots = (Place, Vec<SlotRow>);

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

/// What [`BookingStore::counts`] reads.
#[derive(Clone, Copy, Debug)]
pub struct BookingCounts {
    pub places: i64,
    pub slots: i64,
    pub registrations: i64,
    pub last_event_position: i64,
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

/// Booking's counts, and where `notifier_consumer` is in the event log.
pub async fn stats(
    store: &Store,
    storage: &dyn BookingStore,
    notifier_consumer: &str,
) -> Result<BookingStats, StoreError> {
    let notifier_position = store.consumer_position(notifier_consumer).await?;
    let counts = storage.counts().await?;
    Ok(BookingStats {
        places: counts.places,
        slots: counts.slots,
        registrations: counts.registrations,
        last_event_position: counts.last_event_position,
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

/// SQL the same in both dialects.
mod sql {
    pub const LIST_PLACES: &str = "SELECT id, name, address, first_slot_minute, slot_minutes
         FROM booking_places ORDER BY id LIMIT ?1 OFFSET ?2";
    pub const COUNT_PLACES: &str = "SELECT COUNT(*) FROM booking_places";
    pub const PLACE: &str = "SELECT id, name, address, first_slot_minute, slot_minutes
         FROM booking_places WHERE id = ?1";
    pub const REGISTRATION: &str =
        "SELECT id, access_hash, place_id, day, time_slot, person_sealed, created_at_ms, person_key
         FROM booking_registrations WHERE id = ?1";
    pub const DELETE_REGISTRATION: &str = "DELETE FROM booking_registrations WHERE id = ?1";
    pub const MOVE_REGISTRATION: &str =
        "UPDATE booking_registrations SET place_id = ?2, day = ?3, time_slot = ?4, person_key = ?5
         WHERE id = ?1";
    /// The conditional write that takes a free slot for registration ?1.
    pub const TAKE_SLOT: &str = "UPDATE booking_slots SET registration_id = ?1
         WHERE place_id = ?2 AND day = ?3 AND time_slot = ?4 AND registration_id IS NULL";
    pub const COUNTS: &str = "SELECT (SELECT COUNT(*) FROM booking_places),
                              (SELECT COUNT(*) FROM booking_slots),
                              (SELECT COUNT(*) FROM booking_registrations),
                              (SELECT COALESCE(MAX(position), 0) FROM events)";
    pub const PARK_NOTIFICATION: &str = "INSERT INTO booking_notifications_parked
            (position, registration_id, reason, attempts, parked_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (position) DO NOTHING";
    pub const PARKED_NOTIFICATIONS: &str =
        "SELECT position, registration_id, reason, attempts, parked_at_ms,
                (SELECT COUNT(*) FROM booking_notifications_parked)
         FROM booking_notifications_parked ORDER BY position LIMIT ?1";
    /// What a forced re-seed deletes, in one transaction.
    pub const DELETE_BOOKING_DATA: &str =
        "DELETE FROM booking_slots; DELETE FROM booking_registrations; DELETE FROM booking_places;";
}

/// A row of [`sql::PLACE`] or [`sql::LIST_PLACES`].
fn place_row(r: &impl Columns) -> Result<Place, StoreError> {
    Ok(Place {
        id: r.int(0)?,
        name: r.text(1)?,
        address: r.text(2)?,
        first_slot_minute: r.int4(3)?,
        slot_minutes: r.int4(4)?,
    })
}

/// A row of [`sql::REGISTRATION`].
fn registration_row(r: &impl Columns) -> Result<SealedRegistration, StoreError> {
    Ok(SealedRegistration {
        id: r.text(0)?,
        access_hash: r.bytes(1)?,
        place_id: r.int(2)?,
        day: Day(r.int4(3)?),
        time_slot: r.int4(4)?,
        person_sealed: r.bytes(5)?,
        created_at_ms: r.int(6)?,
        person_key: r.opt_bytes(7)?,
    })
}

/// A row of [`sql::COUNTS`].
fn counts_row(r: &impl Columns) -> Result<BookingCounts, StoreError> {
    Ok(BookingCounts {
        places: r.int(0)?,
        slots: r.int(1)?,
        registrations: r.int(2)?,
        last_event_position: r.int(3)?,
    })
}

/// A row of [`sql::PARKED_NOTIFICATIONS`]: the confirmation and how many
/// are parked.
fn parked_row(r: &impl Columns) -> Result<(ParkedNotification, i64), StoreError> {
    Ok((
        ParkedNotification {
            position: r.int(0)?,
            registration_id: r.text(1)?,
            reason: r.text(2)?,
            attempts: r.int(3)?,
            parked_at_ms: r.int(4)?,
        },
        r.int(5)?,
    ))
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

/// What a cancel of `reg` answers.
fn cancelled(reg: &SealedRegistration) -> CancelOutcome {
    CancelOutcome::Cancelled {
        place_id: reg.place_id,
        day: reg.day,
        time_slot: reg.time_slot,
        person: person_of_reg(reg),
    }
}

/// A registration's person key in the availability index, if it has one.
fn person_of_reg(reg: &SealedRegistration) -> Option<u64> {
    reg.person_key
        .as_deref()
        .filter(|k| k.len() >= 8)
        .map(super::availability::person_of)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_sql_takes_postgres_placeholders() {
        assert_eq!(
            crate::store::pg_placeholders(sql::TAKE_SLOT),
            "UPDATE booking_slots SET registration_id = $1
         WHERE place_id = $2 AND day = $3 AND time_slot = $4 AND registration_id IS NULL"
        );
    }
}
