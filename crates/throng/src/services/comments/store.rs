//! Comments SQL for both dialects.
//!
//! The listing's JSON is built by the database and passed through as bytes,
//! as the write-up does with `FOR JSON`: each user block (with its thread and
//! replies) comes back as one JSON text; Rust only joins the blocks of a page
//! with commas (and reads the last block's key for the next cursor).
//!
//! Both dialects give the same bytes for the same data:
//! - SQLite: `json_object` / `json_group_array` (compact output); arrays are
//!   aggregated from a subquery ordered first; `json()` re-marks a subquery's
//!   text as JSON, since subtypes do not cross subquery boundaries.
//! - PostgreSQL: `json_build_object` / `json_agg` print `"a" : 1, ` with
//!   spaces, so the same compact text is concatenated from `to_json(text)`
//!   (which escapes strings the way SQLite does) and
//!   `string_agg(.. ORDER BY ..)`; integers are cast to text.
//! - Times are RFC 3339 UTC with milliseconds (`2025-01-01T10:00:00.000Z`),
//!   computed with integer arithmetic in both, so no float rounding.
//! - Empty threads and replies are `[]`, never null.
//!
//! Writes go through the store's writer (group commit) and append their event
//! in the same transaction. Expected outcomes (unknown course, not the
//! provider, ...) are values; `Err` means the database failed.

use std::sync::LazyLock;

use rusqlite::{params, Connection, OptionalExtension};
use tokio_postgres::types::ToSql;

use super::model::{
    self, CommentType, Cursor, ListQuery, NewComment, NewReply, EVENT_COMMENT_POSTED,
    EVENT_REPLY_EDITED, EVENT_REPLY_POSTED,
};
use crate::store::{eventlog, NewEvent, Store, StoreError};

/// One page of the listing: the JSON array and the key of its last block.
#[derive(Clone, Debug)]
pub struct ListPage {
    pub body: Vec<u8>,
    pub blocks: usize,
    pub last: Option<Cursor>,
}

#[derive(Clone, Debug)]
pub struct Course {
    pub id: i64,
    pub provider_id: i64,
    pub title: String,
}

/// A comment or reply as the POST/PUT answers it.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommentOut {
    pub comment_id: i64,
    pub course_id: i64,
    pub user_id: i64,
    pub display_name: String,
    pub comment_type: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rating: Option<i32>,
    pub title: String,
    pub remarks: String,
    pub created_date: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edited_date: Option<String>,
}

#[derive(Clone, Debug)]
pub enum PostOutcome {
    Posted(CommentOut),
    CourseNotFound,
    UnknownUser,
}

#[derive(Clone, Debug)]
pub enum ReplyOutcome {
    Created(CommentOut),
    Edited(CommentOut),
    CommentNotFound,
    /// The target is itself a reply.
    IsReply,
    /// The caller is not the provider of the comment's course.
    NotTheProvider,
}

/// Rating aggregates of one course and type.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RatingOut {
    pub course_id: i64,
    pub rating_type: String,
    pub count: i64,
    /// Mean rating rounded to 2 decimals; 0 without ratings.
    pub average: f64,
    /// Counts per star, index 0 = 1 star.
    pub stars: [i64; 5],
}

// ---------------------------------------------------------------- listing SQL

/// Which optional filters a listing statement has.
#[derive(Clone, Copy)]
struct Variant {
    user: bool,
    cursor: bool,
}

const VARIANTS: [Variant; 4] = [
    Variant {
        user: false,
        cursor: false,
    },
    Variant {
        user: true,
        cursor: false,
    },
    Variant {
        user: false,
        cursor: true,
    },
    Variant {
        user: true,
        cursor: true,
    },
];

fn variant_index(q: &ListQuery) -> usize {
    q.user_id.is_some() as usize + 2 * q.after.is_some() as usize
}

