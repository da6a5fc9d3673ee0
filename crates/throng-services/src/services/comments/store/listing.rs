//! The listing: its statements, one per optional filter ([`Variant`]), each
//! written per dialect where the JSON is built (SQLite: `printf`, the
//! default, or the JSON functions, by `--comments-json`; PostgreSQL:
//! concatenation), over the same page of snapshots ([`snapshot_filter`]);
//! and [`PageBuilder`], which joins the blocks the database prints into
//! one page.

use std::sync::LazyLock;

use super::super::model::{Cursor, ListQuery, Sort};
use super::{CommentsStore, JsonBuild, ListPage};
use crate::store::{pg_placeholders, Columns, Param, Sql, StoreError};

/// The listing statements by build (`--comments-json`, SQLite's choice;
/// PostgreSQL concatenates for both) and [`variant_index`].
static LIST: LazyLock<[[Sql; VARIANTS_COUNT]; 2]> = LazyLock::new(|| {
    [JsonBuild::Functions, JsonBuild::Concat].map(|build| {
        variants().map(|v| {
            let sqlite = match build {
                JsonBuild::Functions => sqlite_functions_sql(v),
                JsonBuild::Concat => sqlite_printf_sql(v),
            };
            Sql::owned_per_dialect(sqlite, pg_sql(v))
        })
    })
});

impl CommentsStore {
    /// The listing page for `q`, its JSON built by the database (by
    /// `build` on SQLite). An empty page, without a read, when `q.size` is
    /// 0.
    pub async fn list_page(&self, q: &ListQuery, build: JsonBuild) -> Result<ListPage, StoreError> {
        if q.size == 0 {
            return Ok(PageBuilder::default().finish());
        }
        let by_build = match build {
            JsonBuild::Functions => &LIST[0],
            JsonBuild::Concat => &LIST[1],
        };
        let sql: &'static Sql = &by_build[variant_index(q)];
        let q = q.clone();
        self.store
            .read(move |c| {
                Box::pin(async move {
                    let kind = q.comment_type.as_str();
                    let mut params: Vec<&dyn Param> = vec![
                        &q.course_id,
                        &kind,
                        &q.size,
                        &q.skip,
                        &q.size_thread,
                        &q.skip_thread,
                    ];
                    if let Some(u) = &q.user_id {
                        params.push(u);
                    }
                    if let Some(cur) = &q.after {
                        if q.sort.keyed() {
                            params.push(&cur.key);
                        }
                        params.push(&cur.last_update_ms);
                        params.push(&cur.user_id);
                    }
                    // Each block's text goes from the driver's row straight
                    // into the page (no String per block).
                    let mut page = PageBuilder {
                        sort: q.sort,
                        ..PageBuilder::default()
                    };
                    c.query(sql, &params, |r| {
                        let key = if q.sort.keyed() { r.int(3)? } else { 0 };
                        page.push(r.text_bytes(0)?, key, r.int(1)?, r.int(2)?);
                        Ok(())
                    })
                    .await?;
                    Ok(page.finish())
                })
            })
            .await
    }
}

/// Which optional filters a listing statement has, and its order.
#[derive(Clone, Copy)]
struct Variant {
    pub user: bool,
    pub cursor: bool,
    pub sort: Sort,
}

const VARIANTS_COUNT: usize = 4 * Sort::ALL.len();

/// Every statement's variant, at [`variant_index`].
fn variants() -> [Variant; VARIANTS_COUNT] {
    std::array::from_fn(|i| Variant {
        user: i & 1 == 1,
        cursor: i & 2 == 2,
        sort: Sort::ALL[i / 4],
    })
}

fn variant_index(q: &ListQuery) -> usize {
    q.user_id.is_some() as usize + 2 * q.after.is_some() as usize + 4 * q.sort.index()
}

/// A snapshot's key in an order before its time (`sort_key`; 0 in the
/// time orders).
fn sort_key(sort: Sort) -> &'static str {
    match sort {
        Sort::Newest | Sort::Oldest => "0",
        Sort::Highest => "last_rating",
        Sort::Lowest => "-last_rating",
        Sort::Helpful => "helpful",
    }
}

