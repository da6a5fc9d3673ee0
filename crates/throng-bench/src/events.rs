//! `throng bench events`: the write-up's measurements, reproduced.
//!
//! Offline (before the server starts, reading the seeded store):
//! - bytes per `MonthlyFeeCharged` event as JSON, MessagePack (maps with
//!   field names, and rmp-serde's default arrays) and MessagePack+LZ4,
//!   beside the write-up's 9,444 / 3,902 / 2,138;
//! - decode time per event, the full contract type against the read
//!   model's 5-field type, for JSON and MessagePack+LZ4;
//! - a read-model rebuild from the database: every seeded event read in
//!   position order (streamed: one statement stepped row by row on one
//!   thread, decoded there, handed in bounded batches to the thread that
//!   writes the read model), reported as events/s and the time 25,000,000
//!   would take, beside the write-up's 1 h 45 min -> 9 min.
//!
//! Over HTTP (the harness's workloads, as a ratio to `GET /health`): single
//! appends of one event as JSON, and batched appends of
//! [`BATCH_EVENTS`] events as MessagePack with LZ4-compressed data (events/s
//! is the request rate times the batch).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use throng_load::measure::RequestSpec;

use crate::experiment::{mix64, Experiment, Scale, Workload};
use crate::platform::auth::{Role, TokenKeys};
use crate::services::events::codec;
use crate::services::events::generator::{self, FeeCharged, FeeChargedRead, EVENT_TYPE};
use crate::store::{Columns, Param, Sql, Store, StoreLimits, StoreUrl};
use crate::token_secret::token_secret;

pub struct EventsBench;

/// Events per batched append (MessagePack+LZ4, ~2.4 KB each: ~48 KB, under
/// the default --body-limit-bytes of 64 KiB).
pub const BATCH_EVENTS: u64 = 20;
/// Generated events the size and decode figures are averaged over.
const SAMPLE: u64 = 1000;

fn events_of(scale: Scale) -> u64 {
    match scale {
        Scale::Full => 1_000_000,
        Scale::Quick => 20_000,
    }
}

impl Experiment for EventsBench {
    fn name(&self) -> &'static str {
        "events"
    }
    fn about(&self) -> &'static str {
        "event store: payload sizes, decode times, a read-model rebuild, appends"
    }
    fn seed_args(&self, scale: Scale) -> Vec<String> {
        vec![
            "events".into(),
            "--events".into(),
            events_of(scale).to_string(),
        ]
    }
    fn serve_args(&self) -> Vec<String> {
        // Sets THRONG_TOKEN_SECRET before the server starts (it inherits it).
        token_secret();
        Vec::new()
    }
    fn workloads(&self, _scale: Scale) -> Vec<Workload> {
        let token = Arc::new(format!(
            "Bearer {}",
            TokenKeys::new(token_secret()).issue("bench", Role::ADMIN, 24 * 3600)
        ));
        let pool = Arc::new(json_pool());
        let single = {
            let (token, pool) = (token.clone(), pool.clone());
            Arc::new(move |seq: u64| {
                let body = format!(
                    r#"[{{"eventId":"{}","type":"{EVENT_TYPE}","data":{}}}]"#,
                    event_id(seq, 1),
                    pool[(seq % pool.len() as u64) as usize]
                );
                append_spec(&token, seq, "application/json", body.into_bytes())
            })
        };
        let packed = Arc::new(crate::services::events::seed::payload_pool());
        let batch = {
            let token = token.clone();
            Arc::new(move |seq: u64| {
                append_spec(
                    &token,
                    seq,
                    "application/vnd.msgpack",
                    msgpack_batch(&packed, seq),
                )
            })
        };
        vec![
            Workload {
                name: "POST append, 1 event (9.4 KB JSON)".into(),
                factory: single,
                ok_statuses: vec![201],
                target_ratio_min: Some(0.4),
                published: "(none: the write-up measured reads)".into(),
                comparison: false,
                ..Workload::default()
            },
            Workload {
                name: format!("POST append, {BATCH_EVENTS} events (MessagePack+LZ4)"),
                factory: batch,
                ok_statuses: vec![201],
                target_ratio_min: None,
                published: format!("events/s = req/s x {BATCH_EVENTS}"),
                comparison: false,
                ..Workload::default()
            },
        ]
    }
    fn notes(&self) -> Vec<String> {
        vec![
            "write-up: 25,000,000 of ~500,000,000 events (3 TB, SQL Server metadata + Azure \
             Blob payloads) per read-model rebuild; JSON 1 h 45 min (29 min transfer + 1 h 15 \
             min deserializing), MessagePack+LZ4 with a 5-field proxy type 9 min (~46,000 \
             events/s)"
                .into(),
        ]
    }
    fn offline(&self, store: &StoreUrl, scale: Scale) -> anyhow::Result<Vec<String>> {
        let mut lines = codec_figures();
        lines.extend(rebuild(store, events_of(scale))?);
        Ok(lines)
    }
}

