//! The `throng` command line: thin glue over `app`, the services' seeds, the
//! token issuer, the load generator and the bench harness.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::app::{self, ServeArgs, StoreArgs};
use crate::platform::auth::{RoleSpec, TokenKeys, PLATFORM_ROLES};
use crate::platform::secrets::Secrets;
use crate::platform::service::AnyService;
use crate::platform::session::{Sessions, VerifiedClaims};
use crate::services;

#[derive(Parser, Debug)]
#[command(
    name = "throng",
    version,
    about = "Public web services that hold under a launch-day crowd"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// A configuration file (TOML): keys are `serve`'s long flag names
    /// (`listen = "0.0.0.0:8080"`); a flag given here or in the
    /// environment wins over the file. For `load run`: an Artillery
    /// configuration (YAML) the script is merged over.
    #[arg(long, env = "THRONG_CONFIG", global = true, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the HTTP server.
    Serve(ServeArgs),
    /// Load a data set into the store.
    Seed(SeedArgs),
    /// Print a signed bearer token.
    Token(TokenArgs),
    /// The admin console: print a one-time sign-in link.
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
    /// Generate load: Artillery scripts (`run`) or one URL, wrk2-style (`url`).
    Load {
        #[command(subcommand)]
        command: throng_load::cli::LoadCommand,
    },
    /// Reproduce a write-up's experiment against a child server.
    Bench(crate::bench::harness::BenchArgs),
    /// Write a consistent copy of the store while it serves, and its
    /// secrets apart (FILE.secrets).
    Backup(BackupArgs),
    /// Check a backup and put it in place as the store, with its secrets.
    Restore(RestoreArgs),
    /// A service's own command (`throng voting ...`).
    #[command(flatten)]
    Service(ServiceCommand),
    /// A service's own commands on the store (`throng NAME ...`,
    /// from `Service::store_command`).
    #[command(flatten)]
    StoreService(ServiceWhat),
    /// `throng bench`'s child server: `serve` plus an experiment's
    /// comparison designs. Internal (hidden); the product never runs it.
    #[command(name = "bench-server", hide = true)]
    BenchServer(BenchServerArgs),
}

#[derive(clap::Args, Debug)]
pub struct BenchServerArgs {
    /// The experiment whose comparison designs run beside the services.
    pub experiment: String,
    #[command(flatten)]
    pub serve: ServeArgs,
    /// The comparison designs' own flags. Their values reach the designs
    /// through `serve`'s service matches, which hold the whole command's.
    #[command(flatten)]
    pub comparisons: crate::bench::ComparisonArgs,
}

/// `throng NAME ...`: a service's own command (`Service::command`), kept
/// as the service and its matches.
#[derive(Clone)]
pub struct ServiceCommand {
    pub service: &'static dyn AnyService,
    pub matches: clap::ArgMatches,
}

impl std::fmt::Debug for ServiceCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceCommand")
            .field("service", &self.service.name())
            .finish_non_exhaustive()
    }
}

impl clap::FromArgMatches for ServiceCommand {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let (name, sub) = m.subcommand().ok_or_else(|| {
            clap::Error::raw(clap::error::ErrorKind::MissingSubcommand, "name a command")
        })?;
        let service = services::all()
            .iter()
            .find(|s| s.name() == name && s.command().is_some())
            .ok_or_else(|| {
                clap::Error::raw(
                    clap::error::ErrorKind::InvalidSubcommand,
                    format!("no command named {name}"),
                )
            })?;
        Ok(ServiceCommand {
            service: *service,
            matches: sub.clone(),
        })
    }
    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Subcommand for ServiceCommand {
    fn augment_subcommands(cmd: clap::Command) -> clap::Command {
        services::all()
            .iter()
            .filter_map(|s| s.command())
            .fold(cmd, |c, sub| c.subcommand(sub))
    }
    fn augment_subcommands_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_subcommands(cmd)
    }
    fn has_subcommand(name: &str) -> bool {
        services::all()
            .iter()
            .any(|s| s.name() == name && s.command().is_some())
    }
}