/// The order of the snapshots (`prefix`: their table's alias and a dot).
/// Newest first is the table's own order (its primary key), as the
/// write-up's listing; the others sort a course's snapshots.
fn order_by(sort: Sort, prefix: &str) -> String {
    match sort {
        Sort::Newest => format!("{prefix}last_update_ms DESC, {prefix}user_id DESC"),
        Sort::Oldest => format!("{prefix}last_update_ms, {prefix}user_id"),
        _ => format!("{prefix}sort_key DESC, {prefix}last_update_ms DESC, {prefix}user_id DESC"),
    }
}

/// The page of snapshots a listing prints. Parameters, numbered in this
/// order in both dialects: course, type, size, skip, sizeThread,
/// skipThread, [user], [cursor key (keyed orders), cursor ms, cursor user].
fn snapshot_filter(v: Variant) -> String {
    let key = sort_key(v.sort);
    let mut sql = format!(
        "SELECT course_id, comment_type, user_id, display_name, last_title, last_rating, last_remarks, \
         last_update_ms, last_comment_id, comment_count, helpful, {key} AS sort_key FROM comments_snapshots \
         WHERE course_id = ?1 AND comment_type = ?2",
    );
    let mut next = 7;
    if v.user {
        sql.push_str(&format!(" AND user_id = ?{next}"));
        next += 1;
    }
    if v.cursor {
        match v.sort {
            Sort::Newest => sql.push_str(&format!(
                " AND (last_update_ms, user_id) < (?{next}, ?{})",
                next + 1
            )),
            Sort::Oldest => sql.push_str(&format!(
                " AND (last_update_ms, user_id) > (?{next}, ?{})",
                next + 1
            )),
            _ => sql.push_str(&format!(
                " AND ({key}, last_update_ms, user_id) < (?{next}, ?{}, ?{})",
                next + 1,
                next + 2
            )),
        }
    }
    let order = match v.sort {
        Sort::Newest | Sort::Oldest => order_by(v.sort, ""),
        _ => format!("{key} DESC, last_update_ms DESC, user_id DESC"),
    };
    sql.push_str(&format!(" ORDER BY {order} LIMIT ?3 OFFSET ?4"));
    sql
}

/// Joins blocks into the page's array as they come.
#[derive(Default)]
struct PageBuilder {
    sort: Sort,
    body: Vec<u8>,
    blocks: usize,
    last: Option<Cursor>,
}

impl PageBuilder {
    pub fn push(&mut self, json: &[u8], key: i64, last_update_ms: i64, user_id: i64) {
        if self.blocks == 0 {
            self.body.reserve(json.len() * 8 + 2);
            self.body.push(b'[');
        } else {
            self.body.push(b',');
        }
        self.body.extend_from_slice(json);
        self.blocks += 1;
        self.last = Some(Cursor {
            sort: self.sort,
            key,
            last_update_ms,
            user_id,
        });
    }

