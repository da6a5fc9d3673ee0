//! Courses and their ratings, and what the seed reads back: reads only.

use super::super::model::CommentType;
use super::{CommentsStore, Course, RatingOut};
use crate::store::{Columns, Sql, StoreError};

static COURSE: Sql = Sql::new("SELECT id, provider_id, title FROM comments_courses WHERE id = ?1");
static COURSE_COUNT: Sql = Sql::new("SELECT COUNT(*) FROM comments_courses");

/// The rating in one read: the course's title and its aggregates row (the
/// aggregates NULL when it has none).
static RATING: Sql = Sql::new(
    "SELECT r.count, r.sum, r.stars1, r.stars2, r.stars3, r.stars4, r.stars5, co.title
     FROM comments_courses co LEFT JOIN comments_ratings r
       ON r.course_id = co.id AND r.comment_type = ?2
     WHERE co.id = ?1",
);

/// The users with a `Course` snapshot on course ?1, for the Artillery
/// payload.
static SNAPSHOT_USERS: Sql = Sql::new(
    "SELECT user_id FROM comments_snapshots WHERE course_id = ?1 AND comment_type = 'Course'
     ORDER BY user_id",
);

impl CommentsStore {
    /// A course by id.
    pub async fn course(&self, id: i64) -> Result<Option<Course>, StoreError> {
        self.store
            .read(move |c| {
                Box::pin(async move { c.query_opt(&COURSE, &[&id], |r| course_row(r)).await })
            })
            .await
    }

    /// The rating aggregates of a course and type; `None` when the course
    /// does not exist.
    pub async fn rating(
        &self,
        course_id: i64,
        kind: CommentType,
    ) -> Result<Option<RatingOut>, StoreError> {
        let row = self
            .store
            .read(move |c| {
                Box::pin(async move {
                    let k = kind.as_str();
                    c.query_opt(&RATING, &[&course_id, &k], |r| {
                        let aggregates = match r.opt_int(0)? {
                            Some(_) => Some(ratings_row(r)?),
                            None => None,
                        };
                        Ok((aggregates, r.text(7)?))
                    })
                    .await
                })
            })
            .await?;
        Ok(row.map(|(aggregates, title)| rating_out(course_id, title, kind, aggregates)))
    }

    /// The courses stored (seeding looks for existing data).
    pub async fn course_count(&self) -> Result<i64, StoreError> {
        self.store
            .read(|c| Box::pin(async move { c.query_one(&COURSE_COUNT, &[], |r| r.int(0)).await }))
            .await
    }

    /// For each (course, hash) of `picks`, one of the users with a `Course`
    /// snapshot on the course ([`pick_user`]); `None` when there is none.
    pub async fn snapshot_users(
        &self,
        picks: Vec<(i64, u64)>,
    ) -> Result<Vec<Option<i64>>, StoreError> {
        self.store
            .read(move |c| {
                Box::pin(async move {
                    let mut out = Vec::with_capacity(picks.len());
                    for (course, h) in &picks {
                        let users = c.query(&SNAPSHOT_USERS, &[course], |r| r.int(0)).await?;
                        out.push(pick_user(&users, *h));
                    }
                    Ok(out)
                })
            })
            .await
    }
}

/// A row of [`COURSE`].
fn course_row(r: &impl Columns) -> Result<Course, StoreError> {
    Ok(Course {
        id: r.col(0)?,
        provider_id: r.col(1)?,
        title: r.col(2)?,
    })
}

/// The aggregates' columns (count, sum, stars1 to stars5), first in a row.
fn ratings_row(r: &impl Columns) -> Result<[i64; 7], StoreError> {
    Ok([
        r.col(0)?,
        r.col(1)?,
        r.col(2)?,
        r.col(3)?,
        r.col(4)?,
        r.col(5)?,
        r.col(6)?,
    ])
}

/// The rating answer of a course (`title`) from its aggregates row, if any.
fn rating_out(
    course_id: i64,
    title: String,
    kind: CommentType,
    row: Option<[i64; 7]>,
) -> RatingOut {
    let r = row.unwrap_or([0; 7]);
    let average = if r[0] > 0 {
        (r[1] as f64 / r[0] as f64 * 100.0).round() / 100.0
    } else {
        0.0
    };
    RatingOut {
        course_id,
        course_title: title,
        rating_type: kind.as_str().to_string(),
        count: r[0],
        average,
        stars: [r[2], r[3], r[4], r[5], r[6]],
    }
}

/// The user a payload row names among a course's snapshot `users` (in user
/// id order), by its `hash`.
fn pick_user(users: &[i64], hash: u64) -> Option<i64> {
    (!users.is_empty()).then(|| users[(hash % users.len() as u64) as usize])
}
