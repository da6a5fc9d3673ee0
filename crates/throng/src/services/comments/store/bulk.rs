//! The seed's bulk load, the one place of the service that reaches a
//! database's own driver: the generator runs on its own thread a few chunks
//! ahead while SQLite (one transaction per chunk on its own connection) or
//! PostgreSQL (binary `COPY` in one transaction) loads them, with a
//! progress bar.

use std::path::Path;
use std::sync::mpsc;

use indicatif::ProgressBar;

use super::super::model::CommentType;
use super::super::seed::{course_title, display_name, Chunk, Generator, Population, Snapshot};
use super::CommentsStore;

impl CommentsStore {
    /// Loads `gen`'s data set in bulk: on SQLite by inserts, a transaction
    /// per chunk on a connection of its own, after deleting the comments
    /// data when `wipe`; on PostgreSQL by binary `COPY` into emptied
    /// tables. The snapshots written.
    pub async fn seed_bulk(
        &self,
        gen: Generator,
        wipe: bool,
        progress: bool,
    ) -> anyhow::Result<i64> {
        if let Some(db) = self.store.sqlite() {
            let path = db.path().to_path_buf();
            return tokio::task::spawn_blocking(move || seed_sqlite(&path, gen, wipe, progress))
                .await?;
        }
        match self.store.postgres() {
            Some(db) => seed_pg(db, gen, progress).await,
            None => anyhow::bail!("no bulk loader for this store"),
        }
    }
}

/// Courses per transaction / progress step / channel message.
const COURSES_PER_CHUNK: i64 = 250;
/// Users per transaction.
const USERS_PER_CHUNK: i64 = 50_000;
/// Chunks the generator may run ahead of the inserts (bounds memory).
const CHUNKS_AHEAD_MAX: usize = 4;

fn progress_bar(total: u64, show: bool) -> ProgressBar {
    crate::platform::progress::seed_bar(total, "rows", "seeding comments", show)
}

/// Runs the generator on its own thread, `CHUNKS_AHEAD_MAX` chunks ahead.
fn spawn_generator(gen: Generator) -> mpsc::Receiver<Chunk> {
    let (tx, rx) = mpsc::sync_channel::<Chunk>(CHUNKS_AHEAD_MAX);
    std::thread::Builder::new()
        .name("seed-comments-gen".into())
        .spawn(move || {
            let mut first = 1;
            while first <= gen.args.courses {
                let last = (first + COURSES_PER_CHUNK - 1).min(gen.args.courses);
                if tx.send(gen.chunk(first, last)).is_err() {
                    return;
                }
                first = last + 1;
            }
        })
        .expect("spawn the generator thread");
    rx
}

fn total_rows(gen: &Generator) -> u64 {
    (gen.args.users + gen.args.courses + gen.args.courses * gen.rows_per_course) as u64
}

// -------------------------------------------------------------------- SQLite

const DELETE_ALL_SQLITE: &str = "BEGIN IMMEDIATE; DELETE FROM comments; DELETE FROM comments_snapshots;
    DELETE FROM comments_ratings; DELETE FROM comments_courses; DELETE FROM comments_users; COMMIT;";

fn seed_sqlite(path: &Path, gen: Generator, wipe: bool, progress: bool) -> anyhow::Result<i64> {
    let mut conn = crate::store::sqlite::open_connection(path, 256 * 1024, false)?;
    // Seeding is not serving: a crash mid-seed means seeding again (--force).
    // Every transaction is still committed; it is only not fsync'd one by one.
    conn.execute_batch("PRAGMA synchronous = OFF;")?;
    if wipe {
        conn.execute_batch(DELETE_ALL_SQLITE)?;
    }
    let bar = progress_bar(total_rows(&gen), progress);
    let mut user = 1;
    while user <= gen.args.users {
        let last = (user + USERS_PER_CHUNK - 1).min(gen.args.users);
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        {
            let mut ins =
                tx.prepare_cached("INSERT INTO comments_users (id, display_name) VALUES (?1, ?2)")?;
            for u in user..=last {
                ins.execute(rusqlite::params![u, display_name(u)])?;
            }
        }
        tx.commit()?;
        bar.inc((last - user + 1) as u64);
        user = last + 1;
    }
    let pop = gen.pop;
    let chunks = spawn_generator(gen);
    let mut snapshots = 0i64;
    for chunk in chunks {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        sqlite_insert_chunk(&tx, &chunk, &pop)?;
        tx.commit()?;
        snapshots += chunk.snapshots.len() as i64;
        bar.inc((chunk.rows.len() as i64 + chunk.last_course - chunk.first_course + 1) as u64);
    }
    bar.finish();
    // Statistics for the comments tables only (as on PostgreSQL): a plain
    // `ANALYZE` would also gather them for booking's tables, whose queries
    // are meant to run without (see booking's seed and ARCHITECTURE.md).
    conn.execute_batch(
        "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA analysis_limit = 1000;
         ANALYZE comments_users; ANALYZE comments_courses; ANALYZE comments;
         ANALYZE comments_snapshots; ANALYZE comments_ratings;",
    )?;
    Ok(snapshots)
}

