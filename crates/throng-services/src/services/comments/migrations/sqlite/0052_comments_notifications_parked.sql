-- Notifications the webhook refused (a 4xx, a redirect), or kept failing past
-- --comments-notify-attempts-max: kept, so the host sees them and can send
-- them by hand, instead of holding back every later notification.
CREATE TABLE comments_notifications_parked (
    position INTEGER PRIMARY KEY,
    event_type TEXT NOT NULL,
    comment_id INTEGER NOT NULL,
    reason TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    parked_at_ms INTEGER NOT NULL
);
