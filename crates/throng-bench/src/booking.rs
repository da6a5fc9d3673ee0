//! `throng bench booking`: the write-up's experiment (Netling against random
//! try-registers on 5,000,000 slots), plus the free-slot reads the page makes,
//! and the comparison designs on the same server and data: the write-up's
//! last one (Redis, one `HSETNX` per registration, `booking/redis.rs`) as it
//! ran and made durable, and a naive one (`booking/baseline.rs`).
//! Try-register and the comparisons run at 16, 64 and 256 connections.

pub mod baseline;
pub mod redis;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use throng_load::measure::RequestSpec;

use crate::experiment::{pick, Backends, BeforeRun, Experiment, Scale, Workload};

#[derive(Default)]
pub struct BookingBench {
    /// Where the Redis rows register, or why each is skipped
    /// (`start_backends`).
    redis: OnceLock<RedisTargets>,
    /// The staff's day list the list rows read (`prepare`), or why not.
    day_list: OnceLock<Result<DayList, String>>,
}

/// A place's day holding [`DAY_LIST_PEOPLE`] people, and a staff token of
/// that place: what the day-list rows read.
#[derive(Clone, Debug)]
struct DayList {
    path: String,
    bearer: String,
}

/// People on the day the staff list rows read: a busy centre's day.
const DAY_LIST_PEOPLE: u64 = 500;
/// The place that day belongs to (made through the import API, found again
/// by its code when the bench reuses a data directory).
const DAY_LIST_CODE: &str = "BENCH-DAY-LIST";
/// Its time slots of a day that take people, and seats in each:
/// `DAY_LIST_SLOTS * DAY_LIST_SEATS == DAY_LIST_PEOPLE`.
const DAY_LIST_SLOTS: u64 = 50;
const DAY_LIST_SEATS: u64 = 10;
const DAY_LIST_JSON: &str = "GET a place's day list of 500 people (staff, JSON, names unsealed)";
const DAY_LIST_CSV: &str = "GET a place's day list of 500 people (staff, CSV, names unsealed)";
/// How long the bench's own tokens are valid: longer than any bench runs.
const BENCH_TOKEN_TTL_S: u64 = 24 * 3600;

/// Seeded data, fixed so that runs are comparable.
const FROM_DAY: &str = "2030-01-01";

/// Connection counts of try-register and its comparisons: a few people, a
/// queue, a crowd. Durable writes are bounded by connections / commit
/// latency, so where each design stands depends on the count.
const CONNECTIONS_SWEEP: [usize; 3] = [16, 64, 256];

const TRY_REGISTER: &str = "POST try-register, random slot (durable)";
const TRY_REGISTER_SEATS: &str = "POST try-register, random slot of 4 seats (durable)";
/// Seats of the places of the 4-seat run: every even place (the 1-seat run
/// registers at the odd ones).
const SEATS: i64 = 4;
const REDIS_VOLATILE: &str = "Redis design: try-register as one HSETNX (not durable)";
const REDIS_DURABLE: &str =
    "Redis design: try-register as one HSETNX, AOF appendfsync always (durable)";

/// The Redis the write-up's design runs on as it ran it (these machines
/// start it with `--save "" --appendonly no`), and the database number the
/// bench empties before each run.
const LOCAL_REDIS_URL: &str = "redis://127.0.0.1:6379/15";

/// One Redis row's server: its URL, or why the row is skipped.
#[derive(Clone, Debug)]
enum RedisTarget {
    Ready { url: String, about: String },
    Skipped(String),
}

#[derive(Clone, Debug)]
struct RedisTargets {
    volatile: RedisTarget,
    durable: RedisTarget,
}

fn size(scale: Scale) -> (i64, i64, i64) {
    match scale {
        Scale::Full => (2000, 100, 25),
        Scale::Quick => (20, 10, 25),
    }
}

fn day_text(offset: i64) -> String {
    let from =
        crate::services::booking::model::Day::parse("from", FROM_DAY).expect("valid constant");
    from.plus(offset as i32).to_text()
}

