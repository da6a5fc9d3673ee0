//! Assembles the server: configuration, the platform's parts, every service
//! of `services::all()` started, routed, documented and linked, and
//! start/stop. Names no service.

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, Method, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::sync::oneshot;

use crate::base::metrics;
use crate::platform::admission::{self, Admission, AdmissionLimits};
use crate::platform::audit::Audit;
use crate::platform::auth::{TokenKeys, PLATFORM_ROLES};
use crate::platform::body_limit::BodyLimits;
use crate::platform::client_addr::TrustedProxies;
use crate::platform::console::ConsolePages;
use crate::platform::crypto::PiiCipher;
use crate::platform::error::ApiError;
use crate::platform::headers;
use crate::platform::secrets::Secrets;
use crate::platform::server::{serve, ConnLimits};
use crate::platform::service::{AnyService, LinkKind, OpenApiRouter, Platform};
use crate::platform::session::Sessions;
use crate::platform::streams::LiveStreams;
use crate::services;
use crate::store::{Store, StoreLimits, StoreUrl};

pub use crate::platform::service::AppState;

/// Where data and secrets live. Global, so `throng seed comments --data-dir X`
/// works as well as `throng seed --data-dir X comments`.
#[derive(Clone, Debug, clap::Args)]
pub struct StoreArgs {
    /// sqlite:PATH or postgres://user@host:port/db (default sqlite:DATA_DIR/throng.db).
    #[arg(long, env = "THRONG_STORE", global = true)]
    pub store: Option<StoreUrl>,
    /// Folder for the SQLite file and generated secrets (PII key, token secret).
    #[arg(
        long,
        env = "THRONG_DATA_DIR",
        default_value = "./throng-data",
        global = true
    )]
    pub data_dir: PathBuf,
    /// Write commands applied in one transaction at most (group commit).
    #[arg(long, env = "THRONG_BATCH_COMMANDS_MAX", default_value_t = 512)]
    pub batch_commands_max: usize,
    /// Read connections (SQLite) or pooled connections (PostgreSQL).
    #[arg(long, env = "THRONG_READ_CONNECTIONS", default_value_t = 4)]
    pub read_connections: usize,
    /// PostgreSQL: writer tasks per node, each with a connection of its own
    /// (apart from the read connections) and its own batch of commands.
    #[arg(long, env = "THRONG_PG_WRITERS", default_value_t = StoreLimits::default().pg_writers, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=64))]
    pub pg_writers: usize,
    /// Under load, microseconds the SQLite writer waits for more commands
    /// before committing, so more share one fsync (0: off).
    #[arg(long, env = "THRONG_COMMIT_DELAY_US", default_value_t = 0)]
    pub commit_delay_us: u64,
    /// SQLite page cache of the writer's connection, in MiB (each read
    /// connection gets a quarter, at least 512 KiB; they read through a
    /// memory map, so theirs stays small). The writer's fills up to this
    /// with the pages it touches and keeps them: resident memory.
    #[arg(long, env = "THRONG_SQLITE_CACHE_MIB", default_value_t = StoreLimits::default().sqlite_cache_kib / 1024)]
    pub sqlite_cache_mib: i64,
}

impl StoreArgs {
    pub fn url(&self) -> StoreUrl {
        self.store
            .clone()
            .unwrap_or_else(|| StoreUrl::Sqlite(self.data_dir.join("throng.db")))
    }
    pub fn limits(&self) -> StoreLimits {
        StoreLimits {
            batch_commands_max: self.batch_commands_max,
            read_connections: self.read_connections,
            pg_writers: self.pg_writers,
            commit_delay_us: self.commit_delay_us,
            sqlite_cache_kib: self.sqlite_cache_mib.saturating_mul(1024),
            ..StoreLimits::default()
        }
    }
}

