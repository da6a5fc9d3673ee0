//! The cluster under crowds and faults: real `throng` processes sharing one
//! PostgreSQL store behind a real HAProxy (configured from
//! `deploy/haproxy.cfg`), all on loopback.
//!
//! Needs `haproxy` and PostgreSQL (`THRONG_TEST_PG_URL`; the fault tests
//! also PostgreSQL's server binaries, `/usr/lib/postgresql/*/bin`, for a
//! cluster of their own). Without them (decided when the tests are built,
//! see build.rs) libtest reports these tests as ignored with the reason;
//! under CI they always run, and fail saying what is missing. `.ci/run`
//! installs both.
//!
//! Each test prints its figures on lines starting with `FIGURE` (run with
//! `--nocapture` to see them; BENCHMARKS.md has the command).

#[path = "../api/helpers.rs"]
mod helpers;

mod lb;

mod contention;
mod drain;
mod faults;
mod moderation;
mod overload;
