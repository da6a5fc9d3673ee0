//! throng-load: an HTTP load generator that runs Artillery scripts unchanged and measures
//! wrk2-style (open model, latency from each request's intended start).
//!
//! Why its own crate: the load generator must be usable without the server (`throng-load`
//! binary), and `throng bench` builds on the same measurement API that the CLI uses.
//!
//! # Command line
//!
//! [`cli::LoadCommand`] is a `clap::Subcommand` (`run SCRIPT.yml ...`, `url URL ...`);
//! [`cli::execute`] runs one on its own tokio runtime and returns the process exit code:
//! 0 ok, 1 an `ensure` check failed, 21 an `expect` plugin expectation failed (Artillery's
//! codes), 2 bad input (script, flags, unreachable files).
//!
//! # Measuring from code
//!
//! ```no_run
//! use std::{sync::Arc, time::Duration};
//! use throng_load::{closed_loop, open_loop, RequestSpec, RequestFactory};
//! # async fn demo() -> anyhow::Result<()> {
//! let addr = "127.0.0.1:8080".parse()?;
//! let factory: RequestFactory = Arc::new(|seq| RequestSpec::get(format!("/health?n={seq}")));
//! // Closed model: 32 connections, each sends its next request when the previous answered.
//! let max = closed_loop(addr, "localhost", 32, Duration::from_secs(10), factory.clone()).await?;
//! // Open model: a constant 5,000 req/s over at most 64 connections; latency is measured
//! // from each request's intended start time, so server stalls are not hidden.
//! let open = open_loop(addr, "localhost", 5_000.0, 64, Duration::from_secs(10), factory).await?;
//! println!("{} req/s, p99 {} us (uncorrected {} us)",
//!     max.requests_per_s, open.latency_us_p99, open.uncorrected_latency_us_p99);
//! # Ok(()) }
//! ```
//!
//! [`Summary`] holds counts, percentiles in microseconds, status codes and error codes
//! (`ECONNREFUSED`, `ETIMEDOUT`, ...). Its `report` field has the same JSON shape that
//! `throng load run --output` writes (Artillery's `aggregate` + `intermediate`).
//!
//! For more control (timeout, live progress line, HTTP engine) build a [`Plan`] and call
//! [`measure::run`] with a [`measure::Source`] ([`measure::from_factory`] or
//! [`measure::fixed`]). Requests go out on [`measure::Engine::Wire`] (a minimal HTTP/1.1
//! client with wrk-like CPU cost) unless `Engine::Hyper` is chosen.
//!
//! Scripts from code: [`script::load`] (or [`script::parse`]) then [`runner::run`], which
//! returns the report and the `ensure` checks.
//!
//! # Module map
//!
//! - [`http`]: one keep-alive HTTP/1.1 connection (hyper's low-level client) and error codes.
//! - [`wire`]: a minimal HTTP/1.1 client for the measurement loops (wrk-like CPU cost).
//! - [`tls`]: HTTPS for both clients (rustls: SNI, ALPN http/1.1, Node's trust and error codes).
//! - [`measure`]: closed and open loops over many connections, [`Summary`].
//! - [`metrics`]: Artillery-named counters and HDR summaries, rolled into periods.
//! - [`report`]: the Artillery-shaped JSON report, console printing, the offline HTML report.
//! - [`script`]: parsing and validating Artillery YAML (environments, phases, payload, ...).
//! - [`template`], [`capture`]: `{{ var }}` rendering and response captures.
//! - [`schedule`]: arrival times from phases.
//! - [`runner`]: virtual users running scenarios against the schedule, and the pools of looping
//!   virtual users of closed-model phases (`vusers`, a throng extension documented in
//!   [`script::model`]).
//! - [`processor`]: `config.processor` JavaScript in an embedded engine, on a thread of its own.
//! - [`distributed`]: `run --workers` and `agent`: phases split among machines, reports merged.
//! - [`ensure`]: pass/fail checks (`thresholds`, `conditions`, `maxErrorRate`, `p99`, ...).

pub mod capture;
pub mod cli;
pub mod distributed;
pub mod ensure;
pub mod http;
pub mod measure;
pub mod metrics;
pub mod processor;
pub mod report;
pub mod runner;
pub mod schedule;
pub mod script;
pub mod template;
pub mod tls;
mod warn;
pub mod wire;

pub use measure::{closed_loop, open_loop, Plan, RequestFactory, RequestSpec, Summary};
