//! Invites: survey invitation popups for busy sites (the survey write-up). A script
//! on a customer's page (`/invite.js`) asks whether to invite the current
//! visitor; a popup offers Yes (the survey opens in a new tab), No (not
//! asked again, or after the site's `askAgainAfterNoDays`) and close (asked
//! again next time; after three closes not again, or after
//! `askAgainAfterClosesDays`). Each site also chooses the pages and devices
//! it shows on, the share of visitors, and a cap on invitations per visitor
//! across its owner's sites (`model.rs`). See ARCHITECTURE.md ("Invites").
//!
//! Sites (campaigns) are few and kept in memory by every node (`sites.rs`);
//! a visitor is a signed random id (`signed.rs`) the script keeps in the
//! site's own storage, or a first-party cookie; a state check is one point
//! lookup of the visitor's answers (none for a first visit), an answer one
//! command of the group commit (`store/`), decided by `model.rs`.

pub mod http;
pub mod index;
pub mod model;
pub mod page;
pub mod seed;
pub mod signed;
pub mod sites;
pub mod store;
pub mod visitor_ids;

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use include_dir::include_dir;

use crate::platform::service::{
    AdminPage, AppState, Link, LinkKind, OpenApiRouter, Platform, Service, ServiceState, Started,
};
use crate::store::{MigrationSet, Store};

/// The invites service, as `services::all()` lists it.
pub struct Invites;

static MIGRATIONS: MigrationSet = MigrationSet {
    owner: "invites",
    sqlite: include_dir!("$CARGO_MANIFEST_DIR/src/services/invites/migrations/sqlite"),
    postgres: include_dir!("$CARGO_MANIFEST_DIR/src/services/invites/migrations/postgres"),
};

/// `serve` flags of the invites service.
#[derive(Clone, Debug, clap::Args)]
pub struct InvitesArgs {
    /// Mark the first-party visitor cookie `Secure` (set it when throng is
    /// served over https, as it should be in production).
    #[arg(long = "invites-cookie-secure", env = "THRONG_INVITES_COOKIE_SECURE")]
    pub invites_cookie_secure: bool,
    /// How often the counts gathered in memory (first visits, invited,
    /// displays) are written, in ms.
    #[arg(
        long = "invites-flush-ms",
        env = "THRONG_INVITES_FLUSH_MS",
        default_value_t = 1000
    )]
    pub invites_flush_ms: u64,
    /// How often answers past their site's retention are purged, in s.
    #[arg(
        long = "invites-purge-interval-s",
        env = "THRONG_INVITES_PURGE_INTERVAL_S",
        default_value_t = 3600
    )]
    pub invites_purge_interval_s: u64,
    /// Do not run the counts flusher and the retention purge on this node.
    #[arg(long = "invites-no-workers", env = "THRONG_INVITES_NO_WORKERS")]
    pub invites_no_workers: bool,
    /// Visitors whose standings the embedded store keeps in memory, one
    /// byte each (visitors numbered past it are looked up in the table).
    #[arg(
        long = "invites-memory-visitors-max",
        env = "THRONG_INVITES_MEMORY_VISITORS_MAX",
        default_value_t = 33_554_432,
        value_parser = clap::value_parser!(u64).range(0..=1_073_741_824)
    )]
    pub invites_memory_visitors_max: u64,
}

impl Service for Invites {
    const NAME: &'static str = "invites";
    const SEED_ABOUT: Option<&'static str> =
        Some("Survey sites and visitors' answers (6,000,000 visitors with the defaults)");
    type Args = InvitesArgs;
    type SeedArgs = seed::SeedInvitesArgs;
    type State = InvitesState;

