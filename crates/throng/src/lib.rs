//! throng: public web services that hold under a launch-day crowd.
//!
//! `app` assembles the server from the `platform` (shared machinery), the
//! `store` (SQLite or PostgreSQL) and the `services` (one folder each).

pub use throng_platform::{base, platform, schema_type, store};

pub mod app;
pub mod bench;
pub mod cli;
pub mod services;

#[cfg(test)]
mod layering;
