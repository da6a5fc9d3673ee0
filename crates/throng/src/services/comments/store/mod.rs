//! Comments storage: the operations the service needs ([`CommentsStore`]),
//! implemented once per dialect (`sqlite.rs`, `postgres.rs`) and chosen
//! once, from the [`Store`], by [`open`]. The service's state, its handlers
//! and its seed hold an `Arc<dyn CommentsStore>` and never ask which store
//! it is: what differs between stores (whether the page cache's versions
//! are current, other nodes' invalidations, the bulk load) is a method here.
//!
//! SQL that is the same in both dialects is written once below ([`sql`]),
//! with SQLite's placeholders (`?1`, turned into `$1` for PostgreSQL by
//! [`crate::store::pg_placeholders`]); rows of one shape are mapped once
//! ([`Columns`]). `listing.rs` holds what the listing's statements share
//! (their filters) and joins the blocks into a page; `writes.rs` holds the
//! rules of the writes (checks, rating deltas, answers, events).
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
//! the provider, ...) are values; `Err` means the database failed. On SQLite
//! the single writer reads and then writes; on PostgreSQL, where a batch's
//! commands run pipelined and other nodes write too, every write first locks
//! the course's aggregates row and reads a user's old rating in the
//! statement that changes their snapshot (see `postgres.rs`).

mod listing;
pub mod postgres;
pub mod sqlite;
mod writes;

use std::sync::Arc;

use futures::future::BoxFuture;

use super::model::{CommentEdit, CommentType, Cursor, Deleter, ListQuery, NewComment, NewReply};
use super::seed::Generator;
use crate::store::invalidate::Subscription;
use crate::store::{Columns, Store, StoreError};

/// The comments service's storage. Writes are one command each of the
/// store's group commit, in one transaction with their snapshot and rating
/// upserts (or the version bump) and their event.
pub trait CommentsStore: Send + Sync {
    /// The listing page for `q`, its JSON built by the database: by `build`
    /// on SQLite (PostgreSQL always concatenates). An empty page, without a
    /// read, when `q.size` is 0.
    fn list_page<'a>(
        &'a self,
        q: &'a ListQuery,
        build: JsonBuild,
    ) -> BoxFuture<'a, Result<ListPage, StoreError>>;

    /// A course by id.
    fn course(&self, id: i64) -> BoxFuture<'_, Result<Option<Course>, StoreError>>;

    /// The rating aggregates of a course and type; `None` when the course
    /// does not exist.
    fn rating(
        &self,
        course_id: i64,
        kind: CommentType,
    ) -> BoxFuture<'_, Result<Option<RatingOut>, StoreError>>;

    /// Posts a comment: the comment, its snapshot, the aggregates and the
    /// event.
    fn post_comment(&self, new: NewComment) -> BoxFuture<'_, Result<PostOutcome, StoreError>>;

    /// Edits the caller's own review (rating, title, remarks): the comment,
    /// the user's snapshot, the course's aggregates (the user's last rating
    /// may change) and the event.
    fn edit_comment(&self, edit: CommentEdit) -> BoxFuture<'_, Result<EditOutcome, StoreError>>;

    /// Deletes the caller's own review (with the provider's reply to it: a
    /// reply answers that review alone) or the provider's own reply; the
    /// user's snapshot and the course's aggregates follow (the user's rating
    /// is their last remaining review's, or none), and the event.
    fn delete_comment(&self, d: Deleter) -> BoxFuture<'_, Result<DeleteOutcome, StoreError>>;

    /// Creates the provider's reply to a comment, or edits it when it
    /// exists; bumps the course's version; and the event.
    fn put_reply(&self, reply: NewReply) -> BoxFuture<'_, Result<ReplyOutcome, StoreError>>;

    /// Whether the page cache's local versions are current, so a cached
    /// page may be served: always where this process makes every write
    /// (SQLite); on PostgreSQL while the invalidation channel, over which
    /// other nodes' writes arrive, is known fresh within
    /// [`super::cache::FRESH_BOUND`], else pages are read from the database.
    fn cache_versions_current(&self) -> bool;

    /// Other nodes' writes, as the store's invalidation channel hears them
    /// (keys made by [`invalidation_key`]): on PostgreSQL; `None` where
    /// every write is this process's own.
    fn invalidations(&self) -> Option<Subscription>;

    /// The courses stored (seeding looks for existing data).
    fn course_count(&self) -> BoxFuture<'_, Result<i64, StoreError>>;

    /// Loads `gen`'s data set in bulk (`seed/loaders.rs`): on SQLite by
    /// inserts, a transaction per chunk on a connection of its own, after
    /// deleting the comments data when `wipe`; on PostgreSQL by binary
    /// `COPY` into emptied tables. The snapshots written.
    fn seed_bulk(
        &self,
        gen: Generator,
        wipe: bool,
        progress: bool,
    ) -> BoxFuture<'_, anyhow::Result<i64>>;

    /// For each (course, hash) of `picks`, one of the users with a `Course`
    /// snapshot on the course ([`pick_user`]); `None` when there is none.
    fn snapshot_users(
        &self,
        picks: Vec<(i64, u64)>,
    ) -> BoxFuture<'_, Result<Vec<Option<i64>>, StoreError>>;
}

