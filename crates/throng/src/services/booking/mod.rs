//! Booking: appointment slots (places x days x time slots), an atomic
//! try-register, personal data sealed at rest, confirmations sent from the
//! event log by a worker. See `002_7f70e933fb451a1c.txt`.

pub mod http;
pub mod model;
pub mod bench;
pub mod notifier;
pub mod page;
pub mod seed;
pub mod store;