impl Experiment for BookingBench {
    fn name(&self) -> &'static str {
        "booking"
    }
    fn about(&self) -> &'static str {
        "vaccination slots: random try-register (durable) and free-slot reads on 5,000,000 slots, vs GET /health, the write-up's Redis design and a naive one"
    }
    fn seed_args(&self, scale: Scale) -> Vec<String> {
        let (places, days, slots) = size(scale);
        [
            "booking",
            "--places",
            &places.to_string(),
            "--days",
            &days.to_string(),
            "--slots-per-day",
            &slots.to_string(),
            "--from",
            FROM_DAY,
            "--seats",
            &SEATS.to_string(),
            "--seats-every",
            "2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }
    fn workloads(&self, scale: Scale) -> Vec<Workload> {
        let (places, days, slots) = size(scale);
        // One counter across warm-up and every run: each run's `seq` restarts
        // at 0, and replaying the same slots would measure 409s answered from
        // memory instead of fresh durable registrations.
        let counter = Arc::new(std::sync::atomic::AtomicU64::new(
            rand::random::<u32>() as u64
        ));
        // Day texts made once, not parsed and printed per request: the load
        // generator shares the server's cores, so its CPU is the server's loss.
        let day_texts: Arc<Vec<String>> = Arc::new((0..days).map(day_text).collect());
        let register_days = day_texts.clone();
        // Odd places take one person a slot, even ones `SEATS`.
        let register_at = move |path: &'static str, seats: i64| {
            let (counter, register_days) = (counter.clone(), register_days.clone());
            let place_of = move |seq: u64| match seats {
                1 => 2 * pick(seq, 1, 1, (places + 1) / 2) - 1,
                _ => 2 * pick(seq, 1, 1, places / 2),
            };
            Arc::new(move |_seq: u64| {
                let seq = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let body = format!(
                    r#"{{"placeId":{},"day":"{}","timeSlot":{},"person":{{"name":"Bench Person {seq}","nationalId":"B{seq}","phone":"+421 9{:08}","email":"b{seq}@example.org"}}}}"#,
                    place_of(seq),
                    register_days[pick(seq, 2, 0, days - 1) as usize],
                    pick(seq, 3, 0, slots - 1),
                    seq % 100_000_000,
                );
                RequestSpec {
                    method: http::Method::POST,
                    path_and_query: path.into(),
                    headers: vec![("content-type".into(), "application/json".into())],
                    body: Bytes::from(body),
                }
            })
        };
        let slots_read = move |span: i64| {
            let day_texts = day_texts.clone();
            Arc::new(move |seq: u64| {
                RequestSpec::get(format!(
                    "/api/booking/places/{}/slots?from={}&days={span}",
                    pick(seq, 4, 1, places),
                    day_texts[pick(seq, 5, 0, days - span) as usize],
                ))
            })
        };
        let redis = self.redis.get().cloned().unwrap_or_else(|| {
            let why = RedisTarget::Skipped(
                "the bench set up no Redis (start_backends did not run)".into(),
            );
            RedisTargets {
                volatile: why.clone(),
                durable: why,
            }
        });
        let day_list = self
            .day_list
            .get()
            .cloned()
            .unwrap_or_else(|| Err("the bench made no day list (prepare did not run)".into()));
        let redis_row = |name: &str, target: &RedisTarget, path: &'static str, published: &str| {
            let (skipped, before_run) = match target {
                RedisTarget::Ready { url, .. } => (None, Some(flush_db(url))),
                RedisTarget::Skipped(why) => (Some(why.clone()), None),
            };
            Workload {
                name: name.into(),
                factory: register_at(path, 1),
                ok_statuses: vec![201, 409],
                published: published.into(),
                comparison: true,
                connections: CONNECTIONS_SWEEP.to_vec(),
                alternative_to: Some(TRY_REGISTER.into()),
                skipped,
                before_run,
                ..Workload::default()
            }
        };
        vec![
            Workload {
                name: TRY_REGISTER.into(),
                factory: register_at("/api/booking/registrations", 1),
                ok_statuses: vec![201, 409],
                target_ratio_min: Some(0.4),
                published: "1,386 (EF Core); 10,069 (In-Memory OLTP); 36,000 (Redis, not durable)"
                    .into(),
                connections: CONNECTIONS_SWEEP.to_vec(),
                ..Workload::default()
            },
            Workload {
                name: TRY_REGISTER_SEATS.into(),
                factory: register_at("/api/booking/registrations", SEATS),
                ok_statuses: vec![201, 409],
                target_ratio_min: Some(0.4),
                published: "-".into(),
                connections: CONNECTIONS_SWEEP.to_vec(),
                ..Workload::default()
            },
            Workload {
                name: "GET free slots, 1 day (25 slots)".into(),
                factory: slots_read(1),
                ok_statuses: vec![200],
                target_ratio_min: Some(0.75),
                published: "-".into(),
                ..Workload::default()
            },
            Workload {
                name: "GET free slots, 7 days (175 slots)".into(),
                factory: slots_read(7),
                published: "-".into(),
                ..Workload::default()
            },
            day_list_row(DAY_LIST_JSON, "application/json", &day_list),
            day_list_row(DAY_LIST_CSV, "text/csv", &day_list),
            redis_row(
                REDIS_VOLATILE,
                &redis.volatile,
                "/api/booking/baseline/redis/registrations",
                "36,000 (Rust/actix + Redis, not durable); 14,500 (ASP.NET controller)",
            ),
            redis_row(
                REDIS_DURABLE,
                &redis.durable,
                "/api/booking/baseline/redis-durable/registrations",
                "-",
            ),
            Workload {
                name: "naive try-register: one UPDATE per request, autocommit (comparison)".into(),
                factory: register_at("/api/booking/baseline/registrations", 1),
                ok_statuses: vec![201, 409],
                published: "-".into(),
                comparison: true,
                connections: CONNECTIONS_SWEEP.to_vec(),
                alternative_to: Some(TRY_REGISTER.into()),
                ..Workload::default()
            },
        ]
    }
    fn prepare(&self, data_dir: &Path, server: std::net::SocketAddr) -> anyhow::Result<()> {
        let secrets = crate::platform::secrets::Secrets::load_or_create(data_dir)?;
        let keys = crate::platform::auth::TokenKeys::new(&secrets.token_secret);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let list = rt.block_on(fill_a_day(server, &keys))?;
        eprintln!("day list: {DAY_LIST_PEOPLE} people at {}", list.path);
        let _ = self.day_list.set(Ok(list));
        Ok(())
    }
    fn offline(&self, store: &crate::store::StoreUrl, scale: Scale) -> anyhow::Result<Vec<String>> {
        let (places, days, _) = size(scale);
        let line = import_timing(store, places, days)?;
        eprintln!("{line}");
        Ok(vec![line])
    }
    fn comparison_services(&self) -> Vec<&'static dyn crate::platform::service::AnyService> {
        vec![&baseline::NaiveBooking, &redis::RedisBooking]
    }
    fn start_backends(&self, data_dir: &Path) -> anyhow::Result<Backends> {
        let mut backends = Backends::default();
        let volatile = match redis_answers(LOCAL_REDIS_URL) {
            Ok(about) => {
                backends
                    .serve_args
                    .extend(["--booking-redis-url".into(), LOCAL_REDIS_URL.into()]);
                RedisTarget::Ready {
                    url: LOCAL_REDIS_URL.into(),
                    about,
                }
            }
            Err(why) => {
                RedisTarget::Skipped(format!("no Redis answers at {LOCAL_REDIS_URL}: {why}"))
            }
        };
        let durable = match DurableRedis::start(data_dir) {
            Ok(server) => {
                let url = server.url.clone();
                let about = redis_answers(&url).unwrap_or_default();
                backends
                    .serve_args
                    .extend(["--booking-redis-durable-url".into(), url.clone()]);
                backends.keep.push(Box::new(server));
                RedisTarget::Ready { url, about }
            }
            Err(why) => RedisTarget::Skipped(why),
        };
        for (name, target) in [(REDIS_VOLATILE, &volatile), (REDIS_DURABLE, &durable)] {
            match target {
                RedisTarget::Ready { url, about } => eprintln!("{name}: {url} ({about})"),
                RedisTarget::Skipped(why) => eprintln!("{name}: skipped: {why}"),
            }
        }
        let _ = self.redis.set(RedisTargets { volatile, durable });
        Ok(backends)
    }
    fn connections(&self) -> usize {
        // A crowd: 256 people pressing "register" at once (the free-slot
        // reads); try-register and its comparisons also run with fewer
        // (`CONNECTIONS_SWEEP`).
        256
    }
    fn rss_mib_max(&self, scale: Scale) -> Option<f64> {
        (scale == Scale::Full).then_some(200.0)
    }
    fn notes(&self) -> Vec<String> {
        let mut notes = vec![
            "write-up (i7-8550U laptop, Netling, client on the same machine): EF Core 1,386 req/s; \
             In-Memory OLTP 10,069 req/s; Redis via Rust/actix 36,000 req/s (not durable); \
             5M slots took about 1 GB of RAM"
                .into(),
            "try-register answers 201 or 409 (every seat of the slot taken); both are correct \
             answers; the 1-seat rows register at the odd places, the 4-seat row at the even ones \
             (seeded with --seats 4 --seats-every 2)"
                .into(),
            "naive (booking/baseline.rs, on the bench's child servers only): the endpoint as a user might first \
             write it: one conditional UPDATE of the slot per request in autocommit (PostgreSQL: \
             a pool of 32 connections; SQLite: one connection), no registration row, no event, \
             no sealing, no one-per-person rule"
                .into(),
        ];
        notes.push(
            "Redis design (booking/redis.rs, on the bench's child servers only): the same request body, \
             place, day and time slot checked as ours, then one HSETNX booking:{place}:{day} {slot} \
             {new id} through one multiplexed connection per core; no person check, no sealing, \
             no event, no slot table; its database is emptied (FLUSHDB) before every run, so its \
             registrations are fresh while ours fill the seeded slots"
                .into(),
        );
        if let Some(targets) = self.redis.get() {
            for (name, target) in [
                ("Redis, not durable", &targets.volatile),
                ("Redis, durable", &targets.durable),
            ] {
                notes.push(match target {
                    RedisTarget::Ready { url, about } => format!("{name}: {url}: {about}"),
                    RedisTarget::Skipped(why) => format!("{name}: skipped: {why}"),
                });
            }
        }
        notes
    }
}

