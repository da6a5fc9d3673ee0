//! Loading an Artillery script: parse (with line numbers), pick the environment, merge it
//! over `config`, validate, load payload files, and produce a [`Script`] ready to run.
//!
//! Every error names the key (`config.phases[1]`, `scenarios[0].flow[2]`) or the line, so a
//! user can fix the script without reading this code; `throng load run` exits 2 on them.

pub mod duration;
pub mod model;
pub mod payload;
pub mod retry;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

use http::Method;
use serde_json::Value;

use crate::schedule::{Arrivals, Phase};
use model::{Capture, Config, Ensure, OneOrMany, RequestRaw, ScriptFile, StepRaw};
use payload::Payload;

/// Artillery's default request timeout.
pub const TIMEOUT_DEFAULT: Duration = Duration::from_secs(10);
/// Upper bound on loop iterations, so a templated count cannot run away.
pub const LOOP_COUNT_MAX: u64 = 1_000_000;
/// Most virtual users a closed-model phase (`vusers`) may hold; each is a task with its own
/// connections, so this bounds sockets and memory.
pub const VUSERS_MAX: u64 = 10_000;
/// Most idle connections `config.http.pool` may keep per host.
pub const POOL_MAX: usize = 20_000;

/// A script that cannot run; the message names the key or line.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ScriptError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, ScriptError> {
    Err(ScriptError(msg.into()))
}

/// Command-line choices that change the script.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// `-e ENV`: an entry of `config.environments`, deep-merged over `config`.
    pub environment: Option<String>,
    /// `-t URL`: overrides `config.target`.
    pub target: Option<String>,
    /// `-k/--insecure`: accept any TLS certificate (as `config.tls.rejectUnauthorized: false`).
    pub insecure: bool,
    /// `--config FILE`: a `config` section the script is merged over.
    pub config_file: Option<PathBuf>,
    /// `--overrides JSON`: deep-merged over the whole script.
    pub overrides: Option<Value>,
    /// `-v/--variables JSON`: merged into `config.variables`.
    pub variables: Option<Value>,
    /// `-p/--payload FILE`: replaces the path of the script's (single) payload.
    pub payload: Option<PathBuf>,
    /// `--scenario-name NAME`: run only that scenario.
    pub scenario_name: Option<String>,
}

/// Where relative URLs go: `http(s)://host:port` plus an optional base path.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub url: String,
    /// `https://`: the connection speaks TLS.
    pub tls: bool,
    pub host: String,
    pub port: u16,
    pub base_path: String,
}

impl Target {
    pub fn parse(url: &str) -> Result<Self, String> {
        let trimmed = url.trim().trim_end_matches('/');
        let uri: http::Uri = trimmed
            .parse()
            .map_err(|e| format!("{url:?} is not a URL: {e}"))?;
        let tls = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => return Err(format!("{url:?} must start with http:// or https://")),
        };
        let host = uri.host().ok_or_else(|| format!("{url:?} has no host"))?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let base_path = uri.path().trim_end_matches('/').to_string();
        Ok(Self {
            url: trimmed.to_string(),
            tls,
            host,
            port: uri.port_u16().unwrap_or(if tls { 443 } else { 80 }),
            base_path,
        })
    }

    fn default_port(&self) -> u16 {
        if self.tls {
            443
        } else {
            80
        }
    }

    /// The Host header value (the port only when not the scheme's default).
    pub fn authority(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == self.default_port() {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// A virtual user's key for its connection to this origin: the authority, prefixed
    /// with the scheme for HTTPS so `http://h:443` and `https://h` never share one.
    pub fn conn_key(&self) -> String {
        if self.tls {
            format!("https://{}", self.authority())
        } else {
            self.authority()
        }
    }
}

#[derive(Debug, Clone)]
pub enum Body {
    None,
    Json(Value),
    Text(Value),
    Form(Vec<(String, Value)>),
}

#[derive(Debug, Clone)]
pub struct Request {
    pub method: Method,
    pub url: String,
    pub name: Option<String>,
    pub qs: Vec<(String, Value)>,
    pub headers: Vec<(String, Value)>,
    pub body: Body,
    pub captures: Vec<Capture>,
    /// Expectations as `(name, expected)`, e.g. `("statusCode", 200)`.
    pub expect: Vec<(String, Value)>,
    /// Processor functions run before the request is rendered (`beforeRequest`).
    pub before_request: Vec<String>,
    /// Processor functions run on the response (`afterResponse`).
    pub after_response: Vec<String>,
    /// `ifTrue`: the request is sent only when this holds on the user's variables.
    pub if_true: Option<crate::ensure::Expr>,
    /// `probability`: percent chance (0-100) that the request is sent.
    pub probability: Option<f64>,
    /// `auth: {user, pass}`: HTTP basic authentication (templates allowed).
    pub auth: Option<(Value, Value)>,
    /// `cookie: {name: value}`: set in the user's jar for this request's URL, then sent.
    pub cookies: Vec<(String, Value)>,
    /// Redirects are followed (Artillery's default) unless `followRedirect: false`.
    pub follow_redirect: bool,
    /// Its per-endpoint metrics name when known at load (a relative URL named as written),
    /// so a request does not build it each time.
    pub endpoint: Option<String>,
}

#[derive(Debug, Clone)]
pub enum Step {
    Request(Box<Request>),
    /// Seconds (templates allowed); `jitter` as Artillery's: milliseconds or `"N%"` either way.
    Think {
        seconds: Value,
        jitter: Option<String>,
    },
    Log(String),
    /// `count` (a number, a `"from-to"` range or a template) or `over`; neither (or a
    /// count of 0, as Artillery reads it) loops until the last phase ends.
    /// `loop_value` renames `$loopCount`, `loop_element` renames `$loopElement`.
    Loop {
        steps: Vec<Step>,
        count: Option<Value>,
        over: Option<Value>,
        loop_value: Option<String>,
        loop_element: Option<String>,
        /// A processor function `(context, next)` asked after each turn; `next(false)` ends
        /// the loop.
        while_true: Option<String>,
    },
    /// A JavaScript `function` step: warned about once, skipped.
    Function(String),
    /// Steps run concurrently, at most `limit` at once (Artillery's default 100).
    Parallel {
        steps: Vec<Step>,
        limit: usize,
    },
}

#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub weight: f64,
    pub flow: Vec<Step>,
    /// Processor functions: at the start and the end of the flow, and around every request.
    pub before_scenario: Vec<String>,
    pub after_scenario: Vec<String>,
    pub before_request: Vec<String>,
    pub after_response: Vec<String>,
}

