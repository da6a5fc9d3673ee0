//! Shared machinery every service uses: configuration, errors and the JSON
//! envelope, auth, personal-data crypto, secrets, metrics, admission control.

pub mod admission;
pub mod auth;
pub mod body_limit;
pub mod clock;
pub mod crypto;
pub mod error;
pub mod extract;
pub mod metrics;
pub mod secrets;
