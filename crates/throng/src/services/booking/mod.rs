//! Booking: appointment slots (places x days x time slots), an atomic
//! try-register, personal data sealed at rest, confirmations sent from the
//! event log by a worker, as in the vaccination booking write-up.
//!
//! Storage is reached through one trait, [`store::BookingStore`], chosen
//! once from the store when the state is built. [`BookingState`] is the one
//! owner of where slots are read from (the availability index where the
//! storage keeps one, SQL otherwise) and of the index's bookkeeping after a
//! write: handlers call its methods, never the index or the storage
//! directly for slots, so no write path can forget the index.

pub mod availability;
pub mod bench;
pub mod http;
pub mod ics;
pub mod model;
pub mod notifier;
pub mod page;
pub mod persons;
pub mod seed;
pub mod store;

use std::sync::Arc;

use arc_swap::ArcSwap;
use include_dir::include_dir;
use tokio::sync::Notify;

use crate::platform::crypto::{BlindIndex, PiiCipher};
use crate::platform::experiment::Experiment;
use crate::platform::secrets::SecretSpec;
use crate::platform::service::{
    AppState, Link, LinkKind, OpenApiRouter, Platform, Service, ServiceState, Started,
};
use crate::store::{MigrationSet, Store, StoreError};
use model::{Day, Place, RegisterOutcome, SealedRegistration};

/// The booking service, as `services::all()` lists it.
pub struct Booking;

static MIGRATIONS: MigrationSet = MigrationSet {
    owner: "booking",
    sqlite: include_dir!("$CARGO_MANIFEST_DIR/src/services/booking/migrations/sqlite"),
    postgres: include_dir!("$CARGO_MANIFEST_DIR/src/services/booking/migrations/postgres"),
};

/// `serve` flags of the booking service.
#[derive(Clone, Debug, clap::Args)]
pub struct BookingArgs {
    /// SMS gateway webhook (http:// or https://, redirects never followed);
    /// confirmations go to the log when absent.
    #[arg(long, env = "THRONG_NOTIFY_WEBHOOK")]
    pub notify_webhook: Option<String>,
    /// Do not run the confirmation worker on this node (nodes sharing a
    /// PostgreSQL take turns through a lease anyway; see ARCHITECTURE.md).
    #[arg(long, env = "THRONG_NO_NOTIFIER")]
    pub no_notifier: bool,
    /// Active registrations per person (by a keyed blind index of the
    /// national id): `person` one at a time, `person-day` one per day,
    /// `off` no limit. Cancelling frees it. Changing the rule applies to
    /// registrations made after the change.
    #[arg(
        long,
        env = "THRONG_BOOKING_ONE_REGISTRATION",
        value_enum,
        default_value = "person"
    )]
    pub booking_one_registration: model::OneRegistration,
    /// Attempts at one confirmation before it is parked (kept, listed at
    /// GET /api/booking/admin/notifications/parked) so it stops holding
    /// back the ones after it; retries back off from 0.1 s to 30 s (10
    /// attempts: ~51 s). A gateway's refusal (4xx, a redirect) parks at once.
    #[arg(long, env = "THRONG_NOTIFY_ATTEMPTS_MAX", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub notify_attempts_max: u32,
    /// The time zone of slot times, as a fixed offset from UTC (+HH:MM or
    /// -HH:MM, e.g. +01:00 for Central European winter time; no daylight
    /// saving): a slot whose start at this offset has passed, and every
    /// slot of an earlier day, can no longer be booked or moved to.
    #[arg(long, env = "THRONG_BOOKING_UTC_OFFSET", default_value = "+00:00", allow_hyphen_values = true, value_parser = model::BookingClock::parse)]
    pub booking_utc_offset: model::BookingClock,
}

impl Service for Booking {
    const NAME: &'static str = "booking";
    const SEED_ABOUT: Option<&'static str> =
        Some("Places x days x time slots (5,000,000 slots with the defaults)");
    type Args = BookingArgs;
    type SeedArgs = seed::SeedBookingArgs;
    type State = BookingState;