    pub fn finish(mut self) -> ListPage {
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

// ------------------------------------------------------------------ SQLite

/// `iso_ms`, the store's own SQL function (`store/sqlite.rs`); the same
/// text as `strftime('%Y-%m-%dT%H:%M:%S', ms / 1000, 'unixepoch') ||
/// printf('.%03dZ', ms % 1000)` at a tenth of the instructions.
fn sqlite_ts(col: &str) -> String {
    format!("iso_ms({col})")
}

/// The listing with `json_object` / `json_group_array`
/// (`--comments-json functions`).
fn sqlite_functions_sql(v: Variant) -> String {
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
                    'helpful', c.helpful,
                    'reply', json((SELECT json_group_array(json_object(
                            'commentId', r.id,
                            'displayName', COALESCE(ru.display_name, ''),
                            'title', r.title,
                            'remarks', r.remarks,
                            'createdDate', {reply_created}))
                        FROM comments r LEFT JOIN comments_users ru ON ru.id = r.user_id
                        WHERE r.parent_id = c.id AND r.status = 0))) AS j
                FROM comments c
                WHERE c.course_id = s.course_id AND c.user_id = s.user_id AND c.comment_type = s.comment_type
                  AND c.status = 0
                ORDER BY c.created_ms DESC, c.id DESC LIMIT ?5 OFFSET ?6) AS t))
         ), s.last_update_ms, s.user_id, s.sort_key
         FROM ({snapshots}) AS s
         ORDER BY {order}",
        last_update = sqlite_ts("s.last_update_ms"),
        created = sqlite_ts("c.created_ms"),
        reply_created = sqlite_ts("r.created_ms"),
        snapshots = snapshot_filter(v),
        order = order_by(v.sort, "s."),
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
fn sqlite_printf_sql(v: Variant) -> String {
    // One reply object (at most one per comment), for the comment `{id}`.
    let reply = |id: &str| {
        format!(
            r#"COALESCE((
                SELECT group_concat(printf('{{"commentId":%d,"displayName":%s,"title":%s,"remarks":%s,"createdDate":"%s"}}',
                    r.id, json_quote(COALESCE(ru.display_name, '')), json_quote(r.title),
                    json_quote(r.remarks), iso_ms(r.created_ms)))
                FROM comments r LEFT JOIN comments_users ru ON ru.id = r.user_id
                WHERE r.parent_id = {id} AND r.status = 0), '')"#
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
                    printf('{{"commentId":%d,"title":%s,"rating":%d,"remarks":%s,"createdDate":"%s","helpful":%d,"reply":[%s]}}',
                        s.last_comment_id, json_quote(s.last_title), s.last_rating, json_quote(s.last_remarks),
                        iso_ms(s.last_update_ms), s.helpful, {snapshot_reply})
                ELSE '' END
            ELSE COALESCE((
                SELECT group_concat(printf('{{"commentId":%d,"title":%s,"rating":%d,"remarks":%s,"createdDate":"%s","helpful":%d,"reply":[%s]}}',
                    t.id, json_quote(t.title), t.rating, json_quote(t.remarks), iso_ms(t.created_ms),
                    t.helpful, {thread_reply}))
                FROM (SELECT c.id, c.title, c.rating, c.remarks, c.created_ms, c.helpful FROM comments c
                      WHERE c.course_id = s.course_id AND c.user_id = s.user_id
                        AND c.comment_type = s.comment_type AND c.status = 0
                      ORDER BY c.created_ms DESC, c.id DESC LIMIT ?5 OFFSET ?6) AS t), '') END),
            s.last_update_ms, s.user_id, s.sort_key
         FROM ({snapshots}) AS s
         ORDER BY {order}"#,
        snapshot_reply = reply("s.last_comment_id"),
        thread_reply = reply("t.id"),
        snapshots = snapshot_filter(v),
        order = order_by(v.sort, "s."),
    )
}

// -------------------------------------------------------------- PostgreSQL

/// PostgreSQL's milliseconds as RFC 3339 text (the same as SQLite's
/// `iso_ms`).
fn pg_ts(col: &str) -> String {
    format!(
        "(to_char(to_timestamp({col} / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS') \
         || '.' || lpad(({col} % 1000)::text, 3, '0') || 'Z')"
    )
}

/// A JSON string literal of a text expression.
fn pg_quote(e: &str) -> String {
    format!("to_json({e})::text")
}

/// An integer expression as text.
fn pg_int(e: &str) -> String {
    format!("{e}::text")
}

/// `expr` joined with commas, in `order`.
fn pg_agg(e: &str, order: &str) -> String {
    format!("string_agg({e}, ',' ORDER BY {order})")
}

