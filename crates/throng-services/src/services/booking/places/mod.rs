//! Places as an authority defines them: the definition and its rules
//! (here), opening hours (`hours.rs`), making a place's days into slots for
//! its booking horizon (`horizon.rs`), the CSV import (`import.rs`) and the
//! routes (`http.rs`).

pub mod horizon;
pub mod hours;
pub mod http;
pub mod import;

use serde::{Deserialize, Serialize};

use super::model::{Day, NAME_CHARS_MAX, SEATS_MAX};
use hours::{DayHours, WeekHours};

/// Characters of a place's code at most (letters, digits, `_`, `-`, `.`).
pub const CODE_CHARS_MAX: usize = 32;
pub const ADDRESS_CHARS_MAX: usize = 300;
pub const CITY_CHARS_MAX: usize = 100;
pub const REGION_CHARS_MAX: usize = 100;
pub const POSTCODE_CHARS_MAX: usize = 16;
/// Services a place may offer at most, and characters of each code
/// (lower-case letters, digits, `_`, `-`).
pub const SERVICES_MAX: usize = 20;
pub const SERVICE_CHARS_MAX: usize = 32;
pub const SLOT_MINUTES_MIN: i32 = 5;
pub const SLOT_MINUTES_MAX: i32 = 480;
/// Days ahead slots may be made for at most, and by default.
pub const BOOK_AHEAD_DAYS_MAX: i32 = 366;
pub const BOOK_AHEAD_DAYS_DEFAULT: i32 = 60;
/// Minimum notice at most: two days.
pub const NOTICE_MINUTES_MAX: i32 = 2 * 24 * 60;
/// Closed days (or days of other hours) one place may list at most.
pub const PLACE_DAYS_MAX: usize = 400;

/// A place as the authority defines it, every rule checked.
#[derive(Clone, Debug)]
pub struct PlaceDef {
    pub code: String,
    pub name: String,
    pub address: String,
    pub city: String,
    pub postcode: String,
    pub region: String,
    pub time_zone: String,
    pub latitude: Option<f64>,
    pub longitude: Option<f64>,
    pub services: Vec<String>,
    pub slot_minutes: i32,
    pub seats: i32,
    pub hours: WeekHours,
    pub book_ahead_days: i32,
    pub notice_minutes: i32,
}

impl PlaceDef {
    /// The lower-cased name, city and postcode a search reads.
    pub fn search_text(&self) -> String {
        format!("{}\u{1f}{}\u{1f}{}", self.name, self.city, self.postcode).to_lowercase()
    }

    /// The services as stored: space-separated with a space on either side.
    pub fn services_text(&self) -> String {
        format!(" {} ", self.services.join(" "))
    }
}

/// A rule a field broke: the field's name in the JSON body and in the CSV
/// header, and what is accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub json: &'static str,
    pub csv: &'static str,
    pub message: String,
}

fn field_error(json: &'static str, csv: &'static str, message: impl Into<String>) -> FieldError {
    FieldError {
        json,
        csv,
        message: message.into(),
    }
}

/// A place as an admin sends it (`POST`/`PUT /api/booking/places...`).
#[derive(Clone, Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlaceInput {
    /// The authority's code: 1 to 32 letters, digits, `_`, `-` or `.`.
    #[schema(value_type = PlaceCode, inline)]
    pub code: String,
    #[schema(value_type = PlaceName, inline)]
    pub name: String,
    #[schema(value_type = PlaceAddress, inline)]
    pub address: String,
    #[schema(value_type = PlaceCity, inline)]
    pub city: String,
    #[schema(value_type = PlacePostcode, inline)]
    pub postcode: String,
    #[schema(value_type = PlaceRegion, inline)]
    pub region: String,
    /// An IANA time zone, e.g. `Europe/Bratislava`.
    #[schema(value_type = TimeZoneName, inline)]
    pub time_zone: String,
    #[serde(default)]
    pub latitude: Option<f64>,
    #[serde(default)]
    pub longitude: Option<f64>,
    /// Service codes, e.g. `["vaccine-flu", "test-pcr"]`.
    #[serde(default)]
    pub services: Vec<String>,
    #[serde(deserialize_with = "crate::platform::extract::whole::int")]
    #[schema(value_type = SlotMinutes, inline)]
    pub slot_minutes: i64,
    #[serde(
        default = "one_seat",
        deserialize_with = "crate::platform::extract::whole::int"
    )]
    #[schema(value_type = Option<Seats>, inline)]
    pub seats: i64,
    /// Weekly hours, e.g. `Mo-Fr 08:00-12:00,13:00-16:00; Sa 09:00-12:00`.
    pub hours: String,
    #[serde(
        default = "book_ahead_default",
        deserialize_with = "crate::platform::extract::whole::int"
    )]
    #[schema(value_type = Option<BookAheadDays>, inline)]
    pub book_ahead_days: i64,
    #[serde(default, deserialize_with = "crate::platform::extract::whole::int")]
    #[schema(value_type = Option<NoticeMinutes>, inline)]
    pub notice_minutes: i64,
}

