//! `throng seed comments`: the write-up's data set (1,000,000 users, 40,000
//! courses, 50 comments per course from random users with ids 500,000 to
//! 1,000,000 in chronological order, a provider reply to half of them),
//! with snapshots and rating aggregates computed while generating.
//!
//! The data is a pure function of the arguments and `--seed` (splitmix64, no
//! clock): comment ids, times (from 2024-01-01 UTC) and texts are the same on
//! every run and in both dialects, which the response snapshot tests rely on.
//! Generation runs on one thread and the inserts on another (2 cores).
//!
//! `--testdata-csv PATH` also writes the Artillery payload (`testData.csv`,
//! the write-up's columns, no header) drawn from the stored snapshots.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use super::model::CommentType;
use crate::store::{NewEvent, Store};

#[derive(Clone, Debug, clap::Args)]
pub struct SeedCommentsArgs {
    /// Users (ids 1..=N); providers are ids below 50,000, commenters the upper half.
    #[arg(long, default_value_t = 1_000_000)]
    pub users: i64,
    /// Courses.
    #[arg(long, default_value_t = 40_000)]
    pub courses: i64,
    /// Comments per course.
    #[arg(long, default_value_t = 50)]
    pub comments_per_course: i64,
    /// Share of comments with a provider reply (0 to 1).
    #[arg(long, default_value_t = 0.5)]
    pub reply_ratio: f64,
    /// Replace existing comments data.
    #[arg(long)]
    pub force: bool,
    /// Random seed of the generator (same seed, same data).
    #[arg(long, default_value_t = 2017)]
    pub seed: u64,
    /// Also write the Artillery payload testData.csv here (with existing data
    /// and no --force, only the file is written).
    #[arg(long)]
    pub testdata_csv: Option<PathBuf>,
    /// Rows of testData.csv.
    #[arg(long, default_value_t = 5000)]
    pub testdata_rows: usize,
}

impl SeedCommentsArgs {
    pub fn small(users: i64, courses: i64, comments_per_course: i64) -> SeedCommentsArgs {
        SeedCommentsArgs {
            users,
            courses,
            comments_per_course,
            reply_ratio: 0.5,
            force: false,
            seed: 2017,
            testdata_csv: None,
            testdata_rows: 5000,
        }
    }
}

#[derive(Debug, Default)]
pub struct SeedReport {
    pub users: i64,
    pub courses: i64,
    pub comments: i64,
    pub replies: i64,
    pub snapshots: i64,
    pub elapsed_s: f64,
    /// Rows written to testData.csv (0 when not asked).
    pub testdata_rows: usize,
    /// False when existing data was kept (only the CSV was written).
    pub seeded: bool,
}

/// The demo set seeded by `serve --demo`; the demo page signs in as this user.
pub const DEMO_USERS: i64 = 200;
pub const DEMO_COURSES: i64 = 20;
pub const DEMO_COMMENTS_PER_COURSE: i64 = 10;
pub const DEMO_USER_ID: i64 = 150;

/// 2024-01-01T00:00:00Z: the first comment time of every data set.
pub const BASE_MS: i64 = 1_704_067_200_000;
const DAY_MS: i64 = 86_400_000;
/// Comments of one course spread over this span.
const SPAN_MS: i64 = 365 * DAY_MS;
/// Courses per transaction / progress step / channel message.
const COURSES_PER_CHUNK: i64 = 250;
/// Users per transaction.
const USERS_PER_CHUNK: i64 = 50_000;
/// Chunks the generator may run ahead of the inserts (bounds memory).
const CHUNKS_AHEAD_MAX: usize = 4;

// ------------------------------------------------------------------ generator

/// splitmix64: small, fast, and stable across crate versions (the data must
/// not change when a dependency does).
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64, stream: u64) -> Rng {
        let mut r = Rng(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03));
        r.next();
        r
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        debug_assert!(lo <= hi);
        lo + (self.next() % ((hi - lo + 1) as u64)) as i64
    }
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

