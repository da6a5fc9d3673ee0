//! Places and their slots, read from the tables.

use super::super::model::{Day, Place};
use crate::store::{Columns, Param, Sql, Store, StoreError};

/// One time slot of one day, as the slot query returns it.
#[derive(Clone, Debug)]
pub struct SlotRow {
    pub day: Day,
    pub time_slot: i32,
    pub free: bool,
}

/// A place and its slots over a range of days.
pub type PlaceSlots = (Place, Vec<SlotRow>);

/// Every place, in id order (the availability index's load).
pub static ALL_PLACES: Sql = Sql::new(
    "SELECT id, name, address, first_slot_minute, slot_minutes FROM booking_places ORDER BY id",
);
static LIST_PLACES: Sql = Sql::new(
    "SELECT id, name, address, first_slot_minute, slot_minutes
     FROM booking_places ORDER BY id LIMIT ?1 OFFSET ?2",
);
static COUNT_PLACES: Sql = Sql::new("SELECT COUNT(*) FROM booking_places");
static PLACE: Sql = Sql::new(
    "SELECT id, name, address, first_slot_minute, slot_minutes
     FROM booking_places WHERE id = ?1",
);
/// A place's slots over a range of days, where slots' rows say which are
/// taken (see `slot_rows.rs`).
static SLOTS: Sql = Sql::new(
    "SELECT day, time_slot, registration_id IS NULL FROM booking_slots
     WHERE place_id = ?1 AND day BETWEEN ?2 AND ?3 ORDER BY day, time_slot",
);

/// A row of [`PLACE`], [`LIST_PLACES`] or [`ALL_PLACES`].
pub fn place_row(r: &impl Columns) -> Result<Place, StoreError> {
    Ok(Place {
        id: r.int(0)?,
        name: r.text(1)?,
        address: r.text(2)?,
        first_slot_minute: r.int4(3)?,
        slot_minutes: r.int4(4)?,
    })
}

/// A page of places in id order, and how many places there are.
pub async fn list(store: &Store, skip: i64, size: i64) -> Result<(Vec<Place>, i64), StoreError> {
    store
        .read(move |c| {
            Box::pin(async move {
                let places = c
                    .query(&LIST_PLACES, &[&size, &skip], |r| place_row(r))
                    .await?;
                let total = c.query_one(&COUNT_PLACES, &[], |r| r.int(0)).await?;
                Ok((places, total))
            })
        })
        .await
}

/// How many places there are.
pub async fn count(store: &Store) -> Result<i64, StoreError> {
    store
        .read(|c| Box::pin(c.query_one(&COUNT_PLACES, &[], |r| r.int(0))))
        .await
}

/// A place by id, from the table.
pub async fn place(store: &Store, id: i64) -> Result<Option<Place>, StoreError> {
    store
        .read(move |c| Box::pin(async move { c.query_opt(&PLACE, &[&id], |r| place_row(r)).await }))
        .await
}

/// A place and its slots from `from` for `days` days, from the tables.
pub async fn place_slots(
    store: &Store,
    place_id: i64,
    from: Day,
    days: i32,
) -> Result<Option<PlaceSlots>, StoreError> {
    let (lo, hi) = (from.0, from.0 + days - 1);
    store
        .read(move |c| {
            Box::pin(async move {
                // Both queries pipelined on one connection.
                let (place_params, slot_params): ([&dyn Param; 1], [&dyn Param; 3]) =
                    ([&place_id], [&place_id, &lo, &hi]);
                let (place, slots) = futures::try_join!(
                    c.query_opt(&PLACE, &place_params, |r| place_row(r)),
                    c.query(&SLOTS, &slot_params, |r| {
                        Ok(SlotRow {
                            day: Day(r.int4(0)?),
                            time_slot: r.int4(1)?,
                            free: r.col(2)?,
                        })
                    })
                )?;
                Ok(place.map(|place| (place, slots)))
            })
        })
        .await
}
