//! Comments: users rate and comment on courses, the course's provider replies
//! once to each comment (and may edit the reply). Snapshots (first and last
//! comment per user, course and type) and rating aggregates are maintained
//! on write; the listing's JSON is built by the database and served through a
//! bounded page cache with ETags. See the comments write-up. A course counts
//! each user once, with their last rating; users edit and delete their own
//! reviews, providers their own replies.

pub mod cache;
pub mod filter;
pub mod http;
pub mod model;
pub mod notifier;
pub mod page;
pub mod seed;
pub mod site;
pub mod store;

use std::sync::Arc;

use include_dir::include_dir;

use crate::platform::auth::TokenKeys;
use crate::platform::auth::{Role, RoleSpec};
use crate::platform::service::{
    AdminPage, AppState, Link, LinkKind, OpenApiRouter, Platform, Service, ServiceState, Started,
};
use crate::store::{MigrationSet, Store, StoreError};

/// The comments service, as `services::all()` lists it.
pub struct Comments;

static MIGRATIONS: MigrationSet = MigrationSet {
    owner: "comments",
    sqlite: include_dir!("$CARGO_MANIFEST_DIR/src/services/comments/migrations/sqlite"),
    postgres: include_dir!("$CARGO_MANIFEST_DIR/src/services/comments/migrations/postgres"),
};

/// A reviewer: writes, edits and deletes their own reviews (`sub` = the
/// user's id).
pub const USER: Role = Role::new("user");
/// A course's provider: replies to its reviews (`sub` = the provider's id).
pub const PROVIDER: Role = Role::new("provider");
/// A moderator: hides, restores and removes reviews and replies, bans
/// users, works the queue (admin may too).
pub const MODERATOR: Role = Role::new("moderator");
/// The host site's server: registers providers, courses and enrolments
/// (admin may too).
pub const HOST: Role = Role::new("host");

impl Service for Comments {
    const NAME: &'static str = "comments";
    const SEED_ABOUT: Option<&'static str> =
        Some("Users, courses, comments with replies (2,000,000 comments with the defaults)");
    type Args = CommentsArgs;
    type SeedArgs = seed::SeedCommentsArgs;
    type State = CommentsState;

    fn event_categories(&self) -> &'static [&'static str] {
        &["comments"]
    }

    fn roles(&self) -> &'static [RoleSpec] {
        &[
            RoleSpec {
                role: USER,
                about: "a reviewer (sub = the user's id): posts, edits and deletes their reviews",
                claims: &[],
                console: false,
            },
            RoleSpec {
                role: PROVIDER,
                about: "a course provider (sub = its id): replies to its courses' reviews",
                claims: &[],
                console: false,
            },
            RoleSpec {
                role: MODERATOR,
                about: "a comments moderator: hides, restores, removes, bans, works the queue",
                claims: &[],
                console: true,
            },
            RoleSpec {
                role: HOST,
                about: "the host site: registers providers, courses and enrolments",
                claims: &[],
                console: false,
            },
        ]
    }

    fn migrations(&self) -> Option<&'static MigrationSet> {
        Some(&MIGRATIONS)
    }

    async fn seed(&self, store: &Store, c: seed::SeedCommentsArgs) -> anyhow::Result<()> {
        let r = seed::seed(store, &c, true).await?;
        if r.seeded {
            println!(
                "seeded {} users, {} courses, {} comments, {} replies, {} snapshots in {:.1} s",
                r.users, r.courses, r.comments, r.replies, r.snapshots, r.elapsed_s
            );
        }
        if let Some(path) = &c.testdata_csv {
            println!("wrote {} rows to {}", r.testdata_rows, path.display());
        }
        Ok(())
    }

    async fn seed_demo(&self, store: &Store, _data_dir: &std::path::Path) -> anyhow::Result<()> {
        seed::seed_demo_if_empty(store).await
    }

    async fn start(
        &self,
        platform: &Platform,
        args: CommentsArgs,
    ) -> anyhow::Result<Started<CommentsState>> {
        let state = Arc::new(CommentsState::new(&args, platform)?);
        let mut started = Started::new(state.clone());
        if let Some(worker) = state.spawn_invalidation_listener() {
            started = started.with_worker(worker);
        }
        if let Some(url) = &args.comments_notify_webhook {
            let webhook = notifier::Webhook::new(url, args.comments_notify_attempts_max)?;
            started = started.with_worker(notifier::spawn(
                platform.store.clone(),
                state.storage.clone(),
                webhook,
                state.notify.clone(),
            ));
        }
        Ok(started)
    }

    fn routes(&self) -> OpenApiRouter<AppState> {
        http::routes()
    }

    fn admin_pages(&self) -> &'static [AdminPage] {
        &[AdminPage {
            href: "/comments/moderate",
            title: "Comments: moderation",
            about: "the queue of held and reported reviews: approve, hide, dismiss, ban.",
            roles: &["moderator"],
        }]
    }

    fn links(&self) -> Vec<Link> {
        vec![
            Link {
                kind: LinkKind::Page,
                href: "/comments/",
                title: "Comments",
                about: "a course's rating and reviews, as an embeddable widget.",
            },
            Link {
                kind: LinkKind::Page,
                href: "/comments/moderate",
                title: "Comments moderation",
                about: "the queue of held and reported reviews, for moderators.",
            },
        ]
    }
}

