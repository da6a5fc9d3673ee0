//! Comments on a shared PostgreSQL. Other nodes write too, and a batch's
//! commands run pipelined in one transaction (`store/postgres.rs`), so a
//! read and a write of the same row in two statements could let another
//! command change it in between. Every write that changes a course's
//! snapshots or aggregates therefore first locks the course's aggregates
//! row ([`sql::VERSION_BUMP`]) and holds it to its commit, and reads a
//! user's old rating in the very statement that changes their snapshot
//! ([`SNAPSHOT_UPSERT_DELTA`], [`SNAPSHOT_REBUILD`], [`SNAPSHOT_DELETE`]).
//! A reply is an insert that does nothing when the comment has one, then an
//! update. Other nodes' writes reach this node's page cache over the
//! store's invalidation channel. The listing's JSON is concatenated.

use std::sync::{Arc, LazyLock};

use futures::future::BoxFuture;
use tokio_postgres::types::ToSql;

use super::super::cache::FRESH_BOUND;
use super::super::model::{CommentEdit, CommentType, Deleter, ListQuery, NewComment, NewReply};
use super::super::seed::{loaders, Generator};
use super::listing::{snapshot_filter, variant_index, PageBuilder, Variant, VARIANTS};
use super::writes::{
    check_delete, check_edit, check_target, comment_out, deleted_event, delta, edited_event,
    edited_out, found_row, posted_event, reply_event, reply_out, target_row, Delta,
};
use super::{
    course_row, invalidation_key, pick_user, rating_out, ratings_row, sql, CommentsStore, Course,
    DeleteOutcome, EditOutcome, JsonBuild, ListPage, PostOutcome, RatingOut, ReplyOutcome,
};
use crate::store::invalidate::Subscription;
use crate::store::postgres::PgStore;
use crate::store::{pg_placeholders, StoreError};

pub struct PgComments {
    db: Arc<PgStore>,
}

impl PgComments {
    pub fn new(db: Arc<PgStore>) -> PgComments {
        PgComments { db }
    }
}

static COURSE: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::COURSE));
static TARGET: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::TARGET));
static FIND: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::FIND));
static EDIT: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::EDIT));
static DELETE: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::DELETE));
static DELETE_REPLIES: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::DELETE_REPLIES));
static RATING_UPSERT: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::RATING_UPSERT));
static VERSION_BUMP: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::VERSION_BUMP));
static SNAPSHOT_USERS: LazyLock<String> = LazyLock::new(|| pg_placeholders(sql::SNAPSHOT_USERS));

/// The course and the user's name (their old rating is read by
/// [`SNAPSHOT_UPSERT_DELTA`]).
const POST_LOOKUP: &str = "SELECT (SELECT 1 FROM comments_courses WHERE id = $1),
        (SELECT display_name FROM comments_users WHERE id = $2)";

/// [`sql::POST_INSERT`], answering the comment's id.
static POST_INSERT: LazyLock<String> =
    LazyLock::new(|| format!("{} RETURNING id", pg_placeholders(sql::POST_INSERT)));

/// [`sql::REPLY_INSERT`], doing nothing when the comment has a reply
/// already (then [`REPLY_EDIT`] edits it).
static REPLY_INSERT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{}\n ON CONFLICT (parent_id) WHERE parent_id IS NOT NULL DO NOTHING RETURNING id",
        pg_placeholders(sql::REPLY_INSERT)
    )
});

/// Edits the reply to comment $1.
const REPLY_EDIT: &str = "UPDATE comments SET title = $2, remarks = $3, edited_ms = $4
 WHERE parent_id = $1 RETURNING id, created_ms";

/// A user's old last rating on a course, read in the statement that
/// changes their snapshot: the snapshot upserts, rebuild and delete take
/// `old`'s parameters first (course, type, user).
const OLD_RATING: &str = "WITH old AS (SELECT last_rating FROM comments_snapshots
    WHERE course_id = ?1 AND comment_type = ?2 AND user_id = ?3)";

