//! The invitation rules (write-up 003), as pure functions both stores use:
//! a site's settings as sent and checked ([`SiteInput`] -> [`Site`]), a
//! visitor's standing with a site ([`Standing`]), whether to show the popup
//! now ([`Site::decide`]) and what an answer does to a standing
//! ([`apply_answer`]).
//!
//! Rules: Yes stores the answer and never asks again (the survey opens in a
//! new tab); No stores it and never asks again; close asks again next time,
//! and after `closesMax` closes (default 3) never again. Each display has an
//! id; an answer names it, so a retried or double-clicked answer counts once
//! and closes on two displays count twice.

use serde::{Deserialize, Serialize};

use crate::platform::error::ApiError;

/// Limits of a site's settings, all explicit (and in `/openapi.json`).
pub const NAME_CHARS_MAX: usize = 100;
pub const URL_CHARS_MAX: usize = 2000;
pub const ORIGINS_MAX: usize = 20;
pub const CLOSES_MAX_LIMIT: i64 = 10;
pub const RETENTION_DAYS_MAX: i64 = 3650;
pub const TITLE_CHARS_MAX: usize = 120;
pub const TEXT_CHARS_MAX: usize = 500;
pub const BUTTON_CHARS_MAX: usize = 40;
/// Sites a store holds at most (each is kept in memory by every node).
pub const SITES_MAX: usize = 10_000;

/// The popup's texts.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Texts {
    /// At most 120 characters.
    pub title: String,
    /// At most 500 characters.
    pub body: String,
    /// The Yes button (at most 40 characters).
    pub yes: String,
    /// The No button (at most 40 characters).
    pub no: String,
    /// The close button's accessible name (at most 40 characters).
    pub close: String,
}

impl Default for Texts {
    fn default() -> Texts {
        Texts {
            title: "Help us improve".into(),
            body: "Would you take a short survey about this site? It takes about five minutes."
                .into(),
            yes: "Yes, open the survey".into(),
            no: "No, thanks".into(),
            close: "Close".into(),
        }
    }
}

/// A site's settings as an admin sends them (create: every field but
/// `surveyUrl` and `allowedOrigins` has a default; update: the fields sent
/// replace the stored ones).
#[derive(Clone, Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SiteInput {
    /// At most 100 characters.
    pub name: Option<String>,
    /// http or https URL of the survey (or a /path on this server), at most
    /// 2,000 bytes.
    pub survey_url: Option<String>,
    /// Origins whose pages may ask (`https://shop.example`, scheme, host and
    /// port only), at most 20.
    pub allowed_origins: Option<Vec<String>>,
    /// Share of new visitors invited, 0 to 1 (decided once per visitor and
    /// kept in the visitor's signed id). Default 1.
    pub invite_share: Option<f64>,
    /// Closes after which a visitor is never asked again, 1 to 10. Default 3.
    pub closes_max: Option<i64>,
    /// RFC 3339; no popup before it.
    pub active_from: Option<String>,
    /// RFC 3339; no popup from it on.
    pub active_until: Option<String>,
    /// A paused site shows no popup and takes no answers.
    pub paused: Option<bool>,
    /// Answers older than this many days are purged, 1 to 3650. Default 365.
    pub retention_days: Option<i64>,
    pub texts: Option<Texts>,
}

/// A site's settings, checked; stored as JSON (`invites_sites.config`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Site {
    pub name: String,
    pub survey_url: String,
    pub allowed_origins: Vec<String>,
    pub invite_share: f64,
    pub closes_max: i64,
    /// Milliseconds since the epoch.
    pub active_from_ms: Option<i64>,
    pub active_until_ms: Option<i64>,
    pub paused: bool,
    pub retention_days: i64,
    pub texts: Texts,
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::invalid_field(message)
}

fn parse_time(field: &str, s: &str) -> Result<i64, ApiError> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .map_err(|_| {
            invalid(format!(
                "{field}: an RFC 3339 time such as 2026-12-01T08:00:00Z"
            ))
        })?;
    Ok((t.unix_timestamp_nanos() / 1_000_000) as i64)
}

/// `scheme://host[:port]` of an http(s) origin, lowercased, or why not.
pub fn normalize_origin(s: &str) -> Result<String, String> {
    let lower = s.trim().to_ascii_lowercase();
    let rest = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"))
        .ok_or("an origin starts with http:// or https://")?;
    let plain = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.:".contains(&b))
    };
    // An IPv6 host is an IPv6 address in brackets, then nothing or `:port`.
    let host_ok = match rest.strip_prefix('[') {
        Some(v6) => v6.split_once(']').is_some_and(|(addr, after)| {
            addr.parse::<std::net::Ipv6Addr>().is_ok()
                && (after.is_empty() || after.starts_with(':') && plain(after))
        }),
        None => plain(rest),
    };
    if rest.is_empty() || rest.len() > 253 + 6 || !host_ok {
        return Err("an origin is scheme://host[:port], with no path, query or user".into());
    }
    Ok(lower)
}

