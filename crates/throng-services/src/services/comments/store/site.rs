//! What the host site registers (providers, courses, enrolments, one by
//! one or imported in bulk, all or nothing) and what a signed-in user
//! reads of their own (who they are on a course, their reviews with their
//! status).

use super::super::model::{self, Status};
use super::writes::SIGN_IN;
use super::CommentsStore;
use crate::store::{Columns, Sql, StoreError};

/// A provider: its name (in `comments_users`, which replies show) and its
/// pre-moderation.
static PROVIDER_NAME: Sql = Sql::new(
    "INSERT INTO comments_users (id, display_name) VALUES (?1, ?2)
     ON CONFLICT (id) DO UPDATE SET display_name = excluded.display_name",
);
static PROVIDER: Sql = Sql::new(
    "INSERT INTO comments_providers (id, premoderate) VALUES (?1, ?2)
     ON CONFLICT (id) DO UPDATE SET premoderate = excluded.premoderate",
);
static COURSE: Sql = Sql::new(
    "INSERT INTO comments_courses (id, provider_id, title, premoderate) VALUES (?1, ?2, ?3, ?4)
     ON CONFLICT (id) DO UPDATE SET provider_id = excluded.provider_id, title = excluded.title,
        premoderate = excluded.premoderate",
);
static ENROL: Sql = Sql::new(
    "INSERT INTO comments_enrolments (course_id, user_id) VALUES (?1, ?2)
     ON CONFLICT (course_id, user_id) DO NOTHING",
);
static UNENROL: Sql =
    Sql::new("DELETE FROM comments_enrolments WHERE course_id = ?1 AND user_id = ?2");
static COURSE_EXISTS: Sql = Sql::new("SELECT 1 FROM comments_courses WHERE id = ?1");

/// Who the caller is on a course (`?2` the course, 0 for none).
static WHO: Sql = Sql::new(
    "SELECT u.display_name, u.banned_ms,
        (SELECT 1 FROM comments_enrolments e WHERE e.course_id = ?2 AND e.user_id = ?1)
     FROM comments_users u WHERE u.id = ?1",
);

/// A user's own reviews on a course, whatever their status.
static MINE: Sql = Sql::new(
    "SELECT id, comment_type, rating, title, remarks, created_ms, edited_ms, status, helpful
     FROM comments WHERE course_id = ?1 AND user_id = ?2 AND parent_id IS NULL
     ORDER BY created_ms DESC, id DESC LIMIT ?3",
);

/// A user as their sign-in finds them.
#[derive(Clone, Debug)]
pub struct SignedIn {
    /// `None`: unknown (no name to create them with).
    pub display_name: Option<String>,
    pub banned: bool,
    pub enrolled: bool,
}

/// One of a user's own reviews.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MineItem {
    pub comment_id: i64,
    /// Course or Service.
    pub comment_type: String,
    pub rating: i32,
    pub title: String,
    pub remarks: String,
    /// RFC 3339.
    pub created_date: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_date: Option<String>,
    /// visible, held (waiting for a moderator) or hidden.
    pub status: String,
    pub helpful: i64,
}

/// Rows of an import, checked.
#[derive(Clone, Debug)]
pub enum ImportRows {
    /// (id, name, premoderate)
    Providers(Vec<(i64, String, bool)>),
    /// (id, provider id, title, premoderate)
    Courses(Vec<(i64, i64, String, bool)>),
    /// (course id, user id)
    Enrolments(Vec<(i64, i64)>),
}

impl CommentsStore {
    /// A user's sign-in: created with `name` when unknown (a known user
    /// keeps their name); their state on `course_id` (0: none).
    pub async fn sign_in(
        &self,
        user_id: i64,
        name: Option<String>,
        course_id: i64,
    ) -> Result<SignedIn, StoreError> {
        match name {
            Some(name) => {
                self.store
                    .write(move |tx| {
                        let name = name.clone();
                        Box::pin(async move {
                            tx.execute(&SIGN_IN, &[&user_id, &name]).await?;
                            tx.query_one(&WHO, &[&user_id, &course_id], |r| {
                                Ok(SignedIn {
                                    display_name: Some(r.text(0)?),
                                    banned: r.opt_int(1)?.is_some(),
                                    enrolled: r.opt_int(2)?.is_some(),
                                })
                            })
                            .await
                        })
                    })
                    .await
            }
            None => {
                let found = self
                    .store
                    .read(move |c| {
                        Box::pin(async move {
                            c.query_opt(&WHO, &[&user_id, &course_id], |r| {
                                Ok(SignedIn {
                                    display_name: Some(r.text(0)?),
                                    banned: r.opt_int(1)?.is_some(),
                                    enrolled: r.opt_int(2)?.is_some(),
                                })
                            })
                            .await
                        })
                    })
                    .await?;
                Ok(found.unwrap_or(SignedIn {
                    display_name: None,
                    banned: false,
                    enrolled: false,
                }))
            }
        }
    }