/// The comments storage of `store`.
pub fn open(store: &Store) -> Arc<dyn CommentsStore> {
    store.choose(
        |s| Arc::new(sqlite::SqliteComments::new(s.clone())) as Arc<dyn CommentsStore>,
        |p| Arc::new(postgres::PgComments::new(p.clone())),
    )
}

/// What a write on a course tells every node's page cache (PostgreSQL; see
/// `store/invalidate.rs` and `cache.rs`).
pub fn invalidation_key(course_id: i64) -> String {
    format!("{INVALIDATION_PREFIX}{course_id}")
}

/// The prefix of the comments' invalidation keys.
pub const INVALIDATION_PREFIX: &str = "comments:course:";

/// SQL the same in both dialects.
pub(super) mod sql {
    use std::sync::LazyLock;

    pub const COURSE: &str = "SELECT id, provider_id, title FROM comments_courses WHERE id = ?1";
    pub const COURSE_COUNT: &str = "SELECT COUNT(*) FROM comments_courses";

    /// A comment; its id is the store's (SQLite reads the row id, PostgreSQL
    /// adds `RETURNING id`).
    pub const POST_INSERT: &str =
        "INSERT INTO comments (course_id, user_id, comment_type, parent_id, rating, title, remarks, created_ms)
         VALUES (?1, ?2, ?3, NULL, ?4, ?5, ?6, ?7)";

    /// A provider's reply to comment ?4 (PostgreSQL adds what it does when
    /// the reply exists).
    pub const REPLY_INSERT: &str =
        "INSERT INTO comments (course_id, user_id, comment_type, parent_id, rating, title, remarks,
            created_ms) VALUES (?1, ?2, ?3, ?4, NULL, ?5, ?6, ?7)";

    /// The comment a reply targets, with its course's provider.
    pub const TARGET: &str =
        "SELECT c.course_id, c.comment_type, c.parent_id, co.provider_id, u.display_name
         FROM comments c LEFT JOIN comments_courses co ON co.id = c.course_id
         LEFT JOIN comments_users u ON u.id = co.provider_id WHERE c.id = ?1";

    /// The comment an edit or a delete applies to (`writes::Found`).
    pub const FIND: &str =
        "SELECT c.course_id, c.user_id, c.comment_type, c.parent_id, c.rating, c.title,
            c.remarks, c.created_ms, u.display_name
         FROM comments c LEFT JOIN comments_users u ON u.id = c.user_id WHERE c.id = ?1";

    pub const EDIT: &str =
        "UPDATE comments SET rating = COALESCE(?2, rating), title = COALESCE(?3, title),
            remarks = COALESCE(?4, remarks), edited_ms = ?5 WHERE id = ?1";
    pub const DELETE: &str = "DELETE FROM comments WHERE id = ?1";
    pub const DELETE_REPLIES: &str = "DELETE FROM comments WHERE parent_id = ?1";

    /// Adds a rating delta to a course and type's aggregates and bumps its
    /// version.
    pub const RATING_UPSERT: &str = "INSERT INTO comments_ratings (course_id, comment_type, count, sum,
        stars1, stars2, stars3, stars4, stars5, version)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 1)
     ON CONFLICT (course_id, comment_type) DO UPDATE SET
        count = comments_ratings.count + excluded.count, sum = comments_ratings.sum + excluded.sum,
        stars1 = comments_ratings.stars1 + excluded.stars1, stars2 = comments_ratings.stars2 + excluded.stars2,
        stars3 = comments_ratings.stars3 + excluded.stars3, stars4 = comments_ratings.stars4 + excluded.stars4,
        stars5 = comments_ratings.stars5 + excluded.stars5, version = comments_ratings.version + 1";

    /// Bumps the version of a course and type without changing its ratings.
    pub const VERSION_BUMP: &str =
        "INSERT INTO comments_ratings (course_id, comment_type, count, sum,
        stars1, stars2, stars3, stars4, stars5, version) VALUES (?1, ?2, 0, 0, 0, 0, 0, 0, 0, 1)
     ON CONFLICT (course_id, comment_type) DO UPDATE SET version = comments_ratings.version + 1";

    /// A user's snapshot on a course (PostgreSQL also answers the last
    /// rating it held).
    pub const SNAPSHOT_DELETE: &str =
        "DELETE FROM comments_snapshots WHERE course_id = ?1 AND comment_type = ?2 AND user_id = ?3";

    /// The users with a `Course` snapshot on course ?1, for the Artillery
    /// payload.
    pub const SNAPSHOT_USERS: &str =
        "SELECT user_id FROM comments_snapshots WHERE course_id = ?1 AND comment_type = 'Course'
         ORDER BY user_id";

    /// The snapshot upsert; parameters: course, type, user, comment id,
    /// title, rating, remarks, created ms, display name.
    /// "Last" moves forward only in the thread's own order (created time,
    /// then id): a comment stamped earlier can commit later (it waited in the
    /// writer's queue), and must not replace a newer one as the user's last
    /// comment. The thread's comment count grows with every comment, in or
    /// out of order (every SET expression reads the row as it was before
    /// this update).
    pub static SNAPSHOT_UPSERT: LazyLock<String> = LazyLock::new(|| {
        let newer = "(excluded.last_update_ms, excluded.last_comment_id) \
                     > (comments_snapshots.last_update_ms, comments_snapshots.last_comment_id)";
        let last: Vec<String> = [
            "last_comment_id",
            "last_title",
            "last_rating",
            "last_remarks",
            "last_update_ms",
        ]
        .iter()
        .map(|c| {
            format!("{c} = CASE WHEN {newer} THEN excluded.{c} ELSE comments_snapshots.{c} END")
        })
        .collect();
        // The first comment is also the last until another one arrives.
        let values: Vec<String> = [1, 2, 3, 4, 4, 5, 6, 7, 8, 9]
            .map(|i| format!("?{i}"))
            .into();
        format!(
            "INSERT INTO comments_snapshots (course_id, comment_type, user_id, first_comment_id,
            last_comment_id, last_title, last_rating, last_remarks, last_update_ms, display_name,
            comment_count)
         VALUES ({}, 1)
         ON CONFLICT (course_id, comment_type, user_id) DO UPDATE SET
            comment_count = comments_snapshots.comment_count + 1,
            {}",
            values.join(", "),
            last.join(",\n            ")
        )
    });

    /// Rebuilds a user's snapshot on a course from their comments (after an
    /// edit or a delete); no row changes when the user has no comment left
    /// there (then the caller deletes the snapshot). Parameters: course,
    /// type, user. Each dialect adds its `RETURNING` (the new last rating;
    /// PostgreSQL also the one before).
    pub const SNAPSHOT_REBUILD: &str =
        "UPDATE comments_snapshots SET first_comment_id = t.first_id, last_comment_id = t.id,
            last_title = t.title, last_rating = t.rating, last_remarks = t.remarks,
            last_update_ms = t.created_ms, comment_count = t.n
         FROM (SELECT c.id, c.title, c.rating, c.remarks, c.created_ms,
                 (SELECT f.id FROM comments f WHERE f.course_id = c.course_id AND f.user_id = c.user_id AND f.comment_type = c.comment_type ORDER BY f.created_ms, f.id LIMIT 1) AS first_id,
                 (SELECT count(*) FROM comments f WHERE f.course_id = c.course_id AND f.user_id = c.user_id AND f.comment_type = c.comment_type) AS n
               FROM comments c WHERE c.course_id = ?1 AND c.user_id = ?3 AND c.comment_type = ?2
               ORDER BY c.created_ms DESC, c.id DESC LIMIT 1) AS t
         WHERE comments_snapshots.course_id = ?1 AND comments_snapshots.comment_type = ?2
           AND comments_snapshots.user_id = ?3
         ";
}

