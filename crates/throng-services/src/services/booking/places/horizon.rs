//! A place's booking horizon: which slots its hours make on each day from
//! today for `book_ahead_days` days. Making them never deletes a
//! registration: a slot that would go while it holds people is withdrawn
//! (kept with seats 0, never offered) and each of its registrations gets a
//! `SlotWithdrawn` event (`store/place_defs.rs` writes it).

use super::super::model::{local_epoch_ms, BookingClock, Day, Place};
use super::hours::{DayHours, WeekHours};

/// What making a place's days did.
#[derive(Clone, Debug, Default)]
pub struct Made {
    pub added: i64,
    pub removed: i64,
    pub changed: i64,
    /// Registrations on slots whose seats went below the people they hold.
    pub over_seats: i64,
    /// Registrations on withdrawn slots.
    pub withdrawn_registrations: Vec<String>,
}

/// Monday = 0 (1970-01-01 was a Thursday).
pub fn weekday(day: Day) -> usize {
    (day.0 + 3).rem_euclid(7) as usize
}

/// The days a place's slots are made for: from today at the place, for
/// `book_ahead_days` days (none for a place whose slots only a seed makes).
pub fn horizon(place: &Place, clock: BookingClock, now_ms: i64) -> (Day, i32) {
    let today = place.policy().clock(clock, now_ms).now.today;
    (today, place.book_ahead_days.max(0))
}

/// The time slots `hours` open on `day` at `place`: on its slot grid,
/// skipping starts that do not exist at the place (clocks going forward).
pub fn slots_of_day(place: &Place, hours: &DayHours, day: Day) -> Vec<i32> {
    hours
        .slots(place.first_slot_minute, place.slot_minutes)
        .filter(|&n| match place.tz {
            Some(tz) => {
                local_epoch_ms(tz, day, place.first_slot_minute + n * place.slot_minutes).is_some()
            }
            None => true,
        })
        .collect()
}

/// The hours of `day`: its own where it has some, else the week's.
pub fn hours_of_day<'a>(week: &'a WeekHours, own: &'a [(Day, DayHours)], day: Day) -> &'a DayHours {
    match own.binary_search_by_key(&day, |(d, _)| *d) {
        Ok(i) => &own[i].1,
        Err(_) => week.day(weekday(day)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(tz: Option<&str>) -> Place {
        Place {
            id: 1,
            time_zone: tz.map(str::to_string),
            slot_minutes: 30,
            seats: 1,
            book_ahead_days: 10,
            tz: tz.map(|t| t.parse().unwrap()),
            ..Place::default()
        }
    }

    #[test]
    fn weekdays_and_own_days() {
        let monday = Day::parse("d", "2026-11-23").unwrap();
        assert_eq!(weekday(monday), 0);
        assert_eq!(weekday(monday.plus(6)), 6);
        let week = WeekHours::parse("Mo-Fr 08:00-09:00").unwrap();
        let own = vec![(monday.plus(1), DayHours::default())];
        assert_eq!(hours_of_day(&week, &own, monday).0, vec![(480, 540)]);
        assert!(hours_of_day(&week, &own, monday.plus(1)).is_closed());
        assert!(hours_of_day(&week, &own, monday.plus(5)).is_closed());
    }

    #[test]
    fn a_gap_in_local_time_makes_no_slot() {
        // Clocks in Bratislava went from 02:00 to 03:00 on 2026-03-29.
        let p = place(Some("Europe/Bratislava"));
        let hours = DayHours::parse("01:00-04:00").unwrap();
        let day = Day::parse("d", "2026-03-29").unwrap();
        assert_eq!(slots_of_day(&p, &hours, day), vec![2, 3, 6, 7]);
        assert_eq!(
            slots_of_day(&p, &hours, day.plus(1)),
            vec![2, 3, 4, 5, 6, 7]
        );
        let utc = place(None);
        assert_eq!(slots_of_day(&utc, &hours, day).len(), 6);
    }

    #[test]
    fn the_horizon_starts_today_at_the_place() {
        let mut p = place(Some("Pacific/Auckland"));
        // 2026-11-26T12:00Z is already the 27th in Auckland (+13:00).
        let ms = 1_795_694_400_000;
        let (from, days) = horizon(&p, BookingClock::UTC, ms);
        assert_eq!(from.to_text(), "2026-11-27");
        assert_eq!(days, 10);
        p.tz = None;
        assert_eq!(horizon(&p, BookingClock::UTC, ms).0.to_text(), "2026-11-26");
    }
}
