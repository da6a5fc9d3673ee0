//! throng: public web services that hold under a launch-day crowd.
//!
//! `app` assembles the server from the `platform` (shared machinery), the
//! `store` (SQLite or PostgreSQL) and the `services` (one folder each).

pub use throng_services::{base, platform, schema_type, services, store};

pub use throng_bench as bench;

pub mod app;
pub mod cli;
pub mod config;
pub mod startup_code;

#[cfg(test)]
mod names_no_service;
