-- The listing reads a course's user blocks newest first. Cluster the
-- snapshots in that order (the table is the listing's own order, so a page
-- is one range read instead of an index range plus one row lookup per
-- block), and keep the author's display name on the snapshot (one lookup in
-- comments_users less per block). Display names are written once, with the
-- user; a path that renames users must update comments_snapshots too.
CREATE TABLE comments_snapshots_by_recent (
    course_id INTEGER NOT NULL,
    comment_type TEXT NOT NULL,
    last_update_ms INTEGER NOT NULL,
    user_id INTEGER NOT NULL,
    display_name TEXT NOT NULL,
    first_comment_id INTEGER NOT NULL,
    last_comment_id INTEGER NOT NULL,
    last_title TEXT NOT NULL,
    last_rating INTEGER NOT NULL,
    last_remarks TEXT NOT NULL,
    PRIMARY KEY (course_id, comment_type, last_update_ms, user_id)
) WITHOUT ROWID;
INSERT INTO comments_snapshots_by_recent
    SELECT s.course_id, s.comment_type, s.last_update_ms, s.user_id, COALESCE(u.display_name, ''),
           s.first_comment_id, s.last_comment_id, s.last_title, s.last_rating, s.last_remarks
    FROM comments_snapshots s LEFT JOIN comments_users u ON u.id = s.user_id
    ORDER BY s.course_id, s.comment_type, s.last_update_ms, s.user_id;
DROP TABLE comments_snapshots;
ALTER TABLE comments_snapshots_by_recent RENAME TO comments_snapshots;
-- "Has this user commented" and the write path's upsert: one key lookup.
CREATE UNIQUE INDEX comments_snapshots_user ON comments_snapshots (course_id, comment_type, user_id);
