//! The configuration file: TOML whose keys are `throng serve`'s long flag
//! names and whose values are what the flags take, so the file and the
//! flags say the same things in the same words:
//!
//! ```toml
//! listen = "0.0.0.0:8080"
//! data-dir = "/var/lib/throng"
//! booking-utc-offset = "+01:00"
//! trusted-proxies = ["10.0.0.0/8"]
//! no-notifier = false
//! ```
//!
//! Named by `--config FILE` (or `THRONG_CONFIG`). A flag on the command
//! line wins over its environment variable, which wins over the file: each
//! key becomes its flag's variable unless that is already set. A key that
//! is no flag, or a flag without a variable, is refused by name. The file
//! is flat but for `[token-claims]`, the mapping of an identity provider's
//! claims, a table that reaches its flag as JSON.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::CommandFactory;

/// The file named by `--config FILE` / `--config=FILE` in `args`, else by
/// `THRONG_CONFIG`; none for `throng load run|url`, whose `--config` is an
/// Artillery script's configuration ([`given`]).
pub fn named(args: &[OsString]) -> Option<PathBuf> {
    if is_load(args) {
        return None;
    }
    given(args).or_else(|| std::env::var_os("THRONG_CONFIG").map(PathBuf::from))
}

/// Whether `args` run `throng load run` or `throng load url`.
fn is_load(args: &[OsString]) -> bool {
    args.windows(2)
        .any(|w| w[0] == "load" && (w[1] == "run" || w[1] == "url"))
}

/// The file named by `--config FILE` / `--config=FILE` on the command line
/// itself (not the environment).
pub fn given(args: &[OsString]) -> Option<PathBuf> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let a = a.to_string_lossy();
        if a == "--config" {
            return it.next().map(PathBuf::from);
        }
        if let Some(path) = a.strip_prefix("--config=") {
            return Some(PathBuf::from(path));
        }
    }
    None
}

/// Flags whose value is a table (JSON on the command line): the file
/// writes it as a TOML table, `[token-claims]`.
const TABLE_KEYS: [&str; 1] = ["token-claims"];

/// Reads `path` and answers the environment variables it sets: (variable,
/// value) for each key whose variable is not set already.
pub fn variables(path: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read the configuration {}: {e}", path.display()))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let command = crate::cli::Cli::command();
    let serve = command
        .find_subcommand("serve")
        .expect("throng has a serve command");
    let mut out = Vec::new();
    for (key, value) in table {
        if let (toml::Value::Table(_), true) = (&value, TABLE_KEYS.contains(&key.as_str())) {
            let var = serve
                .get_arguments()
                .find(|a| a.get_long() == Some(key.as_str()))
                .and_then(|a| a.get_env())
                .expect("a table key is a serve flag with a variable")
                .to_string_lossy()
                .into_owned();
            let json = serde_json::to_string(&value)
                .map_err(|e| anyhow::anyhow!("{}: `[{key}]`: {e}", path.display()))?;
            if std::env::var_os(&var).is_none() {
                out.push((var, json));
            }
            continue;
        }
        if let toml::Value::Table(_) = value {
            anyhow::bail!(
                "{}: `[{key}]` is a table: the file is flat, one key per flag",
                path.display()
            );
        }
        let arg = serve
            .get_arguments()
            .find(|a| a.get_long() == Some(key.as_str()))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "{}: `{key}` is not a flag of `throng serve` (its keys are the flags' \
                     long names; see `throng serve --help`)",
                    path.display()
                )
            })?;
        let var = arg
            .get_env()
            .ok_or_else(|| {
                anyhow::anyhow!("{}: `{key}` cannot be set in the file", path.display())
            })?
            .to_string_lossy()
            .into_owned();
        let value = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Array(items) => items
                .iter()
                .map(|v| match v {
                    toml::Value::String(s) => Ok(s.clone()),
                    toml::Value::Integer(i) => Ok(i.to_string()),
                    other => Err(anyhow::anyhow!(
                        "{}: `{key}` holds {other}: a list holds strings or integers",
                        path.display()
                    )),
                })
                .collect::<anyhow::Result<Vec<_>>>()?
                .join(","),
            other => anyhow::bail!(
                "{}: `{key}` is {}: the file is flat, one key per flag",
                path.display(),
                other.type_str()
            ),
        };
        if std::env::var_os(&var).is_none() {
            out.push((var, value));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_claims_mapping_is_a_table_passed_as_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.toml");
        std::fs::write(
            &path,
            "token-audience = \"throng\"\n[token-claims]\nrole-claim = \"realm_access.roles\"\n\
             [token-claims.roles]\nbooking-desk = \"staff\"\n",
        )
        .unwrap();
        let vars = variables(&path).unwrap();
        let claims = vars
            .iter()
            .find(|(k, _)| k == "THRONG_TOKEN_CLAIMS")
            .map(|(_, v)| serde_json::from_str::<serde_json::Value>(v).unwrap())
            .expect("the table's variable");
        assert_eq!(
            claims,
            serde_json::json!({"role-claim": "realm_access.roles",
                               "roles": {"booking-desk": "staff"}})
        );
        std::fs::write(&path, "[listen]\nport = 1\n").unwrap();
        assert!(variables(&path).unwrap_err().to_string().contains("flat"));
    }

    #[test]
    fn load_commands_keep_their_config_flag() {
        let load = args(&["throng", "load", "run", "s.yml", "--config", "c.yml"]);
        assert_eq!(named(&load), None, "not the server's TOML");
        assert_eq!(given(&load), Some(PathBuf::from("c.yml")));
        let serve = args(&["throng", "serve", "--config=t.toml"]);
        assert_eq!(named(&serve), Some(PathBuf::from("t.toml")));
    }
}
