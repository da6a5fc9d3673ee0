//! Moderation: a moderator hides, restores (approves) and removes reviews
//! and replies, dismisses reports, bans and unbans users; readers report
//! comments and vote reviews helpful, once each. Each is one command of the
//! store's writer, with its event; those that change what a course lists
//! name the course's cache key and move the user's snapshot and the
//! course's rating like an edit does (only listed comments count).

use super::super::model::{
    self, CommentType, Status, EVENT_COMMENT_APPROVED, EVENT_COMMENT_HIDDEN, EVENT_COMMENT_REMOVED,
    EVENT_COMMENT_REPORTED, EVENT_COMMENT_RESTORED, EVENT_HELPFUL_VOTED, EVENT_REPORTS_DISMISSED,
    EVENT_USER_BANNED, EVENT_USER_UNBANNED,
};
use super::snapshots::{apply_delta, delta, resnapshot, VERSION_BUMP};
use super::{invalidation_key, CommentsStore};
use crate::store::{Columns, NewEvent, Sql, StoreError, Tx};

/// What a moderator does to a comment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModAction {
    /// Out of the listing and the rating (held or listed before).
    Hide,
    /// Listed again: a hidden comment restored, a held one approved.
    Restore,
    /// Deleted, a review with its reply.
    Remove,
    /// Its open reports closed; it stays as it is.
    Dismiss,
}

impl ModAction {
    pub const ALL: [ModAction; 4] = [
        ModAction::Hide,
        ModAction::Restore,
        ModAction::Remove,
        ModAction::Dismiss,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            ModAction::Hide => "hide",
            ModAction::Restore => "restore",
            ModAction::Remove => "remove",
            ModAction::Dismiss => "dismiss",
        }
    }
}

/// A moderator's action, checked.
#[derive(Clone, Debug)]
pub struct Moderation {
    pub comment_id: i64,
    pub moderator: String,
    pub action: ModAction,
    pub reason: String,
    pub at_ms: i64,
}

#[derive(Clone, Debug)]
pub enum ModOutcome {
    /// Done: the comment's course and its status after (`None`: removed).
    Done {
        course_id: i64,
        status: Option<Status>,
    },
    CommentNotFound,
    /// Nothing to do: already so (the comment's status).
    AlreadySo(Status),
}

#[derive(Clone, Debug)]
pub enum ReportOutcome {
    /// Filed (`counted`: this reader had not reported it before); the
    /// reports not yet dealt with.
    Filed {
        counted: bool,
        reports_open: i64,
    },
    CommentNotFound,
    Banned,
}

#[derive(Clone, Debug)]
pub enum HelpfulOutcome {
    /// Counted (`counted`: this reader had not voted before); its votes.
    Voted {
        counted: bool,
        helpful: i64,
        course_id: i64,
    },
    CommentNotFound,
    /// A reply, or the voter's own review.
    NotVotable(&'static str),
    Banned,
}

#[derive(Clone, Debug)]
pub enum BanOutcome {
    Done,
    UserNotFound,
}

/// A comment in the moderation queue.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QueueItem {
    pub comment_id: i64,
    pub course_id: i64,
    pub user_id: i64,
    pub display_name: String,
    /// Course, Service, CourseReply or ServiceReply.
    pub comment_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rating: Option<i32>,
    pub title: String,
    pub remarks: String,
    /// RFC 3339.
    pub created_date: String,
    /// visible, held or hidden.
    pub status: String,
    /// Why it is held or hidden (the filter's finding, pre-moderation, a
    /// moderator's reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Reports not yet dealt with.
    pub reports_open: i64,
    /// Their reasons, oldest first (at most [`REPORT_REASONS_SHOWN`]).
    pub report_reasons: Vec<String>,
    /// The author is banned.
    pub author_banned: bool,
}

/// Reasons shown per queue item at most.
pub const REPORT_REASONS_SHOWN: i64 = 5;

