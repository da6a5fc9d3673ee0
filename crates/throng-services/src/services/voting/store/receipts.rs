//! What a receipt finds, and the one-time re-keying of ballots stored
//! before receipt tags.

use std::sync::{Arc, LazyLock};

use super::super::receipt::{ReceiptKey, RECEIPT_BYTES};
use super::{choice, int_triple, ReceiptState, Votes, VotingStore};
use crate::store::{Columns, Sql, StoreError};

/// The box: scanned on SQLite (keyed by district first; it holds the
/// ballots of rounds not yet due), a key lookup on PostgreSQL.
const BOXED: &str =
    "SELECT COUNT(*) FROM voting_ballot_box WHERE election_id = ?1 AND receipt_tag = ?2";
/// Ballots not yet settled into the box count as boxed.
const INTAKE: &str =
    "SELECT COUNT(*) FROM voting_ballot_intake WHERE election_id = ?1 AND receipt_tag = ?2";
const COUNTED: &str =
    "SELECT COUNT(*) FROM voting_receipts_counted WHERE election_id = ?1 AND receipt_tag = ?2";
const LAST: &str =
    "SELECT COALESCE(MAX(last_position), 0) FROM voting_rounds WHERE election_id = ?1";

/// A receipt's reads as one statement, one snapshot: a settle or a round
/// between two reads would hide the ballot from both. `intake`: votes go
/// through the intake ([`Votes::RollDecides`]). `counted`: the receipt has
/// no check, so its tag may be among the counted ones (a receipt this
/// server minted never is: only the upgrade writes counted tags).
fn receipt_sql(intake: bool, counted: bool) -> Sql {
    let boxed = if intake {
        format!("({BOXED}) + ({INTAKE})")
    } else {
        format!("({BOXED})")
    };
    let counted = if counted {
        format!("({COUNTED})")
    } else {
        "0".to_string()
    };
    Sql::owned(format!("SELECT {boxed}, {counted}, ({LAST})"))
}

static RECEIPT_MINTED: LazyLock<Sql> = LazyLock::new(|| receipt_sql(false, false));
static RECEIPT_UNCHECKED: LazyLock<Sql> = LazyLock::new(|| receipt_sql(false, true));
static RECEIPT_MINTED_OR_INTAKE: LazyLock<Sql> = LazyLock::new(|| receipt_sql(true, false));
static RECEIPT_UNCHECKED_OR_INTAKE: LazyLock<Sql> = LazyLock::new(|| receipt_sql(true, true));

/// What a receipt's reads say: ballots in the box (and the intake) under
/// its tag, counted tags, the election's last round position.
pub fn receipt_state(
    minted: bool,
    (boxed, counted, last): (i64, i64, i64),
) -> Option<ReceiptState> {
    if boxed > 0 {
        Some(ReceiptState::Boxed)
    } else if (minted && last > 0) || counted > 0 {
        Some(ReceiptState::Published { position: last })
    } else {
        None
    }
}

/// Whether the tables the schema before receipt tags left are there.
static LEGACY_EXISTS: Sql = Sql::per_dialect(
    "SELECT COUNT(*) FROM sqlite_master WHERE name = 'voting_ballot_box_legacy'",
    // The catalog read in the statement's snapshot: after the lock below,
    // it sees a drop that another node committed meanwhile (`to_regclass`
    // reads this backend's catalog cache, which may still name the table).
    "SELECT COUNT(*) FROM pg_tables
      WHERE schemaname = current_schema() AND tablename = 'voting_ballot_box_legacy'",
);
/// Nodes starting at once adopt one at a time: on PostgreSQL under a lock
/// held to the commit; SQLite's one writer runs one command at a time
/// (nothing to run).
static ADOPT_ONE_AT_A_TIME: Sql = Sql::per_dialect(
    "",
    "SELECT pg_advisory_xact_lock(hashtext('voting_adopt_legacy'))",
);
static LEGACY_BOX: Sql = Sql::new(
    "SELECT ballot_id, election_id, district_id, party_id, candidate_ids
       FROM voting_ballot_box_legacy",
);
static LEGACY_IDS: Sql = Sql::new("SELECT election_id, ballot_id FROM voting_receipts_legacy");
static ADOPT_BOXED: Sql = Sql::new(
    "INSERT INTO voting_ballot_box (election_id, district_id, receipt_tag, sealed)
     VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
);
/// A receipt's tag as counted (a receipt without a check, found by its tag
/// once published).
static COUNT_TAG: Sql = Sql::new(
    "INSERT INTO voting_receipts_counted (election_id, receipt_tag) VALUES (?1, ?2)
     ON CONFLICT DO NOTHING",
);
/// Emptied before they are dropped: SQLite zeroes the rows as it deletes
/// them (`secure_delete`, every connection: store/sqlite.rs).
static DROP_LEGACY: Sql = Sql::new(
    "DELETE FROM voting_ballot_box_legacy; DELETE FROM voting_receipts_legacy;
     DROP TABLE voting_ballot_box_legacy; DROP TABLE voting_receipts_legacy;",
);

/// A row of [`LEGACY_BOX`].
fn legacy_box_row(r: &impl Columns) -> Result<(Vec<u8>, i64, i64, i64, String), StoreError> {
    Ok((r.bytes(0)?, r.int(1)?, r.int(2)?, r.int(3)?, r.text(4)?))
}

