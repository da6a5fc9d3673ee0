//! One request of a virtual user: render it, send it on the user's connection for that host,
//! record Artillery's metrics (`http.*`, per endpoint), then apply captures and expectations.

use std::net::SocketAddr;

use bytes::Bytes;
use serde_json::Value;

use super::{vuser::Failed, vuser::Vu, Ctx, ENDPOINTS_MAX};
use crate::{
    capture::{self, JsonPath},
    http::{self as client, HttpError, Prepared, Response},
    script::{Body, Request, Target},
    template::{render_str, render_value, to_text},
    wire,
};

/// Response bytes kept for captures and expectations; the rest is counted and dropped.
pub const BODY_BYTES_MAX: usize = 8 << 20;
/// Artillery's `User-Agent`, sent (as Artillery does) only by scripts without default
/// headers, unless the request sets its own.
pub const USER_AGENT: &str = "Artillery (https://artillery.io)";
/// Expectation failures printed in detail before going quiet.
const EXPECT_DETAILS_MAX: u64 = 10;

struct Rendered {
    target: Target,
    path: String,
    prepared: Prepared,
    /// The request's URL, made only when the user has cookies.
    url: Option<url::Url>,
}

/// The URL the cookie jar matches a request by.
fn request_url(target: &Target, path: &str) -> Option<url::Url> {
    let scheme = if target.tls { "https" } else { "http" };
    url::Url::parse(&format!("{scheme}://{}{path}", target.authority())).ok()
}

impl Vu {
    pub(crate) async fn request(&mut self, r: &Request) -> Result<(), Failed> {
        if let Some(p) = r.probability {
            // As Artillery: a whole number from 0 to 100 drawn, sent when below `p`.
            if rand::Rng::gen_range(&mut rand::thread_rng(), 0..=100u32) as f64 >= p {
                return Ok(());
            }
        }
        if let Some(cond) = &r.if_true {
            let vars = &self.vars;
            if !cond.eval_with(&|name| variable(name, vars)).truthy() {
                return Ok(());
            }
        }
        // Scripts without hooks take no reference to the script here (the hot path).
        let hooked = {
            let s = self.scenario.map(|i| &self.ctx.script.scenarios[i]);
            let scenario_hooks =
                s.is_some_and(|s| !(s.before_request.is_empty() && s.after_response.is_empty()));
            (scenario_hooks || !(r.before_request.is_empty() && r.after_response.is_empty()))
                .then(|| self.ctx.script.clone())
        };
        let no_hooks: &[String] = &[];
        let scenario = hooked
            .as_ref()
            .and_then(|script| self.scenario.map(|i| &script.scenarios[i]));
        let (scenario_before, scenario_after) = scenario.map_or((no_hooks, no_hooks), |s| {
            (s.before_request.as_slice(), s.after_response.as_slice())
        });
        let changed;
        let r: &Request = if scenario_before.is_empty() && r.before_request.is_empty() {
            r
        } else {
            // beforeRequest functions see the request as written and may change it.
            let target = &self.ctx.script.target;
            let mut params = request_params(r, target);
            for f in scenario_before.iter().chain(&r.before_request) {
                if let Some(p) = self
                    .call_processor("beforeRequest", f, Some(params.clone()), None)
                    .await?
                {
                    params = p;
                }
            }
            changed = apply_params(r, &params, &self.ctx.script.target);
            &changed
        };
        let rendered = match self.render(r) {
            Ok(x) => x,
            Err(msg) => {
                self.ctx.warnings.once(&format!("req:{msg}"), || {
                    format!("cannot build request: {msg}")
                });
                self.ctx.metrics.error("EINVALIDREQUEST");
                return Err(Failed);
            }
        };
        let mut retries_left = self
            .ctx
            .script
            .retry_after
            .as_ref()
            .map_or(0, |p| p.retries);
        let mut rendered = rendered;
        // As Artillery (got): redirects are followed unless `followRedirect: false`, each
        // hop counted as a request and a response; captures read the last one.
        let mut redirected: Option<Request> = None;
        let mut hops = 0;
        let resp = loop {
            let current: &Request = redirected.as_ref().unwrap_or(r);
            let (resp, us) = match self.attempt(&rendered).await {
                Ok(x) => x,
                Err(code) => {
                    if let Some(name) = self.endpoint_name(current, &rendered) {
                        let prefix = &self.ctx.script.endpoints.prefix;
                        self.ctx
                            .metrics
                            .counter(&format!("{prefix}.{name}.errors.{code}"), 1);
                    }
                    return Err(Failed);
                }
            };
            self.endpoint_metrics(current, &rendered, &resp, us);
            self.store_cookies(&rendered, &resp);
            if let Some(wait) = self.retry_wait(&resp, retries_left) {
                retries_left -= 1;
                tokio::time::sleep(wait).await;
                continue;
            }
            if !r.follow_redirect {
                break resp;
            }
            let Some(next) = redirect(current, &rendered, &resp) else {
                break resp;
            };
            hops += 1;
            if hops > REDIRECTS_MAX {
                self.ctx.metrics.error("ERR_TOO_MANY_REDIRECTS");
                return Err(Failed);
            }
            rendered = match self.render(&next) {
                Ok(x) => x,
                Err(msg) => {
                    self.ctx.warnings.once(&format!("req:{msg}"), || {
                        format!("cannot follow a redirect: {msg}")
                    });
                    self.ctx.metrics.error("EINVALIDREQUEST");
                    return Err(Failed);
                }
            };
            redirected = Some(next);
        };
        // As Artillery: captures, then afterResponse functions, then a failed capture fails.
        let captured = self.capture(r, &resp);
        if !(scenario_after.is_empty() && r.after_response.is_empty()) {
            let params = request_params(r, &self.ctx.script.target);
            let res = response_value(&resp);
            for f in scenario_after.iter().chain(&r.after_response) {
                self.call_processor("afterResponse", f, Some(params.clone()), Some(res.clone()))
                    .await?;
            }
        }
        self.expect(r, &rendered, &resp)?;
        captured
    }

