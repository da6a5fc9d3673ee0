//! `throng voting ...`: an election authority's tools, talking to a
//! running server with an admin token.
//!
//! - `throng voting create FILE`: drafts an election from its definition
//!   (JSON, or YAML: `.yaml`/`.yml`); problems are shown with the path of
//!   the value at fault and, for YAML, its line.
//! - `throng voting roll ID FILE --credentials-out FILE`: imports the roll
//!   (CSV) with a progress bar and writes the voters' credentials (mode
//!   0600, never over an existing file).
//! - `throng voting key ID public.json`: gives a draft the public key of
//!   the trustees' key ceremony.
//! - `throng voting export-box ID --out box.json`: the closed election's
//!   sealed ballots, for the trustees' opening.
//! - `throng voting import-results ID results.json`: the trustees' opened
//!   results; the election becomes tallied (publish it next).
//!
//! The admin token is `--token` (or `THRONG_ADMIN_TOKEN`), else one made
//! with the token secret of `--data-dir` (the server's), naming `--as`.
//!
//! The trustees' commands run offline, on a machine away from the server
//! (`trustee.rs`, `opening.rs`):
//! - `throng voting keygen --threshold T --trustees N --out DIR`: the key
//!   ceremony: the public key file and a share file per trustee;
//! - `throng voting open --box BOX.json --share F ... [--board-digest HEX]
//!   --out RESULTS.json`: checks the exported box, opens it with at least
//!   T shares, writes the results;
//! - `throng voting recount RESULTS.json [--box BOX.json]`: recomputes the
//!   counts from the opened ballots (and checks them against the box).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::definition::{self, Definition, FieldProblem};
use super::{opening, trustee};
use crate::platform::auth::{Role, TokenKeys};

/// How long a token made here lives.
const CLI_TOKEN_TTL_S: u64 = 900;
/// Bytes read from the roll file per chunk sent.
const UPLOAD_CHUNK_BYTES: usize = 256 * 1024;

#[derive(clap::Args, Debug)]
pub struct Connection {
    /// The server.
    #[arg(long, env = "THRONG_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// An admin token (else made from --data-dir's token secret).
    #[arg(long, env = "THRONG_ADMIN_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The server's data directory, for its token secret.
    #[arg(long, env = "THRONG_DATA_DIR", default_value = "./throng-data")]
    pub data_dir: PathBuf,
    /// Who acts, as the election's log records it (the token's sub).
    #[arg(long = "as", env = "USER", default_value = "authority")]
    pub actor: String,
}

#[derive(clap::Subcommand, Debug)]
pub enum VotingCommand {
    /// Drafts an election from its definition (JSON or YAML); prints its id.
    Create {
        /// The definition: districts, parties, lists, times (see
        /// examples/voting/election.yaml).
        file: PathBuf,
        #[command(flatten)]
        conn: Connection,
    },
    /// Imports (replaces) a draft election's roll and writes the
    /// credentials.
    Roll {
        /// The election's id.
        id: i64,
        /// The roll: `voter_id,district` then a line per voter.
        file: PathBuf,
        /// Where the credentials go (`voter_id,credential`; created 0600,
        /// never over an existing file): the only copy.
        #[arg(long)]
        credentials_out: PathBuf,
        #[command(flatten)]
        conn: Connection,
    },
    /// Gives a draft election its public key (the key ceremony's
    /// public.json; the private key stays with the trustees).
    Key {
        /// The election's id.
        id: i64,
        /// The public key file.
        file: PathBuf,
        #[command(flatten)]
        conn: Connection,
    },
    /// Writes a closed election's ballot box (sealed ballots only) for the
    /// trustees, and prints its digest to check against the public board.
    ExportBox {
        /// The election's id.
        id: i64,
        /// Where the box goes (never over an existing file).
        #[arg(long)]
        out: PathBuf,
        #[command(flatten)]
        conn: Connection,
    },
    /// Imports the trustees' results file; the election becomes tallied.
    ImportResults {
        /// The election's id.
        id: i64,
        /// The results file the trustees' opening wrote.
        file: PathBuf,
        #[command(flatten)]
        conn: Connection,
    },
    /// The key ceremony (offline): makes the election's key and splits it
    /// among the trustees, any THRESHOLD of whom can open the box.
    Keygen {
        /// Shares needed to open the box (1..=trustees).
        #[arg(long)]
        threshold: usize,
        /// Shares made, one per trustee (at most 255).
        #[arg(long)]
        trustees: usize,
        /// A new or empty directory for the public key file and the share
        /// files (0600): hand each trustee theirs and delete it here.
        #[arg(long)]
        out: PathBuf,
    },
    /// Opens an exported ballot box with the trustees' shares (offline) and
    /// writes the results.
    Open {
        /// The box, as the server exports it once the election is closed.
        #[arg(long = "box", value_name = "BOX.json")]
        box_file: PathBuf,
        /// A trustee's share file; at least the threshold of them.
        #[arg(long = "share", value_name = "FILE", required = true)]
        shares: Vec<PathBuf>,
        /// The digest the public board published at the close (hex): a box
        /// that differs is refused.
        #[arg(long, value_name = "HEX")]
        board_digest: Option<String>,
        /// Where the results go (never over an existing file).
        #[arg(long, value_name = "RESULTS.json")]
        out: PathBuf,
    },
    /// Recounts a results file from its opened ballots (offline); with
    /// --box, checks it against the box it claims to open.
    Recount {
        /// The results file.
        #[arg(value_name = "RESULTS.json")]
        results: PathBuf,
        /// The box the results claim to open.
        #[arg(long = "box", value_name = "BOX.json")]
        box_file: Option<PathBuf>,
    },
}

