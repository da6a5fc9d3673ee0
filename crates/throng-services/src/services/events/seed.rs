//! `throng seed events --events N`: `MonthlyFeeCharged` events (see
//! `generator.rs`) appended in bulk, stored as the API stores them
//! (MessagePack maps + LZ4, an event id each), with a progress bar.
//!
//! Streams are `loan-{run}-{n}`, 12 events each (a year of monthly fees),
//! where `run` is the log's head when the seed started, so a second seed
//! never appends to the first one's streams. Every event is generated and
//! encoded (its own loan, schedule and amounts) on a thread of its own,
//! handed to the loading one in bounded chunks. Bulk loads keep the log's contract:
//! SQLite appends at max + 1 in transactions of [`CHUNK`] events (one
//! fsync each); PostgreSQL takes each chunk's positions from `event_head`
//! in the chunk's transaction.

use std::sync::Arc;
use std::time::Instant;

use super::codec;
use super::generator::{self, CATEGORY, EVENT_TYPE};
use crate::store::eventlog::{VersionedEvent, FORMAT_MSGPACK};
use crate::store::Store;

#[derive(Clone, Debug, clap::Args)]
pub struct SeedEventsArgs {
    /// Events to append.
    #[arg(long, default_value_t = 1_000_000)]
    pub events: u64,
    /// Events per stream (a loan's monthly fees).
    #[arg(long, default_value_t = 12)]
    pub events_per_stream: u64,
    /// Seed even if the store holds seeded events already (another run's
    /// streams are added; nothing is replaced).
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug)]
pub struct SeedReport {
    pub events: u64,
    pub streams: u64,
    pub payload_bytes: u64,
    pub elapsed_s: f64,
}

/// Distinct generated payloads in [`payload_pool`] (the bench's requests).
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

/// One seeded event, at its version in its new stream.
type Row = VersionedEvent;

/// The row of event `i` of a seed run: loan `i / per_stream` of this run,
/// its month `i % per_stream`.
fn row(run: i64, per_stream: u64, i: u64) -> Row {
    let stream_no = i / per_stream;
    let month = i % per_stream;
    let stream = format!("{CATEGORY}-{run}-{stream_no:09}");
    let loan = (run as u64)
        .wrapping_mul(1_000_000_007)
        .wrapping_add(stream_no);
    let event = generator::fee_charged(loan, month);
    let payload = codec::compress(rmp_serde::to_vec_named(&event).expect("an event encodes"));
    // Time-ordered ids: their unique index grows at its right edge.
    VersionedEvent {
        stream,
        version: month as i64,
        event_id: uuid::Uuid::now_v7().into_bytes(),
        event_type: EVENT_TYPE,
        payload,
        format: FORMAT_MSGPACK,
    }
}

/// Generates the run's rows on a thread of its own, in chunks of [`CHUNK`]
/// (at most two waiting).
fn produce(args: &SeedEventsArgs, run: i64) -> tokio::sync::mpsc::Receiver<Vec<Row>> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Vec<Row>>(2);
    let (events, per_stream) = (args.events, args.events_per_stream);
    std::thread::spawn(move || {
        let mut i = 0;
        while i < events {
            let end = (i + CHUNK).min(events);
            let chunk: Vec<Row> = (i..end).map(|n| row(run, per_stream, n)).collect();
            if tx.blocking_send(chunk).is_err() {
                return;
            }
            i = end;
        }
    });
    rx
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
    let bar =
        crate::platform::progress::seed_bar(args.events, "events", "seeding events", progress);
    let run = store.head_position().await?;
    let before = store.meta_get(SEEDED_KEY).await?;
    if let (Some(runs), false) = (&before, args.force) {
        anyhow::bail!(
            "the store holds seeded events already (runs from positions {runs}); --force adds \
             another run"
        );
    }
    let bytes = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (counted, shown) = (bytes.clone(), bar.clone());
    store
        .append_versioned(produce(args, run), move |chunk| {
            let n: u64 = chunk.iter().map(|r| r.payload.len() as u64).sum();
            counted.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            shown.inc(chunk.len() as u64);
        })
        .await?;
    let bytes = bytes.load(std::sync::atomic::Ordering::Relaxed);
    bar.finish();
    let runs = match before {
        Some(runs) => format!("{runs},{}", run + 1),
        None => (run + 1).to_string(),
    };
    store.meta_set(SEEDED_KEY, &runs).await?;
    Ok(SeedReport {
        events: args.events,
        streams: args.events.div_ceil(args.events_per_stream),
        payload_bytes: bytes,
        elapsed_s: started.elapsed().as_secs_f64(),
    })
}

/// `meta` key set by every seed: the runs' first positions.
const SEEDED_KEY: &str = "events_seed_runs";
