//! throng's services, one folder each (booking, comments, voting, invites,
//! events), each a `platform::service::Service`. They know the platform and
//! the store below them; nothing here knows the app, the CLI or the bench
//! harness.

pub use throng_platform::{base, platform, schema_type, store};

pub mod services;

#[cfg(test)]
mod independence;
