//! Comments through HTTP, on both stores: the listing's bytes against one
//! stored snapshot (the same file for SQLite and PostgreSQL), paging edges,
//! cursors, the user filter, rules 1 to 4 (comments, replies, snapshots,
//! aggregates), every error code, the page cache (a write is visible to the
//! next read), ETag/304, and the write-up's Artillery script.

use std::path::PathBuf;
use throng::store::Columns;

use serde_json::{json, Value};

use crate::both_stores;
use crate::helpers::{throng_bin, Api, ProcessServer, Reply, StoreKind, TestServer};
use throng::platform::auth::{Claims, Role};
use throng::platform::secrets::Secrets;
use throng::services::comments::seed::{self, SeedCommentsArgs};
use throng::services::comments::store::{CommentOut, RatingOut, UserBlock};
use throng::services::comments::CommentsState;

both_stores!(
    listing_matches_the_stored_snapshot,
    paging_edges_and_caps,
    cursor_paging_equals_skip_paging,
    user_filter_returns_one_block,
    comments_update_snapshots_and_aggregates,
    replies_once_edit_later_by_the_provider_only,
    bad_comments_get_the_envelope_and_write_nothing,
    bad_replies_get_the_envelope_and_write_nothing,
    bad_listing_queries,
    a_write_is_visible_to_the_next_read_with_the_cache,
    cache_off_gives_the_same_bytes,
    json_functions_give_the_same_bytes,
    etag_and_304,
    write_up_paths_answer_the_same,
    concurrent_writes_keep_one_reply_and_exact_aggregates,
    reseeding_replaces_the_data_and_keeps_every_index,
    one_rating_per_user_the_last_one_counts,
    edit_and_delete_follow_the_users_last_rating,
    editing_or_deleting_someone_elses_comment_is_refused,
    bad_edits_get_the_envelope_and_write_nothing,
    deleting_a_review_takes_its_reply_a_provider_deletes_their_own_reply,
);

crate::postgres_only!(two_nodes_see_each_others_writes_within_the_bound);

const LIST: &str = "/api/comments";

/// A server seeded with a small deterministic data set. These tests post
/// as any seeded user on any course, so reviews are open to every user
/// (who may review what, and moderation, are `comments_site.rs`'s).
async fn seeded(kind: StoreKind, args: SeedCommentsArgs, flags: &[&str]) -> TestServer {
    let mut flags = flags.to_vec();
    flags.push("--comments-reviews-open");
    let s = TestServer::start(kind, &flags).await;
    seed::seed(&s.state.store, &args, false)
        .await
        .expect("seed comments");
    s
}

/// 40 users (providers 1..=2, commenters 20..=40), 6 courses, 12 comments
/// each: users repeat within a course, so threads hold several comments.
fn small() -> SeedCommentsArgs {
    SeedCommentsArgs::small(40, 6, 12)
}

/// 2,000 users, 3 courses, 30 comments each: more than 20 blocks per course.
fn wide() -> SeedCommentsArgs {
    SeedCommentsArgs::small(2000, 3, 30)
}

fn token(s: &TestServer, sub: i64, role: Role) -> String {
    s.state.keys.issue(&sub.to_string(), role, 600)
}

async fn list(api: &Api, query: &str) -> Reply {
    api.get(&format!("{LIST}?{query}")).await
}

async fn list_ok(api: &Api, query: &str) -> Vec<Value> {
    let r = list(api, query).await;
    assert_eq!(r.status, 200, "{query}: {}", r.text());
    // Every listing has the documented shape.
    let _: Vec<UserBlock> = r.body();
    r.json().as_array().expect("an array").clone()
}

async fn post_comment(api: &Api, bearer: Option<&str>, course: i64, body: &Value) -> Reply {
    let mut req = api
        .http
        .post(api.url(&format!("/api/courses/{course}/comments")))
        .json(body);
    if let Some(t) = bearer {
        req = req.bearer_auth(t);
    }
    api.send(req).await
}

async fn put_reply(api: &Api, bearer: Option<&str>, comment: i64, body: &Value) -> Reply {
    let mut req = api
        .http
        .put(api.url(&format!("/api/comments/{comment}/reply")))
        .json(body);
    if let Some(t) = bearer {
        req = req.bearer_auth(t);
    }
    api.send(req).await
}

async fn patch_comment(api: &Api, bearer: Option<&str>, comment: i64, body: &Value) -> Reply {
    let mut req = api
        .http
        .patch(api.url(&format!("/api/comments/{comment}")))
        .json(body);
    if let Some(t) = bearer {
        req = req.bearer_auth(t);
    }
    api.send(req).await
}

async fn delete_comment(api: &Api, bearer: Option<&str>, comment: i64) -> Reply {
    let mut req = api
        .http
        .delete(api.url(&format!("/api/comments/{comment}")));
    if let Some(t) = bearer {
        req = req.bearer_auth(t);
    }
    api.send(req).await
}

/// The aggregates as the listing implies them: each user block once, with
/// its `lastRating` (count, stars 1..5). Reads past every cache.
async fn aggregates_of_listing(api: &Api, course: i64) -> (i64, [i64; 5]) {
    let mut stars = [0i64; 5];
    let mut count = 0;
    let mut cursor = String::new();
    for _ in 0..1000 {
        let r = list(
            api,
            &format!("courseId={course}&size=20&sizeThread=0&cursor={cursor}"),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text());
        for b in r.json().as_array().unwrap() {
            let last = b["lastRating"].as_i64().unwrap();
            stars[(last - 1) as usize] += 1;
            count += 1;
        }
        match r.headers.get("x-next-cursor") {
            Some(c) => cursor = c.to_str().unwrap().to_string(),
            None => return (count, stars),
        }
    }
    panic!("more than 1000 pages");
}

/// The course's rating agrees with its users' last ratings.
async fn assert_rating_is_per_user(api: &Api, course: i64) -> Value {
    let r = rating(api, course).await;
    let (count, stars) = aggregates_of_listing(api, course).await;
    assert_eq!(r["count"].as_i64().unwrap(), count, "{r}");
    let got: Vec<i64> = (0..5).map(|i| r["stars"][i].as_i64().unwrap()).collect();
    assert_eq!(got, stars, "{r}");
    let sum: i64 = (0..5).map(|i| stars[i] * (i as i64 + 1)).sum();
    let avg = if count > 0 {
        sum as f64 / count as f64
    } else {
        0.0
    };
    assert!((r["average"].as_f64().unwrap() - avg).abs() < 0.006, "{r}");
    r
}

fn stars_of(r: &Value) -> [i64; 5] {
    std::array::from_fn(|i| r["stars"][i].as_i64().unwrap())
}