const FIRST: &[&str] = &[
    "Ava", "Liam", "Noah", "Emma", "Olivia", "Mateo", "Zoë", "José", "Łukasz", "Aiko", "Chen",
    "Priya", "Amara", "Björn", "Chloé", "Dmitri", "Elif", "Farah", "Giulia", "Hiro", "Ines",
    "Jonas", "Kofi", "Lena", "Marek", "Nadia", "Omar", "Paula", "Quinn", "Rafael", "Sofia",
    "Tomás",
];
const LAST: &[&str] = &[
    "Smith", "Novák", "García", "Müller", "Kowalski", "Rossi", "Tanaka", "Okafor", "Silva",
    "Dubois", "Ivanova", "Jensen", "Kim", "Larsen", "Moreau", "Nguyen", "O'Brien", "Patel",
    "Horváth", "Schmidt",
];
const TOPICS: &[&str] = &[
    "Data Science",
    "Rust Programming",
    "Cloud Architecture",
    "SQL Performance",
    "Machine Learning",
    "Web Security",
    "UX Design",
    "Project Management",
    "Digital Marketing",
    "Statistics",
    "Networking",
    "Accounting",
    "Public Speaking",
    "Photography",
    "Spanish",
    "Algorithms",
];
const LEVELS: &[&str] = &[
    "Foundations",
    "Essentials",
    "Advanced",
    "in Practice",
    "Bootcamp",
    "Masterclass",
];
const ADJ: &[&str] = &[
    "Great",
    "Solid",
    "Disappointing",
    "Excellent",
    "Decent",
    "Outstanding",
    "Okay",
    "Useful",
    "Confusing",
    "Inspiring",
    "Practical",
    "Well-paced",
];
const NOUN: &[&str] = &[
    "course",
    "material",
    "instructor",
    "content",
    "experience",
    "introduction",
    "labs",
    "exercises",
];
const SENTENCES: &[&str] = &[
    "The examples were clear and close to real work.",
    "I would have liked more exercises at the end of each module.",
    "The instructor explains difficult topics in plain words.",
    "Some videos were too long; the slides helped a lot.",
    "Worth the time if you already know the basics.",
    "The \"hands-on\" labs were the best part.",
    "Pacing was uneven: week 3 felt rushed.",
    "Support answered my questions within a day.",
    "Great value — I'd take the follow-up course.",
    "The quizzes tested recall rather than understanding.",
    "Clear structure, good references, friendly community 👍",
    "Audio quality could be better in the first chapters.",
    "I used what I learned at work the very next week.",
    "Too theoretical for my taste.\nStill, I learned a lot.",
    "Café-style discussions in the forum were a nice touch.",
    "Paths like C:\\data\\train.csv confused Windows users.",
];
const REPLIES: &[&str] = &[
    "Thank you for the feedback!",
    "Thanks, we are adding more exercises next term.",
    "Glad it helped — see you in the follow-up course.",
    "We re-recorded the first chapters; please have a look.",
    "Sorry to hear that; we have passed it on to the instructor.",
    "Thanks! The \"labs\" get an update next month.",
];

pub fn display_name(user_id: i64) -> String {
    let h = Rng::new(0x5EED, user_id as u64).next();
    let first = FIRST[(h % FIRST.len() as u64) as usize];
    let last = LAST[((h >> 16) % LAST.len() as u64) as usize];
    format!("{first} {last}")
}

/// Who may reply and who comments, scaled from the write-up's ids.
#[derive(Clone, Copy, Debug)]
pub struct Population {
    pub providers: i64,
    pub commenters_from: i64,
    pub users: i64,
}

impl Population {
    pub fn of(users: i64) -> Population {
        let providers = (users / 20).clamp(1, 49_999);
        Population {
            providers,
            commenters_from: (users / 2).max(providers + 1).min(users),
            users,
        }
    }
    pub fn provider_of(&self, course_id: i64) -> i64 {
        (course_id - 1) % self.providers + 1
    }
}

pub fn course_title(course_id: i64) -> String {
    let mut r = Rng::new(0xC0_55E, course_id as u64);
    format!("{} {} #{course_id}", r.pick(TOPICS), r.pick(LEVELS))
}

/// One row of `comments`.
#[derive(Clone, Debug)]
pub struct Row {
    pub id: i64,
    pub course_id: i64,
    pub user_id: i64,
    pub comment_type: &'static str,
    pub parent_id: Option<i64>,
    pub rating: Option<i32>,
    pub title: String,
    pub remarks: String,
    pub created_ms: i64,
}

