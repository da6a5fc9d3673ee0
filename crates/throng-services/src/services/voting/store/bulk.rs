//! Seeding an election in bulk, each database its own way: on SQLite
//! inserts in key order on a connection of its own, the roll in chunks of
//! transactions; on PostgreSQL `COPY`, all in one transaction. The one file
//! of the service that reaches a driver.

use indicatif::ProgressBar;

use super::super::seed::{
    candidate_id, candidate_name, district_name, district_of, party_name, SeedVotingArgs,
    VOTERS_PER_CHUNK,
};
use crate::store::{pg_placeholders, Store};

/// Replaces the election `args` names with a new one and its roll, in bulk
/// (refused when the election exists, unless `--force`).
pub async fn seed_election(
    store: &Store,
    args: &SeedVotingArgs,
    opens: i64,
    closes: i64,
    bar: &ProgressBar,
) -> anyhow::Result<()> {
    if let Some(s) = store.sqlite() {
        let (path, args, bar) = (s.path().to_path_buf(), args.clone(), bar.clone());
        return tokio::task::spawn_blocking(move || seed_sqlite(&path, &args, opens, closes, &bar))
            .await?;
    }
    match store.postgres() {
        Some(p) => seed_pg(p, args, opens, closes, bar).await,
        None => anyhow::bail!("a store is SQLite or PostgreSQL"),
    }
}

/// Every voting table, with the column naming the election.
const ELECTION_TABLES: &[(&str, &str)] = &[
    ("voting_tallies", "election_id"),
    ("voting_rounds", "election_id"),
    ("voting_ballots", "election_id"),
    ("voting_ballot_box", "election_id"),
    ("voting_receipts_counted", "election_id"),
    ("voting_marks", "election_id"),
    ("voting_voters", "election_id"),
    ("voting_candidates", "election_id"),
    ("voting_parties", "election_id"),
    ("voting_districts", "election_id"),
    ("voting_elections", "id"),
];
/// SQLite's intake and marks folded into bits (PostgreSQL writes votes into
/// the box and keeps marks by voter).
const SQLITE_ELECTION_TABLES: &[(&str, &str)] = &[
    ("voting_ballot_intake", "election_id"),
    ("voting_marks_bits", "election_id"),
];

/// SQL the same in both dialects (`?N`; `$N` through `pg_placeholders`).
const ELECTION_EXISTS: &str = "SELECT COUNT(*) FROM voting_elections WHERE id = ?1";
const INSERT_ELECTION: &str =
    "INSERT INTO voting_elections (id, name, opens_at_ms, closes_at_ms, candidates_per_vote_max)
             VALUES (?1, ?2, ?3, ?4, ?5)";

/// Deletes an election's rows from `table`.
fn delete_election_rows(table: &str, column: &str) -> String {
    format!("DELETE FROM {table} WHERE {column} = ?1")
}

fn refuse_reseed(exists: bool, args: &SeedVotingArgs) -> anyhow::Result<()> {
    if exists && !args.force {
        anyhow::bail!(
            "election {} exists; pass --force to replace it (this deletes its votes, ballots and tallies)",
            args.election
        );
    }
    Ok(())
}

fn election_name(args: &SeedVotingArgs) -> String {
    args.name
        .clone()
        .unwrap_or_else(|| format!("Election {}", args.election))
}

