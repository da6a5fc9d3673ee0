//! The writes: a post, an edit, a delete and a provider's reply, each one
//! command of the store's writer, written once. What a write finds and
//! checks before it changes anything, what it answers and the event it
//! appends are the rules below; how it moves the user's snapshot and the
//! course's aggregates is `snapshots.rs`'s (one design per kind of
//! writers).

use super::super::model::{
    self, CommentEdit, CommentType, Deleter, NewComment, NewReply, Status, EVENT_COMMENT_DELETED,
    EVENT_COMMENT_EDITED, EVENT_COMMENT_POSTED, EVENT_REPLY_DELETED, EVENT_REPLY_EDITED,
    EVENT_REPLY_POSTED,
};
use super::snapshots::{apply_delta, delta, SnapshotWrites, VERSION_BUMP};
use super::{
    invalidation_key, CommentOut, CommentsStore, DeleteOutcome, EditOutcome, PostOutcome,
    ReplyOutcome,
};
use crate::store::{Columns, NewEvent, Sql, StoreError, Tx};

/// A comment; its id is the store's (see `Conn::insert_id`: SQLite's
/// text leaves out PostgreSQL's `RETURNING id`).
static POST_INSERT: Sql = Sql::per_dialect(
    "INSERT INTO comments (course_id, user_id, comment_type, parent_id, rating, title, remarks, created_ms)
     VALUES (?1, ?2, ?3, NULL, ?4, ?5, ?6, ?7)",
    "INSERT INTO comments (course_id, user_id, comment_type, parent_id, rating, title, remarks, created_ms)
     VALUES ($1, $2, $3, NULL, $4, $5, $6, $7) RETURNING id",
);

/// A comment held for moderation (?8: why); its id as [`POST_INSERT`]'s.
static HELD_INSERT: Sql = Sql::per_dialect(
    "INSERT INTO comments (course_id, user_id, comment_type, parent_id, rating, title, remarks, created_ms,
        status, moderation_note)
     VALUES (?1, ?2, ?3, NULL, ?4, ?5, ?6, ?7, 1, ?8)",
    "INSERT INTO comments (course_id, user_id, comment_type, parent_id, rating, title, remarks, created_ms,
        status, moderation_note)
     VALUES ($1, $2, $3, NULL, $4, $5, $6, $7, 1, $8) RETURNING id",
);

/// What a post may do on course ?1 by user ?2: whether the course holds
/// new reviews (its own or its provider's pre-moderation), whether the
/// user is banned, and enrolled. No row: no such course.
static POST_GATE: Sql = Sql::new(
    "SELECT co.premoderate, COALESCE(p.premoderate, 0),
        (SELECT 1 FROM comments_users u WHERE u.id = ?2),
        (SELECT u.banned_ms FROM comments_users u WHERE u.id = ?2),
        (SELECT 1 FROM comments_enrolments e WHERE e.course_id = ?1 AND e.user_id = ?2)
     FROM comments_courses co LEFT JOIN comments_providers p ON p.id = co.provider_id
     WHERE co.id = ?1",
);

/// A user's first sign-in: created with the token's name; a known user
/// keeps theirs (display names are copied into snapshots).
pub(super) static SIGN_IN: Sql = Sql::new(
    "INSERT INTO comments_users (id, display_name) VALUES (?1, ?2) ON CONFLICT (id) DO NOTHING",
);

/// A provider's reply to comment ?4, or nothing when the comment has one
/// already (then [`REPLY_EDIT`] edits it); its id as [`POST_INSERT`]'s.
static REPLY_INSERT: Sql = Sql::per_dialect(
    "INSERT INTO comments (course_id, user_id, comment_type, parent_id, rating, title, remarks,
        created_ms) VALUES (?1, ?2, ?3, ?4, NULL, ?5, ?6, ?7)
     ON CONFLICT (parent_id) WHERE parent_id IS NOT NULL DO NOTHING",
    "INSERT INTO comments (course_id, user_id, comment_type, parent_id, rating, title, remarks,
        created_ms) VALUES ($1, $2, $3, $4, NULL, $5, $6, $7)
     ON CONFLICT (parent_id) WHERE parent_id IS NOT NULL DO NOTHING RETURNING id",
);

