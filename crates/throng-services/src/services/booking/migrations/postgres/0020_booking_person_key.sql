-- One active registration per person: person_key is the keyed blind index
-- (HMAC-SHA256) of the national id, scoped by the rule (per person, or per
-- person and day); NULL for registrations made before it or with the rule
-- off. The unique constraint holds the rule across every node.
ALTER TABLE booking_registrations ADD COLUMN person_key BYTEA;
ALTER TABLE booking_registrations
    ADD CONSTRAINT booking_registrations_person UNIQUE (person_key);
