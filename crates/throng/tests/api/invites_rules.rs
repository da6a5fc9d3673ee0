//! Invites' per-site rules through a real server on both stores: page
//! patterns to include and exclude, devices (reported or from the
//! User-Agent), the share of visitors over 10,000 first visits, asking
//! again after N days (the service's clock moved on), the per-visitor cap
//! across an owner's sites, the survey link's placeholders, the results by
//! day and page (JSON and CSV), bad settings and queries; and erasure
//! (a visitor forgetting itself, the retention purge) leaving no copy of
//! an answer in any file of the SQLite store, its WAL included.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use futures::StreamExt;
use serde_json::{json, Value};
use throng::base::clock::DAY_MS;
use throng::platform::auth::Role;
use throng::services::invites::http::{Answered, SiteOut, SiteResults, VisitorState};
use throng::services::invites::model::AnswerState;
use throng::services::invites::InvitesState;

use crate::both_stores;
use crate::helpers::{Api, Columns, Reply, StoreKind, TestServer};

both_stores!(
    pages_and_devices_decide_where_it_shows,
    the_share_holds_over_ten_thousand_visitors,
    no_and_closes_are_asked_again_after_their_days,
    the_cap_counts_invitations_across_the_owners_sites,
    the_survey_link_carries_visitor_display_and_page,
    results_by_day_and_page_as_json_and_csv,
    bad_rules_and_ranges_are_refused_with_the_field,
    erasure_leaves_no_copy_in_any_file_of_the_store,
);

const ORIGIN: &str = "https://shop.example";
const IPHONE: &str =
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148";
const DESKTOP: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/120 Safari/537.36";

struct Site {
    api: Api,
    admin: String,
    id: i64,
}

/// What a check sends besides the visitor.
#[derive(Default, Clone)]
struct Check<'a> {
    visitor: Option<&'a str>,
    page: Option<&'a str>,
    device: Option<&'a str>,
    user_agent: Option<&'a str>,
    pacing: Option<&'a str>,
}

impl Site {
    async fn new(server: &TestServer, settings: Value) -> Site {
        let admin = server.token(Role::ADMIN);
        let r = create(&server.api, &admin, settings).await;
        assert_eq!(r.status, 201, "{}", r.text());
        Site {
            api: server.api.clone(),
            admin,
            id: r.body::<SiteOut>().site_id,
        }
    }

    fn path(&self, tail: &str) -> String {
        format!("/api/invites/sites/{}{tail}", self.id)
    }

    async fn check(&self, c: Check<'_>) -> VisitorState {
        let mut query = Vec::new();
        if let Some(p) = c.page {
            query.push(("page", p));
        }
        if let Some(d) = c.device {
            query.push(("device", d));
        }
        let mut req = self
            .api
            .http
            .get(self.api.url(&self.path("/state")))
            .query(&query)
            .header("user-agent", c.user_agent.unwrap_or(DESKTOP));
        if let Some(v) = c.visitor {
            req = req.header("x-invites-visitor", v);
        }
        if let Some(p) = c.pacing {
            req = req.header("x-invites-pacing", p);
        }
        let r = self.api.send(req).await;
        assert_eq!(r.status, 200, "{}", r.text());
        r.body()
    }

    async fn answer(
        &self,
        visitor: &str,
        answer: &str,
        display: &str,
        page: Option<&str>,
    ) -> Reply {
        let mut body = json!({ "answer": answer, "displayId": display });
        if let Some(p) = page {
            body["page"] = json!(p);
        }
        self.api
            .send(
                self.api
                    .http
                    .post(self.api.url(&self.path("/answers")))
                    .header("x-invites-visitor", visitor)
                    .json(&body),
            )
            .await
    }

    async fn answered(
        &self,
        visitor: &str,
        answer: &str,
        display: &str,
        page: Option<&str>,
    ) -> Answered {
        let r = self.answer(visitor, answer, display, page).await;
        assert_eq!(r.status, 200, "{}", r.text());
        r.body()
    }

