//! Answers: a visitor's standing, an answer with its site's counts in one
//! transaction, forgetting a visitor.
//!
//! An answer is decided by the store's [`Decider`]: in the single writer by
//! `model::apply_answer` (read, decide, write), or by one upsert whose
//! `CASE`s state the same rules.

use super::counts::ADD_COUNTS;
use super::{standing_row, InvitesStore, Touching};
use crate::base::clock::day_of;
use crate::services::invites::model::{
    apply_answer, Answer, AnswerRules, AnswerState, Outcome, Standing,
};
use crate::store::{Columns, Conn, Sql, StoreError, Writers};

/// One answer to record.
#[derive(Clone, Copy, Debug)]
pub struct AnswerCmd {
    pub site_id: i64,
    /// The visitor's key in `invites_answers` (`InvitesStore::visitor_key`:
    /// its number where standings are kept in memory, else its id).
    pub visitor_id: i64,
    pub display: i64,
    pub answer: Answer,
    /// The site's rules (closesMax, asking again after No or the closes).
    pub rules: AnswerRules,
    pub now_ms: i64,
    /// The counts row this node adds to (`invites_counts.shard`).
    pub shard: i32,
}

/// How an answer is decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decider {
    /// Read the visitor's row, decide by `model::apply_answer`, write it
    /// back: sound where one writer runs commands one after another
    /// (SQLite), which also sets the visitor's byte in memory. Answered
    /// displays are a blob of 8-byte ids.
    InWriter,
    /// One upsert whose `CASE`s state `model::apply_answer`'s rules
    /// (PostgreSQL): a batch's commands are pipelined on one connection, so
    /// a read-then-write of two commands could interleave; one statement
    /// cannot. Nodes racing on one visitor meet at the row's lock.
    /// Answered displays are a `BIGINT[]`.
    Upsert,
}

static STANDING: Sql = Sql::new(
    "SELECT state, closes, updated_at_ms FROM invites_answers WHERE visitor_id = ?1 AND site_id = ?2",
);
static FORGET_VISITOR: Sql = Sql::new("DELETE FROM invites_answers WHERE visitor_id = ?1");

/// [`Decider::InWriter`]'s read: the row with its answered displays.
static ANSWER_ROW: Sql = Sql::new(
    "SELECT state, closes, updated_at_ms, displays FROM invites_answers WHERE visitor_id = ?1 AND site_id = ?2",
);
/// [`Decider::InWriter`]'s write: the row as decided.
static ANSWER_WRITE: Sql = Sql::new(
    "INSERT INTO invites_answers (visitor_id, site_id, state, closes, displays, updated_at_ms)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6)
     ON CONFLICT (visitor_id, site_id) DO UPDATE SET state = excluded.state,
        closes = excluded.closes, displays = excluded.displays, updated_at_ms = excluded.updated_at_ms",
);
/// Whether the stored row `a` is asked again (`AnswerRules::reopen`): a
/// "No" (state 2) or closed-out (3) row whose wait (?9, ?10 days; 0 never)
/// has passed on day ?11.
macro_rules! reopened {
    () => {
        "((a.state = 2 AND ?9::BIGINT > 0 AND ?11::BIGINT - a.updated_at_ms / 86400000 >= ?9::BIGINT)
          OR (a.state = 3 AND ?10::BIGINT > 0 AND ?11::BIGINT - a.updated_at_ms / 86400000 >= ?10::BIGINT))"
    };
}
/// The row's state as the rules see it.
macro_rules! eff_state {
    () => {
        concat!("(CASE WHEN ", reopened!(), " THEN 0 ELSE a.state END)")
    };
}
/// The row's closes as the rules see it.
macro_rules! eff_closes {
    () => {
        concat!("(CASE WHEN ", reopened!(), " THEN 0 ELSE a.closes END)")
    };
}
/// Nothing changes: a repeated display, or a final standing.
macro_rules! unchanged {
    () => {
        concat!("(?5 = ANY(a.displays) OR ", eff_state!(), " <> 0)")
    };
}

