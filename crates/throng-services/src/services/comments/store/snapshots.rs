//! A user's snapshot on a course (first and last comment, the thread's
//! comment count) and the course's rating aggregates, which a write moves
//! by the change of the user's last rating: a course counts each user
//! once, with their last rating (the write-up's `LastRating`).
//!
//! How a write learns the rating it replaces depends on how the store's
//! writes are made ([`SnapshotWrites`], chosen once from
//! [`Store::writers`](crate::store::Store::writers)): with one writer
//! process a write reads it and then writes; with shared writers it is read
//! by the statement that changes the snapshot, under the course's lock.

use std::sync::LazyLock;

use super::super::model::NewComment;
use crate::store::{Columns, Param, Sql, StoreError, Tx, Writers};

/// The designs of a snapshot's change that differ by how the store's
/// writes are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SnapshotWrites {
    /// One writer process applies the commands one after another (SQLite),
    /// so nothing changes a snapshot between a command's statements: a
    /// write reads the user's last rating (a post, in its lookup of the
    /// course and the user: no statement of its own), then writes.
    ReadThenWrite,
    /// Other nodes write too, and a batch's commands run pipelined in one
    /// transaction (PostgreSQL), so a read and a write of the same row in
    /// two statements could let another command change it in between.
    /// Every write that changes a course's snapshots or aggregates first
    /// locks the course's aggregates row ([`VERSION_BUMP`]) and holds it to
    /// its commit, and reads a user's old rating in the very statement that
    /// changes their snapshot ([`SNAPSHOT_UPSERT_DELTA`],
    /// [`SNAPSHOT_REBUILD_DELTA`], [`SNAPSHOT_DELETE_DELTA`]): PostgreSQL's
    /// data-modifying `WITH`, which SQLite lacks.
    LockedReadInTheWrite,
}

/// What a post finds before it writes.
pub(super) struct PostLookup {
    pub course_exists: bool,
    pub display_name: Option<String>,
    /// The user's last comment on the course, where the lookup reads it
    /// ([`SnapshotWrites::ReadThenWrite`]).
    pub last: Option<LastSeen>,
}

/// A user's last rating before a comment: (rating, time, comment id).
pub(super) type LastSeen = (i32, i64, i64);

/// The course, the user's name and their last comment on the course
/// ([`SnapshotWrites::ReadThenWrite`]).
static POST_LOOKUP_LAST: Sql = Sql::new(
    "SELECT (SELECT 1 FROM comments_courses WHERE id = ?1),
        (SELECT display_name FROM comments_users WHERE id = ?2),
        s.last_rating, s.last_update_ms, s.last_comment_id
     FROM (SELECT 1) AS one LEFT JOIN comments_snapshots s
       ON s.course_id = ?1 AND s.comment_type = ?3 AND s.user_id = ?2",
);

/// The course and the user's name (their old rating is read by
/// [`SNAPSHOT_UPSERT_DELTA`]).
static POST_LOOKUP: Sql = Sql::new(
    "SELECT (SELECT 1 FROM comments_courses WHERE id = ?1),
        (SELECT display_name FROM comments_users WHERE id = ?2)",
);

/// A user's last rating on a course, read before a write changes it
/// ([`SnapshotWrites::ReadThenWrite`]).
pub(super) static SNAPSHOT_LAST: Sql = Sql::new(
    "SELECT last_rating FROM comments_snapshots
     WHERE course_id = ?1 AND comment_type = ?2 AND user_id = ?3",
);

/// Adds a rating delta to a course and type's aggregates and bumps its
/// version.
static RATING_UPSERT: Sql = Sql::new(
    "INSERT INTO comments_ratings (course_id, comment_type, count, sum,
        stars1, stars2, stars3, stars4, stars5, version)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 1)
     ON CONFLICT (course_id, comment_type) DO UPDATE SET
        count = comments_ratings.count + excluded.count, sum = comments_ratings.sum + excluded.sum,
        stars1 = comments_ratings.stars1 + excluded.stars1, stars2 = comments_ratings.stars2 + excluded.stars2,
        stars3 = comments_ratings.stars3 + excluded.stars3, stars4 = comments_ratings.stars4 + excluded.stars4,
        stars5 = comments_ratings.stars5 + excluded.stars5, version = comments_ratings.version + 1",
);

