//! The seed's bulk load, through the store's bulk loader
//! ([`Store::bulk_load`](crate::store::Store::bulk_load): binary `COPY` with
//! the indexes set aside on PostgreSQL, prepared inserts on SQLite): the
//! generator runs on its own thread a few chunks ahead of the loads, with a
//! progress bar. The tables are loaded in three groups (users; comments;
//! courses, snapshots and ratings), at once or one after another
//! ([`GroupLoads`]).

use std::sync::Arc;

use indicatif::ProgressBar;
use tokio::sync::mpsc;

use super::super::model::CommentType;
use super::super::seed::{course_title, display_name, Chunk, Generator, Population, Snapshot};
use super::CommentsStore;
use crate::store::bulk::{BulkLoad, BulkTable};
use crate::store::{Sql, Writers};

/// Courses per chunk (a load's send, a progress step, a channel message).
const COURSES_PER_CHUNK: i64 = 250;
/// Users per send.
const USERS_PER_CHUNK: i64 = 50_000;
/// Chunks the generator may run ahead of the loads (bounds memory).
const CHUNKS_AHEAD_MAX: usize = 4;
/// Bytes to reserve per comments row in a chunk's rows.
const BYTES_PER_ROW: usize = 400;

static USERS: BulkTable = BulkTable {
    name: "comments_users",
    columns: &["id", "display_name"],
    analyze: true,
};
static COMMENTS: BulkTable = BulkTable {
    name: "comments",
    columns: &[
        "id",
        "course_id",
        "user_id",
        "comment_type",
        "parent_id",
        "rating",
        "title",
        "remarks",
        "created_ms",
    ],
    analyze: true,
};
static COURSES: BulkTable = BulkTable {
    name: "comments_courses",
    columns: &["id", "provider_id", "title"],
    analyze: true,
};
static SNAPSHOTS: BulkTable = BulkTable {
    name: "comments_snapshots",
    columns: &[
        "course_id",
        "comment_type",
        "user_id",
        "first_comment_id",
        "last_comment_id",
        "last_title",
        "last_rating",
        "last_remarks",
        "last_update_ms",
        "display_name",
        "comment_count",
    ],
    analyze: true,
};
static RATINGS: BulkTable = BulkTable {
    name: "comments_ratings",
    columns: &[
        "course_id",
        "comment_type",
        "count",
        "sum",
        "stars1",
        "stars2",
        "stars3",
        "stars4",
        "stars5",
        "version",
    ],
    analyze: true,
};

static USERS_GROUP: &[&BulkTable] = &[&USERS];
static COMMENTS_GROUP: &[&BulkTable] = &[&COMMENTS];
static THREADS_GROUP: &[&BulkTable] = &[&COURSES, &SNAPSHOTS, &RATINGS];
static EVERY_TABLE: &[&BulkTable] = &[&USERS, &COMMENTS, &COURSES, &SNAPSHOTS, &RATINGS];

/// New comments' ids follow the loaded ones: PostgreSQL's from the id
/// column's sequence; SQLite's rowid is the largest id plus one already.
static IDS_FOLLOW_THE_LOAD: Sql = Sql::per_dialect(
    "SELECT 1",
    "SELECT setval('comments_id_seq', (SELECT COALESCE(MAX(id), 0) + 1 FROM comments), false)",
);

/// After a seed: the site's own tables start anew and every reviewer is
/// enrolled on the courses they reviewed.
static ENROL_REVIEWERS: Sql = Sql::new(
    "DELETE FROM comments_enrolments;
     DELETE FROM comments_providers;
     DELETE FROM comments_reports;
     DELETE FROM comments_helpful;
     INSERT INTO comments_enrolments (course_id, user_id)
        SELECT DISTINCT course_id, user_id FROM comments_snapshots;",
);

