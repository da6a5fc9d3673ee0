//! throng: public web services that hold under a launch-day crowd.
//!
//! `app` assembles the server from the `platform` (shared machinery), the
//! `store` (SQLite or PostgreSQL) and the `services` (one folder each).

pub mod app;
pub mod base;
pub mod bench;
pub mod cli;
pub mod platform;
pub mod services;
pub mod store;

#[cfg(test)]
mod layering;