#[derive(Clone, Debug)]
pub struct Snapshot {
    pub course_id: i64,
    pub user_id: i64,
    pub first_comment_id: i64,
    pub last: usize,
    /// Comments in the thread (the user's comments on the course).
    pub comment_count: i64,
}

/// Everything generated for a run of courses.
#[derive(Default)]
pub struct Chunk {
    pub first_course: i64,
    pub last_course: i64,
    pub rows: Vec<Row>,
    /// In primary-key order (course, user); `last` indexes `rows`.
    pub snapshots: Vec<Snapshot>,
    /// Per course: count, sum, stars 1..5.
    pub ratings: Vec<(i64, [i64; 7])>,
}

/// Whether comment `k` (0-based) of a course gets a reply: exactly
/// round(n * ratio) of them, spread evenly.
fn has_reply(k: i64, ratio: f64) -> bool {
    ((k + 1) as f64 * ratio).floor() > (k as f64 * ratio).floor()
}

pub struct Generator {
    pub args: SeedCommentsArgs,
    pub pop: Population,
    rows_per_course: i64,
}

impl Generator {
    pub fn new(args: &SeedCommentsArgs) -> Generator {
        let replies = (0..args.comments_per_course)
            .filter(|k| has_reply(*k, args.reply_ratio))
            .count() as i64;
        Generator {
            args: args.clone(),
            pop: Population::of(args.users),
            rows_per_course: args.comments_per_course + replies,
        }
    }

    pub fn replies_total(&self) -> i64 {
        (self.rows_per_course - self.args.comments_per_course) * self.args.courses
    }

    /// Courses `first..=last`, with ids that do not depend on other chunks.
    pub fn chunk(&self, first: i64, last: i64) -> Chunk {
        let mut c = Chunk {
            first_course: first,
            last_course: last,
            ..Chunk::default()
        };
        c.rows
            .reserve(((last - first + 1) * self.rows_per_course) as usize);
        for course in first..=last {
            self.course(course, &mut c);
        }
        c
    }

    fn course(&self, course_id: i64, out: &mut Chunk) {
        let a = &self.args;
        let mut r = Rng::new(a.seed, course_id as u64);
        let mut id = (course_id - 1) * self.rows_per_course + 1;
        let n = a.comments_per_course.max(1);
        let gap = SPAN_MS / n;
        let start = BASE_MS + (course_id % 1440) * 60_000;
        let provider = self.pop.provider_of(course_id);
        let mut rating = [0i64; 7];
        // user -> (first comment id, index of the last row, comments)
        let mut snaps: HashMap<i64, (i64, usize, i64)> = HashMap::with_capacity(n as usize);
        for k in 0..a.comments_per_course {
            let user = r.range(self.pop.commenters_from, self.pop.users);
            // Mostly good ratings, as on real course sites.
            let stars = [1, 2, 3, 3, 4, 4, 4, 5, 5, 5][r.range(0, 9) as usize];
            let created = start + k * gap + r.range(0, gap / 2);
            let sentences = r.range(1, 3);
            let mut remarks = String::with_capacity(160);
            for s in 0..sentences {
                if s > 0 {
                    remarks.push(' ');
                }
                remarks.push_str(r.pick(SENTENCES));
            }
            let title = format!("{} {}", r.pick(ADJ), r.pick(NOUN));
            let idx = out.rows.len();
            snaps
                .entry(user)
                .and_modify(|e| {
                    e.1 = idx;
                    e.2 += 1;
                })
                .or_insert((id, idx, 1));
            rating[0] += 1;
            rating[1] += stars as i64;
            rating[1 + stars as usize] += 1;
            out.rows.push(Row {
                id,
                course_id,
                user_id: user,
                comment_type: "Course",
                parent_id: None,
                rating: Some(stars),
                title,
                remarks,
                created_ms: created,
            });
            let comment_id = id;
            id += 1;
            if has_reply(k, a.reply_ratio) {
                out.rows.push(Row {
                    id,
                    course_id,
                    user_id: provider,
                    comment_type: "CourseReply",
                    parent_id: Some(comment_id),
                    rating: None,
                    title: if r.range(0, 3) == 0 {
                        String::new()
                    } else {
                        "Re: thanks".to_string()
                    },
                    remarks: r.pick(REPLIES).to_string(),
                    created_ms: created + r.range(3_600_000, 3 * DAY_MS),
                });
                id += 1;
            }
        }
        let mut users: Vec<_> = snaps.into_iter().collect();
        users.sort_unstable_by_key(|(u, _)| *u);
        out.snapshots.extend(
            users
                .into_iter()
                .map(|(user_id, (first, last, count))| Snapshot {
                    course_id,
                    user_id,
                    first_comment_id: first,
                    last,
                    comment_count: count,
                }),
        );
        out.ratings.push((course_id, rating));
        debug_assert_eq!(id, course_id * self.rows_per_course + 1);
    }
}