    fn event_categories(&self) -> &'static [&'static str] {
        &[model::STREAM_CATEGORY]
    }

    fn event_consumers(&self) -> &'static [&'static str] {
        &[notifier::CONSUMER]
    }

    fn migrations(&self) -> Option<&'static MigrationSet> {
        Some(&MIGRATIONS)
    }

    async fn seed(&self, store: &Store, args: seed::SeedBookingArgs) -> anyhow::Result<()> {
        let report = seed::seed(store, &args, true).await?;
        println!(
            "seeded {} places, {} slots in {:.1} s ({:.0} slots/s)",
            report.places,
            report.slots,
            report.elapsed_s,
            report.slots as f64 / report.elapsed_s.max(1e-9)
        );
        Ok(())
    }

    async fn seed_demo(&self, store: &Store) -> anyhow::Result<()> {
        seed::seed_demo_if_empty(store).await
    }

    async fn start(
        &self,
        platform: &Platform,
        args: BookingArgs,
    ) -> anyhow::Result<Started<BookingState>> {
        let notifier = notifier::Notifier::from_url(args.notify_webhook.as_deref())?;
        std::sync::LazyLock::force(&notifier::NOTIFIER_METRICS);
        let mut state = BookingState::new(&platform.store, platform.pii.clone()).await?;
        state.blind_index = Arc::new(blind_index(platform).await?);
        state.one_registration = args.booking_one_registration;
        state.clock = args.booking_utc_offset;
        let state = Arc::new(state);
        let mut started = Started::new(state.clone());
        if let Some(watcher) = state.spawn_seed_watcher() {
            started = started.with_worker(watcher);
        }
        if !args.no_notifier {
            started = started.with_worker(notifier::spawn(
                platform.store.clone(),
                state.storage.clone(),
                platform.pii.clone(),
                notifier,
                state.notify_worker.clone(),
                notifier::Attempts {
                    max: args.notify_attempts_max,
                },
            ));
        }
        Ok(started)
    }

    fn routes(&self) -> OpenApiRouter<AppState> {
        http::routes()
    }

    fn links(&self) -> Vec<Link> {
        vec![
            Link {
                kind: LinkKind::Page,
                href: "/booking/",
                title: "Booking",
                about: "choose a place, a day and a time slot.",
            },
            Link {
                kind: LinkKind::Page,
                href: "/booking/manage",
                title: "Your registration",
                about: "see, move or cancel a registration with its access code.",
            },
            Link {
                kind: LinkKind::Endpoint,
                href: "/api/booking/places",
                title: "/api/booking/places",
                about: "the places, a page at a time.",
            },
        ]
    }

    fn experiments(&self) -> Vec<Box<dyn Experiment>> {
        vec![Box::new(bench::BookingBench::default())]
    }
}

/// Keys the blind index of national ids (one registration per person).
pub const BLIND_INDEX_KEY: SecretSpec = SecretSpec {
    file: "blind-index.key",
    env: "THRONG_BLIND_INDEX_KEY",
};

/// The blind index under this node's key, refused when the store's entries
/// were made under another (its fingerprint is in `meta`).
async fn blind_index(platform: &Platform) -> anyhow::Result<BlindIndex> {
    let blind = BlindIndex::new(&platform.secrets.key(&BLIND_INDEX_KEY)?);
    let stored = platform
        .store
        .meta_set_once("blind_index_key_fingerprint", blind.fingerprint())
        .await?;
    if stored != blind.fingerprint() {
        anyhow::bail!(
            "the blind index of this store (one registration per person) was keyed with another \
             key than {}; start with the data directory (or {}) that this store was created with",
            platform.secrets.path_of(&BLIND_INDEX_KEY).display(),
            BLIND_INDEX_KEY.env
        );
    }
    Ok(blind)
}

/// The booking service's share of the application state.
pub struct BookingState {
    /// The store, for what every service shares (`meta`, the event log).
    pub store: Store,
    /// The booking tables, through the implementation for `store`.
    pub storage: Arc<dyn store::BookingStore>,
    pub pii: Arc<PiiCipher>,
    /// Keys the national id's blind index (one registration per person).
    pub blind_index: Arc<BlindIndex>,
    pub one_registration: model::OneRegistration,
    /// The time zone slot times are in (`--booking-utc-offset`).
    pub clock: model::BookingClock,
    /// Wakes the confirmation worker when a registration commits.
    pub notify_worker: Arc<Notify>,
    /// The in-memory availability index, where the storage keeps one
    /// (`BookingStore::load_availability`; see `availability.rs` for why
    /// nodes sharing a PostgreSQL read the database). Shared with the
    /// writer's commands, which read it when they run (not when they were
    /// sent), so a reload swapped in by a writer command is the one every
    /// later command decides on.
    availability: Option<store::AvailabilityHandle>,
    /// The seed generation the index was loaded at (for the seed watcher).
    loaded_generation: Option<String>,
}

impl ServiceState for BookingState {}

impl BookingState {
    pub async fn new(store: &Store, pii: Arc<PiiCipher>) -> anyhow::Result<BookingState> {
        let generation = store.meta_get(seed::SEED_GENERATION_KEY).await?;
        let storage = store::open(store);
        let availability = load_index(&*storage)
            .await?
            .map(|index| Arc::new(ArcSwap::from_pointee(index)));
        Ok(BookingState {
            store: store.clone(),
            storage,
            pii,
            // A random key until `start` sets the platform's: only tests
            // and tools that build a state by hand see this one.
            blind_index: Arc::new(BlindIndex::new(&rand::random())),
            one_registration: model::OneRegistration::Person,
            clock: model::BookingClock::UTC,
            notify_worker: Arc::new(Notify::new()),
            availability,
            loaded_generation: generation,
        })
    }

    /// The current index, if this store keeps one.
    pub fn index(&self) -> Option<Arc<availability::Availability>> {
        self.availability.as_ref().map(|a| a.load_full())
    }