#[derive(Clone, Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, env = "THRONG_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// The URL browsers reach this server at, e.g. https://throng.example.com
    /// behind a proxy or TLS terminator (a path prefix is kept): the base of
    /// absolute URLs handed out for other sites (the invitation snippet).
    /// Unset: http:// and the request's Host header (or --listen).
    #[arg(long, env = "THRONG_PUBLIC_URL", value_parser = crate::platform::public_url::parse)]
    pub public_url: Option<String>,
    #[command(flatten)]
    pub store: StoreArgs,
    /// Requests in flight at most; past it, 429 with Retry-After at once.
    #[arg(long, env = "THRONG_IN_FLIGHT_MAX", default_value_t = 1024)]
    pub in_flight_max: usize,
    /// Seconds sent in Retry-After when over capacity.
    #[arg(long, env = "THRONG_RETRY_AFTER_S", default_value_t = 1)]
    pub retry_after_s: u64,
    /// Request bodies over this many bytes get 413.
    #[arg(long, env = "THRONG_BODY_LIMIT_BYTES", default_value_t = 64 * 1024)]
    pub body_limit_bytes: usize,
    /// Per-client rate limit (GCRA), requests per second; off when absent.
    /// A client is an IPv4 address or an IPv6 /64 (see --trusted-proxies).
    #[arg(long, env = "THRONG_RATE_LIMIT_PER_S")]
    pub rate_limit_per_s: Option<u32>,
    /// Burst allowed by the per-client rate limit.
    #[arg(long, env = "THRONG_RATE_LIMIT_BURST", default_value_t = 20)]
    pub rate_limit_burst: u32,
    /// Clients the rate limiter remembers at most; idle ones are pruned
    /// every second, and while the table is full new clients share one
    /// budget.
    #[arg(long, env = "THRONG_RATE_LIMIT_KEYS_MAX", default_value_t = 100_000)]
    pub rate_limit_keys_max: usize,
    /// Proxies (addresses or CIDRs, comma-separated) whose X-Forwarded-For
    /// is believed: the client is the rightmost address not in this list.
    /// Empty: the TCP peer is the client and X-Forwarded-For is ignored.
    #[arg(long, env = "THRONG_TRUSTED_PROXIES", value_delimiter = ',', value_parser = crate::platform::client_addr::parse_net)]
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// Replaced by --trusted-proxies (it believed any client's header).
    #[arg(long, env = "THRONG_TRUST_FORWARDED_FOR", hide = true)]
    pub trust_forwarded_for: bool,
    /// Milliseconds from a request's first byte to the end of its head;
    /// past it the connection is closed.
    #[arg(long, env = "THRONG_HEADER_READ_TIMEOUT_MS", default_value_t = 10_000)]
    pub header_read_timeout_ms: u64,
    /// Milliseconds from a request's head to its body's last byte; past it
    /// the answer is 408 body_timeout and the connection is closed.
    #[arg(long, env = "THRONG_BODY_TIMEOUT_MS", default_value_t = 10_000)]
    pub body_timeout_ms: u64,
    /// Milliseconds a connection may sit with no request running and no
    /// byte moving (keep-alive, or a client that never writes) before it
    /// is closed. Keep it above 15000 to let SSE keep-alives through.
    #[arg(long, env = "THRONG_IDLE_TIMEOUT_MS", default_value_t = 60_000)]
    pub idle_timeout_ms: u64,
    /// Milliseconds a request may take from its head to its answer (body
    /// included); past it the answer is 503 request_timeout. A live stream
    /// (SSE) ends after this long and its client reconnects.
    #[arg(long, env = "THRONG_REQUEST_TIMEOUT_MS", default_value_t = 30_000)]
    pub request_timeout_ms: u64,
    /// Open connections at most; past it new ones are closed at once.
    #[arg(long, env = "THRONG_CONNECTIONS_MAX", default_value_t = 8192)]
    pub connections_max: usize,
    /// Open connections per client (IPv4 address or IPv6 /64) at most;
    /// trusted proxies are exempt.
    #[arg(
        long,
        env = "THRONG_CONNECTIONS_PER_CLIENT_MAX",
        default_value_t = 1024
    )]
    pub connections_per_client_max: usize,
    /// Seed a small demo data set when the store is empty. Demo endpoints
    /// hand out tokens to anyone, so a store holding data that the demo did
    /// not make is refused.
    #[arg(long)]
    pub demo: bool,
    /// Milliseconds a stopping node (SIGTERM, Ctrl-C) keeps serving while
    /// `/ready` answers 503, so a balancer's health checks take it out
    /// before it stops accepting; then requests in flight finish and it
    /// exits. Keep it above the balancer's check interval x fall count
    /// (deploy/haproxy.cfg: 1 s x 2). A second signal skips the rest.
    /// Live streams (SSE) end when the drain begins, so clients reconnect
    /// to another node; no new one opens on this node.
    #[arg(long, env = "THRONG_DRAIN_MS", default_value_t = 3_000)]
    pub drain_ms: u64,
    /// Serve /metrics on this address only (e.g. 127.0.0.1:9100), not on
    /// --listen; absent, /metrics is on --listen with everything else.
    #[arg(long, env = "THRONG_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// An identity provider's tokens, and the revocations' refresh.
    #[command(flatten)]
    pub identity: crate::platform::identity::IdentityArgs,
    /// Every service's own flags (see each service's `serve_args`).
    #[command(flatten)]
    pub services: ServiceArgs,
}

