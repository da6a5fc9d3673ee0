-- A course's rating counts each user once, with their last rating (the
-- write-up's LastRating): the aggregates are rebuilt from the snapshots,
-- which hold each user's last rating; writes keep them so from here on.
UPDATE comments_ratings r SET
    count = a.n, sum = a.total,
    stars1 = a.s1, stars2 = a.s2, stars3 = a.s3, stars4 = a.s4, stars5 = a.s5,
    version = r.version + 1
FROM (SELECT course_id, comment_type, count(*) AS n, sum(last_rating) AS total,
             count(*) FILTER (WHERE last_rating = 1) AS s1, count(*) FILTER (WHERE last_rating = 2) AS s2,
             count(*) FILTER (WHERE last_rating = 3) AS s3, count(*) FILTER (WHERE last_rating = 4) AS s4,
             count(*) FILTER (WHERE last_rating = 5) AS s5
      FROM comments_snapshots WHERE last_rating BETWEEN 1 AND 5
      GROUP BY course_id, comment_type) AS a
WHERE a.course_id = r.course_id AND a.comment_type = r.comment_type;
