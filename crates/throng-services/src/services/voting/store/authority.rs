//! What an election authority does to its election: the draft from its
//! definition, the roll with its credentials, the lifecycle's steps, and
//! the audit's reads. Each step appends its event (with who took it) to
//! the election's stream in the same transaction.

use std::sync::Arc;

use super::super::definition::Checked;
use super::super::model::{election_stream, ElectionRow, ElectionState};
use super::{election_row, int_pair, Votes, VotingStore};
use crate::store::bulk::{BulkTable, KeyedTable};
use crate::store::eventlog::NewEvent;
use crate::store::{Columns, Sql, StoreError, Tx};

/// The store's clock in ms, as SQL: where several nodes share the store,
/// its clock decides whether the election is open, not a node's.
macro_rules! now_ms {
    (sqlite) => {
        "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"
    };
    (postgres) => {
        "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"
    };
}

/// Whether election ?1 takes votes now, by its state and the store's clock.
pub(super) static TAKES_VOTES: Sql = Sql::per_dialect(
    concat!(
        "SELECT COUNT(*) FROM voting_elections WHERE id = ?1 AND state = 'open'
           AND opens_at_ms <= ",
        now_ms!(sqlite),
        " AND closes_at_ms > ",
        now_ms!(sqlite)
    ),
    concat!(
        "SELECT COUNT(*) FROM voting_elections WHERE id = $1 AND state = 'open'
           AND opens_at_ms <= ",
        now_ms!(postgres),
        " AND closes_at_ms > ",
        now_ms!(postgres)
    ),
);

/// The mark, and the ballot only if the mark is new, no ballot with the
/// same tracker is in the box (a copied ballot), and the election takes
/// votes (by its row and the store's clock, in the same statement): one
/// statement (PostgreSQL). Two copies racing each other: the second's box
/// insert fails on the tracker's key and nothing of it is written.
pub(super) static CAST_WHILE_OPEN: Sql = Sql::per_dialect(
    "",
    concat!(
        "WITH open AS (
            SELECT 1 FROM voting_elections WHERE id = $1 AND state = 'open'
               AND opens_at_ms <= ",
        now_ms!(postgres),
        " AND closes_at_ms > ",
        now_ms!(postgres),
        "),
         m AS (
            INSERT INTO voting_marks (election_id, voter_id) SELECT $1, $2 FROM open
             WHERE NOT EXISTS (SELECT 1 FROM voting_ballot_box WHERE receipt_tag = $3)
            ON CONFLICT DO NOTHING RETURNING voter_id)
         INSERT INTO voting_ballot_box (receipt_tag, election_id, district_id, sealed)
         SELECT $3, $1, $4, $5 FROM m"
    ),
);

/// Waits for every vote being written to commit, and holds new ones until
/// this transaction ends (PostgreSQL: `SHARE` conflicts with the `ROW
/// EXCLUSIVE` each vote's insert takes), so no vote commits after a step
/// that stops votes; SQLite's one writer already orders every write.
static HOLD_VOTES: Sql = Sql::per_dialect("", "LOCK TABLE voting_marks IN SHARE MODE");

static NEXT_ID: Sql = Sql::new("SELECT COALESCE(MAX(id), 0) + 1 FROM voting_elections");
static INSERT_ELECTION: Sql = Sql::new(
    "INSERT INTO voting_elections
        (id, name, opens_at_ms, closes_at_ms, candidates_per_vote_max, state, live_results,
         roll_version)
     VALUES (?1, ?2, ?3, ?4, ?5, 'draft', ?6, 0)",
);
static INSERT_DISTRICT: Sql = Sql::new(
    "INSERT INTO voting_districts (election_id, district_id, name, code, region)
     VALUES (?1, ?2, ?3, ?4, ?5)",
);
static INSERT_PARTY: Sql = Sql::new(
    "INSERT INTO voting_parties (election_id, party_id, name, short_name, code, color)
     VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
);
static INSERT_CANDIDATE: Sql = Sql::new(
    "INSERT INTO voting_candidates
        (election_id, candidate_id, district_id, party_id, list_position, name)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
);