/// The flags services add to `serve`, kept as matches: each service parses
/// its own part at start (`Service::start`), so this type names none.
#[derive(Clone, Debug, Default)]
pub struct ServiceArgs(pub clap::ArgMatches);

impl clap::FromArgMatches for ServiceArgs {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        Ok(ServiceArgs(m.clone()))
    }
    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.0 = m.clone();
        Ok(())
    }
}

impl clap::Args for ServiceArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        services::all().iter().fold(cmd, |c, s| s.serve_args(c))
    }
    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// Opens the store and checks that the PII key is the one its data was sealed
/// with (a fingerprint is kept in `meta`).
pub async fn open_store(args: &StoreArgs) -> anyhow::Result<(Store, Secrets)> {
    open_store_for(args, services::all()).await
}

/// `open_store` with the migrations of `list` instead of `services::all()`.
pub async fn open_store_for(
    args: &StoreArgs,
    list: &[&'static dyn AnyService],
) -> anyhow::Result<(Store, Secrets)> {
    let secrets = Secrets::load_or_create(&args.data_dir)?;
    let migrations: Vec<_> = list.iter().filter_map(|s| s.migrations()).collect();
    let store = Store::open_with(&args.url(), args.limits(), &migrations).await?;
    let pii = PiiCipher::new(&secrets.pii_key);
    let stored = store
        .meta_set_once("pii_key_fingerprint", pii.fingerprint())
        .await?;
    if stored != pii.fingerprint() {
        anyhow::bail!(
            "the personal data in {} was sealed with another PII key than {}; start with the \
             data directory (or THRONG_PII_KEY) that this store was created with",
            args.url(),
            args.data_dir.join("pii.key").display()
        );
    }
    Ok((store, secrets))
}

impl ServeArgs {
    /// Checks the limits together; an error names the flag to change.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.trust_forwarded_for {
            anyhow::bail!(
                "--trust-forwarded-for believed any client's X-Forwarded-For; name the proxies \
                 instead, e.g. --trusted-proxies 10.0.0.5,10.1.0.0/16"
            );
        }
        for (name, v) in [
            ("--header-read-timeout-ms", self.header_read_timeout_ms),
            ("--body-timeout-ms", self.body_timeout_ms),
            ("--idle-timeout-ms", self.idle_timeout_ms),
            ("--request-timeout-ms", self.request_timeout_ms),
            ("--connections-max", self.connections_max as u64),
            (
                "--connections-per-client-max",
                self.connections_per_client_max as u64,
            ),
            ("--rate-limit-keys-max", self.rate_limit_keys_max as u64),
        ] {
            if v == 0 {
                anyhow::bail!("{name} must be at least 1");
            }
        }
        if self.request_timeout_ms < self.body_timeout_ms {
            anyhow::bail!(
                "--request-timeout-ms ({}) must be at least --body-timeout-ms ({}): the body is \
                 read within the request's time",
                self.request_timeout_ms,
                self.body_timeout_ms
            );
        }
        TrustedProxies::new(self.trusted_proxies.clone())?;
        self.identity.provider()?;
        self.identity.revocation_refresh()?;
        if self.connections_max > u32::MAX as usize {
            anyhow::bail!("--connections-max must be at most {}", u32::MAX);
        }
        Ok(())
    }

    /// Admission control, keyed through `proxies` (one copy, shared with
    /// the accept loop).
    pub fn admission(
        &self,
        proxies: Arc<TrustedProxies>,
        large: Arc<Vec<crate::platform::body_limit::LargeBody>>,
        uncounted: Arc<Vec<(&'static str, &'static str)>>,
    ) -> Arc<Admission> {
        Admission::new(
            AdmissionLimits {
                in_flight_max: self.in_flight_max,
                retry_after_s: self.retry_after_s,
                request_timeout: Duration::from_millis(self.request_timeout_ms),
                rate_limit_per_s: self.rate_limit_per_s.and_then(NonZeroU32::new),
                rate_limit_burst: self.rate_limit_burst,
                rate_limit_keys_max: self.rate_limit_keys_max,
                large,
                uncounted,
            },
            proxies,
        )
    }

    pub fn proxies(&self) -> Arc<TrustedProxies> {
        Arc::new(
            TrustedProxies::new(self.trusted_proxies.clone())
                .expect("checked by --trusted-proxies' parser and ServeArgs::check"),
        )
    }

    pub fn conn_limits(&self) -> ConnLimits {
        ConnLimits {
            header_read_timeout: Duration::from_millis(self.header_read_timeout_ms),
            idle_timeout: Duration::from_millis(self.idle_timeout_ms),
            connections_max: self.connections_max,
            connections_per_client_max: self.connections_per_client_max,
            shutdown_grace: Duration::from_millis(self.request_timeout_ms),
        }
    }
}