/// Edits the reply to comment ?1.
static REPLY_EDIT: Sql = Sql::new(
    "UPDATE comments SET title = ?2, remarks = ?3, edited_ms = ?4
     WHERE parent_id = ?1 RETURNING id, created_ms",
);

/// The comment a reply targets, with its course's provider.
static TARGET: Sql = Sql::new(
    "SELECT c.course_id, c.comment_type, c.parent_id, co.provider_id, u.display_name, c.status,
        c.user_id
     FROM comments c LEFT JOIN comments_courses co ON co.id = c.course_id
     LEFT JOIN comments_users u ON u.id = co.provider_id WHERE c.id = ?1",
);

/// The comment an edit or a delete applies to ([`Found`]).
static FIND: Sql = Sql::new(
    "SELECT c.course_id, c.user_id, c.comment_type, c.parent_id, c.rating, c.title,
        c.remarks, c.created_ms, u.display_name, c.status, u.banned_ms
     FROM comments c LEFT JOIN comments_users u ON u.id = c.user_id WHERE c.id = ?1",
);

/// An edit; ?6: why the filter holds the new text (NULL: it passed; a
/// hidden comment stays hidden).
static EDIT: Sql = Sql::new(
    "UPDATE comments SET rating = COALESCE(?2, rating), title = COALESCE(?3, title),
        remarks = COALESCE(?4, remarks), edited_ms = ?5,
        status = CASE WHEN CAST(?6 AS TEXT) IS NOT NULL AND status = 0 THEN 1 ELSE status END,
        moderation_note = CASE WHEN CAST(?6 AS TEXT) IS NOT NULL AND status = 0 THEN CAST(?6 AS TEXT)
            ELSE moderation_note END
     WHERE id = ?1",
);
static DELETE: Sql = Sql::new("DELETE FROM comments WHERE id = ?1");
static DELETE_REPLIES: Sql = Sql::new("DELETE FROM comments WHERE parent_id = ?1");

impl CommentsStore {
    /// Posts a comment: the comment, its snapshot, the aggregates and the
    /// event.
    pub async fn post_comment(&self, new: NewComment) -> Result<PostOutcome, StoreError> {
        let snapshots = self.snapshots;
        self.store
            .write(move |tx| {
                let new = new.clone();
                Box::pin(async move { post(tx, snapshots, &new).await })
            })
            .await
    }

    /// Edits the caller's own review (rating, title, remarks): the comment,
    /// the user's snapshot, the course's aggregates (the user's last rating
    /// may change) and the event.
    pub async fn edit_comment(&self, edit: CommentEdit) -> Result<EditOutcome, StoreError> {
        let snapshots = self.snapshots;
        self.store
            .write(move |tx| {
                let e = edit.clone();
                Box::pin(async move { self::edit(tx, snapshots, &e).await })
            })
            .await
    }

    /// Deletes the caller's own review (with the provider's reply to it: a
    /// reply answers that review alone) or the provider's own reply; the
    /// user's snapshot and the course's aggregates follow (the user's rating
    /// is their last remaining review's, or none), and the event; an
    /// erasure (`Store::write_erasing`).
    pub async fn delete_comment(&self, d: Deleter) -> Result<DeleteOutcome, StoreError> {
        let snapshots = self.snapshots;
        // No copy of the deleted text stays in the store's files.
        self.store
            .write_erasing(move |tx| Box::pin(async move { delete(tx, snapshots, &d).await }))
            .await
    }