static STATE_OF: Sql = Sql::new("SELECT state FROM voting_elections WHERE id = ?1");
/// ?3: the states allowed, as `,a,b,`.
static STEP: Sql = Sql::new(
    "UPDATE voting_elections SET state = ?2
      WHERE id = ?1 AND ?3 LIKE '%,' || state || ',%'",
);
static CLOSE_BY_CLOCK: Sql = Sql::per_dialect(
    concat!(
        "UPDATE voting_elections SET state = 'closed'
          WHERE id = ?1 AND state IN ('open', 'suspended') AND closes_at_ms <= ",
        now_ms!(sqlite)
    ),
    concat!(
        "UPDATE voting_elections SET state = 'closed'
          WHERE id = $1 AND state IN ('open', 'suspended') AND closes_at_ms <= ",
        now_ms!(postgres)
    ),
);
static EXTEND: Sql = Sql::per_dialect(
    concat!(
        "UPDATE voting_elections SET closes_at_ms = ?2
          WHERE id = ?1 AND state IN ('draft', 'open', 'suspended') AND closes_at_ms < ?2
            AND closes_at_ms > ",
        now_ms!(sqlite)
    ),
    concat!(
        "UPDATE voting_elections SET closes_at_ms = $2
          WHERE id = $1 AND state IN ('draft', 'open', 'suspended') AND closes_at_ms < $2
            AND closes_at_ms > ",
        now_ms!(postgres)
    ),
);
static ROLL_IMPORTED: Sql = Sql::new(
    "UPDATE voting_elections SET roll_version = roll_version + 1
      WHERE id = ?1 AND state = 'draft'",
);
static ALL_ELECTIONS: Sql = Sql::new(concat!(
    "SELECT ",
    crate::voting_election_columns!(),
    " FROM voting_elections"
));
static CREDENTIAL_OF: Sql = Sql::new(
    "SELECT voter_id, credential_hash FROM voting_credentials
      WHERE election_id = ?1 AND voter_ref = ?2",
);
static VOTER_REFS: Sql = Sql::new(
    "SELECT voter_id, voter_ref FROM voting_credentials WHERE election_id = ?1 ORDER BY voter_id",
);
static BALLOTS_PUBLISHED: Sql = Sql::new(
    "SELECT district_id, COUNT(*) FROM voting_ballots WHERE election_id = ?1 GROUP BY district_id",
);
static BALLOTS_BOXED: Sql = Sql::new(
    "SELECT district_id, COUNT(*) FROM voting_ballot_box WHERE election_id = ?1
      GROUP BY district_id",
);
static BALLOTS_IN_INTAKE: Sql = Sql::new(
    "SELECT district_id, COUNT(*) FROM voting_ballot_intake WHERE election_id = ?1
      GROUP BY district_id",
);

static ROLL_VOTERS: BulkTable = BulkTable {
    name: "voting_voters",
    columns: &["election_id", "voter_id", "district_id"],
    analyze: false,
};
static CREDENTIALS: BulkTable = BulkTable {
    name: "voting_credentials",
    columns: &["election_id", "voter_ref", "voter_id", "credential_hash"],
    analyze: false,
};
/// What a roll import replaces: the election's roll and credentials.
static ROLL_TABLES: &[KeyedTable] = &[
    KeyedTable {
        table: &CREDENTIALS,
        column: "election_id",
    },
    KeyedTable {
        table: &ROLL_VOTERS,
        column: "election_id",
    },
];

/// PostgreSQL plans the roll's reads from statistics.
static GATHER_STATISTICS: Sql =
    Sql::per_dialect("", "ANALYZE voting_voters; ANALYZE voting_credentials");