    /// Renders a place's slots for `days` from `from` with `render`, read from
    /// the index when this store keeps one and from SQL otherwise; `None` for
    /// an unknown place.
    pub async fn with_place_slots<R>(
        &self,
        place_id: i64,
        from: Day,
        days: i32,
        render: impl FnOnce(&Place, &[store::SlotRow]) -> R,
    ) -> Result<Option<R>, StoreError> {
        if let Some(index) = self.index() {
            return Ok(index
                .place_slots_rows(place_id, from, days)
                .map(|(place, rows)| render(place, &rows)));
        }
        Ok(self
            .storage
            .place_slots(place_id, from, days)
            .await?
            .map(|(place, rows)| render(&place, &rows)))
    }

    /// A place by id, from the index or SQL.
    pub async fn place(&self, place_id: i64) -> Result<Option<Place>, StoreError> {
        match self.index() {
            Some(index) => Ok(index.place(place_id).cloned()),
            None => self.storage.place(place_id).await,
        }
    }

    /// What the index already knows of a slot (`None` without an index):
    /// under a crowd most attempts are for slots that are already gone, and
    /// answering those skips the writer.
    pub fn known_state(
        &self,
        place_id: i64,
        day: Day,
        slot: i32,
    ) -> Option<availability::SlotState> {
        self.index().map(|i| i.state(place_id, day, slot))
    }

    /// Takes the slot and stores the registration, and wakes the
    /// confirmation worker after a registration. The slot's bit is the
    /// writer's to set (`BookingStore::try_register`, inside the transaction; a
    /// reload after a seed loads the index in the writer too, after it):
    /// nothing here sets it again after the answer. Setting it after a
    /// `SlotTaken` once undid a cancel of the winner that had committed
    /// meanwhile (a slot left taken by no registration until a restart:
    /// seen as a failure of
    /// `booking::mixed_register_and_cancel_stay_consistent::sqlite` under
    /// load).
    pub async fn try_register(
        &self,
        sealed: SealedRegistration,
    ) -> Result<RegisterOutcome, StoreError> {
        let outcome = self
            .storage
            .try_register(self.availability.clone(), sealed)
            .await?;
        if outcome == RegisterOutcome::Registered {
            self.notify_worker.notify_one();
        }
        Ok(outcome)
    }

    /// Cancels a registration if the access code matches; frees its slot in
    /// the index before returning.
    pub async fn cancel(
        &self,
        id: &str,
        access_code: &str,
    ) -> Result<store::CancelOutcome, StoreError> {
        let outcome = self.storage.cancel(id, access_code).await?;
        if let (
            Some(index),
            store::CancelOutcome::Cancelled {
                place_id,
                day,
                time_slot,
                person,
            },
        ) = (self.index(), &outcome)
        {
            index.set_taken(*place_id, *day, *time_slot, false);
            if let Some(p) = person {
                index.release_person(*p);
            }
        }
        Ok(outcome)
    }

    /// Moves a registration to `to` if the access code matches: the new
    /// slot is taken and the old one freed in one write (with its event),
    /// and the index follows before returning. `to_person_key` is the
    /// registration's blind-index key under the one-registration rule for
    /// the new day.
    pub async fn move_registration(
        &self,
        id: &str,
        access_code: &str,
        to: model::SlotRef,
        to_person_key: Option<Vec<u8>>,
    ) -> Result<model::MoveOutcome, StoreError> {
        self.storage
            .move_registration(
                self.availability.clone(),
                id,
                access_code,
                to,
                to_person_key,
            )
            .await
    }

    /// Reloads the index when another process seeded the store (the seed
    /// bumps a generation in `meta`), in the writer
    /// (`BookingStore::reload_availability`); reads use the old index
    /// meanwhile.
    pub fn spawn_seed_watcher(self: &Arc<Self>) -> Option<tokio::task::JoinHandle<()>> {
        self.availability.as_ref()?;
        let this = self.clone();
        Some(crate::platform::seed_watch::spawn(
            self.store.clone(),
            seed::SEED_GENERATION_KEY,
            self.loaded_generation.clone(),
            "the booking availability index",
            move || {
                let this = this.clone();
                async move { reload_index(&*this.storage, this.availability.clone()).await }
            },
        ))
    }
}

/// Loads the index again and swaps it in, inside one writer command
/// (`BookingStore::reload_availability`); it runs only after a new seed.
async fn reload_index(
    storage: &dyn store::BookingStore,
    handle: Option<store::AvailabilityHandle>,
) -> anyhow::Result<()> {
    let Some(handle) = handle else {
        anyhow::bail!("this store keeps no availability index")
    };
    let started = std::time::Instant::now();
    let slots = storage.reload_availability(handle).await?;
    tracing::info!(
        slots,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "reloaded the booking availability index after a new seed (in the writer)"
    );
    Ok(())
}

/// The availability index, where the storage keeps one.
async fn load_index(
    storage: &dyn store::BookingStore,
) -> anyhow::Result<Option<availability::Availability>> {
    let started = std::time::Instant::now();
    let Some(index) = storage.load_availability().await? else {
        return Ok(None);
    };
    tracing::info!(
        slots = index.slots(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "loaded the booking availability index"
    );
    Ok(Some(index))
}
