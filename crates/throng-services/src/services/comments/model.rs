//! Comment types parsed from input: each constructor checks its rule once,
//! so the store and the routes hold only valid values.

use serde::Deserialize;

use crate::platform::auth::{Claims, Role};
use crate::platform::error::ApiError;

/// Title of a comment: 1 to 200 characters (a reply's title may be empty).
pub const TITLE_CHARS_MAX: usize = 200;
/// Remarks of a comment or reply: 1 to 4,000 characters.
pub const REMARKS_CHARS_MAX: usize = 4000;
/// User blocks per page (`size`) and comments per thread (`sizeThread`) at
/// most; larger values are capped, as the write-up's procedure does.
pub const PAGE_SIZE_MAX: i64 = 20;
pub const PAGE_SIZE_DEFAULT: i64 = 10;
/// `skip` and `skipThread` at most: OFFSET cost grows with depth, so deep
/// readers should follow `X-Next-Cursor` instead.
pub const SKIP_MAX: i64 = 100_000;

/// Comment types a comment may have; a reply's type is the comment's type
/// followed by `Reply` (`CourseReply`), as in the write-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CommentType {
    Course,
    Service,
}

impl CommentType {
    pub const ALL: [CommentType; 2] = [CommentType::Course, CommentType::Service];

    pub fn parse(field: &str, text: &str) -> Result<CommentType, ApiError> {
        match text {
            "Course" => Ok(CommentType::Course),
            "Service" => Ok(CommentType::Service),
            _ => Err(ApiError::invalid_field(format!(
                "{field}: one of Course, Service"
            ))),
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            CommentType::Course => "Course",
            CommentType::Service => "Service",
        }
    }
    pub fn reply_type(self) -> &'static str {
        match self {
            CommentType::Course => "CourseReply",
            CommentType::Service => "ServiceReply",
        }
    }
    /// The comment type a stored type string belongs to (`CourseReply` -> Course).
    pub fn of_stored(text: &str) -> Option<(CommentType, bool)> {
        let (base, is_reply) = match text.strip_suffix("Reply") {
            Some(base) => (base, true),
            None => (text, false),
        };
        CommentType::parse("", base).ok().map(|t| (t, is_reply))
    }
}

/// The fewest and most stars of a rating.
pub const RATING_MIN: i64 = 1;
pub const RATING_MAX: i64 = 5;

/// The smallest id of a user, course or comment.
pub const ID_MIN: i64 = 1;

/// A star rating, `RATING_MIN` to `RATING_MAX`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rating(i32);

impl Rating {
    pub fn parse(value: i64) -> Result<Rating, ApiError> {
        if (RATING_MIN..=RATING_MAX).contains(&value) {
            Ok(Rating(value as i32))
        } else {
            Err(ApiError::invalid_field(format!(
                "rating: an integer from {RATING_MIN} to {RATING_MAX}"
            )))
        }
    }
    pub fn get(self) -> i32 {
        self.0
    }
}

/// A positive integer id (users, courses, comments); others cannot exist.
pub fn parse_id(field: &str, value: i64) -> Result<i64, ApiError> {
    if value >= ID_MIN {
        Ok(value)
    } else {
        Err(ApiError::invalid_field(format!(
            "{field}: a positive integer"
        )))
    }
}

fn is_invisible_control(c: char) -> bool {
    !c.is_control() && crate::platform::openapi::refused_char(c, false)
}

/// Checks a text field: trimmed, `min..=max` characters, no control
/// characters except (when `multiline`) newline and tab, no bidirectional
/// controls or Unicode line separators.
pub fn text(
    field: &str,
    value: &str,
    min: usize,
    max: usize,
    multiline: bool,
) -> Result<String, ApiError> {
    let trimmed = value.trim();
    let n = trimmed.chars().count();
    let bad_char = trimmed
        .chars()
        .any(|c| c.is_control() && !(multiline && (c == '\n' || c == '\t')));
    if let Some(c) = trimmed.chars().find(|c| is_invisible_control(*c)) {
        return Err(ApiError::invalid_field(format!(
            "{field}: U+{:04X} is not accepted (no bidirectional overrides, embeddings or \
             isolates, U+202A to U+202E and U+2066 to U+2069, and no line or paragraph \
             separators, U+2028 and U+2029)",
            c as u32
        )));
    }
    if n < min || n > max || bad_char {
        let lines = if multiline { ", newlines allowed" } else { "" };
        return Err(ApiError::invalid_field(format!(
            "{field}: {min} to {max} characters, no control characters{lines}"
        )));
    }
    Ok(trimmed.to_string())
}