/// The app's router over the services of `list`, behind `adm`.
pub fn router_for(
    state: AppState,
    args: &ServeArgs,
    list: &[&'static dyn AnyService],
    adm: Arc<Admission>,
) -> anyhow::Result<Router> {
    let mut services = OpenApiRouter::default();
    for s in list {
        services = services.merge(s.routes(&state)?);
    }
    services = services.merge(crate::platform::console::routes(console_pages(list)));
    services = services.merge(crate::platform::identity::http::routes());
    let (services, doc) = services.split_for_parts();
    // Built once per server; a clone of `Bytes` is a reference count.
    let index_html = bytes::Bytes::from(index_html(list));
    let openapi = bytes::Bytes::from(openapi_json(doc, args.metrics_listen.is_none()));
    let platform_routes = Router::new()
        .route(
            "/",
            get(move || {
                let page = index_html.clone();
                async move { Html(page) }
            }),
        )
        .merge(crate::platform::docs::router())
        .merge(crate::platform::assets::router())
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route(
            "/openapi.json",
            get(move || {
                let doc = openapi.clone();
                async move { ([(header::CONTENT_TYPE, "application/json")], doc) }
            }),
        );
    let platform_routes = match args.metrics_listen {
        Some(_) => platform_routes,
        None => platform_routes.route("/metrics", get(metrics_text)),
    };
    let routes = platform_routes.merge(services);
    let audit = Arc::new(Audit::new(
        state.store.clone(),
        state.sessions.clock().clone(),
        console_roles(list),
        list.iter().map(|s| s.name()).collect(),
    ));
    Ok(routes
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            audit,
            crate::platform::audit::middleware,
        ))
        .layer(DefaultBodyLimit::max(args.body_limit_bytes))
        .layer(axum::middleware::from_fn_with_state(
            BodyLimits {
                bytes_max: args.body_limit_bytes,
                timeout: Duration::from_millis(args.body_timeout_ms),
                large: large_bodies(list),
            },
            crate::platform::body_limit::middleware,
        ))
        .layer(axum::middleware::from_fn_with_state(
            adm,
            admission::middleware,
        ))
        .layer(axum::middleware::map_response(headers::security))
        .with_state(state))
}

