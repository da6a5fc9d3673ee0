//! Events: the store's event log read and written as an event store (the
//! event store write-up): streams with versions, appends with an
//! expected version and idempotent by event id, reads by stream, by
//! category and in the global order, tombstones; payloads as MessagePack
//! maps compressed with LZ4 (`codec.rs`).
//!
//! There is one log: the services' own events (booking's registrations,
//! voting's ballots, comments) are streams of it, readable here and never
//! writable through this API (each service lists its categories in
//! `Service::event_categories`). The log's table, its positions and the
//! conditional append live in `store/` (`eventlog.rs`, `streams.rs`); this
//! folder parses, checks limits and access, and encodes payloads.

pub mod codec;
pub mod generator;
pub mod http;
pub mod model;
pub mod seed;
pub mod subscribe;

use std::sync::Arc;

use crate::platform::service::{
    AppState, Link, LinkKind, OpenApiRouter, OwnedEvents, Platform, Service, ServiceState, Started,
};
use crate::store::Store;

/// The events service, as `services::all()` lists it.
pub struct Events;

/// `serve` flags of the events service: its limits.
/// `--events-read-max`'s default, also the bound `/openapi.json` states.
pub const READ_MAX_DEFAULT: i64 = 1000;
/// `--events-per-append-max`'s default, also the bound `/openapi.json` states.
pub const PER_APPEND_MAX_DEFAULT: usize = 100;

#[derive(Clone, Debug, clap::Args)]
pub struct EventsArgs {
    /// Bytes of one event's data plus metadata at most, as uncompressed
    /// MessagePack (an LZ4 block claiming more is refused before it is
    /// decompressed). The request body is also bounded by --body-limit-bytes.
    #[arg(
        long = "events-event-bytes-max",
        env = "THRONG_EVENTS_EVENT_BYTES_MAX",
        default_value_t = 32 * 1024
    )]
    pub event_bytes_max: usize,
    /// Events in one append at most.
    #[arg(
        long = "events-per-append-max",
        env = "THRONG_EVENTS_PER_APPEND_MAX",
        default_value_t = PER_APPEND_MAX_DEFAULT
    )]
    pub per_append_max: usize,
    /// Events in one read page at most (`limit`).
    #[arg(
        long = "events-read-max",
        env = "THRONG_EVENTS_READ_MAX",
        default_value_t = READ_MAX_DEFAULT
    )]
    pub read_max: i64,
    /// Positions a filtered read (type, type prefix, category) scans at
    /// most per page; its `next` moves past them.
    #[arg(
        long = "events-scan-max",
        env = "THRONG_EVENTS_SCAN_MAX",
        default_value_t = 10_000
    )]
    pub scan_max: i64,
    /// Subscriptions (server-sent events and long polls) open at once at
    /// most; past it, 503.
    #[arg(
        long = "events-subscribers-max",
        env = "THRONG_EVENTS_SUBSCRIBERS_MAX",
        default_value_t = 1000
    )]
    pub subscribers_max: usize,
}

impl Default for EventsArgs {
    fn default() -> Self {
        EventsArgs {
            event_bytes_max: 32 * 1024,
            per_append_max: PER_APPEND_MAX_DEFAULT,
            read_max: READ_MAX_DEFAULT,
            scan_max: 10_000,
            subscribers_max: 1000,
        }
    }
}

/// What the events routes share.
pub struct EventsState {
    pub store: Store,
    pub limits: EventsArgs,
    /// Categories whose streams a service writes and consumers a service's
    /// worker runs, of the services served; never written or leased through
    /// the API.
    pub owned: Arc<OwnedEvents>,
    pub subscribers: Arc<tokio::sync::Semaphore>,
    /// Woken after each append through the API, so live subscribers read
    /// at once (they also poll, for other writers and nodes).
    pub appended: tokio::sync::watch::Sender<i64>,
}

impl ServiceState for EventsState {}

impl EventsState {
    pub fn new(store: Store, limits: EventsArgs, owned: Arc<OwnedEvents>) -> EventsState {
        EventsState {
            store,
            subscribers: Arc::new(tokio::sync::Semaphore::new(limits.subscribers_max)),
            limits,
            owned,
            appended: tokio::sync::watch::channel(0).0,
        }
    }

    /// The service whose worker a consumer is (`booking-notifier`,
    /// `voting-tally`, as the services declare them), if any.
    pub fn consumer_owner(&self, consumer: &str) -> Option<&'static str> {
        self.owned
            .consumers
            .iter()
            .find(|(c, _)| *c == consumer)
            .map(|(_, service)| *service)
    }

    /// The service that writes streams of `category`, if one does; the
    /// category is compared whatever its case (`Ballots` and `BALLOTS` are
    /// the voting service's as `ballots` is).
    pub fn owner_of(&self, category: &str) -> Option<&'static str> {
        self.owned
            .categories
            .iter()
            .find(|(c, _)| c.eq_ignore_ascii_case(category))
            .map(|(_, s)| *s)
    }
}

impl Service for Events {
    const NAME: &'static str = "events";
    const SEED_ABOUT: Option<&'static str> =
        Some("MonthlyFeeCharged-shaped events (~9.4 KB as JSON) stored as MessagePack+LZ4");
    type Args = EventsArgs;
    type SeedArgs = seed::SeedEventsArgs;
    type State = EventsState;

    async fn seed(&self, store: &Store, args: seed::SeedEventsArgs) -> anyhow::Result<()> {
        let r = seed::seed(store, &args, true).await?;
        println!(
            "seeded {} events ({} streams, {:.1} MB of payload) in {:.1} s ({:.0} events/s)",
            r.events,
            r.streams,
            r.payload_bytes as f64 / 1e6,
            r.elapsed_s,
            r.events as f64 / r.elapsed_s.max(1e-9)
        );
        Ok(())
    }

    async fn start(
        &self,
        platform: &Platform,
        args: EventsArgs,
    ) -> anyhow::Result<Started<EventsState>> {
        if args.per_append_max == 0 || args.read_max < 1 || args.scan_max < 1 {
            anyhow::bail!(
                "--events-per-append-max, --events-read-max and --events-scan-max: 1 or more"
            );
        }
        Ok(Started::new(Arc::new(EventsState::new(
            platform.store.clone(),
            args,
            platform.owned_events.clone(),
        ))))
    }

    fn routes(&self) -> OpenApiRouter<AppState> {
        http::routes()
    }

    fn links(&self) -> Vec<Link> {
        vec![Link {
            kind: LinkKind::Endpoint,
            href: "/docs/#op-get-api-events-all",
            title: "GET /api/events/all",
            about:
                "every event in commit order; needs an admin token (the link opens its reference).",
        }]
    }
}
