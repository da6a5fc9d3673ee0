//! One virtual user: its variables, its connections (one per host, kept alive for its
//! session, as Artillery's default), and the flow it walks. The first failed request,
//! capture or expectation ends the session as `vusers.failed`, as in Artillery.
//!
//! An open-model arrival runs one session ([`run`]); a closed-model pool member runs
//! sessions in a loop ([`super::pool::closed_user`]), keeping its connections between them.

use std::{collections::HashMap, future::Future, pin::Pin, sync::Arc, time::Instant};

use rand::seq::SliceRandom;
use serde_json::Value;

use super::Ctx;
use crate::{
    script::{Step, LOOP_COUNT_MAX},
    template::{render_str, render_value, whole_template, Vars},
    wire::Conn,
};

/// Why a session ended early; the error is already counted under `errors.<code>`.
#[derive(Debug)]
pub(crate) struct Failed;

pub(crate) struct Vu {
    pub ctx: Arc<Ctx>,
    pub vars: Vars,
    /// Open connections by `host:port`.
    pub conns: HashMap<String, Conn>,
    /// The user's cookie jar, made by the first cookie it receives or sends (so a script
    /// without cookies never has one); shared by the branches of a `parallel` step.
    pub jar: Option<Jar>,
    /// The scenario it runs (for its `beforeRequest`/`afterResponse` hooks); `None` in the
    /// `before`/`after` flows.
    pub scenario: Option<usize>,
    /// The last `whileTrue` function's answer.
    pub last_while: Option<bool>,
}

pub(crate) type Jar = Arc<std::sync::Mutex<cookie_store::CookieStore>>;

/// One open-model arrival: one run of the scenario, then the user leaves.
pub(crate) async fn run(ctx: Arc<Ctx>, scenario: usize) {
    let mut conns = HashMap::new();
    session(&ctx, scenario, &mut conns).await;
    drop(conns);
    ctx.running.leave();
}

/// One run of a scenario with fresh variables (and payload rows), counted as one Artillery
/// virtual user; `conns` are the keep-alive connections to use and keep.
pub(crate) async fn session(ctx: &Arc<Ctx>, scenario: usize, conns: &mut HashMap<String, Conn>) {
    let started = Instant::now();
    let s = &ctx.script.scenarios[scenario];
    ctx.metrics.counter("vusers.created", 1);
    ctx.metrics
        .counter(&format!("vusers.created_by_name.{}", s.name), 1);
    let mut vu = Vu {
        vars: initial_vars(ctx),
        ctx: ctx.clone(),
        conns: std::mem::take(conns),
        jar: None,
        scenario: Some(scenario),
        last_while: None,
    };
    // As Artillery: beforeScenario and afterScenario functions are the flow's first and last
    // steps.
    let mut outcome = Ok(());
    for f in &s.before_scenario {
        outcome = outcome.and(vu.function(f).await);
    }
    if outcome.is_ok() {
        outcome = vu.steps(&s.flow).await;
    }
    if outcome.is_ok() {
        for f in &s.after_scenario {
            outcome = outcome.and(vu.function(f).await);
        }
    }
    *conns = std::mem::take(&mut vu.conns);
    drop(vu);
    match outcome {
        Ok(()) => {
            ctx.metrics.counter("vusers.completed", 1);
            ctx.metrics.histogram_us(
                "vusers.session_length",
                started.elapsed().as_micros() as u64,
            );
        }
        Err(Failed) => ctx.metrics.counter("vusers.failed", 1),
    }
}

/// Runs a `before` or `after` flow once, outside the phases (not counted as a virtual user);
/// returns its variables for every virtual user (what `before` captured).
pub(crate) async fn once(ctx: &Arc<Ctx>, steps: &[Step]) -> Vars {
    let mut vu = Vu {
        vars: initial_vars(ctx),
        ctx: ctx.clone(),
        conns: HashMap::new(),
        jar: None,
        scenario: None,
        last_while: None,
    };
    if vu.steps(steps).await.is_err() {
        eprintln!("warning: a before/after flow failed; see errors in the report");
    }
    vu.vars
}