#[derive(clap::Args, Debug)]
pub struct SeedArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(subcommand)]
    pub what: SeedWhat,
}

/// `throng seed NAME ...`: one subcommand per service that has a seed
/// (`Service::seed_command`), kept as the service and its matches.
#[derive(Clone)]
pub struct SeedWhat {
    pub service: &'static dyn AnyService,
    pub matches: clap::ArgMatches,
}

impl std::fmt::Debug for SeedWhat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeedWhat")
            .field("service", &self.service.name())
            .finish_non_exhaustive()
    }
}

impl clap::FromArgMatches for SeedWhat {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let (name, sub) = m.subcommand().ok_or_else(|| {
            clap::Error::raw(
                clap::error::ErrorKind::MissingSubcommand,
                "name what to seed",
            )
        })?;
        let service = services::all()
            .iter()
            .find(|s| s.name() == name && s.seed_command().is_some())
            .ok_or_else(|| {
                clap::Error::raw(
                    clap::error::ErrorKind::InvalidSubcommand,
                    format!("no service named {name} has a seed"),
                )
            })?;
        Ok(SeedWhat {
            service: *service,
            matches: sub.clone(),
        })
    }
    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Subcommand for SeedWhat {
    fn augment_subcommands(cmd: clap::Command) -> clap::Command {
        services::all()
            .iter()
            .filter_map(|s| s.seed_command())
            .fold(cmd, |c, sub| c.subcommand(sub))
            .subcommand_required(true)
    }
    fn augment_subcommands_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_subcommands(cmd)
    }
    fn has_subcommand(name: &str) -> bool {
        services::all()
            .iter()
            .any(|s| s.name() == name && s.seed_command().is_some())
    }
}

/// `throng NAME ...`: a service's operator commands
/// (`Service::store_command`), with the store flags, kept as the service and its
/// matches.
#[derive(Clone)]
pub struct ServiceWhat {
    pub service: &'static dyn AnyService,
    pub matches: clap::ArgMatches,
}

impl std::fmt::Debug for ServiceWhat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceWhat")
            .field("service", &self.service.name())
            .finish_non_exhaustive()
    }
}

impl clap::FromArgMatches for ServiceWhat {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let (name, sub) = m.subcommand().ok_or_else(|| {
            clap::Error::raw(clap::error::ErrorKind::MissingSubcommand, "name a command")
        })?;
        let service = services::all()
            .iter()
            .find(|s| s.name() == name && s.store_command().is_some())
            .ok_or_else(|| {
                clap::Error::raw(
                    clap::error::ErrorKind::InvalidSubcommand,
                    format!("no service named {name} has commands"),
                )
            })?;
        Ok(ServiceWhat {
            service: *service,
            matches: sub.clone(),
        })
    }
    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Subcommand for ServiceWhat {
    fn augment_subcommands(cmd: clap::Command) -> clap::Command {
        services::all()
            .iter()
            .filter_map(|s| s.store_command())
            .map(|c| {
                // The store's flags, keeping the command's own about.
                let about = c.get_about().cloned();
                let c = <StoreArgs as clap::Args>::augment_args(c).subcommand_required(true);
                match about {
                    Some(a) => c.about(a),
                    None => c,
                }
            })
            .fold(cmd, |c, sub| c.subcommand(sub))
    }
    fn augment_subcommands_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_subcommands(cmd)
    }
    fn has_subcommand(name: &str) -> bool {
        services::all()
            .iter()
            .any(|s| s.name() == name && s.store_command().is_some())
    }
}

#[derive(clap::Args, Debug)]
pub struct BackupArgs {
    /// Where the copy goes (replaced if there). The secrets go to
    /// FILE.secrets: keep the two apart, whoever holds both holds the
    /// personal data.
    #[arg(long, value_name = "FILE")]
    pub to: std::path::PathBuf,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(clap::Args, Debug)]
