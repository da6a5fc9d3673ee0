//! throng's shared machinery (`platform`): the service seam, the server and
//! its admission control, auth, crypto, errors, the OpenAPI document. It
//! knows the store below it and no service.

pub use throng_store::{base, store};

pub mod platform;
