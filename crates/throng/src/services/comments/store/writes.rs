//! Writes: a comment and a provider's reply (created or edited), each in one
//! transaction with its snapshot and rating upserts (or the version bump)
//! and its event.

use std::sync::LazyLock;

use rusqlite::{params, Connection, OptionalExtension};

use super::super::model::{
    self, CommentEdit, CommentType, Deleter, NewComment, NewReply, EVENT_COMMENT_DELETED,
    EVENT_COMMENT_EDITED, EVENT_COMMENT_POSTED, EVENT_REPLY_DELETED, EVENT_REPLY_EDITED,
    EVENT_REPLY_POSTED,
};
use super::{CommentOut, DeleteOutcome, EditOutcome, PostOutcome, ReplyOutcome};
use crate::store::{eventlog, NewEvent, Store, StoreError};

fn posted_event(c: &CommentOut) -> NewEvent {
    NewEvent::json(
        model::stream_of(c.course_id),
        EVENT_COMMENT_POSTED,
        &serde_json::json!({
            "commentId": c.comment_id, "courseId": c.course_id, "userId": c.user_id,
            "commentType": c.comment_type, "rating": c.rating, "createdDate": c.created_date,
        }),
    )
}

fn reply_event(r: &CommentOut, edited: bool) -> NewEvent {
    NewEvent::json(
        model::stream_of(r.course_id),
        if edited {
            EVENT_REPLY_EDITED
        } else {
            EVENT_REPLY_POSTED
        },
        &serde_json::json!({
            "commentId": r.parent_id, "replyId": r.comment_id, "courseId": r.course_id,
            "providerId": r.user_id, "displayName": r.display_name,
            "at": r.edited_date.as_deref().unwrap_or(&r.created_date),
        }),
    )
}

/// What a change of one user's last rating on a course (`None`: no rating)
/// does to the course's aggregates. A course counts each user once, with
/// their last rating (the write-up's `LastRating`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Delta {
    count: i64,
    sum: i64,
    stars: [i64; 5],
}

fn delta(old: Option<i32>, new: Option<i32>) -> Delta {
    let mut d = Delta::default();
    if let Some(o) = old.filter(|r| (1..=5).contains(r)) {
        d.count -= 1;
        d.sum -= o as i64;
        d.stars[(o - 1) as usize] -= 1;
    }
    if let Some(n) = new.filter(|r| (1..=5).contains(r)) {
        d.count += 1;
        d.sum += n as i64;
        d.stars[(n - 1) as usize] += 1;
    }
    d
}

/// A user's last rating before a comment: (rating, time, comment id).
type LastSeen = (i32, i64, i64);

/// The user's last rating after a new comment stamped `(created_ms, id)`:
/// the new one unless the user already has a newer comment.
fn last_after_post(old: Option<LastSeen>, created_ms: i64, id: i64, rating: i32) -> i32 {
    match old {
        Some((r, ms, last_id)) if (ms, last_id) > (created_ms, id) => r,
        _ => rating,
    }
}

fn sqlite_apply_delta(
    c: &Connection,
    course_id: i64,
    kind: &str,
    d: Delta,
) -> Result<(), StoreError> {
    c.prepare_cached(SQLITE_RATING_UPSERT)?.execute(params![
        course_id, kind, d.count, d.sum, d.stars[0], d.stars[1], d.stars[2], d.stars[3], d.stars[4]
    ])?;
    Ok(())
}

async fn pg_apply_delta(
    t: &deadpool_postgres::Transaction<'_>,
    course_id: i64,
    kind: &str,
    d: Delta,
) -> Result<(), StoreError> {
    let ratings = t.prepare_cached(PG_RATING_UPSERT).await?;
    t.execute(
        &ratings,
        &[
            &course_id,
            &kind,
            &d.count,
            &d.sum,
            &d.stars[0],
            &d.stars[1],
            &d.stars[2],
            &d.stars[3],
            &d.stars[4],
        ],
    )
    .await?;
    Ok(())
}

/// The snapshot upsert, for both dialects (`p` writes parameter `i`).
/// "Last" moves forward only in the thread's own order (created time, then
/// id): a comment stamped earlier can commit later (it waited in the writer's
/// queue), and must not replace a newer one as the user's last comment. The
/// thread's comment count grows with every comment, in or out of order (every
/// SET expression reads the row as it was before this update).
fn snapshot_upsert_sql(p: fn(usize) -> String) -> String {
    let newer = "(excluded.last_update_ms, excluded.last_comment_id) \
                 > (comments_snapshots.last_update_ms, comments_snapshots.last_comment_id)";
    let last: Vec<String> = [
        "last_comment_id",
        "last_title",
        "last_rating",
        "last_remarks",
        "last_update_ms",
    ]
    .iter()
    .map(|c| format!("{c} = CASE WHEN {newer} THEN excluded.{c} ELSE comments_snapshots.{c} END"))
    .collect();
    // The first comment is also the last until another one arrives.
    let values: Vec<String> = [1, 2, 3, 4, 4, 5, 6, 7, 8, 9].map(p).into();
    format!(
        "INSERT INTO comments_snapshots (course_id, comment_type, user_id, first_comment_id,
            last_comment_id, last_title, last_rating, last_remarks, last_update_ms, display_name,
            comment_count)
         VALUES ({}, 1)
         ON CONFLICT (course_id, comment_type, user_id) DO UPDATE SET
            comment_count = comments_snapshots.comment_count + 1,
            {}",
        values.join(", "),
        last.join(",\n            ")
    )
}