/// A row reading the staff's day list of [`DAY_LIST_PEOPLE`] people as
/// `accept`, one request at a time: its latency is the figure (the list is
/// what the staff at the door open each morning).
fn day_list_row(name: &str, accept: &'static str, list: &Result<DayList, String>) -> Workload {
    let (factory, skipped): (throng_load::measure::RequestFactory, _) = match list {
        Ok(list) => {
            let (path, bearer) = (list.path.clone(), format!("Bearer {}", list.bearer));
            (
                Arc::new(move |_seq: u64| RequestSpec {
                    method: http::Method::GET,
                    path_and_query: path.clone(),
                    headers: vec![
                        ("authorization".into(), bearer.clone()),
                        ("accept".into(), accept.into()),
                    ],
                    body: Bytes::new(),
                }),
                None,
            )
        }
        Err(why) => (Arc::new(|_| RequestSpec::get("/health")), Some(why.clone())),
    };
    Workload {
        name: name.into(),
        factory,
        ok_statuses: vec![200],
        published: "target: under 200 ms".into(),
        connections: vec![1],
        skipped,
        ..Workload::default()
    }
}

/// Makes the day the list rows read, through the API as an authority and a
/// call centre would: one place imported (idempotent by its code) whose
/// day tomorrow has [`DAY_LIST_SLOTS`] slots of [`DAY_LIST_SEATS`] seats,
/// filled with [`DAY_LIST_PEOPLE`] registrations (only the missing ones when
/// a reused data directory holds some already).
async fn fill_a_day(
    server: std::net::SocketAddr,
    keys: &crate::platform::auth::TokenKeys,
) -> anyhow::Result<DayList> {
    use anyhow::Context;
    let base = format!("http://{server}");
    let http = reqwest::Client::new();
    let admin = keys.issue(
        "bench",
        crate::platform::auth::Role::ADMIN,
        BENCH_TOKEN_TTL_S,
    );
    // 08:00-16:30 in 10-minute slots: 51 slots, the first 50 filled.
    let csv = format!(
        "code,name,address,city,postcode,region,time_zone,slot_minutes,seats,hours,closed\n\
         {DAY_LIST_CODE},Bench day list,\"1 Bench Street\",Benchtown,000 00,R0,Europe/Bratislava,10,{DAY_LIST_SEATS},\"Mo-Su 08:00-16:30\",\n"
    );
    let r = http
        .post(format!("{base}/api/booking/places/import"))
        .bearer_auth(&admin)
        .header("content-type", "text/csv")
        .body(csv)
        .send()
        .await?;
    let status = r.status();
    let summary: serde_json::Value = r.json().await?;
    anyhow::ensure!(
        status.is_success(),
        "importing the day list's place: {status} {summary}"
    );
    let place = summary["placeIds"][0]
        .as_i64()
        .with_context(|| format!("the import named no place: {summary}"))?;
    let day = crate::services::booking::model::Day::today()
        .plus(1)
        .to_text();
    let mut claims = serde_json::Map::new();
    claims.insert(
        crate::services::booking::backoffice::access::PLACES_CLAIM.into(),
        serde_json::json!([place]),
    );
    let bearer = keys.issue_with(
        "bench-desk",
        crate::services::booking::backoffice::access::STAFF,
        BENCH_TOKEN_TTL_S,
        claims,
    );
    let path = format!("/api/booking/places/{place}/days/{day}/registrations");
    let listed = http
        .get(format!("{base}{path}"))
        .bearer_auth(&bearer)
        .send()
        .await?;
    let status = listed.status();
    let listed: serde_json::Value = listed.json().await?;
    anyhow::ensure!(
        status.is_success(),
        "reading the day list: {status} {listed}"
    );
    let mut held = listed["count"].as_u64().unwrap_or(0);
    // The day's time slots as the public listing numbers them.
    let slots: serde_json::Value = http
        .get(format!(
            "{base}/api/booking/places/{place}/slots?from={day}&days=1"
        ))
        .send()
        .await?
        .json()
        .await?;
    let time_slots: Vec<i64> = slots["days"][0]["slots"]
        .as_array()
        .map(|slots| {
            slots
                .iter()
                .filter_map(|s| s["timeSlot"].as_i64())
                .collect()
        })
        .unwrap_or_default();
    anyhow::ensure!(
        time_slots.len() as u64 >= DAY_LIST_SLOTS,
        "the day list's place has {} time slots on {day}, not {DAY_LIST_SLOTS}: {slots}",
        time_slots.len()
    );
    let mut n = held;
    while held < DAY_LIST_PEOPLE {
        anyhow::ensure!(
            n < 2 * DAY_LIST_PEOPLE,
            "the day would not fill: {held} people"
        );
        let body = serde_json::json!({
            "placeId": place,
            "day": day,
            "timeSlot": time_slots[(n % DAY_LIST_SLOTS) as usize],
            "person": {
                "name": format!("Day List Person {n}"),
                "nationalId": format!("DL{n}"),
                "phone": format!("+421 8{n:08}"),
                "email": format!("dl{n}@example.org"),
            },
        });
        let r = http
            .post(format!("{base}/api/booking/registrations"))
            .json(&body)
            .send()
            .await?;
        match r.status().as_u16() {
            201 => held += 1,
            409 => {}
            other => anyhow::bail!(
                "registering on the day list's day: {other} {}",
                r.text().await?
            ),
        }
        n += 1;
    }
    Ok(DayList { path, bearer })
}