/// The `throng voting` command.
pub fn command() -> clap::Command {
    use clap::Subcommand;
    VotingCommand::augment_subcommands(
        clap::Command::new("voting")
            .about(
                "An election authority's tools: draft an election, import its roll, give its \
                 key, export its box, import its results; the trustees' key ceremony, opening \
                 and recount",
            )
            .subcommand_required(true),
    )
}

pub async fn run(matches: &clap::ArgMatches) -> anyhow::Result<()> {
    use clap::FromArgMatches;
    match VotingCommand::from_arg_matches(matches)? {
        VotingCommand::Create { file, conn } => create(&file, &conn).await,
        VotingCommand::Roll {
            id,
            file,
            credentials_out,
            conn,
        } => roll(id, &file, &credentials_out, &conn).await,
        VotingCommand::Key { id, file, conn } => send_file(id, "key", &file, &conn).await,
        VotingCommand::ExportBox { id, out, conn } => export_box(id, &out, &conn).await,
        VotingCommand::ImportResults { id, file, conn } => {
            send_file(id, "results", &file, &conn).await
        }
        VotingCommand::Keygen {
            threshold,
            trustees,
            out,
        } => keygen(threshold, trustees, &out),
        VotingCommand::Open {
            box_file,
            shares,
            board_digest,
            out,
        } => {
            tokio::task::spawn_blocking(move || {
                open(&box_file, &shares, board_digest.as_deref(), &out)
            })
            .await?
        }
        VotingCommand::Recount { results, box_file } => {
            tokio::task::spawn_blocking(move || recount(&results, box_file.as_deref())).await?
        }
    }
}

/// PUTs a JSON file to the election's `what` and prints the state.
async fn send_file(id: i64, what: &str, file: &Path, conn: &Connection) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
    let res = client()?
        .put(format!(
            "{}/api/voting/elections/{id}/{what}",
            conn.url.trim_end_matches('/')
        ))
        .bearer_auth(token(conn)?)
        .header("content-type", "application/json")
        .body(text)
        .send()
        .await?;
    if !res.status().is_success() {
        anyhow::bail!(
            "the server refused {}: {}",
            file.display(),
            error_of(res).await
        );
    }
    let v: serde_json::Value = res.json().await?;
    println!(
        "election {id}: {}",
        v["state"].as_str().unwrap_or("(no state)")
    );
    Ok(())
}

fn keygen(threshold: usize, trustees: usize, out: &Path) -> anyhow::Result<()> {
    let ceremony = trustee::make_key(threshold, trustees, &mut rand::rngs::OsRng)?;
    let files = trustee::write_ceremony(out, &ceremony)?;
    println!(
        "made the election's key, split {threshold} of {trustees}:\n  public key: {} (configure \
         the election with it)",
        files[0].display()
    );
    for f in &files[1..] {
        println!("  share: {}", f.display());
    }
    println!(
        "hand each trustee their share file and delete it here; any {threshold} of them open \
         the box, fewer open nothing"
    );
    Ok(())
}

