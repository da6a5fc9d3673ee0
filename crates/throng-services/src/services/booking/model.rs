//! Booking types parsed from input: each constructor checks its rule once,
//! so the rest of the code holds only valid values.

use serde::{Deserialize, Serialize};
use time::{format_description::FormatItem, macros::format_description, Date};

use crate::platform::error::ApiError;

const DAY_FORMAT: &[FormatItem<'static>] = format_description!("[year]-[month]-[day]");
/// Days a slot query may span at most.
pub const SLOT_QUERY_DAYS_MAX: u32 = 14;
/// Places per page at most.
pub const PLACES_PAGE_SIZE_MAX: i64 = 100;
pub const PLACES_PAGE_SIZE_DEFAULT: i64 = 20;
/// Time slots per day at most (one per minute).
pub const SLOTS_PER_DAY_MAX: i32 = 1440;
pub const NAME_CHARS_MAX: usize = 200;
pub const NATIONAL_ID_CHARS_MAX: usize = 32;
pub const PHONE_DIGITS_MIN: usize = 6;
pub const PHONE_DIGITS_MAX: usize = 15;
pub const EMAIL_CHARS_MAX: usize = 254;
/// People one slot may take at most (the availability index counts them in
/// a byte).
pub const SEATS_MAX: i32 = 250;

/// A calendar day, stored as days since 1970-01-01.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Day(pub i32);

impl Day {
    pub fn parse(field: &str, text: &str) -> Result<Day, ApiError> {
        let date = Date::parse(text, DAY_FORMAT).map_err(|_| {
            ApiError::invalid_field(format!(
                "{field}: '{}' is not a calendar date; expected YYYY-MM-DD",
                truncate(text, 40)
            ))
        })?;
        Ok(Day::from_date(date))
    }
    pub fn from_date(d: Date) -> Day {
        Day(d.to_julian_day()
            - Date::from_calendar_date(1970, time::Month::January, 1)
                .unwrap()
                .to_julian_day())
    }
    pub fn date(self) -> Date {
        Date::from_julian_day(self.0 + 2_440_588).unwrap_or(Date::MIN)
    }
    pub fn today() -> Day {
        Day::from_date(time::OffsetDateTime::now_utc().date())
    }
    pub fn plus(self, days: i32) -> Day {
        Day(self.0 + days)
    }
    pub fn to_text(self) -> String {
        let mut out = String::with_capacity(10);
        self.write_text(&mut out);
        out
    }
    /// Appends `YYYY-MM-DD` (years 0000-9999; `Day::parse` accepts no
    /// other) without going through the formatter.
    pub fn write_text(self, out: &mut String) {
        let (y, m, d) = self.date().to_calendar_date();
        let push2 = |out: &mut String, v: u32| {
            out.push(char::from(b'0' + (v / 10) as u8));
            out.push(char::from(b'0' + (v % 10) as u8));
        };
        let y = y.clamp(0, 9999) as u32;
        push2(out, y / 100);
        push2(out, y % 100);
        out.push('-');
        push2(out, m as u32);
        out.push('-');
        push2(out, u32::from(d));
    }
}

/// A place id: a positive integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlaceId(pub i64);

/// The ids a place can have.
pub const PLACE_ID_MIN: i64 = 1;
pub const PLACE_ID_MAX: i64 = i32::MAX as i64;

impl PlaceId {
    /// Ids outside `PLACE_ID_MIN..=PLACE_ID_MAX` cannot exist; they answer
    /// like unknown ones.
    pub fn exists_in_range(id: i64) -> bool {
        (PLACE_ID_MIN..=PLACE_ID_MAX).contains(&id)
    }
}

/// A place: where people book, as the authority defines it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Place {
    pub id: i64,
    /// The authority's code for the place (unique); absent for places made
    /// by a seed before places had codes.
    #[serde(default)]
    pub code: Option<String>,
    pub name: String,
    pub address: String,
    #[serde(default)]
    pub city: String,
    #[serde(default)]
    pub postcode: String,
    #[serde(default)]
    pub region: String,
    /// IANA time zone of the slot times; absent: the server's
    /// `--booking-utc-offset`.
    #[serde(default)]
    pub time_zone: Option<String>,
    #[serde(default)]
    pub latitude: Option<f64>,
    #[serde(default)]
    pub longitude: Option<f64>,
    /// Short codes of the services offered (e.g. vaccine or test types).
    #[serde(default)]
    pub services: Vec<String>,
    /// Minutes a slot lasts.
    #[serde(default)]
    pub slot_minutes: i32,
    /// People one slot takes.
    #[serde(default = "one")]
    pub seats: i32,
    /// Weekly opening hours, e.g. `Mo-Fr 08:00-12:00,13:00-16:00; Sa 09:00-12:00`.
    #[serde(default)]
    pub hours: String,
    /// Days from today that slots are made for (0: only the seed's).
    #[serde(default)]
    pub book_ahead_days: i32,
    /// Minutes before a slot's start after which it can no longer be booked.
    #[serde(default)]
    pub notice_minutes: i32,
    #[serde(skip)]
    #[schema(ignore)]
    pub first_slot_minute: i32,
    /// `time_zone`, parsed.
    #[serde(skip)]
    #[schema(ignore)]
    pub tz: Option<chrono_tz::Tz>,
}

