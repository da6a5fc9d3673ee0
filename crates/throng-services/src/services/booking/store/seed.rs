//! The seed's bulk load of places and slots (`crate::store::bulk`).

use indicatif::ProgressBar;

use super::super::model::Day;
use super::super::seed::{refuse_reseed, seeded_place, SeedBookingArgs, PLACES_PER_CHUNK};
use super::places;
use crate::store::bulk::BulkTable;
use crate::store::{Sql, Store};

// No statistics for SQLite (`analyze: false`): with STAT4 statistics SQLite
// re-prepares every statement whose plan might depend on bound values (our
// day ranges) on each step, and the primary key is the right plan for every
// booking query anyway. PostgreSQL gathers them after the load
// ([`GATHER_STATISTICS`]).
static PLACES: BulkTable = BulkTable {
    name: "booking_places",
    columns: &[
        "id",
        "name",
        "address",
        "first_slot_minute",
        "slot_minutes",
        "code",
        "city",
        "postcode",
        "region",
        "services",
        "seats",
        "hours",
        "book_ahead_days",
        "search_text",
    ],
    analyze: false,
};
static SLOTS: BulkTable = BulkTable {
    name: "booking_slots",
    columns: &["place_id", "day", "time_slot", "seats", "seats_left"],
    analyze: false,
};
/// Emptied by a seed: its places' days of other hours.
static PLACE_DAYS: BulkTable = BulkTable {
    name: "booking_place_days",
    columns: &[],
    analyze: false,
};
/// Emptied by a seed (`--force`): no registration outlives its slots.
static REGISTRATIONS: BulkTable = BulkTable {
    name: "booking_registrations",
    columns: &[],
    analyze: false,
};
/// The back office's tables, emptied with the registrations they describe.
static BACK_OFFICE: [BulkTable; 5] = [
    emptied("booking_attendance"),
    emptied("booking_closed_days"),
    emptied("booking_cancelled"),
    emptied("booking_codes_pending"),
    emptied("booking_reminders"),
];
static TABLES: &[&BulkTable] = &[
    &PLACES,
    &SLOTS,
    &PLACE_DAYS,
    &REGISTRATIONS,
    &BACK_OFFICE[0],
    &BACK_OFFICE[1],
    &BACK_OFFICE[2],
    &BACK_OFFICE[3],
    &BACK_OFFICE[4],
];

const fn emptied(name: &'static str) -> BulkTable {
    BulkTable {
        name,
        columns: &[],
        analyze: false,
    }
}

/// PostgreSQL plans from statistics; SQLite's booking tables run without
/// (see [`PLACES`]).
static GATHER_STATISTICS: Sql =
    Sql::per_dialect("", "ANALYZE booking_slots; ANALYZE booking_places;");

/// Replaces the places and slots (and, with `--force`, deletes every
/// registration) with `args`' places x days x slots from `from`, in bulk,
/// in chunks of places, outside the writer.
pub async fn seed_slots(
    store: &Store,
    args: &SeedBookingArgs,
    from: Day,
    bar: &ProgressBar,
) -> anyhow::Result<()> {
    refuse_reseed(places::count(store).await?, args.force)?;
    let mut load = store.bulk_load(TABLES).await?;
    let slots_per_place = (args.days * args.slots_per_day) as usize;
    let mut place = 1;
    while place <= args.places {
        let last = (place + PLACES_PER_CHUNK - 1).min(args.places);
        let chunk = (last - place + 1) as usize;
        let mut places = load.rows(&PLACES, chunk, 256);
        // Rows go in primary-key order, so every insert appends to the
        // B-tree's rightmost page.
        let mut slots = load.rows(&SLOTS, chunk * slots_per_place, 42);
        for p in place..=last {
            let def = seeded_place(p, args);
            let seats = args.seats_of(p);
            places
                .row()
                .int8(p)
                .text(&def.name)
                .text(&def.address)
                .int4(args.first_slot_minute)
                .int4(args.slot_minutes)
                .text(&def.code)
                .text(def.city)
                .text(&def.postcode)
                .text(def.region)
                .text(&def.services)
                .int4(seats)
                .text(&def.hours)
                .int4(args.book_ahead_days)
                .text(&def.search_text);
            for d in 0..args.days {
                for s in 0..args.slots_per_day {
                    slots
                        .row()
                        .int8(p)
                        .int4(from.0 + d)
                        .int4(s)
                        .int4(seats)
                        .int4(seats);
                }
            }
        }
        load.send(places).await?;
        load.send(slots).await?;
        bar.inc((chunk * slots_per_place) as u64);
        place = last + 1;
    }
    load.finish().await?;
    store
        .read_blocking(|c| Box::pin(c.batch(&GATHER_STATISTICS)))
        .await?;
    Ok(())
}
