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

/// The quick-start data set: 20 places, 14 days from today, 25 slots a day.
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
    };
    let report = seed(store, &args, false).await?;
    tracing::info!(
        places = report.places,
        slots = report.slots,
        "seeded booking demo data"
    );
    Ok(())
}