fn initial_vars(ctx: &Ctx) -> Vars {
    let script = &ctx.script;
    // What the `before` flow left (a token it captured), under each user's own variables.
    let mut vars = ctx.before_vars.get().cloned().unwrap_or_default();
    vars.insert("target".into(), Value::String(script.target.url.clone()));
    if let Some(env) = &script.environment {
        vars.insert("$environment".into(), Value::String(env.clone()));
    }
    for (name, value) in &script.variables {
        // A list means "one of these, picked per virtual user".
        let v = match value {
            Value::Array(items) => items
                .choose(&mut rand::thread_rng())
                .cloned()
                .unwrap_or(Value::Null),
            other => other.clone(),
        };
        vars.insert(name.clone(), v);
    }
    for payload in &script.payloads {
        payload.bind(&mut vars);
    }
    vars
}

/// Artillery warns about a missing function once per name and carries on.
pub(crate) fn warn_function(ctx: &Ctx, name: &str) {
    ctx.warnings.once(&format!("fn:{name}"), || {
        format!("function {name:?} skipped: no processor is loaded (config.processor)")
    });
}

type StepFuture<'a> = Pin<Box<dyn Future<Output = Result<(), Failed>> + Send + 'a>>;

impl Vu {
    pub(crate) fn steps<'a>(&'a mut self, steps: &'a [Step]) -> StepFuture<'a> {
        Box::pin(async move {
            for step in steps {
                self.step(step).await?;
            }
            Ok(())
        })
    }

    async fn step(&mut self, step: &Step) -> Result<(), Failed> {
        match step {
            Step::Request(r) => self.request(r).await,
            Step::Think { seconds, jitter } => {
                let jitter = jitter
                    .as_deref()
                    .or(self.ctx.script.think_jitter.as_deref());
                if let Some(d) = think_time(&render_value(seconds, &self.vars)) {
                    let d = match jitter {
                        Some(j) => jittered(d, j),
                        None => d,
                    };
                    tokio::time::sleep(d).await;
                }
                Ok(())
            }
            Step::Log(msg) => {
                println!("{}", render_str(msg, &self.vars));
                Ok(())
            }
            Step::Function(name) => self.function(name).await,
            Step::Parallel { steps, limit } => self.parallel(steps, *limit).await,
            Step::Loop {
                steps,
                count,
                over,
                loop_value,
                loop_element,
                while_true,
            } => {
                let names = (
                    loop_value.as_deref().unwrap_or("$loopCount"),
                    loop_element.as_deref().unwrap_or("$loopElement"),
                );
                self.run_loop(
                    steps,
                    count.as_ref(),
                    over.as_ref(),
                    names,
                    while_true.as_deref(),
                )
                .await
            }
        }
    }

    /// A processor function as a step (also `beforeScenario`/`afterScenario`).
    pub(crate) async fn function(&mut self, name: &str) -> Result<(), Failed> {
        self.call_processor("function", name, None, None)
            .await
            .map(|_| ())
    }

    /// Calls processor function `name` with the user's variables (and the request and
    /// response for hooks); applies what it did: variables, custom metrics, the exit code.
    /// Returns the request parameters as the function left them. Without a processor the
    /// function is skipped with a warning; a name the processor lacks counts Artillery's
    /// `errors.Undefined function "name"` and goes on.
    pub(crate) async fn call_processor(
        &mut self,
        kind: &'static str,
        name: &str,
        req: Option<Value>,
        res: Option<Value>,
    ) -> Result<Option<Value>, Failed> {
        let Some(processor) = self.ctx.script.processor.clone() else {
            warn_function(&self.ctx, name);
            return Ok(None);
        };
        if !processor.has(name) {
            if kind == "function" {
                self.ctx
                    .metrics
                    .error(&format!("Undefined function \"{name}\""));
            }
            return Ok(None);
        }
        let call = crate::processor::Call {
            kind,
            name: name.to_string(),
            vars: Value::Object(self.vars.clone()),
            req,
            res,
        };
        let out = processor.call(call).await;
        if let Value::Object(vars) = out.vars {
            self.vars = vars;
        }
        let m = &self.ctx.metrics;
        for (kind, metric, value) in &out.emitted {
            let n = number(value).unwrap_or(1.0);
            match kind.as_str() {
                "counter" => m.counter(metric, n.max(0.0) as u64),
                // Artillery's histograms are in milliseconds.
                "histogram" | "summary" => m.histogram_us(metric, (n.max(0.0) * 1000.0) as u64),
                "error" => m.error(metric),
                other => self.ctx.warnings.once(&format!("emit:{other}"), || {
                    format!("events.emit({other:?}, ...) is not supported; ignored")
                }),
            }
        }
        self.last_while = out.result;
        if let Some(code) = out.exit_code {
            self.ctx
                .exit_code
                .store(code, std::sync::atomic::Ordering::Relaxed);
        }
        match out.error {
            Some(e) => {
                // Artillery counts the error's message (first line) as its code.
                let first = e.lines().next().unwrap_or("error").to_string();
                m.error(&first);
                Err(Failed)
            }
            None => Ok(out.req),
        }
    }