/// Bumps the version of a course and type without changing its ratings;
/// with shared writers, the lock on the course's aggregates row.
pub(super) static VERSION_BUMP: Sql = Sql::new(
    "INSERT INTO comments_ratings (course_id, comment_type, count, sum,
        stars1, stars2, stars3, stars4, stars5, version) VALUES (?1, ?2, 0, 0, 0, 0, 0, 0, 0, 1)
     ON CONFLICT (course_id, comment_type) DO UPDATE SET version = comments_ratings.version + 1",
);

/// The snapshot upsert's text; parameters: course, type, user, comment id,
/// title, rating, remarks, created ms, display name.
/// "Last" moves forward only in the thread's own order (created time,
/// then id): a comment stamped earlier can commit later (it waited in the
/// writer's queue), and must not replace a newer one as the user's last
/// comment. The thread's comment count grows with every comment, in or
/// out of order (every SET expression reads the row as it was before
/// this update).
fn snapshot_upsert_text() -> String {
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
    let values: Vec<String> = [1, 2, 3, 4, 4, 5, 6, 7, 8, 9]
        .map(|i| format!("?{i}"))
        .into();
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

/// The snapshot upsert ([`snapshot_upsert_text`]).
pub(super) static SNAPSHOT_UPSERT: LazyLock<Sql> =
    LazyLock::new(|| Sql::owned(snapshot_upsert_text()));

/// A user's old last rating on a course, read in the statement that
/// changes their snapshot: the snapshot upserts, rebuild and delete take
/// `old`'s parameters first (course, type, user).
const OLD_RATING: &str = "WITH old AS (SELECT last_rating FROM comments_snapshots
    WHERE course_id = ?1 AND comment_type = ?2 AND user_id = ?3)";

/// The snapshot upsert with the user's last rating before it and after it,
/// in one statement ([`SnapshotWrites::LockedReadInTheWrite`]): a batch's
/// commands run pipelined in one transaction, so a read and a write of the
/// same snapshot in two statements could let another command of the batch
/// change it in between; one statement cannot be split so. Other writers'
/// transactions cannot change the course's snapshots meanwhile: every
/// write that changes them first locks the course's aggregates row
/// ([`VERSION_BUMP`]) and holds it to its commit, so this statement, which
/// starts after that lock, reads what they committed.
/// Answers (old last rating, new last rating).
static SNAPSHOT_UPSERT_DELTA: LazyLock<Sql> = LazyLock::new(|| {
    Sql::owned(format!(
        "{OLD_RATING},
         up AS ({} RETURNING last_rating)
         SELECT (SELECT last_rating FROM old), up.last_rating FROM up",
        snapshot_upsert_text()
    ))
});

/// A user's snapshot on a course, made anew from their listed comments
/// (none when they have none): after a moderator's action, which may list
/// a comment that was not. Parameters: course, type, user.
pub(super) static SNAPSHOT_FROM_COMMENTS: Sql = Sql::new(
    "INSERT INTO comments_snapshots (course_id, comment_type, user_id, first_comment_id,
        last_comment_id, last_title, last_rating, last_remarks, last_update_ms, display_name,
        comment_count, helpful)
     SELECT c.course_id, c.comment_type, c.user_id,
        (SELECT f.id FROM comments f WHERE f.course_id = ?1 AND f.user_id = ?3 AND f.comment_type = ?2 AND f.status = 0 ORDER BY f.created_ms, f.id LIMIT 1),
        c.id, c.title, c.rating, c.remarks, c.created_ms, COALESCE(u.display_name, ''),
        (SELECT count(*) FROM comments f WHERE f.course_id = ?1 AND f.user_id = ?3 AND f.comment_type = ?2 AND f.status = 0),
        (SELECT COALESCE(sum(f.helpful), 0) FROM comments f WHERE f.course_id = ?1 AND f.user_id = ?3 AND f.comment_type = ?2 AND f.status = 0)
     FROM comments c LEFT JOIN comments_users u ON u.id = c.user_id
     WHERE c.course_id = ?1 AND c.user_id = ?3 AND c.comment_type = ?2 AND c.status = 0
     ORDER BY c.created_ms DESC, c.id DESC LIMIT 1
     RETURNING last_rating",
);

