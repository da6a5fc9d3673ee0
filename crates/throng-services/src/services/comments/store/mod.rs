//! Comments storage: the operations the service needs, each written once
//! against the store's seam ([`crate::store::seam`]) on [`CommentsStore`],
//! organised by topic: `courses.rs` (courses, ratings, the seed's reads),
//! `listing.rs` (the listing, its JSON built by the database), `writes.rs`
//! (posts, edits, deletes, replies and their rules) and `snapshots.rs`
//! (how a write moves a user's snapshot and last rating) and `bulk.rs`
//! (the seed's data set, through the store's bulk loader). The designs that
//! differ by how the store's writes are made are named strategies, chosen
//! once by [`open`]: `SnapshotWrites` (a write's old rating read before it
//! or in it) and `GroupLoads` (the seed's table groups loaded one after
//! another or at once).
//!
//! The listing's JSON is built by the database and passed through as bytes,
//! as the write-up does with `FOR JSON`: each user block (with its thread and
//! replies) comes back as one JSON text; Rust only joins the blocks of a page
//! with commas (and reads the last block's key for the next cursor).
//!
//! Both dialects give the same bytes for the same data:
//! - SQLite by default (`--comments-json concat`): one `printf` per object
//!   into one buffer, strings through `json_quote`, arrays by `group_concat`
//!   over a subquery ordered first. A thread of one comment (the snapshot's
//!   `comment_count`, migration 0006) is printed from the snapshot's
//!   last-comment columns, which are that comment's own, without the thread
//!   subquery; replies are still looked up per comment.
//! - SQLite with `--comments-json functions`: `json_object` /
//!   `json_group_array` (compact output), arrays aggregated from a subquery
//!   ordered first; `json()` re-marks a subquery's text as JSON, since
//!   subtypes do not cross subquery boundaries. Every thread goes through
//!   the subquery; the tests compare its bytes with the default's.
//! - PostgreSQL: `json_build_object` / `json_agg` print `"a" : 1, ` with
//!   spaces, so the same compact text is concatenated from `to_json(text)`
//!   (which escapes strings the way SQLite does) and
//!   `string_agg(.. ORDER BY ..)`; integers are cast to text.
//! - Times are RFC 3339 UTC with milliseconds (`2025-01-01T10:00:00.000Z`),
//!   computed with integer arithmetic in both (SQLite: `iso_ms()`, the
//!   store's own SQL function; PostgreSQL: `to_char` of whole seconds and
//!   the milliseconds padded), so no float rounding.
//! - Empty threads and replies are `[]`, never null.
//!
//! Writes go through the store's writer (group commit) and, in the same
//! transaction, maintain the user's snapshot (first and last comment and the
//! thread's comment count) and the rating aggregates with the course's write
//! version, and append their event. Expected outcomes (unknown course, not
//! the provider, ...) are values; `Err` means the database failed.

mod bulk;
mod courses;
mod listing;
mod moderation;
mod notifications;
mod site;
mod snapshots;
mod writes;

pub use moderation::{
    BanOutcome, HelpfulOutcome, ModAction, ModOutcome, Moderation, QueueItem, ReportOutcome,
};
pub use notifications::ParkedCommentNotification;
pub use site::{ImportRows, MineItem, SignedIn};

use super::cache::FRESH_BOUND;
use super::model::Cursor;
use crate::store::invalidate::Subscription;
use crate::store::Store;
use bulk::GroupLoads;
use snapshots::SnapshotWrites;

/// The comments service's storage over a [`Store`]: cheap to clone. Writes
/// are one command each of the store's group commit, in one transaction
/// with their snapshot and rating upserts (or the version bump) and their
/// event.
#[derive(Clone)]
pub struct CommentsStore {
    store: Store,
    snapshots: SnapshotWrites,
    group_loads: GroupLoads,
}

/// The comments storage of `store`.
pub fn open(store: &Store) -> CommentsStore {
    CommentsStore {
        store: store.clone(),
        snapshots: SnapshotWrites::of(store.writers()),
        group_loads: GroupLoads::of(store.writers()),
    }
}

impl CommentsStore {
    /// Whether the page cache's local versions are current, so a cached
    /// page may be served: always where this process makes every write
    /// (the store has no invalidation channel); else while the channel,
    /// over which other nodes' writes arrive, is known fresh within
    /// [`FRESH_BOUND`], and pages are read from the database otherwise.
    pub fn cache_versions_current(&self) -> bool {
        self.store
            .invalidations()
            .is_none_or(|i| i.fresh_within(FRESH_BOUND))
    }

    /// Other nodes' writes, as the store's invalidation channel hears them
    /// (keys made by [`invalidation_key`]); `None` where every write is
    /// this process's own.
    pub fn invalidations(&self) -> Option<Subscription> {
        self.store.invalidations().map(|i| i.subscribe())
    }
}

