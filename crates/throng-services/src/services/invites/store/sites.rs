//! The sites' rows: few, read whole into every node's memory (`sites.rs` of
//! the service), changed by admins.

use crate::services::invites::model::Site;
use crate::store::{Columns, Sql, Store, StoreError};

/// A site as stored.
#[derive(Clone, Debug)]
pub struct SiteRow {
    pub site_id: i64,
    pub site: Site,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

static LOAD_SITES: Sql = Sql::new(
    "SELECT site_id, config, created_at_ms, updated_at_ms FROM invites_sites ORDER BY site_id",
);
static COUNT_SITES: Sql = Sql::new("SELECT COUNT(*) FROM invites_sites");
/// The next id after the highest. Two nodes may take the same one: the
/// loser's insert does nothing (`WHERE true` lets SQLite parse the
/// `ON CONFLICT` after a `SELECT`).
static CREATE_SITE: Sql = Sql::new(
    "INSERT INTO invites_sites (site_id, config, retention_days, created_at_ms, updated_at_ms)
     SELECT COALESCE(MAX(site_id), 0) + 1, ?1, ?2, ?3, ?3 FROM invites_sites WHERE true
     ON CONFLICT (site_id) DO NOTHING RETURNING site_id",
);
static UPDATE_SITE: Sql = Sql::new(
    "UPDATE invites_sites SET config = ?2, retention_days = ?3, updated_at_ms = ?4 WHERE site_id = ?1",
);

/// A row of [`LOAD_SITES`].
fn site_row(r: &impl Columns) -> Result<SiteRow, StoreError> {
    let site_id = r.int(0)?;
    Ok(SiteRow {
        site_id,
        site: parse_config(site_id, &r.text(1)?)?,
        created_at_ms: r.int(2)?,
        updated_at_ms: r.int(3)?,
    })
}

fn parse_config(site_id: i64, text: &str) -> Result<Site, StoreError> {
    serde_json::from_str(text)
        .map_err(|e| StoreError::Internal(format!("invites_sites {site_id}: config: {e}")))
}

fn config_json(site: &Site) -> String {
    serde_json::to_string(site).expect("a site serializes")
}

/// Every site, in id order.
pub async fn load_sites(store: &Store) -> Result<Vec<SiteRow>, StoreError> {
    store
        .read(|c| Box::pin(c.query(&LOAD_SITES, &[], |r| site_row(r))))
        .await
}

/// Creates a site; its id is the next after the highest. `None` when the
/// store already holds `sites_max` sites.
pub async fn create_site(
    store: &Store,
    site: &Site,
    now_ms: i64,
    sites_max: i64,
) -> Result<Option<i64>, StoreError> {
    let (config, retention) = (config_json(site), site.retention_days);
    // Another node's creation may take the id first: try the next.
    for _ in 0..16 {
        let config = config.clone();
        let made = store
            .write(move |tx| {
                let config = config.clone();
                Box::pin(async move {
                    let n = tx.query_one(&COUNT_SITES, &[], |r| r.int(0)).await?;
                    if n >= sites_max {
                        return Ok(Err(()));
                    }
                    let id = tx
                        .query_opt(&CREATE_SITE, &[&config, &retention, &now_ms], |r| r.int(0))
                        .await?;
                    Ok(Ok(id))
                })
            })
            .await?;
        match made {
            Err(()) => return Ok(None),
            Ok(Some(id)) => return Ok(Some(id)),
            Ok(None) => continue,
        }
    }
    Err(StoreError::Unavailable(
        "could not take a site id (too many concurrent creations); retry".into(),
    ))
}

/// Replaces a site's settings; false when there is no such site.
pub async fn update_site(
    store: &Store,
    site_id: i64,
    site: &Site,
    now_ms: i64,
) -> Result<bool, StoreError> {
    let (config, retention) = (config_json(site), site.retention_days);
    store
        .write(move |tx| {
            let config = config.clone();
            Box::pin(async move {
                Ok(tx
                    .execute(&UPDATE_SITE, &[&site_id, &config, &retention, &now_ms])
                    .await?
                    == 1)
            })
        })
        .await
}