    async fn results(&self, query: &str, accept: Option<&str>) -> Reply {
        let mut req = self
            .api
            .http
            .get(self.api.url(&format!("{}?{query}", self.path("/results"))))
            .bearer_auth(&self.admin);
        if let Some(a) = accept {
            req = req.header("accept", a);
        }
        self.api.send(req).await
    }
}

async fn create(api: &Api, admin: &str, settings: Value) -> Reply {
    let mut body = json!({
        "surveyUrl": "https://survey.example/s/1",
        "allowedOrigins": [ORIGIN],
    });
    for (k, v) in settings.as_object().unwrap() {
        body[k] = v.clone();
    }
    api.send(
        api.http
            .post(api.url("/api/invites/sites"))
            .bearer_auth(admin)
            .json(&body),
    )
    .await
}

fn clock(server: &TestServer) -> throng::base::clock::Clock {
    server
        .state
        .part::<InvitesState>()
        .expect("the invites service runs")
        .clock
        .clone()
}

fn numeric_id(signed: &str) -> i64 {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(signed)
        .unwrap();
    i64::from_be_bytes(raw[..8].try_into().unwrap())
}

fn display_nonce(display: &str) -> [u8; 8] {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(display)
        .unwrap();
    raw[..8].try_into().unwrap()
}

