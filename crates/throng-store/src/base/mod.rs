//! Leaves every layer may use (store, platform, services, app): the clock, the
//! metrics registry and private files. Nothing here imports another module of the crate.

pub mod clock;
pub mod metrics;
pub mod private_fs;