pub struct RestoreArgs {
    /// The copy `throng backup` wrote.
    #[arg(value_name = "FILE")]
    pub from: std::path::PathBuf,
    /// The secrets bundle written with it (default FILE.secrets).
    #[arg(long, value_name = "FILE")]
    pub secrets: Option<std::path::PathBuf>,
    /// Replace the store (and secrets) already there; stop its servers
    /// first.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `throng token --sub ... --role ...` prints a token; `throng token
/// revoke ...` revokes.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct TokenArgs {
    #[command(subcommand)]
    pub action: Option<TokenAction>,
    /// Subject: the user's or provider's id.
    #[arg(long, required = true)]
    pub sub: Option<String>,
    /// The role: admin, or one a service declares (see `--help`).
    #[arg(long, value_parser = role_names(), required = true)]
    pub role: Option<String>,
    /// Lifetime in seconds.
    #[arg(long, default_value_t = 24 * 3600)]
    pub ttl_s: u64,
    /// Folder holding the token secret (as for `serve`).
    #[arg(long, env = "THRONG_DATA_DIR", default_value = "./throng-data")]
    pub data_dir: std::path::PathBuf,
    /// An extra claim, KEY=VALUE (repeatable); an integer VALUE becomes a
    /// JSON number, anything else a string. sub, role, iat, exp and jti
    /// are reserved. E.g. `--role voter --claim district=7 --claim
    /// election=1`.
    #[arg(long = "claim", value_name = "KEY=VALUE", value_parser = parse_claim)]
    pub claims: Vec<(String, serde_json::Value)>,
}

#[derive(Subcommand, Debug)]
pub enum AdminCommand {
    /// Store a one-time sign-in link to the admin console (/admin/) and
    /// print it: it signs in once, within --ttl-s, on any node sharing
    /// this store.
    Link(AdminLinkArgs),
}

#[derive(clap::Args, Debug)]
pub struct AdminLinkArgs {
    /// Subject: who signs in (an e-mail address, a staff id).
    #[arg(long)]
    pub sub: String,
    /// The session's role: admin, or an administrative role a service
    /// declares (see `--help`).
    #[arg(long, value_parser = console_role_names())]
    pub role: String,
    /// A claim of the session, KEY=VALUE (repeatable), as for `throng
    /// token`: e.g. `--role staff --claim places=12,15`.
    #[arg(long = "claim", value_name = "KEY=VALUE", value_parser = parse_claim)]
    pub claims: Vec<(String, serde_json::Value)>,
    /// Seconds the link may be used in, at most 600.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub ttl_s: u64,
    /// The URL browsers reach the server at (as for `serve`).
    #[arg(long, env = "THRONG_PUBLIC_URL", default_value = "http://127.0.0.1:8080", value_parser = crate::platform::public_url::parse)]
    pub public_url: String,
    #[command(flatten)]
    pub store: StoreArgs,
}

#[derive(Subcommand, Debug)]
pub enum TokenAction {
    /// Revoke one token (--jti) or every token of a subject issued up to
    /// now (--sub), throng's own or the identity provider's, on every node
    /// sharing the store (within their --revocation-refresh-ms).
    Revoke(RevokeArgs),
}

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["jti", "sub"])))]
pub struct RevokeArgs {
    /// The token's id (its `jti` claim).
    #[arg(long)]
    pub jti: Option<String>,
    /// A subject (`sub`): its tokens issued up to now are refused.
    #[arg(long)]
    pub sub: Option<String>,
    /// Refused until then (RFC 3339, e.g. 2026-12-01T18:00:00Z): the
    /// revoked tokens' expiry at least. Default: 24 hours from now (the
    /// default lifetime of throng's tokens); give a provider's token
    /// lifetime if it is longer.
    #[arg(long)]
    pub until: Option<String>,
    /// Why, for the list of revocations.
    #[arg(long)]
    pub reason: Option<String>,
    #[command(flatten)]
    pub store: StoreArgs,
}

fn parse_claim(s: &str) -> Result<(String, serde_json::Value), String> {
    let (key, value) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}': expected KEY=VALUE"))?;
    let key = key.trim();
    if key.is_empty() {
        return Err(format!("'{s}': the key is empty"));
    }
    if crate::platform::auth::RESERVED_CLAIMS.contains(&key) {
        return Err(format!("'{key}' is reserved (set it with its own flag)"));
    }
    let value = match value.parse::<i64>() {
        Ok(n) => serde_json::Value::from(n),
        Err(_) => serde_json::Value::from(value),
    };
    Ok((key.to_string(), value))
}

