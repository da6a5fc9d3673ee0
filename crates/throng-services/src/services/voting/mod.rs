//! Voting: elections with districts, each district a ballot of parties and
//! their candidates, one secret vote per voter, tallies projected from the
//! event log and streamed live, as in the election write-up
//! ("Scalection"); secrecy: ARCHITECTURE.md ("Ballot secrecy").
//!
//! The election data is static once seeded, so a node keeps it in memory
//! ([`Catalog`]): ballots are served as prepared bytes with an ETag, and a
//! vote is checked (election, district, voter, roll, opening hours, the
//! ballot's rules, a known earlier vote) before it reaches the writer. The
//! writer only records the voter's mark and drops the ballot into the box
//! (`VotingStore::cast`); the mixer publishes the box in rounds
//! (`mixer.rs`), and the projector counts published ballots (`tally.rs`).
//! Storage is reached through one [`store::VotingStore`], its designs
//! chosen from the store when the state is built.

pub mod admin;
pub mod ballot;
pub mod cli;
pub mod credential;
pub mod definition;
pub mod http;
pub mod mixer;
pub mod model;
pub mod opening;
pub mod page;
pub mod roll;
pub mod seed;
pub mod store;
pub mod tally;
pub mod trustee;

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use axum::http::HeaderValue;
use bytes::Bytes;
use include_dir::include_dir;

use crate::platform::auth::TokenKeys;
use crate::platform::auth::{ClaimKind, ClaimSpec, Role, RoleSpec};
use crate::platform::client_addr::ClientCounts;
use crate::platform::secrets::SecretSpec;
use crate::platform::service::{
    AdminPage, AppState, Link, LinkKind, OpenApiRouter, Platform, Service, ServiceState, Started,
};
use crate::store::{MigrationSet, Store};
use model::Election;
use roll::Roll;
use store::VotingStore;

/// A voter (`sub` = the voter id; the claims `district` and `election`
/// name the ballot).
pub const VOTER: Role = Role::new("voter");

/// Keys voters' credential hashes (`credential.rs`); kept out of the
/// database, so a copy of it cannot test guessed credentials.
pub const CREDENTIAL_KEY: SecretSpec = SecretSpec {
    file: "voting-credential.key",
    env: "THRONG_VOTING_CREDENTIAL_KEY",
};

/// How often every node reads the elections' states, closing times and
/// roll versions from the store (the staleness of what its pages show; a
/// vote is decided by the store's row, not by this copy).
pub const STATE_REFRESH_MS: u64 = 500;

/// `--voting-mix-ballots-min` when not given (and not `--demo`).
pub const MIX_BALLOTS_MIN_DEFAULT: i64 = 100;

/// The voting service, as `services::all()` lists it.
pub struct Voting;

static MIGRATIONS: MigrationSet = MigrationSet {
    owner: "voting",
    sqlite: include_dir!("$CARGO_MANIFEST_DIR/src/services/voting/migrations/sqlite"),
    postgres: include_dir!("$CARGO_MANIFEST_DIR/src/services/voting/migrations/postgres"),
};

/// `--voting-board-period-ms` when not given (and not `--demo`).
pub const BOARD_PERIOD_MS_DEFAULT: u64 = 10_000;
/// `--voting-board-period-ms` with `--demo` when the flag is not given.
pub const DEMO_BOARD_PERIOD_MS: u64 = 1_000;

/// `--voting-mix-ballots-min` with `--demo` when the flag is not given.
pub const DEMO_MIX_BALLOTS_MIN: i64 = 3;

/// Who may vote as whom.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Identity {
    /// A voter token (`Authorization: Bearer`, role voter, `sub` = the voter
    /// id, claims `district` and `election`, both required) that must match
    /// the headers and the path.
    Token,
    /// The headers alone: a gateway in front already authenticated the
    /// voter (the write-up's deployment and its load test).
    Headers,
}

