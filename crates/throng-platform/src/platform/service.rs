//! The service seam: what a service describes of itself ([`Service`]) and the
//! application state every router is given ([`AppState`]).
//!
//! A service is one folder under `services/` whose `mod.rs` exposes one value
//! implementing [`Service`]: its `serve` flags, seed flags and state as
//! types, its routes with their OpenAPI operations, migrations for both
//! dialects, demo seed, index-page links and start-up work (its `throng
//! bench` experiments live in the bench's crate, above the services).
//! `services::all()` lists the services once, as [`AnyService`] (the same
//! trait with its types erased, implemented once here for every service);
//! the app, the command line, the bench harness and the index page iterate
//! over that list and name no service (like a Bevy `Plugin` added once to an
//! app).
//!
//! A service's router is generic over the state and takes what it needs
//! through axum's `FromRef`: its own state (`Arc<T>` for its
//! `Service::State`, which its `start` returned) and shared parts such as
//! `Arc<TokenKeys>`. [`AppState`] provides both, so no service names the app.
//! A router is only mounted once its state is in the [`AppState`]
//! ([`AnyService::routes`]).
//!
//! Routes and the API document are one value, an [`OpenApiRouter`]:
//! `.routes(routes!(handler))` mounts a handler at the path and method its
//! `#[utoipa::path]` states and adds that operation, with the schemas it
//! names, to the service's part of `/openapi.json` (one `routes!` per path:
//! utoipa-axum mounts every handler of a `routes!` on each of its paths);
//! `.route(path, ...)` mounts what the document leaves out (pages, demo
//! conveniences, aliases).

use std::any::{Any, TypeId};
use std::future::Future;
use std::sync::Arc;

use axum::extract::FromRef;
use futures::future::BoxFuture;
pub use utoipa_axum::router::OpenApiRouter;

use super::auth::{RoleSpec, TokenKeys};
use super::crypto::PiiCipher;
use super::secrets::Secrets;
use super::session::Sessions;
use super::streams::LiveStreams;
use crate::store::{MigrationSet, Store};

/// What the platform gives every service when it starts.
#[derive(Clone)]
pub struct Platform {
    pub store: Store,
    pub keys: Arc<TokenKeys>,
    pub pii: Arc<PiiCipher>,
    /// The data directory's secrets: a service loads its own with
    /// `Secrets::key`.
    pub secrets: Arc<Secrets>,
    /// `serve --demo`: demo conveniences (such as demo tokens) may answer.
    pub demo: bool,
    /// Where browsers reach this server (`serve --public-url`).
    pub public_url: crate::platform::public_url::PublicUrl,
    /// Bounds and the stop signal of every SSE stream (`platform::streams`).
    pub streams: Arc<LiveStreams>,
    /// The event streams and log consumers the served services own.
    pub owned_events: Arc<OwnedEvents>,
    /// The admin console's sign-in links and sessions.
    pub sessions: Arc<Sessions>,
}

/// The event stream categories and log consumers of the services an app
/// serves, as each declares them (`Service::event_categories`,
/// `Service::event_consumers`): what the events API never lets a client
/// write or lease.
#[derive(Clone, Debug, Default)]
pub struct OwnedEvents {
    /// (category, owning service).
    pub categories: Vec<(&'static str, &'static str)>,
    /// (consumer, owning service).
    pub consumers: Vec<(&'static str, &'static str)>,
}

impl OwnedEvents {
    /// What the services of `list` declare.
    pub fn of(list: &[&dyn AnyService]) -> OwnedEvents {
        let declared = |f: fn(&dyn AnyService) -> &'static [&'static str]| {
            list.iter()
                .flat_map(|s| f(*s).iter().map(move |c| (*c, s.name())))
                .collect()
        };
        OwnedEvents {
            categories: declared(|s| s.event_categories()),
            consumers: declared(|s| s.event_consumers()),
        }
    }
}

/// A service's own state, found in [`AppState`] by its type.
pub trait ServiceState: Send + Sync + 'static {}

/// What a service's start-up work leaves running: its state and its
/// background tasks (workers, watchers), stopped with the server.
pub struct Started<T> {
    pub state: Arc<T>,
    pub workers: Vec<tokio::task::JoinHandle<()>>,
}

impl<T: ServiceState> Started<T> {
    pub fn new(state: Arc<T>) -> Started<T> {
        Started {
            state,
            workers: Vec::new(),
        }
    }