static SQLITE_SNAPSHOT_UPSERT: LazyLock<String> =
    LazyLock::new(|| snapshot_upsert_sql(|i| format!("?{i}")));
/// PostgreSQL: the snapshot upsert with the user's last rating before it
/// and after it, in one statement. A batch's commands run pipelined in one
/// transaction (`store/postgres.rs`), so a read and a write of the same
/// snapshot in two statements could let another command of the batch change
/// it in between; one statement cannot be split so. Other writers'
/// transactions cannot change the course's snapshots meanwhile: every write
/// that changes them first locks the course's aggregates row
/// (`PG_VERSION_BUMP`) and holds it to its commit, so this statement, which
/// starts after that lock, reads what they committed.
/// Answers (old last rating, new last rating).
static PG_SNAPSHOT_UPSERT_DELTA: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH old AS (SELECT last_rating FROM comments_snapshots
            WHERE course_id = $1 AND comment_type = $2 AND user_id = $3),
         up AS ({} RETURNING last_rating)
         SELECT (SELECT last_rating FROM old), up.last_rating FROM up",
        snapshot_upsert_sql(|i| format!("${i}"))
    )
});

/// Rebuilds a user's snapshot on a course from their comments (after an
/// edit or a delete), answering its new last rating; no row when the user
/// has no comment left there (then the caller deletes the snapshot).
/// Parameters: course, type, user.
fn snapshot_rebuild_sql(p: fn(usize) -> String, pg: bool) -> String {
    // PostgreSQL also answers the last rating before, read in the same
    // statement (see `PG_SNAPSHOT_UPSERT_DELTA`).
    let (with, returning) = if pg {
        (
            format!(
                "WITH old AS (SELECT last_rating FROM comments_snapshots
                    WHERE course_id = {} AND comment_type = {} AND user_id = {}) ",
                p(1),
                p(2),
                p(3)
            ),
            "RETURNING last_rating, (SELECT last_rating FROM old)",
        )
    } else {
        (String::new(), "RETURNING last_rating")
    };
    let same =
        "f.course_id = c.course_id AND f.user_id = c.user_id AND f.comment_type = c.comment_type";
    format!(
        "{with}UPDATE comments_snapshots SET first_comment_id = t.first_id, last_comment_id = t.id,
            last_title = t.title, last_rating = t.rating, last_remarks = t.remarks,
            last_update_ms = t.created_ms, comment_count = t.n
         FROM (SELECT c.id, c.title, c.rating, c.remarks, c.created_ms,
                 (SELECT f.id FROM comments f WHERE {same} ORDER BY f.created_ms, f.id LIMIT 1) AS first_id,
                 (SELECT count(*) FROM comments f WHERE {same}) AS n
               FROM comments c WHERE c.course_id = {c} AND c.user_id = {u} AND c.comment_type = {k}
               ORDER BY c.created_ms DESC, c.id DESC LIMIT 1) AS t
         WHERE comments_snapshots.course_id = {c} AND comments_snapshots.comment_type = {k}
           AND comments_snapshots.user_id = {u}
         {returning}",
        c = p(1),
        k = p(2),
        u = p(3),
    )
}

static SQLITE_SNAPSHOT_REBUILD: LazyLock<String> =
    LazyLock::new(|| snapshot_rebuild_sql(|i| format!("?{i}"), false));
static PG_SNAPSHOT_REBUILD: LazyLock<String> =
    LazyLock::new(|| snapshot_rebuild_sql(|i| format!("${i}"), true));
const SQLITE_SNAPSHOT_DELETE: &str =
    "DELETE FROM comments_snapshots WHERE course_id = ?1 AND comment_type = ?2 AND user_id = ?3";
const PG_SNAPSHOT_DELETE: &str =
    "DELETE FROM comments_snapshots WHERE course_id = $1 AND comment_type = $2 AND user_id = $3
     RETURNING last_rating";
const SQLITE_SNAPSHOT_LAST: &str =
    "SELECT last_rating, last_update_ms, last_comment_id FROM comments_snapshots
     WHERE course_id = ?1 AND comment_type = ?2 AND user_id = ?3";

const SQLITE_RATING_UPSERT: &str =
    "INSERT INTO comments_ratings (course_id, comment_type, count, sum,
        stars1, stars2, stars3, stars4, stars5, version)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 1)
     ON CONFLICT (course_id, comment_type) DO UPDATE SET
        count = count + excluded.count, sum = sum + excluded.sum,
        stars1 = stars1 + excluded.stars1, stars2 = stars2 + excluded.stars2,
        stars3 = stars3 + excluded.stars3, stars4 = stars4 + excluded.stars4,
        stars5 = stars5 + excluded.stars5, version = version + 1";

const PG_RATING_UPSERT: &str = "INSERT INTO comments_ratings (course_id, comment_type, count, sum,
        stars1, stars2, stars3, stars4, stars5, version)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 1)
     ON CONFLICT (course_id, comment_type) DO UPDATE SET
        count = comments_ratings.count + excluded.count, sum = comments_ratings.sum + excluded.sum,
        stars1 = comments_ratings.stars1 + excluded.stars1, stars2 = comments_ratings.stars2 + excluded.stars2,
        stars3 = comments_ratings.stars3 + excluded.stars3, stars4 = comments_ratings.stars4 + excluded.stars4,
        stars5 = comments_ratings.stars5 + excluded.stars5, version = comments_ratings.version + 1";