fn one() -> i32 {
    1
}

/// What the booking rules need of a place, copied cheaply.
#[derive(Clone, Copy, Debug)]
pub struct PlacePolicy {
    pub first_slot_minute: i32,
    pub slot_minutes: i32,
    pub notice_minutes: i32,
    pub tz: Option<chrono_tz::Tz>,
}

impl PlacePolicy {
    /// Minutes from midnight at which a time slot starts.
    pub fn start_minute(&self, time_slot: i32) -> i32 {
        self.first_slot_minute + time_slot * self.slot_minutes
    }

    /// Now at the place, and the earliest moment a slot may start to be
    /// booked now (now plus the minimum notice), in the place's local time
    /// (its time zone, or `clock`'s offset).
    pub fn clock(&self, clock: BookingClock, now_ms: i64) -> PlaceClock {
        let at = |ms: i64| match self.tz {
            Some(tz) => local_now(tz, ms),
            None => clock.at_ms(ms),
        };
        PlaceClock {
            now: at(now_ms),
            earliest: at(now_ms + i64::from(self.notice_minutes) * 60_000),
        }
    }

    /// Milliseconds since the Unix epoch of `minute` (from midnight) on
    /// `day` at the place (the earlier one where clocks go back; where
    /// clocks go forward past it, the minute after the gap).
    pub fn epoch_ms(&self, clock: BookingClock, day: Day, minute: i32) -> i64 {
        match self.tz {
            Some(tz) => local_epoch_ms(tz, day, minute)
                .or_else(|| local_epoch_ms(tz, day, minute + 60).map(|ms| ms - 3_600_000))
                .unwrap_or_else(|| clock.epoch_ms(day, minute)),
            None => clock.epoch_ms(day, minute),
        }
    }
}

/// Now at a place and the earliest bookable moment (see
/// [`PlacePolicy::clock`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlaceClock {
    pub now: Now,
    pub earliest: Now,
}

impl PlaceClock {
    /// A slot starting at `start_minute` on `day` can be booked now.
    pub fn bookable(&self, day: Day, start_minute: i32) -> bool {
        !self.earliest.has_passed(day, start_minute)
    }
}

/// Now in `tz` from milliseconds since the epoch.
fn local_now(tz: chrono_tz::Tz, ms: i64) -> Now {
    use chrono::{Datelike, TimeZone, Timelike};
    let t = tz.timestamp_millis_opt(ms).single().unwrap_or_else(|| {
        tz.timestamp_millis_opt(0)
            .single()
            .expect("the epoch exists in every zone")
    });
    let date = t.date_naive();
    let today = Day(date.num_days_from_ce() - 719_163);
    Now {
        today,
        second_of_day: t.num_seconds_from_midnight() as i32,
    }
}

/// The instant of local `minute` on `day` in `tz`; `None` in a gap (clocks
/// going forward). Where clocks go back, the earlier of the two.
pub fn local_epoch_ms(tz: chrono_tz::Tz, day: Day, minute: i32) -> Option<i64> {
    use chrono::TimeZone;
    let date = chrono::NaiveDate::from_num_days_from_ce_opt(day.0 + 719_163)?;
    let time = chrono::NaiveTime::from_num_seconds_from_midnight_opt(
        u32::try_from(minute.rem_euclid(1440) * 60).ok()?,
        0,
    )?;
    let date = date + chrono::Days::new(u64::try_from(minute.div_euclid(1440)).ok()?);
    tz.from_local_datetime(&date.and_time(time))
        .earliest()
        .map(|t| t.timestamp_millis())
}

