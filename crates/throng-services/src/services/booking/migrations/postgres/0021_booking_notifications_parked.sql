-- Confirmations the notifier gave up on (a gateway that rejected them, or
-- kept failing them past --notify-attempts-max): kept, so they are seen and
-- can be sent by hand, instead of stalling every later confirmation.
CREATE TABLE booking_notifications_parked (
    position BIGINT PRIMARY KEY,
    registration_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    parked_at_ms BIGINT NOT NULL
);