/// [`Decider::Upsert`]'s statement, PostgreSQL's (arrays): ?5 the display,
/// ?7 the answer (0 close, 1 yes, 2 no), ?8 closesMax, ?9 and ?10 the days
/// after which "No" and closed-out are asked again (0 never), ?11 today;
/// `last_outcome` reports 0 counted, 1 repeated display, 2 final already.
static ANSWER_UPSERT: Sql = Sql::new(concat!(
    "INSERT INTO invites_answers AS a
        (visitor_id, site_id, state, closes, displays, updated_at_ms, last_outcome)
     VALUES (?1, ?2, ?3::SMALLINT, ?4::SMALLINT, ARRAY[?5::BIGINT], ?6, 0)
     ON CONFLICT (visitor_id, site_id) DO UPDATE SET
        state = CASE WHEN ",
    unchanged!(),
    " THEN a.state
                     WHEN ?7::SMALLINT = 0 THEN CASE WHEN ",
    eff_closes!(),
    " + 1 >= ?8::SMALLINT THEN 3 ELSE 0 END
                     ELSE ?7::SMALLINT END,
        closes = CASE WHEN ",
    unchanged!(),
    " THEN a.closes WHEN ?7 <> 0 THEN ",
    eff_closes!(),
    " ELSE ",
    eff_closes!(),
    " + 1 END,
        displays = CASE WHEN ",
    unchanged!(),
    " THEN a.displays ELSE array_append(a.displays, ?5) END,
        updated_at_ms = CASE WHEN ",
    unchanged!(),
    " THEN a.updated_at_ms ELSE ?6 END,
        last_outcome = CASE WHEN ?5 = ANY(a.displays) THEN 1 WHEN ",
    eff_state!(),
    " <> 0 THEN 2 ELSE 0 END
     RETURNING state, closes, updated_at_ms, last_outcome"
));

/// What the answer changed in the site's counts.
fn count_deltas(before: Standing, after: Standing, outcome: Outcome) -> [i64; 4] {
    if outcome != Outcome::Counted {
        return [0; 4];
    }
    [
        (after.state == AnswerState::Yes) as i64,
        (after.state == AnswerState::No) as i64,
        after.closes - before.closes,
        (after.state == AnswerState::ClosedOut) as i64,
    ]
}

async fn add_counts(
    c: &Conn<'_>,
    cmd: &AnswerCmd,
    before: Standing,
    after: Standing,
    outcome: Outcome,
) -> Result<(), StoreError> {
    let [yes, no, closes, closed_out] = count_deltas(before, after, outcome);
    c.execute(
        &ADD_COUNTS,
        &[&cmd.site_id, &cmd.shard, &yes, &no, &closes, &closed_out],
    )
    .await?;
    Ok(())
}

impl Decider {
    /// The decider of a store whose writes are made so.
    pub fn for_writers(writers: Writers) -> Decider {
        match writers {
            Writers::OneProcess => Decider::InWriter,
            Writers::Shared => Decider::Upsert,
        }
    }

    /// Records an answer with the site's counts on `c` (the writer's
    /// transaction, or one of its own), leaving memory alone.
    pub async fn decide(
        self,
        c: &Conn<'_>,
        cmd: &AnswerCmd,
    ) -> Result<(Standing, Outcome), StoreError> {
        match self {
            Decider::InWriter => in_writer(c, cmd).await,
            Decider::Upsert => upsert(c, cmd).await,
        }
    }
}

async fn in_writer(c: &Conn<'_>, cmd: &AnswerCmd) -> Result<(Standing, Outcome), StoreError> {
    let row = c
        .query_opt(&ANSWER_ROW, &[&cmd.visitor_id, &cmd.site_id], |r| {
            Ok((standing_row(r)?, r.bytes(3)?))
        })
        .await?;
    let (before, mut displays) = row.unwrap_or_default();
    let today = day_of(cmd.now_ms);
    let answered: Vec<i64> = displays
        .chunks_exact(8)
        .map(|b| i64::from_be_bytes(b.try_into().expect("8 bytes")))
        .collect();
    let (after, outcome) = apply_answer(
        before,
        &answered,
        cmd.display,
        cmd.answer,
        &cmd.rules,
        today,
    );
    if outcome != Outcome::Counted {
        return Ok((after, outcome));
    }
    // The counts' deltas from the standing as the rules saw it.
    let before = cmd.rules.reopen(before, today);
    displays.extend_from_slice(&cmd.display.to_be_bytes());
    c.execute(
        &ANSWER_WRITE,
        &[
            &cmd.visitor_id,
            &cmd.site_id,
            &(after.state as i64),
            &after.closes,
            &displays,
            &cmd.now_ms,
        ],
    )
    .await?;
    add_counts(c, cmd, before, after, outcome).await?;
    Ok((after, outcome))
}

