//! The invitation rules (the survey write-up's), as pure functions both stores use:
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
/// An origin as sent, at most (`https://`, a 253-character host, `:65535`, `/`).
pub const ORIGIN_CHARS_MAX: usize = 8 + 253 + 6 + 1;
pub const CLOSES_MAX_LIMIT: i64 = 10;
pub const RETENTION_DAYS_MAX: i64 = 3650;
pub const TITLE_CHARS_MAX: usize = 120;
pub const TEXT_CHARS_MAX: usize = 500;
pub const BUTTON_CHARS_MAX: usize = 40;
/// Longest delay before the popup (`delaySeconds`), s.
pub const DELAY_SECONDS_MAX: i64 = 600;
/// `delaySeconds` and `scrollPercent` when not set.
pub const DELAY_SECONDS_DEFAULT: i64 = 10;
pub const SCROLL_PERCENT_DEFAULT: i64 = 50;
/// The share of the page scrolled for `scroll`, in percent.
pub const SCROLL_PERCENT_MIN: i64 = 1;
pub const SCROLL_PERCENT_MAX: i64 = 100;
/// Sites a store holds at most (each is kept in memory by every node).
pub const SITES_MAX: usize = 10_000;
/// Page patterns a site may list, to include and to exclude each.
pub const PAGE_PATTERNS_MAX: usize = 50;
/// Characters of one page pattern.
pub const PATTERN_CHARS_MAX: usize = 200;
/// Characters of a page's path kept (a check's `page`, the results' rows).
pub const PAGE_CHARS_MAX: usize = 300;
/// Longest wait before asking again after "No" or after the closes ended it, days.
pub const ASK_AGAIN_DAYS_MAX: i64 = 3650;
/// Most invitations a cap may allow per period (and the invitations a
/// visitor's pacing token remembers).
pub const CAP_INVITATIONS_MAX: i64 = 10;
/// Longest cap period, days; and its default.
pub const CAP_DAYS_MAX: i64 = 365;
pub const CAP_DAYS_DEFAULT: i64 = 30;
/// Characters of an owner's name (the sites whose invitations a cap counts together).
pub const OWNER_CHARS_MAX: usize = 64;
/// The owner of a site created without one.
pub const OWNER_DEFAULT: &str = "default";
/// The placeholders a survey URL may hold, replaced in each invitation's link.
pub const PLACEHOLDERS: [&str; 4] = ["{visitor}", "{display}", "{page}", "{site}"];

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

/// When the script shows the popup on a page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// As soon as the state answer arrives.
    #[default]
    Load,
    /// `delaySeconds` after the page loaded.
    Delay,
    /// Once the visitor scrolled `scrollPercent` of the page (at once on a
    /// page too short to scroll).
    Scroll,
    /// When the mouse leaves the page through its top edge (towards the tabs
    /// or the address bar); on a touch screen, which has no such move,
    /// `delaySeconds` after the page loaded.
    ExitIntent,
}

impl Trigger {
    pub fn name(self) -> &'static str {
        match self {
            Trigger::Load => "load",
            Trigger::Delay => "delay",
            Trigger::Scroll => "scroll",
            Trigger::ExitIntent => "exit_intent",
        }
    }
}

/// How the popup is shown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Style {
    /// Centred over a dimmed page, which it keeps focus from until answered.
    #[default]
    Modal,
    /// A panel in the bottom corner (the full width of a phone); the page
    /// stays usable.
    SlideIn,
}

impl Style {
    pub fn name(self) -> &'static str {
        match self {
            Style::Modal => "modal",
            Style::SlideIn => "slide_in",
        }
    }
}

/// The kind of device a page is viewed on: the snippet's report, else the
/// User-Agent's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Device {
    Desktop,
    Phone,
    Tablet,
}

impl Device {
    pub const ALL: [Device; 3] = [Device::Desktop, Device::Phone, Device::Tablet];

