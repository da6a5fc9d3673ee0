-- One active registration per person: person_key is the keyed blind index
-- (HMAC-SHA256) of the national id, scoped by the rule (per person, or per
-- person and day); NULL for registrations made before it or with the rule
-- off. Cancelling deletes the row, and with it the key.
ALTER TABLE booking_registrations ADD COLUMN person_key BLOB;
CREATE UNIQUE INDEX booking_registrations_person ON booking_registrations (person_key);