    /// Creates the provider's reply to a comment, or edits it when it
    /// exists; bumps the course's version; and the event.
    pub async fn put_reply(&self, reply: NewReply) -> Result<ReplyOutcome, StoreError> {
        self.store
            .write(move |tx| {
                let r = reply.clone();
                Box::pin(async move { put_reply(tx, &r).await })
            })
            .await
    }
}

async fn post(
    tx: &Tx<'_>,
    snapshots: SnapshotWrites,
    new: &NewComment,
) -> Result<PostOutcome, StoreError> {
    let kind = new.comment_type.as_str();
    if let Some(name) = &new.sign_in_name {
        tx.execute(&SIGN_IN, &[&new.user_id, name]).await?;
    }
    let gate = tx
        .query_opt(&POST_GATE, &[&new.course_id, &new.user_id], |r| {
            Ok((
                r.int(0)? != 0 || r.int(1)? != 0,
                r.opt_int(2)?.is_some(),
                r.opt_int(3)?.is_some(),
                r.opt_int(4)?.is_some(),
            ))
        })
        .await?;
    let Some((premoderated, known, banned, enrolled)) = gate else {
        return Ok(PostOutcome::CourseNotFound);
    };
    if !known {
        return Ok(PostOutcome::UnknownUser);
    }
    if banned {
        return Ok(PostOutcome::Banned);
    }
    if !enrolled && !new.reviews_open {
        return Ok(PostOutcome::NotEnrolled);
    }
    let hold = new.hold.clone().or_else(|| {
        premoderated
            .then(|| "held for approval: the course's reviews are pre-moderated".to_string())
    });
    if let Some(note) = hold {
        return post_held(tx, new, &note).await;
    }
    let found = snapshots.post_lookup(tx, new).await?;
    if !found.course_exists {
        return Ok(PostOutcome::CourseNotFound);
    }
    let Some(display_name) = found.display_name else {
        return Ok(PostOutcome::UnknownUser);
    };
    snapshots.lock_course(tx, new.course_id, kind).await?;
    let rating = new.rating.get();
    let id = tx
        .insert_id(
            &POST_INSERT,
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
        .ok_or_else(|| StoreError::Internal("a comment's insert inserted nothing".into()))?;
    let (old, last) = snapshots
        .upsert_snapshot(tx, new, id, &display_name, found.last)
        .await?;
    apply_delta(tx, new.course_id, kind, delta(old, Some(last))).await?;
    let out = comment_out(new, id, display_name);
    tx.invalidate(invalidation_key(new.course_id));
    tx.append(posted_event(&out))?;
    Ok(PostOutcome::Posted(out))
}

async fn edit(
    tx: &Tx<'_>,
    snapshots: SnapshotWrites,
    e: &CommentEdit,
) -> Result<EditOutcome, StoreError> {
    let found = tx
        .query_opt(&FIND, &[&e.comment_id], |r| found_row(r))
        .await?;
    let (f, kind) = match check_edit(found, e) {
        Ok(v) => v,
        Err(outcome) => return Ok(*outcome),
    };
    let k = kind.as_str();
    snapshots.lock_course(tx, f.course_id, k).await?;
    let before = snapshots
        .rating_before(tx, f.course_id, k, f.user_id)
        .await?;
    let rating = e.rating.map(|r| r.get());
    let n = tx
        .execute(
            &EDIT,
            &[
                &e.comment_id,
                &rating,
                &e.title,
                &e.remarks,
                &e.at_ms,
                &e.hold,
            ],
        )
        .await?;
    if n == 0 {
        // Deleted by another writer since it was found.
        return Ok(EditOutcome::CommentNotFound);
    }
    let (old, new) = snapshots
        .rebuild_snapshot(tx, f.course_id, k, f.user_id, before)
        .await?;
    apply_delta(tx, f.course_id, k, delta(old, new)).await?;
    let out = edited_out(&f, e, kind);
    tx.invalidate(invalidation_key(f.course_id));
    tx.append(edited_event(&out))?;
    Ok(EditOutcome::Edited(out))
}

async fn delete(
    tx: &Tx<'_>,
    snapshots: SnapshotWrites,
    d: &Deleter,
) -> Result<DeleteOutcome, StoreError> {
    let found = tx
        .query_opt(&FIND, &[&d.comment_id], |r| found_row(r))
        .await?;
    let (f, kind, is_reply) = match check_delete(found, d) {
        Ok(v) => v,
        Err(outcome) => return Ok(outcome),
    };
    let k = kind.as_str();
    let deleted = DeleteOutcome::Deleted {
        course_id: f.course_id,
    };
    if is_reply {
        // A reply changes no snapshot: the version bump alone (with shared
        // writers, also the course's lock, taken first as by every write).
        tx.execute(&VERSION_BUMP, &[&f.course_id, &k]).await?;
        if tx.execute(&DELETE, &[&d.comment_id]).await? == 0 {
            return Ok(DeleteOutcome::CommentNotFound);
        }
        tx.invalidate(invalidation_key(f.course_id));
        tx.append(deleted_event(d, &f, kind, true, 0))?;
        return Ok(deleted);
    }
    snapshots.lock_course(tx, f.course_id, k).await?;
    let before = snapshots
        .rating_before(tx, f.course_id, k, f.user_id)
        .await?;
    if tx.execute(&DELETE, &[&d.comment_id]).await? == 0 {
        // Deleted by another writer since it was found.
        return Ok(DeleteOutcome::CommentNotFound);
    }
    let replies = tx.execute(&DELETE_REPLIES, &[&d.comment_id]).await?;
    let (old, new) = snapshots
        .rebuild_snapshot(tx, f.course_id, k, f.user_id, before)
        .await?;
    apply_delta(tx, f.course_id, k, delta(old, new)).await?;
    tx.invalidate(invalidation_key(f.course_id));
    tx.append(deleted_event(d, &f, kind, false, replies))?;
    Ok(deleted)
}

/// A review held for moderation: stored, not listed, not counted (no
/// snapshot or rating change until a moderator approves it).
async fn post_held(tx: &Tx<'_>, new: &NewComment, note: &str) -> Result<PostOutcome, StoreError> {
    let Some(display_name) = tx
        .query_opt(&USER_NAME, &[&new.user_id], |r| r.text(0))
        .await?
    else {
        return Ok(PostOutcome::UnknownUser);
    };
    let kind = new.comment_type.as_str();
    let rating = new.rating.get();
    let id = tx
        .insert_id(
            &HELD_INSERT,
            &[
                &new.course_id,
                &new.user_id,
                &kind,
                &rating,
                &new.title,
                &new.remarks,
                &new.created_ms,
                &note,
            ],
        )
        .await?
        .ok_or_else(|| StoreError::Internal("a comment's insert inserted nothing".into()))?;
    let mut out = comment_out(new, id, display_name);
    out.status = Some(Status::Held);
    tx.append(posted_event(&out))?;
    Ok(PostOutcome::Posted(out))
}

static USER_NAME: Sql = Sql::new("SELECT display_name FROM comments_users WHERE id = ?1");

/// An insert that does nothing when the comment has a reply, then an
/// update: no read before the write, so it holds with shared writers too.
async fn put_reply(tx: &Tx<'_>, r: &NewReply) -> Result<ReplyOutcome, StoreError> {
    let target = tx
        .query_opt(&TARGET, &[&r.comment_id], |row| target_row(row))
        .await?;
    let (target, kind) = match check_target(target, r.provider_id) {
        Ok(v) => v,
        Err(outcome) => return Ok(*outcome),
    };
    let reply_type = kind.reply_type();
    let inserted = tx
        .insert_id(
            &REPLY_INSERT,
            &[
                &target.course_id,
                &r.provider_id,
                &reply_type,
                &r.comment_id,
                &r.title,
                &r.remarks,
                &r.at_ms,
            ],
        )
        .await?;
    let out = match inserted {
        Some(id) => reply_out(r, &target, kind, id, r.at_ms, false),
        None => {
            let (id, created_ms) = tx
                .query_one(
                    &REPLY_EDIT,
                    &[&r.comment_id, &r.title, &r.remarks, &r.at_ms],
                    |row| Ok((row.int(0)?, row.int(1)?)),
                )
                .await?;
            reply_out(r, &target, kind, id, created_ms, true)
        }
    };
    tx.execute(&VERSION_BUMP, &[&target.course_id, &kind.as_str()])
        .await?;
    tx.invalidate(invalidation_key(target.course_id));
    let edited = out.edited_date.is_some();
    tx.append(reply_event(&out, edited, target.reviewer_id))?;
    Ok(if edited {
        ReplyOutcome::Edited(out)
    } else {
        ReplyOutcome::Created(out)
    })
}

fn posted_event(c: &CommentOut) -> NewEvent {
    NewEvent::json(
        model::stream_of(c.course_id),
        EVENT_COMMENT_POSTED,
        &serde_json::json!({
            "commentId": c.comment_id, "courseId": c.course_id, "userId": c.user_id,
            "commentType": c.comment_type, "rating": c.rating, "createdDate": c.created_date,
            "status": c.status.unwrap_or(Status::Visible).as_str(),
        }),
    )
}

fn reply_event(r: &CommentOut, edited: bool, reviewer_id: i64) -> NewEvent {
    NewEvent::json(
        model::stream_of(r.course_id),
        if edited {
            EVENT_REPLY_EDITED
        } else {
            EVENT_REPLY_POSTED
        },
        &serde_json::json!({
            "commentId": r.parent_id, "replyId": r.comment_id, "courseId": r.course_id,
            "providerId": r.user_id, "displayName": r.display_name, "reviewerId": reviewer_id,
            "at": r.edited_date.as_deref().unwrap_or(&r.created_date),
        }),
    )
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
        status: None,
    }
}

