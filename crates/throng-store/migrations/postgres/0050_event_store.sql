-- The event log becomes the event store: every event has a
-- version in its stream (0, 1, 2, ... in position order), events appended
-- through the API carry their client's id (idempotent re-append) and
-- metadata, and a payload says how it is encoded: 0 = JSON (the services'
-- own events), 1 = MessagePack, a map with field names, whole or wrapped in
-- an LZ4 block (MessagePack ext type 99, see services/events/codec.rs).
ALTER TABLE events ADD COLUMN stream_version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN event_id BYTEA;
ALTER TABLE events ADD COLUMN metadata BYTEA;
ALTER TABLE events ADD COLUMN payload_format SMALLINT NOT NULL DEFAULT 0;
-- Events already in the log get their versions in position order.
UPDATE events SET stream_version = v.n
  FROM (SELECT position AS p,
               ROW_NUMBER() OVER (PARTITION BY stream ORDER BY position) - 1 AS n
          FROM events) AS v
 WHERE events.position = v.p AND v.n <> 0;
-- Reads a stream in either direction and finds its head; one version once
-- (also across nodes: two appends that raced to one version cannot both commit).
CREATE UNIQUE INDEX events_stream_version ON events (stream, stream_version);
CREATE UNIQUE INDEX events_event_id ON events (event_id) WHERE event_id IS NOT NULL;
