//! Shared machinery every service uses: errors and the JSON envelope,
//! extractors, auth (JWT) and the identity provider's tokens and revocations (`identity`), the API reference page (`docs`), the pages' shared client (`assets`),
//! personal-data crypto, secrets, admission control,
//! the service seam (`service`: what a service describes of itself and the
//! application state it is given), and the seeds' deterministic draws
//! (`mix`). Sits below the services and above the store; the clock and
//! the metrics registry are leaves in `crate::base`, re-exported here for
//! callers outside the crate.

pub mod admission;
pub mod assets;
pub mod audit;
pub mod auth;
pub mod body_limit;
pub mod client_addr;
pub mod console;
pub mod crypto;
pub mod docs;
pub mod error;
pub mod extract;
pub mod headers;
pub mod identity;
pub mod lease;
pub mod mix;
pub mod openapi;
pub mod progress;
pub mod public_url;
pub mod secrets;
pub mod seed_watch;
pub mod server;
pub mod service;
pub mod session;
pub mod streams;

pub use crate::base::{clock, metrics};
