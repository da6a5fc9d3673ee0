-- The author's display name kept on the snapshot (one lookup in
-- comments_users less per listed block; the same listing SQL shape as
-- SQLite's, which also clusters its snapshots in listing order). Display
-- names are written once, with the user; a path that renames users must
-- update comments_snapshots too.
ALTER TABLE comments_snapshots ADD COLUMN display_name TEXT NOT NULL DEFAULT '';
UPDATE comments_snapshots s SET display_name = u.display_name
    FROM comments_users u WHERE u.id = s.user_id;