    /// Sends the request once and records the answer's metrics; returns it with its
    /// response time in microseconds.
    /// On failure, the error's code (already counted under `errors.`).
    async fn attempt(&mut self, rendered: &Rendered) -> Result<(Response, u64), &'static str> {
        let m = &self.ctx.metrics;
        m.counter("http.requests", 1);
        let timeout = self.ctx.script.timeout;
        let key = rendered.target.conn_key();
        let outcome = tokio::time::timeout(timeout, self.exchange(rendered)).await;
        let resp = match outcome {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => return Err(self.fail(&key, e)),
            Err(_) => return Err(self.fail(&key, HttpError::timeout(timeout))),
        };
        self.release_to_pool(&key);
        let us = resp.first_byte.as_micros() as u64;
        {
            let mut m = self.ctx.metrics.batch();
            m.counter("http.responses", 1);
            m.counter(&code_counter(resp.status), 1);
            m.counter("http.downloaded_bytes", resp.body_bytes);
            m.histogram_us("http.response_time", us);
            // As Artillery: response times by status class too.
            m.histogram_us(&class_histogram(resp.status), us);
        }
        let m = &self.ctx.metrics;
        if let Some(apdex) = &self.ctx.script.apdex {
            // Artillery's apdex plugin: on the whole response's time.
            let ms = resp.total.as_secs_f64() * 1000.0;
            let t = apdex.threshold_ms;
            for name in ["apdex.satisfied", "apdex.tolerated", "apdex.frustrated"] {
                m.counter(name, 0);
            }
            let kind = if ms <= t {
                "apdex.satisfied"
            } else if ms <= 4.0 * t {
                "apdex.tolerated"
            } else {
                "apdex.frustrated"
            };
            m.counter(kind, 1);
        }
        Ok((resp, us))
    }

    /// With `config.http.retryAfter`, how long to wait before sending again after `resp`;
    /// `None` when the answer is final (not a retried status, no retries left, or the
    /// wait would outlast the last phase).
    fn retry_wait(&self, resp: &Response, retries_left: u32) -> Option<std::time::Duration> {
        let policy = self.ctx.script.retry_after.as_ref()?;
        if !policy.retries_status(resp.status) {
            return None;
        }
        let asked = crate::script::retry::retry_after(&resp.headers);
        if asked.is_none() {
            self.ctx.metrics.counter("http.retry_after_missing", 1);
        }
        if retries_left == 0 {
            return None;
        }
        let wait = policy.wait(asked, rand::random());
        if tokio::time::Instant::now() + wait > self.ctx.phases_end {
            self.ctx.metrics.counter("http.retries_abandoned", 1);
            return None;
        }
        self.ctx.metrics.counter("http.retries", 1);
        Some(wait)
    }

    fn fail(&mut self, key: &str, e: HttpError) -> &'static str {
        // The connection may be mid-message; never reuse it.
        self.conns.remove(key);
        self.ctx.metrics.error(e.code);
        e.code
    }

    /// Keeps the answer's `Set-Cookie`s in the user's jar, by RFC 6265's domain, path and
    /// expiry rules. One the jar refuses (unparsable, another domain's) is skipped and
    /// counted as Artillery counts it, `errors.cookie_parse_error_invalid_cookie`; the user
    /// goes on.
    fn store_cookies(&mut self, rendered: &Rendered, resp: &Response) {
        let mut set = resp
            .headers
            .get_all(http::header::SET_COOKIE)
            .iter()
            .peekable();
        if set.peek().is_none() {
            return;
        }
        let Some(url) = rendered
            .url
            .clone()
            .or_else(|| request_url(&rendered.target, &rendered.path))
        else {
            return;
        };
        let jar = self.jar.get_or_insert_with(Default::default);
        let mut jar = jar.lock().unwrap_or_else(|p| p.into_inner());
        let mut refused = 0;
        for value in set {
            let text = String::from_utf8_lossy(value.as_bytes());
            match jar.parse(&text, &url) {
                Ok(_) | Err(cookie_store::CookieError::Expired) => {}
                Err(_) => refused += 1,
            }
        }
        drop(jar);
        for _ in 0..refused {
            self.ctx.metrics.error("cookie_parse_error_invalid_cookie");
        }
    }

    /// The `Cookie` header for a request: the request's and the defaults' `cookie`s go into
    /// the jar for its URL first, as Artillery sets them; `None` without cookies.
    fn cookie_header(&mut self, r: &Request, url: &url::Url) -> Option<String> {
        let defaults = &self.ctx.script.default_cookies;
        if !defaults.is_empty() || !r.cookies.is_empty() {
            let jar = self.jar.get_or_insert_with(Default::default);
            let mut jar = jar.lock().unwrap_or_else(|p| p.into_inner());
            for (name, value) in defaults.iter().chain(r.cookies.iter()) {
                let pair = format!("{name}={}", to_text(&render_value(value, &self.vars)));
                if jar.parse(&pair, url).is_err() {
                    self.ctx.warnings.once(&format!("cookie:{name}"), || {
                        format!("cookie {name:?}: not a valid cookie; not sent")
                    });
                }
            }
        }
        let jar = self.jar.as_ref()?.lock().unwrap_or_else(|p| p.into_inner());
        let mut header = String::new();
        for (name, value) in jar.get_request_values(url) {
            if !header.is_empty() {
                header.push_str("; ");
            }
            header.push_str(name);
            header.push('=');
            header.push_str(value);
        }
        (!header.is_empty()).then_some(header)
    }

    fn render(&mut self, r: &Request) -> Result<Rendered, String> {
        let vars = &self.vars;
        let url = render_str(&r.url, vars);
        let script = &self.ctx.script;
        let (target, mut path) = if url.starts_with("http://") || url.starts_with("https://") {
            let t = Target::parse(&url)?;
            let uri: http::Uri = url.parse().map_err(|e| format!("{url:?}: {e}"))?;
            let pq = uri
                .path_and_query()
                .map_or("/".to_string(), |p| p.as_str().to_string());
            (t, pq)
        } else {
            let sep = if url.starts_with('/') || url.is_empty() {
                ""
            } else {
                "/"
            };
            (
                script.target.clone(),
                format!("{}{sep}{url}", script.target.base_path),
            )
        };
        if path.is_empty() {
            path.push('/');
        }
        if !r.qs.is_empty() {
            let pairs: Vec<(String, String)> =
                r.qs.iter()
                    .map(|(k, v)| (render_str(k, vars), to_text(&render_value(v, vars))))
                    .collect();
            path.push(if path.contains('?') { '&' } else { '?' });
            path.push_str(&urlencode_pairs(&pairs));
        }
        let mut headers: Vec<(String, String)> = Vec::new();
        for (k, v) in script.default_headers.iter().chain(r.headers.iter()) {
            let value = to_text(&render_value(v, vars));
            headers.retain(|(name, _)| !name.eq_ignore_ascii_case(k));
            headers.push((k.clone(), value));
        }
        let has =
            |h: &[(String, String)], n: &str| h.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
        if let Some((user, pass)) = &r.auth {
            if !has(&headers, "authorization") {
                use base64::Engine;
                let pair = format!(
                    "{}:{}",
                    to_text(&render_value(user, vars)),
                    to_text(&render_value(pass, vars))
                );
                let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
                headers.push(("authorization".into(), format!("Basic {encoded}")));
            }
        }
        let body = match &r.body {
            Body::None => Bytes::new(),
            Body::Json(j) => {
                if !has(&headers, "content-type") {
                    headers.push(("content-type".into(), "application/json".into()));
                }
                Bytes::from(serde_json::to_vec(&render_value(j, vars)).map_err(|e| e.to_string())?)
            }
            Body::Text(t) => Bytes::from(to_text(&render_value(t, vars))),
            Body::Form(f) => {
                if !has(&headers, "content-type") {
                    headers.push((
                        "content-type".into(),
                        "application/x-www-form-urlencoded".into(),
                    ));
                }
                let pairs: Vec<(String, String)> = f
                    .iter()
                    .map(|(k, v)| (k.clone(), to_text(&render_value(v, vars))))
                    .collect();
                Bytes::from(urlencode_pairs(&pairs))
            }
        };
        let with_cookies = self.jar.is_some()
            || !r.cookies.is_empty()
            || !self.ctx.script.default_cookies.is_empty();
        let mut url = None;
        if with_cookies {
            url = request_url(&target, &path);
            if let Some(cookie) = url.as_ref().and_then(|u| self.cookie_header(r, u)) {
                headers.retain(|(name, _)| !name.eq_ignore_ascii_case("cookie"));
                headers.push(("cookie".into(), cookie));
            }
        }
        let prepared = Prepared::with_defaults(
            r.method.clone(),
            &path,
            &target.authority(),
            &headers,
            body,
            if self.ctx.script.default_headers.is_empty() {
                &[(http::header::USER_AGENT, USER_AGENT)]
            } else {
                &[]
            },
        )?;
        Ok(Rendered {
            target,
            path,
            prepared,
            url,
        })
    }

    /// With `config.http.pool`, hands the connection to `key` back to the shared pool (or
    /// closes it when the pool holds enough idle ones).
    fn release_to_pool(&mut self, key: &str) {
        let Some(max) = self.ctx.script.pool else {
            return;
        };
        if let Some(sender) = self.conns.remove(key) {
            let mut idle = self.ctx.idle.lock().unwrap();
            let list = idle.entry(key.to_string()).or_default();
            if list.len() < max {
                list.push(sender);
            }
        }
    }

    async fn exchange(&mut self, rendered: &Rendered) -> Result<Response, HttpError> {
        let key = rendered.target.conn_key();
        if self.ctx.script.pool.is_some() && !self.conns.contains_key(&key) {
            let pooled = self
                .ctx
                .idle
                .lock()
                .unwrap()
                .get_mut(&key)
                .and_then(Vec::pop);
            if let Some(sender) = pooled {
                self.conns.insert(key.clone(), sender);
            }
        }
        let reusable = match self.conns.get_mut(&key) {
            Some(conn) => conn.is_open(),
            None => false,
        };
        if !reusable {
            let addr = resolve(&self.ctx, &rendered.target).await?;
            let tls = rendered
                .target
                .tls
                .then(|| (&self.ctx.script.tls, rendered.target.host.as_str()));
            let conn = wire::Conn::connect(addr, tls).await?;
            self.conns.insert(key.clone(), conn);
        }
        let conn = self.conns.get_mut(&key).expect("connection just ensured");
        let head_only = rendered.prepared.method == http::Method::HEAD;
        conn.send(&rendered.prepared.wire, head_only, BODY_BYTES_MAX)
            .await
    }

    /// The request's name in per-endpoint metrics, as Artillery's `metrics-by-endpoint`
    /// names it: the path (with the host and port when they differ from the target's), as
    /// written (`/items/{{ id }}`, its default `groupDynamicURLs`) or as sent, with or
    /// without its query, and the request's `name`. `None` when not counted.
    fn endpoint_name<'a>(
        &self,
        r: &'a Request,
        rendered: &Rendered,
    ) -> Option<std::borrow::Cow<'a, str>> {
        let naming = &self.ctx.script.endpoints;
        let target = &self.ctx.script.target;
        if r.name.is_none() && naming.ignore_unnamed_requests {
            return None;
        }
        if let Some(known) = &r.endpoint {
            // Known when the script was loaded (a relative URL named as written).
            return Some(known.as_str().into());
        }
        if let (Some(n), true) = (&r.name, naming.use_only_request_names) {
            return Some(n.as_str().into());
        }
        let mut base = String::new();
        if rendered.target.host != target.host {
            base.push_str(&rendered.target.host);
        }
        if rendered.target.port != target.port {
            base.push_str(&format!(":{}", rendered.target.port));
        }
        let written;
        let path = if naming.group_dynamic_urls {
            written = written_path(&r.url, &target.base_path);
            written.as_str()
        } else {
            rendered.path.as_str()
        };
        let path = if naming.strip_query_string {
            path.split('?').next().unwrap_or("")
        } else {
            path
        };
        base.push_str(path);
        Some(
            match &r.name {
                Some(n) => format!("{base} ({n})"),
                None => base,
            }
            .into(),
        )
    }

    fn endpoint_metrics(&self, r: &Request, rendered: &Rendered, resp: &Response, us: u64) {
        let Some(name) = self.endpoint_name(r, rendered) else {
            return;
        };
        if !admit_endpoint(&self.ctx, &name) {
            return;
        }
        let prefix = &self.ctx.script.endpoints.prefix;
        // Both names in one buffer, both updates under one lock.
        let mut key = String::with_capacity(prefix.len() + name.len() + 24);
        key.push_str(prefix);
        key.push_str(".response_time.");
        key.push_str(&name);
        let mut m = self.ctx.metrics.batch();
        m.histogram_us(&key, us);
        key.clear();
        key.push_str(prefix);
        key.push('.');
        key.push_str(&name);
        key.push_str(".codes.");
        key.push_str(&code_counter(resp.status)["http.codes.".len()..]);
        m.counter(&key, 1);
    }

    fn capture(&mut self, r: &Request, resp: &Response) -> Result<(), Failed> {
        let mut json: Option<Option<Value>> = None;
        let mut failed = false;
        for c in &r.captures {
            let as_ = c.as_.clone().unwrap_or_default();
            let value = if let Some(path) = &c.json {
                let doc = json.get_or_insert_with(|| serde_json::from_slice(&resp.body).ok());
                let path = JsonPath::parse(&render_str(path, &self.vars)).ok();
                doc.as_ref().zip(path).and_then(|(d, p)| p.pick(d))
            } else if let Some(h) = &c.header {
                resp.headers
                    .get(render_str(h, &self.vars).as_str())
                    .and_then(|v| v.to_str().ok())
                    .map(|s| Value::String(s.into()))
            } else if let Some(re) = &c.regexp {
                let text = String::from_utf8_lossy(&resp.body);
                regex(&self.ctx, re)
                    .and_then(|re| capture::regexp(&re, &text, c.group.as_ref()))
                    .map(Value::String)
            } else {
                self.ctx.warnings.once("capture:xpath", || {
                    "xpath and selector captures are not supported; skipped".into()
                });
                continue;
            };
            if let Some(t) = &c.transform {
                super::vuser::warn_function(&self.ctx, t);
            }
            match value {
                Some(v) => {
                    self.vars.insert(as_, v);
                }
                None if c.strict == Some(false) => {}
                None => failed = true,
            }
        }
        if failed {
            self.ctx.metrics.error("Failed capture or match");
            return Err(Failed);
        }
        Ok(())
    }

    /// Artillery's `expect` plugin: each expectation counted (`plugins.expect.ok`,
    /// `plugins.expect.failed`, per type), failures printed by the plugin's formatter and
    /// remembered for the exit code (21). The user goes on unless `reportFailuresAsErrors`.
    fn expect(&self, r: &Request, rendered: &Rendered, resp: &Response) -> Result<(), Failed> {
        let Some(plugin) = &self.ctx.script.expect else {
            return Ok(());
        };
        let default_200;
        let list: &[(String, Value)] = if !r.expect.is_empty() {
            &r.expect
        } else if plugin.expect_default_200 {
            default_200 = [("statusCode".to_string(), Value::from(200))];
            &default_200
        } else {
            return Ok(());
        };
        let body = ExpectBody::of(resp);
        let mut failures = Vec::new();
        for (kind, expected) in list {
            let expected = render_value(expected, &self.vars);
            let Some(verdict) = check(kind, &expected, resp, &body) else {
                self.ctx.warnings.once(&format!("expect:{kind}"), || {
                    format!("Expect Plugin: Expectation '{kind}' is not supported")
                });
                continue;
            };
            let m = &self.ctx.metrics;
            let outcome = if verdict.ok { "ok" } else { "failed" };
            m.counter(&format!("plugins.expect.{outcome}"), 1);
            m.counter(&format!("plugins.expect.{outcome}.{}", verdict.kind), 1);
            if !verdict.ok {
                failures.push(format!(
                    "{}: expected {}, got {}",
                    verdict.kind, verdict.expected, verdict.got
                ));
            }
        }
        if failures.is_empty() {
            return Ok(());
        }
        let shown = self
            .ctx
            .expect_details
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if shown < EXPECT_DETAILS_MAX
            && matches!(plugin.formatter.as_str(), "pretty" | "prettyError")
        {
            eprintln!(
                "expectation failed: {} {}: {}",
                r.method,
                rendered.path,
                failures.join("; ")
            );
        }
        if !plugin.report_failures_as_errors {
            return Ok(());
        }
        let name = match (&r.name, plugin.use_only_request_names) {
            (Some(n), true) => n.clone(),
            _ => {
                let scheme = if rendered.target.tls { "https" } else { "http" };
                format!(
                    "{scheme}://{}{}",
                    rendered.target.authority(),
                    rendered.path
                )
            }
        };
        self.ctx
            .metrics
            .error(&format!("Failed expectations for request {name}"));
        Err(Failed)
    }
}