fn check_url(s: &str) -> Result<(), ApiError> {
    // Absolute http(s), or a path on throng's own origin ("/survey").
    // The same rule as the OpenAPI pattern and maxLength (which counts
    // characters): a scheme and at least one character after it.
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"));
    let absolute = rest.is_some_and(|r| !r.is_empty());
    let own_path = s.starts_with('/') && !s.starts_with("//") && s.len() > 1;
    let ok = s.chars().count() <= URL_CHARS_MAX
        && (absolute || own_path)
        && !s.bytes().any(|b| b.is_ascii_control() || b == b' ');
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "surveyUrl: an http or https URL (or a /path on this server) of at most {URL_CHARS_MAX} characters, without spaces"
        )))
    }
}

fn check_chars(field: &str, s: &str, max: usize) -> Result<(), ApiError> {
    let n = s.chars().count();
    if n == 0 || n > max || s.chars().any(|c| c.is_control()) {
        return Err(invalid(format!(
            "{field}: 1 to {max} characters, no control characters"
        )));
    }
    Ok(())
}

impl SiteInput {
    /// The settings after applying this input to `base` (a new site's
    /// defaults, or the stored settings for an update).
    pub fn apply(self, base: Option<&Site>) -> Result<Site, ApiError> {
        let mut s = match base {
            Some(b) => b.clone(),
            None => Site {
                name: String::new(),
                survey_url: String::new(),
                allowed_origins: Vec::new(),
                invite_share: 1.0,
                closes_max: 3,
                active_from_ms: None,
                active_until_ms: None,
                paused: false,
                retention_days: 365,
                texts: Texts::default(),
            },
        };
        if base.is_none() && (self.survey_url.is_none() || self.allowed_origins.is_none()) {
            return Err(invalid(
                "surveyUrl and allowedOrigins are required to create a site",
            ));
        }
        if let Some(name) = self.name {
            s.name = name;
        }
        if s.name.is_empty() {
            s.name = "Survey".into();
        }
        check_chars("name", &s.name, NAME_CHARS_MAX)?;
        if let Some(u) = self.survey_url {
            check_url(&u)?;
            s.survey_url = u;
        }
        if let Some(origins) = self.allowed_origins {
            if origins.len() > ORIGINS_MAX {
                return Err(invalid(format!(
                    "allowedOrigins: at most {ORIGINS_MAX} origins"
                )));
            }
            let mut list = Vec::with_capacity(origins.len());
            for o in &origins {
                let n = normalize_origin(o)
                    .map_err(|why| invalid(format!("allowedOrigins: {o:?}: {why}")))?;
                if !list.contains(&n) {
                    list.push(n);
                }
            }
            s.allowed_origins = list;
        }
        if let Some(share) = self.invite_share {
            if !(0.0..=1.0).contains(&share) {
                return Err(invalid("inviteShare: a number from 0 to 1"));
            }
            s.invite_share = share;
        }
        if let Some(n) = self.closes_max {
            if !(1..=CLOSES_MAX_LIMIT).contains(&n) {
                return Err(invalid(format!("closesMax: 1 to {CLOSES_MAX_LIMIT}")));
            }
            s.closes_max = n;
        }
        if let Some(t) = self.active_from {
            s.active_from_ms = if t.is_empty() {
                None
            } else {
                Some(parse_time("activeFrom", &t)?)
            };
        }
        if let Some(t) = self.active_until {
            s.active_until_ms = if t.is_empty() {
                None
            } else {
                Some(parse_time("activeUntil", &t)?)
            };
        }
        if let (Some(a), Some(b)) = (s.active_from_ms, s.active_until_ms) {
            if a >= b {
                return Err(invalid("activeFrom must be before activeUntil"));
            }
        }
        if let Some(p) = self.paused {
            s.paused = p;
        }
        if let Some(d) = self.retention_days {
            if !(1..=RETENTION_DAYS_MAX).contains(&d) {
                return Err(invalid(format!("retentionDays: 1 to {RETENTION_DAYS_MAX}")));
            }
            s.retention_days = d;
        }
        if let Some(t) = self.texts {
            check_chars("texts.title", &t.title, TITLE_CHARS_MAX)?;
            check_chars("texts.body", &t.body, TEXT_CHARS_MAX)?;
            check_chars("texts.yes", &t.yes, BUTTON_CHARS_MAX)?;
            check_chars("texts.no", &t.no, BUTTON_CHARS_MAX)?;
            check_chars("texts.close", &t.close, BUTTON_CHARS_MAX)?;
            s.texts = t;
        }
        Ok(s)
    }
}

