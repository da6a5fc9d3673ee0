//! Wall-clock helpers (milliseconds since the Unix epoch), and [`Clock`], a
//! clock a service can be given so tests can move its time on.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// Milliseconds in a day.
pub const DAY_MS: i64 = 86_400_000;

/// The system's time plus an offset that only moves forward: cheap to
/// clone (one shared offset), read as fast as [`now_ms`]. A service holding
/// one reads every rule's "now" from it; a test moves it on with
/// [`Clock::advance`] instead of editing stored times.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    offset_ms: Arc<AtomicI64>,
}

impl Clock {
    /// The system's time.
    pub fn system() -> Clock {
        Clock::default()
    }

    pub fn now_ms(&self) -> i64 {
        now_ms() + self.offset_ms.load(Ordering::Relaxed)
    }

    /// Days since the Unix epoch (UTC) now.
    pub fn today(&self) -> i32 {
        day_of(self.now_ms())
    }

    /// Moves this clock (and every clone of it) `ms` on; negative is
    /// ignored, so time never runs back.
    pub fn advance(&self, ms: i64) {
        self.offset_ms.fetch_add(ms.max(0), Ordering::Relaxed);
    }
}

/// The day (since the Unix epoch, UTC) of a millisecond timestamp.
pub fn day_of(ms: i64) -> i32 {
    ms.div_euclid(DAY_MS) as i32
}

/// `YYYY-MM-DD` of a day since the Unix epoch.
pub fn day_text(day: i32) -> String {
    iso_ms(day as i64 * DAY_MS)
        .map(|t| t[..10].to_string())
        .unwrap_or_default()
}

/// The day since the Unix epoch of `YYYY-MM-DD`, if it is one.
pub fn parse_day(text: &str) -> Option<i32> {
    let d = time::Date::parse(
        text,
        &time::macros::format_description!("[year]-[month]-[day]"),
    )
    .ok()?;
    let epoch = time::Date::from_calendar_date(1970, time::Month::January, 1).ok()?;
    Some(d.to_julian_day() - epoch.to_julian_day())
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// RFC 3339 text for a millisecond timestamp (UTC).
pub fn rfc3339_ms(ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Milliseconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`; `None`
/// outside 1970-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z.
pub fn iso_ms(ms: i64) -> Option<String> {
    const MS_MAX: i64 = 253_402_300_799_999;
    if !(0..=MS_MAX).contains(&ms) {
        return None;
    }
    let (days, ms_of_day) = (ms / 86_400_000, ms % 86_400_000);
    // Civil date from days since 1970-01-01 (H. Hinnant, "chrono-compatible
    // low-level date algorithms"), for non-negative days.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let (h, min, s, milli) = (
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1000 % 60,
        ms_of_day % 1000,
    );
    let mut out = [0u8; 24];
    let mut put = |at: usize, value: i64, width: usize| {
        let mut v = value;
        for i in (0..width).rev() {
            out[at + i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, y, 4);
    put(5, m, 2);
    put(8, d, 2);
    put(11, h, 2);
    put(14, min, 2);
    put(17, s, 2);
    put(20, milli, 3);
    for (at, c) in [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'.'),
        (23, b'Z'),
    ] {
        out[at] = c;
    }
    Some(String::from_utf8(out.to_vec()).expect("ASCII digits and separators"))
}

#[cfg(test)]
mod clock_tests {
    use super::*;

    #[test]
    fn days_round_trip_and_the_clock_moves_on() {
        assert_eq!(parse_day("1970-01-01"), Some(0));
        assert_eq!(
            parse_day("2030-01-02").map(day_text).as_deref(),
            Some("2030-01-02")
        );
        assert_eq!(parse_day("2030-02-30"), None);
        assert_eq!(day_of(DAY_MS - 1), 0);
        let c = Clock::system();
        let (a, shared) = (c.today(), c.clone());
        shared.advance(3 * DAY_MS);
        assert!(c.today() >= a + 3);
        c.advance(-10 * DAY_MS);
        assert!(c.today() >= a + 3, "never back");
    }
}
