//! Registrations: read, inserted, changed and deleted, with their events.
//! How a registration's slot is decided is the strategy's (`in_memory.rs`,
//! `slot_rows.rs`); these are the statements both share.

use super::super::model::{Day, SealedRegistration, SlotRef};
use super::{cancelled_event, moved_event};
use crate::store::{Columns, Sql, Store, StoreError, Tx};

/// A registration's columns, as [`registration_row`] reads them.
macro_rules! select_registration {
    () => {
        "SELECT id, access_hash, place_id, day, time_slot, person_sealed, created_at_ms, person_key
         FROM booking_registrations"
    };
}

static REGISTRATION: Sql = Sql::new(concat!(select_registration!(), " WHERE id = ?1"));
/// A registration read by the write that changes it. Where writers are
/// shared the row lock serialises moves and cancels of one registration;
/// SQLite's one writer runs them one at a time anyway (and has no `FOR
/// UPDATE`).
static REGISTRATION_FOR_CHANGE: Sql = Sql::per_dialect(
    concat!(select_registration!(), " WHERE id = ?1"),
    concat!(select_registration!(), " WHERE id = $1 FOR UPDATE"),
);
static INSERT: Sql = Sql::new(
    "INSERT INTO booking_registrations
        (id, access_hash, place_id, day, time_slot, person_sealed, created_at_ms, person_key)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
);
static DELETE: Sql = Sql::new("DELETE FROM booking_registrations WHERE id = ?1");
/// A cancelled registration's sealed contact data, kept for its
/// cancellation message (the messages worker deletes it once sent).
static KEEP_CANCELLED: Sql = Sql::new(
    "INSERT INTO booking_cancelled (id, place_id, day, time_slot, person_sealed, cancelled_at_ms)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (id) DO NOTHING",
);
static MOVE: Sql = Sql::new(
    "UPDATE booking_registrations SET place_id = ?2, day = ?3, time_slot = ?4, person_key = ?5
     WHERE id = ?1",
);

/// A row of [`REGISTRATION`].
fn registration_row(r: &impl Columns) -> Result<SealedRegistration, StoreError> {
    Ok(SealedRegistration {
        id: r.text(0)?,
        access_hash: r.bytes(1)?,
        place_id: r.int(2)?,
        day: Day(r.int4(3)?),
        time_slot: r.int4(4)?,
        person_sealed: r.bytes(5)?,
        created_at_ms: r.int(6)?,
        person_key: r.opt_bytes(7)?,
    })
}

/// A registration by id.
pub async fn get(store: &Store, id: &str) -> Result<Option<SealedRegistration>, StoreError> {
    let id = id.to_string();
    store
        .read(move |c| {
            Box::pin(async move {
                c.query_opt(&REGISTRATION, &[&id], |r| registration_row(r))
                    .await
            })
        })
        .await
}

/// Which registration a move or a cancel changes, and the code that must
/// open it.
#[derive(Clone)]
pub struct Change {
    pub id: String,
    pub access_code: String,
}

impl Change {
    /// The registration, read by the write that changes it, if the code
    /// opens it.
    pub async fn read(&self, tx: &Tx<'_>) -> Result<Option<SealedRegistration>, StoreError> {
        let reg = tx
            .query_opt(&REGISTRATION_FOR_CHANGE, &[&self.id], |r| {
                registration_row(r)
            })
            .await?;
        Ok(reg
            .filter(|reg| super::super::access_code::matches(&self.access_code, &reg.access_hash)))
    }

    /// Deletes the registration if the code opens it, with its
    /// `RegistrationCancelled` event; the registration deleted.
    pub async fn delete(&self, tx: &Tx<'_>) -> Result<Option<SealedRegistration>, StoreError> {
        let Some(reg) = self.read(tx).await? else {
            return Ok(None);
        };
        if tx.execute(&DELETE, &[&self.id]).await? == 0 {
            return Ok(None);
        }
        tx.execute(
            &KEEP_CANCELLED,
            &[
                &reg.id,
                &reg.place_id,
                &reg.day.0,
                &reg.time_slot,
                &reg.person_sealed,
                &crate::base::clock::now_ms(),
            ],
        )
        .await?;
        tx.append(cancelled_event(&reg))?;
        Ok(Some(reg))
    }
}

/// Stores a registration that took its slot.
pub async fn insert(tx: &Tx<'_>, reg: &SealedRegistration) -> Result<(), StoreError> {
    tx.execute(
        &INSERT,
        &[
            &reg.id,
            &reg.access_hash,
            &reg.place_id,
            &reg.day.0,
            &reg.time_slot,
            &reg.person_sealed,
            &reg.created_at_ms,
            &reg.person_key,
        ],
    )
    .await?;
    Ok(())
}

/// Records `reg`'s move to `to` (whose slot it took), with its
/// `RegistrationMoved` event.
pub async fn record_move(
    tx: &Tx<'_>,
    reg: &SealedRegistration,
    to: SlotRef,
    to_person_key: &Option<Vec<u8>>,
) -> Result<(), StoreError> {
    tx.execute(
        &MOVE,
        &[
            &reg.id,
            &to.place_id,
            &to.day.0,
            &to.time_slot,
            to_person_key,
        ],
    )
    .await?;
    tx.append(moved_event(reg, to))
}