impl Place {
    /// "HH:MM" at which a time slot starts.
    pub fn slot_start(&self, time_slot: i32) -> String {
        let m = self.first_slot_minute + time_slot * self.slot_minutes;
        format!("{:02}:{:02}", (m / 60) % 24, m % 60)
    }

    pub fn policy(&self) -> PlacePolicy {
        PlacePolicy {
            first_slot_minute: self.first_slot_minute,
            slot_minutes: self.slot_minutes,
            notice_minutes: self.notice_minutes,
            tz: self.tz,
        }
    }
}

/// The person's data as sent; never logged, never in events or errors.
#[derive(Clone, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Person {
    pub name: String,
    pub national_id: String,
    pub phone: String,
    pub email: String,
}

impl std::fmt::Debug for Person {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Person { .. }")
    }
}

impl Person {
    /// Checks every field; the error names the field and the accepted form,
    /// never the value (it is personal data).
    pub fn validate(mut self) -> Result<Person, ApiError> {
        self.name = self.name.trim().to_string();
        self.national_id = self.national_id.trim().to_string();
        self.phone = self.phone.trim().to_string();
        self.email = self.email.trim().to_string();
        let n = self.name.chars().count();
        if n == 0 || n > NAME_CHARS_MAX || self.name.chars().any(char::is_control) {
            return Err(ApiError::invalid_field(format!(
                "person.name: 1 to {NAME_CHARS_MAX} characters, no control characters"
            )));
        }
        let id_ok = (1..=NATIONAL_ID_CHARS_MAX).contains(&self.national_id.len())
            && self
                .national_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '/' || c == '-');
        if !id_ok {
            return Err(ApiError::invalid_field(format!(
                "person.nationalId: 1 to {NATIONAL_ID_CHARS_MAX} letters, digits, '/' or '-'"
            )));
        }
        let digits = self.phone.chars().filter(|c| c.is_ascii_digit()).count();
        let phone_ok = (PHONE_DIGITS_MIN..=PHONE_DIGITS_MAX).contains(&digits)
            && self
                .phone
                .chars()
                .enumerate()
                .all(|(i, c)| c.is_ascii_digit() || c == ' ' || (c == '+' && i == 0));
        if !phone_ok {
            return Err(ApiError::invalid_field(format!(
                "person.phone: {PHONE_DIGITS_MIN} to {PHONE_DIGITS_MAX} digits, optional leading '+', spaces allowed"
            )));
        }
        // The same rule as the OpenAPI pattern: characters (not bytes) up to
        // the bound, one '@', a non-empty local part, and a domain of at
        // least two non-empty labels.
        let email_ok = self.email.chars().count() <= EMAIL_CHARS_MAX
            && self.email.split_once('@').is_some_and(|(local, domain)| {
                !local.is_empty()
                    && !domain.contains('@')
                    && domain.split('.').count() >= 2
                    && domain.split('.').all(|label| !label.is_empty())
            })
            && !self
                .email
                .chars()
                .any(|c| c.is_whitespace() || c.is_control());
        if !email_ok {
            return Err(ApiError::invalid_field(format!(
                "person.email: an address like name@example.org, at most {EMAIL_CHARS_MAX} characters"
            )));
        }
        Ok(self)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegistrationRequest {
    #[serde(deserialize_with = "crate::platform::extract::whole::int")]
    pub place_id: i64,
    pub day: String,
    #[serde(deserialize_with = "crate::platform::extract::whole::int")]
    pub time_slot: i64,
    pub person: Person,
}

/// A registration request after every rule was checked.
#[derive(Clone, Debug)]
pub struct NewRegistration {
    pub place_id: i64,
    pub day: Day,
    pub time_slot: i32,
    pub person: Person,
}

impl RegistrationRequest {
    pub fn parse(self) -> Result<NewRegistration, ApiError> {
        let slot = self.slot()?;
        Ok(NewRegistration {
            place_id: slot.place_id,
            day: slot.day,
            time_slot: slot.time_slot,
            person: self.person.validate()?,
        })
    }

