//! Comments on a host's site, through HTTP on both stores: users created at
//! their first sign-in from the token's name claim, the host's providers,
//! courses and enrolments (one by one and as CSV, all or nothing), reviews
//! only by enrolled users (or open to all by a flag), each moderation
//! action with its event and its effect on the listing and the rating,
//! bans, reports counted once per reader and the queue, pre-moderation and
//! the word and link filter, the listing's orders, helpful votes once per
//! reader, webhook notifications delivered once each, and a deleted
//! review's text gone from every file of the SQLite store.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::{Api, Reply, StoreKind, TestServer};
use throng::platform::auth::Role;
use throng::services::comments::store::{CommentOut, QueueItem, RatingOut, UserBlock};
use throng::services::comments::{HOST, MODERATOR, PROVIDER, USER};

both_stores!(
    a_first_sign_in_creates_the_user_and_only_enrolled_users_review,
    the_host_imports_csv_all_or_nothing_naming_the_line,
    open_reviews_let_every_user_review,
    hiding_restoring_and_removing_move_the_listing_and_the_rating,
    a_banned_user_cannot_post_until_unbanned,
    a_report_counts_once_per_reader_and_fills_the_queue,
    a_held_review_is_invisible_until_approved,
    the_filter_holds_words_and_links,
    each_order_sorts_and_pages_by_cursor,
    helpful_votes_count_once_per_reader,
    each_notification_is_delivered_once,
    a_notification_that_keeps_failing_or_is_refused_is_parked,
);

crate::postgres_only!(a_moderators_action_reaches_the_other_nodes_cache_within_the_bound);

const PROVIDER_ID: i64 = 3;
const OTHER_PROVIDER_ID: i64 = 4;
/// Course 1 and 3 list at once; course 2 is pre-moderated; course 4's
/// provider pre-moderates its courses.
const OPEN_COURSE: i64 = 1;
const PREMODERATED_COURSE: i64 = 2;
const SECOND_COURSE: i64 = 3;
const PROVIDER_PREMODERATED_COURSE: i64 = 4;

/// A server with a provider and courses registered by the host, and
/// `flags`.
struct Site {
    s: TestServer,
}

impl Site {
    async fn start(kind: StoreKind, flags: &[&str]) -> Site {
        let site = Site {
            s: TestServer::start(kind, flags).await,
        };
        let host = site.token("host-server", HOST, None);
        for (id, name, pre) in [
            (PROVIDER_ID, "Northwind Academy", false),
            (OTHER_PROVIDER_ID, "Careful College", true),
        ] {
            let r = site
                .send(
                    reqwest::Method::PUT,
                    &format!("/api/comments/host/providers/{id}"),
                    Some(&host),
                    Some(json!({"name": name, "premoderate": pre})),
                )
                .await;
            assert_eq!(r.status, 200, "{}", r.text());
        }
        for (id, provider, pre) in [
            (OPEN_COURSE, PROVIDER_ID, false),
            (PREMODERATED_COURSE, PROVIDER_ID, true),
            (SECOND_COURSE, PROVIDER_ID, false),
            (PROVIDER_PREMODERATED_COURSE, OTHER_PROVIDER_ID, false),
        ] {
            let r = site
                .send(
                    reqwest::Method::PUT,
                    &format!("/api/comments/host/courses/{id}"),
                    Some(&host),
                    Some(json!({"providerId": provider, "title": format!("Course {id}"), "premoderate": pre})),
                )
                .await;
            assert_eq!(r.status, 200, "{}", r.text());
        }
        site
    }

    fn api(&self) -> &Api {
        &self.s.api
    }

    fn token(&self, sub: &str, role: Role, name: Option<&str>) -> String {
        let mut claims = serde_json::Map::new();
        if let Some(n) = name {
            claims.insert("name".into(), n.into());
        }
        self.s.state.keys.issue_with(sub, role, 600, claims)
    }

    /// A user's token with their name claim.
    fn user(&self, id: i64) -> String {
        self.token(&id.to_string(), USER, Some(&format!("Reader {id}")))
    }