/// `serve` flags of the comments service.
#[derive(Clone, Debug, clap::Args)]
pub struct CommentsArgs {
    /// Page cache of comment listings (off for benchmarks of the database path).
    #[arg(long = "comments-cache", env = "THRONG_COMMENTS_CACHE", value_enum, default_value_t = OnOff::On)]
    pub cache: OnOff,
    /// Listing pages cached at most.
    #[arg(
        long = "comments-cache-entries-max",
        env = "THRONG_COMMENTS_CACHE_ENTRIES_MAX",
        default_value_t = 20_000
    )]
    pub cache_entries_max: usize,
    /// Bytes of cached listing pages at most, in MiB.
    #[arg(
        long = "comments-cache-mib-max",
        env = "THRONG_COMMENTS_CACHE_MIB_MAX",
        default_value_t = 64
    )]
    pub cache_mib_max: usize,
    /// How SQLite builds the listing's JSON: `concat` (printf, json_quote,
    /// group_concat; the default, faster) or `functions` (json_object,
    /// json_group_array); same bytes.
    /// PostgreSQL always concatenates (its json_build_object adds spaces).
    #[arg(long = "comments-json", env = "THRONG_COMMENTS_JSON", value_enum, default_value_t = store::JsonBuild::Concat)]
    pub json_build: store::JsonBuild,
    /// Every signed-in user may review every course; without it, only
    /// users the host enrolled on the course.
    #[arg(long = "comments-reviews-open", env = "THRONG_COMMENTS_REVIEWS_OPEN")]
    pub reviews_open: bool,
    /// Words or phrases (comma-separated) that hold a review for
    /// moderation, matched case-insensitively on whole words.
    #[arg(long = "comments-filter-words", env = "THRONG_COMMENTS_FILTER_WORDS")]
    pub filter_words: Option<String>,
    /// A file of such words or phrases, one a line (`#` starts a comment
    /// line).
    #[arg(long = "comments-filter-file", env = "THRONG_COMMENTS_FILTER_FILE")]
    pub filter_file: Option<std::path::PathBuf>,
    /// Hold reviews with a link (a URL, `www.`, a bare domain) for
    /// moderation.
    #[arg(long = "comments-filter-links", env = "THRONG_COMMENTS_FILTER_LINKS", value_enum, default_value_t = OnOff::On)]
    pub filter_links: OnOff,
    /// POST notifications here (JSON, at least once, `Idempotency-Key`):
    /// a course's provider of a new review, a reviewer of a reply, the
    /// moderators of a report. Off when absent.
    #[arg(
        long = "comments-notify-webhook",
        env = "THRONG_COMMENTS_NOTIFY_WEBHOOK"
    )]
    pub comments_notify_webhook: Option<String>,
    /// Attempts at one notification before it is parked (kept, listed at
    /// GET /api/comments/host/notifications/parked) so it stops holding
    /// back the ones after it; retries back off from 0.1 s to 30 s (10
    /// attempts: ~51 s). The webhook's refusal (a 4xx other than 408 and
    /// 429, a redirect) parks at once.
    #[arg(long = "comments-notify-attempts-max", env = "THRONG_COMMENTS_NOTIFY_ATTEMPTS_MAX", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub comments_notify_attempts_max: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

/// What the comments routes share. The one owner of the page cache's
/// versions: every write goes through [`CommentsState::post_comment`],
/// [`CommentsState::edit_comment`], [`CommentsState::delete_comment`] or
/// [`CommentsState::put_reply`], which bump the course's version after the
/// commit and before the answer, so no write path can forget it.
pub struct CommentsState {
    /// The comments tables.
    pub storage: store::CommentsStore,
    pub keys: Arc<TokenKeys>,
    pub cache: cache::PageCache,
    /// `serve --demo`: the demo token endpoint answers.
    pub demo: bool,
    pub json_build: store::JsonBuild,
    /// `--comments-reviews-open`.
    pub reviews_open: bool,
    /// The word and link filter.
    pub filter: filter::ContentFilter,
    /// Wakes the notifier after a write it has news of.
    pub notify: Arc<tokio::sync::Notify>,
}