/// Parameters, numbered in this order in both dialects: course, type, size,
/// skip, sizeThread, skipThread, [user], [cursor ms, cursor user].
fn snapshot_filter(v: Variant, p: fn(usize) -> String) -> String {
    let mut sql = format!(
        "SELECT course_id, comment_type, user_id, display_name, last_title, last_rating, last_remarks, \
         last_update_ms, last_comment_id, comment_count FROM comments_snapshots \
         WHERE course_id = {} AND comment_type = {}",
        p(1),
        p(2)
    );
    let mut next = 7;
    if v.user {
        sql.push_str(&format!(" AND user_id = {}", p(next)));
        next += 1;
    }
    if v.cursor {
        sql.push_str(&format!(
            " AND (last_update_ms, user_id) < ({}, {})",
            p(next),
            p(next + 1)
        ));
    }
    sql.push_str(&format!(
        " ORDER BY last_update_ms DESC, user_id DESC LIMIT {} OFFSET {}",
        p(3),
        p(4)
    ));
    sql
}

/// SQLite: `iso_ms`, the store's own SQL function (`store/sqlite.rs`); the
/// same text as `strftime('%Y-%m-%dT%H:%M:%S', ms / 1000, 'unixepoch') ||
/// printf('.%03dZ', ms % 1000)` at a tenth of the instructions.
fn sqlite_ts(col: &str) -> String {
    format!("iso_ms({col})")
}

fn pg_ts(col: &str) -> String {
    format!(
        "(to_char(to_timestamp({col} / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS') \
         || '.' || lpad(({col} % 1000)::text, 3, '0') || 'Z')"
    )
}

fn sqlite_list_sql(v: Variant) -> String {
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
        last_update = sqlite_ts("s.last_update_ms"),
        created = sqlite_ts("c.created_ms"),
        reply_created = sqlite_ts("r.created_ms"),
        snapshots = snapshot_filter(v, |i| format!("?{i}")),
    )
}

/// What differs between the dialects in the concatenating statement.
struct Concat {
    /// A JSON string literal of a text expression.
    quote: fn(&str) -> String,
    /// An integer expression as text.
    int: fn(&str) -> String,
    ts: fn(&str) -> String,
    /// `string_agg` / `group_concat` of `expr` with commas, in `order`.
    agg: fn(&str, &str) -> String,
    param: fn(usize) -> String,
}

const PG_CONCAT: Concat = Concat {
    quote: |e| format!("to_json({e})::text"),
    int: |e| format!("{e}::text"),
    ts: |e| pg_ts(e),
    agg: |e, order| format!("string_agg({e}, ',' ORDER BY {order})"),
    param: |i| format!("${i}"),
};

/// SQLite's text-assembling variant: each object is one `printf` into one
/// buffer (strings through `json_quote`), arrays are `group_concat`. Same
/// bytes as `json_object`, without building and re-parsing JSON values
/// between the levels (see BENCHMARKS.md for the instruction counts).
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
fn sqlite_printf_list_sql(v: Variant) -> String {
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
        snapshots = snapshot_filter(v, |i| format!("?{i}")),
    )
}