/// The administrative pages the services of `list` declare, for the
/// console.
fn console_pages(list: &[&'static dyn AnyService]) -> ConsolePages {
    ConsolePages {
        pages: list
            .iter()
            .flat_map(|s| s.admin_pages().iter().map(move |p| (s.name(), *p)))
            .collect(),
        services: list.iter().map(|s| s.name()).collect(),
    }
}

/// The administrative roles (`RoleSpec::console`) of the platform and the
/// services of `list`: whose calls the audit log records.
pub fn console_roles(list: &[&'static dyn AnyService]) -> Vec<&'static str> {
    PLATFORM_ROLES
        .iter()
        .chain(list.iter().flat_map(|s| s.roles().iter()))
        .filter(|r| r.console)
        .map(|r| r.role.name())
        .collect()
}

/// A running server: its address and how to stop it.
pub struct Running {
    pub addr: SocketAddr,
    /// Where /metrics is served when `--metrics-listen` is given.
    pub metrics_addr: Option<SocketAddr>,
    pub state: AppState,
    shutdown: Option<oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<()>,
    workers: Vec<tokio::task::JoinHandle<()>>,
    /// Held while serving an SQLite store (see `sqlite::lock_for_serving`).
    _store_lock: Option<std::fs::File>,
}

impl Running {
    /// Ends every SSE stream, stops accepting, lets requests in flight
    /// finish, stops workers.
    pub async fn stop(mut self) {
        self.state.streams.stop();
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let _ = (&mut self.server).await;
        for w in &self.workers {
            w.abort();
        }
    }

    /// Waits until the server stops (it stops on `stop` or a fatal error).
    pub async fn wait(&mut self) {
        let _ = (&mut self.server).await;
    }

    pub fn shutdown_handle(&mut self) -> Option<oneshot::Sender<()>> {
        self.shutdown.take()
    }
}

/// The routes of `list` with large bodies and their bounds.
fn large_bodies(
    list: &[&'static dyn AnyService],
) -> Arc<Vec<crate::platform::body_limit::LargeBody>> {
    Arc::new(
        list.iter()
            .flat_map(|s| s.large_bodies().iter().copied())
            .collect(),
    )
}

pub async fn start(args: ServeArgs) -> anyhow::Result<Running> {
    start_for(args, services::all()).await
}

/// `start` with the services of `list` (tests plug a test-only service in
/// this way; the binary always runs `services::all()`).
pub async fn start_for(
    args: ServeArgs,
    list: &'static [&'static dyn AnyService],
) -> anyhow::Result<Running> {
    args.check()?;
    let store_lock = match args.store.url() {
        StoreUrl::Sqlite(path) => Some(crate::store::sqlite::lock_for_serving(&path)?),
        StoreUrl::Postgres(_) => None,
    };
    let (store, secrets) = open_store_for(&args.store, list).await?;
    let public_url =
        crate::platform::public_url::PublicUrl::new(args.public_url.clone(), args.listen);
    let login_config = args.identity.login()?;
    let (keys, identity_workers) = token_keys(&args, list, &store, &secrets).await?;
    let clock = crate::base::clock::Clock::system();
    let login = match (login_config, keys.provider()) {
        (Some(config), Some(provider)) => {
            tracing::info!(
                client_id = %config.client_id,
                confidential = config.client_secret.is_some(),
                "the console offers signing in with the identity provider"
            );
            Some(Arc::new(crate::platform::identity::login::OidcLogin::new(
                config,
                provider.clone(),
                keys.clone(),
                store.clone(),
                clock.clone(),
                public_url.clone(),
                console_roles(list),
            )?))
        }
        _ => None,
    };
    let platform = Platform {
        sessions: Arc::new(
            Sessions::new(store.clone(), clock, public_url.clone()).with_login(login),
        ),
        store: store.clone(),
        keys,
        pii: Arc::new(PiiCipher::new(&secrets.pii_key)),
        secrets: Arc::new(secrets),
        demo: args.demo,
        public_url,
        streams: LiveStreams::new(
            Duration::from_millis(args.request_timeout_ms),
            Duration::from_millis(args.idle_timeout_ms),
            args.proxies(),
        ),
        owned_events: Arc::new(crate::platform::service::OwnedEvents::of(list)),
    };
    if args.demo {
        claim_for_demo(&store, &args.store).await?;
        for s in list {
            s.seed_demo(&store, &args.store.data_dir).await?;
        }
    }
    let mut started = Vec::with_capacity(list.len());
    for s in list {
        let begun = std::time::Instant::now();
        started.push(
            s.start(&platform, &args.services.0)
                .await
                .map_err(|e| e.context(format!("starting the {} service", s.name())))?,
        );
        tracing::debug!(
            service = s.name(),
            elapsed_ms = begun.elapsed().as_millis() as u64,
            "started"
        );
    }
    let state = AppState::new(&platform, &started);
    let workers: Vec<_> = started.into_iter().flat_map(|s| s.workers).collect();
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen))?;
    let addr = listener.local_addr()?;
    let proxies = args.proxies();
    // With /metrics on the public address, routes whose counts would date
    // anonymous acts are not counted at all.
    let uncounted = Arc::new(if args.metrics_listen.is_none() {
        list.iter()
            .flat_map(|s| s.uncounted_in_public_metrics().iter().copied())
            .collect()
    } else {
        Vec::new()
    });
    let adm = args.admission(proxies.clone(), large_bodies(list), uncounted);
    let mut workers = workers;
    workers.extend(identity_workers);
    workers.push(tokio::spawn(adm.pruner()));
    let app = router_for(state.clone(), &args, list, adm)?;
    let metrics_listener = match args.metrics_listen {
        Some(at) => Some(
            tokio::net::TcpListener::bind(at)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen on {at} (--metrics-listen): {e}"))?,
        ),
        None => None,
    };
    let metrics_addr = match &metrics_listener {
        Some(l) => Some(l.local_addr()?),
        None => None,
    };
    let (tx, rx) = oneshot::channel::<()>();
    let limits = args.conn_limits();
    let server = tokio::spawn(async move {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|stop| *stop).await;
        };
        let main = serve(
            listener,
            app,
            limits.clone(),
            proxies.clone(),
            stopped(stop_rx.clone()),
        );
        let metrics = async {
            if let Some(l) = metrics_listener {
                let app = Router::new()
                    .route("/metrics", get(metrics_text))
                    .fallback(not_found)
                    .layer(axum::middleware::map_response(headers::security));
                serve(
                    l,
                    app,
                    limits.clone(),
                    proxies.clone(),
                    stopped(stop_rx.clone()),
                )
                .await;
            }
        };
        let trigger = async {
            let _ = rx.await;
            let _ = stop_tx.send(true);
        };
        tokio::join!(main, metrics, trigger);
    });
    tracing::info!(%addr, store = %args.store.url(), "throng listening");
    if let Some(at) = metrics_addr {
        tracing::info!(%at, "metrics on their own address");
    }
    Ok(Running {
        addr,
        metrics_addr,
        state,
        shutdown: Some(tx),
        server,
        workers,
        _store_lock: store_lock,
    })
}