    pub fn with_worker(mut self, worker: tokio::task::JoinHandle<()>) -> Started<T> {
        self.workers.push(worker);
        self
    }
}

/// A service without flags of its own (`Service::Args`), or without a
/// seed (`Service::SeedArgs`, with `Service::SEED_ABOUT` left `None`). It
/// adds no argument group, so several such services share one command.
#[derive(clap::Args, Clone, Debug, Default)]
#[group(skip)]
pub struct NoArgs {}

/// A link on the index page.
pub struct Link {
    pub kind: LinkKind,
    pub href: &'static str,
    pub title: &'static str,
    /// One sentence after the title.
    pub about: &'static str,
}

impl Link {
    /// A link to a page.
    pub const fn page(href: &'static str, title: &'static str, about: &'static str) -> Link {
        Link {
            kind: LinkKind::Page,
            href,
            title,
            about,
        }
    }

    /// A link to an API endpoint, titled by its path.
    pub const fn endpoint(href: &'static str, about: &'static str) -> Link {
        Link {
            kind: LinkKind::Endpoint,
            href,
            title: href,
            about,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    Page,
    Endpoint,
}

/// An administrative page of a service, listed on the admin console
/// (`/admin/`) for the roles that may use it.
#[derive(Clone, Copy, Debug, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdminPage {
    /// The page's path on this server.
    pub href: &'static str,
    pub title: &'static str,
    /// One sentence: what is done there.
    pub about: &'static str,
    /// Roles that work there (admin works everywhere).
    #[schema(value_type = Vec<String>)]
    pub roles: &'static [&'static str],
}

/// One service, described once, with its flags, seed flags and state as
/// types. Every item but `NAME`, the three types, `start` and `routes` has
/// a default for a service without that part. The platform
/// holds services as [`AnyService`], which this trait implements for every
/// service: flags are parsed and state is filed there, once.
pub trait Service: Send + Sync + 'static {
    /// The folder's name; also its seed subcommand and log field.
    const NAME: &'static str;
    /// The `throng seed NAME` subcommand's one-line help; `None`: no seed.
    const SEED_ABOUT: Option<&'static str> = None;
    /// Its `serve` flags ([`NoArgs`] when it has none). Flag names start
    /// with the service's name unless they predate the seam.
    type Args: clap::Args + Send + 'static;
    /// Its `throng seed NAME` flags ([`NoArgs`] without a seed).
    type SeedArgs: clap::Args + Send + 'static;
    /// What its routes read through `FromRef` (`Arc<Self::State>`).
    type State: ServiceState;

    /// Its tables, for both dialects.
    fn migrations(&self) -> Option<&'static MigrationSet> {
        None
    }

    /// Runs `throng seed NAME` (only called when `SEED_ABOUT` is set).
    fn seed(
        &self,
        _store: &Store,
        _args: Self::SeedArgs,
    ) -> impl Future<Output = anyhow::Result<()>> + Send {
        async { anyhow::bail!("{} has no seed", Self::NAME) }
    }

    /// `serve --demo`: seeds a small data set when the service's tables are
    /// empty, so every page answers at once (`data_dir`: the server's, for
    /// demo files a person uses beside it).
    fn seed_demo(
        &self,
        _store: &Store,
        _data_dir: &std::path::Path,
    ) -> impl Future<Output = anyhow::Result<()>> + Send {
        async { Ok(()) }
    }

    /// Its own `throng NAME ...` command (an operator's tools talking to a
    /// server), if any: named `NAME`.
    fn command(&self) -> Option<clap::Command> {
        None
    }

    /// Runs its command with the command's matches.
    fn run_command(
        &self,
        _matches: &clap::ArgMatches,
    ) -> impl Future<Output = anyhow::Result<()>> + Send {
        async { anyhow::bail!("{} has no command", Self::NAME) }
    }

    /// `throng NAME ...`: the service's operator commands on the store
    /// itself (subcommands of a command named after the service, given
    /// the store's flags), where [`Service::command`]'s talk to a server;
    /// a service has one or the other.
    fn store_command(&self) -> Option<clap::Command> {
        None
    }

    /// Runs `throng NAME ...` with the matches of [`Service::store_command`]
    /// on the store its flags name.
    fn run_store_command(
        &self,
        _store: &Store,
        _matches: &clap::ArgMatches,
    ) -> impl Future<Output = anyhow::Result<()>> + Send {
        async { anyhow::bail!("{} has no commands", Self::NAME) }
    }

    /// Start-up work: builds the service's state and spawns its workers.
    fn start(
        &self,
        platform: &Platform,
        args: Self::Args,
    ) -> impl Future<Output = anyhow::Result<Started<Self::State>>> + Send;

    /// Its routes, pages included, and their part of `/openapi.json`: each
    /// documented handler's `#[utoipa::path]` states its path, method,
    /// answers and bounds (from the constants its parsers check, see
    /// `platform::openapi`), and the router is built from those.
    fn routes(&self) -> OpenApiRouter<AppState>;

    /// Its lines on the index page.
    fn links(&self) -> Vec<Link> {
        Vec::new()
    }

    /// Its administrative pages, listed on the admin console; they work
    /// with the console's session as well as with a pasted token.
    fn admin_pages(&self) -> &'static [AdminPage] {
        &[]
    }

    /// The categories of its event streams (a stream `{category}-{id}`):
    /// the events API reads them and never lets a client append to them.
    fn event_categories(&self) -> &'static [&'static str] {
        &[]
    }

    /// The names of its workers' log consumers (`booking-notifier`): the
    /// events API never lets a client lease or move them.
    fn event_consumers(&self) -> &'static [&'static str] {
        &[]
    }

    /// The token roles its handlers check (`Caller::require`), beside the
    /// platform's admin.
    fn roles(&self) -> &'static [RoleSpec] {
        &[]
    }

    /// Routes taking bodies larger than `--body-limit-bytes`, with their
    /// own bounds.
    fn large_bodies(&self) -> &'static [crate::platform::body_limit::LargeBody] {
        &[]
    }

    /// Routes (method, path template) whose every request is an act of
    /// someone who must stay anonymous (a vote): not counted on `/metrics`
    /// while it is served on the public address, where its counter would
    /// date each act (counted with `--metrics-listen`).
    fn uncounted_in_public_metrics(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }
}