    /// Artillery's `parallel`: the steps at once (at most `limit`), each on connections of
    /// its own, sharing the user's variables and cookie jar; what a step captures is there
    /// afterwards. The first failure fails the user once all have ended.
    async fn parallel(&mut self, steps: &[Step], limit: usize) -> Result<(), Failed> {
        use futures::StreamExt;
        let jar = self.jar.get_or_insert_with(Jar::default).clone();
        let mut branches = Vec::with_capacity(steps.len());
        for step in steps {
            let mut branch = Vu {
                ctx: self.ctx.clone(),
                vars: self.vars.clone(),
                conns: HashMap::new(),
                jar: Some(jar.clone()),
                scenario: self.scenario,
                last_while: None,
            };
            branches.push(async move {
                let outcome = branch.step(step).await;
                (branch, outcome)
            });
        }
        let ended: Vec<_> = futures::stream::iter(branches)
            .buffered(limit.max(1))
            .collect()
            .await;
        let mut outcome = Ok(());
        for (branch, o) in ended {
            for (k, v) in branch.vars {
                if self.vars.get(&k) != Some(&v) {
                    self.vars.insert(k, v);
                }
            }
            for (k, c) in branch.conns {
                self.conns.entry(k).or_insert(c);
            }
            outcome = outcome.and(o);
        }
        outcome
    }

    /// A loop as Artillery's runs it: over a list, or from `from` to `to` (a count `n` is
    /// `0-n`), the index in `$loopCount` (or `loopValue`), the element in `$loopElement`
    /// (or `loopElement`: a count loop's stays at its first index, as in Artillery).
    async fn run_loop(
        &mut self,
        steps: &[Step],
        count: Option<&Value>,
        over: Option<&Value>,
        (index_var, element_var): (&str, &str),
        while_true: Option<&str>,
    ) -> Result<(), Failed> {
        let items: Option<Vec<Value>> = over.map(|o| self.loop_items(o));
        let (from, to) = match (&items, count) {
            (Some(list), _) => (0, Some(list.len() as u64)),
            (None, Some(c)) => loop_range(c, &render_value(c, &self.vars)),
            (None, None) => (0, None),
        };
        // No count: until the last phase ends (Artillery's runs on), or `whileTrue` says.
        let until_end = to.is_none() && while_true.is_none();
        let to = if while_true.is_some() && count.is_none() && items.is_none() {
            Some(LOOP_COUNT_MAX)
        } else {
            to
        };
        let to = to
            .unwrap_or(u64::MAX)
            .min(from.saturating_add(LOOP_COUNT_MAX));
        let saved = (
            self.vars.get(index_var).cloned(),
            self.vars.get(element_var).cloned(),
        );
        let mut outcome = Ok(());
        for i in from..to {
            if until_end && tokio::time::Instant::now() >= self.ctx.phases_end {
                break;
            }
            let element = items
                .as_ref()
                .map_or(Value::from(from), |l| l[i as usize].clone());
            self.vars.insert(element_var.into(), element);
            self.vars.insert(index_var.into(), Value::from(i));
            outcome = self.steps(steps).await;
            if outcome.is_err() {
                break;
            }
            if let Some(f) = while_true {
                // Asked after each turn, as Artillery asks; no answer ends the loop.
                self.vars.insert(index_var.into(), Value::from(i + 1));
                match self.call_processor("whileTrue", f, None, None).await {
                    Ok(_) if self.last_while == Some(true) => {}
                    Ok(_) => break,
                    Err(e) => {
                        outcome = Err(e);
                        break;
                    }
                }
            }
            if until_end {
                // A loop of steps that never wait must not starve the other users.
                tokio::task::yield_now().await;
            }
        }
        for (key, old) in [(index_var, saved.0), (element_var, saved.1)] {
            match old {
                Some(v) => self.vars.insert(key.into(), v),
                None => self.vars.remove(key),
            };
        }
        outcome
    }

