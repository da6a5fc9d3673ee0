//! The messages a person gets, one per event of their registration: a
//! confirmation (and one resent by staff), a move, a cancellation, a place
//! closing their day, a reminder before the appointment, a new access code,
//! and a slot withdrawn by changed opening hours. Each carries an absolute
//! link (`serve --public-url`): to the registration's page, with its access
//! code in the fragment when the message hands one over, or, once the
//! registration is gone, to the booking page.
//!
//! The notifier (`notifier.rs`) delivers them from the event log at least
//! once, to the SMS gateway's webhook and by email; this module only says
//! which events are messages and what each says.

use super::backoffice::store as office;
use super::model::{self, Place};
use super::store::messages::EVENT_REMINDER_DUE;

/// The event the places' opening hours emit when a change removes a slot
/// that holds a registration (payload: at least `registrationId`), in the
/// registration's stream.
pub const EVENT_SLOT_WITHDRAWN: &str = model::EVENT_SLOT_WITHDRAWN;

/// Every event type the notifier turns into a message.
pub const MESSAGE_EVENTS: &[&str] = &[
    model::EVENT_CONFIRMED,
    office::EVENT_CONFIRMATION_RESENT,
    model::EVENT_MOVED,
    model::EVENT_CANCELLED,
    office::EVENT_CANCELLED_BY_PLACE,
    EVENT_REMINDER_DUE,
    office::EVENT_ACCESS_CODE_REISSUED,
    EVENT_SLOT_WITHDRAWN,
];

/// What a message is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Confirmation,
    Move,
    Cancellation,
    DayCancelled,
    Reminder,
    NewAccessCode,
    SlotWithdrawn,
}

impl Kind {
    pub fn of_event(event_type: &str) -> Option<Kind> {
        Some(match event_type {
            model::EVENT_CONFIRMED | office::EVENT_CONFIRMATION_RESENT => Kind::Confirmation,
            model::EVENT_MOVED => Kind::Move,
            model::EVENT_CANCELLED => Kind::Cancellation,
            office::EVENT_CANCELLED_BY_PLACE => Kind::DayCancelled,
            EVENT_REMINDER_DUE => Kind::Reminder,
            office::EVENT_ACCESS_CODE_REISSUED => Kind::NewAccessCode,
            EVENT_SLOT_WITHDRAWN => Kind::SlotWithdrawn,
            _ => return None,
        })
    }

    /// The name messages carry (`kind` in the webhook's JSON).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Confirmation => "confirmation",
            Kind::Move => "move",
            Kind::Cancellation => "cancellation",
            Kind::DayCancelled => "day_cancelled",
            Kind::Reminder => "reminder",
            Kind::NewAccessCode => "new_access_code",
            Kind::SlotWithdrawn => "slot_withdrawn",
        }
    }

    /// Whether the registration is gone when this is sent (its contact
    /// data is then the kept copy, `booking_cancelled`).
    pub fn after_cancel(self) -> bool {
        matches!(self, Kind::Cancellation | Kind::DayCancelled)
    }

    pub fn subject(self) -> &'static str {
        match self {
            Kind::Confirmation => "Your appointment is booked",
            Kind::Move => "Your appointment has moved",
            Kind::Cancellation => "Your appointment is cancelled",
            Kind::DayCancelled => "Your appointment is cancelled: the place is closed that day",
            Kind::Reminder => "Reminder of your appointment",
            Kind::NewAccessCode => "A new access code for your appointment",
            Kind::SlotWithdrawn => "Your appointment time is no longer available",
        }
    }
}

/// The registration page's absolute link: `{base}/booking/manage#id=..`,
/// with the access code in the fragment when the message hands one over
/// (a fragment never reaches a server).
pub fn manage_url(base: &str, registration_id: &str, code: Option<&str>) -> String {
    match code {
        Some(code) => format!("{base}/booking/manage#id={registration_id}&code={code}"),
        None => format!("{base}/booking/manage#id={registration_id}"),
    }
}

/// The booking page's absolute link (for a registration that is gone).
pub fn booking_url(base: &str) -> String {
    format!("{base}/booking/")
}