/// The bulk load into SQLite: the roll in key order, in transactions of
/// `VOTERS_PER_CHUNK` voters, on a connection of its own.
fn seed_sqlite(
    path: &std::path::Path,
    args: &SeedVotingArgs,
    opens: i64,
    closes: i64,
    bar: &ProgressBar,
) -> anyhow::Result<()> {
    let mut conn = crate::store::sqlite::open_connection(path, 64 * 1024, false)?;
    let e = args.election;
    let exists: i64 = conn.query_row(ELECTION_EXISTS, [e], |r| r.get(0))?;
    refuse_reseed(exists > 0, args)?;
    {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        for (table, column) in ELECTION_TABLES.iter().chain(SQLITE_ELECTION_TABLES) {
            tx.execute(&delete_election_rows(table, column), [e])?;
        }
        tx.execute(
            INSERT_ELECTION,
            rusqlite::params![
                e,
                election_name(args),
                opens,
                closes,
                args.candidates_per_vote_max
            ],
        )?;
        let mut district = tx.prepare(
            "INSERT INTO voting_districts (election_id, district_id, name) VALUES (?1, ?2, ?3)",
        )?;
        for d in 1..=args.districts {
            district.execute(rusqlite::params![e, d, district_name(d)])?;
        }
        let mut party = tx.prepare(
            "INSERT INTO voting_parties (election_id, party_id, name, short_name) VALUES (?1, ?2, ?3, ?4)",
        )?;
        for p in 1..=args.parties {
            let (name, short) = party_name(p);
            party.execute(rusqlite::params![e, p, name, short])?;
        }
        let mut candidate = tx.prepare(
            "INSERT INTO voting_candidates (election_id, candidate_id, district_id, party_id, list_position, name)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?;
        for d in 1..=args.districts {
            for p in 1..=args.parties {
                for pos in 1..=args.candidates_per_party {
                    let id = candidate_id(args, d, p, pos);
                    candidate.execute(rusqlite::params![e, id, d, p, pos, candidate_name(id)])?;
                }
            }
        }
        drop((district, party, candidate));
        tx.commit()?;
    }
    // The roll in key order: every insert appends to the B-tree's rightmost
    // page. A crash mid-load leaves a partial roll; seed again with --force.
    conn.execute_batch("PRAGMA synchronous = OFF")?;
    let mut first = 1;
    while first <= args.voters {
        let last = (first + VOTERS_PER_CHUNK - 1).min(args.voters);
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        {
            let mut voter = tx.prepare_cached(
                "INSERT INTO voting_voters (election_id, voter_id, district_id) VALUES (?1, ?2, ?3)",
            )?;
            for v in first..=last {
                voter.execute([e, v, district_of(e, v, args.districts)])?;
            }
        }
        tx.commit()?;
        bar.inc((last - first + 1) as u64);
        first = last + 1;
    }
    conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA wal_checkpoint(TRUNCATE);")?;
    Ok(())
}

/// The bulk load into PostgreSQL: `COPY`, in one transaction.
async fn seed_pg(
    store: &crate::store::postgres::PgStore,
    args: &SeedVotingArgs,
    opens: i64,
    closes: i64,
    bar: &ProgressBar,
) -> anyhow::Result<()> {
    use futures::SinkExt;
    let mut client = store.client().await?;
    let e = args.election;
    let exists: i64 = client
        .query_one(&pg_placeholders(ELECTION_EXISTS), &[&e])
        .await?
        .get(0);
    refuse_reseed(exists > 0, args)?;
    let tx = client.transaction().await?;
    for (table, column) in ELECTION_TABLES {
        tx.execute(
            &pg_placeholders(&delete_election_rows(table, column)),
            &[&e],
        )
        .await?;
    }
    tx.execute(
        &pg_placeholders(INSERT_ELECTION),
        &[
            &e,
            &election_name(args),
            &opens,
            &closes,
            &(args.candidates_per_vote_max as i32),
        ],
    )
    .await?;
    // Generated names hold no tabs, newlines or backslashes (COPY's text format).
    let copy = |sql: &'static str, text: String| {
        let tx = &tx;
        async move {
            let sink = tx.copy_in(sql).await?;
            futures::pin_mut!(sink);
            sink.send(bytes::Bytes::from(text)).await?;
            sink.finish().await?;
            Ok::<_, tokio_postgres::Error>(())
        }
    };
    let mut text = String::new();
    for d in 1..=args.districts {
        text.push_str(&format!("{e}\t{d}\t{}\n", district_name(d)));
    }
    copy(
        "COPY voting_districts (election_id, district_id, name) FROM STDIN",
        std::mem::take(&mut text),
    )
    .await?;
    for p in 1..=args.parties {
        let (name, short) = party_name(p);
        text.push_str(&format!("{e}\t{p}\t{name}\t{short}\n"));
    }
    copy(
        "COPY voting_parties (election_id, party_id, name, short_name) FROM STDIN",
        std::mem::take(&mut text),
    )
    .await?;
    for d in 1..=args.districts {
        for p in 1..=args.parties {
            for pos in 1..=args.candidates_per_party {
                let id = candidate_id(args, d, p, pos);
                text.push_str(&format!(
                    "{e}\t{id}\t{d}\t{p}\t{pos}\t{}\n",
                    candidate_name(id)
                ));
            }
        }
    }
    copy(
        "COPY voting_candidates (election_id, candidate_id, district_id, party_id, list_position, name) FROM STDIN",
        std::mem::take(&mut text),
    )
    .await?;
    let mut first = 1;
    while first <= args.voters {
        let last = (first + VOTERS_PER_CHUNK - 1).min(args.voters);
        let mut text = String::with_capacity(((last - first + 1) * 20) as usize);
        let mut int = itoa::Buffer::new();
        for v in first..=last {
            text.push_str(int.format(e));
            text.push('\t');
            text.push_str(int.format(v));
            text.push('\t');
            text.push_str(int.format(district_of(e, v, args.districts)));
            text.push('\n');
        }
        copy(
            "COPY voting_voters (election_id, voter_id, district_id) FROM STDIN",
            text,
        )
        .await?;
        bar.inc((last - first + 1) as u64);
        first = last + 1;
    }
    tx.commit().await?;
    client.batch_execute("ANALYZE voting_voters").await?;
    Ok(())
}