    /// The slot asked for, checked by the rules of `parse`; the person is
    /// not looked at.
    pub fn slot(&self) -> Result<SlotRef, ApiError> {
        let day = Day::parse("day", &self.day)?;
        let (place_id, time_slot) = parse_place_and_slot(self.place_id, self.time_slot)?;
        Ok(SlotRef {
            place_id,
            day,
            time_slot,
        })
    }
}

/// What a try-register did; the slot is decided by one conditional write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegisterOutcome {
    Registered,
    /// Every seat of the slot is taken.
    SlotTaken,
    /// The person already holds an active registration (within the rule's
    /// scope: ever, or that day).
    AlreadyRegistered,
    PlaceNotFound,
    SlotNotFound,
}

/// A registration as stored: id, hashed access code, the person sealed.
#[derive(Clone, Debug)]
pub struct SealedRegistration {
    pub id: String,
    pub access_hash: Vec<u8>,
    pub place_id: i64,
    pub day: Day,
    pub time_slot: i32,
    pub person_sealed: Vec<u8>,
    pub created_at_ms: i64,
    /// The blind index of the national id under the one-registration rule;
    /// `None` with the rule off.
    pub person_key: Option<Vec<u8>>,
}

/// How many active registrations a person may hold (`--booking-one-registration`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OneRegistration {
    /// One at a time, whatever the day.
    Person,
    /// One per day.
    PersonDay,
    /// No limit per person.
    Off,
}

impl OneRegistration {
    /// The blind-index scope of a registration on `day`; `None` when off.
    pub fn scope(self, day: Day) -> Option<Vec<u8>> {
        match self {
            OneRegistration::Person => Some(b"person".to_vec()),
            OneRegistration::PersonDay => Some(format!("person-day:{}", day.0).into_bytes()),
            OneRegistration::Off => None,
        }
    }
}

/// A national id as the blind index sees it: letters upper-cased, '/' and
/// '-' dropped, so `900101/0001` and `9001010001` are one person.
pub fn national_id_key(id: &str) -> Vec<u8> {
    id.bytes()
        .filter(|b| b.is_ascii_alphanumeric())
        .map(|b| b.to_ascii_uppercase())
        .collect()
}

impl SealedRegistration {
    /// The event payload: ids and the slot only, never personal data.
    pub fn event_payload(&self) -> SlotEvent<'_> {
        SlotEvent {
            registration_id: std::borrow::Cow::Borrowed(&self.id),
            place_id: self.place_id,
            day: self.day.to_text(),
            time_slot: self.time_slot,
        }
    }
}

/// The payload of `RegistrationConfirmed` and `RegistrationCancelled`.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlotEvent<'a> {
    #[serde(borrow)]
    pub registration_id: std::borrow::Cow<'a, str>,
    pub place_id: i64,
    pub day: String,
    pub time_slot: i32,
}

pub const EVENT_CONFIRMED: &str = "RegistrationConfirmed";
pub const EVENT_CANCELLED: &str = "RegistrationCancelled";
pub const EVENT_SLOTS_OPENED: &str = "SlotsOpened";
pub const EVENT_MOVED: &str = "RegistrationMoved";
/// A registration's slot was taken out of the place's hours (new hours, a
/// closed day); the registration stands and the person should be told.
pub const EVENT_SLOT_WITHDRAWN: &str = "SlotWithdrawn";

/// The payload of `RegistrationMoved`: the slot it holds now and the one it
/// left; ids and slots only, never personal data.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MovedEvent {
    pub registration_id: String,
    pub place_id: i64,
    pub day: String,
    pub time_slot: i32,
    pub from_place_id: i64,
    pub from_day: String,
    pub from_time_slot: i32,
}

/// A move request: the slot to move to.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MoveRequest {
    #[serde(deserialize_with = "crate::platform::extract::whole::int")]
    pub place_id: i64,
    pub day: String,
    #[serde(deserialize_with = "crate::platform::extract::whole::int")]
    pub time_slot: i64,
}

/// A slot a registration asks for, after its rules were checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotRef {
    pub place_id: i64,
    pub day: Day,
    pub time_slot: i32,
}