// ---------------------------------------------------------------- entry points

pub fn validate(args: &SeedCommentsArgs) -> anyhow::Result<()> {
    if !(2..=10_000_000).contains(&args.users) {
        anyhow::bail!("--users: 2 to 10000000");
    }
    if !(1..=1_000_000).contains(&args.courses) {
        anyhow::bail!("--courses: 1 to 1000000");
    }
    if !(0..=10_000).contains(&args.comments_per_course) {
        anyhow::bail!("--comments-per-course: 0 to 10000");
    }
    if !(0.0..=1.0).contains(&args.reply_ratio) {
        anyhow::bail!("--reply-ratio: 0 to 1");
    }
    if args.testdata_rows == 0 || args.testdata_rows > 1_000_000 {
        anyhow::bail!("--testdata-rows: 1 to 1000000");
    }
    Ok(())
}

fn progress_bar(total: u64, show: bool) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(total);
    b.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:40}] {human_pos}/{human_len} rows, {per_sec}, eta {eta}",
        )
        .unwrap()
        .progress_chars("=> "),
    );
    b.set_message("seeding comments");
    b
}

/// Seeds (unless data exists and only the CSV was asked for), then writes
/// the CSV if asked.
pub async fn seed(
    store: &Store,
    args: &SeedCommentsArgs,
    progress: bool,
) -> anyhow::Result<SeedReport> {
    validate(args)?;
    let started = Instant::now();
    let existing = existing_courses(store).await?;
    let mut report = SeedReport::default();
    let csv_only = existing > 0 && !args.force && args.testdata_csv.is_some();
    if !csv_only {
        if existing > 0 && !args.force {
            anyhow::bail!(
                "the store already has {existing} courses with comments data; pass --force to replace it"
            );
        }
        let gen = Generator::new(args);
        let snapshots = match store {
            Store::Sqlite(s) => {
                let (path, bar) = (s.path().to_path_buf(), progress);
                tokio::task::spawn_blocking(move || seed_sqlite(&path, gen, existing > 0, bar))
                    .await??
            }
            Store::Postgres(p) => seed_pg(p, gen, existing > 0, progress).await?,
        };
        let gen = Generator::new(args);
        report = SeedReport {
            users: args.users,
            courses: args.courses,
            comments: args.courses * args.comments_per_course,
            replies: gen.replies_total(),
            snapshots,
            seeded: true,
            ..report
        };
        append_seeded_event(store, &report).await?;
    }
    if let Some(path) = &args.testdata_csv {
        report.testdata_rows =
            write_testdata_csv(store, path, args.testdata_rows, args.seed).await?;
    }
    report.elapsed_s = started.elapsed().as_secs_f64();
    Ok(report)
}

async fn existing_courses(store: &Store) -> anyhow::Result<i64> {
    const SQL: &str = "SELECT COUNT(*) FROM comments_courses";
    Ok(match store {
        Store::Sqlite(s) => s.read(|c| Ok(c.query_row(SQL, [], |r| r.get(0))?)).await?,
        Store::Postgres(p) => p.client().await?.query_one(SQL, &[]).await?.get(0),
    })
}

async fn append_seeded_event(store: &Store, r: &SeedReport) -> anyhow::Result<()> {
    let event = NewEvent::json(
        "comments-seed",
        "CommentsSeeded",
        &serde_json::json!({
            "users": r.users, "courses": r.courses, "comments": r.comments, "replies": r.replies,
        }),
    );
    store.append_event(event).await?;
    Ok(())
}

/// The quick-start data set for `serve --demo`, when the store has none.
pub async fn seed_demo_if_empty(store: &Store) -> anyhow::Result<()> {
    if existing_courses(store).await? > 0 {
        return Ok(());
    }
    let args = SeedCommentsArgs::small(DEMO_USERS, DEMO_COURSES, DEMO_COMMENTS_PER_COURSE);
    let report = seed(store, &args, false).await?;
    tracing::info!(
        courses = report.courses,
        comments = report.comments,
        "seeded comments demo data"
    );
    Ok(())
}