/// `serve` flags of the voting service.
#[derive(Clone, Debug, clap::Args)]
pub struct VotingArgs {
    /// How a vote proves who casts it: token (default) or headers.
    #[arg(long = "voting-identity", env = "THRONG_VOTING_IDENTITY", value_enum, default_value_t = Identity::Token)]
    pub identity: Identity,
    /// Ballots a district's box must hold before the mixer publishes them
    /// (the smallest set of voters a ballot can be linked to); a closed
    /// election's box is published whatever it holds. Default: 100; with
    /// --demo: 3.
    #[arg(
        long = "voting-mix-ballots-min",
        env = "THRONG_VOTING_MIX_BALLOTS_MIN",
        value_name = "BALLOTS"
    )]
    pub mix_ballots_min_given: Option<i64>,
    /// `--voting-mix-ballots-min` as it applies, set by `start`.
    #[arg(skip)]
    pub mix_ballots_min: i64,
    /// How often the board worker looks at closing times and the roll's
    /// marks, in ms.
    #[arg(
        long = "voting-mix-interval-ms",
        env = "THRONG_VOTING_MIX_INTERVAL_MS",
        default_value_t = 100
    )]
    pub mix_interval_ms: u64,
    /// How often the public board publishes the trackers of the ballots
    /// cast since its last period, in ms: nothing public dates a vote more
    /// finely. Default: 10000; with --demo: 1000.
    #[arg(
        long = "voting-board-period-ms",
        env = "THRONG_VOTING_BOARD_PERIOD_MS",
        value_name = "MS"
    )]
    pub board_period_ms_given: Option<u64>,
    /// `--voting-board-period-ms` as it applies, set by `start`.
    #[arg(skip)]
    pub board_period_ms: u64,
    /// Live results streams (SSE) open at once at most; past it, 503.
    #[arg(
        long = "voting-streams-max",
        env = "THRONG_VOTING_STREAMS_MAX",
        default_value_t = 1000
    )]
    pub streams_max: usize,
    /// Live results streams per client (an IPv4 address or an IPv6 /64,
    /// behind --trusted-proxies as for the rate limit) at most; past it,
    /// 429 with Retry-After (the page then polls /results).
    #[arg(
        long = "voting-streams-per-client-max",
        env = "THRONG_VOTING_STREAMS_PER_CLIENT_MAX",
        default_value_t = 4
    )]
    pub streams_per_client_max: usize,
    /// Do not run the mixer and the tally projector on this node.
    #[arg(long = "voting-no-workers", env = "THRONG_VOTING_NO_WORKERS")]
    pub no_workers: bool,
}