/// The id of a signed-in caller with the given role, from the token's `sub`.
pub fn caller_id(claims: &Claims, role: Role) -> Result<i64, ApiError> {
    if claims.role != role {
        return Err(ApiError::forbidden(format!(
            "this needs a token with the role '{role}'"
        )));
    }
    claims
        .sub
        .parse::<i64>()
        .ok()
        .filter(|id| *id >= 1)
        .ok_or_else(|| ApiError::forbidden("the token's subject is not a numeric user id"))
}

/// A token's display-name claim, checked (`None` when it has none).
pub fn name_claim(claim: Option<&serde_json::Value>) -> Result<Option<String>, ApiError> {
    let value = match claim {
        None | Some(serde_json::Value::Null) => return Ok(None),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Number(n)) => n.to_string(),
        Some(_) => {
            return Err(ApiError::forbidden(format!(
                "the token's {NAME_CLAIM} claim must be text (the user's display name)"
            )))
        }
    };
    text(
        &format!("the token's {NAME_CLAIM} claim"),
        &value,
        1,
        NAME_CHARS_MAX,
        false,
    )
    .map(Some)
    .map_err(|e| ApiError::forbidden(e.message))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommentRequest {
    #[serde(deserialize_with = "crate::platform::extract::whole::int")]
    pub rating: i64,
    pub title: String,
    pub remarks: String,
    /// `Course` (default) or `Service`.
    pub comment_type: Option<String>,
}

/// A comment after every rule was checked.
#[derive(Clone, Debug)]
pub struct NewComment {
    pub course_id: i64,
    pub user_id: i64,
    pub comment_type: CommentType,
    pub rating: Rating,
    pub title: String,
    pub remarks: String,
    pub created_ms: i64,
    /// The token's name claim: the user is created with it at their first
    /// sign-in (a known user keeps their name).
    pub sign_in_name: Option<String>,
    /// Why the filter holds it (`None`: it passed).
    pub hold: Option<String>,
    /// Every user may review (`--comments-reviews-open`), enrolled or not.
    pub reviews_open: bool,
}

impl CommentRequest {
    pub fn parse(
        self,
        course_id: i64,
        user_id: i64,
        created_ms: i64,
    ) -> Result<NewComment, ApiError> {
        Ok(NewComment {
            sign_in_name: None,
            hold: None,
            reviews_open: false,
            course_id,
            user_id,
            comment_type: match &self.comment_type {
                Some(t) => CommentType::parse("commentType", t)?,
                None => CommentType::Course,
            },
            rating: Rating::parse(self.rating)?,
            title: text("title", &self.title, 1, TITLE_CHARS_MAX, false)?,
            remarks: text("remarks", &self.remarks, 1, REMARKS_CHARS_MAX, true)?,
            created_ms,
        })
    }
}

/// `PATCH /api/comments/{id}`: the fields given replace the review's own;
/// at least one.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EditRequest {
    #[serde(default, deserialize_with = "crate::platform::extract::whole::present")]
    pub rating: Option<i64>,
    #[serde(default, deserialize_with = "crate::platform::extract::non_null")]
    pub title: Option<String>,
    #[serde(default, deserialize_with = "crate::platform::extract::non_null")]
    pub remarks: Option<String>,
}

/// A review's edit by its author, checked.
#[derive(Clone, Debug)]
pub struct CommentEdit {
    pub comment_id: i64,
    pub user_id: i64,
    pub rating: Option<Rating>,
    pub title: Option<String>,
    pub remarks: Option<String>,
    pub at_ms: i64,
    /// Why the filter holds the edited text (`None`: it passed).
    pub hold: Option<String>,
}