/// Rebuilds a user's snapshot on a course from their listed comments (after an
/// edit or a delete); no row changes when the user has no comment left
/// there (then the caller deletes the snapshot). Parameters: course,
/// type, user. Each design adds its `RETURNING`.
const SNAPSHOT_REBUILD_TEXT: &str =
    "UPDATE comments_snapshots SET first_comment_id = t.first_id, last_comment_id = t.id,
            last_title = t.title, last_rating = t.rating, last_remarks = t.remarks,
            last_update_ms = t.created_ms, comment_count = t.n, helpful = t.h
         FROM (SELECT c.id, c.title, c.rating, c.remarks, c.created_ms,
                 (SELECT f.id FROM comments f WHERE f.course_id = c.course_id AND f.user_id = c.user_id AND f.comment_type = c.comment_type AND f.status = 0 ORDER BY f.created_ms, f.id LIMIT 1) AS first_id,
                 (SELECT count(*) FROM comments f WHERE f.course_id = c.course_id AND f.user_id = c.user_id AND f.comment_type = c.comment_type AND f.status = 0) AS n,
                 (SELECT COALESCE(sum(f.helpful), 0) FROM comments f WHERE f.course_id = c.course_id AND f.user_id = c.user_id AND f.comment_type = c.comment_type AND f.status = 0) AS h
               FROM comments c WHERE c.course_id = ?1 AND c.user_id = ?3 AND c.comment_type = ?2 AND c.status = 0
               ORDER BY c.created_ms DESC, c.id DESC LIMIT 1) AS t
         WHERE comments_snapshots.course_id = ?1 AND comments_snapshots.comment_type = ?2
           AND comments_snapshots.user_id = ?3
         ";

/// The rebuild, answering the new last rating
/// ([`SnapshotWrites::ReadThenWrite`]).
static SNAPSHOT_REBUILD: LazyLock<Sql> =
    LazyLock::new(|| Sql::owned(format!("{SNAPSHOT_REBUILD_TEXT}RETURNING last_rating")));

/// The rebuild, answering the new last rating and the one before (read in
/// the same statement, see [`SNAPSHOT_UPSERT_DELTA`]).
static SNAPSHOT_REBUILD_DELTA: LazyLock<Sql> = LazyLock::new(|| {
    Sql::owned(format!(
        "{OLD_RATING} {SNAPSHOT_REBUILD_TEXT}RETURNING last_rating, (SELECT last_rating FROM old)"
    ))
});

/// A user's snapshot on a course.
const SNAPSHOT_DELETE_TEXT: &str =
    "DELETE FROM comments_snapshots WHERE course_id = ?1 AND comment_type = ?2 AND user_id = ?3";
pub(super) static SNAPSHOT_DELETE: Sql = Sql::new(SNAPSHOT_DELETE_TEXT);

/// [`SNAPSHOT_DELETE`], answering the last rating it held.
static SNAPSHOT_DELETE_DELTA: LazyLock<Sql> =
    LazyLock::new(|| Sql::owned(format!("{SNAPSHOT_DELETE_TEXT} RETURNING last_rating")));

impl SnapshotWrites {
    /// The design for a store whose writes are made by `writers`.
    pub fn of(writers: Writers) -> SnapshotWrites {
        match writers {
            Writers::OneProcess => SnapshotWrites::ReadThenWrite,
            Writers::Shared => SnapshotWrites::LockedReadInTheWrite,
        }
    }

    /// The course and the poster's name, and where this design reads it
    /// first, the poster's last comment on the course.
    pub async fn post_lookup(
        self,
        tx: &Tx<'_>,
        new: &NewComment,
    ) -> Result<PostLookup, StoreError> {
        let kind = new.comment_type.as_str();
        let found = match self {
            SnapshotWrites::ReadThenWrite => {
                let params: [&dyn Param; 3] = [&new.course_id, &new.user_id, &kind];
                tx.query_opt(&POST_LOOKUP_LAST, &params, |r| {
                    let last = match r.col::<Option<i32>>(2)? {
                        Some(rating) => Some((rating, r.int(3)?, r.int(4)?)),
                        None => None,
                    };
                    Ok((r.opt_int(0)?, r.col(1)?, last))
                })
                .await?
            }
            SnapshotWrites::LockedReadInTheWrite => {
                tx.query_opt(&POST_LOOKUP, &[&new.course_id, &new.user_id], |r| {
                    Ok((r.opt_int(0)?, r.col(1)?, None))
                })
                .await?
            }
        };
        let (course, display_name, last) = found.unwrap_or((None, None, None));
        Ok(PostLookup {
            course_exists: course.is_some(),
            display_name,
            last,
        })
    }

    /// Before a write changes a course's snapshots: with shared writers,
    /// locks the course's aggregates row to the commit (bumping its
    /// version).
    pub async fn lock_course(
        self,
        tx: &Tx<'_>,
        course_id: i64,
        kind: &str,
    ) -> Result<(), StoreError> {
        if self == SnapshotWrites::LockedReadInTheWrite {
            tx.execute(&VERSION_BUMP, &[&course_id, &kind]).await?;
        }
        Ok(())
    }