/// How per-endpoint metrics are named (Artillery's `metrics-by-endpoint` plugin options).
#[derive(Debug, Clone)]
pub struct EndpointNaming {
    pub use_only_request_names: bool,
    pub strip_query_string: bool,
    pub ignore_unnamed_requests: bool,
    /// `groupDynamicURLs` (Artillery's default): named by the URL as written, before its
    /// `{{ }}` are rendered, so `/items/{{ id }}` is one endpoint.
    pub group_dynamic_urls: bool,
    pub prefix: String,
}

/// The `expect` plugin's options (`config.plugins.expect`); without the plugin, requests'
/// `expect` lists are not checked, as in Artillery.
#[derive(Debug, Clone, Default)]
pub struct ExpectPlugin {
    /// A request without expectations expects status 200.
    pub expect_default_200: bool,
    /// A failed expectation fails the virtual user (`errors.Failed expectations for
    /// request ...`); otherwise it goes on, and only the exit code (21) tells.
    pub report_failures_as_errors: bool,
    pub use_only_request_names: bool,
    /// `pretty` (each failure printed), `prettyError`, `json` or `silent`.
    pub formatter: String,
}

/// The apdex plugin: responses within `threshold_ms` satisfy, within 4x tolerate, beyond
/// frustrate (counters `apdex.*`); with `config.apdex` the score is printed and `apdex` is a
/// metric `ensure` can check, as in Artillery.
#[derive(Debug, Clone)]
pub struct Apdex {
    pub threshold_ms: f64,
    pub score: bool,
}

#[derive(Debug)]
pub struct Script {
    pub dir: PathBuf,
    pub environment: Option<String>,
    pub target: Target,
    pub phases: Vec<Phase>,
    pub payloads: Vec<Payload>,
    pub variables: BTreeMap<String, Value>,
    pub default_headers: Vec<(String, Value)>,
    /// `config.defaults.cookie`: set in the jar for every request's URL.
    pub default_cookies: Vec<(String, Value)>,
    /// `config.defaults.think.jitter`: every think step's jitter unless it has its own.
    pub think_jitter: Option<String>,
    pub timeout: Duration,
    /// `config.http.pool`: idle keep-alive connections per host shared by every virtual user
    /// (without it each virtual user has its own, as in Artillery).
    pub pool: Option<usize>,
    /// `config.http.retryAfter` (a throng-load extension), if set.
    pub retry_after: Option<retry::RetryPolicy>,
    pub scenarios: Vec<Scenario>,
    /// `config.ensure`, or else `config.plugins.ensure`, as Artillery reads them.
    pub ensure: Ensure,
    pub endpoints: EndpointNaming,
    pub expect: Option<ExpectPlugin>,
    pub apdex: Option<Apdex>,
    /// `config.processor`, loaded.
    pub processor: Option<std::sync::Arc<crate::processor::Processor>>,
    /// `before:` and `after:` flows.
    pub before: Option<Vec<Step>>,
    pub after: Option<Vec<Step>>,
    /// HTTPS client configuration (`config.tls`), used by `https://` targets and URLs.
    pub tls: crate::tls::Tls,
    /// Things Artillery would do that throng cannot (JavaScript, some plugins).
    pub warnings: Vec<String>,
}

/// Reads and loads a script file; payload paths are relative to its folder.
pub fn load(path: &Path, opts: &LoadOptions) -> Result<Script, ScriptError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ScriptError(format!("cannot read script {}: {e}", path.display())))?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let dir = if dir.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        dir
    };
    parse(&text, &dir, opts).map_err(|e| ScriptError(format!("{}: {}", path.display(), e.0)))
}

/// Loads a script from text; `dir` resolves payload paths.
pub fn parse(text: &str, dir: &Path, opts: &LoadOptions) -> Result<Script, ScriptError> {
    // Typed first: serde_yaml reports the line and column of bad values; keys the types do
    // not have are collected to be warned about.
    let mut unknown = Vec::new();
    let checked: ScriptFile =
        serde_ignored::deserialize(serde_yaml::Deserializer::from_str(text), |path| {
            unknown.push(key_path(&path.to_string()))
        })
        .map_err(|e| ScriptError(format!("invalid script: {e}")))?;
    let file = effective(text, &checked.config, opts)?;
    let mut script = build(file, dir, opts)?;
    script.warnings.splice(0..0, unknown_key_warnings(&unknown));
    Ok(script)
}

/// `scenarios.0.flow.2.get.?.qz` as a script's reader writes it: `scenarios[0].flow[2].get.qz`.
fn key_path(dotted: &str) -> String {
    let mut out = String::new();
    // serde_ignored writes an `Option`'s inside as `?`.
    for part in dotted.split('.').filter(|p| *p != "?") {
        if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{part}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(part);
        }
    }
    out
}

/// One warning per unknown key name (with its first place and how many more there are),
/// as Artillery ignores them: never refused, never silent.
fn unknown_key_warnings(paths: &[String]) -> Vec<String> {
    let mut by_name: Vec<(String, &str, usize)> = Vec::new();
    for p in paths {
        let name: String = {
            let mut n = String::new();
            let mut depth = 0;
            for c in p.chars() {
                match c {
                    '[' => depth += 1,
                    ']' => depth -= 1,
                    c if depth == 0 => n.push(c),
                    _ => {}
                }
            }
            n
        };
        match by_name.iter_mut().find(|(n, _, _)| *n == name) {
            Some((_, _, more)) => *more += 1,
            None => by_name.push((name, p, 0)),
        }
    }
    by_name
        .into_iter()
        .map(|(_, first, more)| {
            let also = if more > 0 {
                format!(" (and {more} more like it)")
            } else {
                String::new()
            };
            format!("{first}: not a key throng-load acts on; ignored{also}")
        })
        .collect()
}

/// The script with the chosen environment deep-merged over `config` and `-t` applied.
fn yaml_of_json(v: &Value) -> serde_yaml::Value {
    serde_yaml::to_value(v).unwrap_or(serde_yaml::Value::Null)
}

