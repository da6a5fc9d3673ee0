//! The one integration-test binary: black-box tests through a real server
//! (port 0, fresh store per test), for SQLite and PostgreSQL. Run with
//! `cargo test -p throng --test api`; PostgreSQL tests need
//! `THRONG_TEST_PG_URL` (see `helpers`).

mod helpers;
mod sealing;

mod backup;
mod cli;
mod deploy;
mod headers;
mod identity;
mod limits;
mod oidc;
mod openapi;
mod platform;
mod rejections;
mod seam;
mod security;

// service test modules: one line each
mod bench_baselines;
mod booking;
mod booking_backoffice;
mod booking_durability;
mod booking_notifier;
mod booking_person;
mod booking_places;
mod comments;
mod comments_site;
mod console;
mod events;
mod invites;
mod invites_rules;
mod voting;
mod voting_election;
mod voting_load;
mod voting_secrecy;
mod voting_trustees;
