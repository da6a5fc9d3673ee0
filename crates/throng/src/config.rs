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
//! is no flag, or a flag without a variable, is refused by name.

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
    fn load_commands_keep_their_config_flag() {
        let load = args(&["throng", "load", "run", "s.yml", "--config", "c.yml"]);
        assert_eq!(named(&load), None, "not the server's TOML");
        assert_eq!(given(&load), Some(PathBuf::from("c.yml")));
        let serve = args(&["throng", "serve", "--config=t.toml"]);
        assert_eq!(named(&serve), Some(PathBuf::from("t.toml")));
    }
}