/// Runs the generator on its own thread, `CHUNKS_AHEAD_MAX` chunks ahead.
fn spawn_generator(gen: Generator) -> mpsc::Receiver<Chunk> {
    let (tx, rx) = mpsc::sync_channel::<Chunk>(CHUNKS_AHEAD_MAX);
    std::thread::Builder::new()
        .name("seed-comments-gen".into())
        .spawn(move || {
            let mut first = 1;
            while first <= gen.args.courses {
                let last = (first + COURSES_PER_CHUNK - 1).min(gen.args.courses);
                if tx.send(gen.chunk(first, last)).is_err() {
                    return;
                }
                first = last + 1;
            }
        })
        .expect("spawn the generator thread");
    rx
}

fn total_rows(gen: &Generator) -> u64 {
    (gen.args.users + gen.args.courses + gen.args.courses * gen.rows_per_course) as u64
}

// -------------------------------------------------------------------- SQLite

const DELETE_ALL_SQLITE: &str = "BEGIN IMMEDIATE; DELETE FROM comments; DELETE FROM comments_snapshots;
    DELETE FROM comments_ratings; DELETE FROM comments_courses; DELETE FROM comments_users; COMMIT;";

fn seed_sqlite(path: &Path, gen: Generator, wipe: bool, progress: bool) -> anyhow::Result<i64> {
    let mut conn = crate::store::sqlite::open_connection(path, 256 * 1024, false)?;
    // Seeding is not serving: a crash mid-seed means seeding again (--force).
    // Every transaction is still committed; it is only not fsync'd one by one.
    conn.execute_batch("PRAGMA synchronous = OFF;")?;
    if wipe {
        conn.execute_batch(DELETE_ALL_SQLITE)?;
    }
    let bar = progress_bar(total_rows(&gen), progress);
    let mut user = 1;
    while user <= gen.args.users {
        let last = (user + USERS_PER_CHUNK - 1).min(gen.args.users);
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        {
            let mut ins =
                tx.prepare_cached("INSERT INTO comments_users (id, display_name) VALUES (?1, ?2)")?;
            for u in user..=last {
                ins.execute(rusqlite::params![u, display_name(u)])?;
            }
        }
        tx.commit()?;
        bar.inc((last - user + 1) as u64);
        user = last + 1;
    }
    let pop = gen.pop;
    let chunks = spawn_generator(gen);
    let mut snapshots = 0i64;
    for chunk in chunks {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        sqlite_insert_chunk(&tx, &chunk, &pop)?;
        tx.commit()?;
        snapshots += chunk.snapshots.len() as i64;
        bar.inc((chunk.rows.len() as i64 + chunk.last_course - chunk.first_course + 1) as u64);
    }
    bar.finish();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA analysis_limit = 1000; ANALYZE;")?;
    Ok(snapshots)
}

fn sqlite_insert_chunk(
    tx: &rusqlite::Connection,
    chunk: &Chunk,
    pop: &Population,
) -> anyhow::Result<()> {
    use rusqlite::params;
    let kind = CommentType::Course.as_str();
    let mut ins_course = tx.prepare_cached(
        "INSERT INTO comments_courses (id, provider_id, title) VALUES (?1, ?2, ?3)",
    )?;
    for course in chunk.first_course..=chunk.last_course {
        ins_course.execute(params![
            course,
            pop.provider_of(course),
            course_title(course)
        ])?;
    }
    // Rows go in primary-key order: every insert appends to the B-tree.
    let mut ins = tx.prepare_cached(
        "INSERT INTO comments (id, course_id, user_id, comment_type, parent_id, rating, title, remarks, created_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?;
    for r in &chunk.rows {
        ins.execute(params![
            r.id,
            r.course_id,
            r.user_id,
            r.comment_type,
            r.parent_id,
            r.rating,
            r.title,
            r.remarks,
            r.created_ms
        ])?;
    }
    let mut ins_snap = tx.prepare_cached(
        "INSERT INTO comments_snapshots (course_id, comment_type, user_id, first_comment_id, last_comment_id,
            last_title, last_rating, last_remarks, last_update_ms, display_name, comment_count)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?;
    // In the table's key order (course, type, last update, user): every
    // insert appends to the B-tree.
    let mut order: Vec<&Snapshot> = chunk.snapshots.iter().collect();
    order.sort_by_key(|s| (s.course_id, chunk.rows[s.last].created_ms, s.user_id));
    for s in order {
        let last = &chunk.rows[s.last];
        ins_snap.execute(params![
            s.course_id,
            kind,
            s.user_id,
            s.first_comment_id,
            last.id,
            last.title,
            last.rating,
            last.remarks,
            last.created_ms,
            display_name(s.user_id),
            s.comment_count
        ])?;
    }
    let mut ins_rating = tx.prepare_cached(
        "INSERT INTO comments_ratings (course_id, comment_type, count, sum, stars1, stars2, stars3, stars4,
            stars5, version) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 1)",
    )?;
    for (course, r) in &chunk.ratings {
        ins_rating.execute(params![
            course, kind, r[0], r[1], r[2], r[3], r[4], r[5], r[6]
        ])?;
    }
    Ok(())
}