/// How the seed's table groups are loaded, by how the store takes writers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum GroupLoads {
    /// One writer at a time (SQLite): one load over every table, a chunk's
    /// rows table after table.
    OneAfterAnother,
    /// Writers at once (PostgreSQL): a load per group, each on a
    /// connection and in a transaction of its own, all three at once.
    /// Measured on 2 cores (BENCHMARKS.md): `INSERT ... SELECT unnest(...)`
    /// took 33-48 s for the default data set, bound by PostgreSQL's CPU
    /// and WAL (a record per row and per index entry); one transaction
    /// doing all of it with `COPY` took 24-26 s, one backend busy and the
    /// other core idle.
    AtOnce,
}

impl GroupLoads {
    /// The design for a store whose writes are made by `writers`.
    pub fn of(writers: Writers) -> GroupLoads {
        match writers {
            Writers::OneProcess => GroupLoads::OneAfterAnother,
            Writers::Shared => GroupLoads::AtOnce,
        }
    }
}

impl CommentsStore {
    /// Loads `gen`'s data set into emptied tables; the snapshots written.
    /// A group's tables are never seen without their indexes, and a seed
    /// that fails on PostgreSQL leaves each group either as it was or
    /// wholly loaded (seed again with --force).
    pub async fn seed_bulk(&self, gen: Generator, progress: bool) -> anyhow::Result<i64> {
        let bar = crate::platform::progress::seed_bar(
            total_rows(&gen),
            "rows",
            "seeding comments",
            progress,
        );
        let (users, pop) = (gen.args.users, gen.pop);
        let snapshots = match self.group_loads {
            GroupLoads::OneAfterAnother => {
                let mut load = self.store.bulk_load(EVERY_TABLE).await?;
                load_users(&mut load, users, &bar).await?;
                let [mut chunks] = spawn_generator(gen);
                let mut snapshots = 0;
                while let Some(chunk) = chunks.recv().await {
                    load_comments(&mut load, &chunk, &bar).await?;
                    snapshots += load_threads(&mut load, &chunk, &pop, &bar).await?;
                }
                load.finish().await?;
                snapshots
            }
            GroupLoads::AtOnce => {
                let [mut for_comments, mut for_threads] = spawn_generator(gen);
                let users = async {
                    let mut load = self.store.bulk_load(USERS_GROUP).await?;
                    load_users(&mut load, users, &bar).await?;
                    load.finish().await
                };
                let comments = async {
                    let mut load = self.store.bulk_load(COMMENTS_GROUP).await?;
                    while let Some(chunk) = for_comments.recv().await {
                        load_comments(&mut load, &chunk, &bar).await?;
                    }
                    load.finish().await
                };
                let threads = async {
                    let mut load = self.store.bulk_load(THREADS_GROUP).await?;
                    let mut snapshots = 0;
                    while let Some(chunk) = for_threads.recv().await {
                        snapshots += load_threads(&mut load, &chunk, &pop, &bar).await?;
                    }
                    load.finish().await?;
                    anyhow::Ok(snapshots)
                };
                let ((), (), snapshots) = tokio::try_join!(users, comments, threads)?;
                snapshots
            }
        };
        bar.finish();
        self.store
            .write(|tx| Box::pin(tx.query_one(&IDS_FOLLOW_THE_LOAD, &[], |_| Ok(()))))
            .await?;
        Ok(snapshots)
    }
}

impl CommentsStore {
    /// Enrols every seeded reviewer on the courses they reviewed, after
    /// emptying the site's own tables (see [`ENROL_REVIEWERS`]).
    pub async fn enrol_reviewers(&self) -> anyhow::Result<()> {
        self.store
            .write(|tx| Box::pin(tx.batch(&ENROL_REVIEWERS)))
            .await?;
        Ok(())
    }
}

