-- Comments: users comment on courses (rating, title, remarks); the course's
-- provider may reply once to each comment and edit that reply. Tables are
-- prefixed: the service owns its users and courses projections (display
-- names, course providers) so it can be split out later, as the write-up
-- wants ("design for exit"); no foreign keys, for the same reason.
CREATE TABLE comments_users (
    id INTEGER PRIMARY KEY,
    display_name TEXT NOT NULL
);
CREATE TABLE comments_courses (
    id INTEGER PRIMARY KEY,
    provider_id INTEGER NOT NULL,
    title TEXT NOT NULL
);
-- A comment (parent_id NULL, comment_type e.g. 'Course', rating 1..5) or a
-- provider's reply (parent_id = the comment, comment_type e.g.
-- 'CourseReply', rating NULL). Times are ms since the Unix epoch.
CREATE TABLE comments (
    id INTEGER PRIMARY KEY,
    course_id INTEGER NOT NULL,
    user_id INTEGER NOT NULL,
    comment_type TEXT NOT NULL,
    parent_id INTEGER,
    rating INTEGER,
    title TEXT NOT NULL,
    remarks TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    edited_ms INTEGER
);
-- A user's thread on a course, newest first (the listing's inner loop).
CREATE INDEX comments_thread ON comments (course_id, user_id, comment_type, created_ms DESC, id DESC);
-- One reply per comment at most, found by its comment.
CREATE UNIQUE INDEX comments_one_reply ON comments (parent_id) WHERE parent_id IS NOT NULL;
-- First and last comment per user, course and type, maintained on write.
-- Clustered by (course, type, user): "has this user commented" and "this
-- user's latest comment" are one key lookup.
CREATE TABLE comments_snapshots (
    course_id INTEGER NOT NULL,
    comment_type TEXT NOT NULL,
    user_id INTEGER NOT NULL,
    first_comment_id INTEGER NOT NULL,
    last_comment_id INTEGER NOT NULL,
    last_title TEXT NOT NULL,
    last_rating INTEGER NOT NULL,
    last_remarks TEXT NOT NULL,
    last_update_ms INTEGER NOT NULL,
    PRIMARY KEY (course_id, comment_type, user_id)
) WITHOUT ROWID;
-- The listing's order and keyset (lastUpdate, userId), newest first.
CREATE INDEX comments_snapshots_recent
    ON comments_snapshots (course_id, comment_type, last_update_ms DESC, user_id DESC);
-- Rating aggregates per course and type, maintained on write. version is
-- bumped by every write on the course (comment, reply, edit): page caches
-- check it.
CREATE TABLE comments_ratings (
    course_id INTEGER NOT NULL,
    comment_type TEXT NOT NULL,
    count INTEGER NOT NULL,
    sum INTEGER NOT NULL,
    stars1 INTEGER NOT NULL,
    stars2 INTEGER NOT NULL,
    stars3 INTEGER NOT NULL,
    stars4 INTEGER NOT NULL,
    stars5 INTEGER NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (course_id, comment_type)
) WITHOUT ROWID;