/// The token keys: throng's own secret, the identity provider's keys when
/// one is configured (fetched once now: a provider out of reach leaves
/// only throng's own tokens accepted until a later fetch succeeds, and
/// says so in the log), and the revocations, read once now; with the
/// workers that keep both fresh.
async fn token_keys(
    args: &ServeArgs,
    list: &[&'static dyn AnyService],
    store: &Store,
    secrets: &Secrets,
) -> anyhow::Result<(Arc<TokenKeys>, Vec<tokio::task::JoinHandle<()>>)> {
    use crate::platform::identity::{jwks::Provider, revocation::Revocations};
    let mut workers = Vec::new();
    let provider = match args.identity.provider()? {
        Some(config) => {
            let roles: Vec<&crate::platform::auth::RoleSpec> =
                crate::platform::auth::PLATFORM_ROLES
                    .iter()
                    .chain(list.iter().flat_map(|s| s.roles().iter()))
                    .collect();
            let provider = Arc::new(Provider::new(config, &roles)?);
            provider.refresh_logged("start").await;
            tracing::info!(
                issuer = provider.issuer(),
                keys = provider.keys().keys.len(),
                "accepting the identity provider's tokens"
            );
            workers.push(provider.clone().spawn_refresher());
            Some(provider)
        }
        None => None,
    };
    let revocations = Revocations::load(store.clone())
        .await
        .map_err(|e| anyhow::anyhow!("cannot read the token revocations: {e}"))?;
    workers.push(
        revocations
            .clone()
            .spawn_refresher(args.identity.revocation_refresh()?),
    );
    Ok((
        Arc::new(TokenKeys::with_identity(
            &secrets.token_secret,
            provider,
            revocations,
        )),
        workers,
    ))
}

/// `meta` key marking a store made by `serve --demo`.
const DEMO_STORE_MARK: &str = "demo_store";

/// `--demo` hands out tokens to anyone who asks, so it runs only on a store
/// it made: an empty one is marked as the demo's, and a store holding data
/// without that mark is refused.
async fn claim_for_demo(store: &Store, args: &StoreArgs) -> anyhow::Result<()> {
    if store.meta_get(DEMO_STORE_MARK).await?.is_some() {
        return Ok(());
    }
    let tables = store.tables_with_rows().await?;
    if !tables.is_empty() {
        anyhow::bail!(
            "--demo hands out tokens to anyone and runs only on a store it made, but {} holds \
             data it did not make (rows in {}); serve it without --demo, or give the demo a \
             fresh store (--data-dir, --store)",
            args.url(),
            tables.join(", ")
        );
    }
    store
        .meta_set_once(DEMO_STORE_MARK, "made by serve --demo")
        .await?;
    Ok(())
}

async fn health() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        r#"{"status":"ok"}"#,
    )
}