/// PostgreSQL's listing as one concatenated JSON text per block.
fn concat_list_sql(v: Variant, d: &Concat) -> String {
    let (q, int, ts, p) = (d.quote, d.int, d.ts, d.param);
    let reply = format!(
        "'{{\"commentId\":' || {} || ',\"displayName\":' || {} || ',\"title\":' || {} \
         || ',\"remarks\":' || {} || ',\"createdDate\":\"' || {} || '\"}}'",
        int("r.id"),
        q("COALESCE(ru.display_name, '')"),
        q("r.title"),
        q("r.remarks"),
        ts("r.created_ms")
    );
    let comment = format!(
        "'{{\"commentId\":' || {} || ',\"title\":' || {} || ',\"rating\":' || {} \
         || ',\"remarks\":' || {} || ',\"createdDate\":\"' || {} || '\"' \
         || ',\"reply\":[' || COALESCE((SELECT {} FROM comments r LEFT JOIN comments_users ru \
            ON ru.id = r.user_id WHERE r.parent_id = t.id), '') || ']}}'",
        int("t.id"),
        q("t.title"),
        int("t.rating"),
        q("t.remarks"),
        ts("t.created_ms"),
        (d.agg)(&reply, "r.id")
    );
    format!(
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
                      ORDER BY c.created_ms DESC, c.id DESC LIMIT {p5} OFFSET {p6}) AS t), '')
            || ']}}', s.last_update_ms, s.user_id
         FROM ({snapshots}) AS s
         ORDER BY s.last_update_ms DESC, s.user_id DESC",
        name = q("s.display_name"),
        course = int("s.course_id"),
        kind = q("s.comment_type"),
        title = q("s.last_title"),
        rating = int("s.last_rating"),
        remarks = q("s.last_remarks"),
        last_update = ts("s.last_update_ms"),
        last_id = int("s.last_comment_id"),
        thread = (d.agg)(&comment, "t.created_ms DESC, t.id DESC"),
        p5 = p(5),
        p6 = p(6),
        snapshots = snapshot_filter(v, d.param),
    )
}

static SQLITE_LIST: LazyLock<Vec<String>> =
    LazyLock::new(|| VARIANTS.iter().map(|v| sqlite_list_sql(*v)).collect());
static SQLITE_PRINTF_LIST: LazyLock<Vec<String>> = LazyLock::new(|| {
    VARIANTS
        .iter()
        .map(|v| sqlite_printf_list_sql(*v))
        .collect()
});
static PG_LIST: LazyLock<Vec<String>> = LazyLock::new(|| {
    VARIANTS
        .iter()
        .map(|v| concat_list_sql(*v, &PG_CONCAT))
        .collect()
});

/// How SQLite builds the listing's JSON (PostgreSQL always concatenates).
/// Both give the same bytes; `--comments-json` picks one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum JsonBuild {
    /// `json_object` / `json_group_array`.
    Functions,
    /// Text assembled by `printf` and `json_quote`, arrays by `group_concat`
    /// (PostgreSQL concatenates too): the faster of the two here, and the
    /// default. See `sqlite_printf_list_sql`.
    Concat,
}

/// Joins blocks into the page's array as they come.
#[derive(Default)]
struct PageBuilder {
    body: Vec<u8>,
    blocks: usize,
    last: Option<Cursor>,
}

impl PageBuilder {
    fn push(&mut self, json: &[u8], last_update_ms: i64, user_id: i64) {
        if self.blocks == 0 {
            self.body.reserve(json.len() * 8 + 2);
            self.body.push(b'[');
        } else {
            self.body.push(b',');
        }
        self.body.extend_from_slice(json);
        self.blocks += 1;
        self.last = Some(Cursor {
            last_update_ms,
            user_id,
        });
    }
    fn finish(mut self) -> ListPage {
        if self.blocks == 0 {
            self.body.push(b'[');
        }
        self.body.push(b']');
        ListPage {
            body: self.body,
            blocks: self.blocks,
            last: self.last,
        }
    }
}

