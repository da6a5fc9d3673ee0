//! Notifications the webhook worker gave up on (`notifier.rs`).

use super::CommentsStore;
use crate::store::{Columns, Sql, StoreError};

/// A notification the worker gave up on: which event, and why.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ParkedCommentNotification {
    /// The event's position in the log (its `Idempotency-Key` ends in it).
    pub position: i64,
    /// The event's type (`CommentPosted`, `ReplyPosted`, ...).
    pub event: String,
    pub comment_id: i64,
    pub reason: String,
    pub attempts: i64,
    pub parked_at_ms: i64,
}

static PARK: Sql = Sql::new(
    "INSERT INTO comments_notifications_parked
        (position, event_type, comment_id, reason, attempts, parked_at_ms)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (position) DO NOTHING",
);
static PARKED: Sql = Sql::new(
    "SELECT position, event_type, comment_id, reason, attempts, parked_at_ms,
            (SELECT COUNT(*) FROM comments_notifications_parked)
     FROM comments_notifications_parked ORDER BY position LIMIT ?1",
);

impl CommentsStore {
    /// Keeps a notification the worker gave up on (once per event).
    pub async fn park_notification(&self, p: ParkedCommentNotification) -> Result<(), StoreError> {
        self.store
            .write(move |tx| {
                let p = p.clone();
                Box::pin(async move {
                    tx.execute(
                        &PARK,
                        &[
                            &p.position,
                            &p.event,
                            &p.comment_id,
                            &p.reason,
                            &p.attempts,
                            &p.parked_at_ms,
                        ],
                    )
                    .await?;
                    Ok(())
                })
            })
            .await
    }

    /// The oldest `limit` parked notifications and how many there are, in
    /// one statement, so the count and the list agree.
    pub async fn parked_notifications(
        &self,
        limit: i64,
    ) -> Result<(Vec<ParkedCommentNotification>, i64), StoreError> {
        self.store
            .read(move |c| {
                Box::pin(async move {
                    let rows = c
                        .query(&PARKED, &[&limit], |r| {
                            Ok((
                                ParkedCommentNotification {
                                    position: r.int(0)?,
                                    event: r.text(1)?,
                                    comment_id: r.int(2)?,
                                    reason: r.text(3)?,
                                    attempts: r.int(4)?,
                                    parked_at_ms: r.int(5)?,
                                },
                                r.int(6)?,
                            ))
                        })
                        .await?;
                    let total = rows.last().map_or(0, |(_, count)| *count);
                    Ok((rows.into_iter().map(|(p, _)| p).collect(), total))
                })
            })
            .await
    }
}