static FIND: Sql = Sql::new(
    "SELECT course_id, user_id, comment_type, parent_id, status FROM comments WHERE id = ?1",
);
static SET_STATUS: Sql = Sql::new(
    "UPDATE comments SET status = ?2, moderation_note = ?3, reports_open = 0 WHERE id = ?1",
);
static DISMISS: Sql = Sql::new("UPDATE comments SET reports_open = 0 WHERE id = ?1");
static DELETE: Sql = Sql::new("DELETE FROM comments WHERE id = ?1 OR parent_id = ?1");
static DELETE_VOTES: Sql = Sql::new(
    "DELETE FROM comments_helpful WHERE comment_id = ?1 OR comment_id IN
        (SELECT id FROM comments WHERE parent_id = ?1)",
);
static DELETE_REPORTS: Sql = Sql::new(
    "DELETE FROM comments_reports WHERE comment_id = ?1 OR comment_id IN
        (SELECT id FROM comments WHERE parent_id = ?1)",
);

static REPORT: Sql = Sql::new(
    "INSERT INTO comments_reports (comment_id, user_id, reason, created_ms) VALUES (?1, ?2, ?3, ?4)
     ON CONFLICT (comment_id, user_id) DO NOTHING",
);
static REPORT_COUNT: Sql = Sql::new(
    "UPDATE comments SET reports_open = reports_open + ?2 WHERE id = ?1 RETURNING reports_open",
);
static BANNED: Sql = Sql::new("SELECT banned_ms FROM comments_users WHERE id = ?1");
static VOTE: Sql = Sql::new(
    "INSERT INTO comments_helpful (comment_id, user_id) VALUES (?1, ?2)
     ON CONFLICT (comment_id, user_id) DO NOTHING",
);
static VOTE_COUNT: Sql =
    Sql::new("UPDATE comments SET helpful = helpful + ?2 WHERE id = ?1 RETURNING helpful");
static VOTE_SNAPSHOT: Sql = Sql::new(
    "UPDATE comments_snapshots SET helpful = helpful + 1
     WHERE course_id = ?1 AND comment_type = ?2 AND user_id = ?3",
);
static BAN: Sql =
    Sql::new("UPDATE comments_users SET banned_ms = ?2, ban_reason = ?3 WHERE id = ?1");

/// Reviews whose id modulo 1000 falls below ?1 (to hide) and in
/// [?1, 2 * ?1) (to report): the seed's moderation.
static SAMPLE: Sql = Sql::new(
    "SELECT id, CASE WHEN id % 1000 < ?1 THEN 1 ELSE 0 END FROM comments
     WHERE parent_id IS NULL AND id % 1000 < 2 * ?1 ORDER BY id",
);

static QUEUE: Sql = Sql::new(
    "SELECT c.id, c.course_id, c.user_id, COALESCE(u.display_name, ''), c.comment_type, c.parent_id,
        c.rating, c.title, c.remarks, c.created_ms, c.status, c.moderation_note, c.reports_open,
        u.banned_ms
     FROM comments c LEFT JOIN comments_users u ON u.id = c.user_id
     WHERE (c.status = 1 OR c.reports_open > 0) AND c.id > ?1
     ORDER BY c.id LIMIT ?2",
);
static REPORT_REASONS: Sql = Sql::new(
    "SELECT reason FROM comments_reports WHERE comment_id = ?1 ORDER BY created_ms, user_id LIMIT ?2",
);

/// A comment as moderation finds it.
struct Found {
    course_id: i64,
    user_id: i64,
    kind: CommentType,
    is_reply: bool,
    parent_id: Option<i64>,
    status: Status,
}

async fn find(tx: &Tx<'_>, id: i64) -> Result<Option<Found>, StoreError> {
    let row = tx
        .query_opt(&FIND, &[&id], |r| {
            Ok((r.int(0)?, r.int(1)?, r.text(2)?, r.opt_int(3)?, r.int(4)?))
        })
        .await?;
    Ok(row.and_then(|(course_id, user_id, t, parent_id, status)| {
        let (kind, is_reply) = CommentType::of_stored(&t)?;
        Some(Found {
            course_id,
            user_id,
            kind,
            is_reply: is_reply || parent_id.is_some(),
            parent_id,
            status: Status::of_code(status),
        })
    }))
}