/// The script as it runs: `--config FILE` under it (the script wins), then the environment
/// of `-e` over `config`, then `-t`, `--overrides`, `-v` and `-p`, as `artillery run` applies
/// them.
fn effective(text: &str, _checked: &Config, opts: &LoadOptions) -> Result<ScriptFile, ScriptError> {
    let raw = effective_yaml(text, opts)?;
    let mut file: ScriptFile = serde_yaml::from_value(raw)
        .map_err(|e| ScriptError(format!("config after merging -e and flags: {e}")))?;
    select_scenario(&mut file, opts)?;
    Ok(file)
}

/// The script's YAML with `--config`, `--overrides`, `-e`, `-t`, `-v` and `-p` applied and
/// the config's templates rendered: what runs (the agents of `--workers` get it).
pub fn effective_yaml(text: &str, opts: &LoadOptions) -> Result<serde_yaml::Value, ScriptError> {
    let mut raw: serde_yaml::Value =
        serde_yaml::from_str(text).map_err(|e| ScriptError(format!("invalid script: {e}")))?;
    if let Some(path) = &opts.config_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ScriptError(format!("--config {}: {e}", path.display())))?;
        let doc: serde_yaml::Value = serde_yaml::from_str(&text)
            .map_err(|e| ScriptError(format!("--config {}: invalid YAML: {e}", path.display())))?;
        // A file with a `config:` section, or the section's contents alone.
        let mut base = if doc.get("config").is_some() {
            doc
        } else {
            let mut m = serde_yaml::Mapping::new();
            m.insert("config".into(), doc);
            serde_yaml::Value::Mapping(m)
        };
        merge(&mut base, raw);
        raw = base;
    }
    if let Some(over) = &opts.overrides {
        merge(&mut raw, yaml_of_json(over));
    }
    let Some(config) = raw.get_mut("config") else {
        return err("config: missing; add a config section (or pass --config FILE)");
    };
    if let Some(env) = &opts.environment {
        let known: Vec<String> = config
            .get("environments")
            .and_then(serde_yaml::Value::as_mapping)
            .map(|m| {
                m.keys()
                    .filter_map(|k| k.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let over = config
            .get("environments")
            .and_then(|e| e.get(env.as_str()))
            .cloned()
            .ok_or_else(|| {
                ScriptError(format!(
                    "-e {env}: no such environment in config.environments (known: {})",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ))
            })?;
        merge(config, over);
    }
    if let Some(target) = &opts.target {
        config["target"] = serde_yaml::Value::String(target.clone());
    }
    if let Some(vars) = &opts.variables {
        let mut m = serde_yaml::Mapping::new();
        m.insert("variables".into(), yaml_of_json(vars));
        merge(config, serde_yaml::Value::Mapping(m));
    }
    if let Some(path) = &opts.payload {
        let path = serde_yaml::Value::String(path.display().to_string());
        match config.get_mut("payload") {
            Some(serde_yaml::Value::Mapping(p)) => {
                p.insert("path".into(), path);
            }
            Some(serde_yaml::Value::Sequence(list)) if list.len() == 1 => {
                list[0]["path"] = path;
            }
            Some(serde_yaml::Value::Sequence(list)) => {
                return err(format!(
                    "-p: config.payload lists {} files; -p replaces the path of a single one",
                    list.len()
                ))
            }
            _ => return err("-p: needs config.payload (with its fields) whose path it replaces"),
        }
    }
    render_config_templates(config, opts);
    Ok(raw)
}

/// `--scenario-name`: keeps that scenario only.
fn select_scenario(file: &mut ScriptFile, opts: &LoadOptions) -> Result<(), ScriptError> {
    if let Some(name) = &opts.scenario_name {
        let names: Vec<String> = file
            .scenarios
            .iter()
            .filter_map(|s| s.name.clone())
            .collect();
        file.scenarios
            .retain(|s| s.name.as_deref() == Some(name.as_str()));
        if file.scenarios.is_empty() {
            return err(format!(
                "--scenario-name {name:?}: no scenario of that name (scenarios: {})",
                if names.is_empty() {
                    "none named".to_string()
                } else {
                    names.join(", ")
                }
            ));
        }
        // The one scenario runs whatever its weight.
        for s in &mut file.scenarios {
            s.weight = Some(1.0);
        }
    }
    Ok(())
}

/// Artillery renders `{{ }}` in the target and the phases before running (`arrivalRate:
/// "{{ $env.RATE }}"`), from `config.variables`, `$env` and `$environment`; a value that
/// renders to a number becomes one.
fn render_config_templates(config: &mut serde_yaml::Value, opts: &LoadOptions) {
    let mut vars = crate::template::Vars::new();
    if let Some(serde_yaml::Value::Mapping(m)) = config.get("variables") {
        for (k, v) in m {
            if let (Some(k), Ok(v)) = (k.as_str(), serde_json::to_value(v)) {
                vars.insert(k.to_string(), v);
            }
        }
    }
    if let Some(env) = &opts.environment {
        vars.insert("$environment".into(), Value::String(env.clone()));
    }
    let render = |v: &mut serde_yaml::Value| {
        if let serde_yaml::Value::String(s) = v {
            if s.contains("{{") {
                let text = crate::template::render_str(s, &vars);
                *v = match text.trim().parse::<f64>() {
                    Ok(n) if n.fract() == 0.0 && n.abs() < 9e15 => (n as i64).into(),
                    Ok(n) => n.into(),
                    Err(_) => serde_yaml::Value::String(text),
                };
            }
        }
    };
    if let Some(t) = config.get_mut("target") {
        render(t);
        if let serde_yaml::Value::Number(n) = t {
            *t = serde_yaml::Value::String(n.to_string());
        }
    }
    if let Some(serde_yaml::Value::Sequence(phases)) = config.get_mut("phases") {
        for phase in phases {
            if let serde_yaml::Value::Mapping(m) = phase {
                for (k, v) in m.iter_mut() {
                    if k.as_str() != Some("name") {
                        render(v);
                    }
                }
            }
        }
    }
}

/// Maps merge key by key (recursively); anything else is replaced.
fn merge(base: &mut serde_yaml::Value, over: serde_yaml::Value) {
    match (base, over) {
        (serde_yaml::Value::Mapping(b), serde_yaml::Value::Mapping(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

fn build(file: ScriptFile, dir: &Path, opts: &LoadOptions) -> Result<Script, ScriptError> {
    let c = &file.config;
    let mut warnings = Vec::new();
    let target = target(c)?;
    let phases = phases(c)?;
    let mut payloads = Vec::new();
    for (i, spec) in c.payload.clone().unwrap_or_default().0.iter().enumerate() {
        let key = if c.payload.as_ref().is_some_and(|p| p.0.len() > 1) {
            format!("config.payload[{i}]")
        } else {
            "config.payload".to_string()
        };
        let mut spec = spec.clone();
        if let Some(env) = &opts.environment {
            // `path: "users-{{ $environment }}.csv"`.
            let mut vars = crate::template::Vars::new();
            vars.insert("$environment".into(), Value::String(env.clone()));
            spec.path = crate::template::render_str(&spec.path, &vars);
        }
        payloads.push(Payload::load(&spec, dir, &key, &mut warnings).map_err(ScriptError)?);
    }
    let http = c.http.clone().unwrap_or_default();
    for key in http.other.keys() {
        warnings.push(format!("config.http.{key} is not supported and is ignored"));
    }
    let mut default_headers = Vec::new();
    let mut default_cookies = Vec::new();
    let mut think_jitter = None;
    // `config.http.defaults` first: Artillery reads its think jitter before `config.defaults`'.
    for (d, key) in [
        (&c.defaults, "config.defaults"),
        (&http.defaults, "config.http.defaults"),
    ] {
        let Some(d) = d else { continue };
        default_headers.extend(d.headers.iter().map(|(k, v)| (k.clone(), v.clone())));
        if let Some(cookie) = &d.cookie {
            default_cookies.extend(cookie_map(cookie, &format!("{key}.cookie"))?);
        }
        if let Some(think) = &d.think {
            match think.get("jitter") {
                Some(j) if think_jitter.is_none() => {
                    think_jitter = Some(crate::template::to_text(j))
                }
                Some(_) => {}
                None => warnings.push(format!(
                    "{key}.think: only jitter is read; the rest is ignored"
                )),
            }
        }
        if d.strict_capture.is_some() {
            warnings.push(format!("{key}.strictCapture: not supported; ignored"));
        }
    }
    warn_unsupported(c, &mut warnings);
    let ensure = match (&c.ensure, c.plugins.as_ref().and_then(|p| p.get("ensure"))) {
        (Some(e), _) => e.clone(),
        (None, Some(v)) => serde_json::from_value(v.clone())
            .map_err(|e| ScriptError(format!("config.plugins.ensure: {e}")))?,
        (None, None) => Ensure::default(),
    };
    for (i, cond) in ensure.conditions.iter().enumerate() {
        crate::ensure::parse(&cond.expression).map_err(|e| {
            ScriptError(format!(
                "config.ensure.conditions[{i}].expression {:?}: {e}",
                cond.expression
            ))
        })?;
    }
    let mut scenarios = scenarios(&file, &mut warnings)?;
    let endpoints = endpoint_naming(c);
    for s in &mut scenarios {
        name_endpoints(&mut s.flow, &endpoints, &target);
    }
    let tls = tls(c, dir, opts, &mut warnings)?;
    let expect = expect_plugin(c, &scenarios, &mut warnings);
    let before = once_flow(&file.before, "before", &mut warnings)?;
    let after = once_flow(&file.after, "after", &mut warnings)?;
    let processor = processor(c, dir, &mut warnings);
    let once: Vec<&[Step]> = [&before, &after]
        .into_iter()
        .flatten()
        .map(Vec::as_slice)
        .collect();
    let used = function_names(&scenarios, &once);
    match &processor {
        Some(p) => {
            for f in used.iter().filter(|f| !p.has(f)) {
                warnings.push(format!(
                    "function {f:?} is not exported by config.processor; each call counts errors.Undefined function \"{f}\", as in Artillery"
                ));
            }
        }
        None if c.processor.is_none() && !used.is_empty() => warnings.push(format!(
            "functions {} are used but config.processor is not set; skipped",
            used.join(", ")
        )),
        None => {}
    }
    Ok(Script {
        dir: dir.to_path_buf(),
        environment: opts.environment.clone(),
        target,
        phases,
        payloads,
        variables: c.variables.clone().unwrap_or_default(),
        default_headers,
        default_cookies,
        think_jitter,
        timeout: http.timeout.map_or(TIMEOUT_DEFAULT, |s| s.0),
        pool: http.pool.as_ref().map(pool_size).transpose()?,
        retry_after: http
            .retry_after
            .as_ref()
            .map(retry::RetryPolicy::from_raw)
            .transpose()?,
        scenarios,
        ensure,
        endpoints,
        expect,
        apdex: apdex(c)?,
        processor,
        before,
        after,
        tls,
        warnings,
    })
}

/// `config.tls`: `rejectUnauthorized` (Node's, default true) and `ca` (PEM files, relative
/// to the script, replacing the public roots); other keys are warned about by name.
fn tls(
    c: &Config,
    dir: &Path,
    opts: &LoadOptions,
    warnings: &mut Vec<String>,
) -> Result<crate::tls::Tls, ScriptError> {
    let mut o = crate::tls::TlsOptions::default();
    if let Some(t) = &c.tls {
        let Some(map) = t.as_object() else {
            return err(format!(
                "config.tls: a map (rejectUnauthorized, ca), got {t}"
            ));
        };
        for (k, v) in map {
            match k.as_str() {
                "rejectUnauthorized" => {
                    o.reject_unauthorized = v.as_bool().ok_or_else(|| {
                        ScriptError(format!(
                            "config.tls.rejectUnauthorized: true or false, got {v}"
                        ))
                    })?
                }
                "ca" => {
                    let list = match v {
                        Value::String(s) => vec![s.clone()],
                        Value::Array(items) => items
                            .iter()
                            .map(|i| i.as_str().map(str::to_string))
                            .collect::<Option<_>>()
                            .ok_or_else(|| {
                                ScriptError(
                                    "config.tls.ca: a PEM file path or a list of them".into(),
                                )
                            })?,
                        _ => return err("config.tls.ca: a PEM file path or a list of them"),
                    };
                    o.ca_files = list.iter().map(|p| dir.join(p)).collect();
                }
                other => warnings.push(format!("config.tls.{other}: not supported; ignored")),
            }
        }
    }
    if opts.insecure {
        o.reject_unauthorized = false;
    }
    crate::tls::Tls::new(&o).map_err(|e| ScriptError(format!("config.tls: {e}")))
}

/// The number JavaScript's `parseFloat` reads at the start of `text` (0 when none).
pub fn leading_number(text: &str) -> f64 {
    let t = text.trim_start();
    let end = t
        .char_indices()
        .find(|(i, c)| !(c.is_ascii_digit() || *c == '.' || (*i == 0 && (*c == '-' || *c == '+'))))
        .map_or(t.len(), |(i, _)| i);
    t[..end].parse().unwrap_or(0.0)
}

/// A `cookie` map: names to values (templates allowed).
fn cookie_map(v: &Value, key: &str) -> Result<Vec<(String, Value)>, ScriptError> {
    match v.as_object() {
        Some(m) => Ok(m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
        None => err(format!("{key}: a map of cookie names to values, got {v}")),
    }
}

/// `config.http.pool`: a number (or a string holding one) from 1 to [`POOL_MAX`].
fn pool_size(v: &Value) -> Result<usize, ScriptError> {
    let n = match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    match n {
        Some(n) if (1..=POOL_MAX as u64).contains(&n) => Ok(n as usize),
        _ => err(format!(
            "config.http.pool: a number of connections from 1 to {POOL_MAX}, got {v}"
        )),
    }
}

fn target(c: &Config) -> Result<Target, ScriptError> {
    let Some(url) = &c.target else {
        let known: Vec<&str> = c.environments.keys().map(String::as_str).collect();
        let hint = if known.is_empty() {
            String::new()
        } else {
            format!(", choose an environment with -e ({})", known.join(", "))
        };
        return err(format!(
            "config.target: no target; set config.target{hint} or pass -t http://host:port"
        ));
    };
    Target::parse(url).map_err(|e| ScriptError(format!("config.target: {e}")))
}

fn phases(c: &Config) -> Result<Vec<Phase>, ScriptError> {
    let Some(list) = &c.phases else {
        // Artillery without phases runs a single virtual user.
        let arrivals = Arrivals::Count(1);
        return Ok(vec![Phase::Arrivals {
            name: String::new(),
            duration: Duration::ZERO,
            arrivals,
            max_vusers: None,
        }]);
    };
    if list.is_empty() {
        return err("config.phases: empty; add at least one phase");
    }
    list.iter().enumerate().map(|(i, p)| phase(i, p)).collect()
}

fn phase(i: usize, p: &model::Phase) -> Result<Phase, ScriptError> {
    let name = p.name.clone().unwrap_or_default();
    let key = if name.is_empty() {
        format!("config.phases[{i}]")
    } else {
        format!("config.phases[{i}] ({name:?})")
    };
    let non_negative = |what: &str, v: Option<f64>| -> Result<(), ScriptError> {
        match v {
            Some(x) if !x.is_finite() || x < 0.0 => {
                err(format!("{key}.{what}: must be zero or more, got {x}"))
            }
            _ => Ok(()),
        }
    };
    non_negative("arrivalRate", p.arrival_rate.map(|n| n.0))?;
    non_negative("arrivalCount", p.arrival_count.map(|n| n.0))?;
    non_negative("rampTo", p.ramp_to.map(|n| n.0))?;
    non_negative("maxVusers", p.max_vusers.map(|n| n.0))?;
    if p.vusers.is_some() {
        return closed_phase(&key, name, p);
    }
    if p.ramp_up.is_some() {
        return err(format!(
            "{key}.rampUp: only for closed-model phases; add vusers, or use arrivalRate with rampTo"
        ));
    }
    if let Some(pause) = p.pause {
        if p.duration.is_some() || p.arrival_rate.is_some() || p.arrival_count.is_some() {
            return err(format!("{key}: a pause phase takes only pause (and name)"));
        }
        return Ok(Phase::Pause {
            name,
            duration: pause.0,
        });
    }
    let duration = match p.duration {
        None => {
            return err(format!(
                "{key}.duration: missing; say how long the phase lasts (e.g. 60 or \"1m\")"
            ))
        }
        Some(d) if d.0.is_zero() => {
            return err(format!("{key}.duration: must be greater than zero"))
        }
        Some(d) => d.0,
    };
    let arrivals = match (
        p.arrival_rate.map(|n| n.0),
        p.arrival_count.map(|n| n.0),
        p.ramp_to.map(|n| n.0),
    ) {
        (Some(_), Some(_), _) => {
            return err(format!(
                "{key}: use either arrivalRate or arrivalCount, not both"
            ))
        }
        (None, Some(_), Some(_)) => return err(format!("{key}.rampTo: needs arrivalRate")),
        (None, Some(n), None) => {
            if n.fract() != 0.0 {
                return err(format!(
                    "{key}.arrivalCount: must be a whole number, got {n}"
                ));
            }
            Arrivals::Count(n as u64)
        }
        (Some(r), None, to) => Arrivals::Rate {
            from_per_s: r,
            to_per_s: to.unwrap_or(r),
        },
        (None, None, Some(to)) => Arrivals::Rate {
            from_per_s: 0.0,
            to_per_s: to,
        },
        (None, None, None) => {
            return err(format!(
                "{key}: no arrival spec; set arrivalRate, arrivalCount or pause"
            ))
        }
    };
    let max_vusers = p.max_vusers.map(|n| n.0).map(|m| m as u64);
    Ok(Phase::Arrivals {
        name,
        duration,
        arrivals,
        max_vusers,
    })
}

/// A closed-model phase: `vusers`, `duration`, optional `rampUp` and `name`, nothing else.
fn closed_phase(key: &str, name: String, p: &model::Phase) -> Result<Phase, ScriptError> {
    const ACCEPTED: &str = "a closed phase takes vusers, duration, optional rampUp and name";
    let mixed = [
        ("arrivalRate", p.arrival_rate.is_some()),
        ("arrivalCount", p.arrival_count.is_some()),
        ("rampTo", p.ramp_to.is_some()),
        ("maxVusers", p.max_vusers.is_some()),
        ("pause", p.pause.is_some()),
    ];
    if let Some((field, _)) = mixed.iter().find(|(_, present)| *present) {
        return err(format!(
            "{key}.{field}: cannot be combined with vusers (closed model); {ACCEPTED}"
        ));
    }
    let n = p.vusers.map(|n| n.0).unwrap_or_default();
    if !n.is_finite() || n.fract() != 0.0 || n < 1.0 || n > VUSERS_MAX as f64 {
        return err(format!(
            "{key}.vusers: must be a whole number from 1 to {VUSERS_MAX}, got {n}"
        ));
    }
    let duration = match p.duration {
        None => {
            return err(format!(
                "{key}.duration: missing; say how long to hold the virtual users (e.g. 60 or \"1m\"); {ACCEPTED}"
            ))
        }
        Some(d) if d.0.is_zero() => {
            return err(format!("{key}.duration: must be greater than zero"))
        }
        Some(d) => d.0,
    };
    let ramp_up = p.ramp_up.map_or(Duration::ZERO, |r| r.0);
    if ramp_up > duration {
        return err(format!(
            "{key}.rampUp: {}s is longer than the phase's duration ({}s); it must be at most the duration",
            ramp_up.as_secs_f64(),
            duration.as_secs_f64()
        ));
    }
    Ok(Phase::Closed {
        name,
        duration,
        vusers: n as u64,
        ramp_up,
    })
}

/// Fills each request's per-endpoint name where it does not depend on the request as sent:
/// by name only, or a relative URL named as written.
fn name_endpoints(steps: &mut [Step], naming: &EndpointNaming, target: &Target) {
    for step in steps {
        match step {
            Step::Request(r) => {
                if let (Some(n), true) = (&r.name, naming.use_only_request_names) {
                    r.endpoint = Some(n.clone());
                    continue;
                }
                let relative = !(r.url.starts_with("http://") || r.url.starts_with("https://"));
                if !(naming.group_dynamic_urls && relative) {
                    continue;
                }
                let written = crate::runner::written_path(&r.url, &target.base_path);
                let path = if naming.strip_query_string {
                    written.split('?').next().unwrap_or("")
                } else {
                    written.as_str()
                };
                r.endpoint = Some(match &r.name {
                    Some(n) => format!("{path} ({n})"),
                    None => path.to_string(),
                });
            }
            Step::Loop { steps, .. } | Step::Parallel { steps, .. } => {
                name_endpoints(steps, naming, target)
            }
            _ => {}
        }
    }
}

fn expect_plugin(
    c: &Config,
    scenarios: &[Scenario],
    warnings: &mut Vec<String>,
) -> Option<ExpectPlugin> {
    let Some(p) = c.plugins.as_ref().and_then(|p| p.get("expect")) else {
        fn has_expect(steps: &[Step]) -> bool {
            steps.iter().any(|s| match s {
                Step::Request(r) => !r.expect.is_empty(),
                Step::Loop { steps, .. } | Step::Parallel { steps, .. } => has_expect(steps),
                _ => false,
            })
        }
        if scenarios.iter().any(|s| has_expect(&s.flow)) {
            warnings.push(
                "expect: requests' expectations are checked only with config.plugins.expect, as in Artillery; not checked"
                    .into(),
            );
        }
        return None;
    };
    let flag = |k: &str| {
        p.get(k)
            .is_some_and(|v| v.as_bool() == Some(true) || v.as_str() == Some("true"))
    };
    for k in p.as_object().into_iter().flat_map(|m| m.keys()) {
        if !matches!(
            k.as_str(),
            "expectDefault200"
                | "reportFailuresAsErrors"
                | "useOnlyRequestNames"
                | "formatter"
                | "outputFormat"
        ) {
            warnings.push(format!("config.plugins.expect.{k}: not supported; ignored"));
        }
    }
    let formatter = ["formatter", "outputFormat"]
        .iter()
        .find_map(|k| p.get(*k).and_then(Value::as_str))
        .unwrap_or("pretty")
        .to_string();
    Some(ExpectPlugin {
        expect_default_200: flag("expectDefault200"),
        report_failures_as_errors: p
            .get("reportFailuresAsErrors")
            .is_some_and(|v| v.as_bool() == Some(true) || v.as_str() == Some("true")),
        use_only_request_names: flag("useOnlyRequestNames"),
        formatter,
    })
}

/// `config.apdex.threshold` or `config.plugins.apdex.threshold` (ms, Artillery's default 500).
fn apdex(c: &Config) -> Result<Option<Apdex>, ScriptError> {
    let plugin = c.plugins.as_ref().and_then(|p| p.get("apdex"));
    if c.apdex.is_none() && plugin.is_none() {
        return Ok(None);
    }
    let threshold = [c.apdex.as_ref(), plugin]
        .into_iter()
        .flatten()
        .find_map(|v| v.get("threshold"))
        .cloned();
    let threshold_ms = match threshold {
        None => 500.0,
        Some(v) => match crate::runner::number(&v) {
            Some(t) if t > 0.0 => t,
            _ => {
                return err(format!(
                    "config.apdex.threshold: milliseconds above 0, got {v}"
                ))
            }
        },
    };
    Ok(Some(Apdex {
        threshold_ms,
        score: c.apdex.is_some(),
    }))
}

fn endpoint_naming(c: &Config) -> EndpointNaming {
    let plugin = c
        .plugins
        .as_ref()
        .and_then(|p| p.get("metrics-by-endpoint"));
    let flag = |k: &str| {
        plugin
            .and_then(|p| p.get(k))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    let prefix = plugin
        .and_then(|p| p.get("metricsNamespace"))
        .and_then(Value::as_str)
        .unwrap_or("plugins.metrics-by-endpoint")
        .to_string();
    EndpointNaming {
        use_only_request_names: flag("useOnlyRequestNames"),
        // Without the plugin configured, strip query strings so a CSV-driven script yields one
        // endpoint per path rather than one per row.
        strip_query_string: if plugin.is_some() {
            flag("stripQueryString")
        } else {
            true
        },
        ignore_unnamed_requests: flag("ignoreUnnamedRequests"),
        group_dynamic_urls: plugin
            .and_then(|p| p.get("groupDynamicURLs"))
            .and_then(Value::as_bool)
            .unwrap_or(true),
        prefix,
    }
}

/// `config.processor`: the JavaScript file, started on its engine's thread. One that cannot
/// load (a syntax error, a module it requires) is said, and the script runs without it.
fn processor(
    c: &Config,
    dir: &Path,
    warnings: &mut Vec<String>,
) -> Option<std::sync::Arc<crate::processor::Processor>> {
    let p = c.processor.as_ref()?;
    let Some(path) = p.as_str() else {
        warnings.push(format!(
            "config.processor: a path to a JavaScript file, got {p}; functions are skipped"
        ));
        return None;
    };
    match crate::processor::Processor::start(&dir.join(path)) {
        Ok(p) => Some(std::sync::Arc::new(p)),
        Err(e) => {
            warnings.push(format!(
                "config.processor {path}: cannot load: {e}; its functions are skipped"
            ));
            None
        }
    }
}

/// Every function name the flows and hooks use, once each, in order.
fn function_names(scenarios: &[Scenario], extra: &[&[Step]]) -> Vec<String> {
    fn walk(steps: &[Step], out: &mut Vec<String>) {
        for s in steps {
            match s {
                Step::Function(f) => out.push(f.clone()),
                Step::Loop {
                    steps,
                    while_true: Some(f),
                    ..
                } => {
                    out.push(f.clone());
                    walk(steps, out);
                }
                Step::Request(r) => {
                    out.extend(r.before_request.iter().chain(&r.after_response).cloned())
                }
                Step::Loop { steps, .. } | Step::Parallel { steps, .. } => walk(steps, out),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    for s in scenarios {
        out.extend(
            s.before_scenario
                .iter()
                .chain(&s.after_scenario)
                .chain(&s.before_request)
                .chain(&s.after_response)
                .cloned(),
        );
        walk(&s.flow, &mut out);
    }
    for steps in extra {
        walk(steps, &mut out);
    }
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|f| seen.insert(f.clone()));
    out
}

/// `before:` / `after:` (`{flow: [...]}`): steps run once before the phases and once after.
fn once_flow(
    v: &Option<Value>,
    key: &str,
    warnings: &mut Vec<String>,
) -> Result<Option<Vec<Step>>, ScriptError> {
    let Some(v) = v else { return Ok(None) };
    let flow = v
        .get("flow")
        .cloned()
        .ok_or_else(|| ScriptError(format!("{key}: needs a flow (a list of steps)")))?;
    let mut unknown = Vec::new();
    let raw: Vec<StepRaw> = serde_ignored::deserialize(flow, |path| {
        unknown.push(format!("{key}.flow{}", key_path(&format!(".{path}"))))
    })
    .map_err(|e| ScriptError(format!("{key}.flow: {e}")))?;
    warnings.extend(unknown_key_warnings(&unknown));
    Ok(Some(steps(&raw, &format!("{key}.flow"), warnings)?))
}

fn warn_unsupported(c: &Config, warnings: &mut Vec<String>) {
    for name in c.plugins.iter().flat_map(|p| p.keys()) {
        if !matches!(
            name.as_str(),
            "metrics-by-endpoint" | "expect" | "ensure" | "apdex"
        ) {
            warnings.push(format!(
                "config.plugins.{name}: plugin not available; ignored"
            ));
        }
    }
    let ignored = [
        ("config.engines", c.engines.is_some()),
        ("config.includeFiles", c.include_files.is_some()),
        ("config.ws", c.ws.is_some()),
        ("config.socketio", c.socketio.is_some()),
        ("config.statsd", c.statsd.is_some()),
    ];
    for (key, present) in ignored {
        if present {
            warnings.push(format!("{key}: not supported; ignored"));
        }
    }
}

fn scenarios(file: &ScriptFile, warnings: &mut Vec<String>) -> Result<Vec<Scenario>, ScriptError> {
    if file.scenarios.is_empty() {
        return err("scenarios: at least one scenario is required");
    }
    let mut out = Vec::new();
    for (i, s) in file.scenarios.iter().enumerate() {
        let key = format!("scenarios[{i}]");
        if let Some(engine) = s.engine.as_deref().filter(|e| *e != "http") {
            return err(format!(
                "{key}.engine: {engine:?} is not supported (only http)"
            ));
        }
        let weight = s.weight.unwrap_or(1.0);
        if !weight.is_finite() || weight < 0.0 {
            return err(format!("{key}.weight: must be zero or more, got {weight}"));
        }
        let list =
            |h: &Option<OneOrMany<String>>| h.as_ref().map(|h| h.0.clone()).unwrap_or_default();
        let flow = steps(&s.flow, &format!("{key}.flow"), warnings)?;
        let name = s.name.clone().unwrap_or_else(|| i.to_string());
        out.push(Scenario {
            name,
            weight,
            flow,
            before_scenario: list(&s.before_scenario),
            after_scenario: list(&s.after_scenario),
            before_request: list(&s.before_request),
            after_response: list(&s.after_response),
        });
    }
    if out.iter().all(|s| s.weight == 0.0) {
        return err("scenarios: every weight is 0; give at least one scenario a positive weight");
    }
    Ok(out)
}

fn steps(raw: &[StepRaw], key: &str, warnings: &mut Vec<String>) -> Result<Vec<Step>, ScriptError> {
    raw.iter()
        .enumerate()
        .map(|(i, s)| step(s, &format!("{key}[{i}]"), warnings))
        .collect()
}

fn step(s: &StepRaw, key: &str, warnings: &mut Vec<String>) -> Result<Step, ScriptError> {
    let methods = [
        (&s.get, Method::GET),
        (&s.post, Method::POST),
        (&s.put, Method::PUT),
        (&s.patch, Method::PATCH),
        (&s.delete, Method::DELETE),
        (&s.head, Method::HEAD),
        (&s.options, Method::OPTIONS),
    ];
    let mut found: Vec<Step> = Vec::new();
    for (raw, method) in methods {
        if let Some(r) = raw {
            found.push(Step::Request(Box::new(request(
                r,
                method.clone(),
                key,
                warnings,
            )?)));
        }
    }
    if let Some(t) = &s.think {
        if let Value::String(text) = t {
            if !text.contains("{{") {
                let d =
                    duration::parse(text).map_err(|e| ScriptError(format!("{key}.think: {e}")))?;
                let read = leading_number(text);
                if (d.as_secs_f64() - read).abs() > 1e-9 {
                    warnings.push(format!(
                        "{key}.think {text:?}: Artillery reads only the number, as seconds, so this waits {read} s, as there; write {} for {text}",
                        d.as_secs_f64()
                    ));
                }
            }
        }
        found.push(Step::Think {
            seconds: t.clone(),
            jitter: s.jitter.as_ref().map(crate::template::to_text),
        });
    } else if s.jitter.is_some() {
        warnings.push(format!("{key}.jitter: belongs to a think step; ignored"));
    }
    if let Some(l) = &s.log {
        found.push(Step::Log(l.clone()));
    }
    if let Some(f) = &s.function {
        found.push(Step::Function(f.clone()));
    }
    if let Some(p) = &s.parallel {
        let limit = match &s.limit {
            None => 100,
            Some(v) => match crate::runner::number(v) {
                Some(n) if n >= 1.0 => n as usize,
                _ => {
                    return err(format!(
                        "{key}.limit: a number of steps at once (1 or more), got {v}"
                    ))
                }
            },
        };
        found.push(Step::Parallel {
            steps: steps(p, &format!("{key}.parallel"), warnings)?,
            limit,
        });
    } else if s.limit.is_some() {
        return err(format!("{key}.limit: belongs to a parallel step"));
    }
    if let Some(body) = &s.loop_ {
        let endless = match (&s.count, &s.over) {
            (None, None) => s.while_true.is_none(),
            (Some(Value::Number(n)), None) => n.as_f64() == Some(0.0),
            _ => false,
        };
        if endless {
            warnings.push(format!(
                "{key}.loop: no count or over (or a count of 0); it repeats until the last phase ends, as Artillery's runs on"
            ));
        }
        let steps = steps(body, &format!("{key}.loop"), warnings)?;
        found.push(Step::Loop {
            steps,
            count: s.count.clone(),
            over: s.over.clone(),
            loop_value: s.loop_value.clone(),
            loop_element: s.loop_element.clone(),
            while_true: s.while_true.clone(),
        });
    } else if s.count.is_some()
        || s.over.is_some()
        || s.while_true.is_some()
        || s.loop_value.is_some()
        || s.loop_element.is_some()
    {
        return err(format!(
            "{key}: count, over, loopValue, loopElement and whileTrue belong to a loop step"
        ));
    }
    match found.len() {
        1 => Ok(found.pop().expect("one step")),
        0 => err(format!(
            "{key}: empty step; use one of get, post, put, patch, delete, think, log, loop"
        )),
        _ => err(format!(
            "{key}: one action per step (found {})",
            found.len()
        )),
    }
}

fn request(
    r: &RequestRaw,
    method: Method,
    key: &str,
    warnings: &mut Vec<String>,
) -> Result<Request, ScriptError> {
    let key = format!("{key}.{}", method.as_str().to_ascii_lowercase());
    let ignored = [
        ("formData", r.form_data.is_some()),
        ("gzip", r.gzip.is_some()),
        ("compress", r.compress.is_some()),
        ("match", r.match_.is_some()),
    ];
    for (name, present) in ignored {
        if present {
            warnings.push(format!("{key}.{name}: not supported; ignored"));
        }
    }
    let body = match (&r.json, &r.body, &r.form) {
        (Some(j), None, None) => Body::Json(j.clone()),
        (None, Some(b), None) => Body::Text(b.clone()),
        (None, None, Some(f)) => {
            Body::Form(f.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        }
        (None, None, None) => Body::None,
        _ => return err(format!("{key}: use only one of json, body and form")),
    };
    let mut captures = r.capture.clone().unwrap_or_default().0;
    for (i, c) in captures.iter_mut().enumerate() {
        let kinds = [&c.json, &c.header, &c.regexp, &c.xpath, &c.selector];
        if kinds.iter().filter(|k| k.is_some()).count() != 1 {
            return err(format!(
                "{key}.capture[{i}]: needs exactly one of json, header, regexp"
            ));
        }
        if c.as_.is_none() {
            return err(format!(
                "{key}.capture[{i}].as: name the variable to capture into"
            ));
        }
        if let Some(re) = &c.regexp {
            regex::Regex::new(re)
                .map_err(|e| ScriptError(format!("{key}.capture[{i}].regexp: {e}")))?;
        }
        if let Some(path) = &c.json {
            crate::capture::JsonPath::parse(path)
                .map_err(|e| ScriptError(format!("{key}.capture[{i}].json: {e}")))?;
        }
    }
    let expect = r
        .expect
        .clone()
        .unwrap_or_default()
        .0
        .into_iter()
        .flat_map(|m| m.into_iter())
        .collect();
    let hook_list =
        |h: &Option<OneOrMany<String>>| h.as_ref().map(|h| h.0.clone()).unwrap_or_default();
    let if_true = match &r.if_true {
        Some(text) => match crate::ensure::parse(text) {
            Ok(e) => Some(e),
            Err(e) => {
                // Artillery sends the request when the expression cannot be evaluated.
                warnings.push(format!(
                    "{key}.ifTrue {text:?}: {e}; the request is always sent, as Artillery does"
                ));
                None
            }
        },
        None => None,
    };
    let probability = r.probability.as_ref().map(|v| match crate::runner::number(v) {
        Some(p) => p.min(100.0),
        None => {
            warnings.push(format!(
                "{key}.probability: {v} is not a number; the request is never sent, as Artillery reads it"
            ));
            0.0
        }
    });
    let auth = match &r.auth {
        None => None,
        Some(a) => match (a.get("user"), a.get("pass")) {
            (Some(u), p) if a.is_object() => Some((u.clone(), p.cloned().unwrap_or_default())),
            _ => return err(format!("{key}.auth: needs user (and pass), got {a}")),
        },
    };
    let cookies = match &r.cookie {
        Some(c) => cookie_map(c, &format!("{key}.cookie"))?,
        None => Vec::new(),
    };
    Ok(Request {
        follow_redirect: r.follow_redirect.unwrap_or(true),
        endpoint: None,
        cookies,
        if_true,
        probability,
        auth,
        method,
        url: r.url.clone(),
        name: r.name.clone(),
        qs: r.qs.clone().unwrap_or_default().into_iter().collect(),
        headers: r.headers.clone().unwrap_or_default().into_iter().collect(),
        body,
        captures,
        expect,
        before_request: hook_list(&r.before_request),
        after_response: hook_list(&r.after_response),
    })
}

#[cfg(test)]
mod tests {
    use super::Target;

    #[test]
    fn targets_http_and_https_with_default_ports() {
        let t = Target::parse("https://example.org/api/").unwrap();
        assert!(t.tls);
        assert_eq!(
            (t.port, t.authority(), t.base_path.as_str()),
            (443, "example.org".into(), "/api")
        );
        assert_eq!(t.conn_key(), "https://example.org");
        let t = Target::parse("https://example.org:8443").unwrap();
        assert_eq!(t.authority(), "example.org:8443");
        let t = Target::parse("http://example.org:443").unwrap();
        assert!(!t.tls);
        assert_eq!(t.conn_key(), "example.org:443");
        assert!(Target::parse("ftp://example.org").is_err());
    }
}
