//! Confirmations the notifier gave up on (`notifier.rs`).

use crate::store::{Columns, Sql, Store, StoreError};

/// A confirmation the notifier gave up on.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ParkedNotification {
    pub position: i64,
    pub registration_id: String,
    pub reason: String,
    pub attempts: i64,
    pub parked_at_ms: i64,
}

static PARK: Sql = Sql::new(
    "INSERT INTO booking_notifications_parked
        (position, registration_id, reason, attempts, parked_at_ms)
     VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (position) DO NOTHING",
);
static PARKED: Sql = Sql::new(
    "SELECT position, registration_id, reason, attempts, parked_at_ms,
            (SELECT COUNT(*) FROM booking_notifications_parked)
     FROM booking_notifications_parked ORDER BY position LIMIT ?1",
);

/// A row of [`PARKED`]: the confirmation and how many are parked.
fn parked_row(r: &impl Columns) -> Result<(ParkedNotification, i64), StoreError> {
    Ok((
        ParkedNotification {
            position: r.int(0)?,
            registration_id: r.text(1)?,
            reason: r.text(2)?,
            attempts: r.int(3)?,
            parked_at_ms: r.int(4)?,
        },
        r.int(5)?,
    ))
}

/// Keeps a confirmation the notifier gave up on (once per event position).
pub async fn park(store: &Store, p: ParkedNotification) -> Result<(), StoreError> {
    store
        .write(move |tx| {
            let p = p.clone();
            Box::pin(async move {
                tx.execute(
                    &PARK,
                    &[
                        &p.position,
                        &p.registration_id,
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

/// The oldest `limit` parked confirmations and how many there are, read in
/// one statement (one snapshot): a count and a list read apart could
/// disagree while the notifier parks one between them.
pub async fn parked(
    store: &Store,
    limit: i64,
) -> Result<(Vec<ParkedNotification>, i64), StoreError> {
    store
        .read(move |c| {
            Box::pin(async move {
                let rows = c.query(&PARKED, &[&limit], |r| parked_row(r)).await?;
                let total = rows.last().map_or(0, |(_, count)| *count);
                Ok((rows.into_iter().map(|(parked, _)| parked).collect(), total))
            })
        })
        .await
}
