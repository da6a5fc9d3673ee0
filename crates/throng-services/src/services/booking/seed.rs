//! `throng seed booking`: places x days x time slots, bulk-loaded
//! (`store/seed.rs`) with a progress bar. Re-seeding a store that has
//! places is refused unless `--force` (which deletes booking data,
//! registrations included).

use std::time::Instant;

use super::model::{Day, EVENT_SLOTS_OPENED, SLOTS_PER_DAY_MAX};
use crate::store::{NewEvent, Store};

#[derive(Clone, Debug, clap::Args)]
pub struct SeedBookingArgs {
    /// Places to create.
    #[arg(long, default_value_t = 2000)]
    pub places: i64,
    /// Days per place, from --from.
    #[arg(long, default_value_t = 100)]
    pub days: i32,
    /// Time slots per day per place.
    #[arg(long, default_value_t = 25)]
    pub slots_per_day: i32,
    /// First day (YYYY-MM-DD); default today.
    #[arg(long)]
    pub from: Option<String>,
    /// Replace existing booking data (deletes registrations).
    #[arg(long)]
    pub force: bool,
    /// Minutes after midnight of the first slot.
    #[arg(long, default_value_t = 8 * 60)]
    pub first_slot_minute: i32,
    /// Length of one slot in minutes.
    #[arg(long, default_value_t = 20)]
    pub slot_minutes: i32,
    /// People one slot takes (1 to 250), at the places whose id is a
    /// multiple of --seats-every; the others take one.
    #[arg(long, default_value_t = 1)]
    pub seats: i32,
    /// Which places get --seats: those whose id is a multiple of this (1:
    /// every place).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(i64).range(1..))]
    pub seats_every: i64,
    /// Days from today the server keeps making slots for from the places'
    /// hours (0: only the seeded days).
    #[arg(long, default_value_t = 0)]
    pub book_ahead_days: i32,
}

#[derive(Debug)]
pub struct SeedReport {
    pub places: i64,
    pub slots: i64,
    pub elapsed_s: f64,
}

/// `meta` key changed by every seed; servers watch it (see `BookingState`).
pub const SEED_GENERATION_KEY: &str = "booking_seed_generation";

/// Places per bulk-load step (a transaction on SQLite) and progress step.
pub const PLACES_PER_CHUNK: i64 = 50;

const CITIES: &[&str] = &[
    "Bratislava",
    "Košice",
    "Prešov",
    "Žilina",
    "Nitra",
    "Banská Bystrica",
    "Trnava",
    "Trenčín",
    "Martin",
    "Poprad",
    "Zvolen",
    "Michalovce",
    "Levice",
    "Komárno",
    "Piešťany",
    "Ružomberok",
];
const STREETS: &[&str] = &[
    "Hlavná",
    "Námestie SNP",
    "Štúrova",
    "Mierová",
    "Nemocničná",
    "Staničná",
    "Záhradnícka",
    "Kollárova",
    "Hviezdoslavova",
    "Bernolákova",
];
/// Regions of the seeded places, by city (`CITIES`' order).
const REGIONS: &[&str] = &[
    "BA", "KE", "PO", "ZA", "NR", "BB", "TT", "TN", "ZA", "PO", "BB", "KE", "NR", "NR", "TT", "ZA",
];
/// Services of the seeded places, in turn.
const SERVICES: &[&str] = &[
    "vaccine-flu test-pcr",
    "vaccine-covid",
    "test-pcr test-antigen",
    "vaccine-flu vaccine-covid",
];
const KINDS: &[&str] = &[
    "Vaccination centre",
    "Test site",
    "Polyclinic",
    "Hospital ward",
];

pub fn place_name(id: i64) -> (String, String) {
    let city = CITIES[(id as usize * 7) % CITIES.len()];
    let kind = KINDS[(id as usize) % KINDS.len()];
    let street = STREETS[(id as usize * 3) % STREETS.len()];
    (
        format!("{kind} {city} {id}"),
        format!("{street} {}, {city}", 1 + id % 120),
    )
}

/// A seeded place as an authority would define it: code, city, postcode,
/// region, services, and every day open for the seeded slots.
pub struct SeededPlace {
    pub code: String,
    pub name: String,
    pub address: String,
    pub city: &'static str,
    pub postcode: String,
    pub region: &'static str,
    pub services: String,
    pub hours: String,
    pub search_text: String,
}