pub fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Serve(args) => runtime().block_on(serve(args, services::all())),
        Command::BenchServer(args) => crate::bench::child_services(&args.experiment)
            .and_then(|list| runtime().block_on(serve(args.serve, list))),
        Command::Seed(args) => runtime().block_on(seed(args)),
        Command::StoreService(what) => runtime().block_on(service_command(what)),
        Command::Token(TokenArgs {
            action: Some(TokenAction::Revoke(args)),
            ..
        }) => runtime().block_on(revoke(args)),
        Command::Token(args) => token(args),
        Command::Admin {
            command: AdminCommand::Link(args),
        } => runtime().block_on(admin_link(args)),
        Command::Service(c) => runtime().block_on(c.service.run_command(&c.matches)),
        Command::Load { mut command } => {
            // `throng load run --config FILE`: Artillery's configuration file, as given on
            // the command line (THRONG_CONFIG is the server's).
            if let throng_load::cli::LoadCommand::Run(run) = &mut command {
                run.config = crate::config::given(&std::env::args_os().collect::<Vec<_>>());
            }
            return ExitCode::from(throng_load::cli::execute(command).clamp(0, 255) as u8);
        }
        Command::Bench(args) => crate::bench::harness::run(args),
        Command::Backup(args) => runtime().block_on(backup(args)),
        Command::Restore(args) => runtime().block_on(restore(args)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

async fn serve(args: ServeArgs, list: &'static [&'static dyn AnyService]) -> anyhow::Result<()> {
    let drain = std::time::Duration::from_millis(args.drain_ms);
    let mut running = app::start_for(args, list).await?;
    println!("throng listening on http://{}", running.addr);
    // What only ran at start (and the command line, seeding, the benches,
    // the load generator) need not stay resident while serving.
    tokio::task::spawn_blocking(|| {
        let advised = crate::startup_code::page_out();
        tracing::debug!(advised, "binary pages advised out after start");
    });
    if let Some(at) = running.metrics_addr {
        println!("throng metrics on http://{at}/metrics");
    }
    let stop = running.shutdown_handle();
    let state = running.state.clone();
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("signal handler");
        signalled(&mut term).await;
        // Drain: fail /ready while serving, so a balancer's health checks
        // take this node out before it stops accepting.
        state.begin_drain();
        tracing::info!(
            drain_ms = drain.as_millis() as u64,
            "draining: /ready answers 503"
        );
        tokio::select! {
            _ = tokio::time::sleep(drain) => {}
            _ = signalled(&mut term) => tracing::info!("second signal: draining cut short"),
        }
        tracing::info!("shutting down: no new connections, finishing requests in flight");
        if let Some(tx) = stop {
            let _ = tx.send(());
        }
    });
    running.wait().await;
    Ok(())
}