/// A started service as the app keeps it: its state filed by type.
pub struct StartedPart {
    state: (TypeId, Arc<dyn Any + Send + Sync>),
    pub workers: Vec<tokio::task::JoinHandle<()>>,
}

/// A service as the app, the command line, the bench harness and the index
/// page hold it (`services::all()`): [`Service`] with its types erased. Only
/// the blanket implementation below exists; a service implements
/// [`Service`].
pub trait AnyService: Send + Sync + 'static {
    fn name(&self) -> &'static str;
    fn migrations(&self) -> Option<&'static MigrationSet>;
    /// Adds its `serve` flags.
    fn serve_args(&self, cmd: clap::Command) -> clap::Command;
    /// Its `throng seed NAME` subcommand, if it has a seed.
    fn seed_command(&self) -> Option<clap::Command>;
    /// Runs `throng seed NAME` with the subcommand's matches.
    fn seed<'a>(
        &'a self,
        store: &'a Store,
        matches: &'a clap::ArgMatches,
    ) -> BoxFuture<'a, anyhow::Result<()>>;
    fn seed_demo<'a>(
        &'a self,
        store: &'a Store,
        data_dir: &'a std::path::Path,
    ) -> BoxFuture<'a, anyhow::Result<()>>;
    /// Its `throng NAME ...` commands on the store, if it has some.
    fn store_command(&self) -> Option<clap::Command>;
    /// Runs `throng NAME ...` on `store` with the command's matches.
    fn run_store_command<'a>(
        &'a self,
        store: &'a Store,
        matches: &'a clap::ArgMatches,
    ) -> BoxFuture<'a, anyhow::Result<()>>;
    /// Parses its flags from `serve`'s matches and starts it.
    fn start<'a>(
        &'a self,
        platform: &'a Platform,
        matches: &'a clap::ArgMatches,
    ) -> BoxFuture<'a, anyhow::Result<StartedPart>>;
    /// Its routes and their operations, once `state` holds what they read:
    /// a service whose state is missing is an error at start-up, not a
    /// panic in a handler.
    fn routes(&self, state: &AppState) -> anyhow::Result<OpenApiRouter<AppState>>;
    fn links(&self) -> Vec<Link>;
    fn admin_pages(&self) -> &'static [AdminPage];
    fn event_categories(&self) -> &'static [&'static str];
    fn event_consumers(&self) -> &'static [&'static str];
    fn roles(&self) -> &'static [RoleSpec];
    fn large_bodies(&self) -> &'static [crate::platform::body_limit::LargeBody];
    fn uncounted_in_public_metrics(&self) -> &'static [(&'static str, &'static str)];
    /// Its `throng NAME` command, if it has one.
    fn command(&self) -> Option<clap::Command>;
    /// Runs `throng NAME ...` with the command's matches.
    fn run_command<'a>(
        &'a self,
        matches: &'a clap::ArgMatches,
    ) -> BoxFuture<'a, anyhow::Result<()>>;
}

