-- The back office: a place's day listed from its registrations, attendance,
-- closed days, and what the messages need after a registration is gone.
--
-- A day's list reads the registrations of one place and day, and the
-- reminders those of a range of days: one index by day, then the
-- time-ordered (UUIDv7) id, so a new registration's entry goes to the right
-- edge of its day's range (a page per day a batch books, not a random page
-- per registration as (day, place_id) would cost); the place is kept in the
-- entry to filter a day's entries without reading the rows.
CREATE INDEX booking_registrations_day ON booking_registrations (day, id, place_id);
-- Check-in or no-show of a registration, by whom and when; the last word
-- counts (a mistake is corrected by marking again).
CREATE TABLE booking_attendance (
    registration_id TEXT PRIMARY KEY,
    place_id INTEGER NOT NULL,
    day INTEGER NOT NULL,
    status TEXT NOT NULL,
    by_sub TEXT NOT NULL,
    at_ms INTEGER NOT NULL
) WITHOUT ROWID;
-- A place closed on a day: its slots of that day are deleted and its
-- registrations cancelled in the same transaction.
CREATE TABLE booking_closed_days (
    place_id INTEGER NOT NULL,
    day INTEGER NOT NULL,
    closed_by TEXT NOT NULL,
    closed_at_ms INTEGER NOT NULL,
    registrations INTEGER NOT NULL,
    PRIMARY KEY (place_id, day)
) WITHOUT ROWID;
-- A cancelled registration's sealed contact data (the same seal, the id as
-- associated data), kept only until its message went out (or was parked),
-- at most 30 days (messages.rs, CANCELLED_CONTACT_KEEP_MS).
CREATE TABLE booking_cancelled (
    id TEXT PRIMARY KEY,
    place_id INTEGER NOT NULL,
    day INTEGER NOT NULL,
    time_slot INTEGER NOT NULL,
    person_sealed BLOB NOT NULL,
    cancelled_at_ms INTEGER NOT NULL
) WITHOUT ROWID;
-- An access code still to be sent (a new one, or one a call centre booked
-- with), sealed with the registration id as associated data; deleted once
-- its message went out.
CREATE TABLE booking_codes_pending (
    registration_id TEXT PRIMARY KEY,
    code_sealed BLOB NOT NULL,
    issued_at_ms INTEGER NOT NULL
) WITHOUT ROWID;
-- Reminders appended to the log, per registration and the slot it held
-- then (a registration moved later is reminded of its new time).
CREATE TABLE booking_reminders (
    registration_id TEXT NOT NULL,
    place_id INTEGER NOT NULL,
    day INTEGER NOT NULL,
    time_slot INTEGER NOT NULL,
    at_ms INTEGER NOT NULL,
    PRIMARY KEY (registration_id, place_id, day, time_slot)
) WITHOUT ROWID;
