//! `throng booking ...`: the operator's commands against the store.

use std::path::PathBuf;

use super::model::BookingClock;
use super::places::{import, PlaceChange};
use super::seed::SEED_GENERATION_KEY;
use crate::store::Store;

/// Booking's commands.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum BookingCommand {
    /// Defines places from a CSV file (as POST /api/booking/places/import):
    /// all or none, found by code, their slots made for their horizon.
    ImportPlaces {
        /// The CSV file (header: code,name,address,city,postcode,region,
        /// time_zone,slot_minutes,seats,hours,closed, then any of services,
        /// latitude, longitude, book_ahead_days, notice_minutes).
        file: PathBuf,
        #[command(flatten)]
        clock: ClockArg,
    },
    /// Makes the days that came into the places' horizons (the server does
    /// this every hour too).
    Extend {
        #[command(flatten)]
        clock: ClockArg,
    },
}

/// The offset of places without a time zone (as `serve`'s).
#[derive(Clone, Debug, clap::Args)]
pub struct ClockArg {
    /// The time zone of places that name none, as a fixed offset from UTC
    /// (the server's --booking-utc-offset).
    #[arg(long, env = "THRONG_BOOKING_UTC_OFFSET", default_value = "+00:00", allow_hyphen_values = true, value_parser = BookingClock::parse)]
    pub booking_utc_offset: BookingClock,
}

pub fn command() -> clap::Command {
    <BookingCommand as clap::Subcommand>::augment_subcommands(
        clap::Command::new("booking").about("Booking's places: import them, make their days"),
    )
}

pub async fn run(store: &Store, matches: &clap::ArgMatches) -> anyhow::Result<()> {
    let command = <BookingCommand as clap::FromArgMatches>::from_arg_matches(matches)?;
    let (changes, lines, clock) = match command {
        BookingCommand::ImportPlaces { file, clock } => {
            let bytes =
                std::fs::read(&file).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            let parsed =
                import::parse(&bytes).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            (parsed.changes, parsed.lines, clock.booking_utc_offset)
        }
        BookingCommand::Extend { clock } => (
            vec![PlaceChange::Extend],
            Vec::new(),
            clock.booking_utc_offset,
        ),
    };
    let started = std::time::Instant::now();
    let storage = super::store::Booking::open(store).await?;
    let summary = storage.change_places(changes, clock).await?.map_err(|r| {
        anyhow::anyhow!(
            super::places::http::refusal(r, |at| lines
                .get(at)
                .map(|l| format!("line {l}: "))
                .unwrap_or_default())
            .message
        )
    })?;
    // A server on this store loads the changed slots (as after a seed).
    store
        .meta_set(
            SEED_GENERATION_KEY,
            &crate::base::clock::now_ms().to_string(),
        )
        .await?;
    eprintln!(
        "{} places created, {} updated; {} slots added, {} removed; {} registrations on removed slots (kept) in {:.1} s",
        summary.created,
        summary.updated,
        summary.slots_added,
        summary.slots_removed,
        summary.registrations_on_removed_slots,
        started.elapsed().as_secs_f64()
    );
    println!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(())
}
