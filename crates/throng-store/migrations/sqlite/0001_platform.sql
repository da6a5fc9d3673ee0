-- Platform tables shared by every service.
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- The event log (outbox). position is the rowid: gapless, in commit order.
CREATE TABLE events (
    position INTEGER PRIMARY KEY,
    stream TEXT NOT NULL,
    event_type TEXT NOT NULL,
    payload BLOB NOT NULL,
    created_at_ms INTEGER NOT NULL
);
CREATE TABLE consumer_positions (consumer TEXT PRIMARY KEY, position INTEGER NOT NULL);