    /// Files a new comment `id` of `new` in the poster's snapshot; their
    /// last rating before (from `lookup` or the statement) and after it.
    pub async fn upsert_snapshot(
        self,
        tx: &Tx<'_>,
        new: &NewComment,
        id: i64,
        display_name: &str,
        lookup: Option<LastSeen>,
    ) -> Result<(Option<i32>, i32), StoreError> {
        let kind = new.comment_type.as_str();
        let rating = new.rating.get();
        let params: [&dyn Param; 9] = [
            &new.course_id,
            &kind,
            &new.user_id,
            &id,
            &new.title,
            &rating,
            &new.remarks,
            &new.created_ms,
            &display_name,
        ];
        match self {
            SnapshotWrites::ReadThenWrite => {
                tx.execute(&SNAPSHOT_UPSERT, &params).await?;
                let last = last_after_post(lookup, new.created_ms, id, rating);
                Ok((lookup.map(|l| l.0), last))
            }
            SnapshotWrites::LockedReadInTheWrite => {
                tx.query_one(&SNAPSHOT_UPSERT_DELTA, &params, |r| {
                    Ok((r.col(0)?, r.col(1)?))
                })
                .await
            }
        }
    }

    /// Before an edit or a delete changes the user's comments: their last
    /// rating, where this design reads it first (else `None`, and
    /// [`SnapshotWrites::rebuild_snapshot`] reads it).
    pub async fn rating_before(
        self,
        tx: &Tx<'_>,
        course_id: i64,
        kind: &str,
        user_id: i64,
    ) -> Result<Option<i32>, StoreError> {
        match self {
            SnapshotWrites::ReadThenWrite => {
                tx.query_opt(&SNAPSHOT_LAST, &[&course_id, &kind, &user_id], |r| r.col(0))
                    .await
            }
            SnapshotWrites::LockedReadInTheWrite => Ok(None),
        }
    }

    /// Rebuilds the user's snapshot from their comments, or deletes it when
    /// none is left; their last rating before (`before`, or read by the
    /// statement that changes the snapshot) and after it (`None`: deleted).
    pub async fn rebuild_snapshot(
        self,
        tx: &Tx<'_>,
        course_id: i64,
        kind: &str,
        user_id: i64,
        before: Option<i32>,
    ) -> Result<(Option<i32>, Option<i32>), StoreError> {
        let params: [&dyn Param; 3] = [&course_id, &kind, &user_id];
        match self {
            SnapshotWrites::ReadThenWrite => {
                let after = tx
                    .query_opt(&SNAPSHOT_REBUILD, &params, |r| r.col(0))
                    .await?;
                if after.is_none() {
                    tx.execute(&SNAPSHOT_DELETE, &params).await?;
                }
                Ok((before, after))
            }
            SnapshotWrites::LockedReadInTheWrite => {
                let rebuilt = tx
                    .query_opt(&SNAPSHOT_REBUILD_DELTA, &params, |r| {
                        Ok((r.col(1)?, r.col(0)?))
                    })
                    .await?;
                match rebuilt {
                    Some((old, new)) => Ok((old, Some(new))),
                    None => {
                        let old = tx
                            .query_opt(&SNAPSHOT_DELETE_DELTA, &params, |r| r.col(0))
                            .await?;
                        Ok((old, None))
                    }
                }
            }
        }
    }
}

/// Makes a user's snapshot on a course anew from their listed comments,
/// after the caller locked the course ([`SnapshotWrites::lock_course`]):
/// their last rating before and after (`None`: no snapshot). Reading
/// first is sound with shared writers too, since every write that changes
/// the course's snapshots holds that lock.
pub(super) async fn resnapshot(
    tx: &Tx<'_>,
    course_id: i64,
    kind: &str,
    user_id: i64,
) -> Result<(Option<i32>, Option<i32>), StoreError> {
    let params: [&dyn Param; 3] = [&course_id, &kind, &user_id];
    let before = tx.query_opt(&SNAPSHOT_LAST, &params, |r| r.col(0)).await?;
    tx.execute(&SNAPSHOT_DELETE, &params).await?;
    let after = tx
        .query_opt(&SNAPSHOT_FROM_COMMENTS, &params, |r| r.col(0))
        .await?;
    Ok((before, after))
}