/// A row of [`sql::COURSE`].
fn course_row(r: &impl Columns) -> Result<Course, StoreError> {
    Ok(Course {
        id: r.col(0)?,
        provider_id: r.col(1)?,
        title: r.col(2)?,
    })
}

/// The aggregates' columns (count, sum, stars1 to stars5), first in a row.
fn ratings_row(r: &impl Columns) -> Result<[i64; 7], StoreError> {
    Ok([
        r.col(0)?,
        r.col(1)?,
        r.col(2)?,
        r.col(3)?,
        r.col(4)?,
        r.col(5)?,
        r.col(6)?,
    ])
}

/// The rating answer of a course (`title`) from its aggregates row, if any.
fn rating_out(
    course_id: i64,
    title: String,
    kind: CommentType,
    row: Option<[i64; 7]>,
) -> RatingOut {
    let r = row.unwrap_or([0; 7]);
    let average = if r[0] > 0 {
        (r[1] as f64 / r[0] as f64 * 100.0).round() / 100.0
    } else {
        0.0
    };
    RatingOut {
        course_id,
        course_title: title,
        rating_type: kind.as_str().to_string(),
        count: r[0],
        average,
        stars: [r[2], r[3], r[4], r[5], r[6]],
    }
}

/// The user a payload row names among a course's snapshot `users` (in user
/// id order), by its `hash`.
fn pick_user(users: &[i64], hash: u64) -> Option<i64> {
    (!users.is_empty()).then(|| users[(hash % users.len() as u64) as usize])
}

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
}

#[derive(Clone, Debug)]
pub enum PostOutcome {
    Posted(CommentOut),
    CourseNotFound,
    UnknownUser,
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
    /// default. See `sqlite::printf_list_sql`.
    Concat,
}