/// Code prefix of the places the import timing defines.
const IMPORTED_CODE_PREFIX: &str = "BENCH-IMPORT-";

/// A CSV of `places` places open every day 08:00-16:20 in 20-minute slots
/// (25 a day) of 4 seats, `days` days ahead.
pub fn import_csv(places: i64, days: i64) -> String {
    let mut out = String::from(
        "code,name,address,city,postcode,region,time_zone,slot_minutes,seats,hours,closed,services,book_ahead_days\n",
    );
    for p in 1..=places {
        let (name, address) = crate::services::booking::seed::place_name(p);
        out.push_str(&format!(
            "{IMPORTED_CODE_PREFIX}{p},{name},\"{address}\",Town {},{:03} {:02},R{},Europe/Bratislava,20,{SEATS},\"Mo-Su 08:00-16:20\",,vaccine-flu test-pcr,{days}\n",
            p % 97,
            800 + p % 100,
            p % 100,
            p % 8
        ));
    }
    out
}

/// Times an import of `places` places whose hours make `days` days of slots:
/// on SQLite into a store of its own; on PostgreSQL into the bench's
/// database, the imported places deleted after.
fn import_timing(url: &crate::store::StoreUrl, places: i64, days: i64) -> anyhow::Result<String> {
    use crate::store::{Sql, Store, StoreLimits, StoreUrl};
    static CLEAN_UP: Sql = Sql::new(
        "DELETE FROM booking_slots WHERE place_id IN (SELECT id FROM booking_places WHERE code LIKE 'BENCH-IMPORT-%');
         DELETE FROM booking_place_days WHERE place_id IN (SELECT id FROM booking_places WHERE code LIKE 'BENCH-IMPORT-%');
         DELETE FROM booking_places WHERE code LIKE 'BENCH-IMPORT-%';",
    );
    // One statement each: several in one query string run as one implicit
    // transaction, which VACUUM refuses.
    static VACUUM_SLOTS: Sql = Sql::per_dialect("", "VACUUM booking_slots");
    static VACUUM_PLACES: Sql = Sql::per_dialect("", "VACUUM booking_places");
    let csv = import_csv(places, days);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let dir = tempfile::tempdir()?;
    rt.block_on(async {
        let store = match url {
            StoreUrl::Sqlite(_) => {
                let own = StoreUrl::Sqlite(dir.path().join("import.db"));
                let migrations: Vec<_> = crate::services::all()
                    .iter()
                    .filter_map(|s| s.migrations())
                    .collect();
                Store::open_with(&own, StoreLimits::default(), &migrations).await?
            }
            StoreUrl::Postgres(_) => Store::open(url, StoreLimits::default()).await?,
        };
        let started = Instant::now();
        let parsed = crate::services::booking::places::import::parse(csv.as_bytes())
            .map_err(|e| anyhow::anyhow!("the bench's own CSV: {e}"))?;
        let storage = crate::services::booking::store::Booking::open(&store).await?;
        let summary = storage
            .change_places(parsed.changes, crate::services::booking::model::BookingClock::UTC)
            .await?
            .map_err(|r| anyhow::anyhow!("the bench's own CSV was refused: {r:?}"))?;
        let elapsed = started.elapsed().as_secs_f64();
        if matches!(url, StoreUrl::Postgres(_)) {
            store.write_apart(|tx| Box::pin(tx.batch(&CLEAN_UP))).await?;
            for vacuum in [&VACUUM_SLOTS, &VACUUM_PLACES] {
                store.read_blocking(|c| Box::pin(c.batch(vacuum))).await?;
            }
        }
        anyhow::Ok(format!(
            "import: {} places with weekly hours making {} slots ({days} days ahead) in {elapsed:.1} s \
             (CSV parsed and checked, one transaction, the availability index loaded where one \
             process writes); {}",
            summary.created,
            summary.slots_added,
            match url {
                StoreUrl::Sqlite(_) => "a store of its own",
                StoreUrl::Postgres(_) => "the bench's database, the imported places deleted after",
            }
        ))
    })
}