/// Bumps the version of a course and type without changing its ratings.
const SQLITE_VERSION_BUMP: &str =
    "INSERT INTO comments_ratings (course_id, comment_type, count, sum,
        stars1, stars2, stars3, stars4, stars5, version) VALUES (?1, ?2, 0, 0, 0, 0, 0, 0, 0, 1)
     ON CONFLICT (course_id, comment_type) DO UPDATE SET version = version + 1";
const PG_VERSION_BUMP: &str = "INSERT INTO comments_ratings (course_id, comment_type, count, sum,
        stars1, stars2, stars3, stars4, stars5, version) VALUES ($1, $2, 0, 0, 0, 0, 0, 0, 0, 1)
     ON CONFLICT (course_id, comment_type) DO UPDATE SET version = comments_ratings.version + 1";

/// Posts a comment: the comment, its snapshot, the aggregates and the event,
/// in one transaction.
/// What a write on a course tells every node's page cache (PostgreSQL; see
/// `store/invalidate.rs` and `cache.rs`).
pub fn invalidation_key(course_id: i64) -> String {
    format!("{INVALIDATION_PREFIX}{course_id}")
}

/// The prefix of the comments' invalidation keys.
pub const INVALIDATION_PREFIX: &str = "comments:course:";

const POST_LOOKUP_PG: &str = "SELECT (SELECT 1 FROM comments_courses WHERE id = $1),
        (SELECT display_name FROM comments_users WHERE id = $2)";

const POST_INSERT_PG: &str =
    "INSERT INTO comments (course_id, user_id, comment_type, parent_id, rating, title,
    remarks, created_ms) VALUES ($1, $2, $3, NULL, $4, $5, $6, $7) RETURNING id";

const REPLY_INSERT_PG: &str =
    "INSERT INTO comments (course_id, user_id, comment_type, parent_id, rating, title,
    remarks, created_ms) VALUES ($1, $2, $3, $4, NULL, $5, $6, $7)
 ON CONFLICT (parent_id) WHERE parent_id IS NOT NULL DO NOTHING RETURNING id";

const REPLY_EDIT_PG: &str = "UPDATE comments SET title = $2, remarks = $3, edited_ms = $4
 WHERE parent_id = $1 RETURNING id, created_ms";

pub async fn post_comment(store: &Store, new: NewComment) -> Result<PostOutcome, StoreError> {
    match store {
        Store::Sqlite(s) => s.write(move |c| sqlite_post(c, &new)).await,
        Store::Postgres(p) => {
            p.write(move |tx| {
                let new = new.clone();
                Box::pin(async move {
                    let t = &tx.tx;
                    let kind = new.comment_type.as_str();
                    let rating = new.rating.get();
                    // Every statement prepared once per writer connection:
                    // planning them on every post cost as much as running them.
                    let lookup = t.prepare_cached(POST_LOOKUP_PG).await?;
                    let row = t
                        .query_opt(&lookup, &[&new.course_id, &new.user_id])
                        .await?;
                    let (course, name): (Option<i32>, Option<String>) =
                        row.map(|r| (r.get(0), r.get(1))).unwrap_or((None, None));
                    if course.is_none() {
                        return Ok(PostOutcome::CourseNotFound);
                    }
                    let Some(display_name) = name else {
                        return Ok(PostOutcome::UnknownUser);
                    };
                    // The course's aggregates row, locked to the commit: see
                    // `PG_SNAPSHOT_UPSERT_DELTA`.
                    let bump = t.prepare_cached(PG_VERSION_BUMP).await?;
                    t.execute(&bump, &[&new.course_id, &kind]).await?;
                    let insert = t.prepare_cached(POST_INSERT_PG).await?;
                    let id: i64 = t
                        .query_one(
                            &insert,
                            &[
                                &new.course_id,
                                &new.user_id,
                                &kind,
                                &rating,
                                &new.title,
                                &new.remarks,
                                &new.created_ms,
                            ],
                        )
                        .await?
                        .get(0);
                    let snapshot = t.prepare_cached(PG_SNAPSHOT_UPSERT_DELTA.as_str()).await?;
                    let row = t
                        .query_one(
                            &snapshot,
                            &[
                                &new.course_id,
                                &kind,
                                &new.user_id,
                                &id,
                                &new.title,
                                &rating,
                                &new.remarks,
                                &new.created_ms,
                                &display_name,
                            ],
                        )
                        .await?;
                    let (old, last): (Option<i32>, i32) = (row.get(0), row.get(1));
                    pg_apply_delta(t, new.course_id, kind, delta(old, Some(last))).await?;
                    let out = comment_out(&new, id, display_name);
                    tx.invalidate(invalidation_key(new.course_id));
                    tx.append(posted_event(&out));
                    Ok(PostOutcome::Posted(out))
                })
            })
            .await
        }
    }
}

fn comment_out(new: &NewComment, id: i64, display_name: String) -> CommentOut {
    CommentOut {
        comment_id: id,
        course_id: new.course_id,
        user_id: new.user_id,
        display_name,
        comment_type: new.comment_type.as_str().to_string(),
        parent_id: None,
        rating: Some(new.rating.get()),
        title: new.title.clone(),
        remarks: new.remarks.clone(),
        created_date: model::timestamp(new.created_ms),
        edited_date: None,
    }
}

