-- Booking: places x days x time slots; a slot is free (registration_id NULL)
-- or holds one registration. Days are days since 1970-01-01.
CREATE TABLE booking_places (
    id BIGINT PRIMARY KEY,
    name TEXT NOT NULL,
    address TEXT NOT NULL,
    first_slot_minute INT NOT NULL,
    slot_minutes INT NOT NULL
);
CREATE TABLE booking_slots (
    place_id BIGINT NOT NULL,
    day INT NOT NULL,
    time_slot INT NOT NULL,
    registration_id TEXT,
    PRIMARY KEY (place_id, day, time_slot)
);
-- person_sealed: AES-256-GCM of the person's data, the id as associated data.
CREATE TABLE booking_registrations (
    id TEXT PRIMARY KEY,
    access_hash BYTEA NOT NULL,
    place_id BIGINT NOT NULL,
    day INT NOT NULL,
    time_slot INT NOT NULL,
    person_sealed BYTEA NOT NULL,
    created_at_ms BIGINT NOT NULL
);