/// Rows per bulk-load batch of a roll.
const ROLL_ROWS_PER_BATCH: usize = 250_000;

/// An event of an election's stream: what was done, by whom.
pub fn election_event(election_id: i64, event_type: &str, payload: serde_json::Value) -> NewEvent {
    NewEvent::json(election_stream(election_id), event_type, &payload)
}

/// A roll as imported: voters in file order (voter number = index + 1).
pub struct RollRows {
    /// Every voter id's bytes, one after another.
    pub refs: Vec<u8>,
    /// Where each voter id ends in `refs`.
    pub ends: Vec<u32>,
    /// Each voter's district id.
    pub districts: Vec<i64>,
}

impl RollRows {
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub fn voter_ref(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.refs[start..self.ends[i] as usize]
    }
}

/// Why a step was not taken.
#[derive(Debug)]
pub enum StepRefused {
    NotFound,
    /// The election is in this state.
    In(ElectionState),
}

impl VotingStore {
    /// Stores a checked definition as a new draft election; its id.
    pub async fn create_election(
        &self,
        checked: Arc<Checked>,
        actor: String,
    ) -> Result<i64, StoreError> {
        self.store
            .write_apart(move |tx| {
                let (c, actor) = (checked.clone(), actor.clone());
                Box::pin(async move { insert_definition(tx, &c, &actor).await })
            })
            .await
    }