/// What a visitor has answered a site so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Standing {
    pub state: AnswerState,
    pub closes: i64,
}

/// Stored as a small integer (`invites_answers.state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AnswerState {
    /// No final answer yet (maybe some closes).
    #[default]
    Asking = 0,
    Yes = 1,
    No = 2,
    /// Closed the popup `closesMax` times.
    ClosedOut = 3,
}

impl AnswerState {
    pub fn from_i64(v: i64) -> Option<AnswerState> {
        Some(match v {
            0 => AnswerState::Asking,
            1 => AnswerState::Yes,
            2 => AnswerState::No,
            3 => AnswerState::ClosedOut,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            AnswerState::Asking => "asking",
            AnswerState::Yes => "yes",
            AnswerState::No => "no",
            AnswerState::ClosedOut => "closed_out",
        }
    }

    pub fn is_final(self) -> bool {
        self != AnswerState::Asking
    }
}

/// An answer as sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Answer {
    Yes,
    No,
    Close,
}

/// Why no popup is shown now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoPopup {
    Paused,
    NotYetActive,
    Ended,
    NotSampled,
    Answered(AnswerState),
}

impl NoPopup {
    pub fn reason(self) -> &'static str {
        match self {
            NoPopup::Paused => "site_paused",
            NoPopup::NotYetActive => "not_yet_active",
            NoPopup::Ended => "ended",
            NoPopup::NotSampled => "not_sampled",
            NoPopup::Answered(AnswerState::Yes) => "answered_yes",
            NoPopup::Answered(AnswerState::No) => "answered_no",
            NoPopup::Answered(_) => "closed_out",
        }
    }
}

impl Site {
    /// Whether the site takes answers now (`Err` names why not).
    pub fn active(&self, now_ms: i64) -> Result<(), NoPopup> {
        if self.paused {
            return Err(NoPopup::Paused);
        }
        if self.active_from_ms.is_some_and(|t| now_ms < t) {
            return Err(NoPopup::NotYetActive);
        }
        if self.active_until_ms.is_some_and(|t| now_ms >= t) {
            return Err(NoPopup::Ended);
        }
        Ok(())
    }

    /// Whether to show the popup now to a visitor with this standing.
    pub fn decide(&self, now_ms: i64, sampled: bool, standing: Standing) -> Result<(), NoPopup> {
        self.active(now_ms)?;
        if standing.state.is_final() {
            return Err(NoPopup::Answered(standing.state));
        }
        if !sampled {
            return Err(NoPopup::NotSampled);
        }
        Ok(())
    }

    /// Whether a new visitor with this draw (uniform in 0..2^32) is invited.
    pub fn samples_in(&self, draw: u32) -> bool {
        (draw as f64) < self.invite_share * 4_294_967_296.0
    }

    pub fn allows_origin(&self, origin: &str) -> bool {
        self.allowed_origins.iter().any(|o| o == origin)
    }
}

/// What an answer did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It counted: the standing changed.
    Counted,
    /// The same display was answered before: nothing changed.
    Repeated,
    /// The answers are final already (yes, no or closed out): refused.
    Final,
}