    /// `over` is a list, a `{{ template }}` or the name of a list variable.
    fn loop_items(&self, over: &Value) -> Vec<Value> {
        let resolved = match over {
            Value::String(s) if whole_template(s).is_none() => {
                crate::template::lookup(s.trim(), &self.vars)
                    .cloned()
                    .unwrap_or(Value::Null)
            }
            other => render_value(other, &self.vars),
        };
        match resolved {
            Value::Array(items) => items,
            Value::Null => Vec::new(),
            one => vec![one],
        }
    }
}

/// A think time as Artillery reads it: the leading number (`parseFloat`) in seconds, so
/// `"2s"` is 2 s (and `"500ms"` 500 s: the script's load warns about such units).
fn think_time(v: &Value) -> Option<std::time::Duration> {
    let secs = match v {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => crate::script::leading_number(s),
        _ => return None,
    };
    crate::script::duration::from_secs(secs).ok()
}

/// A think time with Artillery's jitter: `j` milliseconds, or `"N%"` of the time, either
/// way at random (never below 0).
fn jittered(d: std::time::Duration, j: &str) -> std::time::Duration {
    let ms = d.as_millis() as f64;
    let j = j.trim();
    let approx = match j.strip_suffix('%') {
        Some(p) => ms * p.trim().parse::<f64>().unwrap_or(0.0) / 100.0,
        None => j.parse::<f64>().unwrap_or(0.0),
    };
    let ms = (ms - approx + rand::random::<f64>() * 2.0 * approx).max(0.0);
    std::time::Duration::from_secs_f64(ms / 1000.0)
}

/// A loop's `count` as Artillery reads it: `(from, to)`, `to` `None` for endless (a
/// literal 0); a number `n` is `0..n`, a string `"9-12"` is `9..12` (three turns, from
/// index 9), a template renders first; anything else runs no turn.
fn loop_range(written: &Value, rendered: &Value) -> (u64, Option<u64>) {
    if let Value::Number(n) = written {
        if n.as_f64() == Some(0.0) {
            return (0, None);
        }
    }
    let whole = |x: f64| {
        if x.is_finite() && x > 0.0 {
            x as u64
        } else {
            0
        }
    };
    match rendered {
        Value::Number(n) => (0, Some(whole(n.as_f64().unwrap_or(0.0)))),
        Value::String(s) => {
            if let Ok(n) = s.trim().parse::<f64>() {
                return (0, Some(whole(n)));
            }
            match s.split_once('-') {
                Some((a, b)) => match (a.trim().parse::<f64>(), b.trim().parse::<f64>()) {
                    (Ok(a), Ok(b)) => (whole(a), Some(whole(b))),
                    _ => (0, Some(0)),
                },
                None => (0, Some(0)),
            }
        }
        _ => (0, Some(0)),
    }
}

/// A number, or a string holding one.
pub(crate) fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn think_jitter_as_artillery_reads_it() {
        let base = Duration::from_millis(1000);
        for _ in 0..200 {
            let ms = jittered(base, "20%").as_millis();
            assert!((800..=1200).contains(&ms), "{ms}");
            let ms = jittered(base, "300").as_millis();
            assert!((700..=1300).contains(&ms), "{ms}");
            assert!(jittered(Duration::from_millis(100), "500").as_millis() <= 600);
        }
        assert_eq!(think_time(&Value::from("2s")), Some(Duration::from_secs(2)));
        assert_eq!(
            think_time(&Value::from("500ms")),
            Some(Duration::from_secs(500))
        );
        assert_eq!(
            loop_range(&Value::from("9-12"), &Value::from("9-12")),
            (9, Some(12))
        );
        assert_eq!(loop_range(&Value::from(0), &Value::from(0)), (0, None));
        assert_eq!(loop_range(&Value::from(-3), &Value::from(-3)), (0, Some(0)));
    }
}