impl EditRequest {
    pub fn parse(self, comment_id: i64, user_id: i64, at_ms: i64) -> Result<CommentEdit, ApiError> {
        if self.rating.is_none() && self.title.is_none() && self.remarks.is_none() {
            return Err(ApiError::invalid_field(
                "body: give at least one of rating (1 to 5), title, remarks",
            ));
        }
        Ok(CommentEdit {
            comment_id,
            user_id,
            rating: self.rating.map(Rating::parse).transpose()?,
            title: self
                .title
                .map(|t| text("title", &t, 1, TITLE_CHARS_MAX, false))
                .transpose()?,
            remarks: self
                .remarks
                .map(|t| text("remarks", &t, 1, REMARKS_CHARS_MAX, true))
                .transpose()?,
            at_ms,
            hold: None,
        })
    }
}

/// Who asks to delete a comment: a user (their review) or a provider (their
/// reply).
#[derive(Clone, Copy, Debug)]
pub struct Deleter {
    pub comment_id: i64,
    pub caller_id: i64,
    pub provider: bool,
    pub at_ms: i64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplyRequest {
    /// Optional; empty when absent.
    pub title: Option<String>,
    pub remarks: String,
}

/// A reply after every rule that needs no database was checked.
#[derive(Clone, Debug)]
pub struct NewReply {
    pub comment_id: i64,
    pub provider_id: i64,
    pub title: String,
    pub remarks: String,
    pub at_ms: i64,
}

impl ReplyRequest {
    pub fn parse(
        self,
        comment_id: i64,
        provider_id: i64,
        at_ms: i64,
    ) -> Result<NewReply, ApiError> {
        Ok(NewReply {
            comment_id,
            provider_id,
            title: text(
                "title",
                self.title.as_deref().unwrap_or(""),
                0,
                TITLE_CHARS_MAX,
                false,
            )?,
            remarks: text("remarks", &self.remarks, 1, REMARKS_CHARS_MAX, true)?,
            at_ms,
        })
    }
}

/// The listing query after parsing: sizes capped, offsets checked.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ListQuery {
    pub comment_type: CommentType,
    /// The blocks' order.
    pub sort: Sort,
    pub course_id: i64,
    pub user_id: Option<i64>,
    pub skip: i64,
    pub size: i64,
    pub skip_thread: i64,
    pub size_thread: i64,
    /// Keyset: blocks strictly after the cursor's block in the order (its
    /// sort is `sort`).
    pub after: Option<Cursor>,
}

/// The orders of a course's blocks (`sort`): by the block's last review's
/// time, its rating or the block's helpful votes; ties newest first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Sort {
    #[default]
    Newest,
    Oldest,
    Highest,
    Lowest,
    Helpful,
}

impl Sort {
    pub const ALL: [Sort; 5] = [
        Sort::Newest,
        Sort::Oldest,
        Sort::Highest,
        Sort::Lowest,
        Sort::Helpful,
    ];

    pub fn parse(text: &str) -> Result<Sort, ApiError> {
        Sort::ALL
            .into_iter()
            .find(|s| s.as_str() == text)
            .ok_or_else(|| {
                ApiError::invalid_field("sort: one of newest, oldest, highest, lowest, helpful")
            })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Sort::Newest => "newest",
            Sort::Oldest => "oldest",
            Sort::Highest => "highest",
            Sort::Lowest => "lowest",
            Sort::Helpful => "helpful",
        }
    }

    /// Its place in [`Sort::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether the order has a key before the time (a rating or votes).
    pub fn keyed(self) -> bool {
        !matches!(self, Sort::Newest | Sort::Oldest)
    }
}

/// The longest cursor (`X-Next-Cursor`) accepted.
pub const CURSOR_CHARS_MAX: usize = 64;

/// Position after a block in a listing order: (lastUpdate, userId) in the
/// newest and oldest orders, (key, lastUpdate, userId) in the others (key:
/// the rating, the rating negated for lowest first, or the helpful votes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cursor {
    pub sort: Sort,
    pub key: i64,
    pub last_update_ms: i64,
    pub user_id: i64,
}