/// The listing page for `q`, JSON built by the database.
pub async fn list_page(
    store: &Store,
    q: &ListQuery,
    build: JsonBuild,
) -> Result<ListPage, StoreError> {
    if q.size == 0 {
        return Ok(PageBuilder::default().finish());
    }
    let vi = variant_index(q);
    match store {
        Store::Sqlite(s) => {
            let q = q.clone();
            s.read(move |c| {
                let sql = match build {
                    JsonBuild::Functions => &SQLITE_LIST[vi],
                    JsonBuild::Concat => &SQLITE_PRINTF_LIST[vi],
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
                // Each block's text goes from SQLite's buffer straight into
                // the page (no String per block).
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
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            let stmt = client.prepare_cached(&PG_LIST[vi]).await?;
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
        }
    }
}

// ------------------------------------------------------------------ lookups

pub async fn course(store: &Store, id: i64) -> Result<Option<Course>, StoreError> {
    const SQL_LITE: &str = "SELECT id, provider_id, title FROM comments_courses WHERE id = ?1";
    const SQL_PG: &str = "SELECT id, provider_id, title FROM comments_courses WHERE id = $1";
    match store {
        Store::Sqlite(s) => {
            s.read(move |c| {
                Ok(c.prepare_cached(SQL_LITE)?
                    .query_row([id], |r| {
                        Ok(Course {
                            id: r.get(0)?,
                            provider_id: r.get(1)?,
                            title: r.get(2)?,
                        })
                    })
                    .optional()?)
            })
            .await
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            let stmt = client.prepare_cached(SQL_PG).await?;
            Ok(client.query_opt(&stmt, &[&id]).await?.map(|r| Course {
                id: r.get(0),
                provider_id: r.get(1),
                title: r.get(2),
            }))
        }
    }
}

/// The write version of a course and type (0 before its first comment);
/// page caches compare it (PostgreSQL: shared by every node).
pub async fn version(store: &Store, course_id: i64, kind: CommentType) -> Result<i64, StoreError> {
    let kind = kind.as_str();
    match store {
        Store::Sqlite(s) => {
            s.read(move |c| {
                Ok(c.prepare_cached(
                    "SELECT version FROM comments_ratings WHERE course_id = ?1 AND comment_type = ?2",
                )?
                .query_row(params![course_id, kind], |r| r.get(0))
                .optional()?
                .unwrap_or(0))
            })
            .await
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            let stmt = client
                .prepare_cached("SELECT version FROM comments_ratings WHERE course_id = $1 AND comment_type = $2")
                .await?;
            Ok(client.query_opt(&stmt, &[&course_id, &kind]).await?.map(|r| r.get(0)).unwrap_or(0))
        }
    }
}

fn rating_out(course_id: i64, kind: CommentType, row: Option<[i64; 7]>) -> RatingOut {
    let r = row.unwrap_or([0; 7]);
    let average = if r[0] > 0 {
        (r[1] as f64 / r[0] as f64 * 100.0).round() / 100.0
    } else {
        0.0
    };
    RatingOut {
        course_id,
        rating_type: kind.as_str().to_string(),
        count: r[0],
        average,
        stars: [r[2], r[3], r[4], r[5], r[6]],
    }
}

/// Rating aggregates; `None` when the course does not exist.
pub async fn rating(
    store: &Store,
    course_id: i64,
    kind: CommentType,
) -> Result<Option<RatingOut>, StoreError> {
    let k = kind.as_str();
    let (exists, row) = match store {
        Store::Sqlite(s) => {
            s.read(move |c| {
                let exists = c
                    .prepare_cached("SELECT 1 FROM comments_courses WHERE id = ?1")?
                    .query_row([course_id], |_| Ok(()))
                    .optional()?
                    .is_some();
                let row = c
                    .prepare_cached(
                        "SELECT count, sum, stars1, stars2, stars3, stars4, stars5 FROM comments_ratings
                         WHERE course_id = ?1 AND comment_type = ?2",
                    )?
                    .query_row(params![course_id, k], |r| {
                        Ok([r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?])
                    })
                    .optional()?;
                Ok((exists, row))
            })
            .await?
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            let row = client
                .query_opt(
                    "SELECT r.count, r.sum, r.stars1, r.stars2, r.stars3, r.stars4, r.stars5
                     FROM comments_courses co LEFT JOIN comments_ratings r
                       ON r.course_id = co.id AND r.comment_type = $2
                     WHERE co.id = $1",
                    &[&course_id, &k],
                )
                .await?;
            match row {
                None => (false, None),
                Some(r) => {
                    let count: Option<i64> = r.get(0);
                    (
                        true,
                        count.map(|_| {
                            [r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5), r.get(6)]
                        }),
                    )
                }
            }
        }
    };
    Ok(exists.then(|| rating_out(course_id, kind, row)))
}

// ------------------------------------------------------------------- writes

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
                    let row = t
                        .query_opt(
                            "SELECT (SELECT 1 FROM comments_courses WHERE id = $1),
                                    (SELECT display_name FROM comments_users WHERE id = $2)",
                            &[&new.course_id, &new.user_id],
                        )
                        .await?;
                    let (course, name): (Option<i32>, Option<String>) =
                        row.map(|r| (r.get(0), r.get(1))).unwrap_or((None, None));
                    if course.is_none() {
                        return Ok(PostOutcome::CourseNotFound);
                    }
                    let Some(display_name) = name else {
                        return Ok(PostOutcome::UnknownUser);
                    };
                    let id: i64 = t
                        .query_one(
                            "INSERT INTO comments (course_id, user_id, comment_type, parent_id, rating, title,
                                remarks, created_ms) VALUES ($1, $2, $3, NULL, $4, $5, $6, $7) RETURNING id",
                            &[&new.course_id, &new.user_id, &kind, &rating, &new.title, &new.remarks, &new.created_ms],
                        )
                        .await?
                        .get(0);
                    t.execute(
                        PG_SNAPSHOT_UPSERT.as_str(),
                        &[&new.course_id, &kind, &new.user_id, &id, &new.title, &rating, &new.remarks, &new.created_ms, &display_name],
                    )
                    .await?;
                    let st = stars(rating);
                    t.execute(
                        PG_RATING_UPSERT,
                        &[&new.course_id, &kind, &1i64, &(rating as i64), &st[0], &st[1], &st[2], &st[3], &st[4]],
                    )
                    .await?;
                    let out = comment_out(&new, id, display_name);
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
                    let target = t.query_opt(TARGET_PG, &[&r.comment_id]).await?.map(|row| Target {
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
                    let inserted = t
                        .query_opt(
                            "INSERT INTO comments (course_id, user_id, comment_type, parent_id, rating, title,
                                remarks, created_ms) VALUES ($1, $2, $3, $4, NULL, $5, $6, $7)
                             ON CONFLICT (parent_id) WHERE parent_id IS NOT NULL DO NOTHING RETURNING id",
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
                            let row = t
                                .query_one(
                                    "UPDATE comments SET title = $2, remarks = $3, edited_ms = $4
                                     WHERE parent_id = $1 RETURNING id, created_ms",
                                    &[&r.comment_id, &r.title, &r.remarks, &r.at_ms],
                                )
                                .await?;
                            reply_out(&r, &target, kind, row.get(0), row.get(1), true)
                        }
                    };
                    t.execute(PG_VERSION_BUMP, &[&target.course_id, &kind.as_str()]).await?;
                    let edited = out.edited_date.is_some();
                    tx.append(reply_event(&out, edited));
                    Ok(if edited { ReplyOutcome::Edited(out) } else { ReplyOutcome::Created(out) })
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
        crate::store::migrate::apply_sqlite(&mut conn).unwrap();
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

    #[test]
    fn every_sqlite_listing_statement_prepares() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::store::migrate::apply_sqlite(&mut conn).unwrap();
        crate::store::sqlite::register_functions(&conn).unwrap();
        for v in VARIANTS {
            for sql in [sqlite_list_sql(v), sqlite_printf_list_sql(v)] {
                if let Err(e) = conn.prepare(&sql) {
                    panic!("{e}: {sql}");
                }
            }
        }
    }

    #[test]
    fn listing_statements_number_their_parameters() {
        for v in VARIANTS {
            let n = 6 + v.user as usize + 2 * v.cursor as usize;
            for (sql, mark) in [
                (sqlite_list_sql(v), "?"),
                (sqlite_printf_list_sql(v), "?"),
                (concat_list_sql(v, &PG_CONCAT), "$"),
            ] {
                assert!(
                    sql.contains(&format!("{mark}{n}"))
                        && !sql.contains(&format!("{mark}{}", n + 1)),
                    "{sql}"
                );
            }
        }
    }
}
