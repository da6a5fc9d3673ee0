//! throng's storage: the embedded SQLite store (one writer, group commit)
//! or a PostgreSQL shared by several nodes, reached through one seam
//! (`store::seam`), and the leaves below every layer (`base`: clock,
//! metrics, private files). Nothing here knows the platform or a service.

pub mod base;
pub mod store;