fn event_id(seq: u64, salt: u64) -> uuid::Uuid {
    uuid::Uuid::from_u64_pair(mix64(seq, salt), mix64(seq, salt ^ 0xabcdef))
}

fn append_spec(token: &str, seq: u64, content_type: &str, body: Vec<u8>) -> RequestSpec {
    RequestSpec {
        method: http::Method::POST,
        // A new stream per request: appends that never conflict.
        path_and_query: format!("/api/events/streams/bench-{:016x}", mix64(seq, 7)),
        headers: vec![
            ("content-type".into(), content_type.into()),
            ("authorization".into(), token.into()),
        ],
        body: body.into(),
    }
}

fn json_pool() -> Vec<String> {
    (0..64)
        .map(|i| serde_json::to_string(&generator::fee_charged(i, i % 12)).expect("JSON"))
        .collect()
}

/// `[{eventId, type, data: <stored bytes>}, ...]` in MessagePack.
fn msgpack_batch(packed: &[Vec<u8>], seq: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(BATCH_EVENTS as usize * 2300);
    rmp::encode::write_array_len(&mut out, BATCH_EVENTS as u32).expect("a Vec");
    for k in 0..BATCH_EVENTS {
        rmp::encode::write_map_len(&mut out, 3).expect("a Vec");
        rmp::encode::write_str(&mut out, "eventId").expect("a Vec");
        rmp::encode::write_str(&mut out, &event_id(seq * BATCH_EVENTS + k, 2).to_string())
            .expect("a Vec");
        rmp::encode::write_str(&mut out, "type").expect("a Vec");
        rmp::encode::write_str(&mut out, EVENT_TYPE).expect("a Vec");
        rmp::encode::write_str(&mut out, "data").expect("a Vec");
        out.extend_from_slice(&packed[((seq * BATCH_EVENTS + k) % packed.len() as u64) as usize]);
    }
    out
}

// ------------------------------------------------------------ sizes, decode