/// What a write on a course tells every node's page cache (shared writers;
/// see `store/invalidate.rs` and `cache.rs`).
pub fn invalidation_key(course_id: i64) -> String {
    format!("{INVALIDATION_PREFIX}{course_id}")
}

/// The prefix of the comments' invalidation keys.
pub const INVALIDATION_PREFIX: &str = "comments:course:";

/// One page of the listing: the JSON array and the key of its last block.
#[derive(Clone, Debug)]
pub struct ListPage {
    pub body: Vec<u8>,
    pub blocks: usize,
    pub last: Option<Cursor>,
}

#[derive(Clone, Debug)]
pub struct Course {
    pub id: i64,
    pub provider_id: i64,
    pub title: String,
}

/// A comment or reply as the POST/PUT answers it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommentOut {
    pub comment_id: i64,
    pub course_id: i64,
    pub user_id: i64,
    pub display_name: String,
    /// Course or Service.
    pub comment_type: String,
    /// A reply's: the comment it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<i64>,
    /// A review's: 1 to 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rating: Option<i32>,
    pub title: String,
    pub remarks: String,
    /// RFC 3339.
    pub created_date: String,
    /// RFC 3339, once edited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_date: Option<String>,
    /// `held` (waiting for a moderator: listed once approved, seen by its
    /// author only meanwhile) or `hidden`; absent when listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<super::model::Status>,
}

#[derive(Clone, Debug)]
pub enum PostOutcome {
    Posted(CommentOut),
    CourseNotFound,
    UnknownUser,
    /// A moderator banned the user.
    Banned,
    /// The user is not enrolled on the course (and reviews are not open).
    NotEnrolled,
}

#[derive(Clone, Debug)]
pub enum ReplyOutcome {
    Created(CommentOut),
    Edited(CommentOut),
    CommentNotFound,
    /// The target is itself a reply.
    IsReply,
    /// The caller is not the provider of the comment's course.
    NotTheProvider,
}

#[derive(Clone, Debug)]
pub enum EditOutcome {
    Edited(CommentOut),
    CommentNotFound,
    /// The target is a provider's reply (edited with `PUT .../reply`).
    IsReply,
    /// The review is another user's.
    NotTheAuthor,
    /// A moderator banned its author.
    Banned,
}

#[derive(Clone, Debug)]
pub enum DeleteOutcome {
    Deleted {
        course_id: i64,
    },
    CommentNotFound,
    /// The comment is another user's review, or another provider's reply,
    /// or the token's role does not match (a user deletes reviews, a
    /// provider replies).
    NotTheAuthor {
        is_reply: bool,
    },
}

/// A user's block of the listing: their last review's snapshot and their
/// thread. Written by the database (`listing`); this type is its shape.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UserBlock {
    pub display_name: String,
    pub course_id: i64,
    /// Course or Service.
    pub comment_type: String,
    pub last_title: String,
    pub last_rating: i32,
    pub last_remarks: String,
    /// RFC 3339.
    pub last_update: String,
    pub last_comment_id: i64,
    /// The user's reviews, newest first.
    pub thread: Vec<ThreadComment>,
}

/// A review in a user's thread.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadComment {
    pub comment_id: i64,
    pub title: String,
    pub rating: i32,
    pub remarks: String,
    /// RFC 3339.
    pub created_date: String,
    /// Readers who found it helpful (one vote each).
    pub helpful: i64,
    /// The provider's reply, if any (at most one).
    pub reply: Vec<ThreadReply>,
}

/// A provider's reply in a thread.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadReply {
    pub comment_id: i64,
    pub display_name: String,
    pub title: String,
    pub remarks: String,
    /// RFC 3339.
    pub created_date: String,
}

/// Rating aggregates of one course and type: each user counts once, with
/// their last rating (the write-up's `LastRating`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RatingOut {
    pub course_id: i64,
    /// The course's name, for a widget's header.
    pub course_title: String,
    /// Course or Service.
    pub rating_type: String,
    /// Users who rated.
    pub count: i64,
    /// Mean rating rounded to 2 decimals; 0 without ratings.
    pub average: f64,
    /// Counts per star, index 0 = 1 star.
    pub stars: [i64; 5],
}

/// How SQLite builds the listing's JSON (PostgreSQL always concatenates).
/// Both give the same bytes; `--comments-json` picks one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum JsonBuild {
    /// `json_object` / `json_group_array`.
    Functions,
    /// Text assembled by `printf` and `json_quote`, arrays by `group_concat`
    /// (PostgreSQL concatenates too): the faster of the two here, and the
    /// default. See `listing::sqlite_printf_sql`.
    Concat,
}