async fn pages_and_devices_decide_where_it_shows(kind: StoreKind) {
    let server = TestServer::start(kind, &[]).await;
    let site = Site::new(
        &server,
        json!({
            "pagesInclude": ["/shop/*", "/"],
            "pagesExclude": ["/shop/checkout/*"],
            "devices": ["phone", "tablet"],
        }),
    )
    .await;
    let out: SiteOut = server
        .api
        .send(
            server
                .api
                .http
                .get(server.api.url(&site.path("")))
                .bearer_auth(&site.admin),
        )
        .await
        .body();
    assert_eq!(out.pages_include, vec!["/shop/*", "/"]);
    assert_eq!(out.pages_exclude, vec!["/shop/checkout/*"]);
    let phone = |page| Check {
        page,
        device: Some("phone"),
        ..Check::default()
    };
    for (page, reason) in [
        (Some("https://shop.example/shop/shoes?size=42"), None),
        (Some("/shop/shoes"), None),
        (Some("https://shop.example/"), None),
        (
            Some("https://shop.example/shop/checkout/pay"),
            Some("page_excluded"),
        ),
        (Some("/about"), Some("page_excluded")),
        (Some("javascript:alert(1)"), Some("page_excluded")),
        (None, Some("page_excluded")),
    ] {
        let v = site.check(phone(page)).await;
        assert_eq!(v.reason.as_deref(), reason, "{page:?}: {v:?}");
        assert_eq!(v.show, reason.is_none(), "{page:?}");
        assert_eq!(v.display_id.is_some(), reason.is_none());
    }
    // The reported device first, else the User-Agent's.
    let on = |device, user_agent| Check {
        page: Some("/shop/a"),
        device,
        user_agent,
        ..Check::default()
    };
    for (device, ua, reason) in [
        (Some("desktop"), Some(IPHONE), Some("device_excluded")),
        (Some("tablet"), Some(DESKTOP), None),
        (None, Some(IPHONE), None),
        (None, Some(DESKTOP), Some("device_excluded")),
        (Some("toaster"), Some(DESKTOP), Some("device_excluded")),
    ] {
        let v = site.check(on(device, ua)).await;
        assert_eq!(v.reason.as_deref(), reason, "{device:?} {ua:?}");
    }
    // An excluded page is not an answer: the visitor is asked on the next
    // allowed page.
    let first = site.check(phone(Some("/shop/checkout/x"))).await;
    assert!(!first.show);
    let again = site
        .check(Check {
            visitor: Some(&first.visitor),
            ..phone(Some("/shop/b"))
        })
        .await;
    assert!(again.show, "{again:?}");
    // A change of the rules reaches the next check.
    let r = server
        .api
        .send(
            server
                .api
                .http
                .patch(server.api.url(&site.path("")))
                .bearer_auth(&site.admin)
                .json(&json!({ "pagesInclude": [], "devices": [] })),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = site.check(on(Some("desktop"), None)).await;
    assert!(v.show, "{v:?}");
    assert!(
        site.check(Check::default()).await.show,
        "no page: every page"
    );
}

async fn the_share_holds_over_ten_thousand_visitors(kind: StoreKind) {
    const VISITORS: usize = 10_000;
    const SHARE: f64 = 0.3;
    let server = TestServer::start(kind, &[]).await;
    let site = Arc::new(Site::new(&server, json!({ "inviteShare": SHARE })).await);
    let firsts: Vec<VisitorState> = futures::stream::iter(0..VISITORS)
        .map(|_| {
            let site = site.clone();
            async move { site.check(Check::default()).await }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    let shown = firsts.iter().filter(|v| v.show).count();
    assert!(firsts
        .iter()
        .all(|v| v.show || v.reason.as_deref() == Some("not_sampled")));
    let got = shown as f64 / VISITORS as f64;
    assert!(
        (got - SHARE).abs() <= 0.02,
        "{shown} of {VISITORS} shown: {got}"
    );
    // Decided once per visitor: the same answer on every later check.
    for v in firsts.iter().take(300) {
        let again = site
            .check(Check {
                visitor: Some(&v.visitor),
                ..Check::default()
            })
            .await;
        assert_eq!(again.show, v.show, "{v:?} then {again:?}");
    }
}

async fn no_and_closes_are_asked_again_after_their_days(kind: StoreKind) {
    let server = TestServer::start(kind, &[]).await;
    let clock = clock(&server);
    let site = Site::new(
        &server,
        json!({ "askAgainAfterNoDays": 7, "askAgainAfterClosesDays": 2, "closesMax": 2 }),
    )
    .await;
    let never = Site::new(&server, json!({})).await;
    let known = |v| Check {
        visitor: Some(v),
        ..Check::default()
    };
    // A: no, asked again 7 days later, then yes for good.
    let a = site.check(Check::default()).await;
    let d = a.display_id.clone().unwrap();
    assert_eq!(
        site.answered(&a.visitor, "no", &d, None).await.state,
        AnswerState::No
    );
    // B: closed out by two closes, asked again 2 days later.
    let b = site.check(Check::default()).await;
    site.answered(&b.visitor, "close", b.display_id.as_deref().unwrap(), None)
        .await;
    let b2 = site.check(known(&b.visitor)).await;
    let out = site
        .answered(&b.visitor, "close", b2.display_id.as_deref().unwrap(), None)
        .await;
    assert_eq!(out.state, AnswerState::ClosedOut);
    // C: no on a site that never asks again.
    let c = never.check(Check::default()).await;
    never
        .answered(&c.visitor, "no", c.display_id.as_deref().unwrap(), None)
        .await;

    clock.advance(DAY_MS + 1000);
    let v = site.check(known(&b.visitor)).await;
    assert_eq!(v.reason.as_deref(), Some("closed_out"), "1 day: {v:?}");
    // The last display answered again late: still nothing new.
    let late = site
        .answer(&b.visitor, "close", b2.display_id.as_deref().unwrap(), None)
        .await;
    assert_eq!(late.json()["counted"], false, "{}", late.text());
    clock.advance(DAY_MS);
    let v = site.check(known(&b.visitor)).await;
    assert!(v.show, "2 days after the closes: asked again: {v:?}");
    assert_eq!((v.state, v.closes), (AnswerState::Asking, 0));
    let after = site
        .answered(&b.visitor, "close", v.display_id.as_deref().unwrap(), None)
        .await;
    assert_eq!(
        (after.state, after.closes),
        (AnswerState::Asking, 1),
        "closes counted afresh"
    );

    let v = site.check(known(&a.visitor)).await;
    assert_eq!(
        v.reason.as_deref(),
        Some("answered_no"),
        "2 days after no: {v:?}"
    );
    // An old display cannot answer past the rule either.
    let r = site.answer(&a.visitor, "yes", &d, None).await;
    assert_eq!(r.json()["counted"], false);
    clock.advance(5 * DAY_MS);
    let v = site.check(known(&a.visitor)).await;
    assert!(v.show, "7 days after no: asked again: {v:?}");
    let yes = site
        .answered(&a.visitor, "yes", v.display_id.as_deref().unwrap(), None)
        .await;
    assert_eq!(yes.state, AnswerState::Yes);
    clock.advance(400 * DAY_MS);
    assert_eq!(
        site.check(known(&a.visitor)).await.reason.as_deref(),
        Some("answered_yes"),
        "yes is final"
    );
    assert_eq!(
        never.check(known(&c.visitor)).await.reason.as_deref(),
        Some("answered_no"),
        "without the rule, no is final"
    );
    // The counts follow: B's closes 1 + 1 + 1, A's no then yes.
    let s: Value = server
        .api
        .send(
            server
                .api
                .http
                .get(server.api.url(&site.path("/stats")))
                .bearer_auth(&site.admin),
        )
        .await
        .json();
    assert_eq!(
        (s["closes"].clone(), s["closedOut"].clone()),
        (json!(3), json!(1)),
        "{s}"
    );
    assert_eq!(
        (s["yes"].clone(), s["no"].clone()),
        (json!(1), json!(1)),
        "{s}"
    );
}

async fn the_cap_counts_invitations_across_the_owners_sites(kind: StoreKind) {
    let server = TestServer::start(kind, &[]).await;
    let clock = clock(&server);
    let cap = json!({ "owner": "acme", "capInvitations": 2, "capDays": 7 });
    let one = Site::new(&server, cap.clone()).await;
    let two = Site::new(&server, cap).await;
    let other = Site::new(&server, json!({ "owner": "other", "capInvitations": 1 })).await;
    let uncapped = Site::new(&server, json!({ "owner": "acme" })).await;

    let first = one.check(Check::default()).await;
    assert!(first.show);
    let p1 = first.pacing.clone().expect("a display returns the pacing");
    // The uncapped site of the owner shows, and counts the invitation too.
    let u = uncapped
        .check(Check {
            pacing: Some(&p1),
            ..Check::default()
        })
        .await;
    assert!(u.show, "{u:?}");
    let p2 = u.pacing.unwrap();
    let capped = two
        .check(Check {
            pacing: Some(&p2),
            ..Check::default()
        })
        .await;
    assert_eq!(capped.reason.as_deref(), Some("visitor_cap"), "{capped:?}");
    assert!(capped.pacing.is_none() && capped.display_id.is_none());
    // The same visitor, known to the site: capped too.
    let known = one
        .check(Check {
            visitor: Some(&first.visitor),
            pacing: Some(&p2),
            ..Check::default()
        })
        .await;
    assert_eq!(known.reason.as_deref(), Some("visitor_cap"));
    // Without its pacing (a new browser) or with a forged one: no cap known.
    assert!(two.check(Check::default()).await.show);
    let mut forged = p2.clone().into_bytes();
    forged[5] = if forged[5] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(forged).unwrap();
    assert!(
        two.check(Check {
            pacing: Some(&forged),
            ..Check::default()
        })
        .await
        .show
    );
    // Another owner's sites do not read acme's invitations.
    let o = other
        .check(Check {
            pacing: Some(&p2),
            ..Check::default()
        })
        .await;
    assert!(o.show, "{o:?}");
    // The period passes: invited again.
    clock.advance(7 * DAY_MS);
    let later = two
        .check(Check {
            pacing: Some(&p2),
            ..Check::default()
        })
        .await;
    assert!(later.show, "{later:?}");
}

async fn the_survey_link_carries_visitor_display_and_page(kind: StoreKind) {
    let server = TestServer::start(kind, &[]).await;
    let site = Site::new(
        &server,
        json!({ "surveyUrl": "https://survey.example/s?v={visitor}&d={display}&p={page}&s={site}" }),
    )
    .await;
    let v = site
        .check(Check {
            page: Some("https://shop.example/shop/a b/ü?secret=1"),
            ..Check::default()
        })
        .await;
    let display = v.display_id.clone().unwrap();
    let want = |page: &str| {
        format!(
            "https://survey.example/s?v={}&d={display}&p={page}&s={}",
            numeric_id(&v.visitor),
            site.id
        )
    };
    assert_eq!(
        v.survey_url.as_deref(),
        Some(want("%2Fshop%2Fa%20b%2F%C3%BC").as_str()),
        "the query of the page is not sent on"
    );
    let yes = site
        .answered(&v.visitor, "yes", &display, Some("/shop/a b/ü"))
        .await;
    assert_eq!(
        yes.survey_url.as_deref(),
        Some(want("%2Fshop%2Fa%20b%2F%C3%BC").as_str())
    );
    // Without a page: {page} empty. A path on this server is made absolute.
    let local = Site::new(
        &server,
        json!({ "surveyUrl": "/invites/demo/survey?v={visitor}&p={page}" }),
    )
    .await;
    let v = local.check(Check::default()).await;
    let url = v.survey_url.unwrap();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert!(
        url.ends_with(&format!(
            "/invites/demo/survey?v={}&p=",
            numeric_id(&v.visitor)
        )),
        "{url}"
    );
    // A placeholder cannot make the URL lead elsewhere: it is refused in the host.
    let r = create(
        &server.api,
        &site.admin,
        json!({ "surveyUrl": "https://{page}.example/s" }),
    )
    .await;
    assert_eq!(r.status, 422, "{}", r.text());
    assert!(r.text().contains("surveyUrl"), "{}", r.text());
}

async fn results_by_day_and_page_as_json_and_csv(kind: StoreKind) {
    let server = TestServer::start(kind, &[]).await;
    let clock = clock(&server);
    let site = Site::new(&server, json!({})).await;
    let day0 = clock.today();
    // Day 0: 3 shown on /a (yes, no, close), 1 on /b (no answer), 1 without a page.
    for answer in ["yes", "no", "close"] {
        let v = site
            .check(Check {
                page: Some("/a"),
                ..Check::default()
            })
            .await;
        site.answered(
            &v.visitor,
            answer,
            v.display_id.as_deref().unwrap(),
            Some("/a"),
        )
        .await;
    }
    assert!(
        site.check(Check {
            page: Some("https://shop.example/b?x=1"),
            ..Check::default()
        })
        .await
        .show
    );
    assert!(site.check(Check::default()).await.show);
    // Day 1: 2 shown on /a, one closed twice over two displays.
    clock.advance(DAY_MS);
    let v = site
        .check(Check {
            page: Some("/a"),
            ..Check::default()
        })
        .await;
    site.answered(
        &v.visitor,
        "close",
        v.display_id.as_deref().unwrap(),
        Some("/a"),
    )
    .await;
    let again = site
        .check(Check {
            visitor: Some(&v.visitor),
            page: Some("/a"),
            ..Check::default()
        })
        .await;
    site.answered(
        &v.visitor,
        "close",
        again.display_id.as_deref().unwrap(),
        Some("/a"),
    )
    .await;
    // A repeated answer is not counted twice.
    site.answer(
        &v.visitor,
        "close",
        again.display_id.as_deref().unwrap(),
        Some("/a"),
    )
    .await;

    let day = |d: i32| throng::base::clock::day_text(d);
    let range = format!("from={}&to={}", day(day0 - 1), day(day0 + 1));
    let r = site.results(&range, None).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let res: SiteResults = r.body();
    assert_eq!(res.days.len(), 3, "every day of the range");
    let counts = |i: usize| {
        let d = &res.days[i];
        (d.shown, d.yes, d.no, d.closed)
    };
    assert_eq!(counts(0), (0, 0, 0, 0));
    assert_eq!(counts(1), (5, 1, 1, 1), "{:?}", res.days);
    assert_eq!(counts(2), (2, 0, 0, 2), "{:?}", res.days);
    let page = |p: &str| {
        let x = res
            .pages
            .iter()
            .find(|x| x.page == p)
            .unwrap_or_else(|| panic!("{p}: {:?}", res.pages));
        (x.shown, x.yes, x.no, x.closed)
    };
    assert_eq!(page("/a"), (5, 1, 1, 3));
    assert_eq!(page("/b"), (1, 0, 0, 0));
    assert_eq!(page("(none)"), (1, 0, 0, 0));
    assert_eq!(res.pages[0].page, "/a", "most shown first");
    assert_eq!(res.rows.len(), 4, "{:?}", res.rows);
    assert!(!res.truncated);

    let csv = site.results(&range, Some("text/csv")).await;
    assert_eq!(csv.status, 200);
    assert!(csv.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/csv"));
    let text = csv.text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        vec![
            "day,page,shown,yes,no,closed".to_string(),
            format!("{},(none),1,0,0,0", day(day0)),
            format!("{},/a,3,1,1,1", day(day0)),
            format!("{},/b,1,0,0,0", day(day0)),
            format!("{},/a,2,0,0,2", day(day0 + 1)),
        ]
    );
    // The default range ends today and holds 30 days.
    let res: SiteResults = site.results("", None).await.body();
    assert_eq!((res.days.len(), res.to.clone()), (30, day(day0 + 1)));
}

async fn bad_rules_and_ranges_are_refused_with_the_field(kind: StoreKind) {
    let server = TestServer::start(kind, &[]).await;
    let admin = server.token(Role::ADMIN);
    for (settings, field) in [
        (json!({ "pagesInclude": ["checkout/*"] }), "pagesInclude"),
        (json!({ "pagesExclude": ["/a b"] }), "pagesExclude"),
        (json!({ "pagesInclude": vec!["/x"; 51] }), "pagesInclude"),
        (
            json!({ "pagesInclude": [format!("/{}", "a".repeat(200))] }),
            "pagesInclude",
        ),
        (json!({ "askAgainAfterNoDays": -1 }), "askAgainAfterNoDays"),
        (
            json!({ "askAgainAfterClosesDays": 3651 }),
            "askAgainAfterClosesDays",
        ),
        (json!({ "capInvitations": 11 }), "capInvitations"),
        (json!({ "capDays": 0 }), "capDays"),
        (json!({ "owner": "" }), "owner"),
    ] {
        let r = create(&server.api, &admin, settings.clone()).await;
        assert_eq!(r.status, 422, "{settings}: {}", r.text());
        let message = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(message.starts_with(field), "{settings}: {message}");
    }
    let r = create(&server.api, &admin, json!({ "devices": ["toaster"] })).await;
    assert!(r.status == 400 || r.status == 422, "{}", r.text());
    assert!(
        r.text().contains("devices") || r.text().contains("toaster"),
        "{}",
        r.text()
    );
    assert_eq!(
        server.api.get("/api/invites/sites").await.json()["error"]["code"],
        "missing_token"
    );
    let site = Site::new(&server, json!({})).await;
    for q in [
        "from=2030-02-01&to=2030-01-01",
        "from=2030-01-01&to=2031-01-02",
        "from=yesterday",
        "to=2030-02-30",
    ] {
        let r = site.results(q, None).await;
        assert_eq!(r.status, 400, "{q}: {}", r.text());
        assert_eq!(r.json()["error"]["code"], "invalid_query", "{q}");
    }
    let user = server.token(throng::services::comments::USER);
    let r = server
        .api
        .send(
            server
                .api
                .http
                .get(server.api.url(&site.path("/results")))
                .bearer_auth(&user),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text());
    let r = server
        .api
        .send(
            server
                .api
                .http
                .get(server.api.url("/api/invites/sites/999/results"))
                .bearer_auth(&site.admin),
        )
        .await;
    assert_eq!(r.json()["error"]["code"], "site_not_found");
}

/// Every file of the SQLite store (database, WAL, shared memory) as it is
/// on disk now, read without opening the database.
fn store_files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("throng.db"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap_or_default(),
            )
        })
        .collect()
}

