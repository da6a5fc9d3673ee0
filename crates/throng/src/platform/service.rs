//! The service seam: what a service describes of itself ([`Service`]) and the
//! application state every router is given ([`AppState`]).
//!
//! A service is one folder under `services/` whose `mod.rs` exposes one value
//! implementing [`Service`]: its router, OpenAPI document, migrations for both
//! dialects, `serve` flags, seed and demo seed, bench experiments, index-page
//! links and start-up work. `services::all()` lists the services once; the
//! app, the command line, the bench harness and the index page iterate over
//! that list and name no service (like a Bevy `Plugin` added once to an app).
//!
//! A service's router is generic over the state and takes what it needs
//! through axum's `FromRef`: its own state (`Arc<T>` for a `T:
//! ServiceState`, which its `start` returned) and shared parts such as
//! `Arc<TokenKeys>`. [`AppState`] provides both, so no service names the app.

use std::any::{Any, TypeId};
use std::sync::Arc;

use axum::extract::FromRef;
use axum::Router;
use futures::future::BoxFuture;

use super::auth::TokenKeys;
use super::crypto::{BlindIndex, PiiCipher};
use super::experiment::Experiment;
use super::streams::LiveStreams;
use crate::store::{MigrationSet, Store};

/// What the platform gives every service when it starts.
#[derive(Clone)]
pub struct Platform {
    pub store: Store,
    pub keys: Arc<TokenKeys>,
    pub pii: Arc<PiiCipher>,
    /// Keyed lookups of personal values (see `crypto::BlindIndex`).
    pub blind_index: Arc<BlindIndex>,
    /// Voting's receipt key (`secrets::Secrets::voting_receipt_key`).
    pub voting_receipt_key: [u8; 32],
    /// `serve --demo`: demo conveniences (such as demo tokens) may answer.
    pub demo: bool,
    /// Where browsers reach this server (`serve --public-url`).
    pub public_url: crate::platform::public_url::PublicUrl,
    /// Bounds and the stop signal of every SSE stream (`platform::streams`).
    pub streams: Arc<LiveStreams>,
}

/// A service's own state, found in [`AppState`] by its type.
pub trait ServiceState: Send + Sync + 'static {}

/// What a service's start-up work leaves running.
pub struct Started {
    state: (TypeId, Arc<dyn Any + Send + Sync>),
    /// Background tasks (workers, watchers), stopped with the server.
    pub workers: Vec<tokio::task::JoinHandle<()>>,
}

impl Started {
    pub fn new<T: ServiceState>(state: Arc<T>) -> Started {
        Started {
            state: (TypeId::of::<T>(), state),
            workers: Vec::new(),
        }
    }

    pub fn with_worker(mut self, worker: tokio::task::JoinHandle<()>) -> Started {
        self.workers.push(worker);
        self
    }
}

/// A link on the index page.
pub struct Link {
    pub kind: LinkKind,
    pub href: &'static str,
    pub title: &'static str,
    /// One sentence after the title.
    pub about: &'static str,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    Page,
    Endpoint,
}

