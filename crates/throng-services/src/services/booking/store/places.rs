//! Places and their slots, read from the tables.

use super::super::model::{Day, Place};
use crate::store::{Columns, Param, Sql, Store, StoreError};

/// One time slot of one day, as the slot query returns it.
#[derive(Clone, Debug)]
pub struct SlotRow {
    pub day: Day,
    pub time_slot: i32,
    /// People the slot takes.
    pub seats: i32,
    /// Seats not taken (below zero where the place's seats were lowered
    /// under the people a slot holds).
    pub seats_left: i32,
}

impl SlotRow {
    pub fn free(&self) -> bool {
        self.seats_left > 0
    }
}

/// A place and its slots over a range of days.
pub type PlaceSlots = (Place, Vec<SlotRow>);

/// A place's columns, as [`place_row`] reads them.
macro_rules! select_place {
    () => {
        "SELECT id, name, address, first_slot_minute, slot_minutes, code, city, postcode,
                region, time_zone, latitude, longitude, services, seats, hours,
                book_ahead_days, notice_minutes
         FROM booking_places"
    };
}
pub(crate) use select_place;

/// Every place, in id order (the availability index's load).
pub static ALL_PLACES: Sql = Sql::new(concat!(select_place!(), " ORDER BY id"));
/// Places by a search, in id order after a cursor: `?2` a LIKE pattern of
/// the lower-cased name, city and postcode, `?3` a region ('' for any), `?4`
/// a LIKE pattern of the space-separated services.
static SEARCH_PLACES: Sql = Sql::new(concat!(
    select_place!(),
    " WHERE id > ?1 AND search_text LIKE ?2 ESCAPE '\\'
        AND (?3 = '' OR region = ?3) AND services LIKE ?4 ESCAPE '\\'
      ORDER BY id LIMIT ?5 OFFSET ?6"
));
static COUNT_SEARCH: Sql = Sql::new(
    "SELECT COUNT(*) FROM booking_places
      WHERE search_text LIKE ?1 ESCAPE '\\' AND (?2 = '' OR region = ?2)
        AND services LIKE ?3 ESCAPE '\\'",
);
static COUNT_PLACES: Sql = Sql::new("SELECT COUNT(*) FROM booking_places");
/// The regions places are in, and the places' lists of services.
static REGIONS: Sql = Sql::new(
    "SELECT region, COUNT(*) FROM booking_places WHERE region <> '' GROUP BY region ORDER BY region",
);
static SERVICE_LISTS: Sql = Sql::new(
    "SELECT services, COUNT(*) FROM booking_places WHERE services <> '' GROUP BY services",
);
static PLACE: Sql = Sql::new(concat!(select_place!(), " WHERE id = ?1"));
static PLACE_BY_CODE: Sql = Sql::new(concat!(select_place!(), " WHERE code = ?1"));
/// A place's slots over a range of days (withdrawn ones, of seats 0, are
/// never shown), where slots' rows say how many seats are left (see
/// `slot_rows.rs`).
static SLOTS: Sql = Sql::new(
    "SELECT day, time_slot, seats, seats_left FROM booking_slots
     WHERE place_id = ?1 AND day BETWEEN ?2 AND ?3 AND seats > 0 ORDER BY day, time_slot",
);

/// A row of [`PLACE`], [`SEARCH_PLACES`] or [`ALL_PLACES`].
pub fn place_row(r: &impl Columns) -> Result<Place, StoreError> {
    let time_zone: Option<String> = r.col(9)?;
    let tz = match &time_zone {
        Some(name) => Some(name.parse::<chrono_tz::Tz>().map_err(|_| {
            StoreError::Internal(format!("a place's time zone '{name}' is not known"))
        })?),
        None => None,
    };
    let services: String = r.text(12)?;
    Ok(Place {
        id: r.int(0)?,
        name: r.text(1)?,
        address: r.text(2)?,
        first_slot_minute: r.int4(3)?,
        slot_minutes: r.int4(4)?,
        code: r.col(5)?,
        city: r.text(6)?,
        postcode: r.text(7)?,
        region: r.text(8)?,
        time_zone,
        latitude: r.col(10)?,
        longitude: r.col(11)?,
        services: services.split_whitespace().map(str::to_string).collect(),
        seats: r.int4(13)?,
        hours: r.text(14)?,
        book_ahead_days: r.int4(15)?,
        notice_minutes: r.int4(16)?,
        tz,
    })
}