/// The standing after `answer` on display `display` (whose id is not in
/// `answered` when it is new). The one statement of the rules; PostgreSQL's
/// upsert (`store.rs`) mirrors it and the API tests run on both stores.
pub fn apply_answer(
    before: Standing,
    answered: &[i64],
    display: i64,
    answer: Answer,
    closes_max: i64,
) -> (Standing, Outcome) {
    if answered.contains(&display) {
        return (before, Outcome::Repeated);
    }
    if before.state.is_final() {
        return (before, Outcome::Final);
    }
    let after = match answer {
        Answer::Yes => Standing {
            state: AnswerState::Yes,
            ..before
        },
        Answer::No => Standing {
            state: AnswerState::No,
            ..before
        },
        Answer::Close => {
            let closes = before.closes + 1;
            Standing {
                state: if closes >= closes_max {
                    AnswerState::ClosedOut
                } else {
                    AnswerState::Asking
                },
                closes,
            }
        }
    };
    (after, Outcome::Counted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn survey_url_rules_match_the_document() {
        // The OpenAPI pattern accepts a scheme with one character after it,
        // and maxLength counts characters, not bytes.
        for ok in ["http://x", "https://x", "/s", "/survey?q=1"] {
            assert!(check_url(ok).is_ok(), "{ok}");
        }
        assert!(check_url(&format!("https://{}", "é".repeat(URL_CHARS_MAX - 8))).is_ok());
        let too_long = format!("https://{}", "é".repeat(URL_CHARS_MAX - 7));
        for bad in [
            "http://",
            "https://",
            "ftp://x",
            "//x",
            "/",
            "https://a b",
            &too_long,
        ] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
    }

    fn site() -> Site {
        SiteInput {
            survey_url: Some("https://survey.example/s/1".into()),
            allowed_origins: Some(vec!["https://Shop.Example".into()]),
            ..Default::default()
        }
        .apply(None)
        .unwrap()
    }

    #[test]
    fn three_closes_then_never_again() {
        let s = site();
        let mut st = Standing::default();
        let mut seen = Vec::new();
        for (i, display) in [11, 12, 13].into_iter().enumerate() {
            assert_eq!(s.decide(0, true, st), Ok(()));
            let (after, o) = apply_answer(st, &seen, display, Answer::Close, s.closes_max);
            assert_eq!(o, Outcome::Counted);
            assert_eq!(after.closes, i as i64 + 1);
            seen.push(display);
            st = after;
        }
        assert_eq!(st.state, AnswerState::ClosedOut);
        assert_eq!(
            s.decide(0, true, st),
            Err(NoPopup::Answered(AnswerState::ClosedOut))
        );
        assert_eq!(
            apply_answer(st, &seen, 14, Answer::Yes, 3).1,
            Outcome::Final
        );
    }

    #[test]
    fn a_repeated_display_counts_once_and_yes_and_no_are_final() {
        let (st, o) = apply_answer(Standing::default(), &[], 5, Answer::Close, 3);
        assert_eq!((st.closes, o), (1, Outcome::Counted));
        assert_eq!(
            apply_answer(st, &[5], 5, Answer::Close, 3).1,
            Outcome::Repeated
        );
        let (yes, o) = apply_answer(st, &[5], 6, Answer::Yes, 3);
        assert_eq!((yes.state, o), (AnswerState::Yes, Outcome::Counted));
        assert_eq!(
            apply_answer(yes, &[5, 6], 7, Answer::No, 3).1,
            Outcome::Final
        );
        assert_eq!(
            apply_answer(yes, &[5, 6], 6, Answer::No, 3).1,
            Outcome::Repeated
        );
    }

    #[test]
    fn settings_are_checked() {
        let s = site();
        assert_eq!(s.allowed_origins, vec!["https://shop.example".to_string()]);
        assert_eq!((s.closes_max, s.invite_share), (3, 1.0));
        for bad in [
            SiteInput {
                invite_share: Some(1.5),
                ..Default::default()
            },
            SiteInput {
                closes_max: Some(0),
                ..Default::default()
            },
            SiteInput {
                allowed_origins: Some(vec!["https://a.example/path".into()]),
                ..Default::default()
            },
            SiteInput {
                survey_url: Some("javascript:alert(1)".into()),
                ..Default::default()
            },
            SiteInput {
                active_from: Some("2027-01-02T00:00:00Z".into()),
                active_until: Some("2027-01-01T00:00:00Z".into()),
                ..Default::default()
            },
        ] {
            assert!(bad.apply(Some(&s)).is_err());
        }
        assert!(
            SiteInput::default().apply(None).is_err(),
            "create needs url and origins"
        );
    }

    #[test]
    fn sampling_follows_the_share() {
        let mut s = site();
        s.invite_share = 0.25;
        let n = 100_000u64;
        let invited = (0..n)
            .filter(|i| s.samples_in(crate::platform::experiment::mix64(*i, 7) as u32))
            .count() as f64;
        assert!((invited / n as f64 - 0.25).abs() < 0.01, "{invited}");
        s.invite_share = 0.0;
        assert!(!s.samples_in(0));
        s.invite_share = 1.0;
        assert!(s.samples_in(u32::MAX));
    }

    #[test]
    fn activity_window_and_pause() {
        let mut s = site();
        s.active_from_ms = Some(100);
        s.active_until_ms = Some(200);
        assert_eq!(s.active(99), Err(NoPopup::NotYetActive));
        assert_eq!(s.active(150), Ok(()));
        assert_eq!(s.active(200), Err(NoPopup::Ended));
        s.paused = true;
        assert_eq!(s.active(150), Err(NoPopup::Paused));
    }
}
