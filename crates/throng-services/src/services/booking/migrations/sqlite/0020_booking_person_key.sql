-- One active registration per person: person_key is the keyed blind index
-- (HMAC-SHA256) of the national id, scoped by the rule (per person, or per
-- person and day); NULL for registrations made before it or with the rule
-- off. No index: the single writer decides in memory (the availability
-- index's person set, rebuilt from this column at start), so a registration
-- still only appends. Cancelling deletes the row, and with it the key.
ALTER TABLE booking_registrations ADD COLUMN person_key BLOB;