/// What the reply checks need to know about the target comment.
struct Target {
    pub course_id: i64,
    pub comment_type: String,
    pub parent_id: Option<i64>,
    pub provider_id: Option<i64>,
    pub provider_name: Option<String>,
    pub status: i64,
    /// The review's author.
    pub reviewer_id: i64,
}

fn check_target(
    target: Option<Target>,
    provider_id: i64,
) -> Result<(Target, CommentType), Box<ReplyOutcome>> {
    // A held or hidden review is not there for its provider to answer.
    let Some(t) = target.filter(|t| t.status == Status::Visible.code()) else {
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
fn target_row(r: &impl Columns) -> Result<Target, StoreError> {
    Ok(Target {
        course_id: r.col(0)?,
        comment_type: r.col(1)?,
        parent_id: r.col(2)?,
        provider_id: r.col(3)?,
        provider_name: r.col(4)?,
        status: r.int(5)?,
        reviewer_id: r.int(6)?,
    })
}

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
        status: None,
    }
}

/// A comment as an edit or a delete finds it.
#[derive(Clone, Debug)]
struct Found {
    pub course_id: i64,
    pub user_id: i64,
    pub comment_type: String,
    pub parent_id: Option<i64>,
    pub rating: Option<i32>,
    pub title: String,
    pub remarks: String,
    pub created_ms: i64,
    pub display_name: Option<String>,
    pub status: i64,
    pub banned: bool,
}

/// A row of [`super::sql::FIND`].
fn found_row(r: &impl Columns) -> Result<Found, StoreError> {
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
        status: r.int(9)?,
        banned: r.opt_int(10)?.is_some(),
    })
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
    if f.banned {
        return Err(Box::new(EditOutcome::Banned));
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
        status: {
            let status = if e.hold.is_some() && f.status == Status::Visible.code() {
                Status::Held
            } else {
                Status::of_code(f.status)
            };
            (status != Status::Visible).then_some(status)
        },
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