/// A row of [`LEGACY_IDS`].
fn legacy_id_row(r: &impl Columns) -> Result<(i64, Vec<u8>), StoreError> {
    Ok((r.int(0)?, r.bytes(1)?))
}

fn tag_of(keys: &ReceiptKey, e: i64, id: &[u8]) -> Option<[u8; RECEIPT_BYTES]> {
    Some(keys.tag(e, &<[u8; RECEIPT_BYTES]>::try_from(id).ok()?))
}

impl VotingStore {
    /// Where the ballot of the receipt with this tag is, if it exists in
    /// `election_id`: in the box, or published by a round no later than
    /// the election's last (whose last event position is given). A receipt
    /// this server `minted` whose tag is not in the box was published: the
    /// box loses a ballot only in the round that publishes it. Receipts
    /// minted without a check are found in `voting_receipts_counted` once
    /// published. Read in one snapshot (see [`receipt_sql`]).
    pub async fn receipt(
        &self,
        election_id: i64,
        tag: [u8; RECEIPT_BYTES],
        minted: bool,
    ) -> Result<Option<ReceiptState>, StoreError> {
        let sql: &'static Sql = match (self.votes, minted) {
            (Votes::RollDecides, true) => &RECEIPT_MINTED_OR_INTAKE,
            (Votes::RollDecides, false) => &RECEIPT_UNCHECKED_OR_INTAKE,
            (Votes::MarksKeyDecides, true) => &RECEIPT_MINTED,
            (Votes::MarksKeyDecides, false) => &RECEIPT_UNCHECKED,
        };
        let counts = self
            .store
            .read(move |c| {
                Box::pin(async move {
                    c.query_one(sql, &[&election_id, &tag], |r| int_triple(r))
                        .await
                })
            })
            .await?;
        Ok(receipt_state(minted, counts))
    }

    /// Re-keys what the schema before receipt tags left (see the migration
    /// `0012_voting_secrecy.sql`): boxed ballots are sealed under their
    /// receipt's tag, published ballots' receipts become counted tags, and
    /// the old tables are dropped; the boxed ballots adopted. In a
    /// transaction of its own, one node at a time.
    pub async fn adopt_legacy(&self, keys: &Arc<ReceiptKey>) -> Result<usize, StoreError> {
        let legacy = self
            .store
            .read(|c| Box::pin(async move { c.query_one(&LEGACY_EXISTS, &[], |r| r.int(0)).await }))
            .await?;
        if legacy == 0 {
            return Ok(0);
        }
        let keys = keys.clone();
        self.store
            .write_apart(move |tx| {
                let keys = keys.clone();
                Box::pin(async move {
                    tx.batch(&ADOPT_ONE_AT_A_TIME).await?;
                    // Another node may have adopted while this one waited.
                    if tx.query_one(&LEGACY_EXISTS, &[], |r| r.int(0)).await? == 0 {
                        return Ok(0);
                    }
                    let rows = tx.query(&LEGACY_BOX, &[], |r| legacy_box_row(r)).await?;
                    for (id, e, d, party, candidates) in &rows {
                        let Some(tag) = tag_of(&keys, *e, id) else {
                            continue;
                        };
                        let sealed = keys.seal(*e, *d, &tag, choice(*party, candidates).as_bytes());
                        tx.execute(&ADOPT_BOXED, &[e, d, &tag, &sealed]).await?;
                        // A receipt without a check: found by its tag once
                        // published.
                        tx.execute(&COUNT_TAG, &[e, &tag]).await?;
                    }
                    let ids = tx.query(&LEGACY_IDS, &[], |r| legacy_id_row(r)).await?;
                    for (e, id) in &ids {
                        let Some(tag) = tag_of(&keys, *e, id) else {
                            continue;
                        };
                        tx.execute(&COUNT_TAG, &[e, &tag]).await?;
                    }
                    tx.batch(&DROP_LEGACY).await?;
                    Ok(rows.len())
                })
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipts_answer_from_box_counted_tags_and_rounds() {
        assert_eq!(receipt_state(true, (1, 0, 9)), Some(ReceiptState::Boxed));
        assert_eq!(
            receipt_state(true, (0, 0, 9)),
            Some(ReceiptState::Published { position: 9 })
        );
        assert_eq!(receipt_state(true, (0, 0, 0)), None);
        assert_eq!(receipt_state(false, (0, 0, 9)), None);
        assert_eq!(
            receipt_state(false, (0, 1, 9)),
            Some(ReceiptState::Published { position: 9 })
        );
    }

    #[test]
    fn a_receipt_is_read_in_one_statement_with_postgres_placeholders() {
        let sql = receipt_sql(true, false);
        assert!(sql
            .sqlite()
            .starts_with("SELECT (SELECT COUNT(*) FROM voting_ballot_box"));
        assert!(sql.sqlite().contains("voting_ballot_intake"));
        assert!(!sql.sqlite().contains("voting_receipts_counted"));
        assert!(!sql.postgres().contains('?'), "{}", sql.postgres());
        assert!(receipt_sql(false, true)
            .postgres()
            .contains("voting_receipts_counted WHERE election_id = $1 AND receipt_tag = $2"));
    }
}
