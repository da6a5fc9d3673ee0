//! Comments on the embedded SQLite store. One writer in one process makes
//! every write, so a write reads what it needs (the user's last rating, an
//! existing reply) and then writes, in its command, and the page cache's
//! versions are always current. The listing's JSON is built by `printf`
//! (the default) or by SQLite's JSON functions (`--comments-json`).

use std::sync::{Arc, LazyLock};

use futures::future::BoxFuture;
use rusqlite::{params, Connection, OptionalExtension};

use super::super::model::{CommentEdit, CommentType, Deleter, ListQuery, NewComment, NewReply};
use super::super::seed::{loaders, Generator};
use super::listing::{snapshot_filter, variant_index, PageBuilder, Variant, VARIANTS};
use super::writes::{
    check_delete, check_edit, check_target, comment_out, deleted_event, delta, edited_event,
    edited_out, found_row, last_after_post, posted_event, reply_event, reply_out, target_row,
    Delta, LastSeen,
};
use super::{
    course_row, pick_user, rating_out, ratings_row, sql, CommentsStore, Course, DeleteOutcome,
    EditOutcome, JsonBuild, ListPage, PostOutcome, RatingOut, ReplyOutcome,
};
use crate::store::invalidate::Subscription;
use crate::store::sqlite::SqliteStore;
use crate::store::{eventlog, StoreError};

pub struct SqliteComments {
    db: Arc<SqliteStore>,
}

impl SqliteComments {
    pub fn new(db: Arc<SqliteStore>) -> SqliteComments {
        SqliteComments { db }
    }
}

/// The course, the user's name and their last rating on the course.
const POST_LOOKUP: &str = "SELECT (SELECT 1 FROM comments_courses WHERE id = ?1),
        (SELECT display_name FROM comments_users WHERE id = ?2),
        s.last_rating, s.last_update_ms, s.last_comment_id
     FROM (SELECT 1) LEFT JOIN comments_snapshots s
       ON s.course_id = ?1 AND s.comment_type = ?3 AND s.user_id = ?2";

/// A user's last rating on a course, read before a write changes it.
const SNAPSHOT_LAST: &str =
    "SELECT last_rating, last_update_ms, last_comment_id FROM comments_snapshots
     WHERE course_id = ?1 AND comment_type = ?2 AND user_id = ?3";

/// [`sql::SNAPSHOT_REBUILD`], answering the new last rating.
static SNAPSHOT_REBUILD: LazyLock<String> =
    LazyLock::new(|| format!("{}RETURNING last_rating", sql::SNAPSHOT_REBUILD));

/// The reply to a comment, if any (the single writer makes the check and
/// the write that follows atomic).
const REPLY_EXISTING: &str = "SELECT id, created_ms FROM comments WHERE parent_id = ?1";
const REPLY_EDIT: &str =
    "UPDATE comments SET title = ?2, remarks = ?3, edited_ms = ?4 WHERE id = ?1";

/// The rating's two reads: the course's title, then its aggregates row.
const COURSE_TITLE: &str = "SELECT title FROM comments_courses WHERE id = ?1";
const RATINGS: &str =
    "SELECT count, sum, stars1, stars2, stars3, stars4, stars5 FROM comments_ratings
     WHERE course_id = ?1 AND comment_type = ?2";

