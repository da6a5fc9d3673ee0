//! `throng seed comments`: the write-up's data set (1,000,000 users, 40,000
//! courses, 50 comments per course from random users with ids 500,000 to
//! 1,000,000 in chronological order, a provider reply to half of them),
//! with snapshots and rating aggregates computed while generating.
//!
//! The data is a pure function of the arguments and `--seed` (splitmix64, no
//! clock): comment ids, times (from 2024-01-01 UTC) and texts are the same on
//! every run and in both dialects, which the response snapshot tests rely on.
//! Generation runs on one thread and the inserts on another (2 cores).
//! After loading, statistics are gathered for the comments tables only
//! (`ANALYZE` per table, in both dialects; booking's are left without).
//!
//! `--testdata-csv PATH` also writes the Artillery payload (`testData.csv`,
//! the write-up's columns, no header) drawn from the stored snapshots.
//!
//! This file holds the arguments, the report and the entry points;
//! `generator.rs` makes the data, the storage's `store/bulk.rs` loads it
//! (`CommentsStore::seed_bulk`), `testdata.rs` writes the CSV.

mod generator;
mod testdata;

use std::path::PathBuf;
use std::time::Instant;

use crate::store::{NewEvent, Store};

pub use generator::{
    course_title, display_name, Chunk, Generator, Population, Rng, Row, Snapshot, BASE_MS,
};
pub use testdata::write_testdata_csv;

#[derive(Clone, Debug, clap::Args)]
pub struct SeedCommentsArgs {
    /// Users (ids 1..=N); providers are ids below 50,000, commenters the upper half.
    #[arg(long, default_value_t = 1_000_000)]
    pub users: i64,
    /// Courses.
    #[arg(long, default_value_t = 40_000)]
    pub courses: i64,
    /// Comments per course.
    #[arg(long, default_value_t = 50)]
    pub comments_per_course: i64,
    /// Share of comments with a provider reply (0 to 1).
    #[arg(long, default_value_t = 0.5)]
    pub reply_ratio: f64,
    /// Replace existing comments data.
    #[arg(long)]
    pub force: bool,
    /// Random seed of the generator (same seed, same data).
    #[arg(long, default_value_t = 2017)]
    pub seed: u64,
    /// Also write the Artillery payload testData.csv here (with existing data
    /// and no --force, only the file is written).
    #[arg(long)]
    pub testdata_csv: Option<PathBuf>,
    /// Rows of testData.csv.
    #[arg(long, default_value_t = 5000)]
    pub testdata_rows: usize,
    /// Reviews per thousand hidden by a moderator after the load, and as
    /// many others reported (moderation in place, as the bench runs it).
    #[arg(long, default_value_t = 0)]
    pub moderated_per_mille: i64,
}

impl SeedCommentsArgs {
    pub fn small(users: i64, courses: i64, comments_per_course: i64) -> SeedCommentsArgs {
        SeedCommentsArgs {
            users,
            courses,
            comments_per_course,
            reply_ratio: 0.5,
            force: false,
            seed: 2017,
            testdata_csv: None,
            testdata_rows: 5000,
            moderated_per_mille: 0,
        }
    }
}

#[derive(Debug, Default)]
pub struct SeedReport {
    pub users: i64,
    pub courses: i64,
    pub comments: i64,
    pub replies: i64,
    pub snapshots: i64,
    pub elapsed_s: f64,
    /// Rows written to testData.csv (0 when not asked).
    pub testdata_rows: usize,
    /// False when existing data was kept (only the CSV was written).
    pub seeded: bool,
}

/// The demo set seeded by `serve --demo`; the demo page signs in as this user.
pub const DEMO_USERS: i64 = 200;
pub const DEMO_COURSES: i64 = 20;
pub const DEMO_COMMENTS_PER_COURSE: i64 = 10;
pub const DEMO_USER_ID: i64 = 150;
/// The demo's moderator (outside the demo's user ids).
pub const DEMO_MODERATOR_ID: i64 = 900_001;

/// `--moderated-per-mille` at most: as many hidden as reported, each a
/// share of the reviews.
pub const MODERATED_PER_MILLE_MAX: i64 = 500;
/// Moderations in flight at once while seeding (each one command of the
/// store's group commit).
const MODERATIONS_IN_FLIGHT_MAX: usize = 64;
/// The seed's moderator, as events name it.
const SEED_MODERATOR: &str = "seed";