    /// Takes a lifecycle step: from one of `from` to `to`, with its event.
    /// A step that stops votes (`holds_votes`) first waits for votes being
    /// written and holds new ones until it commits.
    pub async fn step(
        &self,
        election_id: i64,
        from: &'static [ElectionState],
        to: ElectionState,
        event: (&'static str, serde_json::Value),
    ) -> Result<Result<(), StepRefused>, StoreError> {
        let allowed: String = from.iter().fold(",".to_string(), |mut s, st| {
            s.push_str(st.as_str());
            s.push(',');
            s
        });
        let holds_votes = from.contains(&ElectionState::Open);
        let event = Arc::new(event);
        self.store
            .write_apart(move |tx| {
                let (allowed, event) = (allowed.clone(), event.clone());
                Box::pin(async move {
                    if holds_votes {
                        tx.batch(&HOLD_VOTES).await?;
                    }
                    let n = tx
                        .execute(&STEP, &[&election_id, &to.as_str(), &allowed])
                        .await?;
                    if n == 0 {
                        return Ok(Err(refusal(tx, election_id).await?));
                    }
                    tx.append(election_event(election_id, event.0, event.1.clone()))?;
                    Ok(Ok(()))
                })
            })
            .await
    }

    /// Closes an open or suspended election whose closing time has passed
    /// by the store's clock; whether it did.
    pub async fn close_by_clock(&self, election_id: i64) -> Result<bool, StoreError> {
        self.store
            .write_apart(move |tx| {
                Box::pin(async move {
                    tx.batch(&HOLD_VOTES).await?;
                    let n = tx.execute(&CLOSE_BY_CLOCK, &[&election_id]).await?;
                    if n > 0 {
                        tx.append(election_event(
                            election_id,
                            "voting.ElectionClosed",
                            serde_json::json!({"actor": "clock", "by": "closing time"}),
                        ))?;
                    }
                    Ok(n > 0)
                })
            })
            .await
    }

    /// Moves the closing time later; refused once it has passed or the
    /// election is closed.
    pub async fn extend(
        &self,
        election_id: i64,
        closes_at_ms: i64,
        actor: String,
    ) -> Result<Result<(), StepRefused>, StoreError> {
        self.store
            .write_apart(move |tx| {
                let actor = actor.clone();
                Box::pin(async move {
                    let n = tx.execute(&EXTEND, &[&election_id, &closes_at_ms]).await?;
                    if n == 0 {
                        return Ok(Err(refusal(tx, election_id).await?));
                    }
                    tx.append(election_event(
                        election_id,
                        "voting.ClosingExtended",
                        serde_json::json!({"actor": actor,
                            "closesAt": crate::base::clock::rfc3339_ms(closes_at_ms)}),
                    ))?;
                    Ok(Ok(()))
                })
            })
            .await
    }

    /// The state of every election, as its row says.
    pub async fn election_states(&self) -> Result<Vec<ElectionRow>, StoreError> {
        self.store
            .read(|c| {
                Box::pin(async move { c.query(&ALL_ELECTIONS, &[], |r| election_row(r)).await })
            })
            .await
    }

    /// Replaces the election's roll and credentials with `rows` (in bulk)
    /// and counts the import (with its event), while the election is a
    /// draft. `hashes[i]` is voter `i + 1`'s credential hash. `Ok(false)`:
    /// the election was opened while the roll loaded (its roll is then this
    /// one, but the import is not counted).
    pub async fn import_roll(
        &self,
        election_id: i64,
        rows: &RollRows,
        hashes: &[[u8; super::super::credential::CREDENTIAL_HASH_BYTES]],
        by_ref: &[u32],
        actor: String,
    ) -> anyhow::Result<bool> {
        let mut load = self
            .store
            .bulk_load_replacing(ROLL_TABLES, election_id)
            .await?;
        let n = rows.len();
        let mut first = 0;
        while first < n {
            let last = (first + ROLL_ROWS_PER_BATCH).min(n);
            let mut voters = load.rows(&ROLL_VOTERS, last - first, 38);
            for i in first..last {
                voters
                    .row()
                    .int8(election_id)
                    .int8(i as i64 + 1)
                    .int8(rows.districts[i]);
            }
            load.send(voters).await?;
            first = last;
        }
        // Credentials in key order (voter id), so SQLite appends.
        let mut first = 0;
        while first < n {
            let last = (first + ROLL_ROWS_PER_BATCH).min(n);
            let mut creds = load.rows(&CREDENTIALS, last - first, 64);
            for &i in &by_ref[first..last] {
                let i = i as usize;
                let voter_ref = std::str::from_utf8(rows.voter_ref(i))?;
                creds
                    .row()
                    .int8(election_id)
                    .text(voter_ref)
                    .int8(i as i64 + 1)
                    .bytes(&hashes[i]);
            }
            load.send(creds).await?;
            first = last;
        }
        load.finish().await?;
        self.store
            .read_blocking(|c| Box::pin(c.batch(&GATHER_STATISTICS)))
            .await?;
        let voters = n as i64;
        let counted = self
            .store
            .write_apart(move |tx| {
                let actor = actor.clone();
                Box::pin(async move {
                    let n = tx.execute(&ROLL_IMPORTED, &[&election_id]).await?;
                    if n > 0 {
                        tx.append(election_event(
                            election_id,
                            "voting.RollImported",
                            serde_json::json!({"actor": actor, "voters": voters}),
                        ))?;
                    }
                    Ok(n > 0)
                })
            })
            .await?;
        Ok(counted)
    }

    /// A voter's number and credential hash, by the id the roll gives.
    pub async fn credential_of(
        &self,
        election_id: i64,
        voter_ref: String,
    ) -> Result<Option<(i64, Vec<u8>)>, StoreError> {
        self.store
            .read(move |c| {
                let voter_ref = voter_ref.clone();
                Box::pin(async move {
                    c.query_opt(&CREDENTIAL_OF, &[&election_id, &voter_ref], |r| {
                        Ok((r.int(0)?, r.bytes(1)?))
                    })
                    .await
                })
            })
            .await
    }

    /// Ballots cast per district id: published, boxed and (one writer)
    /// waiting in the intake.
    pub async fn ballots_cast(&self, election_id: i64) -> Result<Vec<(i64, i64)>, StoreError> {
        let intake = self.votes == Votes::RollDecides;
        self.store
            .read_blocking(move |c| {
                Box::pin(async move {
                    let mut all = c
                        .query(&BALLOTS_PUBLISHED, &[&election_id], |r| int_pair(r))
                        .await?;
                    all.extend(
                        c.query(&BALLOTS_BOXED, &[&election_id], |r| int_pair(r))
                            .await?,
                    );
                    if intake {
                        all.extend(
                            c.query(&BALLOTS_IN_INTAKE, &[&election_id], |r| int_pair(r))
                                .await?,
                        );
                    }
                    Ok(all)
                })
            })
            .await
    }

    /// The ids (as the roll gives them) of the voters who voted, in roll
    /// order.
    pub async fn voters_who_voted(
        &self,
        election_id: i64,
        district_ids: Vec<i64>,
    ) -> Result<Vec<String>, StoreError> {
        let roll = Arc::new(self.load_roll(election_id, district_ids).await?);
        self.mark_voted(election_id, roll.clone()).await?;
        self.store
            .read_scan(move |c| {
                let roll = roll.clone();
                Box::pin(async move {
                    let mut out = Vec::new();
                    c.for_each(&VOTER_REFS, &[&election_id], |r| {
                        if roll.has_voted(r.int(0)?) {
                            out.push(r.text(1)?);
                        }
                        Ok(())
                    })
                    .await?;
                    Ok(out)
                })
            })
            .await
    }
}

/// Why a step found no row to change: no election, or its state.
async fn refusal(tx: &Tx<'_>, election_id: i64) -> Result<StepRefused, StoreError> {
    let state = tx
        .query_opt(&STATE_OF, &[&election_id], |r| r.text(0))
        .await?;
    Ok(match state.as_deref().and_then(ElectionState::parse) {
        Some(s) => StepRefused::In(s),
        None => StepRefused::NotFound,
    })
}

async fn insert_definition(tx: &Tx<'_>, c: &Checked, actor: &str) -> Result<i64, StoreError> {
    let d = &c.definition;
    let id = tx.query_one(&NEXT_ID, &[], |r| r.int(0)).await?;
    tx.execute(
        &INSERT_ELECTION,
        &[
            &id,
            &d.name.as_str(),
            &c.opens_at_ms,
            &c.closes_at_ms,
            &d.candidates_per_vote_max,
            &false,
        ],
    )
    .await?;
    for (i, p) in d.parties.iter().enumerate() {
        let party_id = i as i64 + 1;
        tx.execute(
            &INSERT_PARTY,
            &[
                &id,
                &party_id,
                &p.name.as_str(),
                &p.code.as_str(),
                &p.colour.to_ascii_lowercase().as_str(),
            ],
        )
        .await?;
    }
    let mut candidate_id = 0i64;
    for (i, district) in d.districts.iter().enumerate() {
        let district_id = i as i64 + 1;
        tx.execute(
            &INSERT_DISTRICT,
            &[
                &id,
                &district_id,
                &district.name.as_str(),
                &district.code.as_str(),
                &district.region,
            ],
        )
        .await?;
        for list in &district.lists {
            let party_id = d
                .parties
                .iter()
                .position(|p| p.code == list.party)
                .map(|i| i as i64 + 1)
                .ok_or_else(|| StoreError::Internal("a checked list names a party".into()))?;
            for (pos, name) in list.candidates.iter().enumerate() {
                candidate_id += 1;
                tx.execute(
                    &INSERT_CANDIDATE,
                    &[
                        &id,
                        &candidate_id,
                        &district_id,
                        &party_id,
                        &(pos as i64 + 1),
                        &name.as_str(),
                    ],
                )
                .await?;
            }
        }
    }
    tx.append(election_event(
        id,
        "voting.ElectionDrafted",
        serde_json::json!({"actor": actor, "name": d.name, "districts": d.districts.len(),
            "parties": d.parties.len(), "candidates": candidate_id}),
    ))?;
    Ok(id)
}
