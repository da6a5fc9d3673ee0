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
        for hook in &r.hooks {
            super::vuser::warn_function(&self.ctx, hook);
        }
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
        let resp = loop {
            let (resp, us) = self.attempt(&rendered).await?;
            self.endpoint_metrics(r, &rendered, &resp, us);
            self.store_cookies(&rendered, &resp);
            match self.retry_wait(&resp, retries_left) {
                Some(wait) => {
                    retries_left -= 1;
                    tokio::time::sleep(wait).await;
                }
                None => break resp,
            }
        };
        self.capture(r, &resp)?;
        self.expect(r, &rendered, &resp)
    }

    /// Sends the request once and records the answer's metrics; returns it with its
    /// response time in microseconds.
    async fn attempt(&mut self, rendered: &Rendered) -> Result<(Response, u64), Failed> {
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
        let m = &self.ctx.metrics;
        m.counter("http.responses", 1);
        m.counter(&format!("http.codes.{}", resp.status), 1);
        m.counter("http.downloaded_bytes", resp.body_bytes);
        self.release_to_pool(&key);
        let m = &self.ctx.metrics;
        let us = resp.first_byte.as_micros() as u64;
        m.histogram_us("http.response_time", us);
        // As Artillery: response times by status class too.
        m.histogram_us(&format!("http.response_time.{}xx", resp.status / 100), us);
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

    fn fail(&mut self, key: &str, e: HttpError) -> Failed {
        // The connection may be mid-message; never reuse it.
        self.conns.remove(key);
        self.ctx.metrics.error(e.code);
        Failed
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
            Some(sender) => sender.ready().await.is_ok(),
            None => false,
        };
        if !reusable {
            let addr = resolve(&self.ctx, &rendered.target).await?;
            let tls = rendered
                .target
                .tls
                .then(|| (&self.ctx.script.tls, rendered.target.host.as_str()));
            let (sender, driver) = client::connect(addr, tls).await?;
            tokio::spawn(async move {
                let _ = driver.await;
            });
            self.conns.insert(key.clone(), sender);
        }
        let sender = self.conns.get_mut(&key).expect("connection just ensured");
        client::send(sender, rendered.prepared.to_request(), BODY_BYTES_MAX).await
    }

    fn endpoint_metrics(&self, r: &Request, rendered: &Rendered, resp: &Response, us: u64) {
        let naming = &self.ctx.script.endpoints;
        let target = &self.ctx.script.target;
        let mut base = String::new();
        if rendered.target.host != target.host {
            base.push_str(&rendered.target.host);
        }
        if rendered.target.port != target.port {
            base.push_str(&format!(":{}", rendered.target.port));
        }
        let path = if naming.strip_query_string {
            rendered.path.split('?').next().unwrap_or("")
        } else {
            rendered.path.as_str()
        };
        base.push_str(path);
        let name = match &r.name {
            Some(n) if naming.use_only_request_names => n.clone(),
            Some(n) => format!("{base} ({n})"),
            None if naming.ignore_unnamed_requests => return,
            None => base,
        };
        if !admit_endpoint(&self.ctx, &name) {
            return;
        }
        let m = &self.ctx.metrics;
        m.histogram_us(&format!("{}.response_time.{name}", naming.prefix), us);
        m.counter(
            &format!("{}.{name}.codes.{}", naming.prefix, resp.status),
            1,
        );
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

    fn expect(&self, r: &Request, rendered: &Rendered, resp: &Response) -> Result<(), Failed> {
        let mut failures = Vec::new();
        for (kind, expected) in &r.expect {
            let expected = render_value(expected, &self.vars);
            let Some(ok) = check(kind, &expected, resp) else {
                self.ctx.warnings.once(&format!("expect:{kind}"), || {
                    format!("expectation {kind:?} is not supported; skipped")
                });
                continue;
            };
            let m = &self.ctx.metrics;
            let verdict = if ok { "ok" } else { "failed" };
            m.counter(&format!("plugins.expect.{verdict}"), 1);
            m.counter(&format!("plugins.expect.{verdict}.{kind}"), 1);
            if !ok {
                failures.push(format!(
                    "{kind}: expected {expected}, got {}",
                    actual(kind, resp)
                ));
            }
        }
        if failures.is_empty() {
            return Ok(());
        }
        let m = &self.ctx.metrics;
        m.error("Failed expectations");
        let shown = self
            .ctx
            .expect_details
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if shown < EXPECT_DETAILS_MAX {
            eprintln!(
                "expectation failed: {} {}: {}",
                r.method,
                rendered.path,
                failures.join("; ")
            );
        }
        Err(Failed)
    }
}

fn check(kind: &str, expected: &Value, resp: &Response) -> Option<bool> {
    let header = |name: &str| resp.headers.get(name).and_then(|v| v.to_str().ok());
    let json = || serde_json::from_slice::<Value>(&resp.body).ok();
    Some(match kind {
        "statusCode" => match expected {
            Value::Array(list) => list.iter().any(|e| to_text(e) == resp.status.to_string()),
            one => to_text(one) == resp.status.to_string(),
        },
        "contentType" => {
            let want = to_text(expected);
            let want = if want == "json" {
                "application/json".to_string()
            } else {
                want
            };
            header("content-type").is_some_and(|h| h.contains(&want))
        }
        "hasHeader" => header(&to_text(expected)).is_some(),
        "headerEquals" => match expected.as_array().map(Vec::as_slice) {
            Some([name, value]) => header(&to_text(name)) == Some(to_text(value).as_str()),
            _ => false,
        },
        "hasProperty" | "notHasProperty" => {
            let path = format!("$.{}", to_text(expected));
            let found = json()
                .zip(JsonPath::parse(&path).ok())
                .is_some_and(|(d, p)| !p.query(&d).is_empty());
            found == (kind == "hasProperty")
        }
        "equals" => match expected.as_array().map(Vec::as_slice) {
            Some([a, b, ..]) => to_text(a) == to_text(b),
            _ => false,
        },
        "matchesRegexp" => regex::Regex::new(&to_text(expected))
            .is_ok_and(|re| re.is_match(&String::from_utf8_lossy(&resp.body))),
        _ => return None,
    })
}

fn actual(kind: &str, resp: &Response) -> String {
    match kind {
        "statusCode" => resp.status.to_string(),
        "contentType" => format!("{:?}", resp.headers.get("content-type")),
        _ => "no match".into(),
    }
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
