//! Writes: a comment and a provider's reply (created or edited), each in one
//! transaction with its snapshot and rating upserts (or the version bump)
//! and its event.

use std::sync::LazyLock;

use rusqlite::{params, Connection, OptionalExtension};

use super::super::model::{
    self, CommentType, NewComment, NewReply, EVENT_COMMENT_POSTED, EVENT_REPLY_EDITED,
    EVENT_REPLY_POSTED,
};
use super::{CommentOut, PostOutcome, ReplyOutcome};
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

fn stars(rating: i32) -> [i64; 5] {
    let mut s = [0i64; 5];
    s[(rating - 1) as usize] = 1;
    s
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
static PG_SNAPSHOT_UPSERT: LazyLock<String> =
    LazyLock::new(|| snapshot_upsert_sql(|i| format!("${i}")));

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
                    let snapshot = t.prepare_cached(PG_SNAPSHOT_UPSERT.as_str()).await?;
                    t.execute(
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
                    let st = stars(rating);
                    let ratings = t.prepare_cached(PG_RATING_UPSERT).await?;
                    t.execute(
                        &ratings,
                        &[
                            &new.course_id,
                            &kind,
                            &1i64,
                            &(rating as i64),
                            &st[0],
                            &st[1],
                            &st[2],
                            &st[3],
                            &st[4],
                        ],
                    )
                    .await?;
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
    let (course, name): (Option<i64>, Option<String>) = c
        .prepare_cached(
            "SELECT (SELECT 1 FROM comments_courses WHERE id = ?1),
                    (SELECT display_name FROM comments_users WHERE id = ?2)",
        )?
        .query_row(params![new.course_id, new.user_id], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
    if course.is_none() {
        return Ok(PostOutcome::CourseNotFound);
    }
    let Some(display_name) = name else {
        return Ok(PostOutcome::UnknownUser);
    };
    let kind = new.comment_type.as_str();
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
    let st = stars(rating);
    c.prepare_cached(SQLITE_RATING_UPSERT)?.execute(params![
        new.course_id,
        kind,
        1,
        rating,
        st[0],
        st[1],
        st[2],
        st[3],
        st[4]
    ])?;
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
) -> Result<(Target, CommentType), ReplyOutcome> {
    let Some(t) = target else {
        return Err(ReplyOutcome::CommentNotFound);
    };
    if t.parent_id.is_some() {
        return Err(ReplyOutcome::IsReply);
    }
    let Some((kind, false)) = CommentType::of_stored(&t.comment_type) else {
        return Err(ReplyOutcome::IsReply);
    };
    if t.provider_id != Some(provider_id) {
        return Err(ReplyOutcome::NotTheProvider);
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
                        Err(outcome) => return Ok(outcome),
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
        Err(outcome) => return Ok(outcome),
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
}