// ---------------------------------------------------------------- PostgreSQL

async fn seed_pg(
    store: &crate::store::postgres::PgStore,
    gen: Generator,
    wipe: bool,
    progress: bool,
) -> anyhow::Result<i64> {
    let mut client = store.client().await?;
    if wipe {
        client
            .batch_execute(
                "TRUNCATE comments, comments_snapshots, comments_ratings, comments_courses, comments_users",
            )
            .await?;
    }
    let bar = progress_bar(total_rows(&gen), progress);
    let mut user = 1;
    while user <= gen.args.users {
        let last = (user + USERS_PER_CHUNK - 1).min(gen.args.users);
        let ids: Vec<i64> = (user..=last).collect();
        let names: Vec<String> = ids.iter().map(|u| display_name(*u)).collect();
        client
            .execute(
                "INSERT INTO comments_users (id, display_name) SELECT * FROM unnest($1::BIGINT[], $2::TEXT[])",
                &[&ids, &names],
            )
            .await?;
        bar.inc(ids.len() as u64);
        user = last + 1;
    }
    let pop = gen.pop;
    let chunks = spawn_generator(gen);
    // The blocking receiver runs on a blocking thread, handing chunks over.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Chunk>(1);
    tokio::task::spawn_blocking(move || {
        for chunk in chunks {
            if tx.blocking_send(chunk).is_err() {
                return;
            }
        }
    });
    let mut snapshots = 0i64;
    while let Some(chunk) = rx.recv().await {
        let t = client.transaction().await?;
        pg_insert_chunk(&t, &chunk, &pop).await?;
        t.commit().await?;
        snapshots += chunk.snapshots.len() as i64;
        bar.inc((chunk.rows.len() as i64 + chunk.last_course - chunk.first_course + 1) as u64);
    }
    bar.finish();
    client
        .batch_execute(
            "SELECT setval('comments_id_seq', (SELECT COALESCE(MAX(id), 0) + 1 FROM comments), false);
             ANALYZE comments_users; ANALYZE comments_courses; ANALYZE comments;
             ANALYZE comments_snapshots; ANALYZE comments_ratings;",
        )
        .await?;
    Ok(snapshots)
}

