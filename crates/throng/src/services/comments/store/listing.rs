//! The listing: its statements (SQLite's two JSON builds and PostgreSQL's
//! concatenation, four filter variants each) and `list_page`, which joins
//! the blocks the database prints into one page.

use std::sync::LazyLock;

use tokio_postgres::types::ToSql;

use super::super::model::{Cursor, ListQuery};
use super::{JsonBuild, ListPage};
use crate::store::{Store, StoreError};

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

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::*;

    #[test]
    fn every_sqlite_listing_statement_prepares() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::store::migrate::apply_sqlite(&mut conn, &crate::services::migrations()).unwrap();
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