async fn ready(State(st): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    if st.draining() {
        return Err(ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "draining",
            "this node is stopping; send requests to another",
        ));
    }
    st.store.ping().await?;
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        r#"{"status":"ready"}"#,
    ))
}

async fn metrics_text() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        metrics::render(),
    )
}

/// `/openapi.json`: the services' operations (`doc`, merged from their
/// routers) under one title, with the platform's own paths and the answers
/// every operation shares (`platform::openapi`).
fn openapi_json(mut doc: utoipa::openapi::OpenApi, with_metrics: bool) -> String {
    doc.info = utoipa::openapi::InfoBuilder::new()
        .title("throng")
        .version(env!("CARGO_PKG_VERSION"))
        .description(Some(
            "Public web services that hold under a crowd. Every error is \
             {\"error\":{\"code\":\"...\",\"message\":\"...\"}}; over capacity the answer is 429 \
             with Retry-After. Platform endpoints: GET /health, GET /ready, GET /metrics.",
        ))
        .build();
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        utoipa::openapi::security::SecurityScheme::Http(
            utoipa::openapi::security::HttpBuilder::new()
                .scheme(utoipa::openapi::security::HttpAuthScheme::Bearer)
                .bearer_format("JWT")
                .build(),
        ),
    );
    components.add_security_scheme(
        "session",
        utoipa::openapi::security::SecurityScheme::ApiKey(
            utoipa::openapi::security::ApiKey::Cookie(
                utoipa::openapi::security::ApiKeyValue::with_description(
                    "throng_session",
                    "the admin console's session (__Host-throng_session under an https public \
                     URL), from POST /api/admin/session; changes also need X-Throng-Request",
                ),
            ),
        ),
    );
    let mut doc = serde_json::to_value(&doc).expect("the OpenAPI document serializes");
    crate::platform::openapi::platform_paths(&mut doc, with_metrics);
    crate::platform::openapi::finish(&mut doc);
    serde_json::to_string_pretty(&doc).expect("JSON serializes")
}