impl CommentsStore {
    /// A moderator's action on a comment, with its event.
    pub async fn moderate(&self, m: Moderation) -> Result<ModOutcome, StoreError> {
        let snapshots = self.snapshots;
        // A removal leaves no copy of the text in the store's files.
        let erasing = m.action == ModAction::Remove;
        write(&self.store, erasing, move |tx| {
            let m = m.clone();
            Box::pin(async move {
                let Some(f) = find(tx, m.comment_id).await? else {
                    return Ok(ModOutcome::CommentNotFound);
                };
                let k = f.kind.as_str();
                let after = match m.action {
                    ModAction::Hide if f.status == Status::Hidden => {
                        return Ok(ModOutcome::AlreadySo(f.status))
                    }
                    ModAction::Restore if f.status == Status::Visible => {
                        return Ok(ModOutcome::AlreadySo(f.status))
                    }
                    ModAction::Hide => Some(Status::Hidden),
                    ModAction::Restore => Some(Status::Visible),
                    ModAction::Remove => None,
                    ModAction::Dismiss => Some(f.status),
                };
                if m.action == ModAction::Dismiss {
                    tx.execute(&DISMISS, &[&m.comment_id]).await?;
                } else {
                    snapshots.lock_course(tx, f.course_id, k).await?;
                    match after {
                        Some(s) => {
                            let note = (s != Status::Visible).then_some(m.reason.as_str());
                            tx.execute(&SET_STATUS, &[&m.comment_id, &s.code(), &note])
                                .await?;
                        }
                        None => {
                            tx.execute(&DELETE_VOTES, &[&m.comment_id]).await?;
                            tx.execute(&DELETE_REPORTS, &[&m.comment_id]).await?;
                            tx.execute(&DELETE, &[&m.comment_id]).await?;
                        }
                    }
                    if f.is_reply {
                        tx.execute(&VERSION_BUMP, &[&f.course_id, &k]).await?;
                    } else {
                        let (old, new) = resnapshot(tx, f.course_id, k, f.user_id).await?;
                        apply_delta(tx, f.course_id, k, delta(old, new)).await?;
                    }
                    tx.invalidate(invalidation_key(f.course_id));
                }
                let event_type = match (m.action, f.status) {
                    (ModAction::Hide, _) => EVENT_COMMENT_HIDDEN,
                    (ModAction::Restore, Status::Held) => EVENT_COMMENT_APPROVED,
                    (ModAction::Restore, _) => EVENT_COMMENT_RESTORED,
                    (ModAction::Remove, _) => EVENT_COMMENT_REMOVED,
                    (ModAction::Dismiss, _) => EVENT_REPORTS_DISMISSED,
                };
                tx.append(NewEvent::json(
                        model::stream_of(f.course_id),
                        event_type,
                        &serde_json::json!({
                            "commentId": m.comment_id, "courseId": f.course_id,
                            "userId": f.user_id, "parentId": f.parent_id,
                            "commentType": if f.is_reply { f.kind.reply_type() } else { f.kind.as_str() },
                            "moderator": m.moderator, "reason": m.reason,
                            "before": f.status.as_str(),
                            "after": after.map(Status::as_str).unwrap_or("removed"),
                            "at": model::timestamp(m.at_ms),
                        }),
                    ))?;
                Ok(ModOutcome::Done {
                    course_id: f.course_id,
                    status: after,
                })
            })
        })
        .await
    }