impl MoveRequest {
    pub fn parse(self) -> Result<SlotRef, ApiError> {
        let day = Day::parse("day", &self.day)?;
        let (place_id, time_slot) = parse_place_and_slot(self.place_id, self.time_slot)?;
        Ok(SlotRef {
            place_id,
            day,
            time_slot,
        })
    }
}

fn parse_place_and_slot(place_id: i64, time_slot: i64) -> Result<(i64, i32), ApiError> {
    if place_id < 1 {
        return Err(ApiError::invalid_field("placeId: a positive integer"));
    }
    if !(0..SLOTS_PER_DAY_MAX as i64).contains(&time_slot) {
        return Err(ApiError::invalid_field(format!(
            "timeSlot: an integer from 0 to {}",
            SLOTS_PER_DAY_MAX - 1
        )));
    }
    Ok((place_id, time_slot as i32))
}

/// What a move did; the new slot is decided by the same conditional write
/// as a registration, and the old one freed in the same transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoveOutcome {
    /// Moved from this slot (now free) to the requested one.
    Moved {
        from: SlotRef,
    },
    /// The registration already holds the requested slot: nothing changed.
    Unchanged,
    /// No registration with this id and code.
    NotFound,
    SlotTaken,
    AlreadyRegistered,
    PlaceNotFound,
    SlotNotFound,
}

/// The time zone slot times are in: a fixed offset from UTC
/// (`--booking-utc-offset`), and "now" in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BookingClock {
    pub offset: time::UtcOffset,
}

/// Today and the second of the day, at the booking's offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Now {
    pub today: Day,
    pub second_of_day: i32,
}

impl Now {
    /// A slot starting at `start_minute` (from midnight) on `day` has
    /// started or is over: it cannot be booked any more.
    pub fn has_passed(self, day: Day, start_minute: i32) -> bool {
        day < self.today || (day == self.today && start_minute * 60 <= self.second_of_day)
    }
}

impl BookingClock {
    pub const UTC: BookingClock = BookingClock {
        offset: time::UtcOffset::UTC,
    };

    /// Parses `+HH:MM` or `-HH:MM` (or `Z`), from -12:00 to +14:00.
    pub fn parse(text: &str) -> Result<BookingClock, String> {
        let bad = || {
            format!("'{text}': expected an offset from UTC like +01:00, -05:00 or Z (from -12:00 to +14:00)")
        };
        let t = text.trim();
        if t.eq_ignore_ascii_case("z") || t == "UTC" {
            return Ok(BookingClock::UTC);
        }
        let b = t.as_bytes();
        if b.len() != 6 || !(b[0] == b'+' || b[0] == b'-') || b[3] != b':' {
            return Err(bad());
        }
        let h: i32 = t[1..3].parse().map_err(|_| bad())?;
        let m: i32 = t[4..6].parse().map_err(|_| bad())?;
        if m > 59 {
            return Err(bad());
        }
        let total = (h * 60 + m) * if b[0] == b'-' { -1 } else { 1 };
        if !(-12 * 60..=14 * 60).contains(&total) {
            return Err(bad());
        }
        let offset = time::UtcOffset::from_whole_seconds(total * 60).map_err(|_| bad())?;
        Ok(BookingClock { offset })
    }

    /// Now at this offset, from the wall clock (`base::clock`).
    pub fn now(self) -> Now {
        self.at_ms(crate::base::clock::now_ms())
    }

    pub fn at_ms(self, ms: i64) -> Now {
        let t = time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
            .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
            .to_offset(self.offset);
        let (h, m, s) = t.to_hms();
        Now {
            today: Day::from_date(t.date()),
            second_of_day: i32::from(h) * 3600 + i32::from(m) * 60 + i32::from(s),
        }
    }

    /// Milliseconds since the Unix epoch of `minute` (from midnight) on
    /// `day` at this offset.
    pub fn epoch_ms(self, day: Day, minute: i32) -> i64 {
        (i64::from(day.0) * 86_400 + i64::from(minute) * 60
            - i64::from(self.offset.whole_seconds()))
            * 1000
    }
}

/// The category of the service's event streams (`booking-...`).
pub const STREAM_CATEGORY: &str = "booking";