/// Runs the generator on its own thread, at most `CHUNKS_AHEAD_MAX` chunks
/// ahead of the slowest of the `N` receivers, each of which sees every
/// chunk.
fn spawn_generator<const N: usize>(gen: Generator) -> [mpsc::Receiver<Arc<Chunk>>; N] {
    let (senders, receivers): (Vec<_>, Vec<_>) =
        (0..N).map(|_| mpsc::channel(CHUNKS_AHEAD_MAX)).unzip();
    std::thread::Builder::new()
        .name("seed-comments-gen".into())
        .spawn(move || {
            let mut first = 1;
            while first <= gen.args.courses {
                let last = (first + COURSES_PER_CHUNK - 1).min(gen.args.courses);
                let chunk = Arc::new(gen.chunk(first, last));
                for s in &senders {
                    if s.blocking_send(chunk.clone()).is_err() {
                        return;
                    }
                }
                first = last + 1;
            }
        })
        .expect("spawn the generator thread");
    receivers
        .try_into()
        .unwrap_or_else(|_| unreachable!("N receivers"))
}

fn total_rows(gen: &Generator) -> u64 {
    (gen.args.users + gen.args.courses + gen.args.courses * gen.rows_per_course) as u64
}

async fn load_users(load: &mut BulkLoad, users: i64, bar: &ProgressBar) -> anyhow::Result<()> {
    let mut user = 1;
    while user <= users {
        let last = (user + USERS_PER_CHUNK - 1).min(users);
        let mut rows = load.rows(&USERS, (last - user + 1) as usize, 40);
        for u in user..=last {
            rows.row().int8(u).text(&display_name(u));
        }
        load.send(rows).await?;
        bar.inc((last - user + 1) as u64);
        user = last + 1;
    }
    Ok(())
}

/// A chunk's comments, in primary-key order: on SQLite every insert
/// appends to the B-tree.
async fn load_comments(
    load: &mut BulkLoad,
    chunk: &Chunk,
    bar: &ProgressBar,
) -> anyhow::Result<()> {
    let mut rows = load.rows(&COMMENTS, chunk.rows.len(), BYTES_PER_ROW);
    for r in &chunk.rows {
        rows.row()
            .int8(r.id)
            .int8(r.course_id)
            .int8(r.user_id)
            .text(r.comment_type)
            .opt_int8(r.parent_id)
            .opt_int4(r.rating)
            .text(&r.title)
            .text(&r.remarks)
            .int8(r.created_ms);
    }
    load.send(rows).await?;
    bar.inc(chunk.rows.len() as u64);
    Ok(())
}

/// A chunk's courses, snapshots and ratings; the snapshots loaded.
async fn load_threads(
    load: &mut BulkLoad,
    chunk: &Chunk,
    pop: &Population,
    bar: &ProgressBar,
) -> anyhow::Result<i64> {
    let kind = CommentType::Course.as_str();
    let courses = (chunk.last_course - chunk.first_course + 1) as usize;
    let mut rows = load.rows(&COURSES, courses, 60);
    for course in chunk.first_course..=chunk.last_course {
        rows.row()
            .int8(course)
            .int8(pop.provider_of(course))
            .text(&course_title(course));
    }
    load.send(rows).await?;
    // In the listing's order (course, type, last update, user): on SQLite
    // every insert appends to the B-tree of its index.
    let mut order: Vec<&Snapshot> = chunk.snapshots.iter().collect();
    order.sort_by_key(|s| (s.course_id, chunk.rows[s.last].created_ms, s.user_id));
    let mut rows = load.rows(&SNAPSHOTS, order.len(), BYTES_PER_ROW);
    for s in order {
        let last = &chunk.rows[s.last];
        rows.row()
            .int8(s.course_id)
            .text(kind)
            .int8(s.user_id)
            .int8(s.first_comment_id)
            .int8(last.id)
            .text(&last.title)
            .int4(last.rating.unwrap_or(0))
            .text(&last.remarks)
            .int8(last.created_ms)
            .text(&display_name(s.user_id))
            .int4(s.comment_count as i32);
    }
    load.send(rows).await?;
    let mut rows = load.rows(&RATINGS, chunk.ratings.len(), 100);
    for (course, r) in &chunk.ratings {
        rows.row().int8(*course).text(kind);
        for v in r {
            rows.int8(*v);
        }
        rows.int8(1);
    }
    load.send(rows).await?;
    bar.inc(courses as u64);
    Ok(chunk.snapshots.len() as i64)
}