/// What a place search asks for.
#[derive(Clone, Debug, Default)]
pub struct PlaceSearch {
    /// Part of the name, city or postcode, any case.
    pub q: String,
    /// The region exactly ('' for any).
    pub region: String,
    /// A service code ('' for any).
    pub service: String,
}

impl PlaceSearch {
    /// The LIKE patterns of `q` and `service`, with `%`, `_` and `\`
    /// escaped.
    pub fn patterns(&self) -> (String, String) {
        let escape = |s: &str| {
            s.chars().fold(String::new(), |mut out, c| {
                if matches!(c, '%' | '_' | '\\') {
                    out.push('\\');
                }
                out.push(c);
                out
            })
        };
        let q = format!("%{}%", escape(&self.q.to_lowercase()));
        let service = if self.service.is_empty() {
            "%".to_string()
        } else {
            format!("% {} %", escape(&self.service))
        };
        (q, service)
    }
}

/// A page of places matching `search` in id order, after id `after` and
/// `skip` more, and how many match.
pub async fn search(
    store: &Store,
    search: PlaceSearch,
    after: i64,
    skip: i64,
    size: i64,
) -> Result<(Vec<Place>, i64), StoreError> {
    store
        .read(move |c| {
            Box::pin(async move {
                let (q, service) = search.patterns();
                let page_params: [&dyn Param; 6] =
                    [&after, &q, &search.region, &service, &size, &skip];
                let count_params: [&dyn Param; 3] = [&q, &search.region, &service];
                let (places, total) = futures::try_join!(
                    c.query(&SEARCH_PLACES, &page_params, |r| place_row(r)),
                    c.query_one(&COUNT_SEARCH, &count_params, |r| r.int(0))
                )?;
                Ok((places, total))
            })
        })
        .await
}

/// The regions with their places' count, in order, and the services
/// offered with the count of places offering each, in order: what a search
/// can be narrowed by.
pub async fn filters(
    store: &Store,
) -> Result<(Vec<(String, i64)>, Vec<(String, i64)>), StoreError> {
    let (regions, lists) = store
        .read(|c| {
            Box::pin(async move {
                futures::try_join!(
                    c.query(&REGIONS, &[], |r| Ok((r.text(0)?, r.int(1)?))),
                    c.query(&SERVICE_LISTS, &[], |r| Ok((r.text(0)?, r.int(1)?)))
                )
            })
        })
        .await?;
    let mut services = std::collections::BTreeMap::<String, i64>::new();
    for (list, places) in lists {
        for service in list.split_whitespace() {
            *services.entry(service.to_string()).or_default() += places;
        }
    }
    Ok((regions, services.into_iter().collect()))
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

/// A place by its code, from the table.
pub async fn place_by_code(store: &Store, code: &str) -> Result<Option<Place>, StoreError> {
    let code = code.to_string();
    store
        .read(move |c| {
            Box::pin(async move {
                c.query_opt(&PLACE_BY_CODE, &[&code], |r| place_row(r))
                    .await
            })
        })
        .await
}

/// A slot row of [`SLOTS`].
pub fn slot_row(r: &impl Columns) -> Result<SlotRow, StoreError> {
    Ok(SlotRow {
        day: Day(r.int4(0)?),
        time_slot: r.int4(1)?,
        seats: r.int4(2)?,
        seats_left: r.int4(3)?,
    })
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
                    c.query(&SLOTS, &slot_params, |r| slot_row(r))
                )?;
                Ok(place.map(|place| (place, slots)))
            })
        })
        .await
}