use crate::platform::openapi::{int_schema, pattern_schema, text_schema};
crate::schema_type!(PlaceCode => pattern_schema(format!("^[A-Za-z0-9_.-]{{1,{CODE_CHARS_MAX}}}$")));
crate::schema_type!(PlaceName => text_schema(1, NAME_CHARS_MAX, false));
crate::schema_type!(PlaceAddress => text_schema(1, ADDRESS_CHARS_MAX, false));
crate::schema_type!(PlaceCity => text_schema(1, CITY_CHARS_MAX, false));
crate::schema_type!(PlacePostcode => text_schema(1, POSTCODE_CHARS_MAX, false));
crate::schema_type!(PlaceRegion => text_schema(1, REGION_CHARS_MAX, false));
crate::schema_type!(TimeZoneName => pattern_schema("^[A-Za-z][A-Za-z0-9_+/-]{0,63}$".into()));
crate::schema_type!(SlotMinutes => int_schema(SLOT_MINUTES_MIN.into(), SLOT_MINUTES_MAX.into()));
crate::schema_type!(Seats => int_schema(1, SEATS_MAX.into()));
crate::schema_type!(BookAheadDays => int_schema(1, BOOK_AHEAD_DAYS_MAX.into()));
crate::schema_type!(NoticeMinutes => int_schema(0, NOTICE_MINUTES_MAX.into()));

fn one_seat() -> i64 {
    1
}

fn book_ahead_default() -> i64 {
    BOOK_AHEAD_DAYS_DEFAULT.into()
}

/// Checks a text field: trimmed, 1 to `max` characters, no control
/// characters.
fn text(
    json: &'static str,
    csv: &'static str,
    value: &str,
    max: usize,
) -> Result<String, FieldError> {
    let v = value.trim();
    let n = v.chars().count();
    let refused = |c: char| crate::platform::openapi::refused_char(c, false);
    if n == 0 || n > max || v.chars().any(refused) {
        return Err(field_error(
            json,
            csv,
            format!("1 to {max} characters, no control characters"),
        ));
    }
    Ok(v.to_string())
}

fn int_in(
    json: &'static str,
    csv: &'static str,
    value: i64,
    lo: i32,
    hi: i32,
) -> Result<i32, FieldError> {
    if !(i64::from(lo)..=i64::from(hi)).contains(&value) {
        return Err(field_error(
            json,
            csv,
            format!("an integer from {lo} to {hi}"),
        ));
    }
    Ok(value as i32)
}

/// Checks a time zone's name.
pub fn time_zone(value: &str) -> Result<chrono_tz::Tz, FieldError> {
    value.trim().parse::<chrono_tz::Tz>().map_err(|_| {
        field_error(
            "timeZone",
            "time_zone",
            format!(
                "'{}' is not an IANA time zone; use a name like Europe/Bratislava",
                value.chars().take(60).collect::<String>()
            ),
        )
    })
}

/// Checks a list of service codes.
pub fn services(codes: &[String]) -> Result<Vec<String>, FieldError> {
    let bad = |m: String| field_error("services", "services", m);
    if codes.len() > SERVICES_MAX {
        return Err(bad(format!("at most {SERVICES_MAX} service codes")));
    }
    let mut out: Vec<String> = Vec::with_capacity(codes.len());
    for c in codes {
        let c = c.trim().to_ascii_lowercase();
        let ok = (1..=SERVICE_CHARS_MAX).contains(&c.len())
            && c.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if !ok {
            return Err(bad(format!(
                "each code 1 to {SERVICE_CHARS_MAX} letters, digits, '_' or '-'"
            )));
        }
        if !out.contains(&c) {
            out.push(c);
        }
    }
    Ok(out)
}

/// Checks a place's code.
pub fn code(value: &str) -> Result<String, FieldError> {
    let v = value.trim();
    let ok = (1..=CODE_CHARS_MAX).contains(&v.len())
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if !ok {
        return Err(field_error(
            "code",
            "code",
            format!("1 to {CODE_CHARS_MAX} letters, digits, '_', '-' or '.'"),
        ));
    }
    Ok(v.to_string())
}

fn coordinate(
    json: &'static str,
    value: Option<f64>,
    limit: f64,
) -> Result<Option<f64>, FieldError> {
    match value {
        Some(v) if !v.is_finite() || v.abs() > limit => Err(field_error(
            json,
            json,
            format!("a number from -{limit} to {limit}"),
        )),
        v => Ok(v),
    }
}

