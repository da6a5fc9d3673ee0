-- Comments for the sites that embed them: the host registers providers,
-- courses and enrolments; moderators hide, restore and remove reviews and
-- replies, ban users and work a queue of reported and held items; readers
-- report reviews and vote them helpful. As in SQLite (see its 0051).
ALTER TABLE comments ADD COLUMN status INTEGER NOT NULL DEFAULT 0;
ALTER TABLE comments ADD COLUMN moderation_note TEXT;
ALTER TABLE comments ADD COLUMN helpful INTEGER NOT NULL DEFAULT 0;
ALTER TABLE comments ADD COLUMN reports_open INTEGER NOT NULL DEFAULT 0;
CREATE INDEX comments_queue ON comments (id) WHERE status = 1 OR reports_open > 0;
ALTER TABLE comments_snapshots ADD COLUMN helpful INTEGER NOT NULL DEFAULT 0;
ALTER TABLE comments_users ADD COLUMN banned_ms BIGINT;
ALTER TABLE comments_users ADD COLUMN ban_reason TEXT;
ALTER TABLE comments_courses ADD COLUMN premoderate INTEGER NOT NULL DEFAULT 0;
CREATE TABLE comments_providers (
    id BIGINT PRIMARY KEY,
    premoderate INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE comments_enrolments (
    course_id BIGINT NOT NULL,
    user_id BIGINT NOT NULL,
    PRIMARY KEY (course_id, user_id)
);
CREATE TABLE comments_reports (
    comment_id BIGINT NOT NULL,
    user_id BIGINT NOT NULL,
    reason TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (comment_id, user_id)
);
CREATE TABLE comments_helpful (
    comment_id BIGINT NOT NULL,
    user_id BIGINT NOT NULL,
    PRIMARY KEY (comment_id, user_id)
);
INSERT INTO comments_enrolments (course_id, user_id)
    SELECT DISTINCT course_id, user_id FROM comments_snapshots;
