//! Seeding an election in bulk ([`Store::bulk_load_replacing`]): its rows
//! in every voting table replaced by the new election's, the other
//! elections' kept.

use indicatif::ProgressBar;

use super::super::seed::{
    candidate_id, candidate_name, district_name, district_of, party_name, SeedVotingArgs,
    VOTERS_PER_CHUNK,
};
use super::{Votes, VotingStore};
use crate::store::bulk::{BulkTable, KeyedTable};
use crate::store::{Columns, Sql, Store};

/// Tables without statistics on SQLite, as the service has always run;
/// PostgreSQL gathers the roll's after the load ([`GATHER_STATISTICS`]).
static ELECTIONS: BulkTable = BulkTable {
    name: "voting_elections",
    columns: &[
        "id",
        "name",
        "opens_at_ms",
        "closes_at_ms",
        "candidates_per_vote_max",
        "public_key",
    ],
    analyze: false,
};
static DISTRICTS: BulkTable = BulkTable {
    name: "voting_districts",
    columns: &["election_id", "district_id", "name"],
    analyze: false,
};
static PARTIES: BulkTable = BulkTable {
    name: "voting_parties",
    columns: &["election_id", "party_id", "name", "short_name"],
    analyze: false,
};
static CANDIDATES: BulkTable = BulkTable {
    name: "voting_candidates",
    columns: &[
        "election_id",
        "candidate_id",
        "district_id",
        "party_id",
        "list_position",
        "name",
    ],
    analyze: false,
};
static VOTERS: BulkTable = BulkTable {
    name: "voting_voters",
    columns: &["election_id", "voter_id", "district_id"],
    analyze: false,
};

/// A table whose rows of the election a seed deletes and loads none of.
const fn emptied(name: &'static str) -> BulkTable {
    BulkTable {
        name,
        columns: &[],
        analyze: false,
    }
}
static TALLIES: BulkTable = emptied("voting_tallies");
static ROUNDS: BulkTable = emptied("voting_rounds");
static BALLOTS: BulkTable = emptied("voting_ballots");
static BALLOT_BOX: BulkTable = emptied("voting_ballot_box");
static RECEIPTS_COUNTED: BulkTable = emptied("voting_receipts_counted");
static MARKS: BulkTable = emptied("voting_marks");
static BOARD: BulkTable = emptied("voting_board");
static RESULTS: BulkTable = emptied("voting_results");
/// The intake and the marks folded into bits, of [`Votes::RollDecides`].
static BALLOT_INTAKE: BulkTable = emptied("voting_ballot_intake");
static MARKS_BITS: BulkTable = emptied("voting_marks_bits");

const fn of_election(table: &'static BulkTable) -> KeyedTable {
    KeyedTable {
        table,
        column: "election_id",
    }
}

/// Every voting table, with the column naming the election.
static ELECTION_TABLES: &[KeyedTable] = &[
    of_election(&TALLIES),
    of_election(&ROUNDS),
    of_election(&BALLOTS),
    of_election(&BALLOT_BOX),
    of_election(&RECEIPTS_COUNTED),
    of_election(&MARKS),
    of_election(&BOARD),
    of_election(&RESULTS),
    of_election(&VOTERS),
    of_election(&CANDIDATES),
    of_election(&PARTIES),
    of_election(&DISTRICTS),
    KeyedTable {
        table: &ELECTIONS,
        column: "id",
    },
];
/// [`ELECTION_TABLES`] and those of [`Votes::RollDecides`].
static ELECTION_TABLES_WITH_INTAKE: &[KeyedTable] = &[
    of_election(&BALLOT_INTAKE),
    of_election(&MARKS_BITS),
    of_election(&TALLIES),
    of_election(&ROUNDS),
    of_election(&BALLOTS),
    of_election(&BALLOT_BOX),
    of_election(&RECEIPTS_COUNTED),
    of_election(&MARKS),
    of_election(&BOARD),
    of_election(&RESULTS),
    of_election(&VOTERS),
    of_election(&CANDIDATES),
    of_election(&PARTIES),
    of_election(&DISTRICTS),
    KeyedTable {
        table: &ELECTIONS,
        column: "id",
    },
];

static ELECTION_EXISTS: Sql = Sql::new("SELECT COUNT(*) FROM voting_elections WHERE id = ?1");

/// PostgreSQL plans the roll's reads from statistics; SQLite's voting
/// tables run without.
static GATHER_STATISTICS: Sql = Sql::per_dialect("", "ANALYZE voting_voters");

/// Replaces the election `args` names with a new one and its roll, in bulk
/// (refused when the election exists, unless `--force`).
pub async fn seed_election(
    store: &Store,
    args: &SeedVotingArgs,
    opens: i64,
    closes: i64,
    public_key: &[u8],
    bar: &ProgressBar,
) -> anyhow::Result<()> {
    let e = args.election;
    let exists = store
        .read(move |c| {
            Box::pin(async move { c.query_one(&ELECTION_EXISTS, &[&e], |r| r.int(0)).await })
        })
        .await?;
    if exists > 0 && !args.force {
        anyhow::bail!(
            "election {e} exists; pass --force to replace it (this deletes its votes, ballots and tallies)"
        );
    }
    let tables = match VotingStore::open(store).votes {
        Votes::RollDecides => ELECTION_TABLES_WITH_INTAKE,
        Votes::MarksKeyDecides => ELECTION_TABLES,
    };
    let mut load = store.bulk_load_replacing(tables, e).await?;

    let mut election = load.rows(&ELECTIONS, 1, 96);
    let name = args.name.clone().unwrap_or_else(|| format!("Election {e}"));
    election
        .row()
        .int8(e)
        .text(&name)
        .int8(opens)
        .int8(closes)
        .int4(args.candidates_per_vote_max as i32)
        .bytes(public_key);
    load.send(election).await?;

    let mut districts = load.rows(&DISTRICTS, args.districts as usize, 48);
    for d in 1..=args.districts {
        districts.row().int8(e).int8(d).text(&district_name(d));
    }
    load.send(districts).await?;

    let mut parties = load.rows(&PARTIES, args.parties as usize, 64);
    for p in 1..=args.parties {
        let (name, short) = party_name(p);
        parties.row().int8(e).int8(p).text(&name).text(&short);
    }
    load.send(parties).await?;

    let candidates_n = (args.districts * args.parties * args.candidates_per_party) as usize;
    let mut candidates = load.rows(&CANDIDATES, candidates_n, 80);
    for d in 1..=args.districts {
        for p in 1..=args.parties {
            for pos in 1..=args.candidates_per_party {
                let id = candidate_id(args, d, p, pos);
                candidates
                    .row()
                    .int8(e)
                    .int8(id)
                    .int8(d)
                    .int8(p)
                    .int4(pos as i32)
                    .text(&candidate_name(id));
            }
        }
    }
    load.send(candidates).await?;

    // The roll in key order: on SQLite every insert appends to the B-tree's
    // rightmost page.
    let mut first = 1;
    while first <= args.voters {
        let last = (first + VOTERS_PER_CHUNK - 1).min(args.voters);
        let mut voters = load.rows(&VOTERS, (last - first + 1) as usize, 38);
        for v in first..=last {
            voters
                .row()
                .int8(e)
                .int8(v)
                .int8(district_of(e, v, args.districts));
        }
        load.send(voters).await?;
        bar.inc((last - first + 1) as u64);
        first = last + 1;
    }
    load.finish().await?;
    store
        .read_blocking(|c| Box::pin(c.batch(&GATHER_STATISTICS)))
        .await?;
    Ok(())
}