/// The listing as one concatenated JSON text per block.
fn pg_sql(v: Variant) -> String {
    let reply = format!(
        "'{{\"commentId\":' || {} || ',\"displayName\":' || {} || ',\"title\":' || {} \
         || ',\"remarks\":' || {} || ',\"createdDate\":\"' || {} || '\"}}'",
        pg_int("r.id"),
        pg_quote("COALESCE(ru.display_name, '')"),
        pg_quote("r.title"),
        pg_quote("r.remarks"),
        pg_ts("r.created_ms")
    );
    let comment = format!(
        "'{{\"commentId\":' || {} || ',\"title\":' || {} || ',\"rating\":' || {} \
         || ',\"remarks\":' || {} || ',\"createdDate\":\"' || {} || '\"' \
         || ',\"helpful\":' || {} \
         || ',\"reply\":[' || COALESCE((SELECT {} FROM comments r LEFT JOIN comments_users ru \
            ON ru.id = r.user_id WHERE r.parent_id = t.id AND r.status = 0), '') || ']}}'",
        pg_int("t.id"),
        pg_quote("t.title"),
        pg_int("t.rating"),
        pg_quote("t.remarks"),
        pg_ts("t.created_ms"),
        pg_int("t.helpful"),
        pg_agg(&reply, "r.id")
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
                FROM (SELECT c.id, c.title, c.rating, c.remarks, c.created_ms, c.helpful FROM comments c
                      WHERE c.course_id = s.course_id AND c.user_id = s.user_id
                        AND c.comment_type = s.comment_type AND c.status = 0
                      ORDER BY c.created_ms DESC, c.id DESC LIMIT ?5 OFFSET ?6) AS t), '')
            || ']}}', s.last_update_ms, s.user_id, s.sort_key
         FROM ({snapshots}) AS s
         ORDER BY {order}",
        name = pg_quote("s.display_name"),
        course = pg_int("s.course_id"),
        kind = pg_quote("s.comment_type"),
        title = pg_quote("s.last_title"),
        rating = pg_int("s.last_rating"),
        remarks = pg_quote("s.last_remarks"),
        last_update = pg_ts("s.last_update_ms"),
        last_id = pg_int("s.last_comment_id"),
        thread = pg_agg(&comment, "t.created_ms DESC, t.id DESC"),
        snapshots = snapshot_filter(v),
        order = order_by(v.sort, "s."),
    ))
}

#[cfg(test)]
mod tests {
    use super::super::super::model::CommentType;
    use super::*;
    use crate::store::{Store, StoreLimits, StoreUrl};

    /// Every statement of both builds runs on SQLite (the API tests read
    /// their pages on both stores).
    #[tokio::test]
    async fn every_listing_statement_runs() {
        let dir = tempfile::tempdir().unwrap();
        let url = StoreUrl::Sqlite(dir.path().join("t.db"));
        let migrations = crate::services::migrations();
        let store = Store::open_with(&url, StoreLimits::default(), &migrations)
            .await
            .unwrap();
        let storage = super::super::open(&store);
        for build in [JsonBuild::Functions, JsonBuild::Concat] {
            for v in variants() {
                let q = ListQuery {
                    sort: v.sort,
                    comment_type: CommentType::Course,
                    course_id: 1,
                    user_id: v.user.then_some(7),
                    skip: 0,
                    size: 10,
                    skip_thread: 0,
                    size_thread: 10,
                    after: v.cursor.then_some(Cursor {
                        sort: v.sort,
                        key: 3,
                        last_update_ms: 1,
                        user_id: 7,
                    }),
                };
                assert_eq!(
                    variant_index(&q),
                    variants()
                        .iter()
                        .position(|w| (w.user, w.cursor, w.sort) == (v.user, v.cursor, v.sort))
                        .unwrap()
                );
                let page = storage.list_page(&q, build).await.unwrap();
                assert_eq!((page.body, page.blocks), (b"[]".to_vec(), 0));
            }
        }
    }

    #[test]
    fn listing_statements_number_their_parameters() {
        for v in variants() {
            let n = 6 + v.user as usize + (2 + v.sort.keyed() as usize) * v.cursor as usize;
            for (sql, mark) in [
                (sqlite_functions_sql(v), "?"),
                (sqlite_printf_sql(v), "?"),
                (pg_sql(v), "$"),
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