fn sqlite_insert_chunk(
    tx: &rusqlite::Connection,
    chunk: &Chunk,
    pop: &Population,
) -> anyhow::Result<()> {
    use rusqlite::params;
    let kind = CommentType::Course.as_str();
    let mut ins_course = tx.prepare_cached(
        "INSERT INTO comments_courses (id, provider_id, title) VALUES (?1, ?2, ?3)",
    )?;
    for course in chunk.first_course..=chunk.last_course {
        ins_course.execute(params![
            course,
            pop.provider_of(course),
            course_title(course)
        ])?;
    }
    // Rows go in primary-key order: every insert appends to the B-tree.
    let mut ins = tx.prepare_cached(
        "INSERT INTO comments (id, course_id, user_id, comment_type, parent_id, rating, title, remarks, created_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?;
    for r in &chunk.rows {
        ins.execute(params![
            r.id,
            r.course_id,
            r.user_id,
            r.comment_type,
            r.parent_id,
            r.rating,
            r.title,
            r.remarks,
            r.created_ms
        ])?;
    }
    let mut ins_snap = tx.prepare_cached(
        "INSERT INTO comments_snapshots (course_id, comment_type, user_id, first_comment_id, last_comment_id,
            last_title, last_rating, last_remarks, last_update_ms, display_name, comment_count)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?;
    // In the table's key order (course, type, last update, user): every
    // insert appends to the B-tree.
    let mut order: Vec<&Snapshot> = chunk.snapshots.iter().collect();
    order.sort_by_key(|s| (s.course_id, chunk.rows[s.last].created_ms, s.user_id));
    for s in order {
        let last = &chunk.rows[s.last];
        ins_snap.execute(params![
            s.course_id,
            kind,
            s.user_id,
            s.first_comment_id,
            last.id,
            last.title,
            last.rating,
            last.remarks,
            last.created_ms,
            display_name(s.user_id),
            s.comment_count
        ])?;
    }
    let mut ins_rating = tx.prepare_cached(
        "INSERT INTO comments_ratings (course_id, comment_type, count, sum, stars1, stars2, stars3, stars4,
            stars5, version) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 1)",
    )?;
    for (course, r) in &chunk.ratings {
        ins_rating.execute(params![
            course, kind, r[0], r[1], r[2], r[3], r[4], r[5], r[6]
        ])?;
    }
    Ok(())
}

// ---------------------------------------------------------------- PostgreSQL