/// What a message says about an appointment.
pub struct Appointment<'a> {
    pub place: Option<&'a Place>,
    pub place_id: i64,
    pub day: model::Day,
    pub time_slot: i32,
}

impl Appointment<'_> {
    fn place_name(&self) -> String {
        self.place
            .map(|p| p.name.clone())
            .unwrap_or_else(|| format!("place {}", self.place_id))
    }
    pub fn start(&self) -> Option<String> {
        self.place.map(|p| p.slot_start(self.time_slot))
    }
    fn when(&self) -> String {
        match self.start() {
            Some(start) => format!("{} at {start}", self.day.to_text()),
            None => self.day.to_text(),
        }
    }
}

/// The message's text (SMS and email body alike); `link` is the absolute
/// link it carries.
pub fn text(kind: Kind, a: &Appointment<'_>, link: &str) -> String {
    let (place, when) = (a.place_name(), a.when());
    match kind {
        Kind::Confirmation => {
            format!("Your appointment at {place} on {when} is booked. See, move or cancel it: {link}")
        }
        Kind::Move => format!("Your appointment has moved to {place} on {when}. See it: {link}"),
        Kind::Cancellation => {
            format!("Your appointment at {place} on {when} is cancelled. Book another: {link}")
        }
        Kind::DayCancelled => format!(
            "{place} is closed on {}: your appointment on {when} is cancelled. Book another: {link}",
            a.day.to_text()
        ),
        Kind::Reminder => {
            format!("Reminder: your appointment at {place} is on {when}. See, move or cancel it: {link}")
        }
        Kind::NewAccessCode => format!(
            "A new access code for your appointment at {place} on {when}; the old one no longer \
             works. Open it: {link}"
        ),
        Kind::SlotWithdrawn => format!(
            "The opening hours of {place} changed and your appointment on {when} no longer fits \
             them. Choose another time: {link}"
        ),
    }
}

/// The longest `--booking-reminder-before`.
pub const REMINDER_BEFORE_MS_MAX: i64 = 30 * 86_400_000;

/// Parses `--booking-reminder-before`: a whole number and a unit, `m`
/// (minutes), `h` (hours) or `d` (days), e.g. `24h`; at most 30 days.
pub fn parse_reminder_before(text: &str) -> Result<i64, String> {
    let bad = || format!("'{text}': expected a duration like 90m, 24h or 2d (at most 30d)");
    let t = text.trim();
    let unit_ms = match t.chars().last() {
        Some('m') => 60_000,
        Some('h') => 3_600_000,
        Some('d') => 86_400_000,
        _ => return Err(bad()),
    };
    let n: i64 = t[..t.len() - 1].parse().map_err(|_| bad())?;
    let ms = n.checked_mul(unit_ms).ok_or_else(bad)?;
    if !(1..=REMINDER_BEFORE_MS_MAX).contains(&ms) {
        return Err(bad());
    }
    Ok(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reminder_durations() {
        assert_eq!(parse_reminder_before("24h"), Ok(86_400_000));
        assert_eq!(parse_reminder_before("90m"), Ok(5_400_000));
        assert_eq!(parse_reminder_before("30d"), Ok(REMINDER_BEFORE_MS_MAX));
        for bad in ["", "24", "h", "0h", "-1h", "31d", "1.5h", "24 h"] {
            assert!(parse_reminder_before(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_message_event_has_a_kind_and_a_link() {
        for event in MESSAGE_EVENTS {
            let kind = Kind::of_event(event).expect("a kind");
            let a = Appointment {
                place: None,
                place_id: 3,
                day: model::Day(0),
                time_slot: 1,
            };
            let t = text(kind, &a, "https://t.example/booking/");
            assert!(t.contains("https://t.example/booking/"), "{t}");
            assert!(t.contains("place 3") && t.contains("1970-01-01"), "{t}");
        }
        assert_eq!(Kind::of_event("SlotsOpened"), None);
        assert_eq!(
            manage_url("https://t.example", "abc", Some("xyz")),
            "https://t.example/booking/manage#id=abc&code=xyz"
        );
    }
}
