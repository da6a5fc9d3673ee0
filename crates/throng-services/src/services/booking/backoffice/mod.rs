//! The back office of booking for a health authority: staff of a place
//! (or an admin) see the place's day with the people's data, check them in
//! or mark them absent, book on a person's behalf (a call centre), look a
//! person up for support, resend a confirmation or a new access code, and
//! close a day. Every read of personal data and every change is recorded
//! in the event log with who did it (`booking-audit`, the registration's
//! stream, `booking-place-{id}`).
//!
//! - `access.rs`: the `staff` role and its `places` claim;
//! - `store.rs`: the statements, written once against the seam;
//! - `http.rs`: the routes;
//! - `page.rs`: the staff page, `/booking/staff/`.

pub mod access;
pub mod http;
pub mod page;
pub mod store;