/// Loads the data set with three connections at once, each owning some of
/// the tables and loading them in one transaction of its own: the tables
/// are emptied (`TRUNCATE`), their indexes dropped, the rows sent by binary
/// `COPY ... FREEZE` (one statement per table and chunk of 250 courses) and
/// the indexes built again from sorted input before the commit.
///
/// - users: `comments_users`;
/// - comments: `comments` (the largest: 3,000,000 rows with the defaults);
/// - threads: `comments_courses`, `comments_snapshots`, `comments_ratings`.
///
/// A table is never seen without its indexes, and a seed that fails leaves
/// each group either as it was or wholly loaded (seed again with --force).
/// Measured on 2 cores (BENCHMARKS.md): `INSERT ... SELECT unnest(...)` took
/// 33-48 s for the default data set, bound by PostgreSQL's CPU and WAL (a
/// record per row and per index entry); one transaction doing all of it
/// with `COPY` took 24-26 s, one backend busy and the other core idle.
async fn seed_pg(
    store: &crate::store::postgres::PgStore,
    gen: Generator,
    progress: bool,
) -> anyhow::Result<i64> {
    use std::sync::Arc;
    let bar = progress_bar(total_rows(&gen), progress);
    let (users, pop) = (gen.args.users, gen.pop);
    let chunks = spawn_generator(gen);
    // Every loader of chunks sees every chunk; the generator runs at most
    // CHUNKS_AHEAD_MAX chunks ahead of the slower one.
    let (to_comments, comments_rx) = tokio::sync::mpsc::channel::<Arc<Chunk>>(1);
    let (to_threads, threads_rx) = tokio::sync::mpsc::channel::<Arc<Chunk>>(1);
    tokio::task::spawn_blocking(move || {
        for chunk in chunks {
            let chunk = Arc::new(chunk);
            if to_comments.blocking_send(chunk.clone()).is_err()
                || to_threads.blocking_send(chunk).is_err()
            {
                return;
            }
        }
    });
    let ((), (), snapshots) = tokio::try_join!(
        pg_load_users(store, users, &bar),
        pg_load_comments(store, comments_rx, &bar),
        pg_load_threads(store, threads_rx, &pop, &bar),
    )?;
    bar.finish();
    Ok(snapshots)
}

/// Memory for each index build (`maintenance_work_mem`, in the loading
/// transaction only): the largest index, comments' thread index over
/// 3,000,000 rows, sorts in memory with it.
const PG_INDEX_BUILD_MEMORY_MB: u32 = 512;

/// A loading transaction on `tables`: emptied, indexes set aside.
async fn pg_begin_load<'c>(
    client: &'c mut deadpool_postgres::Object,
    tables: &[&str],
) -> anyhow::Result<(
    deadpool_postgres::Transaction<'c>,
    crate::store::bulk::IndexesAside,
)> {
    let tx = client.transaction().await?;
    // TRUNCATE in this transaction is also what lets COPY freeze the rows.
    tx.batch_execute(&format!(
        "SET LOCAL maintenance_work_mem = '{PG_INDEX_BUILD_MEMORY_MB}MB'; SET LOCAL max_parallel_maintenance_workers = 0; TRUNCATE {}",
        tables.join(", ")
    ))
    .await?;
    let aside = crate::store::bulk::IndexesAside::drop_all(&tx, tables).await?;
    Ok((tx, aside))
}

/// Builds the indexes again, commits, and gathers the tables' statistics.
async fn pg_finish_load(
    tx: deadpool_postgres::Transaction<'_>,
    aside: crate::store::bulk::IndexesAside,
    tables: &[&str],
) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    aside.rebuild(&tx).await?;
    tx.commit().await?;
    tracing::debug!(
        ?tables,
        index_build_s = started.elapsed().as_secs_f64(),
        "comments seed: loaded"
    );
    Ok(())
}

async fn pg_analyze(client: &deadpool_postgres::Object, tables: &[&str]) -> anyhow::Result<()> {
    for t in tables {
        client.batch_execute(&format!("ANALYZE {t}")).await?;
    }
    Ok(())
}

async fn pg_load_users(
    store: &crate::store::postgres::PgStore,
    users: i64,
    bar: &ProgressBar,
) -> anyhow::Result<()> {
    use crate::store::bulk::CopyRows;
    const TABLES: &[&str] = &["comments_users"];
    let mut client = store.client().await?;
    let (tx, aside) = pg_begin_load(&mut client, TABLES).await?;
    let mut user = 1;
    while user <= users {
        let last = (user + USERS_PER_CHUNK - 1).min(users);
        let mut rows = CopyRows::with_capacity((last - user + 1) as usize * 40);
        for u in user..=last {
            rows.row(2).int8(u).text(&display_name(u));
        }
        rows.send(&tx, "comments_users", &["id", "display_name"], true)
            .await?;
        bar.inc((last - user + 1) as u64);
        user = last + 1;
    }
    pg_finish_load(tx, aside, TABLES).await?;
    pg_analyze(&client, TABLES).await
}