async fn export_box(id: i64, out: &Path, conn: &Connection) -> anyhow::Result<()> {
    let res = client()?
        .get(format!(
            "{}/api/voting/elections/{id}/box",
            conn.url.trim_end_matches('/')
        ))
        .bearer_auth(token(conn)?)
        .send()
        .await?;
    if !res.status().is_success() {
        anyhow::bail!("the server refused the export: {}", error_of(res).await);
    }
    let body = res.bytes().await?;
    let file: super::opening::BoxFile = serde_json::from_slice(&body)?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(out)
        .map_err(|e| anyhow::anyhow!("{}: {e}", out.display()))?;
    f.write_all(&body)?;
    f.sync_all()?;
    let ballots: usize = file.districts.iter().map(|d| d.ballots.len()).sum();
    println!(
        "wrote {ballots} sealed ballots of election {id} to {}; box digest {} (check it against \
         the public board: GET /api/voting/elections/{id}/board)",
        out.display(),
        file.digest
    );
    Ok(())
}

/// Ballots from which `open` shows a progress bar.
const OPEN_PROGRESS_FROM: usize = 10_000;

fn read_json<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> anyhow::Result<T> {
    let bytes =
        std::fs::read(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| anyhow::anyhow!("{} is not {what}: {e}", path.display()))
}

fn open(
    box_file: &Path,
    share_files: &[PathBuf],
    board_digest: Option<&str>,
    out: &Path,
) -> anyhow::Result<()> {
    if out.exists() {
        anyhow::bail!(
            "{} exists: the results go into a new file, never over another",
            out.display()
        );
    }
    let shares = share_files
        .iter()
        .map(|f| trustee::read_share(f))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let b: opening::BoxFile = read_json(box_file, "a ballot box (throng-ballot-box/1)")?;
    let total: usize = b.districts.iter().map(|d| d.ballots.len()).sum();
    let bar = crate::platform::progress::seed_bar(
        total as u64,
        "ballots",
        "opening",
        total >= OPEN_PROGRESS_FROM,
    );
    let started = std::time::Instant::now();
    let results = opening::open_box_with_shares(&b, &shares, board_digest, &|n| bar.inc(n))
        .map_err(|e| match e {
            opening::OpenError::Key(_) | opening::OpenError::KeyMismatch => anyhow::anyhow!("{e}"),
            e => anyhow::anyhow!("{}: {e}", box_file.display()),
        })?;
    bar.finish_and_clear();
    let elapsed = started.elapsed();
    let json = serde_json::to_vec(&results)?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(out)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", out.display()))?;
    if let Err(e) = f.write_all(&json).and_then(|_| f.sync_all()) {
        drop(f);
        let _ = std::fs::remove_file(out);
        anyhow::bail!("cannot write {}: {e}", out.display());
    }
    for u in &results.units {
        println!("{}", unit_line(u));
    }
    let spoiled: i64 = results.units.iter().map(|u| u.spoiled).sum();
    println!(
        "opened {total} ballots ({spoiled} spoiled) of election {} in {:.1} s; box digest {}; \
         results in {}",
        results.election_id,
        elapsed.as_secs_f64(),
        results.box_digest,
        out.display()
    );
    Ok(())
}

/// A unit's counts on one line: ballots, spoiled, then each party's votes.
fn unit_line(u: &opening::ResultsUnit) -> String {
    let unit = match u.kind {
        opening::UnitKind::District => format!("district {}", u.name),
        opening::UnitKind::Region => format!("region {}", u.name),
        opening::UnitKind::Rest => "rest".to_string(),
    };
    let parties: Vec<String> = u
        .parties
        .iter()
        .map(|p| format!("party {} {}", p.party_id, p.votes))
        .collect();
    format!(
        "{unit} (districts {:?}): {} ballots, {} spoiled; {}",
        u.district_ids,
        u.ballots,
        u.spoiled,
        parties.join(", ")
    )
}

