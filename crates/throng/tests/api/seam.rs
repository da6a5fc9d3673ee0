//! The service seam, proved by a test-only service defined in this file
//! alone: plugged into the app's list beside the real services, it gets its
//! migrations applied, its demo seed run, its state built by `start`, its
//! routes served (reading that state through `FromRef`), its operations in
//! `/openapi.json` and its link on the index page, without a line changed
//! anywhere else. (The binary's list is `services::all()`; adding a real
//! service is its folder plus one line there.)

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use clap::Parser;
use serde_json::Value;

use serde_json::json;
use throng::app::ServeArgs;
use throng::platform::service::{
    AnyService, AppState, Link, NoArgs, OpenApiRouter, Platform, Service, ServiceState, Started,
};
use throng::services::{booking::Booking, comments::Comments};
use throng::store::{Columns, MigrationSet, Sql, Store};
use throng_store::portable_migrations;

use crate::both_stores;
use crate::helpers::{Api, PgDb, StoreKind};

struct Hello;
struct HelloState(Store, &'static str);
impl ServiceState for HelloState {}

static HELLO_MIGRATIONS: MigrationSet = portable_migrations!("hello", "0900_hello.sql" =>
    "CREATE TABLE hello_greetings (id BIGINT PRIMARY KEY, text TEXT NOT NULL)");
static GREETING: Sql = Sql::new("SELECT text FROM hello_greetings WHERE id = 1");
static GREET: Sql = Sql::new("INSERT INTO hello_greetings (id, text) VALUES (1, 'hello, crowd')");
/// The greeting and who started the state it was read through
#[utoipa::path(get, path = "/api/hello", tag = "hello", responses((status = 200,
    description = "{greeting, startedBy}", example = json!({"greeting": "hello, crowd", "startedBy": "hello::start"}))))]
async fn hello(State(st): State<Arc<HelloState>>) -> Json<Value> {
    let (store, started_by) = (&st.0, st.1);
    let read = store.read(|c| Box::pin(c.query_opt(&GREETING, &[], |r| r.text(0))));
    Json(json!({"greeting": read.await.unwrap(), "startedBy": started_by}))
}

impl Service for Hello {
    const NAME: &'static str = "hello";
    type Args = NoArgs;
    type SeedArgs = NoArgs;
    type State = HelloState;
    fn migrations(&self) -> Option<&'static MigrationSet> {
        Some(&HELLO_MIGRATIONS)
    }
    async fn seed_demo(&self, store: &Store, _data_dir: &std::path::Path) -> anyhow::Result<()> {
        store.write(|tx| Box::pin(tx.execute(&GREET, &[]))).await?;
        Ok(())
    }
    async fn start(&self, platform: &Platform, _: NoArgs) -> anyhow::Result<Started<HelloState>> {
        let state = HelloState(platform.store.clone(), "hello::start");
        Ok(Started::new(Arc::new(state)))
    }
    fn routes(&self) -> OpenApiRouter<AppState> {
        OpenApiRouter::default().routes(utoipa_axum::routes!(hello))
    }
    fn links(&self) -> Vec<Link> {
        vec![Link::endpoint("/api/hello", "a test-only service.")]
    }
}

static WITH_HELLO: &[&dyn AnyService] = &[&Booking, &Comments, &Hello];

#[derive(Parser)]
struct W {
    #[command(flatten)]
    serve: ServeArgs,
}

async fn a_test_only_service_plugs_in(kind: StoreKind) {
    let pg = match kind {
        StoreKind::Sqlite => None,
        StoreKind::Postgres => Some(PgDb::fresh().await),
    };
    let dir = tempfile::TempDir::new().unwrap();
    let store = match &pg {
        Some(pg) => pg.url.clone(),
        None => format!("sqlite:{}", dir.path().join("throng.db").display()),
    };
    let data_dir = dir.path().display().to_string();
    let args = W::try_parse_from([
        "throng-test",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        &data_dir,
        "--store",
        &store,
        "--no-notifier",
        "--demo",
    ])
    .unwrap()
    .serve;
    let running = throng::app::start_for(args, WITH_HELLO)
        .await
        .expect("starts");
    let api = Api::new(running.addr);

    let hello = api.get("/api/hello").await;
    assert_eq!(hello.status, 200);
    assert_eq!(
        hello.json(),
        serde_json::json!({"greeting": "hello, crowd", "startedBy": "hello::start"}),
        "migrated, demo-seeded, started and routed"
    );
    let doc: Value = api.get("/openapi.json").await.json();
    let hello = &doc["paths"]["/api/hello"]["get"];
    assert_eq!(
        hello["summary"],
        "The greeting and who started the state it was read through"
    );
    assert_eq!(hello["tags"], serde_json::json!(["hello"]), "{doc}");
    assert!(doc["paths"]["/api/booking/places"]["get"].is_object());
    let index = String::from_utf8(api.get("/").await.body.to_vec()).unwrap();
    assert!(index.contains(r#"<a href="/api/hello">"#), "{index}");
    assert!(index.contains(r#"<a href="/booking/""#), "{index}");
    // The real services still answer beside it.
    assert_eq!(api.get("/api/booking/places").await.status, 200);
    assert_eq!(api.get("/api/courses/1/rating").await.status, 200);
    // The binary's own list does not have it.
    assert!(throng::services::all().iter().all(|s| s.name() != "hello"));
    running.stop().await;
}

both_stores!(a_test_only_service_plugs_in);
