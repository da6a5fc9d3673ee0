//! The bulk loaders: the generator runs on its own thread a few chunks
//! ahead while SQLite (one transaction per chunk on its own connection) or
//! PostgreSQL (`unnest` arrays) inserts them, with a progress bar.

use std::path::Path;
use std::sync::mpsc;

use indicatif::ProgressBar;

use super::super::model::CommentType;
use super::{course_title, display_name, Chunk, Generator, Population, Row, Snapshot};

/// Courses per transaction / progress step / channel message.
const COURSES_PER_CHUNK: i64 = 250;
/// Users per transaction.
const USERS_PER_CHUNK: i64 = 50_000;
/// PostgreSQL connections inserting chunks at once.
const PG_LOADERS: usize = 3;
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

pub(super) fn seed_sqlite(
    path: &Path,
    gen: Generator,
    wipe: bool,
    progress: bool,
) -> anyhow::Result<i64> {
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

pub(super) async fn seed_pg(
    store: &crate::store::postgres::PgStore,
    gen: Generator,
    wipe: bool,
    progress: bool,
) -> anyhow::Result<i64> {
    let client = store.client().await?;
    if wipe {
        client
            .batch_execute(
                "TRUNCATE comments, comments_snapshots, comments_ratings, comments_courses, comments_users",
            )
            .await?;
    }
    let bar = progress_bar(total_rows(&gen), progress);
    let mut user = 1;
    while user <= gen.args.users {
        let last = (user + USERS_PER_CHUNK - 1).min(gen.args.users);
        let ids: Vec<i64> = (user..=last).collect();
        let names: Vec<String> = ids.iter().map(|u| display_name(*u)).collect();
        client
            .execute(
                "INSERT INTO comments_users (id, display_name) SELECT * FROM unnest($1::BIGINT[], $2::TEXT[])",
                &[&ids, &names],
            )
            .await?;
        bar.inc(ids.len() as u64);
        user = last + 1;
    }
    let pop = gen.pop;
    let chunks = spawn_generator(gen);
    // The blocking receiver runs on a blocking thread, handing chunks over.
    let (tx, rx) = tokio::sync::mpsc::channel::<Chunk>(PG_LOADERS);
    tokio::task::spawn_blocking(move || {
        for chunk in chunks {
            if tx.blocking_send(chunk).is_err() {
                return;
            }
        }
    });
    // Several connections insert chunks at once: one PostgreSQL backend
    // inserts about 100,000 rows/s on one core, so the load was bound by
    // one backend (40-63 s for 3,000,000 rows). A chunk is one transaction
    // holding its courses with their comments, snapshots and ratings, so
    // the chunks need no order among themselves.
    let rx = std::sync::Arc::new(tokio::sync::Mutex::new(rx));
    let mut loaders = Vec::with_capacity(PG_LOADERS);
    for _ in 0..PG_LOADERS {
        let (rx, bar, mut client) = (rx.clone(), bar.clone(), store.client().await?);
        loaders.push(tokio::spawn(async move {
            let mut snapshots = 0i64;
            loop {
                let Some(chunk) = rx.lock().await.recv().await else {
                    return Ok::<i64, anyhow::Error>(snapshots);
                };
                let t = client.transaction().await?;
                pg_insert_chunk(&t, &chunk, &pop).await?;
                t.commit().await?;
                snapshots += chunk.snapshots.len() as i64;
                bar.inc((chunk.rows.len() as i64 + chunk.last_course - chunk.first_course + 1) as u64);
            }
        }));
    }
    let mut snapshots = 0i64;
    for loader in loaders {
        snapshots += loader.await??;
    }
    bar.finish();
    client
        .batch_execute(
            "SELECT setval('comments_id_seq', (SELECT COALESCE(MAX(id), 0) + 1 FROM comments), false);
             ANALYZE comments_users; ANALYZE comments_courses; ANALYZE comments;
             ANALYZE comments_snapshots; ANALYZE comments_ratings;",
        )
        .await?;
    Ok(snapshots)
}

async fn pg_insert_chunk(
    t: &tokio_postgres::Transaction<'_>,
    chunk: &Chunk,
    pop: &Population,
) -> anyhow::Result<()> {
    let kind = CommentType::Course.as_str();
    let ids: Vec<i64> = (chunk.first_course..=chunk.last_course).collect();
    let providers: Vec<i64> = ids.iter().map(|c| pop.provider_of(*c)).collect();
    let titles: Vec<String> = ids.iter().map(|c| course_title(*c)).collect();
    t.execute(
        "INSERT INTO comments_courses (id, provider_id, title)
         SELECT * FROM unnest($1::BIGINT[], $2::BIGINT[], $3::TEXT[])",
        &[&ids, &providers, &titles],
    )
    .await?;
    let rows = &chunk.rows;
    let col = |f: fn(&Row) -> i64| rows.iter().map(f).collect::<Vec<i64>>();
    let (id, course, user, created) = (
        col(|r| r.id),
        col(|r| r.course_id),
        col(|r| r.user_id),
        col(|r| r.created_ms),
    );
    let types: Vec<&str> = rows.iter().map(|r| r.comment_type).collect();
    let parents: Vec<Option<i64>> = rows.iter().map(|r| r.parent_id).collect();
    let ratings: Vec<Option<i32>> = rows.iter().map(|r| r.rating).collect();
    let titles: Vec<&str> = rows.iter().map(|r| r.title.as_str()).collect();
    let remarks: Vec<&str> = rows.iter().map(|r| r.remarks.as_str()).collect();
    t.execute(
        "INSERT INTO comments (id, course_id, user_id, comment_type, parent_id, rating, title, remarks, created_ms)
         SELECT * FROM unnest($1::BIGINT[], $2::BIGINT[], $3::BIGINT[], $4::TEXT[], $5::BIGINT[], $6::INT[],
                              $7::TEXT[], $8::TEXT[], $9::BIGINT[])",
        &[&id, &course, &user, &types, &parents, &ratings, &titles, &remarks, &created],
    )
    .await?;
    let snaps = &chunk.snapshots;
    let s_course: Vec<i64> = snaps.iter().map(|s| s.course_id).collect();
    let s_user: Vec<i64> = snaps.iter().map(|s| s.user_id).collect();
    let s_first: Vec<i64> = snaps.iter().map(|s| s.first_comment_id).collect();
    let s_last: Vec<i64> = snaps.iter().map(|s| rows[s.last].id).collect();
    let s_title: Vec<&str> = snaps.iter().map(|s| rows[s.last].title.as_str()).collect();
    let s_rating: Vec<i32> = snaps
        .iter()
        .map(|s| rows[s.last].rating.unwrap_or(0))
        .collect();
    let s_remarks: Vec<&str> = snaps
        .iter()
        .map(|s| rows[s.last].remarks.as_str())
        .collect();
    let s_time: Vec<i64> = snaps.iter().map(|s| rows[s.last].created_ms).collect();
    let s_name: Vec<String> = snaps.iter().map(|s| display_name(s.user_id)).collect();
    let s_count: Vec<i32> = snaps.iter().map(|s| s.comment_count as i32).collect();
    t.execute(
        "INSERT INTO comments_snapshots (course_id, comment_type, user_id, first_comment_id, last_comment_id,
            last_title, last_rating, last_remarks, last_update_ms, display_name, comment_count)
         SELECT c, $2::TEXT, u, f, l, ti, ra, re, tm, dn, n FROM unnest($1::BIGINT[], $3::BIGINT[], $4::BIGINT[],
            $5::BIGINT[], $6::TEXT[], $7::INT[], $8::TEXT[], $9::BIGINT[], $10::TEXT[], $11::INT[])
            AS x(c, u, f, l, ti, ra, re, tm, dn, n)",
        &[&s_course, &kind, &s_user, &s_first, &s_last, &s_title, &s_rating, &s_remarks, &s_time, &s_name, &s_count],
    )
    .await?;
    let r_course: Vec<i64> = chunk.ratings.iter().map(|r| r.0).collect();
    let r_col = |i: usize| chunk.ratings.iter().map(|r| r.1[i]).collect::<Vec<i64>>();
    let (c0, c1, c2, c3, c4, c5, c6) = (
        r_col(0),
        r_col(1),
        r_col(2),
        r_col(3),
        r_col(4),
        r_col(5),
        r_col(6),
    );
    t.execute(
        "INSERT INTO comments_ratings (course_id, comment_type, count, sum, stars1, stars2, stars3, stars4,
            stars5, version)
         SELECT c, $2::TEXT, n, s, s1, s2, s3, s4, s5, 1 FROM unnest($1::BIGINT[], $3::BIGINT[], $4::BIGINT[],
            $5::BIGINT[], $6::BIGINT[], $7::BIGINT[], $8::BIGINT[], $9::BIGINT[]) AS x(c, n, s, s1, s2, s3, s4, s5)",
        &[&r_course, &kind, &c0, &c1, &c2, &c3, &c4, &c5, &c6],
    )
    .await?;
    Ok(())
}
