//! The places CSV: `code,name,address,city,postcode,region,time_zone,
//! slot_minutes,seats,hours,closed` and, after them, any of `services`
//! (space-separated codes), `latitude`, `longitude`, `book_ahead_days`,
//! `notice_minutes`. A file is read whole and checked before anything is
//! written: an error names its line and column.

use super::super::model::Day;
use super::{PlaceChange, PlaceInput, BOOK_AHEAD_DAYS_DEFAULT, PLACE_DAYS_MAX};

/// The columns every file starts with, in this order.
pub const REQUIRED_COLUMNS: [&str; 11] = [
    "code",
    "name",
    "address",
    "city",
    "postcode",
    "region",
    "time_zone",
    "slot_minutes",
    "seats",
    "hours",
    "closed",
];
/// The columns that may follow, in any order.
pub const OPTIONAL_COLUMNS: [&str; 5] = [
    "services",
    "latitude",
    "longitude",
    "book_ahead_days",
    "notice_minutes",
];
/// Places one file may define at most.
pub const IMPORT_PLACES_MAX: usize = 10_000;

/// Why a file was refused: the line (1 is the header) and column, and what
/// is accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportError {
    pub line: u64,
    pub column: Option<String>,
    pub message: String,
}

impl std::fmt::Display for ImportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.column {
            Some(c) => write!(f, "line {}, column {c}: {}", self.line, self.message),
            None => write!(f, "line {}: {}", self.line, self.message),
        }
    }
}

/// A file's places, each with the line it came from.
#[derive(Clone, Debug)]
pub struct Parsed {
    pub changes: Vec<PlaceChange>,
    pub lines: Vec<u64>,
}

fn error(line: u64, column: Option<&str>, message: impl Into<String>) -> ImportError {
    ImportError {
        line,
        column: column.map(str::to_string),
        message: message.into(),
    }
}

