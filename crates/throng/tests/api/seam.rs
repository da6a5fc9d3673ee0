//! The service seam, proved by a test-only service defined in this file
//! alone: plugged into the app's list beside the real services, it gets its
//! migrations applied, its demo seed run, its state built by `start`, its
//! routes served (reading that state through `FromRef`), its operations in
//! `/openapi.json` and its link on the index page, without a line changed
//! anywhere else. (The binary's list is `services::all()`; adding a real
//! service is its folder plus one line there.)

use std::sync::Arc;

use axum::extract::{FromRef, State};
use axum::Json;
use clap::Parser;
use include_dir::{Dir, DirEntry, File};
use serde_json::Value;

use throng::app::ServeArgs;
use throng::platform::service::{
    AnyService, AppState, Link, LinkKind, NoArgs, OpenApiRouter, Platform, Service, ServiceState,
    Started,
};
use throng::services::{booking::Booking, comments::Comments};
use throng::store::{Columns, MigrationSet, Sql, Store};

use crate::both_stores;
use crate::helpers::{Api, PgDb, StoreKind};

struct Hello;

struct HelloState {
    store: Store,
    /// Set by `start`: proves the route got the state `start` built.
    started_by: &'static str,
}

impl ServiceState for HelloState {}

static HELLO_MIGRATIONS: MigrationSet = MigrationSet {
    owner: "hello",
    sqlite: Dir::new(
        "sqlite",
        &[DirEntry::File(File::new(
            "0900_hello.sql",
            b"CREATE TABLE hello_greetings (id INTEGER PRIMARY KEY, text TEXT NOT NULL);",
        ))],
    ),
    postgres: Dir::new(
        "postgres",
        &[DirEntry::File(File::new(
            "0900_hello.sql",
            b"CREATE TABLE hello_greetings (id BIGINT PRIMARY KEY, text TEXT NOT NULL);",
        ))],
    ),
};

static GREETING: Sql = Sql::new("SELECT text FROM hello_greetings WHERE id = 1");
static GREET: Sql = Sql::new(
    "INSERT INTO hello_greetings (id, text) VALUES (1, 'hello, crowd') ON CONFLICT (id) DO NOTHING",
);

async fn greeting(store: &Store) -> Option<String> {
    let read = store.read(|c| Box::pin(c.query_opt(&GREETING, &[], |r| r.text(0))));
    read.await.unwrap()
}

/// The greeting and who started the state it was read through
#[utoipa::path(get, path = "/api/hello", tag = "hello",
    responses((status = 200, description = "{greeting, startedBy}",
               example = json!({"greeting": "hello, crowd", "startedBy": "hello::start"}))))]
async fn hello(State(st): State<Arc<HelloState>>) -> Json<Value> {
    Json(serde_json::json!({
        "greeting": greeting(&st.store).await,
        "startedBy": st.started_by,
    }))
}

/// The routes, generic over the state as a real service's are.
fn hello_routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<HelloState>: FromRef<S>,
{
    OpenApiRouter::default().routes(utoipa_axum::routes!(hello))
}

impl Service for Hello {
    const NAME: &'static str = "hello";
    type Args = NoArgs;
    type SeedArgs = NoArgs;
    type State = HelloState;

    fn migrations(&self) -> Option<&'static MigrationSet> {
        Some(&HELLO_MIGRATIONS)
    }
    async fn seed_demo(&self, store: &Store) -> anyhow::Result<()> {
        store.write(|tx| Box::pin(tx.execute(&GREET, &[]))).await?;
        Ok(())
    }
    async fn start(
        &self,
        platform: &Platform,
        _args: NoArgs,
    ) -> anyhow::Result<Started<HelloState>> {
        Ok(Started::new(Arc::new(HelloState {
            store: platform.store.clone(),
            started_by: "hello::start",
        })))
    }
    fn routes(&self) -> OpenApiRouter<AppState> {
        hello_routes()
    }
    fn links(&self) -> Vec<Link> {
        vec![Link {
            kind: LinkKind::Endpoint,
            href: "/api/hello",
            title: "/api/hello",
            about: "a test-only service.",
        }]
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
    assert!(index.contains(r#"<a href="/booking/">"#), "{index}");
    // The real services still answer beside it.
    assert_eq!(api.get("/api/booking/places").await.status, 200);
    assert_eq!(api.get("/api/courses/1/rating").await.status, 200);
    // The binary's own list does not have it.
    assert!(throng::services::all().iter().all(|s| s.name() != "hello"));
    running.stop().await;
}

both_stores!(a_test_only_service_plugs_in);
