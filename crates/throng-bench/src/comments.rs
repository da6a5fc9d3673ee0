//! `throng bench comments` and `throng bench comments-nocache`: the
//! write-up's load (GET jsonfromdapper with its test data's distribution:
//! skip 0-3, size 2-10, skipThread mostly 0, sizeThread 2-10, over 5,000
//! random snapshots of ~2,000,000 comments), plus posting comments, against
//! the server's cheapest endpoint.
//!
//! `comments` runs the server as deployed (page cache on): the GET mix
//! repeats its 5,000 rows, as the write-up's payload does, so most answers
//! come from the cache. `comments-nocache` runs it with `--comments-cache
//! off`: every GET builds its JSON in the database, the write-up's path.
//!
//! Tokens: posting needs user tokens signed with the child server's secret,
//! so the experiment fixes `THRONG_TOKEN_SECRET` (a random one per run, in
//! this process's environment, which the child servers inherit) before the
//! harness starts them, and signs its tokens with it.

use std::sync::Arc;

use bytes::Bytes;
use throng_load::measure::RequestSpec;

use crate::experiment::{mix64, pick, Experiment, Scale, Workload};
use crate::platform::auth::TokenKeys;
use crate::token_secret::token_secret;

pub struct CommentsBench {
    /// Page cache on (as deployed) or off (every read through the database).
    pub cache: bool,
}

/// Rows of the write-up's testData.csv (`Select Top 5000 ...`).
const TEST_ROWS: u64 = 5000;
/// The popular courses whose first pages a crowd reads.
const HOT_COURSES: i64 = 100;
/// Reviews per thousand the seed hides, and as many reported.
const MODERATED_PER_MILLE: i64 = 10;
/// Distinct user tokens the POST workload cycles through.
const TOKENS: usize = 1000;

fn size(scale: Scale) -> (i64, i64, i64) {
    match scale {
        Scale::Full => (1_000_000, 40_000, 50),
        Scale::Quick => (20_000, 500, 20),
    }
}

/// One request of the write-up's GET mix: row `seq % 5000` of its test data.
pub fn get_mix(courses: i64) -> impl Fn(u64) -> RequestSpec + Send + Sync {
    move |seq| {
        let row = mix64(seq, 11) % TEST_ROWS;
        let skip_thread = if pick(row, 15, 0, 9) < 8 {
            0
        } else {
            pick(row, 16, 0, 1)
        };
        RequestSpec::get(format!(
            "/api/comments/method/jsonfromdapper?ratingType=Course&courseId={}&skip={}&size={}&skipThread={}&sizeThread={}",
            pick(row, 12, 1, courses),
            pick(row, 13, 0, 3),
            pick(row, 14, 2, 10),
            skip_thread,
            pick(row, 17, 2, 10),
        ))
    }
}

impl Experiment for CommentsBench {
    fn name(&self) -> &'static str {
        if self.cache {
            "comments"
        } else {
            "comments-nocache"
        }
    }
    fn about(&self) -> &'static str {
        if self.cache {
            "course reviews: the write-up's GET mix (page cache on) and posting comments, 2,000,000 comments, vs GET /health"
        } else {
            "course reviews: the write-up's GET mix with the page cache off (JSON built by the database), vs GET /health"
        }
    }
    fn seed_args(&self, scale: Scale) -> Vec<String> {
        let (users, courses, per_course) = size(scale);
        [
            "comments",
            "--users",
            &users.to_string(),
            "--courses",
            &courses.to_string(),
            "--comments-per-course",
            &per_course.to_string(),
            // Moderation in place: 1% of the reviews hidden, 1% reported.
            "--moderated-per-mille",
            &MODERATED_PER_MILLE.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }
    fn serve_args(&self) -> Vec<String> {
        token_secret();
        let cache = if self.cache { "on" } else { "off" };
        // Random users post on random courses: reviews open to all, and no
        // filter (the bench's texts are its own).
        vec![
            "--comments-cache".into(),
            cache.into(),
            "--comments-reviews-open".into(),
        ]
    }
    fn workloads(&self, scale: Scale) -> Vec<Workload> {
        let (users, courses, _) = size(scale);
        let published =
            "300+ calls/min, median 101 ms (Dapper + stored procedure FOR JSON, 5 eDTU Azure SQL)";
        let mut out = vec![Workload {
            name: if self.cache {
                "GET jsonfromdapper, write-up mix (page cache on)".into()
            } else {
                "GET jsonfromdapper, write-up mix (cache off: JSON from the database)".into()
            },
            factory: Arc::new(get_mix(courses)),
            ok_statuses: vec![200],
            target_ratio_min: None,
            published: published.into(),
            comparison: false,
            ..Workload::default()
        }];
        if self.cache {
            out.push(Workload {
                name: "GET first pages of 100 popular courses (page cache on)".into(),
                factory: Arc::new(move |seq: u64| {
                    RequestSpec::get(format!(
                        "/api/comments/method/jsonfromdapper?ratingType=Course&courseId={}&skip=0&size=10&skipThread=0&sizeThread=10",
                        pick(seq, 31, 1, HOT_COURSES.min(courses))
                    ))
                }),
                ok_statuses: vec![200],
                target_ratio_min: None,
                published: "-".into(),
                comparison: false,
                ..Workload::default()
            });
            let keys = TokenKeys::new(token_secret());
            let pop = crate::services::comments::seed::Population::of(users);
            let tokens: Arc<Vec<String>> = Arc::new(
                (0..TOKENS as u64)
                    .map(|i| {
                        let user = pick(i, 21, pop.commenters_from, pop.users);
                        keys.issue(
                            &user.to_string(),
                            crate::services::comments::USER,
                            24 * 3600,
                        )
                    })
                    .collect(),
            );
            out.push(Workload {
                name: "POST comment, random course (durable)".into(),
                factory: Arc::new(move |seq: u64| {
                    let body = format!(
                        r#"{{"rating":{},"title":"Bench comment {seq}","remarks":"Posted by the benchmark; request {seq}."}}"#,
                        pick(seq, 22, 1, 5)
                    );
                    RequestSpec {
                        method: http::Method::POST,
                        path_and_query: format!("/api/courses/{}/comments", pick(seq, 23, 1, courses)),
                        headers: vec![
                            ("content-type".into(), "application/json".into()),
                            ("authorization".into(), format!("Bearer {}", tokens[(seq as usize) % TOKENS])),
                        ],
                        body: Bytes::from(body),
                    }
                }),
                ok_statuses: vec![201],
                target_ratio_min: None,
                published: "-".into(),
                comparison: false,
                ..Workload::default()
            });
        }
        out
    }
    fn notes(&self) -> Vec<String> {
        vec![
            "write-up: ASP.NET Core 1.1 + Dapper, stored procedure with FOR JSON on a 5 eDTU Azure SQL \
             database (~3 million comments, 1 million users); Artillery at 1-5 arrivals/s: 300+ API \
             calls a minute, 4 MB returned, median 101 ms"
                .into(),
            "GET mix: 5,000 rows like the write-up's testData.csv (skip 0-3, size 2-10, skipThread 0 \
             in 8 of 10 else 0-1, sizeThread 2-10), random courses"
                .into(),
        ]
    }
}
