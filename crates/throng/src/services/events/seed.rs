//! `throng seed events --events N`: `MonthlyFeeCharged` events (see
//! `generator.rs`) appended in bulk, stored as the API stores them
//! (MessagePack maps + LZ4, an event id each), with a progress bar.
//!
//! Streams are `loan-{run}-{n}`, 12 events each (a year of monthly fees),
//! where `run` is the log's head when the seed started, so a second seed
//! never appends to the first one's streams. Payloads come from a pool of
//! [`POOL`] generated events (loans x months), encoded once: encoding each
//! event anew (~15 us of MessagePack and LZ4) would make the seed measure
//! the encoder instead of the store. Bulk loads keep the log's contract:
//! SQLite appends at max + 1 in transactions of [`CHUNK`] events (one
//! fsync each); PostgreSQL takes each chunk's positions from `event_head`
//! in the chunk's transaction.

use std::time::Instant;

use indicatif::ProgressBar;

use super::codec;
use super::generator::{self, CATEGORY, EVENT_TYPE};
use crate::store::eventlog::FORMAT_MSGPACK;
use crate::store::Store;

#[derive(Clone, Debug, clap::Args)]
pub struct SeedEventsArgs {
    /// Events to append.
    #[arg(long, default_value_t = 1_000_000)]
    pub events: u64,
    /// Events per stream (a loan's monthly fees).
    #[arg(long, default_value_t = 12)]
    pub events_per_stream: u64,
}

#[derive(Debug)]
pub struct SeedReport {
    pub events: u64,
    pub streams: u64,
    pub payload_bytes: u64,
    pub elapsed_s: f64,
}

/// Distinct generated payloads the seed cycles through.
pub const POOL: u64 = 4096;
/// Events per transaction.
const CHUNK: u64 = 20_000;

/// The pool: `POOL` events of `POOL / 12` loans, encoded as stored.
pub fn payload_pool() -> Vec<Vec<u8>> {
    (0..POOL)
        .map(|i| {
            let e = generator::fee_charged(i / 12, i % 12);
            codec::compress(rmp_serde::to_vec_named(&e).expect("an event encodes"))
        })
        .collect()
}

/// The row of event `i` of a seed run: stream, version, event id.
fn row(run: i64, per_stream: u64, i: u64) -> (String, i64, [u8; 16]) {
    let stream = format!("{CATEGORY}-{run}-{:09}", i / per_stream);
    // Time-ordered ids: their unique index grows at its right edge.
    (
        stream,
        (i % per_stream) as i64,
        uuid::Uuid::now_v7().into_bytes(),
    )
}

pub async fn seed(
    store: &Store,
    args: &SeedEventsArgs,
    progress: bool,
) -> anyhow::Result<SeedReport> {
    if args.events == 0 || args.events > 1_000_000_000 {
        anyhow::bail!("--events: 1 to 1000000000");
    }
    if !(1..=1_000_000).contains(&args.events_per_stream) {
        anyhow::bail!("--events-per-stream: 1 to 1000000");
    }
    let started = Instant::now();
    let pool = payload_pool();
    let bar =
        crate::platform::progress::seed_bar(args.events, "events", "seeding events", progress);
    let run = store.head_position().await?;
    let bytes = match store {
        Store::Sqlite(s) => {
            let path = s.path().to_path_buf();
            let args = args.clone();
            let bar2 = bar.clone();
            tokio::task::spawn_blocking(move || seed_sqlite(&path, &args, run, &pool, &bar2))
                .await??
        }
        Store::Postgres(p) => seed_pg(p, args, run, &pool, &bar).await?,
    };
    bar.finish();
    Ok(SeedReport {
        events: args.events,
        streams: args.events.div_ceil(args.events_per_stream),
        payload_bytes: bytes,
        elapsed_s: started.elapsed().as_secs_f64(),
    })
}

fn seed_sqlite(
    path: &std::path::Path,
    args: &SeedEventsArgs,
    run: i64,
    pool: &[Vec<u8>],
    bar: &ProgressBar,
) -> anyhow::Result<u64> {
    let mut conn = crate::store::sqlite::open_connection(path, 64 * 1024, false)?;
    let now = crate::base::clock::now_ms();
    let mut bytes = 0u64;
    let mut i = 0u64;
    while i < args.events {
        let end = (i + CHUNK).min(args.events);
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        {
            let mut ins = tx.prepare_cached(
                "INSERT INTO events (stream, event_type, payload, created_at_ms, stream_version,
                                     event_id, metadata, payload_format)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7)",
            )?;
            for n in i..end {
                let (stream, version, id) = row(run, args.events_per_stream, n);
                let payload = &pool[(n % POOL) as usize];
                bytes += payload.len() as u64;
                ins.execute(rusqlite::params![
                    stream,
                    EVENT_TYPE,
                    payload,
                    now,
                    version,
                    &id[..],
                    FORMAT_MSGPACK
                ])?;
            }
        }
        tx.commit()?;
        bar.inc(end - i);
        i = end;
    }
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
    Ok(bytes)
}

async fn seed_pg(
    store: &crate::store::postgres::PgStore,
    args: &SeedEventsArgs,
    run: i64,
    pool: &[Vec<u8>],
    bar: &ProgressBar,
) -> anyhow::Result<u64> {
    let mut client = store.client().await?;
    let now = crate::base::clock::now_ms();
    let mut bytes = 0u64;
    let mut i = 0u64;
    while i < args.events {
        let end = (i + CHUNK).min(args.events);
        let n = (end - i) as i64;
        let tx = client.transaction().await?;
        // The chunk's positions, under the row lock every append takes.
        let head: i64 = tx
            .query_one(
                "UPDATE event_head SET position = position + $1 WHERE id = 1 RETURNING position",
                &[&n],
            )
            .await?
            .get(0);
        let first = head - n + 1;
        let mut positions = Vec::with_capacity(n as usize);
        let mut streams = Vec::with_capacity(n as usize);
        let mut versions = Vec::with_capacity(n as usize);
        let mut ids = Vec::with_capacity(n as usize);
        let mut payloads: Vec<&[u8]> = Vec::with_capacity(n as usize);
        for (k, e) in (i..end).enumerate() {
            let (stream, version, id) = row(run, args.events_per_stream, e);
            let payload = &pool[(e % POOL) as usize];
            bytes += payload.len() as u64;
            positions.push(first + k as i64);
            streams.push(stream);
            versions.push(version);
            ids.push(id.to_vec());
            payloads.push(payload);
        }
        tx.execute(
            "INSERT INTO events (position, stream, event_type, payload, created_at_ms,
                                 stream_version, event_id, payload_format)
             SELECT p, s, $3, pl, $4, v, id, $7
               FROM UNNEST($1::BIGINT[], $2::TEXT[], $5::BYTEA[], $6::BIGINT[], $8::BYTEA[])
                 AS t(p, s, pl, v, id)",
            &[
                &positions,
                &streams,
                &EVENT_TYPE,
                &now,
                &payloads,
                &versions,
                &FORMAT_MSGPACK,
                &ids,
            ],
        )
        .await?;
        tx.commit().await?;
        bar.inc(end - i);
        i = end;
    }
    client.batch_execute("ANALYZE events").await?;
    Ok(bytes)
}
