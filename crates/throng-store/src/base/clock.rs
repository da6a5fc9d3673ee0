//! Wall-clock helpers (milliseconds since the Unix epoch).

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
