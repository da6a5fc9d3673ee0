-- How many comments each snapshot's thread holds (the user's comments of
-- this type on this course; replies have their own type), kept as in SQLite
-- so both stores carry the same snapshot.
ALTER TABLE comments_snapshots ADD COLUMN comment_count INTEGER NOT NULL DEFAULT 0;
UPDATE comments_snapshots s SET comment_count = (
    SELECT count(*) FROM comments c
    WHERE c.course_id = s.course_id AND c.user_id = s.user_id AND c.comment_type = s.comment_type);