/// Hides `per_mille` of every thousand reviews and reports as many others
/// (by user 1), through the same writes a moderator and a reader make.
async fn moderate_some(
    storage: &super::store::CommentsStore,
    per_mille: i64,
) -> anyhow::Result<(usize, usize)> {
    use futures::StreamExt;
    if per_mille == 0 {
        return Ok((0, 0));
    }
    let (hide, report) = storage.moderation_sample(per_mille).await?;
    let at = crate::base::clock::now_ms();
    let hidden = futures::stream::iter(hide.clone())
        .map(|id| {
            storage.moderate(super::store::Moderation {
                comment_id: id,
                moderator: SEED_MODERATOR.into(),
                action: super::store::ModAction::Hide,
                reason: "seeded moderation".into(),
                at_ms: at,
            })
        })
        .buffer_unordered(MODERATIONS_IN_FLIGHT_MAX)
        .collect::<Vec<_>>()
        .await;
    for h in hidden {
        h?;
    }
    let reported = futures::stream::iter(report.clone())
        .map(|id| storage.report(id, 1, None, "seeded report".into(), at))
        .buffer_unordered(MODERATIONS_IN_FLIGHT_MAX)
        .collect::<Vec<_>>()
        .await;
    for r in reported {
        r?;
    }
    Ok((hide.len(), report.len()))
}

pub fn validate(args: &SeedCommentsArgs) -> anyhow::Result<()> {
    if !(2..=10_000_000).contains(&args.users) {
        anyhow::bail!("--users: 2 to 10000000");
    }
    if !(1..=1_000_000).contains(&args.courses) {
        anyhow::bail!("--courses: 1 to 1000000");
    }
    if !(0..=10_000).contains(&args.comments_per_course) {
        anyhow::bail!("--comments-per-course: 0 to 10000");
    }
    if !(0.0..=1.0).contains(&args.reply_ratio) {
        anyhow::bail!("--reply-ratio: 0 to 1");
    }
    if args.testdata_rows == 0 || args.testdata_rows > 1_000_000 {
        anyhow::bail!("--testdata-rows: 1 to 1000000");
    }
    if !(0..=MODERATED_PER_MILLE_MAX).contains(&args.moderated_per_mille) {
        anyhow::bail!("--moderated-per-mille: 0 to {MODERATED_PER_MILLE_MAX}");
    }
    Ok(())
}

/// Seeds (unless data exists and only the CSV was asked for), then writes
/// the CSV if asked.
pub async fn seed(
    store: &Store,
    args: &SeedCommentsArgs,
    progress: bool,
) -> anyhow::Result<SeedReport> {
    validate(args)?;
    let started = Instant::now();
    let storage = super::store::open(store);
    let existing = storage.course_count().await?;
    let mut report = SeedReport::default();
    let csv_only = existing > 0 && !args.force && args.testdata_csv.is_some();
    if !csv_only {
        if existing > 0 && !args.force {
            anyhow::bail!(
                "the store already has {existing} courses with comments data; pass --force to replace it"
            );
        }
        let gen = Generator::new(args);
        let snapshots = storage.seed_bulk(gen, progress).await?;
        // Who reviewed a course was enrolled on it; the site's own data
        // (enrolments, providers' settings, reports, votes) starts anew.
        storage.enrol_reviewers().await?;
        let (hidden, reported) = moderate_some(&storage, args.moderated_per_mille).await?;
        if hidden + reported > 0 {
            tracing::info!(hidden, reported, "seeded moderation");
        }
        let gen = Generator::new(args);
        report = SeedReport {
            users: args.users,
            courses: args.courses,
            comments: args.courses * args.comments_per_course,
            replies: gen.replies_total(),
            snapshots,
            seeded: true,
            ..report
        };
        append_seeded_event(store, &report).await?;
    }
    if let Some(path) = &args.testdata_csv {
        report.testdata_rows =
            write_testdata_csv(&storage, path, args.testdata_rows, args.seed).await?;
    }
    report.elapsed_s = started.elapsed().as_secs_f64();
    Ok(report)
}

async fn append_seeded_event(store: &Store, r: &SeedReport) -> anyhow::Result<()> {
    let event = NewEvent::json(
        "comments-seed",
        "CommentsSeeded",
        &serde_json::json!({
            "users": r.users, "courses": r.courses, "comments": r.comments, "replies": r.replies,
        }),
    );
    store.append_event(event).await?;
    Ok(())
}

/// The quick-start data set for `serve --demo`, when the store has none.
pub async fn seed_demo_if_empty(store: &Store) -> anyhow::Result<()> {
    if super::store::open(store).course_count().await? > 0 {
        return Ok(());
    }
    let args = SeedCommentsArgs::small(DEMO_USERS, DEMO_COURSES, DEMO_COMMENTS_PER_COURSE);
    let report = seed(store, &args, false).await?;
    // The demo page's user may review every demo course.
    let storage = super::store::open(store);
    for course in 1..=DEMO_COURSES {
        storage.enrol(course, DEMO_USER_ID, true).await?;
    }
    tracing::info!(
        courses = report.courses,
        comments = report.comments,
        "seeded comments demo data"
    );
    Ok(())
}