async fn pg_insert_chunk(
    t: &tokio_postgres::Transaction<'_>,
    chunk: &Chunk,
    pop: &Population,
) -> anyhow::Result<()> {
    let kind = CommentType::Course.as_str();
    let ids: Vec<i64> = (chunk.first_course..=chunk.last_course).collect();
    let providers: Vec<i64> = ids.iter().map(|c| pop.provider_of(*c)).collect();
    let titles: Vec<String> = ids.iter().map(|c| course_title(*c)).collect();
    t.execute(
        "INSERT INTO comments_courses (id, provider_id, title)
         SELECT * FROM unnest($1::BIGINT[], $2::BIGINT[], $3::TEXT[])",
        &[&ids, &providers, &titles],
    )
    .await?;
    let rows = &chunk.rows;
    let col = |f: fn(&Row) -> i64| rows.iter().map(f).collect::<Vec<i64>>();
    let (id, course, user, created) = (
        col(|r| r.id),
        col(|r| r.course_id),
        col(|r| r.user_id),
        col(|r| r.created_ms),
    );
    let types: Vec<&str> = rows.iter().map(|r| r.comment_type).collect();
    let parents: Vec<Option<i64>> = rows.iter().map(|r| r.parent_id).collect();
    let ratings: Vec<Option<i32>> = rows.iter().map(|r| r.rating).collect();
    let titles: Vec<&str> = rows.iter().map(|r| r.title.as_str()).collect();
    let remarks: Vec<&str> = rows.iter().map(|r| r.remarks.as_str()).collect();
    t.execute(
        "INSERT INTO comments (id, course_id, user_id, comment_type, parent_id, rating, title, remarks, created_ms)
         SELECT * FROM unnest($1::BIGINT[], $2::BIGINT[], $3::BIGINT[], $4::TEXT[], $5::BIGINT[], $6::INT[],
                              $7::TEXT[], $8::TEXT[], $9::BIGINT[])",
        &[&id, &course, &user, &types, &parents, &ratings, &titles, &remarks, &created],
    )
    .await?;
    let snaps = &chunk.snapshots;
    let s_course: Vec<i64> = snaps.iter().map(|s| s.course_id).collect();
    let s_user: Vec<i64> = snaps.iter().map(|s| s.user_id).collect();
    let s_first: Vec<i64> = snaps.iter().map(|s| s.first_comment_id).collect();
    let s_last: Vec<i64> = snaps.iter().map(|s| rows[s.last].id).collect();
    let s_title: Vec<&str> = snaps.iter().map(|s| rows[s.last].title.as_str()).collect();
    let s_rating: Vec<i32> = snaps
        .iter()
        .map(|s| rows[s.last].rating.unwrap_or(0))
        .collect();
    let s_remarks: Vec<&str> = snaps
        .iter()
        .map(|s| rows[s.last].remarks.as_str())
        .collect();
    let s_time: Vec<i64> = snaps.iter().map(|s| rows[s.last].created_ms).collect();
    let s_name: Vec<String> = snaps.iter().map(|s| display_name(s.user_id)).collect();
    let s_count: Vec<i32> = snaps.iter().map(|s| s.comment_count as i32).collect();
    t.execute(
        "INSERT INTO comments_snapshots (course_id, comment_type, user_id, first_comment_id, last_comment_id,
            last_title, last_rating, last_remarks, last_update_ms, display_name, comment_count)
         SELECT c, $2::TEXT, u, f, l, ti, ra, re, tm, dn, n FROM unnest($1::BIGINT[], $3::BIGINT[], $4::BIGINT[],
            $5::BIGINT[], $6::TEXT[], $7::INT[], $8::TEXT[], $9::BIGINT[], $10::TEXT[], $11::INT[])
            AS x(c, u, f, l, ti, ra, re, tm, dn, n)",
        &[&s_course, &kind, &s_user, &s_first, &s_last, &s_title, &s_rating, &s_remarks, &s_time, &s_name, &s_count],
    )
    .await?;
    let r_course: Vec<i64> = chunk.ratings.iter().map(|r| r.0).collect();
    let r_col = |i: usize| chunk.ratings.iter().map(|r| r.1[i]).collect::<Vec<i64>>();
    let (c0, c1, c2, c3, c4, c5, c6) = (
        r_col(0),
        r_col(1),
        r_col(2),
        r_col(3),
        r_col(4),
        r_col(5),
        r_col(6),
    );
    t.execute(
        "INSERT INTO comments_ratings (course_id, comment_type, count, sum, stars1, stars2, stars3, stars4,
            stars5, version)
         SELECT c, $2::TEXT, n, s, s1, s2, s3, s4, s5, 1 FROM unnest($1::BIGINT[], $3::BIGINT[], $4::BIGINT[],
            $5::BIGINT[], $6::BIGINT[], $7::BIGINT[], $8::BIGINT[], $9::BIGINT[]) AS x(c, n, s, s1, s2, s3, s4, s5)",
        &[&r_course, &kind, &c0, &c1, &c2, &c3, &c4, &c5, &c6],
    )
    .await?;
    Ok(())
}

// ---------------------------------------------------------------- testData.csv

