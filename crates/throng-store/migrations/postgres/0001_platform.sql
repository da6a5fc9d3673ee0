-- Platform tables shared by every service.
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- The event log (outbox). Positions come from event_head under its row lock,
-- taken last in each writing transaction: gapless, in commit order.
CREATE TABLE events (
    position BIGINT PRIMARY KEY,
    stream TEXT NOT NULL,
    event_type TEXT NOT NULL,
    payload BYTEA NOT NULL,
    created_at_ms BIGINT NOT NULL
);
CREATE TABLE event_head (id INT PRIMARY KEY, position BIGINT NOT NULL);
INSERT INTO event_head (id, position) VALUES (1, 0);
CREATE TABLE consumer_positions (consumer TEXT PRIMARY KEY, position BIGINT NOT NULL);