/// Mean microseconds per call of `f` over `inputs`, repeated for at least
/// `min` (the median of 5 such rounds).
fn time_per_item<T>(inputs: &[T], min: Duration, mut f: impl FnMut(&T)) -> f64 {
    let mut rounds: Vec<f64> = (0..5)
        .map(|_| {
            let started = Instant::now();
            let mut n = 0u64;
            while started.elapsed() < min {
                for x in inputs {
                    f(x);
                }
                n += inputs.len() as u64;
            }
            started.elapsed().as_secs_f64() * 1e6 / n as f64
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[2]
}

fn decode_lz4<T: DeserializeOwned>(stored: &[u8]) -> T {
    let plain = codec::decompress(stored, 1 << 20).expect("our own block");
    rmp_serde::from_slice(&plain).expect("our own MessagePack")
}

/// The read model's 5 fields of a stored event, by name, stopping once
/// found (see `codec::partial`).
pub fn decode_read(stored: &[u8]) -> FeeChargedRead {
    codec::partial_stored(stored, &generator::READ_FIELDS, 1 << 20).expect("our own payload")
}

fn mean(xs: &[Vec<u8>]) -> f64 {
    xs.iter().map(|x| x.len()).sum::<usize>() as f64 / xs.len() as f64
}

/// Sizes and decode times of [`SAMPLE`] generated events.
pub fn codec_figures() -> Vec<String> {
    let events: Vec<FeeCharged> = (0..SAMPLE)
        .map(|i| generator::fee_charged(i / 12, i % 12))
        .collect();
    let json: Vec<Vec<u8>> = events
        .iter()
        .map(|e| serde_json::to_vec(e).expect("JSON"))
        .collect();
    let named: Vec<Vec<u8>> = events
        .iter()
        .map(|e| rmp_serde::to_vec_named(e).expect("MessagePack"))
        .collect();
    let arrays: Vec<Vec<u8>> = events
        .iter()
        .map(|e| rmp_serde::to_vec(e).expect("MessagePack"))
        .collect();
    let named_lz4: Vec<Vec<u8>> = named.iter().map(|m| codec::compress(m.clone())).collect();
    let arrays_lz4: Vec<Vec<u8>> = arrays.iter().map(|m| codec::compress(m.clone())).collect();
    let min = Duration::from_millis(200);
    let json_full = time_per_item(&json, min, |b| {
        std::hint::black_box(serde_json::from_slice::<FeeCharged>(b).expect("JSON"));
    });
    let json_read = time_per_item(&json, min, |b| {
        std::hint::black_box(serde_json::from_slice::<FeeChargedRead>(b).expect("JSON"));
    });
    let lz4_full = time_per_item(&named_lz4, min, |b| {
        std::hint::black_box(decode_lz4::<FeeCharged>(b));
    });
    let lz4_read_serde = time_per_item(&named_lz4, min, |b| {
        std::hint::black_box(decode_lz4::<FeeChargedRead>(b));
    });
    let lz4_read = time_per_item(&named_lz4, min, |b| {
        std::hint::black_box(decode_read(b));
    });
    let mp_read = time_per_item(&named, min, |b| {
        std::hint::black_box(
            codec::partial::<FeeChargedRead>(b, &generator::READ_FIELDS).expect("MessagePack"),
        );
    });
    let lz4_only = time_per_item(&named_lz4, min, |b| {
        std::hint::black_box(codec::decompress(b, 1 << 20).expect("our own block"));
    });
    vec![
        format!(
            "bytes per event (mean of {SAMPLE}): JSON {:.0} | MessagePack maps {:.0} | \
             MessagePack maps+LZ4 {:.0} (kept) | MessagePack arrays {:.0} | arrays+LZ4 {:.0}; \
             write-up: 9,444 | 3,902 | 2,138; JSON / kept = {:.1}x (write-up 4.4x)",
            mean(&json),
            mean(&named),
            mean(&named_lz4),
            mean(&arrays),
            mean(&arrays_lz4),
            mean(&json) / mean(&named_lz4)
        ),
        format!(
            "decode us per event: JSON full {json_full:.1} -> JSON 5-field {json_read:.1} \
             ({:.1}x; write-up 160 -> 50 us, 3.2x) | MessagePack+LZ4 full {lz4_full:.1} -> \
             5-field {lz4_read:.1} (LZ4 alone {lz4_only:.1}, the 5 fields from MessagePack \
             {mp_read:.2}; serde's derived 5-field type, which reads the whole map, \
             {lz4_read_serde:.1}); JSON full / MessagePack+LZ4 5-field = {:.1}x (write-up 28x)",
            json_full / json_read,
            json_full / lz4_read
        ),
    ]
}

// ---------------------------------------------------------------- rebuild

/// Decoded events handed from the reading thread to the writing one in
/// batches of this many, at most `REBUILD_BATCHES_IN_FLIGHT` batches
/// queued: the rebuild's memory is bounded whatever the log's length.
const REBUILD_BATCH: usize = 4096;
const REBUILD_BATCHES_IN_FLIGHT: usize = 4;

/// The read model: per loan, the fees charged, their total and the last
/// balance.
static READ_MODEL_TABLE: Sql = Sql::new(
    "CREATE TABLE fee_model (
    loan_id TEXT PRIMARY KEY, fee_type TEXT NOT NULL, fees BIGINT NOT NULL,
    fees_total DOUBLE PRECISION NOT NULL, last_charged_on TEXT NOT NULL,
    balance_after DOUBLE PRECISION NOT NULL)",
);
static READ_MODEL_UPSERT: Sql = Sql::new(
    "INSERT INTO fee_model VALUES (?1, ?2, ?3, ?4, ?5, ?6)
    ON CONFLICT (loan_id) DO UPDATE SET fee_type = excluded.fee_type,
      fees = fee_model.fees + excluded.fees,
      fees_total = fee_model.fees_total + excluded.fees_total,
      last_charged_on = excluded.last_charged_on, balance_after = excluded.balance_after",
);
static READ_MODEL_TOTALS: Sql = Sql::new("SELECT COUNT(*), COALESCE(SUM(fees), 0) FROM fee_model");
static LOG_HEAD: Sql = Sql::new("SELECT COALESCE(MAX(position), 0) FROM events");
static LOG_CHUNK: Sql = Sql::new(
    "SELECT payload FROM events WHERE position >= ?1 AND position < ?2 AND event_type = ?3
     ORDER BY position",
);

/// Events folded into the read model per transaction: a rebuild's copy is
/// thrown away when it fails, so it commits seldom.
const REBUILD_COMMIT_EVENTS: usize = 100_000;

/// One loan's fold of a batch: its last event, how many fees, their total.
type Folded = (FeeChargedRead, i64, f64);

/// Reads every `MonthlyFeeCharged` event of the store in position order,
/// decodes the read model's 5 fields and upserts them into a read-model
/// table (a fresh SQLite store, as a rebuild writes a new copy), timed
/// from the first read to the last commit.
pub fn rebuild(url: &StoreUrl, expected: u64) -> anyhow::Result<Vec<String>> {
    let readers_n = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(readers_n + 1)
        .enable_all()
        .build()?;
    let dir = tempfile::Builder::new()
        .prefix("throng-readmodel-")
        .tempdir()?;
    let model_url = StoreUrl::Sqlite(dir.path().join("fee_model.db"));
    let (log, model) = rt.block_on(async {
        let log = Store::open(url, StoreLimits::default()).await?;
        let model = Store::open(&model_url, StoreLimits::default()).await?;
        model
            .write(|tx| Box::pin(tx.batch(&READ_MODEL_TABLE)))
            .await?;
        anyhow::Ok((log, model))
    })?;
    let started = Instant::now();
    let mut anon_peak = rss_anon_kib();
    let head = rt.block_on(log.read(|c| Box::pin(c.query_one(&LOG_HEAD, &[], |r| r.int(0)))))?;
    let readers: Vec<Reader> = (0..readers_n)
        .map(|r| start_reader(&rt, &log, head, r, readers_n))
        .collect();
    let (mut written, mut pending) = (0u64, Vec::<Folded>::new());
    let mut pending_events = 0usize;
    let mut k = 0usize;
    // Chunk k comes from reader k % n: the log's order, each reader at
    // most REBUILD_BATCHES_IN_FLIGHT chunks ahead.
    while let Ok(batch) = readers[k % readers.len()].0.recv() {
        k += 1;
        // A rebuild folds each batch per loan before writing: events of one
        // loan come together (a stream's events are close in the log), so
        // one upsert carries several of them.
        pending.extend(fold(&batch));
        written += batch.len() as u64;
        pending_events += batch.len();
        anon_peak = anon_peak.max(rss_anon_kib());
        if pending_events >= REBUILD_COMMIT_EVENTS {
            rt.block_on(upsert(&model, std::mem::take(&mut pending)))?;
            pending_events = 0;
        }
    }
    rt.block_on(upsert(&model, pending))?;
    let (mut read, mut bytes) = (0u64, 0u64);
    for (_, handle) in readers {
        let (n, b) = rt.block_on(handle)??;
        read += n;
        bytes += b;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let (loans, fees) = rt.block_on(model.read(|c| {
        Box::pin(c.query_one(&READ_MODEL_TOTALS, &[], |r| Ok((r.int(0)?, r.int(1)?))))
    }))?;
    anyhow::ensure!(read == written, "read {read} events, wrote {written}");
    anyhow::ensure!(
        fees as u64 == read,
        "the read model counts {fees} fees of {read} events"
    );
    if read < expected {
        tracing::warn!(read, expected, "fewer events than seeded");
    }
    let per_s = read as f64 / elapsed;
    let extrapolated = 25_000_000.0 / per_s;
    Ok(vec![format!(
        "read-model rebuild from the {} store ({readers_n} readers): {read} events ({:.0} MB \
         of payload, {loans} loans) in {elapsed:.2} s = {per_s:.0} events/s (target \
         500,000); 25,000,000 events in {:.0} s = {:.1} min (write-up: 1 h 45 min with JSON, \
         9 min with MessagePack+LZ4); anonymous memory of this process at most {} MiB during \
         it (the payloads are read through a memory map of the database: page cache, not heap)",
        log.dialect(),
        bytes as f64 / 1e6,
        extrapolated,
        extrapolated / 60.0,
        anon_peak / 1024,
    )])
}

/// One batch folded per loan, in the order loans first appear.
fn fold(batch: &[FeeChargedRead]) -> Vec<Folded> {
    let mut folded: Vec<Folded> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::new();
    for e in batch {
        match at.get(e.loan_id.as_str()) {
            Some(&k) => {
                let (last, n, total) = &mut folded[k];
                *n += 1;
                *total += e.amount;
                last.fee_type.clone_from(&e.fee_type);
                last.charged_on.clone_from(&e.charged_on);
                last.balance_after = e.balance_after;
            }
            None => {
                at.insert(&e.loan_id, folded.len());
                folded.push((e.clone(), 1, e.amount));
            }
        }
    }
    folded
}

/// Upserts folded loans into the read model in one transaction.
async fn upsert(model: &Store, rows: Vec<Folded>) -> anyhow::Result<()> {
    let rows = Arc::new(rows);
    model
        .write(move |tx| {
            let rows = rows.clone();
            Box::pin(async move {
                for (e, n, total) in rows.iter() {
                    let params: [&dyn Param; 6] = [
                        &e.loan_id,
                        &e.fee_type,
                        n,
                        total,
                        &e.charged_on,
                        &e.balance_after,
                    ];
                    tx.execute(&READ_MODEL_UPSERT, &params).await?;
                }
                Ok(())
            })
        })
        .await?;
    Ok(())
}

/// The process's anonymous resident memory (RssAnon: heap and stacks), in KiB.
fn rss_anon_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("RssAnon:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

type Reader = (
    std::sync::mpsc::Receiver<Vec<FeeChargedRead>>,
    tokio::task::JoinHandle<anyhow::Result<(u64, u64)>>,
);

/// Reader r of n, scanning on a connection of its own: the chunks of
/// [`REBUILD_BATCH`] positions numbered r, r + n, r + 2n, ... up to the
/// head when the rebuild started, each decoded and handed (empty or not)
/// to its own bounded channel. Answers (events, payload bytes).
fn start_reader(
    rt: &tokio::runtime::Runtime,
    log: &Store,
    head: i64,
    r: usize,
    n: usize,
) -> Reader {
    let (tx, rx) = std::sync::mpsc::sync_channel(REBUILD_BATCHES_IN_FLIGHT);
    let log = log.clone();
    let handle = rt.spawn(async move {
        let counts = log
            .read_scan(move |c| {
                Box::pin(async move {
                    let (mut events, mut bytes) = (0u64, 0u64);
                    let chunk = REBUILD_BATCH as i64;
                    let mut k = r as i64;
                    while k * chunk < head {
                        let (from, to) = (1 + k * chunk, 1 + (k + 1) * chunk);
                        let mut batch = Vec::with_capacity(REBUILD_BATCH);
                        let params: [&dyn Param; 3] = [&from, &to, &EVENT_TYPE];
                        c.for_each(&LOG_CHUNK, &params, |row| {
                            let payload = row.blob_bytes(0)?;
                            bytes += payload.len() as u64;
                            batch.push(decode_read(payload));
                            Ok(())
                        })
                        .await?;
                        events += batch.len() as u64;
                        // The writer reads the channels in turn: a full
                        // channel holds this reader back (on PostgreSQL,
                        // one of the runtime's reader-sized workers).
                        if tx.send(batch).is_err() {
                            break;
                        }
                        k += n as i64;
                    }
                    Ok((events, bytes))
                })
            })
            .await?;
        anyhow::Ok(counts)
    });
    (rx, handle)
}