impl<S: Service> AnyService for S {
    fn name(&self) -> &'static str {
        S::NAME
    }

    fn migrations(&self) -> Option<&'static MigrationSet> {
        Service::migrations(self)
    }

    fn serve_args(&self, cmd: clap::Command) -> clap::Command {
        <S::Args as clap::Args>::augment_args(cmd)
    }

    fn seed_command(&self) -> Option<clap::Command> {
        let about = S::SEED_ABOUT?;
        Some(<S::SeedArgs as clap::Args>::augment_args(
            clap::Command::new(S::NAME).about(about),
        ))
    }

    fn seed<'a>(
        &'a self,
        store: &'a Store,
        matches: &'a clap::ArgMatches,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            let args = <S::SeedArgs as clap::FromArgMatches>::from_arg_matches(matches)?;
            Service::seed(self, store, args).await
        })
    }

    fn seed_demo<'a>(
        &'a self,
        store: &'a Store,
        data_dir: &'a std::path::Path,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(Service::seed_demo(self, store, data_dir))
    }

    fn store_command(&self) -> Option<clap::Command> {
        Service::store_command(self)
    }

    fn run_store_command<'a>(
        &'a self,
        store: &'a Store,
        matches: &'a clap::ArgMatches,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(Service::run_store_command(self, store, matches))
    }

    fn start<'a>(
        &'a self,
        platform: &'a Platform,
        matches: &'a clap::ArgMatches,
    ) -> BoxFuture<'a, anyhow::Result<StartedPart>> {
        Box::pin(async move {
            let args = <S::Args as clap::FromArgMatches>::from_arg_matches(matches)?;
            let started = Service::start(self, platform, args).await?;
            Ok(StartedPart {
                state: (TypeId::of::<S::State>(), started.state),
                workers: started.workers,
            })
        })
    }

    fn routes(&self, state: &AppState) -> anyhow::Result<OpenApiRouter<AppState>> {
        if state.part::<S::State>().is_none() {
            anyhow::bail!(
                "the {} service's routes need its state ({}), and it did not start",
                S::NAME,
                std::any::type_name::<S::State>()
            );
        }
        Ok(Service::routes(self))
    }

    fn links(&self) -> Vec<Link> {
        Service::links(self)
    }

    fn admin_pages(&self) -> &'static [AdminPage] {
        Service::admin_pages(self)
    }

    fn event_categories(&self) -> &'static [&'static str] {
        Service::event_categories(self)
    }
    fn event_consumers(&self) -> &'static [&'static str] {
        Service::event_consumers(self)
    }

    fn roles(&self) -> &'static [RoleSpec] {
        Service::roles(self)
    }

    fn large_bodies(&self) -> &'static [crate::platform::body_limit::LargeBody] {
        Service::large_bodies(self)
    }

    fn uncounted_in_public_metrics(&self) -> &'static [(&'static str, &'static str)] {
        Service::uncounted_in_public_metrics(self)
    }

    fn command(&self) -> Option<clap::Command> {
        Service::command(self)
    }

    fn run_command<'a>(
        &'a self,
        matches: &'a clap::ArgMatches,
    ) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(Service::run_command(self, matches))
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
    pub sessions: Arc<Sessions>,
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
    pub fn new(platform: &Platform, started: &[StartedPart]) -> AppState {
        AppState(Arc::new(AppStateInner {
            store: platform.store.clone(),
            keys: platform.keys.clone(),
            pii: platform.pii.clone(),
            streams: platform.streams.clone(),
            sessions: platform.sessions.clone(),
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
        // `AnyService::routes` mounts a service's routes only once its
        // state is here, so a service's own routes always find it.
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

impl FromRef<AppState> for Arc<Sessions> {
    fn from_ref(s: &AppState) -> Self {
        s.sessions.clone()
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