/// Reads and checks a whole file.
pub fn parse(bytes: &[u8]) -> Result<Parsed, ImportError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .trim(csv::Trim::All)
        .flexible(false)
        .from_reader(bytes);
    let header = reader
        .headers()
        .map_err(|e| error(1, None, format!("not a CSV file: {e}")))?
        .clone();
    let names: Vec<String> = header
        .iter()
        .map(|h| h.trim().to_ascii_lowercase())
        .collect();
    if names.len() < REQUIRED_COLUMNS.len()
        || names[..REQUIRED_COLUMNS.len()] != REQUIRED_COLUMNS.map(String::from)
    {
        return Err(error(
            1,
            None,
            format!(
                "the header must start with exactly {}",
                REQUIRED_COLUMNS.join(",")
            ),
        ));
    }
    for (i, n) in names.iter().enumerate().skip(REQUIRED_COLUMNS.len()) {
        if !OPTIONAL_COLUMNS.contains(&n.as_str()) {
            return Err(error(
                1,
                Some(n),
                format!(
                    "an unknown column; after the first eleven only {} may follow",
                    OPTIONAL_COLUMNS.join(", ")
                ),
            ));
        }
        if names[..i].contains(n) {
            return Err(error(1, Some(n), "the column is given twice"));
        }
    }
    let col = |name: &str| names.iter().position(|n| n == name);
    let mut parsed = Parsed {
        changes: Vec::new(),
        lines: Vec::new(),
    };
    let mut codes: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    // The line a record starts on: the reader's own count leaves blank
    // lines out, and its byte position is where blank lines before the
    // record start.
    let line_at = |byte: u64| {
        let mut end = usize::try_from(byte)
            .unwrap_or(bytes.len())
            .min(bytes.len());
        while end < bytes.len() && matches!(bytes[end], b'\n' | b'\r') {
            end += 1;
        }
        1 + bytes[..end].iter().filter(|&&b| b == b'\n').count() as u64
    };
    for record in reader.records() {
        let record = record.map_err(|e| {
            let line = e.position().map_or(0, |p| line_at(p.byte()));
            error(line, None, format!("not a CSV row: {e}"))
        })?;
        let line = record.position().map_or(0, |p| line_at(p.byte()));
        if record.iter().all(str::is_empty) {
            continue;
        }
        if parsed.changes.len() == IMPORT_PLACES_MAX {
            return Err(error(
                line,
                None,
                format!("a file defines at most {IMPORT_PLACES_MAX} places"),
            ));
        }
        let get = |name: &str| col(name).and_then(|i| record.get(i)).unwrap_or("");
        let int = |name: &'static str, default: Option<i64>| -> Result<i64, ImportError> {
            let v = get(name);
            match (v.is_empty(), default) {
                (true, Some(d)) => Ok(d),
                _ => v
                    .parse::<i64>()
                    .map_err(|_| error(line, Some(name), format!("'{v}' is not a whole number"))),
            }
        };
        let real = |name: &'static str| -> Result<Option<f64>, ImportError> {
            let v = get(name);
            if v.is_empty() {
                return Ok(None);
            }
            v.parse::<f64>()
                .map(Some)
                .map_err(|_| error(line, Some(name), format!("'{v}' is not a number")))
        };
        let input = PlaceInput {
            code: get("code").to_string(),
            name: get("name").to_string(),
            address: get("address").to_string(),
            city: get("city").to_string(),
            postcode: get("postcode").to_string(),
            region: get("region").to_string(),
            time_zone: get("time_zone").to_string(),
            latitude: real("latitude")?,
            longitude: real("longitude")?,
            services: get("services")
                .split_whitespace()
                .map(str::to_string)
                .collect(),
            slot_minutes: int("slot_minutes", None)?,
            seats: int("seats", None)?,
            hours: get("hours").to_string(),
            book_ahead_days: int("book_ahead_days", Some(BOOK_AHEAD_DAYS_DEFAULT.into()))?,
            notice_minutes: int("notice_minutes", Some(0))?,
        };
        let def = input
            .validate()
            .map_err(|e| error(line, Some(e.csv), e.message))?;
        let closed: Vec<Day> =
            super::hours::parse_days(get("closed")).map_err(|e| error(line, Some("closed"), e))?;
        if closed.len() > PLACE_DAYS_MAX {
            return Err(error(
                line,
                Some("closed"),
                format!("at most {PLACE_DAYS_MAX} closed days"),
            ));
        }
        if let Some(first) = codes.insert(def.code.clone(), line) {
            return Err(error(
                line,
                Some("code"),
                format!("{} is defined on line {first} already", def.code),
            ));
        }
        parsed.changes.push(PlaceChange::Define {
            id: None,
            def: Box::new(def),
            closed: Some(closed),
        });
        parsed.lines.push(line);
    }
    if parsed.changes.is_empty() {
        return Err(error(2, None, "the file defines no place"));
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str =
        "code,name,address,city,postcode,region,time_zone,slot_minutes,seats,hours,closed";

    #[test]
    fn a_file_parses_with_optional_columns() {
        let text = format!(
            "{HEADER},services,latitude,longitude\n\
             BA-1,Poliklinika,Hlavná 1,Bratislava,811 01,BA,Europe/Bratislava,15,3,\"Mo-Fr 08:00-12:00,13:00-16:00; Sa 09:00-12:00\",2026-12-24 2026-12-25,vaccine-flu test-pcr,48.14,17.11\n\
             \n\
             KE-1,Nemocnica,Hlavná 2,Košice,040 01,KE,Europe/Bratislava,20,1,Mo-Su 07:00-09:00,,,,\n"
        );
        let parsed = parse(text.as_bytes()).unwrap();
        assert_eq!(parsed.lines, vec![2, 4]);
        let PlaceChange::Define { def, closed, .. } = &parsed.changes[0] else {
            panic!()
        };
        assert_eq!(def.seats, 3);
        assert_eq!(def.services, vec!["vaccine-flu", "test-pcr"]);
        assert_eq!(
            def.hours.to_text(),
            "Mo-Fr 08:00-12:00,13:00-16:00; Sa 09:00-12:00"
        );
        assert_eq!(closed.as_ref().unwrap().len(), 2);
        assert_eq!(def.latitude, Some(48.14));
    }

    #[test]
    fn errors_name_the_line_and_column() {
        let bad_zone = format!(
            "{HEADER}\nA,n,a,c,p,r,Europe/Bratislava,15,1,Mo 08:00-09:00,\nB,n,a,c,p,r,Mars/Base,15,1,Mo 08:00-09:00,\n"
        );
        let e = parse(bad_zone.as_bytes()).unwrap_err();
        assert_eq!((e.line, e.column.as_deref()), (3, Some("time_zone")));
        let bad_hours = format!("{HEADER}\nA,n,a,c,p,r,UTC,15,1,Mo 08:00-09:10,\n");
        let e = parse(bad_hours.as_bytes()).unwrap_err();
        assert_eq!((e.line, e.column.as_deref()), (2, Some("hours")));
        let twice = format!(
            "{HEADER}\nA,n,a,c,p,r,UTC,15,1,Mo 08:00-09:00,\nA,n,a,c,p,r,UTC,15,1,Mo 08:00-09:00,\n"
        );
        assert_eq!(parse(twice.as_bytes()).unwrap_err().line, 3);
        let seats = format!("{HEADER}\nA,n,a,c,p,r,UTC,15,0,Mo 08:00-09:00,\n");
        let e = parse(seats.as_bytes()).unwrap_err();
        assert_eq!(e.column.as_deref(), Some("seats"));
        assert!(parse(b"code,name\nA,b\n").unwrap_err().line == 1);
        let extra = format!("{HEADER},colour\n");
        assert_eq!(
            parse(extra.as_bytes()).unwrap_err().column.as_deref(),
            Some("colour")
        );
        let short = format!("{HEADER}\nA,n,a\n");
        assert_eq!(parse(short.as_bytes()).unwrap_err().line, 2);
    }
}
