//! Booking: appointment slots (places x days x time slots), an atomic
//! try-register, personal data sealed at rest, confirmations sent from the
//! event log by a worker, as in the vaccination booking write-up.
//!
//! Storage is reached through one type, [`store::Booking`], whose way of
//! deciding slots is chosen once from the store when the state is built:
//! it owns where slots are read from (the availability index where one
//! process writes, SQL otherwise) and the index's bookkeeping after a
//! write, so no write path can forget the index.

pub mod access_code;
pub mod availability;
pub mod backoffice;
pub mod commands;
pub mod email;
pub mod http;
pub mod ics;
pub mod messages;
pub mod model;
pub mod notifier;
pub mod page;
pub mod persons;
pub mod places;
pub mod seed;
pub mod store;

use std::sync::Arc;

use include_dir::include_dir;
use tokio::sync::Notify;

use crate::platform::crypto::{BlindIndex, PiiCipher};
use crate::platform::secrets::SecretSpec;
use crate::platform::service::{
    AdminPage, AppState, Link, LinkKind, OpenApiRouter, Platform, Service, ServiceState, Started,
};
use crate::store::{MigrationSet, Store, StoreError};
use model::{RegisterOutcome, SealedRegistration};

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
    /// SMS gateway webhook (http:// or https://, redirects never followed)
    /// for booking's messages; with neither it nor --notify-smtp-url they
    /// go to the log (ids only).
    #[arg(long, env = "THRONG_NOTIFY_WEBHOOK")]
    pub notify_webhook: Option<String>,
    /// SMTP relay for booking's messages by email: smtp://host:port (in the
    /// clear), smtp://host:port?tls=required (STARTTLS) or
    /// smtps://user:password@host:port (TLS).
    #[arg(long, env = "THRONG_NOTIFY_SMTP_URL")]
    pub notify_smtp_url: Option<String>,
    /// The sender of booking's emails.
    #[arg(
        long,
        env = "THRONG_NOTIFY_SMTP_FROM",
        default_value = "booking@localhost"
    )]
    pub notify_smtp_from: String,
    /// Send a reminder this long before each appointment (90m, 24h, 2d; at
    /// most 30d); no reminders when absent. A registration made inside the
    /// window is reminded at once.
    #[arg(long, env = "THRONG_BOOKING_REMINDER_BEFORE", value_parser = messages::parse_reminder_before)]
    pub booking_reminder_before: Option<i64>,
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
    /// Attempts at one message before it is parked (kept, listed at
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

    fn roles(&self) -> &'static [crate::platform::auth::RoleSpec] {
        backoffice::access::ROLES
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

    async fn seed_demo(&self, store: &Store, _data_dir: &std::path::Path) -> anyhow::Result<()> {
        seed::seed_demo_if_empty(store).await
    }

    fn store_command(&self) -> Option<clap::Command> {
        Some(commands::command())
    }

    async fn run_store_command(
        &self,
        store: &Store,
        matches: &clap::ArgMatches,
    ) -> anyhow::Result<()> {
        commands::run(store, matches).await
    }

    async fn start(
        &self,
        platform: &Platform,
        args: BookingArgs,
    ) -> anyhow::Result<Started<BookingState>> {
        let email = match &args.notify_smtp_url {
            Some(url) => Some(email::Email::new(url, &args.notify_smtp_from)?),
            None => None,
        };
        let notifier = notifier::Notifier::new(args.notify_webhook.as_deref(), email)?;
        std::sync::LazyLock::force(&notifier::NOTIFIER_METRICS);
        let mut state = BookingState::new(&platform.store, platform.pii.clone()).await?;
        state.blind_index = Arc::new(blind_index(platform).await?);
        state.one_registration = args.booking_one_registration;
        state.clock = args.booking_utc_offset;
        state.public_url = platform.public_url.clone();
        let state = Arc::new(state);
        let mut started = Started::new(state.clone());
        if let Some(watcher) = state.storage.spawn_seed_watcher() {
            started = started.with_worker(watcher);
        }
        started = started.with_worker(spawn_horizon_extender(state.clone()));
        if !args.no_notifier {
            started = started.with_worker(notifier::spawn(
                platform.store.clone(),
                state.storage.clone(),
                platform.pii.clone(),
                notifier,
                state.notify_worker.clone(),
                notifier::Settings {
                    attempts: notifier::Attempts {
                        max: args.notify_attempts_max,
                    },
                    reminder_before_ms: args.booking_reminder_before,
                    clock: args.booking_utc_offset,
                    public_base: platform.public_url.base(&axum::http::HeaderMap::new()),
                },
            ));
        }
        Ok(started)
    }

    fn routes(&self) -> OpenApiRouter<AppState> {
        http::routes()
    }

    fn admin_pages(&self) -> &'static [AdminPage] {
        &[
            AdminPage {
                href: "/booking/staff/",
                title: "Booking: a place's day",
                about: "a place's list of the day with check-in, print and CSV.",
                roles: &["staff"],
            },
            AdminPage {
                href: "/booking/admin/",
                title: "Booking: places",
                about: "find, define and change places, their hours and days; import a CSV.",
                roles: &[],
            },
        ]
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
                kind: LinkKind::Page,
                href: "/booking/staff/",
                title: "Staff: a place's day",
                about: "the day's list of a place (staff or admin token), check-in, print.",
            },
            Link {
                kind: LinkKind::Page,
                href: "/booking/admin/",
                title: "Admin: places",
                about: "find, define and change places, their hours and days; import a CSV (admin token).",
            },
            Link {
                kind: LinkKind::Endpoint,
                href: "/api/booking/places",
                title: "/api/booking/places",
                about: "the places, a page at a time.",
            },
        ]
    }
}