impl Cursor {
    /// The newest-first order's cursor (the write-up's).
    pub fn newest(last_update_ms: i64, user_id: i64) -> Cursor {
        Cursor {
            sort: Sort::Newest,
            key: 0,
            last_update_ms,
            user_id,
        }
    }

    /// Opaque text: base64url of `v1:<ms>:<user>` (newest first, as
    /// before orders were added) or `v2:<sort>:<key>:<ms>:<user>`.
    pub fn encode(self) -> String {
        use base64::Engine;
        let raw = if self.sort == Sort::Newest {
            format!("v1:{}:{}", self.last_update_ms, self.user_id)
        } else {
            format!(
                "v2:{}:{}:{}:{}",
                self.sort.as_str(),
                self.key,
                self.last_update_ms,
                self.user_id
            )
        };
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
    }
    pub fn decode(text: &str) -> Result<Cursor, ApiError> {
        use base64::Engine;
        let bad = || {
            ApiError::invalid_field(
                "cursor: pass the X-Next-Cursor value of a previous page unchanged",
            )
        };
        if text.len() > CURSOR_CHARS_MAX {
            return Err(bad());
        }
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text)
            .map_err(|_| bad())?;
        let raw = std::str::from_utf8(&raw).map_err(|_| bad())?;
        let parts: Vec<&str> = raw.split(':').collect();
        let int = |t: &str| t.parse::<i64>().map_err(|_| bad());
        match parts.as_slice() {
            ["v1", ms, user] => Ok(Cursor::newest(int(ms)?, int(user)?)),
            ["v2", sort, key, ms, user] => Ok(Cursor {
                sort: Sort::parse(sort).map_err(|_| bad())?,
                key: int(key)?,
                last_update_ms: int(ms)?,
                user_id: int(user)?,
            }),
            _ => Err(bad()),
        }
    }
}

/// Event types, appended in the write's transaction. Payloads hold ids,
/// ratings and times only: no titles or remarks (free text may hold
/// personal data).
pub const EVENT_COMMENT_POSTED: &str = "CommentPosted";
pub const EVENT_REPLY_POSTED: &str = "ReplyPosted";
pub const EVENT_REPLY_EDITED: &str = "ReplyEdited";
pub const EVENT_COMMENT_EDITED: &str = "CommentEdited";
pub const EVENT_COMMENT_DELETED: &str = "CommentDeleted";
pub const EVENT_REPLY_DELETED: &str = "ReplyDeleted";
/// Moderation, reports and votes: ids, the action and the moderator's
/// reason (the moderator's own words about the action, never the review's).
pub const EVENT_COMMENT_HIDDEN: &str = "CommentHidden";
pub const EVENT_COMMENT_RESTORED: &str = "CommentRestored";
/// A held review made visible by a moderator.
pub const EVENT_COMMENT_APPROVED: &str = "CommentApproved";
pub const EVENT_COMMENT_REMOVED: &str = "CommentRemoved";
pub const EVENT_REPORTS_DISMISSED: &str = "ReportsDismissed";
pub const EVENT_COMMENT_REPORTED: &str = "CommentReported";
pub const EVENT_HELPFUL_VOTED: &str = "HelpfulVoted";
pub const EVENT_USER_BANNED: &str = "UserBanned";
pub const EVENT_USER_UNBANNED: &str = "UserUnbanned";

/// A comment's status: listed, held for moderation (seen by its author
/// only), or hidden by a moderator. Only listed comments count.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Visible,
    Held,
    Hidden,
}

impl Status {
    /// As stored (`comments.status`).
    pub fn code(self) -> i64 {
        match self {
            Status::Visible => 0,
            Status::Held => 1,
            Status::Hidden => 2,
        }
    }
    pub fn of_code(code: i64) -> Status {
        match code {
            0 => Status::Visible,
            1 => Status::Held,
            _ => Status::Hidden,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Visible => "visible",
            Status::Held => "held",
            Status::Hidden => "hidden",
        }
    }
}