    fn migrations(&self) -> Option<&'static MigrationSet> {
        Some(&MIGRATIONS)
    }

    async fn seed(&self, store: &Store, args: seed::SeedInvitesArgs) -> anyhow::Result<()> {
        let r = seed::seed(store, &args, true).await?;
        println!(
            "seeded {} sites and {} visitors' answers in {:.1} s ({:.0} rows/s)",
            args.sites,
            r.rows,
            r.elapsed_s,
            r.rows as f64 / r.elapsed_s.max(1e-9)
        );
        Ok(())
    }

    async fn seed_demo(&self, store: &Store, _data_dir: &std::path::Path) -> anyhow::Result<()> {
        seed::seed_demo_if_empty(store).await
    }

    async fn start(
        &self,
        platform: &Platform,
        args: InvitesArgs,
    ) -> anyhow::Result<Started<InvitesState>> {
        if args.invites_flush_ms == 0 || args.invites_purge_interval_s == 0 {
            anyhow::bail!("--invites-flush-ms and --invites-purge-interval-s: 1 or more");
        }
        let state = Arc::new(InvitesState::new(platform, &args).await?);
        let mut started = Started::new(state.clone()).with_worker(state.spawn_sites_watcher());
        if let Some(index) = state.storage.index() {
            started = started
                .with_worker(index::spawn_loader(index.clone(), state.store.clone()))
                .with_worker(state.spawn_answers_watcher());
        }
        if !args.invites_no_workers {
            started = started
                .with_worker(sites::spawn_flusher(
                    state.store.clone(),
                    state.sites.clone(),
                    state.storage.counts_shard(),
                    Duration::from_millis(args.invites_flush_ms),
                ))
                .with_worker(sites::spawn_purger(
                    state.storage.clone(),
                    state.sites.clone(),
                    state.clock.clone(),
                    Duration::from_secs(args.invites_purge_interval_s),
                ));
        }
        Ok(started)
    }

    fn routes(&self) -> OpenApiRouter<AppState> {
        http::routes()
    }

    fn admin_pages(&self) -> &'static [AdminPage] {
        &[AdminPage {
            href: "/invites/admin",
            title: "Survey invitations",
            about: "sites and their rules, the snippet, pause and resume, results by day and page.",
            roles: &[],
        }]
    }

    fn links(&self) -> Vec<Link> {
        vec![
            Link {
                kind: LinkKind::Page,
                href: "/invites/demo",
                title: "Survey invitation",
                about:
                    "a host page with the invitation popup (/invite.js): yes, no, or close three times.",
            },
            Link {
                kind: LinkKind::Page,
                href: "/invites/admin",
                title: "Survey invitation admin",
                about: "sites and their rules, the snippet, pause and resume, results by day and page (admin token).",
            },
        ]
    }
}

/// What the invites routes share.
pub struct InvitesState {
    /// The store, for what every service shares (`meta`, generations).
    pub store: Store,
    /// The invites tables, with the strategies chosen for `store` (the
    /// visitors' standings in memory or in the table, how answers are
    /// decided, the counts shard).
    pub storage: store::InvitesStore,
    pub signer: signed::Signer,
    pub sites: Arc<ArcSwap<sites::Sites>>,
    pub cookie_secure: bool,
    /// The time every rule reads (the system's; tests move it on).
    pub clock: crate::base::clock::Clock,
    /// Where browsers reach this server: the base of the snippet's and the
    /// survey's absolute URLs.
    pub public_url: crate::platform::public_url::PublicUrl,
    loaded_generation: Option<String>,
    loaded_answers: Option<String>,
}

impl ServiceState for InvitesState {}

impl InvitesState {
    pub async fn new(platform: &Platform, args: &InvitesArgs) -> anyhow::Result<InvitesState> {
        let generation = platform.store.meta_get(sites::SITES_GENERATION_KEY).await?;
        let loaded_answers = platform
            .store
            .meta_get(index::ANSWERS_GENERATION_KEY)
            .await?;
        let storage =
            store::InvitesStore::open(&platform.store, args.invites_memory_visitors_max).await?;
        let sites = sites::Sites::load(&platform.store, None).await?;
        tracing::info!(sites = sites.len(), "loaded the invitation sites");
        Ok(InvitesState {
            store: platform.store.clone(),
            storage,
            signer: signed::Signer::new(platform.keys.derive(signed::KEY_PURPOSE)),
            sites: Arc::new(ArcSwap::from_pointee(sites)),
            cookie_secure: args.invites_cookie_secure,
            clock: crate::base::clock::Clock::system(),
            public_url: platform.public_url.clone(),
            loaded_generation: generation,
            loaded_answers,
        })
    }

    /// Loads the standings again when a seed replaced the answers.
    fn spawn_answers_watcher(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        crate::platform::seed_watch::spawn(
            self.store.clone(),
            index::ANSWERS_GENERATION_KEY,
            self.loaded_answers.clone(),
            "the visitors' standings",
            move || {
                let this = this.clone();
                async move {
                    let Some(m) = this.storage.memory() else {
                        return Ok(());
                    };
                    m.minter.drop_block();
                    let held = store::numbers::load_standings(&this.store, &m.index).await?;
                    tracing::info!(
                        visitors = held,
                        "loaded the visitors' standings after a seed"
                    );
                    Ok(())
                }
            },
        )
    }

    /// Reloads the sites when another node (or a seed) changed them.
    fn spawn_sites_watcher(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        crate::platform::seed_watch::spawn(
            self.store.clone(),
            sites::SITES_GENERATION_KEY,
            self.loaded_generation.clone(),
            "the invitation sites",
            move || {
                let this = this.clone();
                async move {
                    let fresh = sites::Sites::load(&this.store, Some(&this.sites.load())).await?;
                    this.sites.store(Arc::new(fresh));
                    Ok(())
                }
            },
        )
    }
}