/// Writes the Artillery payload with the write-up's columns (SnapShotId,
/// CommentType, CourseId, UserId, Skip, Size, SkipThread, SizeThread) and
/// its distributions (skip 0-3, size 2-10, skipThread 0 or 1 (0 in 8 of 10),
/// sizeThread 2-10) for random stored snapshots. No header row: Artillery
/// reads every line as data unless told to skip one.
pub async fn write_testdata_csv(
    store: &Store,
    path: &Path,
    rows: usize,
    seed: u64,
) -> anyhow::Result<usize> {
    let courses = existing_courses(store).await?;
    if courses == 0 {
        anyhow::bail!("no comments data to draw testData.csv from; seed first");
    }
    let mut r = Rng::new(seed, 0x7E57_DA7A);
    let picks: Vec<(i64, u64)> = (0..rows).map(|_| (r.range(1, courses), r.next())).collect();
    let users: Vec<Option<i64>> = match store {
        Store::Sqlite(s) => {
            let picks = picks.clone();
            s.read(move |c| {
                let mut stmt = c.prepare_cached(
                    "SELECT user_id FROM comments_snapshots WHERE course_id = ?1 AND comment_type = 'Course'
                     ORDER BY user_id",
                )?;
                let mut out = Vec::with_capacity(picks.len());
                for (course, h) in &picks {
                    let us: Vec<i64> = stmt.query_map([course], |r| r.get(0))?.collect::<Result<_, _>>()?;
                    out.push((!us.is_empty()).then(|| us[(*h % us.len() as u64) as usize]));
                }
                Ok(out)
            })
            .await?
        }
        Store::Postgres(p) => {
            let client = p.client().await?;
            let stmt = client
                .prepare(
                    "SELECT user_id FROM comments_snapshots WHERE course_id = $1 AND comment_type = 'Course'
                     ORDER BY user_id",
                )
                .await?;
            let mut out = Vec::with_capacity(picks.len());
            for (course, h) in &picks {
                let us: Vec<i64> = client
                    .query(&stmt, &[course])
                    .await?
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                out.push((!us.is_empty()).then(|| us[(*h % us.len() as u64) as usize]));
            }
            out
        }
    };
    let mut text = String::with_capacity(rows * 48);
    let mut written = 0;
    for ((course, _), user) in picks.iter().zip(users) {
        let Some(user) = user else { continue };
        written += 1;
        let skip_thread = if r.range(0, 9) < 8 { 0 } else { r.range(0, 1) };
        text.push_str(&format!(
            "{written},Course,{course},{user},{},{},{skip_thread},{}\n",
            r.range(0, 3),
            r.range(2, 10),
            r.range(2, 10)
        ));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_deterministic_and_consistent() {
        let args = SeedCommentsArgs::small(1000, 5, 8);
        let g = Generator::new(&args);
        let a = g.chunk(1, 5);
        let b = Generator::new(&args).chunk(3, 5);
        let a3: Vec<_> = a
            .rows
            .iter()
            .filter(|r| r.course_id >= 3)
            .map(|r| (r.id, r.remarks.clone()))
            .collect();
        let b3: Vec<_> = b.rows.iter().map(|r| (r.id, r.remarks.clone())).collect();
        assert_eq!(a3, b3, "a course's rows do not depend on the chunk");
        assert_eq!(a.rows.iter().filter(|r| r.parent_id.is_some()).count(), 20);
        assert_eq!(g.replies_total(), 20);
        for w in a.rows.windows(2) {
            assert!(w[0].id + 1 == w[1].id);
        }
        for r in &a.rows {
            if r.parent_id.is_none() {
                assert!((500..=1000).contains(&r.user_id));
            } else {
                assert_eq!(r.user_id, g.pop.provider_of(r.course_id));
            }
        }
        let total: i64 = a.ratings.iter().map(|r| r.1[0]).sum();
        assert_eq!(total, 40);
    }

    #[test]
    fn reply_ratio_is_exact() {
        assert_eq!((0..50).filter(|k| has_reply(*k, 0.5)).count(), 25);
        assert_eq!((0..50).filter(|k| has_reply(*k, 0.0)).count(), 0);
        assert_eq!((0..50).filter(|k| has_reply(*k, 1.0)).count(), 50);
    }

    #[test]
    fn population_matches_the_write_up_at_full_size() {
        let p = Population::of(1_000_000);
        assert_eq!((p.providers, p.commenters_from), (49_999, 500_000));
        assert!(p.provider_of(40_000) < 50_000);
    }
}