/// SIGTERM or Ctrl-C.
async fn signalled(term: &mut tokio::signal::unix::Signal) {
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

async fn seed(args: SeedArgs) -> anyhow::Result<()> {
    let (store, _) = app::open_store(&args.store).await?;
    args.what.service.seed(&store, &args.what.matches).await
}

fn secrets_path(copy: &std::path::Path) -> std::path::PathBuf {
    let mut name = copy.as_os_str().to_os_string();
    name.push(".secrets");
    name.into()
}

async fn backup(args: BackupArgs) -> anyhow::Result<()> {
    let copy = crate::store::backup::backup(&args.store.url(), &args.to).await?;
    let secrets_to = secrets_path(&args.to);
    let names = crate::platform::secrets::write_bundle(&args.store.data_dir, &secrets_to)?;
    println!(
        "store copied to {} ({:.1} MB in {:.2} s)",
        args.to.display(),
        copy.bytes as f64 / 1e6,
        copy.elapsed.as_secs_f64()
    );
    if names.is_empty() {
        println!(
            "no secret files in {}: the secrets come from the environment; keep them with \
             this backup's records",
            args.store.data_dir.display()
        );
    } else {
        println!(
            "secrets ({}) to {}: keep it apart from the copy",
            names.join(", "),
            secrets_to.display()
        );
    }
    Ok(())
}

async fn restore(args: RestoreArgs) -> anyhow::Result<()> {
    let secrets_from = args.secrets.unwrap_or_else(|| secrets_path(&args.from));
    // Both are checked before either is installed.
    anyhow::ensure!(
        secrets_from.is_file(),
        "no secrets bundle at {} (name it with --secrets)",
        secrets_from.display()
    );
    let copy = crate::store::backup::restore(&args.store.url(), &args.from, args.force).await?;
    let names =
        crate::platform::secrets::install_bundle(&secrets_from, &args.store.data_dir, args.force)?;
    println!(
        "store restored from {} ({:.1} MB in {:.2} s) with its secrets ({}); start the server",
        args.from.display(),
        copy.bytes as f64 / 1e6,
        copy.elapsed.as_secs_f64(),
        names.join(", ")
    );
    Ok(())
}

async fn service_command(what: ServiceWhat) -> anyhow::Result<()> {
    let store_args = <StoreArgs as clap::FromArgMatches>::from_arg_matches(&what.matches)?;
    let (store, _) = app::open_store(&store_args).await?;
    what.service.run_store_command(&store, &what.matches).await
}

/// Every role a token can carry: the platform's and each service's.
fn all_roles() -> impl Iterator<Item = &'static RoleSpec> {
    PLATFORM_ROLES
        .iter()
        .chain(services::all().iter().flat_map(|s| s.roles().iter()))
}

fn role_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(
        all_roles().map(|r| clap::builder::PossibleValue::new(r.role.name()).help(r.about)),
    )
}

/// The roles that may sign in to the console.
fn console_role_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(
        all_roles()
            .filter(|r| r.console)
            .map(|r| clap::builder::PossibleValue::new(r.role.name()).help(r.about)),
    )
}

async fn admin_link(args: AdminLinkArgs) -> anyhow::Result<()> {
    let extra: serde_json::Map<String, serde_json::Value> = args.claims.into_iter().collect();
    let spec = all_roles()
        .find(|r| r.role.name() == args.role && r.console)
        .ok_or_else(|| anyhow::anyhow!("no console role named {}", args.role))?;
    check_role_claims(spec, &extra)?;
    let (store, _) = app::open_store(&args.store).await?;
    let sessions = Sessions::new(
        store,
        crate::base::clock::Clock::system(),
        crate::platform::public_url::PublicUrl::new(
            Some(args.public_url.clone()),
            std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        ),
    );
    let claims = VerifiedClaims {
        sub: args.sub,
        role: spec.role.name().to_string(),
        extra,
    };
    let secret = sessions
        .create_link(&claims, args.ttl_s as i64 * 1000)
        .await?;
    println!("{}", Sessions::link_url(&args.public_url, &secret));
    eprintln!(
        "signs {} in as {} once, within {} s; open it in the browser",
        claims.sub, claims.role, args.ttl_s
    );
    Ok(())
}

fn token(args: TokenArgs) -> anyhow::Result<()> {
    let (Some(sub), Some(role)) = (args.sub, args.role) else {
        anyhow::bail!("give --sub and --role (or `throng token revoke`)");
    };
    let extra: serde_json::Map<String, serde_json::Value> = args.claims.into_iter().collect();
    let spec = all_roles()
        .find(|r| r.role.name() == role)
        .ok_or_else(|| anyhow::anyhow!("no role named {role}"))?;
    check_role_claims(spec, &extra)?;
    let secrets = Secrets::load_or_create(&args.data_dir)?;
    let keys = TokenKeys::new(&secrets.token_secret);
    println!("{}", keys.issue_with(&sub, spec.role, args.ttl_s, extra));
    Ok(())
}