pub fn seeded_place(id: i64, args: &SeedBookingArgs) -> SeededPlace {
    let (name, address) = place_name(id);
    let c = (id as usize * 7) % CITIES.len();
    let postcode = format!("{:03} {:02}", 800 + c * 10, id % 100);
    // Hours end at midnight; a seed of more slots than fit in the day has
    // them all the same (times past midnight are shown modulo 24 hours).
    let end = (args.first_slot_minute + args.slots_per_day * args.slot_minutes).min(24 * 60);
    let hours = super::places::hours::WeekHours::every_day(super::places::hours::DayHours(vec![(
        args.first_slot_minute as u16,
        end as u16,
    )]));
    SeededPlace {
        code: format!("P{id:06}"),
        search_text: format!("{name}\u{1f}{}\u{1f}{postcode}", CITIES[c]).to_lowercase(),
        name,
        address,
        city: CITIES[c],
        postcode,
        region: REGIONS[c],
        services: format!(" {} ", SERVICES[(id as usize) % SERVICES.len()]),
        hours: hours.to_text(),
    }
}

impl SeedBookingArgs {
    /// People a slot of place `id` takes.
    pub fn seats_of(&self, id: i64) -> i32 {
        if id % self.seats_every == 0 {
            self.seats
        } else {
            1
        }
    }
}

pub fn validate(args: &SeedBookingArgs) -> anyhow::Result<Day> {
    if !(1..=1_000_000).contains(&args.places) {
        anyhow::bail!("--places: 1 to 1000000");
    }
    if !(1..=3660).contains(&args.days) {
        anyhow::bail!("--days: 1 to 3660");
    }
    if !(1..=SLOTS_PER_DAY_MAX).contains(&args.slots_per_day) {
        anyhow::bail!("--slots-per-day: 1 to {SLOTS_PER_DAY_MAX}");
    }
    if !(0..24 * 60).contains(&args.first_slot_minute)
        || !(1..=24 * 60).contains(&args.slot_minutes)
    {
        anyhow::bail!("--first-slot-minute: 0 to 1439; --slot-minutes: 1 to 1440");
    }
    if !(1..=super::model::SEATS_MAX).contains(&args.seats) {
        anyhow::bail!("--seats: 1 to {}", super::model::SEATS_MAX);
    }
    if !(0..=super::places::BOOK_AHEAD_DAYS_MAX).contains(&args.book_ahead_days) {
        anyhow::bail!(
            "--book-ahead-days: 0 to {}",
            super::places::BOOK_AHEAD_DAYS_MAX
        );
    }
    match &args.from {
        Some(s) => Day::parse("--from", s).map_err(|e| anyhow::anyhow!(e.message)),
        None => Ok(Day::today()),
    }
}

pub async fn seed(
    store: &Store,
    args: &SeedBookingArgs,
    progress: bool,
) -> anyhow::Result<SeedReport> {
    let from = validate(args)?;
    let started = Instant::now();
    let bar = crate::platform::progress::seed_bar(
        (args.places * args.days as i64 * args.slots_per_day as i64) as u64,
        "slots",
        "seeding booking",
        progress,
    );
    super::store::seed::seed_slots(store, args, from, &bar).await?;
    bar.finish();
    let payload = serde_json::json!({
        "places": args.places, "days": args.days, "slotsPerDay": args.slots_per_day, "from": from.to_text(),
    });
    let event = NewEvent::json("booking-slots", EVENT_SLOTS_OPENED, &payload);
    store.append_event(event).await?;
    // Tells a server running on this store to reload its availability index.
    store
        .meta_set(
            SEED_GENERATION_KEY,
            &crate::base::clock::now_ms().to_string(),
        )
        .await?;
    Ok(SeedReport {
        places: args.places,
        slots: args.places * args.days as i64 * args.slots_per_day as i64,
        elapsed_s: started.elapsed().as_secs_f64(),
    })
}

/// Refuses to seed over `existing` places unless `--force`.
pub fn refuse_reseed(existing: i64, force: bool) -> anyhow::Result<()> {
    if existing > 0 && !force {
        anyhow::bail!(
            "the store already has {existing} places; pass --force to replace the booking data \
             (this deletes every registration)"
        );
    }
    Ok(())
}

/// Seats of the demo's places whose id is a multiple of
/// [`DEMO_SEATS_EVERY`]; the others have one.
pub const DEMO_SEATS: i32 = 3;
pub const DEMO_SEATS_EVERY: i64 = 10;

/// The quick-start data set: 20 places, 14 days from today, 25 slots a day,
/// the horizon kept 14 days ahead; places 10 and 20 take 3 people a slot.
pub async fn seed_demo_if_empty(store: &Store) -> anyhow::Result<()> {
    if super::store::places::count(store).await? > 0 {
        return Ok(());
    }
    let args = SeedBookingArgs {
        places: 20,
        days: 14,
        slots_per_day: 25,
        from: None,
        force: false,
        first_slot_minute: 8 * 60,
        slot_minutes: 20,
        seats: DEMO_SEATS,
        seats_every: DEMO_SEATS_EVERY,
        book_ahead_days: 14,
    };
    let report = seed(store, &args, false).await?;
    tracing::info!(
        places = report.places,
        slots = report.slots,
        "seeded booking demo data"
    );
    Ok(())
}
