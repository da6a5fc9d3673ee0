//! Leaves every layer may use (store, platform, services, app): the clock and
//! the metrics registry. Nothing here imports another module of the crate.

pub mod clock;
pub mod metrics;