/// A before-run hook that empties the database of the Redis at `url`.
fn flush_db(url: &str) -> BeforeRun {
    let url = url.to_string();
    Arc::new(move |_run| {
        let url = url.clone();
        Box::pin(async move {
            let client = ::redis::Client::open(url.as_str())?;
            let mut c = client.get_multiplexed_async_connection().await?;
            ::redis::cmd("FLUSHDB").query_async::<()>(&mut c).await?;
            Ok(())
        })
    })
}

/// Whether the Redis at `url` answers `PING`; if so, how it keeps its data
/// (`appendonly`, `appendfsync`, `save`, as its `CONFIG GET` says).
fn redis_answers(url: &str) -> Result<String, String> {
    let client = ::redis::Client::open(url).map_err(|e| e.to_string())?;
    let mut c = client
        .get_connection_with_timeout(Duration::from_secs(1))
        .map_err(|e| e.to_string())?;
    ::redis::cmd("PING")
        .query::<String>(&mut c)
        .map_err(|e| e.to_string())?;
    let mut config = |name: &str| {
        ::redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .query::<Vec<String>>(&mut c)
            .ok()
            .and_then(|kv| kv.get(1).cloned())
            .unwrap_or_else(|| "?".into())
    };
    let (aof, fsync, save) = (config("appendonly"), config("appendfsync"), config("save"));
    Ok(format!(
        "appendonly {aof}, appendfsync {fsync}, save \"{save}\""
    ))
}

