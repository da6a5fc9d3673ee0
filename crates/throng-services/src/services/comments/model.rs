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

/// Characters that change how the text around them is shown without being
/// seen: bidirectional embeddings, overrides and isolates (a title with
/// U+202E shows its end reversed, e.g. to disguise a link), and the line and
/// paragraph separators (which break lines where no newline is allowed).
fn is_invisible_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
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
}

impl CommentRequest {
    pub fn parse(
        self,
        course_id: i64,
        user_id: i64,
        created_ms: i64,
    ) -> Result<NewComment, ApiError> {
        Ok(NewComment {
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
    pub course_id: i64,
    pub user_id: Option<i64>,
    pub skip: i64,
    pub size: i64,
    pub skip_thread: i64,
    pub size_thread: i64,
    /// Keyset: blocks strictly after (last_update_ms, user_id) in the order.
    pub after: Option<Cursor>,
}

/// The longest cursor (`X-Next-Cursor`) accepted.
pub const CURSOR_CHARS_MAX: usize = 64;

/// Position after a block in the listing order (lastUpdate DESC, userId DESC).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cursor {
    pub last_update_ms: i64,
    pub user_id: i64,
}

impl Cursor {
    /// Opaque text: base64url of `v1:<ms>:<user>`.
    pub fn encode(self) -> String {
        use base64::Engine;
        let raw = format!("v1:{}:{}", self.last_update_ms, self.user_id);
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
        let mut parts = raw.split(':');
        let (Some("v1"), Some(ms), Some(user), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        Ok(Cursor {
            last_update_ms: ms.parse().map_err(|_| bad())?,
            user_id: user.parse().map_err(|_| bad())?,
        })
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
        let c = Cursor {
            last_update_ms: 1_735_689_600_123,
            user_id: 777_001,
        };
        assert_eq!(Cursor::decode(&c.encode()).unwrap(), c);
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
