//! A registration as an iCalendar file (RFC 5545): one VEVENT with times
//! in UTC, so a calendar shows it at the right time in any time zone. It
//! names the place and the time, never the person.

use super::model::{BookingClock, Place, SealedRegistration};

/// The `.ics` text of `reg` at `place`; `now_ms` is the DTSTAMP, and
/// `manage_url` the registration page's absolute link (without the access
/// code: a calendar is shared and synced more widely than a message).
pub fn registration(
    reg: &SealedRegistration,
    place: &Place,
    clock: BookingClock,
    now_ms: i64,
    manage_url: &str,
) -> String {
    let start_minute = place.first_slot_minute + reg.time_slot * place.slot_minutes;
    let start = place.policy().epoch_ms(clock, reg.day, start_minute);
    let end = start + i64::from(place.slot_minutes.max(1)) * 60_000;
    let mut out = String::with_capacity(512);
    for line in [
        "BEGIN:VCALENDAR".to_string(),
        "VERSION:2.0".to_string(),
        "PRODID:-//throng//booking//EN".to_string(),
        "CALSCALE:GREGORIAN".to_string(),
        "METHOD:PUBLISH".to_string(),
        "BEGIN:VEVENT".to_string(),
        format!("UID:{}@booking.throng", reg.id),
        format!("DTSTAMP:{}", utc(now_ms)),
        format!("DTSTART:{}", utc(start)),
        format!("DTEND:{}", utc(end)),
        format!("SUMMARY:{}", text(&format!("Appointment at {}", place.name))),
        format!("LOCATION:{}", text(&format!("{}, {}", place.name, place.address))),
        format!(
            "DESCRIPTION:{}",
            text(&format!(
                "Registration {}. Bring your national id. To see, move or cancel it, open {manage_url} and enter your access code.",
                reg.id
            ))
        ),
        format!("URL:{manage_url}"),
        "END:VEVENT".to_string(),
        "END:VCALENDAR".to_string(),
    ] {
        fold(&line, &mut out);
    }
    out
}

/// `YYYYMMDDTHHMMSSZ`.
fn utc(ms: i64) -> String {
    let iso = crate::base::clock::iso_ms(ms).unwrap_or_else(|| "1970-01-01T00:00:00.000Z".into());
    // 2026-11-25T08:00:00.000Z -> 20261125T080000Z
    let pick = |r: std::ops::Range<usize>| &iso[r];
    format!(
        "{}{}{}T{}{}{}Z",
        pick(0..4),
        pick(5..7),
        pick(8..10),
        pick(11..13),
        pick(14..16),
        pick(17..19)
    )
}

/// A TEXT value escaped (RFC 5545 3.3.11): backslash, ';', ',' and line
/// breaks; other control characters dropped.
fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            ';' => out.push_str("\\;"),
            ',' => out.push_str("\\,"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Appends `line` folded at 75 octets (never inside a UTF-8 character),
/// each physical line ended by CRLF (RFC 5545 3.1).
fn fold(line: &str, out: &mut String) {
    let mut width = 0;
    for c in line.chars() {
        let n = c.len_utf8();
        if width + n > 75 {
            out.push_str("\r\n ");
            width = 1;
        }
        out.push(c);
        width += n;
    }
    out.push_str("\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::booking::model::Day;

    #[test]
    fn an_event_in_utc_with_escaped_folded_text() {
        let place = Place {
            id: 1,
            name: "Nemocnica; Poliklinika, Košice".into(),
            address: "Hlavná 1\\2".repeat(8),
            first_slot_minute: 8 * 60,
            slot_minutes: 20,
            seats: 1,
            ..Place::default()
        };
        let reg = SealedRegistration {
            id: "0190a000-0000-7000-8000-000000000001".into(),
            access_hash: vec![],
            place_id: 1,
            day: Day::parse("day", "2026-11-26").unwrap(),
            time_slot: 3,
            person_sealed: vec![],
            created_at_ms: 0,
            person_key: None,
        };
        let link = "https://t.example/booking/manage#id=0190a000-0000-7000-8000-000000000001";
        let ics = registration(
            &reg,
            &place,
            BookingClock::parse("+01:00").unwrap(),
            0,
            link,
        );
        assert!(ics.ends_with("END:VCALENDAR\r\n"));
        assert!(!ics.replace("\r\n", "").contains('\n'), "CRLF only");
        for line in ics.split("\r\n") {
            assert!(line.len() <= 75, "{line}");
        }
        let unfolded = ics.replace("\r\n ", "");
        // 09:00 at +01:00 is 08:00 UTC; a slot lasts 20 minutes.
        assert!(
            unfolded.contains("\r\nDTSTART:20261126T080000Z\r\n"),
            "{unfolded}"
        );
        assert!(unfolded.contains("\r\nDTEND:20261126T082000Z\r\n"));
        assert!(unfolded.contains("\r\nDTSTAMP:19700101T000000Z\r\n"));
        assert!(unfolded.contains("SUMMARY:Appointment at Nemocnica\\; Poliklinika\\, Košice\r\n"));
        assert!(unfolded.contains("Hlavná 1\\\\2"));
        assert!(
            unfolded.contains(&format!("\r\nURL:{link}\r\n")),
            "{unfolded}"
        );
        assert!(
            unfolded.contains(&format!("open {link} and enter")),
            "{unfolded}"
        );
    }
}
