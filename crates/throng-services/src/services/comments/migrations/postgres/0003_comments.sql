-- Comments: users comment on courses (rating, title, remarks); the course's
-- provider may reply once to each comment and edit that reply. Tables are
-- prefixed: the service owns its users and courses projections (display
-- names, course providers) so it can be split out later, as the write-up
-- wants ("design for exit"); no foreign keys, for the same reason.
-- Kept in the SQL subset CockroachDB and YugabyteDB accept.
CREATE TABLE comments_users (
    id BIGINT PRIMARY KEY,
    display_name TEXT NOT NULL
);
CREATE TABLE comments_courses (
    id BIGINT PRIMARY KEY,
    provider_id BIGINT NOT NULL,
    title TEXT NOT NULL
);
CREATE SEQUENCE comments_id_seq;
-- A comment (parent_id NULL, comment_type e.g. 'Course', rating 1..5) or a
-- provider's reply (parent_id = the comment, comment_type e.g.
-- 'CourseReply', rating NULL). Times are ms since the Unix epoch.
CREATE TABLE comments (
    id BIGINT PRIMARY KEY DEFAULT nextval('comments_id_seq'),
    course_id BIGINT NOT NULL,
    user_id BIGINT NOT NULL,
    comment_type TEXT NOT NULL,
    parent_id BIGINT,
    rating INT,
    title TEXT NOT NULL,
    remarks TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    edited_ms BIGINT
);
-- A user's thread on a course, newest first (the listing's inner loop).
-- Covering for the keys and the small columns; remarks (up to 4,000
-- characters) stay in the heap, since B-tree entries are limited to ~2.7 KB.
CREATE INDEX comments_thread ON comments (course_id, user_id, comment_type, created_ms DESC, id DESC)
    INCLUDE (rating);
-- One reply per comment at most, found by its comment.
CREATE UNIQUE INDEX comments_one_reply ON comments (parent_id) WHERE parent_id IS NOT NULL;
-- First and last comment per user, course and type, maintained on write.
CREATE TABLE comments_snapshots (
    course_id BIGINT NOT NULL,
    comment_type TEXT NOT NULL,
    user_id BIGINT NOT NULL,
    first_comment_id BIGINT NOT NULL,
    last_comment_id BIGINT NOT NULL,
    last_title TEXT NOT NULL,
    last_rating INT NOT NULL,
    last_remarks TEXT NOT NULL,
    last_update_ms BIGINT NOT NULL,
    PRIMARY KEY (course_id, comment_type, user_id)
);
-- The listing's order and keyset (lastUpdate, userId), newest first.
CREATE INDEX comments_snapshots_recent
    ON comments_snapshots (course_id, comment_type, last_update_ms DESC, user_id DESC)
    INCLUDE (last_comment_id, last_rating);
-- Rating aggregates per course and type, maintained on write. version is
-- bumped by every write on the course (comment, reply, edit): page caches on
-- every node check it, so a write is visible to the next read on any node.
CREATE TABLE comments_ratings (
    course_id BIGINT NOT NULL,
    comment_type TEXT NOT NULL,
    count BIGINT NOT NULL,
    sum BIGINT NOT NULL,
    stars1 BIGINT NOT NULL,
    stars2 BIGINT NOT NULL,
    stars3 BIGINT NOT NULL,
    stars4 BIGINT NOT NULL,
    stars5 BIGINT NOT NULL,
    version BIGINT NOT NULL,
    PRIMARY KEY (course_id, comment_type)
);