fn sqlite_post(c: &Connection, new: &NewComment) -> Result<PostOutcome, StoreError> {
    let kind = new.comment_type.as_str();
    // The course, the user's name and their last rating on the course.
    let (course, name, old): (Option<i64>, Option<String>, Option<LastSeen>) = c
        .prepare_cached(
            "SELECT (SELECT 1 FROM comments_courses WHERE id = ?1),
                    (SELECT display_name FROM comments_users WHERE id = ?2),
                    s.last_rating, s.last_update_ms, s.last_comment_id
             FROM (SELECT 1) LEFT JOIN comments_snapshots s
               ON s.course_id = ?1 AND s.comment_type = ?3 AND s.user_id = ?2",
        )?
        .query_row(params![new.course_id, new.user_id, kind], |r| {
            let rating: Option<i32> = r.get(2)?;
            let old = match rating {
                Some(x) => Some((x, r.get(3)?, r.get(4)?)),
                None => None,
            };
            Ok((r.get(0)?, r.get(1)?, old))
        })?;
    if course.is_none() {
        return Ok(PostOutcome::CourseNotFound);
    }
    let Some(display_name) = name else {
        return Ok(PostOutcome::UnknownUser);
    };
    let rating = new.rating.get();
    c.prepare_cached(
        "INSERT INTO comments (course_id, user_id, comment_type, parent_id, rating, title, remarks, created_ms)
         VALUES (?1, ?2, ?3, NULL, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![new.course_id, new.user_id, kind, rating, new.title, new.remarks, new.created_ms])?;
    let id = c.last_insert_rowid();
    c.prepare_cached(&SQLITE_SNAPSHOT_UPSERT)?.execute(params![
        new.course_id,
        kind,
        new.user_id,
        id,
        new.title,
        rating,
        new.remarks,
        new.created_ms,
        display_name
    ])?;
    let last = last_after_post(old, new.created_ms, id, rating);
    sqlite_apply_delta(c, new.course_id, kind, delta(old.map(|o| o.0), Some(last)))?;
    let out = comment_out(new, id, display_name);
    eventlog::sqlite_append(c, &posted_event(&out))?;
    Ok(PostOutcome::Posted(out))
}

/// What the reply checks need to know about the target comment.
struct Target {
    course_id: i64,
    comment_type: String,
    parent_id: Option<i64>,
    provider_id: Option<i64>,
    provider_name: Option<String>,
}

fn check_target(
    target: Option<Target>,
    provider_id: i64,
) -> Result<(Target, CommentType), Box<ReplyOutcome>> {
    let Some(t) = target else {
        return Err(Box::new(ReplyOutcome::CommentNotFound));
    };
    if t.parent_id.is_some() {
        return Err(Box::new(ReplyOutcome::IsReply));
    }
    let Some((kind, false)) = CommentType::of_stored(&t.comment_type) else {
        return Err(Box::new(ReplyOutcome::IsReply));
    };
    if t.provider_id != Some(provider_id) {
        return Err(Box::new(ReplyOutcome::NotTheProvider));
    }
    Ok((t, kind))
}

const TARGET_SQLITE: &str =
    "SELECT c.course_id, c.comment_type, c.parent_id, co.provider_id, u.display_name
     FROM comments c LEFT JOIN comments_courses co ON co.id = c.course_id
     LEFT JOIN comments_users u ON u.id = co.provider_id WHERE c.id = ?1";
const TARGET_PG: &str =
    "SELECT c.course_id, c.comment_type, c.parent_id, co.provider_id, u.display_name
     FROM comments c LEFT JOIN comments_courses co ON co.id = c.course_id
     LEFT JOIN comments_users u ON u.id = co.provider_id WHERE c.id = $1";

fn reply_out(
    r: &NewReply,
    t: &Target,
    kind: CommentType,
    id: i64,
    created_ms: i64,
    edited: bool,
) -> CommentOut {
    CommentOut {
        comment_id: id,
        course_id: t.course_id,
        user_id: r.provider_id,
        display_name: t.provider_name.clone().unwrap_or_default(),
        comment_type: kind.reply_type().to_string(),
        parent_id: Some(r.comment_id),
        rating: None,
        title: r.title.clone(),
        remarks: r.remarks.clone(),
        created_date: model::timestamp(created_ms),
        edited_date: edited.then(|| model::timestamp(r.at_ms)),
    }
}

/// Creates the provider's reply to a comment, or edits it when it exists.
pub async fn put_reply(store: &Store, reply: NewReply) -> Result<ReplyOutcome, StoreError> {
    match store {
        Store::Sqlite(s) => s.write(move |c| sqlite_put_reply(c, &reply)).await,
        Store::Postgres(p) => {
            p.write(move |tx| {
                let r = reply.clone();
                Box::pin(async move {
                    let t = &tx.tx;
                    // Prepared once per writer connection, as a post's.
                    let target_stmt = t.prepare_cached(TARGET_PG).await?;
                    let target = t
                        .query_opt(&target_stmt, &[&r.comment_id])
                        .await?
                        .map(|row| Target {
                            course_id: row.get(0),
                            comment_type: row.get(1),
                            parent_id: row.get(2),
                            provider_id: row.get(3),
                            provider_name: row.get(4),
                        });
                    let (target, kind) = match check_target(target, r.provider_id) {
                        Ok(v) => v,
                        Err(outcome) => return Ok(*outcome),
                    };
                    let insert = t.prepare_cached(REPLY_INSERT_PG).await?;
                    let inserted = t
                        .query_opt(
                            &insert,
                            &[
                                &target.course_id,
                                &r.provider_id,
                                &kind.reply_type(),
                                &r.comment_id,
                                &r.title,
                                &r.remarks,
                                &r.at_ms,
                            ],
                        )
                        .await?;
                    let out = match inserted {
                        Some(row) => reply_out(&r, &target, kind, row.get(0), r.at_ms, false),
                        None => {
                            let edit = t.prepare_cached(REPLY_EDIT_PG).await?;
                            let row = t
                                .query_one(&edit, &[&r.comment_id, &r.title, &r.remarks, &r.at_ms])
                                .await?;
                            reply_out(&r, &target, kind, row.get(0), row.get(1), true)
                        }
                    };
                    let bump = t.prepare_cached(PG_VERSION_BUMP).await?;
                    t.execute(&bump, &[&target.course_id, &kind.as_str()])
                        .await?;
                    tx.invalidate(invalidation_key(target.course_id));
                    let edited = out.edited_date.is_some();
                    tx.append(reply_event(&out, edited));
                    Ok(if edited {
                        ReplyOutcome::Edited(out)
                    } else {
                        ReplyOutcome::Created(out)
                    })
                })
            })
            .await
        }
    }
}

fn sqlite_put_reply(c: &Connection, r: &NewReply) -> Result<ReplyOutcome, StoreError> {
    let target = c
        .prepare_cached(TARGET_SQLITE)?
        .query_row([r.comment_id], |row| {
            Ok(Target {
                course_id: row.get(0)?,
                comment_type: row.get(1)?,
                parent_id: row.get(2)?,
                provider_id: row.get(3)?,
                provider_name: row.get(4)?,
            })
        })
        .optional()?;
    let (target, kind) = match check_target(target, r.provider_id) {
        Ok(v) => v,
        Err(outcome) => return Ok(*outcome),
    };
    // The single writer makes this check-then-write atomic.
    let existing: Option<(i64, i64)> = c
        .prepare_cached("SELECT id, created_ms FROM comments WHERE parent_id = ?1")?
        .query_row([r.comment_id], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    let out = match existing {
        Some((id, created_ms)) => {
            c.prepare_cached(
                "UPDATE comments SET title = ?2, remarks = ?3, edited_ms = ?4 WHERE id = ?1",
            )?
            .execute(params![id, r.title, r.remarks, r.at_ms])?;
            reply_out(r, &target, kind, id, created_ms, true)
        }
        None => {
            c.prepare_cached(
                "INSERT INTO comments (course_id, user_id, comment_type, parent_id, rating, title, remarks,
                    created_ms) VALUES (?1, ?2, ?3, ?4, NULL, ?5, ?6, ?7)",
            )?
            .execute(params![
                target.course_id,
                r.provider_id,
                kind.reply_type(),
                r.comment_id,
                r.title,
                r.remarks,
                r.at_ms
            ])?;
            reply_out(r, &target, kind, c.last_insert_rowid(), r.at_ms, false)
        }
    };
    c.prepare_cached(SQLITE_VERSION_BUMP)?
        .execute(params![target.course_id, kind.as_str()])?;
    let edited = out.edited_date.is_some();
    eventlog::sqlite_append(c, &reply_event(&out, edited))?;
    Ok(if edited {
        ReplyOutcome::Edited(out)
    } else {
        ReplyOutcome::Created(out)
    })
}

/// A comment as an edit or a delete finds it.
#[derive(Clone, Debug)]
struct Found {
    course_id: i64,
    user_id: i64,
    comment_type: String,
    parent_id: Option<i64>,
    rating: Option<i32>,
    title: String,
    remarks: String,
    created_ms: i64,
    display_name: Option<String>,
}

const FOUND_COLUMNS: &str =
    "c.course_id, c.user_id, c.comment_type, c.parent_id, c.rating, c.title,
     c.remarks, c.created_ms, u.display_name
     FROM comments c LEFT JOIN comments_users u ON u.id = c.user_id";

static FIND_SQLITE: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {FOUND_COLUMNS} WHERE c.id = ?1"));
static FIND_PG: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {FOUND_COLUMNS} WHERE c.id = $1"));

fn found_of_sqlite(r: &rusqlite::Row<'_>) -> rusqlite::Result<Found> {
    Ok(Found {
        course_id: r.get(0)?,
        user_id: r.get(1)?,
        comment_type: r.get(2)?,
        parent_id: r.get(3)?,
        rating: r.get(4)?,
        title: r.get(5)?,
        remarks: r.get(6)?,
        created_ms: r.get(7)?,
        display_name: r.get(8)?,
    })
}

fn found_of_pg(r: &tokio_postgres::Row) -> Found {
    Found {
        course_id: r.get(0),
        user_id: r.get(1),
        comment_type: r.get(2),
        parent_id: r.get(3),
        rating: r.get(4),
        title: r.get(5),
        remarks: r.get(6),
        created_ms: r.get(7),
        display_name: r.get(8),
    }
}

/// The review an edit applies to, checked: it exists, is a review (not a
/// reply) and is the caller's.
fn check_edit(
    found: Option<Found>,
    e: &CommentEdit,
) -> Result<(Found, CommentType), Box<EditOutcome>> {
    let Some(f) = found else {
        return Err(Box::new(EditOutcome::CommentNotFound));
    };
    let Some((kind, false)) = CommentType::of_stored(&f.comment_type) else {
        return Err(Box::new(EditOutcome::IsReply));
    };
    if f.parent_id.is_some() {
        return Err(Box::new(EditOutcome::IsReply));
    }
    if f.user_id != e.user_id {
        return Err(Box::new(EditOutcome::NotTheAuthor));
    }
    Ok((f, kind))
}

/// The comment as it reads after the edit.
fn edited_out(f: &Found, e: &CommentEdit, kind: CommentType) -> CommentOut {
    CommentOut {
        comment_id: e.comment_id,
        course_id: f.course_id,
        user_id: f.user_id,
        display_name: f.display_name.clone().unwrap_or_default(),
        comment_type: kind.as_str().to_string(),
        parent_id: None,
        rating: Some(e.rating.map(|r| r.get()).or(f.rating).unwrap_or(0)),
        title: e.title.clone().unwrap_or_else(|| f.title.clone()),
        remarks: e.remarks.clone().unwrap_or_else(|| f.remarks.clone()),
        created_date: model::timestamp(f.created_ms),
        edited_date: Some(model::timestamp(e.at_ms)),
    }
}

fn edited_event(c: &CommentOut) -> NewEvent {
    NewEvent::json(
        model::stream_of(c.course_id),
        EVENT_COMMENT_EDITED,
        &serde_json::json!({
            "commentId": c.comment_id, "courseId": c.course_id, "userId": c.user_id,
            "commentType": c.comment_type, "rating": c.rating, "at": c.edited_date,
        }),
    )
}

/// Edits the caller's own review (rating, title, remarks): the comment, the
/// user's snapshot, the course's aggregates (the user's last rating may
/// change) and the event, in one transaction.
pub async fn edit_comment(store: &Store, e: CommentEdit) -> Result<EditOutcome, StoreError> {
    match store {
        Store::Sqlite(s) => s.write(move |c| sqlite_edit(c, &e)).await,
        Store::Postgres(p) => {
            p.write(move |tx| {
                let e = e.clone();
                Box::pin(async move {
                    let t = &tx.tx;
                    let find = t.prepare_cached(FIND_PG.as_str()).await?;
                    let found = t.query_opt(&find, &[&e.comment_id]).await?.map(|r| found_of_pg(&r));
                    let (f, kind) = match check_edit(found, &e) {
                        Ok(v) => v,
                        Err(outcome) => return Ok(*outcome),
                    };
                    let k = kind.as_str();
                    // The course's aggregates row, locked to the commit: see
                    // `PG_SNAPSHOT_UPSERT_DELTA`.
                    let bump = t.prepare_cached(PG_VERSION_BUMP).await?;
                    t.execute(&bump, &[&f.course_id, &k]).await?;
                    let rating = e.rating.map(|r| r.get());
                    let update = t
                        .prepare_cached(
                            "UPDATE comments SET rating = COALESCE($2, rating), title = COALESCE($3, title),
                                remarks = COALESCE($4, remarks), edited_ms = $5 WHERE id = $1",
                        )
                        .await?;
                    let n = t
                        .execute(&update, &[&e.comment_id, &rating, &e.title, &e.remarks, &e.at_ms])
                        .await?;
                    if n == 0 {
                        // Deleted by another writer since it was found.
                        return Ok(EditOutcome::CommentNotFound);
                    }
                    let (old, new) = pg_rebuild_snapshot(t, f.course_id, k, f.user_id).await?;
                    pg_apply_delta(t, f.course_id, k, delta(old, new)).await?;
                    let out = edited_out(&f, &e, kind);
                    tx.invalidate(invalidation_key(f.course_id));
                    tx.append(edited_event(&out));
                    Ok(EditOutcome::Edited(out))
                })
            })
            .await
        }
    }
}

/// Rebuilds the user's snapshot from their comments; their last rating
/// before and after it, each read by the statement that changes the
/// snapshot (after: `None` when no comment is left and the snapshot is
/// deleted).
async fn pg_rebuild_snapshot(
    t: &deadpool_postgres::Transaction<'_>,
    course_id: i64,
    kind: &str,
    user_id: i64,
) -> Result<(Option<i32>, Option<i32>), StoreError> {
    let rebuild = t.prepare_cached(PG_SNAPSHOT_REBUILD.as_str()).await?;
    let row = t
        .query_opt(&rebuild, &[&course_id, &kind, &user_id])
        .await?;
    match row {
        Some(r) => Ok((r.get(1), Some(r.get(0)))),
        None => {
            let del = t.prepare_cached(PG_SNAPSHOT_DELETE).await?;
            let old = t
                .query_opt(&del, &[&course_id, &kind, &user_id])
                .await?
                .map(|r| r.get(0));
            Ok((old, None))
        }
    }
}

fn sqlite_rebuild_snapshot(
    c: &Connection,
    course_id: i64,
    kind: &str,
    user_id: i64,
) -> Result<Option<i32>, StoreError> {
    let row: Option<i32> = c
        .prepare_cached(&SQLITE_SNAPSHOT_REBUILD)?
        .query_row(params![course_id, kind, user_id], |r| r.get(0))
        .optional()?;
    if row.is_none() {
        c.prepare_cached(SQLITE_SNAPSHOT_DELETE)?
            .execute(params![course_id, kind, user_id])?;
    }
    Ok(row)
}

fn sqlite_last_rating(
    c: &Connection,
    course_id: i64,
    kind: &str,
    user_id: i64,
) -> Result<Option<i32>, StoreError> {
    Ok(c.prepare_cached(SQLITE_SNAPSHOT_LAST)?
        .query_row(params![course_id, kind, user_id], |r| r.get(0))
        .optional()?)
}

fn sqlite_edit(c: &Connection, e: &CommentEdit) -> Result<EditOutcome, StoreError> {
    let found = c
        .prepare_cached(&FIND_SQLITE)?
        .query_row([e.comment_id], found_of_sqlite)
        .optional()?;
    let (f, kind) = match check_edit(found, e) {
        Ok(v) => v,
        Err(outcome) => return Ok(*outcome),
    };
    let k = kind.as_str();
    let old = sqlite_last_rating(c, f.course_id, k, f.user_id)?;
    c.prepare_cached(
        "UPDATE comments SET rating = COALESCE(?2, rating), title = COALESCE(?3, title),
            remarks = COALESCE(?4, remarks), edited_ms = ?5 WHERE id = ?1",
    )?
    .execute(params![
        e.comment_id,
        e.rating.map(|r| r.get()),
        e.title,
        e.remarks,
        e.at_ms
    ])?;
    let new = sqlite_rebuild_snapshot(c, f.course_id, k, f.user_id)?;
    sqlite_apply_delta(c, f.course_id, k, delta(old, new))?;
    let out = edited_out(&f, e, kind);
    eventlog::sqlite_append(c, &edited_event(&out))?;
    Ok(EditOutcome::Edited(out))
}

/// What a delete removes, checked: a review by its author (a user token),
/// or a reply by its provider (a provider token).
fn check_delete(
    found: Option<Found>,
    d: &Deleter,
) -> Result<(Found, CommentType, bool), DeleteOutcome> {
    let Some(f) = found else {
        return Err(DeleteOutcome::CommentNotFound);
    };
    let Some((kind, is_reply)) = CommentType::of_stored(&f.comment_type) else {
        return Err(DeleteOutcome::CommentNotFound);
    };
    let is_reply = is_reply || f.parent_id.is_some();
    if is_reply != d.provider || f.user_id != d.caller_id {
        return Err(DeleteOutcome::NotTheAuthor { is_reply });
    }
    Ok((f, kind, is_reply))
}

fn deleted_event(
    d: &Deleter,
    f: &Found,
    kind: CommentType,
    is_reply: bool,
    replies: u64,
) -> NewEvent {
    let at = model::timestamp(d.at_ms);
    if is_reply {
        NewEvent::json(
            model::stream_of(f.course_id),
            EVENT_REPLY_DELETED,
            &serde_json::json!({
                "commentId": f.parent_id, "replyId": d.comment_id, "courseId": f.course_id,
                "providerId": f.user_id, "at": at,
            }),
        )
    } else {
        NewEvent::json(
            model::stream_of(f.course_id),
            EVENT_COMMENT_DELETED,
            &serde_json::json!({
                "commentId": d.comment_id, "courseId": f.course_id, "userId": f.user_id,
                "commentType": kind.as_str(), "repliesDeleted": replies, "at": at,
            }),
        )
    }
}

/// Deletes the caller's own review (with the provider's reply to it: a reply
/// answers that review alone) or the provider's own reply; the user's
/// snapshot and the course's aggregates follow (the user's rating is their
/// last remaining review's, or none), the event in the same transaction.
pub async fn delete_comment(store: &Store, d: Deleter) -> Result<DeleteOutcome, StoreError> {
    match store {
        Store::Sqlite(s) => s.write(move |c| sqlite_delete(c, &d)).await,
        Store::Postgres(p) => {
            p.write(move |tx| {
                Box::pin(async move {
                    let t = &tx.tx;
                    let find = t.prepare_cached(FIND_PG.as_str()).await?;
                    let found = t
                        .query_opt(&find, &[&d.comment_id])
                        .await?
                        .map(|r| found_of_pg(&r));
                    let (f, kind, is_reply) = match check_delete(found, &d) {
                        Ok(v) => v,
                        Err(outcome) => return Ok(outcome),
                    };
                    let k = kind.as_str();
                    // The course's aggregates row, locked to the commit: see
                    // `PG_SNAPSHOT_UPSERT_DELTA`.
                    let bump = t.prepare_cached(PG_VERSION_BUMP).await?;
                    t.execute(&bump, &[&f.course_id, &k]).await?;
                    if is_reply {
                        let del = t
                            .prepare_cached("DELETE FROM comments WHERE id = $1")
                            .await?;
                        if t.execute(&del, &[&d.comment_id]).await? == 0 {
                            return Ok(DeleteOutcome::CommentNotFound);
                        }
                        tx.invalidate(invalidation_key(f.course_id));
                        tx.append(deleted_event(&d, &f, kind, true, 0));
                        return Ok(DeleteOutcome::Deleted {
                            course_id: f.course_id,
                        });
                    }
                    let del = t
                        .prepare_cached("DELETE FROM comments WHERE id = $1")
                        .await?;
                    if t.execute(&del, &[&d.comment_id]).await? == 0 {
                        return Ok(DeleteOutcome::CommentNotFound);
                    }
                    let del_replies = t
                        .prepare_cached("DELETE FROM comments WHERE parent_id = $1")
                        .await?;
                    let replies = t.execute(&del_replies, &[&d.comment_id]).await?;
                    let (old, new) = pg_rebuild_snapshot(t, f.course_id, k, f.user_id).await?;
                    pg_apply_delta(t, f.course_id, k, delta(old, new)).await?;
                    tx.invalidate(invalidation_key(f.course_id));
                    tx.append(deleted_event(&d, &f, kind, false, replies));
                    Ok(DeleteOutcome::Deleted {
                        course_id: f.course_id,
                    })
                })
            })
            .await
        }
    }
}

fn sqlite_delete(c: &Connection, d: &Deleter) -> Result<DeleteOutcome, StoreError> {
    let found = c
        .prepare_cached(&FIND_SQLITE)?
        .query_row([d.comment_id], found_of_sqlite)
        .optional()?;
    let (f, kind, is_reply) = match check_delete(found, d) {
        Ok(v) => v,
        Err(outcome) => return Ok(outcome),
    };
    let k = kind.as_str();
    let mut del = c.prepare_cached("DELETE FROM comments WHERE id = ?1")?;
    if is_reply {
        del.execute([d.comment_id])?;
        c.prepare_cached(SQLITE_VERSION_BUMP)?
            .execute(params![f.course_id, k])?;
        eventlog::sqlite_append(c, &deleted_event(d, &f, kind, true, 0))?;
        return Ok(DeleteOutcome::Deleted {
            course_id: f.course_id,
        });
    }
    let old = sqlite_last_rating(c, f.course_id, k, f.user_id)?;
    del.execute([d.comment_id])?;
    let replies = c
        .prepare_cached("DELETE FROM comments WHERE parent_id = ?1")?
        .execute([d.comment_id])?;
    let new = sqlite_rebuild_snapshot(c, f.course_id, k, f.user_id)?;
    sqlite_apply_delta(c, f.course_id, k, delta(old, new))?;
    eventlog::sqlite_append(c, &deleted_event(d, &f, kind, false, replies as u64))?;
    Ok(DeleteOutcome::Deleted {
        course_id: f.course_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A comment stamped earlier can commit later: it counts in the thread
    /// but does not become the user's last comment; a newer one does.
    #[test]
    fn snapshot_upsert_counts_every_comment_and_keeps_the_newest_last() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::store::migrate::apply_sqlite(&mut conn, &crate::services::migrations()).unwrap();
        let upsert = |id: i64, title: &str, at_ms: i64| {
            conn.execute(
                &SQLITE_SNAPSHOT_UPSERT,
                params![1, "Course", 5, id, title, 4, "r", at_ms, "N"],
            )
            .unwrap();
            conn.query_row(
                "SELECT comment_count, first_comment_id, last_comment_id, last_title, last_update_ms
                 FROM comments_snapshots WHERE course_id = 1 AND user_id = 5",
                [],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, i64>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, i64>(4)?,
                    ))
                },
            )
            .unwrap()
        };
        assert_eq!(upsert(10, "first", 200), (1, 10, 10, "first".into(), 200));
        assert_eq!(upsert(11, "late", 100), (2, 10, 10, "first".into(), 200));
        assert_eq!(upsert(12, "newest", 300), (3, 10, 12, "newest".into(), 300));
    }

    /// A user's rating moves from old to new: counted once.
    #[test]
    fn a_delta_moves_one_users_rating() {
        let d = delta(None, Some(4));
        assert_eq!((d.count, d.sum, d.stars), (1, 4, [0, 0, 0, 1, 0]));
        let d = delta(Some(2), Some(5));
        assert_eq!((d.count, d.sum, d.stars), (0, 3, [0, -1, 0, 0, 1]));
        let d = delta(Some(3), None);
        assert_eq!((d.count, d.sum, d.stars), (-1, -3, [0, 0, -1, 0, 0]));
        assert_eq!(delta(Some(3), Some(3)), Delta::default());
        // A comment stamped before the user's last one does not replace it.
        assert_eq!(last_after_post(Some((2, 500, 9)), 400, 10, 5), 2);
        assert_eq!(last_after_post(Some((2, 500, 9)), 600, 10, 5), 5);
        assert_eq!(last_after_post(None, 1, 1, 4), 4);
    }

    /// Migration 0030 rebuilds aggregates that counted every comment from
    /// the snapshots' last ratings (each user once).
    #[test]
    fn the_migration_rebuilds_aggregates_per_user() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::store::migrate::apply_sqlite(&mut conn, &crate::services::migrations()).unwrap();
        for (user, last) in [(5, 4), (6, 2)] {
            conn.execute(
                &SQLITE_SNAPSHOT_UPSERT,
                params![1, "Course", user, user, "t", last, "r", 100, "N"],
            )
            .unwrap();
        }
        // As an older store kept it: user 5 posted twice (5 stars, then 4).
        conn.execute(
            "INSERT INTO comments_ratings VALUES (1, 'Course', 3, 11, 0, 1, 0, 1, 1, 7)",
            [],
        )
        .unwrap();
        conn.execute_batch(include_str!(
            "../migrations/sqlite/0030_comments_rating_per_user.sql"
        ))
        .unwrap();
        let row: [i64; 8] = conn
            .query_row(
                "SELECT count, sum, stars1, stars2, stars3, stars4, stars5, version FROM comments_ratings",
                [],
                |r| Ok(std::array::from_fn(|i| r.get(i).unwrap())),
            )
            .unwrap();
        assert_eq!(row, [2, 6, 0, 1, 0, 1, 0, 8]);
    }
}