async fn pg_load_comments(
    store: &crate::store::postgres::PgStore,
    mut chunks: tokio::sync::mpsc::Receiver<std::sync::Arc<Chunk>>,
    bar: &ProgressBar,
) -> anyhow::Result<()> {
    const TABLES: &[&str] = &["comments"];
    let mut client = store.client().await?;
    let (tx, aside) = pg_begin_load(&mut client, TABLES).await?;
    while let Some(chunk) = chunks.recv().await {
        pg_copy_comments(&tx, &chunk).await?;
        bar.inc(chunk.rows.len() as u64);
    }
    tx.batch_execute(
        "SELECT setval('comments_id_seq', (SELECT COALESCE(MAX(id), 0) + 1 FROM comments), false)",
    )
    .await?;
    pg_finish_load(tx, aside, TABLES).await?;
    pg_analyze(&client, TABLES).await
}

/// Courses, snapshots and ratings; returns the snapshots loaded.
async fn pg_load_threads(
    store: &crate::store::postgres::PgStore,
    mut chunks: tokio::sync::mpsc::Receiver<std::sync::Arc<Chunk>>,
    pop: &Population,
    bar: &ProgressBar,
) -> anyhow::Result<i64> {
    const TABLES: &[&str] = &["comments_courses", "comments_snapshots", "comments_ratings"];
    let mut client = store.client().await?;
    let (tx, aside) = pg_begin_load(&mut client, TABLES).await?;
    let mut snapshots = 0i64;
    while let Some(chunk) = chunks.recv().await {
        pg_copy_threads(&tx, &chunk, pop).await?;
        snapshots += chunk.snapshots.len() as i64;
        bar.inc((chunk.last_course - chunk.first_course + 1) as u64);
    }
    pg_finish_load(tx, aside, TABLES).await?;
    pg_analyze(&client, TABLES).await?;
    Ok(snapshots)
}

/// Bytes to reserve per comments row in a chunk's `COPY` buffer.
const PG_COPY_BYTES_PER_ROW: usize = 400;

async fn pg_copy_threads(
    tx: &tokio_postgres::Transaction<'_>,
    chunk: &Chunk,
    pop: &Population,
) -> anyhow::Result<()> {
    use crate::store::bulk::CopyRows;
    let kind = CommentType::Course.as_str();
    let courses = (chunk.last_course - chunk.first_course + 1) as usize;
    let mut rows = CopyRows::with_capacity(courses * 60);
    for course in chunk.first_course..=chunk.last_course {
        rows.row(3)
            .int8(course)
            .int8(pop.provider_of(course))
            .text(&course_title(course));
    }
    rows.send(
        tx,
        "comments_courses",
        &["id", "provider_id", "title"],
        true,
    )
    .await?;
    let mut rows = CopyRows::with_capacity(chunk.snapshots.len() * PG_COPY_BYTES_PER_ROW);
    for s in &chunk.snapshots {
        let last = &chunk.rows[s.last];
        rows.row(11)
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
    rows.send(
        tx,
        "comments_snapshots",
        &[
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
        true,
    )
    .await?;
    let mut rows = CopyRows::with_capacity(chunk.ratings.len() * 100);
    for (course, r) in &chunk.ratings {
        rows.row(10).int8(*course).text(kind);
        for v in r {
            rows.int8(*v);
        }
        rows.int8(1);
    }
    rows.send(
        tx,
        "comments_ratings",
        &[
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
        true,
    )
    .await?;
    Ok(())
}

async fn pg_copy_comments(
    tx: &tokio_postgres::Transaction<'_>,
    chunk: &Chunk,
) -> anyhow::Result<()> {
    use crate::store::bulk::CopyRows;
    let mut rows = CopyRows::with_capacity(chunk.rows.len() * PG_COPY_BYTES_PER_ROW);
    for r in &chunk.rows {
        rows.row(9)
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
    rows.send(
        tx,
        "comments",
        &[
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
        true,
    )
    .await?;
    Ok(())
}