impl Service for Voting {
    const NAME: &'static str = "voting";
    const SEED_ABOUT: Option<&'static str> = Some(
        "An election: districts, parties, candidates, the roll (5,000,000 voters with the defaults)",
    );
    type Args = VotingArgs;
    type SeedArgs = seed::SeedVotingArgs;
    type State = VotingState;

    fn event_categories(&self) -> &'static [&'static str] {
        &[
            model::BALLOT_STREAM_CATEGORY,
            model::ELECTION_STREAM_CATEGORY,
        ]
    }

    fn event_consumers(&self) -> &'static [&'static str] {
        &[mixer::CONSUMER]
    }

    fn roles(&self) -> &'static [RoleSpec] {
        &[RoleSpec {
            role: VOTER,
            about: "a voter (sub = the voter id) of the district and election its claims name",
            claims: &[
                ClaimSpec {
                    name: "election",
                    kind: ClaimKind::Integer,
                },
                ClaimSpec {
                    name: "district",
                    kind: ClaimKind::Integer,
                },
            ],
            console: false,
        }]
    }

    fn migrations(&self) -> Option<&'static MigrationSet> {
        Some(&MIGRATIONS)
    }

    fn large_bodies(&self) -> &'static [crate::platform::body_limit::LargeBody] {
        admin::LARGE_BODIES
    }

    fn uncounted_in_public_metrics(&self) -> &'static [(&'static str, &'static str)] {
        &[("POST", "/api/voting/elections/{election_id}/votes")]
    }

    fn command(&self) -> Option<clap::Command> {
        Some(cli::command())
    }

    async fn run_command(&self, matches: &clap::ArgMatches) -> anyhow::Result<()> {
        cli::run(matches).await
    }

    async fn seed(&self, store: &Store, args: seed::SeedVotingArgs) -> anyhow::Result<()> {
        let r = seed::seed(store, &args, true).await?;
        println!(
            "seeded election {}: {} voters, {} districts, {} candidates in {:.1} s ({:.0} voters/s)",
            args.election,
            r.voters,
            args.districts,
            r.candidates,
            r.elapsed_s,
            r.voters as f64 / r.elapsed_s.max(1e-9)
        );
        if let Some(path) = &args.voters_csv {
            println!("wrote {} rows to {}", r.csv_rows, path.display());
        }
        Ok(())
    }

    async fn seed_demo(&self, store: &Store, data_dir: &std::path::Path) -> anyhow::Result<()> {
        seed::seed_demo_if_empty(store, data_dir).await
    }

    async fn start(
        &self,
        platform: &Platform,
        mut args: VotingArgs,
    ) -> anyhow::Result<Started<VotingState>> {
        // The demo's few votes would wait in the box for 100 others: with
        // --demo, unless the flag is given, a district is published once it
        // holds DEMO_MIX_BALLOTS_MIN ballots.
        args.mix_ballots_min = match args.mix_ballots_min_given {
            Some(given) => given,
            None if platform.demo => {
                tracing::info!(
                    ballots_min = DEMO_MIX_BALLOTS_MIN,
                    "--demo: a district's ballots are published once its box holds this many"
                );
                DEMO_MIX_BALLOTS_MIN
            }
            None => MIX_BALLOTS_MIN_DEFAULT,
        };
        args.board_period_ms = match args.board_period_ms_given {
            Some(ms) => ms.max(1),
            None if platform.demo => DEMO_BOARD_PERIOD_MS,
            None => BOARD_PERIOD_MS_DEFAULT,
        };
        if args.identity == Identity::Headers {
            tracing::warn!(
                "--voting-identity headers: a vote is accepted for whichever voter the \
                 voter-id and election-district-id headers name, with no token; only a \
                 gateway in front that authenticates voters and sets these headers may reach \
                 this server"
            );
        }
        if args.mix_ballots_min < 1 {
            anyhow::bail!("--voting-mix-ballots-min: 1 or more");
        }
        let state = Arc::new(VotingState::new(platform, &args).await?);
        let mut started = Started::new(state.clone());
        started = started.with_worker(state.spawn_seed_watcher());
        started = started.with_worker(state.spawn_refresher());
        started = started.with_worker(tally::spawn(
            state.storage.clone(),
            state.catalog.clone(),
            state.tally.clone(),
        ));
        if !args.no_workers {
            started = started.with_worker(mixer::spawn(
                platform.store.clone(),
                state.storage.clone(),
                state.catalog.clone(),
                state.tally.clone(),
                mixer::MixerConfig {
                    interval: std::time::Duration::from_millis(args.mix_interval_ms.max(1)),
                    board_period: std::time::Duration::from_millis(args.board_period_ms),
                },
            ));
        }
        Ok(started)
    }

    fn routes(&self) -> OpenApiRouter<AppState> {
        http::routes()
    }

    fn admin_pages(&self) -> &'static [AdminPage] {
        &[AdminPage {
            href: "/voting/admin",
            title: "Voting: election authority",
            about: "draft an election, import its roll, open, close and publish it.",
            roles: &[],
        }]
    }

    fn links(&self) -> Vec<Link> {
        vec![
            Link {
                kind: LinkKind::Page,
                href: "/voting/",
                title: "Voting",
                about: "pick your district's ballot, choose a party and candidates, vote.",
            },
            Link {
                kind: LinkKind::Page,
                href: "/voting/results",
                title: "Election results",
                about: "live tallies, updated as ballots are published.",
            },
            Link {
                kind: LinkKind::Page,
                href: "/voting/admin",
                title: "Election authority",
                about: "draft an election, import its roll, open, close and publish it.",
            },
            Link {
                kind: LinkKind::Endpoint,
                href: "/api/voting/elections",
                title: "/api/voting/elections",
                about: "the elections and whether they are open.",
            },
        ]
    }
}