async fn upsert(c: &Conn<'_>, cmd: &AnswerCmd) -> Result<(Standing, Outcome), StoreError> {
    // A first answer's row, as apply_answer makes it.
    let today = day_of(cmd.now_ms);
    let (first, _) = apply_answer(
        Standing::default(),
        &[],
        cmd.display,
        cmd.answer,
        &cmd.rules,
        today,
    );
    let code: i16 = match cmd.answer {
        Answer::Close => 0,
        Answer::Yes => 1,
        Answer::No => 2,
    };
    // Prepared once per connection (as every statement of the seam):
    // planning the upsert on the partitioned table took longer than
    // running it.
    let (after, last_outcome) = c
        .query_one(
            &ANSWER_UPSERT,
            &[
                &cmd.visitor_id,
                &cmd.site_id,
                &(first.state as i16),
                &(first.closes as i16),
                &cmd.display,
                &cmd.now_ms,
                &code,
                &(cmd.rules.closes_max as i16),
                &cmd.rules.ask_again_after_no_days,
                &cmd.rules.ask_again_after_closes_days,
                &(today as i64),
            ],
            |r| Ok((standing_row(r)?, r.int(3)?)),
        )
        .await?;
    let outcome = match last_outcome {
        0 => Outcome::Counted,
        1 => Outcome::Repeated,
        _ => Outcome::Final,
    };
    if outcome == Outcome::Counted {
        let before = Standing {
            state: AnswerState::Asking,
            closes: after.closes - (cmd.answer == Answer::Close) as i64,
            day: today,
        };
        add_counts(c, cmd, before, after, outcome).await?;
    }
    Ok((after, outcome))
}

impl InvitesStore {
    /// A visitor's standing with a site (`key`: [`InvitesStore::visitor_key`]):
    /// from memory where kept and known there, else from the table (the
    /// default when it never answered).
    pub async fn standing(&self, site_id: i64, key: i64) -> Result<Standing, StoreError> {
        if let Some(known) = self.index().and_then(|index| index.get(key)) {
            return Ok(known);
        }
        // Not through SQLite's memory map: 6M visitors' rows would all end
        // up in the server's resident memory (see `Store::read_paged`).
        self.store
            .read_paged(move |c| {
                Box::pin(async move {
                    Ok(
                        c.query_opt(&STANDING, &[&key, &site_id], |r| standing_row(r))
                            .await?
                            .unwrap_or_default(),
                    )
                })
            })
            .await
    }

    /// Records an answer with the site's counts, one command of the
    /// writer's group commit; where standings are kept in memory, the
    /// command sets the visitor's byte.
    pub async fn answer(&self, cmd: AnswerCmd) -> Result<(Standing, Outcome), StoreError> {
        match self.decider {
            Decider::InWriter => {
                let touching = Touching::new(self.index());
                let touch = touching.in_writer();
                let r = self
                    .store
                    .write(move |tx| {
                        let touch = touch.clone();
                        Box::pin(async move {
                            let (after, outcome) = in_writer(tx, &cmd).await?;
                            if let (Some(index), Outcome::Counted) = (touch.index(), outcome) {
                                index.record(cmd.visitor_id, Some(after));
                            }
                            Ok((after, outcome))
                        })
                    })
                    .await;
                touching.settle(r)
            }
            Decider::Upsert => {
                self.store
                    .write(move |tx| Box::pin(async move { upsert(tx, &cmd).await }))
                    .await
            }
        }
    }

    /// Deletes every answer of a visitor (all sites; `key`:
    /// [`InvitesStore::visitor_key`]); the rows deleted. An erasure
    /// ([`Store::write_erasing`]): on SQLite no file of the store holds
    /// the rows when this answers.
    ///
    /// [`Store::write_erasing`]: crate::store::Store::write_erasing
    pub async fn forget_visitor(&self, key: i64) -> Result<u64, StoreError> {
        let touching = Touching::new(self.index());
        let touch = touching.in_writer();
        let r = self
            .store
            .write_erasing(move |tx| {
                let touch = touch.clone();
                Box::pin(async move {
                    let n = tx.execute(&FORGET_VISITOR, &[&key]).await?;
                    if let Some(index) = touch.index() {
                        index.forget(key);
                    }
                    Ok(n)
                })
            })
            .await;
        touching.settle(r)
    }
}