/// The snapshot upsert ([`sql::SNAPSHOT_UPSERT`]) with the user's last
/// rating before it and after it, in one statement. A batch's commands run
/// pipelined in one transaction, so a read and a write of the same snapshot
/// in two statements could let another command of the batch change it in
/// between; one statement cannot be split so. Other writers' transactions
/// cannot change the course's snapshots meanwhile: every write that changes
/// them first locks the course's aggregates row ([`sql::VERSION_BUMP`]) and
/// holds it to its commit, so this statement, which starts after that
/// lock, reads what they committed.
/// Answers (old last rating, new last rating).
static SNAPSHOT_UPSERT_DELTA: LazyLock<String> = LazyLock::new(|| {
    pg_placeholders(&format!(
        "{OLD_RATING},
         up AS ({} RETURNING last_rating)
         SELECT (SELECT last_rating FROM old), up.last_rating FROM up",
        *sql::SNAPSHOT_UPSERT
    ))
});

/// [`sql::SNAPSHOT_REBUILD`], answering the new last rating and the one
/// before (read in the same statement, see [`SNAPSHOT_UPSERT_DELTA`]).
static SNAPSHOT_REBUILD: LazyLock<String> = LazyLock::new(|| {
    pg_placeholders(&format!(
        "{OLD_RATING} {}RETURNING last_rating, (SELECT last_rating FROM old)",
        sql::SNAPSHOT_REBUILD
    ))
});

/// [`sql::SNAPSHOT_DELETE`], answering the last rating it held.
static SNAPSHOT_DELETE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{}\n     RETURNING last_rating",
        pg_placeholders(sql::SNAPSHOT_DELETE)
    )
});

/// The rating in one read: the course's title and its aggregates row (the
/// aggregates NULL when it has none).
const RATING: &str =
    "SELECT r.count, r.sum, r.stars1, r.stars2, r.stars3, r.stars4, r.stars5, co.title
     FROM comments_courses co LEFT JOIN comments_ratings r
       ON r.course_id = co.id AND r.comment_type = $2
     WHERE co.id = $1";