/// A district's ballot, rendered once.
pub struct BallotPage {
    pub body: Bytes,
    pub etag: HeaderValue,
    /// The same body gzip-compressed (once, at load), for clients that
    /// accept it: the write-up's ballot of 240 candidates is ~14 KB of JSON
    /// and ~2 KB compressed, and sending the bytes was the largest part of
    /// a GET's cost.
    pub gzip: Bytes,
    /// The gzip variant's own ETag (a strong ETag names one representation).
    pub gzip_etag: HeaderValue,
}

impl BallotPage {
    pub fn new(body: Bytes) -> BallotPage {
        use std::io::Write;
        let tag = xxhash_rust::xxh3::xxh3_64(&body);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&body).expect("writing to a Vec");
        let gzip = Bytes::from(gz.finish().expect("writing to a Vec"));
        BallotPage {
            etag: HeaderValue::from_str(&format!("\"{tag:016x}\"")).expect("hex is a header value"),
            gzip_etag: HeaderValue::from_str(&format!("\"{tag:016x}-gz\""))
                .expect("hex is a header value"),
            body,
            gzip,
        }
    }
}

/// One election in memory: its static data, its roll, its ballots.
pub struct ElectionEntry {
    pub election: Election,
    pub roll: Arc<Roll>,
    /// Per district, in the order of `election.districts`.
    pub ballots: Arc<[BallotPage]>,
}

impl ElectionEntry {
    /// The entry with the fields of `row` (name, times, state, board),
    /// sharing the roll and the ballots.
    pub fn with_row(&self, row: &model::ElectionRow) -> ElectionEntry {
        let mut election = self.election.clone();
        election.name = row.name.clone();
        election.opens_at_ms = row.opens_at_ms;
        election.state = row.state;
        election.closes_at_ms = row.closes_at_ms;
        election.board_period = row.board_period;
        election.board_final = row.board_final;
        ElectionEntry {
            election,
            roll: self.roll.clone(),
            ballots: self.ballots.clone(),
        }
    }
}

/// Every election this node serves.
#[derive(Default)]
pub struct Catalog {
    /// In id order.
    pub elections: Vec<Arc<ElectionEntry>>,
}

impl Catalog {
    pub fn election(&self, id: i64) -> Option<&Arc<ElectionEntry>> {
        self.elections
            .binary_search_by_key(&id, |e| e.election.id)
            .ok()
            .map(|i| &self.elections[i])
    }

    /// This catalog with `entry` in place of the election of its id (or
    /// added).
    pub fn with_entry(&self, entry: Arc<ElectionEntry>) -> Catalog {
        let mut elections = self.elections.clone();
        match elections.binary_search_by_key(&entry.election.id, |e| e.election.id) {
            Ok(i) => elections[i] = entry,
            Err(i) => elections.insert(i, entry),
        }
        Catalog { elections }
    }

    /// Loads one election (its roll, who voted, its ballots); `None` when
    /// there is no such election.
    pub async fn load_one(
        storage: &VotingStore,
        election_id: i64,
    ) -> anyhow::Result<Option<Arc<ElectionEntry>>> {
        let all = Catalog::load_filtered(storage, Some(election_id)).await?;
        Ok(all.elections.into_iter().next())
    }

    /// Loads every election, its roll (and who voted) and renders its ballots.
    pub async fn load(storage: &VotingStore) -> anyhow::Result<Catalog> {
        Catalog::load_filtered(storage, None).await
    }