impl ServiceState for CommentsState {}

impl CommentsState {
    pub fn new(args: &CommentsArgs, platform: &Platform) -> anyhow::Result<CommentsState> {
        Ok(CommentsState {
            reviews_open: args.reviews_open,
            filter: filter::ContentFilter::new(
                args.filter_words.as_deref(),
                args.filter_file.as_deref(),
                args.filter_links == OnOff::On,
            )?,
            notify: Arc::new(tokio::sync::Notify::new()),
            storage: store::open(&platform.store),
            keys: platform.keys.clone(),
            cache: cache::PageCache::new(
                args.cache == OnOff::On,
                args.cache_entries_max,
                args.cache_mib_max.saturating_mul(1 << 20),
            ),
            demo: platform.demo,
            json_build: args.json_build,
        })
    }

    /// Where the store tells of other nodes' writes (PostgreSQL): bumps the
    /// page-cache version of every course another node wrote on, as the
    /// store's invalidation channel hears of it.
    fn spawn_invalidation_listener(self: &Arc<Self>) -> Option<tokio::task::JoinHandle<()>> {
        if !self.cache.enabled() {
            return None;
        }
        let mut heard = self.storage.invalidations()?;
        let this = Arc::downgrade(self);
        Some(tokio::spawn(async move {
            while let Some(i) = heard.recv().await {
                let Some(this) = this.upgrade() else { return };
                match i {
                    crate::store::invalidate::Invalidation::Key(key) => {
                        if let Some(course) = key
                            .strip_prefix(store::INVALIDATION_PREFIX)
                            .and_then(|c| c.parse::<i64>().ok())
                        {
                            this.cache.bump(course);
                        }
                    }
                    crate::store::invalidate::Invalidation::Everything => this.cache.bump_all(),
                }
            }
        }))
    }

    /// Posts a comment; on success, bumps the course's page-cache version.
    pub async fn post_comment(
        &self,
        new: model::NewComment,
    ) -> Result<store::PostOutcome, StoreError> {
        let course_id = new.course_id;
        let outcome = self.storage.post_comment(new).await?;
        if matches!(outcome, store::PostOutcome::Posted(_)) {
            self.cache.bump(course_id);
            self.notify.notify_one();
        }
        Ok(outcome)
    }

    /// Edits a user's own review; on success, bumps the course's version.
    pub async fn edit_comment(
        &self,
        edit: model::CommentEdit,
    ) -> Result<store::EditOutcome, StoreError> {
        let outcome = self.storage.edit_comment(edit).await?;
        if let store::EditOutcome::Edited(out) = &outcome {
            self.cache.bump(out.course_id);
        }
        Ok(outcome)
    }

    /// Deletes a user's own review or a provider's own reply; on success,
    /// bumps the course's version.
    pub async fn delete_comment(
        &self,
        d: model::Deleter,
    ) -> Result<store::DeleteOutcome, StoreError> {
        let outcome = self.storage.delete_comment(d).await?;
        if let store::DeleteOutcome::Deleted { course_id } = &outcome {
            self.cache.bump(*course_id);
        }
        Ok(outcome)
    }

    /// A moderator's action; bumps the course's version when the listing
    /// changes (a removal is an erasure: `store::CommentsStore::moderate`).
    pub async fn moderate(&self, m: store::Moderation) -> Result<store::ModOutcome, StoreError> {
        let action = m.action;
        let outcome = self.storage.moderate(m).await?;
        if let store::ModOutcome::Done { course_id, .. } = &outcome {
            if action != store::ModAction::Dismiss {
                self.cache.bump(*course_id);
                self.notify.notify_one();
            }
        }
        Ok(outcome)
    }

    /// A reader's helpful vote; bumps the course's version when counted.
    pub async fn vote_helpful(
        &self,
        comment_id: i64,
        user_id: i64,
        name: Option<String>,
        at_ms: i64,
    ) -> Result<store::HelpfulOutcome, StoreError> {
        let outcome = self
            .storage
            .vote_helpful(comment_id, user_id, name, at_ms)
            .await?;
        if let store::HelpfulOutcome::Voted {
            counted: true,
            course_id,
            ..
        } = &outcome
        {
            self.cache.bump(*course_id);
        }
        Ok(outcome)
    }

    /// Creates or edits a reply; on success, bumps its course's version.
    pub async fn put_reply(
        &self,
        reply: model::NewReply,
    ) -> Result<store::ReplyOutcome, StoreError> {
        let outcome = self.storage.put_reply(reply).await?;
        if let store::ReplyOutcome::Created(out) | store::ReplyOutcome::Edited(out) = &outcome {
            self.cache.bump(out.course_id);
            self.notify.notify_one();
        }
        Ok(outcome)
    }
}