async fn rating(api: &Api, course: i64) -> Value {
    let r = api.get(&format!("/api/courses/{course}/rating")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let typed: RatingOut = r.body();
    assert_eq!(typed.course_id, course);
    assert_eq!(typed.stars.iter().sum::<i64>(), typed.count);
    r.json()
}

async fn event_types(s: &TestServer) -> Vec<String> {
    crate::helpers::log_events(&s.state.store, 0, 100_000)
        .await
        .into_iter()
        .map(|e| e.event_type)
        .collect()
}

fn comment(rating: i64, title: &str, remarks: &str) -> Value {
    json!({ "rating": rating, "title": title, "remarks": remarks })
}

// ------------------------------------------------------------------ snapshot

/// The listing's exact bytes (compact, keys in the write-up's order) against
/// the reviewed `snapshots/api__comments__{name}.snap`, one for both stores.
/// A missing or different snapshot fails; `INSTA_UPDATE=always` rewrites it
/// for review in the diff.
#[track_caller]
fn assert_listing_snapshot(name: &str, body: &[u8]) {
    let text = std::str::from_utf8(body).expect("the listing is UTF-8");
    insta::assert_snapshot!(name, text);
}

async fn listing_matches_the_stored_snapshot(kind: StoreKind) {
    let s = seeded(kind, small(), &[]).await;
    let full = list(
        &s.api,
        "ratingType=Course&courseId=2&skip=0&size=20&skipThread=0&sizeThread=20",
    )
    .await;
    assert_eq!(full.status, 200, "{}", full.text());
    assert_eq!(full.headers["content-type"], "application/json");
    assert_listing_snapshot("course2_full", &full.body);
    let paged = list(
        &s.api,
        "ratingType=Course&courseId=5&skip=1&size=3&skipThread=1&sizeThread=2",
    )
    .await;
    assert_eq!(paged.status, 200, "{}", paged.text());
    assert_listing_snapshot("course5_paged", &paged.body);

    // The shape, key order included (serde_json sorts keys, so read the text).
    let v = full.json();
    let blocks = v.as_array().unwrap();
    assert!(!blocks.is_empty());
    let first = String::from_utf8_lossy(&full.body)
        .split("\"thread\"")
        .next()
        .unwrap()
        .to_string();
    let keys = [
        "displayName",
        "courseId",
        "commentType",
        "lastTitle",
        "lastRating",
        "lastRemarks",
        "lastUpdate",
        "lastCommentId",
    ];
    let at: Vec<usize> = keys
        .iter()
        .map(|k| first.find(&format!("\"{k}\":")).expect(k))
        .collect();
    assert!(
        at.windows(2).all(|w| w[0] < w[1]),
        "keys in the write-up's order: {first}"
    );
    let text = full.text();
    assert!(
        text.starts_with(r#"[{"displayName":"#),
        "compact, in order: {text}"
    );
    assert!(
        text.contains(r#""reply":[]"#),
        "empty replies are []: {text}"
    );
    assert!(
        text.contains(r#","reply":[{"commentId":"#),
        "some replies: {text}"
    );
    for w in blocks.windows(2) {
        assert!(
            w[0]["lastUpdate"].as_str() >= w[1]["lastUpdate"].as_str(),
            "newest block first"
        );
    }
    for b in blocks {
        let thread = b["thread"].as_array().unwrap();
        assert_eq!(
            thread[0]["commentId"], b["lastCommentId"],
            "the thread starts at the last comment"
        );
        for w in thread.windows(2) {
            assert!(
                w[0]["createdDate"].as_str() > w[1]["createdDate"].as_str(),
                "newest comment first"
            );
        }
    }
    assert!(
        blocks
            .iter()
            .any(|b| b["thread"].as_array().unwrap().len() > 1),
        "some thread has several comments"
    );
}

// ------------------------------------------------------------------- paging

async fn paging_edges_and_caps(kind: StoreKind) {
    let s = seeded(kind, wide(), &[]).await;
    let api = &s.api;
    assert_eq!(
        list(api, "courseId=1&skip=1000").await.text(),
        "[]",
        "skip past the end"
    );
    assert_eq!(list(api, "courseId=1&size=0").await.text(), "[]", "size 0");
    let capped = list(api, "courseId=1&size=500").await;
    assert_eq!(
        capped.json().as_array().unwrap().len(),
        20,
        "size over 20 gives 20"
    );
    assert_eq!(capped.body, list(api, "courseId=1&size=20").await.body);
    assert_eq!(
        list_ok(api, "courseId=1").await.len(),
        10,
        "default size 10"
    );
    let t = list(api, "courseId=1&size=5&sizeThread=99").await;
    assert_eq!(
        t.body,
        list(api, "courseId=1&size=5&sizeThread=20").await.body,
        "sizeThread over 20 gives 20"
    );
    let none = list_ok(api, "courseId=1&size=5&sizeThread=0").await;
    assert!(
        none.iter().all(|b| b["thread"] == json!([])),
        "sizeThread 0: empty threads"
    );
    let far = list_ok(api, "courseId=1&size=5&skipThread=50").await;
    assert!(
        far.iter().all(|b| b["thread"] == json!([])),
        "skipThread past the end"
    );

    // A page that is full has a next cursor; the last one does not.
    let all = list_ok(api, "courseId=1&size=20").await.len()
        + list_ok(api, "courseId=1&skip=20&size=20").await.len();
    let last = list(api, &format!("courseId=1&skip={}&size=20", all - 3)).await;
    assert_eq!(last.json().as_array().unwrap().len(), 3);
    assert!(
        last.headers.get("x-next-cursor").is_none(),
        "no cursor after the last page"
    );
    assert!(list(api, "courseId=1&size=5")
        .await
        .headers
        .get("x-next-cursor")
        .is_some());
}

async fn cursor_paging_equals_skip_paging(kind: StoreKind) {
    let s = seeded(kind, wide(), &[]).await;
    let api = &s.api;
    for size in [1, 7, 20] {
        let mut by_skip = Vec::new();
        let mut skip = 0;
        loop {
            let page = list_ok(
                api,
                &format!("courseId=2&skip={skip}&size={size}&sizeThread=3"),
            )
            .await;
            if page.is_empty() {
                break;
            }
            skip += page.len();
            by_skip.extend(page);
        }
        let mut by_cursor = Vec::new();
        let mut cursor = String::new();
        loop {
            let r = list(
                api,
                &format!("courseId=2&size={size}&sizeThread=3&cursor={cursor}"),
            )
            .await;
            assert_eq!(r.status, 200, "{}", r.text());
            by_cursor.extend(r.json().as_array().unwrap().clone());
            match r.headers.get("x-next-cursor") {
                Some(c) => cursor = c.to_str().unwrap().to_string(),
                None => break,
            }
        }
        assert!(
            by_skip.len() >= 25,
            "a course of the wide set has over 20 blocks"
        );
        assert_eq!(by_cursor, by_skip, "size {size}");
    }
    list(api, "courseId=2&cursor=not-a-cursor")
        .await
        .assert_error(422, "invalid_field");
}

async fn user_filter_returns_one_block(kind: StoreKind) {
    let s = seeded(kind, small(), &[]).await;
    let mut course = 0;
    let mut many = Value::Null;
    for c in 1..=6 {
        let all = list_ok(&s.api, &format!("courseId={c}&size=20&sizeThread=20")).await;
        if let Some(b) = all
            .into_iter()
            .find(|b| b["thread"].as_array().unwrap().len() > 1)
        {
            (course, many) = (c, b);
            break;
        }
    }
    assert!(course > 0, "some user commented several times on a course");
    let name = many["displayName"].as_str().unwrap();
    // Find the user id: the user filter must return exactly this block.
    let mut found = false;
    for user in 20..=40 {
        let one = list_ok(
            &s.api,
            &format!("courseId={course}&userId={user}&sizeThread=20"),
        )
        .await;
        assert!(one.len() <= 1);
        if let Some(b) = one.first() {
            if *b == many {
                found = true;
                assert_eq!(b["displayName"], name);
            }
        }
    }
    assert!(found, "the user filter finds {name}'s block");
    assert_eq!(
        list(&s.api, &format!("courseId={course}&userId=999999"))
            .await
            .text(),
        "[]"
    );
}

// -------------------------------------------------------------------- rules

async fn comments_update_snapshots_and_aggregates(kind: StoreKind) {
    let s = seeded(kind, small(), &[]).await;
    let api = &s.api;
    let user = 39;
    let t = token(&s, user, throng::services::comments::USER);
    let before = rating(api, 4).await;
    let had = list_ok(api, &format!("courseId=4&userId={user}&sizeThread=20")).await;
    let thread_before = had
        .first()
        .map(|b| b["thread"].as_array().unwrap().len())
        .unwrap_or(0);

    let first = post_comment(
        api,
        Some(&t),
        4,
        &comment(2, "  Meh  ", "Not for me.\nToo fast."),
    )
    .await;
    assert_eq!(first.status, 201, "{}", first.text());
    let c1: CommentOut = first.body();
    assert_eq!(c1.title, "Meh", "trimmed");
    assert_eq!((c1.rating, c1.course_id, c1.user_id), (Some(2), 4, user));
    assert_eq!(c1.comment_type, "Course");
    assert!(c1.created_date.ends_with('Z'));
    assert!(c1.parent_id.is_none() && c1.edited_date.is_none());
    // A whole number written with a fraction is an integer.
    let mut whole = comment(5, "Second look", "Better on a second run.");
    whole["rating"] = json!(5.0);
    let second = post_comment(api, Some(&t), 4, &whole).await;
    assert_eq!(
        second.status,
        201,
        "many comments per user per course: {}",
        second.text()
    );
    let c2 = second.json();
    assert_eq!(second.body::<CommentOut>().rating, Some(5));

    // Rule 3: the snapshot holds the last comment, the thread all of them.
    let block = &list_ok(api, &format!("courseId=4&userId={user}&sizeThread=20")).await[0];
    assert_eq!(block["lastCommentId"], c2["commentId"]);
    assert_eq!(block["lastTitle"], "Second look");
    assert_eq!(block["lastRating"], 5);
    assert_eq!(block["lastUpdate"], c2["createdDate"]);
    let thread = block["thread"].as_array().unwrap();
    assert_eq!(thread.len(), thread_before + 2);
    assert_eq!(thread[0]["commentId"], c2["commentId"]);
    assert_eq!(thread[1]["commentId"], c1.comment_id);
    assert_eq!(thread[1]["remarks"], "Not for me.\nToo fast.");
    // ... and the newest block is first in the course listing.
    assert_eq!(list_ok(api, "courseId=4&size=1").await[0], *block);

    // Rule 4: aggregates, each user once with their last rating.
    let after = assert_rating_is_per_user(api, 4).await;
    let new_user = (thread_before == 0) as i64;
    assert_eq!(
        after["count"].as_i64().unwrap(),
        before["count"].as_i64().unwrap() + new_user
    );
    assert_eq!(
        after["stars"][4].as_i64().unwrap(),
        before["stars"][4].as_i64().unwrap() + 1
            - (thread_before > 0 && had[0]["lastRating"] == 5) as i64
    );
    api.get("/api/courses/999/rating")
        .await
        .assert_error(404, "course_not_found");

    // A comment of another type is its own thread and its own aggregate.
    let mut svc = comment(3, "Support", "Quick answers.");
    svc["commentType"] = json!("Service");
    assert_eq!(post_comment(api, Some(&t), 4, &svc).await.status, 201);
    assert_eq!(list_ok(api, "ratingType=Service&courseId=4").await.len(), 1);
    assert_eq!(
        api.get("/api/courses/4/rating?ratingType=Service")
            .await
            .json()["count"],
        1
    );

    let events = event_types(&s).await;
    assert_eq!(
        events.iter().filter(|e| *e == "CommentPosted").count(),
        3,
        "{events:?}"
    );
}

/// The id of a comment (not a reply) of `course` with or without a reply.
async fn a_comment(api: &Api, course: i64, with_reply: bool) -> i64 {
    for b in list_ok(api, &format!("courseId={course}&size=20&sizeThread=20")).await {
        for c in b["thread"].as_array().unwrap() {
            if c["reply"].as_array().unwrap().is_empty() != with_reply {
                return c["commentId"].as_i64().unwrap();
            }
        }
    }
    panic!("no comment of course {course} with_reply={with_reply}");
}

async fn replies_once_edit_later_by_the_provider_only(kind: StoreKind) {
    let s = seeded(kind, small(), &[]).await;
    let api = &s.api;
    // 40 users: 2 providers; course 3's provider is 1, course 4's is 2.
    let provider = token(&s, 1, throng::services::comments::PROVIDER);
    let comment_id = a_comment(api, 3, false).await;

    let created = put_reply(
        api,
        Some(&provider),
        comment_id,
        &json!({"remarks": "Thanks for the review!"}),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let typed: CommentOut = created.body();
    assert_eq!(
        (
            typed.parent_id,
            typed.comment_type.as_str(),
            typed.title.as_str()
        ),
        (Some(comment_id), "CourseReply", "")
    );
    assert_eq!(typed.rating, None);
    let r1 = created.json();
    let edited = put_reply(
        api,
        Some(&provider),
        comment_id,
        &json!({"title": "Update", "remarks": "Edited."}),
    )
    .await;
    assert_eq!(edited.status, 200, "{}", edited.text());
    let r2 = edited.json();
    assert_eq!(r2["commentId"], r1["commentId"], "the same reply, edited");
    assert_eq!(r2["createdDate"], r1["createdDate"]);
    assert!(r2["editedDate"].is_string());

    // The listing shows the one edited reply under its comment.
    let blocks = list_ok(api, "courseId=3&size=20&sizeThread=20").await;
    let c = blocks
        .iter()
        .flat_map(|b| b["thread"].as_array().unwrap().clone())
        .find(|c| c["commentId"] == comment_id)
        .unwrap();
    let replies = c["reply"].as_array().unwrap();
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0]["remarks"], "Edited.");
    assert_eq!(replies[0]["title"], "Update");
    assert_eq!(replies[0]["displayName"], r1["displayName"]);

    // No reply to a reply; nobody else replies.
    let reply_id = r1["commentId"].as_i64().unwrap();
    put_reply(api, Some(&provider), reply_id, &json!({"remarks": "x"}))
        .await
        .assert_error(422, "reply_to_reply");
    let other = token(&s, 2, throng::services::comments::PROVIDER);
    put_reply(api, Some(&other), comment_id, &json!({"remarks": "x"}))
        .await
        .assert_error(403, "not_the_provider");
    let user = token(&s, 30, throng::services::comments::USER);
    put_reply(api, Some(&user), comment_id, &json!({"remarks": "x"}))
        .await
        .assert_error(403, "forbidden");
    let admin = token(&s, 1, Role::ADMIN);
    put_reply(api, Some(&admin), comment_id, &json!({"remarks": "x"}))
        .await
        .assert_error(403, "forbidden");
    put_reply(api, Some(&provider), 999_999, &json!({"remarks": "x"}))
        .await
        .assert_error(404, "comment_not_found");

    let events = event_types(&s).await;
    assert_eq!(
        events.iter().filter(|e| *e == "ReplyPosted").count(),
        1,
        "{events:?}"
    );
    assert_eq!(
        events.iter().filter(|e| *e == "ReplyEdited").count(),
        1,
        "{events:?}"
    );
    let payloads = s.state.store.events_after(0, 100_000).await.unwrap();
    for e in payloads
        .iter()
        .filter(|e| e.event_type.starts_with("Reply"))
    {
        let text = String::from_utf8_lossy(&e.payload);
        assert!(
            !text.contains("Edited.") && !text.contains("Thanks for"),
            "no free text in events: {text}"
        );
    }
}

/// Forged (unsigned) and expired user tokens for the server's secret.
fn bad_tokens(s: &TestServer) -> [(String, &'static str); 3] {
    use base64::Engine;
    let b64 = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let now = (throng::platform::clock::now_ms() / 1000) as u64;
    let unsigned = format!(
        "{}.{}.",
        b64(json!({"alg": "none", "typ": "JWT"})),
        b64(json!({"sub": "30", "role": "user", "iat": now, "exp": now + 600}))
    );
    let other_secret = throng::platform::auth::TokenKeys::new(b"not the server's secret, 32 bytes")
        .issue("30", throng::services::comments::USER, 600);
    let secret = Secrets::load_or_create(&s.data_dir).unwrap().token_secret;
    let expired = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &Claims {
            sub: "30".into(),
            role: throng::services::comments::USER.to_string(),
            iat: now - 7200,
            exp: now - 3600,
        },
        &jsonwebtoken::EncodingKey::from_secret(&secret),
    )
    .unwrap();
    [
        (unsigned, "invalid_token"),
        (other_secret, "invalid_token"),
        (expired, "token_expired"),
    ]
}

async fn bad_comments_get_the_envelope_and_write_nothing(kind: StoreKind) {
    let s = seeded(kind, small(), &[]).await;
    let api = &s.api;
    let t = token(&s, 30, throng::services::comments::USER);
    let before = (
        rating(api, 2).await,
        list(api, "courseId=2&size=20&sizeThread=20").await.body,
        event_types(&s).await,
    );

    for r in [0, 6, -1] {
        post_comment(api, Some(&t), 2, &comment(r, "t", "r"))
            .await
            .assert_error(422, "invalid_field");
    }
    for (title, remarks) in [
        ("", "r"),
        ("   ", "r"),
        ("t", ""),
        ("t", " \n "),
        (&"x".repeat(201) as &str, "r"),
        ("t", &"y".repeat(4001) as &str),
        ("a\u{7}b", "r"),
        ("line\nbreak", "r"),
    ] {
        let msg = post_comment(api, Some(&t), 2, &comment(3, title, remarks))
            .await
            .assert_error(422, "invalid_field");
        assert!(msg.contains("title") || msg.contains("remarks"), "{msg}");
    }
    // Invisible direction controls and Unicode line breaks, named by field.
    for (title, remarks, field) in [
        ("gpj.\u{202E}exe", "r", "title"),
        ("a\u{2066}b", "r", "title"),
        ("a\u{2028}b", "r", "title"),
        ("t", "r\u{202D}x", "remarks"),
        ("t", "para\u{2029}graph", "remarks"),
    ] {
        let msg = post_comment(api, Some(&t), 2, &comment(3, title, remarks))
            .await
            .assert_error(422, "invalid_field");
        assert!(msg.starts_with(field), "{msg}");
    }
    let provider = token(&s, 1, throng::services::comments::PROVIDER);
    let any_comment = a_comment(api, 2, false).await;
    let msg = put_reply(
        api,
        Some(&provider),
        any_comment,
        &json!({"title": "ok", "remarks": "a\u{202E}b"}),
    )
    .await
    .assert_error(422, "invalid_field");
    assert!(msg.starts_with("remarks"), "{msg}");
    let mut typed = comment(3, "t", "r");
    typed["commentType"] = json!("Comment");
    post_comment(api, Some(&t), 2, &typed)
        .await
        .assert_error(422, "invalid_field");
    post_comment(api, Some(&t), 2, &json!({"rating": 3, "title": "t"}))
        .await
        .assert_error(422, "invalid_field");
    post_comment(
        api,
        Some(&t),
        2,
        &json!({"rating": "5", "title": "t", "remarks": "r"}),
    )
    .await
    .assert_error(422, "invalid_field");
    post_comment(
        api,
        Some(&t),
        2,
        &json!({"rating": 5, "title": "t", "remarks": "r", "extra": 1}),
    )
    .await
    .assert_error(422, "invalid_field");
    api.send(
        api.http
            .post(api.url("/api/courses/2/comments"))
            .bearer_auth(&t)
            .header("content-type", "application/json")
            .body("{not json"),
    )
    .await
    .assert_error(400, "malformed_json");
    post_comment(api, Some(&t), 999, &comment(3, "t", "r"))
        .await
        .assert_error(404, "course_not_found");
    post_comment(api, Some(&t), 0, &comment(3, "t", "r"))
        .await
        .assert_error(404, "course_not_found");
    api.send(
        api.http
            .post(api.url("/api/courses/abc/comments"))
            .bearer_auth(&t)
            .json(&comment(3, "t", "r")),
    )
    .await
    .assert_error(400, "invalid_path");

    post_comment(api, None, 2, &comment(3, "t", "r"))
        .await
        .assert_error(401, "missing_token");
    for (bad, code) in bad_tokens(&s) {
        post_comment(api, Some(&bad), 2, &comment(3, "t", "r"))
            .await
            .assert_error(401, code);
    }
    let provider = token(&s, 1, throng::services::comments::PROVIDER);
    post_comment(api, Some(&provider), 2, &comment(3, "t", "r"))
        .await
        .assert_error(403, "forbidden");
    let ghost = token(&s, 777_777, throng::services::comments::USER);
    post_comment(api, Some(&ghost), 2, &comment(3, "t", "r"))
        .await
        .assert_error(403, "unknown_user");
    let word = s
        .state
        .keys
        .issue("alice", throng::services::comments::USER, 600);
    post_comment(api, Some(&word), 2, &comment(3, "t", "r"))
        .await
        .assert_error(403, "forbidden");

    let after = (
        rating(api, 2).await,
        list(api, "courseId=2&size=20&sizeThread=20").await.body,
        event_types(&s).await,
    );
    assert_eq!(after, before, "nothing was written");
}

async fn bad_replies_get_the_envelope_and_write_nothing(kind: StoreKind) {
    let s = seeded(kind, small(), &[]).await;
    let api = &s.api;
    let provider = token(&s, 1, throng::services::comments::PROVIDER);
    let comment_id = a_comment(api, 3, false).await;
    let before = (
        list(api, "courseId=3&size=20&sizeThread=20").await.body,
        event_types(&s).await,
    );
    for body in [
        json!({"remarks": ""}),
        json!({"remarks": "x".repeat(4001)}),
        json!({"title": "t".repeat(201), "remarks": "x"}),
        json!({"title": "t"}),
        json!({"remarks": "x", "rating": 5}),
    ] {
        put_reply(api, Some(&provider), comment_id, &body)
            .await
            .assert_error(422, "invalid_field");
    }
    put_reply(api, None, comment_id, &json!({"remarks": "x"}))
        .await
        .assert_error(401, "missing_token");
    for (bad, code) in bad_tokens(&s) {
        put_reply(api, Some(&bad), comment_id, &json!({"remarks": "x"}))
            .await
            .assert_error(401, code);
    }
    put_reply(api, Some(&provider), 0, &json!({"remarks": "x"}))
        .await
        .assert_error(404, "comment_not_found");
    let after = (
        list(api, "courseId=3&size=20&sizeThread=20").await.body,
        event_types(&s).await,
    );
    assert_eq!(after, before, "nothing was written");
}

async fn bad_listing_queries(kind: StoreKind) {
    let s = seeded(kind, small(), &[]).await;
    let api = &s.api;
    list(api, "courseId=999")
        .await
        .assert_error(404, "course_not_found");
    list(api, "courseId=0")
        .await
        .assert_error(404, "course_not_found");
    list(api, "skip=0").await.assert_error(400, "invalid_query");
    list(api, "courseId=abc")
        .await
        .assert_error(400, "invalid_query");
    list(api, "courseId=1&unknown=1")
        .await
        .assert_error(400, "invalid_query");
    list(api, "courseId=1&ratingType=Whatever")
        .await
        .assert_error(422, "invalid_field");
    list(api, "courseId=1&skip=-1")
        .await
        .assert_error(422, "invalid_field");
    list(api, "courseId=1&size=-1")
        .await
        .assert_error(422, "invalid_field");
    list(api, "courseId=1&skipThread=-1")
        .await
        .assert_error(422, "invalid_field");
    list(api, "courseId=1&skip=100001")
        .await
        .assert_error(422, "invalid_field");
    list(api, "courseId=1&userId=0")
        .await
        .assert_error(422, "invalid_field");
    list(api, "courseId=1&cursor=djI6MToy")
        .await
        .assert_error(422, "invalid_field");
    // A course without comments is an empty array, not an error.
    let t = token(&s, 30, throng::services::comments::USER);
    assert_eq!(
        list(api, "courseId=1&ratingType=Service").await.text(),
        "[]"
    );
    assert_eq!(
        post_comment(api, Some(&t), 1, &comment(4, "ok", "ok"))
            .await
            .status,
        201
    );
}

// -------------------------------------------------------------------- cache

async fn a_write_is_visible_to_the_next_read_with_the_cache(kind: StoreKind) {
    let s = seeded(kind, small(), &[]).await;
    let api = &s.api;
    let t = token(&s, 25, throng::services::comments::USER);
    let provider = token(&s, 2, throng::services::comments::PROVIDER);
    for i in 0..5 {
        // Fill the cache, write, read again at once.
        let q = "courseId=4&size=5&sizeThread=5";
        let cached = list(api, q).await;
        assert_eq!(
            list(api, q).await.body,
            cached.body,
            "a cached read is the same"
        );
        let posted = post_comment(
            api,
            Some(&t),
            4,
            &comment(4, &format!("Round {i}"), "Again."),
        )
        .await;
        assert_eq!(posted.status, 201, "{}", posted.text());
        let id = posted.json()["commentId"].clone();
        let first = &list_ok(api, q).await[0];
        assert_eq!(
            first["lastCommentId"], id,
            "the new comment is visible at once"
        );
        // A reply and its edit are visible at once too.
        let text = format!("Reply {i}");
        let r = put_reply(
            api,
            Some(&provider),
            id.as_i64().unwrap(),
            &json!({ "remarks": text }),
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.text());
        assert_eq!(
            list_ok(api, q).await[0]["thread"][0]["reply"][0]["remarks"],
            text
        );
        let r = put_reply(
            api,
            Some(&provider),
            id.as_i64().unwrap(),
            &json!({ "remarks": "edited" }),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(
            list_ok(api, q).await[0]["thread"][0]["reply"][0]["remarks"],
            "edited"
        );
    }
}

async fn cache_off_gives_the_same_bytes(kind: StoreKind) {
    let s = seeded(kind, small(), &["--comments-cache", "off"]).await;
    assert!(!s
        .state
        .part::<CommentsState>()
        .expect("comments started")
        .cache
        .enabled());
    let q = "ratingType=Course&courseId=2&skip=0&size=20&skipThread=0&sizeThread=20";
    let a = list(&s.api, q).await;
    assert_listing_snapshot("course2_full", &a.body);
    assert_eq!(
        list(&s.api, q).await.headers["etag"],
        a.headers["etag"],
        "the ETag depends on the bytes only"
    );
    let t = token(&s, 25, throng::services::comments::USER);
    let posted = post_comment(&s.api, Some(&t), 2, &comment(1, "Off", "Cache off.")).await;
    assert_eq!(
        list_ok(&s.api, q).await[0]["lastCommentId"],
        posted.json()["commentId"]
    );
    assert_eq!(
        s.state
            .part::<CommentsState>()
            .expect("comments started")
            .cache
            .len(),
        0
    );
}

/// `--comments-json functions` (SQLite: json_object and json_group_array
/// instead of the default printf, json_quote and group_concat) answers the
/// same bytes. (PostgreSQL always concatenates; the flag changes nothing
/// there, and the test checks that too.)
async fn json_functions_give_the_same_bytes(kind: StoreKind) {
    let flags = ["--comments-cache", "off", "--comments-json", "functions"];
    let s = seeded(kind, small(), &flags).await;
    let q = "ratingType=Course&courseId=2&skip=0&size=20&skipThread=0&sizeThread=20";
    assert_listing_snapshot("course2_full", &list(&s.api, q).await.body);
    let q = "ratingType=Course&courseId=5&skip=1&size=3&skipThread=1&sizeThread=2";
    assert_listing_snapshot("course5_paged", &list(&s.api, q).await.body);
    let t = token(&s, 25, throng::services::comments::USER);
    let posted = post_comment(
        &s.api,
        Some(&t),
        2,
        &comment(2, "Quote \" and \\", "Tab\there\nnewline"),
    )
    .await;
    assert_eq!(posted.status, 201);
    let block = &list_ok(&s.api, "courseId=2&size=1").await[0];
    assert_eq!(block["thread"][0]["title"], "Quote \" and \\");
    assert_eq!(block["thread"][0]["remarks"], "Tab\there\nnewline");
    assert_eq!(list(&s.api, "courseId=2&size=0").await.text(), "[]");
    assert_eq!(
        list(&s.api, "courseId=2&sizeThread=0&size=1").await.json()[0]["thread"],
        json!([])
    );
}

async fn etag_and_304(kind: StoreKind) {
    let s = seeded(kind, small(), &[]).await;
    let api = &s.api;
    let q = format!("{LIST}?courseId=5&size=4");
    let first = api.get(&q).await;
    let etag = first.headers["etag"].to_str().unwrap().to_string();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
    for tag in [
        etag.clone(),
        format!("W/{etag}"),
        format!("\"other\", {etag}"),
        "*".to_string(),
    ] {
        let r = api
            .send(
                api.http
                    .get(api.url(&q))
                    .header("if-none-match", tag.as_str()),
            )
            .await;
        assert_eq!(r.status, 304, "If-None-Match: {tag}");
        assert!(r.body.is_empty());
        assert_eq!(r.headers["etag"], etag.as_str());
    }
    let other = api
        .send(
            api.http
                .get(api.url(&q))
                .header("if-none-match", "\"other\""),
        )
        .await;
    assert_eq!(other.status, 200);
    assert_eq!(other.body, first.body);

    let t = token(&s, 33, throng::services::comments::USER);
    assert_eq!(
        post_comment(api, Some(&t), 5, &comment(5, "New", "New."))
            .await
            .status,
        201
    );
    let after = api
        .send(
            api.http
                .get(api.url(&q))
                .header("if-none-match", etag.as_str()),
        )
        .await;
    assert_eq!(after.status, 200, "a write changes the page and its ETag");
    assert_ne!(after.headers["etag"], etag.as_str());
}

async fn write_up_paths_answer_the_same(kind: StoreKind) {
    let s = seeded(kind, small(), &[]).await;
    let q = "ratingType=Course&courseId=6&skip=1&size=4&skipThread=0&sizeThread=3";
    let a = s.api.get(&format!("/api/comments?{q}")).await;
    assert_eq!(a.status, 200);
    for path in [
        "/api/comments/method/jsonfromdapper",
        "/api/comments/method/jsonfromlinq",
    ] {
        let b = s.api.get(&format!("{path}?{q}")).await;
        assert_eq!((b.status, &b.body), (200, &a.body), "{path}");
    }
    // CORS for the embedded widget.
    assert_eq!(a.headers["access-control-allow-origin"], "*");
    let pre = s
        .api
        .send(s.api.http.request(
            reqwest::Method::OPTIONS,
            s.api.url("/api/courses/6/comments"),
        ))
        .await;
    assert_eq!(pre.status, 204);
    assert!(pre.headers["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .contains("authorization"));
    // The widget and its demo page are served.
    let js = s.api.get("/widget/comments.js").await;
    assert_eq!(js.status, 200);
    assert!(js.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/javascript"));
    assert_eq!(s.api.get("/comments/").await.status, 200);
    // The demo token endpoint exists only with --demo.
    s.api
        .get("/api/comments/demo-token")
        .await
        .assert_error(404, "route_not_found");
}

// ------------------------------------------------------------- concurrency

async fn concurrent_writes_keep_one_reply_and_exact_aggregates(kind: StoreKind) {
    let s = seeded(kind, small(), &[]).await;
    let api = &s.api;
    // Ten replies to one comment at once: one creates, nine edit.
    let comment_id = a_comment(api, 3, false).await;
    let provider = token(&s, 1, throng::services::comments::PROVIDER);
    let tasks: Vec<_> = (0..10)
        .map(|i| {
            let (api, t) = (api.clone(), provider.clone());
            tokio::spawn(async move {
                put_reply(
                    &api,
                    Some(&t),
                    comment_id,
                    &json!({ "remarks": format!("r{i}") }),
                )
                .await
            })
        })
        .collect();
    let mut codes = Vec::new();
    for t in tasks {
        codes.push(t.await.unwrap().status);
    }
    codes.sort();
    assert_eq!(
        codes,
        [200, 200, 200, 200, 200, 200, 200, 200, 200, 201],
        "one created, the rest edited"
    );
    let blocks = list_ok(api, "courseId=3&size=20&sizeThread=20").await;
    let c = blocks
        .iter()
        .flat_map(|b| b["thread"].as_array().unwrap().clone())
        .find(|c| c["commentId"] == comment_id);
    assert_eq!(c.unwrap()["reply"].as_array().unwrap().len(), 1);

    // Forty comments at once from twenty users: every one counted.
    let before = rating(api, 6).await;
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let api = api.clone();
            let t = token(&s, 20 + i % 20, throng::services::comments::USER);
            tokio::spawn(async move {
                post_comment(&api, Some(&t), 6, &comment(1 + i % 5, "Crowd", "At once."))
                    .await
                    .status
            })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap(), 201);
    }
    // Twenty users, each counted once (with their last rating), whether
    // they had a rating here before or not.
    let after = assert_rating_is_per_user(api, 6).await;
    assert!(after["count"].as_i64().unwrap() >= 20, "{before} {after}");
    let blocks = list_ok(api, "courseId=6&size=20&sizeThread=20").await;
    let crowd: usize = blocks
        .iter()
        .map(|b| {
            b["thread"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["title"] == "Crowd")
                .count()
        })
        .sum();
    assert_eq!(crowd, 40, "every comment is in its user's thread");
    for b in &blocks {
        if b["thread"][0]["title"] == "Crowd" {
            assert_eq!(
                b["lastCommentId"], b["thread"][0]["commentId"],
                "the snapshot holds the last one"
            );
        }
    }
}

// ---------------------------------------------------------------- Artillery

/// The write-up's Artillery script, unchanged, through `throng load run`
/// against `throng serve`, with a generated testData.csv: zero errors.
/// Takes the script's 90 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_up_artillery_script_runs_with_zero_errors() {
    let dir = tempfile::TempDir::new().unwrap();
    let data = dir.path().join("data");
    let script_dir = dir.path().join("artillery");
    std::fs::create_dir_all(&script_dir).unwrap();
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../throng-services/src/services/comments/artillery");
    for f in ["comments.yml", "proc-functions.js"] {
        std::fs::copy(src.join(f), script_dir.join(f)).unwrap();
    }
    let csv = script_dir.join("testData.csv");
    let seeded = std::process::Command::new(throng_bin())
        .args([
            "seed",
            "--data-dir",
            data.to_str().unwrap(),
            "comments",
            "--users",
            "20000",
            "--courses",
            "500",
        ])
        .args([
            "--comments-per-course",
            "20",
            "--testdata-csv",
            csv.to_str().unwrap(),
            "--testdata-rows",
            "500",
        ])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        seeded.status.success(),
        "{}",
        String::from_utf8_lossy(&seeded.stderr)
    );
    let server = ProcessServer::start(&data, None, &[]).await;
    let report = dir.path().join("report.json");
    let out = tokio::process::Command::new(throng_bin())
        .current_dir(&script_dir)
        .args([
            "load",
            "run",
            "comments.yml",
            "-e",
            "local",
            "-t",
            &server.api.base,
            "-o",
        ])
        .arg(&report)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "throng load failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let counters = &v["aggregate"]["counters"];
    assert_eq!(
        counters["http.codes.200"], 70,
        "10 + 60 arrivals, every one 200: {counters}"
    );
    assert_eq!(counters["vusers.failed"], 0, "{counters}");
    let errors: Vec<_> = counters
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.starts_with("errors."))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}

/// Two nodes on one PostgreSQL: a write on one is seen by the other's next
/// read that says `Cache-Control: no-cache` (the writing client's next
/// read, whichever node serves it), and by every read there within the
/// cache's bound (`cache::FRESH_BOUND`, 1 s: the invalidation channel, or
/// the database while the channel is not known fresh).
async fn two_nodes_see_each_others_writes_within_the_bound(_kind: StoreKind) {
    use crate::helpers::{store_flags, PgDb};
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
    let secrets = Secrets::load_or_create(dir.path()).unwrap();
    let user = throng::platform::auth::TokenKeys::new(&secrets.token_secret).issue(
        "25",
        throng::services::comments::USER,
        600,
    );
    let q = "courseId=3&size=5&sizeThread=5";
    let bound = throng::services::comments::cache::FRESH_BOUND;
    let mut slowest = std::time::Duration::ZERO;
    for i in 0..6 {
        let (writer, reader) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        // The reader's page is cached (read twice, same bytes, and the
        // second read is a hit: the channel is fresh, so pages are kept).
        let before = list(&reader.api, q).await;
        assert_eq!(before.status, 200, "{}", before.text());
        // (A node's channel is known fresh from its first heartbeat on,
        // within a few hundred milliseconds of its start.)
        let mut hit = false;
        for _ in 0..60 {
            let hits = cache_hits(&reader.api).await;
            assert_eq!(list(&reader.api, q).await.body, before.body);
            if cache_hits(&reader.api).await > hits {
                hit = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert!(hit, "round {i}: the reader's page cache never hit");
        let posted = post_comment(
            &writer.api,
            Some(&user),
            3,
            &comment(5, &format!("Node round {i}"), "Seen?"),
        )
        .await;
        assert_eq!(posted.status, 201, "{}", posted.text());
        let id = posted.json()["commentId"].clone();
        let written = std::time::Instant::now();
        // The writing client's next read, on the other node.
        let fresh = reader
            .api
            .send(
                reader
                    .api
                    .http
                    .get(reader.api.url(&format!("{LIST}?{q}")))
                    .header("cache-control", "no-cache"),
            )
            .await;
        assert_eq!(
            fresh.json()[0]["lastCommentId"],
            id,
            "no-cache sees the write at once"
        );
        // Any read on the other node, within the bound.
        loop {
            let page = list_ok(&reader.api, q).await;
            if page[0]["lastCommentId"] == id {
                break;
            }
            assert!(
                written.elapsed() <= bound + std::time::Duration::from_millis(500),
                "round {i}: the other node still served the old page after {:?}",
                written.elapsed()
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        slowest = slowest.max(written.elapsed());
    }
    println!("the other node saw each write within {slowest:?} (bound {bound:?})");
}

/// `throng_cache_reads_total{cache="comments_pages",outcome="hit"}`.
async fn cache_hits(api: &Api) -> u64 {
    let text = api.get("/metrics").await.text();
    text.lines()
        .find(|l| {
            l.starts_with("throng_cache_reads_total{")
                && l.contains("cache=\"comments_pages\"")
                && l.contains("outcome=\"hit\"")
        })
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// One row of text values per row of `sql`, from either store.
async fn store_rows(store: &throng::store::Store, sql: &'static str) -> Vec<String> {
    crate::helpers::query(store, sql, vec![], |r| r.text(0)).await
}

/// `throng seed comments --force` on a store holding comments: everything
/// is replaced, and the tables keep every index the migrations made (the
/// PostgreSQL loader drops them for the load and builds them again).
async fn reseeding_replaces_the_data_and_keeps_every_index(kind: StoreKind) {
    let s = seeded(kind, small(), &[]).await;
    let store = &s.state.store;
    let indexes_sql = match kind {
        StoreKind::Sqlite => {
            "SELECT name || ': ' || COALESCE(sql, 'automatic') FROM sqlite_master
             WHERE type = 'index' AND tbl_name LIKE 'comments%' ORDER BY name"
        }
        StoreKind::Postgres => {
            "SELECT indexname || ': ' || indexdef FROM pg_indexes
             WHERE tablename LIKE 'comments%' ORDER BY indexname"
        }
    };
    let counts_sql = "SELECT (SELECT COUNT(*) FROM comments_users) || ' ' ||
        (SELECT COUNT(*) FROM comments_courses) || ' ' || (SELECT COUNT(*) FROM comments) || ' ' ||
        (SELECT COUNT(*) FROM comments_snapshots) || ' ' || (SELECT COUNT(*) FROM comments_ratings)";
    let indexes = store_rows(store, indexes_sql).await;
    assert!(indexes.len() >= 3, "the migrations' indexes: {indexes:?}");
    let before = store_rows(store, counts_sql).await;

    // Without --force the seed refuses and changes nothing.
    let refused = seed::seed(store, &wide(), false).await.unwrap_err();
    assert!(refused.to_string().contains("--force"), "{refused}");
    assert_eq!(store_rows(store, counts_sql).await, before);

    let mut again = wide();
    again.force = true;
    let report = seed::seed(store, &again, false)
        .await
        .expect("seed --force");
    let expected = format!(
        "2000 3 {} {} 3",
        report.comments + report.replies,
        report.snapshots
    );
    assert_eq!(store_rows(store, counts_sql).await, vec![expected]);
    assert_eq!(
        store_rows(store, indexes_sql).await,
        indexes,
        "the same indexes after the reseed"
    );
    // New comments still get ids after the seeded ones (the id sequence is
    // moved past them on PostgreSQL).
    let max_sql = "SELECT CAST(MAX(id) AS TEXT) FROM comments";
    let max_seeded: i64 = store_rows(store, max_sql).await[0].parse().unwrap();
    let t = token(&s, 1999, throng::services::comments::USER);
    let posted = post_comment(&s.api, Some(&t), 2, &comment(4, "After a reseed", "ok")).await;
    assert_eq!(posted.status, 201, "{}", posted.text());
    let max_now: i64 = store_rows(store, max_sql).await[0].parse().unwrap();
    assert!(max_now > max_seeded, "{max_now} after {max_seeded}");
}

// ------------------------------------------------ one rating per user, edits

async fn one_rating_per_user_the_last_one_counts(kind: StoreKind) {
    let s = seeded(kind, small(), &[]).await;
    let api = &s.api;
    // Users 3..=19 have no comment in the seed.
    let (u10, u11) = (
        token(&s, 10, throng::services::comments::USER),
        token(&s, 11, throng::services::comments::USER),
    );
    let before = assert_rating_is_per_user(api, 5).await;
    let (n0, st0) = (before["count"].as_i64().unwrap(), stars_of(&before));

    assert_eq!(
        post_comment(api, Some(&u10), 5, &comment(2, "Slow", "Too slow."))
            .await
            .status,
        201
    );
    let r = rating(api, 5).await;
    assert_eq!(r["count"].as_i64().unwrap(), n0 + 1);
    assert_eq!(r["stars"][1].as_i64().unwrap(), st0[1] + 1);

    // The same user again: still one rating, now their last (5 stars).
    assert_eq!(
        post_comment(
            api,
            Some(&u10),
            5,
            &comment(5, "Second look", "Much better.")
        )
        .await
        .status,
        201
    );
    let r = assert_rating_is_per_user(api, 5).await;
    assert_eq!(
        r["count"].as_i64().unwrap(),
        n0 + 1,
        "one user, one rating: {r}"
    );
    assert_eq!(
        r["stars"][1].as_i64().unwrap(),
        st0[1],
        "the earlier 2 stars no longer count"
    );
    assert_eq!(r["stars"][4].as_i64().unwrap(), st0[4] + 1);
    let sum0: i64 = (0..5).map(|i| st0[i] * (i as i64 + 1)).sum();
    let want = ((sum0 + 5) as f64 / (n0 + 1) as f64 * 100.0).round() / 100.0;
    assert_eq!(
        r["average"].as_f64().unwrap(),
        want,
        "the average uses the last rating"
    );

    // Another user counts too.
    assert_eq!(
        post_comment(api, Some(&u11), 5, &comment(3, "Fine", "Fine."))
            .await
            .status,
        201
    );
    let r = assert_rating_is_per_user(api, 5).await;
    assert_eq!(r["count"].as_i64().unwrap(), n0 + 2);
    // Other courses are untouched by these.
    assert_rating_is_per_user(api, 4).await;
    // The seed counts each user once too (users repeat within a course).
    for course in 1..=6 {
        assert_rating_is_per_user(api, course).await;
    }
}

async fn edit_and_delete_follow_the_users_last_rating(kind: StoreKind) {
    let s = seeded(kind, small(), &[]).await;
    let api = &s.api;
    let u = token(&s, 12, throng::services::comments::USER);
    let before = rating(api, 3).await;
    let (n0, st0) = (before["count"].as_i64().unwrap(), stars_of(&before));
    let older = post_comment(api, Some(&u), 3, &comment(2, "First", "First try."))
        .await
        .json();
    let newer = post_comment(api, Some(&u), 3, &comment(4, "Later", "Later."))
        .await
        .json();
    let (older, newer) = (
        older["commentId"].as_i64().unwrap(),
        newer["commentId"].as_i64().unwrap(),
    );

    // Editing the last review changes the user's rating.
    let e = patch_comment(
        api,
        Some(&u),
        newer,
        &json!({"rating": 1, "title": " Changed my mind "}),
    )
    .await;
    assert_eq!(e.status, 200, "{}", e.text());
    let e = e.json();
    assert_eq!(
        (e["rating"].as_i64(), e["title"].as_str()),
        (Some(1), Some("Changed my mind"))
    );
    assert_eq!(e["remarks"], "Later.", "fields not given stay");
    assert!(e["editedDate"].as_str().unwrap().ends_with('Z'));
    let r = assert_rating_is_per_user(api, 3).await;
    assert_eq!(r["count"].as_i64().unwrap(), n0 + 1);
    assert_eq!(r["stars"][0].as_i64().unwrap(), st0[0] + 1);
    assert_eq!(r["stars"][3].as_i64().unwrap(), st0[3]);
    let block = &list_ok(api, "courseId=3&userId=12&sizeThread=20").await[0];
    assert_eq!(block["lastTitle"], "Changed my mind");
    assert_eq!(block["lastRating"], 1);
    assert_eq!(
        block["thread"][0]["rating"], 1,
        "the listing shows the edit at once"
    );

    // Editing an earlier review leaves the user's rating as it is.
    assert_eq!(
        patch_comment(api, Some(&u), older, &json!({"rating": 5}))
            .await
            .status,
        200
    );
    let r2 = assert_rating_is_per_user(api, 3).await;
    assert_eq!(stars_of(&r2), stars_of(&r));

    // Deleting the last review: the earlier one's rating (5) counts.
    assert_eq!(delete_comment(api, Some(&u), newer).await.status, 204);
    let r = assert_rating_is_per_user(api, 3).await;
    assert_eq!(r["count"].as_i64().unwrap(), n0 + 1);
    assert_eq!(r["stars"][4].as_i64().unwrap(), st0[4] + 1);
    assert_eq!(r["stars"][0].as_i64().unwrap(), st0[0]);
    let block = &list_ok(api, "courseId=3&userId=12&sizeThread=20").await[0];
    assert_eq!(block["lastCommentId"], older);
    assert_eq!(block["thread"].as_array().unwrap().len(), 1);

    // Deleting the only one left removes the user's rating and block.
    assert_eq!(delete_comment(api, Some(&u), older).await.status, 204);
    let r = assert_rating_is_per_user(api, 3).await;
    assert_eq!(r["count"].as_i64().unwrap(), n0);
    assert_eq!(stars_of(&r), st0);
    assert!(list_ok(api, "courseId=3&userId=12").await.is_empty());
    delete_comment(api, Some(&u), older)
        .await
        .assert_error(404, "comment_not_found");
    patch_comment(api, Some(&u), older, &json!({"rating": 3}))
        .await
        .assert_error(404, "comment_not_found");

    let events = event_types(&s).await;
    assert_eq!(
        events.iter().filter(|e| *e == "CommentEdited").count(),
        2,
        "{events:?}"
    );
    assert_eq!(
        events.iter().filter(|e| *e == "CommentDeleted").count(),
        2,
        "{events:?}"
    );
}

async fn editing_or_deleting_someone_elses_comment_is_refused(kind: StoreKind) {
    let s = seeded(kind, small(), &[]).await;
    let api = &s.api;
    let (owner, other) = (
        token(&s, 13, throng::services::comments::USER),
        token(&s, 14, throng::services::comments::USER),
    );
    let id = post_comment(api, Some(&owner), 2, &comment(4, "Mine", "Mine."))
        .await
        .json()["commentId"]
        .as_i64()
        .unwrap();
    let state = |api: Api| async move {
        (
            rating(&api, 2).await,
            list(&api, "courseId=2&size=20&sizeThread=20").await.body,
        )
    };
    let before = state(api.clone()).await;
    let events_before = event_types(&s).await.len();

    let msg = patch_comment(api, Some(&other), id, &json!({"rating": 1}))
        .await
        .assert_error(403, "not_the_author");
    assert!(msg.contains("only its author"), "{msg}");
    delete_comment(api, Some(&other), id)
        .await
        .assert_error(403, "not_the_author");
    // A provider (even the course's) cannot delete a user's review.
    let provider = token(&s, 2, throng::services::comments::PROVIDER);
    delete_comment(api, Some(&provider), id)
        .await
        .assert_error(403, "not_the_author");
    patch_comment(api, Some(&provider), id, &json!({"rating": 1}))
        .await
        .assert_error(403, "forbidden");
    // Nor can another provider delete a provider's reply, or a user.
    let replied = a_comment(api, 2, true).await;
    let reply_id = list_ok(api, "courseId=2&size=20&sizeThread=20")
        .await
        .iter()
        .flat_map(|b| b["thread"].as_array().unwrap().clone())
        .find(|c| c["commentId"] == replied)
        .unwrap()["reply"][0]["commentId"]
        .as_i64()
        .unwrap();
    let msg = delete_comment(
        api,
        Some(&token(&s, 1, throng::services::comments::PROVIDER)),
        reply_id,
    )
    .await
    .assert_error(403, "not_the_author");
    assert!(msg.contains("provider who wrote it"), "{msg}");
    delete_comment(api, Some(&other), reply_id)
        .await
        .assert_error(403, "not_the_author");
    let msg = patch_comment(api, Some(&other), reply_id, &json!({"remarks": "x"}))
        .await
        .assert_error(422, "edit_reply");
    assert!(msg.contains("PUT"), "{msg}");
    // Tokens: none, forged, expired; an admin token is not a user's.
    patch_comment(api, None, id, &json!({"rating": 1}))
        .await
        .assert_error(401, "missing_token");
    delete_comment(api, None, id)
        .await
        .assert_error(401, "missing_token");
    for (bad, code) in bad_tokens(&s) {
        delete_comment(api, Some(&bad), id)
            .await
            .assert_error(401, code);
        patch_comment(api, Some(&bad), id, &json!({"rating": 1}))
            .await
            .assert_error(401, code);
    }
    delete_comment(api, Some(&token(&s, 13, Role::ADMIN)), id)
        .await
        .assert_error(403, "forbidden");

    assert_eq!(state(api.clone()).await, before, "nothing changed");
    assert_eq!(event_types(&s).await.len(), events_before, "no event");
}

async fn bad_edits_get_the_envelope_and_write_nothing(kind: StoreKind) {
    let s = seeded(kind, small(), &[]).await;
    let api = &s.api;
    let u = token(&s, 15, throng::services::comments::USER);
    let id = post_comment(api, Some(&u), 2, &comment(4, "Mine", "Mine."))
        .await
        .json()["commentId"]
        .as_i64()
        .unwrap();
    let before = (
        rating(api, 2).await,
        list(api, "courseId=2&size=20&sizeThread=20").await.body,
    );
    let msg = patch_comment(api, Some(&u), id, &json!({}))
        .await
        .assert_error(422, "invalid_field");
    assert!(msg.contains("at least one of rating"), "{msg}");
    for r in [0, 6, -1] {
        let msg = patch_comment(api, Some(&u), id, &json!({"rating": r}))
            .await
            .assert_error(422, "invalid_field");
        assert!(msg.starts_with("rating: an integer from 1 to 5"), "{msg}");
    }
    for (body, field) in [
        (json!({"title": ""}), "title"),
        (json!({"title": "x".repeat(201)}), "title"),
        (json!({"title": "a\nb"}), "title"),
        (json!({"remarks": "  "}), "remarks"),
        (json!({"remarks": "y".repeat(4001)}), "remarks"),
        (json!({"remarks": "a\u{202E}b"}), "remarks"),
    ] {
        let msg = patch_comment(api, Some(&u), id, &body)
            .await
            .assert_error(422, "invalid_field");
        assert!(msg.starts_with(field), "{msg}");
    }
    // A field is changed or left out: null is not a value of any.
    for (body, field) in [
        (json!({"title": null, "rating": 3}), "title"),
        (json!({"remarks": null}), "remarks"),
        (json!({"rating": null, "title": "Fine"}), "rating"),
        (json!({"rating": 2.5}), "rating"),
    ] {
        let msg = patch_comment(api, Some(&u), id, &body)
            .await
            .assert_error(422, "invalid_field");
        assert!(
            msg.contains(&format!("the field `{field}` must be")),
            "{msg}"
        );
    }
    patch_comment(api, Some(&u), id, &json!({"rating": 3, "extra": 1}))
        .await
        .assert_error(422, "invalid_field");
    patch_comment(api, Some(&u), 0, &json!({"rating": 3}))
        .await
        .assert_error(404, "comment_not_found");
    delete_comment(api, Some(&u), -4)
        .await
        .assert_error(404, "comment_not_found");
    assert_eq!(
        (
            rating(api, 2).await,
            list(api, "courseId=2&size=20&sizeThread=20").await.body
        ),
        before
    );
}

async fn deleting_a_review_takes_its_reply_a_provider_deletes_their_own_reply(kind: StoreKind) {
    let s = seeded(kind, small(), &[]).await;
    let api = &s.api;
    // Course 1's provider is user 1.
    let (u, provider) = (
        token(&s, 16, throng::services::comments::USER),
        token(&s, 1, throng::services::comments::PROVIDER),
    );
    let review = |title: &'static str| {
        let (api, u) = (api.clone(), u.clone());
        async move {
            post_comment(&api, Some(&u), 1, &comment(3, title, "Text."))
                .await
                .json()["commentId"]
                .as_i64()
                .unwrap()
        }
    };
    let (a, b) = (review("A").await, review("B").await);
    let reply_a = put_reply(api, Some(&provider), a, &json!({"remarks": "Thanks A"}))
        .await
        .json()["commentId"]
        .as_i64()
        .unwrap();
    let reply_b = put_reply(api, Some(&provider), b, &json!({"remarks": "Thanks B"}))
        .await
        .json()["commentId"]
        .as_i64()
        .unwrap();

    // The provider deletes their own reply: the review stays.
    assert_eq!(
        delete_comment(api, Some(&provider), reply_b).await.status,
        204
    );
    let block = &list_ok(api, "courseId=1&userId=16&sizeThread=20").await[0];
    let thread = block["thread"].as_array().unwrap();
    assert_eq!(thread.len(), 2);
    assert!(thread
        .iter()
        .all(|c| c["commentId"] != a || c["reply"][0]["commentId"] == reply_a));
    assert!(thread
        .iter()
        .any(|c| c["commentId"] == b && c["reply"] == json!([])));

    // The user deletes a review that has a reply: the reply goes with it.
    assert_eq!(delete_comment(api, Some(&u), a).await.status, 204);
    let block = &list_ok(api, "courseId=1&userId=16&sizeThread=20").await[0];
    assert_eq!(block["thread"].as_array().unwrap().len(), 1);
    delete_comment(api, Some(&provider), reply_a)
        .await
        .assert_error(404, "comment_not_found");
    put_reply(api, Some(&provider), a, &json!({"remarks": "again"}))
        .await
        .assert_error(404, "comment_not_found");
    assert_rating_is_per_user(api, 1).await;
    let events = event_types(&s).await;
    assert_eq!(
        events.iter().filter(|e| *e == "ReplyDeleted").count(),
        1,
        "{events:?}"
    );
    assert_eq!(
        events.iter().filter(|e| *e == "CommentDeleted").count(),
        1,
        "{events:?}"
    );
}
