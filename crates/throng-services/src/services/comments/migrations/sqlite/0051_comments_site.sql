-- Comments for the sites that embed them: the host registers providers,
-- courses and enrolments; moderators hide, restore and remove reviews and
-- replies, ban users and work a queue of reported and held items; readers
-- report reviews and vote them helpful.
--
-- A comment's status: 0 visible, 1 held (pre-moderation or the word and
-- link filter; its author sees it, nobody else), 2 hidden by a moderator.
-- Only visible comments are in a user's snapshot, their thread and the
-- course's rating, so the listing reads as before; the thread and reply
-- lookups skip the others.
ALTER TABLE comments ADD COLUMN status INTEGER NOT NULL DEFAULT 0;
-- Why a comment is held or hidden (the filter's finding, the moderator's
-- reason), for the moderation queue.
ALTER TABLE comments ADD COLUMN moderation_note TEXT;
-- Helpful votes (one per reader, comments_helpful) and reports not yet
-- dealt with by a moderator (one per reader, comments_reports).
ALTER TABLE comments ADD COLUMN helpful INTEGER NOT NULL DEFAULT 0;
ALTER TABLE comments ADD COLUMN reports_open INTEGER NOT NULL DEFAULT 0;
-- The moderation queue: held comments and comments with open reports.
CREATE INDEX comments_queue ON comments (id) WHERE status = 1 OR reports_open > 0;
-- A block's helpful votes (its visible comments'), for the "most helpful"
-- order.
ALTER TABLE comments_snapshots ADD COLUMN helpful INTEGER NOT NULL DEFAULT 0;
-- A banned user cannot post, edit, report or vote.
ALTER TABLE comments_users ADD COLUMN banned_ms INTEGER;
ALTER TABLE comments_users ADD COLUMN ban_reason TEXT;
-- Pre-moderation: new reviews of the course held until approved.
ALTER TABLE comments_courses ADD COLUMN premoderate INTEGER NOT NULL DEFAULT 0;
-- Providers as the host registers them (their display name is in
-- comments_users: providers and users share one id space, as tokens' sub).
CREATE TABLE comments_providers (
    id INTEGER PRIMARY KEY,
    premoderate INTEGER NOT NULL DEFAULT 0
);
-- Who may review a course (unless reviews are open to every user).
CREATE TABLE comments_enrolments (
    course_id INTEGER NOT NULL,
    user_id INTEGER NOT NULL,
    PRIMARY KEY (course_id, user_id)
) WITHOUT ROWID;
-- One report per reader and comment.
CREATE TABLE comments_reports (
    comment_id INTEGER NOT NULL,
    user_id INTEGER NOT NULL,
    reason TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    PRIMARY KEY (comment_id, user_id)
) WITHOUT ROWID;
-- One helpful vote per reader and comment.
CREATE TABLE comments_helpful (
    comment_id INTEGER NOT NULL,
    user_id INTEGER NOT NULL,
    PRIMARY KEY (comment_id, user_id)
) WITHOUT ROWID;
-- The users who already reviewed a course may review it again.
INSERT INTO comments_enrolments (course_id, user_id)
    SELECT DISTINCT course_id, user_id FROM comments_snapshots;