/// A response body as the expect plugin sees it: parsed JSON for JSON content types (null
/// when it does not parse), the text otherwise.
enum ExpectBody {
    Json(Value),
    Text(String),
}

impl ExpectBody {
    fn of(resp: &Response) -> Self {
        let json = resp
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| {
                [
                    "application/json",
                    "application/problem+json",
                    "application/ld+json",
                ]
                .iter()
                .any(|t| ct.contains(t))
            });
        if json {
            ExpectBody::Json(serde_json::from_slice(&resp.body).unwrap_or(Value::Null))
        } else {
            ExpectBody::Text(String::from_utf8_lossy(&resp.body).into_owned())
        }
    }

    /// The body when it is a JSON object or array.
    fn object(&self) -> Option<&Value> {
        match self {
            ExpectBody::Json(v @ (Value::Object(_) | Value::Array(_))) => Some(v),
            _ => None,
        }
    }
}

struct Verdict {
    ok: bool,
    /// The counter's suffix, as the plugin names it.
    kind: String,
    expected: String,
    got: String,
}

/// One expectation, with the plugin's semantics; `None` for one it does not know.
fn check(kind: &str, expected: &Value, resp: &Response, body: &ExpectBody) -> Option<Verdict> {
    let header = |name: &str| {
        resp.headers
            .get(name.to_ascii_lowercase().as_str())
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let status_in = |v: &Value| match v {
        Value::Array(list) => list
            .iter()
            .any(|e| number_of(e) == Some(resp.status as f64)),
        one => number_of(one) == Some(resp.status as f64),
    };
    let verdict = |ok: bool, kind: &str, expected: String, got: String| Verdict {
        ok,
        kind: kind.to_string(),
        expected,
        got,
    };
    Some(match kind {
        "statusCode" => verdict(
            status_in(expected),
            kind,
            to_text(expected),
            resp.status.to_string(),
        ),
        "notStatusCode" => verdict(
            !status_in(expected),
            kind,
            format!("Status code different than {}", to_text(expected)),
            resp.status.to_string(),
        ),
        "contentType" => {
            let want = to_text(expected);
            let got = header("content-type");
            let ok = if want == "json" {
                matches!(body, ExpectBody::Json(v) if !v.is_null())
            } else {
                got.as_deref()
                    .is_some_and(|g| g.eq_ignore_ascii_case(&want))
            };
            verdict(
                ok,
                kind,
                want,
                got.unwrap_or("content-type header not set".into()),
            )
        }
        "hasHeader" => {
            let name = to_text(expected);
            let ok = header(&name).is_some_and(|v| !v.is_empty());
            verdict(ok, kind, name.clone(), format!("has {name}: {ok}"))
        }
        "headerEquals" => {
            let pair = expected.as_array().cloned().unwrap_or_default();
            let name = pair.first().map(to_text).unwrap_or_default();
            let want = pair.get(1).map(to_text).unwrap_or_default();
            let got = header(&name);
            verdict(
                got.as_deref() == Some(want.as_str()),
                &format!("header {name} values equals"),
                want,
                got.unwrap_or(format!("response has no {name} header")),
            )
        }
        "hasProperty" | "notHasProperty" => {
            let path = to_text(expected);
            let found = body.object().is_some_and(|doc| {
                JsonPath::parse(&format!("$.{path}")).is_ok_and(|p| !p.query(doc).is_empty())
            });
            let ok = body.object().is_some() && found == (kind == "hasProperty");
            verdict(ok, kind, path, format!("property found: {found}"))
        }
        "equals" => {
            let values: Vec<String> = expected
                .as_array()
                .map(|l| l.iter().map(to_text).collect())
                .unwrap_or_default();
            let first = values.first();
            let ok = first.is_some() && values.iter().all(|v| Some(v) == first);
            verdict(ok, kind, "all values to be equal".into(), values.join(", "))
        }
        "matchesRegexp" => {
            let text = match body {
                ExpectBody::Text(t) => t.clone(),
                ExpectBody::Json(_) => String::from_utf8_lossy(&resp.body).into_owned(),
            };
            let ok = regex::Regex::new(&to_text(expected)).is_ok_and(|re| re.is_match(&text));
            verdict(ok, kind, "true".into(), ok.to_string())
        }
        "cdnHit" => {
            let hit = expected.as_bool().unwrap_or(false);
            let wanted: &[&str] = if hit { &["hit", "stale"] } else { &["miss"] };
            let found = ["cf-cache-status", "x-cache", "x-vercel-cache"]
                .iter()
                .find_map(|h| header(h).map(|v| (h, v)));
            let ok = found
                .as_ref()
                .is_some_and(|(_, v)| wanted.iter().any(|w| v.to_ascii_lowercase().starts_with(w)));
            verdict(
                ok,
                kind,
                format!(
                    "a cache header indicating a cache {}",
                    if hit { "hit" } else { "miss" }
                ),
                found.map_or("cache status header not found".into(), |(h, v)| {
                    format!("{h} is {v}")
                }),
            )
        }
        _ => return None,
    })
}

/// A number, or a string holding one (JavaScript's `Number(x)` for the plugin's checks).
fn number_of(v: &Value) -> Option<f64> {
    super::vuser::number(v)
}

/// Redirects followed for one request before it fails (got's limit).
const REDIRECTS_MAX: u32 = 10;

/// The request a redirect answer asks for next: the `Location` resolved against the URL
/// just requested; a 303 turns the method into GET without a body (other codes keep both),
/// as got does. `None` when `resp` is not a redirect to an HTTP(S) URL.
fn redirect(current: &Request, rendered: &Rendered, resp: &Response) -> Option<Request> {
    if !matches!(resp.status, 301 | 302 | 303 | 307 | 308) {
        return None;
    }
    let location = resp.headers.get(http::header::LOCATION)?.to_str().ok()?;
    let next = request_url(&rendered.target, &rendered.path)?
        .join(location)
        .ok()?;
    if !matches!(next.scheme(), "http" | "https") {
        return None;
    }
    let mut req = current.clone();
    req.url = next.to_string();
    req.qs.clear();
    req.endpoint = None;
    if resp.status == 303 && !matches!(req.method, http::Method::GET | http::Method::HEAD) {
        req.method = http::Method::GET;
        req.body = Body::None;
    }
    Some(req)
}

/// `requestParams` as a `beforeRequest` function sees them: the URL as written (after the
/// target when relative), method, headers, body (`json`, `body` or `form`), `qs`, `cookie`.
fn request_params(r: &Request, target: &Target) -> Value {
    let mut p = serde_json::Map::new();
    let url = if r.url.starts_with('/') {
        format!("{}{}", target.url, r.url)
    } else {
        r.url.clone()
    };
    p.insert("url".into(), Value::String(url));
    p.insert("method".into(), Value::String(r.method.to_string()));
    if let Some(n) = &r.name {
        p.insert("name".into(), Value::String(n.clone()));
    }
    let map = |pairs: &[(String, Value)]| {
        Value::Object(pairs.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
    };
    p.insert("headers".into(), map(&r.headers));
    if !r.qs.is_empty() {
        p.insert("qs".into(), map(&r.qs));
    }
    if !r.cookies.is_empty() {
        p.insert("cookie".into(), map(&r.cookies));
    }
    match &r.body {
        Body::None => {}
        Body::Json(j) => {
            p.insert("json".into(), j.clone());
        }
        Body::Text(t) => {
            p.insert("body".into(), t.clone());
        }
        Body::Form(f) => {
            p.insert("form".into(), map(f));
        }
    }
    Value::Object(p)
}

/// The request as a `beforeRequest` function left its parameters.
fn apply_params(r: &Request, p: &Value, target: &Target) -> Request {
    let mut out = r.clone();
    let pairs = |v: &Value| -> Vec<(String, Value)> {
        v.as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    };
    if let Some(url) = p.get("url").and_then(Value::as_str) {
        out.url = match url.strip_prefix(target.url.as_str()) {
            Some(rest) if rest.starts_with('/') => rest.to_string(),
            _ => url.to_string(),
        };
        // Named as sent, since the written URL changed.
        if out.url != r.url {
            out.endpoint = None;
        }
    }
    if let Some(m) = p.get("method").and_then(Value::as_str) {
        if let Ok(m) = http::Method::from_bytes(m.to_ascii_uppercase().as_bytes()) {
            out.method = m;
        }
    }
    if let Some(h) = p.get("headers") {
        out.headers = pairs(h);
    }
    out.qs = p.get("qs").map(pairs).unwrap_or_default();
    out.cookies = p.get("cookie").map(pairs).unwrap_or_default();
    out.body = match (p.get("json"), p.get("body"), p.get("form")) {
        (Some(j), _, _) if !j.is_null() => Body::Json(j.clone()),
        (_, Some(b), _) if !b.is_null() => Body::Text(b.clone()),
        (_, _, Some(f)) if !f.is_null() => Body::Form(pairs(f)),
        _ => Body::None,
    };
    out
}

/// `response` as an `afterResponse` function sees it: `statusCode`, `headers` (lower-case
/// names), `body` (text).
fn response_value(resp: &Response) -> Value {
    let mut headers = serde_json::Map::new();
    for (k, v) in &resp.headers {
        let v = String::from_utf8_lossy(v.as_bytes()).into_owned();
        match headers.get_mut(k.as_str()) {
            // Repeated headers (Set-Cookie) as Node gives them: a list.
            Some(Value::Array(list)) => list.push(Value::String(v)),
            Some(one) => *one = Value::Array(vec![one.take(), Value::String(v)]),
            None => {
                headers.insert(k.as_str().to_string(), Value::String(v));
            }
        }
    }
    serde_json::json!({
        "statusCode": resp.status,
        "headers": headers,
        "body": String::from_utf8_lossy(&resp.body),
    })
}

/// A request's path as written in the script (templates unrendered): a relative URL after
/// the target's base path, an absolute one after its authority.
pub(crate) fn written_path(url: &str, base_path: &str) -> String {
    if let Some(rest) = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
    {
        return rest.find('/').map_or("/".into(), |i| rest[i..].to_string());
    }
    let sep = if url.starts_with('/') || url.is_empty() {
        ""
    } else {
        "/"
    };
    format!("{base_path}{sep}{url}")
}

/// A variable as an `ifTrue` expression sees it (absent: NaN, so comparisons fail).
fn variable(name: &str, vars: &crate::template::Vars) -> crate::ensure::Val {
    use crate::ensure::Val;
    match crate::template::lookup(name, vars) {
        Some(Value::Number(n)) => Val::Num(n.as_f64().unwrap_or(f64::NAN)),
        Some(Value::String(s)) => Val::Str(s.clone()),
        Some(Value::Bool(b)) => Val::Num(if *b { 1.0 } else { 0.0 }),
        Some(Value::Null) | None => Val::Num(f64::NAN),
        Some(other) => Val::Str(other.to_string()),
    }
}

fn admit_endpoint(ctx: &Ctx, name: &str) -> bool {
    let mut seen = ctx.endpoints.lock().unwrap_or_else(|p| p.into_inner());
    if seen.contains(name) {
        return true;
    }
    if seen.len() >= ENDPOINTS_MAX {
        return false;
    }
    seen.insert(name.to_string());
    true
}

fn regex(ctx: &Ctx, pattern: &str) -> Option<regex::Regex> {
    let mut cache = ctx.regexes.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(re) = cache.get(pattern) {
        return Some(re.clone());
    }
    let re = regex::Regex::new(pattern).ok()?;
    if cache.len() < 256 {
        cache.insert(pattern.to_string(), re.clone());
    }
    Some(re)
}

async fn resolve(ctx: &Ctx, target: &Target) -> Result<SocketAddr, HttpError> {
    let key = (target.host.clone(), target.port);
    if let Some(addr) = ctx
        .addrs
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&key)
    {
        return Ok(*addr);
    }
    let addr = client::resolve(&target.host, target.port).await?;
    let mut cache = ctx.addrs.lock().unwrap_or_else(|p| p.into_inner());
    if cache.len() < 256 {
        cache.insert(key, addr);
    }
    Ok(addr)
}

/// `application/x-www-form-urlencoded` encoding of pairs.
pub fn urlencode_pairs(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", urlencode(k), urlencode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn urlencode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// `http.codes.<status>`, without formatting it for the statuses answers
/// carry (100 to 599).
fn code_counter(status: u16) -> std::borrow::Cow<'static, str> {
    static KEYS: std::sync::LazyLock<Vec<String>> =
        std::sync::LazyLock::new(|| (100..600).map(|c| format!("http.codes.{c}")).collect());
    match status.checked_sub(100).and_then(|i| KEYS.get(i as usize)) {
        Some(k) => k.as_str().into(),
        None => format!("http.codes.{status}").into(),
    }
}

/// `http.response_time.<class>xx`.
fn class_histogram(status: u16) -> std::borrow::Cow<'static, str> {
    match status / 100 {
        1 => "http.response_time.1xx".into(),
        2 => "http.response_time.2xx".into(),
        3 => "http.response_time.3xx".into(),
        4 => "http.response_time.4xx".into(),
        5 => "http.response_time.5xx".into(),
        c => format!("http.response_time.{c}xx").into(),
    }
}
