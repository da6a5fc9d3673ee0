//! The data generator: a pure function of the arguments and `--seed`
//! (splitmix64, no clock), giving each run of courses its rows, snapshots
//! and rating aggregates, plus the names and titles derived from ids.

use std::collections::HashMap;

use super::SeedCommentsArgs;

/// 2024-01-01T00:00:00Z: the first comment time of every data set.
pub const BASE_MS: i64 = 1_704_067_200_000;
const DAY_MS: i64 = 86_400_000;
/// Comments of one course spread over this span.
const SPAN_MS: i64 = 365 * DAY_MS;

/// splitmix64: small, fast, and stable across crate versions (the data must
/// not change when a dependency does).
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64, stream: u64) -> Rng {
        let mut r = Rng(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03));
        r.next_u64();
        r
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        debug_assert!(lo <= hi);
        lo + (self.next_u64() % ((hi - lo + 1) as u64)) as i64
    }
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next_u64() % items.len() as u64) as usize]
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
/// Title adjectives by star rating (index 0 = 1 star), so a title agrees
/// with its stars.
const ADJ: [&[&str]; 5] = [
    &["Disappointing", "Confusing", "Frustrating"],
    &["Uneven", "Mediocre", "Dry"],
    &["Okay", "Decent", "Mixed"],
    &["Solid", "Useful", "Practical", "Well-paced"],
    &["Great", "Excellent", "Outstanding", "Inspiring"],
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
    let h = Rng::new(0x5EED, user_id as u64).next_u64();
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
    pub(in crate::services::comments) rows_per_course: i64,
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
            let title = format!("{} {}", r.pick(ADJ[(stars - 1) as usize]), r.pick(NOUN));
            let idx = out.rows.len();
            snaps
                .entry(user)
                .and_modify(|e| {
                    e.1 = idx;
                    e.2 += 1;
                })
                .or_insert((id, idx, 1));
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
        // Each user counts once, with their last rating (`LastRating`).
        for (_, (_, last, _)) in &users {
            let stars = out.rows[*last].rating.unwrap_or(0);
            if (1..=5).contains(&stars) {
                rating[0] += 1;
                rating[1] += stars as i64;
                rating[1 + stars as usize] += 1;
            }
        }
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
        assert_eq!(
            total,
            a.snapshots.len() as i64,
            "each user counts once per course"
        );
        for s in &a.snapshots {
            let last = &a.rows[s.last];
            let later = a.rows.iter().any(|r| {
                r.parent_id.is_none()
                    && r.course_id == s.course_id
                    && r.user_id == s.user_id
                    && (r.created_ms, r.id) > (last.created_ms, last.id)
            });
            assert!(!later, "the snapshot's last comment is the user's newest");
        }
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
