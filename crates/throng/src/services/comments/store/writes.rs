//! The rules of the writes, the same in both dialects: what a write finds
//! and checks before it changes anything, how a user's last rating moves
//! the course's aggregates, what it answers and the event it appends. The
//! dialects run them in their own statements (`sqlite.rs`, `postgres.rs`).

use super::super::model::{
    self, CommentEdit, CommentType, Deleter, NewComment, NewReply, EVENT_COMMENT_DELETED,
    EVENT_COMMENT_EDITED, EVENT_COMMENT_POSTED, EVENT_REPLY_DELETED, EVENT_REPLY_EDITED,
    EVENT_REPLY_POSTED,
};
use super::{Columns, CommentOut, DeleteOutcome, EditOutcome, ReplyOutcome};
use crate::store::{NewEvent, StoreError};

pub(super) fn posted_event(c: &CommentOut) -> NewEvent {
    NewEvent::json(
        model::stream_of(c.course_id),
        EVENT_COMMENT_POSTED,
        &serde_json::json!({
            "commentId": c.comment_id, "courseId": c.course_id, "userId": c.user_id,
            "commentType": c.comment_type, "rating": c.rating, "createdDate": c.created_date,
        }),
    )
}

pub(super) fn reply_event(r: &CommentOut, edited: bool) -> NewEvent {
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

/// A user's last rating before a comment: (rating, time, comment id).
pub(super) type LastSeen = (i32, i64, i64);

/// The user's last rating after a new comment stamped `(created_ms, id)`:
/// the new one unless the user already has a newer comment.
pub(super) fn last_after_post(old: Option<LastSeen>, created_ms: i64, id: i64, rating: i32) -> i32 {
    match old {
        Some((r, ms, last_id)) if (ms, last_id) > (created_ms, id) => r,
        _ => rating,
    }
}

pub(super) fn comment_out(new: &NewComment, id: i64, display_name: String) -> CommentOut {
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

/// What the reply checks need to know about the target comment.
pub(super) struct Target {
    pub course_id: i64,
    pub comment_type: String,
    pub parent_id: Option<i64>,
    pub provider_id: Option<i64>,
    pub provider_name: Option<String>,
}

pub(super) fn check_target(
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

/// A row of [`super::sql::TARGET`].
pub(super) fn target_row(r: &impl Columns) -> Result<Target, StoreError> {
    Ok(Target {
        course_id: r.col(0)?,
        comment_type: r.col(1)?,
        parent_id: r.col(2)?,
        provider_id: r.col(3)?,
        provider_name: r.col(4)?,
    })
}

pub(super) fn reply_out(
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

/// A comment as an edit or a delete finds it.
#[derive(Clone, Debug)]
pub(super) struct Found {
    pub course_id: i64,
    pub user_id: i64,
    pub comment_type: String,
    pub parent_id: Option<i64>,
    pub rating: Option<i32>,
    pub title: String,
    pub remarks: String,
    pub created_ms: i64,
    pub display_name: Option<String>,
}

/// A row of [`super::sql::FIND`].
pub(super) fn found_row(r: &impl Columns) -> Result<Found, StoreError> {
    Ok(Found {
        course_id: r.col(0)?,
        user_id: r.col(1)?,
        comment_type: r.col(2)?,
        parent_id: r.col(3)?,
        rating: r.col(4)?,
        title: r.col(5)?,
        remarks: r.col(6)?,
        created_ms: r.col(7)?,
        display_name: r.col(8)?,
    })
}

/// The review an edit applies to, checked: it exists, is a review (not a
/// reply) and is the caller's.
pub(super) fn check_edit(
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
pub(super) fn edited_out(f: &Found, e: &CommentEdit, kind: CommentType) -> CommentOut {
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

pub(super) fn edited_event(c: &CommentOut) -> NewEvent {
    NewEvent::json(
        model::stream_of(c.course_id),
        EVENT_COMMENT_EDITED,
        &serde_json::json!({
            "commentId": c.comment_id, "courseId": c.course_id, "userId": c.user_id,
            "commentType": c.comment_type, "rating": c.rating, "at": c.edited_date,
        }),
    )
}

/// What a delete removes, checked: a review by its author (a user token),
/// or a reply by its provider (a provider token).
pub(super) fn check_delete(
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

pub(super) fn deleted_event(
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

#[cfg(test)]
mod tests {
    use rusqlite::{params, Connection};

    use super::super::sql::SNAPSHOT_UPSERT;
    use super::*;

    /// A comment stamped earlier can commit later: it counts in the thread
    /// but does not become the user's last comment; a newer one does.
    #[test]
    fn snapshot_upsert_counts_every_comment_and_keeps_the_newest_last() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::store::migrate::apply_sqlite(&mut conn, &crate::services::migrations()).unwrap();
        let upsert = |id: i64, title: &str, at_ms: i64| {
            conn.execute(
                SNAPSHOT_UPSERT.as_str(),
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
                SNAPSHOT_UPSERT.as_str(),
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