    /// A reader's report of a listed comment: counted once per reader.
    pub async fn report(
        &self,
        comment_id: i64,
        user_id: i64,
        sign_in_name: Option<String>,
        reason: String,
        at_ms: i64,
    ) -> Result<ReportOutcome, StoreError> {
        self.store
            .write(move |tx| {
                let (name, reason) = (sign_in_name.clone(), reason.clone());
                Box::pin(async move {
                    if let Some(name) = &name {
                        tx.execute(&super::writes::SIGN_IN, &[&user_id, name])
                            .await?;
                    }
                    let banned: Option<Option<i64>> =
                        tx.query_opt(&BANNED, &[&user_id], |r| r.opt_int(0)).await?;
                    if banned.flatten().is_some() {
                        return Ok(ReportOutcome::Banned);
                    }
                    let Some(f) = find(tx, comment_id).await? else {
                        return Ok(ReportOutcome::CommentNotFound);
                    };
                    if f.status != Status::Visible {
                        return Ok(ReportOutcome::CommentNotFound);
                    }
                    let n = tx
                        .execute(&REPORT, &[&comment_id, &user_id, &reason, &at_ms])
                        .await? as i64;
                    let open = tx
                        .query_one(&REPORT_COUNT, &[&comment_id, &n], |r| r.int(0))
                        .await?;
                    if n > 0 {
                        tx.append(NewEvent::json(
                            model::stream_of(f.course_id),
                            EVENT_COMMENT_REPORTED,
                            &serde_json::json!({
                                "commentId": comment_id, "courseId": f.course_id,
                                "reporterId": user_id, "reportsOpen": open,
                                "at": model::timestamp(at_ms),
                            }),
                        ))?;
                    }
                    Ok(ReportOutcome::Filed {
                        counted: n > 0,
                        reports_open: open,
                    })
                })
            })
            .await
    }

    /// A reader's helpful vote on a listed review: counted once per reader.
    pub async fn vote_helpful(
        &self,
        comment_id: i64,
        user_id: i64,
        sign_in_name: Option<String>,
        at_ms: i64,
    ) -> Result<HelpfulOutcome, StoreError> {
        let snapshots = self.snapshots;
        self.store
            .write(move |tx| {
                let name = sign_in_name.clone();
                Box::pin(async move {
                    if let Some(name) = &name {
                        tx.execute(&super::writes::SIGN_IN, &[&user_id, name])
                            .await?;
                    }
                    let banned: Option<Option<i64>> =
                        tx.query_opt(&BANNED, &[&user_id], |r| r.opt_int(0)).await?;
                    if banned.flatten().is_some() {
                        return Ok(HelpfulOutcome::Banned);
                    }
                    let Some(f) = find(tx, comment_id).await? else {
                        return Ok(HelpfulOutcome::CommentNotFound);
                    };
                    if f.status != Status::Visible {
                        return Ok(HelpfulOutcome::CommentNotFound);
                    }
                    if f.is_reply {
                        return Ok(HelpfulOutcome::NotVotable(
                            "replies take no helpful votes; vote on the review",
                        ));
                    }
                    if f.user_id == user_id {
                        return Ok(HelpfulOutcome::NotVotable(
                            "this is your own review; others vote on it",
                        ));
                    }
                    let k = f.kind.as_str();
                    let n = tx.execute(&VOTE, &[&comment_id, &user_id]).await? as i64;
                    if n > 0 {
                        snapshots.lock_course(tx, f.course_id, k).await?;
                    }
                    let helpful = tx
                        .query_one(&VOTE_COUNT, &[&comment_id, &n], |r| r.int(0))
                        .await?;
                    if n > 0 {
                        tx.execute(&VOTE_SNAPSHOT, &[&f.course_id, &k, &f.user_id])
                            .await?;
                        tx.execute(&VERSION_BUMP, &[&f.course_id, &k]).await?;
                        tx.invalidate(invalidation_key(f.course_id));
                        tx.append(NewEvent::json(
                            model::stream_of(f.course_id),
                            EVENT_HELPFUL_VOTED,
                            &serde_json::json!({
                                "commentId": comment_id, "courseId": f.course_id,
                                "voterId": user_id, "helpful": helpful,
                                "at": model::timestamp(at_ms),
                            }),
                        ))?;
                    }
                    Ok(HelpfulOutcome::Voted {
                        counted: n > 0,
                        helpful,
                        course_id: f.course_id,
                    })
                })
            })
            .await
    }