    pub fn name(self) -> &'static str {
        match self {
            Device::Desktop => "desktop",
            Device::Phone => "phone",
            Device::Tablet => "tablet",
        }
    }

    pub fn parse(text: &str) -> Option<Device> {
        Device::ALL.into_iter().find(|d| d.name() == text)
    }

    /// From a User-Agent: iPads and Android without "Mobile" are tablets;
    /// "Mobi", iPhones and other Androids are phones; the rest desktops.
    pub fn from_user_agent(ua: &str) -> Device {
        if ua.contains("iPad")
            || ua.contains("Tablet")
            || (ua.contains("Android") && !ua.contains("Mobile"))
        {
            Device::Tablet
        } else if ua.contains("Mobi") || ua.contains("iPhone") || ua.contains("Android") {
            Device::Phone
        } else {
            Device::Desktop
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
    #[serde(default, deserialize_with = "crate::platform::extract::whole::opt")]
    pub closes_max: Option<i64>,
    /// RFC 3339; no popup before it.
    pub active_from: Option<String>,
    /// RFC 3339; no popup from it on.
    pub active_until: Option<String>,
    /// A paused site shows no popup and takes no answers.
    pub paused: Option<bool>,
    /// Answers older than this many days are purged, 1 to 3650. Default 365.
    #[serde(default, deserialize_with = "crate::platform::extract::whole::opt")]
    pub retention_days: Option<i64>,
    pub texts: Option<Texts>,
    /// When to show the popup: load (default), delay, scroll, exit_intent.
    pub trigger: Option<Trigger>,
    /// Seconds after the page loaded for `delay` (and `exit_intent` on a
    /// touch screen), 0 to 600. Default 10.
    #[serde(default, deserialize_with = "crate::platform::extract::whole::opt")]
    pub delay_seconds: Option<i64>,
    /// Share of the page scrolled for `scroll`, 1 to 100 (%). Default 50.
    #[serde(default, deserialize_with = "crate::platform::extract::whole::opt")]
    pub scroll_percent: Option<i64>,
    /// modal (default) or slide_in.
    pub style: Option<Style>,
    /// Sites of one owner count their invitations together for the
    /// visitor cap (1 to 64 characters). Default "default".
    pub owner: Option<String>,
    /// Page path patterns (`/checkout/*`: `*` any characters) where the
    /// popup may show; empty: every page. At most 50 of 200 characters.
    pub pages_include: Option<Vec<String>>,
    /// Page path patterns where it never shows (checked after the
    /// included ones).
    pub pages_exclude: Option<Vec<String>>,
    /// desktop, phone, tablet: where the popup may show; empty: everywhere.
    pub devices: Option<Vec<Device>>,
    /// Days after a "No" to ask again, 1 to 3650; 0 (default): never.
    #[serde(default, deserialize_with = "crate::platform::extract::whole::opt")]
    pub ask_again_after_no_days: Option<i64>,
    /// Days after the closes ended the asking (closesMax closes) to ask
    /// again, the closes counted afresh, 1 to 3650; 0 (default): never.
    #[serde(default, deserialize_with = "crate::platform::extract::whole::opt")]
    pub ask_again_after_closes_days: Option<i64>,
    /// Invitations a visitor is shown at most per capDays over all the
    /// owner's sites, 1 to 10; 0 (default): no cap.
    #[serde(default, deserialize_with = "crate::platform::extract::whole::opt")]
    pub cap_invitations: Option<i64>,
    /// The cap's period in days, 1 to 365. Default 30.
    #[serde(default, deserialize_with = "crate::platform::extract::whole::opt")]
    pub cap_days: Option<i64>,
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
    #[serde(default)]
    pub trigger: Trigger,
    #[serde(default = "default_delay_seconds")]
    pub delay_seconds: i64,
    #[serde(default = "default_scroll_percent")]
    pub scroll_percent: i64,
    #[serde(default)]
    pub style: Style,
    #[serde(default = "default_owner")]
    pub owner: String,
    #[serde(default)]
    pub pages_include: Vec<String>,
    #[serde(default)]
    pub pages_exclude: Vec<String>,
    #[serde(default)]
    pub devices: Vec<Device>,
    /// 0: never.
    #[serde(default)]
    pub ask_again_after_no_days: i64,
    /// 0: never.
    #[serde(default)]
    pub ask_again_after_closes_days: i64,
    /// 0: no cap.
    #[serde(default)]
    pub cap_invitations: i64,
    #[serde(default = "default_cap_days")]
    pub cap_days: i64,
}

fn default_owner() -> String {
    OWNER_DEFAULT.into()
}

fn default_cap_days() -> i64 {
    CAP_DAYS_DEFAULT
}

/// A page pattern as an admin writes it: a path from `/`, printable ASCII
/// without spaces, `*` for any characters.
fn check_pattern(field: &str, p: &str) -> Result<(), ApiError> {
    if !p.starts_with('/')
        || p.len() > PATTERN_CHARS_MAX
        || !p.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(invalid(format!(
            "{field}: {p:?}: a path from / of at most {PATTERN_CHARS_MAX} printable characters without spaces, * for any characters (e.g. /checkout/*)"
        )));
    }
    Ok(())
}

