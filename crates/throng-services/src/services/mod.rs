//! One folder per service, each a vertical slice: `model` (types parsed from
//! input, rules), `store` (SQL for both dialects), `http` (routes), its
//! migrations, page, seed and bench experiment, and a `mod.rs` that describes
//! the service once (`platform::service::Service`).
//!
//! Adding a service is its folder plus one line in [`all`]; the app, the
//! command line, the bench harness and the index page iterate over this list.

pub mod booking;
pub mod comments;
pub mod events;
pub mod invites;
pub mod voting;

use crate::platform::service::AnyService;

/// Every service, in the order their routes, flags and links are added.
pub fn all() -> &'static [&'static dyn AnyService] {
    &[
        &booking::Booking,
        &comments::Comments,
        &voting::Voting,
        &invites::Invites,
        &events::Events,
    ]
}

/// Every service's migrations (for `Store::open_with`).
pub fn migrations() -> Vec<&'static crate::store::MigrationSet> {
    all().iter().filter_map(|s| s.migrations()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        let mut names: Vec<_> = all().iter().map(|s| s.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all().len(), "two services share a name");
    }

    #[test]
    fn every_migration_exists_for_both_dialects() {
        use crate::store::migrate::{ordered, Dialect};
        let sets = migrations();
        let sqlite = ordered(&sets, Dialect::Sqlite).expect("sqlite versions unique per owner");
        let pg = ordered(&sets, Dialect::Postgres).expect("postgres versions unique per owner");
        let keys = |m: &[crate::store::migrate::Migration]| {
            m.iter().map(|x| (x.owner, x.version)).collect::<Vec<_>>()
        };
        assert_eq!(
            keys(&sqlite),
            keys(&pg),
            "every migration exists for both dialects"
        );
    }
}
