//! Lookups by key: a course, the write version of a course and type (page
//! caches compare it), and the rating aggregates.

use rusqlite::{params, OptionalExtension};

use super::super::model::CommentType;
use super::{Course, RatingOut};
use crate::store::{Store, StoreError};

pub async fn course(store: &Store, id: i64) -> Result<Option<Course>, StoreError> {
    const SQL_LITE: &str = "SELECT id, provider_id, title FROM comments_courses WHERE id = ?1";
    const SQL_PG: &str = "SELECT id, provider_id, title FROM comments_courses WHERE id = $1";
    match store {
        Store::Sqlite(s) => {
            s.read(move |c| {
                Ok(c.prepare_cached(SQL_LITE)?
                    .query_row([id], |r| {
                        Ok(Course {
                            id: r.get(0)?,
                            provider_id: r.get(1)?,
                            title: r.get(2)?,
                        })
                    })
                    .optional()?)
            })
            .await
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            let stmt = client.prepare_cached(SQL_PG).await?;
            Ok(client.query_opt(&stmt, &[&id]).await?.map(|r| Course {
                id: r.get(0),
                provider_id: r.get(1),
                title: r.get(2),
            }))
        }
    }
}

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

/// Rating aggregates; `None` when the course does not exist.
pub async fn rating(
    store: &Store,
    course_id: i64,
    kind: CommentType,
) -> Result<Option<RatingOut>, StoreError> {
    let k = kind.as_str();
    let (exists, row) = match store {
        Store::Sqlite(s) => {
            s.read(move |c| {
                let exists: Option<String> = c
                    .prepare_cached("SELECT title FROM comments_courses WHERE id = ?1")?
                    .query_row([course_id], |r| r.get(0))
                    .optional()?;
                let row = c
                    .prepare_cached(
                        "SELECT count, sum, stars1, stars2, stars3, stars4, stars5 FROM comments_ratings
                         WHERE course_id = ?1 AND comment_type = ?2",
                    )?
                    .query_row(params![course_id, k], |r| {
                        Ok([r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?])
                    })
                    .optional()?;
                Ok((exists, row))
            })
            .await?
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            let row = client
                .query_opt(
                    "SELECT r.count, r.sum, r.stars1, r.stars2, r.stars3, r.stars4, r.stars5, co.title
                     FROM comments_courses co LEFT JOIN comments_ratings r
                       ON r.course_id = co.id AND r.comment_type = $2
                     WHERE co.id = $1",
                    &[&course_id, &k],
                )
                .await?;
            match row {
                None => (None, None),
                Some(r) => {
                    let count: Option<i64> = r.get(0);
                    (
                        Some(r.get::<_, String>(7)),
                        count.map(|_| {
                            [r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5), r.get(6)]
                        }),
                    )
                }
            }
        }
    };
    Ok(exists.map(|title| rating_out(course_id, title, kind, row)))
}
