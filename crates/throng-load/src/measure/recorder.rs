//! Per-window and whole-run statistics of a measurement: HDR histograms (1 us .. 1 h, 3
//! significant digits, fixed memory), status codes and error codes, rolled into
//! Artillery-shaped periods and the final [`Summary`].

use std::{collections::BTreeMap, time::Duration};

use hdrhistogram::Histogram;

use super::Summary;
use crate::{
    metrics::new_histogram,
    report::{now_ms, Period, Report, SummaryStats},
};

/// Counters and histograms for one window of time.
struct Stats {
    latency: Histogram<u64>,
    service: Histogram<u64>,
    status: BTreeMap<u16, u64>,
    errors: BTreeMap<&'static str, u64>,
    responses: u64,
    bytes: u64,
}

impl Stats {
    fn new() -> Self {
        Self {
            latency: new_histogram(3),
            service: new_histogram(3),
            status: BTreeMap::new(),
            errors: BTreeMap::new(),
            responses: 0,
            bytes: 0,
        }
    }

    fn reset(&mut self) {
        self.latency.reset();
        self.service.reset();
        self.status.clear();
        self.errors.clear();
        self.responses = 0;
        self.bytes = 0;
    }

    fn to_period(&self, start_ms: u64, end_ms: u64, open: bool) -> Period {
        let width_ms = end_ms.saturating_sub(start_ms).max(1);
        let mut p = Period {
            period: start_ms,
            width_ms,
            ..Default::default()
        };
        let failed: u64 = self.errors.values().sum();
        p.counters
            .insert("http.requests".into(), self.responses + failed);
        p.counters.insert("http.responses".into(), self.responses);
        p.counters
            .insert("http.downloaded_bytes".into(), self.bytes);
        for (code, n) in &self.status {
            p.counters.insert(format!("http.codes.{code}"), *n);
        }
        for (code, n) in &self.errors {
            p.counters.insert(format!("errors.{code}"), *n);
        }
        let rate = self.responses as f64 * 1000.0 / width_ms as f64;
        p.rates
            .insert("http.request_rate".into(), (rate * 10.0).round() / 10.0);
        if !self.latency.is_empty() {
            let s = SummaryStats::from_us(&self.latency);
            p.summaries.insert("http.response_time".into(), s);
            p.histograms.insert("http.response_time".into(), s);
            if open {
                let s = SummaryStats::from_us(&self.service);
                p.summaries.insert("http.service_time".into(), s);
                p.histograms.insert("http.service_time".into(), s);
            }
        }
        let span = (self.responses + failed > 0).then_some((start_ms, end_ms));
        p.set_times(
            span,
            (!self.latency.is_empty()).then_some((start_ms, end_ms)),
        );
        p
    }
}

pub(super) struct Recorder {
    total: Stats,
    window: Stats,
    window_start_ms: u64,
    start_ms: u64,
    intermediate: Vec<Period>,
    open: bool,
}

impl Recorder {
    pub(super) fn new() -> Self {
        let now = now_ms();
        Self {
            total: Stats::new(),
            window: Stats::new(),
            window_start_ms: now,
            start_ms: now,
            intermediate: Vec::new(),
            open: false,
        }
    }

    /// `service` is the uncorrected time in the open model, `None` in the closed one.
    pub(super) fn record_ok(
        &mut self,
        latency: Duration,
        service: Option<Duration>,
        status: u16,
        bytes: u64,
    ) {
        let latency_us = (latency.as_micros() as u64).max(1);
        let service_us = service.map(|s| (s.as_micros() as u64).max(1));
        self.open |= service_us.is_some();
        for s in [&mut self.total, &mut self.window] {
            s.latency.saturating_record(latency_us);
            if let Some(us) = service_us {
                s.service.saturating_record(us);
            }
            *s.status.entry(status).or_insert(0) += 1;
            s.responses += 1;
            s.bytes += bytes;
        }
    }

    pub(super) fn record_error(&mut self, code: &'static str) {
        for s in [&mut self.total, &mut self.window] {
            *s.errors.entry(code).or_insert(0) += 1;
        }
    }

    pub(super) fn rotate(&mut self, now: u64, progress: bool, elapsed_s: f64) {
        let period = self.window.to_period(self.window_start_ms, now, self.open);
        if progress {
            eprintln!("{}", progress_line(&period, elapsed_s));
        }
        if period.counter("http.requests") > 0 || self.intermediate.is_empty() {
            self.intermediate.push(period);
        }
        self.window.reset();
        self.window_start_ms = now;
    }

    pub(super) fn summary(&self, duration_s: f64) -> Summary {
        let t = &self.total;
        let q = |h: &Histogram<u64>, q: f64| {
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(q)
            }
        };
        let mut aggregate = t.to_period(self.start_ms, now_ms(), self.open);
        // The closed model records no separate service time: it equals the latency.
        let service = if self.open { &t.service } else { &t.latency };
        if let Some(rate) = aggregate.rates.get_mut("http.request_rate") {
            *rate = (t.responses as f64 / duration_s.max(1e-9) * 10.0).round() / 10.0;
        }
        Summary {
            requests: t.responses,
            duration_s,
            requests_per_s: t.responses as f64 / duration_s.max(1e-9),
            latency_us_p50: q(&t.latency, 0.5),
            latency_us_p90: q(&t.latency, 0.9),
            latency_us_p99: q(&t.latency, 0.99),
            latency_us_p999: q(&t.latency, 0.999),
            latency_us_max: t.latency.max(),
            latency_us_mean: t.latency.mean(),
            uncorrected_latency_us_p50: q(service, 0.5),
            uncorrected_latency_us_p99: q(service, 0.99),
            uncorrected_latency_us_max: service.max(),
            status_counts: t.status.clone(),
            errors: t.errors.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            bytes_received: t.bytes,
            report: Report {
                aggregate,
                intermediate: self.intermediate.clone(),
                phases: Vec::new(),
                ..Report::default()
            },
        }
    }
}

fn progress_line(p: &Period, elapsed_s: f64) -> String {
    let errors: u64 = p
        .counters
        .iter()
        .filter(|(k, _)| k.starts_with("errors."))
        .map(|(_, v)| v)
        .sum();
    let rate = p.rates.get("http.request_rate").copied().unwrap_or(0.0);
    match p.summaries.get("http.response_time") {
        Some(s) => format!(
            "[{elapsed_s:6.1}s] {rate:9.0} req/s  p50 {:.1} ms  p99 {:.1} ms  max {:.1} ms  errors {errors}",
            s.p50, s.p99, s.max
        ),
        None => format!("[{elapsed_s:6.1}s] {rate:9.0} req/s  errors {errors}"),
    }
}