/// Moves a course and type's aggregates by `d` and bumps its version.
pub(super) async fn apply_delta(
    tx: &Tx<'_>,
    course_id: i64,
    kind: &str,
    d: Delta,
) -> Result<(), StoreError> {
    tx.execute(
        &RATING_UPSERT,
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

/// What a change of one user's last rating on a course (`None`: no rating)
/// does to the course's aggregates. A course counts each user once, with
/// their last rating (the write-up's `LastRating`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Delta {
    pub count: i64,
    pub sum: i64,
    pub stars: [i64; 5],
}

pub(super) fn delta(old: Option<i32>, new: Option<i32>) -> Delta {
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

/// The user's last rating after a new comment stamped `(created_ms, id)`:
/// the new one unless the user already has a newer comment.
fn last_after_post(old: Option<LastSeen>, created_ms: i64, id: i64, rating: i32) -> i32 {
    match old {
        Some((r, ms, last_id)) if (ms, last_id) > (created_ms, id) => r,
        _ => rating,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Store, StoreLimits, StoreUrl};

    /// An SQLite store with every service's tables, in `dir`.
    async fn store_in(dir: &tempfile::TempDir) -> Store {
        let url = StoreUrl::Sqlite(dir.path().join("t.db"));
        let migrations = crate::services::migrations();
        Store::open_with(&url, StoreLimits::default(), &migrations)
            .await
            .unwrap()
    }

    async fn run(store: &Store, sql: &'static str) {
        store
            .write(move |tx| {
                Box::pin(async move {
                    let sql = Sql::owned(sql.to_string());
                    tx.batch(&sql).await
                })
            })
            .await
            .unwrap();
    }

    /// A comment stamped earlier can commit later: it counts in the thread
    /// but does not become the user's last comment; a newer one does.
    #[tokio::test]
    async fn snapshot_upsert_counts_every_comment_and_keeps_the_newest_last() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(&dir).await;
        static SNAPSHOT: Sql = Sql::new(
            "SELECT comment_count, first_comment_id, last_comment_id, last_title, last_update_ms
             FROM comments_snapshots WHERE course_id = 1 AND user_id = 5",
        );
        let upsert = |id: i64, title: &'static str, at_ms: i64| {
            let store = store.clone();
            async move {
                store
                    .write(move |tx| {
                        Box::pin(async move {
                            let params: [&dyn Param; 9] =
                                [&1, &"Course", &5, &id, &title, &4, &"r", &at_ms, &"N"];
                            tx.execute(&SNAPSHOT_UPSERT, &params).await
                        })
                    })
                    .await
                    .unwrap();
                store
                    .read(|c| {
                        Box::pin(c.query_one(&SNAPSHOT, &[], |r| {
                            Ok((r.int(0)?, r.int(1)?, r.int(2)?, r.text(3)?, r.int(4)?))
                        }))
                    })
                    .await
                    .unwrap()
            }
        };
        assert_eq!(
            upsert(10, "first", 200).await,
            (1, 10, 10, "first".into(), 200)
        );
        assert_eq!(
            upsert(11, "late", 100).await,
            (2, 10, 10, "first".into(), 200)
        );
        assert_eq!(
            upsert(12, "newest", 300).await,
            (3, 10, 12, "newest".into(), 300)
        );
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
    #[tokio::test]
    async fn the_migration_rebuilds_aggregates_per_user() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(&dir).await;
        for (user, last) in [(5i64, 4i32), (6, 2)] {
            store
                .write(move |tx| {
                    Box::pin(async move {
                        let params: [&dyn Param; 9] =
                            [&1, &"Course", &user, &user, &"t", &last, &"r", &100, &"N"];
                        tx.execute(&SNAPSHOT_UPSERT, &params).await
                    })
                })
                .await
                .unwrap();
        }
        // As an older store kept it: user 5 posted twice (5 stars, then 4).
        run(
            &store,
            "INSERT INTO comments_ratings VALUES (1, 'Course', 3, 11, 0, 1, 0, 1, 1, 7)",
        )
        .await;
        run(
            &store,
            include_str!("../migrations/sqlite/0030_comments_rating_per_user.sql"),
        )
        .await;
        static RATINGS: Sql = Sql::new(
            "SELECT count, sum, stars1, stars2, stars3, stars4, stars5, version FROM comments_ratings",
        );
        let row = store
            .read(|c| {
                Box::pin(c.query_one(&RATINGS, &[], |r| {
                    (0..8).map(|i| r.int(i)).collect::<Result<Vec<_>, _>>()
                }))
            })
            .await
            .unwrap();
        assert_eq!(row, [2, 6, 0, 1, 0, 1, 0, 8]);
    }
}
