//! Opening hours as an authority writes them: weekly hours
//! (`Mo-Fr 08:00-12:00,13:00-16:00; Sa 09:00-12:00`), a day's hours
//! (`08:00-12:00,13:00-16:00`, or empty for closed), and the slots they make.

use std::fmt::Write as _;

/// Intervals a day may have at most.
pub const INTERVALS_PER_DAY_MAX: usize = 12;
/// Characters of a weekly hours text at most.
pub const HOURS_CHARS_MAX: usize = 500;

const DAY_NAMES: [&str; 7] = ["Mo", "Tu", "We", "Th", "Fr", "Sa", "Su"];

/// A day's opening intervals, in minutes from midnight: sorted, each
/// `start < end <= 1440`, none overlapping.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DayHours(pub Vec<(u16, u16)>);

/// Hours for each day of the week, Monday first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WeekHours(pub [DayHours; 7]);

impl DayHours {
    /// Parses `08:00-12:00,13:00-16:00`; an empty text (or `closed`) is a
    /// closed day.
    pub fn parse(text: &str) -> Result<DayHours, String> {
        let t = text.trim();
        if t.is_empty() || t.eq_ignore_ascii_case("closed") {
            return Ok(DayHours::default());
        }
        let mut out = Vec::new();
        for part in t.split(',') {
            let part = part.trim();
            let (a, b) = part
                .split_once('-')
                .ok_or_else(|| format!("'{part}' is not an interval like 08:00-12:00"))?;
            let (start, end) = (minute(a.trim())?, minute(b.trim())?);
            if start >= end {
                return Err(format!("'{part}': the interval must end after it starts"));
            }
            out.push((start, end));
        }
        if out.len() > INTERVALS_PER_DAY_MAX {
            return Err(format!(
                "at most {INTERVALS_PER_DAY_MAX} intervals a day, not {}",
                out.len()
            ));
        }
        out.sort_unstable();
        if let Some(w) = out.windows(2).find(|w| w[0].1 > w[1].0) {
            return Err(format!(
                "{} and {} overlap",
                interval_text(w[0]),
                interval_text(w[1])
            ));
        }
        Ok(DayHours(out))
    }

    pub fn is_closed(&self) -> bool {
        self.0.is_empty()
    }

    /// `08:00-12:00,13:00-16:00`, or an empty text when closed.
    pub fn to_text(&self) -> String {
        let parts: Vec<String> = self.0.iter().map(|&i| interval_text(i)).collect();
        parts.join(",")
    }

    /// Every interval starts and ends on the slot grid (`first_minute` plus
    /// whole slots), so changing the hours never moves a slot's start.
    pub fn check_grid(&self, first_minute: i32, slot_minutes: i32) -> Result<(), String> {
        for &(s, e) in &self.0 {
            for m in [s, e] {
                let m = i32::from(m);
                if m < first_minute || (m - first_minute) % slot_minutes != 0 {
                    return Err(format!(
                        "{} is not on the {slot_minutes}-minute slot grid (slots start at whole multiples of slot_minutes from {})",
                        minute_text(m as u16),
                        minute_text(first_minute as u16)
                    ));
                }
            }
        }
        Ok(())
    }

    /// The time slots these hours open: slot `n` starts at `first_minute +
    /// n * slot_minutes`, and only slots that end by an interval's end are
    /// made.
    pub fn slots(&self, first_minute: i32, slot_minutes: i32) -> impl Iterator<Item = i32> + '_ {
        self.0.iter().flat_map(move |&(s, e)| {
            let (s, e) = (i32::from(s), i32::from(e));
            let first = (s - first_minute + slot_minutes - 1).div_euclid(slot_minutes);
            let first = first.max(0);
            (first..)
                .take_while(move |n| first_minute + (n + 1) * slot_minutes <= e)
                .filter(move |n| first_minute + n * slot_minutes >= s)
        })
    }
}

impl WeekHours {
    /// Parses `Mo-Fr 08:00-12:00,13:00-16:00; Sa 09:00-12:00`: groups
    /// separated by `;`, each days (`Mo`, `Mo-Fr`, `Mo,We,Fr`) and that
    /// day's intervals. Days not named are closed; a day named twice is
    /// refused.
    pub fn parse(text: &str) -> Result<WeekHours, String> {
        if text.chars().count() > HOURS_CHARS_MAX {
            return Err(format!("at most {HOURS_CHARS_MAX} characters"));
        }
        let mut week = WeekHours::default();
        let mut named = [false; 7];
        for group in text.split(';') {
            let group = group.trim();
            if group.is_empty() {
                continue;
            }
            let (days, intervals) = group.split_once(char::is_whitespace).ok_or_else(|| {
                format!("'{group}': expected days and hours, like 'Mo-Fr 08:00-16:00'")
            })?;
            let hours = DayHours::parse(intervals)?;
            for d in day_set(days)? {
                if named[d] {
                    return Err(format!("{} is given twice", DAY_NAMES[d]));
                }
                named[d] = true;
                week.0[d] = hours.clone();
            }
        }
        Ok(week)
    }