fn check_patterns(field: &str, list: Vec<String>) -> Result<Vec<String>, ApiError> {
    if list.len() > PAGE_PATTERNS_MAX {
        return Err(invalid(format!(
            "{field}: at most {PAGE_PATTERNS_MAX} patterns"
        )));
    }
    for p in &list {
        check_pattern(field, p)?;
    }
    Ok(list)
}

/// A glob compiled once per site: the pattern's literal parts between `*`s.
#[derive(Clone, Debug)]
pub struct Glob {
    parts: Vec<Box<[u8]>>,
    /// No `*` at the start / at the end.
    anchored_start: bool,
    anchored_end: bool,
}

impl Glob {
    pub fn compile(pattern: &str) -> Glob {
        let b = pattern.as_bytes();
        Glob {
            parts: pattern
                .split('*')
                .filter(|p| !p.is_empty())
                .map(|p| p.as_bytes().into())
                .collect(),
            anchored_start: !b.starts_with(b"*"),
            anchored_end: !b.ends_with(b"*"),
        }
    }

    /// Whether `path` matches: the parts in order, the first at the start
    /// and the last at the end unless a `*` stands there. Greedy from the
    /// left is exact for `*`-only globs (each part taken at its first
    /// place leaves the most room for the rest).
    pub fn matches(&self, path: &str) -> bool {
        let mut rest = path.as_bytes();
        let n = self.parts.len();
        if n == 0 {
            return !self.anchored_start || rest.is_empty();
        }
        for (i, part) in self.parts.iter().enumerate() {
            let last = i == n - 1;
            if i == 0 && self.anchored_start {
                if !rest.starts_with(part) {
                    return false;
                }
                if last && self.anchored_end {
                    return rest.len() == part.len();
                }
                rest = &rest[part.len()..];
                continue;
            }
            if last && self.anchored_end {
                return rest.ends_with(part);
            }
            match find(rest, part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
        true
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A site's page and device rules, compiled once when the sites are loaded.
#[derive(Clone, Debug, Default)]
pub struct Targeting {
    include: Vec<Glob>,
    exclude: Vec<Glob>,
    /// Bit per `Device` allowed; 0: every device.
    devices: u8,
}

impl Targeting {
    pub fn compile(site: &Site) -> Targeting {
        Targeting {
            include: site
                .pages_include
                .iter()
                .map(|p| Glob::compile(p))
                .collect(),
            exclude: site
                .pages_exclude
                .iter()
                .map(|p| Glob::compile(p))
                .collect(),
            devices: site.devices.iter().fold(0, |m, d| m | 1 << *d as u8),
        }
    }

    /// Whether the popup may show on this page (a path; `None` when the
    /// page sent none: only a site without included patterns shows there).
    pub fn page_allowed(&self, page: Option<&str>) -> bool {
        let Some(path) = page else {
            return self.include.is_empty();
        };
        (self.include.is_empty() || self.include.iter().any(|g| g.matches(path)))
            && !self.exclude.iter().any(|g| g.matches(path))
    }

    pub fn device_allowed(&self, device: Device) -> bool {
        self.devices == 0 || self.devices & (1 << device as u8) != 0
    }
}

/// The path of a page as a check names it (an absolute URL or a path):
/// without query or fragment, at most `PAGE_CHARS_MAX` characters; `None`
/// for anything else.
pub fn page_path(page: &str) -> Option<&str> {
    let page = page.trim();
    let path = if let Some(rest) = page
        .strip_prefix("https://")
        .or_else(|| page.strip_prefix("http://"))
    {
        match rest.find('/') {
            Some(i) => &rest[i..],
            None => "/",
        }
    } else if page.starts_with('/') {
        page
    } else {
        return None;
    };
    let end = path.find(['?', '#']).unwrap_or(path.len());
    let path = &path[..end];
    if path.chars().any(|c| c.is_control()) {
        return None;
    }
    Some(match path.char_indices().nth(PAGE_CHARS_MAX) {
        Some((end, _)) => &path[..end],
        None => path,
    })
}

fn default_delay_seconds() -> i64 {
    DELAY_SECONDS_DEFAULT
}

fn default_scroll_percent() -> i64 {
    SCROLL_PERCENT_DEFAULT
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

/// A port as written after `:` (1 to 65535, no leading zero), or why not.
fn parse_port(p: &str) -> Result<u16, String> {
    let ok = !p.is_empty()
        && p.len() <= 5
        && !p.starts_with('0')
        && p.bytes().all(|b| b.is_ascii_digit());
    match p.parse::<u16>() {
        Ok(n) if ok && n >= 1 => Ok(n),
        _ => Err(format!("port {p:?}: 1 to 65535")),
    }
}

/// A host as a browser's URL parser keeps it unchanged: a DNS name of
/// ASCII letters, digits, `-` and `.` (an internationalised name in its
/// `xn--` form), or an IPv6 address in brackets. Lowercase.
fn check_host(host: &str) -> Result<(), String> {
    if let Some(v6) = host.strip_prefix('[') {
        return match v6.strip_suffix(']') {
            Some(addr) if addr.parse::<std::net::Ipv6Addr>().is_ok() => Ok(()),
            _ => Err("an IPv6 host is an IPv6 address in brackets".into()),
        };
    }
    let ok = !host.is_empty()
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "host {host:?}: letters, digits, '-' and '.' (an internationalised name in its xn-- form), or [IPv6]"
        ))
    }
}

/// `(scheme, host, port)` of `scheme://host[:port]` (an authority with no
/// user), lowercased, the port `None` when absent or the scheme's default.
fn parse_authority(scheme: &str, authority: &str) -> Result<(String, Option<u16>), String> {
    if authority.contains('@') {
        return Err("no user or password before the host (user@host)".into());
    }
    let authority = authority.to_ascii_lowercase();
    let (host, port) = match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => {
            (&authority[..i], Some(parse_port(&authority[i + 1..])?))
        }
        _ => (authority.as_str(), None),
    };
    check_host(host)?;
    let default = if scheme == "https" { 443 } else { 80 };
    Ok((host.to_string(), port.filter(|p| *p != default)))
}

/// `scheme://host[:port]` of an http(s) origin as a browser sends it in
/// `Origin`: scheme and host lowercased, the scheme's default port dropped,
/// one trailing `/` dropped; or why it is not one.
pub fn normalize_origin(s: &str) -> Result<String, String> {
    let t = s;
    if t.chars().count() > ORIGIN_CHARS_MAX {
        return Err(format!("at most {ORIGIN_CHARS_MAX} characters"));
    }
    let lower_scheme = t.get(..8).map(str::to_ascii_lowercase).unwrap_or_default();
    let (scheme, rest) = if lower_scheme.starts_with("https://") {
        ("https", &t[8..])
    } else if lower_scheme.starts_with("http://") {
        ("http", &t[7..])
    } else {
        return Err("an origin starts with http:// or https://".into());
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.contains(['/', '?', '#', '\\']) {
        return Err("an origin is scheme://host[:port], with no path, query or fragment".into());
    }
    let (host, port) = parse_authority(scheme, rest)?;
    Ok(match port {
        Some(p) => format!("{scheme}://{host}:{p}"),
        None => format!("{scheme}://{host}"),
    })
}

/// Characters no URL here may hold: a browser drops tabs and newlines
/// inside a URL and reads `\` as `/`, so `/\evil.example` or
/// `/\t/evil.example` would lead to another host.
fn bad_url_char(c: char) -> bool {
    c.is_control() || c.is_whitespace() || c == '\\'
}

/// The characters [`bad_url_char`] refuses, as a regular expression class
/// body (for `/openapi.json`): controls, Unicode white space, backslash.
pub const BAD_URL_CHARS_CLASS: &str =
    "\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\\\";
/// A host as `check_host` takes it and a port as `parse_port` does, as
/// regular expressions (for `/openapi.json`).
pub const HOST_PATTERN: &str =
    "([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*|\\[[0-9A-Fa-f:.]+\\])";
pub const PORT_PATTERN: &str =
    "(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})";

/// The survey URL rule: an absolute `http(s)://host[:port][/...]` URL (no
/// user, ASCII host), or a path on throng's own server (`/survey`; never
/// `//host`), which answers give resolved against the public URL. Returns
/// the host part when absolute.
pub fn check_survey_url(s: &str) -> Result<(), String> {
    let what = format!(
        "an absolute http:// or https:// URL with a host (no user@, no spaces, tabs, newlines or backslashes), or a /path on this server, at most {URL_CHARS_MAX} characters"
    );
    if s.chars().count() > URL_CHARS_MAX || s.chars().any(bad_url_char) {
        return Err(what);
    }
    if let Some(path) = s.strip_prefix('/') {
        return if !path.is_empty() && !path.starts_with('/') {
            Ok(())
        } else {
            Err(what)
        };
    }
    let (scheme, rest) = if let Some(r) = s.strip_prefix("https://") {
        ("https", r)
    } else if let Some(r) = s.strip_prefix("http://") {
        ("http", r)
    } else {
        return Err(what);
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    parse_authority(scheme, &rest[..end]).map_err(|why| format!("{why}; {what}"))?;
    Ok(())
}

fn check_url(s: &str) -> Result<(), ApiError> {
    check_survey_url(s).map_err(|why| invalid(format!("surveyUrl: {why}")))
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
                trigger: Trigger::Load,
                delay_seconds: DELAY_SECONDS_DEFAULT,
                scroll_percent: SCROLL_PERCENT_DEFAULT,
                style: Style::Modal,
                owner: default_owner(),
                pages_include: Vec::new(),
                pages_exclude: Vec::new(),
                devices: Vec::new(),
                ask_again_after_no_days: 0,
                ask_again_after_closes_days: 0,
                cap_invitations: 0,
                cap_days: CAP_DAYS_DEFAULT,
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
        if let Some(t) = self.trigger {
            s.trigger = t;
        }
        if let Some(d) = self.delay_seconds {
            if !(0..=DELAY_SECONDS_MAX).contains(&d) {
                return Err(invalid(format!("delaySeconds: 0 to {DELAY_SECONDS_MAX}")));
            }
            s.delay_seconds = d;
        }
        if let Some(p) = self.scroll_percent {
            if !(SCROLL_PERCENT_MIN..=SCROLL_PERCENT_MAX).contains(&p) {
                return Err(invalid(format!(
                    "scrollPercent: {SCROLL_PERCENT_MIN} to {SCROLL_PERCENT_MAX}"
                )));
            }
            s.scroll_percent = p;
        }
        if let Some(style) = self.style {
            s.style = style;
        }
        if let Some(owner) = self.owner {
            check_chars("owner", &owner, OWNER_CHARS_MAX)?;
            s.owner = owner;
        }
        if let Some(list) = self.pages_include {
            s.pages_include = check_patterns("pagesInclude", list)?;
        }
        if let Some(list) = self.pages_exclude {
            s.pages_exclude = check_patterns("pagesExclude", list)?;
        }
        if let Some(list) = self.devices {
            s.devices = Device::ALL
                .into_iter()
                .filter(|d| list.contains(d))
                .collect();
        }
        for (field, value, slot) in [
            (
                "askAgainAfterNoDays",
                self.ask_again_after_no_days,
                &mut s.ask_again_after_no_days,
            ),
            (
                "askAgainAfterClosesDays",
                self.ask_again_after_closes_days,
                &mut s.ask_again_after_closes_days,
            ),
        ] {
            if let Some(d) = value {
                if !(0..=ASK_AGAIN_DAYS_MAX).contains(&d) {
                    return Err(invalid(format!(
                        "{field}: 0 (never) to {ASK_AGAIN_DAYS_MAX} days"
                    )));
                }
                *slot = d;
            }
        }
        if let Some(n) = self.cap_invitations {
            if !(0..=CAP_INVITATIONS_MAX).contains(&n) {
                return Err(invalid(format!(
                    "capInvitations: 0 (no cap) to {CAP_INVITATIONS_MAX}"
                )));
            }
            s.cap_invitations = n;
        }
        if let Some(d) = self.cap_days {
            if !(1..=CAP_DAYS_MAX).contains(&d) {
                return Err(invalid(format!("capDays: 1 to {CAP_DAYS_MAX}")));
            }
            s.cap_days = d;
        }
        Ok(s)
    }
}

/// What a visitor has answered a site so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Standing {
    pub state: AnswerState,
    pub closes: i64,
    /// The day (since the Unix epoch, UTC) of the last answer counted; 0
    /// before any.
    pub day: i32,
}

/// What an answer is decided by besides the standing: the site's rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnswerRules {
    pub closes_max: i64,
    /// 0: never.
    pub ask_again_after_no_days: i64,
    /// 0: never.
    pub ask_again_after_closes_days: i64,
}