/// One service, described once. Every method but `name`, `router`,
/// `openapi` and `start` has a default for a service without that part.
pub trait Service: Send + Sync + 'static {
    /// The folder's name; also its seed subcommand and log field.
    fn name(&self) -> &'static str;

    /// Its tables, for both dialects.
    fn migrations(&self) -> Option<&'static MigrationSet> {
        None
    }

    /// Adds its `serve` flags (a derived `clap::Args::augment_args`). Flag
    /// names start with the service's name unless they predate the seam.
    fn serve_args(&self, cmd: clap::Command) -> clap::Command {
        cmd
    }

    /// Its `throng seed NAME` subcommand (named `self.name()`), if any.
    fn seed_command(&self) -> Option<clap::Command> {
        None
    }

    /// Runs `throng seed NAME` with the subcommand's matches.
    fn seed<'a>(
        &'a self,
        _store: &'a Store,
        _args: &'a clap::ArgMatches,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async { anyhow::bail!("{} has no seed", self.name()) })
    }

    /// `serve --demo`: seeds a small data set when the service's tables are
    /// empty, so every page answers at once.
    fn seed_demo<'a>(&'a self, _store: &'a Store) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }

    /// Start-up work: builds the service's state (found by routers through
    /// `FromRef`) and spawns its workers. `args` are `serve`'s matches.
    fn start<'a>(
        &'a self,
        platform: &'a Platform,
        args: &'a clap::ArgMatches,
    ) -> BoxFuture<'a, anyhow::Result<Started>>;

    /// Its routes, pages included.
    fn router(&self) -> Router<AppState>;

    /// Its part of `/openapi.json`.
    fn openapi(&self) -> utoipa::openapi::OpenApi;

    /// Edits the merged `/openapi.json` (as JSON) to state what its types
    /// do not (patterns, enums, bodies parsed by hand), from the constants
    /// its handlers check; helpers in `platform::openapi` (bounds go on the
    /// types, through `schema_type!`). Runs before the platform's shared
    /// answers are added.
    fn openapi_limits(&self, _doc: &mut serde_json::Value) {}

    /// Its lines on the index page.
    fn links(&self) -> Vec<Link> {
        Vec::new()
    }

    /// The categories of its event streams (a stream `{category}-{id}`):
    /// the events API reads them and never lets a client append to them.
    fn event_categories(&self) -> &'static [&'static str] {
        &[]
    }

    /// Its `throng bench` experiments.
    fn experiments(&self) -> Vec<Box<dyn Experiment>> {
        Vec::new()
    }
}

/// What every router is given: the platform's parts and each started
/// service's state. One `Arc` around it: axum clones the state for every
/// request, and one reference count is cheaper than one per field (the
/// counts' cache lines bounce between the cores under load).
#[derive(Clone)]
pub struct AppState(Arc<AppStateInner>);

pub struct AppStateInner {
    pub store: Store,
    pub keys: Arc<TokenKeys>,
    pub pii: Arc<PiiCipher>,
    pub streams: Arc<LiveStreams>,
    /// Started services' states by type; a handful, so a scan beats a hash.
    parts: Vec<(TypeId, Arc<dyn Any + Send + Sync>)>,
    /// Set when the node is stopping: `/ready` answers 503 so a balancer
    /// takes it out while it still serves (see `cli::serve`, `--drain-ms`).
    draining: std::sync::atomic::AtomicBool,
}

impl std::ops::Deref for AppState {
    type Target = AppStateInner;
    fn deref(&self) -> &AppStateInner {
        &self.0
    }
}

impl AppState {
    pub fn new(platform: &Platform, started: &[Started]) -> AppState {
        AppState(Arc::new(AppStateInner {
            store: platform.store.clone(),
            keys: platform.keys.clone(),
            pii: platform.pii.clone(),
            streams: platform.streams.clone(),
            parts: started.iter().map(|s| s.state.clone()).collect(),
            draining: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    /// From now on `/ready` fails; requests are still served, but every
    /// SSE stream ends and no new one opens (a stop never waits on them).
    pub fn begin_drain(&self) {
        self.0
            .draining
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.0.streams.stop();
    }

    pub fn draining(&self) -> bool {
        self.0.draining.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A started service's state.
    pub fn part<T: ServiceState>(&self) -> Option<Arc<T>> {
        let id = TypeId::of::<T>();
        let (_, any) = self.0.parts.iter().find(|(t, _)| *t == id)?;
        any.clone().downcast::<T>().ok()
    }
}

impl<T: ServiceState> FromRef<AppState> for Arc<T> {
    fn from_ref(s: &AppState) -> Arc<T> {
        s.part::<T>().unwrap_or_else(|| {
            panic!(
                "{} is routed but its service did not start",
                std::any::type_name::<T>()
            )
        })
    }
}

impl FromRef<AppState> for Arc<TokenKeys> {
    fn from_ref(s: &AppState) -> Self {
        s.keys.clone()
    }
}

impl FromRef<AppState> for Arc<LiveStreams> {
    fn from_ref(s: &AppState) -> Self {
        s.streams.clone()
    }
}

impl FromRef<AppState> for Store {
    fn from_ref(s: &AppState) -> Self {
        s.store.clone()
    }
}
