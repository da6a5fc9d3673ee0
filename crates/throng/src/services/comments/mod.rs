//! Comments: users rate and comment on courses, the course's provider replies
//! once to each comment (and may edit the reply). Snapshots (first and last
//! comment per user, course and type) and rating aggregates are maintained
//! on write; the listing's JSON is built by the database and served through a
//! bounded page cache with ETags. See `000_f49fe3b09f9da7b1.txt`.

pub mod bench;
pub mod cache;
pub mod http;
pub mod model;
pub mod page;
pub mod seed;
pub mod store;

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
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

/// What the comments routes share.
pub struct CommentsState {
    pub cache: cache::PageCache,
    /// `serve --demo`: the demo token endpoint answers.
    pub demo: bool,
    pub json_build: store::JsonBuild,
}

impl CommentsState {
    pub fn new(args: &CommentsArgs, demo: bool) -> CommentsState {
        CommentsState {
            cache: cache::PageCache::new(
                args.cache == OnOff::On,
                args.cache_entries_max,
                args.cache_mib_max.saturating_mul(1 << 20),
            ),
            demo,
            json_build: args.json_build,
        }
    }
}