    /// A user's own reviews on a course, newest first, at most `limit`.
    pub async fn mine(
        &self,
        course_id: i64,
        user_id: i64,
        limit: i64,
    ) -> Result<Vec<MineItem>, StoreError> {
        self.store
            .read(move |c| {
                Box::pin(async move {
                    c.query(&MINE, &[&course_id, &user_id, &limit], |r| {
                        Ok(MineItem {
                            comment_id: r.int(0)?,
                            comment_type: r.text(1)?,
                            rating: r.col(2)?,
                            title: r.text(3)?,
                            remarks: r.text(4)?,
                            created_date: model::timestamp(r.int(5)?),
                            edited_date: r.opt_int(6)?.map(model::timestamp),
                            status: Status::of_code(r.int(7)?).as_str().to_string(),
                            helpful: r.int(8)?,
                        })
                    })
                    .await
                })
            })
            .await
    }

    /// Registers or updates a provider.
    pub async fn put_provider(
        &self,
        id: i64,
        name: String,
        premoderate: bool,
    ) -> Result<(), StoreError> {
        self.import(ImportRows::Providers(vec![(id, name, premoderate)]))
            .await
            .map(|_| ())
    }

    /// Registers or updates a course.
    pub async fn put_course(
        &self,
        id: i64,
        provider_id: i64,
        title: String,
        premoderate: bool,
    ) -> Result<(), StoreError> {
        self.import(ImportRows::Courses(vec![(
            id,
            provider_id,
            title,
            premoderate,
        )]))
        .await
        .map(|_| ())
    }

    /// Enrols a user on a course (`false`: no such course).
    pub async fn enrol(&self, course_id: i64, user_id: i64, on: bool) -> Result<bool, StoreError> {
        self.store
            .write(move |tx| {
                Box::pin(async move {
                    if tx
                        .query_opt(&COURSE_EXISTS, &[&course_id], |_| Ok(()))
                        .await?
                        .is_none()
                    {
                        return Ok(false);
                    }
                    let sql = if on { &ENROL } else { &UNENROL };
                    tx.execute(sql, &[&course_id, &user_id]).await?;
                    Ok(true)
                })
            })
            .await
    }

    /// Writes an import's rows in one transaction: all or none. An
    /// enrolment on a course that does not exist writes nothing and
    /// answers that row's index.
    pub async fn import(&self, rows: ImportRows) -> Result<Result<u64, usize>, StoreError> {
        self.store
            .write(move |tx| {
                let rows = rows.clone();
                Box::pin(async move {
                    let mut n = 0u64;
                    match &rows {
                        ImportRows::Providers(list) => {
                            for (id, name, pre) in list {
                                let pre = *pre as i64;
                                tx.execute(&PROVIDER_NAME, &[id, name]).await?;
                                tx.execute(&PROVIDER, &[id, &pre]).await?;
                                n += 1;
                            }
                        }
                        ImportRows::Courses(list) => {
                            for (id, provider, title, pre) in list {
                                let pre = *pre as i64;
                                tx.execute(&COURSE, &[id, provider, title, &pre]).await?;
                                n += 1;
                            }
                        }
                        ImportRows::Enrolments(list) => {
                            // Every course checked before anything is written.
                            let mut known = std::collections::HashSet::new();
                            for (i, (course, _)) in list.iter().enumerate() {
                                if known.contains(course) {
                                    continue;
                                }
                                if tx
                                    .query_opt(&COURSE_EXISTS, &[course], |_| Ok(()))
                                    .await?
                                    .is_none()
                                {
                                    return Ok(Err(i));
                                }
                                known.insert(*course);
                            }
                            for (course, user) in list {
                                tx.execute(&ENROL, &[course, user]).await?;
                                n += 1;
                            }
                        }
                    }
                    Ok(Ok(n))
                })
            })
            .await
    }
}