fn recount(results: &Path, box_file: Option<&Path>) -> anyhow::Result<()> {
    let r: opening::ResultsFile = read_json(results, "a results file (throng-results/1)")?;
    let mut problems = opening::recount(&r).err().unwrap_or_default();
    if let Some(box_file) = box_file {
        let b: opening::BoxFile = read_json(box_file, "a ballot box (throng-ballot-box/1)")?;
        if let Err(more) = opening::check_against_box(&r, &b) {
            problems.extend(more.into_iter().map(|p| format!("against the box: {p}")));
        }
    }
    if !problems.is_empty() {
        anyhow::bail!(
            "the recount of {} differs:\n  {}",
            results.display(),
            problems.join("\n  ")
        );
    }
    let ballots: i64 = r.units.iter().map(|u| u.ballots).sum();
    println!(
        "recount matches: {} units, {ballots} ballots{}",
        r.units.len(),
        if box_file.is_some() {
            ", the box's districts and digest"
        } else {
            ""
        }
    );
    Ok(())
}

fn token(conn: &Connection) -> anyhow::Result<String> {
    if let Some(t) = &conn.token {
        return Ok(t.clone());
    }
    if std::env::var_os("THRONG_TOKEN_SECRET").is_none()
        && !conn.data_dir.join("token.secret").exists()
    {
        anyhow::bail!(
            "no admin token: pass --token (or THRONG_ADMIN_TOKEN), or --data-dir of the server \
             (no token.secret in {})",
            conn.data_dir.display()
        );
    }
    let secrets = crate::platform::secrets::Secrets::load_or_create(&conn.data_dir)?;
    let keys = TokenKeys::new(&secrets.token_secret);
    Ok(keys.issue(&conn.actor, Role::ADMIN, CLI_TOKEN_TTL_S))
}

fn client() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder().no_proxy().build()?)
}

/// The server's error message, or the status.
async fn error_of(res: reqwest::Response) -> String {
    let status = res.status();
    let text = res.text().await.unwrap_or_default();
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(v) if v["error"]["message"].is_string() => format!(
            "{} {}: {}",
            status.as_u16(),
            v["error"]["code"].as_str().unwrap_or(""),
            v["error"]["message"].as_str().unwrap_or("")
        ),
        _ => format!("{status}: {text}"),
    }
}