async fn apply_delta(
    t: &deadpool_postgres::Transaction<'_>,
    course_id: i64,
    kind: &str,
    d: Delta,
) -> Result<(), StoreError> {
    let ratings = t.prepare_cached(&RATING_UPSERT).await?;
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

/// Bumps the version of a course and type, which locks its aggregates row
/// to the commit: a write that changes snapshots does it first (see
/// [`SNAPSHOT_UPSERT_DELTA`]).
async fn bump_version(
    t: &deadpool_postgres::Transaction<'_>,
    course_id: i64,
    kind: &str,
) -> Result<(), StoreError> {
    let bump = t.prepare_cached(&VERSION_BUMP).await?;
    t.execute(&bump, &[&course_id, &kind]).await?;
    Ok(())
}

/// Rebuilds the user's snapshot from their comments; their last rating
/// before and after it, each read by the statement that changes the
/// snapshot (after: `None` when no comment is left and the snapshot is
/// deleted).
async fn rebuild_snapshot(
    t: &deadpool_postgres::Transaction<'_>,
    course_id: i64,
    kind: &str,
    user_id: i64,
) -> Result<(Option<i32>, Option<i32>), StoreError> {
    let rebuild = t.prepare_cached(&SNAPSHOT_REBUILD).await?;
    let row = t
        .query_opt(&rebuild, &[&course_id, &kind, &user_id])
        .await?;
    match row {
        Some(r) => Ok((r.get(1), Some(r.get(0)))),
        None => {
            let del = t.prepare_cached(&SNAPSHOT_DELETE).await?;
            let old = t
                .query_opt(&del, &[&course_id, &kind, &user_id])
                .await?
                .map(|r| r.get(0));
            Ok((old, None))
        }
    }
}

// ------------------------------------------------------------------ listing

fn ts(col: &str) -> String {
    format!(
        "(to_char(to_timestamp({col} / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS') \
         || '.' || lpad(({col} % 1000)::text, 3, '0') || 'Z')"
    )
}

/// A JSON string literal of a text expression.
fn quote(e: &str) -> String {
    format!("to_json({e})::text")
}

/// An integer expression as text.
fn int(e: &str) -> String {
    format!("{e}::text")
}

/// `expr` joined with commas, in `order`.
fn agg(e: &str, order: &str) -> String {
    format!("string_agg({e}, ',' ORDER BY {order})")
}

/// The listing as one concatenated JSON text per block.
pub(super) fn list_sql(v: Variant) -> String {
    let reply = format!(
        "'{{\"commentId\":' || {} || ',\"displayName\":' || {} || ',\"title\":' || {} \
         || ',\"remarks\":' || {} || ',\"createdDate\":\"' || {} || '\"}}'",
        int("r.id"),
        quote("COALESCE(ru.display_name, '')"),
        quote("r.title"),
        quote("r.remarks"),
        ts("r.created_ms")
    );
    let comment = format!(
        "'{{\"commentId\":' || {} || ',\"title\":' || {} || ',\"rating\":' || {} \
         || ',\"remarks\":' || {} || ',\"createdDate\":\"' || {} || '\"' \
         || ',\"reply\":[' || COALESCE((SELECT {} FROM comments r LEFT JOIN comments_users ru \
            ON ru.id = r.user_id WHERE r.parent_id = t.id), '') || ']}}'",
        int("t.id"),
        quote("t.title"),
        int("t.rating"),
        quote("t.remarks"),
        ts("t.created_ms"),
        agg(&reply, "r.id")
    );
    pg_placeholders(&format!(
        "SELECT '{{\"displayName\":' || {name}
            || ',\"courseId\":' || {course}
            || ',\"commentType\":' || {kind}
            || ',\"lastTitle\":' || {title}
            || ',\"lastRating\":' || {rating}
            || ',\"lastRemarks\":' || {remarks}
            || ',\"lastUpdate\":\"' || {last_update} || '\"'
            || ',\"lastCommentId\":' || {last_id}
            || ',\"thread\":[' || COALESCE((
                SELECT {thread}
                FROM (SELECT c.id, c.title, c.rating, c.remarks, c.created_ms FROM comments c
                      WHERE c.course_id = s.course_id AND c.user_id = s.user_id
                        AND c.comment_type = s.comment_type
                      ORDER BY c.created_ms DESC, c.id DESC LIMIT ?5 OFFSET ?6) AS t), '')
            || ']}}', s.last_update_ms, s.user_id
         FROM ({snapshots}) AS s
         ORDER BY s.last_update_ms DESC, s.user_id DESC",
        name = quote("s.display_name"),
        course = int("s.course_id"),
        kind = quote("s.comment_type"),
        title = quote("s.last_title"),
        rating = int("s.last_rating"),
        remarks = quote("s.last_remarks"),
        last_update = ts("s.last_update_ms"),
        last_id = int("s.last_comment_id"),
        thread = agg(&comment, "t.created_ms DESC, t.id DESC"),
        snapshots = snapshot_filter(v),
    ))
}

static LIST: LazyLock<Vec<String>> =
    LazyLock::new(|| VARIANTS.iter().map(|v| list_sql(*v)).collect());

impl CommentsStore for PgComments {
    fn list_page<'a>(
        &'a self,
        q: &'a ListQuery,
        _build: JsonBuild,
    ) -> BoxFuture<'a, Result<ListPage, StoreError>> {
        Box::pin(async move {
            if q.size == 0 {
                return Ok(PageBuilder::default().finish());
            }
            let vi = variant_index(q);
            let client = self.db.client().await?;
            let stmt = client.prepare_cached(&LIST[vi]).await?;
            let kind = q.comment_type.as_str();
            let mut params: Vec<&(dyn ToSql + Sync)> = vec![
                &q.course_id,
                &kind,
                &q.size,
                &q.skip,
                &q.size_thread,
                &q.skip_thread,
            ];
            let (cur_ms, cur_user) = q
                .after
                .map(|c| (c.last_update_ms, c.user_id))
                .unwrap_or_default();
            if let Some(u) = &q.user_id {
                params.push(u);
            }
            if q.after.is_some() {
                params.push(&cur_ms);
                params.push(&cur_user);
            }
            let rows = client.query(&stmt, &params).await?;
            let mut page = PageBuilder::default();
            for r in &rows {
                page.push(r.get::<_, &str>(0).as_bytes(), r.get(1), r.get(2));
            }
            Ok(page.finish())
        })
    }

    fn course(&self, id: i64) -> BoxFuture<'_, Result<Option<Course>, StoreError>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let stmt = client.prepare_cached(&COURSE).await?;
            client
                .query_opt(&stmt, &[&id])
                .await?
                .map(|r| course_row(&r))
                .transpose()
        })
    }

    fn rating(
        &self,
        course_id: i64,
        kind: CommentType,
    ) -> BoxFuture<'_, Result<Option<RatingOut>, StoreError>> {
        Box::pin(async move {
            let k = kind.as_str();
            let client = self.db.client().await?;
            let Some(r) = client.query_opt(RATING, &[&course_id, &k]).await? else {
                return Ok(None);
            };
            let count: Option<i64> = r.get(0);
            let row = match count {
                Some(_) => Some(ratings_row(&r)?),
                None => None,
            };
            Ok(Some(rating_out(course_id, r.get(7), kind, row)))
        })
    }

    fn post_comment(&self, new: NewComment) -> BoxFuture<'_, Result<PostOutcome, StoreError>> {
        Box::pin(self.db.write(move |tx| {
            let new = new.clone();
            Box::pin(async move {
                let t = &tx.tx;
                let kind = new.comment_type.as_str();
                let rating = new.rating.get();
                // Every statement prepared once per writer connection:
                // planning them on every post cost as much as running them.
                let lookup = t.prepare_cached(POST_LOOKUP).await?;
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
                // `SNAPSHOT_UPSERT_DELTA`.
                bump_version(t, new.course_id, kind).await?;
                let insert = t.prepare_cached(&POST_INSERT).await?;
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
                let snapshot = t.prepare_cached(&SNAPSHOT_UPSERT_DELTA).await?;
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
                apply_delta(t, new.course_id, kind, delta(old, Some(last))).await?;
                let out = comment_out(&new, id, display_name);
                tx.invalidate(invalidation_key(new.course_id));
                tx.append(posted_event(&out));
                Ok(PostOutcome::Posted(out))
            })
        }))
    }

    fn edit_comment(&self, e: CommentEdit) -> BoxFuture<'_, Result<EditOutcome, StoreError>> {
        Box::pin(self.db.write(move |tx| {
            let e = e.clone();
            Box::pin(async move {
                let t = &tx.tx;
                let find = t.prepare_cached(&FIND).await?;
                let found = t
                    .query_opt(&find, &[&e.comment_id])
                    .await?
                    .map(|r| found_row(&r))
                    .transpose()?;
                let (f, kind) = match check_edit(found, &e) {
                    Ok(v) => v,
                    Err(outcome) => return Ok(*outcome),
                };
                let k = kind.as_str();
                // The course's aggregates row, locked to the commit: see
                // `SNAPSHOT_UPSERT_DELTA`.
                bump_version(t, f.course_id, k).await?;
                let rating = e.rating.map(|r| r.get());
                let update = t.prepare_cached(&EDIT).await?;
                let n = t
                    .execute(
                        &update,
                        &[&e.comment_id, &rating, &e.title, &e.remarks, &e.at_ms],
                    )
                    .await?;
                if n == 0 {
                    // Deleted by another writer since it was found.
                    return Ok(EditOutcome::CommentNotFound);
                }
                let (old, new) = rebuild_snapshot(t, f.course_id, k, f.user_id).await?;
                apply_delta(t, f.course_id, k, delta(old, new)).await?;
                let out = edited_out(&f, &e, kind);
                tx.invalidate(invalidation_key(f.course_id));
                tx.append(edited_event(&out));
                Ok(EditOutcome::Edited(out))
            })
        }))
    }

    fn delete_comment(&self, d: Deleter) -> BoxFuture<'_, Result<DeleteOutcome, StoreError>> {
        Box::pin(self.db.write(move |tx| {
            Box::pin(async move {
                let t = &tx.tx;
                let find = t.prepare_cached(&FIND).await?;
                let found = t
                    .query_opt(&find, &[&d.comment_id])
                    .await?
                    .map(|r| found_row(&r))
                    .transpose()?;
                let (f, kind, is_reply) = match check_delete(found, &d) {
                    Ok(v) => v,
                    Err(outcome) => return Ok(outcome),
                };
                let k = kind.as_str();
                // The course's aggregates row, locked to the commit: see
                // `SNAPSHOT_UPSERT_DELTA`.
                bump_version(t, f.course_id, k).await?;
                let del = t.prepare_cached(&DELETE).await?;
                if t.execute(&del, &[&d.comment_id]).await? == 0 {
                    return Ok(DeleteOutcome::CommentNotFound);
                }
                if is_reply {
                    tx.invalidate(invalidation_key(f.course_id));
                    tx.append(deleted_event(&d, &f, kind, true, 0));
                    return Ok(DeleteOutcome::Deleted {
                        course_id: f.course_id,
                    });
                }
                let del_replies = t.prepare_cached(&DELETE_REPLIES).await?;
                let replies = t.execute(&del_replies, &[&d.comment_id]).await?;
                let (old, new) = rebuild_snapshot(t, f.course_id, k, f.user_id).await?;
                apply_delta(t, f.course_id, k, delta(old, new)).await?;
                tx.invalidate(invalidation_key(f.course_id));
                tx.append(deleted_event(&d, &f, kind, false, replies));
                Ok(DeleteOutcome::Deleted {
                    course_id: f.course_id,
                })
            })
        }))
    }

    fn put_reply(&self, reply: NewReply) -> BoxFuture<'_, Result<ReplyOutcome, StoreError>> {
        Box::pin(self.db.write(move |tx| {
            let r = reply.clone();
            Box::pin(async move {
                let t = &tx.tx;
                // Prepared once per writer connection, as a post's.
                let target_stmt = t.prepare_cached(&TARGET).await?;
                let target = t
                    .query_opt(&target_stmt, &[&r.comment_id])
                    .await?
                    .map(|row| target_row(&row))
                    .transpose()?;
                let (target, kind) = match check_target(target, r.provider_id) {
                    Ok(v) => v,
                    Err(outcome) => return Ok(*outcome),
                };
                let insert = t.prepare_cached(&REPLY_INSERT).await?;
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
                        let edit = t.prepare_cached(REPLY_EDIT).await?;
                        let row = t
                            .query_one(&edit, &[&r.comment_id, &r.title, &r.remarks, &r.at_ms])
                            .await?;
                        reply_out(&r, &target, kind, row.get(0), row.get(1), true)
                    }
                };
                bump_version(t, target.course_id, kind.as_str()).await?;
                tx.invalidate(invalidation_key(target.course_id));
                let edited = out.edited_date.is_some();
                tx.append(reply_event(&out, edited));
                Ok(if edited {
                    ReplyOutcome::Edited(out)
                } else {
                    ReplyOutcome::Created(out)
                })
            })
        }))
    }

    fn cache_versions_current(&self) -> bool {
        self.db.invalidations().fresh_within(FRESH_BOUND)
    }

    fn invalidations(&self) -> Option<Subscription> {
        Some(self.db.invalidations().subscribe())
    }

    fn course_count(&self) -> BoxFuture<'_, Result<i64, StoreError>> {
        Box::pin(async move {
            Ok(self
                .db
                .client()
                .await?
                .query_one(sql::COURSE_COUNT, &[])
                .await?
                .get(0))
        })
    }

    fn seed_bulk(
        &self,
        gen: Generator,
        _wipe: bool,
        progress: bool,
    ) -> BoxFuture<'_, anyhow::Result<i64>> {
        Box::pin(loaders::seed_pg(&self.db, gen, progress))
    }

    fn snapshot_users(
        &self,
        picks: Vec<(i64, u64)>,
    ) -> BoxFuture<'_, Result<Vec<Option<i64>>, StoreError>> {
        Box::pin(async move {
            let client = self.db.client().await?;
            let stmt = client.prepare(&SNAPSHOT_USERS).await?;
            let mut out = Vec::with_capacity(picks.len());
            for (course, h) in &picks {
                let us: Vec<i64> = client
                    .query(&stmt, &[course])
                    .await?
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                out.push(pick_user(&us, *h));
            }
            Ok(out)
        })
    }
}
