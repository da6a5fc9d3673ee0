//! One folder per service, each a vertical slice: `model` (types parsed from
//! input, rules), `store` (SQL for both dialects), `http` (routes and its
//! `router()`), its page, its seed and its bench experiment.

pub mod booking;
pub mod comments;