/// Problems as lines, each with its line in `yaml` when given.
fn report(file: &Path, yaml: Option<&str>, problems: &[FieldProblem]) -> String {
    problems
        .iter()
        .map(|p| {
            let line = yaml.and_then(|y| definition::yaml_line(y, &p.path));
            let at = match line {
                Some(l) => format!("{}:{l}", file.display()),
                None => file.display().to_string(),
            };
            if p.path.is_empty() {
                format!("{at}: {}", p.message)
            } else {
                format!("{at}: {}: {}", p.path, p.message)
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A definition file read and checked: its JSON, or every problem.
pub fn read_definition(file: &Path) -> anyhow::Result<serde_json::Value> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
    let is_yaml = file
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"));
    let value: serde_json::Value = if is_yaml {
        serde_yaml::from_str(&text).map_err(|e| match e.location() {
            Some(l) => anyhow::anyhow!("{}:{}: {e}", file.display(), l.line()),
            None => anyhow::anyhow!("{}: {e}", file.display()),
        })?
    } else {
        serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}:{}: {e}", file.display(), e.line()))?
    };
    let yaml = is_yaml.then_some(text.as_str());
    let parsed: Result<Definition, _> = serde_path_to_error::deserialize(value.clone());
    let problems = match parsed {
        Ok(d) => definition::check(d).err().unwrap_or_default(),
        Err(e) => {
            let path = e.path().to_string();
            vec![FieldProblem {
                path: if path == "." { String::new() } else { path },
                message: e.into_inner().to_string(),
            }]
        }
    };
    if !problems.is_empty() {
        anyhow::bail!(
            "the definition is refused:\n{}",
            report(file, yaml, &problems)
        );
    }
    Ok(value)
}

async fn create(file: &Path, conn: &Connection) -> anyhow::Result<()> {
    let body = read_definition(file)?;
    let res = client()?
        .post(format!(
            "{}/api/voting/elections",
            conn.url.trim_end_matches('/')
        ))
        .bearer_auth(token(conn)?)
        .json(&body)
        .send()
        .await?;
    if !res.status().is_success() {
        anyhow::bail!("the server refused the definition: {}", error_of(res).await);
    }
    let v: serde_json::Value = res.json().await?;
    let id = v["electionId"].as_i64().unwrap_or_default();
    println!("drafted election {id}");
    println!("next: throng voting roll {id} ROLL.csv --credentials-out credentials-{id}.csv");
    Ok(())
}

async fn roll(id: i64, file: &Path, out: &Path, conn: &Connection) -> anyhow::Result<()> {
    use tokio::io::AsyncReadExt;
    let mut credentials = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(out)
        .map_err(|e| anyhow::anyhow!("cannot create {} (it must not exist): {e}", out.display()))?;
    let result = async {
        let size = std::fs::metadata(file)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?
            .len();
        let bar = crate::platform::progress::seed_bar(size, "bytes", "sending the roll", true);
        let mut source = tokio::fs::File::open(file).await?;
        let sent = bar.clone();
        let chunks = async_stream(move |tx| async move {
            let mut buf = vec![0u8; UPLOAD_CHUNK_BYTES];
            loop {
                match source.read(&mut buf).await {
                    Ok(0) => return,
                    Ok(n) => {
                        sent.inc(n as u64);
                        if tx
                            .send(Ok(bytes::Bytes::copy_from_slice(&buf[..n])))
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                }
            }
        });
        let res = client()?
            .put(format!(
                "{}/api/voting/elections/{id}/roll",
                conn.url.trim_end_matches('/')
            ))
            .bearer_auth(token(conn)?)
            .header("content-type", "text/csv")
            .header("content-length", size)
            .body(reqwest::Body::wrap_stream(chunks))
            .send()
            .await?;
        bar.finish_and_clear();
        if !res.status().is_success() {
            anyhow::bail!("the server refused the roll: {}", error_of(res).await);
        }
        let mut res = res;
        let mut lines = 0u64;
        while let Some(chunk) = res.chunk().await? {
            lines += chunk.iter().filter(|b| **b == b'\n').count() as u64;
            credentials.write_all(&chunk)?;
        }
        credentials.sync_all()?;
        Ok(lines.saturating_sub(1))
    }
    .await;
    match result {
        Ok(voters) => {
            println!(
                "imported {voters} voters into election {id}; their credentials are in {} \
                 (the only copy: hand each voter theirs, keep the file safe)",
                out.display()
            );
            Ok(())
        }
        Err(e) => {
            drop(credentials);
            let _ = std::fs::remove_file(out);
            Err(e)
        }
    }
}

/// A stream fed by `f` through a bounded channel.
fn async_stream<F, Fut, T>(f: F) -> impl futures::Stream<Item = T>
where
    F: FnOnce(tokio::sync::mpsc::Sender<T>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
    T: Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(f(tx));
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|v| (v, rx)) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/voting")
            .join(name)
    }

    #[test]
    fn the_examples_read_alike() {
        let json = read_definition(&example("election.json")).unwrap();
        let yaml = read_definition(&example("election.yaml")).unwrap();
        assert_eq!(json, yaml);
    }

    #[test]
    fn yaml_problems_name_their_lines() {
        let text = std::fs::read_to_string(example("election.yaml"))
            .unwrap()
            .replace("colour: \"#4e79a7\"", "colour: blue")
            .replace("  - code: S\n", "  - code: N\n");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bad.yaml");
        std::fs::write(&file, &text).unwrap();
        let err = read_definition(&file).unwrap_err().to_string();
        let line_of = |needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
        assert!(
            err.contains(&format!(
                "bad.yaml:{}: parties[1].colour:",
                line_of("colour: blue")
            )),
            "{err}"
        );
        let second_n = text
            .lines()
            .enumerate()
            .filter(|(_, l)| l.trim() == "- code: N")
            .nth(1)
            .unwrap()
            .0
            + 1;
        assert!(
            err.contains(&format!("bad.yaml:{second_n}: districts[1].code:")),
            "{err}"
        );
        std::fs::write(&file, "name: [unclosed\n").unwrap();
        let err = read_definition(&file).unwrap_err().to_string();
        assert!(
            err.contains("bad.yaml:1:") || err.contains("bad.yaml:2:"),
            "{err}"
        );
    }
}