impl AnswerRules {
    /// A standing as the rules see it on `today`: a "No" or a closed-out
    /// standing whose wait has passed is asked again, its closes counted
    /// afresh (a default standing).
    pub fn reopen(&self, s: Standing, today: i32) -> Standing {
        let wait = match s.state {
            AnswerState::No => self.ask_again_after_no_days,
            AnswerState::ClosedOut => self.ask_again_after_closes_days,
            _ => 0,
        };
        if wait > 0 && (today as i64 - s.day as i64) >= wait {
            Standing::default()
        } else {
            s
        }
    }
}

/// Stored as a small integer (`invites_answers.state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
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
    PageExcluded,
    DeviceExcluded,
    /// The visitor was shown the cap's invitations within its period.
    Capped,
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
            NoPopup::PageExcluded => "page_excluded",
            NoPopup::DeviceExcluded => "device_excluded",
            NoPopup::Capped => "visitor_cap",
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

    /// The rules an answer to this site is decided by.
    pub fn rules(&self) -> AnswerRules {
        AnswerRules {
            closes_max: self.closes_max,
            ask_again_after_no_days: self.ask_again_after_no_days,
            ask_again_after_closes_days: self.ask_again_after_closes_days,
        }
    }

    /// Whether to show the popup now to a visitor with this standing on
    /// this page and device, who was shown `recent` invitations of the
    /// owner's sites within the cap's period.
    pub fn decide(
        &self,
        now_ms: i64,
        sampled: bool,
        standing: Standing,
        visit: &Visit<'_>,
    ) -> Result<(), NoPopup> {
        self.active(now_ms)?;
        if !visit.targeting.page_allowed(visit.page) {
            return Err(NoPopup::PageExcluded);
        }
        if !visit.targeting.device_allowed(visit.device) {
            return Err(NoPopup::DeviceExcluded);
        }
        let today = crate::base::clock::day_of(now_ms);
        let standing = self.rules().reopen(standing, today);
        if standing.state.is_final() {
            return Err(NoPopup::Answered(standing.state));
        }
        if !sampled {
            return Err(NoPopup::NotSampled);
        }
        if self.cap_invitations > 0 && visit.recent(today, self.cap_days) >= self.cap_invitations {
            return Err(NoPopup::Capped);
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

/// Where a check comes from: the page, the device, the site's compiled
/// rules and the days of the visitor's recent invitations (its pacing).
pub struct Visit<'a> {
    pub page: Option<&'a str>,
    pub device: Device,
    pub targeting: &'a Targeting,
    /// Days (since the Unix epoch) of the invitations the visitor was shown.
    pub invited_days: &'a [i32],
}

impl Visit<'_> {
    /// Invitations within the last `days` days, today included.
    pub fn recent(&self, today: i32, days: i64) -> i64 {
        self.invited_days
            .iter()
            .filter(|d| (today as i64 - **d as i64) < days && **d <= today)
            .count() as i64
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
/// upsert (`store/postgres.rs`) mirrors it and the API tests run on both stores.
/// A "No" or closed-out standing whose wait (`rules`) has passed on
/// `today` is asked again: its answer counts, closes afresh.
pub fn apply_answer(
    before: Standing,
    answered: &[i64],
    display: i64,
    answer: Answer,
    rules: &AnswerRules,
    today: i32,
) -> (Standing, Outcome) {
    if answered.contains(&display) {
        return (before, Outcome::Repeated);
    }
    if rules.reopen(before, today).state.is_final() {
        return (before, Outcome::Final);
    }
    let before = Standing {
        day: today,
        ..rules.reopen(before, today)
    };
    let closes_max = rules.closes_max;
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
                day: today,
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
        for ok in [
            "http://x",
            "https://x",
            "/s",
            "/survey?q=1",
            "https://survey.example:8443/s?q=1#a",
            "https://[::1]/s",
        ] {
            assert!(check_url(ok).is_ok(), "{ok}");
        }
        assert!(check_url(&format!("https://x/{}", "é".repeat(URL_CHARS_MAX - 10))).is_ok());
        let too_long = format!("https://x/{}", "é".repeat(URL_CHARS_MAX - 9));
        for bad in [
            "http://",
            "https://",
            "ftp://x",
            "//x",
            "/",
            "https://a b",
            "/\\evil.example/x",
            "\\\\evil",
            "/\t/evil.example",
            "https://shop.example\\@evil.example",
            "https://shop.example@evil.example/",
            "https://ex\nample.com",
            "javascript:alert(1)",
            "JAVASCRIPT:alert(1)",
            " https://x",
            "https://x:0/",
            "https://x:65536/",
            "https://exämple.com/",
            &too_long,
        ] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
    }

    const R3: AnswerRules = AnswerRules {
        closes_max: 3,
        ask_again_after_no_days: 0,
        ask_again_after_closes_days: 0,
    };

    fn visit(t: &Targeting) -> Visit<'_> {
        Visit {
            page: Some("/"),
            device: Device::Desktop,
            targeting: t,
            invited_days: &[],
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
        let t = Targeting::compile(&s);
        let mut st = Standing::default();
        let mut seen = Vec::new();
        for (i, display) in [11, 12, 13].into_iter().enumerate() {
            assert_eq!(s.decide(0, true, st, &visit(&t)), Ok(()));
            let (after, o) = apply_answer(st, &seen, display, Answer::Close, &s.rules(), 0);
            assert_eq!(o, Outcome::Counted);
            assert_eq!(after.closes, i as i64 + 1);
            seen.push(display);
            st = after;
        }
        assert_eq!(st.state, AnswerState::ClosedOut);
        assert_eq!(
            s.decide(0, true, st, &visit(&t)),
            Err(NoPopup::Answered(AnswerState::ClosedOut))
        );
        assert_eq!(
            apply_answer(st, &seen, 14, Answer::Yes, &R3, 0).1,
            Outcome::Final
        );
    }

    #[test]
    fn a_repeated_display_counts_once_and_yes_and_no_are_final() {
        let (st, o) = apply_answer(Standing::default(), &[], 5, Answer::Close, &R3, 0);
        assert_eq!((st.closes, o), (1, Outcome::Counted));
        assert_eq!(
            apply_answer(st, &[5], 5, Answer::Close, &R3, 0).1,
            Outcome::Repeated
        );
        let (yes, o) = apply_answer(st, &[5], 6, Answer::Yes, &R3, 0);
        assert_eq!((yes.state, o), (AnswerState::Yes, Outcome::Counted));
        assert_eq!(
            apply_answer(yes, &[5, 6], 7, Answer::No, &R3, 0).1,
            Outcome::Final
        );
        assert_eq!(
            apply_answer(yes, &[5, 6], 6, Answer::No, &R3, 0).1,
            Outcome::Repeated
        );
    }

    #[test]
    fn origins_are_normalised_or_refused() {
        for (given, kept) in [
            ("https://Shop.Example", "https://shop.example"),
            ("HTTPS://shop.example:443", "https://shop.example"),
            ("http://shop.example:80/", "http://shop.example"),
            ("https://shop.example:8443", "https://shop.example:8443"),
            ("http://[::1]:8080", "http://[::1]:8080"),
            ("http://localhost:3000/", "http://localhost:3000"),
        ] {
            assert_eq!(normalize_origin(given).as_deref(), Ok(kept), "{given}");
        }
        for bad in [
            "shop.example",
            "https://shop.example/path",
            "https://shop.example?q",
            "https://user@shop.example",
            "https://shop.example:99999",
            "https://shop.example:0",
            "https://shop..example",
            "https://",
            "null",
        ] {
            assert!(normalize_origin(bad).is_err(), "{bad}");
        }
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
            .filter(|i| s.samples_in(crate::platform::mix::mix64(*i, 7) as u32))
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

    #[test]
    fn globs_match_paths() {
        for (pattern, yes, no) in [
            (
                "/checkout/*",
                &["/checkout/", "/checkout/pay", "/checkout/a/b"][..],
                &["/checkout", "/shop/checkout/x"][..],
            ),
            ("/", &["/"][..], &["/a"][..]),
            ("*", &["/", "/anything"][..], &[][..]),
            (
                "/shop/*/reviews",
                &["/shop/1/reviews", "/shop/a/b/reviews"][..],
                &["/shop/1/reviews/2", "/shop/reviews"][..],
            ),
            (
                "*/thanks",
                &["/order/thanks", "/thanks"][..],
                &["/thanks/x"][..],
            ),
            ("/a*a", &["/aa", "/aba", "/aaa"][..], &["/a", "/ab"][..]),
            (
                "/p/*/*/x*",
                &["/p/1/2/x", "/p/1/2/xyz"][..],
                &["/p/1/x"][..],
            ),
        ] {
            let g = Glob::compile(pattern);
            for p in yes {
                assert!(g.matches(p), "{pattern} should match {p}");
            }
            for p in no {
                assert!(!g.matches(p), "{pattern} should not match {p}");
            }
        }
    }

    #[test]
    fn pages_and_devices_target_the_popup() {
        let mut s = site();
        s.pages_include = vec!["/shop/*".into(), "/".into()];
        s.pages_exclude = vec!["/shop/checkout/*".into()];
        s.devices = vec![Device::Phone, Device::Tablet];
        let t = Targeting::compile(&s);
        assert!(t.page_allowed(Some("/shop/shoes")));
        assert!(t.page_allowed(Some("/")));
        assert!(!t.page_allowed(Some("/shop/checkout/pay")));
        assert!(!t.page_allowed(Some("/about")));
        assert!(!t.page_allowed(None), "included patterns need a page");
        assert!(Targeting::compile(&site()).page_allowed(None));
        assert!(t.device_allowed(Device::Phone) && !t.device_allowed(Device::Desktop));
        assert_eq!(page_path("https://shop.example/a/b?q=1#x"), Some("/a/b"));
        assert_eq!(page_path("https://shop.example"), Some("/"));
        assert_eq!(page_path("/x#y"), Some("/x"));
        let long = format!("/{}", "é".repeat(PAGE_CHARS_MAX));
        assert_eq!(page_path(&long).unwrap().chars().count(), PAGE_CHARS_MAX);
        assert_eq!(page_path("javascript:1"), None);
        let iphone = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) Mobile/15E148";
        let ipad = "Mozilla/5.0 (iPad; CPU OS 17_0 like Mac OS X)";
        let tab =
            "Mozilla/5.0 (Linux; Android 14; SM-X710) AppleWebKit/537.36 Chrome/120 Safari/537.36";
        let droid = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 Chrome/120 Mobile Safari/537.36";
        assert_eq!(Device::from_user_agent(iphone), Device::Phone);
        assert_eq!(Device::from_user_agent(droid), Device::Phone);
        assert_eq!(Device::from_user_agent(ipad), Device::Tablet);
        assert_eq!(Device::from_user_agent(tab), Device::Tablet);
        assert_eq!(
            Device::from_user_agent("Mozilla/5.0 (X11; Linux x86_64)"),
            Device::Desktop
        );
    }

    #[test]
    fn no_and_closes_are_asked_again_after_their_wait() {
        let rules = AnswerRules {
            closes_max: 1,
            ask_again_after_no_days: 7,
            ask_again_after_closes_days: 2,
        };
        let (no, _) = apply_answer(Standing::default(), &[], 1, Answer::No, &rules, 100);
        assert_eq!((no.state, no.day), (AnswerState::No, 100));
        assert_eq!(
            apply_answer(no, &[1], 2, Answer::Yes, &rules, 106).1,
            Outcome::Final
        );
        let (yes, o) = apply_answer(no, &[1], 2, Answer::Yes, &rules, 107);
        assert_eq!((yes.state, o), (AnswerState::Yes, Outcome::Counted));
        assert_eq!(
            apply_answer(yes, &[1, 2], 3, Answer::No, &rules, 900).1,
            Outcome::Final,
            "yes is final"
        );
        let (out, _) = apply_answer(Standing::default(), &[], 1, Answer::Close, &rules, 10);
        assert_eq!(out.state, AnswerState::ClosedOut);
        assert_eq!(rules.reopen(out, 11), out);
        let (again, o) = apply_answer(out, &[1], 2, Answer::Close, &rules, 12);
        assert_eq!(
            (again.state, again.closes, o),
            (AnswerState::ClosedOut, 1, Outcome::Counted)
        );
        assert_eq!(
            R3.reopen(
                Standing {
                    state: AnswerState::No,
                    closes: 0,
                    day: 1
                },
                9999
            )
            .state,
            AnswerState::No
        );
    }

    #[test]
    fn the_cap_counts_recent_invitations() {
        let mut s = site();
        s.cap_invitations = 2;
        s.cap_days = 7;
        let t = Targeting::compile(&s);
        let now = 100 * crate::base::clock::DAY_MS;
        let days = [95, 99];
        let v = Visit {
            invited_days: &days,
            ..visit(&t)
        };
        assert_eq!(
            s.decide(now, true, Standing::default(), &v),
            Err(NoPopup::Capped)
        );
        let days = [93, 99];
        let v = Visit {
            invited_days: &days,
            ..visit(&t)
        };
        assert_eq!(s.decide(now, true, Standing::default(), &v), Ok(()));
    }
}