/// The row `sql` answers for `params`, if any, through the statement cache.
fn query_opt<T>(
    c: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    map: impl FnOnce(&rusqlite::Row<'_>) -> Result<T, StoreError>,
) -> Result<Option<T>, StoreError> {
    crate::store::sqlite::optional(&mut *c.prepare_cached(sql)?, params, map)
}

fn apply_delta(c: &Connection, course_id: i64, kind: &str, d: Delta) -> Result<(), StoreError> {
    c.prepare_cached(sql::RATING_UPSERT)?.execute(params![
        course_id, kind, d.count, d.sum, d.stars[0], d.stars[1], d.stars[2], d.stars[3], d.stars[4]
    ])?;
    Ok(())
}

fn post(c: &Connection, new: &NewComment) -> Result<PostOutcome, StoreError> {
    let kind = new.comment_type.as_str();
    let (course, name, old): (Option<i64>, Option<String>, Option<LastSeen>) = c
        .prepare_cached(POST_LOOKUP)?
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
    c.prepare_cached(sql::POST_INSERT)?.execute(params![
        new.course_id,
        new.user_id,
        kind,
        rating,
        new.title,
        new.remarks,
        new.created_ms
    ])?;
    let id = c.last_insert_rowid();
    c.prepare_cached(&sql::SNAPSHOT_UPSERT)?.execute(params![
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
    apply_delta(c, new.course_id, kind, delta(old.map(|o| o.0), Some(last)))?;
    let out = comment_out(new, id, display_name);
    eventlog::sqlite_append(c, &posted_event(&out))?;
    Ok(PostOutcome::Posted(out))
}

fn put_reply(c: &Connection, r: &NewReply) -> Result<ReplyOutcome, StoreError> {
    let target = query_opt(c, sql::TARGET, [r.comment_id], |row| target_row(row))?;
    let (target, kind) = match check_target(target, r.provider_id) {
        Ok(v) => v,
        Err(outcome) => return Ok(*outcome),
    };
    let existing: Option<(i64, i64)> = c
        .prepare_cached(REPLY_EXISTING)?
        .query_row([r.comment_id], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    let out = match existing {
        Some((id, created_ms)) => {
            c.prepare_cached(REPLY_EDIT)?
                .execute(params![id, r.title, r.remarks, r.at_ms])?;
            reply_out(r, &target, kind, id, created_ms, true)
        }
        None => {
            c.prepare_cached(sql::REPLY_INSERT)?.execute(params![
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
    c.prepare_cached(sql::VERSION_BUMP)?
        .execute(params![target.course_id, kind.as_str()])?;
    let edited = out.edited_date.is_some();
    eventlog::sqlite_append(c, &reply_event(&out, edited))?;
    Ok(if edited {
        ReplyOutcome::Edited(out)
    } else {
        ReplyOutcome::Created(out)
    })
}

/// Rebuilds the user's snapshot from their comments, or deletes it when
/// none is left; their new last rating.
fn rebuild_snapshot(
    c: &Connection,
    course_id: i64,
    kind: &str,
    user_id: i64,
) -> Result<Option<i32>, StoreError> {
    let row: Option<i32> = c
        .prepare_cached(&SNAPSHOT_REBUILD)?
        .query_row(params![course_id, kind, user_id], |r| r.get(0))
        .optional()?;
    if row.is_none() {
        c.prepare_cached(sql::SNAPSHOT_DELETE)?
            .execute(params![course_id, kind, user_id])?;
    }
    Ok(row)
}

fn last_rating(
    c: &Connection,
    course_id: i64,
    kind: &str,
    user_id: i64,
) -> Result<Option<i32>, StoreError> {
    Ok(c.prepare_cached(SNAPSHOT_LAST)?
        .query_row(params![course_id, kind, user_id], |r| r.get(0))
        .optional()?)
}

fn edit(c: &Connection, e: &CommentEdit) -> Result<EditOutcome, StoreError> {
    let found = query_opt(c, sql::FIND, [e.comment_id], |r| found_row(r))?;
    let (f, kind) = match check_edit(found, e) {
        Ok(v) => v,
        Err(outcome) => return Ok(*outcome),
    };
    let k = kind.as_str();
    let old = last_rating(c, f.course_id, k, f.user_id)?;
    c.prepare_cached(sql::EDIT)?.execute(params![
        e.comment_id,
        e.rating.map(|r| r.get()),
        e.title,
        e.remarks,
        e.at_ms
    ])?;
    let new = rebuild_snapshot(c, f.course_id, k, f.user_id)?;
    apply_delta(c, f.course_id, k, delta(old, new))?;
    let out = edited_out(&f, e, kind);
    eventlog::sqlite_append(c, &edited_event(&out))?;
    Ok(EditOutcome::Edited(out))
}

fn delete(c: &Connection, d: &Deleter) -> Result<DeleteOutcome, StoreError> {
    let found = query_opt(c, sql::FIND, [d.comment_id], |r| found_row(r))?;
    let (f, kind, is_reply) = match check_delete(found, d) {
        Ok(v) => v,
        Err(outcome) => return Ok(outcome),
    };
    let k = kind.as_str();
    let mut del = c.prepare_cached(sql::DELETE)?;
    if is_reply {
        del.execute([d.comment_id])?;
        c.prepare_cached(sql::VERSION_BUMP)?
            .execute(params![f.course_id, k])?;
        eventlog::sqlite_append(c, &deleted_event(d, &f, kind, true, 0))?;
        return Ok(DeleteOutcome::Deleted {
            course_id: f.course_id,
        });
    }
    let old = last_rating(c, f.course_id, k, f.user_id)?;
    del.execute([d.comment_id])?;
    let replies = c
        .prepare_cached(sql::DELETE_REPLIES)?
        .execute([d.comment_id])?;
    let new = rebuild_snapshot(c, f.course_id, k, f.user_id)?;
    apply_delta(c, f.course_id, k, delta(old, new))?;
    eventlog::sqlite_append(c, &deleted_event(d, &f, kind, false, replies as u64))?;
    Ok(DeleteOutcome::Deleted {
        course_id: f.course_id,
    })
}

// ------------------------------------------------------------------ listing

/// `iso_ms`, the store's own SQL function (`store/sqlite.rs`); the same
/// text as `strftime('%Y-%m-%dT%H:%M:%S', ms / 1000, 'unixepoch') ||
/// printf('.%03dZ', ms % 1000)` at a tenth of the instructions.
fn ts(col: &str) -> String {
    format!("iso_ms({col})")
}

/// The listing with `json_object` / `json_group_array`
/// (`--comments-json functions`).
pub(super) fn list_sql(v: Variant) -> String {
    format!(
        "SELECT json_object(
            'displayName', s.display_name,
            'courseId', s.course_id,
            'commentType', s.comment_type,
            'lastTitle', s.last_title,
            'lastRating', s.last_rating,
            'lastRemarks', s.last_remarks,
            'lastUpdate', {last_update},
            'lastCommentId', s.last_comment_id,
            'thread', json((SELECT json_group_array(json(t.j)) FROM (
                SELECT json_object(
                    'commentId', c.id,
                    'title', c.title,
                    'rating', c.rating,
                    'remarks', c.remarks,
                    'createdDate', {created},
                    'reply', json((SELECT json_group_array(json_object(
                            'commentId', r.id,
                            'displayName', COALESCE(ru.display_name, ''),
                            'title', r.title,
                            'remarks', r.remarks,
                            'createdDate', {reply_created}))
                        FROM comments r LEFT JOIN comments_users ru ON ru.id = r.user_id
                        WHERE r.parent_id = c.id))) AS j
                FROM comments c
                WHERE c.course_id = s.course_id AND c.user_id = s.user_id AND c.comment_type = s.comment_type
                ORDER BY c.created_ms DESC, c.id DESC LIMIT ?5 OFFSET ?6) AS t))
         ), s.last_update_ms, s.user_id
         FROM ({snapshots}) AS s
         ORDER BY s.last_update_ms DESC, s.user_id DESC",
        last_update = ts("s.last_update_ms"),
        created = ts("c.created_ms"),
        reply_created = ts("r.created_ms"),
        snapshots = snapshot_filter(v),
    )
}

/// The text-assembling listing (the default): each object is one `printf`
/// into one buffer (strings through `json_quote`), arrays are
/// `group_concat`. Same bytes as `json_object`, without building and
/// re-parsing JSON values between the levels (see BENCHMARKS.md for the
/// instruction counts).
///
/// Order inside the arrays: a comment has at most one reply (the unique
/// index `comments_one_reply`), and a thread is aggregated from a subquery
/// ordered newest first with LIMIT, which SQLite neither flattens nor
/// reorders, so the aggregate sees its rows in that order: the same
/// reliance as `json_group_array` over an ordered subquery in the other
/// variant. `group_concat(.. ORDER BY ..)` would guarantee it at the price
/// of a temporary B-tree per thread and per reply (a fifth of the
/// listing's instructions); the snapshot tests pin the order.
///
/// A thread of one comment (nearly every thread: a user rarely reviews the
/// same course twice) is printed from the snapshot's last-comment columns,
/// which are that comment's own (comments are never edited), instead of
/// the correlated subquery over `comments`: ~27% of the statement's time.
/// `comment_count` (migration 0006) says which threads qualify.
pub(super) fn printf_list_sql(v: Variant) -> String {
    // One reply object (at most one per comment), for the comment `{id}`.
    let reply = |id: &str| {
        format!(
            r#"COALESCE((
                SELECT group_concat(printf('{{"commentId":%d,"displayName":%s,"title":%s,"remarks":%s,"createdDate":"%s"}}',
                    r.id, json_quote(COALESCE(ru.display_name, '')), json_quote(r.title),
                    json_quote(r.remarks), iso_ms(r.created_ms)))
                FROM comments r LEFT JOIN comments_users ru ON ru.id = r.user_id
                WHERE r.parent_id = {id}), '')"#
        )
    };
    format!(
        r#"SELECT printf('{{"displayName":%s,"courseId":%d,"commentType":%s,"lastTitle":%s,"lastRating":%d,"lastRemarks":%s,"lastUpdate":"%s","lastCommentId":%d,"thread":[%s]}}',
            json_quote(s.display_name), s.course_id, json_quote(s.comment_type), json_quote(s.last_title),
            s.last_rating, json_quote(s.last_remarks), iso_ms(s.last_update_ms), s.last_comment_id,
            CASE WHEN s.comment_count = 1 THEN
                -- The thread is the snapshot's last comment (comments are
                -- never edited): a page of it is that comment or nothing,
                -- as LIMIT ?5 OFFSET ?6 would give over a one-row thread.
                CASE WHEN ?6 <= 0 AND ?5 <> 0 THEN
                    printf('{{"commentId":%d,"title":%s,"rating":%d,"remarks":%s,"createdDate":"%s","reply":[%s]}}',
                        s.last_comment_id, json_quote(s.last_title), s.last_rating, json_quote(s.last_remarks),
                        iso_ms(s.last_update_ms), {snapshot_reply})
                ELSE '' END
            ELSE COALESCE((
                SELECT group_concat(printf('{{"commentId":%d,"title":%s,"rating":%d,"remarks":%s,"createdDate":"%s","reply":[%s]}}',
                    t.id, json_quote(t.title), t.rating, json_quote(t.remarks), iso_ms(t.created_ms),
                    {thread_reply}))
                FROM (SELECT c.id, c.title, c.rating, c.remarks, c.created_ms FROM comments c
                      WHERE c.course_id = s.course_id AND c.user_id = s.user_id
                        AND c.comment_type = s.comment_type
                      ORDER BY c.created_ms DESC, c.id DESC LIMIT ?5 OFFSET ?6) AS t), '') END),
            s.last_update_ms, s.user_id
         FROM ({snapshots}) AS s
         ORDER BY s.last_update_ms DESC, s.user_id DESC"#,
        snapshot_reply = reply("s.last_comment_id"),
        thread_reply = reply("t.id"),
        snapshots = snapshot_filter(v),
    )
}

static LIST: LazyLock<Vec<String>> =
    LazyLock::new(|| VARIANTS.iter().map(|v| list_sql(*v)).collect());
static PRINTF_LIST: LazyLock<Vec<String>> =
    LazyLock::new(|| VARIANTS.iter().map(|v| printf_list_sql(*v)).collect());

impl CommentsStore for SqliteComments {
    fn list_page<'a>(
        &'a self,
        q: &'a ListQuery,
        build: JsonBuild,
    ) -> BoxFuture<'a, Result<ListPage, StoreError>> {
        Box::pin(async move {
            if q.size == 0 {
                return Ok(PageBuilder::default().finish());
            }
            let vi = variant_index(q);
            let q = q.clone();
            self.db
                .read(move |c| {
                    let sql = match build {
                        JsonBuild::Functions => &LIST[vi],
                        JsonBuild::Concat => &PRINTF_LIST[vi],
                    };
                    let mut stmt = c.prepare_cached(sql)?;
                    let mut values: Vec<rusqlite::types::Value> = vec![
                        q.course_id.into(),
                        q.comment_type.as_str().to_string().into(),
                        q.size.into(),
                        q.skip.into(),
                        q.size_thread.into(),
                        q.skip_thread.into(),
                    ];
                    if let Some(u) = q.user_id {
                        values.push(u.into());
                    }
                    if let Some(cur) = q.after {
                        values.push(cur.last_update_ms.into());
                        values.push(cur.user_id.into());
                    }
                    // Each block's text goes from SQLite's buffer straight
                    // into the page (no String per block).
                    let mut rows = stmt.query(rusqlite::params_from_iter(values))?;
                    let mut page = PageBuilder::default();
                    while let Some(r) = rows.next()? {
                        let json = r.get_ref(0)?.as_bytes().map_err(|e| {
                            StoreError::Internal(format!("listing block is not text: {e}"))
                        })?;
                        page.push(json, r.get(1)?, r.get(2)?);
                    }
                    Ok(page.finish())
                })
                .await
        })
    }

    fn course(&self, id: i64) -> BoxFuture<'_, Result<Option<Course>, StoreError>> {
        Box::pin(
            self.db
                .read(move |c| query_opt(c, sql::COURSE, [id], |r| course_row(r))),
        )
    }

    fn rating(
        &self,
        course_id: i64,
        kind: CommentType,
    ) -> BoxFuture<'_, Result<Option<RatingOut>, StoreError>> {
        Box::pin(async move {
            let k = kind.as_str();
            let (exists, row) = self
                .db
                .read(move |c| {
                    let exists: Option<String> = c
                        .prepare_cached(COURSE_TITLE)?
                        .query_row([course_id], |r| r.get(0))
                        .optional()?;
                    let row = query_opt(c, RATINGS, params![course_id, k], |r| ratings_row(r))?;
                    Ok((exists, row))
                })
                .await?;
            Ok(exists.map(|title| rating_out(course_id, title, kind, row)))
        })
    }

    fn post_comment(&self, new: NewComment) -> BoxFuture<'_, Result<PostOutcome, StoreError>> {
        Box::pin(self.db.write(move |c| post(c, &new)))
    }

    fn edit_comment(&self, e: CommentEdit) -> BoxFuture<'_, Result<EditOutcome, StoreError>> {
        Box::pin(self.db.write(move |c| edit(c, &e)))
    }

    fn delete_comment(&self, d: Deleter) -> BoxFuture<'_, Result<DeleteOutcome, StoreError>> {
        Box::pin(self.db.write(move |c| delete(c, &d)))
    }

    fn put_reply(&self, reply: NewReply) -> BoxFuture<'_, Result<ReplyOutcome, StoreError>> {
        Box::pin(self.db.write(move |c| put_reply(c, &reply)))
    }

    fn cache_versions_current(&self) -> bool {
        true
    }

    fn invalidations(&self) -> Option<Subscription> {
        None
    }

    fn course_count(&self) -> BoxFuture<'_, Result<i64, StoreError>> {
        Box::pin(
            self.db
                .read(|c| Ok(c.query_row(sql::COURSE_COUNT, [], |r| r.get(0))?)),
        )
    }

    fn seed_bulk(
        &self,
        gen: Generator,
        wipe: bool,
        progress: bool,
    ) -> BoxFuture<'_, anyhow::Result<i64>> {
        let path = self.db.path().to_path_buf();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || loaders::seed_sqlite(&path, gen, wipe, progress))
                .await?
        })
    }

    fn snapshot_users(
        &self,
        picks: Vec<(i64, u64)>,
    ) -> BoxFuture<'_, Result<Vec<Option<i64>>, StoreError>> {
        Box::pin(self.db.read(move |c| {
            let mut stmt = c.prepare_cached(sql::SNAPSHOT_USERS)?;
            let mut out = Vec::with_capacity(picks.len());
            for (course, h) in &picks {
                let us: Vec<i64> = stmt
                    .query_map([course], |r| r.get(0))?
                    .collect::<Result<_, _>>()?;
                out.push(pick_user(&us, *h));
            }
            Ok(out)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listing_statement_prepares() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::store::migrate::apply_sqlite(&mut conn, &crate::services::migrations()).unwrap();
        crate::store::sqlite::register_functions(&conn).unwrap();
        for v in VARIANTS {
            for sql in [list_sql(v), printf_list_sql(v)] {
                if let Err(e) = conn.prepare(&sql) {
                    panic!("{e}: {sql}");
                }
            }
        }
    }
}