    async fn load_filtered(storage: &VotingStore, only: Option<i64>) -> anyhow::Result<Catalog> {
        let started = std::time::Instant::now();
        let mut rows = storage.election_rows().await?;
        if let Some(id) = only {
            rows.elections.retain(|e| e.id == id);
            rows.districts.retain(|d| d.0 == id);
            rows.parties.retain(|p| p.0 == id);
            rows.candidates.retain(|c| c.0 == id);
        }
        let mut district_ids: HashMap<i64, Vec<i64>> = HashMap::new();
        for (e, d, ..) in &rows.districts {
            district_ids.entry(*e).or_default().push(*d);
        }
        let mut rolls: HashMap<i64, Roll> = HashMap::new();
        let mut voters: HashMap<(i64, i64), i64> = HashMap::new();
        for e in rows.elections.iter().map(|e| &e.id) {
            let mut ids = district_ids.remove(e).unwrap_or_default();
            ids.sort_unstable();
            let roll = storage.load_roll(*e, ids.clone()).await?;
            for (i, n) in roll.counts(ids.len()).into_iter().enumerate() {
                voters.insert((*e, ids[i]), n);
            }
            rolls.insert(*e, roll);
        }
        let mut elections = Vec::new();
        for election in rows.assemble(&voters) {
            let roll = Arc::new(rolls.remove(&election.id).unwrap_or(Roll::build(&[])?));
            let voted = storage.mark_voted(election.id, roll.clone()).await?;
            storage.load_waiting(election.id).await?;
            tracing::info!(
                election_id = election.id,
                voters = roll.voters(),
                voted,
                roll_kib = roll.bytes() / 1024,
                "loaded an election"
            );
            let ballots = election
                .districts
                .iter()
                .map(|d| BallotPage::new(Bytes::from(http::render_ballot(&election, d))))
                .collect::<Vec<_>>()
                .into();
            elections.push(Arc::new(ElectionEntry {
                election,
                roll,
                ballots,
            }));
        }
        tracing::info!(
            elections = elections.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "loaded the voting catalog"
        );
        Ok(Catalog { elections })
    }
}

/// What the voting routes share.
pub struct VotingState {
    pub store: Store,
    /// The voting tables.
    pub storage: Arc<VotingStore>,
    pub keys: Arc<TokenKeys>,
    pub identity: Identity,
    /// `serve --demo`: the demo voter endpoint answers.
    pub demo: bool,
    pub catalog: Arc<ArcSwap<Catalog>>,
    pub tally: Arc<tally::Tally>,
    /// Permits for live results streams.
    pub streams: Arc<tokio::sync::Semaphore>,
    pub streams_max: usize,
    /// Live results streams per client key, at most `streams_per_client_max`.
    pub stream_clients: Arc<ClientCounts>,
    pub streams_per_client_max: usize,
    /// `--voting-mix-ballots-min`.
    pub mix_ballots_min: i64,
    /// `--voting-board-period-ms`.
    pub board_period_ms: u64,
    /// Hashes voters' credentials.
    pub credentials: Arc<credential::CredentialKey>,
    /// Login attempts per voter id (election and id).
    pub voter_logins: credential::AttemptLimiter,
    /// Login attempts per client address.
    pub client_logins: credential::AttemptLimiter,
    /// Held by a roll import and by opening an election on this node, so
    /// an election is not opened here while its roll loads.
    pub roll_imports: tokio::sync::Mutex<()>,
    /// Held while the catalog is replaced (by [`VotingState::refresh`] and
    /// the seed watcher), so neither writes back a catalog older than the
    /// other's.
    catalog_writes: tokio::sync::Mutex<()>,
    /// Resolves clients behind trusted proxies.
    pub live: Arc<crate::platform::streams::LiveStreams>,
    /// The seed generation the catalog was loaded at (for the seed watcher).
    loaded_generation: Option<String>,
}

impl ServiceState for VotingState {}