/// How often the places' horizons are extended (the days that came into
/// them made from their hours): every node does it, one at a time (the
/// places' lock), and a run that finds every day made writes nothing.
pub const HORIZON_EXTEND_INTERVAL: std::time::Duration = std::time::Duration::from_secs(3600);

/// Extends the places' horizons at start and every
/// [`HORIZON_EXTEND_INTERVAL`].
fn spawn_horizon_extender(state: Arc<BookingState>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(HORIZON_EXTEND_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match state
                .storage
                .change_places(vec![places::PlaceChange::Extend], state.clock)
                .await
            {
                Ok(Ok(s)) if s.slots_added + s.slots_removed > 0 => tracing::info!(
                    slots_added = s.slots_added,
                    slots_removed = s.slots_removed,
                    "extended the places' booking horizons"
                ),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "extending the places' booking horizons failed; tried again in an hour")
                }
            }
        }
    })
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
    /// The booking tables (and, where one process writes, the
    /// availability index that decides slots).
    pub storage: store::Booking,
    pub pii: Arc<PiiCipher>,
    /// Keys the national id's blind index (one registration per person).
    pub blind_index: Arc<BlindIndex>,
    pub one_registration: model::OneRegistration,
    /// The time zone slot times are in (`--booking-utc-offset`).
    pub clock: model::BookingClock,
    /// Wakes the confirmation worker when a registration commits.
    pub notify_worker: Arc<Notify>,
    /// Where people reach the pages (`--public-url`), for the absolute
    /// links answers carry (the `.ics`).
    pub public_url: crate::platform::public_url::PublicUrl,
}

impl ServiceState for BookingState {}

impl BookingState {
    pub async fn new(store: &Store, pii: Arc<PiiCipher>) -> anyhow::Result<BookingState> {
        Ok(BookingState {
            store: store.clone(),
            storage: store::Booking::open(store).await?,
            pii,
            // A random key until `start` sets the platform's: only tests
            // and tools that build a state by hand see this one.
            blind_index: Arc::new(BlindIndex::new(&rand::random())),
            one_registration: model::OneRegistration::Person,
            clock: model::BookingClock::UTC,
            notify_worker: Arc::new(Notify::new()),
            public_url: crate::platform::public_url::PublicUrl::new(
                None,
                std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            ),
        })
    }

    /// Takes the slot and stores the registration, and wakes the
    /// confirmation worker after a registration. The slot is the writer's
    /// to take (`store::Booking::try_register`, inside the transaction; a
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
        let outcome = self.storage.try_register(sealed).await?;
        if outcome == RegisterOutcome::Registered {
            self.notify_worker.notify_one();
        }
        Ok(outcome)
    }
}