/// A moderator's reason, a reporter's reason: 1 to 500 characters.
pub const REASON_CHARS_MAX: usize = 500;
/// A display name (the token's name claim, a provider's name): 1 to 100
/// characters.
pub const NAME_CHARS_MAX: usize = 100;
/// The token claim that names a user at their first sign-in.
pub const NAME_CLAIM: &str = "name";
/// A course's title: 1 to 200 characters.
pub const COURSE_TITLE_CHARS_MAX: usize = 200;

/// The stream of a user's moderation events (bans).
pub fn user_stream_of(user_id: i64) -> String {
    format!("comments-user-{user_id}")
}

/// RFC 3339 UTC with exactly three fraction digits, as both dialects print
/// times in the listing (`2025-01-01T10:00:00.000Z`).
pub fn timestamp(ms: i64) -> String {
    // The same text the listing's SQL writes (`iso_ms`, store/sqlite.rs);
    // `time` only for instants outside 1970..=9999, which the clock never gives.
    crate::base::clock::iso_ms(ms).unwrap_or_else(|| {
        use time::macros::format_description;
        let t = time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
            .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
        t.format(format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
        ))
        .unwrap_or_default()
    })
}

pub fn stream_of(course_id: i64) -> String {
    format!("comments-course-{course_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trips_and_rejects_garbage() {
        let c = Cursor::newest(1_735_689_600_123, 777_001);
        assert_eq!(Cursor::decode(&c.encode()).unwrap(), c);
        // The newest order's cursor is the one it always was.
        assert!(c.encode().starts_with("djE6"));
        for sort in Sort::ALL {
            let c = Cursor {
                sort,
                key: if sort == Sort::Newest { 0 } else { -4 },
                last_update_ms: 1_735_689_600_123,
                user_id: 777_001,
            };
            assert_eq!(Cursor::decode(&c.encode()).unwrap(), c);
        }
        for bad in ["", "x", "djE6eDox", "djI6MToy", &"a".repeat(100)] {
            assert!(Cursor::decode(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn timestamps_have_three_fraction_digits() {
        assert_eq!(timestamp(1_704_067_200_000), "2024-01-01T00:00:00.000Z");
        assert_eq!(timestamp(1_704_067_200_850), "2024-01-01T00:00:00.850Z");
    }

    #[test]
    fn text_rules() {
        assert_eq!(text("title", "  Great  ", 1, 200, false).unwrap(), "Great");
        assert!(text("title", "   ", 1, 200, false).is_err());
        assert!(text("title", &"x".repeat(201), 1, 200, false).is_err());
        assert!(text("title", "a\nb", 1, 200, false).is_err());
        assert!(text("remarks", "a\nb\tc", 1, 4000, true).is_ok());
        assert!(text("remarks", "a\u{1}b", 1, 4000, true).is_err());
        for c in [
            '\u{202A}', '\u{202E}', '\u{2066}', '\u{2069}', '\u{2028}', '\u{2029}',
        ] {
            for (field, multiline) in [("title", false), ("remarks", true)] {
                let e = text(field, &format!("ab{c}cd"), 1, 4000, multiline).unwrap_err();
                assert!(e.message.starts_with(field), "{}", e.message);
            }
        }
        // Right-to-left text itself is fine; only the invisible controls go.
        assert!(text("title", "שלום עולם", 1, 200, false).is_ok());
        assert!(text("title", "a\u{200F}b", 1, 200, false).is_ok());
        assert_eq!(
            text("remarks", &"é".repeat(4000), 1, 4000, true)
                .unwrap()
                .chars()
                .count(),
            4000
        );
    }

    #[test]
    fn ratings_and_types() {
        assert!(Rating::parse(0).is_err() && Rating::parse(6).is_err());
        assert_eq!(Rating::parse(5).unwrap().get(), 5);
        assert_eq!(
            CommentType::of_stored("CourseReply"),
            Some((CommentType::Course, true))
        );
        assert_eq!(
            CommentType::of_stored("Service"),
            Some((CommentType::Service, false))
        );
        assert!(CommentType::parse("t", "course").is_err());
    }
}
