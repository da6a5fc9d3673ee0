-- Places as an authority defines them: its code (unique; NULL for places
-- made before), where the place is, its time zone (an IANA name; NULL: the
-- server's --booking-utc-offset), the services it offers (space-separated
-- codes with a space on either side, so one is found by LIKE '% code %'),
-- seats per slot, weekly opening hours (the import's text form), how far
-- ahead slots are made (days; 0: only as seeded) and the minimum notice.
-- search_text is the lower-cased name, city and postcode the search reads.
ALTER TABLE booking_places ADD COLUMN code TEXT;
ALTER TABLE booking_places ADD COLUMN city TEXT NOT NULL DEFAULT '';
ALTER TABLE booking_places ADD COLUMN postcode TEXT NOT NULL DEFAULT '';
ALTER TABLE booking_places ADD COLUMN region TEXT NOT NULL DEFAULT '';
ALTER TABLE booking_places ADD COLUMN time_zone TEXT;
ALTER TABLE booking_places ADD COLUMN latitude DOUBLE PRECISION;
ALTER TABLE booking_places ADD COLUMN longitude DOUBLE PRECISION;
ALTER TABLE booking_places ADD COLUMN services TEXT NOT NULL DEFAULT ' ';
ALTER TABLE booking_places ADD COLUMN seats INT NOT NULL DEFAULT 1;
ALTER TABLE booking_places ADD COLUMN hours TEXT NOT NULL DEFAULT '';
ALTER TABLE booking_places ADD COLUMN book_ahead_days INT NOT NULL DEFAULT 0;
ALTER TABLE booking_places ADD COLUMN notice_minutes INT NOT NULL DEFAULT 0;
ALTER TABLE booking_places ADD COLUMN search_text TEXT NOT NULL DEFAULT '';
UPDATE booking_places SET search_text = LOWER(name);
CREATE UNIQUE INDEX booking_places_code ON booking_places (code);
CREATE INDEX booking_places_region ON booking_places (region, id);
-- A day whose hours differ from the week's: hours '' is a closed day.
CREATE TABLE booking_place_days (
    place_id BIGINT NOT NULL,
    day INT NOT NULL,
    hours TEXT NOT NULL,
    PRIMARY KEY (place_id, day)
);
-- Seats: a slot holds `seats` registrations; `seats_left` is decided by
-- the conditional write `seats_left = seats_left - 1 WHERE seats_left > 0`
-- and given back by a cancel or a move. A slot whose hours went away while
-- it held people keeps their registrations with seats 0 (seats_left is
-- then minus the people it holds): never offered, never booked.
ALTER TABLE booking_slots ADD COLUMN seats INT NOT NULL DEFAULT 1;
ALTER TABLE booking_slots ADD COLUMN seats_left INT NOT NULL DEFAULT 1;
UPDATE booking_slots SET seats_left = 0 WHERE registration_id IS NOT NULL;
ALTER TABLE booking_slots DROP COLUMN registration_id;