    /// Bans (`reason` given) or unbans a user, with the event.
    pub async fn ban(
        &self,
        user_id: i64,
        moderator: String,
        reason: Option<String>,
        at_ms: i64,
    ) -> Result<BanOutcome, StoreError> {
        self.store
            .write(move |tx| {
                let (moderator, reason) = (moderator.clone(), reason.clone());
                Box::pin(async move {
                    let banned_ms = reason.as_ref().map(|_| at_ms);
                    if tx.execute(&BAN, &[&user_id, &banned_ms, &reason]).await? == 0 {
                        return Ok(BanOutcome::UserNotFound);
                    }
                    tx.append(NewEvent::json(
                        model::user_stream_of(user_id),
                        if reason.is_some() {
                            EVENT_USER_BANNED
                        } else {
                            EVENT_USER_UNBANNED
                        },
                        &serde_json::json!({
                            "userId": user_id, "moderator": moderator, "reason": reason,
                            "at": model::timestamp(at_ms),
                        }),
                    ))?;
                    Ok(BanOutcome::Done)
                })
            })
            .await
    }

    /// The reviews the seed hides and reports, `per_mille` of each
    /// thousand each.
    pub async fn moderation_sample(
        &self,
        per_mille: i64,
    ) -> Result<(Vec<i64>, Vec<i64>), StoreError> {
        self.store
            .read_blocking(move |c| {
                Box::pin(async move {
                    let rows = c
                        .query(&SAMPLE, &[&per_mille], |r| Ok((r.int(0)?, r.int(1)? == 1)))
                        .await?;
                    Ok(rows.into_iter().partition::<Vec<_>, _>(|(_, hide)| *hide))
                })
            })
            .await
            .map(|(h, r)| {
                (
                    h.into_iter().map(|(id, _)| id).collect(),
                    r.into_iter().map(|(id, _)| id).collect(),
                )
            })
    }

    /// The moderation queue: held comments and comments with open reports,
    /// oldest first, after comment `after`, at most `limit`.
    pub async fn queue(&self, after: i64, limit: i64) -> Result<Vec<QueueItem>, StoreError> {
        self.store
            .read(move |c| {
                Box::pin(async move {
                    let mut items = c
                        .query(&QUEUE, &[&after, &limit], |r| {
                            Ok(QueueItem {
                                comment_id: r.int(0)?,
                                course_id: r.int(1)?,
                                user_id: r.int(2)?,
                                display_name: r.text(3)?,
                                comment_type: r.text(4)?,
                                parent_id: r.opt_int(5)?,
                                rating: r.col(6)?,
                                title: r.text(7)?,
                                remarks: r.text(8)?,
                                created_date: model::timestamp(r.int(9)?),
                                status: Status::of_code(r.int(10)?).as_str().to_string(),
                                note: r.col(11)?,
                                reports_open: r.int(12)?,
                                report_reasons: Vec::new(),
                                author_banned: r.opt_int(13)?.is_some(),
                            })
                        })
                        .await?;
                    for item in &mut items {
                        if item.reports_open > 0 {
                            item.report_reasons = c
                                .query(
                                    &REPORT_REASONS,
                                    &[&item.comment_id, &REPORT_REASONS_SHOWN],
                                    |r| r.text(0),
                                )
                                .await?;
                        }
                    }
                    Ok(items)
                })
            })
            .await
    }
}

/// `f` as a write, or as an erasure (`Store::write_erasing`).
async fn write<T, F>(store: &crate::store::Store, erasing: bool, f: F) -> Result<T, StoreError>
where
    T: Send + 'static,
    F: for<'a> Fn(&'a Tx<'a>) -> crate::store::StoreFuture<'a, T> + Send + Sync + 'static,
{
    if erasing {
        store.write_erasing(f).await
    } else {
        store.write(f).await
    }
}
