-- Booking: places x days x time slots; a slot is free (registration_id NULL)
-- or holds one registration. Days are days since 1970-01-01.
CREATE TABLE booking_places (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    address TEXT NOT NULL,
    first_slot_minute INTEGER NOT NULL,
    slot_minutes INTEGER NOT NULL
);
CREATE TABLE booking_slots (
    place_id INTEGER NOT NULL,
    day INTEGER NOT NULL,
    time_slot INTEGER NOT NULL,
    registration_id TEXT,
    PRIMARY KEY (place_id, day, time_slot)
) WITHOUT ROWID;
-- person_sealed: AES-256-GCM of the person's data, the id as associated data.
CREATE TABLE booking_registrations (
    id TEXT PRIMARY KEY,
    access_hash BLOB NOT NULL,
    place_id INTEGER NOT NULL,
    day INTEGER NOT NULL,
    time_slot INTEGER NOT NULL,
    person_sealed BLOB NOT NULL,
    created_at_ms INTEGER NOT NULL
) WITHOUT ROWID;