impl VotingState {
    pub async fn new(platform: &Platform, args: &VotingArgs) -> anyhow::Result<VotingState> {
        let generation = platform.store.meta_get(seed::SEED_GENERATION_KEY).await?;
        let credentials = Arc::new(credential::CredentialKey::new(
            &platform.secrets.key(&CREDENTIAL_KEY)?,
        ));
        let stored = platform
            .store
            .meta_set_once(
                "voting_credential_key_fingerprint",
                credentials.fingerprint(),
            )
            .await?;
        if stored != credentials.fingerprint() {
            anyhow::bail!(
                "the voters' credentials of this store were hashed with another key than this \
                 node's; start with the data directory (its voting-credential.key) or the \
                 THRONG_VOTING_CREDENTIAL_KEY that this store was created with"
            );
        }
        let storage = VotingStore::open(&platform.store);
        let catalog = Catalog::load(&storage).await?;
        Ok(VotingState {
            store: platform.store.clone(),
            storage,
            keys: platform.keys.clone(),
            identity: args.identity,
            demo: platform.demo,
            catalog: Arc::new(ArcSwap::from_pointee(catalog)),
            tally: Arc::new(tally::Tally::default()),
            streams: Arc::new(tokio::sync::Semaphore::new(args.streams_max)),
            streams_max: args.streams_max,
            stream_clients: Arc::default(),
            streams_per_client_max: args.streams_per_client_max,
            mix_ballots_min: args.mix_ballots_min,
            board_period_ms: args.board_period_ms,
            credentials,
            voter_logins: credential::AttemptLimiter::new(credential::LOGIN_ATTEMPTS_PER_VOTER_MAX),
            client_logins: credential::AttemptLimiter::new(
                credential::LOGIN_ATTEMPTS_PER_CLIENT_MAX,
            ),
            roll_imports: tokio::sync::Mutex::new(()),
            catalog_writes: tokio::sync::Mutex::new(()),
            live: platform.streams.clone(),
            loaded_generation: generation,
        })
    }

    pub fn election(&self, id: i64) -> Option<Arc<ElectionEntry>> {
        self.catalog.load().election(id).cloned()
    }

    /// Reads every election's row and brings this node's catalog level
    /// with it: a new election or a new roll is loaded, a changed state,
    /// closing time or live-results setting replaces the entry's.
    pub async fn refresh(&self) -> anyhow::Result<()> {
        let _writing = self.catalog_writes.lock().await;
        let rows = self.storage.election_states().await?;
        let mut changed = false;
        for row in rows {
            let current = self.election(row.id);
            let entry = match &current {
                Some(e)
                    if e.election.roll_version == row.roll_version
                        && e.election.public_key == row.public_key =>
                {
                    let el = &e.election;
                    if el.state == row.state
                        && el.name == row.name
                        && el.opens_at_ms == row.opens_at_ms
                        && el.closes_at_ms == row.closes_at_ms
                        && el.board_period == row.board_period
                        && el.board_final == row.board_final
                    {
                        continue;
                    }
                    Arc::new(e.with_row(&row))
                }
                _ => match Catalog::load_one(&self.storage, row.id).await? {
                    Some(e) => e,
                    None => continue,
                },
            };
            let next = self.catalog.load().with_entry(entry);
            self.catalog.store(Arc::new(next));
            changed = true;
        }
        if changed {
            // Results pages and streams show the state: wake them.
            self.tally.touch();
        }
        Ok(())
    }

    /// Refreshes the catalog every [`STATE_REFRESH_MS`].
    fn spawn_refresher(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut tick =
                tokio::time::interval(std::time::Duration::from_millis(STATE_REFRESH_MS));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(e) = this.refresh().await {
                    tracing::warn!(error = %format!("{e:#}"), "reading the elections' states failed");
                }
            }
        })
    }

    /// Reloads the catalog when another process seeded the store.
    fn spawn_seed_watcher(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        crate::platform::seed_watch::spawn(
            self.store.clone(),
            seed::SEED_GENERATION_KEY,
            self.loaded_generation.clone(),
            "the voting catalog",
            move || {
                let this = this.clone();
                async move {
                    let _writing = this.catalog_writes.lock().await;
                    this.catalog
                        .store(Arc::new(Catalog::load(&this.storage).await?));
                    Ok(())
                }
            },
        )
    }
}