fn files_holding(dir: &std::path::Path, bytes: &[u8]) -> Vec<String> {
    store_files(dir)
        .into_iter()
        .filter(|(_, data)| data.windows(bytes.len()).any(|w| w == bytes))
        .map(|(name, _)| name)
        .collect()
}

async fn erasure_leaves_no_copy_in_any_file_of_the_store(kind: StoreKind) {
    let server = TestServer::start(kind, &["--invites-purge-interval-s", "1"]).await;
    let clock = clock(&server);
    let site = Site::new(&server, json!({ "retentionDays": 30, "closesMax": 5 })).await;
    // A: three answers (the row rewritten twice), then forgets itself.
    let a = site.check(Check::default()).await;
    let mut displays_a = vec![a.display_id.clone().unwrap()];
    site.answered(&a.visitor, "close", &displays_a[0], None)
        .await;
    for answer in ["close", "no"] {
        let d = site
            .check(Check {
                visitor: Some(&a.visitor),
                ..Check::default()
            })
            .await
            .display_id
            .unwrap();
        site.answered(&a.visitor, answer, &d, None).await;
        displays_a.push(d);
    }
    // B: no, then purged by the retention.
    let b = site.check(Check::default()).await;
    let display_b = b.display_id.clone().unwrap();
    site.answered(&b.visitor, "no", &display_b, None).await;
    let dir = server.data_dir.clone();
    if kind == StoreKind::Sqlite {
        // The scan can see an answer: each display's nonce is stored.
        for d in displays_a.iter().chain([&display_b]) {
            assert!(
                !files_holding(&dir, &display_nonce(d)).is_empty(),
                "the stored answer is readable in the store's files"
            );
        }
    }
    let asked = std::time::Instant::now();
    let r = server
        .api
        .send(
            server
                .api
                .http
                .delete(server.api.url(&site.path("/visitor")))
                .header("x-invites-visitor", &a.visitor),
        )
        .await;
    let took = asked.elapsed();
    assert_eq!(r.status, 204, "{}", r.text());
    if kind == StoreKind::Sqlite {
        // At once: the erasure answered once no file held a copy.
        for (i, d) in displays_a.iter().enumerate() {
            let held = files_holding(&dir, &display_nonce(d));
            if !held.is_empty() {
                let mut cleared = None;
                for k in 0..100 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    if files_holding(&dir, &display_nonce(d)).is_empty() {
                        cleared = Some(k * 50);
                        break;
                    }
                }
                panic!("A's answer {i} after forget me (answered in {took:?}): in {held:?}; cleared after {cleared:?} ms");
            }
        }
        assert!(
            !files_holding(&dir, &display_nonce(&display_b)).is_empty(),
            "B kept"
        );
    }
    let v = site
        .check(Check {
            visitor: Some(&a.visitor),
            ..Check::default()
        })
        .await;
    assert_eq!((v.state, v.closes), (AnswerState::Asking, 0), "A forgotten");
    // 31 days later the purge (every second) takes B's answer.
    clock.advance(31 * DAY_MS);
    let known_b = Check {
        visitor: Some(&b.visitor),
        ..Check::default()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !site.check(known_b.clone()).await.show {
        assert!(tokio::time::Instant::now() < deadline, "B was not purged");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if kind == StoreKind::Sqlite {
        // The purge's erasing write answered before B showed as purged.
        let held = files_holding(&dir, &display_nonce(&display_b));
        assert!(held.is_empty(), "B's answer after the purge: in {held:?}");
    } else {
        let rows = crate::helpers::query(
            &server.state.store,
            "SELECT COUNT(*) FROM invites_answers",
            vec![],
            |r| r.int(0),
        )
        .await;
        assert_eq!(rows, vec![0], "both answers deleted");
    }
}