/// A `redis-server` of the bench's own, made durable: `--appendonly yes
/// --appendfsync always`, no snapshots, on a free loopback port, its files
/// in a temporary directory beside the store's (the same disk); stopped
/// and removed on drop.
struct DurableRedis {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl DurableRedis {
    fn start(data_dir: &Path) -> Result<DurableRedis, String> {
        let exe = on_path("redis-server").ok_or("redis-server is not on the PATH")?;
        let dir = tempfile::Builder::new()
            .prefix("redis-durable-")
            .tempdir_in(data_dir)
            .map_err(|e| {
                format!(
                    "a directory for redis-server in {}: {e}",
                    data_dir.display()
                )
            })?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("a free port: {e}"))?
            .port();
        let log = dir.path().join("redis.log");
        let child = Command::new(&exe)
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .arg("--dir")
            .arg(dir.path())
            .args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
            ])
            .args(["--daemonize", "no"])
            .arg("--logfile")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{} did not start: {e}", exe.display()))?;
        let mut server = DurableRedis {
            child,
            url: format!("redis://127.0.0.1:{port}/0"),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if redis_answers(&server.url).is_ok() {
                return Ok(server);
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                let tail = std::fs::read_to_string(&log).unwrap_or_default();
                let tail: Vec<&str> = tail.lines().rev().take(3).collect();
                return Err(format!(
                    "redis-server exited ({status}): {}",
                    tail.join(" | ")
                ));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "redis-server did not answer on port {port} within 10 s"
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for DurableRedis {
    fn drop(&mut self) {
        // SIGTERM: Redis fsyncs its append-only file and exits.
        crate::experiment::stop_child(&mut self.child, Duration::from_secs(10));
    }
}

/// `name` in a directory of `PATH`, if it is there.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The durable Redis is a `redis-server` of the bench's own that keeps
    /// an fsync'd append-only file in the store's directory and is gone
    /// once dropped; without `redis-server` (or without a Redis on 6379)
    /// the row is skipped with the reason and has nothing to run before.
    #[test]
    fn backends_start_a_durable_redis_or_say_why_not() {
        let dir = tempfile::tempdir().unwrap();
        let bench = BookingBench::default();
        let backends = bench.start_backends(dir.path()).unwrap();
        let targets = bench.redis.get().cloned().expect("set by start_backends");
        let rows = bench.workloads(Scale::Quick);
        let row = |name: &str| rows.iter().find(|w| w.name == name).expect("a row");
        for (name, target) in [
            (REDIS_VOLATILE, &targets.volatile),
            (REDIS_DURABLE, &targets.durable),
        ] {
            let w = row(name);
            assert!(w.comparison);
            assert_eq!(w.alternative_to.as_deref(), Some(TRY_REGISTER));
            assert_eq!(w.connections, CONNECTIONS_SWEEP);
            match target {
                RedisTarget::Ready { url, .. } => {
                    assert!(w.skipped.is_none() && w.before_run.is_some(), "{name}");
                    assert!(backends.serve_args.contains(url), "{name}");
                }
                RedisTarget::Skipped(why) => {
                    assert!(w.skipped.as_ref() == Some(why) && w.before_run.is_none());
                }
            }
        }
        match &targets.durable {
            RedisTarget::Ready { url, about } => {
                assert!(about.contains("appendonly yes"), "{about}");
                assert!(about.contains("appendfsync always"), "{about}");
                let files = std::fs::read_dir(dir.path()).unwrap().count();
                assert_eq!(files, 1, "its directory is beside the store's");
                drop(backends);
                assert!(redis_answers(url).is_err(), "stopped on drop");
                assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
            }
            RedisTarget::Skipped(why) => {
                assert!(on_path("redis-server").is_none(), "skipped: {why}");
                assert!(why.contains("PATH"), "{why}");
            }
        }
    }
}
