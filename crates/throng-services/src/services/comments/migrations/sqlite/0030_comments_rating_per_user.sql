-- A course's rating counts each user once, with their last rating (the
-- write-up's LastRating): the aggregates are rebuilt from the snapshots,
-- which hold each user's last rating; writes keep them so from here on.
UPDATE comments_ratings SET
    count = a.n, sum = a.total,
    stars1 = a.s1, stars2 = a.s2, stars3 = a.s3, stars4 = a.s4, stars5 = a.s5,
    version = version + 1
FROM (SELECT course_id, comment_type, count(*) AS n, sum(last_rating) AS total,
             sum(last_rating = 1) AS s1, sum(last_rating = 2) AS s2, sum(last_rating = 3) AS s3,
             sum(last_rating = 4) AS s4, sum(last_rating = 5) AS s5
      FROM comments_snapshots WHERE last_rating BETWEEN 1 AND 5
      GROUP BY course_id, comment_type) AS a
WHERE a.course_id = comments_ratings.course_id AND a.comment_type = comments_ratings.comment_type;
