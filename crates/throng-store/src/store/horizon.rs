//! The PostgreSQL event log's read horizon: the highest position below
//! which no event can still appear, so a reader that stops there never
//! skips one.
//!
//! Writers take positions from a sequence (`event_position`) near the end of
//! their transactions, without waiting for one another, so positions commit
//! out of order (A takes 7, B takes 8, B commits first) and a rolled-back
//! batch leaves a hole. A reader that read "after 6" up to 8 and moved on
//! would skip 7 when A commits. So a reader reads only up to the horizon.
//!
//! The protocol (the transaction-id watermark PgQ's ticker uses, kept per
//! node in memory instead of in a tick table):
//!
//! 1. A writing transaction has its transaction id before it takes a
//!    position (`postgres.rs` asks `pg_current_xact_id()` first).
//! 2. A sample reads the sequence's last value `L`, then, in a later
//!    statement, the ids of the transactions running in this database. Any
//!    transaction holding a position <= `L` took it before `L` was read, so
//!    it had its id by then: it has either finished (its events are visible
//!    to every statement after this one) or is in the sample's set.
//! 3. Once none of a sample's transactions is running any more, every
//!    position <= `L` is final (committed or never to be): the horizon
//!    moves to `L`. A sample with an empty set is final at once.
//!
//! Each read of the log takes one sample (one round trip, the two
//! statements pipelined), which also retires the older samples. Samples
//! are taken one at a time per node and recorded in the order taken: a
//! set of running transactions may only retire samples taken before it (a
//! set read earlier than a sample knows nothing of transactions that began
//! after it). A reader that arrives while a sample is being taken waits
//! for the next one that starts after it arrived, or takes it. The
//! horizon lags the newest commit by about one write transaction; a
//! long-running writer in this database (a seed, a voting round) holds it
//! back until it ends, which is what keeps readers from skipping its
//! events. Transactions of other databases on the same server are not
//! counted (running ids are read from `pg_stat_activity` for this database
//! only), so they hold nothing back.

use std::collections::VecDeque;
use std::sync::Mutex;

use super::StoreError;

/// Samples kept waiting for their transactions at most; past it new samples
/// are dropped (only freshness is lost: a later one is taken when the older
/// ones retire).
const SAMPLES_MAX: usize = 1024;

/// Reads the sequence's last value (first statement of a sample) under the
/// sequence's buffer lock. A plain `SELECT last_value FROM event_position`
/// reads the row without that lock, and `nextval` briefly writes the value
/// it logs ahead (up to 32 past the last one handed out) into the row while
/// it writes its WAL record: such a read saw a value no session held yet,
/// the horizon moved past positions taken after it, and a reader skipped
/// them (a plain read went backwards twice in 400,000 under 8 sessions
/// taking positions; the locked read never). NULL means no value was ever
/// handed out: the log is empty.
pub const LAST_SQL: &str = "SELECT COALESCE(pg_sequence_last_value('event_position'), 0)";
/// Reads the transactions running in this database (second statement).
/// `backend_xid` is set from the moment a transaction has an id.
const RUNNING_SQL: &str = "SELECT COALESCE(array_agg(backend_xid::text), '{}')
       FROM pg_stat_activity
      WHERE datname = current_database() AND backend_xid IS NOT NULL";

#[derive(Default)]
pub struct Horizon {
    state: Mutex<State>,
    /// Held while a sample is taken and recorded (one at a time).
    sampling: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct State {
    /// Every position up to this one is final.
    safe: i64,
    /// (last value, transactions running then), oldest first.
    waiting: VecDeque<(i64, Vec<u32>)>,
    /// When the last recorded sample began.
    last_sample_began: Option<std::time::Instant>,
}

impl Horizon {
    /// Takes a sample on `client` (autocommit: each statement its own
    /// snapshot) and returns the horizon.
    pub async fn read(&self, client: &tokio_postgres::Client) -> Result<i64, StoreError> {
        let last_stmt = client.prepare(LAST_SQL);
        let running_stmt = client.prepare(RUNNING_SQL);
        let (last_stmt, running_stmt) = futures::try_join!(last_stmt, running_stmt)?;
        self.read_prepared(client, &last_stmt, &running_stmt).await
    }

