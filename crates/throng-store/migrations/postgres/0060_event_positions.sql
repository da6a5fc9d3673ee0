-- Event positions come from a sequence instead of the event_head row, whose
-- lock every writing transaction held until commit (serialising every
-- transaction of every node). Positions now commit out of order and may
-- have holes; readers stop at the horizon (store/horizon.rs). CACHE 1 (the
-- default) is required: the horizon reads the sequence's last value, which
-- must be the highest position any session holds.
CREATE SEQUENCE event_position AS BIGINT CACHE 1;
SELECT setval('event_position', GREATEST(position, 1), position > 0) FROM event_head WHERE id = 1;
DROP TABLE event_head;