/// `throng token revoke`: records the revocation in the store, which every
/// serving node reads.
async fn revoke(args: RevokeArgs) -> anyhow::Result<()> {
    use crate::platform::identity::revocation::{self, NewRevocation, RevokedKind};
    let (kind, value) = match (&args.jti, &args.sub) {
        (Some(jti), None) => (RevokedKind::Jti, jti),
        (None, Some(sub)) => (RevokedKind::Sub, sub),
        _ => anyhow::bail!("give one of --jti and --sub"),
    };
    let until_ms = match &args.until {
        Some(text) => {
            Some(revocation::parse_rfc3339(text).map_err(|e| anyhow::anyhow!("--until: {e}"))?)
        }
        None => None,
    };
    let new = NewRevocation::new(kind, value, until_ms, args.reason.as_deref())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let (store, _) = app::open_store(&args.store).await?;
    let r = revocation::record(&store, &new).await?;
    println!(
        "revoked {} {} until {}: every node serving {} refuses it within its \
         --revocation-refresh-ms",
        if r.kind == RevokedKind::Jti {
            "token"
        } else {
            "the tokens of subject"
        },
        r.value,
        r.until,
        args.store.url()
    );
    Ok(())
}

/// A role's token carries the claims its service refuses it without (a
/// voter's names its election and district): refused here rather than at
/// the first request.
fn check_role_claims(
    spec: &RoleSpec,
    claims: &serde_json::Map<String, serde_json::Value>,
) -> anyhow::Result<()> {
    for claim in spec.claims {
        if !claims.get(claim.name).is_some_and(|v| claim.accepts(v)) {
            let example: Vec<String> = spec.claims.iter().map(|c| c.example()).collect();
            anyhow::bail!(
                "a {} token needs {}, e.g. --role {} {}",
                spec.role,
                claim.example(),
                spec.role,
                example.join(" ")
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_role_needs_the_claims_its_service_declares() {
        let claims = |pairs: &[(&str, i64)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
                .collect::<serde_json::Map<_, _>>()
        };
        let role = |name: &str| super::all_roles().find(|r| r.role.name() == name).unwrap();
        let voter = role("voter");
        let err = super::check_role_claims(voter, &claims(&[("district", 7)]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("--claim election="), "{err}");
        assert!(super::check_role_claims(voter, &claims(&[("election", 1)])).is_err());
        assert!(
            super::check_role_claims(voter, &claims(&[("district", 7), ("election", 1)])).is_ok()
        );
        assert!(super::check_role_claims(role("admin"), &claims(&[])).is_ok());
        let mut names: Vec<_> = super::all_roles().map(|r| r.role.name()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "admin",
                "host",
                "moderator",
                "provider",
                "staff",
                "user",
                "voter"
            ]
        );
    }

    #[test]
    fn a_staff_token_names_its_places() {
        let staff = super::all_roles()
            .find(|r| r.role.name() == "staff")
            .unwrap();
        let with = |value: serde_json::Value| {
            let mut m = serde_json::Map::new();
            m.insert("places".into(), value);
            super::check_role_claims(staff, &m)
        };
        let err = super::check_role_claims(staff, &serde_json::Map::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("--claim places="), "{err}");
        assert!(with("12,15".into()).is_ok());
        assert!(with(12.into()).is_ok());
        assert!(with("*".into()).is_ok());
        assert!(with(serde_json::json!([12, 15])).is_ok());
        for bad in ["", "12,x", "0", "-3", "12,,15"] {
            assert!(with(bad.into()).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_command_line_is_consistent() {
        // clap's own checks: no two flags of the services share an id or a
        // name, every default parses.
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }

    #[test]
    fn claims_parse_numbers_and_refuse_reserved_keys() {
        assert_eq!(
            super::parse_claim("district=7").unwrap(),
            ("district".into(), 7.into())
        );
        assert_eq!(
            super::parse_claim("x=a=b").unwrap(),
            ("x".into(), "a=b".into())
        );
        for bad in ["sub=1", "role=admin", "exp=1", "iat=1", "nokey", "=1"] {
            assert!(super::parse_claim(bad).is_err(), "{bad}");
        }
    }
}