    /// As [`Horizon::read`] on a pooled connection (its statements cached).
    pub async fn read_pooled(&self, client: &deadpool_postgres::Client) -> Result<i64, StoreError> {
        let (last_stmt, running_stmt) = futures::try_join!(
            client.prepare_cached(LAST_SQL),
            client.prepare_cached(RUNNING_SQL)
        )?;
        self.read_prepared(client, &last_stmt, &running_stmt).await
    }

    async fn read_prepared(
        &self,
        client: &tokio_postgres::Client,
        last_stmt: &tokio_postgres::Statement,
        running_stmt: &tokio_postgres::Statement,
    ) -> Result<i64, StoreError> {
        let arrived = std::time::Instant::now();
        let _one_at_a_time = self.sampling.lock().await;
        {
            // A sample that began after this reader arrived is as fresh as
            // one it would take now.
            let st = self.state.lock().unwrap();
            if st.last_sample_began.is_some_and(|began| began >= arrived) {
                return Ok(st.safe);
            }
        }
        let began = std::time::Instant::now();
        // Sent in this order on one connection, so the second statement
        // runs after the first (see step 2 of the module doc).
        let (last, running) = futures::try_join!(
            client.query_one(last_stmt, &[]),
            client.query_one(running_stmt, &[])
        )?;
        let last: i64 = last.get(0);
        let running: Vec<u32> = running
            .get::<_, Vec<String>>(0)
            .iter()
            .filter_map(|x| x.parse().ok())
            .collect();
        let safe = self.sampled(last, running);
        self.state.lock().unwrap().last_sample_began = Some(began);
        Ok(safe)
    }

    /// Records a sample (`last`, transactions running after it was read)
    /// and returns the horizon.
    fn sampled(&self, last: i64, running: Vec<u32>) -> i64 {
        let mut st = self.state.lock().unwrap();
        // A sample retires when none of its transactions runs any more.
        let mut safe = st.safe;
        st.waiting.retain(|(l, ids)| {
            let done = ids.iter().all(|id| !running.contains(id));
            if done {
                safe = safe.max(*l);
            }
            !done
        });
        if running.is_empty() {
            safe = safe.max(last);
            st.waiting.clear();
        } else if st.waiting.len() < SAMPLES_MAX {
            st.waiting.push_back((last, running));
        }
        st.safe = safe;
        safe
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_counts_once_its_transactions_ended() {
        let h = Horizon::default();
        // Nothing running: the last value is final at once.
        assert_eq!(h.sampled(5, vec![]), 5);
        // 100 and 101 run: positions up to 9 may still come.
        assert_eq!(h.sampled(9, vec![100, 101]), 5);
        // 101 ended, 100 still runs, 102 began: still 5.
        assert_eq!(h.sampled(12, vec![100, 102]), 5);
        // 100 ended: the first sample retires (9); the second waits for 102.
        assert_eq!(h.sampled(14, vec![102, 103]), 9);
        // 102 and 103 ended, 104 runs.
        assert_eq!(h.sampled(20, vec![104]), 14);
        assert_eq!(h.sampled(20, vec![]), 20);
    }

    #[test]
    fn the_horizon_never_moves_back() {
        let h = Horizon::default();
        assert_eq!(h.sampled(30, vec![]), 30);
        // A sample whose value is older than the horizon changes nothing.
        assert_eq!(h.sampled(10, vec![]), 30);
    }

    #[test]
    fn samples_are_bounded() {
        let h = Horizon::default();
        for i in 0..(SAMPLES_MAX as i64 + 50) {
            h.sampled(i, vec![1]);
        }
        assert_eq!(h.state.lock().unwrap().waiting.len(), SAMPLES_MAX);
        assert_eq!(h.sampled(5000, vec![]), 5000);
    }
}
