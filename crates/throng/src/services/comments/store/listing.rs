//! What the listing's statements share: their variants (which optional
//! filters they have) and the snapshots they page through
//! ([`snapshot_filter`]); and [`PageBuilder`], which joins the blocks the
//! database prints into one page. Each dialect builds the JSON in its own
//! file (`sqlite.rs`: two builds; `postgres.rs`: concatenation).

use super::super::model::{Cursor, ListQuery};
use super::ListPage;

/// Which optional filters a listing statement has.
#[derive(Clone, Copy)]
pub(super) struct Variant {
    pub user: bool,
    pub cursor: bool,
}

pub(super) const VARIANTS: [Variant; 4] = [
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

pub(super) fn variant_index(q: &ListQuery) -> usize {
    q.user_id.is_some() as usize + 2 * q.after.is_some() as usize
}

/// The page of snapshots a listing prints. Parameters, numbered in this
/// order in both dialects: course, type, size, skip, sizeThread,
/// skipThread, [user], [cursor ms, cursor user].
pub(super) fn snapshot_filter(v: Variant) -> String {
    let mut sql = String::from(
        "SELECT course_id, comment_type, user_id, display_name, last_title, last_rating, last_remarks, \
         last_update_ms, last_comment_id, comment_count FROM comments_snapshots \
         WHERE course_id = ?1 AND comment_type = ?2",
    );
    let mut next = 7;
    if v.user {
        sql.push_str(&format!(" AND user_id = ?{next}"));
        next += 1;
    }
    if v.cursor {
        sql.push_str(&format!(
            " AND (last_update_ms, user_id) < (?{next}, ?{})",
            next + 1
        ));
    }
    sql.push_str(" ORDER BY last_update_ms DESC, user_id DESC LIMIT ?3 OFFSET ?4");
    sql
}

/// Joins blocks into the page's array as they come.
#[derive(Default)]
pub(super) struct PageBuilder {
    body: Vec<u8>,
    blocks: usize,
    last: Option<Cursor>,
}

impl PageBuilder {
    pub fn push(&mut self, json: &[u8], last_update_ms: i64, user_id: i64) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_statements_number_their_parameters() {
        for v in VARIANTS {
            let n = 6 + v.user as usize + 2 * v.cursor as usize;
            for (sql, mark) in [
                (super::super::sqlite::list_sql(v), "?"),
                (super::super::sqlite::printf_list_sql(v), "?"),
                (super::super::postgres::list_sql(v), "$"),
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