/// The index page: the template with every service's links.
fn index_html(list: &[&'static dyn AnyService]) -> String {
    let escape = |t: &str| {
        t.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    let items = |kind: LinkKind| -> String {
        list.iter()
            .flat_map(|s| s.links())
            .filter(|l| l.kind == kind)
            .map(|l| {
                // A page's title and every sentence in the reader's
                // language (`link.<href>.title|about` in the catalogues);
                // an endpoint's title is its path.
                let key = escape(l.href);
                let title = match kind {
                    LinkKind::Page => format!(" data-i18n=\"link.{key}.title\""),
                    LinkKind::Endpoint => String::new(),
                };
                format!(
                    "<li><a href=\"{key}\"{title}>{}</a>: <span data-i18n=\"link.{key}.about\">{}</span></li>\n",
                    escape(l.title),
                    escape(l.about)
                )
            })
            .collect()
    };
    crate::platform::assets::platform_page(include_str!("index.html"))
        .replace("<!--pages-->", &items(LinkKind::Page))
        .replace("<!--endpoints-->", &items(LinkKind::Endpoint))
}

/// A mistyped address: a page for a browser asking for one (GET of a
/// path outside `/api/` accepting `text/html`), else the error envelope.
async fn not_found(method: Method, uri: Uri, headers: axum::http::HeaderMap) -> Response {
    let wants_page = matches!(method, Method::GET | Method::HEAD)
        && !uri.path().starts_with("/api/")
        && headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("text/html"));
    if wants_page {
        static PAGE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
            crate::platform::assets::platform_page(include_str!("not_found.html"))
        });
        let mut res = Html(PAGE.as_str()).into_response();
        *res.status_mut() = StatusCode::NOT_FOUND;
        return res;
    }
    ApiError::new(
        StatusCode::NOT_FOUND,
        "route_not_found",
        format!("no route for {method} {}; see /openapi.json", uri.path()),
    )
    .into_response()
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!(
            "{method} is not allowed on {}; see /openapi.json",
            uri.path()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_link_of_the_index_is_in_every_language() {
        let html = index_html(services::all());
        let (_, _, en) = crate::platform::assets::LANGUAGES[0];
        let en: serde_json::Value = serde_json::from_str(en).expect("English catalogue");
        let mut named = 0;
        for link in services::all().iter().flat_map(|s| s.links()) {
            let mut keys = vec![(format!("link.{}.about", link.href), link.about)];
            if link.kind == LinkKind::Page {
                keys.push((format!("link.{}.title", link.href), link.title));
            }
            for (key, english) in keys {
                assert!(html.contains(&format!("data-i18n=\"{key}\"")), "{key}");
                assert_eq!(
                    en.get(&key).and_then(|v| v.as_str()),
                    Some(english),
                    "{key}: the English catalogue says what the service says"
                );
                named += 1;
            }
        }
        assert!(named > 10, "{named} link keys");
        assert!(html.contains(crate::platform::assets::i18n_path_hashed()));
    }
}