impl PlaceInput {
    /// Checks every field; the error names the first field that breaks a
    /// rule.
    pub fn validate(self) -> Result<PlaceDef, FieldError> {
        let slot_minutes = int_in(
            "slotMinutes",
            "slot_minutes",
            self.slot_minutes,
            SLOT_MINUTES_MIN,
            SLOT_MINUTES_MAX,
        )?;
        let hours = WeekHours::parse(&self.hours)
            .and_then(|h| h.check_grid(0, slot_minutes).map(|()| h))
            .map_err(|e| field_error("hours", "hours", e))?;
        Ok(PlaceDef {
            code: code(&self.code)?,
            name: text("name", "name", &self.name, NAME_CHARS_MAX)?,
            address: text("address", "address", &self.address, ADDRESS_CHARS_MAX)?,
            city: text("city", "city", &self.city, CITY_CHARS_MAX)?,
            postcode: text("postcode", "postcode", &self.postcode, POSTCODE_CHARS_MAX)?,
            region: text("region", "region", &self.region, REGION_CHARS_MAX)?,
            time_zone: time_zone(&self.time_zone)?.name().to_string(),
            latitude: coordinate("latitude", self.latitude, 90.0)?,
            longitude: coordinate("longitude", self.longitude, 180.0)?,
            services: services(&self.services)?,
            slot_minutes,
            seats: int_in("seats", "seats", self.seats, 1, SEATS_MAX)?,
            hours,
            book_ahead_days: int_in(
                "bookAheadDays",
                "book_ahead_days",
                self.book_ahead_days,
                1,
                BOOK_AHEAD_DAYS_MAX,
            )?,
            notice_minutes: int_in(
                "noticeMinutes",
                "notice_minutes",
                self.notice_minutes,
                0,
                NOTICE_MINUTES_MAX,
            )?,
        })
    }
}

/// A change to places, with the days their slots are made for.
#[derive(Clone, Debug)]
pub enum PlaceChange {
    /// Create the place of this code, or update it (with `id`, the place
    /// of that id, whose code may change); `closed`, when given, becomes its
    /// set of closed days (days of other hours stay).
    Define {
        id: Option<i64>,
        def: Box<PlaceDef>,
        closed: Option<Vec<Day>>,
    },
    /// New weekly hours for a place.
    Hours { id: i64, hours: WeekHours },
    /// A day of other hours (closed when empty), or back to the week's
    /// (`None`).
    Day {
        id: i64,
        day: Day,
        hours: Option<DayHours>,
    },
    /// Make the days of every place's horizon that are not made yet.
    Extend,
}

/// What a change did, for the answer and the CLI.
#[derive(Clone, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangeSummary {
    /// Places created and updated.
    pub created: i64,
    pub updated: i64,
    /// Slots made and slots taken away (deleted, or withdrawn where they
    /// held people).
    pub slots_added: i64,
    pub slots_removed: i64,
    /// Slots whose seats changed.
    pub slots_changed: i64,
    /// Registrations on slots taken away: kept, each with a
    /// `SlotWithdrawn` event so the person is told.
    pub registrations_on_removed_slots: i64,
    /// Registrations on slots whose seats went below the people they hold:
    /// kept.
    pub registrations_over_seats: i64,
    /// The ids of the registrations on slots taken away (at most
    /// `AFFECTED_LISTED_MAX`).
    pub affected_registrations: Vec<String>,
    /// The places' ids, in the order they were given (a definition's).
    pub place_ids: Vec<i64>,
}

/// Registration ids an answer lists at most.
pub const AFFECTED_LISTED_MAX: usize = 1000;

impl ChangeSummary {
    pub fn add(&mut self, made: horizon::Made) {
        self.slots_added += made.added;
        self.slots_removed += made.removed;
        self.slots_changed += made.changed;
        self.registrations_over_seats += made.over_seats;
        self.registrations_on_removed_slots += made.withdrawn_registrations.len() as i64;
        for id in made.withdrawn_registrations {
            if self.affected_registrations.len() < AFFECTED_LISTED_MAX {
                self.affected_registrations.push(id);
            }
        }
    }
}

/// Why a change was refused (nothing of it written).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChangeRefused {
    /// No place with this id.
    UnknownPlace(i64),
    /// The definition at this position (0-based) changes a place's slot
    /// length while it has slots.
    SlotMinutesFixed { at: usize, code: String },
    /// Another change's hours are off the place's slot grid.
    OffGrid { at: usize, message: String },
    /// Another place has this code.
    CodeTaken { at: usize, code: String },
}
