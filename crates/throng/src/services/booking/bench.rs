//! `throng bench booking`: the write-up's experiment (Netling against random
//! try-registers on 5,000,000 slots), plus the free-slot reads the page makes.

pub mod baseline;

use std::sync::Arc;

use bytes::Bytes;
use throng_load::measure::RequestSpec;

use crate::platform::experiment::{pick, Experiment, Scale, Workload};

pub struct BookingBench;

/// Seeded data, fixed so that runs are comparable.
const FROM_DAY: &str = "2030-01-01";

fn size(scale: Scale) -> (i64, i64, i64) {
    match scale {
        Scale::Full => (2000, 100, 25),
        Scale::Quick => (20, 10, 25),
    }
}

fn day_text(offset: i64) -> String {
    let from = super::model::Day::parse("from", FROM_DAY).expect("valid constant");
    from.plus(offset as i32).to_text()
}

impl Experiment for BookingBench {
    fn name(&self) -> &'static str {
        "booking"
    }
    fn about(&self) -> &'static str {
        "vaccination slots: random try-register (durable) and free-slot reads on 5,000,000 slots, vs GET /health"
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
        let register_to = move |path: &'static str| {
            let (counter, register_days) = (counter.clone(), register_days.clone());
            Arc::new(move |_seq: u64| {
                let seq = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let body = format!(
                    r#"{{"placeId":{},"day":"{}","timeSlot":{},"person":{{"name":"Bench Person {seq}","nationalId":"B{seq}","phone":"+421 9{:08}","email":"b{seq}@example.org"}}}}"#,
                    pick(seq, 1, 1, places),
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
        vec![
            Workload {
                name: "POST try-register, random slot (durable)".into(),
                factory: register_to("/api/booking/registrations"),
                ok_statuses: vec![201, 409],
                target_ratio_min: Some(0.4),
                published: "1,386 (EF Core); 10,069 (In-Memory OLTP); 36,000 (Redis, not durable)"
                    .into(),
                comparison: false,
            },
            Workload {
                name: "GET free slots, 1 day (25 slots)".into(),
                factory: slots_read(1),
                ok_statuses: vec![200],
                target_ratio_min: Some(0.75),
                published: "-".into(),
                comparison: false,
            },
            Workload {
                name: "GET free slots, 7 days (175 slots)".into(),
                factory: slots_read(7),
                ok_statuses: vec![200],
                target_ratio_min: None,
                published: "-".into(),
                comparison: false,
            },
            Workload {
                name: "naive try-register: one UPDATE per request, autocommit (comparison)".into(),
                factory: register_to("/api/booking/baseline/registrations"),
                ok_statuses: vec![201, 409],
                target_ratio_min: None,
                published: "-".into(),
                comparison: true,
            },
        ]
    }
    fn comparison_service(&self) -> Option<&'static dyn crate::platform::service::AnyService> {
        Some(&baseline::NaiveBooking)
    }
    fn connections(&self) -> usize {
        // A crowd: 256 people pressing "register" at once. With 64, durable
        // writes would be capped near 64 / fsync latency whatever the server.
        256
    }
    fn rss_mib_max(&self, scale: Scale) -> Option<f64> {
        (scale == Scale::Full).then_some(200.0)
    }
    fn notes(&self) -> Vec<String> {
        vec![
            "write-up (i7-8550U laptop, Netling, client on the same machine): EF Core 1,386 req/s; \
             In-Memory OLTP 10,069 req/s; Redis via Rust/actix 36,000 req/s (not durable); \
             5M slots took about 1 GB of RAM"
                .into(),
            "try-register answers 201 or 409 (slot already taken); both are correct answers".into(),
            "naive (bench/baseline.rs, on the bench's child servers only): the endpoint as a user might first \
             write it: one conditional UPDATE of the slot per request in autocommit (PostgreSQL: \
             a pool of 32 connections; SQLite: one connection), no registration row, no event, \
             no sealing, no one-per-person rule"
                .into(),
        ]
    }
}