    fn moderator(&self) -> String {
        self.token("mod-1", MODERATOR, None)
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        bearer: Option<&str>,
        body: Option<Value>,
    ) -> Reply {
        let api = self.api();
        let mut req = api.http.request(method, api.url(path));
        if let Some(t) = bearer {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        api.send(req).await
    }

    async fn enrol(&self, course: i64, user: i64) {
        let host = self.token("host-server", HOST, None);
        let r = self
            .send(
                reqwest::Method::PUT,
                &format!("/api/comments/host/courses/{course}/enrolments/{user}"),
                Some(&host),
                None,
            )
            .await;
        assert_eq!(r.status, 204, "{}", r.text());
    }

    async fn post(&self, course: i64, bearer: &str, rating: i64, title: &str) -> Reply {
        self.send(
            reqwest::Method::POST,
            &format!("/api/courses/{course}/comments"),
            Some(bearer),
            Some(json!({"rating": rating, "title": title, "remarks": format!("{title}: remarks")})),
        )
        .await
    }

    /// Enrols `user` and posts a review that is listed at once; its id.
    async fn review(&self, course: i64, user: i64, rating: i64, title: &str) -> i64 {
        self.enrol(course, user).await;
        let r = self.post(course, &self.user(user), rating, title).await;
        assert_eq!(r.status, 201, "{}", r.text());
        let out: CommentOut = r.body();
        assert_eq!(out.status, None, "listed at once: {}", r.text());
        out.comment_id
    }

    async fn moderate(&self, comment: i64, action: &str, bearer: &str) -> Reply {
        self.send(
            reqwest::Method::POST,
            &format!("/api/comments/{comment}/moderation"),
            Some(bearer),
            Some(json!({"action": action, "reason": format!("test: {action}")})),
        )
        .await
    }

    /// The course's listing, read past every cache.
    async fn listing(&self, course: i64, extra: &str) -> Vec<Value> {
        let api = self.api();
        let r = api
            .send(
                api.http
                    .get(api.url(&format!(
                        "/api/comments?courseId={course}&size=20&sizeThread=20{extra}"
                    )))
                    .header("cache-control", "no-cache"),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let _: Vec<UserBlock> = r.body();
        r.json().as_array().unwrap().clone()
    }

    /// Every comment id the listing shows (reviews and replies).
    async fn listed_ids(&self, course: i64) -> Vec<i64> {
        let mut ids = Vec::new();
        for b in self.listing(course, "").await {
            for c in b["thread"].as_array().unwrap() {
                ids.push(c["commentId"].as_i64().unwrap());
                for r in c["reply"].as_array().unwrap() {
                    ids.push(r["commentId"].as_i64().unwrap());
                }
            }
        }
        ids
    }

    async fn rating(&self, course: i64) -> RatingOut {
        let r = self
            .api()
            .get(&format!("/api/courses/{course}/rating"))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        r.body()
    }

    /// The event types of the comments' streams, in log order.
    async fn events(&self) -> Vec<(String, Value)> {
        crate::helpers::log_events(&self.s.state.store, 0, 100_000)
            .await
            .into_iter()
            .filter(|e| e.stream.starts_with("comments-"))
            .map(|e| {
                (
                    e.event_type,
                    serde_json::from_slice(&e.payload).unwrap_or(Value::Null),
                )
            })
            .collect()
    }

    async fn has_event(&self, event_type: &str, comment: i64) -> bool {
        self.events()
            .await
            .iter()
            .any(|(t, p)| t == event_type && p["commentId"] == comment)
    }

    async fn queue(&self) -> Vec<QueueItem> {
        let r = self
            .send(
                reqwest::Method::GET,
                "/api/comments/moderation/queue?limit=100",
                Some(&self.moderator()),
                None,
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        r.body()
    }
}

async fn a_first_sign_in_creates_the_user_and_only_enrolled_users_review(kind: StoreKind) {
    let site = Site::start(kind, &[]).await;
    let nameless = site.token("500001", USER, None);
    let r = site
        .send(
            reqwest::Method::GET,
            "/api/comments/me?courseId=1",
            Some(&nameless),
            None,
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(r.assert_error(403, "unknown_user").contains("name"));
    // A first sign-in with the name claim creates the user.
    let mia = site.token("500001", USER, Some("Mia K."));
    let r = site
        .send(
            reqwest::Method::GET,
            "/api/comments/me?courseId=1",
            Some(&mia),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let me = r.json();
    assert_eq!(me["displayName"], "Mia K.");
    assert_eq!(me["canReview"], false, "not enrolled yet: {me}");
    // Known now: a token without the name works, and keeps the first name.
    let r = site
        .send(
            reqwest::Method::GET,
            "/api/comments/me?courseId=1",
            Some(&nameless),
            None,
        )
        .await;
    assert_eq!(r.json()["displayName"], "Mia K.");

    // Not enrolled: refused with a message a person can act on.
    let r = site.post(OPEN_COURSE, &mia, 5, "Clear").await;
    let message = r.assert_error(403, "not_enrolled");
    assert!(message.contains("enrolled"), "{message}");
    assert!(site.listing(OPEN_COURSE, "").await.is_empty());

    // Only the host (or admin) enrols.
    for bearer in [mia.clone(), site.moderator()] {
        let r = site
            .send(
                reqwest::Method::PUT,
                "/api/comments/host/courses/1/enrolments/500001",
                Some(&bearer),
                None,
            )
            .await;
        r.assert_error(403, "forbidden");
    }
    let r = site
        .send(
            reqwest::Method::PUT,
            "/api/comments/host/courses/99/enrolments/500001",
            Some(&site.token("h", HOST, None)),
            None,
        )
        .await;
    r.assert_error(404, "course_not_found");
    site.enrol(OPEN_COURSE, 500001).await;
    let r = site
        .send(
            reqwest::Method::GET,
            "/api/comments/me?courseId=1",
            Some(&mia),
            None,
        )
        .await;
    assert_eq!(r.json()["canReview"], true);
    let r = site.post(OPEN_COURSE, &mia, 5, "Clear").await;
    assert_eq!(r.status, 201, "{}", r.text());
    let blocks = site.listing(OPEN_COURSE, "").await;
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0]["displayName"], "Mia K.");
    // Enrolment is per course.
    site.post(SECOND_COURSE, &mia, 4, "Other")
        .await
        .assert_error(403, "not_enrolled");
    // A user who never signed in with a name cannot post even if enrolled.
    site.enrol(OPEN_COURSE, 500009).await;
    site.post(OPEN_COURSE, &site.token("500009", USER, None), 3, "Who")
        .await
        .assert_error(403, "unknown_user");
    // The provider sees reply controls on its own courses only.
    let provider = site.token("3", PROVIDER, None);
    let other = site.token("4", PROVIDER, None);
    for (bearer, can) in [(&provider, true), (&other, false)] {
        let r = site
            .send(
                reqwest::Method::GET,
                "/api/comments/me?courseId=1",
                Some(bearer),
                None,
            )
            .await;
        assert_eq!(r.json()["canReply"], can, "{}", r.text());
        assert_eq!(r.json()["canReview"], false);
    }
}

async fn import(site: &Site, kind: &str, body: &str, content_type: &str) -> Reply {
    let api = site.api();
    api.send(
        api.http
            .post(api.url(&format!("/api/comments/host/import/{kind}")))
            .bearer_auth(site.token("host-server", HOST, None))
            .header("content-type", content_type)
            .body(body.to_string()),
    )
    .await
}

async fn the_host_imports_csv_all_or_nothing_naming_the_line(kind: StoreKind) {
    let site = Site::start(kind, &[]).await;
    let user = site.user(600001);
    // A bad row: nothing written, the line named.
    let r = import(
        &site,
        "enrolments",
        "course_id,user_id\n1,600001\n1,six\n",
        "text/csv",
    )
    .await;
    let message = r.assert_error(422, "invalid_csv");
    assert!(message.starts_with("line 3: user_id"), "{message}");
    site.post(OPEN_COURSE, &user, 4, "Before")
        .await
        .assert_error(403, "not_enrolled");
    // An unknown course: nothing written either.
    let r = import(
        &site,
        "enrolments",
        "course_id,user_id\n1,600001\n77,600002\n",
        "text/csv",
    )
    .await;
    let message = r.assert_error(422, "invalid_csv");
    assert!(message.starts_with("line 3: course_id"), "{message}");
    site.post(OPEN_COURSE, &user, 4, "Before")
        .await
        .assert_error(403, "not_enrolled");
    // Not CSV, a bad header, an unknown kind.
    import(
        &site,
        "enrolments",
        "course_id,user_id\n1,600001\n",
        "application/json",
    )
    .await
    .assert_error(415, "unsupported_media_type");
    let r = import(&site, "enrolments", "user,course\n1,600001\n", "text/csv").await;
    assert!(r.assert_error(422, "invalid_csv").starts_with("line 1:"));
    import(&site, "students", "a\n", "text/csv")
        .await
        .assert_error(404, "route_not_found");
    // Courses with quoted titles, then their enrolments.
    let r = import(
        &site,
        "courses",
        "course_id,provider_id,title,premoderate\r\n10,3,\"Rust, fast\",no\r\n11,3,Plain,yes\r\n",
        "text/csv; charset=utf-8",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["rows"], 2);
    assert_eq!(site.rating(10).await.course_title, "Rust, fast");
    let r = import(
        &site,
        "enrolments",
        "course_id,user_id\n10,600001\n11,600001\n10,600001\n",
        "text/csv",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = site.post(10, &user, 4, "Now").await;
    assert_eq!(r.status, 201, "{}", r.text());
    // Course 11 was imported pre-moderated.
    let r = site.post(11, &user, 4, "Held").await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["status"], "held");
    // Providers by CSV: the name replies show.
    let r = import(
        &site,
        "providers",
        "provider_id,name\n8,\"Acme, Inc.\"\n",
        "text/csv",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // Only the host (or admin) imports.
    let api = site.api();
    let r = api
        .send(
            api.http
                .post(api.url("/api/comments/host/import/enrolments"))
                .bearer_auth(&user)
                .header("content-type", "text/csv")
                .body("course_id,user_id\n1,1\n"),
        )
        .await;
    r.assert_error(403, "forbidden");
    let r = api
        .send(
            api.http
                .post(api.url("/api/comments/host/import/enrolments"))
                .bearer_auth(site.s.token(Role::ADMIN))
                .header("content-type", "text/csv")
                .body("course_id,user_id\n1,1\n"),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

async fn open_reviews_let_every_user_review(kind: StoreKind) {
    let site = Site::start(kind, &["--comments-reviews-open"]).await;
    let r = site.post(OPEN_COURSE, &site.user(700001), 5, "Open").await;
    assert_eq!(r.status, 201, "{}", r.text());
    let r = site
        .send(
            reqwest::Method::GET,
            "/api/comments/me?courseId=3",
            Some(&site.user(700002)),
            None,
        )
        .await;
    assert_eq!(r.json()["canReview"], true);
}

async fn hiding_restoring_and_removing_move_the_listing_and_the_rating(kind: StoreKind) {
    let site = Site::start(kind, &[]).await;
    let m = site.moderator();
    let a_old = site.review(OPEN_COURSE, 500001, 5, "A first").await;
    let a_last = site.review(OPEN_COURSE, 500001, 2, "A second").await;
    let b = site.review(OPEN_COURSE, 500002, 1, "B").await;
    let provider = site.token("3", PROVIDER, None);
    let reply = site
        .send(
            reqwest::Method::PUT,
            &format!("/api/comments/{a_last}/reply"),
            Some(&provider),
            Some(json!({"remarks": "Thanks"})),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text());
    let reply: i64 = reply.json()["commentId"].as_i64().unwrap();
    let r = site.rating(OPEN_COURSE).await;
    assert_eq!((r.count, r.stars), (2, [1, 1, 0, 0, 0]));

    // Only moderators (and admin) moderate.
    for bearer in [
        site.user(500002),
        provider.clone(),
        site.token("h", HOST, None),
    ] {
        site.moderate(b, "hide", &bearer)
            .await
            .assert_error(403, "forbidden");
    }
    let r = site
        .send(
            reqwest::Method::POST,
            &format!("/api/comments/{b}/moderation"),
            Some(&m),
            Some(json!({"action": "shred", "reason": "x"})),
        )
        .await;
    r.assert_error(422, "invalid_field");
    site.moderate(999_999, "hide", &m)
        .await
        .assert_error(404, "comment_not_found");

    // Hide B: out of the listing and the rating.
    let r = site.moderate(b, "hide", &m).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["status"], "hidden");
    assert!(!site.listed_ids(OPEN_COURSE).await.contains(&b));
    let r = site.rating(OPEN_COURSE).await;
    assert_eq!((r.count, r.stars), (1, [0, 1, 0, 0, 0]));
    assert!(site.has_event("CommentHidden", b).await);
    site.moderate(b, "hide", &m)
        .await
        .assert_error(409, "already_so");
    // A's last review hidden: A's rating is their last listed one (5).
    assert_eq!(site.moderate(a_last, "hide", &m).await.status, 200);
    let r = site.rating(OPEN_COURSE).await;
    assert_eq!((r.count, r.stars), (1, [0, 0, 0, 0, 1]));
    let ids = site.listed_ids(OPEN_COURSE).await;
    assert_eq!(
        ids,
        vec![a_old],
        "the hidden review takes its reply out too"
    );
    let blocks = site.listing(OPEN_COURSE, "").await;
    assert_eq!(blocks[0]["lastCommentId"], a_old);
    assert_eq!(blocks[0]["lastRating"], 5);

    // Restore both: back as they were.
    for id in [a_last, b] {
        let r = site.moderate(id, "restore", &m).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["status"], "visible");
        assert!(site.has_event("CommentRestored", id).await);
    }
    site.moderate(b, "restore", &m)
        .await
        .assert_error(409, "already_so");
    let r = site.rating(OPEN_COURSE).await;
    assert_eq!((r.count, r.stars), (2, [1, 1, 0, 0, 0]));
    let mut ids = site.listed_ids(OPEN_COURSE).await;
    ids.sort();
    assert_eq!(ids, vec![a_old, a_last, b, reply]);

    // A reply hidden and restored alone; the rating does not move.
    assert_eq!(site.moderate(reply, "hide", &m).await.status, 200);
    assert!(!site.listed_ids(OPEN_COURSE).await.contains(&reply));
    assert!(site.listed_ids(OPEN_COURSE).await.contains(&a_last));
    assert_eq!(site.rating(OPEN_COURSE).await.count, 2);
    assert_eq!(site.moderate(reply, "restore", &m).await.status, 200);
    assert!(site.listed_ids(OPEN_COURSE).await.contains(&reply));

    // Remove A's last review: gone with its reply, A's rating is 5 again.
    let r = site.moderate(a_last, "remove", &m).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["status"], "removed");
    let mut ids = site.listed_ids(OPEN_COURSE).await;
    ids.sort();
    assert_eq!(ids, vec![a_old, b]);
    let r = site.rating(OPEN_COURSE).await;
    assert_eq!((r.count, r.stars), (2, [1, 0, 0, 0, 1]));
    assert!(site.has_event("CommentRemoved", a_last).await);
    site.moderate(a_last, "restore", &m)
        .await
        .assert_error(404, "comment_not_found");
    // Admin moderates too.
    let r = site.moderate(b, "remove", &site.s.token(Role::ADMIN)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = site.rating(OPEN_COURSE).await;
    assert_eq!((r.count, r.stars), (1, [0, 0, 0, 0, 1]));
    // Every event names the moderator and the reason.
    let events = site.events().await;
    let (_, hidden) = events
        .iter()
        .find(|(t, p)| t == "CommentHidden" && p["commentId"] == b)
        .unwrap();
    assert_eq!(hidden["moderator"], "mod-1");
    assert_eq!(hidden["reason"], "test: hide");
}

async fn a_banned_user_cannot_post_until_unbanned(kind: StoreKind) {
    let site = Site::start(kind, &[]).await;
    let m = site.moderator();
    let first = site.review(OPEN_COURSE, 500001, 4, "Before the ban").await;
    let ban = |user: i64, bearer: String| {
        let site = &site;
        async move {
            site.send(
                reqwest::Method::PUT,
                &format!("/api/comments/users/{user}/ban"),
                Some(&bearer),
                Some(json!({"reason": "spam"})),
            )
            .await
        }
    };
    ban(500001, site.user(500002))
        .await
        .assert_error(403, "forbidden");
    ban(123_456, m.clone())
        .await
        .assert_error(404, "user_not_found");
    assert_eq!(ban(500001, m.clone()).await.status, 204);
    let user = site.user(500001);
    let message = site
        .post(OPEN_COURSE, &user, 5, "After the ban")
        .await
        .assert_error(403, "banned");
    assert!(message.contains("suspended"), "{message}");
    let r = site
        .send(
            reqwest::Method::PATCH,
            &format!("/api/comments/{first}"),
            Some(&user),
            Some(json!({"rating": 1})),
        )
        .await;
    r.assert_error(403, "banned");
    let r = site
        .send(
            reqwest::Method::GET,
            "/api/comments/me?courseId=1",
            Some(&user),
            None,
        )
        .await;
    assert_eq!(
        (r.json()["banned"].clone(), r.json()["canReview"].clone()),
        (json!(true), json!(false))
    );
    let events = site.events().await;
    assert!(events
        .iter()
        .any(|(t, p)| t == "UserBanned" && p["userId"] == 500001 && p["reason"] == "spam"));
    let r = site
        .send(
            reqwest::Method::DELETE,
            "/api/comments/users/500001/ban",
            Some(&m),
            None,
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text());
    assert_eq!(site.post(OPEN_COURSE, &user, 5, "Back").await.status, 201);
    assert!(site
        .events()
        .await
        .iter()
        .any(|(t, p)| t == "UserUnbanned" && p["userId"] == 500001));
}

async fn report(site: &Site, comment: i64, user: i64, reason: &str) -> Reply {
    site.send(
        reqwest::Method::POST,
        &format!("/api/comments/{comment}/reports"),
        Some(&site.user(user)),
        Some(json!({"reason": reason})),
    )
    .await
}

async fn a_report_counts_once_per_reader_and_fills_the_queue(kind: StoreKind) {
    let site = Site::start(kind, &[]).await;
    let a = site.review(OPEN_COURSE, 500001, 4, "Reported").await;
    assert!(site.queue().await.is_empty());
    let r = report(&site, a, 500002, "rude").await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["counted"], true);
    assert_eq!(r.json()["reportsOpen"], 1);
    // The same reader again: not counted.
    let r = report(&site, a, 500002, "still rude").await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        (r.json()["counted"].clone(), r.json()["reportsOpen"].clone()),
        (json!(false), json!(1))
    );
    let r = report(&site, a, 500003, "off topic").await;
    assert_eq!(r.json()["reportsOpen"], 2);
    report(&site, a, 500003, "")
        .await
        .assert_error(422, "invalid_field");
    report(&site, 999_999, 500003, "x")
        .await
        .assert_error(404, "comment_not_found");
    let reported = site
        .events()
        .await
        .into_iter()
        .filter(|(t, p)| t == "CommentReported" && p["commentId"] == a)
        .count();
    assert_eq!(reported, 2, "one event per counted report");
    let queue = site.queue().await;
    assert_eq!(queue.len(), 1);
    assert_eq!(queue[0].comment_id, a);
    assert_eq!(queue[0].reports_open, 2);
    assert_eq!(queue[0].report_reasons, ["rude", "off topic"]);
    assert_eq!(queue[0].status, "visible");
    // The queue is the moderators'.
    let r = site
        .send(
            reqwest::Method::GET,
            "/api/comments/moderation/queue",
            Some(&site.user(500002)),
            None,
        )
        .await;
    r.assert_error(403, "forbidden");
    // Dismissed: out of the queue, still listed; a later report by the
    // same readers is not counted again.
    let r = site.moderate(a, "dismiss", &site.moderator()).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(site.queue().await.is_empty());
    assert!(site.listed_ids(OPEN_COURSE).await.contains(&a));
    assert!(site.has_event("ReportsDismissed", a).await);
    assert_eq!(
        report(&site, a, 500002, "again").await.json()["counted"],
        false
    );
    assert!(site.queue().await.is_empty());
    // A new reader's report brings it back; hiding closes it.
    report(&site, a, 500004, "spam").await;
    assert_eq!(site.queue().await.len(), 1);
    assert_eq!(
        site.moderate(a, "hide", &site.moderator()).await.status,
        200
    );
    assert!(site.queue().await.is_empty());
    // A hidden review cannot be reported.
    report(&site, a, 500005, "x")
        .await
        .assert_error(404, "comment_not_found");
}

async fn mine(site: &Site, course: i64, user: i64) -> Vec<Value> {
    let r = site
        .send(
            reqwest::Method::GET,
            &format!("/api/comments/mine?courseId={course}"),
            Some(&site.user(user)),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json().as_array().unwrap().clone()
}

async fn a_held_review_is_invisible_until_approved(kind: StoreKind) {
    let site = Site::start(kind, &[]).await;
    for (course, user) in [
        (PREMODERATED_COURSE, 500001),
        (PROVIDER_PREMODERATED_COURSE, 500002),
    ] {
        site.enrol(course, user).await;
        let r = site.post(course, &site.user(user), 2, "Waiting").await;
        assert_eq!(r.status, 201, "{}", r.text());
        let held: CommentOut = r.body();
        assert_eq!(held.status.map(|s| s.as_str()), Some("held"));
        // Not listed, not counted; its author sees it as held.
        assert!(site.listing(course, "").await.is_empty());
        assert_eq!(site.rating(course).await.count, 0);
        let own = mine(&site, course, user).await;
        assert_eq!(own.len(), 1);
        assert_eq!(own[0]["status"], "held");
        assert!(mine(&site, course, 500003).await.is_empty());
        // The provider cannot answer what it cannot see.
        let r = site
            .send(
                reqwest::Method::PUT,
                &format!("/api/comments/{}/reply", held.comment_id),
                Some(&site.token(&held_provider(course).to_string(), PROVIDER, None)),
                Some(json!({"remarks": "Hi"})),
            )
            .await;
        r.assert_error(404, "comment_not_found");
        // Nobody can report or vote on it.
        report(&site, held.comment_id, 500003, "x")
            .await
            .assert_error(404, "comment_not_found");
        let queue = site.queue().await;
        let item = queue
            .iter()
            .find(|q| q.comment_id == held.comment_id)
            .expect("in the queue");
        assert_eq!(item.status, "held");
        assert!(
            item.note.as_deref().unwrap().contains("pre-moderated"),
            "{item:?}"
        );
        // Approved: listed and counted, with its event.
        let r = site
            .moderate(held.comment_id, "restore", &site.moderator())
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(site.listed_ids(course).await, vec![held.comment_id]);
        let rating = site.rating(course).await;
        assert_eq!((rating.count, rating.stars), (1, [0, 1, 0, 0, 0]));
        assert!(site.has_event("CommentApproved", held.comment_id).await);
        assert_eq!(mine(&site, course, user).await[0]["status"], "visible");
        assert!(!site
            .queue()
            .await
            .iter()
            .any(|q| q.comment_id == held.comment_id));
    }
    // A held review hidden instead of approved never shows.
    site.enrol(PREMODERATED_COURSE, 500004).await;
    let r = site
        .post(PREMODERATED_COURSE, &site.user(500004), 1, "Spam")
        .await;
    let id = r.json()["commentId"].as_i64().unwrap();
    assert_eq!(
        site.moderate(id, "hide", &site.moderator()).await.status,
        200
    );
    assert!(!site.listed_ids(PREMODERATED_COURSE).await.contains(&id));
    assert_eq!(site.rating(PREMODERATED_COURSE).await.count, 1);
}

fn held_provider(course: i64) -> i64 {
    if course == PROVIDER_PREMODERATED_COURSE {
        OTHER_PROVIDER_ID
    } else {
        PROVIDER_ID
    }
}

async fn the_filter_holds_words_and_links(kind: StoreKind) {
    let site = Site::start(kind, &["--comments-filter-words", "crypto, buy now"]).await;
    site.enrol(OPEN_COURSE, 500001).await;
    let user = site.user(500001);
    for (title, remarks, why) in [
        ("Great CRYPTO tips", "fine", "crypto"),
        ("Fine", "Please buy   now!", "buy now"),
        ("Fine", "see https://spam.test/x", "link"),
        ("Fine", "visit cheap-pills.com today", "link"),
    ] {
        let r = site
            .send(
                reqwest::Method::POST,
                "/api/courses/1/comments",
                Some(&user),
                Some(json!({"rating": 5, "title": title, "remarks": remarks})),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text());
        assert_eq!(r.json()["status"], "held", "{title} {remarks}");
        let id = r.json()["commentId"].as_i64().unwrap();
        let item = site
            .queue()
            .await
            .into_iter()
            .find(|q| q.comment_id == id)
            .expect("held in the queue");
        assert!(item.note.unwrap().contains(why), "{why}");
    }
    assert!(site.listing(OPEN_COURSE, "").await.is_empty());
    // Words inside other words, and dotted names, pass.
    let r = site
        .post(OPEN_COURSE, &user, 4, "Cryptography and Node.js")
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json().get("status"), None);
    let id = r.json()["commentId"].as_i64().unwrap();
    // An edit that adds a link is held too.
    let r = site
        .send(
            reqwest::Method::PATCH,
            &format!("/api/comments/{id}"),
            Some(&user),
            Some(json!({"remarks": "more at www.example.test"})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["status"], "held");
    assert!(site.listing(OPEN_COURSE, "").await.is_empty());
    assert_eq!(site.rating(OPEN_COURSE).await.count, 0);
}

async fn each_order_sorts_and_pages_by_cursor(kind: StoreKind) {
    let site = Site::start(kind, &["--comments-reviews-open"]).await;
    // Posted in this order: user, rating.
    let posted = [
        (500001, 3),
        (500002, 5),
        (500003, 1),
        (500004, 4),
        (500005, 2),
    ];
    let mut ids = Vec::new();
    for (user, rating) in posted {
        let r = site
            .post(OPEN_COURSE, &site.user(user), rating, &format!("U{user}"))
            .await;
        assert_eq!(r.status, 201, "{}", r.text());
        ids.push(r.json()["commentId"].as_i64().unwrap());
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    // Helpful votes: 500003's review 3, 500001's 2, 500005's 1.
    for (target, voters) in [(2usize, 3i64), (0, 2), (4, 1)] {
        for v in 0..voters {
            let r = site
                .send(
                    reqwest::Method::POST,
                    &format!("/api/comments/{}/helpful", ids[target]),
                    Some(&site.user(510_000 + v)),
                    None,
                )
                .await;
            assert_eq!(r.status, 201, "{}", r.text());
        }
    }
    let users = |blocks: Vec<Value>| -> Vec<i64> {
        blocks
            .iter()
            .map(|b| b["displayName"].as_str().unwrap()[7..].parse().unwrap())
            .collect()
    };
    for (sort, want) in [
        ("newest", vec![500005, 500004, 500003, 500002, 500001]),
        ("oldest", vec![500001, 500002, 500003, 500004, 500005]),
        ("highest", vec![500002, 500004, 500001, 500005, 500003]),
        ("lowest", vec![500003, 500005, 500001, 500004, 500002]),
        ("helpful", vec![500003, 500001, 500005, 500004, 500002]),
    ] {
        let all = users(site.listing(OPEN_COURSE, &format!("&sort={sort}")).await);
        assert_eq!(all, want, "{sort}");
        // Paged two at a time by cursor: the same order, nothing twice.
        let mut paged = Vec::new();
        let mut cursor = String::new();
        loop {
            let r = site
                .api()
                .get(&format!(
                    "/api/comments?courseId=1&size=2&sort={sort}&cursor={cursor}"
                ))
                .await;
            assert_eq!(r.status, 200, "{}", r.text());
            paged.extend(users(r.json().as_array().unwrap().clone()));
            match r.headers.get("x-next-cursor") {
                Some(c) => cursor = c.to_str().unwrap().to_string(),
                None => break,
            }
            assert!(paged.len() <= 5, "{sort}: {paged:?}");
        }
        assert_eq!(paged, want, "{sort} by cursor");
        // Skip paging agrees.
        let r = site
            .api()
            .get(&format!(
                "/api/comments?courseId=1&size=2&skip=2&sort={sort}"
            ))
            .await;
        assert_eq!(
            users(r.json().as_array().unwrap().clone()),
            want[2..4],
            "{sort}"
        );
    }
    // The default is newest; a cursor keeps to its order; unknown orders.
    let r = site
        .api()
        .get("/api/comments?courseId=1&size=2&sort=highest")
        .await;
    let cursor = r.headers["x-next-cursor"].to_str().unwrap().to_string();
    let r = site
        .api()
        .get(&format!("/api/comments?courseId=1&size=2&cursor={cursor}"))
        .await;
    let message = r.assert_error(422, "invalid_field");
    assert!(message.contains("sort=highest"), "{message}");
    site.api()
        .get("/api/comments?courseId=1&sort=best")
        .await
        .assert_error(422, "invalid_field");
    // Hidden reviews leave every order.
    assert_eq!(
        site.moderate(ids[2], "hide", &site.moderator())
            .await
            .status,
        200
    );
    let all = users(site.listing(OPEN_COURSE, "&sort=helpful").await);
    assert_eq!(all, vec![500001, 500005, 500004, 500002]);
}

async fn vote(site: &Site, comment: i64, user: i64) -> Reply {
    site.send(
        reqwest::Method::POST,
        &format!("/api/comments/{comment}/helpful"),
        Some(&site.user(user)),
        None,
    )
    .await
}

async fn helpful_votes_count_once_per_reader(kind: StoreKind) {
    let site = Site::start(kind, &[]).await;
    let a = site.review(OPEN_COURSE, 500001, 4, "Useful").await;
    let r = vote(&site, a, 500002).await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(
        (r.json()["counted"].clone(), r.json()["helpful"].clone()),
        (json!(true), json!(1))
    );
    let r = vote(&site, a, 500002).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        (r.json()["counted"].clone(), r.json()["helpful"].clone()),
        (json!(false), json!(1))
    );
    let r = vote(&site, a, 500001).await;
    assert!(r.assert_error(422, "not_votable").contains("own"));
    assert_eq!(vote(&site, a, 500003).await.json()["helpful"], 2);
    vote(&site, 999_999, 500003)
        .await
        .assert_error(404, "comment_not_found");
    let reply = site
        .send(
            reqwest::Method::PUT,
            &format!("/api/comments/{a}/reply"),
            Some(&site.token("3", PROVIDER, None)),
            Some(json!({"remarks": "Thanks"})),
        )
        .await
        .json()["commentId"]
        .as_i64()
        .unwrap();
    vote(&site, reply, 500003)
        .await
        .assert_error(422, "not_votable");
    // Providers do not vote.
    let r = site
        .send(
            reqwest::Method::POST,
            &format!("/api/comments/{a}/helpful"),
            Some(&site.token("3", PROVIDER, None)),
            None,
        )
        .await;
    r.assert_error(403, "forbidden");
    // The listing shows the votes (the cache follows at once).
    let page = site.api().get("/api/comments?courseId=1").await.json();
    assert_eq!(page[0]["thread"][0]["helpful"], 2);
    // Concurrent votes by one reader count once.
    let b = site.review(OPEN_COURSE, 500009, 3, "Raced").await;
    let votes: Vec<Reply> = futures::future::join_all((0..8).map(|_| vote(&site, b, 500010))).await;
    assert_eq!(votes.iter().filter(|r| r.status == 201).count(), 1);
    assert!(votes.iter().all(|r| r.status == 201 || r.status == 200));
    // (A repeat's answer reads the count as its own statement saw it: with
    // pipelined writes, possibly before the counted vote's increment.)
    assert!(votes
        .iter()
        .all(|r| r.json()["helpful"].as_i64().unwrap() <= 1));
    let page = site
        .api()
        .send(
            site.api()
                .http
                .get(site.api().url("/api/comments?courseId=1&userId=500009"))
                .header("cache-control", "no-cache"),
        )
        .await
        .json();
    assert_eq!(page[0]["thread"][0]["helpful"], 1);
}

type Calls = Arc<Mutex<Vec<Value>>>;

/// A webhook receiver on 127.0.0.1 that records every body and takes it.
async fn receiver() -> (String, Calls) {
    receiver_answering(|_| 204).await
}

/// A webhook receiver on 127.0.0.1 that records every body and answers
/// with the status `answer` gives for it.
async fn receiver_answering(answer: fn(&Value) -> u16) -> (String, Calls) {
    let calls: Calls = Arc::default();
    let seen = calls.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let seen = seen.clone();
            async move {
                let status = answer(&body);
                seen.lock().unwrap().push(body);
                axum::http::StatusCode::from_u16(status).unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, calls)
}

/// Waits (15 s at most) until `calls` holds `n` bodies.
async fn wait_for(calls: &Calls, n: usize) -> Vec<Value> {
    for _ in 0..150 {
        if calls.lock().unwrap().len() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    calls.lock().unwrap().clone()
}

/// The course's provider replies "Thanks" to review `a` (201).
async fn provider_replies(site: &Site, a: i64) {
    let r = site
        .send(
            reqwest::Method::PUT,
            &format!("/api/comments/{a}/reply"),
            Some(&site.token("3", PROVIDER, None)),
            Some(json!({"remarks": "Thanks"})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
}

async fn each_notification_is_delivered_once(kind: StoreKind) {
    let (url, calls) = receiver().await;
    let site = Site::start(kind, &["--comments-notify-webhook", &url]).await;
    let a = site.review(OPEN_COURSE, 500001, 5, "Notify").await;
    let got = wait_for(&calls, 1).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["type"], "new_review");
    assert_eq!(got[0]["to"], json!({"role": "provider", "id": PROVIDER_ID}));
    assert_eq!(got[0]["commentId"], a);
    provider_replies(&site, a).await;
    let got = wait_for(&calls, 2).await;
    assert_eq!(got[1]["type"], "reply");
    assert_eq!(got[1]["to"], json!({"role": "user", "id": 500001}));
    report(&site, a, 500002, "rude").await;
    report(&site, a, 500002, "again, not counted").await;
    let got = wait_for(&calls, 3).await;
    assert_eq!(got[2]["type"], "report");
    assert_eq!(got[2]["to"], json!({"role": "moderators"}));
    // A held review tells nobody until it is approved.
    site.enrol(PREMODERATED_COURSE, 500003).await;
    let held = site
        .post(PREMODERATED_COURSE, &site.user(500003), 3, "Held")
        .await
        .json()["commentId"]
        .as_i64()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(calls.lock().unwrap().len(), 3);
    assert_eq!(
        site.moderate(held, "restore", &site.moderator())
            .await
            .status,
        200
    );
    let got = wait_for(&calls, 4).await;
    assert_eq!(got[3]["type"], "new_review");
    assert_eq!(got[3]["commentId"], held);
    // Nothing more arrives: each was delivered once.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let got = calls.lock().unwrap().clone();
    assert_eq!(got.len(), 4, "{got:?}");
    let mut keys: Vec<&str> = got
        .iter()
        .map(|c| c["idempotencyKey"].as_str().unwrap())
        .collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 4);
}

/// The parked notifications, as the host reads them.
async fn parked(site: &Site, token: &str) -> Reply {
    site.send(
        reqwest::Method::GET,
        "/api/comments/host/notifications/parked",
        Some(token),
        None,
    )
    .await
}

/// A reply's notification fails (503) until its attempts run out, a report's
/// is refused (410): both are parked, and the reviews after them still go
/// out.
async fn a_notification_that_keeps_failing_or_is_refused_is_parked(kind: StoreKind) {
    let (url, calls) = receiver_answering(|body| match body["type"].as_str() {
        Some("reply") => 503,
        Some("report") => 410,
        _ => 204,
    })
    .await;
    let site = Site::start(
        kind,
        &[
            "--comments-notify-webhook",
            &url,
            "--comments-notify-attempts-max",
            "3",
        ],
    )
    .await;
    let a = site.review(OPEN_COURSE, 500001, 5, "First").await;
    provider_replies(&site, a).await;
    assert_eq!(report(&site, a, 500002, "rude").await.status, 201);
    let b = site.review(OPEN_COURSE, 500003, 4, "Second").await;
    // 1 review + 3 reply attempts + 1 report + 1 review.
    let got = wait_for(&calls, 6).await;
    let kinds: Vec<&str> = got.iter().map(|c| c["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "new_review",
            "reply",
            "reply",
            "reply",
            "report",
            "new_review"
        ],
        "{got:?}"
    );
    assert_eq!(got[5]["commentId"], b);
    let host = site.token("host-1", HOST, None);
    let mut list = Value::Null;
    for _ in 0..100 {
        list = parked(&site, &host).await.json();
        if list["count"] == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(list["count"], 2, "{list}");
    let p = list["parked"].as_array().unwrap();
    assert_eq!(p[0]["event"], "ReplyPosted");
    assert_eq!(p[0]["commentId"], a);
    assert_eq!(p[0]["attempts"], 3);
    assert!(p[0]["reason"].as_str().unwrap().contains("503"), "{list}");
    assert_eq!(p[1]["event"], "CommentReported");
    assert_eq!(p[1]["attempts"], 1);
    assert!(p[1]["reason"].as_str().unwrap().contains("410"), "{list}");
    // Nothing is tried again once parked.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(calls.lock().unwrap().len(), 6);
    // Only the host (or an admin) reads them.
    assert_eq!(parked(&site, &site.user(500001)).await.status, 403);
    assert_eq!(parked(&site, &site.moderator()).await.status, 403);
}

/// The files of an SQLite store: the database, its WAL and shared memory.
fn store_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("throng.db"))
        })
        .collect()
}

fn files_holding(dir: &std::path::Path, needle: &[u8]) -> Vec<String> {
    store_files(dir)
        .into_iter()
        .filter(|p| {
            std::fs::read(p)
                .map(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
                .unwrap_or(false)
        })
        .map(|p| p.display().to_string())
        .collect()
}

/// A review its author deletes (and one a moderator removes) leaves no
/// copy of its text in the database file or its WAL.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deleted_review_leaves_no_copy_in_the_store_files() {
    let site = Site::start(StoreKind::Sqlite, &[]).await;
    let dir = site.s.data_dir.clone();
    let user = site.user(500001);
    let mut removed = Vec::new();
    for (i, by_moderator) in [(0, false), (1, true)] {
        let marker = format!("zq-erasure-marker-{i}-7731");
        site.enrol(OPEN_COURSE, 500001).await;
        let r = site
            .send(
                reqwest::Method::POST,
                "/api/courses/1/comments",
                Some(&user),
                Some(json!({"rating": 2, "title": format!("T {marker}"), "remarks": format!("R {marker} personal")})),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text());
        let id = r.json()["commentId"].as_i64().unwrap();
        // Edited once, so an older version is in the files too.
        let r = site
            .send(
                reqwest::Method::PATCH,
                &format!("/api/comments/{id}"),
                Some(&user),
                Some(json!({"remarks": format!("E {marker} edited")})),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        site.listing(OPEN_COURSE, "").await;
        assert!(
            !files_holding(&dir, marker.as_bytes()).is_empty(),
            "the text is in the store's files before the deletion"
        );
        let r = if by_moderator {
            site.moderate(id, "remove", &site.moderator()).await
        } else {
            site.send(
                reqwest::Method::DELETE,
                &format!("/api/comments/{id}"),
                Some(&user),
                None,
            )
            .await
        };
        assert!(r.status == 204 || r.status == 200, "{}", r.text());
        removed.push(marker);
    }
    for marker in &removed {
        let holding = files_holding(&dir, marker.as_bytes());
        assert!(holding.is_empty(), "{marker} still in {holding:?}");
    }
    // The rest of the course is still there.
    let keep = site.review(OPEN_COURSE, 500002, 5, "zq-kept-marker").await;
    assert!(site.listed_ids(OPEN_COURSE).await.contains(&keep));
}

async fn a_moderators_action_reaches_the_other_nodes_cache_within_the_bound(_kind: StoreKind) {
    use crate::helpers::{store_flags, throng_bin, PgDb, ProcessServer};
    let db = PgDb::fresh().await;
    let dir = tempfile::TempDir::new().unwrap();
    let mut args = vec!["seed".to_string()];
    args.extend(store_flags(dir.path(), Some(&db.url)));
    args.extend(
        [
            "comments",
            "--users",
            "40",
            "--courses",
            "6",
            "--comments-per-course",
            "12",
        ]
        .map(String::from),
    );
    let out = tokio::process::Command::new(throng_bin())
        .args(&args)
        .env("RUST_LOG", "warn")
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (a, b) = tokio::join!(
        ProcessServer::start(dir.path(), Some(&db.url), &[]),
        ProcessServer::start(dir.path(), Some(&db.url), &[]),
    );
    let secrets = throng::platform::secrets::Secrets::load_or_create(dir.path()).unwrap();
    let keys = throng::platform::auth::TokenKeys::new(&secrets.token_secret);
    let moderator = keys.issue("mod-1", MODERATOR, 600);
    let q = "/api/comments?courseId=3&size=20&sizeThread=0";
    let bound = throng::services::comments::cache::FRESH_BOUND;
    let mut hidden = 0;
    for (i, action) in ["hide", "restore", "hide"].into_iter().enumerate() {
        let (writer, reader) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        // The reader's page, read twice so it is cached.
        let before = reader.api.get(q).await;
        assert_eq!(before.status, 200, "{}", before.text());
        assert_eq!(reader.api.get(q).await.body, before.body);
        let first = before.json()[0]["lastCommentId"].as_i64().unwrap();
        let target = if action == "restore" { hidden } else { first };
        hidden = target;
        let r = writer
            .api
            .send(
                writer
                    .api
                    .http
                    .post(
                        writer
                            .api
                            .url(&format!("/api/comments/{target}/moderation")),
                    )
                    .bearer_auth(&moderator)
                    .json(&json!({"action": action, "reason": "cluster"})),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        let acted = std::time::Instant::now();
        loop {
            let page = reader.api.get(q).await;
            if page.body != before.body {
                break;
            }
            assert!(
                acted.elapsed() <= bound + Duration::from_millis(500),
                "round {i}: the other node served the page from before the {action} after {:?}",
                acted.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