pub fn stream_of(registration_id: &str) -> String {
    const PREFIX: &str = "booking-registration-";
    let mut out = String::with_capacity(PREFIX.len() + registration_id.len());
    out.push_str(PREFIX);
    out.push_str(registration_id);
    out
}

fn truncate(s: &str, chars: usize) -> String {
    s.chars().take(chars).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_text_matches_the_calendar_formatter() {
        // Every day from 1900 to 2199, against `time`'s own formatting.
        let from = Day::parse("day", "1900-01-01").unwrap();
        for offset in 0..(300 * 366) {
            let day = from.plus(offset);
            let (y, m, d) = day.date().to_calendar_date();
            assert_eq!(day.to_text(), format!("{y:04}-{:02}-{d:02}", m as u8));
            assert_eq!(Day::parse("day", &day.to_text()).unwrap(), day);
        }
    }

    #[test]
    fn days_round_trip_and_reject_impossible_dates() {
        let d = Day::parse("day", "2026-12-01").unwrap();
        assert_eq!(d.to_text(), "2026-12-01");
        assert_eq!(Day::parse("day", "1970-01-01").unwrap().0, 0);
        for bad in [
            "2026-02-30",
            "2026-13-01",
            "2026-1-1",
            "",
            "tomorrow",
            "2026-12-01T00:00",
        ] {
            assert!(Day::parse("day", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn booking_clock_offsets_and_passed_slots() {
        assert_eq!(BookingClock::parse("Z").unwrap(), BookingClock::UTC);
        let cet = BookingClock::parse("+01:00").unwrap();
        assert_eq!(cet.offset.whole_seconds(), 3600);
        assert_eq!(
            BookingClock::parse("-05:30")
                .unwrap()
                .offset
                .whole_seconds(),
            -(5 * 3600 + 1800)
        );
        for bad in ["+1", "01:00", "+15:00", "-13:00", "+01:60", "+aa:00", ""] {
            assert!(BookingClock::parse(bad).is_err(), "{bad}");
        }
        // 2026-11-25T23:30Z is 00:30 on the 26th at +01:00.
        let day = Day::parse("day", "2026-11-26").unwrap();
        let ms = cet.epoch_ms(day, 30);
        assert_eq!(crate::base::clock::rfc3339_ms(ms), "2026-11-25T23:30:00Z");
        let now = cet.at_ms(ms);
        assert_eq!(
            now,
            Now {
                today: day,
                second_of_day: 30 * 60
            }
        );
        assert!(now.has_passed(day.plus(-1), 23 * 60));
        assert!(now.has_passed(day, 30), "a slot starting now has passed");
        assert!(!now.has_passed(day, 31));
        assert!(!now.has_passed(day.plus(1), 0));
    }

    #[test]
    fn person_rules() {
        let ok = Person {
            name: "Jana Nováková".into(),
            national_id: "905123/1234".into(),
            phone: "+421 900 123 456".into(),
            email: "jana@example.sk".into(),
        };
        assert!(ok.clone().validate().is_ok());
        let mut p = ok.clone();
        p.phone = "12".into();
        assert!(p.validate().unwrap_err().message.contains("person.phone"));
        let mut p = ok.clone();
        p.email = "no-at-sign".into();
        assert!(p.validate().unwrap_err().message.contains("person.email"));
        // The bound counts characters, as the OpenAPI maxLength does: 200
        // two-byte characters are 400 bytes and still accepted.
        let mut p = ok.clone();
        p.email = format!("{}@example.sk", "é".repeat(200));
        assert!(p.validate().is_ok());
        let mut p = ok.clone();
        p.email = format!("{}@example.sk", "é".repeat(EMAIL_CHARS_MAX));
        assert!(p.validate().unwrap_err().message.contains("person.email"));
        for bad in [
            "a@b..sk",
            "a@b@c.sk",
            "a@.sk",
            "a@sk.",
            "@example.sk",
            "a b@example.sk",
        ] {
            let mut p = ok.clone();
            p.email = bad.into();
            assert!(p.validate().is_err(), "{bad}");
        }
        let mut p = ok;
        p.national_id = "1' OR '1'='1".into();
        assert!(p
            .validate()
            .unwrap_err()
            .message
            .contains("person.nationalId"));
    }
}