    /// The canonical text: days with the same hours that follow each other
    /// as a range (`Mo-Fr 08:00-12:00; Sa 09:00-12:00`); closed days left
    /// out.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let mut d = 0;
        while d < 7 {
            let mut last = d;
            while last + 1 < 7 && self.0[last + 1] == self.0[d] {
                last += 1;
            }
            if !self.0[d].is_closed() {
                if !out.is_empty() {
                    out.push_str("; ");
                }
                out.push_str(DAY_NAMES[d]);
                if last > d {
                    let _ = write!(out, "-{}", DAY_NAMES[last]);
                }
                let _ = write!(out, " {}", self.0[d].to_text());
            }
            d = last + 1;
        }
        out
    }

    /// The hours of a weekday, Monday = 0.
    pub fn day(&self, weekday: usize) -> &DayHours {
        &self.0[weekday % 7]
    }

    pub fn check_grid(&self, first_minute: i32, slot_minutes: i32) -> Result<(), String> {
        for (d, h) in self.0.iter().enumerate() {
            h.check_grid(first_minute, slot_minutes)
                .map_err(|e| format!("{}: {e}", DAY_NAMES[d]))?;
        }
        Ok(())
    }

    /// Every day the same hours.
    pub fn every_day(hours: DayHours) -> WeekHours {
        WeekHours(std::array::from_fn(|_| hours.clone()))
    }
}

fn day_index(name: &str) -> Result<usize, String> {
    DAY_NAMES
        .iter()
        .position(|d| d.eq_ignore_ascii_case(name.trim()))
        .ok_or_else(|| {
            format!(
                "'{}' is not a day; use Mo, Tu, We, Th, Fr, Sa, Su",
                name.trim()
            )
        })
}

/// `Mo`, `Mo-Fr`, `Mo,We,Fr-Su`.
fn day_set(text: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in text.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (day_index(a)?, day_index(b)?);
                if a > b {
                    return Err(format!("'{part}': a day range runs from Monday to Sunday"));
                }
                out.extend(a..=b);
            }
            None => out.push(day_index(part)?),
        }
    }
    Ok(out)
}

/// `HH:MM` (00:00 to 24:00) as minutes.
fn minute(text: &str) -> Result<u16, String> {
    let bad = || format!("'{text}' is not a time like 08:30 (00:00 to 24:00)");
    let (h, m) = text.split_once(':').ok_or_else(bad)?;
    if h.is_empty() || h.len() > 2 || m.len() != 2 {
        return Err(bad());
    }
    let (h, m): (u16, u16) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
    if m > 59 || h > 24 || (h == 24 && m > 0) {
        return Err(bad());
    }
    Ok(h * 60 + m)
}

pub fn minute_text(m: u16) -> String {
    format!("{:02}:{:02}", m / 60, m % 60)
}

fn interval_text((s, e): (u16, u16)) -> String {
    format!("{}-{}", minute_text(s), minute_text(e))
}

/// Closed days as the import writes them: `2026-12-24 2026-12-25`.
pub fn parse_days(text: &str) -> Result<Vec<super::super::model::Day>, String> {
    let mut out = Vec::new();
    for t in text.split([' ', ',', ';']).filter(|t| !t.is_empty()) {
        out.push(super::super::model::Day::parse("closed", t).map_err(|e| e.message)?);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weekly_hours_parse_and_print() {
        let w = WeekHours::parse("Mo-Fr 08:00-12:00,13:00-16:00; Sa 09:00-12:00").unwrap();
        assert_eq!(w.0[0].0, vec![(480, 720), (780, 960)]);
        assert_eq!(w.0[4], w.0[0]);
        assert_eq!(w.0[5].0, vec![(540, 720)]);
        assert!(w.0[6].is_closed());
        assert_eq!(w.to_text(), "Mo-Fr 08:00-12:00,13:00-16:00; Sa 09:00-12:00");
        let w = WeekHours::parse("mo,we 10:00-11:00 ; Su 00:00-24:00").unwrap();
        assert_eq!(
            w.to_text(),
            "Mo 10:00-11:00; We 10:00-11:00; Su 00:00-24:00"
        );
        assert_eq!(WeekHours::parse("").unwrap(), WeekHours::default());
        for bad in [
            "Mo 08:00",
            "Xx 08:00-09:00",
            "Fr-Mo 08:00-09:00",
            "Mo 09:00-08:00",
            "Mo 08:00-10:00,09:00-11:00",
            "Mo 08:00-09:00; Mo-Tu 10:00-11:00",
            "Mo 25:00-26:00",
            "Mo 8:0-9:00",
            "Mo-Fr",
        ] {
            assert!(WeekHours::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn slots_follow_the_grid() {
        let d = DayHours::parse("08:00-09:00,10:00-10:50").unwrap();
        assert_eq!(d.slots(0, 20).collect::<Vec<_>>(), vec![24, 25, 26, 30, 31]);
        assert_eq!(d.slots(480, 20).collect::<Vec<_>>(), vec![0, 1, 2, 6, 7]);
        assert!(d.check_grid(0, 20).is_err(), "10:50 is off the grid");
        assert!(DayHours::parse("08:00-09:00")
            .unwrap()
            .check_grid(0, 20)
            .is_ok());
        assert!(DayHours::parse("07:00-09:00")
            .unwrap()
            .check_grid(480, 20)
            .is_err());
    }

    #[test]
    fn closed_days_parse() {
        let days = parse_days("2026-12-25 2026-12-24  2026-12-24").unwrap();
        assert_eq!(days.len(), 2);
        assert!(days[0] < days[1]);
        assert!(parse_days("2026-13-01").is_err());
        assert!(parse_days("").unwrap().is_empty());
    }
}
